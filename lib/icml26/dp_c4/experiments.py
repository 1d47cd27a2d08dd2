"""Runners the dp-c4 notebooks call. Every runner batches its runs (configurations x seeds) into one
call of :func:`~.method.dp_c4` / :func:`~.baselines.dp_sgd`, so a whole grid is one tensor program."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import torch

from .accounting import allocate_sigmas, calibrate_sigma, check_delta, check_eps, epsilon
from .baselines import dp_sgd
from .method import StagedSchedule, dp_c4, geometric_thresholds
from .problems import FiniteSumProblem, _check_int, check_device, heavy_tailed_logistic


def clipped_fixed_points(problem: FiniteSumProblem, x_star, C_grid, T: int = 3000, lr: float = 0.5) -> pd.DataFrame:
    """Noiseless clipped GD run to its fixed point :math:`x_C` for every C (one batched call):
    distance to :math:`x^\\star`, clipped fraction and residual :math:`\\|\\frac1n\\sum\\operatorname{clip}\\|`."""
    C = torch.as_tensor(list(C_grid), dtype=torch.float64)
    tr = dp_sgd(problem, T, lr, C, 0.0, x_star=x_star, log_every=T)
    G = problem.per_sample_grads(tr.x)
    from .method import clip_rows
    resid = clip_rows(G, C[:, None].to(G)).mean(1).norm(dim=-1)
    return pd.DataFrame({"C": C.numpy(), "dist": tr.dist[:, -1].numpy(), "clip_frac": tr.clip_frac[:, -1].numpy(),
                         "residual": resid.cpu().numpy()})


def noiseless_race(problem: FiniteSumProblem, x_star, C_grid, T: int, lr: float, log_every: int = 10) -> dict:
    """Clipped GD vs noiseless DP-C4 at the same fixed thresholds (full batch): their traces."""
    C = torch.as_tensor(list(C_grid), dtype=torch.float64)
    gd = dp_sgd(problem, T, lr, C, 0.0, x_star=x_star, log_every=log_every)
    sch = StagedSchedule(C[:, None], torch.zeros(len(C), 1), T)
    c4 = dp_c4(problem, sch, lr, noise=False, x_star=x_star, log_every=log_every)
    return {"C": C.numpy(), "clipped GD": gd, "DP-C4": c4}


def decay_race(problem: FiniteSumProblem, x_star, C0: float, rhos, T: int, lr: float, log_every: int = 10):
    """Noiseless DP-C4 with per-step thresholds :math:`C_t=C_0\\rho^t` for several rho (full batch)."""
    th = torch.stack([geometric_thresholds(C0, float(r), T) for r in rhos])
    sch = StagedSchedule(th, torch.zeros_like(th), 1)
    return dp_c4(problem, sch, lr, noise=False, x_star=x_star, log_every=log_every)


def _summ(trace, test, groups, seeds):
    """Per-configuration mean / sd over seeds of final distance (NaN without x*), loss and test accuracy."""
    dist = trace.dist[:, -1].reshape(groups, seeds) if trace.dist is not None else \
        torch.full((groups, seeds), float("nan"), dtype=torch.float64)
    loss = trace.loss[:, -1].reshape(groups, seeds)
    out = {"dist": dist.mean(1).numpy(), "dist_sd": dist.std(1, unbiased=seeds > 1).numpy() if seeds > 1
           else np.zeros(groups), "loss": loss.mean(1).numpy()}
    if test is not None:
        out["acc"] = test.accuracy(trace.x).reshape(groups, seeds).mean(1).cpu().numpy()
    return out


def equal_privacy(problem: FiniteSumProblem, x_star, eps_list, delta: float, q: float, T: int, K: int, lr: float,
                  C_grid, C0_grid, rho_grid, seeds: int, seed: int = 0, shapes=("sqrt",), backend: str = "rdp",
                  log_every: int = 10, test: FiniteSumProblem | None = None, device=None):
    """DP-SGD (best of ``C_grid``) against DP-C4 (grid ``C0_grid x rho_grid x shapes``) at the same
    (eps, delta), q, T and accountant. ``rho`` is the decay *per stage* of K stages of T/K steps
    (K = T: per-step thresholds); an empty ``C_grid`` runs DP-C4 only. Returns ``(table, curves)``: one row per configuration (mean over
    ``seeds``), and the distance curves ``(seeds, n_log)`` per row index (the loss curves when
    ``x_star`` is None, e.g. the non-convex MLP, whose runs start from ``problem.init(seeds, seed)``)."""
    T, K, seeds = _check_int("T", T), _check_int("K", K), _check_int("seeds", seeds)
    if T % K:
        raise ValueError(f"K must divide T, got T={T}, K={K}")
    delta = check_delta(delta)
    m = T // K
    rows, curves = [], {}
    check_device(device)
    gen = torch.Generator(device=device or "cpu").manual_seed(int(seed))
    x0 = problem.init(seeds, seed=int(seed)) if hasattr(problem, "init") else None

    def start(groups):
        return None if x0 is None else x0.repeat(groups, 1)

    def curve(tr, j):
        return (tr.dist if tr.dist is not None else tr.loss)[j * seeds:(j + 1) * seeds].numpy()

    for eps in eps_list:
        eps = check_eps(eps)
        C = torch.as_tensor(list(C_grid), dtype=torch.float64)
        if len(C) == 0:                           # an empty C_grid runs DP-C4 only
            sigma = None
        else:
            sigma = calibrate_sigma(T, q, eps, delta, backend)
        tr = None if sigma is None else dp_sgd(problem, T, lr, C.repeat_interleave(seeds), sigma, q, gen,
                                               x0=start(len(C)), x_star=x_star, log_every=log_every)
        s = _summ(tr, test, len(C), seeds) if tr is not None else {}
        for j, c in enumerate(C.tolist()):
            curves[len(rows)] = curve(tr, j)
            rows.append(dict(method="DP-SGD" if q < 1 else "DP-GD", eps=eps, C0=c, rho=1.0, shape="-",
                             sigma_first=sigma, sigma_last=sigma, std_first=sigma * c, std_last=sigma * c,
                             **{k: v[j] for k, v in s.items()}))
        for shape in shapes:                      # one batched call per allocation shape
            configs = list(itertools.product(C0_grid, rho_grid))
            th, sg = [], []
            for C0, rho in configs:
                thr = geometric_thresholds(float(C0), float(rho), K).numpy()
                th.append(thr)
                sg.append(allocate_sigmas(thr, m, q, eps, delta, shape=shape, backend=backend))
            th_t = torch.tensor(np.repeat(np.stack(th), seeds, 0))
            sg_t = torch.tensor(np.repeat(np.stack(sg), seeds, 0))
            tr = dp_c4(problem, StagedSchedule(th_t, sg_t, m), lr, q, gen, x0=start(len(configs)), x_star=x_star,
                       log_every=log_every)
            s = _summ(tr, test, len(configs), seeds)
            for j, (C0, rho) in enumerate(configs):
                curves[len(rows)] = curve(tr, j)
                rows.append(dict(method="DP-C4", eps=eps, C0=float(C0), rho=float(rho), shape=shape,
                                 sigma_first=sg[j][0], sigma_last=sg[j][-1], std_first=sg[j][0] * th[j][0],
                                 std_last=sg[j][-1] * th[j][-1], **{k: v[j] for k, v in s.items()}))
    table = pd.DataFrame(rows)
    table["steps"] = [tr.steps.numpy()] * len(table)
    return table, curves


def best_of_grid(table: pd.DataFrame, by=("method", "eps", "shape"), metric: str = "dist") -> pd.DataFrame:
    """The configuration with the smallest seed-averaged ``metric`` (final distance to x*, or the final
    training loss for problems without x*) per group."""
    idx = table.groupby(list(by))[metric].idxmin()
    return table.loc[idx.values].drop(columns=["steps"]).reset_index()


def evaluate(problem: FiniteSumProblem, x_star, configs: pd.DataFrame, delta: float, q: float, T: int, K: int,
             lr: float, seeds: int, seed: int, backend: str = "rdp", log_every: int = 10,
             test: FiniteSumProblem | None = None, device=None, drop_tilt: bool = False):
    """Re-run chosen configurations (rows with ``method, eps, C0, rho, shape``, e.g. from
    :func:`best_of_grid`) on ``seeds`` fresh seeds, all in one batched call per method: selection and
    evaluation use different seeds, so the reported numbers carry no winner's-curse bias.

    Returns ``(runs, curves)``: one row per (configuration, seed) with final distance (NaN without x*),
    loss and test accuracy, and per configuration index the ``(seeds, n_log)`` distance (or loss) curves.
    ``drop_tilt`` (DP-C4 rows only) is the non-private diagnostic of :func:`~.method.dp_c4`."""
    seeds, T, K = _check_int("seeds", seeds), _check_int("T", T), _check_int("K", K)
    if T % K:
        raise ValueError(f"K must divide T, got T={T}, K={K}")
    delta, m = check_delta(delta), T // K
    check_device(device)
    gen = torch.Generator(device=device or "cpu").manual_seed(int(seed))
    x0 = problem.init(seeds, seed=int(seed)) if hasattr(problem, "init") else None
    cfg = configs.reset_index(drop=True)
    base = cfg["method"].isin(["DP-SGD", "DP-GD"])
    out, curves = [], {}
    for is_base, part in ((True, cfg[base]), (False, cfg[~base])):
        if len(part) == 0:
            continue
        if is_base:
            C = torch.tensor(np.repeat(part["C0"].to_numpy(float), seeds))
            sig = torch.tensor(np.repeat([calibrate_sigma(T, q, float(e), delta, backend) for e in part["eps"]], seeds))
            tr = dp_sgd(problem, T, lr, C, sig, q, gen, x0=None if x0 is None else x0.repeat(len(part), 1),
                        x_star=x_star, log_every=log_every)
        else:
            th = [geometric_thresholds(float(r["C0"]), float(r["rho"]), K).numpy() for _, r in part.iterrows()]
            sg = [allocate_sigmas(t, m, q, float(r["eps"]), delta, shape=r["shape"], backend=backend)
                  for t, (_, r) in zip(th, part.iterrows())]
            sch = StagedSchedule(torch.tensor(np.repeat(np.stack(th), seeds, 0)),
                                 torch.tensor(np.repeat(np.stack(sg), seeds, 0)), m)
            tr = dp_c4(problem, sch, lr, q, gen, x0=None if x0 is None else x0.repeat(len(part), 1),
                       x_star=x_star, log_every=log_every, drop_tilt=drop_tilt)
        acc = test.accuracy(tr.x).cpu().numpy() if test is not None else np.full(len(tr.x), np.nan)
        dist = tr.dist[:, -1].numpy() if tr.dist is not None else np.full(len(tr.x), np.nan)
        for j, (i, r) in enumerate(part.iterrows()):
            sl = slice(j * seeds, (j + 1) * seeds)
            curves[i] = (tr.dist if tr.dist is not None else tr.loss)[sl].numpy()
            for s_ in range(seeds):
                out.append(dict(config=i, method=r["method"], eps=float(r["eps"]), C0=float(r["C0"]),
                                rho=float(r["rho"]), shape=r["shape"], seed=s_, dist=dist[sl][s_],
                                loss=float(tr.loss[sl][s_, -1]), acc=acc[sl][s_]))
    runs = pd.DataFrame(out)
    runs.attrs["steps"] = tr.steps.tolist()          # a list: pandas compares attrs when concatenating
    return runs, curves


def bootstrap_ratio(a, b, n_boot: int = 2000, seed: int = 0, level: float = 0.9) -> tuple[float, float, float]:
    """mean(a) / mean(b) and a percentile bootstrap interval (seeds resampled independently in a and b)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.ndim != 1 or b.ndim != 1 or a.size == 0 or b.size == 0:
        raise ValueError("a and b must be non-empty 1-D sequences of per-seed values")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))) or b.mean() == 0:
        raise ValueError("a and b must be finite, with mean(b) != 0")
    n_boot = _check_int("n_boot", n_boot)
    rng = np.random.default_rng(seed)
    ia, ib = rng.integers(0, len(a), (n_boot, len(a))), rng.integers(0, len(b), (n_boot, len(b)))
    r = a[ia].mean(1) / b[ib].mean(1)
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2])
    return float(a.mean() / b.mean()), float(lo), float(hi)


