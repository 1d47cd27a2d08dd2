"""The student edition: every chapter's notebooks without the solutions, in nbgrader's format.

``python -m icml26.book student`` reads the notebook sources (jupytext MyST Markdown) and writes,
per chapter, under ``_build/student/``:

- ``<slug>/<notebook>.ipynb``: the **student version**. Every exercise's solution (the prose and
  the code between ``{solution-start}`` and ``{solution-end}``) is gone; where it stood there is a
  written-answer cell (``YOUR ANSWER HERE``, graded by hand) when the solution had prose, and one
  stub cell per solution code cell (``# YOUR ANSWER HERE`` / ``raise NotImplementedError()``).
  Stubs and tests carry the ``raises-exception`` tag, so that running the whole notebook
  (nbclient, ``jupyter nbconvert --execute``, JupyterLab's "Run All") goes on past them.
- ``source/<slug>/<notebook>.ipynb`` and ``source/nbgrader_config.py``: the **instructor version**
  for an nbgrader course: the same cells, with the solution code kept between nbgrader's
  ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers and the prose answer in its answer cell.
  ``nbgrader generate_assignment`` turns it into the student version (the config sets nbgrader's
  code stub to the one above).
- ``<slug>.zip``: the student version of the chapter with a short README, for handing out.

**Autograder tests.** Where an exercise's solution has a checkable result, a read-only test cell
(nbgrader ``grade: true``, one point, ``locked``) follows the stubs. It asserts the property the
solution demonstrates, never a number copied from a run, and reads the names the solution defines
(the stub says which). Its code comes from, in this order:

1. code cells inside the solution tagged ``autograde`` in the chapter's source (the book runs
   them after the reference solution, so a stale test fails the build);
2. :data:`TESTS`, this module's tests keyed by exercise label, for chapters that have not moved
   theirs into the source yet.

A yes/no value a solution prints is not taken for a test: it may be the answer "no" (bpop's
``intersection = truth: False`` is the point of its exercise).

Everything here is text processing (no kernel); :func:`check_student` is the static check the
tests run on every chapter: no solution text leaks, the nbgrader metadata is valid, the stubs
stand where the solutions stood, and no cell outside a solution needs a name only a solution
defines.
"""

from __future__ import annotations

import ast
import builtins
import copy
import io
import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .sources import BookError, Notebook, discover, find_root

STUB_CODE = "# YOUR ANSWER HERE\nraise NotImplementedError()"
STUB_TEXT = "YOUR ANSWER HERE"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
ERROR_TAG = "raises-exception"
AUTOGRADE_TAG = "autograde"
SCHEMA = 3
FRESH = "_ = [globals().pop(_name, None) for _name in "  # + a tuple of names + "]"
_GRADE_ID = re.compile(r"^[A-Za-z0-9_\-]+$")

