"""Runners the watermark notebooks call; each returns DataFrames or dicts (no printing)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy import stats

from .baselines import DEFAULTS, select_uncalibrated
from .framework import calibrate, power_exact, power_normal, predict, required_length, select_min_distortion
from .method import (
    binomial_sf,
    binomial_threshold,
    detect,
    effective_gamma,
    first_occurrence_mask,
    green_matrix,
    green_size,
    kgw_lower_bound,
    kl_closed_form,
    kl_uniform_exact,
    mu1_uniform_exact,
    mu_max,
    phi,
)
from .teachers import HMMTeacher, draw_probs, sample_iid

# -- notebook 1 ----------------------------------------------------------------------------------


def family_points(cfg) -> list[tuple[str, float]]:
    return ([("uniform", m) for m in cfg.uniform_m] + [("zipf", s) for s in cfg.zipf_s]
            + [("softmax", t) for t in cfg.softmax_tau])


def predicted_rate(family, param, n_vocab, gamma, delta, rows, gen) -> dict:
    """Prediction of ``mu1`` and the forward KL from independent draws of ``p``, each scored under 16
    random green lists (the calibration of Sec. 3.4); exact hypergeometric values for uniform-m."""
    p = draw_probs(family, param, n_vocab, rows, gen)
    P = calibrate(p.float(), T_eff=1.0, n_masks=16, seed=int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
                  ).green_mass(gamma)
    out = {"mu1_pred": float(phi(P, delta).mean()), "kl_pred": float(kl_closed_form(P, delta).mean()),
           "lower": float(kgw_lower_bound(p, gamma, delta).mean()), "H": float((-torch.xlogy(p, p).sum(1)).mean())}
    if family == "uniform":
        out["mu1_pred"] = mu1_uniform_exact(n_vocab, gamma, int(param), delta)
        out["kl_pred"] = kl_uniform_exact(n_vocab, gamma, int(param), delta)
    return out


def green_rate_study(cfg, gen: torch.Generator) -> pd.DataFrame:
    """Monte Carlo green rate and KL (explicit watermarked sampling) vs the predictions, per family point."""
    rows = []
    for fam, par in family_points(cfg):
        mc = sample_iid(fam, par, cfg.n_vocab, cfg.n_mc, cfg.gamma, cfg.delta, gen)
        pred = predicted_rate(fam, par, cfg.n_vocab, cfg.gamma, cfg.delta, cfg.n_pred, gen)
        g = mc["green"]
        rows.append({"family": fam, "param": par, "entropy": pred["H"], "mu1_mc": float(g.mean()),
                     "mu1_se": float(g.std() / math.sqrt(g.numel())), "mu1_pred": pred["mu1_pred"],
                     "lower": pred["lower"], "upper": mu_max(effective_gamma(cfg.n_vocab, cfg.gamma), cfg.delta),
                     "kl_mc": float(mc["log_ratio"].mean()),
                     "kl_se": float(mc["log_ratio"].std() / math.sqrt(g.numel())), "kl_pred": pred["kl_pred"]})
    return pd.DataFrame(rows)


def power_study(cfg, gen: torch.Generator) -> dict:
    """Power vs length for i.i.d. watermarked sequences: Monte Carlo rejections (exact test at each
    length) against the exact and normal power formulas at the predicted ``mu1``; plus the
    required-length check (Monte Carlo power at ``ceil(T*)`` for target power ``cfg.target_power``)."""
    fam, par = cfg.power_family
    T_grid = np.asarray(cfg.T_grid)
    curves, checks = [], []
    for gamma, delta in cfg.power_configs:
        g = effective_gamma(cfg.power_vocab, gamma)
        mu1 = predicted_rate(fam, par, cfg.power_vocab, gamma, delta, 4 * cfg.n_pred, gen)["mu1_pred"]
        x = sample_iid(fam, par, cfg.power_vocab, cfg.n_seq * cfg.T_max, gamma, delta, gen)["green"]
        S = x.view(cfg.n_seq, cfg.T_max).cumsum(1)
        c = binomial_threshold(T_grid, g, cfg.alpha)
        emp = (S[:, T_grid - 1].numpy() >= c[None, :]).mean(0)
        T_star = int(math.ceil(float(required_length(mu1, g, cfg.alpha, cfg.target_power))))
        if T_star <= cfg.T_max:
            c_star = binomial_threshold(T_star, g, cfg.alpha)
            checks.append({"gamma": gamma, "delta": delta, "mu1": mu1, "mu1_mc": float(x.mean()), "T_star": T_star,
                           "mc_power": float((S[:, T_star - 1].numpy() >= c_star).mean()),
                           "exact_power": float(power_exact(mu1, g, T_star, cfg.alpha)),
                           "normal_power": float(power_normal(mu1, g, T_star, cfg.alpha))})
        for T, e in zip(T_grid, emp):
            curves.append({"gamma": gamma, "delta": delta, "T": int(T), "mu1": mu1, "mc": float(e),
                           "exact": float(power_exact(mu1, g, T, cfg.alpha)),
                           "normal": float(power_normal(mu1, g, T, cfg.alpha))})
    return {"curves": pd.DataFrame(curves), "t_star": pd.DataFrame(checks)}


def fpr_table(n: int = 200, gamma: float = 0.25, z_grid=(2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0)) -> pd.DataFrame:
    """Exact false-positive rate of the rule ``z >= z0`` vs the normal tail ``1 - Phi(z0)``.

    ``z >= z0`` means ``S >= ceil(gamma n + z0 sqrt(n gamma (1 - gamma)))``; the exact tail is computed by
    the package's torch :func:`binomial_sf` and by ``scipy.stats.binom.sf`` (the cross-check)."""
    z = np.asarray(z_grid, dtype=np.float64)
    c = np.ceil(gamma * n + z * math.sqrt(n * gamma * (1 - gamma)) - 1e-9)
    ours = binomial_sf(torch.as_tensor(c), n, gamma).numpy()
    ref = stats.binom.sf(c - 1, n, gamma)
    return pd.DataFrame({"z0": z, "count": c.astype(int), "exact": ours, "scipy": ref, "normal": stats.norm.sf(z),
                         "ratio": ours / stats.norm.sf(z)})


