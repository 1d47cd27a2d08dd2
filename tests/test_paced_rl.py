"""Unit identities (spec Sec. 8, claims 1-7) and bad inputs (Sec. 9) of icml26.paced_rl."""

from __future__ import annotations

import copy

import icml26.paced_rl as m
import numpy as np
import pandas as pd
import pytest
import torch
from icml26.paced_rl import experiments as ex

pytestmark = pytest.mark.usefixtures("one_thread")


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.fixture(scope="module")
def small():
    cfg = m.preset("smoke")
    task = m.HiddenRuleTask(n_train=128, n_test=64, seed=cfg.task_seed)
    torch.manual_seed(0)
    pol = m.ARPolicy(task.emb_dim, task.vocab, task.length, cfg.hidden)
    m.warm_start(pol, task, steps=40, seed=0)
    return cfg, task, pol


# -- claim 1: the least-squares log Z is p_old / beta + KL(pi_old || pi_theta) ----------------------

@pytest.mark.parametrize("size", [0.0, 0.1, 0.7, 2.0])
def test_optimal_log_z_identity(size):
    g = _gen(int(size * 10))
    d = ex.random_enumerable(256, 32, 1.5, 0.3, g)
    lp_theta = ex.perturb(d["logp_old"], size, g)
    beta = 0.05
    c = m.optimal_log_z(lp_theta, d["logp_old"], d["reward"], beta)
    p_old = (d["logp_old"].exp() * d["reward"]).sum(-1)
    kl = m.kl_divergence(d["logp_old"], lp_theta)
    assert torch.allclose(c, p_old / beta + kl, atol=1e-9, rtol=0)
    assert torch.all(beta * c >= p_old - 1e-12)                     # the estimate can only over-read


def test_optimal_log_z_on_the_policy(small):
    _, task, pol = small
    idx = task.train_idx[:16]
    lp_old = ex.exact_logp_all(pol, task, idx).double()
    moved = copy.deepcopy(pol)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=_gen(3)))
    lp_theta = ex.exact_logp_all(moved, task, idx).double()
    R = task.reward_matrix(idx).double()
    c = m.optimal_log_z(lp_theta, lp_old, R, 0.05)
    p_old = (lp_old.exp() * R).sum(-1)
    assert torch.allclose(c, p_old / 0.05 + m.kl_divergence(lp_old, lp_theta), atol=1e-9, rtol=0)


# -- claim 2: Monte-Carlo intercept at theta = theta_old is the empirical accuracy ------------------

def test_empirical_intercept_is_group_accuracy(small):
    _, task, pol = small
    idx = task.train_idx[:8].repeat_interleave(16)
    y = pol.sample(task.embeddings[idx], _gen(1))
    r = task.reward(idx, y).double()
    logp = pol.log_prob(task.embeddings[idx], y).double().detach()
    resid0 = m.tb_residual(torch.zeros_like(r), logp, logp, r, 0.05)   # residual at c = 0
    c_hat = -resid0.view(8, 16).mean(1)                                 # least-squares intercept
    assert torch.allclose(0.05 * c_hat, r.view(8, 16).mean(1), atol=1e-12, rtol=0)


# -- claim 3: gradient descent on the exact expected loss converges to optimal_log_z ----------------

def test_gradient_descent_converges():
    g = _gen(5)
    d = ex.random_enumerable(256, 8, 1.0, 0.4, g)
    lp_theta = ex.perturb(d["logp_old"], 0.3, g)
    path = ex.descend_log_z(lp_theta, d["logp_old"], d["reward"], 0.05, steps=200, lr=0.2)
    c = m.optimal_log_z(lp_theta, d["logp_old"], d["reward"], 0.05)
    assert abs(path[-1] - c.numpy()).max() < 1e-6


# -- claim 4: at the tilted optimum the intercept is the true log-normaliser ------------------------

def test_tilted_optimum():
    g = _gen(7)
    d = ex.random_enumerable(256, 16, 1.0, 0.3, g)
    beta = 0.05
    lp_tilt = torch.log_softmax(d["logp_old"] + d["reward"] / beta, -1)
    c = m.optimal_log_z(lp_tilt, d["logp_old"], d["reward"], beta)
    assert torch.allclose(c, m.log_z_true(d["logp_old"], d["reward"], beta), atol=1e-9, rtol=0)
    res = c[:, None] + lp_tilt - d["logp_old"] - d["reward"] / beta
    assert float(res.abs().max()) < 1e-9                               # constant (zero) residual


