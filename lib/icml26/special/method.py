r"""SPECIAL: server-side proximal anchoring for federated domain-incremental learning.

Paper: Longtao Xu and Jian Li, *Server-Proximal Aggregation for Federated Domain-Incremental
Learning under Partial Participation: Task-Uniform Convergence and Backward Transfer*, ICML 2026
(arXiv:2601.22274). SPECIAL = Server-Proximal Efficient Continual Aggregation for Learning.

**Provenance.** Only the abstract and third-party summaries of the paper were public when this
module was written. The update rule below, the two anchor choices and the equation labels are the
book's reconstruction from the abstract's wording ("a server-side proximal step that blends the
aggregate with the previous global model"); the paper's exact form may differ. The whole server
step lives in one function, :func:`special_server_step`, so that it can be swapped for the
paper's exact form once known.

Equations (book numbering, chapter ``special``):

* (S1) client mean update over the sampled set :math:`S_t` (:math:`|S_t|=N`, uniform, without
  replacement): :math:`\Delta^t=\frac1N\sum_{i\in S_t}(w_i^t-w^t)`, :math:`\bar w^{t+1}=w^t+\Delta^t`.
* (S2) server proximal step with anchor :math:`a^t` and weight :math:`\lambda\ge0`:
  :math:`w^{t+1}=\arg\min_w \tfrac12\|w-\bar w^{t+1}\|^2+\tfrac\lambda2\|w-a^t\|^2
  =\frac{\bar w^{t+1}+\lambda a^t}{1+\lambda}`.
* (S3) round anchor :math:`a^t=w^t` gives :math:`w^{t+1}=w^t+\frac1{1+\lambda}\Delta^t`: FedAvg with
  server learning rate :math:`\eta_g=1/(1+\lambda)`. Task anchor :math:`a^t=w^\star_{k-1}` (the
  global model at the end of the previous task) is a book extension.
* (S4) local training: :math:`E` epochs of mini-batch SGD with step :math:`\eta_l` on
  :math:`f_{i,k}(w)+\frac\mu2\|w-w^t\|^2` (:math:`\mu=0` for FedAvg and SPECIAL, :math:`\mu>0` for
  FedProx and the client-side placement SPECIAL-C).

The federated engine :func:`run_fdil` trains all sampled clients of a round at once: the client
models are stacked as ``(N, P)`` and the two-layer MLP's forward and backward passes are batched
matrix products (:func:`local_train_batched`), equal to the per-client autograd loop
:func:`local_train_loop` (tested).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from .data import DomainData, dirichlet_partition, validate_domains

METHODS = ("fedavg", "fedprox", "special", "special_c", "replay", "joint")
ANCHORS = ("round", "task")
DTYPES = {"float32": torch.float32, "float64": torch.float64}


# ----------------------------------------------------------------------------------------------
# The model: a flat-parameter two-layer MLP  x (64) -> ReLU(H) -> logits (10)
# ----------------------------------------------------------------------------------------------
def n_params(hidden: int, in_dim: int = 64, n_classes: int = 10) -> int:
    """P = in*H + H + H*C + C (4,810 for the default 64 -> 64 -> 10)."""
    return in_dim * hidden + hidden + hidden * n_classes + n_classes


def unpack(params: torch.Tensor, hidden: int, in_dim: int = 64, n_classes: int = 10):
    """Views W1 (..., in, H), b1 (..., H), W2 (..., H, C), b2 (..., C) of flat params (..., P)."""
    lead = params.shape[:-1]
    sizes = [in_dim * hidden, hidden, hidden * n_classes, n_classes]
    if params.shape[-1] != sum(sizes):
        raise ValueError(f"params must have last dimension {sum(sizes)} for hidden={hidden}, "
                         f"got {params.shape[-1]}")
    W1, b1, W2, b2 = torch.split(params, sizes, dim=-1)
    return (W1.reshape(*lead, in_dim, hidden), b1, W2.reshape(*lead, hidden, n_classes), b2)


def init_mlp(hidden: int, generator: torch.Generator, in_dim: int = 64, n_classes: int = 10) -> torch.Tensor:
    """Flat parameter vector (P,) with PyTorch-default-like init U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
        raise ValueError(f"hidden must be a positive int, got {hidden!r}")
    parts = []
    for fan_in, numel in ((in_dim, in_dim * hidden), (in_dim, hidden),
                          (hidden, hidden * n_classes), (hidden, n_classes)):
        bound = 1.0 / math.sqrt(fan_in)
        parts.append((torch.rand(numel, generator=generator) * 2 - 1) * bound)
    return torch.cat(parts)  # (P,)


