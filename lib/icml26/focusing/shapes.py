"""Procedural open and closed triangle meshes (spec Sec. 7.1) and area-weighted surface samples.

Every shape is a parametric ``(u, v)`` grid (a few thousand triangles), randomly rotated and scaled
and normalised into ``[-0.45, 0.45]^3``. Open shapes (a tube, a bowl, a sheet, a cup, a Moebius
strip, a saddle) have boundaries, which is what render supervision handles and SDF supervision
cannot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

CLOSED_KINDS = ("sphere", "torus", "superellipsoid", "capsule", "two_blobs", "bumpy_sphere")
OPEN_KINDS = ("open_cylinder", "bowl", "wavy_sheet", "cup", "mobius", "saddle")
SHAPE_KINDS: tuple[str, ...] = CLOSED_KINDS + OPEN_KINDS
#: shapes with parts that hide other parts of the same shape from many views (claim 4)
SELF_OCCLUDING = ("torus", "cup", "bowl", "mobius", "wavy_sheet")


@dataclass
class Mesh:
    """A triangle mesh: ``vertices (V,3)`` float32, ``faces (F,3)`` int64, ``is_open`` flag."""

    vertices: Tensor
    faces: Tensor
    is_open: bool
    kind: str = ""

    def __post_init__(self):
        v, f = self.vertices, self.faces
        if not isinstance(v, Tensor) or v.ndim != 2 or v.shape[1] != 3 or v.shape[0] == 0:
            raise ValueError(f"vertices must be a (V,3) tensor, got {getattr(v, 'shape', v)!r}")
        if not isinstance(f, Tensor) or f.ndim != 2 or f.shape[1] != 3:
            raise ValueError(f"faces must be an (F,3) tensor, got {getattr(f, 'shape', f)!r}")
        if f.shape[0] == 0:
            raise ValueError("faces must hold at least one triangle, got zero faces")
        if not torch.isfinite(v).all():
            raise ValueError("vertices must be finite")
        if f.dtype not in (torch.int64, torch.int32) or int(f.min()) < 0 or int(f.max()) >= v.shape[0]:
            raise ValueError(f"faces must index vertices in [0, {v.shape[0]}), got range "
                             f"[{int(f.min())}, {int(f.max())}]")
        if v.abs().max() > 0.5:
            raise ValueError("vertices must lie in [-0.5, 0.5]^3 (normalise the mesh first)")

    def to(self, dev) -> Mesh:
        return Mesh(self.vertices.to(dev), self.faces.to(dev), self.is_open, self.kind)


def _grid_mesh(P: Tensor, wrap_u: bool, wrap_v: bool) -> tuple[Tensor, Tensor]:
    """Vertices and faces of a parametric grid ``P (nu, nv, 3)``; wrapped axes are glued."""
    nu, nv = P.shape[:2]
    idx = torch.arange(nu * nv).reshape(nu, nv)
    a = idx if wrap_u else idx[:-1]
    iu = torch.arange(a.shape[0])
    ju = (iu + 1) % nu
    cols = torch.arange(nv if wrap_v else nv - 1)
    jv = (cols + 1) % nv
    i00 = idx[iu][:, cols]
    i10 = idx[ju][:, cols]
    i01 = idx[iu][:, jv]
    i11 = idx[ju][:, jv]
    f = torch.cat([torch.stack([i00, i10, i11], -1).reshape(-1, 3), torch.stack([i00, i11, i01], -1).reshape(-1, 3)])
    return P.reshape(-1, 3), f


def _concat(parts):
    vs, fs, off = [], [], 0
    for v, f in parts:
        vs.append(v)
        fs.append(f + off)
        off += v.shape[0]
    return torch.cat(vs), torch.cat(fs)


def _random_rotation(g: torch.Generator) -> Tensor:
    q = torch.randn(4, generator=g, dtype=torch.float64)
    q = q / q.norm()
    w, x, y, z = q
    return torch.tensor([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _sphere_grid(n, theta_max=math.pi):
    th = torch.linspace(0, theta_max, n, dtype=torch.float64)
    ph = torch.linspace(0, 2 * math.pi, n + 1, dtype=torch.float64)[:-1]
    T, Ph = torch.meshgrid(th, ph, indexing="ij")
    return T, Ph


def _raw_shape(kind: str, g: torch.Generator, n: int):
    U = lambda lo, hi: lo + (hi - lo) * float(torch.rand((), generator=g))  # noqa: E731
    if kind in ("sphere", "bumpy_sphere", "superellipsoid", "capsule", "bowl"):
        T, Ph = _sphere_grid(n, math.pi / 2 if kind == "bowl" else math.pi)
        st, ct, sp, cp = T.sin(), T.cos(), Ph.sin(), Ph.cos()
        if kind == "superellipsoid":
            e = U(0.3, 0.6)
            sgn = lambda x: x.sign() * x.abs() ** e  # noqa: E731
            P = torch.stack([sgn(st) * sgn(cp) * U(0.8, 1.2), sgn(st) * sgn(sp), sgn(ct) * U(0.6, 1.0)], -1)
        elif kind == "capsule":
            L = U(0.5, 0.9)
            P = torch.stack([st * cp, st * sp, ct + L * ct.sign()], -1)
        else:
            r = torch.ones_like(T)
            if kind == "bumpy_sphere":
                k, a = int(torch.randint(4, 9, (), generator=g)), U(0.05, 0.12)
                r = 1 + a * torch.sin(k * T) * torch.sin(k * Ph)
            P = torch.stack([r * st * cp, r * st * sp, r * ct], -1)
        return _grid_mesh(P, False, True)
    if kind == "torus":
        R, r = 1.0, U(0.3, 0.5)
        u = torch.linspace(0, 2 * math.pi, n + 1, dtype=torch.float64)[:-1]
        A, B = torch.meshgrid(u, u, indexing="ij")
        P = torch.stack([(R + r * B.cos()) * A.cos(), (R + r * B.cos()) * A.sin(), r * B.sin()], -1)
        return _grid_mesh(P, True, True)
    if kind == "two_blobs":
        T, Ph = _sphere_grid(n // 2 + 2)
        parts = []
        for c, s in (((-0.7, 0.0, 0.0), (0.6, 0.45, 0.4)), ((0.75, 0.1, 0.2), (0.45, 0.55, 0.5))):
            P = torch.stack([s[0] * T.sin() * Ph.cos() + c[0], s[1] * T.sin() * Ph.sin() + c[1],
                             s[2] * T.cos() + c[2]], -1)
            parts.append(_grid_mesh(P, False, True))
        return _concat(parts)
    if kind in ("open_cylinder", "cup"):
        h = U(0.8, 1.4)
        ph = torch.linspace(0, 2 * math.pi, n + 1, dtype=torch.float64)[:-1]
        z = torch.linspace(-h / 2, h / 2, n, dtype=torch.float64)
        Z, Ph = torch.meshgrid(z, ph, indexing="ij")
        tube = _grid_mesh(torch.stack([Ph.cos(), Ph.sin(), Z], -1), False, True)
        if kind == "open_cylinder":
            return tube
        rr = torch.linspace(1.0, 0.0, n // 2, dtype=torch.float64)
        Rr, Ph2 = torch.meshgrid(rr, ph, indexing="ij")
        disk = _grid_mesh(torch.stack([Rr * Ph2.cos(), Rr * Ph2.sin(), torch.full_like(Rr, -h / 2)], -1), False, True)
        return _concat([tube, disk])
    if kind in ("wavy_sheet", "saddle"):
        x = torch.linspace(-1, 1, n, dtype=torch.float64)
        X, Y = torch.meshgrid(x, x, indexing="ij")
        if kind == "wavy_sheet":
            k, a = U(2.0, 4.0), U(0.15, 0.3)
            Zs = a * torch.sin(k * X) * torch.cos(k * Y)
        else:
            Zs = U(0.3, 0.6) * (X * X - Y * Y)
        return _grid_mesh(torch.stack([X, Y, Zs], -1), False, False)
    if kind == "mobius":
        u = torch.linspace(0, 2 * math.pi, 2 * n + 1, dtype=torch.float64)[:-1]
        w = torch.linspace(-0.4, 0.4, max(n // 4, 4), dtype=torch.float64)
        A, Wd = torch.meshgrid(u, w, indexing="ij")
        P = torch.stack([(1 + Wd * (A / 2).cos()) * A.cos(), (1 + Wd * (A / 2).cos()) * A.sin(),
                         Wd * (A / 2).sin()], -1)
        v, f = _grid_mesh(P, False, False)
        # glue the strip with a half twist: the last column row meets the first one reversed
        nu, nw = P.shape[:2]
        last = torch.arange(nw) + (nu - 1) * nw
        first = torch.arange(nw).flip(0)
        extra = torch.cat([torch.stack([last[:-1], first[:-1], first[1:]], -1),
                           torch.stack([last[:-1], first[1:], last[1:]], -1)])
        return v, torch.cat([f, extra])
    raise ValueError(f"kind must be one of {SHAPE_KINDS}, got {kind!r}")


def make_shape(kind: str, seed: int = 0, n_uv: int = 40) -> Mesh:
    """Procedural open/closed mesh in ``[-0.45, 0.45]^3`` (spec Sec. 7.1), seeded."""
    if kind not in SHAPE_KINDS:
        raise ValueError(f"kind must be one of {SHAPE_KINDS}, got {kind!r}")
    if not isinstance(n_uv, int) or n_uv < 8:
        raise ValueError(f"n_uv must be an int >= 8, got {n_uv!r}")
    g = torch.Generator().manual_seed(10_007 * int(seed) + SHAPE_KINDS.index(kind))
    v, f = _raw_shape(kind, g, n_uv)
    scale = torch.tensor([0.8 + 0.4 * float(torch.rand((), generator=g)) for _ in range(3)], dtype=torch.float64)
    v = (v * scale) @ _random_rotation(g).T
    lo, hi = v.min(0).values, v.max(0).values
    v = (v - (lo + hi) / 2) * (0.9 / float((hi - lo).max()))
    return Mesh(v.float().contiguous(), f.long().contiguous(), kind in OPEN_KINDS, kind)


def face_normals(mesh: Mesh) -> tuple[Tensor, Tensor]:
    """Unit face normals ``(F,3)`` and face areas ``(F,)``."""
    a, b, c = (mesh.vertices[mesh.faces[:, i]] for i in range(3))
    n = torch.cross(b - a, c - a, dim=-1)
    area = 0.5 * n.norm(dim=-1)
    return n / n.norm(dim=-1, keepdim=True).clamp_min(1e-20), area


def sample_surface(mesh: Mesh, n: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Area-weighted points ``(n,3)`` and their unit (face) normals ``(n,3)``."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    g = torch.Generator().manual_seed(int(seed))
    nrm, area = face_normals(mesh)
    fid = torch.multinomial(area.cpu().double(), n, replacement=True, generator=g).to(mesh.faces.device)
    r1, r2 = torch.rand(n, generator=g).sqrt(), torch.rand(n, generator=g)
    w = torch.stack([1 - r1, r1 * (1 - r2), r1 * r2], -1).to(mesh.vertices)
    tri = mesh.vertices[mesh.faces[fid]]                     # (n,3,3)
    return (w[:, :, None] * tri).sum(1), nrm[fid]


def shape_set(kinds: Sequence[str], seeds: Sequence[int], n_uv: int = 40) -> list[Mesh]:
    """Cartesian product of kinds and seeds (kind-major)."""
    if len(kinds) == 0 or len(seeds) == 0:
        raise ValueError("kinds and seeds must be non-empty")
    return [make_shape(k, s, n_uv) for k in kinds for s in seeds]
