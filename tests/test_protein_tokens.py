"""Tests of icml26.protein_tokens: the unit identities of spec Sec. 8, the bad inputs of Sec. 9, the
shipped checkpoints and the command that makes them, and a CUDA-vs-CPU check."""

from __future__ import annotations

import json
import math
import os

import icml26.protein_tokens as pt
import numpy as np
import pytest
import torch
from icml26.protein_tokens import experiments as ex
from icml26.protein_tokens.checkpoints import DATA_DIR, NAMES, SHORT_STEPS, train_one

pytestmark = pytest.mark.usefixtures("one_thread")


def small_model(**kw) -> pt.DiffusionTokenizer:
    torch.manual_seed(0)
    cfg = dict(d_enc=16, n_enc=1, d_dec=16, n_dec=1, n_heads=2, n_tokens=8, max_len=64)
    cfg.update(kw)
    return pt.DiffusionTokenizer(pt.TokenizerConfig(**cfg)).eval()


def helix(n=20, phi=-57.0, psi=-47.0):
    return pt.build_backbone(torch.full((1, n), math.radians(phi), dtype=torch.float64),
                             torch.full((1, n), math.radians(psi), dtype=torch.float64))[0, :, 1]


# ------------------------------------------------------------------------------------- NeRF
def test_nerf_ca_distances_and_helix_geometry():
    d = pt.make_backbones(40, (36, 48), seed=3)
    ca, m = d["CA"], d["mask"]
    bond = (ca[:, 1:] - ca[:, :-1]).norm(dim=-1)[m[:, 1:]]
    assert (bond - 3.804).abs().max() < 1e-3
    h = helix()
    dist = (h[:, None] - h[None]).norm(dim=-1)
    for k, want in ((2, 5.47), (3, 5.23), (4, 6.40)):
        assert abs(float(dist.diagonal(k).mean()) - want) < 0.01
    s = helix(phi=-120.0, psi=130.0)
    assert abs(float((s[2:] - s[:-2]).norm(dim=-1).mean()) - 6.75) < 0.01
    from icml26.protein_tokens.theory import ideal_helix_geometry
    g = ideal_helix_geometry()
    assert abs(g["rise"] - 1.56) < 0.01 and abs(g["radius"] - 2.28) < 0.02 and abs(g["per_turn"] - 3.63) < 0.02


def test_nerf_place_matches_definition():
    a, b, c = torch.tensor([[0.0, 1, 0]]), torch.tensor([[0.0, 0, 0]]), torch.tensor([[1.0, 0, 0]])
    d = pt.nerf_place(a, b, c, 1.5, math.radians(110.0), torch.tensor([math.radians(60.0)]))
    assert abs(float((d - c).norm()) - 1.5) < 1e-6
    ang = torch.arccos(((b - c) @ (d - c).T).squeeze() / (1.0 * 1.5))
    assert abs(math.degrees(float(ang)) - 110.0) < 1e-4


def test_make_backbones_labels_lengths_and_determinism():
    d1 = pt.make_backbones(60, (36, 48), seed=1)
    d2 = pt.make_backbones(60, (36, 48), seed=1)
    assert torch.equal(d1["CA"], d2["CA"])
    assert torch.bincount(d1["label"]).tolist() == [10] * 6
    assert (d1["mask"].sum(1) == d1["length"]).all() and d1["length"].min() >= 36 and d1["length"].max() <= 48
    assert ((d1["ss"] == 1).sum(1) > 0).sum() == 50            # every class but EEEE has a helix
    assert pt.program_min_length("EEHH") == 36 and pt.program_min_length("EEEE") == 26


# ------------------------------------------------------------------------------------- FSQ
def test_fsq_identities():
    q = pt.FSQ((8, 5, 5, 5), 8)
    assert q.codebook_size == 1000 and q._basis.tolist() == [1, 8, 40, 200]
    assert int(q.codes_to_indices(torch.zeros(4))) == 500
    idx = torch.arange(1000)
    assert torch.equal(q.codes_to_indices(q.indices_to_codes(idx)), idx)
    codes = q.indices_to_codes(idx)
    assert codes.min() >= -1 and codes.max() <= 1
    sat = q.quantize(torch.tensor([[1e3] * 4, [-1e3] * 4]))
    assert sat[0].tolist() == [0.75, 1, 1, 1] and sat[1].tolist() == [-1, -1, -1, -1]
    z = torch.randn(5, 4, requires_grad=True)
    q.quantize(z).sum().backward()
    assert (z.grad.abs() > 0).all()                                    # straight-through gradient


