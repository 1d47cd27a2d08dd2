"""Scale presets of the BandPO chapter: one frozen dataclass per notebook, keyed by scale."""

from __future__ import annotations

from dataclasses import dataclass

from icml26.core import preset_for


@dataclass(frozen=True)
class OperatorPreset:
    """Notebook 1: operator, cvxpy parity and timing."""

    seed: int = 0
    n_parity: int = 30  # random old distributions per divergence solved with cvxpy
    n_grid: int = 999  # p grid for the identities
    n_timing_tokens: int = 100_000  # tokens for the batched-operator timing
    n_map: int = 60  # radii in the delta heat map


@dataclass(frozen=True)
class BanditPreset:
    """Notebook 2: head-tail bandit (spec Sec. 7)."""

    seed: int = 0
    n_seeds: int = 5
    iters: int = 150
    n_contexts: int = 64
    n_actions: int = 16
    group_size: int = 16
    inner_steps: int = 8
    lr: float = 0.1
    deltas: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2)
    early_iters: int = 30  # window of the clip diagnostics
    control_iters: int = 20  # iterations of the inner_steps = 1 control


@dataclass(frozen=True)
class TokenPreset:
    """Notebook 3: token-level task (spec Sec. 7)."""

    seed: int = 0
    n_seeds: int = 3
    iters: int = 200
    n_prompts: int = 128
    seq_len: int = 6
    vocab: int = 12
    prompts_per_iter: int = 32
    group_size: int = 16
    inner_steps: int = 4
    lr: float = 3e-3
    warm_steps: int = 300
    eval_every: int = 10


PRESETS = {
    "smoke": {
        "operator": OperatorPreset(n_parity=4, n_grid=199, n_timing_tokens=10_000, n_map=12),
        "bandit": BanditPreset(n_seeds=1, iters=20, control_iters=5, early_iters=10),
        "token": TokenPreset(n_seeds=1, iters=20, warm_steps=150, eval_every=5),
    },
    "book": {
        "operator": OperatorPreset(),
        "bandit": BanditPreset(),
        "token": TokenPreset(),
    },
    "gpu": {
        "operator": OperatorPreset(n_timing_tokens=10_000_000),
        "bandit": BanditPreset(n_seeds=10, n_contexts=4096),
        "token": TokenPreset(n_seeds=5, n_prompts=2048),
    },
}


def preset(scale: str | None = "book") -> dict:
    """The chapter's presets at ``scale``: ``{"operator": ..., "bandit": ..., "token": ...}``."""
    return preset_for(PRESETS, scale)
