"""Scale presets: the ``SCALE`` notebook parameter resolved to a chapter's own preset.

Each chapter module defines its presets in one place, as frozen dataclasses keyed by scale::

    @dataclass(frozen=True)
    class BanditPreset:
        seeds: int
        iters: int

    PRESETS = {"smoke": BanditPreset(1, 40), "book": BanditPreset(5, 150), "gpu": BanditPreset(10, 150)}

    def preset(scale="book"):
        return preset_for(PRESETS, scale)

The environment variable ``ICML26_SCALE`` overrides the notebook's value for a whole build
(the runner sets it, so a notebook run by hand and one run by the runner agree).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeVar

SCALES = ("smoke", "book", "gpu")

T = TypeVar("T")


class ScaleError(ValueError):
    """An unknown scale name."""


def resolve_scale(scale: str | None = None) -> str:
    """The scale in force: ``ICML26_SCALE`` if set, else ``scale``, else ``'book'``. Validated."""
    env = os.environ.get("ICML26_SCALE")
    chosen = env if env else (scale if scale is not None else "book")
    if not isinstance(chosen, str):
        raise TypeError(f"scale must be a string, one of {SCALES}, got {type(chosen).__name__}")
    if chosen not in SCALES:
        source = "ICML26_SCALE" if env else "scale"
        raise ScaleError(f"{source} must be one of {', '.join(SCALES)}; got {chosen!r}")
    return chosen


def preset_for(presets: Mapping[str, T], scale: str | None = None) -> T:
    """Look up the preset for ``scale`` (after :func:`resolve_scale`) in a chapter's table."""
    name = resolve_scale(scale)
    missing = [s for s in SCALES if s not in presets]
    if missing:
        raise ValueError(f"presets must define every scale {SCALES}; missing {missing}")
    return presets[name]
