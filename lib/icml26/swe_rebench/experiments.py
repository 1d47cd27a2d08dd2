"""The pipeline end to end (Sec. 3.6 of the paper) and the runners the notebooks call.

``run_pipeline``: generate the corpus -> mine -> per repository (in parallel, ``workers``
threads driving sandboxed subprocesses): interactive and one-shot setup once, on the latest
mined PR's merge commit -> per task: validation run 1 (F2P found?) -> clarity-judge ensemble
-> runs 2..n (stable?) -> metadata, interfaces -> dataset rows. Everything is sorted by
instance id, so reruns give identical rows whatever the thread schedule.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .corpus import Corpus, CorpusConfig, Family, generate_corpus
from .gitops import diff_commits, merged_prs, split_patch
from .harness import EmptySolver, GoldSolver, IssueOnlySolver, Task, run_solver
from .judges import (
    JUDGE_VARIANTS,
    RuleBasedMetaLabeler,
    RuleBasedStatementWriter,
    extract_interfaces,
    judge_scores,
    leakage,
)
from .method import (
    ENSEMBLE_RULES,
    ValidationResult,
    binary_metrics,
    classify_transitions,
    ensemble_decision,
    pass_at_k,
    validate_task,
)
from .mining import Candidate, Funnel, MiningConfig, mine
from .parsers import cross_check, get_parser
from .presets import PRESETS, SwePreset
from .sandbox import Sandbox, SandboxConfig, owned_tempdir
from .setup_agent import OneShotSetupAgent, RuleBasedSetupAgent, SetupResult, run_setup


@dataclass
class PipelineConfig:
    corpus: CorpusConfig
    mining: MiningConfig = field(default_factory=MiningConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    n_runs: int = 3
    workers: int = 2
    judges: tuple[str, ...] = JUDGE_VARIANTS
    ensemble_rule: str = "consensus_drop"
    max_steps: int = 15

    def __post_init__(self):
        for name in ("n_runs", "workers", "max_steps"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if self.ensemble_rule not in ENSEMBLE_RULES:
            raise ValueError(f"ensemble_rule must be one of {ENSEMBLE_RULES}, got {self.ensemble_rule!r}")
        for j in self.judges:
            if j not in JUDGE_VARIANTS:
                raise ValueError(f"judges must be variants from {JUDGE_VARIANTS}, got {j!r}")


def scale_config(scale: str) -> PipelineConfig:
    """The pipeline configuration of a scale preset (``smoke``, ``book``, ``gpu``)."""
    p: SwePreset = PRESETS[scale] if scale in PRESETS else None  # type: ignore[assignment]
    if p is None:
        raise ValueError(f"scale must be one of {sorted(PRESETS)}, got {scale!r}")
    return config_from_preset(p)


def config_from_preset(p: SwePreset) -> PipelineConfig:
    corpus = CorpusConfig(languages=p.languages, repos_per_language=dict(p.repos), prs_per_repo=p.prs,
                          quirk_rate=p.quirk_rate, seed=p.seed, filtered_repos=p.filtered_repos)
    return PipelineConfig(corpus, MiningConfig(), SandboxConfig(timeout_s=p.timeout_s), n_runs=p.n_runs,
                          workers=p.workers)


@dataclass
class RepoOutcome:
    repo: str
    language: str
    commit: str
    interactive: SetupResult
    one_shot: SetupResult
    validations: dict[str, ValidationResult]
    scores: dict[str, list[int]]
    seconds: float


@dataclass
class PipelineResult:
    corpus: Corpus
    candidates: list[Candidate]
    funnel: Funnel
    outcomes: dict[str, RepoOutcome]
    tasks: list[Task]
    sandbox: Sandbox
    config: PipelineConfig

    @property
    def rows(self) -> list[dict]:
        return [t.row() for t in self.tasks]

    def candidate(self, instance_id: str) -> Candidate:
        return next(c for c in self.candidates if c.instance_id == instance_id)

    def validation(self, instance_id: str) -> ValidationResult | None:
        for o in self.outcomes.values():
            if instance_id in o.validations:
                return o.validations[instance_id]
        return None

    def truth(self, c) -> object:
        return self.corpus.truth[(c.repo, c.pr_number if hasattr(c, "pr_number") else int(c.instance_id.rsplit("-", 1)[1]))]


def _agent(kind, language):
    return kind(language)


def _process_repo(info, cands: list[Candidate], cfg: PipelineConfig, sandbox: Sandbox,
                  setup_agent) -> RepoOutcome:
    t0 = time.perf_counter()
    prs = merged_prs(info.path)
    commit = cands[-1].merge_commit if cands else prs[-1].merge_commit
    results = {}
    for name, kind in (("interactive", setup_agent or RuleBasedSetupAgent), ("one_shot", OneShotSetupAgent)):
        d = sandbox.checkout(info.path, commit)
        results[name] = run_setup(_agent(kind, info.language), d, sandbox, cfg.max_steps)
    validations, scores = {}, {}
    conf = results["interactive"].config

    def gate(task, first) -> bool:
        s = judge_scores([task], cfg.judges)            # [J, 1]
        scores[task.instance_id] = [int(x) for x in s[:, 0]]
        return not bool(ensemble_decision(s, cfg.ensemble_rule)[0])

    if conf is not None:
        for c in cands:
            validations[c.instance_id] = validate_task(c, conf, sandbox, cfg.n_runs, gate=gate)
    return RepoOutcome(info.name, info.language, commit, results["interactive"], results["one_shot"],
                       validations, scores, time.perf_counter() - t0)


def run_pipeline(root: str | Path, cfg: PipelineConfig, setup_agent=None, progress: bool = True,
                 languages: tuple[str, ...] | None = None) -> PipelineResult:
    """Run every stage for real (see module docstring). ``root`` receives corpus and sandbox.

    ``languages`` restricts the execution stages to the repositories of those languages (the
    corpus is still generated whole, so their rows are the same as in a full run).
    """
    if not isinstance(cfg, PipelineConfig):
        raise TypeError(f"cfg must be a PipelineConfig, got {type(cfg).__name__}")
    root = Path(root)
    corpus = generate_corpus(root / "corpus", cfg.corpus, overwrite=True, skip_missing=True)
    if languages is not None:
        corpus.repos = [r for r in corpus.repos if r.language in languages]
    cands, funnel = mine(corpus, cfg.mining)
    sandbox = Sandbox(cfg.sandbox, root=root / "sandbox")
    by_repo = {r.name: [c for c in cands if c.repo == r.name] for r in corpus.repos}
    outcomes: dict[str, RepoOutcome] = {}
    with ThreadPoolExecutor(max_workers=cfg.workers) as pool:
        futs = {r.name: pool.submit(_process_repo, r, by_repo[r.name], cfg, sandbox, setup_agent)
                for r in corpus.repos}
        for name in tqdm(sorted(futs), desc="repositories", leave=False, disable=not progress):
            outcomes[name] = futs[name].result()
    stage = list(cands)

    def keep(name: str, reason_of) -> None:
        nonlocal stage
        kept = []
        for c in stage:
            why = reason_of(c)
            if why is None:
                kept.append(c)
            else:
                funnel.reject(c.key, name, why)
        stage = kept
        funnel.add(name, stage)

    val = {iid: v for o in outcomes.values() for iid, v in o.validations.items()}
    keep("setup ok", lambda c: None if outcomes[c.repo].interactive.success else "setup_failed")
    keep("F2P found", lambda c: None if val[c.instance_id].reason not in ("patch_failed", "no_f2p")
         else val[c.instance_id].reason)
    keep("clarity filter", lambda c: "underspecified" if val[c.instance_id].reason == "gated" else None)
    keep(f"stable over {cfg.n_runs} runs", lambda c: "unstable" if val[c.instance_id].reason == "unstable" else None)
    labeler = RuleBasedMetaLabeler()
    tasks = []
    for c in sorted(stage, key=lambda c: c.instance_id):
        v = val[c.instance_id]
        conf = outcomes[c.repo].interactive.config
        t = Task(c.instance_id, c.repo, c.language, c.base_commit, c.patch, c.test_patch, c.problem_statement,
                 v.f2p, v.p2p, conf, repo_path=c.repo_path, P2F=v.classes[0]["P2F"])
        sc = outcomes[c.repo].scores[c.instance_id]
        t.interface = extract_interfaces(c.patch, c.test_patch, c.language)
        flags = labeler.detect(t, judge_mean=float(np.mean(sc)))
        t.meta = {"code": flags["code"], "flags": [k for k in flags if k != "code" and flags[k]],
                  "judge_scores": sc}
        tasks.append(t)
    return PipelineResult(corpus, cands, funnel, outcomes, tasks, sandbox, cfg)


def to_jsonl(rows: list[dict], path: str | Path) -> None:
    """Write dataset rows as JSON lines (sorted keys: byte-identical across reruns)."""
    with open(path, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r, sort_keys=True) + "\n")


# ---------------------------------------------------------------------------------------------
# tables the notebooks show
# ---------------------------------------------------------------------------------------------
def funnel_checks(res: PipelineResult) -> dict[str, bool]:
    """Is every ground-truth family rejected where it should be (and nothing else)?"""
    expected = {Family.NO_TESTS: ("touches tests", "no_tests"), Family.NO_ISSUE: ("linked issue", "no_issue"),
                Family.ALREADY_PASSING: ("F2P found", "no_f2p"), Family.FLAKY: ("stable over", "unstable")}
    lic = {r.name for r in res.corpus.repos if r.license not in res.config.mining.licence_allow}
    out = {}
    for fam, (stage, reason) in expected.items():
        keys = [f"{k[0]}#{k[1]}" for k, t in res.corpus.truth.items() if t.family is fam]
        keys = [k for k in keys if res.funnel.rejected.get(k, ("", ""))[1] not in ("licence", "below_threshold",
                                                                                    "setup_failed")]
        out[fam.value] = all(res.funnel.rejected.get(k, ("", ""))[0].startswith(stage) and
                             res.funnel.rejected[k][1] == reason for k in keys)
    unstable = [k for k, (s, r) in res.funnel.rejected.items() if r == "unstable"]
    out["only flaky unstable"] = all(res.corpus.truth[(k.split("#")[0], int(k.split("#")[1]))].family is Family.FLAKY
                                     for k in unstable)
    out["licence at its stage"] = all(res.funnel.rejected.get(f"{k[0]}#{k[1]}", ("", ""))[1] in ("licence", "no_tests", "no_issue")
                                      for k in res.corpus.truth if k[0] in lic)
    return out


def setup_table(res: PipelineResult) -> pd.DataFrame:
    rows = []
    for name, o in sorted(res.outcomes.items()):
        info = res.corpus.repo(name)
        rows.append({"repo": name, "language": o.language, "quirks": ",".join(info.quirks) or "-",
                     "interactive": o.interactive.success, "turns": o.interactive.steps,
                     "one_shot": o.one_shot.success})
    return pd.DataFrame(rows)


def judge_table(res: PipelineResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per judge and per ensemble rule: precision/recall/F1 against the generator's labels
    (positive = underspecified, clarity >= 2) on every mined issue; plus the per-task scores."""
    cands = [c for c in res.candidates]
    truth = np.array([(res.corpus.truth[(c.repo, c.pr_number)].clarity or 0) >= 2 for c in cands])
    scores = judge_scores(cands)                            # [J, N]
    rows = []
    for j, name in enumerate(JUDGE_VARIANTS):
        rows.append({"rule": name, "kind": "single", **binary_metrics(scores[j] >= 2, truth)})
    for rule in ENSEMBLE_RULES:
        rows.append({"rule": rule, "kind": "ensemble", **binary_metrics(ensemble_decision(scores, rule), truth)})
    per = pd.DataFrame({"instance_id": [c.instance_id for c in cands],
                        "family": [res.corpus.truth[(c.repo, c.pr_number)].family.value for c in cands],
                        "verbose": [res.corpus.truth[(c.repo, c.pr_number)].verbose for c in cands],
                        "truth": truth, **{v: scores[j] for j, v in enumerate(JUDGE_VARIANTS)}})
    return pd.DataFrame(rows), per


