"""Metrics of causal structure learning (spec Sec. 5): directed average precision (mAP when averaged
per graph), AUROC, structural Hamming distance, orientation accuracy, greedy cycle breaking."""

from __future__ import annotations

import numpy as np

from ._checks import as_matrix, check_binary, check_real


def _as_np(a, name: str) -> np.ndarray:
    return as_matrix(name, a)


def _pairs(scores, adj):
    s, a = _as_np(scores, "scores"), _as_np(adj, "adj")
    if s.ndim != 2 or s.shape[0] != s.shape[1]:
        raise ValueError(f"scores must be a square [n, n] matrix, got shape {s.shape}")
    if a.shape != s.shape:
        raise ValueError(f"adj must have the shape of scores {s.shape}, got {a.shape}")
    if s.shape[0] < 2:
        raise ValueError("scores must have n >= 2")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite")
    check_binary("adj", a)
    off = ~np.eye(s.shape[0], dtype=bool)
    y = a[off]
    if y.sum() == 0:
        raise ValueError("adj has no edge off the diagonal: average precision is undefined")
    return s[off], y


def average_precision(scores, adj) -> float:
    """Directed average precision over the ``n (n - 1)`` ordered off-diagonal pairs, step-wise as in
    scikit-learn: ``AP = sum_k (R_k - R_{k-1}) P_k`` over the distinct score thresholds."""
    s, y = _pairs(scores, adj)
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]    # last index of each distinct score
    tps = np.cumsum(y)[last]
    fps = last + 1 - tps
    precision = tps / (tps + fps)
    recall = tps / tps[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def auroc(scores, adj) -> float:
    """ROC-AUC over the ordered off-diagonal pairs (Mann-Whitney with average ranks for ties)."""
    from scipy.stats import rankdata

    s, y = _pairs(scores, adj)
    n_pos, n_neg = y.sum(), len(y) - y.sum()
    if n_neg == 0:
        raise ValueError("adj is complete: AUROC is undefined")
    ranks = rankdata(s)
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


SHD_CONVENTIONS = ("pairs", "official")
TIE_RULES = ("half", "zero")


def shd(pred_bin, adj, convention: str = "pairs") -> int:
    """Structural Hamming distance (spec Sec. 5). ``"pairs"`` (the book): unordered pairs whose edge
    state (none, i->j, j->i, both) differs, so a reversed edge and a 2-cycle each count once.
    ``"official"`` (the official ``shd_metric``): false negatives + false positives + reversals over
    ordered pairs, a reversed edge counting once, so a 2-cycle on a non-edge counts twice (two false
    positives) and a 2-cycle on a true edge once."""
    p, a = check_binary("pred_bin", pred_bin), check_binary("adj", adj)
    if a.shape != p.shape:
        raise ValueError(f"pred_bin and adj must be square matrices of one shape, got {p.shape}, {a.shape}")
    if convention not in SHD_CONVENTIONS:
        raise ValueError(f"convention must be one of {SHD_CONVENTIONS}, got {convention!r}")
    if convention == "official":
        diff = a - p
        np.fill_diagonal(diff, 0)
        rev = int((((diff + diff.T) == 0) & (diff != 0)).sum()) // 2
        return int((diff == 1).sum()) - rev + int((diff == -1).sum()) - rev + rev
    iu = np.triu_indices(p.shape[0], 1)
    diff = (p[iu] != a[iu]) | (p.T[iu] != a.T[iu])
    return int(diff.sum())


def orientation_accuracy(scores, adj, ties: str = "half") -> float:
    """Fraction of true edges ``i -> j`` with ``s_ij > s_ji``. A tie counts one half with
    ``ties="half"`` (the book: a symmetric score scores exactly 0.5, chance) and zero with
    ``ties="zero"`` (the official ``_orientation_accuracy``: a symmetric score scores 0)."""
    s, a = _as_np(scores, "scores"), _as_np(adj, "adj")
    _pairs(scores, adj)
    if ties not in TIE_RULES:
        raise ValueError(f"ties must be one of {TIE_RULES}, got {ties!r}")
    i, j = np.nonzero(a)
    tie = 0.5 if ties == "half" else 0.0
    return float(np.mean(np.where(s[i, j] > s[j, i], 1.0, np.where(s[i, j] == s[j, i], tie, 0.0))))


def break_cycles_greedy(pred_bin, scores):
    """Remove, cycle by cycle, the lowest-score edge of each detected cycle. Returns ``(dag, n_removed)``."""
    import networkx as nx

    p = check_binary("pred_bin", pred_bin).copy()
    s = _as_np(scores, "scores")
    if p.shape != s.shape:
        raise ValueError(f"scores must have the shape of pred_bin {p.shape}, got {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite")
    np.fill_diagonal(p, 0)
    removed = 0
    while True:
        g = nx.from_numpy_array(p, create_using=nx.DiGraph)
        try:
            cyc = nx.find_cycle(g)
        except nx.NetworkXNoCycle:
            return p, removed
        u, v = min(((u, v) for u, v, *_ in cyc), key=lambda e: s[e[0], e[1]])
        p[u, v] = 0
        removed += 1


def evaluate(scores, adj, threshold: float = 0.5, break_cycles: bool = False) -> dict:
    """AP, AUROC, OA and SHD of ``scores > threshold`` (optionally after greedy cycle breaking), with
    OA and SHD also under the official conventions (``oa_official``: ties count 0;
    ``shd_official``: a 2-cycle on a non-edge counts 2)."""
    if not 0.0 <= check_real("threshold", threshold) <= 1.0:
        raise ValueError(f"threshold must be a probability in [0, 1], got {threshold!r}")
    if not isinstance(break_cycles, bool):
        raise TypeError(f"break_cycles must be a bool, got {type(break_cycles).__name__}")
    s, a = _as_np(scores, "scores"), _as_np(adj, "adj")
    _pairs(s, a)
    pred = (s > threshold).astype(np.int64)
    np.fill_diagonal(pred, 0)
    removed = 0
    if break_cycles:
        pred, removed = break_cycles_greedy(pred, s)
    return {"ap": average_precision(s, a), "auroc": auroc(s, a), "oa": orientation_accuracy(s, a),
            "shd": shd(pred, a), "oa_official": orientation_accuracy(s, a, ties="zero"),
            "shd_official": shd(pred, a, convention="official"), "n_removed": removed}
