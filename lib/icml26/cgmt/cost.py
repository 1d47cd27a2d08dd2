"""The cost model of the cgmt notebooks (:mod:`icml26.book.budget`): the work each one runs at a scale.

A simulation (:func:`~icml26.cgmt.experiments.simulate`, :func:`~icml26.cgmt.experiments.regularizer_pair`) draws
``B`` training sets of ``n = ceil(alpha p)`` rows (float64), fits them by batched Newton
(:func:`~icml26.cgmt.method.fit_erm`) and scores a test set in chunks. Its items:

- *Newton iteration*: one real call of ``fit_erm(..., max_iter=1)`` (initial objective, gradient, Hessian
  ``X^T D X``, Cholesky, Armijo search) on ONE training set of ``n_m = min(n, 1000)`` rows at ``p_m = min(p, 1000)``;
  ``flop_scale = B n p^2 / (n_m p_m^2)``, the ratio of the Hessian's FLOPs, which dominate (the Cholesky,
  ``B p^3 / 3``, is not counted by the FLOP counter: under 3 % of the Hessian at ``alpha >= 1/2``). The bytes, which
  grow as ``B n p``, are over-scaled by ``p / p_m`` (at most 3.2 here): still below the FLOP bound at gpu sizes.
  The count is fits x Newton iterations per fit (:data:`NEWTON_ITERS`, measured at p = 300, two training
  sets, tolerance 1e-8: the last iteration only checks the gradient, so this is an upper bound);
- *kappa*: one :func:`~icml26.cgmt.method.hessian_trace_inv` per simulation that reports kappa, scaled alike;
- *draws*: the training set (``B n p`` normals) and the test chunks (``n_test`` rows of ``p``), scaled by rows.

Host work (the same whatever the device; projected at its measured CPU time): the fixed-point solves of
Algorithm 1 (:func:`~icml26.cgmt.theory.solve_fixed_point`, K-dimensional, a Python loop), the cvxpy
references (hinge ERM, the min-max of Algorithm 2, the AO curve, the l1 counterexample). The hinge fit is
measured at the largest alpha of the grid (an upper bound for the others)."""

from __future__ import annotations

import math

from icml26.book.budget import Item, gpu_preset

from . import presets

_P_MAX, _N_MAX = 1000, 1000
# Newton iterations per fit_erm call (p = 300, B = 2, tol 1e-8; see the module docstring)
NEWTON_ITERS = {"logistic": 7, "square": 2, "logcosh": 7}
PSEUDO_HUBER_ITERS = {1.0: 6, 0.5: 6, 0.3: 7, 0.2: 7, 0.1: 7, 0.05: 8, 0.02: 10, 0.01: 20}


def _reg(kind: str, lam: float):
    from . import method as mt

    if kind == "ridge":
        return mt.ridge(lam)
    if kind == "logcosh":
        return mt.logcosh(lam)
    return mt.pseudo_huber(lam, float(kind.split(":")[1]))


def _model(p: int, gen):
    from .method import signal_strength_model

    return signal_strength_model(p, m_norm=2.0, generator=gen)


def _newton(p: int, n: int, loss: str, reg: str, lam: float):
    def build():
        import torch

        from .method import fit_erm

        gen = torch.Generator().manual_seed(0)
        X, y = _model(p, gen).sample(n, gen, batch=1)
        r = _reg(reg, lam)
        return lambda: fit_erm(X, y, loss, r, max_iter=1)
    return build


def _kappa(p: int, n: int, loss: str, lam: float):
    def build():
        import torch

        from .method import hessian_trace_inv, ridge

        gen = torch.Generator().manual_seed(0)
        X, y = _model(p, gen).sample(n, gen, batch=1)
        theta = torch.zeros(1, p, dtype=X.dtype)
        return lambda: hessian_trace_inv(X, y, theta, loss, ridge(lam))
    return build


def _draw(p: int, n: int, batch: bool):
    def build():
        import torch

        gen = torch.Generator().manual_seed(0)
        model = _model(p, gen)
        return (lambda: model.sample(n, gen, batch=1)) if batch else (lambda: model.sample(n, gen))
    return build


