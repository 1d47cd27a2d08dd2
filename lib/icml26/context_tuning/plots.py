"""Figures of the context-tuning chapter (colours from the book's method palette)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icml26.core import method_color as _book_color


def method_color(name: str) -> str:
    """The book's colour of a method; the ridge oracle takes the shared "oracle" colour."""
    return _book_color("oracle" if name == "ridge" else name)


def pretrain_curve(log: dict):
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    ax.plot(log["step"], log["loss"], color=method_color("icl"))
    ax.set_xlabel("pretraining step")
    ax.set_ylabel("training mse (all prefix lengths)")
    ax.set_yscale("log")
    return fig


def icl_curves(df):
    fams = list(dict.fromkeys(df.family))
    fig, axes = plt.subplots(1, len(fams), figsize=(6.9, 2.5), sharey=True)
    for ax, fam in zip(np.atleast_1d(axes), fams):
        d = df[df.family == fam]
        ax.plot(d.k, d.icl, "o-", ms=3, color=method_color("icl"), label="icl")
        ax.plot(d.k, d.ridge, "s--", ms=3, color=method_color("ridge"), label="ridge")
        ax.plot(d.k, d.zero_shot, ":", color=method_color("zero-shot"), label="zero-shot")
        ax.set_yscale("log")
        ax.set_xlabel("demonstrations k")
        ax.text(0.97, 0.97, fam, transform=ax.transAxes, ha="right", va="top", fontsize=8)
    np.atleast_1d(axes)[0].set_ylabel("query mse")
    np.atleast_1d(axes)[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    fig.tight_layout()
    return fig


def attention_map(w, cos):
    fig, (a0, a1) = plt.subplots(2, 1, figsize=(5.2, 3.2), sharex=True, height_ratios=[3, 1])
    im = a0.imshow(w, aspect="auto", cmap="viridis")
    a0.grid(False)
    a0.set_ylabel("layer")
    a0.set_yticks(range(w.shape[0]), [str(i + 1) for i in range(w.shape[0])])
    fig.colorbar(im, ax=[a0, a1], label="attention weight")
    a1.bar(range(len(cos)), cos, color=method_color("ridge"))
    a1.set_ylabel("cos(x_i, x_q)")
    a1.set_xlabel("demonstration i")
    return fig


def method_bars(df, methods, conditions, figsize=(6.9, 2.8), log=True):
    """Mean query MSE per method and condition; error bars: spread over rows (seeds) or the task s.e."""
    fig, ax = plt.subplots(figsize=figsize)
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        vals, errs = [], []
        for c in conditions:
            d = df[(df.method == m) & (df.condition == c)]
            vals.append(d.mse.mean())
            errs.append(d.mse.std(ddof=1) if len(d) > 1 else float(d.se.iloc[0]) if len(d) else np.nan)
        x = np.arange(len(conditions)) + (j - (len(methods) - 1) / 2) * width
        ax.bar(x, vals, width, yerr=errs, color=method_color(m), label=m, capsize=2)
    ax.set_xticks(range(len(conditions)), conditions)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel("query mse")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    return fig


def step_curves(curves: dict, reference: dict | None = None, train=True):
    """Query MSE (and training loss) against the optimisation step for each method."""
    ncol = 2 if train else 1
    fig, axes = plt.subplots(1, ncol, figsize=(6.9 if train else 5.2, 2.8), squeeze=False)
    for m, log in curves.items():
        axes[0, 0].plot(log["query"], color=method_color(m), label=m)
        if train:
            axes[0, 1].plot(log["train"], color=method_color(m), label=m)
    for (name, v), ls in zip((reference or {}).items(), ("--", ":", "-.")):
        axes[0, 0].axhline(v, ls=ls, lw=1, color=method_color(name), label=name)
    axes[0, 0].set_ylabel("query mse")
    if train:
        axes[0, 1].set_ylabel("training loss (demonstrations)")
    for ax in axes[0]:
        ax.set_xlabel("optimisation step")
        ax.set_yscale("log")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[0, -1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    fig.tight_layout()
    return fig


def ratio_vs_k(summary):
    """Each ratio of a :func:`~icml26.context_tuning.experiments.k_sweep_summary` table against ``k``,
    with its 95% t interval over seeds as error bars; the dashed line marks 1."""
    fig, ax = plt.subplots(figsize=(5.6, 2.9))
    for j, (name, d) in enumerate(summary.groupby("ratio", sort=False)):
        a = name.split(" / ")[0]
        style = "o-" if name.endswith("/ icl") else "s:"
        ax.errorbar(d.k + 0.15 * (j - 1), d["mean"], yerr=[d["mean"] - d.lo, d.hi - d["mean"]], fmt=style,
                    color=method_color(a), capsize=2, label=f"mse({a}) / mse({name.split(' / ')[1]})")
    ax.axhline(1.0, ls="--", lw=1, color=method_color("icl"))
    ax.set_xlabel("demonstrations k")
    ax.set_ylabel("ratio of query mse")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    return fig


def time_scatter(df, methods):
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for m in methods:
        d = df[df.method == m]
        ax.scatter(d.seconds, d.mse, color=method_color(m), label=m, s=18)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time per task (s)")
    ax.set_ylabel("query mse")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    return fig


def timing_lines(df):
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for m in dict.fromkeys(df.method):
        d = df[df.method == m]
        ax.plot(d.k, d.seconds, "o-", color=method_color(m), label=m)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("demonstrations k")
    ax.set_ylabel("seconds per optimisation step")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    fig.tight_layout()
    return fig
