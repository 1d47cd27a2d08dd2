"""The driving VLA policy and its chain-of-thought variants (paper Sec. 3.2; spec Sec. 7.3).

The output is one token sequence per decision, ``[<BOx> thought <EOx>] <BOA> actions <EOA>``:
``none`` (actions only), ``meta`` (a high-level decision, textual CoT), ``future_image`` (pooled
future-frame intensities, visual CoT) and ``dynamics`` (DynVLA: the dynamics tokens D_t, D_{t+1} of
the tokenizer, Eq. 5-6). SFT minimises L_SFT = L_cot + lambda_act L_act (Eq. 7-8). Decoding is
batched over scenes; format-constrained decoding masks every position to its template range.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import generator as generator_arg
from ._checks import pos_int, real
from .actions import FastLite
from .data import LAT, LON, DriveData
from .metric import N_WP, PDMSConfig, pdm_score

MODES = ("none", "meta", "scene", "future_image", "dynamics")
IMPLEMENTED_MODES = ("none", "meta", "future_image", "dynamics")
SPECIALS = ("PAD", "BOS", "BOD", "EOD", "BOA", "EOA", "BOT", "EOT", "BOV", "EOV")
N_PIX = 8


class TokenSpace:
    """Disjoint vocabulary ranges and, per mode, the template: for every generated position the
    allowed id range [lo, hi) and whether it belongs to the thought (cot) or the action segment."""

    def __init__(self, m_ego: int = 16, m_env: int = 16, n_ego: int = 4, n_env: int = 4, dyn_steps: int = 2,
                 n_fut: int = 64, n_act: int = 16):
        for k, v in dict(m_ego=m_ego, m_env=m_env, n_ego=n_ego, n_env=n_env, dyn_steps=dyn_steps, n_fut=n_fut,
                         n_act=n_act).items():
            pos_int(v, k)
        self.sp = {s: i for i, s in enumerate(SPECIALS)}
        self.act0 = len(SPECIALS)
        self.ego0 = self.act0 + FastLite.vocab_size
        self.env0 = self.ego0 + m_ego
        self.lat0 = self.env0 + m_env
        self.lon0 = self.lat0 + len(LAT)
        self.pix0 = self.lon0 + len(LON)
        self.vocab = self.pix0 + N_PIX
        self.m_ego, self.m_env, self.n_ego, self.n_env, self.K = m_ego, m_env, n_ego, n_env, dyn_steps
        self.n_fut, self.n_act = n_fut, n_act

    def _fixed(self, name):
        i = self.sp[name]
        return [(i, i + 1)]

    def template(self, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
        """(ranges [L,2] allowed id range per generated position, is_cot [L] bool)."""
        check_mode(mode)
        act = self._fixed("BOA") + [(self.act0, self.ego0)] * self.n_act + self._fixed("EOA")
        if mode == "none":
            cot = []
        elif mode == "meta":
            cot = self._fixed("BOT") + [(self.lat0, self.lon0), (self.lon0, self.pix0)] + self._fixed("EOT")
        elif mode == "dynamics":
            step = [(self.ego0, self.env0)] * self.n_ego + [(self.env0, self.lat0)] * self.n_env
            cot = self._fixed("BOD") + step * self.K + self._fixed("EOD")
        elif mode == "future_image":
            cot = self._fixed("BOV") + [(self.pix0, self.vocab)] * self.n_fut + self._fixed("EOV")
        else:
            raise ValueError(f"mode {mode!r} is not implemented in this book (gpu-only 'scene' is planned)")
        r = torch.tensor(cot + act, dtype=torch.long)
        return r, torch.tensor([True] * len(cot) + [False] * len(act))

    def length(self, mode: str) -> int:
        return len(self.template(mode)[0])


def check_mode(mode):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode not in IMPLEMENTED_MODES:
        raise ValueError(f"mode {mode!r} is not implemented in this book (the 'scene' variant is planned)")


@torch.no_grad()
def dynamics_ids(tok, data: DriveData, chunk: int = 512) -> torch.Tensor:
    """[N, K*(n_ego+n_env)] dynamics tokens D_0, D_1 of the logged future frames (Eq. 5)."""
    dev = next(tok.parameters()).device
    out = []
    for k in range(2):
        ids = []
        for i in range(0, len(data), chunk):
            o = data.cam[i:i + chunk].to(dev)
            ids.append(tok.encode(o[:, 1 + k], o[:, 2 + k])[0].cpu())
        out.append(torch.cat(ids))
    return torch.cat(out, 1)


def build_targets(data: DriveData, mode: str, tok, act: FastLite, space: TokenSpace,
                  dyn_ids: torch.Tensor | None = None) -> torch.Tensor:
    """[N, L_mode] target ids: thought (mode-specific) then <BOA> FAST-lite tokens <EOA> (Eq. 6)."""
    check_mode(mode)
    if not isinstance(data, DriveData):
        raise TypeError(f"data must be a DriveData, got {type(data).__name__}")
    N = len(data)
    sp = space.sp
    col = lambda v: torch.full((N, 1), v, dtype=torch.long)  # noqa: E731
    a = torch.from_numpy(act.encode(data.plan)) + space.act0
    tail = [col(sp["BOA"]), a, col(sp["EOA"])]
    if mode == "none":
        head = []
    elif mode == "meta":
        head = [col(sp["BOT"]), data.meta[:, :1] + space.lat0, data.meta[:, 1:] + space.lon0, col(sp["EOT"])]
    elif mode == "future_image":
        head = [col(sp["BOV"]), data.fut_img[:, : space.n_fut] + space.pix0, col(sp["EOV"])]
    else:
        if tok is None and dyn_ids is None:
            raise ValueError("mode 'dynamics' needs a trained dynamics tokenizer (tok)")
        ids = dyn_ids if dyn_ids is not None else dynamics_ids(tok, data)
        # tokenizer ids: ego in [0, m_ego), env in [m_ego, m_ego + m_env) -> contiguous vocabulary range
        head = [col(sp["BOD"]), ids + space.ego0, col(sp["EOD"])]
    out = torch.cat(head + tail, 1)
    if out.shape[1] != space.length(mode):
        raise ValueError(f"target length {out.shape[1]} does not match the template of {mode!r}")
    return out


def context_of(data: DriveData) -> tuple[torch.Tensor, torch.Tensor]:
    """The policy's input: frames O_{t-1}, O_t stacked [N,6,H,W] and the ego speed [N]. Nothing
    privileged (no BEV, no labels, no future)."""
    return data.cam[:, :2].flatten(1, 2), data.speed


class DrivingVLA(nn.Module):
    """Conv context encoder (3 stride-2 convs -> 8 tokens) + a speed token, and an autoregressive
    Transformer decoder with cross-attention to the context."""

    def __init__(self, vocab: int, d: int = 64, layers: int = 2, heads: int = 4, max_len: int = 96,
                 H: int = 32, W: int = 16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(6, 32, 3, 2, 1), nn.GELU(), nn.Conv2d(32, 64, 3, 2, 1), nn.GELU(),
                                  nn.Conv2d(64, d, 3, 2, 1))
        n_ctx = (H // 8) * (W // 8) + 1
        self.ctx_pos = nn.Parameter(torch.randn(n_ctx, d) * 0.02)
        self.speed_emb = nn.Embedding(24, d)
        self.tok_emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(max_len, d) * 0.02)
        layer = nn.TransformerDecoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.dec = nn.TransformerDecoder(layer, layers)
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, vocab))
        self.vocab, self.max_len = vocab, max_len

    def encode_context(self, img, speed):
        h = self.stem(img).flatten(2).transpose(1, 2)
        s = self.speed_emb(speed.round().long().clamp(0, 23))[:, None]
        return torch.cat([h, s], 1) + self.ctx_pos

    def forward(self, mem, tokens):
        L = tokens.shape[1]
        mask = torch.triu(torch.full((L, L), float("-inf"), device=tokens.device), 1)
        # the mask is causal: saying so skips torch's check of it, a host read per forward pass (the
        # check's answer, True, is what the layers received before)
        h = self.dec(self.tok_emb(tokens) + self.pos[:L], mem, tgt_mask=mask, tgt_is_causal=True)
        return self.head(h)


@dataclass(frozen=True)
class SFTConfig:
    epochs: int = 6
    batch: int = 128
    lr: float = 1e-3
    lambda_act: float = 1.0
    max_steps: int = 1_000_000

    def __post_init__(self):
        for name in ("epochs", "batch", "max_steps"):
            pos_int(getattr(self, name), name)
        real(self.lr, "lr", lo=0.0, strict=True)
        real(self.lambda_act, "lambda_act", lo=0.0)


def _sft_terms(model, img, speed, targets, cot_idx, act_idx, lambda_act: float = 1.0):
    """Eq. 7-8 with the thought and action positions given as index tensors (``cot_idx`` empty: no
    thought): (loss, L_dyn, L_act), all tensors on the device, nothing read to the host."""
    bos = torch.full_like(targets[:, :1], 1)
    logits = model(model.encode_context(img, speed), torch.cat([bos, targets[:, :-1]], 1))
    ce = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")          # [B,L]
    l_act = ce[:, act_idx].mean()
    l_cot = ce[:, cot_idx].mean() if len(cot_idx) else torch.zeros((), device=ce.device)
    return l_cot + lambda_act * l_act, l_cot.detach(), l_act.detach()


def _positions(is_cot: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The thought's and the action segment's positions of a template mask (one host read)."""
    return is_cot.nonzero()[:, 0], (~is_cot).nonzero()[:, 0]


