"""The KGW green-list watermark (Kirchenbauer et al., 2023) and its detector, batched torch.

Equation numbers refer to the chapter's specification (``shared/papers/watermark.md``): the
paper itself was public only as an abstract, so the numbered quantities below are the book's
formalisation of the KGW scheme the paper builds on.

- Sec. 3.1: keyed green lists of exact size ``round(gamma * N)``, logit bias ``delta``. KGW's code
  uses ``int(gamma * N)`` instead (26 vs 25 tokens at ``gamma = 0.1``, ``N = 256``);
  ``convention="kgw"`` selects that size rule (and KGW's nominal ``gamma`` in the statistic of :func:`detect`).
- Sec. 3.2: green indicators, de-duplicated scoring, the z-test and the exact binomial test.
- Sec. 3.3: green mass ``P``, the biased green probability ``phi_delta(P)`` and the closed-form KL.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from scipy import stats

from ..core.checks import check_device as _check_device

Tensor = torch.Tensor

#: largest bias computed with ``e^delta`` directly; above it (or above ``log(max float) - 8`` of the
#: green mass's dtype, 80.7 for float32) the formulas of Sec. 3.3 run in log space (``math.expm1``
#: overflows at delta ~ 709.8; below the cut both forms agree to rounding)
DIRECT_DELTA_MAX = 700.0
#: largest dense 0/1 mask matrix (``green_matrix``, ``random_green_masks``), in bytes of its float32 output
MAX_MASK_BYTES = 2 * 1024 ** 3
#: largest count for the exact binomial test (``binomial_threshold``, ``power_exact``); beyond it the
#: normal approximation is used (scipy's binomial quantile stalls near 2**53 and cannot be interrupted)
EXACT_N_MAX = 10 ** 9


# -- argument checks -----------------------------------------------------------------------------

def _finite_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


#: green-list size rules: ``"book"`` rounds ``gamma * N`` to the nearest integer (halves up), ``"kgw"``
#: truncates it as KGW's ``int(vocab_size * gamma)`` does
CONVENTIONS = ("book", "kgw")


def check_convention(convention) -> str:
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS} (the green-list size rule: 'book' rounds "
                         f"gamma * N, 'kgw' truncates it as KGW's code does), got {convention!r}")
    return convention


def check_gamma(gamma, n_vocab: int | None = None, convention: str = "book") -> float:
    """Validate the green fraction: ``gamma`` in (0, 1) and a non-empty, non-full list for ``n_vocab``."""
    gamma = _finite_number("gamma", gamma)
    if not 0.0 < gamma < 1.0:
        raise ValueError(f"gamma must lie in (0, 1), got {gamma}")
    if n_vocab is not None:
        k = green_size(n_vocab, gamma, convention)
        if k == 0 or k == n_vocab:
            rule = "round" if convention == "book" else "int"
            raise ValueError(f"gamma={gamma} gives a green list of {k} of {n_vocab} tokens; "
                             f"{rule}(gamma * n_vocab) must lie strictly between 0 and n_vocab")
    return gamma


def check_delta(delta, name: str = "delta") -> float:
    """Validate the bias: finite and >= 0 (a negative bias is a different scheme)."""
    delta = _finite_number(name, delta)
    if delta < 0:
        raise ValueError(f"{name} must be >= 0 (a negative bias is a different scheme), got {delta}")
    return delta


def check_alpha(alpha) -> float:
    alpha = _finite_number("alpha", alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    return alpha


def check_float_dtype(dtype, name: str = "dtype") -> torch.dtype:
    """A floating dtype for probability rows: ``torch.float32`` or ``torch.float64``."""
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"{name} must be torch.float32 or torch.float64 (probabilities), got {dtype!r}")
    return dtype


def check_probs(p, name: str = "p", n_vocab: int | None = None) -> Tensor:
    """Validate rows on the probability simplex (entries >= 0, rows summing to 1 within 1e-4)."""
    if not isinstance(p, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(p).__name__}")
    if p.dim() < 1 or p.shape[-1] == 0 or p.numel() == 0:
        raise ValueError(f"{name} must have a non-empty last (vocabulary) dimension, got shape {tuple(p.shape)}")
    if not p.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got {p.dtype}")
    if n_vocab is not None and p.shape[-1] != n_vocab:
        raise ValueError(f"{name} has vocabulary size {p.shape[-1]}, expected {n_vocab}")
    if not bool(torch.isfinite(p).all()) or bool((p < 0).any()):
        raise ValueError(f"{name} must have finite, non-negative entries")
    if bool(((p.double().sum(-1) - 1.0).abs() > 1e-4).any()):
        raise ValueError(f"{name}: every row must sum to 1 within 1e-4")
    return p


# -- distributions with a settable entropy -------------------------------------------------------

def entropy(p: Tensor, dim: int = -1) -> Tensor:
    """Shannon entropy in nats, ``-sum p log p`` (0 log 0 = 0)."""
    check_probs(p)
    return -(torch.xlogy(p, p)).sum(dim)


def spike_entropy(p: Tensor, zeta, dim: int = -1) -> Tensor:
    """KGW's spike entropy ``S(p, zeta) = sum_k p_k / (1 + zeta p_k)`` (spec T2)."""
    check_probs(p)
    zeta = _finite_number("zeta", zeta)
    if zeta < 0:
        raise ValueError(f"zeta must be >= 0, got {zeta}")
    return (p / (1.0 + zeta * p)).sum(dim)


