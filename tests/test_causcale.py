"""Tests of the CauScale chapter: the spec's Sec. 8 identities (claims 1-11) and Sec. 9 bad inputs."""

from __future__ import annotations

import re
import time

import icml26.causcale as cs
import numpy as np
import pytest
import torch
from icml26.causcale import experiments as ex
from icml26.causcale import training as tr
from sklearn.metrics import average_precision_score, roc_auc_score

pytestmark = pytest.mark.usefixtures("one_thread")
CFG = cs.preset("smoke")


def _batch(n=6, m=24, seed=0):
    rng = np.random.default_rng(seed)
    return cs.collate([cs.make_task(n, m, rng=rng)])


# -- claims 1-5: attention, symmetries, reduction -----------------------------------------------
def test_tied_attention_equals_reference_and_untied_equals_sdpa():
    torch.manual_seed(0)
    z = torch.randn(2, 9, 5, 16)
    att = cs.TiedAxialAttention(16, 4, tied=True).eval()
    with torch.no_grad():
        assert (att(z) - ex.reference_tied_attention(att, z)).abs().max() < 1e-5
        un = cs.TiedAxialAttention(16, 4, tied=False).eval()
        assert (un(z) - ex.sdpa_untied_attention(un, z)).abs().max() < 1e-5
        # tied is not the average of per-row softmax maps
        assert (att(z) - ex._averaged_softmax(att, z)).abs().max() > 1e-3


def test_official_untied_scale_is_rhnij_and_differs_from_standard_attention():
    """Issue 39.1: ``untied_scaling="official"`` divides each row's logits by sqrt(d_h R) (the official
    --attn_shape rhnij), i.e. row-by-row SDPA with that scale; the default is standard attention."""
    torch.manual_seed(0)
    z = torch.randn(2, 50, 6, 16)
    att = cs.TiedAxialAttention(16, 4, tied=False, untied_scaling="official").eval()
    b, r, c, d = z.shape
    with torch.no_grad():
        q, k, v = (p(z).view(b * r, c, 4, 4).transpose(1, 2) for p in (att.q_proj, att.k_proj, att.v_proj))
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1 / (2.0 * np.sqrt(r)))
        ref = att.out_proj(ref.transpose(1, 2).reshape(b, r, c, d))
        assert (att(z) - ref).abs().max() < 1e-5
        off = att(z)
        att.untied_scaling = "sdpa"
        assert (att(z) - ex.sdpa_untied_attention(att, z)).abs().max() < 1e-5
        assert (att(z) - off).norm() / att(z).norm() > 1e-2
        att.tied = True   # the tied layer ignores untied_scaling
        tied_off = att(z)
        att.untied_scaling = "official"
        assert torch.equal(att(z), tied_off)
    model = tr.build_model(CFG, "untied_official")
    layers = [model.data_layers[0].attn_c, model.graph_layers[0].attn_r, model.bridges[0].axial.attn_c]
    assert all(not a.tied and a.untied_scaling == "official" for a in layers)
    assert all(not a.tied and a.untied_scaling == "sdpa" for a in
               [tr.build_model(CFG, "untied").data_layers[0].attn_c])
    out = ex.untied_scaling_checks(CFG, seeds=(0,))
    assert out["official vs sdpa(scale=1/sqrt(d_h R))"] < 1e-5 and out["relative gap"][0] > 1e-3


@pytest.mark.parametrize("reduction", [False, True])
def test_variable_permutation_equivariance(reduction):
    b = _batch()
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    args_p = (b["x"][:, :, perm], b["interv"][:, :, perm], b["prior"][:, perm][:, :, perm])
    torch.manual_seed(1)
    mdl = cs.CauScale(16, 2, 32, 3, reduction_k=1, use_reduction=reduction).eval()
    with torch.no_grad():
        o, op = mdl(b["x"], b["interv"], b["prior"]), mdl(*args_p)
        assert (op.graph_repr[0] - o.graph_repr[0][perm][:, perm]).abs().max() < 1e-5
        p, pp = mdl.edge_probs(b["x"], b["interv"], b["prior"]), mdl.edge_probs(*args_p)
        assert (pp[0] - p[0][perm][:, perm]).abs().max() > 1e-2      # the official head is order-dependent
    torch.manual_seed(1)
    sym = cs.CauScale(16, 2, 32, 3, reduction_k=1, use_reduction=reduction, symmetric_head=True).eval()
    p, pp = sym.edge_probs(b["x"], b["interv"], b["prior"]), sym.edge_probs(*args_p)
    assert (pp[0] - p[0][perm][:, perm]).abs().max() < 1e-5


