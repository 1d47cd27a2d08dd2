"""Baselines the chapter compares against (spec Sec. 3.8).

- **Gaussian-equivalent theory** (the "universality" prediction): the same fixed point with
  ``f | y`` replaced by the Gaussian of equal class-conditional mean and covariance
  (:func:`gaussian_equivalent_prediction`).
- **Moment-matched Gaussian score**: per class, the Gaussian with the true score's mean and variance
  (:func:`icml26.cgmt.theory.moment_matched_gaussian`).
- **Ridge-at-zero**: a C^2 regulariser replaced by ridge with ``lam psi''(0)`` and no gradient tilt
  (:func:`ridge_at_zero`).
- **Reference ERM solver**: cvxpy (Clarabel), small ``p``; the only solver here for hinge and l1
  (:func:`fit_erm_cvxpy`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from .method import LFMM, LOSSES, SeparableReg, _check_positive, _check_Xy, ridge
from .theory import State, solve_fixed_point, test_error


def gaussian_equivalent_prediction(alpha: float, model: LFMM, loss: str, reg: SeparableReg,
                                   ge_nodes: int = 41, **kw) -> tuple[State, float]:
    """The universality prediction: fixed point and test error for the Gaussian-equivalent law."""
    state = solve_fixed_point(alpha, model, loss, reg, gaussian_equivalent=True, ge_nodes=ge_nodes, **kw)
    return state, test_error(state, model.law.gaussian_equivalent(ge_nodes))


def ridge_at_zero(reg: SeparableReg) -> SeparableReg:
    """The naive quadratic replacement of ``lam sum psi``: ridge with ``lam psi''(0)`` (no tilt)."""
    return ridge(reg.lam * reg.d2psi0)


def fit_erm_cvxpy(X, y, loss: str, lam: float, reg: str = "ridge") -> np.ndarray:
    """Reference ERM solver (cvxpy + Clarabel): ``(1/n) sum L(y_i theta^T x_i) + rho(theta)``.

    ``reg`` is ``"ridge"`` (``lam/2 ||theta||^2``), ``"logcosh"`` is not DCP-representable here, so
    only ``"ridge"`` and ``"l1"`` (``lam ||theta||_1``) are offered. ``X (n, p)`` or ``(B, n, p)``;
    returns ``(p,)`` or ``(B, p)``. Supports the hinge loss.
    """
    import cvxpy as cp

    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if reg not in ("ridge", "l1"):
        raise ValueError(f"reg must be 'ridge' or 'l1', got {reg!r}")
    _check_positive("lam", lam, strict=False)
    X = torch.as_tensor(X)
    y = torch.as_tensor(y)
    X, y, single = _check_Xy(X, y)
    B, n, p = X.shape
    if lam == 0 and n <= p:
        raise ValueError(f"lam must be > 0 when n <= p (n={n}, p={p})")
    out = np.zeros((B, p))
    for b in range(B):
        Xb, yb = X[b].cpu().numpy(), y[b].cpu().numpy()
        theta = cp.Variable(p)
        margin = cp.multiply(yb, Xb @ theta)
        if loss == "logistic":
            data = cp.sum(cp.logistic(-margin)) / n
        elif loss == "square":
            data = cp.sum_squares(1 - margin) / (2 * n)
        else:
            data = cp.sum(cp.pos(1 - margin)) / n
        pen = lam / 2 * cp.sum_squares(theta) if reg == "ridge" else lam * cp.norm1(theta)
        cp.Problem(cp.Minimize(data + pen)).solve(solver="CLARABEL", tol_gap_abs=1e-11,
                                                 tol_gap_rel=1e-11, tol_feas=1e-11)
        out[b] = theta.value
    return out[0] if single else out


def cosine(a: Tensor, b: Tensor) -> float:
    """Cosine similarity of two vectors."""
    return float(a @ b / (a.norm() * b.norm()))
