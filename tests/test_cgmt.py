"""Unit identities (spec Sec. 8, claims 1-7 and 14) and bad inputs (Sec. 9) of icml26.cgmt."""

from __future__ import annotations

import math
import warnings

import icml26.cgmt as m
import numpy as np
import pytest
import torch
from icml26.cgmt.method import DTYPE
from scipy.optimize import minimize_scalar

# Tiny tensors: one intra-op thread is fastest (fixture in conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model_a():
    return m.signal_strength_model(400, generator=torch.Generator().manual_seed(0))


# ---------------------------------------------------------------------------------------------
# claim 1: proximal maps
# ---------------------------------------------------------------------------------------------
def test_prox_logistic_optimality():
    v = torch.linspace(-30, 30, 121, dtype=DTYPE)[:, None]
    kappa = torch.tensor([1e-3, 0.1, 1.0, 5.0, 50.0], dtype=DTYPE)[None, :]
    for y in (-1.0, 1.0):
        r = m.prox("logistic", v, torch.tensor(y, dtype=DTYPE), kappa)
        resid = y * m.loss_d1("logistic", y * r) + (r - v) / kappa
        assert float(resid.abs().max()) < 1e-10


def _right_derivative(loss, s, v, kappa, y):
    """phi'(s+) for phi(s) = L(y s) + (s - v)^2 / (2 kappa), from the definition of L."""
    if loss == "square":
        dl = -y * (1 - y * s)
    else:  # hinge: d/ds max(0, 1 - y s) from the right
        u = 1 - y * s
        dl = -y if u > 0 else (max(0.0, -y) if u == 0 else 0.0)
    return dl + (s - v) / kappa


@pytest.mark.parametrize("loss", ["square", "hinge"])
def test_prox_closed_forms_match_brute_force(loss):
    for v in (-2.3, -0.4, 0.2, 0.7, 0.95, 1.6):
        for kappa in (0.05, 0.5, 2.0):
            for y in (-1.0, 1.0):
                r = float(m.prox(loss, torch.tensor(v, dtype=DTYPE), torch.tensor(y, dtype=DTYPE), kappa))
                lo, hi = v - kappa - 2, v + kappa + 2                 # brute force: bisection on the
                for _ in range(200):                                 # monotone right derivative
                    mid = 0.5 * (lo + hi)
                    lo, hi = (mid, hi) if _right_derivative(loss, mid, v, kappa, y) < 0 else (lo, mid)
                assert abs(0.5 * (lo + hi) - r) < 1e-8

                def phi(s, v=v, kappa=kappa, y=y):
                    return float(m.loss_value(loss, torch.tensor(y * s, dtype=DTYPE))) + (s - v) ** 2 / (2 * kappa)

                res = minimize_scalar(phi, bounds=(v - kappa - 2, v + kappa + 2), method="bounded",
                                      options={"xatol": 1e-12})
                mo = float(m.moreau(loss, torch.tensor(v, dtype=DTYPE), torch.tensor(y, dtype=DTYPE), kappa))
                assert abs(mo - phi(0.5 * (lo + hi))) < 1e-12 and mo <= res.fun + 1e-12


# ---------------------------------------------------------------------------------------------
# claim 2: square-loss kappa
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.5, 2.0, 4.0])
def test_square_kappa_closed_form(model_a, alpha):
    state = m.solve_fixed_point(alpha, model_a, "square", m.ridge(0.1))
    assert state.converged
    assert abs(state.kappa - m.square_kappa_closed_form(alpha, 0.1)) < 1e-9


def test_square_kappa_random_matrix():
    p, alpha, lam = 400, 4.0, 0.1
    g = torch.Generator().manual_seed(1)
    n = int(alpha * p)
    X = torch.randn(n, p, generator=g, dtype=DTYPE)                   # pure noise
    y = torch.where(torch.rand(n, generator=g, dtype=DTYPE) < 0.5, -1.0, 1.0).to(DTYPE)
    theta = torch.zeros(p, dtype=DTYPE)
    kappa_hat = float(m.hessian_trace_inv(X, y, theta, "square", m.ridge(lam)))
    kappa = m.square_kappa_closed_form(alpha, lam)
    assert abs(kappa_hat / kappa - 1) < 0.01


