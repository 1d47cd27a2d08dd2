"""The cost model of the context-tuning notebooks (:mod:`icml26.book.budget`).

Every method adapts a batch of tasks at once (the conditions with the same ``k`` pooled), so an item is one
optimiser step of :func:`~icml26.context_tuning.experiments.run_method` on the pooled batch the notebook
uses, measured as one real call of four steps (``per_call=4``: the initial pass and the query evaluation
spread over them) with the shipped pretrained model. Counts are optimiser steps: validation runs every
configuration of a method's grid from scratch (learning rates x the sum of the step grid, per group of
conditions), test runs are seeds x groups x the chosen step count, taken at the top of the step grid (an upper
bound). Notebook 1's k sweep is counted as the test runs of CT-KV and its no-LOO row at each k; the ICL
curves, the timing table and the figures are left out (forward passes and a few repeated steps)."""

from __future__ import annotations

from dataclasses import replace

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets

_PER = 4


def _step(cfg, method: str, n_tasks: int, n_conditions: int, **kw):
    def build():
        import torch

        from . import experiments as ex
        from .model import load_pretrained

        model = load_pretrained(setting="book", allow_train=False)
        conds = list(ex.CONDITIONS)[:n_conditions]
        t, _ = ex._pooled({c: ex.tasks_for(c, cfg, 0, n_tasks=n_tasks) for c in conds})
        adapted = None
        if method == "ttt + ct-kv":
            adapted = ex.run_method("ttt", model, t, cfg, None, ttt_steps=1)["adapted"]
        extra = {"ttt_steps": _PER} if method == "ttt" else {"steps": _PER}
        return lambda: ex.run_method(method, model, t, cfg, torch.Generator().manual_seed(0), adapted=adapted,
                                     **extra, **kw)
    return build


def notebooks(scale: str) -> dict:
    cfg = gpu_preset(presets, scale)
    steps = tuple(pick(cfg, "step_grid", (100,)))
    top, per_lr = max(steps), sum(steps)
    lrs = dict(cfg.lr_grids)
    seeds1, seeds2 = n_of(cfg.task_seeds), n_of(cfg.seeds_quadratic)
    variants = ["ct-kv", "ct-kv (no loo)", "ct-kv (no dropout)"]
    nb1 = [Item(f"{m} step, validation (2 groups of n_val)", 2 * n_of(lrs.get(m, cfg.lrs)) * per_lr,
                _step(cfg, m, cfg.n_val, 4), per_call=_PER, key=f"{m} val") for m in variants]
    nb1 += [Item(f"{m} step, test (seeds x 2 groups)", 2 * seeds1 * top, _step(cfg, m, cfg.n_tasks, 4),
                 per_call=_PER, key=f"{m} test") for m in variants]
    nb1 += [Item(f"{m} step, k sweep (seeds x k)", seeds1 * n_of(cfg.k_sweep) * top, _step(cfg, m, cfg.n_tasks, 1),
                 per_call=_PER) for m in ("ct-kv", "ct-kv (no loo)")]
    q = replace(cfg, lr_grids=cfg.lr_grids_quadratic)
    qlrs = dict(q.lr_grids)
    cheap = ["prompt tuning", "ct-kv (no loo, no dropout)", "ct-kv"]
    nb2 = [Item(f"{m} step, validation", n_of(qlrs.get(m, cfg.lrs)) * per_lr, _step(q, m, cfg.n_val_linear, 3),
                per_call=_PER) for m in cheap]
    nb2 += [Item(f"prefix tuning step (m={m}), validation", n_of(cfg.prefix_lrs) * top,
                 _step(q, "prefix tuning", cfg.n_val_linear, 3, n_virtual=m), per_call=_PER)
            for m in cfg.prefix_lengths]
    nb2 += [Item(f"{m} step, validation", n_of(qlrs.get(m, cfg.lrs)) * per_lr, _step(q, m, cfg.n_val_quadratic, 3),
                 per_call=_PER) for m in ("ct-prompt", "ttt", "ttt + ct-kv")]
    tuned = cheap + ["prefix tuning", "ct-prompt", "ttt", "ttt + ct-kv", "prefix tuning (m=16)"]
    nb2 += [Item(f"{m} step, test (seeds)", seeds2 * top,
                 _step(q, "prefix tuning" if m.startswith("prefix") else m, cfg.n_tasks_quadratic, 3,
                       **({"n_virtual": max(cfg.prefix_lengths)} if m == "prefix tuning" else {})),
                 per_call=_PER) for m in tuned]
    return {"01-icl-and-ct-kv": nb1, "02-methods-compared": nb2}
