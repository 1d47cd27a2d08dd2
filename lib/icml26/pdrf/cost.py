"""The cost model of the pdrf notebooks (:mod:`icml26.book.budget`), read defensively from the presets.

Notebook 3 trains the kinds of ``cfg.single_runs`` (``det``, ``rf_v`` at gpu) and the control rows (RF-x
with ``cfg.control_t_eps``, PDRF with a still teacher when ``cfg.still_control``) on the first seed and
``rf_x`` and ``pdrf`` on every seed of ``cfg.seeds`` (:func:`~icml26.pdrf.experiments.model_study`), each
for ``cfg.steps`` steps; the step is the
chapter's ``gpu_check`` U-Net training step, built at the **gpu** preset's sizes, so this model projects the
gpu scale only (smoke and book declare no items yet). Forecasting the test set is one 5-step sampling of the
``gpu_check`` batch per ``eval_batch`` chunk and generative model. Notebook 1 trains the toy flow twice for
``toy_steps``: one step of :func:`~icml26.pdrf.experiments.train_toy` (``toy_steps = 1``). Notebook 2 trains
the learning-rate grid (:func:`~icml26.pdrf.experiments.lr_grid_study`: the U-Net and RF-x at each rate of
``cfg.lr_grid`` on the first seed, sampling the validation set, then RF-x's ``cfg.lr_confirm_top`` best
rates again on each of ``cfg.lr_confirm_seeds``). Notebook 4 trains PDRF's learning-rate grid (the same rates
and the same confirmation runs) and the teacher sweep
(:func:`~icml26.pdrf.experiments.teacher_sweep` with ``test=False, confirm=True``: one model per weight of
``cfg.ctrl_lambdas`` on ``cfg.tune_seed``, then the best weights on ``cfg.lr_confirm_seeds``, sampling the
validation set). Notebook 5 trains the teacher controls
(:func:`~icml26.pdrf.experiments.teacher_controls`: per seed of ``cfg.ctrl_seeds``, RF-x and the tuned weight,
the still teacher with ``cfg.ctrl_still``, the oracle teacher with ``cfg.ctrl_oracle``, RF-v and RF-v + teacher
with ``cfg.ctrl_rf_v``, each for ``cfg.ctrl_steps`` steps (else ``cfg.steps``), sampling ``cfg.ctrl_n_test`` test sequences)"""

from __future__ import annotations

from dataclasses import replace

from icml26.book.budget import Item, gpu_check_step, gpu_preset, n_of, pick

from . import presets


def _kernel(name: str):
    return gpu_check_step(__package__, name)


def _toy(cfg, param):
    def build():
        from .experiments import train_toy

        one = replace(cfg, toy_steps=1)
        return lambda: train_toy(param, one, 0, None, progress=False)
    return build


def notebooks(scale: str) -> dict:
    if scale != "gpu":
        return {}
    cfg = gpu_preset(presets, scale)
    seeds = n_of(pick(cfg, "seeds"), 1)
    singles = n_of(pick(cfg, "single_runs"), 2)
    controls = int(pick(cfg, "control_t_eps") is not None) + int(bool(pick(cfg, "still_control", False)))
    runs = singles + 2 * seeds + controls
    chunks = -(-pick(cfg, "n_test", 1) // max(pick(cfg, "eval_batch", 1), 1))
    n_sweep = n_of(pick(cfg, "ctrl_lambdas"), 0)
    per_seed = (2 + int(bool(pick(cfg, "ctrl_still", False))) + int(bool(pick(cfg, "ctrl_oracle")))
                + 2 * int(bool(pick(cfg, "ctrl_rf_v"))))
    n_ctrl = n_of(pick(cfg, "ctrl_seeds"), 0) * per_seed
    val_chunks = -(-pick(cfg, "ctrl_n_val", 0) // max(pick(cfg, "eval_batch", 1), 1))
    ctrl_chunks = -(-pick(cfg, "ctrl_n_test", 1) // max(pick(cfg, "eval_batch", 1), 1))
    n_rates = n_of(pick(cfg, "lr_grid", ()), 0)
    confirm_kinds = pick(cfg, "lr_confirm_kinds", ())
    n_confirm = n_of(pick(cfg, "lr_confirm_seeds", ()), 0) * pick(cfg, "lr_confirm_top", 0)
    # NB2: the U-Net and RF-x per rate, then RF-x's confirmation runs
    n_lr = 2 * n_rates + n_confirm * ("rf_x" in confirm_kinds)
    nb2 = [Item(f"U-Net train step ({n_lr} learning-rate grid models)", n_lr * pick(cfg, "steps", 0),
                _kernel("pdrf train step")),
           Item("5-step sampling of one validation chunk", val_chunks * n_lr, _kernel("pdrf 5-step sampling"))]
    # NB4: PDRF per rate (+ confirm), per weight (+ the best weights' confirmation runs)
    n4 = n_rates + n_confirm * ("pdrf" in confirm_kinds) + n_sweep + n_confirm
    nb4 = [Item(f"U-Net train step ({n4} PDRF learning-rate and teacher-weight models)", n4 * pick(cfg, "steps", 0),
                _kernel("pdrf train step")),
           Item("5-step sampling of one validation chunk", val_chunks * n4, _kernel("pdrf 5-step sampling"))]
    ctrl_steps = pick(cfg, "ctrl_steps", None)
    nb5 = [Item(f"U-Net train step ({n_ctrl} teacher-control models)",
                n_ctrl * (pick(cfg, "steps", 0) if ctrl_steps is None else ctrl_steps),
                _kernel("pdrf train step")),
           Item("5-step sampling of one test chunk", ctrl_chunks * n_ctrl, _kernel("pdrf 5-step sampling"))]
    nb1 = [Item(f"toy flow step ({p}-prediction)", pick(cfg, "toy_steps", 0), _toy(cfg, p)) for p in ("v", "x")]
    nb3 = [Item(f"U-Net train step ({runs} models)", runs * pick(cfg, "steps", 0), _kernel("pdrf train step")),
           Item("5-step sampling of one test chunk", chunks * (runs - 1), _kernel("pdrf 5-step sampling"))]
    return {"01-data-space-flow": nb1, "02-radar-nowcasting": nb2, "03-pdrf-vs-baselines": nb3,
            "04-the-teacher-weight": nb4, "05-what-the-teacher-contributes": nb5}
