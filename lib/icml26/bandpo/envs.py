r"""Two toy environments that isolate BandPO's mechanism (the chapter's substitutes for LLM math RL).

- :class:`HeadTailBandit`: C independent one-step "prompts", K actions each. The head action starts
  at :math:`p_h = 0.85` and is a partially rewarded shortcut (Bernoulli(0.6)); the tail action starts
  at :math:`p_t = 0.01` and always pays 1. The optimum is the rare action, exactly the "low-probability,
  high-advantage token" that fixed clipping starves.
- :class:`TokenChainTask`: P prompts, responses of T tokens over V symbols. Each prompt has a correct
  chain (reward 1) and a shortcut chain (reward Bernoulli(0.6)) that differs at one critical position;
  after a supervised warm start the correct token at that position is rare while every other token
  is confident, so one response mixes head and tail tokens, as in an LLM.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def _check_pos_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _check_unit(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


class HeadTailBandit:
    """GRPO-style contextual bandit with a partially rewarded head and a rare, always-right tail.

    Action 0 is the head, action 1 the tail, actions 2..K-1 share the rest of the mass and pay 0.
    """

    def __init__(self, n_contexts: int = 64, n_actions: int = 16, head_p: float = 0.85, tail_p: float = 0.01,
                 head_reward: float = 0.6, logit_noise: float = 0.1, seed: int = 0, device="cpu"):
        self.n_contexts = _check_pos_int(n_contexts, "n_contexts")
        self.n_actions = _check_pos_int(n_actions, "n_actions", minimum=3)
        for name, v in (("head_p", head_p), ("tail_p", tail_p)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise ValueError(f"{name} must be a probability in (0, 1), got {v!r}")
        if head_p + tail_p >= 1:
            raise ValueError(f"head_p + tail_p must be < 1 (the other actions need mass), got {head_p + tail_p}")
        self.head_p, self.tail_p = float(head_p), float(tail_p)
        self.head_reward = _check_unit(head_reward, "head_reward")
        if not logit_noise >= 0:
            raise ValueError(f"logit_noise must be >= 0, got {logit_noise}")
        self.logit_noise = float(logit_noise)
        self.seed = _check_pos_int(seed, "seed", minimum=0)
        self.device = torch.device(device)

    def init_logits(self, seed: int | None = None) -> Tensor:
        """Initial tabular logits ``[C, K]`` (float64): log of (head_p, tail_p, rest/(K-2), ...) plus
        Gaussian noise drawn with ``seed`` (default: the environment's seed)."""
        C, K = self.n_contexts, self.n_actions
        rest = (1.0 - self.head_p - self.tail_p) / (K - 2)
        base = torch.full((K,), math.log(rest), dtype=torch.float64)
        base[0], base[1] = math.log(self.head_p), math.log(self.tail_p)
        gen = torch.Generator().manual_seed(self.seed if seed is None else int(seed))
        noise = self.logit_noise * torch.randn(C, K, generator=gen, dtype=torch.float64)
        return (base + noise).to(self.device)

    def sample_rewards(self, actions: Tensor, gen: torch.Generator) -> Tensor:
        """Rewards ``[C, G]`` for actions ``[C, G]``: tail 1, head Bernoulli(head_reward), others 0."""
        coin = torch.rand(actions.shape, generator=gen, device=actions.device, dtype=torch.float64)
        return self.rewards_from_coin(actions, coin)

    def rewards_from_coin(self, actions: Tensor, coin: Tensor) -> Tensor:
        """Rewards for ``actions`` given uniforms ``coin`` of the same shape (the head pays when
        ``coin < head_reward``): :meth:`sample_rewards` without the draw, so that several replicas can
        share one draw (common random numbers)."""
        if not isinstance(actions, Tensor) or not isinstance(coin, Tensor):
            raise TypeError(f"actions and coin must be tensors, got {type(actions).__name__} and "
                            f"{type(coin).__name__}")
        if actions.shape != coin.shape:
            raise ValueError(f"coin must have the shape of actions {tuple(actions.shape)}, got {tuple(coin.shape)}")
        head_pays = (coin < self.head_reward).to(torch.float64)
        return torch.where(actions == 1, torch.ones_like(coin), torch.where(actions == 0, head_pays, 0.0 * coin))

    def expected_reward(self, probs: Tensor) -> Tensor:
        """Exact expected reward per context ``[C]``: ``head_reward * pi(head) + pi(tail)``."""
        return self.head_reward * probs[..., 0] + probs[..., 1]


class ChainPolicy(nn.Module):
    """Shared MLP policy: [prompt embedding, one-hot position, one-hot previous token] -> logits over V.

    Previous token ``V`` is the begin-of-sequence symbol. Markov in the previous token, so a whole
    response is scored in one batched call (teacher forcing).
    """

    def __init__(self, embed_dim: int, seq_len: int, vocab: int, hidden: int = 128):
        super().__init__()
        self.T, self.V = seq_len, vocab
        self.net = nn.Sequential(
            nn.Linear(embed_dim + seq_len + vocab + 1, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, vocab),
        )

    def features(self, emb: Tensor, pos: Tensor, prev: Tensor) -> Tensor:
        # emb [..., E], pos [...], prev [...] -> [..., E + T + V + 1]
        return torch.cat([emb, nn.functional.one_hot(pos, self.T).to(emb.dtype),
                          nn.functional.one_hot(prev, self.V + 1).to(emb.dtype)], dim=-1)

    def step_logits(self, emb: Tensor, t: int, prev: Tensor) -> Tensor:
        """Logits ``[B, V]`` at position ``t`` given the previous tokens ``prev`` ``[B]``."""
        pos = torch.full_like(prev, t)
        return self.net(self.features(emb, pos, prev))

    def seq_logits(self, emb: Tensor, tokens: Tensor) -> Tensor:
        """Logits ``[B, T, V]`` for every position of responses ``tokens`` ``[B, T]`` (teacher forcing)."""
        B, T = tokens.shape
        bos = torch.full((B, 1), self.V, dtype=tokens.dtype, device=tokens.device)
        prev = torch.cat([bos, tokens[:, :-1]], dim=1)  # [B, T]
        pos = torch.arange(T, device=tokens.device).expand(B, T)
        return self.net(self.features(emb[:, None, :].expand(B, T, emb.shape[-1]), pos, prev))


def dedupe_on_host(t: Tensor) -> bool:
    """Whether the trainers deduplicate ``t``'s rows with ``torch.unique`` before an expensive per-row
    computation (the policy MLP, a Band rule's bisection): on the CPU, where the tensor is on the host, so
    the data-dependent output size costs no sync and the repeats of a group are computed once. On a GPU
    ``torch.unique`` would cost a host sync per call (issue 43), and computing every row is the cheaper
    way there (the per-row work is launch-bound, not size-bound): the same values up to round-off."""
    return t.device.type == "cpu"


class TokenChainTask:
    """P prompts; correct chain ``c(x)`` (reward 1) and shortcut ``h(x)`` (reward Bernoulli(0.6)),
    equal except at one critical position ``k(x)``; any other response pays 0."""

    def __init__(self, n_prompts: int = 128, seq_len: int = 6, vocab: int = 12, embed_dim: int = 16,
                 shortcut_reward: float = 0.6, seed: int = 0, device="cpu"):
        self.P = _check_pos_int(n_prompts, "n_prompts")
        self.T = _check_pos_int(seq_len, "seq_len")
        self.V = _check_pos_int(vocab, "vocab", minimum=2)
        self.E = _check_pos_int(embed_dim, "embed_dim")
        self.shortcut_reward = _check_unit(shortcut_reward, "shortcut_reward")
        self.seed = _check_pos_int(seed, "seed", minimum=0)
        self.device = torch.device(device)
        gen = torch.Generator().manual_seed(self.seed)
        self.emb = torch.randn(self.P, self.E, generator=gen).to(self.device)  # e_x       [P, E]
        self.correct = torch.randint(self.V, (self.P, self.T), generator=gen)  # c(x)      [P, T]
        self.critical = torch.randint(self.T, (self.P,), generator=gen)  # k(x)      [P]
        shift = torch.randint(1, self.V, (self.P,), generator=gen)
        self.shortcut = self.correct.clone()  # h(x)      [P, T]
        rows = torch.arange(self.P)
        self.shortcut[rows, self.critical] = (self.correct[rows, self.critical] + shift) % self.V
        self.correct, self.shortcut = self.correct.to(self.device), self.shortcut.to(self.device)
        self.critical = self.critical.to(self.device)

    def make_policy(self, hidden: int = 128) -> ChainPolicy:
        return ChainPolicy(self.E, self.T, self.V, hidden).to(self.device)

    def rewards(self, prompts: Tensor, responses: Tensor, gen: torch.Generator) -> Tensor:
        """Rewards ``[B]`` for responses ``[B, T]`` to prompts ``[B]``."""
        is_c = (responses == self.correct[prompts]).all(dim=1)
        is_h = (responses == self.shortcut[prompts]).all(dim=1)
        coin = torch.rand(prompts.shape, generator=gen, device=self.device)
        return is_c.float() + (is_h & (coin < self.shortcut_reward)).float()

    def token_logprobs(self, policy: ChainPolicy, prompts: Tensor, responses: Tensor) -> Tensor:
        """Log-probabilities ``[B, T]`` of the tokens of ``responses`` ``[B, T]`` under ``policy``.

        The policy's input at a position is (prompt, position, previous token), and a group of G
        responses to one prompt repeats most of these triples, so on the CPU the MLP runs once per
        distinct triple and the results are gathered back (same values, far fewer rows; gradients add up).
        On a GPU every position is computed (:func:`dedupe_on_host`: no ``torch.unique``, no host sync).
        """
        if not dedupe_on_host(responses):
            logp = torch.log_softmax(policy.seq_logits(self.emb[prompts], responses), -1)  # [B, T, V]
            return logp.gather(-1, responses[..., None])[..., 0]
        B, T = responses.shape
        bos = torch.full((B, 1), self.V, dtype=responses.dtype, device=responses.device)
        prev = torch.cat([bos, responses[:, :-1]], dim=1)  # [B, T]
        pos = torch.arange(T, device=responses.device).expand(B, T)
        key = (prompts[:, None] * T + pos) * (self.V + 1) + prev  # one id per input triple
        uniq, inv = torch.unique(key.reshape(-1), return_inverse=True)  # [U], [B*T]
        u_prev = uniq % (self.V + 1)
        u_pos = (uniq // (self.V + 1)) % T
        u_prompt = uniq // ((self.V + 1) * T)
        logp_u = torch.log_softmax(policy.net(policy.features(self.emb[u_prompt], u_pos, u_prev)), -1)  # [U, V]
        return logp_u[inv, responses.reshape(-1)].reshape(B, T)

    @torch.no_grad()
    def sample(self, policy: ChainPolicy, prompts: Tensor, gen: torch.Generator) -> tuple[Tensor, Tensor]:
        """Sample responses ``[B, T]`` autoregressively (inverse-CDF with the generator's uniforms,
        so runs that share a seed share their random numbers). Also returns token entropies ``[B, T]``."""
        B = prompts.shape[0]
        emb = self.emb[prompts]
        prev = torch.full((B,), self.V, dtype=torch.long, device=self.device)
        tokens, ents = [], []
        for t in range(self.T):
            logp = torch.log_softmax(policy.step_logits(emb, t, prev), dim=-1)  # [B, V]
            u = torch.rand(B, 1, generator=gen, device=self.device)
            tok = torch.searchsorted(logp.exp().cumsum(-1), u).clamp(max=self.V - 1).squeeze(1)
            ents.append(-(logp.exp() * logp).sum(-1))
            tokens.append(tok)
            prev = tok
        return torch.stack(tokens, 1), torch.stack(ents, 1)

    @torch.no_grad()
    def exact_metrics(self, policy: ChainPolicy, group_size: int = 16) -> dict[str, float]:
        """Exact (not sampled) metrics on all prompts: expected reward (= mean@G in expectation),
        pass@G for the correct chain, the probability of the correct token at the critical position, and
        the mean probability of the shortcut chain's tokens at the other positions."""
        idx = torch.arange(self.P, device=self.device)
        lp_c = torch.log_softmax(policy.seq_logits(self.emb, self.correct), -1)  # [P, T, V]
        lp_h = torch.log_softmax(policy.seq_logits(self.emb, self.shortcut), -1)
        tok_c = lp_c.gather(-1, self.correct[..., None]).squeeze(-1)  # [P, T]
        tok_h = lp_h.gather(-1, self.shortcut[..., None]).squeeze(-1)
        pi_c, pi_h = tok_c.sum(1).exp(), tok_h.sum(1).exp()  # [P]
        crit = tok_c[idx, self.critical].exp()  # pi(c_k | prefix)  [P]
        other = torch.ones_like(tok_h, dtype=torch.bool)
        other[idx, self.critical] = False  # non-critical positions of the shortcut chain
        return {
            "expected_reward": float((pi_c + self.shortcut_reward * pi_h).mean()),
            "pass_at_g": float((1.0 - (1.0 - pi_c) ** group_size).mean()),
            "pi_correct": float(pi_c.mean()),
            "pi_shortcut": float(pi_h.mean()),
            "critical_p": float(crit.mean()),
            "noncritical_p": float(tok_h.exp()[other].mean()),
        }
