"""Tests of icml26.special: the identities of spec section 8 and the bad inputs of section 9."""

from __future__ import annotations

import math

import icml26.special as m
import numpy as np
import pandas as pd
import pytest
import torch
from icml26.special.experiments import base_config, equivalence_checks
from icml26.special.presets import PRESETS, preset

# Tiny tensors: one intra-op thread is fastest (fixture in conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def domains():
    return m.make_digit_domains(angles=(0, 50, 100))


@pytest.fixture(scope="module")
def tiny(domains):
    """Three domains, few rounds: the smoke preset's sizes."""
    return preset("smoke")


# ---------------------------------------------------------------- server step and identities
def test_server_proximal_step_is_the_minimiser():
    from scipy.optimize import minimize

    g = torch.Generator().manual_seed(0)
    w_bar, a = torch.randn(7, generator=g, dtype=torch.float64), torch.randn(7, generator=g, dtype=torch.float64)
    for lam in (0.0, 0.3, 2.0):
        def obj(w, lam=lam):
            return 0.5 * np.sum((w - w_bar.numpy()) ** 2) + 0.5 * lam * np.sum((w - a.numpy()) ** 2)
        num = minimize(obj, np.zeros(7), method="BFGS", options={"gtol": 1e-10}).x
        closed = m.server_proximal_step(w_bar, a, lam).numpy()
        assert np.allclose(closed, num, atol=1e-6)


def test_round_anchor_is_server_learning_rate():
    g = torch.Generator().manual_seed(1)
    w, w_bar = torch.randn(50, generator=g), torch.randn(50, generator=g)
    for lam in (0.5, 1.0, 3.0):
        assert torch.allclose(m.server_proximal_step(w_bar, w, lam), w + (w_bar - w) / (1 + lam), atol=1e-6)
    assert torch.equal(m.server_proximal_step(w_bar, w, 0.0), w_bar)


def test_full_run_identities(domains, tiny):
    """Issue 27 point 6 / issue 28 blocker 6: the server-lr identity in float64, over several seeds."""
    out = equivalence_checks(domains, tiny, lam=1.0, seeds=[0, 1, 2, 5])
    assert len(out["slr_diff_per_seed"]) == 4
    assert out["slr_max_diff"] <= 1e-12  # SPECIAL(lam, round) == FedAvg-slr(1/(1+lam)), float64
    assert out["slr_max_diff_f32"] <= 1e-4  # float32: rounding only, amplified by training
    assert out["special_vs_fedavg_max_diff"] > 1e-3  # ... and not plain FedAvg
    assert out["lam0_bitwise"] and out["fedprox0_bitwise"] and out["special_c0_bitwise"]


def test_seed_batched_runs_equal_single_runs(domains, tiny):
    from icml26.special.method import run_fdil_seeds

    for method in ("special", "replay"):
        cfg = base_config(tiny, "cpu", method=method, anchor="task", lam=0.1, replay_per_class=2)
        batch = run_fdil_seeds(domains, cfg, [0, 3], progress=False)
        for s, r in zip([0, 3], batch):
            single = m.run_fdil(domains, cfg.replace(seed=s), progress=False)
            assert np.array_equal(single.acc_matrix, r.acc_matrix)
            assert torch.allclose(single.final_params, r.final_params, atol=1e-6)
            assert r.config.seed == s


def test_batched_trainer_equals_per_client_loop():
    g = torch.Generator().manual_seed(3)
    N, n_max, d, H = 4, 23, 64, 16
    sizes = [23, 5, 17, 9]
    X = torch.rand(N, n_max, d, generator=g)
    y = torch.randint(0, 10, (N, n_max), generator=g)
    valid = torch.zeros(N, n_max, dtype=torch.bool)
    for i, s in enumerate(sizes):
        valid[i, :s] = True
    w0 = m.init_mlp(H, g)
    center = w0 + 0.01 * torch.randn(w0.shape, generator=g)
    for mu in (0.0, 0.3):
        W = m.local_train_batched(w0.expand(N, -1), X, y, valid, epochs=2, lr=0.1, batch_size=4, hidden=H,
                                  prox_mu=mu, prox_center=center, generator=torch.Generator().manual_seed(9))
        g_loop = torch.Generator().manual_seed(9)
        for i, s in enumerate(sizes):
            wi = m.local_train_loop(w0, X[i, :s], y[i, :s], epochs=2, lr=0.1, batch_size=4, hidden=H,
                                    prox_mu=mu, prox_center=center, generator=g_loop)
            assert torch.allclose(W[i], wi, atol=1e-5), (mu, i)
        assert not torch.allclose(W[0], w0)



