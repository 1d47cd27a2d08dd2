"""The cost model of the book: how long each notebook would take at a scale, projected on the CPU.

``python -m icml26.book.gpu budget --scale gpu [--chapter SLUG ...] [--limit 300]``
    Build one representative step of every kind of work each notebook runs, execute it once on the
    CPU under counting modes, and project the notebook's time on one H100 from what was counted.
    Prints a table per notebook and exits 1 when a notebook is projected over ``--limit`` seconds.
``python -m icml26.book.gpu budget --scale book``
    The same projection with CPU constants, beside the measured book times of ``data/timings.json``
    (the calibration of the model; see :data:`CALIBRATION`).

**What a chapter declares.** Each chapter package has a ``cost.py`` with::

    def notebooks(scale: str) -> dict[str, list[Item]]

mapping a notebook's file stem (``"02-neural-processes"``) to the work it runs at ``scale``: items of
``Item(name, count, build)``, where ``count`` is how many times the step runs in the notebook (training
steps x models x seeds, iterations, sampling calls) and ``build()`` returns a zero-argument callable that
runs ONE representative step at the preset's sizes on the CPU (or ``per_call`` steps, when a runner's
set-up should be spread over a few steps; the counts are divided by it). A step too costly to run at full size on
the CPU is built at a smaller batch and declares ``flop_scale`` (its FLOPs and bytes are multiplied by it;
its launches and syncs are not, since they do not depend on the batch). Work that stays on the host
whatever the device (SciPy, a Python loop over NumPy scalars) is declared ``host=True`` and projected at
its measured CPU wall time. Presets are read from ``PRESETS[scale]`` directly, never through
``ICML26_SCALE`` or the dry run.

**What is counted** (one call of the step, after ``warmup`` calls that are not counted):

- *launches*: aten operators seen by a ``TorchDispatchMode``, views and metadata-only operators aside.
  On a GPU each is at least one kernel launch (fused kernels can only lower the count the model sees).
- *syncs*: operators that make the host wait for the device: ``_local_scalar_dense`` (``.item()``,
  ``float()``, ``int()``, ``bool()`` of a tensor), ``nonzero``, ``masked_select``, ``unique``,
  indexing with a boolean mask, ``repeat_interleave`` without ``output_size``, and (seen by a
  ``TorchFunctionMode``) ``.tolist()``, ``.numpy()``, ``.cpu()`` and ``.to("cpu")`` (where the calling
  line names ``"cpu"``: a chapter's compute device reads ``cpu`` on this run too, and ``x.to(device)`` is a
  copy to the device on a GPU). Not counted: the
  host-side range check of ``one_hot(x, num_classes)``, which PyTorch makes on the CPU only. Still counted
  although it would not sync on a GPU: a read of a tensor that stays on the host there too (this run
  cannot tell it from a device tensor).
- *FLOPs*: ``torch.utils.flop_counter.FlopCounterMode`` (matmuls, convolutions, attention);
- *bytes*: bytes read and written by the counted operators (inputs plus outputs).

**The projection of one step** (a lower bound, not a prediction)::

    t_step = max(launches * LAUNCH_S + syncs * SYNC_S, flops / FLOPS, bytes / BANDWIDTH)

The Python and NumPy work between operators is not in it (it is not counted, and timing it on a shared
CPU is too noisy and too slow for CI): a Python-heavy loop (bpop's MCMC iteration) runs slower than its
projection. A ``host=True`` item is timed instead (one more call, in thread CPU seconds).

and a notebook's time is ``NOTEBOOK_S + sum(count * t_step)`` over its items. The constants of one H100
(SXM, FP32 without TF32, the default of PyTorch's matmuls) are in :data:`H100`:

- ``LAUNCH_S = 5 us``: the host-side cost of one eager PyTorch operator on CUDA (the dispatcher plus
  ``cudaLaunchKernel``, whose own latency NVIDIA gives as a few microseconds); an eager loop of small
  kernels cannot issue work faster than that, whatever the GPU does.
- ``SYNC_S = 20 us``: one host-device round trip (a ``cudaStreamSynchronize`` plus a small
  device-to-host copy, 10-30 us), after which the queue is empty and launch latency is no longer hidden.
- ``FLOPS = 40e12``: sustained FP32 rate, 60 % of the 67 TFLOP/s FP32 peak of the H100 SXM data sheet.
- ``BANDWIDTH = 2.5e12`` B/s: 75 % of the 3.35 TB/s HBM3 peak of the same data sheet.
- ``NOTEBOOK_S = 10 s``: kernel start, imports, figures and the ledger of one notebook.

:data:`CPU` holds the same constants for one CPU thread (used at ``--scale book`` for the calibration):
``LAUNCH_S = 5 us`` (eager overhead of a small CPU operator), ``SYNC_S = 0``, ``FLOPS = 30e9`` (an AVX2
core in sgemm) and ``BANDWIDTH = 8e9`` B/s (one core's streaming bandwidth).

.. _calibration:

**Stored counts.** Measuring every step at gpu sizes takes minutes on two CPU cores, so the counts of the
last ``budget --refresh`` are kept in ``budget_counts.json`` beside this module, per chapter and scale with a
:func:`fingerprint` of the chapter package's sources; a chapter whose sources changed since is measured
again (a change to the counting in this module needs a ``--refresh``). Run ``python -m icml26.book.gpu budget --scale gpu --refresh`` after changing a
chapter's steps or presets, and commit the file.

**Calibration** (:data:`CALIBRATION`): measured / projected at ``--scale book`` against the book times of
``data/timings.json`` (2 cores, a shared machine): 0.47-0.91 where the modelled training loops are the
notebook's work (right to within a factor of about 2), up to 16 where most of a notebook's time is work the
model leaves out (there it is a lower bound only); median 1.1 over 12 notebooks. No GPU was lent when the constants were set:
the H100 constants are the data sheet's and the launch costs above, not yet checked against a GPU run
(``make gpu-check`` on a GPU is the place to do so).
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import importlib
import json
import linecache
import math
import re
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from ..core.device import one_thread

__all__ = ["CPU", "H100", "Constants", "Count", "Item", "NotebookCost", "count_step", "project", "budget_table",
           "load_timings", "chapter_costs", "calibration", "gpu_preset", "gpu_check_step", "pick", "n_of"]

# Measured seconds of a notebook at book scale (data/timings.json: 2 cores, a shared machine) over the CPU
# projection of the same notebook (`budget --scale book --no-store`, constants CPU), measured 2026-12-06.
# Where the modelled loops are most of the notebook (sfconvcnp, dp-c4) the ratio is 0.47-0.91: the model
# is right to within a factor of about 2 (below 1 because the timings used 2 threads). Where a notebook's
# time is mostly work the model leaves out (causcale/02 loads checkpoints and spends its time on baselines
# and evaluation; bpop/01 on NumPy enumerations and the Python between an MCMC iteration's operators;
# protein-tokens' geometry and probes) the ratio is 2.6-16.5: there the projection is a lower bound only.
CALIBRATION = {
    "sfconvcnp/01-set-fourier-convolution": 0.91, "sfconvcnp/02-neural-processes": 0.47,
    "dp-c4/01-solution-bias": 0.59, "dp-c4/02-equal-privacy": 0.59, "dp-c4/03-accounting": 0.50,
    "bpop/01-frontier-likelihood": 6.50, "bpop/02-baselines-robustness": 1.13,
    "causcale/01-tied-attention-and-cost": 1.11, "causcale/02-learning-structure": 16.46,
    "protein-tokens/01-backbones-and-fsq": 3.11, "protein-tokens/02-global-vs-local-tokens": 2.61,
    "protein-tokens/03-embeddings-and-shrinking": 2.99,
}


@dataclass(frozen=True)
class Constants:
    """Per-launch and per-sync seconds, sustained FLOP/s and bytes/s, and fixed seconds per notebook."""
    name: str
    launch_s: float
    sync_s: float
    flops: float
    bandwidth: float
    notebook_s: float


H100 = Constants("one H100 (SXM, FP32)", launch_s=5e-6, sync_s=20e-6, flops=40e12, bandwidth=2.5e12, notebook_s=10.0)
CPU = Constants("one CPU thread", launch_s=5e-6, sync_s=0.0, flops=30e9, bandwidth=8e9, notebook_s=10.0)


@dataclass(frozen=True)
class Item:
    """``count`` runs of one step that ``build()`` makes (see the module docstring)."""
    name: str
    count: int
    build: Callable[[], Callable[[], object]]
    flop_scale: float = 1.0
    host: bool = False
    warmup: int = 0
    note: str = ""
    key: str = ""           # items of one chapter with the same key share one measurement
    per_call: int = 1       # steps one call of the built callable runs (its counts are divided by it)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        for name, low in (("count", 0), ("warmup", 0), ("per_call", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not callable(self.build):
            raise TypeError(f"build must be callable, got {type(self.build).__name__}")
        if not (isinstance(self.flop_scale, (int, float)) and math.isfinite(self.flop_scale)
                and self.flop_scale > 0):
            raise ValueError(f"flop_scale must be a finite number > 0, got {self.flop_scale!r}")


@dataclass
class Count:
    """What one step did: launches, syncs, FLOPs, bytes, and its CPU wall seconds."""
    launches: int = 0
    syncs: int = 0
    flops: float = 0.0
    bytes: float = 0.0
    wall_s: float = 0.0
    sync_ops: dict = field(default_factory=dict)


_ATEN = torch.ops.aten
# Operators that only make a new view or read metadata: no kernel on a GPU.
_VIEWS = {getattr(_ATEN, n) for n in (
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "as_strided", "detach", "alias",
    "slice", "select", "unsqueeze", "squeeze", "unbind", "split", "split_with_sizes", "chunk", "narrow",
    "view_as_real", "view_as_complex", "_reshape_alias", "lift_fresh", "unfold", "diagonal", "movedim",
    "expand_as", "view_as", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size",
    "_to_copy_view", "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "set_",
    "resize_", "_conj", "conj", "_neg_view", "resolve_conj", "resolve_neg", "_has_compatible_shallow_copy_type",
) if hasattr(_ATEN, n)}
_SYNC_OPS = {getattr(_ATEN, n) for n in ("_local_scalar_dense", "nonzero", "masked_select", "_unique",
                                         "_unique2", "unique_dim", "unique_consecutive", "nonzero_static",
                                         "is_nonzero") if hasattr(_ATEN, n)}
_SYNC_METHODS = {"tolist", "numpy", "cpu"}


def _nbytes(obj) -> int:
    if isinstance(obj, torch.Tensor):
        try:
            return obj.numel() * obj.element_size()
        except Exception:
            return 0
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(o) for o in obj)
    return 0


class _Dispatch(TorchDispatchMode):
    def __init__(self, count: Count):
        super().__init__()
        self.count = count
        self.in_optimizer = False
        self.cuda_checks_skipped = False   # inside a call whose host checks PyTorch skips on CUDA

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        # an optimiser's step counters live on the host on CUDA too: reading them is no device sync
        sync = packet in _SYNC_OPS and not (self.in_optimizer and packet is _ATEN._local_scalar_dense)
        if packet is _ATEN.index and len(args) > 1:
            sync = any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ()))
        elif packet in (_ATEN.index_put, _ATEN.index_put_) and len(args) > 1:
            sync = any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ()))
        elif packet is _ATEN.repeat_interleave and kwargs.get("output_size") is None:
            sync = True
        if sync and not self.cuda_checks_skipped:
            self.count.syncs += 1
            self.count.sync_ops[str(packet)] = self.count.sync_ops.get(str(packet), 0) + 1
        if packet not in _VIEWS and packet is not _ATEN._local_scalar_dense:
            self.count.launches += 1
            self.count.bytes += _nbytes(out) + sum(_nbytes(a) for a in args) + sum(_nbytes(v) for v in kwargs.values())
        return out


class _Function(TorchFunctionMode):
    def __init__(self, count: Count, dispatch: _Dispatch):
        super().__init__()
        self.count = count
        self.dispatch = dispatch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (args and isinstance(args[0], torch.Tensor) and not self.dispatch.in_optimizer
                and (name in _SYNC_METHODS or (name == "to" and _to_host(args[1:], kwargs)))):
            key = "to('cpu')" if name == "to" else name
            self.count.syncs += 1
            self.count.sync_ops[key] = self.count.sync_ops.get(key, 0) + 1
        if name == "one_hot" and _num_classes(args, kwargs) >= 0:
            # ``one_hot(x, n)`` checks the range of ``x`` on the host (a read of min and max) on the CPU only:
            # PyTorch skips that check on CUDA, so it is no sync there
            outer, self.dispatch.cuda_checks_skipped = self.dispatch.cuda_checks_skipped, True
            try:
                return func(*args, **kwargs)
            finally:
                self.dispatch.cuda_checks_skipped = outer
        return func(*args, **kwargs)


def _num_classes(args, kwargs) -> int:
    value = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
    return value if isinstance(value, int) else -1


def _to_host(args, kwargs) -> bool:
    """Whether a ``Tensor.to(*args, **kwargs)`` call copies to the host (which waits for the device on CUDA):
    its target is ``cpu`` *and* the calling line names ``"cpu"`` literally. On this CPU run a chapter's compute
    device reads ``cpu`` too (``x.to(device)``), which on a GPU is a copy to the device, not a sync."""
    target = kwargs.get("device", args[0] if args else None)
    if isinstance(target, torch.device):
        target = str(target)
    if not (isinstance(target, str) and target.split(":")[0] == "cpu"):
        return False
    caller = sys._getframe(2)          # _to_host <- __torch_function__ <- the line that called .to
    line = linecache.getline(caller.f_code.co_filename, caller.f_lineno)
    return bool(_LITERAL_CPU.search(line))


_LITERAL_CPU = re.compile(r"""\.to\(\s*(device\s*=\s*)?(torch\.device\()?["']cpu""")


@contextlib.contextmanager
def _as_on_cuda(dispatch: _Dispatch):
    """Optimisers and gradient clipping take their multi-tensor (``foreach``) paths on the CPU, as they do
    by default on CUDA (one launch per operator over all parameters, not one per parameter), and the
    optimiser's step is flagged so that its host-side step counters are not counted as syncs."""
    import torch.optim.optimizer as optimizer
    import torch.utils._foreach_utils as foreach_utils

    original = foreach_utils._get_foreach_kernels_supported_devices

    def devices():
        return [*original(), "cpu"]

    def pre(*_):
        dispatch.in_optimizer = True

    def post(*_):
        dispatch.in_optimizer = False

    patched = [m for m in (optimizer, foreach_utils) if hasattr(m, "_get_foreach_kernels_supported_devices")]
    for m in patched:
        m._get_foreach_kernels_supported_devices = devices
    handles = [optimizer.register_optimizer_step_pre_hook(pre), optimizer.register_optimizer_step_post_hook(post)]
    try:
        yield
    finally:
        for m in patched:
            m._get_foreach_kernels_supported_devices = original
        for h in handles:
            h.remove()
        dispatch.in_optimizer = False


def count_step(step: Callable[[], object], *, warmup: int = 0, timed: bool = False) -> Count:
    """Run ``step`` ``warmup`` times uncounted, once under the counting modes and, with ``timed``, once
    more without them, timed in this thread's CPU seconds (``wall_s``); return the counts."""
    if not callable(step):
        raise TypeError(f"step must be callable, got {type(step).__name__}")
    count = Count()
    flop_mode = FlopCounterMode(display=False)
    dispatch = _Dispatch(count)
    with _as_on_cuda(dispatch):
        for _ in range(warmup):
            step()
        with _Function(count, dispatch), flop_mode, dispatch:
            step()
        if timed:
            start = time.thread_time()   # timed once more without the counting modes (they slow each op),
            step()                       # in this thread's CPU time (a busy machine inflates wall time)
            count.wall_s = time.thread_time() - start
    count.flops = float(flop_mode.get_total_flops())
    return count


def step_seconds(count: Count, item: Item, const: Constants) -> float:
    """The projected seconds of one step (module docstring); a host item's is its CPU wall time."""
    if item.host:
        return count.wall_s / item.per_call
    launch = count.launches * const.launch_s + count.syncs * const.sync_s
    return max(launch, count.flops * item.flop_scale / const.flops,
               count.bytes * item.flop_scale / const.bandwidth) / item.per_call


@dataclass
class ItemCost:
    item: Item
    count: Count | None
    step_s: float = float("nan")
    total_s: float = float("nan")
    error: str = ""


@dataclass
class NotebookCost:
    chapter: str
    notebook: str
    items: list[ItemCost]
    const: Constants

    @property
    def seconds(self) -> float:
        return self.const.notebook_s + sum(i.total_s for i in self.items if i.count is not None)

    @property
    def failed(self) -> bool:
        return any(i.error for i in self.items)

    @property
    def key(self) -> str:
        return f"{self.chapter}/{self.notebook}"


def project(chapter: str, notebook: str, items: list[Item], const: Constants = H100,
            cache: dict | None = None, stored: dict | None = None) -> NotebookCost:
    """Measure every item of one notebook once (or reuse ``cache[item.key]``, or ``stored`` counts of a
    previous run, keyed ``notebook|name``, which this call also fills) and project it with ``const``."""
    cache = {} if cache is None else cache
    costs = []
    for item in items:
        if item.count == 0:
            costs.append(ItemCost(item, Count(), 0.0, 0.0))
            continue
        try:
            skey = f"{notebook}|{item.name}"
            if item.key and item.key in cache:
                count = cache[item.key]
            elif stored is not None and skey in stored:
                count = Count(**stored[skey])
            else:
                count = count_step(item.build(), warmup=item.warmup, timed=item.host)
                if item.key:
                    cache[item.key] = count
            if stored is not None:
                stored[skey] = {k: v for k, v in vars(count).items()}
            per = step_seconds(count, item, const)
            costs.append(ItemCost(item, count, per, per * item.count))
        except Exception as exc:
            costs.append(ItemCost(item, None, error=f"{type(exc).__name__}: {exc}"))
            traceback.print_exc()
    return NotebookCost(chapter, notebook, costs, const)


def chapter_costs(scale: str, chapters: list[str] | None = None) -> dict[str, dict[str, list[Item]] | str]:
    """``{slug: {notebook: items}}`` from every chapter's ``cost.py``, or an error string for a chapter."""
    from .gpu import chapter_modules

    out: dict[str, dict[str, list[Item]] | str] = {}
    modules = [m for m in chapter_modules() if m.startswith("icml26.") and m.count(".") == 1]
    for module in modules:
        slug = _slug(module.split(".")[1])
        if chapters and slug not in chapters and module.split(".")[1] not in chapters:
            continue
        try:
            cost = importlib.import_module(f"{module}.cost")
        except ModuleNotFoundError as exc:
            if exc.name == f"{module}.cost":
                out[slug] = "no cost.py"
                continue
            out[slug] = f"import failed: {exc}"
            continue
        try:
            out[slug] = cost.notebooks(scale)
        except Exception as exc:
            out[slug] = f"notebooks({scale!r}) failed: {type(exc).__name__}: {exc}"
    return out


def _slug(module: str) -> str:
    root = Path(__file__).resolve().parents[3] / "chapters"
    special = {"precond_delta": "preconditioned-delta"}
    if module in special:
        return special[module]
    dashed = module.replace("_", "-")
    if (root / dashed).is_dir() or not (root / module).is_dir():
        return dashed
    return module


def load_timings(path: str | Path | None = None) -> dict:
    path = Path(path) if path else Path(__file__).resolve().parents[3] / "data" / "timings.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _fmt_s(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def budget_table(costs: list[NotebookCost], limit: float, timings: Mapping | None = None, scale: str = "gpu") -> str:
    """Per notebook: its items (steps, launches and syncs per step, projected seconds), then its total."""
    lines = []
    for nb in costs:
        measured = (timings or {}).get(nb.key, {}).get(scale, {}).get("seconds") if timings else None
        status = "ERROR" if nb.failed else ("OVER" if scale == "gpu" and nb.seconds > limit else "ok")
        extra = f", measured {measured:.0f} s (ratio {measured / nb.seconds:.2f})" if measured else ""
        lines.append(f"{nb.key}: {_fmt_s(nb.seconds)} s projected on {nb.const.name}{extra}  [{status}]")
        for ic in nb.items:
            c = ic.count
            if ic.error:
                lines.append(f"    {ic.item.name:44s} ERROR {ic.error}")
                continue
            host = " host" if ic.item.host else ""
            per = ic.item.per_call
            lines.append(f"    {ic.item.name:44s} {ic.item.count:>9,d} x  launches {c.launches / per:>6.0f}"
                         f"  syncs {c.syncs / per:>5.1f}  GFLOP {c.flops * ic.item.flop_scale / per / 1e9:>9.3f}"
                         f"  {ic.step_s * 1e3:>9.3f} ms{host}"
                         f"  = {_fmt_s(ic.total_s)} s")
    return "\n".join(lines)


def calibration(costs: list[NotebookCost], timings: Mapping, scale: str = "book") -> list[float]:
    """Ratios measured / projected of the notebooks that have both (the model's calibration at ``scale``)."""
    out = []
    for nb in costs:
        rec = timings.get(nb.key, {}).get(scale, {})
        if rec.get("seconds") and not nb.failed and nb.seconds > 0:
            out.append(rec["seconds"] / nb.seconds)
    return out


STORE = Path(__file__).with_name("budget_counts.json")


def _code_of(source: str) -> str:
    """The code of a module without its comments and docstrings (``ast.dump`` of the tree with every docstring
    removed), so that editing prose does not stale the stored counts; a file that does not parse hashes as is."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def fingerprint(module: str, scale: str) -> str:
    """A hash of a chapter package's code (presets and cost.py included; comments and docstrings left out) and the
    scale: stored counts are reused only while it matches. (A change to the counting in this module needs
    ``--refresh``.)"""
    h = hashlib.sha256(scale.encode())
    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / module).rglob("*.py")):
        h.update(path.name.encode())
        h.update(_code_of(path.read_text()).encode())
    return h.hexdigest()[:16]


def _load_store() -> dict:
    try:
        return json.loads(STORE.read_text())
    except (OSError, ValueError):
        return {}


def _save_store(entries: Mapping[str, dict]) -> None:
    """Write ``entries`` into :data:`STORE`, re-reading it under a lock first, so that two ``--refresh`` runs of
    different chapters at once keep each other's entries."""
    with open(STORE.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = _load_store()
        saved.update(entries)
        tmp = STORE.with_suffix(".tmp")
        tmp.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")
        tmp.replace(STORE)


def run(scale: str = "gpu", chapters: list[str] | None = None, limit: float = 300.0, echo=print,
        refresh: bool = False, store: bool = True) -> int:
    """The ``budget`` command: 0 when every notebook projects under ``limit`` (at gpu) and nothing failed.

    Counts are read from :data:`STORE` for a chapter whose :func:`fingerprint` matches (CI time: measuring
    every step at gpu sizes takes minutes on two cores), and measured otherwise; ``refresh`` measures
    everything and writes the store (``budget --refresh``, after changing a chapter's steps or presets)."""
    if scale not in ("smoke", "book", "gpu"):
        raise ValueError(f"scale must be one of smoke, book, gpu; got {scale!r}")
    const = H100 if scale == "gpu" else CPU
    start = time.perf_counter()
    results: list[NotebookCost] = []
    missing = []
    saved = _load_store()
    fresh: dict[str, dict] = {}
    with one_thread():   # counts do not depend on threads; one thread keeps CI's two cores for the jobs
        for slug, declared in chapter_costs(scale, chapters).items():
            if isinstance(declared, str):
                missing.append(f"{slug}: {declared}")
                continue
            cache: dict = {}
            module = slug.replace("-", "_") if slug != "preconditioned-delta" else "precond_delta"
            fp = fingerprint(module, scale)
            entry = saved.get(f"{slug}|{scale}", {})
            counts = dict(entry.get("counts", {})) if (store and not refresh and entry.get("hash") == fp) else {}
            for notebook, items in declared.items():
                torch.manual_seed(0)
                results.append(project(slug, notebook, items, const, cache, counts))
            if refresh and not any(nb.failed for nb in results if nb.chapter == slug):
                fresh[f"{slug}|{scale}"] = {"hash": fp, "counts": counts}
    if refresh:
        _save_store(fresh)
    timings = load_timings()
    echo(budget_table(results, limit, timings, scale))
    if missing:
        echo("chapters without a cost model: " + "; ".join(missing))
    over = [nb.key for nb in results if nb.seconds > limit]
    failed = [nb.key for nb in results if nb.failed]
    if scale != "gpu":
        ratios = calibration(results, timings, scale)
        if ratios:
            ratios.sort()
            echo(f"calibration at {scale}: measured / projected over {len(ratios)} notebooks: min {ratios[0]:.2f}, "
                 f"median {ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f}")
    echo(f"{len(results)} notebook(s) projected in {time.perf_counter() - start:.1f} s; "
         + (f"{len(over)} over {limit:.0f} s, " if scale == "gpu" else "") + f"{len(failed)} with errors")
    if scale == "gpu" and over:
        echo("over the budget: " + ", ".join(over))
    return 1 if failed or (scale == "gpu" and over) else 0


# -- helpers for the chapters' cost.py -------------------------------------------------------------------
def gpu_preset(module_presets, scale: str):
    """``PRESETS[scale]`` of a chapter's presets module, read directly (no ``ICML26_SCALE``, no dry run)."""
    table = getattr(module_presets, "PRESETS", None)
    if not isinstance(table, Mapping) or scale not in table:
        raise ValueError(f"scale must be a key of {getattr(module_presets, '__name__', 'the')} PRESETS, got {scale!r}")
    return table[scale]


_GPU_CHECK: dict[str, dict] = {}


def gpu_check_step(package: str, name: str) -> Callable[[], Callable]:
    """An :class:`Item`'s step builder: the kernel ``name`` of ``package``'s ``gpu_check()`` (the chapter's
    headline kernels at gpu sizes), built on the CPU once per package and reused by every item that needs it."""
    def build():
        if package not in _GPU_CHECK:
            _GPU_CHECK[package] = importlib.import_module(package).gpu_check(torch.device("cpu"))
        return _GPU_CHECK[package][name]
    return build


def pick(cfg, name: str, default=None):
    """A preset field read defensively: ``default`` when a chapter's preset no longer has it."""
    return getattr(cfg, name, default)


def n_of(value, default: int = 1) -> int:
    """A count from a preset field that may be an int, a sequence (its length) or missing."""
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    try:
        return len(value)
    except TypeError:
        return default
