r"""Data model and estimator of *Characterization of Gaussian Universality Breakdown in
High-Dimensional Empirical Risk Minimization* (Yaakoubi, Louart, Tiomoko, Liao; ICML 2026,
arXiv:2604.03146).

The paper studies a linear model fitted by convex empirical risk minimisation (ERM),

.. math::  \hat\theta=\arg\min_{\theta\in\mathbb R^p}\ \frac1n\sum_{i=1}^n L(y_i\,\theta^\top x_i)+\rho(\theta),
   \qquad (\text{ERM})

on non-Gaussian data, and shows that the test score :math:`\hat\theta^\top x` is the sum of a
non-Gaussian part :math:`\mu^\top x` and an independent Gaussian (the projection law). This module
holds the *data* and the *estimator*; the characterization lives in :mod:`icml26.cgmt.theory`.

Data: the book's instance of a "general non-Gaussian design" is a linear factor mixture
(Mai & Liao, arXiv:2410.05609)

.. math::  x = V f + \Sigma^{1/2} z,\qquad (y,f)\sim P_{y,f}\ \text{(discrete atoms)},\quad z\sim\mathcal N(0,I_p),

with ``V`` of shape ``(p, K)``. **Normalisation** (every constant depends on it): the entries of
``x`` are O(1), ``||V||`` is O(1) column-wise, ``||theta||`` is O(1), the loss is averaged over
``n`` samples and ``alpha = n / p`` is fixed.

Losses are margin losses ``L(y * score)``: logistic ``log(1+e^{-t})``, square ``(1-t)^2/2`` and
hinge ``max(0, 1-t)`` (hinge: proximal map, theory and cvxpy only). Regularisers are separable,
``rho(theta) = lam * sum_j psi(theta_j)`` with ``psi`` in C^2, ``psi(0)=psi'(0)=0``, ``psi''(0)=1``
(ridge, log-cosh, pseudo-Huber, quartic); ``l1`` exists only for the cvxpy reference solver.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

DTYPE = torch.float64
LOSSES = ("logistic", "square", "hinge")
SMOOTH_LOSSES = ("logistic", "square")


# ----------------------------------------------------------------------------------------------
# validation helpers
# ----------------------------------------------------------------------------------------------
def _check_loss(loss: str, allowed: tuple[str, ...] = LOSSES) -> None:
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if loss not in allowed:
        raise ValueError(
            f"loss={loss!r} is not supported here (allowed: {allowed}); "
            "the hinge loss is not differentiable: use fit_erm_cvxpy for hinge ERM"
        )


def _check_finite(name: str, t: Tensor) -> None:
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite (found NaN or Inf)")


def _check_labels(name: str, y: Tensor) -> None:
    if not bool(((y == 1) | (y == -1)).all()):
        raise ValueError(f"{name} must hold labels in {{-1, +1}}")


def _check_positive(name: str, value: float, strict: bool = True) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or (value <= 0 if strict else value < 0):
        raise ValueError(f"{name} must be {'> 0' if strict else '>= 0'} and finite, got {value}")


# ----------------------------------------------------------------------------------------------
# the latent law P_{y,f} and its Gaussian equivalent
# ----------------------------------------------------------------------------------------------
def gauss_hermite(n: int) -> tuple[Tensor, Tensor]:
    """Probabilists' Gauss-Hermite nodes and weights (weights sum to 1): E h(xi) ~ sum w_j h(xi_j)."""
    xi, wts = np.polynomial.hermite_e.hermegauss(n)
    return torch.tensor(xi, dtype=DTYPE), torch.tensor(wts / wts.sum(), dtype=DTYPE)


