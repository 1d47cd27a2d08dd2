"""Log parsers: a test log becomes a map ``{test_name: PASSED | FAILED | SKIPPED | ERROR}``.

SWE-rebench V2, Sec. 3.2: after a successful run the setup agent has an LLM write a
repository-specific ``parse_log(log)`` using only the standard library, validates it on other
traces of the same repository and retries up to 5 times. Here the parsers are written by hand,
one per test-log family, and :class:`RuleBasedParserSynthesizer` (a deterministic stand-in for
the LLM) picks the one that works on the given logs.

Every parser is checked against a corpus of real logs made on this machine by the real runners
(``data/swe-rebench/logs/``: pytest 9, unittest in the Python 3.11 and pre-3.11 formats,
``node --test`` with the tap, spec and junit reporters, ``cargo test`` plain and coloured, Jest,
Vitest, Mocha, Maven Surefire). Each parse is also cross-checked against the runner's own
summary line (:func:`summary_count`, :func:`cross_check`): a parser that finds fewer or more tests
than the runner says it ran is rejected by the synthesizer, and a validation run whose parse
disagrees with its summary is flagged.

Names are normalised (:func:`normalize_test_name`): ANSI colour codes (CSI sequences and the
``ESC ( B`` that libtest emits with ``--color=always``), timing suffixes such as ``(0.01s)`` or
``[3 ms]``, TAP's leading ``- `` and progress markers such as ``[100%]`` would otherwise become
fake test names or break F2P/P2P matching across runs.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
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

# CSI sequences (colours, cursor), charset selection such as ESC ( B (libtest's "sgr0" reset),
# OSC sequences (hyperlinks, titles) and the keypad-mode escapes.
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|[()][AB012]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[=>])")
_TIMING = re.compile(r"\s*(\(\s*\d+(\.\d+)?\s*(ms|s|sec|seconds?)\s*\)|\[\s*\d+(\.\d+)?\s*(ms|s)\s*\])\s*$")
_PROGRESS = re.compile(r"\s*\[\s*\d{1,3}%\]\s*$")


def strip_ansi(text: str) -> str:
    """``text`` without terminal escape sequences (colours, ``ESC ( B``, hyperlinks)."""
    if not isinstance(text, str):
        raise TypeError(f"log must be a string, got {type(text).__name__}")
    return _ANSI.sub("", text)


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


_RANK = {P: 0, S: 1, F: 2, E: 2}


def _put(out: dict[str, str], name: str, status: str, *, merge: bool = False) -> None:
    """Record ``status`` for ``name``; with ``merge`` a not-passed verdict is never downgraded."""
    name = normalize_test_name(name)
    if not name:
        return
    if merge and name in out and _RANK[out[name]] > _RANK[status]:
        return
    out[name] = status


def _lines(log: str) -> list[str]:
    return strip_ansi(log).splitlines()


# -- Python: unittest ------------------------------------------------------------------------
_UT_VERDICTS = {"ok": P, "expected failure": P, "FAIL": F, "unexpected success": F, "ERROR": E}
_UT_VERDICT = re.compile(r"(ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)[ \t]*$")
# a progress header: "name (dotted.id)[ (subtest params)][\n docstring line] ... ". It starts a
# line, or follows "... " directly (pre-3.11, a parent whose subtest failed prints no verdict).
_UT_HEAD = re.compile(r"(?:^|(?<=\.\.\. ))[ \t]*(\w+) \(([\w.]+)\)((?: \([^\n]*?\))?)"
                      r"(?:\n(?![ \t]*\w+ \([\w.]+\))[^\n]*?)? \.\.\. ?", re.M)
_UT_DETAIL = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\w+) \(([\w.]+)\)", re.M)
_UT_RULE = re.compile(r"^={60,}$", re.M)


def _ut_key(name: str, dotted: str) -> str:
    """Python >= 3.11 prints ``module.Class.method``; older versions ``module.Class`` only."""
    return dotted if dotted == name or dotted.endswith("." + name) else f"{dotted}.{name}"


def parse_unittest(log: str) -> dict[str, str]:
    """``python -m unittest -v``, both the 3.11+ and the pre-3.11 format.

    Progress lines ``test_x (module.Class.test_x) ... ok|FAIL|ERROR|skipped '..'`` (3.11+) or
    ``test_x (module.Class) ... ok`` (pre-3.11, keyed ``module.Class.test_x`` so that the methods
    of a class stay apart). A docstring moves the ``...`` and the verdict to the next line; output
    printed by a test pushes the verdict to a later line; a failing ``subTest`` marks its parent
    FAILED (3.11 prints an indented ``(i=1) ... FAIL`` line, older versions print no verdict at
    all, so the ``FAIL:``/``ERROR:`` headers of the detail section are read too). ``expected
    failure`` counts as PASSED and ``unexpected success`` as FAILED (the SWE-bench convention).
    """
    text = strip_ansi(log)
    out: dict[str, str] = {}
    heads = list(_UT_HEAD.finditer(text))
    for i, m in enumerate(heads):
        name, dotted = m.group(1), m.group(2)
        stop = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        rule = _UT_RULE.search(text, m.end(), stop)
        region = text[m.end(): rule.start() if rule else stop]
        verdict = None
        for line in region.split("\n"):
            v = _UT_VERDICT.fullmatch(line.strip())
            if v:
                verdict = v.group(1)
                break
        if verdict is None:
            continue                                   # a subtest parent (verdict comes later)
        status = S if verdict.startswith("skipped") else _UT_VERDICTS[verdict]
        _put(out, _ut_key(name, dotted), status, merge=True)
    for m in _UT_DETAIL.finditer(text):
        status = {"FAIL": F, "ERROR": E, "UNEXPECTED SUCCESS": F}[m.group(1)]
        _put(out, _ut_key(m.group(2), m.group(3)), status, merge=True)
    return out


# -- Python: pytest --------------------------------------------------------------------------
_PT_STATUS = {"PASSED": P, "FAILED": F, "ERROR": E, "XFAIL": P, "XPASS": F, "SKIPPED": S}
_PT_SHORT = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (.+)$")
_PT_WORD = re.compile(r" (PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\b")
_PT_VERBOSE_TAIL = re.compile(r"(?: \(.*\))?\s*(?:\[\s*\d{1,3}%\])?\s*")


def _balanced(s: str) -> bool:
    return s.count("[") == s.count("]") and s.count("(") == s.count(")")


def _pytest_nodeid(rest: str) -> str:
    """The node id at the start of ``rest``: up to the first `` - `` outside brackets."""
    start = 0
    while True:
        k = rest.find(" - ", start)
        if k < 0:
            return rest.strip()
        if _balanced(rest[:k]):
            return rest[:k].strip()
        start = k + 1


def parse_pytest(log: str) -> dict[str, str]:
    """pytest: the ``-rA`` short summary ``STATUS node::id[ - msg]`` and the ``-v`` progress lines
    ``node::id STATUS[ (reason)] [ 50%]``. XFAIL counts as PASSED and XPASS as FAILED.

    Node ids may hold spaces and `` - `` inside their brackets (``test_p[a b]``,
    ``test_p[with - dash]``): the id runs to the first `` - `` at which brackets are balanced.
    Summary lines without a node id (``SKIPPED [1] f.py:3: why``, collection ``ERROR f.py``)
    name no test: those tests are *absent*, which the transition rules handle.
    """
    out: dict[str, str] = {}
    for line in _lines(log):
        line = line.rstrip()
        m = _PT_SHORT.match(line)
        if m:
            node = _pytest_nodeid(m.group(2))
            if "::" in node and not node.startswith("["):
                _put(out, node, _PT_STATUS[m.group(1)], merge=True)
            continue
        if "::" not in line or line[:1] in " _=[":
            continue
        for w in _PT_WORD.finditer(line):                 # verbose: id STATUS (reason) [ 50%]
            node = line[: w.start()]
            if "::" in node and _balanced(node) and _PT_VERBOSE_TAIL.fullmatch(line[w.end():]):
                _put(out, node, _PT_STATUS[w.group(1)], merge=True)
                break
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
    for raw in _lines(log):
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


# -- node --test, spec reporter --------------------------------------------------------------
_SPEC = re.compile(r"^(\s*)([✔✖﹣▶])\s(.*)$")
_DIRECTIVE = re.compile(r"\s+#\s*(.*)$")


def parse_node_spec(log: str) -> dict[str, str]:
    """``node --test --test-reporter=spec``: ``✔ name (1ms)``, ``✖ name``, ``﹣ name # reason``.

    A suite opens with ``▶ name`` and closes with a marked line of the same name and indentation
    (recorded as the suite, as TAP records parents); tests inside are ``suite > test``. ``# TODO``
    and ``﹣`` mean SKIPPED. The ``✖ failing tests:`` recap at the end is not read again.
    """
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for raw in _lines(log):
        if raw.strip().startswith("✖ failing tests"):
            break
        m = _SPEC.match(raw)
        if not m:
            continue
        indent, mark, rest = len(m.group(1)), m.group(2), m.group(3)
        d = _DIRECTIVE.search(rest)
        directive = d.group(1) if d else ""
        if d:
            rest = rest[: d.start()]
        name = normalize_test_name(rest)
        stack = [(i, n) for i, n in stack if i <= indent]
        if mark == "▶":
            stack = [(i, n) for i, n in stack if i < indent] + [(indent, name)]
            continue
        if stack and stack[-1] == (indent, name):     # the closing line of a suite
            full = " > ".join(n for _, n in stack)
            stack.pop()
        else:
            full = " > ".join([*(n for i, n in stack if i < indent), name])
        if mark == "﹣" or directive.upper().startswith("TODO"):
            status = S
        else:
            status = P if mark == "✔" else F
        _put(out, full, status)
    return out


# -- Jest, Vitest, Mocha ---------------------------------------------------------------------
_JEST_FILE = re.compile(r"^(PASS|FAIL)\s+\S")
_JEST_TEST = re.compile(r"^(\s+)([✓✕○✎√×])\s+(?:(skipped|todo)\s+)?(.*)$")


def parse_jest(log: str) -> dict[str, str]:
    """Jest ``--verbose``: per file ``PASS|FAIL path``, describe blocks as indented headers, then
    ``✓ name (2 ms)``, ``✕ name``, ``○ skipped name``, ``✎ todo name``. Key ``describe > test``."""
    out: dict[str, str] = {}
    listing = False
    stack: list[tuple[int, str]] = []
    for raw in _lines(log):
        if _JEST_FILE.match(raw):
            listing, stack = True, []
            continue
        if not listing or not raw.strip():
            continue
        if raw.lstrip().startswith("●") or re.match(r"^(Tests|Test Suites|Snapshots|Time):", raw):
            listing = False
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        m = _JEST_TEST.match(raw)
        if m:
            parents = [n for i, n in stack if i < indent]
            status = S if m.group(3) or m.group(2) in "○✎" else P if m.group(2) in "✓√" else F
            _put(out, " > ".join([*parents, normalize_test_name(m.group(4))]), status)
        elif indent >= 2:                                  # a describe header
            stack = [(i, n) for i, n in stack if i < indent] + [(indent, raw.strip())]
    return out


_VITEST = re.compile(r"^\s*([✓×↓✗√]|❯)\s+(.*?)(?:\s+\d+(?:\.\d+)?\s*m?s)?(?:\s+\[skipped\])?\s*$")


def parse_vitest(log: str) -> dict[str, str]:
    """Vitest ``run --reporter=verbose``: ``✓ file > suite > name 1ms``, ``× ...`` (failed),
    ``↓ ...`` (skipped or todo). File summary lines ``file (6 tests)`` are not tests."""
    out: dict[str, str] = {}
    for raw in _lines(log):
        m = _VITEST.match(raw)
        if not m or m.group(1) == "❯" or " > " not in m.group(2):
            continue
        if re.search(r"\(\d+ tests?\b", m.group(2)):
            continue
        status = {"✓": P, "√": P, "×": F, "✗": F, "↓": S}[m.group(1)]
        _put(out, m.group(2), status)
    return out


_MOCHA_TEST = re.compile(r"^(\s+)(?:([✔✓])|(\d+)\)|(-))\s+(.*)$")
_MOCHA_END = re.compile(r"^\s+\d+ (passing|pending|failing)\b")


def parse_mocha(log: str) -> dict[str, str]:
    """Mocha's spec reporter: describe headers indented 2 per level, ``✔ name (5ms)``,
    ``N) name`` (failing), ``- name`` (pending). Stops at the ``N passing`` summary."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for raw in _lines(log):
        if _MOCHA_END.match(raw):
            break
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        m = _MOCHA_TEST.match(raw)
        if m:
            status = P if m.group(2) else F if m.group(3) else S
            parents = [n for i, n in stack if i < indent]
            _put(out, " > ".join([*parents, normalize_test_name(m.group(5))]), status)
        elif indent >= 2:
            stack = [(i, n) for i, n in stack if i < indent] + [(indent, raw.strip())]
    return out


# -- cargo -----------------------------------------------------------------------------------
_CARGO = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored(?:, .*)?)$")


def parse_cargo(log: str) -> dict[str, str]:
    """``cargo test``: ``test path::name ... ok|FAILED|ignored`` (names may hold spaces)."""
    out: dict[str, str] = {}
    for line in _lines(log):
        m = _CARGO.match(line.strip())
        if m:
            verdict = m.group(2)
            name = re.sub(r" - should panic(?: with .*)?$", "", m.group(1))  # #[should_panic] marker
            _put(out, name, P if verdict == "ok" else F if verdict == "FAILED" else S)
    return out


# -- Maven Surefire (plain text) -------------------------------------------------------------
_SF_NEW = re.compile(r"^(?:\[\w+\]\s+)?([\w$.]+)\.([\w$]+(?:\(.*?\))?(?:\[\d+\])?) -- Time elapsed: .*?"
                     r"(?:<<< (FAILURE|ERROR)!)?\s*$")
_SF_OLD = re.compile(r"^(?:\[\w+\]\s+)?([\w$]+)\(([\w$.]+)\)\s+Time elapsed: .*?(?:<<< (FAILURE|ERROR)!)?\s*$")
_SF_SKIP = re.compile(r"^(?:\[\w+\]\s+)?([\w$.]+)\.([\w$]+) skipped\s*$")


def parse_surefire(log: str) -> dict[str, str]:
    """Maven Surefire console output with ``-Dsurefire.reportFormat=plain``: one line per test,
    ``pkg.Class.method -- Time elapsed: 0.01 s[ <<< FAILURE!|<<< ERROR!]`` (Surefire 3) or
    ``method(pkg.Class)  Time elapsed: ...`` (Surefire 2). Key ``pkg.Class.method``. A skipped
    JUnit 5 test is printed as ``pkg.Class skipped`` without its method: it names no test."""
    out: dict[str, str] = {}
    for line in _lines(log):
        m = _SF_NEW.match(line)
        if m:
            cls, meth, bad = m.groups()
        else:
            m = _SF_OLD.match(line)
            if not m:
                continue
            meth, cls, bad = m.groups()
        _put(out, f"{cls}.{meth}", F if bad == "FAILURE" else E if bad == "ERROR" else P)
    return out


# -- JUnit XML -------------------------------------------------------------------------------
_ROOT = re.compile(r"<(testsuites|testsuite)\b")


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def junit_documents(log: str) -> list[ET.Element]:
    """Every JUnit XML document printed in ``log``, parsed as XML (outermost ``<testsuites>`` or
    ``<testsuite>`` elements; text before, between and after them is ignored).

    Raises ``ValueError`` naming the line when a document is not well-formed XML.
    """
    text = strip_ansi(log)
    docs: list[ET.Element] = []
    pos = 0
    while True:
        m = _ROOT.search(text, pos)
        if not m:
            return docs
        tag = m.group(1)
        opener = re.compile(rf"<{tag}\b[^>]*?(/?)>|</{tag}\s*>", re.S)
        depth, end = 0, None
        for t in opener.finditer(text, m.start()):
            if t.group(0).startswith("</"):
                depth -= 1
            elif t.group(1) != "/":
                depth += 1
            elif depth == 0:                              # a self-closing root
                end = t.end()
                break
            if depth == 0:
                end = t.end()
                break
        line = text.count("\n", 0, m.start()) + 1
        if end is None:
            raise ValueError(f"log holds a <{tag}> element opened at line {line} that is never closed")
        try:
            docs.append(ET.fromstring(text[m.start(): end]))
        except ET.ParseError as exc:
            raise ValueError(f"log holds malformed JUnit XML (the <{tag}> element at line {line}): {exc}") from None
        pos = end