def mlp_forward(params: torch.Tensor, X: torch.Tensor, hidden: int) -> torch.Tensor:
    """Logits for flat params (P,) or batched params (N, P), with X (B, in) or (N, B, in).

    Leading dimensions broadcast: one model on K stacked test sets is params (P,), X (K, n, in).
    """
    in_dim = X.shape[-1]
    n_classes = params.shape[-1] - hidden - in_dim * hidden
    if n_classes % (hidden + 1) != 0:
        raise ValueError(f"params of length {params.shape[-1]} do not fit hidden={hidden}, in_dim={in_dim}")
    W1, b1, W2, b2 = unpack(params, hidden, in_dim, n_classes // (hidden + 1))
    if params.ndim == 2:  # (N, P): one model per leading slice of X
        b1, b2 = b1.unsqueeze(-2), b2.unsqueeze(-2)
    h = torch.relu(X @ W1 + b1)  # (..., B, H)
    return h @ W2 + b2  # (..., B, C)


def _batched_grad(params: torch.Tensor, Xb: torch.Tensor, yb: torch.Tensor, mb: torch.Tensor,
                  hidden: int, n_classes: int) -> torch.Tensor:
    """Gradient of the masked mean cross-entropy of N clients at once (manual backprop).

    params (N, P), Xb (N, B, in), yb (N, B) int, mb (N, B) float mask -> grad (N, P).
    """
    W1, b1, W2, b2 = unpack(params, hidden, Xb.shape[-1], n_classes)
    a = torch.baddbmm(b1.unsqueeze(1), Xb, W1)  # (N, B, H) pre-activation
    h = a.clamp_min(0.0)  # (N, B, H)
    z = torch.baddbmm(b2.unsqueeze(1), h, W2)  # (N, B, C) logits
    g = torch.softmax(z, dim=-1)  # dCE/dz = softmax(z) - onehot(y)
    g = g - torch.nn.functional.one_hot(yb, n_classes).to(g.dtype)
    count = mb.sum(1).clamp_min(1.0)  # (N,) valid samples per client batch
    g = g * (mb / count[:, None]).unsqueeze(-1)  # mean over the valid samples only
    gW2 = torch.bmm(h.transpose(1, 2), g)  # (N, H, C)
    gb2 = g.sum(1)  # (N, C)
    dh = torch.bmm(g, W2.transpose(1, 2)) * (a > 0)  # (N, B, H)
    gW1 = torch.bmm(Xb.transpose(1, 2), dh)  # (N, in, H)
    gb1 = dh.sum(1)  # (N, H)
    N = params.shape[0]
    return torch.cat([gW1.reshape(N, -1), gb1, gW2.reshape(N, -1), gb2], dim=1)  # (N, P)


def _check_train_args(epochs: int, lr, batch_size: int, hidden: int, prox_mu) -> None:
    for name, v in (("epochs", epochs), ("batch_size", batch_size), ("hidden", hidden)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    lr_t, mu_t = torch.as_tensor(lr, dtype=torch.float64), torch.as_tensor(prox_mu, dtype=torch.float64)
    if not (bool(torch.isfinite(lr_t).all()) and bool((lr_t > 0).all())):
        raise ValueError(f"lr must be a finite number > 0 (or one per client), got {lr}")
    if not (bool(torch.isfinite(mu_t).all()) and bool((mu_t >= 0).all())):
        raise ValueError(f"prox_mu must be a finite number >= 0 (or one per client), got {prox_mu}")


def local_train_batched(params: torch.Tensor, X: torch.Tensor, y: torch.Tensor, valid: torch.Tensor,
                        epochs: int, lr: float, batch_size: int, hidden: int,
                        prox_mu: float = 0.0, prox_center: torch.Tensor | None = None,
                        generator: torch.Generator | list | None = None) -> torch.Tensor:
    r"""E epochs of mini-batch SGD for N clients at once, eq. (S4): params (N, P) -> (N, P).

    ``X`` (N, n_max, in) and ``y`` (N, n_max) hold each client's shard, padded; ``valid`` (N, n_max)
    marks the real samples. Client i shuffles its own n_i samples every epoch (permutations drawn
    client by client, epochs inner, from ``generator``: the same order :func:`local_train_loop`
    draws when called client after client) and takes ceil(n_i / B) steps; a client whose batches
    run out waits (its update is masked). With ``prox_mu > 0`` the gradient gains
    :math:`\mu(w-w_c)` (FedProx / SPECIAL-C), ``prox_center`` (P,) or (N, P). ``lr`` and ``prox_mu``
    may be tensors (N,), one value per client row. ``generator`` may
    also be a list of N generators, one per client row (several independent runs stacked as rows,
    each drawing from its own stream).

    No host sync per step (issue 43): the batch order is drawn on the host (:func:`_batch_schedule`, one
    host read of the N shard sizes) and copied to the device once; the SGD steps (:func:`_sgd_on_schedule`)
    read nothing back. ``valid`` on a device is copied to the host first (a sync): pass it on the host.
    """
    _check_train_args(epochs, lr, batch_size, hidden, prox_mu)
    if params.ndim != 2 or X.ndim != 3 or y.shape != X.shape[:2] or valid.shape != X.shape[:2]:
        raise ValueError(f"expected params (N, P), X (N, n, d), y and valid (N, n); got {tuple(params.shape)}, "
                         f"{tuple(X.shape)}, {tuple(y.shape)}, {tuple(valid.shape)}")
    if params.shape[0] != X.shape[0]:
        raise ValueError(f"params and X must hold the same number of clients, got {params.shape[0]} and {X.shape[0]}")
    prox_any = bool(torch.as_tensor(prox_mu).gt(0).any())
    if prox_any and prox_center is None:
        raise ValueError("prox_center must be given when prox_mu > 0")
    N = X.shape[0]
    dev = params.device
    gens = generator if isinstance(generator, (list, tuple)) else [generator] * N
    if len(gens) != N:
        raise ValueError(f"generator must be one torch.Generator or a list of N={N}, got a list of {len(gens)}")
    valid_cpu = valid.detach()
    if valid_cpu.device.type != "cpu":   # a copy to the host (a sync on a GPU); run_fdil_many passes it on the host
        valid_cpu = valid_cpu.to("cpu")
    order, rows_flat, row_sets = _batch_schedule(valid_cpu.bool(), epochs, batch_size, gens)
    order, rows = _schedule_to(order, rows_flat, row_sets, dev)
    if isinstance(lr, torch.Tensor) or isinstance(prox_mu, torch.Tensor):  # one value per client row
        lr = torch.as_tensor(lr, dtype=params.dtype).to(dev).expand(N)[:, None]  # (N, 1)
        prox_mu = torch.as_tensor(prox_mu, dtype=params.dtype).to(dev).expand(N)[:, None]
    center = None
    if prox_any:
        center = prox_center.expand(N, -1) if prox_center.ndim == 1 else prox_center  # (N, P)
    return _sgd_on_schedule(params, X, y, order, rows, lr, prox_mu, center, batch_size, hidden)


def _batch_schedule(valid: torch.Tensor, epochs: int, batch_size: int, gens) -> tuple[torch.Tensor, torch.Tensor, list]:
    """The host side of :func:`local_train_batched`: every client's shuffled mini-batches, from its generator.

    ``valid`` (N, n_max) bool on the host. Returns ``order`` (N, E, S*B) sample positions (-1: no sample),
    the active client rows of every step s as ``row_sets[s]`` (None: all rows; else ``(offset, count)`` into
    ``rows_flat``, a host long tensor). Client i is active at step s iff s*B < n_i (every epoch alike). One
    host read of the N sizes; the rest is host-side index work (no device sync on a GPU)."""
    N = valid.shape[0]
    sizes = valid.sum(1).tolist()  # (N,) the one host read of a call
    steps = int(math.ceil(max(sizes, default=0) / batch_size))
    pos_all = torch.argsort((~valid).to(torch.uint8), dim=1, stable=True)  # real samples first, in order
    order = torch.full((N, epochs, steps * batch_size), -1, dtype=torch.long)
    for i, n_i in enumerate(sizes):
        pos = pos_all[i, :n_i]  # positions of client i's real samples
        for e in range(epochs):
            order[i, e, :n_i] = pos[torch.randperm(n_i, generator=gens[i])]
    flat, row_sets, seen = [], [], {}
    for s in range(steps):
        act = tuple(i for i, n_i in enumerate(sizes) if s * batch_size < n_i)
        if len(act) == N:
            row_sets.append(None)
            continue
        if act not in seen:
            seen[act] = (len(flat), len(act))
            flat.extend(act)
        row_sets.append(seen[act])
    return order, torch.tensor(flat, dtype=torch.long), row_sets


def _to_device(x: torch.Tensor, dev: torch.device) -> torch.Tensor:
    """A host tensor on ``dev``: on CUDA through pinned memory without blocking (no host sync)."""
    if dev.type == "cuda":
        return x.pin_memory().to(dev, non_blocking=True)
    return x.to(dev)


def _schedule_to(order: torch.Tensor, rows_flat: torch.Tensor, row_sets: list, dev: torch.device,
                 extra: torch.Tensor | None = None):
    """``order`` and the row sets of :func:`_batch_schedule` (and ``extra``, a host long tensor) on ``dev`` in one
    copy; returns (order, rows per step[, extra]) with ``rows[s]`` a (n_act,) long tensor of client rows."""
    head = [] if extra is None else [extra.flatten()]
    blob = _to_device(torch.cat([*head, order.flatten(), rows_flat]), dev)
    k = 0 if extra is None else extra.numel()
    order_d = blob[k:k + order.numel()].view(order.shape)
    flat = blob[k + order.numel():]
    all_rows = torch.arange(order.shape[0], device=dev)
    rows = [all_rows if rs is None else flat[rs[0]:rs[0] + rs[1]] for rs in row_sets]
    return (order_d, rows) if extra is None else (order_d, rows, blob[:k].view(extra.shape))


def _sgd_on_schedule(params: torch.Tensor, X: torch.Tensor, y: torch.Tensor, order: torch.Tensor, rows: list,
                     lr, prox_mu, center: torch.Tensor | None, batch_size: int, hidden: int) -> torch.Tensor:
    """The device side of :func:`local_train_batched`, eq. (S4): E epochs over the schedule ``order`` (N, E, S*B)
    with the active rows ``rows[s]``; ``lr`` and ``prox_mu`` floats or (N, 1) device tensors, ``center``
    (N, P) or None (no proximal term). No host read."""
    d = X.shape[2]
    n_classes = (params.shape[1] - hidden - d * hidden) // (hidden + 1)
    per_row = isinstance(lr, torch.Tensor)
    w = params.clone()
    for e in range(order.shape[1]):
        for s, r in enumerate(rows):
            # only the clients with samples left take a step (the others wait): compute on those rows
            idx = order[r, e, s * batch_size:(s + 1) * batch_size]  # (n_act, B)
            mb = idx >= 0
            idx = idx.clamp_min(0)
            Xb, yb = X[r[:, None], idx], y[r[:, None], idx]  # (n_act, B, d), (n_act, B)
            wa = w[r]
            grad = _batched_grad(wa, Xb, yb, mb.to(w.dtype), hidden, n_classes)  # (n_act, P)
            lr_a, mu_a = (lr[r], prox_mu[r]) if per_row else (lr, prox_mu)
            if center is not None:
                grad = grad + mu_a * (wa - center[r])  # eq. (S4), proximal client term
            w = w.index_copy(0, r, wa - lr_a * grad)
    return w


def local_train_loop(params: torch.Tensor, X: torch.Tensor, y: torch.Tensor, epochs: int, lr: float,
                     batch_size: int, hidden: int, prox_mu: float = 0.0,
                     prox_center: torch.Tensor | None = None,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """Reference: one client's E epochs of mini-batch SGD with autograd, params (P,) -> (P,)."""
    _check_train_args(epochs, lr, batch_size, hidden, prox_mu)
    if params.ndim != 1 or X.ndim != 2 or y.shape != X.shape[:1]:
        raise ValueError(f"expected params (P,), X (n, d), y (n,); got {tuple(params.shape)}, "
                         f"{tuple(X.shape)}, {tuple(y.shape)}")
    if prox_mu > 0 and prox_center is None:
        raise ValueError("prox_center must be given when prox_mu > 0")
    w = params.detach().clone()
    n = len(y)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator).to(X.device)
        for s in range(0, n, batch_size):
            b = perm[s:s + batch_size]
            w.requires_grad_(True)
            loss = torch.nn.functional.cross_entropy(mlp_forward(w, X[b], hidden), y[b])
            if prox_mu > 0:
                loss = loss + 0.5 * prox_mu * (w - prox_center).pow(2).sum()
            (g,) = torch.autograd.grad(loss, w)
            w = (w - lr * g).detach()
    return w


# ----------------------------------------------------------------------------------------------
# The server step (the method)
# ----------------------------------------------------------------------------------------------
def server_proximal_step(w_bar: torch.Tensor, anchor: torch.Tensor, lam: float) -> torch.Tensor:
    r"""Eq. (S2): :math:`\arg\min_w \tfrac12\|w-\bar w\|^2+\tfrac\lambda2\|w-a\|^2=(\bar w+\lambda a)/(1+\lambda)`."""
    check_lam(lam)
    if not isinstance(w_bar, torch.Tensor) or not isinstance(anchor, torch.Tensor):
        raise TypeError("w_bar and anchor must be torch tensors")
    if w_bar.shape != anchor.shape:
        raise ValueError(f"anchor must have the shape of w_bar {tuple(w_bar.shape)}, got {tuple(anchor.shape)}")
    return (w_bar + lam * anchor) / (1.0 + lam)  # convex blend of aggregate and anchor


def client_mean_update(w: torch.Tensor, local_models: torch.Tensor,
                       weights: torch.Tensor | None = None) -> torch.Tensor:
    r"""Eq. (S1): :math:`\Delta^t=\sum_i p_i(w_i^t-w^t)`, uniform :math:`p_i=1/N` unless ``weights``.

    ``w`` (P,) with ``local_models`` (N, P), or a stack of independent runs: ``w`` (S, P) with
    ``local_models`` (S, N, P) and ``weights`` (S, N).
    """
    if not isinstance(w, torch.Tensor) or not isinstance(local_models, torch.Tensor):
        raise TypeError("w and local_models must be torch tensors")
    if local_models.dim() != w.dim() + 1 or local_models.shape[:-2] != w.shape[:-1] \
            or local_models.shape[-1] != w.shape[-1]:
        raise ValueError(f"local_models must have shape (..., N, P) for w of shape (..., P) = {tuple(w.shape)}, "
                         f"got {tuple(local_models.shape)}")
    if local_models.shape[-2] == 0:
        raise ValueError("local_models must hold at least one client (N = 0: no client took part in the round)")
    diffs = local_models - w.unsqueeze(-2)  # (..., N, P); leading dims are independent runs
    if weights is None:
        return diffs.mean(-2)  # (..., P)
    if not isinstance(weights, torch.Tensor) or weights.shape != local_models.shape[:-1]:
        raise ValueError(f"weights must be a tensor of shape {tuple(local_models.shape[:-1])}, "
                         f"got {getattr(weights, 'shape', type(weights).__name__)}")
    if not bool(((weights >= 0).all(-1) & (weights.sum(-1) > 0)).all()):
        raise ValueError("weights must be >= 0 with a positive sum over the clients of each run")
    return (weights[..., None] * diffs).sum(-2) / weights.sum(-1, keepdim=True)


def special_server_step(w: torch.Tensor, local_models: torch.Tensor, anchor: torch.Tensor, lam: float,
                        weights: torch.Tensor | None = None) -> torch.Tensor:
    r"""SPECIAL's whole server step: eq. (S1) then eq. (S2). The one place to change when the
    paper's exact form is known. ``anchor`` is :math:`w^t` (round) or :math:`w^\star_{k-1}` (task)."""
    w_bar = w + client_mean_update(w, local_models, weights)  # (P,) FedAvg aggregate
    return server_proximal_step(w_bar, anchor, lam)


def check_lam(lam: float) -> None:
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.floating)):
        raise TypeError(f"lam must be a real number, got {type(lam).__name__}")
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be a finite number >= 0, got {lam}")


