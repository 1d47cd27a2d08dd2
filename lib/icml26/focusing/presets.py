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
    steps: int = 120
    lr: float = 5e-3
    runs: tuple = ("full", "fsv", "focus", "focus_zoom", "focus_zoom, no warm-up")  # experiments.RUNS
    train_seeds_runs: tuple = (0, 1, 2)  # training seeds of the runs in multi_seed_runs (others: the first)
    multi_seed_runs: tuple = ("full", "fsv", "focus_zoom")
    snap_every: int = 10              # weight snapshots (equal-voxel-budget comparison, early holes)
    mem_views: int = 4                # views (shapes) per scheme in the activation-memory count
    rss_probe: bool = True            # CPU peak RSS per scheme in a fresh subprocess

    def dry_run(self) -> FocusingPreset:
        """Loop counts cut (steps, views, seeds, shape lists, eps grid), sizes kept."""
        return replace(self, fit_steps=min(self.fit_steps, 4), fit_eval=1, steps=min(self.steps, 2), views=2,
                       sphere_views=2, test_seeds=self.test_seeds[:1],
                       snap_every=1, mem_views=1, runs=tuple(r for r in self.runs if r in ("full", "focus_zoom")),
                       coverage_views=1, test_kinds=self.test_kinds[:2], train_seeds=self.train_seeds[:1],
                       train_seeds_runs=self.train_seeds_runs[:1], watertight_eps=self.watertight_eps[:2],
                       sphere_dists=self.sphere_dists[:3], rss_probe=False)


PRESETS = {
    "smoke": FocusingPreset(res_lat=8, H=32, n_points=4000, n_uv=24, fit_steps=16, fit_eval=2,
                            test_kinds=("sphere", "torus", "bowl", "wavy_sheet"), train_seeds=(0,),
                            views=8, coverage_views=1, budget=24, steps=12, width=16, rss_probe=False,
                            runs=("full", "focus_zoom"), snap_every=4, mem_views=1, train_seeds_runs=(0,),
                            sphere_dists=(2.0, 3.0, 5.0), watertight_eps=(0.01, 0.02), watertight_n=20_000),
    "book": FocusingPreset(),
    "gpu": FocusingPreset(res_lat=32, H=128, n_points=60000, n_uv=64, fit_steps=400, fit_eval=16, sphere_views=16,
                          test_seeds=(100, 101), train_seeds=tuple(range(8)), views=32, coverage_views=4,
                          budget=384, width=64, blocks=2, steps=1500, lr=2e-3, snap_every=100,
                          multi_seed_runs=("full", "fsv", "focus", "focus_zoom", "focus_zoom, no warm-up"),
                          rss_probe=False),
}


def preset(scale: str | None = "book") -> FocusingPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
