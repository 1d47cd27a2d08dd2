"""Figures of the BA-solver chapter (book style: no titles, lower-case labels; captions live in the notebooks)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from icml26.core import method_colors

from .fields import gmm_log_density

LABELS = {"euler": "Euler", "heun": "Heun", "midpoint": "midpoint", "ab2": "AB2", "dpm++2m": "DPM++(2M)",
          "rk4": "RK4", "ba-bi": "BA bi-anchor", "ba-single": "BA single-anchor",
          "ba-bi (oracle)": "BA bi-anchor (oracle SideNet)", "reference": "reference"}


def colors(names=None):
    """One colour per method label, fixed across every figure of the chapter."""
    order = ["ba-bi", "ba-single", "euler", "ab2", "reference", "dpm++2m", "heun", "midpoint", "rk4",
             "ba-bi (oracle)"]
    fixed = method_colors([LABELS[m] for m in order])
    extra = [LABELS.get(n, n) for n in (names or []) if LABELS.get(n, n) not in fixed]
    return {**fixed, **method_colors(extra)} if extra else fixed


def _nfe_axis(ax, nfes):
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xticks(sorted(set(int(n) for n in nfes)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def trajectory_fan(params, trajs: dict[str, torch.Tensor], n_show: int = 16):
    """Density of ``p_t`` at ``t = 1`` behind the paths ``(steps + 1, B, 2)`` of several solvers."""
    fig, ax = plt.subplots(figsize=(5.2, 5.0))
    g = torch.linspace(-4.5, 4.5, 200, dtype=torch.float64)
    xx, yy = torch.meshgrid(g, g, indexing="xy")
    pts = torch.stack([xx.reshape(-1), yy.reshape(-1)], 1)
    dens = gmm_log_density(pts, torch.ones(pts.shape[0], dtype=torch.float64), params).exp().reshape(200, 200)
    ax.contourf(xx.numpy(), yy.numpy(), dens.numpy(), levels=12, cmap="Greys", alpha=0.5)
    cols = colors(list(trajs))
    for name, tr in trajs.items():
        tr = tr[:, :n_show].double().numpy()
        lw, ms = (1.6, 0) if tr.shape[0] > 20 else (1.0, 3.5)
        for b in range(tr.shape[1]):
            ax.plot(tr[:, b, 0], tr[:, b, 1], "-o", color=cols[LABELS.get(name, name)], lw=lw, ms=ms,
                    alpha=0.8, label=LABELS.get(name, name) if b == 0 else None)
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize=8)
    return fig


def error_vs_nfe(df: pd.DataFrame, guides=(1, 2, 6), value: str = "error", ylabel: str = "endpoint error"):
    """Log-log error against backbone NFE, one line per method, dashed slope guides."""
    fig, ax = plt.subplots(figsize=(6.8, 3.8))
    methods = list(dict.fromkeys(df.method))
    cols = colors(methods)
    for m in methods:
        d = df[df.method == m].sort_values("nfe")
        ax.loglog(d.nfe, d[value], "-o", ms=3, color=cols[LABELS.get(m, m)], label=LABELS.get(m, m))
    n = np.array([df.nfe.min(), df.nfe.max()], dtype=float)
    top = df[value].max()
    for p in guides:
        ax.loglog(n, top * (n / n[0]) ** (-p), "k--", lw=0.7, alpha=0.5)
        ax.annotate(f"slope {p}", (n[1], top * (n[1] / n[0]) ** (-p)), fontsize=7, alpha=0.7)
    _nfe_axis(ax, df.nfe)
    ax.set_xlabel("backbone evaluations (NFE)")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))                # outside the data
    fig.tight_layout()
    return fig


def error_vs_offset(df: pd.DataFrame):
    """Learned-SideNet velocity error against the signed offset ``h``, one line per ``t``."""
    fig, ax = plt.subplots(figsize=(6.8, 3.4))
    for t, d in df.groupby("t"):
        line, = ax.plot(d.h, d.error, "-o", ms=3, label=f"learned SideNet, t = {t:.1f}")
        ax.plot(d.h, d.zero_error, ":", color=line.get_color(), lw=1, label=f"zero SideNet, t = {t:.1f}")
    ax.set_yscale("log")
    ax.set_xlabel("signed offset h (negative: history, positive: future)")
    ax.set_ylabel("velocity error vs oracle")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def scatter_grid(samples: dict, rows, cols, lim: float = 4.5, s: float = 1.0):
    """Grid of 2-D scatter plots: ``samples[(method, nfe)]``; rows are methods, columns NFEs."""
    side = min(1.9, 6.8 / len(cols))                                               # <= 7 in wide
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(side * len(cols), side * len(rows)),
                             sharex=True, sharey=True, squeeze=False)
    for i, m in enumerate(rows):
        for j, n in enumerate(cols):
            ax = axes[i, j]
            key = (m, n) if (m, n) in samples else ("reference", 0) if m == "reference" else None
            if key is not None:
                z = samples[key].detach().cpu().numpy()
                ax.scatter(z[:, 0], z[:, 1], s=s, alpha=0.5, lw=0)
            ax.set_xlim(-lim, lim)
            ax.set_ylim(-lim, lim)
            ax.set_aspect("equal")
            ax.grid(False)
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_xlabel(f"NFE {n}" if n else "reference", fontsize=8)
                ax.xaxis.set_label_position("top")
            if j == 0:
                ax.set_ylabel(LABELS.get(m, m), fontsize=8)
    fig.tight_layout()
    return fig


def digit_grids(samples: dict[str, torch.Tensor], labels: torch.Tensor, per_class: int = 8):
    """One panel per method: 10 classes (rows) x ``per_class`` samples, 8x8 images in ``[-1, 1]``."""
    w = min(2.6, 6.8 / len(samples))                                                # <= 7 in wide
    fig, axes = plt.subplots(1, len(samples), figsize=(w * len(samples), 1.3 * w + 0.3), squeeze=False)
    for ax, (name, x) in zip(axes[0], samples.items()):
        rows = []
        for c in range(10):
            idx = torch.nonzero(labels == c).flatten()[:per_class]
            imgs = x[idx].detach().cpu().clamp(-1, 1).reshape(-1, 8, 8)
            imgs = torch.nn.functional.pad(imgs, (1, 1, 1, 1), value=-1.0)        # white 1-px frame
            rows.append(torch.cat(list(imgs), dim=1))
        ax.imshow(torch.cat(rows, 0).numpy(), cmap="gray_r", vmin=-1, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
        ax.set_xlabel(name, fontsize=9)
    fig.tight_layout()
    return fig


def equal_cost(tab: pd.DataFrame, methods=("euler", "ab2", "heun", "dpm++2m", "ba-bi")):
    """Endpoint error against backbone-equivalent cost (SideNet FLOPs counted for BA), log-log."""
    fig, ax = plt.subplots(figsize=(6.8, 3.6))
    cols = colors(list(methods))
    for m in methods:
        d = tab[tab.method == m].sort_values("cost")
        ax.loglog(d.cost, d.error, "-o", ms=3, color=cols[LABELS.get(m, m)], label=LABELS.get(m, m))
    _nfe_axis(ax, [c for c in (2, 3, 5, 8, 10, 16, 20) if tab.cost.min() <= c <= tab.cost.max()])
    ax.set_xlabel("backbone-equivalent evaluations (SideNet FLOPs included)")
    ax.set_ylabel("endpoint error")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def guidance_effect(tab: pd.DataFrame, metrics=("fd_pca16", "accuracy"), ylabels=("FD-PCA16", "label accuracy"),
                    methods=("euler", "ab2", "ba-bi", "reference")):
    """Metrics against the guidance scale, one panel per metric, one line per method."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.8, 2.9))
    cols = colors(list(methods))
    for ax, col, yl in zip(np.atleast_1d(axes), metrics, ylabels):
        for m in methods:
            d = tab[tab.method == m].sort_values("scale")
            ax.plot(d.scale, d[col], "-o", ms=3, color=cols[LABELS.get(m, m)], label=LABELS.get(m, m))
        ax.set_xlabel("guidance scale w")
        ax.set_ylabel(yl)
    np.atleast_1d(axes)[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
