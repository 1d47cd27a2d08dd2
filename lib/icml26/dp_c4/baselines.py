"""Baselines: DP-SGD (Abadi et al. 2016) with Poisson sampling, DP-GD (q = 1) and, with sigma = 0,
noiseless clipped (S)GD, which isolates the clipping bias (spec Sec. 3.2)."""

from __future__ import annotations

import torch
from torch import Tensor

from .method import Trace, _batch_idx, _check_int, _check_run_args, _log, _mask, _noise, _trace, clip_rows
from .problems import FiniteSumProblem


def _per_run(name: str, value) -> Tensor:
    """A number or a 1-D tensor/sequence of numbers (one per run), as a float64 tensor."""
    if value is None or isinstance(value, (str, bytes, bool)):
        raise TypeError(f"{name} must be a number or a 1-D tensor of numbers, got {type(value).__name__}")
    try:
        return torch.atleast_1d(torch.as_tensor(value, dtype=torch.float64))
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{name} must be a number or a 1-D tensor of numbers: {exc}") from None


def dp_sgd(problem: FiniteSumProblem, T: int, lr: float, C, sigma, q: float = 1.0, generator=None,
           x0: Tensor | None = None, x_star: Tensor | None = None, log_every: int = 1) -> Trace:
    """:math:`\\tilde g_t=\\frac1{qn}[\\sum_{i\\in B_t}\\operatorname{clip}(\\nabla f_i(x_t),C)+\\zeta_t]`,
    :math:`\\zeta_t\\sim\\mathcal N(0,\\sigma^2C^2I)`, :math:`x_{t+1}=x_t-\\eta\\tilde g_t`.

    ``C`` and ``sigma`` are floats or ``(R,)`` tensors (R runs at once). ``sigma = 0`` gives clipped
    (S)GD, whose fixed point :math:`x_C` solves :math:`\\frac1n\\sum_i\\operatorname{clip}(\\nabla f_i(x_C),C)=0`."""
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
    noisy = bool((sigma > 0).any())
    if (noisy or q < 1) and generator is None:
        raise ValueError("generator is required when sigma > 0 or q < 1")
    C, sigma = C.expand(R).to(x), sigma.expand(R).to(x)
    std = sigma * C
    n, d = problem.n, problem.dim
    logs = {k: [] for k in ("steps", "dist", "loss", "std", "clip", "innov")}
    for t in range(T):
        mask = _mask(R, n, q, generator, x)
        zeta = _noise(R, d, generator, x) * std[:, None] if noisy else torch.zeros(R, d, dtype=x.dtype,
                                                                                 device=x.device)
        if q < 1:                       # Poisson batch: gradients of the sampled rows only
            idx, mask = _batch_idx(mask)
            G = problem.per_sample_grads(x, idx)
        else:
            G = problem.per_sample_grads(x)
        if t % log_every == 0 or t == T - 1:
            nrm = G.norm(dim=-1)
            nb = mask.sum(1).clamp_min(1)
            _log(logs, t, problem, x, x_star, std, ((nrm > C[:, None]).to(x.dtype) * mask).sum(1) / nb,
                 (nrm * mask).sum(1) / nb)
        g = ((clip_rows(G, C[:, None]) * mask[..., None]).sum(1) + zeta) / (q * n)
        x = x - lr * g
    return _trace(logs, problem, x, x_star)
