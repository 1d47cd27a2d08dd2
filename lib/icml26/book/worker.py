"""The process that executes one notebook (started by :func:`icml26.book.execute.run`, one per notebook).

Run as a script, ``python -P worker.py SRC OUT --scale S --cwd DIR --cell-timeout N``, not as
``python -m icml26.book``: importing the package imports the core, and with it torch (1.8 s), which
this process never uses; it only converts the notebook with jupytext and drives its kernel with
papermill. So it imports nothing from ``icml26`` and keeps to the standard library at the top.
It prints one JSON line: wall and CPU seconds (its own and its kernel's), the kernel's peak memory and
an error message ("" on success).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

# nbformat imports jsonschema, which, when ``rfc3987_syntax`` is installed, builds a Lark grammar for
# its "iri" format checker at import (2.3 s of every notebook's CPU time). Notebook schemas use no
# such format. A None entry makes that import fail, and jsonschema goes on without the checker (its
# fallback for a missing optional dependency).
sys.modules.setdefault("rfc3987_syntax", None)


def one_line(text: str, limit: int = 600) -> str:
    """An error message on one line: its non-empty lines joined with '; ', shortened to ``limit``."""
    line = "; ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def execute_one(src: Path, out: Path, scale: str, cwd: Path, cell_timeout: int) -> dict:
    """Worker: convert ``src`` with jupytext, run it with papermill; returns a JSON-able report."""
    import jupytext
    import papermill as pm
    from nbclient.exceptions import CellTimeoutError
    from papermill.exceptions import PapermillExecutionError

    notebook = jupytext.read(src)
    notebook.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    out.parent.mkdir(parents=True, exist_ok=True)
    error = ""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / out.name
        jupytext.write(notebook, staged, fmt="ipynb")
        try:
            pm.execute_notebook(
                str(staged), str(out), parameters={"SCALE": scale}, kernel_name="python3",
                cwd=str(cwd), progress_bar=False, execution_timeout=cell_timeout, log_output=False,
            )
        except PapermillExecutionError as exc:
            first = exc.source.strip().splitlines()[0] if exc.source.strip() else ""
            number = failed_cell_number(out)
            where = f"code cell {number}" if number else f"the cell run as In [{exc.exec_count}]"
            error = f"{where} ({first[:60]!r}): {exc.ename}: {one_line(exc.evalue)}"
        except CellTimeoutError as exc:
            lines = [ln.strip() for ln in str(exc).splitlines()]
            preview = lines[lines.index("-------------------") + 1] if "-------------------" in lines[:-1] else ""
            number = failed_cell_number(out)
            error = (f"{f'code cell {number}' if number else 'a cell'} ran longer than --cell-timeout "
                     f"{cell_timeout} s" + (f" ({preview[:60]!r})" if preview else ""))
        except Exception as exc:  # kernel died, bad notebook
            error = f"{type(exc).__name__}: {one_line(exc)}"
    seconds = time.perf_counter() - start
    kernel, worker = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    peak_mib = kernel.ru_maxrss / 2**20 if sys.platform == "darwin" else kernel.ru_maxrss / 1024
    cpu = kernel.ru_utime + kernel.ru_stime + worker.ru_utime + worker.ru_stime
    return {"seconds": seconds, "peak_mib": peak_mib, "cpu_seconds": cpu, "error": error}


def failed_cell_number(executed: Path) -> int | None:
    """The number of the code cell where papermill stopped, counting the source's code cells from 1
    as ``check`` does: papermill's injected parameters cell is not counted. ``None`` when the
    executed notebook cannot be read."""
    try:
        cells = json.loads(executed.read_text())["cells"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    number, last_run = 0, None
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {})
        if "injected-parameters" in meta.get("tags", []):
            continue
        number += 1
        state = meta.get("papermill", {})
        if state.get("exception"):
            return number
        if state.get("status") not in (None, "pending"):
            last_run = number  # a timed-out cell is the last one papermill started
    return last_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="worker.py", description="execute one notebook (icml26.book's worker)")
    parser.add_argument("src", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--scale", required=True)
    parser.add_argument("--cwd", type=Path, required=True)
    parser.add_argument("--cell-timeout", type=int, default=900)
    args = parser.parse_args(argv)
    report = execute_one(args.src, args.out, args.scale, args.cwd, args.cell_timeout)
    print(json.dumps(report))
    return 1 if report["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
