"""Runners the notebooks call (spec Sec. 7.4): each returns a DataFrame or a dict."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import torch

from icml26.core import bootstrap_mean

from . import _checks as C
from . import data as D
from . import pid as P
from . import tokenizer as T
from .baselines import SASRec, popularity_ranks, sasrec_ranks, train_sasrec
from .method import GRSeq2Seq, SynGRConfig, dominant_modality, mask_dominant_topr, saliency_pass
from .presets import SynGRPreset
from .sequences import (
    IDTrie,
    TokenLayout,
    brute_force_scores,
    build_inputs,
    constrained_beam_search,
    make_layout,
)
from .train import TrainConfig, evaluate, ndcg_at_k, recall_at_k, synergy_reliance, train_generator

ATTR_LABELS = {"category": "category c", "series": "series u", "tone": "tone a_t", "motif": "motif a_v",
               "background": "background g"}


@dataclass
class World:
    cat: D.Catalogue
    inter: D.Interactions
    split: dict
    ids: T.SemanticIDs
    layout: TokenLayout
    trie: IDTrie
    batches: dict
    slices: dict
    text_codes: np.ndarray
    image_codes: np.ndarray
    shifted: dict | None = None   # motif-shifted validation / test batches (None if the catalogue lacks partners)
    image_hist: dict | None = None  # split -> [M, max_hist] items whose images the histories show (None: their own)


def catalogue_config(cfg: SynGRPreset) -> D.CatalogueConfig:
    return D.CatalogueConfig(n_items=cfg.n_items, n_categories=cfg.n_categories, n_series=cfg.n_series,
                             n_styles=cfg.n_styles, n_backgrounds=cfg.n_backgrounds)


def build_world(cfg: SynGRPreset, id_mode: str = "rq_kmeans") -> World:
    """SynCat, users, leave-one-out split (validation/test restricted to the first ``n_eval`` users),
    semantic IDs, layout, trie and the token batches."""
    if id_mode not in T.ID_MODES:
        raise ValueError(f"id_mode must be one of {T.ID_MODES}, got {id_mode!r}")
    cat = D.make_catalogue(catalogue_config(cfg), cfg.seed)
    inter = D.make_interactions(cat, D.InteractionConfig(n_users=cfg.n_users, min_len=cfg.min_len,
                                                         max_len=cfg.max_len), cfg.seed)
    split = D.leave_one_out(inter, cfg.max_hist)
    for k in ("val", "test"):
        split[k] = split[k].subset(np.arange(min(cfg.n_eval, len(split[k]))))
    if id_mode == "attribute":
        tc, ic = T.attribute_codes(cat.attrs)
        K = int(max(tc.max(), ic.max()) + 1)
    else:
        K = cfg.K
        tc = T.rq_encode(T.fit_rq_kmeans(cat.text_feat, cfg.levels, K, cfg.seed, cfg.n_init, cfg.kmeans_iters),
                         cat.text_feat)
        ic = T.rq_encode(T.fit_rq_kmeans(cat.image_feat, cfg.levels, K, cfg.seed + 1, cfg.n_init, cfg.kmeans_iters),
                         cat.image_feat)
    ids = T.assign_semantic_ids(tc, ic)
    layout = make_layout(ids, cfg.n_prompt, K, cfg.max_hist)
    trie = IDTrie(layout.target_tokens(ids), layout.vocab_size)
    batches = {k: build_inputs(v, ids, layout) for k, v in split.items()}
    slices = D.slice_masks(cat, inter, split["test"])
    shifted = None
    if cat.n_items == np.prod([cfg.n_categories, cfg.n_series, cfg.n_styles, cfg.n_styles, cfg.n_backgrounds]):
        partner = D.motif_partner(cat, 1)
        shifted = {k: build_inputs(split[k], ids, layout, image_of=partner) for k in ("val", "test")}
    return World(cat, inter, split, ids, layout, trie, batches, slices, tc, ic, shifted)


# -- notebook 1 ---------------------------------------------------------------------------------
def pid_examples(n_styles: int) -> pd.DataFrame:
    """Exact PID (bits) of XOR, AND, COPY, UNIQUE and SynCat's (a_t, a_v) -> sigma."""
    tables = {"XOR": P.gate_table("xor"), "AND": P.gate_table("and"), "COPY": P.gate_table("copy"),
              "UNIQUE": P.gate_table("unique"), f"SynCat (C={n_styles})": P.syncat_style_table(n_styles)}
    return pd.DataFrame({k: P.pid_williams_beer(v) for k, v in tables.items()}).T


def empirical_pid(world: World) -> dict:
    """Plug-in PID of the catalogue's (tone, motif) -> style and (category, category) -> category-like checks."""
    a = world.cat.attrs
    return P.pid_williams_beer(P.empirical_table(a["tone"], a["motif"], world.cat.style))


def oracle_table(world: World, seed: int = 0, exclude_seen: bool = False) -> pd.DataFrame:
    """Recall@10 / NDCG@10 of the oracles and of popularity, overall and per slice (test split). By
    default the oracles rank every item, as the generators do (``exclude_seen`` as in
    :func:`icml26.syngr.data.oracle_scores`)."""
    sp = world.split["test"]
    ranks = {k: D.oracle_ranks(world.cat, world.inter, sp, k, seed, exclude_seen) for k in D.ORACLES}
    ranks["popularity"] = popularity_ranks(world.split["train"], sp, world.cat.n_items, seed)
    rows = {}
    for k, r in ranks.items():
        rows[k] = {"recall@10": recall_at_k(r, 10), "ndcg@10": ndcg_at_k(r, 10),
                   **{f"recall@10 {s}": recall_at_k(r[m], 10) for s, m in world.slices.items()}}
    return pd.DataFrame(rows).T


def tokenizer_report(world: World, K: int) -> dict:
    """Codebook usage/perplexity, collision rates, and the recoverability of every attribute from
    the text and the image codes (majority vote per tuple, and leave-one-out)."""
    out = {"text": T.codebook_stats(world.text_codes, K), "image": T.codebook_stats(world.image_codes, K)}
    rec = {}
    for mod, codes in (("text codes", world.text_codes), ("image codes", world.image_codes)):
        rec[mod] = {ATTR_LABELS[a]: T.attribute_recoverability(codes, v) for a, v in world.cat.attrs.items()}
        rec[mod + " (LOO)"] = {ATTR_LABELS[a]: T.attribute_recoverability_loo(codes, v)
                               for a, v in world.cat.attrs.items()}
    out["recoverability"] = pd.DataFrame(rec)
    out["joint_collision_rate"] = T.codebook_stats(np.concatenate([world.text_codes, world.image_codes], 1), K)[
        "collision_rate"]
    out["n_suffix"] = world.ids.n_suffix
    return out


def collision_grid(cfg: SynGRPreset) -> pd.DataFrame:
    """Collision rate of the text and image codes for every (levels, K) of the preset's grids."""
    cat = D.make_catalogue(catalogue_config(cfg), cfg.seed)
    rows = []
    for K in cfg.K_grid:
        for L in cfg.levels_grid:
            for mod, X in (("text", cat.text_feat), ("image", cat.image_feat)):
                cb = T.fit_rq_kmeans(X, L, K, cfg.seed, cfg.n_init, cfg.kmeans_iters)
                rows.append({"K": K, "levels": L, "modality": mod,
                             "collision_rate": T.codebook_stats(T.rq_encode(cb, X), K)["collision_rate"]})
    return pd.DataFrame(rows)


def make_model(cfg: SynGRPreset, layout: TokenLayout, history_mode: str = "fused", seed: int = 0) -> GRSeq2Seq:
    torch.manual_seed(seed)
    return GRSeq2Seq(layout, cfg.d_model, cfg.heads, cfg.enc_layers, cfg.dec_layers, cfg.d_ff, cfg.dropout,
                     history_mode)


def beam_check(cfg: SynGRPreset, beam: int | None = None) -> dict:
    """Constrained beam search vs brute-force scoring on a ``toy_items``-item catalogue (random
    untrained generator): same items, same order, same log-probabilities."""
    rng = np.random.default_rng(cfg.seed)
    n, L = cfg.toy_items, 2
    tc, ic = rng.integers(0, 3, (n, L)), rng.integers(0, 3, (n, L))
    ids = T.assign_semantic_ids(tc, ic)
    lay = make_layout(ids, 2, 3, 3)
    trie = IDTrie(lay.target_tokens(ids), lay.vocab_size)
    hist = rng.integers(-1, n, (4, 3))
    hist[:, -1] = rng.integers(0, n, 4)
    sp = D.Split(np.sort(hist, 1), rng.integers(0, n, 4), np.arange(4), np.full(4, 3))
    batch = build_inputs(sp, ids, lay)
    model = make_model(cfg, lay, seed=cfg.seed).eval()
    items, scores = constrained_beam_search(model, batch, trie, beam or n)
    brute = brute_force_scores(model, batch, trie)
    order = brute.argsort(1, descending=True)
    return {"beam_items": items, "beam_scores": scores, "brute_scores": brute, "brute_order": order,
            "same_order": bool((items[:, :n] == order).all()),
            "max_abs_diff": float((scores[:, :n] - brute.gather(1, order)).abs().max()),
            "all_valid": bool(((items >= 0) & (items < n)).all()), "ids": ids, "trie": trie, "layout": lay,
            "batch": batch}


# -- notebook 2 ---------------------------------------------------------------------------------
METHOD_SPECS = {
    "GR-text": ("text", "nll", None),
    "GR-image": ("image", "nll", None),
    "GR-fused": ("fused", "nll", None),
    "SynGR": ("fused", "syngr", {}),
    "SynGR (alpha=0)": ("fused", "syngr", {"alpha": 0.0}),
    "SynGR (random mask)": ("fused", "syngr", {"masking": "random"}),
    "SynGR (mask non-dominant)": ("fused", "syngr", {"masking": "non_dominant"}),
    "SynGR (no H_uni NLL)": ("fused", "syngr", {"use_uni_nll": False}),
}
ABLATIONS = {"alpha0": "SynGR (alpha=0)", "random": "SynGR (random mask)",
             "non_dominant": "SynGR (mask non-dominant)", "no_uni_nll": "SynGR (no H_uni NLL)"}


def train_config(cfg: SynGRPreset, seed: int, epochs: int | None = None, device: str = "cpu") -> TrainConfig:
    return TrainConfig(epochs=epochs or cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, eval_every=cfg.eval_every,
                       beam=cfg.beam, max_steps=cfg.max_steps, seed=seed, device=device)


def rank_metrics(ranks, slices: dict) -> dict:
    """Recall@{5,10} and NDCG@{5,10} of test ranks, and Recall@10 on every slice."""
    return {"recall@5": recall_at_k(ranks, 5), "recall@10": recall_at_k(ranks, 10), "ndcg@5": ndcg_at_k(ranks, 5),
            "ndcg@10": ndcg_at_k(ranks, 10), **{f"recall@10 {s}": recall_at_k(ranks[m], 10) for s, m in slices.items()}}


def train_method(world: World, cfg: SynGRPreset, name: str, seed: int = 0, device: str = "cpu",
                 epochs: int | None = None) -> tuple[GRSeq2Seq, object]:
    """Train one method on the world's training split (best validation epoch kept): ``(model, log)``.
    Touches no test data."""
    if name not in METHOD_SPECS:
        raise ValueError(f"name must be one of {sorted(METHOD_SPECS)}, got {name!r}")
    mode, method, over = METHOD_SPECS[name]
    syn = SynGRConfig(alpha=cfg.alpha, mask_ratio=cfg.mask_ratio, tau=cfg.tau, **(over or {})) if over is not None \
        else None
    model = make_model(cfg, world.layout, mode, seed)
    log = train_generator(model, world.batches["train"], world.batches["val"], world.trie,
                          train_config(cfg, seed, epochs, device), method, syn, desc=name)
    return model, log


def run_method(world: World, cfg: SynGRPreset, name: str, seed: int = 0, device: str = "cpu",
               epochs: int | None = None) -> dict:
    """Train one method (:func:`train_method`), then evaluate it on the test split (overall, per slice,
    the synergy diagnostics of :func:`~icml26.syngr.train.synergy_reliance`)."""
    model, log = train_method(world, cfg, name, seed, device, epochs)
    test = world.batches["test"]
    ev = evaluate(model, test, world.trie, cfg.beam)
    rel = synergy_reliance(model, test, world.trie, cfg.beam, 10, seed, p_full=ev["recall@10"],
                           shifted=None if world.shifted is None else world.shifted["test"])
    row = {"method": name, "seed": seed, **rank_metrics(ev["ranks"], world.slices),
           "delta_syn": rel["delta_syn"], "delta_uni": rel["delta_uni"], "P_motif_shift": rel.get("motif_shift", np.nan),
           "P_text_only": rel["text_only"],
           "P_image_only": rel["image_only"], "best_epoch": log.best_epoch, "epochs": epochs or cfg.epochs,
           "rows_forward": log.rows_forward, "seconds": log.seconds}
    return {"row": row, "model": model, "log": log, "ranks": ev["ranks"]}


def run_sasrec(world: World, cfg: SynGRPreset, seed: int = 0, device: str = "cpu") -> dict:
    """SASRec-ID (item ids, width ``d_model``, ``max(2, enc_layers)`` layers) with the generators'
    training settings; evaluated on the test split by full ranking. It sees no modality, so it has no
    pair-shuffle estimate."""
    torch.manual_seed(seed)
    model = SASRec(world.cat.n_items, cfg.max_hist, cfg.d_model, cfg.heads, max(2, cfg.enc_layers), cfg.dropout)
    log = train_sasrec(model, world.split["train"], world.split["val"], train_config(cfg, seed, None, device))
    model.cpu()
    ranks = sasrec_ranks(model, world.split["test"], seed)
    nan = float("nan")
    row = {"method": "SASRec-ID", "seed": seed, **rank_metrics(ranks, world.slices),
           "delta_syn": nan, "delta_uni": nan, "P_motif_shift": nan, "P_text_only": nan, "P_image_only": nan,
           "best_epoch": log.best_epoch, "epochs": cfg.epochs, "rows_forward": log.rows_forward,
           "seconds": log.seconds}
    return {"row": row, "model": model, "log": log, "ranks": ranks}


def compare_methods(world: World, cfg: SynGRPreset, device: str = "cpu",
                    methods=("SASRec-ID", "GR-text", "GR-image", "GR-fused", "SynGR")) -> dict:
    """Every method (and the preset's ablations, and GR-fused at SynGR's compute when
    ``matched_compute``) for every seed of the preset; one row per (method, seed), and every test
    user's rank under each (method, seed) for paired comparisons."""
    names = list(methods) + [ABLATIONS[a] for a in cfg.ablations]
    rows, models, logs, ranks = [], {}, {}, {}
    for seed in cfg.seeds:
        for name in names:
            res = run_sasrec(world, cfg, seed, device) if name == "SASRec-ID" else run_method(world, cfg, name, seed, device)
            rows.append(res["row"])
            models[(name, seed)], logs[(name, seed)], ranks[(name, seed)] = res["model"], res["log"], res["ranks"]
        if cfg.matched_compute:
            res = run_method(world, cfg, "GR-fused", seed, device, epochs=3 * cfg.epochs)
            res["row"]["method"] = "GR-fused (3x epochs)"
            rows.append(res["row"])
    return {"table": pd.DataFrame(rows), "models": models, "logs": logs, "ranks": ranks}


def paired_recall_gain(ranks: dict, a: str, b: str, seeds, k: int = 10, mask=None, n_boot: int = 2000,
                       seed: int = 0) -> tuple[float, float, float]:
    """Recall@k of method ``a`` minus that of ``b`` on the same test users (and seeds), with a 95% paired
    bootstrap interval over users: ``(diff, lo, hi)``."""
    diffs = []
    for s in seeds:
        ra, rb = np.asarray(ranks[(a, s)]), np.asarray(ranks[(b, s)])
        d = ((ra >= 1) & (ra <= k)).astype(float) - ((rb >= 1) & (rb <= k)).astype(float)
        diffs.append(d if mask is None else d[np.asarray(mask)])
    return bootstrap_mean(np.mean(diffs, 0), n_boot, seed)


def saliency_example(model: GRSeq2Seq, batch: dict, row: int, r: float) -> dict:
    """Saliency of one history, its dominant modality and the positions SynGR's H_mask hides."""
    ids, valid = batch["input_ids"][row:row + 1], batch["valid"][row:row + 1]
    model.eval()
    sal, v = saliency_pass(model, ids, valid)
    dom = dominant_modality(sal, model.pos_mod, v)
    _, mvalid = mask_dominant_topr(ids, sal, model.pos_mod, v, dom, r, model.layout.PAD)
    return {"saliency": sal[0].numpy(), "valid": v[0].numpy(), "masked": (v & ~mvalid)[0].numpy(),
            "dominant": "text" if int(dom) == 0 else "image", "pos_modality": model.pos_mod.numpy()}


def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


