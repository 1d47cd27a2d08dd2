"""Unit identities (spec Sec. 8) and bad inputs (Sec. 9) of icml26.bpop."""

from __future__ import annotations

import itertools
import math

import icml26.bpop as m
import numpy as np
import pytest
import torch
from icml26.bpop import experiments as ex

pytestmark = pytest.mark.usefixtures("one_thread")

EX3 = m.PartialOrder.from_edges([(0, 1)], names=[0, 1, 2])     # {0 < 1, 2 free}
EXT3 = [(0, 1, 2), (0, 2, 1), (2, 0, 1)]


# -- partial orders ------------------------------------------------------------------------------

def test_cloud_iac_cover_counts_and_reduction_identity():
    counts = {nm: int(m.cloud_iac(nm).cover().sum()) for nm in m.CLOUD_IAC6}
    assert sorted(counts.values()) == [5, 8, 10, 10, 12, 14]
    for nm, edges in m.CLOUD_IAC6.items():
        po = m.cloud_iac(nm)
        cover = {(po.names[i], po.names[j]) for i, j in zip(*np.nonzero(po.cover()), strict=True)}
        assert cover == set(edges), nm     # transitive_reduction(transitive_closure(E)) == E


def test_linear_extension_counts_match_enumeration():
    assert m.cloud_iac("simple_ecs").num_linear_extensions() == 3
    assert m.cloud_iac("dual_zone_ecs_slb").num_linear_extensions() == 9
    rng = np.random.default_rng(0)
    for k in range(5):
        po = m.random_order(7, 2, 0.3, seed=k)
        brute = sum(po.is_linear_extension(y) for y in itertools.permutations(range(7)))
        assert po.num_linear_extensions() == brute
    del rng


