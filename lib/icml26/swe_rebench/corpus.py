"""The synthetic corpus: real git repositories with real histories, in several languages.

SWE-rebench V2 mines GitHub (Sec. 3.1). Offline, this module plays GitHub's role: it writes
small utility libraries (Python, JavaScript, Rust, Java) with test suites, a licence and a
build configuration, then a history of pull-request branches merged into ``main`` with merge
commits ``Merge pull request #N ... Fixes #M``. A corpus-level ``tracker.json`` holds what the
GitHub API would give (stars, closed issues, licence, issue texts, PR descriptions); the ground
truth (each PR's *family*, clarity label and confounder) goes to a separate
``ground_truth.json`` that the pipeline never reads.

Every commit uses fixed author/committer names, e-mails and dates and an isolated git
configuration, so two runs with the same seed give identical commit hashes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np

from .sandbox import _check_language, detect_toolchains, git_env
from .units import BUG_UNITS, FEATURE_UNITS, UNITS, UnitSpec, _indent, c_body, camel, py_body


class Family(str, Enum):
    """Kinds of pull requests (each knows its ground truth, Sec. 7.2 of the chapter spec)."""

    FIX_CLEAR = "fix_clear"
    FIX_HIDDEN_MESSAGE = "fix_hidden_message"
    FEATURE_NAMED = "feature_named"
    FEATURE_UNNAMED = "feature_unnamed"
    EXTERNAL_REF = "external_ref"
    VAGUE = "vague"
    COUPLED = "coupled"
    INLINE_TEST = "inline_test"
    NO_TESTS = "no_tests"
    NO_ISSUE = "no_issue"
    FLAKY = "flaky"
    ALREADY_PASSING = "already_passing"
    NETWORK = "network"


#: ground-truth confounder code of each family ("A" = clean)
CONFOUNDER_OF = {
    Family.FIX_CLEAR: "A", Family.FIX_HIDDEN_MESSAGE: "B2", Family.FEATURE_NAMED: "A",
    Family.FEATURE_UNNAMED: "B2", Family.EXTERNAL_REF: "B3", Family.VAGUE: "B4",
    Family.COUPLED: "B1", Family.INLINE_TEST: "B7", Family.NO_TESTS: "A", Family.NO_ISSUE: "A",
    Family.FLAKY: "A", Family.ALREADY_PASSING: "A", Family.NETWORK: "A",
}

QUIRKS = {
    "python": ("src_layout", "app_mode", "test_dir"),
    "javascript": ("script_name", "spec_dir"),
    "rust": ("subdir", "feature"),
    "java": ("subdir", "mode_property"),
    "go": (),
}

DEFAULT_FAMILIES = {
    Family.FIX_CLEAR: 3.0, Family.FIX_HIDDEN_MESSAGE: 1.5, Family.FEATURE_NAMED: 1.5,
    Family.FEATURE_UNNAMED: 1.5, Family.EXTERNAL_REF: 1.0, Family.VAGUE: 1.5, Family.COUPLED: 1.0,
    Family.INLINE_TEST: 0.7, Family.NO_TESTS: 0.7, Family.NO_ISSUE: 0.7, Family.FLAKY: 0.8,
    Family.ALREADY_PASSING: 0.7, Family.NETWORK: 0.7,
}

T0 = 1_700_000_000  # fixed commit clock (2023-11-14)
NET_HOST = "192.0.2.1"  # TEST-NET-1 (RFC 5737): reserved for documentation, never a real host


@dataclass
class CorpusConfig:
    """What to generate. ``filtered_repos`` repositories get a proprietary licence or too few
    stars, so that mining has something to reject."""

    languages: tuple[str, ...] = ("python", "javascript")
    repos_per_language: dict[str, int] = field(default_factory=lambda: {"python": 2, "javascript": 2})
    prs_per_repo: tuple[int, int] = (4, 4)
    families: dict = field(default_factory=lambda: dict(DEFAULT_FAMILIES))
    quirk_rate: float = 0.6
    seed: int = 0
    filtered_repos: int = 1

    def __post_init__(self):
        if not isinstance(self.languages, tuple) or not self.languages:
            raise TypeError(f"languages must be a non-empty tuple of names, got {self.languages!r}")
        for lang in self.languages:
            _check_language(lang)
        for lang in self.languages:
            n = self.repos_per_language.get(lang)
            if not isinstance(n, int) or n < 1:
                raise ValueError(f"repos_per_language[{lang!r}] must be a positive int, got {n!r}")
        lo, hi = self.prs_per_repo
        if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi <= 9):
            raise ValueError(f"prs_per_repo must be (lo, hi) with 1 <= lo <= hi <= 9, got {self.prs_per_repo!r}")
        fams = {}
        for key, w in self.families.items():
            try:
                fam = Family(key)
            except ValueError:
                raise ValueError(f"families: unknown family {key!r}; known: {[f.value for f in Family]}") from None
            if not isinstance(w, (int, float)) or w < 0:
                raise ValueError(f"families[{fam.value!r}] must be a weight >= 0, got {w!r}")
            fams[fam] = float(w)
        if sum(fams.values()) <= 0:
            raise ValueError("families must have a positive total weight")
        self.families = fams
        if not 0.0 <= self.quirk_rate <= 1.0:
            raise ValueError(f"quirk_rate must lie in [0, 1], got {self.quirk_rate!r}")
        if not isinstance(self.filtered_repos, int) or self.filtered_repos < 0:
            raise ValueError(f"filtered_repos must be an int >= 0, got {self.filtered_repos!r}")


@dataclass
class RepoInfo:
    name: str
    language: str
    path: Path
    quirks: tuple[str, ...]
    runner: str          # unittest | pytest | node | cargo | javac
    package: str
    stars: int
    closed_issues: int
    license: str


@dataclass
class PRTruth:
    repo: str
    pr_number: int
    issue_number: int | None
    family: Family
    clarity: int | None
    confounder: str
    units: tuple[str, ...]
    verbose: bool = False


@dataclass
class Corpus:
    root: Path
    config: CorpusConfig
    repos: list[RepoInfo]
    truth: dict[tuple[str, int], PRTruth]
    tracker: dict
    skipped: dict[str, str] = field(default_factory=dict)

    def repo(self, name: str) -> RepoInfo:
        for r in self.repos:
            if r.name == name:
                return r
        raise ValueError(f"repo {name!r} is not in the corpus")


# ---------------------------------------------------------------------------------------------
# repository state and rendering
# ---------------------------------------------------------------------------------------------
@dataclass
class TestCase:
    __test__ = False
    kind: str           # eq | raises | flaky | network
    slug: str
    args: tuple[int, ...] = ()
    expected: int = 0
    message: str = ""
    counter: str = ""


@dataclass
class UnitState:
    spec: UnitSpec
    fixed: bool
    guard: str | None = None
    inline: bool = False
    notes: list[str] = field(default_factory=list)
    tests: list[TestCase] = field(default_factory=list)


class RepoState:
    """The library's content, rendered into files for one language."""

    def __init__(self, info: RepoInfo):
        self.info = info
        self.units: dict[str, UnitState] = {}
        for spec in BUG_UNITS:
            self.units[spec.name] = UnitState(spec, fixed=False, tests=[TestCase("eq", "basic", *spec.base)])

    # -- helpers -----------------------------------------------------------------------------
    @property
    def lang(self) -> str:
        return self.info.language

    def q(self, quirk: str) -> bool:
        return quirk in self.info.quirks

    def root(self) -> str:
        if self.lang in ("rust", "java") and self.q("subdir"):
            return ("crates/" + self.crate + "/") if self.lang == "rust" else "lib/"
        return ""

    @property
    def crate(self) -> str:
        return self.info.package

    def src_path(self, unit: str) -> str:
        lang, pkg = self.lang, self.info.package
        if lang == "python":
            return ("src/" if self.q("src_layout") else "") + f"{pkg}/{unit}.py"
        if lang == "javascript":
            return f"lib/{unit}.js"
        if lang == "rust":
            return self.root() + f"src/{unit}.rs"
        return self.root() + f"src/main/java/{pkg}/{camel(unit, True)}.java"

    def test_path(self, unit: str) -> str:
        lang = self.lang
        if lang == "python":
            return ("checks" if self.q("test_dir") else "tests") + f"/test_{unit}.py"
        if lang == "javascript":
            return "spec/units.spec.js" if self.q("spec_dir") else "test/units.test.js"
        if lang == "rust":
            return self.root() + f"tests/{unit}.rs"
        return self.root() + f"src/test/java/{self.info.package}/{camel(unit, True)}Test.java"

    def call(self, unit: str, args: tuple[int, ...]) -> str:
        """How a user of this language writes the call (used in issue texts and tests)."""
        a = ", ".join(str(x) for x in args)
        if self.lang == "javascript":
            return f"{camel(unit)}({a})"
        if self.lang == "java":
            return f"{camel(unit, True)}.{camel(unit)}({', '.join(f'{x}L' for x in args)})"
        return f"{unit}({a})"

    def fn_name(self, unit: str) -> str:
        return camel(unit) if self.lang in ("javascript", "java") else unit

    # -- whole tree ----------------------------------------------------------------------------
    def files(self) -> dict[str, str]:
        info, out = self.info, {}
        out["LICENSE"] = _license_text(info.license)
        out["README.md"] = (f"# {info.name}\n\nSmall integer utilities ({info.language}). "
                            "Generated for the SWE-rebench V2 chapter of *ICML 2026 in Code*.\n")
        out[".gitignore"] = "build/\ntarget/\nnode_modules/\n__pycache__/\n*.pyc\n"
        render = {"python": self._python, "javascript": self._javascript, "rust": self._rust,
                  "java": self._java}[info.language]
        out.update(render())
        return out

    def _python(self) -> dict[str, str]:
        info, pkg, out = self.info, self.info.package, {}
        base = "src/" if self.q("src_layout") else ""
        pytest_cfg = "\n[tool.pytest.ini_options]\naddopts = \"-p no:cacheprovider\"\n" \
            if info.runner == "pytest" else ""
        out["pyproject.toml"] = (f"[project]\nname = \"{pkg}\"\nversion = \"0.1.0\"\n"
                                 f"license = {{text = \"{info.license}\"}}\n{pytest_cfg}")
        out[f"{base}{pkg}/__init__.py"] = f'"""{pkg}: small integer utilities."""\n'
        for name, u in self.units.items():
            spec = u.spec
            lines = [f'"""{name}: {spec.doc}."""', *[f"# {n}" for n in u.notes], "", "",
                     f"def {name}({', '.join(spec.params)}):"]
            if u.inline:
                args, exp = spec.bug
                lines += ['    """Example:', "", f"    >>> {self.call(name, args)}", f"    {exp}",
                          '    """']
            if u.guard:
                p = spec.guard[0]
                lines += [f"    if {p} < 0:", f"        raise ValueError({u.guard!r})"]
            lines.append(_indent(py_body(spec, u.fixed), 4).rstrip("\n"))
            out[self.src_path(name)] = "\n".join(lines) + "\n"
            out[self.test_path(name)] = self._py_tests(name, u)
        return out

    def _py_tests(self, name: str, u: UnitState) -> str:
        head = ["import os", "import socket", "import tempfile", ""]
        if self.info.runner == "unittest":
            head.insert(3, "import unittest")
        else:
            head.insert(3, "import pytest")
        if self.q("app_mode"):
            head += ['if os.environ.get("APP_MODE") != "test":',
                     '    raise RuntimeError("the test suite needs APP_MODE=test in the environment")', ""]
        head += [f"from {self.info.package}.{name} import {name}", "", ""]
        ut = self.info.runner == "unittest"
        body = [f"class Test{camel(name, True)}(unittest.TestCase):"] if ut else []
        for t in u.tests:
            ind = "    " if ut else ""
            sig = f"def test_{t.slug}(self):" if ut else f"def test_{name}_{t.slug}():"
            call = self.call(name, t.args)
            if t.kind == "eq":
                stmt = [f"self.assertEqual({call}, {t.expected})" if ut else f"assert {call} == {t.expected}"]
            elif t.kind == "raises":
                stmt = (["with self.assertRaises(ValueError) as ctx:", f"    {call}",
                         f"self.assertEqual(str(ctx.exception), {t.message!r})"] if ut else
                        ["with pytest.raises(ValueError) as info:", f"    {call}",
                         f"assert str(info.value) == {t.message!r}"])
            elif t.kind == "flaky":
                stmt = [f'path = os.path.join(tempfile.gettempdir(), "{t.counter}")',
                        "count = 0",
                        "if os.path.exists(path):",
                        "    with open(path) as fh:",
                        "        count = int(fh.read())",
                        "count += 1", 'with open(path, "w") as fh:', "    fh.write(str(count))",
                        ("self.assertNotEqual(count % 3, 0, 'cache miss')" if ut else
                         "assert count % 3 != 0, 'cache miss'")]
            else:  # network
                stmt = [f'with socket.create_connection(("{NET_HOST}", 80), timeout=1):', "    pass"]
            body += [ind + sig] + [ind + "    " + s for s in stmt] + [""]
        if ut:
            body += ["", 'if __name__ == "__main__":', "    unittest.main()"]
        return "\n".join(head + body).rstrip() + "\n"

    def _javascript(self) -> dict[str, str]:
        out = {}
        lic = self.info.license
        tdir = "spec/" if self.q("spec_dir") else ""
        script = "node --test" if self.q("spec_dir") else "node --test --test-reporter=tap"
        key = "test:unit" if self.q("script_name") else "test"
        pkg = {"name": self.info.package, "version": "0.1.0", "license": lic, "private": True,
               "scripts": {key: script, "lint": "node --check lib/*.js"}}
        if tdir:
            pkg["description"] = "specs live in spec/*.spec.js"
        out["package.json"] = json.dumps(pkg, indent=2) + "\n"
        for name, u in self.units.items():
            spec, fn = u.spec, camel(name)
            body = c_body(spec, "javascript", u.fixed)
            if u.guard:
                body = f"if ({spec.guard[0]} < 0) {{ throw new RangeError({json.dumps(u.guard)}); }}\n" + body
            lines = ["'use strict';", *[f"// {n}" for n in u.notes], "", f"/** {name}: {spec.doc}. */",
                     f"function {fn}({', '.join(spec.params)}) {{", _indent(body, 2).rstrip("\n"), "}"]
            if u.inline:
                args, exp = spec.bug
                lines += ["", f"function test_{name}_inline() {{",
                          f"  if ({self.call(name, args)} !== {exp}) {{ throw new Error('inline check'); }}",
                          "}"]
            lines += ["", f"module.exports = {{ {fn} }};"]
            out[self.src_path(name)] = "\n".join(lines) + "\n"
        # one spec file for the whole library (node --test starts one process per file);
        # each test requires its module itself, so a missing module fails only its own tests
        head = ["'use strict';", "", "const test = require('node:test');",
                "const assert = require('node:assert');", "const fs = require('node:fs');",
                "const net = require('node:net');", "const os = require('node:os');",
                "const path = require('node:path');", ""]
        body = [self._js_tests(name, u) for name, u in sorted(self.units.items())]
        out[self.test_path("")] = "\n".join(head) + "\n".join(body)
        return out

    def _js_tests(self, name: str, u: UnitState) -> str:
        fn = camel(name)
        imp = f"  const {{ {fn} }} = require('../lib/{name}');\n"
        lines = []
        for t in u.tests:
            title = f"{name}: {t.slug.replace('_', ' ')}"
            call = self.call(name, t.args)
            if t.kind == "eq":
                lines.append(f"test('{title}', () => {{\n{imp}  assert.strictEqual({call}, {t.expected});\n}});")
            elif t.kind == "raises":
                lines.append(f"test('{title}', () => {{\n{imp}  assert.throws(() => {call}, "
                             f"{{ message: {json.dumps(t.message)} }});\n}});")
            elif t.kind == "flaky":
                lines.append(f"test('{title}', () => {{\n"
                             f"  const file = path.join(os.tmpdir(), '{t.counter}');\n"
                             "  const count = (fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8')) : 0) + 1;\n"
                             "  fs.writeFileSync(file, String(count));\n"
                             "  assert.notStrictEqual(count % 3, 0, 'cache miss');\n});")
            else:
                lines.append(f"test('{title}', async () => {{\n  await new Promise((resolve, reject) => {{\n"
                             f"    const s = net.connect({{ host: '{NET_HOST}', port: 80, timeout: 1000 }});\n"
                             "    s.on('connect', () => { s.destroy(); resolve(); });\n"
                             "    s.on('timeout', () => { s.destroy(); reject(new Error('timeout')); });\n"
                             "    s.on('error', reject);\n  });\n});")
        return "\n".join(lines) + "\n"

    def _rust(self) -> dict[str, str]:
        out, crate, r = {}, self.crate, self.root()
        feat = "\n[features]\ntestkit = []\n" if self.q("feature") else ""
        out[r + "Cargo.toml"] = (f"[package]\nname = \"{crate}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"
                                 f"license = \"{self.info.license}\"\n\n[lib]\ndoctest = false\n{feat}")
        mods = ["#![allow(unused_parens, unused_mut)]", f"//! {crate}: small integer utilities.", ""]
        mods += [f"pub mod {name};" for name in self.units]
        if self.q("feature"):
            mods += ["", "#[cfg(feature = \"testkit\")]", "pub mod testkit;"]
            out[r + "src/testkit.rs"] = ("//! Helpers for the integration tests.\n\n"
                                         "pub fn check_eq(actual: i64, expected: i64) {\n"
                                         "    assert_eq!(actual, expected);\n}\n")
        out[r + "src/lib.rs"] = "\n".join(mods) + "\n"
        for name, u in self.units.items():
            spec = u.spec
            body = c_body(spec, "rust", u.fixed)
            if u.guard:
                body = f"if {spec.guard[0]} < 0 {{ panic!({json.dumps(u.guard)}); }}\n" + body
            params = ", ".join(f"{p}: i64" for p in spec.params)
            lines = [f"//! {name}: {spec.doc}.", *[f"// {n}" for n in u.notes], "", f"pub fn {name}({params}) -> i64 {{",
                     _indent(body, 4).rstrip("\n"), "}"]
            if u.inline:
                args, exp = spec.bug
                lines += ["", "#[cfg(test)]", "mod inline_tests {", "    use super::*;", "", "    #[test]",
                          f"    fn {name}_inline_check() {{", f"        assert_eq!({self.call(name, args)}, {exp});",
                          "    }", "}"]
            out[self.src_path(name)] = "\n".join(lines) + "\n"
            out[self.test_path(name)] = self._rust_tests(name, u)
        return out

    def _rust_tests(self, name: str, u: UnitState) -> str:
        lines = [f"use {self.crate}::{name}::{name};"]
        if self.q("feature"):
            lines.append(f"use {self.crate}::testkit::check_eq;")
        lines.append("")
        for t in u.tests:
            call = self.call(name, t.args)
            fn = f"fn {name}_{t.slug}()"
            if t.kind == "eq":
                check = f"check_eq({call}, {t.expected});" if self.q("feature") else \
                    f"assert_eq!({call}, {t.expected});"
                lines += ["#[test]", fn + " {", f"    {check}", "}", ""]
            elif t.kind == "raises":
                lines += ["#[test]", f"#[should_panic(expected = {json.dumps(t.message)})]", fn + " {",
                          f"    {call};", "}", ""]
            elif t.kind == "flaky":
                lines += ["#[test]", fn + " {", f"    let path = std::env::temp_dir().join(\"{t.counter}\");",
                          "    let count = std::fs::read_to_string(&path).ok()"
                          ".and_then(|s| s.trim().parse::<u64>().ok()).unwrap_or(0) + 1;",
                          "    std::fs::write(&path, count.to_string()).unwrap();",
                          "    assert!(count % 3 != 0, \"cache miss\");", "}", ""]
            else:
                lines += ["#[test]", fn + " {",
                          f"    let addr: std::net::SocketAddr = \"{NET_HOST}:80\".parse().unwrap();",
                          "    std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(1))"
                          ".expect(\"mirror unreachable\");", "}", ""]
        return "\n".join(lines).rstrip() + "\n"

    def _java(self) -> dict[str, str]:
        out, pkg, r = {}, self.info.package, self.root()
        out[r + "build.txt"] = ("Build: compile src/main/java and src/test/java together with javac,\n"
                                "then run the TestRunner class (it prints JUnit XML).\n")
        out[r + f"src/test/java/{pkg}/Check.java"] = _JAVA_CHECK.format(pkg=pkg)
        mode = _JAVA_MODE if self.q("mode_property") else ""
        out[r + "src/test/java/TestRunner.java"] = _JAVA_RUNNER.replace("__MODE__", mode)
        for name, u in self.units.items():
            spec, cls, fn = u.spec, camel(name, True), camel(name)
            body = c_body(spec, "java", u.fixed)
            if u.guard:
                body = (f"if ({spec.guard[0]} < 0) {{ throw new IllegalArgumentException("
                        f"{json.dumps(u.guard)}); }}\n") + body
            params = ", ".join(f"long {p}" for p in spec.params)
            lines = [f"package {pkg};", *[f"// {n}" for n in u.notes], "", f"/** {name}: {spec.doc}. */", f"public final class {cls} {{",
                     f"    private {cls}() {{", "    }", "", f"    public static long {fn}({params}) {{",
                     _indent(body, 8).rstrip("\n"), "    }"]
            if u.inline:
                args, exp = spec.bug
                lines += ["", f"    static void testInline{cls}() {{",
                          f"        if ({self.call(name, args)} != {exp}L) {{ throw new AssertionError(); }}",
                          "    }"]
            lines.append("}")
            out[self.src_path(name)] = "\n".join(lines) + "\n"
            out[self.test_path(name)] = self._java_tests(name, u)
        return out

    def _java_tests(self, name: str, u: UnitState) -> str:
        cls = camel(name, True)
        lines = [f"package {self.info.package};", "", f"public class {cls}Test {{"]
        for t in u.tests:
            call = self.call(name, t.args)
            sig = f"    public void test{camel(t.slug, True)}() throws Exception {{"
            if t.kind == "eq":
                stmt = [f"Check.eq({t.expected}L, {call});"]
            elif t.kind == "raises":
                stmt = [f"Check.throwsMessage({json.dumps(t.message)}, () -> {call});"]
            elif t.kind == "flaky":
                stmt = ["java.nio.file.Path p = java.nio.file.Paths.get("
                        f"System.getenv().getOrDefault(\"TMPDIR\", \"/tmp\"), \"{t.counter}\");",
                        "long c = java.nio.file.Files.exists(p) ? "
                        "Long.parseLong(java.nio.file.Files.readString(p).trim()) : 0;",
                        "c += 1;", "java.nio.file.Files.writeString(p, Long.toString(c));",
                        "if (c % 3 == 0) { throw new AssertionError(\"cache miss\"); }"]
            else:
                stmt = ["try (java.net.Socket s = new java.net.Socket()) {",
                        f"    s.connect(new java.net.InetSocketAddress(\"{NET_HOST}\", 80), 1000);", "}"]
            lines += [sig] + ["        " + s for s in stmt] + ["    }", ""]
        lines[-1] = "}"
        return "\n".join(lines) + "\n"


