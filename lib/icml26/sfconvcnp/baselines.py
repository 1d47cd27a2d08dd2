"""Baselines of the paper (spec Sec. 3.9): CNP, ConvCNP (SetConv + CNN on a grid) and a
translation-equivariant attention NP (TE-TNP style). All return ``torch.distributions.Normal``; like
:class:`~icml26.sfconvcnp.method.SFConvCNP`, ``forward(..., validate=False)`` (the training loss) skips
the checks that read the device."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .method import _mlp, _module_dtype, _positive_float, _positive_int, check_task_inputs

__all__ = ["CNP", "ConvCNP", "SetConv", "TEAttentionNP", "TEAttentionLayer", "n_params"]


def n_params(model: nn.Module) -> int:
    """Number of real parameters (a complex weight counts twice; SFConv stores them as real pairs)."""
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in model.parameters())


def _normal(out: torch.Tensor, y_dim: int, min_noise: float, validate: bool = True) -> torch.distributions.Normal:
    mu, s = out.split(y_dim, -1)
    return torch.distributions.Normal(mu, F.softplus(s) + min_noise, validate_args=None if validate else False)


class CNP(nn.Module):
    """Conditional neural process (Garnelo et al., 2018): ``r = mean_n MLP([x_n, y_n])``,
    ``(mu, sigma)(x) = MLP([r, x])``. Not translation equivariant (it sees absolute positions)."""

    def __init__(self, dim: int = 1, y_dim: int = 1, hidden: int = 128, min_noise: float = 1e-6):
        super().__init__()
        self.dim, self.y_dim = _positive_int("dim", dim), _positive_int("y_dim", y_dim)
        hidden = _positive_int("hidden", hidden)
        self.min_noise = _positive_float("min_noise", min_noise)
        self.encoder = _mlp(dim + y_dim, hidden, hidden)
        self.decoder = _mlp(hidden + dim, hidden, 2 * y_dim)

    def forward(self, xc, yc, xq, validate: bool = True) -> torch.distributions.Normal:
        xc, yc, xq = check_task_inputs(xc, yc, xq, self.dim, self.y_dim, _module_dtype(self), finite=validate)
        r = self.encoder(torch.cat([xc, yc], -1)).mean(1, keepdim=True)
        out = self.decoder(torch.cat([r.expand(-1, xq.shape[1], -1), xq], -1))
        return _normal(out, self.y_dim, self.min_noise, validate)


class SetConv(nn.Module):
    """Gaussian SetConv ``E(D)(t) = sum_n [1, z_n] psi(t - x_n)`` (ConvDeepSet, Gordon et al. 2020)
    with one learnable lengthscale; ``divide_by_density`` normalises the data channels by the
    density channel (the ConvCNP encoder); ``density=False`` returns the data channels only (the
    ConvCNP decoder, grid -> queries)."""

    def __init__(self, dim: int = 1, channels: int = 1, init_lengthscale: float = 0.1,
                 divide_by_density: bool = True):
        super().__init__()
        self.dim, self.channels = _positive_int("dim", dim), _positive_int("channels", channels)
        init = _positive_float("init_lengthscale", init_lengthscale)
        self.raw = nn.Parameter(torch.tensor(math.log(math.expm1(init))))
        self.divide_by_density = divide_by_density

    def lengthscale(self) -> torch.Tensor:
        return F.softplus(self.raw) + 1e-5

    def forward(self, x_in, z_in, x_out, density: bool = True) -> torch.Tensor:
        """``z_in [B, N, C]`` at ``x_in [B, N, D]`` -> ``[B, T, C (+1)]`` at ``x_out [B, T, D]``."""
        d2 = (x_out.unsqueeze(2) - x_in.unsqueeze(1)).pow(2).sum(-1)          # [B, T, N]
        w = torch.exp(-0.5 * d2 / self.lengthscale() ** 2)
        dat = w @ z_in
        if not density:
            return dat
        den = w.sum(-1, keepdim=True)
        if self.divide_by_density:
            dat = dat / (den + 1e-8)
        return torch.cat([den, dat], -1)


class ConvCNP(nn.Module):
    """ConvCNP (Gordon et al., 2020) with a plain CNN: SetConv encoder onto a uniform grid
    (``points_per_unit``), ``n_layers`` Conv1d layers of width ``kernel_size``, SetConv decoder to
    the queries, a linear head. ``grid='data'``: the grid starts at the batch's smallest input minus
    ``margin`` (translation equivariant up to rounding); ``grid='fixed'``: a fixed grid over
    ``fixed_range`` (not equivariant; inputs outside the range raise). 1-D only."""

    def __init__(self, dim: int = 1, y_dim: int = 1, points_per_unit: int = 32, channels: int = 64,
                 kernel_size: int = 11, n_layers: int = 6, margin: float = 0.1, grid: str = "data",
                 fixed_range=None, min_noise: float = 1e-6):
        super().__init__()
        if dim != 1:
            raise ValueError(f"dim: the book's ConvCNP is 1-D, got {dim!r}")
        self.dim, self.y_dim = 1, _positive_int("y_dim", y_dim)
        self.ppu = _positive_int("points_per_unit", points_per_unit)
        channels = _positive_int("channels", channels)
        kernel_size = _positive_int("kernel_size", kernel_size)
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd, got {kernel_size}")
        self.n_layers = _positive_int("n_layers", n_layers)
        self.margin = float(margin)
        if grid not in ("data", "fixed"):
            raise ValueError(f"grid must be 'data' or 'fixed', got {grid!r}")
        if grid == "fixed":
            if fixed_range is None or len(fixed_range) != 2 or not fixed_range[0] < fixed_range[1]:
                raise ValueError(f"fixed_range must be a pair (low, high) for grid='fixed', got {fixed_range!r}")
        self.grid, self.fixed_range = grid, fixed_range
        self.min_noise = _positive_float("min_noise", min_noise)
        self.encoder = SetConv(1, 1, 2.0 / points_per_unit, divide_by_density=True)
        layers = [nn.Linear(1 + y_dim, channels)]
        self.inp = layers[0]
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, kernel_size, padding=kernel_size // 2)
                                   for _ in range(n_layers))
        self.decoder = SetConv(1, channels, 2.0 / points_per_unit, divide_by_density=False)
        self.head = nn.Linear(channels, 2 * y_dim)
        self.receptive_halfwidth = n_layers * (kernel_size - 1) / 2 / points_per_unit

    def make_grid(self, xc, xq) -> torch.Tensor:
        """Grid ``[1, G, 1]`` shared by the batch."""
        if self.grid == "fixed":
            lo, hi = self.fixed_range
            allx = torch.cat([xc, xq], 1)
            if bool((allx < lo).any() or (allx > hi).any()):
                raise ValueError(f"xc: inputs must lie in fixed_range {self.fixed_range} for grid='fixed'")
            n = int(math.ceil((hi - lo) * self.ppu)) + 1
            return (lo + torch.arange(n, dtype=xc.dtype, device=xc.device) / self.ppu).view(1, -1, 1)
        allx = torch.cat([xc, xq], 1)
        lo = allx.min() - self.margin
        hi = allx.max() + self.margin
        n = int(math.ceil(float(hi - lo) * self.ppu)) + 1
        return (lo + torch.arange(n, dtype=xc.dtype, device=xc.device) / self.ppu).view(1, -1, 1)

    def forward(self, xc, yc, xq, validate: bool = True) -> torch.distributions.Normal:
        xc, yc, xq = check_task_inputs(xc, yc, xq, self.dim, self.y_dim, _module_dtype(self), finite=validate)
        grid = self.make_grid(xc, xq).expand(xc.shape[0], -1, -1)
        h = self.inp(self.encoder(xc, yc, grid))                              # [B, G, C]
        h = h.transpose(1, 2)
        for i, conv in enumerate(self.convs):
            h = conv(h)
            if i < self.n_layers - 1:
                h = F.relu(h)
        h = self.decoder(grid, h.transpose(1, 2), xq, density=False)          # [B, M, C]
        return _normal(self.head(F.relu(h)), self.y_dim, self.min_noise, validate)


class TEAttentionLayer(nn.Module):
    """Translation-equivariant multi-head attention (TE-TNP style): the logit of query ``i`` and key
    ``j`` is ``MLP([q_i.k_j / sqrt(d_h) for each head, x_i - x_j])``, so positions enter only through
    differences. Cost ``O(M N)`` pairs per layer."""

    def __init__(self, dim: int = 1, embed_dim: int = 64, n_heads: int = 4, pair_hidden: int = 16):
        super().__init__()
        if embed_dim % n_heads:
            raise ValueError(f"n_heads must divide embed_dim ({embed_dim}), got {n_heads}")
        self.h, self.dh = n_heads, embed_dim // n_heads
        self.q, self.k, self.v = (nn.Linear(embed_dim, embed_dim) for _ in range(3))
        self.pair = nn.Sequential(nn.Linear(n_heads + dim, pair_hidden), nn.ReLU(), nn.Linear(pair_hidden, n_heads))
        self.out = nn.Linear(embed_dim, embed_dim)
        self.ln1, self.ln2 = nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim)
        self.ffn = nn.Sequential(nn.Linear(embed_dim, 2 * embed_dim), nn.GELU(), nn.Linear(2 * embed_dim, embed_dim))

    def forward(self, z_q, z_kv, x_q, x_kv):
        b, m, _ = z_q.shape
        n = z_kv.shape[1]
        zn = self.ln1(z_kv)
        q = self.q(self.ln1(z_q)).view(b, m, self.h, self.dh)
        k = self.k(zn).view(b, n, self.h, self.dh)
        v = self.v(zn).view(b, n, self.h, self.dh)
        dots = torch.einsum("bmhd,bnhd->bmnh", q, k) / math.sqrt(self.dh)
        diff = x_q.unsqueeze(2) - x_kv.unsqueeze(1)                           # [B, M, N, D]
        logits = self.pair(torch.cat([dots, diff], -1))                      # [B, M, N, H]
        att = logits.softmax(2)
        z_q = z_q + self.out(torch.einsum("bmnh,bnhd->bmhd", att, v).reshape(b, m, -1))
        return z_q + self.ffn(self.ln2(z_q))


class TEAttentionNP(nn.Module):
    """A translation-equivariant attention NP: tokens ``MLP([y, 0])`` / ``MLP([0, 1])`` as in
    SFConvCNP, ``n_layers`` of context self-attention then query-to-context cross-attention."""

    def __init__(self, dim: int = 1, y_dim: int = 1, embed_dim: int = 64, n_heads: int = 4, n_layers: int = 2,
                 pair_hidden: int = 16, min_noise: float = 1e-6):
        super().__init__()
        self.dim, self.y_dim = _positive_int("dim", dim), _positive_int("y_dim", y_dim)
        n_layers = _positive_int("n_layers", n_layers)
        self.min_noise = _positive_float("min_noise", min_noise)
        self.encoder = _mlp(y_dim + 1, embed_dim, embed_dim)
        self.ctx = nn.ModuleList(TEAttentionLayer(dim, embed_dim, n_heads, pair_hidden) for _ in range(n_layers))
        self.qry = nn.ModuleList(TEAttentionLayer(dim, embed_dim, n_heads, pair_hidden) for _ in range(n_layers))
        self.decoder = _mlp(embed_dim, embed_dim, 2 * y_dim)

    def forward(self, xc, yc, xq, validate: bool = True) -> torch.distributions.Normal:
        xc, yc, xq = check_task_inputs(xc, yc, xq, self.dim, self.y_dim, _module_dtype(self), finite=validate)
        b, m = xq.shape[:2]
        zc = self.encoder(torch.cat([yc, torch.zeros_like(yc[..., :1])], -1))
        zq = self.encoder(torch.cat([torch.zeros(b, m, self.y_dim, dtype=yc.dtype, device=yc.device),
                                     torch.ones(b, m, 1, dtype=yc.dtype, device=yc.device)], -1))
        for c, q in zip(self.ctx, self.qry, strict=True):
            zc = c(zc, zc, xc, xc)
            zq = q(zq, zc, xq, xc)
        return _normal(self.decoder(zq), self.y_dim, self.min_noise, validate)
