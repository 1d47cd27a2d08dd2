"""Static checks of notebook sources (run by the tests) and the nbval re-run of executed notebooks."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from .execute import executed_path
from .sources import BookError, Notebook, code_cells, options_and_body, python_of

SANITIZE = r"""[timings]
regex: \d+(\.\d+)?\s*(ns|us|µs|ms|s|sec|secs|seconds|min|minutes)\b
replace: <TIME>

[memory]
regex: \d+(\.\d+)?\s*(B|KB|KiB|MB|MiB|GB|GiB)\b
replace: <MEM>

[addresses]
regex: 0x[0-9a-fA-F]+
replace: <ADDR>
"""

__all__ = ["SANITIZE", "check_notebook", "code_cells", "nbval", "syntax_error"]


def syntax_error(body: str) -> str:
    """'' when a code cell's body is valid Python (IPython magics and shell escapes aside),
    else the error as 'line N: message'."""
    try:
        compile(python_of(body), "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return ""


def check_notebook(nb: Notebook) -> list[str]:
    """Problems with one notebook source: a code cell that is not valid Python, no parameters cell
    setting SCALE, a ledger that is never asserted, or a checked cell that prints something
    non-deterministic by construction."""
    problems = []
    cells = [options_and_body(c) for c in code_cells(nb.source())]
    for number, (_, body) in enumerate(cells, start=1):
        error = syntax_error(body)
        if error:
            problems.append(f"{nb.rel}: code cell {number} is not valid Python ({error})")
    params = [body for opts, body in cells if "parameters" in opts]
    if not params:
        problems.append(f"{nb.rel}: no code cell tagged 'parameters'")
    elif not re.search(r"^SCALE\s*=", params[0], re.M):
        problems.append(f"{nb.rel}: the parameters cell does not set SCALE")
    bodies = [body for _, body in cells]
    if any("Ledger(" in b for b in bodies):
        last = [b for b in bodies if b.strip()][-1]
        if ".assert_all()" not in last:
            problems.append(f"{nb.rel}: a notebook with a Ledger must end with ledger.assert_all()")
    for body in bodies:
        if "NBVAL_CHECK_OUTPUT" in body and re.search(r"time_fn|perf_counter|Timer\(|PeakMemory", body):
            problems.append(f"{nb.rel}: a checked cell (NBVAL_CHECK_OUTPUT) prints timings or memory")
    return problems


def nbval(root: Path, notebooks: list[Notebook], scale: str, *, jobs: int = 1, extra: list[str] | None = None) -> int:
    """Re-run executed notebooks with ``pytest --nbval-lax``: cells marked ``# NBVAL_CHECK_OUTPUT``
    must print what they printed the first time (timings, memory and addresses sanitised)."""
    paths = []
    for nb in notebooks:
        path = executed_path(root, nb, scale)
        if not path.exists():
            raise BookError(f"not executed at scale {scale}: {nb.rel} (run: python -m icml26.book run)")
        paths.append(str(path))
    with tempfile.TemporaryDirectory() as tmp:
        sanitize = Path(tmp) / "sanitize.cfg"
        sanitize.write_text(SANITIZE)
        threads = max(1, (os.cpu_count() or 1) // max(1, jobs))
        env = dict(os.environ, ICML26_SCALE=scale, ICML26_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   ICML26_LEDGER_DIR=str(Path(tmp) / "ledger"), PYTHONHASHSEED="0", TQDM_DISABLE="1",
                   MPLBACKEND="module://matplotlib_inline.backend_inline")
        cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
               "--nbval-sanitize-with", str(sanitize), "--nbval-cell-timeout", "900", "-q",
               "-o", "addopts=", "--rootdir", str(root)]
        if jobs > 1 and len(paths) > 1:
            cmd += ["-n", str(jobs), "--dist", "loadfile"]
        cmd += (extra or []) + paths
        return subprocess.call(cmd, env=env, cwd=root)
