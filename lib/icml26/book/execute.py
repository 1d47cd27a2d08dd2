"""Execute notebooks with papermill, several at a time, re-running only what changed.

Each notebook runs in its own worker process (:mod:`icml26.book.worker`, run as a script), so that its
peak memory can be read from the kernel it started and its environment (threads, scale, ledger
folder) is its own.

**Safe under concurrency.** Two runs of the same notebook at the same scale (two terminals, or
a run and a build) take turns: a per-notebook lock (``fcntl.flock`` on ``<name>.lock`` beside the
executed notebook) is held while the notebook executes and while its results are committed, and
a second run that waited finds the first one's result in the cache. The worker writes into a
private folder; the executed notebook, its ledger folder and its run record are then moved into
place under the lock, and the record holds the SHA-256 of the notebook it describes, so a record
can only certify the output it was written for.

**No process left behind.** Every worker carries a unique token in its environment, which the
kernel and everything a cell starts inherit. On every exit path (success, failure, ``--timeout``,
an interrupt or SIGTERM of the runner) the worker's process tree and every process holding the
token are killed with SIGKILL, so a child that ignores SIGTERM, or one that called ``setsid``, does
not survive its notebook. A runner that cannot clean up (``kill -9``) leaves its workers behind:
they also carry the runner's PID and start time (``ICML26_RUNNER``), and so do its private folders
(``_build/tmp/run-<pid>-<start>-*``); every run first kills the processes and removes the folders
of runners that are no longer alive.

**Nothing half-written is published.** The notebook and its record are both complete inside the
private folder before anything is moved into place (renames only); a write that fails (a full
disk) leaves the previous result as it was and is reported as one line. On a read-only ``_build``
a run whose notebooks are all cached goes ahead without locks, with a warning.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..core.scale import DRY_ENV, dry_run_enabled
from .sources import BookError, Notebook, content_hash
from .worker import one_line

WORKER = Path(__file__).with_name("worker.py")  # run as a script: see its docstring

TOKEN_ENV = "ICML26_RUN_TOKEN"
RUNNER_ENV = "ICML26_RUNNER"  # "<pid>-<start time>" of the runner that started a worker


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
    cpu_seconds: float = float("nan")   # user + system CPU of the worker and its kernel: the load-free cost

    @property
    def ok(self) -> bool:
        return not self.error


def run_label(scale: str) -> str:
    """The folder name of a run: the scale, or ``gpu-dry`` for a dry run of the gpu scale
    (``ICML26_DRY=1``), whose outputs must never be taken for the real gpu scale's."""
    return f"{scale}-dry" if scale == "gpu" and dry_run_enabled() else scale


def executed_path(root: Path, nb: Notebook, scale: str) -> Path:
    return root / "_build" / "executed" / scale / nb.rel.with_suffix(".ipynb")


def ledger_dir(root: Path, nb: Notebook, scale: str) -> Path:
    return root / "_build" / "ledger" / scale / nb.chapter / nb.path.stem


def _meta_path(out: Path) -> Path:
    return out.with_suffix(".run.json")


def _lock_path(out: Path) -> Path:
    return out.with_suffix(".lock")


def _claims(folder: Path) -> tuple[int, int]:
    held = total = 0
    for file in sorted(folder.glob("*.json")):
        for claim in json.loads(file.read_text())["claims"]:
            if claim["status"] in ("holds", "fails"):
                total += 1
                held += claim["status"] == "holds"
    return held, total


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- processes -------------------------------------------------------------------------------------
def runner_tag(pid: int | None = None) -> str:
    """``"<pid>-<start time>"`` of a process (this one by default): a PID cannot be mistaken for a
    later process that reuses it."""
    import psutil

    proc = psutil.Process(pid or os.getpid())
    return f"{proc.pid}-{int(proc.create_time())}"


def runner_alive(tag: str) -> bool:
    """Whether the runner a tag names is still running (a tag that cannot be read counts as alive)."""
    import psutil

    try:
        pid, started = (int(part) for part in tag.split("-"))
    except ValueError:
        return True
    try:
        proc = psutil.Process(pid)
        return abs(int(proc.create_time()) - started) <= 1 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


_UNTAGGED_AGE_S = 86400


