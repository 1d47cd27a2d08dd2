"""Figures of the unrolled-gsp chapter (kept out of the notebooks so that cells stay short)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icml26.core import method_colors


def road_and_week(data, sensors=(0, 5, 10), days: int = 7):
    """Left: the road network, sensors coloured by mean speed. Right: a week at three sensors."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.9, 3.0), gridspec_kw={"width_ratios": [1, 2]})
    for i, j in data.edges:
        a.plot(*data.coords[[i, j]].T, color="0.7", lw=1, zorder=1)
    mean = np.where(data.mask, data.values, np.nan)
    sc = a.scatter(*data.coords.T, c=np.nanmean(mean, 0), cmap="viridis", s=40, zorder=2)
    for s in sensors:
        a.annotate(str(s), data.coords[s], fontsize=8, xytext=(3, 3), textcoords="offset points")
    fig.colorbar(sc, ax=a, label="mean speed (mph)", shrink=0.8)
    a.set_xlabel("x (km)")
    a.set_ylabel("y (km)")
    a.set_aspect("equal")
    n = min(days * 288, data.values.shape[0])
    t = np.arange(n) / 288
    for s in sensors:
        v = np.where(data.mask[:n, s], data.values[:n, s], np.nan)
        b.plot(t, v, lw=0.7, label=f"sensor {s}")
    for node, start, dur, _ in data.incidents:
        if node in sensors and start < n:
            b.axvspan(start / 288, (start + dur) / 288, color="0.85", zorder=0)
    b.set_xlabel("day")
    b.set_ylabel("speed (mph)")
    b.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def residual_correlation(corr: dict):
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.4, 2.8))
    h = sorted(corr["hop"])
    a.plot(h, [corr["hop"][k] for k in h], "o-")
    a.set_xlabel("hops between sensors")
    a.set_ylabel("residual correlation")
    k = sorted(corr["lag"])
    b.plot(k, [corr["lag"][x] for x in k], "o-")
    b.set_xlabel("lag (5-min steps)")
    b.set_ylabel("residual autocorrelation")
    fig.tight_layout()
    return fig


def admm_convergence(study: dict):
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.9, 2.9))
    labels = {"l2": r"$\mu_{d,1}=0$", "l1": r"$\mu_{d,1}>0$"}
    for key, ls in (("l2", "-"), ("l1", "--")):
        h = study[key]["hist"]
        it = np.arange(1, len(h["primal"]) + 1)
        a.semilogy(it, h["primal"], ls, label=f"primal, {labels[key]}")
        a.semilogy(it, h["dual"], ls, label=f"dual, {labels[key]}")
    ref = {"l2": None, "l1": study["cvxpy_obj"]}
    h = study["l2"]["hist"]
    f_star = min(h["objective"])
    b.semilogy(np.abs(np.array(h["objective"]) - f_star) + 1e-16, "-", label=labels["l2"])
    h = study["l1"]["hist"]
    f_star = min(min(h["objective"]), ref["l1"])
    b.semilogy(np.abs(np.array(h["objective"]) - f_star) + 1e-16, "--", label=labels["l1"])
    a.axhline(1e-6, color="0.5", lw=0.8)
    a.set_xlabel("ADMM iteration")
    a.set_ylabel("residual norm")
    b.set_xlabel("ADMM iteration")
    b.set_ylabel("objective - best objective")
    a.legend(fontsize=7)
    b.legend(fontsize=7)
    fig.tight_layout()
    return fig


def lowpass(lam, mus, spec_before, spec_after, mu_shown):
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.9, 2.9))
    grid = np.linspace(0, 2, 200)
    for mu in mus:
        a.plot(grid, 1 / (1 + mu * grid), label=rf"$\mu_u={mu:g}$")
    a.set_xlabel(r"graph frequency $\lambda$")
    a.set_ylabel(r"response $1/(1+\mu_u\lambda)$")
    a.legend(fontsize=8)
    b.semilogy(lam, spec_before, "o", ms=4, label="observed snapshot")
    b.semilogy(lam, spec_after, "s", ms=4, label=rf"filtered, $\mu_u={mu_shown:g}$")
    b.set_xlabel(r"graph frequency $\lambda$")
    b.set_ylabel("squared graph-Fourier coefficient")
    b.legend(fontsize=8)
    fig.tight_layout()
    return fig


