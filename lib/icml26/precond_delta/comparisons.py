"""Fair comparisons of write rules for the Preconditioned DeltaNet chapter (notebooks 1 and 3).

Every first-order write rule of the chapter is the delta rule (eq. pd-dn) with the write key
``k̃_t = s_t ⊙ k_t`` for a multiplier ``s_t`` (eq. pd-precond with a diagonal ``P_t``):

=========================  ==============================================  ==========================
rule                       multiplier ``s_t``                              what it isolates
=========================  ==============================================  ==========================
``"none"``                 ``0``: nothing is written, ``S`` stays ``0``    no memory (the control)
``"deltanet"``             ``1``                                           no preconditioner (baseline)
``"pdn"``                  ``m_t`` of eq. (pd-diag)                        the paper's write
``"shape"``                ``m_t / mean_K(m_t)``                           the per-coordinate shape
``"step"``                 ``mean_K(m_t)`` (same for every coordinate)     the larger step alone
``"jacobi-bc"``            ``1 / (K (a_t / (1 − γ^t) + floor))``           unsquashed, bias-corrected
=========================  ==============================================  ==========================

``"shape"`` keeps PDN's per-coordinate profile with DeltaNet's average step, ``"step"`` keeps PDN's
average step without the profile (DeltaNet with ``β_t = β · mean_K(m_t)``): together they split
PDN's change into its two parts. A fourth split asks whether the step part needs the data at all:
*scheduled DeltaNet* writes with ``β_t = β · s̄_t``, where the schedule ``s̄_t`` (:func:`step_schedule`)
is ``mean_K(m_t)`` averaged over the **validation** streams: a fixed table of ``T`` numbers, the same
for every stream, that costs nothing per token (``schedule=`` of :func:`regression_errors` and
:func:`recall_accuracy`, ``scheduled=True`` in the rule lists). The ``"none"`` rule is the no-treatment
row of every comparison: relative error exactly 1, recall at chance (``1/n``: every read of a zero
state ties, and the first pair is returned).

:func:`compare_rules` runs the book's comparison protocol (:mod:`icml26.core.compare`) on them: each
rule is tuned over its step size ``β`` (RLS over its ridge ``λ``) on **validation** seeds, then scored
on disjoint **test** seeds; every rule sees the same stream per seed, and the state starts at zero
for all (no initialisation to pair beyond that). Data are generated per seed, so a seed's stream does
not depend on which other seeds are run with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..core import Comparison, Grid, tune
from .baselines import linear_attention, rls_delta_rule
from .experiments import _check_pos_int, anisotropic_keys, ema_preconditioner, regression_stream
from .method import delta_rule_chunk, l2_normalize

WRITE_RULES = ("none", "deltanet", "pdn", "shape", "step", "jacobi-bc")


def _check_rule(rule) -> str:
    if not isinstance(rule, str) or rule not in WRITE_RULES:
        raise ValueError(f"rule must be one of {WRITE_RULES}, got {rule!r}")
    return rule


def _check_real(name: str, value, lo: float, hi: float = math.inf, hi_open: bool = False) -> float:
    """``value`` as a float in ``[lo, hi]`` (``[lo, hi)`` with ``hi_open``), else a ``ValueError`` naming it."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < lo or value > hi or (hi_open and value == hi):
        raise ValueError(f"{name} must be a finite number in [{lo}, {hi}{')' if hi_open else ']'}, got {value!r}")
    return float(value)


def _check_keys(k) -> None:
    if not isinstance(k, Tensor) or k.dim() != 4 or not k.is_floating_point():
        raise ValueError(f"k must be a floating [B,T,H,K] tensor, got {getattr(k, 'shape', type(k).__name__)}")
    if k.numel() == 0 or not bool(torch.isfinite(k).all()):
        raise ValueError(f"k must be non-empty and finite, got shape {tuple(k.shape)}")