_JAVA_CHECK = """package {pkg};

final class Check {{
    private Check() {{
    }}

    static void eq(long expected, long actual) {{
        if (expected != actual) {{
            throw new AssertionError("expected " + expected + " but got " + actual);
        }}
    }}

    static void throwsMessage(String message, Runnable body) {{
        try {{
            body.run();
        }} catch (IllegalArgumentException e) {{
            if (!message.equals(e.getMessage())) {{
                throw new AssertionError("wrong message: " + e.getMessage());
            }}
            return;
        }}
        throw new AssertionError("expected an IllegalArgumentException");
    }}
}}
"""

_JAVA_MODE = """        if (!"test".equals(System.getProperty("mode"))) {
            System.out.println("error: the test harness needs the system property mode=test (java -Dmode=test ...)");
            System.exit(2);
        }
"""

_JAVA_RUNNER = """import java.io.File;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;

/** Runs every public test* method of every *Test class and prints JUnit XML. */
public class TestRunner {
    public static void main(String[] args) throws Exception {
__MODE__        File root = new File(args.length > 0 ? args[0] : "build");
        List<String> classes = new ArrayList<>();
        collect(root, root, classes);
        Collections.sort(classes);
        StringBuilder sb = new StringBuilder();
        int n = 0;
        for (String name : classes) {
            Class<?> k = Class.forName(name);
            Method[] methods = k.getDeclaredMethods();
            Arrays.sort(methods, Comparator.comparing(Method::getName));
            for (Method m : methods) {
                if (!m.getName().startsWith("test") || m.getParameterCount() != 0
                        || Modifier.isStatic(m.getModifiers())) {
                    continue;
                }
                n++;
                sb.append("  <testcase classname=\\"").append(name).append("\\" name=\\"").append(m.getName()).append("\\"");
                try {
                    m.invoke(k.getDeclaredConstructor().newInstance());
                    sb.append("/>\\n");
                } catch (InvocationTargetException e) {
                    Throwable c = e.getCause();
                    String tag = (c instanceof AssertionError) ? "failure" : "error";
                    sb.append("><").append(tag).append(" message=\\"").append(esc(String.valueOf(c)))
                      .append("\\"/></testcase>\\n");
                }
            }
        }
        System.out.println("<testsuite name=\\"all\\" tests=\\"" + n + "\\">");
        System.out.print(sb);
        System.out.println("</testsuite>");
    }

    static void collect(File root, File dir, List<String> out) {
        File[] files = dir.listFiles();
        if (files == null) {
            return;
        }
        for (File f : files) {
            if (f.isDirectory()) {
                collect(root, f, out);
            } else if (f.getName().endsWith("Test.class")) {
                String rel = root.toPath().relativize(f.toPath()).toString();
                out.add(rel.substring(0, rel.length() - 6).replace(File.separatorChar, '.'));
            }
        }
    }

    static String esc(String s) {
        return s.replace("&", "&amp;").replace("\\"", "&quot;").replace("<", "&lt;").replace(">", "&gt;");
    }
}
"""


