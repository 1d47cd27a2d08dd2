"""Unit identities (spec Sec. 8, claims 1-10) and bad inputs (Sec. 9) of icml26.dynvla."""

from __future__ import annotations

import icml26.dynvla as m
import numpy as np
import pytest
import torch
from icml26.dynvla import experiments as ex
from icml26.dynvla.metric import comfort_t, scene_tensors, states_t
from icml26.dynvla.render import _points, _texture
from icml26.dynvla.rft import seq_logp
from icml26.dynvla.sim import CAR_L, CAR_W, hand_scene
from icml26.dynvla.vla import sft_loss

FREE_REF = np.array([40.0])


@pytest.fixture(scope="module")
def data():
    return m.build_dataset(24, seed=3)


@pytest.fixture(scope="module")
def tok(data):
    cfg = m.preset("smoke")
    t, _ = m.train_tokenizer(data.pairs(), ex.tok_config(cfg), steps=3, batch=16, seed=0, log_every=1)
    return t


# -- claim 1: the PDMS combination ----------------------------------------------------------------
def test_pdms_combination_and_gates():
    rng = np.random.default_rng(0)
    nc = rng.choice([0.0, 0.5, 1.0], 1000)
    dac, ttc, c = (rng.integers(0, 2, 1000).astype(float) for _ in range(3))
    ep = rng.random(1000)
    p = m.combine(nc, dac, ep, ttc, c)
    assert np.allclose(p, nc * dac * (5 * ep + 5 * ttc + 2 * c) / 12)
    assert p.min() >= 0 and p.max() <= 1
    assert np.all(p[dac == 0] == 0)


def test_pdm_score_in_unit_interval_and_gated(data):
    s = m.pdm_score(data.batch, np.stack([data.plan, data.cv], 1), data.ref)
    assert s["pdms"].shape == (len(data), 2)
    assert (s["pdms"] >= 0).all() and (s["pdms"] <= 1).all()
    assert np.all(s["pdms"][(s["dac"] == 0) | (s["nc"] == 0)] == 0)
    assert np.allclose(s["pdms"], m.combine(s["nc"], s["dac"], s["ep"], s["ttc"], s["c"]))


# -- claim 2: oriented-box overlap vs shapely ---------------------------------------------------
def test_boxes_overlap_hand_cases():
    a = np.array([0.0, 0.0, 0.0, 4.5, 1.9])
    assert m.boxes_overlap(a, np.array([4.4, 0.0, 0.0, 4.5, 1.9]))
    assert not m.boxes_overlap(a, np.array([4.6, 0.0, 0.0, 4.5, 1.9]))
    assert m.boxes_overlap(a, np.array([0.0, 1.8, 0.0, 4.5, 1.9]))
    assert not m.boxes_overlap(a, np.array([0.0, 2.0, 0.0, 4.5, 1.9]))


def test_boxes_overlap_matches_shapely():
    shapely = pytest.importorskip("shapely")
    from shapely.geometry import Polygon

    rng = np.random.default_rng(1)
    n = 10_000
    a = np.stack([rng.uniform(-4, 4, n), rng.uniform(-4, 4, n), rng.uniform(-np.pi, np.pi, n),
                  rng.uniform(1, 6, n), rng.uniform(0.5, 3, n)], 1)
    b = np.stack([rng.uniform(-4, 4, n), rng.uniform(-4, 4, n), rng.uniform(-np.pi, np.pi, n),
                  rng.uniform(1, 6, n), rng.uniform(0.5, 3, n)], 1)
    ours = m.boxes_overlap(a, b)

    def poly(r):
        x, y, p, L, W = r
        c, s = np.cos(p), np.sin(p)
        pts = [(x + c * u - s * v, y + s * u + c * v) for u, v in ((L / 2, W / 2), (-L / 2, W / 2), (-L / 2, -W / 2),
                                                                   (L / 2, -W / 2))]
        return Polygon(pts)

    ref = np.array([poly(a[i]).intersection(poly(b[i])).area > 1e-9 for i in range(n)])
    assert shapely.__version__
    assert (ours == ref).mean() >= 0.9995  # touching boxes are the only possible disagreement
    assert ours.sum() > 1000 and (~ours).sum() > 1000


