"""Preconditioned DeltaNet (Tumma, Loo and Rus, ICML 2026): curvature-aware delta-rule recurrences.

Method (:mod:`.method`): the diagonal preconditioner (:func:`atk_state`, :func:`squash_preconditioner`),
the delta rule with asymmetric read/write keys in recurrent and chunkwise form, and the full
PDN / PGDN / PKDA operator :func:`precond_delta_rule`. Baselines (:mod:`.baselines`): linear attention
and exact preconditioning (RLS, ridge, MesaNet read-out). Model (:mod:`.model`) and runners
(:mod:`.experiments`) for the notebooks; the fair comparisons of write rules (tuned on validation seeds,
paired test seeds, costs, a no-memory control row, DeltaNet as the baseline) in :mod:`.comparisons`; presets in
:mod:`.presets`.
"""

from .baselines import (
    linear_attention,
    mesa_readout,
    preconditioned_queries,
    ridge_state,
    rls_delta_rule,
    rls_states,
)
from .comparisons import (
    NO_MEMORY,
    REGRESSION_SETTINGS,
    SCHEDULED,
    WRITE_RULES,
    Rule,
    against_control,
    compare_rules,
    ratio_by_token,
    recall_accuracy,
    recall_comparisons,
    recall_data,
    recall_rules,
    regression_by_token,
    regression_comparisons,
    regression_data,
    regression_errors,
    regression_rules,
    rls_errors,
    step_schedule,
    write_flops,
    write_multiplier,
)
from .experiments import (
    MQAR_VARIANTS,
    agreement_table,
    anisotropic_keys,
    build_model,
    eigen_samples,
    ema_preconditioner,
    evaluate_mqar,
    exactness_table,
    mqar_batch,
    mqar_benchmark,
    nonnormal_writes,
    online_regression,
    random_inputs,
    recall_curves,
    regression_stream,
    single_pass_recall,
    stress_test,
    time_modes,
    train_mqar,
    train_mqar_stacked,
)
from .method import (
    atk_state,
    delta_rule_chunk,
    delta_rule_recurrent,
    delta_rule_states,
    l2_normalize,
    precond_delta_rule,
    squash_preconditioner,
    write_eigenvalues,
)
from .model import DeltaMixer, ShortConv, TinyRecurrentLM
from .presets import PRESETS, PrecondDeltaPreset, preset

SETTINGS = {name: p.__dict__ for name, p in PRESETS.items()}

__all__ = [
    "MQAR_VARIANTS", "NO_MEMORY", "PRESETS", "REGRESSION_SETTINGS", "SCHEDULED", "SETTINGS", "WRITE_RULES", "DeltaMixer", "PrecondDeltaPreset", "Rule", "ShortConv",
    "TinyRecurrentLM", "against_control", "compare_rules", "recall_accuracy", "recall_comparisons", "recall_data",
    "recall_rules", "ratio_by_token", "regression_by_token", "regression_comparisons", "regression_data", "regression_errors", "regression_rules", "rls_errors", "step_schedule", "write_flops", "write_multiplier",
    "agreement_table", "anisotropic_keys", "atk_state", "build_model", "delta_rule_chunk", "delta_rule_recurrent",
    "delta_rule_states", "eigen_samples", "ema_preconditioner", "evaluate_mqar", "exactness_table", "l2_normalize",
    "linear_attention", "mesa_readout", "mqar_batch", "mqar_benchmark", "nonnormal_writes", "online_regression",
    "precond_delta_rule", "preconditioned_queries", "preset", "random_inputs", "recall_curves",
    "regression_stream", "ridge_state", "rls_delta_rule", "rls_states", "single_pass_recall",
    "squash_preconditioner", "stress_test", "time_modes", "train_mqar", "train_mqar_stacked", "write_eigenvalues",
]