def _gen(generator):
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    return generator


def uniform_support(n_vocab: int, m: int, batch: int, generator=None, dtype=torch.float64) -> Tensor:
    """Rows uniform on ``m`` random tokens of ``n_vocab`` (entropy ``log m``); shape ``[batch, n_vocab]``."""
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    m = _positive_int("m", m)
    batch = _positive_int("batch", batch)
    if m > n_vocab:
        raise ValueError(f"m must lie in [1, n_vocab={n_vocab}], got {m}")
    dtype = check_float_dtype(dtype)
    perm = torch.rand(batch, n_vocab, generator=_gen(generator), dtype=torch.float32).argsort(-1)
    return torch.zeros(batch, n_vocab, dtype=dtype).scatter_(1, perm[:, :m], 1.0 / m)


def zipf(n_vocab: int, s, batch: int, generator=None, dtype=torch.float64) -> Tensor:
    """Randomly permuted Zipf rows ``p_k ~ k^-s`` (``s = 0`` is uniform); shape ``[batch, n_vocab]``."""
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    batch = _positive_int("batch", batch)
    s = _finite_number("s", s)
    if s < 0:
        raise ValueError(f"s must be >= 0, got {s}")
    dtype = check_float_dtype(dtype)
    base = torch.arange(1, n_vocab + 1, dtype=torch.float64) ** (-s)
    base = base / base.sum()
    perm = torch.rand(batch, n_vocab, generator=_gen(generator), dtype=torch.float32).argsort(-1)
    return base.to(dtype)[perm]


def softmax_gaussian(n_vocab: int, temperature, batch: int, generator=None, scale=1.0,
                     dtype=torch.float64) -> Tensor:
    """``softmax(scale * Z / temperature)`` with ``Z ~ N(0, I)``; shape ``[batch, n_vocab]``."""
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    batch = _positive_int("batch", batch)
    temperature = _finite_number("temperature", temperature)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    scale = _finite_number("scale", scale)
    dtype = check_float_dtype(dtype)
    z = torch.randn(batch, n_vocab, generator=_gen(generator), dtype=dtype)
    return torch.softmax(scale * z / temperature, -1)


# -- watermark mechanics (spec Sec. 3.1, 3.3) ----------------------------------------------------

def green_size(n_vocab: int, gamma: float, convention: str = "book") -> int:
    """Size of every green list (Sec. 3.1): ``round(gamma * N)`` (the book's rule; Python's
    round-half-even avoided), or with ``convention="kgw"`` KGW's ``int(N * gamma)``, which truncates:
    26 vs 25 tokens at ``gamma = 0.1``, ``N = 256``; the two agree wherever ``gamma * N`` is a whole number."""
    if check_convention(convention) == "kgw":
        return int(n_vocab * gamma)
    return int(math.floor(gamma * n_vocab + 0.5))


def effective_gamma(n_vocab: int, gamma, convention: str = "book") -> float:
    """``gamma_eff = |G| / N``, the true null green rate (Sec. 3.1): the fraction every power formula must use."""
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    gamma = check_gamma(gamma, n_vocab, convention)
    return green_size(n_vocab, gamma, convention) / n_vocab


