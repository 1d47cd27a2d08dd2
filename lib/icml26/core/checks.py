"""Input checks every chapter module shares: devices, generators and preset fields.

The book's rule for a public function: bad input raises ``ValueError`` or ``TypeError`` whose
message names the argument. These three checks were written again in a dozen modules; they live
here once, and each module imports them.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch


def check_device(device, name: str = "device", *, allow_none: bool = False) -> torch.device | None:
    """A 'cpu' or 'cuda' device this torch build can use, as ``torch.device``.

    CUDA on a CPU-only build, or an index past the visible devices, is a ``ValueError`` naming
    ``name`` (not torch's ``AssertionError`` at the first allocation). ``allow_none=True`` lets
    ``None`` through ("the caller's default")."""
    if device is None and allow_none:
        return None
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{name} must be a device string or torch.device, got {type(device).__name__}")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"{name} must name a torch device such as 'cpu' or 'cuda', got {device!r}") from exc
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} must be a 'cpu' or 'cuda' device, got {str(device)!r}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={str(device)!r}, but this torch build sees no CUDA device; use 'cpu'")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"{name}={str(device)!r}, but only {torch.cuda.device_count()} CUDA device(s) are visible")
    return dev


def check_generator(generator, name: str = "generator") -> torch.Generator | None:
    """``None`` or a ``torch.Generator`` (a device string such as ``"cuda"`` is not a generator)."""
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{name} must be a torch.Generator or None, got {type(generator).__name__}")
    return generator


def _number_ok(value, integer: bool) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return False
    if integer:
        return isinstance(value, (int, np.integer)) and value >= 0
    return isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value) and value >= 0


def check_preset(preset) -> None:
    """Refuse a preset field of the wrong kind or out of range, by name: an ``int`` field holds an
    int >= 0 (not a bool), a ``float`` field a finite number >= 0, a ``bool`` field a bool, and a
    ``tuple`` field finite numbers >= 0 (or strings). Call it from a preset's ``__post_init__``."""
    for f in dataclasses.fields(preset):
        value, ann = getattr(preset, f.name), str(f.type).replace(" ", "")
        if ann in ("int", "int|None", "float", "float|None") and not (value is None and "None" in ann):
            integer = ann.startswith("int")
            if not _number_ok(value, integer):
                raise ValueError(f"{f.name} must be a{'n integer' if integer else ' finite number'} >= 0, "
                                 f"got {value!r}")
        elif ann == "bool" and not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{f.name} must be a bool, got {value!r}")
        elif ann == "tuple":
            if not isinstance(value, (tuple, list)):
                raise ValueError(f"{f.name} must be a tuple, got {value!r}")
            for x in value:
                if not isinstance(x, str) and not _number_ok(x, False):
                    raise ValueError(f"{f.name} must hold finite numbers >= 0 (or names), got {x!r}")
