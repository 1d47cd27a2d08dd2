"""Runners the notebooks call (one call per experiment; tables as DataFrames)."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .actions import FastLite
from .data import DriveData, build_dataset
from .metric import combine, pdm_score
from .planners import constant_velocity_plan, expert_plan
from .rft import GRPOConfig, clone_frozen, rft_train
from .sim import ALL_FAMILIES, WorldConfig, sample_scenarios
from .tokenizer import DynTokConfig, embeddings, probe_ego_motion, train_tokenizer, usage_of
from .vla import DrivingVLA, SFTConfig, TokenSpace, build_targets, dynamics_ids, evaluate_policy, sft_train

SUB = ("nc", "dac", "ttc", "ep", "c")


# ---------------------------------------------------------------------------------------------
# notebook 1
def gallery_scenes(seed: int = 0) -> DriveData:
    """One scene per family (the first of each in a small sample)."""
    d = build_dataset(40, WorldConfig(), seed=seed)
    fam = d.batch.family
    idx = [int(np.where(fam == f)[0][0]) for f in ALL_FAMILIES if (fam == f).any()]
    return d.subset(idx)


def planner_comparison(cfg) -> dict:
    """Expert vs constant velocity on ``cfg.n_scenes`` scenes: sub-metrics, per-family PDMS,
    ADE to the expert, collision rates and the FAST-lite round trip of the expert plan."""
    b = sample_scenarios(cfg.n_scenes, WorldConfig(), seed=cfg.seed)
    plan, ref = expert_plan(b, noise_p=0.15, seed=cfg.seed + 1)
    fast = FastLite()
    plans = {"expert": plan, "constant velocity": constant_velocity_plan(b),
             "expert (FAST-lite round trip)": fast.decode(fast.encode(plan))}
    rows, per_scene = [], {}
    for name, p in plans.items():
        s = pdm_score(b, p, ref)
        per_scene[name] = s
        rows.append(dict(planner=name, **{k: float(s[k].mean()) for k in SUB + ("pdms",)},
                         ade=float(np.linalg.norm(p - plan, axis=-1).mean()), collision=float((s["nc"] < 1).mean())))
    fam = pd.DataFrame({name: s["pdms"] for name, s in per_scene.items()}).assign(family=b.family)
    return dict(table=pd.DataFrame(rows).set_index("planner"), per_scene=per_scene,
                family=fam.groupby("family").mean().reindex([f for f in ALL_FAMILIES if f in set(b.family)]),
                batch=b, plan=plan, ref=ref)


def fast_sweep(plan: np.ndarray, gammas) -> pd.DataFrame:
    """FAST-lite round-trip error vs the quantisation scale gamma, with the Parseval bound
    sqrt(T) 0.5 / gamma * s per dimension (only rows without clipping are bounded)."""
    rows = []
    for g in gammas:
        f = FastLite(gamma=float(g))
        rec = f.decode(f.encode(plan))
        clipped = f.clipped(plan)
        err = np.linalg.norm(rec - plan, axis=1)                    # [N,2] L2 over time per dimension
        ok = ~clipped
        rows.append(dict(gamma=g, err_x=float(err[ok, 0].max()) if ok.any() else np.nan,
                         err_y=float(err[ok, 1].max()) if ok.any() else np.nan,
                         mean_err_x=float(err[ok, 0].mean()) if ok.any() else np.nan,
                         bound_x=f.bound()[0], bound_y=f.bound()[1], clipped=float(clipped.mean())))
    return pd.DataFrame(rows)


def averaged_submetrics_gap(nc, dac, ep, ttc, c) -> tuple[float, float]:
    """(mean of per-scene PDMS, PDMS of the mean sub-metrics)."""
    return float(np.mean(combine(nc, dac, ep, ttc, c))), float(combine(*(np.mean(x) for x in (nc, dac, ep, ttc, c))))


# ---------------------------------------------------------------------------------------------
# notebook 2
def tok_config(cfg, **kw) -> DynTokConfig:
    return DynTokConfig(d_model=cfg.tok_d, enc_layers=cfg.tok_enc, dec_layers=cfg.tok_dec, heads=cfg.tok_heads,
                        n_ego=cfg.n_codes, n_env=cfg.n_codes, m_ego=cfg.m_codes, m_env=cfg.m_codes, d_vq=cfg.d_vq,
                        **kw)


def split_pairs(data: DriveData, frac: float = 0.8):
    n = int(len(data) * frac)
    return data.subset(np.arange(n)).pairs(), data.subset(np.arange(n, len(data))).pairs()


def tokenizer_comparison(cfg, dev=None) -> dict:
    """Train the decoupled tokenizer and the coupled baseline (same steps, batch, total codes),
    plus the no-BEV ablation when ``cfg.ablate_bev``; probe R^2 of ego motion on held-out pairs."""
    data = build_dataset(cfg.tok_scenes, WorldConfig(), seed=cfg.seed + 100)
    tr, te = split_pairs(data)
    variants = {"decoupled": tok_config(cfg), "coupled": tok_config(cfg).coupled}
    if cfg.ablate_bev:
        variants["decoupled, no BEV"] = tok_config(cfg, use_bev=False)
    models, curves, rows = {}, {}, []
    for name, tc in variants.items():
        t0 = time.perf_counter()
        tok, cur = train_tokenizer(tr, tc, cfg.tok_steps, cfg.tok_batch, cfg.tok_lr, cfg.seed, cfg.log_every, dev,
                                   eval_pairs=te)
        secs = time.perf_counter() - t0
        tok = tok.cpu()
        pr = probe_ego_motion(tok, te)
        ids, _ = embeddings(tok, te[0], te[1])
        use = usage_of(tok, ids)
        with torch.no_grad():
            _, z = tok.encode(te[0][:512], te[1][:512])
            bev_acc = float((tok.decode_bev(te[2][:512], z) == te[3][:512]).float().mean()) if tc.use_bev else np.nan
            img_mse = float(((tok.decode_image(te[0][:512], z) - te[1][:512]) ** 2).mean()) if tc.use_img else np.nan
        copy_acc = float((te[2][:512] == te[3][:512]).float().mean())
        rows.append(dict(tokenizer=name, r2_ego=pr["ego"], r2_env=pr["env"], r2_all=pr["all"],
                         active=sum(use.values()), active_ego=use.get("ego", np.nan), active_env=use.get("env", np.nan),
                         bev_acc=bev_acc, bev_copy_acc=copy_acc, img_mse=img_mse, seconds=secs))
        models[name], curves[name] = tok, cur
    return dict(table=pd.DataFrame(rows).set_index("tokenizer"), models=models, curves=curves, test=te, data=data)


# ---------------------------------------------------------------------------------------------
# notebook 3
def make_policy(space: TokenSpace, cfg, seed: int) -> DrivingVLA:
    torch.manual_seed(seed)
    return DrivingVLA(space.vocab, d=cfg.vla_d, layers=cfg.vla_layers, heads=cfg.vla_heads)


def _row(name, seed, ev):
    return dict(variant=name, seed=seed, **{k: ev[k] for k in ("pdms",) + SUB + ("ade", "collision", "format",
                                                                              "tokens", "forwards", "ms")})


def cot_experiment(cfg, dev=None) -> dict:
    """Spec Sec. 7.3: tokenizer, CoT targets, SFT of every mode at identical epochs/batch/model,
    greedy constrained evaluation (and oracle CoT), then GRPO from the SFT checkpoints."""
    dev = dev or torch.device("cpu")
    data = build_dataset(cfg.n_train + cfg.n_test, WorldConfig(), seed=cfg.seed + 200)
    tr, te = data.subset(np.arange(cfg.n_train)), data.subset(np.arange(cfg.n_train, len(data)))
    tok, tok_curves = train_tokenizer(tr.pairs(), tok_config(cfg), cfg.cot_tok_steps, cfg.tok_batch, cfg.tok_lr,
                                      cfg.seed, max(1, cfg.cot_tok_steps // 4), dev)
    tok = tok.cpu()
    space = TokenSpace(m_ego=cfg.m_codes, m_env=cfg.m_codes, n_ego=cfg.n_codes, n_env=cfg.n_codes)
    act = FastLite()
    ids_tr, ids_te = dynamics_ids(tok, tr), dynamics_ids(tok, te)
    tgt = {m: (build_targets(tr, m, tok, act, space, ids_tr), build_targets(te, m, tok, act, space, ids_te))
           for m in cfg.modes}
    sft = SFTConfig(epochs=cfg.sft_epochs, batch=cfg.sft_batch, lr=cfg.sft_lr, max_steps=cfg.sft_max_steps)
    rows, models, sft_curves, rft_curves, evals = [], {}, {}, {}, {}
    grpo = GRPOConfig(iterations=cfg.rft_iterations, group_size=cfg.group_size,
                      contexts_per_step=cfg.contexts_per_step, lr=cfg.rft_lr)
    for seed in cfg.seeds:
        for mode in tqdm(cfg.modes, leave=False, desc="SFT"):
            pol = make_policy(space, cfg, seed).to(dev)
            sft_curves[(mode, seed)] = sft_train(pol, tr, tgt[mode][0], mode, space, sft, seed)
            ev = evaluate_policy(pol, te, mode, space, act)
            evals[(mode, "SFT", seed)] = ev
            rows.append(dict(_row(mode, seed, ev), stage="SFT"))
            if mode in ("dynamics", "future_image"):
                ev = evaluate_policy(pol, te, mode, space, act, oracle_cot=True, targets=tgt[mode][1])
                evals[(mode, "oracle", seed)] = ev
                rows.append(dict(_row(mode, seed, ev), stage="SFT, oracle CoT"))
            models[(mode, "SFT", seed)] = pol
        for mode in cfg.rft_modes:
            pol = models[(mode, "SFT", seed)]
            ref = clone_frozen(pol)
            pol2 = clone_frozen(pol)
            for p in pol2.parameters():
                p.requires_grad_(True)
            rft_curves[(mode, seed)] = rft_train(pol2, ref, tr, mode, space, act, grpo, seed)
            ev = evaluate_policy(pol2, te, mode, space, act)
            evals[(mode, "SFT+RFT", seed)] = ev
            rows.append(dict(_row(mode, seed, ev), stage="SFT+RFT"))
            models[(mode, "SFT+RFT", seed)] = pol2
    expert = pdm_score(te.batch, te.plan, te.ref)
    cv = pdm_score(te.batch, te.cv, te.ref)
    return dict(table=pd.DataFrame(rows), models=models, evals=evals, sft_curves=sft_curves, rft_curves=rft_curves,
                tok=tok, tok_curves=tok_curves, space=space, act=act, test=te, train=tr, targets=tgt,
                expert=float(expert["pdms"].mean()), cv=float(cv["pdms"].mean()))


def per_family(res: dict, stage: str = "SFT") -> pd.DataFrame:
    te = res["test"]
    seed = sorted({k[2] for k in res["evals"]})[0]
    cols = {m: res["evals"][(m, stage, seed)]["per_scene"] for m in ("none", "dynamics")
            if (m, stage, seed) in res["evals"]}
    df = pd.DataFrame(cols).assign(family=te.batch.family)
    return df.groupby("family").mean().reindex([f for f in ALL_FAMILIES if f in set(te.batch.family)])


def latency_table(cfg) -> pd.DataFrame:
    """Deterministic latency: generated tokens and forward passes per decision for every mode."""
    space = TokenSpace(m_ego=cfg.m_codes, m_env=cfg.m_codes, n_ego=cfg.n_codes, n_env=cfg.n_codes)
    rows = [dict(mode=m, tokens=space.length(m), thought=int(space.template(m)[1].sum()))
            for m in ("none", "meta", "dynamics", "future_image")]
    return pd.DataFrame(rows).set_index("mode")


def with_steps(cfg, **kw):
    return replace(cfg, **kw)