def _exact_size_masks(rows: int, n_vocab: int, k: int, generator, device=None, names: str = "n_vocab") -> Tensor:
    """``rows`` exact-size masks, drawn in row chunks (the same bits as one draw: the CPU generator is
    serial) so that the working memory stays a few times the float32 output, which is capped at
    :data:`MAX_MASK_BYTES`."""
    nbytes = 4 * rows * n_vocab
    if nbytes > MAX_MASK_BYTES:
        raise ValueError(f"{names}: a dense [{rows}, {n_vocab}] mask matrix takes {nbytes / 2 ** 30:.1f} GiB, over "
                         f"MAX_MASK_BYTES = {MAX_MASK_BYTES / 2 ** 30:.0f} GiB (the dense green lists suit toy "
                         "vocabularies; draw fewer rows with n_contexts, or raise watermark.method.MAX_MASK_BYTES)")
    out = torch.empty(rows, n_vocab, dtype=torch.float32)
    step = max(1, 2 ** 22 // n_vocab)
    for r in range(0, rows, step):
        u = torch.rand(min(step, rows - r), n_vocab, generator=generator, dtype=torch.float64)
        out[r:r + step] = (u.argsort(-1).argsort(-1) < k).to(torch.float32)
    return out.to(device or "cpu")


def green_matrix(n_vocab: int, gamma, key: int, n_contexts: int | None = None, device=None,
                 convention: str = "book") -> Tensor:
    """Keyed green lists (Sec. 3.1), a dense ``[n_contexts, n_vocab]`` 0/1 float matrix.

    Row ``s`` is the green list ``G(xi, s)`` after context token ``s``; the default
    ``n_contexts = n_vocab + 1`` adds the start (BOS) context as row ``n_vocab``. Every row has
    exactly ``round(gamma N)`` ones (an argsort of keyed uniforms, not ``rand < gamma``, which
    would make the list size random). The matrix is drawn on the CPU from ``key`` and moved to
    ``device``, so the same key gives the same lists on every device. The dense matrix is capped at
    :data:`MAX_MASK_BYTES` (2 GiB, about a 23k-token vocabulary with every context): a larger one
    raises ``ValueError`` instead of allocating (GPT-2's 50,257 tokens would take 9.4 GiB).
    ``convention`` is the size rule of :func:`green_size` (``"kgw"``: ``int(gamma N)`` ones per row).
    """
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    convention = check_convention(convention)
    gamma = check_gamma(gamma, n_vocab, convention)
    key = _positive_int("key", key, 0)
    n_contexts = n_vocab + 1 if n_contexts is None else _positive_int("n_contexts", n_contexts)
    device = check_device(device)
    gen = torch.Generator().manual_seed(key)
    k = green_size(n_vocab, gamma, convention)
    return _exact_size_masks(n_contexts, n_vocab, k, gen, device, "n_vocab/n_contexts")


def random_green_masks(n_vocab: int, gamma, n_masks: int, generator=None) -> Tensor:
    """``n_masks`` independent uniformly random green lists of exact size (calibration, Sec. 3.4)."""
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    gamma = check_gamma(gamma, n_vocab)
    n_masks = _positive_int("n_masks", n_masks)
    return _exact_size_masks(n_masks, n_vocab, green_size(n_vocab, gamma), _gen(generator), None, "n_vocab/n_masks")


def check_green_mat(green_mat) -> Tensor:
    if not isinstance(green_mat, Tensor):
        raise TypeError(f"green_mat must be a torch.Tensor, got {type(green_mat).__name__}")
    if green_mat.dim() != 2 or green_mat.shape[0] == 0 or green_mat.shape[1] < 2:
        raise ValueError(f"green_mat must be 2-D [n_contexts, n_vocab], got shape {tuple(green_mat.shape)}")
    if not bool(((green_mat == 0) | (green_mat == 1)).all()):
        raise ValueError("green_mat must be 0/1 valued")
    return green_mat


def watermark_logits(logits: Tensor, green_rows: Tensor, delta) -> Tensor:
    """Eq. (3.1): ``logits + delta * 1[j in G]``; ``green_rows`` has the shape of ``logits``."""
    delta = check_delta(delta)
    if not isinstance(logits, Tensor) or not isinstance(green_rows, Tensor):
        raise TypeError("logits and green_rows must be torch.Tensors")
    if logits.shape != green_rows.shape:
        raise ValueError(f"green_rows shape {tuple(green_rows.shape)} must equal logits shape {tuple(logits.shape)}")
    return logits + delta * green_rows.to(logits.dtype)


def _as_tensor(x, name: str) -> Tensor:
    if isinstance(x, Tensor):
        t = x
    elif isinstance(x, (int, float, np.ndarray, np.floating, list)) and not isinstance(x, bool):
        t = torch.as_tensor(x, dtype=torch.float64)
    else:
        raise TypeError(f"{name} must be a number, array or tensor, got {type(x).__name__}")
    if not t.is_floating_point():
        t = t.double()
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite")
    return t


def _check_mass(P) -> Tensor:
    P = _as_tensor(P, "P")
    if P.dtype in (torch.float16, torch.bfloat16):     # e^delta and log-space sums need float32 range
        P = P.float()
    if bool(((P < -1e-9) | (P > 1 + 1e-9)).any()):
        raise ValueError("P (green mass) must lie in [0, 1]")
    return P.clamp(0.0, 1.0)


def _direct(P: Tensor, delta: float) -> bool:
    """Whether ``e^delta P`` is safe in ``P``'s dtype (see :data:`DIRECT_DELTA_MAX`)."""
    return delta <= min(DIRECT_DELTA_MAX, math.log(torch.finfo(P.dtype).max) - 8.0)


def _log_norm(P: Tensor, delta: float) -> Tensor:
    """``log(1 + (e^delta - 1) P)``, the log normaliser of the biased distribution (Sec. 3.3); in log
    space, ``logaddexp(delta + log P, log(1 - P))``, above :data:`DIRECT_DELTA_MAX`."""
    if _direct(P, delta):
        return torch.log1p(math.expm1(delta) * P)
    return torch.logaddexp(delta + torch.log(P), torch.log1p(-P))


def phi(P, delta) -> Tensor:
    """Eq. (3.3a): green probability after biasing, ``phi_delta(P) = e^d P / (1 + (e^d - 1) P)``
    (``exp(d + log P - log Z)`` above :data:`DIRECT_DELTA_MAX`, where ``e^d`` overflows)."""
    P = _check_mass(P)
    delta = check_delta(delta)
    if not _direct(P, delta):
        return torch.exp(delta + torch.log(P) - _log_norm(P, delta)).clamp(0.0, 1.0)
    e = math.expm1(delta)
    return (e + 1.0) * P / (1.0 + e * P)


def kl_closed_form(P, delta, direction: str = "forward") -> Tensor:
    """Eq. (3.3b): per-token KL between the watermarked and the original distribution.

    ``forward``: ``KL(p_hat || p) = delta phi_delta(P) - log(1 + (e^delta - 1) P)``;
    ``reverse``: ``KL(p || p_hat) = log(1 + (e^delta - 1) P) - delta P``.
    Both depend on ``p`` only through the green mass ``P`` (spec T4).
    """
    P = _check_mass(P)
    delta = check_delta(delta)
    log_z = _log_norm(P, delta)
    if direction == "forward":
        out = delta * phi(P, delta) - log_z
    elif direction == "reverse":
        out = log_z - delta * P
    else:
        raise ValueError(f"direction must be 'forward' or 'reverse', got {direction!r}")
    return out.clamp_min(0.0)


def mu_max(gamma, delta):
    """High-entropy limit of the green rate, ``phi_delta(gamma)`` (Sec. 3.3, the Jensen upper bound T2)."""
    gamma = _as_tensor(gamma, "gamma")
    if bool(((gamma <= 0) | (gamma >= 1)).any()):
        raise ValueError("gamma must lie in (0, 1)")
    out = phi(gamma, delta)
    return float(out) if out.dim() == 0 else out


def kl_max(gamma, delta, direction: str = "forward"):
    """High-entropy limit of the distortion, ``KL_delta(gamma)`` (``D_max`` of Sec. 3.3)."""
    gamma = _as_tensor(gamma, "gamma")
    if bool(((gamma <= 0) | (gamma >= 1)).any()):
        raise ValueError("gamma must lie in (0, 1)")
    out = kl_closed_form(gamma, delta, direction)
    return float(out) if out.dim() == 0 else out


def _hypergeom_mass(n_vocab: int, gamma, m: int):
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    gamma = check_gamma(gamma, n_vocab)
    m = _positive_int("m", m)
    if m > n_vocab:
        raise ValueError(f"m must lie in [1, n_vocab={n_vocab}], got {m}")
    k = green_size(n_vocab, gamma)
    j = np.arange(0, m + 1)
    w = stats.hypergeom(n_vocab, k, m).pmf(j)
    return torch.as_tensor(j / m, dtype=torch.float64), torch.as_tensor(w, dtype=torch.float64)


def mu1_uniform_exact(n_vocab: int, gamma, m: int, delta) -> float:
    """Exact ``mu_1`` for a distribution uniform on ``m`` tokens: ``m P ~ Hypergeometric(N, round(gamma N), m)``."""
    P, w = _hypergeom_mass(n_vocab, gamma, m)
    return float((w * phi(P, delta)).sum())


def kl_uniform_exact(n_vocab: int, gamma, m: int, delta, direction: str = "forward") -> float:
    """Exact expected KL for a distribution uniform on ``m`` tokens (hypergeometric green mass)."""
    P, w = _hypergeom_mass(n_vocab, gamma, m)
    return float((w * kl_closed_form(P, delta, direction)).sum())


def kgw_lower_bound(p: Tensor, gamma, delta) -> Tensor:
    """KGW's spike-entropy bound ``mu_1 >= mu_max(gamma, delta) S(p, zeta)`` (spec T2).

    ``zeta = (1 - gamma)(e^delta - 1) / (1 + (e^delta - 1) gamma)``; returns one bound per row of ``p``.
    """
    check_probs(p)
    gamma = check_gamma(gamma)
    delta = check_delta(delta)
    if delta > DIRECT_DELTA_MAX:        # the same ratio with numerator and denominator times e^-delta
        em = -math.expm1(-delta)
        zeta = (1.0 - gamma) * em / (math.exp(-delta) + gamma * em)
    else:
        e = math.expm1(delta)
        zeta = (1.0 - gamma) * e / (1.0 + e * gamma)
    return mu_max(gamma, delta) * spike_entropy(p, zeta)


# -- detection (spec Sec. 3.2) -------------------------------------------------------------------

def _check_tokens(tokens, name: str, upper: int) -> Tensor:
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tokens).__name__}")
    if tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise TypeError(f"{name} must be an integer tensor, got {tokens.dtype}")
    if tokens.dim() != 2:
        raise ValueError(f"{name} must be 2-D [batch, T], got shape {tuple(tokens.shape)}")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= upper):
        raise ValueError(f"{name} ids must lie in [0, {upper}), got range [{int(tokens.min())}, {int(tokens.max())}]")
    return tokens.long()


