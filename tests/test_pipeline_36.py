"""Issue 36, points 1-6: the pipeline never publishes what did not run.

Throw-away books only (see minibook.py). Most tests fake the runner's outputs (an executed
notebook converted with jupytext and its run record) so that nothing executes; the module-scoped
``executed`` fixture runs three tiny notebooks once, for what only a real kernel shows.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from icml26.book import __main__ as cli
from icml26.book import discover, run, sources
from icml26.book import execute as ex
from icml26.book.checks import code_cells
from icml26.book.execute import Result, executed_path, ledger_dir
from icml26.book.site import stage
from icml26.book.sources import BookError, content_hash, modules_used
from minibook import HEADER, PARAMS, cell, make_chapter_book

QUIET = {"echo": lambda *_: None}


def notebook(root: Path, stem: str):
    (nb,) = [nb for nb in discover(root) if nb.path.stem == stem]
    return nb


def fake_run(root: Path, nb, scale: str = "smoke", error: str = "") -> Path:
    """What the runner leaves after executing ``nb`` (no kernel): the converted notebook and a
    record certifying its current content hash and this very file."""
    import jupytext

    out = executed_path(root, nb, scale)
    out.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.read(nb.path), out, fmt="ipynb")
    record = {"name": nb.name, "scale": scale, "seconds": 1.0, "peak_mib": 10.0, "claims_held": 0,
              "claims_total": 0, "cached": False, "error": error, "hash": content_hash(nb, scale),
              "output_sha256": hashlib.sha256(out.read_bytes()).hexdigest()}
    out.with_suffix(".run.json").write_text(json.dumps(record))
    return out


def refusal(root: Path, scale: str = "smoke") -> str:
    with pytest.raises(BookError) as info:
        stage(root, scale)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# -- 1. build publishes only what ran, at the current content ----------------------------------------
def test_build_refuses_a_failed_stale_unrecorded_or_swapped_notebook(tmp_path):
    root = make_chapter_book(tmp_path, "demo", {"01-a": PARAMS + cell('print("VERSION-1")'),
                                                "02-b": PARAMS + cell("x = 1")})
    a, b = notebook(root, "01-a"), notebook(root, "02-b")
    fake_run(root, a)
    fake_run(root, b)
    assert (stage(root, "smoke") / "chapters" / "demo" / "01-a.ipynb").exists()

    fake_run(root, b, error="code cell 2 ('x = 1'): ValueError: boom")
    message = refusal(root)
    assert "chapters/demo/02-b.md: its run failed: code cell 2" in message and "01-a" not in message

    fake_run(root, b)
    a.path.write_text(a.source().replace("VERSION-1", "VERSION-2"))  # edited after it ran
    assert "chapters/demo/01-a.md: stale" in refusal(root)

    fake_run(root, a)
    executed_path(root, b, "smoke").with_suffix(".run.json").unlink()
    assert "chapters/demo/02-b.md: no run record" in refusal(root)

    fake_run(root, b)
    out = executed_path(root, a, "smoke")
    out.write_text(out.read_text().replace("VERSION-2", "VERSION-3"))  # another run's output landed here
    assert "chapters/demo/01-a.md: the executed notebook is not the one its run record certifies" in refusal(root)


LEDGER_NB = PARAMS + cell("""
    from icml26.core import Ledger
    ledger = Ledger("demo", "01-claims", scale=SCALE)
    ledger.check("one is positive", 1.0, ">=", 0.0)