def confounder_table(res: PipelineResult) -> pd.DataFrame:
    rows = []
    for t in res.tasks:
        gt = res.corpus.truth[(t.repo, int(t.instance_id.rsplit("-", 1)[1]))]
        rows.append({"instance_id": t.instance_id, "language": t.language, "family": gt.family.value,
                     "truth": gt.confounder, "label": t.meta["code"], "flags": ",".join(t.meta["flags"]),
                     "n_interfaces": len(t.interface)})
    return pd.DataFrame(rows)


def diagnostic_study(res: PipelineResult, attempts: int = 3, seed: int = 0, progress: bool = True) -> dict:
    """Gold/empty harness checks and the stand-in solvers' pass@k per ground-truth label."""
    cache: dict = {}
    tasks = res.tasks
    solvers = {"gold": GoldSolver(), "empty": EmptySolver(),
               "issue_only": IssueOnlySolver(False, 0.1, seed), "issue_only+interfaces": IssueOnlySolver(True, 0.1, seed)}
    flags = {}
    for name, s in tqdm(solvers.items(), desc="solvers", leave=False, disable=not progress):
        n = 1 if name in ("gold", "empty") else attempts
        flags[name] = run_solver(s, tasks, res.sandbox, n, cache)
    truth = [res.corpus.truth[(t.repo, int(t.instance_id.rsplit("-", 1)[1]))].confounder for t in tasks]
    rows = []
    for name in ("issue_only", "issue_only+interfaces"):
        f = flags[name]
        for label in sorted(set(truth)):
            idx = [i for i, x in enumerate(truth) if x == label]
            for k in range(1, attempts + 1):
                pk = float(np.mean([pass_at_k(attempts, int(f[i].sum()), k) for i in idx]))
                rows.append({"solver": name, "label": label, "k": k, "pass@k": pk, "n_tasks": len(idx)})
    return {"flags": flags, "truth": truth, "table": pd.DataFrame(rows), "evaluations": len(cache)}