def green_indicators(tokens: Tensor, prev_tokens: Tensor, green_mat: Tensor) -> Tensor:
    """``x_t = 1[s_t in G(xi, s_{t-1})]`` (Sec. 3.2), ``[B, T]`` float; one gather, no loops."""
    check_green_mat(green_mat)
    n_ctx, n_vocab = green_mat.shape
    tokens = _check_tokens(tokens, "tokens", n_vocab)
    prev_tokens = _check_tokens(prev_tokens, "prev_tokens", n_ctx)
    if tokens.shape != prev_tokens.shape:
        raise ValueError(f"prev_tokens shape {tuple(prev_tokens.shape)} must equal tokens shape {tuple(tokens.shape)}")
    g = green_mat.to(tokens.device)
    return g[prev_tokens, tokens].float()


def first_occurrence_mask(prev_tokens: Tensor, tokens: Tensor, n_vocab: int) -> Tensor:
    """True at the first occurrence of each (context, token) pair in its row (Sec. 3.2, de-duplication).

    Vectorised: pair ids ``prev * n_vocab + token`` are stably sorted per row; a position is a
    first occurrence when its sorted id differs from its predecessor's; the flags are scattered back.
    """
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    tokens = _check_tokens(tokens, "tokens", n_vocab)
    prev_tokens = _check_tokens(prev_tokens, "prev_tokens", 2**40)
    if tokens.shape != prev_tokens.shape:
        raise ValueError("prev_tokens and tokens must have the same shape")
    ids = prev_tokens * n_vocab + tokens
    sorted_ids, order = torch.sort(ids, dim=-1, stable=True)
    first = torch.ones_like(sorted_ids, dtype=torch.bool)
    first[:, 1:] = sorted_ids[:, 1:] != sorted_ids[:, :-1]
    out = torch.empty_like(first)
    out.scatter_(-1, order, first)
    return out


