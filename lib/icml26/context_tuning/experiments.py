"""The runners the notebooks call (tables as pandas DataFrames)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from icml26.core import Comparison, Grid, synchronize, t_interval, tune

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
ALL_METHODS = ("zero-shot", "icl", "ridge", "ct-kv", "ct-kv (no loo)", "ct-kv (no dropout)",
               "ct-kv (no loo, no dropout)", "ct-prompt", "prefix tuning", "prompt tuning", "ttt", "ttt + ct-kv")
#: the methods with nothing to tune, and why (the comparison protocol's ``untuned=``)
UNTUNED = {"zero-shot": "no context: nothing to tune", "icl": "one forward pass: nothing to tune",
           "ridge": "closed form with the family's Bayes penalty (the oracle)"}
#: the name of Prefix Tuning's row at one fixed length (:func:`fixed_length`): "prefix tuning (m=16)"
FIXED_PREFIX = "prefix tuning (m={})"
#: offset of the validation tasks' seed stream (:func:`tasks_for`): never a test task
VAL_OFFSET = 7


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


def clock(device="cpu"):
    """The clock of the cost measurements (:func:`run_method`, :func:`time_per_step`) on ``device``: a
    function returning seconds. On the CPU it is the process's CPU time (``time.process_time``), which a busy
    machine does not stretch: a process that waits for a core accrues none, where its wall time would grow
    with every other process's load (a ratio of two short wall timings on a shared machine is mostly noise).
    It counts every thread of the process: the notebooks pin one torch thread, so it is the work of one core.
    On a GPU the work runs on the device while the host waits, so the clock is wall time
    (``time.perf_counter``) after synchronising the device."""
    if torch.device(device).type == "cpu":
        return time.process_time

    def tick():
        synchronize(device)
        return time.perf_counter()
    return tick


def run_method(method: str, model, t: dict, cfg, generator: torch.Generator, ttt_lr: float = 1e-4, *,
               lr: float | None = None, steps: int | None = None, ttt_steps: int | None = None,
               adapted=None, n_virtual: int | None = None) -> dict:
    """Run one method on a batch of tasks; returns per-task query MSE (numpy ``[B]``) and seconds per task
    (the :func:`clock` time of the whole batch, including CT-KV's initial pass, divided by ``B``: process
    CPU time on the CPU, synchronised wall time on a GPU).

    ``lr`` and ``steps`` override the preset's context-method values (a configuration chosen on
    validation tasks); for ``"ttt"`` its own values are ``ttt_lr`` and ``ttt_steps``. ``"ttt + ct-kv"``
    runs TTT with ``ttt_lr``/``ttt_steps`` and then CT-KV with ``lr``/``steps``, or only the CT-KV stage
    on ``adapted`` (a TTT result already computed on the same tasks). ``"ttt"`` also returns its
    adapted model under ``"adapted"``. ``n_virtual`` overrides the preset's length of Prefix and Prompt Tuning."""
    xd, yd, xq, yq = t["x_demo"], t["y_demo"], t["x_query"], t["y_query"]
    B = xd.shape[0]
    hp = dict(steps=cfg.steps if steps is None else steps, lr=cfg.lr if lr is None else lr, generator=generator)
    ttt_steps = cfg.ttt_steps if ttt_steps is None else ttt_steps
    out = {}
    tick = clock(xd.device)
    t0 = tick()
    if method == "zero-shot":
        mse = (zero_shot_predict(model, xq) - yq).pow(2).mean(-1)
    elif method == "icl":
        mse = (icl_predict(model, xd, yd, xq) - yq).pow(2).mean(-1)
    elif method == "ridge":
        mse = (ridge_predict(xd, yd, xq, t["lam"]) - yq).pow(2).mean(-1)
    elif method in ALL_METHODS and (method.startswith("ct-kv") or method == "ct-prompt"):
        fn = ct_prompt if method == "ct-prompt" else ct_kv
        kv = fn(model, xd, yd, leave_one_out="no loo" not in method,
                token_dropout=0.0 if "no dropout" in method else cfg.rho, **hp)
        mse = evaluate(model, kv, xq, yq)
    elif method in ("prefix tuning", "prompt tuning") or _is_fixed_prefix(method):
        fn = prompt_tuning if method == "prompt tuning" else prefix_tuning
        m_virtual = cfg.n_virtual if n_virtual is None else n_virtual
        mse = evaluate(model, fn(model, xd, yd, n_virtual=m_virtual, **hp), xq, yq)
    elif method == "ttt":
        adapted = test_time_training(model, xd, yd, steps=ttt_steps, lr=ttt_lr)
        mse = evaluate(adapted, adapted.encode_demos(demo_tokens(xd, yd)), xq, yq)
        out["adapted"] = adapted
    elif method == "ttt + ct-kv":
        if adapted is None:
            adapted, kv = ttt_then_ct_kv(model, xd, yd, ttt_steps=ttt_steps, ttt_lr=ttt_lr, token_dropout=cfg.rho, **hp)
        else:
            kv = ct_kv(adapted, xd, yd, token_dropout=cfg.rho, **hp)
        mse = evaluate(adapted, kv, xq, yq)
    else:
        raise ValueError(f"method must be one of {ALL_METHODS}, got {method!r}")
    out.update(mse=mse.detach().cpu().numpy(), seconds=(tick() - t0) / B)
    return out


