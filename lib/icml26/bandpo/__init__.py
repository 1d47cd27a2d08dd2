"""BandPO (Li et al., ICML 2026): probability-aware clipping bounds from f-divergence trust regions.

The Band operator (:func:`band_bounds`) maps the old probability of each sampled token to the range
of ratios reachable inside an f-divergence ball; BandPO uses it in place of PPO's fixed clip
interval. Baselines (Clip, Clip-Higher, DCPO) are bound rules with the same signature.
"""

from .baselines import (
    BOUND_RULES,
    BandRule,
    clip_bounds,
    dcpo_bounds,
    evaluate_rules,
    make_bound_fn,
    no_clip_bounds,
    split_bounds,
)
from .envs import ChainPolicy, HeadTailBandit, TokenChainTask
from .experiments import (
    BIN_LABELS,
    CLIP_ROWS,
    P_BINS,
    RUN_STATS,
    TUNED_FAMILIES,
    ablation_rules,
    bandit_kwargs,
    bandit_methods,
    bandit_rule,
    bandit_summary,
    clip_table,
    config_label,
    entropy_window,
    paired_gain,
    parity_experiment,
    random_old_distribution,
    rearrangement_check,
    regime_rules,
    run_bandit,
    run_score,
    run_token,
    sweep_bandit,
    sweep_frame,
    token_kwargs,
    train_bandit,
    train_token_policy,
    validation_score,
    warm_start,
)
from .method import (
    DIVERGENCES,
    Divergence,
    band_bounds,
    band_bounds_bisect,
    band_bounds_closed_form,
    band_bounds_cvxpy,
    band_bounds_from_logprob,
    band_constraint,
    clipped_surrogate_loss,
    grpo_advantages,
    p_min_for,
    probability_margins,
    quadratic_band,
)
from .presets import PRESETS, BanditPreset, ChapterPresets, OperatorPreset, TokenPreset, preset

__all__ = [
    "BIN_LABELS", "BOUND_RULES", "CLIP_ROWS", "BanditPreset", "ChapterPresets", "OperatorPreset", "TokenPreset",
    "DIVERGENCES", "P_BINS", "PRESETS", "ChainPolicy", "Divergence", "ablation_rules", "bandit_kwargs",
    "entropy_window", "no_clip_bounds", "paired_gain", "regime_rules", "split_bounds", "token_kwargs",
    "HeadTailBandit", "TokenChainTask", "band_bounds", "band_bounds_bisect", "band_bounds_closed_form",
    "band_bounds_cvxpy", "band_bounds_from_logprob", "band_constraint", "bandit_methods", "bandit_summary", "clip_bounds",
    "clip_table", "clipped_surrogate_loss", "dcpo_bounds", "grpo_advantages", "make_bound_fn",
    "p_min_for", "parity_experiment", "preset", "probability_margins", "quadratic_band",
    "random_old_distribution", "rearrangement_check", "run_bandit", "run_token", "train_bandit",
    "train_token_policy", "warm_start", "BandRule", "RUN_STATS", "TUNED_FAMILIES", "bandit_rule", "config_label",
    "evaluate_rules", "run_score", "sweep_bandit", "sweep_frame", "validation_score",
]
