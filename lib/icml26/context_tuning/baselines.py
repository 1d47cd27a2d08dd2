"""The paper's baselines (spec Sec. 3.2) on the tiny in-context regressor.

- zero-shot and ICL (no optimisation);
- Prompt Tuning and Prefix Tuning: ``m`` trainable input vectors / per-layer key-value pairs,
  initialised from *task-irrelevant* demonstration-like tokens (``x ~ N(0,I)``, ``y ~ N(0,1)``), weights
  frozen, trained on all ``k`` demonstrations;
- test-time training (TTT, Akyurek et al. 2024): the *weights* trained on the ``k`` leave-one-out prompts
  ``(c_{-i}; x_i -> y_i)``; full-weight per-task copies (the spec allows this instead of LoRA), batched
  over tasks with ``torch.func.vmap``;
- TTT followed by CT-KV;
- the ridge oracle (Bayes-optimal for a Gaussian prior on ``w``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.func import functional_call, vmap

from .method import (
    _check_generator,
    _check_hparams,
    _check_inputs,
    _pairs,
    check_work,
    ct_kv,
    dropout_mask,
    evaluate,
    frozen,
    loo_encoding_mask,
    loo_mask,
    optimise,
)
from .model import KV, check_demos, demo_tokens, model_dtype, query_tokens


# ----------------------------------------------------------------------------------------- no optimisation
def icl_predict(model, x_demo: Tensor, y_demo: Tensor, x_query: Tensor) -> Tensor:
    """In-context learning: one causal pass over the demonstrations, then the queries. ``[B,q]``."""
    if not isinstance(x_query, Tensor):
        raise TypeError(f"x_query must be a torch.Tensor, got {type(x_query).__name__}")
    check_demos(x_demo, y_demo, model.dim, x_query, dtype=model_dtype(model))
    with torch.no_grad():
        return model.predict(model.encode_demos(demo_tokens(x_demo, y_demo)), query_tokens(x_query))


def empty_context(model, batch: int, device=None) -> KV:
    """A cache with no positions (zero-shot): per layer ``[B,H,0,d_h]`` (in the model's dtype)."""
    z = torch.zeros(batch, model.n_heads, 0, model.d_head, device=device, dtype=model_dtype(model))
    return [(z, z) for _ in range(model.n_layers)]


def zero_shot_predict(model, x_query: Tensor) -> Tensor:
    """Zero-shot: each query attends only to itself. ``[B,q]``."""
    if not isinstance(x_query, Tensor) or x_query.dim() != 3 or x_query.shape[-1] != model.dim \
            or x_query.shape[0] < 1:
        raise ValueError(f"x_query must be a [B,q,{model.dim}] tensor with B >= 1")
    if x_query.dtype != model_dtype(model):
        raise TypeError(f"x_query is {x_query.dtype} but the model's weights are {model_dtype(model)}; "
                        f"cast with .to({model_dtype(model)})")
    if not bool(torch.isfinite(x_query).all()):
        raise ValueError("x_query must be finite")
    with torch.no_grad():
        return model.predict(empty_context(model, x_query.shape[0], x_query.device), query_tokens(x_query))


def ridge_predict(x_demo: Tensor, y_demo: Tensor, x_query: Tensor, lam: float) -> Tensor:
    """The oracle: ridge regression on the scaled inputs ``A = X / sqrt(D)``,
    ``w_hat = (A^T A + lam I)^{-1} A^T y`` (the posterior mean for ``w ~ N(0, I)``, noise variance ``lam``),
    batched with ``torch.linalg.solve``. Returns ``[B,q]``."""
    if not isinstance(x_query, Tensor):
        raise TypeError(f"x_query must be a torch.Tensor, got {type(x_query).__name__}")
    check_demos(x_demo, y_demo, None, x_query)
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not math.isfinite(lam) or lam <= 0:
        raise ValueError(f"lam must be a finite number > 0, got {lam!r}")
    D = x_demo.shape[-1]
    A = x_demo / math.sqrt(D)
    G = A.transpose(-1, -2) @ A + lam * torch.eye(D, dtype=A.dtype, device=A.device)
    w = torch.linalg.solve(G, (A.transpose(-1, -2) @ y_demo.unsqueeze(-1))).squeeze(-1)
    return torch.einsum("bqd,bd->bq", x_query / math.sqrt(D), w)


# ----------------------------------------------------------------------------------------- prefix / prompt
def _check_virtual(n_virtual) -> None:
    if isinstance(n_virtual, bool) or not isinstance(n_virtual, int) or n_virtual < 1:
        raise ValueError(f"n_virtual must be an int >= 1, got {n_virtual!r}")


def irrelevant_tokens(batch: int, m: int, dim: int, generator=None, device=None) -> Tensor:
    """``m`` demonstration-like tokens that carry no information about the task: ``[B,m,D+2]``."""
    _check_generator(generator)
    x = torch.randn(batch, m, dim, generator=generator)
    y = torch.randn(batch, m, generator=generator)
    return demo_tokens(x, y).to(device)


def prefix_tuning(model, x_demo: Tensor, y_demo: Tensor, *, n_virtual: int = 16, steps: int = 100,
                  lr: float = 1e-2, grad_clip: float = 1.0, generator: torch.Generator | None = None,
                  log: dict | None = None, track=None) -> KV:
    """Prefix Tuning (spec Sec. 3.2): trainable per-layer ``K_l, V_l`` of ``n_virtual`` positions, initialised
    as the cache of irrelevant tokens, trained on ``1/k sum_i (f(x_i | KV) - y_i)^2``. Returns the cache."""
    _check_hparams(steps, lr, 0.0, grad_clip)
    _check_virtual(n_virtual)
    _check_inputs(model, x_demo, y_demo, False, generator)
    B, k, _ = x_demo.shape
    dev = x_demo.device
    with frozen(model):
        with torch.no_grad():
            kv0 = model.encode_demos(irrelevant_tokens(B, n_virtual, model.dim, generator, dev))
        params = [t.detach().clone().requires_grad_(True) for pair in kv0 for t in pair]
        qt = query_tokens(x_demo)

        def loss_fn():
            return (model.predict(_pairs(params), qt) - y_demo).pow(2).mean(-1)

        tr = None if track is None else (lambda: evaluate(model, _pairs(params), *track))
        optimise(params, loss_fn, steps, lr, grad_clip, log, tr)
    return [(K.detach(), V.detach()) for K, V in _pairs(params)]


def prompt_tuning(model, x_demo: Tensor, y_demo: Tensor, *, n_virtual: int = 16, steps: int = 100,
                  lr: float = 1e-2, grad_clip: float = 1.0, generator: torch.Generator | None = None,
                  log: dict | None = None, track=None) -> KV:
    """Prompt Tuning (spec Sec. 3.2): ``n_virtual`` trainable input embeddings, initialised as the
    embeddings of irrelevant tokens, re-encoded (causally) every step. Returns the final cache."""
    _check_hparams(steps, lr, 0.0, grad_clip)
    _check_virtual(n_virtual)
    _check_inputs(model, x_demo, y_demo, False, generator)
    B, k, _ = x_demo.shape
    dev = x_demo.device
    with frozen(model):
        with torch.no_grad():
            P0 = model.embed(irrelevant_tokens(B, n_virtual, model.dim, generator, dev))
        P = P0.detach().clone().requires_grad_(True)
        qt = query_tokens(x_demo)

        def loss_fn():
            kv = model.encode_demos_from_embeddings(P)
            return (model.predict(kv, qt) - y_demo).pow(2).mean(-1)

        tr = None if track is None else (lambda: evaluate(model, model.encode_demos_from_embeddings(P), *track))
        optimise([P], loss_fn, steps, lr, grad_clip, log, tr)
        with torch.no_grad():
            return [(K.detach(), V.detach()) for K, V in model.encode_demos_from_embeddings(P)]


# ----------------------------------------------------------------------------------------- TTT
class PerTaskModel:
    """A frozen base architecture with one set of weights per task (leading dimension ``B`` on every
    tensor of ``params``). Offers the model's interface (``encode_demos``, ``predict``, ``embed``) with
    task ``b`` of every input run through weights ``b`` (``vmap`` over ``functional_call``)."""

    def __init__(self, base, params: dict[str, Tensor]):
        self.base, self.params = base, params
        for a in ("dim", "n_layers", "n_heads", "d_head", "max_demos"):
            setattr(self, a, getattr(base, a))

    def parameters(self):
        return iter(self.params.values())

    def _call(self, mode: str, *args):
        def one(p, *a):
            out = functional_call(self.base, p, tuple(_unsq(x) for x in a), {"mode": mode})
            return _sq(out)
        return vmap(one)(self.params, *args)

    def encode_demos(self, demo_tok: Tensor, demo_mask: Tensor | None = None) -> KV:
        if demo_mask is not None:
            return self._call("encode", demo_tok, demo_mask)
        return self._call("encode", demo_tok)

    def predict(self, kv: KV, query_tok: Tensor, prefix_mask: Tensor | None = None) -> Tensor:
        if prefix_mask is None:
            N = kv[0][0].shape[-2]
            prefix_mask = torch.ones(query_tok.shape[0], query_tok.shape[1], N, dtype=torch.bool,
                                     device=query_tok.device)
        return self._call("predict", list(kv), query_tok, prefix_mask)


def _unsq(x):
    if isinstance(x, Tensor):
        return x.unsqueeze(0)
    return type(x)(_unsq(t) for t in x)


def _sq(x):
    if isinstance(x, Tensor):
        return x.squeeze(0)
    return [tuple(_sq(t) for t in pair) for pair in x] if isinstance(x, list) else type(x)(_sq(t) for t in x)


def test_time_training(model, x_demo: Tensor, y_demo: Tensor, *, steps: int = 50, lr: float = 1e-4,
                       grad_clip: float = 1.0, log: dict | None = None, track=None) -> PerTaskModel:
    """Test-time training with full weights (spec Sec. 3.2, book choice: no LoRA): per task, a copy of
    all weights trained on the ``k`` leave-one-out prompts ``(c_{-i}; x_i -> y_i)`` (each a re-encoding with
    pair ``i`` hidden) by AdamW with a cosine schedule and per-task clipping. All tasks train at once
    (``vmap``); the original model is untouched. Returns a :class:`PerTaskModel` (predict with ICL)."""
    _check_hparams(steps, lr, 0.0, grad_clip)
    _check_inputs(model, x_demo, y_demo, True)
    check_work(model, x_demo)
    B, k, D = x_demo.shape
    dev = x_demo.device
    params = {n: p.detach().unsqueeze(0).repeat(B, *([1] * p.dim())).clone().requires_grad_(True)
              for n, p in model.named_parameters()}
    enc = loo_encoding_mask(k, dev)                                   # [k,k,k]
    pm = loo_mask(1, k, True, dev).reshape(k, 1, k)
    dt = demo_tokens(x_demo, y_demo).unsqueeze(1).expand(B, k, k, D + 2)   # k copies per task
    qt = query_tokens(x_demo).reshape(B, k, 1, D + 2)

    def one(p, dt_b, qt_b, y_b):
        pred = functional_call(model, p, (dt_b, qt_b, pm, enc), {"mode": "icl"}).squeeze(-1)
        return (pred - y_b).pow(2).mean()

    with frozen(model):
        ttt = PerTaskModel(model, params)

        def loss_fn():
            return vmap(one)(params, dt, qt, y_demo)

        tr = None
        if track is not None:
            def tr():
                kv = ttt.encode_demos(demo_tokens(x_demo, y_demo))
                return evaluate(ttt, kv, *track)
        optimise(list(params.values()), loss_fn, steps, lr, grad_clip, log, tr)
    return PerTaskModel(model, {n: p.detach() for n, p in params.items()})


def ttt_then_ct_kv(model, x_demo: Tensor, y_demo: Tensor, *, ttt_steps: int = 50, ttt_lr: float = 1e-4,
                   **ct_kw) -> tuple[PerTaskModel, KV]:
    """TTT followed by CT-KV on the adapted weights (the paper's best combination). Returns the adapted
    per-task model and its tuned cache."""
    adapted = test_time_training(model, x_demo, y_demo, steps=ttt_steps, lr=ttt_lr)
    return adapted, ct_kv(adapted, x_demo, y_demo, **ct_kw)


__all__ = ["PerTaskModel", "dropout_mask", "empty_context", "icl_predict", "irrelevant_tokens", "prefix_tuning",
           "prompt_tuning", "ridge_predict", "test_time_training", "ttt_then_ct_kv", "zero_shot_predict"]