def test_code_usage_monitor():
    idx = torch.zeros(100, 4, dtype=torch.long)
    assert pt.code_usage(idx, 1000)["perplexity"] == pytest.approx(1.0)
    idx = torch.arange(400).view(100, 4)
    assert pt.code_usage(idx, 1000)["perplexity"] == pytest.approx(400.0)


# ------------------------------------------------------------------------------------- flow matching
def test_velocity_to_score_is_the_gaussian_score():
    mu, sig = 0.7, 0.4
    t = torch.linspace(0.05, 0.95, 19, dtype=torch.float64)[:, None]
    x = torch.linspace(-3, 3, 41, dtype=torch.float64)[None]
    s2 = t**2 * sig**2 + (1 - t) ** 2
    e1 = mu + t * sig**2 * (x - t * mu) / s2
    e0 = (1 - t) * (x - t * mu) / s2
    v = e1 - e0
    assert torch.allclose(pt.velocity_to_score(x, v, t), -(x - t * mu) / s2, atol=1e-10, rtol=0)


def test_nested_keep_mask_frequencies():
    g = torch.Generator().manual_seed(0)
    m = pt.nested_keep_mask(torch.full((100_000,), 128), 128, 1, 0.05, generator=g)
    f = m.mean(0)
    assert abs(float(f[0]) - 0.95) < 0.01 and abs(float(f[63]) - 0.479) < 0.01 and float(f[127]) == 0.0
    assert (m[:, 1:] <= m[:, :-1]).all()                               # nested: a kept token's prefix is kept


# ------------------------------------------------------------------------------------- geometry
def test_kabsch_rmsd_rigid_mirror_and_batched():
    x = pt.make_backbones(8, 40, seed=2)["CA"].double()
    r = pt.random_rotation(8, torch.Generator().manual_seed(1), dtype=torch.float64)
    moved = x @ r + torch.randn(8, 1, 3, dtype=torch.float64)
    assert float(pt.kabsch_rmsd(moved, x).max()) < 1e-5
    mirror = x * torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)
    assert float(pt.kabsch_rmsd(mirror, x).min()) > 0.5
    y = x + 0.5 * torch.randn_like(x)
    batched = pt.kabsch_rmsd(y, x)
    looped = torch.stack([pt.kabsch_rmsd(y[i], x[i])[0] for i in range(8)])
    assert torch.allclose(batched, looped, atol=1e-10)


def test_tm_score_identities_and_tmtools():
    x = pt.make_backbones(4, 40, seed=5)["CA"]
    assert torch.allclose(pt.tm_score(x, x), torch.ones(4), atol=1e-5)
    d0 = pt.d0(100)
    assert abs(d0 - 3.652) < 1e-3
    assert abs(float(pt.tm_from_distances(torch.full((100,), d0, dtype=torch.float64), 100)) - 0.5) < 1e-12
    h = helix(50).numpy()
    r = pt.tm_align(h[5:45], h)
    assert abs(r["tm_q"] - 0.8) < 0.01 and abs(r["tm_p"] - 1.0) < 0.01


def test_own_tm_score_agrees_with_tmtools():
    """The book's batched TM-score (residue i matched to residue i) against TM-align on perturbed
    copies: TM-align may re-align, so it can only score higher; on these pairs the two agree closely."""
    d = pt.make_backbones(24, 40, seed=9)
    x = d["CA"]
    g = torch.Generator().manual_seed(0)
    noise = torch.linspace(0.3, 3.0, 24)[:, None, None] * torch.randn(x.shape, generator=g)
    y = x + noise
    own = pt.tm_score(y, x).numpy()
    ref = np.array([pt.tm_align(y[i], x[i])["tm_q"] for i in range(24)])
    assert np.all(own <= ref + 0.02)
    same_fold = ref > 0.5
    assert same_fold.sum() >= 8 and np.abs(own - ref)[same_fold].max() < 0.01
    assert np.corrcoef(own, ref)[0, 1] > 0.97


