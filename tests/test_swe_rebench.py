"""Tests of icml26.swe_rebench: the unit identities of spec section 8 and the bad inputs of section 9."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import icml26.swe_rebench as m
import numpy as np
import pytest
from icml26.swe_rebench.gitops import check_patch

P, F, S, E = "PASSED", "FAILED", "SKIPPED", "ERROR"


# ------------------------------------------------------------------ 1. transitions
def test_two_state_transitions():
    test = {"a": F, "b": P, "c": P, "d": F, "e": S}
    fix = {"a": P, "b": P, "c": F, "d": F, "e": P, "new": P}
    out = m.classify_transitions(None, test, fix)
    # "e" was skipped before and passes after: it did not pass before, so it is F2P (eq. 1)
    assert out == {"F2P": ["a", "e", "new"], "P2P": ["b"], "P2F": ["c"], "F2F": ["d"], "OTHER": []}
    out = m.classify_transitions(None, {"s": S, "t": S, "u": P}, {"s": S, "t": F, "u": S})
    assert out["OTHER"] == ["s", "t", "u"] and not out["F2P"]


def test_skip_guarded_test_is_f2p_from_real_logs():
    """Issue 13.5: ``skipUnless(hasattr(mod, "new_fn"))`` is SKIPPED before and PASSED after: F2P."""
    case = m.experiments.skip_guarded_case()
    new = "test_skipguard.TestNew.test_new_fn"
    assert case["before"][new] == S and case["after"][new] == P
    assert case["classes"]["F2P"] == [new] and case["classes"]["P2P"] == ["test_skipguard.TestNew.test_old"]
    # with a base state (same statuses as before) the three-state rule agrees with the paper's rule
    three = m.classify_transitions(case["before"], case["before"], case["after"])
    assert three == case["classes"]


def test_three_state_rule_agrees_when_test_state_reports_every_test():
    """The proposition of notebook 1: if every test appears in the test state, eq. 3 = eqs. 1-2."""
    rng = np.random.default_rng(1)
    names = [f"t{i}" for i in range(30)]
    for _ in range(50):
        test = {n: [P, F, S, E][rng.integers(4)] for n in names}
        fix = {n: s for n in names if (s := [P, F, S, E, None][rng.integers(5)]) is not None}
        base = {n: [P, F, S, E][rng.integers(4)] for n in names if rng.random() < 0.7}
        two, three = m.classify_transitions(None, test, fix), m.classify_transitions(base, test, fix)
        assert two["F2P"] == three["F2P"] and two["P2P"] == three["P2P"]


def test_three_state_rescues_compile_failure():
    base = {"old1": P, "old2": P, "broken": F}
    test = {}                               # the test patch did not compile: no test reported
    fix = {"old1": P, "old2": P, "broken": P, "new": P}
    two = m.classify_transitions(None, test, fix)
    three = m.classify_transitions(base, test, fix)
    assert two["F2P"] == ["broken", "new", "old1", "old2"]   # the two-state rule is fooled
    assert three["F2P"] == ["broken", "new"] and three["P2P"] == ["old1", "old2"]


def test_absent_before_counts_as_not_passed():
    out = m.classify_transitions({"x": P}, {"x": P}, {"x": P, "y": P})
    assert out["F2P"] == ["y"] and out["P2P"] == ["x"]
    # absent after a passing before: regression
    assert m.classify_transitions(None, {"x": P}, {})["P2F"] == ["x"]


def test_every_test_in_exactly_one_class():
    rng = np.random.default_rng(0)
    names = [f"t{i}" for i in range(40)]
    states = [P, F, S, E, None]
    for _ in range(20):
        maps = [{n: s for n in names if (s := states[rng.integers(5)]) is not None} for _ in range(3)]
        out = m.classify_transitions(*maps)
        seen = sum(out.values(), [])
        assert sorted(seen) == sorted(set().union(*maps)) and len(seen) == len(set(seen))
        assert not set(out["F2P"]) & set(out["P2P"])


# ------------------------------------------------------------------ 2. parsers
CORPUS = m.experiments.log_corpus()


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_parser_finds_every_test_of_a_real_log(name):
    """Issue 13: every parser finds every test its real log names, with the right status, and as
    many tests as the runner's own summary line says."""
    case = CORPUS[name]
    got = m.parsers.get_parser(case["parser"])(case["text"])
    assert got == case["expected"]
    chk = m.parsers.cross_check(case["parser"], case["text"], got)
    assert chk.checked and chk.agrees, chk


def test_real_log_corpus_covers_the_issue():
    frameworks = {c["framework"] for c in CORPUS.values()}
    assert {"pytest", "unittest", "node --test", "cargo test", "jest", "vitest", "mocha",
            "maven surefire"} <= frameworks
    assert {c["parser"] for c in CORPUS.values()} >= {"pytest", "unittest", "tap", "node_spec", "junit_xml",
                                                     "cargo", "jest", "vitest", "mocha", "surefire"}
    assert "\x1b(B" in CORPUS["cargo_color"]["text"]                        # libtest's sgr0
    assert "test_a (" not in CORPUS["unittest_py310"]["text"]
    assert re.search(r"^test_ok \(test_mod\.TestA\) \.\.\. ok$", CORPUS["unittest_py310"]["text"], re.M)
    for case in CORPUS.values():
        assert case["command"] and case["tool_version"] and case["expected"]


