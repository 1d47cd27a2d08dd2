"""Figures of the Preconditioned DeltaNet chapter (no titles: captions live in the notebooks)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..core import method_colors

_REG_ORDER = ("linear attention", "DeltaNet", "PDN x=1.5", "PDN x=2", "Jacobi (unsquashed)", "RLS")


def error_curves(results: dict, t_check: int):
    """Relative error vs t, one panel per skew (``results = {'axis-aligned': res, 'rotated': res}``)."""
    colors = method_colors(_REG_ORDER)
    fig, axes = plt.subplots(1, len(results), figsize=(6.7, 3.6), sharey=True, layout="constrained")
    for ax, (label, res) in zip(np.atleast_1d(axes), results.items()):
        for name in _REG_ORDER:
            err = res["err"][name].clamp_min(1e-8)
            t = np.arange(1, err.shape[1] + 1)
            mid = err.log().mean(0).exp().numpy()  # geometric mean over seeds
            ax.plot(t, mid, color=colors[name], label=name)
            if err.shape[0] > 1:
                ax.fill_between(t, err.min(0).values.numpy(), err.max(0).values.numpy(), color=colors[name],
                                alpha=0.15, lw=0)
        ax.axvline(t_check, color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_ylim(1e-7, 1e2)
        ax.set_xlabel("tokens written t")
        ax.text(0.98, 0.97, label, transform=ax.transAxes, ha="right", va="top")
    np.atleast_1d(axes)[0].set_ylabel("relative error ||S_t - W|| / ||W||")
    fig.legend(*np.atleast_1d(axes)[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=8)
    return fig


def condition_bars(conds: dict):
    """κ(Σ) and κ(D^{-1/2} Σ D^{-1/2}) for each skew (``conds = {label: (before, after)}``)."""
    fig, ax = plt.subplots(figsize=(5.0, 3.2), layout="constrained")
    labels = list(conds)
    x = np.arange(len(labels))
    c = method_colors(["key covariance", "after diagonal scaling"])
    ax.bar(x - 0.2, [conds[k][0] for k in labels], 0.4, label="key covariance", color=c["key covariance"])
    ax.bar(x + 0.2, [conds[k][1] for k in labels], 0.4, label="after diagonal scaling",
           color=c["after diagonal scaling"])
    ax.set_xticks(x, labels)
    ax.set_ylabel("condition number")
    fig.legend(loc="outside right upper", fontsize=8)
    return fig


def squash_curves(xs=(1.25, 1.5, 2.0), centers=(-0.2, -3.4657)):  # -3.4657 = log(1/32)
    """``m(a)`` for several ``x`` and two centres."""
    from .method import squash_preconditioner

    a = torch.logspace(-6, 2, 400, dtype=torch.float64)
    fig, ax = plt.subplots(figsize=(6.0, 3.4), layout="constrained")
    colors = method_colors([f"x={x:g}" for x in xs])
    for x in xs:
        for c, ls in zip(centers, ("-", "--")):
            m = squash_preconditioner(a, center=c, x=x)
            ax.plot(a.numpy(), m.numpy(), color=colors[f"x={x:g}"], ls=ls, label=f"x={x:g}, c={c:.2f}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("preconditioner state a (running mean of k^2)")
    ax.set_ylabel("write multiplier m")
    fig.legend(loc="outside right upper", fontsize=7)
    return fig


def eigen_histogram(eigs: dict, lower: float = -1.0):
    """Histogram of write eigenvalues per method with the stable band [-1, 1] shaded."""
    fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    colors = method_colors(list(eigs))
    lo = min(lower, min(float(e.min()) for e in eigs.values()))
    bins = np.linspace(lo - 0.05, 1.0, 80)
    ax.axvspan(-1, 1, color="grey", alpha=0.1, lw=0)
    for name, e in eigs.items():
        ax.hist(e.flatten().numpy(), bins=bins, histtype="step", lw=1.6, color=colors[name], label=name,
                density=True)
    ax.axvline(-1, color="black", lw=0.8, ls=":")
    ax.set_xlabel("write eigenvalue 1 - beta <k, m k>")
    ax.set_ylabel("density")
    fig.legend(loc="outside right upper", fontsize=8)
    return fig


def stress_plot(norms: dict):
    """State norm vs t in the stress test, one line per ``x``."""
    fig, ax = plt.subplots(figsize=(6.0, 3.3), layout="constrained")
    colors = method_colors([f"x={x:g}" for x in norms])
    for x, n in norms.items():
        ax.plot(np.arange(1, len(n) + 1), n.clamp_min(1e-12).numpy(), color=colors[f"x={x:g}"], label=f"x={x:g}")
    ax.set_yscale("log")
    ax.set_xlabel("step t")
    ax.set_ylabel("state norm ||S_t||")
    fig.legend(loc="outside right upper", fontsize=8)
    return fig


def timing_plot(df):
    """Time vs T (left) for recurrent and each chunk size, and the recurrent/chunk ratio (right)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(6.7, 3.6), layout="constrained")
    rec = df[df["mode"] == "recurrent"].set_index("T")["seconds"]
    chunks = sorted(df["chunk"].dropna().unique())
    names = ["recurrent"] + [f"chunk C={int(c)}" for c in chunks]
    colors = method_colors(names)
    ax1.plot(rec.index, rec.values, "o-", color=colors["recurrent"], label="recurrent")
    for c in chunks:
        ch = df[(df["mode"] == "chunk") & (df["chunk"] == c)].set_index("T")["seconds"]
        ax1.plot(ch.index, ch.values, "o-", color=colors[f"chunk C={int(c)}"], label=f"chunk C={int(c)}")
        ax2.plot(ch.index, (rec / ch).values, "o-", color=colors[f"chunk C={int(c)}"], label=f"C={int(c)}")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length T")
    ax1.set_yscale("log")
    ax1.set_ylabel("forward time (s)")
    ax2.axhline(1.0, color="grey", lw=0.8)
    ax2.set_ylabel("recurrent time / chunk time")
    fig.legend(*ax1.get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=8)
    return fig