def _license_text(spdx: str) -> str:
    if spdx == "MIT":
        return "MIT License\n\nPermission is hereby granted, free of charge, to any person obtaining a copy...\n"
    if spdx == "Apache-2.0":
        return "Apache License\nVersion 2.0, January 2004\nhttp://www.apache.org/licenses/\n"
    if spdx.startswith("BSD"):
        return f"{spdx} License\n\nRedistribution and use in source and binary forms are permitted...\n"
    return "Proprietary. All rights reserved. Internal use only.\n"


# ---------------------------------------------------------------------------------------------
# issue texts and PR descriptions
# ---------------------------------------------------------------------------------------------
_VERBOSE = ("We have been using this library in several services for a while and overall it works "
            "well. However, there is something odd about {fn}: in some situations the numbers it "
            "produces do not look right to us, and colleagues noticed the same thing on different "
            "machines and with different inputs. We are not completely sure whether this is a bug or "
            "whether we misunderstand the intended semantics, but it seems worth a look, because "
            "downstream reports depend on it and the behaviour feels inconsistent between releases. "
            "It would be great if somebody familiar with the code could take a look and make it behave "
            "the way people would expect. Happy to provide more context if that helps.")


def _issue(state: RepoState, fam: Family, unit: str, rng: np.random.Generator, msg: str = "",
           verbose: bool = False) -> tuple[str, str]:
    spec = UNITS[unit]
    fn = state.fn_name(unit)
    if fam in (Family.FEATURE_NAMED,):
        args, exp = spec.bug
        sig = f"{fn}({', '.join(spec.params)})"
        return (f"Add `{sig}`",
                f"Please add a function `{sig}` in a new module `{unit}` that should {spec.doc}. "
                f"For example `{state.call(unit, args)}` should return `{exp}`.")
    if fam is Family.FEATURE_UNNAMED:
        return ("Helper wanted",
                f"It would be handy to have a helper that can {spec.doc}. Right now every caller "
                "re-implements it by hand.")
    if fam is Family.FIX_HIDDEN_MESSAGE:
        p, v = spec.guard
        actual = spec.run_py((v,) if len(spec.params) == 1 else (2, v), fixed=True)
        return (f"`{fn}` should reject a negative `{p}`",
                f"Calling `{fn}` with a negative `{p}` silently returns `{actual}`. "
                "It should raise an error instead.")
    if fam is Family.EXTERNAL_REF:
        n = int(rng.integers(1000, 9999))
        title = f"Align `{fn}` with the agreed behaviour" if rng.random() < 0.5 else "Behaviour change agreed upstream"
        return (title, f"See the linked discussion for the spec: https://discuss.example.org/t/{n}. "
                       "Please implement what was agreed there.")
    if fam is Family.VAGUE:
        if verbose:
            return (f"Unexpected results from {fn}", _VERBOSE.format(fn=fn))
        return (f"{fn} behaves weirdly sometimes",
                f"Sometimes the results of {fn} look off. Not sure why, maybe an edge case?")
    args, exp = spec.bug
    actual = spec.run_py(args, fixed=False)
    call = state.call(unit, args)
    style = rng.integers(3)
    if style == 0:
        body = (f"Calling `{call}` returns `{actual}`.\n\n```\n{call}\n// -> {actual}\n```\n\n"
                f"Expected: `{exp}`. Actual: `{actual}`.")
    elif style == 1:
        body = f"`{call}` gives {actual} but it should give {exp}."
    else:
        body = (f"This sometimes bites us in production: `{call}` returns {actual}, "
                f"expected {exp}.")
    return (f"`{fn}` returns a wrong result", body)


