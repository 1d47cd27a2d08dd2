"""The runners the notebooks call (tables as pandas DataFrames)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from icml26.core import synchronize

from .baselines import (
    icl_predict,
    prefix_tuning,
    prompt_tuning,
    ridge_predict,
    test_time_training,
    ttt_then_ct_kv,
    zero_shot_predict,
)
from .method import ct_kv, ct_prompt, evaluate
from .model import ICLTaskConfig, demo_tokens, query_tokens, sample_tasks

#: the task families of spec Sec. 7: name -> (task config, number of demonstrations or None = preset's k)
CONDITIONS = {
    "in-distribution": (ICLTaskConfig(), None),
    "w-scale 2": (ICLTaskConfig(w_scale=2.0), None),
    "x-scale 2": (ICLTaskConfig(x_scale=2.0), None),
    "noisy": (ICLTaskConfig(noise=0.5), None),
    "few-shot k=8": (ICLTaskConfig(), 8),
}
ALL_METHODS = ("zero-shot", "icl", "ridge", "ct-kv", "ct-kv (no loo)", "ct-kv (no dropout)", "ct-prompt",
               "prefix tuning", "prompt tuning", "ttt", "ttt + ct-kv")


def tasks_for(condition: str, cfg, seed: int, n_tasks: int | None = None, k: int | None = None,
              device="cpu", offset: int = 0) -> dict:
    """Tasks of one condition for one task-sampling seed (the generator is seeded by condition and seed,
    so every method sees the same tasks). ``offset`` shifts the seed (validation tasks)."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {list(CONDITIONS)}, got {condition!r}")
    tcfg, k_cond = CONDITIONS[condition]
    idx = list(CONDITIONS).index(condition)
    g = torch.Generator().manual_seed(10_000 * (offset + 1) + 100 * idx + seed)
    t = sample_tasks(n_tasks or cfg.n_tasks, k or k_cond or cfg.k, cfg.n_queries, tcfg, g, device)
    t["lam"] = tcfg.ridge_lambda
    return t


def subset(t: dict, n: int) -> dict:
    """The first ``n`` tasks of a task batch."""
    return {k: (v[:n] if torch.is_tensor(v) else v) for k, v in t.items()}


def run_method(method: str, model, t: dict, cfg, generator: torch.Generator, ttt_lr: float = 1e-4) -> dict:
    """Run one method on a batch of tasks; returns per-task query MSE (numpy ``[B]``) and seconds per task
    (wall time of the whole batch, including CT-KV's initial pass, divided by ``B``)."""
    xd, yd, xq, yq = t["x_demo"], t["y_demo"], t["x_query"], t["y_query"]
    B = xd.shape[0]
    hp = dict(steps=cfg.steps, lr=cfg.lr, generator=generator)
    synchronize(xd.device)
    t0 = time.perf_counter()
    if method == "zero-shot":
        mse = (zero_shot_predict(model, xq) - yq).pow(2).mean(-1)
    elif method == "icl":
        mse = (icl_predict(model, xd, yd, xq) - yq).pow(2).mean(-1)
    elif method == "ridge":
        mse = (ridge_predict(xd, yd, xq, t["lam"]) - yq).pow(2).mean(-1)
    elif method.startswith("ct-kv") or method == "ct-prompt":
        fn = ct_prompt if method == "ct-prompt" else ct_kv
        kv = fn(model, xd, yd, leave_one_out=method != "ct-kv (no loo)",
                token_dropout=0.0 if method == "ct-kv (no dropout)" else cfg.rho, **hp)
        mse = evaluate(model, kv, xq, yq)
    elif method in ("prefix tuning", "prompt tuning"):
        fn = prefix_tuning if method == "prefix tuning" else prompt_tuning
        mse = evaluate(model, fn(model, xd, yd, n_virtual=cfg.n_virtual, **hp), xq, yq)
    elif method == "ttt":
        adapted = test_time_training(model, xd, yd, steps=cfg.ttt_steps, lr=ttt_lr)
        mse = evaluate(adapted, adapted.encode_demos(demo_tokens(xd, yd)), xq, yq)
    elif method == "ttt + ct-kv":
        adapted, kv = ttt_then_ct_kv(model, xd, yd, ttt_steps=cfg.ttt_steps, ttt_lr=ttt_lr,
                                     token_dropout=cfg.rho, **hp)
        mse = evaluate(adapted, kv, xq, yq)
    else:
        raise ValueError(f"method must be one of {ALL_METHODS}, got {method!r}")
    synchronize(xd.device)
    secs = (time.perf_counter() - t0) / B
    return {"mse": mse.detach().cpu().numpy(), "seconds": secs}