@dataclass
class LatentLaw:
    """A discrete law of ``(y, f)``: atoms ``(y_a, f_a)`` with probabilities ``probs_a``.

    Shapes: ``probs (N_a,)``, ``y (N_a,)`` in {-1,+1}, ``f (N_a, K)``. Non-Gaussianity of the data
    lives here. ``gaussian_equivalent`` replaces ``f | y`` by the Gaussian with the same
    class-conditional mean and covariance (a Gauss-Hermite grid of atoms, for the theory);
    ``sample_gaussian_equivalent`` draws exact Gaussians (for simulation; never the grid).
    """

    probs: Tensor
    y: Tensor
    f: Tensor

    def __post_init__(self):
        self.probs = torch.as_tensor(self.probs, dtype=DTYPE)
        self.y = torch.as_tensor(self.y, dtype=DTYPE)
        self.f = torch.as_tensor(self.f, dtype=DTYPE)
        if self.f.ndim == 1:
            self.f = self.f[:, None]
        if self.probs.ndim != 1 or self.y.ndim != 1:
            raise ValueError("probs and y must be 1-D tensors of atoms")
        if self.f.ndim != 2:
            raise ValueError(f"f must have shape (N_atoms, K), got {tuple(self.f.shape)}")
        n_a = self.probs.shape[0]
        if self.y.shape[0] != n_a or self.f.shape[0] != n_a:
            raise ValueError(
                f"probs, y and f must have the same number of atoms, got {n_a}, "
                f"{self.y.shape[0]}, {self.f.shape[0]}"
            )
        for name in ("probs", "y", "f"):
            _check_finite(name, getattr(self, name))
        if (self.probs < 0).any():
            raise ValueError("probs must be non-negative")
        if abs(float(self.probs.sum()) - 1.0) > 1e-9:
            raise ValueError(f"probs must sum to 1 (tolerance 1e-9), got {float(self.probs.sum())!r}")
        _check_labels("y", self.y)

    @property
    def K(self) -> int:
        return self.f.shape[1]

    def class_moments(self, label: int) -> tuple[float, Tensor, Tensor]:
        """``(P(y=label), E[f | y], Cov(f | y))`` with shapes ``(), (K,), (K, K)``."""
        sel = self.y == label
        pi = self.probs[sel]
        mass = float(pi.sum())
        if mass <= 0:
            raise ValueError(f"the law has no atom with label {label}")
        fa = self.f[sel]
        mean = (pi[:, None] * fa).sum(0) / mass
        cen = fa - mean
        cov = (pi[:, None, None] * cen[:, :, None] * cen[:, None, :]).sum(0) / mass
        return mass, mean, cov

    def _class_factor(self, label: int) -> tuple[float, Tensor, Tensor, Tensor]:
        """Mean and a factor ``Lc`` of ``Cov(f|y)`` on its random coordinates (deterministic ones kept)."""
        mass, mean, cov = self.class_moments(label)
        var = torch.diagonal(cov)
        rand = var > 1e-12 * max(1.0, float(var.max()))
        idx = torch.nonzero(rand).flatten()
        if idx.numel() == 0:
            return mass, mean, idx, torch.zeros(0, 0, dtype=DTYPE)
        sub = cov[idx][:, idx]
        chol, info = torch.linalg.cholesky_ex(sub)
        if int(info) != 0:
            raise ValueError(
                f"Cov(f | y={label}) is singular on coordinates {idx.tolist()}: coordinate "
                f"{int(idx[int(info) - 1])} is a linear function of the others; the Gaussian "
                "equivalent needs a Cholesky factor (drop or merge that coordinate)"
            )
        return mass, mean, idx, chol

    def gaussian_equivalent(self, n_nodes: int = 41) -> LatentLaw:
        """The Gaussian-equivalent law on a Gauss-Hermite tensor grid: ``f | y ~ N(E[f|y], Cov(f|y))``.

        Zero-variance coordinates stay deterministic; the grid has ``n_nodes ** k_y`` atoms per
        class, ``k_y`` the number of random coordinates of class ``y``.
        """
        if isinstance(n_nodes, bool) or not isinstance(n_nodes, int) or n_nodes < 2:
            raise ValueError(f"n_nodes must be an int >= 2, got {n_nodes!r}")
        xi, wt = gauss_hermite(n_nodes)
        probs, ys, fs = [], [], []
        for label in (-1, 1):
            if not bool((self.y == label).any()):
                continue
            mass, mean, idx, chol = self._class_factor(label)
            k = idx.numel()
            if k == 0:
                nodes, weights = torch.zeros(1, 0, dtype=DTYPE), torch.ones(1, dtype=DTYPE)
            else:
                grids = torch.meshgrid(*([xi] * k), indexing="ij")
                nodes = torch.stack([g.reshape(-1) for g in grids], dim=1)  # (n^k, k)
                wgrids = torch.meshgrid(*([wt] * k), indexing="ij")
                weights = torch.stack([g.reshape(-1) for g in wgrids], 1).prod(1)  # (n^k,)
            f = mean.expand(weights.shape[0], -1).clone()  # (n^k, K)
            if k:
                f[:, idx] += nodes @ chol.T
            probs.append(mass * weights)
            ys.append(torch.full((weights.shape[0],), float(label), dtype=DTYPE))
            fs.append(f)
        probs = torch.cat(probs)
        return LatentLaw(probs / probs.sum(), torch.cat(ys), torch.cat(fs))

    def sample(self, n: int, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """Exact draws: ``y (n,)``, ``f (n, K)``."""
        idx = torch.multinomial(self.probs, n, replacement=True, generator=generator)
        return self.y[idx], self.f[idx]

    def sample_gaussian_equivalent(self, n: int, generator: torch.Generator | None = None
                                   ) -> tuple[Tensor, Tensor]:
        """Exact Gaussian-equivalent draws: ``y`` from the class masses, then ``f = E[f|y] + Lc eps``."""
        y = torch.empty(n, dtype=DTYPE)
        f = torch.empty(n, self.K, dtype=DTYPE)
        labels = [lab for lab in (-1, 1) if bool((self.y == lab).any())]
        masses = torch.tensor([self.class_moments(lab)[0] for lab in labels], dtype=DTYPE)
        cls = torch.multinomial(masses, n, replacement=True, generator=generator)
        eps = torch.randn(n, self.K, generator=generator, dtype=DTYPE)
        for j, label in enumerate(labels):
            sel = cls == j
            _, mean, idx, chol = self._class_factor(label)
            fj = mean.expand(int(sel.sum()), -1).clone()
            if idx.numel():
                fj[:, idx] += eps[sel][:, : idx.numel()] @ chol.T
            y[sel], f[sel] = float(label), fj
        return y, f


# ----------------------------------------------------------------------------------------------
# the linear factor mixture model x = V f + Sigma^{1/2} z
# ----------------------------------------------------------------------------------------------
@dataclass
class LFMM:
    """Linear factor mixture ``x = V f + Sigma^{1/2} z`` (``V (p, K)``, ``sigma (p,)`` diagonal or None)."""

    V: Tensor
    law: LatentLaw
    sigma: Tensor | None = None

    def __post_init__(self):
        if not isinstance(self.law, LatentLaw):
            raise TypeError(f"law must be a LatentLaw, got {type(self.law).__name__}")
        self.V = torch.as_tensor(self.V, dtype=DTYPE)
        if self.V.ndim != 2:
            raise ValueError(f"V must be 2-D (p, K), got shape {tuple(self.V.shape)}")
        _check_finite("V", self.V)
        if self.V.shape[1] != self.law.K:
            raise ValueError(f"V has K={self.V.shape[1]} columns but the law has K={self.law.K} factors")
        eig = torch.linalg.eigvalsh(self.gram)
        if float(eig.min()) <= 1e-10 * max(1.0, float(eig.max())):
            raise ValueError("V must have full column rank (its Gram matrix V^T V is singular)")
        if self.sigma is not None:
            self.sigma = torch.as_tensor(self.sigma, dtype=DTYPE)
            if self.sigma.ndim != 1 or self.sigma.shape[0] != self.V.shape[0]:
                raise ValueError(
                    f"sigma must have shape (p,) = ({self.V.shape[0]},), got {tuple(self.sigma.shape)}"
                )
            _check_finite("sigma", self.sigma)
            if (self.sigma <= 0).any():
                raise ValueError("sigma must have positive entries (a diagonal covariance)")

    @property
    def p(self) -> int:
        return self.V.shape[0]

    @property
    def K(self) -> int:
        return self.V.shape[1]

    @property
    def gram(self) -> Tensor:
        """``G = V^T V``, shape ``(K, K)``."""
        return self.V.T @ self.V

    def with_law(self, law: LatentLaw) -> LFMM:
        return LFMM(self.V, law, self.sigma)

    def sample(self, n: int, generator: torch.Generator | None = None, batch: int | None = None,
               gaussian_equivalent: bool = False, device: torch.device | str | None = None
               ) -> tuple[Tensor, Tensor]:
        """Draw ``X (B, n, p)`` and ``y (B, n)`` (no batch axis when ``batch`` is None).

        The latent ``(y, f)`` (``B n K`` numbers) is drawn with ``generator``. The bulk ``z``
        (``B n p`` normals, the bulk of the cost) is drawn directly on ``device``: with the
        generator itself when it lives there, otherwise with a generator on ``device`` seeded from
        ``generator`` (so a CUDA run draws no normals on the CPU and copies none; its draws differ
        from the CPU ones but are just as reproducible). ``device=None`` means the generator's device.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        B = 1 if batch is None else batch
        if isinstance(B, bool) or not isinstance(B, int) or B < 1:
            raise ValueError(f"batch must be a positive int or None, got {batch!r}")
        draw = self.law.sample_gaussian_equivalent if gaussian_equivalent else self.law.sample
        y, f = draw(B * n, generator)                                 # (B n,), (B n, K), generator's device
        gen_dev = generator.device if generator is not None else torch.device("cpu")
        dev = torch.device(device) if device is not None else gen_dev
        if dev.type == gen_dev.type:
            zgen = generator
        else:                                                         # a generator on the target device
            seed = int(torch.randint(0, 2**62, (1,), generator=generator))
            zgen = torch.Generator(device=dev).manual_seed(seed)
        z = torch.randn(B, n, self.p, generator=zgen, dtype=DTYPE, device=dev)  # bulk (B, n, p)
        if self.sigma is not None:
            z = z * self.sigma.to(dev).sqrt()
        X = (f.to(dev) @ self.V.to(dev).T).reshape(B, n, self.p) + z  # x = V f + Sigma^{1/2} z
        y = y.to(dev).reshape(B, n)
        return (X[0], y[0]) if batch is None else (X, y)


def _random_unit(p: int, generator: torch.Generator | None) -> Tensor:
    v = torch.randn(p, generator=generator, dtype=DTYPE)
    return v / v.norm()


def signal_strength_model(p: int, m_norm: float = 2.0, u_values=(0.0, 2.0), u_probs=(0.5, 0.5),
                          localized: bool = False, generator: torch.Generator | None = None) -> LFMM:
    """Example A: ``x = y u m + z`` with a random signal strength ``u`` (two-point {0, 2} by default).

    ``m`` has norm ``m_norm`` along a random unit direction (delocalised), or along coordinate 0
    when ``localized=True`` (Example C when ``u_values=(1.0,)``). Class means ``+-E[u] m``.
    """
    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        raise ValueError(f"p must be an int >= 2, got {p!r}")
    _check_positive("m_norm", m_norm)
    u_values = torch.as_tensor(u_values, dtype=DTYPE).flatten()
    u_probs = torch.as_tensor(u_probs, dtype=DTYPE).flatten()
    if u_values.shape != u_probs.shape:
        raise ValueError("u_values and u_probs must have the same length")
    direction = torch.zeros(p, dtype=DTYPE) if localized else _random_unit(p, generator)
    if localized:
        direction[0] = 1.0
    ys = torch.cat([-torch.ones_like(u_values), torch.ones_like(u_values)])
    law = LatentLaw(torch.cat([u_probs, u_probs]) / 2, ys, (ys * torch.cat([u_values, u_values]))[:, None])
    return LFMM((m_norm * direction)[:, None], law)


def skewed_factor_model(p: int, m_norm: float = 2.0, nu: float = 2.0, angle: float = math.pi / 3,
                        s_values=(-0.5, 2.0), s_probs=(0.8, 0.2),
                        generator: torch.Generator | None = None) -> LFMM:
    """Example B: ``x = y m + s nu v + z`` with a skewed nuisance factor ``s`` independent of ``y``.

    ``v`` is a unit vector at angle ``angle`` to ``m``; ``f = (y, s)``, ``V = [m, nu v]``.
    """
    _check_positive("nu", nu)
    a = _random_unit(p, generator)
    b = torch.randn(p, generator=generator, dtype=DTYPE)
    b = b - (b @ a) * a
    b = b / b.norm()
    v = math.cos(angle) * a + math.sin(angle) * b
    s_values = torch.as_tensor(s_values, dtype=DTYPE).flatten()
    s_probs = torch.as_tensor(s_probs, dtype=DTYPE).flatten()
    ys = torch.tensor([-1.0, 1.0], dtype=DTYPE).repeat_interleave(len(s_values))
    ss = s_values.repeat(2)
    law = LatentLaw(s_probs.repeat(2) / 2, ys, torch.stack([ys, ss], 1))
    return LFMM(torch.stack([m_norm * a, nu * v], 1), law)


# ----------------------------------------------------------------------------------------------
# losses, proximal maps and Moreau envelopes (elementwise, any shape, any device)
# ----------------------------------------------------------------------------------------------
def loss_value(loss: str, t: Tensor) -> Tensor:
    """``L(t)`` for the margin ``t = y * score``."""
    if loss == "logistic":
        return torch.nn.functional.softplus(-t)          # log(1 + e^{-t})
    if loss == "square":
        return 0.5 * (1 - t) ** 2
    if loss == "hinge":
        return torch.clamp(1 - t, min=0)
    raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")


def loss_d1(loss: str, t: Tensor) -> Tensor:
    """``L'(t)``: logistic ``-sigma(-t) = -(1 - tanh(t/2))/2`` (overflow-free)."""
    if loss == "logistic":
        return -0.5 * (1 - torch.tanh(t / 2))
    if loss == "square":
        return t - 1
    raise ValueError(f"loss_d1 needs a smooth loss {SMOOTH_LOSSES}, got {loss!r}")


def loss_d2(loss: str, t: Tensor) -> Tensor:
    """``L''(t)``: logistic ``sigma(t) sigma(-t) = (1 - tanh^2(t/2))/4``."""
    if loss == "logistic":
        return 0.25 * (1 - torch.tanh(t / 2) ** 2)
    if loss == "square":
        return torch.ones_like(t)
    raise ValueError(f"loss_d2 needs a smooth loss {SMOOTH_LOSSES}, got {loss!r}")


def prox(loss: str, v: Tensor, y: Tensor, kappa, iters: int = 100) -> Tensor:
    r"""``prox_kappa(y, v) = argmin_r L(y r) + (r - v)^2 / (2 kappa)``, elementwise (Sec. 3.3).

    Square: ``(v + kappa y)/(1 + kappa)``. Hinge (``t = y v``): ``v`` if ``t >= 1``, ``v + kappa y``
    if ``t <= 1 - kappa``, else ``y``. Logistic: safeguarded Newton from ``r = v`` (bisection fallback) in the bracket between
    ``v`` and ``v + kappa y`` (where the minimiser lies since ``-L' in (0, 1)``).
    """
    _check_loss(loss)
    v = torch.as_tensor(v, dtype=DTYPE)
    y = torch.as_tensor(y, dtype=DTYPE, device=v.device)
    try:
        kappa = torch.as_tensor(kappa, dtype=DTYPE, device=v.device)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"kappa must be a positive number or tensor, got {type(kappa).__name__}") from err
    if not bool(((kappa > 0) & torch.isfinite(kappa)).all()):
        raise ValueError("kappa must be > 0 and finite (no NaN or inf)")
    if loss == "square":
        return (v + kappa * y) / (1 + kappa)
    if loss == "hinge":
        t = y * v
        return torch.where(t >= 1, v, torch.where(t <= 1 - kappa, v + kappa * y, y * torch.ones_like(v)))
    lo = torch.minimum(v, v + kappa * y)                   # phi'(lo) <= 0 <= phi'(hi)
    hi = torch.maximum(v, v + kappa * y)
    r = v.clone()
    dx = dx_old = hi - lo                                    # last step and the one before it
    for _ in range(iters):                                   # safeguarded Newton ("rtsafe")
        t = y * r
        grad = y * loss_d1("logistic", t) + (r - v) / kappa      # phi'(r)
        hess = loss_d2("logistic", t) + 1 / kappa                # phi''(r) >= 1/kappa
        lo = torch.where(grad < 0, r, lo)
        hi = torch.where(grad > 0, r, hi)
        newton = grad / hess
        r_new = r - newton
        # bisect when Newton leaves the bracket or does not halve the step before last
        bisect = (((r_new < lo) | (r_new > hi) | (2 * newton.abs() > dx_old))
                  & (newton.abs() > 1e-13 * (1 + r.abs())))             # converged: keep Newton
        r_new = torch.where(bisect, 0.5 * (lo + hi), r_new)
        dx_old, dx = dx, (r_new - r).abs()
        r = r_new
        if float((dx / (1 + r.abs())).max()) < 1e-12:          # quadratic: the next step is < 1e-20
            break
    return r


