"""Unit identities (spec section 8, claims 1-9) and bad inputs (section 9) of icml26.ba_solver."""

from __future__ import annotations

import math

import icml26.ba_solver as ba
import numpy as np
import pytest
import torch
from icml26.ba_solver.data import GMMParams

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def field():
    return ba.GMMVelocityField(ba.ring_gmm())


def _x0(n=64, seed=0, dtype=torch.float64):
    return torch.randn(n, 2, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ------------------------------------------------------------------------------- claim 1
def test_gmm_velocity_equals_score_form():
    p = ba.ring_gmm(n_modes=5, std=0.4)
    g = torch.Generator().manual_seed(1)
    x = (2 * torch.randn(50, 2, generator=g, dtype=torch.float64)).requires_grad_(True)
    t = 0.05 + 0.9 * torch.rand(50, generator=g, dtype=torch.float64)
    logp = ba.gmm_log_density(x, t, p).sum()
    (score,) = torch.autograd.grad(logp, x)
    u_score = (x + (1 - t)[:, None] * score) / t[:, None]
    u = ba.gmm_velocity(x.detach(), t, p)
    assert torch.allclose(u, u_score, atol=1e-8, rtol=0)


# ------------------------------------------------------------------------------- claim 2
def test_reference_matches_dop853(field):
    from scipy.integrate import solve_ivp

    x0 = _x0(8, seed=2)
    ref = ba.reference_solve(field, x0, steps=512)

    def rhs(t, z):
        zz = torch.tensor(z, dtype=torch.float64).view(-1, 2)
        return field(zz, torch.full((zz.shape[0],), t, dtype=torch.float64)).reshape(-1).numpy()

    sol = solve_ivp(rhs, (0.0, 1.0), x0.reshape(-1).numpy(), method="DOP853", rtol=1e-11, atol=1e-11)
    assert np.abs(sol.y[:, -1] - ref.reshape(-1).numpy()).max() < 1e-7


# ------------------------------------------------------------------------------- claim 3
def test_lobatto_weights_and_exactness():
    w_out, w_in = ba.lobatto_weights(ba.ALPHA_LOBATTO)
    assert abs(w_out - 1 / 12) < 1e-12 and abs(w_in - 5 / 12) < 1e-12
    a = ba.ALPHA_LOBATTO
    nodes, weights = [0.0, a, 1 - a, 1.0], [w_out, w_in, w_in, w_out]

    def rule(k):
        return sum(w * c**k for w, c in zip(weights, nodes))

    assert abs(rule(5) - 1 / 6) < 1e-12
    assert abs(abs(rule(6) - 1 / 7) - 4.76e-4) < 5e-6
    # any admissible alpha is exact to degree 3
    w_out, w_in = ba.lobatto_weights(1 / 3)
    assert (w_out, w_in) == pytest.approx((1 / 8, 3 / 8), abs=1e-12)


# ------------------------------------------------------------------------------- claim 4
@pytest.mark.parametrize("nfe", [1, 2, 3, 5, 10])
def test_zero_sidenet_is_ab2(field, nfe):
    x0 = _x0()
    assert (ba.ba_bi_anchor(field, ba.zero_sidenet(), x0, nfe) - ba.ab2(field, x0, nfe)).abs().max() < 1e-12


def test_fresh_sidenet_bi_anchor_is_ab2(field):
    x0 = _x0(dtype=torch.float32)
    side = ba.SideNetMLP(2, hidden=16, depth=2)
    assert torch.allclose(ba.ba_bi_anchor(field, side, x0, 5), ba.ab2(field, x0, 5), atol=1e-5)


# ------------------------------------------------------------------------------- claim 5
@pytest.mark.parametrize("name,nfe", [("euler", 5), ("ab2", 5), ("dpmpp_2m", 5), ("heun", 6),
                                      ("midpoint", 6), ("rk4", 8)])
def test_baseline_nfe_counts(field, name, nfe):
    x0 = _x0(16)
    counted = ba.CountingField(field)
    ba.SOLVERS[name](counted, x0, nfe)
    assert counted.calls == nfe and counted.evals_per_sample == nfe


@pytest.mark.parametrize("nfe", [1, 3, 5])
def test_ba_nfe_counts(field, nfe):
    x0 = _x0(16)
    back, side = ba.CountingField(field, 16), ba.CountingField(ba.zero_sidenet(), 16)
    ba.ba_bi_anchor(back, side, x0, nfe)
    assert back.calls == nfe and back.evals_per_sample == nfe
    assert side.calls == 2 * nfe - 1 and side.evals_per_sample == 4 * nfe - 1
    back, side = ba.CountingField(field, 16), ba.CountingField(ba.zero_sidenet(), 16)
    ba.ba_single_anchor(back, side, x0, nfe, nodes=2)
    assert back.evals_per_sample == nfe and side.calls == nfe and side.evals_per_sample == 2 * nfe


# ------------------------------------------------------------------------------- claim 6
def test_sidenet_zero_init_and_zero_offset():
    torch.manual_seed(0)
    side = ba.SideNetMLP(2, hidden=32, depth=2, n_classes=3)
    x, v = torch.randn(10, 2), torch.randn(10, 2)
    t, h = torch.rand(10) * 0.5, torch.rand(10) * 0.5
    assert torch.equal(side(x, v, t, h), torch.zeros_like(x))
    with torch.no_grad():
        for p in side.parameters():
            p.normal_()                                  # any weights, e.g. after training
    assert side(x, v, t, h, torch.zeros(10, dtype=torch.long)).abs().sum() > 0
    assert torch.equal(side(x, v, t, torch.zeros(10)), torch.zeros_like(x))


def test_sidenet_trains_and_keeps_h0_zero(field):
    side = ba.SideNetMLP(2, hidden=16, depth=2)
    g = torch.Generator().manual_seed(0)
    p32 = ba.ring_gmm().to(dtype=torch.float32)
    ema, hist = ba.train_sidenet(field, side, lambda n, gen: ba.sample_gmm(n, p32, gen), 3, 32, lr=1e-3,
                                 generator=g, chain_steps=2, progress=False)
    x = torch.randn(5, 2)
    assert torch.equal(ema(x, x, torch.full((5,), 0.3), torch.zeros(5)), torch.zeros_like(x))
    assert len(hist["loss"]) == 3 and all(math.isfinite(v) for v in hist["loss"])


# ------------------------------------------------------------------------------- claim 7
def test_sample_offsets_distribution():
    g = torch.Generator().manual_seed(0)
    t = torch.rand(20000, generator=g, dtype=torch.float64)
    h = ba.sample_offsets(t, generator=g)
    assert bool(((t + h) >= 0).all() and ((t + h) <= 1).all())
    n = 200000
    h = ba.sample_offsets(torch.full((n,), 0.5, dtype=torch.float64), lam=50.0, p_forward=0.5, generator=g)
    lam, d = 50.0, 0.5
    closed = 1 / lam - d * math.exp(-lam * d) / (1 - math.exp(-lam * d))
    assert abs(float(h.abs().mean()) / closed - 1) < 0.02
    assert abs(float((h > 0).double().mean()) - 0.5) < 0.01
    hf = ba.sample_offsets(torch.full((n,), 0.5), p_forward=0.8, generator=g)
    assert abs(float((hf > 0).float().mean()) - 0.8) < 0.01


# ------------------------------------------------------------------------------- claim 8
def test_dpmpp_first_and_last_steps_are_euler(field):
    x0 = _x0()
    assert torch.equal(ba.dpmpp_2m(field, x0, 1), ba.euler(field, x0, 1))
    _, traj = ba.dpmpp_2m(field, x0, 6, return_traj=True)
    v0 = field(x0, torch.zeros(64, dtype=torch.float64))
    assert torch.allclose(traj[1], x0 + v0 / 6, atol=1e-14)
    t5 = torch.full((64,), 5 / 6, dtype=torch.float64)
    assert torch.allclose(traj[6], traj[5] + field(traj[5], t5) / 6, atol=1e-14)


# ------------------------------------------------------------------------------- claim 9
def test_convergence_orders_on_oracle(field):
    x0 = _x0(200, seed=3)
    ref = ba.reference_solve(field, x0)
    orc = ba.oracle_sidenet(field, substeps=32)

    def slope(solver, **kw):
        e8 = ba.endpoint_error(solver(field, x0=x0, nfe=8, **kw), ref)
        e16 = ba.endpoint_error(solver(field, x0=x0, nfe=16, **kw), ref)
        return math.log2(e8 / e16)

    assert slope(lambda f, **k: ba.ba_bi_anchor(f, orc, **k)) >= 5
    assert 0.8 <= slope(ba.euler) <= 1.2
    assert 1.7 <= slope(ba.ab2) <= 2.4


# ------------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("solver,nfe", [("euler", 0), ("euler", 2.0), ("ab2", -1), ("heun", 3),
                                        ("midpoint", 5), ("rk4", 6), ("ba_bi_anchor", 0)])
