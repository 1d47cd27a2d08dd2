r"""The characterization: fixed point, CGMT auxiliary min-max and the projection law.

**Provenance.** The theorem statements of Yaakoubi, Louart, Tiomoko & Liao (ICML 2026,
arXiv:2604.03146) were not public in full when this chapter was written. Every equation in this
module is *the book's own derivation* for the linear-factor-mixture data of
:mod:`icml26.cgmt.method` (Gaussian bulk, discrete latent law), obtained with the Convex Gaussian
Min-max Theorem (Thrampoulidis, Abbasi & Hassibi 2018) and checked against simulations. It
instantiates the paper's three headline statements: (T1) the projection law, (T2) a min-max
characterization of the estimator's mean and covariance, (T3) the C^2-regulariser/quadratic
equivalence. They are kept together here so that they can be swapped for the paper's form.

Notation (Sec. 3.3 of the chapter spec): ``M_kappa`` and ``prox_kappa`` are the Moreau envelope and
proximal map of the loss; unknowns ``w (K,)`` (mean ``mu = V w``), ``c >= 0``, ``kappa > 0``,
``D >= 0``; derived ``A = G w = V^T mu``, ``q = w^T G w = ||mu||^2``, ``tau = sqrt(q + c)``,
``Lambda = lam psi''(0) + D``. Scalar channel, ``xi ~ N(0, 1)``:

.. math::  r_- = f^\top A + \tau\xi,\quad r = \mathrm{prox}_\kappa(y, r_-),\quad g = (r - r_-)/\kappa.

.. math::
   (E1)\ D = \mathbb E\Big[\tfrac{L''(yr)}{1+\kappa L''(yr)}\Big] \qquad
   (E2)\ \Lambda = \lambda\psi''(0) + D,\ \kappa = \tfrac{1}{\alpha\Lambda}

.. math::
   (E3)\ w = \arg\min_w\ \mathbb E\,M_\kappa(y, f^\top G w + \tau\xi) + \rho(Vw) + \tfrac D2 w^\top G w \qquad
   (E4)\ c = \tfrac{\mathbb E g^2}{\alpha\Lambda^2},\ \tau^2 = q + c

Projection law (T1): ``theta^T x ~ f^T A + tau xi`` for a fresh ``(y, f, x)``; test error
``E Phi(-y f^T A / tau)``.

Min-max (T2, Sec. 3.4), ridge and identity bulk, ``G = R^T R``, ``omega = R w``, ``beta = sqrt(c)``,
``varrho = sqrt(||omega||^2 + beta^2)``, ``kappa(beta, t) = beta / (t sqrt(alpha))``:

.. math:: \min_{\omega,\beta\ge0}\max_{t>0}\ \mathbb E\,M_{\kappa(\beta,t)}(y, f^\top R^\top\omega+\varrho\xi)
          - \frac{\beta t}{2\sqrt\alpha} + \frac\lambda2\varrho^2 .
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..core import one_thread
from .method import (
    DTYPE,
    LFMM,
    LOSSES,
    LatentLaw,
    SeparableReg,
    _check_loss,
    _check_positive,
    check_smooth_reg,
    gauss_hermite,
    loss_d2,
    loss_value,
    prox,
)

SQRT2PI = math.sqrt(2 * math.pi)


# The solvers work on tensors of a few thousand entries, where extra threads only add
# synchronisation (10x slower on a busy 2-core machine): they run with one thread.
single_thread = one_thread()


@dataclass
class State:
    """A solution of (E1)-(E4) (or of the min-max): the estimator's asymptotic statistics."""

    w: Tensor            # (K,) mean coefficients, mu = V w
    A: Tensor            # (K,) overlaps V^T mu
    q: float             # ||mu||^2
    c: float             # tr C (fluctuation energy)
    kappa: float         # (1/n) tr H^{-1}
    D: float             # E[L''/(1 + kappa L'')]
    Lam: float           # lam psi''(0) + D
    tau: float           # sqrt(q + c): score standard deviation given f
    n_iter: int = 0
    converged: bool = True
    residual: float = 0.0
    Eg2: float = float("nan")   # E[g^2]
    loss: str = ""
    alpha: float = float("nan")
    t_star: float = float("nan")  # the AO maximiser (solve_ao_cvxpy only)
    trace: list = field(default_factory=list)

    @property
    def norm2(self) -> float:
        """Predicted ``||theta_hat||^2 = q + c``."""
        return self.q + self.c


