"""DP-C4: removing the solution bias of differentially private optimisation (ICML 2026).

Only the abstract is public: :func:`dp_c4` is **the book's reconstruction from the abstract**.

- :mod:`.problems`: finite-sum problems (1-D toy, heavy-tailed logistic, breast cancer, digits MLP).
- :mod:`.method`: clipping, staged threshold schedules, DP-C4 (Algorithm 1).
- :mod:`.baselines`: DP-SGD / DP-GD and noiseless clipped GD.
- :mod:`.accounting`: RDP, GDP, calibration and the tailored allocation (Algorithms 2-3).
- :mod:`.experiments`: runners the notebooks call. :mod:`.presets`: scales.
"""

from .accounting import (
    ORDERS,
    allocate_sigmas,
    calibrate_sigma,
    eps_from_rdp,
    epsilon,
    gdp_delta,
    gdp_eps,
    gdp_mu,
    rdp_subsampled_gaussian,
    replace_one_eps,
)
from .baselines import dp_sgd
from .experiments import (
    accountant_comparison,
    accountant_table,
    best_of_grid,
    bootstrap_ratio,
    clipped_fixed_points,
    comparison_table,
    decay_race,
    eps_vs_stages,
    eps_vs_steps,
    equal_privacy,
    evaluate,
    loglog_slope,
    noiseless_race,
    paired_comparisons,
    probe_edges,
    run_configs,
    runs_frame,
    sensitivity_check,
    tilt_vs_n,
    validated,
    zero_model_distance,
)
from .method import StagedSchedule, Trace, clip_rows, dp_c4, dp_c4_step, geometric_thresholds
from .presets import PRESETS, DPC4Preset, preset
from .problems import (
    FiniteSumProblem,
    MLPProblem,
    breast_cancer_logistic,
    digits_mlp,
    heavy_tailed_logistic,
    toy_problem,
)

__all__ = [
    "ORDERS",
    "allocate_sigmas",
    "calibrate_sigma",
    "eps_from_rdp",
    "epsilon",
    "gdp_delta",
    "gdp_eps",
    "gdp_mu",
    "rdp_subsampled_gaussian",
    "replace_one_eps",
    "run_configs",
    "runs_frame",
    "validated",
    "zero_model_distance",
    "dp_sgd",
    "StagedSchedule",
    "Trace",
    "clip_rows",
    "dp_c4",
    "dp_c4_step",
    "geometric_thresholds",
    "FiniteSumProblem",
    "MLPProblem",
    "breast_cancer_logistic",
    "digits_mlp",
    "heavy_tailed_logistic",
    "toy_problem",
    "accountant_comparison",
    "comparison_table",
    "paired_comparisons",
    "probe_edges",
    "accountant_table",
    "best_of_grid",
    "bootstrap_ratio",
    "clipped_fixed_points",
    "decay_race",
    "eps_vs_stages",
    "eps_vs_steps",
    "equal_privacy",
    "evaluate",
    "loglog_slope",
    "noiseless_race",
    "sensitivity_check",
    "tilt_vs_n",
    "PRESETS",
    "DPC4Preset",
    "preset",
    "gpu_check",
]


def gpu_check(dev):
    """One DP-C4 run of 20 private steps at the gpu preset's sizes on ``dev`` (for ``make gpu-check``)."""
    import torch

    cfg = preset("gpu")
    train, _ = heavy_tailed_logistic(cfg.n, cfg.d, cfg.lam, seed=cfg.seed, device=dev)
    sch = StagedSchedule(geometric_thresholds(1.0, 0.7, 2).repeat(cfg.seeds, 1),
                         torch.full((cfg.seeds, 2), 5.0), 10)
    gen = torch.Generator(device=dev).manual_seed(0)
    return lambda: dp_c4(train, sch, cfg.lr, cfg.q, gen, log_every=10)
