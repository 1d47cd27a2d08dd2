"""Evaluation (spec Sec. 7.4 ``metrics.py``): Chamfer / F-score, surface extraction, render coverage,
hole fraction and activation-memory estimates."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from scipy.spatial import cKDTree
from torch import Tensor

from .camera import Camera
from .losses import render_losses
from .render import render_sdf
from .voxels import SparseGrid, shared_corner_average, unique_rows


def chamfer_fscore(P: Tensor, Q: Tensor, taus: Sequence[float]) -> dict[str, float]:
    """``CD-L1`` (mean of both directions' mean distances), its two directions apart, ``cd_acc`` (mean
    distance from ``P`` to ``Q``: *accuracy*, large where ``P`` has floaters) and ``cd_comp`` (from ``Q`` to
    ``P``: *completeness*, large where ``P`` leaves parts of ``Q`` uncovered), so that
    ``cd_l1 = (cd_acc + cd_comp) / 2``; ``CD-L2`` (sum of both mean squared distances) and ``F1@tau``
    (harmonic mean of precision and recall at distance ``tau``)."""
    for name, X in (("P", P), ("Q", Q)):
        if not isinstance(X, Tensor) or X.ndim != 2 or X.shape[1] != 3 or X.shape[0] == 0:
            raise ValueError(f"{name} must be a non-empty (n,3) point set, got {getattr(X, 'shape', X)!r}")
        if not torch.isfinite(X).all():
            raise ValueError(f"{name} must be finite")
    try:
        taus = list(taus)
    except TypeError:
        raise TypeError(f"taus must be a sequence of positive numbers, got {taus!r}") from None
    if not taus or any(not (isinstance(t, (int, float)) and math.isfinite(t) and t > 0) for t in taus):
        raise ValueError(f"taus must be positive numbers, got {taus!r}")
    p, q = P.detach().double().cpu().numpy(), Q.detach().double().cpu().numpy()
    dpq = cKDTree(q).query(p)[0]
    dqp = cKDTree(p).query(q)[0]
    out = {"cd_l1": float((dpq.mean() + dqp.mean()) / 2), "cd_acc": float(dpq.mean()), "cd_comp": float(dqp.mean()),
           "cd_l2": float((dpq ** 2).mean() + (dqp ** 2).mean())}
    for t in taus:
        prec, rec = float((dpq < t).mean()), float((dqp < t).mean())
        out[f"f1@{t:g}"] = 0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec)
    return out


def surface_points(grid: SparseGrid, vertex_sdf: Tensor) -> Tensor:
    """Zero crossings of the field on the lattice edges of the active fine voxels, by linear
    interpolation: exactly the vertices marching cubes would place (restricted to active voxels, so
    open boundaries stay open)."""
    verts, cv = grid.corner_vertices()
    pairs = []
    for a, b in ((0, 4), (1, 5), (2, 6), (3, 7), (0, 2), (1, 3), (4, 6), (5, 7), (0, 1), (2, 3), (4, 5), (6, 7)):
        pairs.append(torch.stack([cv[:, a], cv[:, b]], -1))
    e = unique_rows(torch.cat(pairs), max(1, verts.shape[0]))
    sa, sb = vertex_sdf[e[:, 0]], vertex_sdf[e[:, 1]]
    cross = (sa * sb < 0)
    e, sa, sb = e[cross], sa[cross], sb[cross]
    w = (sa / (sa - sb))[:, None]
    pos = verts.float() / grid.res - 0.5
    return (pos[e[:, 0]] * (1 - w) + pos[e[:, 1]] * w).detach()


def oracle_field(grid: SparseGrid, points: Tensor, normals: Tensor) -> Tensor:
    """Per-vertex signed distance to the nearest surface sample along its normal, ``(p - q) . n_q``:
    a stand-in for a well-trained decoder (works for open surfaces, whose sign is a sheet orientation)."""
    verts, _ = grid.corner_vertices()
    pos = (verts.float() / grid.res - 0.5).cpu().numpy()
    _, j = cKDTree(points.cpu().numpy()).query(pos)
    j = torch.as_tensor(j, device=points.device)
    pos_t = torch.as_tensor(pos, device=points.device)
    return ((pos_t - points[j]) * normals[j]).sum(-1)


def render_gradient(grid: SparseGrid, vertex_sdf: Tensor, cam: Camera, gt: dict, kappa: float = 0.1) -> Tensor:
    """Largest absolute render-loss gradient over the 8 corner values of every decoded fine voxel ``(M,)``."""
    _, cv = grid.corner_vertices()
    corner = vertex_sdf.detach()[cv].clone().requires_grad_(True)
    s, _ = shared_corner_average(corner, cv, vertex_sdf.shape[0])
    loss = render_losses(render_sdf(s, grid, cam, kappa=kappa), gt)["total"]
    (g,) = torch.autograd.grad(loss, corner)
    return g.abs().amax(1)


def surface_voxels(grid: SparseGrid, vertex_sdf: Tensor) -> Tensor:
    """Bool ``(M,)``: fine voxels whose corner values change sign (they hold the decoded surface)."""
    _, cv = grid.corner_vertices()
    c = vertex_sdf[cv]
    return (c.max(1).values > 0) & (c.min(1).values < 0)


def render_coverage(grid: SparseGrid, vertex_sdf: Tensor, cam: Camera, gt: dict, kappa: float = 0.1,
                    rel_tol: float = 1e-6, surface_only: bool = False) -> float:
    """Fraction of decoded fine voxels whose corner values receive a render-loss gradient larger than
    ``rel_tol`` times the largest one (soft rendering never gives exact zeros) (spec Sec. 4, fact 3).
    ``surface_only`` restricts the count to the voxels that hold the decoded surface."""
    gn = render_gradient(grid, vertex_sdf, cam, gt, kappa)
    sel = surface_voxels(grid, vertex_sdf) if surface_only else torch.ones_like(gn, dtype=torch.bool)
    if float(gn.max()) == 0 or not sel.any():
        return 0.0
    return float((gn[sel] > rel_tol * gn.max()).float().mean())


def hole_fraction(pred_mask: Tensor, gt_mask: Tensor) -> float:
    """Share of ground-truth foreground pixels rendered with opacity below 0.5 (in [0, 1]). NaN or
    infinite opacities are refused: a NaN compares False with 0.5 and would count as covered."""
    for name, t in (("pred_mask", pred_mask), ("gt_mask", gt_mask)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{name} must be finite (a NaN opacity would count as covered)")
    if pred_mask.shape != gt_mask.shape:
        raise ValueError(f"pred_mask and gt_mask must have the same shape, got {tuple(pred_mask.shape)} "
                         f"and {tuple(gt_mask.shape)}")
    fg = gt_mask.bool()
    if not fg.any():
        return 0.0
    return float((pred_mask[fg] < 0.5).float().mean())


def hole_fraction_tensor(pred_mask: Tensor, gt_mask: Tensor) -> Tensor:
    """:func:`hole_fraction` as a 0-d float32 tensor that stays on the device (no host read, no input
    checks: the training loop logs it per step and reads all steps once). The count of holes and of
    foreground pixels are exact integers, so ``holes / foreground`` is the same float32 value as the
    mean of :func:`hole_fraction` (0 where there is no foreground pixel)."""
    fg = gt_mask.bool()
    n = fg.sum()
    k = ((pred_mask < 0.5) & fg).sum()
    return torch.where(n > 0, k.float() / n.clamp_min(1).float(), torch.zeros((), device=n.device))


def activation_memory_estimate(n_voxels: int, width: int, blocks: int, up: int = 2, bytes_per: int = 4,
                               child_frac: float = 0.5) -> int:
    """Analytic activation bytes of the decoder for ``n_voxels`` decoded latent voxels (spec Sec. 4,
    fact 4): per block the 27-neighbour gathers of the convolution and of keys/values (3 x 27 w), the
    attention maps and the MLP; the upsampler multiplies the count by ``up^3 * child_frac``. Linear in
    ``n_voxels``, as for any local operator."""
    if not isinstance(n_voxels, int) or n_voxels < 0:
        raise ValueError(f"n_voxels must be a non-negative int, got {n_voxels!r}")
    per_block = 3 * 27 * width + 27 * 4 + 12 * width
    wf = max(width // 2, 8)
    fine = up ** 3 * child_frac * (27 * wf + 4 * wf + 8)
    return int(bytes_per * n_voxels * (blocks * per_block + fine))


def saved_tensor_bytes(fn) -> int:
    """Bytes of the tensors autograd saves for backward while ``fn()`` runs: the activation memory of a
    training step, measured exactly and identically on any device."""
    total = [0]
    seen = set()

    def pack(t):
        key = (t.data_ptr(), t.numel(), t.dtype)
        if key not in seen:
            seen.add(key)
            total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total[0]


def finite(x: float, default: float = math.nan) -> float:
    return x if math.isfinite(x) else default
