"""Did my run reproduce the book? Published ledgers, ``verify`` and ``import-ledger``.

**The published ledger.** Every build writes, per chapter and scale, one JSON file into the site
(``_static/ledger/<scale>/<chapter>.json``, linked from the ledger page and each chapter) and into
the package (``lib/icml26/ledgers/<scale>/<chapter>.json``, the copy that works offline). Each
claim carries its id (``<chapter>/<notebook>/<name>``), name, kind, measured value, unit, bar,
status and scale, its **nature** and the **spread expected between runs** (:func:`expected_spread`):

=================  ===============================================================================
nature             spread
=================  ===============================================================================
``statistical``    a comparison (``Ledger.compare``): half the width of the interval over paired
                   seeds that the notebook measured (``protocol["claim"]["lo"/"hi"]``); any other
                   check or report: :data:`DEFAULT_SPREAD` (10 %) of the larger of its value and its
                   bar, the declared tolerance of a seeded number without a measured interval
``deterministic``  identities (``Ledger.identity``), yes/no claims, settings, checks asserted at
                   smoke when the ledger records ``assert_at``, and checks ``error <= t`` with
                   ``t <=`` :data:`ROUND_BAR` (exact properties): a round-off tolerance,
                   :data:`ROUND_REL` relative plus :data:`ROUND_ABS`; for such a claim bounded above
                   (``<= t``), ``t`` itself: the value is an error made of round-off, whose size
                   depends on the machine, and the bar is the author's statement of how large it
                   may get
``timing``         ``volatile`` numbers (wall seconds): only the bar is compared
=================  ===============================================================================

**Verdicts** (:func:`verdict`), per claim, the reader's value against the book's: ``reproduced``
(equal up to round-off), ``within noise`` (statistical, at most :data:`NOISE_SPREADS` spreads
apart; a timing that meets its bar), ``differs`` (further apart, or a deterministic value beyond
its tolerance), ``bar missed`` (the reader's run fails a claim asserted at that scale), and
``no book value`` / ``not in your run`` when one side lacks the claim. ``verify`` exits non-zero
when a claim asserted at that scale fails, a deterministic value differs, or a chapter's run
recorded no claim at all.

**Reports.** ``python -m icml26.book verify`` writes ``verify-<chapter>-<scale>.md`` (to attach to
an issue) and ``.json`` (the reader's claims in full, the environment fingerprint, the content
hash of every notebook it ran). ``python -m icml26.book import-ledger REPORT`` accepts a gpu
report whose notebooks hash like this checkout's: it writes the package copy of the chapter's gpu
ledger (the build publishes it, naming the report's device on the ledger page) and the gpu column
of ``data/timings.json``.
"""

from __future__ import annotations

import html
import json
import math
import os
import platform
import re
import urllib.request
from datetime import date
from pathlib import Path

from .sources import PACKAGE_DIR, BookError, Notebook, content_hash

FORMAT = "icml26-ledger/1"
REPORT_FORMAT = "icml26-verify/1"
DEFAULT_SPREAD = 0.10
ROUND_REL, ROUND_ABS = 1e-6, 1e-12
ROUND_BAR = 1e-6  # a check "error <= t" with t at most this is an exact property
NOISE_SPREADS = 3.0  # two runs each carry the spread, and a spread over five seeds is itself uncertain
VERDICTS = ("reproduced", "within noise", "differs", "bar missed", "no book value", "not in your run")
_UPPER = ("<", "<=")


# -- the spread expected between runs -------------------------------------------------------------
def _threshold(bar: str) -> tuple[str, float | None]:
    parts = str(bar).split()
    if len(parts) == 2:
        try:
            return parts[0], float(parts[1])
        except ValueError:
            pass
    return (parts[0] if parts else ""), None


