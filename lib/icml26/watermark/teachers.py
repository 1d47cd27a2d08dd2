"""Language models whose entropy the reader sets (spec Sec. 7), batched torch.

- :func:`draw_probs` / :func:`sample_iid`: i.i.d. next-token distributions (uniform on ``m``
  tokens, permuted Zipf, temperature-softmax of Gaussian logits) for notebook 1.
- :class:`HMMTeacher`: a sticky hidden Markov model over a 256-token vocabulary whose emission
  temperature is the entropy knob. Its exact predictive distribution (forward filtering) *is* the
  language model that gets watermarked here, and it doubles as the oracle for the NLL increase.
"""

from __future__ import annotations

import torch

from .method import (
    _finite_number,
    _gen,
    _log_norm,
    _positive_int,
    check_delta,
    check_device,
    check_gamma,
    check_green_mat,
    green_size,
    softmax_gaussian,
    uniform_support,
    zipf,
)

FAMILIES = ("uniform", "zipf", "softmax")
#: largest bias applied as the product ``p e^delta`` in float32 (``e^88.7`` overflows); above it
#: :func:`sample_iid` tilts in log space
FLOAT32_TILT_MAX = 80.0


def draw_probs(family: str, param, n_vocab: int, rows: int, generator=None, dtype=torch.float64) -> torch.Tensor:
    """``rows`` next-token distributions of a family: ``uniform`` (param ``m``), ``zipf`` (exponent ``s``)
    or ``softmax`` (temperature of ``softmax(Z / T)``). All three are permutation invariant.
    ``param`` must be a whole number for ``uniform`` (2.7 is refused, not rounded), >= 0 for ``zipf`` and
    > 0 for ``softmax``."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    n_vocab, rows = _positive_int("n_vocab", n_vocab, 2), _positive_int("rows", rows)
    param = _finite_number("param", param)
    if family == "uniform":
        if param != int(param) or param < 1:
            raise ValueError(f"param must be a whole number m >= 1 of tokens for family='uniform', got {param}")
        return uniform_support(n_vocab, int(param), rows, generator, dtype=dtype)
    if family == "zipf":
        if param < 0:
            raise ValueError(f"param (the Zipf exponent) must be >= 0, got {param}")
        return zipf(n_vocab, param, rows, generator, dtype=dtype)
    if param <= 0:
        raise ValueError(f"param (the softmax temperature) must be > 0, got {param}")
    return softmax_gaussian(n_vocab, param, rows, generator, dtype=dtype)


def sample_iid(family: str, param, n_vocab: int, rows: int, gamma, delta, generator=None,
               chunk: int | None = None) -> dict:
    """Watermarked sampling of ``rows`` independent tokens, each from a fresh distribution of the family
    and a fresh green list (notebook 1's i.i.d. model).

    Because the families are invariant under permuting the vocabulary, a fresh uniformly random
    green list is equivalent in law to the fixed list ``{0, ..., k-1}`` applied to a freshly
    permuted distribution; the code uses the latter (no per-row argsort). Tokens are drawn from
    ``softmax(log p + delta 1_G)`` by inverting the cumulative sum; up to ``FLOAT32_TILT_MAX`` the tilt is
    the product ``p e^delta`` (float32), above it ``log p + delta 1_G`` is normalised in log space, so a
    bias of 89 or 1000 puts the mass on the green list instead of overflowing to NaN. Returns ``[rows]`` tensors ``green``
    (indicator), ``P`` (green mass), ``log_ratio`` (``log p_hat(s) / p(s)``, an unbiased sample of the
    forward KL) and ``entropy``.
    """
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    rows = _positive_int("rows", rows)
    gamma = check_gamma(gamma, n_vocab)
    delta = check_delta(delta)
    gen = _gen(generator)
    k = green_size(n_vocab, gamma)
    chunk = max(1, 2**24 // n_vocab) if chunk is None else _positive_int("chunk", chunk)
    bias = torch.zeros(n_vocab, dtype=torch.float32)
    bias[:k] = delta
    out = {"green": [], "P": [], "log_ratio": [], "entropy": []}
    done = 0
    while done < rows:
        r = min(chunk, rows - done)
        p = draw_probs(family, param, n_vocab, r, gen, dtype=torch.float32)
        P = p[:, :k].double().sum(1).clamp(0, 1)
        if delta <= FLOAT32_TILT_MAX:
            q = p * torch.exp(bias)
            q = q / q.sum(1, keepdim=True)
        else:
            q = torch.softmax(torch.log(p) + bias, 1)
        u = torch.rand(r, 1, generator=gen, dtype=torch.float64)
        c = q.double().cumsum(-1)
        s = torch.searchsorted(c, u * c[:, -1:]).squeeze(1).clamp_max(n_vocab - 1)
        green = (s < k).double()
        out["green"].append(green)
        out["P"].append(P)
        # log p_hat(s)/p(s) = delta 1[s green] - log(1 + (e^delta - 1) P), exact in float64
        out["log_ratio"].append(delta * green - _log_norm(P, delta))
        out["entropy"].append(-torch.xlogy(p, p).sum(1).double())
        done += r
    return {key: torch.cat(v) for key, v in out.items()}


class HMMTeacher:
    """Sticky HMM: ``A = s I + (1 - s) Dir(1)``, emissions ``softmax(scale Z_s / temperature)``.

    ``temperature`` sets the entropy of the text (the book's two teachers use 0.6 and 1.5).
    The watermarked LM is the HMM's exact predictive distribution; generation filters the hidden
    state in closed form, batched over sequences.
    """

    def __init__(self, n_states: int = 16, vocab_size: int = 256, temperature=1.0, stickiness=0.85,
                 logit_scale=3.0, seed: int = 0):
        self.n_states = _positive_int("n_states", n_states)
        self.vocab_size = _positive_int("vocab_size", vocab_size, 2)
        self.temperature = _finite_number("temperature", temperature)
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.stickiness = _finite_number("stickiness", stickiness)
        if not 0.0 <= self.stickiness < 1.0:
            raise ValueError(f"stickiness must lie in [0, 1), got {stickiness}")
        self.logit_scale = _finite_number("logit_scale", logit_scale)
        self.seed = _positive_int("seed", seed, 0)
        g = torch.Generator().manual_seed(self.seed)
        K, N = self.n_states, self.vocab_size
        dirichlet = -torch.log(torch.rand(K, K, generator=g, dtype=torch.float64))
        dirichlet = dirichlet / dirichlet.sum(1, keepdim=True)
        self.A = self.stickiness * torch.eye(K, dtype=torch.float64) + (1 - self.stickiness) * dirichlet
        z = torch.randn(K, N, generator=g, dtype=torch.float64)
        self.E = torch.softmax(self.logit_scale * z / self.temperature, -1)
        self.pi0 = torch.full((K,), 1.0 / K, dtype=torch.float64)
        self.device = torch.device("cpu")

    def to(self, device) -> HMMTeacher:
        check_device(device)
        self.A, self.E, self.pi0 = self.A.to(device), self.E.to(device), self.pi0.to(device)
        self.device = torch.device(device)
        return self

    @property
    def bos(self) -> int:
        """The start context id (row ``vocab_size`` of a green matrix)."""
        return self.vocab_size

    def generate(self, batch: int, T: int, generator=None, green_mat=None, delta=0.0,
                 return_probs: bool = False) -> dict:
        """Batched ancestral sampling of ``batch`` sequences of ``T`` tokens, optionally watermarked.

        Each step: ``p_t = prior_t E`` (the exact predictive), ``p_hat_t = softmax(log p_t + delta g)``
        with ``g = green_mat[s_{t-1}]`` (BOS context first), ``s_t ~ p_hat_t``, then the Bayes update of
        the hidden state. Returns ``tokens [B, T]`` and per-token ``nll`` (oracle ``-log p_t(s_t)``),
        ``kl`` (exact ``KL(p_hat_t || p_t)``), ``entropy`` (of ``p_t``); ``probs [B, T, N]`` (float32)
        when asked. ``delta = 0`` gives the unwatermarked model, sample for sample.
        """
        batch = _positive_int("batch", batch)
        T = _positive_int("T", T)
        delta = check_delta(delta)
        gen = _gen(generator)
        N, dev = self.vocab_size, self.device
        if green_mat is not None:
            check_green_mat(green_mat)
            if green_mat.shape[1] != N or green_mat.shape[0] < N + 1:
                raise ValueError(f"green_mat must be [>= {N + 1}, {N}] for this teacher, got {tuple(green_mat.shape)}")
            green_mat = green_mat.to(dev, torch.float64)
        prior = self.pi0.expand(batch, -1).clone()
        prev = torch.full((batch,), N, dtype=torch.long, device=dev)
        toks, nll, kl, ent, probs = [], [], [], [], []
        for _ in range(T):
            p = (prior @ self.E).clamp_min(1e-300)
            logp = torch.log(p)
            bias = delta * green_mat[prev] if green_mat is not None else torch.zeros_like(logp)
            logq = torch.log_softmax(logp + bias, -1)
            q = logq.exp()
            u = torch.rand(batch, generator=gen, dtype=torch.float64).to(dev)
            s = torch.searchsorted(q.cumsum(-1), u[:, None]).squeeze(1).clamp_max(N - 1)
            toks.append(s)
            nll.append(-logp.gather(1, s[:, None]).squeeze(1))
            kl.append((q * (logq - logp)).sum(-1).clamp_min(0))
            ent.append(-(p * logp).sum(-1))
            if return_probs:
                probs.append(p.float())
            post = prior * self.E[:, s].T
            prior = (post / post.sum(1, keepdim=True)) @ self.A
            prev = s
        out = {"tokens": torch.stack(toks, 1), "nll": torch.stack(nll, 1), "kl": torch.stack(kl, 1),
               "entropy": torch.stack(ent, 1)}
        if return_probs:
            out["probs"] = torch.stack(probs, 1)
        return out

    def predictive(self, tokens: torch.Tensor) -> torch.Tensor:
        """Exact next-token distributions ``[B, T, N]`` for given tokens (forward filtering)."""
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype != torch.long:
            raise TypeError("tokens must be a 2-D torch.long tensor [B, T]")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(f"tokens must lie in [0, {self.vocab_size})")
        B, T = tokens.shape
        prior = self.pi0.expand(B, -1).clone()
        out = []
        for t in range(T):
            out.append(prior @ self.E)
            post = prior * self.E[:, tokens[:, t].to(self.device)].T
            prior = (post / post.sum(1, keepdim=True)) @ self.A
        return torch.stack(out, 1)

    def nll(self, tokens: torch.Tensor) -> torch.Tensor:
        """Exact per-token NLL ``[B, T]`` of ``tokens`` under the teacher."""
        p = self.predictive(tokens)
        return -torch.log(p.gather(2, tokens.to(self.device)[..., None]).squeeze(2).clamp_min(1e-300))


