"""Toolchains and the execution sandbox of the mini SWE-rebench V2 pipeline.

SWE-rebench V2 (Badertdinov et al., ICML 2026, arXiv:2602.23866) runs every harvested command
inside a Docker container built from a per-language base image (Sec. 3.2-3.3 of the paper).
This book has no Docker. :class:`Sandbox` runs each command under one of three isolation modes,
the strongest this machine allows (``Sandbox.mode``; :func:`isolation_modes` lists them):

``bwrap`` (bubblewrap, ``bwrap --die-with-parent --unshare-all``)
    * processes: a fresh PID namespace; when the command exits (or the run is ended), its init
      process dies and the kernel kills every process left in the namespace, ``setsid``
      daemons that ignore SIGTERM included;
    * filesystem: a private mount namespace in which only the toolchains (``/usr``, ``/etc``,
      the Python prefixes, ``RUSTUP_HOME``/``CARGO_HOME``, ``JAVA_HOME``, the ``PATH``
      directories) are visible, read-only, and only the command's work directory, its private
      ``HOME`` and ``TMPDIR`` are writable; the project checkout, the rest of the sandbox root and
      the user's files are absent; ``/tmp`` is a private size-limited tmpfs;
    * network: an empty network namespace (``network=False``, the default);
    * also IPC, UTS and cgroup namespaces.
``unshare`` (util-linux ``unshare --pid --fork --kill-child``, plus ``-n`` without network)
    processes and network as above; the filesystem is *not* restricted.
``pgroup`` (no namespaces)
    the command's process group is killed at the end of every run, plus every descendant still
    attached to it; a ``setsid`` child whose parent has exited escapes; no filesystem or network
    isolation. A ``RuntimeWarning`` says so when this mode is chosen.

In every mode:

* the output is read incrementally and only its head and tail are kept (``max_output_bytes``), so
  the parent's memory stays bounded however much the command prints;
* a wall-clock timeout; a run also ends when the command itself exits, after a short grace for
  output (``exit_grace_s``), even if a background child still holds stdout; what it left is killed;
* disk: the total growth of the writable directories is watched (``max_disk_bytes``, polled
  every 0.1 s or so) and the run is killed when it is exceeded; ``RLIMIT_FSIZE`` bounds each
  file by the same amount, so one burst cannot overshoot by more than that between two polls;
* a scrubbed environment (``PATH``, ``LANG=C.UTF-8``, ``NO_COLOR=1``, ``CI=1``, a private
  ``HOME`` and ``TMPDIR``, the real ``RUSTUP_HOME`` so rustup keeps working, no proxies, an
  isolated git configuration);
* ``RLIMIT_CPU``. Memory is **not** limited (never ``RLIMIT_AS``: the JVM and node reserve large
  virtual memory); a command can use all the machine's memory.

Temporary directories (``swe-rebench-sbx-<pid>-*``) are removed by :meth:`Sandbox.cleanup`, by a
finaliser when the sandbox is garbage-collected or the interpreter exits, and, for a kernel that
was killed outright, by a sweep of directories whose owning process is gone at the next start.
"""

from __future__ import annotations

import math
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path

LANGUAGES = ("python", "javascript", "rust", "java", "go")

_TOOLS = {
    "python": (("python", sys.executable),),
    "javascript": (("node", "node"), ("npm", "npm")),
    "rust": (("cargo", "cargo"), ("rustc", "rustc")),
    "java": (("javac", "javac"), ("java", "java")),
    "go": (("go", "go"),),
}
_VERSION_ARGS = {
    "python": ["--version"], "javascript": ["--version"], "rust": ["--version"],
    "java": ["-version"], "go": ["version"],
}


@dataclass
class Toolchain:
    """One language's toolchain as found on ``PATH`` (nothing is ever installed)."""

    language: str
    available: bool
    version: str | None
    executables: dict[str, str]