def _pr_description(state: RepoState, fam: Family, units: tuple[str, ...], solution_line: str,
                    rng: np.random.Generator) -> tuple[str, str]:
    unit = units[0]
    fn = state.fn_name(unit)
    path = state.src_path(unit)
    feature = fam in (Family.FEATURE_NAMED, Family.FEATURE_UNNAMED)
    title = f"{'Add' if feature else 'Fix'} {fn}"
    verb = "Adds" if feature else "Fixes"
    u = rng.random()
    if u < 0.6 or not solution_line.strip():
        desc = (f"{verb} `{fn}` in `{path}` and adds a regression test. "
                "The edge case is now handled as documented.")
    elif u < 0.9:
        desc = (f"{verb} the {fn} helper: the edge case of {fn} is now handled as documented, "
                "with a regression test.")
    else:
        desc = (f"{verb} `{fn}`. The key change is the line\n{solution_line.strip()}\n"
                "plus a regression test.")
    return title, desc


# ---------------------------------------------------------------------------------------------
# generation
# ---------------------------------------------------------------------------------------------
_WORDS = ("intkit", "numlet", "arith", "calcs", "mathbox", "digits", "ranger", "tally", "countr", "sumit")
_SHORT = {"python": "py", "javascript": "js", "rust": "rs", "java": "jv", "go": "go"}
_LICENSES = ("MIT", "Apache-2.0", "BSD-3-Clause", "MIT", "BSD-2-Clause", "ISC")


