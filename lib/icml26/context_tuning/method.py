"""Context Tuning (Lu, Teehan, Yang, Ren 2025): CT-KV and CT-Prompt on the tiny in-context regressor.

Both initialise a trainable context *from the demonstrations* and minimise the leave-one-out loss on
the demonstrations (spec Sec. 3.3-3.5, the paper's Sec. 3):

- **CT-KV** (spec Sec. 3.4, Algorithm 3.5): the trainable tensors are the per-layer keys and values
  ``{K_l, V_l}`` of one causal pass over the demonstrations (so step 0 *is* ICL); the pair ``(x_i, y_i)``
  becomes the query ``x_i`` with target ``y_i``, and the query may not attend to pair ``i``'s own cache
  entry (leave-one-out mask ``m_i[j] = 1[j != i] * b_ij``, ``b_ij ~ Bernoulli(1 - rho)`` token dropout).
  One step costs one short pass per pair: linear in ``k``.
- **CT-Prompt** (spec Sec. 3.3, Eq. "min_P 1/k sum_i l(P_{-span(i)}; x_i, y_i)"): the trainable tensors are
  the input embeddings of the demonstration tokens; leave-one-out means *re-encoding* the context with
  pair ``i`` removed for every ``i``: ``k`` passes over ``k - 1`` tokens per step, quadratic in ``k``.

Everything is batched over tasks: trainable tensors carry a leading task dimension, the loss is the sum
of the per-task mean losses (so tasks do not interact), and gradient clipping is per task.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from torch import Tensor

from ..core.checks import check_generator as _check_generator  # noqa: F401
from .model import KV, check_demos, check_kv, check_queries, demo_tokens, model_dtype, query_tokens

#: largest estimated autograd working set (bytes) of the quadratic-cost methods (CT-Prompt and TTT
#: re-encode the context once per demonstration: B k sequences of k tokens) on the CPU; on a CUDA
#: device the limit is the device's memory. Past it the call raises ``ValueError`` naming ``x_demo``.
MAX_CPU_WORK_BYTES = 4 * 1024 ** 3


# ----------------------------------------------------------------------------------------- checks
def _check_hparams(steps, lr, token_dropout=0.0, grad_clip=1.0) -> None:
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    if (isinstance(token_dropout, bool) or not isinstance(token_dropout, (int, float))
            or not 0 <= token_dropout < 1):
        raise ValueError(f"token_dropout must be in [0, 1), got {token_dropout!r}")
    if (isinstance(grad_clip, bool) or not isinstance(grad_clip, (int, float)) or not math.isfinite(grad_clip)
            or grad_clip <= 0):
        raise ValueError(f"grad_clip must be a finite number > 0, got {grad_clip!r}")


def work_bytes(model, batch: int, k: int) -> int:
    """Estimated autograd working set of one leave-one-out re-encoding step (CT-Prompt, TTT):
    ``B k`` sequences of ``k`` tokens, per layer two ``[H, k, k]`` attention maps and about 16
    ``[k, d_model]`` activations per sequence, 4 or 8 bytes each (an upper estimate: measured 0.5-0.9x)."""
    d_model = model.n_heads * model.d_head
    elem = torch.finfo(model_dtype(model)).bits // 8
    return elem * model.n_layers * batch * k * k * (2 * model.n_heads * k + 16 * d_model)


def check_work(model, x_demo: Tensor) -> None:
    """Refuse a quadratic-cost call whose estimated working set (:func:`work_bytes`) exceeds the limit:
    :data:`MAX_CPU_WORK_BYTES` on the CPU, the device's memory on CUDA (``max_demos`` of the model is the
    pretraining length, not a limit: longer contexts run, up to this memory cap)."""
    B, k = x_demo.shape[:2]
    need = work_bytes(model, B, k)
    dev = x_demo.device
    limit = torch.cuda.get_device_properties(dev).total_memory if dev.type == "cuda" else MAX_CPU_WORK_BYTES
    if need > limit:
        raise ValueError(f"x_demo: B={B} tasks with k={k} demonstrations need about {need / 2 ** 30:.1f} GiB for the "
                         f"leave-one-out re-encodings, over the limit of {limit / 2 ** 30:.1f} GiB "
                         "(context_tuning.method.MAX_CPU_WORK_BYTES on the CPU); use fewer tasks per call or fewer "
                         "demonstrations")


def _check_inputs(model, x_demo, y_demo, leave_one_out: bool, generator=None) -> None:
    check_demos(x_demo, y_demo, model.dim, dtype=model_dtype(model))
    _check_generator(generator)
    if not isinstance(leave_one_out, bool):
        raise TypeError(f"leave_one_out must be a bool, got {type(leave_one_out).__name__}")
    if leave_one_out and x_demo.shape[1] < 2:
        raise ValueError(f"leave_one_out=True needs k >= 2 demonstrations, got k={x_demo.shape[1]}")


@contextmanager
def frozen(model):
    """Switch off ``requires_grad`` on the model's weights for the duration (restored afterwards): the
    context methods must never build a graph into, let alone change, the weights."""
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p, f in zip(params, flags):
            p.requires_grad_(f)


# ----------------------------------------------------------------------------------------- masks
def loo_mask(batch: int, k: int, leave_one_out: bool = True, device=None) -> Tensor:
    """Prefix mask ``[B,k,k]`` for the k demonstration pairs used as queries: query ``i`` may attend to
    every cache position except its own pair's (``leave_one_out``), or to all of them."""
    m = torch.ones(k, k, dtype=torch.bool, device=device)
    if leave_one_out:
        m &= ~torch.eye(k, dtype=torch.bool, device=device)
    return m.expand(batch, k, k)


