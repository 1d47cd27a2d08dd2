"""Mixed-graph ADMM and its unrolling (Qi et al., ICML 2026; spec Sec. 3).

Shapes: a space-time signal is ``(B, T, N, H)`` (batch, time, node, head). The paper's
optimisation problem (spec Sec. 3.2, called (P) below) is

    min_x ||y - H x||^2 + mu_u x^T L^u x + mu_d2 ||L^d_r x||^2 + mu_d1 ||L^d_r x||_1        (P)

with ``L^u`` the symmetric-normalised spatial Laplacian (GLR term), ``L^d_r = I - W^d`` the directed
random-walk Laplacian of the temporal graph (DGLR: its squared norm, DGTV: its l1 norm). The
ADMM updates (A1)-(A6) below are the spec's steps 1-6 of Sec. 3.2; the numbering of the paper's own
equations was not available, so docstrings cite (P) and (A1)-(A6).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ._checks import check_float, check_int, check_tensor

ABLATIONS = ("none", "no_dglr", "no_dgtv", "ut")
EXTRAPOLATORS = ("ridge_init", "scratch", "last_value")
DIRECTED_WEIGHTS = ("book", "official")


# ---------------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------------
_check_tensor = check_tensor
_check_int = check_int


def _check_num(name: str, value, positive: bool = False) -> float:
    """A finite number ``>= 0`` (``> 0`` when ``positive``)."""
    return check_float(name, value, low=0.0, low_open=positive)


def _check_neighbors(neighbors, n_nodes: int | None = None) -> torch.Tensor:
    _check_tensor("neighbors", neighbors, 2)
    if neighbors.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"neighbors must be an integer tensor, got {neighbors.dtype}")
    n = neighbors.shape[0] if n_nodes is None else n_nodes
    if neighbors.shape[0] != n:
        raise ValueError(f"neighbors must have n_nodes = {n} rows, got {neighbors.shape[0]}")
    if bool((neighbors < -1).any()) or bool((neighbors >= n).any()):
        raise ValueError(f"neighbors must hold indices in [0, {n}) or -1 (padding)")
    return neighbors.long()


def swish(x: torch.Tensor) -> torch.Tensor:
    """The released code's Swish ``x * sigmoid(0.8 x)``."""
    return x * torch.sigmoid(0.8 * x)


# ---------------------------------------------------------------------------------------------
# graph operators (spec Sec. 3.1)
# ---------------------------------------------------------------------------------------------
class SpatialOperator:
    """Symmetric-normalised spatial Laplacian ``(L^u x)_i = x_i - sum_j w_ij x_j`` (the GLR term of (P)).

    ``neighbors (N, K)`` padded with -1; ``weights (B, T, N, K, H)`` (broadcastable), zero on padding.
    With a symmetric neighbour list and ``w_ij = w~_ij / sqrt(d_i d_j)`` the operator is symmetric PSD
    with eigenvalues in [0, 2].
    """

    def __init__(self, neighbors: torch.Tensor, weights: torch.Tensor, check: bool = True):
        # check=False: the unrolled model's own operators (its neighbour buffer was checked when the model
        # was built and its weights are softmaxes), built without the checks that make the host wait
        self.neighbors = _check_neighbors(neighbors) if check else neighbors
        if check:
            _check_tensor("weights", weights, 5)
        if weights.shape[2] != neighbors.shape[0] or weights.shape[3] != neighbors.shape[1]:
            raise ValueError(f"weights must be (B, T, N={neighbors.shape[0]}, K={neighbors.shape[1]}, H), "
                             f"got {tuple(weights.shape)}")
        self.valid = (self.neighbors >= 0).to(weights.device)
        self.idx = self.neighbors.clamp_min(0).to(weights.device)
        self.weights = weights * self.valid[None, None, :, :, None].to(weights.dtype)
        N, K = self.idx.shape
        self.dense = None
        if N <= self.DENSE_MAX:
            # small graphs: one scatter into a dense (B,T,H,N,N) matrix, then each apply is a batched matvec
            w = self.weights.permute(0, 1, 4, 2, 3)                       # (B,T,H,N,K)
            idx = self.idx.expand(*w.shape[:3], N, K)
            self.dense = w.new_zeros(*w.shape[:3], N, N).scatter_add(-1, idx, w)

    DENSE_MAX = 64

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """``(B,T,N,H) -> (B,T,N,H)``."""
        if self.dense is not None:
            wx = (self.dense @ x.permute(0, 1, 3, 2)[..., None])[..., 0]   # (B,T,H,N)
            return x - wx.permute(0, 1, 3, 2)
        nb = x[:, :, self.idx, :]                       # (B, T, N, K, H)
        return x - (self.weights * nb).sum(3)

    gram = apply  # used where the z_u system needs "the" quadratic form's matrix


def _pad_directed(weights: torch.Tensor) -> torch.Tensor:
    """(B, T-1, V, N, H) -> (B, T, V, N, H) with row t=0 zero and lags with t-k<0 masked to 0."""
    B, Tm1, V, N, H = weights.shape
    T = Tm1 + 1
    t = torch.arange(1, T, device=weights.device)[:, None]
    k = torch.arange(1, V + 1, device=weights.device)[None, :]
    keep = (t - k >= 0).to(weights.dtype)[None, :, :, None, None]
    w = weights * keep
    return torch.cat([torch.zeros_like(w[:, :1]), w], dim=1)


def _past(x: torch.Tensor, V: int) -> torch.Tensor:
    """``(B,T,N,H) -> (B,T,N,H,V)`` with ``[..., t, k-1] = x[t-k]`` (zero before the window)."""
    xp = torch.cat([x.new_zeros(x.shape[0], V, *x.shape[2:]), x], dim=1)
    return xp.unfold(1, V, 1)[:, :x.shape[1]].flip(-1)


def _future(x: torch.Tensor, V: int) -> torch.Tensor:
    """``(B,T,N,H) -> (B,T,N,H,V)`` with ``[..., s, k-1] = x[s+k]`` (zero after the window)."""
    xp = torch.cat([x, x.new_zeros(x.shape[0], V, *x.shape[2:])], dim=1)
    return xp.unfold(1, V, 1)[:, 1:x.shape[1] + 1]


def _transpose_lags(w: torch.Tensor) -> torch.Tensor:
    """Edge weights ``w[t, k]`` of edge ``(t-k) -> t`` in layout (B,T,N,H,V) re-indexed by the source:
    ``wT[s, k] = w[s+k, k]``."""
    B, T, N, H, V = w.shape
    wp = torch.cat([w, w.new_zeros(B, V, N, H, V)], dim=1)
    return torch.stack([wp[:, k:k + T, ..., k - 1] for k in range(1, V + 1)], dim=-1)