def test_canonicalize_is_rotation_invariant():
    x = pt.make_backbones(6, 40, seed=4)["CA"].double()
    r = pt.random_rotation(6, torch.Generator().manual_seed(2), dtype=torch.float64)
    a, b = pt.canonicalize(x @ r + 3.0), pt.canonicalize(x)
    assert (a - b).abs().max() < 1e-4
    assert torch.allclose(torch.linalg.det(torch.linalg.lstsq(x - x.mean(1, keepdim=True), b).solution),
                          torch.ones(6, dtype=torch.float64), atol=1e-6)


# ------------------------------------------------------------------------------------- the model
def test_decode_deterministic_lengths_and_training_step():
    m = small_model()
    x = pt.center_and_scale(pt.make_backbones(3, 40, seed=0)["CA"])
    _, idx = m.encode(x)
    assert idx.shape == (3, 8)
    a = m.decode(idx, 40, steps=3, generator=torch.Generator().manual_seed(1))
    b = m.decode(idx, 40, steps=3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert m.decode(idx, 32, n_keep=2, steps=2).shape == (3, 32, 3)
    kanzi = small_model(window=4, nested=False)
    assert kanzi.encode(x)[1].shape == (3, 40)
    out = m.loss(x)
    out["total"].backward()
    assert all(torch.isfinite(v) for v in out.values())
    assert m.embed(pt.make_backbones(3, 40, seed=0)["CA"], 4).shape == (3, 16)


def test_train_tokenizer_unchanged_by_sync_free_loop():
    """The loop without per-step syncs (issue 43) trains and logs exactly as the per-step-read loop did:
    the same batches (length and seed drawn from the host generator), the loss checked on the first batch
    only, the losses read per log interval and summed step by step."""
    import math as _math

    cfg = pt.TokenizerConfig(d_enc=16, n_enc=1, d_dec=16, n_dec=1, n_heads=2, n_tokens=8, max_len=64)
    steps, warmup, log_every = 5, 2, 2
    model, log = pt.train_tokenizer(cfg, (36, 40), steps, batch=3, warmup=warmup, seed=4, log_every=log_every,
                                    progress=False)
    torch.manual_seed(4)                                   # the loop of before, with per-step reads
    ref = pt.DiffusionTokenizer(cfg)
    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: (i + 1) / warmup if i < warmup else
                                              0.1 + 0.45 * (1 + _math.cos(_math.pi * (i - warmup) / (steps - warmup))))
    g = torch.Generator().manual_seed(5)
    flows, acc, n = [], 0.0, 0
    ref.train()
    for i in range(steps):
        length = int(torch.randint(36, 41, (1,), generator=g))
        data = pt.make_backbones(3, length, seed=int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
        x = pt.center_and_scale(data["CA"] @ pt.random_rotation(3, g))
        out = ref.loss(x, generator=g)
        opt.zero_grad(set_to_none=True)
        out["total"].backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        opt.step()
        sched.step()
        acc, n = acc + float(out["flow"].detach()), n + 1
        if (i + 1) % log_every == 0 or i == steps - 1:
            flows.append(acc / n)
            acc, n = 0.0, 0
    assert log["step"] == [2, 4, 5] and log["flow"] == flows
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values()))
    bad = x.clone()
    bad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        ref.loss(bad)
    assert torch.isnan(ref.loss(bad, check=False)["flow"])   # check=False trusts the values (the loop's later batches)


