"""Privacy accounting for DP-SGD and DP-C4 (spec Sec. 3.3-3.5).

* RDP of the Poisson-subsampled Gaussian mechanism at integer orders (Mironov, Talwar & Zhang 2019),
  vectorised over orders with a log-sum-exp; composition over stages is a sum.
* RDP -> (eps, delta) with the conversion used by Google's ``dp_accounting`` RDP accountant.
* Full batch (q = 1): Gaussian differential privacy, mu^2 = sum_t sigma_t^-2, exact.
* ``backend="dp_accounting_rdp"`` / ``"pld"`` call Google's ``dp_accounting`` (cross-check, tight number).

The accountant takes *noise multipliers* sigma (noise std divided by the sensitivity C_k); the noise
actually added at stage k is ``sigma_k * C_k`` (spec pitfall "noise multiplier vs noise std").
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import gammaln, logsumexp
from scipy.stats import norm

ORDERS = tuple(range(2, 257))
#: largest working set of :func:`rdp_subsampled_gaussian` (sigmas x orders x (max order + 1) float64
#: terms, three live at once), in bytes; past it the call raises instead of allocating
MAX_RDP_BYTES = 2 * 1024 ** 3
_ALLOC_CACHE: dict = {}
PRV_EPS_ERROR = 1e-2   # the error bound asked of Opacus's PRV accountant (its eps_error)
BACKENDS = ("rdp", "dp_accounting_rdp", "pld", "gdp", "opacus_rdp", "opacus_prv")


def _real(name, value, lo=None, hi=None, lo_open=True, hi_open=True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    bad = not math.isfinite(value)
    if lo is not None:
        bad |= value <= lo if lo_open else value < lo
    if hi is not None:
        bad |= value >= hi if hi_open else value > hi
    if bad:
        lo_s = "(" if lo_open else "["
        hi_s = ")" if hi_open else "]"
        raise ValueError(f"{name} must be finite and in {lo_s}{lo}, {hi}{hi_s}, got {value}")
    return value


def check_q(q) -> float:
    return _real("q", q, 0.0, 1.0, lo_open=True, hi_open=False)


def check_delta(delta) -> float:
    return _real("delta", delta, 0.0, 1.0)


def check_eps(eps) -> float:
    return _real("eps", eps, 0.0, None)


def _steps(steps, name: str = "steps_per_stage") -> int:
    """A positive whole number of steps, at most 2**53 (beyond, step counts are not exact floats)."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)):
        raise TypeError(f"{name} must be a positive integer, got {steps!r}")
    if not 1 <= steps <= 2 ** 53:
        raise ValueError(f"{name} must be an integer in [1, 2**53], got {steps!r}")
    return int(steps)


def _floats(name: str, value) -> np.ndarray:
    if value is None or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {type(value).__name__}")
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number or a sequence of numbers: {exc}") from None


def _orders(orders) -> np.ndarray:
    a = _floats("orders", orders)
    if a.ndim != 1 or a.size == 0:
        raise ValueError("orders must be a non-empty 1-D sequence of integers >= 2")
    if not np.all(np.isfinite(a)) or np.any(a < 2) or np.any(a != np.round(a)):
        raise ValueError("orders must be integers >= 2 for the internal RDP backend")
    return a.astype(int)


def _sigmas(sigmas, name="sigmas") -> np.ndarray:
    s = np.atleast_1d(_floats(name, sigmas))
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"{name} must be a positive number or a non-empty 1-D array")
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise ValueError(f"{name} must be finite and > 0 (a noise multiplier), got {s}")
    return s


