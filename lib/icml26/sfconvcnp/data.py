"""Procedural, seeded, batched task generators (spec Sec. 3.8 / 7.2) and the GP oracle.

Every task of a batch has the same number of context points ``N`` and queries ``M`` (drawn per
batch), so a batch is three dense tensors. Random numbers come from an explicit CPU
``torch.Generator``; the Cholesky factorisations run in float64 on ``device``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .method import check_device

__all__ = ["KERNELS", "Task", "gp_kernel", "gp_oracle_loglik", "gp_oracle_predict", "operator_targets",
           "sample_gp_tasks", "sample_operator_tasks", "sample_sawtooth_tasks", "sample_square_wave_tasks"]

KERNELS = ("rbf", "matern12", "matern32", "matern52", "periodic")
#: largest set of joint GP covariances of :func:`sample_gp_tasks` (B (N + M)^2 float64), in bytes
MAX_GP_BYTES = 2 * 1024 ** 3


@dataclass
class Task:
    """A batch of regression tasks: ``xc [B,N,D], yc [B,N,1], xq [B,M,D], yq [B,M,1]``."""

    xc: torch.Tensor
    yc: torch.Tensor
    xq: torch.Tensor
    yq: torch.Tensor
    meta: dict = field(default_factory=dict)

    def to(self, device) -> Task:
        meta = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in self.meta.items()}
        return Task(self.xc.to(device), self.yc.to(device), self.xq.to(device), self.yq.to(device), meta)

    def shifted(self, shift: float) -> Task:
        """The same task with every input moved by ``shift``."""
        return Task(self.xc + shift, self.yc, self.xq + shift, self.yq, dict(self.meta))


def _range(name: str, r, *, positive: bool = False, integer: bool = False) -> tuple:
    if not isinstance(r, (tuple, list)) or len(r) != 2:
        raise TypeError(f"{name} must be a pair (low, high), got {r!r}")
    lo, hi = r
    for v in (lo, hi):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
            raise TypeError(f"{name} must hold {'integers' if integer else 'numbers'}, got {r!r}")
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite, got {r!r}")
    if lo > hi:
        raise ValueError(f"{name}: low must not exceed high, got {r!r}")
    if positive and lo <= 0:
        raise ValueError(f"{name} must be positive, got {r!r}")
    return lo, hi


def _common(batch_size, n_context, n_target, x_range, noise_std, shift, generator):
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    nc = _range("n_context", n_context, integer=True)
    nt = _range("n_target", n_target, integer=True)
    if nc[0] < 1:
        raise ValueError(f"n_context must be at least 1 (a model needs context), got {n_context!r}")
    if nt[0] < 1:
        raise ValueError(f"n_target must be at least 1, got {n_target!r}")
    xr = _range("x_range", x_range)
    if xr[0] == xr[1]:
        raise ValueError(f"x_range must have positive width, got {x_range!r}")
    if isinstance(noise_std, bool) or not isinstance(noise_std, (int, float)) or not math.isfinite(noise_std):
        raise TypeError(f"noise_std must be a finite number, got {noise_std!r}")
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    if isinstance(shift, bool) or not isinstance(shift, (int, float)) or not math.isfinite(shift):
        raise TypeError(f"shift must be a finite number, got {shift!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if batch_size * max(nc[1] + nt[1], 1) > 2 ** 28:
        raise ValueError(f"batch_size={batch_size} with up to {nc[1] + nt[1]} points per task exceeds 2**28 points "
                         "(n_context and n_target bound the per-task points)")
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    n = int(torch.randint(nc[0], nc[1] + 1, (1,), generator=g))
    m = int(torch.randint(nt[0], nt[1] + 1, (1,), generator=g))
    return g, n, m, xr


def _inputs(g, b, n, m, xr, split):
    lo, hi = xr
    if split is None:
        x = lo + (hi - lo) * torch.rand(b, n + m, 1, generator=g, dtype=torch.float64)
    elif split == "extrapolate":
        mid = 0.5 * (lo + hi)
        xc = lo + (mid - lo) * torch.rand(b, n, 1, generator=g, dtype=torch.float64)
        xq = mid + (hi - mid) * torch.rand(b, m, 1, generator=g, dtype=torch.float64)
        x = torch.cat([xc, xq], 1)
    else:
        raise ValueError(f"split must be None or 'extrapolate', got {split!r}")
    return x


def gp_kernel(x1: torch.Tensor, x2: torch.Tensor, kernel: str, lengthscale: torch.Tensor,
              period: torch.Tensor | None = None) -> torch.Tensor:
    """Unit-variance stationary kernels on ``[B, N, 1] x [B, M, 1]`` with per-task ``lengthscale [B]``."""
    d = (x1 - x2.transpose(1, 2)).abs()                                    # [B, N, M]
    ls = lengthscale.to(d.dtype).view(-1, 1, 1)
    if kernel == "rbf":
        return torch.exp(-0.5 * (d / ls) ** 2)
    if kernel == "matern12":
        return torch.exp(-d / ls)
    if kernel == "matern32":
        r = math.sqrt(3) * d / ls
        return (1 + r) * torch.exp(-r)
    if kernel == "matern52":
        r = math.sqrt(5) * d / ls
        return (1 + r + r ** 2 / 3) * torch.exp(-r)
    if kernel == "periodic":
        p = period.to(d.dtype).view(-1, 1, 1)
        # gpytorch's PeriodicKernel, which the official data code uses: the lengthscale divides
        # 2 sin^2 once (not squared, as in the Rasmussen-Williams form exp(-2 sin^2(.) / l^2)).
        return torch.exp(-2 * torch.sin(math.pi * d / p) ** 2 / ls)
    raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")


def sample_gp_tasks(batch_size: int, kernel: str = "rbf", n_context=(5, 50), n_target=(5, 50),
                    x_range=(-3.0, 3.0), lengthscale_range=(0.25, 1.0), period_range=(0.5, 2.0),
                    noise_std: float = 0.1, shift: float = 0.0, split: str | None = None,
                    generator: torch.Generator | None = None, device="cpu") -> Task:
    """GP tasks (spec Sec. 3.8): ``x ~ U(x_range) + shift``, lengthscale ``10^U(log10 range)``,
    period likewise, unit output scale, Gaussian noise ``noise_std``; ``y`` drawn jointly at the
    context and query inputs by a batched float64 Cholesky (jitter 1e-6).
    ``split='extrapolate'`` puts the context in the left half of the window, queries in the right."""
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    check_device(device)
    g, n, m, xr = _common(batch_size, n_context, n_target, x_range, noise_std, shift, generator)
    if 8 * batch_size * (n + m) ** 2 > MAX_GP_BYTES:
        raise ValueError(f"batch_size={batch_size} tasks of {n + m} points need {8 * batch_size * (n + m) ** 2 / 2 ** 30:.1f} "
                         f"GiB of float64 covariances, over MAX_GP_BYTES = {MAX_GP_BYTES / 2 ** 30:.0f} GiB; "
                         "use fewer tasks or smaller n_context / n_target")
    lr = _range("lengthscale_range", lengthscale_range, positive=True)
    pr = _range("period_range", period_range, positive=True)
    b = batch_size
    x = _inputs(g, b, n, m, xr, split)
    u = torch.rand(b, 2, generator=g, dtype=torch.float64)
    ls = 10 ** (math.log10(lr[0]) + (math.log10(lr[1]) - math.log10(lr[0])) * u[:, 0])
    per = 10 ** (math.log10(pr[0]) + (math.log10(pr[1]) - math.log10(pr[0])) * u[:, 1])
    eps = torch.randn(b, n + m, 1, generator=g, dtype=torch.float64)
    x, eps, ls_d, per_d = (t.to(device) for t in (x, eps, ls, per))
    cov = gp_kernel(x, x, kernel, ls_d, per_d) + (noise_std ** 2 + 1e-6) * torch.eye(n + m, dtype=x.dtype,
                                                                                     device=x.device)
    y = torch.linalg.cholesky(cov) @ eps
    x = x + shift
    f32 = torch.float32
    meta = dict(kernel=kernel, lengthscale=ls_d, period=per_d, noise_std=float(noise_std))
    return Task(x[:, :n].to(f32), y[:, :n].to(f32), x[:, n:].to(f32), y[:, n:].to(f32), meta)


def _periodic_tasks(wave, batch_size, freq_range, n_context, n_target, x_range, noise_std, shift, split,
                    generator, device) -> Task:
    check_device(device)
    g, n, m, xr = _common(batch_size, n_context, n_target, x_range, noise_std, shift, generator)
    fr = _range("freq_range", freq_range, positive=True)
    b = batch_size
    x = _inputs(g, b, n, m, xr, split)
    u = torch.rand(b, 4, generator=g, dtype=torch.float64)
    f = (fr[0] + (fr[1] - fr[0]) * u[:, 0]).view(b, 1, 1)
    off = (u[:, 1].view(b, 1, 1)) / f
    eps = torch.randn(b, n + m, 1, generator=g, dtype=torch.float64)
    if wave == "sawtooth":
        sign = torch.where(u[:, 2] < 0.5, -1.0, 1.0).to(torch.float64).view(b, 1, 1)
        y = 2 * torch.frac(f * (sign * x - off)).remainder(1.0) - 1
    else:
        duty = (0.25 + 0.5 * u[:, 3]).view(b, 1, 1)
        y = 2 * (torch.remainder(f * (x - off), 1.0) < duty).to(torch.float64) - 1
    y = y + noise_std * eps
    x = x + shift
    f32 = torch.float32
    x, y = x.to(device=device, dtype=f32), y.to(device=device, dtype=f32)
    return Task(x[:, :n], y[:, :n], x[:, n:], y[:, n:], dict(kernel=wave, freq=f.view(-1)))


def sample_sawtooth_tasks(batch_size: int, freq_range=(0.5, 5.0), n_context=(5, 50), n_target=(5, 50),
                          x_range=(-3.0, 3.0), noise_std: float = 0.05, shift: float = 0.0,
                          split: str | None = None, generator: torch.Generator | None = None,
                          device="cpu") -> Task:
    """Sawtooth tasks (Sec. 3.8): ``y = 2 frac(f (s x - o)) - 1 + noise``, ``f ~ U(freq_range)``,
    direction ``s = +-1``, offset ``o = U(0,1)/f``."""
    return _periodic_tasks("sawtooth", batch_size, freq_range, n_context, n_target, x_range, noise_std, shift,
                           split, generator, device)


def sample_square_wave_tasks(batch_size: int, freq_range=(0.5, 5.0), n_context=(5, 50), n_target=(5, 50),
                             x_range=(-3.0, 3.0), noise_std: float = 0.05, shift: float = 0.0,
                             split: str | None = None, generator: torch.Generator | None = None,
                             device="cpu") -> Task:
    """Square-wave tasks (Sec. 3.8): ``y = 2 * 1[frac(f (x - o)) < duty] - 1 + noise``, duty ``U(0.25, 0.75)``."""
    return _periodic_tasks("square", batch_size, freq_range, n_context, n_target, x_range, noise_std, shift,
                           split, generator, device)


# -- GP oracle -----------------------------------------------------------------------------------------

def gp_oracle_predict(task: Task, kernel: str | None = None):
    """Exact GP posterior predictive ``(mean, var)`` of ``y`` at the queries, ``[B, M, 1]`` each,
    with the task's true hyper-parameters (variance includes the observation noise)."""
    if not isinstance(task, Task):
        raise TypeError(f"task must be a Task, got {type(task).__name__}")
    kernel = task.meta.get("kernel") if kernel is None else kernel
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS} (the task's GP kernel), got {kernel!r}")
    if "lengthscale" not in task.meta:
        raise ValueError("task: meta has no GP hyper-parameters (lengthscale, period, noise_std)")
    ls, per, s2 = task.meta["lengthscale"], task.meta.get("period"), task.meta["noise_std"] ** 2
    xc, xq, yc = task.xc.double(), task.xq.double(), task.yc.double()
    n = xc.shape[1]
    kcc = gp_kernel(xc, xc, kernel, ls, per) + (s2 + 1e-6) * torch.eye(n, dtype=xc.dtype, device=xc.device)
    kqc = gp_kernel(xq, xc, kernel, ls, per)
    chol = torch.linalg.cholesky(kcc)
    alpha = torch.cholesky_solve(yc, chol)
    mean = kqc @ alpha
    v = torch.linalg.solve_triangular(chol, kqc.transpose(1, 2), upper=False)
    var = 1.0 + s2 + 1e-6 - (v ** 2).sum(1).unsqueeze(-1)
    return mean, var.clamp_min(1e-12)


def gp_oracle_loglik(task: Task, kernel: str | None = None) -> torch.Tensor:
    """Per-task mean predictive log-likelihood of the queries under the true GP, ``[B]`` (float64)."""
    mean, var = gp_oracle_predict(task, kernel)
    yq = task.yq.double()
    ll = -0.5 * (math.log(2 * math.pi) + var.log() + (yq - mean) ** 2 / var)
    return ll.mean((1, 2))


# -- operator-identification toy (spec Sec. 7.1 NB3) ---------------------------------------------------

def _gauss(u, centre, width):
    return torch.exp(-0.5 * ((u - centre) / width) ** 2)


def operator_targets(xc: torch.Tensor, yc: torch.Tensor, xq: torch.Tensor) -> torch.Tensor:
    """``T(x) = sum_n y_n k1(x-x_n) + (sum_n y_n ka(x-x_n)) (sum_n y_n kb(x-x_n))`` with
    ``k1 = N(0, 0.3^2)``, ``ka = N(0.5, 0.2^2)``, ``kb = N(0, 0.4^2)`` bumps (unnormalised)."""
    u = xq - xc.transpose(1, 2)                                            # [B, M, N]
    y = yc[..., 0].unsqueeze(1)                                            # [B, 1, N]
    lin = (_gauss(u, 0.0, 0.3) * y).sum(-1)
    qa = (_gauss(u, 0.5, 0.2) * y).sum(-1)
    qb = (_gauss(u, 0.0, 0.4) * y).sum(-1)
    return (lin + qa * qb).unsqueeze(-1)


def sample_operator_tasks(batch_size: int, n_context: int = 64, n_target: int = 64,
                          generator: torch.Generator | None = None, device="cpu") -> Task:
    """Operator toy: ``x_n ~ U[-3,3]``, ``y_n ~ N(0,1)``, queries ``U[-2,2]``, targets ``T(x_q)`` exactly."""
    for name, v in (("batch_size", batch_size), ("n_context", n_context), ("n_target", n_target)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    check_device(device)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    xc = -3 + 6 * torch.rand(batch_size, n_context, 1, generator=g)
    yc = torch.randn(batch_size, n_context, 1, generator=g)
    xq = -2 + 4 * torch.rand(batch_size, n_target, 1, generator=g)
    xc, yc, xq = xc.to(device), yc.to(device), xq.to(device)
    return Task(xc, yc, xq, operator_targets(xc, yc, xq), dict(kernel="operator"))