class DirectedTemporalOperator:
    """Directed random-walk Laplacian ``L^d_r = I - W^d`` of the temporal graph (DGLR/DGTV terms of (P)).

    ``(L^d_r x)_{t,i} = x_{t,i} - sum_k w^d_{t,k,i} x_{t-k,i}`` for ``t >= 1`` and 0 for ``t = 0``;
    ``weights (B, T-1, V, N, H)`` index rows ``t = 1..T-1`` and lags ``k = 1..V``. Weights of lags that
    would reach before the window (``t - k < 0``) are masked to zero (no wrap-around). The adjoint is
    a scatter, computed as a gather with the weights re-indexed by the source step.
    """

    def __init__(self, weights: torch.Tensor, check: bool = True):
        if check:                                       # check=False: see SpatialOperator
            _check_tensor("weights", weights, 5)
        w = _pad_directed(weights)                      # (B, T, V, N, H)
        self.T, self.V = w.shape[1], w.shape[2]
        self.w = w.permute(0, 1, 3, 4, 2).contiguous()  # (B, T, N, H, V)
        self.wT = _transpose_lags(self.w)
        self.rows = (torch.arange(self.T, device=w.device) >= 1).to(w.dtype)[None, :, None, None]

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return self.rows * (x - (self.w * _past(x, self.V)).sum(-1))

    def apply_T(self, v: torch.Tensor) -> torch.Tensor:
        """Exact adjoint: keeps ``v_t`` for ``t >= 1`` and scatters ``-w_{t,k} v_t`` back to ``t - k``."""
        return self.rows * v - (self.wT * _future(v, self.V)).sum(-1)

    def gram(self, x: torch.Tensor) -> torch.Tensor:
        """``L^T L x``."""
        return self.apply_T(self.apply(x))


class UndirectedTemporalOperator:
    """The UT ablation's undirected temporal Laplacian ``L^n`` on the same edges ``(t, t-k)``, weights
    symmetric-normalised by ``sqrt(d_t d_{t-k})`` instead of the in-degree (spec Sec. 3.1).

    ``raw_weights (B, T-1, V, N, H)`` are the unnormalised ``w~^d``.
    """

    def __init__(self, raw_weights: torch.Tensor, check: bool = True):
        if check:                                       # check=False: see SpatialOperator
            _check_tensor("raw_weights", raw_weights, 5)
        w = _pad_directed(raw_weights).permute(0, 1, 3, 4, 2)          # (B, T, N, H, V)
        self.T, self.V = w.shape[1], w.shape[-1]
        wT = _transpose_lags(w)
        deg = (w.sum(-1) + wT.sum(-1)).clamp_min(1e-12)                # in- plus out-edges
        self.w = w / torch.sqrt((deg[..., None] * _past(deg, self.V)).clamp_min(1e-24))   # edge (t, t-k)
        self.wT = _transpose_lags(self.w)

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return x - (self.w * _past(x, self.V)).sum(-1) - (self.wT * _future(x, self.V)).sum(-1)

    apply_T = apply
    gram = apply  # L^n replaces L^T L in the z_d system


# ---------------------------------------------------------------------------------------------
# regularisers (spec Sec. 4.1)
# ---------------------------------------------------------------------------------------------
def _sum_tn(v: torch.Tensor) -> torch.Tensor:
    return v.sum(dim=(1, 2))


def glr(x: torch.Tensor, Lu: SpatialOperator) -> torch.Tensor:
    """Graph Laplacian regulariser ``x^T L^u x`` per (batch, head)."""
    return _sum_tn(x * Lu.apply(x))


def gtv(x: torch.Tensor, Lu: SpatialOperator) -> torch.Tensor:
    """Undirected graph total variation ``sum_{i<j} w_ij |x_i - x_j|`` per (batch, head)."""
    nb = x[:, :, Lu.idx, :]
    return 0.5 * (Lu.weights * (x[:, :, :, None] - nb).abs()).sum(dim=(1, 2, 3))


def dglr(x: torch.Tensor, Ld: DirectedTemporalOperator) -> torch.Tensor:
    """Directed graph Laplacian regulariser ``||L^d_r x||_2^2`` (the DGLR term of (P))."""
    return _sum_tn(Ld.apply(x) ** 2)


def dgtv(x: torch.Tensor, Ld: DirectedTemporalOperator) -> torch.Tensor:
    """Directed graph total variation ``||L^d_r x||_1`` (the DGTV term of (P))."""
    return _sum_tn(Ld.apply(x).abs())


def objective(x, y, obs, Lu, Ld, mu_u, mu_d1, mu_d2) -> torch.Tensor:
    """The objective of (P) per (batch, head); ``y`` zero-padded to ``(B,T,N,H)``, ``obs`` the 0/1 mask H^T H."""
    return (_sum_tn(obs * (y - x) ** 2) + mu_u * glr(x, Lu) + mu_d2 * dglr(x, Ld) + mu_d1 * dgtv(x, Ld))


# ---------------------------------------------------------------------------------------------
# prox and inner solvers
# ---------------------------------------------------------------------------------------------
def soft_threshold(v: torch.Tensor, kappa) -> torch.Tensor:
    """``soft_k(v) = sign(v) max(|v| - k, 0)``, the prox of ``k ||.||_1`` (update (A5))."""
    _check_tensor("v", v)
    if isinstance(kappa, torch.Tensor):
        if bool((kappa < 0).any()):
            raise ValueError("kappa must be >= 0")
    else:
        kappa = _check_num("kappa", kappa)
    return torch.sign(v) * torch.clamp(v.abs() - kappa, min=0.0)


