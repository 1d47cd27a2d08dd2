"""Scale presets for the bpop chapter (spec Sec. 7.4). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for

from ._checks import check_preset


@dataclass(frozen=True)
class BpopPreset:
    # -- notebook 1: likelihood -------------------------------------------------------------------
    norm_scenarios: tuple = ("simple_ecs", "dual_zone_ecs_slb")   # exhaustive n! checks (n <= 7)
    timing_ns: tuple = (6, 8, 10, 12, 14, 16)                      # tractability sweep
    timing_orders: int = 3                                         # random orders per n
    timing_repeat: int = 3
    # -- notebook 2: recovery ---------------------------------------------------------------------
    n_iter: int = 20000               # MCMC iterations (burn-in 50 %, thin 10)
    n_chains: int = 2
    K: int = 3
    eps_infer: float = 0.05
    recovery_scenarios: tuple = ("simple_ecs", "dual_zone_ecs_slb", "eip_slb_ecs", "slb_ecs_redis",
                                 "dual_zone_ecs_slb_rds", "slb_ecs_rds")
    recovery_traces: int = 30         # traces per data set (beta_true = 1, eps_true = 0.05)
    recovery_seeds: int = 5           # test data sets per scenario (a seed fixes the data draw)
    recovery_chains: int = 1          # MCMC chains per data set in the recovery studies
    validation_seeds: int = 1         # validation data sets per scenario (threshold tuning)
    persona_seeds: int = 5            # misspecified (persona) data sets on slb_ecs_rds, test ...
    persona_validation_seeds: int = 2  # ... and validation
    majority_datasets: int = 300      # Majority on simple_ecs: data sets per trace count (no MCMC)
    majority_traces: tuple = (30, 100)
    sra_accessions: int = 10          # SRASearch(10): 22 actions
    sra_traces: int = 50
    sra_iter: int = 20000
    ipcov_targets: tuple = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    ipcov_seeds: int = 3
    ipcov_scenario: str = "slb_ecs_rds"
    ipcov_pool: int = 100
    qj_iter: int = 4000               # queue-jump MCMC on simple_ecs (Python likelihood)
    alphas: tuple = (0.05, 0.1, 0.2, 1 / 3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
    n_exec: int = 200                 # frontier executions per alpha / executor runs
    workers: int = 4
    gpu_chains: int = 64
    seed: int = 0

    def __post_init__(self):
        check_preset(self)

    def dry_run(self) -> BpopPreset:
        """Loop counts cut (iterations, seeds, grid points, repeats), sizes kept (actions, traces, chains)."""
        return replace(self, n_iter=min(self.n_iter, 400), sra_iter=min(self.sra_iter, 400),
                       qj_iter=min(self.qj_iter, 200), recovery_seeds=1, ipcov_seeds=1,
                       validation_seeds=min(self.validation_seeds, 1), persona_seeds=min(self.persona_seeds, 1),
                       persona_validation_seeds=min(self.persona_validation_seeds, 1),
                       majority_datasets=min(self.majority_datasets, 50),
                       ipcov_targets=self.ipcov_targets[-2:],
                       recovery_scenarios=(self.recovery_scenarios[0], self.recovery_scenarios[-1]),
                       timing_ns=self.timing_ns[:3], timing_orders=1, timing_repeat=1,
                       alphas=self.alphas[::3], n_exec=min(self.n_exec, 50))


PRESETS = {
    "smoke": BpopPreset(timing_ns=(5, 6, 7, 8), timing_orders=1, timing_repeat=1, n_iter=300, n_chains=1,
                        recovery_scenarios=("simple_ecs", "slb_ecs_rds"), recovery_seeds=1, sra_iter=200,
                        persona_seeds=1, persona_validation_seeds=1, majority_datasets=100,
                        ipcov_targets=(0.6, 1.0), ipcov_seeds=1, qj_iter=100, n_exec=50,
                        alphas=(0.1, 1 / 3, 0.5, 0.9)),
    "book": BpopPreset(),
    # n_iter and sra_iter sized from the cost model (issue 43): an MCMC iteration is launch-bound on a GPU
    # (about 150 operators, 0.75 ms whatever the batch), so 100,000 iterations per study projected 565 s
    # (notebook 1, seven studies) and 315 s (notebook 2); 25,000 project about 140 s each.
    "gpu": BpopPreset(n_iter=25000, sra_iter=25000, n_chains=8, recovery_seeds=10, ipcov_seeds=10,
                      recovery_chains=4, validation_seeds=2, persona_seeds=10, persona_validation_seeds=3,
                      majority_datasets=1000,
                      timing_ns=(6, 8, 10, 12, 14, 16, 18), timing_orders=5, timing_repeat=5, qj_iter=20000,
                      n_exec=2000),
}


def preset(scale: str | None = "book") -> BpopPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