def _is_fixed_prefix(method) -> bool:
    return isinstance(method, str) and method.startswith(FIXED_PREFIX.split("{")[0]) and method.endswith(")")


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
        for m in methods:  # one generator per method, seeded alike: the same draws for every method
            r = run_method(m, model, t, cfg, torch.Generator().manual_seed(cfg.seed + s), ttt_lr)
            rows.append(dict(condition=c, seed=s, k=t["x_demo"].shape[1], method=m, mse=float(r["mse"].mean()),
                             se=float(r["mse"].std(ddof=1) / np.sqrt(len(r["mse"]))) if len(r["mse"]) > 1 else 0.0,
                             seconds=r["seconds"]))
    return pd.DataFrame(rows)


# -- the comparison protocol: configurations chosen on validation tasks, paired training seeds ----
#: why a best step count at the top of the grid is accepted (the notebooks' text says the same)
STEPS_EDGE = ("the largest step count is the shared budget: no method may take more optimiser steps "
              "than any other")


def grid_for(method: str, cfg) -> Grid:
    """A tuned method's grid: learning rate x optimiser steps, the same number of configurations for every
    method. The learning rates are the method's own entry of ``cfg.lr_grids`` if it has one, else
    ``cfg.lrs`` (``cfg.ttt_lrs`` for TTT's weights); the step counts are ``cfg.step_grid``.

    In notebook 2's setting (:func:`quadratic_setting`, ``cfg.tune_prefix_length``) Prefix Tuning's grid is
    learning rate (``cfg.prefix_lrs``) x length ``m`` (``cfg.prefix_lengths``) at the shared step budget (the
    top of the step grid, the count it chose on every draw with ``m`` fixed): the same number of
    configurations (the presets make it so), with the length tuned instead of the step count."""
    if method not in ALL_METHODS or method in UNTUNED:
        raise ValueError(f"method must be a tuned method of {ALL_METHODS}, got {method!r}")
    lrs = dict(cfg.lr_grids).get(method, cfg.ttt_lrs if method == "ttt" else cfg.lrs)
    if method == "prefix tuning" and getattr(cfg, "tune_prefix_length", False):
        return Grid(lr=list(cfg.prefix_lrs), m=list(cfg.prefix_lengths), steps=[max(cfg.step_grid)])
    return Grid(lr=list(lrs), steps=list(cfg.step_grid))


def quadratic_setting(cfg):
    """Notebook 2's setting: ``cfg`` with the learning-rate grids ``cfg.lr_grids_quadratic`` (three rates per
    method, the same number for every method; the quadratic-cost methods set the notebook's time) and Prefix
    Tuning's length ``m`` tuned (:func:`grid_for`)."""
    from dataclasses import replace

    return replace(cfg, lr_grids=cfg.lr_grids_quadratic, tune_prefix_length=True)


