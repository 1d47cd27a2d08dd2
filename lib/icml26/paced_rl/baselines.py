"""Baselines of PACED-RL (spec Sec. 3.9): GRPO's objective, and the prompt selectors it is
compared with (uniform, oracle, history-based, dynamic sampling). FlowRL is the trajectory-balance
loss of :mod:`.method` with pi_ref as the prior; the selectors share :func:`.method.select_prompts`."""

from __future__ import annotations

import torch

from . import _checks as ck


def grpo_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Group-normalised advantages A_i = (r_i - mean_g r) / (std_g r + eps), [B, G] (Shao et al.
    2024). A group whose rewards are all equal gets A = 0: no learning signal."""
    ck.tensor("rewards", rewards, ndim=2)
    eps = ck.pos_float("eps", eps)
    if rewards.shape[1] < 2:
        raise ValueError(f"rewards must have a group size >= 2, got {rewards.shape[1]}")
    mean = rewards.mean(1, keepdim=True)
    std = rewards.std(1, keepdim=True, unbiased=False)
    return (rewards - mean) / (std + eps)


def grpo_loss(logp: torch.Tensor, logp_old: torch.Tensor, adv: torch.Tensor, clip_eps: float = 0.2,
              length: int = 1) -> torch.Tensor:
    """PPO-clip surrogate with group-normalised advantages (sequence-level ratio, divided by the
    response length as GRPO's token mean does for equal lengths):
    -mean(min(rho A, clip(rho, 1 - eps, 1 + eps) A)) / length, rho = exp(logp - logp_old).
    With one gradient step per rollout batch rho = 1 at the gradient and the clip is inactive."""
    names = ("logp", "logp_old", "adv")
    for name, t in zip(names, (logp, logp_old, adv)):
        ck.tensor(name, t, ndim=1)
    ck.same_shape(names, logp, logp_old, adv)
    clip_eps = ck.pos_float("clip_eps", clip_eps)
    length = ck.count("length", length)
    rho = torch.exp(logp - logp_old.detach())
    surr = torch.minimum(rho * adv, rho.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    return -surr.mean() / length


class HistoryEstimator:
    """History-based difficulty (the "track each prompt's last accuracy" selectors): the last
    observed group accuracy of every prompt, 0.5 for a prompt never rolled out (spec Sec. 3.9).
    It is stale by construction: a prompt is only updated when it is selected."""

    def __init__(self, n_prompts: int, prior: float = 0.5, device=None):
        n_prompts = ck.count("n_prompts", n_prompts)
        prior = ck.unit_float("prior", prior)
        ck.device("device", device)
        self.acc = torch.full((n_prompts,), prior, device=device)
        self.seen = torch.zeros(n_prompts, dtype=torch.long, device=device)

    def update(self, prompt_idx: torch.Tensor, group_acc: torch.Tensor) -> None:
        ck.tensor("prompt_idx", prompt_idx, ndim=1, floating=False)
        ck.tensor("group_acc", group_acc, ndim=1)
        self.acc[prompt_idx] = group_acc.to(self.acc.dtype)
        self.seen[prompt_idx] += 1

    def __call__(self, prompt_idx: torch.Tensor) -> torch.Tensor:
        return self.acc[prompt_idx]


def keep_mixed_groups(rewards: torch.Tensor, keep: int) -> torch.Tensor:
    """Dynamic sampling (DAPO): indices of the first ``keep`` groups whose G rewards are not all
    equal (rewards [B', G]); fewer when fewer are mixed. "Mixed" compares the rewards themselves
    (max > min), so a group of equal non-binary rewards (all 0.5) is dropped like all-0 or all-1."""
    ck.tensor("rewards", rewards, ndim=2)
    keep = ck.count("keep", keep)
    mixed = torch.nonzero(rewards.amax(1) > rewards.amin(1)).squeeze(1)
    return mixed[:keep]
