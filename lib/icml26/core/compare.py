"""Fair comparisons: the protocol every headline "A beats B" in the book goes through.

A comparison between a paper's method and its baselines is only as fair as the weakest
baseline's tuning. This module makes the fair path the easy one:

1. **Tuning on validation data with equal budgets** (:class:`Grid`, :func:`tune`). Each method gets
   a declared grid over its own sensitive hyper-parameters (the learning rate or step size at
   least, and the method's own knob), is scored on *validation* data only, and reports the chosen
   configuration. A best value on the edge of an ordered axis is **flagged**; the notebook then
   extends the grid or states the edge (:meth:`Tuned.state_edge`), and says so in its text.
2. **Paired seeds** (:class:`Comparison`). Every method is run on the same training seeds, each
   seed fixing the data and the initialisation for all methods alike (:func:`paired_init`); the
   reported interval is over those seeds (a t interval of the paired differences), never a
   test-set bootstrap.
3. **Costs on record.** A comparison names its budget measure (optimiser steps, fresh rollouts,
   network evaluations, privacy budget, wall seconds) and every row carries its cost.
4. **The no-treatment row.** A comparison holds a ``control`` row (the baseline that gets no
   treatment: no tokens, no curriculum, zero steps, the prior alone) or says why it has none.

:meth:`icml26.core.Ledger.compare` records a claim from a :class:`Comparison` together with its
protocol (seeds, pairing, grid size and chosen value per method, edge flags, costs). Where that
claim is asserted, a protocol fault makes it fail: fewer than :data:`MIN_SEEDS` seeds at ``book``
or ``gpu``, unpaired seeds, a method with a smaller grid than another (unless the notebook says
why), an unstated grid edge, a row without a cost, or no control row.

>>> grid = Grid(lr=[1e-3, 1e-2, 1e-1])
>>> tuned = tune("sgd", lambda c: (c["lr"] - 1e-2) ** 2, grid, goal="min", progress=False)
>>> tuned.best, tuned.edges
({'lr': 0.01}, {})
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

MIN_SEEDS = 5          # training seeds a headline comparison needs at book and gpu scale
GOALS = ("min", "max")
STATS = ("difference", "ratio")


class ProtocolError(ValueError):
    """A comparison that cannot be computed as declared (unknown method, mismatched seeds)."""


def _check_goal(goal) -> str:
    if goal not in GOALS:
        raise ValueError(f"goal must be one of {GOALS}, got {goal!r}")
    return goal


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{_snap(value):.3g}"
    return str(value)


def _snap(x: float) -> float:
    """``x`` with float round-off around zero (|x| < 1e-12, e.g. a mean of paired differences of -2e-18)
    printed as 0, so that a printed protocol does not change with summation order."""
    return 0.0 if abs(x) < 1e-12 else x


# -- 1. grids and tuning ---------------------------------------------------------------------------
class Grid:
    """The configurations a method is tuned over: named axes, each a list of values.

    A numeric axis is **ordered** (its values are sorted): a best value at its smallest or largest
    value is an edge. A string or mixed axis is categorical and has no edges.

    >>> Grid(lr=[1e-2, 1e-3], steps=[50, 100]).size
    4
    """

    def __init__(self, **axes: Sequence):
        if not axes:
            raise ValueError("axes: a grid needs at least one axis, e.g. Grid(lr=[1e-3, 1e-2, 1e-1])")
        self.axes: dict[str, tuple] = {}
        self.ordered: dict[str, bool] = {}
        for name, values in axes.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
                raise ValueError(f"axes: {name!r} must be a non-empty list of values, got {values!r}")
            if len(set(map(repr, values))) != len(values):
                raise ValueError(f"axes: {name!r} repeats a value: {list(values)}")
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            if numeric and not all(math.isfinite(v) for v in values):
                raise ValueError(f"axes: {name!r} holds a non-finite value: {list(values)}")
            self.axes[name] = tuple(sorted(values)) if numeric else tuple(values)
            self.ordered[name] = numeric

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.axes.values())

    def configs(self) -> list[dict]:
        """Every configuration, as dicts, in a fixed order (the last axis varies fastest)."""
        names = list(self.axes)
        return [dict(zip(names, combo)) for combo in itertools.product(*self.axes.values())]

    def edges_of(self, config: Mapping) -> dict[str, str]:
        """``{axis: "lower" | "upper"}`` for each ordered axis of 2+ values on which ``config``
        sits at an end."""
        out = {}
        for name, values in self.axes.items():
            if self.ordered[name] and len(values) >= 2:
                if config[name] == values[0]:
                    out[name] = "lower"
                elif config[name] == values[-1]:
                    out[name] = "upper"
        return out

    def __repr__(self) -> str:
        return "Grid(" + ", ".join(f"{k}={list(v)}" for k, v in self.axes.items()) + ")"


@dataclass
class Tuned:
    """The outcome of :func:`tune`: the validation score of every configuration and the best one."""

    method: str
    grid: Grid
    goal: str
    scores: list[tuple[dict, float]]
    best: dict
    best_score: float
    edges: dict[str, str]
    stated: dict[str, str] = field(default_factory=dict)

    @property
    def n_configs(self) -> int:
        return len(self.scores)

    def state_edge(self, axis: str, reason: str) -> Tuned:
        """Accept a best value on the edge of ``axis`` for a stated ``reason`` (the value is a natural
        bound, a larger one diverges, ...): the notebook's text must say the same. Returns ``self``."""
        if axis not in self.edges:
            raise ValueError(f"axis: {self.method}'s best {axis!r} is not at an edge of its grid "
                             f"(edges: {self.edges or 'none'})")
        if not isinstance(reason, str) or len(reason.strip()) < 10:
            raise ValueError("reason: say in a sentence why the edge is acceptable")
        self.stated[axis] = reason.strip()
        return self

    @property
    def unstated_edges(self) -> dict[str, str]:
        return {k: v for k, v in self.edges.items() if k not in self.stated}

    def describe(self) -> str:
        """``"lr=0.01 of 4 configs (lr at upper edge, stated)"``: one line for tables and ledgers."""
        text = ", ".join(f"{k}={_fmt(v)}" for k, v in self.best.items()) + f" of {self.n_configs} configs"
        if self.edges:
            text += " (" + "; ".join(f"{k} at {side} edge" + (", stated" if k in self.stated else ", NOT stated")
                                     for k, side in self.edges.items()) + ")"
        return text

    def frame(self):
        """Every configuration and its validation score as a ``pandas.DataFrame``."""
        import pandas as pd

        rows = [dict(cfg, validation=score) for cfg, score in self.scores]
        return pd.DataFrame(rows)