# -- claim 5: exact accuracy matches Monte Carlo -------------------------------------------------------

def test_exact_accuracy_vs_monte_carlo(small):
    _, task, pol = small
    idx = task.train_idx[:6]
    exact = m.exact_accuracy(pol, task, idx)
    rep = idx.repeat_interleave(20000)
    r = task.reward(rep, pol.sample(task.embeddings[rep], _gen(2))).view(6, -1).mean(1)
    assert float((exact - r).abs().max()) < 0.01
    probs = pol.response_probs(task.embeddings[idx])
    assert torch.allclose(probs.sum(-1), torch.ones(6), atol=1e-5)
    lp = pol.log_prob(task.embeddings[idx[:1]].expand(5, -1), task.all_responses()[:5])
    assert torch.allclose(lp.exp(), probs[0, :5], atol=1e-6)


def test_task_counts():
    task = m.HiddenRuleTask(n_train=64, n_test=32)
    assert task.n_correct(torch.arange(96)).tolist() == [[1, 13, 67, 175][h] for h in task.tolerances.tolist()]
    R = task.reward_matrix(torch.arange(96))
    assert R.sum(1).tolist() == task.n_correct(torch.arange(96)).float().tolist()


# -- claim 6: selection returns exactly the tau-closest prompts, no duplicates ----------------------

@pytest.mark.parametrize("tau", [0.5, 0.2])
def test_select_prompts_brute_force(tau):
    g = _gen(11)
    scores = torch.rand(40, generator=g) * 1.4 - 0.2
    pool = torch.randperm(500, generator=g)[:40]
    got = m.select_prompts(scores, pool, 10, tau, g)
    assert got.unique().numel() == 10
    d = (scores.clamp(0, 1) - tau).abs()
    dist_of = {int(p): float(x) for p, x in zip(pool, d)}
    chosen = sorted(dist_of[int(p)] for p in got)
    assert chosen == pytest.approx(sorted(d.tolist())[:10])


# -- claim 7: the replay buffer ----------------------------------------------------------------------

def test_replay_buffer():
    buf = m.ErrorPrioritizedReplay(capacity=8, add_per_step=4, seed=0)
    for step in range(5):
        idx = torch.arange(12) + 100 * step
        y = torch.zeros(12, 3, dtype=torch.long)
        r = (torch.arange(12) % 2).float()
        est = torch.zeros(12)
        obs = torch.arange(12).float() / 12
        k = buf.push(idx, y, r, est, obs)
        assert k == 4 and len(buf) <= 8
        assert bool((buf.reward[: len(buf)] == 1).all())
        newest = buf.prompt_idx[(buf.ptr - 4 + torch.arange(4)) % 8]
        assert sorted((newest - 100 * step).tolist()) == [5, 7, 9, 11]   # the largest errors among r = 1
    pi, yy, rr = buf.sample(5)
    assert pi.numel() == 5 and pi.unique().numel() == 5 and bool((rr == 1).all())
    assert buf.sample(0) is None


# -- the trainer runs for every method, and the objectives' invariants ------------------------------

def test_every_method_runs(small):
    cfg, task, pol = small
    for mth in ex.ALL_METHODS:
        out = m.train(mth, task, copy.deepcopy(pol), steps=3, batch_prompts=8, eval_every=2, seed=0)
        assert out["step"].tolist() == [0, 2, 3]
        assert 0 <= out["test_learnable"].min() and out["test_learnable"].max() <= 1


def test_one_step_of_tb_is_reinforce_with_baseline_beta_log_z(small):
    """The theorem of notebook 2: at theta = theta_old the gradient of (3.3) is (2/beta) x REINFORCE
    with baseline beta log Z_phi; after clipping, one Adam step from either is (nearly) the same."""
    cfg, task, _ = small
    out = ex.reinforce_identity(cfg, task, seed=0, n_prompts=8)
    assert out["n_samples"] == 8 * cfg.group_size
    assert out["cosine"] == pytest.approx(1.0, abs=1e-12)
    assert out["norm_ratio"] == pytest.approx(2 / cfg.beta, rel=1e-10)
    assert out["max_rel_deviation"] < 1e-10 and out["adam_step_diff"] < 0.05
    with pytest.raises(ValueError, match="n_prompts"):
        ex.reinforce_identity(cfg, task, n_prompts=task.n_train + 1)


