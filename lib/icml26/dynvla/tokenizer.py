"""The Dynamics Tokenizer (paper Sec. 3.1, spec Sec. 3.1 and 7.2) and its coupled baseline.

Two frames O_t, O_{t+1} are patchified; learnable ego and environment queries read them through a
Transformer encoder; the query outputs are projected to d_VQ and quantised by two *separate*
codebooks (Eq. 1-2). Decoders reconstruct the next camera raster and the next BEV map from the
*current* one plus the codes (Eq. 3); a 2-layer MLP recovers the ego motion from the ego codes
alone (action regularisation). The loss is Eq. 4:
L = L_img + lambda_bev L_bev + lambda_vq L_VQ + lambda_act L_act-reg.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from ._checks import device as device_arg
from ._checks import flag, pos_int, real

N_BEV = 4
MOTION_SCALE = (10.0, 1.0, 0.2)  # (dx m, dy m, dpsi rad): normalisation of the ego-motion target


@dataclass(frozen=True)
class DynTokConfig:
    d_model: int = 32
    enc_layers: int = 1
    dec_layers: int = 1
    heads: int = 2
    n_ego: int = 4
    n_env: int = 4
    m_ego: int = 16
    m_env: int = 16
    d_vq: int = 8
    patch: int = 4
    decouple: bool = True
    use_img: bool = True
    use_bev: bool = True
    act_reg: bool = True
    w_bev: float = 0.1
    w_vq: float = 1.0
    w_act: float = 1.0
    w_grad: float = 1.0
    beta_commit: float = 0.25
    restart_dead: bool = False
    l2_codes: bool = True

    def __post_init__(self):
        for k in ("decouple", "use_img", "use_bev", "act_reg", "restart_dead", "l2_codes"):
            flag(getattr(self, k), k)
        for k in ("d_model", "enc_layers", "dec_layers", "heads", "patch", "d_vq"):
            pos_int(getattr(self, k), k)
        for k in ("n_ego", "n_env"):
            pos_int(getattr(self, k), f"{k} (>= 1 when decouple=True)" if self.decouple else k,
                    1 if self.decouple else 0)
        for k in ("m_ego", "m_env"):
            pos_int(getattr(self, k), k, 2)
        for k in ("w_bev", "w_vq", "w_act", "w_grad", "beta_commit"):
            real(getattr(self, k), k, lo=0.0)
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        if not (self.use_img or self.use_bev):
            raise ValueError("at least one of use_img, use_bev must be True")
        if self.restart_dead:
            raise ValueError("restart_dead=True is not implemented: dead-code restarts would hide the collapse "
                             "the coupled ablation is meant to show (spec Sec. 11)")

    @property
    def n_codes(self) -> int:
        return self.n_ego + self.n_env

    @property
    def coupled(self) -> DynTokConfig:
        """The coupled baseline with the same total budget: one query set, one codebook of
        m_ego + m_env codes, no action head."""
        from dataclasses import replace
        return replace(self, decouple=False, act_reg=False)


class VectorQuantizer(nn.Module):
    """Nearest-neighbour VQ with the VQ-VAE codebook + commitment loss and straight-through
    gradients (van den Oord et al. 2017; paper Sec. 3.1)."""

    def __init__(self, m: int, d: int, beta: float = 0.25, l2: bool = True):
        super().__init__()
        pos_int(m, "m")
        pos_int(d, "d")
        real(beta, "beta", lo=0.0)
        flag(l2, "l2")
        self.codebook = nn.Parameter(torch.randn(m, d) * 0.1)
        self.beta, self.l2 = beta, l2
        self.register_buffer("initialised", torch.tensor(False))

    @torch.no_grad()
    def init_from(self, e: torch.Tensor, gen: torch.Generator | None = None):
        flat = e.reshape(-1, e.shape[-1])
        idx = torch.randperm(len(flat), generator=gen, device="cpu")[: len(self.codebook)].to(flat.device)
        n = len(idx)
        self.codebook.data[:n] = flat[idx] + 1e-3 * torch.randn_like(flat[idx])
        self.initialised.fill_(True)

    def codes(self) -> torch.Tensor:
        """The code vectors (unit-normalised when ``l2``)."""
        return F.normalize(self.codebook, dim=-1) if self.l2 else self.codebook

    def forward(self, e: torch.Tensor):
        """e [B,n,d] -> (z_q [B,n,d] straight-through, idx [B,n], vq_loss)."""
        if e.ndim != 3 or e.shape[-1] != self.codebook.shape[1]:
            raise ValueError(f"e must have shape [B, n, {self.codebook.shape[1]}], got {tuple(e.shape)}")
        cb = self.codes()
        if self.l2:
            e = F.normalize(e, dim=-1)
        d2 = (e.pow(2).sum(-1, keepdim=True) - 2 * e @ cb.t() + cb.pow(2).sum(-1))
        idx = d2.argmin(-1)
        z = cb[idx]
        loss = F.mse_loss(z, e.detach()) + self.beta * F.mse_loss(e, z.detach())
        return e + (z - e).detach(), idx, loss


def _enc(d, heads, layers):
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def patchify(x: torch.Tensor, p: int) -> torch.Tensor:
    """[B,C,H,W] -> [B,(H/p)(W/p),C p p]."""
    B, C, H, W = x.shape
    if H % p or W % p:
        raise ValueError(f"frame size {H}x{W} must be divisible by the patch size {p}")
    return x.reshape(B, C, H // p, p, W // p, p).permute(0, 2, 4, 1, 3, 5).reshape(B, (H // p) * (W // p), C * p * p)


def unpatchify(x: torch.Tensor, C: int, H: int, W: int, p: int) -> torch.Tensor:
    B = x.shape[0]
    return x.reshape(B, H // p, W // p, C, p, p).permute(0, 3, 1, 4, 2, 5).reshape(B, C, H, W)


class _Decoder(nn.Module):
    """Transformer over [current-frame patches; projected codes]; predicts next-frame patches."""

    def __init__(self, cfg: DynTokConfig, d_in: int, d_out: int, n_patches: int):
        super().__init__()
        d = cfg.d_model
        self.inp = nn.Linear(d_in, d)
        self.zp = nn.Linear(cfg.d_vq, d)
        self.pos = nn.Parameter(torch.randn(n_patches + cfg.n_codes, d) * 0.02)
        self.tr = _enc(d, cfg.heads, cfg.dec_layers)
        self.out = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d_out))

    def forward(self, patches, z):
        h = torch.cat([self.inp(patches), self.zp(z)], 1) + self.pos
        return self.out(self.tr(h)[:, : patches.shape[1]])


class DynamicsTokenizer(nn.Module):
    """encode(o_t, o_t1) -> (idx [B, n_ego + n_env], z [B, n, d_vq]); decode_image(o_t, z);
    decode_bev(bev_t, z); predict_ego_motion(z); loss(...) -> (loss, logs). With
    ``decouple=False``: one query set and one codebook of m_ego + m_env codes (the baseline)."""

    def __init__(self, cfg: DynTokConfig, H: int = 32, W: int = 16):
        super().__init__()
        if H % cfg.patch or W % cfg.patch:
            raise ValueError(f"frame size {H}x{W} must be divisible by the patch size {cfg.patch}")
        self.cfg, self.H, self.W = cfg, H, W
        d, p = cfg.d_model, cfg.patch
        self.n_p = (H // p) * (W // p)
        self.patch_in = nn.Linear(3 * p * p, d)
        self.pos = nn.Parameter(torch.randn(self.n_p, d) * 0.02)
        self.frame_emb = nn.Parameter(torch.randn(2, d) * 0.02)
        self.queries = nn.Parameter(torch.randn(cfg.n_codes, d) * 0.02)
        self.type_emb = nn.Parameter(torch.randn(2, d) * 0.02)
        self.enc = _enc(d, cfg.heads, cfg.enc_layers)
        self.to_vq = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, cfg.d_vq))
        if cfg.decouple:
            self.vq_ego = VectorQuantizer(cfg.m_ego, cfg.d_vq, cfg.beta_commit, cfg.l2_codes)
            self.vq_env = VectorQuantizer(cfg.m_env, cfg.d_vq, cfg.beta_commit, cfg.l2_codes)
        else:
            self.vq = VectorQuantizer(cfg.m_ego + cfg.m_env, cfg.d_vq, cfg.beta_commit, cfg.l2_codes)
        self.dec_img = _Decoder(cfg, 3 * p * p, 3 * p * p, self.n_p) if cfg.use_img else None
        self.dec_bev = _Decoder(cfg, N_BEV * p * p, N_BEV * p * p, self.n_p) if cfg.use_bev else None
        self.act_head = (nn.Sequential(nn.Linear(cfg.n_ego * cfg.d_vq, 64), nn.GELU(), nn.Linear(64, 3))
                         if cfg.act_reg and cfg.decouple else None)

    # -- encoder and quantiser (Eq. 1-2) -------------------------------------------------------
    def embed(self, o_t, o_t1):
        self._check_frames(o_t, "o_t")
        self._check_frames(o_t1, "o_t1")
        p = self.cfg.patch
        xt = self.patch_in(patchify(o_t, p)) + self.pos + self.frame_emb[0]
        xt1 = self.patch_in(patchify(o_t1, p)) + self.pos + self.frame_emb[1]
        tp = torch.cat([self.type_emb[0].expand(self.cfg.n_ego, -1), self.type_emb[1].expand(self.cfg.n_env, -1)])
        q = (self.queries + (tp if self.cfg.decouple else 0)).expand(len(o_t), -1, -1)
        h = self.enc(torch.cat([xt, xt1, q], 1))
        return self.to_vq(h[:, -self.cfg.n_codes:])

    def quantise(self, e):
        c = self.cfg
        if c.decouple:
            if not bool(self.vq_ego.initialised):
                self.vq_ego.init_from(e[:, : c.n_ego])
                self.vq_env.init_from(e[:, c.n_ego:])
            ze, ie, le = self.vq_ego(e[:, : c.n_ego])
            zv, iv, lv = self.vq_env(e[:, c.n_ego:])
            return torch.cat([ze, zv], 1), torch.cat([ie, iv + c.m_ego], 1), le + lv
        if not bool(self.vq.initialised):
            self.vq.init_from(e)
        return self.vq(e)

    def encode(self, o_t, o_t1):
        """Dynamics tokens: idx [B, n] (decoupled: ego codes 0..m_ego-1, env codes offset by m_ego)
        and their code vectors z [B, n, d_VQ]."""
        z, idx, _ = self.quantise(self.embed(o_t, o_t1))
        return idx, z

    def lookup(self, idx):
        """Code vectors of token ids (the inverse of :meth:`encode`'s ids)."""
        c = self.cfg
        if c.decouple:
            ze = self.vq_ego.codes()[idx[:, : c.n_ego]]
            zv = self.vq_env.codes()[(idx[:, c.n_ego:] - c.m_ego).clamp(0, c.m_env - 1)]
            return torch.cat([ze, zv], 1)
        return self.vq.codes()[idx]

    # -- decoders (Eq. 3) and action regularisation ---------------------------------------------
    def decode_image(self, o_t, z):
        p = self.cfg.patch
        xp = patchify(o_t, p)
        return unpatchify(xp + self.dec_img(xp, z), 3, self.H, self.W, p)

    def decode_bev_logits(self, bev_t, z):
        p = self.cfg.patch
        oh = F.one_hot(bev_t.long(), N_BEV).permute(0, 3, 1, 2).float()
        out = self.dec_bev(patchify(oh, p), z)
        return unpatchify(out, N_BEV, self.H, self.W, p)

    def decode_bev(self, bev_t, z):
        return self.decode_bev_logits(bev_t, z).argmax(1)

    def predict_ego_motion(self, z_ego):
        """(dx, dy, dpsi) of the ego between the frames, from the ego codes only."""
        out = self.act_head(z_ego.flatten(1))
        return out * torch.tensor(MOTION_SCALE, device=out.device)

    def _check_frames(self, o, name):
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"{name} must be a tensor [B,3,H,W], got {type(o).__name__}")
        if o.ndim != 4 or o.shape[1] != 3:
            raise ValueError(f"{name} must have shape [B,3,H,W], got {tuple(o.shape)}")
        if o.shape[2] % self.cfg.patch or o.shape[3] % self.cfg.patch:
            raise ValueError(f"{name}: spatial size {tuple(o.shape[2:])} must be divisible by the patch size "
                             f"{self.cfg.patch}")
        if (o.shape[2], o.shape[3]) != (self.H, self.W):
            raise ValueError(f"{name} must be {self.H}x{self.W}, got {tuple(o.shape[2:])}")

    def loss(self, o_t, o_t1, bev_t, bev_t1, motion):
        """Eq. 4: image MSE + image-gradient L1 (the book's stand-in for LPIPS), BEV cross-entropy,
        VQ loss and the ego-motion regression."""
        c = self.cfg
        z, idx, l_vq = self.quantise(self.embed(o_t, o_t1))
        loss = c.w_vq * l_vq
        logs = {"vq": float(l_vq.detach())}
        if c.use_img:
            pred = self.decode_image(o_t, z)
            mse = F.mse_loss(pred, o_t1)
            gl = (F.l1_loss(pred.diff(dim=2), o_t1.diff(dim=2)) + F.l1_loss(pred.diff(dim=3), o_t1.diff(dim=3)))
            loss = loss + mse + c.w_grad * gl
            logs["img_mse"] = float(mse.detach())
        if c.use_bev:
            ce = F.cross_entropy(self.decode_bev_logits(bev_t, z), bev_t1.long())
            loss = loss + c.w_bev * ce
            logs["bev_ce"] = float(ce.detach())
        if self.act_head is not None:
            sc = torch.tensor(MOTION_SCALE, device=z.device)
            la = F.mse_loss(self.act_head(z[:, : c.n_ego].flatten(1)), motion / sc)
            loss = loss + c.w_act * la
            logs["act"] = float(la.detach())
        return loss, logs


