"""BA-solver: Bi-Anchor Interpolation Solver (Chen, Li, Wang, Chen; arXiv:2601.21542, ICML 2026).

A frozen flow-matching backbone ``v_theta(x, t, y)`` is paired with a small **SideNet** that
predicts the backbone's velocity a signed time offset ``h`` away along the ODE trajectory
(bidirectional temporal perception, spec section 3.3)::

    S_phi(x_t, v_t, t, h, y) = h * g_phi(x_t, v_t, t, h, y)                                   (SN)
    v^(t + h) = v_t + S_phi(x_t, v_t, t, h, y)  ~  v_theta(Phi_{t -> t+h}(x_t), t + h)

**Training** (Algorithm 1, the chain loss): start on the interpolation path, draw signed
truncated-exponential offsets ``h`` (rate ``lambda``), take a *teacher* step along the ODE with a
3-node Gauss-Legendre rule whose interior velocities come from the SideNet itself (no grad),
query the backbone there (the target), regress ``v + S(x, v, t, h)`` onto it, and walk on::

    x_next = x + h * sum_j w_j (v + S(x, v, t, c_j h))        c = 1/2 -+ sqrt(15)/10, 1/2   (CH1)
    L      = 1/K sum_k mean || v_k + S(x_k, v_k, t_k, h_k) - v_theta(x_{k+1}, t_{k+1}) ||^2 (CH2)

**Sampling** (Algorithm 2, bi-anchor): the backbone is evaluated only at interval ends (anchors);
interior velocities at the nodes ``{0, alpha, 1 - alpha, 1}`` come from the SideNet, the one near
the start predicted forward from the start anchor, the one near the end backward from the end
anchor, and a symmetric 4-node rule integrates them::

    s = 1 - 2 alpha,  w_in = 1 / (3 (1 - s^2)),  w_out = 1/2 - w_in                         (LW)
    x_pred = x + D (w_out v + w_in v_a + w_in v_b + w_out v~_e)      (forward probes)      (P)
    v_e    = v_theta(x_pred, t + D)                                   (one NFE per step)
    x      = x + D (w_out v + w_in v_a + w_in (v_e + S(x_pred, v_e, t + D, -alpha D)) + w_out v_e)  (C)

``alpha = (1 - 1/sqrt 5)/2`` gives Gauss-Lobatto weights ``(1/12, 5/12, 5/12, 1/12)``, exact to
degree 5. With ``S = 0`` the recursion is exactly Adams-Bashforth 2 (property P2).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from .baselines import (
    CFG_INTERVAL,
    _rk4_step,
    _tcol,
    call_checked,
    check_finite,
    check_guidance,
    check_nfe,
    check_x0,
    time_grid,
)
from .fields import check_time, draw, drop_labels, fourier_features, mlp, trusted_times, values_checked

# ---------------------------------------------------------------------------------------------
# quadrature constants
# ---------------------------------------------------------------------------------------------
ALPHA_LOBATTO = 0.5 * (1 - 5**-0.5)                       # 0.2763932...: Gauss-Lobatto interior node
ALPHA_MIN = 0.5 * (1 - 3**-0.5)                           # 0.2113...: below it w_out <= 0
GL3_NODES = (0.5 - math.sqrt(15) / 10, 0.5, 0.5 + math.sqrt(15) / 10)   # (CH1) teacher nodes on [0, 1]
GL3_WEIGHTS = (5 / 18, 8 / 18, 5 / 18)


def lobatto_weights(alpha: float = ALPHA_LOBATTO) -> tuple[float, float]:
    """``(w_out, w_in)`` of the symmetric rule on nodes ``{0, alpha, 1-alpha, 1}`` (eq. LW)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be a float, got {type(alpha).__name__}")
    if not ALPHA_MIN < alpha < 0.5:
        raise ValueError(f"alpha must lie in ({ALPHA_MIN:.4f}, 0.5) so that both weights are positive "
                         f"and the nodes distinct, got {alpha}")
    s = 1 - 2 * alpha
    w_in = 1 / (3 * (1 - s * s))
    return 0.5 - w_in, w_in