def test_bad_nfe(field, solver, nfe):
    with pytest.raises(ValueError, match="nfe"):
        if solver == "ba_bi_anchor":
            ba.ba_bi_anchor(field, ba.zero_sidenet(), _x0(), nfe)
        else:
            ba.SOLVERS[solver](field, _x0(), nfe)


@pytest.mark.parametrize("alpha", [0.2, ba.ALPHA_MIN, 0.5, 0.7, -0.1])
def test_bad_alpha(field, alpha):
    with pytest.raises(ValueError, match="alpha"):
        ba.ba_bi_anchor(field, ba.zero_sidenet(), _x0(), 3, alpha=alpha)


@pytest.mark.parametrize("nodes", [0, 6, 2.0])
def test_bad_nodes(field, nodes):
    with pytest.raises(ValueError, match="nodes"):
        ba.ba_single_anchor(field, ba.zero_sidenet(), _x0(), 3, nodes=nodes)


@pytest.mark.parametrize("kw,match", [({"lam": 0.0}, "lam"), ({"p_forward": 1.5}, "p_forward"),
                                      ({"chain_steps": 0}, "chain_steps"), ({"label_dropout": 1.0}, "label_dropout"),
                                      ({"label_dropout": 0.1}, "null_class")])
def test_bad_chain_loss_args(field, kw, match):
    side = ba.SideNetMLP(2, hidden=8, depth=1)
    with pytest.raises(ValueError, match=match):
        ba.ba_chain_loss(field, side, torch.randn(8, 2), y=torch.zeros(8, dtype=torch.long), **kw)


