"""Training, evaluation and the notebooks' runners."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from . import baselines as bl
from ._checks import check_device, check_float, check_int
from .data import knn_neighbors, make_windows, simulate_traffic
from .method import (
    DirectedTemporalOperator,
    SpatialOperator,
    UnrolledGSPForecaster,
    admm_solve,
    closed_form,
    count_parameters,
    decaying_temporal_weights,
    dense_matrix,
    distance_spatial_weights,
    objective,
)


# ---------------------------------------------------------------------------------------------
# training and evaluation
# ---------------------------------------------------------------------------------------------
def _to(split: dict, idx, device):
    return {k: v[idx].to(device) for k, v in split.items()}


def _masked_huber(pred, truth, mask, delta=1.0):
    err = (pred - truth).abs()
    h = torch.where(err <= delta, 0.5 * err**2, delta * (err - 0.5 * delta))
    return (h * mask).sum() / mask.sum().clamp_min(1)


def predict_module(model: nn.Module, split: dict, windows: dict, batch_size: int = 64, device="cpu",
                   full: bool = False) -> torch.Tensor:
    """Forecasts ``(S, t_out, N)`` (or the whole window with ``full``) in data units."""
    t_in = windows["t_in"]
    batch_size = check_int("batch_size", batch_size, 1)
    device = check_device(device, "device")
    outs = []
    model.eval()
    with torch.no_grad():
        for i in range(0, split["x"].shape[0], batch_size):
            b = _to(split, slice(i, i + batch_size), device)
            out = model(b["x"][:, :t_in], b["tod"], b["dow"], b["mask"][:, :t_in])
            if not full and out.shape[1] == windows["t_in"] + windows["t_out"]:
                out = out[:, t_in:]
            outs.append(out.cpu())
    return torch.cat(outs) * windows["std"] + windows["mean"]


def evaluate(model_or_fn, windows: dict, split: str = "test", device="cpu", max_windows: int | None = None) -> dict:
    """Masked MAE / RMSE / MAPE over the forecast steps, MAE per horizon step, on incident windows
    (an incident starts inside the horizon) and on the others; for full-window models also the
    reconstruction RMSE of the observed steps."""
    if split not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
    s = windows[split]
    if max_windows is not None:
        s = {k: v[:check_int("max_windows", max_windows, 1)] for k, v in s.items()}
    t_in = windows["t_in"]
    truth, mask = s["raw"][:, t_in:], s["mask"][:, t_in:]
    out = {}
    if isinstance(model_or_fn, nn.Module):
        full = predict_module(model_or_fn, s, windows, device=device, full=True)
        if full.shape[1] == truth.shape[1] + t_in:
            rec, rm = full[:, :t_in], s["mask"][:, :t_in]
            out["recon_rmse"] = float(((rec - s["raw"][:, :t_in]) ** 2)[rm].mean().sqrt())
            full = full[:, t_in:]
        pred = full
    else:
        pred = model_or_fn(s)
    err = (pred - truth).abs()
    mf = mask.float()
    out["mae"] = float((err * mf).sum() / mf.sum())
    out["rmse"] = float(((err**2 * mf).sum() / mf.sum()).sqrt())
    out["mape"] = bl.mape(pred, truth, mask)
    out["mae_h"] = ((err * mf).sum(dim=(0, 2)) / mf.sum(dim=(0, 2))).numpy()
    out["err_w"] = (err * mf).sum(dim=(1, 2)).numpy()          # per-window error sums (for bootstraps)
    out["cnt_w"] = mf.sum(dim=(1, 2)).numpy()
    inc = s["incident"]
    for name, sel in (("mae_incident", inc), ("mae_normal", ~inc)):
        out[name] = float((err[sel] * mf[sel]).sum() / mf[sel].sum()) if bool(sel.any()) else math.nan
    return out


def train_forecaster(model: nn.Module, windows: dict, epochs: int = 8, lr: float = 5e-3, batch_size: int = 32,
                     loss: str = "huber", full_window_loss: bool = True, grad_clip: float | None = 5.0,
                     seed: int = 0, device="cpu", clamp: bool = True, max_batches: int | None = None,
                     val_windows: int | None = None, progress: bool = True, keep_best: bool = False,
                     val_curve: bool = True) -> dict:
    """Adam + masked Huber (delta 1, data units). After every step the unrolled model's CG steps are
    clamped to [0, 1.2] and mu, rho to >= 1e-3 (``clamp``). Returns per-epoch train loss and val MAE
    (epoch 0 = before training), ``best_epoch`` (the epoch of the lowest val MAE, 0 included) and
    ``steps`` (optimiser steps taken). With ``keep_best`` the model leaves with the weights of its
    best-validation epoch (best-validation-epoch selection: training runs all ``epochs``, the
    epoch is chosen on validation data only). ``val_curve=False`` skips the per-epoch validation
    scores (``val_mae`` NaN, ``best_epoch`` None; the training itself is unchanged): for runs whose
    curve nobody reads (the ablations)."""
    if loss not in ("huber", "mae", "mse"):
        raise ValueError(f"loss must be 'huber', 'mae' or 'mse', got {loss!r}")
    if not isinstance(val_curve, bool):
        raise TypeError(f"val_curve must be a bool, got {type(val_curve).__name__}")
    if keep_best and not val_curve:
        raise ValueError("val_curve must be True with keep_best (the best epoch is read on the validation curve)")
    epochs = check_int("epochs", epochs, 0)
    batch_size = check_int("batch_size", batch_size, 1)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    if grad_clip is not None:
        check_float("grad_clip", grad_clip, low=0.0, low_open=True)
    device = check_device(device, "device")
    gen_seed = check_int("seed", seed, 0)
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(gen_seed)
    tr = windows["train"]
    t_in, T = windows["t_in"], windows["t_in"] + windows["t_out"]
    mean, std = windows["mean"], windows["std"]
    def val_mae():
        return evaluate(model, windows, "val", device, val_windows)["mae"] if val_curve else math.nan

    hist = {"epoch": [0], "train_loss": [math.nan], "val_mae": [val_mae()]}
    best = {"epoch": 0, "val": hist["val_mae"][0],
            "state": _state_copy(model) if keep_best else None}
    steps = 0
    n = tr["x"].shape[0]
    for ep in tqdm(range(1, epochs + 1), desc="epochs", leave=False, disable=not progress):
        model.train()
        perm = torch.randperm(n, generator=gen)
        losses = []
        for bi, i in enumerate(range(0, n, batch_size)):
            if max_batches is not None and bi >= max_batches:
                break
            b = _to(tr, perm[i:i + batch_size], device)
            out = model(b["x"][:, :t_in], b["tod"], b["dow"], b["mask"][:, :t_in]) * std + mean
            if out.shape[1] == T and full_window_loss:
                truth, mask = b["raw"], b["mask"].float()
            else:
                out = out[:, -windows["t_out"]:]
                truth, mask = b["raw"][:, t_in:], b["mask"][:, t_in:].float()
            if loss == "huber":
                lv = _masked_huber(out, truth, mask)
            elif loss == "mae":
                lv = ((out - truth).abs() * mask).sum() / mask.sum()
            else:
                lv = ((out - truth) ** 2 * mask).sum() / mask.sum()
            opt.zero_grad()
            lv.backward()
            if grad_clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            opt.step()
            if clamp and hasattr(model, "clamp_"):
                model.clamp_()
            losses.append(lv.detach())          # kept on the device: one host read per epoch
            steps += 1
        hist["epoch"].append(ep)
        hist["train_loss"].append(float(torch.stack(losses).mean()) if losses else math.nan)
        hist["val_mae"].append(val_mae())
        if hist["val_mae"][-1] < best["val"]:
            best.update(epoch=ep, val=hist["val_mae"][-1], state=_state_copy(model) if keep_best else None)
    hist["best_epoch"], hist["steps"] = best["epoch"] if val_curve else None, steps
    if keep_best:
        model.load_state_dict(best["state"])
    return hist


def _state_copy(model: nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# ---------------------------------------------------------------------------------------------
# notebook 1: the optimisation model and the classical ADMM
# ---------------------------------------------------------------------------------------------
def toy_instance(cfg, dtype=torch.float64):
    """A ``cfg.admm_nodes``-node road network, one ``T``-step window of simulated speed (z-scored),
    distance-based spatial weights and decaying directed weights (fixed graphs)."""
    data = simulate_traffic(cfg.admm_nodes, days=2, seed=cfg.seed)
    nbr = knn_neighbors(data.dist, min(cfg.k, cfg.admm_nodes - 1), symmetric=True)
    T = cfg.t_in + cfg.t_out
    start = 288 + 7 * 12 + 6                                        # a morning peak on day 2
    v = torch.as_tensor(data.values[start:start + T], dtype=dtype)
    m = torch.as_tensor(data.mask[start:start + T])
    mu, sd = v[m].mean(), v[m].std()
    x = torch.where(m, (v - mu) / sd, torch.zeros_like(v))[None]
    Lu = SpatialOperator(nbr, distance_spatial_weights(data.dist, nbr, dtype))
    Ld = DirectedTemporalOperator(decaying_temporal_weights(T, cfg.admm_nodes, cfg.interval, dtype=dtype))
    return {"data": data, "nbr": nbr, "x": x, "mask": m[None], "Lu": Lu, "Ld": Ld, "T": T}


def cvxpy_solution(inst: dict, t_in: int, mu_u: float, mu_d1: float, mu_d2: float):
    """The minimiser of (P) from cvxpy (dense operators; one window). Returns ``(x, objective)``."""
    import cvxpy as cp

    T, N = inst["T"], inst["x"].shape[2]
    Lu = dense_matrix(inst["Lu"].apply, T, N).numpy()
    Ld = dense_matrix(inst["Ld"].apply, T, N).numpy()
    obs = np.zeros((T, N))
    obs[:t_in] = inst["mask"][0, :t_in].numpy()
    y = (inst["x"][0].numpy() * obs).reshape(-1)
    evals, evecs = np.linalg.eigh(0.5 * (Lu + Lu.T))
    R = (evecs * np.sqrt(np.clip(evals, 0, None))).T                 # Lu = R'R
    x = cp.Variable(T * N)
    o = obs.reshape(-1)
    obj = (cp.sum_squares(cp.multiply(o, y - x)) + mu_u * cp.sum_squares(R @ x)
           + mu_d2 * cp.sum_squares(Ld @ x) + mu_d1 * cp.norm1(Ld @ x))
    prob = cp.Problem(cp.Minimize(obj))
    prob.solve(solver=cp.CLARABEL if "CLARABEL" in cp.installed_solvers() else None)
    return torch.as_tensor(x.value).reshape(1, T, N), float(prob.value)


def admm_study(cfg) -> dict:
    """Classical ADMM (fixed graphs, exact CG) vs the closed form (mu_d1 = 0) and cvxpy (mu_d1 > 0)."""
    inst = toy_instance(cfg)
    y = inst["x"][:, :cfg.t_in]
    ymask = inst["mask"][:, :cfg.t_in]
    out = {"instance": inst}
    for name, mu_d1 in (("l2", 0.0), ("l1", cfg.admm_mu_d1)):
        x, hist = admm_solve(y, cfg.t_in, inst["Lu"], inst["Ld"], cfg.admm_mu_u, mu_d1, cfg.admm_mu_d2,
                             rho=cfg.admm_rho, rho_u=cfg.admm_rho, rho_d=cfg.admm_rho, iters=cfg.admm_iters,
                             obs_mask=ymask, return_history=True)
        out[name] = {"x": x, "hist": hist}
    xc = closed_form(y, cfg.t_in, inst["Lu"], inst["Ld"], cfg.admm_mu_u, cfg.admm_mu_d2, obs_mask=ymask)
    out["closed_form"] = xc
    out["closed_form_err"] = float((out["l2"]["x"] - xc).abs().max())
    xq, fq = cvxpy_solution(inst, cfg.t_in, cfg.admm_mu_u, cfg.admm_mu_d1, cfg.admm_mu_d2)
    ypad = torch.zeros(1, inst["T"], y.shape[2], 1, dtype=y.dtype)
    ypad[:, :cfg.t_in, :, 0] = y * ymask
    obs = torch.zeros_like(ypad)
    obs[:, :cfg.t_in, :, 0] = ymask.to(y.dtype)
    f_admm = float(objective(out["l1"]["x"][..., None], ypad, obs, inst["Lu"], inst["Ld"], cfg.admm_mu_u,
                             cfg.admm_mu_d1, cfg.admm_mu_d2).sum())
    out.update(cvxpy_x=xq, cvxpy_obj=fq, admm_obj=f_admm, cvxpy_rel_gap=abs(f_admm - fq) / abs(fq),
               cvxpy_x_err=float((out["l1"]["x"] - xq).abs().max()))
    return out


# ---------------------------------------------------------------------------------------------
# notebook 2: the traffic benchmark
# ---------------------------------------------------------------------------------------------
def make_benchmark(cfg, seed: int | None = None, scaler: str = "global", noise: float = 1.0,
                   missing: float = 0.005) -> dict:
    """The SynthRoad data set, windows and neighbour lists of the preset (``seed``: the data seed, default
    ``cfg.seed``; ``scaler``: global or per-node z-scoring, see :func:`~.data.make_windows`)."""
    seed = cfg.seed if seed is None else check_int("seed", seed, 0)
    data = simulate_traffic(cfg.n_nodes, cfg.days, seed=seed, incident_rate=cfg.incident_rate, noise=noise,
                            missing=missing)
    windows = make_windows(data, cfg.t_in, cfg.t_out, cfg.stride, scaler=scaler)
    nbr = knn_neighbors(data.dist, cfg.k, symmetric=True)
    return {"data": data, "windows": windows, "nbr": nbr, "knn": nbr[:, :cfg.k]}


def build_model(cfg, bench: dict, seed: int = 0, **overrides) -> UnrolledGSPForecaster:
    torch.manual_seed(seed)
    kw = dict(t_in=cfg.t_in, t_out=cfg.t_out, n_blocks=cfg.n_blocks, n_iter=cfg.n_iter, cg_iters=cfg.cg_iters,
              n_heads=cfg.n_heads, channels=cfg.channels, interval=cfg.interval, k=cfg.k)
    kw.update(overrides)
    model = UnrolledGSPForecaster(bench["windows"]["n_nodes"], bench["nbr"], **kw)
    if model.extrap.kind == "ridge_init":
        model.init_extrapolator_from_ridge(bench["windows"], alpha=cfg.ridge_alpha)
    return model


def run_baselines(cfg, bench: dict, device="cpu") -> dict:
    """Persistence, historical average, ridge (closed form) and the small transformer (trained for the
    same epochs as the unrolled model)."""
    w = bench["windows"]
    fns = {"persistence": bl.persistence(w), "historical average": bl.historical_average_fn(bench["data"], w),
           "ridge": bl.ridge_forecaster(w, bench["knn"], cfg.ridge_alpha)}
    res = {name: {"eval": evaluate(fn, w), "params": getattr(fn, "n_params", 0)} for name, fn in fns.items()}
    res["historical average"]["params"] = 288 * cfg.n_nodes
    torch.manual_seed(cfg.seed)
    tf = bl.STTransformer(cfg.n_nodes, cfg.t_in, cfg.t_out)
    hist = train_forecaster(tf, w, cfg.epochs, lr=cfg.lr_transformer, batch_size=cfg.batch_size, seed=cfg.seed,
                            device=device, max_batches=cfg.max_batches, val_windows=cfg.max_eval)
    res["transformer"] = {"eval": evaluate(tf, w, device=device, max_windows=cfg.max_eval),
                          "params": count_parameters(tf), "hist": hist}
    return res


def run_unrolled(cfg, bench: dict, device="cpu", seed: int | None = None, epochs: int | None = None,
                 before: bool = True, val_curve: bool = True, **overrides) -> dict:
    """Train one unrolled model; returns its history, test metrics (before and after) and the model.
    ``before=False`` skips the test score of the untrained model (``"before"`` None) and ``val_curve=False``
    the per-epoch validation scores (:func:`train_forecaster`): evaluations that a caller does not read."""
    for name, v in (("before", before), ("val_curve", val_curve)):
        if not isinstance(v, bool):
            raise TypeError(f"{name} must be a bool, got {type(v).__name__}")
    seed = cfg.seed if seed is None else seed
    model = build_model(cfg, bench, seed=seed, **overrides).to(device)
    w = bench["windows"]
    before = evaluate(model, w, device=device, max_windows=cfg.max_eval) if before else None
    hist = train_forecaster(model, w, cfg.epochs if epochs is None else epochs, lr=cfg.lr,
                            batch_size=cfg.batch_size, grad_clip=cfg.grad_clip, seed=seed, device=device,
                            max_batches=cfg.max_batches, val_windows=cfg.max_eval, val_curve=val_curve)
    after = evaluate(model, w, device=device, max_windows=cfg.max_eval)
    return {"model": model, "hist": hist, "before": before, "eval": after, "params": count_parameters(model)}


def results_table(results: dict) -> pd.DataFrame:
    rows = [{"model": k, "params": v["params"], "MAE": v["eval"]["mae"], "RMSE": v["eval"]["rmse"],
             "MAPE %": v["eval"]["mape"], "MAE incident": v["eval"]["mae_incident"],
             "MAE normal": v["eval"]["mae_normal"]} for k, v in results.items()]
    return pd.DataFrame(rows).set_index("model")


def paired_bootstrap(a: dict, b: dict, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """MAE(a) - MAE(b) on the same test windows, with a 95% paired bootstrap interval over windows."""
    rng = np.random.default_rng(seed)
    S = len(a["err_w"])
    idx = rng.integers(0, S, size=(n_boot, S))
    cnt = b["cnt_w"][idx].sum(1)
    diff = (a["err_w"][idx].sum(1) - b["err_w"][idx].sum(1)) / cnt
    point = (a["err_w"].sum() - b["err_w"].sum()) / b["cnt_w"].sum()
    lo, hi = np.quantile(diff, [0.025, 0.975])
    return float(point), float(lo), float(hi)


def run_ablations(cfg, bench: dict, device="cpu") -> pd.DataFrame:
    """One-change ablations of the full model, each trained from the same seed with the same budget
    (``cfg.ablation_epochs``); each row has the paired-bootstrap difference to the full model."""
    rows = []
    variants = {"full": {}, "w/o DGTV": {"ablation": "no_dgtv"}, "w/o DGLR": {"ablation": "no_dglr"},
                "UT": {"ablation": "ut"}, "fixed graphs": {"learn_graphs": False},
                "persistence start": {"extrapolator": "last_value"}}
    variants = {k: v for k, v in variants.items() if k in cfg.ablations}
    for seed in tqdm(range(cfg.seed, cfg.seed + cfg.ablation_seeds), desc="seeds", leave=False):
        for name, ov in tqdm(variants.items(), desc="variants", leave=False):
            # the ablations read the test scores after training only
            r = run_unrolled(cfg, bench, device, seed=seed, epochs=cfg.ablation_epochs, before=False, val_curve=False,
                             **ov)
            rows.append({"variant": name, "seed": seed, "params": r["params"], "MAE": r["eval"]["mae"],
                         "MAE incident": r["eval"]["mae_incident"], "MAE normal": r["eval"]["mae_normal"],
                         "_eval": r["eval"]})
    df = pd.DataFrame(rows)
    full = {s_: e for s_, v, e in zip(df.seed, df.variant, df._eval) if v == "full"}
    boot = [paired_bootstrap(e, full[s_], seed=s_) for s_, e in zip(df.seed, df._eval)]
    df["dMAE vs full"] = [b[0] for b in boot]
    df["95% low"] = [b[1] for b in boot]
    df["95% high"] = [b[2] for b in boot]
    return df.drop(columns="_eval")


def make_ablation_benchmark(cfg) -> dict:
    """The smaller SynthRoad instance of the ablation study (``cfg.ablation_nodes``, ``cfg.ablation_days``)."""
    from dataclasses import replace
    return make_benchmark(replace(cfg, n_nodes=cfg.ablation_nodes, days=cfg.ablation_days))


# ---------------------------------------------------------------------------------------------
# notebook 1: priors on toy signals, the low-pass view, unrolled CG
# ---------------------------------------------------------------------------------------------
def prior_study(cfg, seed: int = 0) -> pd.DataFrame:
    """l2 vs l1 smoothness on both graphs. Directed: a ramp, a step (incident) and white noise along
    time at one node; undirected: a smooth field, a two-region jump and white noise over the road
    network. Every signal is scaled to unit l2 penalty (DGLR or GLR = 1) and its l1 penalty compared."""
    from .method import dglr, dgtv, glr, gtv

    g = torch.Generator().manual_seed(seed)
    T = 48
    Ld = DirectedTemporalOperator(decaying_temporal_weights(T, 1, cfg.interval))
    t = torch.arange(T, dtype=torch.float64)
    sig_t = {"ramp": t / T, "step": (t >= T // 2).double(), "noise": torch.randn(T, generator=g, dtype=torch.float64)}
    data = simulate_traffic(cfg.n_nodes, days=1, seed=cfg.seed)
    nbr = knn_neighbors(data.dist, cfg.k, symmetric=True)
    Lu = SpatialOperator(nbr, distance_spatial_weights(data.dist, nbr))
    c = torch.as_tensor(data.coords, dtype=torch.float64)
    c = (c - c.mean(0)) / c.std(0)
    sig_s = {"smooth field": c[:, 0] + 0.5 * c[:, 1], "two-region jump": (c[:, 0] > 0).double(),
             "noise": torch.randn(cfg.n_nodes, generator=g, dtype=torch.float64)}
    rows = []
    for name, x in sig_t.items():
        x = x.reshape(1, T, 1, 1)
        s = 1 / torch.sqrt(dglr(x, Ld))
        rows.append({"graph": "directed (time)", "signal": name, "l2 (DGLR / GLR)": float(dglr(s * x, Ld)),
                     "l1 (DGTV / GTV)": float(dgtv(s * x, Ld))})
    for name, x in sig_s.items():
        x = x.reshape(1, 1, -1, 1)
        s = 1 / torch.sqrt(glr(x, Lu))
        rows.append({"graph": "undirected (space)", "signal": name, "l2 (DGLR / GLR)": float(glr(s * x, Lu)),
                     "l1 (DGTV / GTV)": float(gtv(s * x, Lu))})
    return pd.DataFrame(rows)


def lowpass_study(cfg, mu: float = 3.0) -> dict:
    """Graph-Fourier view of ``(I + mu L^u)^{-1}`` on a rush-hour snapshot of the road network."""
    data = simulate_traffic(cfg.n_nodes, days=1, seed=cfg.seed)
    nbr = knn_neighbors(data.dist, cfg.k, symmetric=True)
    Lu = SpatialOperator(nbr, distance_spatial_weights(data.dist, nbr))
    L = dense_matrix(Lu.apply, 1, cfg.n_nodes)
    lam, U = torch.linalg.eigh(L)
    step = 8 * 12                                                    # 8:00
    v = torch.as_tensor(np.where(data.mask[step], data.values[step], data.values[data.mask].mean()),
                        dtype=torch.float64)
    x = (v - v.mean()) / v.std()
    filt = torch.linalg.solve(torch.eye(cfg.n_nodes, dtype=torch.float64) + mu * L, x)
    spectral = U @ ((U.T @ x) / (1 + mu * lam))
    before, after = (U.T @ x) ** 2, (U.T @ filt) ** 2
    hi = lam > 1.0
    return {"lam": lam.numpy(), "before": before.numpy(), "after": after.numpy(), "mu": mu,
            "spectral_err": float((filt - spectral).abs().max()),
            "high_before": float(before[hi].sum() / before.sum()), "high_after": float(after[hi].sum() / after.sum()),
            "lam_min": float(lam.min()), "lam_max": float(lam.max())}


def cg_study(cfg, n_steps: int = 3) -> dict:
    """Relative residual of the (A1) x-system after ``n_steps`` exact CG steps and after ``n_steps`` steps
    with the unrolled network's initial step sizes (alpha = beta = 0.08), from a zero start."""
    from .method import unrolled_cg

    inst = toy_instance(cfg)
    T, N = inst["T"], inst["x"].shape[2]
    obs = torch.zeros(1, T, N, 1, dtype=torch.float64)
    obs[:, :cfg.t_in] = 1
    rho = math.sqrt(N / T)

    def A(v):
        return obs * v + rho * v + 0.5 * rho * inst["Ld"].gram(v)
    b = inst["x"][..., None] * obs
    x0 = torch.zeros_like(b)
    out = {}
    for name, kw in (("exact CG", {"mode": "exact", "n_steps": n_steps}),
                     ("unrolled CG at init", {"alphas": torch.full((n_steps, 1), 0.08),
                                              "betas": torch.full((n_steps, 1), 0.08)})):
        x = unrolled_cg(A, b, x0, **kw)
        out[name] = float(torch.linalg.norm(A(x) - b) / torch.linalg.norm(b))
    out["no step"] = 1.0
    return out


