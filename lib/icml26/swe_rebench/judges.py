"""Stages 4-5: issue-clarity judges, diagnostic metadata, interfaces, PR-derived statements.

SWE-rebench V2, Sec. 3.4: an ensemble of three LLM judges scores each issue on the SWE-bench
Verified scale (0 = well specified ... 3 = almost impossible to understand), with the
"Verified-E" prompt that also shows the gold and test patches; the pipeline drops a task only
when the three judges agree (consensus: precision 0.88, recall 0.06), while averaging the scores
gives the best F1 (0.43). Sec. 3.5: a meta-labeller tags known confounders (A = solvable,
B1 test-suite coupling, B2 implicit naming, B3 external dependency, B4 ambiguous specification,
B5 patch artifacts, B6 implicit knowledge, B7 inline test in the solution patch, ...), an
``interface`` field lists the new functions the tests call (it mitigates B2), and PR-derived
tasks get a statement rewritten from the PR description without file names, symbols or code
(23% still leak something, 2.4% explicitly).

Every model role here is a **deterministic rule-based stand-in**, labelled as such.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from .gitops import patch_files
from .sandbox import _check_language

JUDGE_VARIANTS = ("structure", "specificity", "red_flags")
CONFOUNDERS = ("B1", "B2", "B3", "B4", "B5", "B6", "B7")

_URL = re.compile(r"https?://\S+")
_TICKED = re.compile(r"`([^`\n]+)`")
_CALL = re.compile(r"\b[A-Za-z_][\w.]*\([^()\n]*\)")
_HEDGE = re.compile(r"\b(sometimes|weird(ly)?|strange(ly)?|randomly|not sure|odd)\b", re.I)
_CODEBLOCK = re.compile(r"```")


@dataclass
class JudgeOutput:
    score: int
    rationale: str
    judge: str


class IssueJudge(Protocol):
    def score(self, task) -> JudgeOutput: ...


class RuleBasedClarityJudge:
    """Stand-in for an LLM clarity judge (0 = well specified ... 3 = impossible to understand).

    * ``structure``: +1 for each missing element among a code block or call example, an
      expected-vs-actual statement, a back-ticked identifier;
    * ``specificity``: short issues score high, long ones low, identifiers lower the score —
      so a long but vague issue fools it (as single LLM judges are fooled, Sec. 3.4);
    * ``red_flags``: +2 for a URL standing in for the spec, +1 for hedging words
      ("sometimes", "weird"), +1 when no identifier is named at all.
    """

    def __init__(self, variant: str):
        if variant not in JUDGE_VARIANTS:
            raise ValueError(f"variant must be one of {JUDGE_VARIANTS}, got {variant!r}")
        self.variant = variant
        self.name = f"{variant} (rule-based stand-in)"

    def score(self, task) -> JudgeOutput:
        text = getattr(task, "problem_statement", task)
        if not isinstance(text, str):
            raise TypeError("task must have a problem_statement string")
        ticked = _TICKED.findall(text)
        has_ident = bool(ticked) or bool(_CALL.search(text))
        if self.variant == "structure":
            example = bool(_CODEBLOCK.search(text)) or any("(" in t for t in ticked)
            exp_act = bool(re.search(r"\bexpect(ed)?\b.*\b(actual|but|got|gives|returns)\b|"
                                     r"\b(returns|gives)\b.*\b(expected|should)\b", text, re.I | re.S))
            s = 3 - example - exp_act - bool(ticked)
            why = f"example={example}, expected/actual={exp_act}, identifiers={bool(ticked)}"
        elif self.variant == "specificity":
            words = len(text.split())
            s = 3 if words < 25 else 2 if words < 45 else 1 if words < 70 else 0
            s -= min(s, len(set(ticked)))
            why = f"{words} words, {len(set(ticked))} distinct identifiers"
        else:
            url, hedge = bool(_URL.search(text)), bool(_HEDGE.search(text))
            s = 2 * url + hedge + (not has_ident)
            why = f"url={url}, hedging={hedge}, identifiers={has_ident}"
        return JudgeOutput(int(min(max(s, 0), 3)), why, self.name)


def judge_scores(tasks: list, variants=JUDGE_VARIANTS) -> np.ndarray:
    """Scores ``[n_judges, n_tasks]``."""
    judges = [RuleBasedClarityJudge(v) for v in variants]
    return np.array([[j.score(t).score for t in tasks] for j in judges], dtype=float).reshape(len(judges), len(tasks))


# -- prompts (our own wording; the official templates are in the paper's repository) ---------
PROMPT_TEMPLATES: dict[str, str] = {
    "verified": (
        "You will read a GitHub issue from the repository {repo}. Rate how well it specifies the "
        "change a developer must make, from 0 (clear: a sensible solution is obvious) to 3 (almost "
        "impossible to understand without more information).\n\nIssue:\n{problem_statement}\n\n"
        "Answer with the score and one sentence of justification."),
    "verified_e": (
        "You will read an issue from {repo} together with the reference fix and the tests that "
        "check it. Rate from 0 to 3 whether a competent developer, seeing only the issue, could "
        "write a fix that passes these tests (names, messages and behaviour the tests demand must "
        "be recoverable from the issue).\n\nIssue:\n{problem_statement}\n\nReference fix:\n{patch}\n\n"
        "Tests:\n{test_patch}\n\nAnswer with the score and one sentence of justification."),
    "spice": (
        "Decide whether the issue below is testable: could one write a test from it alone? List "
        "what is missing, then give a score 0 (fully testable) to 3 (not testable).\n\n"
        "{problem_statement}"),
    "meta": (
        "Label the task from {repo}. Use A if it is solvable from the issue, or the first matching "
        "code: B1 tests coupled to unrelated code, B2 tests need names or messages the issue never "
        "states, B3 essential information behind a link, B4 ambiguous specification, B5 patch "
        "artifacts, B6 implicit knowledge, B7 test code inside the solution patch.\n\nIssue:\n"
        "{problem_statement}\n\nFix:\n{patch}\n\nTests:\n{test_patch}"),
}


def render_prompt(template: str, task) -> str:
    """Fill one of :data:`PROMPT_TEMPLATES` with a task's fields."""
    if template not in PROMPT_TEMPLATES:
        raise ValueError(f"template must be one of {sorted(PROMPT_TEMPLATES)}, got {template!r}")
    fields = {k: getattr(task, k, "") for k in ("repo", "problem_statement", "patch", "test_patch")}
    return PROMPT_TEMPLATES[template].format(**fields)


