"""Figures of the protein-tokens chapter (kept out of the notebooks so that cells stay short)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from icml26.core import method_color

SS_COLORS = {0: "#999999", 1: "#CC79A7", 2: "#E69F00"}   # coil, helix, strand (set explicitly)
SS_NAMES = {0: "loop / padding", 1: "helix", 2: "strand"}


def gallery(data: dict, per_class: int):
    """3-D C-alpha traces, one column per fold program, coloured by secondary-structure element."""
    classes = data["classes"]
    fig = plt.figure(figsize=(6.9, 1.25 * per_class + 0.4))
    for c, name in enumerate(classes):
        idx = (data["label"] == c).nonzero().flatten()[:per_class]
        for r, i in enumerate(idx.tolist()):
            ax = fig.add_subplot(per_class, len(classes), r * len(classes) + c + 1, projection="3d")
            L = int(data["length"][i])
            x = data["CA"][i, :L].numpy()
            x = x - x.mean(0)
            ss = data["ss"][i, :L].numpy()
            for j in range(L - 1):
                ax.plot(x[j:j + 2, 0], x[j:j + 2, 1], x[j:j + 2, 2], color=SS_COLORS[int(ss[j])], lw=1.6)
            ax.set_axis_off()
            lim = np.abs(x).max()
            ax.set_xlim(-lim, lim), ax.set_ylim(-lim, lim), ax.set_zlim(-lim, lim)
            if r == 0:
                ax.set_title(name, fontsize=9)
    handles = [plt.Line2D([], [], color=SS_COLORS[k], lw=2, label=SS_NAMES[k]) for k in (1, 2, 0)]
    fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False, bbox_to_anchor=(0.5, -0.02))
    fig.subplots_adjust(wspace=0, hspace=0, bottom=0.1)
    return fig


def fsq_staircase(fsq):
    """bound(z) and the quantised value per level count."""
    z = torch.linspace(-4, 4, 801)
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.6), sharey=False)
    for ax, (j, lv) in zip(axes, [(0, fsq.levels[0]), (1, fsq.levels[1])]):
        zz = torch.zeros(len(z), len(fsq.levels))
        zz[:, j] = z
        with torch.no_grad():
            b = fsq.bound(zz)[:, j]
            q = fsq.quantize(zz)[:, j] * (lv // 2)
        ax.plot(z, b, color=method_color("reference"), lw=1, ls="--", label="bound(z)")
        ax.plot(z, q, color=method_color("APT-mini"), lw=1.6, label="round(bound(z))")
        ax.set_xlabel("pre-quantisation value z")
        ax.set_ylabel(f"level index ({lv} levels)")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    fig.tight_layout()
    return fig


def nested_dropout(df):
    """Principal angles and prefix MSE vs k for the linear autoencoder, with and without nested dropout."""
    fig, axes = plt.subplots(1, 2, figsize=(6.6, 2.7))
    for nested, name in ((True, "nested dropout"), (False, "no nested dropout")):
        d = df[df.nested == nested].groupby("k")
        col = method_color("APT-mini" if nested else "Kanzi-mini")
        m, s = d.angle_deg.mean(), d.angle_deg.std()
        axes[0].errorbar(m.index, m, yerr=s, color=col, marker="o", ms=3, capsize=2, label=name)
        mm = d.mse.mean()
        axes[1].plot(mm.index, mm, color=col, marker="o", ms=3, label=name)
    opt = df.groupby("k").optimum.first()
    axes[1].plot(opt.index, opt, color=method_color("reference"), ls="--", label=r"$\sum_{j>k}\lambda_j$")
    axes[0].set_xlabel("units kept k")
    axes[0].set_ylabel("largest principal angle (deg)")
    axes[1].set_xlabel("units kept k")
    axes[1].set_ylabel("reconstruction MSE")
    axes[1].set_yscale("log")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def rmsd_vs_k(rec: dict, ks):
    """Mean reconstruction RMSD (and TM-score) vs number of kept tokens, per model."""
    fig, axes = plt.subplots(1, 2, figsize=(6.6, 2.8))
    for name, df in rec.items():
        col = method_color(name)
        for ax, col_name in zip(axes, ("rmsd", "tm")):
            d = df[df.k >= 0].groupby("k")[col_name]
            m = d.mean()
            se = d.std() / np.sqrt(d.count())
            xs = [max(k, 0.5) for k in m.index]
            ax.errorbar(xs, m, yerr=1.96 * se, color=col, marker="o", ms=3, capsize=2, label=name)
            if (df.k == -1).any():
                a = df[df.k == -1][col_name]
                ax.errorbar([64], [a.mean()], yerr=[1.96 * a.std() / np.sqrt(len(a))], color=col, marker="s",
                            ms=5, capsize=2, ls="none", label=f"{name}, all L tokens")
    for ax, lab in zip(axes, ("C-alpha RMSD (A)", "TM-score")):
        ax.set_xscale("log", base=2)
        ax.set_xticks([0.5, 1, 2, 4, 8, 16, 64], ["0", "1", "2", "4", "8", "16", "L"])
        ax.set_xlabel("tokens kept k")
        ax.set_ylabel(lab)
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def decodes_overlay(target: np.ndarray, decodes: dict):
    """A target trace and its decodes from k tokens (each superposed on the target), 2-D projection."""
    ks = list(decodes)
    fig, axes = plt.subplots(1, len(ks), figsize=(6.9, 2.0))
    for ax, k in zip(np.atleast_1d(axes), ks):
        ax.plot(target[:, 0], target[:, 1], color=method_color("reference"), lw=1.2, label="target")
        y = decodes[k]
        ax.plot(y[:, 0], y[:, 1], color=method_color("APT-mini"), lw=1.2, label="decode")
        ax.set_aspect("equal")
        ax.set_xticks([]), ax.set_yticks([])
        ax.set_xlabel(f"k = {k}")
    np.atleast_1d(axes)[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def swap_curves(sw: dict, profiles: dict, first_profile: int, last_profile):
    """Swap RMSD vs token position (left) and per-residue displacement for one protein (right)."""
    fig, axes = plt.subplots(1, 2, figsize=(6.6, 2.8))
    for name, df in sw.items():
        col = method_color(name)
        last = df.groupby("length").token.transform("max") if name.startswith("Kanzi") else df.token.max()
        df = df.assign(rel=df.token / np.maximum(last, 1))
        d = df.groupby("j").rmsd
        m, se = d.mean(), d.std() / np.sqrt(d.count())
        rel = df.groupby("j").rel.mean()[m.index]
        order = np.argsort(rel.to_numpy())
        m, se, rel = m.iloc[order], se.iloc[order], rel.iloc[order]
        axes[0].errorbar(rel, m, yerr=1.96 * se, color=col, marker="o", ms=3, capsize=2, label=name)
        prof = profiles[name]
        for j, ls in ((first_profile, "-"), (last_profile[name], ":")):
            if j in prof:
                axes[1].plot(prof[j], color=col, ls=ls, lw=1.2, label=f"{name}, token {j if j >= 0 else 'last'}")
    axes[0].set_xlabel("swapped token position / last position")
    axes[0].set_ylabel("RMSD to unswapped decode (A)")
    axes[1].set_xlabel("residue")
    axes[1].set_ylabel("displacement (A)")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=7)
    fig.tight_layout()
    return fig


def probing_bars(tab):
    """Grouped bars: probe accuracy per representation, linear and MLP, for both tasks."""
    tasks = list(dict.fromkeys(tab.task))
    reps = list(dict.fromkeys(tab.representation))
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.9, 3.0), sharey=True)
    palette = ["#0072B2", "#56B4E9", "#D55E00", "#E69F00", "#CC79A7"]
    for ax, task in zip(np.atleast_1d(axes), tasks):
        for r, rep in enumerate(reps):
            for p, probe in enumerate(("linear", "mlp")):
                row = tab[(tab.task == task) & (tab.representation == rep) & (tab.probe == probe)]
                ax.bar(p * (len(reps) + 1) + r, row.accuracy, yerr=row.sd, color=palette[r % len(palette)],
                       capsize=2, label=rep if p == 0 else None)
        ax.set_xticks([(len(reps) - 1) / 2, len(reps) + 1 + (len(reps) - 1) / 2], ["linear", "MLP"])
        ax.set_xlabel(task)
        ax.set_ylim(0, 1.05)
    np.atleast_1d(axes)[0].set_ylabel("5-fold CV accuracy")
    np.atleast_1d(axes)[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=7)
    fig.tight_layout()
    return fig


def shrink_plot(df, natives=None):
    """TM-score of decodes at rho L to the parent and to an other-class control; with ``natives`` (the
    frame of :func:`~icml26.protein_tokens.experiments.native_pairs`), the mean TM-score of native
    same-program and other-program pairs as dashed and dotted reference lines."""
    fig, ax = plt.subplots(figsize=(5.0, 2.8))
    g = df.groupby("rho")
    for col, name, key in (("tm_parent", "parent", "APT-mini"), ("tm_control", "other-class control", "reference")):
        m, se = g[col].mean(), g[col].std() / np.sqrt(g[col].count())
        ax.errorbar(m.index, m, yerr=1.96 * se, color=method_color(key), marker="o", ms=3, capsize=2, label=name)
    if natives is not None:
        grey = method_color("reference")
        ax.axhline(float(natives["tm_same"].mean()), color=grey, ls="--", lw=1, label="natives, same program")
        ax.axhline(float(natives["tm_other"].mean()), color=grey, ls=":", lw=1, label="natives, other program")
    ax.set_xlabel(r"decoded length / encoded length $\rho$")
    ax.set_ylabel("TM-score (TM-align)")
    ax.invert_xaxis()
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig
