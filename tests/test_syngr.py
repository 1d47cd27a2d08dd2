"""Unit identities (spec Sec. 8, claims 1-9) and bad inputs (Sec. 9) of icml26.syngr."""

from __future__ import annotations

import math

import icml26.syngr as m
import numpy as np
import pytest
import torch
from icml26.syngr import experiments as ex
from icml26.syngr.sequences import IMAGE, PROMPT, TEXT


@pytest.fixture(scope="module")
def world():
    return ex.build_world(m.preset("smoke"))


@pytest.fixture(scope="module")
def model(world):
    return ex.make_model(m.preset("smoke"), world.layout, "fused", 0).eval()


def _small_batch(world, n=16):
    return {k: v[:n] for k, v in world.batches["train"].items()}


# -- claim 1: PID ----------------------------------------------------------------------------------

def test_pid_gates():
    xor = m.pid_williams_beer(m.gate_table("xor"))
    assert xor["S"] == pytest.approx(1.0, abs=1e-12) and xor["R"] == 0 and xor["U1"] == 0 and xor["U2"] == 0
    a = m.pid_williams_beer(m.gate_table("and"))
    assert a["R"] == pytest.approx(0.3113, abs=1e-4) and a["S"] == pytest.approx(0.5, abs=1e-4)
    assert a["U1"] == pytest.approx(0.0, abs=1e-12) and a["I12"] == pytest.approx(0.8113, abs=1e-4)
    u = m.pid_williams_beer(m.gate_table("unique"))
    assert u["U1"] == pytest.approx(1.0) and u["R"] == u["U2"] == u["S"] == 0


@pytest.mark.parametrize("C", [2, 5, 8])
def test_pid_syncat_is_pure_synergy(C):
    d = m.pid_williams_beer(m.syncat_style_table(C))
    assert d["S"] == pytest.approx(math.log2(C), abs=1e-9)
    assert d["R"] == d["U1"] == d["U2"] == 0 and d["I1"] == d["I2"] == 0


def test_pid_matches_dit():
    pytest.importorskip("dit")
    import dit
    import dit.pid

    rng = np.random.default_rng(0)
    tables = [m.gate_table("xor"), m.gate_table("and"), m.gate_table("copy"), rng.dirichlet(np.ones(12)).reshape(2, 2, 3)]
    for p in tables:
        idx = np.argwhere(p > 0)
        d = dit.Distribution([tuple(int(v) for v in i) for i in idx], [float(p[tuple(i)]) for i in idx])
        ref = dit.pid.PID_WB(d, [[0], [1]], [2])
        ours = m.pid_williams_beer(p)
        assert ours["R"] == pytest.approx(ref.get_pi(((0,), (1,))), abs=1e-9)
        assert ours["U1"] == pytest.approx(ref.get_pi(((0,),)), abs=1e-9)
        assert ours["U2"] == pytest.approx(ref.get_pi(((1,),)), abs=1e-9)
        assert ours["S"] == pytest.approx(ref.get_pi(((0, 1),)), abs=1e-9)


def test_mutual_information_and_empirical_table():
    p = np.array([[0.5, 0.0], [0.0, 0.5]])
    assert m.mutual_information(p) == pytest.approx(1.0)
    assert m.mutual_information(p, base=math.e) == pytest.approx(math.log(2))
    t = m.empirical_table(np.array([0, 1, 0, 1]), np.array([0, 0, 1, 1]), np.array([0, 1, 1, 0]))
    assert np.allclose(t, m.gate_table("xor"))


def test_catalogue_style_has_no_single_modality_information(world):
    a = world.cat.attrs
    C = world.cat.cfg.n_styles
    exact = m.syncat_style_table(C)
    assert m.pid_williams_beer(exact)["I1"] == 0
    assert np.array_equal(world.cat.style, (a["tone"] + a["motif"]) % C)
    tup = np.stack([a[k] for k in ("category", "series", "tone", "motif", "background")], 1)
    assert len(np.unique(tup, axis=0)) == world.cat.n_items


# -- claim 2: contrastive loss ----------------------------------------------------------------------

def test_contrastive_loss_closed_form():
    g = torch.Generator().manual_seed(0)
    z = [torch.randn(32, 8, generator=g) for _ in range(3)]
    for tau in (0.07, 0.5, 2.0):
        got = m.synergy_contrastive_loss(*z, tau=tau)
        pos = torch.cosine_similarity(z[1], z[0], -1)
        neg = torch.cosine_similarity(z[1], z[2], -1)
        assert float(got) == pytest.approx(float(torch.nn.functional.softplus((neg - pos) / tau).mean()), abs=1e-6)
    same = m.synergy_contrastive_loss(z[0], z[1], z[1].clone() * 3.0 + 0 * z[0], tau=0.07)
    # cos(z_mask, z_uni) = cos(z_mask, z_ori) when z_ori and z_uni are parallel -> ln 2
    par = m.synergy_contrastive_loss(z[0], z[1], 2.0 * z[0], tau=0.07)
    assert float(par) == pytest.approx(math.log(2), abs=1e-6)
    assert float(same) >= 0


# -- claim 3: masking -------------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["saliency", "random", "non_dominant"])
@pytest.mark.parametrize("r", [0.0, 0.3, 0.5, 0.99])
def test_mask_counts_and_positions(world, model, strategy, r):
    b = _small_batch(world, 64)
    pm = world.layout.pos_modality()
    sal, v = m.method.saliency_pass(model, b["input_ids"], b["valid"])
    dom = m.dominant_modality(sal, pm, v)
    ids, valid = m.mask_dominant_topr(b["input_ids"], sal, pm, v, dom, r, 0, strategy, torch.Generator().manual_seed(1))
    dropped = v & ~valid
    code = torch.where(dom == 0, TEXT, IMAGE)
    if strategy == "non_dominant":
        code = torch.where(dom == 0, IMAGE, TEXT)
    cand = v & (pm[None] == code[:, None])
    assert torch.equal(dropped.sum(1), torch.floor(r * cand.sum(1).double()).long())
    assert not (dropped & ~cand).any()                       # only the chosen modality
    assert not (dropped & (pm[None] == PROMPT)).any()        # never the prompt
    assert (ids[dropped] == 0).all() and torch.equal(ids[~dropped], b["input_ids"][~dropped])
    if r == 0.0:
        assert torch.equal(ids, b["input_ids"]) and torch.equal(valid, v)
    if strategy == "saliency" and r > 0:                      # the kept candidates are never more salient
        for i in range(len(ids)):
            if dropped[i].any() and (cand[i] & ~dropped[i]).any():
                assert sal[i][dropped[i]].min() >= sal[i][cand[i] & ~dropped[i]].max()