# Tests for exercises whose chapter has no ``autograde`` cell yet: each asserts the property the
# solution demonstrates, reading the names the solution defines.
TESTS: dict[str, str] = {
    "bandpo-ex-tv": (
        "# for total variation the band has the closed form [max(0, 1 - delta/p), min(1/p, 1 + delta/p)]\n"
        "assert torch.allclose(lo, (1 - 0.1 / pp).clamp(min=0))\n"
        "assert torch.allclose(hi, torch.minimum(1 + 0.1 / pp, 1 / pp))"),
    "bpop-ex-proof": (
        "# the intersection of the traces' orders is the true order exactly when IP-Cov = 1\n"
        "_equal = bool(np.array_equal(m.always_before(Y15, po.n).closure, po.closure))\n"
        "assert _equal == (abs(m.ip_coverage(Y15, po) - 1) < 1e-12)"),
    "causcale-ex-shuffle": (
        "# without reduction units the model is invariant to the sample order (round-off), with them not\n"
        "assert float((p - q).abs().max()) > 1e3 * 1e-7, 'with reductions, a shuffle should change P'"),
    "causcale-ex-half": (
        "# a symmetric score that ranks every true edge on top has directed AP exactly 0.5\n"
        "assert abs(cs.average_precision(a + a.T, a) - 0.5) < 1e-9"),
    "causcale-ex-moral": (
        "# the moral graph contains the skeleton: every edge of the DAG links a moral pair\n"
        "assert ((mor - skel) >= 0).all()\n"
        "assert mor.shape == skel.shape == task['adj'].shape"),
    "causcale-ex-orienter": (
        "# the orienter scores every ordered pair with a finite non-negative number\n"
        "_s = orienter(cells[first][0])\n"
        "assert _s.shape == cells[first][0]['adj'].shape and np.isfinite(_s).all() and (_s >= 0).all()"),
    "syngr-ex-unique": (
        "# Y = (X1, X1 xor X2): both inputs carry 1 bit each, together 2 bits; the PID puts 1 bit in\n"
        "# redundancy and 1 bit in synergy, nothing unique\n"
        "_pid = m.pid_williams_beer(p)\n"
        "assert abs(p.sum() - 1) < 1e-12\n"
        "assert abs(_pid['S'] - 1) < 1e-9 and abs(_pid['U1']) < 1e-9 and abs(_pid['U2']) < 1e-9"),
    "syngr-ex-levels": (
        "# at most 16 distinct codes: the collision rate is at least 1 - 16/N; the suffix makes every\n"
        "# joint identifier unique, so it needs at least N/256 values\n"
        "_n = len(world.cat.text_feat)\n"
        "assert m.codebook_stats(tc, 16)['collision_rate'] >= 1 - 16 / _n - 1e-12\n"
        "assert m.assign_semantic_ids(tc, ic).n_suffix >= -(-_n // 256)"),
    "bandpo-ex-simplex": (
        "# a fixed upper bound 1+eps exceeds the simplex exactly above p = 1/(1+eps) (here eps = 0.28)\n"
        "assert abs(fine[(fine * hi > 1)].min().item() - 1 / (1 + eps)) < 1e-4"),
    "bandpo-ex-quad": (
        "# the quadratic law is the second-order expansion: at delta = 1e-3 it is off by a few percent\n"
        "assert abs(((exact - approx) / approx).item()) < 0.05"),
}

_FENCED = r"^(?P<fence>`{3,}|:{3,})\{(?P<name>%s)\}[ \t]*(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*(?:\n|\Z)"
_SOLUTION = re.compile(_FENCED % "solution-start|solution-end", re.M | re.S)
_EXERCISE = re.compile(_FENCED % "exercise", re.M | re.S)
_LABEL = re.compile(r"^:label:[ \t]*(\S+)[ \t]*$", re.M)


@dataclass
class Exercise:
    """One exercise of a notebook, as the student edition hands it out."""

    label: str
    notebook: str  # stem
    written: bool = False  # the solution has prose: an answer cell graded by hand
    code: int = 0  # solution code cells, each a stub
    tests: list[str] = field(default_factory=list)  # autograder test code
    reads: list[str] = field(default_factory=list)  # names the tests read from the solution

    @property
    def autograded(self) -> bool:
        return bool(self.tests)


@dataclass
class Edition:
    """The student and instructor versions of one notebook and what they hold."""

    notebook: Notebook
    student: dict
    source: dict
    exercises: list[Exercise]
    solution_text: list[str]  # the solutions' own lines (prose and code), for the leak check