def z_score(n_green, n_scored, gamma) -> Tensor:
    """Eq. (3.2): ``z = (S - gamma n) / sqrt(n gamma (1 - gamma))``; ``nan`` where ``n = 0``."""
    gamma = check_gamma(gamma)
    S = _as_tensor(n_green, "n_green")
    n = _as_tensor(n_scored, "n_scored")
    if bool((n < 0).any()) or bool((S < 0).any()) or bool((S > n).any()):
        raise ValueError("need 0 <= n_green <= n_scored")
    den = torch.sqrt(n * gamma * (1.0 - gamma))
    return torch.where(n > 0, (S - gamma * n) / den.clamp_min(1e-300), torch.full_like(den, float("nan")))


def binomial_sf(k, n, p) -> Tensor:
    """Exact upper tail ``Pr[Bin(n, p) >= k]`` in batched torch (log-space pmf, logsumexp).

    ``k``, ``n`` broadcast; ``p`` a scalar in (0, 1). Cross-checked against ``scipy.stats.binom.sf``.
    """
    p = _finite_number("p", p)
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p}")
    k = _as_tensor(k, "k")
    n = _as_tensor(n, "n")
    k, n = torch.broadcast_tensors(k.double(), n.double())
    if bool((n < 0).any()) or bool((n != n.round()).any()) or bool((k != k.round()).any()):
        raise ValueError("n must be non-negative integers and k integers")
    n_max = int(n.max()) if n.numel() else 0
    j = torch.arange(n_max + 1, dtype=torch.float64, device=n.device)
    nn, jj = n.unsqueeze(-1), j
    logpmf = (torch.lgamma(nn + 1) - torch.lgamma(jj + 1) - torch.lgamma((nn - jj).clamp_min(0) + 1)
              + jj * math.log(p) + (nn - jj) * math.log1p(-p))
    keep = (jj >= k.unsqueeze(-1)) & (jj <= nn)
    logpmf = torch.where(keep, logpmf, torch.full_like(logpmf, -float("inf")))
    out = torch.logsumexp(logpmf, -1).exp()
    return torch.where(k <= 0, torch.ones_like(out), out)