def moreau(loss: str, v: Tensor, y: Tensor, kappa) -> Tensor:
    """``M_kappa(y, v) = min_r L(y r) + (r - v)^2 / (2 kappa)``, elementwise."""
    r = prox(loss, v, y, kappa)
    kappa = torch.as_tensor(kappa, dtype=DTYPE, device=r.device)
    return loss_value(loss, y * r) + (r - v) ** 2 / (2 * kappa)


# ----------------------------------------------------------------------------------------------
# regularisers rho(theta) = lam * sum_j psi(theta_j)
# ----------------------------------------------------------------------------------------------
@dataclass
class SeparableReg:
    """``rho(theta) = lam * sum_j psi(theta_j)`` with ``psi(0) = psi'(0) = 0``.

    ``smooth`` is False for ``l1`` (not C^2; cvxpy only). ``d2psi0 = psi''(0)`` sets the bulk
    curvature ``Lambda = lam psi''(0) + D`` (E2).
    """

    name: str
    lam: float
    psi: Callable[[Tensor], Tensor]
    dpsi: Callable[[Tensor], Tensor] | None
    d2psi: Callable[[Tensor], Tensor] | None
    d2psi0: float
    smooth: bool = True
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        _check_positive("lam", self.lam, strict=False)
        self.lam = float(self.lam)

    def value(self, theta: Tensor) -> Tensor:
        """``rho(theta)`` summed over the last axis."""
        return self.lam * self.psi(theta).sum(-1)

    def grad(self, theta: Tensor) -> Tensor:
        return self.lam * self.dpsi(theta)

    def hess_diag(self, theta: Tensor) -> Tensor:
        return self.lam * self.d2psi(theta)


