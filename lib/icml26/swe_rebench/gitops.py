"""Git history and patches: merged pull requests, the solution/test split, applying patches.

SWE-rebench V2, Sec. 3.1: diffs are taken from local git history, and each pull request's diff
is split *by file* into a ``test_patch`` (files recognised as tests by per-language path
conventions) and a ``patch`` (the solution, everything else).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .sandbox import CommandResult, Sandbox, _check_language, git_env

_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)
_MERGE = re.compile(r"Merge pull request #(\d+)")


def git(args: list[str], cwd: str | Path, env: dict | None = None) -> str:
    """Run ``git args`` in ``cwd`` with an isolated configuration; return stdout (raises on error)."""
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise TypeError(f"args must be a list[str], got {args!r}")
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=git_env(env))
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {proc.stderr.strip()[:300]}")
    return proc.stdout


@dataclass(frozen=True)
class MergedPR:
    """One merge commit on ``main`` read back as a pull request."""

    pr_number: int
    merge_commit: str
    base_commit: str
    head_commit: str
    message: str


def merged_prs(repo: str | Path) -> list[MergedPR]:
    """Merged pull requests of ``repo`` (first-parent merges of ``main``), oldest first."""
    out = git(["log", "--merges", "--first-parent", "--reverse", "--format=%H %P%x1f%B%x1e", "main"],
              repo)
    prs = []
    for record in out.split("\x1e"):
        record = record.strip()
        if not record:
            continue
        head, message = record.split("\x1f", 1)
        merge, base, branch = head.split()[:3]
        m = _MERGE.search(message)
        if m:
            prs.append(MergedPR(int(m.group(1)), merge, base, branch, message.strip()))
    return prs


_PY_DIRS = {"tests", "test", "testing", "checks"}
_JS_DIRS = {"test", "tests", "spec", "__tests__"}


def is_test_path(path: str, language: str) -> bool:
    """Whether ``path`` is a test file by ``language``'s path conventions (Sec. 3.1)."""
    _check_language(language)
    if not isinstance(path, str) or not path:
        raise ValueError(f"path must be a non-empty string, got {path!r}")
    p = PurePosixPath(path)
    parts, name = set(p.parts[:-1]), p.name
    if language == "python":
        return bool(parts & _PY_DIRS) or name.startswith("test_") and name.endswith(".py") \
            or name.endswith("_test.py") or name == "conftest.py"
    if language == "javascript":
        return bool(parts & _JS_DIRS) or bool(re.search(r"\.(test|spec)\.[cm]?[jt]s$", name))
    if language == "rust":
        return "tests" in parts or "benches" in parts
    if language == "java":
        return "/src/test/" in f"/{path}" or bool(re.search(r"Tests?\.java$", name))
    return name.endswith("_test.go") or "testdata" in parts  # go


def patch_files(diff: str) -> list[str]:
    """Paths (the ``b/`` side) touched by a unified git diff, in order."""
    return [m.group(2) for m in _HEADER.finditer(diff)]


def _blocks(diff: str) -> list[tuple[str, str]]:
    if not isinstance(diff, str):
        raise TypeError(f"diff must be a string, got {type(diff).__name__}")
    if not diff.strip():
        raise ValueError("diff must be a non-empty git diff")
    starts = [m.start() for m in _HEADER.finditer(diff)]
    if not starts:
        raise ValueError("diff is malformed: no 'diff --git a/... b/...' header found")
    if diff[:starts[0]].strip():
        raise ValueError("diff is malformed: text before the first 'diff --git' header")
    starts.append(len(diff))
    blocks = []
    for a, b in zip(starts[:-1], starts[1:], strict=True):
        block = diff[a:b]
        blocks.append((_HEADER.match(block).group(2), block))
    return blocks


def split_patch(diff: str, language: str) -> tuple[str, str]:
    """``(solution_patch, test_patch)``: every file block of ``diff`` goes to exactly one side."""
    _check_language(language)
    solution, tests = [], []
    for path, block in _blocks(diff):
        (tests if is_test_path(path, language) else solution).append(block)
    return "".join(solution), "".join(tests)


def check_patch(patch: str, what: str = "patch") -> list[str]:
    """Validate a patch that is required: non-empty and with ``diff --git`` headers. Returns its files."""
    if not isinstance(patch, str):
        raise TypeError(f"{what} must be a string, got {type(patch).__name__}")
    if not patch.strip():
        raise ValueError(f"{what} must be a non-empty git diff")
    return [path for path, _ in _blocks(patch)]


def apply_patch(workdir: str | Path, patch: str, sandbox: Sandbox) -> CommandResult:
    """``git apply`` ``patch`` in ``workdir`` (a checkout under the sandbox), as the harness does."""
    check_patch(patch)
    workdir = sandbox.inside(workdir)
    # under the sandbox's HOME: one of the few directories a sandboxed command can see
    pfile = Path(tempfile.mkdtemp(prefix="patch-", dir=sandbox.home)) / "change.diff"
    pfile.write_text(patch)
    res = sandbox.run(["git", "apply", "-v", "--recount", "--whitespace=nowarn", str(pfile)], workdir)
    pfile.unlink()
    pfile.parent.rmdir()
    return res


def diff_commits(repo: str | Path, a: str, b: str) -> str:
    """The git diff from commit ``a`` to commit ``b`` (full index, no colour, no renames)."""
    return git(["diff", "--no-color", "--no-renames", "--full-index", a, b], repo)