def config_kwargs(method: str, config: dict | None, ttt_config: dict | None = None) -> dict:
    """The :func:`run_method` keywords of a configuration ``{"lr", "steps"}`` (TTT + CT-KV: the CT-KV
    stage's, with TTT's chosen ``ttt_config``)."""
    if method in UNTUNED:
        return {}
    if method == "ttt":
        return dict(ttt_lr=config["lr"], ttt_steps=config["steps"])
    kw = dict(lr=config["lr"], steps=config["steps"])
    if "m" in config:  # Prefix Tuning's length, where it is tuned
        kw["n_virtual"] = int(config["m"])
    if method == "ttt + ct-kv":
        if ttt_config is None:
            raise ValueError("ttt_config: TTT + CT-KV needs TTT's chosen configuration")
        kw.update(ttt_lr=ttt_config["lr"], ttt_steps=ttt_config["steps"])
    return kw


def _pooled(parts: dict) -> tuple[dict, dict]:
    """One task batch from several conditions' batches (same ``k``) and each condition's task slice."""
    keys = [k for k, v in next(iter(parts.values())).items() if torch.is_tensor(v)]
    pooled = {k: torch.cat([p[k] for p in parts.values()]) for k in keys}
    slices, start = {}, 0
    for c, p in parts.items():
        n = p["x_demo"].shape[0]
        slices[c], start = slice(start, start + n), start + n
    return pooled, slices


def _check_offset(val_offset) -> int:
    if isinstance(val_offset, bool) or not isinstance(val_offset, int) or val_offset < 1:
        raise ValueError(f"val_offset must be a positive int (0 is the test stream), got {val_offset!r}")
    return val_offset


def validation_scores(model, cfg, method: str, conditions, *, k: int | None = None, device="cpu",
                      ttt_config: dict | None = None, n_val: int | None = None,
                      val_offset: int = VAL_OFFSET, ttt_models: dict | None = None) -> pd.DataFrame:
    """Validation query MSE of every configuration of :func:`grid_for` on ``n_val`` (default ``cfg.n_val``)
    validation tasks per condition, drawn from their own seed stream (``offset=val_offset``, by default
    :data:`VAL_OFFSET`; never 0, the test tasks' stream; another offset is another draw of validation tasks
    and dropout masks). Tasks of conditions with the same ``k`` run in one batch (tasks do not interact).

    ``ttt_models``: a dict that carries TTT's adapted models from TTT's call to TTT + CT-KV's (the same
    tasks): ``"ttt"`` stores there its model of every configuration, keyed by what fixes the tasks
    (conditions, ``k``, ``n_val``, ``val_offset``) and the configuration; ``"ttt + ct-kv"`` starts its CT-KV stage from the stored model at
    ``ttt_config`` instead of training it again (TTT draws nothing at random, so it is the same model).
    Rows: lr, steps, condition, mse."""
    n_val = cfg.n_val if n_val is None else n_val
    val_offset = _check_offset(val_offset)
    parts = {c: tasks_for(c, cfg, 0, n_tasks=n_val, k=k, device=device, offset=val_offset) for c in conditions}
    groups: dict[int, dict] = {}
    for c, p in parts.items():
        groups.setdefault(p["x_demo"].shape[1], {})[c] = p
    rows = []
    for kk, group in groups.items():
        t, slices = _pooled(group)
        tasks = (tuple(group), kk, n_val, val_offset)   # what fixes this batch's validation tasks
        adapted = None
        if method == "ttt + ct-kv":
            adapted = (ttt_models or {}).get((tasks, ttt_config["lr"], ttt_config["steps"]))
            if adapted is None:
                adapted = test_time_training(model, t["x_demo"], t["y_demo"], steps=ttt_config["steps"],
                                             lr=ttt_config["lr"])
        for config in tqdm(grid_for(method, cfg).configs(), desc=f"validating {method}", leave=False):
            g = torch.Generator().manual_seed(cfg.seed + val_offset)
            r = run_method(method, model, t, cfg, g, adapted=adapted, **config_kwargs(method, config, ttt_config))
            if method == "ttt" and ttt_models is not None:
                ttt_models[(tasks, config["lr"], config["steps"])] = r["adapted"]
            for c, sl in slices.items():
                rows.append(dict(config, condition=c, mse=float(r["mse"][sl].mean())))
    return pd.DataFrame(rows)


