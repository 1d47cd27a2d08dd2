"""Runners the notebooks call: the identity study of notebook 1 and the training loop of every
method (notebook 2). Everything is batched over prompts and samples and runs unchanged on CUDA."""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from icml26.core import bootstrap_mean, t_interval

from . import _checks as ck
from .baselines import HistoryEstimator, grpo_advantages, grpo_loss, keep_mixed_groups
from .env import ARPolicy, HiddenRuleTask, effective_correct_answers, exact_pass_at_k, warm_start
from .method import (
    ErrorPrioritizedReplay,
    LogPartition,
    accuracy_from_log_z,
    kl_divergence,
    optimal_log_z,
    select_prompts,
    tb_loss,
)

METHODS = ("grpo", "flowrl", "gfn_old", "paced_noreplay", "paced", "oracle", "dynamic_sampling", "history")
#: the decomposition rows: GRPO's loss with PACED-RL's Z_phi selector, and with oracle selection
DECOMPOSITION = ("grpo_zsel", "grpo_oracle")
ALL_METHODS = METHODS + DECOMPOSITION
LABELS = {"grpo": "GRPO", "flowrl": "FlowRL", "gfn_old": "GFlowNet-pi_old (uniform)",
          "paced_noreplay": "PACED w/o replay", "paced": "PACED-RL", "oracle": "oracle selection",
          "dynamic_sampling": "dynamic sampling", "history": "history selection",
          "grpo_zsel": "GRPO + Z_phi selection", "grpo_oracle": "GRPO + oracle selection"}
GRPO_LOSS = ("grpo", "grpo_zsel", "grpo_oracle")
Z_SELECT = ("paced_noreplay", "paced", "grpo_zsel")
ORACLE_SELECT = ("oracle", "grpo_oracle")
TB_METHODS = ("flowrl", "gfn_old", "paced_noreplay", "paced", "oracle", "dynamic_sampling", "history")
Z_METHODS = ("gfn_old", "paced_noreplay", "paced", "oracle", "dynamic_sampling", "history")  # prior = pi_old


# -- exact evaluation -------------------------------------------------------------------------------

def _chunks(n: int, n_resp: int, budget: int = 2**22):
    step = max(1, budget // max(n_resp, 1))
    for i in range(0, n, step):
        yield slice(i, min(n, i + step))


@torch.no_grad()
def exact_acc(policy: ARPolicy, task: HiddenRuleTask, idx: torch.Tensor,
              rewards: torch.Tensor | None = None) -> torch.Tensor:
    """Exact accuracy of ``policy`` on prompts ``idx`` (chunked over prompts to bound memory);
    ``rewards`` is an optional precomputed ``task.reward_matrix(idx)``."""
    out = [(policy.response_probs(task.embeddings[idx[s]])
            * (task.reward_matrix(idx[s]) if rewards is None else rewards[s])).sum(-1)
           for s in _chunks(idx.numel(), task.n_responses)]
    return torch.cat(out)


@torch.no_grad()
def exact_logp_all(policy: ARPolicy, task: HiddenRuleTask, idx: torch.Tensor) -> torch.Tensor:
    return torch.cat([policy.response_log_probs(task.embeddings[idx[s]]) for s in _chunks(idx.numel(),
                                                                                          task.n_responses)])


def _pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double() - a.double().mean(), b.double() - b.double().mean()
    den = float(a.norm() * b.norm())
    return float((a * b).sum()) / den if den > 0 else 0.0


def _spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    ra = torch.argsort(torch.argsort(a)).double()
    rb = torch.argsort(torch.argsort(b)).double()
    return _pearson(ra, rb)


# -- notebook 1: the identity on enumerable policies -----------------------------------------------

def random_enumerable(n_out: int, n_prompts: int, scale: float, p_correct: float, gen: torch.Generator,
                      dtype=torch.float64) -> dict:
    """Random pi_old over ``n_out`` outputs for ``n_prompts`` prompts (logits of std ``scale``), random
    binary rewards (each output correct w.p. ``p_correct``), float64."""
    n_out = ck.count("n_out", n_out, 2)
    n_prompts = ck.count("n_prompts", n_prompts)
    logits = scale * torch.randn(n_prompts, n_out, generator=gen, dtype=dtype)
    reward = (torch.rand(n_prompts, n_out, generator=gen, dtype=dtype) < p_correct).to(dtype)
    return {"logp_old": torch.log_softmax(logits, -1), "reward": reward}


def perturb(logp_old: torch.Tensor, size: float, gen: torch.Generator) -> torch.Tensor:
    """log pi_theta = log softmax(log pi_old + size * noise): a policy moved away from pi_old."""
    return torch.log_softmax(logp_old + size * torch.randn(logp_old.shape, generator=gen, dtype=logp_old.dtype), -1)


def descend_log_z(logp_theta_all: torch.Tensor, logp_old_all: torch.Tensor, reward_all: torch.Tensor, beta: float,
                  steps: int = 200, lr: float = 0.5) -> np.ndarray:
    """Gradient descent on a scalar log Z per prompt with the *exact* expected TB loss
    E_{y~pi_old}[(c + log pi_theta - log pi_old - r/beta)^2]; returns the path [steps + 1, n]."""
    steps = ck.count("steps", steps)
    lr = ck.pos_float("lr", lr)
    p = logp_old_all.exp()
    delta = logp_theta_all - logp_old_all - reward_all / beta
    c = torch.zeros(delta.shape[:-1], dtype=delta.dtype)
    path = [c.clone()]
    for _ in range(steps):                     # d/dc E[(c + Delta)^2] = 2 (c + E Delta)
        c = c - lr * 2 * (c + (p * delta).sum(-1))
        path.append(c.clone())
    return torch.stack(path).numpy()


# -- the training loop --------------------------------------------------------------------------------

def _make_task(cfg, device="cpu") -> HiddenRuleTask:
    return HiddenRuleTask(cfg.n_train, cfg.n_test, cfg.vocab, cfg.length, cfg.emb_dim, seed=cfg.task_seed).to(device)


def make_task(cfg, device="cpu") -> HiddenRuleTask:
    """The task of a preset (the environment is fixed: ``cfg.task_seed``)."""
    return _make_task(cfg, device)


def warm_policy(cfg, task: HiddenRuleTask, seed: int) -> ARPolicy:
    """A freshly initialised policy after the noisy "SFT" warm start (seeded). Cached per task and
    seed (a deterministic function of both), and returned as a fresh copy."""
    cache = task.__dict__.setdefault("_warm_cache", {})
    key = (str(task.device), seed, cfg.hidden, cfg.warm_steps, cfg.warm_noise, cfg.warm_lr)
    if key not in cache:
        torch.manual_seed(seed)
        pol = ARPolicy(task.emb_dim, task.vocab, task.length, cfg.hidden).to(task.device)
        cache[key] = warm_start(pol, task, steps=cfg.warm_steps, noise=cfg.warm_noise, lr=cfg.warm_lr, seed=seed)
    return copy.deepcopy(cache[key])


def train(method: str, task: HiddenRuleTask, policy: ARPolicy, *, steps: int = 150, batch_prompts: int = 32,
          group_size: int = 8, beta: float = 0.05, tau: float = 0.5, pool_factor: int = 4, lr: float = 3e-3,
          z_lr: float = 1e-2, z_hidden: int = 64, replay_capacity: int = 128, replay_add: int = 64,
          replay_size: int = 32, replay_updates_z: bool = True, eval_every: int = 10, n_calib: int | None = None,
          ks=(1, 2, 4, 8, 16, 32, 64), seed: int = 0, progress: bool = False,
          return_models: bool = False, diagnostics: bool = True, bias_every: int = 1,
          clip_policy: float | None = 1.0) -> dict:
    """Train ``policy`` (modified in place) with one of :data:`METHODS`, one gradient step per rollout
    batch (Algorithm 3.7). Returns per-evaluation arrays (``step``, ``fresh_rollouts``, exact test
    accuracy on learnable and all prompts, calibration of the accuracy estimate over training prompts),
    per-step arrays (``mixed_frac``, ``beta_kl``) and end-of-training diversity (pass@k, effective
    number of correct answers, also per evaluation as ``eff_curve``).

    ``grpo_zsel`` and ``grpo_oracle`` train the policy with GRPO's loss on the prompts that PACED-RL's
    selector (Z_phi trained by the TB square on log Z alone) or the oracle picks: they separate the
    curriculum from the loss.

    ``diagnostics=False`` (the tuning runs) records only what the area needs: the learnable test
    accuracy at every evaluation, the mixed groups and the gradient norms; it skips the calibration,
    the exact bias, the diversity curve and the accuracies of the selected prompts. The training
    itself (every random draw and update) is the same either way. ``grad_norm`` is the norm of the
    policy gradient before it is clipped to one, per step. The exact bias ``beta_kl`` and the exact
    accuracies of the selected prompts ``sel_p`` are measured on every ``bias_every``-th step (two
    exact enumerations of the batch each), a subsample of the steps. ``clip_policy`` is the norm the
    policy gradient is clipped to (``None``: no clip, the control that removes it; ``Z_phi``'s clip stays).

    No host sync per step where the method allows it (issue 43): the first step runs every value check of
    the helpers (finite, normalised, binary, index range), the later ones run inside
    :func:`._checks.trusted_values`; the per-step logs stay on the device and are read once after the loop
    (the same float32 values the per-step ``float()`` gave). Two reads per step remain, both data-dependent
    sizes: the replay push's ``nonzero`` of the successes (``paced``: the replay's CPU generator draws a
    permutation of their number) and dynamic sampling's ``nonzero`` of the mixed groups (the batch size)."""
    if not isinstance(diagnostics, bool):
        raise TypeError(f"diagnostics must be a bool, got {diagnostics!r}")
    if method not in ALL_METHODS:
        raise ValueError(f"method must be one of {ALL_METHODS}, got {method!r}")
    if not isinstance(task, HiddenRuleTask):
        raise TypeError(f"task must be a HiddenRuleTask, got {type(task).__name__}")
    if not isinstance(policy, ARPolicy):
        raise TypeError(f"policy must be an ARPolicy, got {type(policy).__name__}")
    steps = ck.count("steps", steps)
    B = ck.count("batch_prompts", batch_prompts)
    G = ck.count("group_size", group_size, 2)
    beta = ck.pos_float("beta", beta)
    tau = ck.unit_float("tau", tau)
    pool_factor = ck.count("pool_factor", pool_factor)
    lr, z_lr = ck.pos_float("lr", lr), ck.pos_float("z_lr", z_lr)
    replay_size = ck.count("replay_size", replay_size, 0)
    eval_every = ck.count("eval_every", eval_every)
    bias_every = ck.count("bias_every", bias_every)
    max_norm = float("inf") if clip_policy is None else ck.pos_float("clip_policy", clip_policy)
    M = pool_factor * B
    if M > task.n_train or (method == "dynamic_sampling" and 2 * B > task.n_train):
        raise ValueError(f"pool_factor * batch_prompts = {M} exceeds the {task.n_train} training prompts")
    dev = task.device
    gen = torch.Generator(device=dev).manual_seed(seed)
    torch.manual_seed(seed)
    E = task.embeddings
    ref = copy.deepcopy(policy).requires_grad_(False) if method == "flowrl" else None
    logz = LogPartition(task.emb_dim, z_hidden).to(dev)
    opt = torch.optim.Adam(policy.parameters(), lr=lr, foreach=True)      # one fused call over the tensors
    zopt = torch.optim.Adam(logz.parameters(), lr=z_lr, foreach=True)
    replay = ErrorPrioritizedReplay(replay_capacity, replay_add, seed=seed) if method == "paced" else None
    hist = HistoryEstimator(task.n_train, device=dev)
    learn_test = task.test_idx[task.types[task.test_idx] == 1]
    h1 = learn_test[task.tolerances[learn_test] >= 1]
    n_cal = task.n_train if n_calib is None else min(ck.count("n_calib", n_calib), task.n_train)
    cal_idx = task.train_idx[:n_cal]
    times = torch.zeros(task.n_train, dtype=torch.long, device=dev)
    ev = {k: [] for k in ("step", "fresh_rollouts", "test_learnable", "test_all", "train_acc", "pearson",
                          "spearman", "calib_err", "hist_pearson", "eff_curve")}
    per = {k: [] for k in ("mixed_frac", "beta_kl", "n_fresh", "grad_norm")}
    sel_p, sel_type = [], []
    fresh = 0

    R_test, R_cal = task.reward_matrix(task.test_idx), task.reward_matrix(cal_idx)
    test_learn_mask = task.types[task.test_idx] == 1
    R_learn = R_test[test_learn_mask]

    def evaluate(step):
        ev["step"].append(step)
        ev["fresh_rollouts"].append(fresh)
        if not diagnostics:                                    # the area needs the learnable accuracy only
            ev["test_learnable"].append(float(exact_acc(policy, task, learn_test, R_learn).mean()))
            return
        p_test = exact_acc(policy, task, task.test_idx, R_test)
        p_cal = exact_acc(policy, task, cal_idx, R_cal)
        with torch.no_grad():
            est = accuracy_from_log_z(logz(E[cal_idx]), beta, clip=False)
        ev["test_learnable"].append(float(p_test[test_learn_mask].mean()))
        ev["test_all"].append(float(p_test.mean()))
        ev["train_acc"].append(float(p_cal.mean()))
        ev["pearson"].append(_pearson(est, p_cal))
        ev["spearman"].append(_spearman(est, p_cal))
        ev["calib_err"].append(float((est.clamp(0, 1) - p_cal).abs().mean()))
        ev["hist_pearson"].append(_pearson(hist(cal_idx), p_cal))
        ev["eff_curve"].append(float(effective_correct_answers(policy, task, h1).mean()) if h1.numel()
                               else float("nan"))

    zero = torch.zeros((), device=dev)                     # the logs of a step with no prompt left
    it = tqdm(range(steps), leave=False, desc=method) if progress else range(steps)
    with contextlib.ExitStack() as trust:   # the trust ends with the loop, on an error too
        for step in it:
            if step == 1:     # the first step checks every value; the later ones (same task, policy and
                trust.enter_context(ck.trusted_values())   # sampler) skip the checks that read the device
            if step % eval_every == 0:
                evaluate(step)
            # 1. choose the prompts (Sec. 3.5 and the baselines' selectors)
            n_draw = (2 * B if method == "dynamic_sampling"
                      else M if method in Z_SELECT + ORACLE_SELECT + ("history",) else B)
            pool = task.train_idx[torch.randperm(task.n_train, generator=gen, device=dev)[:n_draw]]
            with torch.no_grad():
                p_hat_pool = accuracy_from_log_z(logz(E[pool]), beta)           # clipped, before the update
            if method in Z_SELECT:
                batch = select_prompts(p_hat_pool, pool, B, tau, gen)
            elif method in ORACLE_SELECT:
                batch = select_prompts(exact_acc(policy, task, pool), pool, B, tau, gen)
            elif method == "history":
                batch = select_prompts(hist(pool), pool, B, tau, gen)
            else:
                batch = pool
            with torch.no_grad():
                p_hat_batch = accuracy_from_log_z(logz(E[batch]), beta)
            # 2. rollouts from pi_old (the only fresh samples)
            idx = batch.repeat_interleave(G)
            y = policy.sample(E[idx], gen)
            r = task.reward(idx, y)
            rg = r.view(-1, G)
            fresh += idx.numel()
            group_acc = rg.mean(1)
            hist.update(batch, group_acc)
            if method == "dynamic_sampling":                                      # keep up to B mixed groups
                keep = keep_mixed_groups(rg, B)
                per["mixed_frac"].append(((rg.sum(1) > 0) & (rg.sum(1) < G)).float().mean())
                batch, rg, group_acc = batch[keep], rg[keep], group_acc[keep]
                y = y.view(-1, G, task.length)[keep].reshape(-1, task.length)
                idx, r = batch.repeat_interleave(G), rg.reshape(-1)
            else:
                per["mixed_frac"].append(((rg.sum(1) > 0) & (rg.sum(1) < G)).float().mean())
            times[batch] += 1
            per["n_fresh"].append(fresh)
            if batch.numel() == 0:
                if diagnostics and step % bias_every == 0:
                    per["beta_kl"].append(zero)
                per["grad_norm"].append(zero)
                continue
            measure_bias = diagnostics and step % bias_every == 0
            if measure_bias:
                lp_old_all = exact_logp_all(policy, task, batch)
                p_old_batch = (lp_old_all.exp() * task.reward_matrix(batch)).sum(-1)
                sel_p.append(p_old_batch)
                sel_type.append(task.types[batch])
            # 3. the loss (one gradient step: pi_theta = pi_old at the gradient)
            if method in GRPO_LOSS:
                logp = policy.log_prob(E[idx], y)
                loss = grpo_loss(logp, logp.detach(), grpo_advantages(rg).reshape(-1), length=task.length)
                if method == "grpo_zsel":                 # Z_phi learns by the TB square on log Z alone
                    lp0 = logp.detach()
                    loss = loss + tb_loss(logz(E[idx]), lp0, lp0, r, beta)
            else:
                s_idx, s_y, s_r = idx, y, r
                n_fresh_s = idx.numel()
                if replay is not None and replay_size > 0:
                    got = replay.sample(replay_size)
                    if got is not None:
                        s_idx, s_y, s_r = (torch.cat([idx, got[0]]), torch.cat([y, got[1]]),
                                           torch.cat([r, got[2]]))
                logp = policy.log_prob(E[s_idx], s_y)
                lz = logz(E[s_idx])
                if replay is not None and not replay_updates_z:
                    lz = torch.cat([lz[:n_fresh_s], lz[n_fresh_s:].detach()])
                if method == "flowrl":
                    with torch.no_grad():
                        prior = ref.log_prob(E[s_idx], s_y)                       # (3.2): pi_ref
                else:
                    prior = logp.detach()                                         # (3.3): pi_old
                loss = tb_loss(lz, logp, prior, s_r, beta)
            opt.zero_grad(set_to_none=True)
            zopt.zero_grad(set_to_none=True)
            loss.backward()
            per["grad_norm"].append(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_norm))
            torch.nn.utils.clip_grad_norm_(logz.parameters(), 1.0)
            opt.step()
            if method not in ("grpo", "grpo_oracle"):
                zopt.step()
            # 4. bias of the estimate: beta KL(pi_old || pi_theta) on this batch, exactly
            if measure_bias:
                lp_new_all = exact_logp_all(policy, task, batch)
                per["beta_kl"].append(beta * kl_divergence(lp_old_all, lp_new_all).mean())
            # 5. error-prioritised replay (Sec. 3.6): p_hat from before the update
            if replay is not None:
                replay.push(idx, y, r, p_hat_batch.repeat_interleave(G), group_acc.repeat_interleave(G))
    evaluate(steps)
    for k in ("mixed_frac", "beta_kl", "grad_norm"):        # kept on the device, read once (float64 holds
        per[k] = _read_logs(per[k])                          # every float32 value exactly, as float() did)
    out = {k: np.asarray(v, dtype=float) for k, v in {**ev, **per}.items()}
    out["ks"] = np.asarray(ks)
    if diagnostics:
        out["pass_at_k"] = exact_pass_at_k(exact_acc(policy, task, learn_test), ks).mean(0).cpu().numpy()
        out["eff_correct"] = float(out["eff_curve"][-1])
    out["sel_p"] = torch.cat(sel_p).cpu().numpy() if sel_p else np.zeros(0)
    out["sel_type"] = torch.cat(sel_type).cpu().numpy() if sel_type else np.zeros(0)
    out["times_selected"] = times.cpu().numpy()
    out["method"] = method
    if return_models:
        out["_logz"] = logz
    return out


def _read_logs(logs: list) -> np.ndarray:
    """Per-step scalar tensors (float32, or the policy's dtype) as one float64 array, in one read."""
    if not logs:
        return np.zeros(0)
    return torch.stack([t.detach().to(torch.float64) for t in logs]).cpu().numpy()


def run_methods(cfg, task: HiddenRuleTask, methods, seeds, *, progress: bool = True, lrs: dict | None = None,
                **overrides) -> dict:
    """Every method of ``methods`` for every seed of ``seeds``, each from the same warm start per seed
    (paired). Dynamic sampling draws 2B prompts per step, so it gets half the steps (equal fresh
    rollouts). ``lrs`` ({method: learning rate}) overrides the learning rate per method (the
    validated ones); ``overrides`` apply to every method. Returns {method: [result per seed]}."""
    for mth in methods:
        if mth not in ALL_METHODS:
            raise ValueError(f"methods must hold names from {ALL_METHODS}, got {mth!r}")
    lrs = {} if lrs is None else dict(lrs)
    for mth, lr in lrs.items():
        if mth not in ALL_METHODS:
            raise ValueError(f"lrs: unknown method {mth!r}")
        ck.pos_float("lrs", lr)
    kw = dict(steps=cfg.steps, batch_prompts=cfg.batch_prompts, group_size=cfg.group_size, beta=cfg.beta,
              tau=cfg.tau, pool_factor=cfg.pool_factor, lr=cfg.lr, z_lr=cfg.z_lr, replay_capacity=cfg.replay_capacity,
              replay_add=cfg.replay_add, replay_size=cfg.replay_size, eval_every=cfg.eval_every, n_calib=cfg.n_calib,
              bias_every=cfg.bias_every)
    kw.update(overrides)
    out = {mth: [] for mth in methods}
    jobs = [(s, mth) for s in seeds for mth in methods]
    for s, mth in tqdm(jobs, leave=False, desc="runs", disable=not progress):
        k = dict(kw)
        if mth in lrs:
            k["lr"] = float(lrs[mth])
        if mth == "dynamic_sampling":
            k["steps"], k["eval_every"] = max(1, kw["steps"] // 2), max(1, kw["eval_every"] // 2)
        out[mth].append(train(mth, task, warm_policy(cfg, task, s), seed=1000 + s, **k))
    return out


def identity_study(cfg, gen: torch.Generator) -> dict:
    """Proposition 3.4 on random enumerable policies (float64): for every perturbation size, the exact
    least-squares log Z against p_old / beta + KL, and the bias beta log Z* - p_old against beta KL."""
    d = random_enumerable(cfg.id_outputs, cfg.id_prompts, 1.5, 0.3, gen)
    p_old = (d["logp_old"].exp() * d["reward"]).sum(-1)
    rows, max_err, kls, bias, theta = [], 0.0, [], [], {}
    for size in cfg.id_sizes:
        lp = perturb(d["logp_old"], size, gen)
        theta[size] = lp
        c = optimal_log_z(lp, d["logp_old"], d["reward"], cfg.beta)
        kl = kl_divergence(d["logp_old"], lp)
        err = float((c - (p_old / cfg.beta + kl)).abs().max())
        max_err = max(max_err, err)
        kls.append((cfg.beta * kl).numpy())
        bias.append((cfg.beta * c - p_old).numpy())
        rows.append({"perturbation": size, "mean beta KL": float(cfg.beta * kl.mean()),
                     "mean bias": float((cfg.beta * c - p_old).mean()), "max |error| of (3.4)": err})
    return {"data": d, "p_old": p_old, "theta": theta, "rows": rows, "max_err": max_err,
            "beta_kl": np.concatenate(kls), "bias": np.concatenate(bias)}


def amortised_calibration(cfg, task: HiddenRuleTask, seed: int = 0) -> dict:
    """GFlowNet-pi_old on uniform prompts for ``cfg.nb1_steps`` steps, then the estimate
    beta log Z_phi(x) and the exact accuracy of every training prompt (the proposition, amortised)."""
    pol = warm_policy(cfg, task, seed)
    out = train("gfn_old", task, pol, steps=cfg.nb1_steps, batch_prompts=cfg.batch_prompts,
                group_size=cfg.group_size, beta=cfg.beta, lr=cfg.lr, z_lr=cfg.z_lr, eval_every=cfg.nb1_steps,
                n_calib=cfg.n_calib, seed=1000 + seed, return_models=True)
    logz = out.pop("_logz")
    idx = task.train_idx[: cfg.n_calib]
    with torch.no_grad():
        est = accuracy_from_log_z(logz(task.embeddings[idx]), cfg.beta, clip=False)
    acc = exact_acc(pol, task, idx)
    return {"est": est.cpu().numpy(), "acc": acc.cpu().numpy(), "types": task.types[idx].cpu().numpy(),
            "seen": (out["times_selected"][: cfg.n_calib] > 0),
            "pearson": _pearson(est, acc), "spearman": _spearman(est, acc),
            "mean_abs_err": float((est.clamp(0, 1) - acc).abs().mean()), "beta_kl": float(out["beta_kl"].mean()),
            "run": out}


def auc(res: dict) -> float:
    """Area under the learnable-prompt test accuracy curve: the mean over evaluation points."""
    return float(np.mean(res["test_learnable"]))


def summary(runs: dict, from_step: int, steps: int):
    """One row per method: means over seeds of the area under the learnable accuracy curve, final
    accuracies, mixed groups and calibration from ``from_step`` on, bias and diversity."""
    rows = {}
    for k, rs in runs.items():
        i32 = int(np.where(rs[0]["ks"] == 32)[0][0]) if 32 in rs[0]["ks"] else -1
        lo = int(from_step / steps * len(rs[0]["mixed_frac"]))
        rows[LABELS[k]] = {
            "seeds": len(rs),
            "AUC learnable": np.mean([auc(r) for r in rs]),
            "s.e. AUC": np.std([auc(r) for r in rs], ddof=1) / np.sqrt(len(rs)) if len(rs) > 1 else np.nan,
            "final learnable": np.mean([r["test_learnable"][-1] for r in rs]),
            "final all": np.mean([r["test_all"][-1] for r in rs]),
            "mixed groups": np.mean([r["mixed_frac"][lo:].mean() for r in rs]),
            "min Pearson": np.mean([_after_frac(r, "pearson", from_step / steps).min() for r in rs]),
            "calib. error": np.mean([_after_frac(r, "calib_err", from_step / steps).mean() for r in rs]),
            "beta KL": np.mean([r["beta_kl"].mean() for r in rs]),
            "pass@32 - pass@1": np.mean([r["pass_at_k"][i32] - r["pass_at_k"][0] for r in rs]),
            "eff. correct": np.mean([r["eff_correct"] for r in rs]),
        }
    return pd.DataFrame(rows).T


def _after_frac(res: dict, key: str, frac: float) -> np.ndarray:
    """Evaluation values from a fraction ``frac`` of training on (steps scale with dynamic sampling)."""
    s = res["step"]
    return res[key][s >= frac * s[-1] - 1e-9]


def paired_bootstrap(a, b, n_boot: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean of the paired differences a - b (one value per seed) and its 95% bootstrap interval."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size == 0:
        raise ValueError("a and b must hold at least one paired value")
    return bootstrap_mean(d, n_boot, seed)


# -- the policy gradient of (3.3) is REINFORCE with the baseline beta log Z_phi -----------------------

def reinforce_identity(cfg, task: HiddenRuleTask, seed: int = 0, n_prompts: int | None = None) -> dict:
    """PACED-RL's gradient with respect to theta at theta = theta_old against REINFORCE with baseline
    beta log Z_phi(x), on one batch of ``n_prompts`` x G rollouts in float64.

    With pi_old = pi_theta at the gradient (one gradient step per batch), the residual of (3.3) is
    log Z_phi - r/beta, so grad_theta mean(res^2) = (2/beta) * (-mean((r - beta log Z_phi) grad log pi)).
    Returns the cosine and norm ratio of the two gradients (1 and 2/beta exactly), the largest
    relative deviation from the identity, and the relative difference (in norm) of one clipped Adam step
    from each (Adam's step is scale-invariant, so the two updates coincide up to Adam's eps)."""
    n_prompts = cfg.batch_prompts if n_prompts is None else ck.count("n_prompts", n_prompts)
    if n_prompts > task.n_train:
        raise ValueError(f"n_prompts={n_prompts} exceeds the {task.n_train} training prompts")
    beta, G = cfg.beta, cfg.group_size
    pol = warm_policy(cfg, task, seed).double()
    gen = torch.Generator(device=task.device).manual_seed(seed)
    torch.manual_seed(seed)
    logz = LogPartition(task.emb_dim, 64).to(task.device).double()
    batch = task.train_idx[torch.randperm(task.n_train, generator=gen, device=task.device)[:n_prompts]]
    idx = batch.repeat_interleave(G)
    E = task.embeddings[idx].double()
    y = pol.sample(E, gen)
    r = task.reward(idx, y).double()
    with torch.no_grad():
        lz = logz(E)

    def grad(loss_fn):
        pol.zero_grad(set_to_none=True)
        logp = pol.log_prob(E, y)
        loss_fn(logp).backward()
        return torch.cat([p.grad.reshape(-1) for p in pol.parameters()])

    g_tb = grad(lambda lp: tb_loss(lz, lp, lp.detach(), r, beta))                 # (3.3), pi_old = pi_theta
    g_rf = grad(lambda lp: -((r - beta * lz) * lp).mean())                         # REINFORCE, baseline beta log Z
    cos = float(g_tb @ g_rf / (g_tb.norm() * g_rf.norm()))
    dev_rel = float((g_tb - (2 / beta) * g_rf).abs().max() / g_tb.abs().max())

    def one_adam_step(g):
        p = torch.zeros_like(g, requires_grad=True)
        p.grad = g.clone()
        torch.nn.utils.clip_grad_norm_([p], 1.0)
        opt = torch.optim.Adam([p], lr=cfg.lr)
        opt.step()
        return p.detach()

    d_tb, d_rf = one_adam_step(g_tb), one_adam_step(g_rf)
    step_diff = float((d_tb - d_rf).norm() / d_tb.norm())
    return {"n_samples": int(idx.numel()), "cosine": cos, "norm_ratio": float(g_tb.norm() / g_rf.norm()),
            "two_over_beta": 2 / beta, "max_rel_deviation": dev_rel, "adam_step_diff": step_diff}


# -- tuning on validation seeds and runs at a validated learning rate ----------------------------------

def validation_task(cfg, task: HiddenRuleTask) -> HiddenRuleTask:
    """The task the learning rates are tuned on: the last ``cfg.n_val_prompts`` *training* prompts are
    held out as validation prompts (scored like test prompts), the others are trained on (warm start
    included). The test prompts are out of its range: every index it hands out, and every index its
    reward accepts, lies among the training prompts. Cached on ``task``."""
    n_val = ck.count("cfg.n_val_prompts", cfg.n_val_prompts)
    if n_val >= task.n_train or task.n_train - n_val < cfg.pool_factor * cfg.batch_prompts:
        raise ValueError(f"cfg.n_val_prompts={n_val} leaves too few of the {task.n_train} training prompts "
                         f"for a pool of {cfg.pool_factor * cfg.batch_prompts}")
    views = task.__dict__.setdefault("_val_views", {})
    if n_val not in views:
        view = copy.copy(task)
        view.__dict__ = {k: v for k, v in task.__dict__.items() if k not in ("_warm_cache", "_val_views")}
        view.n_train, view.n_test = task.n_train - n_val, n_val
        view.train_idx, view.test_idx = task.train_idx[:-n_val], task.train_idx[-n_val:]
        views[n_val] = view
    return views[n_val]


def validation_auc(cfg, task: HiddenRuleTask, method: str, lr: float, cache: dict | None = None) -> float:
    """Mean area under the learnable-accuracy curve of ``method`` at learning rate ``lr`` over the
    validation seeds ``cfg.val_seeds`` (warm starts and sampling streams disjoint from the test seeds
    ``cfg.seeds``), trained and scored on :func:`validation_task`: held-out training prompts, never the
    test prompts. The runs skip the diagnostics (``diagnostics=False``)."""
    if set(cfg.val_seeds) & set(cfg.seeds):
        raise ValueError(f"cfg.val_seeds {cfg.val_seeds} must be disjoint from cfg.seeds")
    res = runs_at(cfg, validation_task(cfg, task), method, lr, cfg.val_seeds, cache, diagnostics=False)
    return float(np.mean([auc(r) for r in res]))


def runs_at(cfg, task: HiddenRuleTask, method: str, lr: float, seeds, cache: dict | None = None,
            **overrides) -> list:
    """Results of ``method`` at ``lr`` for every seed of ``seeds`` (paired warm starts), reusing and
    filling ``cache`` ({(method, lr, seed, n_test, settings): result}) so that a run is never repeated.
    ``n_test`` tells a validation task from the full one; ``settings`` holds the sorted keyword
    ``overrides``, so a run with another setting (``clip_policy``, ``diagnostics``) is never answered by
    a cached run of the default."""
    cache = {} if cache is None else cache
    settings = tuple(sorted(overrides.items()))
    def key(s):
        return method, float(lr), s, task.n_test, settings

    todo = [s for s in seeds if key(s) not in cache]
    if todo:
        got = run_methods(cfg, task, [method], todo, progress=False, lr=lr, **overrides)[method]
        cache.update({key(s): r for s, r in zip(todo, got)})
    return [cache[key(s)] for s in seeds]


def validation_scores(cfg, task: HiddenRuleTask, method: str, cache: dict | None = None, seeds=None) -> pd.DataFrame:
    """Validation area of ``method`` per validation seed (rows) and learning rate of ``cfg.lr_grid``
    (columns), on :func:`validation_task`; with ``cache`` from the tuning, no run is repeated.
    ``seeds`` (default ``cfg.val_seeds``) picks a subset, e.g. to see how the choice depends on the draw."""
    seeds = tuple(cfg.val_seeds if seeds is None else seeds)
    if not seeds or set(seeds) & set(cfg.seeds):
        raise ValueError(f"seeds {seeds} must be non-empty and disjoint from cfg.seeds")
    vt = validation_task(cfg, task)
    return pd.DataFrame({float(lr): [auc(r) for r in runs_at(cfg, vt, method, lr, seeds, cache, diagnostics=False)]
                         for lr in cfg.lr_grid}, index=list(seeds))


def lr_neighbours(cfg, task: HiddenRuleTask, pairs: dict, lrs: dict, cache: dict | None = None) -> pd.DataFrame:
    """Learning-rate sensitivity of paired differences, read off the validation runs of the tuning.

    For every ``name: (a, b)`` of ``pairs``, the mean over the validation seeds of the paired validation
    area a - b with both methods at their chosen learning rates ``lrs[a]``, ``lrs[b]``, and with one of
    them moved one step down or up ``cfg.lr_grid`` (columns ``a down``, ``a up``, ``b down``, ``b up``;
    NaN past the grid's end). Validation data only (the test seeds are run at the chosen rates alone):
    a guide to how fragile a test-seed claim is, not its interval."""
    grid = [float(v) for v in cfg.lr_grid]
    for k in {m for ab in pairs.values() for m in ab}:
        if k not in lrs or float(lrs[k]) not in grid:
            raise ValueError(f"lrs[{k!r}] must be a value of cfg.lr_grid {tuple(grid)}")
    tab = {k: validation_scores(cfg, task, k, cache) for k in {m for ab in pairs.values() for m in ab}}
    rows = {}
    for name, (a, b) in pairs.items():
        ia, ib = grid.index(float(lrs[a])), grid.index(float(lrs[b]))
        def mean_diff(da, db, a=a, b=b, ia=ia, ib=ib):
            ja, jb = ia + da, ib + db
            if not (0 <= ja < len(grid) and 0 <= jb < len(grid)):
                return float("nan")
            return float((tab[a][grid[ja]] - tab[b][grid[jb]]).mean())
        rows[name] = {"chosen": mean_diff(0, 0), "a down": mean_diff(-1, 0), "a up": mean_diff(1, 0),
                      "b down": mean_diff(0, -1), "b up": mean_diff(0, 1)}
    return pd.DataFrame(rows).T


def cache_runs(runs: dict, lrs: dict, seeds, task: HiddenRuleTask) -> dict:
    """A :func:`runs_at` cache holding ``runs`` ({method: [result per seed]} on ``task``), each method
    at its learning rate in ``lrs`` ({method: lr})."""
    return {(k, float(lrs[k]), s, task.n_test): r for k, rs in runs.items() if k in lrs for s, r in zip(seeds, rs)}


# -- diversity against progress ---------------------------------------------------------------------------

def eff_at_accuracy(res: dict, target: float) -> float:
    """Effective number of correct answers when the learnable test accuracy first reaches ``target``
    along the run (linear interpolation between evaluations); NaN if the run never reaches it."""
    acc, eff = np.asarray(res["test_learnable"]), np.asarray(res["eff_curve"])
    above = np.nonzero(acc >= target)[0]
    if above.size == 0:
        return float("nan")
    i = int(above[0])
    if i == 0:
        return float(eff[0])
    w = (target - acc[i - 1]) / (acc[i] - acc[i - 1])
    return float(eff[i - 1] + w * (eff[i] - eff[i - 1]))


def matched_diversity(runs: dict, ref: str, others) -> pd.DataFrame:
    """Per seed, the effective correct answers of ``ref`` at the end of training and of every method of
    ``others`` when it first reaches ``ref``'s final accuracy on the same seed (paired)."""
    rows = []
    for s, rr in enumerate(runs[ref]):
        target = float(rr["test_learnable"][-1])
        row = {"seed": s, "accuracy": target, LABELS[ref]: float(rr["eff_correct"])}
        for k in others:
            row[LABELS[k]] = eff_at_accuracy(runs[k][s], target)
        rows.append(row)
    return pd.DataFrame(rows)


def matched_differences(match: pd.DataFrame, ref: str, others) -> pd.DataFrame:
    """Paired differences ``ref - other`` of the effective correct answers at matched accuracy (a
    :func:`matched_diversity` table), over the seeds on which ``other`` reaches the matched accuracy:
    mean, 95% t interval over those seeds, the number of seeds and the seeds where ``ref`` is ahead."""
    rows = {}
    for k in others:
        d = (match[LABELS[ref]] - match[LABELS[k]]).dropna().to_numpy()
        mean, lo, hi = t_interval(d) if d.size else (np.nan, np.nan, np.nan)
        rows[f"{LABELS[ref]} - {LABELS[k]}"] = {"difference": mean, "95% lo": lo, "95% hi": hi,
                                                "seeds": int(d.size), "ahead": int((d > 0).sum())}
    return pd.DataFrame(rows).T


def progress_correlation(runs: dict, methods, along: bool = False) -> dict:
    """Pearson correlation of learnable test accuracy and effective correct answers: across the seeds'
    end points, or (``along=True``) pooled over every evaluation of every seed."""
    out = {}
    for k in methods:
        if along:
            a = np.concatenate([r["test_learnable"] for r in runs[k]])
            e = np.concatenate([r["eff_curve"] for r in runs[k]])
        else:
            a = np.array([r["test_learnable"][-1] for r in runs[k]])
            e = np.array([r["eff_correct"] for r in runs[k]])
        out[k] = float(np.corrcoef(a, e)[0, 1]) if len(a) > 2 and a.std() > 0 and e.std() > 0 else float("nan")
    return out