def tune(method: str, evaluate: Callable[[dict], float], grid: Grid | Mapping, *, goal: str = "min",
         progress: bool = True) -> Tuned:
    """Score ``evaluate(config)`` on **validation** data for every configuration of ``grid`` and keep
    the best (lowest for ``goal="min"``). A configuration that diverges may return NaN or inf: it
    ranks last. The result flags a best value at the edge of an ordered axis (:attr:`Tuned.edges`).

    ``evaluate`` must not look at test data; average over validation seeds inside it if one
    validation run is noisy.
    """
    if not isinstance(method, str) or not method:
        raise ValueError(f"method must be a non-empty string, got {method!r}")
    if not callable(evaluate):
        raise TypeError(f"evaluate must be callable(config) -> float, got {type(evaluate).__name__}")
    if isinstance(grid, Mapping):
        grid = Grid(**grid)
    if not isinstance(grid, Grid):
        raise TypeError(f"grid must be a Grid or a dict of axes, got {type(grid).__name__}")
    _check_goal(goal)
    configs = grid.configs()
    if progress:
        from tqdm.auto import tqdm

        configs = tqdm(configs, desc=f"tuning {method}", leave=False)
    scores = []
    for cfg in configs:
        value = evaluate(dict(cfg))
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"evaluate must return a number, got {type(value).__name__} for {cfg}") from None
        scores.append((dict(cfg), value))
    sign = 1.0 if goal == "min" else -1.0
    ranked = [(sign * s if math.isfinite(s) else math.inf, i) for i, (_, s) in enumerate(scores)]
    key, index = min(ranked)
    if not math.isfinite(key):
        raise ValueError(f"evaluate: every configuration of {method} diverged (no finite validation score)")
    best, best_score = scores[index]
    return Tuned(method, grid, goal, scores, best, best_score, grid.edges_of(best))


# -- 2. paired seeds ---------------------------------------------------------------------------------
def paired_init(seed: int, build: Callable[[], object]):
    """Build a model with torch's generator seeded by ``seed`` alone (never by the method's name or
    index), so that two methods with the same architecture start from the same weights per seed."""
    import torch

    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return build()
    finally:
        torch.random.set_rng_state(state)


def t_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t interval of ``values`` (one number per training seed): ``(mean, lo, hi)``.
    With one value the interval is that value (no spread can be estimated)."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0 or not np.isfinite(v).all():
        raise ValueError(f"values must be a non-empty 1-D array of finite numbers, got {values!r:.80}")
    mean = float(v.mean())
    if v.size == 1:
        return mean, mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return mean, mean - half, mean + half


@dataclass
class Row:
    """One method of a comparison: its per-seed test scores, tuning, cost and role."""

    name: str
    per_seed: np.ndarray
    tuned: Tuned | None
    cost: float | None
    control: bool = False
    untuned: str = ""      # why the method has nothing to tune (an oracle, a closed form)
    fewer_configs: str = ""  # why its grid is smaller than the largest one in the comparison

    @property
    def interval(self) -> tuple[float, float, float]:
        return t_interval(self.per_seed)