def validation_reference(model, cfg, conditions, method: str = "icl", *, k: int | None = None, device="cpu",
                         n_val: int | None = None) -> float:
    """The geometric mean over ``conditions`` of an untuned method's MSE on the validation tasks of
    :func:`validation_scores` (ICL by default): the yardstick for the tuned methods' validation scores."""
    if method not in UNTUNED:
        raise ValueError(f"method must be one of {list(UNTUNED)}, got {method!r}")
    n_val = cfg.n_val if n_val is None else n_val
    logs = [np.log(run_method(method, model, tasks_for(c, cfg, 0, n_tasks=n_val, k=k, device=device, offset=VAL_OFFSET),
                              cfg, None)["mse"].mean()) for c in conditions]
    return float(np.exp(np.mean(logs)))


def tune_methods(model, cfg, methods, conditions, *, k: int | None = None, device="cpu",
                 n_val: int | None = None, val_offset: int = VAL_OFFSET) -> tuple[dict, pd.DataFrame]:
    """Choose each tuned method's configuration on validation tasks (:func:`validation_scores`): the one
    with the lowest geometric mean over ``conditions`` of the validation MSE (every family weighs the same,
    whatever the scale of its errors). One configuration per method serves every condition. TTT + CT-KV
    tunes its CT-KV stage on top of TTT's chosen configuration ("ttt" must be listed before it). A best
    step count at the top of ``cfg.step_grid`` is stated as the shared budget (:data:`STEPS_EDGE`); any
    other edge is left for the notebook to extend or state. ``val_offset`` picks the draw of validation
    tasks (:func:`validation_scores`); its TTT stage is TTT's own validation model at the chosen configuration,
    kept from TTT's call, not trained again. Returns ``{method: Tuned}`` and the scores."""
    tuned, frames, ttt_models = {}, [], {}
    for m in methods:
        if m in UNTUNED:
            continue
        ttt_config = None
        if m == "ttt + ct-kv":
            if "ttt" not in tuned:
                raise ValueError("methods: 'ttt + ct-kv' tunes its CT-KV stage on top of TTT: list 'ttt' before it")
            ttt_config = tuned["ttt"].best
        df = validation_scores(model, cfg, m, conditions, k=k, device=device, ttt_config=ttt_config, n_val=n_val,
                               val_offset=val_offset, ttt_models=ttt_models if "ttt" in m else None)
        grid = grid_for(m, cfg)
        axes = list(grid.axes)
        score = np.exp(df.assign(log=np.log(df.mse)).groupby(axes).log.mean())
        tuned[m] = tune(m, lambda c, sc=score, a=axes: float(sc.loc[tuple(c[x] for x in a)]), grid, progress=False)
        if tuned[m].edges.get("steps") == "upper":
            tuned[m].state_edge("steps", STEPS_EDGE)
        frames.append(df.assign(method=m))
    return tuned, (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame())


def fixed_length(tuned, m: int):
    """Prefix Tuning's row at one length ``m``: a :class:`~icml26.core.Tuned` named ``FIXED_PREFIX.format(m)``
    whose configurations are the ``m`` slice of ``tuned`` (Prefix Tuning's lr x length grid, already scored on
    validation tasks: nothing is run again), best of that slice chosen on the same validation scores. It keeps
    the one-change comparison with CT-KV's cache (16 positions) one change apart when validation picks another
    length for Prefix Tuning."""
    if "m" not in tuned.grid.axes or m not in tuned.grid.axes["m"]:
        raise ValueError(f"m: {m!r} is not a length of {tuned.method}'s grid ({tuned.grid})")
    axes = {a: ([m] if a == "m" else list(v)) for a, v in tuned.grid.axes.items()}
    scores = {tuple(sorted(c.items())): v for c, v in tuned.scores}
    return tune(FIXED_PREFIX.format(m), lambda c: scores[tuple(sorted(c.items()))], Grid(**axes), goal=tuned.goal,
                progress=False)


