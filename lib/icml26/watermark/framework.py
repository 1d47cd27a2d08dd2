"""The power-calibrated framework (spec Sec. 3.4-3.5): the book's reconstruction, not the paper's text.

Only the paper's abstract is public. It promises explicit relations between the KGW
hyper-parameters, detection power and distortion, and parameter-selection procedures; the
formulas here are the book's derivation of such relations on top of Kirchenbauer et al. (2023):

- (3.4a) calibrated green rate ``mu1_hat = mean_{j,r} phi_delta(p_j . g_r)`` and distortion ``D_hat``;
- (3.4b) normal power ``Phi((sqrt(T)(mu1 - gamma) - z_{1-a} sqrt(gamma(1-gamma))) / sqrt(mu1(1-mu1)))``;
- (3.4c) exact power ``Pr[Bin(T, mu1) >= c_alpha]``;
- (3.4c') the exact power averaged over the distribution of scored counts ``n`` of the calibration
  sequences, ``E_n Pr[Bin(n, mu1) >= c_alpha(n)]`` (de-duplication makes ``n`` vary from text to text);
- (3.4d) required length ``T* = ((z_{1-a} sqrt(gamma(1-gamma)) + z_{1-b} sqrt(mu1(1-mu1))) / (mu1 - gamma))^2``;
- Algorithm A (least distortion at a target power), Algorithm B (most power under a budget),
  Algorithm C's non-domination test (:func:`pareto_mask`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import stats

from .method import (
    DIRECT_DELTA_MAX,
    EXACT_N_MAX,
    _finite_number,
    _positive_int,
    binomial_threshold,
    check_alpha,
    check_delta,
    check_gamma,
    check_probs,
    green_size,
    kl_closed_form,
    phi,
    random_green_masks,
)

METRICS = ("kl_forward", "kl_reverse")


def _as_array(x, name: str) -> np.ndarray:
    if x is None or isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be a number or an array of numbers, got {type(x).__name__}")
    try:
        return np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number or an array of numbers: {exc}") from None


def _check_T(T, name: str = "T") -> np.ndarray:
    T = _as_array(T, name)
    if T.size == 0 or not np.all(np.isfinite(T)) or np.any(T <= 0):
        raise ValueError(f"{name} must be finite and > 0")
    return T


def _check_mu(mu1) -> np.ndarray:
    mu1 = _as_array(mu1, "mu1")
    if mu1.size == 0 or not np.all(np.isfinite(mu1)) or np.any((mu1 < 0) | (mu1 > 1)):
        raise ValueError("mu1 must lie in [0, 1]")
    return mu1


def power_normal(mu1, gamma, T, alpha) -> np.ndarray:
    """Eq. (3.4b): normal-approximation power of the one-sided z-test with ``T`` scored tokens."""
    gamma, alpha = check_gamma(gamma), check_alpha(alpha)
    mu1, T = _check_mu(mu1), _check_T(T)
    za = stats.norm.isf(alpha)
    sd = np.sqrt(np.clip(mu1 * (1 - mu1), 1e-300, None))
    return stats.norm.cdf((np.sqrt(T) * (mu1 - gamma) - za * math.sqrt(gamma * (1 - gamma))) / sd)


def power_exact(mu1, gamma, T, alpha) -> np.ndarray:
    """Eq. (3.4c): ``Pr[Bin(n, mu1) >= c_alpha]`` with ``n = floor(T)``; at ``mu1 = gamma`` it is the exact FPR.

    Lengths beyond ``EXACT_N_MAX`` (1e9 tokens) use the normal power (3.4b), which the exact one
    approaches there; scipy's exact binomial would stall for minutes (uninterruptibly) near 2**53."""
    gamma, alpha = check_gamma(gamma), check_alpha(alpha)
    mu1, T = _check_mu(mu1), _check_T(T)
    if np.all(T < EXACT_N_MAX + 1):
        n = np.floor(T).astype(np.int64)
        c = binomial_threshold(n, gamma, alpha)
        return stats.binom.sf(c - 1, n, mu1)
    mu1, T = np.broadcast_arrays(mu1, T)
    out = np.asarray(power_normal(mu1, gamma, T, alpha), dtype=np.float64).copy()
    small = T < EXACT_N_MAX + 1
    if small.any():
        n = np.floor(T[small]).astype(np.int64)
        out[small] = stats.binom.sf(binomial_threshold(n, gamma, alpha) - 1, n, mu1[small])
    return out


