"""The cost model of the syngr notebooks (:mod:`icml26.book.budget`), read defensively from the presets.

The step is the chapter's ``gpu_check`` SynGR training step and its beam search of 256 users, built at the
**gpu** preset's sizes: this model projects the gpu scale only. Notebook 2 (an estimate of its runs): three
methods and the preset's ablations for every seed of ``syngr_seeds``, GR-fused at 3x epochs per seed when
``matched_compute``, and the learning-rate grid for three methods on one seed; every run takes
``epochs`` x ``n_users / batch_size`` steps and a beam search of ``n_eval`` users every ``eval_every`` epochs.
Notebook 3: GR-text and GR-fused, each over the learning-rate grid on the tuning seed (no tuning run for a
grid of one; validation only) and then on every seed of ``seeds`` (``gen_epochs`` of ``n_users / gen_batch_size``
steps each, validation every ``gen_eval_every``); a GR step runs one view where SynGR's runs three, so its step is
counted as a third of the measured SynGR step; four test beam searches per tested run and per seed of the
untrained control. Notebook 4: the same protocol for GR-fused and the no-style control, without the untrained
control."""

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
    # notebook 2 trains every method at the preset's lr (reported, untuned): no tuning runs there
    run_epochs = epochs * ((_METHODS + n_of(pick(cfg, "ablations"), 0)) * seeds
                           + 3 * seeds * bool(pick(cfg, "matched_compute", False)))
    per_epoch = -(-pick(cfg, "n_users", 1) // max(pick(cfg, "batch_size", 1), 1))
    evals = run_epochs // max(pick(cfg, "eval_every", 1), 1)
    gen_epochs = pick(cfg, "gen_epochs", epochs)
    gen_per_epoch = -(-pick(cfg, "n_users", 1) // max(pick(cfg, "gen_batch_size", pick(cfg, "batch_size", 1)), 1))
    n_lr, n_seeds = n_of(pick(cfg, "lr_grid"), 1), n_of(pick(cfg, "seeds"), 1)
    val_evals = gen_epochs // max(pick(cfg, "gen_eval_every", 1), 1)

    def gen_items(untrained: bool) -> list:
        tune_runs = 2 * n_lr if n_lr > 1 else 0
        gen_runs = tune_runs + 2 * n_seeds
        gen_evals = gen_runs * val_evals + 2 * n_seeds * 4 + 4 * n_seeds * untrained
        return [Item(f"GR train step ({gen_runs} runs x {gen_epochs} epochs x {gen_per_epoch})",
                     gen_runs * gen_epochs * gen_per_epoch, _kernel("syngr train step"), flop_scale=1 / 3),
                Item(f"beam search of {pick(cfg, 'n_eval', 256)} users ({gen_evals} evaluations)", gen_evals,
                     _kernel("beam search (256 users)"), flop_scale=pick(cfg, "n_eval", 256) / 256)]

    return {"03-gr-text-vs-gr-fused": gen_items(True), "04-no-style-control": gen_items(False),
            "02-syngr-vs-gr": [
        Item(f"train step ({run_epochs} epochs x {per_epoch})", run_epochs * per_epoch, _kernel("syngr train step")),
        Item(f"beam search of {pick(cfg, 'n_eval', 256)} users ({evals} evaluations)", evals,
             _kernel("beam search (256 users)"), flop_scale=pick(cfg, "n_eval", 256) / 256)]}
