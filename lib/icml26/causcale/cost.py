"""The cost model of the causcale notebooks (:mod:`icml26.book.budget`).

Training items are one real step of :func:`~icml26.causcale.method.train_amortized` (``n_steps=1``) of each
variant on one task, its FLOPs and bytes scaled to the batch, with the task drawn once outside the step; drawing the batch (NumPy SCMs and the precision
prior, on the host whatever the device) is its own ``host`` item, timed, per training step. NOTEARS (SciPy,
host) is one timed dual-ascent round at the test cell's size, counted ``notears_max_iter`` times per graph
(an upper estimate: a fit may stop early). Notebook 1 (identities, memory and timing
sweeps of single layers) is a handful of forward passes: its fixed part only."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_preset, pick

from . import presets

_SMALL = 1      # a training step is measured on one task and its FLOPs and bytes scaled to the batch (CI time)


def _train(cfg, variant):
    def build():
        import numpy as np
        import torch

        from .method import train_amortized
        from .training import build_model, task_sampler

        torch.manual_seed(0)
        model = build_model(cfg, variant)
        batch = task_sampler(cfg)(np.random.default_rng(0), _SMALL)
        return lambda: train_amortized(model, lambda rng, b: batch, 1, batch_size=_SMALL, lr=cfg.lr, progress=False)
    return build


def _sample(cfg):
    def build():
        import numpy as np

        from .training import task_sampler

        sampler, rng = task_sampler(cfg), np.random.default_rng(0)
        return lambda: sampler(rng, cfg.batch_size)
    return build


def _notears(cfg):
    def build():
        from dataclasses import replace

        from . import experiments as ex

        task = ex.test_tasks(cfg, cfg.test_n)[0]
        one = replace(cfg, notears_max_iter=1)
        return lambda: ex._score_baseline("NOTEARS", task, one)
    return build


def notebooks(scale: str) -> dict:
    from .training import VARIANTS, variants_for

    cfg = gpu_preset(presets, scale)
    steps = {v: 0 for v in VARIANTS}
    trains = not pick(cfg, "use_checkpoint", False)     # a preset that loads the shipped checkpoint trains nothing
    for seed in tuple(pick(cfg, "train_seeds", (0,))) if trains else ():
        for v in variants_for(cfg, seed):
            steps[v] += pick(cfg, "steps_full", 0) if v == "full" else pick(cfg, "steps_ablation", 0)
    scale_b = pick(cfg, "batch_size", 1) / _SMALL
    nb2 = [Item(f"train step, {v}", n, _train(cfg, v), flop_scale=scale_b) for v, n in steps.items()]
    nb2.append(Item("task batch sampling (NumPy, host)", sum(steps.values()), _sample(cfg), host=True))
    if pick(cfg, "run_notears_grid", True):
        nb2.append(Item(f"NOTEARS round at n={pick(cfg, 'test_n', 10)} (SciPy, host)",
                        pick(cfg, "notears_graphs", 1) * pick(cfg, "notears_max_iter", 1), _notears(cfg), host=True))
    return {"01-tied-attention-and-cost": [], "02-learning-structure": nb2}
