"""PACED-RL (Kim et al., ICML 2026, arXiv:2602.12642): the GFlowNet partition function as a
difficulty scheduler for RL with verifiable rewards.

Equation numbers refer to the chapter's specification (``shared/papers/paced-rl.md``), which
follows the paper's Section 3:

- (3.2) KL-regularised optimum  pi*(y|x) = pi_ref(y|x) exp(r/beta) / Z(x) and trajectory balance
  L_TB = (log Z_phi(x) + log pi_theta(y|x) - log pi_ref(y|x) - r/beta)^2 (FlowRL's prior);
- (3.3) PACED-RL's objective: the same square with the behaviour policy pi_old as the prior and the
  raw binary reward;
- (3.4) the proposition: the least-squares optimal log Z is p_old/beta + KL(pi_old || pi_theta), so
  beta log Z_phi(x) estimates the current accuracy p_old(x);
- (3.5) prompt selection: the B prompts of a random pool whose estimate is closest to tau;
- (3.6) error-prioritised replay of successful trajectories.

The toy policy :class:`ARPolicy` and the task :class:`HiddenRuleTask` live in :mod:`.env`.
"""

from __future__ import annotations

import torch
from torch import nn

from . import _checks as ck


class LogPartition(nn.Module):
    """log Z_phi(e): a 3-layer MLP emb_dim -> hidden -> hidden -> 1 on the precomputed prompt
    embedding (Sec. 3.5; the paper's Z_phi is a 3-layer MLP on reference-model embeddings). The
    output is log Z itself (no exponentiation); beta * output estimates the accuracy."""

    def __init__(self, emb_dim: int = 16, hidden: int = 64):
        super().__init__()
        ck.count("emb_dim", emb_dim)
        ck.count("hidden", hidden)
        self.net = nn.Sequential(nn.Linear(emb_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, 1))

    def forward(self, emb: torch.Tensor) -> torch.Tensor:  # [n, d] -> [n]
        return self.net(emb).squeeze(-1)


def tb_residual(log_z: torch.Tensor, logp: torch.Tensor, logp_prior: torch.Tensor, reward: torch.Tensor,
                beta: float) -> torch.Tensor:
    """Trajectory-balance residual  log Z + log pi_theta(y|x) - log pi_prior(y|x) - r/beta.

    With ``logp_prior`` = log pi_ref this is the residual of FlowRL's loss (3.2); with
    ``logp_prior`` = log pi_old (detached, the policy that sampled y) it is PACED-RL's (3.3).
    All four tensors have one entry per sampled trajectory ([n])."""
    beta = ck.pos_float("beta", beta)
    names = ("log_z", "logp", "logp_prior", "reward")
    for name, t in zip(names, (log_z, logp, logp_prior, reward)):
        ck.tensor(name, t)
    ck.same_shape(names, log_z, logp, logp_prior, reward)
    return log_z + logp - logp_prior - reward / beta


def tb_loss(log_z: torch.Tensor, logp: torch.Tensor, logp_prior: torch.Tensor, reward: torch.Tensor,
            beta: float, weight: torch.Tensor | None = None, check_binary: bool = True) -> torch.Tensor:
    """Mean squared trajectory-balance residual (3.2)/(3.3), optionally weighted per sample.

    ``weight`` is the detached (clipped) importance weight FlowRL multiplies the square with; the
    toy takes one gradient step per rollout batch, so it is not needed there. PACED-RL reads
    beta * log Z as an accuracy only for raw rewards in {0, 1} (``check_binary``)."""
    if not isinstance(check_binary, bool):
        raise TypeError(f"check_binary must be a bool, got {check_binary!r}")
    res = tb_residual(log_z, logp, logp_prior, reward, beta)
    if check_binary and ck.value_checks() and not bool(((reward == 0) | (reward == 1)).all()):
        raise ValueError("reward must be binary (0 or 1) for PACED-RL's accuracy reading; pass check_binary=False")
    sq = res.square()
    if weight is None:
        return sq.mean()
    ck.tensor("weight", weight)
    ck.same_shape(("log_z", "weight"), log_z, weight)
    if ck.value_checks() and (bool((weight < 0).any()) or float(weight.sum()) <= 0):
        raise ValueError("weight must be non-negative with a positive sum")
    return (weight.detach() * sq).sum() / weight.detach().sum()