def parameter_breakdown(model: nn.Module) -> pd.Series:
    """Trainable parameters per top-level part of a model."""
    out: dict[str, int] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            key = name.split(".")[0]
            out[key] = out.get(key, 0) + p.numel()
    out["total"] = sum(out.values())
    return pd.Series(out, name="parameters")


def lag_attention(model: UnrolledGSPForecaster, split: dict, windows: dict, index: int) -> np.ndarray:
    """Directed (lag) weights of the last block for one window: ``(T-1, V, N, H)``, rows with all lags."""
    t_in = windows["t_in"]
    sl = slice(index, index + 1)
    dev = next(model.parameters()).device
    maps = model.attention_maps(split["x"][sl, :t_in].to(dev), split["tod"][sl].to(dev), split["dow"][sl].to(dev),
                                split["mask"][sl, :t_in].to(dev))
    w = maps[-1]["temporal"][0].cpu().numpy()
    return w[model.V - 1:]                     # rows t >= V: every lag available


def extrapolator_forecast(model: UnrolledGSPForecaster, windows: dict, batch_size: int = 64):
    """Forecast function of a model's own (trained) extrapolator alone, without the ADMM blocks: the
    control for how much the unrolled layers add to their first guess."""
    t_in = windows["t_in"]

    def fn(split):
        outs = []
        dev = next(model.parameters()).device
        with torch.no_grad():
            for i in range(0, split["x"].shape[0], batch_size):
                sl = slice(i, i + batch_size)
                y = split["x"][sl, :t_in].to(dev)
                outs.append(model.extrap(y, split["tod"][sl].to(dev))[:, t_in:].cpu())
        return torch.cat(outs) * windows["std"] + windows["mean"]
    return fn