def test_bad_offsets_args():
    with pytest.raises(ValueError, match="lam"):
        ba.sample_offsets(torch.rand(4), lam=-1.0)
    with pytest.raises(ValueError, match="p_forward"):
        ba.sample_offsets(torch.rand(4), p_forward=-0.1)


def test_bad_times(field):
    x = torch.randn(4, 2)
    with pytest.raises(ValueError, match="t must lie"):
        field(x, torch.full((4,), 1.5))
    with pytest.raises(ValueError, match="shape"):
        field(x, torch.full((3,), 0.5))
    side = ba.SideNetMLP(2, hidden=8, depth=1)
    with pytest.raises(ValueError, match="t \\+ h"):
        side(x, x, torch.full((4,), 0.9), torch.full((4,), 0.2))
    with pytest.raises(ValueError, match="h must"):
        side(x, x, torch.full((4,), 0.5), torch.full((5,), 0.1))


def test_wrong_output_shape(field):
    with pytest.raises(ValueError, match="velocity_fn"):
        ba.euler(lambda x, t, y=None: x[:, :1], _x0(), 3)

    def bad_side(x, v, t, h, y=None):
        return torch.zeros(x.shape[0], 3, dtype=x.dtype)

    with pytest.raises(ValueError, match="sidenet"):
        ba.ba_bi_anchor(field, bad_side, _x0(), 3)


def test_non_finite(field):
    x0 = _x0()
    x0[3, 0] = float("nan")
    with pytest.raises(ValueError, match="x0"):
        ba.euler(field, x0, 3)

    def blows_up(x, t, y=None):
        return torch.where(t[:, None] > 0.3, torch.full_like(x, float("inf")), x)

    with pytest.raises(ValueError, match="step 2"):
        ba.ab2(blows_up, _x0(), 5)


