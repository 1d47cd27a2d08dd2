"""The Focusing logic: depth-driven carving of latent voxels (spec Sec. 3.4), adaptive zooming under a
voxel budget (Sec. 3.5), and TripoSF's frustum-aware sectional voxels (``fsv``, Sec. 3.9) as baseline."""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch import Tensor

from .camera import Camera, project, rasterize, zoom_camera
from .shapes import Mesh
from .voxels import check_res


def _check_depth(gt_depth: Tensor, cam: Camera) -> None:
    if not isinstance(gt_depth, Tensor) or tuple(gt_depth.shape) != (cam.H, cam.W):
        raise ValueError(f"gt_depth must have shape (cam.H, cam.W) = {(cam.H, cam.W)}, got "
                         f"{tuple(getattr(gt_depth, 'shape', ()))}")
    if torch.isnan(gt_depth).any():
        raise ValueError("gt_depth must not contain NaN (+inf marks background)")


def _check_coords(coords: Tensor, res: int) -> None:
    check_res(res)
    if not isinstance(coords, Tensor) or coords.ndim != 2 or coords.shape[1] != 3 or coords.shape[0] == 0:
        raise ValueError(f"coords must be a non-empty (N,3) tensor, got {getattr(coords, 'shape', coords)!r}")
    if coords.dtype.is_floating_point or coords.dtype == torch.bool:
        raise TypeError(f"coords must be an integer tensor, got {coords.dtype}")


def voxel_footprint(coords: Tensor, res: int, cam: Camera) -> tuple[Tensor, Tensor, Tensor, float]:
    """Pixel centre ``(N,2)``, depth ``(N,)``, footprint radius in pixels ``(N,)`` and circumradius ``rho``."""
    centers = (coords.float() + 0.5) / res - 0.5
    uv, z = project(centers, cam)
    rho = math.sqrt(3) / 2 / res
    r_px = max(cam.fx, cam.fy) * rho / z.clamp_min(1e-6)
    return uv, z, r_px, rho


def in_frustum(coords: Tensor, res: int, cam: Camera) -> Tensor:
    """Voxels whose centre projects into the image dilated by its footprint, in front of the near plane."""
    uv, z, r, _ = voxel_footprint(coords, res, cam)
    return ((z > cam.near) & (uv[:, 0] >= -r) & (uv[:, 0] <= cam.W + r) & (uv[:, 1] >= -r)
            & (uv[:, 1] <= cam.H + r))


