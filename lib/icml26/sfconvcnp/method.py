"""Set Fourier convolutions and their Volterra extension (Mohseni, Duffield & Wong, ICML 2026).

Equation numbers refer to the chapter's specification (``shared/papers/sfconvcnp.md``), which
follows the paper and its official code:

* Sec. 3.2: the half-space frequency grid and its quadrature weights (:func:`frequency_grid`);
* Sec. 3.3: the Gaussian set embedding and its closed-form Fourier transform
  (:func:`gaussian_set_spectrum`);
* Sec. 3.4: the grouped spectral product and the real inverse transform evaluated at arbitrary
  query points (:func:`inverse_real_transform`, :class:`SetFourierConv`);
* Sec. 3.5: the rank-R second-order Volterra term (:class:`SetFourierVolterraConv`);
* Sec. 3.6 / Algorithm 1: blocks and the SFConvCNP / SFVConvCNP model (:class:`SFConvCNP`).

Convention: ``f_hat(xi) = int f(x) exp(-2 pi i xi.x) dx``. All arithmetic is real (cosines and
sines of the phases ``2 pi xi.x``); spectral weights are stored as real pairs ``[..., 2]`` (real,
imaginary), so casting the module with ``.double()`` or ``.to(dtype)`` keeps the imaginary parts
(a book choice: the official code stores ``complex64`` parameters and forbids real casts instead).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn
from torch.nn import functional as F

from ..core.checks import check_device  # noqa: F401

__all__ = [
    "PhaseCache", "Phases", "SFBlock", "SFConvCNP", "SFVConvCNP", "SetFourierConv", "SetFourierVolterraConv",
    "check_span", "frequency_grid", "gaussian_set_spectrum", "gaussian_spectrum", "inverse_real_transform",
    "phases",
]


# -- argument checks ------------------------------------------------------------------------------

def _positive_float(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _positive_int(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _per_axis(name: str, value, dim: int) -> list[float]:
    if isinstance(value, (list, tuple)):
        if len(value) != dim:
            raise ValueError(f"{name} must have one entry per input dimension ({dim}), got {len(value)}")
        return [_positive_float(name, v) for v in value]
    return [_positive_float(name, value)] * dim


def _tensor(name: str, x, ndim: int | None = None, *, last: int | None = None, finite: bool = True) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not (x.is_floating_point() and x.dtype in (torch.float32, torch.float64)):
        raise TypeError(f"{name} must be a float32 or float64 tensor, got {x.dtype}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    if last is not None and x.shape[-1] != last:
        raise ValueError(f"{name} must have last dimension {last}, got shape {tuple(x.shape)}")
    if finite and not bool(torch.isfinite(x).all()):      # reads the device: skipped with finite=False
        raise ValueError(f"{name} has non-finite entries")
    return x


def _same_dtype(named, dtype: torch.dtype | None = None, whose: str = "the model's weights are") -> None:
    """Every tensor of ``named`` (name, tensor) in one dtype, ``dtype`` when given: a float64 input to a
    float32 model is refused here, by name, instead of failing in a matmul ("mat1 and mat2 must have the
    same dtype")."""
    want = named[0][1].dtype if dtype is None else dtype
    for name, t in named:
        if t.dtype != want:
            src = whose if dtype is not None else f"{named[0][0]} is"
            raise TypeError(f"{name} is {t.dtype} but {src} {want}; cast with .to({want}) "
                            f"(or the model with .to({t.dtype}))")


def _module_dtype(module: nn.Module) -> torch.dtype:
    for p in module.parameters():
        return p.dtype
    return torch.get_default_dtype()


# -- Sec. 3.2: frequency grid ---------------------------------------------------------------------

#: largest frequency grid (number K of half-space frequencies); every layer stores K weights per
#: channel pair and every forward pass K phases per point, so a larger grid raises ``ValueError``
MAX_FREQUENCIES = 2 ** 20


def _grid_index(max_freq, resolution, dim: int):
    """Integer lattice indices ``[K, D]`` of the half-space grid and the per-axis resolutions
    (``K`` is counted first and capped at :data:`MAX_FREQUENCIES`)."""
    dim = _positive_int("dim", dim)
    fmax = _per_axis("max_freq", max_freq, dim)
    res = _per_axis("resolution", resolution, dim)
    ns, k = [], 1.0
    for d in range(dim):
        ratio = fmax[d] / res[d]
        n = round(ratio) if math.isfinite(ratio) and ratio < 2 ** 40 else 2 ** 40
        if n < 1:
            raise ValueError(f"resolution must be at most max_freq (round(max_freq/resolution) >= 1), "
                             f"got max_freq={fmax[d]}, resolution={res[d]}")
        ns.append(n)
        k *= (n + 1) if d == dim - 1 else (2 * n + 1)
    if k > MAX_FREQUENCIES:
        raise ValueError(f"resolution {res} with max_freq {fmax} gives {k:.3g} frequencies in {dim}-D, over "
                         f"MAX_FREQUENCIES = {MAX_FREQUENCIES}; use a coarser resolution or a smaller max_freq")
    axes = []
    for d, n in enumerate(ns):
        pos = torch.arange(n + 1)
        axes.append(pos if d == dim - 1 else torch.cat([-pos.flip(0)[:-1], pos]))
    return torch.cartesian_prod(*axes).reshape(-1, dim), res


def _grid_from_index(index: torch.Tensor, res, dtype, device=None):
    xi = index.to(device=device, dtype=dtype) * torch.tensor(res, dtype=dtype, device=device)
    weights = torch.where(index[:, -1] == 0, 0.5, 1.0).to(device=device, dtype=dtype)
    return xi, weights


def frequency_grid(max_freq, resolution, dim: int = 1, *, dtype=torch.float32, device=None):
    """Half-space frequency grid ``Xi`` and quadrature weights (spec Sec. 3.2).

    Axis ``d`` has ``n_d = round(max_freq_d / resolution_d) + 1`` non-negative frequencies
    ``0, resolution_d, ..., max_freq_d``; every axis but the last also gets the negative ones.
    Weights are 1/2 on the plane ``xi_D = 0`` (it is its own mirror image) and 1 elsewhere.
    The grid is counted before it is built: more than :data:`MAX_FREQUENCIES` raises ``ValueError``
    (``frequency_grid(5, 1e-4, 2)`` would be 5e9 frequencies, 40 GB of indices).

    Returns ``(xi [K, D], weights [K], volume)`` with ``volume = prod_d resolution_d``.
    """
    index, res = _grid_index(max_freq, resolution, dim)
    xi, weights = _grid_from_index(index, res, dtype, device)
    return xi, weights, math.prod(res)


# -- phases, Sec. 3.4 "precompute once" -----------------------------------------------------------

@dataclass
class Phases:
    """``cos(2 pi xi.x)`` and ``sin(2 pi xi.x)`` for a set of positions, each ``[B, N, K]``."""

    cos: torch.Tensor
    sin: torch.Tensor


def phases(x: torch.Tensor, xi: torch.Tensor) -> Phases:
    """Phase factors of positions ``x [B, N, D]`` at frequencies ``xi [K, D]``.

    ``exp(-2 pi i xi.x) = cos - i sin`` (forward transform) and ``exp(+2 pi i xi.x) = cos + i sin``
    (inverse transform) share the same two real tensors."""
    arg = 2 * math.pi * torch.einsum("bnd,kd->bnk", x, xi.to(x.dtype))
    return Phases(torch.cos(arg), torch.sin(arg))


@dataclass
class PhaseCache:
    """Phases of the context and query positions, built once per forward pass and reused by
    every block (spec Sec. 3.4, Algorithm 1 line 3)."""

    context: Phases
    query: Phases

    @classmethod
    def build(cls, xi: torch.Tensor, x_c: torch.Tensor, x_q: torch.Tensor) -> PhaseCache:
        return cls(phases(x_c, xi), phases(x_q, xi))


# -- Sec. 3.3: Gaussian set embedding and its spectrum ----------------------------------------------

def gaussian_spectrum(xi: torch.Tensor, lengthscale: torch.Tensor) -> torch.Tensor:
    """``psi_hat_c(xi) = (2 pi)^(D/2) prod_d l_cd exp(-2 pi^2 sum_d l_cd^2 xi_d^2)`` (Sec. 3.3),
    for ``xi [K, D]`` and ``lengthscale [D, C]``; returns ``[K, C]``."""
    dim = xi.shape[-1]
    quad = torch.einsum("kd,dc->kc", xi.to(lengthscale.dtype) ** 2, lengthscale ** 2)
    return (2 * math.pi) ** (dim / 2) * lengthscale.prod(0) * torch.exp(-2 * math.pi ** 2 * quad)


def _spectrum_parts(z, lengthscale, xi, ph: Phases, layout: str):
    """Real and imaginary parts ``[B, K, 2C]`` of the density and feature spectra (Sec. 3.3)."""
    psi = gaussian_spectrum(xi, lengthscale)                          # [K, C]
    den_re, den_im = ph.cos.sum(1), -ph.sin.sum(1)                    # [B, K]
    feat_re = torch.einsum("bnk,bnc->bkc", ph.cos, z)
    feat_im = -torch.einsum("bnk,bnc->bkc", ph.sin, z)
    c = z.shape[-1]
    den_re = den_re.unsqueeze(-1) * psi
    den_im = den_im.unsqueeze(-1) * psi
    feat_re, feat_im = feat_re * psi, feat_im * psi
    if layout == "blocked":
        return torch.cat([den_re, feat_re], -1), torch.cat([den_im, feat_im], -1)
    b, k = den_re.shape[:2]
    re = torch.stack([den_re, feat_re], -1).reshape(b, k, 2 * c)
    im = torch.stack([den_im, feat_im], -1).reshape(b, k, 2 * c)
    return re, im


def gaussian_set_spectrum(x: torch.Tensor, z: torch.Tensor, xi: torch.Tensor, lengthscale: torch.Tensor,
                          phases_x: Phases | None = None, layout: str = "blocked") -> torch.Tensor:
    """Closed-form Fourier transform of the Gaussian set embedding (spec Sec. 3.3).

    ``h_den_c_hat(xi) = psi_hat_c(xi) sum_n exp(-2 pi i xi.x_n)`` and
    ``h_feat_c_hat(xi) = psi_hat_c(xi) sum_n z_nc exp(-2 pi i xi.x_n)``, for ``x [B, N, D]``,
    ``z [B, N, C]``, ``xi [K, D]``, ``lengthscale [D, C]``. Returns a complex ``[B, K, 2C]``
    tensor, ``[den_1..den_C | feat_1..feat_C]`` ("blocked") or ``[den_1, feat_1, ...]``
    ("interleaved"). Exact: no grid in ``x`` is involved.
    """
    x = _tensor("x", x, 3)
    z = _tensor("z", z, 3)
    xi = _tensor("xi", xi, 2, last=x.shape[-1])
    lengthscale = _tensor("lengthscale", lengthscale, 2)
    if z.shape[:2] != x.shape[:2]:
        raise ValueError(f"z must have the batch and point dimensions of x {tuple(x.shape[:2])}, "
                         f"got {tuple(z.shape[:2])}")
    if lengthscale.shape != (x.shape[-1], z.shape[-1]) or bool((lengthscale <= 0).any()):
        raise ValueError(f"lengthscale must be positive with shape (D, C) = {(x.shape[-1], z.shape[-1])}, "
                         f"got shape {tuple(lengthscale.shape)}")
    if layout not in ("blocked", "interleaved"):
        raise ValueError(f"layout must be 'blocked' or 'interleaved', got {layout!r}")
    ph = phases(x, xi) if phases_x is None else phases_x
    re, im = _spectrum_parts(z, lengthscale.to(x.dtype), xi.to(x.dtype), ph, layout)
    return torch.complex(re, im)


# -- Sec. 3.4: inverse transform --------------------------------------------------------------------

def _inverse_parts(re, im, ph_q: Phases, weights, volume):
    w = (2.0 * volume) * weights.to(re.dtype)                         # [K]
    return torch.einsum("bmk,bkc->bmc", ph_q.cos, re * w[:, None]) - torch.einsum("bmk,bkc->bmc", ph_q.sin,
                                                                                   im * w[:, None])


def inverse_real_transform(z_ft: torch.Tensor, xq: torch.Tensor, xi: torch.Tensor, weights: torch.Tensor,
                           volume: float, phases_q: Phases | None = None) -> torch.Tensor:
    """Real inverse transform on the half-space grid, evaluated at query points (Sec. 3.4):

    ``g(x) = 2 Delta sum_xi w_xi [Re g_hat(xi) cos(2 pi xi.x) - Im g_hat(xi) sin(2 pi xi.x)]``,

    the Riemann sum of ``int g_hat(xi) exp(2 pi i xi.x) dxi`` over the full (Hermitian-extended)
    grid. ``z_ft [B, K, C]`` complex, ``xq [B, M, D]``; returns ``[B, M, C]``.
    """
    if not isinstance(z_ft, torch.Tensor) or not z_ft.is_complex():
        raise TypeError("z_ft must be a complex torch.Tensor [B, K, C]")
    if z_ft.dim() != 3:
        raise ValueError(f"z_ft must have shape [B, K, C], got {tuple(z_ft.shape)}")
    xq = _tensor("xq", xq, 3)
    xi = _tensor("xi", xi, 2, last=xq.shape[-1])
    weights = _tensor("weights", weights, 1)
    if z_ft.shape[1] != xi.shape[0] or weights.shape != (xi.shape[0],):
        raise ValueError(f"z_ft and weights must have K = {xi.shape[0]} frequencies, got "
                         f"{z_ft.shape[1]} and {tuple(weights.shape)}")
    if z_ft.shape[0] != xq.shape[0]:
        raise ValueError(f"xq must have the batch size of z_ft ({z_ft.shape[0]}), got {xq.shape[0]}")
    volume = _positive_float("volume", volume)
    ph = phases(xq, xi) if phases_q is None else phases_q
    return _inverse_parts(z_ft.real.to(xq.dtype), z_ft.imag.to(xq.dtype), ph, weights, volume)


def check_span(x_kv: torch.Tensor, x_q: torch.Tensor, period: Sequence[float], mode: str = "raise") -> None:
    """Aliasing check (Sec. 3.4): the data span ``max(x) - min(x)`` over context and queries must
    stay below the kernel's period ``1/Delta`` on every axis. ``mode``: 'raise', 'warn' or 'off'."""
    if mode == "off":
        return
    allx = torch.cat([x_kv, x_q], 1)
    span = (allx.amax(1) - allx.amin(1)).amax(0)                      # [D]
    per = torch.as_tensor(period, dtype=span.dtype, device=span.device)
    if bool((span >= per).any()):
        msg = (f"x_q: the data span {span.tolist()} reaches the kernel period 1/resolution = {list(period)}; "
               "points farther apart than a period alias onto each other")
        if mode == "raise":
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=3)