def test_parse_pytest_ids_with_spaces():
    log = ("PASSED t.py::test_param[a b]\nPASSED t.py::test_param[with - dash]\n"
           "FAILED t.py::test_ids[one two] - AssertionError: x - y\n"
           "t.py::test_v[p q] PASSED                 [ 50%]\nt.py::test_s SKIPPED (no reason)    [100%]\n")
    assert m.parse_pytest(log) == {"t.py::test_param[a b]": P, "t.py::test_param[with - dash]": P,
                                   "t.py::test_ids[one two]": F, "t.py::test_v[p q]": P, "t.py::test_s": S}


def test_parse_unittest_docstrings_subtests_and_old_format():
    new = ("test_doc (m.C.test_doc)\nSays what it does. ... ok\n"
           "test_sub (m.C.test_sub) ... \n  test_sub (m.C.test_sub) (i=1) ... FAIL\n"
           "test_x (m.C.test_x) ... ok\n")
    assert m.parse_unittest(new) == {"m.C.test_doc": P, "m.C.test_sub": F, "m.C.test_x": P}
    old = ("test_a (m.C) ... ok\ntest_b (m.C) ... FAIL\ntest_sub (m.C) ... test_z (m.C) ... ok\n"
           "\n" + "=" * 70 + "\nFAIL: test_sub (m.C) (i=1)\n" + "-" * 70 + "\nTraceback\n")
    assert m.parse_unittest(old) == {"m.C.test_a": P, "m.C.test_b": F, "m.C.test_sub": F, "m.C.test_z": P}


def test_ansi_escape_including_esc_paren_b():
    log = "test a::b ... \x1b[32mok\x1b(B\x1b[m\ntest a::c ... \x1b[31mFAILED\x1b(B\x1b[m\n"
    assert m.parse_cargo(log) == {"a::b": P, "a::c": F}
    assert m.parsers.strip_ansi("\x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b[1;31mred\x1b[0m") == "link red"


def test_junit_xml_nested_suites_and_malformed_input():
    log = ('<?xml version="1.0"?>\n<testsuites>\n <testsuite name="s" tests="2">\n'
           '  <testsuite name="inner" tests="1"><testcase name="deep" classname="test"/></testsuite>\n'
           '  <testcase name="bad" classname="test"><failure/></testcase>\n </testsuite>\n'
           ' <testcase name="top" classname="test"><skipped/></testcase>\n</testsuites>\n')
    assert m.parse_junit_xml(log) == {"s > inner > deep": P, "s > bad": F, "top": S}
    assert m.parsers.summary_count("junit_xml", log) == 3
    with pytest.raises(ValueError, match="malformed JUnit XML.*line 2"):
        m.parse_junit_xml("noise\n<testsuite><testcase name='a'></testsuite>")
    with pytest.raises(ValueError, match="never closed"):
        m.parse_junit_xml("<testsuites><testsuite><testcase name='a'/>")


def test_synthesizer_rejects_a_parser_whose_count_disagrees_with_the_summary():
    """Issue 13.7: names consistent across runs are not enough; the count must match the summary."""
    log = ("test_a (m.C.test_a) ... ok\ntest_b (m.C.test_b) ... ok\n"
           "----------------------------------------------------------------------\nRan 3 tests in 0.001s\n")
    chk = m.parsers.cross_check("unittest", log)
    assert chk.checked and not chk.agrees and (chk.parsed, chk.summary) == (2, 3)
    syn = m.RuleBasedParserSynthesizer()
    assert syn.synthesize([log, log]) is None and syn.rejected[0].parser == "unittest"
    good = CORPUS["unittest_py311"]["text"]
    assert syn.synthesize([good, good]) == "unittest" and not syn.rejected


def test_synthesizer_picks_the_right_parser_for_every_real_log():
    for name, case in CORPUS.items():
        got = m.RuleBasedParserSynthesizer().synthesize([case["text"], case["text"]])
        want = {"pytest_junitxml": "junit_xml", "node_junit": "junit_xml"}.get(name, case["parser"])
        assert got == want, name


def test_parse_pytest():
    log = ("tests/test_a.py::test_x PASSED                                   [ 33%]\n"
           "=========================== short test summary info ============================\n"
           "PASSED tests/test_a.py::test_x\nFAILED tests/test_a.py::test_y - AssertionError: 1 != 2\n"
           "ERROR tests/test_b.py::test_z - RuntimeError\nXFAIL tests/test_a.py::test_xf - reason\n"
           "XPASS tests/test_a.py::test_xp\nSKIPPED [1] tests/test_c.py:3: no\nERROR tests/test_d.py\n"
           "\x1b[32mPASSED\x1b[0m tests/test_a.py::test_p[1-2]\n")
    assert m.parse_pytest(log) == {
        "tests/test_a.py::test_x": P, "tests/test_a.py::test_y": F, "tests/test_b.py::test_z": E,
        "tests/test_a.py::test_xf": P, "tests/test_a.py::test_xp": F, "tests/test_a.py::test_p[1-2]": P}


