"""GPU plumbing: the guard of ``make gpu`` and the device check of ``make gpu-check``.

``python -m icml26.book.gpu guard``
    Exit 0 when torch is a CUDA build and sees a device; otherwise say why in a few lines
    (with the command that installs a CUDA build of the pinned torch into this venv) and exit 1.
    ``make gpu`` and ``make gpu-check`` run it first, so the gpu scale never starts on a CPU,
    and a CPU-torch venv built by ``make test`` is not reused silently.

``python -m icml26.book.gpu budget [--scale gpu] [--chapter SLUG ...] [--limit 300]``
    Project every notebook's time at a scale from each chapter's ``cost.py`` on the CPU, without a GPU
    (:mod:`icml26.book.budget`); exit 1 when a notebook is projected over the limit on one H100. Part of
    ``make test`` and ``make gpu-check``.

``python -m icml26.book.gpu check [--chapter SLUG ...] [--device cuda] [--repeat 3] [--budget 480]``
    Time each chapter's headline kernel at the gpu preset's sizes and print a table of seconds
    and peak memory, failing when a kernel fails or the total exceeds the budget.

**The ``gpu_check`` protocol.** A chapter module (``icml26.<module>``, its ``__init__``) may expose::

    def gpu_check(dev: torch.device) -> Callable[[], object] | dict[str, Callable[[], object]]:
        '''Build the headline kernel at the gpu preset's sizes on ``dev`` (inputs, model, seeded)
        and return a zero-argument callable that runs it once, or several by name.'''

Setting up (data, model, a short warm start) happens in ``gpu_check`` itself and is not timed;
each returned callable is timed with :func:`icml26.core.time_fn` (one warm-up, the median of
``--repeat`` runs, device synchronised) and its peak CUDA memory read around its runs. Keep the
whole check of a chapter well under a minute on one GPU (all chapters share an 8-minute budget):
one training step or one forward/backward pass at full size, not a training run.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch

import icml26

from ..core import PeakMemory, time_fn

_NOT_CHAPTERS = {"core", "book"}
EXTRA_MODULES = ("icml26.book.intro",)  # the front matter's measurement


def guard_message() -> str:
    """'' when CUDA is usable, else what is wrong and how to fix it."""
    version = torch.__version__
    if torch.version.cuda is None:
        base = version.split("+")[0]
        return (f"this environment's torch {version} is a CPU build, so the gpu scale would run on the CPU "
                "for hours (a venv built by `make test` on a CPU machine holds the CPU wheel).\n"
                "Install a CUDA build of the same version into it, choosing the CUDA version your driver "
                "supports (`nvidia-smi` shows it; https://pytorch.org/get-started/locally/ lists the wheels):\n"
                f"  {sys.executable} -m pip install --force-reinstall 'torch=={base}' "
                "--index-url https://download.pytorch.org/whl/cu<XYZ>   # for example cu126\n"
                "then run the command again.")
    if not torch.cuda.is_available():
        return (f"torch {version} is a CUDA {torch.version.cuda} build but sees no CUDA device "
                "(is a GPU visible to this machine? `nvidia-smi`; is CUDA_VISIBLE_DEVICES empty?)")
    return ""


def guard() -> int:
    message = guard_message()
    if message:
        print(f"icml26 gpu: refusing to start: {message}", file=sys.stderr)
        return 1
    print(f"icml26 gpu: torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name(0)}")
    return 0


# -- gpu-check -------------------------------------------------------------------------------------
def chapter_modules() -> list[str]:
    """Every chapter package of ``icml26`` (the core and the runner aside), then the front matter's."""
    found = sorted(m.name for m in pkgutil.iter_modules(icml26.__path__) if m.ispkg and m.name not in _NOT_CHAPTERS)
    return [f"icml26.{name}" for name in found] + list(EXTRA_MODULES)


@dataclass
class Row:
    module: str
    kernel: str
    seconds: float = float("nan")
    peak_mib: float = float("nan")
    error: str = ""


def _kernels(made) -> dict[str, Callable[[], object]]:
    if callable(made):
        return {"headline": made}
    if isinstance(made, dict) and made and all(callable(f) for f in made.values()):
        return {str(k): f for k, f in made.items()}
    raise TypeError(f"gpu_check must return a callable or a dict of callables, got {type(made).__name__}")