def cost_of(method: str, tuned: dict) -> int:
    """Optimiser steps of a method at its chosen configuration (TTT + CT-KV: both stages; 0 untuned)."""
    if method in UNTUNED:
        return 0
    steps = int(tuned[method].best["steps"])
    return steps + int(tuned["ttt"].best["steps"]) if method == "ttt + ct-kv" else steps


def redraw_control(model, cfg, conditions, seeds, *, methods=("prefix tuning", "ct-kv"), n_val: int | None = None,
                   n_tasks: int | None = None, val_offset: int = VAL_OFFSET + 1, edge_reason: str = "",
                   keep: dict | None = None, base: pd.DataFrame | None = None, device="cpu") -> tuple[dict, dict]:
    """The validation-draw control: re-tune ``methods`` (:func:`tune_methods`, same grids) on another draw of
    validation tasks (``val_offset``) and score them, with ICL as the control row, on the same test tasks and
    seeds as the main comparison (:func:`heldout_scores`). A chosen learning rate at an end of its grid is
    stated with ``edge_reason`` (the notebook's text must say why it is kept), if one is given. ``keep``:
    ``{method: Tuned}`` of methods scored at the main draw's choice, not re-tuned (to save time); with ``base``,
    the main comparison's :func:`heldout_scores` on the same seeds, ICL's and the kept methods' test scores are
    read from it instead of run again (the same numbers: a seed fixes every draw). Returns the
    ``{method: Tuned}`` of this draw (with ``keep``) and its per-condition :func:`comparisons`."""
    keep = dict(keep or {})
    if set(keep) & set(methods):
        raise ValueError(f"keep: a method is both kept and re-tuned: {sorted(set(keep) & set(methods))}")
    tuned, _ = tune_methods(model, cfg, list(methods), conditions, device=device, n_val=n_val,
                            val_offset=val_offset)
    for t in tuned.values():
        if edge_reason and "lr" in t.edges:
            t.state_edge("lr", edge_reason)
    tuned = {**keep, **tuned}
    reused = ["icl", *keep]
    if base is not None:
        old = base[base.method.isin(reused) & base.seed.isin(list(seeds)) & base.condition.isin(list(conditions))]
        if len(old) != len(reused) * len(list(seeds)) * len(list(conditions)):
            raise ValueError(f"base: needs the rows of {reused} on every seed and condition of the control")
        new = heldout_scores(model, cfg, list(methods), conditions, seeds, tuned, n_tasks=n_tasks, device=device)
        test = pd.concat([old, new], ignore_index=True)
    else:
        test = heldout_scores(model, cfg, [*reused, *methods], conditions, seeds, tuned, n_tasks=n_tasks,
                              device=device)
    return tuned, comparisons(test, tuned, conditions)


def heldout_scores(model, cfg, methods, conditions, seeds, tuned: dict, *, n_tasks: int | None = None,
                   k: int | None = None, device="cpu") -> pd.DataFrame:
    """Every method at its chosen configuration on the test tasks of every condition and training seed.
    Seed ``s`` fixes the tasks (:func:`tasks_for`, the first ``n_tasks`` of each condition) and every
    random draw of the methods (the irrelevant tokens of Prefix and Prompt Tuning, the dropout masks):
    one generator seeded by ``s`` alone, the same for every method, on the same batch (the conditions
    with the same ``k`` run together; tasks do not interact). Rows: condition, seed, k, method, mse
    (mean over tasks), seconds per task, cost (optimiser steps)."""
    rows = []
    for s in tqdm(list(seeds), desc="test seeds", leave=False):
        groups: dict[int, dict] = {}
        for c in conditions:
            t = tasks_for(c, cfg, s, k=k, device=device)
            groups.setdefault(t["x_demo"].shape[1], {})[c] = t if n_tasks is None else subset(t, n_tasks)
        for kk, group in groups.items():
            t, slices = _pooled(group)
            adapted, ttt_secs = None, 0.0
            for m in methods:
                ttt_config = tuned["ttt"].best if m == "ttt + ct-kv" else None
                kw = config_kwargs(m, tuned[m].best if m not in UNTUNED else None, ttt_config)
                reuse = adapted if m == "ttt + ct-kv" else None  # TTT at the same configuration, same tasks
                if m == "ridge":  # each family's own Bayes penalty
                    mse = np.concatenate([run_method(m, model, group[c], cfg, None)["mse"] for c in slices])
                    r = dict(mse=mse, seconds=0.0)
                else:
                    r = run_method(m, model, t, cfg, torch.Generator().manual_seed(s), adapted=reuse, **kw)
                if m == "ttt":
                    adapted, ttt_secs = r["adapted"], r["seconds"]
                for c, sl in slices.items():
                    rows.append(dict(condition=c, seed=s, k=kk, method=m, mse=float(r["mse"][sl].mean()),
                                     seconds=r["seconds"] + (ttt_secs if reuse is not None else 0.0),
                                     cost=cost_of(m, tuned)))
    return pd.DataFrame(rows)


