"""Generate the real test-log corpus of the swe-rebench chapter (``data/swe-rebench/logs/``).

Every log here is the combined stdout and stderr of a real test runner run on this machine on a
small project that this script writes: pytest, unittest (Python 3.11 and the pre-3.11 format of
Python 3.10), ``node --test`` with its tap, spec and junit reporters, ``cargo test`` (plain and
with ``--color=always``), Jest, Vitest and Mocha (installed with ``npm install`` into a temporary
directory) and Maven Surefire (``mvn -o``, offline, from the local ``~/.m2`` repository).

The test projects are designed here, so the status of every test is known in advance: that is
``expected`` in ``manifest.json`` (per log: framework, parser, the exact command, the tool
version, the expected ``{test: status}`` of every test the log names). The unit tests check that
each parser finds exactly these tests with these statuses, and that the count agrees with the
runner's own summary line.

    python data/swe-rebench/make_logs.py            # rewrites logs/ and logs/manifest.json
    python data/swe-rebench/make_logs.py --only pytest_rA,cargo_color

Absolute paths of the temporary project are replaced by ``/tmp/project`` and durations are left as
printed (the parsers strip them). A runner that is missing is reported and its logs are kept.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOGS = HERE / "logs"
PY311 = sys.executable
PY310 = os.path.expanduser("~/.pyenv/versions/3.10.13/bin/python3.10")
P, F, S, E = "PASSED", "FAILED", "SKIPPED", "ERROR"

# ---------------------------------------------------------------------------------- pytest
PYTEST_SRC = {
    "tests/test_ids.py": '''\
import pytest


@pytest.mark.parametrize("s", ["a b", "with - dash", "plain"])
def test_param(s):
    assert s != "plain"


@pytest.mark.parametrize("x", [1, 2], ids=["one two", "three"])
def test_ids(x):
    assert x > 0


def test_ok():
    pass


def test_fail():
    assert 1 == 2


@pytest.mark.skip(reason="not now")
def test_skip():
    pass


@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="was a bug")
def test_xpass():
    pass


@pytest.fixture
def broken():
    raise RuntimeError("fixture boom")


def test_error(broken):
    pass


class TestKlass:
    def test_method(self):
        pass
''',
}
_PT = "tests/test_ids.py::"
PYTEST_EXPECTED = {
    _PT + "test_param[a b]": P, _PT + "test_param[with - dash]": P, _PT + "test_param[plain]": F,
    _PT + "test_ids[one two]": P, _PT + "test_ids[three]": P, _PT + "test_ok": P,
    _PT + "test_fail": F, _PT + "test_xfail": P, _PT + "test_xpass": F, _PT + "test_error": E,
    _PT + "TestKlass::test_method": P,
}
# with -v the progress lines name the skipped test too
PYTEST_EXPECTED_V = {**PYTEST_EXPECTED, _PT + "test_skip": S}
_PJ = "tests.test_ids."
PYTEST_JUNIT_EXPECTED = {
    _PJ + k.split("::", 1)[1].replace("::", "."): v for k, v in PYTEST_EXPECTED_V.items()}
# pytest's junit xml reports an xfail as skipped and an xpass (non-strict) as passed
PYTEST_JUNIT_EXPECTED.update({_PJ + "test_xfail": S, _PJ + "test_xpass": P,
                              "tests.test_ids.TestKlass.test_method": P})

# ---------------------------------------------------------------------------------- unittest
UNITTEST_SRC = {
    "mod.py": "def old_fn():\n    return 0\n",
    "test_mod.py": '''\
import sys
import unittest

import mod


class TestA(unittest.TestCase):
    def test_ok(self):
        pass

    def test_doc(self):
        """A docstring that verbose mode prints."""

    def test_doc_fail(self):
        """Docstring of a failing test."""
        self.fail("deliberate")

    def test_fail(self):
        self.assertEqual(1, 2)

    def test_error(self):
        raise RuntimeError("boom")

    @unittest.skip("later")
    def test_skip(self):
        pass

    @unittest.expectedFailure
    def test_xfail(self):
        self.fail("known")

    @unittest.expectedFailure
    def test_xpass(self):
        pass

    def test_sub_fail(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertNotEqual(i, 1)

    def test_sub_ok(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertGreaterEqual(i, 0)

    def test_noisy(self):
        sys.stderr.write("a warning printed by the test\\n")


class TestB(unittest.TestCase):
    def test_ok(self):
        pass

    def test_fail_late(self):
        self.assertTrue(False)
''',
}
_UA, _UB = "test_mod.TestA.", "test_mod.TestB."
UNITTEST_EXPECTED = {
    _UA + "test_ok": P, _UA + "test_doc": P, _UA + "test_doc_fail": F, _UA + "test_fail": F,
    _UA + "test_error": E, _UA + "test_skip": S, _UA + "test_xfail": P, _UA + "test_xpass": F,
    _UA + "test_sub_fail": F, _UA + "test_sub_ok": P, _UA + "test_noisy": P,
    _UB + "test_ok": P, _UB + "test_fail_late": F,
}
SKIPGUARD_TEST = '''\
import unittest

import mod


class TestNew(unittest.TestCase):
    def test_old(self):
        self.assertEqual(mod.old_fn(), 0)

    @unittest.skipUnless(hasattr(mod, "new_fn"), "mod.new_fn does not exist yet")
    def test_new_fn(self):
        self.assertEqual(mod.new_fn(), 1)
'''
SKIPGUARD_BEFORE = {"test_skipguard.TestNew.test_old": P, "test_skipguard.TestNew.test_new_fn": S}
SKIPGUARD_AFTER = {"test_skipguard.TestNew.test_old": P, "test_skipguard.TestNew.test_new_fn": P}

# ---------------------------------------------------------------------------------- node --test
NODE_SRC = {
    "test/a.test.js": '''\
const { describe, it, test } = require('node:test');
const assert = require('node:assert');

describe('suite', () => {
  describe('inner', () => {
    it('deep ok', () => {});
  });
  it('fails', () => { assert.strictEqual(1, 2); });
  it('skipped', { skip: 'not now' }, () => {});
});
test('plain', () => {});
test('todo one', { todo: true }, () => {});
test('with space - and dash', () => {});
test('parent', async (t) => {
  await t.test('child ok', () => {});
  await t.test('child fails', () => { throw new Error('x'); });
});
''',
}
NODE_EXPECTED = {
    "suite": F, "suite > inner": P, "suite > inner > deep ok": P, "suite > fails": F,
    "suite > skipped": S, "plain": P, "todo one": S, "with space - and dash": P,
    "parent": F, "parent > child ok": P, "parent > child fails": F,
}
# the junit reporter has an element per suite and per leaf test; a test with subtests is a suite
NODE_JUNIT_EXPECTED = {k: v for k, v in NODE_EXPECTED.items() if k not in ("suite", "suite > inner", "parent")}

# ---------------------------------------------------------------------------------- cargo
CARGO_SRC = {
    "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
    "src/lib.rs": '''\
/// Adds two numbers.
///
/// ```
/// assert_eq!(demo::add(1, 2), 3);
/// ```
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

/// Always fails as a doc-test.
///
/// ```
/// assert_eq!(demo::add(1, 1), 3);
/// ```
pub fn twice(a: i32) -> i32 {
    a * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_one() {
        assert_eq!(add(1, 1), 2);
    }

    #[test]
    fn bad() {
        assert_eq!(add(1, 1), 3);
    }

    #[test]
    #[ignore]
    fn slow() {}

    #[test]
    #[ignore = "needs network"]
    fn later() {}

    #[test]
    #[should_panic(expected = "boom")]
    fn panics() {
        panic!("boom");
    }
}
''',
    "tests/integration.rs": '''\
#[test]
fn adds_from_outside() {
    assert_eq!(demo::add(2, 2), 4);
}

#[test]
fn twice_from_outside() {
    assert_eq!(demo::twice(2), 5);
}
''',
}
CARGO_EXPECTED = {
    "tests::ok_one": P, "tests::bad": F, "tests::slow": S, "tests::later": S, "tests::panics": P,
    "adds_from_outside": P, "twice_from_outside": F,
    "src/lib.rs - add (line 3)": P, "src/lib.rs - twice (line 12)": F,
}

# ---------------------------------------------------------------------------------- npm runners
# one suite for both runners (jest's globals; vitest imports them): same tests, same expected statuses
JS_MATH_SUITE = '''\
describe('math', () => {
  test('adds', () => { expect(1 + 1).toBe(2); });
  test('fails with - dash', () => { expect(1 + 1).toBe(3); });
  describe('nested', () => {
    it('deep ok', () => {});
    it.skip('skipped one', () => {});
  });
  test.todo('write more tests');
});
test('top level', () => {});
'''
JEST_SRC = {
    "package.json": json.dumps({"name": "jdemo", "version": "1.0.0", "private": True}, indent=2),
    "__tests__/math.test.js": JS_MATH_SUITE,
    "__tests__/other.test.js": "test('other passes', () => { expect([1].length).toBe(1); });\n",
}
JEST_EXPECTED = {
    "math > adds": P, "math > fails with - dash": F, "math > nested > deep ok": P,
    "math > nested > skipped one": S, "math > write more tests": S, "top level": P,
    "other passes": P,
}
VITEST_SRC = {
    "package.json": json.dumps({"name": "vdemo", "version": "1.0.0", "private": True, "type": "module"},
                               indent=2),
    "test/math.test.js": "import { describe, it, test, expect } from 'vitest';\n\n" + JS_MATH_SUITE,
}
VITEST_EXPECTED = {
    "test/math.test.js > math > adds": P, "test/math.test.js > math > fails with - dash": F,
    "test/math.test.js > math > nested > deep ok": P, "test/math.test.js > math > nested > skipped one": S,
    "test/math.test.js > math > write more tests": S, "test/math.test.js > top level": P,
}
MOCHA_SRC = {
    "package.json": json.dumps({"name": "mdemo", "version": "1.0.0", "private": True}, indent=2),
    "test/math.spec.js": '''\
const assert = require('assert');

describe('math', function () {
  it('adds', function () { assert.strictEqual(1 + 1, 2); });
  it('fails with - dash', function () { assert.strictEqual(1 + 1, 3); });
  describe('nested', function () {
    it('deep ok', function () {});
    it.skip('skipped one', function () {});
    it('pending without body');
  });
});
it('top level', function () {});
''',
}
MOCHA_EXPECTED = {
    "math > adds": P, "math > fails with - dash": F, "math > nested > deep ok": P,
    "math > nested > skipped one": S, "math > nested > pending without body": S, "top level": P,
}

# ---------------------------------------------------------------------------------- maven
MAVEN_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId><artifactId>demo</artifactId><version>1.0</version>
  <properties>
    <maven.compiler.source>17</maven.compiler.source><maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency><groupId>org.junit.jupiter</groupId><artifactId>junit-jupiter</artifactId>
      <version>5.10.2</version><scope>test</scope></dependency>
  </dependencies>
  <build><plugins>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.11.0</version></plugin>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId><version>3.2.5</version></plugin>
  </plugins></build>
</project>
"""
MAVEN_SRC = {
    "pom.xml": MAVEN_POM,
    "src/main/java/demo/Calc.java": "package demo;\npublic class Calc {\n"
                                    "  public static int add(int a, int b) { return a + b; }\n}\n",
    "src/test/java/demo/CalcTest.java": '''\
package demo;
import org.junit.jupiter.api.*;
import static org.junit.jupiter.api.Assertions.*;
public class CalcTest {
  @Test void addsOk() { assertEquals(3, Calc.add(1, 2)); }
  @Test void addsBad() { assertEquals(4, Calc.add(1, 2)); }
  @Test void throwsError() { throw new IllegalStateException("boom"); }
  @Test void skippedByAssumption() { Assumptions.assumeTrue(false, "not on this machine"); }
}
''',
    "src/test/java/demo/GoodTest.java": '''\
package demo;
import org.junit.jupiter.api.*;
import static org.junit.jupiter.api.Assertions.*;
public class GoodTest {
  @Test void one() { assertEquals(2, Calc.add(1, 1)); }
  @Test void two() { assertEquals(0, Calc.add(0, 0)); }
}
''',
}
MAVEN_EXPECTED = {
    "demo.CalcTest.addsOk": P, "demo.CalcTest.addsBad": F, "demo.CalcTest.throwsError": E,
    "demo.GoodTest.one": P, "demo.GoodTest.two": P,
}

