"""Stage 3 and the paper's small formulas: execution-based validation, grading, pass@k, ensembles.

SWE-rebench V2 (Badertdinov et al., ICML 2026), Sec. 3.3. With statuses ``s_before`` (test
patch applied) and ``s_after`` (test + solution patch) over the union of test names T:

    F2P = {t : s_after(t) = PASSED and s_before(t) != PASSED}          (eq. 1)
    P2P = {t : s_after(t) = s_before(t) = PASSED}                       (eq. 2)

"Not passed" is everything but PASSED: FAILED, ERROR, SKIPPED and absent alike. A test that
was skipped before the fix and passes after it (``skipUnless(hasattr(mod, "new_fn"))``) is F2P.
A task is kept iff |F2P| >= 1, and only if three repetitions of the whole validation give
identical structured results.

**Three-state refinement (this book's, not the paper's).** In compiled languages a test patch
that calls code the solution introduces does not compile, so the "before" run reports *no*
test and eq. (1) would call every old test F2P. We also run the **base** state (no patches):

    before_passed = (test = PASSED) or (test absent and base = PASSED)
    P2P  if fix = PASSED and before_passed                                       (eq. 3)
    F2P  if fix = PASSED and not before_passed

Whenever the test state reports every test (Python and JavaScript, or a compiled test patch that
builds), this coincides with eqs. (1)-(2): the base state is consulted only for absent tests.

Resolution (Sec. 3.3, ``scripts/eval.py``): a candidate resolves a task iff every F2P test and
every P2P test passes; the optional partial reward is |F2P ∩ passed| / |F2P| when P2P all pass.
pass@k is the unbiased estimator of Chen et al. (2021): 1 - C(n-c, k) / C(n, k).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from math import comb
from pathlib import Path
from typing import Literal

import numpy as np

from .gitops import apply_patch
from .parsers import TestStatus, cross_check, get_parser
from .sandbox import CommandResult, Sandbox
from .setup_agent import InstallConfig

PASSED = TestStatus.PASSED.value
NOT_PASSED = (TestStatus.FAILED.value, TestStatus.ERROR.value)
STATES = ("base", "test", "fix")
COMPILED = ("rust", "java", "go")
CLASSES = ("F2P", "P2P", "P2F", "F2F", "OTHER")


def _check_map(m, name: str) -> dict:
    if not isinstance(m, dict):
        raise TypeError(f"{name} must be a dict test -> status, got {type(m).__name__}")
    allowed = {s.value for s in TestStatus}
    bad = {k: v for k, v in m.items() if v not in allowed}
    if bad:
        raise ValueError(f"{name} holds unknown statuses {bad}; expected one of {sorted(allowed)}")
    return m


def classify_transitions(base: dict | None, test: dict, fix: dict) -> dict[str, list[str]]:
    """Sort every test into F2P, P2P, P2F, F2F or OTHER (eqs. 1-3; two-state when ``base`` is None).

    F2P: passes after and did not pass before (failed, errored, skipped or absent). P2P: passed
    before and after. P2F: passed before, not after. F2F: failed or errored in both. OTHER: the
    rest, e.g. skipped after the fix.
    """
    test, fix = _check_map(test, "test"), _check_map(fix, "fix")
    if base is not None:
        _check_map(base, "base")
    out: dict[str, list[str]] = {c: [] for c in CLASSES}
    for t in sorted(set(test) | set(fix) | set(base or {})):
        s, f = test.get(t), fix.get(t)
        if s is None and base is not None:
            before_passed = base.get(t) == PASSED          # eq. 3: fall back on the base state
        else:
            before_passed = s == PASSED
        if f == PASSED and before_passed:
            out["P2P"].append(t)
        elif f == PASSED:                                  # eq. 1: did not pass before (incl. skipped)
            out["F2P"].append(t)
        elif before_passed and (f in NOT_PASSED or f is None):
            out["P2F"].append(t)
        elif s in NOT_PASSED and f in NOT_PASSED:
            out["F2F"].append(t)
        else:
            out["OTHER"].append(t)
    return out


def states_for(language: str) -> tuple[str, ...]:
    """Three states for compiled languages, two otherwise."""
    return STATES if language in COMPILED else STATES[1:]


def prepare_state(task, sandbox: Sandbox, state: str) -> tuple[Path, CommandResult | None]:
    """A fresh checkout of the base commit with the state's patches applied.

    Returns ``(dir, failure)`` where ``failure`` is the failed ``git apply`` result, if any.
    """
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}, got {state!r}")
    d = sandbox.checkout(task.repo_path, task.base_commit)
    patches = {"base": [], "test": [task.test_patch], "fix": [task.test_patch, task.patch]}[state]
    for p in patches:
        res = apply_patch(d, p, sandbox)
        if res.returncode != 0:
            return d, res
    return d, None


def run_prepared(workdir: Path, cfg: InstallConfig, sandbox: Sandbox, env: dict | None = None,
                 tmpdir: Path | None = None) -> tuple[dict[str, str], CommandResult]:
    """Run the install + test script in a prepared checkout and parse its log."""
    res = sandbox.run(cfg.script(), workdir, env=env, tmpdir=tmpdir)
    log = res.stdout.replace(str(workdir) + "/", "")  # absolute paths would become test names
    return get_parser(cfg.log_parser)(log), res


def run_state(task, cfg: InstallConfig, sandbox: Sandbox, state: Literal["base", "test", "fix"],
              env: dict | None = None, tmpdir: Path | None = None) -> tuple[dict[str, str], CommandResult]:
    """Check out, patch and test one state of a task (see :func:`validate_task` for reuse)."""
    d, fail = prepare_state(task, sandbox, state)
    if fail is not None:
        return {}, fail
    return run_prepared(d, cfg, sandbox, env, tmpdir)


@dataclass
class ValidationResult:
    """Per-run status maps and classes; the task's F2P/P2P; whether it survived."""

    instance_id: str
    runs: list[dict[str, dict[str, str]]] = field(default_factory=list)
    classes: list[dict[str, list[str]]] = field(default_factory=list)
    reason: str = "ok"           # ok | patch_failed | no_f2p | gated | unstable
    seconds: float = 0.0
    # (run, state, parsed, summary) wherever the parse disagrees with the runner's summary line
    count_flags: list[tuple[int, str, int, int]] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        """The parser found a different number of tests than the runner said it ran."""
        return bool(self.count_flags)

    @property
    def f2p(self) -> list[str]:
        return self.classes[0]["F2P"] if self.classes else []

    @property
    def p2p(self) -> list[str]:
        return self.classes[0]["P2P"] if self.classes else []

    @property
    def stable(self) -> bool:
        return bool(self.classes) and all(c == self.classes[0] for c in self.classes)

    @property
    def valid(self) -> bool:
        return self.reason == "ok"


