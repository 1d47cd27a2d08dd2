"""Scale presets for the Preconditioned DeltaNet chapter (``smoke`` for CI, ``book`` for a laptop CPU,
``gpu`` for one GPU). Notebooks read every size from here."""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    reg_t_report: tuple[int, ...]  # tokens at which NB1 reports the tuned PDN/DN ratio (a convergence rate)
    # NB1 and NB3 comparisons (icml26.core.compare): step-size grids tuned on validation seeds, scored on
    # disjoint test seeds (the same streams for every write rule)
    reg_betas: tuple[float, ...]
    reg_lams: tuple[float, ...]  # RLS ridge grid (as many values as reg_betas: equal tuning budgets)
    reg_test_seeds: tuple[int, ...]
    reg_val_seeds: tuple[int, ...]
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
    recall_betas: tuple[float, ...]
    recall_test_seeds: tuple[int, ...]
    recall_val_seeds: tuple[int, ...]
    mqar_variants: tuple[str, ...]
    mqar_n_pairs: int
    mqar_steps: int
    mqar_lr: float
    mqar_seeds: tuple[int, ...]
    mqar_batch: int
    mqar_head_dim: int
    mqar_extra_n_pairs: tuple[int, ...]  # capacity-stressed settings (gpu only)
    mqar_extra_head_dim: int
    mqar_vocab: int = 128
    mqar_extra_vocab: int = 128  # MQAR needs n_pairs < vocab // 2 distinct keys

    def __post_init__(self):
        """Validate what would otherwise fail deep inside a run (issue: n_pairs >= vocab/2 raised only
        after minutes of training)."""
        for name, n, vocab in [("mqar_n_pairs", self.mqar_n_pairs, self.mqar_vocab)] + [
                ("mqar_extra_n_pairs", n, self.mqar_extra_vocab) for n in self.mqar_extra_n_pairs]:
            if n >= vocab // 2:
                raise ValueError(f"{name}={n} needs a vocabulary of more than {2 * n} tokens for distinct keys; "
                                 f"got {vocab} (raise mqar_vocab / mqar_extra_vocab)")
        if self.recall_n_check not in self.recall_ns:
            raise ValueError(f"recall_n_check={self.recall_n_check} must be one of recall_ns={self.recall_ns}")
        if self.reg_t_check > self.reg_T:
            raise ValueError(f"reg_t_check={self.reg_t_check} must be <= reg_T={self.reg_T}")
        if not self.reg_t_report or any(not 1 <= t <= self.reg_T for t in self.reg_t_report):
            raise ValueError(f"reg_t_report={self.reg_t_report} must be tokens in [1, reg_T={self.reg_T}]")
        for name in ("mqar_variants", "mqar_seeds", "reg_betas", "reg_test_seeds", "reg_val_seeds", "recall_betas",
                     "recall_test_seeds", "recall_val_seeds"):
            if not getattr(self, name):
                raise ValueError(f"{name} must not be empty")
        for test, val in (("reg_test_seeds", "reg_val_seeds"), ("recall_test_seeds", "recall_val_seeds")):
            if set(getattr(self, test)) & set(getattr(self, val)):
                raise ValueError(f"{val} must be disjoint from {test} (validation data is not test data)")
        if self.reg_lams and len(self.reg_lams) != len(self.reg_betas):
            raise ValueError(f"reg_lams must have as many values as reg_betas ({len(self.reg_betas)}): equal grids")

    def dry_run(self) -> PrecondDeltaPreset:
        """A copy for ``ICML26_DRY=1``: loop counts cut (training steps, seeds, timing repeats, stress steps),
        every size kept (sequence lengths, widths, vocabularies, pair counts, batch sizes)."""
        return replace(self, reg_seeds=2, recall_seeds=2, time_repeat=1, stress_steps=min(self.stress_steps, 200),
                       mqar_steps=3, mqar_seeds=self.mqar_seeds[:1], reg_test_seeds=self.reg_test_seeds[:2],
                       reg_val_seeds=self.reg_val_seeds[:2], recall_test_seeds=self.recall_test_seeds[:2],
                       recall_val_seeds=self.recall_val_seeds[:2])