# ---------------------------------------------------------------------------------------------
# claim 3: the cvxpy min-max and the fixed point agree
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["logistic", "square"])
def test_ao_cvxpy_matches_fixed_point(loss):
    model = m.signal_strength_model(100, generator=torch.Generator().manual_seed(0))
    fp = m.solve_fixed_point(2.0, model, loss, m.ridge(0.1), n_quad=41)
    ao = m.solve_ao_cvxpy(2.0, model, loss, 0.1, n_quad=41)
    for a, b in ((float(ao.A[0]), float(fp.A[0])), (ao.c, fp.c), (ao.tau, fp.tau)):
        assert abs(a - b) <= 1e-3 * abs(b)
    t_fp = math.sqrt(fp.c / 2.0) / fp.kappa                         # = sqrt(E g^2)
    assert abs(ao.t_star - t_fp) <= 1e-3 * t_fp
    assert abs(t_fp - math.sqrt(fp.Eg2)) <= 1e-6 * t_fp


# ---------------------------------------------------------------------------------------------
# claim 4: torch Newton ERM agrees with cvxpy
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["logistic", "square"])
def test_fit_erm_matches_cvxpy(loss):
    model = m.signal_strength_model(50, generator=torch.Generator().manual_seed(2))
    X, y = model.sample(100, torch.Generator().manual_seed(3))
    theta = m.fit_erm(X, y, loss, m.ridge(0.1))
    ref = m.fit_erm_cvxpy(X, y, loss, 0.1)
    assert np.abs(theta.numpy() - ref).max() < 1e-5


def test_fit_erm_batched_equals_single():
    model = m.signal_strength_model(30, generator=torch.Generator().manual_seed(2))
    X, y = model.sample(60, torch.Generator().manual_seed(3), batch=2)
    both = m.fit_erm(X, y, "logistic", m.logcosh(0.5))
    one = m.fit_erm(X[1], y[1], "logistic", m.logcosh(0.5))
    assert float((both[1] - one).abs().max()) < 1e-10


def _fit_erm_halving(X, y, loss, reg, tol=1e-8, max_iter=100):
    """fit_erm as it was before issue 43: the Armijo step halved with a host read per halving."""
    from icml26.cgmt.method import erm_objective, loss_d1, loss_d2

    B, n, p = X.shape
    theta = torch.zeros(B, p, dtype=DTYPE)
    F, iters = erm_objective(X, y, theta, loss, reg), 0
    for it in range(1, max_iter + 1):
        iters = it
        t = y * torch.einsum("bnp,bp->bn", X, theta)
        grad = torch.einsum("bnp,bn->bp", X, y * loss_d1(loss, t)) / n + reg.grad(theta)
        if float(grad.abs().max()) < tol:
            break
        H = (X * (loss_d2(loss, t) / n)[..., None]).transpose(1, 2) @ X + torch.diag_embed(reg.hess_diag(theta))
        delta = -torch.cholesky_solve(grad[..., None], torch.linalg.cholesky(H))[..., 0]
        gd, step = (grad * delta).sum(1), torch.ones(B, dtype=DTYPE)
        for _ in range(40):
            ok = erm_objective(X, y, theta + step[:, None] * delta, loss, reg) <= F + 1e-4 * step * gd + 1e-13 * (1 + F.abs())
            if bool(ok.all()):
                break
            step = torch.where(ok, step, step / 2)
        theta = theta + step[:, None] * delta
        F = erm_objective(X, y, theta, loss, reg)
    return theta, iters


@pytest.mark.parametrize("loss", ["logistic", "square"])
def test_fit_erm_line_search_equals_halving(loss):
    """Issue 43: all Armijo step sizes tested at once give the steps of halving with a read per halving
    (bit for bit here, on data where the first iterations backtrack)."""
    from icml26.cgmt import method

    g = torch.Generator().manual_seed(1)
    X = torch.randn(3, 30, 40, generator=g, dtype=DTYPE) / 40 ** 0.5
    y = torch.sign(X @ torch.randn(40, generator=g, dtype=DTYPE) + 0.3 * torch.randn(3, 30, generator=g, dtype=DTYPE))
    steps = []
    real = method._armijo_step

    def spy(*a):
        steps.append(real(*a))
        return steps[-1]

    reg = m.pseudo_huber(0.1, 0.05)
    import unittest.mock
    with unittest.mock.patch.object(method, "_armijo_step", spy):
        theta, info = m.fit_erm(X, y, loss, reg, return_info=True)
    ref, iters = _fit_erm_halving(X, y, loss, reg)
    assert torch.equal(theta, ref) and info["iterations"] == iters
    assert float(torch.stack(steps).min()) < 1                  # the line search did backtrack


def test_fit_erm_failed_cholesky_raises():
    X = torch.randn(1, 30, 5, generator=torch.Generator().manual_seed(0), dtype=DTYPE)
    y = torch.ones(1, 30, dtype=DTYPE)
    nonconvex = m.SeparableReg("concave", 1.0, lambda t: -t ** 2, lambda t: -2 * t, lambda t: -2 * torch.ones_like(t), -2.0)
    with pytest.raises(torch.linalg.LinAlgError, match="positive-definite"):
        m.fit_erm(X, y, "square", nonconvex)


# ---------------------------------------------------------------------------------------------
# claims 5, 6, 14: fixed point identities
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [1.0, 4.0])
def test_square_loss_estimator_is_universal(model_a, alpha):
    two = m.solve_fixed_point(alpha, model_a, "square", m.ridge(0.1))
    ge = m.solve_fixed_point(alpha, model_a, "square", m.ridge(0.1), gaussian_equivalent=True)
    assert float((two.w - ge.w).abs().max()) < 1e-8
    assert abs(two.c - ge.c) < 1e-8 and abs(two.kappa - ge.kappa) < 1e-8
    # ... but the test error is not (the score law differs)
    assert m.test_error(two, model_a.law) - m.test_error(ge, model_a.law.gaussian_equivalent()) > 1e-3


def test_nested_and_naive_agree(model_a):
    nested = m.solve_fixed_point(2.0, model_a, "logistic", m.ridge(0.1))
    naive = m.solve_fixed_point(2.0, model_a, "logistic", m.ridge(0.1), inner="naive")
    assert nested.converged and naive.converged
    assert float((nested.w - naive.w).abs().max()) < 1e-8
    assert abs(nested.c - naive.c) < 1e-8 and abs(nested.kappa - naive.kappa) < 1e-8


def test_naive_diverges_for_square_loss(model_a):
    with pytest.warns(RuntimeWarning, match="did not converge"):
        naive = m.solve_fixed_point(2.0, model_a, "square", m.ridge(0.1), inner="naive", max_iter=300)
    assert not naive.converged
    assert m.solve_fixed_point(2.0, model_a, "square", m.ridge(0.1)).converged


@pytest.mark.parametrize("alpha", [2.0, 4.0])
def test_errors_in_range_and_breakdown_sign(model_a, alpha):
    st = m.solve_fixed_point(alpha, model_a, "logistic", m.ridge(0.1))
    ge, err_ge = m.gaussian_equivalent_prediction(alpha, model_a, "logistic", m.ridge(0.1))
    err = m.test_error(st, model_a.law)
    assert 0 < err < 0.5 and 0 < err_ge < 0.5
    assert err > err_ge


def test_score_density_integrates_to_one(model_a):
    st = m.solve_fixed_point(2.0, model_a, "logistic", m.ridge(0.1))
    grid = torch.linspace(-12, 12, 4001, dtype=DTYPE)
    for y in (-1, 1):
        dens = m.score_density(st, model_a.law, grid, y)
        assert abs(float(torch.trapezoid(dens, grid)) - 1) < 1e-8
        mean, std = m.moment_matched_gaussian(st, model_a.law, y)
        assert abs(float(torch.trapezoid(grid * dens, grid)) - mean) < 1e-8


def test_gaussian_equivalent_preserves_class_moments(model_a):
    skew = m.skewed_factor_model(50, generator=torch.Generator().manual_seed(0))
    for law in (model_a.law, skew.law):
        ge = law.gaussian_equivalent(21)
        for y in (-1, 1):
            a, b = law.class_moments(y), ge.class_moments(y)
            assert abs(a[0] - b[0]) < 1e-12
            assert float((a[1] - b[1]).abs().max()) < 1e-10 and float((a[2] - b[2]).abs().max()) < 1e-10
        y, f = law.sample_gaussian_equivalent(200000, torch.Generator().manual_seed(0))
        assert abs(float(f[y == 1].mean(0)[0]) - float(law.class_moments(1)[1][0])) < 0.02