def required_length(mu1, gamma, alpha, power) -> np.ndarray:
    """Eq. (3.4d): tokens needed for ``power`` at level ``alpha`` (``inf`` where ``mu1 <= gamma``)."""
    gamma, alpha = check_gamma(gamma), check_alpha(alpha)
    power = _finite_number("power", power)
    if not alpha < power < 1:
        raise ValueError(f"power must lie in (alpha={alpha}, 1), got {power}")
    mu1 = _check_mu(mu1)
    za, zb = stats.norm.isf(alpha), stats.norm.ppf(power)
    num = za * math.sqrt(gamma * (1 - gamma)) + zb * np.sqrt(mu1 * (1 - mu1))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (num / (mu1 - gamma)) ** 2
    return np.where(mu1 > gamma, out, np.inf)


def power_mixture(mu1, gamma, counts, alpha) -> float:
    """Eq. (3.4c'): the exact power (3.4c) averaged over scored counts ``counts`` (one per calibration
    sequence), ``mean_i Pr[Bin(n_i, mu1) >= c_alpha(n_i)]``. The power is not linear in ``n``, so the
    average over a spread of counts differs from the power at the mean count ``T_eff``."""
    gamma, alpha = check_gamma(gamma), check_alpha(alpha)
    mu1 = _check_mu(mu1)
    if mu1.size != 1:
        raise ValueError(f"mu1 must be one number, got shape {mu1.shape}")
    mu1 = float(mu1.reshape(-1)[0])
    n, w = np.unique(_check_counts(counts), return_counts=True)
    return _mixture(mu1, n, w, binomial_threshold(n, gamma, alpha))


def _mixture(mu1: float, n: np.ndarray, w: np.ndarray, c: np.ndarray) -> float:
    return float((stats.binom.sf(c - 1, n, mu1) * w).sum() / w.sum())


def _check_counts(counts) -> np.ndarray:
    c = _as_array(counts, "counts").reshape(-1)
    if c.size == 0 or not np.all(np.isfinite(c)) or np.any(c < 1) or np.any(c != np.floor(c)):
        raise ValueError("counts must be a non-empty array of whole numbers >= 1 (scored tokens per sequence)")
    return c


@dataclass
class Calibration:
    """An entropy profile: next-token distributions ``probs [n, N]`` from unwatermarked text,
    ``T_eff``, the mean number of scored (de-duplicated) tokens per sequence, and optionally
    ``counts``, the scored count of every calibration sequence (for the power (3.4c')) (Sec. 3.4)."""

    probs: torch.Tensor
    T_eff: float
    n_masks: int = 32
    seed: int = 0
    counts: np.ndarray | None = None
    _mass: dict = field(default_factory=dict, repr=False)

    @property
    def n_vocab(self) -> int:
        return int(self.probs.shape[1])

    def count_thresholds(self, gamma_eff: float, alpha: float) -> tuple:
        """Distinct scored counts, their frequencies and the exact critical counts ``c_alpha(n)``
        (cached per ``(gamma_eff, alpha)``: Algorithm A's bisection asks for them at every step)."""
        key = ("thresholds", gamma_eff, alpha)
        if key not in self._mass:
            n, w = np.unique(self.counts, return_counts=True)
            self._mass[key] = (n, w, binomial_threshold(n, gamma_eff, alpha))
        return self._mass[key]

    def green_mass(self, gamma: float) -> torch.Tensor:
        """``P_{j,r} = p_j . g_r`` for ``R`` key-independent random masks (one matmul, cached per gamma)."""
        gamma = check_gamma(gamma, self.n_vocab)
        k = green_size(self.n_vocab, gamma)
        if k not in self._mass:
            gen = torch.Generator().manual_seed(self.seed * 1000003 + k)
            masks = random_green_masks(self.n_vocab, gamma, self.n_masks, gen).to(self.probs.device)
            self._mass[k] = (self.probs.float() @ masks.T).double().clamp(0, 1)
        return self._mass[k]


