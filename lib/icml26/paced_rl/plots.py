"""Figures of the paced-rl chapter (captions live in the notebooks' cell metadata)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icml26.core import method_colors

from .experiments import LABELS


def gd_paths(paths: dict, targets: dict, beta: float):
    """beta * log Z along gradient descent (one line per perturbation size) and its limit (dashed)."""
    fig, ax = plt.subplots(figsize=(5.0, 3.2))
    for (size, path), c in zip(paths.items(), plt.rcParams["axes.prop_cycle"].by_key()["color"]):
        ax.plot(beta * path, color=c, label=f"perturbation {size:g}")
        ax.axhline(beta * targets[size], color=c, ls="--", lw=1)
    ax.set_xlabel("gradient step on log Z")
    ax.set_ylabel(r"$\beta \log Z$")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def bias_vs_kl(beta_kl: np.ndarray, bias: np.ndarray):
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    keep = beta_kl > 0
    beta_kl, bias = beta_kl[keep], bias[keep]
    ax.loglog(beta_kl, np.maximum(bias, 1e-18), "o", ms=3, alpha=0.5)
    lo, hi = beta_kl[beta_kl > 0].min(), beta_kl.max()
    ax.loglog([lo, hi], [lo, hi], "k--", lw=1, label="slope 1")
    ax.set_xlabel(r"$\beta\,\mathrm{KL}(\pi_{old}\,\|\,\pi_\theta)$")
    ax.set_ylabel(r"$\beta\log Z^\star - p_{old}$")
    ax.legend()
    return fig


def z_true_vs_star(p: np.ndarray, curves: dict):
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    ax.plot(p, p, color="k", label=r"$\beta\log Z^\star$ at $\theta=\theta_{old}$ (all $\beta$)")
    for beta, v in curves.items():
        ax.plot(p, v, ls="--", label=rf"$\beta\log Z_{{true}}$, $\beta={beta:g}$")
    ax.set_xlabel(r"accuracy $p_{old}(x)$")
    ax.set_ylabel(r"$\beta\log Z$")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    return fig


def mixed_prob(p: np.ndarray, curves: dict):
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    for G, v in curves.items():
        ax.plot(p, v, label=f"G = {G}")
    ax.plot(p, 4 * p * (1 - p), "k:", label="4 p (1 - p)")
    ax.set_xlabel(r"accuracy $p$")
    ax.set_ylabel("probability of a mixed group")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def type_hist(acc: np.ndarray, types: np.ndarray, names=("easy", "learnable", "impossible")):
    fig, ax = plt.subplots(figsize=(5.0, 3.2))
    bins = np.linspace(0, 1, 26)
    ax.hist([acc[types == k] for k in range(3)], bins=bins, stacked=True, label=list(names))
    ax.set_xlabel("exact accuracy of the warm-started policy")
    ax.set_ylabel("training prompts")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def calib_scatter(est: np.ndarray, acc: np.ndarray, types: np.ndarray, names=("easy", "learnable", "impossible")):
    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    for k in range(3):
        ax.plot(acc[types == k], est[types == k], "o", ms=3, alpha=0.6, label=names[k])
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="y = x")
    ax.set_xlabel(r"exact accuracy $p_{old}(x)$")
    ax.set_ylabel(r"estimate $\beta\log Z_\phi(x)$")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def _band(ax, x, ys, label, color):
    ys = np.asarray(ys)
    mu = ys.mean(0)
    ax.plot(x, mu, color=color, label=label)
    if ys.shape[0] > 1:
        se = ys.std(0, ddof=1) / np.sqrt(ys.shape[0])
        ax.fill_between(x, mu - 2 * se, mu + 2 * se, color=color, alpha=0.15, lw=0)


def curves(runs: dict, key: str | dict, ylabel: str, xkey: str = "fresh_rollouts", figsize=(5.4, 3.4),
           labels: dict | None = None):
    """Mean over seeds (band: +-2 standard errors) of ``key`` against ``xkey`` for every run set;
    ``key`` may map run names to keys, ``labels`` run names to legend labels."""
    names = list(runs)
    lab_of = {k: (labels or {}).get(k, LABELS.get(k, k)) for k in names}
    cols = method_colors([lab_of[k] for k in names])
    fig, ax = plt.subplots(figsize=figsize)
    for k in names:
        kk = key[k] if isinstance(key, dict) else key
        _band(ax, runs[k][0][xkey], [r[kk] for r in runs[k]], lab_of[k], cols[lab_of[k]])
    ax.set_xlabel({"fresh_rollouts": "fresh rollouts", "step": "training step"}.get(xkey, xkey))
    ax.set_ylabel(ylabel)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    return fig


def mixed_per_step(runs: dict, window: int = 10):
    labels = [LABELS[k] for k in runs]
    cols = method_colors(labels)
    fig, ax = plt.subplots(figsize=(5.4, 3.2))
    for k, lab in zip(runs, labels):
        ys = np.asarray([r["mixed_frac"] for r in runs[k]]).mean(0)
        sm = np.convolve(ys, np.ones(window) / window, mode="valid")
        ax.plot(runs[k][0]["n_fresh"][window - 1:], sm, color=cols[lab], label=lab)
    ax.set_xlabel("fresh rollouts")
    ax.set_ylabel("fraction of mixed groups")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    return fig


def selected_hist(runs: dict):
    labels = [LABELS[k] for k in runs]
    cols = method_colors(labels)
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    bins = np.linspace(0, 1, 21)
    for k, lab in zip(runs, labels):
        v = np.concatenate([r["sel_p"] for r in runs[k]])
        ax.hist(v, bins=bins, density=True, histtype="step", lw=1.8, color=cols[lab], label=lab)
    ax.set_xlabel(r"exact accuracy $p_{old}(x)$ of the prompts trained on")
    ax.set_ylabel("density")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    return fig


def pass_at_k(runs: dict):
    labels = [LABELS[k] for k in runs]
    cols = method_colors(labels)
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    for k, lab in zip(runs, labels):
        ax.plot(runs[k][0]["ks"], np.mean([r["pass_at_k"] for r in runs[k]], 0), "o-", ms=3, color=cols[lab],
                label=lab)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k, learnable test prompts")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    return fig


def diversity_vs_accuracy(runs: dict):
    """Effective number of correct answers against learnable test accuracy: the seed-mean path over
    the evaluations (line) and every seed's end point (markers)."""
    labels = [LABELS[k] for k in runs]
    cols = method_colors(labels)
    fig, ax = plt.subplots(figsize=(5.4, 3.4))
    for k, lab in zip(runs, labels):
        acc = np.asarray([r["test_learnable"] for r in runs[k]])
        eff = np.asarray([r["eff_curve"] for r in runs[k]])
        ax.plot(acc.mean(0), eff.mean(0), color=cols[lab], label=lab)
        ax.plot(acc[:, -1], eff[:, -1], "o", ms=4, alpha=0.7, color=cols[lab])
    ax.set_xlabel("exact accuracy, learnable test prompts")
    ax.set_ylabel("effective correct answers")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    return fig