def kl_divergence(logp_p_all: torch.Tensor, logp_q_all: torch.Tensor) -> torch.Tensor:
    """KL(p || q) between enumerable distributions given as log-probabilities over the last axis
    (normalised: every row's logsumexp within 1e-3 of 0, so the result is >= 0 up to rounding)."""
    ck.normalised_log_probs("logp_p_all", logp_p_all)
    ck.normalised_log_probs("logp_q_all", logp_q_all)
    ck.same_shape(("logp_p_all", "logp_q_all"), logp_p_all, logp_q_all)
    p = logp_p_all.exp()
    diff = torch.where(p > 0, logp_p_all - logp_q_all, torch.zeros_like(p))
    out = (p * diff).sum(-1)
    if ck.value_checks() and not bool(torch.isfinite(out).all()):
        raise ValueError("logp_q_all must be > -inf wherever logp_p_all is (q > 0 where p > 0)")
    return out


def optimal_log_z(logp_theta_all: torch.Tensor, logp_old_all: torch.Tensor, reward_all: torch.Tensor,
                  beta: float) -> torch.Tensor:
    """Exact least-squares intercept (proposition 3.4) for enumerable outputs.

    For a fixed theta the expected loss E_{y~pi_old}[(c + Delta)^2] with
    Delta = log pi_theta - log pi_old - r/beta is a quadratic in c minimised at c = -E[Delta] =
    E_old[r/beta - log pi_theta + log pi_old] = p_old/beta + KL(pi_old || pi_theta).
    Inputs are [..., S] over all S outputs; the result is [...]."""
    beta = ck.pos_float("beta", beta)
    names = ("logp_theta_all", "logp_old_all", "reward_all")
    ck.normalised_log_probs("logp_theta_all", logp_theta_all)
    ck.normalised_log_probs("logp_old_all", logp_old_all)
    ck.tensor("reward_all", reward_all)
    ck.same_shape(names, logp_theta_all, logp_old_all, reward_all)
    p_old = logp_old_all.exp()
    resid = reward_all / beta - torch.where(p_old > 0, logp_theta_all - logp_old_all, torch.zeros_like(p_old))
    out = (p_old * resid).sum(-1)
    if ck.value_checks() and not bool(torch.isfinite(out).all()):
        raise ValueError("logp_theta_all must be > -inf wherever pi_old > 0 (and the sums finite)")
    return out


def log_z_true(logp_old_all: torch.Tensor, reward_all: torch.Tensor, beta: float) -> torch.Tensor:
    """The true normaliser of the tilted target, log sum_y pi_old(y) exp(r(y)/beta) (3.2 with
    pi_ref = pi_old). Equals ``optimal_log_z`` only when pi_theta is the tilted target itself."""
    beta = ck.pos_float("beta", beta)
    ck.normalised_log_probs("logp_old_all", logp_old_all)
    ck.tensor("reward_all", reward_all)
    ck.same_shape(("logp_old_all", "reward_all"), logp_old_all, reward_all)
    out = torch.logsumexp(logp_old_all + reward_all / beta, -1)
    if ck.value_checks() and not bool(torch.isfinite(out).all()):
        raise ValueError("logp_old_all must give a positive total probability")
    return out


def accuracy_from_log_z(log_z: torch.Tensor, beta: float, clip: bool = True) -> torch.Tensor:
    """PACED-RL's accuracy estimate p_hat(x) = beta * log Z_phi(x) (Sec. 3.4); clipped to [0, 1]
    for selection only (never inside the loss)."""
    beta = ck.pos_float("beta", beta)
    ck.tensor("log_z", log_z)
    if not isinstance(clip, bool):
        raise TypeError(f"clip must be a bool, got {clip!r}")
    p = beta * log_z
    return p.clamp(0.0, 1.0) if clip else p


def mixed_group_probability(p, group_size: int):
    """P(a group of G binary rewards is mixed) = 1 - p^G - (1-p)^G (Sec. 3.5), maximal at p = 1/2."""
    ck.count("group_size", group_size, 1)
    p = ck.tensor("p", torch.as_tensor(p, dtype=torch.float64) if not isinstance(p, torch.Tensor) else p)
    if ck.value_checks() and bool(((p < 0) | (p > 1)).any()):
        raise ValueError("p must lie in [0, 1]")
    return 1 - p**group_size - (1 - p) ** group_size


