"""Tests of icml26.bandpo: the unit identities of the spec (Sec. 8, items 1-8) and its bad inputs (Sec. 9)."""

from __future__ import annotations

import math

import icml26.bandpo as bp
import numpy as np
import pytest
import torch

F64 = torch.float64
GRID = torch.linspace(0.001, 0.999, 999, dtype=F64)  # 999-point grid in (0, 1)


# ----------------------------------------------------------------------------- identity 1
@pytest.mark.parametrize("divergence", ["tv", "chi2", "hellinger"])
@pytest.mark.parametrize("delta", [0.01, 0.05, 0.2])
def test_closed_forms_equal_bisection(divergence, delta):
    lo_c, hi_c = bp.band_bounds_closed_form(GRID, delta, divergence)
    lo_b, hi_b = bp.band_bounds_bisect(GRID, delta, divergence)
    assert torch.allclose(lo_c, lo_b, atol=1e-10, rtol=0)
    assert torch.allclose(hi_c, hi_b, atol=1e-10, rtol=0)


# ----------------------------------------------------------------------------- identity 2
@pytest.mark.parametrize("divergence", list(bp.DIVERGENCES))
def test_operator_matches_cvxpy(divergence):
    rng = np.random.default_rng(1)
    for _ in range(3):
        q = bp.random_old_distribution(rng, n_max=20)
        a = int(rng.integers(q.size))
        lo_ref, hi_ref = bp.band_bounds_cvxpy(q, a, 0.05, divergence)
        lo, hi = bp.band_bounds(torch.tensor([q[a]], dtype=F64), 0.05, divergence, ratio_cap=None)
        assert abs(lo.item() - lo_ref) < 1e-4
        assert abs(hi.item() - hi_ref) / hi_ref < 1e-4


def test_cvxpy_depends_only_on_p():
    rng = np.random.default_rng(3)
    q = bp.random_old_distribution(rng, n_min=6, n_max=8)
    out = bp.rearrangement_check(q, 0, 0.05, "chi2", n_perm=2)
    assert np.abs(out - out[0]).max() < 1e-5


# ----------------------------------------------------------------------------- identity 3
@pytest.mark.parametrize("divergence", list(bp.DIVERGENCES))
@pytest.mark.parametrize("delta", [0.01, 0.05, 0.2])
def test_roots_hit_the_constraint(divergence, delta):
    lo, hi = bp.band_bounds(GRID, delta, divergence, ratio_cap=None)
    g_hi = bp.band_constraint(GRID, hi, divergence)
    g_lo = bp.band_constraint(GRID, lo, divergence)
    # unsaturated: the rest mass 1 - p u is resolvable in float64 (for Band-KL with p near 1 and a
    # large delta the root sits within 1e-90 of 1/p: numerically saturated, as the lower root below)
    unsat_hi = (1.0 - GRID * hi) > 1e-9
    unsat_lo = lo > 0
    if divergence == "kl":
        unsat_lo &= GRID >= delta / 745
    assert unsat_hi.any() and unsat_lo.any()
    assert (g_hi[unsat_hi] - delta).abs().max() < 1e-8
    assert (g_lo[unsat_lo] - delta).abs().max() < 1e-8
    # saturated bounds are feasible
    assert (g_hi[~unsat_hi] <= delta + 1e-12).all()
    assert (g_lo[~unsat_lo] <= delta + 1e-12).all() or divergence == "kl"