def compare(model, cfg, conditions, methods, seeds=None, n_tasks: int | None = None, device="cpu",
            ttt_lr: float = 1e-4, k: int | None = None) -> pd.DataFrame:
    """Every method on every condition and task-sampling seed: one row per (condition, seed, method) with
    the mean query MSE over tasks, its standard error, seconds per task and the ICL / ridge MSE of the
    same tasks."""
    rows = []
    seeds = cfg.task_seeds if seeds is None else seeds
    jobs = [(c, s) for c in conditions for s in seeds]
    for c, s in tqdm(jobs, desc="conditions", leave=False):
        t = tasks_for(c, cfg, s, k=k, device=device)
        if n_tasks is not None:
            t = subset(t, n_tasks)
        g = torch.Generator().manual_seed(cfg.seed + s)
        for m in methods:
            r = run_method(m, model, t, cfg, g, ttt_lr)
            rows.append(dict(condition=c, seed=s, k=t["x_demo"].shape[1], method=m, mse=float(r["mse"].mean()),
                             se=float(r["mse"].std(ddof=1) / np.sqrt(len(r["mse"]))) if len(r["mse"]) > 1 else 0.0,
                             seconds=r["seconds"]))
    return pd.DataFrame(rows)


def icl_curves(model, cfg, families=("in-distribution", "w-scale 2", "x-scale 2", "noisy"), device="cpu"):
    """ICL, ridge and zero-shot query MSE against the number of demonstrations ``k`` (``cfg.k_curve``)."""
    rows = []
    for fam in families:
        for k in cfg.k_curve:
            t = tasks_for(fam, cfg, 0, k=max(k, 1), device=device)
            yq = t["y_query"]
            zs = (zero_shot_predict(model, t["x_query"]) - yq).pow(2).mean().item()
            if k == 0:
                icl, ridge = zs, yq.pow(2).mean().item()   # the ridge posterior mean with no data is 0
            else:
                icl = (icl_predict(model, t["x_demo"], t["y_demo"], t["x_query"]) - yq).pow(2).mean().item()
                ridge = (ridge_predict(t["x_demo"], t["y_demo"], t["x_query"], t["lam"]) - yq).pow(2).mean().item()
            rows.append(dict(family=fam, k=k, icl=icl, ridge=ridge, zero_shot=zs))
    return pd.DataFrame(rows)


def curves(model, t: dict, cfg, methods=("ct-kv", "ct-kv (no loo)"), generator=None) -> dict:
    """Training (demonstration) loss and query MSE per optimisation step for each method on tasks ``t``."""
    from .baselines import prefix_tuning as pre
    from .baselines import prompt_tuning as pro

    fns = {"ct-kv": lambda **kw: ct_kv(model, t["x_demo"], t["y_demo"], token_dropout=cfg.rho, **kw),
           "ct-kv (no loo)": lambda **kw: ct_kv(model, t["x_demo"], t["y_demo"], token_dropout=cfg.rho,
                                                leave_one_out=False, **kw),
           "ct-prompt": lambda **kw: ct_prompt(model, t["x_demo"], t["y_demo"], token_dropout=cfg.rho, **kw),
           "prefix tuning": lambda **kw: pre(model, t["x_demo"], t["y_demo"], n_virtual=cfg.n_virtual, **kw),
           "prompt tuning": lambda **kw: pro(model, t["x_demo"], t["y_demo"], n_virtual=cfg.n_virtual, **kw)}
    out = {}
    for m in methods:
        log = {}
        g = generator if generator is not None else torch.Generator().manual_seed(cfg.seed)
        fns[m](steps=cfg.steps, lr=cfg.lr, generator=g, log=log, track=(t["x_query"], t["y_query"]))
        out[m] = log
    return out


def ttt_lr_search(model, cfg, condition: str = "in-distribution", device="cpu") -> pd.DataFrame:
    """Validation MSE of TTT for each learning rate in ``cfg.ttt_lrs`` on ``cfg.n_val`` validation tasks
    (a separate seed stream: never the test tasks), with ICL on the same tasks."""
    t = tasks_for(condition, cfg, 0, n_tasks=cfg.n_val, device=device, offset=7)
    icl = (icl_predict(model, t["x_demo"], t["y_demo"], t["x_query"]) - t["y_query"]).pow(2).mean().item()
    rows = []
    for lr in tqdm(cfg.ttt_lrs, desc="ttt lr", leave=False):
        a = test_time_training(model, t["x_demo"], t["y_demo"], steps=cfg.ttt_steps, lr=lr)
        mse = evaluate(a, a.encode_demos(demo_tokens(t["x_demo"], t["y_demo"])), t["x_query"], t["y_query"])
        rows.append(dict(lr=lr, mse=mse.mean().item(), icl=icl))
    return pd.DataFrame(rows)