def test_parse_unittest():
    log = ("test_a (pkg.test_m.TestM.test_a) ... ok\n"
           "test_b (pkg.test_m.TestM.test_b) ... FAIL\n"
           "test_c (pkg.test_m.TestM.test_c) ... ERROR\n"
           "test_d (pkg.test_m.TestM.test_d) ... skipped 'later'\n"
           "test_e (pkg.test_m.TestM.test_e) ... expected failure\n"
           "test_f (pkg.test_m.TestM.test_f) ... unexpected success\n"
           "test_g (pkg.test_m.TestM.test_g) ... /x.py:1: ResourceWarning: unclosed\n  noise\nok\n"
           "test_mod (unittest.loader._FailedTest.test_mod) ... ERROR\n")
    assert m.parse_unittest(log) == {
        "pkg.test_m.TestM.test_a": P, "pkg.test_m.TestM.test_b": F, "pkg.test_m.TestM.test_c": E,
        "pkg.test_m.TestM.test_d": S, "pkg.test_m.TestM.test_e": P, "pkg.test_m.TestM.test_f": F,
        "pkg.test_m.TestM.test_g": P, "unittest.loader._FailedTest.test_mod": E}


def test_parse_tap_nested_and_directives():
    log = ("TAP version 13\n# Subtest: suite\n    # Subtest: inner\n    ok 1 - inner\n      ---\n"
           "      duration_ms: 0.3\n      ...\n    not ok 2 - other (3 ms)\n    1..2\nnot ok 1 - suite\n"
           "  ---\n  error: 'x'\n  ...\n# Subtest: plain\nok 2 - plain\nok 3 - later # SKIP not now\n"
           "ok 4 - wip # TODO\nok 5 test without dash\n1..5\n# tests 5\n")
    assert m.parse_tap(log) == {"suite > inner": P, "suite > other": F, "suite": F, "plain": P,
                                "later": S, "wip": S, "test without dash": P}


def test_parse_cargo():
    log = ("running 3 tests\ntest tests::ok_one ... ok\ntest tests::bad ... FAILED\n"
           "test tests::slow ... ignored\ntest tests::later ... ignored, needs network\n"
           "test src/lib.rs - add (line 3) ... ok\ntest rejects_negative - should panic ... ok\n"
           "test result: FAILED. 2 passed; 1 failed\n")
    assert m.parse_cargo(log) == {"tests::ok_one": P, "tests::bad": F, "tests::slow": S,
                                  "tests::later": S, "src/lib.rs - add (line 3)": P, "rejects_negative": P}


def test_parse_junit_xml():
    log = ('noise before\n<testsuite name="all" tests="4">\n<testcase classname="p.ATest" name="testA"/>\n'
           '<testcase classname="p.ATest" name="testB"><failure message="x"/></testcase>\n'
           '<testcase classname="p.ATest" name="testC"><error message="y"/></testcase>\n'
           '<testcase classname="p.ATest" name="testD"><skipped/></testcase>\n</testsuite>\nafter\n')
    assert m.parse_junit_xml(log) == {"p.ATest.testA": P, "p.ATest.testB": F, "p.ATest.testC": E,
                                      "p.ATest.testD": S}


def test_parse_gotest():
    log = ("=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n    --- FAIL: TestB/sub (0.01s)\n"
           "--- FAIL: TestB (0.01s)\n--- SKIP: TestC (0.00s)\nFAIL\n")
    assert m.parse_gotest(log) == {"TestA": P, "TestB/sub": F, "TestB": F, "TestC": S}


@pytest.mark.parametrize("raw,clean", [
    ("test_x (0.01s)", "test_x"), ("name [3 ms]", "name"), ("\x1b[31mred\x1b[0m", "red"),
    ("- dashed", "dashed"), ("t [100%]", "t"), ("keep (line 3)", "keep (line 3)")])
def test_normalize_test_name(raw, clean):
    assert m.normalize_test_name(raw) == clean


def test_parser_synthesizer_picks_working_template():
    syn = m.RuleBasedParserSynthesizer()
    log = "test a::b ... ok\ntest a::c ... FAILED\n"
    assert syn.synthesize([log, log]) == "cargo" and len(syn.attempts) <= 5
    assert syn.synthesize(["nothing here"]) is None


# ------------------------------------------------------------------ 3. patches
DIFF = """diff --git a/src/pkg/clamp.py b/src/pkg/clamp.py
index 1..2 100644
--- a/src/pkg/clamp.py
+++ b/src/pkg/clamp.py
@@ -1 +1 @@
-x
+y
diff --git a/tests/test_clamp.py b/tests/test_clamp.py
index 1..2 100644
--- a/tests/test_clamp.py
+++ b/tests/test_clamp.py
@@ -1 +1 @@
-a
+b
diff --git a/README.md b/README.md
index 1..2 100644
--- a/README.md
+++ b/README.md
@@ -1 +1 @@
-r
+s
"""


def test_split_patch_routes_every_file_once():
    sol, tst = m.split_patch(DIFF, "python")
    assert m.patch_files(sol) == ["src/pkg/clamp.py", "README.md"]
    assert m.patch_files(tst) == ["tests/test_clamp.py"]
    assert sorted(m.patch_files(sol) + m.patch_files(tst)) == sorted(m.patch_files(DIFF))
    assert len(sol) + len(tst) == len(DIFF)


@pytest.mark.parametrize("path,lang,expected", [
    ("tests/test_a.py", "python", True), ("pkg/test_a.py", "python", True), ("checks/test_x.py", "python", True),
    ("pkg/a.py", "python", False), ("conftest.py", "python", True),
    ("test/units.test.js", "javascript", True), ("spec/a.spec.js", "javascript", True), ("lib/a.js", "javascript", False),
    ("tests/clamp.rs", "rust", True), ("crates/x/tests/a.rs", "rust", True), ("src/lib.rs", "rust", False),
    ("src/test/java/p/ATest.java", "java", True), ("lib/src/main/java/p/A.java", "java", False),
    ("x/a_test.go", "go", True), ("x/a.go", "go", False)])
def test_is_test_path(path, lang, expected):
    assert m.is_test_path(path, lang) is expected


# ------------------------------------------------------------------ 4. pass@k
def test_pass_at_k_closed_form():
    assert m.pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    assert m.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert m.pass_at_k(3, 1, 3) == 1.0 and m.pass_at_k(4, 2, 3) == 1.0      # n - c < k
    assert m.pass_at_k(3, 0, 3) == 0.0
    for n in range(1, 8):
        for c in range(n + 1):
            assert m.pass_at_k(n, c, 1) == pytest.approx(c / n)


# ------------------------------------------------------------------ 5. ensembles
def test_ensemble_recall_bounds():
    rng = np.random.default_rng(1)
    for _ in range(50):
        truth = rng.random(60) < 0.3
        scores = np.clip(rng.integers(0, 4, size=(3, 60)) + truth, 0, 3)
        rec = [m.binary_metrics(s >= 2, truth)["recall"] for s in scores]
        r_and = m.binary_metrics(m.ensemble_decision(scores, "consensus_drop"), truth)["recall"]
        r_or = m.binary_metrics(m.ensemble_decision(scores, "consensus_keep"), truth)["recall"]
        assert r_and <= min(rec) + 1e-12 and r_or >= max(rec) - 1e-12


def test_ensemble_rules_on_hand_example():
    s = np.array([[3, 0, 2, 1], [2, 0, 1, 3], [2, 3, 0, 3]])
    assert m.ensemble_decision(s, "consensus_drop").tolist() == [True, False, False, False]
    assert m.ensemble_decision(s, "consensus_keep").tolist() == [True, True, True, True]
    assert m.ensemble_decision(s, "majority").tolist() == [True, False, False, True]
    assert m.ensemble_decision(s, "mean").tolist() == [True, False, False, True]


def test_binary_metrics():
    out = m.binary_metrics(np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0]))
    assert out["precision"] == 0.5 and out["recall"] == 0.5 and out["f1"] == 0.5 and out["fpr"] == 0.5


def test_judges_and_leakage():
    clear = "`clamp(15, 0, 10)` returns `9`. Expected: `10`. Actual: `9`.\n\n```\nclamp(15, 0, 10)\n```"
    vague = "Sometimes the results of clamp look off. Not sure why."
    for v in m.JUDGE_VARIANTS:
        j = m.RuleBasedClarityJudge(v)
        assert j.score(type("T", (), {"problem_statement": clear})()).score <= 1
        assert "stand-in" in j.name
    assert m.RuleBasedClarityJudge("red_flags").score(vague).score >= 2
    patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+    return hi_value - 1\n"
    assert m.leakage("nothing to see", patch) == "none"
    assert m.leakage("uses hi_value now", patch) == "some"
    assert m.leakage("change: return hi_value - 1", patch) == "explicit"
    w = m.RuleBasedStatementWriter().write("Fixes `clamp` in `src/a.py`.\n```\nx = 1\n```\nreturn x;")
    assert "clamp" not in w and "src/a.py" not in w and "return" not in w


