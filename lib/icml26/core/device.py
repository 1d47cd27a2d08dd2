"""Device choice, seeding and thread settings."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

_VALID = ("cuda", "mps", "cpu")


def device(prefer: str | None = None) -> torch.device:
    """The device computations should run on.

    Order: the ``prefer`` argument, else the ``ICML26_DEVICE`` environment variable, else CUDA
    when present, then MPS, then CPU. Asking for a device that is not available raises.
    """
    choice = prefer if prefer is not None else os.environ.get("ICML26_DEVICE", "auto")
    if not isinstance(choice, str):
        raise TypeError(f"prefer must be a string such as 'cuda' or 'cpu', got {type(choice).__name__}")
    choice = choice.lower()
    if choice == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    kind = choice.split(":")[0]
    if kind not in _VALID:
        raise ValueError(f"prefer must be one of 'auto', 'cuda', 'mps', 'cpu', got {choice!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError("prefer='cuda' but no CUDA device is available")
    if kind == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("prefer='mps' but no MPS device is available")
    return torch.device(choice)


def seed_all(seed: int, *, deterministic: bool = True) -> torch.Generator:
    """Seed python, numpy and torch (all devices); return a CPU ``torch.Generator`` seeded alike.

    With ``deterministic=True`` the cheap determinism switches are set (cuDNN deterministic,
    no benchmark autotuning); ops without a deterministic kernel still run (``warn_only``).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    return torch.Generator().manual_seed(seed)


def set_threads(n: int | None = None) -> int:
    """Set torch's intra-op threads: ``n``, else ``ICML26_THREADS``, else leave as is. Returns the count.

    The runner sets ``ICML26_THREADS = cores // jobs`` so that parallel notebooks do not
    oversubscribe the machine.
    """
    if n is None:
        env = os.environ.get("ICML26_THREADS")
        if env is None:
            return torch.get_num_threads()
        n = int(env)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    torch.set_num_threads(n)
    return n
