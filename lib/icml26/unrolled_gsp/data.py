"""SynthRoad: a procedural road-network traffic generator (spec Sec. 7.2), kNN graphs and windows.

Everything is generated from a seed in well under a second; nothing is stored on disk. The
generator is graph-smooth *by design* (spatial spill-over along roads, graph-smooth demand), so
the chapter also evaluates incident windows and a ridge baseline that knows the same neighbours.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components, shortest_path

from ._checks import check_float, check_int

STEPS_PER_DAY = 288  # 5-minute steps


@dataclass
class RoadTraffic:
    """One simulated data set (spec Sec. 7.2, item 7)."""

    values: np.ndarray          # (n_steps, N) float32, 0 where missing
    mask: np.ndarray            # (n_steps, N) bool, True = observed
    coords: np.ndarray          # (N, 2) km
    edges: np.ndarray           # (E, 2) undirected road links
    edge_length: np.ndarray     # (E,) km
    dist: np.ndarray            # (N, N) shortest-path road distances
    time_of_day: np.ndarray     # (n_steps,) int in [0, 288)
    day_of_week: np.ndarray     # (n_steps,) int in [0, 7), day 0 is a Monday
    incidents: list = field(default_factory=list)   # (node, start, duration, severity)
    kind: str = "speed"

    @property
    def n_nodes(self) -> int:
        return self.values.shape[1]


_check_int = check_int
_check_float = check_float


def _connected(n: int, edges: np.ndarray) -> bool:
    if len(edges) == 0:
        return n <= 1
    g = csr_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return connected_components(g, directed=False)[0] == 1


def make_road_network(n_nodes: int, seed: int = 0, drop_prob: float = 0.1):
    """Perturbed-grid road graph (spec Sec. 7.2, item 1): ``coords (N,2), edges (E,2), lengths (E,)``.

    Lattice points of an ``s x s`` grid (``s = ceil(sqrt N) + 1``) closest to the centre, jittered by
    U(-0.3, 0.3) km, linked to their 4-neighbours; each link is dropped with probability
    ``drop_prob`` unless that disconnects the graph.
    """
    n = _check_int("n_nodes", n_nodes, 4)
    drop_prob = _check_float("drop_prob", drop_prob, 0.0, 1.0, high_open=True)
    rng = np.random.default_rng(seed)
    s = math.ceil(math.sqrt(n)) + 1
    grid = np.array([(a, b) for a in range(s) for b in range(s)], dtype=float)
    centre = (s - 1) / 2
    order = np.argsort(((grid - centre) ** 2).sum(1), kind="stable")[:n]
    lattice = grid[order]
    coords = lattice + rng.uniform(-0.3, 0.3, size=lattice.shape)
    index = {tuple(p): i for i, p in enumerate(lattice.astype(int))}
    edges = []
    for i, (a, b) in enumerate(lattice.astype(int)):
        for da, db in ((1, 0), (0, 1)):
            j = index.get((a + da, b + db))
            if j is not None:
                edges.append((i, j))
    edges = np.array(edges, dtype=np.int64)
    keep = np.ones(len(edges), dtype=bool)
    for e in rng.permutation(len(edges)):
        if rng.random() < drop_prob:
            keep[e] = False
            if not _connected(n, edges[keep]):
                keep[e] = True
    edges = edges[keep]
    lengths = np.linalg.norm(coords[edges[:, 0]] - coords[edges[:, 1]], axis=1)
    return coords, edges, lengths


def road_distances(n_nodes: int, edges: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Shortest-path road distances (Dijkstra), ``inf`` between disconnected nodes."""
    g = csr_matrix((lengths, (edges[:, 0], edges[:, 1])), shape=(n_nodes, n_nodes))
    return shortest_path(g, method="D", directed=False)


def combinatorial_laplacian(n_nodes: int, edges: np.ndarray) -> np.ndarray:
    """``L = D - A`` of the unweighted road graph."""
    A = np.zeros((n_nodes, n_nodes))
    A[edges[:, 0], edges[:, 1]] = 1.0
    A[edges[:, 1], edges[:, 0]] = 1.0
    return np.diag(A.sum(1)) - A


