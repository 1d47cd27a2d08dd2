"""Spreads the chapters report: a percentile bootstrap of a mean (of values, or of paired differences).

Every chapter that says "A beats B" on a handful of seeds or test cases reports the interval from
here, so the same resampling (seeded, ``n_boot`` resamples with replacement) sits behind every
interval in the book."""

from __future__ import annotations

import numpy as np


def bootstrap_mean(values, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` and its percentile bootstrap interval at ``level``: ``(mean, lo, hi)``.

    For a paired comparison pass the per-case differences ``a - b`` (same seeds, same test users)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("values must be finite (no NaN or inf)")
    if not isinstance(n_boot, (int, np.integer)) or isinstance(n_boot, bool) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")
    if not (isinstance(level, float) and 0.0 < level < 1.0):
        raise ValueError(f"level must be a float in (0, 1), got {level!r}")
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, (n_boot, v.size))].mean(1)
    a = round((1.0 - level) / 2, 12)       # 0.025 exactly for level 0.95
    return float(v.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1.0 - a))