# ------------------------------------------------------------------ 6. sandbox
def _running(token: str) -> list[int]:
    """Host pids of live processes whose command line holds ``token`` (namespaces hide pids)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token in cmdline and state not in ("Z", "X") and int(entry) != os.getpid():
            out.append(int(entry))
    return out


def _gone(token: str, wait_s: float = 3.0) -> bool:
    deadline = time.monotonic() + wait_s
    while _running(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(token)


@pytest.fixture
def sandbox():
    sb = m.Sandbox(m.SandboxConfig(timeout_s=20))
    yield sb
    sb.cleanup()


def test_sandbox_timeout_kills_group():
    sb = m.Sandbox(m.SandboxConfig(timeout_s=1.5))
    try:
        res = sb.run("sleep 101.25 & wait", sb.root)
        assert res.timed_out and res.returncode == -9 and res.duration_s < 10
        assert _gone("sleep 101.25")
        res = sb.run(["sleep", "101.5"], sb.root, timeout=1)
        assert res.timed_out and _gone("sleep 101.5")
    finally:
        sb.cleanup()


def test_sandbox_setsid_child_that_ignores_term_dies_with_the_run(sandbox):
    """Issue 29.4: a daemonised (setsid) child ignoring SIGTERM must not outlive the run."""
    if sandbox.mode == "pgroup":
        pytest.skip("no PID namespace here (neither bubblewrap nor unshare works): " + sandbox.describe())
    res = sandbox.run("setsid bash -c \"trap '' TERM; sleep 102.5\" >/dev/null 2>&1 & echo started", sandbox.root)
    assert res.stdout.strip() == "started" and not res.timed_out
    assert _gone("sleep 102.5")


def test_sandbox_background_child_holding_stdout_does_not_stall_the_run(sandbox):
    """Issue 29.8: ``(sleep) & echo`` ends when the command exits (short grace), not at the timeout."""
    res = sandbox.run("(sleep 103.5) & echo started", sandbox.root)
    assert res.stdout.strip() == "started" and res.returncode == 0
    assert not res.timed_out and res.duration_s < 5
    assert _gone("sleep 103.5")
    res = sandbox.run("sleep 104.5 >/dev/null 2>&1 & echo $!", sandbox.root)
    assert not res.timed_out and res.returncode == 0 and _gone("sleep 104.5")


def test_sandbox_environment_and_output_cap(sandbox):
    sb = m.Sandbox(m.SandboxConfig(timeout_s=20, max_output_bytes=2048))
    try:
        os.environ["SWE_REBENCH_SECRET"] = "leak"
        res = sb.run("echo ${SWE_REBENCH_SECRET:-none} $HOME $NO_COLOR", sb.root)
        assert res.stdout.split() == ["none", str(sb.home), "1"]
        big = sb.run("head -c 100000 /dev/zero | tr '\\0' x; echo END", sb.root)
        assert big.truncated and len(big.stdout) < 4096 and big.output_bytes == 100004
        assert big.stdout.startswith("x" * 1000) and big.stdout.endswith("xEND\n")
    finally:
        os.environ.pop("SWE_REBENCH_SECRET", None)
        sb.cleanup()


BIG_OUTPUT_PROBE = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
import icml26.swe_rebench.sandbox as s
sb = s.Sandbox(s.SandboxConfig(timeout_s=120, max_output_bytes=1024))
sb.run("true", sb.root)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
res = sb.run("head -c 300000000 /dev/zero", sb.root)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
sb.cleanup()
print(json.dumps({"grew_kib": after - before, "bytes": res.output_bytes, "kept": len(res.stdout),
                  "truncated": res.truncated, "timed_out": res.timed_out}))
"""