def check(modules: list[str] | None = None, dev: torch.device | str = "cuda", *, repeat: int = 3,
          echo=print) -> list[Row]:
    """Run every ``gpu_check`` found in ``modules`` (default: :func:`chapter_modules`) on ``dev``."""
    dev = torch.device(dev)
    rows: list[Row] = []
    for name in modules or chapter_modules():
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            rows.append(Row(name, "-", error=f"import failed: {type(exc).__name__}: {exc}"))
            continue
        setup = getattr(module, "gpu_check", None)
        if setup is None:
            rows.append(Row(name, "-", error="no gpu_check()"))
            continue
        try:
            kernels = _kernels(setup(dev))
        except Exception as exc:
            rows.append(Row(name, "setup", error=f"{type(exc).__name__}: {exc}"))
            echo(traceback.format_exc())
            continue
        for kernel, fn in kernels.items():
            row = Row(name, kernel)
            try:
                if dev.type == "cuda":
                    torch.cuda.synchronize(dev)
                    torch.cuda.reset_peak_memory_stats(dev)
                with PeakMemory() as peak:
                    row.seconds = time_fn(fn, warmup=1, repeat=repeat, device=dev)
                row.peak_mib = peak.cuda_mib if dev.type == "cuda" else peak.cpu_mib
            except Exception as exc:
                row.error = f"{type(exc).__name__}: {exc}"
                echo(traceback.format_exc())
            rows.append(row)
            echo(f"  {name} {kernel}: " + (row.error or f"{row.seconds:.4f} s"))
        del kernels
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def table(rows: list[Row], dev: torch.device | str = "cuda") -> str:
    """The check's table: module, kernel, median seconds, peak memory (CUDA on a GPU, process RSS on CPU)."""
    memory = "peak CUDA MiB" if torch.device(dev).type == "cuda" else "peak RSS MiB"
    width = max([24] + [len(r.module) for r in rows])
    kwidth = max([12] + [len(r.kernel) for r in rows])
    header = f"{'module':{width}s} {'kernel':{kwidth}s} {'seconds':>9s} {memory:>14s}  status"
    lines = [header, "-" * len(header)]
    for r in rows:
        status = r.error or "ok"
        lines.append(f"{r.module:{width}s} {r.kernel:{kwidth}s} {r.seconds:9.4f} {r.peak_mib:14.1f}  {status}")
    return "\n".join(lines)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icml26.book.gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("guard", help="exit 1 (saying why) unless torch is a CUDA build that sees a device")
    cmd = sub.add_parser("check", help="time each chapter's headline kernel at gpu sizes")
    cmd.add_argument("--chapter", action="append", help="a module name such as bandpo; repeatable")
    cmd.add_argument("--device", default="cuda", help="cuda (default); cpu only to try the plumbing")
    cmd.add_argument("--repeat", type=int, default=3)
    cmd.add_argument("--budget", type=float, default=480.0, help="seconds for the whole check")
    bud = sub.add_parser("budget", help="project each notebook's seconds at a scale on the CPU (no GPU needed)")
    bud.add_argument("--scale", default="gpu", choices=("smoke", "book", "gpu"))
    bud.add_argument("--chapter", action="append", help="a chapter slug or module name; repeatable")
    bud.add_argument("--limit", type=float, default=300.0, help="seconds per notebook (default 300)")
    bud.add_argument("--refresh", action="store_true", help="measure every step and rewrite the stored counts")
    bud.add_argument("--no-store", action="store_true", help="measure every step, read and write no stored counts")
    args = parser.parse_args(argv)
    if args.command == "guard":
        return guard()
    if args.command == "budget":
        from .budget import run as run_budget
        return run_budget(args.scale, [c.replace("_", "-") for c in args.chapter or []] or None, args.limit,
                          refresh=args.refresh, store=not args.no_store)
    if torch.device(args.device).type == "cuda" and guard() != 0:
        return 1
    modules = [m if m.startswith("icml26.") else f"icml26.{m.replace('-', '_')}" for m in args.chapter or []]
    start = time.perf_counter()
    rows = check(modules or None, args.device, repeat=max(1, args.repeat))
    total = time.perf_counter() - start
    print(table(rows, args.device))
    failed = [r for r in rows if r.error and r.error != "no gpu_check()"]
    print(f"{len(rows)} kernel(s), {len(failed)} failed, {total:.1f} s in all (budget {args.budget:.0f} s)")
    if total > args.budget:
        print(f"icml26 gpu: the check took {total:.0f} s, over its budget of {args.budget:.0f} s", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main())
