"""Baselines of the paper's Table 1 that the book can run on a CPU (spec Sec. 3.10): CORR, INVCOV,
NOTEARS-linear (re-implemented, numpy/scipy) and the PC algorithm from causal-learn."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.optimize as sopt

from .data import precision_prior


def _x2d(x, name="x") -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric [m, n] array, got {type(x).__name__}") from exc
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 2:
        raise ValueError(f"{name} must be a 2-D [m, n] array with m, n >= 2, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def corr_scores(x) -> np.ndarray:
    """CORR: ``|corr(x_i, x_j)|`` for both directions (undirected), zero diagonal."""
    s = np.abs(np.nan_to_num(np.corrcoef(_x2d(x), rowvar=False)))
    s = 0.5 * (s + s.T)          # exactly symmetric: round-off must not orient edges
    np.fill_diagonal(s, 0.0)
    return s


def invcov_scores(x_raw, method: str = "auto", symmetrize: bool = True) -> np.ndarray:
    """INVCOV: ``|Theta_ij|`` of the estimated precision matrix (the CauScale prior), zero diagonal.

    ``symmetrize=True`` (the book) averages the matrix with its transpose, so the score is exactly
    symmetric and every pair is a tie: tie-honest, it cannot orient (OA 0.5, AP at most about 0.5 per
    edge pair). ``False`` keeps the round-off asymmetry of ``pinv`` (about 1e-16 relative) as the
    official score does; it then breaks the ties at random, which orients nothing but raises the
    average precision a little (the step-wise AP of a tie group is below its random-order mean)."""
    if not isinstance(symmetrize, bool):
        raise TypeError(f"symmetrize must be a bool, got {type(symmetrize).__name__}")
    s = np.abs(precision_prior(_x2d(x_raw, "x_raw"), method=method))
    if symmetrize:
        s = 0.5 * (s + s.T)      # exactly symmetric: round-off must not orient edges
    np.fill_diagonal(s, 0.0)
    return s


def notears_linear(x, lambda1: float = 0.1, w_threshold: float = 0.3, max_iter: int = 100, h_tol: float = 1e-8,
                   rho_max: float = 1e16) -> np.ndarray:
    """NOTEARS (Zheng et al., 2018), linear least squares:
    ``min_W 1/(2m) ||X - X W||^2 + lambda1 ||W||_1  s.t.  h(W) = tr(exp(W o W)) - n = 0``,
    augmented Lagrangian with L-BFGS-B on ``W = W+ - W-``. Returns the thresholded weighted adjacency."""
    x = _x2d(x)
    for name, val in (("lambda1", lambda1), ("w_threshold", w_threshold)):
        if not np.isfinite(val) or val < 0:
            raise ValueError(f"{name} must be finite and >= 0, got {val!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
    m, d = x.shape
    x = x - x.mean(0)

    def _adj(w):
        return (w[: d * d] - w[d * d:]).reshape(d, d)

    def _func(w):
        W = _adj(w)
        r = x - x @ W
        loss = 0.5 / m * (r ** 2).sum()
        g_loss = -1.0 / m * x.T @ r
        E = sla.expm(W * W)
        h = np.trace(E) - d
        g_h = E.T * W * 2
        obj = loss + 0.5 * rho * h * h + alpha * h + lambda1 * w.sum()
        g = g_loss + (rho * h + alpha) * g_h
        return obj, np.concatenate((g + lambda1, -g + lambda1), axis=None)

    w_est, rho, alpha, h = np.zeros(2 * d * d), 1.0, 0.0, np.inf
    bnds = [(0, 0) if i == j else (0, None) for _ in range(2) for i in range(d) for j in range(d)]
    for _ in range(max_iter):
        w_new, h_new = None, None
        while rho < rho_max:
            sol = sopt.minimize(_func, w_est, method="L-BFGS-B", jac=True, bounds=bnds)
            w_new = sol.x
            h_new = np.trace(sla.expm(_adj(w_new) ** 2)) - d
            if h_new > 0.25 * h:
                rho *= 10
            else:
                break
        w_est, h = w_new, h_new
        alpha += rho * h
        if h <= h_tol or rho >= rho_max:
            break
    W = _adj(w_est)
    W[np.abs(W) < w_threshold] = 0.0
    return W


def pc_baseline(x, alpha: float = 0.05) -> np.ndarray:
    """PC algorithm of causal-learn (Fisher-z test) as edge scores: 1 for ``i -> j``, 0.5 both ways
    for an undirected edge ``i - j``. causal-learn encodes ``i -> j`` as ``G[j, i] = 1, G[i, j] = -1``."""
    x = _x2d(x)
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    try:
        from causallearn.search.ConstraintBased.PC import pc
    except ImportError as exc:  # pragma: no cover - causal-learn is a book dependency
        raise ImportError("pc_baseline needs causal-learn: pip install causal-learn") from exc
    g = pc(x, alpha, "fisherz", show_progress=False, verbose=False).G.graph
    return causallearn_to_scores(g)


def causallearn_to_scores(g: np.ndarray) -> np.ndarray:
    """causal-learn endpoint matrix -> edge scores (1 directed, 0.5 each way undirected)."""
    g = np.asarray(g)
    d = g.shape[0]
    s = np.zeros((d, d))
    directed = (g.T == 1) & (g == -1)         # G[j, i] = 1 and G[i, j] = -1  =>  i -> j
    undirected = (g == -1) & (g.T == -1)
    s[directed] = 1.0
    s[undirected] = 0.5
    np.fill_diagonal(s, 0.0)
    return s


def interventional_orienter(x_raw, interv_mask, tau: float = 0.1) -> np.ndarray:
    """A training-free orienter that reads the intervention regimes (notebook 2's exercise):
    ``s_ij = INVCOV_ij * sigmoid((|corr_do(i)(x_i, x_j)| - |corr_do(j)(x_i, x_j)|) / tau)``. Under
    ``do(i)`` a child ``j`` still follows ``i``; under ``do(j)`` the dependence on a parent vanishes.
    ``interv_mask`` is the ``[m, n]`` 0/1 mask of the intervened variable in each row (all zero for
    observational rows); a regime with fewer than 3 rows contributes no correlation (0)."""
    x = _x2d(x_raw, "x_raw")
    mask = np.asarray(interv_mask)
    if mask.shape != x.shape:
        raise ValueError(f"interv_mask must have the shape of x_raw {x.shape}, got {mask.shape}")
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not np.isfinite(tau) or tau <= 0:
        raise ValueError(f"tau must be a finite number > 0, got {tau!r}")
    n = x.shape[1]
    c = np.zeros((n, n))
    for i in range(n):              # one correlation matrix per regime (n regimes, not a loop over samples)
        rows = x[mask[:, i] > 0]
        if rows.shape[0] >= 3:
            with np.errstate(invalid="ignore", divide="ignore"):
                c[i] = np.abs(np.nan_to_num(np.corrcoef(rows, rowvar=False)[i]))
    z = np.clip((c - c.T) / tau, -60.0, 60.0)
    s = invcov_scores(x) / (1.0 + np.exp(-z))
    np.fill_diagonal(s, 0.0)
    return s
