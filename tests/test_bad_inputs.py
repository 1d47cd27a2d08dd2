"""Bad input to the public API, swept with Hypothesis (issue 29, point 11).

Each :class:`bad_inputs.Case` is one public function with a valid call; Hypothesis draws one
argument and a bad version of it (None, a string, NaN, +-inf, empty, an extra dimension, half
precision, ...). The function must raise ValueError or TypeError naming that argument, or
return a finite result. A new chapter adds its cases to ``CASES`` (see ``tests/bad_inputs.py``).
"""

from __future__ import annotations

import icml26.ba_solver as ba
import icml26.bandpo as bp
import icml26.bpop as bpop_m
import icml26.causcale as cz
import icml26.cgmt as cg
import icml26.context_tuning as ctx  # context-tuning
import icml26.dp_c4 as dpc4
import icml26.dynvla as dynvla  # dynvla
import icml26.focusing as foc  # focusing
import icml26.paced_rl as prl
import icml26.pdrf as pdrf_m  # pdrf
import icml26.precond_delta as pd
import icml26.protein_tokens as ptok  # protein-tokens
import icml26.sfconvcnp as sfc  # sfconvcnp
import icml26.syngr as syngr  # syngr
import icml26.unrolled_gsp as ugsp
import numpy as np
import pytest
import torch
from bad_inputs import Case, check_case, corruptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icml26 import watermark as wm
from icml26.special import baselines as sp_base
from icml26.special import data as sp_data
from icml26.special import method as sp

pytestmark = pytest.mark.usefixtures("one_thread")

_gen = torch.Generator().manual_seed(0)
PDRF_NET = pdrf_m.CondUNet(2, 2, base=8, mults=(1, 2))  # pdrf
B, T = 3, 5
LOGP = -1.0 - torch.rand(B, T, generator=_gen)
N_CLIENTS, P = 4, 6
W = torch.randn(P, generator=_gen)
LOCAL = torch.randn(N_CLIENTS, P, generator=_gen)
QKV = torch.nn.functional.normalize(torch.randn(1, 8, 2, 4, generator=_gen), dim=-1)
CGMT_MODEL = cg.signal_strength_model(200, generator=torch.Generator().manual_seed(0))
BPOP_PO = bpop_m.PartialOrder.from_edges([(0, 1)], names=[0, 1, 2])
BPOP_Y = [[0, 1, 2], [2, 0, 1], [0, 2, 1]]
CAUSCALE_MODEL = cz.CauScale(8, 2, 16, 2, reduction_k=1).eval()  # causcale
_cz_gen = torch.Generator().manual_seed(1)  # causcale
CZ_X, CZ_M = torch.randn(1, 12, 4, generator=_cz_gen), (torch.rand(1, 12, 4, generator=_cz_gen) < 0.2).float()  # causcale
CZ_P = torch.eye(4)[None]  # causcale
SFC_MODEL = sfc.SFConvCNP(channels=8, ffn_dim=16, n_blocks=1, groups=2)  # sfconvcnp
SFC_CONV = sfc.SetFourierConv(1, 4, 4, groups=2)  # sfconvcnp
SFC_X, SFC_Y = -3 + 6 * torch.rand(2, 5, 1, generator=_gen), torch.randn(2, 5, 1, generator=_gen)  # sfconvcnp
SFC_XQ = -3 + 6 * torch.rand(2, 4, 1, generator=_gen)  # sfconvcnp

PD_K = torch.nn.functional.normalize(torch.randn(2, 6, 1, 4, generator=_gen), dim=-1)  # precond_delta
PD_DATA = pd.regression_data([0, 1], 8, d_k=4, d_v=3)  # precond_delta
_sp_rng = np.random.default_rng(0)  # special: two domains of 64-pixel images, two classes
SP_DOMAINS = [sp_data.DomainData(_sp_rng.random((16, 64), dtype=np.float32), np.arange(16) % 2,
                                 _sp_rng.random((4, 64), dtype=np.float32), np.arange(4) % 2, f"d{i}") for i in range(2)]

