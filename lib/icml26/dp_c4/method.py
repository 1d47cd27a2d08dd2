"""DP-C4 (reconstruction from the abstract): per-example anchors, coupled clipping of the innovation,
shifted (decaying) thresholds and a calibrated noise allocation.

Only the abstract of the paper is public. The update rule below is **the book's reconstruction**
(spec Sec. 3.3), kept in one function, :func:`dp_c4_step`, so that it can be swapped for the paper's rule.
Equation numbers refer to the chapter's notebooks: (DPC4-1) innovation clip, (DPC4-2) release,
(DPC4-3) gradient estimate, (DPC4-4) anchor update, (DPC4-5) the iterate update.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .problems import FiniteSumProblem, _check_int, _check_pos, check_generator

MAX_ANCHOR_BYTES = 2 * 1024 ** 3


def clip_rows(G: Tensor, C) -> Tensor:
    """Row-wise clip :math:`\\operatorname{clip}(v,C)=v\\min(1,C/\\|v\\|_2)` over the last axis.

    ``C`` is a positive float or a tensor broadcastable to ``G.shape[:-1]`` (one threshold per run).
    Rows with norm <= C are returned unchanged bit for bit; zero rows stay zero. A row whose squared
    norm overflows (``[1e20, 0, 0]`` in float32) is clipped through the row divided by its largest
    absolute entry, so it comes out with norm C, not zero."""
    if not isinstance(G, Tensor) or G.ndim < 1:
        raise TypeError("G must be a tensor with at least one axis")
    if G.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"G must be float32 or float64, got {G.dtype}")
    if G.shape[-1] == 0:
        raise ValueError(f"G must have a non-empty last axis and finite entries, got shape {tuple(G.shape)}")
    if isinstance(C, bool) or not isinstance(C, (int, float, np.integer, np.floating, Tensor)):
        raise TypeError(f"C must be a positive number or a tensor, got {type(C).__name__}")
    C = torch.as_tensor(C, dtype=G.dtype, device=G.device)
    if C.numel() == 0 or not bool(torch.isfinite(C).all()) or bool((C <= 0).any()):
        raise ValueError(f"C must be finite and > 0, got {C}")
    norms = G.norm(dim=-1)
    # a NaN or inf entry makes its row's norm non-finite, so the full check of G runs only then (it is
    # as costly as the clip itself); an overflowed but finite row also lands here and passes it
    if not bool(torch.isfinite(norms).all()) and not bool(torch.isfinite(G).all()):
        raise ValueError(f"G must have a non-empty last axis and finite entries, got shape {tuple(G.shape)}")
    try:
        torch.broadcast_shapes(C.shape, norms.shape)
    except RuntimeError as exc:
        raise ValueError(f"C of shape {tuple(C.shape)} does not broadcast to G's rows {tuple(norms.shape)}") from exc
    C = C.expand_as(norms) if C.ndim else C
    over = norms > C
    scale = torch.where(over, C / torch.where(over, norms, torch.ones_like(norms)), torch.ones_like(norms))
    huge = torch.isinf(norms)                 # G is finite, so the sum of squares overflowed
    if bool(huge.any()):
        m = torch.where(huge, G.abs().amax(-1), torch.ones_like(norms))
        scale = torch.where(huge, (C / m) / (G / m[..., None]).norm(dim=-1), scale)
    return G * scale[..., None]              # scale is exactly 1 on rows within C: they come back bit for bit


def _clip_rows_fast(G: Tensor, C: Tensor, guard: _Guard) -> Tensor:
    """:func:`clip_rows` on checked thresholds without a host read: the same values on every row whose
    norm is finite. A non-finite norm (a NaN or inf entry, or a finite row whose squared norm overflows,
    which :func:`clip_rows` treats apart) is flagged in ``guard`` instead, and the caller repeats the run
    with :func:`clip_rows` (which then raises, or clips the overflowed row exactly)."""
    return G * _fast_clip_scale(G, C, guard)[..., None]


def _masked_clip_inplace(G: Tensor, C: Tensor, mask: Tensor, guard: _Guard) -> Tensor:
    """``_clip_rows_fast(G, C, guard) * mask[..., None]`` computed in ``G`` itself (returned): each row is
    multiplied once, by ``scale * mask``, which is ``scale`` or 0, so the values agree bit for bit."""
    return G.mul_((_fast_clip_scale(G, C, guard) * mask)[..., None])


def _fast_clip_scale(G: Tensor, C: Tensor, guard: _Guard) -> Tensor:
    """The per-row factor min(1, C / ||row||) of the unchecked clip; a non-finite norm is flagged in ``guard``."""
    norms = G.norm(dim=-1)
    guard.require(torch.isfinite(norms).all())
    over = norms > C
    return torch.where(over, C / torch.where(over, norms, torch.ones_like(norms)), torch.ones_like(norms))


class _Guard:
    """Device-side record of a fast (sync-free) run's assumptions: each step ANDs its conditions into one
    boolean, read once after the loop (:meth:`held`); when one failed, the run is repeated exactly."""

    def __init__(self, device):
        self.ok = torch.ones((), dtype=torch.bool, device=device)
        self.used = False

    def require(self, cond: Tensor) -> None:
        self.ok, self.used = self.ok & cond, True

    def held(self) -> bool:
        return not self.used or bool(self.ok)    # the one host read of a fast run


@dataclass
class StagedSchedule:
    """K stages of ``steps_per_stage`` steps: thresholds :math:`C_k` and noise multipliers :math:`\\sigma_k`.

    ``thresholds`` and ``sigmas`` are ``(K,)`` for one run or ``(R, K)`` for R runs sharing K and m.
    ``sigmas`` may be all zero only for the noiseless mode (``dp_c4(..., noise=False)``)."""

    thresholds: Tensor
    sigmas: Tensor
    steps_per_stage: int

    def __post_init__(self):
        self.thresholds = torch.as_tensor(self.thresholds, dtype=torch.float64)
        self.sigmas = torch.as_tensor(self.sigmas, dtype=torch.float64)
        if self.thresholds.ndim not in (1, 2) or self.thresholds.shape[-1] < 1:
            raise ValueError(f"thresholds must be (K,) or (R, K), got shape {tuple(self.thresholds.shape)}")
        if self.sigmas.shape != self.thresholds.shape:
            raise ValueError(f"sigmas and thresholds must have the same shape, got {tuple(self.sigmas.shape)} "
                             f"and {tuple(self.thresholds.shape)}")
        if not bool(torch.isfinite(self.thresholds).all()) or bool((self.thresholds <= 0).any()):
            raise ValueError("thresholds must be finite and > 0")
        if not bool(torch.isfinite(self.sigmas).all()) or bool((self.sigmas < 0).any()):
            raise ValueError("sigmas must be finite and >= 0")
        self.steps_per_stage = _check_int("steps_per_stage", self.steps_per_stage)

    @property
    def K(self) -> int:
        return int(self.thresholds.shape[-1])

    @property
    def T(self) -> int:
        return self.K * self.steps_per_stage

    @property
    def runs(self) -> int:
        return 1 if self.thresholds.ndim == 1 else int(self.thresholds.shape[0])

    def at(self, t: int) -> tuple[Tensor, Tensor]:
        """(C_t, sigma_t) of step t, each of shape (R,)."""
        t = _check_int("t", t, 0)
        if t >= self.T:
            raise ValueError(f"t must be < T={self.T}, got {t}")
        k = t // self.steps_per_stage
        C, s = self.thresholds.reshape(-1, self.K), self.sigmas.reshape(-1, self.K)
        return C[:, k], s[:, k]


def geometric_thresholds(C0: float, rho: float, K: int) -> Tensor:
    """The shifted-threshold schedule :math:`C_k=C_0\\rho^k`, k = 0..K-1."""
    C0 = _check_pos("C0", C0)
    if isinstance(rho, bool) or not isinstance(rho, (int, float, np.floating)) or not math.isfinite(rho) \
            or not 0 < rho <= 1:
        raise ValueError(f"rho must be in (0, 1], got {rho!r}")
    K = _check_int("K", K)
    return C0 * float(rho) ** torch.arange(K, dtype=torch.float64)


@dataclass
class Trace:
    """Logged every ``log_every`` steps; leading axis = run. ``tilt`` is the accumulated noise
    :math:`\\tilde H-\\frac1n\\sum_i h_i` at the end (a diagnostic, never released by a private run)."""

    x: Tensor
    steps: Tensor
    dist: Tensor | None
    loss: Tensor
    noise_std: Tensor
    clip_frac: Tensor
    innov_norm: Tensor
    tilt: Tensor | None = None
    eps: float | None = None
    x_avg: Tensor | None = None     # mean of the last ``tail`` iterates (post-processing), when ``tail > 0``


def _check_lr(lr, runs: int) -> float | Tensor:
    """A positive step size, or one per run: a 1-D tensor/sequence of ``runs`` positive numbers."""
    if isinstance(lr, (Tensor, list, tuple, np.ndarray)):
        try:
            t = torch.as_tensor(lr, dtype=torch.float64).reshape(-1)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TypeError(f"lr must be a number or a 1-D sequence of numbers: {exc}") from None
        if t.numel() not in (1, runs) or not bool(torch.isfinite(t).all()) or bool((t <= 0).any()):
            raise ValueError(f"lr must hold 1 or {runs} finite positive step sizes (one per run), got {lr!r:.80}")
        return t if t.numel() == runs else float(t[0])
    return _check_pos("lr", lr)


def _check_streams(streams, runs: int) -> int:
    """``streams`` S independent random streams shared by R = S x configs runs (0: one stream per run)."""
    streams = _check_int("streams", streams, 0)
    if streams and runs % streams:
        raise ValueError(f"streams must divide the number of runs R={runs}, got {streams}")
    return streams


def _check_tail(tail, T: int) -> int:
    tail = _check_int("tail", tail, 0)
    if tail > T:
        raise ValueError(f"tail must be at most T={T} (iterates averaged), got {tail}")
    return tail


def _check_run_args(problem, lr, q, x0, runs, generator=None):
    if not isinstance(problem, FiniteSumProblem):
        raise TypeError(f"problem must be a FiniteSumProblem, got {type(problem).__name__}")
    check_generator(generator)
    lr = _check_lr(lr, runs)
    if isinstance(q, bool) or not isinstance(q, (int, float, np.floating)) or not math.isfinite(q) \
            or not 0 < q <= 1:
        raise ValueError(f"q must be in (0, 1], got {q!r}")
    if x0 is None:
        x = torch.zeros(runs, problem.dim, dtype=problem.X.dtype, device=problem.X.device)
    else:
        if not isinstance(x0, Tensor):
            raise TypeError("x0 must be a tensor")
        if x0.ndim not in (1, 2) or x0.shape[-1] != problem.dim:
            raise ValueError(f"x0 must have shape (d,) or (R, d) with d={problem.dim}, got {tuple(x0.shape)}")
        if x0.ndim == 2 and x0.shape[0] not in (1, runs):
            raise ValueError(f"x0 must have 1 or R={runs} rows, got {tuple(x0.shape)}")
        if not x0.is_floating_point() or not bool(torch.isfinite(x0).all()):
            raise ValueError("x0 must be a floating tensor with finite entries (no NaN or inf)")
        x = x0.to(problem.X).expand(runs, problem.dim).clone()
    if isinstance(lr, Tensor):
        lr = lr.to(x)[:, None]
    return lr, float(q), x


def _mask(R: int, n: int, q: float, generator, like: Tensor, streams: int = 0) -> Tensor:
    """Poisson sampling: each example independently in the batch with probability q, per run. With
    ``streams`` S > 0, run r uses stream r mod S (runs ordered configuration-major, seeds inner), so
    every configuration sees the same batches per seed (common random numbers)."""
    if q == 1.0:
        return torch.ones(R, n, dtype=like.dtype, device=like.device)
    S = streams or R
    u = torch.rand(S, n, generator=generator, dtype=like.dtype, device=generator.device if generator else None)
    return (u.to(like.device) < q).to(like.dtype).repeat(R // S, 1)


def _batch_cap(n: int, q: float, draws: int) -> int:
    """The fixed padded size of a Poisson batch: the smallest b with :math:`P(\\mathrm{Bin}(n,q)>b)\\le
    10^{-3}/\\text{draws}`, so that a run drawing ``draws`` batches (streams x steps) overflows it with
    probability at most 1e-3; a run that does overflow is repeated with exact sizes (:func:`dp_c4`), so no
    batch is ever truncated and the sampling, hence the privacy accounting, is unchanged."""
    from scipy.stats import binom

    return int(min(n, max(1, binom.isf(1e-3 / max(draws, 1), n, q))))


def _batch_idx(mask: Tensor, streams: int = 0, size: int | None = None) -> tuple[Tensor, Tensor]:
    """Padded indices of each run's Poisson batch: ``idx`` ``(R, b)``, members first (in index order), and
    ``valid`` ``(R, b)``, 1 for members, 0 for padding (padding indices are distinct non-members, so
    scattering zeros back through them is harmless). ``b`` is ``size`` (fixed: no host read; a batch larger
    than ``size`` loses members, which the caller must detect) or, with ``size=None``, the largest batch
    (one host read). With ``streams`` S > 0 the rows repeat with period S (:func:`_mask`), so only the
    first S are sorted and the result repeated."""
    if streams and streams < len(mask):
        idx, valid = _batch_idx(mask[:streams], size=size)
        reps = len(mask) // streams
        return idx.repeat(reps, 1), valid.repeat(reps, 1)
    b = max(int(mask.sum(1).max()), 1) if size is None else size
    idx = torch.argsort(mask, dim=1, descending=True, stable=True)[:, :b]
    return idx, mask.gather(1, idx)


def _noise(R: int, d: int, generator, like: Tensor, streams: int = 0) -> Tensor:
    """Standard normal draws ``(R, d)``; with ``streams`` S > 0, run r gets stream r mod S (see :func:`_mask`)."""
    S = streams or R
    z = torch.randn(S, d, generator=generator, dtype=like.dtype,
                    device=generator.device if generator is not None else None)
    return z.to(like.device).repeat(R // S, 1)


def dp_c4_step(G: Tensor, h: Tensor, H: Tensor, mask: Tensor, C: Tensor, noise: Tensor, q: float,
               n: int | None = None):
    """One DP-C4 step (reconstruction, spec Sec. 3.3), batched over R runs.

    G: per-example gradients ``(R, n, d)`` at the current iterate; h: anchors ``(R, n, d)``; H: public
    anchor aggregate ``(R, d)``; mask: Poisson batch ``(R, n)``; C: thresholds ``(R,)``; noise: the
    Gaussian draw already scaled to std :math:`\\sigma_kC_k`, ``(R, d)``. ``G``, ``h`` and ``mask`` may
    instead hold only gathered rows ``(R, b, .)`` (the batch, padded with masked rows); then ``n`` must be
    the data-set size. Returns ``(g, h, H, S, Delta)`` for the rows given:

    (DPC4-1) :math:`\\delta_i=\\operatorname{clip}(\\nabla f_i(x_t)-h_i,C_k)` for i in the batch;
    (DPC4-2) :math:`\\tilde S_t=\\sum_{i\\in B_t}\\delta_i+\\zeta_t` -- the only released quantity;
    (DPC4-3) :math:`g_t=\\tilde H+\\tilde S_t/(qn)`;
    (DPC4-4) :math:`h_i\\leftarrow h_i+\\delta_i`, :math:`\\tilde H\\leftarrow\\tilde H+\\tilde S_t/n`.
    """
    return _dp_c4_step(G, h, H, mask, C, noise, q, n, clip_rows)


def _dp_c4_step(G, h, H, mask, C, noise, q, n, clip):
    """:func:`dp_c4_step` with the row clip ``clip`` (:func:`clip_rows` or a guarded fast clip)."""
    n = G.shape[1] if n is None else n
    Delta = clip(G - h, C[:, None]) * mask[..., None]
    S = Delta.sum(1) + noise
    g = H + S / (q * n)
    return g, h + Delta, H + S / n, S, Delta


def _dp_c4_step_inplace(G, h, H, mask, C, noise, q, n, guard: _Guard, update: bool = True):
    """:func:`dp_c4_step` with the clip of :func:`_clip_rows_fast`, in place: ``G`` is overwritten with the
    clipped innovations :math:`\\Delta` and, if ``update``, ``h`` with :math:`h+\\Delta`. The same values
    bit for bit (a masked row is scaled by ``scale * 0 = 0`` instead of by ``scale``, then 0). Returns
    ``(g, H + S/n, sum of Delta)``."""
    D = _masked_clip_inplace(G.sub_(h), C[:, None], mask, guard)
    dsum = D.sum(1)
    S = dsum + noise
    if update:
        h.add_(D)
    return H + S / (q * n), H + S / n, dsum


def dp_c4(problem: FiniteSumProblem, schedule: StagedSchedule, lr: float, q: float = 1.0, generator=None,
          x0: Tensor | None = None, x_star: Tensor | None = None, noise: bool = True, log_every: int = 1,
          max_anchor_bytes: int = MAX_ANCHOR_BYTES, drop_tilt: bool = False, anchors: bool = True,
          streams: int = 0, tail: int = 0) -> Trace:
    """Algorithm 1, DP-C4 (reconstruction from the abstract): R runs at once, T = K m steps.

    Step t of stage k = floor(t/m): Poisson batch, innovation clip at :math:`C_k`, release with noise
    std :math:`\\sigma_kC_k`, gradient estimate, anchor update, :math:`x_{t+1}=x_t-\\eta g_t` (DPC4-5).
    ``noise=False`` is the noiseless mode (no privacy claimed). Per-example anchors are private state
    and never returned; the trace logs aggregates only.

    ``drop_tilt=True`` is a **non-private diagnostic**: after every step the public aggregate is reset to
    the exact anchor mean, :math:`\\tilde H\\leftarrow\\frac1n\\sum_ih_i`, so the noise of past steps is
    forgotten (it reads private state; no privacy is claimed). It isolates the accumulated tilt. The mean
    is carried as a running sum, :math:`\\tilde H\\leftarrow\\tilde H+\\frac1n\\sum_{i\\in B_t}\\delta_i` (the release
    without its noise), not recomputed from the ``(R, n, d)`` table every step: equal up to round-off.

    ``anchors=False`` keeps every anchor and :math:`\tilde H` at zero: the same thresholds, noise
    allocation and privacy, but plain clipping of :math:`\nabla f_i` (DP-SGD on DP-C4's schedule), the
    positive control of the anchors. ``lr`` may hold one step size per run. ``streams`` and ``tail`` as
    in :func:`~.baselines.dp_sgd` (shared random streams per seed; average of the last ``tail`` iterates
    in ``Trace.x_avg``).

    The loop reads nothing back to the host per step (issue 43): a Poisson batch is padded to a fixed size
    (:func:`_batch_cap`) and masked, and the clip's checks become device-side flags read once after the
    loop. If a batch outgrew the padded size or an innovation norm was not finite, the run is repeated from
    the same generator state on the exact path (each batch padded to its step's largest, :func:`clip_rows`
    with its checks), so no batch is ever truncated and a non-finite gradient still raises ``ValueError``.
    Both paths give the same iterates up to round-off in the last bits (padding rows are zeros, but the
    length of the padded axis changes the blocking of its sums). The fast path also reuses one buffer for
    the per-example gradients and one for the gathered anchors, and clips in place
    (:func:`_dp_c4_step_inplace`): the values of :func:`dp_c4_step` bit for bit, without allocating and
    zero-filling several ``(R, b, d)`` tensors per step."""
    if not isinstance(anchors, bool) or not isinstance(drop_tilt, bool):
        raise TypeError("anchors and drop_tilt must be booleans")
    if not isinstance(schedule, StagedSchedule):
        raise TypeError(f"schedule must be a StagedSchedule, got {type(schedule).__name__}")
    R = schedule.runs
    lr, q, x = _check_run_args(problem, lr, q, x0, R, generator)
    log_every = _check_int("log_every", log_every)
    streams, tail = _check_streams(streams, R), _check_tail(tail, schedule.T)
    if noise and bool((schedule.sigmas <= 0).any()):
        raise ValueError("sigmas must be > 0 when noise=True (sigma = 0 only with noise=False)")
    n, d = problem.n, problem.dim
    nbytes = R * n * d * problem.X.element_size()
    if nbytes > max_anchor_bytes:
        raise ValueError(f"the anchor table would take {nbytes / 2 ** 30:.2f} GiB (R={R}, n={n}, d={d}), "
                         f"over max_anchor_bytes={max_anchor_bytes / 2 ** 30:.2f} GiB")
    if noise and generator is None:
        raise ValueError("generator is required when noise=True or q < 1")
    if q < 1 and generator is None:
        raise ValueError("generator is required when q < 1")
    args = (problem, schedule, lr, q, generator, x, x_star, noise, log_every, drop_tilt, anchors, streams, tail)
    state = generator.get_state() if generator is not None else None
    tr, held = _dp_c4_run(*args, fast=True)
    if not held:                        # a batch over the padded size, or a non-finite / overflowed row:
        if generator is not None:       # the same draws again, with exact batch sizes and clip_rows' checks
            generator.set_state(state)
        tr, _ = _dp_c4_run(*args, fast=False)
    return tr


def _dp_c4_run(problem, schedule, lr, q, generator, x, x_star, noise, log_every, drop_tilt, anchors, streams, tail,
               fast: bool):
    """The loop of :func:`dp_c4` on checked arguments; returns ``(trace, held)``.

    ``fast=True`` makes no host read per step: Poisson batches padded to the fixed size :func:`_batch_cap`
    and the unchecked clip :func:`_clip_rows_fast`, with their assumptions (no batch over the padded size,
    every innovation norm finite) recorded on the device and read once at the end (``held``). ``fast=False``
    is the exact path: each batch padded to the largest one of its step (one host read) and :func:`clip_rows`
    with its checks. Both give the same iterates up to round-off (padding rows are zeros)."""
    R = schedule.runs
    n, d = problem.n, problem.dim
    Cs = schedule.thresholds.reshape(R, -1).to(problem.X)
    sig = schedule.sigmas.reshape(R, -1).to(problem.X)
    h = torch.zeros(R, n, d, dtype=x.dtype, device=x.device)
    H = torch.zeros(R, d, dtype=x.dtype, device=x.device)
    logs = {k: [] for k in ("steps", "dist", "loss", "std", "clip", "innov")}
    m = schedule.steps_per_stage
    x_sum = torch.zeros_like(x) if tail else None
    row_base = (torch.arange(R, device=x.device) * n)[:, None]
    guard = _Guard(x.device)
    cap = _batch_cap(n, q, (streams or R) * schedule.T) if fast and q < 1 else None
    # the fast path has fixed shapes, so the per-example gradients and the gathered anchors reuse one
    # buffer each: a fresh (R, b, d) tensor per step costs more than the arithmetic done on it (the
    # allocator maps and zero-fills new pages for large tensors)
    rows = (n if q == 1 else cap) if fast else None
    Gbuf = torch.empty(R, rows, d, dtype=x.dtype, device=x.device) if rows else None
    hbuf = torch.empty(R, rows, d, dtype=x.dtype, device=x.device) if rows and q < 1 else None
    for t in range(schedule.T):
        k = t // m
        C, std = Cs[:, k], sig[:, k] * Cs[:, k]
        mask = _mask(R, n, q, generator, x, streams)
        zeta = _noise(R, d, generator, x, streams) * std[:, None] if noise else torch.zeros_like(H)
        if q < 1:                       # Poisson batch: gradients and anchors of the sampled rows only
            if cap is not None:
                guard.require((mask[:streams or R].sum(1) <= cap).all())
            idx, bmask = _batch_idx(mask, streams, cap)
            # rows of the flat (R n, d) anchor table: index_select / index_copy_ move whole rows, much
            # faster than gather / scatter_ along axis 1 with an expanded index (the same values)
            flat = (idx + row_base).reshape(-1)
            G = problem.per_sample_grads(x, idx, out=Gbuf)
            hb = (h.view(-1, d).index_select(0, flat) if hbuf is None else
                  torch.index_select(h.view(-1, d), 0, flat, out=hbuf.view(-1, d))).view(R, -1, d)
        else:
            bmask, G, hb = mask, problem.per_sample_grads(x, out=Gbuf), h
        if t % log_every == 0 or t == schedule.T - 1:
            inn = (G - hb).norm(dim=-1)
            nb = bmask.sum(1).clamp_min(1)
            _log(logs, t, problem, x, x_star, std if noise else torch.zeros_like(std),
                 ((inn > C[:, None]).to(x.dtype) * bmask).sum(1) / nb, (inn * bmask).sum(1) / nb)
        if fast:                        # in place: G becomes the clipped innovations, hb the new anchors
            g, H_new, dsum = _dp_c4_step_inplace(G, hb, H, bmask, C, zeta, q, n, guard, update=anchors)
        else:
            g, hb, H_new, _, Delta = _dp_c4_step(G, hb, H, bmask, C, zeta, q, n, clip_rows)
            dsum = Delta.sum(1)
        if anchors:                     # (without anchors, DP-SGD on DP-C4's schedule: h and H stay at zero)
            if q < 1:
                h.view(-1, d).index_copy_(0, flat, hb.reshape(-1, d))   # batch rows are distinct
            else:
                h = hb
            # drop_tilt: H stays the exact anchor mean, which moves by the mean clipped innovation
            # (the release without its noise), instead of H + S_t / n
            H = H + dsum / n if drop_tilt else H_new
        x = x - lr * g
        if tail and t >= schedule.T - tail:
            x_sum += x
    if fast and not guard.held():
        return None, False
    tilt = H - h.mean(1)
    tr = _trace(logs, problem, x, x_star, tilt)
    tr.x_avg = x_sum / tail if tail else None
    return tr, True


def _log(logs, t, problem, x, x_star, std, clip, innov):
    logs["steps"].append(t)
    logs["loss"].append(problem.loss(x))
    logs["dist"].append((x - x_star.to(x)).norm(dim=-1) if x_star is not None else torch.zeros(len(x)))
    logs["std"].append(std)
    logs["clip"].append(clip)
    logs["innov"].append(innov)


def _trace(logs, problem, x, x_star, tilt=None) -> Trace:
    def st(key):
        return torch.stack(logs[key], 1).cpu()

    return Trace(x=x, steps=torch.tensor(logs["steps"]), dist=st("dist") if x_star is not None else None,
                 loss=st("loss"), noise_std=st("std"), clip_frac=st("clip"), innov_norm=st("innov"), tilt=tilt)
