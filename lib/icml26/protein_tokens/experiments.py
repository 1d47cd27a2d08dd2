"""Experiment runners for the notebooks (return DataFrames; batched over proteins of one length)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .backbone import length_groups, make_backbones
from .checkpoints import NAMES, RECIPE, load_pretrained, tokenizer_config, training_log
from .fsq import code_usage
from .geometry import center_and_scale, kabsch_rmsd, kabsch_superpose, tm_align, tm_score
from .model import DiffusionTokenizer, train_tokenizer
from .probe import global_embeddings, local_token_features, probe_accuracy

LABELS = {"apt_mini": "APT-mini", "kanzi_mini": "Kanzi-mini"}
TEST_SEED = 10_000     # held-out chains use seeds far from the training stream


def gen(dev, seed: int) -> torch.Generator:
    """A seeded generator on ``dev`` (sampler noise is drawn where the model lives)."""
    return torch.Generator(device=torch.device(dev)).manual_seed(int(seed))


def load_models(cfg, device="cpu", progress: bool = True) -> tuple[dict[str, DiffusionTokenizer], dict[str, dict]]:
    """The two tokenizers and their training logs: the shipped checkpoints when ``cfg.retrain_steps == 0``,
    otherwise trained here with the checkpoint recipe, ``cfg.retrain_steps`` steps and ``cfg.model_overrides``."""
    models, logs = {}, {}
    for name in NAMES:
        if cfg.retrain_steps == 0:
            models[name] = load_pretrained(name, device=device)
            logs[name] = training_log(name)
        else:
            mcfg = replace(tokenizer_config(name), **dict(cfg.model_overrides))
            r = RECIPE
            m, log = train_tokenizer(mcfg, tuple(cfg.lengths), cfg.retrain_steps, batch=r["batch"], lr=r["lr"],
                                     warmup=min(r["warmup"], max(1, cfg.retrain_steps // 10)), seed=cfg.seed,
                                     noise_deg=r["noise_deg"], device=str(device), progress=progress)
            for p in m.parameters():
                p.requires_grad_(False)
            models[name], logs[name] = m, log
    return models, logs


def test_set(n: int, lengths=(36, 48), seed: int = 0, classes=None) -> dict:
    """Held-out synthetic chains (seed offset by ``TEST_SEED``)."""
    return make_backbones(n, tuple(lengths), seed=TEST_SEED + seed, classes=classes)


def _groups(data: dict):
    for length, idx in length_groups(data):
        yield length, idx, data["CA"][idx, :length]


def collapse_monitor(models: dict[str, DiffusionTokenizer], data: dict, first: int = 4) -> pd.DataFrame:
    """Code perplexity over the first ``first`` token positions (all proteins pooled), fraction of the
    codebook used, and bits per position; a perplexity near 1 means the FSQ has collapsed."""
    rows = []
    for name, model in models.items():
        p = next(model.parameters())
        ids = []
        for _, _, x in _groups(data):
            _, idx = model.encode(center_and_scale(x.to(p.device, p.dtype)))
            ids.append(idx[:, :first].cpu())
        use = code_usage(torch.cat(ids), model.fsq.codebook_size)
        rows.append({"model": LABELS.get(name, name), "perplexity": use["perplexity"], "codes used": use["used"],
                     "bits per position": use["entropy_bits_per_position"]})
    return pd.DataFrame(rows)


@torch.no_grad()
def reconstruct(model: DiffusionTokenizer, data: dict, ks, steps: int = 25, seed: int = 0, with_all: bool = False,
                progress: bool = True) -> pd.DataFrame:
    """Encode each protein, decode from its first k tokens (the rest zeroed) with the deterministic ODE
    sampler (eta = 0, guidance 1; the same initial noise for every k) and measure Kabsch RMSD and the
    book's TM-score to the target. ``with_all`` adds k = L (every token). Rows: protein, length, label,
    k ("all" as -1), rmsd (A), tm."""
    p = next(model.parameters())
    rows = []
    groups = list(_groups(data))
    for length, idx, x in tqdm(groups, leave=False, disable=not progress, desc="reconstruct"):
        x = x.to(p.device, p.dtype)
        _, tok = model.encode(center_and_scale(x))
        kk = list(ks) + ([-1] if with_all else [])
        for k in kk:
            n_keep = tok.shape[1] if k == -1 else min(k, tok.shape[1])
            y = model.decode(tok, length, n_keep=n_keep, steps=steps, eta=0.0, guidance=1.0, score_weight=0.0,
                             generator=gen(p.device, seed * 1000 + length)) * 10.0
            r = kabsch_rmsd(y, x).cpu()
            t = tm_score(y, x).cpu()
            for j, i in enumerate(idx.tolist()):
                rows.append({"protein": i, "length": length, "label": int(data["label"][i]), "k": k,
                             "rmsd": float(r[j]), "tm": float(t[j])})
    return pd.DataFrame(rows)


@torch.no_grad()
def swap_sensitivity(model: DiffusionTokenizer, data: dict, positions, steps: int = 25, seed: int = 0,
                     progress: bool = True, profile_protein: int = 0) -> tuple[pd.DataFrame, dict]:
    """Replace token j of every protein by token j of another protein of the same length (an
    in-distribution swap), decode with the same sampler noise as the unswapped tokens (all tokens kept,
    ODE sampler) and measure the RMSD between the two decodes. ``positions`` may hold -1 (the last
    token). Also returns per-residue displacement profiles of ``profile_protein`` for every j."""
    p = next(model.parameters())
    rows, profiles = [], {}
    for length, idx, x in tqdm(list(_groups(data)), leave=False, disable=not progress, desc="swaps"):
        if len(idx) < 2:
            continue
        x = x.to(p.device, p.dtype)
        _, tok = model.encode(center_and_scale(x))
        partner = torch.roll(torch.arange(len(idx)), 1)
        g0 = seed * 1000 + length
        base = model.decode(tok, length, steps=steps, eta=0.0, guidance=1.0, score_weight=0.0,
                            generator=gen(p.device, g0)) * 10.0
        for j in positions:
            jj = tok.shape[1] - 1 if j == -1 else j
            if jj >= tok.shape[1]:
                continue
            sw = tok.clone()
            sw[:, jj] = tok[partner, jj]
            y = model.decode(sw, length, steps=steps, eta=0.0, guidance=1.0, score_weight=0.0,
                             generator=gen(p.device, g0)) * 10.0
            r = kabsch_rmsd(y, base).cpu()
            for a, i in enumerate(idx.tolist()):
                rows.append({"protein": i, "length": length, "j": j, "token": jj, "rmsd": float(r[a]),
                             "same_token": bool(tok[a, jj] == tok[partner[a], jj])})
            hit = (idx == profile_protein).nonzero().flatten()
            if len(hit):
                a = int(hit[0])
                disp = (kabsch_superpose(y[a:a + 1], base[a:a + 1]) - base[a:a + 1]).norm(dim=-1)[0]
                profiles[j] = disp.cpu().numpy()
    return pd.DataFrame(rows), profiles


def swap_summary(df: pd.DataFrame, early, late, n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean swap RMSD over the ``early`` and ``late`` positions, their ratio and a paired bootstrap
    interval of (early - late) over proteins."""
    from .theory import bootstrap_mean_ci

    e = df[df.j.isin(early)].groupby("protein").rmsd.mean()
    lt = df[df.j.isin(late)].groupby("protein").rmsd.mean()
    both = e.index.intersection(lt.index)
    diff = (e[both] - lt[both]).to_numpy()
    lo, hi = bootstrap_mean_ci(diff, n_boot, seed)
    return {"early": float(e.mean()), "late": float(lt.mean()), "ratio": float(e.mean() / lt.mean()),
            "gap": float(diff.mean()), "gap_lo": lo, "gap_hi": hi}


