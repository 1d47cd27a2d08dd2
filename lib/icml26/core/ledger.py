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
- **identities** (:meth:`Ledger.identity`): a check of the implementation (an exact property, a
  cross-check against a reference library, something true by construction); asserted at every
  scale, shown, and counted apart from the claims about the paper.
- **settings** (:meth:`Ledger.setting`): configuration worth printing beside the claims (seeds,
  parameter counts); not a claim, never counted.

A claim asserted only at ``gpu`` is, at any other scale, recorded with its own status
``"not yet run at gpu"``: never shown as holding, never counted as evidence, until a gpu run's
ledger replaces it.
- **comparisons** (:meth:`Ledger.compare`): "A beats B" read from an
  :class:`icml26.core.compare.Comparison` (methods tuned on validation data, paired training seeds,
  costs, a control row). The claim stores the protocol; where it is asserted, a protocol fault
  (too few seeds, an untuned or less-tuned baseline, an unstated grid edge, a missing cost or
  control row) makes it fail, whatever the measured value.

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

import numpy as np

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
    status: str  # "holds", "fails", "not asserted", "not yet run at gpu", "reported", "setting", "dry run"
    scale: str
    chapter: str
    notebook: str
    note: str = ""
    volatile: bool = False  # a timing or other run-to-run number: hidden from to_text()
    unit: str = ""  # of the measured value and the bar ("s", "%", "x"); shown in the tables
    kind: str = "check"  # "check", "comparison", "identity", "report" or "setting"
    protocol: dict | None = None  # a comparison's protocol (see icml26.core.compare.Comparison.protocol)
    assert_at: tuple = ()  # the scales at which a checked claim is asserted (empty for reports and settings)

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


def _as_bool(name: str, value) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if hasattr(value, "dtype") and hasattr(value, "numel") and value.numel() == 1 and "bool" in str(value.dtype):
        return bool(value)
    raise TypeError(f"claim {name!r}: holds must be a boolean, got {type(value).__name__} {value!r:.40}")


def _fmt(value: float | str, digits: int) -> str:
    if isinstance(value, str):
        return value
    if math.isnan(value):
        return "nan"
    if value != 0 and (abs(value) >= 10 ** (digits + 2) or abs(value) < 10 ** (-digits)):
        return f"{value:.{digits}g}"
    return f"{value:.{digits}f}"


