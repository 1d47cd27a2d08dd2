"""Figures of the ``special`` chapter (book style: no titles, captions live in the notebooks)."""

from __future__ import annotations

import numpy as np

from ..core import method_colors


def family_colors(families) -> dict[str, str]:
    return method_colors(list(dict.fromkeys(families)))


def plot_domains(domains, n_digits: int = 4, y=None):
    """One row per digit class shown, one column per domain (F1)."""
    import matplotlib.pyplot as plt

    K = len(domains)
    y = domains[0].y_test
    picks = [int(np.flatnonzero(y == c)[0]) for c in range(n_digits)]
    cell = min(1.1, 6.8 / K)  # at most 6.8 in wide: fits the 768-px column
    fig, axes = plt.subplots(n_digits, K, figsize=(cell * K, cell * n_digits))
    axes = np.atleast_2d(axes).reshape(n_digits, K)
    for r, i in enumerate(picks):
        for k, dom in enumerate(domains):
            ax = axes[r, k]
            ax.imshow(dom.X_test[i].reshape(8, 8), cmap="gray_r", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([]), ax.grid(False)
            if r == n_digits - 1:
                ax.set_xlabel(dom.name, fontsize=8)
    return fig


def plot_label_skew(parts, y, ax=None):
    """Stacked bar chart: per client, how many samples of each class (F2)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.6, 3.0))
    counts = np.array([[np.sum(y[p] == c) for c in range(10)] for p in parts])  # (M, 10)
    bottom = np.zeros(len(parts))
    cmap = plt.get_cmap("tab10")
    for c in range(10):
        ax.bar(np.arange(len(parts)), counts[:, c], bottom=bottom, color=cmap(c), label=str(c), width=0.8)
        bottom += counts[:, c]
    ax.set_xlabel("client")
    ax.set_ylabel("training samples")
    ax.legend(title="class", ncol=2, fontsize=7, title_fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))  # outside the data
    return ax.figure


def plot_acc_matrix(A, ax=None, names=None, label: str | None = None, ylabel: bool = True):
    """Heatmap of A[k, j] (row: after training task k; column: tested on task j)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(3.6, 3.2))
    K = len(A)
    ax.imshow(A, vmin=0, vmax=1, cmap="viridis")
    ax.grid(False)
    size = 8 if K <= 5 else 6  # numbers stay legible when the figure fits the 768-px column
    for k in range(K):
        for j in range(K):
            ax.text(j, k, f"{A[k, j]:.2f}", ha="center", va="center", fontsize=size,
                    color="white" if A[k, j] < 0.6 else "black")
    ticks = names if names is not None else [str(j + 1) for j in range(K)]
    ax.set_xticks(range(K), ticks, fontsize=8, rotation=45 if names is not None else 0)
    ax.set_yticks(range(K), ticks, fontsize=8)
    ax.set_xlabel("tested on task" if label is None else f"{label}\ntested on task", fontsize=9)
    if ylabel:
        ax.set_ylabel("after training task", fontsize=9)
    return ax.figure


def plot_staircase(round_acc, T: int, ax=None, names=None):
    """Accuracy on every task after every round; task boundaries dashed (F4)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.6, 3.4))
    R, K = round_acc.shape
    rounds = np.arange(1, R + 1)
    for j in range(K):
        ax.plot(rounds, round_acc[:, j], label=names[j] if names is not None else f"task {j + 1}")
    for k in range(1, K):
        ax.axvline(k * T + 0.5, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("global round")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the data
    return ax.figure


def plot_stability_plasticity(df, ax=None):
    """x = PLA, y = 1 - FGT, one point per variant with seed error bars (F5).

    One colour per family (legend, outside the axes); SPECIAL, SPECIAL-T and FedProx points are
    joined in order of lambda (mu), starting from FedAvg (lambda = mu = 0), and labelled with it.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.4, 3.8))
    colors = family_colors(df["family"])
    g = df.assign(STAB=1 - df["FGT"]).groupby("name", sort=False)
    mean, sd = g[["PLA", "STAB"]].mean(), g[["PLA", "STAB"]].std(ddof=0).fillna(0)
    fam, lam = g["family"].first(), g["lam"].first()
    mu = g["mu"].first() if "mu" in df else lam * 0
    for family in dict.fromkeys(fam):
        names = [n for n in mean.index if fam[n] == family]
        ax.errorbar(mean.loc[names, "PLA"], mean.loc[names, "STAB"], xerr=sd.loc[names, "PLA"],
                    yerr=sd.loc[names, "STAB"], fmt="o", color=colors[family], ms=5, capsize=2, label=family)
        if family in ("SPECIAL", "SPECIAL-T", "FedProx") and "FedAvg" in mean.index:
            path = ["FedAvg"] + names
            ax.plot(mean.loc[path, "PLA"], mean.loc[path, "STAB"], color=colors[family], lw=0.8, alpha=0.6)
            dy = {"SPECIAL": 6, "SPECIAL-T": -11, "FedProx": -11}[family]
            for n in names:
                val = mu[n] if family == "FedProx" else lam[n]
                ax.annotate(f"{val:g}", (mean.loc[n, "PLA"], mean.loc[n, "STAB"]), fontsize=7,
                            color=colors[family], xytext=(4, dy), textcoords="offset points")
    ax.set_xlabel("plasticity PLA (accuracy on a task right after it)")
    ax.set_ylabel("stability 1 - FGT")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside the data
    return ax.figure


def tidy_loglog(ax, xticks=None):
    """Log-log axes with plain tick labels (no minor-tick clutter)."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    ax.set_xscale("log"), ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_minor_formatter(NullFormatter())
        axis.set_major_formatter(FormatStrFormatter("%g"))
    if xticks is not None:
        ax.set_xticks(list(xticks))
    return ax