@pytest.mark.parametrize("kw,match", [
    ({"stds": torch.tensor([0.3, 0.0])}, "stds"),
    ({"weights": torch.tensor([-0.5, 1.5])}, "weights"),
    ({"weights": torch.tensor([0.5, 0.6])}, "sum to 1"),
    ({"stds": torch.tensor([0.3, 0.3, 0.3])}, "same number"),
])
def test_bad_mixture(kw, match):
    base = {"means": torch.zeros(2, 2), "stds": torch.tensor([0.3, 0.3]), "weights": torch.tensor([0.5, 0.5])}
    base.update(kw)
    with pytest.raises(ValueError, match=match):
        GMMParams(**base)


def test_mixture_dim_mismatch():
    with pytest.raises(ValueError, match="dimension"):
        ba.gmm_velocity(torch.randn(4, 3), torch.rand(4), ba.ring_gmm())


def test_bad_metrics():
    x = torch.randn(10, 2)
    with pytest.raises(ValueError, match="non-empty"):
        ba.sliced_wasserstein(torch.zeros(0, 2), x)
    with pytest.raises(ValueError, match="feature dimension"):
        ba.sliced_wasserstein(x, torch.randn(10, 3))
    with pytest.raises(ValueError, match="n_proj"):
        ba.sliced_wasserstein(x, x, n_proj=0)
    with pytest.raises(ValueError, match="d \\+ 1"):
        ba.frechet_distance(torch.randn(4, 8), torch.randn(40, 8))
    with pytest.raises(ValueError, match="feature dimension"):
        ba.energy_distance(x, torch.randn(10, 3))
    with pytest.raises(ValueError, match="shapes"):
        ba.endpoint_error(x, torch.randn(9, 2))


def test_bad_scale():
    with pytest.raises(ValueError, match="scale"):
        ba.preset("huge")


# ------------------------------------------------------------------------------- metric sanity
def test_metric_identities():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(500, 3, generator=g)
    assert ba.sliced_wasserstein(x, x, generator=g) < 1e-12
    assert ba.frechet_distance(x, x) == pytest.approx(0.0, abs=1e-9)
    shifted = x + torch.tensor([1.0, 0.0, 0.0])
    assert ba.frechet_distance(x, shifted) == pytest.approx(1.0, abs=1e-6)
    # a 1-D shift c along a random direction theta has projected W2 |c theta_1|; E theta_1^2 = 1/3
    assert ba.sliced_wasserstein(x, shifted, n_proj=4000, generator=g) == pytest.approx(3**-0.5, rel=0.05)
    assert ba.energy_distance(x, x) == pytest.approx(0.0, abs=1e-9)


# ------------------------------------------------------------------------------- training and cost plumbing
def test_chain_loss_backbone_calls_and_gradients(field):
    side = ba.SideNetMLP(2, hidden=16, depth=2)
    counted = ba.CountingField(field, 32)
    x1 = ba.sample_gmm(32, ba.ring_gmm().to(dtype=torch.float32), torch.Generator().manual_seed(0))
    loss, diag = ba.ba_chain_loss(counted, side, x1, chain_steps=3, generator=torch.Generator().manual_seed(1))
    assert counted.calls == 4 and diag["backbone_calls"] == 4 and len(diag["per_step"]) == 3
    loss.backward()
    # zero-initialised last layer: only its gradient is non-zero at the first step
    assert side.net[-1].weight.grad.abs().sum() > 0


def test_reference_of_module_uses_float64_copy():
    torch.manual_seed(0)
    net = ba.VelocityMLP(2, hidden=16, depth=2).eval().requires_grad_(False)
    x0 = torch.randn(8, 2)
    ref = ba.reference_solve(net, x0, steps=16)
    assert ref.dtype == torch.float64 and next(net.parameters()).dtype == torch.float32
    assert (ref - ba.rk4(net, x0, 64).double()).abs().max() < 1e-4