@lru_cache(maxsize=8)
def _binom_rows(orders: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``log C(a, k)`` for the orders a only, ``(A, max order + 1)`` (-inf for k > a): the rows of
    the full Pascal table that are used, so orders (2, 30000) cost 2 rows, not 30001."""
    k = np.arange(max(orders) + 1)
    a = np.asarray(orders)[:, None]
    logc = np.where(k <= a, gammaln(a + 1) - gammaln(k + 1) - gammaln(np.maximum(a - k, 0) + 1), -np.inf)
    return logc, k


def rdp_subsampled_gaussian(q: float, sigma, orders=ORDERS) -> np.ndarray:
    """:math:`R_{q,\\sigma}(\\alpha)=\\frac1{\\alpha-1}\\log\\sum_{k=0}^{\\alpha}\\binom\\alpha k(1-q)^{\\alpha-k}q^k
    e^{(k^2-k)/(2\\sigma^2)}` (spec Sec. 3.5), one row per sigma: shape ``(len(orders),)`` for a scalar
    sigma, ``(K, len(orders))`` for K sigmas. ``q = 1`` is the Gaussian mechanism, alpha/(2 sigma^2).
    The working set (K sigmas x A orders x (max order + 1) terms) is capped at :data:`MAX_RDP_BYTES`."""
    q = check_q(q)
    a = _orders(orders)
    s = _sigmas(sigma, "sigma")
    if q == 1.0:
        out = a[None, :] / (2.0 * s[:, None] ** 2)
    else:
        nbytes = 3 * 8 * s.size * a.size * (int(a.max()) + 1)
        if nbytes > MAX_RDP_BYTES:
            raise ValueError(f"orders up to {int(a.max())} with {a.size} orders and {s.size} sigma(s) need about "
                             f"{nbytes / 2 ** 30:.1f} GiB, over MAX_RDP_BYTES = {MAX_RDP_BYTES / 2 ** 30:.0f} GiB; "
                             "use fewer or smaller orders (the default ORDERS stop at 256)")
        logc, k = _binom_rows(tuple(int(v) for v in a))               # (A, M+1)
        kk = k[None, :]
        base = logc + np.where(kk <= a[:, None], (a[:, None] - kk) * math.log1p(-q), 0.0) + kk * math.log(q)
        expo = (kk * kk - kk)[None, :, :] / (2.0 * s[:, None, None] ** 2)   # (K, 1, M+1)
        out = logsumexp(base[None] + expo, axis=-1) / (a[None, :] - 1)
    return out[0] if np.ndim(sigma) == 0 else out


def eps_from_rdp(rdp, delta: float, orders=ORDERS) -> float:
    """:math:`\\varepsilon=\\min_\\alpha R(\\alpha)+\\log\\frac{\\alpha-1}{\\alpha}-\\frac{\\log\\delta+\\log\\alpha}{\\alpha-1}`,
    clipped at 0 (the conversion of ``dp_accounting``'s RDP accountant)."""
    delta = check_delta(delta)
    a = _orders(orders).astype(float)
    r = np.asarray(rdp, dtype=float)
    if r.shape != a.shape:
        raise ValueError(f"rdp must have one value per order ({a.size}), got shape {r.shape}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rdp must be finite")
    eps = r + np.log1p(-1.0 / a) - np.log(delta * a) / (a - 1)
    eps = np.where(delta ** 2 + np.expm1(-r) > 0, 0.0, eps)
    return float(max(0.0, eps.min()))


def gdp_delta(eps: float, mu: float) -> float:
    """:math:`\\delta(\\varepsilon)=\\Phi(-\\varepsilon/\\mu+\\mu/2)-e^\\varepsilon\\Phi(-\\varepsilon/\\mu-\\mu/2)`.

    For ``eps > 700`` (where ``e^eps`` overflows) the second term is ``exp(eps + log Phi(.))``."""
    eps = _real("eps", eps, 0.0, None, lo_open=False)
    mu = _real("mu", mu, 0.0, None)
    if eps <= 700.0:
        return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))
    second = math.exp(min(eps + float(norm.logcdf(-eps / mu - mu / 2)), 700.0))
    return max(float(norm.cdf(-eps / mu + mu / 2)) - second, 0.0)


