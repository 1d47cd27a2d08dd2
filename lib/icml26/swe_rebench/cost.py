"""The cost model of the swe-rebench notebooks (:mod:`icml26.book.budget`): declared, not measured.

This chapter runs no tensor work at all. Its time is the pipeline of :func:`~icml26.swe_rebench.experiments.run_pipeline`:
git, package managers, compilers and test runners started as subprocesses by a pool of ``workers`` threads (corpus
generation, environment set-up, three validation states x ``n_runs`` runs per pull request). The budget's counting
modes see only torch operators, and its host items are timed in the calling thread's CPU seconds, which leave out
child processes and the pool's threads: a measured item would project a few seconds for minutes of work. So both
notebooks declare no items (their projection is the fixed ``NOTEBOOK_S``), as special/03 does; modelling them needs
a wall-clock (or ``RUSAGE_CHILDREN``) host item in :mod:`icml26.book.budget`.

An estimate from the book times instead (``data/timings.json``, 2 cores, ``workers=2``): notebook 1 runs one pipeline
(44.6 s at book), notebook 2 two (the full run and the re-run of ``rerun_languages``; 76.5 s). The gpu preset has
44 repositories of 6-8 pull requests (book: 9 of 4-5), about 7.6 times the book's validations, over 8 workers on the
16 cores of the gpu machine (4 times the book's parallelism): about 1.9 times the book's pipeline time, near 76 s
for notebook 1 and 179 s for notebook 2 (its re-run covers all five languages at gpu, the book's two of four), before
the Go repositories, which the book does not run. :func:`estimate` returns these numbers from a preset."""

from __future__ import annotations

from icml26.book.budget import gpu_preset

from . import presets

BOOK_S = {"01-from-prs-to-tasks": 44.6, "02-judges-metadata-rl": 76.5}   # data/timings.json, book, 2026-12-01
_FIXED_S = 10.0      # kernel start, imports, figures and ledger (budget.NOTEBOOK_S)
_BOOK_CORES = 2


def _work(p) -> float:
    """Pull requests validated: repositories x mean pull requests per repository."""
    return sum(n for _, n in p.repos) * (p.prs[0] + p.prs[1]) / 2


def estimate(scale: str, cores: int = 16) -> dict[str, float]:
    """Seconds per notebook at ``scale`` scaled from the book times: pipeline work x (book parallelism / parallelism
    at ``scale``), parallelism = min(workers, cores). An estimate for the reader of the budget, not a measurement."""
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be a positive int, got {cores!r}")
    book, p = gpu_preset(presets, "book"), gpu_preset(presets, scale)
    par_book, par = min(book.workers, _BOOK_CORES), min(p.workers, cores)
    ratio = _work(p) / _work(book) * par_book / par
    f_book, f = (len(q.rerun_languages) / len(q.languages) for q in (book, p))   # share of languages re-run
    pipe1 = (BOOK_S["01-from-prs-to-tasks"] - _FIXED_S) * ratio
    pipe2 = (BOOK_S["02-judges-metadata-rl"] - _FIXED_S) * ratio * (1 + f) / (1 + f_book)
    return {"01-from-prs-to-tasks": _FIXED_S + pipe1, "02-judges-metadata-rl": _FIXED_S + pipe2}


def notebooks(scale: str) -> dict:
    gpu_preset(presets, scale)   # refuses an unknown scale
    return {"01-from-prs-to-tasks": [], "02-judges-metadata-rl": []}
