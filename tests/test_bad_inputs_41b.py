"""Issue 41 for pdrf, unrolled_gsp, causcale, bpop, syngr and dynvla: no silent wrong result, no runaway
allocation, clear errors.

The sweep (:mod:`bad_inputs`) runs every :data:`CASES` entry with the valid call and with bad versions
of each listed argument; a metric's case carries its range (and a shape), so a value outside it is a
failure, not just a non-finite one. The explicit tests below pin each item of the issue: each one
failed on the code before the fix (the docstrings give what the old code returned).
"""

from __future__ import annotations

import math
import tracemalloc

import icml26.bpop as bpop
import icml26.causcale as cz
import icml26.dynvla as dv
import icml26.pdrf as pdrf
import icml26.syngr as sg
import icml26.unrolled_gsp as ug
import numpy as np
import pytest
import torch
from bad_inputs import Case, check_case, corruptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icml26.unrolled_gsp import experiments as ug_ex

pytestmark = pytest.mark.usefixtures("one_thread")

NO_CUDA = not torch.cuda.is_available()
_g = torch.Generator().manual_seed(41)

# -- fixtures of the cases -------------------------------------------------------------------------
BPOP_TRUE = bpop.PartialOrder.from_edges([(0, 1), (1, 2)], names=[0, 1, 2, 3])
BPOP_EST = bpop.PartialOrder.from_edges([(0, 1)], names=[0, 1, 2, 3])
BPOP_P = torch.tensor([[0, .9, .8, .1], [.1, 0, .7, .2], [.2, .3, 0, .4], [.5, .5, .5, 0]], dtype=torch.float64)
BPOP_Y = [[0, 1, 2, 3], [1, 0, 2, 3], [0, 2, 1, 3], [3, 0, 1, 2]]
COUNTS = torch.tensor([[5.0, 2.0, 3.0, 40.0], [1.0, 4.0, 0.5, 10.0]], dtype=torch.float64)
TRAJ = torch.cumsum(torch.tensor([[[4.0, 0.1]] * 8, [[6.0, -0.2]] * 8]), 1).double()   # [2, 8, 2] metres
BOX = torch.tensor([0.0, 0.0, 0.0, 4.5, 1.9])
_D = torch.tensor([[0.0, 1.0, 2.0, 3.0, 2.0], [1.0, 0.0, 1.0, 2.0, 3.0], [2.0, 1.0, 0.0, 1.0, 2.0],
                   [3.0, 2.0, 1.0, 0.0, 1.0], [2.0, 3.0, 2.0, 1.0, 0.0]], dtype=torch.float64)
UG_NB = ug.knn_neighbors(_D.numpy(), 2)
_SPD = torch.tensor([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]], dtype=torch.float64)
CG_B = torch.randn(2, 3, 1, generator=_g, dtype=torch.float64)


def _spd(v):
    return torch.einsum("ij,bjh->bih", _SPD, v)


def _ece(**kw):
    return bpop.calibration(**kw)["ece"]


def _ranking(**kw):
    return {k: v for k, v in pdrf.scores_from_counts(**kw).items() if k in ("csi", "pod", "far")}


def _hss(**kw):
    return pdrf.scores_from_counts(**kw)["hss"]


def _same_shapes(out):
    return len({tuple(v.shape) for v in out.values()}) == 1


def _fast_tokens(traj=TRAJ, **kw):
    return dv.FastLite(**kw).encode(traj).astype(float)      # float, so that the sweep sees the range


def _ranks(**kw):
    return sg.ranks_from_beams(**kw).astype(float)


def _shd(**kw):
    return float(cz.shd(**kw))


def _cg(**kw):
    return ug.cg_solve(_spd, **kw)


