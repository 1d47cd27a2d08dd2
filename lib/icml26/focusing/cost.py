"""The cost model of the focusing notebooks (:mod:`icml26.book.budget`), read defensively from the presets.

The steps are the chapter's ``gpu_check`` kernels (one ``full`` and one ``focus_zoom`` training step, forward
and backward, at the **gpu** preset's sizes): this model projects the gpu scale only. Notebook 3 (an estimate
of its runs, an upper bound): every run of ``cfg.runs`` taken as ``steps`` x (the tuning grid, learning
rate x TSDF share, on one seed + two edge probes on validation, a learning rate and a TSDF share outside
the grid + one run per paired training seed); a ``full`` run costs the full step, every other run the
focus_zoom step."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_check_step, gpu_preset, n_of, pick

from . import presets


def _kernel(name: str):
    return gpu_check_step(__package__, name)


def notebooks(scale: str) -> dict:
    if scale != "gpu":
        return {}
    cfg = gpu_preset(presets, scale)
    runs = tuple(pick(cfg, "runs", ("full",)))
    full = sum(1 for r in runs if r.startswith("full"))
    focus = len(runs) - full
    grid = n_of(pick(cfg, "lr_grid"), 1) * n_of(pick(cfg, "tsdf_grid", (1.0,)), 1)
    probes = 2                                          # lr and TSDF share at a grid edge (at most)
    per_run = pick(cfg, "steps", 0) * (grid + probes + n_of(pick(cfg, "train_seeds_runs", (0,)), 1))
    return {"03-training-a-sparse-vae": [
        Item(f"full step ({full} runs)", full * per_run, _kernel("focusing full step")),
        Item(f"focus_zoom step ({focus} runs)", focus * per_run, _kernel("focusing focus_zoom step"))]}