def write_multiplier(k: Tensor, rule: str, x: float = 1.5, gamma: float = 0.99, center: float | None = None) -> Tensor:
    """The multiplier ``s`` with ``k̃ = s ⊙ k`` for a write ``rule`` (see the module table), ``[B,T,H,K]``.

    ``m`` is the fixed-gate preconditioner of :func:`~.experiments.ema_preconditioner` (eq. pd-diag: average
    ``a ← γ a + (1−γ) k²`` from ``a_0 = 0``, squash bound ``x``, centre ``log(1/K)`` unless given)."""
    _check_rule(rule)
    _check_keys(k)
    x = _check_real("x", x, 1e-6)
    gamma = _check_real("gamma", gamma, 1e-9, 1.0, hi_open=True)
    if rule in ("none", "deltanet"):
        return torch.zeros_like(k) if rule == "none" else torch.ones_like(k)
    center = math.log(1.0 / k.shape[-1]) if center is None else center
    if rule == "jacobi-bc":
        return ema_preconditioner(k, gamma, None, center, bias_correct=True)
    m = ema_preconditioner(k, gamma, x, center)
    if rule == "pdn":
        return m
    mean = m.mean(-1, keepdim=True)
    return m / mean if rule == "shape" else mean.expand_as(m)


def write_flops(rule: str, d_k: int, d_v: int) -> int:
    """Approximate floating-point operations per token of a write rule (an ``exp`` or ``log`` counts 1).

    The delta rule reads ``S^T k`` (``2KV``), scales the error by ``β`` (``V``) and adds the outer
    product (``2KV``). The preconditioner adds the average (``3K``), the squash (``7K``: log, shift,
    abs, add, divide, scale, exp) and ``m ⊙ k`` (``K``); ``"shape"`` and ``"step"`` add a mean over
    ``K`` and a division or a product; bias-corrected Jacobi needs the average, the correction, the
    floor, a reciprocal and the product (``7K``). ``"rls"``: Sherman–Morrison (``4K² + 2K``) and the
    state update (``4KV + V``). ``"none"`` computes nothing (0). Scheduled DeltaNet costs what DeltaNet
    costs: its ``β_t`` is read from a fixed table."""
    _check_pos_int("d_k", d_k)
    _check_pos_int("d_v", d_v)
    K, V = d_k, d_v
    delta = 4 * K * V + V
    if rule == "none":
        return 0  # nothing is read or written
    extra = {"deltanet": 0, "pdn": 11 * K, "shape": 13 * K, "step": 12 * K, "jacobi-bc": 7 * K,
             "rls": 4 * K * K + 2 * K}
    if rule not in extra:
        raise ValueError(f"rule must be one of {(*WRITE_RULES, 'rls')}, got {rule!r}")
    return delta + extra[rule]


def _seed_list(name: str, seeds) -> list[int]:
    try:
        seeds = list(seeds) if not isinstance(seeds, (str, bytes)) else None
    except TypeError:
        raise ValueError(f"{name} must be a non-empty list of ints >= 0, got {seeds!r}") from None
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise ValueError(f"{name} must be a non-empty list of ints >= 0, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{name} must be distinct, got {seeds}")
    return seeds


def _generator(seed: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) * 1000 + int(stream))  # stream in [0, 1000)


def _check_stream(stream) -> None:
    if isinstance(stream, bool) or not isinstance(stream, int) or not 0 <= stream < 1000:
        raise ValueError(f"stream must be an int in [0, 1000), got {stream!r}")