def tilt_vs_n(n_list, d: int, lam: float, eps: float, delta: float, T: int, lr: float, C: float, C0: float,
              rho: float, seeds: int, seed: int = 0, device=None) -> pd.DataFrame:
    """Spec T4: final distance to x* against the data-set size n at fixed (eps, delta), full batch (GDP),
    for DP-GD (clipping norm ``C``) and DP-C4 (per-step thresholds :math:`C_0\rho^t`, sqrt allocation),
    with the same hyperparameters for every n. Also the predicted size of DP-C4's tilt,
    :math:`\\sqrt{\\mathbb E\\|\\nabla^2F(x^\\star)^{-1}e_\\infty\\|^2}` with
    :math:`\\operatorname{Cov}e_\\infty=\\frac1{n^2}\\sum_t\\sigma_t^2C_t^2I`. One row per (n, method, seed)."""
    seeds, T = _check_int("seeds", seeds), _check_int("T", T)
    check_device(device)
    thr = geometric_thresholds(C0, rho, T)
    sg = allocate_sigmas(thr.numpy(), 1, 1.0, eps, delta, backend="gdp")
    sig = calibrate_sigma(T, 1.0, eps, delta, backend="gdp")
    acc_var = float(np.sum(sg ** 2 * thr.numpy() ** 2))
    rows = []
    for k, n in enumerate(n_list):
        n = _check_int("n", n, 2)
        train, _ = heavy_tailed_logistic(n, d, lam, n_test=2, seed=seed + k, device=device)
        xs = train.solve_exact()
        Hinv = torch.linalg.inv(train.hessian(xs))
        pred = math.sqrt(acc_var / n ** 2 * float((Hinv ** 2).sum()))
        gen = torch.Generator(device=device or "cpu").manual_seed(int(seed) + 100 * k)
        gd = dp_sgd(train, T, lr, torch.full((seeds,), float(C), dtype=torch.float64), sig, 1.0, gen, x_star=xs,
                    log_every=T)
        c4 = dp_c4(train, StagedSchedule(thr.repeat(seeds, 1), torch.tensor(sg).repeat(seeds, 1), 1), lr, 1.0,
                   gen, x_star=xs, log_every=T)
        for name, tr in (("DP-GD", gd), ("DP-C4", c4)):
            for s_ in range(seeds):
                rows.append(dict(n=n, method=name, seed=s_, dist=float(tr.dist[s_, -1]), predicted_tilt=pred))
    return pd.DataFrame(rows)