""") + cell("ledger.assert_all()")


def test_the_ledger_page_marks_a_chapter_whose_ledger_is_missing(tmp_path):
    root = make_chapter_book(tmp_path, "demo", {"01-claims": LEDGER_NB})
    fake_run(root, notebook(root, "01-claims"))  # ran, but its ledger folder is gone
    page = (stage(root, "smoke") / "front" / "ledger.md").read_text()
    assert "Ledger missing at scale `smoke`" in page
    assert "The demo chapter (`demo`): no ledger for `01-claims`" in page
    folder = ledger_dir(root, notebook(root, "01-claims"), "smoke")
    folder.mkdir(parents=True)
    (folder / "demo--01-claims.json").write_text(json.dumps({"chapter": "demo", "notebook": "01-claims", "claims": [
        {"name": "one is positive", "paper": "", "measured": 1.0, "bar": ">= 0", "status": "holds",
         "scale": "smoke", "chapter": "demo", "notebook": "01-claims", "note": "", "volatile": False}]}))
    page = (stage(root, "smoke") / "front" / "ledger.md").read_text()
    assert "Ledger missing" not in page and "one is positive" in page


# -- 2. the cache follows every legal import form -------------------------------------------------
@pytest.mark.parametrize("code, expected", [
    ("from icml26 import bpop as mm", {"bpop"}),
    ("from icml26 import (\n    bpop,\n    cgmt as c,\n)", {"bpop", "cgmt"}),
    ("import icml26.bpop.plots", {"bpop"}),
    ("import icml26.bpop.plots as plots, numpy as np", {"bpop"}),
    ("from icml26.bpop.plots import (\n    frontier,\n)", {"bpop"}),
    ("import importlib\nmm = importlib.import_module('icml26.bpop')", {"bpop"}),
    ("from importlib import import_module\nmm = import_module(\n    'icml26.bpop.plots')", {"bpop"}),
    ("import importlib\nmm = importlib.import_module('.bpop', package='icml26')", {"bpop"}),
    ("import icml26\nicml26.bpop.run()", {"bpop"}),
    ("%matplotlib inline\nfrom icml26 import bpop as mm", {"bpop"}),
    ("print('import icml26.cgmt')  # a string, not an import", set()),
])
def test_modules_used_reads_every_import_form(code, expected):
    assert modules_used(code) == {"core"} | expected
    assert modules_used(HEADER + PARAMS + cell(code)) == {"core"} | expected  # inside a notebook source


@pytest.mark.parametrize("form", ["from icml26 import bpop as mm", "from icml26 import (\n    bpop,\n)",
                                  "import importlib\nmm = importlib.import_module('icml26.bpop')"])
def test_a_library_edit_invalidates_notebooks_importing_it_in_any_form(tmp_path, monkeypatch, form):
    package = tmp_path / "pkg"
    for file in ("__init__.py", "core/__init__.py", "bpop/__init__.py", "bpop/plots.py"):
        (package / file).parent.mkdir(parents=True, exist_ok=True)
        (package / file).write_text("# v1\n")
    monkeypatch.setattr(sources, "PACKAGE_DIR", package)
    (tmp_path / "book").mkdir()
    root = make_chapter_book(tmp_path / "book", "demo", {"01-a": PARAMS + cell(form)})
    nb = notebook(root, "01-a")
    before = content_hash(nb, "smoke")
    (package / "bpop" / "plots.py").write_text("# v2\n")
    assert content_hash(nb, "smoke") != before


def test_the_gpu_cost_model_is_not_part_of_a_notebooks_hash(tmp_path, monkeypatch):
    """No notebook runs a chapter's cost.py (issue 43's budget tool does): editing it keeps cached runs and the
    published ledger current; editing the presets beside it does not."""
    package = tmp_path / "pkg"
    for file in ("__init__.py", "core/__init__.py", "bpop/__init__.py", "bpop/cost.py", "bpop/presets.py"):
        (package / file).parent.mkdir(parents=True, exist_ok=True)
        (package / file).write_text("# v1\n")
    monkeypatch.setattr(sources, "PACKAGE_DIR", package)
    (tmp_path / "book").mkdir()
    root = make_chapter_book(tmp_path / "book", "demo", {"01-a": PARAMS + cell("from icml26 import bpop")})
    nb = notebook(root, "01-a")
    before = content_hash(nb, "book")
    (package / "bpop" / "cost.py").write_text("# v2: another gpu step count\n")
    assert content_hash(nb, "book") == before
    (package / "bpop" / "presets.py").write_text("# v2\n")
    assert content_hash(nb, "book") != before


# -- 3. orphans of a runner that died are killed, their folders swept ---------------------------------
RUNNER_ENV, TOKEN_ENV = "ICML26_RUNNER", "ICML26_RUN_TOKEN"


def tagged_sleeper(tag: str, token: str, pids: Path) -> subprocess.Popen:
    """A process carrying a runner's tag, with a child of its own (a worker and its kernel)."""
    code = textwrap.dedent(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open({str(pids)!r}, "w").write(str(child.pid))
        time.sleep(300)
    """)
    env = dict(os.environ, **{RUNNER_ENV: tag, TOKEN_ENV: token})
    return subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)


def wait_gone(pids: list[int], seconds: float = 10) -> bool:
    def gone(pid):
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + seconds
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return all(gone(p) for p in pids)


def test_a_later_run_kills_orphans_of_a_dead_runner_and_sweeps_their_folders(tmp_path):
    root = make_chapter_book(tmp_path, "demo", {})
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    dead = f"{finished.pid}-1"  # a PID that no longer runs (and a start time no process has)
    alive = f"{os.getpid()}-{int(psutil.Process().create_time())}"  # this process: a live runner
    orphan = tagged_sleeper(dead, "orphan-token", tmp_path / "orphan.pid")
    keeper = tagged_sleeper(alive, "live-token", tmp_path / "keeper.pid")
    try:
        for file in ("orphan.pid", "keeper.pid"):
            deadline = time.monotonic() + 30
            while not ((tmp_path / file).exists() and (tmp_path / file).read_text()):
                assert time.monotonic() < deadline
                time.sleep(0.1)
        tmp = root / "_build" / "tmp"
        stale, live = tmp / f"run-{dead}-abcd1234", tmp / f"run-{alive}-efgh5678"
        for folder in (stale, live):
            (folder / "ledger").mkdir(parents=True)
            (folder / "worker.out").write_text("partial")
        messages: list[str] = []
        assert run(root, [], "smoke", echo=messages.append) == []
        orphans = [orphan.pid, int((tmp_path / "orphan.pid").read_text())]
        assert wait_gone(orphans), "the dead runner's worker or its child still runs"
        assert not stale.exists() and live.exists()
        kept = [keeper.pid, int((tmp_path / "keeper.pid").read_text())]
        assert not wait_gone(kept, seconds=0.5), "a live runner's worker was killed"
        assert any(m.startswith("[swept]") and str(finished.pid) in m for m in messages), messages
    finally:
        for proc in (orphan, keeper):
            ex.kill_tree(proc.pid, None)
            proc.wait(timeout=10)
        ex.kill_tree(None, "live-token")


# -- 4. nothing half-written is published; a read-only _build serves its cache --------------------
def fake_worker(content: str, error: str = ""):
    """A stand-in for the runner's worker process: writes ``content`` as the executed notebook."""

    def worker(root, nb, scale, label, threads, cell_timeout, total_timeout, work):
        (work / "ledger").mkdir(parents=True, exist_ok=True)
        (work / executed_path(root, nb, label).name).write_text(content)
        return Result(nb.name, label, 0.1, 1.0, 0, 0, False, error)

    return worker


def failing_writes(monkeypatch, folder: Path, code: int, active=lambda: True) -> None:
    """Writes under ``folder`` fail with ``code`` (ENOSPC: a full disk, EROFS: read-only) while
    ``active()``. A full disk creates the file before the write fails, as the kernel does."""
    real_open, real_mkdir = io.open, os.mkdir

    def under(path) -> bool:
        try:
            return active() and Path(os.fspath(path)).resolve().is_relative_to(folder.resolve())
        except (TypeError, ValueError):
            return False

    def fake_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+") and under(file):
            if code == errno.ENOSPC:
                real_open(file, mode, *args, **kwargs).close()
            raise OSError(code, os.strerror(code), str(file))
        return real_open(file, mode, *args, **kwargs)

    def fake_mkdir(path, *args, **kwargs):
        if under(path) and not os.path.exists(path):
            raise OSError(code, os.strerror(code), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)


def test_a_truncated_notebook_is_never_published(tmp_path, monkeypatch):
    root = make_chapter_book(tmp_path, "demo", {"01-a": PARAMS + cell("x = 1")})
    nb = notebook(root, "01-a")
    monkeypatch.setattr(ex, "_run_worker", fake_worker('{"cells": [{"cell_ty', "OSError: [Errno 28] No space"))
    (result,) = run(root, [nb], "smoke", **QUIET)
    assert not result.ok
    out = executed_path(root, nb, "smoke")
    assert not out.exists() or json.loads(out.read_text())  # never a truncated file at the final path


def test_a_failed_write_keeps_the_previous_result_and_is_one_line(tmp_path, monkeypatch):
    root = make_chapter_book(tmp_path, "demo", {"01-a": PARAMS + cell("x = 1")})
    nb = notebook(root, "01-a")
    good = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    monkeypatch.setattr(ex, "_run_worker", fake_worker(good))
    (first,) = run(root, [nb], "smoke", **QUIET)
    assert first.ok
    out = executed_path(root, nb, "smoke")
    published = {p: p.read_bytes() for p in out.parent.iterdir()}
    full = []  # the disk fills up once the worker has written its notebook

    def worker(*args):
        result = fake_worker(good.replace('"cells": []', '"cells": [], "new": 1'))(*args)
        full.append(True)
        return result

    monkeypatch.setattr(ex, "_run_worker", worker)
    failing_writes(monkeypatch, root / "_build", errno.ENOSPC, active=lambda: bool(full))
    (second,) = run(root, [nb], "smoke", force=True, **QUIET)
    full.clear()
    assert not second.ok and "No space left on device" in second.error and "\n" not in second.error
    assert {p: p.read_bytes() for p in out.parent.iterdir()} == published  # no temp file, no half record
    (again,) = run(root, [nb], "smoke", **QUIET)
    assert again.cached  # the previous record still certifies the previous notebook


def test_a_read_only_build_serves_a_fully_cached_run_without_a_lock(tmp_path, monkeypatch):
    root = make_chapter_book(tmp_path, "demo", {"01-a": PARAMS + cell("x = 1"), "02-b": PARAMS + cell("y = 2")})
    notebooks = discover(root)
    for nb in notebooks:
        fake_run(root, nb)
    failing_writes(monkeypatch, root / "_build", errno.EROFS)
    messages: list[str] = []
    results = run(root, notebooks, "smoke", echo=messages.append)
    assert [r.cached for r in results] == [True, True]
    assert sum("read-only" in m and m.startswith("warning") for m in messages) == 1, messages
    assert not list((root / "_build").rglob("*.lock"))
    # a notebook that must execute cannot: one line, no traceback
    notebooks[0].path.write_text(notebooks[0].source().replace("x = 1", "x = 3"))
    first, second = run(root, notebooks, "smoke", **QUIET)
    assert not first.ok and "Read-only file system" in first.error and second.cached


# -- 5. check reads the front matter; a chapter folder holds index.md and notebooks only -------------
GOOD = {"01-good": PARAMS + cell("x = 1")}
MALFORMED = {
    "invalid-yaml": (HEADER.replace("format_name: myst", "format_name: [myst") + PARAMS,
                     "invalid YAML front matter (line 6: expected ',' or ']', but got ':', "
                     "while parsing a flow sequence from line 5)"),
    "tab": (HEADER.replace("  language: python", "\tlanguage: python") + PARAMS, "invalid YAML front matter"),
    "unclosed": (HEADER.rstrip().rsplit("\n", 1)[0] + "\n\n# Title\n\n" + PARAMS, "never closed"),
    "kernelspec": (HEADER.replace("kernelspec:", "kernalspec:") + PARAMS,
                   "has no 'kernelspec' (found 'kernalspec': misspelled?)"),
    "plain": ("# Notes\n\nNot a notebook.\n", "no front matter"),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_check_and_run_name_a_malformed_notebook(tmp_path, monkeypatch, capsys, kind):
    text, reason = MALFORMED[kind]
    root = make_chapter_book(tmp_path, "demo", GOOD, toc_extra=("02-bad",))
    (root / "chapters" / "demo" / "02-bad.md").write_text(text)
    monkeypatch.chdir(root)
    for args in (["check"], ["check", "--chapter", "demo"]):
        assert cli.main(args) == 1
        out = capsys.readouterr().out
        assert "chapters/demo/02-bad.md: not a notebook (" in out and reason in out, out
    assert cli.main(["run", "--scale", "smoke", "--chapter", "demo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "chapters/demo/02-bad.md" in err[0] and reason in err[0], err
    assert not (root / "_build" / "executed").exists()  # nothing ran
    fake_run(root, notebook(root, "01-good"))
    assert "chapters/demo/02-bad.md: not a notebook" in refusal(root)  # build would render it unexecuted


def test_front_pages_and_chapter_indexes_are_not_notebooks(tmp_path):
    root = make_chapter_book(tmp_path, "demo", GOOD)
    (root / "front" / "about.md").write_text("---\ntitle: About\n---\n# About\n")
    assert sources.source_problems(root) == []
    (root / "chapters" / "demo" / "index.md").write_text("---\nbook:\n  question: [open\n---\n# Demo\n")
    (root / "front" / "nb.md").write_text(HEADER.replace("kernelspec:", "kernel_spec:"))
    assert sources.source_problems(root) == [
        "front/nb.md: not a notebook (the front matter has no 'kernelspec' (found 'kernel_spec': misspelled?))",
        "chapters/demo/index.md: invalid YAML front matter (line 3: expected ',' or ']', but got '<stream end>', "
        "while parsing a flow sequence from line 3)",
    ]


# -- 6 (and 1, 3 with a real kernel): error messages number cells as the source does ----------------
@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """One run of three tiny notebooks: one raises in code cell 3, one sleeps past the cell timeout
    in code cell 3, one prints VERSION-1 and the runner tag its kernel inherited."""
    tmp = tmp_path_factory.mktemp("pipeline36")
    tag_file = tmp / "tag"
    root = make_chapter_book(tmp, "demo", {
        "01-boom": PARAMS + cell("x = 1") + cell("raise ValueError('boom')") + cell("y = 2"),
        "02-sleepy": PARAMS + cell("import time") + cell("time.sleep(120)"),
        "03-version": PARAMS + cell(f"""
            import os
            open({str(tag_file)!r}, "w").write(os.environ.get("ICML26_RUNNER", ""))
            print("VERSION-1")
        """),
    })
    results = run(root, discover(root), "smoke", jobs=3, cores=3, cell_timeout=10, **QUIET)
    return root, {r.name: r for r in results}, tag_file


@pytest.mark.slow
def test_errors_number_cells_as_the_source_does(executed):
    root, results, _ = executed
    boom = results["demo/01-boom"]
    assert boom.error.startswith("code cell 3 (") and "raise ValueError" in boom.error, boom.error
    assert "raise ValueError" in code_cells(notebook(root, "01-boom").source())[2]  # check's numbering
    sleepy = results["demo/02-sleepy"]
    assert sleepy.error.startswith("code cell 3 ran longer than --cell-timeout 10 s"), sleepy.error


@pytest.mark.slow
def test_build_refuses_real_failed_and_edited_notebooks(executed):
    root, results, tag_file = executed
    assert results["demo/03-version"].ok
    message = refusal(root)
    assert "chapters/demo/01-boom.md: its run failed: code cell 3" in message
    assert "chapters/demo/02-sleepy.md: its run failed" in message and "03-version" not in message
    nb = notebook(root, "03-version")
    source = nb.source()
    try:
        nb.path.write_text(source.replace("VERSION-1", "VERSION-2"))
        assert "chapters/demo/03-version.md: stale" in refusal(root)
    finally:
        nb.path.write_text(source)
    # the worker's kernel carried this runner's tag (what a later run reads to find orphans)
    assert tag_file.read_text() == f"{os.getpid()}-{int(psutil.Process().create_time())}"
