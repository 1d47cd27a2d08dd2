"""Sparse voxel grids as coordinate tensors plus an index (spec Sec. 3.1-3.2).

A :class:`SparseGrid` holds the integer coordinates of the active voxels of an ``res^3`` grid over
the cube ``[-0.5, 0.5]^3``; neighbour look-ups (what the sparse convolution and neighbourhood
attention gather from) go through a dense ``res^3`` table of row indices while that table stays
under :data:`DENSE_INDEX_MAX_BYTES` (``res <= 128``), and through the sorted voxel keys (binary
search, memory linear in the number of voxels) above: one voxel at ``res = 1024`` costs bytes, not
the 8 GiB of a dense table.
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor

from ..core.checks import check_device  # noqa: F401

#: the eight corner offsets of a cube, bit order (dx, dy, dz)
CORNERS = torch.tensor(list(itertools.product((0, 1), repeat=3)), dtype=torch.long)
#: largest dense index table (int64 entries, one per cell of the grid), in bytes; larger grids look
#: voxels up in their sorted keys instead
DENSE_INDEX_MAX_BYTES = 64 * 1024 ** 2
#: largest grid resolution: keys ``(x res + y) res + z`` of the ``(res + 1)^3`` vertex lattice fit int64
MAX_RES = 2 ** 20


def check_res(res, name: str = "res") -> int:
    if not isinstance(res, int) or isinstance(res, bool) or res < 1 or res & (res - 1):
        raise ValueError(f"{name} must be a positive power of two, got {res!r}")
    if res > MAX_RES:
        raise ValueError(f"{name} must be at most MAX_RES = 2**20 (voxel keys must fit int64), got {res}")
    return res


class _KeyIndex:
    """Row of each integer key among ``keys (N,)``, -1 where absent: a dense table of ``size`` entries
    when it fits :data:`DENSE_INDEX_MAX_BYTES`, else the sorted keys and a binary search. Both give the
    same rows for unique keys."""

    def __init__(self, keys: Tensor, size: int):
        n, dev = keys.shape[0], keys.device
        self.size = size
        if 8 * size <= DENSE_INDEX_MAX_BYTES:
            dense = torch.full((size,), -1, dtype=torch.long, device=dev)
            dense[keys] = torch.arange(n, device=dev)
            self.dense, self.n_unique = dense, int((dense >= 0).sum()) if n else 0
        else:
            self.dense = None
            self.sorted, self.rows = torch.sort(keys)
            self.n_unique = int(torch.unique_consecutive(self.sorted).numel())

    def __call__(self, k: Tensor) -> Tensor:
        """Rows of keys ``k`` (any shape, each in ``[0, size)``)."""
        if self.dense is not None:
            return self.dense[k]
        if self.sorted.numel() == 0:
            return torch.full_like(k, -1)
        pos = torch.searchsorted(self.sorted, k.reshape(-1)).clamp_max(self.sorted.numel() - 1).reshape(k.shape)
        return torch.where(self.sorted[pos] == k, self.rows[pos], torch.full_like(k, -1))


def cube_offsets(k: int = 3) -> Tensor:
    """All ``k^3`` integer offsets of a ``k x k x k`` neighbourhood, x-major (as ``conv3d`` weights)."""
    r = range(-(k // 2), k // 2 + 1)
    return torch.tensor(list(itertools.product(r, r, r)), dtype=torch.long)


def voxelize_points(points: Tensor, res: int) -> Tensor:
    """Unique integer coordinates ``(N,3)`` of the voxels of ``[-0.5,0.5]^3`` that contain a point."""
    check_res(res)
    if not isinstance(points, Tensor) or points.ndim != 2 or points.shape[1] != 3 or points.shape[0] == 0:
        raise ValueError(f"points must be a non-empty (P,3) tensor, got {getattr(points, 'shape', points)!r}")
    if not torch.isfinite(points).all():
        raise ValueError("points must be finite")
    idx = ((points + 0.5) * res).floor().long().clamp(0, res - 1)
    return unique_rows(idx, res)


def unique_rows(rows: Tensor, base: int, return_inverse: bool = False):
    """``torch.unique(rows, dim=0[, return_inverse=True])`` for integer rows with entries in ``[0, base)``:
    the same sorted rows (lexicographic order is the order of the mixed-radix key) and inverse, through a
    1-D unique on one int64 key per row, several times faster on CPU than ``unique(dim=0)``."""
    if rows.ndim != 2 or rows.shape[1] == 0 or rows.dtype.is_floating_point:
        raise ValueError(f"rows must be a 2-D integer tensor, got {rows.dtype} {tuple(rows.shape)}")
    if not (isinstance(base, int) and base >= 1) or base ** rows.shape[1] >= 2 ** 62:
        raise ValueError(f"base must be a positive int with base**columns < 2**62, got {base!r}")
    key = torch.zeros(rows.shape[0], dtype=torch.long, device=rows.device)
    for j in range(rows.shape[1]):                 # columns, not samples
        key = key * base + rows[:, j].long()
    uk, inv = torch.unique(key, sorted=True, return_inverse=True)
    out = torch.empty(uk.shape[0], rows.shape[1], dtype=rows.dtype, device=rows.device)
    for j in reversed(range(rows.shape[1])):
        out[:, j] = (uk % base).to(rows.dtype)
        uk = torch.div(uk, base, rounding_mode="floor")
    return (out, inv) if return_inverse else out


def point_voxel_index(points: Tensor, res: int) -> Tensor:
    return ((points + 0.5) * res).floor().long().clamp(0, res - 1)


class SparseGrid:
    """Active voxels ``coords (N,3)`` of a ``res^3`` grid, a dense index grid and neighbour tables."""

    def __init__(self, coords: Tensor, res: int, check: bool = True):
        check_res(res)
        if not isinstance(coords, Tensor) or coords.ndim != 2 or coords.shape[1] != 3:
            raise ValueError(f"coords must be an (N,3) integer tensor, got {getattr(coords, 'shape', coords)!r}")
        if coords.shape[0] == 0:
            raise ValueError("coords must hold at least one voxel (empty voxel set)")
        if coords.dtype.is_floating_point:
            raise ValueError("coords must be an integer tensor")
        coords = coords.long()
        if check and (int(coords.min()) < 0 or int(coords.max()) >= res):
            raise ValueError(f"coords must lie in [0, {res}), got [{int(coords.min())}, {int(coords.max())}]")
        self.coords, self.res = coords, res
        self._index = _KeyIndex(self.key(coords), res ** 3)
        if check and self._index.n_unique != coords.shape[0]:
            raise ValueError("coords must be unique (duplicate voxel coordinates)")
        self._nbr: dict = {}
        self._corners = None

    def __len__(self) -> int:
        return self.coords.shape[0]

    @property
    def device(self):
        return self.coords.device

    @property
    def h(self) -> float:
        return 1.0 / self.res

    def key(self, c: Tensor) -> Tensor:
        return (c[..., 0] * self.res + c[..., 1]) * self.res + c[..., 2]

    def lookup(self, c: Tensor) -> Tensor:
        """Row index of integer coordinates ``c (...,3)``; -1 where absent or outside the grid."""
        inside = ((c >= 0) & (c < self.res)).all(-1)
        k = self.key(c.clamp(0, self.res - 1))
        return torch.where(inside, self._index(k), torch.full_like(k, -1))

    def centers(self) -> Tensor:
        """World coordinates of the voxel centres ``(N,3)``."""
        return (self.coords.float() + 0.5) / self.res - 0.5

    def to(self, dev) -> SparseGrid:
        return SparseGrid(self.coords.to(dev), self.res, check=False)

    def select(self, keep: Tensor) -> SparseGrid:
        return SparseGrid(self.coords[keep], self.res, check=False)

    def neighbors(self, offsets: Tensor) -> Tensor:
        """``(N,K)`` row indices of the voxels at ``coords + offsets``; -1 where absent."""
        key = tuple(offsets.flatten().tolist())
        if key not in self._nbr:
            self._nbr[key] = self.lookup(self.coords[:, None, :] + offsets.to(self.device)[None])
        return self._nbr[key]

    def subdivide(self) -> tuple[SparseGrid, Tensor]:
        """Children grid at ``2 res`` (8 per voxel, child ``j`` of voxel ``i`` at row ``8 i + j``) and the
        parent index ``(8N,)``."""
        ch = (2 * self.coords[:, None, :] + CORNERS.to(self.device)[None]).reshape(-1, 3)
        parent = torch.arange(len(self), device=self.device).repeat_interleave(8)
        return SparseGrid(ch, 2 * self.res, check=False), parent

    def corner_vertices(self) -> tuple[Tensor, Tensor]:
        """Unique corner-vertex coordinates ``(V,3)`` on the ``(res+1)^3`` lattice and the voxel->vertex
        index ``(N,8)`` (corner order :data:`CORNERS`)."""
        if self._corners is None:
            c = self.coords[:, None, :] + CORNERS.to(self.device)[None]
            r1 = self.res + 1
            key = (c[..., 0] * r1 + c[..., 1]) * r1 + c[..., 2]
            uk, inv = torch.unique(key.reshape(-1), return_inverse=True)
            verts = torch.stack([uk // (r1 * r1), (uk // r1) % r1, uk % r1], -1)
            self._corners = (verts, inv.reshape(-1, 8))
        return self._corners


def shared_corner_average(corner_sdf: Tensor, cube_vertex: Tensor, n_vertices: int) -> tuple[Tensor, Tensor]:
    """Per-vertex mean of the corner values of all voxels sharing the vertex (TRELLIS ``sparse_cube2verts``)
    and the consistency loss ``L_cons = mean (s_hat_{j,c} - s_{v(j,c)})^2`` (spec Sec. 3.2)."""
    if corner_sdf.shape != cube_vertex.shape or corner_sdf.ndim != 2 or corner_sdf.shape[1] != 8:
        raise ValueError(f"corner_sdf and cube_vertex must both be (M,8), got {tuple(corner_sdf.shape)} "
                         f"and {tuple(cube_vertex.shape)}")
    flat = cube_vertex.reshape(-1)
    s = torch.zeros(n_vertices, dtype=corner_sdf.dtype, device=corner_sdf.device)
    s = s.scatter_reduce(0, flat, corner_sdf.reshape(-1), reduce="mean", include_self=False)
    cons = ((corner_sdf - s[cube_vertex]) ** 2).mean()
    return s, cons


def vertex_edges(vertex_coords: Tensor, res: int) -> Tensor:
    """``(E,2)`` index pairs of lattice edges whose two end vertices both exist (vertex look-ups as in
    :class:`SparseGrid`: dense table on small lattices, sorted keys on large ones)."""
    r1 = res + 1
    key = (vertex_coords[:, 0] * r1 + vertex_coords[:, 1]) * r1 + vertex_coords[:, 2]
    index = _KeyIndex(key, r1 ** 3)
    out = []
    for ax in range(3):
        c = vertex_coords.clone()
        c[:, ax] += 1
        ok = c[:, ax] < r1
        k = (c[:, 0] * r1 + c[:, 1]) * r1 + c[:, 2]
        j = torch.where(ok, index(k.clamp(max=r1 ** 3 - 1)), torch.full_like(k, -1))
        i = torch.arange(vertex_coords.shape[0], device=vertex_coords.device)
        out.append(torch.stack([i[j >= 0], j[j >= 0]], -1))
    return torch.cat(out)