def test_unimodal_view(world):
    b = _small_batch(world)
    pm = world.layout.pos_modality()
    keep = torch.tensor([0, 1] * 8)
    ids, valid = m.unimodal_view(b["input_ids"], pm, b["valid"], keep)
    for i in range(16):
        gone = pm == (IMAGE if keep[i] == 0 else TEXT)
        assert not valid[i][gone].any() and (ids[i][gone] == 0).all()
        assert torch.equal(ids[i][~gone], b["input_ids"][i][~gone])


# -- claim 4: SynGR reduces to the NLL --------------------------------------------------------------

def test_syngr_loss_reduces_to_nll(world, model):
    b = _small_batch(world, 32)
    cfg = m.SynGRConfig(alpha=0.0, mask_ratio=0.0, use_uni_nll=False, use_mask_nll=False)
    loss, _ = m.syngr_loss(model, b, cfg)
    ref, _ = m.nll_loss(model, b)
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), abs=1e-6)
    full, logs = m.syngr_loss(model, b, m.SynGRConfig())
    assert math.isfinite(float(full.detach())) and 0 <= logs["text_dominant"] <= 1


# -- claim 5: tokenizer -----------------------------------------------------------------------------

def test_rq_kmeans_properties(world):
    X = world.cat.text_feat
    cb = m.fit_rq_kmeans(X, levels=3, K=8, seed=0, n_init=2, iters=10)
    codes = m.rq_encode(cb, X)
    norms = m.residual_norms(cb, X)
    assert np.all(np.diff(norms) <= 1e-6)                    # residual norms non-increasing
    z = (X - cb.mean) / cb.scale
    rec = m.rq_decode(cb, codes)
    r = z.copy()                                             # greedy nearest-residual approximation
    for d, C in enumerate(cb.centers):
        r = r - C[codes[:, d]]
        assert np.array_equal(codes[:, d], ((r + C[codes[:, d]])[:, None, :] - C[None]).__pow__(2).sum(-1).argmin(1))
    assert np.allclose(z - rec, r, atol=1e-4)
    assert np.allclose(m.rq_decode(cb, codes, standardised=False), rec * cb.scale + cb.mean)


def test_suffix_and_collision_rate():
    t = np.array([[0, 1], [0, 1], [0, 1], [2, 3]])
    v = np.array([[1, 1], [1, 1], [2, 2], [0, 0]])
    ids = m.assign_semantic_ids(t, v)
    assert len(np.unique(ids.joint, axis=0)) == 4 and list(ids.suffix) == [0, 1, 0, 0]
    st = m.codebook_stats(np.concatenate([t, v], 1), 4)
    assert st["collision_rate"] == pytest.approx(1 - 3 / 4)
    assert m.attribute_recoverability(t, np.array([0, 0, 1, 1])) == pytest.approx(0.75)


def test_world_ids_unique(world):
    assert len(np.unique(world.ids.joint, axis=0)) == world.cat.n_items


# -- claim 6: constrained beam search ---------------------------------------------------------------

def test_beam_search_matches_brute_force():
    out = ex.beam_check(m.preset("smoke"))
    assert out["all_valid"] and out["same_order"] and out["max_abs_diff"] < 1e-5
    # HuggingFace convention: full-vocabulary log-softmax, so the valid identifiers hold at most all the mass
    assert (out["brute_scores"].exp().sum(1) <= 1 + 1e-6).all()


def test_renormalised_decoding_is_a_distribution_and_differs_only_in_the_convention():
    """renormalise=True: the valid identifiers' probabilities sum to one; the beam search still
    equals brute force under that convention; a token the trie forces costs nothing."""
    from icml26.syngr.sequences import _masked_logp, brute_force_scores, constrained_beam_search
    out = ex.beam_check(m.preset("smoke"))
    model = ex.make_model(m.preset("smoke"), out["layout"], seed=0).eval()
    ren = brute_force_scores(model, out["batch"], out["trie"], renormalise=True)
    assert torch.allclose(ren.exp().sum(1), torch.ones(len(ren)), atol=1e-5)
    items, scores = constrained_beam_search(model, out["batch"], out["trie"], len(out["trie"].tokens), renormalise=True)
    order = ren.argsort(1, descending=True)
    assert (items == order).all() and torch.allclose(scores, ren.gather(1, order), atol=1e-5)
    logits = torch.randn(3, 7)
    forced = torch.zeros(3, 7, dtype=torch.bool)
    forced[:, 2] = True
    assert torch.allclose(_masked_logp(logits, forced, renormalise=True)[:, 2], torch.zeros(3))
    assert torch.allclose(_masked_logp(logits, forced)[:, 2], torch.log_softmax(logits, -1)[:, 2])


def test_cached_decoding_matches_full_decoder(world, model):
    b = {k: v[:6] for k, v in world.batches["test"].items()}
    with torch.no_grad():
        mem, mv, _ = model.encode(b["input_ids"], b["valid"])
        dec_in = torch.cat([torch.full_like(b["labels"][:, :1], model.bos_id), b["labels"][:, :-1]], 1)
        full = model.decode(dec_in, mem, mv)
        cache = model.memory_cache(mem, mv)
        steps = [model.decode_step(dec_in[:, t:t + 1], cache)[:, 0] for t in range(dec_in.shape[1])]
    assert torch.allclose(torch.stack(steps, 1), full, atol=1e-5)


@pytest.mark.parametrize("mode", ["text", "image"])
def test_unimodal_encoder_drops_hidden_positions_exactly(world, mode):
    """A unimodal model's encoder runs on the kept positions only: the memory there, the NLL and every gradient
    equal those of the masked full-length encoder (the reference: ``prune_hidden = False``), and beam search
    ranks the same items."""
    cfg = m.preset("smoke")
    b = {k: v[:32] for k, v in world.batches["train"].items()}
    model = ex.make_model(cfg, world.layout, mode, seed=3).eval()   # no dropout: the two paths draw masks of two shapes
    kept = getattr(model, f"kept_{mode}")
    assert (model.pos_mod[kept] != (IMAGE if mode == "text" else TEXT)).all()

    def run(prune):
        model.prune_hidden = prune
        model.zero_grad()
        mem, mv, _ = model.encode(b["input_ids"], b["valid"])
        out = model(b["input_ids"], b["valid"], b["labels"])
        out["nll"].mean().backward()
        return mem, mv, out["nll"].detach(), [p.grad.clone() for p in model.parameters()]

    mem_full, mv_full, nll_full, g_full = run(False)
    mem, mv, nll, g = run(True)
    assert mem.shape[1] == len(kept) < mem_full.shape[1]
    assert torch.equal(mv, mv_full[:, kept])
    assert torch.allclose(mem, mem_full[:, kept], atol=1e-6)
    assert torch.allclose(nll, nll_full, atol=1e-6)
    for a, c in zip(g, g_full):
        assert torch.allclose(a, c, atol=1e-6, rtol=1e-5)
    tb = {k: v[:16] for k, v in world.batches["test"].items()}
    model.prune_hidden = False
    ref = m.constrained_beam_search(model, tb, world.trie, beam=10)
    model.prune_hidden = True
    got = m.constrained_beam_search(model, tb, world.trie, beam=10)
    assert torch.equal(got[0], ref[0]) and torch.allclose(got[1], ref[1], atol=1e-5)
    with torch.no_grad():     # saliency callers ask for attention: every position kept
        assert model.encode(b["input_ids"], b["valid"], need_attn=True)[0].shape[1] == b["input_ids"].shape[1]


