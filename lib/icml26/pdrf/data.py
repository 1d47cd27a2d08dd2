"""A seeded synthetic radar world with known motion (spec Sec. 7.1) and the NB1 toy manifold.

Echoes are anisotropic Gaussian convective cells plus a stratiform background, carried by a
constant, affine, divergence-free motion field; cells grow, decay and are born at random (the
part advection cannot forecast). Everything is vectorised over sequences and cell slots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch

from ._checks import check_device, check_generator, check_int, check_real

THRESHOLDS = (0.10, 0.25, 0.40, 0.55)
"""Verification thresholds on [0, 1] frames: light, moderate, heavy, intense."""


def _range(name, r, lo=None, hi=None, positive=False):
    if not (isinstance(r, tuple | list) and len(r) == 2):
        raise TypeError(f"{name} must be a (min, max) pair, got {r!r}")
    a, b = (float(v) for v in r)
    if not (math.isfinite(a) and math.isfinite(b)) or a > b:
        raise ValueError(f"{name} must be a finite range with min <= max, got {r!r}")
    if positive and a <= 0:
        raise ValueError(f"{name} must be positive, got {r!r}")
    if (lo is not None and a < lo) or (hi is not None and b > hi):
        raise ValueError(f"{name} must lie in [{lo}, {hi}], got {r!r}")


@dataclass(frozen=True)
class RadarConfig:
    """Grid, sequence lengths and every range of the generator (spec Sec. 7.1)."""

    H: int = 32
    W: int = 32
    t_in: int = 4
    t_out: int = 8
    margin: int = 8
    k_max: int = 8
    n_cells: tuple = (3, 6)
    sigma_range: tuple = (1.5, 4.0)
    aspect_range: tuple = (0.5, 1.0)
    amp_range: tuple = (0.25, 0.9)
    growth_range: tuple = (-0.15, 0.15)
    birth_prob: float = 0.04
    birth_amp: float = 0.15
    birth_growth_range: tuple = (0.05, 0.2)
    speed_range: tuple = (0.4, 1.2)
    omega_range: tuple = (-0.03, 0.03)
    strain_range: tuple = (-0.02, 0.02)
    bg_amp_range: tuple = (0.1, 0.3)
    bg_sigma: float = 4.0
    bg_decay: float = 0.99

    def __post_init__(self):
        for name in ("H", "W", "t_in", "t_out", "k_max"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{name} must be an int, got {v!r}")
        if self.H < 8 or self.W < 8:
            raise ValueError(f"H and W must be >= 8, got {self.H}x{self.W}")
        if self.t_in < 2:
            raise ValueError(f"t_in must be >= 2 (motion needs two frames), got {self.t_in}")
        if self.t_out < 1:
            raise ValueError(f"t_out must be >= 1, got {self.t_out}")
        if not isinstance(self.margin, int) or self.margin < 0:
            raise ValueError(f"margin must be a non-negative int, got {self.margin!r}")
        _range("n_cells", self.n_cells, lo=0)
        if self.k_max < self.n_cells[1]:
            raise ValueError(f"k_max must be >= the largest initial cell count {self.n_cells[1]}, got {self.k_max}")
        _range("sigma_range", self.sigma_range, positive=True)
        _range("aspect_range", self.aspect_range, positive=True, hi=1.0)
        _range("amp_range", self.amp_range, lo=0.0, hi=1.0)
        _range("growth_range", self.growth_range, lo=-1.0, hi=1.0)
        _range("birth_growth_range", self.birth_growth_range, lo=-1.0, hi=1.0)
        _range("speed_range", self.speed_range, lo=0.0)
        _range("omega_range", self.omega_range)
        _range("strain_range", self.strain_range)
        _range("bg_amp_range", self.bg_amp_range, lo=0.0, hi=1.0)
        for name in ("birth_prob", "birth_amp", "bg_decay"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not (0.0 <= float(v) <= 1.0):
                raise ValueError(f"{name} must be a probability/fraction in [0, 1], got {v!r}")
        if not isinstance(self.bg_sigma, int | float) or not (self.bg_sigma > 0 and math.isfinite(self.bg_sigma)):
            raise ValueError(f"bg_sigma must be positive, got {self.bg_sigma!r}")

    @property
    def t_total(self) -> int:
        return self.t_in + self.t_out

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _u(gen, shape, r, device):
    return r[0] + (r[1] - r[0]) * torch.rand(shape, generator=gen, device=device)


def _gaussian_filter_fft(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Periodic Gaussian filter of ``x`` (..., H, W) by FFT."""
    h, w = x.shape[-2:]
    fy = torch.fft.fftfreq(h, device=x.device).view(-1, 1)
    fx = torch.fft.fftfreq(w, device=x.device).view(1, -1)
    kern = torch.exp(-2 * (math.pi * sigma) ** 2 * (fx**2 + fy**2))
    return torch.fft.ifft2(torch.fft.fft2(x) * kern).real


