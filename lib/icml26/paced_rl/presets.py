"""Scale presets of the paced-rl chapter (spec Sec. 7). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class PacedPreset:
    # -- the environment (HiddenRuleTask) and the policy ------------------------------------------
    n_train: int = 512
    n_test: int = 256
    vocab: int = 4
    length: int = 4
    emb_dim: int = 16
    task_seed: int = 0            # the environment is fixed; seeds vary the policy and the sampling
    hidden: int = 64
    warm_steps: int = 150         # noisy "SFT" warm start
    warm_noise: float = 0.45
    warm_lr: float = 1e-2
    # -- PACED-RL and the baselines (Sec. 3.8; lr and z_lr are book choices) ----------------------
    beta: float = 0.05
    tau: float = 0.5
    group_size: int = 8
    batch_prompts: int = 32
    pool_factor: int = 4          # candidate pool M = 4 B (book choice)
    lr: float = 3e-3
    z_lr: float = 1e-2
    replay_capacity: int = 128
    replay_add: int = 64
    replay_size: int = 32
    steps: int = 150
    eval_every: int = 10
    bias_every: int = 5           # exact bias and selected-prompt accuracies on every 5th step (a subsample)
    n_calib: int = 512            # training prompts used for calibration
    seeds: tuple = tuple(range(10))          # every method
    extra_seeds: tuple = tuple(range(5))     # controls: replay into Z, pool size
    val_seeds: tuple = (100, 101, 102, 103)  # validation seeds of the learning-rate tuning (disjoint from seeds)
    n_val_prompts: int = 128                 # training prompts held out to score the tuning runs (never test prompts)
    lr_grid: tuple = (3e-3, 5e-3, 7e-3, 1e-2)  # every compared method is tuned over this grid (2e-3 and 1.5e-2
    #                                             were never best on any of the four validation seeds)
    big_pool_factor: int = 16                # pool-size control: the whole training set (16 B = 512)
    from_step: int = 30                      # claims 8 and 10 count from this step on
    # -- notebook 1 -------------------------------------------------------------------------------
    id_outputs: int = 256         # enumerable outputs of the identity study (V**T = 4**4)
    id_prompts: int = 64
    id_sizes: tuple = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8)   # perturbation sizes of pi_theta
    id_gd_steps: int = 60
    nb1_steps: int = 50           # GFlowNet-pi_old steps before the calibration scatter
    seed: int = 0

    def dry_run(self) -> PacedPreset:
        """Loop counts cut (steps, warm-start steps, seeds, identity sizes), sizes kept."""
        return replace(self, steps=min(self.steps, 4), eval_every=min(self.eval_every, 4),
                       from_step=min(self.from_step, 2),
                       warm_steps=min(self.warm_steps, 5), seeds=self.seeds[:1], extra_seeds=self.extra_seeds[:1],
                       val_seeds=self.val_seeds[:1], lr_grid=self.lr_grid[:2],
                       id_sizes=self.id_sizes[:3], id_gd_steps=min(self.id_gd_steps, 10),
                       nb1_steps=min(self.nb1_steps, 3))


PRESETS = {
    "smoke": PacedPreset(steps=12, eval_every=4, warm_steps=60, seeds=(0,), extra_seeds=(0,), id_prompts=16,
                         nb1_steps=20, lr_grid=(3e-3, 1e-2), val_seeds=(100,), from_step=4),
    "book": PacedPreset(),
    "gpu": PacedPreset(n_train=8192, n_test=512, vocab=6, length=6, batch_prompts=64, n_calib=512,
                       n_val_prompts=1024,
                       seeds=tuple(range(20)), extra_seeds=tuple(range(5)), big_pool_factor=32, id_outputs=46656, id_prompts=64),
}


def preset(scale: str | None = "book") -> PacedPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