class _Committer:
    """Builds one repository's whole history as a ``git fast-import`` stream (one process per
    repository instead of a dozen git calls per PR). Identity and dates are fixed."""

    def __init__(self, path: Path):
        self.path, self.tick, self.mark = path, 0, 0
        self.written: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.main: int | None = None

    def _data(self, text: str) -> bytes:
        raw = text.encode()
        return b"data %d\n" % len(raw) + raw + b"\n"

    def commit(self, ref: str, message: str, changes: dict[str, str], parents: list[int]) -> int:
        self.tick += 1
        self.mark += 1
        who = f"Corpus Bot <bot@corpus.invalid> {T0 + 3600 * self.tick} +0000"
        out = [f"commit {ref}\nmark :{self.mark}\nauthor {who}\ncommitter {who}\n".encode(),
               self._data(message)]
        if parents:
            out.append(f"from :{parents[0]}\n".encode())
            out += [f"merge :{p}\n".encode() for p in parents[1:]]
        for rel, text in sorted(changes.items()):
            out.append(f"M 100644 inline {rel}\n".encode() + self._data(text))
        self.chunks.append(b"".join(out) + b"\n")
        return self.mark

    def changed(self, files: dict[str, str]) -> dict[str, str]:
        diff = {k: v for k, v in files.items() if self.written.get(k) != v}
        self.written.update(diff)
        return diff

    def finish(self) -> None:
        env = git_env()
        subprocess.run(["git", "init", "-q", "-b", "main", str(self.path)], env=env, check=True,
                       capture_output=True)
        subprocess.run(["git", "fast-import", "--quiet", "--done"], cwd=self.path, env=env, check=True,
                       input=b"".join(self.chunks) + b"done\n", capture_output=True)
        subprocess.run(["git", "update-ref", "-d", "refs/heads/tmp"], cwd=self.path, env=env,
                       capture_output=True)
        subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=self.path, env=env, check=True,
                       capture_output=True)


