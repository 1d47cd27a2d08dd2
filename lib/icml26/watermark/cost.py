"""The cost model of the watermark notebooks (:mod:`icml26.book.budget`): the work each one runs at a scale.

**Everything here runs on the host whatever the device**: the samplers (:func:`~icml26.watermark.teachers.sample_iid`,
:meth:`~icml26.watermark.teachers.HMMTeacher.generate`) draw with CPU generators into CPU tensors and the notebooks
never move a teacher to the device, so every item is ``host=True`` and projected at its measured CPU time (one
thread). Each item is a slice of rows whose cost is linear in the rows, and its count is the number of such slices
the notebook runs:

- notebook 1: one chunk of :func:`sample_iid` (its own chunk of ``2**24 / N`` rows) per family, a slice of the
  prediction draws with their calibration (16 masks), the power study's chunks at its own vocabulary, and the heat
  map's draws, green masses (one per gamma) and the scalar formulas at each (gamma, delta);
- notebook 2: one decoding step of :data:`_BATCH` sequences of :meth:`HMMTeacher.generate` (watermarked; the count
  is sequences x tokens / batch over every generation: profiles, grid, selection, steering, seeded selection and the
  exercise), the detection of :data:`_BATCH` sequences, one green matrix per (point, key), the green masses of every
  gamma of a calibration (a slice of rows) and one Algorithm A selection on a calibration whose masses are cached."""

from __future__ import annotations

import math

from icml26.book.budget import Item, gpu_preset

from . import presets

_BATCH = 500          # sequences of a measured decoding step / detection
_STEPS = 4            # decoding steps per measured generate call
_ROWS = 2000          # rows of a measured slice (prediction draws, calibration)