def test_cost_table_consistency():
    torch.manual_seed(0)
    net = ba.VelocityMLP(2, hidden=32, depth=2)
    side = ba.SideNetMLP(2, hidden=8, depth=1)
    c = ba.cost_table(net, side, 5, 19, dim=2)
    assert c["sidenet_params"] == sum(p.numel() for p in side.parameters())
    assert c["equiv_nfe"] == pytest.approx(5 + 19 * c["flop_ratio"])
    assert 0 < c["flop_ratio"] < 1


# ------------------------------------------------------------------------------- classifier-free guidance (issue 12)
def _cond_nets(seed=0, n_classes=3):
    torch.manual_seed(seed)
    net = ba.VelocityMLP(2, hidden=16, depth=2, n_classes=n_classes).double().eval().requires_grad_(False)
    side = ba.SideNetMLP(2, hidden=16, depth=2, n_classes=n_classes).double()
    with torch.no_grad():
        for p in side.parameters():
            p.normal_(0, 0.3)                                 # a non-zero SideNet
    return net, side.eval().requires_grad_(False)


@pytest.mark.parametrize("sampler", ["bi", "single"])
def test_guidance_scale_one_is_the_conditional_sampler(sampler):
    net, side = _cond_nets()
    x0, y = _x0(16), torch.arange(16) % 3
    fn = ba.ba_bi_anchor if sampler == "bi" else ba.ba_single_anchor
    with torch.no_grad():
        guided = fn(net, side, x0, 7, y, cfg_scale=1.0, null_class=3)
        plain = fn(net, side, x0, 7, y)
    assert torch.equal(guided, plain)


def test_guidance_scale_zero_everywhere_is_the_unconditional_sampler():
    net, side = _cond_nets()
    x0, y = _x0(16), torch.arange(16) % 3
    with torch.no_grad():
        guided = ba.ba_bi_anchor(net, side, x0, 5, y, cfg_scale=0.0, null_class=3, cfg_interval=(0.0, 2.0))
        uncond = ba.ba_bi_anchor(net, side, x0, 5, torch.full_like(y, 3))
    assert torch.equal(guided, uncond)
    with torch.no_grad():
        guided_w = ba.ba_bi_anchor(net, side, x0, 5, y, cfg_scale=2.0, null_class=3)
    assert not torch.equal(guided_w, ba.ba_bi_anchor(net, side, x0, 5, y))


def test_guided_baseline_on_label_constant_field():
    # v(x, t, y) = a_y: Euler with N = 10 guides the 7 steps whose start time lies in [0.3, 1)
    a = torch.tensor([[1.0, 0.0], [0.0, 2.0], [-1.0, -1.0]], dtype=torch.float64)

    def field(x, t, y=None):
        return a[y]

    x0, y, w = _x0(6), torch.tensor([0, 1, 0, 1, 0, 1]), 2.5
    out = ba.euler(field, x0, 10, y, cfg_scale=w, null_class=2)
    guided = a[2] + w * (a[y] - a[2])
    assert torch.allclose(out, x0 + 0.3 * a[y] + 0.7 * guided, atol=1e-12)
    counted = ba.CountingField(field, 6)
    ba.euler(counted, x0, 10, y, cfg_scale=w, null_class=2)
    assert counted.calls == 10 + 7                            # the unconditional branch only inside the interval


def test_bad_guidance_args(field):
    net, side = _cond_nets()
    x0, y = _x0(4), torch.zeros(4, dtype=torch.long)
    with pytest.raises(ValueError, match="null_class"):
        ba.ba_bi_anchor(net, side, x0, 3, y, cfg_scale=1.5)
    with pytest.raises(ValueError, match="labels"):
        ba.ba_bi_anchor(net, side, x0, 3, None, cfg_scale=1.5, null_class=3)
    with pytest.raises(TypeError, match="cfg_scale"):
        ba.euler(net, x0, 3, y, cfg_scale="big", null_class=3)
    with pytest.raises(ValueError, match="cfg_interval"):
        ba.ba_single_anchor(net, side, x0, 3, y, cfg_scale=1.5, null_class=3, cfg_interval=(0.8, 0.2))