def square_kappa_closed_form(alpha: float, lam: float) -> float:
    """Square loss + ridge: the positive root of ``alpha lam k^2 + (alpha lam + alpha - 1) k - 1 = 0``.

    Equals ``gamma m(-lam)`` with ``gamma = 1/alpha`` and ``m`` the Stieltjes transform of the
    Marchenko-Pastur law (Hastie et al. 2019). ``lam = 0`` (least squares) needs ``alpha > 1``,
    where ``kappa = 1/(alpha - 1)``; ``lam < 0`` is rejected.
    """
    _check_positive("alpha", alpha)
    _check_positive("lam", lam, strict=False)
    if lam == 0:
        if alpha <= 1:
            raise ValueError(f"lam must be > 0 when alpha <= 1 (alpha={alpha}): least squares has no "
                             "unique solution and kappa is infinite")
        return 1 / (alpha - 1)
    b = alpha * lam + alpha - 1
    return (-b + math.sqrt(b * b + 4 * alpha * lam)) / (2 * alpha * lam)


# ----------------------------------------------------------------------------------------------
# the scalar channel: expectations over (y, f) atoms and xi
# ----------------------------------------------------------------------------------------------
@dataclass
class Channel:
    EM: float     # E M_kappa(y, r_-)
    Egf: Tensor   # (K,) E[g f]
    Eg2: float    # E[g^2]
    D: float      # E[(1 - d prox / d v) / kappa] = E[L''/(1+kappa L'')]   (E1)
    Edff: Tensor  # (K, K) E[d f f^T]


def _ndtr(x: Tensor) -> Tensor:
    return torch.special.ndtr(x)


def _npdf(x: Tensor) -> Tensor:
    return torch.exp(-0.5 * x**2) / SQRT2PI


def channel(loss: str, law: LatentLaw, A: Tensor, tau: float, kappa: float, xi: Tensor, wxi: Tensor) -> Channel:
    """Expectations of the scalar channel at ``(A, tau, kappa)``.

    Smooth losses: Gauss-Hermite nodes ``xi`` (weights ``wxi``) times the atoms of ``law``.
    Hinge: the ``xi``-integral of each atom is done in closed form (``g`` is piecewise linear in
    ``xi``, so quadrature would converge slowly): with ``s = y r_- = b + tau xi'``, ``b = y f^T A``,
    ``g = y h(s)``, ``h = 1`` below ``1 - kappa``, ``(1 - s)/kappa`` in between, ``0`` above 1.
    """
    a = law.f @ A                                                    # (N_a,) f^T A
    y, pi, f = law.y, law.probs, law.f
    if loss == "hinge":
        b = y * a
        lo, hi = (1 - kappa - b) / tau, (1 - b) / tau
        P1, P2 = _ndtr(lo), _ndtr(hi) - _ndtr(lo)
        dphi = _npdf(lo) - _npdf(hi)                                  # int_lo^hi x phi
        x2 = P2 + lo * _npdf(lo) - hi * _npdf(hi)                     # int_lo^hi x^2 phi
        c0 = 1 - b
        zone1 = c0 * P2 - tau * dphi                                  # int (1 - s) phi
        zone2 = c0**2 * P2 - 2 * c0 * tau * dphi + tau**2 * x2        # int (1 - s)^2 phi
        Eh = P1 + zone1 / kappa
        Eh2 = P1 + zone2 / kappa**2
        EM = (c0 - kappa / 2) * P1 + tau * _npdf(lo) + zone2 / (2 * kappa)
        d = P2 / kappa
        Egf = (pi * y * Eh) @ f
        return Channel(float(pi @ EM), Egf, float(pi @ Eh2), float(pi @ d),
                       (f * (pi * d)[:, None]).T @ f)
    r_minus = a[:, None] + tau * xi[None, :]                           # (N_a, n_q)
    Y = y[:, None]
    r = prox(loss, r_minus, Y, kappa)                                  # training score
    g = (r - r_minus) / kappa                                          # = -y L'(y r)
    l2 = loss_d2(loss, Y * r)
    d = l2 / (1 + kappa * l2)
    W = pi[:, None] * wxi[None, :]                                     # (N_a, n_q)
    M = loss_value(loss, Y * r) + (r - r_minus) ** 2 / (2 * kappa)
    g_a, d_a = (W * g).sum(1), (W * d).sum(1)                          # per-atom sums (N_a,)
    return Channel(float((W * M).sum()), g_a @ f, float((W * g**2).sum()), float(d_a.sum()),
                   (f * d_a[:, None]).T @ f)


