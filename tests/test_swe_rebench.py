"""Tests of icml26.swe_rebench: the unit identities of spec section 8 and the bad inputs of section 9."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
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
    assert out == {"F2P": ["a", "new"], "P2P": ["b"], "P2F": ["c"], "F2F": ["d"], "OTHER": ["e"]}


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
def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_sandbox_timeout_kills_group():
    sb = m.Sandbox(m.SandboxConfig(timeout_s=1.5))
    try:
        res = sb.run("sleep 100 & echo $!; wait", sb.root)
        assert res.timed_out and res.duration_s < 10
        pid = int(res.stdout.split()[0])
        assert not _alive(pid)
        res = sb.run(["sleep", "100"], sb.root, timeout=1)
        assert res.timed_out
    finally:
        sb.cleanup()


def test_sandbox_leaves_no_background_child():
    sb = m.Sandbox(m.SandboxConfig(timeout_s=20))
    try:
        res = sb.run("sleep 100 >/dev/null 2>&1 & echo $!", sb.root)
        assert not res.timed_out and res.returncode == 0
        assert not _alive(int(res.stdout.split()[0]))
    finally:
        sb.cleanup()


def test_sandbox_environment_and_output_cap():
    sb = m.Sandbox(m.SandboxConfig(timeout_s=20, max_output_bytes=2048))
    try:
        os.environ["SWE_REBENCH_SECRET"] = "leak"
        res = sb.run("echo ${SWE_REBENCH_SECRET:-none} $HOME $NO_COLOR", sb.root)
        assert res.stdout.split() == ["none", str(sb.home), "1"]
        big = sb.run("head -c 100000 /dev/zero | tr '\\0' x", sb.root)
        assert big.truncated and len(big.stdout) < 4096
    finally:
        os.environ.pop("SWE_REBENCH_SECRET", None)
        sb.cleanup()


def test_sandbox_network_namespace_blocks_connect():
    sb = m.Sandbox(m.SandboxConfig(timeout_s=20, network=False))
    try:
        if sb.isolation is None:
            pytest.skip("unshare (network namespaces) is unavailable on this machine")
        # inside an empty network namespace the connect fails locally (ENETUNREACH): no packet leaves
        code = ("import socket,sys\ns=socket.socket()\ns.settimeout(2)\n"
                "try:\n    s.connect(('192.0.2.1', 80))\n    print('CONNECTED')\n"
                "except OSError as e:\n    print('ERRNO', e.errno)\n")
        res = sb.run(["python", "-c", code], sb.root)
        assert res.stdout.strip() == f"ERRNO {errno.ENETUNREACH}"
    finally:
        sb.cleanup()


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
        m.InstallConfig([], ["make test"], "mocha")
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
