"""Figures of the CauScale chapter (kept out of the notebooks so code cells stay short)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icml26.core import method_color, method_colors


def attention_maps(maps: dict):
    """The tied ``n x n`` map next to the untied maps of a few samples (same weights, head 0)."""
    k = len(maps["rows"])
    fig, axes = plt.subplots(1, k + 1, figsize=(6.8, 1.95), constrained_layout=True)
    vmax = max(maps["tied"].max(), maps["untied"].max())
    im = axes[0].imshow(maps["tied"], vmin=0, vmax=vmax, cmap="viridis")
    axes[0].set_xlabel("key variable")
    axes[0].set_ylabel("query variable")
    axes[0].text(0.02, 1.03, "tied (all samples)", transform=axes[0].transAxes, fontsize=8)
    for i, r in enumerate(maps["rows"]):
        axes[i + 1].imshow(maps["untied"][i], vmin=0, vmax=vmax, cmap="viridis")
        axes[i + 1].text(0.02, 1.03, f"untied, sample {r}", transform=axes[i + 1].transAxes, fontsize=8)
        axes[i + 1].set_xlabel("key variable")
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(im, ax=axes, shrink=0.85, label="attention")
    return fig


def memory_growth(growth, formula):
    """Left: attention-map elements per layer vs n (m = n), measured and formula. Right: bytes saved
    for the backward pass."""
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 2.8), constrained_layout=True)
    colors = method_colors(["tied", "untied"])
    for kind in ("tied", "untied"):
        g = growth[growth.attention == kind]
        axes[0].loglog(g.n, g["map elements"], "o", color=colors[kind], label=f"{kind}, layer")
        axes[0].loglog(g.n, g["formula"], "-", color=colors[kind], alpha=0.6, label=f"{kind}, formula")
        axes[1].loglog(g.n, g["saved for backward (MB)"], "o-", color=colors[kind], label=kind)
    axes[0].set_xlabel("n (= m)")
    axes[0].set_ylabel("attention-map elements")
    axes[1].set_xlabel("n (= m)")
    axes[1].set_ylabel("saved for backward (MiB)")
    axes[0].legend(fontsize=7, loc="upper left")
    axes[1].legend(fontsize=7, loc="upper left")
    return fig


def reduction_timing(df, predicted_linear: float, predicted_quadratic: float):
    """Forward time against m with and without reduction units; right: the measured time ratio with the
    predicted work fractions."""
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 2.7), constrained_layout=True)
    colors = method_colors(["with reduction", "without reduction"])
    for red, name in ((True, "with reduction"), (False, "without reduction")):
        d = df[df.reduction == red]
        axes[0].loglog(d.m, d.seconds, "o-", color=colors[name], label=name)
    axes[0].set_xlabel("samples m")
    axes[0].set_ylabel("forward time (s)")
    axes[0].legend(fontsize=7)
    piv = df.pivot(index="m", columns="reduction", values="seconds")
    axes[1].semilogx(piv.index, piv[True] / piv[False], "o-", color=method_color("with reduction"),
                     label="measured")
    axes[1].axhline(predicted_linear, ls="--", color="0.3", label="predicted, linear work")
    axes[1].axhline(predicted_quadratic, ls=":", color="0.3", label="predicted, sample attention")
    ms = sorted(df.m.unique())
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(ms)
        ax.set_xticklabels([str(m) for m in ms])
        ax.minorticks_off()
    axes[1].set_xlabel("samples m")
    axes[1].set_ylabel("time with / without")
    axes[1].set_ylim(0, 1.1)
    axes[1].legend(fontsize=7, loc="upper right")
    return fig


def dataset_view(task: dict, theta_abs: np.ndarray, moral: np.ndarray):
    """Data (rows grouped by regime) with the intervention mask; the true DAG, its moral graph and the
    estimated |precision|."""
    fig, axes = plt.subplots(1, 5, figsize=(6.9, 2.5), constrained_layout=True,
                             gridspec_kw={"width_ratios": [1.1, 1.1, 1, 1, 1]})
    axes[0].imshow(task["x"], aspect="auto", cmap="RdBu_r", vmin=-3, vmax=3, interpolation="nearest")
    axes[0].set_xlabel("variable")
    axes[0].set_ylabel("sample (grouped by regime)")
    axes[1].imshow(task["interv_mask"], aspect="auto", cmap="Greys", interpolation="nearest")
    axes[1].set_xlabel("variable")
    axes[1].set_yticks([])
    for ax, mat, label in ((axes[2], task["adj"], "true DAG A"), (axes[3], moral, "moral graph"),
                           (axes[4], theta_abs, "|precision|")):
        ax.imshow(mat, cmap="Greys", interpolation="nearest")
        ax.set_xlabel(label)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].text(0.0, 1.03, "standardized data", transform=axes[0].transAxes, fontsize=8)
    axes[1].text(0.0, 1.03, "intervention mask", transform=axes[1].transAxes, fontsize=8)
    return fig


def learning_curves(losses: dict, window: int = 10):
    """Training loss (moving average) per variant, one line per seed."""
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    from .training import VARIANT_NAMES as names
    colors = method_colors(list(names.values()))
    seen = set()
    for (_seed, variant), curve in losses.items():
        w = max(1, min(window, len(curve)))
        y = np.convolve(curve, np.ones(w) / w, mode="valid")
        name = names[variant]
        ax.plot(np.arange(w, len(curve) + 1), y, color=colors[name], alpha=0.8,
                label=name if name not in seen else None)
        seen.add(name)
    ax.set_xlabel("training step")
    ax.set_ylabel("pair cross-entropy")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def method_bars(table, metric: str = "mAP", chance: float | None = None):
    """Grouped bars: rows = evaluation cells, columns = methods (mean over graphs and seeds)."""
    cells, methods = list(table.index), list(table.columns)
    colors = method_colors(methods)
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    w = 0.8 / len(methods)
    for k, meth in enumerate(methods):
        ax.bar(np.arange(len(cells)) + k * w - 0.4 + w / 2, table[meth].values, w, color=colors[meth], label=meth)
    if chance is not None:
        ax.axhline(chance, color="0.3", ls=":", lw=1, label="edge density")
    ax.set_xticks(np.arange(len(cells)))
    ax.set_xticklabels(cells, fontsize=8)
    ax.set_ylabel(metric)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