def pr_derived(res: PipelineResult) -> pd.DataFrame:
    """Statements written from PR descriptions (stand-in writer) and their leakage."""
    writer = RuleBasedStatementWriter()
    rows = []
    for info in res.corpus.repos:
        pulls = res.corpus.tracker["repos"][info.name]["pulls"]
        for pr in merged_prs(info.path):
            patch, _ = split_patch(diff_commits(info.path, pr.base_commit, pr.merge_commit), info.language)
            desc = pulls[str(pr.pr_number)]["description"]
            stmt = writer.write(desc)
            rows.append({"repo": info.name, "pr": pr.pr_number, "statement": stmt,
                         "leakage": leakage(stmt, patch) if patch else "none"})
    return pd.DataFrame(rows)


def workdir(kind: str = "nb") -> Path:
    """A temporary work directory (outside the repository) removed when the kernel exits, and
    swept by the next run if the kernel was killed (see :func:`.sandbox.owned_tempdir`)."""
    import atexit
    import shutil

    d = owned_tempdir(kind)
    atexit.register(shutil.rmtree, d, True)
    return d


# -- the corpus of real test logs (data/swe-rebench/logs) ------------------------------------
LOGS_DIR = Path(__file__).resolve().parents[3] / "data" / "swe-rebench" / "logs"


