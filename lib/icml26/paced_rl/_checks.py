"""Argument checks shared by the chapter's public functions (bad input raises ValueError/TypeError
naming the argument)."""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers

import torch

# Value checks (finite, normalised, binary, in range) read a tensor back to the host: one sync per check on
# a GPU. ``experiments.train`` runs its first step with them and its later steps inside
# :func:`trusted_values` (their inputs come from the same task, policy and sampler); a function called on
# its own always checks. Type, shape and dtype checks never depend on this switch.
_VALUE_CHECKS = contextvars.ContextVar("paced_rl_value_checks", default=True)


def value_checks() -> bool:
    """Whether the value checks run here (``False`` inside :func:`trusted_values`)."""
    return _VALUE_CHECKS.get()


@contextlib.contextmanager
def trusted_values():
    """Skip the value checks of the chapter's functions inside (type and shape checks still run)."""
    token = _VALUE_CHECKS.set(False)
    try:
        yield
    finally:
        _VALUE_CHECKS.reset(token)


def pos_float(name: str, x, *, allow_zero: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {x!r}")
    x = float(x)
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ValueError(f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, got {x!r}")
    return x


def unit_float(name: str, x) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a real number in [0, 1], got {x!r}")
    x = float(x)
    if not (0.0 <= x <= 1.0):
        raise ValueError(f"{name} must lie in [0, 1], got {x!r}")
    return x


def count(name: str, x, minimum: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {x!r}")
    x = int(x)
    if x < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {x}")
    return x


def tensor(name: str, x, *, ndim: int | None = None, floating: bool = True, finite: bool = True,
           nonempty: bool = True) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(x.shape)}")
    if nonempty and x.numel() == 0:
        raise ValueError(f"{name} must not be empty")
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}")
    if not floating and (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool):
        raise TypeError(f"{name} must be an integer tensor, got {x.dtype}")
    if finite and x.is_floating_point() and value_checks() and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite")
    return x


def same_shape(names: tuple[str, ...], *xs: torch.Tensor) -> None:
    shape = xs[0].shape
    for n, x in zip(names[1:], xs[1:]):
        if x.shape != shape:
            raise ValueError(f"{n} must have the shape of {names[0]} {tuple(shape)}, got {tuple(x.shape)}")


def log_probs(name: str, x) -> torch.Tensor:
    """A floating tensor of log-probabilities: no NaN, no +inf (-inf marks probability zero)."""
    tensor(name, x, finite=False)
    if value_checks() and (bool(torch.isnan(x).any()) or bool((x == float("inf")).any())):
        raise ValueError(f"{name} must hold log-probabilities (no NaN or +inf)")
    return x


def normalised_log_probs(name: str, x, tol: float = 1e-3) -> torch.Tensor:
    """Log-probabilities of distributions over the last axis: as :func:`log_probs`, and every row's
    ``logsumexp`` within ``tol`` of 0 (unnormalised rows would give a negative KL or a biased log Z)."""
    log_probs(name, x)
    if not value_checks():
        return x
    lse = torch.logsumexp(x.double(), -1)
    if not bool((lse.abs() <= tol).all()):
        worst = float(lse.abs().max())
        raise ValueError(f"{name} must be normalised log-probabilities over the last axis (logsumexp = 0), "
                         f"a row is off by {worst:.3g}; apply torch.log_softmax")
    return x


def generator(name: str, g) -> torch.Generator | None:
    """``None`` or a ``torch.Generator`` (a device string such as ``"cuda"`` is not a generator)."""
    if g is not None and not isinstance(g, torch.Generator):
        raise TypeError(f"{name} must be a torch.Generator or None, got {type(g).__name__} {g!r:.40}")
    return g


def device(name: str, d) -> torch.device | None:
    """``None`` or a device torch can use here (CUDA on a CPU-only build is refused by name)."""
    if d is None:
        return None
    try:
        dev = torch.device(d)
    except (TypeError, RuntimeError) as exc:
        raise TypeError(f"{name} must be None, a torch.device or a device string such as 'cpu', got {d!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={d!r} but this torch build sees no CUDA device")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"{name}={d!r} but only {torch.cuda.device_count()} CUDA device(s) are visible")
    return dev