def test_label_dropout_uses_the_null_class():
    from icml26.ba_solver.fields import drop_labels

    y = torch.zeros(20000, dtype=torch.long)
    out = drop_labels(y, 0.1, 7, torch.Generator().manual_seed(0))
    assert set(out.unique().tolist()) == {0, 7} and abs(float((out == 7).double().mean()) - 0.1) < 0.01
    with pytest.raises(ValueError, match="null_class"):
        ba.fm_loss(ba.VelocityMLP(2, hidden=8, depth=1, n_classes=2), torch.randn(4, 2), y[:4], label_dropout=0.1)


# ------------------------------------------------------------------------------- gpu scale (issue 28)
def test_presets_have_dry_runs_that_keep_sizes():
    # widths and training batches kept; evaluation points cut (the gpu's 20,000 cost minutes of CPU)
    for p in ba.PRESETS.values():
        d = p.dry_run()
        for nb in ("nb1", "nb2", "nb3"):
            full, cut = getattr(p, nb), getattr(d, nb)
            assert cut.side_steps <= min(full.side_steps, 3) and cut.side_batch == full.side_batch
            assert cut.side_hidden == full.side_hidden and 0 < cut.n_eval <= min(full.n_eval, 512)
        assert d.nb2.backbone_steps <= 3 and d.nb2.backbone_hidden == p.nb2.backbone_hidden


def test_digits_judge_does_not_depend_on_the_blas_thread_count():
    # one_thread pins torch only; the judge's logistic regression rounds differently on two BLAS threads
    # (coefficients 3.5e-5 apart on these digits), so the evaluator fits and predicts on one
    from sklearn.datasets import load_digits
    from threadpoolctl import threadpool_limits

    x, y = load_digits(return_X_y=True)
    x, y = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y)
    judged = []
    for n in (1, 2):
        with threadpool_limits(limits=n):
            judge = ba.DigitsEvaluator(x, y, n_pca=8, seed=0)
            judged.append((judge.clf.coef_.copy(), judge.accuracy(x[:300] + 0.5, y[:300])))
    assert np.array_equal(judged[0][0], judged[1][0]) and judged[0][1] == judged[1][1]


def test_exact_sidenet_trains_where_asked_and_returns_on_cpu(field):
    from icml26.ba_solver import experiments as ex

    cfg = ba.PRESETS["smoke"].nb1
    side, hist = ex.train_exact_sidenet(field, cfg, 2, torch.Generator().manual_seed(0), dev="cpu")
    assert hist["device"] == "cpu" and next(side.parameters()).device.type == "cpu"


def test_oracle_order_stays_above_the_reference_error(field):
    """Blocker 3 of issue 28: at the gpu preset's NFE 32 the oracle's error is the reference's own."""
    import pandas as pd
    from icml26.ba_solver import experiments as ex

    nfes = (4, 8, 16, 32)                                      # the gpu preset's range
    assert max(ba.PRESETS["gpu"].nb1.oracle_nfes) == 32
    x0 = _x0(16, seed=3)
    ref = ba.reference_solve(field, x0)
    orc = ba.oracle_sidenet(field, 32)
    conv = pd.DataFrame([{"method": "oracle", "nfe": n, "error": ba.endpoint_error(ba.ba_bi_anchor(field, orc, x0, n), ref)}
                         for n in nfes])
    floor = ex.reference_error(field, x0, ref)
    n1, n2 = ex.order_window(conv, "oracle", nfes, floor)
    assert n2 < 32 and ex.slope(conv, "oracle", n1, n2) >= 5   # NFE 32 is within 10x of the reference's error


