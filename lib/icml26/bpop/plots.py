"""Figures of the bpop chapter (book style; captions live in the notebooks' cell metadata)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icml26.core import method_color, method_colors

from .method import PartialOrder


def _levels(po: PartialOrder) -> np.ndarray:
    depth = np.zeros(po.n, dtype=int)
    for _ in range(po.n):
        depth = np.maximum(depth, np.max(np.where(po.closure, depth[:, None] + 1, 0), axis=0))
    return depth


def _layout(po: PartialOrder, dx: float = 1.0, dy: float = 1.0) -> np.ndarray:
    lv = _levels(po)
    xy = np.zeros((po.n, 2))
    for L in np.unique(lv):
        idx = np.flatnonzero(lv == L)
        xy[idx, 0] = (np.arange(len(idx)) - (len(idx) - 1) / 2) * dx
        xy[idx, 1] = -L * dy
    return xy


def _two_lines(name: str) -> str:
    """Split a CamelCase name into two lines at the capital nearest its middle."""
    caps = [i for i, ch in enumerate(name) if ch.isupper() and i > 0]
    if not caps or len(name) < 12:
        return name
    k = min(caps, key=lambda i: abs(i - len(name) / 2))
    return name[:k] + "\n" + name[k:]


def _arrow(ax, p, q, r, **kw):
    u = (q - p) / np.linalg.norm(q - p)
    ax.annotate("", xy=q - r * u, xytext=p + r * u,
                arrowprops=dict(arrowstyle="-|>", shrinkA=0, shrinkB=0, mutation_scale=8, **kw))


def hasse(ax, po: PartialOrder, est: PartialOrder | None = None, highlight=None, labels="names", fontsize=7,
          r=0.3, dx=2.6, dy=1.4, done=None):
    """Hasse diagram of ``po`` (top = first). With ``est``: true cover edges found (solid), missed (dashed),
    extra estimated cover edges (dotted). ``highlight``: nodes to fill; ``done``: nodes to grey out.
    ``labels``: "names" (below the nodes), "index" (inside) or None."""
    xy = _layout(po, dx, dy)
    E = po.cover()
    Eh = est.cover() if est is not None else E
    styles = [(E & Eh, "-", "#000000"), (E & ~Eh, "--", "#D55E00"), (Eh & ~E, ":", "#0072B2")]
    for mask, ls, col in styles:
        for i, j in zip(*np.nonzero(mask), strict=True):
            _arrow(ax, xy[i], xy[j], r, ls=ls, color=col, lw=1.1)
    for i in range(po.n):
        fc = "white"
        if highlight is not None and highlight[i]:
            fc = "#E69F00"
        if done is not None and done[i]:
            fc = "#BBBBBB"
        ax.add_patch(plt.Circle(xy[i], r, fc=fc, ec="#000000", lw=0.8, zorder=3))
        if labels == "names":
            ax.text(xy[i, 0], xy[i, 1] - r - 0.05, _two_lines(po.names[i]), ha="center", va="top",
                    fontsize=fontsize, zorder=4, linespacing=0.9)
        elif labels == "index":
            ax.text(xy[i, 0], xy[i, 1], str(i), ha="center", va="center", fontsize=fontsize, zorder=4)
    ax.set_xlim(xy[:, 0].min() - dx / 2, xy[:, 0].max() + dx / 2)
    ax.set_ylim(xy[:, 1].min() - (0.9 if labels == "names" else 0.5), r + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    return xy


def frontier_steps(po: PartialOrder, trace):
    """Hasse diagram before each step of a trace: frontier filled, done actions grey, the taken action
    framed by a thick ring. Nodes carry the action indices."""
    n = po.n
    fig, axes = plt.subplots(1, n, figsize=(6.9, 2.3))
    rem = np.ones(n, dtype=bool)
    for t, ax in enumerate(axes):
        xy = hasse(ax, po, highlight=po.frontier(rem), done=~rem, labels="index", dx=1.0, dy=1.0, r=0.28)
        a = trace[t]
        ax.add_patch(plt.Circle(xy[a], 0.36, fc="none", ec="#000000", lw=2.0, zorder=5))
        ax.text(0.5, -0.02, f"t={t + 1}: take {a}", transform=ax.transAxes, ha="center", va="top", fontsize=8)
        rem[a] = False
    return fig


def extension_bars(df):
    cols = [c for c in df.columns if c != "extension"]
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    w = 0.8 / len(cols)
    x = np.arange(len(df))
    for k, c in enumerate(cols):
        ax.bar(x + (k - (len(cols) - 1) / 2) * w, df[c], w, label=c)
    ax.set_xticks(x, df["extension"], fontsize=8)
    ax.set_ylabel("probability of the trace")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.set_size_inches(5.2, 3.0)
    return fig


def timing(df):
    g = df.groupby("n")[["bpop", "queue_jump"]].median()
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    ax.semilogy(g.index, g["bpop"], "o-", color=method_color("BPOP"), label="BPOP (frontier softmax)")
    ax.semilogy(g.index, g["queue_jump"], "s-", color=method_color("queue-jump"), label="exact queue-jump")
    ax.scatter(df.n, df.queue_jump, s=8, color=method_color("queue-jump"), alpha=0.4)
    ax.scatter(df.n, df.bpop, s=8, color=method_color("BPOP"), alpha=0.4)
    ax.set_xlabel("number of actions n")
    ax.set_ylabel("seconds per trace likelihood")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig


def prior_density(rhos, dens: dict):
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for K, d in dens.items():
        ax.plot(rhos, d, "o-", label=f"K={K}")
    ax.set_xlabel(r"correlation $\rho$")
    ax.set_ylabel("fraction of comparable pairs")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def heatmaps(true_po: PartialOrder, edge_prob: np.ndarray):
    fig, axes = plt.subplots(1, 2, figsize=(6.9, 3.2))
    for ax, M, lab in ((axes[0], true_po.closure.astype(float), "true closure"),
                       (axes[1], edge_prob, r"posterior $\hat p_{ij}$")):
        im = ax.imshow(M, vmin=0, vmax=1, cmap="viridis")
        ax.set_xlabel("j (later action)")
        ax.set_ylabel("i (earlier action)")
        ax.text(0.5, 1.02, lab, transform=ax.transAxes, ha="center", fontsize=9)
        ax.grid(False)
    fig.colorbar(im, ax=axes, shrink=0.8)
    return fig


def chain_traces(post, burn: float):
    fig, axes = plt.subplots(1, 3, figsize=(6.9, 2.4))
    for ax, arr, lab in zip(axes, (post.loglik, post.beta, post.rho), ("log-likelihood", r"$\beta$", r"$\rho$"),
                            strict=True):
        for c in range(arr.shape[0]):
            ax.plot(arr[c], lw=0.8, label=f"chain {c + 1}")
        ax.axvline(burn * arr.shape[1], ls="--", color="#000000", lw=0.8)
        ax.set_xlabel("saved sample")
        ax.set_ylabel(lab)
    fig.tight_layout()
    return fig


def f1_bars(df, group: str = "scenario"):
    methods = list(dict.fromkeys(df.method))
    cols = method_colors(methods)
    g = df.groupby([group, "method"], sort=False).f1.agg(["mean", "min", "max"]).reset_index()
    groups = list(dict.fromkeys(df[group]))
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    w = 0.8 / len(methods)
    for k, mth in enumerate(methods):
        s = g[g.method == mth].set_index(group).loc[groups]
        x = np.arange(len(groups)) + (k - (len(methods) - 1) / 2) * w
        ax.bar(x, s["mean"], w, color=cols[mth], label=mth,
               yerr=[s["mean"] - s["min"], s["max"] - s["mean"]], capsize=2, error_kw=dict(lw=0.8))
    ax.set_xticks(np.arange(len(groups)), [str(x).replace("_", "\n") for x in groups], fontsize=7)
    ax.set_ylabel("Edge-F1 (cover edges)")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig


def ipcov_curves(df):
    methods = list(dict.fromkeys(df.method))
    cols = method_colors(methods)
    g = df.groupby(["method", "target"], sort=False).agg(ip=("ip_cov", "mean"), f1=("f1", "mean"),
                                                         sd=("f1", "std")).reset_index()
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    for mth in methods:
        s = g[g.method == mth].sort_values("target")
        ax.errorbar(s.ip, s.f1, yerr=s.sd.fillna(0), marker="o", color=cols[mth], label=mth, capsize=2)
    ax.set_xlabel("IP-Cov of the trace set")
    ax.set_ylabel("Edge-F1 (cover edges)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig


def alpha_curves(df):
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    ax.plot(df.alpha, df.closure_recall, "o-", label="closure recall")
    ax.plot(df.alpha, df.validity, "s--", label="execution validity")
    ax2 = ax.twinx()
    ax2.plot(df.alpha, df.width, "^:", color="#000000", label="parallel width")
    ax2.set_ylabel("mean parallel width")
    ax2.grid(False)
    ax.set_xlabel(r"threshold $\alpha$")
    ax.set_ylabel("fraction")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper left", bbox_to_anchor=(1.15, 1.0), fontsize=8)
    return fig


def executor_bars(df):
    g = df.groupby("mode", sort=False).agg(tokens=("tokens", "mean"), makespan=("makespan", "mean"),
                                           success=("success", "mean")).reset_index()
    fig, axes = plt.subplots(1, 2, figsize=(6.9, 2.8))
    axes[0].bar(g["mode"], g.tokens)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("tokens per task")
    axes[1].bar(g["mode"], g.makespan)
    axes[1].set_ylabel("makespan (time units)")
    for ax in axes:
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    fig.tight_layout()
    return fig


def reliability(cal: dict):
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    ax.plot([0, 1], [0, 1], ls="--", color="#000000", lw=0.8, label="perfect calibration")
    ax.scatter(cal["confidence"], cal["accuracy"], s=12 + 60 * cal["count"] / cal["count"].max(),
               color=method_color("BPOP"), zorder=3, label="BPOP (marker area: pairs)")
    ax.set_xlabel(r"posterior probability $\hat p_{ij}$ (bin mean)")
    ax.set_ylabel("fraction of true relations")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    return fig
