"""The cost model of the dp-c4 notebooks (:mod:`icml26.book.budget`).

The runners batch R runs (configurations x seeds) into one call of :func:`~icml26.dp_c4.dp_sgd` or
:func:`~icml26.dp_c4.dp_c4`, so an item is one private step of one such call: measured with one run
(``R = 1``, four steps logged once, at a tenth of the examples) and projected with ``flop_scale = 10 R`` (its bytes and FLOPs grow with R and n, its
launches do not); counts are the steps of each call. The R of each call follows the notebooks' grids; each edge
probe call of notebook 2 is taken as two edges per privacy level (an estimate: it probes only the edges
the validation found).
The digits-MLP and breast-cancer sections of notebook 2 (small problems) are left out."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets

_PER = 4        # steps per measured call (the runner's set-up and logging spread over them)
_SHRINK = 10    # measured at n / 10 examples: bytes and FLOPs of a step are linear in n (CI time)

def _step(cfg, kind: str, q: float, n: int | None = None):
    def build():
        import torch

        from . import dp_c4, dp_sgd, heavy_tailed_logistic
        from .method import StagedSchedule

        train, _ = heavy_tailed_logistic(max((n or cfg.n) // _SHRINK, 10), cfg.d, cfg.lam, seed=0)
        gen = torch.Generator().manual_seed(0)
        if kind == "sgd":
            return lambda: dp_sgd(train, _PER, 0.5, 1.0, 1.0, q, gen, log_every=_PER)
        sch = StagedSchedule(torch.ones(1), torch.ones(1), _PER)
        return lambda: dp_c4(train, sch, 0.5, q, gen, log_every=_PER)
    return build


def _item(name, cfg, kind, q, runs, steps, calls=1, n=None):
    key = f"{kind} q={q} n={n or cfg.n}"
    return Item(name, calls * steps, _step(cfg, kind, q, n), flop_scale=float(max(runs, 1)) * _SHRINK, key=key,
                per_call=_PER)


def notebooks(scale: str) -> dict:
    cfg = gpu_preset(presets, scale)
    eps = n_of(pick(cfg, "eps_list"), 2)
    T, Tf, q = pick(cfg, "T", 1), pick(cfg, "T_full", 1), pick(cfg, "q", 0.1)
    vs, vsf = pick(cfg, "val_seeds", 1), pick(cfg, "val_seeds_full", 1)
    g = {k: n_of(pick(cfg, k), 1) for k in ("lr_grid_sgd", "C_grid_sgd", "lr_grid_c4", "C0_grid", "rho_grid",
                                             "lr_grid", "C0_grid_const", "lr_grid_gd", "C_grid_gd", "lr_grid_full",
                                             "C0_grid_c4f", "rho_grid_c4f", "C_fixed", "C_bias_grid", "decay_rhos",
                                             "C_grid_full", "C0_grid_coarse", "rho_grid_coarse")}
    Tn = pick(cfg, "T_noiseless", 1)
    nb1 = [_item("clipped GD to its fixed points", cfg, "sgd", 1.0, g["C_bias_grid"], pick(cfg, "T_fixed_point", 1)),
           _item("noiseless race, clipped GD", cfg, "sgd", 1.0, g["C_fixed"], Tn),
           _item("noiseless race, DP-C4", cfg, "c4", 1.0, g["C_fixed"], Tn),
           _item("decay race, DP-C4", cfg, "c4", 1.0, g["decay_rhos"], Tn)]
    r_sgd = eps * g["lr_grid_sgd"] * g["C_grid_sgd"] * vs
    r_c4 = eps * g["lr_grid_c4"] * g["C0_grid"] * g["rho_grid"] * vs
    r_k = eps * g["lr_grid"] * g["C0_grid_const"] * vs
    r_gd = eps * g["lr_grid_gd"] * g["C_grid_gd"] * vsf
    r_c4f = eps * g["lr_grid_full"] * g["C0_grid_c4f"] * g["rho_grid_c4f"] * vsf
    ev, evf = pick(cfg, "eval_seeds", 1), pick(cfg, "eval_seeds_full", 1)
    coarse = eps * (g["C_grid_full"] + g["C0_grid_coarse"] * g["rho_grid_coarse"]) * pick(cfg, "seeds", 1)
    nb2 = [_item("validation, DP-SGD grid", cfg, "sgd", q, r_sgd, T),
           _item("validation, DP-C4 grid", cfg, "c4", q, r_c4, T),
           _item("validation, constant-threshold grid", cfg, "c4", q, r_k, T),
           _item("edge probes (4 calls)", cfg, "c4", q, 2 * eps * vs, T, calls=4),
           _item("paired test runs, DP-SGD (2 methods)", cfg, "sgd", q, eps * ev, T, calls=2),
           _item("paired test runs, DP-C4 (4 variants)", cfg, "c4", q, eps * ev, T, calls=4),
           _item("full batch validation, DP-GD grid", cfg, "sgd", 1.0, r_gd, Tf),
           _item("full batch validation, DP-C4 grid", cfg, "c4", 1.0, r_c4f, Tf),
           _item("full batch edge probes (2 calls)", cfg, "c4", 1.0, 2 * eps * vsf, Tf, calls=2),
           _item("full batch paired test runs (3 methods)", cfg, "c4", 1.0, eps * evf, Tf, calls=3),
           _item("equal privacy, coarse schedule", cfg, "c4", 1.0, coarse, Tf)]
    ns = tuple(pick(cfg, "tilt_n", (1000,)))
    big = max(ns)
    nb3 = [_item(f"tilt vs n, {kind} (2 sweeps, n <= {big:,})", cfg, kind, 1.0,
                 pick(cfg, "tilt_seeds", 1) * sum(ns) / big, pick(cfg, "tilt_T", 1), calls=2, n=big)
           for kind in ("sgd", "c4")]
    return {"01-solution-bias": nb1, "02-equal-privacy": nb2, "03-accounting": nb3}
