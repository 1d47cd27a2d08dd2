"""Figures of the SWE-rebench V2 chapter (book style: no titles, captions live in the notebooks)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from icml26.core import method_color

STATUS_CODE = {None: 0, "FAILED": 1, "ERROR": 1, "SKIPPED": 2, "PASSED": 3}


def funnel(fun, ax=None):
    """Log-scale bars: PRs and repositories surviving each stage (cf. the paper's funnel table)."""
    ax = ax or plt.subplots(figsize=(6.8, 3.4))[1]
    names = [s[0] for s in fun.stages]
    x = np.arange(len(names))
    ax.bar(x - 0.2, [s[1] for s in fun.stages], 0.4, label="PRs", color=method_color("PRs"))
    ax.bar(x + 0.2, [s[2] for s in fun.stages], 0.4, label="repositories", color=method_color("repositories"))
    ax.set_yscale("log")
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel("survivors (log scale)")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=2, frameon=False)
    return ax.figure


def setup_rates(table: pd.DataFrame, ax=None):
    """Setup success by language, interactive vs one-shot, with the interactive agent's mean turns."""
    ax = ax or plt.subplots(figsize=(6.5, 3))[1]
    g = table.groupby("language").agg(interactive=("interactive", "mean"), one_shot=("one_shot", "mean"),
                                       turns=("turns", "mean"))
    x = np.arange(len(g))
    ax.bar(x - 0.2, g["interactive"], 0.4, label="interactive (rule-based stand-in)",
           color=method_color("interactive"))
    ax.bar(x + 0.2, g["one_shot"], 0.4, label="one-shot", color=method_color("one-shot"))
    for i, t in enumerate(g["turns"]):
        ax.text(i - 0.2, g["interactive"].iloc[i] + 0.02, f"{t:.1f} turns", ha="center", fontsize=8)
    ax.set_xticks(x, g.index)
    ax.set_ylim(0, 1.15)
    ax.set_ylabel("setup success rate")
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=2, fontsize=8, frameon=False)
    return ax.figure


def transitions(cases: list[tuple[str, dict]], max_tests: int = 14):
    """Heat-maps of test status per state (base/test/fix) for a few tasks, one above the other
    (the column is 768 px wide); white = absent."""
    n = max(len(cases), 1)
    fig, axes = plt.subplots(n, 1, figsize=(6.8, 2.6 * n), squeeze=False)
    cmap = plt.matplotlib.colors.ListedColormap(["white", "#d55e00", "#999999", "#009e73"])
    for ax, (title, maps) in zip(axes[:, 0], cases):
        states = [s for s in ("base", "test", "fix") if s in maps]
        names = sorted(set().union(*[maps[s] for s in states]))
        # rows whose status changes across states first: they are the point of the figure
        names = sorted(names, key=lambda n: len({maps[s].get(n) for s in states}) == 1)[:max_tests]
        grid = np.array([[STATUS_CODE[maps[s].get(n)] for s in states] for n in names])
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=3, aspect="auto")
        ax.set_xticks(range(len(states)), states)
        ax.set_yticks(range(len(names)), [n[-60:] for n in names], fontsize=7)
        ax.set_xlabel(title.replace("\n", ": "), fontsize=8)
    fig.tight_layout()
    return fig


def validation_time(times: pd.DataFrame, ax=None):
    ax = ax or plt.subplots(figsize=(5, 2.8))[1]
    g = times.groupby("language")["seconds"].mean()
    ax.bar(g.index, g.values, color=[method_color(x) for x in g.index])
    ax.set_ylabel("validation time per task (s, wall)")
    return ax.figure


def judges_pr(table: pd.DataFrame, ax=None):
    ax = ax or plt.subplots(figsize=(4.8, 3.6))[1]
    for _, r in table.iterrows():
        marker = "o" if r["kind"] == "single" else "s"
        ax.scatter(r["recall"], r["precision"], marker=marker, s=60, color=method_color(r["rule"]), label=r["rule"])
    ax.set_xlabel("recall (underspecified = positive)")
    ax.set_ylabel("precision")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.1)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return ax.figure


def confounders(table: pd.DataFrame, ax=None):
    ax = ax or plt.subplots(figsize=(6, 3))[1]
    ct = pd.crosstab(table["language"], table["label"])
    bottom = np.zeros(len(ct))
    for code in ct.columns:
        ax.bar(ct.index, ct[code], bottom=bottom, label=code, color=LABEL_COLORS.get(code, "black"))
        bottom += ct[code].to_numpy()
    ax.set_ylabel("released tasks")
    ax.legend(fontsize=8, ncol=4, loc="lower left", bbox_to_anchor=(0, 1.01), frameon=False)
    return ax.figure


LABEL_COLORS = {"A": "#009e73", "B1": "#e69f00", "B2": "#d55e00", "B3": "#cc79a7", "B4": "#56b4e9",
                "B5": "#f0e442", "B6": "#999999", "B7": "#0072b2"}


def pass_at_k(table: pd.DataFrame, k: int = 3):
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.9, 3.4))
    k3 = table[table["k"] == k]
    labels = sorted(k3["label"].unique())
    x = np.arange(len(labels))
    for j, solver in enumerate(sorted(k3["solver"].unique())):
        v = k3[k3["solver"] == solver].set_index("label").reindex(labels)["pass@k"]
        a.bar(x + (j - 0.5) * 0.4, v, 0.4, label=solver, color=method_color(solver))
    a.set_xticks(x, labels)
    a.set_ylabel(f"pass@{k}")
    a.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.01), frameon=False)
    for label in labels:
        d = table[(table["solver"] == "issue_only") & (table["label"] == label)]
        b.plot(d["k"], d["pass@k"], marker="o", label=label, color=LABEL_COLORS.get(label, "black"))
    b.set_xlabel("k")
    b.set_ylabel("pass@k (issue-only stand-in)")
    b.legend(fontsize=7, ncol=3, loc="lower left", bbox_to_anchor=(0, 1.01), frameon=False)
    return fig
