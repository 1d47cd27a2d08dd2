"""The cost model of the special notebooks (:mod:`icml26.book.budget`).

Every federated run trains in stacked batches of :func:`~icml26.special.method.run_fdil_many` (up to 64
runs: variants x seeds, :func:`~icml26.special.experiments.run_variants`), so an item is one round of one
such batch (the R x N sampled clients' local epochs as one batched call, the server steps, the per-task
evaluation), measured as a real two-domain, two-rounds-per-task call (``per_call=4``: the partitioning and
set-up spread over its rounds) with the batch's number of runs. Counts are batches x rounds per task x
domains. Joint training (shards K times longer) is a batch of its own whose round is counted K times.
Notebook 3 (quadratic and toy theory, NumPy and small float64 tensors on the host) is not modelled
(16.6 s at book on one CPU core, data/timings.json): only its fixed seconds are declared."""

from __future__ import annotations

import math

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets

_MAX_RUNS = 64   # run_variants' max_runs


def _round(p, runs: int, method: str = "special"):
    def build():
        from . import experiments as ex
        from .method import run_fdil_many

        domains = ex.domains_for(p)[:2]
        cfgs = [ex.base_config(p, rounds_per_task=2, seed=s, method=method) for s in range(runs)]
        return lambda: run_fdil_many(domains, cfgs, log_every=1, progress=False)
    return build


def _batches(n_runs: int) -> int:
    return math.ceil(n_runs / _MAX_RUNS)


def _item(name, p, n_runs, domains, method="special", weight=1):
    runs = min(n_runs, _MAX_RUNS)
    rounds = _batches(n_runs) * p.rounds_per_task * domains * weight
    return Item(name, rounds, _round(p, runs, method), per_call=4, key=f"{method} x{runs}")


def notebooks(scale: str) -> dict:
    from . import experiments as ex

    p = gpu_preset(presets, scale)
    K = n_of(pick(p, "angles"), 1)
    variants = ex.method_grid(p)
    grids = ex.tuning_grids(p)
    n_cfg = sum(len(g.configs()) for g in grids.values())
    mixed = [v for v in ex.method_grid(p, task_lams=(0.1, 0.5)) if v.name in p.mixed_keep]
    nb1 = [_item("FedAvg round (seeds stacked)", p, p.seeds, K, "fedavg"),
           _item("FedAvg round, one run (noise domains)", p, 1, K, "fedavg")]
    nb2 = [_item("method grid round (stacked runs)", p, (len(variants) - 1) * p.seeds, K),
           _item("joint round (K x longer shards)", p, p.seeds, K, "fedavg", weight=K),
           _item("identity checks round (float64 runs)", p, 2 * p.ident_seeds, K),
           _item("validation tuning round (stacked configs)", p, n_cfg * p.val_seeds, K),
           _item("tuned / matched / neighbour runs round", p, 5 * p.seeds, K),
           _item("mixed sequence round", p, (len(mixed) - 1) * p.seeds, p.n_mixed),
           _item("mixed joint round", p, p.mixed_joint_seeds, p.n_mixed, "fedavg", weight=p.n_mixed)]
    return {"01-fdil-forgetting": nb1, "02-server-anchor": nb2, "03-theory": []}