def _inner_argmin(w: Tensor, model: LFMM, law: LatentLaw, loss: str, reg: SeparableReg, kappa: float,
                  tau: float, D: float, xi: Tensor, wxi: Tensor, tol: float = 1e-13, max_iter: int = 60
                  ) -> Tensor:
    """(E3): ``argmin_w E M_kappa(y, f^T G w + tau xi) + rho(V w) + D/2 w^T G w`` by damped Newton (K x K)."""
    G, V = model.gram, model.V

    def J(w):
        ch = channel(loss, law, G @ w, tau, kappa, xi, wxi)
        return ch.EM + float(reg.value(V @ w)) + 0.5 * D * float(w @ G @ w), ch

    Jw, ch = J(w)
    for _ in range(max_iter):
        mu = V @ w                                                        # (p,)
        grad = -G @ ch.Egf + V.T @ reg.grad(mu) + D * (G @ w)             # dJ/dw, since dM/dv = -g
        H = G @ ch.Edff @ G + V.T @ (reg.hess_diag(mu)[:, None] * V) + D * G
        step = -torch.linalg.solve(H, grad)
        decrement = -float(grad @ step)                                   # Newton decrement^2
        if float(grad.abs().max()) < tol:
            break
        if decrement < 1e-18:                      # inside the quadratic zone: full Newton steps,
            w = w + step                           # function values are below round-off here
            Jw, ch = J(w)
            continue
        s = 1.0
        for _ in range(30):
            J_new, ch_new = J(w + s * step)
            if J_new <= Jw - 1e-4 * s * decrement + 1e-15 * (1 + abs(Jw)):
                break
            s /= 2
        else:                                                             # no descent left: round-off
            break
        w, Jw, ch = w + s * step, J_new, ch_new
    return w


def _validate_solver_args(alpha, loss, reg, n_quad, damping, tol):
    _check_positive("alpha", alpha)
    _check_loss(loss)
    check_smooth_reg(reg)
    if reg.lam == 0 and alpha <= 1:
        raise ValueError(
            f"lam must be > 0 when alpha <= 1 (alpha={alpha}): the ERM is not unique and may diverge"
        )
    if isinstance(n_quad, bool) or not isinstance(n_quad, int) or n_quad < 5:
        raise ValueError(f"n_quad must be an int >= 5, got {n_quad!r}")
    if not (isinstance(damping, (int, float)) and 0 < damping <= 1):
        raise ValueError(f"damping must be in (0, 1], got {damping!r}")
    _check_positive("tol", tol)


