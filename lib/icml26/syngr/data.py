"""SynCat: a synthetic catalogue where a user-relevant property needs both modalities (spec Sec. 7.1).

Each item has five independent uniform attributes: category c (text and image), series u (text
only), text tone a_t (text only), visual motif a_v (image only), background g (image only). The
*style* sigma = (a_t + a_v) mod C is pure synergy: neither modality alone says anything about it.
Users prefer one category c* and one style sigma*, and tend to continue the series of their last
item. Everything is generated procedurally and seeded; nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import pos_int, real

ATTRS = ("category", "series", "tone", "motif", "background")


@dataclass(frozen=True)
class CatalogueConfig:
    n_items: int = 400
    n_categories: int = 4
    n_series: int = 16
    n_styles: int = 8
    n_backgrounds: int = 4
    d_text: int = 32
    d_image: int = 32
    amp_text: tuple = (2.0, 3.0, 1.5)     # category, series, tone
    amp_image: tuple = (2.0, 1.5, 1.0)    # category, motif, background
    noise: float = 0.15

    def __post_init__(self):
        for f in ("n_items", "n_categories", "n_series", "n_backgrounds", "d_text", "d_image"):
            pos_int(getattr(self, f), f)
        pos_int(self.n_styles, "n_styles", 2)
        for f in ("amp_text", "amp_image"):
            v = getattr(self, f)
            if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) != 3:
                raise ValueError(f"{f} must be three amplitudes, got {v!r}")
            for a in v:
                real(a, f, lo=0.0)
        space = self.n_categories * self.n_series * self.n_styles**2 * self.n_backgrounds
        if space < self.n_items:
            raise ValueError(f"n_items={self.n_items} exceeds the {space} unique attribute tuples "
                             "(product of attribute sizes); enlarge the attributes or shrink n_items")
        real(self.noise, "noise", lo=0.0)


@dataclass
class Catalogue:
    attrs: dict            # name -> [N] int array
    style: np.ndarray      # [N] sigma = (tone + motif) mod C
    text_feat: np.ndarray  # [N, d_text]
    image_feat: np.ndarray  # [N, d_image]
    cfg: CatalogueConfig

    @property
    def n_items(self) -> int:
        return len(self.style)


def _protos(rng, n, d):
    p = rng.standard_normal((n, d))
    return p / np.linalg.norm(p, axis=1, keepdims=True)


def make_catalogue(cfg: CatalogueConfig, seed: int = 0) -> Catalogue:
    """Sample ``n_items`` distinct attribute tuples and render text and image features:
    e_t = 2 P_c[c] + 3 P_u[u] + 1.5 P_a[a_t] + 0.15 eps,  e_v = 2 P_c[c] + 1.5 P_a[a_v] + 1 P_g[g] + 0.15 eps."""
    if not isinstance(cfg, CatalogueConfig):
        raise TypeError(f"cfg must be a CatalogueConfig, got {type(cfg).__name__}")
    rng = np.random.default_rng(seed)
    sizes = (cfg.n_categories, cfg.n_series, cfg.n_styles, cfg.n_styles, cfg.n_backgrounds)
    flat = rng.choice(int(np.prod(sizes)), size=cfg.n_items, replace=False)  # unique tuples, uniform
    vals = np.unravel_index(np.sort(flat), sizes)
    attrs = {k: np.asarray(v, dtype=np.int64) for k, v in zip(ATTRS, vals)}
    attrs_perm = rng.permutation(cfg.n_items)
    attrs = {k: v[attrs_perm] for k, v in attrs.items()}
    pc_t, pu, pa_t = _protos(rng, cfg.n_categories, cfg.d_text), _protos(rng, cfg.n_series, cfg.d_text), \
        _protos(rng, cfg.n_styles, cfg.d_text)
    pc_v, pa_v, pg = _protos(rng, cfg.n_categories, cfg.d_image), _protos(rng, cfg.n_styles, cfg.d_image), \
        _protos(rng, cfg.n_backgrounds, cfg.d_image)
    at, av = cfg.amp_text, cfg.amp_image
    text = (at[0] * pc_t[attrs["category"]] + at[1] * pu[attrs["series"]] + at[2] * pa_t[attrs["tone"]]
            + cfg.noise * rng.standard_normal((cfg.n_items, cfg.d_text)))
    image = (av[0] * pc_v[attrs["category"]] + av[1] * pa_v[attrs["motif"]] + av[2] * pg[attrs["background"]]
             + cfg.noise * rng.standard_normal((cfg.n_items, cfg.d_image)))
    style = (attrs["tone"] + attrs["motif"]) % cfg.n_styles
    return Catalogue(attrs, style, text.astype(np.float32), image.astype(np.float32), cfg)


@dataclass(frozen=True)
class InteractionConfig:
    n_users: int = 1500
    min_len: int = 6
    max_len: int = 10
    beta_cat: float = 2.0
    beta_style: float = 4.0
    beta_series: float = 2.0

    def __post_init__(self):
        pos_int(self.n_users, "n_users")
        pos_int(self.min_len, "min_len (train + validation + test need 3)", 3)
        pos_int(self.max_len, f"max_len (>= min_len={self.min_len})", self.min_len)
        for f in ("beta_cat", "beta_style", "beta_series"):
            real(getattr(self, f), f)


@dataclass
class Interactions:
    seqs: np.ndarray        # [U, max_len] item ids, -1 after the end
    lengths: np.ndarray     # [U]
    pref_cat: np.ndarray    # [U] c*
    pref_style: np.ndarray  # [U] sigma*
    cfg: InteractionConfig


def item_weights_log(cat: Catalogue, cfg: InteractionConfig, pref_cat, pref_style, prev_series=None):
    """log w(i | x_k) of spec Sec. 7.1 for every (user, item): [U, N] (without the seen-item mask)."""
    a = cat.attrs
    logw = (cfg.beta_cat * (a["category"][None, :] == np.asarray(pref_cat)[:, None])
            + cfg.beta_style * (cat.style[None, :] == np.asarray(pref_style)[:, None]))
    if prev_series is not None:
        logw = logw + cfg.beta_series * (a["series"][None, :] == np.asarray(prev_series)[:, None])
    return logw.astype(np.float64)


def make_interactions(cat: Catalogue, cfg: InteractionConfig, seed: int = 0) -> Interactions:
    """Sample user latents and item sequences without repeats (Gumbel-max, batched over users)."""
    if not isinstance(cat, Catalogue):
        raise TypeError(f"cat must be a Catalogue, got {type(cat).__name__}")
    if not isinstance(cfg, InteractionConfig):
        raise TypeError(f"cfg must be an InteractionConfig, got {type(cfg).__name__}")
    if cfg.max_len > cat.n_items:
        raise ValueError(f"max_len={cfg.max_len} exceeds n_items={cat.n_items}")
    rng = np.random.default_rng(seed + 7919)
    U, N = cfg.n_users, cat.n_items
    pref_cat = rng.integers(0, cat.cfg.n_categories, U)
    pref_style = rng.integers(0, cat.cfg.n_styles, U)
    lengths = rng.integers(cfg.min_len, cfg.max_len + 1, U)
    seqs = np.full((U, cfg.max_len), -1, dtype=np.int64)
    seen = np.zeros((U, N), dtype=bool)
    rows = np.arange(U)
    prev_series = None
    for k in range(cfg.max_len):
        logw = item_weights_log(cat, cfg, pref_cat, pref_style, prev_series)
        logw[seen] = -np.inf
        pick = np.argmax(logw + rng.gumbel(size=(U, N)), axis=1)
        pick = np.where(k < lengths, pick, -1)
        seqs[:, k] = pick
        live = pick >= 0
        seen[rows[live], pick[live]] = True
        prev_series = cat.attrs["series"][np.maximum(pick, 0)]
    return Interactions(seqs, lengths, pref_cat, pref_style, cfg)


@dataclass
class Split:
    """(history, target) pairs of one split; histories left-padded with -1 (whole items)."""
    hist: np.ndarray     # [M, max_hist]
    target: np.ndarray   # [M]
    user: np.ndarray     # [M]
    pos: np.ndarray      # [M] index of the target in the user's sequence

    def __len__(self) -> int:
        return len(self.target)

    def subset(self, idx) -> Split:
        return Split(self.hist[idx], self.target[idx], self.user[idx], self.pos[idx])


def _pairs(inter: Interactions, users: np.ndarray, pos: np.ndarray, max_hist: int) -> Split:
    hist = np.full((len(users), max_hist), -1, dtype=np.int64)
    for j in range(max_hist):           # slot j (0 = oldest) holds item pos - max_hist + j
        src = pos - max_hist + j
        ok = src >= 0
        hist[ok, j] = inter.seqs[users[ok], src[ok]]
    return Split(hist, inter.seqs[users, pos], users, pos)


def leave_one_out(inter: Interactions, max_hist: int) -> dict[str, Split]:
    """Leave-one-out split (spec Sec. 3.1): last item = test target, second-last = validation
    target, every earlier prefix (k >= 1 items) = a training pair; histories keep the last ``max_hist`` items."""
    if not isinstance(inter, Interactions):
        raise TypeError(f"inter must be Interactions, got {type(inter).__name__}")
    if not isinstance(max_hist, (int, np.integer)) or isinstance(max_hist, bool) or max_hist < 1:
        raise ValueError(f"max_hist must be a positive integer, got {max_hist!r}")
    U = len(inter.lengths)
    users = np.arange(U)
    out = {"test": _pairs(inter, users, inter.lengths - 1, max_hist),
           "val": _pairs(inter, users, inter.lengths - 2, max_hist)}
    tu, tp = [], []
    for p in range(1, inter.seqs.shape[1]):
        ok = p <= inter.lengths - 3
        tu.append(users[ok])
        tp.append(np.full(ok.sum(), p))
    out["train"] = _pairs(inter, np.concatenate(tu), np.concatenate(tp), max_hist)
    return out


ORACLES = ("bayes", "no_synergy", "category")


def oracle_scores(cat: Catalogue, inter: Interactions, split: Split, kind: str,
                  exclude_seen: bool = False) -> np.ndarray:
    """[M, N] oracle scores; with ``exclude_seen`` the items already in the user's sequence before the
    target get -inf. The default ranks every item, as the generators' beam search does (the paper's
    protocol: no exclusion), so that oracles and generators are compared on equal terms.

    ``bayes``: log w(i | x_prev) with the true c*, sigma*; ``no_synergy``: beta_c[c=c*] +
    beta_u[u=u_prev] (all a single modality can tell); ``category``: beta_c[c=c*]."""
    if not isinstance(exclude_seen, bool):
        raise TypeError(f"exclude_seen must be a bool, got {type(exclude_seen).__name__}")
    if kind not in ORACLES:
        raise ValueError(f"kind must be one of {ORACLES}, got {kind!r}")
    cfg = inter.cfg
    prev = inter.seqs[split.user, split.pos - 1]
    prev_series = cat.attrs["series"][prev]
    cats = inter.pref_cat[split.user]
    if kind == "bayes":
        s = item_weights_log(cat, cfg, cats, inter.pref_style[split.user], prev_series)
    else:
        s = cfg.beta_cat * (cat.attrs["category"][None, :] == cats[:, None]).astype(np.float64)
        if kind == "no_synergy":
            s = s + cfg.beta_series * (cat.attrs["series"][None, :] == prev_series[:, None])
    if exclude_seen:
        past = np.arange(inter.seqs.shape[1])[None, :] < split.pos[:, None]
        items = np.where(past, inter.seqs[split.user], -1)
        r, c = np.nonzero(items >= 0)
        s[r, items[r, c]] = -np.inf
    return s


def ranks_from_scores(scores: np.ndarray, target: np.ndarray, seed: int = 0) -> np.ndarray:
    """1-based rank of each target under ``scores`` [M, N], ties broken at random (seeded)."""
    rng = np.random.default_rng(seed)
    noisy = scores + 1e-6 * rng.random(scores.shape)
    t = noisy[np.arange(len(target)), target]
    return 1 + (noisy > t[:, None]).sum(1)


def oracle_ranks(cat: Catalogue, inter: Interactions, split: Split, kind: str, seed: int = 0,
                 exclude_seen: bool = False) -> np.ndarray:
    """Rank of the target under an oracle scorer (spec Sec. 7.1); ``exclude_seen`` as in :func:`oracle_scores`."""
    return ranks_from_scores(oracle_scores(cat, inter, split, kind, exclude_seen), split.target, seed)


def motif_partner(cat: Catalogue, shift: int = 1) -> np.ndarray:
    """[N] for every item, the item that differs from it only in its motif, shifted by ``shift`` mod C.

    Showing each history item's text with its partner's image moves the style of every history item
    by ``shift`` (sigma = tone + motif mod C) while keeping the category, series, tone and background: a
    model that reads the style must change its prediction. Needs a catalogue in which every such
    partner exists (a full product of the attributes, as the book's catalogue is)."""
    C = cat.cfg.n_styles
    if not isinstance(shift, (int, np.integer)) or isinstance(shift, bool) or not 0 < shift % C:
        raise ValueError(f"shift must be an integer that is not a multiple of C={C}, got {shift!r}")
    a = cat.attrs
    sizes = (cat.cfg.n_categories, cat.cfg.n_series, C, C, cat.cfg.n_backgrounds)
    key = np.ravel_multi_index(tuple(a[k] for k in ATTRS), sizes)
    lookup = np.full(int(np.prod(sizes)), -1, dtype=np.int64)
    lookup[key] = np.arange(cat.n_items)
    moved = dict(a, motif=(a["motif"] + shift) % C)
    partner = lookup[np.ravel_multi_index(tuple(moved[k] for k in ATTRS), sizes)]
    if (partner < 0).any():
        raise ValueError(f"cat: {int((partner < 0).sum())} items have no motif-shifted partner; the motif "
                         "shift needs a catalogue that holds every attribute combination")
    return partner


def redraw_motifs(cat: Catalogue, split: Split, seed: int = 0) -> np.ndarray:
    """[M, max_hist]: for every history slot of ``split``, the item whose image the slot shows in the
    **no-style world**, the slot's own item with its motif re-drawn uniformly from the C motifs,
    independently per row and slot (-1 on the empty slots).

    The shown motif is then independent of everything else, so the style a history shows (tone + shown
    motif mod C) carries nothing about the user's style, while category, series, tone and background of
    every history item stay as they were: a generator trained on these histories sees all the world
    offers except the style (the trained no-style control of notebook 4). Needs a catalogue that holds
    every attribute combination (as :func:`motif_partner`)."""
    if not isinstance(cat, Catalogue):
        raise TypeError(f"cat must be a Catalogue, got {type(cat).__name__}")
    if not isinstance(split, Split):
        raise TypeError(f"split must be a Split, got {type(split).__name__}")
    pos_int(seed, "seed", 0)
    C = cat.cfg.n_styles
    partners = np.stack([np.arange(cat.n_items)] + [motif_partner(cat, k) for k in range(1, C)])   # [C, N]
    shift = np.random.default_rng(seed + 104_729).integers(0, C, split.hist.shape)
    shown = partners[shift, np.maximum(split.hist, 0)]
    return np.where(split.hist >= 0, shown, -1)


def shown_style_match(cat: Catalogue, inter: Interactions, split: Split, image_hist=None) -> float:
    """Share of the filled history slots of ``split`` whose *shown* style (the slot item's tone plus the
    motif of the item whose image it shows, ``image_hist`` as for
    :func:`icml26.syngr.sequences.build_inputs`; default the item's own) is the user's style. With the
    true images it is well above 1/C (users pick items of their style); with re-drawn motifs
    (:func:`redraw_motifs`) it is 1/C up to sampling noise."""
    h = split.hist
    img = h if image_hist is None else np.asarray(image_hist)
    if img.shape != h.shape or not np.array_equal(img < 0, h < 0):
        raise ValueError(f"image_hist must have the shape of the histories {h.shape} and -1 on their empty slots")
    ok = h >= 0
    if not ok.any():
        raise ValueError("split has no filled history slot")
    shown = (cat.attrs["tone"][np.maximum(h, 0)] + cat.attrs["motif"][np.maximum(img, 0)]) % cat.cfg.n_styles
    return float((shown == inter.pref_style[split.user][:, None])[ok].mean())


def slice_masks(cat: Catalogue, inter: Interactions, split: Split) -> dict[str, np.ndarray]:
    """``series_continuation``: the target shares the previous item's series; ``other_series``: it does not.
    (In the product catalogue the style pays off within the series: on ``other_series`` every ranking,
    the Bayes oracle included, is near zero.)"""
    prev = inter.seqs[split.user, split.pos - 1]
    cont = cat.attrs["series"][split.target] == cat.attrs["series"][prev]
    return {"series_continuation": cont, "other_series": ~cont}
