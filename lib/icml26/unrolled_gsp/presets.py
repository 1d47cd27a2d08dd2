"""Scale presets for the unrolled-gsp chapter (spec Sec. 7). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for

from ._checks import check_preset


@dataclass(frozen=True)
class UnrolledGSPPreset:
    # -- data (SynthRoad, spec Sec. 7.2) ---------------------------------------------------------
    n_nodes: int = 20
    days: int = 10
    stride: int = 3
    incident_rate: float = 0.3
    t_in: int = 12
    t_out: int = 12
    k: int = 6                        # kNN neighbours (before symmetrisation)
    interval: int = 6                 # lags V of the directed temporal graph
    # -- notebook 1: the classical ADMM on one window (fixed graphs) ---------------------------------
    admm_nodes: int = 12
    admm_iters: int = 500
    admm_mu_u: float = 1.0
    admm_mu_d1: float = 0.3
    admm_mu_d2: float = 1.0
    admm_rho: float = 1.0
    # -- notebook 2: the unrolled model (book model of spec Sec. 7.3) --------------------------------
    n_blocks: int = 2
    n_iter: int = 5
    cg_iters: int = 3
    n_heads: int = 2
    channels: int = 6
    epochs: int = 8
    lr: float = 5e-3
    lr_transformer: float = 2e-3
    batch_size: int = 32
    grad_clip: float = 5.0
    ridge_alpha: float = 1.0
    max_batches: int | None = None    # batches per epoch (None: all); cut by dry_run
    max_eval: int | None = None       # windows per evaluation (None: all); cut by dry_run
    ablations: tuple = ("full", "w/o DGTV", "w/o DGLR", "UT", "fixed graphs")
    ablation_nodes: int = 12
    ablation_days: int = 7
    ablation_epochs: int = 4
    ablation_seeds: int = 1
    seed: int = 0

    def __post_init__(self):
        check_preset(self)

    def dry_run(self) -> UnrolledGSPPreset:
        """Loop counts cut (classical and unrolled ADMM iterations, epochs, batches per epoch, evaluated
        windows, seeds, variants); sizes kept (nodes, days, blocks, heads, channels, batch size)."""
        return replace(self, admm_iters=min(self.admm_iters, 20), n_iter=1, epochs=1, ablation_epochs=1,
                       ablation_seeds=1, max_batches=1, max_eval=32, ablations=self.ablations[:2])


PRESETS = {
    "smoke": UnrolledGSPPreset(n_nodes=12, days=3, ablation_days=3, n_iter=3, epochs=1, ablation_epochs=1,
                               max_batches=2, max_eval=32, admm_iters=300, ablations=("full", "w/o DGTV")),
    "book": UnrolledGSPPreset(),
    "gpu": UnrolledGSPPreset(n_nodes=50, days=30, stride=3, n_blocks=5, n_iter=25, n_heads=4, epochs=30,
                             lr=1e-3, batch_size=32, ablation_nodes=50, ablation_days=60,
                             ablation_epochs=10, ablation_seeds=3),
}


def preset(scale: str | None = "book") -> UnrolledGSPPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