def sft_loss(model, img, speed, targets, is_cot, lambda_act: float = 1.0):
    """Eq. 7-8: token-mean cross-entropy on the thought plus lambda_act x on the action segment.
    Returns (loss, L_dyn, L_act) with the two terms as floats."""
    loss, l_cot, l_act = _sft_terms(model, img, speed, targets, *_positions(is_cot), lambda_act)
    return loss, float(l_cot), float(l_act)


def sft_train(model, data: DriveData, targets: torch.Tensor, mode: str, space: TokenSpace, cfg: SFTConfig,
              seed: int = 0) -> dict:
    """Teacher-forced SFT (AdamW, cosine schedule). Returns the loss curves (lists of floats, read from
    the device once, after the loop: no host sync per step)."""
    if not isinstance(cfg, SFTConfig):
        raise TypeError(f"cfg must be an SFTConfig, got {type(cfg).__name__}")
    if not isinstance(data, DriveData):
        raise TypeError(f"data must be a DriveData, got {type(data).__name__}")
    if not isinstance(targets, torch.Tensor) or targets.dim() != 2 or len(targets) != len(data) \
            or targets.shape[1] != space.length(mode):
        raise ValueError(f"targets must be a token tensor [{len(data)}, {space.length(mode)}] for mode {mode!r}")
    pos_int(seed, "seed", 0)
    dev = next(model.parameters()).device
    img, speed = (t.to(dev) for t in context_of(data))
    targets = targets.to(dev)
    _, is_cot = space.template(mode)
    cot_idx, act_idx = (i.to(dev) for i in _positions(is_cot))
    n = len(targets)
    steps = min(cfg.max_steps, cfg.epochs * math.ceil(n / cfg.batch))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / steps)))
    gen = torch.Generator().manual_seed(seed)
    curves = {"cot": [], "act": []}
    model.train()
    step = 0
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen).to(dev)
        for i in range(0, n, cfg.batch):
            if step >= steps:
                break
            b = perm[i:i + cfg.batch]
            loss, lc, la = _sft_terms(model, img[b], speed[b], targets[b], cot_idx, act_idx, cfg.lambda_act)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            curves["cot"].append(lc)
            curves["act"].append(la)
            step += 1
    model.eval()
    # the loss terms stayed on the device: read once here (the same float32 values a read per step gave)
    return {k: torch.stack(v).tolist() if v else [] for k, v in curves.items()}