def dropout_mask(shape, rho: float, generator: torch.Generator | None = None, device=None) -> Tensor:
    """Token dropout: a bool mask that keeps each position with probability ``1 - rho`` (drawn on the
    CPU from ``generator``, then moved to ``device``); ``rho = 0`` keeps everything."""
    if not 0 <= rho < 1:
        raise ValueError(f"rho must be in [0, 1), got {rho}")
    if rho == 0:
        return torch.ones(shape, dtype=torch.bool, device=device)
    return (torch.rand(shape, generator=generator) >= rho).to(device)


def loo_encoding_mask(k: int, device=None) -> Tensor:
    """``[k,k,k]`` demonstration masks for CT-Prompt's and TTT's re-encodings: in copy ``i`` no token
    attends to pair ``i`` (pair ``i`` itself only sees itself, and no query reads it)."""
    c = torch.arange(k, device=device)
    return (c.view(1, 1, k) != c.view(k, 1, 1)) | (c.view(1, k, 1) == c.view(1, 1, k))


# ----------------------------------------------------------------------------------------- the loop
def _clip_per_task(params: list[Tensor], max_norm: float) -> None:
    """Clip each task's gradient (all its tensors together) to norm ``max_norm`` (leading dim = task)."""
    sq = sum(p.grad.pow(2).flatten(1).sum(1) for p in params)
    scale = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
    for p in params:
        p.grad.mul_(scale.view(-1, *([1] * (p.dim() - 1))))


def optimise(params: list[Tensor], loss_fn, steps: int, lr: float, grad_clip: float = 1.0,
             log: dict | None = None, track=None) -> None:
    """AdamW (weight decay 0), cosine schedule without warm-up, per-task grad clipping, full batch
    (spec Sec. 3.6). ``loss_fn()`` returns per-task losses ``[B]``; their sum is minimised. If ``log`` is a
    dict, the mean training loss of each step is appended to ``log["train"]`` and, if ``track`` (a
    function returning per-task query MSE ``[B]``) is given, the query MSE before each step and after
    the last one to ``log["query"]``."""
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(steps, 1))
    if log is not None:
        log.setdefault("train", [])
        log.setdefault("query", [])
    for _ in range(steps):
        if log is not None and track is not None:
            with torch.no_grad():
                log["query"].append(track().mean().item())
        losses = loss_fn()
        opt.zero_grad(set_to_none=True)
        losses.sum().backward()
        _clip_per_task(params, grad_clip)
        opt.step()
        sched.step()
        if log is not None:
            log["train"].append(losses.mean().item())
    if log is not None and track is not None:
        with torch.no_grad():
            log["query"].append(track().mean().item())


def _pairs(flat: list[Tensor]) -> KV:
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]


def evaluate(model, kv: KV, x_query: Tensor, y_query: Tensor) -> Tensor:
    """Per-task query MSE ``[B]`` with the full context ``kv`` (no masking, no dropout).
    ``x_query [B,q,D]`` and ``y_query [B,q]`` must match the cache's B tasks exactly."""
    check_kv(model, kv)
    check_queries(x_query, y_query, kv[0][0].shape[0], model.dim, model_dtype(model))
    pred = model.predict(kv, query_tokens(x_query))
    return (pred - y_query).pow(2).mean(-1)


