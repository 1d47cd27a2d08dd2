"""Does GR-fused learn the synergy if it gets more? The book's calibration runs (spec claim 12's risk note:
"increase epochs before weakening the claim").

Each run trains GR-fused (plain NLL, fused history, seed 0) with one change to the ``book`` preset and
measures validation Recall@10 on full and on pair-shuffled histories (Sec. 4d; the test split is never
used). A model that has learned the style reads tone and motif *of the same item* together, so pair-
shuffling its histories costs it Recall; ``delta_syn`` near zero means it has not.

Regenerate the stored table (about 12 CPU minutes on one thread)::

    python -m icml26.syngr.calibration --jobs 2   # writes data/syngr/calibration.csv and .json
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd
import torch

from . import experiments as E
from .presets import preset
from .train import evaluate, pair_shuffle

BIG = {"d_model": 64, "enc_layers": 2, "dec_layers": 2, "d_ff": 128, "lr": 3e-3}

#: name -> (id_mode, changes to the book preset). One change at a time from the book preset, except
#: "larger model" (width, depth and the learning rate chosen for it) and the user counts (fewer epochs,
#: so that the optimiser steps stay comparable).
RUNS = {
    "book preset": ("rq_kmeans", {}),
    "attribute IDs (no tokenizer)": ("attribute", {}),
    "attribute IDs, C = 4 styles": ("attribute", {"n_styles": 4}),
    "attribute IDs, 60 epochs, lr 3e-3": ("attribute", {"epochs": 60, "lr": 3e-3, "eval_every": 6}),
    "attribute IDs, larger model, 40 epochs": ("attribute", {**BIG, "epochs": 40, "eval_every": 5}),
    "attribute IDs, 6000 users, 6 epochs": ("attribute", {"n_users": 6000, "epochs": 6, "eval_every": 2}),
    "RQ-KMeans IDs, 6000 users, 6 epochs": ("rq_kmeans", {"n_users": 6000, "epochs": 6, "eval_every": 2}),
    "attribute IDs, 20000 users, 4 epochs": ("attribute", {"n_users": 20000, "epochs": 4, "eval_every": 2}),
}

DATA = Path(__file__).resolve().parents[3] / "data" / "syngr"

#: the chapter's first world (SynCat with 400 of 2,048 attribute tuples, C = 8) and the first book model;
#: the calibration runs are changes to it. The book now uses the product catalogue of the presets.
OLD_WORLD = {"n_items": 400, "n_categories": 4, "n_series": 16, "n_styles": 8, "n_backgrounds": 4, "n_users": 1500,
             "levels": 3, "K": 16, "max_hist": 5, "d_model": 32, "heads": 4, "enc_layers": 1, "dec_layers": 1,
             "d_ff": 64, "dropout": 0.1, "epochs": 12, "batch_size": 128, "lr": 6e-3, "eval_every": 3,
             "beam": 20, "n_eval": 500}


def run_one(name: str, seed: int = 0) -> dict:
    """Train GR-fused under calibration run ``name`` and measure it on the validation split."""
    if name not in RUNS:
        raise ValueError(f"name must be one of {sorted(RUNS)}, got {name!r}")
    id_mode, over = RUNS[name]
    cfg = replace(preset("book"), seed=seed, **{**OLD_WORLD, **over})
    world = E.build_world(cfg, id_mode)
    t0 = time.process_time()
    res = E.run_method(world, cfg, "GR-fused", seed)
    val = world.batches["val"]
    full = evaluate(res["model"], val, world.trie, cfg.beam, ks=(10,))["recall@10"]
    ids, valid = pair_shuffle(val["input_ids"], val["valid"], world.layout, torch.Generator().manual_seed(seed))
    shuf = evaluate(res["model"], dict(val, input_ids=ids, valid=valid), world.trie, cfg.beam, ks=(10,))["recall@10"]
    rel = {"full": full, "pairshuffle": shuf, "delta_syn": full - shuf}
    orc = E.oracle_table(world, exclude_seen=True)["recall@10"]   # as stored
    log = res["log"]
    return {"run": name, "id_mode": id_mode, "changes": json.dumps(over, sort_keys=True),
            "val_recall@10": rel["full"], "val_pairshuffle": rel["pairshuffle"], "delta_syn_val": rel["delta_syn"],
            "best_epoch": log.best_epoch, "epochs": cfg.epochs, "rows_forward": log.rows_forward,
            "cpu_seconds": time.process_time() - t0, "no_synergy_oracle_test": float(orc["no_synergy"]),
            "bayes_oracle_test": float(orc["bayes"])}


def _run_pinned(name: str) -> dict:
    from icml26.core import one_thread

    one_thread().pin()
    return run_one(name)


def run_all(names=None, jobs: int = 1) -> pd.DataFrame:
    """Every run (in parallel processes of one thread each when ``jobs`` > 1), in ``RUNS`` order."""
    names = list(names or RUNS)
    if jobs > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(jobs) as pool:
            return pd.DataFrame(pool.map(_run_pinned, names, chunksize=1))
    return pd.DataFrame([_run_pinned(n) for n in names])


def load() -> pd.DataFrame:
    """The stored table (``data/syngr/calibration.csv``)."""
    return pd.read_csv(DATA / "calibration.csv")


def main(jobs: int = 1) -> None:
    tab = run_all(jobs=jobs)
    DATA.mkdir(parents=True, exist_ok=True)
    csv = DATA / "calibration.csv"
    tab.to_csv(csv, index=False, float_format="%.4f")
    prov = {"command": "python -m icml26.syngr.calibration", "seed": 0, "threads": 1,
            "torch": torch.__version__, "book_preset": asdict(preset("book")),
            "sha256": hashlib.sha256(csv.read_bytes()).hexdigest(), "date": time.strftime("%Y-%m-%d")}
    (DATA / "calibration.json").write_text(json.dumps(prov, indent=1, default=str) + "\n")
    print(tab.round(3).to_string())


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="GR-fused calibration runs of the SynGR chapter")
    ap.add_argument("--jobs", type=int, default=1, help="parallel processes (one torch thread each)")
    main(ap.parse_args().jobs)
