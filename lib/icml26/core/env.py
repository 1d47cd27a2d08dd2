"""Environment fingerprint and the one-call notebook setup."""

from __future__ import annotations

import platform
from importlib import metadata

import numpy as np
import torch

from .device import device as pick_device
from .device import seed_all, set_threads
from .scale import resolve_scale
from .style import use_book_style


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def fingerprint(dev: torch.device | None = None) -> dict[str, str]:
    """Versions and device: what a reader needs to compare their numbers with the book's."""
    dev = dev if dev is not None else pick_device()
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or platform.machine()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cvxpy": _version("cvxpy"),
        "icml26": _version("icml26"),
        "device": f"{dev} ({name})",
        "threads": str(torch.get_num_threads()),
    }


def fingerprint_line(dev: torch.device | None = None) -> str:
    return " | ".join(f"{k} {v}" for k, v in fingerprint(dev).items())


def setup(scale: str | None = None, seed: int = 0, *, prefer: str | None = None,
          verbose: bool = True) -> torch.device:
    """A notebook's setup cell in one call: resolve the scale, seed everything, set threads,
    apply the plot style, print the fingerprint and return the device."""
    scale = resolve_scale(scale)
    seed_all(seed)
    set_threads()
    use_book_style()
    dev = pick_device(prefer)
    if verbose:
        info = fingerprint(dev)
        print(f"scale {scale} | seed {seed} | device {info.pop('device')} | threads {info.pop('threads')}")
        print(" | ".join(f"{k} {v}" for k, v in info.items()))
    return dev
