"""Scale presets for the Preconditioned DeltaNet chapter (``smoke`` for CI, ``book`` for a laptop CPU,
``gpu`` for one GPU). Notebooks read every size from here."""

from __future__ import annotations

from dataclasses import dataclass

from ..core import preset_for


@dataclass(frozen=True)
class PrecondDeltaPreset:
    seed: int
    # NB1: online regression (test-time regression view)
    reg_T: int
    reg_seeds: int
    reg_dk: int
    reg_dv: int
    reg_kappa: float
    reg_t_check: int  # t at which claims 10-11 are read
    # NB2: chunk vs recurrent, timing, eigenvalues
    agree_T: int
    agree_K: int
    agree_chunk: int
    time_Ts: tuple[int, ...]
    time_chunks: tuple[int, ...]
    time_repeat: int
    time_B: int
    time_K: int
    eig_T: int
    stress_steps: int
    # NB3: single-pass recall and MQAR
    recall_ns: tuple[int, ...]
    recall_seeds: int
    recall_dk: int
    recall_kappa: float
    recall_n_check: int
    mqar_variants: tuple[str, ...]
    mqar_n_pairs: int
    mqar_steps: int
    mqar_lr: float
    mqar_seeds: tuple[int, ...]
    mqar_batch: int
    mqar_head_dim: int
    mqar_extra_n_pairs: tuple[int, ...]  # capacity-stressed settings (gpu only)
    mqar_extra_head_dim: int


PRESETS = {
    "smoke": PrecondDeltaPreset(
        seed=0, reg_T=500, reg_seeds=2, reg_dk=16, reg_dv=8, reg_kappa=30.0, reg_t_check=500,
        agree_T=70, agree_K=8, agree_chunk=16, time_Ts=(8, 128), time_chunks=(16, 32), time_repeat=1,
        time_B=2, time_K=32, eig_T=256, stress_steps=200,
        recall_ns=(16, 48), recall_seeds=5, recall_dk=32, recall_kappa=20.0, recall_n_check=48,
        mqar_variants=("GDN", "PGDN"), mqar_n_pairs=4, mqar_steps=40, mqar_lr=1e-2, mqar_seeds=(0,), mqar_batch=32,
        mqar_head_dim=32, mqar_extra_n_pairs=(), mqar_extra_head_dim=16),
    "book": PrecondDeltaPreset(
        seed=0, reg_T=2000, reg_seeds=3, reg_dk=16, reg_dv=8, reg_kappa=30.0, reg_t_check=500,
        agree_T=70, agree_K=16, agree_chunk=16, time_Ts=(8, 16, 32, 64, 128, 256, 512, 1024, 2048), time_chunks=(16, 32, 64),
        time_repeat=3, time_B=4, time_K=32, eig_T=1024, stress_steps=200,
        recall_ns=(8, 16, 32, 48, 64), recall_seeds=5, recall_dk=32, recall_kappa=20.0, recall_n_check=48,
        mqar_variants=("DN", "PDN", "GDN", "PGDN"), mqar_n_pairs=4, mqar_steps=1100, mqar_lr=1e-2, mqar_seeds=(0,),
        mqar_batch=32, mqar_head_dim=32, mqar_extra_n_pairs=(), mqar_extra_head_dim=16),
    "gpu": PrecondDeltaPreset(
        seed=0, reg_T=8192, reg_seeds=16, reg_dk=16, reg_dv=8, reg_kappa=30.0, reg_t_check=500,
        agree_T=200, agree_K=32, agree_chunk=32, time_Ts=(64, 256, 1024, 4096, 16384), time_chunks=(32, 64),
        time_repeat=5, time_B=4, time_K=64, eig_T=4096, stress_steps=200,
        recall_ns=(8, 16, 32, 48, 64, 96), recall_seeds=32, recall_dk=32, recall_kappa=20.0, recall_n_check=48,
        mqar_variants=("linear", "DN", "PDN", "GDN", "PGDN", "KDA", "PKDA"), mqar_n_pairs=4, mqar_steps=2000, mqar_lr=1e-2,
        mqar_seeds=(0, 1, 2), mqar_batch=64, mqar_head_dim=32, mqar_extra_n_pairs=(32, 64),
        mqar_extra_head_dim=16),
}


def preset(scale: str = "book") -> PrecondDeltaPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
