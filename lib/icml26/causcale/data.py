"""Synthetic interventional data for amortized causal discovery (spec Sec. 3.1, 3.9).

The generator follows the SEA / DCDI lineage the official CauScale code uses: random DAGs (ER or
scale-free), one observational regime plus one perfect single-node intervention per variable, and
five mechanisms (``linear``, ``nn``, ``nn_add`` for training; ``sigmoid_add``, ``polynomial`` held
out). Rows are stored regime by regime (observational first), which matters for the reduction
units (Sec. 3.5). The graph prior is the estimated precision matrix of the *raw* data (Sec. 3.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ._checks import check_device, check_generator, check_int, check_real, check_rng

GRAPH_TYPES = ("er", "sf", "sf_official")
MECHANISMS = ("linear", "nn", "nn_add", "sigmoid_add", "polynomial")
INTERVENTIONS = ("all_single", "none")
PRIOR_METHODS = ("auto", "pinv", "ledoit_wolf")


_rng = check_rng
_int_arg = check_int


def _is_dag(adj: np.ndarray) -> bool:
    """Kahn's algorithm on a 0/1 matrix."""
    indeg = adj.sum(0).astype(int)
    stack = [i for i in range(adj.shape[0]) if indeg[i] == 0]
    seen = 0
    while stack:
        i = stack.pop()
        seen += 1
        for j in np.flatnonzero(adj[i]):
            indeg[j] -= 1
            if indeg[j] == 0:
                stack.append(j)
    return seen == adj.shape[0]


def topological_order(adj: np.ndarray) -> list[int]:
    """A topological order of a DAG given as a 0/1 matrix (``adj[i, j] = 1`` iff ``i -> j``)."""
    indeg = adj.sum(0).astype(int)
    stack = sorted(i for i in range(adj.shape[0]) if indeg[i] == 0)
    order = []
    while stack:
        i = stack.pop(0)
        order.append(i)
        for j in np.flatnonzero(adj[i]):
            indeg[j] -= 1
            if indeg[j] == 0:
                stack.append(j)
    if len(order) != adj.shape[0]:
        raise ValueError("adj must be acyclic (a DAG)")
    return order


def sample_dag(n_nodes: int, expected_degree: float, graph_type: str = "er", rng=None) -> np.ndarray:
    """Random DAG adjacency ``A[i, j] = 1`` iff ``i -> j`` (spec Sec. 3.9).

    ``er``: a random causal order; each ordered pair is an edge with probability
    ``p = 2 deg / (n - 1)``, so ``E[#edges] = deg * n``. ``sf`` (the book's, used for training):
    going from the source end, the node at causal position ``t`` draws ``Binomial(t, p)`` distinct
    parents among the earlier nodes with probability proportional to (out-degree + 1), i.e.
    preferential attachment (same expected edge count). ``sf_official`` (the official generator,
    ``dag_generator.py``): going from the *sink* end, the node at position ``t`` draws
    ``Binomial(t, p)`` parents *with replacement* (duplicates collapse), so it has fewer edges and
    smaller hubs. Empty graphs are redrawn.
    """
    n = _int_arg("n_nodes", n_nodes, 2)
    deg = check_real("expected_degree", expected_degree)
    if deg <= 0 or 2 * deg >= n:
        raise ValueError(f"expected_degree must be > 0 and < n_nodes / 2 = {n / 2}, got {expected_degree}")
    if graph_type not in GRAPH_TYPES:
        raise ValueError(f"graph_type must be one of {GRAPH_TYPES}, got {graph_type!r}")
    g = _rng(rng)
    p = 2.0 * deg / (n - 1)
    while True:
        perm = g.permutation(n)
        lower = np.zeros((n, n), dtype=np.int64)  # in causal-position coordinates: edge a -> b for a < b
        if graph_type == "er":
            lower = np.triu((g.random((n, n)) < p).astype(np.int64), k=1)
        elif graph_type == "sf_official":
            for t in range(n - 1, 0, -1):      # sink end first; parents sampled with replacement
                k = g.binomial(t, p)
                if k == 0:
                    continue
                w = lower[:t].sum(1) + 1.0
                lower[g.choice(t, size=k, replace=True, p=w / w.sum()), t] = 1
        else:
            outdeg = np.zeros(n)
            for t in range(1, n):
                k = min(g.binomial(t, p), t)
                if k == 0:
                    continue
                w = outdeg[:t] + 1.0
                parents = g.choice(t, size=k, replace=False, p=w / w.sum())
                lower[parents, t] = 1
                outdeg[parents] += 1
        if lower.sum() > 0:
            break
    adj = np.zeros((n, n), dtype=np.int64)
    adj[np.ix_(perm, perm)] = lower
    return adj


@dataclass
class SCMData:
    """One simulated dataset. Rows are grouped by regime: the observational rows first
    (``regime == -1``), then the rows of ``do(0)``, ``do(1)``, ... ``do(n-1)``."""

    x_raw: np.ndarray        # [m, n] raw samples
    x: np.ndarray            # [m, n] standardized (zero mean, unit std per column)
    interv_mask: np.ndarray  # [m, n] 1 where the variable was intervened on
    regime: np.ndarray       # [m] -1 (observational) or the target
    adj: np.ndarray          # [n, n] true DAG


def regime_sizes(n_samples: int, n_nodes: int) -> np.ndarray:
    """Rows per regime: the observational regime gets ``m // (n + 1)``, the rest is split evenly over
    the ``n`` interventional regimes (remainder to the first ones). Returns ``[n + 1]`` (obs first)."""
    obs = n_samples // (n_nodes + 1)
    rest = n_samples - obs
    sizes = np.full(n_nodes, rest // n_nodes, dtype=np.int64)
    sizes[: rest % n_nodes] += 1
    return np.concatenate([[obs], sizes])


def standardize(x: np.ndarray) -> np.ndarray:
    """Each column to zero mean and unit standard deviation (constant columns stay at zero)."""
    sd = x.std(0)
    return (x - x.mean(0)) / np.where(sd > 1e-12, sd, 1.0)


def simulate_scm(adj, n_samples: int, mechanism: str = "linear", interventions: str = "all_single",
                 noise_coeff: float = 0.4, rng=None) -> SCMData:
    """Sample an SCM on the DAG ``adj`` with perfect single-node interventions (spec Sec. 3.9).

    Roots and intervened targets are ``U(-1, 1)``; noise is ``eps_j = noise_coeff * sigma_j * N(0,1)``
    with ``sigma_j = sqrt(U(0,1) + 1)``. Mechanisms (``Pa`` = parent values): ``linear``
    ``sum_p w_pj x_p + eps`` with ``w = +-U(0.25, 1)``; ``nn`` ``MLP([x_Pa, eps])`` (20 tanh units);
    ``nn_add`` ``MLP(x_Pa) + eps`` (10 PReLU units); ``sigmoid_add`` ``sum_p a b (x_p + c) /
    (1 + |b (x_p + c)|) + eps``; ``polynomial`` ``sum_p clip(c0 + c1 x_p + c2 x_p^2, -1, 1) + eps``.
    MLP weights are ``N(0, 1)`` without biases (a book choice). Work is vectorised over rows; the
    only loop is over the nodes in causal order.
    """
    a = np.asarray(adj)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"adj must be a square [n, n] matrix, got shape {a.shape}")
    if a.shape[0] < 2:
        raise ValueError(f"adj must have at least 2 nodes, got {a.shape[0]}")
    if not np.all(np.isin(a, (0, 1))):
        raise ValueError("adj must be a 0/1 matrix")
    a = a.astype(np.int64)
    if np.any(np.diag(a) != 0):
        raise ValueError("adj must have a zero diagonal")
    if not _is_dag(a):
        raise ValueError("adj must be acyclic (a DAG)")
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if interventions not in INTERVENTIONS:
        raise ValueError(f"interventions must be one of {INTERVENTIONS}, got {interventions!r}")
    check_real("noise_coeff", noise_coeff, lo=0.0)
    n = a.shape[0]
    m = _int_arg("n_samples", n_samples, 1)
    if interventions == "all_single" and m < n + 1:
        raise ValueError(f"n_samples must be >= n_nodes + 1 = {n + 1} with interventions='all_single', got {m}")
    g = _rng(rng)
    if interventions == "all_single":
        regime = np.repeat(np.arange(-1, n), regime_sizes(m, n))
    else:
        regime = np.full(m, -1)
    mask = (regime[:, None] == np.arange(n)[None, :]).astype(np.int64)
    sigma = np.sqrt(g.random(n) + 1.0)
    eps = noise_coeff * sigma[None, :] * g.standard_normal((m, n))
    x = np.zeros((m, n))
    for j in topological_order(a):
        pa = np.flatnonzero(a[:, j])
        if len(pa) == 0:
            val = g.uniform(-1, 1, m)
        else:
            xp = x[:, pa]
            k = len(pa)
            if mechanism == "linear":
                w = g.uniform(0.25, 1.0, k) * g.choice([-1.0, 1.0], k)
                val = xp @ w + eps[:, j]
            elif mechanism == "nn":
                w1, w2 = g.standard_normal((k + 1, 20)), g.standard_normal(20)
                val = np.tanh(np.concatenate([xp, eps[:, j:j + 1]], 1) @ w1) @ w2
            elif mechanism == "nn_add":
                w1, w2 = g.standard_normal((k, 10)), g.standard_normal(10)
                h = xp @ w1
                val = np.where(h > 0, h, 0.25 * h) @ w2 + eps[:, j]
            elif mechanism == "sigmoid_add":
                aa = 1.0 + g.exponential(0.25)
                b = g.uniform(0.5, 2.0) * g.choice([-1.0, 1.0])
                c = g.uniform(-2.0, 2.0)
                z = b * (xp + c)
                val = (aa * z / (1.0 + np.abs(z))).sum(1) + eps[:, j]
            else:  # polynomial
                cc = g.random((3, k))
                val = np.clip(cc[0] + cc[1] * xp + cc[2] * xp ** 2, -1.0, 1.0).sum(1) + eps[:, j]
        x[:, j] = np.where(mask[:, j] == 1, g.uniform(-1, 1, m), val)
    x = np.clip(np.nan_to_num(x, nan=0.0, posinf=1e6, neginf=-1e6), -1e6, 1e6)
    return SCMData(x_raw=x, x=standardize(x), interv_mask=mask, regime=regime, adj=a)


