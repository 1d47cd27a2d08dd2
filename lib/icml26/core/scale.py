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

**Dry runs of the gpu scale.** With ``ICML26_DRY=1`` the ``gpu`` preset is passed through its
``dry_run()`` method before it is returned. Every preset class defines ``dry_run(self)``: a copy
with loop counts cut (steps, rounds, epochs, seeds, evaluation repeats) and every *size* kept
(widths, vocabularies, client counts, sequence lengths, batch sizes), so that a CPU executes each
notebook's code paths at the gpu configuration in seconds and shape or configuration errors
surface in CI (``make gpu-dry``). Claims are not asserted in a dry run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeVar

SCALES = ("smoke", "book", "gpu")
DRY_ENV = "ICML26_DRY"

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
    chosen = presets[name]
    if name == "gpu" and dry_run_enabled():
        cut = getattr(chosen, "dry_run", None)
        if not callable(cut):
            raise TypeError(f"{type(chosen).__name__} has no dry_run() method; every preset class must "
                            f"define one for {DRY_ENV}=1 (see icml26.core.scale)")
        chosen = cut()
    return chosen


def dry_run_enabled() -> bool:
    """True when ``ICML26_DRY`` asks for a dry run of the gpu scale (loop counts cut, sizes kept)."""
    return os.environ.get(DRY_ENV, "").strip().lower() not in ("", "0", "false", "no")
