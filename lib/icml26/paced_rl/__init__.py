"""PACED-RL (Kim et al., ICML 2026, arXiv:2602.12642): the GFlowNet partition function as a
difficulty scheduler for RL with verifiable rewards.

- :mod:`.method`: trajectory balance with pi_ref (FlowRL) or pi_old (PACED-RL) as the prior, the
  least-squares optimal log Z (proposition 3.4), the accuracy estimate, prompt selection and
  error-prioritised replay.
- :mod:`.env`: the enumerable toy task and the autoregressive policy (exact accuracies).
- :mod:`.baselines`: GRPO, history-based selection, dynamic sampling.
- :mod:`.experiments`: the notebooks' runners. :mod:`.presets`: scales.
"""

from .baselines import HistoryEstimator, grpo_advantages, grpo_loss, keep_mixed_groups
from .env import (
    ARPolicy,
    HiddenRuleTask,
    all_sequences,
    effective_correct_answers,
    exact_accuracy,
    exact_pass_at_k,
    warm_start,
)
from .experiments import LABELS, METHODS, make_task, run_methods, train, warm_policy
from .method import (
    ErrorPrioritizedReplay,
    LogPartition,
    accuracy_from_log_z,
    kl_divergence,
    log_z_true,
    mixed_group_probability,
    optimal_log_z,
    select_prompts,
    tb_loss,
    tb_residual,
)
from .presets import PRESETS, PacedPreset, preset

__all__ = [
    "LABELS", "METHODS", "PRESETS", "ARPolicy", "ErrorPrioritizedReplay", "HiddenRuleTask", "HistoryEstimator",
    "LogPartition", "PacedPreset", "accuracy_from_log_z", "all_sequences", "effective_correct_answers",
    "exact_accuracy", "exact_pass_at_k", "gpu_check", "grpo_advantages", "grpo_loss", "keep_mixed_groups",
    "kl_divergence", "log_z_true", "make_task", "mixed_group_probability", "optimal_log_z", "preset",
    "run_methods", "select_prompts", "tb_loss", "tb_residual", "train", "warm_policy", "warm_start",
]


def gpu_check(dev):
    """The chapter's headline kernels at the gpu preset's sizes: 20 PACED-RL steps (selection,
    rollouts, TB loss, replay, exact bias) and one exact evaluation of 512 prompts x 46,656 responses."""
    import copy

    import torch

    from .experiments import exact_acc

    cfg = preset("gpu")
    task = make_task(cfg, dev)
    pol = warm_policy(cfg, task, 0)

    def paced_steps():
        return train("paced", task, copy.deepcopy(pol), steps=20, batch_prompts=cfg.batch_prompts,
                     eval_every=20, n_calib=cfg.n_calib)

    def exact_eval():
        with torch.no_grad():
            return exact_acc(pol, task, task.test_idx)

    return {"paced-rl 20 steps": paced_steps, "exact evaluation 512 x 46656": exact_eval}