@dataclass
class PairedDiff:
    """``a - b`` (or ``a / b``) per training seed, with its t interval over seeds."""

    a: str
    b: str
    stat: str
    per_seed: np.ndarray
    mean: float
    lo: float
    hi: float
    wins: int   # seeds on which a is better than b (by the comparison's goal)

    @property
    def n(self) -> int:
        return int(self.per_seed.size)


class Comparison:
    """Methods scored on the same training seeds, with their tuning and costs.

    >>> cmp = Comparison("test MSE", goal="min", seeds=range(5), budget="optimiser steps")
    >>> _ = cmp.add("method", [1.0, 1.1, 0.9, 1.0, 1.2], cost=100, untuned="closed form")
    >>> _ = cmp.add("baseline", [2.0, 2.1, 1.8, 2.2, 2.0], cost=100, untuned="closed form", control=True)
    >>> round(cmp.diff("method", "baseline").mean, 3)
    -0.98
    """

    def __init__(self, metric: str, *, goal: str, seeds: Sequence[int], budget: str, paired: bool = True,
                 no_control: str = "", volatile_cost: bool = False):
        if not isinstance(metric, str) or not metric:
            raise ValueError(f"metric must be a non-empty string, got {metric!r}")
        self.goal = _check_goal(goal)
        seeds = list(seeds)
        if not seeds or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in seeds):
            raise ValueError(f"seeds must be a non-empty list of ints, got {seeds!r:.80}")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"seeds must be distinct, got {seeds}")
        if not isinstance(budget, str) or not budget:
            raise ValueError("budget must name the cost measure (\"optimiser steps\", \"fresh rollouts\", ...)")
        self.metric, self.seeds, self.budget = metric, [int(s) for s in seeds], budget
        self.paired, self.no_control, self.volatile_cost = bool(paired), no_control, volatile_cost
        self.rows: dict[str, Row] = {}

    # -- filling ---------------------------------------------------------------------------------
    def add(self, name: str, per_seed, *, tuned: Tuned | None = None, cost: float | None = None,
            control: bool = False, untuned: str = "", fewer_configs: str = "") -> Comparison:
        """Add a method's test scores, one per seed of :attr:`seeds`, in that order."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if name in self.rows:
            raise ValueError(f"name: {name!r} is already in the comparison")
        values = np.asarray(per_seed, dtype=float).reshape(-1)
        if values.size != len(self.seeds):
            raise ValueError(f"per_seed: {name} has {values.size} values for {len(self.seeds)} seeds")
        if not np.isfinite(values).all():
            raise ValueError(f"per_seed: {name} has a non-finite score (a diverged run?): {values}")
        if tuned is not None and not isinstance(tuned, Tuned):
            raise TypeError(f"tuned must be the Tuned that tune() returned, got {type(tuned).__name__}")
        if cost is not None:
            cost = float(cost)
            if not math.isfinite(cost) or cost < 0:
                raise ValueError(f"cost must be a finite number >= 0, got {cost}")
        self.rows[name] = Row(name, values, tuned, cost, bool(control), untuned, fewer_configs)
        return self

    def run(self, name: str, fn: Callable[[int], float], *, progress: bool = True, **kwargs) -> Comparison:
        """Score ``fn(seed)`` for every seed and :meth:`add` the result (``kwargs`` as for add)."""
        seeds = self.seeds
        if progress:
            from tqdm.auto import tqdm

            seeds = tqdm(seeds, desc=name, leave=False)
        return self.add(name, [float(fn(s)) for s in seeds], **kwargs)

    def _row(self, name: str) -> Row:
        if name not in self.rows:
            raise ProtocolError(f"method {name!r} is not in the comparison (have {list(self.rows)})")
        return self.rows[name]

    # -- reading ---------------------------------------------------------------------------------
    def diff(self, a: str, b: str, stat: str = "difference") -> PairedDiff:
        """``a - b`` (or ``a / b`` with ``stat="ratio"``) per seed and its t interval over seeds."""
        if stat not in STATS:
            raise ValueError(f"stat must be one of {STATS}, got {stat!r}")
        ra, rb = self._row(a), self._row(b)
        if stat == "ratio":
            if (rb.per_seed == 0).any():
                raise ValueError(f"b: {b} scores 0 on a seed; a ratio is undefined")
            per_seed = ra.per_seed / rb.per_seed
        else:
            per_seed = ra.per_seed - rb.per_seed
        better = ra.per_seed < rb.per_seed if self.goal == "min" else ra.per_seed > rb.per_seed
        mean, lo, hi = t_interval(per_seed)
        return PairedDiff(a, b, stat, per_seed, mean, lo, hi, int(better.sum()))

    def problems(self, names: Sequence[str] | None = None, *, scale: str = "book") -> list[str]:
        """Where the comparison falls short of the protocol (empty when it is fair). ``names``
        restricts the per-method checks (tuning, edges, costs) to the methods a claim compares."""
        names = list(self.rows) if names is None else list(names)
        rows = [self._row(n) for n in names]
        out = []
        if scale in ("book", "gpu") and len(self.seeds) < MIN_SEEDS:
            out.append(f"{len(self.seeds)} training seeds, fewer than {MIN_SEEDS} at {scale}")
        if not self.paired:
            out.append("seeds are not paired (same data and initialisation per seed)")
        largest = max((r.tuned.n_configs for r in self.rows.values() if r.tuned), default=0)
        for r in rows:
            if r.tuned is None and not r.untuned:
                out.append(f"{r.name} is not tuned on validation data (pass tuned= or untuned='why')")
            if r.tuned is not None and r.tuned.n_configs < largest and not r.fewer_configs:
                out.append(f"{r.name} had {r.tuned.n_configs} configurations, another method {largest}")
            for axis, side in (r.tuned.unstated_edges.items() if r.tuned else ()):
                out.append(f"{r.name}'s best {axis} is at the {side} edge of its grid")
            if r.cost is None:
                out.append(f"{r.name} has no cost in {self.budget}")
        if not any(r.control for r in self.rows.values()) and not self.no_control:
            out.append("no control row (no-treatment baseline) and no reason given")
        return out

    def protocol(self, names: Sequence[str] | None = None) -> dict:
        """What the ledger stores beside a comparison claim (JSON-serialisable)."""
        methods = []
        for r in self.rows.values():
            mean, lo, hi = r.interval
            methods.append({
                "name": r.name, "mean": mean, "lo": lo, "hi": hi, "cost": r.cost, "control": r.control,
                "chosen": r.tuned.best if r.tuned else None,
                "n_configs": r.tuned.n_configs if r.tuned else 0,
                "edges": r.tuned.edges if r.tuned else {}, "stated": r.tuned.stated if r.tuned else {},
                "untuned": r.untuned, "fewer_configs": r.fewer_configs,
            })
        return {"metric": self.metric, "goal": self.goal, "budget": self.budget, "seeds": list(self.seeds),
                "paired": self.paired, "interval": "95% t interval over seeds", "no_control": self.no_control,
                "volatile_cost": self.volatile_cost, "methods": methods, "compared": list(names or [])}

    def frame(self):
        """One row per method: mean and t interval over seeds, chosen configuration, grid size,
        edges, cost, control flag (a ``pandas.DataFrame``, in the order methods were added)."""
        import pandas as pd

        rows = []
        for r in self.rows.values():
            mean, lo, hi = r.interval
            rows.append({
                "method": r.name + (" (control)" if r.control else ""),
                self.metric: mean, "95% lo": lo, "95% hi": hi,
                "tuned": r.tuned.describe() if r.tuned else (r.untuned or "not tuned"),
                self.budget: r.cost,
            })
        return pd.DataFrame(rows)


def protocol_lines(name: str, protocol: Mapping, *, hide_cost: bool = False) -> list[str]:
    """The protocol of one comparison claim as short text lines (for ``Ledger.to_text``)."""
    p = protocol
    methods = [m for m in p["methods"] if not p.get("compared") or m["name"] in p["compared"] or m["control"]]
    claim = p.get("claim") or {}
    read = {"lo": "; the claim reads the interval's lower end", "hi": "; the claim reads the interval's upper end"}
    lines = [f"protocol of {name!r}: {len(p['seeds'])} {'paired' if p['paired'] else 'UNPAIRED'} seeds, "
             f"{p['interval']}{read.get(claim.get('on'), '')}; budget: {p['budget']}"]
    for m in methods:
        if m["chosen"] is not None:
            tuned = ", ".join(f"{k}={_fmt(v)}" for k, v in m["chosen"].items()) + f" of {m['n_configs']} configs"
            for axis, side in m["edges"].items():
                tuned += f"; {axis} at {side} edge" + (" (stated)" if axis in m["stated"] else " (NOT stated)")
        else:
            tuned = "untuned: " + (m["untuned"] or "no reason given")
        if m.get("fewer_configs"):
            tuned += f"; fewer configs: {m['fewer_configs']}"
        cost = "(varies)" if hide_cost and p.get("volatile_cost") else _fmt(m["cost"])
        role = " [control]" if m["control"] else ""
        lines.append(f"  {m['name']}{role}: {_snap(m['mean']):.3g} [{_snap(m['lo']):.3g}, {_snap(m['hi']):.3g}]; {tuned}; cost {cost}")
    if not any(m["control"] for m in p["methods"]):
        lines.append(f"  no control row: {p['no_control'] or 'no reason given'}")
    return lines
