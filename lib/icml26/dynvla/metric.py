"""The NAVSIM-style PDM score on MiniDrive (spec Sec. 4.1 and 7.1), batched torch.

PDMS = NC x DAC x (5 EP + 5 TTC + 2 C) / 12 per scene, averaged over scenes (the paper's NAVSIM
metric, Sec. 5). Everything is vectorised over scenes, proposals, time steps and agents; the numpy
entry points (:func:`boxes_overlap`, :func:`pdm_score`) wrap the torch kernels, which RFT calls
directly on the training device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ._checks import pos_int, real, unit_interval
from .sim import CAR_L, CAR_W, ScenarioBatch

NAVSIM_BOUNDS = dict(a_lon=(-4.05, 2.40), a_lat=4.89, jerk=8.37, jerk_lon=4.13, yaw_rate=0.95, yaw_acc=1.93)
N_WP, WP_DT = 8, 0.5


@dataclass(frozen=True)
class PDMSConfig:
    """Weights, TTC look-ahead offsets (s), the EP threshold (m) and NAVSIM's comfort bounds."""

    w_ep: float = 5.0
    w_ttc: float = 5.0
    w_c: float = 2.0
    ttc_offsets: tuple = (0.3, 0.6, 0.9)
    progress_threshold: float = 5.0
    smooth: int = 15
    comfort: dict = field(default_factory=lambda: dict(NAVSIM_BOUNDS))

    def __post_init__(self):
        for name in ("w_ep", "w_ttc", "w_c"):
            real(getattr(self, name), name, lo=0.0)
        if self.w_ep + self.w_ttc + self.w_c <= 0:
            raise ValueError("w_ep, w_ttc and w_c must not all be zero")
        if isinstance(self.ttc_offsets, (str, bytes)) or not hasattr(self.ttc_offsets, "__iter__"):
            raise ValueError(f"ttc_offsets must be a tuple of look-ahead times (s), got {self.ttc_offsets!r}")
        for t in self.ttc_offsets:
            real(t, "ttc_offsets", lo=0.0, strict=True)
        real(self.progress_threshold, "progress_threshold", lo=0.0)
        if pos_int(self.smooth, "smooth") % 2 == 0:
            raise ValueError(f"smooth must be an odd window length, got {self.smooth}")
        if not isinstance(self.comfort, dict) or set(self.comfort) != set(NAVSIM_BOUNDS):
            raise ValueError(f"comfort must be a dict with the keys {sorted(NAVSIM_BOUNDS)}")
        lo, hi = self.comfort["a_lon"]
        if not real(lo, "comfort['a_lon'][0]") < real(hi, "comfort['a_lon'][1]"):
            raise ValueError("comfort['a_lon'] must be an interval (lo, hi) with lo < hi")
        for k in ("a_lat", "jerk", "jerk_lon", "yaw_rate", "yaw_acc"):
            real(self.comfort[k], f"comfort[{k!r}]", lo=0.0, strict=True)


def _check_cfg(cfg) -> PDMSConfig:
    if cfg is None:
        return PDMSConfig()
    if not isinstance(cfg, PDMSConfig):
        raise TypeError(f"cfg must be a PDMSConfig, got {type(cfg).__name__}")
    return cfg


def combine(nc, dac, ep, ttc, c, cfg: PDMSConfig | None = None):
    """PDMS of sub-metrics (works for numbers, arrays and tensors): NC * DAC * (5 EP + 5 TTC + 2 C) / 12.

    Every sub-metric lies in [0, 1] (NC in {0, 0.5, 1}, DAC, TTC and C in {0, 1}, EP a fraction), so
    the PDMS does too; a value outside [0, 1] (a percentage, a raw progress) is a ValueError naming it."""
    nc, dac, ep, ttc, c = (unit_interval(x, name) for name, x in (("nc", nc), ("dac", dac), ("ep", ep),
                                                                  ("ttc", ttc), ("c", c)))
    return _combine(nc, dac, ep, ttc, c, _check_cfg(cfg))


