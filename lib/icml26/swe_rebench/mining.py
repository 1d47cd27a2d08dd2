"""Stage 1: preliminary mining of merged pull requests into task candidates.

SWE-rebench V2, Sec. 3.1 and the funnel of Sec. 3.7: keep PRs that add or modify tests, that
are linked to an issue they resolve (``fixes|closes|resolves #N``), from repositories with a
permissive licence and enough stars and closed issues (high-resource languages Python, Java,
Go: >= 25 stars and >= 15 closed issues; long-tail languages: >= 10 and >= 1). Each surviving
PR's diff is split into the solution ``patch`` and the ``test_patch``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .corpus import Corpus
from .gitops import diff_commits, merged_prs, split_patch

ISSUE_LINK = re.compile(r"\b(?:fix(?:es|ed)?|close[sd]?|resolve[sd]?) #(\d+)", re.I)


@dataclass
class MiningConfig:
    licence_allow: tuple[str, ...] = ("MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC")
    high_tier: tuple[str, ...] = ("python", "java", "go")
    high: tuple[int, int] = (25, 15)   # (stars, closed issues) for high-resource languages
    low: tuple[int, int] = (10, 1)     # for long-tail languages

    def __post_init__(self):
        for name in ("high", "low"):
            v = getattr(self, name)
            if len(v) != 2 or any(not isinstance(x, int) or x < 0 for x in v):
                raise ValueError(f"{name} must be (stars, closed_issues) with ints >= 0, got {v!r}")


@dataclass
class Funnel:
    """Survivors per stage ``(stage, n_prs, n_repos)`` and why items were dropped.

    ``rejected`` maps ``"repo#pr"`` to ``(stage, reason)``; ``reasons`` counts ``stage:reason``.
    """

    stages: list[tuple[str, int, int]] = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)
    rejected: dict[str, tuple[str, str]] = field(default_factory=dict)

    def add(self, stage: str, items: list) -> None:
        self.stages.append((stage, len(items), len({i.repo for i in items})))

    def reject(self, key: str, stage: str, reason: str) -> None:
        self.rejected[key] = (stage, reason)
        self.reasons[f"{stage}:{reason}"] += 1

    def monotone(self) -> bool:
        prs = [s[1] for s in self.stages]
        repos = [s[2] for s in self.stages]
        return all(a >= b for a, b in zip(prs, prs[1:])) and all(a >= b for a, b in zip(repos, repos[1:]))

    def table(self):
        import pandas as pd

        return pd.DataFrame(self.stages, columns=["stage", "PRs", "repositories"])


@dataclass
class Candidate:
    """A task candidate: one merged PR, linked issue and split patches."""

    instance_id: str
    repo: str
    language: str
    pr_number: int
    issue_number: int | None
    base_commit: str
    merge_commit: str
    patch: str
    test_patch: str
    problem_statement: str
    pr_description: str
    repo_path: Path = field(repr=False, default=Path("."))

    @property
    def key(self) -> str:
        return f"{self.repo}#{self.pr_number}"


def mine(corpus: Corpus, cfg: MiningConfig | None = None) -> tuple[list[Candidate], Funnel]:
    """Read every repository's merged PRs and the tracker; apply the Sec. 3.1 filters in order."""
    cfg = cfg or MiningConfig()
    if not isinstance(cfg, MiningConfig):
        raise TypeError(f"cfg must be a MiningConfig, got {type(cfg).__name__}")
    funnel = Funnel()
    items: list[Candidate] = []
    for info in corpus.repos:
        meta = corpus.tracker["repos"][info.name]
        for pr in merged_prs(info.path):
            diff = diff_commits(info.path, pr.base_commit, pr.merge_commit)
            patch, test_patch = split_patch(diff, info.language)
            m = ISSUE_LINK.search(pr.message)
            issue_no = int(m.group(1)) if m else None
            issue = meta["issues"].get(str(issue_no)) if issue_no is not None else None
            statement = f"{issue['title']}\n\n{issue['body']}" if issue else ""
            desc = meta["pulls"].get(str(pr.pr_number), {}).get("description", "")
            items.append(Candidate(f"corpus__{info.name}-{pr.pr_number}", info.name, info.language,
                                   pr.pr_number, issue_no if issue else None, pr.base_commit,
                                   pr.merge_commit, patch, test_patch, statement, desc, info.path))
    funnel.add("merged PRs", items)

    def keep(stage: str, reason: str, ok) -> None:
        nonlocal items
        kept = []
        for c in items:
            if ok(c):
                kept.append(c)
            else:
                funnel.reject(c.key, stage, reason)
        items = kept
        funnel.add(stage, items)

    meta = corpus.tracker["repos"]
    keep("touches tests", "no_tests", lambda c: bool(c.test_patch) and bool(c.patch))
    keep("linked issue", "no_issue", lambda c: c.issue_number is not None)
    keep("licence", "licence", lambda c: meta[c.repo]["license"] in cfg.licence_allow)

    def popular(c: Candidate) -> bool:
        stars, closed = cfg.high if c.language in cfg.high_tier else cfg.low
        return meta[c.repo]["stars"] >= stars and meta[c.repo]["closed_issues"] >= closed

    keep("repo thresholds", "below_threshold", popular)
    return items, funnel
