"""The driving dataset (spec Sec. 7.1 and 7.3): scenes, frames, expert plans, labels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ._checks import real
from .actions import FastLite
from .metric import states_t
from .planners import constant_velocity_plan, expert_plan
from .render import RasterConfig, render_bev, render_camera
from .sim import ScenarioBatch, WorldConfig, sample_scenarios

LAT = ("keep", "left", "right")
LON = ("accelerate", "keep", "decelerate", "stop")
FRAME_TIMES = (-1.0, 0.0, 1.0, 2.0)
LUM_RANGE = (0.30, 0.55)  # contrast window of the pooled luminance (book choice)


@dataclass
class DriveData:
    """Scenes plus frames O_{-1..2} (camera [N,4,3,H,W]), BEV_{-1..2} [N,4,H,W], the expert plan,
    its EP normaliser, the CV plan, ego motions between consecutive frames [N,3,(dx,dy,dpsi)],
    meta-action labels [N,2], future-image tokens [N,64] and the ego speed [N]."""

    batch: ScenarioBatch
    cam: torch.Tensor
    bev: torch.Tensor
    plan: np.ndarray
    ref: np.ndarray
    cv: np.ndarray
    ego_motion: torch.Tensor
    meta: torch.Tensor
    fut_img: torch.Tensor
    speed: torch.Tensor

    def __len__(self):
        return len(self.plan)

    def subset(self, idx) -> DriveData:
        idx = np.asarray(idx)
        ti = torch.as_tensor(idx)
        return DriveData(self.batch.subset(idx), self.cam[ti], self.bev[ti], self.plan[idx], self.ref[idx],
                         self.cv[idx], self.ego_motion[ti], self.meta[ti], self.fut_img[ti], self.speed[ti])

    def pairs(self):
        """Tokenizer frame pairs (O_k, O_k+1), k = -1, 0, 1: (o_t, o_t1, bev_t, bev_t1, motion)."""
        o_t = self.cam[:, :3].flatten(0, 1)
        o_t1 = self.cam[:, 1:].flatten(0, 1)
        return o_t, o_t1, self.bev[:, :3].flatten(0, 1), self.bev[:, 1:].flatten(0, 1), self.ego_motion.flatten(0, 1)


def ego_poses(batch: ScenarioBatch, plan: np.ndarray) -> np.ndarray:
    """[N,4,3] world poses at FRAME_TIMES: the constant-speed history, then the logged plan."""
    st = states_t(torch.as_tensor(plan, dtype=torch.float64)).numpy()               # [N,41,6]
    x0, y0, v = batch.ego_init[:, 0], batch.ego_init[:, 1], batch.ego_init[:, 3]
    poses = [np.stack([x0 - v, y0, np.zeros_like(x0)], 1), np.stack([x0, y0, np.zeros_like(x0)], 1)]
    for t in FRAME_TIMES[2:]:
        k = int(round(t / 0.1))
        poses.append(np.stack([x0 + st[:, k, 0], y0 + st[:, k, 1], st[:, k, 2]], 1))
    return np.stack(poses, 1)


def relative_motion(pa: np.ndarray, pb: np.ndarray) -> np.ndarray:
    """Pose b in the frame of pose a: (dx, dy, dpsi)."""
    c, s = np.cos(pa[..., 2]), np.sin(pa[..., 2])
    dx, dy = pb[..., 0] - pa[..., 0], pb[..., 1] - pa[..., 1]
    return np.stack([c * dx + s * dy, -s * dx + c * dy, pb[..., 2] - pa[..., 2]], -1)


def meta_labels(plan: np.ndarray, v0: np.ndarray, lane_width: float) -> np.ndarray:
    """[N,2] (lateral in LAT, longitudinal in LON) derived from the expert plan."""
    lat = np.where(plan[:, -1, 1] > lane_width / 2, 1, np.where(plan[:, -1, 1] < -lane_width / 2, 2, 0))
    v_end = np.hypot(*(plan[:, -1] - plan[:, -2]).T) / 0.5
    lon = np.where(v_end < 0.5, 3, np.where(v_end > v0 + 1.0, 0, np.where(v_end < v0 - 1.0, 2, 1)))
    return np.stack([lat, lon], 1)


def future_image_tokens(cam_future: np.ndarray, levels: int = 8) -> np.ndarray:
    """Luminance of the future rasters [N,K,3,H,W], average-pooled 4x4 to [N,K,8,4], quantised to
    ``levels`` intensity levels -> [N, K*32] tokens."""
    lum = cam_future.mean(2)
    N, K, H, W = lum.shape
    pooled = lum.reshape(N, K, H // 4, 4, W // 4, 4).mean((3, 5))
    lo, hi = LUM_RANGE
    return np.clip(np.floor((pooled - lo) / (hi - lo) * levels), 0, levels - 1).reshape(N, -1).astype(np.int64)


def build_dataset(n: int, cfg: WorldConfig | None = None, seed: int = 0, raster: RasterConfig | None = None,
                  noise_p: float = 0.15) -> DriveData:
    """Scenes, frames at t = -1, 0, 1, 2 s (future frames around the *logged* expert poses), BEV maps,
    expert and CV plans, ego motions, meta labels and future-image tokens."""
    if raster is not None and not isinstance(raster, RasterConfig):
        raise TypeError(f"raster must be a RasterConfig, got {type(raster).__name__}")
    if not 0.0 <= real(noise_p, "noise_p") <= 1.0:
        raise ValueError(f"noise_p must be a probability in [0, 1], got {noise_p!r}")
    cfg = WorldConfig() if cfg is None else cfg
    raster = raster or RasterConfig()
    batch = sample_scenarios(n, cfg, seed)
    plan, ref = expert_plan(batch, noise_p=noise_p, seed=seed + 1)
    poses = ego_poses(batch, plan)
    cam = np.stack([render_camera(batch, t, poses[:, i], raster) for i, t in enumerate(FRAME_TIMES)], 1)
    bev = np.stack([render_bev(batch, t, poses[:, i], raster) for i, t in enumerate(FRAME_TIMES)], 1)
    motion = relative_motion(poses[:, :-1], poses[:, 1:])
    meta = meta_labels(plan, batch.ego_init[:, 3], cfg.lane_width)
    fut = future_image_tokens(cam[:, 2:])
    return DriveData(batch, torch.from_numpy(cam), torch.from_numpy(bev), plan, ref, constant_velocity_plan(batch),
                     torch.from_numpy(motion).float(), torch.from_numpy(meta), torch.from_numpy(fut),
                     torch.from_numpy(batch.ego_init[:, 3]).float())


def fast_default() -> FastLite:
    return FastLite()
