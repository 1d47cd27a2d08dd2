"""Runners the BA-solver notebooks call. Each returns plain dicts / DataFrames; no plotting here."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from icml26.core import Comparison, Grid, paired_init, tune

from .baselines import CountingField, ab2, dpmpp_2m, euler, heun, midpoint, reference_solve, rk4
from .data import load_digits_tensor, ring_gmm, sample_checkerboard, sample_gmm
from .fields import GMMVelocityField, VelocityMLP, train_backbone
from .method import ALPHA_LOBATTO, SideNetMLP, ba_bi_anchor, ba_single_anchor, oracle_sidenet, train_sidenet
from .metrics import endpoint_error, sliced_wasserstein

BASELINES = {"euler": euler, "heun": heun, "midpoint": midpoint, "ab2": ab2, "dpm++2m": dpmpp_2m, "rk4": rk4}
MULTIPLE = {"heun": 2, "midpoint": 2, "rk4": 4}


def sample_with(method: str, backbone: Callable, sidenet: Callable | None, x0: torch.Tensor, nfe: int,
                y=None, **kw) -> torch.Tensor | None:
    """Run one named solver at ``nfe`` backbone evaluations; ``None`` where ``nfe`` does not fit it."""
    if nfe % MULTIPLE.get(method, 1):
        return None
    with torch.no_grad():
        if method == "ba-bi":
            return ba_bi_anchor(backbone, sidenet, x0, nfe, y, **kw)
        if method == "ba-single":
            return ba_single_anchor(backbone, sidenet, x0, nfe, y, **kw)
        if method in BASELINES:
            kw.pop("alpha", None)
            kw.pop("nodes", None)
            return BASELINES[method](backbone, x0, nfe, y, **kw)
    raise ValueError(f"method must be 'ba-bi', 'ba-single' or one of {sorted(BASELINES)}, got {method!r}")


def error_table(backbone: Callable, sidenets: dict[str, Callable], x0: torch.Tensor, ref: torch.Tensor,
                nfes, baselines=("euler", "heun", "ab2", "dpm++2m"), y=None) -> pd.DataFrame:
    """Endpoint error to ``ref`` for baselines and for ``ba-bi``/``ba-single`` with every SideNet given.

    Returns a long table with columns ``method, nfe, error``.
    """
    rows = []
    for nfe in nfes:
        for m in baselines:
            out = sample_with(m, backbone, None, x0, nfe, y)
            if out is not None:
                rows.append({"method": m, "nfe": nfe, "error": endpoint_error(out, ref)})
        for tag, side in sidenets.items():
            for m in ("ba-bi", "ba-single"):
                out = sample_with(m, backbone, side, x0, nfe, y)
                rows.append({"method": f"{m}{tag}", "nfe": nfe, "error": endpoint_error(out, ref)})
    return pd.DataFrame(rows)


def slope(df: pd.DataFrame, method: str, n1: int, n2: int) -> float:
    """Empirical order ``log(err_n1 / err_n2) / log(n2 / n1)`` from an error table."""
    e = df[df.method == method].set_index("nfe")["error"]
    return math.log(e[n1] / e[n2]) / math.log(n2 / n1)


# ------------------------------------------------------------------------------------------ NB1
def exact_setup(n_points: int, generator: torch.Generator, dtype=torch.float64):
    """The analytic ring-mixture backbone, test noise and its float64 reference endpoints."""
    field = GMMVelocityField(ring_gmm())
    x0 = torch.randn(n_points, 2, generator=generator, dtype=torch.float64)
    ref = reference_solve(field, x0)
    return field, x0.to(dtype), ref


def convergence_study(field: Callable, x0: torch.Tensor, ref: torch.Tensor, nfes, substeps: int) -> pd.DataFrame:
    """Endpoint error vs NFE for every baseline and for BA with the *oracle* SideNet (theory only)."""
    df = error_table(field, {}, x0, ref, nfes, baselines=("euler", "heun", "midpoint", "ab2", "dpm++2m", "rk4"))
    orc = oracle_sidenet(field, substeps)
    rows = [{"method": "ba-bi (oracle)", "nfe": n, "error": endpoint_error(ba_bi_anchor(field, orc, x0, n), ref)}
            for n in nfes]
    return pd.concat([df, pd.DataFrame(rows)], ignore_index=True)


def _seeded(seed: int | None, generator: torch.Generator | None, build: Callable):
    """``(module, generator)``: with ``seed``, the module is built from torch seeded by ``seed`` alone
    (:func:`icml26.core.paired_init`) and trained from ``torch.Generator().manual_seed(seed)``;
    without, from the global stream and ``generator``."""
    if seed is None:
        return build(), generator
    return paired_init(int(seed), build), torch.Generator().manual_seed(int(seed))


def train_exact_sidenet(field: Callable, cfg, steps: int, generator: torch.Generator | None = None,
                        lam: float = 50.0, chain_steps: int | None = None, dev=None, seed: int | None = None):
    """Chain-loss training of a :class:`SideNetMLP` against the exact mixture field (NB1).

    Trains on ``dev`` (the GPU where there is one: the gpu preset's 6,000 steps at batch 4096 do
    not fit a CPU) and returns the EMA SideNet moved back to the CPU, where the float64 error
    tables are computed; ``history["device"]`` records where it trained. ``seed`` fixes the
    initialisation and the training stream (one SideNet per seed of a comparison).
    """
    dev = torch.device(dev if dev is not None else "cpu")
    params = ring_gmm().to(dev, torch.float32)
    side, generator = _seeded(seed, generator, lambda: SideNetMLP(2, hidden=cfg.side_hidden, depth=cfg.side_depth))
    side = side.to(dev)
    ema, hist = train_sidenet(field, side, lambda n, g: sample_gmm(n, params, g).to(dev), steps, cfg.side_batch,
                              lr=cfg.lr, ema_decay=cfg.ema_decay, generator=generator,
                              chain_steps=chain_steps or cfg.chain_steps, lam=lam)
    hist["device"] = str(next(side.parameters()).device)
    return ema.cpu(), hist


def sidenet_error_vs_h(field: Callable, sidenet: Callable, ts, hs, n: int, generator: torch.Generator,
                       substeps: int = 32) -> pd.DataFrame:
    """Mean ``|| v^(t+h) - v*(t+h) ||`` of the learned SideNet against the oracle, on path states."""
    params = ring_gmm()
    orc = oracle_sidenet(field, substeps)
    x1 = sample_gmm(n, params, generator)
    x0 = torch.randn(n, 2, generator=generator, dtype=torch.float64)
    rows = []
    for t in ts:
        tt = torch.full((n,), float(t), dtype=torch.float64)
        x = t * x1 + (1 - t) * x0
        v = field(x, tt)
        for h in hs:
            if not 0.0 <= t + h <= 1.0:
                continue
            hh = torch.full((n,), float(h), dtype=torch.float64)
            with torch.no_grad():
                s_hat = sidenet(x.float(), v.float(), tt.float(), hh.float()).double()
            s_star = orc(x, v, tt, hh)
            rows.append({"t": t, "h": h, "error": float((s_hat - s_star).norm(dim=1).mean()),
                         "zero_error": float(s_star.norm(dim=1).mean())})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ NB2 / NB3
def train_flow_backbone(dim: int, sample_fn: Callable, cfg, generator: torch.Generator,
                        n_classes: int | None = None, dev=None, label_dropout: float = 0.0) -> tuple[VelocityMLP, dict]:
    """Train and freeze a :class:`VelocityMLP` FM backbone (``label_dropout`` trains the null label for CFG)."""
    from .method import device_generator

    model = VelocityMLP(dim, hidden=cfg.backbone_hidden, depth=cfg.backbone_depth, n_classes=n_classes).to(dev)
    hist = train_backbone(model, sample_fn, cfg.backbone_steps, cfg.backbone_batch, lr=cfg.backbone_lr,
                          generator=device_generator(generator, next(model.parameters()).device),
                          label_dropout=label_dropout)
    return model, hist


def train_learned_sidenet(backbone: Callable, dim: int, sample_fn: Callable, cfg,
                          generator: torch.Generator | None = None, steps: int | None = None,
                          n_classes: int | None = None, dev=None, seed: int | None = None, **loss_kw):
    """Chain-loss training of a SideNet for a frozen learned backbone (NB2, NB3); ``seed`` fixes the
    initialisation and the training stream (one SideNet per seed of a comparison)."""
    side, generator = _seeded(seed, generator, lambda: SideNetMLP(dim, hidden=cfg.side_hidden, depth=cfg.side_depth,
                                                                  n_classes=n_classes))
    side = side.to(dev)
    loss_kw.setdefault("chain_steps", cfg.chain_steps)
    return train_sidenet(backbone, side, sample_fn, steps or cfg.side_steps, cfg.side_batch, lr=cfg.lr,
                         ema_decay=cfg.ema_decay, generator=generator, **loss_kw)


def checkerboard_sampler(dev=None) -> Callable:
    return lambda n, g: sample_checkerboard(n, g).to(dev)


def quality_table(backbone: Callable, sidenet: Callable, x0: torch.Tensor, ref: torch.Tensor, nfes,
                  data: torch.Tensor, generator_seed: int, y=None,
                  methods=("euler", "ab2", "dpm++2m", "heun", "ba-single", "ba-bi"),
                  extra_metric: Callable | None = None) -> tuple[pd.DataFrame, dict]:
    """Endpoint error and SW2 to fresh ``data`` (and an optional extra metric) for every method and NFE.

    Returns the long table and the samples ``{(method, nfe): x}``; ``("reference", 0)`` holds ``ref``.
    """
    samples = {("reference", 0): ref.float()}
    rows = []
    ref_row = {"method": "reference", "nfe": 0, "error": 0.0,
               "sw2": sliced_wasserstein(ref, data, generator=torch.Generator().manual_seed(generator_seed))}
    if extra_metric is not None:
        ref_row.update(extra_metric(ref.float()))
    rows.append(ref_row)
    for nfe in nfes:
        for m in methods:
            out = sample_with(m, backbone, sidenet, x0, nfe, y)
            if out is None:
                continue
            samples[(m, nfe)] = out
            row = {"method": m, "nfe": nfe, "error": endpoint_error(out, ref),
                   "sw2": sliced_wasserstein(out, data, generator=torch.Generator().manual_seed(generator_seed))}
            if extra_metric is not None:
                row.update(extra_metric(out))
            rows.append(row)
    return pd.DataFrame(rows), samples


def alpha_ablation(backbone: Callable, sidenet: Callable, x0, ref, nfe: int,
                   alphas=(0.25, ALPHA_LOBATTO, 1 / 3)) -> pd.DataFrame:
    """Bi-anchor endpoint error at ``nfe`` for several interior nodes ``alpha`` (same SideNet)."""
    rows = [{"alpha": a, "error": endpoint_error(sample_with("ba-bi", backbone, sidenet, x0, nfe, alpha=a), ref)}
            for a in alphas]
    return pd.DataFrame(rows)


def digits_setup(dev=None):
    """Digits in ``[-1, 1]`` and a sampler returning ``(x, y)`` batches drawn with replacement."""
    x, y = load_digits_tensor()
    x, y = x.to(dev), y.to(dev)

    def sample(n, g):
        idx = torch.randint(0, x.shape[0], (n,), generator=g, device=g.device if g is not None else None)
        idx = idx.to(x.device)
        return x[idx], y[idx]

    return x, y, sample


def pivot(df: pd.DataFrame, value: str = "error") -> pd.DataFrame:
    """Wide view ``method x nfe`` of a long table (for display)."""
    out = df.pivot_table(index="method", columns="nfe", values=value, aggfunc="first")
    return out.reindex([m for m in dict.fromkeys(df.method)])


def lookup(df: pd.DataFrame, method: str, nfe: int, value: str = "error") -> float:
    sel = df[(df.method == method) & (df.nfe == nfe)][value]
    if len(sel) != 1:
        raise KeyError(f"no unique row for method {method!r} at nfe {nfe}")
    return float(sel.iloc[0])


def fit_order(df: pd.DataFrame, method: str, nfes) -> float:
    """Least-squares slope of ``-log err`` against ``log nfe`` over ``nfes``."""
    e = df[(df.method == method) & (df.nfe.isin(list(nfes)))].sort_values("nfe")
    return float(-np.polyfit(np.log(e.nfe.to_numpy(float)), np.log(e.error.to_numpy(float)), 1)[0])


# ------------------------------------------------------------------------------------------ orders below the reference's own error
def reference_error(velocity_fn: Callable, x0: torch.Tensor, ref: torch.Tensor, steps: int = 512, y=None) -> float:
    """Mean distance between the ``steps``-step reference and one with twice the steps: its own error."""
    return endpoint_error(ref, reference_solve(velocity_fn, x0, y, steps=2 * steps))


def order_window(df: pd.DataFrame, method: str, nfes, floor: float, factor: float = 10.0) -> tuple[int, int]:
    """NFE pair ``(n1, n2)`` for an order estimate that stays clear of the reference's own error.

    ``n2`` is the largest NFE whose error exceeds ``factor * floor`` and ``n1`` the NFE two places
    below it in ``nfes`` (or the smallest; the book's pair is 8 -> 16). Errors within a factor of
    the reference's error measure the reference, not the solver, and flatten the slope (blocker 3
    of issue 28: 3.6 instead of 7 at the gpu preset's NFE 32).
    """
    nfes = sorted(nfes)
    e = df[df.method == method].set_index("nfe")["error"]
    ok = [n for n in nfes if e[n] > factor * floor]
    if len(ok) < 2:
        raise ValueError(f"fewer than two NFEs of {method!r} have an error above {factor} x the reference's "
                         f"own error {floor:.2e}: refine the reference")
    n2 = ok[-1]
    return nfes[max(0, nfes.index(n2) - 2)], n2


# ------------------------------------------------------------------------------------------ equal cost
def equal_cost_table(backbone: Callable, sidenet: Callable, x0: torch.Tensor, ref: torch.Tensor, ba_nfes,
                     flop_ratio: float, max_nfe: int, baselines=("euler", "ab2", "heun", "dpm++2m"),
                     y=None) -> pd.DataFrame:
    """Endpoint error against *backbone-equivalent* cost: BA at its NFEs with ``(4N - 1) r`` added
    for its SideNet evaluations (``r`` the FLOP ratio), every baseline at each NFE up to ``max_nfe``.

    Columns ``method, nfe, cost, error``; for baselines ``cost == nfe``.
    """
    rows = []
    for m in baselines:
        for n in range(1, max_nfe + 1):
            out = sample_with(m, backbone, None, x0, n, y)
            if out is not None:
                rows.append({"method": m, "nfe": n, "cost": float(n), "error": endpoint_error(out, ref)})
    for n in ba_nfes:
        out = sample_with("ba-bi", backbone, sidenet, x0, n, y)
        rows.append({"method": "ba-bi", "nfe": n, "cost": n + (4 * n - 1) * flop_ratio,
                     "error": endpoint_error(out, ref)})
    return pd.DataFrame(rows)


def cheapest_match(tab: pd.DataFrame, method: str, error: float) -> float:
    """Smallest cost at which ``method`` reaches ``error`` or less (``inf`` if it never does)."""
    d = tab[(tab.method == method) & (tab.error <= error)]
    return float(d.cost.min()) if len(d) else math.inf


def error_at_cost(tab: pd.DataFrame, method: str, cost: float) -> float:
    """Error of ``method`` at the largest NFE whose cost does not exceed ``cost`` (rounded up)."""
    d = tab[(tab.method == method) & (tab.cost <= math.ceil(cost - 1e-9))]
    return float(d.sort_values("cost").error.iloc[-1]) if len(d) else math.nan


# ------------------------------------------------------------------------------------------ reference level and its noise
def bootstrap_metric(metric: Callable, x: torch.Tensor, y: torch.Tensor, n_boot: int, seed: int) -> np.ndarray:
    """``metric(x*, y*)`` over ``n_boot`` bootstrap resamples of both sets at their own sizes."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_boot):
        ix = torch.randint(0, x.shape[0], (x.shape[0],), generator=g).to(x.device)
        iy = torch.randint(0, y.shape[0], (y.shape[0],), generator=g).to(y.device)
        out.append(metric(x[ix], y[iy]))
    return np.asarray(out)


# ------------------------------------------------------------------------------------------ classifier-free guidance
def guided_reference(backbone: torch.nn.Module, x0: torch.Tensor, y: torch.Tensor, cfg_scale: float,
                     null_class: int, steps: int, cfg_interval=None) -> torch.Tensor:
    """float64 RK4 solution of the *guided* ODE (the target of a guided sampler)."""
    import copy

    from .baselines import CFG_INTERVAL, guided_velocity

    b64 = copy.deepcopy(backbone).double()
    fn = guided_velocity(b64, cfg_scale, null_class, cfg_interval or CFG_INTERVAL)
    return reference_solve(fn, x0.double(), y, steps=steps)


def guidance_sweep(backbone, sidenet, x0, y, scales, nfe: int, null_class: int, ref_steps: int,
                   metrics: Callable, methods=("euler", "ab2", "ba-bi"), cfg_interval=None,
                   refs: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """Guided sampling at each scale (uniform grid): endpoint error to the guided reference and ``metrics(x)``.

    ``refs`` maps a scale to its guided reference where it is already computed (at scale 1 the
    guided ODE is the conditional one); the others are solved here. Returns the long table
    (``method, scale, error, ...``) and the samples ``{(method, scale): x}``.
    """
    from .baselines import CFG_INTERVAL

    refs = refs or {}
    kw = {"cfg_scale": None, "null_class": null_class, "cfg_interval": cfg_interval or CFG_INTERVAL}
    rows, samples = [], {}
    for w in scales:
        kw["cfg_scale"] = float(w)
        if w in refs:
            ref = refs[w].float()
        else:
            ref = guided_reference(backbone, x0, y, float(w), null_class, ref_steps, kw["cfg_interval"]).float()
        samples[("reference", w)] = ref
        rows.append({"method": "reference", "scale": w, "error": 0.0, **metrics(ref)})
        for m in methods:
            out = sample_with(m, backbone, sidenet, x0, nfe, y, **kw)
            samples[(m, w)] = out
            rows.append({"method": m, "scale": w, "error": endpoint_error(out, ref), **metrics(out)})
    return pd.DataFrame(rows), samples


# ------------------------------------------------------------------------------------------ the comparison protocol (issue 35)
NOISE_OFFSET = 10_000
"""Test and validation noise of seed ``s`` is drawn from ``torch.Generator().manual_seed(NOISE_OFFSET + s)``;
the SideNet of seed ``s`` is initialised and trained from seed ``s`` itself."""


@dataclass(frozen=True)
class Arm:
    """One solver configuration of a comparison.

    ``method`` is a :func:`sample_with` name and ``nfe`` its backbone steps (per branch with
    guidance). ``side``: ``"learned"`` (the seed's trained SideNet), ``"zero"`` (the SideNet as
    initialised: zero output, the no-treatment control; it costs nothing) or ``"none"`` (a
    training-free baseline). ``guided``: sample with the case's guidance settings and score against
    its guided reference.
    """

    method: str
    nfe: int
    side: str = "none"
    guided: bool = False

    def __post_init__(self):
        if self.side not in ("learned", "zero", "none"):
            raise ValueError(f"side must be 'learned', 'zero' or 'none', got {self.side!r}")
        if self.method.startswith("ba-") and self.side == "none":
            raise ValueError(f"side: {self.method} needs a SideNet ('learned' or 'zero')")


def seeded_sidenets(train: Callable[[int], tuple], seeds) -> tuple[dict, dict]:
    """``train(seed) -> (sidenet, history)`` for every seed: ``({seed: sidenet}, {seed: history})``."""
    sides, hists = {}, {}
    for s in tqdm(list(seeds), desc="SideNets (one per seed)", leave=False):
        sides[s], hists[s] = train(int(s))
    return sides, hists


def make_case(backbone: Callable, seed: int, n: int, dim: int, ref_steps: int, y=None, dev=None,
              data_fn: Callable | None = None, guidance: dict | None = None, dtype=torch.float32) -> dict:
    """The test (or validation) material of one seed: noise ``x0`` drawn from ``NOISE_OFFSET + seed``,
    labels ``y``, the float64 reference of the backbone's ODE and, with ``guidance`` (``cfg_scale``,
    ``null_class``), of the guided ODE; ``data_fn(n, generator)`` adds fresh data for distances."""
    g = torch.Generator().manual_seed(NOISE_OFFSET + int(seed))
    x0 = torch.randn(n, dim, generator=g, dtype=torch.float64).to(dev)
    case = {"seed": int(seed), "x0": x0.to(dtype), "y": y,
            "ref": reference_solve(backbone, x0, y, steps=ref_steps).to(dtype)}
    if guidance is not None:
        case["guidance"] = dict(guidance)
        case["ref_guided"] = guided_reference(backbone, x0, y, guidance["cfg_scale"], guidance["null_class"],
                                              ref_steps, guidance.get("cfg_interval")).to(dtype)
    if data_fn is not None:
        case["data"] = data_fn(n, g).to(dev)
    return case


def run_arm(arm: Arm, backbone: Callable, sidenet: Callable | None, case: dict, shift: float = 1.0) -> torch.Tensor:
    """Sample ``case["x0"]`` with ``arm`` on the grid ``shift``."""
    from .method import zero_sidenet

    side = {"learned": sidenet, "zero": zero_sidenet(), "none": None}[arm.side]
    kw = dict(case["guidance"]) if arm.guided else {}
    out = sample_with(arm.method, backbone, side, case["x0"], arm.nfe, case["y"], shift=shift, **kw)
    if out is None:
        raise ValueError(f"arm: nfe {arm.nfe} does not fit {arm.method}")
    return out


def arm_error(x: torch.Tensor, case: dict, arm: Arm) -> float:
    """Endpoint error to the case's reference (the guided one for a guided arm)."""
    return endpoint_error(x, case["ref_guided" if arm.guided else "ref"])


def arm_cost(arm: Arm, backbone: Callable, sidenet: Callable | None, case: dict, flop_ratio: float,
             shift: float = 1.0, n: int = 4) -> dict:
    """Network evaluations per sample of ``arm``, *measured* by counting calls on ``n`` samples:
    backbone evaluations (both guidance branches counted), SideNet evaluations, and their total in
    backbone equivalents ``backbone + side * flop_ratio`` (the untrained SideNet of a ``"zero"``
    arm returns zeros and is not counted)."""
    from .method import zero_sidenet

    back = CountingField(backbone, n)
    side_fn = {"learned": sidenet, "zero": zero_sidenet(), "none": None}[arm.side]
    side = CountingField(side_fn, n) if side_fn is not None else None
    small = {**case, "x0": case["x0"][:n], "y": None if case["y"] is None else case["y"][:n]}
    kw = dict(case["guidance"]) if arm.guided else {}
    sample_with(arm.method, back, side, small["x0"], arm.nfe, small["y"], shift=shift, **kw)
    side_evals = side.evals_per_sample if (side is not None and arm.side == "learned") else 0.0
    return {"backbone": back.evals_per_sample, "side": side_evals,
            "total": back.evals_per_sample + side_evals * float(flop_ratio)}


def steps_at_cost(method: str, budget: float, backbone: Callable, case: dict, *, guided: bool = False,
                  rounding: str = "up", max_nfe: int = 64) -> int:
    """Backbone steps of a training-free ``method`` whose measured cost is closest to ``budget``:
    ``rounding="up"`` the fewest steps costing at least ``budget`` (the baseline gets at least the
    budget), ``"down"`` the most steps costing at most ``budget`` (never more than it)."""
    if rounding not in ("up", "down"):
        raise ValueError(f"rounding must be 'up' or 'down', got {rounding!r}")
    best = None
    for n in range(1, max_nfe + 1):
        if n % MULTIPLE.get(method, 1):
            continue
        c = arm_cost(Arm(method, n, guided=guided), backbone, None, case, 0.0)["total"]
        if rounding == "up" and c >= budget - 1e-9:
            return n
        if rounding == "down":
            if c > budget + 1e-9:
                break
            best = n
    if best is None:
        raise ValueError(f"budget: no step count of {method} up to {max_nfe} fits {budget:.3g} ({rounding})")
    return best


BUDGET = "evaluations per sample (backbone + SideNet x FLOP ratio)"


@dataclass
class SolverStudy:
    """Tuned arms scored on paired test seeds: what :func:`solver_study` returns.

    ``tuned[name]`` is the :class:`~icml26.core.Tuned` of an arm (its grid shift, chosen on the
    validation seed), ``scores[metric][name]`` one test score per seed, ``costs[name]`` the measured
    network evaluations per sample (see :func:`arm_cost`).
    """

    arms: dict
    seeds: list
    tuned: dict
    scores: dict
    costs: dict

    def comparison(self, metric: str = "error", *, goal: str = "min", control: str | None = None,
                   names=None, no_control: str = "", label: str | None = None, budget: str = BUDGET):
        """A :class:`~icml26.core.Comparison` of ``names`` (default: every arm) on ``metric``;
        ``control`` names the no-treatment row. Each row's cost is its measured ``costs[name]["total"]``."""
        cmp = Comparison(label or metric, goal=goal, seeds=self.seeds, no_control=no_control, budget=budget)
        for name in (names or list(self.arms)):
            cmp.add(name, self.scores[metric][name], tuned=self.tuned[name], cost=self.costs[name]["total"],
                    control=name == control)
        return cmp

    def chosen(self, name: str) -> float:
        return float(self.tuned[name].best["shift"])


def solver_study(arms: dict[str, Arm], backbone: Callable, sides: dict, cases: dict, val_case: dict, *,
                 shifts, flop_ratio: float, metrics: dict[str, Callable] | None = None,
                 progress: bool = True) -> SolverStudy:
    """The fair comparison of solvers (issue 35); the seeds are the keys of ``sides``.

    1. **Tuning on validation data, equal grids.** Every arm's grid shift is chosen among ``shifts``
       (the same values for every arm) by its endpoint error on the *validation* noise
       ``val_case`` (draws disjoint from every test case), averaged over the seeds' SideNets. No
       test noise is looked at.
    2. **Paired seeds.** On each seed every arm samples the same noise ``cases[seed]``, and every BA
       arm uses the same SideNet ``sides[seed]`` (initialised and trained from that seed).
    3. **Costs.** Network evaluations per sample, measured by counting calls (:func:`arm_cost`).

    ``metrics`` maps a name to ``score(x, case, arm)``; ``"error"`` (endpoint error) is always there.
    """
    seeds = [int(s) for s in sides]
    if set(cases) != set(sides):
        raise ValueError(f"cases: need one case per seed of sides {seeds}, got {sorted(cases)}")
    if any(val_case is c for c in cases.values()) or any(
            val_case["x0"].shape == c["x0"].shape and torch.equal(val_case["x0"], c["x0"]) for c in cases.values()):
        raise ValueError("val_case: the validation noise must differ from every test case")
    metrics = {"error": arm_error, **(metrics or {})}
    grid = Grid(shift=list(shifts))
    tuned = {}
    for name, arm in tqdm(arms.items(), desc="tuning grids", leave=False, disable=not progress):
        val_seeds = seeds if arm.side == "learned" else seeds[:1]             # a baseline ignores the SideNet

        def evaluate(c, arm=arm, val_seeds=val_seeds):
            return float(np.mean([arm_error(run_arm(arm, backbone, sides[s], val_case, c["shift"]), val_case, arm)
                                  for s in val_seeds]))
        tuned[name] = tune(name, evaluate, grid, goal="min", progress=False)
    scores = {m: {name: [] for name in arms} for m in metrics}
    for s in tqdm(seeds, desc="test seeds", leave=False, disable=not progress):
        for name, arm in arms.items():
            x = run_arm(arm, backbone, sides[s], cases[s], float(tuned[name].best["shift"]))
            for m, fn in metrics.items():
                scores[m][name].append(float(fn(x, cases[s], arm)))
    s0 = seeds[0]
    costs = {name: arm_cost(arm, backbone, sides[s0], cases[s0], flop_ratio, float(tuned[name].best["shift"]))
             for name, arm in arms.items()}
    return SolverStudy(arms, seeds, tuned, scores, costs)