# ---------------------------------------------------------------------------------------------
# notebook 2: controls (issue 40) -- what the unrolled layers add, and where (P) could help
# ---------------------------------------------------------------------------------------------
class ExtrapolatorOnly(nn.Module):
    """A model's linear extrapolator alone (no ADMM block), as a full-window model: the control that
    trains the ridge-initialised first guess with the same Huber loss, learning rate, batch and epochs
    as the unrolled model, so that the loss and the layers can be told apart."""

    def __init__(self, extrap: nn.Module):
        super().__init__()
        self.extrap = extrap

    def forward(self, y, tod, dow, ymask=None):
        return self.extrap(y, tod)


def run_extrapolator_only(cfg, bench: dict, seed: int = 0, lr: float | None = None, device="cpu",
                          loss: str = "huber") -> dict:
    """Train :class:`ExtrapolatorOnly` (ridge start, masked ``loss`` -- Huber by default, ``"mse"`` for
    least squares -- on the whole window, ``cfg.epochs``, ``cfg.batch_size``, gradient clip) and score
    it on validation and test windows."""
    extrap = build_model(cfg, bench, seed=seed).extrap
    model = ExtrapolatorOnly(extrap).to(device)
    w = bench["windows"]
    hist = train_forecaster(model, w, cfg.epochs, lr=cfg.lr if lr is None else lr, batch_size=cfg.batch_size, loss=loss,
                            grad_clip=cfg.grad_clip, seed=seed, device=device, max_batches=cfg.max_batches,
                            val_windows=cfg.max_eval, progress=False)
    # the validation MAE after the last epoch is the curve's last point (the same evaluation)
    return {"model": model, "hist": hist, "val": hist["val_mae"][-1],
            "eval": evaluate(model, w, device=device, max_windows=cfg.max_eval)}