def expected_spread(claim: dict) -> tuple[str, float | None, str]:
    """``(nature, spread, why)`` of one ledger claim (see the module docstring). ``spread`` is
    None for a yes/no or text claim and for a timing (only the bar counts)."""
    if not isinstance(claim, dict) or "measured" not in claim:
        raise TypeError(f"claim must be a ledger claim (a dict with 'measured'), got {type(claim).__name__}")
    kind, value = claim.get("kind", "check"), claim["measured"]
    op, limit = _threshold(claim.get("bar", ""))
    if claim.get("volatile"):
        return "timing", None, "a timing: machine-dependent, only its bar is compared"
    if isinstance(value, str):
        return "deterministic", None, "a yes/no or text value: compared exactly"
    if kind == "setting":
        return "deterministic", ROUND_REL * abs(value) + ROUND_ABS, "a setting: compared exactly"
    interval = ((claim.get("protocol") or {}).get("claim") or {})
    lo, hi = interval.get("lo"), interval.get("hi")
    if kind == "comparison" and isinstance(lo, (int, float)) and isinstance(hi, (int, float)) \
            and math.isfinite(lo) and math.isfinite(hi) and hi > lo:
        return "statistical", (hi - lo) / 2, f"half-width of the interval over {interval.get('n', '?')} paired seeds"
    # an exact property: an identity, a check asserted at smoke (where the ledger records
    # assert_at), or a check whose bar bounds an error by at most ROUND_BAR (round-off by design)
    exact = kind == "identity" or "smoke" in (claim.get("assert_at") or ()) or (
        op in _UPPER and limit is not None and 0 < limit <= ROUND_BAR)
    if exact:
        if op in _UPPER and limit is not None and limit > 0:
            return "deterministic", limit, "round-off: an error bounded by its bar"
        return "deterministic", ROUND_REL * abs(value) + ROUND_ABS, "round-off"
    base = max(abs(value), abs(limit) if limit is not None else 0.0)
    return "statistical", max(DEFAULT_SPREAD * base, ROUND_ABS), f"declared tolerance ({DEFAULT_SPREAD:.0%})"


def verdict(book: dict | None, theirs: dict | None) -> dict:
    """Compare one claim of the reader's run with the book's: ``{verdict, nature, spread, diff, z,
    fails}`` (``fails``: counts against the exit status)."""
    if theirs is None:
        return {"verdict": "not in your run", "nature": "", "spread": None, "diff": None, "z": None, "fails": False}
    measured = theirs["measured"]
    no_book = book is None or book.get("status") in ("not yet run at gpu", "dry run")
    nature, spread, _ = expected_spread(theirs if no_book else book)
    out = {"nature": nature, "spread": spread, "diff": None, "z": None, "fails": False}
    if theirs.get("status") == "fails":
        return {**out, "verdict": "bar missed", "fails": True}
    if no_book:
        return {**out, "verdict": "no book value"}
    theirs_value, book_value = measured, book["measured"]
    if isinstance(book_value, str) or isinstance(theirs_value, str):
        same = str(book_value) == str(theirs_value) and book.get("status") == theirs.get("status")
        return {**out, "verdict": "reproduced" if same else "differs", "fails": not same and nature == "deterministic"}
    diff = float(theirs_value) - float(book_value)
    out["diff"] = diff
    if spread:
        out["z"] = abs(diff) / spread
    if nature == "timing":
        return {**out, "verdict": "within noise"}
    if abs(diff) <= ROUND_REL * abs(book_value) + ROUND_ABS:
        return {**out, "verdict": "reproduced"}
    if nature == "deterministic":
        if spread is not None and abs(diff) <= spread:
            return {**out, "verdict": "reproduced"}
        return {**out, "verdict": "differs", "fails": True}
    if spread is not None and abs(diff) <= NOISE_SPREADS * spread:
        return {**out, "verdict": "within noise"}
    return {**out, "verdict": "differs"}


# -- the published ledger -------------------------------------------------------------------------
def published_dir(root: Path) -> Path:
    """Where this checkout keeps the package copy: ``lib/icml26/ledgers`` under ``root``."""
    return Path(root) / "lib" / "icml26" / "ledgers"


def claim_id(chapter: str, notebook: str, name: str) -> str:
    return f"{chapter}/{notebook}/{name}"


def _published_claim(claim: dict, chapter: str, notebook: str) -> dict:
    nature, spread, why = expected_spread(claim)
    keep = ("name", "kind", "measured", "unit", "bar", "status", "scale", "paper", "volatile", "note")
    out = {"id": claim_id(chapter, notebook, claim["name"]), "notebook": notebook,
           **{k: claim.get(k) for k in keep}, "nature": nature, "spread": spread, "spread_from": why}
    if claim.get("protocol"):
        out["interval"] = {k: claim["protocol"].get("claim", {}).get(k) for k in ("mean", "lo", "hi", "n")}
    return out


def chapter_ledger(root: Path, chapter: str, scale: str, notebooks: list[Notebook]) -> dict | None:
    """The published ledger of one chapter at ``scale`` from this checkout's runs: only notebooks
    whose run is current (see :func:`icml26.book.execute.publish_problem`) count; None when none has
    a ledger."""
    from .execute import ledger_dir, publish_problem

    claims, hashes = [], {}
    for nb in notebooks:
        problem = publish_problem(root, nb, scale)
        if problem and not problem.startswith("its run failed"):
            continue
        files = sorted(ledger_dir(root, nb, scale).glob("*.json"))
        if not files:
            continue
        stem = nb.path.stem
        dry = False
        for file in files:
            payload = json.loads(file.read_text())
            dry |= bool(payload.get("dry_run"))
            claims += [_published_claim(c, chapter, stem) for c in payload["claims"]]
        hashes[stem] = {"content_hash": content_hash(nb, scale), "dry_run": dry}
    if not hashes:
        return None
    return {"format": FORMAT, "chapter": chapter, "scale": scale, "source": {"kind": "build"},
            "notebooks": hashes, "claims": claims}


def load_published(chapter: str, scale: str, against: str | os.PathLike | None = None,
                   root: Path | None = None) -> dict | None:
    """The book's published ledger of ``chapter`` at ``scale``: from ``against`` (a folder or a URL
    holding ``<scale>/<chapter>.json``, as the site's ``_static/ledger``) when given, else the
    package copy (this checkout's ``lib/icml26/ledgers``, else the installed package's). None when
    there is none. A URL that cannot be read falls back to the package copy, saying so."""
    rel = f"{scale}/{chapter}.json"
    if against is not None:
        text = str(against)
        if re.match(r"^https?://", text):
            try:
                with urllib.request.urlopen(text.rstrip("/") + "/" + rel, timeout=20) as response:
                    return json.loads(response.read().decode())
            except (OSError, ValueError) as exc:
                print(f"icml26.book: cannot read {text.rstrip('/')}/{rel} ({exc}); using the package copy")
        else:
            path = Path(text) / rel
            if not Path(text).is_dir():
                raise BookError(f"--against: no such folder {text}")
            return json.loads(path.read_text()) if path.exists() else None
    for folder in ([published_dir(root)] if root is not None else []) + [PACKAGE_DIR / "ledgers"]:
        if (folder / rel).exists():
            return json.loads((folder / rel).read_text())
    return None


def published_values(chapter: str, notebook: str, scale: str, against=None) -> dict[str, dict]:
    """``{claim name: published claim}`` of one notebook at ``scale`` (see :func:`load_published`):
    what a claims table run outside the book's build can show beside the reader's value. Empty
    when nothing is published."""
    from .sources import find_root

    try:
        root = find_root()
    except BookError:
        root = None
    ledger = load_published(chapter, scale, against, root=root) or {}
    return {c["name"]: c for c in ledger.get("claims", []) if c.get("notebook") == notebook}


def write_published(root: Path, scale: str, chapters: dict[str, list[Notebook]], site: Path | None = None,
                    *, package: bool = True) -> dict[str, dict]:
    """Write every chapter's published ledger at ``scale`` (from this checkout's runs) into the
    package copy and, with ``site``, into ``site/_static/ledger/<scale>/``. Package copies of other
    origins (an imported gpu report) are kept when this checkout has no run. Returns
    ``{chapter: ledger}``."""
    out = {}
    for chapter, notebooks in chapters.items():
        ledger = chapter_ledger(root, chapter, scale, notebooks)
        copy = published_dir(root) / scale / f"{chapter}.json"
        if ledger is None and copy.exists():
            ledger = json.loads(copy.read_text())
        elif ledger is not None and package:
            copy.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(ledger, indent=1) + "\n"
            if not copy.exists() or copy.read_text() != text:
                copy.write_text(text)
        if ledger is None:
            continue
        out[chapter] = ledger
        if site is not None:
            target = Path(site) / "_static" / "ledger" / scale / f"{chapter}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(ledger, indent=1) + "\n")
    return out


