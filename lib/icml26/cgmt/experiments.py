"""Runners the notebooks call: simulation protocol (Algorithm 3) and theory-vs-simulation sweeps.

Every runner returns plain dicts / ``pandas.DataFrame``s; long loops show ``tqdm.auto`` bars.
Simulations keep the spike matrix ``V`` fixed across seeds (only the training and test sets are
redrawn), fit all seeds at once by batched Newton and score one shared test set.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from .method import DTYPE, LFMM, SeparableReg, fit_erm, hessian_trace_inv
from .theory import State, solve_fixed_point, test_error


def simulate(model: LFMM, alpha: float, loss: str, reg: SeparableReg, seeds: int, n_test: int,
             generator: torch.Generator, gaussian_equivalent: bool = False,
             linear_term: Tensor | None = None, device: torch.device | str | None = None,
             with_kappa: bool = True, chunk: int = 20000) -> dict:
    """Algorithm 3: ``seeds`` independent training sets of size ``n = ceil(alpha p)``, one test set.

    Returns ``thetas (B, p)``, ``overlaps (B, K)`` (``V^T theta``), ``norms2 (B,)``,
    ``test_error (B,)``, ``test_scores {+1: (B, n_+), -1: (B, n_-)}``, ``train_scores (B, n)``
    with ``train_labels``, ``kappa_hat (B,)`` (``(1/n) tr H^{-1}``). Everything on CPU.
    """
    if not (isinstance(alpha, (int, float)) and alpha > 0):
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    n = math.ceil(alpha * model.p)
    X, y = model.sample(n, generator, batch=seeds, gaussian_equivalent=gaussian_equivalent, device=device)
    thetas = fit_erm(X, y, loss, reg, linear_term=linear_term)                 # (B, p)
    out = {"thetas": thetas.cpu(), "n": n, "p": model.p, "alpha": alpha}
    out["train_scores"] = torch.einsum("bnp,bp->bn", X, thetas).cpu()          # (B, n)
    out["train_labels"] = y.cpu()
    if with_kappa:
        out["kappa_hat"] = hessian_trace_inv(X, y, thetas, loss, reg).cpu()
    del X
    V = model.V.to(thetas.device)
    out["overlaps"] = (thetas @ V).cpu()                                          # (B, K)
    out["norms2"] = (thetas**2).sum(1).cpu()
    scores, labels = [], []
    for start in range(0, n_test, chunk):                                         # test set in chunks
        m = min(chunk, n_test - start)
        Xt, yt = model.sample(m, generator, gaussian_equivalent=gaussian_equivalent, device=device)
        scores.append((Xt @ thetas.T).T.cpu())                                    # (B, m)
        labels.append(yt.cpu())
    scores, labels = torch.cat(scores, 1), torch.cat(labels)
    out["test_error"] = (torch.sign(scores) != labels).to(DTYPE).mean(1)
    out["test_scores"] = {1: scores[:, labels == 1], -1: scores[:, labels == -1]}
    return out


def estimator_moments(thetas: Tensor) -> tuple[Tensor, float]:
    """``(theta_bar (p,), tr C_hat)`` with ``tr C_hat = sum_b ||theta_b - theta_bar||^2 / (B - 1)``."""
    if thetas.ndim != 2 or thetas.shape[0] < 2:
        raise ValueError(f"thetas must have shape (B, p) with B >= 2, got {tuple(thetas.shape)}")
    bar = thetas.mean(0)
    return bar, float(((thetas - bar) ** 2).sum() / (thetas.shape[0] - 1))


def theory_row(state: State, law, prefix: str = "") -> dict:
    """The theory's numbers as a flat dict (first overlap only)."""
    return {f"{prefix}A": float(state.A[0]), f"{prefix}norm2": state.norm2, f"{prefix}err": test_error(state, law),
            f"{prefix}kappa": state.kappa, f"{prefix}tau": state.tau, f"{prefix}c": state.c}