# ----------------------------------------------------------------------------------------------
# The federated domain-incremental engine
# ----------------------------------------------------------------------------------------------
@dataclass
class FDILConfig:
    """One method on one task sequence. Sizes follow the spec's book defaults."""

    n_clients: int = 20
    clients_per_round: int = 5
    rounds_per_task: int = 30
    local_epochs: int = 2
    lr: float = 0.05
    batch_size: int = 16
    hidden: int = 64
    alpha: float = 0.5
    method: str = "special"  # fedavg | fedprox | special | special_c | replay | joint
    lam: float = 1.0  # SPECIAL server proximal weight (eq. S2)
    anchor: str = "round"  # round | task
    mu: float = 0.0  # FedProx / SPECIAL-C client proximal weight (eq. S4)
    server_lr: float = 1.0  # FedAvg-slr (method="fedavg")
    replay_per_class: int = 0  # method="replay": stored samples per class, per client and past domain
    weighted: bool = False  # sample-count weights in eq. (S1) instead of uniform
    seed: int = 0
    device: str | None = None  # None: icml26.core.device()
    dtype: str = "float32"  # float32 | float64 (model, data and server arithmetic)

    def __post_init__(self):
        for name in ("n_clients", "clients_per_round", "rounds_per_task", "local_epochs", "batch_size", "hidden"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.clients_per_round > self.n_clients:
            raise ValueError(f"clients_per_round must lie in 1..n_clients={self.n_clients}, "
                             f"got {self.clients_per_round}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.anchor not in ANCHORS:
            raise ValueError(f"anchor must be one of {ANCHORS}, got {self.anchor!r}")
        check_lam(self.lam)
        for name in ("lr", "server_lr", "alpha"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if not (isinstance(self.mu, (int, float)) and math.isfinite(self.mu) and self.mu >= 0):
            raise ValueError(f"mu must be a finite number >= 0, got {self.mu!r}")
        if isinstance(self.replay_per_class, bool) or not isinstance(self.replay_per_class, int) \
                or self.replay_per_class < 0:
            raise ValueError(f"replay_per_class must be an int >= 0, got {self.replay_per_class!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {self.dtype!r}")

    def replace(self, **changes) -> FDILConfig:
        return FDILConfig(**{**asdict(self), **changes})


@dataclass
class FDILResult:
    acc_matrix: np.ndarray  # (K, K): A[k, j] = test accuracy on task j after training task k
    round_acc: np.ndarray  # (K*T, K) accuracy on every task after every round (NaN if not logged)
    drift: np.ndarray  # (K*T,) ||w^{t+1} - w^t||
    final_params: torch.Tensor  # (P,)
    config: FDILConfig
    task_params: np.ndarray = field(default=None)  # (K+1, P) w_init and the model at each task end


def _pad_clients(shards_X: list[list[np.ndarray]], shards_y: list[list[np.ndarray]], dev: torch.device,
                 dtype: torch.dtype = torch.float32):
    """Stack ragged client shards of S runs: X (S, M, n_max, d), y and valid (S, M, n_max), sizes (S, M) on
    ``dev``, and valid on the host (the batch schedule is drawn there)."""
    S, M, d = len(shards_X), len(shards_X[0]), shards_X[0][0].shape[1]
    n_max = max(len(yi) for run in shards_y for yi in run)
    X = np.zeros((S, M, n_max, d), np.float32)
    y = np.zeros((S, M, n_max), np.int64)
    valid = np.zeros((S, M, n_max), bool)
    for s, (run_X, run_y) in enumerate(zip(shards_X, shards_y)):
        for i, (Xi, yi) in enumerate(zip(run_X, run_y)):
            X[s, i, : len(yi)], y[s, i, : len(yi)], valid[s, i, : len(yi)] = Xi, yi, True
    return (torch.from_numpy(X).to(dev, dtype), torch.from_numpy(y).to(dev), torch.from_numpy(valid).to(dev),
            torch.from_numpy(valid.sum(2)).to(dev), torch.from_numpy(valid))


def run_fdil(domains: list[DomainData], cfg: FDILConfig, log_every: int = 1,
             progress: bool = True) -> FDILResult:
    """Train one method on the task sequence (spec Algorithm, lines 1-15).

    Returns the accuracy matrix, per-round accuracies on all tasks, per-round drift and the
    model at each task boundary. ``method="joint"`` trains every stage on the union of all
    domains (same rounds), ``method="replay"`` appends stored samples of earlier domains.
    One seed of :func:`run_fdil_seeds`.
    """
    if not isinstance(cfg, FDILConfig):
        raise TypeError(f"cfg must be an FDILConfig, got {type(cfg).__name__}")
    return run_fdil_seeds(domains, cfg, [cfg.seed], log_every=log_every, progress=progress)[0]


def run_fdil_seeds(domains: list[DomainData], cfg: FDILConfig, seeds, log_every: int = 1,
                   progress: bool = True) -> list[FDILResult]:
    """:func:`run_fdil` for several seeds at once (:func:`run_fdil_many` with ``cfg`` per seed)."""
    if not isinstance(cfg, FDILConfig):
        raise TypeError(f"cfg must be an FDILConfig, got {type(cfg).__name__}")
    seeds = [int(s) for s in seeds]
    if not seeds or min(seeds) < 0:
        raise ValueError(f"seeds must be a non-empty list of ints >= 0, got {seeds!r}")
    return run_fdil_many(domains, [cfg.replace(seed=s) for s in seeds], log_every=log_every, progress=progress)


SHARED = ("n_clients", "clients_per_round", "rounds_per_task", "local_epochs", "batch_size", "hidden",
          "alpha", "device", "dtype")  # fields every run of one run_fdil_many call must share


def run_fdil_many(domains: list[DomainData], cfgs: list[FDILConfig], log_every: int = 1,
                  progress: bool = True) -> list[FDILResult]:
    """Several independent FDIL runs at once, stacked as a leading dimension.

    The runs may differ in method, lam, anchor, mu, server_lr, lr, replay and seed, and must share
    the sizes in ``SHARED``. Run r has its own generator (initial model, client sampling, batch
    order), its own Dirichlet partitions and replay memory, exactly as ``run_fdil(domains, cfgs[r])``
    (tested); the R x N sampled clients of a round train as one batch of
    :func:`local_train_batched`, and the server step is applied per group of runs with one rule.
    """
    from ..core import device as pick_device
    from ..core import one_thread

    validate_domains(domains)
    cfgs = list(cfgs)
    if not cfgs or not all(isinstance(c, FDILConfig) for c in cfgs):
        raise TypeError("cfgs must be a non-empty list of FDILConfig")
    if isinstance(log_every, bool) or not isinstance(log_every, int) or log_every < 1:
        raise ValueError(f"log_every must be a positive int, got {log_every!r}")
    for name in SHARED:
        if len({getattr(c, name) for c in cfgs}) > 1:
            raise ValueError(f"cfgs must share {name}; got {sorted({str(getattr(c, name)) for c in cfgs})}")
    dev = pick_device(cfgs[0].device)
    with one_thread(dev):  # tiny matrices: extra CPU threads only add synchronisation
        return _run_fdil_many(domains, cfgs, dev, log_every, progress)


def _run_fdil_many(domains, cfgs: list[FDILConfig], dev: torch.device, log_every: int,
                   progress: bool) -> list[FDILResult]:
    from tqdm.auto import tqdm

    from .baselines import client_shards, fedavg_server_step

    cfg = cfgs[0]
    seeds = [c.seed for c in cfgs]
    S, K, T, M, N = len(cfgs), len(domains), cfg.rounds_per_task, cfg.n_clients, cfg.clients_per_round
    dtype = DTYPES[cfg.dtype]
    if dtype == torch.float64 and dev.type == "mps":
        dev = torch.device("cpu")  # no float64 on MPS
    gens = [torch.Generator().manual_seed(s) for s in seeds]  # per run: init, sampling, batch order (CPU)
    d = domains[0].X_train.shape[1]
    w = torch.stack([init_mlp(cfg.hidden, g, in_dim=d) for g in gens]).to(dev, dtype)  # (S, P) global models
    w_task = w.clone()  # anchors of the "task" variant: w*_{k-1}
    by_seed = {s: [dirichlet_partition(dom.y_train, M, cfg.alpha, np.random.default_rng([s, k]))
                   for k, dom in enumerate(domains)] for s in dict.fromkeys(seeds)}
    parts = [by_seed[s] for s in seeds]
    test_X = [torch.from_numpy(dom.X_test).to(dev, dtype) for dom in domains]
    test_y = [torch.from_numpy(dom.y_test).to(dev) for dom in domains]

    def evaluate(params):  # accuracy of S models on all K test sets -> (S, K), on the device
        return torch.stack([(mlp_forward(params, Xt, cfg.hidden).argmax(-1) == yt).to(dtype).mean(-1)
                            for Xt, yt in zip(test_X, test_y)], dim=1)

    mus = [c.mu if c.method in ("fedprox", "special_c") else 0.0 for c in cfgs]
    lrs = [c.lr for c in cfgs]
    if len(set(mus)) == 1 and len(set(lrs)) == 1:  # one value for every client row
        row_lr, row_mu = lrs[0], mus[0]
    else:  # one value per client row (N, 1), on the device: run r's N rows share run r's lr and mu
        row_lr = torch.tensor([v for v in lrs for _ in range(N)], dtype=torch.float64).to(dev, dtype)[:, None]
        row_mu = torch.tensor([v for v in mus for _ in range(N)], dtype=torch.float64).to(dev, dtype)[:, None]
    prox_any = any(v > 0 for v in mus)  # lr > 0 and mu >= 0, finite: checked by FDILConfig
    groups: dict[tuple, list[int]] = {}  # runs that share one server rule
    for r, c in enumerate(cfgs):
        key = ("special", c.lam, c.anchor, c.weighted) if c.method == "special" else \
              ("avg", c.server_lr if c.method == "fedavg" else 1.0, c.weighted)
        groups.setdefault(key, []).append(r)
    groups = {key: torch.tensor(idx, device=dev) for key, idx in groups.items()}
    # logs stay on the device, read once after the loop (no host sync per round)
    round_acc = torch.full((S, K * T, K), float("nan"), dtype=dtype, device=dev)
    drift = torch.zeros((S, K * T), dtype=dtype, device=dev)
    task_params = [w.clone()]
    runs = torch.arange(S, device=dev)[:, None]  # (S, 1)
    runs_h = torch.arange(S)[:, None]  # (S, 1) on the host
    row_gens = [g for g in gens for _ in range(N)]  # run s's N client rows draw from run s's generator
    bar = tqdm(total=K * T, leave=False, disable=not progress, desc="rounds")
    for k in range(K):
        shards = [client_shards(domains, parts[s], k, cfgs[s]) for s in range(S)]
        Xc, yc, _, nc, vc_h = _pad_clients([sh[0] for sh in shards], [sh[1] for sh in shards], dev, dtype)
        n_max = Xc.shape[2]
        for t in range(T):
            # host side: client sampling and batch order from the runs' generators (one host read of the
            # sampled clients' sizes), then one copy to the device (non-blocking on CUDA)
            sel_h = torch.stack([torch.randperm(M, generator=g)[:N] for g in gens])  # (S, N) w/o repl.
            order, rows_flat, row_sets = _batch_schedule(vc_h[runs_h, sel_h].reshape(S * N, n_max),
                                                         cfg.local_epochs, cfg.batch_size, row_gens)
            order, rows, sel = _schedule_to(order, rows_flat, row_sets, dev, extra=sel_h)
            w_rows = w[:, None].expand(S, N, -1).reshape(S * N, -1)  # run s's global model on its N rows
            W = _sgd_on_schedule(w_rows, Xc[runs, sel].reshape(S * N, n_max, d), yc[runs, sel].reshape(S * N, n_max),
                                 order, rows, row_lr, row_mu, w_rows if prox_any else None, cfg.batch_size,
                                 cfg.hidden)  # local_train_batched, eq. (S4)
            W = W.reshape(S, N, -1)  # (S, N, P)
            w_new = torch.empty_like(w)
            for key, idx in groups.items():  # each group of runs with its own server rule
                p = nc[runs, sel][idx].to(dtype) if key[-1] else None  # sample-count weights
                if key[0] == "special":
                    anchor = w[idx] if key[2] == "round" else w_task[idx]
                    w_new[idx] = special_server_step(w[idx], W[idx], anchor, key[1], p)  # eqs. (S1)-(S2)
                else:
                    w_new[idx] = fedavg_server_step(w[idx], W[idx], key[1], p)
            r = k * T + t
            drift[:, r] = torch.linalg.vector_norm(w_new - w, dim=-1)
            w = w_new
            if (t + 1) % log_every == 0 or t == T - 1:
                round_acc[:, r] = evaluate(w)
            bar.update(1)
        w_task = w.clone()
        task_params.append(w.clone())
    bar.close()
    task_params = torch.stack(task_params, dim=1).cpu().numpy()  # (S, K+1, P): the logs read once
    round_acc = round_acc.cpu().numpy().astype(np.float64)
    drift = drift.cpu().numpy().astype(np.float64)
    A = round_acc[:, T - 1::T]  # (S, K, K): row k after the last round of task k
    return [FDILResult(A[s].copy(), round_acc[s], drift[s], w[s].clone(), cfgs[s], task_params[s])
            for s in range(S)]