# -- the site --------------------------------------------------------------------------------------
def _links(scales: dict[str, dict[str, dict]], slug: str, prefix: str) -> str:
    found = [s for s in scales if slug in scales[s]]
    return " · ".join(f'<a href="{prefix}_static/ledger/{s}/{slug}.json">{s}</a>' for s in found)


def _imported_markdown(scales: dict[str, dict[str, dict]], titles: dict[str, str]) -> str:
    """The ledger page's section on evidence from readers' runs (imported reports)."""
    from .pages import plain_title

    rows = []
    for scale, ledgers in scales.items():
        for slug, ledger in ledgers.items():
            source = ledger.get("source") or {}
            if source.get("kind") != "import":
                continue
            for c in ledger["claims"]:
                if c.get("kind") == "setting":
                    continue
                value = c["measured"] if isinstance(c["measured"], str) else f"{c['measured']:.4g}"
                rows.append(f"| {plain_title(titles.get(slug, slug))} | {html.escape(c['name'])} | {value} "
                            f"{c.get('unit') or ''} | {c['bar']} | {c['status']} | {scale} | "
                            f"{html.escape(str(source.get('device', '?')))}, {source.get('date', '?')} |")
    if not rows:
        return ""
    head = ("\n\n## Evidence from readers' runs\n\nClaims measured by a reader's `verify` run and accepted "
            "with `python -m icml26.book import-ledger` (its notebooks hashed like the book's). Claims marked "
            "\"not yet run at gpu\" above are measured here.\n\n"
            "| chapter | claim | measured | bar | status | scale | device, date |\n|---|---|---|---|---|---|---|\n")
    return head + "\n".join(r.replace("\n", " ") for r in rows) + "\n"


