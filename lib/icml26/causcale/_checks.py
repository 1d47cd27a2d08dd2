"""Input checks shared by the causcale modules (the message names the argument first)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..core.checks import check_device, check_generator, check_preset  # noqa: F401


def check_int(name: str, value, lo: int) -> int:
    """An integer (Python or NumPy, not a bool) ``>= lo``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


def check_real(name: str, value, lo: float | None = None, strict: bool = False) -> float:
    """A finite real number (not a bool), ``>= lo`` (``> lo`` when ``strict``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or (lo is not None and (value <= lo if strict else value < lo)):
        bound = "" if lo is None else f" and {'>' if strict else '>='} {lo}"
        raise ValueError(f"{name} must be finite{bound}, got {value}")
    return value


def check_rng(rng) -> np.random.Generator:
    """None (seed 0), a non-negative int seed or a ``numpy.random.Generator``."""
    if rng is None:
        return np.random.default_rng(0)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(check_int("rng", rng, 0))
    if isinstance(rng, np.random.Generator):
        return rng
    raise TypeError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")


def as_matrix(name: str, a) -> np.ndarray:
    """A numeric array or tensor as float64 NumPy."""
    if a is None or isinstance(a, (str, bytes)):
        raise TypeError(f"{name} must be a numeric [n, n] array, got {type(a).__name__}")
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().double().numpy()
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric [n, n] array, got {type(a).__name__}") from exc


def check_binary(name: str, a) -> np.ndarray:
    """A square 0/1 matrix (an adjacency or a thresholded prediction) as int64."""
    a = as_matrix(name, a)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square [n, n] matrix, got shape {a.shape}")
    if not np.all(np.isin(a, (0, 1))):
        raise ValueError(f"{name} must be a 0/1 matrix (threshold probabilities first), got values such as "
                         f"{a[~np.isin(a, (0, 1))][:3].tolist()}")
    return a.astype(np.int64)