def test_beam_search_only_valid(world, model):
    b = {k: v[:8] for k, v in world.batches["test"].items()}
    items, scores = m.constrained_beam_search(model, b, world.trie, beam=10)
    assert ((items >= 0) & (items < world.cat.n_items)).all()
    assert (scores[:, :-1] >= scores[:, 1:] - 1e-6).all()
    for row in items:
        assert len(set(row.tolist())) == len(row)


# -- claim 7: metrics -------------------------------------------------------------------------------

def test_metrics_hand_computed():
    ranks = np.array([1, 3, 0, 12, 5])
    assert m.recall_at_k(ranks, 1) == pytest.approx(0.2)
    assert m.recall_at_k(ranks, 5) == pytest.approx(0.6)
    assert m.ndcg_at_k(ranks, 5) == pytest.approx((1 + 1 / math.log2(4) + 1 / math.log2(6)) / 5)
    for k in range(1, 15):
        assert m.ndcg_at_k(ranks, k) <= m.recall_at_k(ranks, k) + 1e-12
        assert m.recall_at_k(ranks, k) <= m.recall_at_k(ranks, k + 1)
        assert m.ndcg_at_k(ranks, k) <= m.ndcg_at_k(ranks, k + 1)
    r = m.ranks_from_beams(torch.tensor([[4, 2, 7], [1, 2, 3]]), torch.tensor([7, 9]))
    assert list(r) == [3, 0]


# -- claim 8: pair shuffle --------------------------------------------------------------------------

def test_pair_shuffle_keeps_multisets(world):
    b = world.batches["test"]
    pm = world.layout.pos_modality()
    ids, valid = m.pair_shuffle(b["input_ids"], b["valid"], world.layout, torch.Generator().manual_seed(0))
    assert torch.equal(valid, b["valid"])
    for code in (TEXT, IMAGE):
        sel = pm == code
        assert torch.equal(ids[:, sel].sort(1).values, b["input_ids"][:, sel].sort(1).values)
    assert torch.equal(ids[:, pm == TEXT], b["input_ids"][:, pm == TEXT])
    assert not torch.equal(ids, b["input_ids"])            # some pairings do change


def test_motif_shift_diagnostic_zero_for_text_model(world):
    cfg = m.preset("smoke")
    mdl = ex.make_model(cfg, world.layout, "text", 0).eval()
    b = {k: v[:32] for k, v in world.batches["test"].items()}
    sh = {k: v[:32] for k, v in world.shifted["test"].items()}
    rel = m.synergy_reliance(mdl, b, world.trie, beam=10, shifted=sh)
    assert rel["delta_syn"] == 0.0                          # its input does not change
    assert rel["delta_uni"] == rel["full"] - max(rel["text_only"], rel["image_only"])
    with pytest.raises(ValueError, match="shifted"):
        m.synergy_reliance(mdl, b, world.trie, beam=10, shifted={"input_ids": sh["input_ids"][:3]})


def test_motif_partner_moves_only_the_style(world):
    cat, C = world.cat, world.cat.cfg.n_styles
    for k in range(1, C):
        p = m.motif_partner(cat, k)
        assert np.array_equal(np.sort(p), np.arange(cat.n_items))          # a permutation
        assert np.array_equal(cat.style[p], (cat.style + k) % C)
        for a in ("category", "series", "tone", "background"):
            assert np.array_equal(cat.attrs[a][p], cat.attrs[a])
    for bad in (0, C, 1.5, True):
        with pytest.raises(ValueError, match="shift"):
            m.motif_partner(cat, bad)
    part = m.make_catalogue(m.CatalogueConfig(n_items=100), 0)              # not a full product
    with pytest.raises(ValueError, match="partner"):
        m.motif_partner(part, 1)


def test_motif_shift_is_visible_where_the_pair_shuffle_is_not(world):
    """The style an additive rule reads from a history's multisets, sum(tone) + sum(motif) mod C, is
    kept by the within-row pair shuffle and moved by the motif shift (by k per history item): a model
    that has learned the style can only be caught by the second intervention."""
    cat, C, sp = world.cat, world.cat.cfg.n_styles, world.split["test"]
    h = sp.hist
    ok = h >= 0
    tone, motif = cat.attrs["tone"], cat.attrs["motif"]

    def total(t_items, m_items):
        return (np.where(ok, tone[np.maximum(t_items, 0)] + motif[np.maximum(m_items, 0)], 0).sum(1)) % C

    g = np.random.default_rng(0)
    perm = np.argsort(np.where(ok, g.random(h.shape), -1.0), 1)              # shuffle valid slots only
    shuffled = np.take_along_axis(h, perm, 1)
    assert np.array_equal(total(h, shuffled), total(h, h))                   # pair shuffle: unchanged
    p = m.motif_partner(cat, 1)
    moved = total(h, np.where(ok, p[np.maximum(h, 0)], -1))
    assert np.array_equal(moved, (total(h, h) + ok.sum(1)) % C)             # motif shift: moved by L
    # the token-level intervention: text tokens kept, image tokens those of the partner
    b, sh = world.batches["test"], world.shifted["test"]
    pm = world.layout.pos_modality()
    assert torch.equal(sh["input_ids"][:, pm != IMAGE], b["input_ids"][:, pm != IMAGE])
    assert torch.equal(sh["valid"], b["valid"]) and torch.equal(sh["labels"], b["labels"])
    tok = world.layout.item_tokens(world.ids)
    last = sh["input_ids"][:, -world.layout.levels:].numpy()
    assert np.array_equal(last, tok[p[sp.hist[:, -1]], world.layout.levels:])


def test_oracles_rank_like_the_generators(world):
    """By default no oracle excludes the user's earlier items (the generators' beam search does not);
    ``exclude_seen=True`` can only raise the target's score relative to the others."""
    sp = world.split["test"]
    for kind in m.data.ORACLES:
        s = m.data.oracle_scores(world.cat, world.inter, sp, kind)
        assert np.isfinite(s).all()
        r0 = m.oracle_ranks(world.cat, world.inter, sp, kind)
        r1 = m.oracle_ranks(world.cat, world.inter, sp, kind, exclude_seen=True)
        assert (r1 <= r0).all()
    with pytest.raises(TypeError, match="exclude_seen"):
        m.data.oracle_scores(world.cat, world.inter, sp, "bayes", exclude_seen=1)


