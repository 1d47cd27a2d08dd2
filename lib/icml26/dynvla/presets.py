"""Scale presets for the DynVLA chapter (spec Sec. 7). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for

from ._checks import check_preset


@dataclass(frozen=True)
class DynVLAPreset:
    seed: int = 0
    # notebook 1: the world and the score
    n_scenes: int = 2000
    gamma_grid: tuple = (4, 8, 16, 32, 64, 128)
    # the dynamics tokenizer (notebooks 2 and 3)
    tok_scenes: int = 1500          # x3 frame pairs
    tok_d: int = 32
    tok_enc: int = 1
    tok_dec: int = 1
    tok_heads: int = 2
    n_codes: int = 4                # N_ego = N_env
    m_codes: int = 16               # M_ego = M_env (coupled: one codebook of 2 M)
    d_vq: int = 8
    tok_steps: int = 2200
    tok_batch: int = 64
    tok_lr: float = 2e-3
    log_every: int = 100
    ablate_bev: bool = False        # notebook 2: the no-BEV tokenizer (gpu)
    # notebook 3: CoT SFT and GRPO
    n_train: int = 2000
    n_test: int = 300
    cot_tok_steps: int = 600
    modes: tuple = ("none", "meta", "future_image", "dynamics")
    vla_d: int = 64
    vla_layers: int = 2
    vla_heads: int = 4
    sft_epochs: int = 10
    sft_batch: int = 64
    sft_lr: float = 2e-3
    sft_max_steps: int = 1_000_000
    rft_modes: tuple = ("none", "dynamics")
    rft_iterations: int = 30
    group_size: int = 8
    contexts_per_step: int = 16
    rft_lr: float = 5e-5
    seeds: tuple = (0,)

    def __post_init__(self):
        check_preset(self)

    def dry_run(self) -> DynVLAPreset:
        """Loop counts cut (steps, epochs, iterations, seeds, grids, the CoT modes trained, scenes
        sampled); sizes kept (rasters, models, codebooks, vocabularies, batch and group sizes)."""
        return replace(self, n_scenes=min(self.n_scenes, 200), gamma_grid=self.gamma_grid[:2],
                       tok_scenes=min(self.tok_scenes, 100), tok_steps=2, log_every=1, ablate_bev=False,
                       n_train=min(self.n_train, 64), n_test=min(self.n_test, 16), cot_tok_steps=2,
                       sft_epochs=1, sft_max_steps=2, rft_iterations=1, seeds=self.seeds[:1],
                       modes=tuple(v for v in self.modes if v in ("none", "dynamics")))


PRESETS = {
    "smoke": DynVLAPreset(n_scenes=100, gamma_grid=(8, 64), tok_scenes=80, tok_steps=20, log_every=10,
                          n_train=96, n_test=32, cot_tok_steps=10, sft_epochs=1, sft_batch=64,
                          rft_iterations=2, contexts_per_step=4),
    "book": DynVLAPreset(),
    "gpu": DynVLAPreset(n_scenes=5000, tok_scenes=8000, tok_d=128, tok_enc=4, tok_dec=3, tok_heads=4, m_codes=64,
                        d_vq=16, tok_steps=20000, tok_batch=128, tok_lr=1e-3, log_every=500, ablate_bev=True,
                        n_train=20000, n_test=2000, cot_tok_steps=10000, vla_d=128, vla_layers=4, vla_heads=8,
                        sft_epochs=40, sft_batch=256, rft_iterations=500, seeds=(0, 1, 2)),
}


def preset(scale: str | None = "book") -> DynVLAPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
