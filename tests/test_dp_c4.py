"""dp-c4: unit identities of the spec's Sec. 8 and the bad inputs of Sec. 9."""

import math

import icml26.dp_c4 as m
import numpy as np
import pytest
import torch
from icml26.dp_c4.accounting import ORDERS

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def small():
    train, test = m.heavy_tailed_logistic(300, 5, seed=1)
    return train, test, train.solve_exact()


# -- 1: RDP of the subsampled Gaussian -------------------------------------------------------------
@pytest.mark.parametrize("sigma", [0.7, 1.0, 3.0])
def test_rdp_full_batch_and_order_two(sigma):
    a = np.asarray(ORDERS, dtype=float)
    assert np.max(np.abs(m.rdp_subsampled_gaussian(1.0, sigma) - a / (2 * sigma ** 2))) < 1e-12
    for q in (0.01, 0.1, 0.5):
        r2 = m.rdp_subsampled_gaussian(q, sigma, orders=[2])[0]
        assert abs(r2 - math.log1p(q ** 2 * math.expm1(1 / sigma ** 2))) < 1e-12
    # q -> 1 from below joins the closed form
    near = m.rdp_subsampled_gaussian(1 - 1e-12, sigma, orders=[2, 3, 10])
    assert np.max(np.abs(near - np.array([2, 3, 10]) / (2 * sigma ** 2))) < 1e-6


# -- 2: internal RDP = Google's dp_accounting RdpAccountant ------------------------------------------
def test_rdp_matches_dp_accounting():
    pytest.importorskip("dp_accounting")
    for sig, m_steps, q in ((np.array([1.0]), 1000, 0.01), (np.array([1.0]), 1000, 0.1)):
        a = m.epsilon(sig, m_steps, q, 1e-5, "rdp")
        b = m.epsilon(sig, m_steps, q, 1e-5, "dp_accounting_rdp")
        assert abs(a - b) < 1e-8, (a, b)
    sg = m.allocate_sigmas(m.geometric_thresholds(1.0, 0.7, 10).numpy(), 100, 0.1, 2.0, 1e-5)
    a, b = m.epsilon(sg, 100, 0.1, 1e-5, "rdp"), m.epsilon(sg, 100, 0.1, 1e-5, "dp_accounting_rdp")
    assert abs(a - b) < 1e-8
    # the tight PLD epsilon is below the RDP bound
    assert m.epsilon(sg, 100, 0.1, 1e-5, "pld") < a


# -- 3: GDP ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.3, 1.0, 4.0, 8.0])
def test_gdp_round_trip_and_full_batch_allocation(eps):
    assert abs(m.gdp_eps(m.gdp_mu(eps, 1e-5), 1e-5) - eps) < 1e-9
    C = m.geometric_thresholds(0.5, 0.95, 200).numpy()
    for shape in ("sqrt", "uniform"):
        sg = m.allocate_sigmas(C, 1, 1.0, eps, 1e-5, shape=shape, backend="gdp")
        mu = m.gdp_mu(eps, 1e-5)
        assert abs(np.sum(sg ** -2.0) / mu ** 2 - 1) < 1e-9
    # GDP epsilon is at most the RDP bound (GDP is exact for the Gaussian mechanism)
    sg = m.allocate_sigmas(C, 1, 1.0, eps, 1e-5, backend="gdp")
    assert m.epsilon(sg, 1, 1.0, 1e-5, "gdp") <= m.epsilon(sg, 1, 1.0, 1e-5, "rdp") + 1e-9


# -- 4: calibration hits the target; epsilon decreasing in the scale -------------------------------
def test_calibration_hits_target():
    for eps in (1.0, 4.0):
        s = m.calibrate_sigma(1000, 0.1, eps, 1e-5)
        assert abs(m.epsilon(np.array([s]), 1000, 0.1, 1e-5) - eps) < 1e-6
        thr = m.geometric_thresholds(0.5, 0.5, 10).numpy()
        sg = m.allocate_sigmas(thr, 100, 0.1, eps, 1e-5)
        assert abs(m.epsilon(sg, 100, 0.1, 1e-5) - eps) < 1e-6
        assert np.allclose(sg * thr ** 0.5, sg[0] * thr[0] ** 0.5)           # sigma_k = s C_k^{-1/2}
    scales = np.geomspace(0.3, 30, 12)
    eps_s = [m.epsilon(np.array([s]), 100, 0.1, 1e-5) for s in scales]
    assert all(a >= b for a, b in zip(eps_s, eps_s[1:])) and eps_s[0] > eps_s[-1]