def gdp_eps(mu: float, delta: float) -> float:
    """The epsilon of a mu-GDP mechanism at ``delta`` (bisection on the decreasing delta(eps))."""
    mu, delta = _real("mu", mu, 0.0, None), check_delta(delta)
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while gdp_delta(hi, mu) > delta:
        lo, hi = hi, 2 * hi
        if hi > 1e6:
            raise ValueError(f"mu={mu} too large for delta={delta}")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gdp_delta(mid, mu) > delta else (lo, mid)
        if hi - lo < 1e-14 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def gdp_mu(eps: float, delta: float) -> float:
    """The mu for which a mu-GDP mechanism is exactly (eps, delta)-DP (bisection; delta grows with mu)."""
    eps, delta = check_eps(eps), check_delta(delta)
    lo, hi = 1e-6, 1.0
    while gdp_delta(eps, hi) < delta:
        lo, hi = hi, 2 * hi
        if hi > 1e4:
            raise ValueError(f"no mu reaches eps={eps}, delta={delta}")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gdp_delta(eps, mid) < delta else (lo, mid)
        if hi - lo < 1e-15 * hi:
            break
    return 0.5 * (lo + hi)


def epsilon(sigmas, steps_per_stage: int, q: float, delta: float, backend: str = "rdp",
            orders=ORDERS) -> float:
    """Epsilon of K stages, stage k = ``steps_per_stage`` steps of SGM(q, sigma_k), adaptively composed
    (spec Sec. 3.3: :math:`\\varepsilon_{\\rm RDP}(\\alpha)=\\sum_k m R_{q,\\sigma_k}(\\alpha)`).

    ``backend``: ``"rdp"`` (internal), ``"dp_accounting_rdp"`` (Google's RdpAccountant, same orders),
    ``"pld"`` (Google's PLD accountant, tight), ``"gdp"`` (q = 1 only, exact), ``"opacus_rdp"`` (Opacus's
    RDPAccountant, same orders), ``"opacus_prv"`` (Opacus's PRV accountant, eps_error 1e-2)."""
    s = _sigmas(sigmas)
    m = _steps(steps_per_stage)
    q, delta = check_q(q), check_delta(delta)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "rdp":
        rdp = m * rdp_subsampled_gaussian(q, s, orders).sum(0)
        return eps_from_rdp(rdp, delta, orders)
    if backend == "gdp":
        if q != 1.0:
            raise ValueError(f"backend='gdp' is exact for full batch only (q == 1), got q={q}")
        mu = math.sqrt(float(m) * float(np.sum(s ** -2.0)))
        try:
            return gdp_eps(mu, delta)
        except ValueError as exc:
            raise ValueError(f"steps_per_stage={m} with sigmas {s} give mu={mu:.3g}: {exc} "
                             "(the run has no meaningful privacy)") from None
    if backend.startswith("opacus"):
        from opacus.accountants import PRVAccountant, RDPAccountant

        acc = RDPAccountant() if backend == "opacus_rdp" else PRVAccountant()
        acc.history = [(float(sk), q, m) for sk in s]        # (noise multiplier, sample rate, steps)
        if backend == "opacus_rdp":
            return float(acc.get_epsilon(delta, alphas=[float(a) for a in _orders(orders)]))
        return float(acc.get_epsilon(delta, eps_error=PRV_EPS_ERROR))
    import dp_accounting

    events = [dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(float(sk)))
        if q < 1 else dp_accounting.GaussianDpEvent(float(sk)), m) for sk in s]
    event = dp_accounting.ComposedDpEvent(events)
    if backend == "dp_accounting_rdp":
        acc = dp_accounting.rdp.RdpAccountant(orders=[float(a) for a in _orders(orders)])
    else:
        acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(event)
    return float(acc.get_epsilon(delta))


def _bisect_scale(eps_of_scale, target: float, lo: float = 1e-2, hi: float = 1e4, tol: float = 1e-9) -> float:
    """Find s with eps(s) = target on a log bracket (eps is decreasing in s)."""
    e_lo, e_hi = eps_of_scale(lo), eps_of_scale(hi)
    if not e_hi <= target <= e_lo:
        raise ValueError(f"target eps={target} is unreachable: achievable range in the bracket is "
                         f"[{e_hi:.4g}, {e_lo:.4g}]")
    a, b = math.log(lo), math.log(hi)
    for _ in range(200):
        mid = 0.5 * (a + b)
        if eps_of_scale(math.exp(mid)) > target:
            a = mid
        else:
            b = mid
        if b - a < tol:
            break
    return math.exp(b)