# -- claim 3: stopped car ahead ------------------------------------------------------------------
def test_stopped_car_hand_case():
    blocked = hand_scene(10.0, [(8.5 + CAR_L, 0.0, 0.0)])
    s = m.pdm_score(blocked, m.constant_velocity_plan(blocked), FREE_REF)
    assert s["ttc"][0] == 0 and s["nc"][0] == 0 and s["pdms"][0] == 0
    free = hand_scene(10.0, [(8.5 + CAR_L, 3.5, 0.0)])
    s = m.pdm_score(free, m.constant_velocity_plan(free), FREE_REF)
    assert s["nc"][0] == 1 and s["ttc"][0] == 1 and s["dac"][0] == 1


def test_collision_time_is_085s():
    blocked = hand_scene(10.0, [(8.5 + CAR_L, 0.0, 0.0)])
    st = states_t(torch.as_tensor(m.constant_velocity_plan(blocked), dtype=torch.float64))
    gap = 8.5 + CAR_L - st[0, :, 0]
    first = int(torch.nonzero(gap < CAR_L)[0])          # the boxes overlap once the centres are < L apart
    assert abs(first * 0.1 - 0.9) < 1e-9                # first grid step after the contact at 0.85 s


def test_rear_end_by_other_is_not_at_fault():
    sc = hand_scene(5.0, [(-6.0, 0.0, 12.0)])          # a faster car from behind in the ego lane
    s = m.pdm_score(sc, m.constant_velocity_plan(sc), FREE_REF)
    assert s["nc"][0] == 1


def test_closure_breaks_dac_and_halves_nc():
    sc = hand_scene(10.0, [], closure=(15.0, 40.0, -1.75, 1.75))
    s = m.pdm_score(sc, m.constant_velocity_plan(sc), FREE_REF)
    assert s["dac"][0] == 0 and s["nc"][0] == 0.5 and s["pdms"][0] == 0


# -- claim 4: comfort ------------------------------------------------------------------------------
@pytest.mark.parametrize("acc,expected", [(3.0, 0.0), (1.0, 1.0), (-3.0, 1.0), (-4.5, 0.0)])
def test_comfort_constant_acceleration(acc, expected):
    t = 0.5 * np.arange(1, 9)
    v0 = 14.0
    x = v0 * t + 0.5 * acc * t ** 2
    wp = np.stack([x, 0 * t], -1)[None, None]
    c = comfort_t(states_t(torch.as_tensor(wp)), m.PDMSConfig())
    assert float(c) == expected


def test_frame_transform_zero_and_lateral():
    st = m.waypoints_to_states(np.zeros((1, 8, 2)))
    assert np.allclose(st[..., :2], 0) and np.allclose(st[..., 3], 0)
    t = 0.5 * np.arange(1, 9)
    s_ = np.clip(t / 4, 0, 1)
    lat = np.stack([10 * t, 3.5 * s_ ** 3 * (10 - 15 * s_ + 6 * s_ ** 2)], -1)[None]   # one lane to the left
    right = hand_scene(10.0, [], ego_lane=0)                 # lane 0 is the rightmost (y = -3.5)
    left = hand_scene(10.0, [], ego_lane=2)
    assert m.pdm_score(right, lat, np.array([40.0]))["dac"][0] == 1
    assert m.pdm_score(left, lat, np.array([40.0]))["dac"][0] == 0
    zero = m.pdm_score(right, np.zeros((1, 8, 2)), np.array([40.0]))
    assert zero["ep"][0] == 0 and zero["dac"][0] == 1


def test_ep_not_identically_one(data):
    s = m.pdm_score(data.batch, data.cv, data.ref)
    assert s["ep"].min() < 0.99


# -- claim 5: FAST-lite ----------------------------------------------------------------------------
def test_fastlite_round_trip(data):
    f = m.FastLite()
    tok = f.encode(data.plan)
    assert tok.shape == (len(data), 16) and tok.min() >= 0 and tok.max() <= 255
    rec = f.decode(tok)
    ok = ~f.clipped(data.plan)
    err = np.linalg.norm(rec - data.plan, axis=1)
    assert ok.all()
    assert (err <= f.bound() + 1e-9).all()
    assert np.allclose(m.dct_matrix(8) @ m.dct_matrix(8).T, np.eye(8))


