"""Reinforcement fine-tuning with GRPO on the PDM score (paper Sec. 3.3, Eq. 9-11).

Reward r = PDMS(decoded trajectory) x r_fmt + lambda_fmt r_fmt (a malformed output scores PDMS 0);
group-normalised advantages (population std); the clipped surrogate with per-sequence length
normalisation and a k3 KL estimator to the frozen SFT policy. By default RFT samples with the
format masks, as evaluation decodes, and every log-probability (sampling, new, reference) is taken
under the same masked distribution; ``GRPOConfig(constrained=False)`` keeps the earlier recipe
(unconstrained sampling, where the format reward carries the signal) as a control.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from ._checks import pos_int, real
from .actions import FastLite
from .data import DriveData
from .metric import PDMSConfig, pdm_score_t, scene_tensors
from .vla import TokenSpace, action_tokens, check_mode, context_of, format_ok, generate


@dataclass(frozen=True)
class GRPOConfig:
    group_size: int = 8
    contexts_per_step: int = 16
    clip_eps: float = 0.2
    beta_kl: float = 1e-3
    lr: float = 5e-5
    inner_epochs: int = 2
    lambda_fmt: float = 1.0
    temperature: float = 1.0
    iterations: int = 30
    constrained: bool = True

    def __post_init__(self):
        if not isinstance(self.constrained, bool):
            raise TypeError(f"constrained must be a bool, got {type(self.constrained).__name__}")
        for name, lo in (("group_size", 2), ("contexts_per_step", 1), ("inner_epochs", 1), ("iterations", 0)):
            pos_int(getattr(self, name), name, lo)
        for name, lo, strict in (("clip_eps", 0.0, True), ("beta_kl", 0.0, False), ("lr", 0.0, True),
                                 ("temperature", 0.0, True), ("lambda_fmt", 0.0, False)):
            real(getattr(self, name), name, lo=lo, strict=strict)


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Eq. 10: A_i = (r_i - mean_j r_j) / std_j r_j within each group (row), population std; rows
    with zero variance get zero advantages. [B,G] -> [B,G]."""
    if not isinstance(rewards, torch.Tensor):
        raise TypeError("rewards must be a tensor [B, G]")
    if rewards.ndim != 2 or rewards.shape[1] < 2 or rewards.shape[0] < 1:
        raise ValueError(f"rewards must have shape [B, G] with G >= 2, got {tuple(rewards.shape)}")
    if not rewards.is_floating_point():
        raise TypeError(f"rewards must be a float tensor [B, G], got {rewards.dtype}")
    if not torch.isfinite(rewards).all():
        raise ValueError("rewards must be finite")
    real(eps, "eps", lo=0.0)
    return _advantages(rewards, eps)


def _advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """:func:`group_advantages` without its input checks (no host read: RFT's rewards are built finite)."""
    r = rewards.double()
    mu = r.mean(1, keepdim=True)
    sd = r.std(1, unbiased=False, keepdim=True)
    adv = torch.where(sd > eps, (r - mu) / (sd + eps * 0), torch.zeros_like(r))
    return adv.to(rewards.dtype)