# -- patches: added lines, definitions, literals ------------------------------------------------
_DEF = {
    "python": re.compile(r"^def (\w+)\(([^)]*)\)"),
    "javascript": re.compile(r"^function (\w+)\(([^)]*)\)"),
    "rust": re.compile(r"^pub fn (\w+)\(([^)]*)\)\s*(->\s*[\w<>]+)?"),
    "java": re.compile(r"^public static \w+ (\w+)\(([^)]*)\)"),
    "go": re.compile(r"^func (\w+)\(([^)]*)\)"),
}
_STRING = re.compile(r"\"([^\"\n]{6,})\"|'([^'\n]{6,})'")
_INDEX_FILES = ("__init__", "lib", "mod", "index", "main")


def added_lines(patch: str) -> list[str]:
    return [ln[1:] for ln in patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1].split(".")[0]
    return name


def _key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _words(text: str) -> set[str]:
    """Normalised identifiers/words of a text (``sum_range``, ``sumRange`` -> ``sumrange``)."""
    return {_key(w) for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)}


@dataclass(frozen=True)
class Interface:
    name: str
    signature: str
    file: str


def extract_interfaces(solution_patch: str, test_patch: str, language: str) -> list[Interface]:
    """New or changed functions defined in the solution's added lines that the test patch calls."""
    _check_language(language)
    rx = _DEF[language]
    tests = "\n".join(added_lines(test_patch))
    out, file = [], ""
    for ln in solution_patch.splitlines():
        if ln.startswith("+++ "):
            file = ln[6:] if ln.startswith("+++ b/") else ln[4:]
        elif ln.startswith("+"):
            m = rx.match(ln[1:].strip())
            if m and re.search(rf"\b{re.escape(m.group(1))}\b", tests):
                out.append(Interface(m.group(1), ln[1:].strip().rstrip("{").strip(), file))
    return out


def _literals(lines: list[str]) -> set[str]:
    return {a or b for a, b in _STRING.findall("\n".join(lines))}


def _test_name_units(name: str, stems: list[str]) -> set[str]:
    k = _key(name)
    return {s for s in stems if _key(s) and _key(s) in k}


