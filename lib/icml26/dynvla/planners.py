"""Planners: the privileged PDM-Closed-like expert and constant velocity (spec Sec. 7.1)."""

from __future__ import annotations

import numpy as np
import torch

from ._checks import pos_int, real
from .metric import PDMSConfig, pdm_score_t, scene_tensors
from .sim import CAR_L, ScenarioBatch, _quintic

SPEED_FRACS = (0.0, 0.5, 0.8, 1.0)
IDM = dict(a_max=1.5, b=2.0, s0=2.0, T=1.5, delta=4.0, a_min=-4.0, a_top=2.0, jerk=3.5)


def _check_batch(batch):
    if not isinstance(batch, ScenarioBatch):
        raise TypeError(f"batch must be a ScenarioBatch, got {type(batch).__name__}")


def expert_candidates(batch: ScenarioBatch, cfg=None) -> np.ndarray:
    """[N,M,8,2] ego-frame candidates: {current, left, right lane} x {0, .5, .8, 1} x v_max target
    speeds. Longitudinal IDM towards the target speed behind the true future leader (agents and
    closures in the ego's or target lane), accelerations clipped to [-4, 2] m/s^2 and rate-limited
    (jerk 3.5 m/s^3); lateral quintic blend to the target lane over 3 s. Missing lanes repeat the
    current lane. ``cfg`` (optional) overrides the IDM parameters (dict)."""
    _check_batch(batch)
    p = dict(IDM, **(cfg or {}))
    w = batch.cfg
    N, lanes = len(batch), w.lane_centres
    ego_lane = np.argmin(np.abs(batch.ego_init[:, 1:2] - lanes[None]), 1)
    tgt_lane = np.clip(ego_lane[:, None] + np.array([0, -1, 1])[None], 0, w.n_lanes - 1)     # [N,3]
    tl = np.repeat(tgt_lane, len(SPEED_FRACS), 1)                                          # [N,M]
    vt = np.tile(np.array(SPEED_FRACS) * w.v_max, 3)[None].repeat(N, 0)
    M = tl.shape[1]
    y_from, y_to = batch.ego_init[:, 1:2], lanes[tl]
    x = np.repeat(batch.ego_init[:, 0:1], M, 1)
    v = np.repeat(batch.ego_init[:, 3:4], M, 1)
    a_prev = np.zeros((N, M))
    i0, steps = w.t_index(0.0), int(round(w.t_future / w.dt))
    xs, ys = [np.zeros((N, M))], [np.zeros((N, M))]
    clo = batch.closures
    v0 = np.maximum(vt, 0.1)
    for k in range(steps):
        t = k * w.dt
        y = y_from + (y_to - y_from) * _quintic(t / 3.0)
        ag = batch.agents[:, i0 + k]                                                         # [N,A,5]
        ay, ax, av, aval = ag[:, None, :, 1], ag[:, None, :, 0], ag[:, None, :, 3], ag[:, None, :, 4] > 0.5
        inway = aval & ((np.abs(ay - y[..., None]) < 2.6) | (np.abs(ay - y_to[..., None]) < 2.6))
        gap = ax - x[..., None] - CAR_L
        ahead = inway & (ax > x[..., None])
        gap = np.where(ahead, gap, np.inf)
        # closures act as a standing obstacle at their start
        cl_in = (clo[:, None, 4] > 0.5) & (np.maximum(np.abs(y - (clo[:, None, 2] + clo[:, None, 3]) / 2),
                                                       np.abs(y_to - (clo[:, None, 2] + clo[:, None, 3]) / 2)) < 2.6) \
            & (clo[:, None, 1] > x)
        cgap = np.where(cl_in, clo[:, None, 0] - x - CAR_L / 2, np.inf)
        j = np.argmin(gap, -1)
        g = np.take_along_axis(gap, j[..., None], -1)[..., 0]
        vl = np.take_along_axis(np.broadcast_to(av, gap.shape), j[..., None], -1)[..., 0]
        vl = np.where(cgap < g, 0.0, vl)
        g = np.minimum(g, cgap)
        free = p["a_max"] * (1 - np.minimum(v / v0, 10.0) ** p["delta"])
        sstar = p["s0"] + v * p["T"] + v * (v - vl) / (2 * np.sqrt(p["a_max"] * p["b"]))
        inter = np.where(np.isfinite(g), -p["a_max"] * (np.maximum(sstar, 0) / np.maximum(g, 0.1)) ** 2, 0.0)
        a = np.clip(free + inter, p["a_min"], p["a_top"])
        a = np.clip(a, a_prev - p["jerk"] * w.dt, a_prev + p["jerk"] * w.dt)
        v_new = np.maximum(v + a * w.dt, 0.0)
        x = x + 0.5 * (v + v_new) * w.dt
        a_prev = (v_new - v) / w.dt
        v = v_new
        xs.append(x - batch.ego_init[:, 0:1])
        ys.append(y_from + (y_to - y_from) * _quintic((t + w.dt) / 3.0) - batch.ego_init[:, 1:2])
    X, Y = np.stack(xs, -1), np.stack(ys, -1)                                                # [N,M,41]
    sub = int(round(0.5 / w.dt))
    idx = np.arange(sub, steps + 1, sub)
    return np.stack([X[..., idx], Y[..., idx]], -1)


def score_candidates(batch: ScenarioBatch, cand: np.ndarray, pcfg: PDMSConfig | None = None, chunk: int = 256):
    """PDMS sub-metrics of the candidates, normalised by the candidate set itself (EP's reference)."""
    sc = scene_tensors(batch, dtype=torch.float64)
    outs = []
    for i in range(0, len(batch), chunk):
        sl = slice(i, i + chunk)
        outs.append(pdm_score_t(sc.index(sl), torch.from_numpy(cand[sl]), None, pcfg))
    return {k: torch.cat([o[k] for o in outs]).numpy() for k in outs[0]}


def expert_plan(batch: ScenarioBatch, noise_p: float = 0.15, seed: int = 0, return_all: bool = False):
    """The demonstration: the best-scoring candidate (ties: stay in lane, then more progress); with
    probability ``noise_p`` the second best when its PDMS is within 0.1 ("human noise").
    Returns ([N,8,2] plan, [N] EP normaliser = max candidate progress x NC x DAC)."""
    _check_batch(batch)
    if not 0.0 <= real(noise_p, "noise_p") <= 1.0:
        raise ValueError(f"noise_p must be in [0, 1], got {noise_p!r}")
    cand = expert_candidates(batch)
    sc = score_candidates(batch, cand)
    N, M = sc["pdms"].shape
    stay = (np.arange(M) < len(SPEED_FRACS))[None]
    key = np.round(sc["pdms"], 6) + 1e-7 * stay + 1e-10 * sc["raw_progress"]
    order = np.argsort(-key, 1)
    best, second = order[:, 0], order[:, 1]
    ar = np.arange(N)
    rng = np.random.default_rng(pos_int(seed, "seed", 0))
    take2 = (rng.random(N) < noise_p) & (sc["pdms"][ar, second] >= sc["pdms"][ar, best] - 0.1)
    pick = np.where(take2, second, best)
    ref = sc["progress"].max(1)
    if return_all:
        return cand[ar, pick], ref, dict(cand=cand, scores=sc, pick=pick)
    return cand[ar, pick], ref


def constant_velocity_plan(batch: ScenarioBatch) -> np.ndarray:
    """[N,8,2]: keep the current speed and lane."""
    _check_batch(batch)
    t = 0.5 * np.arange(1, 9)
    x = batch.ego_init[:, 3:4] * t[None]
    return np.stack([x, np.zeros_like(x)], -1)
