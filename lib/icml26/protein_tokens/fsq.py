"""Finite scalar quantisation (FSQ, Mentzer et al. 2024) as used by APT (spec Sec. 3.2).

Each of ``m`` dimensions is squashed into a bounded interval and rounded to one of ``l_j`` levels;
the implicit codebook is the product grid with ``prod_j l_j`` codes. No codebook is learned, so it
cannot "die" as a VQ codebook can, but the encoder can still collapse onto few codes (the monitor
:func:`code_usage`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn


def round_ste(z: Tensor) -> Tensor:
    """Round with a straight-through gradient."""
    return z + (z.round() - z).detach()


class FSQ(nn.Module):
    """FSQ bottleneck: ``project_in`` (LayerNorm + Linear, initialised x0.1), bound, round, ``project_out``.

    ``bound(z) = tanh(z + shift) * half - offset`` with ``half = (l-1)(1-eps)/2``, ``offset = 0.5`` for
    even ``l``, ``shift = tan(offset/half)`` (spec Sec. 3.2); codes are ``round_ste(bound(z)) / (l // 2)``,
    so each dimension lies on a finite grid inside [-1, 1].
    """

    def __init__(self, levels: Sequence[int], dim: int, eps: float = 1e-3):
        super().__init__()
        levels = tuple(levels) if isinstance(levels, (list, tuple)) else levels
        if not isinstance(levels, tuple) or len(levels) == 0:
            raise ValueError(f"levels must be a non-empty sequence of ints, got {levels!r}")
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 2 for v in levels):
            raise ValueError(f"levels must all be ints >= 2, got {levels!r}")
        if math.prod(levels) > 2**31:
            raise ValueError(f"levels give a codebook of {math.prod(levels)} codes, more than 2^31")
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        self.levels = levels
        lv = torch.tensor(levels, dtype=torch.float32)
        self.register_buffer("_levels", lv, persistent=False)
        basis = torch.cumprod(torch.tensor([1, *levels[:-1]], dtype=torch.long), 0)
        self.register_buffer("_basis", basis, persistent=False)
        self.eps = eps
        self.norm = nn.LayerNorm(dim)
        self.project_in = nn.Linear(dim, len(levels))
        with torch.no_grad():
            self.project_in.weight.mul_(0.1)
            self.project_in.bias.zero_()
        self.project_out = nn.Linear(len(levels), dim)

    @property
    def codebook_size(self) -> int:
        return int(math.prod(self.levels))

    @property
    def half_width(self) -> Tensor:
        return (self._levels // 2)

    def bound(self, z: Tensor) -> Tensor:
        half = (self._levels - 1) * (1 - self.eps) / 2
        offset = torch.where(self._levels % 2 == 0, 0.5, 0.0)
        shift = torch.tan(offset / half)
        return torch.tanh(z + shift) * half - offset

    def quantize(self, z: Tensor) -> Tensor:
        """Raw codes in [-1, 1] from pre-quantisation values ``z`` (..., m)."""
        return round_ste(self.bound(z)) / self.half_width

    def codes_to_indices(self, codes: Tensor) -> Tensor:
        """idx = sum_j (c_j * floor(l_j/2) + floor(l_j/2)) * basis_j."""
        hw = self.half_width
        return ((codes * hw + hw).round().long() * self._basis).sum(-1)

    def indices_to_codes(self, idx: Tensor) -> Tensor:
        """Inverse of :meth:`codes_to_indices`: raw codes (..., m) of indices in [0, |C|)."""
        if not isinstance(idx, Tensor):
            raise TypeError(f"idx must be a torch.Tensor of ints, got {type(idx).__name__}")
        if idx.is_floating_point() or idx.dtype == torch.bool:
            raise TypeError(f"idx must hold integers, got {idx.dtype}")
        if idx.numel() and (idx.min() < 0 or idx.max() >= self.codebook_size):
            raise ValueError(f"idx must lie in [0, {self.codebook_size}), got values in "
                             f"[{int(idx.min())}, {int(idx.max())}]")
        lv = self._levels.long()
        digits = (idx[..., None] // self._basis) % lv
        hw = self.half_width
        return (digits.to(hw.dtype) - hw) / hw

    def forward(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Projected codes (..., dim), indices (...), raw codes (..., m)."""
        z = self.project_in(self.norm(h))
        codes = self.quantize(z)
        return self.project_out(codes), self.codes_to_indices(codes.detach()), codes


def code_usage(idx: Tensor, codebook_size: int) -> dict[str, float]:
    """Collapse monitor: perplexity exp(H) of the empirical code distribution (all positions pooled),
    the fraction of the codebook used, and the mean per-position entropy in bits (idx: (N, K))."""
    if not isinstance(idx, Tensor) or idx.is_floating_point():
        raise TypeError("idx must be an integer torch.Tensor")
    if not isinstance(codebook_size, int) or codebook_size < 1:
        raise ValueError(f"codebook_size must be a positive int, got {codebook_size!r}")
    if idx.numel() == 0:
        raise ValueError("idx must not be empty")
    if idx.min() < 0 or idx.max() >= codebook_size:
        raise ValueError(f"idx must lie in [0, {codebook_size})")
    idx2 = idx.reshape(idx.shape[0], -1) if idx.ndim > 1 else idx[:, None]

    def ent(v: Tensor) -> float:
        p = torch.bincount(v.flatten().cpu(), minlength=codebook_size).double()
        p = p[p > 0] / p.sum()
        return float(-(p * p.log()).sum())

    h = ent(idx2)
    per_pos = [ent(idx2[:, j]) / math.log(2) for j in range(idx2.shape[1])]
    return {"perplexity": math.exp(h), "used": float(torch.unique(idx2).numel() / codebook_size),
            "entropy_bits_per_position": float(sum(per_pos) / len(per_pos)), "per_position_bits": per_pos}