def sample_linear_scm_batch(batch: int, n_nodes: int, n_samples: int, expected_degree: float,
                            noise_coeff: float = 0.4, device="cpu", generator: torch.Generator | None = None
                            ) -> dict[str, torch.Tensor]:
    """Vectorised linear-ER generator for a batch of same-size graphs (spec Sec. 7.5), on ``device``.

    Per regime ``r`` (observational or ``do(t)``) the samples solve ``X = X W_r + E`` i.e.
    ``X = E (I - W_r)^{-1}``, where ``W_r`` is ``W`` with the target's column zeroed and ``E`` holds the
    noise, with the columns of roots and of the target replaced by ``U(-1, 1)`` draws. Returns ``x``
    (standardized), ``x_raw``, ``interv``, ``adj``, ``weights``, ``e`` (so that ``x_raw (I - W_r) = e``).
    """
    b = _int_arg("batch", batch, 1)
    n = _int_arg("n_nodes", n_nodes, 2)
    m = _int_arg("n_samples", n_samples, n + 1)
    deg = check_real("expected_degree", expected_degree)
    if deg <= 0 or 2 * deg >= n:
        raise ValueError(f"expected_degree must be > 0 and < n_nodes / 2, got {expected_degree}")
    noise_coeff = check_real("noise_coeff", noise_coeff, lo=0.0)
    device = check_device(device, "device")
    gen = check_generator(generator, "generator")
    gen = gen if gen is not None else torch.Generator().manual_seed(0)
    p = 2.0 * deg / (n - 1)

    def u(*shape):
        return torch.rand(*shape, generator=gen)

    tri = torch.triu((u(b, n, n) < p).double(), diagonal=1)
    perm = torch.argsort(u(b, n), dim=1)
    pm = torch.nn.functional.one_hot(perm, n).double()          # pm[b, k, i] = 1 iff perm[k] = i
    adj = pm.transpose(1, 2) @ tri @ pm                          # adj[perm[k], perm[l]] = tri[k, l]
    sign = torch.where(u(b, n, n) < 0.5, -1.0, 1.0).double()
    w = adj * (0.25 + 0.75 * u(b, n, n).double()) * sign
    sizes = torch.as_tensor(regime_sizes(m, n))
    regime = torch.repeat_interleave(torch.arange(-1, n), sizes)  # [m]
    interv = (regime[:, None] == torch.arange(n)[None, :]).double().expand(b, m, n)
    sigma = torch.sqrt(u(b, 1, n).double() + 1.0)
    e = noise_coeff * sigma * torch.randn(b, m, n, generator=gen).double()
    root = (adj.sum(1) == 0).double()[:, None, :]                 # [b, 1, n]
    unif = (2 * u(b, m, n) - 1).double()
    rep = torch.clamp(root + interv, max=1.0)
    e = rep * unif + (1 - rep) * e
    x = torch.empty(b, m, n, dtype=torch.float64)
    eye = torch.eye(n, dtype=torch.float64)
    start = 0
    for r, size in zip(range(-1, n), sizes.tolist()):  # one batched solve per regime (not per sample)
        wr = w.clone()
        if r >= 0:
            wr[:, :, r] = 0.0
        x[:, start:start + size] = torch.linalg.solve((eye - wr).transpose(1, 2),
                                                      e[:, start:start + size].transpose(1, 2)).transpose(1, 2)
        start += size
    mu, sd = x.mean(1, keepdim=True), x.std(1, unbiased=False, keepdim=True).clamp_min(1e-12)
    out = {"x": (x - mu) / sd, "x_raw": x, "interv": interv.contiguous(), "adj": adj, "weights": w, "e": e,
           "regime": regime}
    return {k: v.to(device) for k, v in out.items()}