def optimiser_steps(cfg, bench: dict, epochs: int | None = None) -> int:
    """Adam steps of one training run of the preset on ``bench`` (the comparisons' cost measure)."""
    n = bench["windows"]["train"]["x"].shape[0]
    per_epoch = math.ceil(n / cfg.batch_size)
    if cfg.max_batches is not None:
        per_epoch = min(per_epoch, cfg.max_batches)
    return per_epoch * (cfg.epochs if epochs is None else epochs)


def huber_control_study(cfg, device="cpu") -> dict:
    """The control of the claim "the gain over ridge comes from training through the ADMM layers", over
    ``cfg.control_seeds`` training seeds. Seed ``s`` fixes the SynthRoad instance (road network and
    traffic), the initialisation and the batch order of every method alike. Per seed and configuration
    the validation and test MAE of: persistence; ridge for each ``cfg.ridge_alphas``; the
    ridge-initialised extrapolator trained alone with the Huber loss, and the same trained with least
    squares (MSE: the loss control), each for every ``cfg.control_lrs``.
    Returns ``{"seeds", "steps", "persistence": {None: ...}, "ridge": {alpha: ...}, "extrapolator alone
    (Huber)": {lr: ...}, "extrapolator alone (MSE)": {lr: ...}}`` with ``{"val": [...], "test": [...]}``
    lists over seeds."""
    seeds = list(range(cfg.seed, cfg.seed + cfg.control_seeds))
    losses = {"extrapolator alone (Huber)": "huber", "extrapolator alone (MSE)": "mse"}
    out = {"seeds": seeds, "persistence": {None: {"val": [], "test": []}},
           "ridge": {a: {"val": [], "test": []} for a in cfg.ridge_alphas}}
    out.update({name: {lr: {"val": [], "test": []} for lr in cfg.control_lrs} for name in losses})
    for s in tqdm(seeds, desc="seeds", leave=False):
        bench = make_benchmark(cfg, seed=s)
        w = bench["windows"]
        out["steps"] = optimiser_steps(cfg, bench)
        fns = {("persistence", None): bl.persistence(w)}
        fns.update({("ridge", a): bl.ridge_forecaster(w, bench["knn"], a) for a in cfg.ridge_alphas})
        for (name, key), fn in fns.items():
            out[name][key]["val"].append(evaluate(fn, w, "val")["mae"])
            out[name][key]["test"].append(evaluate(fn, w)["mae"])
        for name, loss in losses.items():
            for lr in cfg.control_lrs:
                r = run_extrapolator_only(cfg, bench, seed=s, lr=lr, device=device, loss=loss)
                out[name][lr]["val"].append(r["val"])
                out[name][lr]["test"].append(r["eval"]["mae"])
    return out