def _published_text(claim: dict | None, digits: int, hide_volatile: bool) -> str:
    """A published claim's value as the claims table prints it ("-" when the book has none)."""
    if not claim or claim.get("measured") is None:
        return "-"
    if hide_volatile and claim.get("volatile"):
        return "(varies)"
    unit = claim.get("unit") or ""
    return _fmt(claim["measured"], digits) + (f" {unit}" if unit else "")


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
        elif not isinstance(self.dry, bool):
            raise TypeError(f"dry must be True, False or None, got {self.dry!r}")
        elif self.dry and self.scale != "gpu":
            raise ValueError(f"dry: only the gpu scale has dry runs (loop counts cut), not scale {self.scale!r}")

    def _finite(self, name: str, value: float | str, what: str = "measured") -> None:
        if isinstance(value, float) and not math.isfinite(value) and not self.dry:
            raise ValueError(f"claim {name!r}: {what} value is {value}, not a finite number "
                             f"(a diverged or empty computation?)")

    def _status(self, holds: bool, assert_at: tuple[str, ...]) -> str:
        if self.dry:
            return "dry run"
        if self.scale not in assert_at and assert_at == ("gpu",):
            return "not yet run at gpu"
        if holds:
            return "holds"
        return "fails" if self.scale in assert_at else "not asserted"

    @staticmethod
    def _assert_at(assert_at) -> tuple[str, ...]:
        if isinstance(assert_at, str) or not isinstance(assert_at, (tuple, list)):
            raise TypeError(f"assert_at must be a tuple of scales, got {assert_at!r}")
        bad = [s for s in assert_at if s not in SCALES]
        if bad:
            raise ValueError(f"assert_at must hold scales from {SCALES}, got {bad}")
        if not assert_at:
            raise ValueError("assert_at: a claim asserted at no scale is a report; use Ledger.report")
        return tuple(s for s in SCALES if s in assert_at)

    @staticmethod
    def _threshold(name: str, threshold) -> float:
        """A bar must be a finite number: an infinite or non-numeric bar cannot be missed."""
        if isinstance(threshold, bool) or isinstance(threshold, str) or threshold is None:
            raise TypeError(f"claim {name!r}: threshold must be a finite number, got {threshold!r}")
        if hasattr(threshold, "item") and callable(threshold.item):
            threshold = threshold.item()
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool):
            raise TypeError(f"claim {name!r}: threshold must be a finite number, got {type(threshold).__name__}")
        if not math.isfinite(threshold):
            raise ValueError(f"claim {name!r}: threshold is {threshold}, not a finite number (a bar that "
                             f"cannot be missed)")
        return float(threshold)

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
        assert_at = self._assert_at(assert_at)
        value = _as_number(measured)
        if isinstance(value, str):
            raise TypeError(f"measured must be a number for a checked claim, got {measured!r}")
        self._finite(name, value)
        limit = self._threshold(name, threshold)
        holds = math.isfinite(value) and bool(_OPS[op](value, limit))
        status = self._status(holds, assert_at)
        bar = f"{op} {_fmt(limit, self.digits)}"
        return self._add(Claim(name, paper, value, bar, status, self.scale, self.chapter, self.notebook, note,
                               volatile, unit=unit, assert_at=assert_at))

    def check_true(self, name: str, holds: bool, *, paper: str = "", measured: str = "",
                   assert_at: tuple[str, ...] = SCALES, note: str = "") -> Claim:
        """Record a yes/no claim (an identity, an ordering). ``measured`` describes what was seen.
        ``holds`` must be a real boolean (``bool``, a numpy or 0-d torch boolean): a string, a list
        or a function is always truthy and would make a claim that cannot fail."""
        holds = _as_bool(name, holds)
        assert_at = self._assert_at(assert_at)
        status = self._status(holds, assert_at)
        text = measured or ("yes" if holds else "no")
        return self._add(Claim(name, paper, text, "true", status, self.scale, self.chapter, self.notebook, note,
                               assert_at=assert_at))

    def identity(self, name: str, measured, op: str, threshold, *, paper: str = "", note: str = "",
                 unit: str = "") -> Claim:
        """Record a check of the implementation (an exact identity, agreement with a reference
        library, a property true by construction): asserted at every scale like :meth:`check`, but
        counted apart from the paper's claims on the ledger page."""
        claim = self.check(name, measured, op, threshold, paper=paper, note=note, unit=unit)
        claim.kind = "identity"
        return claim

    def identity_true(self, name: str, holds, *, paper: str = "", measured: str = "", note: str = "") -> Claim:
        """A yes/no :meth:`identity` (asserted at every scale, counted apart)."""
        claim = self.check_true(name, holds, paper=paper, measured=measured, note=note)
        claim.kind = "identity"
        return claim

    def setting(self, name: str, value, *, paper: str = "", note: str = "", unit: str = "") -> Claim:
        """Record configuration shown beside the claims (a seed count, a parameter budget): not a
        claim, never asserted, never counted."""
        claim = self.report(name, value, paper=paper, note=note, unit=unit)
        claim.kind, claim.status, claim.bar = "setting", "setting", "-"
        return claim

    def report(self, name: str, measured, *, paper: str = "", note: str = "", volatile: bool = False,
               unit: str = "") -> Claim:
        """Record a number shown for comparison only (never asserted)."""
        value = _as_number(measured)
        self._finite(name, value)
        return self._add(Claim(name, paper, value, "-", "reported", self.scale, self.chapter, self.notebook, note,
                               volatile, unit=unit, kind="report"))

    def compare(self, name: str, comparison, a: str, b: str, op: str | None = None, threshold=None, *,
                stat: str = "difference", on: str = "mean", paper: str = "",
                assert_at: tuple[str, ...] = ("book", "gpu"), note: str = "", unit: str = "") -> Claim:
        """Record "``a`` against ``b``" from a :class:`~icml26.core.compare.Comparison`.

        The measured value is the paired ``stat`` (``"difference"`` a - b or ``"ratio"`` a / b) over
        the comparison's training seeds: its ``on="mean"``, or the interval's ``"lo"`` / ``"hi"`` end
        (``on="lo"`` with ``">", 0`` asserts that the whole interval lies above zero). With ``op``
        left out the claim is reported, not asserted. The protocol (seeds, pairing, chosen
        configuration and grid size per method, edges, costs, control row) is stored with the claim
        and printed under the table; where the claim is asserted, a protocol fault fails it.
        """
        from .compare import Comparison

        if not isinstance(comparison, Comparison):
            raise TypeError(f"comparison must be an icml26.core.compare.Comparison, got {type(comparison).__name__}")
        if on not in ("mean", "lo", "hi"):
            raise ValueError(f"on must be 'mean', 'lo' or 'hi', got {on!r}")
        d = comparison.diff(a, b, stat)
        value = {"mean": d.mean, "lo": d.lo, "hi": d.hi}[on]
        protocol = comparison.protocol([a, b])
        protocol.update(claim={"a": a, "b": b, "stat": stat, "on": on, "mean": d.mean, "lo": d.lo, "hi": d.hi,
                               "wins": d.wins, "n": d.n})
        problems = comparison.problems([a, b], scale=self.scale)
        protocol["problems"] = problems
        summary = ({"lo": "measured: the interval's lower end; ", "hi": "measured: the interval's upper end; "}.get(on, "")
                   + f"{a} {'-' if stat == 'difference' else '/'} {b}: {_fmt(d.mean, self.digits)} "
                   f"[{_fmt(d.lo, self.digits)}, {_fmt(d.hi, self.digits)}] over {d.n} paired seeds, "
                   f"{a} better on {d.wins}")
        note = "; ".join(x for x in (note, summary, *(f"protocol: {p}" for p in problems)) if x)
        if op is None:
            if threshold is not None:
                raise ValueError("threshold: give op with a threshold (or neither, for a reported comparison)")
            claim = self.report(name, value, paper=paper, note=note, unit=unit)
        else:
            claim = self.check(name, value, op, threshold, paper=paper, assert_at=assert_at, note=note, unit=unit)
            if problems and not self.dry and self.scale in assert_at:
                claim.status = "fails"
        claim.kind, claim.protocol = "comparison", protocol
        return claim

    # -- showing and saving --------------------------------------------------------------------
    def published(self) -> dict[str, dict]:
        """The book's published value of each claim (``{name: published claim}``), shown beside the
        reader's when a notebook runs **outside** the book's own build (the runner sets
        ``ICML26_LEDGER_DIR``; inside it the table is the book's, so this is empty). Read from the
        package copy of the published ledger (:func:`icml26.book.verify.published_values`); empty
        when nothing is published for this notebook and scale, or on a dry run."""
        if os.environ.get("ICML26_LEDGER_DIR") or self.dry:
            return {}
        try:
            from ..book.verify import published_values
        except ImportError:  # pragma: no cover - the book's runner is optional for the package
            return {}
        try:
            return published_values(self.chapter, self.notebook, self.scale)
        except (OSError, ValueError):
            return {}

    def rows(self, hide_volatile: bool = False, published: dict[str, dict] | None = None) -> list[dict[str, str]]:
        """One dict per claim (claim, paper, this book, bar, status); with ``published`` (see
        :meth:`published`) a column "book's value" beside the reader's."""
        rows = []
        for c in self.claims:
            row = {"claim": c.name, "paper": c.paper,
                   "this book": "(varies)" if (hide_volatile and c.volatile)
                   else (_fmt(c.measured, self.digits) + (f" {c.unit}" if c.unit else ""))}
            if published:
                row["book's value"] = _published_text(published.get(c.name), self.digits, hide_volatile)
            row["bar"] = c.bar + (f" {c.unit}" if c.unit and c.bar not in ("-", "true") else "")
            row["status"] = c.status
            rows.append(row)
        return rows

    def table(self):
        """The claims as the book's HTML table (no index, status badges; see
        :class:`icml26.core.tables.ClaimsTable`); ``.frame`` gives a ``pandas.DataFrame``."""
        from .tables import ClaimsTable

        return ClaimsTable(self)

    def to_text(self) -> str:
        """Fixed-width text table: stable across runs, so output-checked cells can print it."""
        rows = self.rows(hide_volatile=True, published=self.published())
        cols = list(rows[0]) if rows else ["claim", "paper", "this book", "bar", "status"]
        widths = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in cols}
        line = "  ".join(c.ljust(widths[c]) for c in cols)
        dry = " (dry run: loop counts cut, nothing asserted)" if self.dry else ""
        out = [f"claims of {self.chapter}/{self.notebook} at scale {self.scale}{dry}", line, "-" * len(line)]
        out += ["  ".join(r[c].ljust(widths[c]) for c in cols).rstrip() for r in rows]
        from .compare import protocol_lines

        for c in self.claims:
            if c.protocol is not None:
                out += protocol_lines(c.name, c.protocol, hide_cost=True)
                out += [f"  protocol fault: {p}" for p in c.protocol.get("problems", [])]
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
                + "".join(f"; protocol: {p}" for p in ((c.protocol or {}).get("problems") or []))
                for c in failed
            ]
            raise ClaimFailed("\n".join(lines))