def test_engine_round_is_local_train_batched_then_server_step(domains, tiny):
    """run_fdil_many's round (the batch schedule drawn on the host, one copy to the device, the SGD with no
    host read: issue 43) is local_train_batched then the server step, bit for bit, with one lr and mu per
    client row (two runs of different methods stacked)."""
    from icml26.special.baselines import client_shards, fedavg_server_step
    from icml26.special.method import _pad_clients, run_fdil_many

    cfgs = [base_config(tiny, "cpu", rounds_per_task=1, method="fedavg", seed=0),
            base_config(tiny, "cpu", rounds_per_task=1, method="fedprox", mu=0.3, lr=0.05, seed=1)]
    res = run_fdil_many(domains[:1], cfgs, progress=False)
    for r, c in zip(res, cfgs):
        g = torch.Generator().manual_seed(c.seed)
        w = m.init_mlp(c.hidden, g)
        part = m.dirichlet_partition(domains[0].y_train, c.n_clients, c.alpha, np.random.default_rng([c.seed, 0]))
        Xs, ys = client_shards(domains[:1], [part], 0, c)
        X, y, valid, _, _ = _pad_clients([Xs], [ys], torch.device("cpu"))
        sel = torch.randperm(c.n_clients, generator=g)[:c.clients_per_round]
        N = len(sel)
        mu = c.mu if c.method == "fedprox" else 0.0
        W = m.local_train_batched(w.expand(N, -1), X[0, sel], y[0, sel], valid[0, sel], c.local_epochs,
                                  torch.full((N,), c.lr, dtype=torch.float64), c.batch_size, c.hidden,
                                  prox_mu=torch.full((N,), mu, dtype=torch.float64), prox_center=w, generator=g)
        assert torch.equal(r.final_params, fedavg_server_step(w, W, 1.0))
        assert r.drift[0] == float(torch.linalg.vector_norm(r.final_params - w))

def test_mlp_forward_shapes():
    g = torch.Generator().manual_seed(0)
    w = m.init_mlp(64, g)
    assert w.shape == (m.n_params(64),) == (4810,)
    X = torch.rand(5, 64, generator=g)
    assert m.mlp_forward(w, X, 64).shape == (5, 10)
    W = torch.stack([w, 2 * w])
    out = m.mlp_forward(W, X, 64)
    assert out.shape == (2, 5, 10) and torch.allclose(out[0], m.mlp_forward(w, X, 64))
    assert m.mlp_forward(w, torch.rand(3, 5, 64, generator=g), 64).shape == (3, 5, 10)


# ---------------------------------------------------------------- metrics
A_EX = np.array([[0.9, 0.2, 0.1],
                 [0.6, 0.8, 0.3],
                 [0.5, 0.7, 0.9]])


def test_metrics_worked_example():
    assert math.isclose(m.average_accuracy(A_EX), 0.7)
    assert math.isclose(m.forgetting(A_EX), ((0.9 - 0.5) + (0.8 - 0.7)) / 2)
    assert math.isclose(m.backward_transfer(A_EX), ((0.5 - 0.9) + (0.7 - 0.8)) / 2)
    assert math.isclose(m.plasticity(A_EX), (0.9 + 0.8 + 0.9) / 3)
    # the max in FGT stops before the final row (off-by-one pitfall)
    A = np.array([[0.5, 0.0], [0.0, 1.0]])
    A[1, 0] = 0.9
    assert math.isclose(m.forgetting(A), 0.5 - 0.9)
    assert m.forgetting(np.array([[0.7]])) == 0.0


def test_fgt_bounds_bwt():
    rng = np.random.default_rng(0)
    for _ in range(20):
        A = rng.uniform(size=(4, 4))
        assert m.forgetting(A) >= -m.backward_transfer(A) - 1e-12