# step sizes: 0.1 .. 2 (the delta rule's stability bound for unit keys); ridge: 1e-10 .. 10, as many values
_REG_BETAS = (0.1, 0.15, 0.25, 0.35, 0.5, 0.7, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
_REG_LAMS = tuple(10.0 ** e for e in range(-10, 2))
_RECALL_BETAS = (0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0)

PRESETS = {
    "smoke": PrecondDeltaPreset(
        seed=0, reg_T=500, reg_seeds=2, reg_dk=16, reg_dv=8, reg_kappa=30.0, reg_t_check=500,
        reg_t_report=(250, 500), reg_betas=(0.5, 1.0, 1.4), reg_lams=(1e-8, 1e-5, 1e-2), reg_test_seeds=(0, 1), reg_val_seeds=(100,),
        agree_T=70, agree_K=8, agree_chunk=16, time_Ts=(8, 128), time_chunks=(16, 32), time_repeat=1,
        time_B=2, time_K=32, eig_T=256, stress_steps=200,
        recall_ns=(16, 48), recall_seeds=5, recall_dk=32, recall_kappa=20.0, recall_n_check=48,
        recall_betas=(0.1, 0.2, 0.5), recall_test_seeds=(0, 1), recall_val_seeds=(100,),
        mqar_variants=("GDN", "PGDN"), mqar_n_pairs=4, mqar_steps=40, mqar_lr=1e-2, mqar_seeds=(0,), mqar_batch=32,
        mqar_head_dim=32, mqar_extra_n_pairs=(), mqar_extra_head_dim=16),
    "book": PrecondDeltaPreset(
        seed=0, reg_T=2000, reg_seeds=3, reg_dk=16, reg_dv=8, reg_kappa=30.0, reg_t_check=500,
        reg_t_report=(250, 500, 1000, 2000), reg_betas=_REG_BETAS, reg_lams=_REG_LAMS, reg_test_seeds=tuple(range(10)), reg_val_seeds=tuple(range(100, 110)),
        agree_T=70, agree_K=16, agree_chunk=16, time_Ts=(8, 16, 32, 64, 128, 256, 512, 1024, 2048), time_chunks=(16, 32, 64),
        time_repeat=3, time_B=4, time_K=32, eig_T=1024, stress_steps=200,
        recall_ns=(8, 16, 32, 48, 64), recall_seeds=5, recall_dk=32, recall_kappa=20.0, recall_n_check=48,
        recall_betas=_RECALL_BETAS, recall_test_seeds=tuple(range(50)), recall_val_seeds=tuple(range(100, 150)),
        mqar_variants=("DN", "PDN", "GDN", "PGDN"), mqar_n_pairs=4, mqar_steps=1100, mqar_lr=1e-2, mqar_seeds=(0,),
        mqar_batch=32, mqar_head_dim=32, mqar_extra_n_pairs=(), mqar_extra_head_dim=16),
    # gpu MQAR: 7 variants x 3 settings, the 3 seeds of a variant trained together (train_mqar_stacked);
    # about 25k / 43k CPU-profiled aten ops per step of all variants at n = 4 / 32 after stacking (62k / 101k
    # before). That is still tens of millions of launches at 2000 steps, so the steps are halved to 1000
    # (the book's n = 4 runs solve the task in 1100 steps). Not yet timed on a GPU.
    "gpu": PrecondDeltaPreset(
        seed=0, reg_T=8192, reg_seeds=16, reg_dk=16, reg_dv=8, reg_kappa=30.0, reg_t_check=500,
        reg_t_report=(250, 500, 1000, 2000), reg_betas=_REG_BETAS, reg_lams=_REG_LAMS, reg_test_seeds=tuple(range(32)), reg_val_seeds=tuple(range(100, 116)),
        agree_T=200, agree_K=32, agree_chunk=32, time_Ts=(64, 256, 1024, 4096, 16384), time_chunks=(32, 64),
        time_repeat=5, time_B=4, time_K=64, eig_T=4096, stress_steps=200,
        recall_ns=(8, 16, 32, 48, 64, 96), recall_seeds=32, recall_dk=32, recall_kappa=20.0, recall_n_check=48,
        recall_betas=_RECALL_BETAS, recall_test_seeds=tuple(range(100)), recall_val_seeds=tuple(range(1000, 1050)),
        mqar_variants=("linear", "DN", "PDN", "GDN", "PGDN", "KDA", "PKDA"), mqar_n_pairs=4, mqar_steps=1000, mqar_lr=1e-2,
        mqar_seeds=(0, 1, 2), mqar_batch=64, mqar_head_dim=32, mqar_extra_n_pairs=(32, 64),
        mqar_extra_head_dim=16, mqar_extra_vocab=256),
}


def preset(scale: str = "book") -> PrecondDeltaPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
