"""Unit identities (spec Sec. 8, claims 1-7) and bad inputs (Sec. 9) of icml26.watermark."""

from __future__ import annotations

import math

import icml26.watermark as m
import numpy as np
import pytest
import torch
from icml26.watermark import experiments as ex
from scipy import stats


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# -- claim 1: closed-form KL ---------------------------------------------------------------------

def test_kl_closed_form_matches_brute_force():
    g = _gen(1)
    p = torch.distributions.Dirichlet(torch.full((64,), 0.3, dtype=torch.float64)).sample((50,))
    mask = m.random_green_masks(64, 0.3, 50, g).double()
    for delta in (0.0, 0.5, 2.0, 5.0):
        q = torch.softmax(torch.log(p) + delta * mask, -1)
        P = (p * mask).sum(1)
        fwd = (q * (torch.log(q) - torch.log(p))).sum(1)
        rev = (p * (torch.log(p) - torch.log(q))).sum(1)
        assert torch.allclose(m.kl_closed_form(P, delta), fwd, atol=1e-10, rtol=0)
        assert torch.allclose(m.kl_closed_form(P, delta, "reverse"), rev, atol=1e-10, rtol=0)
        assert torch.allclose(m.phi(P, delta), (q * mask).sum(1), atol=1e-12)


def test_kl_zero_at_deterministic_and_monotone():
    for P in (0.0, 1.0):
        assert float(m.kl_closed_form(P, 3.0)) == pytest.approx(0.0, abs=1e-12)
    d = [float(m.kl_closed_form(0.3, x)) for x in (0.5, 1.0, 2.0, 4.0)]
    assert all(a < b for a, b in zip(d, d[1:]))
    # near P = gamma: gamma (1 - gamma) delta^2 / 2
    assert float(m.kl_closed_form(0.3, 0.01)) == pytest.approx(0.3 * 0.7 * 1e-4 / 2, rel=1e-2)


# -- claim 2: green matrix -----------------------------------------------------------------------

def test_green_matrix_rows_and_keys():
    gm = m.green_matrix(256, 0.1, key=7)
    assert gm.shape == (257, 256)
    assert torch.all(gm.sum(1) == 26) and m.effective_gamma(256, 0.1) == pytest.approx(26 / 256)
    assert torch.equal(gm, m.green_matrix(256, 0.1, key=7))
    assert not torch.equal(gm, m.green_matrix(256, 0.1, key=8))


# -- claim 3: mu1 exact, sandwich, lower bound ---------------------------------------------------

@pytest.mark.parametrize("mm", [1, 2, 5, 40])
def test_mu1_uniform_exact_vs_monte_carlo(mm):
    n_vocab, gamma, delta = 100, 0.3, 1.5
    out = m.sample_iid("uniform", mm, n_vocab, 200_000, gamma, delta, _gen(mm))
    mc, se = float(out["green"].mean()), float(out["green"].std()) / math.sqrt(200_000)
    exact = m.mu1_uniform_exact(n_vocab, gamma, mm, delta)
    assert abs(mc - exact) <= 3 * se + 1e-12
    g = m.effective_gamma(n_vocab, gamma)
    assert g - 1e-12 <= exact <= m.mu_max(g, delta) + 1e-12
    p = m.uniform_support(n_vocab, mm, 1, _gen(0))
    assert float(m.kgw_lower_bound(p, g, delta)) <= exact + 1e-12
    if mm == 1:
        assert exact == pytest.approx(g, abs=1e-12)
        assert m.kl_uniform_exact(n_vocab, gamma, 1, delta) == pytest.approx(0.0, abs=1e-12)


def test_lower_bound_dirichlet_within_monte_carlo():
    n_vocab, gamma, delta, rows = 50, 0.25, 2.0, 20_000
    g = _gen(3)
    p = torch.distributions.Dirichlet(torch.full((n_vocab,), 0.1, dtype=torch.float64)).sample((rows,))
    mask = m.random_green_masks(n_vocab, gamma, rows, g).double()
    q = torch.softmax(torch.log(p.clamp_min(1e-300)) + delta * mask, -1)
    green = (torch.rand(rows, generator=g, dtype=torch.float64) < (q * mask).sum(1)).double()
    lb = float(m.kgw_lower_bound(p, gamma, delta).mean())
    se = float(green.std()) / math.sqrt(rows)
    assert lb <= float(green.mean()) + 4 * se
    assert float(green.mean()) <= m.mu_max(gamma, delta) + 4 * se


# -- claims 4, 5: power ----------------------------------------------------------------------------

@pytest.mark.parametrize("n,gamma,alpha", [(50, 0.25, 0.01), (200, 0.1, 1e-3), (37, 0.5, 0.05)])
def test_exact_power_at_null_is_fpr_and_threshold_smallest(n, gamma, alpha):
    assert float(m.power_exact(gamma, gamma, n, alpha)) <= alpha
    c = int(m.binomial_threshold(n, gamma, alpha))
    assert stats.binom.sf(c - 1, n, gamma) <= alpha < stats.binom.sf(c - 2, n, gamma)


def test_power_normal_at_required_length():
    for mu1, gamma in ((0.4, 0.25), (0.7, 0.5), (0.2, 0.1)):
        T = m.required_length(mu1, gamma, 0.01, 0.9)
        assert float(m.power_normal(mu1, gamma, T, 0.01)) == pytest.approx(0.9, abs=1e-9)


def test_fpr_of_z4_and_binomial_tail_matches_scipy():
    tab = ex.fpr_table(200, 0.25, (4.0,))
    assert f"{tab['exact'][0]:.3g}" == "6.15e-05" and f"{tab['normal'][0]:.3g}" == "3.17e-05"
    k = torch.arange(0, 60, dtype=torch.float64)
    ours = m.binomial_sf(k, 57, 0.3).numpy()
    assert np.allclose(ours, stats.binom.sf(k.numpy() - 1, 57, 0.3), rtol=1e-9, atol=1e-300)


# -- claim 6: de-duplication ----------------------------------------------------------------------

def test_first_occurrence_matches_python_reference():
    g = _gen(4)
    tok = torch.randint(0, 5, (20, 30), generator=g)
    prev = torch.cat([torch.full((20, 1), 5), tok[:, :-1]], 1)
    mask = m.first_occurrence_mask(prev, tok, 6)
    for b in range(20):
        seen, ref = set(), []
        for a, s in zip(prev[b].tolist(), tok[b].tolist()):
            ref.append((a, s) not in seen)
            seen.add((a, s))
        assert mask[b].tolist() == ref


def test_detect_counts_and_short_sequence_warning():
    gm = m.green_matrix(16, 0.5, 1)
    tok = torch.tensor([[3, 3, 3, 3]])
    d = m.detect(tok, gm, 0.5, 16)
    assert int(d["n_scored"]) == 2  # (BOS,3) and (3,3)
    d2 = m.detect(tok, gm, 0.5, 16, dedup=False, method="normal")
    assert int(d2["n_scored"]) == 4 and 0 <= float(d2["p_value"]) <= 1


# -- claim 7: delta = 0 leaves sampling unchanged --------------------------------------------------

def test_delta_zero_is_unwatermarked():
    t = m.HMMTeacher(n_states=4, vocab_size=32, temperature=0.8, seed=1)
    a = t.generate(8, 20, _gen(5))
    b = t.generate(8, 20, _gen(5), green_mat=m.green_matrix(32, 0.5, 3), delta=0.0)
    assert torch.equal(a["tokens"], b["tokens"])
    assert float(b["kl"].abs().max()) < 1e-12
    assert torch.allclose(t.nll(a["tokens"]), a["nll"], atol=1e-10)


def test_calibrated_prediction_of_uniform_calibration_is_high_entropy_limit():
    cal = m.high_entropy_calibration(100, 50.0)
    pr = m.predict(cal, 0.25, 1.0)
    assert pr["mu1"] == pytest.approx(m.mu_max(0.25, 1.0), abs=1e-6)
    assert pr["kl_forward"] == pytest.approx(m.kl_max(0.25, 1.0), abs=1e-6)


def test_selection_and_pareto():
    p = m.softmax_gaussian(128, 0.5, 500, _gen(6)).float()
    cal = m.calibrate(p, 80.0, n_masks=8)
    res = m.select_min_distortion(cal, (0.25, 0.5), 0.01, 0.9)
    assert res["feasible"] and res["power"] == pytest.approx(0.9, abs=1e-6)
    bad = m.select_min_distortion(cal, (0.25,), 0.01, 0.9, delta_max=0.01)
    assert not bad["feasible"] and "unreachable" in bad["message"]
    b = m.select_max_power(cal, (0.25, 0.5), 0.01, budget=0.05)
    assert max(r["kl_forward"] for r in b["per_gamma"]) <= 0.05 + 1e-9
    assert m.pareto_mask([1.0, 2.0, 0.5], [0.5, 0.9, 0.4]).tolist() == [True, True, True]
    assert m.pareto_mask([1.0, 2.0], [0.9, 0.8]).tolist() == [True, False]


# -- Sec. 9: bad inputs -----------------------------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda: m.green_matrix(256, 0.0, 1),
    lambda: m.green_matrix(256, 1.0, 1),
    lambda: m.green_matrix(10, 0.01, 1),      # empty list
    lambda: m.green_matrix(10, 0.99, 1),      # full list
    lambda: m.phi(0.5, -1.0),
    lambda: m.phi(0.5, float("inf")),
    lambda: m.power_normal(0.5, 0.25, 100, 0.0),
    lambda: m.power_exact(0.5, 0.25, 0, 0.01),
    lambda: m.required_length(0.5, 0.25, 0.01, 0.005),
    lambda: m.calibrate(torch.tensor([[0.5, 0.6]]), 10.0),
    lambda: m.calibrate(torch.tensor([[-0.1, 1.1]]), 10.0),
    lambda: m.calibrate(torch.tensor([[0.5, 0.5]]), 0.0),
    lambda: m.select_min_distortion(m.high_entropy_calibration(10, 10.0), (), 0.01, 0.9),
    lambda: m.select_min_distortion(m.high_entropy_calibration(10, 10.0), (0.5,), 0.01, 0.9, delta_max=0.0),
    lambda: m.uniform_support(10, 0, 1),
    lambda: m.uniform_support(10, 11, 1),
    lambda: m.zipf(10, -1.0, 1),
    lambda: m.softmax_gaussian(10, 0.0, 1),
    lambda: m.HMMTeacher(stickiness=1.0),
    lambda: m.HMMTeacher(n_states=0),
    lambda: m.HMMTeacher(temperature=-1.0),
    lambda: m.green_indicators(torch.tensor([[0, 1]]), torch.tensor([[0, 0]]), torch.ones(3)),
    lambda: m.green_indicators(torch.tensor([[0, 1]]), torch.tensor([[0, 0]]), torch.full((3, 4), 0.5)),
    lambda: m.green_indicators(torch.tensor([[0, 9]]), torch.tensor([[0, 0]]), m.green_matrix(4, 0.5, 1)),
    lambda: m.green_indicators(torch.tensor([[0, 1]]), torch.tensor([[0, 7]]), m.green_matrix(4, 0.5, 1)),
    lambda: m.detect(torch.tensor([[0, 1]]), m.green_matrix(8, 0.5, 1), 0.25, 8),  # gamma mismatch
    lambda: m.detect(torch.tensor([[0, 1]]), m.green_matrix(8, 0.5, 1), 0.5, 9),   # context0 not a row
])
def test_bad_inputs_raise_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError):
        m.green_matrix(256, "0.25", 1)
    with pytest.raises(TypeError):
        m.detect([[0, 1]], m.green_matrix(8, 0.5, 1), 0.5, 8)


def test_empty_scored_sequence_warns():
    # a sequence cannot have zero positions, but z_score of zero scored tokens is nan
    assert math.isnan(float(m.z_score(0.0, 0.0, 0.25)))


def test_presets_dry_run():
    for cfg in m.PRESETS.values():
        dry = cfg.dry_run()
        assert type(dry) is type(cfg) and dry.vocab_size == cfg.vocab_size and dry.T == cfg.T
        assert set(dry.gammas) <= set(cfg.gammas)


@pytest.mark.cuda
def test_cuda_matches_cpu():
    """Watermarked HMM generation and detection on cuda equal the CPU run (same generator, same key)."""
    t_cpu = m.HMMTeacher(n_states=8, vocab_size=64, temperature=0.8, seed=2)
    t_gpu = m.HMMTeacher(n_states=8, vocab_size=64, temperature=0.8, seed=2).to("cuda")
    gm = m.green_matrix(64, 0.25, 11)
    a = t_cpu.generate(32, 40, _gen(9), green_mat=gm, delta=1.5)
    b = t_gpu.generate(32, 40, _gen(9), green_mat=gm.cuda(), delta=1.5)
    same = (a["tokens"] == b["tokens"].cpu()).double().mean()
    assert float(same) > 0.95  # float sums may flip a rare draw at a CDF boundary
    da = m.detect(a["tokens"], gm, 0.25, 64)
    db = m.detect(a["tokens"].cuda(), gm.cuda(), 0.25, 64)
    assert torch.allclose(da["z"], db["z"].cpu(), atol=1e-9)
    assert torch.allclose(da["p_value"], db["p_value"].cpu(), rtol=1e-9)


# -- green-list size rule: the book rounds, KGW truncates (issue 37.8) ------------------------------

def test_green_size_conventions():
    assert m.green_size(256, 0.1) == 26 and m.green_size(256, 0.1, "kgw") == 25
    assert m.green_size(256, 0.25) == m.green_size(256, 0.25, "kgw") == 64
    assert torch.all(m.green_matrix(256, 0.1, 7, convention="kgw").sum(1) == 25)
    assert m.effective_gamma(256, 0.1, "kgw") == pytest.approx(25 / 256)


def test_detect_kgw_convention_matches_existing_behaviour_and_kgw_statistic():
    toks = torch.randint(0, 256, (12, 80), generator=_gen(11))
    # gamma N whole: the two conventions give identical lists and identical detection
    gm = m.green_matrix(256, 0.25, 5)
    assert torch.equal(gm, m.green_matrix(256, 0.25, 5, convention="kgw"))
    a = m.detect(toks, gm, 0.25, 256)
    b = m.detect(toks, gm, 0.25, 256, convention="kgw")
    assert all(torch.equal(a[k], b[k]) for k in a)
    # gamma N fractional: KGW's lists have int(gamma N) tokens and its z uses the nominal gamma
    gk = m.green_matrix(256, 0.1, 5, convention="kgw")
    d = m.detect(toks, gk, 0.1, 256, dedup=False, method="normal", convention="kgw")
    prev = torch.cat([torch.full_like(toks[:, :1], 256), toks[:, :-1]], 1)
    S = gk[prev, toks].sum(1).double()
    z = (S - 0.1 * 80) / math.sqrt(80 * 0.1 * 0.9)
    assert torch.allclose(d["z"], z, atol=1e-12)
    assert np.allclose(d["p_value"].numpy(), stats.norm.sf(z.numpy()), rtol=1e-12)
    with pytest.raises(ValueError, match="convention"):   # a round-size matrix is not KGW's
        m.detect(toks, m.green_matrix(256, 0.1, 5), 0.1, 256, convention="kgw")
    with pytest.raises(ValueError, match="convention"):
        m.detect(toks, gk, 0.1, 256)


@pytest.mark.parametrize("bad", ["floor", "KGW", None, 1])
def test_bad_convention_raises(bad):
    toks = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="convention"):
        m.detect(toks, m.green_matrix(16, 0.25, 3), 0.25, 16, convention=bad)
    with pytest.raises(ValueError, match="convention"):
        m.green_matrix(16, 0.25, 3, convention=bad)


# -- power averaged over the scored counts (Eq. 3.4c', issue 37.7) ----------------------------------

def test_power_mixture_is_the_average_exact_power():
    counts = np.array([40, 55, 55, 61, 90])
    ours = m.power_mixture(0.4, 0.25, counts, 0.01)
    ref = np.mean([float(m.power_exact(0.4, 0.25, n, 0.01)) for n in counts])
    assert ours == pytest.approx(ref, abs=1e-12)
    assert m.power_mixture(0.4, 0.25, [70] * 3, 0.01) == pytest.approx(float(m.power_exact(0.4, 0.25, 70, 0.01)))
    for bad in ([], [0, 5], [2.5], [float("nan")]):
        with pytest.raises(ValueError, match="counts"):
            m.power_mixture(0.4, 0.25, bad, 0.01)