# -- reading a notebook source --------------------------------------------------------------------
def _text(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _segments(markdown: str) -> list[tuple[str, str, str]]:
    """A Markdown cell cut at its solution directives: ``("text", chunk, "")``,
    ``("start", "", label)`` and ``("end", "", "")`` in order."""
    out, pos = [], 0
    for match in _SOLUTION.finditer(markdown):
        out.append(("text", markdown[pos:match.start()], ""))
        if match.group("name") == "solution-start":
            out.append(("start", "", match.group("arg").strip()))
        else:
            out.append(("end", "", ""))
        pos = match.end()
    out.append(("text", markdown[pos:], ""))
    return out


def _exercise_markdown(text: str) -> str:
    """``{exercise}`` directives as plain Markdown (a student's Jupyter does not render MyST):
    a bold heading naming the label, then the statement."""

    def plain(match: re.Match) -> str:
        label = _LABEL.search(match.group("body"))
        body = "\n".join(ln for ln in match.group("body").splitlines() if not re.match(r"^:\w[\w-]*:", ln))
        title = match.group("arg").strip()
        head = f"**Exercise `{label.group(1)}`**" if label else "**Exercise**"
        head += f" ({title})" if title else ""
        return f"{head}\n\n{body.strip()}\n"

    return _EXERCISE.sub(plain, text)


def _assigned(code: str) -> set[str]:
    """Names a piece of Python binds at its top level or anywhere (assignments, loops, imports,
    definitions)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _read(code: str) -> list[str]:
    """Free names a piece of Python loads, in order of first use."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    bound = _assigned(code)
    seen: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            seen.setdefault(node.id, None)
    return [n for n in seen if n not in bound]


_CODE_CELL = re.compile(r"^(?P<fence>`{3,})\{code-cell\}[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)


def parse_myst(text: str) -> list[dict]:
    """The cells of a MyST notebook source, ``{"cell_type", "source", "metadata"}``: code cells
    from ``{code-cell}`` fences (options as ``:key: value`` lines or a ``---`` YAML block), the
    Markdown between them (split at ``+++``) as Markdown cells; the front matter dropped. Plain
    text processing: jupytext gives the same cells, two orders of magnitude slower."""
    import yaml

    from .sources import front_matter, options_and_body

    lines = text.splitlines(keepends=True)
    if front_matter(text)[0] is not None:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        text = "".join(lines[end + 1:])
    cells: list[dict] = []

    def markdown(chunk: str) -> None:
        for part in re.split(r"^\+\+\+[^\n]*\n", chunk, flags=re.M):
            if part.strip():
                cells.append({"cell_type": "markdown", "source": part.strip("\n"), "metadata": {}})

    pos = 0
    for match in _CODE_CELL.finditer(text):
        markdown(text[pos:match.start()])
        options, body = options_and_body(match.group("body").rstrip("\n"))
        if options and not options.lstrip().startswith(":"):
            meta = yaml.safe_load(options) or {}
        else:
            meta = yaml.safe_load("\n".join(ln[1:].replace(":", ": ", 1) if ln.startswith(":") else ln
                                            for ln in options.splitlines())) or {}
        cells.append({"cell_type": "code", "source": body.strip("\n"), "metadata": dict(meta)})
        pos = match.end()
    markdown(text[pos:])
    return cells


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _nbgrader(grade_id: str, *, grade: bool, solution: bool, locked: bool, points: float = 0) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def _code(source: str, meta: dict) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": meta, "outputs": [], "source": source}


def _markdown(source: str, meta: dict | None = None) -> dict:
    return {"cell_type": "markdown", "metadata": meta or {}, "source": source}


def _solution_cells(label: str, prose: list[str], code: list[dict], tests: list[str], reads: list[str],
                    instructor: bool) -> list[dict]:
    """What stands where one exercise's solution stood, student or instructor version."""
    out = []
    answer = "\n\n".join(p.strip() for p in prose if p.strip())
    if answer:
        out.append(_markdown(answer if instructor else STUB_TEXT,
                             {"nbgrader": _nbgrader(f"{label}-answer", grade=True, solution=True, locked=False,
                                                    points=1)}))
    for i, cell in enumerate(code, start=1):
        head = f"# Exercise {label}: your code"
        if tests and i == len(code) and reads:
            head += f" (the test below reads {', '.join(reads)})"
        if tests and i == 1 and reads:  # the test must not pass on values from elsewhere in the notebook
            head += f"\n{FRESH}{tuple(reads)!r}]"
        body = f"{BEGIN}\n{_text(cell).strip()}\n{END}" if instructor else STUB_CODE
        grade_id = f"{label}-code" if len(code) == 1 else f"{label}-code-{i}"
        out.append(_code(f"{head}\n{body}", {"tags": [ERROR_TAG], "nbgrader": _nbgrader(
            grade_id, grade=False, solution=True, locked=False)}))
    for i, test in enumerate(tests, start=1):
        grade_id = f"{label}-test" if len(tests) == 1 else f"{label}-test-{i}"
        out.append(_code(f"# Test of exercise {label} (read-only)\n{test.strip()}", {
            "tags": [ERROR_TAG], "editable": False, "deletable": False,
            "nbgrader": _nbgrader(grade_id, grade=True, solution=False, locked=True, points=1)}))
    return out


def edition(nb: Notebook, *, scale: str | None = None, repo_url: str = "",
            tests: dict[str, str] | None = None) -> Edition:
    """The student and instructor versions of one notebook source (see the module docstring).

    ``scale`` rewrites the ``SCALE`` of the parameters cell (the source's value by default);
    ``tests`` replaces :data:`TESTS`. Raises :class:`BookError` on a solution directive without
    its partner or a label nbgrader cannot use as an id."""
    from ..core.scale import SCALES
    from .tidy import install_cell

    if not isinstance(nb, Notebook):
        raise TypeError(f"nb must be an icml26.book.Notebook, got {type(nb).__name__}")
    if scale is not None and scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES} or None, got {scale!r}")
    tests = TESTS if tests is None else tests
    parsed = parse_myst(nb.source())
    student: list[dict] = []
    source: list[dict] = []
    exercises: list[Exercise] = []
    leaked: list[str] = []
    label: str | None = None
    prose: list[str] = []
    code: list[dict] = []
    own_tests: list[str] = []
    where = f"{nb.rel}"

    def keep(cell: dict) -> None:
        student.append(cell)
        source.append(copy.deepcopy(cell))

    def close() -> None:
        assert label is not None
        solution_code = "\n".join(_text(c) for c in code)
        chosen = list(own_tests)
        if not chosen and label in tests:
            chosen = [tests[label]]
        defined = _assigned(solution_code)
        reads = [n for n in dict.fromkeys(n for t in chosen for n in _read(t)) if n in defined]
        exercises.append(Exercise(label, nb.path.stem, bool("".join(prose).strip()), len(code), chosen, reads))
        student.extend(_solution_cells(label, prose, code, chosen, reads, instructor=False))
        source.extend(_solution_cells(label, prose, code, chosen, reads, instructor=True))
        leaked.extend(p for p in prose if p.strip())
        leaked.extend(_text(c) for c in code)

    for cell in parsed:
        cell = dict(cell)
        cell["metadata"] = dict(cell.get("metadata", {}))
        if cell["cell_type"] == "markdown":
            pending = []
            for kind, chunk, arg in _segments(_text(cell)):
                if kind == "start":
                    if label is not None:
                        raise BookError(f"{where}: solution {arg!r} starts inside solution {label!r}")
                    if not _GRADE_ID.match(arg):
                        raise BookError(f"{where}: solution label {arg!r} is not usable as an nbgrader id "
                                        "(letters, digits, '-' and '_')")
                    if "".join(pending).strip():
                        keep(_markdown(_exercise_markdown("".join(pending)).strip()))
                    pending = []
                    label, prose, code, own_tests = arg, [], [], []
                elif kind == "end":
                    if label is None:
                        raise BookError(f"{where}: a solution-end without its solution-start")
                    close()
                    label = None
                elif label is not None:
                    prose.append(chunk)
                else:
                    pending.append(chunk)
            if "".join(pending).strip():
                keep(_markdown(_exercise_markdown("".join(pending)).strip(), cell["metadata"] or None))
        elif cell["cell_type"] == "code":
            if label is not None:
                if AUTOGRADE_TAG in _tags(cell):
                    own_tests.append(_text(cell))
                else:
                    code.append(cell)
                continue
            clean = _code(_text(cell), dict(cell["metadata"]))
            if scale and "parameters" in _tags(cell):
                clean["source"] = re.sub(r"^SCALE\s*=.*$", f'SCALE = "{scale}"', clean["source"], flags=re.M)
            keep(clean)
        else:
            keep(dict(cell))
    if label is not None:
        raise BookError(f"{where}: solution {label!r} has no solution-end")
    title = next((m.group(1) for c in student if c["cell_type"] == "markdown"
                  for m in [re.search(r"^#\s+(.+)$", _text(c), re.M)] if m), nb.path.stem)
    intro = (f"*Student edition of \u201c{title}\u201d: the exercises' solutions are removed.* Write your "
             f"answers where a cell says `YOUR ANSWER HERE`; a read-only cell that follows checks your code "
             f"(run it after yours). The rest of the notebook runs as in the book.")
    first = next((i for i, c in enumerate(student) if c["cell_type"] == "code"), len(student))
    for cells in (student, source):
        cells.insert(first, install_cell(repo_url))
        cells.insert(0, _markdown(intro))
    meta = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}
    notebooks = [{"cells": c, "metadata": copy.deepcopy(meta), "nbformat": 4, "nbformat_minor": 5}
                 for c in (student, source)]
    for book in notebooks:
        for i, cell in enumerate(book["cells"]):
            cell["id"] = f"cell-{i}" if cell.get("id") != "book-install" else "book-install"
    return Edition(nb, notebooks[0], notebooks[1], exercises, leaked)


