"""Baselines: DP-SGD (Abadi et al. 2016) with Poisson sampling, DP-GD (q = 1) and, with sigma = 0,
noiseless clipped (S)GD, which isolates the clipping bias (spec Sec. 3.2)."""

from __future__ import annotations

import torch
from torch import Tensor

from .method import (
    Trace,
    _batch_cap,
    _batch_idx,
    _check_int,
    _check_run_args,
    _check_streams,
    _check_tail,
    _Guard,
    _log,
    _mask,
    _masked_clip_inplace,
    _noise,
    _trace,
    clip_rows,
)
from .problems import FiniteSumProblem


def _per_run(name: str, value) -> Tensor:
    """A number or a 1-D tensor/sequence of numbers (one per run), as a float64 tensor."""
    if value is None or isinstance(value, (str, bytes, bool)):
        raise TypeError(f"{name} must be a number or a 1-D tensor of numbers, got {type(value).__name__}")
    try:
        return torch.atleast_1d(torch.as_tensor(value, dtype=torch.float64))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{name} must be a number or a 1-D tensor of numbers: {exc}") from None


def _linear_clipped_sum(problem: FiniteSumProblem, x: Tensor, C: Tensor, idx: Tensor | None, mask: Tensor,
                        row_sq: Tensor, streams: int = 0) -> Tensor:
    """:math:`\\sum_{i\\in B}\\operatorname{clip}(\\nabla f_i(x),C)` per run for a linear model (logistic or least
    squares), without forming the per-example gradients: :math:`\\nabla f_i=w_ia_i+\\lambda x` with
    :math:`w_i` a scalar, so :math:`\\|\\nabla f_i\\|^2=w_i^2\\|a_i\\|^2+2\\lambda w_ia_i^\\top x+\\lambda^2\\|x\\|^2`
    and the clipped sum is :math:`\\sum_is_iw_ia_i+\\lambda x\\sum_is_i` with :math:`s_i=\\min(1,C/\\|\\nabla f_i\\|)`.
    Equal to the dense path to round-off (tests); with ``streams`` S the batch rows of a stream are
    gathered once and shared by every configuration."""
    R, d = x.shape
    full = idx is None
    S = streams if streams and not full and streams < R else R
    xs = x.reshape(R // S, S, d)
    if full:
        Xb, yb, sq = problem.X, problem.y, row_sq                                    # (n, d), (n,), (n,)
        z = (x @ Xb.T).reshape(R // S, S, -1)
    else:
        ii = idx[:S]
        Xb, yb, sq = problem.X[ii], problem.y[ii], row_sq[ii]                         # (S, b, d), (S, b)
        z = torch.einsum("sbd,gsd->gsb", Xb, xs)
    w = -yb * torch.sigmoid(-yb * z) if problem.kind == "logistic" else z - yb
    lam = problem.lam
    nrm = (w * w * sq + 2 * lam * w * z + lam * lam * (xs * xs).sum(-1, keepdim=True)).clamp_min(0).sqrt()
    Cr = C.reshape(R // S, S, 1)
    s = torch.where(nrm > Cr, Cr / torch.where(nrm > Cr, nrm, torch.ones_like(nrm)), torch.ones_like(nrm))
    s = s * mask.reshape(R // S, S, -1)
    sw = s * w
    out = (sw.reshape(R, -1) @ Xb) if full else torch.einsum("gsb,sbd->gsd", sw, Xb).reshape(R, d)
    return out + lam * x * s.reshape(R, -1).sum(1, keepdim=True)


def dp_sgd(problem: FiniteSumProblem, T: int, lr: float, C, sigma, q: float = 1.0, generator=None,
           x0: Tensor | None = None, x_star: Tensor | None = None, log_every: int = 1, streams: int = 0,
           tail: int = 0) -> Trace:
    """:math:`\\tilde g_t=\\frac1{qn}[\\sum_{i\\in B_t}\\operatorname{clip}(\\nabla f_i(x_t),C)+\\zeta_t]`,
    :math:`\\zeta_t\\sim\\mathcal N(0,\\sigma^2C^2I)`, :math:`x_{t+1}=x_t-\\eta\\tilde g_t`.

    ``C`` and ``sigma`` are floats or ``(R,)`` tensors (R runs at once). ``sigma = 0`` gives clipped
    (S)GD, whose fixed point :math:`x_C` solves :math:`\\frac1n\\sum_i\\operatorname{clip}(\\nabla f_i(x_C),C)=0`.

    ``lr`` may hold one step size per run. ``streams`` S > 0 gives every configuration the same Poisson
    batches and standard-normal draws per seed (run r uses stream r mod S; runs ordered configuration-major,
    seeds inner): common random numbers for paired comparisons. ``tail`` > 0 also returns the mean of the
    last ``tail`` iterates, ``Trace.x_avg`` (tail averaging, free post-processing of released iterates).
    No host read per step: fixed padded Poisson batches, checks read once after the loop, and an exact
    re-run from the same generator state when they failed, as in :func:`~.method.dp_c4`."""
    T = _check_int("T", T)
    C, sigma = _per_run("C", C), _per_run("sigma", sigma)
    if C.ndim != 1 or sigma.ndim != 1:
        raise ValueError("C and sigma must be scalars or 1-D (one value per run)")
    if not bool(torch.isfinite(C).all()) or bool((C <= 0).any()):
        raise ValueError(f"C must be finite and > 0, got {C}")
    if not bool(torch.isfinite(sigma).all()) or bool((sigma < 0).any()):
        raise ValueError(f"sigma must be finite and >= 0 (0 = noiseless clipped GD), got {sigma}")
    R = max(len(C), len(sigma))
    if len(C) not in (1, R) or len(sigma) not in (1, R):
        raise ValueError(f"C ({len(C)}) and sigma ({len(sigma)}) must have the same length or length 1")
    lr, q, x = _check_run_args(problem, lr, q, x0, R, generator)
    log_every = _check_int("log_every", log_every)
    streams, tail = _check_streams(streams, R), _check_tail(tail, T)
    noisy = bool((sigma > 0).any())
    if (noisy or q < 1) and generator is None:
        raise ValueError("generator is required when sigma > 0 or q < 1")
    C, sigma = C.expand(R).to(x), sigma.expand(R).to(x)
    args = (problem, T, lr, C, sigma, q, generator, x, x_star, log_every, streams, tail, noisy)
    state = generator.get_state() if generator is not None else None
    tr, held = _dp_sgd_run(*args, fast=True)
    if not held:                        # a batch over the padded size, or a non-finite / overflowed row (MLP):
        if generator is not None:       # the same draws again, with exact batch sizes and clip_rows' checks
            generator.set_state(state)
        tr, _ = _dp_sgd_run(*args, fast=False)
    return tr


def _dp_sgd_run(problem, T, lr, C, sigma, q, generator, x, x_star, log_every, streams, tail, noisy, fast: bool):
    """The loop of :func:`dp_sgd` on checked arguments; ``fast`` as in :func:`~.method._dp_c4_run` (no host
    read per step; its assumptions read once at the end, ``(trace, held)``)."""
    R = len(C)
    std = sigma * C
    n, d = problem.n, problem.dim
    logs = {k: [] for k in ("steps", "dist", "loss", "std", "clip", "innov")}
    x_sum = torch.zeros_like(x) if tail else None
    # a linear model's clipped sum needs no per-example gradient tensor (see _linear_clipped_sum); a
    # problem with its own per-example gradients (the MLP) takes the dense path
    linear = type(problem).per_sample_grads is FiniteSumProblem.per_sample_grads
    row_sq = (problem.X * problem.X).sum(1) if linear else None
    guard = _Guard(x.device)
    cap = _batch_cap(n, q, (streams or R) * T) if fast and q < 1 else None
    # fixed shapes on the fast path: one reused buffer for the per-example gradients (as in dp_c4)
    rows = (n if q == 1 else cap) if fast else None
    Gbuf = torch.empty(R, rows, d, dtype=x.dtype, device=x.device) if rows else None
    for t in range(T):
        mask = _mask(R, n, q, generator, x, streams)
        zeta = _noise(R, d, generator, x, streams) * std[:, None] if noisy else torch.zeros(R, d, dtype=x.dtype,
                                                                                 device=x.device)
        idx = None
        if q < 1:                       # Poisson batch: gradients of the sampled rows only
            if cap is not None:
                guard.require((mask[:streams or R].sum(1) <= cap).all())
            idx, mask = _batch_idx(mask, streams, cap)
        logged = t % log_every == 0 or t == T - 1
        G = problem.per_sample_grads(x, idx, out=Gbuf) if logged or not linear else None
        if logged:
            nrm = G.norm(dim=-1)
            nb = mask.sum(1).clamp_min(1)
            _log(logs, t, problem, x, x_star, std, ((nrm > C[:, None]).to(x.dtype) * mask).sum(1) / nb,
                 (nrm * mask).sum(1) / nb)
        if linear:
            total = _linear_clipped_sum(problem, x, C, idx, mask, row_sq, streams)
        elif fast:                      # in place, the values of (_clip_rows_fast(G, C) * mask).sum(1)
            total = _masked_clip_inplace(G, C[:, None], mask, guard).sum(1)
        else:
            total = (clip_rows(G, C[:, None]) * mask[..., None]).sum(1)
        g = (total + zeta) / (q * n)
        x = x - lr * g
        if tail and t >= T - tail:
            x_sum += x
    if fast and not guard.held():
        return None, False
    tr = _trace(logs, problem, x, x_star)
    tr.x_avg = x_sum / tail if tail else None
    return tr, True