def loglog_slope(df: pd.DataFrame, n_boot: int = 2000, seed: int = 0, level: float = 0.9):
    """Least-squares slope of log(mean dist) on log n, with a bootstrap interval over seeds."""
    ns = np.sort(df["n"].unique())
    D = np.stack([df[df["n"] == n].sort_values("seed")["dist"].to_numpy() for n in ns])   # (N, S)
    x = np.log(ns)

    def slope(M):
        return np.polyfit(x, np.log(M.mean(-1)), 1)[0]

    rng = np.random.default_rng(seed)
    boots = [slope(D[:, rng.integers(0, D.shape[1], D.shape[1])]) for _ in range(n_boot)]
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return float(slope(D)), float(lo), float(hi)


def accountant_table(eps_list, delta: float, q: float, T: int, K: int, C0: float, rho: float,
                     pld: bool = True) -> pd.DataFrame:
    """Calibrate DP-SGD and DP-C4 with the internal RDP accountant, then re-account both with
    Google's ``dp_accounting`` (RDP, same orders) and, if ``pld``, its PLD accountant."""
    rows = []
    m = T // K
    for eps in eps_list:
        sig = calibrate_sigma(T, q, eps, delta)
        sg = allocate_sigmas(geometric_thresholds(C0, rho, K).numpy(), m, q, eps, delta)
        for name, s, mm in (("DP-SGD", np.array([sig]), T), ("DP-C4", sg, m)):
            row = dict(method=name, target=eps, rdp=epsilon(s, mm, q, delta, "rdp"),
                       dp_accounting_rdp=epsilon(s, mm, q, delta, "dp_accounting_rdp"))
            if pld:
                row["pld"] = epsilon(s, mm, q, delta, "pld")
            rows.append(row)
    return pd.DataFrame(rows)