# -- the static check -----------------------------------------------------------------------------
def _significant(lines: str) -> set[str]:
    return {ln.strip() for ln in lines.splitlines() if len(ln.strip()) >= 12}


def check_student(ed: Edition) -> list[str]:
    """Problems of one student edition, one line each ('' list when none): solution text in the
    student version, nbgrader metadata that is invalid, stubs that do not stand where the solutions
    stood, and cells outside the solutions that read a name only a solution defines."""
    name = str(ed.notebook.rel)
    problems: list[str] = []
    text = "\n".join(_text(c) for c in ed.student["cells"])
    student_lines = {ln.strip() for ln in text.splitlines()}
    # lines that a solution shares with the rest of the notebook (an import, a print) are no leak
    parsed = parse_myst(ed.notebook.source())
    outside_src, inside = [], False  # the source's own text outside the solutions
    for cell in parsed:
        if cell["cell_type"] == "markdown":
            for kind, chunk, _ in _segments(cell["source"]):
                inside = {"start": True, "end": False}.get(kind, inside)
                if kind == "text" and not inside:
                    outside_src.append(chunk)
        elif not inside:
            outside_src.append(cell["source"])
    own = {ln.strip() for ln in "\n".join(outside_src).splitlines()}
    for line in sorted(_significant("\n".join(ed.solution_text)) - own):
        if line in student_lines:
            problems.append(f"{name}: solution text in the student version: {line[:70]!r}")
    ids: set[str] = set()
    for i, cell in enumerate(ed.student["cells"]):
        meta = cell["metadata"].get("nbgrader")
        if meta is None:
            continue
        missing = {"schema_version", "grade", "locked", "solution", "grade_id"} - set(meta)
        if missing:
            problems.append(f"{name}: cell {i}: nbgrader metadata lacks {sorted(missing)}")
            continue
        if meta["schema_version"] != SCHEMA or not _GRADE_ID.match(meta["grade_id"]):
            problems.append(f"{name}: cell {i}: bad nbgrader schema or grade_id {meta['grade_id']!r}")
        if meta["grade_id"] in ids:
            problems.append(f"{name}: duplicate nbgrader grade_id {meta['grade_id']!r}")
        ids.add(meta["grade_id"])
        if meta["grade"] and "points" not in meta:
            problems.append(f"{name}: grade cell {meta['grade_id']!r} has no points")
        if cell["cell_type"] == "markdown" and meta["grade"] != meta["solution"]:
            problems.append(f"{name}: markdown cell {meta['grade_id']!r} must be both grade and solution")
        if meta["grade"] and not meta["solution"] and not (meta["locked"] and cell["cell_type"] == "code"):
            problems.append(f"{name}: test cell {meta['grade_id']!r} must be a locked code cell")
        if meta["solution"] and cell["cell_type"] == "code":
            if not _text(cell).rstrip().endswith(STUB_CODE) or ERROR_TAG not in _tags(cell):
                problems.append(f"{name}: stub {meta['grade_id']!r} lacks the stub code or the {ERROR_TAG} tag")
    # the code cells, solutions replaced by stubs, in the source's order
    expected, inside = [], False
    for cell in parsed:
        if cell["cell_type"] == "markdown":
            for kind, _, _ in _segments(cell["source"]):
                inside = {"start": True, "end": False}.get(kind, inside)
        elif cell["cell_type"] == "code" and not (inside and AUTOGRADE_TAG in _tags(cell)):
            expected.append("stub" if inside else cell["source"].strip())
    got = []
    for cell in ed.student["cells"]:
        if cell["cell_type"] != "code" or cell.get("id") == "book-install":
            continue
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            continue  # a test
        got.append("stub" if meta.get("solution") else _text(cell).strip())
    got = [re.sub(r'^SCALE\s*=.*$', "SCALE", g, flags=re.M) for g in got]
    expected = [re.sub(r'^SCALE\s*=.*$', "SCALE", e, flags=re.M) for e in expected]
    if got != expected:
        at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
        problems.append(f"{name}: the code cells differ from the source's with stubs for solutions "
                        f"(code cell {at + 1}; {len(got)} cells, expected {len(expected)})")
    # cells outside a solution must not need what only a solution defines
    only_solution: set[str] = set()
    outside_defined: set[str] = set(dir(builtins))
    inside = False
    fresh = {e.label: set(e.reads) for e in ed.exercises}  # names a stub removes before the answer
    current = ""
    for cell in parsed:
        if cell["cell_type"] == "markdown":
            for kind, _, arg in _segments(cell["source"]):
                inside = {"start": True, "end": False}.get(kind, inside)
                current = arg if kind == "start" else current
                if kind == "end":
                    only_solution |= fresh.get(current, set())
                    outside_defined -= fresh.get(current, set())
        elif cell["cell_type"] == "code":
            code = _python(cell["source"])
            if inside:
                only_solution |= _assigned(code) - outside_defined
            else:
                needed = [n for n in _read(code) if n in only_solution and n not in outside_defined]
                if needed:
                    problems.append(f"{name}: a cell outside the solutions reads {', '.join(needed)}, "
                                    "which only a solution defines")
                outside_defined |= _assigned(code)
    return problems