def carve(coords: Tensor, res: int, cam: Camera, gt_depth: Tensor, eps: float | None = None,
          two_sided: bool = True, chunk: int = 4096) -> Tensor:
    """Keep mask ``(N,)`` of the latent voxels that are depth-consistent with the view (spec Sec. 3.4).

    A voxel with centre depth ``z``, circumradius ``rho`` and footprint radius ``r_px = f rho / z`` is
    kept iff it is in the (dilated) frustum and some pixel ``p`` of the square window of half-size
    ``ceil(r_px)`` around its projection has ``|z - D*(p)| <= rho + eps`` (``eps = 0.5 h_lat`` by
    default [book choice]). ``two_sided=False`` keeps the one-sided test ``z - D*(p) <= rho + eps``
    (everything in front of the surface), the ablation of the notebook. The window is gathered for all
    voxels at once, masked to each voxel's own half-size."""
    _check_coords(coords, res)
    _check_depth(gt_depth, cam)
    if eps is None:
        eps = 0.5 / res
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be >= 0, got {eps!r}")
    uv, z, r_px, rho = voxel_footprint(coords, res, cam)
    front = in_frustum(coords, res, cam)
    k = r_px.ceil().long().clamp(0, max(cam.H, cam.W))
    keep = torch.zeros(coords.shape[0], dtype=torch.bool, device=coords.device)
    idx = front.nonzero().squeeze(1)
    if idx.numel() == 0:
        return keep
    K = int(k[idx].max())
    off = torch.arange(-K, K + 1, device=coords.device)
    oy, ox = torch.meshgrid(off, off, indexing="ij")
    oy, ox = oy.reshape(-1), ox.reshape(-1)
    Dflat = gt_depth.reshape(-1)
    tol = rho + eps
    for sl in torch.split(idx, max(1, chunk // (2 * K + 1) ** 2 * 64)):
        px = uv[sl, 0].floor().long()[:, None] + ox[None]
        py = uv[sl, 1].floor().long()[:, None] + oy[None]
        ok = (px >= 0) & (px < cam.W) & (py >= 0) & (py < cam.H)
        ok &= (ox.abs()[None] <= k[sl, None]) & (oy.abs()[None] <= k[sl, None])
        D = Dflat[(py.clamp(0, cam.H - 1) * cam.W + px.clamp(0, cam.W - 1))]
        diff = z[sl, None] - D
        hit = (diff.abs() <= tol) if two_sided else (diff <= tol)
        keep[sl] = (hit & ok & torch.isfinite(D)).any(1)
    return keep


def frustum_section(coords: Tensor, res: int, cam: Camera, alpha: float) -> tuple[Tensor, float]:
    """TripoSF-style frustum-aware sectional voxels [book choice — our reading of "adaptive clipping
    planes" and "visibility ratio alpha"]: the in-frustum voxels whose depth is at most the
    ``alpha``-quantile of in-frustum depths. Returns the keep mask and the far plane of the section
    (the quantile depth plus the voxel circumradius: the back face of the last kept voxel)."""
    _check_coords(coords, res)
    if isinstance(alpha, bool) or not (isinstance(alpha, (int, float)) and 0 < alpha <= 1):
        raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
    _, z, _, rho = voxel_footprint(coords, res, cam)
    fr = in_frustum(coords, res, cam)
    if not fr.any():
        return fr, float(cam.near) + 1e-3
    zf = z[fr].sort().values
    n_keep = max(1, int(math.floor(alpha * zf.numel())))
    far = float(zf[n_keep - 1])
    return fr & (z <= far), far + rho


def adaptive_zoom(mesh: Mesh, coords: Tensor, res: int, cam: Camera, n_lo: int, n_hi: int,
                  rng: torch.Generator, zeta_max: float = 8.0, max_iter: int = 6):
    """Zoom so that the carved count falls in ``[n_lo, n_hi]`` (spec Sec. 3.5, algorithm [book choice]).

    ``zeta <- clip(zeta sqrt(n / n_target), 1, zeta_max)``, ``n_target = sqrt(n_lo n_hi)``, around the
    projection ``u*`` of a random kept voxel; the ground truth is re-rendered for every new intrinsics
    (pitfall: carving from the wrong depth). A hard cap keeps the ``n_hi`` voxels nearest to ``u*`` if
    the band is still exceeded. Returns ``(camera, gt, keep, info)``."""
    _check_coords(coords, res)
    for name, v in (("n_lo", n_lo), ("n_hi", n_hi)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{name} must be an int, got {v!r}")
    if n_hi < 1 or n_lo > n_hi:
        raise ValueError(f"need 1 <= n_hi and n_lo <= n_hi, got n_lo={n_lo}, n_hi={n_hi}")
    if not (isinstance(zeta_max, (int, float)) and zeta_max >= 1):
        raise ValueError(f"zeta_max must be >= 1, got {zeta_max!r}")
    if not isinstance(max_iter, int) or max_iter < 0:
        raise ValueError(f"max_iter must be a non-negative int, got {max_iter!r}")
    gt = rasterize(mesh, cam)
    keep = carve(coords, res, cam, gt["depth"])
    n0 = int(keep.sum())
    info = {"zeta": 1.0, "counts": [n0], "capped": False, "n0": n0}
    if n0 <= n_hi:
        return cam, gt, keep, info
    uv0, _ = project((coords.float() + 0.5) / res - 0.5, cam)
    kept = keep.nonzero().squeeze(1)
    j = kept[int(torch.randint(kept.numel(), (), generator=rng))]
    focus = uv0[j].detach().cpu()
    zeta, n_t = 1.0, math.sqrt(n_lo * n_hi)
    zc, n = cam, n0
    for _ in range(max_iter):
        zeta = min(max(zeta * math.sqrt(n / n_t), 1.0), float(zeta_max))
        zc = zoom_camera(cam, zeta, focus)
        gt = rasterize(mesh, zc)
        keep = carve(coords, res, zc, gt["depth"])
        n = int(keep.sum())
        info["counts"].append(n)
        if n_lo <= n <= n_hi or zeta >= zeta_max or n < n_lo:
            break
    info["zeta"] = zeta
    if n > n_hi:
        uv, _ = project((coords.float() + 0.5) / res - 0.5, zc)
        dist = (uv - torch.tensor([zc.W / 2, zc.H / 2], device=uv.device)).norm(dim=-1)
        dist = torch.where(keep, dist, torch.full_like(dist, math.inf))
        sel = dist.topk(n_hi, largest=False).indices
        keep = torch.zeros_like(keep)
        keep[sel] = True
        info["capped"] = True
    return zc, gt, keep, info


def section_camera(cam: Camera, far: float) -> Camera:
    """The camera with the far plane of a frustum section (``fsv`` renders its ground truth with it)."""
    return replace(cam, far=max(far, cam.near + 1e-6))