def _soft_threshold(v: torch.Tensor, kappa) -> torch.Tensor:
    """The unchecked prox of :func:`soft_threshold` for the unrolled hot loop: its threshold
    ``mu_d1 / rho`` is non-negative by the clamps, and a check would make the host wait for the device
    once per iteration."""
    return torch.sign(v) * torch.clamp(v.abs() - kappa, min=0.0)


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Inner products over all dims but batch (0) and head (last), kept for broadcasting."""
    dims = tuple(range(1, a.dim() - 1))
    return (a * b).sum(dim=dims, keepdim=True)


def unrolled_cg(A: Callable, b: torch.Tensor, x0: torch.Tensor, alphas=None, betas=None,
                mode: str = "learned", n_steps: int | None = None) -> torch.Tensor:
    """``n`` steps of the conjugate-gradient recursion for ``A x = b`` warm-started at ``x0`` (spec Sec. 3.2).

    ``mode="learned"``: the unrolled network's fixed step sizes ``alphas, betas`` of shape ``(n, H)``
    (a learned polynomial filter of degree <= n). ``mode="exact"``: textbook CG, ``alpha = r'r / p'Ap``,
    ``beta = r_new'r_new / r'r``, one system per (batch, head); ``n_steps`` steps.
    """
    if mode not in ("learned", "exact"):
        raise ValueError(f"mode must be 'learned' or 'exact', got {mode!r}")
    _check_system(A, b, x0)
    if mode == "learned" and (alphas is None or betas is None):
        raise ValueError("alphas and betas are required with mode='learned'")
    if mode == "exact":
        n_steps = _check_int("n_steps", n_steps if n_steps is not None else 0, 1)
    return _unrolled_cg(A, b, x0, alphas, betas, mode, n_steps)


def _unrolled_cg(A, b, x0, alphas, betas, mode, n_steps):
    """The unchecked recursion of :func:`unrolled_cg` (the unrolled network calls it in its hot loop)."""
    x = x0
    r = b - A(x)
    p = r
    if mode == "learned":
        for j in range(alphas.shape[0]):
            Ap = A(p)
            x = x + alphas[j] * p
            r = r - alphas[j] * Ap
            p = r + betas[j] * p
        return x
    rr = _dot(r, r)
    for _ in range(n_steps):
        Ap = A(p)
        pAp = _dot(p, Ap)
        alpha = torch.where(pAp > 0, rr / pAp.clamp_min(1e-300), torch.zeros_like(pAp))
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = _dot(r, r)
        beta = torch.where(rr > 0, rr_new / rr.clamp_min(1e-300), torch.zeros_like(rr))
        p = r + beta * p
        rr = rr_new
    return x


def _check_system(A, b, x0) -> None:
    if not callable(A):
        raise TypeError(f"A must be a callable v -> A v, got {type(A).__name__}")
    _check_tensor("b", b)
    _check_tensor("x0", x0)
    if not b.is_floating_point() or b.dim() < 2:
        raise ValueError(f"b must be a floating-point tensor (B, ..., H), got {b.dtype} of shape {tuple(b.shape)}")
    if x0.shape != b.shape:
        raise ValueError(f"x0 must have the shape of b {tuple(b.shape)}, got {tuple(x0.shape)}")


def cg_solve(A: Callable, b: torch.Tensor, x0: torch.Tensor, tol: float = 1e-12, maxiter: int = 500):
    """Exact CG to a relative residual ``tol`` (the classical ADMM's inner solver).

    ``A`` must be symmetric positive definite on each (batch, head) system: a search direction with
    ``p'Ap <= 0`` before convergence (an indefinite or negative operator) raises ValueError naming ``A``
    instead of dividing by a clamped curvature and returning NaN."""
    _check_system(A, b, x0)
    return _cg_solve(A, b, x0, _check_num("tol", tol, positive=True), _check_int("maxiter", maxiter, 1))


def _cg_solve(A, b, x0, tol, maxiter):
    """The kernel of :func:`cg_solve` (``admm_solve`` calls it with checked arguments). A direction with
    ``p'Ap <= 0`` meets the clamped curvature 1e-300, so its step overflows: the iterate stops being
    finite, which is checked once, after the loop (no extra device sync per iteration)."""
    x = x0
    r = b - A(x)
    p = r
    rr = _dot(r, r)
    bb = _dot(b, b).clamp_min(1e-300)
    for _ in range(maxiter):
        if bool((rr <= tol**2 * bb).all()):
            break
        Ap = A(p)
        alpha = rr / _dot(p, Ap).clamp_min(1e-300)
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = _dot(r, r)
        p = r + (rr_new / rr.clamp_min(1e-300)) * p
        rr = rr_new
    if not bool(torch.isfinite(x).all()):
        raise ValueError("A is not positive definite: conjugate gradients met a direction p with p'Ap <= 0 and "
                         "diverged (cg_solve needs a symmetric positive definite operator)")
    return x


# ---------------------------------------------------------------------------------------------
# one ADMM iteration (spec Sec. 3.2, updates (A1)-(A6))
# ---------------------------------------------------------------------------------------------
def admm_init(x0: torch.Tensor, Ld) -> dict:
    """Released-code initial values: ``z_u = z_d = x0``, ``phi = L x0``, ``gamma_u = .05``, ``gamma_d = gamma = .1``."""
    return {"x": x0, "zu": x0, "zd": x0, "phi": Ld.apply(x0), "gu": torch.full_like(x0, 0.05),
            "gd": torch.full_like(x0, 0.1), "g": torch.full_like(x0, 0.1)}


def admm_step(state: dict, y, obs, Lu, Ld, Lz, p: dict, solve: Callable, use_dglr: bool = True,
              use_dgtv: bool = True) -> dict:
    """One iteration of ADMM on the augmented Lagrangian of (P).

    (A1) x:   (H'H + (rho_u+rho_d)/2 I + rho/2 L'L) x = H'y + (rho_u z_u + rho_d z_d)/2 - (g_u+g_d)/2 + L'(g + rho phi)/2
    (A2) z_u: (mu_u L^u + rho_u/2 I) z_u = g_u/2 + rho_u x/2
    (A3) z_d: (mu_d2 L'L + rho_d/2 I) z_d = g_d/2 + rho_d x/2        (L'L -> L^n in the UT ablation)
    (A4) g_u += rho_u (x - z_u),  g_d += rho_d (x - z_d)
    (A5) phi = soft_{mu_d1/rho}(L x - g/rho)
    (A6) g += rho (phi - L x)
    ``solve(name, A, b, x0)`` solves the SPD system ``name`` in {"x", "u", "d"}; ``Lz`` is the operator
    whose ``gram`` enters (A3). Without DGLR, z_d, g_d and the rho_d terms are absent; without DGTV,
    phi, g and the rho L'L terms are absent.
    """
    s = dict(state)
    rho_u = p["rho_u"]
    cx = rho_u / 2 + (p["rho_d"] / 2 if use_dglr else 0.0)
    rhs = obs * y + (rho_u * s["zu"] - s["gu"]) / 2
    if use_dglr:
        rhs = rhs + (p["rho_d"] * s["zd"] - s["gd"]) / 2
    if use_dgtv:
        rhs = rhs + 0.5 * Ld.apply_T(s["g"] + p["rho"] * s["phi"])

        def Ax(v):
            return obs * v + cx * v + 0.5 * p["rho"] * Ld.gram(v)
    else:
        def Ax(v):
            return obs * v + cx * v
    s["x"] = x = solve("x", Ax, rhs, s["x"])
    s["zu"] = solve("u", lambda v: p["mu_u"] * Lu.apply(v) + 0.5 * rho_u * v, 0.5 * (s["gu"] + rho_u * x), s["zu"])
    if use_dglr:
        s["zd"] = solve("d", lambda v: p["mu_d2"] * Lz.gram(v) + 0.5 * p["rho_d"] * v,
                        0.5 * (s["gd"] + p["rho_d"] * x), s["zd"])
    s["gu"] = s["gu"] + rho_u * (x - s["zu"])
    if use_dglr:
        s["gd"] = s["gd"] + p["rho_d"] * (x - s["zd"])
    if use_dgtv:
        Lx = Ld.apply(x)
        s["phi"] = _soft_threshold(Lx - s["g"] / p["rho"], p["mu_d1"] / p["rho"])
        s["g"] = s["g"] + p["rho"] * (s["phi"] - Lx)
    return s


def augmented_lagrangian(s: dict, y, obs, Lu, Ld, p: dict) -> torch.Tensor:
    """The augmented Lagrangian of (P) (spec Sec. 3.2), summed over the batch; used by the stationarity tests."""
    L = _sum_tn(obs * (y - s["x"]) ** 2) + p["mu_u"] * glr(s["zu"], Lu) + p["mu_d2"] * dglr(s["zd"], Ld)
    L = L + p["mu_d1"] * _sum_tn(s["phi"].abs())
    L = L + _sum_tn(s["gu"] * (s["x"] - s["zu"])) + p["rho_u"] / 2 * _sum_tn((s["x"] - s["zu"]) ** 2)
    L = L + _sum_tn(s["gd"] * (s["x"] - s["zd"])) + p["rho_d"] / 2 * _sum_tn((s["x"] - s["zd"]) ** 2)
    Lx = Ld.apply(s["x"])
    L = L + _sum_tn(s["g"] * (s["phi"] - Lx)) + p["rho"] / 2 * _sum_tn((s["phi"] - Lx) ** 2)
    return L.sum()


def _check_obs_mask(obs_mask, y: torch.Tensor) -> None:
    if obs_mask is None:
        return
    _check_tensor("obs_mask", obs_mask)
    if obs_mask.shape != y.shape:
        raise ValueError(f"obs_mask must have the shape of y {tuple(y.shape)}, got {tuple(obs_mask.shape)}")
    if not bool(((obs_mask == 0) | (obs_mask == 1)).all()):
        raise ValueError("obs_mask must be 0/1 (True where y is observed)")


def _obs_pad(y: torch.Tensor, t_in: int, T: int, obs_mask=None):
    B, _, N = y.shape
    obs = torch.zeros(B, T, N, dtype=y.dtype, device=y.device)
    m = torch.ones_like(y) if obs_mask is None else obs_mask.to(y.dtype)
    obs[:, :t_in] = m
    ypad = torch.zeros_like(obs)
    ypad[:, :t_in] = y * m
    return ypad, obs


def admm_solve(y: torch.Tensor, t_in: int, Lu: SpatialOperator, Ld: DirectedTemporalOperator,
               mu_u: float, mu_d1: float, mu_d2: float, rho: float = 1.0, rho_u: float = 1.0,
               rho_d: float = 1.0, iters: int = 200, cg_iters: int = 200, x0=None, obs_mask=None,
               tol: float = 1e-13, return_history: bool = False):
    """Classical (non-learned) ADMM for (P) with fixed graphs and exact CG inner solves (spec Sec. 4.2).

    ``y (B, t_in, N)``; returns ``x (B, T, N)`` and, with ``return_history``, per-iteration primal and
    dual residual norms and objective values (Boyd et al. 2011, Sec. 3.3 definitions).
    """
    _check_tensor("y", y, 3)
    if not y.is_floating_point():
        raise TypeError(f"y must be a floating-point tensor, got {y.dtype}")
    y = y.to(Ld.w.dtype)
    t_in = _check_int("t_in", t_in, 1)
    if y.shape[1] != t_in:
        raise ValueError(f"y must have t_in = {t_in} time steps, got {y.shape[1]}")
    mu_u, mu_d1, mu_d2 = (_check_num(n, v) for n, v in (("mu_u", mu_u), ("mu_d1", mu_d1), ("mu_d2", mu_d2)))
    rho, rho_u, rho_d = (_check_num(n, v, positive=True) for n, v in (("rho", rho), ("rho_u", rho_u),
                                                                       ("rho_d", rho_d)))
    iters = _check_int("iters", iters, 1)
    cg_iters = _check_int("cg_iters", cg_iters, 1)
    T = Ld.T
    if t_in >= T:
        raise ValueError(f"t_in must be < T = {T} (the operators' window), got {t_in}")
    _check_obs_mask(obs_mask, y)
    if x0 is not None:
        _check_tensor("x0", x0, 3)
        if x0.shape != (y.shape[0], T, y.shape[2]):
            raise ValueError(f"x0 must be (B, T, N) = {(y.shape[0], T, y.shape[2])}, got {tuple(x0.shape)}")
    ypad, obs = _obs_pad(y, t_in, T, obs_mask)
    ypad, obs = ypad[..., None], obs[..., None]
    x = ypad.clone() if x0 is None else x0[..., None].to(y.dtype)
    p = {"mu_u": mu_u, "mu_d1": mu_d1, "mu_d2": mu_d2, "rho": rho, "rho_u": rho_u, "rho_d": rho_d}
    s = admm_init(x, Ld)

    tol = _check_num("tol", tol, positive=True)

    def solve(name, A, b, x0_):
        return _cg_solve(A, b, x0_, tol, cg_iters)

    hist = {"primal": [], "dual": [], "objective": []}
    for _ in range(iters):
        old = s
        s = admm_step(s, ypad, obs, Lu, Ld, Ld, p, solve)
        if return_history:
            Lx = Ld.apply(s["x"])
            r = torch.sqrt(_sum_tn((s["x"] - s["zu"]) ** 2 + (s["x"] - s["zd"]) ** 2 + (s["phi"] - Lx) ** 2))
            d = -(rho_u * (s["zu"] - old["zu"]) + rho_d * (s["zd"] - old["zd"])
                  + rho * Ld.apply_T(s["phi"] - old["phi"]))
            hist["primal"].append(float(r.max()))
            hist["dual"].append(float(torch.sqrt(_sum_tn(d**2)).max()))
            hist["objective"].append(float(objective(s["x"], ypad, obs, Lu, Ld, mu_u, mu_d1, mu_d2).sum()))
    x = s["x"][..., 0]
    return (x, hist) if return_history else x


def dense_matrix(apply: Callable, T: int, N: int, dtype=torch.float64, device=None) -> torch.Tensor:
    """The ``(T N, T N)`` matrix of a linear operator on ``(1, T, N, 1)`` signals (row-major over (t, i))."""
    n = T * N
    basis = torch.eye(n, dtype=dtype, device=device).reshape(n, T, N, 1)
    cols = apply(basis).reshape(n, n)
    return cols.T


def closed_form(y: torch.Tensor, t_in: int, Lu, Ld, mu_u: float, mu_d2: float, obs_mask=None) -> torch.Tensor:
    """``x* = (H'H + mu_u L^u + mu_d2 L'L)^{-1} H'y``: the minimiser of (P) when ``mu_d1 = 0`` (one window)."""
    _check_tensor("y", y, 3)
    if y.shape[0] != 1:
        raise ValueError(f"y must hold one window (batch 1), got batch {y.shape[0]}")
    if not y.is_floating_point():
        raise TypeError(f"y must be a floating-point tensor, got {y.dtype}")
    t_in = _check_int("t_in", t_in, 1)
    mu_u, mu_d2 = _check_num("mu_u", mu_u), _check_num("mu_d2", mu_d2)
    _check_obs_mask(obs_mask, y)
    T, N = Ld.T, y.shape[2]
    if y.shape[1] != t_in or t_in >= T:
        raise ValueError(f"y must have t_in = {t_in} < T = {T} time steps, got {y.shape[1]}")
    ypad, obs = _obs_pad(y, t_in, T, obs_mask)
    A = (torch.diag(obs.reshape(-1)) + mu_u * dense_matrix(Lu.apply, T, N, y.dtype, y.device)
         + mu_d2 * dense_matrix(Ld.gram, T, N, y.dtype, y.device))
    return torch.linalg.solve(A, ypad.reshape(-1)).reshape(1, T, N)


# ---------------------------------------------------------------------------------------------
# fixed (distance-based) graphs for the classical ADMM and the fixed-graph ablation
# ---------------------------------------------------------------------------------------------
def normalise_spatial(raw: torch.Tensor, neighbors: torch.Tensor) -> torch.Tensor:
    """``w_ij = w~_ij / sqrt(d_i d_j)`` for raw weights ``(B,T,N,K,H)`` on a padded neighbour list."""
    valid = (neighbors >= 0).to(raw.device)
    raw = raw * valid[None, None, :, :, None].to(raw.dtype)
    deg = raw.sum(3).clamp_min(1e-12)                   # (B, T, N, H)
    dj = deg[:, :, neighbors.clamp_min(0).to(raw.device)]   # (B, T, N, K, H)
    return raw / torch.sqrt(deg[:, :, :, None] * dj)


def distance_spatial_weights(dist, neighbors: torch.Tensor, dtype=torch.float64) -> torch.Tensor:
    """Gaussian-kernel weights ``exp(-d_ij^2 / sigma^2)`` on the neighbour list, normalised: ``(1,1,N,K,1)``."""
    neighbors = _check_neighbors(neighbors)
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    if dist is None or isinstance(dist, (str, bytes)):
        raise TypeError(f"dist must be an (N, N) array of distances, got {type(dist).__name__}")
    try:
        d = torch.as_tensor(dist, dtype=dtype)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"dist must be an (N, N) array of distances, got {type(dist).__name__}") from e
    n = neighbors.shape[0]
    if d.shape != (n, n):
        raise ValueError(f"dist must be ({n}, {n}) to match neighbors, got {tuple(d.shape)}")
    if bool(torch.isnan(d).any()) or bool((d < 0).any()):
        raise ValueError("dist must hold non-negative distances (no NaN; inf marks a disconnected pair)")
    if not bool(((d == d.T) | torch.isclose(d, d.T)).all()):
        raise ValueError("dist must be symmetric (road distances): asymmetric weights would make the spatial "
                         "Laplacian non-symmetric and its normalised weights exceed 1")
    idx = neighbors.clamp_min(0)
    dij = torch.gather(d, 1, idx)
    pos = d[torch.isfinite(d) & (d > 0)]
    if pos.numel() == 0:
        raise ValueError("dist needs at least one finite positive distance to set the kernel width")
    sigma = pos.std() if pos.numel() > 1 else pos[0]
    if not bool(torch.isfinite(sigma)) or float(sigma) <= 0:
        # all distances equal: the spread is zero, so use their common value as the width (every
        # neighbour then gets weight exp(-1)) instead of dividing by zero and returning an empty graph
        sigma = pos.mean()
    raw = torch.exp(-(dij / sigma) ** 2)[None, None, :, :, None]
    return normalise_spatial(raw, neighbors)