def sim_row(sim: dict, prefix: str = "sim_") -> dict:
    """Seed-averaged simulation numbers as a flat dict."""
    A = sim["overlaps"][:, 0]
    sd = float(A.std()) if A.numel() > 1 else float("nan")            # seed-to-seed spread (ddof 1)
    nsd = float(sim["norms2"].std() / sim["norms2"].mean()) if A.numel() > 1 else float("nan")
    row = {f"{prefix}A": float(A.mean()), f"{prefix}A_sd": sd, f"{prefix}A_se": sd / math.sqrt(A.numel()),
           f"{prefix}norm2": float(sim["norms2"].mean()), f"{prefix}norm2_relsd": nsd,
           f"{prefix}err": float(sim["test_error"].mean()), f"{prefix}seeds": A.numel()}
    if "kappa_hat" in sim:
        row[f"{prefix}kappa"] = float(sim["kappa_hat"].mean())
    return row


def alpha_sweep(model: LFMM, alphas, losses, reg: SeparableReg, seeds: int, n_test: int,
                generator: torch.Generator, n_quad: int = 61, ge_nodes: int = 41, device=None,
                keep: tuple | None = None, datas=("two-point", "gaussian-eq"), damping: float = 0.5
                ) -> tuple[pd.DataFrame, dict]:
    """Theory and simulation for the data law and its Gaussian equivalent over ``alphas x losses``.

    Returns a DataFrame (one row per ``(loss, alpha, data)``; columns ``A, norm2, err, kappa, tau``
    for theory and ``sim_*`` for simulation) and the raw simulations and states for the
    ``keep = (loss, alpha)`` case (for histograms). ``damping`` only changes the path of the
    fixed-point iteration, not its limit.
    """
    rows, kept = [], {}
    law_ge = model.law.gaussian_equivalent(ge_nodes)
    cases = [(loss, a, data) for loss in losses for a in alphas for data in datas]
    for loss, alpha, data in tqdm(cases, desc="alpha sweep", leave=False):
        ge = data == "gaussian-eq"
        state = solve_fixed_point(alpha, model, loss, reg, n_quad=n_quad, gaussian_equivalent=ge,
                                  ge_nodes=ge_nodes, damping=damping)
        sim = simulate(model, alpha, loss, reg, seeds, n_test, generator, gaussian_equivalent=ge, device=device)
        rows.append({"loss": loss, "alpha": alpha, "data": data, **theory_row(state, law_ge if ge else model.law),
                     **sim_row(sim)})
        if keep is not None and (loss, alpha) == tuple(keep):
            kept[data] = {"state": state, "sim": sim}
    return pd.DataFrame(rows), kept


# ----------------------------------------------------------------------------------------------
# notebook 2: min-max, kappa, hinge (cvxpy ERM), finite size
# ----------------------------------------------------------------------------------------------
def hinge_sweep(model: LFMM, alphas, lam: float, seeds: int, n_test: int, generator: torch.Generator,
                n_quad: int = 61) -> pd.DataFrame:
    """Hinge loss: theory (closed-form xi-integrals) vs cvxpy ERM (the torch solver needs smooth losses)."""
    from .baselines import fit_erm_cvxpy
    from .method import ridge

    rows = []
    for alpha in tqdm(alphas, desc="hinge (cvxpy)", leave=False):
        state = solve_fixed_point(alpha, model, "hinge", ridge(lam), n_quad=n_quad)
        n = math.ceil(alpha * model.p)
        X, y = model.sample(n, generator, batch=seeds)
        thetas = torch.as_tensor(fit_erm_cvxpy(X, y, "hinge", lam), dtype=DTYPE)   # (B, p)
        Xt, yt = model.sample(n_test, generator)
        err = (torch.sign(Xt @ thetas.T) != yt[:, None]).to(DTYPE).mean(0)
        rows.append({"loss": "hinge", "alpha": alpha, "data": "two-point", **theory_row(state, model.law),
                     "sim_A": float((thetas @ model.V)[:, 0].mean()), "sim_norm2": float((thetas**2).sum(1).mean()),
                     "sim_err": float(err.mean())})
    return pd.DataFrame(rows)


