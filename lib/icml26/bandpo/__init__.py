"""BandPO (Li et al., ICML 2026): probability-aware clipping bounds from f-divergence trust regions.

The Band operator (:func:`band_bounds`) maps the old probability of each sampled token to the range
of ratios reachable inside an f-divergence ball; BandPO uses it in place of PPO's fixed clip
interval. Baselines (Clip, Clip-Higher, DCPO) are bound rules with the same signature.
"""

from .baselines import BOUND_RULES, clip_bounds, dcpo_bounds, make_bound_fn
from .envs import ChainPolicy, HeadTailBandit, TokenChainTask
from .experiments import (
    BIN_LABELS,
    P_BINS,
    bandit_methods,
    bandit_summary,
    clip_table,
    parity_experiment,
    random_old_distribution,
    rearrangement_check,
    run_bandit,
    run_token,
    train_bandit,
    train_token_policy,
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
from .presets import PRESETS, preset

__all__ = [
    "BIN_LABELS", "BOUND_RULES", "DIVERGENCES", "P_BINS", "PRESETS", "ChainPolicy", "Divergence",
    "HeadTailBandit", "TokenChainTask", "band_bounds", "band_bounds_bisect", "band_bounds_closed_form",
    "band_bounds_cvxpy", "band_bounds_from_logprob", "band_constraint", "bandit_methods", "bandit_summary", "clip_bounds",
    "clip_table", "clipped_surrogate_loss", "dcpo_bounds", "grpo_advantages", "make_bound_fn",
    "p_min_for", "parity_experiment", "preset", "probability_margins", "quadratic_band",
    "random_old_distribution", "rearrangement_check", "run_bandit", "run_token", "train_bandit",
    "train_token_policy", "warm_start",
]