# -- 5: clip_rows -------------------------------------------------------------------------------------
def test_clip_rows():
    g = torch.Generator().manual_seed(0)
    G = torch.randn(500, 7, generator=g, dtype=torch.float64) * torch.rand(500, 1, generator=g,
                                                                               dtype=torch.float64) * 3
    G[:5] = 0.0
    out = m.clip_rows(G, 1.0)
    assert float(out.norm(dim=1).max()) <= 1.0 * (1 + 1e-12)
    keep = G.norm(dim=1) <= 1.0
    assert torch.equal(out[keep], G[keep])
    assert torch.equal(out[:5], torch.zeros(5, 7, dtype=torch.float64)) and bool(torch.isfinite(out).all())
    # per-run thresholds broadcast over (R, n, d)
    out3 = m.clip_rows(G.reshape(2, 250, 7), torch.tensor([[0.5], [2.0]], dtype=torch.float64))
    assert float(out3[0].norm(dim=-1).max()) <= 0.5 * (1 + 1e-12)
    assert float(out3[1].norm(dim=-1).max()) <= 2.0 * (1 + 1e-12)


# -- 6: sensitivity of one step --------------------------------------------------------------------
def test_sensitivity_equals_clipped_innovation():
    g = torch.Generator().manual_seed(3)
    n, d = 40, 6
    worst = 0.0
    for _ in range(100):
        G = torch.randn(1, n, d, generator=g, dtype=torch.float64) * 5
        h = torch.randn(1, n, d, generator=g, dtype=torch.float64) * 5        # arbitrary anchors
        H = torch.randn(1, d, generator=g, dtype=torch.float64)
        C = torch.rand(1, generator=g, dtype=torch.float64) + 0.1
        mask = (torch.rand(1, n, generator=g) < 0.5).to(torch.float64)
        i = int(torch.randint(n, (1,), generator=g))
        mask[0, i] = 1.0
        zeta = torch.randn(1, d, generator=g, dtype=torch.float64)
        _, _, _, S_with, Delta = m.dp_c4_step(G, h, H, mask, C, zeta, 0.5)
        keep = torch.arange(n) != i
        _, _, _, S_without, _ = m.dp_c4_step(G[:, keep], h[:, keep], H, mask[:, keep], C, zeta, 0.5)
        diff = S_with - S_without
        assert float((diff - Delta[0, i]).abs().max()) < 1e-12
        assert float(diff.norm()) <= float(C) * (1 + 1e-12)
        worst = max(worst, float(diff.norm() / C))
    assert worst > 0.99   # the bound is attained (large innovations are clipped to exactly C)


# -- 7: the 1-D toy ----------------------------------------------------------------------------------
def test_toy_fixed_points():
    p = m.toy_problem()
    xs = p.solve_exact()
    assert abs(float(xs[0]) - 1.0) < 1e-12
    gd = m.dp_sgd(p, 300, 0.5, torch.tensor([1.0, 0.5, 2.0, 3.0]), 0.0, x_star=xs)
    assert torch.allclose(gd.x[:, 0], torch.tensor([1 / 3, 0.5 / 3, 2 / 3, 1.0], dtype=torch.float64), atol=1e-8)
    sch = m.StagedSchedule(torch.tensor([[1.0], [0.1]]), torch.zeros(2, 1), 2000)
    c4 = m.dp_c4(p, sch, 0.5, noise=False, x_star=xs)
    assert float((c4.x[:, 0] - 1.0).abs().max()) < 1e-8


# -- 8: optimal vs uniform allocation ---------------------------------------------------------------
def test_allocation_ratio_is_cauchy_schwarz():
    C = m.geometric_thresholds(1.0, 0.97, 150).numpy()
    opt = m.allocate_sigmas(C, 1, 1.0, 2.0, 1e-5, "sqrt", "gdp")
    uni = m.allocate_sigmas(C, 1, 1.0, 2.0, 1e-5, "uniform", "gdp")
    ratio = np.sum(opt ** 2 * C ** 2) / np.sum(uni ** 2 * C ** 2)
    assert abs(ratio - C.sum() ** 2 / (len(C) * np.sum(C ** 2))) < 1e-12
    assert ratio < 1


# -- 9-10 (smoke-safe): noiseless DP-C4 reaches x*, clipped GD stalls -------------------------------
def test_noiseless_dp_c4_removes_bias(small):
    train, _, xs = small
    race = m.noiseless_race(train, xs, (0.1, 1.0, 10.0), 2000, 0.5, log_every=100)
    assert float(race["DP-C4"].dist[:, -1].max()) < 1e-8
    assert float(race["DP-C4"].clip_frac[:, -1].max()) == 0.0
    fp = m.clipped_fixed_points(train, xs, (0.5, 1.0, 2.0), T=1500)
    assert (fp["dist"] >= 0.01).all() and fp["dist"].is_monotonic_decreasing
    assert (fp["residual"] < 1e-8).all()                                     # it is a fixed point


