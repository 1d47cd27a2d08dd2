"""Figures of the sfconvcnp chapter. Methods take their colours from ``icml26.core.method_color``;
captions describe line styles and markers, not colours."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from icml26.core import method_color, method_colors


def _legend_right(ax, **kw):
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, **kw)


def embedding_and_spectrum(x_grid, h_den, h_feat, xc, yc, xi, spec_closed, spec_quad):
    """Left: density and feature channels of the set embedding; right: |spectrum| closed form
    (lines) and numerical quadrature (markers)."""
    fig, axes = plt.subplots(1, 2, figsize=(6.9, 2.8))
    ax = axes[0]
    ax.plot(x_grid, h_den, "--", color="k", lw=1.2, label="density $h^{den}$")
    ax.plot(x_grid, h_feat, "-", color="k", lw=1.2, label="feature $h^{feat}$")
    ax.plot(xc, yc, "o", ms=4, mfc="none", color="k", label="context $(x_n, y_n)$")
    ax.set(xlabel="x", ylabel="embedding")
    ax.legend(frameon=False, fontsize=7, loc="lower left")
    ax = axes[1]
    for k, ls in zip(range(spec_closed.shape[1]), ("--", "-")):
        ax.plot(xi, np.abs(spec_closed[:, k]), ls, color="k", lw=1.2,
                label=("density" if k == 0 else "feature") + ": closed form")
        ax.plot(xi, np.abs(spec_quad[:, k]), "o", ms=3, mfc="none", color="0.4",
                label=("density" if k == 0 else "feature") + ": quadrature")
    ax.set(xlabel=r"frequency $\xi$", ylabel=r"$|\hat h(\xi)|$")
    ax.legend(frameon=False, fontsize=7)
    fig.tight_layout()
    return fig


def smoothing_check(xq, fine, closed, coarse, periodised, closed_np):
    """SFConv with Gaussian spectral weights vs the closed form (left) and with a coarse grid vs
    the periodised closed form (right)."""
    fig, axes = plt.subplots(1, 2, figsize=(6.9, 2.8), sharey=True)
    axes[0].plot(xq, closed, "-", color="k", lw=2.5, alpha=0.35, label="closed form")
    axes[0].plot(xq, fine, "--", color=method_color("SFConvCNP"), lw=1.2, label="SFConv")
    axes[0].set(xlabel="query x", ylabel="output")
    axes[0].legend(frameon=False, fontsize=7)
    axes[1].plot(xq, periodised, "-", color="k", lw=2.5, alpha=0.35, label="periodised closed form")
    axes[1].plot(xq, closed_np, ":", color="k", lw=1, label="closed form (no copies)")
    axes[1].plot(xq, coarse, "--", color=method_color("SFConvCNP"), lw=1.2, label="SFConv, coarse grid")
    axes[1].set(xlabel="query x")
    axes[1].legend(frameon=False, fontsize=7)
    fig.tight_layout()
    return fig


def spatial_kernels(tau, kernels: dict):
    """Effective spatial kernels for several (xi_max, Delta) settings."""
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    styles = ["-", "--", ":", "-."]
    for (label, k), ls in zip(kernels.items(), styles):
        ax.plot(tau, k, ls, color="k", lw=1.1, label=label)
    ax.set(xlabel=r"offset $\tau$", ylabel=r"kernel $\kappa(\tau)$")
    _legend_right(ax, fontsize=7)
    return fig


def te_error(df):
    """Max |change of the predictive mean| against the shift, log scale."""
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    names = list(dict.fromkeys(df.model))
    cols = method_colors(names)
    marks = dict(zip(names, "osd^"))
    for name in names:
        d = df[df.model == name]
        ax.semilogy(d["shift"], d["error"].clip(lower=1e-9), marks[name] + "-", ms=3, lw=1, color=cols[name],
                    label=name)
    ax.set(xlabel=r"shift $\tau$", ylabel="max |change of mean|")
    _legend_right(ax, fontsize=7)
    return fig


def scaling(times: dict, slopes: dict):
    """Log-log forward time against the number of context points."""
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    cols = method_colors(list(times))
    for (name, t), mk in zip(times.items(), "osd"):
        ns = np.array(list(t))
        ax.loglog(ns, list(t.values()), mk + "-", ms=4, lw=1, color=cols[name],
                  label=f"{name} (slope {slopes[name]:.2f})")
    ax.set(xlabel="context points N", ylabel="forward time (s)")
    _legend_right(ax, fontsize=7)
    return fig


def operator_kernels(x, k1, probes: dict, losses: dict):
    """Left: first-order kernel probed from each fitted layer against the true ``k1``; right: losses."""
    fig, axes = plt.subplots(1, 2, figsize=(6.9, 2.8))
    axes[0].plot(x, k1, "-", color="k", lw=2.5, alpha=0.35, label="true $k_1$")
    cols = method_colors(list(probes))
    for (name, k), ls in zip(probes.items(), ("--", ":")):
        axes[0].plot(x, k, ls, color=cols[name], lw=1.4, label=name)
    axes[0].set(xlabel="x", ylabel="first-order kernel")
    axes[0].legend(frameon=False, fontsize=7)
    for (name, loss), ls in zip(losses.items(), ("--", ":")):
        w = max(1, len(loss) // 50)
        sm = np.convolve(loss, np.ones(w) / w, mode="valid")
        axes[1].semilogy(np.arange(len(sm)) + w, sm, ls, color=cols[name], lw=1.2, label=name)
    axes[1].set(xlabel="step", ylabel="training MSE")
    fig.tight_layout()
    return fig


def loglik_points(df, order, oracle=None, xlabel="test log-likelihood (nats)", by="test"):
    """Per-seed log-likelihoods (markers) and their mean (bar) per model and test split."""
    tests = list(dict.fromkeys(df[by]))
    fig, axes = plt.subplots(1, len(tests), figsize=(6.9 if len(tests) > 1 else 5.2, 0.5 + 0.45 * len(order)),
                             sharey=True, squeeze=False)
    cols = method_colors(order)
    for ax, t in zip(axes[0], tests):
        d = df[df[by] == t]
        for i, name in enumerate(order):
            v = d[d.model == name].loglik.to_numpy()
            if len(v) == 0:
                continue
            ax.barh(i, v.mean(), color=cols[name], alpha=0.35, height=0.6)
            ax.plot(v, np.full(len(v), i), "o", ms=4, color=cols[name])
        if oracle is not None and t in oracle:
            ax.axvline(oracle[t], color="k", ls="--", lw=1)
        ax.set_yticks(range(len(order)), order)
        ax.set(xlabel=xlabel)
        if len(tests) > 1:
            ax.text(0.02, 1.02, t, transform=ax.transAxes, fontsize=8)
        lo = min(d.loglik.min(), oracle.get(t, d.loglik.min()) if oracle else d.loglik.min())
        hi = max(d.loglik.max(), oracle.get(t, d.loglik.max()) if oracle else d.loglik.max())
        pad = 0.15 * (hi - lo + 1e-3)
        ax.set_xlim(lo - pad, hi + pad)
    fig.tight_layout()
    return fig


def translation(df, oracle: float | None = None):
    """Mean test log-likelihood (over seeds; bars: min-max) against the window shift."""
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    names = list(dict.fromkeys(df.model))
    cols = method_colors(names)
    for name, mk in zip(names, "osd^v"):
        g = df[df.model == name].groupby("shift").loglik
        m, lo, hi = g.mean(), g.min(), g.max()
        ax.errorbar(m.index, m.values, yerr=[m - lo, hi - m], fmt=mk + "-", ms=4, lw=1, capsize=2,
                    color=cols[name], label=name)
    if oracle is not None:
        ax.axhline(oracle, color="k", ls="--", lw=1, label="GP oracle (shift 0)")
    ax.set(xlabel="window shift s", ylabel="test log-likelihood (nats)")
    _legend_right(ax, fontsize=7)
    return fig


@torch.no_grad()
def predictions(models: dict, task, oracle_mean, oracle_var, n_tasks: int = 3, grid=None):
    """Predictive means and +-2 sigma bands of each model against the GP oracle on a few tasks."""
    fig, axes = plt.subplots(n_tasks, len(models), figsize=(6.9, 1.5 * n_tasks + 0.3), sharex=True, sharey="row",
                             squeeze=False)
    cols = method_colors(list(models))
    xg = grid.view(1, -1, 1)
    for j, (name, model) in enumerate(models.items()):
        for i in range(n_tasks):
            ax = axes[i, j]
            pred = model(task.xc[i:i + 1], task.yc[i:i + 1], xg)
            mu, sd = pred.mean[0, :, 0].cpu(), pred.stddev[0, :, 0].cpu()
            om, osd = oracle_mean[i, :, 0].cpu(), oracle_var[i, :, 0].sqrt().cpu()
            g = grid.cpu()
            ax.fill_between(g, mu - 2 * sd, mu + 2 * sd, color=cols[name], alpha=0.25, lw=0)
            ax.plot(g, mu, "-", color=cols[name], lw=1.2)
            ax.plot(g, om, "--", color="k", lw=0.9)
            ax.plot(g, om - 2 * osd, ":", color="k", lw=0.7)
            ax.plot(g, om + 2 * osd, ":", color="k", lw=0.7)
            ax.plot(task.xc[i, :, 0].cpu(), task.yc[i, :, 0].cpu(), "o", ms=2.5, color="k")
            if i == 0:
                ax.text(0.5, 1.04, name, transform=ax.transAxes, ha="center", fontsize=8)
            if i == n_tasks - 1:
                ax.set_xlabel("x")
    fig.tight_layout()
    return fig


def erf_curves(x, erfs: dict):
    """Normalised effective receptive fields (squared gradients) against the context position."""
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    names = list(dict.fromkeys(k[0] for k in erfs))
    cols = method_colors(names)
    for (name, when), e in erfs.items():
        e = np.asarray(e)
        ax.semilogy(x, np.clip(e / e.max(), 1e-12, None), "-" if when == "trained" else ":", lw=1.2,
                    color=cols[name], label=f"{name}, {when}")
    ax.axvspan(-1.5, 1.5, color="0.9", lw=0, zorder=0)
    ax.set(xlabel="context position x (target at 0)", ylabel="normalised squared gradient")
    ax.set_ylim(1e-12, 2)
    _legend_right(ax, fontsize=7)
    return fig


def learning_curves(hist: dict, labels: dict):
    """Training loss (moving average) per model; one line per seed."""
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    names = list(dict.fromkeys(labels[k[0]] for k in hist))
    cols = method_colors(names)
    seen = set()
    for (name, _seed), loss in hist.items():
        lab = labels[name]
        w = max(1, len(loss) // 20)
        sm = np.convolve(loss, np.ones(w) / w, mode="valid")
        ax.plot(np.arange(len(sm)) + w, sm, "-", lw=1, alpha=0.8, color=cols[lab],
                label=lab if lab not in seen else None)
        seen.add(lab)
    ax.set(xlabel="step", ylabel="training loss (nats)")
    _legend_right(ax, fontsize=7)
    return fig
