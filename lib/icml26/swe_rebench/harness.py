"""The evaluation harness, an RL environment, and stand-in solvers for the diagnostic study.

SWE-rebench V2's ``scripts/eval.py`` (Sec. 3.3): start the task's environment, reset the
repository, apply the candidate patch and then the test patch, run ``test_cmd``, parse the log
with the task's parser and grade: resolved iff every FAIL_TO_PASS test passes and no
PASS_TO_PASS test fails. A candidate that edits the hidden test files is rejected before
anything runs. :class:`SWEEnv` wraps the same pieces as a gym-like episode with ``run``,
``read``, ``write`` and ``submit`` tools; the reward is the binary resolution (or the partial
reward of :func:`icml26.swe_rebench.method.grade`).

The solvers are stand-ins for the paper's seven frontier models (Sec. 3.5 diagnostic study):
:class:`GoldSolver` returns the reference patch, :class:`EmptySolver` nothing, and
:class:`IssueOnlySolver` writes the reference fix **only when everything the tests check is
recoverable from the issue** (plus, optionally, the ``interface`` field); otherwise it writes
the plausible-but-wrong patch a careful reader would (a generic error message, a guessed
function name, only the change the issue asks for), and it fails at random with ``p_fail``.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .gitops import apply_patch, check_patch, patch_files
from .judges import _HEDGE, _STRING, _URL, _key, _words, added_lines, extract_interfaces
from .method import grade, run_prepared
from .sandbox import Sandbox, git_env
from .setup_agent import InstallConfig


@dataclass
class Task:
    """A released task (the dataset row, plus where its repository lives)."""

    instance_id: str
    repo: str
    language: str
    base_commit: str
    patch: str
    test_patch: str
    problem_statement: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    install_config: InstallConfig
    meta: dict = field(default_factory=dict)
    interface: list = field(default_factory=list)
    P2F: list[str] = field(default_factory=list)
    repo_path: Path = field(default=Path("."), repr=False)

    def row(self) -> dict:
        """The release schema (no paths, no timings: identical across reruns)."""
        return {"instance_id": self.instance_id, "repo": self.repo, "language": self.language,
                "base_commit": self.base_commit, "patch": self.patch, "test_patch": self.test_patch,
                "problem_statement": self.problem_statement, "FAIL_TO_PASS": list(self.FAIL_TO_PASS),
                "PASS_TO_PASS": list(self.PASS_TO_PASS), "install_config": self.install_config.to_dict(),
                "meta": dict(self.meta), "interface": [i.__dict__ if hasattr(i, "__dict__") else i
                                                        for i in self.interface]}


@dataclass
class EvalResult:
    resolved: bool
    f2p_passed: list[str]
    p2p_failed: list[str]
    partial_reward: float
    log: str


def evaluate_patch(task: Task, patch: str, sandbox: Sandbox, env: dict | None = None) -> EvalResult:
    """Apply ``patch`` then the test patch to a fresh checkout, run, parse, grade."""
    if not isinstance(patch, str):
        raise TypeError(f"patch must be a string (possibly empty), got {type(patch).__name__}")
    hidden = set(check_patch(task.test_patch, "test_patch"))
    if patch.strip():
        touched = set(check_patch(patch, "patch"))
        bad = sorted(touched & hidden)
        if bad:
            raise ValueError(f"patch must not modify the hidden test files; offending paths: {bad}")
    d = sandbox.checkout(task.repo_path, task.base_commit)
    for p in ([patch] if patch.strip() else []) + [task.test_patch]:
        res = apply_patch(d, p, sandbox)
        if res.returncode != 0:
            return EvalResult(False, [], list(task.PASS_TO_PASS), 0.0, res.stdout)
    statuses, res = run_prepared(d, task.install_config, sandbox, env)
    ok, f2p_ok, p2p_bad, partial = grade(task.FAIL_TO_PASS, task.PASS_TO_PASS, statuses)
    return EvalResult(ok, f2p_ok, p2p_bad, partial, res.stdout)


class GoldSolver:
    label = "GoldSolver (reference patch)"

    def solve(self, task: Task, attempt: int = 0) -> str:
        return task.patch


class EmptySolver:
    label = "EmptySolver (no change)"

    def solve(self, task: Task, attempt: int = 0) -> str:
        return ""


def _file_blocks(patch: str) -> list[tuple[str, str]]:
    starts = [m.start() for m in re.finditer(r"^diff --git ", patch, re.M)] + [len(patch)]
    return [(patch_files(patch[a:b])[0], patch[a:b]) for a, b in zip(starts[:-1], starts[1:])]


class IssueOnlySolver:
    """Rule-based stand-in for an agent that reads only the issue (and, optionally, interfaces).

    It knows how each kind of change is written, so it can produce the reference fix — but only
    when every string literal and every new function name the tests check is stated in the
    issue (or in the interface list), when the spec is not behind a URL, when the issue is not
    a vague complaint (hedging words and nothing concrete), and only for the modules the issue
    mentions. Otherwise it writes a wrong but
    plausible patch. A seeded coin makes it fail with probability ``p_fail`` per attempt.
    """

    def __init__(self, use_interfaces: bool = False, p_fail: float = 0.1, seed: int = 0):
        if not 0.0 <= p_fail <= 1.0:
            raise ValueError(f"p_fail must lie in [0, 1], got {p_fail!r}")
        self.use_interfaces, self.p_fail, self.seed = bool(use_interfaces), float(p_fail), int(seed)
        self.label = f"IssueOnlySolver (rule-based stand-in{', with interfaces' if use_interfaces else ''})"

    def _coin(self, task: Task, attempt: int) -> float:
        h = hashlib.sha256(f"{self.seed}|{task.instance_id}|{attempt}".encode()).digest()
        return int.from_bytes(h[:8], "little") / 2**64

    def solve(self, task: Task, attempt: int = 0) -> str:
        stmt = task.problem_statement
        known = _words(stmt)
        if self.use_interfaces:
            known |= {_key(getattr(i, "name", "")) for i in task.interface}
        concrete = bool(re.search(r"`|\w\(|\b\d+\b", stmt))       # a quoted name, a call, a number
        if _URL.search(stmt) or (_HEDGE.search(stmt) and not concrete):
            return ""                                   # the spec is elsewhere, or the issue is vague
        if self._coin(task, attempt) < self.p_fail:
            return ""
        blocks = _file_blocks(task.patch)
        mentioned = [b for b in blocks if _key(Path(b[0]).stem) in known
                     or Path(b[0]).stem in ("__init__", "lib", "mod", "index")]
        patch = "".join(b for _, b in (mentioned or blocks[:1]))
        for lit in {a or b for a, b in _STRING.findall("\n".join(added_lines(patch)))}:
            if lit not in stmt:                         # a message the issue never states
                patch = patch.replace(lit, "invalid argument")
        defs = extract_interfaces(task.patch, task.test_patch, task.language)
        for d in defs:
            if _key(d.name) not in known:               # a name the issue never states
                patch = re.sub(rf"\b{re.escape(d.name)}\b", d.name + "Impl", patch)
        return patch


def run_solver(solver, tasks: list[Task], sandbox: Sandbox, attempts: int, cache: dict | None = None,
               env: dict | None = None) -> np.ndarray:
    """Resolved flags ``[n_tasks, attempts]``; identical patches are evaluated once (``cache``)."""
    cache = {} if cache is None else cache
    out = np.zeros((len(tasks), attempts), dtype=bool)
    for i, t in enumerate(tasks):
        for a in range(attempts):
            patch = solver.solve(t, a)
            key = (t.instance_id, hashlib.sha256(patch.encode()).hexdigest())
            if key not in cache:
                cache[key] = evaluate_patch(t, patch, sandbox, env).resolved
            out[i, a] = cache[key]
    return out


class SWEEnv:
    """A gym-like episode over one task: tools ``run``, ``read``, ``write``, ``submit``.

    ``step({"tool": "run", "cmd": ...})`` runs a sandboxed shell command in the checkout;
    ``read``/``write`` take a ``path`` relative to the checkout (no traversal); ``submit``
    diffs the checkout against the base commit and grades it with :func:`evaluate_patch`.
    """

    TOOLS = ("run", "read", "write", "submit")

    def __init__(self, sandbox: Sandbox, max_steps: int = 20, partial: bool = False):
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        self.sandbox, self.max_steps, self.partial = sandbox, max_steps, partial
        self.task: Task | None = None
        self.dir: Path | None = None
        self.steps = 0

    def reset(self, task: Task) -> str:
        self.task, self.steps = task, 0
        self.dir = self.sandbox.checkout(task.repo_path, task.base_commit)
        env = git_env()
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
            subprocess.run(["git", *args], cwd=self.dir, env=env, check=True, capture_output=True)
        files = sorted(str(p.relative_to(self.dir)) for p in self.dir.rglob("*")
                       if p.is_file() and ".git" not in p.parts)
        return f"ISSUE:\n{task.problem_statement}\n\nFILES:\n" + "\n".join(files)

    def _path(self, rel) -> Path:
        if not isinstance(rel, str) or not rel:
            raise ValueError(f"path must be a non-empty relative path, got {rel!r}")
        p = (self.dir / rel).resolve()
        if self.dir.resolve() not in p.parents:
            raise ValueError(f"path must stay inside the checkout, got {rel!r}")
        return p

    def step(self, action: dict) -> tuple[str, float, bool, dict]:
        if self.task is None or self.dir is None:
            raise ValueError("call reset(task) before step()")
        if not isinstance(action, dict) or action.get("tool") not in self.TOOLS:
            raise ValueError(f"action must be a dict with 'tool' in {self.TOOLS}, got {action!r}")
        self.steps += 1
        tool = action["tool"]
        if tool == "run":
            res = self.sandbox.run(action["cmd"], self.dir)
            obs = res.stdout
        elif tool == "read":
            obs = self._path(action["path"]).read_text()
        elif tool == "write":
            p = self._path(action["path"])
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(action["content"])
            obs = f"wrote {action['path']}"
        if tool != "submit":
            done = self.steps >= self.max_steps
            return obs, 0.0, done, {}
        env = git_env()
        subprocess.run(["git", "add", "-A"], cwd=self.dir, env=env, check=True)
        diff = subprocess.run(["git", "diff", "--cached", "--no-color", "--full-index"], cwd=self.dir,
                              env=env, check=True, capture_output=True, text=True).stdout
        hidden = set(patch_files(self.task.test_patch))
        diff = "".join(b for f, b in _file_blocks(diff) if f not in hidden) if diff.strip() else ""
        res = evaluate_patch(self.task, diff, self.sandbox)
        reward = res.partial_reward if self.partial else float(res.resolved)
        return (f"resolved={res.resolved}; F2P passed {len(res.f2p_passed)}/{len(self.task.FAIL_TO_PASS)}; "
                f"P2P failed {len(res.p2p_failed)}"), reward, True, {"result": res, "patch": diff}


__all__ = ["EmptySolver", "EvalResult", "GoldSolver", "InstallConfig", "IssueOnlySolver", "SWEEnv", "Task",
           "evaluate_patch", "run_solver"]
