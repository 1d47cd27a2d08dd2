"""Baselines of the watermark chapter (spec Sec. 3.6).

- Fixed defaults: ``(gamma, delta) = (0.25, 2.0)`` (KGW README, Hugging Face ``WatermarkingConfig``)
  and ``(0.5, 2.0)`` (text-generation-inference).
- Uncalibrated theory: Algorithm A with the high-entropy limits ``mu_max`` and ``D_max`` in place of
  the calibrated ``mu1_hat`` and ``D_hat`` (a calibration whose only distribution is uniform on the
  vocabulary has green mass exactly ``gamma_eff`` under every mask).
"""

from __future__ import annotations

import torch

from .framework import calibrate, select_min_distortion
from .method import _positive_int

DEFAULTS = {"default (0.25, 2)": (0.25, 2.0), "default (0.5, 2)": (0.5, 2.0)}


def high_entropy_calibration(n_vocab: int, T_eff, counts=None):
    """A calibration of one uniform distribution: predictions equal ``mu_max`` and ``D_max`` exactly.
    ``counts``: scored tokens per sequence, for the exact power averaged over them (3.4c')."""
    n_vocab = _positive_int("n_vocab", n_vocab, 2)
    return calibrate(torch.full((1, n_vocab), 1.0 / n_vocab), T_eff, n_masks=1, counts=counts)


def select_uncalibrated(n_vocab: int, T_eff, gammas=(0.1, 0.25, 0.5, 0.75), alpha=0.01, target_power=0.9,
                        delta_max=8.0, power_model: str = "normal", counts=None) -> dict:
    """Algorithm A under the high-entropy (uncalibrated) theory; by default with the normal power
    (3.4b) at ``T_eff``; ``power_model="mixture"`` with ``counts`` uses the exact power (3.4c')."""
    return select_min_distortion(high_entropy_calibration(n_vocab, T_eff, counts), gammas, alpha, target_power,
                                 delta_max=delta_max, power_model=power_model)
