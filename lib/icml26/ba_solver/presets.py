"""Scale presets of the BA-solver chapter (one frozen dataclass per notebook).

``smoke`` only checks that code paths execute (numbers not meaningful); ``book`` fits a laptop
CPU (measured, one thread): every notebook trains five SideNets (one per comparison seed), so the
book SideNets are shorter (2000 steps in NB1 and NB2, 1500 in NB3) than one SideNet per notebook
could afford; ``gpu`` is sized for one GPU. Deviations from the official training
defaults (lr 1e-4, EMA 0.9996, 300k steps) are forced by the budget: the book trains a tiny MLP
for ~10^3 steps, so it uses a larger learning rate and a shorter EMA.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class NB1Preset:
    """Notebook 1: exact Gaussian-mixture field."""

    n_eval: int                    # test points (same noise for every solver)
    nfes: tuple[int, ...]          # NFE grid for the learned-SideNet comparison
    oracle_points: int             # points for the oracle convergence study
    oracle_nfes: tuple[int, ...]   # NFE grid for the convergence study
    oracle_substeps: int           # RK4 substeps of the oracle SideNet
    probe_points: int              # states per (t, h) in the SideNet-error-vs-offset study
    side_hidden: int
    side_depth: int
    side_steps: int
    side_batch: int
    chain_steps: int
    lr: float
    ema_decay: float
    ablation_steps: int            # SideNet steps of the lambda = 10 arm (= side_steps: equal training)
    case_ref_steps: int = 512      # float64 RK4 steps of each comparison seed's reference

    def dry_run(self) -> NB1Preset:
        """Loop counts cut (training steps, NFE grids, oracle substeps, reference steps, evaluation
        points: the gpu's 20,000 test points alone cost three minutes of CPU per dry run); widths and the
        training batch kept."""
        return replace(self, side_steps=3, ablation_steps=3, nfes=(3, 5, 10), oracle_nfes=self.oracle_nfes[:4],
                       oracle_substeps=4, case_ref_steps=64, n_eval=min(self.n_eval, 512),
                       oracle_points=min(self.oracle_points, 64), probe_points=min(self.probe_points, 64))


@dataclass(frozen=True)
class LearnedPreset:
    """Notebooks 2 and 3: learned backbone + SideNet."""

    backbone_hidden: int
    backbone_depth: int
    backbone_steps: int
    backbone_batch: int
    backbone_lr: float
    side_hidden: int
    side_depth: int
    side_steps: int
    side_batch: int
    chain_steps: int
    lr: float
    ema_decay: float
    n_eval: int
    nfes: tuple[int, ...]
    ablation_steps: int            # SideNet steps per ablation variant (NB2; 0 where unused)
    ref_steps: int                 # float64 RK4 steps of the reference solution
    n_boot: int = 50               # bootstrap resamples for the noise of the reference level
    n_val: int = 512               # validation noise draws the solvers' grids are tuned on

    def dry_run(self) -> LearnedPreset:
        """Loop counts cut (training steps, NFE grid, reference steps, evaluation and validation points);
        widths and training batches kept."""
        return replace(self, backbone_steps=3, side_steps=3, ablation_steps=min(self.ablation_steps, 3),
                       nfes=self.nfes[:3], ref_steps=8, n_boot=2, n_eval=min(self.n_eval, 256),
                       n_val=min(self.n_val, 128))


SHIFTS = tuple(round(2 ** (k / 2), 3) for k in range(-4, 4))
"""Time-grid shifts every solver is tuned over (:func:`~icml26.ba_solver.baselines.time_grid`):
0.25 ... 2.83 in steps of sqrt(2); 1 is the uniform grid. (A grid ending at 0.5 left the digits'
best shifts on its lower edge.)"""


@dataclass(frozen=True)
class BAPreset:
    seed: int
    nb1: NB1Preset
    nb2: LearnedPreset
    nb3: LearnedPreset
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)   # paired seeds of the solver comparisons (one SideNet each)
    val_seed: int = 100                       # seed of the validation noise the grids are tuned on (disjoint)
    shifts: tuple[float, ...] = SHIFTS        # the time-grid values every solver is tuned over

    def dry_run(self) -> BAPreset:
        """Every notebook's preset through its own ``dry_run`` (for ``ICML26_DRY=1`` at the gpu scale);
        two seeds and three grid values."""
        return replace(self, nb1=self.nb1.dry_run(), nb2=self.nb2.dry_run(), nb3=self.nb3.dry_run(),
                       seeds=self.seeds[:2], shifts=(0.707, 1.0, 1.414))


PRESETS = {
    "smoke": BAPreset(
        seed=0, seeds=(1, 2), shifts=(0.707, 1.0, 1.414),
        nb1=NB1Preset(n_eval=256, nfes=(3, 5, 10), oracle_points=48, oracle_nfes=(4, 8, 16), oracle_substeps=8,
                      probe_points=64, side_hidden=64, side_depth=2, side_steps=60, side_batch=128, chain_steps=4, lr=2e-3,
                      ema_decay=0.99, ablation_steps=60, case_ref_steps=128),
        nb2=LearnedPreset(backbone_hidden=64, backbone_depth=3, backbone_steps=150, backbone_batch=256,
                          backbone_lr=2e-3, side_hidden=32, side_depth=2, side_steps=40, side_batch=128,
                          chain_steps=4, lr=2e-3, ema_decay=0.99, n_eval=512, nfes=(3, 5, 10), ablation_steps=10,
                          ref_steps=32, n_val=128),
        nb3=LearnedPreset(backbone_hidden=128, backbone_depth=3, backbone_steps=150, backbone_batch=128,
                          backbone_lr=2e-3, side_hidden=32, side_depth=2, side_steps=30, side_batch=64,
                          chain_steps=2, lr=2e-3, ema_decay=0.99, n_eval=500, nfes=(3, 5, 10), ablation_steps=0,
                          ref_steps=16, n_val=128),
    ),
    "book": BAPreset(
        seed=0,
        nb1=NB1Preset(n_eval=2000, nfes=(3, 4, 5, 6, 8, 10, 16), oracle_points=200, oracle_nfes=(4, 6, 8, 12, 16),
                      oracle_substeps=16, probe_points=256, side_hidden=128, side_depth=3, side_steps=2000,
                      side_batch=128, chain_steps=4, lr=2e-3, ema_decay=0.999, ablation_steps=2000),
        nb2=LearnedPreset(backbone_hidden=128, backbone_depth=4, backbone_steps=2500, backbone_batch=512,
                          backbone_lr=2e-3, side_hidden=64, side_depth=2, side_steps=2000, side_batch=128,
                          chain_steps=4, lr=2e-3, ema_decay=0.999, n_eval=2000, nfes=(3, 5, 10), ablation_steps=2000,
                          ref_steps=128),
        nb3=LearnedPreset(backbone_hidden=256, backbone_depth=3, backbone_steps=2500, backbone_batch=256,
                          backbone_lr=2e-3, side_hidden=64, side_depth=2, side_steps=1500, side_batch=128,
                          chain_steps=4, lr=2e-3, ema_decay=0.999, n_eval=1797, nfes=(3, 5, 10), ablation_steps=0,
                          ref_steps=64),
    ),
    "gpu": BAPreset(
        seed=0,
        nb1=NB1Preset(n_eval=20000, nfes=(3, 4, 5, 6, 8, 10, 16, 32), oracle_points=2000,
                      oracle_nfes=(4, 6, 8, 12, 16, 24, 32), oracle_substeps=64, probe_points=2000, side_hidden=256, side_depth=3,
                      # issue 43 cost model (budget --scale gpu): 6 SideNets x 20,000 steps at 6.3 ms projected
                      # 764 s; 6,000 steps each project 237 s
                      side_steps=6000, side_batch=4096, chain_steps=8, lr=1e-3, ema_decay=0.999,
                      ablation_steps=6000),
        nb2=LearnedPreset(backbone_hidden=256, backbone_depth=4, backbone_steps=20000, backbone_batch=4096,
                          backbone_lr=1e-3, side_hidden=128, side_depth=3, side_steps=6000, side_batch=2048,
                          chain_steps=8, lr=1e-3, ema_decay=0.999, n_eval=20000, nfes=(3, 5, 10, 16),
                          # issue 43: 10,000 SideNet / ablation steps projected 399 s; 6,000 project 249 s
                          ablation_steps=6000, ref_steps=512),
        nb3=LearnedPreset(backbone_hidden=1024, backbone_depth=4, backbone_steps=30000, backbone_batch=1024,
                          # issue 43: 5 SideNets x 20,000 steps at 5.7 ms projected 601 s; 8,000 steps project 258 s
                          backbone_lr=1e-3, side_hidden=128, side_depth=3, side_steps=8000, side_batch=1024,
                          chain_steps=8, lr=1e-3, ema_decay=0.999, n_eval=1797, nfes=(3, 5, 10, 16),
                          ablation_steps=0, ref_steps=512),
    ),
}


def preset(scale: str | None = "book") -> BAPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides); unknown names raise ``ValueError``."""
    return preset_for(PRESETS, scale)