def test_local_encoder_is_local():
    """Kanzi-mini's token i depends only on residues within n_enc * window of i."""
    m = small_model(window=2, nested=False, n_enc=2)
    x = pt.center_and_scale(pt.make_backbones(1, 40, seed=0)["CA"])
    y = x.clone()
    y[0, 30:] += 0.5
    with torch.no_grad():
        a, b = m.encoder_features(x), m.encoder_features(y)
        # two layers of window 2: features before residue 30 - 4 cannot change, later ones do
        assert torch.equal(a[0, :26], b[0, :26]) and not torch.equal(a[0, 26:], b[0, 26:])
        g = small_model(n_enc=2)
        assert not torch.equal(g.encoder_features(x)[0, :8], g.encoder_features(y)[0, :8])   # global


def test_nested_dropout_decoder_conditioning_is_zero_padded():
    m = small_model()
    idx = torch.randint(0, 1000, (2, 8))
    c = m.pad_cond(m.cond_from_indices(idx), 40, n_keep=3)
    assert c.shape == (2, 40, 16) and (c[:, 3:] == 0).all() and (c[:, :3] != 0).any()


def test_linear_nested_dropout_orders_principal_directions():
    from icml26.protein_tokens.theory import nested_dropout_study
    df = nested_dropout_study((9.0, 4.0, 1.0, 0.25), 3, 1024, 2000, 2)
    nd = df[df.nested].groupby("k")[["angle_deg", "mse", "optimum"]].mean()
    assert (nd.angle_deg < 10).all()
    assert np.allclose(nd.mse, nd.optimum, rtol=0.15)


def test_experiment_runners_smoke():
    m = small_model()
    data = ex.test_set(6, (36, 38), seed=0)
    df = ex.reconstruct(m, data, (0, 2), steps=2, progress=False)
    assert len(df) == 12 and np.isfinite(df.rmsd).all()
    sw, prof = ex.swap_sensitivity(m, data, (0, 1), steps=2, progress=False)
    assert np.isfinite(sw.rmsd).all()
    sh = ex.shrink_study(m, data, (1.0, 0.8), steps=2, progress=False)
    assert ((sh.tm_parent > 0) & (sh.tm_parent <= 1)).all() and (sh.tm_parent_k0 > 0).all()
    # one control chain per protein, whatever the list of rhos
    again = ex.shrink_study(m, data, (0.8,), steps=2, progress=False)
    assert np.allclose(again.tm_control.to_numpy(), sh[sh.rho == 0.8].tm_control.to_numpy())


def test_token_gain_is_difference_of_differences_and_removes_the_prior():
    import pandas as pd
    rng = np.random.default_rng(0)
    n = 40
    prot = np.arange(n)

    def table(r0, r8):
        return pd.DataFrame({"protein": np.r_[prot, prot], "k": np.r_[np.zeros(n, int), np.full(n, 8)],
                             "rmsd": np.r_[r0, r8]})
    a0 = 9 + rng.normal(0, 0.3, n)
    b0 = a0 + 1.0                       # the second model's prior is 1 A worse
    a8, b8 = a0 - 2.0, b0 - 2.0         # identical token gains
    g = ex.token_gain(table(a0, a8), table(b0, b8), k=8, n_boot=200)
    assert g["raw"] == pytest.approx(1.0) and g["prior"] == pytest.approx(1.0)
    assert g["did"] == pytest.approx(0.0, abs=1e-12) and g["gain_a"] == pytest.approx(2.0)
    assert g["n"] == n and g["raw_lo"] <= g["raw"] <= g["raw_hi"]
    g2 = ex.token_gain(table(a0, a8 - 0.5), table(b0, b8), k=8, n_boot=200)
    assert g2["did"] == pytest.approx(0.5) and g2["did"] == pytest.approx(g2["raw"] - g2["prior"])
    with pytest.raises(ValueError, match="k=4"):
        ex.token_gain(table(a0, a8), table(b0, b8), k=4)
    with pytest.raises(ValueError, match="k and k0"):
        ex.token_gain(table(a0, a8), table(b0, b8), k=0)
    with pytest.raises(TypeError, match="rec_a"):
        ex.token_gain({"k": [0]}, table(b0, b8))


def test_probe_accuracy_separable():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 20)
    x = rng.normal(size=(60, 4)) + 3 * np.eye(3, 4)[y]
    acc, sd = pt.probe_accuracy(x, y, "linear", 3)
    assert acc > 0.9