# -- claim 6-7: GRPO -------------------------------------------------------------------------------
def test_group_advantages_properties():
    r = torch.rand(6, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a = m.group_advantages(r)
    assert torch.allclose(a.mean(1), torch.zeros(6, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(a.std(1, unbiased=False), torch.ones(6, dtype=torch.float64), atol=1e-6)
    assert torch.allclose(m.group_advantages(2.5 * r - 3), a, atol=1e-9)
    assert torch.equal(m.group_advantages(torch.full((2, 8), 0.73)), torch.zeros(2, 8))


def test_grpo_loss_zero_and_reinforce_gradient():
    g = torch.Generator().manual_seed(0)
    lp = torch.randn(4, 5, generator=g)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[0, 3:] = False
    assert float(m.grpo_loss(lp, lp, lp, torch.zeros(4), mask)) == 0.0
    new = lp.clone().requires_grad_(True)
    adv = torch.randn(4, generator=g)
    m.grpo_loss(new, lp, lp.clone(), adv, mask, beta=0.0).backward()
    ref = -(adv[:, None] * mask) / mask.sum(1, keepdim=True) / 4
    assert torch.allclose(new.grad, ref, atol=1e-6)


# -- claim 8: VQ -------------------------------------------------------------------------------------
@pytest.mark.parametrize("l2", [False, True])
def test_vq_nearest_and_straight_through(l2):
    torch.manual_seed(0)
    vq = m.VectorQuantizer(7, 3, l2=l2)
    e = torch.randn(4, 6, 3, requires_grad=True)
    z, idx, loss = vq(e)
    ee = torch.nn.functional.normalize(e, dim=-1) if l2 else e
    brute = torch.cdist(ee.detach().reshape(-1, 3), vq.codes().detach()).argmin(1).reshape(4, 6)
    assert torch.equal(idx, brute)
    assert torch.allclose(z, vq.codes()[idx].detach() + (ee - ee.detach()))
    w = torch.randn_like(z)
    (z * w).sum().backward()
    if not l2:
        assert torch.allclose(e.grad, w)
    else:
        assert e.grad.abs().sum() > 0
    assert float(loss.detach()) >= 0


def test_tokenizer_encode_and_codes(tok, data):
    o_t, o_t1, b_t, b_t1, mot = data.pairs()
    idx, z = tok.encode(o_t[:5], o_t1[:5])
    assert idx.shape == (5, 8) and z.shape == (5, 8, tok.cfg.d_vq)
    assert (idx[:, :4] < tok.cfg.m_ego).all() and (idx[:, 4:] >= tok.cfg.m_ego).all()
    assert torch.allclose(tok.lookup(idx), z)
    loss, logs = tok.loss(o_t[:5], o_t1[:5], b_t[:5], b_t1[:5], mot[:5])
    assert torch.isfinite(loss) and {"vq", "img_mse", "bev_ce", "act"} <= set(logs)
    assert m.code_usage(idx[:, :4], tok.cfg.m_ego)["active"] >= 1
    cpl = m.DynamicsTokenizer(tok.cfg.coupled)
    assert cpl.act_head is None and cpl.vq.codebook.shape[0] == 2 * tok.cfg.m_ego


# -- claim 9: constrained decoding -------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["none", "meta", "dynamics", "future_image"])
def test_constrained_decoding_parseable(mode, data, tok):
    space = m.TokenSpace()
    torch.manual_seed(0)
    pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2)
    img, speed = data.cam[:6, :2].flatten(1, 2), data.speed[:6]
    out = m.generate(pol, (img, speed), mode, space)
    ok, traj = m.parse_output(out, mode, space, m.FastLite(), data.cv[:6])
    assert ok.all() and traj.shape == (6, 8, 2)
    tgt = m.build_targets(data.subset(np.arange(6)), mode, tok, m.FastLite(), space)
    assert tgt.shape == out.shape
    assert m.parse_output(tgt, mode, space, m.FastLite())[0].all()
    assert np.allclose(m.parse_output(tgt, mode, space, m.FastLite())[1],
                       m.FastLite().decode(m.FastLite().encode(data.plan[:6])))
    lp = seq_logp(pol, img, speed, out)
    assert lp.shape == out.shape and (lp <= 0).all()


def test_latency_order():
    space = m.TokenSpace()
    assert [space.length(k) for k in ("none", "meta", "dynamics", "future_image")] == [18, 22, 36, 84]


def test_oracle_cot_forces_the_prefix(data, tok):
    space = m.TokenSpace()
    torch.manual_seed(0)
    pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2)
    sub = data.subset(np.arange(6))
    tgt = m.build_targets(sub, "dynamics", tok, m.FastLite(), space)
    ev = m.evaluate_policy(pol, sub, "dynamics", space, m.FastLite(), oracle_cot=True, targets=tgt)
    assert torch.equal(ev["tokens_out"][:, :18], tgt[:, :18]) and ev["forwards"] == 18


def test_sft_and_rft_run(data, tok):
    space = m.TokenSpace()
    torch.manual_seed(0)
    pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2)
    tgt = m.build_targets(data, "none", tok, m.FastLite(), space)
    cur = m.sft_train(pol, data, tgt, "none", space, m.SFTConfig(epochs=2, batch=8))
    assert cur["act"][-1] < cur["act"][0]
    from icml26.dynvla.rft import clone_frozen
    curves = m.rft_train(pol, clone_frozen(pol), data, "none", space, m.FastLite(),
                         m.GRPOConfig(iterations=2, contexts_per_step=3, group_size=4))
    assert len(curves["reward"]) == 2 and all(0 <= f <= 1 for f in curves["format"])