def finite_size(alpha: float, loss: str, reg: SeparableReg, p_grid, seeds: int, seed: int = 0,
                m_norm: float = 2.0, n_quad: int = 61, device=None, n_test: int = 20000) -> tuple[pd.DataFrame, dict]:
    """Overlap error versus ``p`` (Example A, fixed alpha, ``seeds`` training sets per ``p``).

    Returns a DataFrame (one row per ``p``: ``mean_abs_dA`` = seed mean of ``|A_sim - A|``,
    ``bias_dA`` = seed mean of ``A_sim - A``, ``sd_A`` = seed-to-seed standard deviation of
    ``A_sim``, ``abs_derr``) and ``{p: (seeds,) tensor of A_sim - A}`` for bootstrap intervals.
    """
    rows, per_seed = [], {}
    for p in tqdm(p_grid, desc="finite size", leave=False):
        gen = torch.Generator().manual_seed(seed + p)
        model = _example_a(p, m_norm, gen)
        state = solve_fixed_point(alpha, model, loss, reg, n_quad=n_quad)
        sim = simulate(model, alpha, loss, reg, seeds, n_test, gen, with_kappa=False, device=device)
        dA = sim["overlaps"][:, 0] - float(state.A[0])
        per_seed[p] = dA
        rows.append({"p": p, "mean_abs_dA": float(dA.abs().mean()), "bias_dA": float(dA.mean()),
                     "sd_A": float(dA.std()), "abs_derr": abs(float(sim["test_error"].mean()) - test_error(state, model.law))})
    return pd.DataFrame(rows), per_seed


def loglog_slope(per_seed: dict, stat: str = "mean_abs", n_boot: int = 2000, seed: int = 0) -> dict:
    """Least-squares slope of ``log stat`` on ``log p`` with a seed-bootstrap 95 % interval.

    ``per_seed`` maps ``p`` to the ``(B,)`` per-seed deviations ``A_sim - A``; ``stat`` is
    ``"mean_abs"`` (mean of ``|dA|``) or ``"sd"`` (standard deviation of ``dA``). Each bootstrap
    resample redraws the seeds independently at every ``p``.
    """
    if stat not in ("mean_abs", "sd"):
        raise ValueError(f"stat must be 'mean_abs' or 'sd', got {stat!r}")
    if len(per_seed) < 3:
        raise ValueError(f"per_seed needs at least 3 values of p for a slope, got {len(per_seed)}")
    ps = sorted(per_seed)
    x = torch.log(torch.tensor(ps, dtype=DTYPE))
    xc = x - x.mean()

    def fit(vals):                                      # vals: list of (R, B) resampled deviations
        ys = torch.stack([v.abs().mean(-1) if stat == "mean_abs" else v.std(-1) for v in vals], -1).log()
        return (ys - ys.mean(-1, keepdim=True)) @ xc / (xc @ xc)

    slope = float(fit([per_seed[p][None] for p in ps])[0])
    g = torch.Generator().manual_seed(seed)
    boot = []
    for p in ps:
        d = per_seed[p]
        idx = torch.randint(0, d.numel(), (n_boot, d.numel()), generator=g)
        boot.append(d[idx])
    bs = fit(boot)
    lo, hi = torch.quantile(bs, torch.tensor([0.025, 0.975], dtype=DTYPE)).tolist()
    return {"slope": slope, "lo": lo, "hi": hi}


def _example_a(p, m_norm, gen):
    from .method import signal_strength_model

    return signal_strength_model(p, m_norm=m_norm, generator=gen)


# ----------------------------------------------------------------------------------------------
# notebook 3: C^2 regularisers versus their quadratic equivalents
# ----------------------------------------------------------------------------------------------
def regularizer_pair(model: LFMM, alpha: float, loss: str, reg: SeparableReg, seeds: int, n_test: int,
                     generator: torch.Generator, n_quad: int = 61, device=None) -> dict:
    """Fit ``reg``-ERM, ridge-at-zero ERM and tilted-ridge ERM on the *same* training sets.

    The tilt is ``b = grad rho(mu) - lam psi''(0) mu`` at the theory's mean ``mu = V w`` (Sec. 3.5).
    Returns the three ``thetas (B, p)``, test errors, and the theories (exact ``rho`` and ridge-at-zero).
    """
    from .baselines import ridge_at_zero
    from .method import equivalent_quadratic

    th_psi = solve_fixed_point(alpha, model, loss, reg, n_quad=n_quad)
    th_r0 = solve_fixed_point(alpha, model, loss, ridge_at_zero(reg), n_quad=n_quad)
    mu = model.V @ th_psi.w                                                      # (p,)
    b, _ = equivalent_quadratic(reg, mu)
    n = math.ceil(alpha * model.p)
    X, y = model.sample(n, generator, batch=seeds, device=device)
    fits = {"psi": fit_erm(X, y, loss, reg), "ridge0": fit_erm(X, y, loss, ridge_at_zero(reg)),
            "tilt": fit_erm(X, y, loss, ridge_at_zero(reg), linear_term=b)}
    Xt, yt = model.sample(n_test, generator, device=device)
    errs = {k: (torch.sign(Xt @ t.T) != yt[:, None]).to(DTYPE).mean(0).cpu() for k, t in fits.items()}
    fits = {k: t.cpu() for k, t in fits.items()}
    return {"thetas": fits, "errors": errs, "theory_psi": th_psi, "theory_ridge0": th_r0, "mu": mu,
            "err_theory_psi": test_error(th_psi, model.law), "err_theory_ridge0": test_error(th_r0, model.law)}