# ---------------------------------------------------------------------------------------------
# claim 7: the quadratic equivalent of a C^2 regulariser
# ---------------------------------------------------------------------------------------------
def test_equivalent_quadratic(model_a):
    st = m.solve_fixed_point(2.0, model_a, "logistic", m.ridge(1.0))
    mu = model_a.V @ st.w                                              # delocalised mean (p=400)
    b, h0 = m.equivalent_quadratic(m.ridge(0.7), mu)
    assert bool((b == 0).all()) and bool((h0 == 0.7).all())
    b, _ = m.equivalent_quadratic(m.logcosh(1.0), mu)
    assert float(b.norm()) < 1e-2 * float(mu.norm())


def test_tilted_ridge_erm_equals_logcosh_erm_when_mean_is_exact():
    # the tilt makes grad rho~(mu) = grad rho(mu): at theta = mu the two objectives share a gradient
    mu = torch.linspace(-1, 1, 7, dtype=DTYPE)
    reg = m.logcosh(0.8)
    b, h0 = m.equivalent_quadratic(reg, mu)
    assert float((b + h0 * mu - reg.grad(mu)).abs().max()) < 1e-14


# ---------------------------------------------------------------------------------------------
# Sec. 9: bad inputs
# ---------------------------------------------------------------------------------------------
def test_bad_solver_arguments(model_a):
    with pytest.raises(ValueError, match="alpha"):
        m.solve_fixed_point(0.0, model_a, "logistic", m.ridge(0.1))
    with pytest.raises(ValueError, match="lam"):
        m.ridge(-0.1)
    with pytest.raises(ValueError, match="lam must be > 0 when alpha <= 1"):
        m.solve_fixed_point(1.0, model_a, "square", m.ridge(0.0))
    with pytest.raises(ValueError, match="n_quad"):
        m.solve_fixed_point(2.0, model_a, "logistic", m.ridge(0.1), n_quad=3)
    for damping in (0.0, 1.5):
        with pytest.raises(ValueError, match="damping"):
            m.solve_fixed_point(2.0, model_a, "logistic", m.ridge(0.1), damping=damping)
    with pytest.raises(ValueError, match="tol"):
        m.solve_fixed_point(2.0, model_a, "logistic", m.ridge(0.1), tol=0.0)
    with pytest.raises(ValueError, match="loss"):
        m.solve_fixed_point(2.0, model_a, "exp", m.ridge(0.1))
    with pytest.raises(ValueError, match="not C\\^2"):
        m.solve_fixed_point(2.0, model_a, "logistic", m.l1(0.1))
    with pytest.raises(TypeError, match="SeparableReg"):
        m.solve_fixed_point(2.0, model_a, "logistic", lambda t: t.norm())


def test_bad_erm_arguments(model_a):
    X, y = model_a.sample(50, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="fit_erm_cvxpy"):
        m.fit_erm(X, y, "hinge", m.ridge(0.1))
    with pytest.raises(ValueError, match="loss"):
        m.fit_erm(X, y, "exp", m.ridge(0.1))
    with pytest.raises(ValueError, match="not C\\^2"):
        m.fit_erm(X, y, "logistic", m.l1(0.1))
    with pytest.raises(ValueError, match="y must have shape"):
        m.fit_erm(X, y[:-1], "logistic", m.ridge(0.1))
    with pytest.raises(ValueError, match="labels"):
        m.fit_erm(X, (y + 1) / 2, "logistic", m.ridge(0.1))
    Xn = X.clone()
    Xn[0, 0] = float("nan")
    with pytest.raises(ValueError, match="X must be finite"):
        m.fit_erm(Xn, y, "logistic", m.ridge(0.1))
    with pytest.raises(ValueError, match="lam must be > 0 when n <= p"):
        m.fit_erm(X, y, "logistic", m.ridge(0.0))
    with pytest.raises(ValueError, match="loss"):
        m.fit_erm_cvxpy(X.numpy(), y.numpy(), "exp", 0.1)


