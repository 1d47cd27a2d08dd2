"""The cost model of the syngr notebooks (:mod:`icml26.book.budget`), read defensively from the presets.

The step is the chapter's ``gpu_check`` SynGR training step and its beam search of 256 users, built at the
**gpu** preset's sizes: this model projects the gpu scale only. Notebook 2 (an estimate of its runs): three
methods and the preset's ablations for every seed of ``syngr_seeds``, GR-fused at 3x epochs per seed when
``matched_compute``, and the learning-rate grid for three methods on one seed; every run takes
``epochs`` x ``n_users / batch_size`` steps and a beam search of ``n_eval`` users every ``eval_every`` epochs."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_check_step, gpu_preset, n_of, pick

from . import presets

_METHODS = 3


def _kernel(name: str):
    return gpu_check_step(__package__, name)


def notebooks(scale: str) -> dict:
    if scale != "gpu":
        return {}
    cfg = gpu_preset(presets, scale)
    seeds = n_of(pick(cfg, "syngr_seeds"), 1)
    epochs = pick(cfg, "epochs", 1)
    run_epochs = epochs * ((_METHODS + n_of(pick(cfg, "ablations"), 0)) * seeds
                           + 3 * seeds * bool(pick(cfg, "matched_compute", False))
                           + _METHODS * n_of(pick(cfg, "lr_grid"), 1))
    per_epoch = -(-pick(cfg, "n_users", 1) // max(pick(cfg, "batch_size", 1), 1))
    evals = run_epochs // max(pick(cfg, "eval_every", 1), 1)
    return {"02-syngr-vs-gr": [
        Item(f"train step ({run_epochs} epochs x {per_epoch})", run_epochs * per_epoch, _kernel("syngr train step")),
        Item(f"beam search of {pick(cfg, 'n_eval', 256)} users ({evals} evaluations)", evals,
             _kernel("beam search (256 users)"), flop_scale=pick(cfg, "n_eval", 256) / 256)]}