def token_gain(rec_a: pd.DataFrame, rec_b: pd.DataFrame, k: int = 8, k0: int = 0, n_boot: int = 2000,
               seed: int = 0) -> dict:
    """How much of the RMSD gap between two tokenizers at ``k`` kept tokens the tokens themselves earn.

    Per protein (both tables from :func:`reconstruct` on the same chains, so the pairing is by chain and
    by initial sampler noise), the gain of a model is RMSD(k0) - RMSD(k): what its first k tokens add
    over its own unconditional prior (k0 = 0, the no-treatment row). Returns the raw gap
    ``raw`` = RMSD_b(k) - RMSD_a(k), the prior gap ``prior`` = RMSD_b(k0) - RMSD_a(k0), both gains and
    ``did`` = gain_a - gain_b = raw - prior, each with a percentile bootstrap interval over proteins
    (``*_lo``, ``*_hi``). The interval covers the test chains only, not training seeds."""
    from .theory import bootstrap_mean_ci

    for name, df in (("rec_a", rec_a), ("rec_b", rec_b)):
        if not isinstance(df, pd.DataFrame) or not {"protein", "k", "rmsd"} <= set(df.columns):
            raise TypeError(f"{name} must be a DataFrame from reconstruct() with protein, k and rmsd columns")
        for kk, arg in ((k, "k"), (k0, "k0")):
            if not (df.k == kk).any():
                raise ValueError(f"{arg}={kk!r} is not among the k values of {name}")
    if k == k0:
        raise ValueError(f"k and k0 must differ, got k={k!r}, k0={k0!r}")

    def at(df, kk):
        return df[df.k == kk].set_index("protein").rmsd

    a, a0, b, b0 = at(rec_a, k), at(rec_a, k0), at(rec_b, k), at(rec_b, k0)
    both = a.index.intersection(b.index).intersection(a0.index).intersection(b0.index)
    if len(both) < 2:
        raise ValueError("rec_a and rec_b must share at least two proteins")
    a, a0, b, b0 = (s[both].to_numpy() for s in (a, a0, b, b0))
    per = {"raw": b - a, "prior": b0 - a0, "gain_a": a0 - a, "gain_b": b0 - b, "did": (a0 - a) - (b0 - b)}
    out = {"n": len(both)}
    for key, v in per.items():
        lo, hi = bootstrap_mean_ci(v, n_boot, seed)
        out.update({key: float(v.mean()), f"{key}_lo": lo, f"{key}_hi": hi})
    return out