def test_bad_latent_laws():
    with pytest.raises(ValueError, match="non-negative"):
        m.LatentLaw([1.2, -0.2], [1, -1], [[1.0], [-1.0]])
    with pytest.raises(ValueError, match="sum to 1"):
        m.LatentLaw([0.5, 0.6], [1, -1], [[1.0], [-1.0]])
    with pytest.raises(ValueError, match="labels"):
        m.LatentLaw([0.5, 0.5], [1, 0], [[1.0], [-1.0]])
    with pytest.raises(ValueError, match="shape"):
        m.LatentLaw([0.5, 0.5], [1, -1], torch.ones(2, 1, 1))
    with pytest.raises(ValueError, match="same number of atoms"):
        m.LatentLaw([0.5, 0.5], [1, -1], [[1.0], [-1.0], [0.0]])
    # f2 = 2 f1 given y: the class covariance is singular on its random coordinates
    law = m.LatentLaw([0.25] * 4, [1, 1, -1, -1], [[0.0, 0.0], [1.0, 2.0], [0.0, 0.0], [-1.0, -2.0]])
    with pytest.raises(ValueError, match="coordinate 1"):
        law.gaussian_equivalent()
    # zero-variance coordinates are deterministic, not an error
    det = m.LatentLaw([0.5, 0.5], [1, -1], [[1.0], [-1.0]]).gaussian_equivalent()
    assert det.probs.shape == (2,)


def test_bad_models():
    law = m.LatentLaw([0.5, 0.5], [1, -1], [[1.0], [-1.0]])
    with pytest.raises(ValueError, match="V must be 2-D"):
        m.LFMM(torch.ones(5), law)
    law2 = m.LatentLaw([0.5, 0.5], [1, -1], [[1.0, 0.0], [-1.0, 1.0]])
    with pytest.raises(ValueError, match="full column rank"):
        m.LFMM(torch.ones(5, 2), law2)
    with pytest.raises(ValueError, match="sigma must have positive"):
        m.LFMM(torch.ones(5, 1), law, sigma=torch.tensor([1.0, 1, 1, 1, 0]))
    with pytest.raises(ValueError, match="sigma must have shape"):
        m.LFMM(torch.ones(5, 1), law, sigma=torch.ones(4))


def test_bad_ao_arguments(model_a):
    with pytest.raises(ValueError, match="ridge strength"):
        m.solve_ao_cvxpy(2.0, model_a, "logistic", m.logcosh(0.1))
    diag = m.LFMM(model_a.V, model_a.law, sigma=torch.ones(400, dtype=DTYPE))
    with pytest.raises(ValueError, match="identity bulk"):
        m.solve_ao_cvxpy(2.0, diag, "logistic", 0.1)
    for bounds in ((0.0, 1.0), (2.0, 1.0)):
        with pytest.raises(ValueError, match="t_bounds"):
            m.solve_ao_cvxpy(2.0, model_a, "logistic", 0.1, t_bounds=bounds)


def test_non_convergence_warns_not_raises(model_a):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        st = m.solve_fixed_point(2.0, model_a, "logistic", m.ridge(0.1), max_iter=3)
    assert not st.converged and any(issubclass(w.category, RuntimeWarning) for w in rec)


# ---------------------------------------------------------------------------------------------
# issue 12: claims the first version got wrong, each pinned by a test
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["logistic", "square", "hinge"])
def test_skewed_factor_orthogonal_gives_zero_overlap(loss):
    # point 1: A_2 = 0 exactly for any loss when v is orthogonal to m (E[g s] = E[g] E[s] = 0)
    mb = m.skewed_factor_model(100, generator=torch.Generator().manual_seed(3), angle=math.pi / 2)
    st = m.solve_fixed_point(2.0, mb, loss, m.ridge(0.1))
    assert st.converged and abs(float(st.A[1])) < 1e-10 and abs(float(st.A[0])) > 0.1
    tilted = m.skewed_factor_model(100, generator=torch.Generator().manual_seed(3), angle=math.pi / 3)
    assert abs(float(m.solve_fixed_point(2.0, tilted, loss, m.ridge(0.1)).A[1])) > 1e-3