# -- online regression (NB1) -------------------------------------------------------------------------
def regression_data(seeds, T: int, d_k: int = 16, d_v: int = 8, kappa: float = 30.0, rotate: bool = False,
                    noise: float = 0.0, stream: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """One :func:`~.experiments.regression_stream` per seed (its own generator, seeded by ``seed`` and
    ``stream``), stacked: ``(k [S,T,1,K], v [S,T,1,V], W [S,1,K,V])``."""
    seeds = _seed_list("seeds", seeds)
    _check_stream(stream)
    _check_real("kappa", kappa, 1.0)
    _check_real("noise", noise, 0.0)
    parts = [regression_stream(T, d_k, d_v, kappa, rotate, noise, 1, _generator(s, stream)) for s in seeds]
    return tuple(torch.cat(p) for p in zip(*parts))


def step_schedule(k: Tensor, x: float = 1.5, gamma: float = 0.99) -> Tensor:
    """The step schedule ``s̄_t``, ``[T]``: PDN's mean multiplier ``mean_K(m_t)`` (eq. pd-diag) averaged
    over the streams (and heads) of ``k`` ``[S,T,H,K]``. Pass the **validation** keys: the schedule is then
    fixed before any test stream is seen, and scheduled DeltaNet (``β_t = β · s̄_t``) uses no data at
    run time."""
    _check_keys(k)
    return write_multiplier(k, "step", x, gamma)[..., 0].mean((0, 2))


def _scaled_multiplier(k: Tensor, rule: str, x: float, gamma: float, schedule) -> Tensor:
    """``write_multiplier`` times a fixed per-token ``schedule`` ``[T]`` (``β_t = β · schedule_t``)."""
    s = write_multiplier(k, rule, x, gamma)
    if schedule is None:
        return s
    sched = torch.as_tensor(schedule, dtype=k.dtype, device=k.device)
    if sched.shape != (k.shape[1],) or not bool(torch.isfinite(sched).all()) or bool((sched <= 0).any()):
        raise ValueError(f"schedule must be {k.shape[1]} finite positive numbers (one per token), "
                         f"got {tuple(sched.shape)}")
    return s * sched[None, :, None, None]


def _betas(betas) -> Tensor:
    try:
        b = torch.as_tensor(list(betas), dtype=torch.float64).reshape(-1)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"betas must be a non-empty list of step sizes in (0, 2], got {betas!r}") from None
    if b.numel() == 0 or not bool(torch.isfinite(b).all()) or bool((b <= 0).any()) or bool((b > 2).any()):
        raise ValueError(f"betas must be a non-empty list of step sizes in (0, 2], got {betas!r}")
    return b


def regression_errors(data: tuple[Tensor, Tensor, Tensor], rule: str, betas, x: float = 1.5,
                      gamma: float = 0.99, schedule=None) -> Tensor:
    """Relative error ``‖S_T − W‖_F / ‖W‖_F`` after the whole stream, ``[len(betas), seeds]``: every ``β``
    and seed in one batched chunkwise call. A diverged run gives ``inf``. ``schedule`` (``[T]``, optional):
    a fixed per-token factor of the step, ``β_t = β · schedule_t`` (scheduled DeltaNet with ``"deltanet"``)."""
    k, v, W = data
    b = _betas(betas)
    s = _scaled_multiplier(k, rule, x, gamma, schedule)
    n, S = b.numel(), k.shape[0]
    rep = lambda t: t.repeat(n, *([1] * (t.dim() - 1)))  # noqa: E731  [n*S, ...], β-major
    beta = b.to(k.dtype).repeat_interleave(S)[:, None, None].expand(n * S, k.shape[1], 1)
    _, state = delta_rule_chunk(rep(k), rep(k), rep(v), beta.contiguous(), k_write=rep(s * k), chunk_size=64,
                                output_final_state=True)
    err = (state - rep(W)).flatten(-2).norm(dim=-1)[:, 0] / rep(W).flatten(-2).norm(dim=-1)[:, 0]
    return torch.nan_to_num(err, nan=math.inf).view(n, S)