def eps_vs_stages(K_max: int, m: int, delta: float, sigma: float, C0: float, rho: float) -> pd.DataFrame:
    """Full batch (GDP): epsilon after k stages for DP-GD at a fixed sigma and for DP-C4 with
    :math:`\\sigma_k=s\\,C_k^{-1/2}` and the same first-stage noise std, k = 1..K_max."""
    K_max = _check_int("K_max", K_max)
    C = geometric_thresholds(C0, rho, K_max).numpy()
    s = sigma * math.sqrt(C[0])           # DP-C4's first-stage multiplier equals DP-GD's
    sg = s * C ** -0.5
    rows = []
    for k in range(1, K_max + 1):
        rows.append(dict(stages=k, dpgd=epsilon(np.full(k, sigma), m, 1.0, delta, "gdp"),
                         dpc4=epsilon(sg[:k], m, 1.0, delta, "gdp")))
    return pd.DataFrame(rows)


def sensitivity_check(d: int, n: int = 50, trials: int = 100, seed: int = 1) -> tuple[float, float]:
    """One DP-C4 release with and without example 0, under the same noise draw, for ``trials`` random
    gradients, anchors and thresholds. Returns (max |S_with - S_without - delta_0|, max ||S_with - S_without|| / C)."""
    from .method import dp_c4_step

    d, n, trials = _check_int("d", d), _check_int("n", n, 2), _check_int("trials", trials)
    g = torch.Generator().manual_seed(int(seed))
    gaps, ratios = [], []
    for _ in range(trials):
        G = 4 * torch.randn(1, n, d, generator=g, dtype=torch.float64)
        h = 4 * torch.randn(1, n, d, generator=g, dtype=torch.float64)
        C = torch.rand(1, generator=g, dtype=torch.float64) + 0.1
        z = torch.randn(1, d, generator=g, dtype=torch.float64)
        H, mask = torch.zeros(1, d, dtype=torch.float64), torch.ones(1, n, dtype=torch.float64)
        *_, S_in, Delta = dp_c4_step(G, h, H, mask, C, z, 1.0)
        *_, S_out, _ = dp_c4_step(G[:, 1:], h[:, 1:], H, mask[:, 1:], C, z, 1.0)
        gaps.append(float((S_in - S_out - Delta[0, 0]).abs().max()))
        ratios.append(float((S_in - S_out).norm() / C))
    return max(gaps), max(ratios)