def test_sample_permutation_invariance_only_without_reduction():
    b = _batch()
    sp = torch.randperm(24, generator=torch.Generator().manual_seed(3))
    for red, check in ((False, lambda d: d < 1e-5), (True, lambda d: d > 1e-6)):
        torch.manual_seed(2)
        mdl = cs.CauScale(16, 2, 32, 3, reduction_k=1, use_reduction=red).eval()
        p = mdl.edge_probs(b["x"], b["interv"], b["prior"])
        ps = mdl.edge_probs(b["x"][:, sp], b["interv"][:, sp], b["prior"])
        assert check(float((p - ps).abs().max()))


def test_padding_does_not_change_the_prediction():
    rng = np.random.default_rng(0)
    items = [cs.make_task(6, 24, rng=rng), cs.make_task(4, 24, rng=rng)]
    torch.manual_seed(0)
    mdl = cs.CauScale(16, 2, 32, 2, reduction_k=1).eval()
    b, s = cs.collate(items), cs.collate(items[1:])
    p = mdl.edge_probs(b["x"], b["interv"], b["prior"], b["node_mask"])
    q = mdl.edge_probs(s["x"], s["interv"], s["prior"], s["node_mask"])
    assert (p[1, :4, :4] - q[0]).abs().max() < 1e-5
    assert p[1, 4:].abs().max() == 0


def test_reduction_unit_and_schedule():
    h = torch.randn(2, 7, 3, 4)
    out = cs.ReductionUnit(2)(h)
    assert out.shape == (2, 3, 3, 4)
    assert torch.equal(out, (h[:, 0:6:2] + h[:, 1:6:2]) / 2)
    assert cs.reduction_schedule(1000, 10, 2, 2) == [1000, 1000, 500, 500, 250, 250, 125, 125, 62, 62]
    assert cs.reduction_schedule(1000, 10, 2, 2, "code") == [1000, 1000, 1000, 500, 500, 250, 250, 125, 125, 62]
    lin, quad = cs.predicted_reduction_factor(1000, 10, 2, 2)
    assert lin == pytest.approx(0.3874) and quad == pytest.approx(0.2663938)
    mdl = cs.CauScale(8, 2, 16, 4, reduction_k=2, reduction_r=2)
    assert mdl.schedule(16) == [16, 16, 8, 8]


# -- claim 7: labels ----------------------------------------------------------------------------
def test_pair_labels_and_probability_round_trip():
    adj = torch.tensor([[[0, 1, 0], [0, 0, 0], [1, 1, 0]]])
    iu = torch.triu_indices(3, 3, 1)
    assert cs.pair_labels(adj, iu).tolist() == [[1, 2, 2]]      # (0,1): 0->1; (0,2): 2->0; (1,2): 2->1
    logits = torch.full((1, 3, 3), -30.0)
    logits[0, torch.arange(3), cs.pair_labels(adj, iu)[0]] = 30.0
    assert torch.allclose(cs.pair_probs_to_matrix(logits, iu, 3), adj.float(), atol=1e-6)
    assert float(cs.causcale_loss(logits, adj, iu)) < 1e-6


# -- claim 8: metrics ---------------------------------------------------------------------------
def test_metrics_match_sklearn_and_oracles():
    rng = np.random.default_rng(0)
    off = ~np.eye(8, dtype=bool)
    for trial in range(20):
        s = rng.random((8, 8)) if trial % 2 else np.round(rng.random((8, 8)), 1)   # with ties
        a = (rng.random((8, 8)) < 0.3).astype(int)
        np.fill_diagonal(a, 0)
        a[0, 1] = 1
        assert abs(cs.average_precision(s, a) - average_precision_score(a[off], s[off])) < 1e-12
        assert abs(cs.auroc(s, a) - roc_auc_score(a[off], s[off])) < 1e-12
    dag = np.triu((rng.random((10, 10)) < 0.3).astype(int), 1)
    assert cs.average_precision(dag + dag.T, dag) == pytest.approx(0.5)
    assert cs.average_precision(dag, dag) == 1.0
    assert cs.orientation_accuracy(dag + dag.T, dag) == 0.5
    assert cs.shd(dag.T, dag) == dag.sum()                     # each reversed edge counts once
    assert cs.shd(dag, dag) == 0


