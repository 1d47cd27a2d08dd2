"""Scale presets of the SWE-rebench V2 chapter (sizes of the generated corpus and pipeline).

``smoke`` uses only the Python and JavaScript repositories (compiled languages dominate time);
``book`` adds two Rust and two Java repositories; ``gpu`` (no GPU work here: it means "a bigger
machine") grows the corpus and the worker pool.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class SwePreset:
    languages: tuple[str, ...]
    repos: tuple[tuple[str, int], ...]
    prs: tuple[int, int]
    filtered_repos: int
    quirk_rate: float = 0.6
    n_runs: int = 3
    workers: int = 2
    timeout_s: float = 120.0
    attempts: int = 5
    rerun_languages: tuple[str, ...] = ("python", "javascript")
    seed: int = 0

    def dry_run(self) -> SwePreset:
        """A copy that exercises every code path quickly: one repository per language, three
        PRs each, two validation runs (so the stability comparison still runs), the re-run
        of notebook 2 on the first language only. Languages, worker count, timeouts and the
        setup agent's attempts are kept. (This chapter has no GPU kernel: ``gpu`` only means
        a bigger machine.)"""
        return replace(self, repos=tuple((lang, 1) for lang, _ in self.repos), prs=(3, 3),
                       filtered_repos=min(self.filtered_repos, 1), n_runs=min(self.n_runs, 2),
                       rerun_languages=self.rerun_languages[:1])


PRESETS = {
    "smoke": SwePreset(("python", "javascript"), (("python", 1), ("javascript", 1)), (3, 3), 0,
                       rerun_languages=("python",)),
    "book": SwePreset(("python", "javascript", "rust", "java"),
                      (("python", 3), ("javascript", 2), ("rust", 2), ("java", 2)), (4, 5), 2),
    "gpu": SwePreset(("python", "javascript", "rust", "java", "go"),
                     (("python", 10), ("javascript", 10), ("rust", 10), ("java", 10), ("go", 4)), (6, 8), 4,
                     workers=8, rerun_languages=("python", "javascript", "rust", "java", "go")),
}


def preset(scale: str | None = "book") -> SwePreset:
    return preset_for(PRESETS, scale)