def log_corpus(root: str | Path | None = None) -> dict[str, dict]:
    """The manifest of the real-log corpus: per log its framework, parser, command, tool version,
    expected statuses, and the log text (key ``text``)."""
    root = Path(root) if root is not None else LOGS_DIR
    manifest = root / "manifest.json"
    if not manifest.is_file():
        raise ValueError(f"root must hold manifest.json (run data/swe-rebench/make_logs.py), got {root}")
    cases = json.loads(manifest.read_text())
    for case in cases.values():
        case["text"] = (root / case["log"]).read_text()
    return cases


def parser_coverage(root: str | Path | None = None) -> pd.DataFrame:
    """One row per real log: framework, log, parser, the runner's own count of the tests the log
    names (summary line), tests parsed, and how many of the expected tests got the right status."""
    rows = []
    for name, case in log_corpus(root).items():
        got = get_parser(case["parser"])(case["text"])
        chk = cross_check(case["parser"], case["text"], got)
        exp = case["expected"]
        rows.append({"framework": case["framework"], "log": name, "parser": case["parser"],
                     "tool": case["tool_version"], "in summary": chk.summary, "parsed": chk.parsed,
                     "expected": len(exp), "right status": sum(got.get(k) == v for k, v in exp.items()),
                     "spurious": len(set(got) - set(exp))})
    return pd.DataFrame(rows)