def test_selection_with_the_mixture_power():
    p = m.softmax_gaussian(128, 0.5, 500, _gen(6)).float()
    counts = np.array([30, 50, 70, 90, 110])
    cal = m.calibrate(p, float(counts.mean()), n_masks=8, counts=counts)
    res = m.select_min_distortion(cal, (0.25, 0.5), 0.01, 0.9, power_model="mixture")
    assert res["feasible"] and res["power_mixture"] == pytest.approx(0.9, abs=1e-6)
    assert res["power_pred"] == res["power_mixture"]
    pr = m.predict(cal, res["gamma"], res["delta"])
    g = m.effective_gamma(128, res["gamma"])
    assert pr["power_mixture"] == pytest.approx(m.power_mixture(pr["mu1"], g, counts, 0.01), abs=1e-12)
    assert m.predict(cal, 0.25, 1.0, T=70.0)["power_mixture"] == m.predict(cal, 0.25, 1.0, T=70.0)["power_exact"]
    with pytest.raises(ValueError, match="power_model"):
        m.select_min_distortion(cal, (0.25,), 0.01, 0.9, power_model="binomial")


# -- the notebook's comparison helpers ----------------------------------------------------------------

def test_frontier_kl_interpolates_the_non_dominated_points():
    kl = [0.1, 0.2, 0.4, 0.3]
    power = [0.5, 0.9, 1.0, 0.8]         # (0.3, 0.8) is dominated by (0.2, 0.9)
    assert ex.frontier_kl(kl, power, 0.9) == pytest.approx(0.2)
    assert ex.frontier_kl(kl, power, 0.95) == pytest.approx(0.3)
    assert ex.frontier_kl(kl, power, 0.4) == pytest.approx(0.1)
    assert math.isnan(ex.frontier_kl(kl, power, 1.01))


def test_steering_control_identity_and_seeded_selection():
    import dataclasses
    cfg = dataclasses.replace(m.preset("smoke"), vocab_size=32, n_states=4, n_null=40, n_cal=256, n_masks=4,
                              n_seq_wm=20, n_keys=2, T=30, n_seq_seed=20, gammas=(0.25, 0.5))
    t = m.HMMTeacher(cfg.n_states, cfg.vocab_size, 0.6, seed=1)
    prof = ex.profile(t, cfg, _gen(2))
    st = ex.steering_control(t, prof, 0.5, 2.0, cfg, _gen(3))
    assert st["kl_key"] == pytest.approx(st["kl"], abs=1e-6)
    assert 0 < st["P_random"] < 1 and 0 < st["P_key"] < 1
    sd = ex.seeded_selection(t, cfg, range(2))
    assert len(sd) == 4 and set(sd.rule) == {"algorithm A", "A, normal power"}
    assert np.allclose(sd[sd.rule == "algorithm A"].power_mixture, 0.9, atol=1e-6)
    eq = ex.seeded_selection(t, cfg, range(2), default=(0.25, 2.0))
    assert len(eq) == 8 and set(eq.rule) >= {"A at the default's predicted power", "default"}
    by = eq.pivot(index="seed", columns="rule", values="power_mixture")  # A's target is the default's prediction
    assert np.allclose(by["A at the default's predicted power"], np.minimum(by["default"], 1 - 1e-9), atol=1e-6)


def test_high_entropy_limit_uses_the_requested_power_model():
    import dataclasses
    cfg = dataclasses.replace(m.preset("smoke"), gammas=(0.1, 0.25, 0.5))
    counts = np.array([40, 55, 60, 60, 72])
    cal = m.high_entropy_calibration(256, float(counts.mean()), counts)
    mix, nrm = ex.high_entropy_limit(cal, cfg), ex.high_entropy_limit(cal, cfg, power_model="normal")
    assert list(mix.gamma) == list(cfg.gammas) and mix.kl_pred.notna().all()
    for g, d in zip(mix.gamma, mix.delta):  # the exact power (3.4c') over the counts reaches the target
        assert m.predict(cal, g, d, cfg.alpha)["power_mixture"] == pytest.approx(cfg.target_power, abs=1e-6)
    assert not np.allclose(mix.delta, nrm.delta)
    with pytest.raises(ValueError, match="power_model"):
        ex.high_entropy_limit(cal, cfg, power_model="bogus")
