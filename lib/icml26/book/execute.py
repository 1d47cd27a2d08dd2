"""Execute notebooks with papermill, several at a time, re-running only what changed.

Each notebook runs in its own worker process (``python -m icml26.book _execute``), so that its
peak memory can be read from the kernel it started and its environment (threads, scale, ledger
folder) is its own.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

from .sources import Notebook, content_hash


@dataclass
class Result:
    """How one notebook's execution went."""

    name: str
    scale: str
    seconds: float
    peak_mib: float
    claims_held: int
    claims_total: int
    cached: bool
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def executed_path(root: Path, nb: Notebook, scale: str) -> Path:
    return root / "_build" / "executed" / scale / nb.rel.with_suffix(".ipynb")


def ledger_dir(root: Path, nb: Notebook, scale: str) -> Path:
    return root / "_build" / "ledger" / scale / nb.chapter / nb.path.stem


def _meta_path(out: Path) -> Path:
    return out.with_suffix(".run.json")


def _claims(folder: Path) -> tuple[int, int]:
    held = total = 0
    for file in sorted(folder.glob("*.json")):
        for claim in json.loads(file.read_text())["claims"]:
            if claim["status"] in ("holds", "fails"):
                total += 1
                held += claim["status"] == "holds"
    return held, total


def execute_one(src: Path, out: Path, scale: str, cwd: Path, cell_timeout: int) -> dict:
    """Worker: convert ``src`` with jupytext, run it with papermill; returns a JSON-able report."""
    import jupytext
    import papermill as pm
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
            error = f"cell {exc.exec_count} ({first[:60]!r}): {exc.ename}: {exc.evalue}"
        except Exception as exc:  # kernel died, timeout, bad notebook
            error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    peak_mib = peak / 2**20 if sys.platform == "darwin" else peak / 1024
    return {"seconds": seconds, "peak_mib": peak_mib, "error": error}


def _run_worker(root: Path, nb: Notebook, scale: str, threads: int, cell_timeout: int,
                total_timeout: int) -> Result:
    out = executed_path(root, nb, scale)
    ledger = ledger_dir(root, nb, scale)
    ledger.mkdir(parents=True, exist_ok=True)
    for stale in ledger.glob("*.json"):
        stale.unlink()
    env = dict(os.environ)
    env.update(
        ICML26_SCALE=scale,
        ICML26_THREADS=str(threads),
        ICML26_LEDGER_DIR=str(ledger),
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        PYTHONHASHSEED="0",
        MPLBACKEND="module://matplotlib_inline.backend_inline",
        # progress bars are for readers at a keyboard, not for the rendered book
        TQDM_DISABLE=env.get("TQDM_DISABLE", "1"),
    )
    cmd = [sys.executable, "-m", "icml26.book", "_execute", str(nb.path), str(out),
           "--scale", scale, "--cwd", str(nb.path.parent), "--cell-timeout", str(cell_timeout)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=total_timeout)
        lines = proc.stdout.strip().splitlines()
        report = json.loads(lines[-1]) if lines else {}
        if proc.returncode != 0 and not report.get("error"):
            report["error"] = (proc.stderr.strip().splitlines() or ["worker failed"])[-1]
    except subprocess.TimeoutExpired:
        report = {"error": f"timed out after {total_timeout} s"}
    except json.JSONDecodeError:
        report = {"error": "worker printed no report"}
    held, total = _claims(ledger)
    result = Result(nb.name, scale, report.get("seconds", time.perf_counter() - start),
                    report.get("peak_mib", float("nan")), held, total, False, report.get("error", ""))
    return result


def run(root: Path, notebooks: list[Notebook], scale: str, *, jobs: int = 1, force: bool = False,
        cell_timeout: int = 600, total_timeout: int = 1800, cores: int | None = None,
        echo=print) -> list[Result]:
    """Execute ``notebooks`` at ``scale`` (cache hits are skipped); returns one result each."""
    cores = cores or os.cpu_count() or 1
    threads = max(1, cores // max(1, jobs))
    results: list[Result] = []
    todo: list[tuple[Notebook, str]] = []
    for nb in notebooks:
        key = content_hash(nb, scale)
        out = executed_path(root, nb, scale)
        meta = _meta_path(out)
        if not force and out.exists() and meta.exists():
            previous = json.loads(meta.read_text())
            if previous.get("hash") == key and not previous.get("error"):
                previous.update(cached=True)
                previous.pop("hash", None)
                results.append(Result(**previous))
                echo(f"[cached]  {nb.name} ({scale})")
                continue
        todo.append((nb, key))
    if not todo:
        echo(f"nothing to execute: all {len(results)} notebook(s) are up to date at scale {scale}")
        return results
    echo(f"executing {len(todo)} notebook(s) at scale {scale} with {jobs} job(s), {threads} thread(s) each")
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(_run_worker, root, nb, scale, threads, cell_timeout, total_timeout): (nb, key)
                   for nb, key in todo}
        for future in as_completed(futures):
            nb, key = futures[future]
            result = future.result()
            results.append(result)
            elapsed = time.perf_counter() - started
            status = "ok    " if result.ok else "FAILED"
            echo(f"[{status}]  {nb.name} ({scale}) {result.seconds:6.1f} s  [elapsed {elapsed:6.1f} s]")
            if result.ok:
                meta = _meta_path(executed_path(root, nb, scale))
                meta.write_text(json.dumps({**asdict(result), "hash": key}, indent=1))
            else:
                echo(f"          {nb.rel}: {result.error}")
    order = {nb.name: i for i, nb in enumerate(notebooks)}
    results.sort(key=lambda r: order.get(r.name, 0))
    return results


def summary_table(results: list[Result]) -> str:
    """The closing table: notebook, scale, seconds, peak memory, claims held, cache."""
    width = max([44] + [len(r.name) for r in results])
    header = f"{'notebook':{width}s} {'scale':6s} {'seconds':>8s} {'peak MiB':>9s} {'claims':>7s}  status"
    lines = [header, "-" * len(header)]
    for r in results:
        claims = f"{r.claims_held}/{r.claims_total}"
        status = "cached" if r.cached else ("ok" if r.ok else "FAILED")
        lines.append(f"{r.name:{width}s} {r.scale:6s} {r.seconds:8.1f} {r.peak_mib:9.0f} {claims:>7s}  {status}")
    total = sum(r.seconds for r in results if not r.cached)
    lines.append(f"{len(results)} notebook(s), {sum(not r.ok for r in results)} failed, "
                 f"{sum(r.cached for r in results)} cached, {total:.1f} s of execution")
    return "\n".join(lines)