def test_no_synergy_oracle_never_reaches_an_other_series_target(world):
    """An identity, not a measurement: the no-synergy oracle ranks first every item of the preferred
    category and the previous item's series (32 of them in the product catalogue), so a target of
    another series never reaches its top ten. The slices partition the test targets."""
    cfg = m.preset("smoke")
    assert cfg.n_items // (cfg.n_categories * cfg.n_series) >= 10
    sl = world.slices
    assert set(sl) == {"series_continuation", "other_series"}
    assert (sl["series_continuation"] ^ sl["other_series"]).all() and sl["other_series"].any()
    r = m.oracle_ranks(world.cat, world.inter, world.split["test"], "no_synergy")
    assert (r[sl["other_series"]] > 10).all()


def test_leave_one_out_scores_an_absent_attribute_below_chance():
    """Each code tuple holds every value of the attribute equally often: leaving one item out makes its
    own value the rarest among the others, so the vote never names it (score 0, chance 1/4), while an
    encoded attribute scores 1. Margins are therefore taken over chance, not over the absent attribute."""
    codes = np.repeat(np.arange(8), 4)[:, None]          # 8 tuples of 4 items
    absent = np.tile(np.arange(4), 8)                     # every value once per tuple
    encoded = np.repeat(np.arange(8) % 4, 4)              # a function of the tuple
    assert m.tokenizer.attribute_recoverability_loo(codes, absent) == 0.0
    assert m.tokenizer.attribute_recoverability_loo(codes, encoded) == 1.0
    assert m.tokenizer.attribute_recoverability(codes, absent) == 0.25


# -- claim 9: saliency ------------------------------------------------------------------------------

def test_saliency_rows_sum_to_one():
    g = torch.Generator().manual_seed(0)
    A = torch.softmax(torch.randn(4, 3, 10, 10, generator=g), -1)
    valid = torch.rand(4, 10, generator=g) > 0.3
    valid[:, 0] = True
    s = m.token_saliency(A, valid)
    assert torch.allclose(s.sum(1), torch.ones(4), atol=1e-6)
    ref = torch.stack([A[i].mean(0)[valid[i]].mean(0) for i in range(4)])
    assert torch.allclose(s, ref, atol=1e-6)


def test_dominant_ties_go_to_text():
    pm = torch.tensor([PROMPT, TEXT, TEXT, IMAGE, IMAGE])
    sal = torch.tensor([[0.2, 0.2, 0.2, 0.2, 0.2], [0.0, 0.1, 0.1, 0.4, 0.4]])
    assert m.dominant_modality(sal, pm, torch.ones(2, 5, dtype=torch.bool)).tolist() == [0, 1]


# -- data: oracles, splits ---------------------------------------------------------------------------

def test_split_and_oracles(world):
    inter = world.inter
    sp = world.split
    assert len(sp["test"]) == min(m.preset("smoke").n_eval, len(inter.lengths))
    assert np.all(sp["train"].pos <= inter.lengths[sp["train"].user] - 3)
    assert np.all(sp["test"].hist[:, -1] == inter.seqs[sp["test"].user, sp["test"].pos - 1])
    bayes = m.oracle_ranks(world.cat, inter, sp["test"], "bayes")
    assert bayes.min() >= 1 and bayes.max() <= world.cat.n_items


# -- bad inputs (Sec. 9) -------------------------------------------------------------------------------

def test_bad_inputs(world, model):
    with pytest.raises(ValueError, match="mask_ratio"):
        m.SynGRConfig(mask_ratio=1.0)
    with pytest.raises(ValueError, match="alpha"):
        m.SynGRConfig(alpha=-0.1)
    with pytest.raises(ValueError, match="tau"):
        m.SynGRConfig(tau=0.0)
    with pytest.raises(ValueError, match="uni_view"):
        m.SynGRConfig(uni_view="both")
    with pytest.raises(ValueError, match="masking"):
        m.SynGRConfig(masking="all")
    with pytest.raises(ValueError, match="history_mode"):
        m.build_inputs(world.split["test"], world.ids, world.layout, "audio")
    with pytest.raises(ValueError, match="id_mode"):
        ex.build_world(m.preset("smoke"), id_mode="bytes")
    with pytest.raises(ValueError, match="kind"):
        m.oracle_ranks(world.cat, world.inter, world.split["test"], "perfect")
    with pytest.raises(ValueError, match="beam"):
        m.evaluate(model, {k: v[:4] for k, v in world.batches["test"].items()}, world.trie, beam=5, ks=(5, 10))
    with pytest.raises(ValueError, match="beam"):
        m.constrained_beam_search(model, world.batches["test"], world.trie, beam=0)
    with pytest.raises(ValueError, match="k must"):
        m.recall_at_k(np.array([1, 2]), 0)
    with pytest.raises(ValueError, match="levels"):
        m.fit_rq_kmeans(world.cat.text_feat, levels=0)
    with pytest.raises(ValueError, match="K="):
        m.fit_rq_kmeans(world.cat.text_feat[:5], K=8)
    bad = world.cat.text_feat.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        m.fit_rq_kmeans(bad)
    with pytest.raises(ValueError, match="input_ids"):
        m.sequences.check_inputs(world.batches["test"]["input_ids"][:, :-1], world.batches["test"]["valid"][:, :-1],
                                 world.layout)
    ids = world.batches["test"]["input_ids"].clone()
    ids[0, 0] = 10_000
    with pytest.raises(ValueError, match="vocabulary"):
        m.sequences.check_inputs(ids, world.batches["test"]["valid"], world.layout)
    with pytest.raises(ValueError, match="n_items"):
        m.CatalogueConfig(n_items=10_000, n_categories=2, n_series=2, n_styles=4, n_backgrounds=2)
    with pytest.raises(ValueError, match="n_styles"):
        m.CatalogueConfig(n_styles=1)
    with pytest.raises(ValueError, match="min_len"):
        m.InteractionConfig(min_len=2)
    with pytest.raises(ValueError, match="sum to 1"):
        m.pid_williams_beer(np.full((2, 2, 2), 0.2))
    with pytest.raises(ValueError, match="non-negative"):
        m.pid_williams_beer(np.array([[[0.5, -0.25], [0.25, 0.5]], [[0, 0], [0, 0]]]))
    with pytest.raises(ValueError, match="3-D"):
        m.pid_williams_beer(np.full((2, 2), 0.25))
    with pytest.raises(ValueError, match="same N"):
        m.assign_semantic_ids(np.zeros((3, 2), int), np.zeros((4, 2), int))
    with pytest.raises(ValueError, match="name"):
        m.gate_table("nand")


def test_zero_valid_history_raises(world):
    sp = world.split["test"].subset(np.arange(3))
    sp.hist[1] = -1
    with pytest.raises(ValueError, match="zero valid items"):
        m.build_inputs(sp, world.ids, world.layout)


# -- CUDA ---------------------------------------------------------------------------------------------

