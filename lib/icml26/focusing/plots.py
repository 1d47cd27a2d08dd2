"""Figures of the focusing chapter (cells stay short)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from icml26.core import method_color


def _img(ax, a, **kw):
    ax.imshow(a, **kw)
    ax.set_xticks([])
    ax.set_yticks([])


def normal_rgb(n: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    rgb = ((n + 1) / 2).clamp(0, 1).cpu().numpy()
    rgb[~mask.bool().cpu().numpy()] = 1.0
    return rgb


def gallery(items, cols: int = 6):
    rows = (len(items) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.8, 1.25 * rows + 0.2))
    for ax, it in zip(axes.flat, items):
        _img(ax, normal_rgb(it["normal"], it["mask"]))
        ax.set_xlabel(it["kind"].replace("_", " "), fontsize=7)
    for ax in list(axes.flat)[len(items):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def gt_triplet(gt):
    fig, axes = plt.subplots(1, 3, figsize=(6.4, 2.3))
    d = gt["depth"].clone()
    d[~gt["mask"]] = float("nan")
    im = axes[0].imshow(d.cpu().numpy(), cmap="viridis")
    fig.colorbar(im, ax=axes[0], fraction=0.046, label="depth $z$")
    axes[0].set_xticks([])
    axes[0].set_yticks([])
    _img(axes[1], normal_rgb(gt["normal"], gt["mask"]))
    _img(axes[2], gt["mask"].float().cpu().numpy(), cmap="gray_r")
    for ax, t in zip(axes, ("depth $D^*$", "normal $N^*$", "mask $M^*$")):
        ax.set_xlabel(t)
    fig.tight_layout()
    return fig


def fit_curves(frame, quarter):
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 2.7))
    for name, g in frame.groupby("run", sort=False):
        c = method_color(name)
        axes[0].plot(g.step, g.hole, "o-", color=c, label=name, ms=3)
        axes[1].plot(g.step, g.cd_l1, "o-", color=c, ms=3)
    for ax in axes:
        ax.axvline(quarter, color="0.6", lw=0.8, ls=":")
        ax.set_xlabel("step")
    axes[0].set_ylabel("hole fraction")
    axes[1].set_ylabel("CD-L1")
    fig.legend(loc="upper center", ncol=4, fontsize=7, bbox_to_anchor=(0.5, 1.06), frameon=False)
    fig.tight_layout()
    return fig


def snapshots(runs, names, steps, gt):
    fig, axes = plt.subplots(len(names), len(steps) + 1, figsize=(6.4, 1.3 * len(names) + 0.3))
    for i, n in enumerate(names):
        for j, s in enumerate(steps):
            p = runs[n]["snap"][s]
            _img(axes[i, j], normal_rgb(p["normal"] * p["mask"][..., None].clamp(0, 1), p["mask"] > 0.5))
            if i == len(names) - 1:
                axes[i, j].set_xlabel(f"step {s}", fontsize=7)
        _img(axes[i, -1], normal_rgb(gt["normal"], gt["mask"]))
        axes[i, 0].set_ylabel(n, fontsize=7)
    axes[-1, -1].set_xlabel("ground truth", fontsize=7)
    fig.tight_layout()
    return fig


def carve_view(panels, gt):
    """``panels``: list of (label, uv (N,2), keep (N,), (H, W))."""
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(6.8, 1.9))
    d = gt["depth"].clone()
    d[~gt["mask"]] = float("nan")
    axes[0].imshow(d.cpu().numpy(), cmap="viridis")
    axes[0].set_xlabel("GT depth", fontsize=7)
    for ax, (lab, uv, keep, hw) in zip(axes[1:], panels):
        uv, k = uv.cpu().numpy(), keep.cpu().numpy()
        ax.scatter(uv[~k, 0], uv[~k, 1], s=2, c="0.8")
        ax.scatter(uv[k, 0], uv[k, 1], s=2, c=method_color(lab))
        ax.set_xlim(0, hw[1])
        ax.set_ylim(hw[0], 0)
        ax.set_aspect("equal")
        ax.set_xlabel(f"{lab}: {int(k.sum())}", fontsize=7)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return fig


def kept_hist(df, band):
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    order = [s for s in ("full", "fsv (alpha=0.3)", "fsv (alpha=0.1)", "focus", "focus_zoom") if s in set(df.scheme)]
    hi = max(df.kept.max(), 1)
    bins = np.linspace(0, hi, 30)
    for s in order:
        ax.hist(df[df.scheme == s].kept, bins=bins, histtype="step", lw=1.5, color=method_color(s), label=s)
    ax.axvspan(band[0], band[1], color="0.85", zorder=0, label="zoom band")
    ax.set_xlabel("latent voxels decoded per view")
    ax.set_ylabel("views")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def sphere_curve(sd_frame):
    fig, ax = plt.subplots(figsize=(4.6, 2.8))
    ax.plot(sd_frame.d, sd_frame.cap_fraction, "k--", label="$(1-r/d)/2$")
    ax.plot(sd_frame.d, sd_frame.kept_fraction, "o-", color=method_color("focus"), label="focus (kept fraction)")
    ax.set_xlabel("camera distance $d$")
    ax.set_ylabel("fraction of latent voxels")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def grouped_bars(table, ylabel, width=5.2):
    """Bars of a DataFrame (index: groups on the x axis, columns: methods)."""
    fig, ax = plt.subplots(figsize=(width, 2.8))
    n = len(table.columns)
    x = np.arange(len(table.index))
    for i, c in enumerate(table.columns):
        ax.bar(x + (i - (n - 1) / 2) * 0.8 / n, table[c].values, 0.8 / n, color=method_color(c), label=c)
    ax.set_xticks(x)
    ax.set_xticklabels(table.index, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def training_curves(hist, window=10):
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 2.7))
    for (label, seed), h in hist.items():
        if seed != 0:
            continue
        c = method_color(label)
        axes[0].plot(h.step, h.render.rolling(window, min_periods=1).mean(), color=c, label=label)
        axes[1].plot(h.step, h.decoded.cumsum(), color=c)
    axes[0].set_ylabel(f"render loss ({window}-step mean)")
    axes[1].set_ylabel("latent voxels decoded (cumulative)")
    for ax in axes:
        ax.set_xlabel("step")
    fig.legend(loc="upper center", ncol=3, fontsize=7, bbox_to_anchor=(0.5, 1.1), frameon=False)
    fig.tight_layout()
    return fig


def recon_normals(items, labels, kinds):
    fig, axes = plt.subplots(len(kinds), len(labels), figsize=(1.15 * len(labels) + 0.4, 1.2 * len(kinds) + 0.3))
    axes = np.atleast_2d(axes)
    for i, k in enumerate(kinds):
        for j, lab in enumerate(labels):
            p = items[(k, lab)]
            _img(axes[i, j], normal_rgb(p["normal"], p["mask"] > 0.5))
            if i == len(kinds) - 1:
                axes[i, j].set_xlabel(lab, fontsize=7)
        axes[i, 0].set_ylabel(k.replace("_", " "), fontsize=7)
    fig.tight_layout()
    return fig
