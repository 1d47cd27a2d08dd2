"""AdamW over one flat buffer: the multi-tensor AdamW of a model's parameters in one call per operation.

Small models on a CPU thread pay per parameter tensor in every optimiser step (``foreach`` runs a loop
there): with a few dozen tensors that is a tenth of a training step. AdamW is elementwise, so running it
over one tensor that holds every parameter changes nothing but the number of calls: on the CPU the weights
come out equal to the bit (tested against the per-tensor optimiser in the chapters that use it). On CUDA the
fused kernels may take another path for a parameter whose offset in the buffer is not 16-byte aligned, so
there the equality is to round-off, not promised to the bit.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["flatten_params", "adamw_flat"]


def flatten_params(params: list) -> tuple[torch.Tensor, torch.Tensor]:
    """Move every parameter of ``params`` and its gradient into two flat buffers (each parameter and each
    ``.grad`` becomes a view into them) and return the buffers ``(flat, grad_flat)``.

    Autograd then accumulates every step's gradients in place into ``grad_flat`` (zero it with ``zero_()``
    before ``backward``; never set the gradients to None), and an optimiser over the one flat tensor updates
    every parameter at once. Needs every parameter to hold a gradient (call it after a first backward pass)."""
    params = list(params)
    if not params:
        raise ValueError("params must hold at least one parameter")
    for i, p in enumerate(params):
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"params[{i}] must be a tensor, got {type(p).__name__}")
        if p.grad is None:
            raise ValueError(f"params[{i}] has no gradient: call flatten_params after a backward pass that "
                             "reaches every parameter")
    if len({(p.device, p.dtype) for p in params}) > 1:
        raise ValueError("params must share one device and dtype to live in one flat buffer")
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    gflat = torch.cat([p.grad.reshape(-1) for p in params])
    o = 0
    for p in params:
        n = p.numel()
        p.data, p.grad = flat[o:o + n].view_as(p), gflat[o:o + n].view_as(p)
        o += n
    return flat, gflat


def adamw_flat(params, **adamw_kw) -> tuple[torch.optim.AdamW, torch.Tensor | None]:
    """AdamW for ``params`` (``adamw_kw`` as :class:`torch.optim.AdamW` but ``foreach``, which is set), built after the first
    backward pass: over one flat buffer (:func:`flatten_params`) when every parameter has a gradient, then
    returned with the flat gradient buffer to zero before each backward; otherwise over the parameter list
    (a parameter without a gradient is skipped by AdamW, where the flat buffer would move it under weight
    decay), or when the parameters differ in device or dtype, returned with ``None`` (then set the gradients to
    None before each backward, as ``opt.zero_grad(set_to_none=True)`` does).

    A parameter with a gradient on the first step is taken to have one on every step (each step's loss
    reaches all weights); one that did not would get a zero gradient, where the per-tensor optimiser skips it."""
    if "foreach" in adamw_kw:
        raise TypeError("adamw_flat sets foreach itself: leave it out of adamw_kw")
    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("params must hold at least one parameter that requires a gradient")
    if all(p.grad is not None for p in params) and len({(p.device, p.dtype) for p in params}) == 1:
        flat, gflat = flatten_params(params)
        group = nn.Parameter(flat)
        group.grad = gflat
        return torch.optim.AdamW([group], foreach=True, **adamw_kw), gflat
    return torch.optim.AdamW(params, foreach=True, **adamw_kw), None