@pytest.mark.cuda
def test_cuda_matches_cpu(world):
    cfg = m.preset("smoke")
    b = _small_batch(world, 32)
    out = {}
    for dev in ("cpu", "cuda"):
        mdl = ex.make_model(cfg, world.layout, "fused", 0).to(dev).eval()
        bb = {k: v.to(dev) for k, v in b.items()}
        loss, _ = m.syngr_loss(mdl, bb, m.SynGRConfig(), torch.Generator().manual_seed(0))
        items, _ = m.constrained_beam_search(mdl, {k: v[:8] for k, v in world.batches["test"].items()},
                                             world.trie.to(dev), beam=10)
        world.trie.to("cpu")
        out[dev] = (float(loss.detach()), items)
    assert out["cpu"][0] == pytest.approx(out["cuda"][0], rel=1e-4)
    assert torch.equal(out["cpu"][1], out["cuda"][1])


# -- calibration table ------------------------------------------------------------------

def test_calibration_table_matches_its_runs_and_hash():
    import hashlib
    import json

    from icml26.syngr import calibration as cal

    tab = cal.load()
    assert list(tab.run) == list(cal.RUNS)
    prov = json.loads((cal.DATA / "calibration.json").read_text())
    assert prov["sha256"] == hashlib.sha256((cal.DATA / "calibration.csv").read_bytes()).hexdigest()
    assert prov["command"].startswith("python -m icml26.syngr.calibration")
    assert ((tab.delta_syn_val - (tab["val_recall@10"] - tab.val_pairshuffle)).abs() < 1e-3).all()
    assert prov["book_preset"]["n_items"] == cal.OLD_WORLD["n_items"]    # the stored runs are the old world
    with pytest.raises(ValueError, match="name must be one of"):
        cal.run_one("no such run")


# -- SASRec-ID ----------------------------------------------------------------------------------------

def test_sasrec_scores_and_padding():
    from icml26.syngr.baselines import SASRec

    torch.manual_seed(0)
    model = SASRec(n_items=12, max_hist=4, d_model=16, heads=2, layers=2, dropout=0.0).eval()
    hist = torch.tensor([[-1, -1, 3, 5], [1, 2, 3, 5], [-1, -1, -1, 7]])
    out = model(hist)
    assert out.shape == (3, 12) and torch.isfinite(out).all()
    # an earlier item matters (the last position attends to it) ...
    assert not torch.allclose(model(torch.tensor([[-1, -1, 4, 5]])), out[:1])
    # ... and the PAD embedding never does (padded positions are masked as keys)
    with torch.no_grad():
        model.item.weight[12].add_(5.0)
    assert torch.allclose(model(hist), out, atol=1e-5)


def test_sasrec_learns_above_popularity(world):
    cfg = m.preset("smoke")
    res = ex.run_sasrec(world, cfg)
    assert 0 <= res["row"]["recall@10"] <= 1 and math.isnan(res["row"]["delta_syn"])
    assert res["log"].best_epoch >= 1


def test_sasrec_bad_inputs():
    from icml26.syngr.baselines import SASRec

    with pytest.raises(ValueError, match="n_items"):
        SASRec(n_items=0, max_hist=4)
    with pytest.raises(ValueError, match="divisible"):
        SASRec(n_items=5, max_hist=4, d_model=10, heads=4)


# -- notebook 3: the generator recipe, the epoch edge and the verdict in words ---------------------
def test_generator_config_sets_notebook_3_recipe():
    for scale in ("smoke", "book", "gpu"):
        cfg = m.preset(scale)
        g = ex.generator_config(cfg)
        assert (g.epochs, g.eval_every, g.dropout) == (cfg.gen_epochs, cfg.gen_eval_every, cfg.gen_dropout)
        assert g.batch_size == cfg.gen_batch_size and cfg.dry_run().gen_batch_size == cfg.gen_batch_size
        assert g.seeds == cfg.seeds and g.lr_grid == cfg.lr_grid and g.d_model == cfg.d_model
        assert cfg.dry_run().gen_epochs <= cfg.gen_epochs and cfg.dry_run().gen_epochs >= 2
    assert m.preset("book").gen_epochs >= 8 and m.preset("book").gen_eval_every == 1


def test_edge_verdict_reads_the_slope_and_refuses_bad_input():
    assert "every run" in ex.edge_verdict(5, 5, 0.01) and "only 4 of 5" in ex.edge_verdict(4, 5, 0.01)
    assert "not been shown" in ex.edge_verdict(5, 5, 0.0) and "not been shown" in ex.edge_verdict(2, 5, -0.1)
    for args, name in (((6, 5, 0.1), "n_runs"), ((1, 0, 0.1), "n_runs"), ((True, 5, 0.1), "n_rising"),
                       ((-1, 5, 0.1), "n_rising"), ((1, 5, float("nan")), "slope_lo"), ((1, 5, "x"), "slope_lo")):
        with pytest.raises(ValueError, match=name):
            ex.edge_verdict(*args)


def _curves():
    import pandas as pd

    rows = []
    for seed, vals in ((0, [0.1, 0.2, 0.3, 0.4]), (1, [0.1, 0.3, 0.2, 0.2])):
        rows += [{"method": "GR-fused", "seed": seed, "epoch": e + 1, "val_recall@10": v} for e, v in enumerate(vals)]
    return pd.DataFrame(rows)


def test_epoch_budget_reads_the_edge_and_the_slope():
    eb = ex.epoch_budget(_curves(), 4)
    e0, e1 = eb.set_index("seed").loc[0], eb.set_index("seed").loc[1]
    assert e0.best_epoch == 4 and bool(e0.best_is_last) and math.isclose(e0.end_slope, 0.2)
    assert e1.best_epoch == 2 and not bool(e1.best_is_last) and math.isclose(e1.end_slope, -0.1)
    assert math.isclose(ex.epoch_budget(_curves(), 4, back=1).set_index("seed").loc[0].end_slope, 0.1)
    assert math.isclose(ex.epoch_budget(_curves().query("epoch <= 2"), 2, back=5).set_index("seed").loc[0].end_slope,
                        0.1)  # back is cut to epochs - 1
    with pytest.raises(ValueError, match="back"):
        ex.epoch_budget(_curves(), 4, back=0)
    with pytest.raises(ValueError, match="epochs"):
        ex.epoch_budget(_curves(), 1)


def test_validation_curves_from_logs():
    from icml26.syngr.train import TrainLog

    logs = {("GR-text", 0): TrainLog(epochs=[1, 2], val_recall=[0.1, 0.2]),
            ("GR-fused", 0): TrainLog(epochs=[1, 2], val_recall=[0.1, 0.3])}
    df = ex.validation_curves(logs)
    assert len(df) == 4 and list(df.columns) == ["method", "seed", "epoch", "val_recall@10"]
    assert df.loc[(df.method == "GR-fused") & (df.epoch == 2), "val_recall@10"].item() == 0.3