def test_run_outputs(domains, tiny):
    res = m.run_fdil(domains, base_config(tiny, "cpu", method="fedavg"), progress=False)
    K, T = len(domains), tiny.rounds_per_task
    assert res.acc_matrix.shape == (K, K) and res.round_acc.shape == (K * T, K)
    assert np.all((res.acc_matrix >= 0) & (res.acc_matrix <= 1))
    assert m.forgetting(res.acc_matrix) >= -m.backward_transfer(res.acc_matrix) - 1e-12
    assert np.all(res.drift > 0) and res.task_params.shape == (K + 1, m.n_params(64))
    assert res.acc_matrix[0, 0] > 0.5  # FedAvg learns the current task
    # reproducible
    res2 = m.run_fdil(domains, base_config(tiny, "cpu", method="fedavg"), progress=False)
    assert np.array_equal(res.acc_matrix, res2.acc_matrix)


def test_replay_and_joint_shards(domains):
    cfg = m.FDILConfig(n_clients=5, method="replay", replay_per_class=2)
    parts = [m.dirichlet_partition(d.y_train, 5, 0.5, np.random.default_rng(k)) for k, d in enumerate(domains)]
    Xs, ys = m.client_shards(domains, parts, 2, cfg)
    for i in range(5):
        extra = sum(min(2, np.sum(domains[j].y_train[parts[j][i]] == c)) for j in range(2) for c in range(10))
        assert len(ys[i]) == len(parts[2][i]) + extra
    Xs, ys = m.client_shards(domains, parts, 0, cfg.replace(method="joint"))
    assert sum(len(y) for y in ys) == sum(len(d.y_train) for d in domains)


# ---------------------------------------------------------------- data
def test_dirichlet_partition_is_a_partition():
    y = np.repeat(np.arange(10), 30)
    for alpha in (0.1, 0.5, 10.0):
        parts = m.dirichlet_partition(y, 12, alpha, np.random.default_rng(0), min_size=3)
        allidx = np.concatenate(parts)
        assert len(parts) == 12 and min(len(p) for p in parts) >= 3
        assert len(allidx) == len(y) and np.array_equal(np.sort(allidx), np.arange(len(y)))


def test_domains(domains):
    assert len(domains) == 3 and domains[0].X_train.shape[1] == 64
    assert np.array_equal(domains[0].y_train, domains[1].y_train)
    assert not np.allclose(domains[0].X_train, domains[2].X_train)
    for d in domains:
        assert d.X_train.min() >= 0 and d.X_train.max() <= 1
    mixed = m.make_digit_domains("mixed")
    assert [d.name for d in mixed] == ["identity", "rot90", "invert", "permute", "transpose-flip"]
    flat = [d.X_test for d in mixed]
    assert all(not np.allclose(flat[a], flat[b]) for a in range(5) for b in range(a + 1, 5))


# ---------------------------------------------------------------- theory
def test_bkt_bound_holds_and_shrinks():
    tasks = m.make_quadratic_tasks(seed=0)
    incs, bounds = [], []
    for lam in (0.0, 1.0, 9.0):
        out = m.run_quadratic_fdil(tasks, lam, rounds=20, noise=0.3)
        for r in out["records"]:
            assert r["increase"] <= r["bound_tight"] + 1e-10 <= r["bound"] + 2e-10
        first = out["records"][0]
        incs.append(first["increase"])
        bounds.append(first["bound"])
    assert incs[0] > incs[-1] and bounds[0] > bounds[-1]
    X, _ = tasks[0]
    assert math.isclose(m.quad_smoothness(X), np.linalg.norm(X, 2) ** 2 / len(X), rel_tol=1e-9)


def test_convergence_experiment_shape():
    df = m.convergence_experiment([10, 40], [2, 8], [1], seeds=2, progress=False)
    assert len(df) == 4 and np.all(df["G"] > 0)
    assert set(m.fit_slopes(df)) == {(2, 1), (8, 1)}
    for kw, word in (({"start": "middle"}, "start"), ({"burn_in": -1}, "burn_in"), ({"gamma_nc": -1.0}, "gamma_nc")):
        with pytest.raises(ValueError, match=word):
            m.convergence_experiment([10], [2], [1], seeds=2, progress=False, **kw)


def test_presets():
    assert set(PRESETS) == {"smoke", "book", "gpu"}
    assert preset("book").n_clients == 20 and preset("smoke").seeds == 1
    assert preset("book").seeds >= 10  # spreads over seeds need >= 10 (house style)