def publish_site(root: Path, dest: Path, scale: str, echo=print) -> dict:
    """Everything issue 42 adds to a staged book (called once from :func:`icml26.book.site.stage`):
    the published ledgers of every scale under ``_static/ledger`` (the package copy of this
    build's scale refreshed), links to them on the ledger page and each chapter's page, the
    imported gpu evidence on the ledger page, and the student edition's zips with their table on
    "For teachers"."""
    from ..core.scale import SCALES
    from .pages import book_chapters
    from .student import chapter_notebooks, publish_student

    root, dest = Path(root), Path(dest)
    chapters = chapter_notebooks(root)
    scales = {s: write_published(root, s, chapters, dest, package=(s == scale)) for s in SCALES}
    scales = {s: v for s, v in scales.items() if v}
    titles = {c.slug: c.title for c in book_chapters(root)}
    index = {"format": FORMAT, "scales": {s: sorted(v) for s, v in scales.items()}}
    (dest / "_static" / "ledger").mkdir(parents=True, exist_ok=True)
    (dest / "_static" / "ledger" / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    page = dest / "front" / "ledger.md"
    if page.exists() and scales:
        from .pages import plain_title

        rows = "\n".join(f"| {plain_title(titles.get(slug, slug))} | {_links(scales, slug, '../')} |"
                         for slug in chapters if any(slug in v for v in scales.values()))
        page.write_text(page.read_text().rstrip() + _imported_markdown(scales, titles) + (
            "\n\n## The claims as data\n\nOne JSON file per chapter and scale: each claim's measured value, "
            "bar, status, whether it is deterministic or statistical and the spread expected between runs. "
            "`python -m icml26.book verify --chapter SLUG --scale S` compares your run with them.\n\n"
            "| chapter | ledger files |\n|---|---|\n" + rows + "\n"))
    for slug in chapters:
        index_page = dest / "chapters" / slug / "index.md"
        links = _links(scales, slug, "../../")
        if index_page.exists() and links:
            index_page.write_text(index_page.read_text().rstrip() + (
                f"\n\n<small>This chapter's claims as data (per scale): {links}. Check your own run against "
                f"them with <code>python -m icml26.book verify --chapter {slug}</code>.</small>\n"))
    summary = publish_student(root, dest, echo=lambda *_: None)
    echo(f"[publish] ledgers of {', '.join(scales) or 'no scale'}; student edition of {len(summary)} chapter(s)")
    return scales


# -- verify ----------------------------------------------------------------------------------------
def environment(threads: int | None = None) -> dict[str, str]:
    """The fingerprint a report carries: Python, torch, CUDA and the device's name, threads."""
    import torch

    from ..core.env import fingerprint

    info = fingerprint()
    info["cuda"] = torch.version.cuda or "none"
    info["cuda_device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    info["platform"] = platform.platform()
    info["cpu_count"] = str(os.cpu_count())
    if threads is not None:
        info["threads"] = str(threads)
    return info


def _fmt(value, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    text = f"{value:.4g}"
    return f"{text} {unit}".strip()


def _reader_claims(root: Path, nb: Notebook, scale: str) -> tuple[list[dict], str]:
    """The claims of the reader's run of ``nb`` and '' , or [] and why none counts."""
    from .execute import ledger_dir, publish_problem

    problem = publish_problem(root, nb, scale)
    if problem and not problem.startswith("its run failed"):
        return [], problem
    claims = []
    for file in sorted(ledger_dir(root, nb, scale).glob("*.json")):
        claims += json.loads(file.read_text())["claims"]
    return claims, ("" if claims else (problem or "no ledger"))


def compare_chapter(root: Path, chapter: str, notebooks: list[Notebook], scale: str,
                    against: str | os.PathLike | None = None, threads: int | None = None) -> dict:
    """The verify report of one chapter (JSON-able): the book's ledger against this checkout's runs."""
    from .execute import executed_path

    book = load_published(chapter, scale, against, root=root)
    book_claims = {c["id"]: c for c in (book or {}).get("claims", [])}
    rows, reader, notes, hashes, runs = [], [], [], {}, {}
    if book is None:
        notes.append(f"the book has published no ledger of {chapter} at scale {scale} "
                     f"({against or 'package copy'})")
    for nb in notebooks:
        stem = nb.path.stem
        claims, why = _reader_claims(root, nb, scale)
        hashes[stem] = content_hash(nb, scale)
        try:
            record = json.loads(executed_path(root, nb, scale).with_suffix(".run.json").read_text())
        except (OSError, ValueError):
            record = {}
        runs[stem] = {"seconds": record.get("seconds"), "peak_mib": record.get("peak_mib")}
        book_hash = ((book or {}).get("notebooks", {}).get(stem) or {}).get("content_hash")
        if book_hash and book_hash != hashes[stem]:
            notes.append(f"{stem}: your sources differ from those the book ran (content hash)")
        if why:
            notes.append(f"{stem}: {why}")
        for claim in claims:
            reader.append({**claim, "notebook": stem})
    seen = set()
    for claim in reader:
        cid = claim_id(chapter, claim["notebook"], claim["name"])
        seen.add(cid)
        b = book_claims.get(cid)
        rows.append({"id": cid, "notebook": claim["notebook"], "name": claim["name"], "kind": claim.get("kind", ""),
                     "unit": claim.get("unit", ""), "bar": claim.get("bar", ""),
                     "book": None if b is None else b["measured"], "book_status": None if b is None else b["status"],
                     "theirs": claim["measured"], "theirs_status": claim.get("status"), **verdict(b, claim)})
    for cid, b in book_claims.items():
        if cid not in seen and b["notebook"] in hashes:
            rows.append({"id": cid, "notebook": b["notebook"], "name": b["name"], "kind": b.get("kind", ""),
                         "unit": b.get("unit", ""), "bar": b.get("bar", ""), "book": b["measured"],
                         "book_status": b["status"], "theirs": None, "theirs_status": None, **verdict(b, None)})
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    return {"format": REPORT_FORMAT, "chapter": chapter, "scale": scale, "date": date.today().isoformat(),
            "against": str(against) if against is not None else "package copy",
            "book_source": (book or {}).get("source"), "environment": environment(threads),
            "notebooks": {s: {"content_hash": h, **runs[s]} for s, h in hashes.items()}, "notes": notes,
            "counts": counts, "failed": sum(r["fails"] for r in rows), "claims": rows, "ledger": reader}


def report_markdown(report: dict) -> str:
    """The report as Markdown, to paste into an issue."""
    env = report["environment"]
    lines = [f"# verify: {report['chapter']} at scale {report['scale']}", "",
             f"Compared against: {report['against']}; date {report['date']}.", "",
             "Environment: " + " | ".join(f"{k} {v}" for k, v in env.items()), "",
             "| claim | book | yours | difference / spread | verdict |", "|---|---|---|---|---|"]
    for r in report["claims"]:
        z = "-" if r["z"] is None else f"{r['z']:.2f}"
        name = f"{r['notebook']}: {r['name']}".replace("|", "\\|")
        lines.append(f"| {name} | {_fmt(r['book'], r['unit'])} | {_fmt(r['theirs'], r['unit'])} | {z} | "
                     f"{r['verdict']}{' (fails)' if r['fails'] else ''} |")
    lines += ["", "Verdicts: " + ", ".join(f"{n} {v}" for v, n in report["counts"].items() if n) + "."]
    lines += [f"- {note}" for note in report["notes"]]
    lines += ["", "Notebook content hashes: " + ", ".join(f"`{s}` {h['content_hash'][:12]}"
                                                        for s, h in report["notebooks"].items())]
    return "\n".join(lines) + "\n"


def report_text(report: dict) -> str:
    """The terminal table: claim, book, yours, difference in spreads, verdict."""
    rows = [(f"{r['notebook']}: {r['name']}"[:60], _fmt(r["book"], r["unit"]), _fmt(r["theirs"], r["unit"]),
             "-" if r["z"] is None else f"{r['z']:.2f}", r["verdict"] + (" *" if r["fails"] else ""))
            for r in report["claims"]]
    head = ("claim", "book", "yours", "diff/spread", "verdict")
    widths = [max(len(x[i]) for x in [head, *rows]) for i in range(5)]
    out = [f"{report['chapter']} at scale {report['scale']} (against {report['against']})",
           "  ".join(h.ljust(w) for h, w in zip(head, widths))]
    out += ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip() for row in rows]
    out += [f"note: {n}" for n in report["notes"]]
    out.append(", ".join(f"{n} {v}" for v, n in report["counts"].items() if n) or "no claims")
    if report["failed"]:
        out.append(f"{report['failed']} claim(s) marked * fail: a bar missed at this scale or a deterministic "
                   "value that differs")
    return "\n".join(out)


def verify(root: Path, chapters: list[str] | None, scale: str, *, against=None, out: Path | None = None,
           run_first: bool = True, jobs: int = 1, force: bool = False, echo=print) -> int:
    """``python -m icml26.book verify``: run (or reuse) the chapters' notebooks at ``scale``, compare
    each chapter's claims with the book's, print the table, write the reports; returns the exit
    status (1 when a claim fails, see the module docstring)."""
    from ..core.scale import dry_run_enabled
    from .execute import job_threads, run
    from .student import chapter_notebooks

    if scale == "gpu" and dry_run_enabled():
        raise BookError("verify compares real runs: unset ICML26_DRY (a dry run cuts loop counts and asserts nothing)")
    selected = chapter_notebooks(root, chapters)
    if not selected:
        raise BookError("no chapter to verify")
    threads = job_threads(os.cpu_count() or 1, jobs)  # what each notebook's kernel used (ICML26_THREADS wins)
    if run_first:
        run(root, [nb for nbs in selected.values() for nb in nbs], scale, jobs=jobs, force=force, echo=echo)
    out = Path(out) if out is not None else root / "_build" / "verify"
    out.mkdir(parents=True, exist_ok=True)
    status = 0
    for chapter, notebooks in selected.items():
        report = compare_chapter(root, chapter, notebooks, scale, against, threads)
        stem = out / f"verify-{chapter}-{scale}"
        stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
        stem.with_suffix(".md").write_text(report_markdown(report))
        echo(report_text(report))
        echo(f"report: {stem}.md and .json")
        if not report["ledger"]:
            echo(f"nothing verified: your run of {chapter} recorded no claim at scale {scale}")
        status = max(status, 1 if report["failed"] or not report["ledger"] else 0)
    return status


# -- import-ledger ---------------------------------------------------------------------------------
def import_ledger(root: Path, report_path: Path, *, echo=print) -> dict:
    """Accept a reader's gpu report: check its format, fingerprint (a CUDA device) and the content
    hash of every notebook it ran against this checkout, then write the chapter's gpu ledger
    (package copy, ``source: import`` with the device) and the gpu timings. Raises BookError naming
    what does not match; returns the ledger written."""
    from .pages import TIMINGS
    from .student import chapter_notebooks

    try:
        report = json.loads(Path(report_path).read_text())
    except FileNotFoundError:
        raise BookError(f"report not found: {report_path}") from None
    except ValueError as exc:
        raise BookError(f"{report_path}: not a JSON report ({exc})") from None
    if not isinstance(report, dict) or report.get("format") != REPORT_FORMAT:
        raise BookError(f"{report_path}: not a verify report (format {REPORT_FORMAT!r})")
    chapter, scale = report.get("chapter"), report.get("scale")
    if scale != "gpu":
        raise BookError(f"{report_path}: a report of scale {scale!r}; only gpu reports are imported "
                        "(the book runs the other scales itself)")
    env = report.get("environment") or {}
    missing = [k for k in ("python", "torch", "cuda", "cuda_device", "threads") if not env.get(k)]
    if missing:
        raise BookError(f"{report_path}: the fingerprint lacks {', '.join(missing)}")
    if env["cuda_device"] == "none" or env["cuda"] == "none":
        raise BookError(f"{report_path}: the run had no CUDA device ({env.get('device')}); a gpu report comes "
                        "from a GPU")
    notebooks = {nb.path.stem: nb for nb in chapter_notebooks(root, [chapter])[chapter]}
    ran = report.get("notebooks") or {}
    if not ran:
        raise BookError(f"{report_path}: the report names no notebook")
    wrong = []
    for stem, info in ran.items():
        if stem not in notebooks:
            wrong.append(f"{stem} (not a notebook of {chapter})")
        elif (info or {}).get("content_hash") != content_hash(notebooks[stem], scale):
            wrong.append(f"{stem} (content hash {str((info or {}).get('content_hash'))[:12]}, this checkout "
                         f"{content_hash(notebooks[stem], scale)[:12]})")
    if wrong:
        raise BookError(f"{report_path}: refused, its notebooks do not match this checkout's sources: "
                        + "; ".join(wrong))
    if any(c.get("status") == "dry run" for c in report.get("ledger", [])):
        raise BookError(f"{report_path}: a dry run (ICML26_DRY) measures nothing; run without --dry")
    claims = [_published_claim(c, chapter, c["notebook"]) for c in report.get("ledger", [])]
    device = env["cuda_device"]
    ledger = {"format": FORMAT, "chapter": chapter, "scale": scale,
              "source": {"kind": "import", "report": Path(report_path).name, "device": device,
                         "date": report.get("date"), "environment": env},
              "notebooks": {s: {"content_hash": i["content_hash"], "dry_run": False} for s, i in ran.items()},
              "claims": claims}
    target = published_dir(root) / scale / f"{chapter}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(ledger, indent=1) + "\n")
    timings_path = root / TIMINGS
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    for stem, info in ran.items():
        if info.get("seconds") is not None:
            timings.setdefault(f"{chapter}/{stem}", {})[scale] = {
                "seconds": round(float(info["seconds"]), 1), "peak_mib": info.get("peak_mib"),
                "cores": int(env.get("cpu_count") or 0) or None, "date": report.get("date"), "device": device}
    timings_path.parent.mkdir(parents=True, exist_ok=True)
    timings_path.write_text(json.dumps(dict(sorted(timings.items())), indent=1) + "\n")
    echo(f"imported {len(claims)} claim(s) of {chapter} at scale {scale} measured on {device} -> {target}")
    return ledger