def test_private_runs_are_seeded_and_finite(small):
    train, test, xs = small
    sg = m.allocate_sigmas(m.geometric_thresholds(0.5, 0.5, 4).numpy(), 10, 0.1, 1.0, 1e-5)
    sch = m.StagedSchedule(m.geometric_thresholds(0.5, 0.5, 4), torch.tensor(sg), 10)
    a = m.dp_c4(train, sch, 0.5, 0.1, torch.Generator().manual_seed(5), x_star=xs)
    b = m.dp_c4(train, sch, 0.5, 0.1, torch.Generator().manual_seed(5), x_star=xs)
    assert torch.equal(a.x, b.x) and bool(torch.isfinite(a.dist).all())
    # the logged noise std is sigma_k * C_k (multiplier times the current threshold)
    assert np.allclose(a.noise_std[0, ::1].numpy()[[0, -1]], [sg[0] * 0.5, sg[-1] * 0.5 * 0.5 ** 3])
    tab, _ = m.equal_privacy(train, xs, [1.0], 1e-5, 0.1, 20, 2, 0.5, [1.0], [0.5], [0.5], 2, log_every=5,
                             test=test)
    assert set(tab["method"]) == {"DP-SGD", "DP-C4"} and np.isfinite(tab["dist"]).all()


# -- Sec. 9: bad inputs ------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [dict(eps=0.0), dict(eps=-1.0), dict(delta=0.0), dict(delta=1.0),
                                    dict(q=0.0), dict(q=1.5), dict(eps=float("nan"))])
def test_bad_privacy_parameters(kwargs):
    args = dict(T=100, q=0.1, eps=1.0, delta=1e-5) | kwargs
    with pytest.raises(ValueError):
        m.calibrate_sigma(**args)


def test_bad_accounting_inputs():
    with pytest.raises(ValueError, match="backend='gdp'"):
        m.epsilon([1.0], 10, 0.1, 1e-5, backend="gdp")
    with pytest.raises(ValueError, match="backend"):
        m.epsilon([1.0], 10, 0.1, 1e-5, backend="prv")
    with pytest.raises(ValueError, match="orders"):
        m.rdp_subsampled_gaussian(0.1, 1.0, orders=[1.5, 3])
    with pytest.raises(ValueError, match="orders"):
        m.rdp_subsampled_gaussian(0.1, 1.0, orders=[1, 3])
    with pytest.raises(ValueError, match="sigma"):
        m.rdp_subsampled_gaussian(0.1, 0.0)
    with pytest.raises(ValueError, match="shape"):
        m.allocate_sigmas([1.0, 0.5], 10, 0.1, 1.0, 1e-5, shape="linear")
    with pytest.raises(ValueError, match="thresholds"):
        m.allocate_sigmas([1.0, -0.5], 10, 0.1, 1.0, 1e-5)
    with pytest.raises(ValueError, match="steps_per_stage"):
        m.epsilon([1.0], 0, 0.1, 1e-5)
    with pytest.raises(ValueError, match="unreachable"):
        m.calibrate_sigma(100000, 1.0, 1e-4, 1e-5)
    with pytest.raises(ValueError, match="T"):
        m.calibrate_sigma(0, 0.1, 1.0, 1e-5)


def test_bad_schedules_and_runs(small):
    train, _, xs = small
    with pytest.raises(ValueError, match="C0"):
        m.geometric_thresholds(0.0, 0.5, 3)
    with pytest.raises(ValueError, match="C0"):
        m.geometric_thresholds(float("inf"), 0.5, 3)
    for rho in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="rho"):
            m.geometric_thresholds(1.0, rho, 3)
    with pytest.raises(ValueError, match="K"):
        m.geometric_thresholds(1.0, 0.5, 0)
    with pytest.raises(ValueError, match="same shape"):
        m.StagedSchedule(torch.ones(3), torch.ones(2), 5)
    with pytest.raises(ValueError, match="thresholds"):
        m.StagedSchedule(torch.tensor([1.0, float("nan")]), torch.ones(2), 5)
    with pytest.raises(ValueError, match="sigmas"):
        m.StagedSchedule(torch.ones(2), -torch.ones(2), 5)
    with pytest.raises(ValueError, match="steps_per_stage"):
        m.StagedSchedule(torch.ones(2), torch.ones(2), 0)
    sch0 = m.StagedSchedule(torch.ones(2), torch.zeros(2), 5)
    with pytest.raises(ValueError, match="sigmas must be > 0"):
        m.dp_c4(train, sch0, 0.5, 1.0, torch.Generator(), noise=True)
    sch = m.StagedSchedule(torch.ones(2), torch.ones(2), 5)
    with pytest.raises(ValueError, match="lr"):
        m.dp_c4(train, sch, 0.0, 1.0, torch.Generator())
    with pytest.raises(ValueError, match="q"):
        m.dp_c4(train, sch, 0.5, 0.0, torch.Generator())
    with pytest.raises(ValueError, match="x0"):
        m.dp_c4(train, sch, 0.5, 1.0, torch.Generator(), x0=torch.zeros(3))
    with pytest.raises(ValueError, match="anchor table"):
        m.dp_c4(train, sch, 0.5, 1.0, torch.Generator(), max_anchor_bytes=1000)
    with pytest.raises(ValueError, match="C"):
        m.dp_sgd(train, 5, 0.5, 0.0, 1.0, 1.0, torch.Generator())
    with pytest.raises(ValueError, match="sigma"):
        m.dp_sgd(train, 5, 0.5, 1.0, -1.0, 1.0, torch.Generator())
    with pytest.raises(ValueError, match="T"):
        m.dp_sgd(train, 0, 0.5, 1.0, 1.0, 1.0, torch.Generator())
    with pytest.raises(ValueError, match="K must divide T"):
        m.equal_privacy(train, xs, [1.0], 1e-5, 0.1, 10, 3, 0.5, [1.0], [1.0], [0.5], 1)