def _python(source: str) -> str:
    from .sources import python_of

    return python_of(source)


# -- writing --------------------------------------------------------------------------------------
def chapter_notebooks(root: Path, slugs: list[str] | None = None) -> dict[str, list[Notebook]]:
    """The chapters' notebooks in book order (``_toc.yml``), ``{slug: [Notebook, ...]}``; chapters
    the table of contents does not list are left out. ``slugs`` picks some."""
    from .pages import book_chapters

    found = {nb.path: nb for nb in discover(root)}
    out: dict[str, list[Notebook]] = {}
    known = book_chapters(root)
    if slugs:
        unknown = sorted(set(slugs) - {c.slug for c in known})
        if unknown:
            raise BookError(f"unknown chapter {', '.join(unknown)}; known: {', '.join(c.slug for c in known)}")
    for chapter in known:
        if slugs and chapter.slug not in slugs:
            continue
        paths = [(root / "chapters" / chapter.slug / f"{s}.md").resolve() for s in chapter.notebooks]
        out[chapter.slug] = [found[p] for p in paths if p in found]
    return out


README = """# {title}: student edition

Notebooks of the chapter "{title}" of *ICML 2026 in Code*, with the exercises' solutions removed.

1. Install the book's package `icml26` (the first code cell of each notebook does it when it is
   missing) and open a notebook in Jupyter.
2. Run all cells: the book's own code runs; the exercise cells stop with `NotImplementedError`
   until you fill them in, and execution goes on past them.
3. Write your answers where a cell says `YOUR ANSWER HERE`. A read-only cell that follows an
   exercise checks your code: run it after yours.

Exercises: {exercises}.
Checked by a test cell: {autograded}.
"""


