r"""The theory in numbers: a backward-transfer (BKT) bound and the :math:`\sqrt{E/(NT)}` rate.

The paper's abstract announces (i) a BKT bound: the increase of an earlier task's loss while a
later task is trained is controlled by the model's drift, and (ii) a task-uniform non-convex rate
:math:`\mathcal O(\sqrt{E/(NT)})` for the expected gradient norm. The exact statements are not
public; this module checks the book's teaching versions (spec section 4).

**BKT (eq. B1).** If :math:`F_j` is :math:`L_j`-smooth and :math:`D=w_{\rm end}-w_{\rm start}` is the
displacement during task :math:`k>j`, then

.. math:: F_j(w_{\rm end})-F_j(w_{\rm start})\le\langle\nabla F_j(w_{\rm start}),D\rangle+\tfrac{L_j}2\|D\|^2
          \le\|\nabla F_j(w_{\rm start})\|\|D\|+\tfrac{L_j}2\|D\|^2 .

With the round anchor, :math:`D=\frac1{1+\lambda}\sum_t\Delta^t`: a larger :math:`\lambda` shrinks the
drift and with it the bound. On least squares :math:`F_j(w)=\frac1{2n}\|X_jw-y_j\|^2` the constant
:math:`L_j=\lambda_{\max}(X_j^\top X_j)/n` is exact.

**Rate (eq. R1).** On the smooth toy problem
:math:`f_i(w)=\frac12(w-c_i)^\top A(w-c_i)+\gamma\sum_d\frac{w_d^2}{1+w_d^2}` (non-convex for
:math:`\gamma>1`) with noisy gradients and the effective server step
:math:`\eta_g\eta_lE=c_0\sqrt{NE}/(L\sqrt T)`, the book *tests* whether the average squared
gradient norm :math:`G=\frac1T\sum_t\|\nabla F(w^t)\|^2` scales like :math:`\sqrt{E/(NT)}`. With
:math:`\eta_l` scaled by :math:`1+\lambda` this is FedAvg with two-sided learning rates on one task:
it says nothing specific about the anchor or about task-uniformity.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..core import one_thread
from .method import check_lam, server_proximal_step, special_server_step


def make_quadratic_tasks(n_tasks: int = 3, dim: int = 10, n: int = 200, shift: float = 1.0,
                         seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Least-squares tasks (X_j, y_j) with domain-shifted covariances and optima.

    Task j draws inputs with covariance :math:`Q_j\\,\\mathrm{diag}(s)\\,Q_j^\\top` (a random rotation
    :math:`Q_j` per task, spectrum ``s`` from 0.2 to 2) and targets from the optimum
    :math:`w^\\star_j=w_0+\\text{shift}\\cdot u_j`, :math:`u_j\\sim\\mathcal N(0,I)`, plus noise 0.1.
    """
    for name, v in (("n_tasks", n_tasks), ("dim", dim), ("n", n)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if not (math.isfinite(shift) and shift >= 0):
        raise ValueError(f"shift must be a finite number >= 0, got {shift}")
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(dim)
    spec = np.linspace(0.2, 2.0, dim)
    tasks = []
    for _ in range(n_tasks):
        Q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
        X = rng.standard_normal((n, dim)) * np.sqrt(spec) @ Q.T  # (n, dim), cov Q diag(s) Q^T
        w_star = w0 + shift * rng.standard_normal(dim)
        y = X @ w_star + 0.1 * rng.standard_normal(n)
        tasks.append((X, y))
    return tasks


def quad_loss(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    """F(w) = ||Xw - y||^2 / (2n)."""
    r = X @ w - y
    return float(r @ r / (2 * len(y)))


def quad_grad(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return X.T @ (X @ w - y) / len(y)


def quad_smoothness(X: np.ndarray) -> float:
    """Exact L = lambda_max(X^T X) / n."""
    return float(np.linalg.eigvalsh(X.T @ X / len(X)).max())


def bkt_bound(grad_start: np.ndarray, displacement: np.ndarray, L: float) -> float:
    """Eq. (B1), right-hand side: ||g|| ||D|| + L/2 ||D||^2."""
    g, D = np.asarray(grad_start, float), np.asarray(displacement, float)
    if g.shape != D.shape:
        raise ValueError(f"displacement must have the shape of grad_start {g.shape}, got {D.shape}")
    if not (math.isfinite(L) and L >= 0):
        raise ValueError(f"L must be a finite number >= 0, got {L}")
    nD = float(np.linalg.norm(D))
    return float(np.linalg.norm(g)) * nD + 0.5 * L * nD**2


def run_quadratic_fdil(tasks, lam: float, anchor: str = "round", n_clients: int = 10,
                       clients_per_round: int = 5, rounds: int = 50, local_steps: int = 5,
                       lr: float = 0.05, noise: float = 0.0, seed: int = 0) -> dict:
    """FDIL on least-squares tasks with SPECIAL's server step (eqs. S1-S2).

    Each task's rows are sorted by their first coordinate and cut into ``n_clients`` blocks
    (heterogeneous clients); sampled clients take ``local_steps`` full-batch gradient steps
    (plus Gaussian gradient noise of scale ``noise``). Returns the loss matrix
    ``loss[k, j] = F_j`` after task k, and one record per pair j < k with the true increase of
    F_j during task k, the bound of eq. (B1) and its tighter inner-product form.
    """
    check_lam(lam)
    if anchor not in ("round", "task"):
        raise ValueError(f"anchor must be 'round' or 'task', got {anchor!r}")
    if not tasks:
        raise ValueError("tasks must be a non-empty list of (X, y)")
    if not 1 <= clients_per_round <= n_clients:
        raise ValueError(f"clients_per_round must lie in 1..n_clients={n_clients}, got {clients_per_round}")
    for name, v in (("rounds", rounds), ("local_steps", local_steps)):
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    rng = np.random.default_rng(seed)
    K, dim = len(tasks), tasks[0][0].shape[1]
    clients = []  # clients[k] = list of (X_c, y_c)
    for X, y in tasks:
        order = np.argsort(X[:, 0])
        clients.append([(X[b], y[b]) for b in np.array_split(order, n_clients)])
    L = [quad_smoothness(X) for X, _ in tasks]
    w = torch.zeros(dim, dtype=torch.float64)
    w_task = w.clone()
    loss = np.zeros((K, K))
    starts, records, disp = [], [], []
    for k in range(K):
        w_start = w.numpy().copy()
        starts.append(w_start)
        for _ in range(rounds):
            S = rng.choice(n_clients, clients_per_round, replace=False)
            local = []
            for i in S:
                Xi, yi = clients[k][i]
                wi = w.numpy().copy()
                for _ in range(local_steps):
                    wi -= lr * (quad_grad(Xi, yi, wi) + noise * rng.standard_normal(dim))
                local.append(wi)
            a = w if anchor == "round" else w_task
            w = special_server_step(w, torch.from_numpy(np.stack(local)), a, lam)
        w_end = w.numpy().copy()
        w_task = w.clone()
        D = w_end - w_start
        disp.append(float(np.linalg.norm(D)))
        for j in range(K):
            loss[k, j] = quad_loss(*tasks[j], w_end)
        for j in range(k):
            g = quad_grad(*tasks[j], w_start)
            records.append({
                "task": k, "old_task": j, "lam": float(lam),
                "increase": quad_loss(*tasks[j], w_end) - quad_loss(*tasks[j], w_start),
                "bound_tight": float(g @ D) + 0.5 * L[j] * float(D @ D),
                "bound": bkt_bound(g, D, L[j]),
                "disp": float(np.linalg.norm(D)), "grad_norm": float(np.linalg.norm(g)),
            })
    return {"loss": loss, "records": records, "displacement": np.array(disp), "L": np.array(L)}


def toy_curvature(w, gamma_nc: float = 2.0, dim: int = 10) -> np.ndarray:
    r"""Diagonal of the Hessian of the rate toy's objective F at points ``w`` (..., dim).

    :math:`\partial_d^2F=A_d+\gamma\,\phi''(w_d)` with :math:`\phi(u)=u^2/(1+u^2)`,
    :math:`\phi''(u)=(2-6u^2)/(1+u^2)^3\in[-\tfrac12,2]`. The Hessian is diagonal, so F is convex iff
    every entry is >= 0 everywhere: the smallest is :math:`\min_dA_d-\gamma/2=\tfrac12-\gamma/2`,
    negative for :math:`\gamma>1` (the spec's :math:`\gamma=1` gives a convex toy).
    """
    w = np.asarray(w, float)
    A = np.linspace(0.5, 2.0, dim)
    return A + gamma_nc * (2 - 6 * w**2) / (1 + w**2) ** 3


def _toy_stationary(c_bar: torch.Tensor, A: torch.Tensor, gamma_nc: float, L: float, steps: int = 20000):
    """A stationary point of F per seed: deterministic gradient descent from 0 with step 1/L."""
    w = torch.zeros_like(c_bar)
    for _ in range(steps):
        g = A * (w - c_bar) + gamma_nc * 2 * w / (1 + w**2) ** 2
        w = w - g / L
        if float(g.abs().max()) < 1e-13:
            break
    return w


def convergence_experiment(T_values, N_values, E_values, seeds: int = 4, sigma: float = 1.0,
                           c0: float = 0.5, lam: float = 0.0, dim: int = 10, n_clients: int = 64,
                           gamma_nc: float = 2.0, seed: int = 0, start: str = "zero", burn_in: int = 0,
                           progress: bool = True):
    r"""Average squared gradient norm G(T, N, E) on the non-convex toy problem (eq. R1).

    :math:`f_i(w)=\frac12(w-c_i)^\top A(w-c_i)+\gamma\sum_d\frac{w_d^2}{1+w_d^2}` with client optima
    :math:`c_i\sim\mathcal N(0,3^2I)`, :math:`A=\mathrm{diag}(\mathrm{linspace}(0.5,2,d))`,
    :math:`L=2+2\gamma`, gradient noise :math:`\sigma`, local step
    :math:`\eta_l=c_0(1+\lambda)\sqrt{N/E}/(L\sqrt T)` and SPECIAL's server step with the round
    anchor (:math:`\eta_g=1/(1+\lambda)`). For :math:`\gamma>1` the toy is non-convex
    (:func:`toy_curvature`). ``start="zero"`` starts at :math:`w^0=0`, ``"stationary"`` at a
    stationary point of F; ``burn_in`` rounds at the same step run before G is averaged (noise-floor
    control). Seeds run as a leading batch dimension. Returns a DataFrame with one row per
    (T, N, E): ``G`` (mean over seeds), ``G_se`` (standard error), ``rate = sqrt(E/(N T))`` and
    ``etaEL`` :math:`=\eta_lEL`, the quantity a local-step condition bounds.
    """
    import pandas as pd
    from tqdm.auto import tqdm

    check_lam(lam)
    T_values, N_values, E_values = list(T_values), list(N_values), list(E_values)
    if not (T_values and N_values and E_values):
        raise ValueError("T_values, N_values and E_values must be non-empty")
    if any(int(v) < 1 for v in T_values + E_values) or any(not 1 <= int(v) <= n_clients for v in N_values):
        raise ValueError(f"T and E must be >= 1 and N in 1..n_clients={n_clients}")
    if seeds < 1 or not (math.isfinite(sigma) and sigma >= 0) or not c0 > 0:
        raise ValueError("seeds must be >= 1, sigma >= 0 and c0 > 0")
    if not (math.isfinite(gamma_nc) and gamma_nc >= 0):
        raise ValueError(f"gamma_nc must be a finite number >= 0, got {gamma_nc}")
    if start not in ("zero", "stationary"):
        raise ValueError(f"start must be 'zero' or 'stationary', got {start!r}")
    if isinstance(burn_in, bool) or not isinstance(burn_in, int) or burn_in < 0:
        raise ValueError(f"burn_in must be an int >= 0, got {burn_in!r}")
    g = torch.Generator().manual_seed(seed)
    A = torch.linspace(0.5, 2.0, dim, dtype=torch.float64)  # diagonal of the quadratic
    L = 2.0 + 2.0 * gamma_nc
    c = 3.0 * torch.randn(seeds, n_clients, dim, generator=g, dtype=torch.float64)  # (S, M, d)
    c_bar = c.mean(1)  # (S, d) optimum of the quadratic part of F
    w_start = _toy_stationary(c_bar, A, gamma_nc, L) if start == "stationary" else torch.zeros_like(c_bar)

    rows = []
    cells = [(T, N, E) for T in T_values for N in N_values for E in E_values]
    with one_thread():  # (seeds, N, 10) tensors: one CPU thread is fastest
        for T, N, E in tqdm(cells, leave=False, disable=not progress, desc="rate grid"):
            rows.append(_rate_cell(T, N, E, c, c_bar, w_start, A, L, c0, lam, sigma, gamma_nc, burn_in, g))
    return pd.DataFrame(rows)


def _rate_cell(T, N, E, c, c_bar, w_start, A, L, c0, lam, sigma, gamma_nc, burn_in, g) -> dict:
    """One (T, N, E) cell of :func:`convergence_experiment`, all seeds at once."""
    seeds, n_clients, dim = c.shape

    def grad(w, ci):  # gradient of f_i (or of F with ci = c_bar)
        return A * (w - ci) + gamma_nc * 2 * w / (1 + w**2) ** 2

    eta_l = c0 * (1 + lam) * math.sqrt(N / E) / (L * math.sqrt(T))
    w = w_start.clone()
    G = torch.zeros(seeds, dtype=torch.float64)
    for r in range(burn_in + T):
        if r >= burn_in:
            G += grad(w, c_bar).pow(2).sum(-1) / T
        S = torch.rand(seeds, n_clients, generator=g).argsort(1)[:, :N]  # (S, N) uniform w/o repl.
        ci = torch.gather(c, 1, S[..., None].expand(-1, -1, dim))  # (S, N, d)
        wi = w[:, None].expand(-1, N, -1).clone()  # (S, N, d)
        for _ in range(E):
            noise = sigma * torch.randn(wi.shape, generator=g, dtype=torch.float64)
            wi = wi - eta_l * (grad(wi, ci) + noise)
        w_bar = w + (wi - w[:, None]).mean(1)  # eq. (S1)
        w = server_proximal_step(w_bar, w, lam)  # eq. (S2), round anchor
    return {"T": T, "N": N, "E": E, "G": G.mean().item(),
            "G_se": (G.std().item() / math.sqrt(seeds)) if seeds > 1 else 0.0,
            "rate": math.sqrt(E / (N * T)), "etaEL": eta_l * E * L}


def bkt_sweep(param: str, values, lam: float = 0.0, seeds: int = 5, noise: float = 0.5, **fixed):
    """Task 1's true loss increase during task 2 and the BKT bound (eq. B1) as ``param`` varies.

    ``param`` is one of ``rounds``, ``local_steps``, ``clients_per_round`` of
    :func:`run_quadratic_fdil`; mean over ``seeds`` task draws.
    """
    import pandas as pd

    if param not in ("rounds", "local_steps", "clients_per_round"):
        raise ValueError(f"param must be rounds, local_steps or clients_per_round, got {param!r}")
    rows = []
    for v in values:
        for s in range(seeds):
            tasks = make_quadratic_tasks(n_tasks=2, seed=s)
            out = run_quadratic_fdil(tasks, lam, noise=noise, seed=s, **{**fixed, param: int(v)})
            r = out["records"][0]  # old task 1 during task 2
            rows.append({param: int(v), "seed": s, "increase": r["increase"], "bound": r["bound"],
                         "disp": r["disp"], "grad_norm": r["grad_norm"]})
    return pd.DataFrame(rows).groupby(param)[["increase", "bound", "disp", "grad_norm"]].mean()


def fit_slopes(df) -> dict[tuple[int, int], float]:
    """Least-squares slope of log G against log T for every (N, E) cell."""
    out = {}
    for (N, E), sub in df.groupby(["N", "E"]):
        out[(int(N), int(E))] = float(np.polyfit(np.log(sub["T"]), np.log(sub["G"]), 1)[0])
    return out