@torch.no_grad()
def shrink_study(model: DiffusionTokenizer, data: dict, rhos, steps: int = 25, seed: int = 0,
                 progress: bool = True) -> pd.DataFrame:
    """Zero-shot shrinking (Sec. 3.8): decode each protein's tokens at L' = floor(rho L) and align the
    decode with TM-align (tmtools; TM normalised by the shorter chain) to its parent (``tm_parent``), to
    a chain of another fold program (``tm_control``) and to another chain of the parent's own program
    (``tm_same``; NaN where the length group has none), partners of the parent's length drawn once per
    protein and used at every rho. The no-treatment decode, from the same noise with no tokens
    (``n_keep=0``), is aligned to the parent and the control too (``tm_parent_k0``, ``tm_control_k0``).
    Rows: protein, length, rho, those scores and ``rmsd_parent`` (aligned)."""
    p = next(model.parameters())
    rows = []
    rng = np.random.default_rng(seed)
    for length, idx, x in tqdm(list(_groups(data)), leave=False, disable=not progress, desc="shrink"):
        x = x.to(p.device, p.dtype)
        _, tok = model.encode(center_and_scale(x))
        labels = data["label"][idx].numpy()
        own = np.arange(len(labels))
        other = [int(rng.choice(own[labels != lab])) if (labels != lab).any() else -1 for lab in labels]
        same = [int(rng.choice(own[(labels == lab) & (own != a)])) if ((labels == lab) & (own != a)).any() else -1
                for a, lab in enumerate(labels)]
        xc = x.cpu().double().numpy()
        for rho in rhos:
            lp = int(np.floor(rho * length))
            dec = {k: model.decode(tok, lp, n_keep=k, steps=steps, eta=0.0, guidance=1.0, score_weight=0.0,
                                   generator=gen(p.device, seed * 1000 + lp)).mul(10.0).cpu().double().numpy()
                   for k in (None, 0)}
            for a, i in enumerate(idx.tolist()):
                if other[a] < 0:
                    continue
                y, y0 = dec[None][a], dec[0][a]
                par = tm_align(y, xc[a])
                rows.append({"protein": i, "length": length, "rho": rho, "tm_parent": par["tm_short"],
                             "tm_control": tm_align(y, xc[other[a]])["tm_short"],
                             "tm_same": tm_align(y, xc[same[a]])["tm_short"] if same[a] >= 0 else np.nan,
                             "tm_parent_k0": tm_align(y0, xc[a])["tm_short"],
                             "tm_control_k0": tm_align(y0, xc[other[a]])["tm_short"], "rmsd_parent": par["rmsd"]})
    return pd.DataFrame(rows)