# ------------------------------------------------------------------------------------- checkpoints
def test_checkpoints_digest_size_and_provenance():
    prov = json.loads((DATA_DIR / "provenance.json").read_text())
    total = 0
    for name in NAMES:
        m = pt.load_pretrained(name)
        assert pt.state_digest(m) == prov["models"][name]["content_sha256"]
        np.testing.assert_allclose(pt.fingerprint(m), prov["models"][name]["fingerprint"], rtol=1e-6, atol=1e-9)
        total += (DATA_DIR / f"{name}.pt").stat().st_size
        assert prov["models"][name]["steps"] == pt.RECIPE["steps"] and prov["models"][name]["seed"] == 0
    assert total < 5e6
    assert prov["command"] == "python -m icml26.protein_tokens.pretrain"


def test_pretraining_command_reproduces_short_run():
    """The first steps of ``python -m icml26.protein_tokens.pretrain`` (same code path, schedule over
    SHORT_STEPS steps) reproduce the stored fingerprints; the full rerun is opt-in (ICML26_FULL_RETRAIN=1)."""
    prov = json.loads((DATA_DIR / "provenance.json").read_text())
    for name in NAMES:
        m, log = train_one(name, SHORT_STEPS)
        want = prov["short_run"]["models"][name]
        np.testing.assert_allclose(pt.fingerprint(m), want["fingerprint"], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(log["flow"], want["flow"], rtol=1e-4)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("ICML26_FULL_RETRAIN") != "1", reason="full retraining: ICML26_FULL_RETRAIN=1")
def test_pretraining_command_reproduces_checkpoints():
    prov = json.loads((DATA_DIR / "provenance.json").read_text())
    for name in NAMES:
        m, _ = train_one(name)
        np.testing.assert_allclose(pt.fingerprint(m), prov["models"][name]["fingerprint"], rtol=1e-3, atol=1e-5)


def test_load_pretrained_rejects_mismatch(tmp_path):
    from icml26.protein_tokens.checkpoints import save
    m = small_model()
    bad = tmp_path / "apt_mini.pt"
    save(m, "apt_mini", {}, bad)
    with pytest.raises(ValueError, match="recipe|configuration"):
        pt.load_pretrained("apt_mini", bad)
    with pytest.raises(ValueError, match="no checkpoint"):
        pt.load_pretrained("apt_mini", tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="name"):
        pt.load_pretrained("bogus")