def _zip(path: Path, files: dict[str, bytes]) -> None:
    """A zip with fixed timestamps, so that the same edition gives the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, files[name])
    path.write_bytes(buffer.getvalue())


NBGRADER_CONFIG = f"""# nbgrader configuration for the instructor versions of ICML 2026 in Code.
# Copy a chapter's folder to <course>/source/<assignment>/ and run
#     nbgrader generate_assignment <assignment>
# The stub below is the one the book's student edition uses.
c = get_config()  # noqa: F821
c.ClearSolutions.code_stub = {{"python": {STUB_CODE!r}}}
c.ClearSolutions.text_stub = {STUB_TEXT!r}
"""


def _dump(nb: dict) -> bytes:
    return (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode()


def write_student(root: Path | None = None, chapters: list[str] | None = None, out: Path | None = None, *,
                  scale: str | None = None, echo=print) -> dict[str, list[Exercise]]:
    """Write the student edition (see the module docstring) under ``out`` (``_build/student``):
    per chapter the student notebooks, the instructor versions and the zip. Refuses (BookError)
    when a chapter's edition fails :func:`check_student`. Returns ``{slug: [Exercise, ...]}``."""
    from .site import repository_url

    root = Path(root) if root is not None else find_root()
    out = Path(out) if out is not None else root / "_build" / "student"
    repo_url = repository_url(root)
    summary: dict[str, list[Exercise]] = {}
    for slug, notebooks in chapter_notebooks(root, chapters).items():
        editions = [edition(nb, scale=scale, repo_url=repo_url) for nb in notebooks]
        problems = [p for ed in editions for p in check_student(ed)]
        if problems:
            raise BookError(f"student edition of {slug}: " + "; ".join(problems))
        folder, source = out / slug, out / "source" / slug
        for target in (folder, source):
            target.mkdir(parents=True, exist_ok=True)
            for old in target.glob("*.ipynb"):
                old.unlink()
        files: dict[str, bytes] = {}
        for ed in editions:
            stem = ed.notebook.path.stem
            (folder / f"{stem}.ipynb").write_bytes(_dump(ed.student))
            (source / f"{stem}.ipynb").write_bytes(_dump(ed.source))
            files[f"{slug}/{stem}.ipynb"] = _dump(ed.student)
        exercises = [e for ed in editions for e in ed.exercises]
        from .pages import title_of

        index = root / "chapters" / slug / "index.md"
        title = title_of(index) if index.exists() else slug
        files[f"{slug}/README.md"] = README.format(
            title=title, exercises=", ".join(e.label for e in exercises) or "none",
            autograded=", ".join(e.label for e in exercises if e.autograded) or "none").encode()
        _zip(out / f"{slug}.zip", files)
        summary[slug] = exercises
        echo(f"[student] {slug}: {len(editions)} notebook(s), {len(exercises)} exercise(s), "
             f"{sum(e.autograded for e in exercises)} autograded -> {out / (slug + '.zip')}")
    (out / "source").mkdir(parents=True, exist_ok=True)
    (out / "source" / "nbgrader_config.py").write_text(NBGRADER_CONFIG)
    return summary


