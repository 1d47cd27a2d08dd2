"""Stage 2: environment setup synthesis, interactive (the paper's agent) vs one-shot (baseline).

SWE-rebench V2, Sec. 3.2: an LLM agent (mini-SWE-agent driven by Qwen3-Coder-480B) works in a
shell, one command per turn, with observations truncated to 64 lines of 500 characters. It reads
the repository, tries install and test commands, reads the errors and fixes them, and writes
``install_config.json = {"install": [...], "test_cmd": [...]}`` only once tests actually ran.
It runs **once per repository**, on the snapshot of the latest mined PR. The paper's ablation
(setup pass@1 25.8% interactive vs 12.1% for a fixed non-interactive workflow with the same
model) is the claim this module lets us re-enact.

There is no LLM here. :class:`RuleBasedSetupAgent` is a deterministic stand-in that proposes
the conventional command for the language, reads the sandboxed output and applies fixes keyed
on error patterns; :class:`OneShotSetupAgent` submits the same first guess without feedback;
:class:`LLMSetupAgent` adapts any ``complete(prompt) -> str`` callable (never used in CI).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

from .parsers import PARSERS, RuleBasedParserSynthesizer, TestStatus, get_parser
from .sandbox import CommandResult, Sandbox, _check_language

OBS_LINES, OBS_CHARS = 64, 500  # the paper's observation truncation


@dataclass
class InstallConfig:
    """What the setup stage produces for a repository (the released ``install_config``)."""

    install: list[str]
    test_cmd: list[str]
    log_parser: str
    workdir: str = "."

    def __post_init__(self):
        if not isinstance(self.install, list) or not all(isinstance(c, str) for c in self.install):
            raise TypeError(f"install must be a list[str], got {self.install!r}")
        if not isinstance(self.test_cmd, list) or not all(isinstance(c, str) for c in self.test_cmd):
            raise TypeError(f"test_cmd must be a list[str], got {self.test_cmd!r}")
        if not self.test_cmd or not any(c.strip() for c in self.test_cmd):
            raise ValueError("test_cmd must hold at least one non-empty command")
        get_parser(self.log_parser)
        if not isinstance(self.workdir, str) or Path(self.workdir).is_absolute() or ".." in Path(self.workdir).parts:
            raise ValueError(f"workdir must be a relative path inside the repository, got {self.workdir!r}")

    def script(self) -> str:
        """One shell script: install commands must succeed, then the test commands run."""
        lines = ["set -e", f"cd {shlex.quote(self.workdir)}", *self.install, "set +e", *self.test_cmd]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"install": list(self.install), "test_cmd": list(self.test_cmd),
                "log_parser": self.log_parser, "workdir": self.workdir}


@dataclass
class SetupAction:
    """One agent turn: run an exploratory command, submit a config to be tried, or give up."""

    kind: Literal["run", "submit", "give_up"]
    command: str = ""
    config: InstallConfig | None = None
    thought: str = ""


@dataclass
class SetupResult:
    config: InstallConfig | None
    transcript: list[tuple[str, CommandResult]]
    steps: int
    agent: str = ""

    @property
    def success(self) -> bool:
        return self.config is not None


class SetupAgent(Protocol):
    def act(self, observation: str, history: list) -> SetupAction: ...


def truncate_observation(text: str) -> str:
    """Keep the last 64 lines, each cut to 500 characters (what the agent gets to read)."""
    lines = text.splitlines()[-OBS_LINES:]
    return "\n".join(line[:OBS_CHARS] for line in lines)


_JAVA_BUILD = ("if [ ! -f build/.stamp ] || [ -n \"$(find src -name '*.java' -newer build/.stamp)\" ]; "
               "then rm -rf build && mkdir -p build && javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC "
               "-nowarn -d build $(find src -name '*.java') && touch build/.stamp; fi")
_JAVA_RUN = "java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC{props} -cp build TestRunner build"


def first_guess(language: str, listing: list[str], manifest: str = "") -> InstallConfig:
    """The conventional command for ``language`` (what both agents try first).

    ``manifest`` is the text of a top-level ``pyproject.toml`` (it tells pytest from unittest).
    """
    _check_language(language)
    if language == "python":
        uses_pytest = "[tool.pytest" in manifest or any(p.endswith(("conftest.py", "pytest.ini")) for p in listing)
        if uses_pytest:
            return InstallConfig([], ["python -m pytest -rA -p no:cacheprovider"], "pytest")
        return InstallConfig([], ["python -m unittest discover -s tests -v"], "unittest")
    if language == "javascript":
        return InstallConfig([], ["npm test"], "tap")
    if language == "rust":
        return InstallConfig([], ["cargo test --offline --no-fail-fast -- --test-threads=1"], "cargo")
    if language == "java":
        return InstallConfig([], [_JAVA_BUILD, _JAVA_RUN.format(props="")], "junit_xml")
    return InstallConfig([], ["go test -v -count=1 ./..."], "gotest")


class OneShotSetupAgent:
    """Non-interactive baseline: submits the conventional first guess and never reacts to errors."""

    label = "OneShotSetupAgent (rule-based stand-in, no feedback)"

    def __init__(self, language: str):
        self.language = _check_language(language)
        self.listing: list[str] = []

    def act(self, observation: str, history: list) -> SetupAction:
        if not history:
            self.listing, manifest = _listing(observation)
            return SetupAction("submit", config=first_guess(self.language, self.listing, manifest),
                               thought="conventional command for the language")
        return SetupAction("give_up", thought="one-shot: no second attempt")


def _listing(observation: str) -> tuple[list[str], str]:
    """Split the first observation into the file list and the ``pyproject.toml`` text."""
    head, _, manifest = observation.partition(_MANIFEST)
    return [line for line in head.splitlines() if line.strip()], manifest


_MANIFEST = "\n--- pyproject.toml ---\n"


class RuleBasedSetupAgent:
    """Interactive stand-in: propose, observe, fix by error rules (deterministic, no model).

    Rules (error pattern -> fix): missing module with a ``src/`` package -> ``PYTHONPATH=src``;
    an environment-variable hint -> ``export``; unittest start dir missing -> the directory that
    holds ``test_*.py``; npm "Missing script" -> read ``package.json`` and run a ``test*`` script;
    zero TAP tests -> run the ``*.spec.js`` files; "could not find Cargo.toml" / no Java sources ->
    ``cd`` to the project root; an item "gated behind the `X` feature" -> ``--features X``; a
    required Java system property -> ``-Dkey=value``.
    """

    label = "RuleBasedSetupAgent (interactive rule-based stand-in for the LLM agent)"

    def __init__(self, language: str):
        self.language = _check_language(language)
        self.listing: list[str] = []
        self.cfg: InstallConfig | None = None
        self.env: dict[str, str] = {}
        self.props: list[str] = []
        self.features: list[str] = []
        self.pending: str | None = None

    def finalize(self, cfg: InstallConfig, repo_dir: Path) -> InstallConfig:
        """Record the command npm ran rather than ``npm`` itself (npm costs ~0.5 s per call)."""
        m = re.fullmatch(r"npm (?:test|run ([\w:.-]+))", cfg.test_cmd[0].strip())
        manifest = repo_dir / cfg.workdir / "package.json"
        if not m or not manifest.exists():
            return cfg
        script = json.loads(manifest.read_text()).get("scripts", {}).get(m.group(1) or "test", "")
        if not script.startswith("node --test"):
            return cfg
        if "--test-reporter" not in script:
            script = script.replace("node --test", "node --test --test-reporter=tap", 1)
        return replace(cfg, test_cmd=[script, *cfg.test_cmd[1:]])

    def _submit(self, cfg: InstallConfig, thought: str) -> SetupAction:
        self.cfg = cfg
        return SetupAction("submit", config=cfg, thought=thought)

    def _with_env(self, key: str, value: str) -> InstallConfig:
        self.env[key] = value
        assert self.cfg is not None
        exports = [f"export {k}={v}" for k, v in self.env.items()]
        return replace(self.cfg, install=exports)

    def act(self, observation: str, history: list) -> SetupAction:
        if not history:
            self.listing, manifest = _listing(observation)
            return self._submit(first_guess(self.language, self.listing, manifest), "conventional command first")
        if self.pending == "scripts":
            self.pending = None
            try:
                scripts = json.loads(observation).get("scripts", {})
            except (json.JSONDecodeError, AttributeError):
                return SetupAction("give_up", thought="package.json unreadable")
            names = [k for k in scripts if k.startswith("test")]
            if not names:
                return SetupAction("give_up", thought="no test script in package.json")
            assert self.cfg is not None
            return self._submit(replace(self.cfg, test_cmd=[f"npm run {names[0]}"]),
                                f"package.json defines {names[0]!r}")
        obs = observation
        cfg = self.cfg
        assert cfg is not None
        lang = self.language
        if lang == "python":
            m = re.search(r"No module named '(\w+)'", obs)
            if m and any(p.startswith(f"src/{m.group(1)}/") for p in self.listing) and "PYTHONPATH" not in self.env:
                return self._submit(self._with_env("PYTHONPATH", "src"), "package lives under src/")
            m = re.search(r"\b([A-Z][A-Z_]+)=(\w+)\b", obs)
            if m and m.group(1) not in self.env and "environment" in obs:
                return self._submit(self._with_env(m.group(1), m.group(2)), f"the log asks for {m.group(0)}")
            if "discover" in cfg.test_cmd[0] and re.search(r"Start directory is not importable|No such file|Ran 0 tests", obs):
                dirs = sorted({str(Path(p).parent) for p in self.listing if Path(p).name.startswith("test_")})
                if dirs:
                    return self._submit(replace(cfg, test_cmd=[f"python -m unittest discover -s {dirs[0]} -v"]),
                                        f"tests live in {dirs[0]}/")
        if lang == "javascript":
            if "Missing script" in obs:
                self.pending = "scripts"
                return SetupAction("run", command="cat package.json", thought="which scripts exist?")
            if re.search(r"^# tests 0\b", obs, re.M):
                specs = sorted({str(Path(p).parent) for p in self.listing if p.endswith(".spec.js")})
                if specs:
                    return self._submit(replace(cfg, test_cmd=[f"node --test --test-reporter=tap {specs[0]}/*.spec.js"]),
                                        "the specs are *.spec.js files")
        if lang in ("rust", "java"):
            marker = "Cargo.toml" if lang == "rust" else "src/main/java"
            lost = ("could not find `Cargo.toml`" in obs) if lang == "rust" else \
                bool(re.search(r"no source files|'src': No such file", obs))
            if lost and cfg.workdir == ".":
                roots = sorted({p.split(marker)[0].rstrip("/") for p in self.listing if marker in p and p.split(marker)[0]})
                if roots:
                    return self._submit(replace(cfg, workdir=roots[0]), f"the project root is {roots[0]}/")
        if lang == "rust":
            m = re.search(r"gated behind the `([\w-]+)` feature", obs)
            if m and m.group(1) not in self.features:
                self.features.append(m.group(1))
                cmd = f"cargo test --offline --no-fail-fast --features {','.join(self.features)} -- --test-threads=1"
                return self._submit(replace(cfg, test_cmd=[cmd]), f"tests need feature {m.group(1)!r}")
        if lang == "java":
            m = re.search(r"system property (\w+)=(\w+)", obs)
            if m and f"-D{m.group(1)}={m.group(2)}" not in self.props:
                self.props.append(f"-D{m.group(1)}={m.group(2)}")
                run = _JAVA_RUN.format(props="".join(" " + p for p in self.props))
                return self._submit(replace(cfg, test_cmd=[cfg.test_cmd[0], run]), f"needs {self.props[-1]}")
        return SetupAction("give_up", thought="no rule matches the error")


SETUP_PROMPT = """You are setting up a {language} repository so that its test suite runs.
Work in the shell, one command per turn. Use non-interactive, lockfile-aware installs; find the
project root in monorepos; make the test runner print one line per test without colours; disable
test caches. When the tests have actually run, answer with JSON
{{"install": [...], "test_cmd": [...], "log_parser": one of {parsers}, "workdir": "."}};
otherwise answer with JSON {{"command": "<one shell command>"}}.