def allocate_sigmas(thresholds, steps_per_stage: int, q: float, eps: float, delta: float,
                    shape: str = "sqrt", backend: str = "rdp") -> np.ndarray:
    """Algorithm 2 (spec Sec. 3.4): noise multipliers :math:`\\sigma_k=s\\,a_k` with the tailored shape
    :math:`a_k=C_k^{-1/2}` (``shape="sqrt"``; optimal for full batch) or :math:`a_k=1` (``"uniform"``),
    the scale s chosen so that the run is exactly (eps, delta)-DP. With ``backend="gdp"`` (q = 1) s is in
    closed form from :math:`\\mu^2=\\sum_k m/(s a_k)^2`; otherwise bisection on log s."""
    C = _sigmas(thresholds, "thresholds")
    if shape not in ("sqrt", "uniform"):
        raise ValueError(f"shape must be 'sqrt' or 'uniform', got {shape!r}")
    eps, delta, q = check_eps(eps), check_delta(delta), check_q(q)
    steps_per_stage = _steps(steps_per_stage)
    key = (tuple(C.tolist()), int(steps_per_stage), q, eps, delta, shape, backend)
    if key in _ALLOC_CACHE:                       # a pure function of its arguments: memoised
        return _ALLOC_CACHE[key].copy()
    a = C ** -0.5 if shape == "sqrt" else np.ones_like(C)
    if backend == "gdp":
        if q != 1.0:
            raise ValueError(f"backend='gdp' needs q == 1, got q={q}")
        mu = gdp_mu(eps, delta)
        out = a * math.sqrt(steps_per_stage * float(np.sum(a ** -2.0))) / mu
    else:
        out = _bisect_scale(lambda sc: epsilon(sc * a, steps_per_stage, q, delta, backend), eps) * a
    if len(_ALLOC_CACHE) > 4096:
        _ALLOC_CACHE.clear()
    _ALLOC_CACHE[key] = out
    return out.copy()


def calibrate_sigma(T: int, q: float, eps: float, delta: float, backend: str = "rdp") -> float:
    """Algorithm 3: the single noise multiplier of DP-SGD / DP-GD with T steps hitting (eps, delta)."""
    T = _steps(T, "T")
    return float(allocate_sigmas(np.ones(1), T, q, eps, delta, shape="uniform", backend=backend)[0])


def replace_one_eps(sigma: float, steps: int, q: float, delta: float) -> dict:
    """Epsilon of ``steps`` steps of the Poisson-subsampled Gaussian (noise multiplier ``sigma``) under
    three readings, with Google's PLD accountant: ``add_remove`` (the chapter's adjacency),
    ``replace_one`` (one example swapped: the tight number) and ``doubled`` (the shortcut "twice the
    sensitivity": add/remove at noise multiplier sigma/2, an upper bound on replace-one)."""
    import dp_accounting

    sigma = _real("sigma", sigma, 0.0, None)
    steps, q, delta = _steps(steps, "steps"), check_q(q), check_delta(delta)
    rel = dp_accounting.NeighboringRelation

    def pld(s, relation):
        ev = dp_accounting.GaussianDpEvent(s)
        ev = dp_accounting.PoissonSampledDpEvent(q, ev) if q < 1 else ev
        acc = dp_accounting.pld.PLDAccountant(neighboring_relation=relation, value_discretization_interval=1e-4)
        acc.compose(dp_accounting.SelfComposedDpEvent(ev, steps))
        return float(acc.get_epsilon(delta))

    return {"add_remove": pld(sigma, rel.ADD_OR_REMOVE_ONE), "replace_one": pld(sigma, rel.REPLACE_ONE),
            "doubled": pld(sigma / 2, rel.ADD_OR_REMOVE_ONE)}
