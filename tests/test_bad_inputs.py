"""Bad input to the public API, swept with Hypothesis (issue 29, point 11).

Each :class:`bad_inputs.Case` is one public function with a valid call; Hypothesis draws one
argument and a bad version of it (None, a string, NaN, +-inf, empty, an extra dimension, half
precision, ...). The function must raise ValueError or TypeError naming that argument, or
return a finite result. A new chapter adds its cases to ``CASES`` (see ``tests/bad_inputs.py``).
"""

from __future__ import annotations

import icml26.ba_solver as ba
import icml26.bandpo as bp
import icml26.cgmt as cg
import icml26.dp_c4 as dpc4
import icml26.precond_delta as pd
import pytest
import torch
from bad_inputs import Case, check_case, corruptions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icml26 import watermark as wm
from icml26.special import baselines as sp_base
from icml26.special import method as sp

pytestmark = pytest.mark.usefixtures("one_thread")

_gen = torch.Generator().manual_seed(0)
B, T = 3, 5
LOGP = -1.0 - torch.rand(B, T, generator=_gen)
N_CLIENTS, P = 4, 6
W = torch.randn(P, generator=_gen)
LOCAL = torch.randn(N_CLIENTS, P, generator=_gen)
QKV = torch.nn.functional.normalize(torch.randn(1, 8, 2, 4, generator=_gen), dim=-1)
CGMT_MODEL = cg.signal_strength_model(200, generator=torch.Generator().manual_seed(0))

CASES = [
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
