"""SynGR (Chen et al., ICML 2026): saliency diagnosis, dominant-modality masking, tripartite views
and the synergy contrastive loss (spec Sec. 3.4-3.5), on a small encoder-decoder generator.

Equations (numbered as in the spec's Sec. 3.4):
  (S)  s_i = 1/(M N) sum_m sum_j A^(m)_{j,i}            token saliency, last encoder layer
  (CL) L_cl = -log e^{cos(z_m,z_o)/tau} / (e^{cos(z_m,z_o)/tau} + e^{cos(z_m,z_u)/tau})
            = softplus((cos(z_m,z_u) - cos(z_m,z_o)) / tau)
  (L)  L = 1/3 [NLL(H_ori) + NLL(H_mask) + NLL(H_uni)] + alpha L_cl
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ._checks import flag, real
from ._checks import generator as generator_arg
from .sequences import HISTORY_MODES, IMAGE, PROMPT, TEXT, TokenLayout, apply_history_mode

UNI_VIEWS = ("dominant", "text", "image")
MASKINGS = ("saliency", "random", "non_dominant")


class _Attention(nn.Module):
    """Multi-head attention with separate query and key/value projections, so that the keys and
    values of a fixed memory can be computed once and reused (cached decoding). No dropout on the
    attention weights (a book choice: on the CPU it makes the fused attention kernel fall back to a
    path about four times slower); the blocks keep dropout on their residual branches."""

    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.q, self.kv, self.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)

    def split(self, x):
        """[B, T, d] -> [B, heads, T, d/heads]."""
        return x.view(*x.shape[:-1], self.h, self.dh).transpose(-3, -2)

    def keys_values(self, src):
        k, v = self.kv(src).chunk(2, -1)
        return self.split(k), self.split(v)

    def attend(self, q, k, v, mask=None, causal=False, need_attn=False):
        """Softmax attention of split queries on split keys/values; ``mask`` [B, 1, 1, S] True = attend.
        Returns the merged output [B, T, d] and the weights [B, heads, T, S] if ``need_attn``."""
        w = None
        if need_attn:
            sc = (q @ k.transpose(-1, -2)) / self.dh**0.5
            if causal:
                T = q.shape[-2]
                sc = sc.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), 1), float("-inf"))
            if mask is not None:
                sc = sc.masked_fill(~mask, float("-inf"))
            w = torch.softmax(sc, -1)
            out = w @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return self.o(out.transpose(-3, -2).flatten(-2)), w

    def forward(self, x, src=None, mask=None, causal=False, need_attn=False):
        k, v = self.keys_values(x if src is None else src)
        return self.attend(self.split(self.q(x)), k, v, mask, causal, need_attn)


class _Dropout(nn.Dropout):
    """Dropout whose mask is ``torch.rand(float64) < 1 - p`` from the default generator. On a CPU where
    PyTorch's ``bernoulli_`` takes its default path (not MKL's Intel stream; this book's AMD machines),
    ``F.dropout`` draws exactly these numbers, serially, so this is the same dropout to the bit and about a
    quarter faster; on Intel CPUs and on CUDA the draws differ from ``F.dropout``'s, and it is still a
    dropout with keep probability ``1 - p`` (tests: the mask formula everywhere, ``F.dropout`` where its
    path is the default one)."""

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = torch.rand(x.shape, dtype=torch.float64, device=x.device) < 1 - self.p
        return x * keep.to(x.dtype).div_(1 - self.p)


class _Block(nn.Module):
    """Pre-LN Transformer block; ``cross=True`` adds encoder-decoder attention."""

    def __init__(self, d, heads, d_ff, dropout, cross=False):
        super().__init__()
        self.ln1, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = _Attention(d, heads)
        self.cross = _Attention(d, heads) if cross else None
        self.ln2 = nn.LayerNorm(d) if cross else None
        self.ff = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), _Dropout(dropout), nn.Linear(d_ff, d))
        self.drop = _Dropout(dropout)

    def forward(self, x, valid=None, causal=False, mem=None, mvalid=None, need_attn=False):
        """``valid`` [B, S] (self-attention keys), ``mvalid`` [B, S_mem] (memory keys): True = attend."""
        mask = None if valid is None else valid[:, None, None, :]
        a, w = self.attn(self.ln1(x), mask=mask, causal=causal, need_attn=need_attn)
        x = x + self.drop(a)
        if self.cross is not None:
            x = x + self.drop(self.cross(self.ln2(x), mem, mask=mvalid[:, None, None, :])[0])
        x = x + self.drop(self.ff(self.ln3(x)))
        return x, w


class GRSeq2Seq(nn.Module):
    """Small encoder-decoder generator (spec Sec. 7.3): token + learned absolute position embeddings,
    pre-LN blocks, the last encoder layer's attention returned on request.

    ``history_mode`` fixes which modality the model reads (GR-text / GR-image / GR-fused and SynGR):
    the other modality's positions are hidden inside :meth:`encode`, so every caller sees the same
    model input."""

    def __init__(self, layout: TokenLayout, d_model=48, heads=4, enc_layers=2, dec_layers=2, d_ff=96,
                 dropout=0.1, history_mode="fused"):
        super().__init__()
        if history_mode not in HISTORY_MODES:
            raise ValueError(f"history_mode must be one of {HISTORY_MODES}, got {history_mode!r}")
        if d_model % heads:
            raise ValueError(f"d_model={d_model} must be divisible by heads={heads}")
        self.layout, self.history_mode, self.bos_id = layout, history_mode, layout.BOS
        self.register_buffer("pos_mod", layout.pos_modality(), persistent=False)
        # the positions a unimodal model reads (prompt + its own modality): its encoder skips the hidden ones
        # (``prune_hidden = False`` masks them instead, as the full-length encoder; the tests' reference)
        self.prune_hidden = True
        for mode, hidden in (("text", IMAGE), ("image", TEXT)):
            self.register_buffer(f"kept_{mode}", (self.pos_mod != hidden).nonzero()[:, 0], persistent=False)
        self.tok = nn.Embedding(layout.vocab_size, d_model)
        self.enc_pos = nn.Parameter(0.02 * torch.randn(layout.seq_len, d_model))
        self.dec_pos = nn.Parameter(0.02 * torch.randn(layout.target_len, d_model))
        self.enc = nn.ModuleList(_Block(d_model, heads, d_ff, dropout) for _ in range(enc_layers))
        self.dec = nn.ModuleList(_Block(d_model, heads, d_ff, dropout, cross=True) for _ in range(dec_layers))
        self.ln_enc, self.ln_dec = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, layout.vocab_size)

    def encode(self, input_ids, valid, need_attn=False):
        """Memory [B, S, d], key validity [B, S], last-layer attention [B, H, S, S] (or None).

        A unimodal model (``history_mode`` ``"text"`` or ``"image"``) hides the other modality's positions; when
        no attention is asked for, its encoder drops them instead of masking them (``S`` = the prompt and the
        read modality's positions): the same memory at the kept positions, in exact arithmetic (a hidden
        position is never a key, and the decoder never reads its output), at about two thirds of the cost.
        With ``need_attn`` every position is kept, as the saliency callers index by position. (In training with
        dropout the dropped positions draw no dropout mask, so the draws differ from the full-length encoder's.)"""
        if self.history_mode != "fused" and self.prune_hidden and not need_attn:
            kept = self.kept_text if self.history_mode == "text" else self.kept_image
            input_ids, valid = input_ids[:, kept], valid[:, kept]
            x = self.tok(input_ids) + self.enc_pos[kept]
            for blk in self.enc:
                x, _ = blk(x, valid=valid)
            return self.ln_enc(x), valid, None
        input_ids, valid = apply_history_mode(input_ids, valid, self.pos_mod, self.history_mode, self.layout.PAD)
        x = self.tok(input_ids) + self.enc_pos
        attn = None
        for i, blk in enumerate(self.enc):
            x, w = blk(x, valid=valid, need_attn=need_attn and i == len(self.enc) - 1)
            attn = w if w is not None else attn
        return self.ln_enc(x), valid, attn

    def decode(self, dec_in, mem, mvalid):
        """Last decoder hidden states [B, t, d] (after the final layer norm) under a causal mask."""
        t = dec_in.shape[1]
        x = self.tok(dec_in) + self.dec_pos[:t]
        for blk in self.dec:
            x, _ = blk(x, causal=True, mem=mem, mvalid=mvalid)
        return self.ln_dec(x)

    def memory_cache(self, mem, mvalid) -> dict:
        """Keys/values of the encoder memory for every decoder layer, computed once per batch and
        shared by all beams and decoding steps (:meth:`decode_step`)."""
        return {"mem_kv": [blk.cross.keys_values(mem) for blk in self.dec], "mask": mvalid[:, None, None, :],
                "self_kv": [None] * len(self.dec), "t": 0}

    def decode_step(self, tok, cache: dict):
        """One incremental decoding step for ``tok`` [B, beam] (the last token of every beam): the
        decoder's last hidden state [B, beam, d]. Self-attention keys/values of earlier steps sit in
        ``cache["self_kv"]`` as [B, beam, heads, t, d/heads] (reorder them with :meth:`reorder_cache`);
        cross-attention reads the memory once per user, with the beams as extra query rows. Equal to
        ``decode(...)[:, -1]`` on the whole prefix."""
        B, nb = tok.shape
        t = cache["t"]
        x = (self.tok(tok) + self.dec_pos[t]).view(B * nb, 1, -1)
        for i, blk in enumerate(self.dec):
            h = blk.ln1(x)
            q = blk.attn.split(blk.attn.q(h))                                  # [B*nb, H, 1, dh]
            k, v = blk.attn.keys_values(h)
            k, v = k.view(B, nb, *k.shape[1:]), v.view(B, nb, *v.shape[1:])   # [B, nb, H, 1, dh]
            old = cache["self_kv"][i]
            if old is not None:
                k, v = torch.cat([old[0], k], -2), torch.cat([old[1], v], -2)
            cache["self_kv"][i] = (k, v)
            a, _ = blk.attn.attend(q, k.flatten(0, 1), v.flatten(0, 1))
            x = x + a
            hq = blk.cross.split(blk.cross.q(blk.ln2(x)).view(B, nb, -1))       # [B, H, nb, dh]
            mk, mv = cache["mem_kv"][i]
            c, _ = blk.cross.attend(hq, mk, mv, cache["mask"])               # [B, nb, d]
            x = x + c.reshape(B * nb, 1, -1)
            x = x + blk.ff(blk.ln3(x))
        cache["t"] = t + 1
        return self.ln_dec(x).view(B, nb, -1)

    @staticmethod
    def reorder_cache(cache: dict, parent: torch.Tensor) -> None:
        """Keep, for every new beam, the self-attention cache of its parent beam (``parent`` [B, beam])."""
        for i, kv in enumerate(cache["self_kv"]):
            if kv is not None:
                idx = parent.view(*parent.shape, 1, 1, 1).expand(-1, -1, *kv[0].shape[2:])
                cache["self_kv"][i] = (kv[0].gather(1, idx), kv[1].gather(1, idx))

    def forward(self, input_ids, valid, labels):
        """Per-row NLL [B] (sum over target tokens / T), logits and the decoder hidden states."""
        mem, mvalid, _ = self.encode(input_ids, valid)
        dec_in = torch.cat([torch.full_like(labels[:, :1], self.bos_id), labels[:, :-1]], 1)
        hid = self.decode(dec_in, mem, mvalid)
        logits = self.head(hid)
        nll = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none").mean(1)
        return {"nll": nll, "logits": logits, "dec_hidden": hid}


def token_saliency(attn: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Eq. (S): [B, H, S, S] last-layer attention -> [B, S] importance of every key position,
    averaged over heads and over valid query positions only."""
    if not isinstance(attn, torch.Tensor) or not attn.is_floating_point():
        raise TypeError(f"attn must be a floating-point tensor [B, H, S, S], got {type(attn).__name__}")
    if attn.ndim != 4 or attn.shape[-1] != attn.shape[-2] or attn.numel() == 0:
        raise ValueError(f"attn must be a non-empty tensor [B, H, S, S], got shape {tuple(attn.shape)}")
    if not bool(torch.isfinite(attn).all()):
        raise ValueError("attn must be finite (no NaN or inf)")
    if not isinstance(valid, torch.Tensor) or valid.shape != (attn.shape[0], attn.shape[-1]) or valid.dtype != torch.bool:
        raise ValueError("valid must be a bool tensor [B, S] matching attn")
    return _saliency(attn, valid)


def _saliency(attn: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Eq. (S) without the input checks (for the model's own attention: the finiteness check reads the host)."""
    q = valid.to(attn.dtype)                                        # [B, S] valid queries
    per_key = (attn.mean(1) * q[:, :, None]).sum(1)                # [B, S_key]
    return per_key / q.sum(1, keepdim=True).clamp_min(1)


def modality_scores(sal: torch.Tensor, pos_modality: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """[B, 2] mean saliency over valid text positions and over valid image positions."""
    out = []
    for code in (TEXT, IMAGE):
        m = valid & (pos_modality == code)[None, :]
        out.append((sal * m).sum(1) / m.sum(1).clamp_min(1))
    return torch.stack(out, 1)


def dominant_modality(sal: torch.Tensor, pos_modality: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """[B] 0 = text, 1 = image: the modality with the larger mean saliency (ties -> text)."""
    sc = modality_scores(sal, pos_modality, valid)
    return (sc[:, 1] > sc[:, 0]).long()


def _check_ratio(r):
    if not real(r, "mask_ratio", lo=0.0) < 1.0:
        raise ValueError(f"mask_ratio must be a number in [0, 1), got {r!r}")


def mask_dominant_topr(input_ids, sal, pos_modality, valid, dominant, r: float, pad_id: int = 0,
                       strategy: str = "saliency", generator: torch.Generator | None = None):
    """H_mask (Sec. 3.4): per row, PAD the floor(r |D_b|) most salient valid positions of the
    dominant modality D_b. ``random`` masks as many random dominant positions; ``non_dominant``
    masks the most salient positions of the other modality. Batched: ranks from a sort, no loop
    over rows. Returns (masked ids, new valid mask)."""
    _check_ratio(r)
    if strategy not in MASKINGS:
        raise ValueError(f"strategy must be one of {MASKINGS}, got {strategy!r}")
    generator_arg(generator)
    code = torch.where(dominant == 0, TEXT, IMAGE)                       # [B]
    if strategy == "non_dominant":
        code = torch.where(dominant == 0, IMAGE, TEXT)
    cand = valid & (pos_modality[None, :] == code[:, None])             # [B, S]
    k = torch.floor(r * cand.sum(1).to(torch.float64)).long()           # [B]
    if strategy == "random":
        key = torch.rand(sal.shape, generator=generator).to(sal.device)
    else:
        key = sal.detach().float()
    key = key.masked_fill(~cand, float("-inf"))
    order = torch.sort(key, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    drop = cand & (rank < k[:, None])
    return input_ids.masked_fill(drop, pad_id), valid & ~drop


def unimodal_view(input_ids, pos_modality, valid, keep: torch.Tensor, pad_id: int = 0):
    """H_uni (Sec. 3.4): keep prompt tokens and one modality per row (``keep``: 0 = text, 1 = image)."""
    code = torch.where(keep == 0, TEXT, IMAGE)
    stay = (pos_modality[None, :] == PROMPT) | (pos_modality[None, :] == code[:, None])
    return input_ids.masked_fill(~stay, pad_id), valid & stay


def synergy_contrastive_loss(z_ori, z_mask, z_uni, tau: float = 0.07) -> torch.Tensor:
    """Eq. (CL): two-way InfoNCE with z_mask as anchor, z_ori positive, z_uni negative (mean over rows)."""
    real(tau, "tau", lo=0.0, strict=True)
    for nm, z in (("z_ori", z_ori), ("z_mask", z_mask), ("z_uni", z_uni)):
        if not isinstance(z, torch.Tensor) or not z.is_floating_point():
            raise TypeError(f"{nm} must be a floating-point tensor [B, d], got {type(z).__name__}")
        if z.ndim != 2 or z.shape[0] == 0 or z.shape != getattr(z_ori, "shape", None):
            raise ValueError(f"{nm} must be a non-empty tensor [B, d] with the shape of z_ori")
        if not bool(torch.isfinite(z).all()):
            raise ValueError(f"{nm} must be finite (no NaN or inf)")
    return _contrastive(z_ori, z_mask, z_uni, tau)


def _contrastive(z_ori, z_mask, z_uni, tau: float) -> torch.Tensor:
    """Eq. (CL) without the input checks (the training step's inner call: the checks read the host)."""
    pos = F.cosine_similarity(z_mask, z_ori, dim=-1) / tau
    neg = F.cosine_similarity(z_mask, z_uni, dim=-1) / tau
    return -(pos - torch.logsumexp(torch.stack([pos, neg], -1), -1)).mean()


@dataclass(frozen=True)
class SynGRConfig:
    alpha: float = 0.1            # contrastive weight
    mask_ratio: float = 0.3       # r
    tau: float = 0.07
    uni_view: str = "dominant"
    masking: str = "saliency"
    use_uni_nll: bool = True
    use_mask_nll: bool = True

    def __post_init__(self):
        real(self.alpha, "alpha", lo=0.0)
        _check_ratio(self.mask_ratio)
        real(self.tau, "tau", lo=0.0, strict=True)
        flag(self.use_uni_nll, "use_uni_nll")
        flag(self.use_mask_nll, "use_mask_nll")
        if self.uni_view not in UNI_VIEWS:
            raise ValueError(f"uni_view must be one of {UNI_VIEWS}, got {self.uni_view!r}")
        if self.masking not in MASKINGS:
            raise ValueError(f"masking must be one of {MASKINGS}, got {self.masking!r}")


def saliency_pass(model: GRSeq2Seq, input_ids, valid):
    """No-grad encoder pass: saliency [B, S] and the (history-mode) valid mask the model saw."""
    with torch.no_grad():
        _, v, attn = model.encode(input_ids, valid, need_attn=True)
    return _saliency(attn, v), v


def syngr_loss(model: GRSeq2Seq, batch: dict, cfg: SynGRConfig, generator: torch.Generator | None = None):
    """Eq. (L), one training step's loss (Sec. 3.5): saliency pass, dominant modality, the three views
    stacked into one 3B batch with shared labels, NLL of the enabled views and alpha * L_cl. The logs are 0-d
    tensors (read them with ``float``), so the step itself reads nothing from the host."""
    if not isinstance(cfg, SynGRConfig):
        raise TypeError(f"cfg must be a SynGRConfig, got {type(cfg).__name__}")
    generator_arg(generator)
    ids, valid, labels = batch["input_ids"], batch["valid"], batch["labels"]
    B, pm, pad = len(ids), model.pos_mod, model.layout.PAD
    sal, v = saliency_pass(model, ids, valid)
    dom = dominant_modality(sal, pm, v)
    m_ids, m_valid = mask_dominant_topr(ids, sal, pm, v, dom, cfg.mask_ratio, pad, cfg.masking, generator)
    keep = dom if cfg.uni_view == "dominant" else torch.full_like(dom, UNI_VIEWS.index(cfg.uni_view) - 1)
    u_ids, u_valid = unimodal_view(ids, pm, v, keep, pad)
    out = model(torch.cat([ids, m_ids, u_ids]), torch.cat([valid, m_valid, u_valid]), labels.repeat(3, 1))
    nll = out["nll"].view(3, B)
    use = [i for i, on in enumerate((True, cfg.use_mask_nll, cfg.use_uni_nll)) if on]   # host flags: no sync
    loss_nll = nll[use].mean()
    z = out["dec_hidden"].mean(1).view(3, B, -1)
    l_cl = _contrastive(z[0], z[1], z[2], cfg.tau)
    loss = loss_nll + cfg.alpha * l_cl
    logs = {"nll": nll[0].mean().detach(), "l_cl": l_cl.detach(), "text_dominant": (dom == 0).float().mean()}
    return loss, logs


def nll_loss(model: GRSeq2Seq, batch: dict, generator=None):
    """Plain generator loss: token-mean NLL on the full history (the GR baselines). The logs are 0-d tensors
    (read them with ``float``): the training step reads nothing from the host."""
    out = model(batch["input_ids"], batch["valid"], batch["labels"])
    loss = out["nll"].mean()
    return loss, {"nll": loss.detach()}
