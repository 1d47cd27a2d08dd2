"""From posterior to graph, metrics, and the compiled executor (spec Sec. 3.4-3.5, 7.5)."""

from __future__ import annotations

import numpy as np

from .method import PartialOrder, _check_count, _check_po, break_cycles, transitive_closure


def _check_edge_prob(edge_prob, n: int | None = None) -> np.ndarray:
    """A finite square matrix of probabilities (``n x n`` when ``n`` is given) as float64."""
    if edge_prob is None or isinstance(edge_prob, (str, bytes)):
        raise TypeError(f"edge_prob must be a square matrix of probabilities, got {type(edge_prob).__name__}")
    try:
        P = np.asarray(edge_prob, dtype=float)
    except (TypeError, ValueError) as e:
        raise TypeError(f"edge_prob must be a square matrix of probabilities, got {type(edge_prob).__name__}") from e
    if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape[0] == 0:
        raise ValueError(f"edge_prob must be a non-empty square (n, n) matrix, got shape {P.shape}")
    if n is not None and P.shape[0] != n:
        raise ValueError(f"edge_prob must be ({n}, {n}) to match the partial order, got {P.shape}")
    if not np.all(np.isfinite(P)) or P.min() < 0 or P.max() > 1:
        raise ValueError("edge_prob must hold probabilities in [0, 1] (finite)")
    return P


def _check_pair(est_po, true_po) -> None:
    _check_po("est_po", est_po)
    _check_po("true_po", true_po)
    if true_po.n != est_po.n:
        raise ValueError(f"true_po and est_po must have the same number of actions ({true_po.n} vs {est_po.n})")


def point_estimate(edge_prob, alpha: float = 0.5, method: str = "threshold", closures=None) -> PartialOrder:
    """Threshold p_ij >= alpha (keep the larger of a conflicting pair, break cycles greedily, close), or
    the posterior mode closure (``method="mode"``, needs ``closures``) (Sec. 3.4)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0 < alpha <= 1):
        raise ValueError(f"alpha must lie in (0, 1], got {alpha!r}")
    P = _check_edge_prob(edge_prob)
    if method == "mode":
        if closures is None or len(closures) == 0:
            raise ValueError("method='mode' needs the sampled closures")
        keys, counts = np.unique(np.asarray(closures).reshape(len(closures), -1), axis=0, return_counts=True)
        return PartialOrder(None, keys[counts.argmax()].reshape(P.shape).astype(bool))
    if method != "threshold":
        raise ValueError(f"method must be 'threshold' or 'mode', got {method!r}")
    adj = P >= alpha
    np.fill_diagonal(adj, False)
    lower = np.arange(len(P))[:, None] > np.arange(len(P))[None, :]
    adj &= ~(adj & adj.T & ((P < P.T) | ((P == P.T) & lower)))   # keep the larger of a conflicting pair
    return PartialOrder(None, transitive_closure(break_cycles(adj, P)))


def edge_metrics(true_po: PartialOrder, est_po: PartialOrder) -> dict:
    """Precision, recall, Edge-F1 and SHD on cover (transitive-reduction) edges (Sec. 3.5)."""
    _check_pair(est_po, true_po)
    E, Eh = true_po.cover(), est_po.cover()
    tp = int((E & Eh).sum())
    ne, nh = int(E.sum()), int(Eh.sum())
    prec = tp / nh if nh else 1.0
    rec = tp / ne if ne else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0
    return {"precision": prec, "recall": rec, "f1": f1, "shd": int((Eh & ~E).sum() + (E & ~Eh).sum())}


def closure_recall(true_po: PartialOrder, est_po: PartialOrder) -> float:
    """Fraction of true closure relations present in the estimate's closure (the safety measure)."""
    _check_pair(est_po, true_po)
    t = true_po.closure
    return float((t & est_po.closure).sum() / t.sum()) if t.sum() else 1.0


def feasibility(traces, po: PartialOrder) -> float:
    """Fraction of traces that are linear extensions of ``po``."""
    _check_po("po", po)
    if traces is None or isinstance(traces, (str, bytes)) or len(traces) == 0:
        raise ValueError("traces must be a non-empty list of traces")
    return float(np.mean([po.is_linear_extension(y) for y in traces]))


def frontier_executions(po: PartialOrder, n_runs: int, seed: int = 0) -> np.ndarray:
    """``n_runs`` uniform-random frontier (Kahn) executions of ``po`` -> (n_runs, n), batched over runs."""
    _check_po("po", po)
    n_runs = _check_count("n_runs", n_runs)
    rng = np.random.default_rng(_check_count("seed", seed, lo=0))
    n = po.n
    C = po.closure.astype(np.int64)
    rem = np.ones((n_runs, n), dtype=bool)
    out = np.empty((n_runs, n), dtype=np.int64)
    for t in range(n):
        front = rem & ((rem.astype(np.int64) @ C) == 0)
        g = np.where(front, rng.random((n_runs, n)), -1.0)
        a = g.argmax(1)
        out[:, t] = a
        rem[np.arange(n_runs), a] = False
    return out