Files:
{listing}

Last observation:
{observation}
"""


class LLMSetupAgent:
    """Adapter around a user-supplied ``complete(prompt: str) -> str``; never used in CI."""

    label = "LLMSetupAgent (user-supplied model)"

    def __init__(self, complete: Callable[[str], str], language: str):
        if not callable(complete):
            raise TypeError("complete must be a callable prompt -> text")
        self.complete = complete
        self.language = _check_language(language)
        self.listing = ""

    def act(self, observation: str, history: list) -> SetupAction:
        if not history:
            self.listing = observation
        prompt = SETUP_PROMPT.format(language=self.language, parsers=sorted(PARSERS), listing=self.listing,
                                     observation=truncate_observation(observation))
        text = self.complete(prompt)
        m = re.search(r"\{.*\}", text, re.S)
        if not m:
            return SetupAction("give_up", thought="model answer had no JSON")
        try:
            obj = json.loads(m.group(0))
            if "command" in obj:
                return SetupAction("run", command=str(obj["command"]))
            return SetupAction("submit", config=InstallConfig(list(obj.get("install", [])),
                                                              list(obj["test_cmd"]), obj["log_parser"],
                                                              obj.get("workdir", ".")))
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as err:
            return SetupAction("give_up", thought=f"bad model answer: {err}")


def listing_of(repo_dir: Path) -> str:
    """The agent's first observation: every file path, then the top-level ``pyproject.toml``."""
    files = sorted(str(p.relative_to(repo_dir)) for p in repo_dir.rglob("*")
                   if p.is_file() and ".git" not in p.parts)
    text = "\n".join(files)
    if (repo_dir / "pyproject.toml").exists():
        text += _MANIFEST + (repo_dir / "pyproject.toml").read_text()
    return text