def test_square_kappa_closed_form_validates_inputs():
    # point 8: returned -2.0 at (0.5, 0), ZeroDivisionError at (1, 0), math domain error for lam < 0
    with pytest.raises(ValueError, match="lam must be > 0 when alpha <= 1"):
        m.square_kappa_closed_form(0.5, 0.0)
    with pytest.raises(ValueError, match="lam must be > 0 when alpha <= 1"):
        m.square_kappa_closed_form(1.0, 0.0)
    with pytest.raises(ValueError, match="lam"):
        m.square_kappa_closed_form(2.0, -0.1)
    with pytest.raises(ValueError, match="alpha"):
        m.square_kappa_closed_form(0.0, 0.1)
    with pytest.raises(TypeError, match="alpha"):
        m.square_kappa_closed_form("2", 0.1)
    assert m.square_kappa_closed_form(2.0, 0.0) == 1.0


def test_sur_candes_logistic_mle_reproduced():
    # point 7: alpha* = 1.499, sigma* = 4.74, lambda* = 3.03 at kappa = 0.2, gamma = sqrt 5
    sc = m.published.PUBLISHED_SUR_CANDES
    out = m.published.logistic_mle_asymptotics(sc["kappa"], sc["gamma"])
    assert out["state"].converged
    assert abs(out["alpha_star"] - 1.499) <= 5e-4
    assert abs(out["sigma_star"] - 4.74) <= 5e-3
    assert abs(out["lambda_star"] - 3.03) <= 5e-3


def test_logistic_scale_mixture_is_the_logistic_link():
    from scipy.stats import norm

    W = m.published.logistic_scale_mixture(4000)
    t = np.linspace(-8, 8, 81)
    assert np.abs(norm.cdf(t[:, None] / W[None, :]).mean(1) - 1 / (1 + np.exp(-t))).max() < 1e-5


def test_mle_existence_threshold():
    # point 7: Candes-Sur h(gamma) from the book's latent law equals the direct formula; h(0) = 1/2
    law = m.published.logistic_model_law(math.sqrt(5.0))
    assert abs(m.published.separability_threshold(law) - m.published.candes_sur_threshold(math.sqrt(5.0))) < 1e-5
    null = m.LatentLaw([0.5, 0.5], [1.0, -1.0], [[0.0], [0.0]])
    assert abs(m.published.separability_threshold(null) - 0.5) < 1e-9
    assert abs(m.published.candes_sur_threshold(0.0) - 0.5) < 1e-9


@pytest.mark.parametrize("alpha,lam", [(0.5, 0.1), (2.0, 0.1), (2.0, 1.0), (4.0, 0.01)])
def test_ridge_pure_noise_matches_hastie(alpha, lam):
    e = torch.zeros(10, 1, dtype=DTYPE)
    e[0, 0] = 1.0
    noise = m.LFMM(e, m.LatentLaw([0.5, 0.5], [1.0, -1.0], [[0.0], [0.0]]))
    st = m.solve_fixed_point(alpha, noise, "square", m.ridge(lam), tol=1e-13)
    assert abs(st.c - m.published.ridge_noise_variance(alpha, lam)) < 1e-10
    assert abs(st.kappa - m.square_kappa_closed_form(alpha, lam)) < 1e-10


@pytest.mark.parametrize("alpha", [2.0, 4.0])
def test_least_squares_risk_matches_closed_form(model_a, alpha):
    st = m.solve_fixed_point(alpha, model_a, "square", m.ridge(0.0), tol=1e-13)
    s2 = m.published.best_linear_residual_variance(model_a)
    assert abs(m.published.square_risk_from_state(st, model_a) - m.published.least_squares_risk(alpha, s2)) < 1e-10


def test_second_law_moves_the_estimator_and_reverses_the_gap():
    # point 5: u in {0.5, 3} w.p. {0.9, 0.1}: Gaussian equivalent lowers the logistic overlap by >= 20 %
    law_d = m.signal_strength_model(100, u_values=(0.5, 3.0), u_probs=(0.9, 0.1),
                                    generator=torch.Generator().manual_seed(0))
    two = m.solve_fixed_point(2.0, law_d, "logistic", m.ridge(0.1))
    ge, err_ge = m.gaussian_equivalent_prediction(2.0, law_d, "logistic", m.ridge(0.1))
    assert 1 - float(ge.A[0] / two.A[0]) >= 0.2
    assert m.test_error(two, law_d.law) < err_ge - 0.02