# unrolled-gsp
_ugsp_gen = torch.Generator().manual_seed(2)
_UGSP_DATA = ugsp.simulate_traffic(8, days=2, seed=0)
_UGSP_NBR = ugsp.knn_neighbors(_UGSP_DATA.dist, 3)
UGSP_LU = ugsp.SpatialOperator(_UGSP_NBR, ugsp.distance_spatial_weights(_UGSP_DATA.dist, _UGSP_NBR))
UGSP_LD = ugsp.DirectedTemporalOperator(ugsp.decaying_temporal_weights(12, 8, 3))
UGSP_Y = torch.randn(1, 6, 8, generator=_ugsp_gen, dtype=torch.float64)
UGSP_W = ugsp.make_windows(_UGSP_DATA, 12, 12, 6)["train"]
UGSP_MODEL = ugsp.UnrolledGSPForecaster(8, _UGSP_NBR, n_blocks=1, n_iter=2, k=3, extrapolator="scratch").eval()
# context-tuning
CTX_MODEL = ctx.TinyICLTransformer(d_model=16, n_layers=2, n_heads=2).eval()
CTX_T = ctx.sample_tasks(2, 4, 3, ctx.ICLTaskConfig(), torch.Generator().manual_seed(0))
CTX_D = dict(x_demo=CTX_T["x_demo"], y_demo=CTX_T["y_demo"])

# protein-tokens
PTOK_MODEL = ptok.DiffusionTokenizer(ptok.TokenizerConfig(d_enc=8, n_enc=1, d_dec=8, n_dec=1, n_heads=2, n_tokens=4,
                                                          max_len=48)).eval()
PTOK_X = ptok.make_backbones(2, 40, seed=0)["CA"]

