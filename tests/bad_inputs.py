"""A property-based bad-input sweep any chapter can reuse (Hypothesis).

The book's rule for a public function: bad input raises ``ValueError`` or ``TypeError`` whose
message names the argument, and input that is accepted gives a finite result. A :class:`Case`
names a function, a valid call, and the arguments to corrupt; :func:`corruptions` draws bad
versions of a valid value from its type (None, a string, NaN, +-inf, empty, an extra dimension,
half precision, zero, negative and fractional counts, ...); :func:`check_case` applies the rule.

A new chapter gets the sweep by adding its cases to ``CASES`` in ``tests/test_bad_inputs.py``::

    Case("mymod.solve", mymod.solve, dict(x=torch.randn(4, 3), steps=10), args=("x", "steps"))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st


@dataclass(frozen=True)
class Case:
    """A function, a valid call ``fn(*args_pos, **valid)``, and the keyword arguments to corrupt."""

    name: str
    fn: Callable
    valid: dict
    args: tuple[str, ...]
    positional: tuple = ()
    # False: tensors are corrupted in type and shape only, not with NaN/inf entries (for hot
    # inner steps whose callers own the values, such as a server step averaging client models)
    nonfinite: bool = True
    # (lo, hi): every number an accepted call returns must lie in [lo, hi] (a metric's range:
    # a probability in (0, 1), a TM-score in (0, 1], a CSI in (0, 1)); None: only finiteness
    range: tuple[float, float] | None = None
    # out -> bool: a check of the result's shape (or structure) for an accepted call, e.g.
    # ``lambda out: out.shape == (3,)``; it must hold for the valid call and for every accepted bad one
    shape: Callable | None = None

    def __str__(self) -> str:
        return self.name


def _tensor_corruptions(t: torch.Tensor, nonfinite: bool = True) -> st.SearchStrategy:
    def with_value(value):
        def make(index):
            out = t.clone()
            if out.numel():
                out.view(-1)[index % out.numel()] = value
            return out
        return st.integers(0, 10**6).map(make)

    options = [
        st.just(None),
        st.just("not a tensor"),
        st.just(t[:0]),                          # empty along the first dimension
        st.just(t.unsqueeze(0)),                 # an extra dimension
        st.just(t.reshape(-1)[:1].reshape(()) if t.numel() else t),  # a 0-d tensor
    ]
    if t.is_floating_point():
        options += [st.just(t.half()), st.just(t.bfloat16()), st.just(t.long())]
        if nonfinite:
            options += [with_value(math.nan), with_value(math.inf), with_value(-math.inf)]
    return st.one_of(options)


def _float_corruptions(x: float) -> st.SearchStrategy:
    return st.sampled_from([None, "0.5", math.nan, math.inf, -math.inf, 0.0, -1.0, -1e-300, [x]])


def _int_corruptions(n: int) -> st.SearchStrategy:
    return st.sampled_from([None, "3", 0, -1, 2.5, math.nan, True])


def corruptions(value, *, nonfinite: bool = True) -> st.SearchStrategy:
    """Bad versions of a valid ``value``, chosen by its type."""
    if isinstance(value, torch.Tensor):
        return _tensor_corruptions(value, nonfinite)
    if isinstance(value, bool):
        return st.sampled_from([None, "yes", 2])
    if isinstance(value, int):
        return _int_corruptions(value)
    if isinstance(value, float):
        return _float_corruptions(value)
    if isinstance(value, str):
        return st.sampled_from([None, "", "no-such-option", 3])
    return st.sampled_from([None, "not the right type", 3.5])


def _finite(out) -> bool:
    if isinstance(out, torch.Tensor):
        return not out.is_floating_point() or bool(torch.isfinite(out).all())
    if isinstance(out, np.ndarray):
        return not np.issubdtype(out.dtype, np.floating) or bool(np.isfinite(out).all())
    if isinstance(out, float):
        return math.isfinite(out)
    if isinstance(out, (tuple, list)):
        return all(_finite(o) for o in out)
    if isinstance(out, dict):
        return all(_finite(o) for o in out.values())
    return True


def _numbers(out):
    """Every floating number in a result (tensors, arrays, floats, nested in tuples, lists, dicts)."""
    if isinstance(out, torch.Tensor):
        return out.detach().double().reshape(-1).tolist() if out.is_floating_point() else []
    if isinstance(out, np.ndarray):
        return out.astype(float).reshape(-1).tolist() if np.issubdtype(out.dtype, np.floating) else []
    if isinstance(out, float):
        return [out]
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _numbers(o)]
    if isinstance(out, dict):
        return [x for o in out.values() for x in _numbers(o)]
    return []


def check_result(case: Case, out, what: str) -> None:
    """The expectations of an accepted call: finite, in ``case.range``, of ``case.shape``."""
    assert _finite(out), f"{what} returned non-finite values without an error"
    if case.range is not None:
        lo, hi = case.range
        bad = [x for x in _numbers(out) if not lo <= x <= hi]
        assert not bad, f"{what} returned {bad[:3]} outside the range [{lo}, {hi}] without an error"
    if case.shape is not None:
        assert case.shape(out), f"{what} returned a result of the wrong shape: {out!r:.200}"


def check_case(case: Case, name: str, bad) -> None:
    """Call ``case`` with argument ``name`` replaced by ``bad``; fail unless it raises ValueError or
    TypeError naming ``name``, or returns a finite result (in ``case.range``, of ``case.shape``)."""
    kwargs = dict(case.valid, **{name: bad})
    try:
        out = case.fn(*case.positional, **kwargs)
    except (ValueError, TypeError) as exc:
        assert name in str(exc), f"{case.name}({name}={bad!r:.80}): the error does not name {name!r}: {exc}"
        return
    except Exception as exc:  # noqa: BLE001 (the point: no other exception type may escape)
        raise AssertionError(f"{case.name}({name}={bad!r:.80}) raised {type(exc).__name__}: {exc}; "
                             f"expected ValueError/TypeError naming {name!r}") from exc
    check_result(case, out, f"{case.name}({name}={bad!r:.80})")