def _combine(nc, dac, ep, ttc, c, cfg: PDMSConfig):
    """The unchecked formula of :func:`combine` (``pdm_score_t`` builds its sub-metrics in range)."""
    w = cfg.w_ep + cfg.w_ttc + cfg.w_c
    return nc * dac * (cfg.w_ep * ep + cfg.w_ttc * ttc + cfg.w_c * c) / w


# ---------------------------------------------------------------------------------------------
# oriented boxes
def boxes_overlap_t(a: torch.Tensor, b: torch.Tensor, check: bool = True) -> torch.Tensor:
    """Separating-axis test for rotated rectangles ``(x, y, psi, L, W)`` in the last dim, broadcasting.
    The four candidate axes are the edge normals of both boxes; on an axis u a box of half-sizes
    (l, w) projects to the radius l |u.e1| + w |u.e2|. Touching boxes do not overlap.

    A box with a NaN or infinite entry has no defined overlap (every comparison with NaN is False, so
    the test would report one): ``check`` makes it a ValueError naming ``a`` or ``b``. ``pdm_score_t``
    passes ``check=False`` in its hot loop, on boxes built from a checked trajectory."""
    if check:
        for name, x in (("a", a), ("b", b)):
            if not isinstance(x, torch.Tensor) or not x.is_floating_point():
                raise TypeError(f"{name} must be a float tensor of boxes [..., 5], got "
                                f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
            if x.dim() < 1 or x.shape[-1] != 5:
                raise ValueError(f"{name} must have last dimension 5 (x, y, psi, L, W), got shape {tuple(x.shape)}")
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"{name} must be finite (a NaN box would count as overlapping)")
    dx, dy = b[..., 0] - a[..., 0], b[..., 1] - a[..., 1]
    ca, sa, cb, sb = torch.cos(a[..., 2]), torch.sin(a[..., 2]), torch.cos(b[..., 2]), torch.sin(b[..., 2])
    c = (ca * cb + sa * sb).abs()                    # |cos(psi_a - psi_b)|
    s = (sa * cb - ca * sb).abs()                    # |sin(psi_a - psi_b)|
    la, wa, lb, wb = a[..., 3] / 2, a[..., 4] / 2, b[..., 3] / 2, b[..., 4] / 2
    sep = (dx * ca + dy * sa).abs() >= la + lb * c + wb * s
    sep |= (-dx * sa + dy * ca).abs() >= wa + lb * s + wb * c
    sep |= (dx * cb + dy * sb).abs() >= lb + la * c + wa * s
    sep |= (-dx * sb + dy * cb).abs() >= wb + la * s + wa * c
    return ~sep


def _check_boxes(x, name):
    try:
        x = np.asarray(x, dtype=float) if not isinstance(x, torch.Tensor) else x.detach().cpu().double().numpy()
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of boxes [..., 5], got {type(x).__name__}") from exc
    if x.ndim < 1 or x.shape[-1] != 5:
        raise ValueError(f"{name} must have last dimension 5 (x, y, psi, L, W), got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be finite")
    if np.any(x[..., 3:] <= 0):
        raise ValueError(f"{name}: lengths and widths must be > 0")
    return x


def boxes_overlap(a, b) -> np.ndarray:
    """Do rotated rectangles ``a[..., 5]`` and ``b[..., 5]`` = (x, y, psi, L, W) overlap? Broadcasting."""
    a, b = _check_boxes(a, "a"), _check_boxes(b, "b")
    return boxes_overlap_t(torch.from_numpy(a), torch.from_numpy(b), check=False).numpy()


