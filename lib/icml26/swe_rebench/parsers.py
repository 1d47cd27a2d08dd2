"""Log parsers: a test log becomes a map ``{test_name: PASSED | FAILED | SKIPPED | ERROR}``.

SWE-rebench V2, Sec. 3.2: after a successful run the setup agent has an LLM write a
repository-specific ``parse_log(log)`` using only the standard library, validates it on other
traces of the same repository and retries up to 5 times. Here the parsers are written by hand,
one per test-log family, and :class:`RuleBasedParserSynthesizer` (a deterministic stand-in for
the LLM) picks the one that works on the given logs.

Names are normalised (:func:`normalize_test_name`): ANSI colour codes, timing suffixes such as
``(0.01s)`` or ``[3 ms]``, TAP's leading ``- `` and progress markers such as ``[100%]`` would
otherwise become fake test names or break F2P/P2P matching across runs.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from enum import Enum
from typing import Protocol


class TestStatus(str, Enum):
    """Status of one test in one run."""

    __test__ = False  # not a pytest test class
    PASSED = "PASSED"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"


P, F, S, E = (s.value for s in TestStatus)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_TIMING = re.compile(r"\s*(\(\s*\d+(\.\d+)?\s*(ms|s|sec|seconds?)\s*\)|\[\s*\d+(\.\d+)?\s*(ms|s)\s*\])\s*$")
_PROGRESS = re.compile(r"\s*\[\s*\d{1,3}%\]\s*$")


def normalize_test_name(name: str) -> str:
    """Strip ANSI codes, timing suffixes (`` (0.01s)``, `` [3 ms]``), progress markers, ``- ``."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    name = _ANSI.sub("", name).strip()
    for _ in range(2):
        name = _TIMING.sub("", name)
        name = _PROGRESS.sub("", name)
    if name.startswith("- "):
        name = name[2:]
    return name.strip()


def _put(out: dict[str, str], name: str, status: str) -> None:
    name = normalize_test_name(name)
    if name:
        out[name] = status


# -- Python ----------------------------------------------------------------------------------
_UT_VERDICT = re.compile(r"^(ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$")


def parse_unittest(log: str) -> dict[str, str]:
    """``python -m unittest -v``: ``test_x (module.Class.test_x) ... ok|FAIL|ERROR|skipped '..'``.

    Key: the dotted name in parentheses. ``expected failure`` counts as PASSED and
    ``unexpected success`` as FAILED (the SWE-bench convention). A verdict pushed to a later line
    by interleaved output (a warning printed by the test) is still attributed to its test.
    """
    out: dict[str, str] = {}
    pending: str | None = None  # a test whose verdict was pushed to a later line (interleaved output)
    for line in _ANSI.sub("", log).splitlines():
        m = re.match(r"^(\w+) \(([\w.]+)\)(?:\s.*?)?\s\.\.\.\s(.+)$", line)
        head = re.match(r"^(\w+) \(([\w.]+)\)(?:\s.*?)? \.\.\. ?", line)
        if m and _UT_VERDICT.match(m.group(3).strip()):
            name, verdict = m.group(2), m.group(3).strip()
            pending = None
        elif head:
            pending = head.group(2)
            continue
        elif pending and _UT_VERDICT.match(line.strip()):
            name, verdict = pending, line.strip()
            pending = None
        else:
            continue
        if verdict == "ok" or verdict == "expected failure":
            _put(out, name, P)
        elif verdict == "FAIL" or verdict == "unexpected success":
            _put(out, name, F)
        elif verdict == "ERROR":
            _put(out, name, E)
        elif verdict.startswith("skipped"):
            _put(out, name, S)
    return out


_PYTEST = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+::\S+?)(?:\s+-\s.*)?$")


def parse_pytest(log: str) -> dict[str, str]:
    """``pytest -rA`` short summary: ``STATUS path::name[ - msg]`` (XFAIL→PASSED, XPASS→FAILED).

    Summary lines without a node id (``SKIPPED [1] f.py:3``, collection ``ERROR f.py``) record
    no test: the affected tests are *absent*, which the transition rules handle.
    """
    table = {"PASSED": P, "FAILED": F, "ERROR": E, "XFAIL": P, "XPASS": F, "SKIPPED": S}
    out: dict[str, str] = {}
    for line in _ANSI.sub("", log).splitlines():
        m = _PYTEST.match(line.strip())
        if m:
            _put(out, m.group(2), table[m.group(1)])
    return out


# -- TAP (node --test) -----------------------------------------------------------------------
_TAP = re.compile(r"^(\s*)(not ok|ok)\s+\d+\s*(?:-\s+)?(.*?)(?:\s+#\s*(SKIP|TODO)\b.*)?$", re.I)


