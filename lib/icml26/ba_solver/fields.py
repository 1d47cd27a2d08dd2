"""Velocity fields ("backbones") for the BA-solver chapter.

Flow matching on the linear path ``x_t = t x_1 + (1 - t) x_0`` (book time: 0 = noise, 1 = data)
learns the marginal velocity ``u_t(x) = E[x_1 - x_0 | x_t = x]``. Sampling integrates
``dx/dt = u_t(x)`` from ``t = 0`` to ``t = 1``.

*Exact teaching backbone.* For a Gaussian mixture ``sum_k pi_k N(mu_k, sigma_k^2 I)`` the marginal
velocity is closed form (spec section 7, NB1)::

    S_k(t)      = t^2 sigma_k^2 + (1 - t)^2
    omega_k     ~ pi_k N(x; t mu_k, S_k I)                       (softmax in log space)
    u_t(x)      = sum_k omega_k [ mu_k + (t sigma_k^2 - (1 - t)) / S_k * (x - t mu_k) ]

equivalently ``u_t(x) = (x + (1 - t) grad log p_t(x)) / t`` (the score form; a unit test).

*Learned backbones.* :class:`VelocityMLP` trained with the standard FM regression loss
``E || v_theta(x_t, t) - (x_1 - x_0) ||^2`` (:func:`fm_loss`), then frozen.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch
from torch import nn
from tqdm.auto import tqdm

from .data import GMMParams

_CHECK_VALUES = [True]


@contextlib.contextmanager
def trusted_times():
    """Skip the value-range check of times inside internal loops whose times are valid by construction.

    The range check ``0 <= t <= 1`` needs a host sync (``.any()``) per network call; the samplers,
    the chain loss and the training loops validate their inputs once at the public entry point and
    run their inner calls inside this context. Shape checks (no sync) stay on.
    """
    before = _CHECK_VALUES[0]
    _CHECK_VALUES[0] = False
    try:
        yield
    finally:
        _CHECK_VALUES[0] = before


def values_checked() -> bool:
    """False inside :func:`trusted_times`."""
    return _CHECK_VALUES[0]


def check_time(t: torch.Tensor, x: torch.Tensor, name: str = "t") -> None:
    """``t`` must be a ``(B,)`` tensor with ``B = x.shape[0]`` and values in ``[0, 1]``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape (B,), got {type(t).__name__}")
    if t.ndim != 1 or t.shape[0] != x.shape[0]:
        raise ValueError(f"{name} must have shape ({x.shape[0]},) to match x {tuple(x.shape)}, got {tuple(t.shape)}")
    if not _CHECK_VALUES[0]:
        return
    tol = 1e-6
    if bool(((t < -tol) | (t > 1 + tol)).any()):
        raise ValueError(f"{name} must lie in [0, 1], got values in [{float(t.min()):.4g}, {float(t.max()):.4g}]")


def gmm_velocity(x: torch.Tensor, t: torch.Tensor, params: GMMParams) -> torch.Tensor:
    """Closed-form marginal FM velocity of a Gaussian mixture, batched over samples.

    ``x (B, d)``, ``t (B,)`` -> ``(B, d)``; runs in the dtype/device of ``x``.
    """
    if not isinstance(x, torch.Tensor) or x.ndim != 2:
        raise ValueError(f"x must be a tensor of shape (B, d), got {getattr(x, 'shape', type(x))}")
    if x.shape[1] != params.dim:
        raise ValueError(f"x has dimension {x.shape[1]} but the mixture means have dimension {params.dim}")
    check_time(t, x)
    p = params.to(x.device, x.dtype)                                     # no copy when already there
    d = x.shape[1]
    t_ = t.to(x.dtype)[:, None]                                          # (B, 1)
    S = t_**2 * p.stds[None, :] ** 2 + (1 - t_) ** 2                     # (B, K)   S_k(t)
    r = x[:, None, :] - t_[:, :, None] * p.means[None]                   # (B, K, d) x - t mu_k
    logw = torch.log(p.weights)[None] - 0.5 * d * torch.log(S) - 0.5 * (r**2).sum(-1) / S
    omega = torch.softmax(logw, dim=1)                                   # (B, K) posterior of component k
    coef = (t_ * p.stds[None, :] ** 2 - (1 - t_)) / S                    # (B, K)
    per_k = p.means[None] + coef[..., None] * r                          # (B, K, d)
    return (omega[..., None] * per_k).sum(1)                             # (B, d)