def comparisons(test: pd.DataFrame, tuned: dict, conditions, control: str = "icl",
                pooled: dict | None = None, methods=None, fewer_configs: dict | None = None) -> dict:
    """One :class:`~icml26.core.Comparison` of test MSE per condition (rows: ``methods``, by default those
    of ``test`` in order, per-seed mean MSE, chosen configuration, optimiser steps; ``control`` is the
    no-treatment row) and one more per entry ``name: [conditions]`` of ``pooled``: the per-seed geometric
    mean of the test MSE over those conditions (every family weighs the same). ``fewer_configs``: ``{method:
    why its grid is smaller}`` (the comparison protocol's ``fewer_configs=``)."""
    fewer = dict(fewer_configs or {})
    seeds = sorted(test.seed.unique().tolist())
    methods = list(dict.fromkeys(test.method)) if methods is None else list(methods)

    def build(metric, per_seed):
        cmp = Comparison(metric, goal="min", seeds=seeds, budget="optimiser steps")
        for m in methods:
            cmp.add(m, per_seed(m), tuned=tuned.get(m), untuned=UNTUNED.get(m, ""), cost=cost_of(m, tuned),
                    control=m == control, fewer_configs=fewer.get(m, ""))
        return cmp

    def seeds_of(c, m):
        d = test[(test.condition == c) & (test.method == m)].set_index("seed").mse
        return d.loc[seeds].to_numpy()

    out = {c: build(f"test MSE, {c}", lambda m, c=c: seeds_of(c, m)) for c in conditions}
    for name, conds in (pooled or {}).items():
        out[name] = build(f"test MSE, geometric mean over {', '.join(conds)}",
                          lambda m, cs=tuple(conds): np.exp(np.mean([np.log(seeds_of(c, m)) for c in cs], axis=0)))
    return out


def interval_table(cmps: dict, methods=None, digits: int = 3) -> pd.DataFrame:
    """Mean test MSE and its 95% t interval over training seeds, per method (rows) and comparison
    (columns), with each method's chosen configuration and optimiser steps."""
    rows = {}
    first = next(iter(cmps.values()))
    for m in (methods or list(first.rows)):
        row = {}
        for name, cmp in cmps.items():
            mean, lo, hi = t_interval(cmp.rows[m].per_seed)
            row[name] = f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
        r = first.rows[m]
        row["configuration"] = (", ".join(f"{a}={v:g}" for a, v in r.tuned.best.items()) if r.tuned
                                else "untuned")
        row["optimiser steps"] = int(r.cost)
        rows[m] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def ratio_text(cmp, a: str, b: str) -> str:
    """``"0.67 [0.61, 0.73]"``: the per-seed ratio ``a / b`` and its t interval over seeds."""
    d = cmp.diff(a, b, "ratio")
    return f"{d.mean:.2f} [{d.lo:.2f}, {d.hi:.2f}]"