def study_comparison(study: dict, methods: dict, metric: str = "test MAE (mph)", budget: str = "optimiser steps"):
    """A :class:`~icml26.core.compare.Comparison` from a study of per-seed validation/test scores.

    ``methods`` maps a method name of ``study`` to ``{"axis": grid axis or None, "cost": number,
    "control": bool, "untuned": reason}``; a method with an axis is tuned on its mean validation MAE
    over the seeds (never the test MAE) and scored on the test MAE of its best configuration.
    Returns ``(comparison, {name: Tuned})``."""
    from icml26.core import Comparison, Grid, tune

    cmp = Comparison(metric, goal="min", seeds=study["seeds"], budget=budget)
    tuned = {}
    for name, spec in methods.items():
        table = study[name]
        if spec.get("axis") is None:
            cmp.add(name, table[None]["test"], untuned=spec["untuned"], cost=spec["cost"],
                    control=spec.get("control", False))
            continue
        axis = spec["axis"]
        t = tune(name, lambda c, tb=table, ax=axis: float(np.mean(tb[c[ax]]["val"])), Grid(**{axis: list(table)}),
                 progress=False)
        tuned[name] = t
        cmp.add(name, table[t.best[axis]]["test"], tuned=t, cost=spec["cost"], control=spec.get("control", False))
    return cmp, tuned