def ridge(lam: float) -> SeparableReg:
    """``lam/2 ||theta||^2``."""
    return SeparableReg("ridge", lam, lambda t: 0.5 * t**2, lambda t: t, torch.ones_like, 1.0)


def _logcosh(t: Tensor) -> Tensor:
    a = t.abs()
    return a + torch.nn.functional.softplus(-2 * a) - math.log(2.0)   # log cosh t, overflow-free


def logcosh(lam: float) -> SeparableReg:
    """``lam sum log cosh(theta_j)``: psi' = tanh, psi'' = 1 - tanh^2."""
    return SeparableReg("logcosh", lam, _logcosh, torch.tanh, lambda t: 1 - torch.tanh(t) ** 2, 1.0)


def pseudo_huber(lam: float, delta: float) -> SeparableReg:
    """``psi_delta(t) = delta^2 (sqrt(1 + t^2/delta^2) - 1)``: quadratic zone ``|t| << delta``."""
    _check_positive("delta", delta)
    d2 = float(delta) ** 2
    return SeparableReg(
        "pseudo_huber", lam, lambda t: d2 * (torch.sqrt(1 + t**2 / d2) - 1),
        lambda t: t / torch.sqrt(1 + t**2 / d2), lambda t: (1 + t**2 / d2) ** -1.5, 1.0,
        params={"delta": float(delta)},
    )


