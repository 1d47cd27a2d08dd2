"""Figures of the pdrf chapter (captions live in the notebooks' cell metadata)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icml26.core import method_color, method_colors

from .data import THRESHOLDS
from .experiments import MODEL_LABELS

CMAP = "viridis"


def perturbation(fac: dict):
    """F1: delta(t)/delta(0) for sensitivities a, continuous and 5-step data-space Euler."""
    fig, ax = plt.subplots(figsize=(5.2, 3.2))
    for i, a in enumerate(fac["continuous"]):
        c = f"C{i}"
        ax.plot(fac["t"], fac["continuous"][a], color=c, label=f"a = {a:g}, continuous")
        ax.plot(fac["t_k"], fac["euler"][a], "o--", color=c, ms=4, label=f"a = {a:g}, Euler N = {len(fac['lambda'])}")
    ax.set_xlabel("flow time t")
    ax.set_ylabel(r"perturbation $\delta(t)/\delta(0)$")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return fig


def toy_samples(study: dict):
    """F2: projected 5-step samples of both predictors against the data."""
    fig, axes = plt.subplots(1, 3, figsize=(6.9, 2.5), sharex=True, sharey=True)
    panels = [("data", study["data_proj"], "#000000"), ("v-prediction", study["proj"]["v"], method_color("v-prediction")),
              ("x-prediction", study["proj"]["x"], method_color("x-prediction"))]
    for ax, (name, y, c) in zip(axes, panels, strict=True):
        ax.scatter(y[:, 0], y[:, 1], s=2, alpha=0.4, color=c)
        ax.set_xlabel(f"{name}: $P^\\top x$ (1)")
        ax.set_aspect("equal")
    axes[0].set_ylabel("$P^\\top x$ (2)")
    return fig


def toy_trajectory(study: dict):
    """F3: off-manifold norm of Z_k and of the clean predictions along 5-step sampling."""
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for p, name in (("v", "v-prediction"), ("x", "x-prediction")):
        tr = study["traj"][p]
        k = np.arange(len(tr["z"]))
        ax.plot(k, tr["z"], "o-", color=method_color(name), label=f"{name}: $Z_k$")
        ax.plot(k[:-1], tr["x1_hat"], "s:", color=method_color(name), label=f"{name}: $\\hat X_1^{{(k)}}$")
    ax.set_yscale("log")
    ax.set_xlabel("sampling step k")
    ax.set_ylabel(r"mean $\|(I-PP^\top)\,\cdot\,\|$")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    return fig


def toy_nfe(table):
    """F4: off-manifold residual of the final samples vs NFE."""
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for name, g in table.groupby("model"):
        ax.plot(g["nfe"], g["off_manifold"], "o-", color=method_color(name), label=name)
    ax.set_yscale("log")
    ax.set_xlabel("function evaluations (Euler steps)")
    ax.set_ylabel("off-manifold residual")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def sequences(frames, motion, n: int = 3, every: int = 2, t_in: int = 4):
    """F5: a few sequences (rows) with the true motion as arrows on the first frame."""
    T = frames.shape[1]
    cols = list(range(0, T, every))
    fig, axes = plt.subplots(n, len(cols), figsize=(6.9, 1.15 * n + 0.3))
    H, W = frames.shape[-2:]
    ys, xs = np.mgrid[2:H:5, 2:W:5]
    for i in range(n):
        for j, k in enumerate(cols):
            ax = axes[i, j]
            ax.imshow(frames[i, k].cpu().numpy(), cmap=CMAP, vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            if i == 0:
                ax.set_title(f"frame {k - t_in + 1:+d}" if k >= t_in else f"input {k + 1}", fontsize=8)
            if j == 0:
                u = motion[i].cpu().numpy()
                ax.quiver(xs, ys, u[0][ys, xs], u[1][ys, xs], color="white", angles="xy", scale_units="xy", scale=0.25)
    return fig


def motion_compare(est, true, epe_map, i: int = 0):
    """F6: estimated vs true motion on one case and the endpoint error map."""
    fig, axes = plt.subplots(1, 3, figsize=(6.9, 2.4))
    H, W = true.shape[-2:]
    ys, xs = np.mgrid[1:H:3, 1:W:3]
    for ax, u, name in ((axes[0], true[i], "true motion"), (axes[1], est[i], "estimated (Horn-Schunck)")):
        u = u.cpu().numpy()
        ax.quiver(xs, ys, u[0][ys, xs], u[1][ys, xs], angles="xy", scale_units="xy", scale=0.4)
        ax.set_xlim(0, W - 1)
        ax.set_ylim(H - 1, 0)
        ax.set_aspect("equal")
        ax.set_xlabel(name)
        ax.set_xticks([])
        ax.set_yticks([])
    im = axes[2].imshow(epe_map[i].cpu().numpy(), cmap="magma")
    axes[2].set_xlabel("endpoint error (px)")
    axes[2].set_xticks([])
    axes[2].set_yticks([])
    axes[2].grid(False)
    fig.colorbar(im, ax=axes[2], fraction=0.046)
    return fig


def rotation(rot: dict):
    """F7: centroid error vs lead for the straight and the trajectory backtrace."""
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    ax.plot(rot["lead"], rot["straight"], "o-", color=method_color("straight backtrace"), label="straight backtrace")
    ax.plot(rot["lead"], rot["trajectory"], "s-", color=method_color("trajectory backtrace"),
            label="trajectory backtrace")
    ax.set_xlabel("lead (frames)")
    ax.set_ylabel("centroid error (px)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


def skill_vs_lead(scores: dict, panels, names=None):
    """Skill vs lead time: ``panels`` is a list of (key, threshold index, window index or None, label)."""
    names = list(scores) if names is None else names
    fig, axes = plt.subplots(1, len(panels), figsize=(6.9, 2.8), squeeze=False)
    for ax, (key, ti, wi, label) in zip(axes[0], panels, strict=True):
        for n in names:
            s = scores[n]
            y = s[key][ti] if wi is None else s[key][ti, wi]
            lab = MODEL_LABELS.get(n, n)
            ax.plot(np.arange(1, len(y) + 1), y, "o-", ms=3, color=method_color(lab), label=lab)
        if key == "bias":
            ax.axhline(1.0, color="#999999", lw=1, ls="--")
        ax.set_xlabel("lead (frames)")
        ax.set_ylabel(label)
    axes[0, -1].legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    fig.tight_layout()
    return fig


def shifted_block(ex: dict):
    """F9: the 8 x 8 shifted-block example."""
    fig, axes = plt.subplots(1, 2, figsize=(4.2, 2.2))
    for ax, img, name in ((axes[0], ex["obs"], "observed"), (axes[1], ex["pred"], "forecast")):
        ax.imshow(img, cmap="Greys", vmin=0, vmax=1)
        ax.set_xticks(np.arange(-0.5, 8, 4), minor=False)
        ax.set_yticks(np.arange(-0.5, 8, 4), minor=False)
        ax.set_xticklabels([])
        ax.set_yticklabels([])
        ax.grid(True, color="#0072B2", lw=1.5)
        ax.set_xlabel(name)
    return fig


def gallery(obs, preds: dict, case: int, leads, names):
    """F10: truth and each forecast (rows) at several leads (columns) for one test case."""
    rows = [("truth", obs)] + [(MODEL_LABELS.get(n, n), preds[n]) for n in names]
    fig, axes = plt.subplots(len(rows), len(leads), figsize=(1.25 * len(leads) + 1.6, 1.1 * len(rows)))
    for i, (name, x) in enumerate(rows):
        for j, lead in enumerate(leads):
            ax = axes[i, j]
            ax.imshow(x[case, lead - 1].cpu().numpy(), cmap=CMAP, vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            if i == 0:
                ax.set_title(f"lead {lead}", fontsize=8)
            if j == 0:
                ax.set_ylabel(name, fontsize=7, rotation=0, ha="right", va="center")
    return fig


def sampling_steps(trajs: dict, lead: int):
    """F14: Z_k and the clean predictions X1_hat^(k) of each model in ``trajs`` (RF-v or RF-x, and PDRF)
    on one case at one lead."""
    kinds = list(trajs)
    n = trajs[kinds[0]]["x1_hat"].shape[0]
    fig, axes = plt.subplots(2 * len(kinds), n + 1, figsize=(6.9, 1.05 * 2 * len(kinds) + 0.3))
    for r, kind in enumerate(kinds):
        tr = trajs[kind]
        for j in range(n + 1):
            for q, (key, lab) in enumerate((("z", "$Z_k$"), ("x1_hat", r"$\hat X_1^{(k)}$"))):
                ax = axes[2 * r + q, j]
                ax.set_xticks([])
                ax.set_yticks([])
                ax.grid(False)
                if key == "x1_hat" and j == n:
                    ax.axis("off")
                    continue
                ax.imshow(tr[key][j, lead - 1].numpy(), cmap=CMAP, vmin=0, vmax=1)
                if j == 0:
                    ax.set_ylabel(f"{MODEL_LABELS[kind]}\n{lab}", fontsize=7, rotation=0, ha="right", va="center")
                if r == 0 and q == 0:
                    ax.set_title(f"k = {j}", fontsize=8)
    return fig


def losses(hist: dict, window: int = 25):
    """Training loss (moving average, log scale) of each learned model."""
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    for kind, h in hist.items():
        y = np.asarray(h["loss"])
        if len(y) >= window:
            y = np.convolve(y, np.ones(window) / window, mode="valid")
        lab = MODEL_LABELS[kind]
        ax.plot(y, color=method_color(lab), label=lab)
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (moving average)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig


__all__ = ["THRESHOLDS", "gallery", "losses", "motion_compare", "perturbation", "rotation", "sampling_steps",
           "sequences", "shifted_block", "skill_vs_lead", "toy_nfe", "toy_samples", "toy_trajectory"]


def teacher_controls(sweep: dict | None, ctl: dict, labels: dict, persistence: float | None = None):
    """The teacher controls. With a ``sweep`` (:func:`~icml26.pdrf.experiments.teacher_sweep`, one seed), a
    left panel of validation CSI-M against the teacher weight lambda (evenly spaced axis, 0 is RF-x), the
    chosen weight circled, and the sweep's runs on the right panel. The right (or only) panel (spec F15):
    test CSI-M against the frequency bias at 0.55 for the rows of
    :func:`~icml26.pdrf.experiments.teacher_controls` (``labels``: row name -> legend label), one small
    marker per seed and a large one at the mean over seeds."""
    names = [n for n, *_ in ctl["runs"]]
    col = method_colors((["sweep"] if sweep is not None else []) + [labels[n] for n in names])
    if sweep is not None:
        fig, axes = plt.subplots(1, 2, figsize=(6.9, 2.9))
        lams = np.asarray(sweep["lambdas"])
        pos = np.arange(len(lams))
        ax = axes[0]
        ax.plot(pos, sweep["val_csi_m"], "-o", color=col["sweep"], label=f"sweep, seed {sweep['seed']}")
        j = int(np.argmin(np.abs(lams - ctl["lam"])))
        ax.plot([pos[j]], [sweep["val_csi_m"][j]], "o", ms=11, mfc="none", color=col["sweep"], label="chosen")
        ax.set_xticks(pos, [f"{v:g}" for v in lams])
        ax.set_xlabel(r"teacher weight $\lambda$ (0: RF-x)")
        ax.set_ylabel("CSI-M (validation)")
        ax.legend(loc="lower center", fontsize=8)
        ax = axes[1]
        ax.plot(sweep["test_bias"], sweep["test_csi_m"], "-", lw=1, color=col["sweep"], alpha=0.6)
        ax.plot(sweep["test_bias"], sweep["test_csi_m"], "o", ms=3, color=col["sweep"],
                label=f"sweep, seed {sweep['seed']}")
        for lam, x, y in zip(lams, sweep["test_bias"], sweep["test_csi_m"], strict=True):
            ax.annotate(f"{lam:g}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
    else:
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for n, marker in zip(names, "sDv^<>", strict=False):
        c = col[labels[n]]
        ax.plot(ctl["test_bias"][n], ctl["test_csi_m"][n], marker, ms=3, alpha=0.5, color=c)
        ax.plot([ctl["test_bias"][n].mean()], [ctl["test_csi_m"][n].mean()], marker, ms=8, color=c,
                label=f"{labels[n]} ({len(ctl['seeds'])} seeds)")
    if persistence is not None:
        ax.axhline(persistence, ls=":", color="#000000", lw=1, label="persistence")
    ax.set_xlabel("frequency bias at 0.55 (test)")
    ax.set_ylabel("CSI-M (test)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig
