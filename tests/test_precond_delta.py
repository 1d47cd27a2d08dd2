"""Tests for icml26.precond_delta: the unit identities of the chapter spec (section 8) and its bad inputs (section 9)."""

from __future__ import annotations

import math

import icml26.precond_delta as pd
import pytest
import torch
from icml26.precond_delta.experiments import random_inputs

F64 = torch.float64
GATES = {"DN": None, "GDN": "scalar", "KDA": "vector"}


def _normed(inp):
    q = pd.l2_normalize(inp["q"]) * inp["q"].shape[-1] ** -0.5
    return q, pd.l2_normalize(inp["k"])


def _write_key(inp, x=1.5):
    k = pd.l2_normalize(inp["k"])
    a, _ = pd.atk_state(k, inp["g_atk"], inp["beta_atk"])
    return pd.squash_preconditioner(a, inp["center"], x) * k


# ---------------------------------------------------------------------------------------------
# claim 1: chunk == recurrent
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
@pytest.mark.parametrize("variant", ["DN", "GDN", "KDA"])
@pytest.mark.parametrize("precond", [False, True])
def test_chunk_equals_recurrent(dtype, tol, variant, precond):
    inp = random_inputs(2, 70, 2, 8, 5, GATES[variant], dtype=dtype, seed=1)
    q, k = _normed(inp)
    kw = _write_key(inp) if precond else None
    o1, S1 = pd.delta_rule_recurrent(q, k, inp["v"], inp["beta"], inp["g"], kw, inp["initial_state"], True)
    o2, S2 = pd.delta_rule_chunk(q, k, inp["v"], inp["beta"], inp["g"], kw, 16, inp["initial_state"], True)
    assert (o1 - o2).abs().max().item() <= tol
    assert (S1 - S2).abs().max().item() <= tol


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 100])
def test_chunk_any_chunk_size(chunk_size):
    inp = random_inputs(1, 70, 2, 6, 3, "scalar", seed=2)
    q, k = _normed(inp)
    o1, _ = pd.delta_rule_recurrent(q, k, inp["v"], inp["beta"], inp["g"])
    o2, _ = pd.delta_rule_chunk(q, k, inp["v"], inp["beta"], inp["g"], chunk_size=chunk_size)
    assert (o1 - o2).abs().max().item() <= 1e-12


def test_chunk_strong_decay_no_overflow():
    inp = random_inputs(1, 64, 1, 4, 3, "scalar", seed=3)
    g = torch.full_like(inp["g"], -30.0)  # exp(-G_j) alone would overflow over a chunk of 64
    q, k = _normed(inp)
    o1, _ = pd.delta_rule_recurrent(q, k, inp["v"], inp["beta"], g)
    o2, _ = pd.delta_rule_chunk(q, k, inp["v"], inp["beta"], g, chunk_size=64)
    assert torch.isfinite(o2).all() and (o1 - o2).abs().max().item() <= 1e-12


def test_linear_attention_matches_cumsum():
    inp = random_inputs(2, 37, 2, 4, 3, None, seed=4)
    o, S = pd.linear_attention(inp["q"], inp["k"], inp["v"], output_final_state=True, chunk_size=8)
    M = torch.cumsum(inp["k"][..., :, None] * inp["v"][..., None, :], dim=1)
    assert (o - torch.einsum("bthk,bthkv->bthv", inp["q"], M)).abs().max().item() <= 1e-12
    assert (S - M[:, -1]).abs().max().item() <= 1e-12


# ---------------------------------------------------------------------------------------------
# claims 2, 3, 9: the preconditioner
# ---------------------------------------------------------------------------------------------


