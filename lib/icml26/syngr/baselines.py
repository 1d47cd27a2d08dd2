"""Baselines (spec Sec. 3.7 / 7.3). The generative baselines GR-text, GR-image and GR-fused
(TIGER / MQL4GRec-style) are :class:`~icml26.syngr.method.GRSeq2Seq` with ``history_mode`` set and
the plain NLL (:func:`~icml26.syngr.method.nll_loss`); this module adds the popularity ranking."""

from __future__ import annotations

import numpy as np

from .data import Split, ranks_from_scores


def popularity_ranks(train: Split, split: Split, n_items: int, seed: int = 0) -> np.ndarray:
    """Rank of each target when items are ranked by their frequency as training targets."""
    if not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be a positive integer, got {n_items!r}")
    freq = np.bincount(train.target, minlength=n_items).astype(float)
    return ranks_from_scores(np.broadcast_to(freq, (len(split), n_items)).copy(), split.target, seed)
