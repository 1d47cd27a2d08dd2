"""Finite-sum problems for the dp-c4 chapter (spec Sec. 7.1).

Every problem is :math:`F(x)=\\frac1n\\sum_i f_i(x)` with per-example gradients computed in closed form
and batched over *runs*: an iterate of shape ``(R, d)`` (R independent runs: seeds, hyperparameters)
gives per-example gradients of shape ``(R, n, d)``. Nothing loops over examples, and everything takes
its device from the data tensors, so it runs on CUDA unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..core.checks import check_device as _check_device
from ..core.checks import check_generator  # noqa: F401

KINDS = ("logistic", "least_squares")


def _check_pos(name: str, value, *, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be finite and {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


def _check_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


@dataclass
class FiniteSumProblem:
    """:math:`f_i(x)=\\ell(a_i^\\top x; y_i)+\\frac\\lambda2\\|x\\|^2` with rows :math:`a_i` of ``X``.

    ``kind="logistic"``: :math:`\\ell=\\log(1+e^{-y_i a_i^\\top x})`, labels in {-1, +1}.
    ``kind="least_squares"``: :math:`\\ell=\\frac12(a_i^\\top x-y_i)^2`.
    """

    X: Tensor
    y: Tensor
    lam: float
    kind: str = "logistic"

    def __post_init__(self):
        if not isinstance(self.X, Tensor) or not isinstance(self.y, Tensor):
            raise TypeError("X and y must be torch tensors")
        if self.X.ndim != 2 or self.X.shape[0] < 1 or self.X.shape[1] < 1:
            raise ValueError(f"X must be a non-empty 2-D tensor (n, d), got shape {tuple(self.X.shape)}")
        if not self.X.is_floating_point() or self.X.dtype in (torch.float16, torch.bfloat16):
            raise TypeError(f"X must be float32 or float64, got {self.X.dtype}")
        if self.y.ndim != 1 or self.y.shape[0] != self.X.shape[0]:
            raise ValueError(f"y must be 1-D of length n={self.X.shape[0]}, got shape {tuple(self.y.shape)}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        self.y = self.y.to(self.X.dtype)
        if not bool(torch.isfinite(self.X).all()) or not bool(torch.isfinite(self.y).all()):
            raise ValueError("X and y must not contain NaN or Inf")
        if self.kind == "logistic" and not bool(((self.y == 1) | (self.y == -1)).all()):
            raise ValueError("logistic labels y must be in {-1, +1}")
        self.lam = _check_pos("lam", self.lam, allow_zero=True)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def dim(self) -> int:
        return int(self.X.shape[1])

    def _as_runs(self, x: Tensor) -> tuple[Tensor, bool]:
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a tensor, got {type(x).__name__}")
        single = x.ndim == 1
        xr = x[None] if single else x
        if xr.ndim != 2 or xr.shape[1] != self.dim:
            raise ValueError(f"x must have shape (d,) or (R, d) with d={self.dim}, got {tuple(x.shape)}")
        return xr.to(self.X), single

    def _residual_weight(self, xr: Tensor) -> Tensor:
        """d ell / d (a_i^T x), shape (R, n)."""
        z = xr @ self.X.T
        if self.kind == "logistic":
            return -self.y * torch.sigmoid(-self.y * z)
        return z - self.y

    def _check_idx(self, idx: Tensor, runs: int) -> Tensor:
        if not isinstance(idx, Tensor) or idx.dtype != torch.long or idx.ndim != 2 or idx.shape[0] != runs:
            raise ValueError(f"idx must be a (R={runs}, b) long tensor of example indices")
        return idx

    def per_sample_grads(self, x: Tensor, idx: Tensor | None = None, out: Tensor | None = None) -> Tensor:
        """All per-example gradients: ``(n, d)`` for x of shape ``(d,)``, ``(R, n, d)`` for ``(R, d)``.
        With ``idx`` of shape ``(R, b)``: only the examples ``idx[r]`` of run r, ``(R, b, d)``.
        ``out`` (runs ``(R, d)`` only): a contiguous tensor of the result's shape and dtype to write into,
        so that a training loop reuses one buffer instead of allocating one per step (the same values)."""
        xr, single = self._as_runs(x)
        if idx is not None:
            idx = self._check_idx(idx, len(xr))
            Xb = self.X.index_select(0, idx.reshape(-1)).view(*idx.shape, -1)    # (R, b, d), rows of X
            yb = self.y[idx]                                                      # (R, b)
            z = torch.einsum("rbd,rd->rb", Xb, xr)
            w = -yb * torch.sigmoid(-yb * z) if self.kind == "logistic" else z - yb
        else:
            Xb, w = self.X, self._residual_weight(xr)
        if out is not None:
            _check_out(out, (len(xr), w.shape[-1], self.dim), xr, single)
            return torch.mul(w[..., None], Xb, out=out).add_(self.lam * xr[:, None, :])
        G = w[..., None] * Xb + self.lam * xr[:, None, :]
        return G[0] if single and idx is None else G

    def grad(self, x: Tensor) -> Tensor:
        """:math:`\\nabla F(x)` (batched over runs like :meth:`per_sample_grads`)."""
        xr, single = self._as_runs(x)
        g = self._residual_weight(xr) @ self.X / self.n + self.lam * xr
        return g[0] if single else g

    def loss(self, x: Tensor) -> Tensor:
        """:math:`F(x)`, shape ``()`` or ``(R,)``."""
        xr, single = self._as_runs(x)
        z = xr @ self.X.T
        data = (torch.nn.functional.softplus(-self.y * z) if self.kind == "logistic"
                else 0.5 * (z - self.y) ** 2).mean(-1)
        out = data + 0.5 * self.lam * (xr ** 2).sum(-1)
        return out[0] if single else out

    def hessian(self, x: Tensor) -> Tensor:
        """:math:`\\nabla^2F(x)` for a single x of shape (d,)."""
        xr, _ = self._as_runs(x)
        if self.kind == "logistic":
            p = torch.sigmoid(xr[0] @ self.X.T)
            w = p * (1 - p)
        else:
            w = torch.ones(self.n, dtype=self.X.dtype, device=self.X.device)
        return (self.X.T * w) @ self.X / self.n + self.lam * torch.eye(self.dim, dtype=self.X.dtype,
                                                                         device=self.X.device)

    def solve_exact(self, tol: float = 1e-12, max_iter: int = 100) -> Tensor:
        """:math:`x^\\star` by Newton's method to ``||grad F|| < tol`` (both kinds are convex)."""
        tol = _check_pos("tol", tol)
        x = torch.zeros(self.dim, dtype=self.X.dtype, device=self.X.device)
        for _ in range(_check_int("max_iter", max_iter)):
            g = self.grad(x)
            if float(g.norm()) < tol:
                return x
            x = x - torch.linalg.solve(self.hessian(x), g)
        if float(self.grad(x).norm()) > 1e3 * tol:
            raise RuntimeError(f"Newton did not converge: ||grad|| = {float(self.grad(x).norm()):.2e}")
        return x

    def accuracy(self, x: Tensor) -> Tensor:
        """Fraction of correct signs (logistic only), shape () or (R,)."""
        if self.kind != "logistic":
            raise ValueError("accuracy is defined for kind='logistic' only")
        xr, single = self._as_runs(x)
        acc = ((xr @ self.X.T) * self.y > 0).to(self.X.dtype).mean(-1)
        return acc[0] if single else acc


