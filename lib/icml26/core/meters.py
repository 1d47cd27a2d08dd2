"""Meters: wall time, peak memory, FLOP counts.

Timings follow one rule: warm up, synchronise the device, report the median of repeats.
They are never printed in output-checked cells (they differ run to run).
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch


def synchronize(dev: torch.device | str | None = None) -> None:
    """Wait for queued kernels on ``dev`` (no-op on CPU)."""
    kind = torch.device(dev).type if dev is not None else ("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda":
        torch.cuda.synchronize()
    elif kind == "mps":
        torch.mps.synchronize()


@dataclass
class Timer:
    """Context manager measuring wall time (seconds) with device synchronisation at both ends.

    >>> with Timer() as t:
    ...     _ = sum(range(1000))
    >>> t.seconds >= 0
    True
    """

    device: torch.device | str | None = None
    seconds: float = float("nan")
    _start: float = field(default=0.0, repr=False)

    def __enter__(self) -> Timer:
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._start


def time_fn(fn: Callable[[], object], *, warmup: int = 1, repeat: int = 5,
            device: torch.device | str | None = None) -> float:
    """Median wall time (seconds) of ``fn()`` over ``repeat`` runs after ``warmup`` runs."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        with Timer(device) as t:
            fn()
        times.append(t.seconds)
    return statistics.median(times)


def _rss_peak_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


@dataclass
class PeakMemory:
    """Context manager reporting peak memory inside the block.

    ``cpu_bytes`` is the process's peak resident set size (a high-water mark for the whole
    process, so it never decreases); ``cuda_bytes`` is the peak CUDA allocation inside the block
    (0 without CUDA).
    """

    cpu_bytes: int = 0
    cuda_bytes: int = 0

    def __enter__(self) -> PeakMemory:
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        return self

    def __exit__(self, *exc) -> None:
        self.cpu_bytes = _rss_peak_bytes()
        if torch.cuda.is_available():
            self.cuda_bytes = int(torch.cuda.max_memory_allocated())

    @property
    def cpu_mib(self) -> float:
        return self.cpu_bytes / 2**20

    @property
    def cuda_mib(self) -> float:
        return self.cuda_bytes / 2**20


def count_flops(fn: Callable[[], object]) -> int:
    """Floating-point operations of ``fn()`` as counted by ``torch.utils.flop_counter`` (matmuls, convs)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())