@single_thread
def solve_fixed_point(alpha: float, model: LFMM, loss: str, reg: SeparableReg, n_quad: int = 61,
                      damping: float = 0.5, tol: float = 1e-10, max_iter: int = 2000,
                      inner: str = "newton", gaussian_equivalent: bool = False, ge_nodes: int = 41,
                      record_trace: bool = False) -> State:
    """Algorithm 1: solve (E1)-(E4) by damped iteration with a nested convex inner step (E3).

    ``inner="newton"`` minimises (E3) exactly (K-dim Newton, warm-started); ``inner="naive"`` uses
    the explicit ridge update ``w <- E[g f] / Lambda`` (the stationarity condition of (E3)), which
    diverges for the square loss when ``E||f||^2`` is large. ``gaussian_equivalent=True`` solves
    the same equations for the Gaussian-equivalent latent law (``ge_nodes`` Gauss-Hermite nodes
    per latent dimension). Non-convergence returns ``converged=False`` with a ``RuntimeWarning``.
    """
    _validate_solver_args(alpha, loss, reg, n_quad, damping, tol)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
    if inner not in ("newton", "naive"):
        raise ValueError(f"inner must be 'newton' or 'naive', got {inner!r}")
    if inner == "naive" and reg.name != "ridge":
        raise ValueError("inner='naive' is the ridge update w = E[g f] / Lambda; use inner='newton'")
    if model.sigma is not None:
        raise ValueError("solve_fixed_point covers the identity bulk covariance (sigma=None) only")
    law = model.law.gaussian_equivalent(ge_nodes) if gaussian_equivalent else model.law
    xi, wxi = gauss_hermite(n_quad)
    G = model.gram
    lam0 = reg.lam * reg.d2psi0                                       # lam psi''(0)
    w = torch.zeros(model.K, dtype=DTYPE)
    c, kappa, D, tau = 0.5, 1.0, 0.2, 1.0                             # Algorithm 1, step 2
    trace, change, k = [], float("inf"), 0
    ch = None
    for k in range(1, max_iter + 1):
        if inner == "newton":                                          # (E3), nested convex step
            w_new = _inner_argmin(w, model, law, loss, reg, kappa, tau, D, xi, wxi)
        else:                                                          # naive explicit update
            ch = channel(loss, law, G @ w, tau, kappa, xi, wxi)
            w_new = (1 - damping) * w + damping * ch.Egf / (lam0 + D)
        A = G @ w_new                                                  # overlaps (K,)
        q = float(w_new @ A)
        ch = channel(loss, law, A, tau, kappa, xi, wxi)
        D_new = ch.D                                                   # (E1)
        Lam = lam0 + D_new                                             # (E2)
        kappa_new = 1 / (alpha * Lam)
        c_new = ch.Eg2 / (alpha * Lam**2)                              # (E4)
        tau_new = math.sqrt(q + c_new)
        change = (abs(D_new - D) + abs(kappa_new - kappa) + abs(c_new - c) + abs(tau_new - tau)
                  + float((w_new - w).abs().sum()))
        D = (1 - damping) * D + damping * D_new
        kappa = (1 - damping) * kappa + damping * kappa_new
        c = (1 - damping) * c + damping * c_new
        tau = (1 - damping) * tau + damping * tau_new
        w = w_new
        if record_trace:
            trace.append({"iteration": k, "A": A.tolist(), "c": c, "kappa": kappa, "change": change})
        if not math.isfinite(change) or change > 1e8:
            break
        if change < tol:
            break
    converged = math.isfinite(change) and change < tol
    if not converged:
        warnings.warn(f"solve_fixed_point did not converge after {k} iterations (last change {change:.3g})",
                      RuntimeWarning, stacklevel=2)
    A = G @ w
    q = float(w @ A)
    Lam = lam0 + D
    if not (all(math.isfinite(x) for x in (q, c, kappa, D)) and bool(torch.isfinite(w).all())):
        raise ValueError(f"solve_fixed_point diverged to non-finite values after {k} iterations with "
                         f"damping={damping} (inner={inner!r}): use a smaller damping")
    return State(w=w, A=A, q=q, c=c, kappa=kappa, D=D, Lam=Lam, tau=math.sqrt(max(q + c, 0.0)),
                 n_iter=k, converged=converged, residual=change, Eg2=ch.Eg2 if ch else float("nan"),
                 loss=loss, alpha=float(alpha), trace=trace)


