"""Metrics: solver fidelity, distribution distances, a digits evaluator and an honest cost table.

* endpoint error  ``mean_b || x_b - x_ref,b ||`` against the reference ODE solution from the same noise;
* sliced Wasserstein-2  ``SW2^2 = E_theta W2^2(theta^T X, theta^T Y)`` via sorted projections;
* energy distance  ``2 E|X-Y| - E|X-X'| - E|Y-Y'|``;
* Frechet distance  ``|mu_x - mu_y|^2 + tr(C_x + C_y - 2 (C_x^{1/2} C_y C_x^{1/2})^{1/2})``
  computed with symmetric eigendecompositions (no complex ``sqrtm``);
* cost: backbone-equivalent NFE ``= N_backbone + N_side_evals * FLOPs_side / FLOPs_backbone``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from icml26.core import count_flops


def _check_sets(x, y, names=("x", "y")) -> None:
    for n, z in zip(names, (x, y)):
        if not isinstance(z, torch.Tensor):
            raise TypeError(f"{n} must be a torch.Tensor, got {type(z).__name__}")
        if z.ndim != 2 or z.shape[0] == 0:
            raise ValueError(f"{n} must be a non-empty (n, d) tensor, got shape {tuple(z.shape)}")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"{names[0]} and {names[1]} must have the same feature dimension, "
                         f"got {x.shape[1]} and {y.shape[1]}")


def endpoint_error(x: torch.Tensor, x_ref: torch.Tensor) -> float:
    """Mean Euclidean distance between paired samples (same noise) ``(B, *S)``."""
    if not isinstance(x, torch.Tensor) or not isinstance(x_ref, torch.Tensor):
        raise TypeError("x and x_ref must be torch.Tensors")
    if x.shape != x_ref.shape or x.numel() == 0:
        raise ValueError(f"x and x_ref must be non-empty with equal shapes, got {tuple(x.shape)} and {tuple(x_ref.shape)}")
    diff = (x.double() - x_ref.double()).reshape(x.shape[0], -1)
    return float(diff.norm(dim=1).mean())


def _quantiles(z: torch.Tensor, n: int) -> torch.Tensor:
    """Sorted columns of ``z (m, P)`` resampled at ``n`` equally spaced quantile levels."""
    zs = torch.sort(z, dim=0).values
    if zs.shape[0] == n:
        return zs
    q = (torch.arange(n, dtype=z.dtype, device=z.device) + 0.5) / n
    return torch.quantile(zs, q, dim=0)


def sliced_wasserstein(x: torch.Tensor, y: torch.Tensor, n_proj: int = 256,
                       generator: torch.Generator | None = None) -> float:
    """Sliced Wasserstein-2 distance (square root of the mean squared 1-D W2 over random directions)."""
    _check_sets(x, y)
    if isinstance(n_proj, bool) or not isinstance(n_proj, int) or n_proj < 1:
        raise ValueError(f"n_proj must be an int >= 1, got {n_proj!r}")
    x, y = x.double(), y.to(x.device).double()
    theta = torch.randn(x.shape[1], n_proj, generator=generator, dtype=torch.float64).to(x.device)
    theta = theta / theta.norm(dim=0, keepdim=True)                                 # (d, P) unit directions
    n = max(x.shape[0], y.shape[0])
    px, py = _quantiles(x @ theta, n), _quantiles(y @ theta, n)                     # (n, P)
    return float(((px - py) ** 2).mean().sqrt())


def energy_distance(x: torch.Tensor, y: torch.Tensor, max_n: int = 4000) -> float:
    """Energy distance (V-statistic) on at most ``max_n`` points per set, chunked pairwise distances."""
    _check_sets(x, y)
    if isinstance(max_n, bool) or not isinstance(max_n, int) or max_n < 1:
        raise ValueError(f"max_n must be an int >= 1, got {max_n!r}")
    x, y = x[:max_n].double(), y[:max_n].to(x.device).double()
    for n, z in (("x", x), ("y", y)):
        if not bool(torch.isfinite(z).all()):
            raise ValueError(f"{n} must hold finite values (no NaN or inf)")

    def mean_dist(a, b):
        return sum(float(torch.cdist(a[i:i + 1024], b).sum()) for i in range(0, a.shape[0], 1024)) / (
            a.shape[0] * b.shape[0])

    return 2 * mean_dist(x, y) - mean_dist(x, x) - mean_dist(y, y)


def _sqrtm_psd(c: torch.Tensor) -> torch.Tensor:
    w, q = torch.linalg.eigh(c)
    return (q * w.clamp_min(0).sqrt()) @ q.T


def frechet_distance(fx: torch.Tensor, fy: torch.Tensor) -> float:
    """Frechet distance between Gaussian fits of two feature sets ``(n, d)``."""
    _check_sets(fx, fy, ("fx", "fy"))
    d = fx.shape[1]
    for n, f in (("fx", fx), ("fy", fy)):
        if f.shape[0] < d + 1:
            raise ValueError(f"{n} needs at least d + 1 = {d + 1} samples for a covariance, got {f.shape[0]}")
    fx, fy = fx.double(), fy.to(fx.device).double()
    mx, my = fx.mean(0), fy.mean(0)
    cx, cy = torch.cov(fx.T).reshape(d, d), torch.cov(fy.T).reshape(d, d)
    sx = _sqrtm_psd(cx)
    cross = _sqrtm_psd(sx @ cy @ sx)                                                 # (C_x^1/2 C_y C_x^1/2)^1/2
    return float(((mx - my) ** 2).sum() + torch.trace(cx + cy - 2 * cross))


def _one_blas_thread():
    """The judge's numpy/scipy BLAS and OpenMP on one thread: ``one_thread`` pins torch only, and the
    classifier's fit rounds differently with two BLAS threads (a smoke accuracy moved by 0.004 between a
    one-thread run and a two-thread re-run), so the same run would not print the same numbers."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