def generate(model, context, mode: str, space: TokenSpace, greedy: bool = True, constrained: bool = True,
             temperature: float = 1.0, forced_prefix: torch.Tensor | None = None, generator=None,
             return_logp: bool = False):
    """Batched autoregressive decoding of the mode's template (one forward pass per generated token;
    no KV cache). ``constrained`` masks each position to its template range; ``forced_prefix``
    [B,k] teacher-forces the first k tokens (oracle CoT). Returns tokens [B,L] (and per-token
    log-probabilities under the sampling distribution)."""
    check_mode(mode)
    real(temperature, "temperature", lo=0.0, strict=True)
    generator_arg(generator)
    img, speed = context
    ranges, _ = space.template(mode)
    dev = img.device
    ranges = ranges.to(dev)
    L, B = len(ranges), len(img)
    k_forced = 0 if forced_prefix is None else forced_prefix.shape[1]
    if k_forced > L:
        raise ValueError(f"forced_prefix has {k_forced} tokens, more than the template length {L}")
    ids = torch.arange(space.vocab, device=dev)
    with torch.no_grad():
        mem = model.encode_context(img, speed)
        seq = torch.full((B, 1), space.sp["BOS"], dtype=torch.long, device=dev)
        logps = []
        for t in range(L):
            if t < k_forced:
                seq = torch.cat([seq, forced_prefix[:, t:t + 1].to(dev)], 1)
                logps.append(torch.zeros(B, device=dev))
                continue
            logits = model(mem, seq)[:, -1] / temperature
            if constrained:
                ok = (ids >= ranges[t, 0]) & (ids < ranges[t, 1])
                logits = logits.masked_fill(~ok, float("-inf"))
            lp = torch.log_softmax(logits, -1)
            nxt = lp.argmax(-1) if greedy else torch.multinomial(lp.exp(), 1, generator=generator)[:, 0]
            logps.append(lp.gather(1, nxt[:, None])[:, 0])
            seq = torch.cat([seq, nxt[:, None]], 1)
    out = seq[:, 1:]
    return (out, torch.stack(logps, 1)) if return_logp else out


