"""Scale presets for the watermark chapter (spec Sec. 7). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class WatermarkPreset:
    # -- notebook 1: one token at a time (i.i.d. distributions) --------------------------------
    n_vocab: int = 1024               # vocabulary of the i.i.d. families
    gamma: float = 0.25               # the (gamma, delta) of the green-rate study
    delta: float = 2.0
    uniform_m: tuple = (1, 2, 4, 16, 64, 256, 1024)
    zipf_s: tuple = (4.0, 2.0, 1.4, 1.1, 0.8, 0.5)
    softmax_tau: tuple = (0.2, 0.35, 0.5, 0.8, 1.5)
    n_mc: int = 40000                 # watermarked draws per family point (green rate, KL)
    n_pred: int = 8000                # independent draws for the prediction E phi(P) (16 masks each)
    power_family: tuple = ("softmax", 0.5)
    power_configs: tuple = ((0.25, 1.0), (0.25, 2.0), (0.5, 1.0))
    power_vocab: int = 256            # vocabulary of the power study (i.i.d. sequences)
    n_seq: int = 1000                 # i.i.d. sequences per power curve
    T_max: int = 200
    T_grid: tuple = (10, 20, 40, 60, 80, 100, 150, 200)
    heat_gammas: int = 19             # gamma grid in [0.05, 0.95]
    heat_deltas: int = 20             # delta grid in [0.1, 4]
    heat_tau: tuple = (0.35, 1.5)     # a low- and a high-entropy softmax family
    # -- notebook 2: HMM teachers, calibration, selection ---------------------------------------
    taus: tuple = (0.6, 1.5)          # emission temperatures: low- and high-entropy teacher
    vocab_size: int = 256
    n_states: int = 16
    n_null: int = 1000                # unwatermarked sequences (FPR, calibration)
    n_seq_wm: int = 500               # watermarked sequences per (gamma, delta), split over the keys
    n_keys: int = 5                   # watermark keys = seeds of the comparisons (the prediction is key-independent)
    n_seq_seed: int = 1000            # sequences per seed at Algorithm A's chosen point (seeded selection)
    T: int = 100
    alpha: float = 0.01
    target_power: float = 0.9
    gammas: tuple = (0.1, 0.25, 0.5, 0.75)
    deltas: tuple = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
    n_cal: int = 8192                 # calibration rows (next-token distributions)
    n_masks: int = 32                 # random masks R of the calibration
    key: int = 15485863               # the watermark key
    seed: int = 0

    def dry_run(self) -> WatermarkPreset:
        """Loop counts cut (family points, power configs, grid points, gammas, keys) and Monte Carlo
        repeats cut (draws, sequences), sizes kept (vocabularies, sequence lengths, calibration rows)."""
        return replace(self, uniform_m=self.uniform_m[:2], zipf_s=self.zipf_s[:1], softmax_tau=self.softmax_tau[:1],
                       power_configs=self.power_configs[:1], heat_gammas=3, heat_deltas=3,
                       # keep delta 2.0 so that the default (0.25, 2) stays on the grid (equal-power comparison)
                       deltas=(self.deltas[0], 2.0) if 2.0 in self.deltas[1:] else self.deltas[:2],
                       gammas=self.gammas[:2], n_keys=min(self.n_keys, 2),
                       n_mc=min(self.n_mc, 2000), n_pred=min(self.n_pred, 1000), n_seq=min(self.n_seq, 50),
                       n_null=min(self.n_null, 200), n_seq_wm=min(self.n_seq_wm, 100), n_cal=min(self.n_cal, 8192),
                       n_seq_seed=min(self.n_seq_seed, 100))


PRESETS = {
    "smoke": WatermarkPreset(n_mc=3000, n_pred=2000, uniform_m=(1, 4, 1024), zipf_s=(2.0, 0.5),
                             softmax_tau=(0.35, 1.5), n_seq=250, T_max=100, T_grid=(10, 25, 50, 100),
                             heat_gammas=7, heat_deltas=6, n_null=300, n_seq_wm=120, T=60, n_seq_seed=120,
                             deltas=(0.5, 1.0, 2.0), gammas=(0.25, 0.5), n_keys=2, n_cal=2048, n_masks=16),
    "book": WatermarkPreset(),
    # gpu (issue 43): every sampler of this chapter runs on the host (CPU generators and tensors; the teachers stay on
    # the CPU), so the gpu run is a CPU run. The cost model (watermark/cost.py, one CPU thread) projected the former
    # sizes (N=8192, 200 000 draws, 20 000 prediction rows, 50 000 power sequences; vocabulary 1024, 10 000 null,
    # 4 000 watermarked, 10 000 per seed, 65 536 calibration rows) at 3,075 s (nb1) and 1,931 s (nb2). These sizes
    # keep the book's vocabularies and its draws-to-prediction ratio (5) and project 173-195 s and 122-190 s (two
    # measurements of the host steps on a shared machine).
    "gpu": WatermarkPreset(n_mc=60000, n_pred=12000, n_seq=4000, T_max=400,
                           T_grid=(10, 25, 50, 100, 200, 300, 400), heat_gammas=37, heat_deltas=40,
                           n_null=2000, n_seq_wm=1000, n_cal=16384, n_seq_seed=1500,
                           deltas=(0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0)),
}


def preset(scale: str | None = "book") -> WatermarkPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
