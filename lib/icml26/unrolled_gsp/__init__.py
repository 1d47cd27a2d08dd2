"""Unrolled mixed-graph ADMM for traffic forecasting (Qi et al., ICML 2026; arXiv 2505.13102).

- :mod:`.data`: the SynthRoad generator, kNN graphs, windows.
- :mod:`.method`: graph operators (GLR, GTV, DGLR, DGTV), soft threshold, CG, the classical ADMM,
  graph learning (attention), the ADMM block and the unrolled forecaster.
- :mod:`.baselines`: persistence, historical average, ridge, a small spatio-temporal transformer.
- :mod:`.experiments`: training, evaluation and the notebooks' runners. :mod:`.presets`: scales.
"""

from .baselines import (
    STTransformer,
    historical_average,
    historical_average_fn,
    persistence,
    persistence_forecast,
    ridge_forecaster,
)
from .data import (
    RoadTraffic,
    knn_neighbors,
    make_road_network,
    make_windows,
    residual_correlations,
    simulate_traffic,
)
from .method import (
    ABLATIONS,
    ADMMBlock,
    DirectedTemporalOperator,
    Extrapolator,
    FeatureExtractor,
    GraphLearningModule,
    SpatialOperator,
    UndirectedTemporalOperator,
    UnrolledGSPForecaster,
    admm_init,
    admm_solve,
    admm_step,
    augmented_lagrangian,
    cg_solve,
    closed_form,
    count_parameters,
    decaying_temporal_weights,
    dense_matrix,
    dglr,
    dgtv,
    distance_spatial_weights,
    fit_ridge,
    glr,
    gtv,
    normalise_directed,
    normalise_spatial,
    objective,
    soft_threshold,
    unrolled_cg,
)
from .presets import PRESETS, UnrolledGSPPreset, preset

__all__ = [
    "ABLATIONS", "ADMMBlock", "DirectedTemporalOperator", "Extrapolator", "FeatureExtractor",
    "GraphLearningModule", "PRESETS", "RoadTraffic", "STTransformer", "SpatialOperator",
    "UndirectedTemporalOperator", "UnrolledGSPForecaster", "UnrolledGSPPreset", "admm_init", "admm_solve",
    "admm_step", "augmented_lagrangian", "cg_solve", "closed_form", "count_parameters",
    "decaying_temporal_weights", "dense_matrix", "dglr", "dgtv", "distance_spatial_weights", "fit_ridge",
    "glr", "gpu_check", "gtv", "historical_average", "historical_average_fn", "knn_neighbors",
    "make_road_network", "make_windows", "normalise_directed", "normalise_spatial", "objective", "persistence",
    "persistence_forecast", "preset", "residual_correlations", "ridge_forecaster", "simulate_traffic",
    "soft_threshold", "unrolled_cg",
]


def gpu_check(dev):
    """One training step of the paper-configuration unrolled model at the gpu preset's sizes."""
    import torch

    from .experiments import _masked_huber, build_model, make_benchmark

    cfg = preset("gpu")
    bench = make_benchmark(cfg)
    model = build_model(cfg, bench).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    tr = bench["windows"]["train"]
    b = {k: v[:cfg.batch_size].to(dev) for k, v in tr.items()}

    def train_step():
        out = model(b["x"][:, :cfg.t_in], b["tod"], b["dow"], b["mask"][:, :cfg.t_in])
        loss = _masked_huber(out, b["x"], b["mask"].float())
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.clamp_()
        return loss

    return {"unrolled model train step": train_step}
