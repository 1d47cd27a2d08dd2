r"""BandPO: the Band operator and the clipped policy-gradient surrogate.

Li, Wang, Gao, Yao, Wang, Yin, Qiu, *BandPO: Bridging Trust Regions and Ratio Clipping via
Probability-Aware Bounds for LLM Reinforcement Learning*, ICML 2026 (arXiv:2603.04918).

PPO / GRPO clip the ratio :math:`r = \pi_\theta(a|s) / \pi_{old}(a|s)` of the sampled token into a
fixed interval :math:`[1-\epsilon_-, 1+\epsilon_+]`. BandPO replaces that interval by the range of
ratios reachable inside an f-divergence ball around the old next-token distribution :math:`q`:

.. math::

    u^\star = \max_{\pi \in \Delta} \frac{\pi_a}{p}, \quad
    \ell^\star = \min_{\pi \in \Delta} \frac{\pi_a}{p}
    \quad \text{s.t.} \quad D_f(\pi \,\|\, q) = \sum_b q_b f(\pi_b / q_b) \le \delta,
    \qquad p = q_a.                                                         \tag{Band}

Fixing :math:`\pi_a = r p`, Jensen's inequality shows that the cheapest way to place the remaining
mass is to rescale the other tokens proportionally, so the program reduces to one dimension:

.. math::

    g_f(p, r) = p f(r) + (1-p) f\Big(\frac{1 - r p}{1-p}\Big), \qquad
    [\ell^\star, u^\star] = \{ r \in [0, 1/p] : g_f(p, r) \le \delta \}.    \tag{1-D}

:math:`g_f(p,\cdot)` is convex with minimum 0 at :math:`r=1`, so each bound is either saturated
(:math:`u^\star = 1/p` when :math:`g_f(p, 1/p) \le \delta`, :math:`\ell^\star = 0` when
:math:`g_f(p, 0) \le \delta`) or the unique root of :math:`g_f(p, r) = \delta` on its side of 1.
TV, Pearson chi-square and squared Hellinger have closed-form roots; the KL directions and Neyman
chi-square are solved by a fixed-iteration, batched bisection (no host synchronisation inside).

BandPO then minimises the usual clipped surrogate with the per-token interval
:math:`[\ell_{i,t}, u_{i,t}] = \mathrm{Band}_{f,\delta}(p_{i,t})` (:func:`clipped_surrogate_loss`).

This file is written from the paper's mathematics (the official code is GPL-3.0 and was not used).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

# ---------------------------------------------------------------------------------------------
# f-divergences. Each generator takes u and d = u - 1, both computed directly from (p, r), so that
# the tiny values near u = 1 (small delta) and the ones near u = 0 are free of cancellation.
# ---------------------------------------------------------------------------------------------


def _f_kl(u: Tensor, d: Tensor) -> Tensor:
    # KL(pi_old || pi): f(u) = -log u + u - 1                             (+inf at u = 0)
    # near u = 1 use d - log1p(d) (no cancellation); near u = 0 use log(u) (d = -1 loses u)
    return torch.where(u < 0.5, d - torch.log(u), d - torch.log1p(d))


def _f_reverse_kl(u: Tensor, d: Tensor) -> Tensor:
    # KL(pi || pi_old): f(u) = u log u - u + 1                            (= 1 at u = 0)
    return torch.xlogy(u, u) - d


def _f_tv(u: Tensor, d: Tensor) -> Tensor:
    # total variation: f(u) = |u - 1| / 2
    return 0.5 * d.abs()


def _f_chi2(u: Tensor, d: Tensor) -> Tensor:
    # Pearson chi-square: f(u) = (u - 1)^2
    return d * d


def _f_hellinger(u: Tensor, d: Tensor) -> Tensor:
    # squared Hellinger: f(u) = (sqrt(u) - 1)^2 = (d / (sqrt(u) + 1))^2
    return (d / (torch.sqrt(u) + 1.0)) ** 2


def _f_neyman(u: Tensor, d: Tensor) -> Tensor:
    # Neyman chi-square: f(u) = (u - 1)^2 / u                             (+inf at u = 0)
    return d * d / u


@dataclass(frozen=True)
class Divergence:
    """An f-divergence :math:`D_f(\\pi\\|q)=\\sum_b q_b f(\\pi_b/q_b)` as used by the Band operator.

    ``f`` is the generator (``f(1) = 0``); ``kappa = f''(1)`` sets the small-delta law
    (:func:`quadratic_band`), ``None`` for TV which is not differentiable at 1.
    """

    name: str
    f_ud: Callable[[Tensor, Tensor], Tensor]
    kappa: float | None
    has_closed_form: bool
    label: str = ""

    def f(self, u: Tensor) -> Tensor:
        """The generator evaluated at ``u`` (ratio of new to old probability)."""
        u = torch.as_tensor(u)
        return self.f_ud(u, u - 1.0)


DIVERGENCES: dict[str, Divergence] = {
    "kl": Divergence("kl", _f_kl, 1.0, False, "KL(pi_old || pi)"),
    "reverse_kl": Divergence("reverse_kl", _f_reverse_kl, 1.0, False, "KL(pi || pi_old)"),
    "tv": Divergence("tv", _f_tv, None, True, "total variation"),
    "chi2": Divergence("chi2", _f_chi2, 2.0, True, "Pearson chi-square"),
    "hellinger": Divergence("hellinger", _f_hellinger, 0.5, True, "squared Hellinger"),
    "neyman_chi2": Divergence("neyman_chi2", _f_neyman, 2.0, False, "Neyman chi-square"),
}

# ---------------------------------------------------------------------------------------------
# Validation helpers (bad input -> ValueError / TypeError naming the argument)
# ---------------------------------------------------------------------------------------------


def _divergence(name) -> Divergence:
    if not isinstance(name, str):
        raise TypeError(f"divergence must be a string, one of {sorted(DIVERGENCES)}, got {type(name).__name__}")
    if name not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {sorted(DIVERGENCES)}, got {name!r}")
    return DIVERGENCES[name]


def _check_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)):
        raise TypeError(f"delta must be a real number, got {type(delta).__name__}")
    delta = float(delta)
    if not math.isfinite(delta) or delta <= 0:
        raise ValueError(f"delta must be a finite number > 0, got {delta}")
    return delta


def _as_float_tensor(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        try:
            x = torch.as_tensor(np.asarray(x, dtype=np.float64))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be a tensor of floats, got {type(x).__name__}") from err
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.float()  # never compute bounds in half precision (spec, pitfalls)
    return x


_DEFERRED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("bandpo_deferred_checks", default=None)


@contextlib.contextmanager
def deferred_checks():
    """Inside this block the value checks of the operators (:func:`band_bounds` and every bound rule's check
    of ``p``, :func:`clipped_surrogate_loss`'s finiteness and order checks) read nothing back to the host:
    each one ORs its failure flags into a device tensor, and the block reads them once when it ends, raising
    the ``ValueError`` of a check that failed (the first in the order the checks were first made). A
    training loop runs inside it (issue 43: no host sync per step); a value that would have raised at step
    t raises after the loop instead."""
    outer = _DEFERRED.get()
    flags: dict = {}
    token = _DEFERRED.set(flags)
    try:
        yield
    finally:
        _DEFERRED.reset(token)
    if outer is not None:               # nested: the outer block reads them
        for key, v in flags.items():
            outer[key] = outer[key] | v if key in outer else v
        return
    if flags:
        keys = list(flags)
        failed = torch.cat([flags[k].reshape(-1) for k in keys]).tolist()         # the one host read
        i = 0
        for key in keys:
            for message in key:
                if failed[i]:
                    raise ValueError(f"{message} (checked after the loop)")
                i += 1


def _value_checks(flags: list[Tensor], messages: tuple[str, ...], detail: Callable[[int], str] | None = None) -> None:
    """Raise ``ValueError(messages[i])`` for the first true flag (0-d bool tensors): now, with one host read
    for all of them, or, inside :func:`deferred_checks`, when that block ends. ``detail(i)`` may give an
    eager message with values read from the tensors (the deferred one is ``messages[i]``)."""
    stacked = torch.stack(flags)
    acc = _DEFERRED.get()
    if acc is not None:
        acc[messages] = acc[messages] | stacked if messages in acc else stacked
        return
    if stacked.any():
        i = next(j for j, f in enumerate(stacked.tolist()) if f)
        raise ValueError(detail(i) if detail is not None else messages[i])


def _check_p(p) -> Tensor:
    p = _as_float_tensor(p, "p")
    messages = ("p must not contain NaN", "p must lie in (0, 1]")
    _value_checks([torch.isnan(p).any(), ((p <= 0) | (p > 1)).any()], messages,
                  lambda i: messages[i] if i == 0 else
                  f"p must lie in (0, 1]; got values in [{p.min().item():.3g}, {p.max().item():.3g}]")
    return p


def p_min_for(dtype: torch.dtype) -> float:
    """Smallest old probability the operator works with: 1e-12 in float64, 1e-7 in float32."""
    return 1e-12 if dtype == torch.float64 else 1e-7


def _tiny_for(dtype: torch.dtype) -> float:
    """Smallest ratio used as the left end of the lower-bound bracket (log-space bisection)."""
    return 1e-300 if dtype == torch.float64 else 1e-37


# ---------------------------------------------------------------------------------------------
# The one-dimensional reduction (1-D)
# ---------------------------------------------------------------------------------------------


def _g(div: Divergence, p: Tensor, r: Tensor, q1: Tensor | None = None, c: Tensor | None = None) -> Tensor:
    """g_f(p, r) = p f(r) + (1-p) f((1 - r p)/(1 - p)), safe at r = 0 and r = 1/p (no NaN).

    ``q1 = 1 - p`` and ``c = p / (1 - p)`` may be passed precomputed (the bisection reuses them).
    """
    q1 = 1.0 - p if q1 is None else q1
    c = p / q1 if c is None else c
    d_on = r - 1.0  # u - 1 for the sampled token (u = r)
    d_off = (-c * d_on).clamp(min=-1.0)  # u - 1 for every other token, all rescaled alike
    return p * div.f_ud(r, d_on) + q1 * div.f_ud(1.0 + d_off, d_off)  # eq. (1-D)


def band_constraint(p, r, divergence: str = "kl") -> Tensor:
    r"""Smallest divergence reachable when the sampled token's ratio is ``r``: eq. (1-D),
    :math:`g_f(p, r) = p f(r) + (1-p) f((1-rp)/(1-p))`, for ``p`` in (0, 1) and ``r`` in [0, 1/p].

    Evaluated safely: at ``r = 0`` and ``r = 1/p`` the result is finite or ``+inf``, never NaN.
    """
    div = _divergence(divergence)
    p = _check_p(p)
    r = _as_float_tensor(r, "r").to(p.dtype)
    if torch.isnan(r).any() or (r < 0).any():
        raise ValueError("r must be >= 0 and not NaN")
    pm = p_min_for(p.dtype)
    return _g(div, p.clamp(pm, 1.0 - pm), r)


# ---------------------------------------------------------------------------------------------
# Closed forms (TV, Pearson chi-square, squared Hellinger), with saturation
# ---------------------------------------------------------------------------------------------


def _closed_form(name: str, p: Tensor, delta: float) -> tuple[Tensor, Tensor]:
    inv_p = 1.0 / p
    if name == "tv":
        # g = p |r - 1|  ->  r = 1 -/+ delta / p, intersected with [0, 1/p]
        lo = (1.0 - delta * inv_p).clamp(min=0.0)
        hi = torch.minimum(1.0 + delta * inv_p, inv_p)
    elif name == "chi2":
        # g = p (r - 1)^2 / (1 - p)  ->  r = 1 -/+ sqrt(delta (1 - p) / p)
        w = torch.sqrt(delta * (1.0 - p) * inv_p)
        lo = (1.0 - w).clamp(min=0.0)
        hi = torch.minimum(1.0 + w, inv_p)
    elif name == "hellinger":
        # g = 2 - 2 [p sqrt(r) + sqrt((1-p)(1-pr))]; with s = sqrt(r) and c = 1 - delta/2:
        # p s^2 - 2 c p s + c^2 - 1 + p = 0  ->  s = c -/+ sqrt((1-p)(1-c^2)/p).
        # Saturation first (squaring introduces spurious roots): the upper bound saturates iff
        # g(p, 1/p) = 2 - 2 sqrt(p) <= delta, the lower iff g(p, 0) = 2 - 2 sqrt(1-p) <= delta.
        c = 1.0 - 0.5 * delta
        w = torch.sqrt(((1.0 - p) * (1.0 - c * c) * inv_p).clamp(min=0.0))
        sat_up = torch.sqrt(p) >= c
        sat_low = torch.sqrt(1.0 - p) >= c
        hi = torch.where(sat_up, inv_p, torch.minimum((c + w) ** 2, inv_p))
        lo = torch.where(sat_low, torch.zeros_like(p), ((c - w).clamp(min=0.0)) ** 2)
    else:
        raise ValueError(
            f"divergence {name!r} has no closed form; use method='bisect' "
            f"(closed forms: {sorted(k for k, v in DIVERGENCES.items() if v.has_closed_form)})"
        )
    return lo, hi


def band_bounds_closed_form(p, delta: float, divergence: str) -> tuple[Tensor, Tensor]:
    """Closed-form Band interval for ``'tv'``, ``'chi2'``, ``'hellinger'`` (saturation included,
    intersected with [0, 1/p]); no cap, no relax. Raises ``ValueError`` for the other divergences."""
    div = _divergence(divergence)
    delta = _check_delta(delta)
    if not div.has_closed_form:
        _closed_form(div.name, torch.ones(1), delta)  # raises with the message above
    p = _check_p(p)
    pm = p_min_for(p.dtype)
    return _closed_form(div.name, p.clamp(pm, 1.0 - pm), delta)


# ---------------------------------------------------------------------------------------------
# Fixed-iteration batched bisection
# ---------------------------------------------------------------------------------------------


def _bisect(div: Divergence, p: Tensor, delta: float, max_iter: int,
            trace: list | None = None) -> tuple[Tensor, Tensor]:
    """Roots of g_f(p, r) = delta on both sides of r = 1, with the saturation checks.

    Upper bound: bisection on r in [1, 1/p] (g increasing). Lower bound: bisection on t = log r in
    [log tiny, 0] (g decreasing), so that roots like the Band-KL lower bound ~ exp(-delta/p) keep full
    relative precision; when g(p, tiny) <= delta the root lies below ``tiny`` (or the bound saturates
    at r = 0) and the lower bound is 0. Both brackets always keep their feasible end, which is
    returned: the result lies inside the divergence ball. ``max_iter`` halvings, no host sync.
    ``trace`` (a list) receives the current (upper, lower) iterates after every halving.
    """
    one = torch.ones_like(p)
    inv_p = 1.0 / p
    q1, c = 1.0 - p, p / (1.0 - p)  # reused by every evaluation of g
    # -- upper bound: sat_up <=> g(p, 1/p) <= delta (simplex saturation)
    sat_up = _g(div, p, inv_p, q1, c) <= delta
    a, b = one.clone(), inv_p.clone()  # g(a) <= delta < g(b)
    for _ in range(max_iter):
        mid = 0.5 * (a + b)
        over = _g(div, p, mid, q1, c) > delta
        a = torch.where(over, a, mid)
        b = torch.where(over, mid, b)
        if trace is not None:
            trace.append(["upper", torch.where(sat_up, inv_p, a)])
    hi = torch.where(sat_up, inv_p, a)
    # -- lower bound in log space: t in [log tiny, 0]
    t_tiny = math.log(_tiny_for(p.dtype))
    sat_low = _g(div, p, torch.full_like(p, math.exp(t_tiny)), q1, c) <= delta  # includes g(p, 0) <= delta
    ta, tb = torch.full_like(p, t_tiny), torch.zeros_like(p)  # g(e^ta) > delta >= g(e^tb)
    for _ in range(max_iter):
        mid = 0.5 * (ta + tb)
        over = _g(div, p, torch.exp(mid), q1, c) > delta
        ta = torch.where(over, mid, ta)
        tb = torch.where(over, tb, mid)
        if trace is not None:
            trace.append(["lower", torch.where(sat_low, torch.zeros_like(p), torch.exp(tb))])
    lo = torch.where(sat_low, torch.zeros_like(p), torch.exp(tb))
    return lo, hi


def _check_max_iter(max_iter) -> int:
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)):
        raise TypeError(f"max_iter must be an int, got {type(max_iter).__name__}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter}")
    return int(max_iter)


def band_bounds_bisect(p, delta: float, divergence: str, max_iter: int = 60) -> tuple[Tensor, Tensor]:
    """Band interval by fixed-iteration vectorised bisection (any divergence); no cap, no relax.

    60 halvings of [1, 1/p] leave an absolute error below 1e-6 in the ratio even at p = 1e-12.
    """
    div = _divergence(divergence)
    delta = _check_delta(delta)
    max_iter = _check_max_iter(max_iter)
    p = _check_p(p)
    pm = p_min_for(p.dtype)
    return _bisect(div, p.clamp(pm, 1.0 - pm), delta, max_iter)


# ---------------------------------------------------------------------------------------------
# The operator
# ---------------------------------------------------------------------------------------------


def band_bounds(p, delta: float, divergence: str = "kl", *, method: str = "auto", max_iter: int = 60,
                ratio_cap: float | None = 10.0,
                relax: tuple[float, float] | None = None) -> tuple[Tensor, Tensor]:
    r"""Per-token Band interval :math:`(\ell, u)` for old probabilities ``p`` (any shape), eq. (Band).

    Steps (the paper's algorithm): clamp ``p`` to :math:`[p_{min}, 1-p_{min}]` (this is where the
    limits :math:`p\to0`, :math:`p\to1` are taken, in a range where the 1-D problem is still well
    conditioned); closed form or bisection with saturation; optional *relax* (union with a fixed
    interval :math:`[1-\epsilon_-, 1+\epsilon_+]`, the paper's ablation); clamp
    :math:`\ell\in[0,1]`, :math:`u\in[1, u_{cap}]`. Computed without gradient.

    ``method``: ``"auto"`` (closed form when available), ``"closed"`` or ``"bisect"``.
    """
    div = _divergence(divergence)
    delta = _check_delta(delta)
    if method not in ("auto", "closed", "bisect"):
        raise ValueError(f"method must be 'auto', 'closed' or 'bisect', got {method!r}")
    if method == "closed" and not div.has_closed_form:
        raise ValueError(f"method='closed' is not available for divergence {div.name!r}; use 'bisect' or 'auto'")
    max_iter = _check_max_iter(max_iter)
    if ratio_cap is not None:
        if isinstance(ratio_cap, bool) or not isinstance(ratio_cap, (int, float, np.integer, np.floating)):
            raise TypeError(f"ratio_cap must be a number or None, got {type(ratio_cap).__name__}")
        if not ratio_cap >= 1:
            raise ValueError(f"ratio_cap must be >= 1, got {ratio_cap}")
    if relax is not None:
        if not isinstance(relax, (tuple, list)) or len(relax) != 2:
            raise ValueError(f"relax must be a tuple (eps_low, eps_high) of length 2, got {relax!r}")
        if not (0 <= relax[0] < 1) or relax[1] < 0:
            raise ValueError(f"relax must satisfy 0 <= eps_low < 1 and eps_high >= 0, got {relax!r}")
    p = _check_p(p)
    return _band(div, p, delta, div.has_closed_form and method != "bisect", max_iter, ratio_cap, relax)


def _band(div: Divergence, p: Tensor, delta: float | Tensor, use_closed: bool, max_iter: int,
          ratio_cap: float | None, relax: tuple[float, float] | None) -> tuple[Tensor, Tensor]:
    """The body of :func:`band_bounds` on checked arguments. ``delta`` may also be a tensor of the
    shape of ``p`` (one radius per element: several rules evaluated in one batched call, see
    :func:`icml26.bandpo.baselines.evaluate_rules`); every step is element-wise."""
    pm = p_min_for(p.dtype)
    with torch.no_grad():
        q = p.detach().clamp(pm, 1.0 - pm)
        lo, hi = _closed_form(div.name, q, delta) if use_closed else _bisect(div, q, delta, max_iter)
        if relax is not None:  # union with a fixed clip interval (ablation "relax")
            lo = torch.minimum(lo, torch.full_like(lo, 1.0 - relax[0]))
            hi = torch.maximum(hi, torch.full_like(hi, 1.0 + relax[1]))
        lo = lo.clamp(0.0, 1.0)
        hi = hi.clamp(min=1.0) if ratio_cap is None else hi.clamp(1.0, float(ratio_cap))
    return lo, hi


def band_bounds_from_logprob(old_logp, delta: float, divergence: str = "kl", **kw) -> tuple[Tensor, Tensor]:
    """:func:`band_bounds` from stored old log-probabilities (what a PPO buffer keeps).

    ``p = clamp(exp(clamp(old_logp, max=0)), min=p_min)``. Values up to 1e-6 above 0 (rounding in
    bf16 log-softmax) are clamped to 0; larger positive values raise ``ValueError``.
    """
    old_logp = _as_float_tensor(old_logp, "old_logp")
    if torch.isnan(old_logp).any():
        raise ValueError("old_logp must not contain NaN")
    if (old_logp > 1e-6).any():
        raise ValueError(f"old_logp must be <= 0 (a log-probability); max is {old_logp.max().item():.3g}")
    p = torch.exp(old_logp.clamp(max=0.0)).clamp(min=p_min_for(old_logp.dtype))
    return band_bounds(p, delta, divergence, **kw)


def quadratic_band(p, delta: float, kappa: float) -> tuple[Tensor, Tensor]:
    r"""Small-delta law: :math:`1 \mp \sqrt{2\delta(1-p)/(\kappa p)}`, from
    :math:`g_f(p,r) \approx \tfrac{\kappa}{2}\tfrac{p}{1-p}(r-1)^2` with :math:`\kappa=f''(1)`.
    Exact for Pearson chi-square (before saturation); not clamped."""
    delta = _check_delta(delta)
    if isinstance(kappa, bool) or not isinstance(kappa, (int, float)) or not kappa > 0:
        raise ValueError(f"kappa must be a number > 0, got {kappa!r}")
    p = _check_p(p)
    w = torch.sqrt(2.0 * delta * (1.0 - p) / (kappa * p))
    return 1.0 - w, 1.0 + w


def probability_margins(p, lo, hi) -> tuple[Tensor, Tensor]:
    """Feasible change of the sampled token's probability: ``(p (lo - 1), p (hi - 1))``."""
    p = _check_p(p)
    lo, hi = _as_float_tensor(lo, "lo"), _as_float_tensor(hi, "hi")
    for name, x in (("lo", lo), ("hi", hi)):
        if not torch.isfinite(x).all():
            raise ValueError(f"{name} must be finite (no NaN or inf)")
    if (lo > hi).any():
        raise ValueError("lo must be <= hi everywhere")
    return p * (lo - 1.0), p * (hi - 1.0)


# ---------------------------------------------------------------------------------------------
# Reference: the full-simplex convex program in cvxpy
# ---------------------------------------------------------------------------------------------


def band_bounds_cvxpy(pi_old, action: int, delta: float, divergence: str,
                      solver: str = "CLARABEL") -> tuple[float, float]:
    """Reference Band interval: solve eq. (Band) over the whole simplex with cvxpy (CPU, small n).

    Returns ``(min pi_a / p, max pi_a / p)``. Raises ``RuntimeError`` naming the solver status when
    a solve is not optimal.
    """
    import cvxpy as cp

    div = _divergence(divergence)
    delta = _check_delta(delta)
    q = np.asarray(pi_old, dtype=np.float64)
    if q.ndim != 1:
        raise ValueError(f"pi_old must be 1-D, got shape {q.shape}")
    if not np.all(np.isfinite(q)) or (q < 0).any():
        raise ValueError("pi_old must have finite, non-negative entries")
    if (q == 0).any():
        raise ValueError("pi_old must have full support (no zero entry): the divergence ball needs q_b > 0")
    if abs(q.sum() - 1.0) > 1e-8:
        raise ValueError(f"pi_old must sum to 1 within 1e-8, got {q.sum():.12f}")
    if isinstance(action, bool) or not isinstance(action, (int, np.integer)):
        raise TypeError(f"action must be an int, got {type(action).__name__}")
    if not 0 <= action < q.size:
        raise ValueError(f"action must be in [0, {q.size}), got {action}")
    n, p = q.size, float(q[action])
    x = cp.Variable(n)
    if div.name == "kl":  # KL(q || x) = sum q log q - sum q log x
        d = -cp.sum(cp.multiply(q, cp.log(x))) + float(np.sum(q * np.log(q)))
    elif div.name == "reverse_kl":  # KL(x || q)
        d = cp.sum(cp.kl_div(x, q))
    elif div.name == "tv":
        d = 0.5 * cp.norm1(x - q)
    elif div.name == "chi2":
        d = cp.sum_squares(cp.multiply(1.0 / np.sqrt(q), x - q))
    elif div.name == "hellinger":
        d = 2.0 - 2.0 * cp.sum(cp.multiply(np.sqrt(q), cp.sqrt(x)))
    else:  # Neyman: sum_b (x_b - q_b)^2 / x_b, one quad-over-lin atom per coordinate (small n)
        d = cp.sum(cp.hstack([cp.quad_over_lin(x[b] - q[b], x[b]) for b in range(n)]))
    cons = [x >= 0, cp.sum(x) == 1, d <= delta]
    out = []
    for sense in (cp.Minimize, cp.Maximize):
        prob = cp.Problem(sense(x[action]), cons)
        prob.solve(solver=solver)
        if prob.status != cp.OPTIMAL:
            raise RuntimeError(f"cvxpy solver {solver} returned status {prob.status!r} for {div.name}")
        out.append(float(x.value[action]) / p)
    return out[0], out[1]


# ---------------------------------------------------------------------------------------------
# GRPO advantages and the clipped surrogate with per-token bounds (Sec. 3.1 of the spec)
# ---------------------------------------------------------------------------------------------


def grpo_advantages(rewards, std_normalize: bool = True, eps: float = 1e-6) -> Tensor:
    r"""Group-normalised advantages :math:`\hat A_i = (R_i - \bar R)/(\mathrm{std}(R) + \varepsilon)`.

    ``rewards``: ``[n_prompts, G]``. Groups with constant reward get advantage exactly 0.
    """
    rewards = _as_float_tensor(rewards, "rewards")
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be 2-D [n_prompts, G], got shape {tuple(rewards.shape)}")
    G = rewards.shape[1]
    if std_normalize and G < 2:
        raise ValueError(f"rewards must have group size G >= 2 when std_normalize=True, got {G}")
    if G < 1:
        raise ValueError("rewards must have group size G >= 1")
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # [n, G]
    constant = (rewards.max(dim=1, keepdim=True).values == rewards.min(dim=1, keepdim=True).values)
    if std_normalize:
        centred = centred / (rewards.std(dim=1, keepdim=True) + eps)
    return torch.where(constant, torch.zeros_like(centred), centred)


AGG_MODES = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum")


def clipped_surrogate_loss(logp: Tensor, logp_old: Tensor, adv: Tensor, lo, hi,
                           mask: Tensor | None = None, dual_clip: float | None = None,
                           agg: str = "seq-mean-token-mean") -> tuple[Tensor, dict]:
    r"""PPO/GRPO clipped surrogate with per-token bounds (BandPO's objective).

    Per token: :math:`-\min\big(r \hat A,\ \mathrm{clip}(r, \ell, u)\,\hat A\big)` with
    :math:`r = \exp(\log\pi_\theta - \log\pi_{old})`; with ``dual_clip = c`` the loss of negative-advantage
    tokens is additionally capped at :math:`-c\hat A`. Aggregation ``agg``: ``seq-mean-token-mean`` (the
    official recipes), ``token-mean`` or ``seq-mean-token-sum``.

    Shapes: ``logp``, ``logp_old``, ``mask``: ``[B, T]`` (or ``[B]``); ``adv``: ``[B]`` or ``[B, T]``;
    ``lo``, ``hi``: floats or tensors broadcastable to ``[B, T]``.

    Returns the loss and detached statistics: ``clip_frac_up`` (ratio above ``hi`` with positive
    advantage: gradient stopped), ``clip_frac_down`` (below ``lo`` with negative advantage), and
    ``ratio_mean``/``ratio_max``/``ratio_min`` over valid tokens, plus the per-token masks.
    """
    if not isinstance(logp, Tensor) or not isinstance(logp_old, Tensor):
        raise TypeError("logp and logp_old must be tensors")
    if logp.shape != logp_old.shape:
        raise ValueError(f"logp_old must have the shape of logp {tuple(logp.shape)}, got {tuple(logp_old.shape)}")
    if agg not in AGG_MODES:
        raise ValueError(f"agg must be one of {AGG_MODES}, got {agg!r}")
    if dual_clip is not None and not dual_clip > 1:
        raise ValueError(f"dual_clip must be > 1 (or None), got {dual_clip}")
    squeeze = logp.dim() == 1
    if squeeze:
        logp, logp_old = logp[:, None], logp_old[:, None]
    if mask is None:
        mask = torch.ones_like(logp)
    else:
        if not isinstance(mask, Tensor):
            try:
                mask = torch.as_tensor(np.asarray(mask, dtype=np.float64), device=logp.device)
            except (TypeError, ValueError) as err:
                raise TypeError(f"mask must be a tensor (or array) of 0/1 values, got {type(mask).__name__}") from err
        mask = mask[:, None] if squeeze and mask.dim() == 1 else mask
        if mask.shape != logp.shape:
            raise ValueError(f"mask must have the shape of logp {tuple(logp.shape)}, got {tuple(mask.shape)}")
        mask = mask.to(logp.dtype)
        _value_checks([~(mask > 0).any()], ("mask must select at least one token (it is all zero)",))
    adv = _as_float_tensor(adv, "adv").to(dtype=logp.dtype, device=logp.device)
    if adv.shape not in (logp.shape[:1], logp.shape, (logp.shape[0],) if squeeze else ()):
        raise ValueError(f"adv must have shape [B] = {tuple(logp.shape[:1])} or the shape of logp "
                         f"{tuple(logp.shape)}, got {tuple(adv.shape)}")
    A = adv[:, None] if adv.dim() == 1 else adv  # [B, 1] or [B, T]
    lo_t = _as_float_tensor(lo, "lo").to(dtype=logp.dtype, device=logp.device)
    hi_t = _as_float_tensor(hi, "hi").to(dtype=logp.dtype, device=logp.device)
    if squeeze:
        lo_t = lo_t[:, None] if lo_t.dim() == 1 else lo_t
        hi_t = hi_t[:, None] if hi_t.dim() == 1 else hi_t
    for name, x in (("lo", lo_t), ("hi", hi_t)):
        try:
            torch.broadcast_shapes(x.shape, logp.shape)
        except RuntimeError:
            raise ValueError(f"{name} must broadcast to the shape of logp {tuple(logp.shape)}, "
                             f"got {tuple(x.shape)}") from None
    # one host sync for every value check (none inside deferred_checks): logp, logp_old, adv finite; lo, hi
    # not NaN; lo <= hi
    checks = {"logp": ~torch.isfinite(logp).all(), "logp_old": ~torch.isfinite(logp_old).all(),
              "adv": ~torch.isfinite(adv).all(), "lo": torch.isnan(lo_t).any(), "hi": torch.isnan(hi_t).any(),
              "mask": ~torch.isfinite(mask).all() | (mask < 0).any(), "order": (lo_t > hi_t).any()}
    what = {"lo": "NaN", "hi": "NaN", "mask": "NaN, infinite or negative values"}
    _value_checks(list(checks.values()), tuple("lo must be <= hi everywhere" if k == "order" else
                                               f"{k} must not contain {what.get(k, 'NaN or infinite values')}"
                                               for k in checks))

    ratio = torch.exp(logp - logp_old.detach())  # r_{i,t}                   [B, T]
    surr = ratio * A  # r A
    surr_clipped = torch.clamp(ratio, lo_t, hi_t) * A  # clip(r, l, u) A
    per_token = -torch.minimum(surr, surr_clipped)  # pessimistic bound
    if dual_clip is not None:  # cap the loss of negative-advantage tokens at -c A
        per_token = torch.where(A < 0, torch.minimum(per_token, -dual_clip * A), per_token)

    if agg == "token-mean":
        loss = (per_token * mask).sum() / mask.sum()
    else:
        tok = (per_token * mask).sum(dim=1)  # [B]
        n_tok = mask.sum(dim=1)
        valid = n_tok > 0
        if agg == "seq-mean-token-mean":
            tok = tok / n_tok.clamp(min=1.0)
        # the mean over valid sequences, without a boolean index (a host sync): the same value and gradient
        loss = torch.where(valid, tok, torch.zeros_like(tok)).sum() / valid.sum().to(tok.dtype)

    with torch.no_grad():
        m = mask > 0
        r = ratio.detach()
        up = (r > hi_t) & (A > 0) & m
        down = (r < lo_t) & (A < 0) & m
        n = m.sum().clamp(min=1)
        stats = {
            "clip_frac_up": up.sum() / n,
            "clip_frac_down": down.sum() / n,
            "ratio_mean": (r * m).sum() / n,
            "ratio_max": r.masked_fill(~m, -math.inf).max(),
            "ratio_min": r.masked_fill(~m, math.inf).min(),
            "clipped_up": up.squeeze(1) if squeeze else up,
            "clipped_down": down.squeeze(1) if squeeze else down,
        }
    return loss, stats