def k_sweep(model, cfg, tuned: dict, base: pd.DataFrame, methods=("icl", "ct-kv", "ct-kv (no loo)"),
            device="cpu") -> pd.DataFrame:
    """The in-distribution test MSE of ``methods`` at every ``k`` of ``cfg.k_sweep``, each method at the
    configuration chosen in the main experiment, on ``cfg.task_seeds``. ``k = 8`` and ``k = cfg.k`` are
    the main experiment's "few-shot k=8" and "in-distribution" rows of ``base`` (in-distribution tasks at
    8 and ``cfg.k`` demonstrations); the other ``k`` are run here. Rows: k, seed, method, mse."""
    have = {8: "few-shot k=8", cfg.k: "in-distribution"}
    parts = []
    for k in cfg.k_sweep:
        if k in have and have[k] in set(base.condition):
            d = base[(base.condition == have[k]) & base.method.isin(methods)]
        else:
            d = heldout_scores(model, cfg, list(methods), ["in-distribution"], cfg.task_seeds, tuned, k=k,
                               device=device)
        parts.append(d.assign(k=k)[["k", "seed", "method", "mse"]])
    return pd.concat(parts, ignore_index=True)


def per_seed_ratio(df: pd.DataFrame, a: str, b: str, **where) -> np.ndarray:
    """``mse(a) / mse(b)`` per training seed (in seed order) among the rows of ``df`` matching ``where``
    (column=value)."""
    for col, val in where.items():
        df = df[df[col] == val]
    num = df[df.method == a].set_index("seed").mse.sort_index()
    den = df[df.method == b].set_index("seed").mse.sort_index()
    if num.empty or not num.index.equals(den.index):
        raise ValueError(f"a, b: no paired rows for {a!r} and {b!r} where {where}")
    return (num / den).to_numpy()


def interval_text(values, digits: int = 2) -> str:
    """``"0.91 [0.85, 0.97]"``: the mean of per-seed ``values`` and its 95% t interval."""
    mean, lo, hi = t_interval(values)
    return f"{mean:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def k_sweep_summary(df: pd.DataFrame, pairs=(("ct-kv", "icl"), ("ct-kv (no loo)", "icl"),
                                                ("ct-kv", "ct-kv (no loo)"))) -> pd.DataFrame:
    """Per ``k`` of a :func:`k_sweep` table, the mean over seeds of each per-seed ratio ``a / b`` of
    ``pairs`` and its 95% t interval. Rows: k, ratio (``"a / b"``), mean, lo, hi."""
    rows = []
    for k in sorted(df.k.unique()):
        for a, b in pairs:
            mean, lo, hi = t_interval(per_seed_ratio(df, a, b, k=k))
            rows.append(dict(k=int(k), ratio=f"{a} / {b}", mean=mean, lo=lo, hi=hi))
    return pd.DataFrame(rows)


def icl_curves(model, cfg, families=("in-distribution", "w-scale 2", "x-scale 2", "noisy"), device="cpu",
               n_tasks: int = 24):
    """ICL, ridge and zero-shot query MSE against the number of demonstrations ``k`` (``cfg.k_curve``) on
    ``n_tasks`` tasks of seed 0 per family and ``k``."""
    rows = []
    for fam in families:
        for k in cfg.k_curve:
            t = tasks_for(fam, cfg, 0, n_tasks=n_tasks, k=max(k, 1), device=device)
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


def time_per_step(method: str, model, k: int, n_tasks: int = 4, steps: int = 3, repeats: int = 3,
                  device="cpu") -> float:
    """Median seconds of one optimisation step of ``method`` ("ct-kv", "ct-prompt" or "ttt") on ``n_tasks``
    tasks with ``k`` demonstrations: (time with ``steps`` steps - time with 0 steps) / steps, over
    ``repeats`` repeats, after one warm-up call. The time is :func:`clock`'s: process CPU time on the CPU (a
    busy machine does not stretch it; the notebooks pin one torch thread, so it is the step's work on one
    core), synchronised wall time on a GPU."""
    t = sample_tasks(n_tasks, k, 1, ICLTaskConfig(dim=model.dim), torch.Generator().manual_seed(k), device)
    fn = {"ct-kv": lambda s: ct_kv(model, t["x_demo"], t["y_demo"], steps=s),
          "ct-prompt": lambda s: ct_prompt(model, t["x_demo"], t["y_demo"], steps=s),
          "ttt": lambda s: test_time_training(model, t["x_demo"], t["y_demo"], steps=s)}
    if method not in fn:
        raise ValueError(f"method must be one of {list(fn)}, got {method!r}")

    tick = clock(device)

    def timed(s):
        t0 = tick()
        fn[method](s)
        return tick() - t0

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