def check_counts(n, name: str = "n") -> np.ndarray:
    """Non-negative finite counts (a number or an array), floored to whole numbers, at most ``2**53``
    (the largest range in which every whole number is a float64)."""
    if n is None or isinstance(n, (str, bytes)):
        raise TypeError(f"{name} must be a number or an array of numbers, got {type(n).__name__}")
    try:
        a = np.asarray(n.detach().cpu() if isinstance(n, Tensor) else n, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number or an array of numbers: {exc}") from None
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name} must be non-negative and finite")
    if np.any(a > 2.0 ** 53):
        raise ValueError(f"{name} must be at most 2**53 (counts beyond are not whole float64 numbers), "
                         f"got {float(a.max()):.3g}")
    return np.floor(a)


def _threshold_exact(n: np.ndarray, gamma: float, alpha: float) -> np.ndarray:
    n = n.astype(np.int64)
    # isf gives the largest c' with sf(c') > alpha (up to rounding); step to the exact boundary.
    c = np.asarray(stats.binom.isf(alpha, n, gamma)).astype(np.int64) + 1
    c = np.where(stats.binom.sf(c - 2, n, gamma) <= alpha, c - 1, c)
    return np.where(stats.binom.sf(c - 1, n, gamma) > alpha, c + 1, c)