@pytest.mark.parametrize("scale", ["smoke", "book", "gpu"])
def test_preset_dry_run_cuts_loops_keeps_sizes(scale):
    p = PRESETS[scale]
    d = p.dry_run()
    for keep in ("n_clients", "clients_per_round", "hidden", "batch_size", "angles", "n_mixed", "alpha"):
        assert getattr(d, keep) == getattr(p, keep), keep
    assert d.rounds_per_task <= p.rounds_per_task and d.seeds <= p.seeds and max(d.rate_T) <= max(p.rate_T)


@pytest.mark.parametrize("scale", ["smoke", "book", "gpu"])
def test_partitions_succeed_at_every_preset(scale):
    """Issue 28 blocker 5: every partition a notebook draws (the preset's alpha, and the alphas of
    notebook 1's exercise) succeeds at the preset's client count, on every domain of the preset."""
    p = PRESETS[scale]
    from icml26.special.experiments import domains_for

    doms = domains_for(p)
    for alpha in (p.alpha, 0.1, 100.0):
        for k, dom in enumerate(doms[:3]):
            parts = m.dirichlet_partition(dom.y_train, p.n_clients, alpha, np.random.default_rng([p.seed, k]))
            assert len(parts) == p.n_clients and min(len(q) for q in parts) >= 2
            assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(dom.y_train)))


def test_partition_top_up_keeps_a_partition():
    y = np.repeat(np.arange(10), 144)
    parts = m.dirichlet_partition(y, 100, 0.1, np.random.default_rng(0), max_tries=1)
    assert min(len(q) for q in parts) >= 2
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(y)))


def test_rate_toy_is_non_convex_and_lam_enters_only_through_the_step():
    from icml26.special.theory import toy_curvature

    w = np.linspace(-4, 4, 4001)[:, None] * np.ones(10)
    assert toy_curvature(w, 1.0).min() >= -1e-12  # the spec's gamma = 1: convex
    assert math.isclose(toy_curvature(w, 2.0).min(), -0.5, abs_tol=1e-6)  # gamma = 2: not convex
    kw = dict(seeds=3, gamma_nc=2.0, progress=False)
    g0 = m.convergence_experiment([20], [4], [1], lam=0.0, **kw)["G"]
    g1 = m.convergence_experiment([20], [4], [1], lam=1.0, **kw)["G"]
    assert np.allclose(g0, g1, rtol=1e-12)  # E = 1: eta_l (1 + lam) / (1 + lam) is the same step
    st = m.convergence_experiment([20], [4], [1], start="stationary", burn_in=10, **kw)
    assert np.all(st["G"] > 0) and "etaEL" in st


def test_bkt_sweep_shapes():
    from icml26.special.theory import bkt_sweep

    out = bkt_sweep("rounds", (5, 10), seeds=2)
    assert list(out.index) == [5, 10] and np.all(out["bound"] >= out["increase"] - 1e-10)
    with pytest.raises(ValueError, match="param"):
        bkt_sweep("epochs", (1,))


@pytest.mark.cuda
def test_server_round_cpu_vs_cuda():
    """One full federated round (batched local training + SPECIAL's server step) on CPU and on
    CUDA, float64, same batch order: the two agree to rounding."""
    g = torch.Generator().manual_seed(0)
    N, n_max, H = 5, 40, 64
    X, y = torch.rand(N, n_max, 64, generator=g, dtype=torch.float64), torch.randint(0, 10, (N, n_max), generator=g)
    valid = torch.arange(n_max)[None] < torch.tensor([40, 12, 33, 7, 25])[:, None]
    w = m.init_mlp(H, g).double()
    out = {}
    for dev in ("cpu", "cuda"):
        W = m.local_train_batched(w.expand(N, -1).to(dev), X.to(dev), y.to(dev), valid.to(dev), 2, 0.05, 16, H,
                                  prox_mu=0.1, prox_center=w.to(dev), generator=torch.Generator().manual_seed(1))
        out[dev] = m.special_server_step(w.to(dev), W, w.to(dev), 1.0).cpu()
    assert torch.allclose(out["cpu"], out["cuda"], atol=1e-10, rtol=0)
    assert not torch.allclose(out["cpu"], w)