def code_usage(idx: torch.Tensor, m: int) -> dict:
    """Active codes (used at least once) and perplexity of token ids ``idx`` in [0, m)."""
    if not isinstance(idx, torch.Tensor) or idx.is_floating_point() or idx.is_complex() or idx.dtype == torch.bool:
        raise TypeError("idx must be an integer tensor of token ids")
    pos_int(m, "m")
    if idx.numel() and (idx.min() < 0 or idx.max() >= m):
        raise ValueError(f"idx must lie in [0, {m})")
    cnt = torch.bincount(idx.flatten().cpu(), minlength=m).double()
    p = cnt / cnt.sum().clamp_min(1)
    ent = -(p[p > 0] * p[p > 0].log()).sum()
    return {"active": int((cnt > 0).sum()), "perplexity": float(ent.exp())}


def usage_of(tok: DynamicsTokenizer, idx: torch.Tensor) -> dict:
    c = tok.cfg
    if c.decouple:
        return {"ego": code_usage(idx[:, : c.n_ego], c.m_ego)["active"],
                "env": code_usage(idx[:, c.n_ego:] - c.m_ego, c.m_env)["active"]}
    return {"all": code_usage(idx, c.m_ego + c.m_env)["active"]}


def train_tokenizer(pairs, cfg: DynTokConfig, steps: int, batch: int = 64, lr: float = 1e-3, seed: int = 0,
                    log_every: int = 100, dev=None, eval_pairs=None):
    """Train on frame pairs ``(o_t, o_t1, bev_t, bev_t1, motion)`` (AdamW, cosine schedule with a
    short warm-up). Returns the model and curves: step, loss, active codes per codebook on
    ``eval_pairs`` (default: the first 512 training pairs)."""
    if not isinstance(cfg, DynTokConfig):
        raise TypeError(f"cfg must be a DynTokConfig, got {type(cfg).__name__}")
    pos_int(steps, "steps")
    pos_int(batch, "batch", 2)
    pos_int(log_every, "log_every")
    pos_int(seed, "seed", 0)
    real(lr, "lr", lo=0.0, strict=True)
    dev = device_arg(dev) or torch.device("cpu")
    torch.manual_seed(seed)
    tok = DynamicsTokenizer(cfg).to(dev)
    pairs = [p.to(dev) for p in pairs]
    ev = [p[:512].to(dev) for p in (eval_pairs or pairs)]
    opt = torch.optim.AdamW(tok.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    gen = torch.Generator().manual_seed(seed)
    n = len(pairs[0])
    curves = {"step": [], "loss": [], "active": []}
    with torch.no_grad():
        tok.quantise(tok.embed(*[p[:batch] for p in pairs[:2]]))  # codebooks initialised from encoder outputs
    for s in tqdm(range(steps), leave=False, desc="tokenizer"):
        bi = torch.randint(0, n, (batch,), generator=gen).to(dev)
        loss, logs = tok.loss(*[p[bi] for p in pairs])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if s % log_every == 0 or s == steps - 1:
            with torch.no_grad():
                idx, _ = tok.encode(ev[0], ev[1])
            curves["step"].append(s + 1)
            curves["loss"].append(float(loss.detach()))
            curves["active"].append(usage_of(tok, idx))
    tok.eval()
    return tok, curves


@torch.no_grad()
def embeddings(tok: DynamicsTokenizer, o_t, o_t1, chunk: int = 1024):
    zs, ids = [], []
    for i in range(0, len(o_t), chunk):
        idx, z = tok.encode(o_t[i:i + chunk], o_t1[i:i + chunk])
        zs.append(z)
        ids.append(idx)
    return torch.cat(ids), torch.cat(zs)


def ridge_r2(X: torch.Tensor, Y: torch.Tensor, lam: float = 1e-3, frac: float = 0.5) -> float:
    """Held-out R^2 of a ridge linear probe (standardised targets, averaged over target dims)."""
    X, Y = X.double().cpu(), Y.double().cpu()
    n = len(X)
    k = int(n * frac)
    mu, sd = X[:k].mean(0), X[:k].std(0).clamp_min(1e-6)
    Xs = torch.cat([(X - mu) / sd, torch.ones(n, 1, dtype=X.dtype)], 1)
    ym, ys = Y[:k].mean(0), Y[:k].std(0).clamp_min(1e-9)
    Ys = (Y - ym) / ys
    A = Xs[:k].t() @ Xs[:k] + lam * k * torch.eye(Xs.shape[1], dtype=X.dtype)
    W = torch.linalg.solve(A, Xs[:k].t() @ Ys[:k])
    res = Ys[k:] - Xs[k:] @ W
    r2 = 1 - res.pow(2).sum(0) / (Ys[k:] - Ys[k:].mean(0)).pow(2).sum(0).clamp_min(1e-12)
    return float(r2.mean())


def probe_ego_motion(tok: DynamicsTokenizer, pairs) -> dict:
    """Linear-probe R^2 of the ego motion (dx, dy, dpsi) from the ego-code embeddings, the
    env-code embeddings and all codes (first n_ego / last n_env slots for the coupled model)."""
    o_t, o_t1, _, _, motion = pairs
    _, z = embeddings(tok, o_t, o_t1)
    c = tok.cfg
    return {"ego": ridge_r2(z[:, : c.n_ego].flatten(1), motion), "env": ridge_r2(z[:, c.n_ego:].flatten(1), motion),
            "all": ridge_r2(z.flatten(1), motion)}


@torch.no_grad()
def transfer_decode(tok: DynamicsTokenizer, pairs, i_src: int, j_dst: int, part: str = "ego") -> np.ndarray:
    """Decode scene ``j_dst``'s next BEV from its current BEV with ``part`` ("ego", "env" or "both")
    of the tokens taken from pair ``i_src`` (the paper's Fig. 4 transfer)."""
    if part not in ("ego", "env", "both"):
        raise ValueError(f"part must be 'ego', 'env' or 'both', got {part!r}")
    o_t, o_t1, bev_t, _, _ = pairs
    n = len(o_t)
    for name, v in (("i_src", i_src), ("j_dst", j_dst)):
        if not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise ValueError(f"{name} must be an index in [0, {n}), got {v!r}")
    _, z = tok.encode(torch.stack([o_t[i_src], o_t[j_dst]]), torch.stack([o_t1[i_src], o_t1[j_dst]]))
    c = tok.cfg
    zz = z[1:].clone()
    if part in ("ego", "both"):
        zz[:, : c.n_ego] = z[:1, : c.n_ego]
    if part in ("env", "both"):
        zz[:, c.n_ego:] = z[:1, c.n_ego:]
    return tok.decode_bev(bev_t[j_dst:j_dst + 1], zz)[0].cpu().numpy()
