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
from .problems import FiniteSumProblem, _check_int


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
    """Per-configuration mean / sd over seeds of final distance, loss and test accuracy."""
    dist = trace.dist[:, -1].reshape(groups, seeds)
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
    ``seeds``), and the distance curves ``(seeds, n_log)`` per row index."""
    T, K, seeds = _check_int("T", T), _check_int("K", K), _check_int("seeds", seeds)
    if T % K:
        raise ValueError(f"K must divide T, got T={T}, K={K}")
    delta = check_delta(delta)
    m = T // K
    rows, curves = [], {}
    gen = torch.Generator(device=device or "cpu").manual_seed(int(seed))
    for eps in eps_list:
        eps = check_eps(eps)
        C = torch.as_tensor(list(C_grid), dtype=torch.float64)
        if len(C) == 0:                           # an empty C_grid runs DP-C4 only
            sigma = None
        else:
            sigma = calibrate_sigma(T, q, eps, delta, backend)
        tr = None if sigma is None else dp_sgd(problem, T, lr, C.repeat_interleave(seeds), sigma, q, gen, x_star=x_star, log_every=log_every)
        s = _summ(tr, test, len(C), seeds) if tr is not None else {}
        for j, c in enumerate(C.tolist()):
            curves[len(rows)] = tr.dist[j * seeds:(j + 1) * seeds].numpy()
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
            tr = dp_c4(problem, StagedSchedule(th_t, sg_t, m), lr, q, gen, x_star=x_star, log_every=log_every)
            s = _summ(tr, test, len(configs), seeds)
            for j, (C0, rho) in enumerate(configs):
                curves[len(rows)] = tr.dist[j * seeds:(j + 1) * seeds].numpy()
                rows.append(dict(method="DP-C4", eps=eps, C0=float(C0), rho=float(rho), shape=shape,
                                 sigma_first=sg[j][0], sigma_last=sg[j][-1], std_first=sg[j][0] * th[j][0],
                                 std_last=sg[j][-1] * th[j][-1], **{k: v[j] for k, v in s.items()}))
    table = pd.DataFrame(rows)
    table["steps"] = [tr.steps.numpy()] * len(table)
    return table, curves


def best_of_grid(table: pd.DataFrame, by=("method", "eps", "shape")) -> pd.DataFrame:
    """The configuration with the smallest seed-averaged final distance per group."""
    idx = table.groupby(list(by))["dist"].idxmin()
    return table.loc[idx.values].drop(columns=["steps"]).reset_index()


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