def test_sandbox_output_is_read_incrementally_with_bounded_memory():
    """Issue 29.5: 300 MB of stdout with a 1 KiB cap must not grow the parent's peak RSS."""
    lib = str(Path(m.__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-c", BIG_OUTPUT_PROBE, lib], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["bytes"] == 300_000_000 and out["truncated"] and out["kept"] < 2048 and not out["timed_out"]
    assert out["grew_kib"] < 32 * 1024, out          # buffering it all would add ~290 000 KiB


def test_sandbox_caps_total_disk_written():
    """Issue 29.6: many files each under RLIMIT_FSIZE may not add up past ``max_disk_bytes``."""
    sb = m.Sandbox(m.SandboxConfig(timeout_s=60, max_disk_bytes=40 << 20))
    try:
        w = sb.mkdtemp("disk")
        res = sb.run("for i in $(seq 1 40); do head -c 8000000 /dev/zero > f$i || exit 3; done; echo wrote-all",
                     w)
        assert res.disk_exceeded and res.returncode == -9 and "wrote-all" not in res.stdout
        used = sum(f.stat().st_size for f in w.iterdir())
        assert 40 << 20 < used < 320_000_000          # stopped long before the 320 MB it tried
        res = sb.run("head -c 100000000 /dev/zero > one; echo rc=$?", sb.mkdtemp("disk"))
        assert res.stdout.strip().endswith("rc=153") or res.disk_exceeded  # one file: RLIMIT_FSIZE
        ok = sb.run("head -c 1000000 /dev/zero > small && echo fine", sb.mkdtemp("disk"))
        assert ok.stdout.strip() == "fine" and not ok.disk_exceeded
    finally:
        sb.cleanup()


def test_sandbox_filesystem_view(sandbox, tmp_path):
    """Issue 29.7: outside the work dir nothing of the host can be read or written."""
    if sandbox.mode != "bwrap":
        pytest.skip("filesystem isolation needs bubblewrap: " + sandbox.describe())
    project_readme = Path(m.__file__).resolve().parents[3] / "README.md"
    assert project_readme.is_file()
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    w = sandbox.mkdtemp("fs")
    # reads outside: the project checkout and a host temp file are absent
    for target in (project_readme, secret):
        res = sandbox.run(["cat", str(target)], w)
        assert res.returncode != 0 and "host secret" not in res.stdout and "No such file" in res.stdout
    # writes outside: the project, the sandbox root beside the work dir, the host's /etc all fail
    for target in (project_readme.parent / "swe-sandbox-write.txt", Path("/etc/swe-sandbox-write.txt"),
                   tmp_path / "written.txt"):
        res = sandbox.run(f"echo x > {target}", w)
        assert not target.exists(), (target, res.stdout)                # never reaches the host
        if not target.resolve().is_relative_to("/tmp"):
            # under /tmp (a checkout in /tmp, say) the write may land in the sandbox's private tmpfs,
            # where bwrap creates the parents of read-only binds such as the project's .venv
            assert res.returncode != 0, (target, res.stdout)
    sandbox.run(f"echo x > {sandbox.root / 'beside.txt'}", w)      # lands in the private /tmp at most
    assert not (sandbox.root / "beside.txt").exists()
    # inside: the work dir, HOME and TMPDIR are writable and the toolchains run
    res = sandbox.run("echo ok > here.txt && touch $HOME/h $TMPDIR/t && python -c 'print(2+2)'", w)
    assert res.returncode == 0 and res.stdout.strip() == "4" and (w / "here.txt").read_text() == "ok\n"


def test_sandbox_network_namespace_blocks_connect(sandbox):
    if sandbox.isolation is None:
        pytest.skip("no network namespace on this machine: " + sandbox.describe())
    # inside an empty network namespace the connect fails locally (ENETUNREACH): no packet leaves
    code = ("import socket,sys\ns=socket.socket()\ns.settimeout(2)\n"
            "try:\n    s.connect(('192.0.2.1', 80))\n    print('CONNECTED')\n"
            "except OSError as e:\n    print('ERRNO', e.errno)\n")
    res = sandbox.run(["python", "-c", code], sandbox.root)
    assert res.stdout.strip() == f"ERRNO {errno.ENETUNREACH}"


def test_sandbox_modes_are_reported():
    modes = m.sandbox.isolation_modes()
    assert modes["pgroup"] and set(modes) == set(m.sandbox.MODES)
    for mode in (x for x in m.sandbox.MODES if modes[x]):
        sb = m.Sandbox(m.SandboxConfig(timeout_s=10, isolation=mode))
        try:
            assert sb.mode == mode and mode in sb.describe()
            res = sb.run("echo $((6*7))", sb.root)
            assert res.stdout.strip() == "42" and res.mode == mode
        finally:
            sb.cleanup()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0, "5", True])
def test_sandbox_rejects_bad_timeouts(sandbox, bad):
    """Issue 29.9: NaN, inf, <= 0 and non-numbers are refused naming the argument."""
    exc = TypeError if isinstance(bad, (str, bool)) else ValueError
    with pytest.raises(exc, match="timeout_s"):
        m.SandboxConfig(timeout_s=bad)
    with pytest.raises(exc, match="timeout"):
        sandbox.run("true", sandbox.root, timeout=bad)


KILLED_KERNEL = """
import sys, os, signal
sys.path.insert(0, sys.argv[1])
import icml26.swe_rebench.sandbox as s
sb = s.Sandbox(s.SandboxConfig(timeout_s=5))
print(sb.root, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sandbox_tempdirs_are_removed_and_swept():
    """Issue 12: a finaliser removes the root; a SIGKILLed kernel's root is swept at the next start."""
    sb = m.Sandbox()
    root = sb.root
    del sb
    import gc
    gc.collect()
    assert not root.exists()
    lib = str(Path(m.__file__).resolve().parents[2])
    proc = subprocess.run([sys.executable, "-c", KILLED_KERNEL, lib], capture_output=True, text=True, timeout=60)
    left = Path(proc.stdout.strip())
    assert proc.returncode == -9 and left.is_dir()          # the killed process could not clean up
    removed = m.sandbox.sweep_stale_tempdirs()
    assert left in removed and not left.exists()
    mine = m.Sandbox()
    try:
        assert mine.root not in m.sandbox.sweep_stale_tempdirs()  # a live owner's dir is kept
        assert mine.root.exists()
    finally:
        mine.cleanup()


# ------------------------------------------------------------------ 7. corpus, pipeline
def _small_corpus(root: Path, seed: int = 3) -> m.Corpus:
    langs = tuple(la for la in ("python", "javascript", "rust", "java") if m.detect_toolchains()[la].available)
    cfg = m.CorpusConfig(languages=langs, repos_per_language={la: 1 for la in langs}, prs_per_repo=(3, 3),
                         seed=seed, filtered_repos=0)
    return m.generate_corpus(root, cfg)