def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of the ``n``-point Gauss-Legendre rule on ``[0, 1]``."""
    z, w = np.polynomial.legendre.leggauss(n)
    return (z + 1) / 2, w / 2


# ---------------------------------------------------------------------------------------------
# SideNets
# ---------------------------------------------------------------------------------------------
def _check_th(x: torch.Tensor, t: torch.Tensor, h: torch.Tensor) -> None:
    check_time(t, x, "t")
    if not isinstance(h, torch.Tensor) or h.shape != t.shape:
        raise ValueError(f"h must be a tensor of shape {tuple(t.shape)} like t, got {tuple(getattr(h, 'shape', ()))}")
    if values_checked():                                                             # skipped in trusted loops
        check_time(t + h, x, "t + h")


def _hcol(h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return h.to(x.dtype).view(-1, *([1] * (x.ndim - 1)))                            # (B, 1, ...)


class SideNetMLP(nn.Module):
    """Book SideNet for vectors (spec 3.3): ``S = h * MLP([x, v, phi(t), phi(h), e(y)])`` (eq. SN).

    The last linear layer is zero-initialised, so a fresh SideNet outputs exactly zero and BA
    reduces to AB2; the factor ``h`` makes ``S(., h = 0) = 0`` at any weights.
    """

    def __init__(self, dim: int, hidden: int = 128, depth: int = 3, n_classes: int | None = None,
                 n_freqs: int = 8, emb_dim: int = 32):
        super().__init__()
        for name, val in (("dim", dim), ("hidden", hidden), ("depth", depth), ("n_freqs", n_freqs)):
            if isinstance(val, bool) or not isinstance(val, int) or val < 1:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        self.dim, self.n_classes, self.n_freqs = dim, n_classes, n_freqs
        self.y_emb = nn.Embedding(n_classes + 1, emb_dim) if n_classes else None     # index n_classes = null
        d_in = 2 * dim + 2 * (1 + 2 * n_freqs) + (emb_dim if n_classes else 0)
        self.net = mlp(d_in, hidden, depth, dim)
        nn.init.zeros_(self.net[-1].weight)                                          # zero-initialised output
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x: torch.Tensor, v: torch.Tensor, t: torch.Tensor, h: torch.Tensor,
                y: torch.Tensor | None = None) -> torch.Tensor:
        if v.shape != x.shape:
            raise ValueError(f"v must have the shape of x {tuple(x.shape)}, got {tuple(v.shape)}")
        _check_th(x, t, h)
        b = x.shape[0]
        feats = [x.reshape(b, -1), v.reshape(b, -1),
                 fourier_features(t.to(x.dtype), self.n_freqs), fourier_features(h.to(x.dtype), self.n_freqs)]
        if self.y_emb is not None:
            if y is None:
                y = torch.full((b,), self.n_classes, dtype=torch.long, device=x.device)
            feats.append(self.y_emb(y))
        g = self.net(torch.cat(feats, dim=1)).view_as(x)                             # g_phi
        return _hcol(h, x) * g                                                       # S = h * g   (SN)


def zero_sidenet() -> Callable:
    """A SideNet that always returns zero: with it BA bi-anchor is exactly AB2 (P2)."""

    def side(x, v, t, h, y=None):
        return torch.zeros_like(x)

    return side


def oracle_sidenet(velocity_fn: Callable, substeps: int = 64) -> Callable:
    """The exact ``S*(x, v, t, h) = v(Phi_{t -> t+h}(x), t + h) - v`` by ``substeps`` RK4 steps over ``h``.

    Theory only (P1, P5): every call hides ``4 * substeps + 1`` backbone evaluations.
    """
    check_nfe(substeps, name="substeps")

    @torch.no_grad()
    def side(x, v, t, h, y=None):
        _check_th(x, t, h)
        z, tt, dh = x, t.to(x.dtype), h.to(x.dtype) / substeps                      # per-sample step (B,)
        for _ in range(substeps):
            z = _rk4_step(velocity_fn, z, tt, dh, y)
            tt = tt + dh
        return velocity_fn(z, t.to(x.dtype) + h.to(x.dtype), y) - v

    return side


# ---------------------------------------------------------------------------------------------
# samplers
# ---------------------------------------------------------------------------------------------
def _tile(z: torch.Tensor | None, k: int) -> torch.Tensor | None:
    if z is None:
        return None
    return z.repeat(k, *([1] * (z.ndim - 1)))                                        # (k B, ...)


def _side_at_offsets(sidenet, x, v, t, offsets, y):
    """One batched SideNet call at several offsets from the same anchor: ``(len(offsets), B, ...)``."""
    k, b = len(offsets), x.shape[0]
    h = torch.cat([torch.full((b,), float(o), dtype=x.dtype, device=x.device) for o in offsets])
    xs = _tile(x, k)
    s = call_checked(sidenet, xs, _tile(v, k), _tile(t, k), h, _tile(y, k), name="sidenet")
    return s.view(k, *x.shape)


def _branches(y, cfg_scale, null_class, cfg_interval) -> list:
    """Label of each branch: ``[y]`` without guidance, ``[y, null]`` with it (conditional first)."""
    if cfg_scale is None:
        return [y]
    check_guidance(cfg_scale, null_class, cfg_interval, y)
    return [y, torch.full_like(y, null_class)]


def _cfg_on(t: float, cfg_scale, cfg_interval) -> bool:
    return cfg_scale is not None and cfg_scale != 1.0 and cfg_interval[0] <= t < cfg_interval[1]


def _guide(vals: list, t: float, cfg_scale, cfg_interval) -> torch.Tensor:
    """Classifier-free guidance of branch velocities at book time ``t`` (a node of the rule).

    ``v = v_u + w (v_c - v_u)`` where ``lo <= t < hi``; elsewhere, and at ``w = 1``, the conditional
    velocity itself (as the official ``apply_cfg``), so scale 1 reproduces the conditional sampler
    exactly.
    """
    if len(vals) == 1 or not _cfg_on(t, cfg_scale, cfg_interval):
        return vals[0]
    v_c, v_u = vals
    return v_u + cfg_scale * (v_c - v_u)


def ba_bi_anchor(velocity_fn: Callable, sidenet: Callable, x0: torch.Tensor, nfe: int, y=None,
                 alpha: float = ALPHA_LOBATTO, return_traj: bool = False, cfg_scale: float | None = None,
                 null_class: int | None = None, cfg_interval: tuple[float, float] = CFG_INTERVAL,
                 shift: float = 1.0):
    """BA-solver, bi-anchor (Algorithm 2): exactly ``nfe`` backbone calls, ``2 nfe - 1`` SideNet calls.

    Per step: one batched forward probe at offsets ``(alpha D, (1-alpha) D, D)`` from the start
    anchor, predictor (P), backbone at the predicted end (the end anchor), one backward probe
    ``-alpha D`` from it, corrector (C). The last step returns the predictor (no backbone call).
    The anchor velocity ``v_e`` is re-used as the next start anchor although it was evaluated at
    ``x_pred``, not at the corrected state: that is what keeps the cost at one NFE per step.

    **Classifier-free guidance** (``cfg_scale`` given, spec 3.5): backbone and SideNet run on the
    conditional branch (labels ``y``) and the unconditional branch (``null_class``) at every node,
    the SideNet always on its branch's raw velocity, and every velocity that enters a quadrature
    sum is guided, ``v_u + w (v_c - v_u)``, if its node time lies in ``cfg_interval = [lo, hi)``
    (book time; the official default, code time ``(0, 0.7]``, is ``[0.3, 1)``). Both branches are
    evaluated at *every* anchor and probe, inside the interval or not (a start anchor outside it
    feeds nodes inside it), so guidance doubles the whole cost: ``2 nfe`` backbone and
    ``2 (4 nfe - 1)`` SideNet evaluations per sample. The guided baselines pay the second branch only
    at evaluations inside the interval.

    ``shift`` sets the time grid (:func:`~icml26.ba_solver.baselines.time_grid`; 1 = uniform). With a
    zero SideNet the sampler is AB2 on the uniform grid (property P2); on a shifted grid it is another
    two-step recursion, not the variable-step AB2.
    """
    check_nfe(nfe)
    check_x0(x0)
    w_out, w_in = lobatto_weights(alpha)
    ys = _branches(y, cfg_scale, null_class, cfg_interval)

    def g(vals, t):
        return _guide(vals, t, cfg_scale, cfg_interval)

    ts = time_grid(nfe, shift)
    x, traj = x0, [x0]
    with trusted_times():                                                           # grid times are valid
        vs = [call_checked(velocity_fn, x, _tcol(0.0, x), yb) for yb in ys]        # backbone call 1 (per branch)
        for i in range(nfe):
            t, D = ts[i], ts[i + 1] - ts[i]
            tb = _tcol(t, x)
            ss = [_side_at_offsets(sidenet, x, vb, tb, (alpha * D, (1 - alpha) * D, D), yb)
                  for vb, yb in zip(vs, ys)]                                        # forward probe
            v = g(vs, t)
            va = g([vb + sb[0] for vb, sb in zip(vs, ss)], t + alpha * D)
            vb = g([vb + sb[1] for vb, sb in zip(vs, ss)], t + (1 - alpha) * D)
            ve_tilde = g([vb_ + sb[2] for vb_, sb in zip(vs, ss)], t + D)
            x_pred = x + D * (w_out * v + w_in * va + w_in * vb + w_out * ve_tilde)    # predictor (P)
            check_finite(x_pred, i, "ba_bi_anchor")
            if i == nfe - 1:
                traj.append(x_pred)
                break
            t_next = _tcol(ts[i + 1], x)
            ves = [call_checked(velocity_fn, x_pred, t_next, yb) for yb in ys]     # end anchor (1 NFE)
            back = [ve + call_checked(sidenet, x_pred, ve, t_next, torch.full_like(t_next, -alpha * D), yb,
                                      name="sidenet") for ve, yb in zip(ves, ys)]   # backward probe
            vb_back, ve = g(back, ts[i + 1] - alpha * D), g(ves, ts[i + 1])
            x = x + D * (w_out * v + w_in * va + w_in * vb_back + w_out * ve)       # corrector (C)
            vs = ves                                                                # re-used anchor
            check_finite(x, i, "ba_bi_anchor")
            traj.append(x)
    return (x_pred, torch.stack(traj)) if return_traj else x_pred


def ba_single_anchor(velocity_fn: Callable, sidenet: Callable, x0: torch.Tensor, nfe: int, y=None,
                     nodes: int = 2, return_traj: bool = False, cfg_scale: float | None = None,
                     null_class: int | None = None, cfg_interval: tuple[float, float] = CFG_INTERVAL,
                     shift: float = 1.0):
    """Single-anchor variant (Algorithm 3): ``x <- x + D sum_k w_k (v + S(x, v, t, c_k D))``.

    Gauss-Legendre nodes ``c_k`` on ``[0, 1]``; every interior velocity is extrapolated from the
    start anchor. One backbone and one (batched) SideNet call per step. With ``cfg_scale`` the
    guidance decision is made once per step at its start time (as in the official sampler), and
    outside ``cfg_interval`` only the conditional branch is evaluated. ``shift`` sets the time grid.
    """
    check_nfe(nfe)
    check_x0(x0)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= 5:
        raise ValueError(f"nodes must be an int in 1..5, got {nodes!r}")
    ys_all = _branches(y, cfg_scale, null_class, cfg_interval)
    c, w = gauss_legendre(nodes)
    ts = time_grid(nfe, shift)
    x, traj = x0, [x0]
    with trusted_times():
        for i in range(nfe):
            t, D = ts[i], ts[i + 1] - ts[i]
            tb = _tcol(t, x)
            ys = ys_all if _cfg_on(t, cfg_scale, cfg_interval) else ys_all[:1]
            vs = [call_checked(velocity_fn, x, tb, yb) for yb in ys]                # 1 NFE per branch
            ss = [_side_at_offsets(sidenet, x, vb, tb, tuple(float(ck) * D for ck in c), yb)
                  for vb, yb in zip(vs, ys)]
            if len(ys) == 1:
                x = x + D * sum(float(wk) * (vs[0] + ss[0][k]) for k, wk in enumerate(w))
            else:
                x = x + D * sum(float(wk) * _guide([vb + sb[k] for vb, sb in zip(vs, ss)], t, cfg_scale, cfg_interval)
                                for k, wk in enumerate(w))
            check_finite(x, i, "ba_single_anchor")
            traj.append(x)
    return (x, torch.stack(traj)) if return_traj else x


# ---------------------------------------------------------------------------------------------
# training: offsets and the chain loss (Algorithm 1)
# ---------------------------------------------------------------------------------------------
def sample_offsets(t: torch.Tensor, lam: float = 50.0, p_forward: float = 0.5,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Signed truncated-exponential offsets with ``t + h`` in ``[0, 1]`` (inverse CDF, spec 3.4).

    Forward with probability ``p_forward``; distance ``d = max(1 - t, 1e-5)`` forward, ``max(t, 1e-5)``
    backward; ``|h| = min(-log(1 + u (exp(-lam d) - 1)) / lam, d)``.
    """
    if not isinstance(t, torch.Tensor) or t.ndim != 1:
        raise ValueError(f"t must be a tensor of shape (B,), got {getattr(t, 'shape', type(t))}")
    if not lam > 0:
        raise ValueError(f"lam must be > 0, got {lam}")
    if not 0.0 <= p_forward <= 1.0:
        raise ValueError(f"p_forward must lie in [0, 1], got {p_forward}")
    b = t.shape[0]
    u = draw("rand", (b,), generator, t, torch.float64)                              # on the generator's device
    fwd = draw("rand", (b,), generator, t, torch.float64) < p_forward
    tt = t.double()
    d = torch.where(fwd, (1 - tt).clamp_min(1e-5), tt.clamp_min(1e-5))
    mag = torch.minimum(-torch.log1p(u * torch.expm1(-lam * d)) / lam, d)
    h = torch.where(fwd, mag, -mag)
    h = (tt + h).clamp(0.0, 1.0) - tt                                               # keep t + h in [0, 1]
    return h.to(t.dtype)