STUDENT_MARKER = "<!-- student-edition -->"


def teachers_student_markdown(summary: dict[str, list[Exercise]], titles: dict[str, str],
                              link_base: str = "../_static/student") -> str:
    """The "For teachers" table of the student edition: per chapter its zip, its exercises and
    which of them a test cell checks."""
    from .pages import plain_title

    lines = ["| chapter | student edition | exercises | autograded |", "|---|---|---|---|"]
    for slug, exercises in summary.items():
        auto = [e.label for e in exercises if e.autograded]
        row = [plain_title(titles.get(slug, slug)),
               f'<a href="{link_base}/{slug}.zip" download>{slug}.zip</a>',
               ", ".join(f"`{e.label}`" for e in exercises) or "-",
               (", ".join(f"`{x}`" for x in auto) if auto else "none") + f" ({len(auto)} of {len(exercises)})"]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
    return "\n".join(lines)


def publish_student(root: Path, dest: Path, echo=print) -> dict[str, list[Exercise]]:
    """For the site build: write the edition, copy each chapter's zip to ``dest/_static/student``
    and fill the marker of ``dest/front/teachers.md``."""
    import shutil

    from .pages import book_chapters

    out = root / "_build" / "student"
    summary = write_student(root, out=out, echo=echo)
    static = dest / "_static" / "student"
    static.mkdir(parents=True, exist_ok=True)
    for slug in summary:
        shutil.copy2(out / f"{slug}.zip", static / f"{slug}.zip")
    page = dest / "front" / "teachers.md"
    if page.exists() and STUDENT_MARKER in page.read_text():
        titles = {c.slug: c.title for c in book_chapters(root)}
        page.write_text(page.read_text().replace(STUDENT_MARKER, teachers_student_markdown(summary, titles)))
    return summary