def rls_errors(data: tuple[Tensor, Tensor, Tensor], lams) -> Tensor:
    """Relative error of recursive least squares (:func:`~.baselines.rls_delta_rule`) after the whole stream,
    ``[len(lams), seeds]``."""
    k, v, W = data
    lams = [float(lam) for lam in lams]
    if not lams or not all(math.isfinite(lam) and lam > 0 for lam in lams):
        raise ValueError(f"lams must be a non-empty list of ridge values > 0, got {lams!r}")
    rows = []
    for lam in lams:  # a handful of ridge values; the scan itself is batched over seeds
        _, S = rls_delta_rule(k, k, v, None, None, lam)
        rows.append((S - W).flatten(-2).norm(dim=-1)[:, 0] / W.flatten(-2).norm(dim=-1)[:, 0])
    return torch.nan_to_num(torch.stack(rows), nan=math.inf)


# -- single-pass recall (NB3) ------------------------------------------------------------------------
def recall_data(seeds, n: int, d_k: int = 32, d_v: int = 32, kappa: float = 20.0, rotate: bool = False,
                stream: int = 0) -> tuple[Tensor, Tensor]:
    """Per-seed unit keys (:func:`~.experiments.anisotropic_keys`) and unit values: ``(k [S,n,K], v [S,n,V])``."""
    seeds = _seed_list("seeds", seeds)
    _check_stream(stream)
    _check_pos_int("d_v", d_v)
    _check_real("kappa", kappa, 1.0)
    ks, vs = [], []
    for s in seeds:
        gen = _generator(s, stream)
        k, _ = anisotropic_keys(1, n, d_k, kappa, rotate, gen)
        ks.append(k)
        vs.append(l2_normalize(torch.randn(1, n, d_v, generator=gen, dtype=k.dtype), eps=0.0))
    return torch.cat(ks), torch.cat(vs)


def recall_accuracy(data: tuple[Tensor, Tensor], rule: str, betas, x: float = 2.0, gamma: float = 0.95,
                    schedule=None) -> Tensor:
    """Single-pass recall (as :func:`~.experiments.single_pass_recall`: write every pair once, read every key
    back, a hit when the own value has the largest cosine) for every ``β`` and seed, ``[len(betas), seeds]``.
    ``rule="linear"`` is linear attention, ``S = Σ k v^T``: the cosine read-out does not depend on a step
    size, so every ``β`` gives the same row. ``schedule`` as in :func:`regression_errors`."""
    k, v = data
    b = _betas(betas)
    k4, v4 = k[:, :, None], v[:, :, None]
    if rule == "linear":
        _, state = linear_attention(k4, k4, v4, output_final_state=True)
        read = torch.einsum("bkv,bnk->bnv", state[:, 0], k)
        cos = torch.einsum("bnv,bmv->bnm", l2_normalize(read, eps=1e-12), v)
        hit = (cos.argmax(-1) == torch.arange(k.shape[1], device=k.device)).to(k.dtype).mean(-1)
        return hit.expand(b.numel(), -1)
    s = _scaled_multiplier(k4, rule, x, gamma, schedule)
    n, S = b.numel(), k.shape[0]
    rep = lambda t: t.repeat(n, *([1] * (t.dim() - 1)))  # noqa: E731
    beta = b.to(k.dtype).repeat_interleave(S)[:, None, None].expand(n * S, k.shape[1], 1)
    _, state = delta_rule_chunk(rep(k4), rep(k4), rep(v4), beta.contiguous(), k_write=rep(s * k4),
                                output_final_state=True)
    read = torch.einsum("bkv,bnk->bnv", state[:, 0], rep(k))
    cos = torch.einsum("bnv,bmv->bnm", l2_normalize(read, eps=1e-12), rep(v))
    hit = cos.argmax(-1) == torch.arange(k.shape[1], device=k.device)
    return hit.to(k.dtype).mean(-1).view(n, S)