def _fixed_operators(bench: dict, T: int, interval: int, decay: float = 0.5):
    """Notebook 1's fixed graphs on ``bench``'s road network: distance-kernel spatial weights and
    decaying, row-stochastic directed weights over ``interval`` lags (float64)."""
    data, nbr = bench["data"], bench["nbr"]
    Lu = SpatialOperator(nbr, distance_spatial_weights(data.dist, nbr))
    Ld = DirectedTemporalOperator(decaying_temporal_weights(T, data.n_nodes, interval, decay))
    return Lu, Ld


def _solve_p(x: torch.Tensor, obs: torch.Tensor, Lu, Ld, mu_u: float, mu_d2: float) -> torch.Tensor:
    """The exact minimiser of (P) with ``mu_d1 = 0`` for a batch of windows: ``(H'H + mu_u L^u +
    mu_d2 L'L) x* = H'y`` by conjugate gradients (SPD), ``x, obs (S,T,N)`` -> ``(S,T,N)``."""
    from .method import cg_solve

    o = obs[..., None].double()
    b = x[..., None].double() * o

    if mu_u == 0:   # no spatial term: the same operator without the spatial products it would multiply by 0
        def A(v):
            return o * v + mu_d2 * Ld.gram(v)
    else:
        def A(v):
            return o * v + mu_u * Lu.apply(v) + mu_d2 * Ld.gram(v)
    return cg_solve(A, b, b.clone(), tol=1e-9, maxiter=2000)[..., 0]


def exact_p_forecast(cfg, bench: dict, mu_u: float, mu_d2: float, decay: float = 0.5):
    """Forecast function of the exact minimiser of (P) (``mu_d1 = 0``, fixed graphs of notebook 1): the
    future that is smoothest on both graphs given the observed hour, with no learned parameter."""
    mu_u, mu_d2 = check_float("mu_u", mu_u, low=0.0), check_float("mu_d2", mu_d2, low=0.0, low_open=True)
    w = bench["windows"]
    t_in = w["t_in"]
    Lu, Ld = _fixed_operators(bench, t_in + w["t_out"], cfg.interval, decay)

    def fn(split):
        obs = torch.zeros_like(split["x"])
        obs[:, :t_in] = split["mask"][:, :t_in].to(obs.dtype)
        xs = _solve_p(split["x"], obs, Lu, Ld, mu_u, mu_d2)
        return (xs[:, t_in:] * w["std"] + w["mean"]).float()
    return fn


def exact_p_study(cfg, bench: dict) -> pd.DataFrame:
    """Validation and test MAE of the exact-(P) forecast: without spatial term for every ``(mu_d2,
    decay)`` of the preset's grids (``decay``: the lag decay of the fixed directed weights), and with
    each spatial weight ``mu_u > 0`` of ``cfg.p_mu_u`` for every ``mu_d2`` at the first decay (the
    spatial solves cost most of the study's time)."""
    rows = []
    w = bench["windows"]
    grid = [(0.0, mu_d2, decay) for decay in cfg.p_decay for mu_d2 in cfg.p_mu_d2]
    grid += [(mu_u, mu_d2, cfg.p_decay[0]) for mu_u in cfg.p_mu_u if mu_u > 0 for mu_d2 in cfg.p_mu_d2]
    for mu_u, mu_d2, decay in grid:
        fn = exact_p_forecast(cfg, bench, mu_u, mu_d2, decay=decay)
        rows.append({"mu_u": mu_u, "mu_d2": mu_d2, "decay": decay,
                     "val MAE": evaluate(fn, w, "val", max_windows=cfg.max_eval)["mae"],
                     "test MAE": evaluate(fn, w, max_windows=cfg.max_eval)["mae"]})
    return pd.DataFrame(rows)


def carry_forward_windows(windows: dict) -> dict:
    """``windows`` with every missing reading of the observed hour replaced by the same sensor's last
    observed reading (the next one where none came before; left as is where the sensor saw nothing in
    the hour): the no-graph imputer, the control of :func:`denoised_windows`. Vectorised over windows
    and sensors (running maximum of the index of the last observation)."""
    t_in = windows["t_in"]
    out = dict(windows)
    for name in ("train", "val", "test"):
        s = dict(windows[name])
        h, m = s["x"][:, :t_in], s["mask"][:, :t_in].bool()
        steps = torch.arange(t_in).view(1, t_in, *([1] * (h.dim() - 2))).expand_as(h)
        last = torch.where(m, steps, torch.full_like(steps, -1)).cummax(dim=1).values
        nxt = torch.where(m, steps, torch.full_like(steps, t_in)).flip(1).cummin(dim=1).values.flip(1)
        src = torch.where(last >= 0, last, nxt)
        filled = torch.where(src < t_in, h.gather(1, src.clamp(max=t_in - 1)), h)
        x = s["x"].clone()
        x[:, :t_in] = torch.where(m, h, filled)
        s["x"] = x
        out[name] = s
    return out


def denoised_windows(cfg, bench: dict, mu_u: float, mu_d2: float = 1.0) -> dict:
    """``bench``'s windows with every observed hour replaced by the exact minimiser of (P) on that hour
    alone (``mu_d1 = 0``, fixed graphs): the graph prior as a denoiser and imputer of the inputs."""
    w = bench["windows"]
    t_in = w["t_in"]
    Lu, Ld = _fixed_operators(bench, t_in, min(cfg.interval, t_in - 1))
    out = dict(w)
    for name in ("train", "val", "test"):
        s = dict(w[name])
        xs = _solve_p(s["x"][:, :t_in], s["mask"][:, :t_in].to(s["x"].dtype), Lu, Ld, mu_u, mu_d2)
        x = s["x"].clone()
        x[:, :t_in] = xs.to(x.dtype)
        s["x"] = x
        out[name] = s
    return out


