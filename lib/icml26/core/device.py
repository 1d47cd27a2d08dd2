"""Device choice, seeding and thread settings."""

from __future__ import annotations

import contextlib
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


def seed_all(seed: int, *, deterministic: bool = False) -> torch.Generator:
    """Seed python, numpy and torch (all devices); return a CPU ``torch.Generator`` seeded alike.

    Seeding makes a run repeat on the same machine and device. cuDNN's benchmark autotuning is
    switched off and its deterministic kernels chosen (both free of warnings and nearly free).

    ``deterministic=True`` (opt-in) also asks torch for deterministic algorithms everywhere
    (``torch.use_deterministic_algorithms(True)``): on CUDA an op without a deterministic kernel
    (``cumsum``, ``bincount`` with weights, ``nll_loss`` with reductions) then *raises* instead of
    printing a ``UserWarning`` into a rendered cell, and uninitialised memory is not filled with
    NaN. Use it where bit-for-bit repeats on a GPU matter more than those ops (tests, debugging);
    the notebooks use the default. ``deterministic=False`` switches that mode off again.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.utils.deterministic.fill_uninitialized_memory = False
    else:
        torch.use_deterministic_algorithms(False)
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


class one_thread(contextlib.ContextDecorator):  # noqa: N801 (used like a function)
    """One intra-op CPU thread inside a block or a decorated function; the count is restored after.

    For the book's tiny tensors (a few thousand entries, MLPs of width 64) extra threads only add
    synchronisation: on a busy 2-core machine one thread ran cgmt's fixed-point solver about 10x
    and BA-solver's SideNet training about 4x faster than two. With ``dev`` a non-CPU device
    nothing changes (the host's thread count does not limit a GPU)::

        with one_thread():            # a block
            ...

        @one_thread()                 # every call of a function
        def solve(...): ...

        one_thread(dev).pin()         # the rest of the process (a notebook's setup cell)
    """

    def __init__(self, dev: torch.device | str | None = None):
        self.active = dev is None or torch.device(dev).type == "cpu"
        self._saved: list[int] = []  # a stack: nested and recursive uses restore in order

    def __enter__(self) -> one_thread:
        self._saved.append(torch.get_num_threads())
        if self.active:
            torch.set_num_threads(1)
        return self

    def __exit__(self, *exc) -> None:
        torch.set_num_threads(self._saved.pop())

    def pin(self) -> int:
        """Set one thread (on CPU) for good, without restoring; returns the count now in force."""
        if self.active:
            torch.set_num_threads(1)
        return torch.get_num_threads()