def accountant_comparison(eps_list, delta: float, q: float, T: int, K: int, C0: float, rho: float, T_full: int,
                          C0_full: float, rho_full: float, pld: bool = True, prv: bool = True) -> pd.DataFrame:
    """One row per (configuration, target eps): DP-SGD and staged DP-C4 at Poisson rate ``q`` (calibrated
    with the internal RDP accountant), DP-GD and per-step DP-C4 with full batches (calibrated exactly with
    GDP), each re-accounted by every backend: internal RDP, ``dp_accounting`` RDP and PLD, Opacus RDP and
    PRV, and GDP where it applies (q = 1). Opacus's PRV is skipped for the 200-event per-step schedule (it
    is slow there) and GDP for q < 1 (not exact); both are NaN."""
    import warnings

    rows = []
    m = T // K
    for eps in eps_list:
        thr = geometric_thresholds(C0, rho, K).numpy()
        thr_f = geometric_thresholds(C0_full, rho_full, T_full).numpy()
        configs = (("DP-SGD", q, np.array([calibrate_sigma(T, q, eps, delta)]), T),
                   ("DP-C4 (staged)", q, allocate_sigmas(thr, m, q, eps, delta), m),
                   ("DP-GD", 1.0, np.array([calibrate_sigma(T_full, 1.0, eps, delta, "gdp")]), T_full),
                   ("DP-C4 (per step)", 1.0, allocate_sigmas(thr_f, 1, 1.0, eps, delta, backend="gdp"), 1))
        for name, qq, sg, mm in configs:
            row = dict(method=name, q=qq, events=len(sg) * mm, target=eps, sigma_first=sg[0], sigma_last=sg[-1])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for b in ("rdp", "dp_accounting_rdp", "opacus_rdp"):
                    row[b] = epsilon(sg, mm, qq, delta, b)
                row["pld"] = epsilon(sg, mm, qq, delta, "pld") if pld else float("nan")
                row["opacus_prv"] = epsilon(sg, mm, qq, delta, "opacus_prv") if prv and len(sg) <= 50 \
                    else float("nan")
            row["gdp"] = epsilon(sg, mm, qq, delta, "gdp") if qq == 1.0 else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def eps_vs_steps(q: float, T: int, K: int, eps: float, delta: float, C0: float, rho: float, points: int = 8,
                 backends=("rdp", "pld")) -> pd.DataFrame:
    """Epsilon spent after t steps, t on a grid up to 2T, for DP-SGD at the sigma calibrated to (eps, delta)
    at T steps and for staged DP-C4 (stages of T/K steps, thresholds C0 rho^k continued past T, the sqrt
    allocation calibrated at T), with each accountant in ``backends``."""
    m = T // K
    sig = calibrate_sigma(T, q, eps, delta)
    sg = allocate_sigmas(geometric_thresholds(C0, rho, K).numpy(), m, q, eps, delta)
    s = sg[0] * C0 ** 0.5
    sg2 = s * geometric_thresholds(C0, rho, 2 * K).numpy() ** -0.5
    rows = []
    for k in np.unique(np.linspace(1, 2 * K, points).round().astype(int)):
        for b in backends:
            rows.append(dict(steps=int(k * m), backend=b, dpsgd=epsilon(np.array([sig]), int(k * m), q, delta, b),
                             dpc4=epsilon(sg2[:k], m, q, delta, b)))
    return pd.DataFrame(rows)