def test_atk_chunk_equals_scan_and_closed_form():
    inp = random_inputs(2, 70, 3, 5, 2, None, seed=5)
    a0 = inp["initial_state"][..., 0].abs()
    a1, f1 = pd.atk_state(inp["k"], inp["g_atk"], inp["beta_atk"], a0, chunk_size=16)
    a2, f2 = pd.atk_state(inp["k"], inp["g_atk"], inp["beta_atk"], a0, chunk_size=None)
    assert (a1 - a2).abs().max().item() <= 1e-12 and (f1 - f2).abs().max().item() <= 1e-12
    # constant inputs: a_t = beta k^2 (1 - gamma^t) / (1 - gamma)
    T, gam, b = 50, 0.9, 0.3
    k = torch.full((1, T, 1, 2), 0.5, dtype=F64)
    a, _ = pd.atk_state(k, torch.full((1, T, 1), math.log(gam), dtype=F64), torch.full((1, T, 1), b, dtype=F64),
                        chunk_size=16)
    t = torch.arange(1, T + 1, dtype=F64)
    assert (a[0, :, 0, 0] - b * 0.25 * (1 - gam**t) / (1 - gam)).abs().max().item() <= 1e-12


@pytest.mark.parametrize("gate", [None, "scalar", "vector"])
def test_x_equal_one_is_plain(gate):
    inp = random_inputs(2, 40, 2, 6, 3, gate, seed=6)
    o1, S1, _ = pd.precond_delta_rule(inp["q"], inp["k"], inp["v"], inp["beta"], inp["g"], inp["g_atk"],
                                      inp["beta_atk"], center=inp["center"], x=1.0, chunk_size=16,
                                      initial_state=inp["initial_state"], output_final_state=True)
    q, k = _normed(inp)
    o2, S2 = pd.delta_rule_chunk(q, k, inp["v"], inp["beta"], inp["g"], chunk_size=16,
                                 initial_state=inp["initial_state"], output_final_state=True)
    assert torch.equal(o1, o2) and torch.equal(S1, S2)


def test_precond_modes_agree_and_use_write_key():
    inp = random_inputs(2, 45, 2, 6, 3, "scalar", seed=7)
    args = (inp["q"], inp["k"], inp["v"], inp["beta"], inp["g"], inp["g_atk"], inp["beta_atk"])
    kw = dict(center=inp["center"], initial_state=inp["initial_state"], output_final_state=True)
    o1, S1, a1 = pd.precond_delta_rule(*args, mode="chunk", chunk_size=16, **kw)
    o2, S2, a2 = pd.precond_delta_rule(*args, mode="recurrent", **kw)
    assert max((o1 - o2).abs().max(), (S1 - S2).abs().max(), (a1 - a2).abs().max()).item() <= 1e-12
    q, k = _normed(inp)
    o3, _ = pd.delta_rule_recurrent(q, k, inp["v"], inp["beta"], inp["g"], _write_key(inp), inp["initial_state"])
    assert (o1 - o3).abs().max().item() <= 1e-12
    o4, _ = pd.delta_rule_recurrent(q, k, inp["v"], inp["beta"], inp["g"], None, inp["initial_state"])
    assert (o1 - o4).abs().max().item() > 1e-3  # preconditioning changes the result


def test_squash_range_fixed_point_monotone():
    a = torch.cat([torch.zeros(1, dtype=F64), torch.logspace(-12, 12, 2001, dtype=F64)])
    for x in (1.25, 1.5, 2.0):
        m = pd.squash_preconditioner(a, center=-0.2, x=x)
        assert (m > 1 / x).all() and (m < x).all()
        assert (m[1:] <= m[:-1]).all()  # non-increasing in a
        assert (m[1:] < m[:-1]).double().mean() > 0.99  # and strictly decreasing almost everywhere
    c = -0.2
    one = pd.squash_preconditioner(torch.tensor(math.exp(c) - 1e-6, dtype=F64), center=c, x=1.5)
    assert abs(one.item() - 1.0) <= 1e-12
    a0 = pd.squash_preconditioner(torch.tensor(0.0, dtype=F64), center=c, x=1.5)
    assert 1.45 < a0.item() < 1.5  # m -> x only asymptotically


# ---------------------------------------------------------------------------------------------
# claims 4-6: exact preconditioning
# ---------------------------------------------------------------------------------------------


def _exact_inputs(seed=8, T=60, K=5, V=3):
    g = torch.Generator().manual_seed(seed)
    k = pd.l2_normalize(torch.randn(2, T, 2, K, generator=g, dtype=F64))
    q = torch.randn(2, T, 2, K, generator=g, dtype=F64)
    v = torch.randn(2, T, 2, V, generator=g, dtype=F64)
    beta = torch.rand(2, T, 2, generator=g, dtype=F64)
    decay = -0.05 * torch.rand(2, T, 2, generator=g, dtype=F64)
    return q, k, v, beta, decay


def test_rls_is_ridge_and_order_free():
    q, k, v, beta, _ = _exact_inputs()
    o, S = pd.rls_delta_rule(q, k, v, beta, lam=1e-3)
    assert (S - pd.ridge_state(k, v, beta, lam=1e-3)).abs().max().item() <= 1e-10
    perm = torch.randperm(k.shape[1], generator=torch.Generator().manual_seed(0))
    _, Sp = pd.rls_delta_rule(q, k[:, perm], v[:, perm], beta[:, perm], lam=1e-3)
    assert (S - Sp).abs().max().item() <= 1e-10
    _, D = pd.delta_rule_recurrent(q, k, v, beta, output_final_state=True)
    _, Dp = pd.delta_rule_recurrent(q, k[:, perm], v[:, perm], beta[:, perm], output_final_state=True)
    assert (D - Dp).abs().max().item() > 1e-3


def test_gated_rls_equals_decayed_ridge():
    q, k, v, beta, decay = _exact_inputs()
    _, S = pd.rls_delta_rule(q, k, v, beta, decay, lam=1e-3)
    assert (S - pd.ridge_state(k, v, beta, decay, lam=1e-3)).abs().max().item() <= 1e-10
    states = pd.rls_states(k, v, beta, decay, lam=1e-3)
    assert (states[:, -1] - S).abs().max().item() == 0.0


@pytest.mark.parametrize("with_decay", [False, True])
def test_mesa_readout_equals_rls_and_la(with_decay):
    q, k, v, beta, decay = _exact_inputs()
    g = decay if with_decay else None
    o, _ = pd.rls_delta_rule(q, k, v, beta, g, lam=1e-3)
    om = pd.mesa_readout(q, k, v, beta, g, lam=1e-3)
    assert (o - om).abs().max().item() <= 1e-10
    ol, _ = pd.linear_attention(pd.preconditioned_queries(q, k, beta, g, 1e-3), beta[..., None] * k, v, g)
    assert (om - ol).abs().max().item() <= 1e-10


# ---------------------------------------------------------------------------------------------
# claim 7: write eigenvalues
# ---------------------------------------------------------------------------------------------


def test_write_eigenvalues_match_eigvals_and_band():
    inp = random_inputs(2, 10, 2, 6, 3, None, seed=9)
    k = pd.l2_normalize(inp["k"])
    for x in (1.5, 2.0, 3.0):
        a, _ = pd.atk_state(k, inp["g_atk"], inp["beta_atk"])
        m = pd.squash_preconditioner(a, inp["center"], x)
        lam = pd.write_eigenvalues(k, inp["beta"], m)
        Mat = torch.eye(6, dtype=F64) - inp["beta"][..., None, None] * (m * k)[..., :, None] * k[..., None, :]
        ev = torch.linalg.eigvals(Mat)
        idx = (ev - 1).abs().argmax(-1, keepdim=True)
        non_unit = ev.gather(-1, idx)[..., 0]
        assert (non_unit.imag.abs() <= 1e-10).all()
        assert (non_unit.real - lam).abs().max().item() <= 1e-10
        b = inp["beta"]
        assert (lam > 1 - b * x - 1e-12).all() and (lam < 1 - b / x + 1e-12).all()
    assert torch.allclose(pd.write_eigenvalues(k, inp["beta"]), 1 - inp["beta"] * (k * k).sum(-1))