def execution_validity(est_po: PartialOrder, true_po: PartialOrder, n_runs: int = 200, seed: int = 0) -> float:
    """Fraction of frontier executions of the estimate that are valid for the true order (Sec. 3.5)."""
    _check_pair(est_po, true_po)
    ex = frontier_executions(est_po, n_runs, seed)
    pos = np.empty_like(ex)
    np.put_along_axis(pos, ex, np.arange(est_po.n)[None].repeat(n_runs, 0), axis=1)
    i, j = np.nonzero(true_po.closure)
    return float(np.mean(np.all(pos[:, i] < pos[:, j], axis=1)))


def calibration(edge_prob, true_po: PartialOrder, bins: int = 10) -> dict:
    """Reliability table and ECE of off-diagonal p_ij against the true closure relations."""
    _check_po("true_po", true_po)
    P = _check_edge_prob(edge_prob, true_po.n)
    bins = _check_count("bins", bins)
    if P.shape[0] < 2:
        raise ValueError("edge_prob must be at least 2 x 2 (calibration uses the off-diagonal pairs)")
    off = ~np.eye(len(P), dtype=bool)
    p, y = P[off], true_po.closure[off].astype(float)
    edges = np.linspace(0, 1, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    conf = np.array([p[idx == b].mean() if np.any(idx == b) else np.nan for b in range(bins)])
    acc = np.array([y[idx == b].mean() if np.any(idx == b) else np.nan for b in range(bins)])
    cnt = np.array([(idx == b).sum() for b in range(bins)])
    ok = cnt > 0
    ece = float(np.sum(cnt[ok] * np.abs(conf[ok] - acc[ok])) / cnt.sum())
    return {"confidence": conf, "accuracy": acc, "count": cnt, "ece": ece}


def simulate_execution(est_po: PartialOrder, true_po: PartialOrder, mode: str = "hybrid", workers: int = 4,
                       seed: int = 0, cot: bool = True, intent: int = 100) -> dict:
    """Token / makespan model of Sec. 7.5 (book choice; no LLM is called).

    explore: sequential LLM agent, step t reads intent + all previous outputs and emits r reasoning tokens.
    expert: compiled frontier executor on ``est_po`` (intent parsed once, 0 LLM tokens per action); an
    action whose true prerequisite has not finished fails and the task fails.
    hybrid: as expert, but a failing action triggers a fallback LLM step with pruned context and is retried
    once its missing prerequisites have finished.
    """
    if mode not in ("expert", "hybrid", "explore"):
        raise ValueError(f"mode must be 'expert', 'hybrid' or 'explore', got {mode!r}")
    _check_pair(est_po, true_po)
    workers = _check_count("workers", workers)
    intent = _check_count("intent", intent, lo=0)
    rng = np.random.default_rng(_check_count("seed", seed, lo=0))
    n = true_po.n
    out_tok = rng.integers(50, 301, n)
    dur = rng.lognormal(0.0, 0.5, n)
    r = 400 if cot else 50
    llm_lat = 1.0
    if mode == "explore":
        order = frontier_executions(true_po, 1, seed)[0]
        prev = np.concatenate([[0], np.cumsum(out_tok[order])[:-1]])
        tokens = int(np.sum(intent + prev + r))
        return {"tokens": tokens, "makespan": float(dur.sum() + n * llm_lat), "fallbacks": 0, "success": True}
    pred_est = est_po.closure
    pred_true = true_po.closure
    done = np.zeros(n, dtype=bool)
    started = np.zeros(n, dtype=bool)
    extra = np.zeros((n, n), dtype=bool)      # edges learned from failures (hybrid)
    running: list[tuple[float, int]] = []
    t, tokens, fallbacks = 0.0, intent, 0
    prio = rng.random(n)
    while not done.all():
        ready = [a for a in range(n) if not started[a] and not (pred_est | extra)[~done, a].any()]
        ready.sort(key=lambda a: prio[a])
        while ready and len(running) < workers:
            a = ready.pop(0)
            missing = pred_true[:, a] & ~done
            if missing.any():
                if mode == "expert":
                    return {"tokens": tokens, "makespan": float("nan"), "fallbacks": 0, "success": False}
                fallbacks += 1
                tokens += intent + int(out_tok[pred_est[:, a]].sum()) + r
                extra[missing, a] = True
                continue
            started[a] = True
            running.append((t + dur[a], a))
        if not running:
            continue
        running.sort()
        t, a = running.pop(0)
        done[a] = True
    return {"tokens": int(tokens), "makespan": float(t + fallbacks * llm_lat), "fallbacks": fallbacks,
            "success": True}
