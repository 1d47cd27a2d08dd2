"""The toy RLVR environment of the chapter (spec Sec. 7, a book design): prompts whose difficulty
can be read from their content, enumerable responses, exact accuracies.

- :class:`HiddenRuleTask`: N prompts with fixed embeddings e(x); responses are T tokens over V
  symbols (V**T of them, enumerable); the reward checks a Hamming ball around a target. One third
  of the prompts are easy (rule answer, tolerance 3), one third impossible (random target, no
  tolerance), one third learnable (rule answer, tolerance 0 or 1).
- :class:`ARPolicy`: an autoregressive MLP over [e(x), one-hot position, one-hot previous token].
  Because a step sees only the previous token, the policy is a Markov chain per prompt, and the
  exact distribution over all V**T responses costs T * (V + 1) MLP rows per prompt.
- :func:`warm_start`: a noisy "SFT" stage that leaves learnable prompts at low accuracy.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import _checks as ck

#: largest table of :func:`all_sequences` (vocab**length x length int64 entries), in bytes
MAX_SEQUENCE_BYTES = 2 * 1024 ** 3


def all_sequences(vocab: int, length: int, device=None) -> torch.Tensor:
    """All vocab**length responses, [S, T] (lexicographic order); at most :data:`MAX_SEQUENCE_BYTES`."""
    vocab = ck.count("vocab", vocab, 2)
    length = ck.count("length", length, 1)
    ck.device("device", device)
    if length * math.log(vocab) + math.log(8 * length) > math.log(MAX_SEQUENCE_BYTES):
        raise ValueError(f"vocab**length responses of length {length} (vocab={vocab}) exceed "
                         f"MAX_SEQUENCE_BYTES = {MAX_SEQUENCE_BYTES / 2 ** 30:.0f} GiB as int64; use a smaller vocab or length")
    grids = torch.cartesian_prod(*[torch.arange(vocab, device=device)] * length)
    return grids.reshape(-1, length)


class HiddenRuleTask:
    """Enumerable, verifiable "reasoning" prompts of three kinds, readable from the embedding.

    The rule answer of prompt x is y_t = argmax_v (A_t e(x))_v; with two fixed directions u1, u2,
    a1 = u1.e, a2 = u2.e and s = split * |u1|: easy if a1 > s (rule target, tolerance
    ``easy_tolerance``), impossible if a1 < -s (random target, tolerance 0), learnable otherwise
    (rule target, tolerance 1[a2 > 0]). Reward r = 1[Hamming(y, target) <= tolerance]."""

    TYPE_NAMES = ("easy", "learnable", "impossible")

    def __init__(self, n_train: int = 512, n_test: int = 256, vocab: int = 4, length: int = 4, emb_dim: int = 16,
                 split: float = 0.43, easy_tolerance: int = 3, seed: int = 0, max_responses: int = 10**6):
        self.n_train = ck.count("n_train", n_train)
        self.n_test = ck.count("n_test", n_test)
        self.vocab = ck.count("vocab", vocab, 2)
        self.length = ck.count("length", length, 1)
        self.emb_dim = ck.count("emb_dim", emb_dim, 2)
        split = ck.pos_float("split", split, allow_zero=True)
        easy_tolerance = ck.count("easy_tolerance", easy_tolerance, 0)
        if easy_tolerance > self.length:
            raise ValueError(f"easy_tolerance must lie in [0, length={self.length}], got {easy_tolerance}")
        ck.count("seed", seed, 0)
        max_responses = ck.count("max_responses", max_responses)
        if self.length * math.log(self.vocab) > math.log(max_responses) + 1e-9 \
                or self.vocab ** self.length > max_responses:      # logs first: no huge integer power
            raise ValueError(f"vocab**length = {self.vocab}**{self.length} responses exceed max_responses="
                             f"{max_responses}: exact evaluation would not fit")
        g = torch.Generator().manual_seed(seed)
        n = self.n_train + self.n_test
        self.embeddings = torch.randn(n, self.emb_dim, generator=g)
        A = torch.randn(self.length, self.vocab, self.emb_dim, generator=g)
        u = torch.randn(2, self.emb_dim, generator=g)
        rule = torch.einsum("tvd,nd->ntv", A, self.embeddings).argmax(-1)          # [N, T]
        a1, a2 = self.embeddings @ u[0], self.embeddings @ u[1]
        s = split * u[0].norm()
        self.types = torch.where(a1 > s, 0, torch.where(a1 < -s, 2, 1))            # 0 easy, 1 learnable, 2 imp.
        rand_target = torch.randint(0, self.vocab, (n, self.length), generator=g)
        self.rule = rule
        self.targets = torch.where((self.types == 2)[:, None], rand_target, rule)
        self.tolerances = torch.where(self.types == 0, easy_tolerance,
                                      torch.where(self.types == 2, 0, (a2 > 0).long()))
        self.train_idx = torch.arange(self.n_train)
        self.test_idx = torch.arange(self.n_train, n)
        self.device = torch.device("cpu")
        self._all = None

    def to(self, device) -> HiddenRuleTask:
        """Move the task's tensors to ``device`` (in place; returns self)."""
        if device is None:
            raise TypeError("device must be a torch.device or a device string such as 'cpu', got None")
        self.device = ck.device("device", device)
        self.__dict__.pop("_warm_cache", None)
        for name in ("embeddings", "types", "targets", "tolerances", "rule", "train_idx", "test_idx"):
            setattr(self, name, getattr(self, name).to(self.device))
        self._all = None
        return self

    @property
    def n_responses(self) -> int:
        return self.vocab**self.length

    def all_responses(self) -> torch.Tensor:
        """All V**T responses, [S, T]."""
        if self._all is None:
            self._all = all_sequences(self.vocab, self.length, self.device)
        return self._all

    def _idx(self, prompt_idx) -> torch.Tensor:
        ck.tensor("prompt_idx", prompt_idx, ndim=1, floating=False)
        n = self.n_train + self.n_test
        if ck.value_checks() and bool(((prompt_idx < 0) | (prompt_idx >= n)).any()):
            raise ValueError(f"prompt_idx must lie in [0, {n})")
        return prompt_idx

    def reward(self, prompt_idx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """r(x, y) = 1[Hamming(y, target(x)) <= tolerance(x)], [n] float in {0, 1}."""
        prompt_idx = self._idx(prompt_idx)
        ck.tensor("y", y, ndim=2, floating=False)
        if y.shape != (prompt_idx.shape[0], self.length):
            raise ValueError(f"y must have shape ({prompt_idx.shape[0]}, {self.length}), got {tuple(y.shape)}")
        ham = (y != self.targets[prompt_idx]).sum(-1)
        return (ham <= self.tolerances[prompt_idx]).float()

    def reward_matrix(self, prompt_idx: torch.Tensor) -> torch.Tensor:
        """Rewards of every response for every prompt, [n, S]."""
        prompt_idx = self._idx(prompt_idx)
        tgt = self.targets[prompt_idx]
        sym = torch.arange(self.vocab, device=tgt.device)
        ham = (sym[None] != tgt[:, :1]).to(torch.int8)                  # [n, V]: prefix tree, lexicographic
        for t in range(1, self.length):
            ham = (ham[:, :, None] + (sym[None, None] != tgt[:, t, None, None])).reshape(tgt.shape[0], -1)
        return (ham <= self.tolerances[prompt_idx][:, None]).float()

    def n_correct(self, prompt_idx: torch.Tensor) -> torch.Tensor:
        """Number of correct responses per prompt, sum_{k<=h} C(T, k) (V-1)^k."""
        prompt_idx = self._idx(prompt_idx)
        table = torch.tensor([sum(math.comb(self.length, k) * (self.vocab - 1) ** k for k in range(h + 1))
                              for h in range(self.length + 1)], device=self.device)
        return table[self.tolerances[prompt_idx]]


class ARPolicy(nn.Module):
    """pi_theta(y|x) = prod_t softmax(MLP([e(x), one-hot(t), one-hot(y_{t-1} or BOS)]))_{y_t}:
    two hidden layers of width ``hidden`` (GELU), shared by all prompts (so it can learn the rule
    and generalise to test prompts, as an LLM does)."""

    def __init__(self, emb_dim: int = 16, vocab: int = 4, length: int = 4, hidden: int = 64):
        super().__init__()
        self.emb_dim = ck.count("emb_dim", emb_dim)
        self.vocab = ck.count("vocab", vocab, 2)
        self.length = ck.count("length", length, 1)
        ck.count("hidden", hidden)
        d_in = emb_dim + length + vocab + 1
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, vocab))

    def _inputs(self, emb: torch.Tensor, pos: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        # emb [..., d], pos [...], prev [...] -> [..., d + T + V + 1]
        oh_t = nn.functional.one_hot(pos, self.length).to(emb.dtype)
        oh_p = nn.functional.one_hot(prev, self.vocab + 1).to(emb.dtype)
        return torch.cat([emb, oh_t, oh_p], -1)

    def _emb(self, emb) -> torch.Tensor:
        ck.tensor("emb", emb, ndim=2)
        if emb.shape[1] != self.emb_dim:
            raise ValueError(f"emb must have {self.emb_dim} columns, got {emb.shape[1]}")
        return emb.to(next(self.parameters()).dtype)

    def log_prob(self, emb: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """log pi_theta(y|x) summed over the T tokens, [n] (teacher forcing, one MLP pass)."""
        emb = self._emb(emb)
        ck.tensor("y", y, ndim=2, floating=False)
        n, T = y.shape
        if n != emb.shape[0] or T != self.length:
            raise ValueError(f"y must have shape ({emb.shape[0]}, {self.length}), got {tuple(y.shape)}")
        prev = torch.cat([torch.full_like(y[:, :1], self.vocab), y[:, :-1]], 1)
        pos = torch.arange(T, device=y.device).expand(n, T)
        logits = self.net(self._inputs(emb[:, None].expand(n, T, -1), pos, prev))   # [n, T, V]
        return torch.log_softmax(logits, -1).gather(-1, y[..., None]).squeeze(-1).sum(-1)

    @torch.no_grad()
    def sample(self, emb: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """One response per row of ``emb``, [n, T] (temperature 1, Gumbel-max on the generator)."""
        emb = self._emb(emb)
        ck.generator("generator", generator)
        n = emb.shape[0]
        prev = torch.full((n,), self.vocab, dtype=torch.long, device=emb.device)
        out = []
        for t in range(self.length):                       # T sequential steps, batched over rows
            pos = torch.full_like(prev, t)
            logits = self.net(self._inputs(emb, pos, prev))
            u = torch.rand(logits.shape, generator=generator, device=emb.device).clamp_(1e-12, 1.0)
            prev = (logits - torch.log(-torch.log(u))).argmax(-1)
            out.append(prev)
        return torch.stack(out, 1)

    def transition_log_probs(self, emb: torch.Tensor) -> torch.Tensor:
        """log pi(y_t = v | x, t, prev) for every position and previous token, [n, T, V+1, V]."""
        emb = self._emb(emb)
        n, T, V = emb.shape[0], self.length, self.vocab
        pos = torch.arange(T, device=emb.device)[:, None].expand(T, V + 1)
        prev = torch.arange(V + 1, device=emb.device)[None].expand(T, V + 1)
        x = self._inputs(emb[:, None, None].expand(n, T, V + 1, -1), pos.expand(n, T, V + 1),
                         prev.expand(n, T, V + 1))
        return torch.log_softmax(self.net(x), -1)

    def response_log_probs(self, emb: torch.Tensor, responses: torch.Tensor | None = None) -> torch.Tensor:
        """Exact log pi_theta(y|x) for every response y, [n, S]: the policy is a Markov chain, so
        T * (V + 1) MLP rows per prompt give every sequence probability. For all V**T responses
        (``responses=None``, lexicographic order as :func:`all_sequences`) the prefix tree is
        expanded level by level with broadcasting; explicit ``responses`` [S, T] are gathered."""
        lt = self.transition_log_probs(emb)                               # [n, T, V+1, V]
        n, V = lt.shape[0], self.vocab
        if responses is None:                                             # prefix tree, level by level
            out = lt[:, 0, V]                                             # [n, V]   (after BOS)
            for t in range(1, self.length):
                step = lt[:, t, :V].repeat(1, out.shape[1] // V, 1)       # [n, V^t, V]: row j has prev = j % V
                out = (out[:, :, None] + step).reshape(n, -1)
            return out
        prev = torch.cat([torch.full_like(responses[:, :1], V), responses[:, :-1]], 1)
        out = lt[:, 0, prev[:, 0], responses[:, 0]]
        for t in range(1, self.length):
            out = out + lt[:, t, prev[:, t], responses[:, t]]
        return out

    def response_probs(self, emb: torch.Tensor) -> torch.Tensor:
        """Exact pi_theta(y|x) over all V**T responses, [n, S]."""
        return self.response_log_probs(emb).exp()


def warm_start(policy: ARPolicy, task: HiddenRuleTask, steps: int = 150, noise: float = 0.45, lr: float = 1e-2,
               batch: int = 64, seed: int = 0) -> ARPolicy:
    """The "SFT" stage (spec Sec. 7): ``steps`` Adam steps of cross-entropy on rule answers of
    training prompts (fresh random sequences for impossible prompts), each token replaced by a
    random symbol with probability ``noise``. Leaves easy prompts solved, learnable prompts at low
    accuracy and impossible prompts near zero. Modifies ``policy`` in place and returns it."""
    if not isinstance(policy, ARPolicy):
        raise TypeError(f"policy must be an ARPolicy, got {type(policy).__name__}")
    if not isinstance(task, HiddenRuleTask):
        raise TypeError(f"task must be a HiddenRuleTask, got {type(task).__name__}")
    steps = ck.count("steps", steps, 0)
    noise = ck.unit_float("noise", noise)
    lr = ck.pos_float("lr", lr)
    batch = ck.count("batch", batch)
    ck.count("seed", seed, 0)
    dev = task.device
    g = torch.Generator(device=dev).manual_seed(seed)
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    V, T = task.vocab, task.length
    for _ in range(steps):
        idx = task.train_idx[torch.randint(0, task.n_train, (batch,), generator=g, device=dev)]
        y = task.rule[idx].clone()
        imp = (task.types[idx] == 2)[:, None]
        y = torch.where(imp, torch.randint(0, V, y.shape, generator=g, device=dev), y)
        flip = torch.rand(y.shape, generator=g, device=dev) < noise
        y = torch.where(flip, torch.randint(0, V, y.shape, generator=g, device=dev), y)
        loss = -policy.log_prob(task.embeddings[idx], y).mean() / T
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return policy


@torch.no_grad()
def exact_accuracy(policy: ARPolicy, task: HiddenRuleTask, prompt_idx: torch.Tensor) -> torch.Tensor:
    """p_theta(x) = sum_y pi_theta(y|x) r(x, y), exactly by enumeration, [n]."""
    prompt_idx = task._idx(prompt_idx)
    probs = policy.response_probs(task.embeddings[prompt_idx])
    return (probs * task.reward_matrix(prompt_idx)).sum(-1)


def exact_pass_at_k(acc: torch.Tensor, ks) -> torch.Tensor:
    """pass@k = 1 - (1 - p)^k per prompt and k (exact for independent samples), [n, len(ks)]."""
    ck.tensor("acc", acc, ndim=1)
    if ck.value_checks() and bool(((acc < -1e-6) | (acc > 1 + 1e-6)).any()):
        raise ValueError("acc must lie in [0, 1]")
    if isinstance(ks, int):
        ks = [ks]
    try:
        ks = list(ks)
    except TypeError:
        raise TypeError(f"ks must be an integer or a sequence of integers, got {ks!r}") from None
    if not ks:
        raise ValueError("ks must not be empty")
    for k in ks:
        ck.count("ks", k)
    k = torch.tensor(ks, dtype=acc.dtype, device=acc.device)
    return 1 - (1 - acc.clamp(0, 1))[:, None] ** k[None]


@torch.no_grad()
def effective_correct_answers(policy: ARPolicy, task: HiddenRuleTask, prompt_idx: torch.Tensor) -> torch.Tensor:
    """exp H(pi_theta(. | x, correct)): the effective number of distinct correct answers the policy
    spreads its successes over, [n] (1 for a policy that always gives the same correct answer)."""
    prompt_idx = task._idx(prompt_idx)
    logp = policy.response_log_probs(task.embeddings[prompt_idx])
    logq = torch.where(task.reward_matrix(prompt_idx) > 0, logp, torch.full_like(logp, -torch.inf))
    logq = logq - torch.logsumexp(logq, -1, keepdim=True)              # log pi(y | x, correct)
    q = logq.exp()
    ent = -(q * torch.where(q > 0, logq, torch.zeros_like(logq))).sum(-1)
    return ent.exp()
