"""Figures of the BandPO chapter (book style: no titles, lower-case labels; captions live in the notebooks)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from icml26.core import method_colors

from .experiments import BIN_LABELS

# every rule the chapter shows, in a fixed order, so a rule has the same colour in every figure
CHAPTER_RULES = ("Clip", "Clip-Higher", "DCPO", "Band-KL", "Band-TV", "Band-chi2", "Band-KL-relax")
WIDTH = 6.9  # inches: the 768-px column at the book's figure dpi (110)


def legend_below(fig, ax=None, ncol: int = 4, fontsize: int = 7) -> None:
    """One legend for the figure, centred below the axes (outside the data)."""
    ax = ax if ax is not None else fig.axes[0]
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol, fontsize=fontsize)


def rule_colors(names) -> dict[str, str]:
    """Palette colours for bound rules, fixed by the chapter's rule order (same rule, same colour)."""
    names = list(names)
    table = method_colors(list(CHAPTER_RULES) + [n for n in names if n not in CHAPTER_RULES])
    return {n: table[n] for n in names}


def rule_bounds(p: torch.Tensor, rules: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Evaluate bound rules ``name -> fn(p) -> (lo, hi)`` on a grid, as numpy arrays."""
    return {name: tuple(t.numpy() for t in fn(p)) for name, fn in rules.items()}


def plot_ratio_bounds(p: np.ndarray, bounds: dict, cap: float | None = 10.0):
    """Upper (log scale) and lower ratio bounds vs p, with the region r > 1/p shaded."""
    fig, (ax_u, ax_l) = plt.subplots(1, 2, figsize=(6.9, 3.0))
    colors = rule_colors(bounds)
    ax_u.fill_between(p, 1.0 / p, 1e6, color="0.85", label="r > 1/p (not a distribution)")
    for name, (lo, hi) in bounds.items():
        ax_u.plot(p, hi, color=colors[name], label=name)
        ax_l.plot(p, lo, color=colors[name], label=name)
    if cap is not None:
        ax_u.axhline(cap, color="0.4", ls=":", lw=1, label=f"cap {cap:g}")
    for ax in (ax_u, ax_l):
        ax.set_xscale("log")
        ax.set_xlabel("old probability p of the sampled token")
    ax_u.set_yscale("log")
    ax_u.set_ylim(0.9, 1e3)
    ax_u.set_ylabel("upper ratio bound u(p)")
    ax_l.set_ylabel("lower ratio bound l(p)")
    ax_l.set_ylim(-0.02, 1.02)
    fig.tight_layout()
    legend_below(fig, ax_u, ncol=4)
    return fig


def plot_margins(p: np.ndarray, bounds: dict, p_mark: float = 0.08):
    """Probability-variation envelopes p(l-1), p(u-1) vs p, with the example p = p_mark marked."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    colors = rule_colors(bounds)
    for name, (lo, hi) in bounds.items():
        ax.plot(p, p * (hi - 1), color=colors[name], label=name)
        ax.plot(p, p * (lo - 1), color=colors[name], ls="--")
    ax.plot(p, 1 - p, color="0.5", lw=1, ls=":", label="1 - p (simplex)")
    ax.axvline(p_mark, color="0.6", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("old probability p of the sampled token")
    ax.set_ylabel("feasible change of the probability")
    ax.set_ylim(-0.35, 0.45)
    fig.tight_layout()
    legend_below(fig, ax, ncol=4)
    return fig


def plot_parity(df: pd.DataFrame):
    """cvxpy reference vs the batched operator, both bounds, all divergences (log-log)."""
    fig, (ax_u, ax_l) = plt.subplots(1, 2, figsize=(6.9, 3.1))
    colors = method_colors(list(df["divergence"].unique()))
    for d, g in df.groupby("divergence", sort=False):
        ax_u.scatter(g["hi_ref"], g["hi"], s=14, color=colors[d], label=d, alpha=0.8)
        ax_l.scatter(g["lo_ref"], g["lo"], s=14, color=colors[d], alpha=0.8)
    for ax, lab in ((ax_u, "upper"), (ax_l, "lower")):
        lims = np.array(ax.get_xlim())
        ax.plot(lims, lims, color="0.3", lw=0.8)
        ax.set_xlabel(f"{lab} bound, cvxpy (full simplex)")
        ax.set_ylabel(f"{lab} bound, batched operator")
    ax_u.set_xscale("log")
    ax_u.set_yscale("log")
    fig.tight_layout()
    legend_below(fig, ax_u, ncol=6)
    return fig


def plot_delta_map(p: np.ndarray, deltas: np.ndarray, hi: np.ndarray, curves: dict):
    """Heat map of log10 u*(p, delta) for Band-KL, and exact vs quadratic upper bounds."""
    fig, (ax_h, ax_q) = plt.subplots(1, 2, figsize=(6.9, 3.1))
    im = ax_h.pcolormesh(p, deltas, np.log10(hi), shading="auto")
    fig.colorbar(im, ax=ax_h, label="log10 u*(p, delta)")
    ax_h.set_xscale("log")
    ax_h.set_yscale("log")
    ax_h.set_xlabel("old probability p")
    ax_h.set_ylabel("radius delta")
    colors = method_colors([f"delta={d:g}" for d in curves])
    for d, (exact, quad) in curves.items():
        c = colors[f"delta={d:g}"]
        ax_q.plot(p, exact - 1, color=c, label=f"delta = {d:g}")
        ax_q.plot(p, quad - 1, color=c, ls="--")
    ax_q.set_xscale("log")
    ax_q.set_yscale("log")
    ax_q.set_xlabel("old probability p")
    ax_q.set_ylabel("u - 1 (solid exact, dashed quadratic law)")
    fig.tight_layout()
    legend_below(fig, ax_q, ncol=4)
    return fig


def plot_convergence(df: pd.DataFrame):
    """Bisection error vs iteration for both bounds, float32 and float64."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for (bound, dtype), g in df.groupby(["bound", "dtype"]):
        ax.plot(g["iteration"], np.maximum(g["max_error"], 1e-18), ls="-" if dtype == "float64" else "--",
                label=f"{bound}, {dtype}")
    ax.set_yscale("log")
    ax.set_xlabel("bisection iteration")
    ax.set_ylabel("max error of the iterate")
    fig.tight_layout()
    legend_below(fig, ax, ncol=4)
    return fig


def plot_curves(runs: dict, metric: str, ylabel: str, log: bool = False, ax=None, x_key: str | None = None):
    """Mean +/- std over seeds of a per-iteration metric for several methods (x from ``x_key``)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 3.6))
    colors = rule_colors(runs)
    for m, d in runs.items():
        y = d[metric]
        x = d[x_key][0] if x_key else np.arange(y.shape[1])
        mu, sd = y.mean(0), y.std(0)
        ax.plot(x, mu, color=colors[m], label=m)
        ax.fill_between(x, mu - sd, mu + sd, color=colors[m], alpha=0.15)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    return ax