def test_loglog_slope_recovers_a_known_rate():
    # point 3: the finite-size slope estimator with its bootstrap interval
    g = torch.Generator().manual_seed(0)
    per_seed = {p: torch.randn(12, generator=g, dtype=DTYPE) * p**-0.5 for p in (100, 200, 400, 800, 1600)}
    fit = m.loglog_slope(per_seed, "sd", n_boot=500)
    assert fit["lo"] <= -0.5 <= fit["hi"] and fit["hi"] < 0
    with pytest.raises(ValueError, match="stat"):
        m.loglog_slope(per_seed, "median")
    with pytest.raises(ValueError, match="at least 3"):
        m.loglog_slope({100: per_seed[100], 200: per_seed[200]})


# ---------------------------------------------------------------------------------------------
# issue 28: presets and the device
# ---------------------------------------------------------------------------------------------
def test_presets_dry_run_and_seeds():
    for pre in m.PRESETS.values():
        dry = pre.dry_run()
        assert dry.p == pre.p and dry.n_test == min(pre.n_test, 20000) and dry.n_quad == pre.n_quad
        assert dry.seeds <= pre.seeds and len(dry.alphas) <= len(pre.alphas) and len(dry.p_grid) >= 3
    book = m.PRESETS["book"]
    assert book.seeds >= 10 and book.p_grid_seeds >= 10 and len(book.p_grid) >= 5   # point 3
    assert 0.5 in book.alphas                                                         # point 4


def test_sample_draws_on_the_requested_device_reproducibly():
    model = m.signal_strength_model(20, generator=torch.Generator().manual_seed(0))
    X1, y1 = model.sample(30, torch.Generator().manual_seed(1), batch=2, device="cpu")
    X2, y2 = model.sample(30, torch.Generator().manual_seed(1), batch=2)
    assert torch.equal(X1, X2) and torch.equal(y1, y2) and X1.shape == (2, 30, 20)


@pytest.mark.cuda
def test_cuda_matches_cpu():
    """The core method on cuda: bulk drawn on the device, batched Newton ERM equal to the CPU fit."""
    model = m.signal_strength_model(200, generator=torch.Generator().manual_seed(0))
    X, y = model.sample(400, torch.Generator().manual_seed(1), batch=3, device="cuda")
    assert X.device.type == "cuda" and y.device.type == "cuda"
    for loss in ("logistic", "square"):
        th_gpu = m.fit_erm(X, y, loss, m.ridge(0.1))
        th_cpu = m.fit_erm(X.cpu(), y.cpu(), loss, m.ridge(0.1))
        assert float((th_gpu.cpu() - th_cpu).abs().max()) < 1e-8
        k_gpu = m.hessian_trace_inv(X, y, th_gpu, loss, m.ridge(0.1)).cpu()
        k_cpu = m.hessian_trace_inv(X.cpu(), y.cpu(), th_cpu, loss, m.ridge(0.1))
        assert float((k_gpu - k_cpu).abs().max()) < 1e-10
    sim = m.simulate(model, 2.0, "logistic", m.ridge(0.1), 4, 5000, torch.Generator().manual_seed(2), device="cuda")
    assert sim["thetas"].shape == (4, 200) and 0 < float(sim["test_error"].mean()) < 0.5


def test_figures_fit_the_column_with_legends_outside_the_axes():
    # issue 11: cgmt/01's legend sat over the data and figures were wider than the 768-px column
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd
    from icml26.cgmt import plots

    rows = [{"loss": loss, "alpha": a, "data": d, "err": 0.2, "sim_err": 0.21, "A": 1.0, "sim_A": 1.01,
             "norm2": 2.0, "sim_norm2": 2.02} for loss in ("logistic", "square") for a in (1.0, 2.0)
            for d in ("two-point", "gaussian-eq")]
    df = pd.DataFrame(rows)
    for fig in (plots.error_vs_alpha(df), plots.theory_vs_sim_scatter(df)):
        assert fig.get_size_inches()[0] <= 7.0
        assert fig.legends and all(ax.get_legend() is None for ax in fig.axes)
        matplotlib.pyplot.close(fig)
