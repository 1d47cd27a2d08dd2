r"""Runners the notebooks call: operator parity against cvxpy, the head-tail bandit and the
token-level task, all trained with GRPO + the clipped surrogate with a chosen bound rule.

Every trainer follows the BandPO update (spec Sec. 3.5): sample a group per prompt from
:math:`\pi_{old}`; group-normalised advantages; bounds :math:`(\ell, u)` from the old probability of
each sampled token, once per rollout batch and without gradient; then ``inner_steps`` optimiser
steps on the clipped surrogate. Bounds can only bind from the second inner step on (at the first,
:math:`\pi_\theta = \pi_{old}` and every ratio is 1).
"""

from __future__ import annotations

import copy
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from .baselines import evaluate_rules, make_bound_fn, split_bounds
from .envs import HeadTailBandit, TokenChainTask, _check_pos_int, dedupe_on_host
from .method import (
    DIVERGENCES,
    _bisect,
    band_bounds,
    band_bounds_cvxpy,
    clipped_surrogate_loss,
    deferred_checks,
    grpo_advantages,
    p_min_for,
)

P_BINS = (0.0, 0.02, 0.1, 0.5, 0.9, 1.0 + 1e-9)  # old-probability bins of the clip diagnostics
BIN_LABELS = ("[0, .02)", "[.02, .1)", "[.1, .5)", "[.5, .9)", "[.9, 1]")

BoundFn = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


CLIP_ROWS = ("up", "down", "samples", "positive", "negative")  # rows of the clip-count arrays


@functools.lru_cache(maxsize=8)
def _bin_edges(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The inner edges of :data:`P_BINS` on ``device``, copied there once (not once per iteration)."""
    return torch.tensor(P_BINS[1:-1], dtype=dtype, device=device)


def _clip_counts(p_old: torch.Tensor, up: torch.Tensor, down: torch.Tensor, adv: torch.Tensor) -> np.ndarray:
    """:func:`_clip_counts_t` read back as a NumPy array."""
    return _clip_counts_t(p_old, up, down, adv).cpu().numpy()


def _clip_counts_t(p_old: torch.Tensor, up: torch.Tensor, down: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """Counts by old-probability bin: ``[..., 5, n_bins]`` with rows :data:`CLIP_ROWS` (upward clips,
    downward clips, all samples, samples with positive advantage, samples with negative advantage).

    Leading axes of ``p_old`` beyond the last one (e.g. stacked replicas ``[S, N]``) are kept; ``adv``
    broadcasts against ``p_old``. An upward clip needs a positive advantage and a downward one a
    negative advantage, so ``up / positive`` and ``down / negative`` are the conditional rates.
    """
    lead = p_old.shape[:-1] if p_old.dim() > 1 else ()
    p2 = p_old.reshape(int(np.prod(lead)) if lead else 1, -1)  # [R, N]
    R, n = p2.shape[0], len(P_BINS) - 1
    edges = _bin_edges(p_old.dtype, p_old.device)
    b = torch.bucketize(p2, edges, right=True) + n * torch.arange(R, device=p_old.device)[:, None]
    a = torch.broadcast_to(adv, p_old.shape).reshape(R, -1)
    weights = (up, down, torch.ones_like(p_old), a > 0, a < 0)
    out = torch.stack([torch.bincount(b.reshape(-1), weights=w.reshape(-1).to(p_old.dtype), minlength=R * n)
                       for w in weights])  # [5, R * n]
    out = out.reshape(5, R, n).transpose(0, 1)  # [R, 5, n], on the device (read back by the caller)
    return out.reshape(*lead, 5, n) if lead else out[0]


# ---------------------------------------------------------------------------------------------
# Notebook 2: the head-tail bandit
# ---------------------------------------------------------------------------------------------


def train_bandit(env: HeadTailBandit, bound_fn: BoundFn | Sequence[BoundFn], iters: int = 150, group_size: int = 16,
                 inner_steps: int = 8, lr: float | Sequence[float] = 0.1, seed: int | Sequence[int] = 0,
                 dual_clip: float | None = None):
    """GRPO on tabular logits ``[C, K]`` with per-sample bounds from ``bound_fn(p_old)``.

    Common random numbers: the uniforms that drive sampling and rewards come from one generator
    seeded by ``seed``, so two runs that differ only in the bound rule see the same randomness.
    ``seed`` may be a list: then the seeds run as independent replicas stacked in one tensor
    ``[S, C, K]`` (replica ``s`` draws its initial-logit noise and its samples with ``seed[s]``; the loss
    is the sum of the replicas' losses, so each replica gets exactly its own gradient and, Adam being
    element-wise, follows the same trajectory as a run on its own) and every output gains a leading
    axis ``S``. ``bound_fn`` may also be a list of ``R`` rules: then the ``R x S`` (rule, seed) pairs
    are all replicas of the same batched run and a list of ``R`` result dicts is returned. ``lr`` may
    then be a list of ``R`` learning rates, one per rule (each rule's replicas are a separate Adam
    parameter group; Adam being element-wise, a replica follows the trajectory of a run on its own).

    Returns per-iteration arrays (index 0 = initial policy): ``reward`` (exact expected reward),
    ``entropy``, ``tail_prob``, ``head_prob`` ``[iters + 1]``; ``clip`` ``[iters, 5, n_bins]`` (rows
    :data:`CLIP_ROWS`: upward clips, downward clips, samples, samples with positive and with negative
    advantage, at the last inner step, by old-probability bin); ``logits``.

    ``dual_clip``: the dual-clip constant ``c`` of :func:`clipped_surrogate_loss` (``None``: off). The
    official recipes run ``c = 10``; the notebook uses that and shows it changes nothing here.
    """
    iters = _check_pos_int(iters, "iters")
    group_size = _check_pos_int(group_size, "group_size", minimum=2)
    inner_steps = _check_pos_int(inner_steps, "inner_steps")
    many = isinstance(bound_fn, (list, tuple))
    rules = list(bound_fn) if many else [bound_fn]
    if not rules or not all(callable(r) for r in rules):
        raise TypeError("bound_fn must be a bound rule p -> (lo, hi) or a non-empty list of them")
    lrs = list(lr) if isinstance(lr, (list, tuple, np.ndarray)) else [lr] * len(rules)
    if len(lrs) != len(rules):
        raise ValueError(f"lr must be a number or a list of one learning rate per rule ({len(rules)}), got {len(lrs)}")
    for v in lrs:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating)) or not (math.isfinite(v) and v > 0):
            raise ValueError(f"lr must be finite and > 0, got {v!r}")
    single = isinstance(seed, (int, np.integer))
    seeds = [int(seed)] if single else [int(s) for s in seed]
    if not seeds:
        raise ValueError("seed must be an int or a non-empty list of ints")
    dev = env.device
    R, S, C, G = len(rules), len(seeds), env.n_contexts, group_size
    N = R * S  # replicas, rule-major: replica r * S + s runs rule r on seed s
    # common random numbers: every rule draws the same uniforms for a seed, so one generator per seed
    # serves all rules (the draws have fixed shapes, never depending on the actions)
    gens = [torch.Generator(device=dev).manual_seed(s) for s in seeds]
    init = [env.init_logits()] if single else [env.init_logits(seed=s) for s in seeds]
    init = torch.stack(init)  # [S, C, K]
    if len(set(lrs)) == 1:  # one parameter tensor [N, C, K]
        params = [torch.nn.Parameter(torch.cat([init] * R))]
        opt = torch.optim.Adam(params, lr=float(lrs[0]), betas=(0.9, 0.999))
    else:  # one parameter group per rule, each [S, C, K]
        params = [torch.nn.Parameter(init.clone()) for _ in rules]
        opt = torch.optim.Adam([{"params": [q], "lr": float(v)} for q, v in zip(params, lrs)], betas=(0.9, 0.999))

    def stacked() -> torch.Tensor:  # the replicas' logits [N, C, K], rule-major
        return params[0] if len(params) == 1 else torch.cat(params)

    # per-iteration records stay on the device and are read back once after the loop (issue 43)
    hist_t: list[torch.Tensor] = []  # [4, N] per record: reward, entropy, tail_prob, head_prob
    clip_t: list[torch.Tensor] = []  # [N, 5, n_bins] per iteration

    def record() -> None:
        with torch.no_grad():
            logq = torch.log_softmax(stacked(), -1)  # [N, C, K]
            q = logq.exp()
            hist_t.append(torch.stack([env.expected_reward(q).mean(-1), (-(q * logq).sum(-1)).mean(-1),
                                       q[..., 1].mean(-1), q[..., 0].mean(-1)]))

    def bounds(p_old: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # per-sample bounds of each rule on its own replicas; a rule is elementwise in p, so on the CPU it is
        # evaluated once per distinct old probability (a group repeats actions) and scattered back; on a GPU
        # on every sample (dedupe_on_host: torch.unique would cost a host sync per iteration). Band rules of
        # one divergence share one batched call (evaluate_rules)
        if not dedupe_on_host(p_old):
            out = evaluate_rules(rules, [p_old[r * S:(r + 1) * S] for r in range(R)])
            return torch.cat([lo for lo, _ in out]), torch.cat([hi for _, hi in out])
        lo, hi = torch.empty_like(p_old), torch.empty_like(p_old)
        uniq = [torch.unique(p_old[r * S:(r + 1) * S], return_inverse=True) for r in range(R)]
        for r, (lo_u, hi_u) in enumerate(evaluate_rules(rules, [u for u, _ in uniq])):
            lo[r * S:(r + 1) * S], hi[r * S:(r + 1) * S] = lo_u[uniq[r][1]], hi_u[uniq[r][1]]
        return lo, hi

    record()
    with deferred_checks():  # the operators' value checks are read once, after the loop
        _bandit_loop(iters, inner_steps, gens, stacked, opt, env, C, G, N, R, init.dtype, dev, bounds, dual_clip,
                     record, clip_t)
    rec = torch.stack(hist_t, -1).double().cpu().numpy()  # [4, N, iters + 1]: the one read of the records
    hist = dict(zip(("reward", "entropy", "tail_prob", "head_prob"), rec))
    clip = torch.stack(clip_t, 1).double().cpu().numpy()  # [N, iters, 5, n_bins]
    out = {**hist, "clip": clip, "logits": stacked().detach().cpu().numpy()}
    per_rule = [{k: v[r * S:(r + 1) * S] for k, v in out.items()} for r in range(R)]
    if single:
        per_rule = [{k: v[0] for k, v in d.items()} for d in per_rule]
    return per_rule if many else per_rule[0]


def _bandit_loop(iters, inner_steps, gens, stacked, opt, env, C, G, N, R, dtype, dev, bounds, dual_clip, record,
                 clip_t) -> None:
    """The iterations of :func:`train_bandit` (no host read: records and clip counts stay on the device)."""
    for _it in range(iters):
        with torch.no_grad():  # rollout with pi_old
            logp_all_old = torch.log_softmax(stacked(), -1)  # [N, C, K]
            draws = [(torch.rand(C, G, generator=g, device=dev, dtype=dtype),  # sampling, then reward coin
                      torch.rand((C, G), generator=g, device=dev, dtype=torch.float64)) for g in gens]
            u = torch.stack([d[0] for d in draws]).repeat(R, 1, 1)  # [N, C, G], rule-major like the replicas
            coin = torch.stack([d[1] for d in draws]).repeat(R, 1, 1)
            cdf = logp_all_old.exp().cumsum(-1)  # [N, C, K]
            actions = torch.searchsorted(cdf, u).clamp(max=env.n_actions - 1)  # inverse CDF   [N, C, G]
            rewards = env.rewards_from_coin(actions, coin)
            adv = grpo_advantages(rewards.reshape(N * C, G)).reshape(N, C * G)  # per context
            logp_old = logp_all_old.gather(2, actions).reshape(N, C * G)  # [N, C*G]
            lo, hi = bounds(logp_old.exp())  # once per rollout batch
        for _ in range(inner_steps):
            logp = torch.log_softmax(stacked(), -1).gather(2, actions).reshape(N, C * G)
            # rows = replicas: seq-mean-token-mean = mean over replicas of each one's token mean
            loss, stats = clipped_surrogate_loss(logp, logp_old, adv, lo, hi, dual_clip=dual_clip,
                                                 agg="seq-mean-token-mean")
            opt.zero_grad(set_to_none=True)
            (N * loss).backward()  # sum of the replicas' losses
            opt.step()
        clip_t.append(_clip_counts_t(logp_old.exp(), stats["clipped_up"], stats["clipped_down"], adv))
        record()


def bandit_methods(delta: float = 0.05) -> dict[str, BoundFn]:
    """The rules compared in notebook 2 (all at the official hyper-parameters)."""
    names = {"Clip": "clip", "Clip-Higher": "clip_higher", "DCPO": "dcpo", "Band-KL": "band_kl",
             "Band-TV": "band_tv", "Band-chi2": "band_chi2", "Band-KL-relax": "band_kl_relax"}
    return {label: make_bound_fn(rule, **({"delta": delta} if rule.startswith("band") else {}))
            for label, rule in names.items()}


def run_bandit(methods: dict[str, BoundFn], seeds: Sequence[int], *, n_contexts: int = 64, n_actions: int = 16,
               iters: int = 150, group_size: int = 16, inner_steps: int = 8, lr: float | Mapping[str, float] = 0.1,
               dual_clip: float | None = 10.0, device="cpu", progress: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """Train every method on every seed ((method, seed) pairs as replicas of one batched run; the
    same initial logits and random numbers for every method: common random numbers). ``lr``: one
    learning rate, or ``{method: lr}`` (each method's tuned value). ``progress`` is
    kept for API compatibility (one batched run has nothing to count). ``dual_clip``: the dual-clip
    constant (10 as in the official recipes; ``None`` turns it off).
    Returns ``{method: {metric: array [n_seeds, ...]}}``."""
    if isinstance(lr, Mapping):
        if set(lr) != set(methods):
            raise ValueError(f"lr: give one learning rate per method {sorted(methods)}, got {sorted(lr)}")
        lr = [lr[m] for m in methods]
    env = HeadTailBandit(n_contexts=n_contexts, n_actions=n_actions, device=device)
    res = train_bandit(env, list(methods.values()), iters=iters, group_size=group_size, inner_steps=inner_steps,
                       lr=lr, seed=list(seeds), dual_clip=dual_clip)  # every (rule, seed) pair: one batched run
    return dict(zip(methods, res))


# the families tuned in notebook 2: label -> (rule of make_bound_fn, its knob in a configuration)
TUNED_FAMILIES = {"Band-KL": ("band_kl", "delta"), "Clip": ("clip", "eps"), "no clipping": ("none", None)}


def bandit_rule(family: str, config: Mapping) -> BoundFn:
    """The bound rule of a tuned family at one configuration (its ``lr`` entry is ignored):
    ``"Band-KL"`` at radius ``config["delta"]``, ``"Clip"`` at ``[1 - eps, 1 + eps]`` with
    ``config["eps"]``, ``"no clipping"`` (no knob)."""
    if family not in TUNED_FAMILIES:
        raise ValueError(f"family must be one of {list(TUNED_FAMILIES)}, got {family!r}")
    rule, knob = TUNED_FAMILIES[family]
    if knob is None:
        return make_bound_fn(rule)
    if knob not in config:
        raise ValueError(f"config: {family} needs {knob!r}, got {dict(config)}")
    v = float(config[knob])
    return make_bound_fn(rule, delta=v) if knob == "delta" else make_bound_fn(rule, eps_low=v, eps_high=v)


def config_label(family: str, config: Mapping) -> str:
    """``"Band-KL delta=0.01 lr=0.1"``: one run's name in a sweep."""
    return " ".join([family] + [f"{k}={v:g}" for k, v in config.items()])


def sweep_bandit(grids: Mapping[str, object], seeds: Sequence[int], **kw) -> dict[str, list[tuple[dict, dict]]]:
    """Train every configuration of every family's grid (:class:`icml26.core.compare.Grid` with an
    ``lr`` axis and the family's knob, see :data:`TUNED_FAMILIES`) on ``seeds``, all of them
    replicas of one batched run (each configuration with its own learning rate, every seed with the
    same initial logits and random numbers for every configuration).

    Used on *validation* seeds to tune (:func:`validation_score`). ``kw``: as for :func:`run_bandit`
    (without ``lr``). Returns ``{family: [(config, run), ...]}`` in the grid's order, ``run`` as in
    :func:`run_bandit`."""
    if "lr" in kw:
        raise ValueError("lr: the learning rate is an axis of each grid, not a keyword")
    rules, lrs, keys = {}, {}, []
    for family, grid in grids.items():
        for config in grid.configs():
            if "lr" not in config:
                raise ValueError(f"grids: {family}'s grid needs an 'lr' axis, got {list(config)}")
            name = config_label(family, config)
            rules[name], lrs[name] = bandit_rule(family, config), float(config["lr"])
            keys.append((family, config, name))
    runs = run_bandit(rules, seeds, lr=lrs, **kw)
    out: dict[str, list[tuple[dict, dict]]] = {f: [] for f in grids}
    for family, config, name in keys:
        out[family].append((config, runs[name]))
    return out


RUN_STATS = ("final", "mean")


def run_score(run: dict[str, np.ndarray], key: str = "reward", stat: str = "final") -> np.ndarray:
    """One number per seed of a run: the ``"final"`` value of ``key`` (after the last iteration) or
    its ``"mean"`` over iterations 1, ..., iters (the area under the learning curve per iteration:
    how fast a rule learns, which still ranks rules that all end at the optimum)."""
    if stat not in RUN_STATS:
        raise ValueError(f"stat must be one of {RUN_STATS}, got {stat!r}")
    x = run[key]
    return x[:, -1] if stat == "final" else x[:, 1:].mean(axis=1)


def validation_score(sweep: list[tuple[dict, dict]], key: str = "reward", stat: str = "final") -> Callable[[dict], float]:
    """``evaluate(config)`` for :func:`icml26.core.compare.tune`: :func:`run_score` of that
    configuration's sweep run, averaged over the (validation) seeds it was trained on."""
    table = {tuple(sorted(c.items())): float(run_score(r, key, stat).mean()) for c, r in sweep}
    return lambda config: table[tuple(sorted(config.items()))]


def sweep_frame(sweeps: Mapping[str, list[tuple[dict, dict]]], early: int = 5) -> pd.DataFrame:
    """One row per (family, configuration) of :func:`sweep_bandit`: final expected reward (mean over
    the seeds) and its standard deviation, the mean reward over the run (:func:`run_score`), and the
    entropy at iteration ``early`` (mean over seeds)."""
    rows = []
    for family, runs in sweeps.items():
        for config, r in runs:
            if not 0 <= early < r["entropy"].shape[1]:
                raise ValueError(f"early must be an iteration in 0..{r['entropy'].shape[1] - 1}, got {early}")
            rows.append({"method": family, **config, "final reward": r["reward"][:, -1].mean(),
                         "std": r["reward"][:, -1].std(), "mean reward": run_score(r, stat="mean").mean(),
                         f"entropy @ {early}": r["entropy"][:, early].mean()})
    return pd.DataFrame(rows)


def ablation_rules(deltas: Sequence[float] = (0.01, 0.02, 0.1, 0.2),
                   epsilons: Sequence[float] = (0.05, 0.1, 0.3)) -> dict[str, BoundFn]:
    """The controls of notebook 2: Band-KL over radii ``delta=..``, Clip over ``eps=..`` (symmetric),
    no clipping (``none``), and the two splits of the band (``Band upper + Clip lower`` and
    ``Clip upper + Band lower``, Band-KL at delta 0.05 and Clip at eps 0.2)."""
    band, clip = make_bound_fn("band_kl"), make_bound_fn("clip")
    rules = {f"delta={d:g}": make_bound_fn("band_kl", delta=d) for d in deltas}
    rules.update({f"eps={e:g}": make_bound_fn("clip", eps_low=e, eps_high=e) for e in epsilons})
    rules["none"] = make_bound_fn("none")
    rules["Band upper + Clip lower"] = split_bounds(lower=clip, upper=band)
    rules["Clip upper + Band lower"] = split_bounds(lower=band, upper=clip)
    return rules


def regime_rules() -> dict[str, BoundFn]:
    """The rules re-run in gentler regimes: Clip, Band-KL, no clipping and the head-matched pair
    Band-KL(0.01) / Clip(0.05)."""
    return {"Clip": make_bound_fn("clip"), "Band-KL": make_bound_fn("band_kl"), "none": make_bound_fn("none"),
            "delta=0.01": make_bound_fn("band_kl", delta=0.01),
            "eps=0.05": make_bound_fn("clip", eps_low=0.05, eps_high=0.05)}


def bandit_kwargs(cfg, **override) -> dict:
    """The keyword arguments of :func:`run_bandit` taken from a :class:`~icml26.bandpo.presets.BanditPreset`
    (``override`` replaces any of them: one change per ablation)."""
    keys = ("n_contexts", "n_actions", "iters", "group_size", "inner_steps", "lr", "dual_clip")
    return {**{k: getattr(cfg, k) for k in keys}, **override}


def entropy_window(runs: dict[str, dict[str, np.ndarray]], method: str, reference: str = "Clip",
                   key: str = "entropy") -> dict[str, float]:
    """Where ``method``'s seed-mean entropy is above ``reference``'s.

    Returns ``first`` and ``last`` iteration of the first run of iterations (from iteration 1 on) in
    which it is above, ``n_above`` (length of that run), and ``frac_below_after`` (fraction of the
    iterations after that run in which it is below)."""
    d = runs[method][key].mean(0) - runs[reference][key].mean(0)  # [iters + 1]
    above = d[1:] > 0
    if not above.any():
        return {"first": -1, "last": -1, "n_above": 0, "frac_below_after": float((d[1:] < 0).mean())}
    first = int(np.argmax(above))
    last = first
    while last + 1 < above.size and above[last + 1]:
        last += 1
    after = d[1:][last + 1:]
    return {"first": first + 1, "last": last + 1, "n_above": last - first + 1,
            "frac_below_after": float((after < 0).mean()) if after.size else float("nan")}


def paired_gain(runs: dict[str, dict[str, np.ndarray]], method: str, reference: str,
                key: str = "reward", other: dict[str, dict[str, np.ndarray]] | None = None) -> dict[str, float]:
    """Final ``key`` of ``method`` minus ``reference`` (taken from ``other`` when given), paired by seed.

    Returns ``gain`` (mean over seeds), ``se`` (its standard error, ddof 1), ``t`` (gain / se),
    ``won`` (seeds where ``method`` is higher) and ``n`` (seeds)."""
    ref = (other if other is not None else runs)[reference][key][:, -1]
    g = runs[method][key][:, -1] - ref
    se = float(g.std(ddof=1) / np.sqrt(g.size)) if g.size > 1 else float("nan")
    return {"gain": float(g.mean()), "se": se, "t": float(g.mean() / se) if se > 0 else float("nan"),
            "won": int((g > 0).sum()), "n": int(g.size)}


def clip_table(runs: dict[str, dict[str, np.ndarray]], first: int | None = None) -> pd.DataFrame:
    """Clip fractions by old-probability bin, pooled over seeds and the first ``first`` iterations
    (all when ``None``).

    ``up`` is the fraction of *positive-advantage* samples clipped upwards and ``down`` the fraction
    of *negative-advantage* samples clipped downwards (a sample can only be clipped in the direction
    its advantage pushes, so these are the rates that mean something); ``up_all`` and ``down_all``
    divide by every sample in the bin instead. ``samples``, ``positive``, ``negative``: counts."""
    rows = []
    for m, d in runs.items():
        c = d["clip"][:, :first].sum(axis=(0, 1))  # [5, bins]
        n, npos, nneg = (np.maximum(c[k], 1) for k in (2, 3, 4))
        for j, lab in enumerate(BIN_LABELS):
            rows.append({"method": m, "p bin": lab, "up": c[0, j] / npos[j], "down": c[1, j] / nneg[j],
                         "up_all": c[0, j] / n[j], "down_all": c[1, j] / n[j], "samples": int(c[2, j]),
                         "positive": int(c[3, j]), "negative": int(c[4, j])})
    df = pd.DataFrame(rows)
    df["p bin"] = pd.Categorical(df["p bin"], categories=list(BIN_LABELS), ordered=True)
    return df


def bandit_summary(runs: dict[str, dict[str, np.ndarray]], early: int = 5, reference: str = "Clip") -> pd.DataFrame:
    """One row per method: final expected reward (mean, std over seeds), its gain over ``reference``
    and the number of seeds where it wins (common random numbers make seeds paired), entropy at
    iteration ``early``, final tail probability."""
    ref = runs[reference]["reward"][:, -1] if reference in runs else None
    rows = []
    for m, d in runs.items():
        final = d["reward"][:, -1]
        row = {"method": m, "final reward": final.mean(), "std": final.std(),
               f"entropy @ {early}": d["entropy"][:, early].mean(), "final tail prob": d["tail_prob"][:, -1].mean()}
        if ref is not None:
            row[f"gain over {reference}"] = (final - ref).mean()
            row["seeds won"] = int((final > ref).sum())
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


# ---------------------------------------------------------------------------------------------
# Notebook 3: the token-level task
# ---------------------------------------------------------------------------------------------


def warm_start(task: TokenChainTask, steps: int = 300, batch: int = 256, correct_frac: float = 0.05,
               lr: float = 3e-3, seed: int = 0, hidden: int = 128) -> torch.nn.Module:
    """Supervised warm start on a mixture of chains (``correct_frac`` correct, the rest shortcut), so
    that the correct token at the critical position is rare and every other token is confident."""
    torch.manual_seed(seed)
    policy = task.make_policy(hidden)
    gen = torch.Generator(device=task.device).manual_seed(seed + 10_000)
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    for _ in range(steps):
        prompts = torch.randint(task.P, (batch,), generator=gen, device=task.device)
        use_c = torch.rand(batch, generator=gen, device=task.device) < correct_frac
        target = torch.where(use_c[:, None], task.correct[prompts], task.shortcut[prompts])  # [B, T]
        loss = -task.token_logprobs(policy, prompts, target).mean()  # token-level cross-entropy
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return policy


def train_token_policy(task: TokenChainTask, bound_fn: BoundFn, iters: int = 200, prompts_per_iter: int = 32,
                       group_size: int = 16, inner_steps: int = 4, lr: float = 3e-3, seed: int = 0,
                       device=None, warm_steps: int = 300, dual_clip: float | None = 10.0,
                       eval_every: int = 1, policy: torch.nn.Module | None = None) -> dict[str, np.ndarray]:
    """GRPO with token-level bounds on :class:`TokenChainTask` (seq-mean-token-mean loss, dual clip
    10, grad-norm clip 1.0, Adam), after a seeded supervised warm start shared by all bound rules.

    Returns per-evaluation arrays (exact metrics on all prompts: ``expected_reward``, ``pass_at_g``,
    ``critical_p``, ...), the per-iteration sampled ``entropy`` and ``clip`` counts
    ``[iters, 5, n_bins]`` (rows :data:`CLIP_ROWS`) by old-probability bin (last inner step). ``policy``: a warm-started
    policy to start from (copied, not modified) instead of running :func:`warm_start` here.
    ``device`` is accepted for API symmetry; everything runs on the task's device.
    """
    iters = _check_pos_int(iters, "iters")
    inner_steps = _check_pos_int(inner_steps, "inner_steps")
    group_size = _check_pos_int(group_size, "group_size", minimum=2)
    prompts_per_iter = _check_pos_int(prompts_per_iter, "prompts_per_iter")
    policy = warm_start(task, steps=warm_steps, seed=seed) if policy is None else copy.deepcopy(policy)
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    gen = torch.Generator(device=task.device).manual_seed(seed)
    G, n = group_size, prompts_per_iter
    evals: dict[str, list] = {"iteration": []}
    entropy_t: list[torch.Tensor] = []  # per iteration, on the device: read back once after the loop
    clip_t: list[torch.Tensor] = []

    def evaluate(i: int) -> None:  # exact metrics read back: once per evaluation interval (eval_every)
        evals["iteration"].append(i)
        for k, v in task.exact_metrics(policy, G).items():
            evals.setdefault(k, []).append(v)

    evaluate(0)
    with deferred_checks():  # the operators' value checks are read once, after the loop
        for it in range(iters):
            prompts = torch.randperm(task.P, generator=gen, device=task.device)[:n].repeat_interleave(G)  # [B]
            responses, ent = task.sample(policy, prompts, gen)  # [B, T]
            rewards = task.rewards(prompts, responses, gen).reshape(n, G)
            adv = grpo_advantages(rewards).reshape(-1)  # [B]
            with torch.no_grad():
                logp_old = task.token_logprobs(policy, prompts, responses)  # [B, T]
                lo, hi = bound_fn(logp_old.exp())  # per-token bounds, once per rollout batch   [B, T]
            for _ in range(inner_steps):
                logp = task.token_logprobs(policy, prompts, responses)  # [B, T]
                loss, stats = clipped_surrogate_loss(logp, logp_old, adv, lo, hi, dual_clip=dual_clip,
                                                     agg="seq-mean-token-mean")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                opt.step()
            entropy_t.append(ent.mean())
            clip_t.append(_clip_counts_t(logp_old.exp().reshape(-1), stats["clipped_up"].reshape(-1),
                                         stats["clipped_down"].reshape(-1),
                                         adv[:, None].expand_as(logp_old).reshape(-1)))
            if (it + 1) % eval_every == 0 or it + 1 == iters:
                evaluate(it + 1)
    entropy = torch.stack(entropy_t).double().cpu().numpy()
    clip = torch.stack(clip_t).double().cpu().numpy()
    return {**{k: np.asarray(v) for k, v in evals.items()}, "entropy": entropy, "clip": clip}


def run_token(methods: dict[str, BoundFn], seeds: Sequence[int], *, n_prompts: int = 128, seq_len: int = 6,
              vocab: int = 12, iters: int = 200, prompts_per_iter: int = 32, group_size: int = 16,
              inner_steps: int = 4, lr: float = 3e-3, warm_steps: int = 300, eval_every: int = 10,
              hidden: int = 128, device="cpu", progress: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """Every method on every seed (task, warm start and sampling seeded alike across methods; the
    warm start, with an MLP of width ``hidden``, is computed once per seed and shared)."""
    out: dict[str, dict[str, list]] = {m: {} for m in methods}
    jobs = [(m, s) for s in seeds for m in methods]
    warm: dict[int, tuple] = {}
    for m, s in tqdm(jobs, desc="token runs", leave=False, disable=not progress):
        if int(s) not in warm:
            task = TokenChainTask(n_prompts=n_prompts, seq_len=seq_len, vocab=vocab, seed=int(s), device=device)
            warm = {int(s): (task, warm_start(task, steps=warm_steps, seed=int(s), hidden=hidden))}
        task, policy = warm[int(s)]
        res = train_token_policy(task, methods[m], iters=iters, prompts_per_iter=prompts_per_iter,
                                 group_size=group_size, inner_steps=inner_steps, lr=lr, seed=int(s),
                                 eval_every=eval_every, policy=policy)
        for k, v in res.items():
            out[m].setdefault(k, []).append(v)
    return {m: {k: np.stack(v) for k, v in d.items()} for m, d in out.items()}


def token_kwargs(cfg, **override) -> dict:
    """The keyword arguments of :func:`run_token` taken from a :class:`~icml26.bandpo.presets.TokenPreset`."""
    keys = ("n_prompts", "seq_len", "vocab", "iters", "prompts_per_iter", "group_size", "inner_steps", "lr",
            "warm_steps", "eval_every", "hidden")
    return {**{k: getattr(cfg, k) for k in keys}, **override}


# ---------------------------------------------------------------------------------------------
# Notebook 1: the operator against the cvxpy reference
# ---------------------------------------------------------------------------------------------


def random_old_distribution(rng: np.random.Generator, n_min: int = 3, n_max: int = 50,
                            concentration: float = 0.3, floor: float = 1e-4) -> np.ndarray:
    """Dirichlet(concentration) over a random vocabulary size, floored at ``floor`` and renormalised."""
    n = int(rng.integers(n_min, n_max + 1))
    q = np.maximum(rng.dirichlet(concentration * np.ones(n)), floor)
    return q / q.sum()


def parity_experiment(n_instances: int, delta: float = 0.05, seed: int = 0,
                      divergences: Sequence[str] = tuple(DIVERGENCES), progress: bool = True) -> pd.DataFrame:
    """Solve eq. (Band) with cvxpy on random old distributions and compare with the batched operator.

    One row per (divergence, instance): ``p``, cvxpy ``lo_ref``/``hi_ref``, operator ``lo``/``hi``
    (float64, no cap), absolute error on ``lo``, relative error on ``hi``, and cvxpy seconds.
    """
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n_instances):
        q = random_old_distribution(rng)
        cases.append((q, int(rng.integers(q.size))))
    rows = []
    jobs = [(d, i) for d in divergences for i in range(n_instances)]
    for d, i in tqdm(jobs, desc="cvxpy solves", leave=False, disable=not progress):
        q, a = cases[i]
        t0 = time.perf_counter()
        lo_ref, hi_ref = band_bounds_cvxpy(q, a, delta, d)
        sec = time.perf_counter() - t0
        rows.append({"divergence": d, "instance": i, "n": q.size, "p": q[a], "lo_ref": lo_ref,
                     "hi_ref": hi_ref, "cvxpy_s": sec})
    df = pd.DataFrame(rows)
    for d in divergences:
        sel = df["divergence"] == d
        lo, hi = band_bounds(torch.tensor(df.loc[sel, "p"].to_numpy()), delta, d, ratio_cap=None)
        df.loc[sel, "lo"], df.loc[sel, "hi"] = lo.numpy(), hi.numpy()
    df["err_lo"] = (df["lo"] - df["lo_ref"]).abs()
    df["rel_err_hi"] = (df["hi"] - df["hi_ref"]).abs() / df["hi_ref"]
    return df


def rearrangement_check(q: np.ndarray, action: int, delta: float, divergence: str, n_perm: int = 3,
                        seed: int = 0) -> np.ndarray:
    """cvxpy Band bounds for ``q`` and for ``n_perm`` rearrangements of the *other* tokens' mass
    (same ``p``): rows ``[n_perm + 1, 2]``. They agree because only ``p`` matters (eq. 1-D)."""
    rng = np.random.default_rng(seed)
    out = [band_bounds_cvxpy(q, action, delta, divergence)]
    others = np.delete(np.arange(q.size), action)
    for _ in range(n_perm):
        q2 = q.copy()
        w = rng.dirichlet(np.ones(others.size)) * 0.9 + 0.1 / others.size  # new shape, full support
        q2[others] = w * (1.0 - q[action])
        q2 /= q2.sum()
        out.append(band_bounds_cvxpy(q2, action, delta, divergence))
    return np.asarray(out)


def bisection_trace(p: torch.Tensor, delta: float, divergence: str = "kl", max_iter: int = 60) -> pd.DataFrame:
    """Convergence of the batched bisection in the dtype of ``p``: after each halving, the largest
    error of the iterate against a converged float64 solution (100 halvings): relative error for the
    upper bound, absolute error for the lower bound (which can be ~0)."""
    div = DIVERGENCES[divergence]
    pm = p_min_for(p.dtype)
    q = p.clamp(pm, 1.0 - pm)
    trace: list = []
    _bisect(div, q, delta, max_iter, trace=trace)
    q64 = q.double()
    lo_ref, hi_ref = _bisect(div, q64, delta, 100)
    rows, count = [], {"upper": 0, "lower": 0}
    for side, r in trace:
        count[side] += 1
        r = r.double()
        err = (r - hi_ref).abs() / hi_ref if side == "upper" else (r - lo_ref).abs()
        rows.append({"bound": side, "iteration": count[side], "dtype": str(p.dtype).replace("torch.", ""),
                     "max_error": err.max().item()})
    return pd.DataFrame(rows)


def identity_checks(n_grid: int = 999, deltas: Sequence[float] = (0.01, 0.05, 0.2)) -> dict[str, float]:
    """The operator's unit identities (spec Sec. 8, items 1, 3-6) measured on a p grid in float64.

    Keys: ``closed_vs_bisect`` (max abs gap, TV/chi2/Hellinger), ``root_residual`` (max |g - delta| at
    unsaturated bounds), ``invariant_violation`` (largest violation of 0 <= l <= 1 <= u <= 1/p, of the
    monotonicity in p and of the nesting in delta), ``kl_lower_at_1`` (|l - e^-delta| at p = 1 - 1e-9),
    ``kl_tail_room`` (relative gap of p(u-1) to 1 - e^-delta at p = 1e-8), ``quad_rel_gap`` (worst
    relative gap of the quadratic law at delta = 1e-5, p in [0.05, 0.95], KL / reverse KL / Hellinger /
    Neyman), ``quad_chi2_gap`` (the same for Pearson chi-square, where it is exact) and
    ``fp32_vs_fp64`` (worst relative gap of float32 to float64 bounds, all divergences).
    """
    from .method import band_bounds_bisect, band_bounds_closed_form, band_constraint, quadratic_band

    f64 = torch.float64
    grid = torch.linspace(0.001, 0.999, n_grid, dtype=f64)
    out = {"closed_vs_bisect": 0.0, "root_residual": 0.0, "invariant_violation": 0.0}
    for delta in deltas:
        for d in ("tv", "chi2", "hellinger"):
            a, b = band_bounds_closed_form(grid, delta, d), band_bounds_bisect(grid, delta, d)
            out["closed_vs_bisect"] = max(out["closed_vs_bisect"], (a[0] - b[0]).abs().max().item(),
                                          (a[1] - b[1]).abs().max().item())
        for d in DIVERGENCES:
            lo, hi = band_bounds(grid, delta, d, ratio_cap=None)
            free_hi = (1.0 - grid * hi) > 1e-9  # not (numerically) saturated at 1/p
            free_lo = (lo > 0) & (grid >= delta / 745 if d == "kl" else True)
            res = torch.cat([(band_constraint(grid, hi, d) - delta).abs()[free_hi],
                             (band_constraint(grid, lo, d) - delta).abs()[free_lo]])
            out["root_residual"] = max(out["root_residual"], res.max().item())
            lo2, hi2 = band_bounds(grid, 2 * delta, d, ratio_cap=None)
            viol = torch.cat([-lo, lo - 1, 1 - hi, hi - 1 / grid, hi[1:] - hi[:-1], lo[:-1] - lo[1:],
                              lo2 - lo, hi - hi2])
            out["invariant_violation"] = max(out["invariant_violation"], viol.max().item())
    lo, _ = band_bounds(torch.tensor([1 - 1e-9], dtype=f64), 0.05, "kl", ratio_cap=None)
    out["kl_lower_at_1"] = abs(lo.item() - float(np.exp(-0.05)))
    p = torch.tensor([1e-8], dtype=f64)
    _, hi = band_bounds(p, 0.05, "kl", ratio_cap=None)
    out["kl_tail_room"] = abs((p * (hi - 1)).item() / (1 - float(np.exp(-0.05))) - 1)
    pq = torch.linspace(0.05, 0.95, 91, dtype=f64)
    gaps = {}
    for d in ("kl", "reverse_kl", "hellinger", "neyman_chi2", "chi2"):
        lo, hi = band_bounds(pq, 1e-5, d, ratio_cap=None)
        qlo, qhi = quadratic_band(pq, 1e-5, DIVERGENCES[d].kappa)
        gaps[d] = max(((hi - 1) / (qhi - 1) - 1).abs().max().item(), ((1 - lo) / (1 - qlo) - 1).abs().max().item())
    out["quad_rel_gap"] = max(v for k, v in gaps.items() if k != "chi2")
    out["quad_chi2_gap"] = gaps["chi2"]
    pl = torch.logspace(-6, -1e-4, 300, dtype=f64)
    gap32 = 0.0
    for d in DIVERGENCES:
        l64, h64 = band_bounds(pl, 0.05, d, ratio_cap=None)
        l32, h32 = band_bounds(pl.float(), 0.05, d, ratio_cap=None)
        gap32 = max(gap32, ((h32.double() - h64) / h64).abs().max().item(), (l32.double() - l64).abs().max().item())
    out["fp32_vs_fp64"] = gap32
    return out