# ----------------------------------------------------------------------------------------------
# the CGMT auxiliary problem solved with cvxpy (Sec. 3.4)
# ----------------------------------------------------------------------------------------------
class _AOProblem:
    """The inner minimisation of Phi(omega, beta, t) at fixed t as a DPP cvxpy problem."""

    def __init__(self, alpha: float, model: LFMM, loss: str, lam: float, n_quad: int):
        import cvxpy as cp

        law = model.law
        xi, wxi = gauss_hermite(n_quad)
        W = (law.probs[:, None] * wxi[None, :]).reshape(-1).numpy()          # (N,) weights
        keep = W > 1e-13                                                      # drop negligible nodes
        Y = law.y[:, None].expand(-1, n_quad).reshape(-1).numpy()[keep]
        F = law.f[:, None, :].expand(-1, n_quad, -1).reshape(-1, law.K).numpy()[keep]
        XI = xi[None, :].expand(law.probs.shape[0], -1).reshape(-1).numpy()[keep]
        W = W[keep]
        self.R = torch.linalg.cholesky(model.gram).T.numpy()                  # G = R^T R
        K, N = law.K, W.shape[0]
        self.omega, self.beta = cp.Variable(K), cp.Variable(nonneg=True)
        self.varrho, r = cp.Variable(nonneg=True), cp.Variable(N)
        self.t = cp.Parameter(nonneg=True)
        s = (F @ self.R.T) @ self.omega + cp.multiply(XI, self.varrho)         # f^T R^T omega + varrho xi
        yr = cp.multiply(Y, r)
        if loss == "logistic":
            Lsum = W @ cp.logistic(-yr)
        elif loss == "square":
            Lsum = W @ (0.5 * cp.square(1 - yr))
        else:
            Lsum = W @ cp.pos(1 - yr)
        sa = math.sqrt(alpha)
        obj = (Lsum + self.t * (sa / 2) * cp.quad_over_lin(cp.multiply(np.sqrt(W), r - s), self.beta)
               - self.beta * self.t / (2 * sa) + (lam / 2) * cp.square(self.varrho))
        cons = [cp.norm(cp.hstack([self.omega, self.beta])) <= self.varrho]
        self.problem = cp.Problem(cp.Minimize(obj), cons)

    def value(self, t: float) -> float:
        self.t.value = float(t)
        with warnings.catch_warnings():          # "optimal_inaccurate" is accepted: the notebook and
            warnings.simplefilter("ignore", UserWarning)   # tests compare the result with the fixed point
            self.problem.solve(solver="CLARABEL")
        if self.problem.status not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"cvxpy returned status {self.problem.status} at t={t}")
        return float(self.problem.value)


def _check_ao_args(alpha, model, loss, lam, n_quad, t_bounds=(1e-3, 10.0)):
    _check_positive("alpha", alpha)
    _check_loss(loss)
    if isinstance(lam, SeparableReg):
        raise ValueError("solve_ao_cvxpy takes the ridge strength lam (a float); other regularisers "
                         "are handled by solve_fixed_point")
    _check_positive("lam", lam, strict=False)
    if lam == 0 and alpha <= 1:
        raise ValueError(f"lam must be > 0 when alpha <= 1 (alpha={alpha})")
    if model.sigma is not None:
        raise ValueError("solve_ao_cvxpy covers the identity bulk covariance only (sigma must be None)")
    if isinstance(n_quad, bool) or not isinstance(n_quad, int) or n_quad < 5:
        raise ValueError(f"n_quad must be an int >= 5, got {n_quad!r}")
    lo, hi = t_bounds
    if not (lo > 0 and hi > lo):
        raise ValueError(f"t_bounds must be positive and increasing, got {t_bounds!r}")


def ao_value(t: float, alpha: float, model: LFMM, loss: str, lam: float, n_quad: int = 41,
             _problem: _AOProblem | None = None) -> float:
    """``min_{omega, beta} Phi(omega, beta, t)`` at fixed ``t`` (concave in ``t``)."""
    _check_ao_args(alpha, model, loss, lam, n_quad)
    problem = _problem or _AOProblem(alpha, model, loss, lam, n_quad)
    return problem.value(t)


@single_thread
def ao_curve(ts, alpha: float, model: LFMM, loss: str, lam: float, n_quad: int = 41) -> list[float]:
    """``min_{omega,beta} Phi(., ., t)`` on a grid of ``t`` (one compiled problem, re-solved per t)."""
    _check_ao_args(alpha, model, loss, lam, n_quad)
    problem = _AOProblem(alpha, model, loss, lam, n_quad)
    return [problem.value(float(t)) for t in ts]


