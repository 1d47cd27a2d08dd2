r"""Published results the book's theory must reproduce (issue 12, point 7).

The fixed point (E1)-(E4) of :mod:`icml26.cgmt.theory` is the book's own derivation. Three
published, independently derived results are special cases of it, so reproducing them checks
the derivation (not only the code):

1. **Sur & Candes (2019), logistic MLE.** Gaussian design ``x ~ N(0, Sigma)``, labels
   ``P(y = 1 | x) = sigma(x^T beta)`` with ``Var(x^T beta) = gamma^2``, ``p/n = kappa``, no
   penalty. The MLE's score on a fresh ``x`` is ``alpha* x^T beta + sqrt(kappa) sigma* Z`` and the
   leave-one-out map is a proximal map with parameter ``lambda*``; at ``kappa = 0.2``,
   ``gamma = sqrt 5`` they report ``alpha* = 1.499``, ``sigma* = 4.74``, ``lambda* = 3.03``.
2. **Candes & Sur (2020), existence of the MLE.** The MLE exists iff ``kappa < h(gamma)`` with
   ``h(gamma) = min_t E[(t y V gamma + Z)_+^2]``, ``V, Z ~ N(0, 1)``; ``h(0) = 1/2`` (Cover 1965).
3. **Hastie, Montanari, Rosset & Tibshirani (2019), least squares and ridge.** Least squares with
   residual variance ``s^2`` has prediction risk ``s^2 / (1 - gamma)`` (``gamma = p/n < 1``);
   ridge with isotropic features and pure-noise responses has ``||theta||^2 -> V(lam) =
   gamma (m(-lam) - lam m'(-lam))``, ``m`` the Marchenko-Pastur Stieltjes transform.

**How the logistic model becomes a linear factor mixture.** The book's data are
``x = V f + z`` with ``y`` depending on the latent ``f`` only. Take ``K = 1``, ``V = e`` a unit
vector and ``f ~ N(0, s_f^2)``: then ``x ~ N(0, I + s_f^2 e e^T)`` exactly, and ``y`` depends on
``x`` only through ``t = x^T e = f + z_e``. The logistic link is a scale mixture of probits,
``sigma(u) = E_W Phi(u / W)`` with ``W = 2K`` and ``K`` Kolmogorov-distributed (Andrews & Mallows
1974), and a probit in ``f`` stays a probit in ``t`` after averaging over ``f | t``. Choosing
``P(y = 1 | f) = E_W Phi(b_W f)`` with the slopes ``b_W`` of :func:`logistic_model_law` gives
``P(y = 1 | x) = sigma(gamma x^T e / sqrt(1 + s_f^2))``: a logistic model with Gaussian design and
``Var(x^T beta) = gamma^2``. The unpenalised MLE is equivariant under linear changes of ``x``, so
Sur and Candes' numbers apply to it. With ``A = e^T mu`` and ``c = tr C`` from the fixed point:
``alpha* = A sqrt(1 + s_f^2) / gamma``, ``sigma*^2 = c / kappa`` and ``lambda* = kappa_book``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from .method import DTYPE, LFMM, LatentLaw, _check_positive, gauss_hermite, ridge
from .theory import State, solve_fixed_point

PUBLISHED_SUR_CANDES = {"kappa": 0.2, "gamma": math.sqrt(5.0), "alpha_star": 1.499, "sigma_star": 4.74,
                        "lambda_star": 3.03}


def _kolmogorov_cdf(k: np.ndarray) -> np.ndarray:
    """CDF of the Kolmogorov distribution (two series, each used where it converges fast)."""
    k = np.asarray(k, dtype=float)
    out = np.empty_like(k)
    j = np.arange(1, 40)[:, None]
    small = k < 1.0
    ks = k[small]
    out[small] = math.sqrt(2 * math.pi) / ks * np.exp(-((2 * j - 1) ** 2) * math.pi**2 / (8 * ks**2)).sum(0)
    kl = k[~small]
    out[~small] = 1 - 2 * ((-1.0) ** (j - 1) * np.exp(-2 * j**2 * kl**2)).sum(0)
    return out


def logistic_scale_mixture(n_mix: int = 4000) -> np.ndarray:
    """Scales ``W_1..W_M`` (equal weights) with ``sigma(u) ~ mean_j Phi(u / W_j)``: ``W = 2K``,
    ``K`` at the mid-point quantiles of the Kolmogorov distribution (error ~1e-6 at ``M = 4000``)."""
    if isinstance(n_mix, bool) or not isinstance(n_mix, int) or n_mix < 10:
        raise ValueError(f"n_mix must be an int >= 10, got {n_mix!r}")
    u = (np.arange(n_mix) + 0.5) / n_mix
    lo, hi = np.full(n_mix, 1e-3), np.full(n_mix, 10.0)
    for _ in range(100):                                              # bisection on the CDF
        mid = 0.5 * (lo + hi)
        below = _kolmogorov_cdf(mid) < u
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 2 * 0.5 * (lo + hi)


def logistic_model_law(gamma: float, f_scale: float = 5.0, n_nodes: int = 61, n_mix: int = 4000) -> LatentLaw:
    r"""The latent law ``(y, f)`` whose linear factor mixture ``x = e f + z`` is a logistic model.

    ``f ~ N(0, f_scale^2)`` on ``n_nodes`` Gauss-Hermite nodes, ``P(y=1 | f) = E_W Phi(b_W f)`` with
    ``b_W = k / sqrt(r (r - k^2))``, ``k = gamma / (W sqrt(1 + f_scale^2))``, ``r = f_scale^2/(1+f_scale^2)``
    (then ``E[Phi(b_W f) | f + z_e = t] = Phi(gamma t / (W sqrt(1 + f_scale^2)))``). Scales with
    ``k^2 >= r`` (``W < gamma / f_scale``, probability < 1e-9 at the default) get a hard threshold.
    """
    _check_positive("gamma", gamma, strict=False)
    _check_positive("f_scale", f_scale)
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, int) or n_nodes < 5:
        raise ValueError(f"n_nodes must be an int >= 5, got {n_nodes!r}")
    xi, w = gauss_hermite(n_nodes)
    f = f_scale * xi.numpy()
    r = f_scale**2 / (1 + f_scale**2)
    W = logistic_scale_mixture(n_mix)
    k = gamma / (W * math.sqrt(1 + f_scale**2))
    ok = k**2 < r
    b = np.where(ok, k / np.sqrt(r * np.clip(r - k**2, 1e-300, None)), 0.0)
    g = np.where(ok[None, :], norm.cdf(f[:, None] * b[None, :]), (f[:, None] > 0) * 1.0).mean(1)  # P(y=1|f)
    probs = np.concatenate([w.numpy() * g, w.numpy() * (1 - g)])
    ys = np.concatenate([np.ones(n_nodes), -np.ones(n_nodes)])
    return LatentLaw(torch.tensor(probs / probs.sum()), torch.tensor(ys), torch.tensor(np.concatenate([f, f]))[:, None])


def _unit_model(law: LatentLaw, p: int = 8) -> LFMM:
    e = torch.zeros(p, 1, dtype=DTYPE)
    e[0, 0] = 1.0
    return LFMM(e, law)


def logistic_mle_asymptotics(kappa: float, gamma: float, f_scale: float = 5.0, n_nodes: int = 61,
                             n_quad: int = 81) -> dict:
    """Sur & Candes' ``(alpha*, sigma*, lambda*)`` from the book's fixed point (unpenalised logistic ERM)."""
    _check_positive("kappa", kappa)
    if kappa >= 1:
        raise ValueError(f"kappa = p/n must be < 1 for the unpenalised MLE, got {kappa}")
    law = logistic_model_law(gamma, f_scale, n_nodes)
    state = solve_fixed_point(1 / kappa, _unit_model(law), "logistic", ridge(0.0), n_quad=n_quad, tol=1e-12)
    return {"alpha_star": float(state.A[0]) * math.sqrt(1 + f_scale**2) / gamma,
            "sigma_star": math.sqrt(state.c / kappa), "lambda_star": state.kappa, "state": state}


def _positive_part_sq(a: np.ndarray, b) -> np.ndarray:
    """``E (a + b Z)_+^2`` for ``Z ~ N(0, 1)``, ``b > 0``."""
    r = a / b
    return (a**2 + b**2) * norm.cdf(r) + a * b * norm.pdf(r)


def separability_threshold(law: LatentLaw, scale: float = 1.0) -> float:
    r"""``kappa_sep = min_t E[(t y (s f + z_e) + Z)_+^2]`` for the data ``x = e s f + z`` (``K = 1``).

    The CGMT (Gordon) separability threshold of the book's data: ``{y_i x_i}`` is linearly
    separable w.h.p. iff ``p/n > kappa_sep``; ``z_e, Z ~ N(0, 1)`` are the bulk along ``e`` and
    orthogonal to it. Integrated over ``z_e`` in closed form: ``b = sqrt(1 + t^2)``.
    """
    if law.K != 1:
        raise ValueError(f"separability_threshold covers K = 1 laws, got K = {law.K}")
    _check_positive("scale", scale)
    yf = (law.y * law.f[:, 0]).numpy() * scale
    P = law.probs.numpy()
    res = minimize_scalar(lambda t: float(P @ _positive_part_sq(t * yf, math.sqrt(1 + t * t))),
                          bounds=(-100.0, 100.0), method="bounded", options={"xatol": 1e-12})
    return float(min(res.fun, P @ _positive_part_sq(0 * yf, 1.0)))


def candes_sur_threshold(gamma: float, n_nodes: int = 201) -> float:
    r"""Candes & Sur's ``h(gamma) = min_t E[(t y V gamma + Z)_+^2]``, ``P(y = 1 | V) = sigma(gamma V)``,
    integrated directly (Gauss-Hermite in ``V``, closed form in ``Z``)."""
    _check_positive("gamma", gamma, strict=False)
    v, w = np.polynomial.hermite_e.hermegauss(n_nodes)
    w = w / w.sum()

    def h(t):
        return sum(float(w @ (1 / (1 + np.exp(-y * gamma * v)) * _positive_part_sq(t * y * gamma * v, 1.0)))
                   for y in (1.0, -1.0))

    res = minimize_scalar(h, bounds=(-100.0, 100.0), method="bounded", options={"xatol": 1e-12})
    return float(min(res.fun, h(0.0)))


def ridge_noise_variance(alpha: float, lam: float) -> float:
    r"""Hastie et al. (2019): ridge on isotropic features with pure-noise unit-variance responses,
    ``||theta_hat||^2 -> gamma (m(-lam) - lam m'(-lam))``, ``gamma = 1/alpha``."""
    _check_positive("alpha", alpha)
    _check_positive("lam", lam)
    g = 1 / alpha
    M = (-(1 - g + lam) + math.sqrt((1 - g + lam) ** 2 + 4 * g * lam)) / (2 * g * lam)   # m(-lam)
    dM = -(g * M * M + M) / (2 * g * lam * M + 1 - g + lam)                              # d m(-lam) / d lam
    return g * (M + lam * dM)


def least_squares_risk(alpha: float, resid_var: float) -> float:
    """Hastie et al. (2019) / classical: ``E (y - x^T theta_LS)^2 -> s^2 / (1 - 1/alpha)`` for ``alpha > 1``."""
    _check_positive("alpha", alpha)
    _check_positive("resid_var", resid_var)
    if alpha <= 1:
        raise ValueError(f"alpha must be > 1 for least squares, got {alpha}")
    return resid_var / (1 - 1 / alpha)


def square_risk_from_state(state: State, model: LFMM) -> float:
    """The theory's ``E (y - theta^T x)^2 = E (y - f^T A)^2 + tau^2`` (projection law T1)."""
    law = model.law
    return float(law.probs @ (law.y - law.f @ state.A) ** 2) + state.tau**2


def best_linear_residual_variance(model: LFMM) -> float:
    """``1 - Cov(y, x)^T Cov(x)^{-1} Cov(y, x)`` for ``x = V f + z`` (``E y = E f = 0``)."""
    law = model.law
    Eyf = law.probs @ (law.y[:, None] * law.f)                          # (K,)
    Eff = (law.f * law.probs[:, None]).T @ law.f                        # (K, K)
    G = model.gram
    # Cov(x) = I + V Eff V^T; Cov(y, x) = V Eyf; Woodbury on the K-dim span of V
    inner = torch.linalg.solve(torch.eye(law.K, dtype=DTYPE) + G @ Eff, G @ Eyf)
    return float(1 - Eyf @ inner)


def published_checks(f_scale: float = 5.0) -> dict:
    """Every published number next to the book's reproduction (used by notebook 2 and the tests)."""
    sc = PUBLISHED_SUR_CANDES
    mle = logistic_mle_asymptotics(sc["kappa"], sc["gamma"], f_scale=f_scale)
    law = logistic_model_law(sc["gamma"], f_scale)
    null = LatentLaw([0.5, 0.5], [1.0, -1.0], [[0.0], [0.0]])
    return {"mle": mle, "h_book": separability_threshold(law), "h_direct": candes_sur_threshold(sc["gamma"]),
            "h_null_book": separability_threshold(null)}