# ---------------------------------------------------------------- bad inputs (spec section 9)
@pytest.mark.parametrize("changes, word", [
    ({"lam": -1.0}, "lam"), ({"lam": float("inf")}, "lam"), ({"lam": float("nan")}, "lam"),
    ({"mu": -0.1}, "mu"), ({"server_lr": 0.0}, "server_lr"), ({"anchor": "epoch"}, "anchor"),
    ({"method": "scaffold"}, "method"), ({"clients_per_round": 0}, "clients_per_round"),
    ({"clients_per_round": 21}, "clients_per_round"), ({"n_clients": 0}, "n_clients"),
    ({"rounds_per_task": 0}, "rounds_per_task"), ({"local_epochs": 0}, "local_epochs"),
    ({"batch_size": 0}, "batch_size"), ({"hidden": 0}, "hidden"), ({"lr": 0.0}, "lr"),
    ({"lr": -0.1}, "lr"), ({"dtype": "float16"}, "dtype"),
])
def test_bad_config(changes, word):
    with pytest.raises(ValueError, match=word):
        m.FDILConfig(**changes)


def test_bad_partition_inputs():
    y = np.repeat(np.arange(10), 3)
    with pytest.raises(ValueError, match="max_tries"):
        m.dirichlet_partition(y, 3, 0.5, np.random.default_rng(0), max_tries=0)
    with pytest.raises(ValueError, match="alpha"):
        m.dirichlet_partition(y, 3, 0.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="min_size"):
        m.dirichlet_partition(y, 20, 0.5, np.random.default_rng(0), min_size=2)


def test_bad_domains(domains):
    cfg = m.FDILConfig(n_clients=5, clients_per_round=2, rounds_per_task=1, local_epochs=1)
    with pytest.raises(ValueError, match="domains"):
        m.run_fdil([], cfg)
    d0 = domains[0]
    short = m.DomainData(d0.X_train[:, :32], d0.y_train, d0.X_test[:, :32], d0.y_test, "short")
    with pytest.raises(ValueError, match="feature dimension"):
        m.run_fdil([d0, short], cfg)
    bad_y = m.DomainData(d0.X_train, d0.y_train + 5, d0.X_test, d0.y_test, "labels")
    with pytest.raises(ValueError, match="0..9"):
        m.run_fdil([bad_y], cfg)
    mismatch = m.DomainData(d0.X_train[:-1], d0.y_train, d0.X_test, d0.y_test, "len")
    with pytest.raises(ValueError, match="same length"):
        m.run_fdil([mismatch], cfg)
    Xn = d0.X_train.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.run_fdil([m.DomainData(Xn, d0.y_train, d0.X_test, d0.y_test, "nan")], cfg)


def test_bad_domain_builder():
    with pytest.raises(ValueError, match="angles"):
        m.make_digit_domains(angles=())
    with pytest.raises(ValueError, match="kind"):
        m.make_digit_domains(kind="colour")


def test_bad_server_step():
    with pytest.raises(ValueError, match="anchor"):
        m.server_proximal_step(torch.zeros(3), torch.zeros(4), 1.0)
    with pytest.raises(ValueError, match="lam"):
        m.server_proximal_step(torch.zeros(3), torch.zeros(3), -0.5)


def test_bad_metric_matrices():
    for A in (np.zeros((2, 3)), np.array([[1.2, 0.0], [0.0, 1.0]]), np.array([[np.nan]])):
        for fn in (m.average_accuracy, m.forgetting, m.backward_transfer, m.plasticity):
            with pytest.raises(ValueError, match="A must"):
                fn(A)


def test_bad_trainer_inputs():
    w = m.init_mlp(8, torch.Generator().manual_seed(0))
    X, y = torch.rand(5, 64), torch.zeros(5, dtype=torch.long)
    with pytest.raises(ValueError, match="prox_center"):
        m.local_train_loop(w, X, y, 1, 0.1, 2, 8, prox_mu=0.1)
    with pytest.raises(ValueError, match="lr"):
        m.local_train_loop(w, X, y, 1, 0.0, 2, 8)
    with pytest.raises(ValueError, match="expected params"):
        m.local_train_batched(w, X, y, torch.ones(5, dtype=torch.bool), 1, 0.1, 2, 8)


def test_weighted_mean_update_and_special_step():
    g = torch.Generator().manual_seed(5)
    w, W = torch.randn(6, generator=g), torch.randn(3, 6, generator=g)
    p = torch.tensor([1.0, 2.0, 5.0])
    manual = sum(p[i] * (W[i] - w) for i in range(3)) / p.sum()
    assert torch.allclose(m.client_mean_update(w, W, p), manual, atol=1e-6)
    assert torch.allclose(m.client_mean_update(w, W), (W - w).mean(0))
    a = torch.randn(6, generator=g)
    step = m.special_server_step(w, W, a, 0.5, p)
    assert torch.allclose(step, (w + manual + 0.5 * a) / 1.5, atol=1e-6)
    assert torch.allclose(m.fedavg_server_step(w, W, 0.5), w + 0.5 * (W - w).mean(0))


