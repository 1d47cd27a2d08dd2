"""The cost model of the dynvla notebooks (:mod:`icml26.book.budget`).

The steps are the chapter's ``gpu_check`` kernels (one tokenizer training step, one SFT step of the dynamics
policy, one GRPO iteration of 16 contexts x 8 samples), which are built at the **gpu** preset's sizes: this
model projects the gpu scale only (smoke and book declare no items yet). Counts follow
:func:`~icml26.dynvla.experiments.tokenizer_comparison` and :func:`~icml26.dynvla.experiments.cot_experiment`:
tokenizer trainings x ``tok_steps``; SFT runs (the learning-rate grid for two modes, none and dynamics per
seed, the shuffled control on the first ``shuffled_seeds``, the extra modes on the first seed, at most
one probe beyond the grid's upper edge per tuned mode) x their steps; GRPO ``rft_iterations`` per GRPO seed
(the first ``rft_seeds``) and RFT mode (plus the unconstrained control on the first seed). An SFT step of another mode is taken as the dynamics one."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_check_step, gpu_preset, n_of, pick

from . import presets


def _kernel(name: str):
    return gpu_check_step(__package__, name)


def notebooks(scale: str) -> dict:
    if scale != "gpu":
        return {}
    cfg = gpu_preset(presets, scale)
    tok_runs = 2 + bool(pick(cfg, "ablate_bev", False))
    seed0 = pick(cfg, "seed", 0)
    tok_runs += len([s for s in tuple(pick(cfg, "probe_seeds", ())) if s != seed0])
    nb2 = [Item("tokenizer train step", tok_runs * pick(cfg, "tok_steps", 0), _kernel("tokenizer train step"))]
    n_train, batch = pick(cfg, "n_train", 1), pick(cfg, "sft_batch", 1)
    sft_steps = min(pick(cfg, "sft_max_steps", 10**9), pick(cfg, "sft_epochs", 1) * -(-n_train // batch))
    seeds = n_of(pick(cfg, "seeds"), 1)
    modes = set(("none", "dynamics") + tuple(pick(cfg, "modes", ())))
    shuffled = min(seeds, pick(cfg, "shuffled_seeds", seeds))
    sft_runs = 2 * n_of(pick(cfg, "sft_lr_grid"), 1) + 2 * seeds - 2 + shuffled + (len(modes) - 2) \
        + 2 * bool(pick(cfg, "probe_edge", False))          # at most one probe beyond the grid per tuned mode
    rft_seeds = min(seeds, pick(cfg, "rft_seeds", seeds))
    rft = rft_seeds * n_of(pick(cfg, "rft_modes"), 1) + bool(pick(cfg, "rft_control", False))
    nb3 = [Item("CoT tokenizer train step", pick(cfg, "cot_tok_steps", 0), _kernel("tokenizer train step")),
           Item(f"SFT step ({sft_runs} runs x {sft_steps} steps)", sft_runs * sft_steps, _kernel("SFT step (dynamics)")),
           Item(f"GRPO iteration ({rft} runs)", rft * pick(cfg, "rft_iterations", 0), _kernel("GRPO iteration (16 x 8)"))]
    return {"02-dynamics-tokenizer": nb2, "03-dynamics-cot": nb3}
