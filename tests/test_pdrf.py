"""PDRF: the identities of spec Sec. 8 (claims 1-8), bad inputs (Sec. 9), the pysteps cross-check."""

from __future__ import annotations

import contextlib
import io
import math

import icml26.pdrf as m
import numpy as np
import pytest
import torch
from icml26.pdrf import experiments as ex

pytestmark = pytest.mark.usefixtures("one_thread")


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _pysteps():
    """Import pysteps quietly (its import prints a configuration line)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return pytest.importorskip("pysteps")


class _Rand(torch.nn.Module):
    """A fixed random nonlinear 'predictor' of the clean sequence."""

    def __init__(self, shape):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(shape, generator=_gen(3), dtype=torch.float64))
        self.t_in = 2

    def forward(self, z, t, cond):
        return torch.tanh(z * self.w + t.view(-1, *([1] * (z.dim() - 1))))


class _Const(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = torch.nn.Parameter(c)

    def forward(self, z, t, cond):
        return self.c.expand_as(z)


# -- claim 1: data-space Euler ----------------------------------------------------------------------

def test_euler_returns_last_clean_prediction():
    shape = (3, 4, 8, 8)
    model = _Rand(shape[1:])
    z, tr = m.sample(model, None, shape, nfe=5, noise=torch.randn(shape, generator=_gen(), dtype=torch.float64),
                     return_traj=True)
    assert float((z - tr["x1_hat"][-1]).abs().max()) < 1e-6


def test_euler_constant_predictor_closed_form():
    shape = (2, 3, 4, 4)
    c = torch.randn(shape[1:], generator=_gen(1), dtype=torch.float64)
    z0 = torch.randn(shape, generator=_gen(2), dtype=torch.float64)
    _, tr = m.sample(_Const(c), None, shape, nfe=5, noise=z0, return_traj=True)
    for k in range(6):
        assert float((tr["z"][k] - (c + (1 - k / 5) * (z0 - c))).abs().max()) < 1e-6


# -- claims 2-3: the PDRF loss ------------------------------------------------------------------------

def test_pdrf_loss_matches_formula():
    shape = (5, 4, 8, 8)
    model = _Rand(shape[1:])
    x1 = torch.rand(shape, generator=_gen(4), dtype=torch.float64)
    x_sl = torch.rand(shape, generator=_gen(5), dtype=torch.float64)
    loss, _ = m.pdrf_loss(model, x1, None, x_sl, lambda_phy=0.1, generator=_gen(6))
    g = _gen(6)
    t = torch.rand(5, generator=g).double()
    eps = torch.randn(shape, generator=g).double()
    z = t.view(-1, 1, 1, 1) * x1 + (1 - t.view(-1, 1, 1, 1)) * eps
    xh = model(z, t, None)
    tb = (1 - t).clamp_min(1e-3)
    ref = (((xh - x1) ** 2).mean((1, 2, 3)) / tb**2 + 0.1 * ((xh - x_sl) ** 2).mean((1, 2, 3)) / tb**2).mean()
    assert abs(float(loss.detach()) - float(ref.detach())) < 1e-6 * max(1.0, abs(float(ref.detach())))
    l0, _ = m.pdrf_loss(model, x1, None, None, lambda_phy=0.0, generator=_gen(6))
    l0b, _ = m.pdrf_loss(model, x1, None, x_sl * 7, lambda_phy=0.0, generator=_gen(6))
    assert float(l0) == float(l0b)


def test_teacher_optimum_gradient_vanishes():
    shape = (2, 3, 4, 4)
    x1 = torch.rand(shape, generator=_gen(7), dtype=torch.float64)
    x_sl = torch.rand(shape, generator=_gen(8), dtype=torch.float64)
    lam = 0.1
    model = _Const(((x1 + lam * x_sl) / (1 + lam))[0].clone())
    x1b, x_slb = x1[:1].expand(4, -1, -1, -1), x_sl[:1].expand(4, -1, -1, -1)
    loss, _ = m.pdrf_loss(model, x1b.contiguous(), None, x_slb.contiguous(), lambda_phy=lam, generator=_gen(9))
    loss.backward()
    assert float(model.c.grad.abs().max()) < 1e-6
    opt = ex.teacher_optimum(x1, x_sl, lam)
    assert opt["max_abs_diff"] < 1e-6


def test_induced_velocity():
    z = torch.randn(2, 3, generator=_gen())
    x = torch.randn(2, 3, generator=_gen(1))
    v = m.induced_velocity(x, z, torch.tensor([0.0, 0.5]))
    assert torch.allclose(v[0], x[0] - z[0]) and torch.allclose(v[1], (x[1] - z[1]) / 0.5)


# -- claims 4-5: semi-Lagrangian --------------------------------------------------------------------

def _blob(n=1, size=32, dtype=torch.float64):
    g = _gen(10)
    ys, xs = torch.meshgrid(torch.arange(size, dtype=dtype), torch.arange(size, dtype=dtype), indexing="ij")
    cx, cy = 10 + 12 * torch.rand(n, 1, 1, generator=g, dtype=dtype), 10 + 12 * torch.rand(n, 1, 1, generator=g,
                                                                                          dtype=dtype)
    return torch.exp(-0.5 * ((xs - cx) ** 2 + (ys - cy) ** 2) / 9.0)


def test_uniform_motion_schemes_agree_and_integer_shift_is_roll():
    f = _blob(2)
    mot = torch.zeros(2, 2, 32, 32, dtype=torch.float64)
    mot[:, 0], mot[:, 1] = 0.7, -0.4
    a = m.semi_lagrangian(f, mot, 6, "straight")
    b = m.semi_lagrangian(f, mot, 6, "trajectory")
    assert float((a - b).abs().max()) < 1e-5
    mot[:, 0], mot[:, 1] = 1.0, 2.0
    out = m.semi_lagrangian(f, mot, 3, "straight")
    rolled = torch.roll(f, shifts=(6, 3), dims=(-2, -1))
    assert float((out[:, 2, 6:, 3:] - rolled[:, 6:, 3:]).abs().max()) < 1e-6


def test_rotation_centroid_errors():
    rot = m.rotation_test()
    assert 0.3 <= rot["straight"][-1] <= 0.7
    assert rot["trajectory"][-1] < 0.05


def test_semi_lagrangian_matches_pysteps():
    _pysteps()
    from pysteps.extrapolation.semilagrangian import extrapolate

    f = _blob(1)
    mot = torch.zeros(1, 2, 32, 32, dtype=torch.float64)
    mot[:, 0], mot[:, 1] = 0.8, -0.5
    ours = m.semi_lagrangian(f, mot, 5, "trajectory")[0].numpy()
    ref = extrapolate(f[0].numpy(), mot[0].numpy(), 5, outval=0.0, interp_order=1)
    assert np.abs(ours - ref).max() < 1e-5
    ys, xs = torch.meshgrid(torch.arange(32.0, dtype=torch.float64), torch.arange(32.0, dtype=torch.float64),
                            indexing="ij")
    rot = torch.stack([-0.05 * (ys - 15.5), 0.05 * (xs - 15.5)])[None]
    ours = m.semi_lagrangian(f, rot, 8, "trajectory")[0].numpy()
    ref = extrapolate(f[0].numpy(), rot[0].numpy(), 8, outval=0.0, interp_order=1)
    assert np.abs(ours[:, 4:-4, 4:-4] - ref[:, 4:-4, 4:-4]).max() < 1e-3


# -- claim 6: metrics --------------------------------------------------------------------------------

def test_shifted_block_scores():
    s = ex.shifted_block_example()["scores"]
    assert math.isclose(s["csi"], 0.6) and math.isclose(s["pod"], 0.75) and math.isclose(s["far"], 0.25)
    assert math.isclose(s["hss"], 2 / 3) and math.isclose(s["bias"], 1.0)
    assert abs(s["fss3"] - 0.892857142857) < 1e-9 and math.isclose(s["pooled_csi"], 1.0)


def test_metrics_match_pysteps():
    _pysteps()
    from pysteps.verification.detcatscores import det_cat_fct
    from pysteps.verification.spatialscores import fss

    g = _gen(11)
    pred = torch.rand(3, 2, 16, 16, generator=g, dtype=torch.float64)
    obs = torch.rand(3, 2, 16, 16, generator=g, dtype=torch.float64) ** 2
    c = m.contingency(pred, obs, [0.3])[0].sum(0)                                   # all leads together
    ours = {k: float(v) for k, v in m.scores_from_counts(c).items()}
    ref = det_cat_fct(pred.numpy(), obs.numpy(), 0.3, scores=["CSI", "POD", "FAR", "HSS", "FA"])
    for k in ("csi", "pod", "far", "hss"):
        assert abs(ours[k] - ref[k.upper()]) < 1e-10
    bias = det_cat_fct(pred.numpy(), obs.numpy(), 0.3, scores=["BIAS"])["BIAS"]
    assert abs(ours["bias"] - bias) < 1e-10
    # FSS of a single field pair (pysteps sums over one field)
    for w in (1, 3, 5):
        ours = float(m.fss_from_sums(m.fss_sums(pred[:1, :1], obs[:1, :1], 0.3, w))[0])
        assert abs(ours - fss(pred[0, 0].numpy(), obs[0, 0].numpy(), 0.3, w)) < 1e-10


def test_evaluator_counts_sum_over_cases():
    g = _gen(12)
    pred = torch.rand(4, 3, 8, 8, generator=g)
    obs = torch.rand(4, 3, 8, 8, generator=g)
    ev = m.NowcastEvaluator(m.THRESHOLDS, 3, fss_windows=(1, 3), pool=4)
    ev.update(pred[:2], obs[:2])
    ev.update(pred[2:], obs[2:])
    s = ev.summary()
    ref = m.scores_from_counts(m.contingency(pred, obs, m.THRESHOLDS))["csi"].numpy()
    assert np.allclose(s["csi"], ref)


# -- claims 7-8: generator and motion ---------------------------------------------------------------

def test_generator_seeded_range_divergence():
    cfg = m.RadarConfig()
    a, ma = m.generate_radar(8, cfg, _gen(1), return_motion=True)
    b, mb = m.generate_radar(8, cfg, _gen(1), return_motion=True)
    assert torch.equal(a, b) and torch.equal(ma, mb)
    assert a.shape == (8, 12, 32, 32) and float(a.min()) >= 0 and float(a.max()) <= 1
    div = (ma[:, 0, 1:-1, 2:] - ma[:, 0, 1:-1, :-2]) / 2 + (ma[:, 1, 2:, 1:-1] - ma[:, 1, :-2, 1:-1]) / 2
    assert float(div.abs().max()) < 1e-5


def test_generator_base_rates():
    x = m.generate_radar(512, m.RadarConfig(), _gen(0))
    light, intense = float((x >= 0.10).double().mean()), float((x >= 0.55).double().mean())
    assert 0.15 <= light <= 0.50 and 0.005 <= intense <= 0.06


def test_motion_estimation_endpoint_error():
    g = _gen(13)
    f = _blob(6, dtype=torch.float32) * 0.8
    s = 0.4 + 0.8 * torch.rand(6, generator=g)
    th = 2 * math.pi * torch.rand(6, generator=g)
    u = torch.stack([s * torch.cos(th), s * torch.sin(th)], 1)[:, :, None, None].expand(-1, -1, 32, 32)
    nxt = m.semi_lagrangian(f, u.contiguous(), 1, "straight")[:, 0]
    est = m.estimate_motion(f, nxt)
    rain = nxt > 0.1
    assert float((est - u).norm(dim=1)[rain].mean()) < 0.35
    x, mot = m.generate_radar(64, m.RadarConfig(), _gen(2), return_motion=True)
    est = m.estimate_motion(x[:, 2], x[:, 3])
    rain = x[:, 3] > 0.1
    assert float((est - mot).norm(dim=1)[rain].mean()) < 0.5


# -- models, training, presets ------------------------------------------------------------------------

def test_unet_shapes_and_training_smoke():
    cfg = m.preset("smoke")
    x = m.generate_radar(8, cfg.radar, _gen(0))
    for kind in m.KINDS:
        model = ex.make_unet(cfg, kind)
        ema, hist = m.train(model, kind, x, 2, batch_size=4, progress=False, ema_every=1)
        assert len(hist["loss"]) == 2 and all(math.isfinite(v) for v in hist["loss"])
        p = ex.predict(cfg, kind, ema, x[:4, :4], torch.randn(4, 8, 32, 32, generator=_gen()))
        assert p.shape == (4, 8, 32, 32)


@pytest.mark.parametrize("kind", ["pdrf", "det"])
def test_train_flat_adamw_is_bit_identical_to_the_per_tensor_loop(monkeypatch, kind):
    # train() runs AdamW over one flat buffer of all weights (fewer dispatches on the CPU); the weights and
    # losses must be those of the per-parameter loop over the parameter list, bit for bit, or every book
    # number would have moved with the speed-up
    from icml26.pdrf import flow

    cfg = m.preset("smoke")
    x = m.generate_radar(8, cfg.radar, _gen(0))
    teacher = torch.rand(8, cfg.radar.t_out, cfg.radar.H, cfg.radar.W, generator=_gen(1))

    def run():
        torch.manual_seed(0)
        model = ex.make_unet(cfg, kind)
        ema, hist = m.train(model, kind, x, 6, batch_size=4, lr=1e-2, lambda_phy=10.0,
                            teacher=teacher, progress=False, ema_every=2, generator=_gen(2))
        return torch.cat([p.flatten() for p in ema.parameters()]), hist["loss"], model

    fast = run()
    flat = fast[2].parameters().__next__()
    assert flat.untyped_storage().nbytes() >= 4 * sum(p.numel() for p in fast[2].parameters())  # one buffer
    monkeypatch.setattr(flow, "adamw_flat",
                        lambda params, **k: (torch.optim.AdamW(params, foreach=False, **k), None))
    loop = run()
    assert torch.equal(fast[0], loop[0]) and fast[1] == loop[1]


def test_patch_unet_shapes_cost_and_light_evaluation():
    # the book's U-Net folds 2 x 2 pixel blocks into channels: same input/output shapes, a grid half
    # as fine inside; the trimmed-FSS evaluation gives the same scores as the full one
    cfg = m.preset("book")
    assert cfg.patch == 2 and cfg.radar.H % (cfg.patch * 2 ** (len(cfg.mults) - 1)) == 0
    net = m.CondUNet(4, 8, base=8, patch=2)
    assert net.inp.in_channels == 12 * 4 and net.out.out_channels == 8 * 4
    z, c = torch.rand(3, 8, 32, 32), torch.rand(3, 4, 32, 32)
    assert net(z, torch.rand(3), c).shape == (3, 8, 32, 32)
    with pytest.raises(ValueError, match="divisible"):
        net(torch.rand(1, 8, 28, 28), torch.zeros(1), torch.rand(1, 4, 28, 28))
    with pytest.raises(ValueError, match="patch"):
        m.CondUNet(4, 8, patch=0)
    small = m.preset("smoke")
    obs = m.generate_radar(4, small.radar, _gen(1))[:, small.radar.t_in:]
    pred = (obs + 0.1 * torch.randn(obs.shape, generator=_gen(2))).clamp(0, 1)
    full = ex.evaluate(small, {"p": pred}, obs, x_sl=obs)["p"]
    light = ex.evaluate(small, {"p": pred}, obs, x_sl=obs, fss_windows=(1,))["p"]
    for k in ("csi", "pooled_csi", "adv_mse", "mse"):
        np.testing.assert_allclose(full[k], light[k])
    assert full["csi_m"] == light["csi_m"] and light["fss"].shape[1] == 1


def test_presets_and_dry_run():
    for name in ("smoke", "book", "gpu"):
        cfg = m.get_setting(name)
        d = cfg.dry_run()
        assert type(d) is type(cfg) and d.steps <= cfg.steps and d.radar == cfg.radar and d.base == cfg.base
        f = cfg.patch * 2 ** (len(cfg.mults) - 1)
        assert cfg.radar.H % (f * 4) == 0 and cfg.radar.H % f == 0
    with pytest.raises(ValueError, match="name"):
        m.get_setting("huge")


def test_loss_weight_share_closed_form_and_numeric():
    # issue 38.1: eps 0.05 puts 51 % of the weight on t > 0.95 and 90 % on t > 0.8; 1e-3 puts 99 % on t > 0.95
    sh = m.loss_weight_share(0.05)
    assert abs(sh[0.95] - 20 / 39) < 1e-12 and abs(sh[0.8] - 35 / 39) < 1e-12
    assert m.loss_weight_share(1e-3)[0.95] > 0.99
    t = np.linspace(0, 1, 2_000_001)
    for eps in (0.05, 0.2, 1e-3):
        w = 1 / np.maximum(1 - t, eps) ** 2
        for c, v in m.loss_weight_share(eps, (0.95, 0.8, 0.5)).items():
            assert abs(v - w[t > c].sum() / w.sum()) < 1e-4
    tab = ex.weighting_table([0.05, 0.2], nfe=5)
    assert abs(tab.iloc[1, 2] - 4 / 9) < 1e-12          # cap 1/NFE: 44 % of the weight where the sampler queries
    with pytest.raises(ValueError, match="t_eps"):
        m.loss_weight_share(0.0)
    with pytest.raises(ValueError, match="cutoffs"):
        m.loss_weight_share(0.05, (1.5,))


def test_cap_one_over_nfe_leaves_sampler_and_loss_unchanged_where_queried():
    # the training cap 1/NFE changes the loss weight only above t = 1 - 1/NFE, and a sampler with cap
    # 1/NFE takes the same steps as with the official 1e-3 at NFE 5
    for k in range(5):
        assert abs(max(1 - k / 5, 0.2) - max(1 - k / 5, 1e-3)) < 1e-12
    for p in (m.preset("book"), m.preset("gpu")):
        assert p.t_eps == 1 / p.nfe and p.sample_t_eps == 1e-3
    net = lambda z, t, c: torch.tanh(z) * 0.5 + 0.1  # noqa: E731
    shape = (2, 3, 4, 4)
    nz = torch.randn(shape, generator=_gen(0), dtype=torch.float64)
    a = m.sample(net, None, shape, nfe=5, t_eps=0.2, noise=nz)
    b = m.sample(net, None, shape, nfe=5, t_eps=1e-3, noise=nz)
    assert torch.allclose(a, b, atol=1e-12)


def test_paired_initialisation_across_kinds():
    # issue 38.2: RF-v, RF-x and PDRF start from the same weights per seed, different seeds differ
    cfg = m.preset("smoke")
    from icml26.core import paired_init

    nets = {k: paired_init(3, lambda k=k: ex.make_unet(cfg, k)) for k in ("rf_v", "rf_x", "pdrf")}
    ref = nets["rf_x"].state_dict()
    for k in ("rf_v", "pdrf"):
        assert all(torch.equal(v, nets[k].state_dict()[n]) for n, v in ref.items())
    other = paired_init(4, lambda: ex.make_unet(cfg, "rf_x")).state_dict()
    assert not all(torch.equal(v, other[n]) for n, v in ref.items())
    x = m.generate_radar(16, cfg.radar, _gen(0))
    cfg0 = type(cfg)(**{**cfg.__dict__, "steps": 2})
    a, _ = ex.train_model(cfg0, "rf_x", x, seed=3, lambda_phy=0.0)
    b, _ = ex.train_model(cfg0, "pdrf", x, seed=3, lambda_phy=0.0, teacher=x[:, cfg.radar.t_in:])
    # with lambda 0 PDRF is RF-x: same init, batches and noise give the same weights
    assert all(torch.equal(v, b.state_dict()[n]) for n, v in a.state_dict().items())


def test_learning_rate_per_model():
    # issue 38: each model trains at its own rate (NB2 reads them on validation on one grid for all)
    from dataclasses import replace

    book = m.preset("book")
    for kind in ex.LR_KINDS:   # the preset's rate is a point of the grid, and not at an edge of it
        assert book.lr_of(kind) in book.lr_grid[1:-1], kind
    assert book.lr_of("rf_v") == book.lr and book.lr_of("rf_v_phy") == book.lr
    for scale in ("book", "gpu"):   # no run that chose a rate or weight is scored again on the test set
        p = m.preset(scale)
        assert not {p.tune_seed, *p.lr_confirm_seeds} & (set(p.seeds) | set(p.ctrl_seeds)), scale
    cfg = replace(m.preset("smoke"), steps=2)
    assert cfg.lr_of("pdrf") == cfg.lr and replace(cfg, lr_pdrf=0.02).lr_of("pdrf") == 0.02
    x = m.generate_radar(16, cfg.radar, _gen(0))
    tea = x[:, cfg.radar.t_in:]
    a, _ = ex.train_model(replace(cfg, lr_pdrf=0.02), "pdrf", x, seed=1, teacher=tea)
    b, _ = ex.train_model(cfg, "pdrf", x, seed=1, teacher=tea, lr=0.02)
    c, _ = ex.train_model(replace(cfg, lr_pdrf=0.02), "rf_x", x, seed=1)
    d, _ = ex.train_model(cfg, "rf_x", x, seed=1)
    assert all(torch.equal(v, b.state_dict()[n]) for n, v in a.state_dict().items())
    assert all(torch.equal(v, d.state_dict()[n]) for n, v in c.state_dict().items())   # RF-x keeps its own
    with pytest.raises(TypeError, match="kind"):
        cfg.lr_of(3)
    with pytest.raises(ValueError, match="lr_pdrf"):
        replace(cfg, lr_pdrf=-1.0)


def test_model_study_controls_single_runs_and_cost():
    # issue 38 / referee: the still-teacher PDRF and the old-cap RF-x are control rows on the first seed;
    # RF-v is trained only where the preset names it (gpu); FSS is scored for the 5 x 5 window only
    from dataclasses import replace

    from icml26.pdrf import cost

    base = m.preset("smoke")
    assert "rf_v" not in m.preset("book").single_runs and "rf_v" in m.preset("gpu").single_runs
    cfg = replace(base, steps=1, seeds=(0,), n_train=16, n_test=8, eval_batch=8, n_boot=5)
    res = ex.model_study(cfg)
    sc = res["scores"]
    assert {"det", "rf_x", "pdrf", "rf_x_old", "pdrf_still"} <= set(sc) and "rf_v" not in sc
    assert sc["pdrf_still"]["fss"].shape[1] == len(ex.NB3_FSS) == 1 and np.isfinite(sc["pdrf_still"]["adv_mse"]).all()
    assert set(res["trajs"]) == {"rf_x", "pdrf"}
    cn = ex.claim_numbers(sc, res["half"], cfg.radar.t_out, fss_win=0)
    assert set(cn["fss_half"]) == set(sc)
    with pytest.raises(ValueError, match="single_runs"):
        ex.model_study(replace(cfg, single_runs=("pdrf",)))
    gpu = m.preset("gpu")
    item = cost.notebooks("gpu")["03-pdrf-vs-baselines"][0]
    assert item.count == (2 + 2 * len(gpu.seeds) + 2) * gpu.steps


def test_teacher_controls_runs_oracle_rf_v_teacher_and_cost():
    # issue 38.3: the lambda sweep on validation (0 is RF-x), the paired rows at the tuned weight, the oracle
    # teacher (true motion) and RF-v + teacher
    from dataclasses import replace

    from icml26.pdrf import cost

    base = m.preset("smoke")
    assert m.preset("book").ctrl_rf_v is False and m.preset("gpu").ctrl_rf_v is True
    assert m.preset("gpu").ctrl_oracle is True
    names = [r[0] for r in ex.control_runs(replace(base, ctrl_rf_v=True, ctrl_oracle=True), 3.0)]
    assert names == ["rf_x", "tuned", "still", "oracle", "rf_v", "rf_v_phy"]
    # the still teacher (issue 38, referee): the same weight, the last frame repeated as the teacher
    assert ex.control_runs(base, 3.0) == [("rf_x", "rf_x", "none", 0.0), ("tuned", "pdrf", "est", 3.0),
                                          ("still", "pdrf", "still", 3.0)]
    assert ex.control_runs(replace(base, ctrl_still=False), 3.0) == [("rf_x", "rf_x", "none", 0.0),
                                                                    ("tuned", "pdrf", "est", 3.0)]
    # the oracle teacher is trained at the tuned weight
    assert [r for r in ex.control_runs(replace(base, ctrl_oracle=True), 3.0) if r[0] == "oracle"] == \
        [("oracle", "pdrf", "oracle", 3.0)]
    for bad in (0.0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match="lam"):
            ex.control_runs(base, bad)
    # issue 38 (grid edge): the book grid spans 10 to 1e5 in steps of 100, reaching the teacher-imitation limit
    # (two weights >= 1e3, where NB4 states the upper edge); five paired seeds for the rows
    book = m.preset("book")
    assert book.ctrl_lambdas == (0.0, 10.0, 1000.0, 100000.0) and len(book.ctrl_seeds) >= 5
    assert book.ctrl_lambda in book.ctrl_lambdas and sum(lam >= 1e3 for lam in book.ctrl_lambdas) >= 2
    for bad in ((), (0.0, 0.0, 0.1), (0.0, -1.0, 0.1), (0.0, float("nan"), 0.1), (0.1, 1.0), (0.0,), (0.0, 1.0, 0.5)):
        with pytest.raises(ValueError, match="ctrl_lambdas"):
            ex.teacher_sweep(replace(base, ctrl_lambdas=bad), {})
    cfg = replace(base, steps=1, n_train=16, n_test=8, eval_batch=8, ctrl_n_val=8, ctrl_lambdas=(0.0, 0.1, 0.3),
                  ctrl_seeds=(0, 1), ctrl_rf_v=True, ctrl_oracle=True)
    study = ex.classical_study(cfg)
    data = ex.control_data(cfg, study)
    sw = ex.teacher_sweep(cfg, data)
    assert sw["seed"] == 0 and sw["lambdas"] == (0.0, 0.1, 0.3)
    assert all(sw[k].shape == (3,) and np.isfinite(sw[k]).all() for k in ("val_csi_m", "test_csi_m", "test_adv"))
    assert list(ex.sweep_table(sw).index) == [0.0, 0.1, 0.3]
    ctl = ex.teacher_controls(cfg, data, 0.3, seeds=(0,), sweep=sw)
    ctl = ex.teacher_controls(cfg, data, 0.3, seeds=(1,), previous=ctl, sweep=sw)
    assert ctl["seeds"] == [0, 1] and ctl["lam"] == 0.3
    for key in ("test_csi_m", "test_adv", "test_bias", "test_csi_m_h1", "test_csi_m_h2"):
        assert set(ctl[key]) == {"rf_x", "tuned", "still", "oracle", "rf_v", "rf_v_phy"}
        assert all(v.shape == (2,) and np.isfinite(v).all() for v in ctl[key].values() if key != "test_bias")
    assert all(((0 <= v) & (v <= 1)).all() for h in ("h1", "h2") for v in ctl[f"test_csi_m_{h}"].values())
    # the sweep's seed: RF-x and the tuned weight are the sweep's runs, and training them again gives the same
    assert ctl["test_csi_m"]["rf_x"][0] == sw["test_csi_m"][0] and ctl["test_adv"]["tuned"][0] == sw["test_adv"][2]
    again = ex.teacher_controls(replace(cfg, ctrl_rf_v=False, ctrl_oracle=False), data, 0.3, seeds=(0,))
    assert again["test_adv"]["tuned"][0] == sw["test_adv"][2] and again["test_csi_m"]["rf_x"][0] == sw["test_csi_m"][0]
    assert set(data["teacher_scores"]) == {"est", "oracle", "still"}
    assert data["teacher_scores"]["still"]["csi_m"] == pytest.approx(study["scores"]["persistence"]["csi_m"])
    last = data["train"][:, cfg.radar.t_in - 1]
    assert all(torch.equal(data["teachers"]["still"][:, k], last) for k in range(cfg.radar.t_out))
    assert data["teacher_scores"]["est"]["csi_m"] == pytest.approx(study["scores"]["sl_est"]["csi_m"])
    one = ex.teacher_controls(replace(cfg, ctrl_rf_v=False), data, 0.3, seeds=(1,))
    assert all(np.array_equal(one[k][n], ctl[k][n][1:]) for k in ("test_csi_m", "test_adv") for n in one[k])
    # NB5's own step count (book: fewer than NB3's, issue 38 budget): its runs train ctrl_steps and never take the
    # sweep's runs (trained at cfg.steps); the same as a preset whose steps are ctrl_steps (EMA every step, so that
    # the returned model moves)
    lean = replace(cfg, ctrl_rf_v=False, ctrl_oracle=False, ema_every=1)
    sw1 = ex.teacher_sweep(lean, data)
    more = ex.teacher_controls(replace(lean, ctrl_steps=2), data, 0.3, seeds=(0,), sweep=sw1)
    assert more["steps"] == 2 and ctl["steps"] == 1 and more["test_adv"]["tuned"][0] != sw1["test_adv"][2]
    same = ex.teacher_controls(replace(lean, steps=2), data, 0.3, seeds=(0,))
    assert all(np.array_equal(same[k][n], more[k][n]) for k in ("test_csi_m", "test_adv") for n in same[k])
    with pytest.raises(ValueError, match="ctrl_steps"):
        ex.teacher_controls(replace(lean, ctrl_steps=0), data, 0.3, seeds=(0,))
    assert m.preset("book").ctrl_steps_of() == 450 < m.preset("book").steps
    assert m.preset("smoke").ctrl_steps_of() == m.preset("smoke").steps
    with pytest.raises(ValueError, match="study"):
        ex.control_data(cfg, {"frames": study["frames"]})
    with pytest.raises(ValueError, match="ctrl_n_val"):
        ex.control_data(replace(cfg, ctrl_n_val=0), study)
    for bad in ((0, 0), (1,), (), (0.5,)):
        with pytest.raises(ValueError, match="seeds"):
            ex.teacher_controls(cfg, data, 0.3, seeds=bad, previous=ctl if bad == (1,) else None)
    with pytest.raises(ValueError, match="lam"):
        ex.teacher_controls(cfg, data, 0.1, seeds=(2,), previous=ctl)
    with pytest.raises(ValueError, match="data"):
        ex.teacher_controls(cfg, {"train": data["train"]}, 0.3)
    with pytest.raises(ValueError, match="data"):
        ex.teacher_sweep(cfg, {"train": data["train"]})
    with pytest.raises(ValueError, match="sweep"):
        ex.teacher_controls(cfg, data, 0.3, seeds=(0,), sweep={"seed": 0})
    with pytest.raises(ValueError, match="seed"):
        ex.teacher_sweep(cfg, data, seed=1.5)
    # RF-v + teacher: the teacher term enters the velocity loss (lambda 0 gives RF-v's weights)
    x, two = m.generate_radar(16, cfg.radar, _gen(0)), replace(cfg, steps=2, ema_every=1)
    a, _ = ex.train_model(two, "rf_v", x, seed=3)
    b, h = ex.train_model(two, "rf_v_phy", x, seed=3, teacher=x[:, cfg.radar.t_in:])
    assert min(h["loss_phy"]) > 0 and not all(torch.equal(v, b.state_dict()[n]) for n, v in a.state_dict().items())
    c, _ = ex.train_model(two, "rf_v_phy", x, seed=3, lambda_phy=0.0)
    assert all(torch.equal(v, c.state_dict()[n]) for n, v in a.state_dict().items())
    gpu = m.preset("gpu")
    item = cost.notebooks("gpu")["05-what-the-teacher-contributes"][0]
    assert item.count == len(gpu.ctrl_seeds) * (2 + 1 + 1 + 2) * gpu.steps
    nb = cost.notebooks("gpu")
    n_conf = gpu.lr_confirm_top * len(gpu.lr_confirm_seeds)        # the compared pair's confirmation runs
    assert nb["04-the-teacher-weight"][0].count == (len(gpu.lr_grid) + 2 * n_conf + len(gpu.ctrl_lambdas)) * gpu.steps
    assert nb["02-radar-nowcasting"][0].count == (2 * len(gpu.lr_grid) + n_conf) * gpu.steps
    # NB2 reads the learning rate on validation: an equal grid per kind, validation scores only, and the sweep
    # reuses the grid's RF-x run at the preset's rate for lambda 0
    lcfg = replace(cfg, lr_grid=(0.05, 0.1, 0.2), lr=0.05, lr_rf_x=0.1, ctrl_rf_v=False, ctrl_oracle=False)
    lg = ex.lr_grid_study(lcfg, data)
    assert lg["lrs"] == (0.05, 0.1, 0.2) and all(lg[k].shape == (3,) and np.isfinite(lg[k]).all() for k in ex.LR_KINDS)
    # stage 2: RF-x's and PDRF's best lr_confirm_top rates re-run on lr_confirm_seeds; the U-Net's are not
    assert set(lg["confirm"]) == {"rf_x", "pdrf"} and lg["tune_seeds"]["det"] == (0,)
    for k in ("rf_x", "pdrf"):
        c, mean = lg["confirm"][k], lg["mean"][k]
        again = ~np.isnan(c[:, 0])
        assert c.shape == (3, len(lcfg.lr_confirm_seeds)) and again.sum() == lcfg.lr_confirm_top
        assert (lg[k][again].min() >= lg[k][~again].max())            # the re-run rates won stage 1
        assert np.allclose(mean[again], (lg[k][again] + c[again].sum(1)) / (1 + c.shape[1]))
        t = ex.lr_tuned(lg, k)
        assert t.best["lr"] == lg["lrs"][int(np.nanargmax(mean))] and t.best_score == np.nanmax(mean)
        assert lg["tune_seeds"][k] == (0, *lcfg.lr_confirm_seeds)
    assert ex.lr_tuned(lg, "det").best["lr"] == lg["lrs"][int(np.argmax(lg["det"]))]
    tab = ex.lr_table(lg)
    assert tab.shape == (3, 1 + 2 * (2 + len(lcfg.lr_confirm_seeds))) and tab.isna().sum().sum() == 2 * 2 * (3 - lcfg.lr_confirm_top)
    with pytest.raises(ValueError, match="lr_confirm_seeds"):
        ex.lr_grid_study(replace(lcfg, lr_confirm_seeds=(0,)), data, kinds=("det",))
    with pytest.raises(ValueError, match="lr_confirm_kinds"):
        ex.lr_grid_study(replace(lcfg, lr_confirm_kinds=("rf_v",)), data, kinds=("det",))
    with pytest.raises(ValueError, match="lg"):
        ex.lr_tuned({"lrs": (0.1,)}, "pdrf")
    sv = ex.teacher_sweep(lcfg, data, test=False, lr_grid=lg)
    assert sv["val_csi_m"][0] == lg["rf_x"][1] and np.isnan(sv["test_csi_m"]).all() and np.isfinite(sv["val_csi_m"]).all()
    fresh = ex.teacher_sweep(lcfg, data, test=False)
    assert fresh["val_csi_m"][0] == pytest.approx(lg["rf_x"][1])
    # NB4: the weight's stage 2, as the rate's: the best lr_confirm_top weights again on lr_confirm_seeds
    two = ex.teacher_sweep(lcfg, data, test=False, lr_grid=lg, confirm=True)
    again = ~np.isnan(two["confirm"][:, 0])
    assert again.sum() == lcfg.lr_confirm_top and two["val_csi_m"][again].min() >= two["val_csi_m"][~again].max()
    assert np.allclose(two["mean"][again], (two["val_csi_m"][again] + two["confirm"][again].sum(1)) / 2)
    assert np.isnan(two["mean"][~again]).all() and np.allclose(two["val_csi_m"], sv["val_csi_m"])
    tab = ex.sweep_table(two)
    assert list(tab.columns[:3]) == ["validation CSI-M, seed 0", f"validation CSI-M, seed {lcfg.lr_confirm_seeds[0]}",
                                     "validation CSI-M, mean"] and np.allclose(tab.iloc[:, 2], two["mean"], equal_nan=True)
    with pytest.raises(ValueError, match="confirm"):
        ex.teacher_sweep(lcfg, data, confirm=True)
    with pytest.raises(ValueError, match="lr_confirm_seeds"):
        ex.teacher_sweep(replace(lcfg, lr_confirm_seeds=(0,)), data, test=False, confirm=True)
    with pytest.raises(ValueError, match="lr_grid"):
        ex.teacher_sweep(lcfg, data, lr_grid=lg)
    with pytest.raises(ValueError, match="lr_grid"):
        ex.lr_grid_study(replace(lcfg, lr_grid=(0.1, 0.05, 0.2)), data)
    one = ex.lr_grid_study(lcfg, data, kinds=("pdrf",))   # NB4 runs PDRF's grid: the same runs as above
    assert set(one) == {"seed", "lrs", "pdrf", "confirm", "mean", "tune_seeds"} and np.allclose(one["pdrf"], lg["pdrf"])
    assert np.allclose(one["confirm"]["pdrf"], lg["confirm"]["pdrf"], equal_nan=True)
    with pytest.raises(ValueError, match="kinds"):
        ex.lr_grid_study(lcfg, data, kinds=("rf_v",))
    dry = gpu.dry_run()
    assert len(dry.ctrl_seeds) == 1 and dry.ctrl_n_val <= 8 and dry.ctrl_lambdas == gpu.ctrl_lambdas[:2]
    assert dry.lr_confirm_seeds == gpu.lr_confirm_seeds[:1]


def test_release_teacher_gap_zero_motion_is_the_spline_smoothing():
    # issue 38.4: without prefilter the release's order-3 spline does not interpolate: at zero motion it
    # returns the frame filtered by (1, 4, 1) / 6 along each axis (edge pixel repeated), not the frame
    cfg = m.preset("smoke")
    x = m.generate_radar(4, cfg.radar, _gen(1)).double()
    last = x[:, cfg.radar.t_in - 1]
    pad = torch.nn.functional.pad(last[:, None], (1, 1, 1, 1), mode="replicate")[:, 0]
    sm = (pad[:, :-2] + 4 * pad[:, 1:-1] + pad[:, 2:]) / 6
    sm = (sm[..., :-2] + 4 * sm[..., 1:-1] + sm[..., 2:]) / 6
    still = ex.release_teacher_gap(last, torch.zeros(4, 2, 32, 32, dtype=torch.float64), 2)
    assert abs(still["max"] - float((last - sm.clamp(0, 1)).abs().max())) < 1e-9
    assert 0 < still["interior_mean"] < still["max"]


@pytest.mark.cuda
def test_cuda_matches_cpu():
    cfg = m.preset("smoke")
    x = m.generate_radar(4, cfg.radar, _gen(0))
    torch.manual_seed(0)
    model = ex.make_unet(cfg, "pdrf")
    noise = torch.randn(4, 8, 32, 32, generator=_gen(1))
    cpu = m.sample(model, x[:, :4], noise.shape, noise=noise)
    gpu = m.sample(model.cuda(), x[:, :4].cuda(), noise.shape, noise=noise.cuda())
    assert float((cpu - gpu.cpu()).abs().max()) < 1e-4
    xs = x[:, 3]
    mot_c = m.estimate_motion(x[:, 2], xs)
    mot_g = m.estimate_motion(x[:, 2].cuda(), xs.cuda())
    assert float((mot_c - mot_g.cpu()).abs().max()) < 1e-3


# -- Sec. 9: bad inputs --------------------------------------------------------------------------------

def test_bad_inputs():
    f = torch.rand(2, 32, 32)
    mot = torch.zeros(2, 2, 32, 32)
    with pytest.raises(ValueError, match="motion"):
        m.semi_lagrangian(f, mot[:, :1], 3)
    with pytest.raises(ValueError, match="n_steps"):
        m.semi_lagrangian(f, mot, 0)
    with pytest.raises(ValueError, match="scheme"):
        m.semi_lagrangian(f, mot, 2, scheme="euler")
    with pytest.raises(ValueError, match="interp"):
        m.semi_lagrangian(f, mot, 2, interp="nearest")
    with pytest.raises(ValueError, match="boundary"):
        m.semi_lagrangian(f, mot, 2, boundary="wrap")
    with pytest.raises(ValueError, match="motion"):
        m.semi_lagrangian(f, mot + float("nan"), 2)
    with pytest.raises(ValueError, match="levels"):
        m.estimate_motion(f, f, levels=4)
    with pytest.raises(ValueError, match="alpha"):
        m.estimate_motion(f, f, alpha=0.0)
    with pytest.raises(ValueError, match="iters"):
        m.estimate_motion(f, f, iters=0)
    with pytest.raises(ValueError, match="same shape"):
        m.estimate_motion(f, f[:1])
    with pytest.raises(ValueError, match="4-D"):
        m.persistence(f, 3)
    with pytest.raises(ValueError, match="t_in"):
        m.sl_teacher(torch.rand(2, 1, 32, 32), 3)
    with pytest.raises(ValueError, match="t_out"):
        m.sl_teacher(torch.rand(2, 3, 32, 32), 0)
    with pytest.raises(ValueError, match="divisible"):
        m.CondUNet(4, 8, mults=(1, 2, 2))(torch.rand(1, 8, 30, 30), torch.zeros(1), torch.rand(1, 4, 30, 30))
    model = m.CondUNet(4, 8, base=8)
    x1, cond = torch.rand(2, 8, 16, 16), torch.rand(2, 4, 16, 16)
    with pytest.raises(ValueError, match="param"):
        m.pdrf_loss(model, x1, cond, param="eps")
    with pytest.raises(ValueError, match="lambda_phy"):
        m.pdrf_loss(model, x1, cond, x1, lambda_phy=-0.1)
    with pytest.raises(ValueError, match="x_sl"):
        m.pdrf_loss(model, x1, cond, None, lambda_phy=0.1)
    with pytest.raises(ValueError, match="x_sl"):
        m.pdrf_loss(model, x1, cond, x1[:1], lambda_phy=0.1)
    with pytest.raises(ValueError, match="t_eps"):
        m.pdrf_loss(model, x1, cond, x1, t_eps=1.0)
    with pytest.raises(ValueError, match="cond"):
        m.pdrf_loss(model, x1, cond[:1], x1)
    with pytest.raises(ValueError, match="nfe"):
        m.sample(model, cond, x1.shape, nfe=0)
    with pytest.raises(ValueError, match="noise"):
        m.sample(model, cond, x1.shape, noise=x1[:1])
    with pytest.raises(ValueError, match="thresholds"):
        m.contingency(x1, x1, [])
    with pytest.raises(ValueError, match="thresholds"):
        m.contingency(x1, x1, [0.5, 0.2])
    with pytest.raises(ValueError, match="same shape"):
        m.contingency(x1, x1[:1], [0.5])
    with pytest.raises(ValueError, match="window"):
        m.fss_sums(x1, x1, 0.5, 4)
    with pytest.raises(ValueError, match="k="):
        m.max_pool(x1, 3)
    ev = m.NowcastEvaluator(m.THRESHOLDS, 8)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ev.update(x1 * 2, x1)
    with pytest.raises(ValueError, match="sigma_range"):
        m.RadarConfig(sigma_range=(4.0, 1.5))
    with pytest.raises(ValueError, match="birth_prob"):
        m.RadarConfig(birth_prob=1.5)
    with pytest.raises(ValueError, match="k_max"):
        m.RadarConfig(k_max=4)
    with pytest.raises(ValueError, match="H and W"):
        m.RadarConfig(H=0)
    with pytest.raises(ValueError, match="t_in"):
        m.RadarConfig(t_in=1)
    with pytest.raises(ValueError, match="t_out"):
        m.RadarConfig(t_out=0)


def test_train_loop_no_host_sync_per_step():
    # issue 43: the training loop notebooks 2 and 3 call reads nothing from the host per step (before: 5
    # syncs per step for the U-Net, 7 for RF-x, 8 for PDRF: float() of three losses and isfinite checks);
    # the losses are kept on the device and read once after the loop, as float32 values
    from icml26.book.budget import count_step
    from icml26.pdrf import flow

    cfg = m.preset("smoke")
    x = m.generate_radar(16, cfg.radar, _gen(0))
    teach = x[:, cfg.radar.t_in:].flip(-1).contiguous()

    def run(kind, n):
        torch.manual_seed(1)
        return flow.train(ex.make_unet(cfg, kind), kind, x, n, batch_size=4, lr=1e-3, lambda_phy=0.5,
                          teacher=teach if kind == "pdrf" else None, t_eps=0.2, ema_every=2, progress=False)

    for kind in ("det", "rf_x", "pdrf"):
        one, three = count_step(lambda k=kind: run(k, 1)), count_step(lambda k=kind: run(k, 3))
        assert three.syncs == one.syncs, kind
        _, h = run(kind, 3)
        assert all(len(v) == 3 for v in h.values())
        assert all(float(torch.tensor(v, dtype=torch.float32)) == v for v in h["loss"] + h["loss_phy"])
        assert (min(h["loss_phy"]) > 0) == (kind == "pdrf")
    with pytest.raises(ValueError, match="teacher"):
        flow.train(ex.make_unet(cfg, "pdrf"), "pdrf", x, 1, teacher=teach[:, :2], progress=False)
    bad = teach.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="teacher"):
        flow.train(ex.make_unet(cfg, "pdrf"), "pdrf", x, 1, teacher=bad, progress=False)