def parse_tap(log: str) -> dict[str, str]:
    """TAP (``node --test --test-reporter=tap``): ``ok N - name`` / ``not ok N - name``.

    ``# SKIP``/``# TODO`` → SKIPPED; subtests are indented 4 spaces per level and named
    ``parent > child`` (the parent line is recorded too); YAML blocks are ignored.
    """
    out: dict[str, str] = {}
    pending: list[tuple[int, str]] = []  # (indent, "# Subtest: name") stack
    in_yaml = False
    for raw in _ANSI.sub("", log).splitlines():
        stripped = raw.strip()
        if in_yaml:
            if stripped == "...":
                in_yaml = False
            continue
        if stripped == "---":
            in_yaml = True
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if stripped.startswith("# Subtest:"):
            pending = [(i, n) for i, n in pending if i < indent]
            pending.append((indent, stripped[len("# Subtest:"):].strip()))
            continue
        m = _TAP.match(raw)
        if not m:
            continue
        level = indent // 4
        parents = [n for i, n in pending if i < indent][:level]
        name = " > ".join([*parents, normalize_test_name(m.group(3))])
        if m.group(4):
            status = S
        else:
            status = P if m.group(2).lower() == "ok" else F
        _put(out, name, status)
        pending = [(i, n) for i, n in pending if i < indent]
    return out


# -- cargo -----------------------------------------------------------------------------------
_CARGO = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored(?:, .*)?)$")


def parse_cargo(log: str) -> dict[str, str]:
    """``cargo test``: ``test path::name ... ok|FAILED|ignored`` (names may hold spaces)."""
    out: dict[str, str] = {}
    for line in _ANSI.sub("", log).splitlines():
        m = _CARGO.match(line.strip())
        if m:
            verdict = m.group(2)
            name = re.sub(r" - should panic(?: with .*)?$", "", m.group(1))  # #[should_panic] marker
            _put(out, name, P if verdict == "ok" else F if verdict == "FAILED" else S)
    return out


# -- JUnit XML -------------------------------------------------------------------------------
_SUITE = re.compile(r"<testsuite\b.*?</testsuite>", re.S)


def parse_junit_xml(log: str) -> dict[str, str]:
    """JUnit XML printed in the log: ``<testcase classname name>`` with ``<failure>``,
    ``<error>`` or ``<skipped>`` children. Key: ``classname.name``."""
    out: dict[str, str] = {}
    for block in _SUITE.findall(_ANSI.sub("", log)):
        try:
            root = ET.fromstring(block)
        except ET.ParseError:
            continue
        for case in root.iter("testcase"):
            name = case.get("name", "")
            cls = case.get("classname", "")
            full = f"{cls}.{name}" if cls else name
            if case.find("failure") is not None:
                status = F
            elif case.find("error") is not None:
                status = E
            elif case.find("skipped") is not None:
                status = S
            else:
                status = P
            _put(out, full, status)
    return out


# -- go test ---------------------------------------------------------------------------------
_GO = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")


def parse_gotest(log: str) -> dict[str, str]:
    """``go test -v``: ``--- PASS|FAIL|SKIP: Name (0.00s)`` (subtests as ``Parent/child``)."""
    table = {"PASS": P, "FAIL": F, "SKIP": S}
    out: dict[str, str] = {}
    for line in _ANSI.sub("", log).splitlines():
        m = _GO.match(line)
        if m:
            _put(out, m.group(2), table[m.group(1)])
    return out


PARSERS: dict[str, Callable[[str], dict[str, str]]] = {
    "pytest": parse_pytest,
    "unittest": parse_unittest,
    "tap": parse_tap,
    "cargo": parse_cargo,
    "junit_xml": parse_junit_xml,
    "gotest": parse_gotest,
}

_SNIFF = {
    "pytest": re.compile(r"^(PASSED|FAILED) \S+::", re.M),
    "unittest": re.compile(r"^\w+ \([\w.]+\) \.\.\. ", re.M),
    "tap": re.compile(r"^\s*(not )?ok \d+", re.M),
    "cargo": re.compile(r"^test .+ \.\.\. ", re.M),
    "junit_xml": re.compile(r"<testcase\b"),
    "gotest": re.compile(r"^\s*--- (PASS|FAIL|SKIP): ", re.M),
}


def get_parser(name: str) -> Callable[[str], dict[str, str]]:
    if not isinstance(name, str) or name not in PARSERS:
        raise ValueError(f"parser name must be one of {sorted(PARSERS)}, got {name!r}")
    return PARSERS[name]


class ParserSynthesizer(Protocol):
    """Writes a log parser for a repository from sample logs; returns a parser name or None."""

    def synthesize(self, logs: list[str]) -> str | None: ...


class RuleBasedParserSynthesizer:
    """Stand-in for the LLM parser writer (deterministic, no model).

    Ranks the template parsers by how many lines of the first log look like their format,
    tries the best ``max_tries`` (the paper's 5 retries), and accepts the first that finds at
    least one test in every log and the same test names in all of them.
    """

    label = "RuleBasedParserSynthesizer (deterministic stand-in for an LLM)"

    def __init__(self, max_tries: int = 5):
        if not isinstance(max_tries, int) or max_tries < 1:
            raise ValueError(f"max_tries must be a positive int, got {max_tries!r}")
        self.max_tries = max_tries
        self.attempts: list[str] = []

    def synthesize(self, logs: list[str]) -> str | None:
        if not isinstance(logs, list) or not logs or not all(isinstance(x, str) for x in logs):
            raise TypeError("logs must be a non-empty list of strings")
        ranked = sorted(PARSERS, key=lambda n: -len(_SNIFF[n].findall(logs[0])))
        self.attempts = []
        for name in ranked[: self.max_tries]:
            self.attempts.append(name)
            maps = [PARSERS[name](log) for log in logs]
            if all(maps) and all(set(m) == set(maps[0]) for m in maps):
                return name
        return None