def test_masked_logp_matches_constrained_sampling(data):
    """Issue 39 point 8: RFT's ratios are taken under the distribution the samples came from. With
    the template ranges, seq_logp equals the log-probabilities that constrained sampling reports,
    and the probabilities of each position sum to one over its allowed range only."""
    space = m.TokenSpace()
    torch.manual_seed(0)
    pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2).eval()
    img, speed = data.cam[:5, :2].flatten(1, 2), data.speed[:5]
    g = torch.Generator().manual_seed(1)
    ranges = space.template("dynamics")[0]
    out, lp = m.generate(pol, (img, speed), "dynamics", space, greedy=False, constrained=True, generator=g,
                         return_logp=True)
    with torch.no_grad():
        masked = seq_logp(pol, img, speed, out, ranges)
        free = seq_logp(pol, img, speed, out)
    assert torch.allclose(masked, lp, atol=1e-5)
    assert (masked >= free - 1e-6).all() and (masked > free + 1e-4).any()   # mass renormalised onto the range
    with pytest.raises(ValueError, match="ranges"):
        seq_logp(pol, img, speed, out, ranges[:-1])


def test_rft_constrained_recipe_samples_well_formed(data, tok):
    space = m.TokenSpace()
    torch.manual_seed(0)
    pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2)
    from icml26.dynvla.rft import clone_frozen
    cfg = m.GRPOConfig(iterations=2, contexts_per_step=3, group_size=4)
    assert cfg.constrained is True
    curves = m.rft_train(pol, clone_frozen(pol), data, "dynamics", space, m.FastLite(), cfg)
    assert curves["format"] == [1.0, 1.0]              # masked samples are always well formed
    old = m.rft_train(pol, clone_frozen(pol), data, "dynamics", space, m.FastLite(),
                      m.GRPOConfig(iterations=1, contexts_per_step=3, group_size=4, constrained=False))
    assert 0.0 <= old["format"][0] <= 1.0
    with pytest.raises(TypeError, match="constrained"):
        m.GRPOConfig(constrained=1)


def test_preset_seeds_and_grids():
    book, gpu = m.preset("book"), m.preset("gpu")
    assert len(book.seeds) >= 5 and len(book.probe_seeds) >= 3 and len(gpu.seeds) >= 5   # issue 35: 5 at book
    assert min(book.rft_seeds, len(book.seeds)) >= 3 and gpu.rft_seeds >= len(gpu.seeds)
    assert len(book.sft_lr_grid) >= 3 and book.n_val > 0 and "dynamics" in book.rft_modes
    d = book.dry_run()
    assert len(d.seeds) <= len(book.seeds) and len(d.sft_lr_grid) <= len(book.sft_lr_grid) and not d.probe_edge


def test_make_policy_is_paired_by_seed():
    """Every variant of one training seed starts from the same weights, drawn from the seed alone."""
    space = m.TokenSpace()
    cfg = m.preset("smoke")
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b, c = ex.make_policy(space, cfg, 3), ex.make_policy(space, cfg, 3), ex.make_policy(space, cfg, 4)
    assert torch.equal(torch.random.get_rng_state(), before)           # the global stream is left alone
    pa, pb, pc = (torch.cat([p.flatten() for p in x.parameters()]) for x in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)


