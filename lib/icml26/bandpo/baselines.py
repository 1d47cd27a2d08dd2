r"""Baselines as bound rules :math:`p \mapsto (\ell(p), u(p))`, and the registry of every rule.

- **Clip** (PPO / GRPO): :math:`[1-\epsilon, 1+\epsilon]`, :math:`\epsilon = 0.2`.
- **Clip-Higher** (DAPO): :math:`[1-\epsilon_-, 1+\epsilon_+]`, :math:`\epsilon_- = 0.2`,
  :math:`\epsilon_+ = 0.28`.
- **DCPO dynamic adaptive clipping**: :math:`\ell(p) = \tfrac12 + \tfrac12\sqrt{\max(1 - 4\epsilon_{low}/p, 0)}`,
  :math:`u(p) = \min\big(\tfrac12 + \tfrac12\sqrt{1 + 4\epsilon_{high}/p},\ u_{cap}\big)`; upward room in
  probability :math:`\approx\sqrt{\epsilon_{high} p}` for rare tokens, but not simplex-consistent for likely
  ones: as :math:`p\to1`, :math:`u\to\tfrac12+\tfrac12\sqrt{1+4\epsilon_{high}}` (1.171 at
  :math:`\epsilon_{high}=0.2`), not :math:`1+\epsilon_{high}`.

Fixed clipping allows the sampled token's probability to move by at most :math:`\epsilon_+ p`
upwards: the "tail bottleneck" that BandPO removes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from .method import _band, _check_delta, _check_p, _divergence, band_bounds


def _check_eps(eps_low, eps_high) -> None:
    for name, v in (("eps_low", eps_low), ("eps_high", eps_high)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name} must be a number, got {type(v).__name__}")
    if not 0 <= eps_low < 1:
        raise ValueError(f"eps_low must satisfy 0 <= eps_low < 1, got {eps_low}")
    if not eps_high >= 0:
        raise ValueError(f"eps_high must be >= 0, got {eps_high}")


def clip_bounds(p, eps_low: float = 0.2, eps_high: float = 0.2) -> tuple[Tensor, Tensor]:
    """Fixed PPO interval ``(1 - eps_low, 1 + eps_high)`` broadcast to the shape of ``p``."""
    _check_eps(eps_low, eps_high)
    p = _check_p(p)
    return torch.full_like(p, 1.0 - eps_low), torch.full_like(p, 1.0 + eps_high)


def dcpo_bounds(p, eps_low: float = 0.16, eps_high: float = 0.20, ratio_cap: float = 10.0) -> tuple[Tensor, Tensor]:
    """DCPO dynamic adaptive clipping (as used as a baseline by the BandPO authors)."""
    _check_eps(eps_low, eps_high)
    if not ratio_cap >= 1:
        raise ValueError(f"ratio_cap must be >= 1, got {ratio_cap}")
    p = _check_p(p)
    lo = 0.5 + 0.5 * torch.sqrt((1.0 - 4.0 * eps_low / p).clamp(min=0.0))
    hi = (0.5 + 0.5 * torch.sqrt(1.0 + 4.0 * eps_high / p)).clamp(max=ratio_cap)
    return lo, hi


def no_clip_bounds(p) -> tuple[Tensor, Tensor]:
    """No clipping: the interval ``[0, inf)`` (the surrogate is then the plain ratio-weighted policy
    gradient; a dual clip, when on, still caps negative-advantage losses)."""
    p = _check_p(p)
    return torch.zeros_like(p), torch.full_like(p, math.inf)


def split_bounds(lower: Callable[[Tensor], tuple[Tensor, Tensor]],
                 upper: Callable[[Tensor], tuple[Tensor, Tensor]]) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    """A rule that takes its lower bound from ``lower`` and its upper bound from ``upper`` (both bound
    rules); since every rule has ``l <= 1 <= u`` the result is a valid interval."""
    if not callable(lower) or not callable(upper):
        raise TypeError("lower and upper must be bound rules p -> (lo, hi)")
    return lambda p: (lower(p)[0], upper(p)[1])


class BandRule:
    """The Band bound rule ``p -> band_bounds(p, delta, divergence, **options)``, callable like every
    other rule. It keeps its radius, so that :func:`evaluate_rules` can compute the bounds of many
    radii of one divergence in a single batched call (a radius sweep costs one bisection, not one
    per radius)."""

    def __init__(self, divergence: str = "kl", delta: float = 0.05, **options):
        self.divergence = _divergence(divergence).name
        self.delta = _check_delta(delta)
        self.options = options

    def __call__(self, p) -> tuple[Tensor, Tensor]:
        return band_bounds(p, self.delta, self.divergence, **self.options)

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options.items())
        return f"BandRule({self.divergence!r}, delta={self.delta:g}{opts})"


def evaluate_rules(rules: Sequence[Callable], ps: Sequence[Tensor]) -> list[tuple[Tensor, Tensor]]:
    """``[rule(p) for rule, p in zip(rules, ps)]``, with every :class:`BandRule` of the same
    divergence and options evaluated in one call (a tensor of radii, one per element)."""
    if len(rules) != len(ps):
        raise ValueError(f"ps: one tensor per rule ({len(rules)}), got {len(ps)}")
    out: list = [None] * len(rules)
    groups: dict[tuple, list[int]] = {}
    for i, rule in enumerate(rules):
        if isinstance(rule, BandRule):
            groups.setdefault((rule.divergence, tuple(sorted(rule.options.items(), key=repr))), []).append(i)
        else:
            out[i] = rule(ps[i])
    for members in groups.values():
        if len(members) == 1:
            out[members[0]] = rules[members[0]](ps[members[0]])
            continue
        first = rules[members[0]]
        if set(first.options) - {"ratio_cap", "relax", "max_iter", "method"}:
            for i in members:  # options band_bounds would reject: let it say so
                out[i] = rules[i](ps[i])
            continue
        p = _check_p(torch.cat([ps[i].reshape(-1) for i in members]))
        delta = torch.cat([torch.full((ps[i].numel(),), rules[i].delta, dtype=p.dtype, device=p.device)
                           for i in members])
        first(p[:1])  # checks the shared options exactly as band_bounds does
        opts = first.options
        use_closed = _divergence(first.divergence).has_closed_form and opts.get("method", "auto") != "bisect"
        lo, hi = _band(_divergence(first.divergence), p, delta, use_closed, opts.get("max_iter", 60),
                       opts.get("ratio_cap", 10.0), opts.get("relax"))
        sizes = [ps[i].numel() for i in members]
        for i, lo_i, hi_i in zip(members, lo.split(sizes), hi.split(sizes)):
            out[i] = (lo_i.reshape(ps[i].shape), hi_i.reshape(ps[i].shape))
    return out


BOUND_RULES = ("clip", "clip_higher", "dcpo", "band_kl", "band_tv", "band_chi2", "band_hellinger",
               "band_reverse_kl", "band_neyman_chi2", "band_kl_relax", "none")


def make_bound_fn(name: str, **kw) -> Callable[[Tensor], tuple[Tensor, Tensor]]:
    """A bound rule ``p -> (lo, hi)`` by name.

    ``clip`` (eps 0.2), ``clip_higher`` (0.2 / 0.28), ``dcpo``, ``band_<divergence>`` (delta 0.05,
    cap 10), ``band_kl_relax`` (Band-KL unioned with Clip-Higher) and ``none`` (no clipping). Keyword arguments override the
    defaults (``eps_low``, ``eps_high``, ``delta``, ``ratio_cap``, ...).
    """
    if not isinstance(name, str) or name not in BOUND_RULES:
        raise ValueError(f"name must be one of {BOUND_RULES}, got {name!r}")
    if name == "none":
        if kw:
            raise ValueError(f"the rule 'none' takes no arguments, got {sorted(kw)}")
        return no_clip_bounds
    if name == "clip":
        args = {"eps_low": 0.2, "eps_high": 0.2, **kw}
        return lambda p: clip_bounds(p, **args)
    if name == "clip_higher":
        args = {"eps_low": 0.2, "eps_high": 0.28, **kw}
        return lambda p: clip_bounds(p, **args)
    if name == "dcpo":
        args = {"eps_low": 0.16, "eps_high": 0.20, "ratio_cap": 10.0, **kw}
        return lambda p: dcpo_bounds(p, **args)
    if name == "band_kl_relax":
        args = {"delta": 0.05, "ratio_cap": 10.0, "relax": (0.2, 0.28), **kw}
        return BandRule("kl", **args)
    divergence = name[len("band_"):]
    args = {"delta": 0.05, "ratio_cap": 10.0, **kw}
    return BandRule(divergence, **args)
