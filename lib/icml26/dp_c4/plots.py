"""Figures of the dp-c4 notebooks (kept here so that notebook cells stay short)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from icml26.core import method_color

from .method import clip_rows

LEGEND = dict(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)


def toy_field(problem, C_list, x_star: float):
    """:math:`\\frac1n\\sum_i\\operatorname{clip}(x-b_i,C)` against x, with its zero and x*."""
    xs = torch.linspace(-1, 3, 801, dtype=torch.float64)
    b = problem.y
    fig, ax = plt.subplots(figsize=(5.8, 3.2))
    for C in C_list:
        field = clip_rows((xs[:, None] - b[None, :])[..., None], C)[..., 0].mean(1)
        line, = ax.plot(xs, field, lw=1.6, label=f"C = {C:g}")
        zero = float(xs[torch.argmin(field.abs())])
        ax.plot([zero], [0], "o", color=line.get_color(), ms=5)
    ax.plot(xs, xs - b.mean(), "k--", lw=1.2, label=r"no clipping, $\nabla F$")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axvline(x_star, color="0.3", lw=0.8, ls=":")
    ax.set_xlabel("x")
    ax.set_ylabel("mean clipped gradient")
    ax.legend(**LEGEND)
    return fig


def bias_vs_C(df):
    fig, ax = plt.subplots(figsize=(4.8, 3.2))
    ax.loglog(df["C"], df["dist"], "o-", color=method_color("clipped GD"), label="clipped GD fixed point")
    ax.set_xlabel("clipping threshold C")
    ax.set_ylabel(r"$\|x_C-x^\star\|$")
    ax.legend(**LEGEND)
    return fig


def race(res):
    fig, ax = plt.subplots(figsize=(5.3, 3.4))
    styles = ["-", "--", ":"]
    for name in ("clipped GD", "DP-C4"):
        tr = res[name]
        for j, C in enumerate(res["C"]):
            ax.semilogy(tr.steps, tr.dist[j].clamp_min(1e-17), styles[j % 3], color=method_color(name), lw=1.5,
                        label=f"{name}, C = {C:g}")
    ax.set_xlabel("step")
    ax.set_ylabel(r"$\|x_t-x^\star\|$")
    ax.legend(**LEGEND)
    return fig


def clip_stats(res):
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 3.0))
    styles = ["-", "--", ":"]
    for name in ("clipped GD", "DP-C4"):
        tr = res[name]
        for j, C in enumerate(res["C"]):
            kw = dict(color=method_color(name), ls=styles[j % 3], lw=1.4, label=f"{name}, C = {C:g}")
            axes[0].plot(tr.steps, tr.clip_frac[j], **kw)
            axes[1].semilogy(tr.steps, tr.innov_norm[j].clamp_min(1e-17), **kw)
    axes[0].set_ylabel("fraction clipped")
    axes[1].set_ylabel("mean norm of what is clipped")
    for ax in axes:
        ax.set_xlabel("step")
    axes[1].legend(**LEGEND)
    fig.tight_layout()
    return fig


def decay(trace, rhos, C0):
    fig, axes = plt.subplots(1, 2, figsize=(6.8, 3.0))
    for j, r in enumerate(rhos):
        line, = axes[0].semilogy(trace.steps, trace.dist[j].clamp_min(1e-17), lw=1.5, label=rf"$\rho$ = {r:g}")
        axes[1].semilogy(trace.steps, C0 * r ** trace.steps.double(), color=line.get_color(), lw=1.5)
        axes[1].semilogy(trace.steps, trace.innov_norm[j].clamp_min(1e-17), color=line.get_color(), lw=1, ls=":")
    axes[0].set_ylabel(r"$\|x_t-x^\star\|$")
    axes[1].set_ylabel(r"threshold $C_t$ and innovation")
    axes[1].set_ylim(1e-18, 10 * C0)
    for ax in axes:
        ax.set_xlabel("step")
    axes[1].legend(axes[0].get_lines(), [ln.get_label() for ln in axes[0].get_lines()], **LEGEND)
    fig.tight_layout()
    return fig


def eps_vs_stages(df):
    fig, ax = plt.subplots(figsize=(5.6, 3.2))
    ax.plot(df["stages"], df["dpgd"], "o-", color=method_color("DP-GD"), ms=3, label="DP-GD, fixed sigma")
    ax.plot(df["stages"], df["dpc4"], "s-", color=method_color("DP-C4"), ms=3,
            label=r"DP-C4, $\sigma_k\propto C_k^{-1/2}$")
    ax.set_xlabel("stages run")
    ax.set_ylabel(r"$\varepsilon$ at $\delta=10^{-5}$")
    ax.legend(**LEGEND)
    return fig


def curves(table, curves_, rows, labels, title_eps, ylabel=r"$\|x_t-x^\star\|$", log=True):
    """Distance to x* (or another logged curve, ``ylabel``) against step, mean +- sd over seeds."""
    fig, axes = plt.subplots(1, len(title_eps), figsize=(6.9, 3.0), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, eps in zip(axes, title_eps):
        for r, lab in zip(rows, labels):
            row = table.loc[r]
            if row["eps"] != eps:
                continue
            c = curves_[r]
            mu, sd = c.mean(0), c.std(0)
            col = method_color(lab)
            ax.plot(row["steps"], mu, color=col, lw=1.5, label=lab)
            ax.fill_between(row["steps"], np.maximum(mu - sd, 1e-6) if log else mu - sd, mu + sd, color=col,
                            alpha=0.2, lw=0)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.text(0.97, 0.95, rf"$\varepsilon$ = {eps:g}", transform=ax.transAxes, ha="right", va="top")
    axes[0].set_ylabel(ylabel)
    axes[-1].legend(**LEGEND)
    fig.tight_layout()
    return fig


def noise_std(best, K, T):
    """Per-step noise std of the best configurations (log scale); DP-C4 is constant within a stage."""
    fig, ax = plt.subplots(figsize=(4.6, 3.2))
    m = T // K
    for _, row in best.iterrows():
        name, ls = row["method"], "-" if row["eps"] == min(best["eps"]) else "--"
        if name == "DP-C4":
            C = row["C0"] * row["rho"] ** np.arange(K)
            std = row["std_first"] * (C / C[0]) ** (0.5 if row["shape"] == "sqrt" else 1.0)
            ax.step(np.arange(K + 1) * m, np.r_[std, std[-1]], where="post", color=method_color(name), ls=ls,
                    label=f"DP-C4, eps = {row['eps']:g}")
        else:
            ax.plot([0, T], [row["std_first"]] * 2, color=method_color(name), ls=ls,
                    label=f"{name}, eps = {row['eps']:g}")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(r"noise std $\sigma_kC_k$")
    ax.legend(**LEGEND)
    return fig


def dist_vs_n(df, slopes):
    """Final distance to x* against n (log-log), mean over seeds with min-max bars, the fitted slopes and
    the predicted tilt size."""
    fig, ax = plt.subplots(figsize=(5.2, 3.3))
    for name in ("DP-GD", "DP-C4"):
        g = df[df["method"] == name].groupby("n")["dist"]
        mu, lo, hi = g.mean(), g.min(), g.max()
        ax.errorbar(mu.index, mu, yerr=[mu - lo, hi - mu], fmt="o-", ms=4, lw=1.4, capsize=2,
                    color=method_color(name), label=f"{name} (slope {slopes[name]:.2f})")
    pred = df.groupby("n")["predicted_tilt"].first()
    ax.plot(pred.index, pred, "k:", lw=1.2, label="predicted tilt of DP-C4")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("training examples n")
    ax.set_ylabel(r"final $\|x_T-x^\star\|$")
    ax.legend(**LEGEND)
    return fig


def eps_vs_steps(df, T):
    """Epsilon spent against steps at q < 1 for DP-SGD and staged DP-C4, one line style per accountant."""
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    styles = {"rdp": "-", "pld": "--"}
    for b, g in df.groupby("backend", sort=False):
        for col, name in (("dpsgd", "DP-SGD"), ("dpc4", "DP-C4")):
            ax.plot(g["steps"], g[col], styles.get(b, ":"), marker="o", ms=3, lw=1.4, color=method_color(name),
                    label=f"{name}, {b.upper()}")
    ax.axvline(T, color="0.5", lw=0.8, ls=":")
    ax.set_xlabel("steps run")
    ax.set_ylabel(r"$\varepsilon$ at $\delta=10^{-5}$")
    ax.legend(**LEGEND)
    return fig