def test_many_configs_in_one_batch_equal_single_runs(domains, tiny):
    """Different methods, weights, step sizes and seeds stacked in one run_fdil_many call."""
    from icml26.special.method import run_fdil_many

    cfgs = [base_config(tiny, "cpu", method="fedavg", seed=1), base_config(tiny, "cpu", method="fedavg", lr=0.05),
            base_config(tiny, "cpu", method="fedprox", mu=3.0), base_config(tiny, "cpu", method="special", lam=1.0),
            base_config(tiny, "cpu", method="special", lam=0.1, anchor="task", seed=2),
            base_config(tiny, "cpu", method="replay", replay_per_class=2), base_config(tiny, "cpu", method="joint")]
    batch = run_fdil_many(domains, cfgs, progress=False)
    for c, r in zip(cfgs, batch):
        single = m.run_fdil(domains, c, progress=False)
        assert np.array_equal(single.acc_matrix, r.acc_matrix), c.method
        assert torch.allclose(single.final_params, r.final_params, atol=1e-6), c.method
    with pytest.raises(ValueError, match="share hidden"):
        run_fdil_many(domains, [cfgs[0], cfgs[0].replace(hidden=32)], progress=False)


# ---------------------------------------------------------------- the fair comparison (issue 35)
def test_validation_domains_hold_out_part_of_the_training_split(domains):
    val = m.validation_domains(domains, fraction=0.2, seed=0)
    assert len(val) == len(domains)
    for d, v in zip(domains, val):
        n = len(d.y_train)
        assert len(v.y_test) == round(0.2 * n) or abs(len(v.y_test) - 0.2 * n) < 1
        assert len(v.y_train) + len(v.y_test) == n
        # train and validation rows are disjoint and together are the training split (never the test one)
        both = np.concatenate([v.X_train, v.X_test])
        assert {r.tobytes() for r in both} <= {r.tobytes() for r in d.X_train}
        assert np.bincount(v.y_test, minlength=10).min() > 0  # stratified: every class held out
    # the same images are held out of every domain (the domains are transforms of one image set)
    assert all(np.array_equal(val[0].y_test, v.y_test) for v in val)
    for bad in (0.0, 1.0, -0.1, float("nan"), "0.2"):
        with pytest.raises(ValueError, match="fraction"):
            m.validation_domains(domains, fraction=bad)
    with pytest.raises(ValueError, match="seed"):
        m.validation_domains(domains, seed=-1)


@pytest.mark.parametrize("scale", ["smoke", "book", "gpu"])
def test_tuning_grids_are_equal_and_validation_seeds_disjoint(scale):
    from dataclasses import replace

    from icml26.special import experiments as ex

    p = PRESETS[scale]
    grids = ex.tuning_grids(p)
    assert grids["FedAvg"].size == grids["SPECIAL"].size  # the same number of configurations
    if scale != "smoke":
        assert grids["FedAvg"].size == 9 and p.val_seeds >= 3 and p.seeds >= 10
    assert not set(ex.validation_seeds(p)) & set(ex.test_seeds(p))
    with pytest.raises(ValueError, match="val_seed0"):
        ex.validation_seeds(replace(p, val_seed0=p.seed))


def test_tuning_never_reads_the_test_split(domains, tiny):
    """The tuned choice and every validation score are the same when the test split is replaced."""
    from dataclasses import replace

    from icml26.special import experiments as ex

    p = replace(tiny, rounds_per_task=2, local_epochs=1)
    t1, v1 = ex.tune_on_validation(domains, p, device="cpu", progress=False)
    rng = np.random.default_rng(0)
    scrambled = [m.DomainData(d.X_train, d.y_train, rng.random(d.X_test.shape, dtype=np.float32),
                              rng.integers(0, 10, len(d.y_test)), d.name) for d in domains]
    t2, v2 = ex.tune_on_validation(scrambled, p, device="cpu", progress=False)
    for name in ("FedAvg", "SPECIAL"):
        assert t1[name].scores == t2[name].scores and t1[name].best == t2[name].best
        assert t1[name].n_configs == ex.tuning_grids(p)[name].size
    assert set(v1["train_seed"]) == set(ex.validation_seeds(p))
    with pytest.raises(ValueError, match="goal_metric"):
        ex.tune_on_validation(domains, p, goal_metric="FGT")


