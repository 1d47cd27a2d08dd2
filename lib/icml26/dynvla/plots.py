"""Figures of the DynVLA chapter (captions live in the notebooks' cell metadata)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap

from icml26.core import method_colors

BEV_CMAP = ListedColormap(["#7f7f5f", "#b0b0b0", "#d62728", "#ff9f1c"])
SUB_LABELS = {"nc": "NC", "dac": "DAC", "ttc": "TTC", "ep": "EP", "c": "C", "pdms": "PDMS"}


def _to_img(x):
    return np.clip(np.asarray(x).transpose(1, 2, 0), 0, 1)


def _plan_rc(plan, ego_row=25, W=16):
    """Ego-frame waypoints -> raster (col, row) coordinates."""
    return W / 2 - 0.5 - plan[:, 1], ego_row - plan[:, 0] / 2.0


def _frame(a, H=32, W=16):
    a.set_xlim(-0.5, W - 0.5)
    a.set_ylim(H - 0.5, -0.5)
    a.set_xticks([])
    a.set_yticks([])


def gallery(data, plans=None, names=None):
    """Each family: camera-like raster and BEV at t = 0 with the plans overlaid."""
    n = len(data)
    fig, axes = plt.subplots(2, n, figsize=(min(6.9, 0.95 * n + 0.3), 4.2))
    plans = plans if plans is not None else {"expert": data.plan}
    cols = method_colors(list(plans))
    for i in range(n):
        axes[0, i].imshow(_to_img(data.cam[i, 1]), interpolation="nearest")
        axes[1, i].imshow(data.bev[i, 1], cmap=BEV_CMAP, vmin=0, vmax=3, interpolation="nearest")
        for name, p in plans.items():
            c, r = _plan_rc(p[i])
            axes[1, i].plot(c, r, ".-", ms=2.5, lw=1, color=cols[name], label=name)
        axes[0, i].set_title(str(data.batch.family[i]).replace("_", "\n"), fontsize=7)
        for a in axes[:, i]:
            _frame(a)
    axes[1, -1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def submetric_bars(table, planners):
    """Grouped bars of sub-metric means per planner."""
    keys = ["nc", "dac", "ttc", "ep", "c", "pdms"]
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    cols = method_colors(planners)
    w = 0.8 / len(planners)
    for j, p in enumerate(planners):
        ax.bar(np.arange(len(keys)) + (j - (len(planners) - 1) / 2) * w, [table.loc[p, k] for k in keys], w,
               color=cols[p], label=p)
    ax.set_xticks(range(len(keys)), [SUB_LABELS[k] for k in keys])
    ax.set_ylabel("mean over scenes")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def pdms_hist(per_scene, planners):
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    cols = method_colors(planners)
    bins = np.linspace(0, 1, 25)
    for p in planners:
        ax.hist(per_scene[p]["pdms"], bins=bins, histtype="step", lw=1.5, color=cols[p], label=p)
    ax.set_xlabel("per-scene PDMS")
    ax.set_ylabel("scenes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def fast_error(sweep):
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    cols = method_colors(["x, worst case", "x, Parseval bound", "y, worst case", "y, Parseval bound"])
    ax.loglog(sweep.gamma, sweep.err_x, "o-", color=cols["x, worst case"], label="x, worst case")
    ax.loglog(sweep.gamma, sweep.bound_x, "--", color=cols["x, Parseval bound"], label="x, Parseval bound")
    ax.loglog(sweep.gamma, sweep.err_y, "s-", color=cols["y, worst case"], label="y, worst case")
    ax.loglog(sweep.gamma, sweep.bound_y, ":", color=cols["y, Parseval bound"], label="y, Parseval bound")
    ax.set_xlabel("quantisation scale gamma")
    ax.set_ylabel("L2 error over 8 waypoints (m)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def active_codes(curves):
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    names = []
    for name, cur in curves.items():
        for part in cur["active"][0]:
            names.append(f"{name} ({part})" if part != "all" else f"{name} (all {part})")
    cols = method_colors(names)
    for name, cur in curves.items():
        for part in cur["active"][0]:
            lab = f"{name} ({part})" if part != "all" else f"{name} (all {part})"
            ax.plot(cur["step"], [a[part] for a in cur["active"]], "o-", ms=3, color=cols[lab], label=lab)
    ax.set_xlabel("training step")
    ax.set_ylabel("active codes (held-out pairs)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def reconstructions(tok, pairs, idx):
    import torch
    o_t, o_t1, b_t, b_t1, _ = pairs
    with torch.no_grad():
        _, z = tok.encode(o_t[idx], o_t1[idx])
        img = tok.decode_image(o_t[idx], z)
        bev = tok.decode_bev(b_t[idx], z)
    n = len(idx)
    fig, axes = plt.subplots(n, 6, figsize=(5.0, 2.2 * n))
    axes = np.atleast_2d(axes)
    titles = ["image t", "image t+1", "decoded", "BEV t", "BEV t+1", "decoded"]
    for r in range(n):
        panels = [_to_img(o_t[idx[r]]), _to_img(o_t1[idx[r]]), _to_img(img[r]), b_t[idx[r]], b_t1[idx[r]], bev[r]]
        for c, p in enumerate(panels):
            if c < 3:
                axes[r, c].imshow(p, interpolation="nearest")
            else:
                axes[r, c].imshow(p, cmap=BEV_CMAP, vmin=0, vmax=3, interpolation="nearest")
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
            if r == 0:
                axes[r, c].set_title(titles[c], fontsize=8)
    fig.tight_layout()
    return fig


def transfer(panels: dict):
    fig, axes = plt.subplots(1, len(panels), figsize=(1.0 * len(panels) + 0.5, 2.6))
    for a, (name, p) in zip(axes, panels.items()):
        a.imshow(p, cmap=BEV_CMAP, vmin=0, vmax=3, interpolation="nearest")
        a.set_title(name, fontsize=7)
        a.set_xticks([])
        a.set_yticks([])
    fig.tight_layout()
    return fig


def r2_bars(table):
    fig, ax = plt.subplots(figsize=(5.2, 2.6))
    parts = ["r2_ego", "r2_env", "r2_all"]
    labels = ["ego slots", "env slots", "all slots"]
    cols = method_colors(list(table.index))
    w = 0.8 / len(table)
    for j, name in enumerate(table.index):
        ax.bar(np.arange(3) + (j - (len(table) - 1) / 2) * w, table.loc[name, parts].values.astype(float), w,
               color=cols[name], label=name)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(range(3), labels)
    ax.set_ylabel("held-out probe R$^2$")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def variant_bars(agg, order):
    keys = ["pdms", "nc", "ttc", "ep", "c"]
    fig, ax = plt.subplots(figsize=(5.2, 3.0))
    cols = method_colors(order)
    w = 0.8 / len(order)
    for j, v in enumerate(order):
        ax.bar(np.arange(len(keys)) + (j - (len(order) - 1) / 2) * w, [agg.loc[v, k] for k in keys], w, color=cols[v],
               label=v)
    ax.set_xticks(range(len(keys)), [SUB_LABELS[k] for k in keys])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean over test scenes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def latency_scatter(agg, order):
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    cols = method_colors(order)
    for v in order:
        ax.scatter(agg.loc[v, "tokens"], agg.loc[v, "pdms"], s=40, color=cols[v], label=v)
    ax.set_xlabel("generated tokens per decision")
    ax.set_ylabel("PDMS (SFT)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def rft_curves(curves):
    keys = [("reward", "mean reward"), ("format", "format rate"), ("zero_var", "zero-variance groups")]
    fig, axes = plt.subplots(1, 3, figsize=(6.9, 2.4))
    cols = method_colors([m for m, _ in curves])
    for m, s in curves:
        for a, (k, yl) in zip(axes, keys):
            a.plot(np.arange(1, len(curves[(m, s)][k]) + 1), curves[(m, s)][k], color=cols[m], lw=1.2,
                   label=m if s == min(ss for mm, ss in curves if mm == m) else None)
            a.set_xlabel("GRPO iteration")
            a.set_ylabel(yl)
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def family_bars(fam):
    fig, ax = plt.subplots(figsize=(5.2, 2.8))
    cols = method_colors(list(fam.columns))
    w = 0.8 / len(fam.columns)
    for j, c in enumerate(fam.columns):
        ax.bar(np.arange(len(fam)) + (j - (len(fam.columns) - 1) / 2) * w, fam[c].values, w, color=cols[c], label=c)
    ax.set_xticks(range(len(fam)), [f.replace("_", "\n") for f in fam.index], fontsize=7)
    ax.set_ylabel("PDMS (SFT)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def qualitative(res, i: int):
    """One test scene: input frame, BEV at t+1 decoded from the predicted dynamics tokens vs from
    the ground-truth tokens, and the plans of none / dynamics / expert."""
    import torch
    te, tok, sp = res["test"], res["tok"], res["space"]
    seed = sorted({k[2] for k in res["evals"]})[0]
    ev_d, ev_n = res["evals"][("dynamics", "SFT", seed)], res["evals"][("none", "SFT", seed)]
    k = sp.n_ego + sp.n_env
    pred = ev_d["tokens_out"][i, 1:1 + k] - sp.ego0
    true = res["targets"]["dynamics"][1][i, 1:1 + k] - sp.ego0
    with torch.no_grad():
        zp, zt = tok.lookup(pred[None]), tok.lookup(true[None])
        bp = tok.decode_bev(te.bev[i:i + 1, 1], zp)[0]
        bt = tok.decode_bev(te.bev[i:i + 1, 1], zt)[0]
    fig, axes = plt.subplots(1, 4, figsize=(5.2, 3.0))
    axes[0].imshow(_to_img(te.cam[i, 1]), interpolation="nearest")
    axes[0].set_title("input O_t", fontsize=8)
    for a, b, t in zip(axes[1:], (te.bev[i, 2], bt, bp), ("BEV t+1 (log)", "from true\ncodes", "from predicted\ncodes")):
        a.imshow(b, cmap=BEV_CMAP, vmin=0, vmax=3, interpolation="nearest")
        a.set_title(t, fontsize=8)
    plans = {"expert": te.plan[i], "none": ev_n["traj"][i], "dynamics": ev_d["traj"][i]}
    cols = method_colors(list(plans))
    for name, p in plans.items():
        c, r = _plan_rc(p)
        axes[0].plot(c, r, ".-", ms=2.5, lw=1, color=cols[name], label=name)
    for a in axes:
        _frame(a)
    axes[-1].legend(*axes[0].get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.02, 1.0),
                    frameon=False, fontsize=7)
    fig.tight_layout()
    return fig