# ----------------------------------------------------------------------------- identity 4
@pytest.mark.parametrize("divergence", list(bp.DIVERGENCES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_invariants_monotone_nested(divergence, dtype):
    p = torch.logspace(-6, math.log10(0.999999), 400, dtype=dtype)
    lo1, hi1 = bp.band_bounds(p, 0.02, divergence, ratio_cap=None)
    lo2, hi2 = bp.band_bounds(p, 0.1, divergence, ratio_cap=None)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    for lo, hi in ((lo1, hi1), (lo2, hi2)):
        assert torch.isfinite(lo).all() and torch.isfinite(hi).all()
        assert (lo >= 0).all() and (lo <= 1).all() and (hi >= 1).all()
        assert (hi <= (1.0 / p) * (1 + tol)).all()
        assert (hi[1:] <= hi[:-1] * (1 + tol)).all()  # u non-increasing in p
        assert (lo[1:] >= lo[:-1] - tol).all()  # l non-decreasing in p
    assert (lo2 <= lo1 + tol).all() and (hi2 >= hi1 * (1 - tol)).all()  # nesting in delta


def test_no_nan_at_extremes():
    p = torch.tensor([1e-30, 1e-12, 1e-7, 0.5, 1 - 1e-9, 1.0], dtype=F64)
    for div in bp.DIVERGENCES:
        for dtype in (torch.float32, F64):
            lo, hi = bp.band_bounds(p.to(dtype), 0.05, div)
            assert torch.isfinite(lo).all() and torch.isfinite(hi).all()
        r = torch.tensor([0.0, 1.0, 2.0], dtype=F64)
        assert not torch.isnan(bp.band_constraint(torch.full((3,), 0.5, dtype=F64), r, div)).any()
        assert not torch.isnan(bp.band_constraint(torch.tensor([0.5], dtype=F64), torch.tensor([2.0], dtype=F64), div)).any()


# ----------------------------------------------------------------------------- identity 5
def test_kl_limits():
    delta = 0.05
    lo, hi = bp.band_bounds(torch.tensor([1 - 1e-9], dtype=F64), delta, "kl", ratio_cap=None)
    assert abs(lo.item() - math.exp(-delta)) < 1e-6 and abs(hi.item() - 1.0) < 1e-6
    p = torch.tensor([1e-8], dtype=F64)
    lo, hi = bp.band_bounds(p, delta, "kl", ratio_cap=None)
    room = (p * (hi - 1)).item()
    assert abs(room / (1 - math.exp(-delta)) - 1) < 1e-3
    assert lo.item() == 0.0  # the lower root exp(-delta/p) underflows


# ----------------------------------------------------------------------------- identity 6
@pytest.mark.parametrize("divergence", ["kl", "reverse_kl", "hellinger", "neyman_chi2", "chi2"])
def test_quadratic_law(divergence):
    p = torch.linspace(0.05, 0.95, 91, dtype=F64)
    lo, hi = bp.band_bounds(p, 1e-5, divergence, ratio_cap=None)
    qlo, qhi = bp.quadratic_band(p, 1e-5, bp.DIVERGENCES[divergence].kappa)
    tol = 1e-9 if divergence == "chi2" else 1e-2
    assert (((hi - 1) / (qhi - 1) - 1).abs() < tol).all()
    assert (((1 - lo) / (1 - qlo) - 1).abs() < tol).all()


# ----------------------------------------------------------------------------- identity 7
def test_surrogate_equals_ppo_clip():
    gen = torch.Generator().manual_seed(0)
    logp_old = -torch.rand(8, 5, generator=gen, dtype=F64) * 3
    logp = logp_old + 0.4 * torch.randn(8, 5, generator=gen, dtype=F64)
    adv = torch.randn(8, generator=gen, dtype=F64)
    mask = (torch.rand(8, 5, generator=gen) > 0.2).to(F64)
    mask[:, 0] = 1
    eps = 0.2
    loss, stats = bp.clipped_surrogate_loss(logp, logp_old, adv, 1 - eps, 1 + eps, mask=mask)
    r = torch.exp(logp - logp_old)
    A = adv[:, None]
    direct = -torch.min(r * A, torch.clamp(r, 1 - eps, 1 + eps) * A)
    ref = ((direct * mask).sum(1) / mask.sum(1)).mean()
    assert abs(loss.item() - ref.item()) < 1e-7
    loss_t, _ = bp.clipped_surrogate_loss(logp, logp_old, adv, 1 - eps, 1 + eps, mask=mask, agg="token-mean")
    assert abs(loss_t.item() - ((direct * mask).sum() / mask.sum()).item()) < 1e-7
    up = ((r > 1 + eps) & (A > 0) & (mask > 0)).sum() / mask.sum()
    assert abs(stats["clip_frac_up"].item() - up.item()) < 1e-12


def test_dual_clip_caps_negative_advantage():
    logp_old = torch.log(torch.tensor([[0.1, 0.1]], dtype=F64))
    logp = torch.log(torch.tensor([[0.1 * 20, 0.1]], dtype=F64))  # ratio 20 on the first token
    adv = torch.tensor([-1.0], dtype=F64)
    loss, _ = bp.clipped_surrogate_loss(logp, logp_old, adv, 0.8, 1.2, dual_clip=3.0, agg="token-mean")
    assert abs(loss.item() - (3.0 + 1.0) / 2) < 1e-12


def test_grpo_advantages():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    a = bp.grpo_advantages(r)
    assert torch.all(a[1] == 0)
    assert abs(a[0].mean().item()) < 1e-7 and a[0, 0] > 0 > a[0, 1]


# ----------------------------------------------------------------------------- identity 8
def test_inner_steps_one_makes_bounds_irrelevant():
    env = bp.HeadTailBandit(n_contexts=8, n_actions=6, seed=1)
    finals = [bp.train_bandit(env, bp.make_bound_fn(name), iters=6, group_size=8, inner_steps=1, seed=2)["logits"]
              for name in ("clip", "clip_higher", "dcpo", "band_kl", "band_tv")]
    for f in finals[1:]:
        assert np.abs(f - finals[0]).max() < 1e-6
    # and with several inner steps the rules do differ
    a = bp.train_bandit(env, bp.make_bound_fn("clip"), iters=6, group_size=8, inner_steps=4, seed=2)["logits"]
    b = bp.train_bandit(env, bp.make_bound_fn("band_kl"), iters=6, group_size=8, inner_steps=4, seed=2)["logits"]
    assert np.abs(a - b).max() > 1e-3


def test_replicas_equal_separate_runs():
    env = bp.HeadTailBandit(n_contexts=8, n_actions=6)
    fn = bp.make_bound_fn("band_kl")
    both = bp.train_bandit(env, fn, iters=5, group_size=8, inner_steps=3, seed=[4, 5])
    one = bp.train_bandit(bp.HeadTailBandit(n_contexts=8, n_actions=6, seed=5), fn, iters=5, group_size=8,
                          inner_steps=3, seed=5)
    assert np.abs(both["logits"][1] - one["logits"]).max() < 1e-12


def test_baseline_rules():
    p = torch.tensor([0.01, 0.5, 0.9], dtype=F64)
    lo, hi = bp.clip_bounds(p)
    assert torch.allclose(lo, torch.full_like(p, 0.8)) and torch.allclose(hi, torch.full_like(p, 1.2))
    lo, hi = bp.dcpo_bounds(p)
    assert torch.allclose(hi, (0.5 + 0.5 * torch.sqrt(1 + 0.8 / p)).clamp(max=10))
    lo, hi = bp.make_bound_fn("band_kl_relax")(p)
    lo0, hi0 = bp.make_bound_fn("band_kl")(p)
    assert (lo <= lo0).all() and (hi >= hi0).all() and (hi >= 1.28 - 1e-12).all()
    lo, hi = bp.band_bounds_from_logprob(torch.log(p), 0.05)
    assert torch.allclose(hi, hi0)


def test_token_task_runs():
    task = bp.TokenChainTask(n_prompts=8, seed=0)
    out = bp.train_token_policy(task, bp.make_bound_fn("band_kl"), iters=2, prompts_per_iter=4, group_size=4,
                                warm_steps=5)
    assert np.isfinite(out["expected_reward"]).all() and out["clip"].shape == (2, 3, 5)


# ----------------------------------------------------------------------------- bad inputs (Sec. 9)
P = torch.tensor([0.1, 0.5], dtype=F64)


@pytest.mark.parametrize("delta", [0.0, -0.1, float("nan"), float("inf")])
def test_bad_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        bp.band_bounds(P, delta)


@pytest.mark.parametrize("p", [[0.0, 0.5], [0.5, 1.2], [float("nan"), 0.5], [-0.1]])
def test_bad_p(p):
    with pytest.raises(ValueError, match="p must"):
        bp.band_bounds(torch.tensor(p, dtype=F64), 0.05)


def test_bad_logp():
    with pytest.raises(ValueError, match="old_logp"):
        bp.band_bounds_from_logprob(torch.tensor([0.01]), 0.05)
    lo, hi = bp.band_bounds_from_logprob(torch.tensor([5e-7]), 0.05)  # tiny positive: clamped to 0
    assert abs(hi.item() - 1.0) < 1e-6


def test_bad_divergence_and_method():
    with pytest.raises(ValueError, match="divergence"):
        bp.band_bounds(P, 0.05, "js")
    for div in ("kl", "reverse_kl", "neyman_chi2"):
        with pytest.raises(ValueError, match="closed"):
            bp.band_bounds(P, 0.05, div, method="closed")
        with pytest.raises(ValueError, match="closed form"):
            bp.band_bounds_closed_form(P, 0.05, div)
    with pytest.raises(ValueError, match="method"):
        bp.band_bounds(P, 0.05, method="newton")


def test_bad_knobs():
    with pytest.raises(ValueError, match="max_iter"):
        bp.band_bounds(P, 0.05, max_iter=0)
    with pytest.raises(ValueError, match="ratio_cap"):
        bp.band_bounds(P, 0.05, ratio_cap=0.5)
    with pytest.raises(ValueError, match="relax"):
        bp.band_bounds(P, 0.05, relax=(0.2,))
    with pytest.raises(ValueError, match="eps_low"):
        bp.clip_bounds(P, eps_low=-0.1)
    with pytest.raises(ValueError, match="eps_low"):
        bp.clip_bounds(P, eps_low=1.0)
    with pytest.raises(ValueError, match="eps_high"):
        bp.dcpo_bounds(P, eps_high=-0.1)


def test_bad_cvxpy_inputs():
    q = np.array([0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="1-D"):
        bp.band_bounds_cvxpy(q[None], 0, 0.05, "kl")
    with pytest.raises(ValueError, match="non-negative"):
        bp.band_bounds_cvxpy(np.array([-0.2, 0.7, 0.5]), 0, 0.05, "kl")
    with pytest.raises(ValueError, match="full support"):
        bp.band_bounds_cvxpy(np.array([0.0, 0.5, 0.5]), 0, 0.05, "kl")
    with pytest.raises(ValueError, match="sum to 1"):
        bp.band_bounds_cvxpy(np.array([0.2, 0.3, 0.6]), 0, 0.05, "kl")
    with pytest.raises(ValueError, match="action"):
        bp.band_bounds_cvxpy(q, 3, 0.05, "kl")


def test_cvxpy_status_raises(monkeypatch):
    import cvxpy as cp

    monkeypatch.setattr(cp.Problem, "solve", lambda self, *a, **k: setattr(self, "_status", "infeasible"))
    monkeypatch.setattr(cp.Problem, "status", property(lambda self: getattr(self, "_status", None)))
    with pytest.raises(RuntimeError, match="infeasible"):
        bp.band_bounds_cvxpy(np.array([0.2, 0.3, 0.5]), 0, 0.05, "tv")


def test_bad_loss_inputs():
    lp = torch.zeros(3, 4)
    with pytest.raises(ValueError, match="logp_old"):
        bp.clipped_surrogate_loss(lp, torch.zeros(3, 5), torch.zeros(3), 0.8, 1.2)
    with pytest.raises(ValueError, match="mask"):
        bp.clipped_surrogate_loss(lp, lp, torch.zeros(3), 0.8, 1.2, mask=torch.ones(3, 5))
    with pytest.raises(ValueError, match="mask"):
        bp.clipped_surrogate_loss(lp, lp, torch.zeros(3), 0.8, 1.2, mask=torch.zeros(3, 4))
    with pytest.raises(ValueError, match="lo"):
        bp.clipped_surrogate_loss(lp, lp, torch.zeros(3), 1.3, 1.2)
    with pytest.raises(ValueError, match="agg"):
        bp.clipped_surrogate_loss(lp, lp, torch.zeros(3), 0.8, 1.2, agg="sum")
    with pytest.raises(ValueError, match="dual_clip"):
        bp.clipped_surrogate_loss(lp, lp, torch.zeros(3), 0.8, 1.2, dual_clip=1.0)


def test_bad_advantage_inputs():
    with pytest.raises(ValueError, match="2-D"):
        bp.grpo_advantages(torch.zeros(4))
    with pytest.raises(ValueError, match="G >= 2"):
        bp.grpo_advantages(torch.zeros(4, 1))


def test_bad_env_inputs():
    with pytest.raises(ValueError, match="head_p"):
        bp.HeadTailBandit(head_p=0.95, tail_p=0.05)
    with pytest.raises(ValueError, match="n_contexts"):
        bp.HeadTailBandit(n_contexts=0)
    with pytest.raises(ValueError, match="head_reward"):
        bp.HeadTailBandit(head_reward=1.5)
    with pytest.raises(ValueError, match="inner_steps"):
        bp.train_bandit(bp.HeadTailBandit(n_contexts=2), bp.make_bound_fn("clip"), iters=1, inner_steps=0)
    with pytest.raises(ValueError, match="n_prompts"):
        bp.TokenChainTask(n_prompts=0)
    with pytest.raises(ValueError, match="inner_steps"):
        bp.train_token_policy(bp.TokenChainTask(n_prompts=4), bp.make_bound_fn("clip"), iters=1, inner_steps=0)