# ---------------------------------------------------------------------------------------------
# waypoints -> states
def _hermite_matrices(sub: int = 5):
    """Linear maps from the 9 knots (origin + 8 waypoints, 0.5 s apart) to positions and
    velocities at 0.1 s: cubic Hermite with second-order finite-difference slopes (exact for
    quadratics, so constant acceleration stays constant)."""
    n = N_WP + 1
    h = WP_DT
    D = np.zeros((n, n))
    for k in range(1, n - 1):
        D[k, k - 1], D[k, k + 1] = -1 / (2 * h), 1 / (2 * h)
    D[0, :3] = np.array([-3, 4, -1]) / (2 * h)
    D[-1, -3:] = np.array([1, -4, 3]) / (2 * h)
    T = N_WP * sub + 1
    P, V = np.zeros((T, n)), np.zeros((T, n))
    for i in range(T):
        k = min(i // sub, n - 2)
        s = (i - k * sub) / sub
        h00, h10, h01, h11 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s, -2 * s**3 + 3 * s**2, s**3 - s**2
        d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
        P[i, k] += h00
        P[i, k + 1] += h01
        P[i] += h * (h10 * D[k] + h11 * D[k + 1])
        V[i, k] += d00 / h
        V[i, k + 1] += d01 / h
        V[i] += d10 * D[k] + d11 * D[k + 1]
    return P, V


_HP, _HV = _hermite_matrices()


def _smooth(x: torch.Tensor, k: int) -> torch.Tensor:
    """Centred moving average over the last dim with odd-reflection padding (linear signals are
    kept exactly). NAVSIM uses a Savitzky-Golay filter; this is the book's simplification."""
    if k <= 1:
        return x
    p = k // 2
    left = 2 * x[..., :1] - x[..., 1:p + 1].flip(-1)
    right = 2 * x[..., -1:] - x[..., -p - 1:-1].flip(-1)
    xp = torch.cat([left, x, right], -1)
    return xp.unfold(-1, k, 1).mean(-1)


def _grad(x: torch.Tensor, dt: float) -> torch.Tensor:
    return torch.gradient(x, spacing=dt, dim=-1, edge_order=2)[0]


def check_traj(traj, name: str = "traj") -> np.ndarray | torch.Tensor:
    if not isinstance(traj, (np.ndarray, torch.Tensor)):
        raise TypeError(f"{name} must be an array or tensor of shape [..., 8, 2], got {type(traj).__name__}")
    if traj.ndim < 2 or tuple(traj.shape[-2:]) != (N_WP, 2):
        raise ValueError(f"{name} must have shape [..., 8, 2], got {tuple(traj.shape)}")
    if traj.dtype == bool or traj.dtype == torch.bool or not (
            traj.is_floating_point() if isinstance(traj, torch.Tensor) else np.issubdtype(traj.dtype, np.number)):
        raise TypeError(f"{name} must hold real numbers, got dtype {traj.dtype}")
    ok = torch.isfinite(traj).all() if isinstance(traj, torch.Tensor) else np.isfinite(traj).all()
    if not bool(ok):
        raise ValueError(f"{name} must be finite")
    return traj


def states_t(wp: torch.Tensor, dt: float = 0.1) -> torch.Tensor:
    """[..., 8, 2] ego-frame waypoints -> [..., 41, 6] (x, y, psi, v, vx, vy) at 0.1 s, t = 0..4 s."""
    knots = torch.cat([torch.zeros_like(wp[..., :1, :]), wp], -2)                 # [...,9,2]
    P = torch.as_tensor(_HP, dtype=wp.dtype, device=wp.device)
    V = torch.as_tensor(_HV, dtype=wp.dtype, device=wp.device)
    pos = P @ knots                                                               # [...,41,2]
    vel = V @ knots
    v = vel.norm(dim=-1)
    psi = torch.where(v > 0.2, torch.atan2(vel[..., 1], vel[..., 0].clamp_min(1e-6)), torch.zeros_like(v))
    return torch.cat([pos, psi[..., None], v[..., None], vel], -1)


def waypoints_to_states(wp, dt: float = 0.1) -> np.ndarray:
    """[..., 8, 2] waypoints -> [..., 41, (x, y, psi, v, a_lon, a_lat)] (ego frame)."""
    if abs(real(dt, "dt", lo=0.0, strict=True) - 0.1) > 1e-9:
        raise ValueError(f"dt must be 0.1 (the simulation step), got {dt}")
    wp = check_traj(wp, "wp")
    t = torch.as_tensor(np.asarray(wp, dtype=float)) if isinstance(wp, np.ndarray) else wp.detach().cpu().double()
    s = states_t(t)
    sig = comfort_signals(s, PDMSConfig().smooth)
    return torch.cat([s[..., :4], sig["a_lon"][..., None], sig["a_lat"][..., None]], -1).numpy()


def comfort_signals(st: torch.Tensor, smooth: int = 15, dt: float = 0.1) -> dict:
    v, psi, vx, vy = st[..., 3], st[..., 2], st[..., 4], st[..., 5]
    a_lon = _grad(_smooth(v, smooth), dt)
    yaw_rate = _grad(_smooth(psi, smooth), dt)
    ax, ay = _grad(_smooth(vx, smooth), dt), _grad(_smooth(vy, smooth), dt)
    jerk = torch.hypot(_grad(_smooth(ax, smooth), dt), _grad(_smooth(ay, smooth), dt))
    return dict(a_lon=a_lon, a_lat=v * yaw_rate, yaw_rate=yaw_rate, yaw_acc=_grad(_smooth(yaw_rate, smooth), dt),
                jerk=jerk, jerk_lon=_grad(_smooth(a_lon, smooth), dt))


def comfort_t(st: torch.Tensor, cfg: PDMSConfig) -> torch.Tensor:
    """C in {0,1}: every comfort signal within NAVSIM's bounds at every step."""
    s, b = comfort_signals(st, cfg.smooth), cfg.comfort
    ok = (s["a_lon"] > b["a_lon"][0]) & (s["a_lon"] < b["a_lon"][1])
    for k in ("a_lat", "jerk", "jerk_lon", "yaw_rate", "yaw_acc"):
        ok &= s[k].abs() < b[k]
    return ok.all(-1).to(st.dtype)


# ---------------------------------------------------------------------------------------------
@dataclass
class SceneTensors:
    """The tensors PDMS needs, on one device (built once per dataset)."""

    agents: torch.Tensor      # [N,T,A,5]
    closures: torch.Tensor    # [N,5]
    ego_init: torch.Tensor    # [N,4]
    i0: int
    dt: float
    road_half: float
    lane_width: float
    n_lanes: int

    def to(self, dev):
        return SceneTensors(self.agents.to(dev), self.closures.to(dev), self.ego_init.to(dev), self.i0, self.dt,
                            self.road_half, self.lane_width, self.n_lanes)

    def index(self, idx):
        return SceneTensors(self.agents[idx], self.closures[idx], self.ego_init[idx], self.i0, self.dt,
                            self.road_half, self.lane_width, self.n_lanes)


def scene_tensors(batch: ScenarioBatch, dev=None, dtype=torch.float32) -> SceneTensors:
    c = batch.cfg
    f = lambda x: torch.as_tensor(np.asarray(x), dtype=dtype, device=dev)  # noqa: E731
    return SceneTensors(f(batch.agents), f(batch.closures), f(batch.ego_init), c.t_index(0.0), c.dt, c.road_half,
                        c.lane_width, c.n_lanes)


def pdm_score_t(sc: SceneTensors, traj: torch.Tensor, ref_progress: torch.Tensor | None,
                cfg: PDMSConfig | None = None) -> dict:
    """Sub-metrics and PDMS for ego-frame trajectories ``traj[N,G,8,2]`` (vectorised over scenes,
    proposals, steps and agents). ``ref_progress[N]``: the EP normaliser from the expert candidates
    (their best progress x NC x DAC); ``None`` normalises by the proposals themselves."""
    cfg = _check_cfg(cfg)
    if not isinstance(sc, SceneTensors):
        raise TypeError(f"sc must be SceneTensors (from scene_tensors), got {type(sc).__name__}")
    traj = check_traj(traj)
    if not isinstance(traj, torch.Tensor) or traj.dim() != 4 or traj.shape[0] != sc.agents.shape[0]:
        raise ValueError(f"traj must be a tensor [N={sc.agents.shape[0]}, G, 8, 2], got "
                         f"{tuple(traj.shape) if isinstance(traj, torch.Tensor) else type(traj).__name__}")
    if ref_progress is not None and (not isinstance(ref_progress, torch.Tensor)
                                     or ref_progress.shape != (traj.shape[0],)):
        raise ValueError(f"ref_progress must be a tensor [N={traj.shape[0]}] or None")
    N, G = traj.shape[:2]
    st = states_t(traj)                                                         # [N,G,S,6]
    S = st.shape[2]
    x0, y0, p0 = sc.ego_init[:, 0, None, None], sc.ego_init[:, 1, None, None], sc.ego_init[:, 2, None, None]
    cx, sx = torch.cos(p0), torch.sin(p0)
    X = x0 + cx * st[..., 0] - sx * st[..., 1]
    Y = y0 + sx * st[..., 0] + cx * st[..., 1]
    PSI = p0 + st[..., 2]
    V = st[..., 3]
    ones = torch.ones_like(X)
    ego = torch.stack([X, Y, PSI, CAR_L * ones, CAR_W * ones], -1)               # [N,G,S,5]
    ag = sc.agents[:, sc.i0:sc.i0 + S]                                           # [N,S,A,5]
    agb = torch.cat([ag[..., :3], torch.full_like(ag[..., :2], CAR_L)], -1)
    agb[..., 4] = CAR_W
    valid = ag[..., 4] > 0.5                                                     # [N,S,A]
    ov = boxes_overlap_t(ego[:, :, :, None], agb[:, None], check=False) & valid[:, None]      # [N,G,S,A]
    hx, hy = torch.cos(PSI)[..., None], torch.sin(PSI)[..., None]
    rel = (agb[:, None, ..., 0] - X[..., None]) * hx + (agb[:, None, ..., 1] - Y[..., None]) * hy
    # ego corners' lateral extent -> single lane?
    c, s = torch.cos(PSI), torch.sin(PSI)
    ext = 0.5 * CAR_L * s.abs() + 0.5 * CAR_W * c.abs()
    lo, hi = Y - ext, Y + ext
    li = lambda y: torch.floor((y + sc.road_half) / sc.lane_width)  # noqa: E731
    single = (li(lo) == li(hi))[..., None]
    at_fault = ~((rel < -0.5 * CAR_L) & single)
    # as in NAVSIM, a collision is judged at the first contact with each agent
    first = ov.to(torch.uint8).argmax(2, keepdim=True)                         # [N,G,1,A]
    fault_first = at_fault.gather(2, first)[:, :, 0]
    veh_hit = (ov.any(2) & fault_first).any(-1)                                  # [N,G]
    clo = sc.closures
    cbox = torch.stack([(clo[:, 0] + clo[:, 1]) / 2, (clo[:, 2] + clo[:, 3]) / 2, torch.zeros_like(clo[:, 0]),
                        (clo[:, 1] - clo[:, 0]).clamp_min(1e-3), (clo[:, 3] - clo[:, 2]).clamp_min(1e-3)], -1)
    cone_hit = (boxes_overlap_t(ego, cbox[:, None, None], check=False) & (clo[:, 4, None, None] > 0.5)).any(-1)
    nc = torch.where(veh_hit, 0.0, torch.where(cone_hit, 0.5, 1.0)).to(X.dtype)
    dac = ((hi <= sc.road_half) & (lo >= -sc.road_half)).all(-1) & ~cone_hit
    dac = dac.to(X.dtype)
    # TTC: project the ego box forward along its heading by v * tau, against agents at t + tau
    ttc_hit = torch.zeros_like(veh_hit)
    moving = V > 0.005
    for tau in cfg.ttc_offsets:
        k = int(round(tau / sc.dt))
        eb = ego.clone()
        eb[..., 0] = X + V * tau * c
        eb[..., 1] = Y + V * tau * s
        agf = sc.agents[:, sc.i0 + k:sc.i0 + k + S]
        af = torch.cat([agf[..., :3], torch.full_like(agf[..., :2], CAR_L)], -1)
        af[..., 4] = CAR_W
        vf = agf[..., 4] > 0.5
        o = boxes_overlap_t(eb[:, :, :, None], af[:, None], check=False) & vf[:, None] & (rel > 0) & moving[..., None]
        ttc_hit |= o.flatten(2).any(-1)
    ttc = (~ttc_hit).to(X.dtype)
    mult = nc * dac
    raw = (X[..., -1] - X[..., 0]).clamp_min(0.0)
    own = raw * mult
    ref = own.max(1).values if ref_progress is None else ref_progress.to(X.dtype)
    norm = torch.maximum(ref[:, None], own)
    ep = torch.where(norm < cfg.progress_threshold, (mult > 0).to(X.dtype), (own / norm.clamp_min(1e-9)).clamp(0, 1))
    cc = comfort_t(st, cfg)
    return dict(nc=nc, dac=dac, ttc=ttc, ep=ep, c=cc, pdms=_combine(nc, dac, ep, ttc, cc, cfg), progress=own,
                raw_progress=raw)


def pdm_score(batch: ScenarioBatch, traj, ref_progress=None, cfg: PDMSConfig | None = None,
              chunk: int = 512) -> dict[str, np.ndarray]:
    """NC, DAC, TTC, EP, C and PDMS, each [N,G] (or [N] for ``traj[N,8,2]``), for ego-frame
    trajectories of ``batch``'s scenes. ``ref_progress[N]`` is EP's normaliser (best expert
    candidate's progress x multiplier, from :func:`icml26.dynvla.expert_plan`); without it the
    expert candidates are built here."""
    if not isinstance(batch, ScenarioBatch):
        raise TypeError(f"batch must be a ScenarioBatch, got {type(batch).__name__}")
    cfg = _check_cfg(cfg)
    chunk = pos_int(chunk, "chunk")
    traj = check_traj(traj)
    traj = np.asarray(traj.detach().cpu() if isinstance(traj, torch.Tensor) else traj, dtype=float)
    single = traj.ndim == 3
    if single:
        traj = traj[:, None]
    if traj.ndim != 4:
        raise ValueError(f"traj must have shape [N,8,2] or [N,G,8,2], got {traj.shape}")
    if len(traj) != len(batch):
        raise ValueError(f"traj has {len(traj)} scenes but batch has {len(batch)}")
    if ref_progress is None:
        from .planners import expert_plan
        ref_progress = expert_plan(batch, noise_p=0.0)[1]
    ref_progress = np.asarray(ref_progress, dtype=float)
    if ref_progress.shape != (len(batch),):
        raise ValueError(f"ref_progress must have shape ({len(batch)},), got {ref_progress.shape}")
    if not np.isfinite(ref_progress).all():
        raise ValueError("ref_progress must be finite")
    sc = scene_tensors(batch, dtype=torch.float64)
    outs = []
    for i in range(0, len(batch), chunk):
        sl = slice(i, i + chunk)
        outs.append(pdm_score_t(sc.index(sl), torch.from_numpy(traj[sl]), torch.from_numpy(ref_progress[sl]), cfg))
    res = {k: torch.cat([o[k] for o in outs]).numpy() for k in outs[0]}
    return {k: v[:, 0] for k, v in res.items()} if single else res