def heatmap_study(cfg, gen: torch.Generator) -> dict:
    """Predicted ``T*`` and forward KL over a (gamma, delta) grid at two entropies (softmax family)."""
    gammas = np.linspace(0.05, 0.95, cfg.heat_gammas)
    deltas = np.linspace(0.1, 4.0, cfg.heat_deltas)
    out = {"gammas": gammas, "deltas": deltas}
    for tau in cfg.heat_tau:
        p = draw_probs("softmax", tau, cfg.n_vocab, cfg.n_pred, gen).float()
        cal = calibrate(p, T_eff=100.0, n_masks=8, seed=cfg.seed)
        Ts, Ds = np.zeros((len(deltas), len(gammas))), np.zeros((len(deltas), len(gammas)))
        for j, g in enumerate(gammas):
            P = cal.green_mass(g)
            ge = green_size(cal.n_vocab, g) / cal.n_vocab
            for i, d in enumerate(deltas):
                mu1 = float(phi(P, d).mean())
                Ts[i, j] = float(required_length(mu1, ge, cfg.alpha, cfg.target_power))
                Ds[i, j] = float(kl_closed_form(P, d).mean())
        out[tau] = {"T_star": Ts, "kl": Ds, "entropy": float((-torch.xlogy(p.double(), p.double()).sum(1)).mean())}
    return out


# -- notebook 2 ----------------------------------------------------------------------------------


def make_teachers(cfg) -> dict:
    return {tau: HMMTeacher(cfg.n_states, cfg.vocab_size, tau, seed=cfg.seed) for tau in cfg.taus}


def scored_count(tokens: torch.Tensor, bos: int, n_ctx: int) -> torch.Tensor:
    """Scored tokens per sequence after de-duplication (the ``T_eff`` of Sec. 3.4)."""
    prev = torch.cat([torch.full_like(tokens[:, :1], bos), tokens[:, :-1]], 1)
    return first_occurrence_mask(prev, tokens, n_ctx).sum(1).double()


