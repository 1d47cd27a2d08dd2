"""The cost model of the preconditioned-delta notebooks (:mod:`icml26.book.budget`).

Notebook 3's training is :func:`~icml26.precond_delta.experiments.mqar_benchmark`: per variant, its seeds
train together (:func:`~icml26.precond_delta.experiments.train_mqar_stacked`, one ``vmap``-ed step for all
seeds), so an item is one stacked step of one variant, measured over four real steps (``per_call=4``, the
loss read once) at the preset's batch, vocabulary and head width; counts are steps x variants, for the main
setting and each capacity-stressed setting (gpu only). Notebooks 1 and 2 (and notebook 3's recall curves and
rule comparisons) are single batched chunkwise calls over all seeds and step sizes (7.5 s and 8 s at book on
one CPU core, data/timings.json): no training loop, so only the fixed per-notebook seconds are declared."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets

_PER = 4    # stacked steps per measured call


def _stacked(cfg, variant: str, n_pairs: int, vocab: int, head_dim: int):
    def build():
        from . import experiments as ex

        seeds = tuple(pick(cfg, "mqar_seeds", (0,)))
        group = [ex.build_model(variant, vocab, head_dim=head_dim, seed=s) for s in seeds]
        return lambda: ex.train_mqar_stacked(group, _PER, pick(cfg, "mqar_batch", 32), n_pairs, vocab,
                                             pick(cfg, "mqar_lr", 1e-2), seeds=seeds, log_every=_PER)
    return build


def notebooks(scale: str) -> dict:
    cfg = gpu_preset(presets, scale)
    steps = pick(cfg, "mqar_steps", 0)
    seeds = n_of(pick(cfg, "mqar_seeds"), 1)
    nb3 = [Item(f"MQAR n={cfg.mqar_n_pairs} {v} stacked step ({seeds} seeds)", steps,
                _stacked(cfg, v, cfg.mqar_n_pairs, pick(cfg, "mqar_vocab", 128), cfg.mqar_head_dim), per_call=_PER)
           for v in cfg.mqar_variants]
    nb3 += [Item(f"MQAR n={n} {v} stacked step ({seeds} seeds)", steps,
                 _stacked(cfg, v, n, pick(cfg, "mqar_extra_vocab", 128), cfg.mqar_extra_head_dim), per_call=_PER)
            for n in pick(cfg, "mqar_extra_n_pairs", ()) for v in cfg.mqar_variants]
    return {"01-ttr-and-exact-preconditioning": [], "02-diagonal-preconditioner-and-chunking": [],
            "03-associative-recall": nb3}
