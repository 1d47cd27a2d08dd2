"""Data of the chapter (spec Sec. 7.2): Cloud-IaC-6 orders, simulated agents, scheduler logs,
WFCommons-shaped DAGs and random orders. All procedural; the real LLM traces are not used."""

from __future__ import annotations

import warnings

import numpy as np

from .method import CLOUD_IAC6, PartialOrder, _check_prob, check_trace, prior_sample_U, sample_trace


def cloud_iac(name: str) -> PartialOrder:
    """The ground-truth order of one Cloud-IaC-6 scenario."""
    if name not in CLOUD_IAC6:
        raise ValueError(f"name must be one of {sorted(CLOUD_IAC6)}, got {name!r}")
    return PartialOrder.from_edges(CLOUD_IAC6[name])


def expert_trace(po: PartialOrder) -> list[int]:
    """Kahn's algorithm with alphabetical tie-break (the 'expert' trace)."""
    rem = np.ones(po.n, dtype=bool)
    out = []
    for _ in range(po.n):
        front = np.flatnonzero(po.frontier(rem))
        a = int(min(front, key=lambda i: po.names[i]))
        out.append(a)
        rem[a] = False
    return out


def softmax_traces(po: PartialOrder, m: int, beta: float, eps: float, seed: int = 0) -> np.ndarray:
    """``m`` traces drawn from the frontier-softmax model itself -> (m, n)."""
    rng = np.random.default_rng(seed)
    return np.array([sample_trace(po, beta, eps, rng) for _ in range(m)])


def softmax_traces_batch(po: PartialOrder, m: int, beta: float, eps: float, rng: np.random.Generator) -> np.ndarray:
    """``m`` traces from Eq. (2), the same law as :func:`softmax_traces`, drawn all at once: one loop
    over the ``n`` steps, vectorised over traces (another random stream than the per-trace sampler)."""
    if not isinstance(po, PartialOrder):
        raise TypeError(f"po must be a PartialOrder, got {type(po).__name__}")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    if isinstance(beta, bool) or not isinstance(beta, (int, float, np.floating)) or not np.isfinite(beta) or beta < 0:
        raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
    eps = _check_prob("eps", eps)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    n, C = po.n, po.closure.astype(np.float64)
    rem = np.ones((m, n), dtype=bool)
    out = np.empty((m, n), dtype=np.int64)
    rows = np.arange(m)
    for t in range(n):
        r = rem.astype(np.float64)
        front = rem & ((r @ C) < 0.5)                      # no remaining predecessor
        q = beta * np.log1p(r @ C.T)                       # beta Q_t(a), remaining successors
        w = np.where(front, np.exp(q - np.where(front, q, -np.inf).max(1, keepdims=True)), 0.0)
        w = np.where((rng.random(m) < eps)[:, None], r, w)  # trembling hand: any remaining action
        cum = np.cumsum(w / w.sum(1, keepdims=True), 1)
        a = np.minimum((cum < rng.random(m)[:, None]).sum(1), n - 1)
        a = np.where(rem[rows, a], a, np.argmax(rem, 1))  # guard against round-off at the top of cum
        out[:, t] = a
        rem[rows, a] = False
    return out


def simulate_agents(po: PartialOrder, n_agents: int = 6, traces_per_agent: int = 9, beta_range=(0.5, 2.0),
                    tau: float = 0.5, eps_max: float = 0.05, seed: int = 0, include_expert: bool = True) -> np.ndarray:
    """Heterogeneous personas (book choice): persona a picks on the frontier with softmax(beta_a (Q + pi_a)),
    pi_a ~ N(0, tau^2 I), and trembles with eps_a ~ U(0, eps_max)."""
    rng = np.random.default_rng(seed)
    out = [expert_trace(po)] if include_expert else []
    for _ in range(n_agents):
        b = rng.uniform(*beta_range)
        pref = rng.normal(0, tau, po.n)
        e = rng.uniform(0, eps_max)
        out += [sample_trace(po, b, e, rng, preference=pref) for _ in range(traces_per_agent)]
    return np.array(out)


def scheduler_trace(po: PartialOrder, workers: int, sigma: float, rng: np.random.Generator) -> list[int]:
    """List scheduling with ``workers`` workers and log-normal durations; tasks ordered by start time."""
    n = po.n
    dur = rng.lognormal(0.0, sigma, n)
    prio = rng.random(n)
    done = np.zeros(n, dtype=bool)
    started = np.zeros(n, dtype=bool)
    running: list[tuple[float, int]] = []
    t = 0.0
    order = []
    while len(order) < n:
        ready = [a for a in range(n) if not started[a] and not po.closure[~done, a].any()]
        ready.sort(key=lambda a: prio[a])
        while ready and len(running) < workers:
            a = ready.pop(0)
            started[a] = True
            order.append(a)
            running.append((t + dur[a], a))
        running.sort()
        t, a = running.pop(0)
        done[a] = True
    return order


def tremble(trace, eps: float, rng: np.random.Generator) -> list[int]:
    """Trembling-hand noise on a trace: at each step, with prob. eps take a uniform remaining action,
    otherwise the next remaining action of the clean trace (book choice for noisy scheduler logs)."""
    eps = _check_prob("eps", eps)
    rem = [int(a) for a in trace]
    out = []
    while rem:
        a = rem[rng.integers(len(rem))] if rng.random() < eps else rem[0]
        out.append(a)
        rem.remove(a)
    return out