def parse_junit_xml(log: str) -> dict[str, str]:
    """JUnit XML printed in the log, parsed with the standard library's XML parser.

    ``<testcase classname name>`` with ``<failure>``, ``<error>`` or ``<skipped>`` children.
    Key: ``classname.name``; where suites nest (node's junit reporter, whose classname is always
    ``test``) the key is the suite path, ``suite > inner > name``, as in the TAP parser. Test
    cases directly under ``<testsuites>`` count. Malformed XML raises ``ValueError``.
    """
    out: dict[str, str] = {}
    for root in junit_documents(log):
        nested = any(_local(c.tag) == "testsuite" for s in root.iter() if _local(s.tag) == "testsuite"
                     for c in s)

        def walk(el: ET.Element, path: list[str], nested: bool = nested) -> None:
            for child in el:
                tag = _local(child.tag)
                if tag == "testsuite":
                    walk(child, path + [child.get("name", "")] if nested else path)
                elif tag == "testcase":
                    name, cls = child.get("name", ""), child.get("classname", "")
                    if nested:
                        full = " > ".join([*[p for p in path if p], name])
                    else:
                        full = f"{cls}.{name}" if cls else name
                    kids = {_local(k.tag) for k in child}
                    status = F if "failure" in kids else E if "error" in kids else S if "skipped" in kids else P
                    _put(out, full, status)

        walk(root if _local(root.tag) == "testsuites" else _wrap(root), [])
    return out


