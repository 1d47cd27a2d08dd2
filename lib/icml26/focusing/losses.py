"""Render losses (spec Sec. 3.3, TRELLIS mesh-decoder losses without LPIPS [book choice]), the TSDF
warm-up loss (Sec. 3.7) and sparse-voxel total variation (Sec. 3.6)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .camera import Camera, project
from .voxels import MAX_RES, vertex_edges


def _weight(name: str, v) -> float:
    if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
        raise ValueError(f"{name} must be a non-negative number, got {v!r}")
    return float(v)


def ssim(a: Tensor, b: Tensor, window: int = 7, sigma: float = 1.5) -> Tensor:
    """Mean SSIM of ``(B,C,H,W)`` images in ``[0,1]`` with a Gaussian window."""
    if a.shape != b.shape or a.ndim != 4:
        raise ValueError(f"a and b must be (B,C,H,W) of equal shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    x = torch.arange(window, dtype=a.dtype, device=a.device) - window // 2
    g = torch.exp(-x ** 2 / (2 * sigma ** 2))
    g = g / g.sum()
    k = (g[:, None] * g[None, :])[None, None].expand(a.shape[1], 1, window, window)
    f = lambda t: F.conv2d(t, k, padding=window // 2, groups=a.shape[1])  # noqa: E731
    mu_a, mu_b = f(a), f(b)
    saa, sbb, sab = f(a * a) - mu_a ** 2, f(b * b) - mu_b ** 2, f(a * b) - mu_a * mu_b
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    s = ((2 * mu_a * mu_b + c1) * (2 * sab + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (saa + sbb + c2))
    return s.mean()


def render_losses(pred: dict, gt: dict, lambda_depth: float = 1.0, lambda_ssim: float = 0.2) -> dict[str, Tensor]:
    """``L_mask = mean|M - M*|``, ``L_depth = mean|D M* - D* M*|`` (L1), ``L_normal = mean|N M* - N* M*|
    + lambda_ssim (1 - SSIM)`` on normals mapped to ``[0,1]``; ``total`` adds them (spec Sec. 3.3)."""
    lambda_depth, lambda_ssim = _weight("lambda_depth", lambda_depth), _weight("lambda_ssim", lambda_ssim)
    m = gt["mask"].float()
    l_mask = (pred["mask"] - m).abs().mean()
    dgt = torch.where(gt["mask"], gt["depth"], torch.zeros_like(gt["depth"]))
    l_depth = (pred["depth"] * m - dgt).abs().mean()
    npred = ((pred["normal"] + 1) / 2) * m[..., None]
    ngt = ((gt["normal"] + 1) / 2) * m[..., None]
    l_n = (npred - ngt).abs().mean()
    if lambda_ssim > 0:
        l_n = l_n + lambda_ssim * (1 - ssim(npred.permute(2, 0, 1)[None], ngt.permute(2, 0, 1)[None]))
    total = l_mask + lambda_depth * l_depth + l_n
    return {"mask": l_mask, "depth": l_depth, "normal": l_n, "total": total}


def tsdf_target(vertex_pos: Tensor, gt_depth: Tensor, cam: Camera, delta: float,
                background: float = 100.0) -> tuple[Tensor, Tensor]:
    """TRELLIS pseudo-SDF ``s~(p) = D*(pi(p)) - z(p)`` clipped to ``[-delta, delta]`` and the mask
    ``s~ > -delta`` (vertices in the image and in front of the camera) (spec Sec. 3.7). ``D*`` is sampled
    bilinearly, background replaced by a large finite depth [book choice]."""
    if tuple(gt_depth.shape) != (cam.H, cam.W):
        raise ValueError(f"gt_depth must have shape {(cam.H, cam.W)}, got {tuple(gt_depth.shape)}")
    if torch.isnan(gt_depth).any():
        raise ValueError("gt_depth must not contain NaN")
    if not (isinstance(delta, (int, float)) and delta > 0):
        raise ValueError(f"delta must be > 0, got {delta!r}")
    D = torch.where(torch.isfinite(gt_depth), gt_depth, torch.full_like(gt_depth, background))
    uv, z = project(vertex_pos, cam)
    gx = uv[:, 0] / cam.W * 2 - 1
    gy = uv[:, 1] / cam.H * 2 - 1
    samp = F.grid_sample(D[None, None], torch.stack([gx, gy], -1)[None, None], mode="bilinear",
                         padding_mode="border", align_corners=False)[0, 0, 0]
    raw = samp - z
    ok = (gx.abs() <= 1) & (gy.abs() <= 1) & (z > cam.near) & (raw > -delta)
    return raw.clamp(-delta, delta), ok


def tsdf_loss(vertex_pos: Tensor, vertex_sdf: Tensor, gt_depth: Tensor, cam: Camera, delta: float) -> Tensor:
    """``L_TSDF = mean_{p: s~(p) > -delta} (s_p - clip(s~(p), -delta, delta))^2 / delta^2`` (spec Sec. 3.7).

    Divided by ``delta^2`` [book choice]: the loss is measured in units of the truncation band, so that
    its weight does not depend on the grid resolution (unnormalised, at ``h = 1/32`` it is about 1e-3 of
    the render losses and the warm-up does nothing)."""
    target, ok = tsdf_target(vertex_pos, gt_depth, cam, delta)
    if not ok.any():
        return vertex_sdf.sum() * 0
    return ((vertex_sdf[ok] - target[ok]) ** 2).mean() / delta ** 2


def sparse_tv(vertex_coords: Tensor, vertex_sdf: Tensor, h: float, res: int | None = None) -> Tensor:
    """``L_TV = mean_{(a,b) in E} |s_a - s_b| / h`` over lattice edges with both vertices present (Sec. 3.6).

    ``vertex_coords (V,3)`` integer lattice coordinates in ``[0, res]`` (``res = round(1/h)`` by default),
    ``vertex_sdf (V,)``. The vertex look-up is sparse on large lattices (``h = 1/1024`` costs memory
    linear in V, not the 8.6 GB of a dense ``1025^3`` table)."""
    if isinstance(h, bool) or not (isinstance(h, (int, float)) and math.isfinite(h) and h > 0):
        raise ValueError(f"h must be a finite number > 0, got {h!r}")
    if res is None:
        if 1 / h > MAX_RES:
            raise ValueError(f"h must be >= 1/MAX_RES = 2**-20 (res = round(1/h) lattice keys must fit int64), got {h!r}")
        res = max(1, round(1 / h))
    if isinstance(res, bool) or not isinstance(res, int) or not 1 <= res <= MAX_RES:
        raise ValueError(f"res must be an int in [1, 2**20], got {res!r}")
    if not isinstance(vertex_coords, Tensor) or vertex_coords.ndim != 2 or vertex_coords.shape[1] != 3 \
            or vertex_coords.is_floating_point():
        raise ValueError(f"vertex_coords must be a (V,3) integer tensor, got {getattr(vertex_coords, 'shape', vertex_coords)!r}")
    if vertex_coords.numel() and (int(vertex_coords.min()) < 0 or int(vertex_coords.max()) > res):
        raise ValueError(f"vertex_coords must lie in [0, res={res}], got [{int(vertex_coords.min())}, "
                         f"{int(vertex_coords.max())}]")
    if not isinstance(vertex_sdf, Tensor) or vertex_sdf.shape != vertex_coords.shape[:1] \
            or not vertex_sdf.is_floating_point():
        raise ValueError(f"vertex_sdf must be a floating (V,) tensor, one value per row of vertex_coords "
                         f"(V={vertex_coords.shape[0]}), got {getattr(vertex_sdf, 'shape', vertex_sdf)!r}")
    if not bool(torch.isfinite(vertex_sdf).all()):
        raise ValueError("vertex_sdf must be finite")
    e = vertex_edges(vertex_coords.long(), res)
    if e.shape[0] == 0:
        return vertex_sdf.sum() * 0
    return (vertex_sdf[e[:, 0]] - vertex_sdf[e[:, 1]]).abs().mean() / h