def scheduler_traces(po: PartialOrder, n_traces: int, workers=(2, 4, 8), sigma: float = 0.5, seed: int = 0,
                     eps: float = 0.0) -> np.ndarray:
    """Scheduler logs (Sec. 7.2): worker count drawn from ``workers``; optional trembling noise."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_traces):
        y = scheduler_trace(po, int(rng.choice(workers)), sigma, rng)
        out.append(tremble(y, eps, rng) if eps > 0 else y)
    return np.array(out)


def srasearch_dag(n_accessions: int = 10) -> PartialOrder:
    """SRASearch shape (WfChef): bowtie2-build, fasterq-dump_i -> bowtie2_i -> merge."""
    if isinstance(n_accessions, bool) or not isinstance(n_accessions, int) or n_accessions < 1:
        raise ValueError(f"n_accessions must be a positive integer, got {n_accessions!r}")
    edges = []
    for i in range(n_accessions):
        edges += [("bowtie2-build", f"bowtie2_{i}"), (f"fasterq-dump_{i}", f"bowtie2_{i}"), (f"bowtie2_{i}", "merge")]
    names = ["bowtie2-build"] + [f"fasterq-dump_{i}" for i in range(n_accessions)] + [
        f"bowtie2_{i}" for i in range(n_accessions)] + ["merge"]
    return PartialOrder.from_edges(edges, names)


def epigenomics_dag(lanes: int = 1, chunks: int = 9) -> PartialOrder:
    """Epigenomics shape (WfChef): fastqSplit -> filterContams -> sol2sanger -> fast2bfq -> map -> mapMerge
    per chunk; all mapMerge -> mapMerge_global -> maqIndex -> pileup."""
    for nm, v in (("lanes", lanes), ("chunks", chunks)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{nm} must be a positive integer, got {v!r}")
    edges = []
    for ln in range(lanes):
        for c in range(chunks):
            chain = [f"fastqSplit_{ln}", f"filterContams_{ln}_{c}", f"sol2sanger_{ln}_{c}", f"fast2bfq_{ln}_{c}",
                     f"map_{ln}_{c}", f"mapMerge_{ln}"]
            edges += list(zip(chain[:-1], chain[1:], strict=True))
        edges.append((f"mapMerge_{ln}", "mapMerge_global"))
    edges += [("mapMerge_global", "maqIndex"), ("maqIndex", "pileup")]
    return PartialOrder.from_edges(edges)


def random_order(n: int, K: int, rho: float, seed: int = 0) -> PartialOrder:
    """A partial order drawn from the latent-dominance prior."""
    U = prior_sample_U(n, K, rho, np.random.default_rng(seed))
    return PartialOrder.from_latent(U)


def permute_ids(po: PartialOrder, traces: np.ndarray, seed: int = 0) -> tuple[PartialOrder, np.ndarray]:
    """Randomise node ids (avoid identifier leakage, Sec. 11): relabel order and traces consistently."""
    perm = np.random.default_rng(seed).permutation(po.n)      # new id of old node i is perm[i]
    inv = np.argsort(perm)
    C = po.closure[np.ix_(inv, inv)]
    return PartialOrder([po.names[i] for i in inv], C), perm[np.asarray(traces)]


def ip_coverage(traces, po: PartialOrder) -> float:
    """IP-Cov (Sec. 3.5): fraction of incomparable pairs of ``po`` observed in both orders."""
    pairs = po.incomparable_pairs()
    if not pairs:
        return 1.0
    seen = _orientations(traces, po.n)
    return float(np.mean([seen[i, j] and seen[j, i] for i, j in pairs]))


def _orientations(traces, n: int) -> np.ndarray:
    seen = np.zeros((n, n), dtype=bool)
    for k, y in enumerate(traces):
        y = check_trace(y, n, f"traces[{k}]")
        pos = np.full(n, -1)
        pos[y] = np.arange(len(y))
        ok = pos >= 0
        seen |= ok[:, None] & ok[None, :] & (pos[:, None] < pos[None, :])
    return seen


def select_traces_for_ipcov(traces, po: PartialOrder, target: float, rng: np.random.Generator) -> np.ndarray:
    """Greedy subset reaching IP-Cov >= target: start from a random trace, then add the trace covering most
    still-uncovered pair orientations (ties at random). Warns and returns the best subset if unreachable."""
    target = _check_prob("target", target, hi_open=False)
    traces = np.asarray(traces)
    pairs = po.incomparable_pairs()
    if not pairs or len(traces) == 0:
        return traces[:1]
    ii = np.array([p[0] for p in pairs])
    jj = np.array([p[1] for p in pairs])
    cov = np.stack([_orientations([y], po.n) for y in traces])          # (m, n, n)
    ij, ji = cov[:, ii, jj], cov[:, jj, ii]                                  # (m, P)
    chosen = [int(rng.integers(len(traces)))]
    got_ij, got_ji = ij[chosen[0]].copy(), ji[chosen[0]].copy()
    while np.mean(got_ij & got_ji) < target:
        gain = ((ij & ~got_ij).sum(1) + (ji & ~got_ji).sum(1)).astype(float)
        gain[chosen] = -1
        if gain.max() <= 0:
            warnings.warn(f"IP-Cov target {target} unreachable with these traces; returning the best subset "
                          f"(IP-Cov {np.mean(got_ij & got_ji):.3f})", stacklevel=2)
            break
        best = np.flatnonzero(gain == gain.max())
        k = int(rng.choice(best))
        chosen.append(k)
        got_ij |= ij[k]
        got_ji |= ji[k]
    return traces[chosen]