def skip_guarded_case(root: str | Path | None = None) -> dict:
    """The skip-guarded test (``skipUnless(hasattr(mod, "new_fn"))``) before and after the fix,
    parsed from the real unittest logs, and its transition classes."""
    cases = log_corpus(root)
    before = get_parser("unittest")(cases["unittest_skipguard_before"]["text"])
    after = get_parser("unittest")(cases["unittest_skipguard_after"]["text"])
    return {"before": before, "after": after, "classes": classify_transitions(None, before, after)}


def validation_times(res: PipelineResult) -> pd.DataFrame:
    """Wall seconds of each validated task (all runs and states), by language."""
    rows = [{"instance_id": iid, "language": o.language, "seconds": v.seconds, "runs": len(v.runs)}
            for o in res.outcomes.values() for iid, v in o.validations.items()]
    return pd.DataFrame(rows)


def transition_cases(res: PipelineResult) -> list[tuple[str, dict]]:
    """Run-1 status maps of three instructive tasks: a plain fix, a compiled-language task whose
    test state reports fewer tests than its base state (the three-state case), and a flaky one."""
    picks = []
    vals = {iid: v for o in res.outcomes.values() for iid, v in o.validations.items() if v.runs}
    fam = {iid: res.corpus.truth[(res.candidate(iid).repo, res.candidate(iid).pr_number)].family for iid in vals}
    plain = [i for i in sorted(vals) if fam[i] is Family.FIX_CLEAR and vals[i].valid]
    compiled = [i for i in sorted(vals) if "base" in vals[i].runs[0]
                and len(vals[i].runs[0]["test"]) < len(vals[i].runs[0]["base"])]
    flaky = [i for i in sorted(vals) if fam[i] is Family.FLAKY]
    for title, ids in (("plain fix", plain), ("compiled, test state broken", compiled), ("flaky", flaky)):
        if ids:
            v = vals[ids[0]]
            r = next((i for i, c in enumerate(v.classes) if c != v.classes[0]), 0)  # first run that differs
            picks.append((f"{title} (run {r + 1})\n{ids[0].replace('corpus__', '')}", v.runs[r]))
    return picks


def flaky_schedule(period: int, n_runs: int = 3) -> list[dict[str, str]]:
    """Statuses of a test that fails on every ``period``-th execution, when each validation run
    executes it twice (test state, then fix state), as the counter file makes it do."""
    if not isinstance(period, int) or period < 2:
        raise ValueError(f"period must be an int >= 2, got {period!r}")
    if not isinstance(n_runs, int) or n_runs < 1:
        raise ValueError(f"n_runs must be a positive int, got {n_runs!r}")
    out, count = [], 0
    for _ in range(n_runs):
        run = {}
        for state in ("test", "fix"):
            count += 1
            run[state] = "FAILED" if count % period == 0 else "PASSED"
        out.append(run)
    return out


def one_row(res: PipelineResult, instance_id: str | None = None, width: int = 70) -> dict:
    """A dataset row with long text fields shortened for display."""
    row = next(r for r in res.rows if instance_id in (None, r["instance_id"]))
    short = {}
    for k, v in row.items():
        if isinstance(v, str) and len(v) > width:
            v = v[:width].replace("\n", "\\n") + f"... ({len(v)} chars)"
        short[k] = v
    return short