# -- the comparison protocol (core.compare) ------------------------------------------------------
def generator_protocol(world: World, cfg: SynGRPreset, methods=("GR-text", "GR-image", "GR-fused"),
                       seeds=None, device: str = "cpu", tune_seed: int | None = None) -> dict:
    """Every method of ``methods`` tuned on the **validation** split over the preset's learning-rate grid
    (the same grid for each), then trained on every seed of ``seeds`` (default ``cfg.seeds``) at its
    chosen learning rate and evaluated on the test split. A seed fixes the initial weights (the same for
    every method: :func:`make_model` seeds torch by the seed alone) and the mini-batch order.

    The tuning runs train on ``tune_seed`` (default ``cfg.tune_seed``), a seed that is **not** a test
    seed (a ValueError otherwise): a rate chosen on a test seed's own validation score would favour
    that seed's test run, whose weights are the same. Tuning runs are scored on validation only (no
    test evaluation). A grid of one rate chooses nothing, so it costs no tuning run: its recorded
    validation score is the mean over the training seeds' runs (the `book` preset's case).

    Returns ``tuned`` (method -> :class:`~icml26.core.compare.Tuned`), ``rows`` (a DataFrame, one row per
    method and seed: test metrics and the synergy diagnostics), ``models`` and ``logs`` keyed by
    ``(method, seed)``, ``ranks``, ``steps`` (optimiser steps of one run), ``grid`` and ``tune_seed``."""
    from icml26.core import Grid, tune

    seeds = tuple(cfg.seeds if seeds is None else seeds)
    if not seeds:
        raise ValueError("seeds must hold at least one training seed")
    tune_seed = cfg.tune_seed if tune_seed is None else tune_seed
    C.pos_int(tune_seed, "tune_seed", 0)
    if tune_seed in seeds:
        raise ValueError(f"tune_seed must not be one of the test seeds {list(seeds)}, got {tune_seed}")
    grid = Grid(lr=list(cfg.lr_grid))
    cache, tune_logs, out_rows, models, logs, ranks, tuned = {}, {}, [], {}, {}, {}, {}

    def run(name, lr, seed):
        key = (name, float(lr), seed)
        if key not in cache:
            cache[key] = run_method(world, replace(cfg, lr=float(lr)), name, seed, device)
        return cache[key]

    def tuning_score(name, lr):
        if grid.size == 1:     # nothing to choose: the training seeds' runs, which are needed anyway
            return float(np.mean([max(run(name, lr, s)["log"].val_recall) for s in seeds]))
        key = (name, float(lr))
        if key not in tune_logs:
            tune_logs[key] = train_method(world, replace(cfg, lr=float(lr)), name, tune_seed, device)[1]
        return max(tune_logs[key].val_recall)

    for name in methods:
        tuned[name] = tune(name, lambda c, n=name: tuning_score(n, c["lr"]), grid, goal="max")
        for seed in seeds:
            res = run(name, tuned[name].best["lr"], seed)
            out_rows.append(dict(res["row"], lr=tuned[name].best["lr"]))
            models[(name, seed)], logs[(name, seed)], ranks[(name, seed)] = res["model"], res["log"], res["ranks"]
    n_rows = len(world.split["train"])
    steps_per = -(-n_rows // cfg.batch_size)
    steps = cfg.epochs * (min(steps_per, cfg.max_steps) if cfg.max_steps else steps_per)
    return {"tuned": tuned, "rows": pd.DataFrame(out_rows), "models": models, "logs": logs, "ranks": ranks,
            "steps": steps, "grid": grid, "tune_seed": tune_seed}


NO_STYLE = "GR-fused, no style"


def no_style_world(world: World, seed: int = 0) -> World:
    """The world with the style removed: the same users, targets and test split, but every training and
    validation history shows each item's image with a motif re-drawn at random
    (:func:`icml26.syngr.data.redraw_motifs`, independently per row and slot), so the histories carry
    every attribute but the style. A generator trained and tuned here and tested on the true test
    histories is the *trained* no-style control of notebook 4."""
    if not isinstance(world, World):
        raise TypeError(f"world must be a World, got {type(world).__name__}")
    C.pos_int(seed, "seed", 0)
    img = {k: D.redraw_motifs(world.cat, world.split[k], seed + i) for i, k in enumerate(("train", "val"))}
    batches = dict(world.batches, **{k: build_inputs(world.split[k], world.ids, world.layout, image_hist=v)
                                     for k, v in img.items()})
    return replace(world, batches=batches, image_hist=img)


def no_style_protocol(world: World, cfg: SynGRPreset, seeds=None, device: str = "cpu",
                      tune_seed: int | None = None) -> dict:
    """:func:`generator_protocol` for GR-fused trained and tuned in the no-style world
    (:func:`no_style_world`, built from ``cfg.seed``) and tested on the true test histories; the method
    is named :data:`NO_STYLE` in every key and row."""
    out = generator_protocol(no_style_world(world, cfg.seed), cfg, ("GR-fused",), seeds, device, tune_seed)
    out["tuned"] = {NO_STYLE: replace(out["tuned"]["GR-fused"], method=NO_STYLE)}
    out["rows"] = out["rows"].assign(method=NO_STYLE)
    for k in ("models", "logs", "ranks"):
        out[k] = {(NO_STYLE, s): v for (_, s), v in out[k].items()}
    return out


def control_table(rows: pd.DataFrame, control: pd.DataFrame, treated: str = "GR-fused",
                  name: str = NO_STYLE) -> pd.DataFrame:
    """One row per training seed: the test Recall@10 and the motif-shift drop of ``treated`` (from
    ``rows``) and of the control ``name`` (from ``control``), and their differences (both as
    :func:`generator_protocol` returns its rows)."""
    for arg, df, method in (("rows", rows, treated), ("control", control, name)):
        if not isinstance(df, pd.DataFrame) or not {"method", "seed", "recall@10", "delta_syn"} <= set(df.columns):
            raise ValueError(f"{arg} must be a DataFrame with columns ['method', 'seed', 'recall@10', 'delta_syn']")
        if not (df.method == method).any():
            raise ValueError(f"{arg} holds no row of {method!r}")
    a = rows[rows.method == treated].set_index("seed")
    b = control[control.method == name].set_index("seed")
    if set(a.index) != set(b.index):
        raise ValueError(f"rows and control must hold {treated} and {name} on the same seeds, got "
                         f"{sorted(a.index)} and {sorted(b.index)}")
    out = pd.DataFrame({f"{treated} R@10": a["recall@10"], f"{name} R@10": b["recall@10"]})
    out["R@10 diff"] = out.iloc[:, 0] - out.iloc[:, 1]
    out[f"{treated} drop"], out[f"{name} drop"] = a["delta_syn"], b["delta_syn"]
    out["drop diff"] = out[f"{treated} drop"] - out[f"{name} drop"]
    return out.sort_index()


def generator_config(cfg: SynGRPreset) -> SynGRPreset:
    """The preset with the GR-text vs GR-fused training recipe of notebook 3 (``gen_epochs``, validation
    every ``gen_eval_every`` epochs, residual dropout ``gen_dropout``, mini-batch ``gen_batch_size``): the
    runners read ``epochs``, ``eval_every``, ``dropout`` and ``batch_size``."""
    return replace(cfg, epochs=cfg.gen_epochs, eval_every=cfg.gen_eval_every, dropout=cfg.gen_dropout,
                   batch_size=cfg.gen_batch_size)


def validation_curves(logs: dict) -> pd.DataFrame:
    """One row per (method, seed, evaluated epoch): validation Recall@10, from ``logs`` keyed by
    ``(method, seed)`` (as :func:`generator_protocol` returns them)."""
    rows = [{"method": name, "seed": seed, "epoch": ep, "val_recall@10": r}
            for (name, seed), log in logs.items() for ep, r in zip(log.epochs, log.val_recall)]
    return pd.DataFrame(rows, columns=["method", "seed", "epoch", "val_recall@10"])


def epoch_budget(curves: pd.DataFrame, epochs: int, back: int = 2) -> pd.DataFrame:
    """Per (method, seed): the best validation epoch, whether it is the last of the ``epochs`` trained,
    and the slope at the end of the budget, validation Recall@10 at the last epoch minus ``back`` epochs
    earlier (at most ``epochs - 1``; the edge of the epoch axis, read as the protocol reads a grid edge).
    Needs validation after every one of the last ``back + 1`` epochs."""
    epochs = int(epochs)
    back = int(back)
    if back < 1:
        raise ValueError(f"back must be >= 1, got {back}")
    if epochs < 2:
        raise ValueError(f"epochs must be >= 2 for a slope at the end of the budget, got {epochs}")
    back = min(back, epochs - 1)
    out = []
    for (name, seed), g in curves.groupby(["method", "seed"], sort=False):
        v = g.set_index("epoch")["val_recall@10"]
        best = int(v.idxmax())
        end = v.get(epochs, np.nan) - v.get(epochs - back, np.nan)
        out.append({"method": name, "seed": seed, "best_epoch": best, "best_is_last": best == epochs,
                    "val_best": float(v.max()), "val_last": float(v.get(epochs, np.nan)), "end_slope": float(end)})
    return pd.DataFrame(out)


def bar_verdict(mean: float, lo: float, bar: float) -> str:
    """The verdict, in words for the prose, of a claim "the difference is at least ``bar``" read from the
    mean and the lower end ``lo`` of its interval (the end at which such a claim is judged)."""
    for name, v in (("mean", mean), ("lo", lo), ("bar", bar)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not np.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    if lo > mean:
        raise ValueError(f"lo must not exceed mean, got lo={lo} > mean={mean}")
    if lo >= bar:
        return "clears the bar even at the lower end of its interval"
    if mean >= bar:
        return "clears the bar on the mean but not at the lower end of its interval, so it is not shown at book scale"
    return "stays below the bar even on the mean: the claim fails at book scale"


def edge_verdict(n_rising: int, n_runs: int, slope_lo: float) -> str:
    """The reading, in words for the prose, of the end of the epoch axis: ``n_rising`` of ``n_runs`` runs
    whose validation Recall@10 still rises over the last epochs, and the lower end ``slope_lo`` of the
    interval of that slope over seeds. It says only what is measured: whether the runs were still
    improving on validation when the budget ended. It bounds nothing: what a longer budget gives is
    not measured (under a cosine schedule a longer budget is another run, not a continuation), and a
    rising recall says nothing of the sign of a change in a difference such as the motif-shift drop."""
    for name, v in (("n_rising", n_rising), ("n_runs", n_runs)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
    if n_runs < 1 or n_rising > n_runs:
        raise ValueError(f"n_runs must be >= 1 and >= n_rising, got n_runs={n_runs}, n_rising={n_rising}")
    if isinstance(slope_lo, bool) or not isinstance(slope_lo, (int, float, np.floating, np.integer)) \
            or not np.isfinite(slope_lo):
        raise ValueError(f"slope_lo must be a finite number, got {slope_lo!r}")
    if n_rising == n_runs and slope_lo > 0:
        return ("every run was still improving on validation when the budget ended (the slope's interval lies "
                "above zero): these are scores of runs stopped by the budget, not of settled ones, and what a "
                "longer budget would give, for the recall or for the motif-shift drop (claim 14), is not "
                "measured here")
    if slope_lo > 0:
        return (f"the runs were still improving on validation when the budget ended on average (the slope's "
                f"interval lies above zero), though only {n_rising} of {n_runs} rose: the budget stopped most of "
                "them before they settled, and what a longer budget would give, for the recall or for the "
                "motif-shift drop (claim 14), is not measured here")
    return ("the slope's interval reaches zero, so the runs have not been shown to be still improving when the "
            "budget ended; that does not show they have settled either")


def untrained_control(world: World, cfg: SynGRPreset, seeds=None) -> pd.DataFrame:
    """The no-treatment row: the fused generator at its initial weights (zero optimiser steps), decoded
    with the same beam search, one row per seed."""
    rows = []
    for seed in (cfg.seeds if seeds is None else seeds):
        model = make_model(cfg, world.layout, "fused", seed).eval()
        ev = evaluate(model, world.batches["test"], world.trie, cfg.beam)
        rel = synergy_reliance(model, world.batches["test"], world.trie, cfg.beam, 10, seed, p_full=ev["recall@10"],
                               shifted=None if world.shifted is None else world.shifted["test"])
        rows.append({"method": "untrained", "seed": seed, **rank_metrics(ev["ranks"], world.slices),
                     "delta_syn": rel["delta_syn"], "delta_uni": rel["delta_uni"]})
    return pd.DataFrame(rows)


def per_seed_table(rows: pd.DataFrame, control: pd.DataFrame) -> pd.DataFrame:
    """One row per training seed: GR-fused's and GR-text's test Recall@10 and claim 12's gain (their
    difference), the motif-shift drops of GR-fused and of the untrained control and claim 14's difference.
    ``rows`` as :func:`generator_protocol` returns them, ``control`` as :func:`untrained_control`."""
    for name, df, cols in (("rows", rows, ("method", "seed", "recall@10", "delta_syn")),
                           ("control", control, ("seed", "delta_syn"))):
        if not isinstance(df, pd.DataFrame) or not set(cols) <= set(df.columns):
            raise ValueError(f"{name} must be a DataFrame with columns {list(cols)}")
    f = rows[rows.method == "GR-fused"].set_index("seed")
    t = rows[rows.method == "GR-text"].set_index("seed")
    c = control.set_index("seed")
    if f.empty or t.empty or not (set(f.index) == set(t.index) == set(c.index)):
        raise ValueError("rows and control must hold GR-fused, GR-text and the control on the same seeds")
    out = pd.DataFrame({"GR-fused R@10": f["recall@10"], "GR-text R@10": t["recall@10"]})
    out["gain (claim 12)"] = out["GR-fused R@10"] - out["GR-text R@10"]
    out["GR-fused drop"] = f["delta_syn"]
    out["untrained drop"] = c["delta_syn"]
    out["drop diff (claim 14)"] = out["GR-fused drop"] - out["untrained drop"]
    return out.sort_index()