def _check_language(language: str) -> str:
    if not isinstance(language, str) or language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    return language


def detect_toolchains() -> dict[str, Toolchain]:
    """Find python/node/cargo/java/go on ``PATH``; report versions; never installs anything."""
    out: dict[str, Toolchain] = {}
    for lang, tools in _TOOLS.items():
        exes = {}
        for name, exe in tools:
            path = exe if os.path.isabs(exe) else shutil.which(exe)
            if path:
                exes[name] = path
        ok = len(exes) == len(tools)
        version = None
        if ok:
            first = exes[tools[0][0]]
            try:
                proc = subprocess.run([first, *_VERSION_ARGS[lang]], capture_output=True, text=True,
                                      timeout=20)
                text = (proc.stdout or proc.stderr).strip().splitlines()
                version = text[0] if text else None
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        out[lang] = Toolchain(lang, ok, version, exes)
    return out


# -- temporary directories -------------------------------------------------------------------
TEMP_PREFIX = "swe-rebench-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return True


def sweep_stale_tempdirs(parent: str | os.PathLike | None = None) -> list[Path]:
    """Remove ``swe-rebench-*-<pid>-*`` directories whose owning process no longer exists.

    A finaliser cannot run when a kernel is killed with SIGKILL; this sweep, run when a
    :class:`Sandbox` or :func:`owned_tempdir` is first used in a process, removes what such a
    kernel left behind. Returns the removed directories.
    """
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    for d in parent.glob(f"{TEMP_PREFIX}*"):
        parts = d.name[len(TEMP_PREFIX):].split("-")
        pid = next((int(p) for p in parts[1:2] if p.isdigit()), None)
        if pid is None or not d.is_dir() or pid == os.getpid() or _pid_alive(pid):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


_SWEPT = False


def owned_tempdir(kind: str = "work") -> Path:
    """A fresh ``<tmp>/swe-rebench-<kind>-<pid>-XXXX`` directory, removed at interpreter exit or
    when swept by a later process after this one died (see :func:`sweep_stale_tempdirs`)."""
    global _SWEPT
    if not isinstance(kind, str) or not kind.isalnum():
        raise ValueError(f"kind must be a non-empty alphanumeric string, got {kind!r}")
    if not _SWEPT:
        _SWEPT = True
        sweep_stale_tempdirs()
    return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{kind}-{os.getpid()}-")).resolve()


# -- isolation modes -------------------------------------------------------------------------
MODES = ("bwrap", "unshare", "pgroup")
_PROBED: dict[str, list[str] | None] = {}


