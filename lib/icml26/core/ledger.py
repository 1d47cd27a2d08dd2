"""The claims ledger: what the paper reports, what this run measured, and whether it holds.

A notebook records each claim once, shows the ledger as a table ("paper vs this book"),
saves it as JSON (the book's "Reproduction ledger" page collects every chapter's file), and
finally calls :meth:`Ledger.assert_all`, which fails the notebook naming every claim that
does not hold.

Claims are of two kinds:

- **checked** (:meth:`Ledger.check`): a measured value against a bar (``">=", 0.02``); asserted
  at the scales listed in ``assert_at``. Statistical claims that tutorial ``smoke`` scale cannot
  show pass ``assert_at=("book", "gpu")``: at smoke they are recorded with status
  ``"not asserted"`` and never fail the run.
- **reported** (:meth:`Ledger.report`): a number shown for comparison only, never asserted.

A measured value must be finite: NaN or an infinity raises :class:`ValueError` naming the claim
(a diverged run must not pass, or be shown, as a number).

**Dry runs** (``ICML26_DRY=1`` at scale ``gpu``, see :mod:`icml26.core.scale`): loop counts are cut,
so the numbers mean nothing. Claims are recorded with status ``"dry run"`` and nothing is
asserted: :meth:`Ledger.assert_all` saves the ledger and returns, non-finite values included.
"""

from __future__ import annotations

import json
import math
import operator
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .scale import SCALES, dry_run_enabled, resolve_scale

_OPS = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
}


class ClaimFailed(AssertionError):
    """Raised by :meth:`Ledger.assert_all` when a checked claim does not hold."""


@dataclass
class Claim:
    """One row of the ledger."""

    name: str
    paper: str
    measured: float | str
    bar: str
    status: str  # "holds", "fails", "not asserted", "reported", "dry run"
    scale: str
    chapter: str
    notebook: str
    note: str = ""
    volatile: bool = False  # a timing or other run-to-run number: hidden from to_text()
    unit: str = ""  # of the measured value and the bar ("s", "%", "x"); shown in the tables

    @property
    def failed(self) -> bool:
        return self.status == "fails"


def _as_number(value) -> float | str:
    if isinstance(value, bool):
        return float(value)
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        value = value.item()
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"measured must be a number or a string, got {type(value).__name__}")


def _fmt(value: float | str, digits: int) -> str:
    if isinstance(value, str):
        return value
    if math.isnan(value):
        return "nan"
    if value != 0 and (abs(value) >= 10 ** (digits + 2) or abs(value) < 10 ** (-digits)):
        return f"{value:.{digits}g}"
    return f"{value:.{digits}f}"


def default_ledger_dir() -> Path:
    """``ICML26_LEDGER_DIR`` if set, else ``_build/ledger`` at the book's root (found by ``_toc.yml``)."""
    env = os.environ.get("ICML26_LEDGER_DIR")
    if env:
        return Path(env)
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").exists():
            return folder / "_build" / "ledger"
    return here / "_build" / "ledger"


