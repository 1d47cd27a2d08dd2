"""Input checks shared by the unrolled-gsp modules (the message names the argument first)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..core.checks import check_device as _check_device
from ..core.checks import check_preset  # noqa: F401


def check_tensor(name: str, x, ndim: int | None = None) -> torch.Tensor:
    """A tensor (of ``ndim`` dimensions when given) whose floating entries are finite."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x


def check_int(name: str, value, low: int) -> int:
    """An integer (Python or NumPy, not a bool) ``>= low``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def check_float(name: str, value, low: float | None = None, high: float | None = None,
                high_open: bool = False, low_open: bool = False) -> float:
    """A finite real number (not a bool) in the interval given by ``low``/``high`` (open ends on request)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value}")
    if high is not None and (value >= high if high_open else value > high):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value}")
    return value


def check_device(device, name: str = "device") -> torch.device | None:
    """``None`` (the caller's default) or a usable device (:func:`icml26.core.checks.check_device`)."""
    return _check_device(device, name, allow_none=True)
