"""BPOP: partial orders, the frontier-softmax likelihood and the queue-jump likelihood.

Li, Cheng, Nicholls & Kong, *De-Linearizing Agent Traces: Bayesian Inference of Latent Partial
Orders for Efficient Execution* (ICML 2026, arXiv 2602.02806). Equation numbers refer to the
chapter's specification (``shared/papers/bpop.md``), which follows the paper's poster:

* Sec. 3.1: latent-dominance prior, ``a_i`` precedes ``a_j`` iff ``U_ik > U_jk`` for every k;
* Sec. 3.2, Eq. (F): frontier-softmax step probability
  ``p(y_t=a) = (1-eps) 1[a in F_t] softmax_{F_t}(beta Q_t)(a) + eps/|R_t|`` with
  ``Q_t(a) = log(1 + S_t(a))`` (remaining successors, on the closure);
* Sec. 3.6: the exact queue-jump likelihood of Nicholls et al. (2024), which needs linear-extension
  counts (#P-hard in general; here a memoised down-set recursion, refused above ``max_n``).

Convention throughout: ``closure[i, j] = True`` means action ``i`` must come before action ``j``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..core.checks import check_device as _check_device  # noqa: F401

# --------------------------------------------------------------------------------------------
# Cloud-IaC-6 ground truth (spec Sec. 7.2; the authors' public dataset, CC BY 4.0)
# --------------------------------------------------------------------------------------------
_DZ = [("CreateVpc", "CreateSecurityGroup"), ("CreateVpc", "CreateVSwitch"),
       ("CreateVSwitch", "CreateLoadBalancer"), ("CreateVSwitch", "RunInstances"),
       ("CreateSecurityGroup", "AuthorizeSecurityGroup"), ("AuthorizeSecurityGroup", "RunInstances"),
       ("RunInstances", "AddBackendServers"), ("CreateLoadBalancer", "AddBackendServers")]
_RDS = _DZ + [("CreateVSwitch", "CreateDBInstance"), ("RunInstances", "ModifySecurityIps"),
              ("CreateDBInstance", "CreateAccount"), ("CreateDBInstance", "ModifySecurityIps")]
CLOUD_IAC6: dict[str, list[tuple[str, str]]] = {
    "simple_ecs": [("CreateVpc", "CreateVSwitch"), ("CreateVpc", "CreateSecurityGroup"),
                   ("CreateSecurityGroup", "AuthorizeSecurityGroup"), ("CreateVSwitch", "RunInstances"),
                   ("AuthorizeSecurityGroup", "RunInstances")],
    "dual_zone_ecs_slb": list(_DZ),
    "eip_slb_ecs": _DZ + [("CreateLoadBalancer", "AssociateEipAddress"),
                          ("AllocateEipAddress", "AssociateEipAddress")],
    "slb_ecs_redis": _DZ + [("CreateVSwitch", "CreateInstance"), ("CreateInstance", "DescribeInstanceAttribute")],
    "dual_zone_ecs_slb_rds": list(_RDS),
    "slb_ecs_rds": _RDS + [("CreateLoadBalancer", "CreateLoadBalancerHTTPListener"),
                           ("CreateLoadBalancerHTTPListener", "StartLoadBalancerListener")],
}


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------
def _check_prob(name: str, x, lo_closed: bool = True, hi_open: bool = True) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    x = float(x)
    if not math.isfinite(x) or x < 0 or (x >= 1 if hi_open else x > 1) or (not lo_closed and x <= 0):
        raise ValueError(f"{name} must lie in {'[0' if lo_closed else '(0'}, 1{')' if hi_open else ']'}, got {x}")
    return x


def _check_real(name: str, x, lo: float | None = None, strict: bool = False) -> float:
    """A finite real number (not a bool), optionally ``> lo`` (``strict``) or ``>= lo``."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__}")
    x = float(x)
    if not math.isfinite(x) or (lo is not None and (x <= lo if strict else x < lo)):
        bound = "" if lo is None else f" and {'>' if strict else '>='} {lo}"
        raise ValueError(f"{name} must be finite{bound}, got {x}")
    return x