def _check_out(out, shape: tuple, like: Tensor, single: bool) -> None:
    """``out`` of :meth:`FiniteSumProblem.per_sample_grads`: contiguous, of the result's shape, dtype, device."""
    if single:
        raise ValueError("out needs runs: x of shape (R, d)")
    if not isinstance(out, Tensor) or tuple(out.shape) != tuple(shape) or out.dtype != like.dtype \
            or out.device != like.device or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {like.dtype} tensor of shape {tuple(shape)} on {like.device}")


def toy_problem(b=(0.0, 0.0, 0.0, 4.0)) -> FiniteSumProblem:
    """1-D toy of spec T1: :math:`f_i(x)=\\frac12(x-b_i)^2`, so :math:`x^\\star=\\bar b` (= 1 for the default)."""
    b = torch.as_tensor(b, dtype=torch.float64)
    if b.ndim != 1 or b.numel() < 1:
        raise ValueError("b must be a non-empty 1-D sequence")
    return FiniteSumProblem(torch.ones(b.numel(), 1, dtype=torch.float64), b, 0.0, "least_squares")


def heavy_tailed_logistic(n: int = 5000, d: int = 10, lam: float = 0.1, scale_sigma: float = 0.75,
                          w_norm: float = 2.0, n_test: int | None = None, seed: int = 0,
                          device=None) -> tuple[FiniteSumProblem, FiniteSumProblem]:
    """(train, test): :math:`a_i=s_iz_i`, :math:`s_i\\sim\\mathrm{LogNormal}(0,\\texttt{scale\\_sigma})`,
    :math:`\\Pr(y_i=1)=\\sigma(a_i^\\top w^\\star)` with :math:`\\|w^\\star\\|=` ``w_norm`` (spec Sec. 7.1).

    Heterogeneous example norms make the per-example gradients at the optimum very unequal, which is
    what makes the clipping bias large."""
    n, d = _check_int("n", n, 2), _check_int("d", d)
    n_test = n if n_test is None else _check_int("n_test", n_test)
    lam, scale_sigma, w_norm = _check_pos("lam", lam, allow_zero=True), _check_pos("scale_sigma", scale_sigma,
                                                                                     allow_zero=True), \
        _check_pos("w_norm", w_norm, allow_zero=True)
    device = check_device(device)
    gen = torch.Generator().manual_seed(int(seed))
    w = torch.randn(d, generator=gen, dtype=torch.float64)
    w = w_norm * w / w.norm()

    def draw(m):
        s = torch.exp(scale_sigma * torch.randn(m, 1, generator=gen, dtype=torch.float64))
        a = s * torch.randn(m, d, generator=gen, dtype=torch.float64)
        y = torch.where(torch.rand(m, generator=gen, dtype=torch.float64) < torch.sigmoid(a @ w), 1.0, -1.0)
        return FiniteSumProblem(a.to(device), y.to(device), lam, "logistic")

    return draw(n), draw(n_test)