def affine_motion(n, cfg: RadarConfig, gen, device):
    """Per-sequence motion parameters: u(p) = u0 + A (p - c), trace(A) = 0 (divergence-free)."""
    s = _u(gen, (n,), cfg.speed_range, device)
    th = 2 * math.pi * torch.rand(n, generator=gen, device=device)
    u0 = torch.stack([s * torch.cos(th), s * torch.sin(th)], -1)                    # (n, 2) = (u_x, u_y)
    om = _u(gen, (n,), cfg.omega_range, device)
    ga = _u(gen, (n,), cfg.strain_range, device)
    A = torch.stack([torch.stack([ga, -om], -1), torch.stack([om, -ga], -1)], -2)   # (n, 2, 2)
    return u0, A


def motion_field(u0, A, H, W, offset=0.0, centre=None):
    """The affine field on an H x W pixel grid, (n, 2, H, W), channel 0 = x (column), 1 = y (row)."""
    dev = u0.device
    ys, xs = torch.meshgrid(torch.arange(H, device=dev, dtype=u0.dtype) + offset,
                            torch.arange(W, device=dev, dtype=u0.dtype) + offset, indexing="ij")
    c = centre if centre is not None else ((W - 1) / 2 + offset, (H - 1) / 2 + offset)
    d = torch.stack([xs - c[0], ys - c[1]])                                          # (2, H, W)
    return u0[:, :, None, None] + torch.einsum("nij,jhw->nihw", A, d)