def test_bad_problems():
    X = torch.randn(10, 3, dtype=torch.float64)
    y = torch.ones(10, dtype=torch.float64)
    with pytest.raises(ValueError, match="2-D"):
        m.FiniteSumProblem(X[0], y, 0.1)
    with pytest.raises(ValueError, match="length"):
        m.FiniteSumProblem(X, y[:5], 0.1)
    with pytest.raises(ValueError, match="labels"):
        m.FiniteSumProblem(X, 0.5 * y, 0.1)
    Xn = X.clone()
    Xn[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        m.FiniteSumProblem(Xn, y, 0.1)
    with pytest.raises(ValueError, match="kind"):
        m.FiniteSumProblem(X, y, 0.1, kind="hinge")
    with pytest.raises(ValueError, match="lam"):
        m.FiniteSumProblem(X, y, -0.1)
    with pytest.raises(ValueError, match="n"):
        m.heavy_tailed_logistic(n=0)


def test_breast_cancer_loads_offline():
    train, test = m.breast_cancer_logistic()
    assert train.n + test.n == 569 and train.dim == 31
    xs = train.solve_exact()
    assert float(test.accuracy(xs)) > 0.9


def test_presets_dry_run():
    for name, p in m.PRESETS.items():
        d = p.dry_run()
        assert isinstance(d, m.DPC4Preset) and d.n == p.n and d.d == p.d and d.T <= p.T and d.seeds <= p.seeds
        assert d.T % d.K == 0 and p.T % p.K == 0, name


@pytest.mark.cuda
def test_cuda_matches_cpu():
    """DP-C4 (noiseless, full batch) and clipped GD on cuda equal the CPU runs."""
    tr_cpu, _ = m.heavy_tailed_logistic(500, 8, seed=2)
    tr_gpu, _ = m.heavy_tailed_logistic(500, 8, seed=2, device="cuda")
    xs = tr_cpu.solve_exact()
    sch = m.StagedSchedule(torch.tensor([[0.1], [1.0]]), torch.zeros(2, 1), 300)
    a = m.dp_c4(tr_cpu, sch, 0.5, noise=False, x_star=xs, log_every=50)
    b = m.dp_c4(tr_gpu, sch, 0.5, noise=False, x_star=xs.cuda(), log_every=50)
    assert b.x.device.type == "cuda"
    assert float((a.x - b.x.cpu()).abs().max()) < 1e-10
    gen = torch.Generator(device="cuda").manual_seed(0)
    sig = m.StagedSchedule(torch.tensor([[0.5, 0.25]]), torch.tensor([[3.0, 4.0]]), 20)
    c = m.dp_c4(tr_gpu, sig, 0.5, 0.1, gen, x_star=xs.cuda())
    assert bool(torch.isfinite(c.dist).all())


# -- digits MLP (non-convex): torch.func per-example gradients -----------------------------------------
def test_mlp_per_sample_grads_match_autograd():
    train, test = m.digits_mlp(hidden=6, dtype=torch.float64)
    assert train.n + test.n == 1797 and train.dim == 6 * 65 + 10 * 7
    x = train.init(2, seed=1)
    G = train.per_sample_grads(x)                                       # (2, n, P) via vmap(grad)
    for r, i in ((0, 0), (1, 5), (1, 700)):
        w = x[r].clone().requires_grad_(True)
        sub = m.MLPProblem(train.X[i:i + 1], train.y[i:i + 1], train.lam, hidden=6)
        sub.loss(w).backward()
        assert float((G[r, i] - w.grad).abs().max()) < 1e-12
    idx = torch.tensor([[3, 9, 11], [0, 1, 2]])
    Gi = train.per_sample_grads(x, idx)
    assert torch.allclose(Gi, torch.stack([G[0, idx[0]], G[1, idx[1]]]), atol=1e-13)
    assert bool(((test.accuracy(x) >= 0) & (test.accuracy(x) <= 1)).all())


def test_mlp_bad_inputs():
    X = torch.randn(5, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="class labels"):
        m.MLPProblem(X, torch.tensor([0.0, 1, 2, 10, 1]), 1e-4, hidden=3)
    with pytest.raises(ValueError, match="class indices"):
        m.MLPProblem(X, torch.tensor([0.5, 1, 2, 1, 1]), 1e-4, hidden=3)
    p = m.MLPProblem(X, torch.tensor([0.0, 1, 2, 3, 1]), 1e-4, hidden=3)
    with pytest.raises(ValueError, match="non-convex"):
        p.solve_exact()
    with pytest.raises(ValueError, match="idx"):
        p.per_sample_grads(p.init(2), torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="test_fraction"):
        m.digits_mlp(test_fraction=1.5)


# -- the Poisson-batch path (gathered rows) equals the dense step -------------------------------------
def test_gathered_batches_equal_dense_reference(small):
    from icml26.dp_c4.method import _mask, _noise

    train, _, xs = small
    idx = torch.tensor([[1, 4, 7], [0, 2, 299]])
    G = train.per_sample_grads(torch.ones(2, train.dim, dtype=torch.float64) * 0.1)
    assert torch.allclose(train.per_sample_grads(torch.ones(2, train.dim, dtype=torch.float64) * 0.1, idx),
                          torch.stack([G[0, idx[0]], G[1, idx[1]]]), atol=1e-15)
    R, K, mm, q, lr = 3, 3, 7, 0.3, 0.5
    thr = m.geometric_thresholds(0.5, 0.7, K).repeat(R, 1)
    sg = torch.full((R, K), 2.0)
    tr = m.dp_c4(train, m.StagedSchedule(thr, sg, mm), lr, q, torch.Generator().manual_seed(4), x_star=xs)
    # dense reference: all n gradients and anchors, the same draws in the same order
    gen = torch.Generator().manual_seed(4)
    x = torch.zeros(R, train.dim, dtype=torch.float64)
    h, H = torch.zeros(R, train.n, train.dim, dtype=torch.float64), torch.zeros(R, train.dim, dtype=torch.float64)
    for t in range(K * mm):
        C = thr[:, t // mm]
        mask = _mask(R, train.n, q, gen, x)
        zeta = _noise(R, train.dim, gen, x) * (sg[:, t // mm] * C)[:, None]
        g, h, H, _, _ = m.dp_c4_step(train.per_sample_grads(x), h, H, mask, C, zeta, q)
        x = x - lr * g
    assert float((tr.x - x).abs().max()) < 1e-12
    sgd = m.dp_sgd(train, 20, lr, torch.tensor([0.5, 1.0]), 2.0, q, torch.Generator().manual_seed(2))
    gen, x = torch.Generator().manual_seed(2), torch.zeros(2, train.dim, dtype=torch.float64)
    Cs = torch.tensor([0.5, 1.0], dtype=torch.float64)
    for _ in range(20):
        mask = _mask(2, train.n, q, gen, x)
        zeta = _noise(2, train.dim, gen, x) * (2.0 * Cs)[:, None]
        x = x - lr * ((m.clip_rows(train.per_sample_grads(x), Cs[:, None]) * mask[..., None]).sum(1) + zeta) / (q * train.n)
    assert float((sgd.x - x).abs().max()) < 1e-12


def test_in_place_fast_step_and_gradient_buffers_are_bit_identical(small):
    """The fast loops reuse one gradient buffer (``per_sample_grads(out=)``) and clip in place: the same
    values bit for bit as a fresh tensor and ``_clip_rows_fast(G - h) * mask``."""
    import functools

    from icml26.dp_c4.method import _clip_rows_fast, _dp_c4_step, _dp_c4_step_inplace, _Guard

    train, _, _ = small
    mlp, _ = m.digits_mlp(hidden=5)
    for prob, x in ((train, torch.randn(3, train.dim, dtype=torch.float64)), (mlp, mlp.init(3, seed=2))):
        idx = torch.stack([torch.randperm(prob.n, generator=torch.Generator().manual_seed(r))[:9] for r in range(3)])
        for ix in (idx, None):
            G = prob.per_sample_grads(x, ix)
            buf = torch.full_like(G, float("nan"))
            assert prob.per_sample_grads(x, ix, out=buf) is buf and torch.equal(buf, G)
        with pytest.raises(ValueError, match="out must be"):
            prob.per_sample_grads(x, idx, out=torch.empty(3, 8, prob.dim, dtype=x.dtype))
        with pytest.raises(ValueError, match="out needs runs"):
            prob.per_sample_grads(x[0], out=torch.empty(prob.n, prob.dim, dtype=x.dtype))
        G = prob.per_sample_grads(x, idx)
        h = 0.3 * torch.randn(G.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(G)
        mask = (torch.arange(9) < 6).to(G).expand(3, 9).clone()
        C, H, z = torch.tensor([0.05, 0.5, 5.0]).to(G), torch.randn(3, prob.dim).to(G), torch.randn(3, prob.dim).to(G)
        guard = _Guard(G.device)
        g, h1, H1, _, Delta = _dp_c4_step(G, h, H, mask, C, z, 0.1, prob.n, functools.partial(_clip_rows_fast, guard=guard))
        G2, h2 = G.clone(), h.clone()
        g2, H2, dsum = _dp_c4_step_inplace(G2, h2, H, mask, C, z, 0.1, prob.n, guard)
        assert torch.equal(g, g2) and torch.equal(H1, H2) and torch.equal(G2, Delta) and torch.equal(h2, h1)
        assert torch.equal(dsum, Delta.sum(1)) and guard.held()


def test_drop_tilt_removes_the_accumulated_noise(small):
    train, _, xs = small
    sch = m.StagedSchedule(m.geometric_thresholds(0.5, 0.9, 20), torch.full((20,), 3.0), 1)
    a = m.dp_c4(train, sch, 1.0, 1.0, torch.Generator().manual_seed(1), x_star=xs)
    b = m.dp_c4(train, sch, 1.0, 1.0, torch.Generator().manual_seed(1), x_star=xs, drop_tilt=True)
    assert float(a.tilt.norm()) > 1e-3 and float(b.tilt.norm()) < 1e-12


# -- runners: fresh-seed evaluation, bootstrap, log-log slope ---------------------------------------------
def test_evaluate_and_statistics(small):
    train, test, xs = small
    import pandas as pd
    conf = pd.DataFrame([dict(method="DP-SGD", eps=1.0, C0=1.0, rho=1.0, shape="-"),
                         dict(method="DP-C4", eps=1.0, C0=0.5, rho=0.5, shape="sqrt"),
                         dict(method="DP-C4", eps=1.0, C0=0.5, rho=0.5, shape="uniform")])
    runs, cur = m.evaluate(train, xs, conf, 1e-5, 0.1, 20, 2, 0.5, 3, seed=0, log_every=5, test=test)
    assert len(runs) == 9 and set(cur) == {0, 1, 2} and cur[0].shape[0] == 3
    assert np.isfinite(runs["dist"]).all() and runs["acc"].between(0, 1).all()
    r, lo, hi = m.bootstrap_ratio([1.0, 2.0, 3.0], [4.0, 4.0, 4.0])
    assert r == pytest.approx(0.5) and lo <= r <= hi
    with pytest.raises(ValueError):
        m.bootstrap_ratio([], [1.0])
    ns = np.array([100, 200, 400, 800])
    df = pd.DataFrame([dict(n=n, seed=s, dist=(1 + 0.01 * s) / n) for n in ns for s in range(5)])
    s, lo, hi = m.loglog_slope(df)
    assert s == pytest.approx(-1.0, abs=1e-9) and lo <= s + 1e-9 and hi >= s - 1e-9
    tv = m.tilt_vs_n((200, 400), 3, 0.1, 1.0, 1e-5, 10, 1.0, 1.0, 0.25, 0.9, 2)
    assert len(tv) == 8 and np.isfinite(tv["dist"]).all()


def test_opacus_accountants_agree():
    pytest.importorskip("opacus")
    sg = m.allocate_sigmas(m.geometric_thresholds(1.0, 0.7, 5).numpy(), 50, 0.1, 2.0, 1e-5)
    a, b = m.epsilon(sg, 50, 0.1, 1e-5, "rdp"), m.epsilon(sg, 50, 0.1, 1e-5, "opacus_rdp")
    assert abs(a - b) < 1e-8
    prv, pld = m.epsilon(sg, 50, 0.1, 1e-5, "opacus_prv"), m.epsilon(sg, 50, 0.1, 1e-5, "pld")
    assert abs(prv - pld) < 0.02 and pld < a


# -- the comparison protocol (issue 37): shared streams, tail averaging, per-run lr, no-anchor control ---
def test_shared_streams_pair_configurations_and_methods(small, monkeypatch):
    from icml26.dp_c4 import baselines

    train, _, xs = small
    S, q, T = 3, 0.2, 12
    C = torch.tensor([0.7] * (2 * S), dtype=torch.float64)
    draws = []                                                      # every batch mask and noise the run draws
    for name in ("_mask", "_noise"):
        fn = getattr(baselines, name)
        monkeypatch.setattr(baselines, name, lambda *a, fn=fn, **k: draws.append(fn(*a, **k)) or draws[-1])
    a = m.dp_sgd(train, T, 0.5, C, 2.0, q, torch.Generator().manual_seed(5), streams=S)
    assert len(draws) == 2 * T
    for z in draws:                                                 # same seed, same batches and noise, bit for bit
        assert torch.equal(z[:S], z[S:])                            # (the iterates then agree to the BLAS's
    assert any(not torch.equal(z[0], z[1]) for z in draws[::2])     # rounding, which may differ per row)
    assert float((a.x[0] - a.x[1]).abs().max()) > 1e-6              # different seeds differ
    # DP-C4 with its anchors held at zero on a one-stage schedule is DP-SGD, draw for draw
    sch = m.StagedSchedule(torch.full((S, 1), 0.7, dtype=torch.float64), torch.full((S, 1), 2.0), T)
    b = m.dp_c4(train, sch, 0.5, q, torch.Generator().manual_seed(5), anchors=False, streams=S)
    assert float((b.x - a.x[:S]).abs().max()) < 1e-12 and float(b.tilt.abs().max()) == 0.0
    c = m.dp_c4(train, sch, 0.5, q, torch.Generator().manual_seed(5), streams=S)
    assert float((c.x - b.x).abs().max()) > 1e-6                   # the anchors change the run
    from icml26.dp_c4.method import _batch_idx, _mask

    mask = _mask(4 * S, train.n, q, torch.Generator().manual_seed(1), a.x, S)   # rows repeat with period S
    for u, v in zip(_batch_idx(mask, S), _batch_idx(mask)):
        assert torch.equal(u, v)


def test_fixed_padded_batches_fall_back_to_the_exact_path(small, monkeypatch):
    """Issue 43: a Poisson batch padded to a fixed size; a run where one outgrew it is repeated exactly."""
    from icml26.dp_c4 import baselines, method
    from scipy.stats import binom

    train, _, xs = small
    n, q = train.n, 0.1
    cap = method._batch_cap(n, q, 1000)
    assert binom.sf(cap, n, q) <= 1e-6 < binom.sf(cap - 1, n, q)          # the quantile it promises
    sch = m.StagedSchedule(m.geometric_thresholds(0.5, 0.8, 3).repeat(4, 1), torch.full((4, 3), 2.0), 10)
    C = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    fast = (m.dp_c4(train, sch, 0.5, q, torch.Generator().manual_seed(6), x_star=xs, streams=2),
            m.dp_sgd(train, 30, 0.5, C, 2.0, q, torch.Generator().manual_seed(6), streams=2))
    calls = []
    for mod, name in ((method, "_dp_c4_run"), (baselines, "_dp_sgd_run")):
        run = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, fast, run=run: calls.append(fast) or run(*a, fast=fast))
        monkeypatch.setattr(mod, "_batch_cap", lambda n, q, draws: 3)     # every batch outgrows it
    exact = (m.dp_c4(train, sch, 0.5, q, torch.Generator().manual_seed(6), x_star=xs, streams=2),
             m.dp_sgd(train, 30, 0.5, C, 2.0, q, torch.Generator().manual_seed(6), streams=2))
    assert calls == [True, False, True, False]                              # the fast run, then the exact one
    for a, b in zip(fast, exact):
        assert float((a.x - b.x).abs().max()) < 1e-13 and float((a.loss - b.loss).abs().max()) < 1e-13


def test_tail_average_and_per_run_step_sizes(small):
    train, _, xs = small
    runs = [m.dp_sgd(train, T, 0.5, 1.0, 1.5, 0.3, torch.Generator().manual_seed(3), tail=2) for T in (4, 5)]
    x4 = m.dp_sgd(train, 4, 0.5, 1.0, 1.5, 0.3, torch.Generator().manual_seed(3)).x
    assert float((runs[1].x_avg - (x4 + runs[1].x) / 2).abs().max()) < 1e-12
    one = m.dp_sgd(train, 5, 0.5, 1.0, 1.5, 0.3, torch.Generator().manual_seed(3), tail=1)
    assert float((one.x_avg - one.x).abs().max()) == 0.0 and runs[0].x_avg is not None
    both = m.dp_sgd(train, 6, torch.tensor([0.5, 0.25]), torch.ones(2, dtype=torch.float64), 0.0, 1.0)
    for j, lr in enumerate((0.5, 0.25)):
        assert float((both.x[j] - m.dp_sgd(train, 6, lr, 1.0, 0.0, 1.0).x[0]).abs().max()) < 1e-14


def test_protocol_runners(small):
    from icml26.core import Grid

    train, _, xs = small
    kw = dict(q=0.2, T=8, K=2, delta=1e-5, seeds=2, seed=1)
    tuned = m.validated(train, xs, "sgd", Grid(lr=[0.25, 0.5], C=[0.5, 1.0]), [1.0, 4.0],
                        metric=("dist", "dist_avg"), tail=4, **kw)
    assert set(tuned) == {"dist", "dist_avg"} and set(tuned["dist"]) == {1.0, 4.0}
    assert tuned["dist"][1.0].n_configs == 4
    t4 = m.validated(train, xs, "c4", Grid(lr=[0.5], C0=[0.5, 1.0], rho=[0.5]), [1.0], **kw)
    methods = {"DP-SGD": dict(kind="sgd", tuned=tuned["dist_avg"], metric="dist_avg"),
               "DP-C4": dict(kind="c4", tuned={1.0: t4[1.0], 4.0: t4[1.0]}),
               "no anchors": dict(kind="c4-no-anchors", tuned={1.0: t4[1.0], 4.0: t4[1.0]}, untuned="DP-C4's")}
    cmps, runs = m.paired_comparisons(train, xs, methods, [1.0, 4.0], tail=4, **kw)
    cmp = cmps[1.0]
    assert list(cmp.rows) == ["DP-SGD", "DP-C4", "no anchors", "zero model (no step)"]
    assert cmp.rows["zero model (no step)"].control and cmp.rows["zero model (no step)"].cost == 0
    assert np.allclose(cmp.rows["zero model (no step)"].per_seed, float(xs.norm()))
    assert runs[1.0]["DP-C4"]["dist"].shape == (2,) and runs[1.0]["DP-C4"]["curves"].shape[0] == 2
    with pytest.raises(ValueError, match="kind"):
        m.run_configs(train, xs, "adam", [dict(eps=1.0, lr=0.5, C=1.0)], 0.2, 8, 2, 1e-5, 2, 0)
    with pytest.raises(ValueError, match="configs"):
        m.run_configs(train, xs, "c4", [dict(eps=1.0, lr=0.5, C=1.0)], 0.2, 8, 2, 1e-5, 2, 0)
    with pytest.raises(ValueError, match="tail"):
        m.validated(train, xs, "sgd", Grid(lr=[0.5], C=[1.0]), [1.0], metric="dist_avg", **kw)
    with pytest.raises(ValueError, match="metric"):
        m.validated(train, xs, "sgd", Grid(lr=[0.5], C=[1.0]), [1.0], metric="loss", **kw)


def test_bad_protocol_arguments(small):
    train, _, xs = small
    with pytest.raises(ValueError, match="streams"):
        m.dp_sgd(train, 4, 0.5, torch.ones(3), 1.0, 0.5, torch.Generator(), streams=2)
    with pytest.raises(ValueError, match="tail"):
        m.dp_sgd(train, 4, 0.5, 1.0, 1.0, 0.5, torch.Generator(), tail=5)
    with pytest.raises(ValueError, match="lr"):
        m.dp_sgd(train, 4, torch.tensor([0.5, 0.1, 0.2]), torch.ones(2), 1.0, 0.5, torch.Generator())
    with pytest.raises(ValueError, match="lr"):
        m.dp_sgd(train, 4, [0.5, -0.1], torch.ones(2), 1.0, 0.5, torch.Generator())
    sch = m.StagedSchedule(torch.ones(2), torch.ones(2), 2)
    with pytest.raises(TypeError, match="anchors"):
        m.dp_c4(train, sch, 0.5, 1.0, torch.Generator(), anchors="no")


def test_replace_one_needs_more_than_add_remove():
    pytest.importorskip("dp_accounting")
    s = m.calibrate_sigma(100, 0.1, 1.0, 1e-5)
    r = m.replace_one_eps(s, 100, 0.1, 1e-5)
    assert r["add_remove"] < r["replace_one"] <= r["doubled"]
    with pytest.raises(ValueError, match="sigma"):
        m.replace_one_eps(-1.0, 100, 0.1, 1e-5)


@pytest.mark.parametrize("scale", ["smoke", "book", "gpu"])
def test_equal_grid_sizes(scale):
    """Every method of a comparison gets the same number of configurations (issue 37)."""
    p = m.PRESETS[scale]
    n_sgd = len(p.lr_grid_sgd) * len(p.C_grid_sgd)
    assert n_sgd == len(p.lr_grid_c4) * len(p.C0_grid) * len(p.rho_grid) == len(p.lr_grid) * len(p.C0_grid_const)
    assert len(p.lr_grid_gd) * len(p.C_grid_gd) == len(p.lr_grid_full) * len(p.C0_grid_c4f) * len(p.rho_grid_c4f)
    if scale != "smoke":        # the referee's finding (issue 37): 2 validation seeds chose DP-SGD by noise
        assert p.val_seeds >= 8 and p.eval_seeds_full >= 30 and p.eval_seeds >= 10


def test_probe_edges_states_an_edge_only_when_the_step_beyond_is_no_better(small):
    """A chosen value at a grid edge is probed one geometric step beyond it on the validation seeds; the
    edge is stated (with both scores in the reason) only when the probe is not better by more than tol."""
    from icml26.core import Grid
    from icml26.dp_c4.experiments import _beyond

    assert _beyond("lr", (0.25, 0.5), "lower") == 0.125 and _beyond("C", (0.5, 1.0), "upper") == 2.0
    assert abs(_beyond("rho", (0.9, 0.95), "upper") - 0.975) < 1e-12 and _beyond("rho", (0.5, 1.0), "upper") is None
    train, _, xs = small
    kw = dict(q=1.0, T=30, K=30, delta=1e-5, seeds=2, seed=3, backend="gdp")
    # step sizes far too small: the best is the largest, and one step beyond (1.6e-2) is clearly better
    t = m.validated(train, xs, "sgd", Grid(lr=[1e-3, 4e-3], C=[1.0]), [1.0], **kw)
    assert t[1.0].edges == {"lr": "upper"}
    f = m.probe_edges(train, xs, "sgd", t, **kw)
    assert len(f) == 1 and not f["stated"].iloc[0] and f["probe"].iloc[0] == 1.6e-2
    assert f["probe_validation"].iloc[0] < f["validation"].iloc[0] and t[1.0].unstated_edges == {"lr": "upper"}
    # a tolerance that forgives any improvement states it, with the measured scores in the reason
    f = m.probe_edges(train, xs, "sgd", t, tol=0.99, **kw)
    assert f["stated"].iloc[0] and "scores" in t[1.0].stated["lr"] and not t[1.0].unstated_edges
    with pytest.raises(ValueError, match="tol"):
        m.probe_edges(train, xs, "sgd", t, tol=1.5, **kw)
