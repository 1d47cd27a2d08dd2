"""The measurement behind "How this book works" (``front/``): a batched tensor operation against a
Python loop. It lives beside the runner because it serves the book's front matter, not a paper.

The quantity is the squared norm of a linear map applied to each sample,

    s_i = || W x_i ||_2^2                       (per sample, the loop)
    s   = ((X W^T) * (X W^T)) 1                 (batched, eq. eq-intro-batched of the page)

Both versions compute the same numbers; the page times them with :func:`icml26.core.time_fn`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd
import torch

from ..core import method_colors, preset_for, time_fn


@dataclass(frozen=True)
class IntroPreset:
    """Sizes of the loop-vs-batched measurement."""

    seed: int
    dim: int
    sizes: tuple[int, ...]  # batch sizes n, increasing
    repeat: int

    def dry_run(self) -> IntroPreset:
        """For ``ICML26_DRY=1`` (see :mod:`icml26.core.scale`): the same width, timed once, at the two
        smallest batch sizes. The Python loop at 65,536 samples is the only cost and has no shape to
        check; the batched kernel at the largest batch runs in :func:`gpu_check`."""
        return replace(self, sizes=self.sizes[:2], repeat=1)


PRESETS = {
    "smoke": IntroPreset(seed=0, dim=32, sizes=(16, 128), repeat=3),
    "book": IntroPreset(seed=0, dim=64, sizes=(16, 64, 256, 1024, 4096), repeat=5),
    "gpu": IntroPreset(seed=0, dim=256, sizes=(16, 256, 4096, 65536), repeat=10),
}


def preset(scale: str | None = None) -> IntroPreset:
    """The preset for ``scale`` (``smoke``, ``book`` or ``gpu``)."""
    return preset_for(PRESETS, scale)


def make_inputs(n: int, dim: int, *, seed: int = 0, device: torch.device | str = "cpu"):
    """A batch ``x`` of shape (n, dim) and a matrix ``w`` of shape (dim, dim), standard normal."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive int, got {dim!r}")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=gen)
    w = torch.randn(dim, dim, generator=gen) / dim**0.5
    return x.to(device), w.to(device)


def squared_norms_loop(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """s_i = ||W x_i||^2, one sample at a time (what the book avoids)."""
    return torch.stack([(w @ x_i).square().sum() for x_i in x])


def squared_norms_batched(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """s = ((X W^T) * (X W^T)) 1: one matrix product for the whole batch."""
    return (x @ w.T).square().sum(dim=1)  # (n, d) @ (d, d) -> (n, d) -> (n,)


def speedup_table(cfg: IntroPreset, device: torch.device | str = "cpu") -> pd.DataFrame:
    """Median seconds of both versions for each batch size in ``cfg.sizes``, and their ratio."""
    rows = []
    for n in cfg.sizes:
        x, w = make_inputs(n, cfg.dim, seed=cfg.seed, device=device)
        loop = time_fn(lambda: squared_norms_loop(x, w), repeat=cfg.repeat, device=device)  # noqa: B023
        batched = time_fn(lambda: squared_norms_batched(x, w), repeat=cfg.repeat, device=device)  # noqa: B023
        rows.append({"n": n, "loop_s": loop, "batched_s": batched, "speedup": loop / batched})
    return pd.DataFrame(rows)


def gpu_check(dev: torch.device | str):
    """``make gpu-check``'s kernel (see :mod:`icml26.book.gpu`): the batched squared norms at the
    gpu preset's largest batch."""
    cfg = PRESETS["gpu"]
    x, w = make_inputs(cfg.sizes[-1], cfg.dim, seed=cfg.seed, device=dev)
    return {"batched squared norms": lambda: squared_norms_batched(x, w)}


def plot_speedup(table: pd.DataFrame):
    """Log-log plot of both timings against the batch size; returns the figure."""
    import matplotlib.pyplot as plt

    colors = method_colors(["python loop", "batched"])
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    ax.loglog(table["n"], table["loop_s"], "o-", color=colors["python loop"], label="python loop")
    ax.loglog(table["n"], table["batched_s"], "s-", color=colors["batched"], label="batched")
    ax.set_xlabel("batch size n")
    ax.set_ylabel("median wall time (s)")
    ax.legend()
    return fig