def plot_clip_bins(table: pd.DataFrame, methods: list[str]):
    """Clip rates by old-probability bin: upward among positive-advantage samples (left), downward
    among negative-advantage samples (right)."""
    fig, axes = plt.subplots(1, 2, figsize=(6.9, 2.9), sharey=True)
    colors = rule_colors(methods)
    x = np.arange(len(BIN_LABELS))
    w = 0.8 / len(methods)
    for ax, col in zip(axes, ("up", "down")):
        for i, m in enumerate(methods):
            t = table[table["method"] == m].set_index("p bin").loc[list(BIN_LABELS)]
            ax.bar(x + i * w - 0.4 + w / 2, t[col], width=w, color=colors[m], label=m)
        ax.set_xticks(x, BIN_LABELS, fontsize=8)
        ax.set_xlabel("old probability bin")
        ax.set_ylabel(f"fraction of {'A > 0' if col == 'up' else 'A < 0'} samples\nclipped {col}wards")
    fig.tight_layout()
    legend_below(fig, axes[0], ncol=len(methods))
    return fig



def plot_tuning(frame: pd.DataFrame, chosen: dict, metrics: dict, knobs: dict | None = None):
    """Validation scores of each tuned family over its knob (log axis), one line per learning rate, one
    row of panels per score; a ring marks the configuration :func:`icml26.core.compare.tune` chose for
    that score. ``frame``: one row per configuration with columns ``method``, ``lr``, the knob and the
    scores; ``metrics``: ``{column: y label}``; ``chosen``: ``{column: {method: best config}}``;
    ``knobs``: ``{method: knob column}`` (default Band-KL: delta, Clip: eps)."""
    knobs = knobs or {"Band-KL": "delta", "Clip": "eps"}
    fig, axes = plt.subplots(len(metrics), len(knobs), figsize=(WIDTH, 2.4 * len(metrics) + 0.4), sharex="col",
                             sharey="row", squeeze=False)
    lrs = sorted(frame["lr"][frame["method"].isin(list(knobs))].unique())
    colors = method_colors([f"lr {lr:g}" for lr in lrs])
    for row, (metric, ylabel) in zip(axes, metrics.items()):
        for ax, (method, knob) in zip(row, knobs.items()):
            sub = frame[frame["method"] == method]
            for lr in lrs:
                line = sub[sub["lr"] == lr].sort_values(knob)
                ax.plot(line[knob], line[metric], marker="o", ms=3, color=colors[f"lr {lr:g}"], label=f"lr {lr:g}")
            best = chosen[metric][method]
            pick = sub[(sub["lr"] == best["lr"]) & (sub[knob] == best[knob])]
            ax.plot(pick[knob], pick[metric], marker="o", ms=10, mfc="none", mec="k", ls="none", label="chosen")
            ax.set_xscale("log")
        row[0].set_ylabel(ylabel)
    for ax, (method, knob) in zip(axes[-1], knobs.items()):
        ax.set_xlabel(f"{method}: {knob}")
    fig.tight_layout()
    legend_below(fig, axes[-1][0], ncol=len(lrs) + 1)
    return fig