# -- the protocol ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    """One row of a comparison: ``scores(data, values) -> [len(values), seeds]`` over the grid ``axis=values``,
    its cost per token, and whether it is the no-treatment control. A rule with ``fit`` has a part fixed on
    the validation data before it is tuned: ``fit(validation data)`` returns its ``scores`` (scheduled
    DeltaNet's step schedule); ``scores`` is then ``None``."""

    name: str
    scores: Callable[[object, Sequence[float]], Tensor] | None
    values: tuple[float, ...]
    cost: float
    axis: str = "beta"
    control: bool = False
    untuned: str = ""  # why the rule has nothing to tune (then ``values`` holds the one value it is run at)
    fit: Callable[[object], Callable[[object, Sequence[float]], Tensor]] | None = None


def _summary(scores: Tensor, goal: str) -> float:
    """Validation score of one configuration: the geometric mean over seeds for errors (``goal="min"``;
    they span orders of magnitude), the mean for accuracies."""
    if goal == "min":
        if not bool(torch.isfinite(scores).all()) or bool((scores <= 0).any()):
            return math.inf
        return scores.log().mean().exp().item()
    return scores.mean().item() if bool(torch.isfinite(scores).all()) else -math.inf


def compare_rules(data: Callable[[list[int]], object], rules: Sequence[Rule], test_seeds, val_seeds=None, *,
                  metric: str, goal: str, budget: str, fixed: str = "", progress: bool = True) -> Comparison:
    """Run the comparison protocol on write ``rules``.

    ``data(seeds)`` builds the inputs of those seeds (the same for every rule). Each rule is tuned with
    :func:`icml26.core.tune` over its grid on ``data(val_seeds)`` (validation seeds, disjoint from the test
    seeds), then scored at the chosen value on ``data(test_seeds)``. With ``fixed="reason"`` nothing is
    tuned: every rule has one value, and the reason is recorded as why (a decomposition at a set ``β``).
    A rule with ``fit`` is fitted on ``data(val_seeds)`` first (also with ``fixed=``, where it needs
    ``val_seeds``). Returns the :class:`icml26.core.Comparison` (rows in the order of ``rules``)."""
    test_seeds = _seed_list("test_seeds", test_seeds)
    rules = list(rules)
    if not rules or not all(isinstance(r, Rule) for r in rules):
        raise TypeError("rules must be a non-empty list of Rule")
    if any((r.fit is None) == (r.scores is None) for r in rules):
        raise ValueError("rules: every rule has either scores or fit, not both")
    if fixed:
        if any(len(r.values) != 1 for r in rules):
            raise ValueError("rules: with fixed=, every rule has exactly one value")
        if any(r.fit is not None for r in rules) and val_seeds is None:
            raise ValueError("val_seeds: a rule fitted on validation data (fit=) needs validation seeds")
    if not fixed or val_seeds is not None:
        val_seeds = _seed_list("val_seeds", val_seeds)
        if set(val_seeds) & set(test_seeds):
            raise ValueError(f"val_seeds must be disjoint from test_seeds, both hold {sorted(set(val_seeds) & set(test_seeds))}")
    cmp = Comparison(metric, goal=goal, seeds=test_seeds, budget=budget)
    val = data(val_seeds) if (not fixed or any(r.fit is not None for r in rules)) else None
    test = data(test_seeds)
    for r in rules:
        scores = r.fit(val) if r.fit is not None else r.scores  # fitted on validation data only
        if fixed or r.untuned:
            if len(r.values) != 1:
                raise ValueError(f"rules: the untuned rule {r.name!r} must have exactly one value")
            cmp.add(r.name, scores(test, r.values)[0].tolist(), cost=r.cost, control=r.control,
                    untuned=r.untuned or fixed)
            continue
        grid_scores = scores(val, r.values)  # [n_values, val seeds]: the whole grid in one call
        by_value = {v: _summary(grid_scores[i], goal) for i, v in enumerate(r.values)}
        tuned = tune(r.name, lambda cfg, r=r, by_value=by_value: by_value[cfg[r.axis]], Grid(**{r.axis: list(r.values)}),
                     goal=goal, progress=progress)
        best = tuned.best[r.axis]
        cmp.add(r.name, scores(test, [best])[0].tolist(), tuned=tuned, cost=r.cost, control=r.control)
    return cmp


NO_MEMORY = "no memory (S = 0)"
SCHEDULED = "DeltaNet, scheduled"


def _no_memory(scores, d_k: int, d_v: int, what: str) -> Rule:
    return Rule(NO_MEMORY, scores, (1.0,), write_flops("none", d_k, d_v), control=True,
                untuned=f"nothing is written: S stays 0 whatever the step ({what})")


def _scheduled(errors, x: float, gamma: float, d_k: int, d_v: int, betas) -> Rule:
    """Scheduled DeltaNet: its schedule ``s̄_t`` (:func:`step_schedule` of PDN ``x``) is fixed on the validation
    keys, then ``β`` is tuned on the same grid as every other rule."""
    def fit(val):
        sched = step_schedule(val[0][:, :, None] if val[0].dim() == 3 else val[0], x, gamma)
        return lambda data, values: errors(data, "deltanet", values, x, gamma, schedule=sched)

    return Rule(SCHEDULED, None, betas, write_flops("deltanet", d_k, d_v), fit=fit)


def regression_rules(betas, lams=(), x_values=(1.5,), d_k: int = 16, d_v: int = 8, gamma: float = 0.99,
                     controls: bool = True, deltanet_at=(), scheduled: bool = False) -> list[Rule]:
    """The rows of notebook 1's comparisons: no memory (``S = 0``, the control: relative error 1), DeltaNet
    (the baseline), PDN for each ``x`` (``"PDN x=1.5"``), with ``controls`` the shape-only and step-only splits
    of the first ``x`` and bias-corrected Jacobi, with ``scheduled`` DeltaNet with PDN's mean step schedule
    (fixed on the validation streams, :data:`SCHEDULED`), RLS tuned over ``lams`` when given, and DeltaNet at
    each fixed step of ``deltanet_at`` (``"DeltaNet beta=1"``, for fixed-β comparisons)."""
    betas = tuple(float(b) for b in betas)
    x_values = tuple(float(x) for x in x_values)
    if not x_values:
        raise ValueError("x_values must name at least one squash bound x")

    def rule(r, x=1.5):
        return lambda data, values: regression_errors(data, r, values, x, gamma)

    rows = [_no_memory(rule("none"), d_k, d_v, "relative error 1"),
            Rule("DeltaNet", rule("deltanet"), betas, write_flops("deltanet", d_k, d_v))]
    rows += [Rule(f"PDN x={x:g}", rule("pdn", x), betas, write_flops("pdn", d_k, d_v)) for x in x_values]
    if controls:
        x0 = x_values[0]
        rows += [Rule("PDN shape only", rule("shape", x0), betas, write_flops("shape", d_k, d_v)),
                 Rule("PDN step only", rule("step", x0), betas, write_flops("step", d_k, d_v)),
                 Rule("Jacobi (bias-corrected)", rule("jacobi-bc"), betas, write_flops("jacobi-bc", d_k, d_v))]
    if scheduled:
        rows.append(_scheduled(regression_errors, x_values[0], gamma, d_k, d_v, betas))
    if lams:
        rows.append(Rule("RLS", lambda data, values: rls_errors(data, values), tuple(float(lam) for lam in lams),
                         write_flops("rls", d_k, d_v), axis="lam"))
    rows += [Rule(f"DeltaNet beta={b:g}", rule("deltanet"), (float(b),), write_flops("deltanet", d_k, d_v))
             for b in deltanet_at]
    return rows


REGRESSION_SETTINGS = {"axis-aligned": {}, "rotated": {"rotate": True}, "isotropic (kappa=1)": {"kappa": 1.0},
                       "axis-aligned, noise 0.1": {"noise": 0.1}}


def regression_comparisons(rules, T: int, test_seeds, val_seeds=None, *, d_k: int = 16, d_v: int = 8,
                           kappa: float = 30.0, settings=None, fixed: str = "") -> dict:
    """:func:`compare_rules` on the online-regression stream for every setting of ``settings`` (default
    :data:`REGRESSION_SETTINGS`: axis-aligned and rotated skew ``kappa``, isotropic keys, axis-aligned with
    target noise 0.1), scored by the relative error after ``T`` tokens. Each setting has its own streams
    (``stream`` index), the same for every rule. ``rules``: one list of :class:`Rule` for every setting, or
    ``{setting: rules}``. Returns ``{setting: Comparison}``."""
    from tqdm.auto import tqdm

    settings = dict(REGRESSION_SETTINGS if settings is None else settings)
    if isinstance(rules, Mapping):
        missing = set(settings) - set(rules)
        if missing:
            raise ValueError(f"rules: no rules for the settings {sorted(missing)}")
    out = {}
    for i, (name, kw) in enumerate(tqdm(settings.items(), desc="settings", leave=False)):
        unknown = set(kw) - {"kappa", "rotate", "noise"}
        if unknown:
            raise ValueError(f"settings: {name!r} has unknown keys {sorted(unknown)}")
        opts = {"kappa": kappa, **kw}

        def data(seeds, opts=opts, i=i):
            return regression_data(seeds, T, d_k, d_v, stream=i, **opts)

        out[name] = compare_rules(data, rules[name] if isinstance(rules, Mapping) else rules, test_seeds, val_seeds,
                                  metric=f"relative error at t={T}", goal="min", budget="FLOPs per token (approx.)",
                                  fixed=fixed, progress=False)
    return out


def regression_by_token(rules, tokens, test_seeds, val_seeds, *, setting: str = "axis-aligned", d_k: int = 16,
                        d_v: int = 8, kappa: float = 30.0) -> dict:
    """:func:`regression_comparisons` of one ``setting`` of :data:`REGRESSION_SETTINGS` read after each number of
    tokens in ``tokens``, every rule tuned anew on the validation streams at that token (a convergence-rate
    claim holds at the token it is read at, not at every token). Returns ``{t: Comparison}``."""
    from tqdm.auto import tqdm

    if setting not in REGRESSION_SETTINGS:
        raise ValueError(f"setting must be one of {list(REGRESSION_SETTINGS)}, got {setting!r}")
    tokens = list(tokens) if not isinstance(tokens, (str, bytes)) else None
    if not tokens or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in tokens):
        raise ValueError(f"tokens must be a non-empty list of ints >= 1, got {tokens!r}")
    stream = list(REGRESSION_SETTINGS).index(setting)  # the setting's own streams, as in regression_comparisons
    opts = {"kappa": kappa, **REGRESSION_SETTINGS[setting]}
    out = {}
    for t in tqdm(tokens, desc="tokens", leave=False):
        def data(seeds, t=t):
            return regression_data(seeds, t, d_k, d_v, stream=stream, **opts)

        out[t] = compare_rules(data, rules, test_seeds, val_seeds, metric=f"relative error at t={t}", goal="min",
                               budget="FLOPs per token (approx.)", progress=False)
    return out


