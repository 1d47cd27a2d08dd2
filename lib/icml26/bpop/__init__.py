"""BPOP: Bayesian inference of latent partial orders from linearised agent traces (ICML 2026).

- :mod:`.method`: partial orders, the frontier-softmax likelihood (looped and batched), queue-jump.
- :mod:`.mcmc`: the chain-batched Metropolis-Hastings sampler over (U, rho, beta).
- :mod:`.baselines`: Always-before, Majority, Heuristics Miner (built-in and pm4py).
- :mod:`.scenarios`: Cloud-IaC-6, simulated agents, scheduler logs, WFCommons shapes, IP-Cov.
- :mod:`.evaluation`: point estimates, Edge-F1/SHD, safety, calibration, the compiled executor.
- :mod:`.experiments`: the notebooks' runners. :mod:`.presets`: scales.
"""

from .baselines import (
    always_before,
    directly_follows,
    heuristics_miner,
    hm_dependency,
    majority,
    precedence_counts,
)
from .evaluation import (
    calibration,
    closure_recall,
    edge_metrics,
    execution_validity,
    feasibility,
    frontier_executions,
    point_estimate,
    simulate_execution,
)
from .mcmc import (
    BETA_INIT,
    RHO_INIT,
    RHO_TOL,
    MCMCConfig,
    Posterior,
    log_prior_U,
    realizer_init,
    run_mcmc,
    run_mcmc_many,
)
from .method import (
    CLOUD_IAC6,
    PartialOrder,
    batched_log_likelihood,
    break_cycles,
    chosen_tensor,
    count_linear_extensions,
    dominance,
    prior_sample_U,
    queue_jump_log_likelihood,
    remaining_tensor,
    sample_trace,
    step_probabilities,
    trace_log_likelihood,
    transitive_closure,
    transitive_reduction,
)
from .presets import PRESETS, BpopPreset, preset
from .scenarios import (
    cloud_iac,
    epigenomics_dag,
    expert_trace,
    ip_coverage,
    permute_ids,
    random_order,
    scheduler_traces,
    select_traces_for_ipcov,
    simulate_agents,
    softmax_traces,
    softmax_traces_batch,
    srasearch_dag,
    tremble,
)

__all__ = [
    "BETA_INIT", "CLOUD_IAC6", "PRESETS", "RHO_INIT", "RHO_TOL", "BpopPreset", "MCMCConfig", "PartialOrder",
    "Posterior", "always_before",
    "batched_log_likelihood", "break_cycles", "calibration", "chosen_tensor", "closure_recall", "cloud_iac",
    "count_linear_extensions", "directly_follows", "dominance", "edge_metrics", "epigenomics_dag",
    "execution_validity", "expert_trace", "feasibility", "frontier_executions", "gpu_check", "heuristics_miner",
    "hm_dependency", "ip_coverage", "log_prior_U", "majority", "permute_ids", "point_estimate", "precedence_counts",
    "preset", "prior_sample_U", "queue_jump_log_likelihood", "random_order", "realizer_init", "remaining_tensor",
    "run_mcmc", "run_mcmc_many", "sample_trace", "scheduler_traces", "select_traces_for_ipcov", "simulate_agents",
    "simulate_execution", "softmax_traces", "softmax_traces_batch", "srasearch_dag", "step_probabilities",
    "trace_log_likelihood", "transitive_closure", "transitive_reduction", "tremble",
]


def gpu_check(dev):
    """The headline kernel at gpu sizes: the chain-batched likelihood on Epigenomics (41 actions)."""
    import numpy as np
    import torch

    cfg = preset("gpu")
    po = epigenomics_dag(1, 9)
    Y = scheduler_traces(po, 54, seed=0)
    R = remaining_tensor(Y, po.n, device=dev)
    ch = chosen_tensor(Y, device=dev)
    U = torch.as_tensor(np.random.default_rng(0).standard_normal((cfg.gpu_chains, po.n, 3)), device=dev)
    beta = torch.ones(cfg.gpu_chains, dtype=torch.float64, device=dev)

    def likelihood():
        return batched_log_likelihood(R, dominance(U), beta, 0.05, ch)

    return {"batched likelihood, 41 actions x 54 traces x chains": likelihood}