def test_comparison_pairs_seeds_reuses_runs_and_matches_steps(domains, tiny):
    from dataclasses import replace

    from icml26.core import ProtocolError
    from icml26.special import experiments as ex

    p = replace(tiny, rounds_per_task=2, local_epochs=1, seeds=2)
    variants = [ex.Variant("FedAvg", "FedAvg", (("method", "fedavg"),)),
                ex.Variant("SPECIAL lam=1", "SPECIAL", (("method", "special"), ("lam", 1.0)))]
    runs, results = ex.run_variants(domains, p, variants, device="cpu", progress=False)
    # a variant with the configuration of an existing one is copied, not rerun
    same = ex.Variant("FedAvg (tuned)", "FedAvg (tuned)", (("method", "fedavg"), ("lr", p.lr)))
    half = ex.step_matched_variant({"lam": 1.0, "lr": p.lr}, "FedAvg lr/2")
    assert dict(half.changes)["lr"] == pytest.approx(p.lr / 2)
    new, res = ex.run_or_reuse(domains, p, [same, half], runs, results, device="cpu", progress=False)
    assert res["FedAvg (tuned)"] is results["FedAvg"] and res["FedAvg lr/2"] is not results["FedAvg"]
    allruns = pd.concat([runs, new], ignore_index=True)
    cmp = ex.step_control_comparison(allruns, "FedAvg lr/2", "SPECIAL lam=1", "ACC", p)
    assert cmp.seeds == ex.test_seeds(p) and cmp.problems(scale="smoke") == []
    assert all(r.cost == len(domains) * p.rounds_per_task for r in cmp.rows.values())
    assert cmp.rows["FedAvg"].control
    table = ex.paired_table(allruns, [("FedAvg lr/2", "SPECIAL lam=1")], p)
    d = cmp.diff("FedAvg lr/2", "SPECIAL lam=1")
    assert table.loc["FedAvg lr/2 - SPECIAL lam=1", "ACC"] == pytest.approx(d.mean)
    assert (table.loc["FedAvg lr/2 - SPECIAL lam=1", "ACC lo"], table.iloc[0]["ACC hi"]) == pytest.approx((d.lo, d.hi))
    unpaired = allruns[~((allruns["name"] == "FedAvg") & (allruns["seed"] == 1))]
    with pytest.raises(ProtocolError, match="seeds"):  # a method missing a seed is not paired
        ex.comparison(unpaired, "ACC", [("FedAvg", {"untuned": "-"})], p, goal="max")
    with pytest.raises(ValueError, match="metric"):
        ex.step_control_comparison(allruns, "FedAvg lr/2", "SPECIAL lam=1", "loss", p)
    with pytest.raises(ValueError, match="config"):
        ex.step_matched_variant({"lr": 0.1})


def test_fedavg_neighbours_are_the_grid_values_next_to_the_choice():
    """The sensitivity check retrains FedAvg at the grid values next to its validated step."""
    from icml26.core.compare import tune
    from icml26.special import experiments as ex

    grid = ex.tuning_grids(PRESETS["book"])["FedAvg"]
    curve = {0.025: 0.547, 0.035: 0.545}  # a flat top, as on the book's validation split

    def score(c):
        return curve.get(c["lr"], 0.5 - abs(c["lr"] - 0.03))

    fa = tune("FedAvg", score, grid, goal="max", progress=False)
    assert fa.best["lr"] == 0.025 and ex.fedavg_neighbours(fa) == [0.0177, 0.035]
    lo = tune("FedAvg", lambda c: -c["lr"], grid, goal="max", progress=False)  # best at the lower edge
    assert ex.fedavg_neighbours(lo) == [0.0088]
    sp = tune("SPECIAL", lambda c: c["lam"], ex.tuning_grids(PRESETS["book"])["SPECIAL"], goal="max", progress=False)
    with pytest.raises(ValueError, match="tuned"):
        ex.fedavg_neighbours(sp)
    assert set(ex.EXPLORATION) == {"SPECIAL", "FedAvg"}