def test_corpus_is_reproducible(tmp_path):
    a, b = _small_corpus(tmp_path / "a"), _small_corpus(tmp_path / "b")
    for ra, rb in zip(a.repos, b.repos, strict=True):
        ha = subprocess.run(["git", "rev-list", "--all"], cwd=ra.path, capture_output=True, text=True).stdout
        hb = subprocess.run(["git", "rev-list", "--all"], cwd=rb.path, capture_output=True, text=True).stdout
        assert ha == hb and ha.count("\n") == 7      # initial commit + 3 x (PR commit, merge)
    assert (tmp_path / "a" / "tracker.json").read_text() == (tmp_path / "b" / "tracker.json").read_text()
    prs = m.merged_prs(a.repos[0].path)
    assert [p.pr_number for p in prs] == sorted(p.pr_number for p in prs) and len(prs) == 3


def test_mini_pipeline_python(tmp_path):
    cfg = m.scale_config("smoke")
    cfg.corpus = m.CorpusConfig(languages=("python",), repos_per_language={"python": 1}, prs_per_repo=(3, 3),
                                seed=5, filtered_repos=0, quirk_rate=1.0,
                                families={"fix_clear": 1, "feature_unnamed": 1, "flaky": 0.5})
    res = m.run_pipeline(tmp_path / "run", cfg, progress=False)
    assert res.funnel.monotone()
    setup = m.setup_table(res)
    assert setup["interactive"].all() and not setup["one_shot"].any()   # every repo is quirky here
    fam = {t.instance_id: res.corpus.truth[(t.repo, int(t.instance_id.rsplit("-", 1)[1]))].family for t in res.tasks}
    assert m.Family.FLAKY not in fam.values() and res.tasks
    for t in res.tasks:
        assert t.FAIL_TO_PASS and not set(t.FAIL_TO_PASS) & set(t.PASS_TO_PASS)
    t = res.tasks[0]
    assert m.evaluate_patch(t, t.patch, res.sandbox).resolved
    assert not m.evaluate_patch(t, "", res.sandbox).resolved
    with pytest.raises(ValueError, match="offending paths"):
        m.evaluate_patch(t, t.test_patch, res.sandbox)
    res.sandbox.cleanup()


# ------------------------------------------------------------------ 9. bad inputs
def test_bad_configs():
    with pytest.raises(ValueError, match="timeout_s"):
        m.SandboxConfig(timeout_s=0)
    with pytest.raises(ValueError, match="max_output_bytes"):
        m.SandboxConfig(max_output_bytes=100)
    corpus = m.CorpusConfig()
    with pytest.raises(ValueError, match="n_runs"):
        m.PipelineConfig(corpus, n_runs=0)
    with pytest.raises(ValueError, match="workers"):
        m.PipelineConfig(corpus, workers=0)
    with pytest.raises(ValueError, match="ensemble_rule"):
        m.PipelineConfig(corpus, ensemble_rule="vote")
    with pytest.raises(ValueError, match="judges"):
        m.PipelineConfig(corpus, judges=("oracle",))
    with pytest.raises(ValueError, match="language"):
        m.CorpusConfig(languages=("cobol",))
    with pytest.raises(ValueError, match="unknown family"):
        m.CorpusConfig(families={"bogus": 1.0})
    with pytest.raises(ValueError, match="test_cmd"):
        m.InstallConfig([], [], "pytest")
    with pytest.raises(ValueError, match="parser name"):
        m.InstallConfig([], ["make test"], "rspec")
    with pytest.raises(ValueError, match="variant"):
        m.RuleBasedClarityJudge("vibes")
    with pytest.raises(ValueError, match="language"):
        m.is_test_path("a.py", "cobol")


def test_bad_numeric_inputs():
    for args in ((3, 1, 0), (0, 0, 1), (3, -1, 1), (3, 4, 1), (3, 1, 4)):
        with pytest.raises(ValueError):
            m.pass_at_k(*args)
    with pytest.raises(ValueError, match="rule"):
        m.ensemble_decision(np.zeros((3, 2)), "vote")
    with pytest.raises(ValueError, match="0..3"):
        m.ensemble_decision(np.full((3, 2), 4), "mean")
    with pytest.raises(ValueError, match="2-D"):
        m.ensemble_decision(np.zeros(3), "mean")
    with pytest.raises(ValueError, match="same length"):
        m.binary_metrics(np.array([1, 0]), np.array([1]))
    with pytest.raises(ValueError, match="binary"):
        m.binary_metrics(np.array([2, 0]), np.array([1, 0]))
    with pytest.raises(ValueError, match="statuses"):
        m.classify_transitions(None, {"a": "MAYBE"}, {})


def test_bad_patches_and_states(tmp_path):
    with pytest.raises(ValueError, match="non-empty"):
        check_patch("", "test_patch")
    with pytest.raises(ValueError, match="malformed"):
        m.split_patch("--- a/x\n+++ b/x\n", "python")
    sb = m.Sandbox(m.SandboxConfig(timeout_s=10))
    try:
        with pytest.raises(ValueError, match="non-empty"):
            m.apply_patch(sb.root, "", sb)
        with pytest.raises(ValueError, match="state"):
            m.run_state(None, m.InstallConfig([], ["true"], "tap"), sb, "after")
        with pytest.raises(ValueError, match="n_runs"):
            m.validate_task(None, m.InstallConfig([], ["true"], "tap"), sb, n_runs=0)
        with pytest.raises(ValueError, match="max_steps"):
            m.run_setup(m.OneShotSetupAgent("python"), sb.root, sb, max_steps=0)
    finally:
        sb.cleanup()


