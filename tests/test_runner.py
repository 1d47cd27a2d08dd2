"""The runner under stress (issue 29, points 1-3): concurrent runs, timeouts that leave no process
behind, and a command line that checks what it runs and answers in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from icml26.book import check_notebook, discover, run
from icml26.book.execute import _meta_path, executed_path, one_line
from minibook import PARAMS, cell, make_book


def cli(root: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, ICML26_THREADS="1")
    return subprocess.run([sys.executable, "-m", "icml26.book", *args], cwd=root, capture_output=True,
                          text=True, env=env, **kw)


def start_run(root: Path) -> subprocess.Popen:
    """The runner at smoke scale over ``front/``, in the background (the first of two racing runs)."""
    return subprocess.Popen([sys.executable, "-m", "icml26.book", "run", "--scale", "smoke", "--chapter", "front"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, ICML26_THREADS="1"))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_for(path: Path, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.2)


# -- 1. concurrent runs ------------------------------------------------------------------------------
def racing(marker: Path) -> str:
    """A notebook that holds only on its first execution (a second one finds the marker)."""
    return PARAMS + cell(f"""
        import os, time
        first = not os.path.exists({str(marker)!r})
        open({str(marker)!r}, "a").close()
        time.sleep(4)
    """) + cell("assert first, 'a second execution'")


@pytest.mark.slow
def test_concurrent_runs_take_turns_and_the_second_finds_the_cache(tmp_path):
    (tmp_path / "book").mkdir()
    root = make_book(tmp_path / "book", {"race": racing(tmp_path / "marker")})
    first = start_run(root)
    time.sleep(1.5)
    second = cli(root, "run", "--scale", "smoke", "--chapter", "front", timeout=300)
    out_first, err_first = first.communicate(timeout=300)
    assert first.returncode == 0, err_first
    assert second.returncode == 0, second.stdout + second.stderr  # it waited, then found the cache
    assert "cached" in second.stdout
    third = cli(root, "run", "--scale", "smoke", "--chapter", "front", timeout=300)
    assert "nothing to execute" in third.stdout


@pytest.mark.slow
def test_a_failed_concurrent_run_is_never_certified_by_another(tmp_path):
    (tmp_path / "book").mkdir()
    root = make_book(tmp_path / "book", {"race": racing(tmp_path / "marker")})
    first = start_run(root)
    time.sleep(1.5)
    # the forced second run waits for the first, then executes and fails
    second = cli(root, "run", "--scale", "smoke", "--chapter", "front", "--force", timeout=300)
    first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 1, second.stderr
    nb = discover(root)[0]
    out = executed_path(root, nb, "smoke")
    record = json.loads(_meta_path(out).read_text())
    assert "a second execution" in record["error"]  # the record describes the notebook that is there
    assert "a second execution" in out.read_text()
    third = cli(root, "run", "--scale", "smoke", "--chapter", "front", timeout=300)
    assert "nothing to execute" not in third.stdout and third.returncode == 1


@pytest.mark.slow
def test_a_record_certifies_only_the_notebook_it_was_written_for(tmp_path):
    root = make_book(tmp_path, {"a": PARAMS + cell("x = 1")})
    quiet = {"echo": lambda *_: None}
    (first,) = run(root, discover(root), "smoke", **quiet)
    assert first.ok and not first.cached
    (again,) = run(root, discover(root), "smoke", **quiet)
    assert again.cached
    out = executed_path(root, discover(root)[0], "smoke")
    out.write_text(out.read_text().replace('"x = 1"', '"x = 2"'))  # another run's output lands here
    (third,) = run(root, discover(root), "smoke", **quiet)
    assert not third.cached and third.ok


# -- 2. --timeout kills the whole process tree ------------------------------------------------------
def spawner(pids: Path, then: str) -> str:
    """A notebook whose cell starts two children that ignore SIGTERM, one in a new session."""
    child = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
    return PARAMS + cell(f"""
        import subprocess, sys, time
        a = subprocess.Popen([sys.executable, "-c", {child!r}])
        b = subprocess.Popen([sys.executable, "-c", {child!r}], start_new_session=True)
        open({str(pids)!r}, "w").write(f"{{a.pid}} {{b.pid}}")
        {then}
    """)


@pytest.mark.slow
@pytest.mark.parametrize("then, timeout, error", [
    ("time.sleep(300)", 12, "--timeout 12"),  # the notebook timeout
    ("x = 1", 300, ""),  # a notebook that finishes and leaves its children running
])
def test_no_process_survives_its_notebook(tmp_path, then, timeout, error):
    pids = tmp_path / "pids"
    root = make_book(tmp_path, {"spawn": spawner(pids, then)})
    (result,) = run(root, discover(root), "smoke", total_timeout=timeout, echo=lambda *_: None)
    assert result.error == error or (error and error in result.error), result.error
    children = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 10
    while not all(gone(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(gone(p) for p in children), f"left running: {[p for p in children if not gone(p)]}"


@pytest.mark.slow
def test_sigterm_to_the_runner_kills_the_running_notebooks(tmp_path):
    pids = tmp_path / "pids"
    root = make_book(tmp_path, {"spawn": spawner(pids, "time.sleep(300)")})
    proc = subprocess.Popen([sys.executable, "-m", "icml26.book", "run", "--scale", "smoke", "--chapter", "front"],
                            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, ICML26_THREADS="1"))
    try:
        wait_for(pids)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    children = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 10
    while not all(gone(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(gone(p) for p in children)


# -- 3. the command line: the same checks as `check`, one line, naming the option --------------------
def test_check_rejects_a_syntax_error(tmp_path):
    root = make_book(tmp_path, {
        "broken": PARAMS + cell("def f(:\n    return 1"),
        "magic": PARAMS + cell("%matplotlib inline\nif True:\n    !ls\n    x = 1") + cell("%%bash\necho (\n"),
    })
    problems = {nb.path.stem: check_notebook(nb) for nb in discover(root)}
    assert len(problems["broken"]) == 1 and "code cell 2 is not valid Python (line 1" in problems["broken"][0]
    assert problems["magic"] == []
    proc = cli(root, "check")
    assert proc.returncode == 1 and "not valid Python" in proc.stdout


@pytest.mark.parametrize("body, message", [
    (cell("x = 1"), "no code cell tagged 'parameters'"),
    (PARAMS + cell("x = (1"), "not valid Python"),
])
def test_run_applies_the_checks_of_check(tmp_path, body, message):
    root = make_book(tmp_path, {"bad": body})
    proc = cli(root, "run", "--scale", "smoke")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not (root / "_build" / "executed").exists()  # nothing ran


@pytest.mark.parametrize("option, value", [("--jobs", "0"), ("--cell-timeout", "soon"), ("--timeout", "-3"),
                                           ("--jobs", "1.5")])
def test_bad_option_values_name_the_option(option, value):
    proc = cli(Path(__file__).resolve().parents[1], "run", option, value)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"argument {option}: expected a positive integer, got '{value}'" in lines[0]


@pytest.mark.parametrize("scale, cell_s, total_s", [("smoke", 900, 1800), ("book", 3600, 7200), ("gpu", 3600, 7200)])
def test_wall_limits_default_by_scale_and_yield_to_the_options(scale, cell_s, total_s):
    from icml26.book.__main__ import _default_timeouts, _parser

    args = _parser().parse_args(["run", "--scale", scale])
    _default_timeouts(args)
    assert (args.cell_timeout, args.timeout) == (cell_s, total_s)
    args = _parser().parse_args(["run", "--scale", scale, "--cell-timeout", "5", "--timeout", "7"])
    _default_timeouts(args)
    assert (args.cell_timeout, args.timeout) == (5, 7)


def test_dry_needs_the_gpu_scale():
    proc = cli(Path(__file__).resolve().parents[1], "run", "--dry", "--scale", "smoke", "--chapter", "front")
    assert proc.returncode == 2 and "--dry needs --scale gpu" in proc.stderr


@pytest.mark.slow
def test_a_cell_timeout_is_one_line(tmp_path):
    root = make_book(tmp_path, {"slow": PARAMS + cell("import time\ntime.sleep(60)")})
    proc = cli(root, "run", "--scale", "smoke", "--cell-timeout", "3", timeout=120)
    assert proc.returncode == 1
    failed = [ln for ln in proc.stderr.splitlines() if ln.startswith("FAILED")]
    assert len(proc.stderr.strip().splitlines()) == 1 and len(failed) == 1, proc.stderr
    assert "--cell-timeout 3 s" in failed[0] and "import time" in failed[0]


def test_the_worker_imports_neither_torch_nor_the_iri_grammar():
    """The worker (a script, ``-P``) drives papermill only: no torch (1.8 s) and no rfc3987_syntax
    grammar (2.3 s) at each notebook's start."""
    from icml26.book.execute import WORKER

    code = ("import runpy, sys\n"
            f"runpy.run_path({str(WORKER)!r}, run_name='worker')\n"
            "import jupytext, papermill, nbformat.validator\n"
            "print('torch' in sys.modules, sys.modules.get('rfc3987_syntax') is not None)")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_one_line():
    assert one_line("a\n\n  b  \nc") == "a; b; c"
    assert len(one_line("x" * 1000)) == 600


def test_job_threads_respect_a_thread_count_the_caller_set():
    from icml26.book.execute import job_threads
    from icml26.book.sources import BookError

    assert job_threads(2, 2, env={}) == 1 and job_threads(8, 2, env={}) == 4 and job_threads(1, 4, env={}) == 1
    assert job_threads(2, 1, env={"ICML26_THREADS": "1"}) == 1  # "measured with one thread" means one
    assert job_threads(2, 1, env={"ICML26_THREADS": " "}) == 2
    for bad in ("0", "two", "-1"):
        with pytest.raises(BookError, match="ICML26_THREADS"):
            job_threads(2, 1, env={"ICML26_THREADS": bad})