def format_ok(tokens: torch.Tensor, mode: str, space: TokenSpace) -> torch.Tensor:
    ranges, _ = space.template(mode)
    ranges = ranges.to(tokens.device)
    if tokens.ndim != 2 or tokens.shape[1] != len(ranges):
        return torch.zeros(len(tokens), dtype=torch.bool, device=tokens.device)
    return ((tokens >= ranges[:, 0]) & (tokens < ranges[:, 1])).all(1)


def action_tokens(tokens: torch.Tensor, mode: str, space: TokenSpace) -> torch.Tensor:
    L = space.length(mode)
    return (tokens[:, L - 1 - space.n_act:L - 1] - space.act0).clamp(0, FastLite.vocab_size - 1)


def parse_output(tokens: torch.Tensor, mode: str, space: TokenSpace, act: FastLite, fallback=None):
    """(format_ok [N] bool, traj [N,8,2]): malformed outputs get ``fallback`` (the CV plan when
    given, otherwise standing still)."""
    check_mode(mode)
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2:
        raise ValueError("tokens must be a 2-d tensor [N, L]")
    if tokens.shape[1] != space.length(mode):
        raise ValueError(f"tokens must have {space.length(mode)} positions for mode {mode!r}, got {tokens.shape[1]}")
    ok = format_ok(tokens, mode, space).cpu().numpy()
    traj = act.decode(action_tokens(tokens, mode, space).cpu().numpy())
    fb = np.zeros_like(traj) if fallback is None else np.asarray(fallback, dtype=float)
    return ok, np.where(ok[:, None, None], traj, fb)


def evaluate_policy(model, data: DriveData, mode: str, space: TokenSpace, act: FastLite, oracle_cot: bool = False,
                    targets: torch.Tensor | None = None, chunk: int = 512, pcfg: PDMSConfig | None = None) -> dict:
    """Greedy, format-constrained decoding on ``data``; PDMS and sub-metrics (scene means), ADE to
    the expert, collision rate (NC < 1), generated tokens and forward passes per decision and
    ms per decision. ``oracle_cot`` teacher-forces the ground-truth thought from ``targets``."""
    check_mode(mode)
    dev = next(model.parameters()).device
    img, speed = context_of(data)
    _, is_cot = space.template(mode)
    k = int(is_cot.sum())
    if oracle_cot and (targets is None or k == 0):
        raise ValueError("oracle_cot needs targets and a mode with a thought")
    outs = []
    t0 = time.perf_counter()
    for i in range(0, len(data), chunk):
        fp = targets[i:i + chunk, :k] if oracle_cot else None
        outs.append(generate(model, (img[i:i + chunk].to(dev), speed[i:i + chunk].to(dev)), mode, space,
                             forced_prefix=fp).cpu())
    if dev.type == "cuda":
        torch.cuda.synchronize()
    ms = 1000 * (time.perf_counter() - t0) / len(data)
    tokens = torch.cat(outs)
    ok, traj = parse_output(tokens, mode, space, act, data.cv)
    s = pdm_score(data.batch, traj, data.ref, pcfg)
    L = space.length(mode)
    res = {key: float(np.mean(s[key])) for key in ("pdms", "nc", "dac", "ttc", "ep", "c")}
    res.update(ade=float(np.linalg.norm(traj - data.plan, axis=-1).mean()), collision=float(np.mean(s["nc"] < 1)),
               format=float(ok.mean()), tokens=L, forwards=L - (k if oracle_cot else 0), ms=ms,
               per_scene=s["pdms"], tokens_out=tokens, traj=traj)
    return res


def n_waypoints() -> int:
    return N_WP