CASES = [
    # metrics with a range
    Case("bpop.calibration (ECE)", _ece, dict(edge_prob=BPOP_P, true_po=BPOP_TRUE, bins=4),
         args=("edge_prob", "true_po", "bins"), range=(0.0, 1.0)),
    Case("bpop.execution_validity", bpop.execution_validity,
         dict(est_po=BPOP_EST, true_po=BPOP_TRUE, n_runs=20, seed=0), args=("est_po", "true_po", "n_runs", "seed"),
         range=(0.0, 1.0), shape=lambda out: isinstance(out, float)),
    Case("bpop.closure_recall", bpop.closure_recall, dict(true_po=BPOP_TRUE, est_po=BPOP_EST),
         args=("true_po", "est_po"), range=(0.0, 1.0)),
    Case("bpop.edge_metrics", lambda **kw: {k: v for k, v in bpop.edge_metrics(**kw).items() if k != "shd"},
         dict(true_po=BPOP_TRUE, est_po=BPOP_EST), args=("true_po", "est_po"), range=(0.0, 1.0)),
    Case("pdrf.scores_from_counts (CSI, POD, FAR)", _ranking, dict(counts=COUNTS), args=("counts",),
         range=(0.0, 1.0), shape=_same_shapes),
    Case("pdrf.scores_from_counts (HSS)", _hss, dict(counts=COUNTS), args=("counts",), range=(-1.0, 1.0)),
    Case("dynvla.combine", dv.combine, dict(nc=1.0, dac=1.0, ep=0.8, ttc=1.0, c=1.0),
         args=("nc", "dac", "ep", "ttc", "c"), range=(0.0, 1.0)),
    Case("dynvla.FastLite tokens", _fast_tokens, dict(gamma=64.0, scale=(60.0, 6.0), clip=127, T=8),
         args=("gamma", "scale", "clip", "T"), range=(0.0, 255.0), shape=lambda out: out.shape == (2, 16)),
    Case("dynvla.boxes_overlap_t", dv.boxes_overlap_t, dict(a=BOX.clone(), b=BOX + torch.tensor([3.0, 0.5, 0.2, 0, 0])),
         args=("a", "b"), shape=lambda out: out.dtype == torch.bool),
    Case("syngr.ranks_from_beams", _ranks,
         dict(items=torch.tensor([[3, 1, 2], [2, 0, 1], [4, 5, 6]]), target=torch.tensor([1, 2, 0])),
         args=("items", "target"), range=(0.0, 3.0), shape=lambda out: out.shape == (3,)),
    Case("syngr.codebook_stats", sg.codebook_stats, dict(codes=torch.tensor([[0, 1], [1, 3], [2, 3], [0, 1]]), K=4),
         args=("codes", "K"), range=(0.0, 4.0)),
    Case("syngr.empirical_table", sg.empirical_table,
         dict(x1=torch.tensor([0, 1, 1, 0]), x2=torch.tensor([0, 0, 1, 1]), y=torch.tensor([0, 1, 0, 1])),
         args=("x1", "x2", "y"), range=(0.0, 1.0)),
    Case("syngr.syncat_style_table", sg.syncat_style_table, dict(n_styles=4), args=("n_styles",), range=(0.0, 1.0)),
    Case("causcale.shd", _shd, dict(pred_bin=torch.tensor([[0., 1, 0], [0, 0, 1], [0, 0, 0]]),
                                    adj=torch.tensor([[0., 1, 1], [0, 0, 0], [0, 0, 0]])),
         args=("pred_bin", "adj"), range=(0.0, 3.0)),
    Case("causcale.evaluate", lambda **kw: {k: v for k, v in cz.evaluate(**kw).items() if k in ("ap", "auroc", "oa")},
         dict(scores=torch.rand(4, 4, generator=_g), adj=torch.triu(torch.ones(4, 4), 1), threshold=0.5),
         args=("scores", "adj", "threshold"), range=(0.0, 1.0)),
    Case("unrolled_gsp.distance_spatial_weights", ug.distance_spatial_weights, dict(dist=_D.clone(), neighbors=UG_NB),
         args=("dist", "neighbors"), range=(0.0, 1.0),
         shape=lambda out: out.shape == (1, 1, 5, UG_NB.shape[1], 1) and bool((out.sum(3) > 0).all())),
    Case("unrolled_gsp.cg_solve", _cg, dict(b=CG_B.clone(), x0=torch.zeros_like(CG_B), tol=1e-12, maxiter=50),
         args=("b", "x0", "tol", "maxiter"), shape=lambda out: out.shape == (2, 3, 1)),
    Case("unrolled_gsp.decaying_temporal_weights", ug.decaying_temporal_weights, dict(T=6, N=3, V=2, decay=0.5),
         args=("T", "N", "V", "decay"), range=(0.0, 1.0)),
    # generators, helpers
    Case("pdrf.embedded_ring", lambda **kw: pdrf.embedded_ring(**kw)[0],
         dict(n=8, dim=4, n_modes=4, radius=2.0, std=0.1), args=("n", "dim", "n_modes", "radius", "std")),
    Case("pdrf.sliced_wasserstein", pdrf.sliced_wasserstein,
         dict(x=torch.randn(16, 3, generator=_g), y=torch.randn(16, 3, generator=_g), n_proj=8),
         args=("x", "y", "n_proj"), range=(0.0, math.inf)),
    Case("bpop.frontier_executions", bpop.frontier_executions, dict(po=BPOP_TRUE, n_runs=5, seed=0),
         args=("po", "n_runs", "seed"), shape=lambda out: out.shape == (5, 4)),
    Case("causcale.sample_linear_scm_batch", cz.sample_linear_scm_batch,
         dict(batch=1, n_nodes=4, n_samples=10, expected_degree=1.0, noise_coeff=0.4, device="cpu"),
         args=("batch", "n_nodes", "n_samples", "expected_degree", "noise_coeff", "device")),
    Case("dynvla.group_advantages (eps)", dv.group_advantages,
         dict(rewards=torch.tensor([[0.2, 0.5, 0.9]]), eps=1e-6), args=("rewards", "eps")),
    # config objects: NaN, out of range, wrong kind
    Case("bpop.MCMCConfig", bpop.MCMCConfig,
         dict(K=2, n_iter=100, burn_in=0.5, thin=10, n_chains=1, eps=0.05, step_U=0.5, rho_d=0.9, beta_step=0.3,
              rho_prior_b=1 / 6, beta_prior=(2.0, 2.0), init="realizer", utility="uniform", likelihood="bpop",
              seed=0, device="cpu", keep_closures=False, dtype="float64"),
         args=("K", "n_iter", "burn_in", "thin", "n_chains", "eps", "step_U", "rho_d", "beta_step", "rho_prior_b",
               "beta_prior", "init", "utility", "likelihood", "seed", "device", "keep_closures", "dtype")),
    Case("bpop.BpopPreset", bpop.BpopPreset, dict(n_iter=300, n_chains=1, eps_infer=0.05, workers=4),
         args=("n_iter", "n_chains", "eps_infer", "workers")),
    Case("pdrf.RadarConfig", pdrf.RadarConfig,
         dict(H=16, W=16, t_in=2, t_out=2, margin=4, n_cells=(1, 2), birth_prob=0.04, bg_sigma=4.0, bg_decay=0.99),
         args=("H", "W", "t_in", "t_out", "n_cells", "birth_prob", "bg_sigma", "bg_decay")),
    Case("pdrf.PDRFPreset", pdrf.PDRFPreset, dict(steps=4, lr=1e-3, t_eps=0.05, lambda_phy=0.1),
         args=("steps", "lr", "t_eps", "lambda_phy")),
    Case("unrolled_gsp.UnrolledGSPPreset", ug.UnrolledGSPPreset, dict(n_nodes=12, lr=5e-3, admm_rho=1.0, epochs=1),
         args=("n_nodes", "lr", "admm_rho", "epochs")),
    Case("causcale.CauScalePreset", cz.CauScalePreset, dict(embed_dim=16, lr=1e-3, steps_full=12),
         args=("embed_dim", "lr", "steps_full")),
    Case("syngr.SynGRPreset", sg.SynGRPreset, dict(n_items=200, lr=6e-3, dropout=0.1, beam=10),
         args=("n_items", "lr", "dropout", "beam")),
    Case("syngr.CatalogueConfig", sg.CatalogueConfig, dict(n_items=50, n_styles=4, noise=0.15, amp_text=(2.0, 3.0, 1.5)),
         args=("n_items", "n_styles", "noise", "amp_text")),
    Case("syngr.InteractionConfig", sg.InteractionConfig,
         dict(n_users=10, min_len=4, max_len=6, beta_cat=2.0, beta_style=4.0, beta_series=2.0),
         args=("n_users", "min_len", "max_len", "beta_cat", "beta_style", "beta_series")),
    Case("syngr.TrainConfig", sg.TrainConfig,
         dict(epochs=1, batch_size=8, lr=1e-3, weight_decay=0.01, eval_every=1, beam=4, max_steps=0, seed=0,
              device="cpu"),
         args=("epochs", "batch_size", "lr", "weight_decay", "eval_every", "beam", "max_steps", "seed", "device")),
    Case("dynvla.SFTConfig", dv.SFTConfig, dict(epochs=2, batch=16, lr=1e-3, lambda_act=1.0, max_steps=10),
         args=("epochs", "batch", "lr", "lambda_act", "max_steps")),
    Case("dynvla.PDMSConfig", dv.PDMSConfig, dict(w_ep=5.0, w_ttc=5.0, w_c=2.0, ttc_offsets=(0.3, 0.6),
                                                  progress_threshold=5.0, smooth=15),
         args=("w_ep", "w_ttc", "w_c", "ttc_offsets", "progress_threshold", "smooth")),
    Case("dynvla.DynTokConfig", dv.DynTokConfig, dict(d_model=16, heads=2, m_ego=8, w_bev=0.1, w_vq=1.0, beta_commit=0.25,
                                                      use_bev=True),
         args=("d_model", "heads", "m_ego", "w_bev", "w_vq", "beta_commit", "use_bev")),
    Case("dynvla.RasterConfig", dv.RasterConfig, dict(H=32, W=16, cell_long=2.0, cell_lat=1.0, ego_row=25),
         args=("H", "W", "cell_long", "cell_lat", "ego_row")),
    Case("dynvla.DynVLAPreset", dv.DynVLAPreset, dict(n_scenes=100, tok_lr=2e-3, sft_lr=2e-3, group_size=8),
         args=("n_scenes", "tok_lr", "sft_lr", "group_size")),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_valid_call_works(case):
    check_case(case, case.args[0], case.valid[case.args[0]])


@pytest.mark.parametrize("case", CASES, ids=str)
@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bad_input_is_refused_by_name_or_gives_a_finite_result(case, data):
    name = data.draw(st.sampled_from(case.args), label="argument")
    bad = data.draw(corruptions(case.valid[name], nonfinite=case.nonfinite), label="bad value")
    check_case(case, name, bad)


# -- bpop ------------------------------------------------------------------------------------------
def test_bpop_run_mcmc_refuses_a_run_that_keeps_no_sample():
    """Before: ``run_mcmc(Y, 4, MCMCConfig(n_iter=10, thin=100, n_chains=1))`` returned an all-zero
    edge_prob with ``beta.shape == (1, 0)``."""
    for kw in (dict(n_iter=10, thin=100), dict(n_iter=100, thin=60, burn_in=0.7)):
        with pytest.raises(ValueError, match="thin"):
            bpop.run_mcmc(BPOP_Y, 4, bpop.MCMCConfig(n_chains=1, **kw), progress=False)
    # the smallest run that keeps one sample is accepted and its posterior is a probability
    post = bpop.run_mcmc(BPOP_Y, 4, bpop.MCMCConfig(n_iter=20, thin=10, burn_in=0.5, n_chains=1), progress=False)
    assert post.beta.shape == (1, 2) and 0 <= post.edge_prob.min() and post.edge_prob.max() <= 1
    assert bpop.MCMCConfig(n_iter=20, thin=10, burn_in=0.5).n_saved_post_burn() == 1


def test_bpop_batched_likelihood_builds_beta_in_float64():
    """Before: a Python-float beta went through float32 (``torch.as_tensor(beta)``): 2.4e-7 off the loop."""
    po = bpop.cloud_iac("slb_ecs_rds")
    Y = bpop.softmax_traces(po, 20, 1.0, 0.05, seed=0)
    R, ch, C = bpop.remaining_tensor(Y), bpop.chosen_tensor(Y), torch.as_tensor(po.closure)
    for beta in (1.3, 0.7, np.float64(2.1)):
        batched = float(bpop.batched_log_likelihood(R, C, beta, 0.05, ch))
        loop = sum(bpop.trace_log_likelihood(y, po, float(beta), 0.05) for y in Y)
        assert abs(batched - loop) < 1e-12 * max(1.0, abs(loop)) * 10, (beta, batched - loop)


def test_bpop_calibration_and_execution_validity_refuse_out_of_range_input():
    """Before: ``calibration`` of probabilities 5.0 gave ECE 4.75; ``execution_validity`` with orders
    of different sizes returned 1.0."""
    with pytest.raises(ValueError, match="edge_prob"):
        bpop.calibration(np.full((4, 4), 5.0), BPOP_TRUE)
    with pytest.raises(ValueError, match="edge_prob"):
        bpop.calibration(np.full((3, 3), 0.5), BPOP_TRUE)          # a 3 x 3 table for 4 actions
    three = bpop.PartialOrder.from_edges([(0, 1)], names=[0, 1, 2])
    with pytest.raises(ValueError, match="est_po"):
        bpop.execution_validity(three, BPOP_TRUE)
    with pytest.raises(ValueError, match="true_po"):
        bpop.closure_recall(BPOP_TRUE, three)
    assert 0.0 <= bpop.calibration(BPOP_P.numpy(), BPOP_TRUE)["ece"] <= 1.0


def test_bpop_config_device_and_nan_fields():
    with pytest.raises(ValueError, match="beta_prior"):
        bpop.MCMCConfig(beta_prior=(math.nan, 2.0))
    with pytest.raises(ValueError, match="step_U"):
        bpop.MCMCConfig(step_U=math.inf)
    with pytest.raises(ValueError, match="device"):
        bpop.MCMCConfig(device="gpu0")
    if NO_CUDA:
        with pytest.raises(ValueError, match="device"):      # before: AssertionError inside torch
            bpop.MCMCConfig(device="cuda")


# -- pdrf ------------------------------------------------------------------------------------------
def test_pdrf_scores_refuse_negative_counts():
    """Before: counts (5, -2, -2, 1) gave CSI 5.0."""
    with pytest.raises(ValueError, match="counts"):
        pdrf.scores_from_counts(torch.tensor([[5.0, -2.0, -2.0, 1.0]]))
    with pytest.raises(ValueError, match="counts"):
        pdrf.scores_from_counts(torch.tensor([[5.0, math.nan, 2.0, 1.0]]))
    s = pdrf.scores_from_counts(COUNTS)
    for k in ("csi", "pod", "far"):
        assert bool(((s[k] >= 0) & (s[k] <= 1)).all()), k


def test_pdrf_generator_and_device_strings_are_clear_errors():
    """Before: ``generator="cuda"`` raised AttributeError ('str' has no attribute 'device') and
    ``device="cuda"`` on a CPU-only torch an AssertionError."""
    cfg = pdrf.RadarConfig(H=16, W=16, t_in=2, t_out=2, margin=4)
    with pytest.raises(TypeError, match="generator"):
        pdrf.generate_radar(2, cfg, generator="cuda")
    with pytest.raises(ValueError, match="device"):
        pdrf.generate_radar(2, cfg, device="tpu")
    if NO_CUDA:
        with pytest.raises(ValueError, match="device"):
            pdrf.generate_radar(2, cfg, device="cuda")
    model = pdrf.CondUNet(2, 2, base=8, mults=(1, 2))
    x = torch.rand(2, 2, 8, 8, generator=_g)
    with pytest.raises(TypeError, match="generator"):
        pdrf.pdrf_loss(model, x, x, x, generator="cuda")
    with pytest.raises(TypeError, match="generator"):
        pdrf.sample(model, x, x.shape, nfe=1, generator="cuda")


# -- dynvla ----------------------------------------------------------------------------------------
def test_dynvla_combine_refuses_sub_metrics_outside_the_unit_interval():
    """Before: ``combine(1, 1, 5, 1, 1)`` = 2.67."""
    with pytest.raises(ValueError, match="ep"):
        dv.combine(1, 1, 5, 1, 1)
    with pytest.raises(ValueError, match="nc"):
        dv.combine(np.array([1.0, 98.6]), 1, 1, 1, 1)       # a percentage
    assert dv.combine(1, 1, 1, 1, 1) == 1.0
    t = dv.combine(torch.tensor([1.0, 0.5]), torch.ones(2), torch.ones(2), torch.zeros(2), torch.ones(2))
    assert torch.allclose(t, torch.tensor([7 / 12, 3.5 / 12]))


def test_dynvla_fastlite_tokens_stay_in_the_vocabulary():
    """Before: ``FastLite(clip=1000)`` emitted tokens up to 2001 outside its 256-token vocabulary."""
    with pytest.raises(ValueError, match="clip"):
        dv.FastLite(clip=1000)
    with pytest.raises(ValueError, match="T"):
        dv.FastLite(T=True)
    far = TRAJ * 50                                              # clipped coefficients
    tok = dv.FastLite().encode(far)
    assert tok.min() >= 0 and tok.max() <= 255 and dv.FastLite().clipped(far).any()
    small = dv.FastLite(clip=15)
    assert small.encode(far).max() <= 31 and small.decode(small.encode(far)).shape == far.shape


def test_dynvla_sftconfig_refuses_nan_and_out_of_range_fields():
    """Before: ``SFTConfig(lr=nan)`` was accepted."""
    for kw, word in ((dict(lr=math.nan), "lr"), (dict(lr=0.0), "lr"), (dict(epochs=0), "epochs"),
                     (dict(batch=2.5), "batch"), (dict(lambda_act=-1.0), "lambda_act"),
                     (dict(max_steps=True), "max_steps")):
        with pytest.raises(ValueError, match=word):
            dv.SFTConfig(**kw)
    with pytest.raises(ValueError, match="cell_long"):
        dv.RasterConfig(cell_long=math.nan)                    # before: NaN passed "<= 0"
    with pytest.raises(ValueError, match="w_bev"):
        dv.DynTokConfig(w_bev=math.nan)
    with pytest.raises(ValueError, match="max_agents"):
        dv.WorldConfig(max_agents=None)                        # before: TypeError from '<' without the name
    with pytest.raises(ValueError, match="smooth"):
        dv.PDMSConfig(smooth=4)


def test_dynvla_nan_box_is_not_an_overlap():
    """Before: a box with a NaN coordinate 100 m away counted as overlapping (every comparison False)."""
    far = torch.tensor([100.0, 0.0, 0.0, 4.5, 1.9])
    assert not bool(dv.boxes_overlap_t(BOX, far))
    bad = BOX.clone()
    bad[0] = math.nan
    with pytest.raises(ValueError, match="a"):
        dv.boxes_overlap_t(bad, far)
    with pytest.raises(ValueError, match="b"):
        dv.boxes_overlap_t(far, bad)
    with pytest.raises(ValueError, match="b"):
        dv.boxes_overlap(BOX.numpy(), bad.numpy())


def test_dynvla_device_and_generator_strings():
    space = dv.TokenSpace()
    with pytest.raises(TypeError, match="generator"):
        dv.generate(None, (torch.zeros(1, 6, 32, 16), torch.zeros(1)), "none", space, greedy=False, generator="cuda")
    with pytest.raises(ValueError, match="temperature"):
        dv.generate(None, (torch.zeros(1, 6, 32, 16), torch.zeros(1)), "none", space, temperature=math.nan)


# -- syngr -----------------------------------------------------------------------------------------
def test_syngr_ranks_from_beams_does_not_broadcast_the_target():
    """Before: a length-1 target was broadcast to every row: ranks [1, 2] for one target."""
    items = torch.tensor([[1, 2], [3, 1]])
    with pytest.raises(ValueError, match="target"):
        sg.ranks_from_beams(items, torch.tensor([1]))
    with pytest.raises(TypeError, match="target"):
        sg.ranks_from_beams(items, torch.tensor([1.0, 3.0]))
    assert sg.ranks_from_beams(items, torch.tensor([2, 5])).tolist() == [2, 0]


def test_syngr_codebook_stats_refuses_codes_outside_the_codebook():
    """Before: codes 5 and 7 with K = 4 gave usage [0.5, 0.25] (codes >= K were counted)."""
    with pytest.raises(ValueError, match="codes"):
        sg.codebook_stats(np.array([[0, 5], [1, 7]]), 4)
    with pytest.raises(ValueError, match="codes"):
        sg.codebook_stats(np.array([[0, -1], [1, 2]]), 4)
    with pytest.raises(TypeError, match="codes"):
        sg.codebook_stats(np.array([[0.5, 1.0]]), 4)
    st_ = sg.codebook_stats(np.array([[0, 1], [1, 3]]), 4)
    assert st_["usage"] == [0.5, 0.5] and st_["collision_rate"] == 0.0


def test_syngr_empirical_table_refuses_a_runaway_allocation():
    """Before: ``empirical_table([10**9], [0], [0])`` allocated a 7.45 GiB table. Now the bytes are
    estimated first and a table above 256 MiB is a ValueError naming the argument; nothing big is
    allocated."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="x1"):
            sg.empirical_table([10**9], [0], [0])
        with pytest.raises(ValueError, match="y"):
            sg.empirical_table([3, 1], [0, 2], [10**7, 5])
        with pytest.raises(ValueError, match="n_styles"):
            sg.syncat_style_table(10**4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    from icml26.syngr._checks import MAX_TABLE_BYTES
    assert MAX_TABLE_BYTES == 256 * 2**20
    p = sg.empirical_table([0, 1, 4], [0, 0, 1], [1, 0, 1])      # a small, sparse label still works
    assert p.shape == (5, 2, 2) and abs(p.sum() - 1) < 1e-12


def test_syngr_configs_refuse_nan_and_device_strings():
    with pytest.raises(ValueError, match="weight_decay"):
        sg.TrainConfig(weight_decay=math.nan)                 # before: accepted
    with pytest.raises(ValueError, match="amp_text"):
        sg.CatalogueConfig(amp_text=(2.0, math.nan, 1.5))     # before: accepted
    with pytest.raises(ValueError, match="beta_cat"):
        sg.InteractionConfig(beta_cat="2")                    # before: TypeError inside np.isfinite
    with pytest.raises(TypeError, match="use_uni_nll"):
        sg.SynGRConfig(use_uni_nll="no")
    with pytest.raises(ValueError, match="device"):
        sg.TrainConfig(device="gpu")
    if NO_CUDA:
        with pytest.raises(ValueError, match="device"):
            sg.TrainConfig(device="cuda")


# -- causcale --------------------------------------------------------------------------------------
def test_causcale_shd_refuses_probabilities():
    """Before: ``shd`` of a matrix of probabilities 0.3 against the empty graph counted every pair (3)."""
    with pytest.raises(ValueError, match="pred_bin"):
        cz.shd(np.full((3, 3), 0.3), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="adj"):
        cz.shd(np.zeros((3, 3)), np.full((3, 3), 0.7))
    with pytest.raises(ValueError, match="pred_bin"):
        cz.break_cycles_greedy(np.full((3, 3), 0.6), np.zeros((3, 3)))
    assert cz.shd(np.array([[0, 1], [0, 0]]), np.array([[0, 0], [1, 0]])) == 1


def test_causcale_generator_device_and_rng():
    with pytest.raises(TypeError, match="generator"):
        cz.sample_linear_scm_batch(1, 4, 10, 1.0, generator="cuda")
    with pytest.raises(ValueError, match="device"):
        cz.sample_linear_scm_batch(1, 4, 10, 1.0, device="tpu")
    if NO_CUDA:
        with pytest.raises(ValueError, match="device"):
            cz.sample_linear_scm_batch(1, 4, 10, 1.0, device="cuda")
    with pytest.raises(ValueError, match="rng"):
        cz.sample_dag(6, 1.0, rng=-1)                         # before: numpy's error without the name
    with pytest.raises(TypeError, match="expected_degree"):
        cz.sample_dag(6, None)


# -- unrolled_gsp ----------------------------------------------------------------------------------
def test_unrolled_gsp_equal_distances_give_a_graph():
    """Before: equal distances made the kernel width (their std) zero and the graph all zeros."""
    d = np.ones((5, 5))
    np.fill_diagonal(d, 0.0)
    nb = ug.knn_neighbors(d, 2)
    w = ug.distance_spatial_weights(d, nb)
    valid = (nb >= 0)[None, None, :, :, None].expand_as(w)
    assert bool((w[valid] > 0).all()) and bool((w[~valid] == 0).all())
    dense = torch.zeros(5, 5, dtype=w.dtype)
    dense[torch.arange(5)[:, None].expand_as(nb)[nb >= 0], nb[nb >= 0]] = w[0, 0, :, :, 0][nb >= 0]
    assert torch.allclose(dense, dense.T)                      # symmetric, as CG needs
    with pytest.raises(ValueError, match="dist"):
        ug.distance_spatial_weights(np.zeros((5, 5)), nb)
    with pytest.raises(ValueError, match="dist"):
        ug.distance_spatial_weights(d[:4, :4], nb)


def test_unrolled_gsp_cg_solve_refuses_a_non_spd_operator():
    """Before: ``cg_solve`` with an indefinite operator returned NaN."""
    b = torch.ones(1, 2, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="A"):
        ug.cg_solve(lambda v: v * torch.tensor([1.0, -1.0], dtype=torch.float64).view(1, 2, 1), b, torch.zeros_like(b))
    with pytest.raises(ValueError, match="A"):
        ug.cg_solve(lambda v: -v, b, torch.zeros_like(b))
    x = ug.cg_solve(_spd, CG_B, torch.zeros_like(CG_B))
    ref = torch.linalg.solve(_SPD, CG_B[..., 0].T).T[..., None]
    assert torch.allclose(x, ref, atol=1e-10)


def test_unrolled_gsp_device_strings():
    model = torch.nn.Linear(2, 2)
    if NO_CUDA:
        with pytest.raises(ValueError, match="device"):
            ug_ex.train_forecaster(model, {}, device="cuda")
    with pytest.raises(ValueError, match="device"):
        ug_ex.train_forecaster(model, {}, device="tpu")


def test_unrolled_gsp_evaluation_flags():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match="val_curve"):
        ug_ex.train_forecaster(model, {}, val_curve="no")
    with pytest.raises(ValueError, match="val_curve"):
        ug_ex.train_forecaster(model, {}, keep_best=True, val_curve=False)
    for name in ("before", "val_curve"):
        with pytest.raises(TypeError, match=name):
            ug_ex.run_unrolled(None, {}, **{name: 1})
