"""Geometry of C-alpha traces: units, poses, superposition, RMSD and TM-score (batched torch).

Convention (spec Sec. 3.1 and 11): angstrom outside the models, nanometres (centred, divided by 10)
inside them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from ..core.checks import check_device  # noqa: F401


def check_coords(x, name: str = "x", max_len: int | None = None, finite: bool = True) -> Tensor:
    """Validate coordinates of shape (B, L, 3) or (L, 3); returns a (B, L, 3) float tensor. ``finite=False``
    skips the value check (a read of the tensor, a host sync on a GPU) for a batch from a trusted sampler."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B, L, 3), got {type(x).__name__}")
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[-1] != 3:
        raise ValueError(f"{name} must have shape (B, L, 3) or (L, 3), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if x.shape[0] < 1:
        raise ValueError(f"{name} must hold at least one structure")
    if x.shape[1] < 3:
        raise ValueError(f"{name} must have at least 3 residues, got L={x.shape[1]}")
    if max_len is not None and x.shape[1] > max_len:
        raise ValueError(f"{name} has L={x.shape[1]} residues, more than max_len={max_len}")
    if finite and not torch.isfinite(x).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x


def check_mask(mask, x: Tensor, name: str = "mask") -> Tensor:
    """A boolean (B, L) mask matching ``x``; every row must keep at least 3 residues."""
    if mask is None:
        return torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(mask).__name__}")
    if mask.ndim == 1:
        mask = mask[None]
    if tuple(mask.shape) != tuple(x.shape[:2]):
        raise ValueError(f"{name} must have shape {tuple(x.shape[:2])}, got {tuple(mask.shape)}")
    mask = mask.bool()
    if (mask.sum(1) < 3).any():
        raise ValueError(f"{name} has a row with fewer than 3 True entries (all-False rows are not allowed)")
    return mask


def check_prefix_mask(mask, x: Tensor, name: str = "mask") -> Tensor:
    """A (B, L) mask of :func:`check_mask` whose True entries are a prefix of every row (residues
    ``0..n-1``): the per-length batching of the probes reads ``x[:, :n]``, so a mask keeping residues
    10-39 must be refused, not read as the first 30 residues."""
    mask = check_mask(mask, x, name)
    prefix = torch.arange(mask.shape[1], device=mask.device)[None] < mask.sum(1, keepdim=True)
    if not bool((mask == prefix).all()):
        raise ValueError(f"{name} must keep a prefix of every row (True for residues 0..n-1, then False); "
                         "crop or shift the structures so that the kept residues come first")
    return mask


def center_and_scale(x: Tensor, mask: Tensor | None = None, scale: float = 10.0) -> Tensor:
    """Centre each protein on its (masked) centroid and divide by ``scale`` (angstrom -> nm by default)."""
    x = check_coords(x)
    m = check_mask(mask, x)
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive number, got {scale!r}")
    return _center_and_scale(x, m, scale)


def _center_and_scale(x: Tensor, mask: Tensor, scale: float) -> Tensor:
    """:func:`center_and_scale` without its checks (a boolean ``mask`` of (B, L) given): the training loop's
    batches come from :func:`~icml26.protein_tokens.backbone.make_backbones`, finite and unpadded."""
    m = mask.to(x.dtype)[..., None]
    cen = (x * m).sum(1, keepdim=True) / m.sum(1, keepdim=True)
    return (x - cen) * m / scale


