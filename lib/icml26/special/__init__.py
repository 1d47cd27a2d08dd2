"""SPECIAL (Xu and Li, ICML 2026): server-side proximal anchoring for federated
domain-incremental learning. See :mod:`icml26.special.method` for the equations."""

from .baselines import client_shards, fedavg_server_step, replay_indices
from .data import DomainData, dirichlet_partition, make_digit_domains, validate_domains, validation_domains
from .method import (
    FDILConfig,
    FDILResult,
    client_mean_update,
    init_mlp,
    local_train_batched,
    local_train_loop,
    mlp_forward,
    n_params,
    run_fdil,
    run_fdil_many,
    run_fdil_seeds,
    server_proximal_step,
    special_server_step,
)
from .metrics import all_metrics, average_accuracy, backward_transfer, forgetting, plasticity
from .presets import PRESETS, SpecialPreset, preset
from .theory import (
    bkt_bound,
    bkt_sweep,
    convergence_experiment,
    fit_slopes,
    make_quadratic_tasks,
    quad_smoothness,
    run_quadratic_fdil,
    toy_curvature,
)

__all__ = [
    "PRESETS",
    "SpecialPreset",
    "preset",
    "DomainData",
    "FDILConfig",
    "FDILResult",
    "all_metrics",
    "average_accuracy",
    "backward_transfer",
    "bkt_bound",
    "bkt_sweep",
    "client_mean_update",
    "client_shards",
    "convergence_experiment",
    "dirichlet_partition",
    "fedavg_server_step",
    "fit_slopes",
    "forgetting",
    "init_mlp",
    "local_train_batched",
    "local_train_loop",
    "make_digit_domains",
    "make_quadratic_tasks",
    "mlp_forward",
    "n_params",
    "plasticity",
    "quad_smoothness",
    "replay_indices",
    "run_fdil",
    "run_fdil_many",
    "run_fdil_seeds",
    "run_quadratic_fdil",
    "server_proximal_step",
    "special_server_step",
    "toy_curvature",
    "validate_domains",
    "validation_domains",
]