NPM_VERSIONS = {"jest": "29.7.0", "vitest": "3.2.4", "mocha": "10.8.2"}

# name: (framework, parser, project sources, command, env, expected, tool, version argv)
CASES = {
    "pytest_rA": ("pytest", "pytest", PYTEST_SRC,
                  [PY311, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests"], {},
                  PYTEST_EXPECTED, [PY311, "-m", "pytest", "--version"]),
    "pytest_verbose_color": ("pytest", "pytest", PYTEST_SRC,
                             [PY311, "-m", "pytest", "-rA", "-v", "--color=yes", "-p", "no:cacheprovider",
                              "tests"], {}, PYTEST_EXPECTED_V, [PY311, "-m", "pytest", "--version"]),
    "pytest_junitxml": ("pytest", "junit_xml", PYTEST_SRC,
                        ["bash", "-c", f"{PY311} -m pytest -q -p no:cacheprovider --junitxml=report.xml "
                         "tests >/dev/null; cat report.xml"], {}, PYTEST_JUNIT_EXPECTED,
                        [PY311, "-m", "pytest", "--version"]),
    "unittest_py311": ("unittest", "unittest", UNITTEST_SRC, [PY311, "-m", "unittest", "-v", "test_mod"], {},
                       UNITTEST_EXPECTED, [PY311, "--version"]),
    "unittest_py310": ("unittest", "unittest", UNITTEST_SRC, [PY310, "-m", "unittest", "-v", "test_mod"], {},
                       UNITTEST_EXPECTED, [PY310, "--version"]),
    "unittest_skipguard_before": ("unittest", "unittest", {"mod.py": "def old_fn():\n    return 0\n",
                                                           "test_skipguard.py": SKIPGUARD_TEST},
                                  [PY311, "-m", "unittest", "-v", "test_skipguard"], {}, SKIPGUARD_BEFORE,
                                  [PY311, "--version"]),
    "unittest_skipguard_after": ("unittest", "unittest",
                                 {"mod.py": "def old_fn():\n    return 0\n\n\ndef new_fn():\n    return 1\n",
                                  "test_skipguard.py": SKIPGUARD_TEST},
                                 [PY311, "-m", "unittest", "-v", "test_skipguard"], {}, SKIPGUARD_AFTER,
                                 [PY311, "--version"]),
    "node_tap": ("node --test", "tap", NODE_SRC, ["node", "--test", "--test-reporter=tap", "test/a.test.js"],
                 {}, NODE_EXPECTED, ["node", "--version"]),
    "node_spec": ("node --test", "node_spec", NODE_SRC,
                  ["node", "--test", "--test-reporter=spec", "test/a.test.js"], {"FORCE_COLOR": "0"},
                  NODE_EXPECTED, ["node", "--version"]),
    "node_junit": ("node --test", "junit_xml", NODE_SRC,
                   ["node", "--test", "--test-reporter=junit", "test/a.test.js"], {}, NODE_JUNIT_EXPECTED,
                   ["node", "--version"]),
    "cargo": ("cargo test", "cargo", CARGO_SRC,
              ["cargo", "test", "--offline", "--no-fail-fast", "--", "--test-threads=1"],
              {"CARGO_TERM_COLOR": "never"}, CARGO_EXPECTED, ["cargo", "--version"]),
    "cargo_color": ("cargo test", "cargo", CARGO_SRC,
                    ["cargo", "test", "--offline", "--no-fail-fast", "--color=always", "--",
                     "--test-threads=1", "--color=always"], {"TERM": "xterm-256color"}, CARGO_EXPECTED,
                    ["cargo", "--version"]),
    "jest": ("jest", "jest", JEST_SRC, ["npx", "--no-install", "jest", "--ci", "--verbose"], {},
             JEST_EXPECTED, ["npx", "--no-install", "jest", "--version"]),
    "vitest": ("vitest", "vitest", VITEST_SRC,
               ["npx", "--no-install", "vitest", "run", "--reporter=verbose"], {"NO_COLOR": "1"},
               VITEST_EXPECTED, ["npx", "--no-install", "vitest", "--version"]),
    "mocha": ("mocha", "mocha", MOCHA_SRC, ["npx", "--no-install", "mocha"], {}, MOCHA_EXPECTED,
              ["npx", "--no-install", "mocha", "--version"]),
    "maven_surefire": ("maven surefire", "surefire", MAVEN_SRC,
                       ["mvn", "-o", "-B", "-Dstyle.color=never", "test", "-Dsurefire.reportFormat=plain",
                        "-Dsurefire.useFile=false"], {}, MAVEN_EXPECTED, ["mvn", "-v"]),
}
NPM_OF = {"jest": "jest", "vitest": "vitest", "mocha": "mocha"}


def _env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "HOME", "RUSTUP_HOME", "CARGO_HOME", "JAVA_HOME", "TERM")}
    env.update({"LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "CI": "1",
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    env.update(extra)
    return env


def shown_command(cmd: list[str]) -> str:
    """The command as a shell line, with the interpreters named by version, not by path."""
    names = {PY311: "python3.11", PY310: "python3.10"}
    return shlex.join([names.get(c, c).replace(PY311, "python3.11") for c in cmd])


def make(name: str, work: Path) -> dict:
    framework, parser, files, cmd, env, expected, version_cmd = CASES[name]
    proj = work / name
    for rel, text in files.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text(text)
    pkg = NPM_OF.get(name)
    if pkg:
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", f"{pkg}@{NPM_VERSIONS[pkg]}"],
                       cwd=proj, check=True, env=_env({}), capture_output=True, timeout=600)
    proc = subprocess.run(cmd, cwd=proj, env=_env(env), capture_output=True, timeout=600)
    log = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    log = log.replace(str(proj), "/tmp/project")
    version = subprocess.run(version_cmd, cwd=proj, env=_env({}), capture_output=True, text=True).stdout
    version = re.sub(r"\x1b\[[0-9;]*m", "", version).strip().splitlines()[0] if version.strip() else "?"
    (LOGS / f"{name}.log").write_text(log)
    return {"log": f"{name}.log", "framework": framework, "parser": parser, "command": shown_command(cmd),
            "env": env, "tool_version": version, "returncode": proc.returncode,
            "files": sorted(files), "expected": expected}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        raise SystemExit(f"--only: unknown cases {unknown}; expected some of {sorted(CASES)}")
    LOGS.mkdir(parents=True, exist_ok=True)
    manifest_path = LOGS / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    work = Path(tempfile.mkdtemp(prefix="swe-logs-"))
    try:
        for name in names:
            try:
                manifest[name] = make(name, work)
                print(f"{name:28s} ok   ({manifest[name]['tool_version']})")
            except (OSError, subprocess.SubprocessError) as exc:
                print(f"{name:28s} SKIPPED: {exc}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    manifest = {k: manifest[k] for k in CASES if k in manifest}
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    main()