# -- claim 10: vectorised rendering = a loop renderer -----------------------------------------------
def _slow_render(batch, t, pose, cfg):
    w = batch.cfg
    k = w.t_index(t)
    bev = np.zeros((len(batch), cfg.H, cfg.W), int)
    img = np.zeros((len(batch), cfg.H, cfg.W, 3))
    pts = _points(cfg, cfg.supersample)
    for n in range(len(batch)):
        x0, y0, p0 = pose[n]
        for r in range(cfg.H):
            for c in range(cfg.W):
                cols = []
                for s in range(pts.shape[2]):
                    f, lft = pts[r, c, s]
                    X = x0 + np.cos(p0) * f - np.sin(p0) * lft
                    Y = y0 + np.sin(p0) * f + np.cos(p0) * lft
                    road = abs(Y) <= w.road_half
                    bounds = w.lane_centres[:-1] + w.lane_width / 2
                    near = min(abs(Y - bb) for bb in bounds)
                    mark = road and ((near < 0.3 and (X % 6.0) < 3.0) or abs(abs(Y) - w.road_half) < 0.3)
                    car = False
                    for a in range(batch.agents.shape[2]):
                        ax, ay, ap, _, val = batch.agents[n, k, a]
                        u = np.cos(ap) * (X - ax) + np.sin(ap) * (Y - ay)
                        v = -np.sin(ap) * (X - ax) + np.cos(ap) * (Y - ay)
                        car |= val > 0.5 and abs(u) <= CAR_L / 2 and abs(v) <= CAR_W / 2
                    cl = batch.closures[n]
                    cone = cl[4] > 0.5 and cl[0] <= X <= cl[1] and cl[2] <= Y <= cl[3]
                    tex = _texture(np.array([X]), np.array([Y]), batch.texture_seed[n:n + 1], cfg.texture_scale)[0]
                    col = (0.25 + 0.35 * tex, 0.45 + 0.3 * tex, 0.2 + 0.1 * tex)
                    col = (0.42, 0.42, 0.45) if road else col
                    col = (0.95, 0.95, 0.95) if mark else col
                    col = (1.0, 0.55, 0.0) if cone else col
                    col = (0.85, 0.1, 0.1) if car else col
                    cols.append(col)
                img[n, r, c] = np.mean(cols, 0)
                f, lft = _points(cfg, 1)[r, c, 0]
                X = x0 + np.cos(p0) * f - np.sin(p0) * lft
                Y = y0 + np.sin(p0) * f + np.cos(p0) * lft
                car = any(batch.agents[n, k, a, 4] > 0.5 and
                          abs(np.cos(batch.agents[n, k, a, 2]) * (X - batch.agents[n, k, a, 0]) + np.sin(
                              batch.agents[n, k, a, 2]) * (Y - batch.agents[n, k, a, 1])) <= CAR_L / 2 and
                          abs(-np.sin(batch.agents[n, k, a, 2]) * (X - batch.agents[n, k, a, 0]) + np.cos(
                              batch.agents[n, k, a, 2]) * (Y - batch.agents[n, k, a, 1])) <= CAR_W / 2
                          for a in range(batch.agents.shape[2]))
                cl = batch.closures[n]
                cone = cl[4] > 0.5 and cl[0] <= X <= cl[1] and cl[2] <= Y <= cl[3]
                bev[n, r, c] = 2 if car else 3 if cone else 1 if abs(Y) <= w.road_half else 0
    return img.transpose(0, 3, 1, 2), bev


def test_vectorised_rendering_matches_loop():
    b = m.sample_scenarios(5, m.WorldConfig(), seed=4)
    cfg = m.RasterConfig()
    pose = np.stack([b.ego_init[:, 0] + 3.0, b.ego_init[:, 1] + 0.4, np.full(5, 0.05)], 1)
    img_ref, bev_ref = _slow_render(b, 1.0, pose, cfg)
    assert np.allclose(m.render_camera(b, 1.0, pose, cfg), img_ref, atol=1e-6)
    assert np.array_equal(m.render_bev(b, 1.0, pose, cfg), bev_ref)


