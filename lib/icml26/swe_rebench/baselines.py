"""The baselines SWE-rebench V2 compares against, gathered in one place.

- **Non-interactive setup** (the paper's setup ablation, Sec. 3.7: a fixed workflow of the same
  model reaches setup pass@1 12.1% against 25.8% for the interactive agent):
  :class:`~icml26.swe_rebench.setup_agent.OneShotSetupAgent`, which submits the conventional
  command and never reads an error.
- **Two-state validation** (the paper's rule, eqs. 1-2 of :mod:`.method`), which the book's
  three-state rule refines for compiled languages: :func:`two_state_transitions`.
- **Single judges** instead of an ensemble (Sec. 3.4): :func:`single_judge_decisions`.
"""

from __future__ import annotations

import numpy as np

from .method import classify_transitions
from .setup_agent import OneShotSetupAgent


def two_state_transitions(test: dict, fix: dict) -> dict[str, list[str]]:
    """F2P/P2P/... from the test and fix states only (a test absent before counts as failing)."""
    return classify_transitions(None, test, fix)


def single_judge_decisions(scores: np.ndarray, threshold: float = 2.0) -> np.ndarray:
    """Drop decisions of each judge alone, ``[n_judges, n_tasks]`` (True = underspecified)."""
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2:
        raise ValueError(f"scores must be a 2-D array [n_judges, n_tasks], got shape {s.shape}")
    return s >= threshold


__all__ = ["OneShotSetupAgent", "single_judge_decisions", "two_state_transitions"]