def precision_prior(x_raw, method: str = "auto", n_prior_samples: int = 500, rng=None,
                    nan_policy: str = "raise") -> np.ndarray:
    """The graph prior ``rho``: estimated precision (inverse covariance) matrix of the raw data
    (spec Sec. 3.1). ``min(n_prior_samples, m)`` random rows; ``pinv(cov)`` (``rcond=1e-10``) when
    ``n < 100``, else Ledoit-Wolf shrinkage (``method="auto"``). The diagonal is kept."""
    try:
        x = (x_raw.detach().cpu().double().numpy() if isinstance(x_raw, torch.Tensor)
             else np.asarray(x_raw, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"x_raw must be a numeric [m, n] array, got {type(x_raw).__name__}") from exc
    if x.ndim != 2:
        raise ValueError(f"x_raw must be a 2-D [m, n] array, got shape {x.shape}")
    if method not in PRIOR_METHODS:
        raise ValueError(f"method must be one of {PRIOR_METHODS}, got {method!r}")
    if nan_policy not in ("raise", "clip"):
        raise ValueError(f"nan_policy must be 'raise' or 'clip', got {nan_policy!r}")
    if x.shape[0] < 2:
        raise ValueError(f"x_raw must have at least 2 samples, got {x.shape[0]}")
    if x.shape[1] < 1:
        raise ValueError("x_raw must have at least 1 variable")
    if not np.all(np.isfinite(x)):
        if nan_policy == "raise":
            raise ValueError("x_raw contains NaN or inf (pass nan_policy='clip' to replace them)")
        x = np.clip(np.nan_to_num(x, nan=0.0, posinf=1e6, neginf=-1e6), -1e6, 1e6)
    k = _int_arg("n_prior_samples", n_prior_samples, 2)
    if x.shape[0] > k:
        x = x[np.sort(_rng(rng).choice(x.shape[0], size=k, replace=False))]
    if method == "auto":
        method = "pinv" if x.shape[1] < 100 else "ledoit_wolf"
    if method == "pinv":
        cov = np.atleast_2d(np.cov(x, rowvar=False))
        return np.linalg.pinv(cov, rcond=1e-10)
    from sklearn.covariance import LedoitWolf

    return LedoitWolf().fit(x).get_precision()


def population_precision(weights: np.ndarray, noise_var: np.ndarray) -> np.ndarray:
    """Precision of the linear SEM ``x = x W + e`` with ``Var(e) = diag(noise_var)``:
    ``Theta = (I - W) diag(1/omega) (I - W)^T`` (spec Sec. 4, T5)."""
    w = np.asarray(weights, dtype=np.float64)
    i_w = np.eye(w.shape[0]) - w
    return i_w @ np.diag(1.0 / np.asarray(noise_var, dtype=np.float64)) @ i_w.T


def moral_graph(adj: np.ndarray) -> np.ndarray:
    """Skeleton plus edges between co-parents of a common child (symmetric 0/1, zero diagonal)."""
    a = np.asarray(adj).astype(np.int64)
    mor = ((a + a.T) > 0).astype(np.int64)
    mor |= ((a @ a.T) > 0).astype(np.int64)
    np.fill_diagonal(mor, 0)
    return mor


def make_task(n_nodes: int, n_samples: int, mechanism: str = "linear", graph_type: str = "er",
              expected_degree: float | None = None, rng=None, degrees=(1, 2)) -> dict:
    """One training / test item: ``x`` (standardized), ``interv_mask``, ``prior`` (precision of the raw
    data), ``adj``, ``x_raw``. ``expected_degree=None`` draws one of ``degrees`` (capped below n/2)."""
    g = _rng(rng)
    n = _int_arg("n_nodes", n_nodes, 3)
    if expected_degree is None:
        ok = [d for d in degrees if 2 * d < n]
        expected_degree = float(g.choice(ok if ok else [1.0]))
    adj = sample_dag(n, expected_degree, graph_type, rng=g)
    d = simulate_scm(adj, n_samples, mechanism=mechanism, rng=g)
    prior = precision_prior(d.x_raw, rng=g)
    return {"x": d.x.astype(np.float32), "interv_mask": d.interv_mask.astype(np.float32),
            "prior": prior.astype(np.float32), "adj": adj, "x_raw": d.x_raw}


def collate(items: list[dict], device="cpu") -> dict[str, torch.Tensor]:
    """Pad a list of tasks (same ``m``) to the largest ``n``: ``x, interv, prior [B, m|n, n]``, ``adj``
    and the boolean ``node_mask [B, n]`` (spec Sec. 3.3: explicit masks, never padding inferred from
    zeros)."""
    if not isinstance(items, (list, tuple)) or len(items) == 0:
        raise ValueError("items must be a non-empty list of tasks")
    device = check_device(device, "device")
    ms = {it["x"].shape[0] for it in items}
    if len(ms) != 1:
        raise ValueError(f"items must all have the same number of samples, got {sorted(ms)}")
    m = ms.pop()
    nmax = max(it["x"].shape[1] for it in items)
    b = len(items)
    x = torch.zeros(b, m, nmax)
    iv = torch.zeros(b, m, nmax)
    pr = torch.zeros(b, nmax, nmax)
    adj = torch.zeros(b, nmax, nmax, dtype=torch.long)
    mask = torch.zeros(b, nmax, dtype=torch.bool)
    for k, it in enumerate(items):
        n = it["x"].shape[1]
        x[k, :, :n] = torch.as_tensor(it["x"], dtype=torch.float32)
        iv[k, :, :n] = torch.as_tensor(it["interv_mask"], dtype=torch.float32)
        pr[k, :n, :n] = torch.as_tensor(it["prior"], dtype=torch.float32)
        adj[k, :n, :n] = torch.as_tensor(it["adj"], dtype=torch.long)
        mask[k, :n] = True
    out = {"x": x, "interv": iv, "prior": pr, "adj": adj, "node_mask": mask}
    return {k: v.to(device) for k, v in out.items()}