def test_bar_verdict_judges_at_the_lower_end():
    assert ex.bar_verdict(0.10, 0.06, 0.05).startswith("clears the bar even at the lower end")
    assert "not shown" in ex.bar_verdict(0.06, 0.01, 0.05)
    assert "fails" in ex.bar_verdict(0.02, -0.03, 0.05)
    for bad in (dict(mean=float("nan"), lo=0.0, bar=0.05), dict(mean=0.1, lo=0.2, bar=0.05),
                dict(mean="0.1", lo=0.0, bar=0.05)):
        with pytest.raises(ValueError):
            ex.bar_verdict(**bad)


def test_per_seed_table_pairs_the_seeds_and_refuses_bad_input():
    import pandas as pd

    rows = pd.DataFrame({"method": ["GR-fused"] * 2 + ["GR-text"] * 2, "seed": [1, 0, 0, 1],
                         "recall@10": [0.3, 0.2, 0.1, 0.15], "delta_syn": [0.2, 0.05, 0.0, 0.0]})
    ctrl = pd.DataFrame({"seed": [0, 1], "delta_syn": [0.01, -0.02]})
    t = ex.per_seed_table(rows, ctrl)
    assert list(t.index) == [0, 1]
    assert t["gain (claim 12)"].tolist() == pytest.approx([0.1, 0.15])
    assert t["drop diff (claim 14)"].tolist() == pytest.approx([0.04, 0.22])
    with pytest.raises(ValueError, match="control"):
        ex.per_seed_table(rows, ctrl.iloc[:1])
    with pytest.raises(ValueError, match="rows"):
        ex.per_seed_table(rows.drop(columns="delta_syn"), ctrl)


# -- host syncs of the training loop (issue 43, point 3) ---------------------------------------------

def _train_run(world, method, n):
    from icml26.syngr.train import TrainConfig, train_generator

    cfg = m.preset("smoke")
    model = ex.make_model(cfg, world.layout, "fused", 0)
    val = {k: v[:8] for k, v in world.batches["val"].items()}
    return train_generator(model, world.batches["train"], val, world.trie,
                           TrainConfig(epochs=1, batch_size=8, lr=1e-3, eval_every=1, beam=10, max_steps=n), method)


@pytest.mark.parametrize("method", ["nll", "syngr"])
def test_generator_training_loop_no_sync_per_step(world, method):
    """The loop the notebooks call (GR: the NLL; SynGR: saliency, masking, three views, contrastive loss)
    reads nothing from the host per step (before: 1 sync per GR step, 9 per SynGR step: the loss logs'
    float()s, the finiteness checks of the saliency and of the contrastive inputs, a boolean index)."""
    from icml26.book.budget import count_step

    one, three = (count_step(lambda n=n: _train_run(world, method, n)).syncs for n in (1, 3))
    assert three == one


def test_losses_unchanged_by_the_sync_free_step(world):
    """The sync-free step computes the same numbers as the checked public pieces: the NLL mean over the
    enabled views picked by a boolean mask and the checked contrastive loss."""
    from icml26.syngr.method import saliency_pass, token_saliency

    torch.manual_seed(0)
    model = ex.make_model(m.preset("smoke"), world.layout, "fused", 0).eval()
    b = _small_batch(world)
    cfg = m.SynGRConfig(use_mask_nll=False)
    loss, logs = m.syngr_loss(model, b, cfg, torch.Generator().manual_seed(0))
    sal, v = saliency_pass(model, b["input_ids"], b["valid"])
    _, v2, attn = model.encode(b["input_ids"], b["valid"], need_attn=True)
    assert torch.equal(sal, token_saliency(attn, v2))
    dom = m.dominant_modality(sal, model.pos_mod, v)
    m_ids, m_valid = m.mask_dominant_topr(b["input_ids"], sal, model.pos_mod, v, dom, cfg.mask_ratio, 0, cfg.masking,
                                          torch.Generator().manual_seed(0))
    u_ids, u_valid = m.unimodal_view(b["input_ids"], model.pos_mod, v, dom, 0)
    out = model(torch.cat([b["input_ids"], m_ids, u_ids]), torch.cat([b["valid"], m_valid, u_valid]),
                b["labels"].repeat(3, 1))
    B = len(b["input_ids"])
    nll = out["nll"].view(3, B)
    z = out["dec_hidden"].mean(1).view(3, B, -1)
    ref = nll[torch.tensor([True, False, True])].mean() + cfg.alpha * m.synergy_contrastive_loss(z[0], z[1], z[2], cfg.tau)
    assert float(loss) == float(ref)
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in logs.values())
    nl, nlogs = m.nll_loss(model, b)
    assert float(nlogs["nll"]) == float(nl)


# -- issue 40 (referee items): the edge verdict's wording, the gpu lr grid, the tuning seed ---------

def test_edge_verdict_says_what_is_measured_and_bounds_nothing():
    """The verdict reads whether the runs were still improving when the budget ended; it never calls a
    score or a drop (a difference) a bound of what a longer budget gives."""
    texts = [ex.edge_verdict(*a) for a in ((5, 5, 0.01), (4, 5, 0.01), (5, 5, 0.0), (2, 5, -0.1))]
    assert not any("bound" in t for t in texts)
    assert "still improving" in texts[0] and "not measured" in texts[0]
    assert "4 of 5" in texts[1] and "not measured" in texts[1]
    assert "reaches zero" in texts[2] and "settled" in texts[2] and texts[2] == texts[3]


def test_gpu_lr_grid_is_centred_for_its_batch():
    """The gpu preset's grid holds, strictly inside it, the book's rate scaled linearly to the gpu batch
    (6e-3 at 128 -> 1.2e-2 at 256) at its geometric centre, with neighbours a factor 2 apart."""
    book, gpu = m.preset("book"), m.preset("gpu")
    grid = sorted(gpu.lr_grid)
    scaled = book.lr * gpu.gen_batch_size / book.gen_batch_size
    assert gpu.gen_batch_size == gpu.batch_size == 256 and len(grid) >= 4
    assert grid[0] < scaled < grid[-1] and any(math.isclose(scaled, g) for g in grid)
    assert all(math.isclose(b / a, 2.0) for a, b in zip(grid, grid[1:]))
    assert grid[0] <= 3e-3 and grid[-1] >= 2.4e-2
    assert math.isclose(math.sqrt(grid[0] * grid[-1]), scaled)   # centred: as many values on each side


def test_tune_seed_is_no_test_seed():
    for scale in ("smoke", "book", "gpu"):
        cfg = m.preset(scale)
        assert cfg.tune_seed not in cfg.seeds and cfg.tune_seed not in cfg.syngr_seeds
        assert cfg.dry_run().tune_seed not in cfg.dry_run().seeds
    from dataclasses import replace

    with pytest.raises(ValueError, match="tune_seed"):
        replace(m.preset("book"), tune_seed=0)