def gmm_log_density(x: torch.Tensor, t: torch.Tensor, params: GMMParams) -> torch.Tensor:
    """``log p_t(x)`` of the mixture's marginal at time ``t`` (used for the score-form test and plots)."""
    p = params.to(x.device, x.dtype)
    d = x.shape[1]
    t_ = t.to(x.dtype)[:, None]
    S = t_**2 * p.stds[None, :] ** 2 + (1 - t_) ** 2
    r = x[:, None, :] - t_[:, :, None] * p.means[None]
    logn = -0.5 * d * torch.log(2 * math.pi * S) - 0.5 * (r**2).sum(-1) / S
    return torch.logsumexp(torch.log(p.weights)[None] + logn, dim=1)


class GMMVelocityField(nn.Module):
    """The exact mixture velocity as a frozen "backbone": ``forward(x, t, y=None)``."""

    def __init__(self, params: GMMParams):
        super().__init__()
        if not isinstance(params, GMMParams):
            raise TypeError(f"params must be a GMMParams, got {type(params).__name__}")
        self.params = params
        self._cast: dict = {}

    def forward(self, x, t, y=None):
        key = (x.device, x.dtype)                                        # cast the mixture once per device/dtype
        if key not in self._cast:
            self._cast[key] = self.params.to(x.device, x.dtype)
        return gmm_velocity(x, t, self._cast[key])


_FREQS: dict = {}


def fourier_features(s: torch.Tensor, n_freqs: int) -> torch.Tensor:
    """``[s, sin(pi 2^j s), cos(pi 2^j s)]_{j < n_freqs}``: ``(B,) -> (B, 1 + 2 n_freqs)``.

    Frequencies up to ``pi 2^{n-1}`` resolve offsets as small as a few thousandths (spec 3.3).
    """
    key = (n_freqs, s.device, s.dtype)
    freqs = _FREQS.get(key)
    if freqs is None:                                                                # built once per device/dtype
        freqs = _FREQS[key] = math.pi * 2.0 ** torch.arange(n_freqs, device=s.device, dtype=s.dtype)  # (F,)
    arg = s[:, None] * freqs[None]                                                   # (B, F)
    return torch.cat([s[:, None], torch.sin(arg), torch.cos(arg)], dim=1)


