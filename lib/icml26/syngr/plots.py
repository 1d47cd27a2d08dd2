"""Figures of the SynGR chapter (captions live in the notebooks' cell metadata)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icml26.core import method_color

ORACLE_NAMES = {"bayes": "Bayes oracle", "no_synergy": "no-synergy oracle", "category": "category oracle",
                "popularity": "popularity"}
PID_PARTS = (("R", "redundancy R"), ("U1", "unique U1"), ("U2", "unique U2"), ("S", "synergy S"))


def pid_bars(df):
    """Stacked bars of R, U1, U2, S (bits) for every example."""
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    bottom = np.zeros(len(df))
    x = np.arange(len(df))
    for i, (col, label) in enumerate(PID_PARTS):
        ax.bar(x, df[col].to_numpy(), bottom=bottom, label=label, color=f"C{i}", width=0.6)
        bottom += df[col].to_numpy()
    ax.set_xticks(x, df.index, rotation=15)
    ax.set_ylabel("information (bits)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def oracle_bars(df):
    """Recall@10 of the oracles and popularity: overall and per slice."""
    cols = [c for c in df.columns if c.startswith("recall@10")]
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    w = 0.8 / len(df)
    for i, name in enumerate(df.index):
        lab = ORACLE_NAMES.get(name, name)
        ax.bar(np.arange(len(cols)) + (i - (len(df) - 1) / 2) * w, df.loc[name, cols].to_numpy(float), w,
               label=lab, color=method_color(lab))
    ax.set_xticks(np.arange(len(cols)), [c.replace("recall@10", "").strip() or "all targets" for c in cols])
    ax.set_ylabel("recall@10")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def recoverability_heatmap(df):
    """Attribute x code-type recoverability."""
    fig, ax = plt.subplots(figsize=(5.6, 2.8))
    im = ax.imshow(df.to_numpy(float), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(df.shape[1]), df.columns, rotation=15)
    ax.set_yticks(range(df.shape[0]), df.index)
    ax.grid(False)
    for i in range(df.shape[0]):
        for j in range(df.shape[1]):
            v = df.iloc[i, j]
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8, color="k" if v > 0.5 else "w")
    fig.colorbar(im, ax=ax, label="accuracy")
    return fig


def collision_plot(df):
    """Collision rate vs number of levels, one line per (K, modality)."""
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for i, ((K, mod), g) in enumerate(df.groupby(["K", "modality"])):
        ax.plot(g["levels"], g["collision_rate"], marker="o", color=f"C{i}",
                ls="-" if mod == "text" else "--", label=f"{mod}, K={K}")
    ax.set_xlabel("levels D")
    ax.set_ylabel("collision rate")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def contrastive_curve(taus=(0.07, 0.2, 1.0)):
    """L_cl = softplus(gap / tau) against the similarity gap cos(z_m, z_u) - cos(z_m, z_o)."""
    gap = np.linspace(-2, 2, 201)
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for i, t in enumerate(taus):
        ax.plot(gap, np.logaddexp(0, gap / t), color=f"C{i}", label=f"tau = {t}")
    ax.axhline(np.log(2), color="k", lw=0.8, ls=":")
    ax.set_xlabel("cos(z_mask, z_uni) - cos(z_mask, z_ori)")
    ax.set_ylabel("L_cl (nats)")
    ax.set_yscale("log")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def method_bars(agg, oracles):
    """Recall@10 and NDCG@10 per method (mean over seeds, points per seed), oracle reference lines."""
    fig, axes = plt.subplots(1, 2, figsize=(6.9, 3.0))
    names = list(agg["method"].unique())
    for ax, metric in zip(axes, ("recall@10", "ndcg@10")):
        for i, n in enumerate(names):
            vals = agg.loc[agg["method"] == n, metric].to_numpy()
            ax.bar(i, vals.mean(), color=method_color(n), width=0.7)
            ax.plot(np.full(len(vals), i), vals, "o", color="k", ms=3)
        for o, ls in (("bayes", "-"), ("no_synergy", "--")):
            ax.axhline(oracles.loc[o, metric], color=method_color(ORACLE_NAMES[o]), ls=ls, lw=1,
                       label=ORACLE_NAMES[o])
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
        ax.set_ylabel(metric)
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def slice_bars(agg, oracles):
    """Recall@10 per slice and method, with the oracles' values as reference lines."""
    slices = ["recall@10 series_continuation", "recall@10 other_series"]
    names = list(agg["method"].unique())
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    w = 0.8 / len(names)
    for i, n in enumerate(names):
        vals = agg.loc[agg["method"] == n, slices].mean().to_numpy()
        ax.bar(np.arange(2) + (i - (len(names) - 1) / 2) * w, vals, w, color=method_color(n), label=n)
    for o, ls in (("bayes", "-"), ("no_synergy", "--")):
        for j, s in enumerate(slices):
            ax.hlines(oracles.loc[o, s], j - 0.45, j + 0.45, color=method_color(ORACLE_NAMES[o]), ls=ls, lw=1,
                      label=ORACLE_NAMES[o] if j == 0 else None)
    ax.set_xticks(range(2), ["series continuation", "other series"])
    ax.set_ylabel("recall@10")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def share_curves(logs):
    """Share of last-layer saliency on text tokens vs epoch (validation histories)."""
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for name, log in logs.items():
        ax.plot(log.epochs, log.text_share, marker="o", color=method_color(name), label=name)
    ax.axhline(0.5, color="k", lw=0.8, ls=":")
    ax.set_xlabel("epoch")
    ax.set_ylabel("text share of saliency")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def saliency_strip(ex, n_prompt, levels):
    """Saliency of every input position of one history; masked positions marked with a cross."""
    sal, valid, masked, pm = ex["saliency"], ex["valid"], ex["masked"], ex["pos_modality"]
    fig, ax = plt.subplots(figsize=(5.4, 2.6))
    x = np.arange(len(sal))
    for code, lab, c in ((0, "prompt", "C6"), (1, "text token", "C0"), (2, "image token", "C1")):
        m = (pm == code) & valid
        ax.bar(x[m], sal[m], color=c, label=lab, width=0.8)
    ax.plot(x[masked], sal[masked], "kx", ms=8, label="masked in H_mask")
    for b in range(n_prompt, len(sal) + 1, 2 * levels):
        ax.axvline(b - 0.5, color="k", lw=0.4, alpha=0.4)
    ax.set_xlabel("input position (blocks = history items)")
    ax.set_ylabel("saliency s_i")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def validation_curves(df, methods=("GR-text", "GR-fused")):
    """Validation Recall@10 against the epoch, one line per training seed, one panel per method
    (``df`` from :func:`icml26.syngr.experiments.validation_curves`); a marker at each seed's best epoch."""
    methods = [mth for mth in methods if (df["method"] == mth).any()]
    fig, axes = plt.subplots(1, len(methods), figsize=(6.4, 3.0), sharey=True, squeeze=False)
    for ax, mth in zip(axes[0], methods):
        sub = df[df["method"] == mth]
        for _seed, g in sub.groupby("seed"):
            g = g.sort_values("epoch")
            ax.plot(g["epoch"], g["val_recall@10"], marker=".", lw=1.0, color=method_color(mth), alpha=0.75)
            b = g.loc[g["val_recall@10"].idxmax()]
            ax.plot([b["epoch"]], [b["val_recall@10"]], marker="o", ms=6, mfc="none", color="k")
        ax.set_title(mth)
        ax.set_xlabel("epoch")
    axes[0, 0].set_ylabel("validation recall@10")
    return fig