def _probe(argv: list[str]) -> bool:
    try:
        r = subprocess.run([*argv, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def isolation_modes() -> dict[str, bool]:
    """Which isolation modes work on this machine (probed once per process)."""
    if not _PROBED:
        bw = shutil.which("bwrap")
        _PROBED["bwrap"] = [bw] if bw and _probe([bw, "--die-with-parent", "--unshare-all", "--ro-bind",
                                                  "/", "/", "--dev", "/dev", "--proc", "/proc"]) else None
        un = shutil.which("unshare")
        _PROBED["unshare"] = None
        if un:
            for flags in (["--pid", "--fork", "--kill-child"], ["-r", "--pid", "--fork", "--kill-child"]):
                if _probe([un, *flags, "-n"]):
                    _PROBED["unshare"] = [un, *flags]
                    break
        _PROBED["pgroup"] = []
    return {m: _PROBED[m] is not None for m in MODES}


def network_isolation_prefix() -> list[str] | None:
    """The command prefix that puts a process in an empty network namespace, or ``None``."""
    isolation_modes()
    if _PROBED["unshare"] is not None:
        return [_PROBED["unshare"][0], *(["-r"] if "-r" in _PROBED["unshare"] else []), "-n"]
    return None


@dataclass
class SandboxConfig:
    """Limits of one sandbox (see the module docstring for what each one isolates).

    ``network=False`` asks for an empty network namespace; ``isolation`` is ``"auto"`` (the
    strongest mode that works) or one of :data:`MODES`; ``max_disk_bytes`` caps how much the
    writable directories may grow during one run; ``tmpfs_bytes`` sizes the private ``/tmp``
    (bwrap mode); ``exit_grace_s`` is how long output is still read after the command exits.
    """

    timeout_s: float = 120.0
    max_output_bytes: int = 200_000
    network: bool = False
    cpu_seconds: int = 300
    max_disk_bytes: int = 2 << 30
    tmpfs_bytes: int = 256 << 20
    isolation: str = "auto"
    exit_grace_s: float = 0.5
    extra_env: dict = field(default_factory=dict)

    def __post_init__(self):
        self.timeout_s = _check_seconds(self.timeout_s, "timeout_s")
        self.exit_grace_s = _check_seconds(self.exit_grace_s, "exit_grace_s")
        for name in ("max_output_bytes", "max_disk_bytes", "tmpfs_bytes"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1024:
                raise ValueError(f"{name} must be an int >= 1024, got {v!r}")
        if not isinstance(self.cpu_seconds, int) or isinstance(self.cpu_seconds, bool) or self.cpu_seconds < 1:
            raise ValueError(f"cpu_seconds must be a positive int, got {self.cpu_seconds!r}")
        if not isinstance(self.network, bool):
            raise TypeError(f"network must be a bool, got {type(self.network).__name__}")
        if self.isolation not in ("auto", *MODES):
            raise ValueError(f"isolation must be 'auto' or one of {MODES}, got {self.isolation!r}")
        if not isinstance(self.extra_env, dict):
            raise TypeError(f"extra_env must be a dict, got {type(self.extra_env).__name__}")


def _check_seconds(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite positive number of seconds, got {value!r}")
    return float(value)


@dataclass
class CommandResult:
    """What one sandboxed command did. ``stdout`` holds stdout and stderr interleaved.

    ``truncated``: only the head and tail of ``output_bytes`` bytes were kept; ``disk_exceeded``:
    the run was killed for writing more than ``max_disk_bytes``; ``left_running``: a process the
    command started still held the output when the command exited, and was killed.
    """

    cmd: str
    returncode: int
    stdout: str
    duration_s: float
    timed_out: bool
    truncated: bool
    output_bytes: int = 0
    disk_exceeded: bool = False
    left_running: bool = False
    mode: str = "pgroup"


class _HeadTail:
    """Keeps the first ``cap // 2`` and the last ``cap - cap // 2`` bytes of a stream."""

    def __init__(self, cap: int):
        self.head_cap, self.tail_cap = cap // 2, cap - cap // 2
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk[-self.tail_cap:]
            if len(self.tail) > 2 * self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    def value(self) -> tuple[bytes, bool]:
        tail = bytes(self.tail[-self.tail_cap:]) if self.tail else b""
        kept = len(self.head) + len(tail)
        if self.total <= kept:
            return bytes(self.head) + tail, False
        note = f"\n... [{self.total - kept} bytes truncated] ...\n".encode()
        return bytes(self.head) + note + tail, True


def _truncate(data: bytes, cap: int) -> tuple[bytes, bool]:
    ht = _HeadTail(cap)
    ht.add(data)
    return ht.value()


def _proc_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid`` (Linux ``/proc``)."""
    out = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            f = _proc_stat(int(entry))
            if f and int(f[2]) == pgid and f[0] not in ("Z", "X"):
                out.append(int(entry))
    return out


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (by parent links in ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            f = _proc_stat(int(entry))
            if f and f[0] not in ("Z", "X"):
                children.setdefault(int(f[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _kill_group(pgid: int, wait_s: float = 2.0) -> None:
    """SIGKILL the whole process group and wait until none of its processes is alive."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + wait_s
    while _group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.005)


def _disk_usage(paths: list[Path]) -> int:
    """Bytes allocated on disk under ``paths`` (blocks, so sparse files count what they use)."""
    total, stack = 0, [str(p) for p in paths]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        else:
                            total += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def _outermost(paths: list[Path]) -> list[Path]:
    paths = sorted({p.resolve() for p in paths}, key=lambda p: len(p.parts))
    out: list[Path] = []
    for p in paths:
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def _toolchain_paths(env: dict[str, str]) -> list[Path]:
    """Directories the sandboxed command may read: Python prefixes, toolchain homes, PATH."""
    cands = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             env.get("RUSTUP_HOME", ""), env.get("CARGO_HOME", ""), env.get("JAVA_HOME", ""),
             *env.get("PATH", "").split(os.pathsep)]
    out = []
    for c in cands:
        if c and os.path.isdir(c):
            p = Path(c).resolve()
            if p.parts[:2] not in (("/", "usr"), ("/", "etc")) and p != Path("/"):
                out.append(p)
    return _outermost(out)


class Sandbox:
    """Run commands in temporary directories under one root, with limits (see module docstring).

    >>> sb = Sandbox(SandboxConfig(timeout_s=5))
    >>> sb.run("echo hi", sb.root).stdout.strip()
    'hi'
    >>> sb.cleanup()
    """

    def __init__(self, config: SandboxConfig | None = None, root: str | os.PathLike | None = None):
        if config is None:
            config = SandboxConfig()
        if not isinstance(config, SandboxConfig):
            raise TypeError(f"config must be a SandboxConfig, got {type(config).__name__}")
        self.config = config
        if root is None:
            self.root = owned_tempdir("sbx")
            self._owns_root = True
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.root), True)
        else:
            if not isinstance(root, (str, os.PathLike)):
                raise TypeError(f"root must be a path, got {type(root).__name__}")
            self.root = Path(root).resolve()
            self.root.mkdir(parents=True, exist_ok=True)
            self._owns_root = False
            self._finalizer = None
        self.home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.home.mkdir(exist_ok=True)
        self.tmp.mkdir(exist_ok=True)
        self._counter = 0
        ok = isolation_modes()
        if config.isolation == "auto":
            self.mode = next(m for m in MODES if ok[m])
        elif not ok[config.isolation]:
            raise ValueError(f"isolation={config.isolation!r} does not work on this machine; "
                             f"available: {[m for m in MODES if ok[m]]}")
        else:
            self.mode = config.isolation
        if self.mode == "pgroup" and config.isolation == "auto":
            warnings.warn("neither bubblewrap nor unshare works here: sandboxed commands share the host's "
                          "filesystem and network, and a setsid child can outlive its run", RuntimeWarning,
                          stacklevel=2)
        self.isolation = None if config.network or self.mode == "pgroup" else _PROBED[self.mode]

    def describe(self) -> str:
        """One line naming the isolation mode in force and what it isolates."""
        what = {"bwrap": "processes (PID namespace), filesystem view (read-only toolchains, writable work "
                         "dir only), network" + (" (shared: network=True)" if self.config.network else ""),
                "unshare": "processes (PID namespace)" + ("" if self.config.network else ", network")
                           + "; filesystem NOT isolated",
                "pgroup": "process group only; filesystem and network NOT isolated"}[self.mode]
        return f"sandbox mode {self.mode}: {what}; output, wall time and disk growth capped; memory not capped"

    # -- paths ---------------------------------------------------------------------------------
    def inside(self, path: str | os.PathLike) -> Path:
        """``path`` resolved, or ``ValueError`` if it lies outside the sandbox root."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"cwd must be a path, got {type(path).__name__}")
        p = Path(path)
        p = (p if p.is_absolute() else self.root / p).resolve()
        if p != self.root and self.root not in p.parents:
            raise ValueError(f"cwd must lie inside the sandbox root {self.root}, got {path!s}")
        return p

    def mkdtemp(self, prefix: str = "w") -> Path:
        """A fresh directory under the root."""
        return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=self.root))

    def environment(self, env: dict | None = None, tmpdir: Path | None = None) -> dict[str, str]:
        """The scrubbed environment: nothing from the host except what the toolchains need."""
        real_home = Path(os.environ.get("HOME", str(Path.home())))
        path = os.pathsep.join(dict.fromkeys([str(Path(sys.executable).parent),
                                              *os.environ.get("PATH", os.defpath).split(os.pathsep)]))
        base = {
            "PATH": path, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "NO_COLOR": "1", "CI": "1",
            "TERM": "dumb", "HOME": str(self.home), "TMPDIR": str(tmpdir or self.tmp),
            "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", str(real_home / ".rustup")),
            "CARGO_HOME": os.environ.get("CARGO_HOME", str(real_home / ".cargo")),
            "CARGO_TERM_COLOR": "never", "CARGO_INCREMENTAL": "0",
            "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "npm_config_update_notifier": "false", "npm_config_fund": "false",
            "npm_config_audit": "false", "npm_config_cache": str(self.home / ".npm"),
            "NODE_OPTIONS": "", "FORCE_COLOR": "0",
        }
        if "JAVA_HOME" in os.environ:
            base["JAVA_HOME"] = os.environ["JAVA_HOME"]
        base.update({str(k): str(v) for k, v in self.config.extra_env.items()})
        if env:
            if not isinstance(env, dict):
                raise TypeError(f"env must be a dict, got {type(env).__name__}")
            base.update({str(k): str(v) for k, v in env.items()})
        return base

    def _bwrap_argv(self, workdir: Path, writable: list[Path], env: dict[str, str]) -> list[str]:
        argv = [*_PROBED["bwrap"], "--die-with-parent", "--unshare-all", "--new-session"]
        if self.config.network:
            argv.append("--share-net")
        argv += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                argv += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                argv += ["--ro-bind", top, top]
        argv += ["--dev", "/dev", "--proc", "/proc", "--size", str(self.config.tmpfs_bytes), "--tmpfs", "/tmp"]
        for p in _toolchain_paths(env):
            argv += ["--ro-bind", str(p), str(p)]
        for p in writable:
            argv += ["--bind", str(p), str(p)]
        # the root of the view (and the mount points bwrap made in it) becomes read-only too
        return [*argv, "--remount-ro", "/", "--chdir", str(workdir), "--"]

    # -- running -------------------------------------------------------------------------------
    def run(self, cmd: str | list[str], cwd: str | os.PathLike, timeout: float | None = None,
            env: dict | None = None, tmpdir: Path | None = None) -> CommandResult:
        """Run ``cmd`` (a shell string for ``bash -c``, or an argv list) inside the sandbox."""
        if isinstance(cmd, str):
            argv, shown = ["bash", "-c", cmd], cmd
        elif isinstance(cmd, list) and cmd and all(isinstance(c, str) for c in cmd):
            argv, shown = list(cmd), " ".join(cmd)
        else:
            raise TypeError(f"cmd must be a str or a non-empty list[str], got {cmd!r}")
        workdir = self.inside(cwd)
        if not workdir.is_dir():
            raise ValueError(f"cwd must be an existing directory inside the sandbox, got {cwd!s}")
        limit = self.config.timeout_s if timeout is None else _check_seconds(timeout, "timeout")
        environ = self.environment(env, tmpdir)
        tmp = Path(environ["TMPDIR"]).resolve()
        inside_root = tmp == self.root or self.root in tmp.parents
        # a TMPDIR outside the sandbox root is not made visible (nor writable) in bwrap mode
        writable = _outermost([workdir, self.home, *([tmp] if inside_root and tmp.is_dir() else [])])
        if self.mode == "bwrap":
            argv = [*self._bwrap_argv(workdir, writable, environ), *argv]
        elif self.mode == "unshare":
            argv = [*_PROBED["unshare"], *([] if self.config.network else ["-n"]), *argv]
        cpu = self.config.cpu_seconds
        fsize = min(1 << 30, self.config.max_disk_bytes)

        def limits():  # runs in the child before exec
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

        disk0 = _disk_usage(writable)
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=workdir, env=environ, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=limits)
        try:
            cap, timed_out, disk_exceeded, left = self._pump(proc, t0 + limit, writable, disk0)
        finally:
            tree = _descendants(proc.pid) if self.mode == "pgroup" else []
            _kill_group(proc.pid)                        # nothing of the command's group survives it
            for pid in tree:                              # nor a descendant that changed its group
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            proc.stdout.close()
            proc.wait()
        data, truncated = cap.value()
        code = -9 if (timed_out or disk_exceeded) else proc.returncode
        return CommandResult(shown, code, data.decode("utf-8", "replace"), time.perf_counter() - t0,
                             timed_out, truncated, cap.total, disk_exceeded, left, self.mode)

    def _pump(self, proc: subprocess.Popen, deadline: float, writable: list[Path],
              disk0: int) -> tuple[_HeadTail, bool, bool, bool]:
        """Read the output incrementally until EOF after the command exits, the exit grace runs
        out, the deadline passes or the disk cap is exceeded."""
        cap = _HeadTail(self.config.max_output_bytes)
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        exited_at, eof, next_disk, disk_every = None, False, 0.0, 0.1
        timed_out = disk_exceeded = left = False
        try:
            while True:
                now = time.perf_counter()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and (eof or now - exited_at > self.config.exit_grace_s):
                    left = not eof
                    break
                if now >= deadline:
                    timed_out = True
                    break
                if now >= next_disk:
                    t = time.perf_counter()
                    if _disk_usage(writable) - disk0 > self.config.max_disk_bytes:
                        disk_exceeded = True
                        break
                    next_disk = time.perf_counter() + max(disk_every, 10 * (time.perf_counter() - t))
                if eof:
                    time.sleep(0.02)
                    continue
                for _ in sel.select(timeout=0.05):
                    while True:
                        try:
                            chunk = os.read(fd, 1 << 16)
                        except BlockingIOError:
                            break
                        if not chunk:
                            eof = True
                            break
                        cap.add(chunk)
                        if time.perf_counter() >= deadline:
                            break
        finally:
            sel.close()
        return cap, timed_out, disk_exceeded, left

    def checkout(self, repo: str | os.PathLike, commit: str, dest: Path | None = None) -> Path:
        """A fresh copy of ``repo`` at ``commit`` (``git archive | tar``) under the sandbox root."""
        if not isinstance(commit, str) or not commit:
            raise ValueError(f"commit must be a non-empty string, got {commit!r}")
        target = self.mkdtemp("co") if dest is None else self.inside(dest)
        target.mkdir(parents=True, exist_ok=True)
        arch = subprocess.run(["git", "archive", "--format=tar", commit], cwd=repo,
                              capture_output=True, env=git_env())
        if arch.returncode != 0:
            raise ValueError(f"commit {commit!r} not found in {repo}: {arch.stderr.decode()[:200]}")
        subprocess.run(["tar", "-x", "-C", str(target)], input=arch.stdout, check=True)
        return target

    def cleanup(self) -> None:
        """Remove the sandbox root (if this sandbox created it)."""
        if self._finalizer is not None:
            self._finalizer()
        elif self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)


def git_env(extra: dict | None = None) -> dict[str, str]:
    """Environment for our own git calls: no user/system config, fixed identity."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8",
                "GIT_AUTHOR_NAME": "Corpus Bot", "GIT_AUTHOR_EMAIL": "bot@corpus.invalid",
                "GIT_COMMITTER_NAME": "Corpus Bot", "GIT_COMMITTER_EMAIL": "bot@corpus.invalid"})
    if extra:
        env.update(extra)
    return env