def grpo_loss(logp_new, logp_old, logp_ref, adv, mask, clip_eps: float = 0.2, beta: float = 1e-3) -> torch.Tensor:
    """Negative Eq. 9: per token min(rho A, clip(rho, 1-eps, 1+eps) A) - beta KL_k3, averaged over
    each sequence's ``mask``ed tokens (1/|o_i|), then over sequences. KL_k3 = pi_ref/pi - log(pi_ref/pi) - 1."""
    if clip_eps <= 0:
        raise ValueError(f"clip_eps must be > 0, got {clip_eps}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    if adv.ndim == 1:
        adv = adv[:, None]
    ratio = torch.exp(logp_new - logp_old)
    surr = torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    d = logp_ref - logp_new
    kl = torch.exp(d) - d - 1
    m = mask.to(logp_new.dtype)
    per_seq = ((surr - beta * kl) * m).sum(1) / m.sum(1).clamp_min(1)
    return -per_seq.mean()


def seq_logp(model, img, speed, tokens, ranges: torch.Tensor | None = None):
    """Per-token log-probabilities of ``tokens`` [B,L] under ``model`` (teacher forcing). With the
    template ``ranges`` [L,2] the logits outside each position's allowed range are masked first, so
    the probabilities are those of format-constrained sampling (the distribution the ratio rho of
    Eq. 11 must use when the samples were drawn with the masks)."""
    bos = torch.full_like(tokens[:, :1], 1)
    logits = model(model.encode_context(img, speed), torch.cat([bos, tokens[:, :-1]], 1))
    if ranges is not None:
        ranges = ranges.to(tokens.device)
        if ranges.shape != (tokens.shape[1], 2):
            raise ValueError(f"ranges must have shape [{tokens.shape[1]}, 2], got {tuple(ranges.shape)}")
        ids = torch.arange(logits.shape[-1], device=tokens.device)
        ok = (ids >= ranges[:, :1]) & (ids < ranges[:, 1:])                      # [L,V]
        logits = logits.masked_fill(~ok, float("-inf"))
    return torch.log_softmax(logits, -1).gather(2, tokens[..., None])[..., 0]


def traj_from_tokens(tokens, mode, space: TokenSpace, act: FastLite) -> torch.Tensor:
    """Torch FAST-lite decoding of the action segment: [B,16] -> [B,8,2]."""
    a = action_tokens(tokens, mode, space).to(torch.float32)
    q = (a.reshape(len(a), act.T, 2) - act.clip - 1) / act.gamma
    C = torch.as_tensor(act.C, dtype=torch.float32, device=a.device)
    sc = torch.as_tensor(act.scale, dtype=torch.float32, device=a.device)
    return torch.einsum("kt,bkd->btd", C, q) * sc


def rft_train(policy, ref, data: DriveData, mode: str, space: TokenSpace, act: FastLite, cfg: GRPOConfig,
              seed: int = 0, pcfg: PDMSConfig | None = None) -> dict:
    """GRPO (Sec. 3.3). Each iteration draws ``contexts_per_step`` training contexts, samples
    ``group_size`` outputs each at ``temperature`` (with the format masks when ``cfg.constrained``,
    the ratios and the KL then under the same masked distribution), scores them (PDMS of the
    decoded trajectory, batched torch, plus the format reward), and runs ``inner_epochs`` clipped
    updates with the KL to ``ref``. Returns curves: reward, PDMS, format rate, zero-variance share,
    KL (lists of floats, read from the device once after the loop; the remaining host read per
    iteration is the finiteness check of the decoded trajectories in ``pdm_score_t``)."""
    check_mode(mode)
    if not isinstance(cfg, GRPOConfig):
        raise TypeError(f"cfg must be a GRPOConfig, got {type(cfg).__name__}")
    pos_int(seed, "seed", 0)
    dev = next(policy.parameters()).device
    img_all, speed_all = (t.to(dev) for t in context_of(data))
    sc = scene_tensors(data.batch, dev)
    ref_prog = torch.as_tensor(data.ref, dtype=torch.float32, device=dev)
    ranges = space.template(mode)[0].to(dev) if cfg.constrained else None
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(seed)
    sgen = torch.Generator(device=dev).manual_seed(seed + 1)
    ref.eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    G, B = cfg.group_size, cfg.contexts_per_step
    curves = {k: [] for k in ("reward", "pdms", "format", "zero_var", "kl")}
    for _ in tqdm(range(cfg.iterations), leave=False, desc=f"grpo {mode}"):
        ci = torch.randint(0, len(data), (B,), generator=gen).to(dev)
        rep = ci.repeat_interleave(G)
        img, speed = img_all[rep], speed_all[rep]
        policy.eval()
        tokens, logp_old = generate(policy, (img, speed), mode, space, greedy=False, constrained=cfg.constrained,
                                    temperature=cfg.temperature, generator=sgen, return_logp=True)
        with torch.no_grad():
            ok = format_ok(tokens, mode, space)
            traj = traj_from_tokens(tokens, mode, space, act).reshape(B, G, 8, 2)
            s = pdm_score_t(sc.index(ci), traj, ref_prog[ci], pcfg)
            pd = s["pdms"].reshape(-1) * ok
            reward = (pd + cfg.lambda_fmt * ok.float()).reshape(B, G)
            adv = _advantages(reward).reshape(-1)
            logp_ref = seq_logp(ref, img, speed, tokens, ranges)
            if cfg.temperature != 1.0:  # ratios are taken against the unscaled policy
                logp_old = seq_logp(policy, img, speed, tokens, ranges)
        mask = torch.ones_like(tokens, dtype=torch.bool)
        policy.train()
        for _ in range(cfg.inner_epochs):
            logp_new = seq_logp(policy, img, speed, tokens, ranges)
            loss = grpo_loss(logp_new, logp_old, logp_ref, adv, mask, cfg.clip_eps, cfg.beta_kl)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
        with torch.no_grad():          # the curves stay on the device until the loop ends
            d = logp_ref - logp_new.detach()
            curves["kl"].append((torch.exp(d) - d - 1).mean())
            curves["reward"].append(reward.mean())
            curves["pdms"].append(pd.mean())
            curves["format"].append(ok.float().mean())
            curves["zero_var"].append((reward.std(1, unbiased=False) <= 1e-6).float().mean())
    policy.eval()
    return {k: torch.stack(v).tolist() if v else [] for k, v in curves.items()}     # one read, after the loop


def clone_frozen(model):
    ref = copy.deepcopy(model)
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref.eval()