def test_symmetric_baselines_cannot_orient():
    t = cs.make_task(8, 90, rng=np.random.default_rng(3))
    for s in (cs.corr_scores(t["x"]), cs.invcov_scores(t["x_raw"])):
        assert np.array_equal(s, s.T)
        assert cs.orientation_accuracy(s, t["adj"]) == 0.5


def test_official_oa_and_shd_conventions():
    """Issue 39.2: a tie counts 1/2 (book) or 0 (official) in OA; a 2-cycle on a non-edge counts 1
    (book, unordered pairs) or 2 (official shd_metric); a reversed edge counts once in both."""
    a = np.zeros((4, 4), dtype=int)
    a[0, 1] = a[1, 2] = 1
    sym = a + a.T + 0.0
    assert cs.orientation_accuracy(sym, a) == 0.5 and cs.orientation_accuracy(sym, a, ties="zero") == 0.0
    s = np.zeros((4, 4))
    s[0, 1], s[2, 1] = 0.9, 0.8            # edge 0->1 right, edge 1->2 reversed
    assert cs.orientation_accuracy(s, a, ties="zero") == cs.orientation_accuracy(s, a) == 0.5
    rev = a.copy()
    rev[1, 2], rev[2, 1] = 0, 1            # one reversed edge
    assert cs.shd(rev, a) == cs.shd(rev, a, convention="official") == 1
    cyc = a.copy()
    cyc[2, 3] = cyc[3, 2] = 1              # a 2-cycle on a non-edge
    assert cs.shd(cyc, a) == 1 and cs.shd(cyc, a, convention="official") == 2
    both = a.copy()
    both[1, 0] = 1                         # a 2-cycle on a true edge
    assert cs.shd(both, a) == cs.shd(both, a, convention="official") == 1
    ev = cs.evaluate(sym / 2, a)
    assert ev["oa"] == 0.5 and ev["oa_official"] == 0.0 and ev["shd_official"] >= ev["shd"]
    with pytest.raises(ValueError, match="ties"):
        cs.orientation_accuracy(sym, a, ties="random")
    with pytest.raises(ValueError, match="convention"):
        cs.shd(rev, a, convention="cdt")


def test_invcov_symmetrisation_is_tie_honest():
    """Issue 39.2: the book's INVCOV is exactly symmetric (every pair a tie); without symmetrisation
    pinv's round-off breaks the ties, which can move AP but orients nothing systematically."""
    t = cs.make_task(10, 200, rng=np.random.default_rng(3))
    s, raw = cs.invcov_scores(t["x_raw"]), cs.invcov_scores(t["x_raw"], symmetrize=False)
    assert np.array_equal(s, s.T) and not np.array_equal(raw, raw.T)
    assert np.abs(s - raw).max() < 1e-9 * np.abs(raw).max()
    assert cs.orientation_accuracy(s, t["adj"], ties="zero") == 0.0
    with pytest.raises(TypeError, match="symmetrize"):
        cs.invcov_scores(t["x_raw"], symmetrize="yes")


def test_official_scale_free_generator_is_sparser():
    """Issue 39.3: sf_official samples parents with replacement from the sink end: a DAG with fewer
    edges and smaller hubs than the book's sf on average (same sizes and degrees)."""
    rng_a, rng_b = np.random.default_rng(0), np.random.default_rng(0)
    book = [cs.sample_dag(50, 2.0, "sf", rng=rng_a) for _ in range(60)]
    off = [cs.sample_dag(50, 2.0, "sf_official", rng=rng_b) for _ in range(60)]
    for a in off:
        assert a.trace() == 0 and np.allclose(np.linalg.matrix_power(a.astype(float), 50), 0)   # acyclic
    assert np.mean([a.sum() for a in off]) < np.mean([a.sum() for a in book])
    assert np.mean([a.sum(1).max() for a in off]) < np.mean([a.sum(1).max() for a in book])
    stats = ex.sf_graph_stats(CFG, n=20, n_graphs=10)
    assert set(stats.generator) == {"sf", "sf_official"} and (stats.edges > 0).all()