def ratio_by_token(comparisons: Mapping, a: str, b: str):
    """The paired ratio ``a / b`` at each token of ``{t: Comparison}`` (:func:`regression_by_token`): mean,
    t interval, wins of ``a`` and the chosen ``β`` of both, one row per token (a ``pandas.DataFrame``)."""
    import pandas as pd

    if not comparisons:
        raise ValueError("comparisons must be a non-empty {t: Comparison} mapping")
    rows = []
    for t, cmp in comparisons.items():
        d = cmp.diff(a, b, "ratio")
        chosen = {n: cmp.rows[n].tuned.best if cmp.rows[n].tuned else None for n in (a, b)}
        rows.append({"t": t, f"{a} / {b}": d.mean, "95% lo": d.lo, "95% hi": d.hi,
                     f"{a} better on": f"{d.wins} of {d.n}",
                     **{f"chosen {k} ({n})": v for n, c in chosen.items() if c for k, v in c.items()}})
    return pd.DataFrame(rows).set_index("t")


def recall_rules(betas, x: float = 2.0, d_k: int = 32, d_v: int = 32, gamma: float = 0.95,
                 linear: bool = True, scheduled: bool = True) -> list[Rule]:
    """The rows of notebook 3's comparisons: no memory (``S = 0``, the control: recall at chance), DeltaNet
    (the baseline), PDN, its shape-only and step-only splits, with ``scheduled`` DeltaNet with PDN's mean step
    schedule (fixed on the validation key sets, :data:`SCHEDULED`) and, with ``linear``, linear attention
    (nothing to tune: the read-out is scale-free)."""
    betas = tuple(float(b) for b in betas)

    def rule(r):
        return lambda data, values: recall_accuracy(data, r, values, x, gamma)

    rows = [_no_memory(rule("none"), d_k, d_v, "recall at chance, 1/n"),
            Rule("DeltaNet", rule("deltanet"), betas, write_flops("deltanet", d_k, d_v)),
            Rule(f"PDN x={x:g}", rule("pdn"), betas, write_flops("pdn", d_k, d_v)),
            Rule("PDN shape only", rule("shape"), betas, write_flops("shape", d_k, d_v)),
            Rule("PDN step only", rule("step"), betas, write_flops("step", d_k, d_v))]
    if scheduled:
        rows.append(_scheduled(recall_accuracy, x, gamma, d_k, d_v, betas))
    if linear:
        rows.append(Rule("linear attention", rule("linear"), (1.0,), 2 * d_k * d_v,
                         untuned="no step size: the cosine read-out of sum k v^T does not depend on its scale"))
    return rows


