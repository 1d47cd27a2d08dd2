"""OpenCV pinhole cameras, zoom (spec Sec. 3.5) and an exact, vectorised z-buffer rasteriser
for the ground-truth renders (spec Sec. 3.1: ``D*, N*, M*``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from .shapes import Mesh, face_normals


@dataclass
class Camera:
    """World-to-camera ``x_c = R x + t``; pixel ``u = fx x_c/z_c + cx``, ``v = fy y_c/z_c + cy``."""

    R: Tensor
    t: Tensor
    fx: float
    fy: float
    cx: float
    cy: float
    H: int
    W: int
    near: float = 1e-3
    far: float = math.inf

    def __post_init__(self):
        if not isinstance(self.R, Tensor) or self.R.shape != (3, 3) or not torch.isfinite(self.R).all():
            raise ValueError(f"R must be a finite (3,3) tensor, got {getattr(self.R, 'shape', self.R)!r}")
        if not isinstance(self.t, Tensor) or self.t.shape != (3,) or not torch.isfinite(self.t).all():
            raise ValueError(f"t must be a finite (3,) tensor, got {getattr(self.t, 'shape', self.t)!r}")
        eye = torch.eye(3, dtype=self.R.dtype, device=self.R.device)
        if (self.R @ self.R.T - eye).abs().max() > 1e-4:
            raise ValueError("R must be orthonormal (tolerance 1e-4)")
        for k in ("fx", "fy"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{k} must be a positive focal length, got {v!r}")
        for k in ("cx", "cy"):
            if not (isinstance(getattr(self, k), (int, float)) and math.isfinite(getattr(self, k))):
                raise ValueError(f"{k} must be a finite number")
        for k in ("H", "W"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{k} must be an int >= 1, got {v!r}")
        if not (isinstance(self.near, (int, float)) and isinstance(self.far, (int, float))) or \
                math.isnan(self.near) or math.isnan(self.far) or not self.near < self.far:
            raise ValueError(f"near must be < far, got near={self.near!r}, far={self.far!r}")

    @property
    def eye(self) -> Tensor:
        return -self.R.T @ self.t

    def to(self, dev) -> Camera:
        return replace(self, R=self.R.to(dev), t=self.t.to(dev))

    def rays(self) -> tuple[Tensor, Tensor]:
        """Origin ``(3,)`` and per-pixel world directions ``(H*W,3)`` scaled so that camera z = ``t``."""
        dev = self.R.device
        v, u = torch.meshgrid(torch.arange(self.H, device=dev) + 0.5, torch.arange(self.W, device=dev) + 0.5,
                              indexing="ij")
        dc = torch.stack([(u - self.cx) / self.fx, (v - self.cy) / self.fy, torch.ones_like(u)], -1)
        return self.eye, dc.reshape(-1, 3).to(self.R.dtype) @ self.R


def look_at(eye: Tensor, target: Tensor, up: Tensor) -> tuple[Tensor, Tensor]:
    """OpenCV world-to-camera ``R, t`` (x right, y down, z forward)."""
    f = target - eye
    if f.norm() < 1e-9:
        raise ValueError("eye and target must differ")
    f = f / f.norm()
    if torch.cross(f, up, dim=0).norm() < 1e-6:
        up = torch.tensor([0.0, 1.0, 0.0], dtype=f.dtype, device=f.device)
    right = torch.cross(f, up, dim=0)
    right = right / right.norm()
    down = torch.cross(f, right, dim=0)
    R = torch.stack([right, down, f])
    return R, -R @ eye


def make_camera(eye, H: int, W: int, fov_deg: float = 45.0, target=(0.0, 0.0, 0.0)) -> Camera:
    """A camera at ``eye`` looking at ``target`` (up = +z), square pixels, centred principal point."""
    eye = torch.as_tensor(eye, dtype=torch.float32)
    R, t = look_at(eye, torch.as_tensor(target, dtype=torch.float32), torch.tensor([0.0, 0.0, 1.0]))
    f = 0.5 * W / math.tan(math.radians(fov_deg) / 2)
    return Camera(R, t, f, f, W / 2, H / 2, H, W)


def random_camera(rng: torch.Generator, H: int, W: int, dist=(1.6, 2.4), fov_deg: float = 45.0,
                  inside_prob: float = 0.0) -> Camera:
    """A camera at a uniform direction and distance ``U[dist]`` looking at the origin.

    With probability ``inside_prob`` it is placed inside the shape's box at distance ``U[0.05, 0.3]``
    (SparseFlex places cameras inside objects to reach interiors)."""
    if not 0.0 <= inside_prob <= 1.0:
        raise ValueError(f"inside_prob must be in [0, 1], got {inside_prob!r}")
    d = torch.randn(3, generator=rng)
    d = d / d.norm()
    r = float(torch.rand((), generator=rng))
    inside = float(torch.rand((), generator=rng)) < inside_prob
    lo, hi = (0.05, 0.3) if inside else dist
    return make_camera(d * (lo + (hi - lo) * r), H, W, fov_deg)


def project(points: Tensor, cam: Camera) -> tuple[Tensor, Tensor]:
    """Pixel coordinates ``(N,2)`` (u, v) and camera depth ``(N,)`` of world points."""
    pc = points @ cam.R.T.to(points) + cam.t.to(points)
    z = pc[:, 2]
    zs = torch.where(z.abs() < 1e-9, torch.full_like(z, 1e-9), z)
    uv = torch.stack([cam.fx * pc[:, 0] / zs + cam.cx, cam.fy * pc[:, 1] / zs + cam.cy], -1)
    return uv, z


def zoom_camera(cam: Camera, zeta: float, focus_px: Tensor) -> Camera:
    """Scale focal lengths by ``zeta`` and move ``focus_px`` (u, v) to the image centre (spec Sec. 3.5):
    ``f' = zeta f``, ``c' = zeta (c - u*) + (W/2, H/2)``."""
    if not (isinstance(zeta, (int, float)) and math.isfinite(zeta) and zeta > 0):
        raise ValueError(f"zeta must be a positive number, got {zeta!r}")
    u, v = float(focus_px[0]), float(focus_px[1])
    return replace(cam, fx=cam.fx * zeta, fy=cam.fy * zeta, cx=zeta * (cam.cx - u) + cam.W / 2,
                   cy=zeta * (cam.cy - v) + cam.H / 2)


@torch.no_grad()
def rasterize(mesh: Mesh, cam: Camera) -> dict[str, Tensor]:
    """Exact z-buffer of a mesh (ground truth only, no gradients).

    Triangle bounding boxes become (triangle, pixel) pairs by ``repeat_interleave``; barycentrics in
    screen space; perspective-correct depth ``1/z`` interpolation; ``scatter_reduce(amin)`` keeps the
    nearest fragment. Fragments beyond ``cam.far`` are discarded (how ``fsv`` clips its ground truth).
    Returns depth ``(H,W)`` (camera z, ``+inf`` on background), camera-facing unit normal ``(H,W,3)``
    (world frame), mask ``(H,W)`` bool and face id ``(H,W)`` (-1 on background)."""
    H, W = cam.H, cam.W
    verts, faces = mesh.vertices, mesh.faces
    dev = verts.device
    uv, z = project(verts, cam)
    fz = z[faces]                                            # (F,3)
    fuv = uv[faces]                                          # (F,3,2)
    e1, e2 = fuv[:, 1] - fuv[:, 0], fuv[:, 2] - fuv[:, 0]
    area = e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]
    ok = (fz > cam.near).all(1) & (area.abs() > 1e-12)
    lo = (fuv.min(1).values - 0.5).ceil()
    hi = (fuv.max(1).values - 0.5).floor()
    lo = torch.maximum(lo, torch.zeros_like(lo))
    hi = torch.minimum(hi, torch.tensor([W - 1.0, H - 1.0], device=dev))
    nx = (hi[:, 0] - lo[:, 0] + 1).clamp_min(0)
    ny = (hi[:, 1] - lo[:, 1] + 1).clamp_min(0)
    cnt = torch.where(ok, nx * ny, torch.zeros_like(nx)).long()
    depth = torch.full((H * W,), math.inf, device=dev)
    fid_img = torch.full((H * W,), -1, dtype=torch.long, device=dev)
    total = int(cnt.sum())
    if total > 0:
        tri = torch.repeat_interleave(torch.arange(faces.shape[0], device=dev), cnt)
        start = torch.cumsum(cnt, 0) - cnt
        off = torch.arange(total, device=dev) - start[tri]
        nxl = nx[tri].long()
        px = lo[tri, 0].long() + off % nxl
        py = lo[tri, 1].long() + off // nxl
        p = torch.stack([px.float() + 0.5, py.float() + 0.5], -1)
        a0 = fuv[tri, 0]
        d = p - a0
        A = area[tri]
        b1 = (d[:, 0] * e2[tri, 1] - d[:, 1] * e2[tri, 0]) / A
        b2 = (e1[tri, 0] * d[:, 1] - e1[tri, 1] * d[:, 0]) / A
        b0 = 1 - b1 - b2
        inside = (b0 >= -1e-6) & (b1 >= -1e-6) & (b2 >= -1e-6)
        iz = b0 / fz[tri, 0] + b1 / fz[tri, 1] + b2 / fz[tri, 2]
        zz = 1.0 / iz
        inside &= (zz > cam.near) & (zz <= cam.far)
        pix = (py * W + px)[inside]
        zz, tri = zz[inside], tri[inside]
        depth.scatter_reduce_(0, pix, zz, reduce="amin")
        win = zz <= depth[pix]
        fid_img[pix[win]] = tri[win]
    mask = fid_img >= 0
    nrm, _ = face_normals(mesh)
    n = torch.zeros(H * W, 3, device=dev)
    n[mask] = nrm[fid_img[mask]]
    _, dirs = cam.rays()
    flip = ((n * dirs).sum(-1) > 0)
    n = torch.where(flip[:, None], -n, n)
    return {"depth": depth.reshape(H, W), "normal": n.reshape(H, W, 3), "mask": mask.reshape(H, W),
            "face": fid_img.reshape(H, W)}