def test_chain_loss_makes_no_host_sync(field):
    from torch.profiler import ProfilerActivity, profile

    side = ba.SideNetMLP(2, hidden=16, depth=2)
    x1 = ba.sample_gmm(32, ba.ring_gmm().to(dtype=torch.float32), torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    ba.ba_chain_loss(field, side, x1, chain_steps=3, generator=g)           # warm-up (casts cached)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        ba.ba_chain_loss(field, side, x1, chain_steps=3, generator=g)
    assert not [e for e in prof.events() if e.name == "aten::_local_scalar_dense"]


@pytest.mark.cuda
def test_sampler_and_training_step_cuda_match_cpu():
    net, side = _cond_nets(seed=1)
    x0, y = _x0(64, seed=2), torch.arange(64) % 3
    with torch.no_grad():
        cpu = ba.ba_bi_anchor(net, side, x0, 5, y, cfg_scale=1.5, null_class=3)
        gpu = ba.ba_bi_anchor(net.cuda(), side.cuda(), x0.cuda(), 5, y.cuda(), cfg_scale=1.5, null_class=3)
    assert (gpu.cpu() - cpu).abs().max() < 1e-10                           # float64 on both devices
    from icml26.ba_solver import experiments as ex

    s_gpu, hist = ex.train_exact_sidenet(ba.GMMVelocityField(ba.ring_gmm()), ba.PRESETS["smoke"].nb1, 3,
                                         torch.Generator().manual_seed(0), dev="cuda")
    assert hist["device"].startswith("cuda") and next(s_gpu.parameters()).device.type == "cpu"


# ------------------------------------------------------------------------------- time grids and the comparison protocol (issue 35)
def test_time_grid_is_uniform_at_shift_one_and_packs_steps_by_shift():
    from icml26.ba_solver.baselines import time_grid

    assert time_grid(5) == [i / 5 for i in range(6)] and time_grid(5, 1.0) == time_grid(5)
    for s in (0.5, 2.0):
        g = time_grid(7, s)
        assert g[0] == 0.0 and g[-1] == 1.0 and all(b > a for a, b in zip(g, g[1:]))
    assert time_grid(5, 2.0)[1] < 0.2 < time_grid(5, 0.5)[1]          # shift > 1: small steps near the noise
    for bad in (0.0, -1.0, math.nan, math.inf, "2", True):
        with pytest.raises(ValueError, match="shift"):
            time_grid(5, bad)


@pytest.mark.parametrize("name,nfe", [("euler", 5), ("heun", 6), ("midpoint", 6), ("rk4", 8), ("ab2", 5),
                                      ("dpmpp_2m", 5)])
def test_every_solver_takes_a_shift_and_one_is_the_default(field, name, nfe):
    x0 = _x0(16)
    fn = ba.SOLVERS[name]
    assert torch.equal(fn(field, x0, nfe, shift=1.0), fn(field, x0, nfe))
    assert not torch.equal(fn(field, x0, nfe, shift=2.0), fn(field, x0, nfe))
    counted = ba.CountingField(field)
    fn(counted, x0, nfe, shift=2.0)
    assert counted.calls == nfe
    with pytest.raises(ValueError, match="shift"):
        fn(field, x0, nfe, shift=0.0)


def test_ba_samplers_take_a_shift(field):
    x0, side = _x0(16), ba.oracle_sidenet(field, 8)
    for fn in (ba.ba_bi_anchor, ba.ba_single_anchor):
        assert torch.equal(fn(field, side, x0, 4, shift=1.0), fn(field, side, x0, 4))
        with pytest.raises(ValueError, match="shift"):
            fn(field, side, x0, 4, shift=-1.0)
    back = ba.CountingField(field, 16)
    ba.ba_bi_anchor(back, ba.zero_sidenet(), x0, 5, shift=2.0)
    assert back.evals_per_sample == 5


def test_variable_step_ab2_is_second_order_on_a_shifted_grid(field):
    x0 = _x0(200, seed=3)
    ref = ba.reference_solve(field, x0)
    e16, e32 = (ba.endpoint_error(ba.ab2(field, x0, n, shift=2.0), ref) for n in (16, 32))
    assert 1.7 <= math.log2(e16 / e32) <= 2.5


def test_guided_cost_doubles_everywhere_for_ba_but_only_inside_the_interval_for_baselines():
    """Issue 35: guided BA evaluates both branches at every anchor and probe."""
    from icml26.ba_solver import experiments as ex

    net, side = _cond_nets()
    case = {"x0": _x0(8), "y": torch.arange(8) % 3, "guidance": {"cfg_scale": 1.5, "null_class": 3}}
    c_ba = ex.arm_cost(ex.Arm("ba-bi", 7, "learned", guided=True), net, side, case, flop_ratio=0.1)
    assert c_ba["backbone"] == 2 * 7 and c_ba["side"] == 2 * (4 * 7 - 1)
    assert c_ba["total"] == pytest.approx(14 + 0.1 * 54)
    inside = sum(0.3 <= i / 7 < 1.0 for i in range(7))                        # 4 of the 7 start times
    for m in ("ab2", "euler"):
        assert ex.arm_cost(ex.Arm(m, 7, guided=True), net, None, case, 0.1)["total"] == 7 + inside
    assert ex.arm_cost(ex.Arm("ba-bi", 7, "learned"), net, side, case, 0.1)["backbone"] == 7
    assert ex.arm_cost(ex.Arm("ba-bi", 7, "zero"), net, side, case, 0.1)["total"] == 7   # untrained: free
    up = ex.steps_at_cost("ab2", c_ba["total"], net, case, guided=True, rounding="up")
    down = ex.steps_at_cost("ab2", c_ba["total"], net, case, guided=True, rounding="down")
    cost = {n: ex.arm_cost(ex.Arm("ab2", n, guided=True), net, None, case, 0.0)["total"] for n in (down, down + 1, up)}
    assert cost[down] <= c_ba["total"] < cost[down + 1] and cost[up] >= c_ba["total"] and up == down + 1
    with pytest.raises(ValueError, match="rounding"):
        ex.steps_at_cost("ab2", 5.0, net, case, rounding="nearest")


def test_arm_refuses_bad_sides():
    from icml26.ba_solver import experiments as ex

    with pytest.raises(ValueError, match="side"):
        ex.Arm("euler", 5, side="trained")
    with pytest.raises(ValueError, match="side"):
        ex.Arm("ba-bi", 5)


def test_seeded_sidenets_share_their_initialisation_per_seed():
    from icml26.ba_solver import experiments as ex

    build = lambda: ba.SideNetMLP(2, hidden=8, depth=1)              # noqa: E731
    (a, ga), (b, gb), (c, _) = (ex._seeded(s, None, build) for s in (3, 3, 4))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))
    assert torch.equal(torch.rand(3, generator=ga), torch.rand(3, generator=gb))