def _allocate(cfg: CorpusConfig, rng: np.random.Generator, repo_prs: list[int],
              exclude: set[int] = frozenset()) -> list[list[Family]]:
    """Deal families to PR slots: exact proportions (largest remainder), flaky PRs always last,
    and never in the ``exclude``d repositories (those that mining will reject)."""
    weights = cfg.families
    total = sum(repo_prs)
    wsum = sum(weights.values())
    n_flaky = 0
    if weights.get(Family.FLAKY, 0) > 0:
        n_flaky = min(len(repo_prs), max(1, round(weights[Family.FLAKY] / wsum * total)))
    eligible = [i for i in range(len(repo_prs)) if i not in exclude] or list(range(len(repo_prs)))
    n_flaky = min(n_flaky, len(eligible))
    flaky_repos = {eligible[i] for i in rng.choice(len(eligible), size=n_flaky, replace=False)} if n_flaky else set()
    rest = {f: w for f, w in weights.items() if f is not Family.FLAKY and w > 0}
    slots = total - n_flaky
    rsum = sum(rest.values())
    quota = {f: w / rsum * slots for f, w in rest.items()}
    counts = {f: int(np.floor(q)) for f, q in quota.items()}
    order = sorted(rest, key=lambda f: (-(quota[f] - counts[f]), f.value))
    for f in order[: slots - sum(counts.values())]:
        counts[f] += 1
    pool = [f for f in sorted(counts, key=lambda f: f.value) for _ in range(counts[f])]
    pool = [pool[i] for i in rng.permutation(len(pool))]
    out, k = [], 0
    for i, n in enumerate(repo_prs):
        m = n - (1 if i in flaky_repos else 0)
        fams = pool[k:k + m]
        k += m
        if i in flaky_repos:
            fams.append(Family.FLAKY)
        out.append(fams)
    return out