def quartic(lam: float, gamma: float) -> SeparableReg:
    """``psi(t) = t^2/2 + gamma t^4/4``."""
    _check_positive("gamma", gamma, strict=False)
    g = float(gamma)
    return SeparableReg("quartic", lam, lambda t: t**2 / 2 + g * t**4 / 4, lambda t: t + g * t**3,
                        lambda t: 1 + 3 * g * t**2, 1.0, params={"gamma": g})


def l1(lam: float) -> SeparableReg:
    """``lam ||theta||_1``: not C^2 at 0 (outside the equivalence statement); cvxpy solver only."""
    return SeparableReg("l1", lam, torch.abs, None, None, float("nan"), smooth=False)


def check_smooth_reg(reg) -> None:
    """TypeError if ``reg`` is not a SeparableReg; ValueError if it is not C^2 (e.g. l1)."""
    if not isinstance(reg, SeparableReg):
        raise TypeError(
            f"reg must be a SeparableReg (ridge, logcosh, pseudo_huber, quartic), got {type(reg).__name__}; "
            "non-separable regularisers are outside this module"
        )
    if not reg.smooth:
        raise ValueError(
            f"reg={reg.name!r} is not C^2; this solver needs a smooth separable regulariser "
            "(l1 is available in fit_erm_cvxpy only)"
        )


