"""Ego-centric rasters (spec Sec. 7.1): a camera-like colour raster and a BEV class map.

The ego sits at row ``ego_row`` heading up; rows are ``cell_long`` metres, columns ``cell_lat``
metres. The off-road texture and the dashed lane markings are fixed in the *world* frame, so the
change between two frames reveals the ego's own motion. Vectorised over scenes and cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import pos_int, real
from .sim import CAR_L, CAR_W, ScenarioBatch

BEV_CLASSES = ("off-road", "road", "vehicle", "closure")
ROAD, MARK, CAR, CONE = (0.42, 0.42, 0.45), (0.95, 0.95, 0.95), (0.85, 0.1, 0.1), (1.0, 0.55, 0.0)


@dataclass(frozen=True)
class RasterConfig:
    H: int = 32
    W: int = 16
    cell_long: float = 2.0
    cell_lat: float = 1.0
    ego_row: int = 25
    supersample: int = 2
    texture_scale: float = 0.5

    def __post_init__(self):
        for k in ("H", "W", "supersample"):
            pos_int(getattr(self, k), k)
        for k in ("cell_long", "cell_lat", "texture_scale"):
            real(getattr(self, k), k, lo=0.0, strict=True)
        if pos_int(self.ego_row, "ego_row", 0) >= self.H:
            raise ValueError(f"ego_row must be a row of the raster, in [0, H={self.H}), got {self.ego_row}")


def _points(cfg: RasterConfig, ss: int):
    """Ego-frame sample points (forward, left) [H,W,ss*ss,2]."""
    r = np.arange(cfg.H)[:, None, None]
    c = np.arange(cfg.W)[None, :, None]
    off = (np.arange(ss) + 0.5) / ss - 0.5
    oy, ox = np.meshgrid(off, off, indexing="ij")
    oy, ox = oy.ravel()[None, None], ox.ravel()[None, None]
    fwd = (cfg.ego_row - r - oy) * cfg.cell_long
    left = (cfg.W / 2 - c - 0.5 - ox) * cfg.cell_lat
    return np.stack(np.broadcast_arrays(fwd, left), -1).astype(float)


def _world(pose, pts):
    """pose [N,3] (x, y, psi), pts [...,2] ego frame -> world [N,...,2]."""
    x, y, p = (pose[:, i].reshape((-1,) + (1,) * (pts.ndim - 1)) for i in range(3))
    c, s = np.cos(p), np.sin(p)
    return np.stack([x + c * pts[..., 0] - s * pts[..., 1], y + s * pts[..., 0] + c * pts[..., 1]], -1)


def _layers(batch: ScenarioBatch, t: float, pose, pts):
    """Per sample point: road, marking, vehicle, closure masks and the world texture value."""
    w = batch.cfg
    P = _world(np.asarray(pose, float), pts)                                    # [N,H,W,S,2]
    X, Y = P[..., 0], P[..., 1]
    road = np.abs(Y) <= w.road_half
    bounds = w.lane_centres[:-1] + w.lane_width / 2
    near = np.min(np.abs(Y[..., None] - bounds), -1) if len(bounds) else np.full(Y.shape, np.inf)
    edge = np.abs(np.abs(Y) - w.road_half) < 0.3
    mark = road & ((near < 0.3) & (np.mod(X, 6.0) < 3.0) | edge)
    k = w.t_index(t)
    ag = batch.agents[:, k]                                                     # [N,A,5]
    sh = (-1,) + (1,) * (X.ndim - 1)
    car = np.zeros(X.shape, bool)
    for a in range(ag.shape[1]):                                                # A <= 5 slots
        ax, ay, ap, val = (ag[:, a, i].reshape(sh) for i in (0, 1, 2, 4))
        dx, dy = X - ax, Y - ay
        u = np.cos(ap) * dx + np.sin(ap) * dy
        v = -np.sin(ap) * dx + np.cos(ap) * dy
        car |= (val > 0.5) & (np.abs(u) <= CAR_L / 2) & (np.abs(v) <= CAR_W / 2)
    cl = batch.closures
    cone = (cl[:, 4].reshape(sh) > 0.5) & (X >= cl[:, 0].reshape(sh)) & (X <= cl[:, 1].reshape(sh)) & \
        (Y >= cl[:, 2].reshape(sh)) & (Y <= cl[:, 3].reshape(sh))
    return road, mark, car, cone, X, Y


def _texture(X, Y, seed, scale):
    ix, iy = np.floor(X / scale), np.floor(Y / scale)
    s = seed.reshape((-1,) + (1,) * (X.ndim - 1)).astype(float)
    h = np.sin(ix * 12.9898 + iy * 78.233 + s * 0.1234) * 43758.5453
    return h - np.floor(h)


def _check(batch, t, pose):
    if not isinstance(batch, ScenarioBatch):
        raise TypeError(f"batch must be a ScenarioBatch, got {type(batch).__name__}")
    w = batch.cfg
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not (-w.t_hist - 1e-9 <= t <= w.t_agents + 1e-9):
        raise ValueError(f"t must be a time in [{-w.t_hist}, {w.t_agents}], got {t!r}")
    pose = np.asarray(pose, float)
    if pose.shape != (len(batch), 3) or not np.isfinite(pose).all():
        raise ValueError(f"ego_pose must be a finite array of shape ({len(batch)}, 3), got {pose.shape}")
    return pose


def _check_cfg(cfg) -> RasterConfig:
    if cfg is None:
        return RasterConfig()
    if not isinstance(cfg, RasterConfig):
        raise TypeError(f"cfg must be a RasterConfig, got {type(cfg).__name__}")
    return cfg


def render_camera(batch: ScenarioBatch, t: float, ego_pose, cfg: RasterConfig | None = None) -> np.ndarray:
    """[N,3,H,W] float32 camera-like raster at time ``t`` around ``ego_pose[N,3]``, each cell the
    mean of ``supersample**2`` samples."""
    cfg = _check_cfg(cfg)
    pose = _check(batch, t, ego_pose)
    road, mark, car, cone, X, Y = _layers(batch, t, pose, _points(cfg, cfg.supersample))
    tex = _texture(X, Y, batch.texture_seed, cfg.texture_scale)
    img = np.empty(X.shape + (3,))
    img[...] = np.stack([0.25 + 0.35 * tex, 0.45 + 0.3 * tex, 0.2 + 0.1 * tex], -1)
    img[road] = ROAD
    img[mark] = MARK
    img[cone] = CONE
    img[car] = CAR
    return img.mean(3).transpose(0, 3, 1, 2).astype(np.float32)


def render_bev(batch: ScenarioBatch, t: float, ego_pose, cfg: RasterConfig | None = None) -> np.ndarray:
    """[N,H,W] int64 classes at cell centres: 0 off-road, 1 road, 2 vehicle, 3 closure."""
    cfg = _check_cfg(cfg)
    pose = _check(batch, t, ego_pose)
    road, _, car, cone, _, _ = _layers(batch, t, pose, _points(cfg, 1))
    out = np.where(car, 2, np.where(cone, 3, np.where(road, 1, 0)))
    return out[..., 0].astype(np.int64)