class RuleBasedMetaLabeler:
    """Stand-in for the meta-labelling LLM: flags confounders by rules on the task's fields.

    B1: F2P tests exercise a source module the issue never mentions (or P2F tests exist);
    B2: string literals or new function names asserted by the tests appear in the solution but
    not in the issue; B3: a URL in the issue; B4: mean judge score >= 2; B5: the solution touches
    source files the issue never mentions and the F2P tests depend on them; B6: never flagged
    (implicit knowledge is beyond rules); B7: test code in the solution patch.
    """

    label = "RuleBasedMetaLabeler (deterministic stand-in for the LLM meta-labeller)"

    def detect(self, task, repo_dir=None, judge_mean: float | None = None) -> dict[str, bool | str]:
        lang = _check_language(task.language)
        stmt = task.problem_statement
        words = _words(stmt)
        sol_added, test_added = added_lines(task.patch), added_lines(task.test_patch)
        stems = [_stem(p) for p in patch_files(task.patch) if _stem(p) not in _INDEX_FILES]
        mentioned = [s for s in stems if _key(s) in words]
        main = mentioned or stems[:1]
        f2p = list(getattr(task, "FAIL_TO_PASS", []))
        p2f = list(getattr(task, "P2F", []))
        f2p_units = set().union(*[_test_name_units(t, stems) for t in f2p]) if f2p else set()
        flags: dict[str, bool | str] = {}
        flags["B1"] = bool(f2p_units - set(main)) or bool(p2f)
        new_names = {m.group(1) for ln in sol_added if (m := _DEF[lang].match(ln.strip()))}
        asserted = _literals(test_added) & _literals(sol_added)
        named = {n for n in new_names if re.search(rf"\b{re.escape(n)}\b", "\n".join(test_added))}
        hidden = {s for s in asserted if s not in stmt} | {n for n in named if _key(n) not in words}
        flags["B2"] = bool(hidden)
        flags["B3"] = bool(_URL.search(stmt))
        flags["B4"] = judge_mean is not None and judge_mean >= 2.0
        flags["B5"] = bool(f2p_units & (set(stems) - set(mentioned))) and bool(mentioned)
        flags["B6"] = False
        inline = re.compile(r"#\[cfg\(test\)\]|^\s*>>> |^\s*(def|function|static void|fn) test", re.M)
        flags["B7"] = bool(inline.search("\n".join(sol_added)))
        first = next((c for c in CONFOUNDERS if flags[c]), "A")
        flags["code"] = first
        return flags


class RuleBasedStatementWriter:
    """Stand-in for the PR-description -> problem-statement writer (no file names, symbols or
    code): drops fenced code, back-ticked spans and paths, and lines that look like code."""

    label = "RuleBasedStatementWriter (deterministic stand-in)"

    def write(self, pr_description: str) -> str:
        if not isinstance(pr_description, str):
            raise TypeError("pr_description must be a string")
        text = re.sub(r"```.*?```", "", pr_description, flags=re.S)
        text = _TICKED.sub("the code", text)
        text = re.sub(r"\b[\w./-]+\.(py|js|rs|java|go|toml|json)\b", "a source file", text)
        keep = [ln for ln in text.splitlines() if not re.search(r"[;{}]|^\s*(return|if|let|def)\b", ln)]
        return re.sub(r"\s+", " ", " ".join(keep)).strip()


_STOP = {"return", "this", "that", "with", "from", "the", "code", "source", "file", "test", "tests",
         "case", "edge", "handled", "documented", "regression", "behaviour", "helper", "fixes",
         "adds", "plus", "line", "change", "now", "and"}


def leakage(statement: str, solution_patch: str) -> Literal["none", "some", "explicit"]:
    """How much of the solution a statement gives away: ``explicit`` if a whole added line
    (>= 10 characters) appears in it, ``some`` if an identifier (>= 4 characters) of the added
    lines does, else ``none``."""
    if not isinstance(statement, str) or not isinstance(solution_patch, str):
        raise TypeError("statement and solution_patch must be strings")
    lines = [ln.strip() for ln in added_lines(solution_patch) if len(ln.strip()) >= 10]
    if any(ln in statement for ln in lines):
        return "explicit"
    idents = {w for ln in added_lines(solution_patch) for w in re.findall(r"[A-Za-z_]\w{3,}", ln)}
    words = set(re.findall(r"[A-Za-z_]\w{3,}", statement))
    return "some" if (idents - _STOP) & words else "none"