# -- running an edition ---------------------------------------------------------------------------
def execute(nb: dict, cwd: Path, *, scale: str = "smoke", timeout: int = 600, ledger_dir: Path | None = None) -> dict:
    """Run a student or instructor notebook top to bottom in a fresh kernel (nbclient) at ``scale``
    with one thread, ``cwd`` as its folder and its ledger written to ``ledger_dir`` (a temporary
    folder by default, never the book's own); returns the executed copy. Cells tagged
    ``raises-exception`` may fail; any other failing cell raises ``nbclient``'s error."""
    import os
    import tempfile

    import nbformat
    from nbclient import NotebookClient

    if not isinstance(nb, dict) or "cells" not in nb:
        raise TypeError("nb must be a notebook dict with 'cells'")
    if not Path(cwd).is_dir():
        raise ValueError(f"cwd must be an existing folder, got {cwd!r}")
    book = nbformat.from_dict(copy.deepcopy(nb))
    with tempfile.TemporaryDirectory() as tmp:
        env = {"ICML26_SCALE": scale, "ICML26_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "ICML26_LEDGER_DIR": str(ledger_dir or tmp), "MPLBACKEND": "Agg", "TQDM_DISABLE": "1",
               "PYTHONHASHSEED": "0"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            NotebookClient(book, timeout=timeout, kernel_name="python3",
                           resources={"metadata": {"path": str(cwd)}}).execute()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return book


def grades(nb: dict) -> dict[str, tuple[float, float]]:
    """``{grade_id: (points, max points)}`` of an executed notebook's test cells, by nbgrader's rule:
    a test cell that raised scores zero."""
    out = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution"):
            failed = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
            out[meta["grade_id"]] = (0.0 if failed else float(meta["points"]), float(meta["points"]))
    return out
