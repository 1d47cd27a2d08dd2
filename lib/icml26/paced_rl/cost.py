"""The cost model of the paced-rl notebooks (:mod:`icml26.book.budget`).

Every run is one call of :func:`~icml26.paced_rl.experiments.train` (one method, one seed, ``cfg.steps``
steps from the seed's warm start; runs are not batched across seeds), so an item is one training step of
one method, measured as a real run of ``eval_every`` steps (``per_call``: its one evaluation and the
diagnostics spread over them) at the preset's batch, group size and pool. Counts are steps x runs: the
learning-rate tuning (tuned methods x grid x validation seeds), the test runs (every method x seeds;
dynamic sampling half the steps), the no-clipping control and the two controls on the extra seeds. The
warm starts (``warm_steps`` per seed) are one item. Notebook 1 (enumerations over 6^6 outputs, a few
gradient steps) is not modelled: only its fixed seconds."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets

TUNED = ("grpo", "gfn_old", "paced", "grpo_zsel", "oracle", "grpo_oracle")   # notebook 2's tuned methods


def _run(cfg, method: str):
    per = max(1, pick(cfg, "eval_every", 10))

    def build():
        from . import experiments as ex

        task = ex.make_task(cfg)
        kw = dict(steps=per, batch_prompts=cfg.batch_prompts, group_size=cfg.group_size, beta=cfg.beta, tau=cfg.tau,
                  pool_factor=cfg.pool_factor, lr=cfg.lr, z_lr=cfg.z_lr, replay_capacity=cfg.replay_capacity,
                  replay_add=cfg.replay_add, replay_size=cfg.replay_size, eval_every=per, n_calib=cfg.n_calib,
                  bias_every=cfg.bias_every)
        policy = ex.warm_policy(cfg, task, 0)
        return lambda: ex.train(method, task, policy, seed=1000, **kw)
    return build, per


def _warm(cfg):
    def build():
        from dataclasses import replace

        from . import experiments as ex

        task = ex.make_task(cfg)
        small = replace(cfg, warm_steps=10)
        state = {"seed": 0}

        def step():
            state["seed"] += 1          # a new seed each call: warm_policy caches per (task, seed)
            return ex.warm_policy(small, task, 10_000 + state["seed"])
        return step
    return build


def notebooks(scale: str) -> dict:
    from . import experiments as ex

    cfg = gpu_preset(presets, scale)
    steps, seeds, extra = cfg.steps, n_of(cfg.seeds), n_of(cfg.extra_seeds)
    val = n_of(cfg.val_seeds) * n_of(cfg.lr_grid)
    items = [Item("warm start step (seeds + validation seeds)", (seeds + n_of(cfg.val_seeds)) * cfg.warm_steps,
                  _warm(cfg), per_call=10, warmup=1)]
    for method in dict.fromkeys((*ex.METHODS, *TUNED)):
        build, per = _run(cfg, method)
        runs = (val if method in TUNED else 0) + (seeds if method in ex.METHODS else 0)
        runs += seeds if method == "gfn_old" else 0                    # the no-clipping control
        runs += 2 * extra if method == "paced" else 0                  # replay-not-in-Z and whole-set pool
        n = runs * (max(1, steps // 2) if method == "dynamic_sampling" else steps)
        items.append(Item(f"{method} step ({runs} runs)", n, build, per_call=per))
    return {"01-partition-function": [], "02-paced-training": items}