# -- the world -----------------------------------------------------------------------------------------
def test_scenarios_reproducible_and_expert_beats_cv():
    a = m.sample_scenarios(60, m.WorldConfig(), seed=11)
    b = m.sample_scenarios(60, m.WorldConfig(), seed=11)
    assert np.array_equal(a.agents, b.agents) and np.array_equal(a.family, b.family)
    plan, ref = m.expert_plan(a, noise_p=0.0)
    se, sc = m.pdm_score(a, plan, ref)["pdms"].mean(), m.pdm_score(a, m.constant_velocity_plan(a), ref)["pdms"].mean()
    assert se > sc + 0.1
    cand = m.expert_candidates(a)
    assert cand.shape == (60, 12, 8, 2)


def test_no_overlap_at_t0(data):
    sc = scene_tensors(data.batch)
    ego = torch.cat([sc.ego_init[:, :3], torch.full((len(data), 2), CAR_L)], 1)
    ego[:, 4] = CAR_W
    ag = sc.agents[:, sc.i0]
    agb = torch.cat([ag[..., :3], torch.full_like(ag[..., :2], CAR_L)], -1)
    agb[..., 4] = CAR_W
    assert not (m.boxes_overlap_t(ego[:, None], agb) & (ag[..., 4] > 0.5)).any()


def test_presets_dry_run():
    for scale in ("smoke", "book", "gpu"):
        cfg = m.preset(scale)
        d = cfg.dry_run()
        assert type(d) is type(cfg) and d.tok_steps <= cfg.tok_steps and d.rft_iterations <= cfg.rft_iterations
        assert d.tok_d == cfg.tok_d and d.vla_d == cfg.vla_d and d.group_size == cfg.group_size


# -- bad inputs (spec Sec. 9) ---------------------------------------------------------------------------
def test_bad_world_config():
    for kw, word in [(dict(n_lanes=0), "n_lanes"), (dict(lane_width=0.0), "lane_width"), (dict(dt=-0.1), "dt"),
                     (dict(frame_dt=0.75, dt=0.2), "frame_dt"), (dict(t_future=1.5), "t_future")]:
        with pytest.raises(ValueError, match=word):
            m.WorldConfig(**kw)


