"""Scale presets for the protein-tokens chapter (spec Sec. 7). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class PTPreset:
    seed: int = 0
    # -- notebook 1: data and the linear nested-dropout autoencoder -----------------------------
    gallery_per_class: int = 3
    n_stats: int = 512                  # chains for the geometry table
    ae_dim: int = 8                     # data dimension of the linear autoencoder
    ae_codes: int = 5                   # code units
    ae_samples: int = 4096
    ae_steps: int = 3000
    ae_seeds: int = 10                  # seeds for the spread of the principal angles
    # -- tokenizers: the shipped checkpoints, or a retrain ----------------------------------------
    retrain_steps: int = 0              # 0: load data/protein-tokens/*.pt; > 0: train in the notebook
    model_overrides: tuple = ()         # (field, value) pairs for TokenizerConfig when retraining
    lengths: tuple = (36, 48)
    # -- notebook 2: reconstruction and token swaps ---------------------------------------------
    n_test: int = 256                   # held-out chains
    sampler_steps: int = 25             # Euler steps of the deterministic (ODE) sampler
    ks: tuple = (0, 1, 2, 4, 8, 16)
    n_swap: int = 128
    apt_swap_positions: tuple = (0, 1, 2, 3, 4, 6, 8, 10, 12, 13, 14, 15)
    kanzi_swap_positions: tuple = (0, 4, 8, 12, 16, 20, 24, 28, 32, -1)   # -1: the last residue
    n_boot: int = 2000
    # -- notebook 3: probing and shrinking ------------------------------------------------------
    n_probe: int = 600
    probe_folds: int = 5
    probe_ntoks: int = 8
    mlp_hidden: int = 128
    mlp_iter: int = 200
    n_shrink: int = 128
    rhos: tuple = (1.0, 0.9, 0.8, 0.7)

    def dry_run(self) -> PTPreset:
        """Loop counts cut (training and sampler steps, seeds, evaluation chains, folds); sizes kept."""
        return replace(self, ae_steps=min(self.ae_steps, 20), ae_seeds=min(self.ae_seeds, 2),
                       retrain_steps=min(self.retrain_steps, 2), sampler_steps=min(self.sampler_steps, 2),
                       n_test=min(self.n_test, 24), n_swap=min(self.n_swap, 12), n_boot=min(self.n_boot, 100),
                       n_probe=min(self.n_probe, 60), probe_folds=min(self.probe_folds, 3),
                       mlp_iter=min(self.mlp_iter, 30), n_shrink=min(self.n_shrink, 12), n_stats=min(self.n_stats, 64))


PRESETS = {
    "smoke": PTPreset(lengths=(40, 40), gallery_per_class=2, n_stats=64, ae_samples=1024, ae_steps=300, ae_seeds=3, n_test=12,
                      sampler_steps=4, n_swap=8, n_boot=200, kanzi_swap_positions=(0, 16, -1),
                      apt_swap_positions=(0, 1, 13, 14), n_probe=60,
                      probe_folds=2, mlp_iter=20, n_shrink=8, rhos=(1.0, 0.8)),
    "book": PTPreset(),
    # retrain_steps sized from the cost model (issue 43): a training step of the gpu-size tokenizers is
    # launch-bound at about 20 ms on one H100 (4,000 operators), so 2 x 20,000 steps projected 833 s;
    # 5,000 steps (the shipped checkpoints took 3,500) project about 220 s for notebook 2
    "gpu": PTPreset(retrain_steps=5000, model_overrides=(("d_enc", 128), ("n_enc", 3), ("d_dec", 128), ("n_dec", 4)),
                    n_test=1024, sampler_steps=50, n_swap=512, apt_swap_positions=tuple(range(16)), n_probe=2400,
                    n_shrink=512, ae_seeds=20),
}


def preset(scale: str | None = "book") -> PTPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
