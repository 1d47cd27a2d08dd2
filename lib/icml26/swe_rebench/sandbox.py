"""Toolchains and the execution sandbox of the mini SWE-rebench V2 pipeline.

SWE-rebench V2 (Badertdinov et al., ICML 2026, arXiv:2602.23866) runs every harvested command
inside a Docker container built from a per-language base image (Sec. 3.2-3.3 of the paper).
This book has no Docker, so :class:`Sandbox` gives the properties that matter for the method:

* every command runs in a temporary directory under the sandbox root (path traversal refused);
* a wall-clock timeout, after which the **whole process group** is killed (``node``/``java``
  children included), and every run ends by killing its group, so no process is left behind;
* a scrubbed environment (``PATH``, ``LANG=C.UTF-8``, ``NO_COLOR=1``, ``CI=1``, a private ``HOME``
  and ``TMPDIR``, the real ``RUSTUP_HOME``/``CARGO_HOME`` so rustup keeps working, no proxies,
  an isolated git configuration);
* no network where the kernel allows it: the command is prefixed by ``unshare -n`` (root) or
  ``unshare -rn`` (user namespace), a fresh network namespace with no interfaces, so a connect
  fails locally with ``ENETUNREACH`` before any packet leaves;
* ``RLIMIT_CPU`` and ``RLIMIT_FSIZE`` (never ``RLIMIT_AS``: the JVM and node reserve large
  virtual memory) and a cap on captured output (head and tail kept).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
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


# -- network isolation -----------------------------------------------------------------------
_UNSHARE: list[str] | None | bool = False  # False = not probed yet


def network_isolation_prefix() -> list[str] | None:
    """The command prefix that puts a process in an empty network namespace, or ``None``.

    Probed once: ``unshare -n`` works as root, ``unshare -rn`` in a user namespace otherwise.
    """
    global _UNSHARE
    if _UNSHARE is False:
        _UNSHARE = None
        exe = shutil.which("unshare")
        if exe:
            for flags in (["-n"], ["-rn"]):
                try:
                    r = subprocess.run([exe, *flags, "true"], capture_output=True, timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    continue
                if r.returncode == 0:
                    _UNSHARE = [exe, *flags]
                    break
    return _UNSHARE  # type: ignore[return-value]


@dataclass
class SandboxConfig:
    """Limits of one sandbox. ``network=False`` asks for an empty network namespace."""

    timeout_s: float = 120.0
    max_output_bytes: int = 200_000
    network: bool = False
    cpu_seconds: int = 300
    extra_env: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.timeout_s, (int, float)) or isinstance(self.timeout_s, bool) \
                or self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, got {self.timeout_s!r}")
        if not isinstance(self.max_output_bytes, int) or self.max_output_bytes < 1024:
            raise ValueError(f"max_output_bytes must be an int >= 1024, got {self.max_output_bytes!r}")
        if not isinstance(self.cpu_seconds, int) or self.cpu_seconds < 1:
            raise ValueError(f"cpu_seconds must be a positive int, got {self.cpu_seconds!r}")
        if not isinstance(self.extra_env, dict):
            raise TypeError(f"extra_env must be a dict, got {type(self.extra_env).__name__}")


@dataclass
class CommandResult:
    """What one sandboxed command did. ``stdout`` holds stdout and stderr interleaved."""

    cmd: str
    returncode: int
    stdout: str
    duration_s: float
    timed_out: bool
    truncated: bool


def _truncate(data: bytes, cap: int) -> tuple[bytes, bool]:
    if len(data) <= cap:
        return data, False
    half = cap // 2
    note = f"\n... [{len(data) - cap} bytes truncated] ...\n".encode()
    return data[:half] + note + data[-half:], True


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid`` (Linux ``/proc``)."""
    out = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(entry))
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
            self.root = Path(tempfile.mkdtemp(prefix="swe-rebench-sbx-")).resolve()
            self._owns_root = True
        else:
            self.root = Path(root).resolve()
            self.root.mkdir(parents=True, exist_ok=True)
            self._owns_root = False
        self.home = self.root / "home"
        self.tmp = self.root / "tmp"
        self.home.mkdir(exist_ok=True)
        self.tmp.mkdir(exist_ok=True)
        self._counter = 0
        self.isolation = network_isolation_prefix() if not config.network else None
        if not config.network and self.isolation is None:
            warnings.warn("unshare is unavailable: sandboxed commands keep the host network",
                          RuntimeWarning, stacklevel=2)

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
        limit = self.config.timeout_s if timeout is None else timeout
        if not isinstance(limit, (int, float)) or limit <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if self.isolation:
            argv = [*self.isolation, *argv]
        cpu, fsize = self.config.cpu_seconds, 1 << 30

        def limits():  # runs in the child before exec
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=workdir, env=self.environment(env, tmpdir),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=limits)
        timed_out = False
        try:
            data, _ = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            data, _ = proc.communicate()
        finally:
            _kill_group(proc.pid)  # nothing of the command's group survives it
        data, truncated = _truncate(data or b"", self.config.max_output_bytes)
        return CommandResult(shown, -9 if timed_out else proc.returncode,
                             data.decode("utf-8", "replace"), time.perf_counter() - t0,
                             timed_out, truncated)

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
        if self._owns_root:
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