def profile(teacher: HMMTeacher, cfg, gen: torch.Generator) -> dict:
    """Unwatermarked generations: null tokens, entropy profile, ``T_eff`` and the calibration."""
    out = teacher.generate(cfg.n_null, cfg.T, gen)
    n_cal_seq = max(1, -(-cfg.n_cal // cfg.T))  # fresh unwatermarked sequences for the entropy profile
    probs = teacher.generate(n_cal_seq, cfg.T, gen, return_probs=True)["probs"].reshape(-1, teacher.vocab_size)
    idx = torch.randperm(probs.shape[0], generator=gen)[: cfg.n_cal]
    T_eff = float(scored_count(out["tokens"], teacher.bos, teacher.vocab_size + 1).mean())
    p = probs[idx].double()
    cal = calibrate((p / p.sum(1, keepdim=True)).float(), T_eff, n_masks=cfg.n_masks, seed=cfg.seed)
    return {**out, "T_eff": T_eff, "cal": cal, "nll_null": float(out["nll"].mean())}


def null_study(teacher: HMMTeacher, tokens: torch.Tensor, cfg) -> pd.DataFrame:
    """False-positive rate at ``alpha`` of the exact test on unwatermarked text, with and without
    de-duplication, pooled over ``cfg.n_keys`` keys (each key scores every null sequence)."""
    rows = []
    for gamma in (0.25, 0.5):
        for dedup in (True, False):
            z, rej = [], []
            for i in range(cfg.n_keys):
                gm = green_matrix(teacher.vocab_size, gamma, cfg.key + i)
                d = detect(tokens, gm, gamma, teacher.bos, dedup=dedup, alpha=cfg.alpha)
                z.append(d["z"])
                rej.append(d["reject"].double())
            z = torch.cat(z)
            rows.append({"gamma": gamma, "dedup": dedup, "fpr": float(torch.cat(rej).mean()),
                         "z": z.numpy(), "z_var": float(z.var())})
    return pd.DataFrame(rows)


def evaluate_point(teacher: HMMTeacher, gamma, delta, cfg, gen: torch.Generator, nll_null: float,
                   n_seq: int | None = None) -> dict:
    """Generate ``n_seq`` watermarked sequences at ``(gamma, delta)`` and measure green fraction,
    power (exact test, de-duplicated), forward KL (exact, per token), oracle NLL increase and ``T_eff``."""
    per_key = max(1, (n_seq or cfg.n_seq_wm) // cfg.n_keys)
    rej, green, scored, kl, nll = [], [], [], [], []
    for i in range(cfg.n_keys):
        gm = green_matrix(teacher.vocab_size, gamma, cfg.key + i)
        out = teacher.generate(per_key, cfg.T, gen, green_mat=gm, delta=delta)
        d = detect(out["tokens"], gm, gamma, teacher.bos, alpha=cfg.alpha)
        rej.append(d["reject"].double())
        green.append(d["n_green"])
        scored.append(d["n_scored"])
        kl.append(out["kl"].mean(1))
        nll.append(out["nll"].mean(1))
    rej, scored = torch.cat(rej), torch.cat(scored)
    return {"gamma": gamma, "delta": float(delta), "green": float(torch.cat(green).sum() / scored.sum()),
            "power": float(rej.mean()), "power_se": float(rej.std() / math.sqrt(rej.numel())),
            "kl": float(torch.cat(kl).mean()), "dnll": float(torch.cat(nll).mean()) - nll_null,
            "T_eff_wm": float(scored.mean())}


def evaluate_grid(teacher: HMMTeacher, prof: dict, cfg, gen: torch.Generator) -> pd.DataFrame:
    """Empirical and predicted (green fraction, KL, power) on the (gamma, delta) grid (Algorithm C's data)."""
    rows = []
    for gamma in cfg.gammas:
        for delta in cfg.deltas:
            emp = evaluate_point(teacher, gamma, delta, cfg, gen, prof["nll_null"])
            pr = predict(prof["cal"], gamma, delta, cfg.alpha)
            rows.append({**emp, "green_pred": pr["mu1"], "kl_pred": pr["kl_forward"], "power_pred": pr["power"]})
    return pd.DataFrame(rows)


def selection_study(teacher: HMMTeacher, prof: dict, cfg, gen: torch.Generator) -> dict:
    """Algorithm A per gamma (calibrated, ``T_eff`` from de-duplicated calibration text), its controls
    (the raw length ``T`` instead of ``T_eff``; the uncalibrated high-entropy theory) and the
    defaults, each generated and measured."""
    cal = prof["cal"]
    kw = dict(gammas=cfg.gammas, alpha=cfg.alpha, target_power=cfg.target_power)
    sel = select_min_distortion(cal, **kw)
    raw = select_min_distortion(cal, T=float(cfg.T), **kw)
    unc = select_uncalibrated(cal.n_vocab, cal.T_eff, **kw)
    rows = []
    for name, res in (("algorithm A", sel), ("A with raw T", raw), ("uncalibrated", unc)):
        for r in res["per_gamma"]:
            if not r["feasible"]:
                continue
            emp = evaluate_point(teacher, r["gamma"], r["delta"], cfg, gen, prof["nll_null"])
            rows.append({"rule": name, **emp, "power_pred": r["power"], "kl_pred": r["kl_forward"],
                         "chosen": r["gamma"] == res["gamma"]})
    for name, (g, d) in DEFAULTS.items():
        pr = predict(cal, g, d, cfg.alpha)
        emp = evaluate_point(teacher, g, d, cfg, gen, prof["nll_null"])
        rows.append({"rule": name, **emp, "power_pred": pr["power"], "kl_pred": pr["kl_forward"], "chosen": True})
    return {"table": pd.DataFrame(rows), "selection": sel, "raw": raw, "uncalibrated": unc}


def frontier_excess(grid: pd.DataFrame, power: float, kl: float) -> float:
    """Relative KL excess of a point over the empirical frontier at equal-or-higher power (<= 0: not dominated)."""
    better = grid[grid["power"] >= power]
    if better.empty:
        return 0.0
    return float(kl / better["kl"].min() - 1.0)