@single_thread
def solve_ao_cvxpy(alpha: float, model: LFMM, loss: str, lam: float, n_quad: int = 41,
                   t_bounds=(1e-3, 10.0), xatol: float = 1e-8) -> State:
    """Algorithm 2: the min-max of Sec. 3.4 (ridge, identity bulk): cvxpy (Clarabel) for the
    convex inner minimisation, ``scipy.optimize.minimize_scalar`` for the concave outer max in ``t``."""
    from scipy.optimize import minimize_scalar

    _check_ao_args(alpha, model, loss, lam, n_quad, t_bounds)
    pb = _AOProblem(alpha, model, loss, lam, n_quad)
    res = minimize_scalar(lambda t: -pb.value(t), bounds=tuple(t_bounds), method="bounded",
                          options={"xatol": xatol})
    t_star = float(res.x)
    pb.value(t_star)
    omega = torch.tensor(pb.omega.value, dtype=DTYPE)
    beta = float(pb.beta.value)
    R = torch.tensor(pb.R, dtype=DTYPE)
    w = torch.linalg.solve_triangular(R, omega[:, None], upper=True)[:, 0]
    A = R.T @ omega                                                       # A = R^T omega = G w
    q, c = float(omega @ omega), beta**2
    kappa = beta / (t_star * math.sqrt(alpha))                            # kappa(beta, t)
    Lam = 1 / (alpha * kappa)
    return State(w=w, A=A, q=q, c=c, kappa=kappa, D=Lam - lam, Lam=Lam, tau=math.sqrt(q + c),
                 n_iter=int(res.nfev), converged=bool(res.success), Eg2=t_star**2, loss=loss,
                 alpha=float(alpha), t_star=t_star)


# ----------------------------------------------------------------------------------------------
# the projection law (T1): test-score densities, CDFs, error, Gaussian baselines
# ----------------------------------------------------------------------------------------------
def _class_atoms(law: LatentLaw, state: State, label: int) -> tuple[Tensor, Tensor]:
    if label not in (-1, 1):
        raise ValueError(f"y must be -1 or +1, got {label!r}")
    sel = law.y == label
    pi = law.probs[sel]
    return pi / pi.sum(), law.f[sel] @ state.A                            # weights, means f^T A


def score_density(state: State, law: LatentLaw, grid: Tensor, y: int) -> Tensor:
    """``p(t | y) = E_{f|y} phi_tau(t - f^T A)``: the test-score density of (T1), on ``grid``."""
    pi, m = _class_atoms(law, state, y)
    grid = torch.as_tensor(grid, dtype=DTYPE)
    return (pi * _npdf((grid[:, None] - m) / state.tau)).sum(1) / state.tau


def score_cdf(state: State, law: LatentLaw, t: Tensor, y: int) -> Tensor:
    """``P(score <= t | y) = E_{f|y} Phi((t - f^T A) / tau)``."""
    pi, m = _class_atoms(law, state, y)
    t = torch.as_tensor(t, dtype=DTYPE)
    return (pi * _ndtr((t[:, None] - m) / state.tau)).sum(1)


def test_error(state: State, law: LatentLaw) -> float:
    """``E_{(y,f)} Phi(-y f^T A / tau)``: the classification error of sign(score)."""
    return float(law.probs @ _ndtr(-law.y * (law.f @ state.A) / state.tau))


def moment_matched_gaussian(state: State, law: LatentLaw, y: int) -> tuple[float, float]:
    """``(mean, std)`` of the Gaussian with the same first two moments as the true score given ``y``."""
    pi, m = _class_atoms(law, state, y)
    mean = float(pi @ m)
    var = float(pi @ (m - mean) ** 2) + state.tau**2
    return mean, math.sqrt(var)


def sample_scores(state: State, law: LatentLaw, n: int, generator: torch.Generator | None = None
                  ) -> dict[str, Tensor]:
    """Draw from the theory: labels, test/leave-one-out scores ``r_-`` and training scores ``r = prox(r_-)``."""
    if state.loss not in LOSSES:
        raise ValueError("state.loss must be set (a State returned by a solver)")
    y, f = law.sample(n, generator)
    r_minus = f @ state.A + state.tau * torch.randn(n, generator=generator, dtype=DTYPE)
    return {"y": y, "test": r_minus, "train": prox(state.loss, r_minus, y, state.kappa)}