def try_config(cfg: InstallConfig, repo_dir: Path, sandbox: Sandbox, env: dict | None = None,
               tmpdir: Path | None = None) -> tuple[CommandResult, dict[str, str]]:
    """Run ``cfg``'s script in ``repo_dir``; return the result and the parsed status map."""
    res = sandbox.run(cfg.script(), repo_dir, env=env, tmpdir=tmpdir)
    log = res.stdout.replace(str(repo_dir) + "/", "")
    return res, get_parser(cfg.log_parser)(log)


def run_setup(agent: SetupAgent, repo_dir: str | Path, sandbox: Sandbox, max_steps: int = 15,
              env: dict | None = None) -> SetupResult:
    """Drive ``agent`` for at most ``max_steps`` turns in a copy of the repository.

    A submitted config is accepted only when its run parses (the parser synthesis stand-in
    finds a parser, validated on a second trace) with at least one PASSED test.
    """
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
    repo_dir = sandbox.inside(repo_dir)
    observation = listing_of(repo_dir)
    history: list = []
    transcript: list[tuple[str, CommandResult]] = []
    tmp = sandbox.mkdtemp("setup-tmp")
    name = getattr(agent, "label", type(agent).__name__)
    for step in range(1, max_steps + 1):
        action = agent.act(observation, history)
        if action.kind == "give_up":
            return SetupResult(None, transcript, step, name)
        if action.kind == "run":
            res = sandbox.run(action.command, repo_dir, env=env, tmpdir=tmp)
            transcript.append((action.command, res))
            history.append(action)
            observation = res.stdout
            continue
        cfg = action.config
        if cfg is None:
            raise ValueError("a 'submit' action needs a config")
        res, statuses = try_config(cfg, repo_dir, sandbox, env, tmp)
        transcript.append((cfg.script(), res))
        history.append(action)
        passed = sum(s == TestStatus.PASSED.value for s in statuses.values())
        if passed >= 1:
            res2, _ = try_config(cfg, repo_dir, sandbox, env, tmp)
            logs = [r.stdout.replace(str(repo_dir) + "/", "") for r in (res, res2)]
            parser = RuleBasedParserSynthesizer().synthesize(logs)
            if parser is not None:
                cfg = replace(cfg, log_parser=parser)
                finalize = getattr(agent, "finalize", None)
                pinned = finalize(cfg, repo_dir) if finalize else cfg
                if pinned != cfg:   # keep the pinned command only if it reproduces the same tests
                    res3, st3 = try_config(pinned, repo_dir, sandbox, env, tmp)
                    transcript.append((pinned.script(), res3))
                    if set(st3) == set(statuses):
                        cfg = pinned
                return SetupResult(cfg, transcript, step, name)
        observation = truncate_observation(res.stdout) + f"\n[parsed {len(statuses)} tests, {passed} passed]"
    return SetupResult(None, transcript, max_steps, name)


__all__ = ["InstallConfig", "LLMSetupAgent", "OneShotSetupAgent", "RuleBasedSetupAgent", "SetupAction",
           "SetupAgent", "SetupResult", "first_guess", "run_setup", "truncate_observation"]
