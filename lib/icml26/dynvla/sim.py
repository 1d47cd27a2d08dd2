"""MiniDrive: a procedural straight-road world with scripted (log-replay) agents (spec Sec. 7.1).

The road runs along +x; lanes are centred at ``(i - (n_lanes - 1) / 2) * lane_width``. Agents
follow non-reactive futures over ``t in [-t_hist, t_agents]`` on a grid of ``dt``; "now" is t = 0.
Everything is vectorised over scenes (numpy); the only Python loop runs over the seven families.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._checks import pos_int, real

ALL_FAMILIES = ("free", "slow_lead", "lead_brake", "cut_out_reveal", "cut_in", "closure", "dense")
KINDS = ("none", "cruise", "brake", "cut_in", "cut_out", "stopped")
CAR_L, CAR_W = 4.5, 1.9


@dataclass(frozen=True)
class WorldConfig:
    """World geometry and timing (spec Sec. 7.1)."""

    n_lanes: int = 3
    lane_width: float = 3.5
    dt: float = 0.1
    t_hist: float = 1.0
    t_future: float = 4.0
    t_agents: float = 5.0
    frame_dt: float = 1.0
    v_max: float = 14.0
    max_agents: int = 5
    families: tuple = ALL_FAMILIES
    dyn_steps: int = 2

    def __post_init__(self):
        pos_int(self.n_lanes, "n_lanes")
        pos_int(self.dyn_steps, "dyn_steps")
        pos_int(self.max_agents, "max_agents", 3)
        for name in ("lane_width", "dt", "frame_dt", "v_max", "t_future", "t_hist", "t_agents"):
            real(getattr(self, name), name, lo=0.0, strict=True)
        r = self.frame_dt / self.dt
        if abs(r - round(r)) > 1e-6:
            raise ValueError(f"frame_dt must be a multiple of dt ({self.dt}), got {self.frame_dt}")
        if self.t_future < self.dyn_steps * self.frame_dt:
            raise ValueError(f"t_future must be >= dyn_steps * frame_dt = {self.dyn_steps * self.frame_dt}, "
                             f"got {self.t_future}")
        if self.t_agents < self.t_future + 0.9:
            raise ValueError(f"t_agents must cover t_future + 0.9 s (TTC look-ahead), got {self.t_agents}")
        if isinstance(self.families, (str, bytes)) or not isinstance(self.families, (tuple, list)) or \
                not self.families or any(f not in ALL_FAMILIES for f in self.families):
            raise ValueError(f"families must be a non-empty subset of {ALL_FAMILIES}, got {self.families!r}")

    @property
    def road_half(self) -> float:
        return self.n_lanes * self.lane_width / 2

    @property
    def lane_centres(self) -> np.ndarray:
        return (np.arange(self.n_lanes) - (self.n_lanes - 1) / 2) * self.lane_width

    @property
    def times(self) -> np.ndarray:
        n = int(round((self.t_hist + self.t_agents) / self.dt)) + 1
        return -self.t_hist + self.dt * np.arange(n)

    def t_index(self, t: float) -> int:
        return int(round((t + self.t_hist) / self.dt))


@dataclass
class ScenarioBatch:
    """N scenes. ``agents[N,T,A,5]`` = (x, y, psi, v, valid) on ``cfg.times``; ``closures[N,5]`` =
    (x0, x1, y0, y1, valid); ``ego_init[N,4]`` = (x, y, psi, v) at t = 0."""

    ego_init: np.ndarray
    agents: np.ndarray
    agent_kind: np.ndarray
    closures: np.ndarray
    family: np.ndarray
    texture_seed: np.ndarray
    cfg: WorldConfig = field(default_factory=WorldConfig)

    def __len__(self) -> int:
        return len(self.ego_init)

    def subset(self, idx) -> ScenarioBatch:
        idx = np.asarray(idx)
        return ScenarioBatch(self.ego_init[idx], self.agents[idx], self.agent_kind[idx], self.closures[idx],
                             self.family[idx], self.texture_seed[idx], self.cfg)


def _quintic(s):
    s = np.clip(s, 0.0, 1.0)
    return s ** 3 * (10 - 15 * s + 6 * s ** 2)


def sample_scenarios(n: int, cfg: WorldConfig | None = None, seed: int = 0) -> ScenarioBatch:
    """Procedural scenes with scripted agent futures, vectorised over scenes (spec Sec. 7.1).

    Families (uniform): free road, slower lead, lead braking, lead cut-out revealing a stopped car,
    cut-in, closure ahead in the ego lane, dense mixed traffic."""
    cfg = WorldConfig() if cfg is None else cfg
    if not isinstance(cfg, WorldConfig):
        raise TypeError(f"cfg must be a WorldConfig, got {type(cfg).__name__}")
    pos_int(n, "n")
    rng = np.random.default_rng(pos_int(seed, "seed", 0))
    A, L = cfg.max_agents, cfg.n_lanes
    lanes = cfg.lane_centres
    fam = rng.integers(0, len(cfg.families), n)
    fam_names = np.array(cfg.families)[fam]
    ego_lane = rng.integers(0, L, n)
    v_e = rng.uniform(8.0, cfg.v_max, n)
    x_e = np.zeros(n)
    # slot parameters
    valid = np.zeros((n, A), bool)
    kind = np.zeros((n, A), int)
    lane0 = rng.integers(0, L, (n, A))
    lane1 = lane0.copy()
    gap = rng.uniform(-25.0, 60.0, (n, A))
    v0 = rng.uniform(5.0, cfg.v_max, (n, A))
    t_on = rng.uniform(-0.5, 1.5, (n, A))
    decel = rng.uniform(3.0, 5.0, (n, A))
    clos = np.zeros((n, 5))

    def adj_lane(m):
        """a random existing neighbour lane of the ego lane (the ego lane itself when L == 1)"""
        el = ego_lane[m]
        d = np.where(rng.random(m.sum()) < 0.5, -1, 1)
        cand = el + d
        cand = np.where((cand < 0) | (cand >= L), el - d, cand)
        return np.clip(cand, 0, L - 1)

    for fi, name in enumerate(cfg.families):
        m = fam == fi
        k = int(m.sum())
        if k == 0:
            continue
        el = ego_lane[m]
        # background traffic in slots 3.. (other lanes, cruising), present with prob 0.5
        bg = rng.random((k, A - 3)) < (0.8 if name == "dense" else 0.4)
        valid[m, 3:] = bg
        kind[m, 3:] = 1
        other = (el[:, None] + rng.integers(1, max(L, 2), (k, A - 3))) % L
        lane0[m, 3:] = other if L > 1 else el[:, None]
        lane1[m, 3:] = lane0[m, 3:]
        if L == 1:  # a single lane: background traffic far ahead only
            gap[m, 3:] = rng.uniform(70.0, 90.0, (k, A - 3))
        s0 = np.where(m)[0]
        if name == "slow_lead":
            valid[s0, 0], kind[s0, 0], lane0[s0, 0] = True, 1, el
            gap[s0, 0], v0[s0, 0] = rng.uniform(15, 35, k), rng.uniform(3, 7, k)
        elif name == "lead_brake":
            valid[s0, 0], kind[s0, 0], lane0[s0, 0] = True, 2, el
            gap[s0, 0], v0[s0, 0] = rng.uniform(12, 25, k), np.clip(v_e[m] + rng.uniform(-1, 1, k), 5, cfg.v_max)
        elif name == "cut_out_reveal":
            valid[s0, 0], kind[s0, 0], lane0[s0, 0] = True, 4, el
            lane1[s0, 0] = adj_lane(m)
            gap[s0, 0], v0[s0, 0] = rng.uniform(10, 18, k), np.clip(v_e[m] + rng.uniform(-1, 0.5, k), 5, cfg.v_max)
            t_on[s0, 0] = rng.uniform(-0.5, 1.0, k)
            valid[s0, 1], kind[s0, 1], lane0[s0, 1] = True, 5, el
            gap[s0, 1], v0[s0, 1] = rng.uniform(35, 50, k), 0.0
        elif name == "cut_in":
            valid[s0, 0], kind[s0, 0] = True, 3
            lane0[s0, 0] = adj_lane(m)
            lane1[s0, 0] = el
            gap[s0, 0] = rng.uniform(5, 15, k)
            v0[s0, 0] = np.clip(v_e[m] - rng.uniform(2, 5, k), 3, cfg.v_max)
            t_on[s0, 0] = rng.uniform(-0.5, 1.0, k)
        elif name == "closure":
            x0 = rng.uniform(25, 45, k)
            clos[s0] = np.stack([x0, x0 + rng.uniform(20, 40, k), lanes[el] - cfg.lane_width / 2,
                                 lanes[el] + cfg.lane_width / 2, np.ones(k)], 1)
        elif name == "dense":
            valid[s0, :3] = rng.random((k, 3)) < 0.8
            kind[s0, :3] = rng.choice([1, 1, 2], (k, 3))
            lane0[s0, :3] = rng.integers(0, L, (k, 3))
            gap[s0, :3] = rng.uniform(12, 60, (k, 3))
            v0[s0, :3] = rng.uniform(5, 12, (k, 3))
            t_on[s0, :3] = rng.uniform(0.0, 2.0, (k, 3))
    lane1 = np.where(np.isin(kind, (3, 4)), lane1, lane0)
    v0 = np.where(kind == 5, 0.0, v0)
    valid &= kind > 0
    # resolve overlaps at t = 0 within a lane: drop a later slot closer than 8 m to an earlier one
    # (or to the ego) in the same initial lane; background slots only
    for a in range(1, A):
        close_ego = (lane0[:, a] == ego_lane) & (np.abs(gap[:, a]) < 10.0) & (a >= 3)
        bad = close_ego.copy()
        for b in range(a):
            bad |= valid[:, b] & (lane0[:, a] == lane0[:, b]) & (np.abs(gap[:, a] - gap[:, b]) < 10.0)
        valid[:, a] &= ~bad
    # ---- futures (closed form, vectorised) ------------------------------------------------------
    t = cfg.times[None, :, None]                                     # [1,T,1]
    g, v, tb, d = gap[:, None], v0[:, None], t_on[:, None], decel[:, None]
    brake = (kind == 2)[:, None]
    s = np.clip(t - tb, 0.0, v / d)
    x_brake = v * np.minimum(t, tb) + v * s - 0.5 * d * s ** 2
    v_brake = np.where(t < tb, v, v - d * s)
    x = np.where(brake, x_brake, v * t) + g + x_e[:, None, None]
    vel = np.where(brake, v_brake, np.broadcast_to(v, x.shape))
    y_from, y_to = lanes[lane0][:, None], lanes[lane1][:, None]
    y = y_from + (y_to - y_from) * _quintic((t - tb) / 2.5)
    y = np.broadcast_to(y, x.shape).copy()
    # heading from the path tangent (finite differences on the time grid)
    dx = np.gradient(x, cfg.dt, axis=1)
    dy = np.gradient(y, cfg.dt, axis=1)
    psi = np.where(np.hypot(dx, dy) > 0.1, np.arctan2(dy, np.maximum(dx, 1e-6)), 0.0)
    vv = np.broadcast_to(valid[:, None], x.shape).astype(float)
    agents = np.stack([x, y, psi, vel, vv], -1)
    ego_init = np.stack([x_e, lanes[ego_lane], np.zeros(n), v_e], 1)
    kind = np.where(valid, kind, 0)
    return ScenarioBatch(ego_init, agents.astype(np.float64), kind, clos, fam_names,
                         rng.integers(0, 10_000, n), cfg)


def hand_scene(ego_speed: float, agents=(), closure=None, ego_lane: int | None = None,
               cfg: WorldConfig | None = None) -> ScenarioBatch:
    """One hand-made scene: the ego at x = 0 in ``ego_lane`` (default: the middle lane) at
    ``ego_speed``; ``agents`` = [(x, y, v), ...] at t = 0, driving straight at constant speed v;
    ``closure`` = (x0, x1, y0, y1) or None. Used for the spec's hand cases."""
    cfg = cfg or WorldConfig()
    if not np.isfinite(ego_speed) or ego_speed < 0:
        raise ValueError(f"ego_speed must be a finite number >= 0, got {ego_speed!r}")
    if len(agents) > cfg.max_agents:
        raise ValueError(f"at most {cfg.max_agents} agents, got {len(agents)}")
    lane = cfg.n_lanes // 2 if ego_lane is None else ego_lane
    t = cfg.times
    A = cfg.max_agents
    ag = np.zeros((1, len(t), A, 5))
    for i, (x, y, v) in enumerate(agents):
        ag[0, :, i] = np.stack([x + v * t, np.full_like(t, y), 0 * t, np.full_like(t, v), np.ones_like(t)], -1)
    kind = np.zeros((1, A), int)
    kind[0, : len(agents)] = 1
    clo = np.zeros((1, 5)) if closure is None else np.array([[*closure, 1.0]])
    ego = np.array([[0.0, cfg.lane_centres[lane], 0.0, float(ego_speed)]])
    return ScenarioBatch(ego, ag, kind, clo, np.array(["hand"]), np.zeros(1, int), cfg)