def denoise_study(cfg, device="cpu") -> dict:
    """Where (P) could earn its place: noisy, gappy readings (``cfg.noisy_noise`` mph,
    ``cfg.noisy_missing`` missing). Per training seed (the SynthRoad instance): persistence, ridge on
    the raw hour (missing readings enter as zeros, i.e. the mean) for each ``cfg.ridge_alphas``, ridge on
    the hour with missing readings carried forward (:func:`carry_forward_windows`, the no-graph control)
    for each ``cfg.ridge_alphas``, and ridge (``cfg.ridge_alpha``) on the hour denoised by (P) for each
    spatial weight ``cfg.denoise_mu_u``; same layout as :func:`huber_control_study`."""
    seeds = list(range(cfg.seed, cfg.seed + cfg.noisy_seeds))
    out = {"seeds": seeds, "persistence": {None: {"val": [], "test": []}},
           "ridge": {a: {"val": [], "test": []} for a in cfg.ridge_alphas},
           "carry-forward + ridge": {a: {"val": [], "test": []} for a in cfg.ridge_alphas},
           "(P)-denoised hour + ridge": {m: {"val": [], "test": []} for m in cfg.denoise_mu_u}}
    for s in tqdm(seeds, desc="seeds", leave=False):
        bench = make_benchmark(cfg, seed=s, noise=cfg.noisy_noise, missing=cfg.noisy_missing)
        w = bench["windows"]
        if cfg.max_eval is not None:     # dry runs: the first windows of every split only
            w.update({k: {f: v[:cfg.max_eval] for f, v in w[k].items()} for k in ("train", "val", "test")})
        fns = [("persistence", None, w, bl.persistence(w))]
        fns += [("ridge", a, w, bl.ridge_forecaster(w, bench["knn"], a)) for a in cfg.ridge_alphas]
        wc = carry_forward_windows(w)
        fns += [("carry-forward + ridge", a, wc, bl.ridge_forecaster(wc, bench["knn"], a)) for a in cfg.ridge_alphas]
        for mu in cfg.denoise_mu_u:
            wd = denoised_windows(cfg, bench, mu)
            fns.append(("(P)-denoised hour + ridge", mu, wd, bl.ridge_forecaster(wd, bench["knn"], cfg.ridge_alpha)))
        for name, key, ws, fn in fns:
            out[name][key]["val"].append(evaluate(fn, ws, "val")["mae"])
            out[name][key]["test"].append(evaluate(fn, ws)["mae"])
    return out


def untrained_vs_ridge(cfg, scaler: str) -> dict:
    """Test MAE of ridge and of the untrained unrolled model (ridge start, initial layer weights) under
    global or per-node z-scoring: the claim "untrained layers worsen ridge" depends on the scaling."""
    bench = make_benchmark(cfg, scaler=scaler)
    w = bench["windows"]
    model = build_model(cfg, bench, seed=cfg.seed)
    return {"ridge": evaluate(bl.ridge_forecaster(w, bench["knn"], cfg.ridge_alpha), w)["mae"],
            "untrained": evaluate(model, w, max_windows=cfg.max_eval)["mae"]}


# ---------------------------------------------------------------------------------------------
# notebook 3: the unrolled model against the transformer, tuned the same way, over training seeds
# ---------------------------------------------------------------------------------------------
def comparison_preset(cfg):
    """The preset of notebook 3's comparison: ``cfg`` on the smaller SynthRoad instance
    (``cfg.cmp_nodes`` sensors, ``cfg.cmp_days`` days) with ``epochs`` the unrolled model's epoch cap
    ``cfg.cmp_epochs``; every other field (network, batch, gradient clip, evaluation limits) is the
    chapter's."""
    from dataclasses import replace
    return replace(cfg, n_nodes=cfg.cmp_nodes, days=cfg.cmp_days, epochs=cfg.cmp_epochs)


U_NAME, U0_NAME, TF_NAME = "unrolled (ridge start)", "unrolled, 0 steps", "transformer"
#: the unrolled model's ridge-initialised extrapolator trained alone (the network without its ADMM blocks, i.e.
#: with both skip weights at 0): the control of what the layers add, trained by the unrolled model's rule
E_NAME = "extrapolator alone"


def _trained_scores(model: nn.Module, c, w: dict, lr: float, seed: int, device, epochs: int) -> dict:
    """Train ``model`` with the chapter's loop (Huber, Adam, batch, clip of ``c``) for ``epochs``,
    keep its best-validation epoch (:func:`train_forecaster` with ``keep_best``) and score it."""
    t0 = time.process_time()
    hist = train_forecaster(model, w, epochs, lr=lr, batch_size=c.batch_size, grad_clip=c.grad_clip, seed=seed,
                            device=device, max_batches=c.max_batches, val_windows=c.max_eval, progress=False,
                            keep_best=True)
    return {"val": evaluate(model, w, "val", device, c.max_eval)["mae"],
            "test": evaluate(model, w, device=device, max_windows=c.max_eval)["mae"],
            "best_epoch": hist["best_epoch"], "curve": hist["val_mae"], "steps": hist["steps"],
            "cpu_s": time.process_time() - t0, "params": count_parameters(model)}


