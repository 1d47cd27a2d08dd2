"""Runners the notebooks call: each returns a DataFrame (and the raw results for figures)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .data import make_digit_domains
from .method import FDILConfig, FDILResult, run_fdil_many, run_fdil_seeds
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
    """Spec section 3.3 at equal budgets: FedAvg, FedAvg with the local step halved (step-size
    control), FedProx (mu grid), SPECIAL (round anchor, lam grid), SPECIAL-T (task anchor, small
    lam grid), Replay and Joint."""
    task_lams = p.lams_task if task_lams is None else task_lams
    out = [Variant("FedAvg", "FedAvg", (("method", "fedavg"),)),
           Variant("FedAvg lr/2", "FedAvg lr/2", (("method", "fedavg"), ("lr", p.lr / 2)))]
    out += [Variant(f"FedProx mu={mu:g}", "FedProx", (("method", "fedprox"), ("mu", mu))) for mu in p.fedprox_mus]
    out += [Variant(f"SPECIAL lam={lam:g}", "SPECIAL", (("method", "special"), ("lam", lam)))
            for lam in p.lams_round if lam > 0]
    out += [Variant(f"SPECIAL-T lam={lam:g}", "SPECIAL-T",
                    (("method", "special"), ("lam", lam), ("anchor", "task"))) for lam in task_lams]
    out += [Variant("Replay", "Replay", (("method", "replay"), ("replay_per_class", p.replay_per_class))),
            Variant("Joint", "Joint", (("method", "joint"),))]
    return out


def run_variants(domains, p: SpecialPreset, variants: list[Variant], seeds: int | None = None,
                 device: str | None = None, progress: bool = True, log_every: int = 1, max_runs: int = 64,
                 seeds_by_name: dict | None = None):
    """Every variant on every seed. Runs are stacked into batches of :func:`run_fdil_many` (up to
    ``max_runs`` each; joint training, whose shards are K times longer, in batches of its own).

    Returns (DataFrame of metrics per run, {name: [FDILResult]}). ``log_every`` > 1 skips the
    per-round evaluation (the accuracy matrix is always complete). ``seeds_by_name`` overrides the
    number of seeds of single variants.
    """
    seeds = p.seeds if seeds is None else seeds
    n_seeds = {v.name: (seeds_by_name or {}).get(v.name, seeds) for v in variants}
    jobs = [(v, s, base_config(p, device, seed=p.seed + s, **dict(v.changes)))
            for v in variants for s in range(n_seeds[v.name])]
    batches = []
    for joint in (False, True):
        sub = [j for j in jobs if (j[2].method == "joint") == joint]
        batches += [sub[i:i + max_runs] for i in range(0, len(sub), max_runs)]
    out = {}
    for batch in tqdm(batches, leave=False, disable=not progress, desc="batches of runs"):
        res = run_fdil_many(domains, [j[2] for j in batch], log_every=log_every, progress=False)
        out.update({(v.name, s): r for (v, s, _), r in zip(batch, res)})
    rows, results = [], {}
    for v, s, cfg in jobs:
        r = out[(v.name, s)]
        results.setdefault(v.name, []).append(r)
        rows.append({"name": v.name, "family": v.family, "seed": s,
                     "lam": cfg.lam if cfg.method == "special" else 0.0,
                     "mu": cfg.mu if cfg.method == "fedprox" else 0.0, **all_metrics(r.acc_matrix)})
    return pd.DataFrame(rows), results


def paired_diff(df: pd.DataFrame, a: str, b: str, key: str, n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean over seeds of key(a) - key(b) (same seed = same partitions and sampling), with a
    percentile bootstrap 95% interval over seeds and the number of seeds where a > b."""
    x = df[df["name"] == a].set_index("seed")[key]
    y = df[df["name"] == b].set_index("seed")[key]
    d = (x - y.loc[x.index]).to_numpy()
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, len(d), (n_boot, len(d)))].mean(1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"mean": float(d.mean()), "lo": float(lo), "hi": float(hi), "wins": int((d > 0).sum()), "n": len(d)}


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over seeds of ACC, FGT, BWT, PLA, in the variants' order."""
    order = list(dict.fromkeys(df["name"]))
    g = df.groupby("name", sort=False)[["ACC", "FGT", "BWT", "PLA"]]
    out = g.mean().join(g.std(ddof=0), rsuffix="_sd").loc[order]
    return out


def mean_round_acc(results: list[FDILResult]) -> np.ndarray:
    """Per-round accuracy on every task, averaged over seeds: (K*T, K)."""
    return np.mean([r.round_acc for r in results], axis=0)


def equivalence_checks(domains, p: SpecialPreset, lam: float = 1.0, device: str | None = "cpu",
                       seeds=None) -> dict:
    """Run the identities of spec section 8 on full FDIL runs (same seeds everywhere).

    ``slr_max_diff``: max over ``seeds`` (default: ``p.ident_seeds`` seeds) and coordinates of
    |SPECIAL(lam, round) - FedAvg with server lr 1/(1+lam)| in float64, where the identity holds to
    rounding; ``slr_max_diff_f32`` the same in float32 for the first seed, where rounding
    differences are amplified by training (non-zero, growing with rounds). Also whether
    SPECIAL(0), FedProx(0) and SPECIAL-C(0) equal FedAvg bit for bit (first seed), and the
    SPECIAL-vs-FedAvg gap (a wrong server step would show).
    """
    seeds = list(range(p.ident_seeds)) if seeds is None else list(seeds)

    def final(dtype="float32", run_seeds=seeds[:1], **changes) -> torch.Tensor:
        res = run_fdil_seeds(domains, base_config(p, device, dtype=dtype, **changes), run_seeds,
                             log_every=p.rounds_per_task, progress=False)
        return torch.stack([r.final_params.cpu() for r in res])  # (S, P)

    fedavg = final(method="fedavg")  # float32 comparisons: the first seed
    special = final(method="special", lam=lam)
    slr = final(method="fedavg", server_lr=1.0 / (1.0 + lam))
    special64 = final("float64", seeds, method="special", lam=lam)  # the identity: every seed
    slr64 = final("float64", seeds, method="fedavg", server_lr=1.0 / (1.0 + lam))
    return {
        "slr_max_diff": float((special64 - slr64).abs().max()),
        "slr_max_diff_f32": float((special - slr).abs().max()),
        "slr_diff_per_seed": (special64 - slr64).abs().amax(1).tolist(),
        "special_vs_fedavg_max_diff": float((special - fedavg).abs().max()),
        "lam0_bitwise": bool(torch.equal(final(method="special", lam=0.0), fedavg)),
        "fedprox0_bitwise": bool(torch.equal(final(method="fedprox", mu=0.0), fedavg)),
        "special_c0_bitwise": bool(torch.equal(final(method="special_c", mu=0.0), fedavg)),
        "seeds": seeds,
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
