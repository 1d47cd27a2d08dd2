"""Figures of the cgmt chapter (no titles: captions live in the notebooks' cell metadata)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from icml26.core import method_colors

from .method import DTYPE
from .theory import moment_matched_gaussian, score_density

COLORS = method_colors(["theory (true law)", "Gaussian-equivalent theory", "moment-matched Gaussian",
                        "simulation"])


def score_histograms(kept: dict, law, law_ge, labels=(1, -1)):
    """Per-class test-score histograms (simulation) with the three predicted densities."""
    fig, axes = plt.subplots(1, len(labels), figsize=(7, 3.6), sharey=True)
    st, st_ge = kept["two-point"]["state"], kept["gaussian-eq"]["state"]
    for ax, y in zip(np.atleast_1d(axes), labels):
        s = kept["two-point"]["sim"]["test_scores"][y].flatten().numpy()
        grid = torch.linspace(float(s.min()) - 1, float(s.max()) + 1, 400, dtype=DTYPE)
        ax.hist(s, bins=80, density=True, color="0.8", label="simulation (two-point data)")
        ax.plot(grid, score_density(st, law, grid, y), color=COLORS["theory (true law)"],
                label="theory (true law)")
        mean, std = moment_matched_gaussian(st, law, y)
        g = grid.numpy()
        ax.plot(g, np.exp(-0.5 * ((g - mean) / std) ** 2) / (std * np.sqrt(2 * np.pi)), "--",
                color=COLORS["moment-matched Gaussian"], label="moment-matched Gaussian")
        ax.plot(grid, score_density(st_ge, law_ge, grid, y), ":", color=COLORS["Gaussian-equivalent theory"],
                label="Gaussian-equivalent theory")
        ax.axvline(0, color="k", lw=0.6)
        ax.set_xlabel(f"test score $\\hat\\theta^\\top x$ (class y = {y:+d})")
    np.atleast_1d(axes)[0].set_ylabel("density")
    return _legend_below(fig, np.atleast_1d(axes)[0])


def _legend_below(fig, ax, ncol: int = 2):
    """One legend for the figure, below the axes (never over the data)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=7, frameon=False)
    return fig


def error_vs_alpha(df, losses=("logistic", "square")):
    """Test error vs alpha: theory lines and simulation markers, true vs Gaussian-equivalent data."""
    fig, axes = plt.subplots(1, len(losses), figsize=(7, 3.6), sharey=True)
    for ax, loss in zip(np.atleast_1d(axes), losses):
        for data, ls, mk, name in (("two-point", "-", "o", "theory (true law)"),
                                   ("gaussian-eq", "--", "x", "Gaussian-equivalent theory")):
            d = df[(df["loss"] == loss) & (df["data"] == data)].sort_values("alpha")
            ax.plot(d["alpha"], d["err"], ls, color=COLORS[name], label=f"{name}")
            ax.plot(d["alpha"], d["sim_err"], mk, color=COLORS[name], ms=7,
                    label=f"simulation, {'two-point' if data == 'two-point' else 'Gaussian-equivalent'} data")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"sample ratio alpha = n/p ({loss} loss)")
    np.atleast_1d(axes)[0].set_ylabel("test error")
    return _legend_below(fig, np.atleast_1d(axes)[0])


def theory_vs_sim_scatter(df, quantities=(("A", "overlap A"), ("norm2", "squared norm"), ("err", "test error"))):
    """Theory (x) vs simulation (y) for several quantities, one marker per loss."""
    fig, axes = plt.subplots(1, len(quantities), figsize=(7, 2.9))
    markers = {"logistic": "o", "square": "s", "hinge": "^"}
    for ax, (col, label) in zip(axes, quantities):
        for loss, d in df.groupby("loss"):
            ax.plot(d[col], d["sim_" + col], markers.get(loss, "o"), ls="none", label=loss, alpha=0.8)
        lo, hi = float(min(df[col].min(), df["sim_" + col].min())), float(max(df[col].max(), df["sim_" + col].max()))
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.7)
        ax.set_xlabel(f"{label}, theory")
        ax.set_ylabel(f"{label}, simulation")
    return _legend_below(fig, axes[0], ncol=3)
