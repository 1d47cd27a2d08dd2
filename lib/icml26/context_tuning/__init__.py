"""Context Tuning for In-Context Optimization (Lu, Teehan, Yang, Ren; arXiv:2507.04221, ICML 2026).

The paper's methods on a tiny transformer that learns linear regression in context (the book's
stand-in for an LLM, spec Sec. 7):

- :mod:`.model`: the task family, the tokens, :class:`TinyICLTransformer` (a cache-producing causal pass
  over demonstrations, queries that attend to a masked cache), pretraining and the shipped checkpoint.
- :mod:`.method`: CT-KV and CT-Prompt (leave-one-out masking, token dropout), batched over tasks.
- :mod:`.baselines`: zero-shot, ICL, Prefix and Prompt Tuning from irrelevant tokens, test-time training
  (full weights, per task), TTT followed by CT-KV, the ridge oracle.
- :mod:`.experiments`: the notebooks' runners. :mod:`.presets`: scales.
  :mod:`.pretrain`: ``python -m icml26.context_tuning.pretrain`` regenerates the checkpoint.
"""

from .baselines import (
    PerTaskModel,
    empty_context,
    icl_predict,
    irrelevant_tokens,
    prefix_tuning,
    prompt_tuning,
    ridge_predict,
    test_time_training,
    ttt_then_ct_kv,
    zero_shot_predict,
)
from .method import (
    check_context,
    ct_kv,
    ct_prompt,
    dropout_mask,
    evaluate,
    loo_encoding_mask,
    loo_mask,
)
from .model import (
    EXPECTED_DIGEST,
    RECIPE,
    ICLTaskConfig,
    TinyICLTransformer,
    demo_tokens,
    fingerprint,
    load_log,
    load_pretrained,
    pretrain,
    query_tokens,
    sample_tasks,
    state_digest,
)
from .presets import PRESETS, CTPreset, preset

__all__ = [
    "EXPECTED_DIGEST", "PRESETS", "RECIPE", "CTPreset", "ICLTaskConfig", "PerTaskModel", "TinyICLTransformer",
    "check_context", "ct_kv", "ct_prompt", "demo_tokens", "dropout_mask", "empty_context", "evaluate",
    "fingerprint", "gpu_check", "icl_predict", "irrelevant_tokens", "load_log", "load_pretrained",
    "loo_encoding_mask", "loo_mask", "prefix_tuning", "pretrain", "preset", "prompt_tuning", "query_tokens",
    "ridge_predict", "sample_tasks", "state_digest", "test_time_training", "ttt_then_ct_kv", "zero_shot_predict",
]


def gpu_check(dev):
    """The chapter's headline kernels at the gpu preset's sizes: one CT-KV and one CT-Prompt run
    (10 steps each) on the gpu preset's task batch."""
    import torch

    cfg = preset("gpu")
    model = load_pretrained(setting="gpu", device=dev)
    t = sample_tasks(cfg.n_tasks, cfg.k, cfg.n_queries, ICLTaskConfig(), torch.Generator().manual_seed(0), dev)
    q = min(cfg.n_tasks_quadratic, cfg.n_tasks)
    return {
        "ct-kv 10 steps": lambda: ct_kv(model, t["x_demo"], t["y_demo"], steps=10),
        "ct-prompt 10 steps": lambda: ct_prompt(model, t["x_demo"][:q], t["y_demo"][:q], steps=10),
    }