def ba_chain_loss(backbone: Callable, sidenet: nn.Module, x1: torch.Tensor, y=None, chain_steps: int = 8,
                  lam: float = 50.0, p_forward: float = 0.5, label_dropout: float = 0.0,
                  null_class: int | None = None, generator: torch.Generator | None = None):
    """The chain loss (Algorithm 1, eqs. CH1-CH2). Returns ``(loss, diagnostics)``.

    Costs ``chain_steps + 1`` backbone calls per sample; backbone and teacher are under no_grad,
    only the final SideNet call of each chain step carries gradients. Arguments are validated here,
    once; the inner network calls skip their time-range checks (times are valid by construction),
    and the diagnostics stay on the device (``per_step`` a tensor of ``chain_steps`` losses,
    ``mean_abs_h`` a 0-d tensor), so a step makes no host sync.
    """
    if isinstance(chain_steps, bool) or not isinstance(chain_steps, int) or chain_steps < 1:
        raise ValueError(f"chain_steps must be an int >= 1, got {chain_steps!r}")
    if not lam > 0:
        raise ValueError(f"lam must be > 0, got {lam}")
    if not 0.0 <= p_forward <= 1.0:
        raise ValueError(f"p_forward must lie in [0, 1], got {p_forward}")
    drop_labels(None, label_dropout, null_class)                                     # validate the pair
    b = x1.shape[0]
    y = drop_labels(y, label_dropout, null_class, generator)                         # step 1
    t = draw("rand", (b,), generator, x1).to(x1)                                     # step 2
    x0 = draw("randn", tuple(x1.shape), generator, x1).to(x1)
    x = _hcol(t, x1) * x1 + (1 - _hcol(t, x1)) * x0                                 # on the path
    w1, w2, w3 = GL3_WEIGHTS
    with trusted_times():
        with torch.no_grad():
            v = backbone(x, t, y)                                                    # step 3 (NFE 1)
        total, per_step, mean_h = 0.0, [], []
        for _ in range(chain_steps):                                                 # step 5
            h = sample_offsets(t, lam, p_forward, generator)                         # step 6
            with torch.no_grad():                                                    # steps 7-11: teacher
                s = sidenet(_tile(x, 3), _tile(v, 3), _tile(t, 3),                # one call, batch x3
                            torch.cat([c * h for c in GL3_NODES]), _tile(y, 3)).view(3, *x.shape)
                quad = w1 * (v + s[0]) + w2 * (v + s[1]) + w3 * (v + s[2])          # sum_j w_j v_j
                x_next = x + _hcol(h, x) * quad                                      # (CH1)
                t_next = (t + h).clamp(0.0, 1.0)
                v_next = backbone(x_next, t_next, y)                                 # target (1 NFE)
            pred = v + sidenet(x, v, t, h, y)                                        # step 12 (grad)
            loss_k = ((pred - v_next) ** 2).mean()                                   # step 13 (CH2)
            total = total + loss_k
            per_step.append(loss_k.detach())
            mean_h.append(h.abs().mean())
            x, t, v = x_next, t_next, v_next                                         # step 14
    diag = {"per_step": torch.stack(per_step), "mean_abs_h": torch.stack(mean_h).mean(),
            "backbone_calls": chain_steps + 1}
    return total / chain_steps, diag