def test_dominance_closure_is_a_strict_order():
    U = torch.randn(6, 9, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    C = m.dominance(U).numpy()
    for c in C:
        assert not np.diag(c).any() and not (c & c.T).any()
        assert np.array_equal(m.transitive_closure(c), c)


def test_break_cycles_removes_weakest_edge():
    adj = np.zeros((3, 3), bool)
    adj[0, 1] = adj[1, 2] = adj[2, 0] = True
    w = np.array([[0, .9, 0], [0, 0, .8], [.3, 0, 0]])
    out = m.break_cycles(adj, w)
    assert not out[2, 0] and out[0, 1] and out[1, 2]


# -- the likelihood (claims 1-2) -----------------------------------------------------------------

def test_three_action_example_bpop_and_queue_jump():
    for beta, want in ((0.0, (0.25, 0.25, 0.5)), (1.0, (1 / 3, 1 / 3, 1 / 3)), (2.0, (0.4, 0.4, 0.2))):
        got = [math.exp(m.trace_log_likelihood(y, EX3, beta, 0.0)) for y in EXT3]
        assert got == pytest.approx(want, abs=1e-12)
    qj = [math.exp(m.queue_jump_log_likelihood(y, EX3, 0.1)) for y in EXT3]
    assert qj == pytest.approx([0.31666666666666] * 3, abs=1e-10)


@pytest.mark.parametrize("name", ["simple_ecs", "dual_zone_ecs_slb"])
@pytest.mark.parametrize("beta,eps", [(0.0, 0.0), (1.0, 0.05), (2.7, 0.3), (0.4, 0.0)])
def test_normalisation_over_all_orderings(name, beta, eps):
    po = m.cloud_iac(name)
    Y, p = ex.permutation_probabilities(po, beta, eps)
    assert p.sum() == pytest.approx(1.0, abs=1e-10)
    if eps == 0:
        assert int((p > 0).sum()) == po.num_linear_extensions()
        assert all(po.is_linear_extension(y) for y in Y[p > 0])


def test_reference_loop_normalises_on_simple_ecs():
    po = m.cloud_iac("simple_ecs")
    tot = sum(math.exp(m.trace_log_likelihood(y, po, 1.3, 0.07)) for y in itertools.permutations(range(po.n)))
    assert tot == pytest.approx(1.0, abs=1e-10)


def test_queue_jump_normalises():
    po = m.cloud_iac("simple_ecs")
    tot = sum(math.exp(m.queue_jump_log_likelihood(y, po, 0.2)) for y in itertools.permutations(range(po.n)))
    assert tot == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("utility", ["log_successors", "uniform"])
def test_batched_equals_loop(utility):
    rng = np.random.default_rng(1)
    n, c = 8, 5
    Y = np.array([rng.permutation(n) for _ in range(7)])
    U = rng.standard_normal((c, n, 2))
    C = torch.as_tensor(m.dominance(U))
    beta = torch.tensor([0.0, 0.5, 1.0, 2.0, 3.0], dtype=torch.float64)
    got = m.batched_log_likelihood(m.remaining_tensor(Y), C, beta, 0.05, m.chosen_tensor(Y), utility)
    ref = [sum(m.trace_log_likelihood(y, m.PartialOrder(None, cl), float(b), 0.05, utility) for y in Y)
           for cl, b in zip(C.numpy(), beta, strict=True)]
    assert torch.allclose(got, torch.tensor(ref, dtype=torch.float64), atol=1e-6, rtol=0)


def test_partial_trace_uses_restriction():
    po = m.cloud_iac("simple_ecs")
    sub = [0, 2, 1]
    sub_po = po.restrict(sub)
    assert m.trace_log_likelihood(sub, po, 1.0, 0.05) == pytest.approx(
        m.trace_log_likelihood([0, 1, 2], sub_po, 1.0, 0.05))


# -- IP-Cov, baselines ---------------------------------------------------------------------------

def test_ip_cov_and_intersection_theorem():
    assert m.ip_coverage([[0, 1, 2], [2, 0, 1]], EX3) == 1.0
    assert m.ip_coverage([[0, 1, 2]], EX3) == 0.0
    # intersection of noise-free traces equals h iff IP-Cov = 1 (spec Sec. 4.3)
    po = m.cloud_iac("dual_zone_ecs_slb")
    Y = m.softmax_traces(po, 40, 0.5, 0.0, seed=0)
    ab = m.always_before(Y, po.n)
    assert (m.ip_coverage(Y, po) == 1.0) == np.array_equal(ab.closure, po.closure)
    assert np.all(ab.closure >= po.closure)


def test_hm_dependency_formula_on_hand_counts():
    df = np.array([[0, 5, 1], [0, 0, 3], [1, 3, 0]])
    dep = m.hm_dependency(df)
    assert dep[0, 1] == pytest.approx(5 / 6)
    assert dep[1, 2] == pytest.approx(0.0)
    assert dep[0, 2] == pytest.approx(0.0)


def test_heuristics_miner_matches_pm4py():
    pytest.importorskip("pm4py")
    po = m.cloud_iac("slb_ecs_rds")
    Y = m.softmax_traces(po, 40, 1.0, 0.05, seed=3)
    ours = m.heuristics_miner(Y, po.n)
    theirs = m.heuristics_miner(Y, po.n, use_pm4py=True)
    assert np.array_equal(ours.closure, theirs.closure)


def test_majority_and_always_before_rules():
    Y = [[0, 1, 2], [0, 2, 1], [1, 0, 2]]
    maj = m.majority(Y, 3)
    assert maj.closure[0, 1] and maj.closure[0, 2] and maj.closure[1, 2]
    ab = m.always_before(Y, 3)
    assert ab.closure[0, 2] and not ab.closure[0, 1] and not ab.closure[1, 2]


def test_batched_trace_sampler_draws_from_eq2():
    """The vectorised sampler has the law of Eq. (2): empirical ordering frequencies match the exact
    probabilities of all n! orderings."""
    po = m.cloud_iac("simple_ecs")
    Y = m.softmax_traces_batch(po, 60_000, 1.0, 0.05, np.random.default_rng(0))
    assert Y.shape == (60_000, 5) and all(sorted(y) == list(range(5)) for y in Y[:200])
    perms, p = ex.permutation_probabilities(po, 1.0, 0.05)
    index = {tuple(y): k for k, y in enumerate(perms)}
    freq = np.bincount([index[tuple(y)] for y in Y], minlength=len(perms)) / len(Y)
    assert np.abs(freq - p).max() < 6 * np.sqrt(p.max() / len(Y))
    clean = m.softmax_traces_batch(po, 500, 2.0, 0.0, np.random.default_rng(1))
    assert all(po.is_linear_extension(y) for y in clean)
    with pytest.raises(ValueError, match="m"):
        m.softmax_traces_batch(po, 0, 1.0, 0.05, np.random.default_rng(0))


def test_majority_many_matches_the_rule_and_its_population_value():
    """Issue 39.5: the vectorised Majority equals bl.majority on the same traces; with infinitely many
    traces (exact, all n! orderings) Majority's Edge-F1 on simple_ecs is 4/9 <= 1/2."""
    po = m.cloud_iac("simple_ecs")
    pop = ex.majority_population(po, 1.0, 0.05)
    assert pop["f1"] == pytest.approx(4 / 9, abs=1e-12) and 0 < pop["closest_to_threshold"] < 0.5
    f1 = ex.majority_f1_many(po, 20, 30, seed=4)
    Y = m.softmax_traces_batch(po, 20 * 30, 1.0, 0.05, np.random.default_rng(4)).reshape(20, 30, 5)
    loop = [m.edge_metrics(po, m.majority(y, 5))["f1"] for y in Y]
    assert np.allclose(f1, loop)


def _fake_run(po, Y, seed):
    """A (true_po, traces, Posterior) run whose edge probabilities are the traces' precedence shares."""
    before, both = m.precedence_counts(Y, po.n)
    share = np.where(both > 0, before / np.maximum(both, 1), 0.0)
    z = np.zeros((1, 1))
    return (po, Y, m.Posterior(edge_prob=share, loglik=z, beta=z, rho=z, accept_rate={}))


def test_thresholds_are_tuned_on_validation_runs_and_compared_on_paired_seeds():
    po = m.cloud_iac("simple_ecs")
    runs = {("simple_ecs", s): _fake_run(po, m.softmax_traces(po, 30, 1.0, 0.05, seed=s), s) for s in range(5)}
    val = [_fake_run(po, m.softmax_traces(po, 30, 1.0, 0.05, seed=100 + v), v) for v in range(2)]
    tuned = ex.tune_thresholds(val)
    assert set(tuned) == {"majority", "heuristics miner"}             # BPOP keeps alpha = 1/2 (untuned)
    assert len({t.n_configs for t in tuned.values()}) == 1            # equal grids
    for t in tuned.values():                                          # ties go to the grid's centre
        tied = [c for c, v in t.scores if v == t.best_score]
        values = next(iter(t.grid.axes.values()))
        mid = (len(values) - 1) / 2
        dist = [abs(values.index(next(iter(c.values()))) - mid) for c in tied]
        assert t.best in tied and abs(values.index(next(iter(t.best.values()))) - mid) == min(dist)
    cmp = ex.protocol_comparison(runs, tuned, "Edge-F1", cost=300)
    assert cmp.seeds == [0, 1, 2, 3, 4] and cmp.rows["always-before"].control
    assert cmp.rows["BPOP"].cost == 300 and cmp.rows["majority"].cost == 0 and cmp.rows["BPOP"].untuned
    assert all(np.isfinite(r.per_seed).all() for r in cmp.rows.values())
    assert not [p for p in cmp.problems(["BPOP", "always-before"]) if "seeds" in p or "control" in p]


def test_select_traces_for_ipcov_reaches_target_and_warns():
    po = m.cloud_iac("slb_ecs_rds")
    pool = m.softmax_traces(po, 60, 1.0, 0.0, seed=0)
    rng = np.random.default_rng(0)
    for tgt in (0.5, 0.8):
        assert m.ip_coverage(m.select_traces_for_ipcov(pool, po, tgt, rng), po) >= tgt
    with pytest.warns(UserWarning, match="unreachable"):
        m.select_traces_for_ipcov(pool[:2], po, 1.0, rng)


# -- MCMC, safety --------------------------------------------------------------------------------

def test_mcmc_recovers_simple_ecs():
    po = m.cloud_iac("simple_ecs")
    Y = m.softmax_traces(po, 30, 1.0, 0.05, seed=1)
    post = m.run_mcmc(Y, po.n, m.MCMCConfig(n_iter=1500, n_chains=2, seed=0), progress=False)
    assert post.edge_prob.shape == (5, 5) and np.all((post.edge_prob >= 0) & (post.edge_prob <= 1))
    assert m.edge_metrics(po, m.point_estimate(post.edge_prob, 0.5))["f1"] >= 0.9
    assert 0 < post.accept_rate["U"] < 1


def test_mcmc_batched_datasets_match_single():
    po = m.cloud_iac("simple_ecs")
    Y = m.softmax_traces(po, 10, 1.0, 0.05, seed=1)
    cfg = m.MCMCConfig(n_iter=200, n_chains=1, seed=3)
    a = m.run_mcmc_many([Y], po.n, cfg, progress=False)[0]
    b = m.run_mcmc_many([Y, Y[:6]], po.n, cfg, progress=False)
    assert a.edge_prob.shape == b[0].edge_prob.shape and len(b) == 2


def test_likelihood_kernel_is_finite_for_large_beta():
    """The power form of the frontier softmax (scaled by n^(-beta/2)) stays finite in float32 up to
    large beta and equals the reference loop in float64."""
    po = m.cloud_iac("slb_ecs_rds")
    Y = m.softmax_traces(po, 8, 1.0, 0.05, seed=2)
    for dt in (torch.float32, torch.float64):
        R, ch = m.remaining_tensor(Y, dtype=dt), m.chosen_tensor(Y)
        C = torch.as_tensor(po.closure)[None].to(dt)
        for beta in (0.0, 1.0, 20.0, 40.0):
            ll = m.batched_log_likelihood(R, C, torch.tensor([beta], dtype=dt), 0.05, ch)
            want = sum(m.trace_log_likelihood(y, po, beta, 0.05) for y in Y)
            tol = 1e-9 if dt == torch.float64 else 1e-3 * max(1.0, abs(want))
            assert torch.isfinite(ll).all() and abs(float(ll[0]) - want) < tol


def test_mcmc_starts_at_the_documented_state():
    """Issue 39.7: chains start at rho = RHO_INIT, beta = BETA_INIT; the rho prior is truncated at 1 - RHO_TOL."""
    assert (m.RHO_INIT, m.BETA_INIT, m.RHO_TOL) == (0.5, 1.0, 1e-4)
    assert m.MCMCConfig().step_U == 0.5
    po = m.cloud_iac("simple_ecs")
    Y = m.softmax_traces(po, 10, 1.0, 0.05, seed=1)
    post = m.run_mcmc(Y, po.n, m.MCMCConfig(n_iter=20, thin=1, n_chains=3, seed=0, burn_in=0.5), progress=False)
    assert post.rho.shape == (3, 20) and np.all(post.rho < 1 - m.RHO_TOL)
    assert np.all(np.isclose(post.rho[:, 0], m.RHO_INIT) | (np.abs(post.rho[:, 0] - m.RHO_INIT) < 0.2))


def test_log_prior_matches_scipy():
    from scipy.stats import multivariate_normal
    U = torch.randn(1, 4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    rho = 0.4
    S = (1 - rho) * np.eye(3) + rho
    want = multivariate_normal(np.zeros(3), S).logpdf(U[0].numpy()).sum()
    assert float(m.log_prior_U(U, torch.tensor([rho], dtype=torch.float64))) == pytest.approx(want, abs=1e-10)


def test_safety_superset_closure_gives_valid_executions():
    po = m.cloud_iac("dual_zone_ecs_slb")
    total = m.PartialOrder(None, _total_from(m.expert_trace(po)))
    assert m.closure_recall(po, total) == 1.0 and m.execution_validity(total, po, 50) == 1.0
    empty = m.PartialOrder(None, np.zeros((7, 7), bool))
    assert m.closure_recall(po, empty) == 0.0 and m.execution_validity(empty, po, 200) < 1.0


def _total_from(order):
    n = len(order)
    C = np.zeros((n, n), bool)
    for a, i in enumerate(order):
        for j in order[a + 1:]:
            C[i, j] = True
    return C


def test_executor_modes():
    po = m.cloud_iac("slb_ecs_rds")
    ex_ = m.simulate_execution(po, po, "expert", 4, seed=0)
    seq = m.simulate_execution(po, po, "explore", 4, seed=0)
    assert ex_["success"] and ex_["tokens"] == 100 and ex_["makespan"] <= seq["makespan"]
    empty = m.PartialOrder(None, np.zeros((po.n, po.n), bool))
    assert not m.simulate_execution(empty, po, "expert", 4, seed=0)["success"]
    hy = m.simulate_execution(empty, po, "hybrid", 4, seed=0)
    assert hy["success"] and hy["fallbacks"] > 0


def test_wfcommons_shapes():
    sra = m.srasearch_dag(10)
    assert sra.n == 22 and int(sra.cover().sum()) == 30
    assert m.epigenomics_dag(1, 9).n == 41


# -- bad inputs (spec Sec. 9) --------------------------------------------------------------------

def test_bad_edges():
    with pytest.raises(ValueError, match="cycle"):
        m.PartialOrder.from_edges([("a", "b"), ("b", "c"), ("c", "a")])
    with pytest.raises(ValueError, match="self-loop"):
        m.PartialOrder.from_edges([("a", "a")])
    with pytest.raises(ValueError, match="unknown"):
        m.PartialOrder.from_edges([("a", "z")], names=["a", "b"])


def test_bad_closures():
    with pytest.raises(ValueError, match="square"):
        m.PartialOrder(None, np.zeros((2, 3), bool))
    with pytest.raises(ValueError, match="boolean"):
        m.PartialOrder(None, np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="irreflexive"):
        m.PartialOrder(None, np.eye(2, dtype=bool))
    c = np.zeros((3, 3), bool)
    c[0, 1] = c[1, 2] = True
    with pytest.raises(ValueError, match="transitive"):
        m.PartialOrder(None, c)


@pytest.mark.parametrize("trace,match", [([0, 0, 1], "repeats"), ([0, 5], "outside"), ([], "non-empty")])
def test_bad_traces(trace, match):
    with pytest.raises(ValueError, match=match):
        m.trace_log_likelihood(trace, EX3, 1.0, 0.05)


def test_incomplete_traces_for_fast_path():
    with pytest.raises(ValueError, match="complete"):
        m.remaining_tensor([[0, 1], [1, 0]], n=3)


@pytest.mark.parametrize("kw,match", [(dict(beta=-1.0), "beta"), (dict(beta=math.inf), "beta"),
                                      (dict(eps=1.0), "eps"), (dict(eps=-0.1), "eps")])
def test_bad_beta_eps(kw, match):
    args = dict(beta=1.0, eps=0.05) | kw
    with pytest.raises(ValueError, match=match):
        m.trace_log_likelihood([0, 1, 2], EX3, **args)


@pytest.mark.parametrize("kw,match", [(dict(K=0), "K"), (dict(n_iter=0), "n_iter"), (dict(burn_in=1.0), "burn_in"),
                                      (dict(thin=0), "thin")])
def test_bad_mcmc_config(kw, match):
    with pytest.raises(ValueError, match=match):
        m.run_mcmc([[0, 1, 2]], 3, m.MCMCConfig(**kw), progress=False)


def test_bad_alpha_and_p_and_max_n():
    with pytest.raises(ValueError, match="alpha"):
        m.point_estimate(np.zeros((3, 3)), alpha=0.0)
    with pytest.raises(ValueError, match="p must"):
        m.queue_jump_log_likelihood([0, 1, 2], EX3, 1.0)
    big = m.PartialOrder(None, np.zeros((20, 20), bool))
    with pytest.raises(ValueError, match="max_n"):
        big.num_linear_extensions(max_n=18)
    with pytest.raises(ValueError, match="max_n"):
        m.queue_jump_log_likelihood(list(range(20)), big, 0.1)


@pytest.mark.cuda
def test_batched_likelihood_cuda_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    po = m.cloud_iac("slb_ecs_rds")
    Y = m.softmax_traces(po, 20, 1.0, 0.05, seed=0)
    U = torch.randn(16, po.n, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    beta = torch.linspace(0, 2, 16, dtype=torch.float64)
    cpu = m.batched_log_likelihood(m.remaining_tensor(Y), m.dominance(U), beta, 0.05, m.chosen_tensor(Y))
    gpu = m.batched_log_likelihood(m.remaining_tensor(Y, device="cuda"), m.dominance(U.cuda()), beta.cuda(), 0.05,
                                   m.chosen_tensor(Y, device="cuda"))
    assert torch.allclose(cpu, gpu.cpu(), atol=1e-8)
    post = m.run_mcmc(Y, po.n, m.MCMCConfig(n_iter=300, n_chains=4, device="cuda"), progress=False)
    assert np.all(np.isfinite(post.edge_prob))


def test_presets_and_dry_run():
    assert set(m.PRESETS) == {"smoke", "book", "gpu"}
    for p in m.PRESETS.values():
        d = p.dry_run()
        assert type(d) is type(p)
        for f in ("n_iter", "sra_iter", "qj_iter", "recovery_seeds", "ipcov_seeds", "timing_orders", "n_exec",
                  "validation_seeds", "persona_seeds", "persona_validation_seeds", "majority_datasets"):
            assert getattr(d, f) <= getattr(p, f)
        assert (d.n_chains, d.recovery_traces, d.sra_accessions, d.K) == (p.n_chains, p.recovery_traces,
                                                                         p.sra_accessions, p.K)
        assert set(d.recovery_scenarios) <= set(p.recovery_scenarios) and "slb_ecs_rds" in d.recovery_scenarios
        assert d.ipcov_targets[-1] == 1.0 and p.ipcov_targets[-1] == 1.0


def test_python_beta_is_used_in_the_likelihood_dtype():
    """Issue 39.7: a Python or NumPy beta goes straight to R's dtype (float64: equal to the loop to round-off,
    where a float32 detour was ~2e-7 off)."""
    po = m.cloud_iac("slb_ecs_rds")
    Y = m.softmax_traces(po, 12, 1.0, 0.05, seed=4)
    R, ch, C = m.remaining_tensor(Y), m.chosen_tensor(Y), torch.as_tensor(po.closure, dtype=torch.float64)
    for beta in (0.7, np.float64(1.3), 2):
        got = float(m.batched_log_likelihood(R, C, beta, 0.05, ch))
        want = sum(m.trace_log_likelihood(y, po, float(beta), 0.05) for y in Y)
        assert abs(got - want) < 1e-10


def test_persona_recovery_is_misspecified_and_paired():
    """Issue 39.6: the persona study fits traces that do not come from Eq. (F) (one expert trace plus
    6 personas x 9 traces), keeps validation data sets apart from the test seeds, and feeds the protocol."""
    cfg = m.preset("smoke")
    out = ex.persona_recovery(cfg, seeds=[0, 1], validation_seeds=1, progress=False)
    assert set(out["runs"]) == {("slb_ecs_rds", 0), ("slb_ecs_rds", 1)} and len(out["validation"]) == 1
    assert not set(out["runs"]) & set(out["validation"])
    assert all(len(Y) == 55 for _, Y, _ in out["runs"].values())
    assert set(out["table"].method) >= {"BPOP", "majority", "always-before", "heuristics miner"}
    cp = ex.protocol_comparison(out["runs"], ex.tune_thresholds(list(out["validation"].values())), "F1", cost=1)
    assert cp.seeds == [0, 1] and cp.rows["always-before"].control


def test_majority_grid_stops_short_of_always_before():
    """The largest share on Majority's grid lets a trace of 30 disagree: at or above 29/30 it would be
    Always-before itself (the control row), and the grid would tune a baseline into the control."""
    axis, values = ex.THRESHOLD_GRIDS["majority"]
    assert max(values) < 29 / 30 and len(values) == len(ex.THRESHOLD_GRIDS["heuristics miner"][1])
    assert list(values) == sorted(values)
    assert "0.95" in ex.NATURAL_EDGES[("majority", axis, "upper")]