# ---------------------------------------------------------------------------------------------
# claim 8: gradients
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gate", [None, "scalar", "vector"])
def test_gradients_chunk_equal_recurrent(gate):
    grads = {}
    for mode in ("chunk", "recurrent"):
        inp = random_inputs(1, 23, 2, 4, 3, gate, seed=10)
        names = [n for n, t in inp.items() if t is not None]
        for n in names:
            inp[n].requires_grad_(True)
        o, S, a = pd.precond_delta_rule(inp["q"], inp["k"], inp["v"], inp["beta"], inp["g"], inp["g_atk"],
                                        inp["beta_atk"], center=inp["center"], mode=mode, chunk_size=8,
                                        initial_state=inp["initial_state"], output_final_state=True)
        (o.sin().sum() + S.square().sum() + a.sum()).backward()
        grads[mode] = {n: inp[n].grad for n in names}
    for n, gr in grads["chunk"].items():
        assert (gr - grads["recurrent"][n]).abs().max().item() <= 1e-9, n


@pytest.mark.parametrize("gate", [None, "scalar", "vector"])
def test_gradcheck_tiny(gate):
    inp = random_inputs(1, 7, 1, 3, 2, gate, seed=11)
    names = ["q", "k", "v", "beta", "g_atk", "beta_atk", "center"] + (["g"] if gate else [])
    tensors = [inp[n].clone().requires_grad_(True) for n in names]

    def fn(*ts):
        d = dict(zip(names, ts))
        o, S, a = pd.precond_delta_rule(d["q"], d["k"], d["v"], d["beta"], d.get("g"), d["g_atk"], d["beta_atk"],
                                        center=d["center"], chunk_size=3, initial_state=inp["initial_state"],
                                        output_final_state=True)
        return o, S, a

    assert torch.autograd.gradcheck(fn, tensors, eps=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------------------------
# experiments, model and small facts
# ---------------------------------------------------------------------------------------------


def test_orthonormal_keys_exact_recall_and_precond_scaling():
    K = 4
    k = torch.eye(K, dtype=F64)[None, :, None, :]  # keys e_1..e_4, [1,4,1,4]
    v = torch.randn(1, K, 1, 3, dtype=F64)
    beta = torch.ones(1, K, 1, dtype=F64)
    _, S = pd.delta_rule_chunk(k, k, v, beta, output_final_state=True)
    assert (S[0, 0] - v[0, :, 0]).abs().max().item() <= 1e-12  # S^T e_i = v_i
    mvals = torch.tensor([1.2, 0.8, 1.5, 0.9], dtype=F64)
    _, Sm = pd.delta_rule_chunk(k, k, v, beta, k_write=k * mvals, output_final_state=True)
    assert (Sm[0, 0] - mvals[:, None] * v[0, :, 0]).abs().max().item() <= 1e-12  # returns m_i v_i


def test_stress_test_x3_diverges():
    out = pd.stress_test(steps=200)
    assert out["norm"][1.5][-1].item() == pytest.approx(2.0, abs=1e-6)
    assert out["norm"][2.0][-1].item() == pytest.approx(2.0, abs=1e-6)
    assert out["norm"][3.0][-1].item() > 1e3
    assert out["eig"][3.0] == pytest.approx(-1.376, abs=5e-3)


def test_mqar_batch_structure():
    tok, tgt = pd.mqar_batch(4, 6, 32, torch.Generator().manual_seed(0))
    assert tok.shape == (4, 24) and tgt.shape == (4, 24)
    for b in range(4):
        keys, vals = tok[b, 0:12:2], tok[b, 1:12:2]
        assert len(set(keys.tolist())) == 6 and (keys >= 1).all() and (keys < 16).all()
        assert (vals >= 16).all() and (vals < 32).all()
        pairs = dict(zip(keys.tolist(), vals.tolist()))
        qk, qv = tok[b, 12::2], tok[b, 13::2]
        assert sorted(qk.tolist()) == sorted(keys.tolist())
        assert all(pairs[a] == c for a, c in zip(qk.tolist(), qv.tolist()))
        assert (tgt[b, 12::2] == qv).all() and (tgt[b, :12] == -100).all() and (tgt[b, 13::2] == -100).all()
    tz, _ = pd.mqar_batch(2, 4, 32, torch.Generator().manual_seed(0), key_zipf=1.5)
    assert tz.shape == (2, 16)


@pytest.mark.parametrize("name", ["linear", "DN", "PGDN", "PKDA"])
def test_model_forward_chunk_equals_recurrent(name):
    model = pd.build_model(name, vocab_size=32, d_model=16, n_heads=2, head_dim=8, chunk_size=4).double()
    tok, _ = pd.mqar_batch(2, 3, 32, torch.Generator().manual_seed(0))
    out1 = model(tok)
    if name != "linear":
        for blk in model.blocks:
            blk.mixer.mode = "recurrent"
        assert (out1 - model(tok)).abs().max().item() <= 1e-10
    assert out1.shape == (2, 12, 32) and torch.isfinite(out1).all()


def test_regression_stream_and_recall_shapes():
    k, v, W = pd.regression_stream(20, 4, 3, kappa=10, rotate=True, batch=2, generator=torch.Generator())
    assert k.shape == (2, 20, 1, 4) and v.shape == (2, 20, 1, 3) and W.shape == (2, 1, 4, 3)
    assert torch.allclose(k.norm(dim=-1), torch.ones(2, 20, 1, dtype=F64))
    kk = pd.l2_normalize(torch.eye(4, dtype=F64)[None].repeat(2, 1, 1))
    acc = pd.single_pass_recall(kk, torch.eye(4, dtype=F64)[None].repeat(2, 1, 1), "dn", beta=1.0)
    assert acc.tolist() == [1.0, 1.0]


def test_presets():
    for scale in ("smoke", "book", "gpu"):
        p = pd.preset(scale)
        assert p.reg_t_check <= p.reg_T and p.recall_n_check in p.recall_ns


# ---------------------------------------------------------------------------------------------
# section 9: bad inputs
# ---------------------------------------------------------------------------------------------


def _base(B=1, T=6, H=2, K=3, V=2):
    inp = random_inputs(B, T, H, K, V, "scalar", seed=12)
    return inp["q"], inp["k"], inp["v"], inp["beta"], inp["g"], inp


def test_bad_shapes_raise():
    q, k, v, beta, g, inp = _base()
    with pytest.raises(ValueError, match="q"):
        pd.delta_rule_chunk(q[0], k, v, beta)
    with pytest.raises(ValueError, match="v"):
        pd.delta_rule_chunk(q, k, v[:, :5], beta)
    with pytest.raises(ValueError, match="q and k"):
        pd.delta_rule_recurrent(q, k[..., :2], v, beta)
    with pytest.raises(ValueError, match="beta"):
        pd.delta_rule_chunk(q, k, v, beta[:, :5])
    with pytest.raises(ValueError, match="g"):
        pd.delta_rule_chunk(q, k, v, beta, g[:, :, :1])
    with pytest.raises(ValueError, match="g_atk"):
        pd.precond_delta_rule(q, k, v, beta, g, inp["g_atk"][:, :5], inp["beta_atk"])
    with pytest.raises(ValueError, match="beta_atk"):
        pd.precond_delta_rule(q, k, v, beta, g, inp["g_atk"], inp["beta_atk"][..., :1])
    with pytest.raises(ValueError, match="initial_state"):
        pd.delta_rule_chunk(q, k, v, beta, initial_state=inp["initial_state"][..., :1])
    with pytest.raises(ValueError, match="initial_a_state"):
        pd.precond_delta_rule(q, k, v, beta, initial_a_state=torch.zeros(1, 2, 2, dtype=F64))
    with pytest.raises(ValueError, match="initial_a_state"):
        pd.precond_delta_rule(q, k, v, beta, initial_a_state=-torch.ones(1, 2, 3, dtype=F64))
    with pytest.raises(ValueError, match="k_write"):
        pd.delta_rule_chunk(q, k, v, beta, k_write=k[..., :2])
    with pytest.raises(ValueError, match="center"):
        pd.precond_delta_rule(q, k, v, beta, center=torch.zeros(3, dtype=F64))


def test_bad_values_raise():
    q, k, v, beta, g, inp = _base()
    with pytest.raises(ValueError, match="g"):
        pd.delta_rule_chunk(q, k, v, beta, -g)
    with pytest.raises(ValueError, match="g_atk"):
        pd.precond_delta_rule(q, k, v, beta, g, -inp["g_atk"] + 0.1, inp["beta_atk"])
    with pytest.raises(ValueError, match="beta"):
        pd.delta_rule_chunk(q, k, v, beta + 2.5)
    with pytest.raises(ValueError, match="beta"):
        pd.delta_rule_chunk(q, k, v, -beta)
    with pytest.warns(RuntimeWarning, match="beta > 1"):
        pd.precond_delta_rule(q, k, v, beta * 0 + 1.5, x=1.5)
    with pytest.raises(ValueError, match="x"):
        pd.precond_delta_rule(q, k, v, beta, x=0.9)
    with pytest.raises(ValueError, match="x"):
        pd.precond_delta_rule(q, k, v, beta, x=3.0)
    pd.precond_delta_rule(q, k, v, beta, x=3.0, allow_unstable=True)  # allowed on request
    with pytest.raises(ValueError, match="eps"):
        pd.precond_delta_rule(q, k, v, beta, eps=0.0)
    with pytest.raises(ValueError, match="finite"):
        pd.delta_rule_chunk(q * float("nan"), k, v, beta)
    with pytest.raises(ValueError, match="finite"):
        pd.precond_delta_rule(q, k, v * float("inf"), beta)


def test_bad_options_raise():
    q, k, v, beta, g, inp = _base()
    with pytest.raises(ValueError, match="chunk_size"):
        pd.delta_rule_chunk(q, k, v, beta, chunk_size=0)
    with pytest.raises(TypeError, match="chunk_size"):
        pd.delta_rule_chunk(q, k, v, beta, chunk_size=2.5)
    with pytest.raises(ValueError, match="chunk_size"):
        pd.atk_state(k, inp["g_atk"], inp["beta_atk"], chunk_size=-1)
    with pytest.raises(ValueError, match="mode"):
        pd.precond_delta_rule(q, k, v, beta, mode="fast")
    with pytest.raises(ValueError, match="variant"):
        pd.DeltaMixer(16, variant="mamba")
    with pytest.raises(ValueError, match="precond"):
        pd.DeltaMixer(16, variant="linear", precond=True)
    with pytest.raises(TypeError, match="q"):
        pd.delta_rule_chunk(q.long(), k, v, beta)
    with pytest.raises(TypeError, match="q"):
        pd.delta_rule_chunk(q.numpy(), k, v, beta)
    with pytest.raises(TypeError, match="beta"):
        pd.delta_rule_chunk(q, k, v, None)
    with pytest.raises(ValueError, match="x"):
        pd.squash_preconditioner(torch.ones(3), x=0.5)


def test_bad_exact_and_data_inputs_raise():
    q, k, v, beta, _ = _exact_inputs(T=5)
    for fn in (lambda lam: pd.rls_delta_rule(q, k, v, beta, lam=lam), lambda lam: pd.ridge_state(k, v, lam=lam),
               lambda lam: pd.mesa_readout(q, k, v, lam=lam)):
        with pytest.raises(ValueError, match="lam"):
            fn(0.0)
        with pytest.raises(ValueError, match="lam"):
            fn(-1.0)
    with pytest.raises(ValueError, match="g"):
        pd.rls_delta_rule(q, k, v, beta, torch.zeros(2, 5, 2, 5, dtype=F64))
    with pytest.raises(ValueError, match="n_pairs"):
        pd.mqar_batch(2, 64, 128)
    with pytest.raises(ValueError, match="vocab_size"):
        pd.mqar_batch(2, 1, 3)
    with pytest.raises(ValueError, match="key_zipf"):
        pd.mqar_batch(2, 4, 32, key_zipf=-1.0)
    with pytest.raises(ValueError, match="kappa"):
        pd.regression_stream(10, 4, 2, kappa=0.5)
    with pytest.raises(ValueError, match="d_k"):
        pd.regression_stream(10, 0, 2)
    with pytest.raises(ValueError, match="T"):
        pd.regression_stream(0, 4, 2)
    with pytest.raises(ValueError, match="method"):
        pd.single_pass_recall(k[:, :, 0], v[:, :, 0], "mamba")


# ---------------------------------------------------------------------------------------------
# issues 12, 27, 28: fallback without gates, controls, P4 beyond eigenvalues, presets, stacked training
# ---------------------------------------------------------------------------------------------


def test_no_gates_fallback_is_undecayed_sum_and_m_drifts_to_one_over_x():
    g = torch.Generator().manual_seed(3)
    B, T, H, K, V, x = 1, 3000, 1, 4, 2, 1.5
    q, k, v = (torch.randn(B, T, H, d, generator=g, dtype=F64) for d in (K, K, V))
    beta = torch.full((B, T, H), 0.5, dtype=F64)
    _, _, a_T = pd.precond_delta_rule(q, k, v, beta, x=x, mode="chunk", output_final_state=True)
    torch.testing.assert_close(a_T, pd.l2_normalize(k).square().sum(1), rtol=1e-12, atol=1e-12)  # Σ k²
    m = pd.squash_preconditioner(a_T, -0.2, x)
    m_early = pd.squash_preconditioner(pd.l2_normalize(k)[:, :10].square().sum(1), -0.2, x)
    assert bool((m < m_early).all()) and bool((m < 0.75).all()) and bool((m > 1 / x).all())


def test_nonnormal_write_counterexample():
    r = pd.nonnormal_writes(x=1.5, beta=1.0, steps=60)
    assert r["max_abs_eig"] <= 1 + 1e-9  # eigenvalues inside [-1, 1] ...
    assert r["max_weighted_norm"] <= 1 + 1e-9  # ... and non-expansive in the D^{-1/2} norm for fixed m ...
    assert r["max_norm"] > 1.05  # ... but the Euclidean spectral norm of one write exceeds 1
    assert r["growth"] > 10.0  # and switching m lets an adversary grow the state
    assert pd.nonnormal_writes(x=1.5, beta=1.9, steps=5)["max_weighted_norm"] > 1.5  # beta*x > 2: not even that


def test_mesa_readout_undecayed_lambda_only_equal_without_decay():
    q, k, v, beta, g = _exact_inputs()
    o, _ = pd.rls_delta_rule(q, k, v, beta)
    torch.testing.assert_close(pd.mesa_readout(q, k, v, beta, decay_ridge=False), o, rtol=0, atol=1e-10)
    o_g, _ = pd.rls_delta_rule(q, k, v, beta, g)
    rel = (pd.mesa_readout(q, k, v, beta, g, decay_ridge=False) - o_g).norm() / o_g.norm()
    assert rel > 1e-3
    torch.testing.assert_close(pd.mesa_readout(q, k, v, beta, g), o_g, rtol=0, atol=1e-10)
    with pytest.raises(TypeError, match="decay_ridge"):
        pd.mesa_readout(q, k, v, beta, g, decay_ridge=1)


def test_online_regression_controls():
    r = pd.online_regression(300, 1, 8, 4, 1.0, seed=0)  # isotropic keys
    e = {m: v[:, -1].mean().item() for m, v in r["err"].items()}
    assert {"DeltaNet beta=1", "PDN x=1.5, m mean 1", "Jacobi (bias-corrected)"} <= set(e)
    assert e["PDN x=1.5"] < e["DeltaNet"]  # the step-size effect: no anisotropy to correct
    assert r["m_mean"][:20].mean() > 1.1
    m = pd.ema_preconditioner(pd.l2_normalize(torch.ones(1, 5, 1, 4, dtype=F64), eps=0.0), 0.9, None, 0.0, bias_correct=True)
    torch.testing.assert_close(m, torch.full_like(m, 1 / (4 * (0.25 + 1e-3))))  # corrected average = k² exactly


def test_presets_validate_mqar_sizes_and_dry_run():
    from dataclasses import replace

    for scale in ("smoke", "book", "gpu"):
        p = pd.PRESETS[scale]
        for n in (p.mqar_n_pairs,):
            assert n < p.mqar_vocab // 2
        for n in p.mqar_extra_n_pairs:
            assert n < p.mqar_extra_vocab // 2
        d = p.dry_run()
        assert d.mqar_steps <= 3 and len(d.mqar_seeds) == 1 and d.time_repeat == 1
        for f in ("reg_T", "reg_dk", "time_Ts", "mqar_batch", "mqar_vocab", "mqar_extra_vocab", "mqar_extra_n_pairs",
                  "mqar_head_dim", "recall_ns", "mqar_variants"):
            assert getattr(d, f) == getattr(p, f)
    with pytest.raises(ValueError, match="mqar_extra_n_pairs=64"):
        replace(pd.PRESETS["gpu"], mqar_extra_vocab=128)  # the old gpu preset: n=64 with 128 tokens
    with pytest.raises(ValueError, match="n_pairs"):
        pd.mqar_benchmark(["GDN"], 1, 64, vocab_size=128)  # validated before any training


def test_gpu_dry_preset_mqar_shapes(one_thread):
    p = pd.PRESETS["gpu"].dry_run()
    n = max(p.mqar_extra_n_pairs)
    out = pd.mqar_benchmark(["PGDN"], 1, n, seeds=p.mqar_seeds, batch_size=4, vocab_size=p.mqar_extra_vocab,
                            head_dim=p.mqar_extra_head_dim, lr=p.mqar_lr)
    assert out["results"]["acc"].between(0, 1).all()


def test_stacked_training_equals_one_run_per_seed(one_thread):
    kw = dict(vocab_size=32, d_model=16, n_heads=2, head_dim=8, chunk_size=4)
    seeds = (0, 1)
    ref = []
    for s in seeds:
        m = pd.build_model("PGDN", seed=s, **kw).double()
        ref.append((m, pd.train_mqar(m, 6, 4, 3, 32, 1e-2, seed=s, log_every=3)))
    ms = [pd.build_model("PGDN", seed=s, **kw).double() for s in seeds]
    hs = pd.train_mqar_stacked(ms, 6, 4, 3, 32, 1e-2, seeds=seeds, log_every=3)
    for (m_ref, h_ref), m, h in zip(ref, ms, hs):
        assert h["step"] == h_ref["step"] == [3, 6]
        assert max(abs(a - b) for a, b in zip(h["loss"], h_ref["loss"])) < 1e-10
        for p_ref, p in zip(m_ref.parameters(), m.parameters()):
            torch.testing.assert_close(p, p_ref, rtol=1e-7, atol=1e-9)
    with pytest.raises(ValueError, match="seeds"):
        pd.train_mqar_stacked(ms, 2, 4, 3, 32, seeds=(0,))
    with pytest.raises(ValueError, match="models"):
        pd.train_mqar_stacked([], 2)


@pytest.mark.cuda
def test_cuda_matches_cpu_recurrent_and_chunk():
    inp = random_inputs(2, 70, 2, 16, 8, "scalar", dtype=F64, seed=5)
    names = ("q", "k", "v", "beta", "g", "g_atk", "beta_atk")
    outs = {}
    for dev in ("cpu", "cuda"):
        t = {n: inp[n].to(dev) for n in names}
        for mode in ("recurrent", "chunk"):
            o, S, a = pd.precond_delta_rule(*(t[n] for n in names), center=inp["center"].to(dev), mode=mode,
                                            chunk_size=16, output_final_state=True)
            outs[(dev, mode)] = (o.cpu(), S.cpu(), a.cpu())
    for mode in ("recurrent", "chunk"):
        for a, b in zip(outs[("cpu", mode)], outs[("cuda", mode)]):
            torch.testing.assert_close(b, a, rtol=0, atol=1e-10)
    torch.testing.assert_close(outs[("cuda", "chunk")][0], outs[("cpu", "recurrent")][0], rtol=0, atol=1e-10)