def _iid_chunk(fam, par, n_vocab, gamma, delta):
    def build():
        import torch

        from .teachers import sample_iid

        gen = torch.Generator().manual_seed(0)
        rows = max(1, 2**24 // n_vocab)
        return lambda: sample_iid(fam, par, n_vocab, rows, gamma, delta, gen)
    return build


def _predicted(fam, par, n_vocab, gamma, delta, rows):
    def build():
        import torch

        from .experiments import predicted_rate

        gen = torch.Generator().manual_seed(0)
        return lambda: predicted_rate(fam, par, n_vocab, gamma, delta, rows, gen)
    return build


def _heat_draw(n_vocab, tau, rows, gamma=None):
    def build():
        import torch

        from .framework import calibrate
        from .teachers import draw_probs

        gen = torch.Generator().manual_seed(0)
        if gamma is None:
            return lambda: calibrate(draw_probs("softmax", tau, n_vocab, rows, gen).float(), T_eff=100.0, n_masks=8)
        cal = calibrate(draw_probs("softmax", tau, n_vocab, rows, gen).float(), T_eff=100.0, n_masks=8)

        def step():
            cal._mass.clear()
            return cal.green_mass(gamma)
        return step
    return build


def _heat_cell(cfg):
    def build():
        import torch

        from .framework import calibrate, required_length
        from .method import green_size, kl_closed_form, phi
        from .teachers import draw_probs

        gen = torch.Generator().manual_seed(0)
        cal = calibrate(draw_probs("softmax", cfg.heat_tau[0], cfg.n_vocab, cfg.n_pred, gen).float(), T_eff=100.0,
                        n_masks=8)
        P = cal.green_mass(0.25)
        ge = green_size(cal.n_vocab, 0.25) / cal.n_vocab

        def step():
            mu1 = float(phi(P, 2.0).mean())
            return float(required_length(mu1, ge, cfg.alpha, cfg.target_power)), float(kl_closed_form(P, 2.0).mean())
        return step
    return build


def _teacher(cfg, tau):
    from .teachers import HMMTeacher

    return HMMTeacher(cfg.n_states, cfg.vocab_size, tau, seed=cfg.seed)


def _decode(cfg):
    def build():
        import torch

        from .method import green_matrix

        t = _teacher(cfg, cfg.taus[0])
        gm = green_matrix(cfg.vocab_size, 0.25, cfg.key)
        gen = torch.Generator().manual_seed(0)
        return lambda: t.generate(_BATCH, _STEPS, gen, green_mat=gm, delta=2.0)
    return build


def _detect(cfg):
    def build():
        import torch

        from .method import detect, green_matrix

        t = _teacher(cfg, cfg.taus[0])
        gm = green_matrix(cfg.vocab_size, 0.25, cfg.key)
        tokens = t.generate(_BATCH, cfg.T, torch.Generator().manual_seed(0), green_mat=gm, delta=2.0)["tokens"]
        return lambda: detect(tokens, gm, 0.25, t.bos, alpha=cfg.alpha)
    return build


def _green_matrix(cfg):
    def build():
        from .method import green_matrix

        return lambda: green_matrix(cfg.vocab_size, 0.25, cfg.key)
    return build


def _cal(cfg, rows, counts=True):
    import numpy as np
    import torch

    from .framework import calibrate

    gen = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(rows, cfg.vocab_size, generator=gen) * 2.0, 1)
    c = np.random.default_rng(0).integers(cfg.T // 2, cfg.T + 1, 1000) if counts else None
    return calibrate(p, float(cfg.T) * 0.8, n_masks=cfg.n_masks, seed=cfg.seed, counts=c)


def _masses(cfg):
    def build():
        cal = _cal(cfg, min(_ROWS, cfg.n_cal))

        def step():
            cal._mass.clear()
            return [cal.green_mass(g) for g in cfg.gammas]
        return step
    return build


def _select(cfg):
    def build():
        from .framework import select_min_distortion

        cal = _cal(cfg, cfg.n_cal)
        return lambda: select_min_distortion(cal, gammas=cfg.gammas, alpha=cfg.alpha, target_power=cfg.target_power,
                                             power_model="mixture")
    return build


def notebooks(scale: str) -> dict:
    from .baselines import DEFAULTS
    from .experiments import family_points

    cfg = gpu_preset(presets, scale)
    V = cfg.n_vocab
    chunk = max(1, 2**24 // V)
    pts = family_points(cfg)
    by_fam = {f: [p for g, p in pts if g == f] for f in ("uniform", "zipf", "softmax")}
    rows = min(_ROWS, cfg.n_pred)
    nb1 = []
    for fam, params in by_fam.items():
        if not params:
            continue
        par = params[len(params) // 2]
        nb1.append(Item(f"i.i.d. watermarked draws, one chunk of {chunk} rows ({fam}, N={V})",
                        len(params) * math.ceil(cfg.n_mc / chunk), _iid_chunk(fam, par, V, cfg.gamma, cfg.delta),
                        host=True))
        nb1.append(Item(f"prediction draws + 16-mask calibration, {rows} rows ({fam}, N={V})",
                        len(params) * math.ceil(cfg.n_pred / rows),
                        _predicted(fam, par, V, cfg.gamma, cfg.delta, rows), host=True))
    fam, par = cfg.power_family
    pv, n_cfg = cfg.power_vocab, len(cfg.power_configs)
    pchunk = max(1, 2**24 // pv)
    prow = min(_ROWS, 4 * cfg.n_pred)
    nb1 += [Item(f"power study: i.i.d. draws, one chunk of {pchunk} rows (N={pv})",
                 n_cfg * math.ceil(cfg.n_seq * cfg.T_max / pchunk), _iid_chunk(fam, par, pv, 0.25, 2.0), host=True),
            Item(f"power study: prediction draws, {prow} rows (N={pv})", n_cfg * math.ceil(4 * cfg.n_pred / prow),
                 _predicted(fam, par, pv, 0.25, 2.0, prow), host=True)]
    n_tau = len(cfg.heat_tau)
    nb1 += [Item(f"heat map: softmax draws + calibration, {rows} rows (N={V})", n_tau * math.ceil(cfg.n_pred / rows),
                 _heat_draw(V, cfg.heat_tau[0], rows), host=True),
            Item(f"heat map: green masses of one gamma (8 masks), {rows} rows", n_tau * cfg.heat_gammas
                 * math.ceil(cfg.n_pred / rows), _heat_draw(V, cfg.heat_tau[0], rows, gamma=0.25), host=True),
            Item(f"heat map: mu1, T* and KL at one (gamma, delta) ({cfg.n_pred} rows x 8)",
                 n_tau * cfg.heat_gammas * cfg.heat_deltas, _heat_cell(cfg), host=True)]

    n_t, K, T = len(cfg.taus), cfg.n_keys, cfg.T
    per_key = max(1, cfg.n_seq_wm // K)
    n_cal_seq = max(1, -(-cfg.n_cal // T))
    n_profiles = n_t + n_t * K                                       # prof, and one per seed of the seeded selection
    grid_pts = n_t * len(cfg.gammas) * len(cfg.deltas)
    sel_pts = n_t * (4 * len(cfg.gammas) + len(DEFAULTS))            # upper bound: every gamma feasible
    seqs = (n_profiles * (cfg.n_null + n_cal_seq)
            + (grid_pts + sel_pts + n_t + 1) * per_key * K          # grid, selection, exercise, steering
            + n_t * K * (2 * cfg.n_seq_seed + 2 * per_key))         # seeded selection: A, A normal, equal power, default
    detections = (n_t * 2 * 2 * K * cfg.n_null + (grid_pts + sel_pts + n_t) * per_key * K
                  + n_t * K * (2 * cfg.n_seq_seed + 2 * per_key))
    matrices = n_t * 2 * 2 * K + (grid_pts + sel_pts + n_t + 1) * K + n_t * K * 4
    calibrations = n_profiles + 1                                    # + the steering control's visited profile
    selections = n_t * 3 + n_t * K * 3 + n_t                          # selection study, seeded (3 rules), exercise
    crow = min(_ROWS, cfg.n_cal)
    nb2 = [Item(f"decoding step of {_BATCH} sequences (N={cfg.vocab_size}, {cfg.n_states} states)",
                math.ceil(seqs * T / _BATCH), _decode(cfg), host=True, per_call=_STEPS,
                note=f"{seqs:,} sequences of {T} tokens"),
           Item(f"detection of {_BATCH} sequences of {T} tokens", math.ceil(detections / _BATCH), _detect(cfg), host=True),
           Item(f"green matrix ({cfg.vocab_size + 1} x {cfg.vocab_size})", matrices, _green_matrix(cfg), host=True),
           Item(f"green masses of every gamma ({cfg.n_masks} masks), {crow} calibration rows",
                calibrations * math.ceil(cfg.n_cal / crow), _masses(cfg), host=True),
           Item(f"Algorithm A on a calibration of {cfg.n_cal} rows (masses cached)", selections, _select(cfg),
                host=True, warmup=1)]
    return {"01-green-lists-and-power": nb1, "02-calibration-and-selection": nb2}
