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


def _check_schedule(seeds, T, K, delta):
    """Validated ``(seeds, T, K, delta, m)`` of a staged run: positive integers, ``K`` dividing ``T``
    (``m = T / K`` steps per stage), ``delta`` in (0, 1)."""
    seeds, T, K = _check_int("seeds", seeds), _check_int("T", T), _check_int("K", K)
    if T % K:
        raise ValueError(f"K must divide T, got T={T}, K={K}")
    return seeds, T, K, check_delta(delta), T // K


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
    seeds, T, K, delta, m = _check_schedule(seeds, T, K, delta)
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
    seeds, T, K, delta, m = _check_schedule(seeds, T, K, delta)
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
              rho: float, seeds: int, seed: int = 0, device=None, methods=("DP-GD", "DP-C4")) -> pd.DataFrame:
    """Spec T4: final distance to x* against the data-set size n at fixed (eps, delta), full batch (GDP),
    for DP-GD (clipping norm ``C``) and DP-C4 (per-step thresholds :math:`C_0\rho^t`, sqrt allocation),
    with the same hyperparameters for every n (``methods`` picks a subset). Also the predicted size of DP-C4's tilt,
    :math:`\\sqrt{\\mathbb E\\|\\nabla^2F(x^\\star)^{-1}e_\\infty\\|^2}` with
    :math:`\\operatorname{Cov}e_\\infty=\\frac1{n^2}\\sum_t\\sigma_t^2C_t^2I`. One row per (n, method, seed)."""
    seeds, T = _check_int("seeds", seeds), _check_int("T", T)
    check_device(device)
    methods = tuple(methods)
    if not methods or any(k not in ("DP-GD", "DP-C4") for k in methods):
        raise ValueError(f"methods must be a non-empty subset of ('DP-GD', 'DP-C4'), got {methods}")
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
        traces = {}
        if "DP-GD" in methods:
            traces["DP-GD"] = dp_sgd(train, T, lr, torch.full((seeds,), float(C), dtype=torch.float64), sig, 1.0,
                                     gen, x_star=xs, log_every=T)
        if "DP-C4" in methods:
            traces["DP-C4"] = dp_c4(train, StagedSchedule(thr.repeat(seeds, 1), torch.tensor(sg).repeat(seeds, 1), 1),
                                    lr, 1.0, gen, x_star=xs, log_every=T)
        for name, tr in traces.items():
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


# -- the comparison protocol (issue 37): validated grids, paired seeds, costs, a no-treatment row ---------
KINDS = ("sgd", "c4", "c4-no-anchors")