def sweep_orphans(root: Path) -> tuple[int, int, set[str]]:
    """Kill the workers (and everything they started) of runners that died without cleaning up,
    and remove those runners' private folders ``_build/tmp/run-<pid>-<start>-*``. Returns the
    number of processes killed, of folders removed, and the dead runners' tags."""
    import psutil

    dead: set[str] = set()
    orphans: dict[int, str | None] = {}
    uid = os.getuid()
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.pid == os.getpid() or (proc.info["uids"] and proc.info["uids"].real != uid):
                continue
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        tag = env.get(RUNNER_ENV)
        if tag and (tag in dead or not runner_alive(tag)):
            dead.add(tag)
            orphans[proc.pid] = env.get(TOKEN_ENV)
    tokens = {token for token in orphans.values() if token}
    killed = sum(kill_tree(None, token) for token in tokens)
    killed += sum(kill_tree(pid, None) for pid, token in orphans.items() if not token)
    removed = 0
    tmp_root = root / "_build" / "tmp"
    for folder in sorted(tmp_root.glob("run-*")) if tmp_root.is_dir() else []:
        parts = folder.name.split("-")
        tag = "-".join(parts[1:3]) if len(parts) >= 4 else ""
        orphaned = False
        if tag:
            orphaned = tag in dead or not runner_alive(tag)
        else:  # written before folders were tagged: only once it is a day old
            with contextlib.suppress(OSError):
                orphaned = time.time() - folder.stat().st_mtime > _UNTAGGED_AGE_S
        if folder.is_dir() and orphaned:
            if tag:
                dead.add(tag)
            shutil.rmtree(folder, ignore_errors=True)
            removed += not folder.exists()
    return killed, removed, dead


def _tagged(token: str) -> list:
    """This user's processes whose environment carries ``token``."""
    import psutil

    found = []
    uid = os.getuid()
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.pid == os.getpid() or (proc.info["uids"] and proc.info["uids"].real != uid):
                continue
            if proc.environ().get(TOKEN_ENV) == token:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _alive(proc) -> bool:
    import psutil

    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_tree(pid: int | None, token: str | None) -> int:
    """SIGKILL the process ``pid``, its descendants, and every process whose environment holds
    ``token`` (what escaped the tree by ``setsid`` or reparenting). Returns how many were killed."""
    import psutil

    killed = 0
    for _ in range(5):  # a process may fork while the others die
        victims = {}
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(pid)
                for proc in [root, *root.children(recursive=True)]:
                    victims[proc.pid] = proc
        if token:
            victims.update({p.pid: p for p in _tagged(token)})
        victims = {k: p for k, p in victims.items() if _alive(p)}
        if not victims:
            break
        for proc in victims.values():
            with contextlib.suppress(psutil.Error):
                proc.kill()
                killed += 1
        psutil.wait_procs(list(victims.values()), timeout=5)
    return killed


_LIVE: dict[str, subprocess.Popen] = {}
_LIVE_LOCK = threading.Lock()


def _kill_live() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE.items())
    for token, proc in live:
        kill_tree(proc.pid, token)


# -- the cache -------------------------------------------------------------------------------------
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


