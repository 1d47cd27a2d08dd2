"""Scale presets for the context-tuning chapter (spec Sec. 7). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class CTPreset:
    seed: int = 0
    pretrain_setting: str = "book"    # "smoke" retrains 300 steps when the checkpoint is missing
    # -- tasks ---------------------------------------------------------------------------------
    n_tasks: int = 24                 # tasks per condition and task-sampling seed
    n_queries: int = 100              # held-out queries per task
    k: int = 16                       # demonstrations
    task_seeds: tuple = (0, 1, 2)     # task-sampling seeds (claim 8 averages over them)
    # -- methods (book choices of spec Sec. 7) -------------------------------------------------
    steps: int = 100                  # CT-KV, CT-Prompt, Prefix, Prompt: full-batch steps
    lr: float = 1e-2
    rho: float = 0.05                 # token dropout
    n_virtual: int = 16               # Prefix / Prompt Tuning positions
    n_tasks_quadratic: int = 8        # tasks for the quadratic-cost methods (CT-Prompt, TTT): seed 0's first ones
    ttt_steps: int = 50
    ttt_lrs: tuple = (1e-4, 3e-4, 1e-3)
    n_val: int = 8                    # validation tasks that choose TTT's learning rate
    # -- notebook 1: ICL curves and the k sweep ------------------------------------------------
    k_curve: tuple = (0, 1, 2, 4, 6, 8, 12, 16, 20, 24)
    k_sweep: tuple = (8, 16, 24)
    # -- notebook 2: timing ----------------------------------------------------------------------
    timing_ks: tuple = (4, 8, 16, 32, 64)
    timing_tasks: int = 4
    timing_steps: int = 3
    timing_repeats: int = 3

    def dry_run(self) -> CTPreset:
        """Loop counts cut (steps, seeds, grid points, repeats), sizes kept (tasks, k, queries)."""
        return replace(self, steps=min(self.steps, 2), ttt_steps=min(self.ttt_steps, 2),
                       task_seeds=self.task_seeds[:1], ttt_lrs=self.ttt_lrs[:2],
                       k_curve=tuple(k for k in self.k_curve if k in (0, self.k)),
                       k_sweep=self.k_sweep[:2], timing_ks=self.timing_ks[:2], timing_steps=1, timing_repeats=1)


PRESETS = {
    "smoke": CTPreset(pretrain_setting="smoke", n_tasks=4, n_queries=50, task_seeds=(0,), steps=10,
                      n_tasks_quadratic=2, ttt_steps=5, n_val=2, k_curve=(0, 4, 8, 16), k_sweep=(8, 16),
                      timing_ks=(4, 8), timing_tasks=2, timing_steps=2, timing_repeats=1),
    "book": CTPreset(),
    "gpu": CTPreset(n_tasks=128, task_seeds=(0, 1, 2, 3, 4), n_tasks_quadratic=32, n_val=16,
                    k_curve=(0, 1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 32), k_sweep=(8, 12, 16, 20, 24),
                    timing_ks=(4, 8, 16, 32, 64, 128, 256), timing_tasks=16, timing_repeats=5),
}


def preset(scale: str | None = "book") -> CTPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