def decaying_temporal_weights(T: int, N: int, V: int, decay: float = 0.5, dtype=torch.float64) -> torch.Tensor:
    """Fixed directed weights ``w~_k = exp(-decay (k-1))`` normalised over available lags: ``(1,T-1,V,N,1)``."""
    T = _check_int("T", T, 2)
    N = _check_int("N", N, 1)
    V = _check_int("V (the interval)", V, 1)
    decay = _check_num("decay", decay)
    if V > T - 1:
        raise ValueError(f"V (the interval) must be <= T - 1 = {T - 1}, got {V}")
    raw = torch.exp(-decay * torch.arange(V, dtype=dtype))[None, None, :, None, None].expand(1, T - 1, V, N, 1)
    return normalise_directed(raw)


def normalise_directed(raw: torch.Tensor) -> torch.Tensor:
    """In-degree normalisation over the available lags (``t - k >= 0``) of ``(B,T-1,V,N,H)`` raw weights."""
    w = _pad_directed(raw)[:, 1:]
    return w / w.sum(2, keepdim=True).clamp_min(1e-12)


# ---------------------------------------------------------------------------------------------
# learned modules (spec Sec. 3.3)
# ---------------------------------------------------------------------------------------------
def laplacian_eigvecs(neighbors: torch.Tensor, dims: int) -> torch.Tensor:
    """The ``dims`` lowest non-trivial eigenvectors of the normalised Laplacian of the kNN graph (signs fixed)."""
    n = neighbors.shape[0]
    A = torch.zeros(n, n, dtype=torch.float64)
    rows = torch.arange(n)[:, None].expand_as(neighbors)
    valid = neighbors >= 0
    A[rows[valid], neighbors[valid]] = 1.0
    A = torch.maximum(A, A.T)
    d = A.sum(1).clamp_min(1e-12)
    L = torch.eye(n, dtype=torch.float64) - A / torch.sqrt(d[:, None] * d[None])
    _, vec = torch.linalg.eigh(L)
    vec = vec[:, 1:dims + 1]
    sign = torch.sign(vec[vec.abs().argmax(0), torch.arange(vec.shape[1])])
    return (vec * sign).float()