def generate_corpus(root: str | os.PathLike, cfg: CorpusConfig, *, overwrite: bool = False,
                    skip_missing: bool = False) -> Corpus:
    """Write real git repositories + ``tracker.json`` + ``ground_truth.json`` under ``root``."""
    if not isinstance(cfg, CorpusConfig):
        raise TypeError(f"cfg must be a CorpusConfig, got {type(cfg).__name__}")
    root = Path(root)
    if root.exists() and any(root.iterdir()):
        if not overwrite:
            raise ValueError(f"root {root} is not empty; pass overwrite=True to replace it")
        shutil.rmtree(root)
    tools = detect_toolchains()
    languages, skipped = [], {}
    for lang in cfg.languages:
        if lang == "go":
            why = ("go: no corpus templates in this book (the toolchain is absent on the reference "
                   "machine, so they could not be tested)" if tools["go"].available else
                   "go: toolchain not found on PATH (install Go >= 1.18 to enable it)")
        elif not tools[lang].available:
            why = f"{lang}: toolchain not found on PATH ({', '.join(n for n, _ in _TOOLNAMES[lang])})"
        else:
            languages.append(lang)
            continue
        if not skip_missing:
            raise ValueError(f"languages: {why}; pass skip_missing=True to skip it")
        skipped[lang] = why
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    plan = []
    for lang in languages:
        for i in range(cfg.repos_per_language[lang]):
            plan.append((lang, i))
    lo, hi = cfg.prs_per_repo
    repo_prs = [int(rng.integers(lo, hi + 1)) for _ in plan]
    # repositories that mining must reject (licence / popularity): taken from the interpreted
    # languages when possible, so that the expensive compiled repositories all reach execution
    cheap = [i for i, (lang, _) in enumerate(plan) if lang in ("python", "javascript")] or list(range(len(plan)))
    n_filter = min(cfg.filtered_repos, len(cheap))
    filt = [cheap[i] for i in rng.choice(len(cheap), size=n_filter, replace=False)] if n_filter else []
    fams = _allocate(cfg, rng, repo_prs, exclude=set(filt))
    repos, truth, tracker = [], {}, {"repos": {}}
    counters = {"vague": 0}  # vague issues alternate short / verbose across the corpus
    for idx, (lang, i) in enumerate(plan):
        word = _WORDS[(idx + int(rng.integers(len(_WORDS)))) % len(_WORDS)]
        name = f"{_SHORT[lang]}-{word}-{i}"
        package = f"{word}{i}" if lang != "rust" else f"{word}_{i}"
        runner = {"python": "pytest" if rng.random() < 0.5 else "unittest", "javascript": "node",
                  "rust": "cargo", "java": "javac", "go": "go"}[lang]
        pool = tuple(q for q in QUIRKS[lang] if not (runner == "pytest" and q == "test_dir"))  # pytest finds any dir
        quirks: tuple[str, ...] = ()
        if pool and rng.random() < cfg.quirk_rate:
            k = 1 + int(rng.random() < 0.35)
            quirks = tuple(sorted(rng.choice(pool, size=min(k, len(pool)), replace=False).tolist()))
        stars, closed, lic = int(rng.integers(30, 900)), int(rng.integers(16, 300)), _LICENSES[idx % len(_LICENSES)]
        if idx in filt:
            if filt.index(idx) % 2 == 0:
                lic = "LicenseRef-Proprietary"
            elif lang in ("python", "java", "go"):
                stars, closed = 14, 4   # enough for the long-tail tier, not for the high tier
            else:
                stars, closed = 6, 0
        info = RepoInfo(name, lang, root / "repos" / name, quirks, runner, package, stars, closed, lic)
        repos.append(info)
        issues, pulls = _build_repo(info, fams[idx], rng, truth, counters)
        tracker["repos"][name] = {"language": lang, "stars": stars, "closed_issues": closed,
                                  "license": lic, "issues": issues, "pulls": pulls}
    (root / "tracker.json").write_text(json.dumps(tracker, indent=1, sort_keys=True))
    gt = {f"{k[0]}#{k[1]}": {"family": v.family.value, "clarity": v.clarity, "confounder": v.confounder,
                              "issue": v.issue_number, "units": list(v.units)} for k, v in truth.items()}
    (root / "ground_truth.json").write_text(json.dumps(gt, indent=1, sort_keys=True))
    return Corpus(root, cfg, repos, truth, tracker, skipped)


_TOOLNAMES = {"python": (("python", ""),), "javascript": (("node", ""), ("npm", "")),
              "rust": (("cargo", ""), ("rustc", "")), "java": (("javac", ""), ("java", "")),
              "go": (("go", ""),)}