def test_cpu_seconds_measure_the_process_clock():
    """Issue 39.4: timings are CPU seconds of this process (time.process_time), not wall time."""
    assert ex.cpu_seconds(lambda: time.sleep(0.05), warmup=0, repeat=1) < 0.02
    assert ex.cpu_seconds(lambda: sum(range(200_000)), warmup=0, repeat=1) > 0


def test_comparisons_follow_the_protocol():
    """The headline and ablation comparisons pair CauScale with its baselines over the training seeds,
    INVCOV as the control row, every row costed and either tuned or saying why not."""
    import pandas as pd

    seeds = [0, 1, 2, 3, 4]
    res = pd.DataFrame([{"seed": s, "model": mdl, "step": st, "cell": "c", "mAP": 0.6 + 0.01 * s - 0.2 * (mdl != "CauScale"),
                         "oa": 0.8, "auroc": 0.9, "shd": 3.0}
                        for s in seeds for mdl, st in (("CauScale", CFG.steps_full), ("CauScale", CFG.steps_ablation),
                                                       ("no prior", CFG.steps_ablation),
                                                       ("untied, per-row scale", CFG.steps_ablation))])
    base = pd.DataFrame([{"cell": "c", "method": m, "ap": ap, "oa": 0.5} for m, ap in (("INVCOV", 0.4), ("CORR", 0.3))])
    cmp = ex.structure_comparison(CFG, res, base, "c", seeds)
    assert cmp.problems(["CauScale", "INVCOV"], scale="book") == []
    assert cmp.rows["INVCOV"].control and round(cmp.diff("CauScale", "INVCOV").mean, 6) == 0.22
    abl = ex.ablation_comparison(CFG, res, base, "c", seeds)
    assert set(abl.rows) == {"CauScale", "no prior", "untied, per-row scale", "INVCOV"}
    assert abl.problems(["CauScale", "no prior"], scale="book") == []


def test_break_cycles_greedy():
    pred = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    scores = np.array([[0, 0.9, 0], [0, 0, 0.8], [0.6, 0, 0]])
    dag, removed = cs.break_cycles_greedy(pred, scores)
    assert removed == 1 and dag[2, 0] == 0 and dag.sum() == 2


# -- claim 9: population precision and moral edges ----------------------------------------------
def test_population_precision_and_moral_edge():
    rng = np.random.default_rng(0)
    adj = cs.sample_dag(6, 2.0, rng=rng)
    w = adj * rng.uniform(0.25, 1, (6, 6)) * rng.choice([-1, 1], (6, 6))
    omega = rng.uniform(0.5, 2.0, 6)
    inv = np.linalg.inv(np.eye(6) - w)
    cov = inv.T @ np.diag(omega) @ inv                          # x = x W + e  =>  x = e (I - W)^{-1}
    assert np.abs(np.linalg.inv(cov) - cs.population_precision(w, omega)).max() < 1e-10
    collider = np.zeros((3, 3))
    collider[0, 2] = collider[1, 2] = 1.0
    theta = cs.population_precision(collider, np.ones(3))
    assert theta[0, 1] == pytest.approx(1.0)
    assert cs.moral_graph(collider)[0, 1] == 1


# -- claim 10: attention memory formula ---------------------------------------------------------
@pytest.mark.parametrize("tied", [True, False])
def test_attention_memory_formula_matches_layer(tied):
    for m, n in ((12, 5), (7, 9)):
        assert ex.layer_map_count(m, n, 8, 2, tied) == cs.attention_map_floats(m, n, 2, tied)
    layer = cs.AxialLayer(8, 2, 16, tied=tied)
    _, (a, b) = layer(torch.randn(1, 6, 6, 8), return_attn=True)
    assert a.numel() + b.numel() == cs.attention_map_floats(6, 6, 2, tied, stream="graph")
    assert cs.attention_map_floats(1000, 500, 16, False) * 4 == pytest.approx(48e9, rel=0.01)
    assert cs.attention_map_floats(1000, 500, 16, True) * 4 == pytest.approx(80e6, rel=0.01)