def transformer_study(cfg, device="cpu") -> dict:
    """The unrolled model (ridge start) against the transformer baseline and against its own extrapolator
    trained alone (:class:`ExtrapolatorOnly`, :data:`E_NAME`: the same network without its ADMM blocks, ridge
    start), each trained by :func:`train_forecaster` (Huber loss, batch, clip of the chapter) up to its epoch cap
    (``cfg.cmp_epochs`` for the unrolled model and its extrapolator, the same optimiser steps; ``cfg.cmp_tf_epochs``
    for the transformer) and kept at its best-validation epoch: one rule for all, a cap per model from measured
    validation curves (``"best_epoch"`` records each run's best).

    The learning rate (grid ``cfg.cmp_lrs``, the same for every trained model) is tuned on the mean validation
    MAE of the first ``cfg.cmp_tune_seeds`` training seeds; the chosen rate is then trained on the unrolled
    model's ``cfg.cmp_seeds`` seeds and the cheap models' ``cfg.cmp_cheap_seeds`` (transformer, extrapolator
    alone; the first ``cmp_seeds`` are common to all rows). Seed ``s`` fixes the SynthRoad instance, the initial
    weights (:func:`~icml26.core.compare.paired_init`) and the batch order of every method alike.
    Per seed also: persistence (the no-treatment row), ridge for each ``cfg.cmp_alphas``, and the
    unrolled model after 0 optimiser steps (ridge-initialised extrapolator, initial layer weights).

    Returns ``{method: {config: {"val": [...], "test": [...]}}}`` (trained models: also
    ``"best_epoch"`` and ``"curve"`` per run; a rate not chosen holds the tuning seeds only),
    ``"seeds"`` (all), ``"seeds_u"``, ``"tune_seeds"``, ``"tuned"`` (method -> Tuned),
    ``"max_epochs"``, ``"steps_per_epoch"``, ``"params"`` and ``"cpu_s"`` (CPU seconds per method,
    summed over its runs and seeds)."""
    from icml26.core import Grid, paired_init, tune

    c = comparison_preset(cfg)
    if not c.cmp_lrs:
        raise ValueError("cfg.cmp_lrs must hold at least one learning rate")
    n_all = check_int("cfg.cmp_cheap_seeds", c.cmp_cheap_seeds, 1)
    n_u = check_int("cfg.cmp_seeds", c.cmp_seeds, 1)
    n_tune = check_int("cfg.cmp_tune_seeds", c.cmp_tune_seeds, 1)
    if not n_tune <= n_u <= n_all:
        raise ValueError(f"cfg.cmp_tune_seeds <= cfg.cmp_seeds <= cfg.cmp_cheap_seeds must hold, got "
                         f"{n_tune}, {n_u}, {n_all}")
    device = check_device(device, "device")
    seeds = list(range(c.seed, c.seed + n_all))
    max_ep = {U_NAME: check_int("cfg.cmp_epochs", c.cmp_epochs, 1),
              TF_NAME: check_int("cfg.cmp_tf_epochs", c.cmp_tf_epochs, 1), E_NAME: c.cmp_epochs}
    per_model_seeds = {U_NAME: seeds[:n_u], TF_NAME: seeds, E_NAME: seeds}
    out = {"seeds": seeds, "seeds_u": seeds[:n_u], "tune_seeds": seeds[:n_tune], "max_epochs": max_ep,
           "persistence": {None: {"val": [], "test": []}}, U0_NAME: {None: {"val": [], "test": []}},
           "ridge": {a: {"val": [], "test": []} for a in c.cmp_alphas}}
    out.update({name: {lr: {k: [] for k in ("val", "test", "best_epoch", "curve")} for lr in c.cmp_lrs}
                for name in max_ep})
    out["cpu_s"] = {name: 0.0 for name in ("persistence", "ridge", U0_NAME, *max_ep)}
    out["params"], benches = {}, {}

    def train(name, s, lr):
        bench = benches[s]
        build = {U_NAME: lambda: build_model(c, bench, seed=s),
                 E_NAME: lambda: ExtrapolatorOnly(build_model(c, bench, seed=s).extrap),
                 TF_NAME: lambda: bl.STTransformer(c.n_nodes, c.t_in, c.t_out)}[name]
        r = _trained_scores(paired_init(s, build), c, bench["windows"], lr, s, device, max_ep[name])
        for k in ("val", "test", "best_epoch", "curve"):
            out[name][lr][k].append(r[k])
        out["cpu_s"][name] += r["cpu_s"]
        out["params"][name] = r["params"]

    for s in tqdm(seeds, desc="seeds (fixed methods, tuning)", leave=False):
        bench = benches[s] = make_benchmark(c, seed=s)
        w = bench["windows"]
        out["steps_per_epoch"] = optimiser_steps(c, bench, epochs=1)
        fits = [("persistence", None, lambda w=w: bl.persistence(w))]
        fits += [("ridge", a, lambda a=a, w=w, k=bench["knn"]: bl.ridge_forecaster(w, k, a)) for a in c.cmp_alphas]
        if s in out["seeds_u"]:
            fits.append((U0_NAME, None, lambda b=bench, s=s: paired_init(s, lambda: build_model(c, b, seed=s))))
        for name, key, fit in fits:
            t0 = time.process_time()
            fn = fit()
            out[name][key]["val"].append(evaluate(fn, w, "val", max_windows=c.max_eval)["mae"])
            out[name][key]["test"].append(evaluate(fn, w, max_windows=c.max_eval)["mae"])
            out["params"][name] = fn.n_params if hasattr(fn, "n_params") else (
                count_parameters(fn) if isinstance(fn, nn.Module) else 0)
            out["cpu_s"][name] += time.process_time() - t0
        if s in out["tune_seeds"]:
            for lr in c.cmp_lrs:
                for name in max_ep:
                    train(name, s, lr)
    out["tuned"] = {}
    for name in max_ep:
        t = tune(name, lambda cf, tb=out[name]: float(np.mean(tb[cf["lr"]]["val"])), Grid(lr=list(c.cmp_lrs)),
                 progress=False)
        out["tuned"][name] = t
        for s in tqdm(per_model_seeds[name][n_tune:], desc=f"{name} at the chosen rate", leave=False):
            train(name, s, t.best["lr"])
    return out


def budget_comparisons(study: dict, metric: str = "test MAE (mph)", budget: str = "optimiser steps per run"):
    """Notebook 3's two comparisons of a :func:`transformer_study`: ``(on_u, on_all)``.

    ``on_u`` holds every method on the unrolled model's seeds (the unrolled model, its 0-step
    control, the transformer, the extrapolator trained alone, ridge, persistence); ``on_all`` the cheap
    methods (transformer, extrapolator alone, ridge, persistence) on all seeds. Each tuned method is scored at the configuration chosen on
    validation data (the learning rate by :func:`transformer_study`, ridge's penalty here on its mean
    validation MAE over all seeds). A trained model's cost is the optimiser steps of one run (every
    step up to its epoch cap; the best epoch is chosen afterwards)."""
    from icml26.core import Comparison, Grid, tune

    ridge = study["ridge"]
    t_ridge = tune("ridge", lambda cf: float(np.mean(ridge[cf["alpha"]]["val"])), Grid(alpha=list(ridge)),
                   progress=False)
    tuned = dict(study["tuned"], ridge=t_ridge)
    spe = study["steps_per_epoch"]
    rows = {U_NAME: (study[U_NAME][tuned[U_NAME].best["lr"]]["test"], dict(
                tuned=tuned[U_NAME], cost=spe * study["max_epochs"][U_NAME])),
            U0_NAME: (study[U0_NAME][None]["test"], dict(
                untuned="zero steps: the ridge-initialised model as built", cost=0, control=True)),
            TF_NAME: (study[TF_NAME][tuned[TF_NAME].best["lr"]]["test"], dict(
                tuned=tuned[TF_NAME], cost=spe * study["max_epochs"][TF_NAME])),
            E_NAME: (study[E_NAME][tuned[E_NAME].best["lr"]]["test"], dict(
                tuned=tuned[E_NAME], cost=spe * study["max_epochs"][E_NAME])),
            "ridge": (ridge[t_ridge.best["alpha"]]["test"], dict(tuned=t_ridge, cost=0)),
            "persistence": (study["persistence"][None]["test"], dict(
                untuned="no parameter: repeats each sensor's last reading", cost=0, control=True))}
    on_u = Comparison(metric, goal="min", seeds=study["seeds_u"], budget=budget)
    on_all = Comparison(metric, goal="min", seeds=study["seeds"], budget=budget)
    n_u = len(study["seeds_u"])
    for name, (scores, kw) in rows.items():
        on_u.add(name, scores[:n_u], **kw)
        if name not in (U_NAME, U0_NAME):
            on_all.add(name, scores, **kw)
    return on_u, on_all, tuned