def binomial_threshold(n, gamma, alpha) -> np.ndarray:
    """``c_alpha``: the smallest count whose exact null tail ``Pr[Bin(n, gamma) >= c]`` is ``<= alpha``.

    Exact for ``n <= EXACT_N_MAX`` (1e9); beyond, the normal approximation
    ``ceil(gamma n + z_{1-alpha} sqrt(n gamma (1 - gamma)))`` (relative error below 1e-4 there)."""
    gamma = check_gamma(gamma)
    alpha = check_alpha(alpha)
    n = check_counts(n)
    if np.all(n <= EXACT_N_MAX):
        return _threshold_exact(n, gamma, alpha)
    flat = n.reshape(-1)
    c = np.empty(flat.shape, dtype=np.int64)
    small = flat <= EXACT_N_MAX
    if small.any():
        c[small] = _threshold_exact(flat[small], gamma, alpha)
    big = flat[~small]
    c[~small] = np.ceil(gamma * big + stats.norm.isf(alpha) * np.sqrt(big * gamma * (1 - gamma))).astype(np.int64)
    return c.reshape(n.shape)


def detect(tokens: Tensor, green_mat: Tensor, gamma, context0: int, dedup: bool = True, alpha=0.01,
           method: str = "exact", convention: str = "book") -> dict:
    """Score token sequences for the watermark (Sec. 3.2). ``tokens [B, T]``; ``context0`` the start context.

    Returns a dict of ``[B]`` tensors: ``z``, ``n_scored``, ``n_green``, ``p_value`` and ``reject``
    (``p <= alpha``). ``method='exact'`` uses ``Pr[Bin(n, gamma) >= S]``; ``'normal'`` uses ``1 - Phi(z)``.
    The green matrix's row sums are checked against the list size of ``gamma`` (detector/generator
    mismatch raises).

    ``convention="book"`` (default) expects lists of ``round(gamma N)`` tokens and puts the true null
    rate ``gamma_eff = round(gamma N) / N`` into Eq. (3.2) and the exact tail. ``convention="kgw"`` is
    KGW's ``WatermarkDetector``: lists of ``int(gamma N)`` tokens and the nominal ``gamma`` in ``z``
    and the p-value (KGW's detector uses ``method='normal'``). Where ``gamma N`` is a whole number the
    two conventions give identical results.
    A sequence with no scored token gets ``z = nan`` and ``p = 1`` with a warning.
    """
    check_green_mat(green_mat)
    convention = check_convention(convention)
    n_ctx, n_vocab = green_mat.shape
    gamma = check_gamma(gamma, n_vocab, convention)
    alpha = check_alpha(alpha)
    if method not in ("exact", "normal"):
        raise ValueError(f"method must be 'exact' or 'normal', got {method!r}")
    if not isinstance(context0, (int, np.integer)) or isinstance(context0, bool):
        raise TypeError(f"context0 must be an integer token id, got {type(context0).__name__}")
    if not 0 <= context0 < n_ctx:
        raise ValueError(f"context0 must lie in [0, {n_ctx}) (a row of green_mat), got {context0}")
    k = green_size(n_vocab, gamma, convention)
    if bool((green_mat.sum(1) != k).any()):
        raise ValueError(f"green_mat row sums do not match gamma={gamma} (expected {k} of {n_vocab} under "
                         f"convention={convention!r}); the detector must use the generator's gamma and size rule")
    gamma_eff = k / n_vocab if convention == "book" else gamma
    tokens = _check_tokens(tokens, "tokens", n_vocab)
    if tokens.shape[1] == 0:
        raise ValueError("tokens must have at least one position")
    prev = torch.cat([torch.full_like(tokens[:, :1], context0), tokens[:, :-1]], 1)
    x = green_indicators(tokens, prev, green_mat)
    keep = first_occurrence_mask(prev, tokens, n_ctx) if dedup else torch.ones_like(x, dtype=torch.bool)
    n = keep.sum(1).double()
    S = (x * keep).sum(1).double()
    z = z_score(S, n, gamma_eff)
    if method == "exact":
        pv = binomial_sf(S, n, gamma_eff)
    else:
        pv = torch.as_tensor(stats.norm.sf(z.cpu().numpy()), dtype=torch.float64, device=z.device)
    empty = n == 0
    if bool(empty.any()):
        warnings.warn(f"{int(empty.sum())} sequence(s) have no scored token: z = nan, p = 1", stacklevel=2)
        pv = torch.where(empty, torch.ones_like(pv), pv)
    return {"z": z, "n_scored": n, "n_green": S, "p_value": pv, "reject": pv <= alpha}


def check_device(device, name: str = "device") -> torch.device | None:
    """``None`` (the caller's default) or a usable device (:func:`icml26.core.checks.check_device`)."""
    return _check_device(device, name, allow_none=True)