# -- claim 11: NOTEARS ------------------------------------------------------------------------
def test_notears_recovers_a_chain():
    rng = np.random.default_rng(0)
    x = np.zeros((2000, 5))
    x[:, 0] = rng.standard_normal(2000)
    for j in range(1, 5):
        x[:, j] = 1.0 * x[:, j - 1] + rng.standard_normal(2000)
    w = cs.notears_linear(x, lambda1=0.1, w_threshold=0.3)
    assert np.array_equal((w != 0).astype(int), np.eye(5, k=1, dtype=int))


# -- data ----------------------------------------------------------------------------------------
def test_simulate_scm_regimes_and_mechanisms():
    rng = np.random.default_rng(0)
    adj = cs.sample_dag(5, 1.5, "sf", rng=rng)
    for mech in ("linear", "nn", "nn_add", "sigmoid_add", "polynomial"):
        d = cs.simulate_scm(adj, 60, mechanism=mech, rng=rng)
        assert d.x.shape == (60, 5) and np.all(np.isfinite(d.x))
        assert np.allclose(d.x.mean(0), 0, atol=1e-10) and np.allclose(d.x.std(0), 1)
        sizes = cs.regime_sizes(60, 5)
        assert sizes.tolist() == [10, 10, 10, 10, 10, 10]
        assert np.array_equal(d.interv_mask.sum(0), sizes[1:])
        assert np.all(np.diff(d.regime) >= 0)                   # stored regime by regime
        tgt = d.regime >= 0
        assert np.all(np.abs(d.x_raw[tgt, d.regime[tgt]]) <= 1)


def test_er_graph_density_and_vectorised_linear_generator():
    rng = np.random.default_rng(1)
    edges = np.mean([cs.sample_dag(20, 2.0, "er", rng=rng).sum() for _ in range(200)])
    assert abs(edges - 40) < 3
    edges_sf = np.mean([cs.sample_dag(20, 2.0, "sf", rng=rng).sum() for _ in range(200)])
    assert abs(edges_sf - 40) < 4
    out = cs.sample_linear_scm_batch(3, 6, 40, 1.5, generator=torch.Generator().manual_seed(0))
    eye = torch.eye(6, dtype=torch.float64)
    for s in range(40):
        r = int(out["regime"][s])
        w = out["weights"].clone()
        if r >= 0:
            w[:, :, r] = 0
        res = torch.einsum("bi,bij->bj", out["x_raw"][:, s], eye - w) - out["e"][:, s]
        assert res.abs().max() < 1e-10
    for k in range(3):
        assert cs.data._is_dag(out["adj"][k].numpy().astype(int))


def test_pc_wrapper_reads_causallearn_encoding():
    g = np.array([[0, -1, 0], [1, 0, -1], [0, -1, 0]])          # 0 -> 1 (G[1,0]=1, G[0,1]=-1); 1 - 2
    s = cs.causallearn_to_scores(g)
    assert s[0, 1] == 1 and s[1, 0] == 0 and s[1, 2] == 0.5 and s[2, 1] == 0.5
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3000, 3))
    x[:, 2] = x[:, 0] + x[:, 1] + 0.5 * rng.standard_normal(3000)   # collider 0 -> 2 <- 1
    p = cs.pc_baseline(x, alpha=0.01)
    assert p[0, 2] == 1 and p[1, 2] == 1 and p[2, 0] == 0 and p[0, 1] == 0


def test_training_reduces_the_loss_smoke():
    cfg = CFG
    _, hist = tr.train_variant(cfg, "full", 0, 12, progress=False)
    assert np.mean(hist.losses[-4:]) < np.mean(hist.losses[:4])
    _, hist_a = tr.train_variant(cfg, "avici", 0, 2, progress=False)
    assert np.all(np.isfinite(hist_a.losses))


