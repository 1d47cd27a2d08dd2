"""One matplotlib style for the whole book: the same colour for the same method everywhere,
lower-case axis labels with units, no titles (captions live in the cell metadata)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

# Colour-blind-safe palette (Okabe-Ito, then Tol's muted); the order is fixed.
PALETTE = (
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
    "#882255", "#44AA99", "#999933", "#AA4499", "#661100",
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


def method_color(name: str) -> str:
    """A stable colour for a method name: the same name gets the same colour in every chapter."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    digest = hashlib.md5(name.strip().lower().encode()).digest()
    return PALETTE[digest[0] % len(PALETTE)]


def method_colors(names: Iterable[str]) -> dict[str, str]:
    """Colours for several methods shown together: each its stable colour unless two collide,
    in which case the later one takes the next free palette entry."""
    used: set[str] = set()
    out: dict[str, str] = {}
    for name in names:
        color = method_color(name)
        if color in used:
            free = [c for c in PALETTE if c not in used]
            color = free[0] if free else color
        used.add(color)
        out[name] = color
    return out