def select_prompts(scores: torch.Tensor, pool_idx: torch.Tensor, batch_size: int, tau: float = 0.5,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Greedy difficulty-aware selection (Sec. 3.5): the ``batch_size`` prompts of the pool whose
    clipped estimate clip(score, 0, 1) is closest to ``tau``; ties broken uniformly at random
    (a random permutation, then a stable sort). ``scores[i]`` belongs to ``pool_idx[i]``."""
    ck.tensor("scores", scores, ndim=1)
    ck.tensor("pool_idx", pool_idx, ndim=1, floating=False)
    if scores.shape != pool_idx.shape:
        raise ValueError(f"scores and pool_idx must have the same length, got {tuple(scores.shape)} "
                         f"and {tuple(pool_idx.shape)}")
    batch_size = ck.count("batch_size", batch_size)
    if batch_size > pool_idx.numel():
        raise ValueError(f"batch_size={batch_size} is larger than the pool ({pool_idx.numel()} prompts)")
    tau = ck.unit_float("tau", tau)
    ck.generator("generator", generator)
    gdev = generator.device if generator is not None else scores.device
    perm = torch.randperm(scores.numel(), generator=generator, device=gdev).to(scores.device)
    dist = (scores[perm].clamp(0.0, 1.0) - tau).abs()
    order = torch.sort(dist, stable=True).indices[:batch_size]
    return pool_idx[perm[order]]


class ErrorPrioritizedReplay:
    """Accuracy-estimate-error-prioritised replay (Sec. 3.6), a ring buffer of tensors.

    ``push`` keeps only successful trajectories (r = 1), ranks them by the estimation error
    |observed group accuracy - p_hat| of their prompt, and writes the ``add_per_step`` largest
    (largest first) over the oldest entries (FIFO eviction, a book choice). ``sample`` draws
    uniformly without replacement (a book choice)."""

    def __init__(self, capacity: int = 128, add_per_step: int = 64, seed: int = 0):
        self.capacity = ck.count("capacity", capacity)
        self.add_per_step = ck.count("add_per_step", add_per_step)
        if self.add_per_step > self.capacity:
            raise ValueError(f"capacity ({capacity}) must be >= add_per_step ({add_per_step})")
        ck.count("seed", seed, 0)
        self.generator = torch.Generator().manual_seed(seed)
        self.prompt_idx = self.y = self.reward = self.priority = None
        self.size = 0
        self.ptr = 0

    def __len__(self) -> int:
        return self.size

    def _alloc(self, y: torch.Tensor) -> None:
        dev = y.device
        self.prompt_idx = torch.zeros(self.capacity, dtype=torch.long, device=dev)
        self.y = torch.zeros(self.capacity, y.shape[1], dtype=y.dtype, device=dev)
        self.reward = torch.zeros(self.capacity, device=dev)
        self.priority = torch.zeros(self.capacity, device=dev)

    def push(self, prompt_idx: torch.Tensor, y: torch.Tensor, reward: torch.Tensor,
             est_acc_per_sample: torch.Tensor, obs_acc_per_sample: torch.Tensor) -> int:
        """Insert up to ``add_per_step`` successful trajectories by priority; returns how many."""
        ck.tensor("prompt_idx", prompt_idx, ndim=1, floating=False)
        ck.tensor("y", y, ndim=2, floating=False)
        ck.tensor("reward", reward, ndim=1)
        ck.tensor("est_acc_per_sample", est_acc_per_sample, ndim=1)
        ck.tensor("obs_acc_per_sample", obs_acc_per_sample, ndim=1)
        n = prompt_idx.shape[0]
        for name, t in (("y", y), ("reward", reward), ("est_acc_per_sample", est_acc_per_sample),
                        ("obs_acc_per_sample", obs_acc_per_sample)):
            if t.shape[0] != n:
                raise ValueError(f"{name} must have {n} rows like prompt_idx, got {t.shape[0]}")
        if ck.value_checks() and not bool(((reward == 0) | (reward == 1)).all()):
            raise ValueError("reward must be binary (0 or 1)")
        if self.y is None:
            self._alloc(y)
        elif y.shape[1] != self.y.shape[1]:
            raise ValueError(f"y must have {self.y.shape[1]} columns, got {y.shape[1]}")
        ok = torch.nonzero(reward == 1).squeeze(1)
        if ok.numel() == 0:
            return 0
        prio = (obs_acc_per_sample[ok] - est_acc_per_sample[ok]).abs()
        perm = torch.randperm(ok.numel(), generator=self.generator).to(ok.device)
        order = torch.sort(prio[perm], descending=True, stable=True).indices[: self.add_per_step]
        take = ok[perm[order]]
        k = take.numel()
        slots = (self.ptr + torch.arange(k, device=self.y.device)) % self.capacity
        self.prompt_idx[slots] = prompt_idx[take].to(self.y.device)
        self.y[slots] = y[take].to(self.y.device)
        self.reward[slots] = reward[take].to(self.reward.dtype)
        self.priority[slots] = prio[perm[order]].to(self.priority.dtype)
        self.ptr = (self.ptr + k) % self.capacity
        self.size = min(self.size + k, self.capacity)
        return k

    def sample(self, n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """``min(n, len(self))`` stored trajectories, uniformly without replacement, as
        (prompt_idx, y, reward); ``None`` when the buffer is empty or ``n == 0``."""
        n = ck.count("n", n, 0)
        if self.size == 0 or n == 0:
            return None
        idx = torch.randperm(self.size, generator=self.generator)[:n].to(self.y.device)
        return self.prompt_idx[idx], self.y[idx], self.reward[idx]