class DigitsEvaluator:
    """FD in a PCA feature space fitted on real digits ("FD-PCA16") and label accuracy of a
    logistic-regression classifier trained on the real digits."""

    def __init__(self, real_x: torch.Tensor, real_y: torch.Tensor, n_pca: int = 16, seed: int = 0):
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import train_test_split

        if not isinstance(real_x, torch.Tensor) or real_x.ndim != 2 or real_x.shape[0] == 0:
            raise ValueError(f"real_x must be a non-empty (n, d) tensor, got {getattr(real_x, 'shape', None)}")
        if isinstance(n_pca, bool) or not isinstance(n_pca, int) or not 1 <= n_pca <= real_x.shape[1]:
            raise ValueError(f"n_pca must be an int in 1..{real_x.shape[1]}, got {n_pca!r}")
        self.real = real_x.double()
        self.mean = self.real.mean(0)
        _, _, vt = torch.linalg.svd(self.real - self.mean, full_matrices=False)
        self.components = vt[:n_pca].T                                               # (d, n_pca)
        xn, yn = real_x.numpy(), real_y.numpy()
        xtr, xte, ytr, yte = train_test_split(xn, yn, test_size=0.3, random_state=seed, stratify=yn)
        with _one_blas_thread():
            self.clf = LogisticRegression(max_iter=1000).fit(xtr, ytr)               # fitted on 70 % of the real digits
            self.held_out_accuracy = float(self.clf.score(xte, yte))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return (x.double().cpu() - self.mean) @ self.components

    def fd(self, samples: torch.Tensor) -> float:
        return frechet_distance(self.features(samples), self.features(self.real))

    def accuracy(self, samples: torch.Tensor, labels: torch.Tensor) -> float:
        if samples.shape[0] != labels.shape[0]:
            raise ValueError(f"samples and labels must have the same length, got {samples.shape[0]} and {labels.shape[0]}")
        with _one_blas_thread():
            pred = self.clf.predict(samples.detach().cpu().float().numpy())
        return float((torch.as_tensor(pred) == labels.cpu()).double().mean())


def _flops_per_sample(fn: Callable[[int], object], n: int = 64) -> float:
    return count_flops(lambda: fn(n)) / n


def cost_table(backbone: torch.nn.Module, sidenet: torch.nn.Module, nfe: int, side_evals: float,
               dim: int, n_classes: int | None = None) -> dict:
    """Parameter and FLOP ratios of SideNet to backbone and the backbone-equivalent NFE.

    ``side_evals`` is the number of SideNet evaluations per sample (e.g. ``4 nfe - 1`` for bi-anchor).
    """
    dev = next(backbone.parameters()).device

    def y_of(n):
        return None if n_classes is None else torch.zeros(n, dtype=torch.long, device=dev)

    def run_backbone(n):
        with torch.no_grad():
            return backbone(torch.zeros(n, dim, device=dev), torch.full((n,), 0.5, device=dev), y_of(n))

    def run_side(n):
        with torch.no_grad():
            z = torch.zeros(n, dim, device=dev)
            return sidenet(z, z, torch.full((n,), 0.5, device=dev), torch.full((n,), 0.1, device=dev), y_of(n))

    p_back = sum(p.numel() for p in backbone.parameters())
    p_side = sum(p.numel() for p in sidenet.parameters())
    f_back, f_side = _flops_per_sample(run_backbone), _flops_per_sample(run_side)
    ratio = f_side / f_back
    return {"backbone_params": p_back, "sidenet_params": p_side, "param_ratio": p_side / p_back,
            "backbone_flops": f_back, "sidenet_flops": f_side, "flop_ratio": ratio,
            "backbone_nfe": nfe, "side_evals": side_evals, "equiv_nfe": nfe + side_evals * ratio}