def equivalent_quadratic(reg: SeparableReg, mu: Tensor) -> tuple[Tensor, Tensor]:
    r"""The quadratic equivalent of a C^2 regulariser at the mean ``mu`` (Sec. 3.5).

    :math:`\tilde\rho(\theta)=\nabla\rho(\mu)^\top\theta+\tfrac12(\theta-\mu)^\top H_0(\theta-\mu)
    = b^\top\theta+\tfrac12\theta^\top H_0\theta+\text{const}` with ``H_0 = lam psi''(0) I`` and the
    linear tilt ``b = grad rho(mu) - H_0 mu``. Returns ``(b (p,), diag H_0 (p,))``.
    """
    check_smooth_reg(reg)
    mu = torch.as_tensor(mu, dtype=DTYPE)
    h0 = reg.lam * reg.d2psi0 * torch.ones_like(mu)
    return reg.grad(mu) - h0 * mu, h0


# ----------------------------------------------------------------------------------------------
# ERM: batched damped Newton (CPU or GPU)
# ----------------------------------------------------------------------------------------------
def _check_Xy(X: Tensor, y: Tensor) -> tuple[Tensor, Tensor, bool]:
    if not isinstance(X, Tensor) or not isinstance(y, Tensor):
        raise TypeError("X and y must be torch tensors")
    if X.ndim not in (2, 3):
        raise ValueError(f"X must have shape (n, p) or (B, n, p), got {tuple(X.shape)}")
    single = X.ndim == 2
    if single:
        X, y = X[None], y[None] if y.ndim == 1 else y
    if y.shape != X.shape[:2]:
        raise ValueError(f"y must have shape {tuple(X.shape[:2])} to match X, got {tuple(y.shape)}")
    _check_finite("X", X)
    _check_finite("y", y)
    _check_labels("y", y)
    return X.to(DTYPE), y.to(DTYPE), single


