"""APT-mini and Kanzi-mini: a transformer encoder, an FSQ bottleneck and a flow-matching DiT decoder.

One class serves both tokenizers (spec Sec. 3.2-3.5, 3.9):

* **APT-mini** (``window=None, nested=True``): full bidirectional attention; the encoder outputs at
  positions 0..K-1 are the tokens (global, because every position sees the whole chain); nested
  dropout keeps a random prefix during training (Eq. 3.3).
* **Kanzi-mini** (``window=w, nested=False``): encoder attention restricted to |i - j| <= w, one token
  per residue (local), all tokens kept (only the classifier-free-guidance dropout).

The decoder is identical: a DiT over the concatenation [coordinate tokens; conditioning tokens]
(length 2L) with adaLN-Zero time conditioning (one shared modulation MLP). Book choice: learned
absolute positions in the decoder instead of RoPE (the spec allows either). Batches hold proteins of
one length (as the released code trains), so no padding masks are needed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .fsq import FSQ
from .geometry import _center_and_scale, canonicalize, check_coords, random_rotation


@dataclass(frozen=True)
class TokenizerConfig:
    d_enc: int = 64
    n_enc: int = 2
    d_dec: int = 64
    n_dec: int = 3
    n_heads: int = 4
    levels: tuple[int, ...] = (8, 5, 5, 5)
    n_tokens: int = 16          # K; ignored (= L) for a local tokenizer
    max_len: int = 64
    window: int | None = None   # None: global (APT); w: local attention |i-j| <= w (Kanzi)
    nested: bool = True
    p_uncond: float = 0.05
    n_size: int = 1
    lambda_size: float = 0.01

    def __post_init__(self):
        for f in ("d_enc", "n_enc", "d_dec", "n_dec", "n_heads", "n_tokens", "max_len"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{f} must be a positive int, got {v!r}")
        if self.d_enc % self.n_heads or self.d_dec % self.n_heads:
            raise ValueError(f"n_heads={self.n_heads} must divide d_enc and d_dec")
        if self.window is not None and (not isinstance(self.window, int) or self.window < 1):
            raise ValueError(f"window must be None or an int >= 1, got {self.window!r}")
        if not isinstance(self.n_size, int) or self.n_size < 1 or self.n_size >= self.n_tokens:
            raise ValueError(f"n_size must satisfy 1 <= n_size < n_tokens={self.n_tokens}, got {self.n_size!r}")
        if not (isinstance(self.p_uncond, (int, float)) and 0 <= self.p_uncond < 1):
            raise ValueError(f"p_uncond must lie in [0, 1), got {self.p_uncond!r}")

    @property
    def local(self) -> bool:
        return self.window is not None


def velocity_to_score(x: Tensor, v: Tensor, t: Tensor | float) -> Tensor:
    """Score of p_t from the velocity for the path x_t = t x_1 + (1-t) x_0, x_0 ~ N(0, I) (Sec. 3.5):
    grad log p_t(x) = (t v(x, t) - x) / (1 - t)."""
    t = torch.as_tensor(t, dtype=x.dtype, device=x.device)
    if (t >= 1).any() or (t < 0).any():
        raise ValueError("t must lie in [0, 1)")
    return (t * v - x) / (1 - t)


def nested_keep_mask(lengths: Tensor, n_tokens: int, n_size: int = 1, p_uncond: float = 0.05,
                     generator: torch.Generator | None = None, lmax: int | None = None) -> Tensor:
    """Nested dropout with CFG dropout (Eq. 3.3): per example, m = min(L, K),
    c_cut ~ U{n_size, ..., m-1} (exclusive upper bound, as in the released code), keep token i iff
    i < c_cut, and drop everything with probability ``p_uncond``. Returns a float (B, Lmax) mask."""
    if not isinstance(n_tokens, int) or isinstance(n_tokens, bool) or n_tokens < 1:
        raise ValueError(f"n_tokens must be an int >= 1, got {n_tokens!r}")
    if not isinstance(n_size, int) or isinstance(n_size, bool) or n_size < 1 or n_size >= n_tokens:
        raise ValueError(f"n_size must satisfy 1 <= n_size < n_tokens, got {n_size!r}")
    if not (isinstance(p_uncond, (int, float)) and 0 <= p_uncond < 1):
        raise ValueError(f"p_uncond must lie in [0, 1), got {p_uncond!r}")
    lengths = torch.as_tensor(lengths)
    if lengths.ndim != 1 or lengths.numel() == 0 or (lengths < 2).any():
        raise ValueError("lengths must be a non-empty 1-D tensor of lengths >= 2")
    return _nested_keep_mask(lengths, n_tokens, n_size, p_uncond, generator, lmax)


def _nested_keep_mask(lengths: Tensor, n_tokens: int, n_size: int, p_uncond: float,
                      generator: torch.Generator | None, lmax: int | None) -> Tensor:
    """:func:`nested_keep_mask` without its checks (:meth:`DiffusionTokenizer.loss` passes lengths it made)."""
    m = lengths.clamp(max=n_tokens)
    lo = torch.full_like(m, n_size)
    hi = torch.maximum(m, lo + 1)                                   # exclusive
    u = torch.rand(m.shape, generator=generator, device=m.device)
    cut = lo + (u * (hi - lo).float()).floor().long()
    lmax = int(lengths.max()) if lmax is None else lmax
    pos = torch.arange(lmax, device=m.device)
    keep = (pos[None] < cut[:, None]).float()
    cfg = (torch.rand(m.shape, generator=generator, device=m.device) > p_uncond).float()
    return keep * cfg[:, None]


class MLP(nn.Sequential):
    def __init__(self, d: int, mult: int = 4):
        super().__init__(nn.Linear(d, mult * d), nn.GELU(), nn.Linear(mult * d, d))


class Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class EncoderBlock(nn.Module):
    """Pre-RMSNorm transformer block: s + MHA(RMSNorm(s)); s + MLP_gelu(RMSNorm(s))."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.attn, self.mlp = Attention(d, heads), MLP(d)

    def forward(self, s: Tensor, mask: Tensor | None) -> Tensor:
        s = s + self.attn(self.n1(s), mask)
        return s + self.mlp(self.n2(s))


