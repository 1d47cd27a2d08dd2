"""Runners the watermark notebooks call; each returns DataFrames or dicts (no printing)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
from scipy import stats

from .baselines import DEFAULTS, select_uncalibrated
from .framework import (
    calibrate,
    pareto_mask,
    power_exact,
    power_mixture,
    power_normal,
    predict,
    required_length,
    select_min_distortion,
)
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
    counts = scored_count(out["tokens"], teacher.bos, teacher.vocab_size + 1)
    T_eff = float(counts.mean())
    p = probs[idx].double()
    cal = calibrate((p / p.sum(1, keepdim=True)).float(), T_eff, n_masks=cfg.n_masks, seed=cfg.seed,
                    counts=counts.numpy())
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
                   n_seq: int | None = None, keys=None) -> dict:
    """Generate ``n_seq`` watermarked sequences at ``(gamma, delta)``, split over the watermark keys
    ``cfg.key + i`` for ``i`` in ``keys`` (default ``range(cfg.n_keys)``), and measure green fraction,
    power (exact test, de-duplicated), forward KL (exact, per token), oracle NLL increase and ``T_eff``;
    ``power_keys`` and ``kl_keys`` hold the power and KL of each key's sequences."""
    keys = range(cfg.n_keys) if keys is None else keys
    per_key = max(1, (n_seq or cfg.n_seq_wm) // len(keys))
    rej, green, scored, kl, nll = [], [], [], [], []
    for i in keys:
        gm = green_matrix(teacher.vocab_size, gamma, cfg.key + i)
        out = teacher.generate(per_key, cfg.T, gen, green_mat=gm, delta=delta)
        d = detect(out["tokens"], gm, gamma, teacher.bos, alpha=cfg.alpha)
        rej.append(d["reject"].double())
        green.append(d["n_green"])
        scored.append(d["n_scored"])
        kl.append(out["kl"].mean(1))
        nll.append(out["nll"].mean(1))
    power_keys = np.array([float(r.mean()) for r in rej])
    kl_keys = np.array([float(k.mean()) for k in kl])
    rej, scored = torch.cat(rej), torch.cat(scored)
    return {"gamma": gamma, "delta": float(delta), "green": float(torch.cat(green).sum() / scored.sum()),
            "power": float(rej.mean()), "power_se": float(rej.std() / math.sqrt(rej.numel())),
            "kl": float(torch.cat(kl).mean()), "dnll": float(torch.cat(nll).mean()) - nll_null,
            "T_eff_wm": float(scored.mean()), "power_keys": power_keys, "kl_keys": kl_keys}


def evaluate_grid(teacher: HMMTeacher, prof: dict, cfg, gen: torch.Generator) -> pd.DataFrame:
    """Empirical and predicted (green fraction, KL, power by Eq. 3.4c') on the (gamma, delta) grid (Algorithm C's
    data); ``power_at_green`` is the power (3.4c') at the *measured* green fraction (the power model alone)."""
    rows = []
    for gamma in cfg.gammas:
        for delta in cfg.deltas:
            emp = evaluate_point(teacher, gamma, delta, cfg, gen, prof["nll_null"])
            pr = predict(prof["cal"], gamma, delta, cfg.alpha)
            at_green = power_mixture(emp["green"], pr["gamma_eff"], prof["cal"].counts, cfg.alpha)
            rows.append({**emp, "green_pred": pr["mu1"], "kl_pred": pr["kl_forward"], "power_pred": pr["power_mixture"],
                         "power_at_green": at_green})
    return pd.DataFrame(rows)


def selection_study(teacher: HMMTeacher, prof: dict, cfg, gen: torch.Generator) -> dict:
    """Algorithm A per gamma (calibrated, the exact power averaged over the scored counts of the
    calibration text, Eq. 3.4c'), its controls (the normal power model (3.4b) at ``T_eff``; the raw
    length ``T`` instead of the de-duplicated counts; the uncalibrated high-entropy theory) and the
    defaults, each generated and measured. ``power_pred`` is the power under the rule's own model."""
    cal = prof["cal"]
    kw = dict(gammas=cfg.gammas, alpha=cfg.alpha, target_power=cfg.target_power)
    sel = select_min_distortion(cal, power_model="mixture", **kw)
    nrm = select_min_distortion(cal, power_model="normal", **kw)
    raw = select_min_distortion(cal, T=float(cfg.T), power_model="mixture", **kw)
    unc = select_uncalibrated(cal.n_vocab, cal.T_eff, **kw)
    rows = []
    for name, res in (("algorithm A", sel), ("A, normal power", nrm), ("A with raw T", raw), ("uncalibrated", unc)):
        for r in res["per_gamma"]:
            if not r["feasible"]:
                continue
            emp = evaluate_point(teacher, r["gamma"], r["delta"], cfg, gen, prof["nll_null"])
            rows.append({"rule": name, **emp, "power_pred": r["power_pred"], "kl_pred": r["kl_forward"],
                         "chosen": r["gamma"] == res["gamma"]})
    for name, (g, d) in DEFAULTS.items():
        pr = predict(cal, g, d, cfg.alpha)
        emp = evaluate_point(teacher, g, d, cfg, gen, prof["nll_null"])
        rows.append({"rule": name, **emp, "power_pred": pr["power_mixture"], "kl_pred": pr["kl_forward"],
                     "chosen": True})
    return {"table": pd.DataFrame(rows), "selection": sel, "normal": nrm, "raw": raw, "uncalibrated": unc}


def seeded_selection(teacher: HMMTeacher, cfg, seeds, default=None) -> pd.DataFrame:
    """Algorithm A's chosen point on independent seeds. Seed ``s`` draws a fresh calibration (null and
    calibration text from a generator seeded by ``s`` alone), runs Algorithm A with the power (3.4c')
    and, as the control, with the normal power (3.4b), and generates ``cfg.n_seq_seed`` sequences at
    each chosen point under watermark key ``cfg.key + s``. One row per (seed, rule).

    ``default``: a ``(gamma, delta)`` point; then each seed also runs Algorithm A with the default's
    *predicted* power (3.4c') as the target (rule ``"A at the default's predicted power"``, chosen from
    calibration data only) and generates ``cfg.n_seq_wm // cfg.n_keys`` sequences there and at the
    default (rule ``"default"``), for the equal-power comparison without an oracle."""
    rows = []
    kw = dict(gammas=cfg.gammas, alpha=cfg.alpha)
    for s in seeds:
        gen = torch.Generator().manual_seed(int(s))
        prof = profile(teacher, cfg, gen)
        runs = [("algorithm A", "mixture", cfg.target_power, cfg.n_seq_seed),
                ("A, normal power", "normal", cfg.target_power, cfg.n_seq_seed)]
        if default is not None:
            p_def = predict(prof["cal"], default[0], default[1], cfg.alpha)["power_mixture"]
            runs.append(("A at the default's predicted power", "mixture", min(p_def, 1 - 1e-9),
                         max(1, cfg.n_seq_wm // cfg.n_keys)))
        for rule, model, target, n in runs:
            r = select_min_distortion(prof["cal"], power_model=model, target_power=target, **kw)
            emp = evaluate_point(teacher, r["gamma"], r["delta"], cfg, gen, prof["nll_null"], n_seq=n, keys=[int(s)])
            rows.append({"seed": int(s), "rule": rule, "gamma": r["gamma"], "delta": r["delta"],
                         "power_pred": r["power_pred"], "power_mixture": r["power_mixture"], "power": emp["power"],
                         "kl_pred": r["kl_forward"], "kl": emp["kl"]})
        if default is not None:
            pr = predict(prof["cal"], default[0], default[1], cfg.alpha)
            emp = evaluate_point(teacher, default[0], default[1], cfg, gen, prof["nll_null"], n_seq=n, keys=[int(s)])
            rows.append({"seed": int(s), "rule": "default", "gamma": default[0], "delta": float(default[1]),
                         "power_pred": pr["power_mixture"], "power_mixture": pr["power_mixture"],
                         "power": emp["power"], "kl_pred": pr["kl_forward"], "kl": emp["kl"]})
    return pd.DataFrame(rows)


def high_entropy_limit(cal, cfg, power_model: str = "mixture") -> pd.DataFrame:
    """Algorithm A's per-gamma points under the high-entropy theory (``mu_max``, ``D_max``) with the power
    model ``power_model``; ``"mixture"`` uses the calibration's scored counts (3.4c'), the same power as the
    calibrated Algorithm A, so that the two differ only in the entropy profile. Predictions only."""
    res = select_uncalibrated(cal.n_vocab, cal.T_eff, gammas=cfg.gammas, alpha=cfg.alpha,
                              target_power=cfg.target_power, power_model=power_model, counts=cal.counts)
    return pd.DataFrame([{"gamma": r["gamma"], "delta": r["delta"], "kl_pred": r.get("kl_forward", float("nan"))}
                         for r in res["per_gamma"]])


def frontier_kl(kl, power, at: float) -> float:
    """KL of the empirical frontier (Algorithm C's non-dominated points) at power ``at``, linearly
    interpolated between neighbouring frontier points; the cheapest point's KL below its power;
    ``nan`` above the largest power on the frontier."""
    kl, power = np.asarray(kl, dtype=np.float64), np.asarray(power, dtype=np.float64)
    keep = pareto_mask(kl, power)
    p, d = power[keep], kl[keep]
    order = np.lexsort((d, p))
    p, d = p[order], d[order]
    first = np.r_[True, p[1:] != p[:-1]]
    p, d = p[first], d[first]
    if at > p[-1]:
        return float("nan")
    return float(np.interp(at, p, d))


def equal_power(grid: pd.DataFrame, point=(0.25, 2.0)) -> dict:
    """Per watermark key (seed): the KL and power of the grid point ``point`` (a default) and the
    empirical frontier's KL at that same power, from that key's sequences only."""
    row = grid[(grid.gamma == point[0]) & (grid.delta == point[1])]
    if len(row) != 1:
        raise ValueError(f"point: {point} is not on the (gamma, delta) grid")
    p_def, kl_def = row.power_keys.iloc[0], row.kl_keys.iloc[0]
    kls, pows = np.stack(grid.kl_keys.to_list()), np.stack(grid.power_keys.to_list())
    front = np.array([frontier_kl(kls[:, k], pows[:, k], p_def[k]) for k in range(len(p_def))])
    return {"power": p_def, "kl_default": kl_def, "kl_frontier": front}


def steering_control(teacher: HMMTeacher, prof: dict, gamma, delta, cfg, gen: torch.Generator) -> dict:
    """Whether the KL shortfall of the low-entropy teacher comes from *where* watermarked text goes or
    from the key's lists at those places. Generates watermarked text at ``(gamma, delta)`` (keys as in
    :func:`evaluate_point`), keeps the unwatermarked distributions ``p_t`` of the states it visits, and
    predicts the KL (7) from them under key-independent random masks (``kl_pred_visited``), beside the
    null-calibrated prediction and the measured KL. ``P_key`` / ``P_random``: mean green mass of the
    visited ``p_t`` under the key's list of the previous token / under random lists; ``kl_key``: the
    closed form (3) at ``P_key``, position by position (it equals the measured KL: an identity)."""
    per_key = max(1, cfg.n_seq_wm // cfg.n_keys)
    probs, kl, mass = [], [], []
    for i in range(cfg.n_keys):
        gm = green_matrix(teacher.vocab_size, gamma, cfg.key + i)
        out = teacher.generate(per_key, cfg.T, gen, green_mat=gm, delta=delta, return_probs=True)
        prev = torch.cat([torch.full_like(out["tokens"][:, :1], teacher.bos), out["tokens"][:, :-1]], 1)
        p = out["probs"].double()
        probs.append(p.reshape(-1, teacher.vocab_size))
        mass.append((p * gm.double()[prev]).sum(-1).reshape(-1))
        kl.append(out["kl"].reshape(-1))
    p, mass = torch.cat(probs), torch.cat(mass).clamp(0.0, 1.0)
    p = p / p.sum(1, keepdim=True)
    idx = torch.randperm(p.shape[0], generator=gen)[: cfg.n_cal]
    visited = calibrate(p[idx].float(), prof["cal"].T_eff, n_masks=cfg.n_masks, seed=cfg.seed)
    return {"gamma": gamma, "delta": float(delta),
            "kl_pred_null": predict(prof["cal"], gamma, delta, cfg.alpha)["kl_forward"],
            "kl_pred_visited": predict(visited, gamma, delta, cfg.alpha)["kl_forward"],
            "kl": float(torch.cat(kl).mean()), "kl_key": float(kl_closed_form(mass, delta).mean()),
            "P_key": float(mass.mean()),
            "P_random": float(visited.green_mass(gamma).mean())}


def frontier_excess(grid: pd.DataFrame, power: float, kl: float) -> float:
    """Relative KL excess of a point over the empirical frontier at equal-or-higher power (<= 0: not dominated)."""
    better = grid[grid["power"] >= power]
    if better.empty:
        return 0.0
    return float(kl / better["kl"].min() - 1.0)