def time_features(tod: torch.Tensor, dow: torch.Tensor) -> torch.Tensor:
    """``(B,T) -> (B,T,5)``: two harmonics of the time of day and a weekend flag."""
    ang = 2 * math.pi * tod.float() / 288.0
    return torch.stack([torch.sin(ang), torch.cos(ang), torch.sin(2 * ang), torch.cos(2 * ang),
                        (dow >= 5).float()], dim=-1)


class FeatureExtractor(nn.Module):
    """A small GraphSAGE-style feature extractor written for the book. It is **not** a port of the
    released code's ``FeatureExtractor`` (which has its own layers and sizes); it keeps only the idea
    of spec Sec. 3.3 (aggregate each node with its neighbours, then filter along the node's recent
    past): gather the node and its ``k`` nearest neighbours, a linear map over the ``k+1`` positions
    producing ``H`` heads, a linear map to ``C`` channels, Swish; then a per-channel linear filter
    over the node's previous ``V`` steps, Swish."""

    def __init__(self, n_in: int, knn: torch.Tensor, n_heads: int, channels: int, interval: int):
        super().__init__()
        self.register_buffer("knn", knn.clone())
        k1 = knn.shape[1] + 1
        self.pos = nn.Parameter(torch.full((k1, n_heads), 1.0 / k1))
        self.pos.data[0] += 0.5
        self.lin = nn.Linear(n_in, channels)
        self.hist = nn.Parameter(torch.zeros(interval + 1, channels))
        self.hist.data[0] = 1.0
        self.hist_b = nn.Parameter(torch.zeros(channels))
        self.V = interval

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``z (B,T,N,Cin) -> f (B,T,N,H,C)``."""
        g = torch.cat([z[:, :, :, None], z[:, :, self.knn]], dim=3)          # (B,T,N,k+1,Cin)
        h = torch.einsum("btnpc,ph->btnhc", g, self.pos)
        f = swish(self.lin(h))                                                # (B,T,N,H,C)
        out = self.hist[0] * f
        for k in range(1, min(self.V, f.shape[1] - 1) + 1):
            out = out + torch.cat([torch.zeros_like(f[:, :k]), self.hist[k] * f[:, :-k]], dim=1)
        return swish(out + self.hist_b)


class GraphLearningModule(nn.Module):
    """Graph learning = attention (spec Sec. 3.1 and 4.5).

    Undirected: ``w~_ij = exp(-||M_h (f_i - f_j)||^2)`` on the (symmetric) neighbour list, normalised
    ``w~_ij / sqrt(d_i d_j)``. Directed: ``w~_{t,k} = exp(-||Q_{k,h} (f_{t-k} - f_t)||^2)`` for lags
    ``k = 1..V``, normalised over the available lags (a softmax over lags of a negative Mahalanobis
    similarity). ``M`` is shared over time (``shared_M=True``, the book model) and initialised 1.5 I;
    ``Q_k`` is initialised ``I * linspace(1, 1.2, V)[k]``. With ``temporal="undirected"`` (UT
    ablation) the raw directed weights are returned for :class:`UndirectedTemporalOperator`.

    ``directed="book"`` (default) takes one exponential of the squared norm over channels,
    ``exp(-||Q d||^2)``; ``directed="official"`` is the released code's sum over channels of
    per-channel exponentials, ``sum_c exp(-(Q d)_c^2)``, normalised over the available lags the same
    way. The two differ: the official raw weight lies in ``(0, C]`` and a large difference in one
    channel cannot drive it below ``C - 1``, so the official lag weights stay close to uniform.
    """

    def __init__(self, n_heads: int, channels: int, interval: int, neighbors: torch.Tensor, T: int,
                 shared_M: bool = True, m_init: float = 1.5, q_init_max: float = 1.2,
                 temporal: str = "directed", directed: str = "book"):
        super().__init__()
        if directed not in DIRECTED_WEIGHTS:
            raise ValueError(f"directed must be one of {DIRECTED_WEIGHTS}, got {directed!r}")
        n_heads = _check_int("n_heads", n_heads, 1)
        channels = _check_int("channels", channels, 1)
        interval = _check_int("interval", interval, 1)
        if interval > T - 1:
            raise ValueError(f"interval must be <= T - 1 = {T - 1}, got {interval}")
        self.register_buffer("nbr", neighbors.clone())
        eye = torch.eye(channels)
        nM = 1 if shared_M else T
        self.M = nn.Parameter(m_init * eye.expand(nM, n_heads, channels, channels).clone())
        scales = torch.linspace(1.0, q_init_max, interval)
        self.Q = nn.Parameter(scales[:, None, None, None] * eye.expand(interval, n_heads, channels, channels))
        self.V, self.T, self.temporal, self.directed = interval, T, temporal, directed

    def forward(self, f: torch.Tensor):
        """``f (B,T,N,H,C)`` -> undirected ``(B,T,N,K,H)``, directed ``(B,T-1,V,N,H)``."""
        nbr = self.nbr.clamp_min(0)
        diff = f[:, :, :, None] - f[:, :, nbr]                                # (B,T,N,K,H,C)
        if self.M.shape[0] == 1:
            md = torch.einsum("hcd,btnkhd->btnkhc", self.M[0], diff)
        else:
            md = torch.einsum("thcd,btnkhd->btnkhc", self.M, diff)
        raw = torch.exp(-(md**2).sum(-1))
        wu = normalise_spatial(raw, self.nbr)
        B, T = f.shape[:2]
        lags = []
        for k in range(1, self.V + 1):
            d = f[:, :T - k] - f[:, k:]                                       # rows t = k..T-1
            qd2 = torch.einsum("hcd,btnhd->btnhc", self.Q[k - 1], d) ** 2
            # log of the raw weight: -||Q d||^2 (book) or log sum_c exp(-(Q d)_c^2) (released code)
            e = -qd2.sum(-1) if self.directed == "book" else torch.logsumexp(-qd2, dim=-1)
            pad = torch.full_like(e[:, :1], -math.inf).expand(B, k - 1, *e.shape[2:])
            lags.append(torch.cat([pad, e], dim=1))
        logits = torch.stack(lags, dim=2)                                     # (B,T-1,V,N,H)
        if self.temporal == "undirected":
            return wu, torch.exp(logits)
        # in-degree normalisation of exp(logits) = a softmax over the available lags (stable)
        return wu, torch.softmax(logits, dim=2)


class ADMMBlock(nn.Module):
    """``n_iter`` unrolled ADMM iterations (A1)-(A6) with learned ``mu, rho`` per iteration and learned CG
    step sizes ``(n_iter, cg_iters, H)`` per sub-system; heads combined as ``x = sum_h c_h x_h``."""

    def __init__(self, n_nodes: int, T: int, t_in: int, n_heads: int, n_iter: int = 5, cg_iters: int = 3,
                 interval: int = 6, mu_init: float = 3.0, ablation: str = "none"):
        super().__init__()
        if ablation not in ABLATIONS:
            raise ValueError(f"ablation must be one of {ABLATIONS}, got {ablation!r}")
        n_iter = _check_int("n_iter", n_iter, 1)
        cg_iters = _check_int("cg_iters", cg_iters, 1)
        n_heads = _check_int("n_heads", n_heads, 1)
        self.ablation, self.n_iter, self.t_in, self.T = ablation, n_iter, t_in, T
        self.use_dglr = ablation != "no_dglr"
        self.use_dgtv = ablation not in ("no_dgtv", "ut")
        rho0 = math.sqrt(n_nodes / T)
        names = {"mu_u": mu_init, "rho_u": rho0}
        if self.use_dglr:
            names.update(mu_d2=mu_init, rho_d=rho0)
        if self.use_dgtv:
            names.update(mu_d1=mu_init, rho=rho0)
        self.admm = nn.ParameterDict({k: nn.Parameter(torch.full((n_iter,), v)) for k, v in names.items()})
        systems = ["x", "u"] + (["d"] if self.use_dglr else [])
        self.cg = nn.ParameterDict({f"{a}_{s}": nn.Parameter(torch.full((n_iter, cg_iters, n_heads), 0.08))
                                    for s in systems for a in ("alpha", "beta")})
        self.comb = nn.Parameter(torch.full((n_heads,), 1.0 / n_heads))
        self.solves = {"x": 0, "u": 0, "d": 0}   # counters (tests: no_dglr never solves z_d)

    def forward(self, x0, y, obs, w_u, w_d, neighbors, check: bool = True) -> torch.Tensor:
        """``x0, y, obs (B,T,N)`` -> ``(B,T,N)``; ``y`` zero-padded, ``obs`` the observation mask.
        ``check=False`` (the forecaster's own calls) skips the checks of ``neighbors`` and the graph
        weights, each of which makes the host wait for the device."""
        H = self.comb.shape[0]
        xh, yh, oh = (v[..., None].expand(*v.shape, H) for v in (x0, y, obs))
        Lu = SpatialOperator(neighbors, w_u, check=check)
        Ld = (UndirectedTemporalOperator(w_d, check=check) if self.ablation == "ut"
              else DirectedTemporalOperator(w_d, check=check))
        s = admm_init(xh, Ld)
        for tau in range(self.n_iter):
            p = {k: v[tau] for k, v in self.admm.items()}
            p.setdefault("rho_d", 0.0)

            def solve(name, A, b, x_start, tau=tau):
                self.solves[name] += 1
                return _unrolled_cg(A, b, x_start, self.cg[f"alpha_{name}"][tau], self.cg[f"beta_{name}"][tau],
                                    "learned", None)

            s = admm_step(s, yh, oh, Lu, Ld, Ld, p, solve, self.use_dglr, self.use_dgtv)
        return (s["x"] * self.comb).sum(-1)

    def clamp_(self, max_step: float = 1.2, min_param: float = 1e-3) -> None:
        with torch.no_grad():
            for v in self.cg.values():
                v.clamp_(0.0, max_step)
            for v in self.admm.values():
                v.clamp_(min=min_param)


class Extrapolator(nn.Module):
    """First guess ``x0 = [y, forecast]`` (spec Sec. 3.3, book default): a linear map shared across nodes
    from [own last ``t_in`` values, mean of the ``k`` nearest neighbours' last ``t_in`` values, sin/cos of
    the time of day at the forecast origin, 1] to ``t_out`` values. ``kind="ridge_init"`` is warm-started
    from the closed-form ridge fit (:meth:`UnrolledGSPForecaster.init_extrapolator_from_ridge`),
    ``"scratch"`` starts from PyTorch's default initialisation, ``"last_value"`` repeats the last value."""

    def __init__(self, knn: torch.Tensor, t_in: int, t_out: int, kind: str = "ridge_init"):
        super().__init__()
        if kind not in EXTRAPOLATORS:
            raise ValueError(f"extrapolator must be one of {EXTRAPOLATORS}, got {kind!r}")
        self.kind, self.t_in, self.t_out = kind, t_in, t_out
        self.register_buffer("knn", knn.clone())
        self.lin = nn.Linear(2 * t_in + 2, t_out) if kind != "last_value" else None

    def features(self, y: torch.Tensor, tod_last: torch.Tensor) -> torch.Tensor:
        return ridge_features(y, tod_last, self.knn)

    def forward(self, y: torch.Tensor, tod: torch.Tensor) -> torch.Tensor:
        if self.lin is None:
            fc = y[:, -1:].expand(-1, self.t_out, -1)
        else:
            fc = self.lin(self.features(y, tod[:, self.t_in - 1])).transpose(1, 2)   # (B, t_out, N)
        return torch.cat([y, fc], dim=1)


def ridge_features(y: torch.Tensor, tod_last: torch.Tensor, knn: torch.Tensor) -> torch.Tensor:
    """``y (B,t_in,N)`` -> ``(B,N,2 t_in + 2)``: own history, neighbour-mean history, sin/cos time of day."""
    own = y.transpose(1, 2)                                                  # (B,N,t_in)
    nb = y[:, :, knn].mean(-1).transpose(1, 2)
    ang = 2 * math.pi * tod_last.float() / 288.0
    tf = torch.stack([torch.sin(ang), torch.cos(ang)], -1)[:, None].expand(-1, y.shape[2], -1)
    return torch.cat([own, nb, tf], dim=-1)


class UnrolledGSPForecaster(nn.Module):
    """The unrolled mixed-graph ADMM forecaster (spec Sec. 3.3): extrapolate, then ``n_blocks`` times
    [features -> learned graphs (attention) -> ``n_iter`` ADMM layers -> learned skip].

    Deviation from the released code: every block's data term ``||y - H x||^2`` of (P) fits the
    observed hour ``y`` itself, where the released code's later blocks fit the previous block's
    reconstruction. ``directed`` picks the directed-weight formula (see :class:`GraphLearningModule`).
    """

    def __init__(self, n_nodes: int, neighbors: torch.Tensor, t_in: int = 12, t_out: int = 12,
                 n_blocks: int = 2, n_iter: int = 5, cg_iters: int = 3, n_heads: int = 2, channels: int = 6,
                 interval: int = 6, k: int = 6, ablation: str = "none", learn_graphs: bool = True,
                 laplacian_dims: int = 5, extrapolator: str = "ridge_init", mu_init: float = 3.0,
                 directed: str = "book"):
        super().__init__()
        n_nodes = _check_int("n_nodes", n_nodes, 2)
        neighbors = _check_neighbors(neighbors, n_nodes)
        t_in, t_out = _check_int("t_in", t_in, 1), _check_int("t_out", t_out, 1)
        T = t_in + t_out
        for name, v in (("n_blocks", n_blocks), ("n_iter", n_iter), ("cg_iters", cg_iters),
                        ("n_heads", n_heads), ("channels", channels), ("interval", interval)):
            _check_int(name, v, 1)
        if interval > T - 1:
            raise ValueError(f"interval must be <= t_in + t_out - 1 = {T - 1}, got {interval}")
        k = _check_int("k", k, 1)
        if k >= n_nodes:
            raise ValueError(f"k must be < n_nodes = {n_nodes}, got {k}")
        if ablation not in ABLATIONS:
            raise ValueError(f"ablation must be one of {ABLATIONS}, got {ablation!r}")
        if extrapolator not in EXTRAPOLATORS:
            raise ValueError(f"extrapolator must be one of {EXTRAPOLATORS}, got {extrapolator!r}")
        if directed not in DIRECTED_WEIGHTS:
            raise ValueError(f"directed must be one of {DIRECTED_WEIGHTS}, got {directed!r}")
        self.n_nodes, self.t_in, self.t_out, self.T = n_nodes, t_in, t_out, T
        self.learn_graphs, self.ablation, self.V = learn_graphs, ablation, interval
        self.register_buffer("nbr", neighbors.clone())
        knn = neighbors[:, :k].clone()
        if bool((knn < 0).any()):
            raise ValueError(f"every node needs at least k = {k} neighbours in neighbors")
        self.register_buffer("knn", knn)
        self.register_buffer("lap", laplacian_eigvecs(neighbors, min(laplacian_dims, n_nodes - 1)))
        self.extrap = Extrapolator(knn, t_in, t_out, extrapolator)
        n_in = 1 + self.lap.shape[1] + 5
        temporal = "undirected" if ablation == "ut" else "directed"
        if learn_graphs:
            self.features = nn.ModuleList(FeatureExtractor(n_in, knn, n_heads, channels, interval)
                                          for _ in range(n_blocks))
            self.graphs = nn.ModuleList(GraphLearningModule(n_heads, channels, interval, neighbors, T,
                                                            temporal=temporal, directed=directed)
                                        for _ in range(n_blocks))
        else:
            ones = torch.ones(1, 1, n_nodes, neighbors.shape[1], 1)
            self.register_buffer("fixed_wu", normalise_spatial(ones, neighbors))
            raw = torch.ones(1, T - 1, interval, n_nodes, 1)
            self.register_buffer("fixed_wd", raw if temporal == "undirected" else normalise_directed(raw))
        self.blocks = nn.ModuleList(ADMMBlock(n_nodes, T, t_in, n_heads, n_iter, cg_iters, interval, mu_init,
                                              ablation) for _ in range(n_blocks))
        self.skip = nn.Parameter(torch.full((n_blocks,), 0.95))

    def _check_inputs(self, y, tod, dow, ymask):
        _check_tensor("y", y, 3)
        if not y.is_floating_point():
            raise TypeError(f"y must be a floating-point tensor, got {y.dtype}")
        if y.shape[1] != self.t_in or y.shape[2] != self.n_nodes:
            raise ValueError(f"y must be (B, t_in={self.t_in}, N={self.n_nodes}), got {tuple(y.shape)}")
        for name, v in (("tod", tod), ("dow", dow)):
            _check_tensor(name, v, 2)
            if v.shape != (y.shape[0], self.T):
                raise ValueError(f"{name} must be (B, T={self.T}) with B = the batch of y ({y.shape[0]}), "
                                 f"got {tuple(v.shape)}")
        if ymask is not None and ymask.shape != y.shape:
            raise ValueError(f"ymask must have the shape of y {tuple(y.shape)}, got {tuple(ymask.shape)}")

    def embed(self, tod, dow):
        B, T = tod.shape
        tf = time_features(tod, dow)[:, :, None].expand(B, T, self.n_nodes, 5)
        lap = self.lap[None, None].expand(B, T, -1, -1)
        return torch.cat([lap, tf], dim=-1)

    def graphs_for(self, b: int, x, E):
        if not self.learn_graphs:
            return self.fixed_wu, self.fixed_wd.expand(x.shape[0], -1, -1, -1, -1)
        f = self.features[b](torch.cat([x[..., None], E], dim=-1))
        return self.graphs[b](f)

    def forward(self, y: torch.Tensor, tod: torch.Tensor, dow: torch.Tensor, ymask=None) -> torch.Tensor:
        """``y (B,t_in,N)`` z-scored (missing = 0), ``tod, dow (B,T)`` -> ``x (B,T,N)`` z-scored."""
        self._check_inputs(y, tod, dow, ymask)
        y = y.to(self.lap.dtype)
        ypad, obs = _obs_pad(y, self.t_in, self.T, ymask)
        x = self.extrap(y, tod)
        E = self.embed(tod, dow)
        for b, block in enumerate(self.blocks):
            wu, wd = self.graphs_for(b, x, E)
            x_new = block(x, ypad, obs, wu, wd, self.nbr, check=False)   # nbr checked in __init__
            x = self.skip[b] * x_new + (1 - self.skip[b]) * x
        return x

    def clamp_(self, max_step: float = 1.2) -> None:
        """After every optimiser step: CG steps to [0, max_step], mu and rho to >= 1e-3 (book choice)."""
        for b in self.blocks:
            b.clamp_(max_step)

    @torch.no_grad()
    def init_extrapolator_from_ridge(self, windows: dict, alpha: float = 1.0) -> None:
        """Closed-form ridge fit of the linear extrapolator on the training windows (book default)."""
        if self.extrap.lin is None:
            raise ValueError("init_extrapolator_from_ridge needs a linear extrapolator (not 'last_value')")
        W, b = fit_ridge(windows["train"], self.knn.cpu(), self.t_in, alpha)
        self.extrap.lin.weight.copy_(W.T.to(self.extrap.lin.weight))
        self.extrap.lin.bias.copy_(b.to(self.extrap.lin.bias))

    @torch.no_grad()
    def attention_maps(self, y, tod, dow, ymask=None) -> list[dict]:
        """Learned graph weights per block: ``{"spatial": (B,T,N,K,H), "temporal": (B,T-1,V,N,H)}``."""
        self._check_inputs(y, tod, dow, ymask)
        ypad, obs = _obs_pad(y, self.t_in, self.T, ymask)
        x = self.extrap(y, tod)
        E = self.embed(tod, dow)
        out = []
        for b, block in enumerate(self.blocks):
            wu, wd = self.graphs_for(b, x, E)
            out.append({"spatial": wu, "temporal": wd})
            x = self.skip[b] * block(x, ypad, obs, wu, wd, self.nbr, check=False) + (1 - self.skip[b]) * x
        return out


def fit_ridge(split: dict, knn: torch.Tensor, t_in: int, alpha: float = 1.0):
    """Closed-form ridge ``(F'F + alpha I) W = F'Y`` per horizon step (rows with a missing target dropped).

    Returns ``W (F, t_out)`` and bias ``(t_out,)`` for :func:`ridge_features` (+ a constant column).
    """
    alpha = _check_num("alpha", alpha)
    x, mask = split["x"].double(), split["mask"]
    F = ridge_features(x[:, :t_in], split["tod"][:, t_in - 1], knn).reshape(-1, 2 * t_in + 2)
    F = torch.cat([F, torch.ones(F.shape[0], 1, dtype=F.dtype)], dim=1)
    Y = x[:, t_in:].transpose(1, 2).reshape(-1, x.shape[1] - t_in)
    M = mask[:, t_in:].transpose(1, 2).reshape(-1, x.shape[1] - t_in).double()
    cols = []
    eye = torch.eye(F.shape[1], dtype=F.dtype)
    for j in range(Y.shape[1]):
        Fm = F * M[:, j:j + 1]
        cols.append(torch.linalg.solve(Fm.T @ F + alpha * eye, Fm.T @ Y[:, j]))
    Wb = torch.stack(cols, dim=1)
    return Wb[:-1].float(), Wb[-1].float()


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
