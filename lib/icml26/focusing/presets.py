"""Scale presets for the focusing chapter (spec Sec. 7.2, 3.10). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class FocusingPreset:
    seed: int = 0
    res_lat: int = 16                 # latent grid; the fine grid is 2 x res_lat
    H: int = 48                       # training / analysis image size (square)
    n_points: int = 20000             # surface samples per shape (encoder input, fine occupancy)
    n_uv: int = 40                    # parametric grid of the procedural meshes
    # -- notebook 1: fitting a field from pictures ------------------------------------------------
    fit_kind: str = "torus"
    fit_steps: int = 120
    fit_eval: int = 8                 # held-out views for hole fraction
    fit_lr: float = 1.5e-2
    watertight_eps: tuple = (0.005, 0.01, 0.02, 0.04)
    watertight_n: int = 100_000       # points per surface (in-plane spacing well below the smallest eps)
    # -- notebook 2: carving, zooming and training ------------------------------------------------
    test_kinds: tuple = ("sphere", "torus", "superellipsoid", "capsule", "two_blobs", "bumpy_sphere",
                         "open_cylinder", "bowl", "wavy_sheet", "cup", "mobius", "saddle")
    test_seeds: tuple = (100,)
    train_seeds: tuple = (0, 1)
    views: int = 16                   # random views per test shape (counts, coverage)
    coverage_views: int = 2           # views per shape for the (slower) render-coverage study
    budget: int = 96                  # zoom band [budget/2, budget] latent voxels
    zeta_max: float = 8.0
    fsv_alphas: tuple = (0.1, 0.3)
    sphere_dists: tuple = (1.5, 2.0, 3.0, 5.0)
    sphere_views: int = 8             # view directions per distance (the same at every distance)
    width: int = 32
    blocks: int = 1
    steps: int = 50                   # book CPU budget (300 s on one thread); gpu trains 600
    lr: float = 5e-3                  # runs outside the tuned comparison use the lr tuned for focus_zoom
    lr_grid: tuple = (2.5e-3, 5e-3, 1e-2)  # the same grid for full and focus_zoom (tuned on val_seeds)
    tsdf_grid: tuple = (0.1, 1.0)     # share of the steps with the TSDF depth term, tuned with lr
    tsdf_frac: float = 1.0            # TSDF share of runs outside the tuned comparison (1.0: every step)
    val_seeds: tuple = (50,)          # validation shapes (tuning only), disjoint from train and test
    eval_views: int = 1               # held-out views per test shape (render depth error, hole fraction)
    runs: tuple = ("full", "focus_zoom", "focus_zoom, whole-grid context")
    train_seeds_runs: tuple = (0, 1, 2, 3, 4)  # paired training seeds of the runs in multi_seed_runs
    multi_seed_runs: tuple = ("full", "focus_zoom")
    context_seeds: int = 3            # training seeds of the context control (the first ones; book: 2, for CPU time)
    snap_every: int = 5               # weight snapshots (equal-decoded-voxels comparison: full needs ~8 steps)
    mem_views: int = 4                # views (shapes) per scheme in the activation-memory count
    rss_probe: bool = True            # CPU peak RSS per scheme in a fresh subprocess

    def dry_run(self) -> FocusingPreset:
        """Loop counts cut (steps, views, seeds, shape lists, eps grid), sizes kept."""
        return replace(self, fit_steps=min(self.fit_steps, 4), fit_eval=1, steps=min(self.steps, 2), views=2,
                       sphere_views=2, test_seeds=self.test_seeds[:1], lr_grid=self.lr_grid[:1],
                       tsdf_grid=self.tsdf_grid[:1],
                       context_seeds=min(self.context_seeds, 1), eval_views=1,
                       snap_every=1, mem_views=1,
                       runs=tuple(r for r in self.runs if r in ("full", "focus_zoom", "focus_zoom, whole-grid context")),
                       coverage_views=1, test_kinds=self.test_kinds[:2], train_seeds=self.train_seeds[:1],
                       train_seeds_runs=self.train_seeds_runs[:1], watertight_eps=self.watertight_eps[:2],
                       sphere_dists=self.sphere_dists[:3], rss_probe=False)


PRESETS = {
    "smoke": FocusingPreset(res_lat=8, H=32, n_points=4000, n_uv=24, fit_steps=16, fit_eval=2,
                            test_kinds=("sphere", "torus", "bowl", "wavy_sheet"), train_seeds=(0,),
                            # steps 12 -> 8 (stop 51): notebook 3 at smoke sat above CI's 20 s
                            views=8, coverage_views=1, budget=24, steps=8, width=16, rss_probe=False, sphere_views=2,
                            runs=("full", "focus_zoom", "focus_zoom, whole-grid context"), snap_every=1,
                            mem_views=1, train_seeds_runs=(0, 1), lr_grid=(5e-3,), context_seeds=1, eval_views=1,
                            sphere_dists=(2.0, 3.0, 5.0), watertight_eps=(0.01, 0.02), watertight_n=20_000),
    "book": FocusingPreset(context_seeds=2),
    "gpu": FocusingPreset(res_lat=32, H=128, n_points=60000, n_uv=64, fit_steps=400, fit_eval=16, sphere_views=16,
                          test_seeds=(100, 101), train_seeds=tuple(range(8)), views=32, coverage_views=4,
                          budget=384, width=64, blocks=2, steps=600, lr=2e-3, lr_grid=(1e-3, 2e-3, 4e-3), snap_every=25,
                          # steps 1500 -> 600: with the TSDF share tuned beside the learning rate (6 configurations
                          # + 2 edge probes per method) the cost model projected 616 s on one H100 at 1500 steps,
                          # 252 s at 600 (make budget)
                          eval_views=4, runs=("full", "focus_zoom", "focus_zoom, whole-grid context", "fsv"),
                          rss_probe=False),
}


def preset(scale: str | None = "book") -> FocusingPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
