"""Figures of the watermark chapter (no colour is named in a caption; markers carry the meaning)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icml26.core import method_color, method_colors

from .framework import pareto_mask, power_exact, power_normal
from .method import effective_gamma

_FAMILY_MARK = {"uniform": "o", "zipf": "s", "softmax": "^"}


def green_rate(df, gamma_eff: float, delta: float):
    """mu1 and forward KL vs entropy: Monte Carlo (markers, 2 s.e. bars) and predictions (lines)."""
    fig, axes = plt.subplots(1, 2, figsize=(6.9, 3.0))
    cols = method_colors(["uniform", "zipf", "softmax"])
    for fam, d in df.groupby("family", sort=False):
        d = d.sort_values("entropy")
        for ax, mc, se, pred in ((axes[0], "mu1_mc", "mu1_se", "mu1_pred"), (axes[1], "kl_mc", "kl_se", "kl_pred")):
            ax.errorbar(d["entropy"], d[mc], yerr=2 * d[se], fmt=_FAMILY_MARK[fam], ms=4, color=cols[fam],
                        label=f"{fam}: Monte Carlo", lw=0, elinewidth=1)
            ax.plot(d["entropy"], d[pred], "-", color=cols[fam], lw=1, label=f"{fam}: prediction")
        axes[0].plot(d["entropy"], d["lower"], ":", color=cols[fam], lw=1, label=f"{fam}: spike bound")
    axes[0].axhline(df["upper"].iloc[0], color="k", ls="--", lw=1, label=r"$\mu_{\max}$ (Jensen)")
    axes[0].axhline(gamma_eff, color="k", ls="-.", lw=1, label=r"$\gamma$")
    axes[0].set(xlabel="entropy of p (nats)", ylabel=r"green rate $\mu_1$")
    axes[1].set(xlabel="entropy of p (nats)", ylabel=r"KL$(\hat p\,\|\,p)$ per token")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def power_curves(curves, configs, alpha: float, n_vocab: int):
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    names = [f"gamma={g}, delta={d}" for g, d in configs]
    cols = method_colors(names)
    T = np.arange(1, int(curves["T"].max()) + 1)
    for (g, d), name in zip(configs, names):
        c = curves[(curves.gamma == g) & (curves.delta == d)]
        mu1, ge = float(c["mu1"].iloc[0]), effective_gamma(n_vocab, g)
        ax.plot(T, power_exact(mu1, ge, T, alpha), "-", color=cols[name], lw=1.2, label=f"{name}: exact")
        ax.plot(T, power_normal(mu1, ge, T, alpha), "--", color=cols[name], lw=1, label=f"{name}: normal")
        ax.plot(c["T"], c["mc"], "o", color=cols[name], ms=5, label=f"{name}: Monte Carlo")
    ax.set(xlabel="scored tokens T", ylabel=f"power at alpha={alpha}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def fpr(tab):
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    ax.semilogy(tab["z0"], tab["exact"], "o-", color=method_color("simulation"), label="exact binomial")
    ax.semilogy(tab["z0"], tab["normal"], "s--", color=method_color("uncalibrated"), label=r"normal tail $1-\Phi(z_0)$")
    ax.set(xlabel=r"threshold $z_0$ (reject when $z\geq z_0$)", ylabel="false-positive rate")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def heatmaps(h, taus):
    fig, axes = plt.subplots(2, len(taus), figsize=(6.9, 5.0), sharex=True, sharey=True)
    ext = [h["gammas"][0], h["gammas"][-1], h["deltas"][0], h["deltas"][-1]]
    for j, tau in enumerate(taus):
        ts = np.log10(np.clip(h[tau]["T_star"], 1, 1e5))
        im0 = axes[0, j].imshow(ts, origin="lower", aspect="auto", extent=ext, vmin=0, vmax=5)
        im1 = axes[1, j].imshow(h[tau]["kl"], origin="lower", aspect="auto", extent=ext, vmin=0,
                                vmax=max(float(h[t]["kl"].max()) for t in taus))
        axes[0, j].set_title(f"H = {h[tau]['entropy']:.1f} nats", fontsize=9)
        axes[1, j].set_xlabel(r"$\gamma$")
    for i in range(2):
        axes[i, 0].set_ylabel(r"$\delta$")
    fig.colorbar(im0, ax=axes[0, :], label=r"$\log_{10} T^\star$")
    fig.colorbar(im1, ax=axes[1, :], label="KL per token")
    return fig


def entropy_hist(profiles: dict):
    fig, ax = plt.subplots(figsize=(5.5, 3.0))
    names = [f"teacher tau={t}" for t in profiles]
    cols = method_colors(names)
    for prof, name in zip(profiles.values(), names):
        ax.hist(prof["entropy"].flatten().numpy(), bins=60, density=True, histtype="step", lw=1.5,
                color=cols[name], label=name)
    ax.set(xlabel="entropy of the next-token distribution (nats)", ylabel="density")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def null_z(nul, gamma: float):
    fig, ax = plt.subplots(figsize=(5.5, 3.0))
    x = np.linspace(-5, 7, 300)
    cols = method_colors(["de-duplicated", "every token"])
    for dedup, name in ((True, "de-duplicated"), (False, "every token")):
        z = nul[(nul.gamma == gamma) & (nul.dedup == dedup)]["z"].iloc[0]
        ax.hist(z, bins=np.arange(-5, 7.01, 0.4), density=True, histtype="step", lw=1.5, color=cols[name], label=name)
    ax.plot(x, np.exp(-x**2 / 2) / np.sqrt(2 * np.pi), "k--", lw=1, label="N(0, 1)")
    ax.set(xlabel="z-score of unwatermarked text", ylabel="density")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def calibration(grids: dict):
    fig, axes = plt.subplots(1, 3, figsize=(6.9, 2.6))
    names = [f"tau={t}" for t in grids]
    cols = method_colors(names)
    for g, name in zip(grids.values(), names):
        for ax, emp, pred in zip(axes, ("green", "kl", "power"), ("green_pred", "kl_pred", "power_pred")):
            ax.plot(g[pred], g[emp], "o", ms=3.5, color=cols[name], label=name)
    for ax, lab in zip(axes, ("green fraction", "KL per token", "power")):
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [lo, hi], "k:", lw=1)
        ax.set(xlabel=f"predicted {lab}", ylabel=f"measured {lab}")
    axes[2].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def frontier(grids: dict, tables: dict, target: float):
    fig, axes = plt.subplots(1, len(grids), figsize=(6.9, 3.0), sharey=True)
    axes = np.atleast_1d(axes)
    marks = {"algorithm A": "*", "default (0.25, 2)": "X", "default (0.5, 2)": "P", "uncalibrated": "^"}
    for ax, (tau, g) in zip(axes, grids.items()):
        keep = pareto_mask(g["kl"], g["power"])
        ax.plot(g["kl"], g["power"], "o", ms=3, color="0.6", label="grid")
        f = g[keep].sort_values("kl")
        ax.step(f["kl"], f["power"], where="post", color="k", lw=1, label="empirical frontier")
        t = tables[tau]
        for rule, mk in marks.items():
            r = t[(t.rule == rule) & t.chosen]
            ax.plot(r["kl"], r["power"], mk, ms=11 if mk == "*" else 8, color=method_color(rule), label=rule,
                    markeredgecolor="k", markeredgewidth=0.5)
        ax.axhline(target, color="k", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set(xlabel="KL per token (log scale)", title=f"teacher tau={tau}")
    axes[0].set_ylabel("empirical power")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def token_strip(tokens, green, scored, per_row: int = 25):
    """One sequence as a strip of token ids: each box filled "green" or "red" (set by name) by the
    detector's colouring; hatched boxes are repeats that de-duplicated scoring skips."""
    n = len(tokens)
    rows = -(-n // per_row)
    fig, ax = plt.subplots(figsize=(6.9, 0.45 * rows + 0.3))
    for i, (tok, g, s) in enumerate(zip(tokens, green, scored)):
        r, c = divmod(i, per_row)
        ax.add_patch(plt.Rectangle((c, -r), 0.92, 0.8, facecolor="green" if g else "red", alpha=0.35,
                                   hatch=None if s else "///", edgecolor="k", lw=0.4))
        ax.text(c + 0.46, -r + 0.4, str(int(tok)), ha="center", va="center", fontsize=6.5)
    ax.set(xlim=(0, per_row), ylim=(-rows + 1, 0.85))
    ax.axis("off")
    fig.tight_layout()
    return fig