def relative_difference(thetas_a: Tensor, thetas_b: Tensor) -> float:
    """Seed-averaged ``||theta_a - theta_b|| / ||theta_a||``."""
    return float(((thetas_a - thetas_b).norm(dim=1) / thetas_a.norm(dim=1)).mean())


def equivalence_vs_p(p_grid, alpha: float, loss: str, reg: SeparableReg, seeds: int, seed: int = 0,
                     m_norm: float = 2.0, device=None) -> pd.DataFrame:
    """``||theta_psi - theta_tilt|| / ||theta_psi||`` versus ``p`` (delocalised mean, f = y)."""
    from .method import signal_strength_model

    rows = []
    for p in tqdm(p_grid, desc="equivalence vs p", leave=False):
        gen = torch.Generator().manual_seed(seed + p)
        model = signal_strength_model(p, m_norm=m_norm, u_values=(1.0,), u_probs=(1.0,), generator=gen)
        out = regularizer_pair(model, alpha, loss, reg, seeds, 2000, gen, device=device)
        rows.append({"p": p, "rel_diff_tilt": relative_difference(out["thetas"]["psi"], out["thetas"]["tilt"]),
                     "rel_diff_ridge0": relative_difference(out["thetas"]["psi"], out["thetas"]["ridge0"])})
    return pd.DataFrame(rows)


def equivalence_vs_delta(deltas, model: LFMM, alpha: float, loss: str, lam: float, seeds: int,
                         generator: torch.Generator, device=None) -> pd.DataFrame:
    """Pseudo-Huber with shrinking ``delta`` against its tilted quadratic, on the same training sets.

    The equivalence needs the bulk entries of ``theta`` inside the quadratic zone ``|t| << delta``
    of ``psi_delta``. Their size is ``sqrt(c/p)`` (``c = tr C`` of the theory), so each row also
    carries ``bulk_sd = sqrt(c/p)`` and ``delta_over_bulk = delta / bulk_sd``: the distance grows
    once ``delta`` is a few times ``bulk_sd``, well above ``p^{-1/2}`` when ``c < 1``.
    """
    from .method import pseudo_huber

    rows = []
    for delta in tqdm(deltas, desc="pseudo-Huber delta", leave=False):
        out = regularizer_pair(model, alpha, loss, pseudo_huber(lam, delta), seeds, 2000, generator, device=device)
        bulk_sd = math.sqrt(out["theory_psi"].c / model.p)
        rows.append({"delta": delta, "bulk_sd": bulk_sd, "delta_over_bulk": delta / bulk_sd,
                     "rel_diff_tilt": relative_difference(out["thetas"]["psi"], out["thetas"]["tilt"]),
                     "err_psi": float(out["errors"]["psi"].mean()), "err_tilt": float(out["errors"]["tilt"].mean())})
    return pd.DataFrame(rows)


def l1_counterexample(model: LFMM, alpha: float, lam: float, generator: torch.Generator) -> dict:
    """l1 (not C^2) vs ridge with cvxpy, logistic loss, one training set: bulk coordinates of each."""
    from .baselines import fit_erm_cvxpy

    n = math.ceil(alpha * model.p)
    X, y = model.sample(n, generator)
    th_l1 = torch.as_tensor(fit_erm_cvxpy(X, y, "logistic", lam, reg="l1"), dtype=DTYPE)
    th_r = torch.as_tensor(fit_erm_cvxpy(X, y, "logistic", lam, reg="ridge"), dtype=DTYPE)
    return {"l1": th_l1, "ridge": th_r,
            "zero_frac_l1": float((th_l1.abs() < 1e-6).to(DTYPE).mean()),
            "zero_frac_ridge": float((th_r.abs() < 1e-6).to(DTYPE).mean())}
