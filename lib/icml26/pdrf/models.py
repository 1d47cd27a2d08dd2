"""Networks: a plain conditional U-Net (book stand-in for MFC-RFNet, spec Sec. 3.5/7.3) and the NB1 MLP."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ._checks import check_int


def time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal features of flow time t in [0, 1] (the book feeds t, not the official 1000(1 - t))."""
    half = dim // 2
    freqs = torch.exp(-math.log(1000.0) * torch.arange(half, device=t.device, dtype=t.dtype) / max(half - 1, 1))
    a = 1000.0 * t[:, None] * freqs[None]
    return torch.cat([torch.sin(a), torch.cos(a)], -1)


class ResBlock(nn.Module):
    def __init__(self, c_in, c_out, emb_dim):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(min(8, c_in), c_in), nn.Conv2d(c_in, c_out, 3, padding=1)
        self.n2, self.c2 = nn.GroupNorm(min(8, c_out), c_out), nn.Conv2d(c_out, c_out, 3, padding=1)
        self.emb = nn.Linear(emb_dim, c_out)
        self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x, e):
        h = self.c1(F.silu(self.n1(x))) + self.emb(e)[:, :, None, None]
        return self.skip(x) + self.c2(F.silu(self.n2(h)))


class CondUNet(nn.Module):
    """Conditional U-Net: input concat(Z_t, C) (t_out + t_in channels), output t_out channels.

    One residual block per level down and up, one middle block, GroupNorm + SiLU, time embedding as
    a per-channel bias in every block, concatenation skips, last conv initialised near zero (gain
    1e-5, as the official network). ``noise_input=False`` gives the deterministic baseline
    (input C only, ``forward(None, None, cond)``). ``patch > 1`` folds each ``patch x patch``
    block of pixels into channels before the first conv and unfolds the output (pixel
    (un)shuffle): the U-Net then runs on a grid ``patch`` times coarser, about ``patch**2`` times
    cheaper at the same width (a book choice for the CPU budget).
    """

    def __init__(self, t_in: int, t_out: int, base: int = 16, mults: tuple = (1, 2, 2), emb_dim: int = 64,
                 noise_input: bool = True, patch: int = 1):
        super().__init__()
        for name, v in (("t_in", t_in), ("t_out", t_out), ("base", base), ("emb_dim", emb_dim), ("patch", patch)):
            check_int(name, v)
        if t_in < 2:
            raise ValueError(f"t_in must be >= 2, got {t_in}")
        if not mults or any((not isinstance(mm, int)) or mm < 1 for mm in mults):
            raise ValueError(f"mults must be a non-empty tuple of positive ints, got {mults!r}")
        self.t_in, self.t_out, self.noise_input, self.emb_dim, self.patch = t_in, t_out, noise_input, emb_dim, patch
        self.factor = patch * 2 ** (len(mults) - 1)
        chans = [base * mm for mm in mults]
        self.inp = nn.Conv2d((t_in + (t_out if noise_input else 0)) * patch ** 2, chans[0], 3, padding=1)
        self.temb = nn.Sequential(nn.Linear(emb_dim, emb_dim), nn.SiLU(), nn.Linear(emb_dim, emb_dim))
        self.down = nn.ModuleList()
        c = chans[0]
        for ch in chans:
            self.down.append(ResBlock(c, ch, emb_dim))
            c = ch
        self.mid = ResBlock(c, c, emb_dim)
        self.up = nn.ModuleList()
        for ch in reversed(chans):
            self.up.append(ResBlock(c + ch, ch, emb_dim))
            c = ch
        self.out_norm = nn.GroupNorm(min(8, c), c)
        self.out = nn.Conv2d(c, t_out * patch ** 2, 3, padding=1)
        nn.init.xavier_uniform_(self.out.weight, gain=1e-5)
        nn.init.zeros_(self.out.bias)

    def forward(self, z: torch.Tensor | None, t: torch.Tensor | None, cond: torch.Tensor) -> torch.Tensor:
        if not isinstance(cond, torch.Tensor) or cond.dim() != 4:
            raise ValueError(f"cond must be a (B, t_in, H, W) tensor, got {getattr(cond, 'shape', cond)!r}")
        B, Tc, H, W = cond.shape
        if Tc != self.t_in:
            raise ValueError(f"cond must have t_in={self.t_in} frames, got {Tc}")
        if H % self.factor or W % self.factor:
            raise ValueError(f"H and W must be divisible by {self.factor} (patch * 2**(len(mults)-1)), got {H}x{W}")
        if self.noise_input:
            if not isinstance(z, torch.Tensor) or z.shape != (B, self.t_out, H, W):
                raise ValueError(f"z must have shape {(B, self.t_out, H, W)}, got {getattr(z, 'shape', z)!r}")
            if not isinstance(t, torch.Tensor):
                t = torch.full((B,), float(t), device=cond.device, dtype=cond.dtype)
            t = t.reshape(-1).expand(B) if t.numel() == 1 else t.reshape(B)
            x = torch.cat([z, cond], 1)
        else:
            t = torch.zeros(B, device=cond.device, dtype=cond.dtype)
            x = cond
        e = self.temb(time_embedding(t.to(cond.dtype), self.emb_dim))
        h = self.inp(F.pixel_unshuffle(x, self.patch) if self.patch > 1 else x)
        skips = []
        for i, blk in enumerate(self.down):
            h = blk(h, e)
            skips.append(h)
            if i < len(self.down) - 1:
                h = F.avg_pool2d(h, 2)
        h = self.mid(h, e)
        for blk in self.up:
            s = skips.pop()
            if h.shape[-1] != s.shape[-1]:
                h = F.interpolate(h, scale_factor=2, mode="nearest")
            h = blk(torch.cat([h, s], 1), e)
        out = self.out(F.silu(self.out_norm(h)))
        return F.pixel_shuffle(out, self.patch) if self.patch > 1 else out


class ToyMLP(nn.Module):
    """NB1 predictor: MLP ``depth`` x ``hidden`` with SiLU on [z, sinusoidal features of t]."""

    def __init__(self, dim: int, hidden: int = 256, depth: int = 3, n_freqs: int = 8):
        super().__init__()
        for name, v in (("dim", dim), ("hidden", hidden), ("depth", depth), ("n_freqs", n_freqs)):
            check_int(name, v)
        self.register_buffer("freqs", math.pi * 2.0 ** torch.arange(n_freqs, dtype=torch.float32) / 2)
        layers, c = [], dim + 2 * n_freqs
        for _ in range(depth):
            layers += [nn.Linear(c, hidden), nn.SiLU()]
            c = hidden
        layers.append(nn.Linear(c, dim))
        self.net = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor, t: torch.Tensor, cond=None) -> torch.Tensor:
        t = t.reshape(-1, 1).expand(z.shape[0], 1) if isinstance(t, torch.Tensor) else \
            torch.full((z.shape[0], 1), float(t), device=z.device, dtype=z.dtype)
        a = t * self.freqs
        return self.net(torch.cat([z, torch.sin(a), torch.cos(a)], -1))