def _wrap(el: ET.Element) -> ET.Element:
    w = ET.Element("testsuites")
    w.append(el)
    return w


# -- go test ---------------------------------------------------------------------------------
_GO = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")


def parse_gotest(log: str) -> dict[str, str]:
    """``go test -v``: ``--- PASS|FAIL|SKIP: Name (0.00s)`` (subtests as ``Parent/child``)."""
    table = {"PASS": P, "FAIL": F, "SKIP": S}
    out: dict[str, str] = {}
    for line in _lines(log):
        m = _GO.match(line)
        if m:
            _put(out, m.group(2), table[m.group(1)])
    return out


PARSERS: dict[str, Callable[[str], dict[str, str]]] = {
    "pytest": parse_pytest,
    "unittest": parse_unittest,
    "tap": parse_tap,
    "node_spec": parse_node_spec,
    "jest": parse_jest,
    "vitest": parse_vitest,
    "mocha": parse_mocha,
    "cargo": parse_cargo,
    "surefire": parse_surefire,
    "junit_xml": parse_junit_xml,
    "gotest": parse_gotest,
}

_SNIFF = {
    "pytest": re.compile(r"^(PASSED|FAILED) \S+::|::\S.* (PASSED|FAILED)\b", re.M),
    "unittest": re.compile(r"^\w+ \([\w.]+\)(?:\n.*?)? \.\.\. ", re.M),
    "tap": re.compile(r"^\s*(not )?ok \d+", re.M),
    "node_spec": re.compile(r"^\s*[✔✖﹣▶] ", re.M),
    "jest": re.compile(r"^\s+[✓✕○✎] |^(PASS|FAIL) \S", re.M),
    "vitest": re.compile(r"^\s*[✓×↓] \S+ > ", re.M),
    "mocha": re.compile(r"^\s+(✔|\d+\)) |^\s+\d+ passing", re.M),
    "cargo": re.compile(r"^test .+ \.\.\. ", re.M),
    "surefire": re.compile(r" -- Time elapsed: |\)\s+Time elapsed: "),
    "junit_xml": re.compile(r"<testcase\b"),
    "gotest": re.compile(r"^\s*--- (PASS|FAIL|SKIP): ", re.M),
}


# -- the runner's own count ------------------------------------------------------------------
def _ints(pattern: str, text: str, flags: int = re.M) -> list[re.Match]:
    return list(re.finditer(pattern, text, flags))


