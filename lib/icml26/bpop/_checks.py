"""Input checks of the bpop presets (the validation helpers of the method live in :mod:`.method`)."""

from __future__ import annotations

from ..core.checks import check_preset  # noqa: F401 (re-exported for the presets)