def _check_count(name: str, x, lo: int = 1) -> int:
    """An integer (not a bool) ``>= lo``."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(x).__name__}")
    if x < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {x!r}")
    return int(x)


def _check_po(name: str, po) -> PartialOrder:
    if not isinstance(po, PartialOrder):
        raise TypeError(f"{name} must be a PartialOrder, got {type(po).__name__}")
    return po


def _check_beta(beta) -> float:
    return _check_real("beta", beta, lo=0.0)


def _as_bool_matrix(name: str, a) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array or tensor, got {type(a).__name__}")
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {a.shape}")
    if a.dtype != bool:
        if not np.issubdtype(a.dtype, np.number) or not np.all(np.isin(a, (0, 1))):
            raise ValueError(f"{name} must be boolean-valued (0/1 entries)")
        a = a.astype(bool)
    return a


def check_trace(trace, n: int, name: str = "trace") -> np.ndarray:
    """Validate one trace: non-empty, integer actions in [0, n), no repeats."""
    if isinstance(trace, (str, bytes)) or trace is None:
        raise TypeError(f"{name} must be a sequence of action indices, got {type(trace).__name__}")
    arr = np.asarray(trace)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of action indices")
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must hold integer action indices")
        arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() >= n:
        raise ValueError(f"{name} has action indices outside [0, {n})")
    if len(np.unique(arr)) != len(arr):
        raise ValueError(f"{name} repeats an action")
    return arr.astype(np.int64)


def check_complete_traces(traces, n: int) -> np.ndarray:
    """Validate a batch of complete traces (each a permutation of range(n)) -> (m, n) int64."""
    if traces is None or isinstance(traces, (str, bytes)):
        raise TypeError("traces must be a list of traces or an (m, n) integer array")
    if isinstance(traces, torch.Tensor):
        traces = traces.detach().cpu().numpy()
    rows = list(traces)
    if len(rows) == 0:
        raise ValueError("traces must contain at least one trace")
    out = np.stack([check_trace(t, n, name=f"traces[{i}]") for i, t in enumerate(rows)]) if all(
        np.ndim(t) == 1 for t in rows) else None
    if out is None:
        raise ValueError("traces must be 1-D sequences of action indices")
    if out.shape[1] != n:
        raise ValueError(f"traces must be complete (permutations of all {n} actions); got length {out.shape[1]}")
    return out


# --------------------------------------------------------------------------------------------
# graphs: closure, reduction, cycles
# --------------------------------------------------------------------------------------------
def transitive_closure(adj) -> np.ndarray:
    """Strict transitive closure of an adjacency matrix (Warshall, vectorised per pivot)."""
    c = _as_bool_matrix("adj", adj).copy()
    for k in range(c.shape[0]):
        c |= c[:, k:k + 1] & c[k:k + 1, :]
    return c


def transitive_reduction(closure) -> np.ndarray:
    """Cover (Hasse) edges of a strict closure: i->j kept iff no k with i->k->j."""
    c = _as_bool_matrix("closure", closure)
    two_step = (c.astype(np.int64) @ c.astype(np.int64)) > 0
    return c & ~two_step


def find_cycle(adj: np.ndarray) -> list[int] | None:
    """One directed cycle of ``adj`` as a node list, or None if acyclic."""
    n = adj.shape[0]
    colour = np.zeros(n, dtype=int)
    parent = [-1] * n
    for s in range(n):
        if colour[s]:
            continue
        stack = [(s, iter(np.flatnonzero(adj[s])))]
        colour[s] = 1
        while stack:
            v, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[v] = 2
                stack.pop()
                continue
            nxt = int(nxt)
            if colour[nxt] == 1:
                cyc = [nxt]
                u = v
                while u != nxt:
                    cyc.append(u)
                    u = parent[u]
                return cyc[::-1]
            if colour[nxt] == 0:
                colour[nxt] = 1
                parent[nxt] = v
                stack.append((nxt, iter(np.flatnonzero(adj[nxt]))))
    return None


def break_cycles(adj, weights=None) -> np.ndarray:
    """Greedily remove the weakest edge of any directed cycle until the graph is acyclic (Sec. 3.4)."""
    a = _as_bool_matrix("adj", adj).copy()
    np.fill_diagonal(a, False)
    w = np.ones(a.shape) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != a.shape:
        raise ValueError(f"weights must have the shape of adj {a.shape}, got {w.shape}")
    while (cyc := find_cycle(a)) is not None:
        edges = list(zip(cyc, cyc[1:] + cyc[:1], strict=True))
        i, j = min(edges, key=lambda e: w[e])
        a[i, j] = False
    return a


# --------------------------------------------------------------------------------------------
# partial orders
# --------------------------------------------------------------------------------------------
@dataclass
class PartialOrder:
    """A strict partial order on ``n`` named actions, stored as its closure (``closure[i,j]``: i before j)."""

    names: list[str]
    closure: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        c = _as_bool_matrix("closure", self.closure)
        if np.any(np.diag(c)):
            raise ValueError("closure must be irreflexive (zero diagonal)")
        if np.any(c & c.T):
            raise ValueError("closure must be antisymmetric (no i<j and j<i)")
        if not np.array_equal(transitive_closure(c), c):
            raise ValueError("closure must be transitive")
        self.closure = c
        self.names = [str(x) for x in (self.names if self.names is not None else range(c.shape[0]))]
        if len(self.names) != c.shape[0]:
            raise ValueError(f"names must have {c.shape[0]} entries, got {len(self.names)}")

    @property
    def n(self) -> int:
        return self.closure.shape[0]

    @classmethod
    def from_edges(cls, edges: Sequence[tuple], names: Sequence[str] | None = None) -> PartialOrder:
        """From ``source -> target`` edges (names or indices); a cycle or self-loop raises ValueError."""
        edges = list(edges)
        if names is None:
            names = []
            for e in edges:
                for x in e:
                    if x not in names:
                        names.append(x)
        names = list(names)
        index = {x: i for i, x in enumerate(names)}
        adj = np.zeros((len(names), len(names)), dtype=bool)
        for e in edges:
            if len(e) != 2:
                raise ValueError(f"edges must be (source, target) pairs, got {e!r}")
            s, t = e
            if s not in index or t not in index:
                raise ValueError(f"edges mention an unknown node: {s!r} -> {t!r}")
            if s == t:
                raise ValueError(f"edges contain a self-loop on {s!r}")
            adj[index[s], index[t]] = True
        cyc = find_cycle(adj)
        if cyc is not None:
            raise ValueError("edges contain a cycle: " + " -> ".join(str(names[i]) for i in cyc + cyc[:1]))
        return cls([str(x) for x in names], transitive_closure(adj))

    @classmethod
    def from_latent(cls, U, names=None) -> PartialOrder:
        """Latent dominance (Sec. 3.1): i before j iff U[i,k] > U[j,k] for every coordinate k."""
        U = np.asarray(U, dtype=float)
        if U.ndim != 2 or U.shape[1] < 1 or not np.all(np.isfinite(U)):
            raise ValueError("U must be a finite (n, K) matrix with K >= 1")
        return cls(names, dominance(U))

    def cover(self) -> np.ndarray:
        """Transitive reduction (Hasse edges)."""
        return transitive_reduction(self.closure)

    def frontier(self, remaining) -> np.ndarray:
        """Remaining actions with no remaining predecessor (on the closure, Sec. 3.2)."""
        r = np.asarray(remaining, dtype=bool)
        if r.shape != (self.n,):
            raise ValueError(f"remaining must be a boolean vector of length {self.n}")
        return r & ~(self.closure[r].any(0))

    def is_linear_extension(self, order: Sequence[int]) -> bool:
        o = check_trace(order, self.n, "order")
        if len(o) != self.n:
            return False
        pos = np.empty(self.n, dtype=int)
        pos[o] = np.arange(self.n)
        i, j = np.nonzero(self.closure)
        return bool(np.all(pos[i] < pos[j]))

    def restrict(self, subset: Sequence[int]) -> PartialOrder:
        s = check_trace(subset, self.n, "subset")
        return PartialOrder([self.names[i] for i in s], self.closure[np.ix_(s, s)])

    def incomparable_pairs(self) -> list[tuple[int, int]]:
        comp = self.closure | self.closure.T
        return [(i, j) for i in range(self.n) for j in range(i + 1, self.n) if not comp[i, j]]

    def num_linear_extensions(self, max_n: int = 18) -> int:
        """Exact count by the memoised down-set recursion e(R) = sum_{a minimal in R} e(R \\ a)."""
        return count_linear_extensions(self.closure, (1 << self.n) - 1, max_n=max_n, cache=self._cache)


def dominance(U) -> np.ndarray:
    """Dominance closure of latent positions: ``U (n,K) -> (n,n)`` or batched ``(c,n,K) -> (c,n,n)``."""
    if isinstance(U, torch.Tensor):
        return (U.unsqueeze(-2) > U.unsqueeze(-3)).all(-1)
    U = np.asarray(U)
    return (U[..., :, None, :] > U[..., None, :, :]).all(-1)


def count_linear_extensions(closure: np.ndarray, mask: int, max_n: int = 18, cache: dict | None = None) -> int:
    """Number of linear extensions of ``closure`` restricted to the bitmask ``mask`` (memoised)."""
    n = closure.shape[0]
    max_n = _check_count("max_n", max_n)
    if bin(mask).count("1") > max_n:
        raise ValueError(f"counting linear extensions of {bin(mask).count('1')} actions exceeds max_n={max_n} "
                         "(the count is #P-hard; raise max_n deliberately)")
    cache = {} if cache is None else cache
    pred = [int(sum(1 << b for b in np.flatnonzero(closure[:, a]))) for a in range(n)]

    def e(m: int) -> int:
        if m & (m - 1) == 0:
            return 1
        v = cache.get(m)
        if v is not None:
            return v
        tot = 0
        mm = m
        while mm:
            low = mm & -mm
            a = low.bit_length() - 1
            mm ^= low
            if pred[a] & m == 0:
                tot += e(m ^ low)
        cache[m] = tot
        return tot

    return e(mask)


# --------------------------------------------------------------------------------------------
# the frontier-softmax likelihood (Sec. 3.2)
# --------------------------------------------------------------------------------------------
UTILITIES = ("log_successors", "uniform")


def step_probabilities(remaining, closure, beta: float, eps: float, utility: str = "log_successors") -> np.ndarray:
    """Eq. (F): ``p(y_t = a | y_<t, h, beta, eps)`` for every action (zero outside the remaining set).

    Frontier ``F_t`` = remaining actions with no remaining predecessor; utility
    ``Q_t(a) = log(1 + S_t(a))`` with ``S_t(a)`` the remaining successors of ``a`` on the closure
    (``utility="uniform"`` sets ``Q = 0``: the BPOP-uniform ablation).
    """
    c = _as_bool_matrix("closure", closure)
    beta, eps = _check_beta(beta), _check_prob("eps", eps)
    if utility not in UTILITIES:
        raise ValueError(f"utility must be one of {UTILITIES}, got {utility!r}")
    r = np.asarray(remaining, dtype=bool)
    if r.shape != (c.shape[0],) or not r.any():
        raise ValueError(f"remaining must be a non-empty boolean vector of length {c.shape[0]}")
    front = r & ~(c[r].any(0))
    succ = (c[:, r]).sum(1)
    q = np.log1p(succ) if utility == "log_successors" else np.zeros(c.shape[0])
    w = np.where(front, np.exp(beta * (q - q[front].max())), 0.0)
    return (1 - eps) * w / w.sum() + eps * r / r.sum()


def trace_log_likelihood(trace, po: PartialOrder, beta: float, eps: float, utility: str = "log_successors") -> float:
    """Reference loop (NumPy): ``log p(y | h) = sum_t log p(y_t | y_<t, h)`` (Sec. 3.2).

    A partial trace over the observed set ``O`` is scored under the restriction ``h|_O``.
    """
    _check_po("po", po)
    y = check_trace(trace, po.n)
    c = po.closure[np.ix_(y, y)]  # restriction to the observed set, in trace order
    rem = np.ones(len(y), dtype=bool)
    ll = 0.0
    for t in range(len(y)):
        p = step_probabilities(rem, c, beta, eps, utility)
        ll += math.log(p[t]) if p[t] > 0 else -math.inf
        rem[t] = False
    return ll


def remaining_tensor(traces, n: int | None = None, dtype=torch.float64, device=None) -> torch.Tensor:
    """``R[t, i, a] = 1[pos_i(a) >= t]`` for complete traces ``(m, n)`` -> ``(n, m, n)`` (Sec. 3.2)."""
    arr = np.asarray(traces) if not isinstance(traces, torch.Tensor) else traces.cpu().numpy()
    if n is None:
        if arr.ndim != 2:
            raise ValueError("traces must be an (m, n) array of complete traces")
        n = arr.shape[1]
    Y = check_complete_traces(arr, n)
    pos = np.empty_like(Y)
    np.put_along_axis(pos, Y, np.arange(n)[None, :].repeat(len(Y), 0), axis=1)
    R = pos[None, :, :] >= np.arange(n)[:, None, None]
    return torch.as_tensor(R, dtype=dtype, device=device)


def batched_log_likelihood(R: torch.Tensor, closure: torch.Tensor, beta, eps: float, chosen: torch.Tensor,
                           utility: str = "log_successors", weights: torch.Tensor | None = None,
                           per_trace: bool = False) -> torch.Tensor:
    """Vectorised Eq. (F) summed over steps and traces, for a batch of chains.

    Args:
        R: remaining tensor ``(n, m, n)`` shared by all chains, or ``(c, n, m, n)`` (one data set per chain).
        closure: ``(n, n)`` or ``(c, n, n)`` 0/1 closures.
        beta: scalar or ``(c,)``.
        eps: trembling-hand probability in [0, 1).
        chosen: ``(n, m)`` (or ``(c, n, m)``) the action taken at step t by trace i.
        weights: optional ``(m,)`` or ``(c, m)`` trace weights (0 masks a padded trace).
        per_trace: return ``(c, m)`` per-trace log-likelihoods instead of their sum.
    Returns:
        ``(c,)`` total log-likelihoods (``()`` for a single closure). Two batched matmuls, no loop over steps.
    """
    eps = _check_prob("eps", eps)
    if utility not in UTILITIES:
        raise ValueError(f"utility must be one of {UTILITIES}, got {utility!r}")
    if not isinstance(R, torch.Tensor) or R.dim() not in (3, 4) or R.dtype not in (torch.float32, torch.float64):
        raise TypeError("R must be a float32/float64 (n, m, n) or (c, n, m, n) tensor from remaining_tensor")
    if R.numel() == 0 or R.shape[-1] != R.shape[-3] or not ((R == 0) | (R == 1)).all():
        raise ValueError("R must be a non-empty 0/1 remaining tensor of shape (n, m, n) or (c, n, m, n)")
    if not isinstance(closure, torch.Tensor) or closure.dim() not in (2, 3):
        raise TypeError("closure must be an (n, n) or (c, n, n) tensor")
    if closure.shape[-1] != R.shape[-1] or closure.shape[-2] != R.shape[-1] or closure.numel() == 0 or not (
            (closure == 0) | (closure == 1)).all():
        raise ValueError(f"closure must be 0/1 with shape (n, n) or (c, n, n), n = {R.shape[-1]}; "
                         f"got {tuple(closure.shape)}")
    c = 1 if closure.dim() == 2 else closure.shape[0]
    if R.dim() == 4 and R.shape[0] != c:
        raise ValueError(f"R has {R.shape[0]} per-chain data sets but closure has {c} chains")
    if isinstance(beta, bool) or not isinstance(beta, (int, float, torch.Tensor, np.floating, np.integer)):
        raise TypeError(f"beta must be a number or a tensor, got {type(beta).__name__}")
    # a Python or NumPy number goes straight to R's dtype (through float32 it would be off by ~1e-7)
    beta = (beta.to(device=R.device, dtype=R.dtype) if isinstance(beta, torch.Tensor)
            else torch.tensor(float(beta), dtype=R.dtype, device=R.device)).reshape(-1)
    if beta.numel() not in (1, c):
        raise ValueError(f"beta must have 1 or {c} entries, got {beta.numel()}")
    if not torch.isfinite(beta).all() or (beta < 0).any():
        raise ValueError("beta must be finite and >= 0")
    return _batched_core(R, closure, beta, eps, chosen, utility, weights, per_trace)


def _batched_core(R, closure, beta, eps, chosen, utility="log_successors", weights=None, per_trace=False):
    """The unchecked kernel of :func:`batched_log_likelihood` (the MCMC hot loop calls it directly)."""
    single = closure.dim() == 2
    C = (closure if not single else closure[None]).to(R.dtype)
    c, n = C.shape[0], C.shape[-1]
    beta = beta.reshape(-1)
    m = R.shape[-2]
    Rb = R.reshape(-1, n * m, n)                                # (c|1, n*m, n): steps x traces flattened
    npred = (Rb @ C).view(c, n, m, n)                           # remaining predecessors of each action
    Rb = Rb.view(-1, n, m, n)
    front = (Rb > 0) & (npred < 0.5)
    ch = chosen if chosen.dim() == 3 else chosen[None]
    ch = ch.expand(c, -1, -1).unsqueeze(-1).long()
    if utility == "log_successors":
        # softmax over the frontier of beta log(1 + S) as a ratio of powers: exp(beta log(1 + S)) =
        # (1 + S)^beta, scaled by n^(-beta/2) so that float32 neither overflows nor underflows for any
        # beta below ~50 (S <= n - 1); cheaper than a masked logsumexp, equal up to round-off
        S = (R.reshape(-1, n * m, n) @ C.transpose(-1, -2)).view(c, n, m, n)   # remaining successors
        b4 = beta[:, None, None, None]
        w = torch.where(front, ((1 + S) * (1 / math.sqrt(n))) ** b4, torch.zeros((), dtype=R.dtype, device=R.device))
        log_z = torch.log(w.sum(-1)) + beta[:, None, None] * (0.5 * math.log(n))
        lp_front = beta[:, None, None] * torch.log1p(torch.gather(S, -1, ch).squeeze(-1)) - log_z   # (c, n, m)
    else:
        lp_front = -torch.log(front.sum(-1).to(R.dtype))                                            # uniform
    in_front = torch.gather(front, -1, ch).squeeze(-1)
    n_rem = torch.arange(n, 0, -1, dtype=R.dtype, device=R.device)[None, :, None]
    log_unif = torch.log(eps / n_rem).expand_as(lp_front)
    if eps > 0:
        lp = torch.where(in_front, torch.logaddexp(math.log1p(-eps) + lp_front, log_unif), log_unif)
    else:
        lp = torch.where(in_front, lp_front, torch.full_like(lp_front, -math.inf))
    lp_trace = lp.sum(1)                                        # (c, m)
    if weights is not None:
        w = weights if weights.dim() == 2 else weights[None]
        lp_trace = torch.where(w > 0, lp_trace * w, torch.zeros_like(lp_trace))
    out = lp_trace if per_trace else lp_trace.sum(-1)
    return out[0] if single else out


def chosen_tensor(traces, device=None) -> torch.Tensor:
    """``chosen[t, i] = y_{i,t}`` as a ``(n, m)`` long tensor."""
    return torch.as_tensor(np.asarray(traces).T.copy(), dtype=torch.long, device=device)


# --------------------------------------------------------------------------------------------
# queue-jump likelihood (Nicholls et al. 2024), exact
# --------------------------------------------------------------------------------------------
def queue_jump_log_likelihood(trace, po: PartialOrder, p: float, max_n: int = 16, cache: dict | None = None) -> float:
    """Exact queue-jump likelihood (Sec. 3.6):
    ``p(y_t=a) = (1-p) e(h[R_t minus a]) / e(h[R_t]) 1[a in F_t] + p / |R_t|``, with ``e`` the number of
    linear extensions (memoised down-set recursion; refused above ``max_n`` actions)."""
    _check_po("po", po)
    p = _check_prob("p", p)
    y = check_trace(trace, po.n)
    max_n = _check_count("max_n", max_n)
    if len(y) > max_n:
        raise ValueError(f"queue-jump likelihood on {len(y)} actions exceeds max_n={max_n} (#P-hard counting)")
    c = po.closure[np.ix_(y, y)]
    cache = {} if cache is None else cache
    mask = (1 << len(y)) - 1
    ll = 0.0
    for t in range(len(y)):
        rem = np.array([(mask >> b) & 1 for b in range(len(y))], dtype=bool)
        is_front = not c[rem, t].any()
        k = int(rem.sum())
        pr = p / k
        if is_front:
            pr += (1 - p) * count_linear_extensions(c, mask ^ (1 << t), max_n, cache) / count_linear_extensions(
                c, mask, max_n, cache)
        ll += math.log(pr) if pr > 0 else -math.inf
        mask ^= 1 << t
    return ll


# --------------------------------------------------------------------------------------------
# trace generators (data)
# --------------------------------------------------------------------------------------------
def sample_trace(po: PartialOrder, beta: float, eps: float, rng: np.random.Generator,
                 preference: np.ndarray | None = None, utility: str = "log_successors") -> list[int]:
    """Draw one complete trace from Eq. (F); ``preference`` adds a persona bias to Q (Sec. 7.2)."""
    _check_po("po", po)
    beta, eps = _check_beta(beta), _check_prob("eps", eps)
    c = po.closure
    pref = np.zeros(po.n) if preference is None else np.asarray(preference, dtype=float)
    rem = np.ones(po.n, dtype=bool)
    out = []
    for _ in range(po.n):
        front = rem & ~(c[rem].any(0))
        if rng.random() < eps:
            a = int(rng.choice(np.flatnonzero(rem)))
        else:
            q = (np.log1p(c[:, rem].sum(1)) if utility == "log_successors" else 0.0) + pref
            w = np.where(front, np.exp(beta * (q - q[front].max())), 0.0)
            a = int(rng.choice(po.n, p=w / w.sum()))
        out.append(a)
        rem[a] = False
    return out


def prior_sample_U(n: int, K: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """Rows of U i.i.d. N(0, Sigma_rho), Sigma_rho = (1-rho) I + rho 11^T (Sec. 3.1)."""
    n, K = _check_count("n", n), _check_count("K", K)
    rho = _check_prob("rho", rho)
    g = rng.standard_normal((n, K))
    g0 = rng.standard_normal((n, 1))
    return math.sqrt(1 - rho) * g + math.sqrt(rho) * g0
