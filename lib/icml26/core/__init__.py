"""The shared core every chapter uses.

- :func:`device`, :func:`seed_all`, :func:`set_threads`, :class:`one_thread`: where and how
  reproducibly things run.
- :func:`resolve_scale`, :func:`preset_for`: the ``SCALE`` parameter (``smoke``, ``book``, ``gpu``).
- :class:`Timer`, :func:`time_fn`, :class:`PeakMemory`, :func:`count_flops`: meters.
- :class:`Ledger`: the claims ledger ("paper vs this book").
- :func:`use_book_style`, :func:`method_color`: one plot style for the whole book.
- :func:`report`: glue a computed number into the prose.
- :func:`fingerprint`, :func:`setup`: what a notebook's setup cell prints.
- :func:`bootstrap_mean`: the bootstrap interval of a mean (or of paired differences).
- :func:`adamw_flat`, :func:`flatten_params`: AdamW over one flat buffer of a model's weights.
- :class:`Grid`, :func:`tune`, :class:`Comparison`, :func:`paired_init`: the fair-comparison protocol
  (tuning on validation data with equal grids, paired training seeds, costs, a control row);
  record its claims with :meth:`Ledger.compare`.
"""

from .compare import MIN_SEEDS, Comparison, Grid, ProtocolError, Tuned, paired_init, t_interval, tune
from .device import device, one_thread, seed_all, set_threads
from .env import fingerprint, fingerprint_line, setup
from .glue import report
from .ledger import Claim, ClaimFailed, Ledger
from .meters import PeakMemory, Timer, count_flops, synchronize, time_fn
from .optim import adamw_flat, flatten_params
from .scale import DRY_ENV, SCALES, ScaleError, dry_run_enabled, preset_for, resolve_scale
from .stats import bootstrap_mean
from .style import method_color, method_colors, use_book_style

__all__ = [
    "DRY_ENV",
    "SCALES",
    "MIN_SEEDS",
    "Claim",
    "adamw_flat",
    "flatten_params",
    "Comparison",
    "Grid",
    "ProtocolError",
    "Tuned",
    "paired_init",
    "t_interval",
    "tune",
    "ClaimFailed",
    "Ledger",
    "PeakMemory",
    "ScaleError",
    "Timer",
    "bootstrap_mean",
    "count_flops",
    "device",
    "dry_run_enabled",
    "fingerprint",
    "fingerprint_line",
    "method_color",
    "method_colors",
    "one_thread",
    "preset_for",
    "report",
    "resolve_scale",
    "seed_all",
    "set_threads",
    "setup",
    "synchronize",
    "time_fn",
    "use_book_style",
]