class DiTBlock(nn.Module):
    """adaLN-Zero block; the modulation (shift, scale, gate for attention and MLP) comes from outside
    (one MLP shared by all blocks, ``share_adaLN``)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.n1 = nn.LayerNorm(d, elementwise_affine=False)
        self.n2 = nn.LayerNorm(d, elementwise_affine=False)
        self.attn, self.mlp = Attention(d, heads), MLP(d)

    def forward(self, h: Tensor, mod: Tensor) -> Tensor:
        sh1, sc1, g1, sh2, sc2, g2 = mod.chunk(6, -1)
        h = h + g1 * self.attn(self.n1(h) * (1 + sc1) + sh1)
        return h + g2 * self.mlp(self.n2(h) * (1 + sc2) + sh2)


def time_features(t: Tensor, dim: int) -> Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=t.device, dtype=t.dtype) / half)
    a = t[:, None] * freqs[None] * 1000.0
    return torch.cat([a.sin(), a.cos()], -1)


class DiffusionTokenizer(nn.Module):
    """APT-mini (``window=None, nested=True``) or Kanzi-mini (``window=w, nested=False``)."""

    def __init__(self, cfg: TokenizerConfig):
        super().__init__()
        if not isinstance(cfg, TokenizerConfig):
            raise TypeError(f"cfg must be a TokenizerConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        de, dd = cfg.d_enc, cfg.d_dec
        # -- encoder (Sec. 3.2)
        self.embed_in = nn.Sequential(nn.Linear(3, de), nn.SiLU(), nn.Linear(de, de), nn.LayerNorm(de))
        self.enc_pos = nn.Parameter(0.02 * torch.randn(cfg.max_len, de))
        self.enc_blocks = nn.ModuleList(EncoderBlock(de, cfg.n_heads) for _ in range(cfg.n_enc))
        self.fsq = FSQ(cfg.levels, de)
        self.to_dec = nn.Linear(de, dd)
        # -- decoder (Sec. 3.4)
        self.x_in = nn.Linear(3, dd)
        self.x_norm = nn.LayerNorm(dd)
        self.dec_pos = nn.Parameter(0.02 * torch.randn(cfg.max_len, dd))
        self.type_emb = nn.Parameter(0.02 * torch.randn(2, dd))
        self.t_mlp = nn.Sequential(nn.Linear(dd, dd), nn.SiLU(), nn.Linear(dd, dd))
        self.mod = nn.Sequential(nn.SiLU(), nn.Linear(dd, 6 * dd))  # shared adaLN-Zero modulation
        nn.init.zeros_(self.mod[1].weight)
        nn.init.zeros_(self.mod[1].bias)
        self.dec_blocks = nn.ModuleList(DiTBlock(dd, cfg.n_heads) for _ in range(cfg.n_dec))
        self.final_norm = nn.LayerNorm(dd, elementwise_affine=False)
        self.final_mod = nn.Linear(dd, 2 * dd)
        nn.init.zeros_(self.final_mod.weight)
        nn.init.zeros_(self.final_mod.bias)
        self.head = nn.Linear(dd, 3)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        # -- size head (Sec. 3.4)
        self.size_head = nn.Sequential(nn.Linear(cfg.n_size * dd, dd), nn.SiLU(), nn.Linear(dd, cfg.max_len))

    # ------------------------------------------------------------------------------------ encoder
    def n_tokens_for(self, length: int) -> int:
        """Tokens a protein of ``length`` residues gets: min(L, K) (global) or L (local)."""
        return length if self.cfg.local else min(length, self.cfg.n_tokens)

    def _enc_mask(self, length: int, device) -> Tensor | None:
        if not self.cfg.local:
            return None
        i = torch.arange(length, device=device)
        return (i[:, None] - i[None]).abs() <= self.cfg.window

    def encoder_features(self, x_nm: Tensor, check: bool = True) -> Tensor:
        """Continuous encoder outputs (B, L, d_enc) before the FSQ bottleneck. ``check=False`` skips the
        finiteness check of ``x_nm`` (a host sync on a GPU; shapes are still checked)."""
        x_nm = check_coords(x_nm, "x_nm", self.cfg.max_len, finite=check)
        length = x_nm.shape[1]
        s = self.embed_in(x_nm) + self.enc_pos[:length]
        mask = self._enc_mask(length, x_nm.device)
        for blk in self.enc_blocks:
            s = blk(s, mask)
        return s

    def encode_codes(self, x_nm: Tensor, check: bool = True) -> tuple[Tensor, Tensor, Tensor]:
        """Decoder conditioning (B, m, d_dec), token indices (B, m), raw FSQ codes (B, m, n_levels) for the
        m = n_tokens_for(L) token positions of centred nm coordinates (B, L, 3)."""
        s = self.encoder_features(x_nm, check)
        m = self.n_tokens_for(x_nm.shape[1])
        proj, idx, codes = self.fsq(s[:, :m])
        return self.to_dec(proj), idx, codes

    def encode(self, x_nm: Tensor, mask: Tensor | None = None, check: bool = True) -> tuple[Tensor, Tensor]:
        """Conditioning (B, m, d_dec) and token indices (B, m); ``mask`` must be None or all True (the book
        batches equal-length proteins). ``check=False``: see :meth:`encoder_features`."""
        if mask is not None:
            if not isinstance(mask, Tensor) or tuple(mask.shape) != tuple(x_nm.shape[:2]):
                raise ValueError(f"mask must be a (B, L) tensor matching x_nm, got "
                                 f"{getattr(mask, 'shape', mask)}")
            if not mask.bool().all():
                raise ValueError("mask: the tokenizer takes equal-length batches; pass unpadded proteins "
                                 "(see backbone.length_groups)")
        c, idx, _ = self.encode_codes(x_nm, check)
        return c, idx

    def cond_from_indices(self, idx: Tensor) -> Tensor:
        """Decoder conditioning (B, m, d_dec) from token indices (B, m)."""
        return self.to_dec(self.fsq.project_out(self.fsq.indices_to_codes(idx)))

    # ------------------------------------------------------------------------------------ decoder
    def velocity(self, x_t: Tensor, t: Tensor, cond: Tensor) -> Tensor:
        """v_theta(x_t, t, c~): x_t (B, L, 3) nm, t (B,), cond (B, L, d_dec) zero-padded -> (B, L, 3)."""
        b, length, _ = x_t.shape
        te = self.t_mlp(time_features(t, self.cfg.d_dec))                        # (B, d)
        pos = self.dec_pos[:length]
        hx = self.x_norm(self.x_in(x_t)) + te[:, None] + pos + self.type_emb[0]
        hc = cond + pos + self.type_emb[1]
        h = torch.cat([hx, hc], 1)
        mod = self.mod(te)[:, None]
        for blk in self.dec_blocks:
            h = blk(h, mod)
        sh, sc = self.final_mod(F.silu(te))[:, None].chunk(2, -1)
        return self.head(self.final_norm(h[:, :length]) * (1 + sc) + sh)

    def pad_cond(self, cond: Tensor, length: int, n_keep: int | None = None) -> Tensor:
        """Zero-pad or truncate conditioning to ``length`` positions, zeroing tokens from ``n_keep`` on."""
        b, m, d = cond.shape
        out = cond.new_zeros(b, length, d)
        cut = min(m, length) if n_keep is None else min(m, length, n_keep)
        out[:, :cut] = cond[:, :cut]
        return out

    def size_logits(self, cond_padded: Tensor) -> Tensor:
        return self.size_head(cond_padded[:, : self.cfg.n_size].flatten(1))

    def loss(self, x_nm: Tensor, mask: Tensor | None = None, generator: torch.Generator | None = None,
             keep: Tensor | None = None, check: bool = True) -> dict[str, Tensor]:
        """Flow-matching loss (Sec. 3.4) with nested/CFG dropout, plus lambda_size x the size loss.
        ``check=False`` trusts the values of ``x_nm`` (:meth:`encoder_features`), as the training loop does
        after its first batch."""
        c, _ = self.encode(x_nm, mask, check)
        b, length, _ = x_nm.shape
        dev = x_nm.device
        if keep is None:
            lengths = torch.full((b,), length, device=dev)          # length >= 3 (check_coords): no value check
            if self.cfg.nested:
                keep = _nested_keep_mask(lengths, self.cfg.n_tokens, self.cfg.n_size, self.cfg.p_uncond,
                                         generator, lmax=c.shape[1])
            else:
                u = torch.rand(b, generator=generator, device=dev) > self.cfg.p_uncond
                keep = u.float()[:, None].expand(b, c.shape[1])
        cond = self.pad_cond(c * keep[..., None], length)
        x1 = x_nm
        x0 = torch.randn(x1.shape, generator=generator, device=dev, dtype=x1.dtype)
        x0 = x0 - x0.mean(1, keepdim=True)
        mix = torch.rand(b, generator=generator, device=dev) < 0.98
        tb = torch.rand(b, generator=generator, device=dev).pow(1 / 1.9)         # Beta(1.9, 1) by inverse CDF
        tu = torch.rand(b, generator=generator, device=dev)
        t = torch.where(mix, tb, tu).to(x1.dtype)
        xt = t[:, None, None] * x1 + (1 - t[:, None, None]) * x0
        v = self.velocity(xt, t, cond)
        flow = (v - (x1 - x0)).pow(2).mean()
        size = F.cross_entropy(self.size_logits(cond), torch.full((b,), length - 1, device=dev))
        return {"flow": flow, "size": size, "total": flow + self.cfg.lambda_size * size}

    @torch.no_grad()
    def decode(self, idx: Tensor, length: int, n_keep: int | None = None, steps: int = 50, eta: float = 0.1,
               guidance: str | float = "anneal", score_weight: float = 1.0,
               generator: torch.Generator | None = None) -> Tensor:
        """Sample (B, length, 3) nm coordinates from token prefixes (Sec. 3.5).

        Euler-Maruyama on x <- x + (v + g(t) s w_s) dt + sqrt(2 g(t) eta dt) eps with
        s = (t v - x)/(1 - t) (:func:`velocity_to_score`), g(t) = (1-t)/(t+0.01), plain Euler once
        t >= 0.99; velocities and noise centred over residues. Guidance v = v_0 + w(t)(v_c - v_0) with
        ``"anneal"`` w(t) = 1 - t or a constant w >= 0 (w = 1: conditional only, one forward pass).
        ``eta = 0, score_weight = 0`` is the deterministic probability-flow ODE.
        """
        if not isinstance(idx, Tensor) or idx.ndim != 2:
            raise ValueError(f"idx must be a (B, m) integer tensor, got {getattr(idx, 'shape', idx)}")
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise ValueError(f"length must be an int >= 1, got {length!r}")
        if length > self.cfg.max_len:
            raise ValueError(f"length={length} exceeds max_len={self.cfg.max_len}")
        max_keep = idx.shape[1]
        if n_keep is not None and (not isinstance(n_keep, int) or isinstance(n_keep, bool)
                                   or n_keep < 0 or n_keep > max(max_keep, self.cfg.n_tokens)):
            raise ValueError(f"n_keep must be an int in [0, {max(max_keep, self.cfg.n_tokens)}], got {n_keep!r}")
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
            raise ValueError(f"steps must be an int >= 1, got {steps!r}")
        if not isinstance(eta, (int, float)) or isinstance(eta, bool) or not math.isfinite(eta) or eta < 0:
            raise ValueError(f"eta must be a finite number >= 0, got {eta!r}")
        if isinstance(guidance, str):
            if guidance != "anneal":
                raise ValueError(f"guidance must be 'anneal' or a number >= 0, got {guidance!r}")
        elif isinstance(guidance, bool) or not isinstance(guidance, (int, float)) or not math.isfinite(guidance) \
                or guidance < 0:
            raise ValueError(f"guidance must be 'anneal' or a number >= 0, got {guidance!r}")
        p = next(self.parameters())
        dev, dt_ = p.device, p.dtype
        idx = idx.to(dev)
        b = idx.shape[0]
        cond = self.pad_cond(self.cond_from_indices(idx), length, n_keep)
        both = guidance != 1.0
        if both:
            cond = torch.cat([cond, torch.zeros_like(cond)], 0)
        x = torch.randn(b, length, 3, generator=generator, device=dev, dtype=dt_)
        x = x - x.mean(1, keepdim=True)
        ts = torch.linspace(0, 1, steps + 1, device=dev, dtype=dt_)
        dt = float(ts[1] - ts[0])
        for k in range(steps):
            t = float(ts[k])
            tt = torch.full((cond.shape[0],), t, device=dev, dtype=dt_)
            xin = torch.cat([x, x], 0) if both else x
            v = self.velocity(xin, tt, cond)
            v = v - v.mean(1, keepdim=True)
            if both:
                vc, vu = v.chunk(2, 0)
                w = (1 - t) if guidance == "anneal" else float(guidance)
                v = vu + w * (vc - vu)
            if t >= 0.99 or (eta == 0 and score_weight == 0):
                x = x + v * dt
                continue
            g = (1 - t) / (t + 0.01)
            s = velocity_to_score(x, v, t)      # guided score: linear in v, so guiding v guides s
            x = x + (v + g * s * score_weight) * dt
            if eta > 0:
                eps = torch.randn(x.shape, generator=generator, device=dev, dtype=dt_)
                x = x + math.sqrt(2 * g * eta * dt) * (eps - eps.mean(1, keepdim=True))
        return x

    @torch.no_grad()
    def predict_length(self, idx: Tensor) -> Tensor:
        """Argmax of the size head + 1."""
        cond = self.pad_cond(self.cond_from_indices(idx), max(self.cfg.n_size, idx.shape[1]))
        return self.size_logits(cond).argmax(-1) + 1

    @torch.no_grad()
    def embed(self, x_angstrom: Tensor, ntoks: int = 8) -> Tensor:
        """Fixed-size embedding (Sec. 3.6): centre, canonical PCA pose, nm, encode, and flatten the raw FSQ
        codes of the first ``ntoks`` tokens (zero-padded) -> (B, ntoks * n_levels). No pooling."""
        x = check_coords(x_angstrom, "x_angstrom", self.cfg.max_len)
        if not isinstance(ntoks, int) or isinstance(ntoks, bool) or ntoks < 1:
            raise ValueError(f"ntoks must be an int >= 1, got {ntoks!r}")
        p = next(self.parameters())
        xc = canonicalize(x.to(p.device, p.dtype)) / 10.0
        _, _, codes = self.encode_codes(xc)
        out = codes.new_zeros(codes.shape[0], ntoks, codes.shape[-1])
        k = min(ntoks, codes.shape[1])
        out[:, :k] = codes[:, :k]
        return out.flatten(1)


def train_tokenizer(cfg: TokenizerConfig, lengths: tuple[int, int], steps: int, batch: int = 64, lr: float = 1e-3,
                    warmup: int = 100, seed: int = 0, noise_deg: float = 6.0, device: str = "cpu",
                    log_every: int = 50, progress: bool = True) -> tuple[DiffusionTokenizer, dict]:
    """Train a tokenizer on fresh synthetic backbones (every step a new batch of one random length in
    ``lengths``, each protein under an independent uniform rotation, Sec. 3.1). AdamW, linear warm-up
    then cosine decay to 10%, gradient clipping 1.0. Returns the model (eval mode) and a log.

    No device sync per step (issue 43): the losses stay on the device and are read once per log
    interval (summed in the same order as per-step reads, so the log is unchanged); the batch's values
    are checked at step 0 only (later batches come from the same sampler). The batch itself is drawn on
    the host from the seeded CPU generator (its length and seed read once per step, a host read, no
    device sync) and copied to the device without blocking (pinned memory) on CUDA."""
    from tqdm.auto import tqdm

    from .backbone import make_backbones

    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1, got {steps!r}")
    torch.manual_seed(seed)
    model = DiffusionTokenizer(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)

    def lr_at(i: int) -> float:
        if i < warmup:
            return (i + 1) / warmup
        frac = (i - warmup) / max(1, steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    g = torch.Generator().manual_seed(seed + 1)
    log = {"step": [], "flow": [], "size": [], "perplexity": []}
    acc: list[Tensor] = []                           # (flow, size) per step since the last log, on the device
    pin = torch.device(device).type == "cuda"
    model.train()
    bar = tqdm(range(steps), leave=False, disable=not progress, desc="tokenizer", mininterval=30)
    for i in bar:
        # the batch's length and backbone seed: two draws of the host generator, read in one host read
        length, seed_i = torch.cat([torch.randint(lengths[0], lengths[1] + 1, (1,), generator=g),
                                    torch.randint(0, 2**31 - 1, (1,), generator=g)]).tolist()
        data = make_backbones(batch, length, seed=seed_i, noise_deg=noise_deg)
        rot = random_rotation(batch, g)
        ca = data["CA"] @ rot
        x = _center_and_scale(ca, torch.ones(ca.shape[:2], dtype=torch.bool), 10.0)   # unpadded, drawn finite
        x = x.pin_memory().to(device, non_blocking=True) if pin else x.to(device)
        out = model.loss(x, generator=g if device == "cpu" else None, check=i == 0)
        opt.zero_grad(set_to_none=True)
        out["total"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        acc.append(torch.stack([out["flow"].detach(), out["size"].detach()]))
        if (i + 1) % log_every == 0 or i == steps - 1:
            with torch.no_grad():
                _, idx = model.encode(x)
            from .fsq import code_usage
            use = code_usage(idx[:, : min(4, idx.shape[1])], model.fsq.codebook_size)
            flows, sizes = torch.stack(acc).T.tolist()          # one read per log interval
            mean_flow, mean_size = 0.0, 0.0
            for f, z in zip(flows, sizes):                     # summed step by step, as the per-step reads were
                mean_flow += f
                mean_size += z
            log["step"].append(i + 1)
            log["flow"].append(mean_flow / len(acc))
            log["size"].append(mean_size / len(acc))
            log["perplexity"].append(use["perplexity"])
            bar.set_postfix(flow=f"{log['flow'][-1]:.3f}", ppl=f"{use['perplexity']:.1f}", refresh=False)
            acc = []
    model.eval()
    return model, log


def config_dict(cfg: TokenizerConfig) -> dict:
    d = asdict(cfg)
    d["levels"] = list(d["levels"])
    return d