# ----------------------------------------------------------------------------------------- CT-KV
def ct_kv(model, x_demo: Tensor, y_demo: Tensor, *, steps: int = 100, lr: float = 1e-2,
          leave_one_out: bool = True, token_dropout: float = 0.05, grad_clip: float = 1.0,
          generator: torch.Generator | None = None, log: dict | None = None, track=None) -> KV:
    """CT-KV (spec Sec. 3.4-3.5): tune the demonstrations' key/value cache, weights frozen.

    1. ``KV^(0)`` = the cache of one causal pass over ``c = [(x_1,y_1), ..., (x_k,y_k)]`` (= ICL's context).
    2. Each step: all ``k`` pairs in one batch, pair ``i`` as query ``x_i`` with target ``y_i``, attending to
       the cache under ``m_i[j] = 1[j != i] * b_ij`` (leave-one-out, token dropout ``rho``); loss
       ``1/k sum_i (f(x_i | KV, m_i) - y_i)^2``; AdamW step on ``KV`` only.
    3. Return ``KV*`` (predict with the full mask).

    ``x_demo [B,k,D]``, ``y_demo [B,k]``; returns per-layer ``(K, V)`` each ``[B,H,k,d_h]`` (detached).
    ``track=(x_query, y_query)`` with a ``log`` dict records the query MSE along the way.
    """
    _check_hparams(steps, lr, token_dropout, grad_clip)
    _check_inputs(model, x_demo, y_demo, leave_one_out, generator)
    B, k, _ = x_demo.shape
    dev = x_demo.device
    with frozen(model):
        with torch.no_grad():
            kv0 = model.encode_demos(demo_tokens(x_demo, y_demo))
        params = [t.detach().clone().requires_grad_(True) for pair in kv0 for t in pair]
        qt = query_tokens(x_demo)
        base = loo_mask(B, k, leave_one_out, dev)

        def loss_fn():
            mask = base & dropout_mask((B, k, k), token_dropout, generator, dev)
            pred = model.predict(_pairs(params), qt, mask)
            return (pred - y_demo).pow(2).mean(-1)

        tr = None if track is None else (lambda: evaluate(model, _pairs(params), *track))
        optimise(params, loss_fn, steps, lr, grad_clip, log, tr)
    return [(K.detach(), V.detach()) for K, V in _pairs(params)]


# ----------------------------------------------------------------------------------------- CT-Prompt
def ct_prompt(model, x_demo: Tensor, y_demo: Tensor, *, steps: int = 100, lr: float = 1e-2,
              leave_one_out: bool = True, token_dropout: float = 0.05, grad_clip: float = 1.0,
              generator: torch.Generator | None = None, log: dict | None = None, track=None) -> KV:
    """CT-Prompt (spec Sec. 3.3): tune the demonstrations' input embeddings ``P`` (``P^(0) = E(c)``).

    With leave-one-out, each step re-encodes the context ``k`` times, copy ``i`` with pair ``i`` hidden from
    every token (``loo_encoding_mask``), and predicts ``y_i`` from ``x_i`` on copy ``i``: a batch of ``B*k``
    sequences of ``k`` tokens, the quadratic cost of the paper's Sec. 3. Returns the cache of the tuned
    embeddings (one full causal pass), per layer ``[B,H,k,d_h]``. The working set is estimated first
    and capped (:func:`check_work`): ``k = 600`` demonstrations of even one task would need gigabytes.
    """
    _check_hparams(steps, lr, token_dropout, grad_clip)
    _check_inputs(model, x_demo, y_demo, leave_one_out, generator)
    if leave_one_out:
        check_work(model, x_demo)
    B, k, D = x_demo.shape
    dev = x_demo.device
    with frozen(model):
        with torch.no_grad():
            P0 = model.embed(demo_tokens(x_demo, y_demo))
        P = P0.detach().clone().requires_grad_(True)
        if leave_one_out:
            enc = loo_encoding_mask(k, dev).repeat(B, 1, 1)                     # [B*k,k,k]
            qt = query_tokens(x_demo).reshape(B * k, 1, D + 2)
            base = loo_mask(B, k, True, dev).reshape(B * k, 1, k)
        else:
            qt, base = query_tokens(x_demo), loo_mask(B, k, False, dev)

        def loss_fn():
            if leave_one_out:
                h = P.unsqueeze(1).expand(B, k, k, P.shape[-1]).reshape(B * k, k, -1)
                kv = model.encode_demos_from_embeddings(h, enc)
            else:
                kv = model.encode_demos_from_embeddings(P)
            mask = base & dropout_mask(base.shape, token_dropout, generator, dev)
            pred = model.predict(kv, qt, mask).reshape(B, k)
            return (pred - y_demo).pow(2).mean(-1)

        tr = None if track is None else (lambda: evaluate(model, model.encode_demos_from_embeddings(P), *track))
        optimise([P], loss_fn, steps, lr, grad_clip, log, tr)
        with torch.no_grad():
            return [(K.detach(), V.detach()) for K, V in model.encode_demos_from_embeddings(P)]


def check_context(model, kv: KV, batch: int) -> None:
    """Public check of a context: ``n_layers`` pairs of ``[B,H,N,d_h]`` tensors for ``batch`` tasks."""
    check_kv(model, kv, batch)