def validate_task(task, cfg: InstallConfig, sandbox: Sandbox, n_runs: int = 3, *,
                  gate: Callable[[object, ValidationResult], bool] | None = None,
                  env: dict | None = None, tmpdir: Path | None = None) -> ValidationResult:
    """Validate a task by execution: ``n_runs`` x (base?, test, fix), fresh checkouts per state.

    Each state's checkout is prepared once and reused by the repeated runs, so compiled outputs
    are cached between runs by the toolchain's own up-to-date checks (cargo fingerprints, the
    javac stamp); every state is still rebuilt after its patches are applied. After run 1 the
    task must have F2P != ∅ and pass ``gate`` (the clarity filter runs here, as in the paper's
    pipeline, before the repetitions); then runs 2..n must reproduce run 1 exactly.
    """
    if not isinstance(n_runs, int) or isinstance(n_runs, bool) or n_runs < 1:
        raise ValueError(f"n_runs must be a positive int, got {n_runs!r}")
    t0 = time.perf_counter()
    out = ValidationResult(task.instance_id)
    tmpdir = tmpdir or sandbox.mkdtemp("task-tmp")
    dirs = {}
    for state in states_for(task.language):
        d, fail = prepare_state(task, sandbox, state)
        if fail is not None:
            out.reason = "patch_failed"
            out.seconds = time.perf_counter() - t0
            return out
        dirs[state] = d
    for r in range(n_runs):
        maps = {}
        for s, d in dirs.items():
            maps[s], res = run_prepared(d, cfg, sandbox, env, tmpdir)
            chk = cross_check(cfg.log_parser, res.stdout, maps[s])
            if chk.checked and not chk.agrees:
                out.count_flags.append((r, s, chk.parsed, chk.summary))
        out.runs.append(maps)
        out.classes.append(classify_transitions(maps.get("base"), maps["test"], maps["fix"]))
        if r == 0:
            if not out.classes[0]["F2P"]:
                out.reason = "no_f2p"
                break
            if gate is not None and not gate(task, out):
                out.reason = "gated"
                break
        elif out.classes[-1] != out.classes[0]:
            out.reason = "unstable"
    out.seconds = time.perf_counter() - t0
    return out