def test_bad_sandbox_calls():
    sb = m.Sandbox(m.SandboxConfig(timeout_s=10))
    try:
        with pytest.raises(TypeError, match="cmd"):
            sb.run(42, sb.root)
        with pytest.raises(TypeError, match="cmd"):
            sb.run(["echo", 1], sb.root)
        with pytest.raises(ValueError, match="inside the sandbox"):
            sb.run("true", sb.root / ".." / "..")
        with pytest.raises(ValueError, match="inside the sandbox"):
            sb.run("true", "/tmp")
    finally:
        sb.cleanup()


def test_bad_corpus_calls(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("occupied")
    cfg = m.CorpusConfig(languages=("python",), repos_per_language={"python": 1}, prs_per_repo=(1, 1),
                         filtered_repos=0)
    with pytest.raises(ValueError, match="overwrite=True"):
        m.generate_corpus(tmp_path / "x", cfg)
    m.generate_corpus(tmp_path / "x", cfg, overwrite=True)
    if shutil.which("go") is None:
        go = m.CorpusConfig(languages=("python", "go"), repos_per_language={"python": 1, "go": 1},
                            prs_per_repo=(1, 1), filtered_repos=0)
        with pytest.raises(ValueError, match="skip_missing"):
            m.generate_corpus(tmp_path / "g", go)
        c = m.generate_corpus(tmp_path / "g2", go, skip_missing=True)
        assert "go" in c.skipped and re.search("not found", c.skipped["go"])


def test_llm_setup_agent_adapter_and_prompts(tmp_path):
    answers = iter(['{"command": "ls"}', 'ok: {"install": [], "test_cmd": ["python -m unittest -v"], '
                    '"log_parser": "unittest"}'])
    agent = m.LLMSetupAgent(lambda prompt: next(answers), "python")
    first = agent.act("a.py\n", [])
    assert first.kind == "run" and first.command == "ls"
    second = agent.act("a.py\n", [first])
    assert second.kind == "submit" and second.config.log_parser == "unittest"
    with pytest.raises(TypeError, match="callable"):
        m.LLMSetupAgent("not callable", "python")
    task = type("T", (), {"repo": "r", "problem_statement": "x", "patch": "p", "test_patch": "t"})()
    assert "Reference fix" in m.render_prompt("verified_e", task)
    with pytest.raises(ValueError, match="template"):
        m.render_prompt("nope", task)


def test_flaky_schedule_aliasing():
    from icml26.swe_rebench.experiments import flaky_schedule
    two, three = flaky_schedule(2), flaky_schedule(3)
    assert all(r == two[0] for r in two)          # period 2 looks stable over 3 runs
    assert not all(r == three[0] for r in three)  # period 3 does not
    with pytest.raises(ValueError, match="period"):
        flaky_schedule(1)


def test_setup_agents_on_quirky_repo(tmp_path):
    cfg = m.CorpusConfig(languages=("javascript",), repos_per_language={"javascript": 1}, prs_per_repo=(1, 1),
                         seed=1, filtered_repos=0, quirk_rate=1.0, families={"fix_clear": 1})
    corpus = m.generate_corpus(tmp_path / "c", cfg)
    repo = corpus.repos[0]
    sb = m.Sandbox(m.SandboxConfig(timeout_s=120))
    try:
        one = m.run_setup(m.OneShotSetupAgent("javascript"), sb.checkout(repo.path, "main"), sb)
        inter = m.run_setup(m.RuleBasedSetupAgent("javascript"), sb.checkout(repo.path, "main"), sb)
        assert not one.success and inter.success and inter.steps > 1
        assert inter.config.log_parser == "tap"
    finally:
        sb.cleanup()


def test_baselines_module():
    from icml26.swe_rebench import baselines
    test, fix = {"a": F, "b": P}, {"a": P, "b": P, "c": P}
    assert baselines.two_state_transitions(test, fix) == m.classify_transitions(None, test, fix)
    d = baselines.single_judge_decisions(np.array([[0, 2, 3], [1, 1, 3]]))
    assert d.tolist() == [[False, True, True], [False, False, True]]
    with pytest.raises(ValueError, match="2-D"):
        baselines.single_judge_decisions(np.zeros(3))


def test_presets_dry_run_cuts_loops_and_keeps_sizes():
    """``ICML26_DRY=1`` with SCALE=gpu uses ``dry_run()`` (this chapter has no GPU kernel)."""
    for name, p in m.PRESETS.items():
        d = p.dry_run()
        assert type(d) is type(p) and d.languages == p.languages and d.workers == p.workers, name
        assert d.timeout_s == p.timeout_s and d.attempts == p.attempts
        assert all(n == 1 for _, n in d.repos) and d.prs == (3, 3) and 2 <= d.n_runs <= p.n_runs
        assert set(d.rerun_languages) <= set(p.rerun_languages)