CASES = [
    # protein-tokens
    Case("protein_tokens.make_backbones", ptok.make_backbones, dict(n=4, length=40, seed=0, noise_deg=6.0),
         args=("n", "length", "noise_deg")),
    Case("protein_tokens.kabsch_rmsd", ptok.kabsch_rmsd, dict(p=PTOK_X + 0.1, q=PTOK_X), args=("p", "q")),
    Case("protein_tokens.center_and_scale", ptok.center_and_scale, dict(x=PTOK_X, scale=10.0), args=("x", "scale")),
    Case("protein_tokens.nested_keep_mask", ptok.nested_keep_mask,
         dict(lengths=torch.tensor([40, 40]), n_tokens=16, n_size=1, p_uncond=0.05),
         args=("n_tokens", "n_size", "p_uncond")),
    Case("protein_tokens.TokenizerConfig", ptok.TokenizerConfig,
         dict(d_enc=8, n_tokens=4, window=4, p_uncond=0.05, n_size=1), args=("d_enc", "n_tokens", "window", "p_uncond",
                                                                              "n_size")),
    Case("protein_tokens.FSQ", ptok.FSQ, dict(levels=(8, 5, 5, 5), dim=8), args=("levels", "dim")),
    Case("protein_tokens.decode", PTOK_MODEL.decode,
         dict(idx=torch.zeros(2, 4, dtype=torch.long), length=40, n_keep=2, steps=2, eta=0.1, guidance=1.0),
         args=("idx", "length", "n_keep", "steps", "eta", "guidance")),
    # context-tuning
    Case("context_tuning.ct_kv", ctx.ct_kv, dict(**CTX_D, steps=2, lr=1e-2, token_dropout=0.05, grad_clip=1.0),
         args=("x_demo", "y_demo", "steps", "lr", "token_dropout", "grad_clip"), positional=(CTX_MODEL,)),
    Case("context_tuning.ct_prompt", ctx.ct_prompt, dict(**CTX_D, steps=2, lr=1e-2, token_dropout=0.05),
         args=("x_demo", "y_demo", "steps", "lr", "token_dropout"), positional=(CTX_MODEL,)),
    Case("context_tuning.prefix_tuning", ctx.prefix_tuning, dict(**CTX_D, n_virtual=3, steps=2, lr=1e-2),
         args=("x_demo", "y_demo", "n_virtual", "steps", "lr"), positional=(CTX_MODEL,)),
    Case("context_tuning.prompt_tuning", ctx.prompt_tuning, dict(**CTX_D, n_virtual=3, steps=2, lr=1e-2),
         args=("n_virtual", "steps", "lr"), positional=(CTX_MODEL,)),
    Case("context_tuning.test_time_training", ctx.test_time_training, dict(**CTX_D, steps=2, lr=1e-3),
         args=("x_demo", "y_demo", "steps", "lr"), positional=(CTX_MODEL,)),
    Case("context_tuning.icl_predict", ctx.icl_predict, dict(**CTX_D, x_query=CTX_T["x_query"]),
         args=("x_demo", "y_demo", "x_query"), positional=(CTX_MODEL,)),
    Case("context_tuning.ridge_predict", ctx.ridge_predict, dict(**CTX_D, x_query=CTX_T["x_query"], lam=0.01),
         args=("x_demo", "y_demo", "x_query", "lam")),
    Case("context_tuning.sample_tasks", ctx.sample_tasks,
         dict(n_tasks=2, n_demos=3, n_queries=2, cfg=ctx.ICLTaskConfig()), args=("n_tasks", "n_demos", "n_queries", "cfg")),
    Case("context_tuning.ICLTaskConfig", ctx.ICLTaskConfig, dict(dim=4, max_demos=8, noise=0.1, x_scale=1.0, w_scale=1.0),
         args=("dim", "max_demos", "noise", "x_scale", "w_scale")),
    # unrolled-gsp
    Case("unrolled_gsp.soft_threshold", ugsp.soft_threshold, dict(v=torch.linspace(-2, 2, 9), kappa=0.5),
         args=("v", "kappa")),
    Case("unrolled_gsp.simulate_traffic", ugsp.simulate_traffic,
         dict(n_nodes=6, days=1, seed=0, kind="speed", incident_rate=0.3, missing=0.01),
         args=("n_nodes", "days", "kind", "incident_rate", "missing")),
    Case("unrolled_gsp.admm_solve", ugsp.admm_solve,
         dict(y=UGSP_Y, t_in=6, Lu=UGSP_LU, Ld=UGSP_LD, mu_u=1.0, mu_d1=0.1, mu_d2=1.0, rho=1.0, iters=3),
         args=("y", "t_in", "mu_u", "mu_d1", "mu_d2", "rho", "iters")),
    Case("unrolled_gsp.UnrolledGSPForecaster", UGSP_MODEL, dict(y=UGSP_W["x"][:2, :12], tod=UGSP_W["tod"][:2],
                                                                dow=UGSP_W["dow"][:2]), args=("y", "tod", "dow")),
    Case("bandpo.probability_margins", bp.probability_margins,
         dict(p=torch.tensor([0.2, 0.5, 1.0]), lo=0.8, hi=1.2), args=("p", "lo", "hi")),
    Case("bandpo.clipped_surrogate_loss", bp.clipped_surrogate_loss,
         dict(logp=LOGP + 0.05, logp_old=LOGP, adv=torch.randn(B, generator=_gen), lo=0.8, hi=1.2,
              mask=torch.ones(B, T)),
         args=("logp", "logp_old", "adv", "lo", "hi", "mask")),
    Case("cgmt.solve_fixed_point", cg.solve_fixed_point,
         dict(alpha=2.0, model=CGMT_MODEL, loss="square", reg=cg.ridge(0.1), n_quad=21, damping=0.5, max_iter=200),
         args=("alpha", "loss", "damping", "max_iter")),
    Case("cgmt.prox", cg.prox, dict(loss="logistic", v=torch.linspace(-3, 3, 7, dtype=torch.float64),
                                    y=torch.ones(7, dtype=torch.float64), kappa=0.5), args=("loss", "kappa")),
    Case("cgmt.moreau", cg.moreau, dict(loss="hinge", v=torch.linspace(-3, 3, 7, dtype=torch.float64),
                                        y=-torch.ones(7, dtype=torch.float64), kappa=0.5), args=("loss", "kappa")),
    Case("special.special_server_step", sp.special_server_step,
         dict(w=W, local_models=LOCAL, anchor=W.clone(), lam=1.0, weights=torch.ones(N_CLIENTS)),
         args=("local_models", "weights", "lam"), nonfinite=False),
    Case("special.fedavg_server_step", sp_base.fedavg_server_step,
         dict(w=W, local_models=LOCAL, server_lr=1.0, weights=torch.ones(N_CLIENTS)),
         args=("local_models", "weights"), nonfinite=False),
    Case("ba_solver.energy_distance", ba.metrics.energy_distance,
         dict(x=torch.randn(20, 2, generator=_gen), y=torch.randn(30, 2, generator=_gen), max_n=100),
         args=("x", "y", "max_n")),
    Case("precond_delta.delta_rule_chunk", pd.delta_rule_chunk,
         dict(q=QKV, k=QKV.clone(), v=torch.randn(1, 8, 2, 3, generator=_gen), beta=torch.full((1, 8, 2), 0.5),
              chunk_size=4), args=("q", "k", "v", "beta", "chunk_size")),
    Case("precond_delta.delta_rule_recurrent", pd.delta_rule_recurrent,
         dict(q=QKV, k=QKV.clone(), v=torch.randn(1, 8, 2, 3, generator=_gen), beta=torch.full((1, 8, 2), 0.5)),
         args=("q", "k", "v", "beta")),
    Case("precond_delta.write_multiplier", pd.write_multiplier,
         dict(k=PD_K, rule="pdn", x=1.5, gamma=0.99), args=("k", "rule", "x", "gamma"),
         shape=lambda out: out.dim() == 4),
    Case("precond_delta.step_schedule", pd.step_schedule, dict(k=PD_K, x=1.5, gamma=0.99), args=("k", "x", "gamma"),
         shape=lambda out: out.dim() == 1),
    Case("precond_delta.write_flops", pd.write_flops, dict(rule="pdn", d_k=4, d_v=3), args=("rule", "d_k", "d_v")),
    Case("precond_delta.regression_data", pd.regression_data, dict(seeds=[0, 1], T=8, d_k=4, d_v=3, kappa=10.0),
         args=("seeds", "T", "d_k", "d_v", "kappa")),
    Case("precond_delta.regression_errors", pd.regression_errors,
         dict(data=PD_DATA, rule="deltanet", betas=[0.5, 1.0]), args=("rule", "betas"),
         shape=lambda out: out.shape == (2, 2)),
    Case("precond_delta.recall_accuracy", pd.recall_accuracy,
         dict(data=pd.recall_data([0, 1], 6, d_k=4, d_v=4), rule="pdn", betas=[0.5]), args=("rule", "betas"),
         range=(0.0, 1.0)),
    Case("special.validation_domains", sp_data.validation_domains,
         dict(domains=SP_DOMAINS, fraction=0.25, seed=0), args=("fraction", "seed")),
    Case("dp_c4.clip_rows", dpc4.clip_rows, dict(G=torch.randn(6, 3, generator=_gen, dtype=torch.float64), C=1.0),
         args=("G", "C")),
    Case("dp_c4.geometric_thresholds", dpc4.geometric_thresholds, dict(C0=1.0, rho=0.7, K=5),
         args=("C0", "rho", "K")),
    Case("dp_c4.calibrate_sigma", dpc4.calibrate_sigma, dict(T=50, q=0.1, eps=1.0, delta=1e-5),
         args=("T", "q", "eps", "delta")),
    Case("dp_c4.gdp_mu", dpc4.gdp_mu, dict(eps=1.0, delta=1e-5), args=("eps", "delta")),
    Case("watermark.phi", wm.phi, dict(P=torch.tensor([0.1, 0.5, 0.9]), delta=2.0), args=("P", "delta")),
    Case("watermark.green_matrix", wm.green_matrix, dict(n_vocab=16, gamma=0.25, key=3),
         args=("n_vocab", "gamma", "key")),
    Case("watermark.power_normal", wm.power_normal, dict(mu1=0.5, gamma=0.25, T=100, alpha=0.01),
         args=("mu1", "gamma", "T", "alpha")),
    Case("watermark.detect", wm.detect, dict(tokens=torch.tensor([[1, 2, 3, 2, 1]]), green_mat=wm.green_matrix(16, 0.25, 3),
                                             gamma=0.25, context0=16, alpha=0.01),
         args=("tokens", "gamma", "context0", "alpha")),
    # causcale
    Case("causcale.sample_dag", cz.sample_dag, dict(n_nodes=6, expected_degree=1.5, graph_type="er", rng=0),
         args=("n_nodes", "expected_degree", "graph_type")),
    Case("causcale.precision_prior", cz.precision_prior,
         dict(x_raw=torch.randn(30, 4, generator=_gen, dtype=torch.float64), method="auto"), args=("x_raw", "method")),
    Case("causcale.reduction_schedule", cz.reduction_schedule, dict(m=64, n_blocks=4, k=2, r=2),
         args=("m", "n_blocks", "k", "r")),
    Case("causcale.attention_map_floats", cz.attention_map_floats, dict(m=10, n=5, n_heads=2),
         args=("m", "n", "n_heads")),
    Case("causcale.average_precision", cz.average_precision,
         dict(scores=torch.rand(5, 5, generator=_gen), adj=torch.triu(torch.ones(5, 5), 1)), args=("scores", "adj")),
    Case("causcale.CauScale", CAUSCALE_MODEL, dict(x=CZ_X, interv=CZ_M, prior=CZ_P), args=("x", "interv", "prior")),
    # bpop
    Case("bpop.trace_log_likelihood", bpop_m.trace_log_likelihood,
         dict(trace=torch.tensor([0, 2, 1]), po=BPOP_PO, beta=1.0, eps=0.05), args=("trace", "beta", "eps")),
    Case("bpop.batched_log_likelihood", bpop_m.batched_log_likelihood,
         dict(R=bpop_m.remaining_tensor(BPOP_Y), closure=torch.as_tensor(BPOP_PO.closure),
              beta=torch.tensor([1.0], dtype=torch.float64), eps=0.05, chosen=bpop_m.chosen_tensor(BPOP_Y)),
         args=("R", "closure", "beta", "eps")),
    Case("bpop.queue_jump_log_likelihood", bpop_m.queue_jump_log_likelihood,
         dict(trace=torch.tensor([0, 2, 1]), po=BPOP_PO, p=0.1), args=("trace", "p")),
    Case("bpop.point_estimate", bpop_m.point_estimate,
         dict(edge_prob=torch.tensor([[0, .9, .2], [.1, 0, .3], [.6, .4, 0]], dtype=torch.float64), alpha=0.5),
         args=("edge_prob", "alpha")),
    Case("bpop.always_before", bpop_m.always_before, dict(traces=[[0, 1, 2], [2, 0, 1]], n=3), args=("traces", "n")),
    # paced-rl
    Case("paced_rl.tb_loss", prl.tb_loss, dict(log_z=torch.zeros(4), logp=-torch.ones(4), logp_prior=-torch.ones(4),
                                                 reward=torch.tensor([0.0, 1, 1, 0]), beta=0.05),
         args=("log_z", "logp", "logp_prior", "reward", "beta")),
    Case("paced_rl.optimal_log_z", prl.optimal_log_z,
         dict(logp_theta_all=torch.log_softmax(torch.randn(2, 8, generator=_gen), -1),
              logp_old_all=torch.log_softmax(torch.randn(2, 8, generator=_gen), -1),
              reward_all=(torch.arange(16).reshape(2, 8) % 2).float(), beta=0.05),
         args=("logp_theta_all", "logp_old_all", "reward_all", "beta")),
    Case("paced_rl.select_prompts", prl.select_prompts,
         dict(scores=torch.tensor([0.1, 0.5, 0.9, 0.4]), pool_idx=torch.arange(4), batch_size=2, tau=0.5),
         args=("scores", "pool_idx", "batch_size", "tau")),
    Case("paced_rl.accuracy_from_log_z", prl.accuracy_from_log_z, dict(log_z=torch.tensor([1.0, 10.0]), beta=0.05),
         args=("log_z", "beta")),
    Case("paced_rl.grpo_advantages", prl.grpo_advantages, dict(rewards=torch.tensor([[1.0, 0, 0, 1]])),
         args=("rewards",)),
    Case("paced_rl.exact_pass_at_k", prl.exact_pass_at_k, dict(acc=torch.tensor([0.1, 0.5]), ks=(1, 8)),
         args=("acc",)),
    # sfconvcnp
    Case("sfconvcnp.frequency_grid", sfc.frequency_grid, dict(max_freq=4.9, resolution=0.1, dim=1),
         args=("max_freq", "resolution", "dim")),
    Case("sfconvcnp.gaussian_set_spectrum", sfc.gaussian_set_spectrum,
         dict(x=SFC_X, z=torch.randn(2, 5, 3, generator=_gen), xi=torch.linspace(0, 1, 4).view(-1, 1),
              lengthscale=torch.full((1, 3), 0.2)), args=("x", "z", "xi", "lengthscale")),
    Case("sfconvcnp.inverse_real_transform", sfc.inverse_real_transform,
         dict(z_ft=torch.randn(2, 4, 3, dtype=torch.complex64, generator=_gen), xq=SFC_XQ,
              xi=torch.linspace(0, 1, 4).view(-1, 1), weights=torch.ones(4), volume=0.1),
         args=("z_ft", "xq", "xi", "weights", "volume")),
    Case("sfconvcnp.SetFourierConv", SFC_CONV, dict(z_kv=torch.randn(2, 5, 4, generator=_gen), x_kv=SFC_X, x_q=SFC_XQ),
         args=("z_kv", "x_kv", "x_q")),
    Case("sfconvcnp.SFConvCNP", SFC_MODEL, dict(xc=SFC_X, yc=SFC_Y, xq=SFC_XQ), args=("xc", "yc", "xq")),
    Case("sfconvcnp.sample_gp_tasks", sfc.sample_gp_tasks,
         dict(batch_size=2, kernel="rbf", n_context=(3, 5), n_target=(3, 5), noise_std=0.1, shift=0.0),
         args=("batch_size", "kernel", "n_context", "n_target", "noise_std", "shift")),
    Case("sfconvcnp.gp_oracle_loglik", sfc.gp_oracle_loglik,
         dict(task=sfc.sample_gp_tasks(2, generator=torch.Generator().manual_seed(0))), args=("task",)),
    # syngr
    Case("syngr.synergy_contrastive_loss", syngr.synergy_contrastive_loss,
         dict(z_ori=torch.randn(4, 3, generator=_gen), z_mask=torch.randn(4, 3, generator=_gen),
              z_uni=torch.randn(4, 3, generator=_gen), tau=0.07), args=("z_ori", "z_mask", "z_uni", "tau")),
    Case("syngr.token_saliency", syngr.token_saliency,
         dict(attn=torch.softmax(torch.randn(2, 2, 5, 5, generator=_gen), -1), valid=torch.ones(2, 5, dtype=torch.bool)),
         args=("attn", "valid")),
    Case("syngr.recall_at_k", syngr.recall_at_k, dict(ranks=torch.tensor([1, 3, 0]).numpy(), k=2), args=("k",)),
    Case("syngr.ndcg_at_k", syngr.ndcg_at_k, dict(ranks=torch.tensor([1, 3, 0]).numpy(), k=2), args=("k",)),
    Case("syngr.SynGRConfig", syngr.SynGRConfig,
         dict(alpha=0.1, mask_ratio=0.3, tau=0.07, uni_view="dominant", masking="saliency"),
         args=("alpha", "mask_ratio", "tau", "uni_view", "masking")),
    Case("syngr.gate_table", syngr.gate_table, dict(name="xor"), args=("name",)),
    Case("syngr.syncat_style_table", syngr.syncat_style_table, dict(n_styles=4), args=("n_styles",)),
    # dynvla
    Case("dynvla.boxes_overlap", dynvla.boxes_overlap,
         dict(a=torch.tensor([0.0, 0.0, 0.0, 4.5, 1.9]), b=torch.tensor([1.0, 0.5, 0.3, 4.5, 1.9])), args=("a", "b")),
    Case("dynvla.waypoints_to_states", dynvla.waypoints_to_states,
         dict(wp=torch.ones(2, 8, 2).cumsum(1), dt=0.1), args=("wp", "dt")),
    Case("dynvla.FastLite", dynvla.FastLite, dict(gamma=64.0, scale=(60.0, 6.0)), args=("gamma", "scale")),
    Case("dynvla.group_advantages", dynvla.group_advantages,
         dict(rewards=torch.rand(3, 4, generator=_gen)), args=("rewards",)),
    Case("dynvla.code_usage", dynvla.code_usage, dict(idx=torch.tensor([0, 1, 2]), m=4), args=("idx", "m")),
    Case("dynvla.WorldConfig", dynvla.WorldConfig, dict(n_lanes=3, lane_width=3.5, dt=0.1, frame_dt=1.0),
         args=("n_lanes", "lane_width", "dt", "frame_dt")),
    Case("dynvla.GRPOConfig", dynvla.GRPOConfig, dict(group_size=8, clip_eps=0.2, beta_kl=1e-3, temperature=1.0),
         args=("group_size", "clip_eps", "beta_kl", "temperature")),
    # focusing
    Case("focusing.chamfer_fscore", foc.chamfer_fscore,
         dict(P=torch.rand(20, 3, generator=_gen), Q=torch.rand(30, 3, generator=_gen), taus=(0.05, 0.1)),
         args=("P", "Q", "taus")),
    Case("focusing.voxelize_points", foc.voxelize_points, dict(points=torch.rand(20, 3, generator=_gen) - 0.5, res=8),
         args=("points", "res")),
    Case("focusing.frustum_section", foc.frustum_section,
         dict(coords=torch.tensor([[4, 4, 4], [3, 4, 5]]), res=8, cam=foc.make_camera([0.0, 0.0, 2.0], 8, 8),
              alpha=0.3), args=("coords", "res", "alpha")),
    # pdrf
    Case("pdrf.semi_lagrangian", pdrf_m.semi_lagrangian,
         dict(frame=torch.rand(2, 16, 16, generator=_gen), motion=torch.zeros(2, 2, 16, 16), n_steps=2),
         args=("frame", "motion", "n_steps")),
    Case("pdrf.estimate_motion", pdrf_m.estimate_motion,
         dict(prev=torch.rand(2, 16, 16, generator=_gen), curr=torch.rand(2, 16, 16, generator=_gen), levels=1,
              iters=5, alpha=0.15), args=("prev", "curr", "levels", "iters", "alpha")),
    Case("pdrf.fss_sums", pdrf_m.fss_sums,
         dict(pred=torch.rand(2, 3, 8, 8, generator=_gen), obs=torch.rand(2, 3, 8, 8, generator=_gen), threshold=0.5,
              window=3), args=("pred", "obs", "threshold", "window")),
    Case("pdrf.contingency", pdrf_m.contingency,
         dict(pred=torch.rand(2, 3, 8, 8, generator=_gen), obs=torch.rand(2, 3, 8, 8, generator=_gen),
              thresholds=(0.1, 0.5)), args=("pred", "obs")),
    Case("pdrf.pdrf_loss", pdrf_m.pdrf_loss,
         dict(model=PDRF_NET, x1=torch.rand(2, 2, 8, 8, generator=_gen), cond=torch.rand(2, 2, 8, 8, generator=_gen),
              x_sl=torch.rand(2, 2, 8, 8, generator=_gen), lambda_phy=0.1, t_eps=1e-3),
         args=("x1", "cond", "x_sl", "lambda_phy", "t_eps")),
    Case("pdrf.sample", pdrf_m.sample,
         dict(model=PDRF_NET, cond=torch.rand(2, 2, 8, 8, generator=_gen), shape=(2, 2, 8, 8), nfe=2,
              noise=torch.randn(2, 2, 8, 8, generator=_gen)), args=("cond", "nfe", "noise")),
    Case("pdrf.generate_radar", pdrf_m.generate_radar,
         dict(n=2, cfg=pdrf_m.RadarConfig(H=16, W=16, t_in=2, t_out=2, margin=4)), args=("n",)),
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


# -- the specific failures the sweep of issue 29 found, spelled out ---------------------------------
def test_named_failures_of_issue_29():
    with pytest.raises(ValueError, match="lo"):
        bp.probability_margins(torch.tensor([0.5]), float("nan"), 1.2)
    with pytest.raises((TypeError, ValueError), match="hi"):
        bp.probability_margins(torch.tensor([0.5]), 0.8, None)
    with pytest.raises(ValueError, match="logp"):
        bp.clipped_surrogate_loss(LOGP.clone().fill_(float("nan")), LOGP, torch.ones(B), 0.8, 1.2)
    loss, _ = bp.clipped_surrogate_loss(LOGP, LOGP, torch.ones(B), 0.8, 1.2, mask=[[1.0] * T] * B)
    assert torch.isfinite(loss)  # a mask given as a list works
    with pytest.raises(ValueError, match="adv"):
        bp.clipped_surrogate_loss(LOGP, LOGP, torch.ones(B + 1), 0.8, 1.2)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="max_iter"):
            cg.solve_fixed_point(2.0, CGMT_MODEL, "square", cg.ridge(0.1), max_iter=bad)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="kappa"):
            cg.prox("logistic", torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), bad)
        with pytest.raises(ValueError, match="kappa"):
            cg.moreau("square", torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), bad)
    with pytest.raises(ValueError, match="local_models"):
        sp.special_server_step(W, LOCAL[:0], W, 1.0)
    with pytest.raises(ValueError, match="local_models"):
        sp_base.fedavg_server_step(W, LOCAL[:0])
    with pytest.raises(ValueError, match="max_n"):
        ba.metrics.energy_distance(torch.randn(4, 2), torch.randn(4, 2), max_n=0)
    for dtype in (torch.float16, torch.bfloat16):
        with pytest.raises(TypeError, match="q must be float32 or float64"):
            pd.delta_rule_chunk(QKV.to(dtype), QKV, torch.randn(1, 8, 2, 3), torch.full((1, 8, 2), 0.5), chunk_size=4)


def test_a_diverged_fixed_point_is_an_error_not_a_state(monkeypatch):
    """A fixed-point iteration that blew up (the sweep saw it with damping=1) raises, naming damping."""
    from icml26.cgmt import theory

    real = theory.channel

    def poisoned(*args, **kwargs):
        out = real(*args, **kwargs)
        out.D = float("inf")
        return out

    monkeypatch.setattr(theory, "channel", poisoned)
    with pytest.raises(ValueError, match="damping"):
        cg.solve_fixed_point(2.0, CGMT_MODEL, "square", cg.ridge(0.1), damping=1.0)