def test_bad_trajectories(data):
    with pytest.raises(ValueError, match="traj"):
        m.pdm_score(data.batch, np.zeros((len(data), 7, 2)), data.ref)
    bad = data.plan.copy()
    bad[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        m.pdm_score(data.batch, bad, data.ref)
    with pytest.raises(ValueError, match="dt"):
        m.waypoints_to_states(data.plan, dt=-0.1)
    with pytest.raises(ValueError, match="ref_progress"):
        m.pdm_score(data.batch, data.plan, data.ref[:-1])
    with pytest.raises(ValueError, match="scenes"):
        m.pdm_score(data.batch, data.plan[:-1], data.ref)


def test_bad_fastlite():
    with pytest.raises(ValueError, match="gamma"):
        m.FastLite(gamma=0)
    with pytest.raises(ValueError, match="scale"):
        m.FastLite(scale=(60.0, -1.0))
    f = m.FastLite()
    with pytest.raises(ValueError, match="0, 255"):
        f.decode(np.full((1, 16), 256))
    with pytest.raises(ValueError, match="16"):
        f.decode(np.full((1, 15), 128))


def test_bad_tokenizer_config():
    with pytest.raises(ValueError, match="n_ego"):
        m.DynTokConfig(n_ego=0)
    with pytest.raises(ValueError, match="m_env"):
        m.DynTokConfig(m_env=1)
    with pytest.raises(ValueError, match="d_vq"):
        m.DynTokConfig(d_vq=0)
    with pytest.raises(ValueError, match="divisible"):
        m.DynamicsTokenizer(m.DynTokConfig(patch=5))
    tok = m.DynamicsTokenizer(m.DynTokConfig())
    with pytest.raises(ValueError, match="o_t"):
        tok.encode(torch.rand(2, 3, 30, 16), torch.rand(2, 3, 30, 16))


def test_bad_modes(data):
    space = m.TokenSpace()
    with pytest.raises(ValueError, match="mode"):
        space.template("poem")
    with pytest.raises(ValueError, match="tokenizer"):
        m.build_targets(data, "dynamics", None, m.FastLite(), space)


def test_bad_grpo_config():
    for kw, word in [(dict(group_size=1), "group_size"), (dict(clip_eps=0.0), "clip_eps"),
                     (dict(beta_kl=-1e-3), "beta_kl"), (dict(temperature=0.0), "temperature")]:
        with pytest.raises(ValueError, match=word):
            m.GRPOConfig(**kw)
    with pytest.raises(ValueError, match="G >= 2"):
        m.group_advantages(torch.zeros(3, 1))


# -- CUDA ------------------------------------------------------------------------------------------
@pytest.mark.cuda
def test_cuda_matches_cpu(data):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    sc = scene_tensors(data.batch, dtype=torch.float64)
    traj = torch.as_tensor(np.stack([data.plan, data.cv], 1))
    ref = torch.as_tensor(data.ref)
    cpu = m.pdm_score_t(sc, traj, ref)
    gpu = m.pdm_score_t(sc.to("cuda"), traj.cuda(), ref.cuda())
    for k in ("nc", "dac", "ttc", "ep", "c", "pdms"):
        assert torch.allclose(cpu[k], gpu[k].cpu(), atol=1e-6), k
    torch.manual_seed(0)
    tok = m.DynamicsTokenizer(m.DynTokConfig()).eval()
    o_t, o_t1 = data.pairs()[:2]
    i_cpu, z_cpu = tok.encode(o_t[:16], o_t1[:16])
    i_gpu, z_gpu = tok.cuda().encode(o_t[:16].cuda(), o_t1[:16].cuda())
    assert (i_cpu == i_gpu.cpu()).float().mean() > 0.95
    assert torch.allclose(z_cpu, z_gpu.cpu(), atol=1e-3) or (i_cpu != i_gpu.cpu()).any()


def test_sft_lr_grid_extends_past_the_earlier_edge():
    """Issue 39 / follow-up: the earlier grid (1e-3, 2e-3, 4e-3) chose its upper edge for both policies;
    the book's grid must reach past 4e-3, start at 2e-3 or 4e-3 (where the stated lower-edge reason
    applies: 1e-3 and 2e-3 scored below the values from 8e-3 up), and be the same for both policies."""
    from icml26.core.compare import Grid, tune
    from icml26.dynvla.experiments import LOWER_EDGE

    book = m.preset("book")
    grid = list(book.sft_lr_grid)
    assert grid == sorted(grid) and grid[-1] > 4e-3 and 2e-3 <= grid[0] <= 4e-3 and 8e-3 in grid[1:-1]
    assert grid[-1] >= 3.2e-2 and book.probe_edge   # 3.2e-2 reached; an upper-edge best is probed beyond
    t = tune("none", lambda c: -c["lr"], Grid(lr=grid), goal="max", progress=False)   # best at the lower edge
    assert t.edges == {"lr": "lower"}
    t.state_edge("lr", LOWER_EDGE)
    assert not t.unstated_edges
    up = tune("none", lambda c: c["lr"], Grid(lr=grid), goal="max", progress=False)
    with pytest.raises(ValueError, match="axis"):
        up.state_edge("x", LOWER_EDGE)
    assert up.unstated_edges == {"lr": "upper"}   # an upper edge is never stated away


def test_degenerate_rule_flags_a_standing_policy():
    """Issue 39 (8-9): a validation run that stands still or writes one plan for every scene is
    degenerate (tuning ranks it last); a moving policy with varied plans is not."""
    from icml26.dynvla.experiments import MIN_DISTINCT, MIN_EP, degenerate, distinct_plans

    n = 40
    varied = torch.arange(n * 3).reshape(n, 3)
    ok = dict(ep=0.6, per_scene=np.zeros(n), tokens_out=varied)
    assert distinct_plans(ok) == n and degenerate(ok) == ""
    stand = dict(ok, ep=MIN_EP / 2)
    assert "EP" in degenerate(stand)
    same = dict(ok, tokens_out=torch.zeros(n, 3, dtype=torch.long))
    assert "distinct" in degenerate(same) and distinct_plans(same) == 1 < MIN_DISTINCT
    two = dict(ok, tokens_out=varied // (3 * n // 2))   # two distinct outputs: not one plan for every scene
    assert distinct_plans(two) == 2 and degenerate(two) == ""
    one = dict(ok, per_scene=np.zeros(1), tokens_out=varied[:1])    # k = min(MIN_DISTINCT, max(1, 1 // 2)) = 1
    assert degenerate(one) == ""


def test_book_preset_pays_for_six_epochs():
    book = m.preset("book")
    assert 6 <= book.sft_epochs <= 8 and 4 <= len(book.sft_lr_grid) <= 5 and len(book.seeds) >= 5
    assert book.shuffled_seeds >= len(book.seeds) and "meta" not in book.modes   # issue 39.9: the control on every seed


# -- issue 43: host syncs per step of the training loops notebook 3 calls ---------------------------
def _per_step(run) -> float:
    from icml26.book.budget import count_step

    one, three = count_step(lambda: run(1)), count_step(lambda: run(3))
    return (three.syncs - one.syncs) / 2


def _sft_run(data, tok, mode):
    space = m.TokenSpace()
    tgt = m.build_targets(data, mode, tok, m.FastLite(), space)

    def run(epochs):                 # one optimiser step per epoch (the batch is the whole set)
        torch.manual_seed(0)
        pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2)
        return m.sft_train(pol, data, tgt, mode, space, m.SFTConfig(epochs=epochs, batch=len(data)))
    return run


def _grpo_run(data):
    from icml26.dynvla.rft import clone_frozen

    space = m.TokenSpace()
    torch.manual_seed(0)
    pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2)
    return lambda n: m.rft_train(clone_frozen(pol).requires_grad_(True), clone_frozen(pol), data, "dynamics", space,
                                 m.FastLite(), m.GRPOConfig(iterations=n, contexts_per_step=3, group_size=4))


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("mode", ["none", "dynamics"])
def test_sft_loop_no_sync_per_step(data, tok, mode):
    """Was 8 per step: the two loss terms read with float(), the thought/action boolean masks (index
    and its backward, 2 each), bool(is_cot.any()) and torch's causal-mask check in the decoder."""
    assert _per_step(_sft_run(data, tok, mode)) == 0