def learning_curves(hists: dict, ref: dict):
    names = list(hists) + list(ref)
    col = method_colors(names)
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    for name, h in hists.items():
        ax.plot(h["epoch"], h["val_mae"], "o-", color=col[name], label=name)
    for name, v in ref.items():
        ax.axhline(v, ls="--", lw=1, color=col[name], label=name)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation MAE (mph)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def horizon_and_params(results: dict):
    names = list(results)
    col = method_colors(names)
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.9, 3.0))
    for name in names:
        mh = results[name]["eval"]["mae_h"]
        a.plot(np.arange(1, len(mh) + 1) * 5, mh, "o-", ms=3, color=col[name], label=name)
        p = max(results[name]["params"], 1)
        b.scatter(p, results[name]["eval"]["mae"], color=col[name], s=40)
        b.annotate(name, (p, results[name]["eval"]["mae"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    a.set_xlabel("horizon (minutes)")
    a.set_ylabel("test MAE (mph)")
    b.set_xscale("log")
    b.set_xlabel("parameters (log scale)")
    b.set_ylabel("test MAE (mph)")
    fig.legend(*a.get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7, bbox_to_anchor=(0.5, -0.12))
    fig.tight_layout()
    return fig


def lag_attention(maps: dict):
    """Mean learned weight per lag (directed graph, last block, heads averaged) for two windows."""
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    width = 0.38
    for j, (name, w) in enumerate(maps.items()):
        v = w.mean(axis=tuple(i for i in range(w.ndim) if i != 1))
        ax.bar(np.arange(1, len(v) + 1) + (j - 0.5) * width, v, width, label=name)
    ax.set_xlabel("lag k (5-min steps)")
    ax.set_ylabel(r"mean weight $w^d_{t,k}$")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def ablation_bars(df):
    g = df.groupby("variant", sort=False)
    names = list(g.groups)
    fig, ax = plt.subplots(figsize=(5.2, 2.9))
    mid = g["dMAE vs full"].mean()
    lo = g["95% low"].mean()
    hi = g["95% high"].mean()
    y = np.arange(len(names))
    ax.errorbar(mid[names], y, xerr=[mid[names] - lo[names], hi[names] - mid[names]], fmt="o", capsize=3)
    ax.axvline(0, color="0.5", lw=0.8)
    ax.set_yticks(y, names)
    ax.set_xlabel("test MAE minus the full model's (mph)")
    fig.tight_layout()
    return fig


def tuned_comparison(study: dict, chosen: dict, trained=("unrolled (ridge start)", "transformer"),
                     fixed=("unrolled, 0 steps", "ridge", "persistence")):
    """Notebook 3. Left: validation MAE against the epoch for the trained models at their chosen
    learning rate (mean over their training seeds; epoch 0 is the model as built), with ``fixed``
    at their chosen configuration as horizontal lines (mean over the same seeds as the transformer,
    the 0-step model over its own). Right: test MAE per training seed at each method's chosen
    configuration (``chosen``: method -> config key of ``study``)."""
    names = list(trained) + list(fixed)
    col = method_colors(names)
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.9, 3.0))
    for name in trained:
        curves = np.asarray(study[name][chosen[name]]["curve"], dtype=float)
        a.plot(np.arange(curves.shape[1]), curves.mean(0), "o-", ms=3, color=col[name], label=name)
    for name in fixed:
        a.axhline(np.mean(study[name][chosen[name]]["val"]), ls="--", lw=1, color=col[name], label=name)
    a.set_xlabel("epoch (best-validation epoch kept)")
    a.set_ylabel("validation MAE (mph), seed mean")
    for name in names:
        scores = study[name][chosen[name]]["test"]
        b.plot(study["seeds"][:len(scores)], scores, "o-", ms=4, color=col[name])
    b.set_xticks(study["seeds"])
    b.set_xlabel("training seed (SynthRoad instance)")
    b.set_ylabel("test MAE (mph)")
    fig.legend(*a.get_legend_handles_labels(), loc="lower center", ncol=5, fontsize=7, bbox_to_anchor=(0.5, -0.08))
    fig.tight_layout()
    return fig
