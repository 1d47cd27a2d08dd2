"""``python -m icml26.book``: see :mod:`icml26.book`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from ..core.scale import DRY_ENV, SCALES
from .checks import check_notebook, nbval
from .execute import one_line, run, summary_table
from .site import build
from .sources import BookError, find_root, select, source_problems


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise BookError(message)


def _scale(value: str) -> str:
    if value not in SCALES:
        raise BookError(f"unknown scale {value!r}; choose one of {', '.join(SCALES)}")
    return value


def _positive(value: str) -> int:
    # argparse turns this error into "argument --jobs: expected a positive integer, got '0'"
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def _terminate(signum, frame):  # SIGTERM unwinds like Ctrl-C, so running notebooks are killed
    raise SystemExit(128 + signum)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m icml26.book", description=__doc__)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    for name, help_ in (("run", "execute notebooks with papermill"),
                        ("nbval", "re-run executed notebooks, compare checked outputs"),
                        ("build", "render the book from executed notebooks"),
                        ("all", "run, then build"),
                        ("check", "static checks of the notebook sources")):
        cmd = sub.add_parser(name, help=help_)
        cmd.add_argument("--scale", type=_scale, default=os.environ.get("ICML26_SCALE") or "book")
        cmd.add_argument("--chapter", action="append", help="a chapter slug, or 'front'; repeatable")
        cmd.add_argument("--notebook", action="append", help="path of one notebook source; repeatable")
        cmd.add_argument("--jobs", type=_positive, default=1, help="notebooks executed at once")
        cmd.add_argument("--force", action="store_true", help="execute even when the cache is fresh")
        cmd.add_argument("--cell-timeout", type=_positive, default=None,
                         help="wall seconds per code cell (default: 900 at smoke, 3600 at book and gpu)")
        cmd.add_argument("--timeout", type=_positive, default=None,
                         help="wall seconds per notebook (default: 1800 at smoke, 7200 at book and gpu)")
        cmd.add_argument("--no-strict", action="store_true", help="build: do not turn warnings into errors")
        if name == "run":
            cmd.add_argument("--dry", action="store_true",
                             help=f"with --scale gpu: a dry run ({DRY_ENV}=1: loop counts cut, no claim "
                                  "asserted), executed into _build/executed/gpu-dry")
    student = sub.add_parser("student", help="write the student edition (solutions removed, nbgrader format)")
    student.add_argument("--chapter", action="append", help="a chapter slug; repeatable (default: every chapter)")
    student.add_argument("--out", type=Path, help="output folder (default: _build/student)")
    student.add_argument("--scale", type=_scale, help="SCALE of the parameters cells (default: the sources')")
    check = sub.add_parser("verify", help="run a chapter and compare its claims with the book's published ledger")
    check.add_argument("--chapter", action="append", help="a chapter slug; repeatable (default: every chapter)")
    check.add_argument("--scale", type=_scale, default=os.environ.get("ICML26_SCALE") or "book")
    check.add_argument("--against", metavar="PATH_OR_URL_DIR",
                       help="folder or URL holding <scale>/<chapter>.json (the site's _static/ledger); "
                            "default: the copy shipped with the package")
    check.add_argument("--out", type=Path, help="folder of the reports (default: _build/verify)")
    check.add_argument("--no-run", action="store_true", help="compare the runs already there, execute nothing")
    check.add_argument("--jobs", type=_positive, default=1, help="notebooks executed at once")
    check.add_argument("--force", action="store_true", help="execute even when the cache is fresh")
    imported = sub.add_parser("import-ledger", help="accept a reader's `verify --scale gpu` report as gpu evidence")
    imported.add_argument("report", type=Path, help="the verify-<chapter>-gpu.json a reader attached")
    return parser


# Wall-clock limits. A book notebook is sized to 300 CPU seconds on one thread, but a reader's laptop that
# runs other work, or notebooks in parallel, stretches its wall time several-fold: the book and gpu scales get
# limits that catch a hung kernel, not a slow one.
DEFAULT_TIMEOUTS = {"smoke": (900, 1800), "book": (3600, 7200), "gpu": (3600, 7200)}


def _default_timeouts(args) -> None:
    cell, total = DEFAULT_TIMEOUTS.get(getattr(args, "scale", "smoke"), DEFAULT_TIMEOUTS["smoke"])
    if getattr(args, "cell_timeout", 0) is None:
        args.cell_timeout = cell
    if getattr(args, "timeout", 0) is None:
        args.timeout = total


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            raise BookError("a command is needed: run, nbval, build, all, check, student, verify or import-ledger "
                            "(see --help)")
        _default_timeouts(args)
        if getattr(args, "dry", False):
            if args.scale != "gpu":
                raise BookError(f"--dry needs --scale gpu, got --scale {args.scale}")
            os.environ[DRY_ENV] = "1"
        root = find_root()
        if args.command == "student":
            from .student import write_student

            write_student(root, args.chapter, args.out, scale=args.scale)
            return 0
        if args.command == "verify":
            from .verify import verify

            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, _terminate)
            return verify(root, args.chapter, args.scale, against=args.against, out=args.out,
                          run_first=not args.no_run, jobs=args.jobs, force=args.force)
        if args.command == "import-ledger":
            from .verify import import_ledger

            import_ledger(root, args.report)
            return 0
        # Markdown files of the chosen chapters (all, when none is named) that are not the notebooks
        # they look like: discover() would skip them silently.
        scope = args.chapter if args.chapter or not args.notebook else []
        malformed = source_problems(root, scope) if args.command in ("check", "run", "all") else []
        notebooks = select(root, args.chapter, args.notebook)
        if args.command == "check":
            problems = malformed + [p for nb in notebooks for p in check_notebook(nb)]
            print("\n".join(problems) or f"{len(notebooks)} notebook source(s) pass the checks")
            return 1 if problems else 0
        if args.command in ("run", "all"):
            problems = malformed + [p for nb in notebooks for p in check_notebook(nb)]
            if problems:  # the same checks as `check`, before anything runs
                raise BookError(f"{len(problems)} problem(s) in the sources: {'; '.join(problems)}")
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGTERM, _terminate)
            results = run(root, notebooks, args.scale, jobs=args.jobs, force=args.force,
                          cell_timeout=args.cell_timeout, total_timeout=args.timeout)
            print(summary_table(results))
            failed = [r for r in results if not r.ok]
            if failed:
                for r in failed:
                    print(f"FAILED {r.name} ({r.scale}): {r.error}", file=sys.stderr)
                return 1
        if args.command == "nbval":
            return nbval(root, notebooks, args.scale, jobs=args.jobs)
        if args.command in ("build", "all"):
            build(root, args.scale, strict=not args.no_strict)
        return 0
    except BookError as exc:
        print(f"icml26.book: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a read-only tree: one line, not a traceback
        print(f"icml26.book: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("icml26.book: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