def recall_comparisons(rules: Sequence[Rule], n: int, test_seeds, val_seeds=None, *, d_k: int = 32, d_v: int = 32,
                       kappa: float = 20.0, fixed: str = "") -> dict:
    """:func:`compare_rules` on single-pass recall of ``n`` pairs (:func:`recall_accuracy`), with axis-aligned
    and with rotated key skew ``kappa``. Returns ``{"axis-aligned": Comparison, "rotated": Comparison}``."""
    out = {}
    for i, rotate in enumerate((False, True)):
        def data(seeds, rotate=rotate, i=i):
            return recall_data(seeds, n, d_k, d_v, kappa, rotate, stream=i)

        out["rotated" if rotate else "axis-aligned"] = compare_rules(
            data, rules, test_seeds, val_seeds, metric=f"recall accuracy at n={n}", goal="max",
            budget="FLOPs per token (approx.)", fixed=fixed, progress=False)
    return out


def against_control(comparisons, baseline: str = "DeltaNet", stat: str = "ratio", digits: int = 2):
    """One cell per method and setting: the paired ``stat`` of the method against ``baseline`` (DeltaNet, not
    the no-memory control row, which is left out: its ratio says only how far DeltaNet got) over the test seeds,
    ``"mean [lo, hi]"`` (t interval), followed by the chosen grid value when the method was tuned.
    ``comparisons``: ``{setting: Comparison}``. Returns a ``pandas.DataFrame`` (methods x settings)."""
    import pandas as pd

    if not comparisons:
        raise ValueError("comparisons must be a non-empty {setting: Comparison} mapping")
    cols = {}
    for setting, cmp in comparisons.items():
        if not isinstance(cmp, Comparison):
            raise TypeError(f"comparisons[{setting!r}] must be a Comparison, got {type(cmp).__name__}")
        col = {}
        for name, row in cmp.rows.items():
            if name == baseline or row.control:
                continue
            d = cmp.diff(name, baseline, stat)
            text = f"{d.mean:.{digits}f} [{d.lo:.{digits}f}, {d.hi:.{digits}f}]"
            if row.tuned is not None:
                text += " at " + ", ".join(f"{k}={v:g}" for k, v in row.tuned.best.items())
            col[name] = text
        cols[setting] = col
    sign = "/" if stat == "ratio" else "-"
    return pd.DataFrame(cols).fillna("-").rename_axis(f"method {sign} {baseline}, paired over test seeds")
