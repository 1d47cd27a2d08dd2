"""Gaussian universality breakdown in high-dimensional ERM (Yaakoubi, Louart, Tiomoko & Liao, ICML 2026).

- :mod:`.method`: linear-factor-mixture data, losses/prox, regularisers, batched Newton ERM.
- :mod:`.theory`: the book's characterization (fixed point (E1)-(E4), CGMT min-max, projection law).
- :mod:`.baselines`: Gaussian-equivalent theory, ridge-at-zero, cvxpy reference ERM.
- :mod:`.experiments`: simulation protocol and sweeps. :mod:`.presets`: scales.
"""

from . import published
from .baselines import cosine, fit_erm_cvxpy, gaussian_equivalent_prediction, ridge_at_zero
from .experiments import (
    alpha_sweep,
    equivalence_vs_delta,
    equivalence_vs_p,
    estimator_moments,
    finite_size,
    hinge_sweep,
    l1_counterexample,
    loglog_slope,
    regularizer_pair,
    relative_difference,
    sim_row,
    simulate,
    theory_row,
)
from .method import (
    LFMM,
    LOSSES,
    LatentLaw,
    SeparableReg,
    equivalent_quadratic,
    erm_objective,
    fit_erm,
    gauss_hermite,
    hessian_trace_inv,
    l1,
    logcosh,
    loss_d1,
    loss_d2,
    loss_value,
    moreau,
    prox,
    pseudo_huber,
    quartic,
    ridge,
    signal_strength_model,
    skewed_factor_model,
)
from .presets import PRESETS, CGMTPreset, preset
from .theory import (
    State,
    ao_curve,
    ao_value,
    channel,
    moment_matched_gaussian,
    sample_scores,
    score_cdf,
    score_density,
    solve_ao_cvxpy,
    solve_fixed_point,
    square_kappa_closed_form,
    test_error,
)

__all__ = [
    "LFMM", "LOSSES", "PRESETS", "CGMTPreset", "LatentLaw", "SeparableReg", "State", "alpha_sweep",
    "ao_curve", "ao_value", "channel", "equivalence_vs_delta", "equivalence_vs_p", "finite_size",
    "hinge_sweep", "l1_counterexample", "loglog_slope", "published", "regularizer_pair", "relative_difference", "cosine", "equivalent_quadratic", "erm_objective", "estimator_moments",
    "fit_erm", "fit_erm_cvxpy", "gauss_hermite", "gaussian_equivalent_prediction", "hessian_trace_inv",
    "l1", "logcosh", "loss_d1", "loss_d2", "loss_value", "moment_matched_gaussian", "moreau", "preset",
    "prox", "pseudo_huber", "quartic", "ridge", "ridge_at_zero", "sample_scores", "score_cdf",
    "score_density", "signal_strength_model", "sim_row", "simulate", "skewed_factor_model",
    "solve_ao_cvxpy", "solve_fixed_point", "square_kappa_closed_form", "test_error", "theory_row",
]
