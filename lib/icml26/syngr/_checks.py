"""Input checks shared by the syngr modules (the message names the argument first)."""

from __future__ import annotations

import numpy as np
import torch

from ..core.checks import check_device, check_generator, check_preset  # noqa: F401

MAX_TABLE_BYTES = 256 * 2**20
"""Largest dense probability table (float64) that :func:`~icml26.syngr.pid.empirical_table` and
:func:`~icml26.syngr.pid.syncat_style_table` build: 256 MiB, about 33.5 million cells."""


def pos_int(v, name: str, lo: int = 1) -> int:
    """An integer (Python or NumPy, not a bool) ``>= lo``; otherwise a ValueError naming ``name``."""
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def real(v, name: str, lo: float | None = None, strict: bool = False) -> float:
    """A finite real number (not a bool), ``>= lo`` (``> lo`` when ``strict``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a finite number, got {v!r}")
    v = float(v)
    if not np.isfinite(v) or (lo is not None and (v <= lo if strict else v < lo)):
        bound = "" if lo is None else f" {'>' if strict else '>='} {lo}"
        raise ValueError(f"{name} must be a finite number{bound}, got {v!r}")
    return v


def flag(v, name: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(v).__name__}")
    return bool(v)


def generator(g, name: str = "generator") -> torch.Generator | None:
    """None or a ``torch.Generator``: :func:`icml26.core.checks.check_generator`."""
    return check_generator(g, name)


def device(d, name: str = "device") -> torch.device:
    """A 'cpu'/'cuda' device this torch build can use: :func:`icml26.core.checks.check_device`."""
    return check_device(d, name)


def table_bytes(shape, name: str, what: str = "table") -> int:
    """Bytes of a dense float64 array of ``shape``; a ValueError naming ``name`` above MAX_TABLE_BYTES."""
    cells = 1
    for s in shape:
        cells *= int(s)
    nbytes = 8 * cells
    if nbytes > MAX_TABLE_BYTES:
        raise ValueError(f"{name}: the dense {what} of shape {tuple(int(s) for s in shape)} would take "
                         f"{nbytes / 2**30:.3g} GiB, above the limit of {MAX_TABLE_BYTES / 2**20:.0f} MiB "
                         "(syngr._checks.MAX_TABLE_BYTES); relabel the values to 0..k-1 first")
    return nbytes


