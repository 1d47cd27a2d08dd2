"""One matplotlib style for the whole book: the same colour for the same method everywhere,
lower-case axis labels with units, no titles (captions live in the cell metadata)."""

from __future__ import annotations

from collections.abc import Iterable

# Colour-blind-safe palette (Okabe-Ito, then Tol's muted, then a neutral grey); the order is fixed.
PALETTE = (
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
    "#882255", "#44AA99", "#999933", "#AA4499", "#661100", "#999999",
)

_RC = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.prop_cycle": None,  # filled in below
    "font.size": 10,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
    "image.cmap": "viridis",
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (idempotent)."""
    import matplotlib as mpl
    from cycler import cycler

    rc = dict(_RC)
    rc["axes.prop_cycle"] = cycler(color=list(PALETTE))
    mpl.rcParams.update(rc)
    from .tables import set_pandas_defaults

    set_pandas_defaults()
    _retina_inline()


# The book's column is 768 CSS pixels: a figure of width w inches at figure.dpi=110 is 110*w pixels
# wide on the page, so keep w <= 6.9 (the default 6.4 in is 704 px). In a notebook, figures are
# stored as PNG at twice that resolution with their CSS size in the output's metadata ("retina"),
# so that tick labels stay sharp on high-density screens.
def _retina_inline() -> None:
    try:
        from IPython import get_ipython

        if get_ipython() is None:
            return
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("retina")
    except Exception:  # pragma: no cover - outside IPython or an old matplotlib-inline
        return


# The documented palette per method: the paper's method of a chapter is blue, its main baseline
# vermillion, a reference or ground truth black; the same name has the same colour in every chapter.
# Keys are compared in lower case. A name not listed takes a colour by the fallback rule of
# :func:`method_color`. Add a chapter's methods here when it lands.
METHOD_COLORS: dict[str, str] = {
    # shared roles
    "reference": "#000000", "simulation": "#000000", "oracle": "#000000",
    # front matter (how this book works)
    "batched": "#0072B2", "python loop": "#D55E00",
    # cgmt
    "theory (true law)": "#0072B2", "gaussian-equivalent theory": "#D55E00",
    "moment-matched gaussian": "#009E73",
    # special
    "special": "#0072B2", "fedavg": "#D55E00", "fedprox": "#009E73", "special-t": "#56B4E9",
    "replay": "#CC79A7", "joint": "#000000",
    # preconditioned-delta
    "pdn x=2": "#0072B2", "deltanet": "#D55E00", "linear attention": "#999933", "pdn x=1.5": "#56B4E9",
    "jacobi (unsquashed)": "#CC79A7", "rls": "#000000",
    # bandpo
    "band-kl": "#0072B2", "clip": "#D55E00", "clip-higher": "#E69F00", "dcpo": "#CC79A7",
    "band-tv": "#009E73", "band-chi2": "#56B4E9", "band-kl-relax": "#882255",
    # ba-solver
    "ba bi-anchor": "#0072B2", "euler": "#D55E00", "ab2": "#009E73", "ba single-anchor": "#56B4E9",
    "dpm++(2m)": "#CC79A7", "heun": "#E69F00", "midpoint": "#999933", "rk4": "#882255",
    "ba bi-anchor (oracle sidenet)": "#44AA99",
    # dp-c4
    "dp-c4": "#0072B2", "dp-sgd": "#D55E00", "dp-gd": "#D55E00", "clipped gd": "#D55E00",
    "dp-c4 (uniform)": "#56B4E9", "dp-c4 (constant threshold)": "#009E73",
    # watermark
    "algorithm a": "#0072B2", "default (0.25, 2)": "#D55E00", "default (0.5, 2)": "#E69F00",
    "uncalibrated": "#009E73", "a with raw t": "#CC79A7",
    # causcale
    "causcale": "#0072B2", "invcov": "#D55E00", "corr": "#009E73", "no prior": "#CC79A7",
    "untied attention": "#E69F00", "tied": "#0072B2", "untied": "#D55E00",
    "with reduction": "#0072B2", "without reduction": "#D55E00",
    # context-tuning
    "ct-kv": "#0072B2", "icl": "#D55E00", "ct-prompt": "#56B4E9",  # its ridge oracle uses "oracle"
    "prefix tuning": "#E69F00", "prompt tuning": "#CC79A7", "ttt": "#009E73", "ttt + ct-kv": "#882255",
    "ct-kv (no loo)": "#44AA99", "ct-kv (no dropout)": "#999933", "zero-shot": "#AA4499",
    # paced-rl
    "paced-rl": "#0072B2", "grpo": "#D55E00", "oracle selection": "#000000",
    "gflownet-pi_old (uniform)": "#009E73", "paced w/o replay": "#56B4E9", "flowrl": "#CC79A7",
    "dynamic sampling": "#E69F00", "history selection": "#999933", "paced-rl, replay not in z": "#882255",
    # sfconvcnp
    "sfconvcnp": "#0072B2", "convcnp": "#D55E00", "cnp": "#009E73", "sfvconvcnp": "#56B4E9",
    "sfconvcnp-linear": "#CC79A7", "te-attention np": "#E69F00", "gp oracle": "#000000",
    "convcnp (fixed grid)": "#882255",
    # bpop
    "bpop": "#0072B2", "majority": "#D55E00", "always-before": "#009E73", "heuristics miner": "#CC79A7",
    "queue-jump": "#E69F00", "bpop-uniform": "#56B4E9",
    # unrolled-gsp
    "unrolled (ridge start)": "#0072B2", "ridge": "#D55E00", "unrolled (scratch)": "#56B4E9",
    "persistence": "#009E73", "historical average": "#E69F00", "transformer": "#CC79A7",
    # pdrf
    "pdrf": "#0072B2", "rf-v": "#D55E00", "rf-x": "#56B4E9", "u-net (mse)": "#CC79A7",
    "sl (estimated motion)": "#E69F00", "sl (true motion)": "#000000", "sl (estimated, trajectory)": "#999933",
    "x-prediction": "#0072B2", "v-prediction": "#D55E00", "straight backtrace": "#D55E00",
    "trajectory backtrace": "#0072B2",
    # syngr
    "syngr": "#0072B2", "gr-fused": "#D55E00", "gr-text": "#009E73", "gr-image": "#CC79A7",
    "gr-fused (3x epochs)": "#E69F00", "bayes oracle": "#000000", "no-synergy oracle": "#999933",
    "category oracle": "#882255", "popularity": "#44AA99", "syngr (alpha=0)": "#56B4E9",
    "syngr (random mask)": "#AA4499", "syngr (mask non-dominant)": "#661100", "syngr (no h_uni nll)": "#999999",
    "sasrec-id": "#44AA99",
    # dynvla
    "dynamics": "#0072B2", "none": "#D55E00", "meta": "#009E73", "future_image": "#CC79A7",
    "expert": "#000000", "constant velocity": "#D55E00", "expert (fast-lite round trip)": "#56B4E9",
    "decoupled": "#0072B2", "coupled": "#D55E00", "decoupled, no bev": "#56B4E9",
    # protein-tokens
    "apt-mini": "#0072B2", "kanzi-mini": "#D55E00",
    # focusing
    "focus_zoom": "#0072B2", "full": "#D55E00", "fsv": "#009E73", "fsv (alpha=0.3)": "#009E73",
    "fsv (alpha=0.1)": "#999933", "focus": "#56B4E9", "focus_zoom, no warm-up": "#CC79A7",
    "plain": "#D55E00", "tsdf warm-up": "#0072B2", "tv": "#009E73", "tsdf warm-up + tv": "#CC79A7",
    "random subset": "#999999",
}

# Fallback for names not in METHOD_COLORS: the order in which a notebook first asks for them.
_FALLBACK: dict[str, str] = {}


def _key(name) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    return name.strip().lower()


def method_color(name: str) -> str:
    """The colour of a method: from :data:`METHOD_COLORS` when the name is listed (any case);
    otherwise the fallback, deterministic for a notebook run from the top: the first name not
    listed gets ``PALETTE[0]``, the next ``PALETTE[1]``, and so on, and a name keeps its colour."""
    key = _key(name)
    if key in METHOD_COLORS:
        return METHOD_COLORS[key]
    if key not in _FALLBACK:
        _FALLBACK[key] = PALETTE[len(_FALLBACK) % len(PALETTE)]
    return _FALLBACK[key]


def method_colors(names: Iterable[str]) -> dict[str, str]:
    """Colours for several methods shown together. Listed names take their palette colour; the
    others take, in the order given, the first palette entries not already used in this call
    (so every name of one figure is distinguishable while the palette lasts)."""
    names = list(dict.fromkeys(names))
    keys = [_key(n) for n in names]
    used = {METHOD_COLORS[k] for k in keys if k in METHOD_COLORS}
    out: dict[str, str] = {}
    for name, key in zip(names, keys):
        if key in METHOD_COLORS:
            out[name] = METHOD_COLORS[key]
            continue
        free = [c for c in PALETTE if c not in used]
        color = free[0] if free else method_color(name)
        used.add(color)
        out[name] = color
    return out