def breast_cancer_logistic(lam: float = 1e-2, test_fraction: float = 0.2, seed: int = 0,
                           device=None) -> tuple[FiniteSumProblem, FiniteSumProblem]:
    """scikit-learn's bundled breast-cancer data (569 x 30), standardised on the training split,
    plus an intercept column; labels mapped to {-1, +1}."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    if not 0 < float(test_fraction) < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    device = check_device(device)
    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=test_fraction, random_state=int(seed), stratify=y)
    mu, sd = Xtr.mean(0), Xtr.std(0) + 1e-12

    def make(A, b):
        A = np.hstack([(A - mu) / sd, np.ones((len(A), 1))])
        return FiniteSumProblem(torch.tensor(A, dtype=torch.float64, device=device),
                                torch.tensor(2.0 * b - 1.0, dtype=torch.float64, device=device), lam, "logistic")

    return make(Xtr, ytr), make(Xte, yte)


class MLPProblem(FiniteSumProblem):
    """Non-convex finite sum (spec Sec. 7.1): a one-hidden-layer tanh MLP with softmax cross-entropy,
    :math:`f_i(x)=\\operatorname{CE}(W_2\\tanh(W_1a_i+b_1)+b_2;\\,y_i)+\\frac\\lambda2\\|x\\|^2`, where the
    iterate ``x`` is the flat parameter vector ``(W1, b1, W2, b2)`` of length
    ``hidden*(p+1) + classes*(hidden+1)``.

    Per-example gradients come from ``torch.func``: ``vmap`` over examples of ``grad`` of the one-example
    loss, ``vmap``-ed again over runs, so an iterate ``(R, P)`` gives ``(R, n, P)`` with no Python loop
    over examples or runs. ``y`` holds class indices ``0..classes-1`` (stored as floats)."""

    def __init__(self, X: Tensor, y: Tensor, lam: float, hidden: int = 32, classes: int = 10):
        if not isinstance(X, Tensor) or not isinstance(y, Tensor):
            raise TypeError("X and y must be torch tensors")
        self.hidden, self.classes = _check_int("hidden", hidden), _check_int("classes", classes, 2)
        if y.ndim != 1 or y.is_floating_point() and not bool((y == y.round()).all()):
            raise ValueError("y must be 1-D class indices")
        if bool(((y < 0) | (y >= self.classes)).any()):
            raise ValueError(f"class labels y must be in 0..{self.classes - 1}")
        self.X, self.y, self.lam, self.kind = X, y, lam, "least_squares"   # reuse the base checks
        super().__post_init__()
        self.kind = "mlp"
        p, h, c = self.X.shape[1], self.hidden, self.classes
        self._shapes = ((h, p), (h,), (c, h), (c,))
        self._labels = self.y.long()
        self._onehot = torch.nn.functional.one_hot(self._labels, self.classes).to(self.X.dtype)

    @property
    def dim(self) -> int:
        p, h, c = self.X.shape[1], self.hidden, self.classes
        return h * (p + 1) + c * (h + 1)

    def _unflatten(self, w: Tensor):
        out, i = [], 0
        for s in self._shapes:
            k = math.prod(s)
            out.append(w[..., i:i + k].reshape(*w.shape[:-1], *s))
            i += k
        return out

    def logits(self, x: Tensor) -> Tensor:
        """Logits ``(n, classes)`` or ``(R, n, classes)``."""
        xr, single = self._as_runs(x)
        W1, b1, W2, b2 = self._unflatten(xr)
        hid = torch.tanh(torch.einsum("np,rhp->rnh", self.X, W1) + b1[:, None, :])
        out = torch.einsum("rnh,rch->rnc", hid, W2) + b2[:, None, :]
        return out[0] if single else out

    @staticmethod
    def _one_loss(params, a: Tensor, onehot: Tensor) -> Tensor:
        """Cross-entropy of one example; ``params = (W1, b1, W2, b2)`` (the ridge is added outside)."""
        W1, b1, W2, b2 = params
        z = W2 @ torch.tanh(W1 @ a + b1) + b2
        return torch.logsumexp(z, 0) - (z * onehot).sum()

    def per_sample_grads(self, x: Tensor, idx: Tensor | None = None, out: Tensor | None = None) -> Tensor:
        """``(n, P)`` for x of shape ``(P,)``, ``(R, n, P)`` for ``(R, P)``; with ``idx`` ``(R, b)`` only the
        examples ``idx[r]`` of run r, ``(R, b, P)``; ``out`` as in :meth:`FiniteSumProblem.per_sample_grads`. ``torch.func.vmap(grad)`` over examples, vmapped over
        runs; parameters enter as a tuple (slicing a flat vector inside ``grad`` would cost one full-size
        zero tensor per slice in the backward pass)."""
        from torch.func import grad, vmap

        xr, single = self._as_runs(x)
        per_ex = vmap(grad(self._one_loss), in_dims=(None, 0, 0))
        if idx is None:
            G = vmap(per_ex, in_dims=(0, None, None))(tuple(self._unflatten(xr)), self.X, self._onehot)
        else:
            idx = self._check_idx(idx, len(xr))
            G = vmap(per_ex, in_dims=(0, 0, 0))(tuple(self._unflatten(xr)), self.X[idx], self._onehot[idx])
        if out is None:
            out = torch.empty(*G[0].shape[:2], self.dim, dtype=xr.dtype, device=xr.device)
        else:                   # refuses a single x: out is fresh whenever x is single
            _check_out(out, (*G[0].shape[:2], self.dim), xr, single)
        i = 0                   # the parts written into their slices: a concatenation without its copies
        for g in G:
            k = math.prod(g.shape[2:])
            out[..., i:i + k].view(*out.shape[:-1], *g.shape[2:]).copy_(g)   # a view: writes into out
            i += k
        out.add_(self.lam * xr[:, None, :])
        return out[0] if single and idx is None else out

    def grad(self, x: Tensor) -> Tensor:
        G = self.per_sample_grads(x)
        return G.mean(-2)

    def loss(self, x: Tensor) -> Tensor:
        """:math:`F(x)` (mean cross-entropy plus the ridge), shape ``()`` or ``(R,)``."""
        xr, single = self._as_runs(x)
        z = self.logits(xr)
        ce = (torch.logsumexp(z, -1) - z.gather(-1, self._labels.expand(len(xr), -1)[..., None])[..., 0]).mean(-1)
        out = ce + 0.5 * self.lam * (xr ** 2).sum(-1)
        return out[0] if single else out

    def accuracy(self, x: Tensor) -> Tensor:
        """Fraction of correct argmax predictions, shape ``()`` or ``(R,)``."""
        xr, single = self._as_runs(x)
        acc = (self.logits(xr).argmax(-1) == self._labels).to(self.X.dtype).mean(-1)
        return acc[0] if single else acc

    def hessian(self, x):
        raise ValueError("hessian is not available for kind='mlp' (non-convex)")

    def solve_exact(self, tol: float = 1e-12, max_iter: int = 100):
        raise ValueError("solve_exact is not available for kind='mlp' (non-convex: no unique minimiser)")

    def init(self, runs: int = 1, seed: int = 0) -> Tensor:
        """Glorot-uniform weights and zero biases, ``(runs, P)``, seeded."""
        runs = _check_int("runs", runs)
        g = torch.Generator().manual_seed(int(seed))
        parts = []
        for s in self._shapes:
            if len(s) == 2:
                lim = math.sqrt(6.0 / (s[0] + s[1]))
                parts.append((2 * torch.rand(runs, s[0] * s[1], generator=g, dtype=torch.float64) - 1) * lim)
            else:
                parts.append(torch.zeros(runs, s[0], dtype=torch.float64))
        return torch.cat(parts, 1).to(self.X)


def digits_mlp(hidden: int = 32, lam: float = 1e-4, test_fraction: float = 0.2, seed: int = 0,
               dtype=torch.float32, device=None) -> tuple[MLPProblem, MLPProblem]:
    """scikit-learn's bundled digits (1797 x 64, 10 classes), pixels scaled to [0, 1] and centred on
    the training mean, stratified split; a 64 -> ``hidden`` -> 10 tanh MLP (spec Sec. 7.1)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0 < float(test_fraction) < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    device = check_device(device)
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=test_fraction, random_state=int(seed), stratify=y)
    mu = Xtr.mean(0)

    def make(A, b):
        return MLPProblem(torch.tensor(A - mu, dtype=dtype, device=device),
                          torch.tensor(b, dtype=dtype, device=device), lam, hidden=hidden)

    return make(Xtr, ytr), make(Xte, yte)


def check_device(device, name: str = "device") -> torch.device | None:
    """``None`` (the caller's default) or a usable device (:func:`icml26.core.checks.check_device`)."""
    return _check_device(device, name, allow_none=True)