def _fits(tag, p, n, B, loss, reg="ridge", lam=0.1, fits=1, iters=None):
    """Items of ``fits`` fit_erm calls on ``B`` training sets of ``n x p``."""
    p_m, n_m = min(p, _P_MAX), min(n, _N_MAX)
    scale = B * n * p * p / (n_m * p_m * p_m)
    it = iters if iters is not None else NEWTON_ITERS[loss if reg == "ridge" else reg]
    return Item(f"{tag}: Newton iteration ({loss}, {reg}, B={B}, n={n}, p={p})", fits * it,
                _newton(p_m, n_m, loss, reg, lam), flop_scale=scale, key=f"newton {p_m} {n_m} {loss} {reg}")


def _simulation(tag, p, n, B, loss, n_test, count=1, kappa=True, chunk=20000):
    """The device items of ``count`` calls of ``simulate`` (or the draws and fit of one regulariser fit)."""
    p_m, n_m = min(p, _P_MAX), min(n, _N_MAX)
    items = [_fits(tag, p, n, B, loss, fits=count)]
    if kappa:
        items.append(Item(f"{tag}: kappa, (1/n) tr H^-1 (B={B}, n={n}, p={p})", count, _kappa(p_m, n_m, loss, 0.1),
                          flop_scale=B * n * p * p / (n_m * p_m * p_m), key=f"kappa {p_m} {n_m} {loss}"))
    items.append(Item(f"{tag}: training draw (B={B}, n={n}, p={p})", count, _draw(p_m, n_m, True),
                      flop_scale=B * n * p / (n_m * p_m), key=f"draw {p_m} {n_m}"))
    rows = min(chunk, n_test)
    items.append(Item(f"{tag}: test chunk ({rows} x {p})", count * math.ceil(n_test / chunk), _draw(p_m, n_m, False),
                      flop_scale=rows * p / (n_m * p_m), key=f"test {p_m} {n_m}"))
    return items


def _fixed_point(loss: str, reg: str = "ridge", lam: float = 0.1):
    def build():
        import torch

        from .theory import solve_fixed_point

        model = _model(200, torch.Generator().manual_seed(0))
        r = _reg(reg, lam)
        return lambda: [solve_fixed_point(2.0, model, loss, r, gaussian_equivalent=ge) for ge in (False, True)]
    return build


def _hinge(p: int, alpha: float, lam: float):
    def build():
        import torch

        from .baselines import fit_erm_cvxpy

        gen = torch.Generator().manual_seed(0)
        X, y = _model(p, gen).sample(math.ceil(alpha * p), gen)
        return lambda: fit_erm_cvxpy(X, y, "hinge", lam)
    return build


def _ao(loss: str, lam: float, curve: int = 0):
    def build():
        import torch

        from .theory import ao_curve, solve_ao_cvxpy

        model = _model(200, torch.Generator().manual_seed(0))
        if curve:
            return lambda: ao_curve([0.5 + 0.5 * i for i in range(curve)], 2.0, model, loss, lam, n_quad=41)
        return lambda: solve_ao_cvxpy(2.0, model, loss, lam, n_quad=41)
    return build


def _l1(p: int):
    def build():
        import torch

        from .experiments import l1_counterexample
        from .method import signal_strength_model

        gen = torch.Generator().manual_seed(0)
        small = signal_strength_model(p, m_norm=2.0, u_values=(1.0,), u_probs=(1.0,), generator=gen)
        return lambda: l1_counterexample(small, 2.0, 0.02, gen)
    return build


def _n(alpha: float, p: int) -> int:
    return math.ceil(alpha * p)