def recall_plot(df, beta: float):
    """Single-pass recall accuracy vs n, one panel per skew, at one β."""
    sub = df[df["beta"] == beta]
    skews = list(dict.fromkeys(sub["skew"]))
    methods = list(dict.fromkeys(sub["method"]))
    colors = method_colors(methods)
    fig, axes = plt.subplots(1, len(skews), figsize=(6.7, 3.6), sharey=True, layout="constrained")
    for ax, skew in zip(np.atleast_1d(axes), skews):
        for name in methods:
            d = sub[(sub["skew"] == skew) & (sub["method"] == name)]
            ax.errorbar(d["n"], d["acc"], yerr=d["acc_std"], marker="o", ms=3, capsize=2, color=colors[name],
                        label=name)
        ax.set_xlabel("stored pairs n")
        ax.text(0.02, 0.03, skew, transform=ax.transAxes)
    np.atleast_1d(axes)[0].set_ylabel("recall accuracy")
    fig.legend(*np.atleast_1d(axes)[0].get_legend_handles_labels(), loc="outside lower center", ncol=5, fontsize=8)
    return fig


def mqar_plot(results, curves):
    """Final accuracy per variant (left) and training-loss curves (right)."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(6.7, 3.6), layout="constrained")
    names = list(dict.fromkeys(results["variant"]))
    colors = method_colors(names)
    acc = results.groupby("variant", sort=False)["acc"].mean()
    ax1.bar(range(len(names)), [acc[n] for n in names], color=[colors[n] for n in names])
    ax1.set_xticks(range(len(names)), names)
    ax1.set_ylim(0, 1.05)
    ax1.set_ylabel("query accuracy")
    for (name, _seed), hist in curves.items():
        ax2.plot(hist["step"], hist["loss"], color=colors[name], label=name)
    handles, labels = ax2.get_legend_handles_labels()
    keep = dict(zip(labels, handles))
    fig.legend(keep.values(), keep.keys(), loc="outside lower center", ncol=len(keep), fontsize=8)
    ax2.set_yscale("log")
    ax2.set_xlabel("training step")
    ax2.set_ylabel("cross-entropy at query positions")
    return fig


def m_histogram(values: dict):
    """Histogram of learned write multipliers ``m`` per layer."""
    fig, ax = plt.subplots(figsize=(6.0, 3.3), layout="constrained")
    colors = method_colors(list(values))
    for name, m in values.items():
        ax.hist(m.flatten().numpy(), bins=60, histtype="step", lw=1.6, color=colors[name], label=name, density=True)
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("write multiplier m")
    ax.set_ylabel("density")
    fig.legend(loc="outside right upper", fontsize=8)
    return fig