def _build_repo(info: RepoInfo, families: list[Family], rng: np.random.Generator,
                truth: dict, counters: dict) -> tuple[dict, dict]:
    info.path.mkdir(parents=True)
    state = RepoState(info)
    com = _Committer(info.path)
    main = com.commit("refs/heads/main", "Initial import\n", com.changed(state.files()), [])
    issues, pulls = {}, {}
    number = 0
    free_bug = [u.name for u in BUG_UNITS]
    free_bug = [free_bug[i] for i in rng.permutation(len(free_bug))]
    free_feat = [u.name for u in FEATURE_UNITS]
    free_feat = [free_feat[i] for i in rng.permutation(len(free_feat))]
    msg_style = int(rng.integers(3))
    for fam in families:
        fam = _feasible(fam, state, free_bug, free_feat)
        number += 1
        issue_no = None if fam is Family.NO_ISSUE else number
        if issue_no is not None:
            number += 1
        pr = number
        units, verbose, key_line = _apply_family(fam, state, free_bug, free_feat, pr, msg_style, rng)
        if fam is Family.VAGUE:
            verbose = counters["vague"] % 2 == 1
            counters["vague"] += 1
        changes = com.changed(state.files())
        title, desc = _pr_description(state, fam, units, key_line, rng)
        head = com.commit("refs/heads/tmp", title + "\n", changes, [main])
        link = f"\n\nFixes #{issue_no}" if issue_no is not None else ""
        main = com.commit("refs/heads/main", f"Merge pull request #{pr} from contrib/pr-{pr}{link}\n",
                          changes, [main, head])
        clarity = None
        if issue_no is not None:
            msg = state.units[units[0]].guard or ""
            it, ib = _issue(state, fam, units[0], rng, msg, verbose)
            issues[str(issue_no)] = {"title": it, "body": ib}
            clarity = {Family.FIX_HIDDEN_MESSAGE: 1, Family.FEATURE_UNNAMED: 1, Family.EXTERNAL_REF: 3,
                       Family.VAGUE: 2 if verbose else 3}.get(fam, 0)
        pulls[str(pr)] = {"title": title, "description": desc, "issue": issue_no}
        truth[(info.name, pr)] = PRTruth(info.name, pr, issue_no, fam, clarity, CONFOUNDER_OF[fam], units, verbose)
    com.finish()
    return issues, pulls


def _feasible(fam: Family, state: RepoState, free_bug: list, free_feat: list) -> Family:
    need_bug = {Family.COUPLED: 2, Family.FEATURE_NAMED: 0, Family.FEATURE_UNNAMED: 0,
                Family.FIX_HIDDEN_MESSAGE: 0, Family.ALREADY_PASSING: 0}.get(fam, 1)
    if len(free_bug) < need_bug:
        return Family.FEATURE_NAMED if free_feat else Family.ALREADY_PASSING
    if fam is Family.FIX_HIDDEN_MESSAGE and not any(u.spec.guard and not u.guard for u in state.units.values()):
        return Family.FIX_CLEAR if free_bug else Family.FEATURE_NAMED
    if fam in (Family.FEATURE_NAMED, Family.FEATURE_UNNAMED) and not free_feat:
        return Family.FIX_CLEAR
    return fam


_GUARD_STYLES = ("{fn}: {p} must be >= 0", "negative {p} is not allowed in {fn}", "{fn}() expects a non-negative {p}")


def _apply_family(fam: Family, state: RepoState, free_bug: list, free_feat: list, pr: int,
                  msg_style: int, rng: np.random.Generator) -> tuple[tuple[str, ...], bool, str]:
    """Mutate ``state`` as the PR does; return (units, verbose issue?, a key solution line)."""
    slug = f"regression_pr{pr}"
    verbose = False
    if fam in (Family.FEATURE_NAMED, Family.FEATURE_UNNAMED):
        name = free_feat.pop(0)
        spec = UNITS[name]
        u = UnitState(spec, fixed=True, tests=[TestCase("eq", "basic", *spec.base),
                                                TestCase("eq", f"feature_pr{pr}", *spec.bug)])
        state.units[name] = u
        return (name,), False, spec.c_fixed.splitlines()[0]
    if fam is Family.FIX_HIDDEN_MESSAGE:
        cands = [n for n, u in state.units.items() if u.spec.guard and not u.guard]
        name = cands[int(rng.integers(len(cands)))]
        u = state.units[name]
        p, v = u.spec.guard
        u.guard = _GUARD_STYLES[msg_style].format(fn=state.fn_name(name), p=p)
        args = (v,) if len(u.spec.params) == 1 else (2, v)
        u.tests.append(TestCase("raises", f"rejects_negative_pr{pr}", args, 0, u.guard))
        return (name,), False, u.guard
    if fam is Family.ALREADY_PASSING:
        cands = [n for n, u in state.units.items() if u.spec.extra and not any(t.slug.startswith("extra") for t in u.tests)]
        name = cands[int(rng.integers(len(cands)))] if cands else next(iter(state.units))
        u = state.units[name]
        case = u.spec.extra or u.spec.base
        u.tests.append(TestCase("eq", f"extra_pr{pr}", *case))
        u.notes.append(f"Behaviour for this input is covered since PR #{pr}.")  # refactor: comment only
        return (name,), False, ""
    name = free_bug.pop(0)
    u = state.units[name]
    u.fixed = True
    key = u.spec.c_fixed.splitlines()[-1]
    units = (name,)
    if fam is not Family.NO_TESTS:
        u.tests.append(TestCase("eq", slug, *u.spec.bug))
    if fam is Family.COUPLED:
        other = free_bug.pop(0)
        o = state.units[other]
        o.fixed = True
        o.tests.append(TestCase("eq", f"{slug}_b", *o.spec.bug))
        units = (name, other)
    elif fam is Family.INLINE_TEST:
        u.inline = True
    elif fam is Family.FLAKY:
        u.tests.append(TestCase("flaky", f"cache_roundtrip_pr{pr}", counter=f"{state.info.name}-pr{pr}.count"))
    elif fam is Family.NETWORK:
        u.tests.append(TestCase("network", f"mirror_reachable_pr{pr}"))
    return units, verbose, key
