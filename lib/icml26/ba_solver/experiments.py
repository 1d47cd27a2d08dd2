"""Runners the BA-solver notebooks call. Each returns plain dicts / DataFrames; no plotting here."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import torch

from .baselines import ab2, dpmpp_2m, euler, heun, midpoint, reference_solve, rk4
from .data import load_digits_tensor, ring_gmm, sample_checkerboard, sample_gmm
from .fields import GMMVelocityField, VelocityMLP, train_backbone
from .method import ALPHA_LOBATTO, SideNetMLP, ba_bi_anchor, ba_single_anchor, oracle_sidenet, train_sidenet
from .metrics import endpoint_error, sliced_wasserstein


def small_net_threads(dev) -> int:
    """Pin one intra-op thread on CPU and return the count.

    The chapter's networks are tiny MLPs; on a 2-core machine two threads made SideNet training
    about 6x more CPU-expensive and 4x slower in wall time than one (measured with 60 chain-loss
    steps), so the notebooks use one thread whatever ``ICML26_THREADS`` says. GPUs are unaffected.
    """
    if torch.device(dev).type == "cpu":
        torch.set_num_threads(1)
    return torch.get_num_threads()


BASELINES = {"euler": euler, "heun": heun, "midpoint": midpoint, "ab2": ab2, "dpm++2m": dpmpp_2m, "rk4": rk4}
MULTIPLE = {"heun": 2, "midpoint": 2, "rk4": 4}


def sample_with(method: str, backbone: Callable, sidenet: Callable | None, x0: torch.Tensor, nfe: int,
                y=None, **kw) -> torch.Tensor | None:
    """Run one named solver at ``nfe`` backbone evaluations; ``None`` where ``nfe`` does not fit it."""
    if nfe % MULTIPLE.get(method, 1):
        return None
    with torch.no_grad():
        if method == "ba-bi":
            return ba_bi_anchor(backbone, sidenet, x0, nfe, y, **kw)
        if method == "ba-single":
            return ba_single_anchor(backbone, sidenet, x0, nfe, y, **kw)
        if method in BASELINES:
            return BASELINES[method](backbone, x0, nfe, y)
    raise ValueError(f"method must be 'ba-bi', 'ba-single' or one of {sorted(BASELINES)}, got {method!r}")


def error_table(backbone: Callable, sidenets: dict[str, Callable], x0: torch.Tensor, ref: torch.Tensor,
                nfes, baselines=("euler", "heun", "ab2", "dpm++2m"), y=None) -> pd.DataFrame:
    """Endpoint error to ``ref`` for baselines and for ``ba-bi``/``ba-single`` with every SideNet given.

    Returns a long table with columns ``method, nfe, error``.
    """
    rows = []
    for nfe in nfes:
        for m in baselines:
            out = sample_with(m, backbone, None, x0, nfe, y)
            if out is not None:
                rows.append({"method": m, "nfe": nfe, "error": endpoint_error(out, ref)})
        for tag, side in sidenets.items():
            for m in ("ba-bi", "ba-single"):
                out = sample_with(m, backbone, side, x0, nfe, y)
                rows.append({"method": f"{m}{tag}", "nfe": nfe, "error": endpoint_error(out, ref)})
    return pd.DataFrame(rows)


def slope(df: pd.DataFrame, method: str, n1: int, n2: int) -> float:
    """Empirical order ``log(err_n1 / err_n2) / log(n2 / n1)`` from an error table."""
    e = df[df.method == method].set_index("nfe")["error"]
    return math.log(e[n1] / e[n2]) / math.log(n2 / n1)


# ------------------------------------------------------------------------------------------ NB1
def exact_setup(n_points: int, generator: torch.Generator, dtype=torch.float64):
    """The analytic ring-mixture backbone, test noise and its float64 reference endpoints."""
    field = GMMVelocityField(ring_gmm())
    x0 = torch.randn(n_points, 2, generator=generator, dtype=torch.float64)
    ref = reference_solve(field, x0)
    return field, x0.to(dtype), ref


def convergence_study(field: Callable, x0: torch.Tensor, ref: torch.Tensor, nfes, substeps: int) -> pd.DataFrame:
    """Endpoint error vs NFE for every baseline and for BA with the *oracle* SideNet (theory only)."""
    df = error_table(field, {}, x0, ref, nfes, baselines=("euler", "heun", "midpoint", "ab2", "dpm++2m", "rk4"))
    orc = oracle_sidenet(field, substeps)
    rows = [{"method": "ba-bi (oracle)", "nfe": n, "error": endpoint_error(ba_bi_anchor(field, orc, x0, n), ref)}
            for n in nfes]
    return pd.concat([df, pd.DataFrame(rows)], ignore_index=True)


def train_exact_sidenet(field: Callable, cfg, steps: int, generator: torch.Generator, lam: float = 50.0,
                        chain_steps: int | None = None, dev=None):
    """Chain-loss training of a :class:`SideNetMLP` against the exact mixture field (NB1)."""
    params = ring_gmm().to(dev, torch.float32)
    side = SideNetMLP(2, hidden=cfg.side_hidden, depth=cfg.side_depth).to(dev)
    return train_sidenet(field, side, lambda n, g: sample_gmm(n, params, g).to(dev), steps, cfg.side_batch,
                         lr=cfg.lr, ema_decay=cfg.ema_decay, generator=generator,
                         chain_steps=chain_steps or cfg.chain_steps, lam=lam)


def sidenet_error_vs_h(field: Callable, sidenet: Callable, ts, hs, n: int, generator: torch.Generator,
                       substeps: int = 32) -> pd.DataFrame:
    """Mean ``|| v^(t+h) - v*(t+h) ||`` of the learned SideNet against the oracle, on path states."""
    params = ring_gmm()
    orc = oracle_sidenet(field, substeps)
    x1 = sample_gmm(n, params, generator)
    x0 = torch.randn(n, 2, generator=generator, dtype=torch.float64)
    rows = []
    for t in ts:
        tt = torch.full((n,), float(t), dtype=torch.float64)
        x = t * x1 + (1 - t) * x0
        v = field(x, tt)
        for h in hs:
            if not 0.0 <= t + h <= 1.0:
                continue
            hh = torch.full((n,), float(h), dtype=torch.float64)
            with torch.no_grad():
                s_hat = sidenet(x.float(), v.float(), tt.float(), hh.float()).double()
            s_star = orc(x, v, tt, hh)
            rows.append({"t": t, "h": h, "error": float((s_hat - s_star).norm(dim=1).mean()),
                         "zero_error": float(s_star.norm(dim=1).mean())})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ NB2 / NB3
def train_flow_backbone(dim: int, sample_fn: Callable, cfg, generator: torch.Generator,
                        n_classes: int | None = None, dev=None) -> tuple[VelocityMLP, dict]:
    """Train and freeze a :class:`VelocityMLP` FM backbone."""
    model = VelocityMLP(dim, hidden=cfg.backbone_hidden, depth=cfg.backbone_depth, n_classes=n_classes).to(dev)
    hist = train_backbone(model, sample_fn, cfg.backbone_steps, cfg.backbone_batch, lr=cfg.backbone_lr,
                          generator=generator)
    return model, hist


def train_learned_sidenet(backbone: Callable, dim: int, sample_fn: Callable, cfg, generator: torch.Generator,
                          steps: int | None = None, n_classes: int | None = None, dev=None, **loss_kw):
    """Chain-loss training of a SideNet for a frozen learned backbone (NB2, NB3)."""
    side = SideNetMLP(dim, hidden=cfg.side_hidden, depth=cfg.side_depth, n_classes=n_classes).to(dev)
    loss_kw.setdefault("chain_steps", cfg.chain_steps)
    return train_sidenet(backbone, side, sample_fn, steps or cfg.side_steps, cfg.side_batch, lr=cfg.lr,
                         ema_decay=cfg.ema_decay, generator=generator, **loss_kw)


def checkerboard_sampler(dev=None) -> Callable:
    return lambda n, g: sample_checkerboard(n, g).to(dev)


def quality_table(backbone: Callable, sidenet: Callable, x0: torch.Tensor, ref: torch.Tensor, nfes,
                  data: torch.Tensor, generator_seed: int, y=None,
                  methods=("euler", "ab2", "dpm++2m", "heun", "ba-single", "ba-bi"),
                  extra_metric: Callable | None = None) -> tuple[pd.DataFrame, dict]:
    """Endpoint error and SW2 to fresh ``data`` (and an optional extra metric) for every method and NFE.

    Returns the long table and the samples ``{(method, nfe): x}``; ``("reference", 0)`` holds ``ref``.
    """
    samples = {("reference", 0): ref.float()}
    rows = []
    ref_row = {"method": "reference", "nfe": 0, "error": 0.0,
               "sw2": sliced_wasserstein(ref, data, generator=torch.Generator().manual_seed(generator_seed))}
    if extra_metric is not None:
        ref_row.update(extra_metric(ref.float()))
    rows.append(ref_row)
    for nfe in nfes:
        for m in methods:
            out = sample_with(m, backbone, sidenet, x0, nfe, y)
            if out is None:
                continue
            samples[(m, nfe)] = out
            row = {"method": m, "nfe": nfe, "error": endpoint_error(out, ref),
                   "sw2": sliced_wasserstein(out, data, generator=torch.Generator().manual_seed(generator_seed))}
            if extra_metric is not None:
                row.update(extra_metric(out))
            rows.append(row)
    return pd.DataFrame(rows), samples


def alpha_ablation(backbone: Callable, sidenet: Callable, x0, ref, nfe: int,
                   alphas=(0.25, ALPHA_LOBATTO, 1 / 3)) -> pd.DataFrame:
    """Bi-anchor endpoint error at ``nfe`` for several interior nodes ``alpha`` (same SideNet)."""
    rows = [{"alpha": a, "error": endpoint_error(sample_with("ba-bi", backbone, sidenet, x0, nfe, alpha=a), ref)}
            for a in alphas]
    return pd.DataFrame(rows)


def digits_setup(dev=None):
    """Digits in ``[-1, 1]`` and a sampler returning ``(x, y)`` batches drawn with replacement."""
    x, y = load_digits_tensor()
    x, y = x.to(dev), y.to(dev)

    def sample(n, g):
        idx = torch.randint(0, x.shape[0], (n,), generator=g).to(x.device)
        return x[idx], y[idx]

    return x, y, sample


def pivot(df: pd.DataFrame, value: str = "error") -> pd.DataFrame:
    """Wide view ``method x nfe`` of a long table (for display)."""
    out = df.pivot_table(index="method", columns="nfe", values=value, aggfunc="first")
    return out.reindex([m for m in dict.fromkeys(df.method)])


def lookup(df: pd.DataFrame, method: str, nfe: int, value: str = "error") -> float:
    sel = df[(df.method == method) & (df.nfe == nfe)][value]
    if len(sel) != 1:
        raise KeyError(f"no unique row for method {method!r} at nfe {nfe}")
    return float(sel.iloc[0])


def fit_order(df: pd.DataFrame, method: str, nfes) -> float:
    """Least-squares slope of ``-log err`` against ``log nfe`` over ``nfes``."""
    e = df[(df.method == method) & (df.nfe.isin(list(nfes)))].sort_values("nfe")
    return float(-np.polyfit(np.log(e.nfe.to_numpy(float)), np.log(e.error.to_numpy(float)), 1)[0])