def random_rotation(n: int, generator: torch.Generator | None = None, dtype=torch.float32) -> Tensor:
    """(n, 3, 3) rotations, uniform on SO(3) (QR of a Gaussian matrix with the sign fix, det +1)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    a = torch.randn(n, 3, 3, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    det = torch.linalg.det(q)
    q[:, :, 2] *= det[:, None]
    return q.to(dtype)


def canonicalize(x: Tensor) -> Tensor:
    """Deterministic PCA pose (spec Sec. 3.1): centre, rotate onto the principal axes (descending
    eigenvalues), flip each axis so that the farthest point along it is positive, and flip the last axis
    if the frame is a reflection. Returns (B, L, 3)."""
    x = check_coords(x)
    xc = x - x.mean(1, keepdim=True)
    cov = xc.transpose(1, 2) @ xc
    evals, evecs = torch.linalg.eigh(cov.double())
    evecs = evecs.flip(-1).to(x.dtype)                              # descending
    y = xc @ evecs
    far = y.abs().argmax(1, keepdim=True)                           # (B, 1, 3)
    sign = torch.sign(y.gather(1, far)).squeeze(1)
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    r = evecs * sign[:, None, :]
    det = torch.linalg.det(r.double()).to(x.dtype)
    r = torch.cat([r[..., :2], r[..., 2:] * det[:, None, None]], -1)
    return xc @ r


def kabsch_superpose(p: Tensor, q: Tensor, w: Tensor | None = None) -> Tensor:
    """Move ``p`` onto ``q`` by the rotation and translation minimising the (weighted) squared distance."""
    if w is None:
        w = torch.ones(p.shape[:2], dtype=p.dtype, device=p.device)
    w = w.to(p.dtype)[..., None]
    ws = w.sum(1, keepdim=True).clamp_min(1e-12)
    pc = (p * w).sum(1, keepdim=True) / ws
    qc = (q * w).sum(1, keepdim=True) / ws
    h = ((p - pc) * w).transpose(1, 2) @ (q - qc)
    u, _, vt = torch.linalg.svd(h.double())
    d = torch.sign(torch.linalg.det(vt.transpose(1, 2) @ u.transpose(1, 2)))
    d = torch.where(d == 0, torch.ones_like(d), d)
    s = torch.diag_embed(torch.stack([torch.ones_like(d), torch.ones_like(d), d], -1))
    rot = (u @ s @ vt).to(p.dtype)                                  # p_c @ rot ~ q_c
    return (p - pc) @ rot + qc


def _check_pair(p, q) -> tuple[Tensor, Tensor]:
    """Two traces of the same shape, promoted to one floating dtype (at least float32)."""
    p = check_coords(p, "p")
    q = check_coords(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and {tuple(q.shape)}")
    dt = torch.promote_types(torch.promote_types(p.dtype, q.dtype), torch.float32)
    return p.to(dt), q.to(dt)


def kabsch_rmsd(p: Tensor, q: Tensor, mask: Tensor | None = None) -> Tensor:
    """(B,) RMSD after optimal rigid superposition (proper rotations only, so a mirror image is not 0)."""
    p, q = _check_pair(p, q)
    m = check_mask(mask, p)
    ps = kabsch_superpose(p, q, m)
    mf = m.to(p.dtype)
    return (((ps - q) ** 2).sum(-1) * mf).sum(1).div(mf.sum(1)).sqrt()


def d0(length: int | Tensor) -> Tensor | float:
    """TM-score distance scale d0(L) = 1.24 (L - 15)^(1/3) - 1.8 angstrom (floored at 0.5)."""
    if isinstance(length, Tensor):
        return (1.24 * (length.double() - 15).clamp_min(0).pow(1 / 3) - 1.8).clamp_min(0.5)
    return max(1.24 * max(length - 15, 0) ** (1 / 3) - 1.8, 0.5)


def tm_from_distances(d: Tensor, L: int) -> Tensor:
    """TM-score (1/L) sum_i 1/(1 + (d_i/d0(L))^2) of per-residue distances ``d`` (..., n)."""
    if not isinstance(d, Tensor):
        raise TypeError(f"d must be a torch.Tensor, got {type(d).__name__}")
    if not d.is_floating_point() or d.ndim < 1:
        raise TypeError(f"d must be a floating tensor of distances (..., n), got {d.dtype} of shape {tuple(d.shape)}")
    if not isinstance(L, int) or isinstance(L, bool) or L < 1:
        raise ValueError(f"L must be a positive int, got {L!r}")
    if d.shape[-1] > L:
        raise ValueError(f"L={L} must be at least the number of distances n={d.shape[-1]} (a TM-score is "
                         "normalised by the length of the reference chain, so it stays in [0, 1])")
    if not bool(torch.isfinite(d).all()) or bool((d < 0).any()):
        raise ValueError("d must hold finite, non-negative distances")
    return (1.0 / (1.0 + (d / d0(L)) ** 2)).sum(-1) / L


def tm_score(p: Tensor, q: Tensor, refine: bool = True, iters: int = 6) -> Tensor:
    """(B,) TM-score of equal-length traces with residue i matched to residue i (no alignment search).

    Kabsch superposition on all residues; with ``refine`` the superposition is repeated on the residues
    within d0 (then 1.5 d0, 2 d0 if too few are close), keeping the best score, a light version of the
    TM-score program's search. A lower bound of TM-align's score, which may also re-align residues.
    """
    p, q = _check_pair(p, q)
    if not isinstance(refine, bool):
        raise TypeError(f"refine must be a bool, got {type(refine).__name__}")
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters must be an int >= 1 (0 rounds would score nothing), got {iters!r}")
    L = p.shape[1]
    scale = d0(L)
    w = torch.ones(p.shape[:2], dtype=p.dtype, device=p.device)
    best = torch.zeros(p.shape[0], dtype=torch.float64, device=p.device)
    for _ in range(iters if refine else 1):
        dist = (kabsch_superpose(p, q, w) - q).norm(dim=-1)
        best = torch.maximum(best, tm_from_distances(dist.double(), L))
        new_w = torch.zeros_like(w)
        for f in (1.0, 1.5, 2.0, 1e9):                              # widen until >= 3 residues are close
            cand = (dist < f * scale).to(p.dtype)
            fill = (new_w.sum(1) < 3)[:, None]
            new_w = torch.where(fill, cand, new_w)
        w = new_w
    return best.to(p.dtype)


def tm_align(p, q) -> dict[str, float]:
    """TM-align (via the optional ``tmtools`` bindings) of two C-alpha traces of any lengths (angstrom).

    Returns ``tm_p``/``tm_q`` (normalised by the length of ``p`` / ``q``), ``tm_short`` (by the shorter
    chain) and ``rmsd`` over the aligned residues.
    """
    try:
        from tmtools import tm_align as _tm
    except ImportError as e:  # pragma: no cover - tmtools is a declared dependency
        raise ImportError("tm_align needs tmtools: pip install tmtools") from e
    arrs = []
    for name, a in (("p", p), ("q", q)):
        a = a.detach().cpu().numpy() if isinstance(a, Tensor) else np.asarray(a)
        if a.ndim != 2 or a.shape[1] != 3 or a.shape[0] < 3:
            raise ValueError(f"{name} must have shape (L, 3) with L >= 3, got {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError(f"{name} must be finite")
        arrs.append(np.ascontiguousarray(a, dtype=np.float64))
    r = _tm(arrs[0], arrs[1], "A" * len(arrs[0]), "A" * len(arrs[1]))
    short = r.tm_norm_chain1 if len(arrs[0]) <= len(arrs[1]) else r.tm_norm_chain2
    return {"tm_p": float(r.tm_norm_chain1), "tm_q": float(r.tm_norm_chain2), "tm_short": float(short),
            "rmsd": float(r.rmsd)}


#: largest pairwise-distance block of :func:`ca_geometry_stats` (structures x L x L float entries), bytes
MAX_PAIR_BYTES = 512 * 1024 ** 2


def ca_geometry_stats(x: Tensor) -> dict[str, float]:
    """Local-geometry proxies of C-alpha traces (angstrom): fraction of consecutive distances within
    3.8 +- 0.3 A, clash rate (pairs |i-j| >= 3 closer than 3.0 A) and mean radius of gyration.

    The (L, L) distance matrices are built a few structures at a time, at most :data:`MAX_PAIR_BYTES`
    per block (the same counts as one batched ``cdist``); one structure too long for the block raises."""
    x = check_coords(x)
    if x.dtype in (torch.float16, torch.bfloat16):                  # cdist needs float32 or float64
        x = x.float()
    bond = (x[:, 1:] - x[:, :-1]).norm(dim=-1)
    B, L = x.shape[:2]
    per = L * L * (x.element_size() + 2)                            # distances, and two bool masks
    if per > MAX_PAIR_BYTES:
        raise ValueError(f"x: one structure of L={L} residues needs a {per / 2 ** 20:.0f} MiB distance matrix, "
                         f"over MAX_PAIR_BYTES = {MAX_PAIR_BYTES / 2 ** 20:.0f} MiB")
    far = (torch.arange(L)[:, None] - torch.arange(L)[None]).abs().to(x.device) >= 3
    step = max(1, MAX_PAIR_BYTES // per)
    counts = [((torch.cdist(xb, xb) < 3.0) & far).sum((1, 2)) for xb in x.split(step)]
    clash = torch.cat(counts).float() / far.sum().clamp_min(1)
    rg = (x - x.mean(1, keepdim=True)).pow(2).sum(-1).mean(1).sqrt()
    return {"bond_in_range": float(((bond - 3.8).abs() <= 0.3).float().mean()),
            "clash_rate": float(clash.mean()), "rg": float(rg.mean())}