def summary_count(parser: str, log: str) -> int | None:
    """How many tests the runner's own summary says the log names, or ``None`` if it has none.

    pytest ``N passed, M failed, ...`` (minus skips reported without a node id, ``SKIPPED [n]``,
    when the log has no ``-v`` lines, and minus file-level collection errors); unittest
    ``Ran N tests``; TAP the sum of all plans ``1..N`` (parents are test points too); node spec
    ``ℹ tests`` + ``ℹ suites``; cargo the sum of ``test result:`` counts; Surefire the per-class
    ``Tests run:`` lines minus unnamed skips; Jest ``Tests: N total``; Vitest ``Tests ... (N)``;
    Mocha passing + pending + failing; JUnit XML the root's ``tests`` attributes.
    """
    get_parser(parser)
    text = strip_ansi(log)
    if parser == "pytest":
        lines = _ints(r"^=+ (.*?\d+ (?:passed|failed|skipped|xfailed|xpassed|errors?|deselected|warnings?).*?)"
                      r" in [\d.]+s", text)
        if not lines:
            return None
        total = 0
        for m in lines:
            for n, _what in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)", m.group(1)):
                total += int(n)
        verbose = re.search(r"^\S+::\S.* (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b", text, re.M)
        if not verbose:
            total -= sum(int(n) for n in re.findall(r"^SKIPPED \[(\d+)\]", text, re.M))
        total -= len(re.findall(r"^ERROR (?![^\n]*::)\S+", text, re.M))
        return total
    if parser == "unittest":
        ran = re.findall(r"^Ran (\d+) tests? in ", text, re.M)
        return sum(map(int, ran)) if ran else None
    if parser == "tap":
        plans = re.findall(r"^\s*1\.\.(\d+)", text, re.M)
        return sum(map(int, plans)) if plans else None
    if parser == "node_spec":
        t = re.search(r"^ℹ tests (\d+)", text, re.M)
        s = re.search(r"^ℹ suites (\d+)", text, re.M)
        return int(t.group(1)) + (int(s.group(1)) if s else 0) if t else None
    if parser == "cargo":
        res = _ints(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured", text)
        return sum(sum(map(int, m.groups())) for m in res) if res else None
    if parser == "surefire":
        per_class = _ints(r"Tests run: (\d+), Failures: \d+, Errors: \d+, Skipped: \d+.*? in [\w$.]+\s*$", text)
        if not per_class:
            return None
        unnamed = len(_ints(r"^(?:\[\w+\]\s+)?[\w$.]+ skipped\s*$", text))
        return sum(int(m.group(1)) for m in per_class) - unnamed
    if parser == "jest":
        m = re.search(r"^Tests:\s+.*?(\d+) total", text, re.M)
        return int(m.group(1)) if m else None
    if parser == "vitest":
        m = re.search(r"^\s*Tests\s+.*\((\d+)\)\s*$", text, re.M)
        return int(m.group(1)) if m else None
    if parser == "mocha":
        counts = re.findall(r"^\s+(\d+) (?:passing|pending|failing)\b", text, re.M)
        return sum(map(int, counts)) if counts else None
    if parser == "junit_xml":
        total = 0
        try:
            docs = junit_documents(text)
        except ValueError:
            return None
        if not docs:
            return None
        for root in docs:
            if root.get("tests") is not None:
                total += int(root.get("tests"))
                continue
            for child in root:
                if _local(child.tag) == "testsuite":
                    if child.get("tests") is None:
                        return None
                    total += int(child.get("tests"))
                elif _local(child.tag) == "testcase":
                    total += 1
        return total
    return None                                        # gotest prints no overall count


@dataclass(frozen=True)
class ParseCheck:
    """A parse and the runner's own count of the tests the log names."""

    parser: str
    parsed: int
    summary: int | None

    @property
    def checked(self) -> bool:
        return self.summary is not None

    @property
    def agrees(self) -> bool:
        """True when the runner printed a count and the parse found exactly that many tests."""
        return self.summary is not None and self.parsed == self.summary


def cross_check(parser: str, log: str, statuses: dict[str, str] | None = None) -> ParseCheck:
    """Parse ``log`` with ``parser`` (unless ``statuses`` are given) and compare the number of
    tests with the runner's summary line (:func:`summary_count`)."""
    if statuses is None:
        try:
            statuses = get_parser(parser)(log)
        except ValueError:
            statuses = {}
    return ParseCheck(parser, len(statuses), summary_count(parser, log))


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
    least one test in every log, the same test names in all of them, and, where the runner
    prints a count, exactly as many tests as its summary line says (:func:`cross_check`).
    ``rejected`` lists the parsers turned down for a count mismatch.
    """

    label = "RuleBasedParserSynthesizer (deterministic stand-in for an LLM)"

    def __init__(self, max_tries: int = 5):
        if not isinstance(max_tries, int) or isinstance(max_tries, bool) or max_tries < 1:
            raise ValueError(f"max_tries must be a positive int, got {max_tries!r}")
        self.max_tries = max_tries
        self.attempts: list[str] = []
        self.rejected: list[ParseCheck] = []

    def synthesize(self, logs: list[str]) -> str | None:
        if not isinstance(logs, list) or not logs or not all(isinstance(x, str) for x in logs):
            raise TypeError("logs must be a non-empty list of strings")
        ranked = sorted(PARSERS, key=lambda n: -len(_SNIFF[n].findall(logs[0])))
        self.attempts, self.rejected = [], []
        for name in ranked[: self.max_tries]:
            self.attempts.append(name)
            try:
                maps = [PARSERS[name](log) for log in logs]
            except ValueError:
                continue                                   # malformed input for this format
            if not (all(maps) and all(set(m) == set(maps[0]) for m in maps)):
                continue
            checks = [cross_check(name, log, mp) for log, mp in zip(logs, maps, strict=True)]
            bad = [c for c in checks if c.checked and not c.agrees]
            if bad:
                self.rejected.append(bad[0])
                continue
            return name
        return None