def _fake_runs(monkeypatch):
    """Replace the training runs of the protocol by fakes that record (method, lr, seed) and return a
    validation score that prefers lr 1e-2 and a test row."""
    from icml26.syngr.train import TrainLog

    calls = {"run": [], "train": []}

    def log_for(cfg, seed):
        return TrainLog(epochs=[1], val_recall=[1.0 - abs(cfg.lr - 1e-2) + 0.001 * seed], best_epoch=1)

    def fake_train(world, cfg, name, seed=0, device="cpu", epochs=None):
        calls["train"].append((name, cfg.lr, seed))
        return None, log_for(cfg, seed)

    def fake_run(world, cfg, name, seed=0, device="cpu", epochs=None):
        calls["run"].append((name, cfg.lr, seed))
        return {"row": {"method": name, "seed": seed, "recall@10": 0.1, "delta_syn": 0.0}, "model": None,
                "log": log_for(cfg, seed), "ranks": np.zeros(3)}

    monkeypatch.setattr(ex, "train_method", fake_train)
    monkeypatch.setattr(ex, "run_method", fake_run)
    return calls


def test_generator_protocol_tunes_on_a_seed_that_is_not_tested(world, monkeypatch):
    from dataclasses import replace

    calls = _fake_runs(monkeypatch)
    cfg = replace(m.preset("smoke"), seeds=(0, 1, 2), lr_grid=(5e-3, 1e-2, 2e-2), tune_seed=7)
    out = ex.generator_protocol(world, cfg, methods=("GR-text", "GR-fused"))
    # tuning: every rate of the grid, on the tuning seed only, never evaluated on test
    assert sorted(calls["train"]) == sorted((n, lr, 7) for n in ("GR-text", "GR-fused") for lr in cfg.lr_grid)
    # testing: the chosen rate on the test seeds only
    assert sorted(calls["run"]) == sorted((n, 1e-2, s) for n in ("GR-text", "GR-fused") for s in (0, 1, 2))
    assert out["tune_seed"] == 7 and all(t.best["lr"] == 1e-2 and t.n_configs == 3 for t in out["tuned"].values())
    assert all(score == pytest.approx(1.0 - abs(c["lr"] - 1e-2) + 0.007) for c, score in out["tuned"]["GR-text"].scores)
    with pytest.raises(ValueError, match="tune_seed"):
        ex.generator_protocol(world, cfg, methods=("GR-text",), tune_seed=1)
    with pytest.raises(ValueError, match="tune_seed"):
        ex.generator_protocol(world, cfg, methods=("GR-text",), tune_seed=-1)


def test_generator_protocol_with_one_rate_runs_no_tuning_run(world, monkeypatch):
    from dataclasses import replace

    calls = _fake_runs(monkeypatch)
    cfg = replace(m.preset("smoke"), seeds=(0, 1), lr_grid=(6e-3,))
    out = ex.generator_protocol(world, cfg, methods=("GR-fused",))
    assert calls["train"] == [] and sorted(calls["run"]) == [("GR-fused", 6e-3, 0), ("GR-fused", 6e-3, 1)]
    t = out["tuned"]["GR-fused"]
    assert t.n_configs == 1 and t.best_score == pytest.approx(np.mean([1.0 - 4e-3 + 0.001 * s for s in (0, 1)]))


# -- issue 40: the trained no-style control (notebook 4) -----------------------------------------------

def test_redraw_motifs_changes_only_the_motif(world):
    from icml26.syngr import data as D

    sp = world.split["train"]
    img = D.redraw_motifs(world.cat, sp, 0)
    filled = sp.hist >= 0
    assert img.shape == sp.hist.shape and ((img < 0) == ~filled).all()
    a = world.cat.attrs
    for k in ("category", "series", "tone", "background"):
        assert (a[k][img[filled]] == a[k][sp.hist[filled]]).all()
    # the shown motif is uniform whatever the item's own motif
    C = world.cat.cfg.n_styles
    moved = a["motif"][img[filled]] != a["motif"][sp.hist[filled]]
    assert abs(moved.mean() - (C - 1) / C) < 4 * np.sqrt((C - 1) / C**2 / moved.size)
    assert np.array_equal(img, D.redraw_motifs(world.cat, sp, 0))
    assert not np.array_equal(img, D.redraw_motifs(world.cat, sp, 1))
    with pytest.raises(TypeError, match="split"):
        D.redraw_motifs(world.cat, sp.hist, 0)
    with pytest.raises(ValueError, match="seed"):
        D.redraw_motifs(world.cat, sp, -1)


def test_shown_style_match_sees_the_style_and_its_removal():
    from icml26.syngr import data as D

    cfg = m.preset("book")
    world = ex.build_world(cfg)
    sp = world.split["train"]
    C = cfg.n_styles
    true = D.shown_style_match(world.cat, world.inter, sp)
    ns = D.shown_style_match(world.cat, world.inter, sp, D.redraw_motifs(world.cat, sp, 0))
    n = int((sp.hist >= 0).sum())
    assert true > 0.5 and abs(ns - 1 / C) < 4 * np.sqrt((1 / C) * (1 - 1 / C) / n)
    with pytest.raises(ValueError, match="image_hist"):
        D.shown_style_match(world.cat, world.inter, sp, sp.hist[:, :1])


def test_build_inputs_image_hist_changes_only_the_image_tokens(world):
    from icml26.syngr import data as D
    from icml26.syngr.sequences import build_inputs

    sp = world.split["train"]          # it has empty history slots
    assert (sp.hist < 0).any()
    own = build_inputs(sp, world.ids, world.layout, image_hist=sp.hist)
    assert all(torch.equal(own[k], world.batches["train"][k]) for k in own)
    img = D.redraw_motifs(world.cat, sp, 3)
    b = build_inputs(sp, world.ids, world.layout, image_hist=img)
    pm = world.layout.pos_modality()
    assert torch.equal(b["input_ids"][:, pm != IMAGE], own["input_ids"][:, pm != IMAGE])
    assert torch.equal(b["valid"], own["valid"]) and torch.equal(b["labels"], own["labels"])
    tok = world.layout.item_tokens(world.ids)
    blocks = b["input_ids"][:, world.layout.n_prompt:].reshape(len(sp), world.layout.max_hist, -1).numpy()
    f = img >= 0
    assert (blocks[f][:, world.layout.levels:] == tok[img[f], world.layout.levels:]).all()
    for bad in (img[:, :1], np.where(img >= 0, img, 0), img.astype(float), np.where(img >= 0, 10**6, -1)):
        with pytest.raises(ValueError, match="image_hist"):
            build_inputs(sp, world.ids, world.layout, image_hist=bad)
    with pytest.raises(ValueError, match="at most one"):
        build_inputs(sp, world.ids, world.layout, image_of=np.arange(world.cat.n_items), image_hist=img)


