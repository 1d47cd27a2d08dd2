"""Baselines of the paper (spec Sec. 3.6): Always-before, Majority, Heuristics Miner (built-in formula
and pm4py, the process-mining field's library)."""

from __future__ import annotations

import numpy as np

from .method import PartialOrder, break_cycles, check_trace, transitive_closure


def _check_traces(traces, n: int) -> list[np.ndarray]:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if traces is None or isinstance(traces, (str, bytes)):
        raise TypeError("traces must be a list of traces")
    try:
        rows = list(traces)
    except TypeError as e:
        raise TypeError(f"traces must be a list of traces, got {type(traces).__name__}") from e
    if not rows:
        raise ValueError("traces must contain at least one trace")
    return [check_trace(t, n, f"traces[{i}]") for i, t in enumerate(rows)]


def precedence_counts(traces, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``before[i,j]`` = #traces with i before j; ``both[i,j]`` = #traces containing i and j."""
    tr = _check_traces(traces, n)
    before = np.zeros((n, n), dtype=np.int64)
    both = np.zeros((n, n), dtype=np.int64)
    for y in tr:
        pos = np.full(n, -1)
        pos[y] = np.arange(len(y))
        seen = pos >= 0
        pair = seen[:, None] & seen[None, :]
        before += pair & (pos[:, None] < pos[None, :])
        both += pair
    np.fill_diagonal(both, 0)
    return before, both


def always_before(traces, n: int) -> PartialOrder:
    """i -> j iff i precedes j in every trace containing both (the intersection of the traces)."""
    before, both = precedence_counts(traces, n)
    adj = (both > 0) & (before == both)
    return PartialOrder(None, transitive_closure(adj))


def majority(traces, n: int, threshold: float = 0.5) -> PartialOrder:
    """i -> j iff i precedes j in more than ``threshold`` of the traces containing both; greedy cycle breaking."""
    if not (isinstance(threshold, (int, float)) and 0 <= threshold < 1):
        raise ValueError(f"threshold must lie in [0, 1), got {threshold!r}")
    before, both = precedence_counts(traces, n)
    frac = np.where(both > 0, before / np.maximum(both, 1), 0.0)
    adj = frac > threshold
    return PartialOrder(None, transitive_closure(break_cycles(adj, frac)))


def directly_follows(traces, n: int) -> np.ndarray:
    """``df[a, b]`` = number of times b immediately follows a."""
    tr = _check_traces(traces, n)
    df = np.zeros((n, n), dtype=np.int64)
    for y in tr:
        np.add.at(df, (y[:-1], y[1:]), 1)
    return df


def hm_dependency(df: np.ndarray) -> np.ndarray:
    """Heuristics-Miner dependency ``(|a>b| - |b>a|) / (|a>b| + |b>a| + 1)`` (Weijters et al.)."""
    df = np.asarray(df, dtype=float)
    if df.ndim != 2 or df.shape[0] != df.shape[1]:
        raise ValueError(f"df must be a square count matrix, got shape {df.shape}")
    return (df - df.T) / (df + df.T + 1)


def heuristics_miner(traces, n: int, dependency_threshold: float = 0.5, use_pm4py: bool = False) -> PartialOrder:
    """Dependency >= threshold on directly-follows counts -> edges; break cycles; closure (Sec. 3.6).

    With ``use_pm4py=True`` the dependency graph is read from ``pm4py.discover_heuristics_net``
    (``and_threshold=0.65``, ``loop_two_threshold=0.5``); pm4py is imported lazily (slow import).
    """
    if not (isinstance(dependency_threshold, (int, float)) and -1 <= dependency_threshold <= 1):
        raise ValueError(f"dependency_threshold must lie in [-1, 1], got {dependency_threshold!r}")
    tr = _check_traces(traces, n)
    if use_pm4py:
        dep = pm4py_dependency(tr, n, dependency_threshold)
        adj = dep >= dependency_threshold
    else:
        dep = hm_dependency(directly_follows(tr, n))
        adj = (dep >= dependency_threshold) & (directly_follows(tr, n) > 0)
    np.fill_diagonal(adj, False)
    return PartialOrder(None, transitive_closure(break_cycles(adj, dep)))


def pm4py_dependency(traces, n: int, dependency_threshold: float = 0.5) -> np.ndarray:
    """Dependency matrix of the arcs pm4py's Heuristics Miner keeps (-inf where it keeps none)."""
    try:
        import pandas as pd
        import pm4py
    except ImportError as e:  # pragma: no cover
        raise ImportError("heuristics_miner(use_pm4py=True) needs pm4py: pip install pm4py") from e
    tr = _check_traces(traces, n)
    rows = [(str(i), f"a{a}", pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=t))
            for i, y in enumerate(tr) for t, a in enumerate(y)]
    df = pd.DataFrame(rows, columns=["case:concept:name", "concept:name", "time:timestamp"])
    net = pm4py.discover_heuristics_net(df, dependency_threshold=dependency_threshold, and_threshold=0.65,
                                        loop_two_threshold=0.5)
    dep = np.full((n, n), -np.inf)
    for name, node in net.nodes.items():
        for out in node.output_connections:
            for edge in node.output_connections[out]:
                dep[int(name[1:]), int(out.node_name[1:])] = float(edge.dependency_value)
    return dep