# -- the shipped checkpoint ---------------------------------------------------------------------
def test_checkpoint_is_reproduced_by_its_command():
    book = cs.preset("book")
    ckpt = tr.load_checkpoint()
    if ckpt is None:
        pytest.skip("checkpoint data/causcale/causcale_book.pt not present")
    assert tr.checkpoint_matches(ckpt, book)
    readme = (tr.DEFAULT_CHECKPOINT.parent / "README.md").read_text()
    assert re.search(tr.sha256(tr.DEFAULT_CHECKPOINT), readme), "README must record the file's sha256"
    assert tr.DEFAULT_CHECKPOINT.stat().st_size < 8 * 2 ** 20     # 5 seeds x 4 models, packed float16
    assert tr.stored_seeds(ckpt, book) == book.train_seeds
    for seed in book.train_seeds:    # every variant the book compares, for every training seed
        for variant in tr.variants_for(book, seed):
            assert f"seed{seed}/{variant}@{book.steps_ablation}" in ckpt["models"]
    _, hist = tr.train_variant(book, "full", book.train_seeds[0], 3, progress=False)
    assert np.allclose(hist.losses, ckpt["losses"][f"seed{book.train_seeds[0]}/full"][:3], atol=1e-5)
    sd = tr.model_from_checkpoint(ckpt, book, "untied", book.untied_seeds[-1], book.steps_ablation).state_dict()
    assert tr.unpack_state_dict(tr.pack_state_dict(sd)).keys() == sd.keys()


# -- bad inputs (spec Sec. 9) -----------------------------------------------------------------
@pytest.mark.parametrize("call, arg", [
    (lambda: cs.sample_dag(1, 0.5), "n_nodes"),
    (lambda: cs.sample_dag(6, 0), "expected_degree"),
    (lambda: cs.sample_dag(6, 3), "expected_degree"),
    (lambda: cs.sample_dag(6, 1, "ba"), "graph_type"),
    (lambda: cs.simulate_scm(np.zeros((2, 3)), 10), "adj"),
    (lambda: cs.simulate_scm(np.full((3, 3), 0.5), 10), "adj"),
    (lambda: cs.simulate_scm(np.eye(3), 10), "adj"),
    (lambda: cs.simulate_scm(np.array([[0, 1], [1, 0]]), 10), "adj"),
    (lambda: cs.simulate_scm(np.triu(np.ones((3, 3)), 1), 3), "n_samples"),
    (lambda: cs.simulate_scm(np.triu(np.ones((3, 3)), 1), 30, mechanism="gp"), "mechanism"),
    (lambda: cs.simulate_scm(np.triu(np.ones((3, 3)), 1), 30, interventions="soft"), "interventions"),
    (lambda: cs.simulate_scm(np.triu(np.ones((3, 3)), 1), 30, noise_coeff=-1.0), "noise_coeff"),
    (lambda: cs.precision_prior(np.ones(5)), "x_raw"),
    (lambda: cs.precision_prior(np.array([[1.0, np.nan], [2.0, 3.0], [1.0, 1.0]])), "x_raw"),
    (lambda: cs.precision_prior(np.ones((1, 3))), "x_raw"),
    (lambda: cs.precision_prior(np.random.rand(5, 3), method="glasso"), "method"),
    (lambda: cs.TiedAxialAttention(10, 3), "embed_dim"),
    (lambda: cs.TiedAxialAttention(8, 2, scaling="sqrt_cols"), "scaling"),
    (lambda: cs.TiedAxialAttention(8, 2, tied=False, untied_scaling="rhnij"), "untied_scaling"),
    (lambda: cs.CauScale(8, 2, 16, 2, untied_scaling="avici"), "untied_scaling"),
    (lambda: cs.CauScale(8, 2, 16, 2, reduction_r=0), "reduction_r"),
    (lambda: cs.CauScale(8, 2, 16, 2, reduction_k=0), "reduction_k"),
    (lambda: cs.CauScale(8, 2, 16, 2, graph_scaling="sqrt"), "graph_scaling"),
    (lambda: cs.average_precision(np.random.rand(3, 3), np.zeros((3, 3))), "adj"),
    (lambda: cs.average_precision(np.random.rand(3, 4), np.zeros((3, 4))), "scores"),
    (lambda: cs.average_precision(np.random.rand(3, 3), np.eye(4)), "adj"),
    (lambda: cs.evaluate(np.random.rand(3, 3), np.eye(3, k=1), threshold=1.5), "threshold"),
])
def test_bad_inputs_raise(call, arg):
    with pytest.raises((ValueError, TypeError), match=arg):
        call()