@dataclass
class Ledger:
    """Claims of one notebook.

    >>> ledger = Ledger("demo", "01-intro", scale="smoke")
    >>> ledger.check("speed-up", 12.0, ">=", 2.0, paper="batched beats loops") .status
    'holds'
    """

    chapter: str
    notebook: str
    scale: str | None = None
    digits: int = 3
    claims: list[Claim] = field(default_factory=list)
    dry: bool | None = None  # None: a dry run when ICML26_DRY is set and the scale is gpu

    def __post_init__(self):
        for arg in ("chapter", "notebook"):
            value = getattr(self, arg)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{arg} must be a non-empty string, got {value!r}")
        self.scale = resolve_scale(self.scale)
        if self.dry is None:
            self.dry = self.scale == "gpu" and dry_run_enabled()

    def _finite(self, name: str, value: float | str, what: str = "measured") -> None:
        if isinstance(value, float) and not math.isfinite(value) and not self.dry:
            raise ValueError(f"claim {name!r}: {what} value is {value}, not a finite number "
                             f"(a diverged or empty computation?)")

    def _status(self, holds: bool, assert_at: tuple[str, ...]) -> str:
        if self.dry:
            return "dry run"
        if holds:
            return "holds"
        return "fails" if self.scale in assert_at else "not asserted"

    # -- recording -----------------------------------------------------------------------------
    def _add(self, claim: Claim) -> Claim:
        if any(c.name == claim.name for c in self.claims):
            raise ValueError(f"name: claim {claim.name!r} is already in the ledger")
        self.claims.append(claim)
        return claim

    def check(self, name: str, measured, op: str, threshold, *, paper: str = "",
              assert_at: tuple[str, ...] = SCALES, note: str = "", volatile: bool = False,
              unit: str = "") -> Claim:
        """Record a checked claim: ``measured <op> threshold``. Returns the :class:`Claim`.

        ``volatile=True`` marks a number that differs between runs (a timing): the text table
        shows ``(varies)`` instead, so that output-checked cells stay stable.
        """
        if op not in _OPS:
            raise ValueError(f"op must be one of {sorted(_OPS)}, got {op!r}")
        bad = [s for s in assert_at if s not in SCALES]
        if bad:
            raise ValueError(f"assert_at must hold scales from {SCALES}, got {bad}")
        value = _as_number(measured)
        if isinstance(value, str):
            raise TypeError(f"measured must be a number for a checked claim, got {measured!r}")
        self._finite(name, value)
        limit = float(_as_number(threshold))
        if math.isnan(limit):
            raise ValueError(f"claim {name!r}: threshold is nan")
        holds = math.isfinite(value) and bool(_OPS[op](value, limit))
        status = self._status(holds, assert_at)
        bar = f"{op} {_fmt(limit, self.digits)}"
        return self._add(Claim(name, paper, value, bar, status, self.scale, self.chapter, self.notebook, note,
                               volatile, unit=unit))

    def check_true(self, name: str, holds: bool, *, paper: str = "", measured: str = "",
                   assert_at: tuple[str, ...] = SCALES, note: str = "") -> Claim:
        """Record a yes/no claim (an identity, an ordering). ``measured`` describes what was seen."""
        holds = bool(holds)
        status = self._status(holds, assert_at)
        text = measured or ("yes" if holds else "no")
        return self._add(Claim(name, paper, text, "true", status, self.scale, self.chapter, self.notebook, note))

    def report(self, name: str, measured, *, paper: str = "", note: str = "", volatile: bool = False,
               unit: str = "") -> Claim:
        """Record a number shown for comparison only (never asserted)."""
        value = _as_number(measured)
        self._finite(name, value)
        return self._add(Claim(name, paper, value, "-", "reported", self.scale, self.chapter, self.notebook, note,
                               volatile, unit=unit))

    # -- showing and saving --------------------------------------------------------------------
    def rows(self, hide_volatile: bool = False) -> list[dict[str, str]]:
        return [
            {
                "claim": c.name,
                "paper": c.paper,
                "this book": "(varies)" if (hide_volatile and c.volatile)
                else (_fmt(c.measured, self.digits) + (f" {c.unit}" if c.unit else "")),
                "bar": c.bar + (f" {c.unit}" if c.unit and c.bar not in ("-", "true") else ""),
                "status": c.status,
            }
            for c in self.claims
        ]

    def table(self):
        """The claims as the book's HTML table (no index, status badges; see
        :class:`icml26.core.tables.ClaimsTable`); ``.frame`` gives a ``pandas.DataFrame``."""
        from .tables import ClaimsTable

        return ClaimsTable(self)

    def to_text(self) -> str:
        """Fixed-width text table: stable across runs, so output-checked cells can print it."""
        rows = self.rows(hide_volatile=True)
        cols = ["claim", "paper", "this book", "bar", "status"]
        widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in cols}
        line = "  ".join(c.ljust(widths[c]) for c in cols)
        dry = " (dry run: loop counts cut, nothing asserted)" if self.dry else ""
        out = [f"claims of {self.chapter}/{self.notebook} at scale {self.scale}{dry}", line, "-" * len(line)]
        out += ["  ".join(r[c].ljust(widths[c]) for c in cols).rstrip() for r in rows]
        return "\n".join(out)

    def show(self) -> None:
        """Print :meth:`to_text` (use in a cell marked ``# NBVAL_CHECK_OUTPUT``)."""
        print(self.to_text())

    def save(self, folder: str | os.PathLike | None = None) -> Path:
        """Write the claims as JSON to ``folder/<chapter>--<notebook>.json``; returns the path."""
        folder = Path(folder) if folder is not None else default_ledger_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.chapter}--{self.notebook}.json"
        payload = {
            "chapter": self.chapter,
            "notebook": self.notebook,
            "scale": self.scale,
            "dry_run": bool(self.dry),
            "claims": [asdict(c) for c in self.claims],
        }
        path.write_text(json.dumps(payload, indent=1))
        return path

    @property
    def failures(self) -> list[Claim]:
        return [c for c in self.claims if c.failed]

    def assert_all(self, save: bool = True) -> None:
        """Save the ledger, then raise :class:`ClaimFailed` listing every claim that does not hold."""
        if save:
            self.save()
        failed = self.failures
        if failed:
            lines = [f"{len(failed)} claim(s) of {self.chapter}/{self.notebook} do not hold at scale {self.scale}:"]
            lines += [
                f"  - {c.name}: measured {_fmt(c.measured, self.digits)}, needed {c.bar}"
                + (f" (paper: {c.paper})" if c.paper else "")
                for c in failed
            ]
            raise ClaimFailed("\n".join(lines))