def calibrate(probs: torch.Tensor, T_eff, n_masks: int = 32, seed: int = 0, counts=None) -> Calibration:
    """Build a :class:`Calibration` from unwatermarked next-token distributions (Sec. 3.4).
    ``counts``: scored (de-duplicated) tokens of each calibration sequence, for the power (3.4c')."""
    check_probs(probs, "probs")
    if probs.dim() != 2:
        raise ValueError(f"probs must be 2-D [n, N], got shape {tuple(probs.shape)}")
    T_eff = float(_check_T(T_eff, "T_eff"))
    n_masks = _positive_int("n_masks", n_masks)
    seed = _positive_int("seed", seed, 0)
    counts = None if counts is None else _check_counts(counts)
    return Calibration(probs.float(), T_eff, n_masks, seed, counts)


def _cal(cal) -> Calibration:
    if not isinstance(cal, Calibration):
        raise TypeError(f"cal must be a Calibration (from calibrate), got {type(cal).__name__}")
    return cal


def predict(cal: Calibration, gamma, delta, alpha=0.01, T=None, target_power: float = 0.9) -> dict:
    """Calibrated predictions at ``(gamma, delta)``: ``mu1``, ``kl_forward``, ``kl_reverse``,
    ``power`` (normal, Eq. 3.4b), ``power_exact`` (Eq. 3.4c at ``T``), ``power_mixture`` (Eq. 3.4c'
    over the calibration's scored counts; the exact power at ``T`` when ``T`` is given or the
    calibration has no counts), ``T_star`` (Eq. 3.4d at ``target_power``).

    ``gamma`` is the requested fraction; every formula uses ``gamma_eff`` (returned too).
    """
    cal = _cal(cal)
    gamma = check_gamma(gamma, cal.n_vocab)
    delta = check_delta(delta)
    alpha = check_alpha(alpha)
    counts = cal.counts if T is None else None
    T = cal.T_eff if T is None else float(_check_T(T))
    g = green_size(cal.n_vocab, gamma) / cal.n_vocab
    P = cal.green_mass(gamma)
    mu1 = float(phi(P, delta).mean())
    p_exact = float(power_exact(mu1, g, T, alpha))
    return {
        "gamma": gamma, "gamma_eff": g, "delta": delta, "T": T, "mu1": mu1,
        "kl_forward": float(kl_closed_form(P, delta, "forward").mean()),
        "kl_reverse": float(kl_closed_form(P, delta, "reverse").mean()),
        "power": float(power_normal(mu1, g, T, alpha)),
        "power_exact": p_exact,
        "power_mixture": p_exact if counts is None else _mixture(mu1, *cal.count_thresholds(g, alpha)),
        "T_star": float(required_length(mu1, g, alpha, target_power)),
    }


def _check_select(cal, gammas, alpha, metric, delta_max):
    cal = _cal(cal)
    gammas = tuple(gammas) if gammas is not None else ()
    if len(gammas) == 0:
        raise ValueError("gammas must be a non-empty grid")
    gammas = tuple(check_gamma(g, cal.n_vocab) for g in gammas)
    alpha = check_alpha(alpha)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    delta_max = _finite_number("delta_max", delta_max)
    if delta_max <= 0:
        raise ValueError(f"delta_max must be > 0, got {delta_max}")
    return cal, gammas, alpha, delta_max


POWER_MODELS = {"normal": "power", "exact": "power_exact", "mixture": "power_mixture"}


def _power_of(pred: dict, model: str) -> float:
    return pred[POWER_MODELS[model]]


def _power_only(cal: Calibration, gamma: float, delta: float, alpha: float, T, model: str) -> float:
    """The predicted power of :func:`predict` under ``model`` without the distortion terms (the bisection
    of Algorithm A asks for it some 40 times per gamma; the green mass is validated once, when cached)."""
    P = cal.green_mass(gamma)
    g = green_size(cal.n_vocab, gamma) / cal.n_vocab
    if delta <= DIRECT_DELTA_MAX:
        e = math.expm1(delta)
        mu1 = float(((e + 1.0) * P / (1.0 + e * P)).mean().clamp(0.0, 1.0))
    else:
        mu1 = float(phi(P, delta).mean())
    T_ = cal.T_eff if T is None else float(T)
    if model == "normal":
        return float(power_normal(mu1, g, T_, alpha))
    if model == "mixture" and T is None and cal.counts is not None:
        return _mixture(mu1, *cal.count_thresholds(g, alpha))
    return float(power_exact(mu1, g, T_, alpha))


def _bisect(f, lo: float, hi: float, iters: int = 40) -> float:
    """Smallest x in (lo, hi] with f(x) True, for f monotone False -> True."""
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if f(mid) else (mid, hi)
    return hi


