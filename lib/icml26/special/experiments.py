"""Runners the notebooks call: each returns a DataFrame (and the raw results for figures)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .data import make_digit_domains
from .method import FDILConfig, FDILResult, run_fdil
from .metrics import all_metrics
from .presets import SpecialPreset
from .theory import make_quadratic_tasks, run_quadratic_fdil


def domains_for(p: SpecialPreset, kind: str = "rotations"):
    """The task sequence of a preset: its rotation angles, or the first ``n_mixed`` mixed domains."""
    if kind == "rotations":
        return make_digit_domains("rotations", angles=p.angles)
    return make_digit_domains(kind, n_domains=p.n_mixed)


def base_config(p: SpecialPreset, device: str | None = None, **changes) -> FDILConfig:
    """FDILConfig with the preset's sizes; ``changes`` set the method and its weights."""
    cfg = FDILConfig(n_clients=p.n_clients, clients_per_round=p.clients_per_round,
                     rounds_per_task=p.rounds_per_task, local_epochs=p.local_epochs, lr=p.lr,
                     batch_size=p.batch_size, hidden=p.hidden, alpha=p.alpha, device=device)
    return cfg.replace(**changes)


@dataclass(frozen=True)
class Variant:
    name: str  # label in tables and figures
    family: str  # colour group: FedAvg, FedProx, SPECIAL, SPECIAL-T, Replay, Joint
    changes: tuple  # FDILConfig overrides as (key, value) pairs


def method_grid(p: SpecialPreset, task_lams=None) -> list[Variant]:
    """Spec section 3.3 at equal budgets: FedAvg, FedProx, SPECIAL (round anchor, lam grid),
    SPECIAL-T (task anchor, small lam grid), Replay and Joint."""
    task_lams = p.lams_task if task_lams is None else task_lams
    out = [Variant("FedAvg", "FedAvg", (("method", "fedavg"),)),
           Variant(f"FedProx mu={p.fedprox_mu:g}", "FedProx", (("method", "fedprox"), ("mu", p.fedprox_mu)))]
    out += [Variant(f"SPECIAL lam={lam:g}", "SPECIAL", (("method", "special"), ("lam", lam)))
            for lam in p.lams_round if lam > 0]
    out += [Variant(f"SPECIAL-T lam={lam:g}", "SPECIAL-T",
                    (("method", "special"), ("lam", lam), ("anchor", "task"))) for lam in task_lams]
    out += [Variant("Replay", "Replay", (("method", "replay"), ("replay_per_class", p.replay_per_class))),
            Variant("Joint", "Joint", (("method", "joint"),))]
    return out


def run_variants(domains, p: SpecialPreset, variants: list[Variant], seeds: int | None = None,
                 device: str | None = None, progress: bool = True):
    """Every variant on every seed. Returns (DataFrame of metrics per run, {name: [FDILResult]})."""
    seeds = p.seeds if seeds is None else seeds
    rows, results = [], {}
    jobs = [(v, s) for v in variants for s in range(seeds)]
    for v, s in tqdm(jobs, leave=False, disable=not progress, desc="runs"):
        cfg = base_config(p, device, seed=p.seed + s, **dict(v.changes))
        res = run_fdil(domains, cfg, progress=False)
        results.setdefault(v.name, []).append(res)
        rows.append({"name": v.name, "family": v.family, "seed": s, "lam": cfg.lam if cfg.method == "special" else 0.0,
                     **all_metrics(res.acc_matrix)})
    return pd.DataFrame(rows), results


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over seeds of ACC, FGT, BWT, PLA, in the variants' order."""
    order = list(dict.fromkeys(df["name"]))
    g = df.groupby("name", sort=False)[["ACC", "FGT", "BWT", "PLA"]]
    out = g.mean().join(g.std(ddof=0), rsuffix="_sd").loc[order]
    return out


def mean_round_acc(results: list[FDILResult]) -> np.ndarray:
    """Per-round accuracy on every task, averaged over seeds: (K*T, K)."""
    return np.mean([r.round_acc for r in results], axis=0)


def equivalence_checks(domains, p: SpecialPreset, lam: float = 1.0, device: str | None = "cpu") -> dict:
    """Run the identities of spec section 8 on a full FDIL run (same seeds everywhere).

    Returns the max abs parameter difference of SPECIAL(lam, round) vs FedAvg with server lr
    1/(1+lam), and whether SPECIAL(0), FedProx(0) and SPECIAL-C(0) equal FedAvg bit for bit.
    """
    def final(**changes) -> torch.Tensor:
        return run_fdil(domains, base_config(p, device, **changes), progress=False).final_params

    fedavg = final(method="fedavg")
    special = final(method="special", lam=lam)
    slr = final(method="fedavg", server_lr=1.0 / (1.0 + lam))
    return {
        "slr_max_diff": float((special - slr).abs().max()),
        "special_vs_fedavg_max_diff": float((special - fedavg).abs().max()),
        "lam0_bitwise": bool(torch.equal(final(method="special", lam=0.0), fedavg)),
        "fedprox0_bitwise": bool(torch.equal(final(method="fedprox", mu=0.0), fedavg)),
        "special_c0_bitwise": bool(torch.equal(final(method="special_c", mu=0.0), fedavg)),
    }


def bkt_experiment(p: SpecialPreset, anchor: str = "round", noise: float = 0.5,
                   progress: bool = True) -> pd.DataFrame:
    """True old-task loss increase vs the BKT bound on quadratic FDIL, over the lam grid and seeds."""
    rows = []
    jobs = [(lam, s) for lam in p.quad_lams for s in range(p.quad_seeds)]
    for lam, s in tqdm(jobs, leave=False, disable=not progress, desc="bkt"):
        tasks = make_quadratic_tasks(n_tasks=3, seed=s)
        out = run_quadratic_fdil(tasks, lam, anchor=anchor, rounds=p.quad_rounds, noise=noise, seed=s)
        rows += [{**r, "seed": s} for r in out["records"]]
    return pd.DataFrame(rows)