def gaussian_adjacency(dist: np.ndarray, threshold: float = 0.1) -> np.ndarray:
    """DCRNN-style kernel ``exp(-d^2/sigma^2)`` (sigma = std of finite distances), thresholded."""
    finite = dist[np.isfinite(dist)]
    sigma = float(finite.std()) or 1.0
    W = np.exp(-(dist / sigma) ** 2)
    W[~np.isfinite(dist)] = 0.0
    W[W < threshold] = 0.0
    return W


def _gauss(tau, mu, sigma):
    return np.exp(-((tau - mu) ** 2) / (2 * sigma**2))


def simulate_traffic(n_nodes: int = 20, days: int = 10, seed: int = 0, kind: str = "speed",
                     kappa: float = 0.3, theta: float = 0.5, incident_rate: float = 0.3,
                     noise: float = 1.0, missing: float = 0.005) -> RoadTraffic:
    """SynthRoad generator (spec Sec. 7.2): daily/weekly demand, spill-over congestion dynamics,
    incidents, sensor noise and missing zeros. ``kind`` is ``"speed"`` (mph) or ``"flow"``."""
    n = _check_int("n_nodes", n_nodes, 4)
    days = _check_int("days", days, 1)
    if kind not in ("speed", "flow"):
        raise ValueError(f"kind must be 'speed' or 'flow', got {kind!r}")
    kappa = _check_float("kappa", kappa, 0.0, 1.0)
    theta = _check_float("theta", theta, 0.0, 1.0)
    incident_rate = _check_float("incident_rate", incident_rate, 0.0)
    noise = _check_float("noise", noise, 0.0)
    missing = _check_float("missing", missing, 0.0, 0.5, high_open=True)
    rng = np.random.default_rng(_check_int("seed", seed, 0))
    coords, edges, lengths = make_road_network(n, seed=seed)
    dist = road_distances(n, edges, lengths)
    L = combinatorial_laplacian(n, edges)
    A = -L + np.diag(np.diag(L))
    P = A / A.sum(1, keepdims=True)
    S = np.linalg.inv(np.eye(n) + 2 * L)           # graph-smoothing operator (I + 2L)^-1
    s_scale = 1.0 / math.sqrt(float((S**2).sum(1).mean()))
    # node attributes (item 2)
    cen = coords.mean(0)
    r = np.linalg.norm(coords - cen, axis=1)
    r = r / r.max()
    v_free = rng.uniform(55, 70, n)
    a_am = 0.9 * (1 - 0.6 * r) * rng.uniform(0.7, 1.1, n)
    a_pm = 0.8 * (0.5 + 0.5 * r) * rng.uniform(0.7, 1.1, n)
    # demand (item 3)
    n_steps = STEPS_PER_DAY * days
    t = np.arange(n_steps)
    tod = t % STEPS_PER_DAY
    dow = (t // STEPS_PER_DAY) % 7
    tau = tod / 12.0
    z = S @ rng.standard_normal((n, days))
    z = z / z.std(0, keepdims=True)
    mult = (1 + 0.25 * z).T                          # (days, N)
    omega = np.where(np.arange(days) % 7 >= 5, 0.55, 1.0)
    shape_ = (a_am[None] * _gauss(tau, 8, 1)[:, None] + a_pm[None] * _gauss(tau, 17.5, 1.2)[:, None]
              + 0.15 * _gauss(tau, 13, 2.5)[:, None])
    demand = (mult * omega[:, None])[t // STEPS_PER_DAY] * shape_
    # congestion dynamics (item 4)
    zeta = rng.standard_normal((n_steps, n)) @ S.T * s_scale
    c = np.zeros((n_steps, n))
    prev = np.zeros(n)
    for k in range(n_steps):
        prev = (1 - kappa) * prev + kappa * (theta * P @ prev + (1 - theta) * demand[k]) + 0.05 * zeta[k]
        c[k] = prev
    # incidents (item 5)
    inc = np.zeros_like(c)
    starts = rng.random((n_steps, n)) < incident_rate / STEPS_PER_DAY
    incidents = []
    for k, i in zip(*np.nonzero(starts)):
        dur = int(rng.integers(6, 25))
        sev = float(rng.uniform(0.3, 0.6))
        inc[k:k + dur, i] += sev
        incidents.append((int(i), int(k), dur, sev))
    ce = np.clip(c + inc, 0.0, 1.0)
    # observation (item 6)
    if kind == "speed":
        vals = v_free[None] * (1 - 0.7 * ce) + noise * rng.standard_normal(ce.shape)
    else:
        cap = rng.uniform(300, 600, n)
        dens = 0.1 + 0.8 * ce
        vals = cap[None] * 4 * dens * (1 - dens) + noise * rng.standard_normal(ce.shape)
    mask = np.ones(vals.shape, dtype=bool)
    n_miss = int(round(missing * vals.size))
    if n_miss:
        mask.flat[rng.choice(vals.size, n_miss, replace=False)] = False
    vals = np.where(mask, vals, 0.0).astype(np.float32)
    return RoadTraffic(vals, mask, coords, edges, lengths, dist, tod.astype(np.int64), dow.astype(np.int64),
                       incidents, kind)


def knn_neighbors(dist: np.ndarray, k: int, symmetric: bool = True) -> torch.Tensor:
    """``(N, k_max)`` neighbour indices by road distance, padded with -1, self excluded (spec Sec. 3.1).

    ``symmetric=True`` takes the union of the kNN lists (book choice), so that the spatial
    Laplacian is symmetric and conjugate gradients apply; ``False`` keeps the ordered kNN list.
    """
    dist = np.asarray(dist, dtype=float)
    if dist.ndim != 2 or dist.shape[0] != dist.shape[1]:
        raise ValueError(f"dist must be a square (N, N) matrix, got shape {dist.shape}")
    n = dist.shape[0]
    k = _check_int("k", k, 1)
    if k >= n:
        raise ValueError(f"k must be < n_nodes = {n}, got {k}")
    if np.isnan(dist).any():
        raise ValueError("dist must not contain NaN")
    d = dist.copy()
    np.fill_diagonal(d, np.inf)
    order = np.argsort(d, axis=1, kind="stable")[:, :k]
    if not symmetric:
        return torch.as_tensor(order, dtype=torch.long)
    if not np.isfinite(dist).all():
        warnings.warn("knn_neighbors: the road graph is disconnected (infinite distances); "
                      "the symmetric kNN graph may be disconnected too", stacklevel=2)
    adj = np.zeros((n, n), dtype=bool)
    adj[np.repeat(np.arange(n), k), order.ravel()] = True
    adj |= adj.T
    kmax = int(adj.sum(1).max())
    out = np.full((n, kmax), -1, dtype=np.int64)
    for i in range(n):
        js = np.nonzero(adj[i])[0]
        js = js[np.argsort(dist[i, js], kind="stable")]
        out[i, :len(js)] = js
    return torch.as_tensor(out)


def make_windows(data: RoadTraffic, t_in: int = 12, t_out: int = 12, stride: int = 3,
                 split=(0.7, 0.1, 0.2), scaler: str = "global") -> dict:
    """Chronological train/val/test windows (spec Sec. 3.4).

    The series is cut at the split fractions first and windowed within each segment (no window
    straddles two splits). Values are z-scored with the training segment's observed mean and std:
    ``scaler="global"`` (book default) uses one scalar pair, as in DCRNN's scaler;
    ``scaler="per_node"`` uses one pair per sensor, as the paper's released code does (``mean`` and
    ``std`` are then ``(N,)`` tensors). Missing entries become 0 (the mean) and are masked.
    Each split holds ``x (S,T,N)`` normalised, ``raw (S,T,N)`` in data units, ``mask (S,T,N)``,
    ``tod, dow (S,T)``, ``start (S,)`` and ``incident (S,)`` (an incident starts in the horizon).
    """
    t_in = _check_int("t_in", t_in, 1)
    t_out = _check_int("t_out", t_out, 1)
    stride = _check_int("stride", stride, 1)
    if not isinstance(data, RoadTraffic):
        raise TypeError(f"data must be a RoadTraffic from simulate_traffic, got {type(data).__name__}")
    try:
        split = tuple(float(s) for s in split)
    except (TypeError, ValueError) as e:
        raise TypeError(f"split must be three fractions, got {split!r}") from e
    if len(split) != 3 or not all(math.isfinite(s) for s in split) or any(s < 0 for s in split) or abs(sum(split) - 1) > 1e-6:
        raise ValueError(f"split must be three non-negative fractions summing to 1, got {split}")
    T = t_in + t_out
    n_steps = data.values.shape[0]
    if n_steps < T:
        raise ValueError(f"the series ({n_steps} steps) is shorter than one window (t_in + t_out = {T})")
    bounds = np.round(np.cumsum((0.0,) + split) * n_steps).astype(int)
    if scaler == "global":
        tr = data.values[bounds[0]:bounds[1]][data.mask[bounds[0]:bounds[1]]]
        mean, std = float(tr.mean()), float(tr.std())
    elif scaler == "per_node":
        tv = np.where(data.mask[bounds[0]:bounds[1]], data.values[bounds[0]:bounds[1]], np.nan).astype(np.float64)
        mean_n, std_n = np.nanmean(tv, axis=0), np.nanstd(tv, axis=0)
        if not (np.isfinite(mean_n).all() and (std_n > 0).all()):
            raise ValueError("scaler: 'per_node' needs at least two distinct observed training values per sensor")
        mean = torch.as_tensor(mean_n, dtype=torch.float32)
        std = torch.as_tensor(std_n, dtype=torch.float32)
    else:
        raise ValueError(f"scaler must be 'global' or 'per_node', got {scaler!r}")
    onsets = np.zeros((n_steps, data.n_nodes), dtype=bool)
    for node, start, _, _ in data.incidents:
        onsets[start, node] = True
    out = {"mean": mean, "std": std, "t_in": t_in, "t_out": t_out, "n_nodes": data.n_nodes}
    for name, a, b in zip(("train", "val", "test"), bounds[:-1], bounds[1:]):
        starts = np.arange(a, b - T + 1, stride)
        if len(starts) == 0:
            raise ValueError(f"split {name!r} ({b - a} steps) is shorter than one window ({T} steps)")
        idx = starts[:, None] + np.arange(T)[None]
        raw = data.values[idx]
        mask = data.mask[idx]
        x = np.where(mask, (raw - np.asarray(mean)) / np.asarray(std), 0.0)
        out[name] = {
            "x": torch.as_tensor(x, dtype=torch.float32), "raw": torch.as_tensor(raw),
            "mask": torch.as_tensor(mask), "tod": torch.as_tensor(data.time_of_day[idx]),
            "dow": torch.as_tensor(data.day_of_week[idx]), "start": torch.as_tensor(starts),
            "incident": torch.as_tensor(onsets[idx[:, t_in:]].any(axis=(1, 2))),
        }
    return out


def residual_correlations(data: RoadTraffic, max_hops: int = 5, max_lag: int = 12) -> dict:
    """Correlation of residuals (each node's time-of-day mean removed) vs hop distance and vs lag."""
    v = np.where(data.mask, data.values, np.nan)
    res = np.empty_like(v)
    for s in range(STEPS_PER_DAY):
        sel = data.time_of_day == s
        res[sel] = v[sel] - np.nanmean(v[sel], axis=0, keepdims=True)
    res = np.where(np.isnan(res), 0.0, res)
    C = np.corrcoef(res.T)
    hops = road_distances(data.n_nodes, data.edges, np.ones(len(data.edges)))
    by_hop = {h: float(C[hops == h].mean()) for h in range(1, max_hops + 1) if (hops == h).any()}
    z = (res - res.mean(0)) / res.std(0)
    by_lag = {k: float((z[k:] * z[:-k]).mean()) for k in range(1, max_lag + 1)}
    return {"hop": by_hop, "lag": by_lag}
