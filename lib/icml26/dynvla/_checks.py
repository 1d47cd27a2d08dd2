"""Input checks shared by the dynvla modules (the message names the argument first)."""

from __future__ import annotations

import numpy as np
import torch

from ..core.checks import check_device, check_generator, check_preset  # noqa: F401


def pos_int(v, name: str, lo: int = 1) -> int:
    """An integer (Python or NumPy, not a bool) ``>= lo``; otherwise a ValueError naming ``name``."""
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def real(v, name: str, lo: float | None = None, strict: bool = False, hi: float | None = None) -> float:
    """A finite real number (not a bool) ``>= lo`` (``> lo`` when ``strict``) and ``<= hi``."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    v = float(v)
    bad = not np.isfinite(v) or (lo is not None and (v <= lo if strict else v < lo)) or (hi is not None and v > hi)
    if bad:
        parts = ([f"{'>' if strict else '>='} {lo}"] if lo is not None else []) + \
                ([f"<= {hi}"] if hi is not None else [])
        raise ValueError(f"{name} must be a finite number{' ' + ' and '.join(parts) if parts else ''}, got {v!r}")
    return v


def flag(v, name: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(v).__name__}")
    return bool(v)


def generator(g, name: str = "generator") -> torch.Generator | None:
    """None or a ``torch.Generator``: :func:`icml26.core.checks.check_generator`."""
    return check_generator(g, name)


def device(d, name: str = "dev") -> torch.device | None:
    """None, or a 'cpu'/'cuda' device this torch build can use: :func:`icml26.core.checks.check_device`."""
    return check_device(d, name, allow_none=True)


def unit_interval(x, name: str):
    """A number, array or tensor of finite values in [0, 1] (a sub-metric); returned unchanged, except
    that a list or tuple becomes a float array."""
    if isinstance(x, bool) or x is None or isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be a number, array or tensor in [0, 1], got {type(x).__name__}")
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool or x.is_complex():
            raise TypeError(f"{name} must hold real numbers in [0, 1], got {x.dtype}")
        ok = bool((torch.isfinite(x) & (x >= 0) & (x <= 1)).all()) if x.is_floating_point() else \
            bool(((x >= 0) & (x <= 1)).all())
    else:
        try:
            a = np.asarray(x, dtype=float)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name} must be a number, array or tensor in [0, 1], got {type(x).__name__}") from e
        if np.asarray(x).dtype == bool:
            raise TypeError(f"{name} must hold real numbers in [0, 1], got booleans")
        ok = bool(np.all(np.isfinite(a) & (a >= 0) & (a <= 1)))
        if isinstance(x, (list, tuple)):
            x = a
    if not ok:
        raise ValueError(f"{name} must lie in [0, 1] (a sub-metric score), got values outside it")
    return x