def test_bad_model_inputs_raise():
    mdl = cs.CauScale(8, 2, 16, 2, reduction_k=1)
    b = _batch(n=4, m=8)
    x, iv, pr = b["x"], b["interv"], b["prior"]
    cases = [
        ((x[0], iv, pr, None), "x"),
        ((x, iv[:, :4], pr, None), "interv"),
        ((x, iv * 2, pr, None), "interv"),
        ((x, iv, pr[:, :3], None), "prior"),
        ((x, iv, pr, torch.tensor([[True, False, False, False]])), "node_mask"),
        ((x[:, :, :1], iv[:, :, :1], pr[:, :1, :1], None), "n >= 2"),
        ((x[:, :1], iv[:, :1], pr, None), "reduction"),
    ]
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg):
            mdl(*args)


@pytest.mark.cuda
def test_cuda_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA")
    b = _batch()
    torch.manual_seed(0)
    mdl = cs.CauScale(16, 2, 32, 3, reduction_k=1).eval()
    p_cpu = mdl.edge_probs(b["x"], b["interv"], b["prior"])
    mdl = mdl.cuda()
    p_gpu = mdl.edge_probs(*(b[k].cuda() for k in ("x", "interv", "prior"))).cpu()
    assert (p_cpu - p_gpu).abs().max() < 1e-4
    out = cs.sample_linear_scm_batch(2, 8, 40, 2.0, device="cuda")
    assert out["x"].is_cuda


# -- the referee's controls (issue 39 review): interventional orienter, untrained model ------------
def test_interventional_orienter_orients_and_rejects_bad_input():
    t = cs.make_task(8, 400, rng=np.random.default_rng(4))
    s = cs.interventional_orienter(t["x_raw"], t["interv_mask"], tau=0.1)
    assert s.shape == (8, 8) and np.all(np.diag(s) == 0) and np.all(s >= 0)
    assert cs.orientation_accuracy(s, t["adj"]) > 0.7            # reads the regimes: orients, unlike INVCOV
    assert np.allclose(s + s.T, cs.invcov_scores(t["x_raw"]))    # sigma(z) + sigma(-z) = 1
    for bad in (0.0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match="tau"):
            cs.interventional_orienter(t["x_raw"], t["interv_mask"], tau=bad)
    with pytest.raises(ValueError, match="interv_mask"):
        cs.interventional_orienter(t["x_raw"], t["interv_mask"][:, :3])


def test_orienter_tuned_on_validation_tasks_disjoint_from_test():
    cells = {"linear n=6": ex.test_tasks(CFG, 6, n_graphs=3)}
    val = ex.test_tasks(CFG, 6, n_graphs=3, validation=True)
    assert not any(np.array_equal(a["x_raw"], b["x_raw"]) for a in cells["linear n=6"] for b in val)
    df, tuned = ex.orienter_cells(CFG, cells, taus=(0.03, 0.1, 0.3))
    assert set(df.method) == {"orienter"} and len(df) == 3
    assert tuned["linear n=6"].n_configs == 3 and tuned["linear n=6"].best["tau"] in (0.03, 0.1, 0.3)


def test_untrained_control_uses_the_training_initialisation():
    cells = {"linear n=6": ex.test_tasks(CFG, 6, n_graphs=2)}
    u = ex.untrained_results(CFG, cells, [0], "cpu")
    torch.manual_seed(0)
    ref = tr.build_model(CFG, "full").eval()
    want = ex.evaluate_model(ref, cells["linear n=6"]).ap.mean()
    assert u.model.tolist() == [ex.UNTRAINED] and u.step.tolist() == [0]
    assert u.mAP.iloc[0] == pytest.approx(want, abs=1e-12)