def test_no_style_world_keeps_the_test_split(world):
    ns = ex.no_style_world(world, 0)
    assert ns.batches["test"] is world.batches["test"] and ns.shifted is world.shifted
    for k in ("train", "val"):
        assert ns.image_hist[k].shape == world.split[k].hist.shape
        assert torch.equal(ns.batches[k]["labels"], world.batches[k]["labels"])
        assert not torch.equal(ns.batches[k]["input_ids"], world.batches[k]["input_ids"])
    assert world.image_hist is None
    with pytest.raises(TypeError, match="world"):
        ex.no_style_world(world.batches, 0)


def test_no_style_protocol_names_its_method(world, monkeypatch):
    from dataclasses import replace

    calls = _fake_runs(monkeypatch)
    cfg = replace(m.preset("smoke"), seeds=(0, 1), lr_grid=(6e-3,))
    out = ex.no_style_protocol(world, cfg)
    assert list(out["tuned"]) == [ex.NO_STYLE] and out["tuned"][ex.NO_STYLE].method == ex.NO_STYLE
    assert set(out["rows"].method) == {ex.NO_STYLE} and set(out["logs"]) == {(ex.NO_STYLE, 0), (ex.NO_STYLE, 1)}
    assert sorted(calls["run"]) == [("GR-fused", 6e-3, 0), ("GR-fused", 6e-3, 1)]


def test_control_table_pairs_the_seeds_and_refuses_bad_input():
    import pandas as pd

    rows = pd.DataFrame({"method": ["GR-fused"] * 2, "seed": [1, 0], "recall@10": [0.3, 0.2], "delta_syn": [0.2, 0.0]})
    ctrl = pd.DataFrame({"method": [ex.NO_STYLE] * 2, "seed": [0, 1], "recall@10": [0.15, 0.1],
                         "delta_syn": [0.01, -0.02]})
    t = ex.control_table(rows, ctrl)
    assert list(t.index) == [0, 1]
    assert t["R@10 diff"].tolist() == pytest.approx([0.05, 0.2]) and t["drop diff"].tolist() == pytest.approx([-0.01, 0.22])
    with pytest.raises(ValueError, match="same seeds"):
        ex.control_table(rows, ctrl.iloc[:1])
    with pytest.raises(ValueError, match="control"):
        ex.control_table(rows, ctrl.drop(columns="delta_syn"))
    with pytest.raises(ValueError, match="rows"):
        ex.control_table(ctrl, ctrl)


# -- per-step speed without changing the arithmetic (issue 40, the book budget) ------------------------

def _intel_cpu() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "GenuineIntel" in f.read()
    except OSError:
        return True   # unknown CPU: do not compare with F.dropout's stream


def test_dropout_mask_formula_and_torch_dropout_bit_for_bit():
    """The chapter's dropout is x * ((rand(float64) < 1 - p) / (1 - p)) from the default generator
    (everywhere); where PyTorch's CPU bernoulli takes its default path (not Intel's MKL stream) that is
    ``F.dropout``'s draw too: the same outputs, gradients and generator state, to the bit. Identity in
    eval mode and at p = 0."""
    import torch.nn.functional as F
    from icml26.syngr.method import _Dropout

    for shape, p in (((96, 16, 32), 0.1), ((7, 5, 13), 0.3)):
        x = torch.randn(shape, requires_grad=True)
        d = _Dropout(p).train()
        torch.manual_seed(3)
        b1, b2, rb = d(x), d(x), torch.rand(4)
        torch.manual_seed(3)
        m1, m2 = (torch.rand(shape, dtype=torch.float64) < 1 - p for _ in range(2))
        assert torch.equal(b1, x * (m1.to(x.dtype) / (1 - p))) and torch.equal(b2, x * (m2.to(x.dtype) / (1 - p)))
        assert torch.equal(rb, torch.rand(4))
        if _intel_cpu():
            continue
        torch.manual_seed(3)
        a1, a2, ra = F.dropout(x, p, True), F.dropout(x, p, True), torch.rand(4)
        assert torch.equal(a1, b1) and torch.equal(a2, b2) and torch.equal(ra, rb)
        ga, = torch.autograd.grad((a1 * a2).sum(), x)
        gb, = torch.autograd.grad((b1 * b2).sum(), x)
        assert torch.equal(ga, gb)
    x = torch.randn(4, 3)
    assert _Dropout(0.1).eval()(x) is x and _Dropout(0.0).train()(x) is x


def _fit_both_ways(world, flat: bool):
    """SynGR steps (dropout 0.1, saliency masking) for two epochs of six steps: through ``fit`` (flat
    AdamW) or through the loop as it was before the flat buffer (AdamW over the parameter list)."""
    from icml26.syngr.method import SynGRConfig, syngr_loss
    from icml26.syngr.train import TrainConfig, fit

    tr = world.batches["train"]
    cfg = TrainConfig(epochs=2, batch_size=32, lr=6e-3, eval_every=1, beam=10, max_steps=6)
    model = ex.make_model(m.preset("smoke"), world.layout, "fused", 0).train()
    gen = torch.Generator().manual_seed(0)

    def step(idx):
        return syngr_loss(model, {k: tr[k][idx] for k in ("input_ids", "valid", "labels")}, SynGRConfig(), gen)[0], 1

    n = len(tr["input_ids"])
    if flat:
        score = iter(range(10))                     # rising validation scores: the last epoch is kept
        fit(model, n, step, lambda: float(next(score)), cfg, gen, "flat")
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.epochs * cfg.max_steps)
        for _ in range(cfg.epochs):
            perm = torch.randperm(n, generator=gen)
            for s in range(0, cfg.max_steps * cfg.batch_size, cfg.batch_size):
                loss, _ = step(perm[s:s + cfg.batch_size])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
    return [p.detach().clone() for p in model.parameters()]


def test_fit_flat_adamw_gives_the_same_weights_to_the_bit(world):
    """AdamW over one flat buffer of all parameters is the multi-tensor AdamW over the parameter list,
    element for element: the trained weights are equal to the bit."""
    a, b = _fit_both_ways(world, True), _fit_both_ways(world, False)
    assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_fit_keeps_adamw_over_the_parameter_list_when_a_parameter_has_no_gradient():
    """A parameter without a gradient is skipped by AdamW (no step, no weight decay); the flat buffer
    would decay it, so ``fit`` then keeps the optimiser over the parameter list."""
    from icml26.syngr.train import TrainConfig, fit

    torch.manual_seed(0)
    net = torch.nn.ModuleDict({"used": torch.nn.Linear(3, 1), "unused": torch.nn.Linear(3, 1)})
    before = net["unused"].weight.detach().clone()
    x = torch.randn(16, 3)
    cfg = TrainConfig(epochs=1, batch_size=4, lr=1e-2, weight_decay=0.1, eval_every=1, beam=1)
    fit(net, 16, lambda idx: (net["used"](x[idx]).pow(2).mean(), 1), lambda: 0.0, cfg,
        torch.Generator().manual_seed(0), "unused")
    assert torch.equal(net["unused"].weight, before) and net["unused"].weight.grad is None
