"""Training-free ODE solvers that BA-solver is compared against, at equal *backbone* NFE.

All solvers integrate ``dx/dt = v(x, t, y)`` on the uniform grid ``t_i = i / N_steps`` from
``t = 0`` (noise) to ``t = 1`` (data) (spec section 3.6, ``Delta = t_{i+1} - t_i``):

* Euler:      ``x_{i+1} = x_i + Delta v_i``                                           (N NFE)
* Heun:       ``x~ = x_i + Delta v_i``; ``x_{i+1} = x_i + Delta/2 (v_i + v(x~, t_{i+1}))``   (2 per step)
* Midpoint:   ``x_{i+1} = x_i + Delta v(x_i + Delta/2 v_i, t_i + Delta/2)``             (2 per step)
* RK4:        classical four stages                                                   (4 per step)
* AB2:        Euler first step, then ``x_{i+1} = x_i + Delta (3/2 v_i - 1/2 v_{i-1})`` (N NFE)
* DPM-Solver++(2M), flow form: data prediction ``x1^_i = x_i + (1 - t_i) v_i``,
  ``lambda(t) = log(t / (1 - t))``, ``r_i = (lambda_i - lambda_{i-1}) / (lambda_{i+1} - lambda_i)``,
  ``D_i = (1 + 1/(2 r_i)) x1^_i - 1/(2 r_i) x1^_{i-1}``,
  ``x_{i+1} = x_i + (t_{i+1} - t_i) / (1 - t_i) (D_i - x_i)``; first-order (``D_i = x1^_i``) at the
  first step, at ``i = 1`` (``r_1 = inf``) and at the last step ("lower order final").  (N NFE)

**Classifier-free guidance.** Every solver takes ``cfg_scale``, ``null_class`` and ``cfg_interval``:
the backbone is evaluated on the conditional and the unconditional (``null_class``) branch and
``v = v_u + w (v_c - v_u)`` is used where the evaluation time lies in ``cfg_interval = [lo, hi)``
(book time). The official default interval, code time ``tau in (0, 0.7]`` with ``tau = 1 - t``,
is ``[0.3, 1)`` here (:data:`CFG_INTERVAL`); outside it, and at ``w = 1``, the conditional velocity
is used and the unconditional branch is not evaluated.

**Time grid.** Every solver takes ``shift`` (default 1, the uniform grid): the grid is
``t_i = u_i / (u_i + shift (1 - u_i))`` with ``u_i = i / N_steps`` (:func:`time_grid`), the
"timestep shift" of flow-model samplers written in book time. ``shift > 1`` packs the steps towards
the noise end ``t = 0``, ``shift < 1`` towards the data end. It is the knob a fair comparison tunes
for every solver alike. AB2 uses its variable-step form on a non-uniform grid (below).

``nfe`` always counts backbone evaluations per sample: Heun/midpoint with ``nfe = N`` take
``N / 2`` steps, RK4 ``N / 4``. With guidance the unconditional branch adds evaluations where it
is used; :class:`CountingField` measures both.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch


def check_nfe(nfe, multiple: int = 1, name: str = "nfe") -> int:
    """``nfe`` must be a positive int divisible by ``multiple``."""
    if isinstance(nfe, bool) or not isinstance(nfe, int) or nfe < 1:
        raise ValueError(f"{name} must be a positive int, got {nfe!r}")
    if nfe % multiple:
        raise ValueError(f"{name} must be a multiple of {multiple} for this solver, got {nfe}")
    return nfe


CFG_INTERVAL = (0.3, 1.0)
"""Book-time guidance interval ``[0.3, 1)``: the official ``(0, 0.7]`` in code time ``tau = 1 - t``."""


def check_guidance(cfg_scale, null_class, cfg_interval, y) -> None:
    """Validate the guidance arguments (``cfg_scale`` a real number, a null label, labels, an interval)."""
    if isinstance(cfg_scale, bool) or not isinstance(cfg_scale, (int, float)) or not math.isfinite(cfg_scale):
        raise TypeError(f"cfg_scale must be a finite float, got {cfg_scale!r}")
    if isinstance(null_class, bool) or not isinstance(null_class, int) or null_class < 0:
        raise ValueError(f"null_class must be a non-negative int (the unconditional label) for guidance, got {null_class!r}")
    if not isinstance(y, torch.Tensor):
        raise ValueError("guidance needs class labels y (a LongTensor of shape (B,))")
    if (not isinstance(cfg_interval, (tuple, list)) or len(cfg_interval) != 2
            or not 0.0 <= cfg_interval[0] <= cfg_interval[1]):
        raise ValueError(f"cfg_interval must be a pair (lo, hi) with 0 <= lo <= hi, got {cfg_interval!r}")


def guided_velocity(velocity_fn: Callable, cfg_scale: float | None, null_class: int | None = None,
                    cfg_interval: tuple[float, float] = CFG_INTERVAL) -> Callable:
    """``velocity_fn`` with classifier-free guidance ``v_u + w (v_c - v_u)`` inside ``cfg_interval``.

    ``cfg_scale=None`` returns ``velocity_fn`` itself. At ``w = 1``, or where no sample's time lies
    in the interval, only the conditional branch is evaluated and returned unchanged.
    """
    if cfg_scale is None:
        return velocity_fn
    lo, hi = cfg_interval

    def fn(x, t, y=None):
        check_guidance(cfg_scale, null_class, cfg_interval, y)
        v_c = velocity_fn(x, t, y)
        if cfg_scale == 1.0:
            return v_c
        inside = (t >= lo) & (t < hi)                                               # (B,)
        if not bool(inside.any()):
            return v_c
        v_u = velocity_fn(x, t, torch.full_like(y, null_class))
        return torch.where(inside.view(-1, *([1] * (x.ndim - 1))), v_u + cfg_scale * (v_c - v_u), v_c)

    return fn


def check_x0(x0) -> None:
    if not isinstance(x0, torch.Tensor):
        raise TypeError(f"x0 must be a torch.Tensor of shape (B, *S), got {type(x0).__name__}")
    if x0.ndim < 2:
        raise ValueError(f"x0 must have shape (B, *S) with a batch dimension, got {tuple(x0.shape)}")
    if not bool(torch.isfinite(x0).all()):
        raise ValueError("x0 contains non-finite values")


def call_checked(fn: Callable, x: torch.Tensor, *args, name: str = "velocity_fn") -> torch.Tensor:
    """``fn(x, *args)``, raising if the output's shape differs from ``x``'s."""
    out = fn(x, *args)
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        raise ValueError(f"{name} must return a tensor of the input's shape {tuple(x.shape)}, "
                         f"got {tuple(getattr(out, 'shape', ()))}")
    return out


def check_finite(x: torch.Tensor, step: int, solver: str) -> None:
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{solver}: non-finite values in the state after step {step} (x0 and the fields must stay finite)")


def _tcol(t: float, x: torch.Tensor) -> torch.Tensor:
    return torch.full((x.shape[0],), t, dtype=x.dtype, device=x.device)            # (B,)


def check_shift(shift) -> float:
    """``shift`` must be a finite float > 0 (1 is the uniform grid)."""
    if isinstance(shift, bool) or not isinstance(shift, (int, float)) or not math.isfinite(shift) or shift <= 0:
        raise ValueError(f"shift must be a finite number > 0 (1 = uniform grid), got {shift!r}")
    return float(shift)


def time_grid(n_steps: int, shift: float = 1.0) -> list[float]:
    """The ``n_steps + 1`` times ``t_i = u_i / (u_i + shift (1 - u_i))``, ``u_i = i / n_steps``.

    In noise level ``sigma = 1 - t`` this is the usual timestep shift
    ``sigma' = shift sigma / (1 + (shift - 1) sigma)``; ``shift = 1`` is the uniform grid (exactly
    ``i / n_steps``), ``t_0 = 0`` and ``t_N = 1`` for every shift.
    """
    check_nfe(n_steps, name="n_steps")
    shift = check_shift(shift)
    if shift == 1.0:
        return [i / n_steps for i in range(n_steps + 1)]
    u = [i / n_steps for i in range(n_steps + 1)]
    return [ui / (ui + shift * (1 - ui)) for ui in u]


def _grid(n_steps: int, shift: float = 1.0) -> list[float]:
    return time_grid(n_steps, shift)


def _finish(x, traj, return_traj):
    return (x, torch.stack(traj)) if return_traj else x


def euler(velocity_fn: Callable, x0: torch.Tensor, nfe: int, y=None, return_traj: bool = False,
          cfg_scale: float | None = None, null_class: int | None = None, cfg_interval=CFG_INTERVAL,
          shift: float = 1.0):
    """Explicit Euler, ``nfe`` steps (one backbone call each)."""
    check_nfe(nfe)
    check_x0(x0)
    velocity_fn = guided_velocity(velocity_fn, cfg_scale, null_class, cfg_interval)
    ts, x, traj = _grid(nfe, shift), x0, [x0]
    for i in range(nfe):
        v = call_checked(velocity_fn, x, _tcol(ts[i], x), y)
        x = x + (ts[i + 1] - ts[i]) * v
        check_finite(x, i, "euler")
        traj.append(x)
    return _finish(x, traj, return_traj)


def heun(velocity_fn: Callable, x0: torch.Tensor, nfe: int, y=None, return_traj: bool = False,
         cfg_scale: float | None = None, null_class: int | None = None, cfg_interval=CFG_INTERVAL,
          shift: float = 1.0):
    """Heun (explicit trapezoid), ``nfe / 2`` steps; ``nfe`` must be even."""
    check_nfe(nfe, 2)
    check_x0(x0)
    velocity_fn = guided_velocity(velocity_fn, cfg_scale, null_class, cfg_interval)
    n = nfe // 2
    ts, x, traj = _grid(n, shift), x0, [x0]
    for i in range(n):
        d = ts[i + 1] - ts[i]
        v = call_checked(velocity_fn, x, _tcol(ts[i], x), y)
        v2 = call_checked(velocity_fn, x + d * v, _tcol(ts[i + 1], x), y)
        x = x + 0.5 * d * (v + v2)
        check_finite(x, i, "heun")
        traj.append(x)
    return _finish(x, traj, return_traj)


def midpoint(velocity_fn: Callable, x0: torch.Tensor, nfe: int, y=None, return_traj: bool = False,
             cfg_scale: float | None = None, null_class: int | None = None, cfg_interval=CFG_INTERVAL,
          shift: float = 1.0):
    """Explicit midpoint, ``nfe / 2`` steps; ``nfe`` must be even."""
    check_nfe(nfe, 2)
    check_x0(x0)
    velocity_fn = guided_velocity(velocity_fn, cfg_scale, null_class, cfg_interval)
    n = nfe // 2
    ts, x, traj = _grid(n, shift), x0, [x0]
    for i in range(n):
        d = ts[i + 1] - ts[i]
        v = call_checked(velocity_fn, x, _tcol(ts[i], x), y)
        x = x + d * call_checked(velocity_fn, x + 0.5 * d * v, _tcol(ts[i] + 0.5 * d, x), y)
        check_finite(x, i, "midpoint")
        traj.append(x)
    return _finish(x, traj, return_traj)


def rk4(velocity_fn: Callable, x0: torch.Tensor, nfe: int, y=None, return_traj: bool = False,
        cfg_scale: float | None = None, null_class: int | None = None, cfg_interval=CFG_INTERVAL,
          shift: float = 1.0):
    """Classical RK4, ``nfe / 4`` steps; ``nfe`` must be a multiple of 4."""
    check_nfe(nfe, 4)
    check_x0(x0)
    velocity_fn = guided_velocity(velocity_fn, cfg_scale, null_class, cfg_interval)
    n = nfe // 4
    ts, x, traj = _grid(n, shift), x0, [x0]
    for i in range(n):
        x = _rk4_step(velocity_fn, x, ts[i], ts[i + 1] - ts[i], y)
        check_finite(x, i, "rk4")
        traj.append(x)
    return _finish(x, traj, return_traj)


def _rk4_step(f, x, t, d, y):
    """One RK4 step of length ``d`` from time ``t`` (floats or ``(B,)`` tensors)."""
    tt = t if isinstance(t, torch.Tensor) else _tcol(t, x)
    dd = d if isinstance(d, torch.Tensor) else _tcol(d, x)
    db = dd.view(-1, *([1] * (x.ndim - 1)))                                         # (B, 1, ...)
    k1 = call_checked(f, x, tt, y)
    k2 = call_checked(f, x + 0.5 * db * k1, tt + 0.5 * dd, y)
    k3 = call_checked(f, x + 0.5 * db * k2, tt + 0.5 * dd, y)
    k4 = call_checked(f, x + db * k3, tt + dd, y)
    return x + db / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


def ab2(velocity_fn: Callable, x0: torch.Tensor, nfe: int, y=None, return_traj: bool = False,
        cfg_scale: float | None = None, null_class: int | None = None, cfg_interval=CFG_INTERVAL,
          shift: float = 1.0):
    """Two-step Adams-Bashforth, Euler first step; ``nfe`` steps.

    Variable-step form ``x_{i+1} = x_i + D_i (v_i + D_i / (2 D_{i-1}) (v_i - v_{i-1}))`` (the linear
    extrapolation of the last two velocities, integrated over the step); on the uniform grid it is
    ``x_i + D (3/2 v_i - 1/2 v_{i-1})``.
    """
    check_nfe(nfe)
    check_x0(x0)
    velocity_fn = guided_velocity(velocity_fn, cfg_scale, null_class, cfg_interval)
    ts, x, traj, v_prev = _grid(nfe, shift), x0, [x0], None
    for i in range(nfe):
        d = ts[i + 1] - ts[i]
        v = call_checked(velocity_fn, x, _tcol(ts[i], x), y)
        if v_prev is None:
            x = x + d * v
        else:
            c = 0.5 if shift == 1 else d / (2 * (ts[i] - ts[i - 1]))                  # 1/2 on a uniform grid
            x = x + d * ((1 + c) * v - c * v_prev)
        v_prev = v
        check_finite(x, i, "ab2")
        traj.append(x)
    return _finish(x, traj, return_traj)


def dpmpp_2m(velocity_fn: Callable, x0: torch.Tensor, nfe: int, y=None, return_traj: bool = False,
             cfg_scale: float | None = None, null_class: int | None = None, cfg_interval=CFG_INTERVAL,
          shift: float = 1.0):
    """DPM-Solver++(2M) in flow form (data prediction, log-SNR ``lambda = log(t/(1-t))``)."""
    check_nfe(nfe)
    check_x0(x0)
    velocity_fn = guided_velocity(velocity_fn, cfg_scale, null_class, cfg_interval)
    ts, x, traj = _grid(nfe, shift), x0, [x0]

    def lam(t):
        return math.log(t / (1 - t)) if 0 < t < 1 else (-math.inf if t <= 0 else math.inf)

    x1_prev = None
    for i in range(nfe):
        t, tn = ts[i], ts[i + 1]
        v = call_checked(velocity_fn, x, _tcol(t, x), y)
        x1_hat = x + (1 - t) * v                                                    # data prediction
        first_order = x1_prev is None or i == nfe - 1 or not math.isfinite(lam(ts[i - 1]))
        if first_order:
            D = x1_hat
        else:
            r = (lam(t) - lam(ts[i - 1])) / (lam(tn) - lam(t))
            D = (1 + 1 / (2 * r)) * x1_hat - 1 / (2 * r) * x1_prev
        x = x + (tn - t) / (1 - t) * (D - x)
        x1_prev = x1_hat
        check_finite(x, i, "dpmpp_2m")
        traj.append(x)
    return _finish(x, traj, return_traj)


@torch.no_grad()
def reference_solve(velocity_fn: Callable, x0: torch.Tensor, y=None, steps: int = 512) -> torch.Tensor:
    """High-accuracy reference: RK4 with ``steps`` steps in float64 (validated against DOP853).

    A ``torch.nn.Module`` backbone is evaluated through a float64 copy of itself, so the reference
    solves the *same* network's ODE without float32 round-off.
    """
    check_nfe(steps, name="steps")
    check_x0(x0)
    x = x0.double()
    fn = copy.deepcopy(velocity_fn).double() if isinstance(velocity_fn, torch.nn.Module) else velocity_fn

    def f(z, t, yy):
        return fn(z, t, yy).double()

    for i in range(steps):
        x = _rk4_step(f, x, i / steps, 1 / steps, y)
    check_finite(x, steps - 1, "reference_solve")
    return x


class CountingField:
    """Wrap a velocity function or a SideNet; count calls and evaluated samples.

    ``.calls`` number of (batched) calls, ``.samples`` total rows evaluated,
    ``.evals_per_sample = samples / n_samples`` (``n_samples`` defaults to the smallest batch seen).
    """

    def __init__(self, fn: Callable, n_samples: int | None = None):
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        self.fn, self.n_samples = fn, n_samples
        self.calls, self.samples, self._min_batch = 0, 0, None

    def __call__(self, x, *args, **kw):
        self.calls += 1
        self.samples += x.shape[0]
        self._min_batch = x.shape[0] if self._min_batch is None else min(self._min_batch, x.shape[0])
        return self.fn(x, *args, **kw)

    @property
    def evals_per_sample(self) -> float:
        n = self.n_samples or self._min_batch or 1
        return self.samples / n

    def reset(self) -> None:
        self.calls, self.samples, self._min_batch = 0, 0, None