def test_solver_study_tunes_on_validation_and_pairs_test_seeds(field):
    from icml26.ba_solver import experiments as ex
    from icml26.core import Ledger

    orc = ba.oracle_sidenet(field, 8)
    seeds = [1, 2]
    sides = {s: orc for s in seeds}
    cases = {s: ex.make_case(field, s, 32, 2, 64, dtype=torch.float64) for s in seeds}
    val = ex.make_case(field, 7, 32, 2, 64, dtype=torch.float64)
    assert not torch.equal(cases[1]["x0"], cases[2]["x0"])
    arms = {"BA": ex.Arm("ba-bi", 4, "learned"), "AB2": ex.Arm("ab2", 4), "BA untrained": ex.Arm("ba-bi", 4, "zero")}
    st = ex.solver_study(arms, field, sides, cases, val, shifts=(0.7, 1.0, 1.4), flop_ratio=0.0, progress=False)
    for name, arm in arms.items():                                  # the validation argmin, test scores on its grid
        val_err = {s: ex.arm_error(ex.run_arm(arm, field, orc, val, s), val, arm) for s in (0.7, 1.0, 1.4)}
        assert st.chosen(name) == min(val_err, key=val_err.get)
        assert st.scores["error"][name][1] == pytest.approx(
            ex.arm_error(ex.run_arm(arm, field, orc, cases[2], st.chosen(name)), cases[2], arm))
    cmp = st.comparison(control="BA untrained")
    assert cmp.rows["BA untrained"].control and cmp.rows["BA"].cost == 4
    claim = Ledger("demo", "x", scale="smoke").compare("BA / AB2", cmp, "BA", "AB2", "<", 1.0, stat="ratio")
    assert claim.kind == "comparison" and claim.protocol["seeds"] == seeds
    with pytest.raises(ValueError, match="val_case"):
        ex.solver_study(arms, field, sides, cases, cases[1], shifts=(1.0,), flop_ratio=0.0, progress=False)
    with pytest.raises(ValueError, match="cases"):
        ex.solver_study(arms, field, {**sides, 3: orc}, cases, val, shifts=(1.0,), flop_ratio=0.0, progress=False)