def time_per_step(method: str, model, k: int, n_tasks: int = 4, steps: int = 3, repeats: int = 3,
                  device="cpu") -> float:
    """Median wall seconds of one optimisation step of ``method`` ("ct-kv", "ct-prompt" or "ttt") on
    ``n_tasks`` tasks with ``k`` demonstrations: (time with ``steps`` steps - time with 0 steps) / steps."""
    t = sample_tasks(n_tasks, k, 1, ICLTaskConfig(dim=model.dim), torch.Generator().manual_seed(k), device)
    fn = {"ct-kv": lambda s: ct_kv(model, t["x_demo"], t["y_demo"], steps=s),
          "ct-prompt": lambda s: ct_prompt(model, t["x_demo"], t["y_demo"], steps=s),
          "ttt": lambda s: test_time_training(model, t["x_demo"], t["y_demo"], steps=s)}
    if method not in fn:
        raise ValueError(f"method must be one of {list(fn)}, got {method!r}")

    def timed(s):
        synchronize(device)
        t0 = time.perf_counter()
        fn[method](s)
        synchronize(device)
        return time.perf_counter() - t0

    fn[method](1)  # warm-up
    diffs = [(timed(steps) - timed(0)) / steps for _ in range(repeats)]
    return max(float(np.median(diffs)), 1e-9)


def timing_table(model, cfg, methods=("ct-kv", "ct-prompt", "ttt"), device="cpu") -> pd.DataFrame:
    """Seconds per optimisation step against ``k`` (``cfg.timing_ks``) for each method."""
    rows = []
    for k in tqdm(cfg.timing_ks, desc="timing", leave=False):
        for m in methods:
            rows.append(dict(k=k, method=m, seconds=time_per_step(m, model, k, cfg.timing_tasks, cfg.timing_steps,
                                                                  cfg.timing_repeats, device)))
    return pd.DataFrame(rows)


def attention_to_demos(model, t: dict, task: int = 0, query: int = 0):
    """Per-layer attention weights (mean over heads) of one query on the ``k`` demonstrations ``[L,k]``,
    and the demonstrations' inputs' cosine similarity to the query ``[k]``."""
    with torch.no_grad():
        kv = model.encode_demos(demo_tokens(t["x_demo"][task:task + 1], t["y_demo"][task:task + 1]))
        _, attn = model.predict(kv, query_tokens(t["x_query"][task:task + 1, query:query + 1]), return_attn=True)
    w = torch.stack([a[0].mean(0)[0] for a in attn]).cpu().numpy()
    xd, xq = t["x_demo"][task], t["x_query"][task, query]
    cos = torch.nn.functional.cosine_similarity(xd, xq.unsqueeze(0), dim=-1).cpu().numpy()
    return w, cos


def mean_mse(df: pd.DataFrame, condition: str, method: str) -> float:
    """Mean query MSE of ``method`` on ``condition`` over the task-sampling seeds present."""
    d = df[(df.condition == condition) & (df.method == method)]
    if d.empty:
        raise ValueError(f"no rows for condition={condition!r}, method={method!r}")
    return float(d.mse.mean())


def ratio(df: pd.DataFrame, condition: str, num: str, den: str) -> float:
    """``mean_mse(num) / mean_mse(den)`` on one condition (seeds averaged before the ratio)."""
    return mean_mse(df, condition, num) / mean_mse(df, condition, den)


def seed_ratios(df: pd.DataFrame, condition: str, num: str, den: str) -> np.ndarray:
    """The ratio per task-sampling seed (its spread)."""
    a = df[(df.condition == condition) & (df.method == num)].set_index("seed").mse
    b = df[(df.condition == condition) & (df.method == den)].set_index("seed").mse
    return (a / b).dropna().to_numpy()


def mse_table(df: pd.DataFrame, methods=None) -> pd.DataFrame:
    """Mean query MSE (over seeds) per condition (rows) and method (columns)."""
    d = df if methods is None else df[df.method.isin(methods)]
    t = d.groupby(["condition", "method"], sort=False).mse.mean().unstack("method")
    return t[[m for m in (methods or t.columns) if m in t.columns]]


def timing_claim(ledger):
    """A recorder for timing claims: ``ledger.check`` asserted at book/gpu scale (volatile value), and a
    volatile ``ledger.report`` at smoke, where a pass/fail status would differ between runs."""
    def record(name, value, op, threshold, paper="", unit=""):
        if ledger.scale == "smoke":
            return ledger.report(name, value, paper=paper, volatile=True, unit=unit,
                                 note=f"checked ({op} {threshold}) at book and gpu scale")
        return ledger.check(name, value, op, threshold, paper=paper, assert_at=("book", "gpu"), volatile=True,
                            unit=unit)
    return record