def generate_radar(n: int, cfg: RadarConfig | None = None, generator: torch.Generator | None = None,
                   device=None, return_motion: bool = False):
    """``n`` sequences of ``cfg.t_in + cfg.t_out`` frames (n, T, H, W) in [0, 1] (spec Sec. 7.1).

    With ``return_motion`` also the true motion (n, 2, H, W) on the crop grid (pixels per frame,
    forward in time: X_k(p) ~ X_{k-1}(p - u(p))).
    """
    from .physics import semi_lagrangian

    check_int("n", n)
    cfg = RadarConfig() if cfg is None else cfg
    if not isinstance(cfg, RadarConfig):
        raise TypeError(f"cfg must be a RadarConfig, got {type(cfg).__name__}")
    device = check_device(device, "device") or torch.device("cpu")
    gen = check_generator(generator, "generator")
    gen = gen if gen is not None else torch.Generator(device="cpu").manual_seed(0)
    gdev = gen.device
    m, K, T = cfg.margin, cfg.k_max, cfg.t_total
    Hp, Wp = cfg.H + 2 * m, cfg.W + 2 * m
    cen = ((Wp - 1) / 2, (Hp - 1) / 2)

    def u(shape, r):
        return _u(gen, shape, r, gdev)

    u0, A = affine_motion(n, cfg, gen, gdev)
    # cells: centres on the padded domain (padded coordinates), covariance, amplitude, growth
    count = torch.randint(cfg.n_cells[0], cfg.n_cells[1] + 1, (n, 1), generator=gen, device=gdev)
    active = torch.arange(K, device=gdev).view(1, K) < count
    pos = torch.stack([u((n, K), (0, Wp - 1)), u((n, K), (0, Hp - 1))], -1)

    def new_cov(shape):
        sa = u(shape, cfg.sigma_range)
        sb = sa * u(shape, cfg.aspect_range)
        phi = math.pi * torch.rand(shape, generator=gen, device=gdev)
        c, s = torch.cos(phi), torch.sin(phi)
        R = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)
        D = torch.diag_embed(torch.stack([sa**2, sb**2], -1))
        return R @ D @ R.transpose(-1, -2)

    cov = new_cov((n, K))
    amp = u((n, K), cfg.amp_range) * active
    rate = u((n, K), cfg.growth_range)
    # background on the padded grid, advected by the trajectory scheme and decayed
    G = _gaussian_filter_fft(torch.randn(n, Hp, Wp, generator=gen, device=gdev), cfg.bg_sigma)
    G = (G - G.mean((-1, -2), keepdim=True)) / G.std((-1, -2), keepdim=True).clamp_min(1e-8)
    Bz = torch.relu(G - 0.5)
    B0 = u((n, 1, 1), cfg.bg_amp_range) * Bz / Bz.amax((-1, -2), keepdim=True).clamp_min(1e-8)
    field_pad = motion_field(u0, A, Hp, Wp, centre=cen)
    bg = torch.cat([B0[:, None], semi_lagrangian(B0, field_pad, T - 1, scheme="trajectory")], 1)
    bg = bg * cfg.bg_decay ** torch.arange(T, device=gdev, dtype=bg.dtype).view(1, T, 1, 1)
    bg = bg[:, :, m:m + cfg.H, m:m + cfg.W]
    M = torch.eye(2, device=gdev) + A + 0.5 * A @ A                                  # (n, 2, 2)
    ys, xs = torch.meshgrid(torch.arange(cfg.H, device=gdev, dtype=torch.float32) + m,
                            torch.arange(cfg.W, device=gdev, dtype=torch.float32) + m, indexing="ij")
    grid = torch.stack([xs, ys], -1)                                                # (H, W, 2) padded coords
    c_t = torch.tensor(cen, device=gdev)

    def vel(p):                                                                     # p: (n, K, 2)
        return u0[:, None] + torch.einsum("nij,nkj->nki", A, p - c_t)

    frames = []
    for k in range(T):
        d = grid[None, None] - pos[:, :, None, None, :]                             # (n, K, H, W, 2)
        P = torch.linalg.inv(cov)                                                   # (n, K, 2, 2)
        q = torch.einsum("nkhwi,nkij,nkhwj->nkhw", d, P, d)
        cells = (amp[:, :, None, None] * torch.exp(-0.5 * q)).sum(1)
        frames.append((bg[:, k] + cells).clamp(0, 1))
        if k == T - 1:
            break
        pos = pos + vel(pos + 0.5 * vel(pos))
        cov = M[:, None] @ cov @ M[:, None].transpose(-1, -2)
        amp = torch.where(rate > 0, amp + rate * amp * (1 - amp), amp * (1 + rate))
        active = active & (amp >= 0.05)
        born = (~active) & (torch.rand((n, K), generator=gen, device=gdev) < cfg.birth_prob)
        pos = torch.where(born[..., None], torch.stack([u((n, K), (0, Wp - 1)), u((n, K), (0, Hp - 1))], -1), pos)
        cov = torch.where(born[..., None, None], new_cov((n, K)), cov)
        rate = torch.where(born, u((n, K), cfg.birth_growth_range), rate)
        active = active | born
        amp = torch.where(born, torch.full_like(amp, cfg.birth_amp), amp) * active
    out = torch.stack(frames, 1).to(device)
    if return_motion:
        mot = motion_field(u0, A, cfg.H, cfg.W, offset=float(m), centre=cen).to(device)
        return out, mot
    return out


def make_splits(cfg: RadarConfig, n_train: int, n_test: int, seed: int = 0, device=None) -> dict:
    """Fixed train and test sets from disjoint seeds (train: ``2*seed``, test: ``2*seed + 1``)."""
    for name, v in (("n_train", n_train), ("n_test", n_test)):
        check_int(name, v)
    check_int("seed", seed, 0)
    check_device(device, "device")
    out = {}
    for split, nn, s in (("train", n_train, 2 * seed + 1000), ("test", n_test, 2 * seed + 1001)):
        x, mot = generate_radar(nn, cfg, torch.Generator().manual_seed(s), device=device, return_motion=True)
        out[split], out[f"{split}_motion"] = x, mot
    return out


def embedded_ring(n: int, dim: int = 64, n_modes: int = 8, radius: float = 2.0, std: float = 0.15,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """NB1 toy: a ring of ``n_modes`` Gaussians in 2-D embedded in ``dim`` dimensions by a fixed
    random orthonormal P (dim, 2). Returns (samples (n, dim), P)."""
    check_int("n", n)
    check_int("dim", dim, 2)
    check_int("n_modes", n_modes)
    check_real("radius", radius, lo=0.0)
    check_real("std", std, lo=0.0)
    g = check_generator(generator, "generator")
    g = g if g is not None else torch.Generator().manual_seed(0)
    P, _ = torch.linalg.qr(torch.randn(dim, 2, generator=torch.Generator().manual_seed(1234)))
    k = torch.randint(0, n_modes, (n,), generator=g)
    ang = 2 * math.pi * k / n_modes
    y = radius * torch.stack([torch.cos(ang), torch.sin(ang)], -1) + std * torch.randn(n, 2, generator=g)
    return y @ P.T, P