def select_min_distortion(cal: Calibration, gammas=(0.1, 0.25, 0.5, 0.75), alpha=0.01, target_power=0.9,
                          T=None, metric: str = "kl_forward", delta_max=8.0, power_model: str = "normal") -> dict:
    """Algorithm A: for each gamma the least ``delta`` whose predicted power reaches ``target_power``
    (bisection; power increases in delta), then the gamma of least predicted distortion.
    ``power_model``: ``"normal"`` (3.4b at ``T_eff``), ``"exact"`` (3.4c at ``T_eff``) or ``"mixture"``
    (3.4c', the exact power averaged over the calibration's scored counts).

    Returns ``gamma``, ``delta``, the chosen point's predictions, ``per_gamma`` (one row per gamma,
    ``feasible`` False where even ``delta_max`` falls short), ``feasible`` and ``message``.
    """
    cal, gammas, alpha, delta_max = _check_select(cal, gammas, alpha, metric, delta_max)
    target_power = _finite_number("target_power", target_power)
    if not alpha < target_power < 1:
        raise ValueError(f"target_power must lie in (alpha={alpha}, 1), got {target_power}")
    if power_model not in POWER_MODELS:
        raise ValueError(f"power_model must be one of {tuple(POWER_MODELS)}, got {power_model!r}")
    if T is not None:
        _check_T(T)
    rows = []
    for g in gammas:
        def ok(d, g=g):
            return _power_only(cal, g, d, alpha, T, power_model) >= target_power
        if not ok(delta_max):
            rows.append({"gamma": g, "delta": float("nan"), "feasible": False})
            continue
        d = _bisect(ok, 0.0, delta_max)
        pr = predict(cal, g, d, alpha, T, target_power)
        rows.append({**pr, "power_model": power_model, "power_pred": _power_of(pr, power_model), "feasible": True})
    feas = [r for r in rows if r["feasible"]]
    if not feas:
        return {"feasible": False, "gamma": float("nan"), "delta": float("nan"), "per_gamma": rows,
                "message": f"target power {target_power} is unreachable with delta <= {delta_max} "
                           f"for every gamma in {gammas}; use longer texts or a larger delta_max"}
    best = min(feas, key=lambda r: r[metric])
    return {**best, "feasible": True, "per_gamma": rows, "message": "ok"}


def select_max_power(cal: Calibration, gammas=(0.1, 0.25, 0.5, 0.75), alpha=0.01, budget=0.1, T=None,
                     metric: str = "kl_forward", delta_max=8.0) -> dict:
    """Algorithm B: for each gamma the largest ``delta`` whose predicted distortion stays within
    ``budget`` (bisection; D increases in delta), then the gamma of most predicted power
    (ties broken by the smaller ``T_star``)."""
    cal, gammas, alpha, delta_max = _check_select(cal, gammas, alpha, metric, delta_max)
    budget = _finite_number("budget", budget)
    if budget <= 0:
        raise ValueError(f"budget must be > 0, got {budget}")
    if T is not None:
        _check_T(T)
    rows = []
    for g in gammas:
        def over(d, g=g):
            return predict(cal, g, d, alpha, T)[metric] > budget
        d = delta_max if not over(delta_max) else _bisect(over, 0.0, delta_max)
        if over(d):
            d = max(d - 1e-9 * delta_max, 0.0)
        rows.append({**predict(cal, g, d, alpha, T), "feasible": True})
    best = max(rows, key=lambda r: (round(r["power"], 12), -r["T_star"]))
    return {**best, "feasible": True, "per_gamma": rows, "message": "ok"}


def pareto_mask(distortion, power) -> np.ndarray:
    """Algorithm C's test: True for points no other point beats (power >= and distortion <=, one strictly)."""
    d = np.asarray(distortion, dtype=np.float64).ravel()
    p = np.asarray(power, dtype=np.float64).ravel()
    if d.shape != p.shape or d.size == 0:
        raise ValueError("distortion and power must be non-empty and of the same length")
    if not (np.all(np.isfinite(d)) and np.all(np.isfinite(p))):
        raise ValueError("distortion and power must be finite")
    better_eq = (p[None, :] >= p[:, None]) & (d[None, :] <= d[:, None])
    strict = (p[None, :] > p[:, None]) | (d[None, :] < d[:, None])
    return ~np.any(better_eq & strict, axis=1)