def erm_objective(X: Tensor, y: Tensor, theta: Tensor, loss: str, reg: SeparableReg,
                  linear_term: Tensor | None = None) -> Tensor:
    """``(1/n) sum_i L(y_i theta^T x_i) + rho(theta) [+ b^T theta]`` for ``X (B,n,p)``, ``theta (B,p)``."""
    t = y * torch.einsum("bnp,bp->bn", X, theta)                  # margins (B, n)
    out = loss_value(loss, t).mean(1) + reg.value(theta)
    if linear_term is not None:
        out = out + theta @ linear_term
    return out


_ARMIJO_HALVINGS = 40     # step sizes tried by the backtracking line search: 1, 1/2, ..., 2^-39, then 2^-40


def _armijo_step(X, y, theta, delta, t, F, gd, loss, reg, b, halvings):
    """Per problem, the first step ``2^-j`` (j < 40) that passes the Armijo test
    ``F(theta + s delta) <= F + 1e-4 s gd + 1e-13 (1 + |F|)``, else ``2^-40``: what halving the step until
    the test passes gives, without a host read per halving. The full step is evaluated exactly as
    :func:`erm_objective` does; the shorter ones (the backtracks, rare near the solution) on the margins
    along the line, ``t + s y (X delta)`` (one product with X for all 39 of them). Returns ``(B,)``."""
    F_full = erm_objective(X, y, theta + halvings[0] * delta, loss, reg, b)                  # (B,)
    s = halvings[1:-1]                                                                       # (J,)
    t_line = t[:, None, :] + s[:, None] * (y * torch.einsum("bnp,bp->bn", X, delta))[:, None, :]  # (B, J, n)
    th_line = theta[:, None, :] + s[:, None] * delta[:, None, :]                             # (B, J, p)
    F_line = loss_value(loss, t_line).mean(-1) + reg.value(th_line)
    if b is not None:
        F_line = F_line + th_line @ b
    F_new = torch.cat([F_full[:, None], F_line], 1)                                          # (B, J + 1)
    ok = F_new <= F[:, None] + 1e-4 * halvings[:-1] * gd[:, None] + 1e-13 * (1 + F.abs())[:, None]
    first = torch.where(ok.any(1), ok.to(torch.int8).argmax(1), len(halvings) - 1)          # first pass, or 40
    return halvings[first]