def native_pairs(data: dict, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """The calibration of TM-align on these chains: each native chain aligned (TM normalised by the shorter
    chain) with a random other native chain of its own fold program and with one of another program, of
    any length. A decode that "keeps the fold" should score against its parent like a same-program
    native does, not like a chain of another program. Rows: protein, tm_same, tm_other."""
    labels = data["label"]
    if not isinstance(labels, torch.Tensor) or labels.ndim != 1 or labels.numel() < 3:
        raise ValueError("data['label'] must be a 1-D tensor with at least 3 chains")
    rng = np.random.default_rng(seed)
    lab = labels.numpy()
    lengths = data["length"].tolist()
    chains = [data["CA"][i, :n].double().numpy() for i, n in enumerate(lengths)]
    rows = []
    for a in tqdm(range(len(lab)), leave=False, disable=not progress, desc="native pairs"):
        same = np.flatnonzero((lab == lab[a]) & (np.arange(len(lab)) != a))
        other = np.flatnonzero(lab != lab[a])
        if len(same) == 0 or len(other) == 0:
            continue
        b, c = int(rng.choice(same)), int(rng.choice(other))
        rows.append({"protein": a, "tm_same": tm_align(chains[a], chains[b])["tm_short"],
                     "tm_other": tm_align(chains[a], chains[c])["tm_short"]})
    return pd.DataFrame(rows)


def shrink_calibration(df: pd.DataFrame, rho: float = 0.8, n_boot: int = 2000, seed: int = 0) -> dict[str, float]:
    """Shrinking judged against its own references (rows of :func:`shrink_study`, which must hold rho and 1),
    each with a 95% bootstrap interval over chains (the same resampled chains for both lengths):

    - ``ratio``: mean TM to the parent at ``rho`` over that at full length;
    - ``gap``: parent - other-program control at ``rho`` (the decode keeps its fold program);
      ``gap_full`` the same at full length and ``retention`` = gap / gap_full (the ratio above the
      control's floor, which unrelated chains already reach);
    - ``gap_same``: parent - another chain of the parent's program at ``rho`` (the decode identifies its
      own parent, not just its program); ``gap_k0``: the no-token decode's parent - control gap."""
    need = {"protein", "rho", "tm_parent", "tm_control", "tm_same", "tm_parent_k0", "tm_control_k0"}
    if not isinstance(df, pd.DataFrame) or not need <= set(df.columns):
        raise ValueError(f"df must be a shrink_study frame with columns {sorted(need)}")
    at = df[np.isclose(df.rho, rho)].set_index("protein")
    full = df[np.isclose(df.rho, 1.0)].set_index("protein")
    if at.empty or full.empty:
        raise ValueError(f"df must hold rows at rho={rho!r} and rho=1.0, got rhos {sorted(df.rho.unique())}")
    full = full.loc[at.index]
    par, ctl, one = at.tm_parent.to_numpy(), at.tm_control.to_numpy(), full.tm_parent.to_numpy()
    gap, gap_full = par - ctl, one - full.tm_control.to_numpy()
    idx = np.random.default_rng(seed).integers(0, len(par), (n_boot, len(par)))
    out = {"tm_parent": float(par.mean()), "tm_control": float(ctl.mean()), "tm_full": float(one.mean())}

    def add(name, value, boot):
        boot = boot[~np.isnan(boot)]
        lo, hi = np.percentile(boot, [2.5, 97.5]) if boot.size else (np.nan, np.nan)
        out.update({name: float(value), f"{name}_lo": float(lo), f"{name}_hi": float(hi)})

    add("ratio", par.mean() / one.mean(), par[idx].mean(1) / one[idx].mean(1))
    add("gap", gap.mean(), gap[idx].mean(1))
    add("gap_full", gap_full.mean(), gap_full[idx].mean(1))
    add("retention", gap.mean() / gap_full.mean(), gap[idx].mean(1) / gap_full[idx].mean(1))
    same = par - at.tm_same.to_numpy()            # NaN where a length group has no other chain of the program
    have = ~np.isnan(same)
    n_have = have[idx].sum(1)
    boot_same = np.where(have, same, 0.0)[idx].sum(1) / np.maximum(n_have, 1)
    add("gap_same", same[have].mean() if have.any() else np.nan, np.where(n_have > 0, boot_same, np.nan))
    k0 = (at.tm_parent_k0 - at.tm_control_k0).to_numpy()
    add("gap_k0", k0.mean(), k0[idx].mean(1))
    return out


def probing_table(models: dict[str, DiffusionTokenizer], data: dict, ntoks: int = 8, folds: int = 5, seed: int = 0,
                  hidden: int = 128, max_iter: int = 400, tasks: dict | None = None,
                  progress: bool = True) -> pd.DataFrame:
    """Fold-program classification from five fixed-size representations, each with a linear and an
    MLP probe (5-fold CV): APT embed (first ``ntoks`` tokens), APT embed of all 16 tokens, and Kanzi's
    mean codes, bag of codes and mean pre-quantisation features. ``tasks``: name -> list of classes
    (default: the 6-way task and the composition-matched 3-way task)."""
    apt, kanzi = models["apt_mini"], models["kanzi_mini"]
    ca, mask = data["CA"], data["mask"]
    feats = {
        f"APT embed (first {ntoks} tokens)": global_embeddings(apt, ca, mask, ntoks),
        f"APT embed (all {apt.cfg.n_tokens} tokens)": global_embeddings(apt, ca, mask, apt.cfg.n_tokens),
        "Kanzi mean-pooled codes": local_token_features(kanzi, ca, mask, "codes"),
        "Kanzi bag of codes": local_token_features(kanzi, ca, mask, "bag"),
        "Kanzi mean-pooled features": local_token_features(kanzi, ca, mask, "features"),
    }
    names = data["classes"]
    tasks = tasks or {"6-way": list(names), "3-way (EEHH/HHEE/HEEH)": ["EEHH", "HHEE", "HEEH"]}
    labels = data["label"].numpy()
    rows = []
    jobs = [(t, f, m) for t in tasks for f in feats for m in ("linear", "mlp")]
    for task, fname, probe in tqdm(jobs, leave=False, disable=not progress, desc="probes"):
        keep = np.isin(np.array(names)[labels], tasks[task])
        acc, sd = probe_accuracy(feats[fname][keep], labels[keep], probe, folds, seed, hidden, max_iter)
        rows.append({"task": task, "representation": fname, "probe": probe, "dims": feats[fname].shape[1],
                     "accuracy": acc, "sd": sd})
    return pd.DataFrame(rows)


def tm_agreement(data: dict, noise=(0.25, 0.5, 1.0, 1.5, 2.0, 3.0), seed: int = 0) -> pd.DataFrame:
    """The book's batched TM-score against TM-align (tmtools) on each chain and a copy perturbed by
    Gaussian noise of each size (angstrom per coordinate); rows: protein, noise, own, tmalign."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _length, idx, x in _groups(data):
        for s in noise:
            y = x + s * torch.randn(x.shape, generator=g)
            own = tm_score(y, x)
            for a, i in enumerate(idx.tolist()):
                rows.append({"protein": i, "noise": s, "own": float(own[a]),
                             "tmalign": tm_align(y[a], x[a])["tm_q"]})
    return pd.DataFrame(rows)