def device_generator(generator: torch.Generator | None, dev) -> torch.Generator | None:
    """A generator on ``dev`` seeded from ``generator`` (``generator`` itself on the CPU).

    Drawing the training noise on the device saves a host-to-device copy per draw; on the CPU the
    stream is unchanged, so CPU runs reproduce bit for bit.
    """
    if generator is None or torch.device(dev).type == generator.device.type:
        return generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return torch.Generator(device=dev).manual_seed(seed)


def train_sidenet(backbone: Callable, sidenet: nn.Module, sample_fn: Callable, steps: int, batch_size: int,
                  lr: float = 1e-4, ema_decay: float = 0.9996, grad_clip: float = 1.0, cosine: bool = False,
                  generator: torch.Generator | None = None, progress: bool = True, log_every: int = 50,
                  **loss_kw):
    """Train ``sidenet`` with :func:`ba_chain_loss` (AdamW, weight decay 0, grad clip, EMA).

    ``sample_fn(n, generator)`` returns data or ``(data, labels)``. Returns ``(ema_sidenet, history)``;
    sampling uses the EMA copy (decay warmed up as ``min(decay, (1 + k) / (10 + k))``).
    ``cosine=True`` decays the learning rate to 5 % (the official script keeps it constant; the
    book's short CPU runs use the decay). Training runs on the SideNet's device; losses are copied
    to the host once per ``log_every`` steps (one sync per interval), the EMA is one fused
    ``_foreach_lerp_``.
    """
    for name, val in (("steps", steps), ("batch_size", batch_size), ("log_every", log_every)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be a positive int, got {val!r}")
    if not 0.0 <= ema_decay < 1.0:
        raise ValueError(f"ema_decay must lie in [0, 1), got {ema_decay}")
    dev = next(sidenet.parameters()).device
    gen = device_generator(generator, dev)
    ema = copy.deepcopy(sidenet).eval().requires_grad_(False)
    params, ema_params = list(sidenet.parameters()), list(ema.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=0.05 * lr) if cosine else None
    hist = {"loss": [], "mean_abs_h": []}
    buf_loss, buf_h = [], []
    sidenet.train()
    for k in tqdm(range(steps), desc="sidenet", leave=False, disable=not progress):
        out = sample_fn(batch_size, gen)
        x1, y = out if isinstance(out, tuple) else (out, None)
        loss, diag = ba_chain_loss(backbone, sidenet, x1.to(dev), None if y is None else y.to(dev),
                                   generator=gen, **loss_kw)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, grad_clip)
        opt.step()
        if sched is not None:
            sched.step()
        decay = min(ema_decay, (1 + k) / (10 + k))
        with torch.no_grad():
            torch._foreach_lerp_(ema_params, params, 1 - decay)                      # EMA, one fused op
        buf_loss.append(loss.detach())
        buf_h.append(diag["mean_abs_h"])
        if len(buf_loss) == log_every or k == steps - 1:                             # one sync per interval
            hist["loss"] += torch.stack(buf_loss).tolist()
            hist["mean_abs_h"] += torch.stack(buf_h).tolist()
            buf_loss, buf_h = [], []
    sidenet.eval()
    return ema, hist