# ------------------------------------------------------------------------------------- bad inputs
def test_bad_inputs():
    x = pt.make_backbones(2, 40, seed=0)["CA"]
    with pytest.raises(ValueError, match="x"):
        pt.center_and_scale(torch.zeros(2, 40, 2))
    with pytest.raises(ValueError, match="finite"):
        pt.center_and_scale(torch.full((2, 40, 3), float("nan")))
    with pytest.raises(ValueError, match="at least 3"):
        pt.kabsch_rmsd(x[:, :2], x[:, :2])
    with pytest.raises(ValueError, match="max_len"):
        small_model(max_len=32).encode(pt.center_and_scale(x))
    with pytest.raises(ValueError, match="mask"):
        pt.center_and_scale(x, torch.ones(2, 39, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        pt.center_and_scale(x, torch.zeros(2, 40, dtype=torch.bool))
    with pytest.raises(ValueError, match="levels"):
        pt.FSQ((), 4)
    with pytest.raises(ValueError, match="levels"):
        pt.FSQ((8, 1), 4)
    with pytest.raises(ValueError, match="2\\^31"):
        pt.FSQ((1024,) * 4, 4)
    with pytest.raises(ValueError, match="idx"):
        pt.FSQ((8, 5, 5, 5), 4).indices_to_codes(torch.tensor([1000]))
    for kw, match in ((dict(n_tokens=0), "n_tokens"), (dict(n_size=8, n_tokens=8), "n_size"),
                      (dict(p_uncond=1.0), "p_uncond"), (dict(window=0), "window")):
        with pytest.raises(ValueError, match=match):
            pt.TokenizerConfig(**kw)
    m = small_model()
    idx = torch.zeros(2, 8, dtype=torch.long)
    for kw, match in ((dict(length=0), "length"), (dict(length=40, n_keep=9), "n_keep"),
                      (dict(length=40, n_keep=-1), "n_keep"), (dict(length=40, steps=0), "steps"),
                      (dict(length=40, eta=-0.1), "eta"), (dict(length=40, guidance="cosine"), "guidance"),
                      (dict(length=40, guidance=-1.0), "guidance")):
        with pytest.raises(ValueError, match=match):
            m.decode(idx, **kw)
    for kw, match in ((dict(classes=["XYZ"]), "classes"), (dict(n=0), "n"), (dict(noise_deg=-1.0), "noise_deg"),
                      (dict(length=20), "length")):
        args = dict(n=4, length=40)
        args.update(kw)
        with pytest.raises(ValueError, match=match):
            pt.make_backbones(**args)
    with pytest.raises(ValueError, match="folds"):
        pt.probe_accuracy(np.zeros((4, 2)), np.array([0, 1, 0, 1]), "linear", 5)
    with pytest.raises(ValueError, match="two classes"):
        pt.probe_accuracy(np.zeros((10, 2)), np.zeros(10, dtype=int), "linear", 5)
    with pytest.raises(ValueError, match="n_size"):
        pt.nested_keep_mask(torch.tensor([40]), 4, n_size=4)


# ------------------------------------------------------------------------------------- CUDA
@pytest.mark.cuda
def test_decode_cuda_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    m = small_model()
    x = pt.center_and_scale(pt.make_backbones(4, 40, seed=0)["CA"])
    _, idx = m.encode(x)
    torch.manual_seed(0)
    x0 = torch.randn(4, 40, 3)
    with torch.no_grad():
        t = torch.full((4,), 0.3)
        cond = m.pad_cond(m.cond_from_indices(idx), 40)
        v_cpu = m.velocity(x0, t, cond)
        mc = m.to("cuda")
        v_gpu = mc.velocity(x0.cuda(), t.cuda(), cond.cuda()).cpu()
        _, idx_gpu = mc.encode(x.cuda())
    assert torch.allclose(v_cpu, v_gpu, atol=1e-4)
    assert torch.equal(idx_gpu.cpu(), idx)


def test_native_pairs_calibrates_same_against_other_program():
    data = ex.test_set(36, (36, 48), seed=4)
    nat = ex.native_pairs(data, seed=0, progress=False)
    assert len(nat) == 36 and set(nat.columns) == {"protein", "tm_same", "tm_other"}
    assert nat.tm_same.between(0, 1).all() and nat.tm_other.between(0, 1).all()
    # chains of one fold program align better than chains of different programs
    assert nat.tm_same.mean() > nat.tm_other.mean()
    with pytest.raises(ValueError, match="label"):
        ex.native_pairs({**data, "label": data["label"][:2]})


def test_shrink_calibration_ratio_gap_and_errors():
    import pandas as pd
    rows = [{"protein": i, "rho": r, "tm_parent": p, "tm_control": c, "tm_same": 0.28, "tm_parent_k0": 0.2,
             "tm_control_k0": 0.2} for i in range(20) for r, p, c in ((1.0, 0.4, 0.3), (0.8, 0.3, 0.25))]
    cal = ex.shrink_calibration(pd.DataFrame(rows), rho=0.8)
    assert math.isclose(cal["ratio"], 0.75) and math.isclose(cal["gap"], 0.05) and math.isclose(cal["gap_full"], 0.1)
    assert math.isclose(cal["retention"], 0.5) and math.isclose(cal["gap_same"], 0.02) and cal["gap_k0"] == 0
    assert math.isclose(cal["ratio_lo"], 0.75) and math.isclose(cal["gap_lo"], 0.05)   # no spread, no interval
    with pytest.raises(ValueError, match="rho=0.5"):
        ex.shrink_calibration(pd.DataFrame(rows), rho=0.5)
    with pytest.raises(ValueError, match="df must"):
        ex.shrink_calibration(pd.DataFrame({"rho": [1.0]}))