def test_decomposition_rows_use_grpo_loss_with_the_selectors(small):
    """grpo_zsel selects by Z_phi (trained, so the estimate moves) and grpo_oracle by the exact
    accuracy: both differ from uniform GRPO on the same seed; Z_phi stays untrained in grpo_oracle."""
    cfg, task, pol = small
    kw = dict(steps=4, batch_prompts=8, eval_every=2, seed=0)
    out = {k: m.train(k, task, copy.deepcopy(pol), return_models=True, **kw)
           for k in ("grpo", "grpo_zsel", "grpo_oracle")}
    assert not (out["grpo_zsel"]["sel_p"] == out["grpo"]["sel_p"]).all()
    assert out["grpo_oracle"]["sel_p"].mean() != out["grpo"]["sel_p"].mean()
    torch.manual_seed(0)
    init = m.LogPartition(task.emb_dim, 64).state_dict()            # train() seeds torch, then builds Z_phi
    for k, moved in (("grpo_zsel", True), ("grpo_oracle", False), ("grpo", False)):
        same = all(torch.equal(v, init[n]) for n, v in out[k]["_logz"].state_dict().items())
        assert same != moved, k
    assert out["grpo"]["eff_curve"].shape == out["grpo"]["test_learnable"].shape
    assert out["grpo"]["eff_curve"][-1] == out["grpo"]["eff_correct"]


def test_runs_at_reuses_the_cache_and_validation_seeds_are_disjoint(small):
    from dataclasses import replace

    cfg, task, _ = small
    cfg = replace(cfg, steps=2, eval_every=2, warm_steps=5, batch_prompts=4, seeds=(0,), val_seeds=(7,),
                  n_val_prompts=32)
    cache = {}
    first = ex.runs_at(cfg, task, "grpo", 1e-2, (7,), cache)
    assert ex.runs_at(cfg, task, "grpo", 1e-2, (7,), cache)[0] is first[0] and len(cache) == 1
    val = ex.runs_at(cfg, ex.validation_task(cfg, task), "grpo", 1e-2, (7,), cache, diagnostics=False)
    assert len(cache) == 2 and ex.validation_auc(cfg, task, "grpo", 1e-2, cache) == ex.auc(val[0])
    assert len(cache) == 2                                # the tuning's run was reused, not repeated
    other = ex.runs_at(cfg, task, "grpo", 1e-2, (7,), cache, diagnostics=False)
    assert len(cache) == 3 and other[0] is not first[0]   # another setting is another run
    with pytest.raises(ValueError, match="val_seeds"):
        ex.validation_auc(replace(cfg, val_seeds=(0,)), task, "grpo", 1e-2)
    with pytest.raises(ValueError, match="n_val_prompts"):
        ex.validation_task(replace(cfg, n_val_prompts=task.n_train), task)


def test_clip_policy_none_removes_only_the_policy_clip(small):
    """The no-clip control: the first step sees the same batch and the same pre-clip norm (TB's is
    far above one), after which the unclipped run moves differently; a bad clip norm is refused."""
    cfg, task, pol = small
    kw = dict(steps=3, batch_prompts=8, eval_every=3, seed=2, diagnostics=False)
    clipped = m.train("gfn_old", task, copy.deepcopy(pol), **kw)
    free = m.train("gfn_old", task, copy.deepcopy(pol), clip_policy=None, **kw)
    assert free["grad_norm"][0] == pytest.approx(clipped["grad_norm"][0]) and clipped["grad_norm"][0] > 1
    assert not np.array_equal(free["test_learnable"], clipped["test_learnable"])
    with pytest.raises(ValueError, match="clip_policy"):
        m.train("gfn_old", task, copy.deepcopy(pol), clip_policy=0.0, **kw)


def test_lr_neighbours_reads_the_tuning_cache(small):
    """The learning-rate sensitivity is read off the cached validation runs (no run is repeated): the
    paired mean difference at the chosen rates and with one method moved one grid step, NaN past an end."""
    from dataclasses import replace

    cfg, task, _ = small
    cfg = replace(cfg, seeds=(0,), val_seeds=(7, 8), n_val_prompts=32, lr_grid=(1e-3, 2e-3, 4e-3), pool_factor=2,
                  batch_prompts=8)
    n_val = ex.validation_task(cfg, task).n_test
    score = {"grpo": {1e-3: 0.3, 2e-3: 0.5, 4e-3: 0.4}, "paced": {1e-3: 0.2, 2e-3: 0.3, 4e-3: 0.35}}
    tuning = (("diagnostics", False),)          # the tuning runs' settings, part of the cache key
    cache = {(k, lr, s, n_val, tuning): {"test_learnable": np.array([v + 0.01 * (s - 7)])}
             for k, row in score.items() for lr, v in row.items() for s in cfg.val_seeds}
    tab = ex.validation_scores(cfg, task, "grpo", cache)
    assert tab.shape == (2, 3) and tab.loc[8, 2e-3] == pytest.approx(0.51) and len(cache) == 12
    assert ex.validation_scores(cfg, task, "grpo", cache, seeds=(7,)).mean().idxmax() == 2e-3
    sens = ex.lr_neighbours(cfg, task, {"d": ("grpo", "paced")}, {"grpo": 2e-3, "paced": 4e-3}, cache)
    row = sens.loc["d"]
    assert row["chosen"] == pytest.approx(0.15) and row["a down"] == pytest.approx(-0.05)
    assert row["a up"] == pytest.approx(0.05) and row["b down"] == pytest.approx(0.2) and np.isnan(row["b up"])
    assert len(cache) == 12
    with pytest.raises(ValueError, match="lrs"):
        ex.lr_neighbours(cfg, task, {"d": ("grpo", "paced")}, {"grpo": 3e-3, "paced": 4e-3}, cache)
    with pytest.raises(ValueError, match="seeds"):
        ex.validation_scores(cfg, task, "grpo", cache, seeds=(0,))


def test_validation_task_holds_out_training_prompts_and_never_reaches_test_prompts(small):
    """Tuning is scored on held-out training prompts: the validation task trains on the first
    n_train - n_val training prompts, scores the last n_val, and refuses every test prompt."""
    from dataclasses import replace

    cfg, task, _ = small
    cfg = replace(cfg, n_val_prompts=32, pool_factor=2, batch_prompts=8)
    vt = ex.validation_task(cfg, task)
    assert vt is ex.validation_task(cfg, task)                       # cached
    assert vt.train_idx.tolist() == list(range(96)) and vt.test_idx.tolist() == list(range(96, 128))
    assert task.n_train == 128 and task.test_idx[0] == 128          # the task itself is untouched
    with pytest.raises(ValueError, match="prompt_idx"):
        vt.reward_matrix(task.test_idx[:2])
    out = m.train("paced", vt, m.ARPolicy(task.emb_dim, task.vocab, task.length, 16), steps=2,
                  batch_prompts=8, pool_factor=2, eval_every=2, diagnostics=False)
    assert int(out["times_selected"].shape[0]) == 96 and out["test_learnable"].shape == (2,)


def test_diagnostics_off_trains_identically(small):
    """The tuning runs skip the diagnostics; every random draw and update is the same, so the area
    is equal; the gradient norm before clipping is recorded either way (TB's is about 2/beta larger)."""
    cfg, task, pol = small
    kw = dict(steps=4, batch_prompts=8, eval_every=2, seed=3)
    for k in ("paced", "grpo_oracle"):
        full = m.train(k, task, copy.deepcopy(pol), **kw)
        lite = m.train(k, task, copy.deepcopy(pol), diagnostics=False, **kw)
        assert np.array_equal(full["test_learnable"], lite["test_learnable"])
        assert np.array_equal(full["grad_norm"], lite["grad_norm"]) and full["grad_norm"].shape == (4,)
        assert "eff_correct" in full and "eff_correct" not in lite and lite["beta_kl"].size == 0
    with pytest.raises(TypeError, match="diagnostics"):
        m.train("paced", task, copy.deepcopy(pol), steps=1, diagnostics=1)


def test_run_methods_takes_a_learning_rate_per_method(small):
    from dataclasses import replace

    cfg, task, _ = small
    cfg = replace(cfg, steps=2, eval_every=2, warm_steps=5, batch_prompts=4)
    a = ex.run_methods(cfg, task, ["grpo"], (0,), progress=False, lrs={"grpo": 1e-2})["grpo"][0]
    b = ex.runs_at(cfg, task, "grpo", 1e-2, (0,), diagnostics=True)[0]
    assert np.array_equal(a["test_learnable"], b["test_learnable"])
    with pytest.raises(ValueError, match="lrs"):
        ex.run_methods(cfg, task, ["grpo"], (0,), progress=False, lrs={"ppo": 1e-2})
    with pytest.raises(ValueError, match="lrs"):
        ex.run_methods(cfg, task, ["grpo"], (0,), progress=False, lrs={"grpo": -1.0})


def test_diversity_at_matched_accuracy():
    res = {"test_learnable": np.array([0.1, 0.3, 0.5]), "eff_curve": np.array([6.0, 5.0, 3.0])}
    assert ex.eff_at_accuracy(res, 0.4) == pytest.approx(4.0)
    assert ex.eff_at_accuracy(res, 0.05) == 6.0 and np.isnan(ex.eff_at_accuracy(res, 0.6))
    runs = {"flowrl": [dict(res, test_learnable=np.array([0.1, 0.2, 0.4]), eff_correct=3.0)],
            "grpo": [res]}
    tab = ex.matched_diversity(runs, "flowrl", ("grpo",))
    assert tab.loc[0, "accuracy"] == 0.4 and tab.loc[0, "GRPO"] == pytest.approx(4.0)
    match = pd.DataFrame({"FlowRL": [5.0, 4.0, 6.0], "GRPO": [4.0, np.nan, 3.0], "PACED-RL": [np.nan] * 3})
    d = ex.matched_differences(match, "flowrl", ("grpo", "paced"))
    row = d.loc["FlowRL - GRPO"]                                   # paired over the 2 seeds GRPO reaches
    assert row["difference"] == pytest.approx(2.0) and row["seeds"] == 2 and row["ahead"] == 2
    assert row["95% lo"] < 2.0 < row["95% hi"]
    assert d.loc["FlowRL - PACED-RL", "seeds"] == 0 and np.isnan(d.loc["FlowRL - PACED-RL", "difference"])


def test_grpo_advantages_and_mixed_probability():
    a = m.grpo_advantages(torch.tensor([[1.0, 0, 0, 1], [1, 1, 1, 1]]))
    assert torch.allclose(a[0], torch.tensor([1.0, -1, -1, 1]), atol=1e-5) and bool((a[1] == 0).all())
    p = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    assert m.mixed_group_probability(p, 8).tolist() == pytest.approx([0.5695, 0.9922, 0.5695], abs=1e-4)


# -- no host sync per training step (issue 43, point 3) ------------------------------------------------

def _train_small(task, pol, method, n, **kw):
    kw = dict(dict(steps=n, batch_prompts=4, group_size=4, eval_every=100, bias_every=1, seed=5), **kw)
    return m.train(method, task, copy.deepcopy(pol), **kw)


def test_train_logs_equal_the_per_step_reads(small, monkeypatch):
    """The logs read once after the loop are, bit for bit, the float() reads the loop made every step
    before (issue 43): the pre-clip norm, beta KL and the mixed-group fraction, recorded here per step."""
    cfg, task, pol = small
    task = copy.copy(task)                                  # the wrapped reward stays on this copy
    seen = {"grad_norm": [], "beta_kl": [], "mixed_frac": []}
    clip, kl, reward = torch.nn.utils.clip_grad_norm_, ex.kl_divergence, task.reward

    def clip_read(params, max_norm, *a, **k):
        params = list(params)
        out = clip(params, max_norm, *a, **k)
        if params[0].shape[1] == task.emb_dim + task.length + task.vocab + 1:       # the policy's, not Z_phi's
            seen["grad_norm"].append(float(out))
        return out

    def kl_read(p, q):
        out = kl(p, q)
        seen["beta_kl"].append(float(cfg.beta * out.mean()))
        return out

    def reward_read(idx, y):
        rg = reward(idx, y).view(-1, 4)
        seen["mixed_frac"].append(float(((rg.sum(1) > 0) & (rg.sum(1) < 4)).float().mean()))
        return rg.reshape(-1)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip_read)
    monkeypatch.setattr(ex, "kl_divergence", kl_read)
    task.reward = reward_read
    for method in ("paced", "dynamic_sampling"):
        for v in seen.values():
            v.clear()
        out = _train_small(task, pol, method, 4, beta=cfg.beta)
        assert out["grad_norm"].shape == (4,) and out["grad_norm"].dtype == np.float64
        for k, v in seen.items():
            if method == "dynamic_sampling" and k != "mixed_frac":   # a step with no mixed group logs 0.0
                v = [x for x in out[k].tolist() if x == 0.0] + v
                assert sorted(out[k].tolist()) == sorted(v), (method, k)
            else:
                assert out[k].tolist() == v, (method, k)


def test_train_checks_the_first_step_and_trusts_the_later_ones(small, monkeypatch):
    """The value checks run in the first step only, the switch is restored after ``train`` (after an error
    too), and a bad value of the first step is still refused."""
    cfg, task, pol = small
    task = copy.copy(task)
    states, reward = [], task.reward

    def reward_spy(idx, y):
        states.append(m._checks.value_checks())
        if len(states) == 3 and fail:
            raise RuntimeError("stop")
        return reward(idx, y)

    task.reward, fail = reward_spy, False
    _train_small(task, pol, "paced", 3)
    assert states == [True, False, False] and m._checks.value_checks()
    states.clear()
    fail = True
    with pytest.raises(RuntimeError, match="stop"):
        _train_small(task, pol, "paced", 3)
    assert m._checks.value_checks()
    with m._checks.trusted_values():
        assert not m._checks.value_checks()
        m.kl_divergence(torch.zeros(1, 2), torch.zeros(1, 2))          # not normalised: not checked here
    with pytest.raises(ValueError, match="normalised"):
        m.kl_divergence(torch.zeros(1, 2), torch.zeros(1, 2))
    bad = copy.copy(task)
    bad.embeddings = task.embeddings.clone().fill_(float("nan"))
    with pytest.raises(ValueError, match="emb must be finite"):
        _train_small(bad, pol, "paced", 2)


@pytest.mark.parametrize("method, per_step", [("paced", 1), ("paced_noreplay", 0), ("grpo_zsel", 0),
                                              ("oracle", 0), ("dynamic_sampling", 1)])
def test_train_syncs_per_step(small, method, per_step):
    """Host syncs per step of ``train`` (counted by icml26.book.budget): none, but for two reads of a
    data-dependent size (see ``train``'s docstring): PACED-RL's replay push (the number of successes
    sets the replay generator's permutation) and dynamic sampling's mixed groups (the batch size).
    Runs of 2 and 4 steps: a step with no mixed group left (dynamic sampling's first one here) logs no
    selected prompt, so the reads after the loop would differ between runs of 1 and 3 steps."""
    from icml26.book.budget import count_step

    cfg, task, pol = small
    two, four = (count_step(lambda n=n: _train_small(task, pol, method, n)).syncs for n in (2, 4))
    assert (four - two) / 2 == per_step


# -- bad inputs (spec Sec. 9) ------------------------------------------------------------------------

def test_bad_inputs():
    z = torch.zeros(4)
    with pytest.raises(ValueError, match="beta"):
        m.tb_loss(z, z, z, z, beta=0.0)
    with pytest.raises(ValueError, match="logp"):
        m.tb_residual(z, torch.zeros(3), z, z, 0.05)
    with pytest.raises(ValueError, match="reward"):
        m.tb_loss(z, z, z, torch.full((4,), 0.5), 0.05)
    assert torch.isfinite(m.tb_loss(z, z, z, torch.full((4,), 0.5), 0.05, check_binary=False))
    with pytest.raises(ValueError, match="weight"):
        m.tb_loss(z, z, z, z, 0.05, weight=torch.tensor([1.0, -1, 1, 1]))
    with pytest.raises(ValueError, match="log_z"):
        m.tb_loss(torch.tensor([0.0, float("nan"), 0, 0]), z, z, z, 0.05)
    with pytest.raises(ValueError, match="tau"):
        m.select_prompts(torch.rand(5), torch.arange(5), 2, tau=1.5)
    with pytest.raises(ValueError, match="batch_size"):
        m.select_prompts(torch.rand(5), torch.arange(5), 6)
    with pytest.raises(ValueError, match="scores and pool_idx"):
        m.select_prompts(torch.rand(5), torch.arange(4), 2)
    with pytest.raises(ValueError, match="capacity"):
        m.ErrorPrioritizedReplay(capacity=4, add_per_step=8)
    with pytest.raises(ValueError, match="length"):
        m.HiddenRuleTask(length=0)
    with pytest.raises(ValueError, match="vocab"):
        m.HiddenRuleTask(vocab=1)
    with pytest.raises(ValueError, match="easy_tolerance"):
        m.HiddenRuleTask(easy_tolerance=5)
    with pytest.raises(ValueError, match="max_responses"):
        m.HiddenRuleTask(vocab=10, length=7)
    task = m.HiddenRuleTask(n_train=64, n_test=16)
    pol = m.ARPolicy()
    for kw, name in [(dict(beta=-1.0), "beta"), (dict(group_size=1), "group_size"), (dict(batch_prompts=0),
                     "batch_prompts"), (dict(pool_factor=0), "pool_factor"), (dict(replay_size=-1), "replay_size"),
                     (dict(tau=2.0), "tau"), (dict(batch_prompts=32, pool_factor=4), "pool_factor")]:
        with pytest.raises(ValueError, match=name):
            m.train("paced", task, pol, steps=1, **kw)
    with pytest.raises(ValueError, match="method"):
        m.train("ppo", task, pol, steps=1)


@pytest.mark.cuda
def test_cuda_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    g = _gen(3)
    d = ex.random_enumerable(256, 16, 1.0, 0.3, g)
    lp = ex.perturb(d["logp_old"], 0.3, g)
    c_cpu = m.optimal_log_z(lp, d["logp_old"], d["reward"], 0.05)
    c_gpu = m.optimal_log_z(lp.cuda(), d["logp_old"].cuda(), d["reward"].cuda(), 0.05).cpu()
    assert torch.allclose(c_cpu, c_gpu, atol=1e-9)
    task = m.HiddenRuleTask(n_train=64, n_test=32)
    torch.manual_seed(0)
    pol = m.ARPolicy()
    acc_cpu = m.exact_accuracy(pol, task, task.test_idx)
    acc_gpu = m.exact_accuracy(copy.deepcopy(pol).cuda(), task.to("cuda"), task.test_idx).cpu()
    assert torch.allclose(acc_cpu, acc_gpu, atol=1e-5)
    out = m.train("paced", task, copy.deepcopy(pol).cuda(), steps=3, batch_prompts=8, eval_every=2)
    assert out["test_learnable"].shape == (2,) or out["test_learnable"].shape == (3,)


@pytest.mark.parametrize("scale", sorted(m.PRESETS))
def test_preset_constraints(scale):
    for cfg in (m.PRESETS[scale], m.PRESETS[scale].dry_run()):
        assert cfg.pool_factor * cfg.batch_prompts <= cfg.n_train
        assert cfg.big_pool_factor * cfg.batch_prompts <= cfg.n_train
        assert 2 * cfg.batch_prompts <= cfg.n_train                      # dynamic sampling draws 2B
        assert cfg.replay_add <= cfg.replay_capacity and cfg.n_calib <= cfg.n_train
        assert 0 < cfg.from_step < cfg.steps and cfg.vocab**cfg.length <= 10**6
        assert len(cfg.id_sizes) >= 2 and cfg.id_sizes[0] == 0.0
        assert not set(cfg.val_seeds) & set(cfg.seeds) and len(cfg.lr_grid) >= 2
        assert cfg.pool_factor * cfg.batch_prompts <= cfg.n_train - cfg.n_val_prompts   # validation task's pool
    if scale in ("book", "gpu"):
        # a fine grid (ratios <= 2), 4 values at least spanning a factor of 3, tuned on 4 validation
        # seeds at least (2 seeds moved the choices of two methods: issue 37); gpu tunes on no fewer
        grid = m.PRESETS[scale].lr_grid
        assert len(m.PRESETS[scale].seeds) >= 10 and len(grid) >= 4 and max(grid) / min(grid) >= 3
        assert all(b / a <= 2 + 1e-9 for a, b in zip(grid, grid[1:]))
        assert len(m.PRESETS[scale].val_seeds) >= max(4, len(m.PRESETS["book"].val_seeds))