@contextlib.contextmanager
def _locked(out: Path, *, wait: bool = True, echo=None, name: str = ""):
    """Hold the notebook's lock; with ``wait=False`` yield False at once when another run holds it,
    and None when no lock can be taken because the tree is read-only (``wait=True`` raises then)."""
    path = _lock_path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")
    except OSError as exc:
        if wait or exc.errno not in _READ_ONLY:
            raise
        yield None
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            if echo is not None:
                echo(f"[waiting] {name}: another run is executing it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _cached(out: Path, key: str) -> Result | None:
    """The recorded result when the notebook is up to date and its record describes this very file."""
    meta = _meta_path(out)
    if not (out.exists() and meta.exists()):
        return None
    try:
        previous = json.loads(meta.read_text())
    except (json.JSONDecodeError, OSError):
        return None
    if previous.get("hash") != key or previous.get("error") or previous.get("output_sha256") != _sha256(out):
        return None
    names = {f.name for f in fields(Result)}
    return Result(**{k: v for k, v in previous.items() if k in names} | {"cached": True})


def _complete_json(path: Path) -> bool:
    try:
        json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return True


def _commit(root: Path, nb: Notebook, label: str, key: str, work: Path, result: Result) -> None:
    """Publish a finished run (under the lock): its notebook, ledger and record are complete inside
    ``work`` (the same filesystem) before the first rename, so a failed write (``OSError``, raised
    to the caller) leaves the previous result in place. A notebook that is not complete JSON (its
    worker could not finish writing it) is not published and the run counts as failed."""
    out = executed_path(root, nb, label)
    ledger = ledger_dir(root, nb, label)
    produced = work / out.name
    if produced.exists() and not _complete_json(produced):
        produced.unlink()
        result.error = result.error or "the executed notebook was written incompletely"
    record = {**asdict(result), "hash": key, "output_sha256": _sha256(produced) if produced.exists() else ""}
    staged = work / "record.json"
    staged.write_text(json.dumps(record, indent=1))
    out.parent.mkdir(parents=True, exist_ok=True)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    # both files are complete: from here on only renames, the record last
    _meta_path(out).unlink(missing_ok=True)
    if produced.exists():
        os.replace(produced, out)
    elif out.exists():
        out.unlink()  # no output: a stale notebook must not stay beside this run's record
    if ledger.exists():
        os.replace(ledger, work / "previous-ledger")
    os.replace(work / "ledger", ledger)
    os.replace(staged, _meta_path(out))


def _run_worker(root: Path, nb: Notebook, scale: str, label: str, threads: int, cell_timeout: int,
                total_timeout: int, work: Path) -> Result:
    """Execute one notebook into ``work`` (its notebook and ``ledger/``); never leaves a process behind."""
    out = work / executed_path(root, nb, label).name
    ledger = work / "ledger"
    ledger.mkdir(parents=True)
    token = uuid.uuid4().hex
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
        **{TOKEN_ENV: token, RUNNER_ENV: runner_tag()},
    )
    if label.endswith("-dry"):
        env[DRY_ENV] = "1"
    else:
        env.pop(DRY_ENV, None)
    # -P: the worker is a script inside the package; its folder must not shadow other modules
    cmd = [sys.executable, "-P", str(WORKER), str(nb.path), str(out),
           "--scale", scale, "--cwd", str(nb.path.parent), "--cell-timeout", str(cell_timeout)]
    start = time.perf_counter()
    report: dict = {}
    # Files, not pipes: a process a cell left behind may hold the worker's stdout open.
    stdout_path, stderr_path = work / "worker.out", work / "worker.err"
    with open(stdout_path, "w") as stdout_file, open(stderr_path, "w") as stderr_file:
        proc = subprocess.Popen(cmd, env=env, stdout=stdout_file, stderr=stderr_file, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    with _LIVE_LOCK:
        _LIVE[token] = proc
    try:
        try:
            proc.wait(timeout=total_timeout)
        except subprocess.TimeoutExpired:
            report = {"error": f"the notebook ran longer than --timeout {total_timeout} s"}
        else:
            stdout, stderr = stdout_path.read_text(), stderr_path.read_text()
            lines = stdout.strip().splitlines()
            try:
                report = json.loads(lines[-1]) if lines else {}
            except json.JSONDecodeError:
                report = {}
            if proc.returncode != 0 and not report.get("error"):
                tail = stderr.strip().splitlines()
                report["error"] = one_line(tail[-1] if tail else f"worker exited with status {proc.returncode}")
    finally:
        kill_tree(proc.pid, token)
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        with _LIVE_LOCK:
            _LIVE.pop(token, None)
    held, total = _claims(ledger)
    return Result(nb.name, label, report.get("seconds", time.perf_counter() - start),
                  report.get("peak_mib", float("nan")), held, total, False, report.get("error", ""),
                  report.get("cpu_seconds", float("nan")))


def _execute(root: Path, nb: Notebook, scale: str, label: str, key: str, force: bool, threads: int,
             cell_timeout: int, total_timeout: int, echo, aborted: threading.Event) -> Result:
    """Execute and publish one notebook; a failed write (``OSError``) is a failed run, in one line."""
    try:
        return _execute_locked(root, nb, scale, label, key, force, threads, cell_timeout, total_timeout, echo,
                               aborted)
    except OSError as exc:
        return Result(nb.name, label, 0.0, float("nan"), 0, 0, False,
                      one_line(f"cannot write under {root / '_build'}: {exc}"))


def _execute_locked(root: Path, nb: Notebook, scale: str, label: str, key: str, force: bool, threads: int,
                    cell_timeout: int, total_timeout: int, echo, aborted: threading.Event) -> Result:
    out = executed_path(root, nb, label)
    with _locked(out, echo=echo, name=nb.name):
        if not force:
            hit = _cached(out, key)
            if hit is not None:  # another run executed it while this one waited
                return hit
        tmp_root = root / "_build" / "tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"run-{runner_tag()}-", dir=tmp_root))
        try:
            result = _run_worker(root, nb, scale, label, threads, cell_timeout, total_timeout, work)
            if aborted.is_set():
                result.error = result.error or "interrupted"
            else:
                _commit(root, nb, label, key, work, result)
            return result
        finally:
            shutil.rmtree(work, ignore_errors=True)


def job_threads(cores: int, jobs: int, env: dict | None = None) -> int:
    """Torch threads of each notebook job: ``ICML26_THREADS`` when the caller set it (a positive
    int: a timing measured "with one thread" then really has one), else ``cores // jobs``, at least 1."""
    value = (os.environ if env is None else env).get("ICML26_THREADS", "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise BookError(f"ICML26_THREADS must be a positive integer, got {value!r}")
        return int(value)
    return max(1, cores // max(1, jobs))


def run(root: Path, notebooks: list[Notebook], scale: str, *, jobs: int = 1, force: bool = False,
        cell_timeout: int = 600, total_timeout: int = 1800, cores: int | None = None,
        echo=print) -> list[Result]:
    """Execute ``notebooks`` at ``scale`` (cache hits are skipped); returns one result each.

    With ``ICML26_DRY=1`` and scale ``gpu`` the outputs go to ``_build/executed/gpu-dry`` (see
    :func:`run_label`).
    """
    threads = job_threads(cores or os.cpu_count() or 1, jobs)
    label = run_label(scale)
    killed, removed, dead = sweep_orphans(root)
    if killed or removed:
        echo(f"[swept]   {killed} process(es) and {removed} folder(s) left by runner(s) that died "
             f"({', '.join(sorted(t.split('-')[0] for t in dead))})")
    results: list[Result] = []
    todo: list[tuple[Notebook, str]] = []
    warned = False
    for nb in notebooks:
        key = content_hash(nb, label)
        out = executed_path(root, nb, label)
        hit = None
        if not force:
            with _locked(out, wait=False) as free:
                if free is None and not warned:
                    warned = True
                    echo(f"warning: {root / '_build'} is read-only: reading the cache without locks")
                hit = _cached(out, key) if free is not False else None
        if hit is not None:
            results.append(hit)
            echo(f"[cached]  {nb.name} ({label})")
            continue
        todo.append((nb, key))
    if not todo:
        echo(f"nothing to execute: all {len(results)} notebook(s) are up to date at scale {label}")
        return results
    echo(f"executing {len(todo)} notebook(s) at scale {label} with {jobs} job(s), {threads} thread(s) each")
    started = time.perf_counter()
    aborted = threading.Event()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        futures = {pool.submit(_execute, root, nb, scale, label, key, force, threads, cell_timeout,
                               total_timeout, echo, aborted): nb for nb, key in todo}
        for future in as_completed(futures):
            nb = futures[future]
            result = future.result()
            results.append(result)
            elapsed = time.perf_counter() - started
            status = "cached" if result.cached else ("ok    " if result.ok else "FAILED")
            echo(f"[{status}]  {nb.name} ({label}) {result.seconds:6.1f} s  [elapsed {elapsed:6.1f} s]")
            if not result.ok:
                echo(f"          {nb.rel}: {result.error}")
    except BaseException:
        aborted.set()
        pool.shutdown(wait=False, cancel_futures=True)
        _kill_live()
        raise
    finally:
        pool.shutdown(wait=True)
    order = {nb.name: i for i, nb in enumerate(notebooks)}
    results.sort(key=lambda r: order.get(r.name, 0))
    return results


def publish_problem(root: Path, nb: Notebook, scale: str) -> str:
    """'' when the executed notebook of ``nb`` at ``scale`` may be published: its run record exists,
    reports no error, certifies the notebook's current content hash and this very executed file.
    Otherwise why not, in a few words."""
    out = executed_path(root, nb, scale)
    meta = _meta_path(out)
    if not out.exists():
        return "not executed"
    try:
        record = json.loads(meta.read_text())
    except FileNotFoundError:
        return "no run record"
    except (OSError, ValueError):
        return "its run record cannot be read"
    if record.get("hash") != content_hash(nb, scale):  # first: a failed run of older code says nothing now
        return "stale: the source, its library code or its data changed since it ran"
    if record.get("error"):
        return f"its run failed: {one_line(record['error'], 160)}"
    if record.get("output_sha256") != _sha256(out):
        return "the executed notebook is not the one its run record certifies"
    return ""


def summary_table(results: list[Result]) -> str:
    """The closing table: notebook, scale, seconds, peak memory, claims held, cache."""
    width = max([44] + [len(r.name) for r in results])
    header = f"{'notebook':{width}s} {'scale':7s} {'seconds':>8s} {'peak MiB':>9s} {'claims':>7s}  status"
    lines = [header, "-" * len(header)]
    for r in results:
        claims = f"{r.claims_held}/{r.claims_total}"
        status = "cached" if r.cached else ("ok" if r.ok else "FAILED")
        lines.append(f"{r.name:{width}s} {r.scale:7s} {r.seconds:8.1f} {r.peak_mib:9.0f} {claims:>7s}  {status}")
    total = sum(r.seconds for r in results if not r.cached)
    lines.append(f"{len(results)} notebook(s), {sum(not r.ok for r in results)} failed, "
                 f"{sum(r.cached for r in results)} cached, {total:.1f} s of execution")
    return "\n".join(lines)