# -- Sec. 3.4: the set Fourier convolution ------------------------------------------------------------

def _inv_softplus(y: float) -> float:
    return y + math.log(-math.expm1(-y))


class SetFourierConv(nn.Module):
    """Set Fourier convolution (SFConv), spec Sec. 3.3-3.4.

    ``SFConv(z; x_kv -> x_q) = F^{-1}[ W(xi) . h_hat(xi) ](x_q)``, with ``h_hat`` the closed-form
    spectrum of the Gaussian set embedding of the tokens ``z`` at ``x_kv`` (density and feature
    channels, learnable per-channel lengthscales), ``W`` learnable complex weights, block-diagonal
    over ``groups``, on a half-space grid of ``K`` frequencies, and the inverse evaluated directly
    at the queries. Cost ``O(B (N + M) K C + B K 2C C_out / G)``: linear in ``N`` and ``M``.

    ``n_kernels > 1`` stacks several independent kernel blocks (used by the Volterra layer: the
    output then has ``n_kernels * out_channels`` channels, block ``j`` at ``[..., j*C_out:(j+1)*C_out]``).
    """

    def __init__(self, dim: int = 1, in_channels: int = 16, out_channels: int = 16, max_freq=4.9,
                 freq_resolution=0.1, groups: int = 4, init_lengthscale: float = 0.05,
                 learnable_lengthscale: bool = True, output_mixing: bool = False, low_rank: int | None = None,
                 layout: str = "blocked", n_kernels: int = 1, span_check: str = "raise"):
        super().__init__()
        self.dim = _positive_int("dim", dim)
        self.in_channels = _positive_int("in_channels", in_channels)
        self.out_channels = _positive_int("out_channels", out_channels)
        self.groups = _positive_int("groups", groups)
        self.n_kernels = _positive_int("n_kernels", n_kernels)
        if (2 * in_channels) % groups or out_channels % groups:
            raise ValueError(f"groups must divide 2*in_channels ({2 * in_channels}) and out_channels "
                             f"({out_channels}), got {groups}")
        _positive_float("init_lengthscale", init_lengthscale)
        if layout not in ("blocked", "interleaved"):
            raise ValueError(f"layout must be 'blocked' or 'interleaved', got {layout!r}")
        if span_check not in ("raise", "warn", "off"):
            raise ValueError(f"span_check must be 'raise', 'warn' or 'off', got {span_check!r}")
        self.layout, self.span_check = layout, span_check
        index, self.resolution = _grid_index(max_freq, freq_resolution, dim)
        self.register_buffer("freq_index", index)        # integer lattice: exact in every dtype
        self.volume = math.prod(self.resolution)
        self.period = [1.0 / r for r in self.resolution]
        k = index.shape[0]
        gi, go = 2 * in_channels // groups, out_channels // groups
        raw = torch.full((dim, in_channels), _inv_softplus(init_lengthscale - 1e-5))
        self.raw_lengthscale = nn.Parameter(raw, requires_grad=learnable_lengthscale)
        scale = 1.0 / math.sqrt(in_channels * out_channels)
        gtot = n_kernels * groups
        if low_rank is None:
            self.low_rank = None
            self.weight = nn.Parameter(torch.randn(gtot, gi, go, k, 2) * scale)
        else:
            r = _positive_int("low_rank", low_rank)
            if r > min(gi, go):
                raise ValueError(f"low_rank must be in [1, min(2*in_channels/groups, out_channels/groups)] = "
                                 f"[1, {min(gi, go)}], got {r}")
            self.low_rank = r
            s = math.sqrt(scale / math.sqrt(r))
            self.weight_u = nn.Parameter(torch.randn(gtot, gi, r, k, 2) * s)
            self.weight_v = nn.Parameter(torch.randn(gtot, r, go, k, 2) * s)
        self.mixing = nn.Linear(out_channels, out_channels) if output_mixing else None

    @property
    def n_freq(self) -> int:
        return self.freq_index.shape[0]

    def grid(self, dtype=torch.float32):
        """``(xi [K, D], quadrature weights [K])`` in ``dtype`` on the module's device."""
        return _grid_from_index(self.freq_index, self.resolution, dtype, self.freq_index.device)

    @property
    def xi(self) -> torch.Tensor:
        return self.grid(self.raw_lengthscale.dtype)[0]

    def lengthscale(self) -> torch.Tensor:
        """Per-channel Gaussian widths ``softplus(raw) + 1e-5``, ``[D, C_in]`` (Sec. 3.3)."""
        return F.softplus(self.raw_lengthscale) + 1e-5

    def spectral_weight(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Real and imaginary parts of ``W``, each ``[n_kernels * G, 2C/G, C_out/G, K]``."""
        if self.low_rank is None:
            return self.weight[..., 0], self.weight[..., 1]
        u = torch.complex(self.weight_u[..., 0], self.weight_u[..., 1])
        v = torch.complex(self.weight_v[..., 0], self.weight_v[..., 1])
        w = torch.einsum("girk,grok->giok", u, v)
        return w.real, w.imag

    def dense_weight(self) -> torch.Tensor:
        """The complex block-diagonal weight as a dense ``[n_kernels, 2C, C_out, K]`` tensor."""
        wr, wi = self.spectral_weight()
        w = torch.complex(wr, wi).reshape(self.n_kernels, self.groups, *wr.shape[1:])
        gi, go = w.shape[2], w.shape[3]
        dense = torch.zeros(self.n_kernels, 2 * self.in_channels, self.out_channels, self.n_freq,
                            dtype=w.dtype, device=w.device)
        for g in range(self.groups):
            dense[:, g * gi:(g + 1) * gi, g * go:(g + 1) * go] = w[:, g]
        return dense

    def spectral_product(self, re: torch.Tensor, im: torch.Tensor):
        """Grouped product ``g_hat_o = sum_{i in group(o)} W_io h_hat_i`` (Sec. 3.4) for
        ``re, im [B, K, 2C]``; returns real and imaginary parts ``[B, K, n_kernels * C_out]``."""
        b, k, _ = re.shape
        wr, wi = self.spectral_weight()
        wr = wr.reshape(self.n_kernels, self.groups, *wr.shape[1:]).to(re.dtype)
        wi = wi.reshape(self.n_kernels, self.groups, *wi.shape[1:]).to(re.dtype)
        re = re.reshape(b, k, self.groups, -1)
        im = im.reshape(b, k, self.groups, -1)
        out_re = torch.einsum("bkgi,jgiok->bkjgo", re, wr) - torch.einsum("bkgi,jgiok->bkjgo", im, wi)
        out_im = torch.einsum("bkgi,jgiok->bkjgo", re, wi) + torch.einsum("bkgi,jgiok->bkjgo", im, wr)
        return out_re.reshape(b, k, -1), out_im.reshape(b, k, -1)

    def _check(self, z_kv, x_kv, x_q):
        x_kv = _tensor("x_kv", x_kv, 3, last=self.dim)
        x_q = _tensor("x_q", x_q, 3, last=self.dim)
        z_kv = _tensor("z_kv", z_kv, 3, last=self.in_channels)
        if z_kv.shape[:2] != x_kv.shape[:2]:
            raise ValueError(f"z_kv and x_kv must agree on batch and point dimensions, got "
                             f"{tuple(z_kv.shape[:2])} and {tuple(x_kv.shape[:2])}")
        if x_q.shape[0] != x_kv.shape[0]:
            raise ValueError(f"x_q must have the batch size of x_kv ({x_kv.shape[0]}), got {x_q.shape[0]}")
        if x_kv.shape[1] == 0:
            raise ValueError("x_kv: at least one context point is needed (N = 0)")
        _same_dtype((("z_kv", z_kv), ("x_kv", x_kv), ("x_q", x_q)), _module_dtype(self))
        check_span(x_kv, x_q, self.period, self.span_check)

    def forward(self, z_kv: torch.Tensor, x_kv: torch.Tensor, x_q: torch.Tensor,
                cache: tuple[Phases, Phases] | None = None, check: bool = True) -> torch.Tensor:
        """``z_kv [B, N, C_in]`` at ``x_kv [B, N, D]`` -> ``[B, M, n_kernels * C_out]`` at ``x_q [B, M, D]``.
        ``cache = (phases of x_kv, phases of x_q)`` skips recomputing the phase factors."""
        if check:
            self._check(z_kv, x_kv, x_q)
        xi, qw = self.grid(z_kv.dtype)
        ph_kv, ph_q = cache if cache is not None else (phases(x_kv, xi), phases(x_q, xi))
        re, im = _spectrum_parts(z_kv, self.lengthscale().to(z_kv.dtype), xi, ph_kv, self.layout)
        out_re, out_im = self.spectral_product(re, im)
        out = _inverse_parts(out_re, out_im, ph_q, qw, self.volume)
        if self.mixing is not None:
            b, m, _ = out.shape
            out = self.mixing(out.reshape(b, m, self.n_kernels, -1)).reshape(b, m, -1)
        return out

    def spatial_kernel(self, tau: torch.Tensor, include_embedding: bool = False) -> torch.Tensor:
        """The spatial kernel ``kappa(tau) = F^{-1}[W](tau)`` on the grid (periodic, band-limited),
        ``tau [T, D]`` -> ``[n_kernels, T, C_out, 2C_in]`` (zero outside the diagonal blocks).
        ``include_embedding=True`` multiplies by ``psi_hat`` first: the kernel applied to point masses."""
        tau = _tensor("tau", tau, 2, last=self.dim)
        w = self.dense_weight()                                           # [J, 2C, O, K]
        xi, qw = self.grid(tau.dtype)
        if include_embedding:
            psi = gaussian_spectrum(xi, self.lengthscale().to(tau.dtype))     # [K, C]
            psi = psi.repeat(1, 2) if self.layout == "blocked" else psi.repeat_interleave(2, dim=1)
            w = w * psi.T[None, :, None, :]
        ph = phases(tau[None], xi)
        wq = (2.0 * self.volume) * qw
        k = (torch.einsum("tk,jiok->jtoi", ph.cos[0], w.real.to(tau.dtype) * wq) - torch.einsum("tk,jiok->jtoi", ph.sin[0],
                                                                                   w.imag.to(tau.dtype) * wq))
        return k


class SetFourierVolterraConv(nn.Module):
    """Set Fourier Volterra convolution (SFVConv), spec Sec. 3.5.

    ``2R+1`` SFConv kernel blocks computed in one batched spectral product and one inverse transform
    give ``g0, g(r,1), g(r,2)``; the output is the Volterra series truncated at order two with a
    rank-R separable second-order kernel,
    ``SFVConv(z)(x) = g0(x) + sum_r alpha_r g(r,1)(x) * g(r,2)(x) + beta``,
    with ``(alpha, beta)`` a shared ``Linear(R, 1)`` (the official "low-ranks mixer"). With
    ``output_mixing=True`` a ``Linear(C_out, C_out)`` mixes the channels of that sum once, as the
    official layer does.
    """

    def __init__(self, dim: int = 1, in_channels: int = 16, out_channels: int = 16, volterra_rank: int = 4,
                 **conv_kw):
        super().__init__()
        if isinstance(volterra_rank, bool) or not isinstance(volterra_rank, int):
            raise TypeError(f"volterra_rank must be an integer >= 1, got {volterra_rank!r}")
        if volterra_rank < 1:
            raise ValueError(f"volterra_rank must be >= 1 for the Volterra layer, got {volterra_rank}")
        self.rank = volterra_rank
        # Output mixing, as in the official layer, acts once on the Volterra sum, never on the 2R+1
        # kernel outputs before their product (mixing those first changes the output by a relative ~1).
        output_mixing = conv_kw.pop("output_mixing", False)
        self.conv = SetFourierConv(dim, in_channels, out_channels, n_kernels=2 * volterra_rank + 1, **conv_kw)
        self.mixer = nn.Linear(volterra_rank, 1)
        self.mixing = nn.Linear(out_channels, out_channels) if output_mixing else None
        self.out_channels = out_channels

    def split(self, g: torch.Tensor):
        """``[..., (2R+1) C_out]`` -> ``g0 [..., C_out]``, ``g1, g2 [..., C_out, R]``."""
        c, r = self.out_channels, self.rank
        g0 = g[..., :c]
        rest = g[..., c:].unflatten(-1, (r, 2, c))
        return g0, rest[..., 0, :].transpose(-1, -2), rest[..., 1, :].transpose(-1, -2)

    def forward(self, z_kv, x_kv, x_q, cache=None, check: bool = True) -> torch.Tensor:
        g0, g1, g2 = self.split(self.conv(z_kv, x_kv, x_q, cache, check))
        out = g0 + self.mixer(g1 * g2).squeeze(-1)
        return out if self.mixing is None else self.mixing(out)

    def second_order_kernel(self, tau1: torch.Tensor, tau2: torch.Tensor, out_channel: int = 0,
                            in_channels: tuple[int, int] = (1, 1)) -> torch.Tensor:
        """``kappa2(tau1, tau2) = sum_r alpha_r a_r(tau1) b_r(tau2)`` for one output channel and a
        pair of embedding channels (default: the first feature channel twice, interleaved layout
        index 1 / blocked index C). ``[T1, T2]``."""
        i, j = in_channels
        ka = self.conv.spatial_kernel(tau1)                                # [2R+1, T1, O, 2C]
        kb = self.conv.spatial_kernel(tau2)
        alpha = self.mixer.weight[0]                                       # [R]
        a = ka[1::2, :, out_channel, i]                                    # [R, T1]
        b = kb[2::2, :, out_channel, j]                                    # [R, T2]
        return torch.einsum("r,rs,rt->st", alpha, a, b)


# -- Sec. 3.6: blocks and the model --------------------------------------------------------------------

class SFBlock(nn.Module):
    """Norm-first block (Sec. 3.6): ``z_q += conv(LN1(z_v); x_kv -> x_q)``; ``z_q += FFN(LN2(z_q))``.
    ``activation='identity'`` gives the SFVConvCNP / "-linear" trunk (no pointwise nonlinearity)."""

    def __init__(self, dim: int, channels: int, ffn_dim: int, activation: str = "gelu", volterra_rank: int = 0,
                 norm_first: bool = True, dropout: float = 0.0, **conv_kw):
        super().__init__()
        if activation not in ("gelu", "identity", "relu"):
            raise ValueError(f"activation must be 'gelu', 'relu' or 'identity', got {activation!r}")
        if volterra_rank:
            self.conv = SetFourierVolterraConv(dim, channels, channels, volterra_rank=volterra_rank, **conv_kw)
        else:
            self.conv = SetFourierConv(dim, channels, channels, **conv_kw)
        act = {"gelu": nn.GELU(), "relu": nn.ReLU(), "identity": nn.Identity()}[activation]
        self.ffn = nn.Sequential(nn.Linear(channels, ffn_dim), act, nn.Dropout(dropout),
                                 nn.Linear(ffn_dim, channels), nn.Dropout(dropout))
        self.ln1, self.ln2 = nn.LayerNorm(channels), nn.LayerNorm(channels)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, z_q, z_v, x_q, x_kv, cache=None):
        if self.norm_first:
            z_q = z_q + self.drop(self.conv(self.ln1(z_v), x_kv, x_q, cache, check=False))
            return z_q + self.ffn(self.ln2(z_q))
        z_q = self.ln1(z_q + self.drop(self.conv(z_v, x_kv, x_q, cache, check=False)))
        return self.ln2(z_q + self.ffn(z_q))


def _mlp(d_in: int, hidden: int, d_out: int, n_hidden: int = 2) -> nn.Sequential:
    layers, d = [], d_in
    for _ in range(n_hidden):
        layers += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    return nn.Sequential(*layers, nn.Linear(d, d_out))


def check_task_inputs(xc, yc, xq, dim: int, y_dim: int, dtype: torch.dtype | None = None, finite: bool = True):
    """Shared validation of ``(xc [B,N,D], yc [B,N,Dy], xq [B,M,D])`` for every model: finite float32 or
    float64 tensors of one dtype (the model's ``dtype`` when given). ``finite=False`` keeps the type,
    shape and dtype checks (host-side metadata) but skips the ``isfinite`` test, which reads the
    device: the training loss (:func:`~icml26.sfconvcnp.experiments.np_loss`) calls the models with
    ``validate=False`` so that a training step does not wait on the device."""
    xc = _tensor("xc", xc, 3, last=dim, finite=finite)
    yc = _tensor("yc", yc, 3, last=y_dim, finite=finite)
    xq = _tensor("xq", xq, 3, last=dim, finite=finite)
    _same_dtype((("xc", xc), ("yc", yc), ("xq", xq)), dtype)
    if yc.shape[:2] != xc.shape[:2]:
        raise ValueError(f"yc must match xc on batch and point dimensions {tuple(xc.shape[:2])}, "
                         f"got {tuple(yc.shape[:2])}")
    if xq.shape[0] != xc.shape[0]:
        raise ValueError(f"xq must have the batch size of xc ({xc.shape[0]}), got {xq.shape[0]}")
    if xc.shape[1] == 0:
        raise ValueError("xc: at least one context point is needed (N = 0)")
    if xq.shape[1] == 0:
        raise ValueError("xq: at least one query point is needed (M = 0)")
    return xc, yc, xq


class SFConvCNP(nn.Module):
    """SFConvCNP / SFVConvCNP (spec Sec. 3.6, Algorithm 1).

    Context tokens ``MLP_y([y, 0])``, query tokens ``MLP_y([0, 1])``; ``n_blocks`` pairs of blocks:
    context tokens talk to each other, then queries read the *updated* context; phases are built
    once per forward and shared by every block; a 2-hidden-layer decoder gives
    ``(mu, softplus(s) + min_noise)``. ``volterra_rank > 0`` uses SFVConv layers.
    """

    def __init__(self, dim: int = 1, y_dim: int = 1, channels: int = 64, ffn_dim: int = 128, n_blocks: int = 3,
                 max_freq=4.9, freq_resolution=0.1, groups: int = 4, volterra_rank: int = 0,
                 activation: str = "gelu", share_params: bool = False, min_noise: float = 1e-6,
                 init_lengthscale: float = 0.05, output_mixing: bool = False, span_check: str = "raise",
                 layout: str = "blocked"):
        super().__init__()
        self.dim, self.y_dim = _positive_int("dim", dim), _positive_int("y_dim", y_dim)
        _positive_int("n_blocks", n_blocks)
        if isinstance(volterra_rank, bool) or not isinstance(volterra_rank, int) or volterra_rank < 0:
            raise ValueError(f"volterra_rank must be an integer >= 0, got {volterra_rank!r}")
        self.min_noise = _positive_float("min_noise", min_noise)
        kw = dict(max_freq=max_freq, freq_resolution=freq_resolution, groups=groups,
                  init_lengthscale=init_lengthscale, output_mixing=output_mixing, span_check="off", layout=layout)
        self.encoder = _mlp(y_dim + 1, channels, channels)
        make = partial(SFBlock, dim, channels, ffn_dim, activation, volterra_rank, **kw)
        self.ctx_blocks = nn.ModuleList(make() for _ in range(n_blocks))
        self.qry_blocks = self.ctx_blocks if share_params else nn.ModuleList(make() for _ in range(n_blocks))
        self.decoder = _mlp(channels, channels, 2 * y_dim)
        index, self.resolution = _grid_index(max_freq, freq_resolution, dim)
        self.register_buffer("freq_index", index)
        self.period = [1.0 / r for r in self.resolution]
        if span_check not in ("raise", "warn", "off"):
            raise ValueError(f"span_check must be 'raise', 'warn' or 'off', got {span_check!r}")
        self.span_check = span_check

    def features(self, xc, yc, xq) -> torch.Tensor:
        """Query tokens after the trunk, ``[B, M, C]`` (inputs already validated)."""
        b, m = xq.shape[:2]
        zc = self.encoder(torch.cat([yc, torch.zeros_like(yc[..., :1])], -1))
        q_in = torch.cat([torch.zeros(b, m, self.y_dim, dtype=yc.dtype, device=yc.device),
                          torch.ones(b, m, 1, dtype=yc.dtype, device=yc.device)], -1)
        zq = self.encoder(q_in)
        xi, _ = _grid_from_index(self.freq_index, self.resolution, xc.dtype, xc.device)
        cache = PhaseCache.build(xi, xc, xq)
        for ctx, qry in zip(self.ctx_blocks, self.qry_blocks, strict=True):
            zc = ctx(zc, zc, xc, xc, (cache.context, cache.context))
            zq = qry(zq, zc, xq, xc, (cache.context, cache.query))
        return zq

    def forward(self, xc: torch.Tensor, yc: torch.Tensor, xq: torch.Tensor,
                validate: bool = True) -> torch.distributions.Normal:
        """Predictive ``Normal`` at the queries. ``validate=False`` (the training loss) skips the checks
        that read the device (``isfinite``, the span check, ``Normal``'s argument checks); the values
        are the same."""
        xc, yc, xq = check_task_inputs(xc, yc, xq, self.dim, self.y_dim, _module_dtype(self), finite=validate)
        if validate:
            check_span(xc, xq, self.period, self.span_check)
        out = self.decoder(self.features(xc, yc, xq))
        mu, s = out.split(self.y_dim, -1)
        return torch.distributions.Normal(mu, F.softplus(s) + self.min_noise, validate_args=None if validate else False)


SFVConvCNP = partial(SFConvCNP, volterra_rank=2, activation="identity")
