"""Input checks shared by the pdrf modules (one message style: the argument's name first)."""

from __future__ import annotations

import math

import torch

from ..core.checks import check_device as _check_device
from ..core.checks import check_generator, check_preset  # noqa: F401


def check_int(name: str, v, lo: int = 1) -> int:
    """An int (not a bool) ``>= lo``; anything else is a ValueError naming ``name``."""
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return v


def check_real(name: str, v, lo: float | None = None, hi: float | None = None, strict: bool = False) -> float:
    """A finite real number (not a bool) in ``[lo, hi]`` (``(lo, hi)`` when ``strict``)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    v = float(v)
    below = lo is not None and (v <= lo if strict else v < lo)
    above = hi is not None and (v >= hi if strict else v > hi)
    if not math.isfinite(v) or below or above:
        raise ValueError(f"{name} must be a finite number{_bounds(lo, hi, strict)}, got {v!r}")
    return v


def _bounds(lo, hi, strict: bool) -> str:
    parts = ([f"{'>' if strict else '>='} {lo}"] if lo is not None else []) + \
            ([f"{'<' if strict else '<='} {hi}"] if hi is not None else [])
    return (" " + " and ".join(parts)) if parts else ""


def check_device(device, name: str = "device") -> torch.device | None:
    """``None`` (the caller's default) or a usable device (:func:`icml26.core.checks.check_device`)."""
    return _check_device(device, name, allow_none=True)