@pytest.mark.usefixtures("one_thread")
def test_generate_no_sync_per_token(data):
    from icml26.book.budget import count_step

    space = m.TokenSpace()
    torch.manual_seed(0)
    pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2).eval()
    ctx = (data.cam[:6, :2].flatten(1, 2), data.speed[:6])
    g = torch.Generator().manual_seed(0)
    assert count_step(lambda: m.generate(pol, ctx, "dynamics", space, greedy=False, generator=g)).syncs == 0   # was 36


@pytest.mark.usefixtures("one_thread")
def test_grpo_loop_one_sync_per_iteration(data):
    """Pins today's count (was 46: the causal-mask check per decoder call, 36 sampling + 3 scoring,
    five float() curve reads, group_advantages' finiteness check, and the one left below)."""
    assert _per_step(_grpo_run(data)) == 1


@pytest.mark.usefixtures("one_thread")
@pytest.mark.xfail(reason="pdm_score_t -> check_traj (metric.py ~188: `if not bool(ok)`, the finiteness check of "
                          "the decoded trajectories) reads the host once per GRPO iteration (issue 43, open)", strict=True)
def test_grpo_loop_no_sync_per_iteration(data):
    assert _per_step(_grpo_run(data)) == 0


def test_loop_curves_identical_to_per_step_reads(data, tok):
    """The curves read once after each loop are the float32 values a float() per step gave, and the
    public sft_loss still returns the two terms as floats."""
    cur = _sft_run(data, tok, "dynamics")(2)
    rft = _grpo_run(data)(2)
    for v in cur["cot"] + cur["act"] + [x for c in rft.values() for x in c]:
        assert isinstance(v, float) and float(torch.tensor(v, dtype=torch.float32)) == v
    assert len(cur["act"]) == 2 and all(len(c) == 2 for c in rft.values())
    space = m.TokenSpace()
    tgt = m.build_targets(data, "dynamics", tok, m.FastLite(), space)
    torch.manual_seed(0)
    pol = m.DrivingVLA(space.vocab, d=32, layers=1, heads=2)
    loss, lc, la = sft_loss(pol, data.cam[:4, :2].flatten(1, 2), data.speed[:4], tgt[:4],
                                  space.template("dynamics")[1])
    assert isinstance(lc, float) and isinstance(la, float) and abs(float(loss) - (lc + la)) < 1e-5