def mlp(d_in: int, hidden: int, depth: int, d_out: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    d = d_in
    for _ in range(depth):
        layers += [nn.Linear(d, hidden), nn.SiLU()]
        d = hidden
    layers.append(nn.Linear(d, d_out))
    return nn.Sequential(*layers)


class VelocityMLP(nn.Module):
    """FM backbone for vectors: ``v_theta(x, t, y) = MLP([x, phi(t), e(y)])``.

    ``n_classes`` adds a learned label embedding (with one extra "null" index ``n_classes``).
    """

    def __init__(self, dim: int, hidden: int = 256, depth: int = 4, n_classes: int | None = None,
                 emb_dim: int = 64, n_freqs: int = 6):
        super().__init__()
        for name, val in (("dim", dim), ("hidden", hidden), ("depth", depth), ("emb_dim", emb_dim)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        self.dim, self.n_classes, self.n_freqs = dim, n_classes, n_freqs
        self.t_emb = nn.Sequential(nn.Linear(1 + 2 * n_freqs, emb_dim), nn.SiLU())
        self.y_emb = nn.Embedding(n_classes + 1, emb_dim) if n_classes else None
        self.net = mlp(dim + emb_dim * (2 if n_classes else 1), hidden, depth, dim)

    def forward(self, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        check_time(t, x)
        h = [x, self.t_emb(fourier_features(t.to(x.dtype), self.n_freqs))]
        if self.y_emb is not None:
            if y is None:
                y = torch.full((x.shape[0],), self.n_classes, dtype=torch.long, device=x.device)
            h.append(self.y_emb(y))
        return self.net(torch.cat(h, dim=1))


def _draw(sample_fn: Callable, n: int, generator):
    out = sample_fn(n, generator)
    return out if isinstance(out, tuple) else (out, None)


def draw(kind: str, shape, generator: torch.Generator | None, like: torch.Tensor,
         dtype: torch.dtype | None = None) -> torch.Tensor:
    """``torch.rand``/``torch.randn`` on the generator's device (the device of ``like`` without one).

    With a generator on the training device the noise never crosses the bus; a CPU generator used
    with device tensors still works (drawn on the CPU, then copied), with the same stream as before.
    """
    dev = generator.device if generator is not None else like.device
    fn = torch.rand if kind == "rand" else torch.randn
    return fn(shape, generator=generator, device=dev, dtype=dtype or torch.float32).to(like.device)


def drop_labels(y: torch.Tensor | None, p: float, null_class: int | None, generator=None) -> torch.Tensor | None:
    """Replace each label by ``null_class`` with probability ``p`` (classifier-free guidance training)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"label_dropout must lie in [0, 1), got {p}")
    if p > 0 and null_class is None:
        raise ValueError("label_dropout > 0 needs null_class (the label index that means 'no label')")
    if y is None or p == 0:
        return y
    drop = draw("rand", (y.shape[0],), generator, y) < p
    return torch.where(drop, torch.full_like(y, null_class), y)


def fm_loss(model: nn.Module, x1: torch.Tensor, y: torch.Tensor | None = None,
            generator: torch.Generator | None = None, label_dropout: float = 0.0,
            null_class: int | None = None) -> torch.Tensor:
    """Conditional FM loss on the linear path: ``|| v(t x1 + (1-t) x0, t) - (x1 - x0) ||^2``.

    ``label_dropout`` replaces labels by ``null_class`` with that probability, so that the same
    network also learns the unconditional field (the branch classifier-free guidance needs).
    """
    y = drop_labels(y, label_dropout, null_class, generator)
    b = x1.shape[0]
    t = draw("rand", (b,), generator, x1).to(x1)                         # (B,)
    x0 = draw("randn", tuple(x1.shape), generator, x1).to(x1)            # (B, d)
    xt = t[:, None] * x1 + (1 - t[:, None]) * x0
    return ((model(xt, t, y) - (x1 - x0)) ** 2).mean()


def train_backbone(model: nn.Module, sample_fn: Callable, steps: int, batch_size: int, lr: float = 2e-3,
                   generator: torch.Generator | None = None, progress: bool = True, label_dropout: float = 0.0,
                   log_every: int = 50) -> dict:
    """Train ``model`` with :func:`fm_loss` (Adam, cosine decay); freeze it; return ``{"loss": [...]}``.

    ``sample_fn(n, generator)`` returns data ``(n, d)`` or ``(data, labels)``. ``label_dropout``
    (with a class-conditional model) trains the null label too. Losses stay on the device and are
    copied to the host once per ``log_every`` steps.
    """
    null = getattr(model, "n_classes", None)
    drop_labels(None, label_dropout, null)                                # validate once
    for name, val in (("steps", steps), ("batch_size", batch_size)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    dev = next(model.parameters()).device
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=lr * 0.05)
    losses, buf = [], []
    model.train()
    with trusted_times():
        for k in tqdm(range(steps), desc="backbone", leave=False, disable=not progress):
            x1, y = _draw(sample_fn, batch_size, generator)
            loss = fm_loss(model, x1.to(dev), None if y is None else y.to(dev), generator,
                           label_dropout=label_dropout, null_class=null)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            buf.append(loss.detach())
            if len(buf) == log_every or k == steps - 1:                  # one host sync per interval
                losses += torch.stack(buf).tolist()
                buf = []
    model.eval().requires_grad_(False)
    return {"loss": losses}