def fit_erm(X: Tensor, y: Tensor, loss: str, reg: SeparableReg, linear_term: Tensor | None = None,
            tol: float = 1e-8, max_iter: int = 100, return_info: bool = False):
    r"""Solve (ERM) by batched damped Newton with backtracking, until ``||grad||_inf < tol``.

    ``X (B, n, p)`` or ``(n, p)``; returns ``theta (B, p)`` or ``(p,)``. Gradient
    ``(1/n) X^T (y L'(y X theta)) + grad rho + b``; Hessian ``(1/n) X^T diag(L'') X + diag rho''``,
    factorised by ``torch.linalg.cholesky_ex`` on ``(B, p, p)`` (a failed factorisation raises
    ``torch.linalg.LinAlgError`` at the next iteration's read); the backtracking line search tests all its
    step sizes at once (:func:`_armijo_step`, the same steps as halving until the Armijo test passes). One
    host read per iteration: the stopping rule, a data-dependent branch (issue 43). Smooth losses and C^2
    regularisers only (hinge or l1: :func:`icml26.cgmt.baselines.fit_erm_cvxpy`).
    """
    _check_loss(loss, SMOOTH_LOSSES)
    check_smooth_reg(reg)
    _check_positive("tol", tol)
    X, y, single = _check_Xy(X, y)
    B, n, p = X.shape
    if reg.lam == 0 and n <= p:
        raise ValueError(f"lam must be > 0 when n <= p (n={n}, p={p}): the ERM is not unique")
    b = None
    if linear_term is not None:
        b = torch.as_tensor(linear_term, dtype=DTYPE, device=X.device)
        if b.shape != (p,):
            raise ValueError(f"linear_term must have shape ({p},), got {tuple(b.shape)}")
    theta = torch.zeros(B, p, dtype=DTYPE, device=X.device)
    F = erm_objective(X, y, theta, loss, reg, b)
    eye = torch.eye(p, dtype=DTYPE, device=X.device)
    # the Armijo candidates 1, 1/2, ..., 2^-39 (exact powers of two) and the step taken when none passes
    halvings = torch.tensor([2.0 ** -j for j in range(_ARMIJO_HALVINGS + 1)], dtype=DTYPE, device=X.device)
    failed = torch.zeros((), dtype=torch.bool, device=X.device)        # a Cholesky factorisation failed
    iters, gmax = 0, float("inf")
    for it in range(1, max_iter + 1):
        iters = it
        t = y * torch.einsum("bnp,bp->bn", X, theta)                       # (B, n)
        grad = torch.einsum("bnp,bn->bp", X, y * loss_d1(loss, t)) / n + reg.grad(theta)
        if b is not None:
            grad = grad + b
        # the one host read of an iteration: the stopping rule (a data-dependent branch), with the previous
        # iteration's Cholesky status (read here rather than by linalg.cholesky's own check, a second sync)
        gmax_t, bad = torch.stack([grad.abs().max(), failed.to(DTYPE)]).tolist()
        if bad:
            raise torch.linalg.LinAlgError("fit_erm: the Newton Hessian is not positive-definite "
                                           "(torch.linalg.cholesky_ex failed)")
        gmax = gmax_t
        if gmax < tol:
            break
        H = (X * (loss_d2(loss, t) / n)[..., None]).transpose(1, 2) @ X     # (B, p, p)
        H = H + reg.hess_diag(theta)[:, :, None] * eye
        L, info = torch.linalg.cholesky_ex(H)
        failed = failed | (info != 0).any()
        delta = -torch.cholesky_solve(grad[..., None], L)[..., 0]
        gd = (grad * delta).sum(1)                                          # Newton decrement, < 0
        step = _armijo_step(X, y, theta, delta, t, F, gd, loss, reg, b, halvings)
        theta = theta + step[:, None] * delta
        F = erm_objective(X, y, theta, loss, reg, b)
    if iters == max_iter and gmax >= tol and bool(failed):
        raise torch.linalg.LinAlgError("fit_erm: the Newton Hessian is not positive-definite "
                                       "(torch.linalg.cholesky_ex failed)")
    out = theta[0] if single else theta
    if return_info:
        return out, {"iterations": iters, "grad_inf": gmax}
    return out


def hessian_trace_inv(X: Tensor, y: Tensor, theta: Tensor, loss: str, reg: SeparableReg) -> Tensor:
    """The empirical kappa: ``(1/n) tr H^{-1}`` with ``H`` the ERM Hessian at ``theta``. Shape ``(B,)`` or ``()``."""
    _check_loss(loss, SMOOTH_LOSSES)
    check_smooth_reg(reg)
    X, y, single = _check_Xy(X, y)
    theta = theta[None] if theta.ndim == 1 else theta
    B, n, p = X.shape
    t = y * torch.einsum("bnp,bp->bn", X, theta)
    H = (X * (loss_d2(loss, t) / n)[..., None]).transpose(1, 2) @ X
    H = H + torch.diag_embed(reg.hess_diag(theta))
    tr = torch.diagonal(torch.cholesky_inverse(torch.linalg.cholesky(H)), dim1=1, dim2=2).sum(1) / n
    return tr[0] if single else tr