def notebooks(scale: str) -> dict:
    cfg = gpu_preset(presets, scale)
    p, B, nt = cfg.p, cfg.seeds, cfg.n_test
    n_data = 2   # alpha_sweep's two data laws (two-point, Gaussian equivalent)
    nb1 = []
    for loss in ("logistic", "square"):
        for a in cfg.alphas:
            nb1 += _simulation(f"{loss} alpha sweep a={a:g}", p, _n(a, p), B, loss, nt, count=n_data)
        nb1 += _simulation(f"{loss} law d, a=2", p, _n(2.0, p), B, loss, nt, count=n_data)
    fp1 = 2 * len(cfg.alphas) * n_data + 2 * n_data + 2 + 2 + 2
    nb1 += [Item("fixed-point solve, Algorithm 1 (host)", fp1, _fixed_point("logistic"), host=True, per_call=2)]

    nb2 = []
    for loss in ("logistic", "square"):
        for a in cfg.alphas:
            nb2 += _simulation(f"{loss} alpha sweep a={a:g}", p, _n(a, p), B, loss, nt)
    for q in cfg.p_grid:
        nb2 += _simulation("finite size", q, _n(2.0, q), cfg.p_grid_seeds, "logistic", 20000, kappa=False)
    for q in cfg.p_grid[:2]:
        nb2 += _simulation("finite size (exercise)", q, _n(2.0, q), 2 * cfg.p_grid_seeds, "logistic", 20000,
                           kappa=False)
    fp2 = 4 + len(cfg.ao_losses) + 1 + 2 * len(cfg.alphas) + len(cfg.alphas) + len(cfg.p_grid) + 5 + 3 + 6 \
        + len(cfg.p_grid[:2])
    a_max = max(cfg.alphas)
    nb2 += [Item("fixed-point solve, Algorithm 1 (host)", fp2, _fixed_point("logistic"), host=True, per_call=2),
            Item(f"cvxpy hinge ERM, one training set (alpha {a_max:g}, p={cfg.p_cvx}; host)",
                 len(cfg.alphas) * cfg.hinge_seeds, _hinge(cfg.p_cvx, a_max, cfg.lam), host=True),
            Item("cvxpy min-max, Algorithm 2 (host)", len(cfg.ao_losses) + 1, _ao("square", cfg.lam), host=True),
            Item("cvxpy AO value at one t (host)", cfg.n_t, _ao("square", cfg.lam, curve=2), host=True, per_call=2)]

    lam3, alpha3 = 1.0, 2.0   # the notebook's LAM and ALPHA

    def pair(tag, q, seeds, reg, n_test=nt, count=1, iters=None):
        """regularizer_pair: fits with reg, ridge at zero and the tilted ridge on one draw."""
        nq, p_m = _n(alpha3, q), min(q, _P_MAX)
        n_m = min(nq, _N_MAX)
        return [_fits(tag, q, nq, seeds, "logistic", reg, lam3, fits=count, iters=iters),
                _fits(tag + " (ridge at zero, tilted)", q, nq, seeds, "logistic", "ridge", lam3, fits=2 * count),
                Item(f"{tag}: training draw (B={seeds}, n={nq}, p={q})", count, _draw(p_m, n_m, True),
                     flop_scale=seeds * nq * q / (n_m * p_m), key=f"draw {p_m} {n_m}"),
                Item(f"{tag}: test draw ({n_test} x {q})", count, _draw(p_m, n_m, False),
                     flop_scale=n_test * q / (n_m * p_m), key=f"test {p_m} {n_m}")]
    nb3 = pair("logcosh pair, delocalised and localised", p, cfg.reg_seeds, "logcosh", count=2)
    for q in cfg.p_grid_reg:
        nb3 += pair("equivalence vs p", q, cfg.seeds, "logcosh", n_test=2000)
    for d in cfg.deltas:
        nb3 += pair(f"pseudo-Huber delta={d:g}", p, cfg.reg_seeds, f"ph:{d}", n_test=2000,
                    iters=PSEUDO_HUBER_ITERS.get(d, 20))
    fp3 = 2 * (2 + len(cfg.p_grid_reg) + len(cfg.deltas)) + 2
    nb3 += [Item("fixed-point solve, Algorithm 1 (host, log-cosh)", fp3, _fixed_point("logistic", "logcosh", lam3),
                 host=True, per_call=2),
            Item(f"cvxpy l1 and ridge ERM (p={cfg.p_cvx}, n={_n(alpha3, cfg.p_cvx)}; host)", 4, _l1(cfg.p_cvx), host=True)]
    return {"01-score-law": nb1, "02-minmax": nb2, "03-regularizers": nb3}