def run_configs(problem: FiniteSumProblem, x_star, kind: str, configs, q: float, T: int, K: int, delta: float,
                seeds: int, seed: int, backend: str = "rdp", tail: int = 0, log_every: int = 10, device=None) -> dict:
    """Run every configuration of one method on ``seeds`` seeds in **one batched call**.

    ``kind``: ``"sgd"`` (DP-SGD / DP-GD; a configuration holds ``eps, lr, C``), ``"c4"`` (DP-C4;
    ``eps, lr, C0, rho`` and optionally ``shape``, default ``"sqrt"``) or ``"c4-no-anchors"`` (DP-C4's
    thresholds and allocation with the anchors held at zero: DP-SGD on DP-C4's schedule). Every run is
    calibrated to its ``eps`` at ``delta`` with ``backend``. Runs are configuration-major and share
    ``seeds`` random streams drawn from a generator seeded by ``seed``: every configuration, and every
    call with the same ``(seed, seeds)``, sees the same Poisson batches and standard-normal noise draws
    per seed (paired seeds; the data set and the initial point x0 = 0 are the same for all).

    Returns arrays of shape ``(configs, seeds)``: ``dist`` (final iterate), ``dist_avg`` (mean of the
    last ``tail`` iterates; NaN when ``tail = 0``), ``clip_last`` (share of clipped batch rows in the last
    stage), and per configuration ``sigma_first, sigma_last, std_first, std_last``; plus the distance
    curves ``(configs, seeds, logs)`` and the logged ``steps``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    configs = [dict(c) for c in configs]
    if not configs:
        raise ValueError("configs must hold at least one configuration")
    need = ("eps", "lr", "C") if kind == "sgd" else ("eps", "lr", "C0", "rho")
    for c in configs:
        missing = [k for k in need if k not in c]
        if missing:
            raise ValueError(f"configs: {c} lacks {missing} (kind {kind!r} needs {need})")
    seeds, T, K, delta, m = _check_schedule(seeds, T, K, delta)
    check_device(device)
    gen = torch.Generator(device=device or "cpu").manual_seed(int(seed))
    lr = torch.tensor(np.repeat([float(c["lr"]) for c in configs], seeds))
    kw = dict(x_star=x_star, log_every=log_every, streams=seeds, tail=tail)
    if kind == "sgd":
        sig = np.array([calibrate_sigma(T, q, check_eps(c["eps"]), delta, backend) for c in configs])
        C = np.array([float(c["C"]) for c in configs])
        th, sg = C[:, None], sig[:, None]
        tr = dp_sgd(problem, T, lr, torch.tensor(np.repeat(C, seeds)), torch.tensor(np.repeat(sig, seeds)), q, gen,
                    **kw)
    else:
        th = np.stack([geometric_thresholds(float(c["C0"]), float(c["rho"]), K).numpy() for c in configs])
        sg = np.stack([allocate_sigmas(t, m, q, check_eps(c["eps"]), delta, shape=c.get("shape", "sqrt"),
                                       backend=backend) for t, c in zip(th, configs)])
        sch = StagedSchedule(torch.tensor(np.repeat(th, seeds, 0)), torch.tensor(np.repeat(sg, seeds, 0)), m)
        tr = dp_c4(problem, sch, lr, q, gen, anchors=kind == "c4", **kw)
    G = len(configs)
    last = tr.steps >= T - m
    out = {"dist": tr.dist[:, -1].reshape(G, seeds).numpy(),
           "dist_avg": ((tr.x_avg - x_star.to(tr.x_avg)).norm(dim=-1).reshape(G, seeds).cpu().numpy() if tail
                        else np.full((G, seeds), np.nan)),
           "clip_last": tr.clip_frac[:, last].mean(1).reshape(G, seeds).numpy(),
           "sigma_first": sg[:, 0], "sigma_last": sg[:, -1], "std_first": sg[:, 0] * th[:, 0],
           "std_last": sg[:, -1] * th[:, -1], "curves": tr.dist.reshape(G, seeds, -1).numpy(),
           "steps": tr.steps.numpy()}
    return out


def validated(problem: FiniteSumProblem, x_star, kind: str, grid, eps_list, fixed: dict | None = None, *,
              metric="dist", q: float, T: int, K: int, delta: float, seeds: int, seed: int,
              backend: str = "rdp", tail: int = 0, device=None) -> dict:
    """Score every configuration of ``grid`` (a :class:`icml26.core.Grid`) at every ``eps`` on the
    **validation** seeds (streams of ``seed``, disjoint from the test seeds) in one batched call, and
    tune it with :func:`icml26.core.tune`: ``{eps: Tuned}``. The validation score of a configuration is
    its ``metric`` (``"dist"``, final iterate, or ``"dist_avg"``, mean of the last ``tail`` iterates)
    averaged over the validation seeds; a tuple of metrics returns ``{metric: {eps: Tuned}}`` from the
    same runs. ``fixed`` adds constant keys to every configuration (e.g. ``rho=1.0``)."""
    from icml26.core import tune

    fixed = dict(fixed or {})
    metrics = (metric,) if isinstance(metric, str) else tuple(metric)
    if not metrics or any(mt not in ("dist", "dist_avg") for mt in metrics):
        raise ValueError(f"metric must be 'dist', 'dist_avg' or a tuple of them, got {metric!r}")
    if "dist_avg" in metrics and not tail:
        raise ValueError("tail: metric 'dist_avg' needs tail > 0 (the number of iterates averaged)")
    base = grid.configs()
    configs = [dict(c, **fixed, eps=float(e)) for e in eps_list for c in base]
    r = run_configs(problem, x_star, kind, configs, q, T, K, delta, seeds, seed, backend, tail, log_every=T,
                    device=device)
    out = {}
    for mt in metrics:
        score, out[mt] = r[mt].mean(1), {}
        for i, eps in enumerate(eps_list):
            table = {tuple(sorted(c.items())): float(v) for c, v in zip(base, score[i * len(base):(i + 1) * len(base)])}
            out[mt][float(eps)] = tune(f"{kind} at eps={eps:g}", lambda c, t=table: t[tuple(sorted(c.items()))],
                                       grid, progress=False)
    return out[metric] if isinstance(metric, str) else out


def paired_comparisons(problem: FiniteSumProblem, x_star, methods: dict, eps_list, *, q: float, T: int, K: int,
                       delta: float, seeds: int, seed: int, backend: str = "rdp", tail: int = 0,
                       log_every: int = 10, device=None, control: str | None = "zero model (no step)"):
    """Test runs of validated methods on ``seeds`` **test** seeds (streams of ``seed``), one
    :class:`icml26.core.Comparison` per ``eps`` (metric: final distance to x*, budget: optimiser steps).

    ``methods`` maps a row name to a dict with ``kind`` (see :func:`run_configs`), ``tuned``
    (``{eps: Tuned}`` from :func:`validated`), optional ``metric`` (``"dist"`` or ``"dist_avg"``),
    ``fixed`` (keys added to the chosen configuration, e.g. ``rho=1.0`` or ``shape="uniform"``) and, for
    an ablation without its own tuning, ``untuned`` (the reason, e.g. "DP-C4's validated schedule,
    uniform allocation"). Every row runs with the same streams, so seed s has the same Poisson batches
    and noise draws in every row. ``control`` names the no-treatment row: the starting point x0 = 0,
    no step and no privacy spent (cost 0). Returns ``(comparisons, runs)``; ``runs[eps][name]`` holds
    the row's :func:`run_configs` arrays for that eps (curves, clip shares, noise std)."""
    from icml26.core import Comparison

    eps_list = [float(e) for e in eps_list]
    cmps = {e: Comparison("final distance to x*", goal="min", seeds=list(range(seeds)), budget="optimiser steps")
            for e in eps_list}
    runs = {e: {} for e in eps_list}
    for name, spec in methods.items():
        tuned, metric = spec["tuned"], spec.get("metric", "dist")
        configs = [dict(tuned[e].best, **spec.get("fixed", {}), eps=e) for e in eps_list]
        r = run_configs(problem, x_star, spec["kind"], configs, q, T, K, delta, seeds, seed, backend, tail,
                        log_every, device)
        for i, e in enumerate(eps_list):
            runs[e][name] = {k: v[i] for k, v in r.items() if k != "steps"} | {"steps": r["steps"],
                                                                                  "config": configs[i]}
            if spec.get("untuned"):
                cmps[e].add(name, r[metric][i], untuned=spec["untuned"], cost=T)
            else:
                cmps[e].add(name, r[metric][i], tuned=tuned[e], cost=T)
    if control:
        for e in eps_list:
            cmps[e].add(control, zero_model_distance(x_star, seeds), untuned="no step taken: nothing to tune",
                        cost=0, control=True)
    return cmps, runs


def zero_model_distance(x_star, seeds: int) -> np.ndarray:
    """The no-treatment row: the starting point x0 = 0 (no step taken, no privacy spent), per seed."""
    return np.full(_check_int("seeds", seeds), float(torch.as_tensor(x_star).norm()))


def runs_frame(runs: dict, names) -> tuple[pd.DataFrame, dict]:
    """The test runs of :func:`paired_comparisons` for ``names`` as ``(table, curves)`` in the format of
    :func:`~.plots.curves` and :func:`~.plots.noise_std`: one row per (eps, method) with the chosen
    configuration, noise std, mean final distance and share of clipped rows in the last stage."""
    rows, curves = [], {}
    for eps, by_name in runs.items():
        for name in names:
            r = by_name[name]
            c = r["config"]
            curves[len(rows)] = r["curves"]
            rows.append(dict(method=name, eps=float(eps), lr=c["lr"], C0=c.get("C0", c.get("C")),
                             rho=c.get("rho", 1.0), shape=c.get("shape", "sqrt" if "C0" in c else "-"),
                             sigma_first=r["sigma_first"], std_first=r["std_first"], std_last=r["std_last"],
                             dist=float(np.mean(r["dist"])), clip_last=float(np.mean(r["clip_last"])),
                             steps=r["steps"]))
    return pd.DataFrame(rows), curves


def _beyond(axis: str, values: tuple, side: str):
    """One geometric grid step past the ``side`` end of an ordered positive axis; ``rho`` at its upper
    end steps geometrically in ``1 - rho`` (so it stays below 1). None when ``rho`` is already 1."""
    end, nxt = (values[0], values[1]) if side == "lower" else (values[-1], values[-2])
    if axis == "rho" and side == "upper":
        return None if end >= 1.0 else 1.0 - (1.0 - end) ** 2 / (1.0 - nxt)
    return end * end / nxt


def probe_edges(problem: FiniteSumProblem, x_star, kind: str, tuned: dict, fixed: dict | None = None, *,
                metric: str = "dist", tol: float = 0.01, q: float, T: int, K: int, delta: float, seeds: int,
                seed: int, backend: str = "rdp", tail: int = 0, device=None) -> pd.DataFrame:
    """Probe every grid edge of validated methods (``tuned`` = ``{eps: Tuned}`` from :func:`validated`)
    one geometric grid step beyond it, on the **same validation seeds**, all in one batched call. An
    edge is stated (:meth:`icml26.core.Tuned.state_edge`) only if the probe does not beat the chosen
    configuration by more than ``tol`` (relative), with the measured numbers as its reason; otherwise it
    stays unstated and an asserted comparison fails its protocol (extend the grid). ``rho`` at its upper
    end is probed with the constant threshold ``rho = 1`` at most. Returns one row per edge: method, eps,
    axis, side, chosen and probed value, their validation scores and whether the edge was stated."""
    fixed = dict(fixed or {})
    tol = float(tol)
    if not 0 <= tol < 1:
        raise ValueError(f"tol must be in [0, 1), got {tol}")
    todo = []
    for eps, t in tuned.items():
        for axis, side in t.edges.items():
            v = _beyond(axis, t.grid.axes[axis], side)
            todo.append((float(eps), t, axis, side, v))
    probes = [dict(t.best, **fixed, **{axis: v}, eps=eps) for eps, t, axis, side, v in todo if v is not None]
    scores = iter(run_configs(problem, x_star, kind, probes, q, T, K, delta, seeds, seed, backend, tail, log_every=T,
                              device=device)[metric].mean(1) if probes else [])
    rows = []
    for eps, t, axis, side, v in todo:
        best = float(t.best_score)
        if v is None:
            score, reason = float("nan"), f"{axis} = 1 (a constant threshold) is the largest value it can take"
        else:
            score = float(next(scores))
            reason = (f"one grid step beyond the {side} edge, {axis} = {v:.4g}, scores {score:.4g} on the validation "
                      f"seeds against {best:.4g} at {axis} = {t.best[axis]:.4g} (not better by more than {tol:.0%})"
                      if score >= best * (1 - tol) else "")
        if reason:
            t.state_edge(axis, reason)
        rows.append(dict(method=t.method.split(" at ")[0], eps=eps, axis=axis, side=side, chosen=t.best[axis], validation=best, probe=v,
                         probe_validation=score, stated=bool(reason)))
    return pd.DataFrame(rows, columns=["method", "eps", "axis", "side", "chosen", "validation", "probe",
                                       "probe_validation", "stated"])


def comparison_table(cmps: dict, T: int) -> pd.DataFrame:
    """The per-method tables of the comparisons of :func:`paired_comparisons`, one block per eps, with
    the costs of every row: optimiser steps and privacy spent (0 for the no-treatment row)."""
    out = []
    for eps, c in cmps.items():
        f = c.frame()
        control = f["method"].str.endswith("(control)")
        f.insert(0, "eps", float(eps))
        f["privacy spent (eps)"] = np.where(control, 0.0, float(eps))
        f["optimiser steps"] = np.where(control, 0, int(T))
        out.append(f)
    return pd.concat(out, ignore_index=True)