def grade(f2p: list[str], p2p: list[str], statuses: dict[str, str]) -> tuple[bool, list[str], list[str], float]:
    """Resolution (Sec. 3.3): all F2P and all P2P pass. Returns (resolved, F2P passed, P2P failed,
    partial reward |F2P ∩ passed| / |F2P| if no P2P fails, else 0)."""
    f2p_passed = [t for t in f2p if statuses.get(t) == PASSED]
    p2p_failed = [t for t in p2p if statuses.get(t) != PASSED]
    resolved = bool(f2p) and len(f2p_passed) == len(f2p) and not p2p_failed
    partial = (len(f2p_passed) / len(f2p)) if (f2p and not p2p_failed) else 0.0
    return resolved, f2p_passed, p2p_failed, partial


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k) for n samples with c successes (Chen et al. 2021)."""
    for name, v in (("n", n), ("c", c), ("k", k)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if k < 1 or k > n:
        raise ValueError(f"k must satisfy 1 <= k <= n = {n}, got {k}")
    if c < 0 or c > n:
        raise ValueError(f"c must satisfy 0 <= c <= n = {n}, got {c}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


ENSEMBLE_RULES = ("consensus_drop", "consensus_keep", "majority", "mean")


def ensemble_decision(scores: np.ndarray, rule: str, threshold: float = 2.0) -> np.ndarray:
    """Drop decisions (True = underspecified) from judge scores ``[n_judges, n_tasks]`` in 0..3.

    ``consensus_drop``: drop only if every judge flags (score >= threshold) — the paper's
    choice, precision over recall; ``consensus_keep``: keep only if every judge says fine, i.e.
    drop if any flags; ``majority``: drop if more than half flag; ``mean``: drop if the mean
    score >= threshold (the paper's best-F1 ensemble averages scores).
    """
    if rule not in ENSEMBLE_RULES:
        raise ValueError(f"rule must be one of {ENSEMBLE_RULES}, got {rule!r}")
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2:
        raise ValueError(f"scores must be a 2-D array [n_judges, n_tasks], got shape {s.shape}")
    if s.size and (np.nanmin(s) < 0 or np.nanmax(s) > 3 or np.isnan(s).any()):
        raise ValueError("scores must lie in 0..3 (0 = well specified, 3 = impossible to understand)")
    flags = s >= threshold                        # [J, N]
    if rule == "consensus_drop":
        return flags.all(axis=0)
    if rule == "consensus_keep":
        return flags.any(axis=0)
    if rule == "majority":
        return flags.sum(axis=0) * 2 > s.shape[0]
    return s.mean(axis=0) >= threshold


def binary_metrics(pred: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Precision, recall, F1, false-positive rate (positive = underspecified)."""
    p, t = np.asarray(pred), np.asarray(truth)
    if p.shape != t.shape or p.ndim != 1:
        raise ValueError(f"pred and truth must be 1-D of the same length, got {p.shape} and {t.shape}")
    for name, a in (("pred", p), ("truth", t)):
        if not np.isin(a, (0, 1, True, False)).all():
            raise ValueError(f"{name} must hold binary values (0/1 or bool)")
    p, t = p.astype(bool), t.astype(bool)
    tp, fp = float((p & t).sum()), float((p & ~t).sum())
    fn, tn = float((~p & t).sum()), float((~p & ~t).sum())
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * prec * rec / (prec + rec) if tp else 0.0
    fpr = fp / (fp + tn) if fp + tn else float("nan")
    return {"precision": prec, "recall": rec, "f1": f1, "fpr": fpr, "tp": tp, "fp": fp, "fn": fn, "tn": tn}
