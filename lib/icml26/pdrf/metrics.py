"""Verification scores as meteorologists compute them (spec Sec. 7.4), batched in torch.

Contingency counts (hits H, misses M, false alarms F, correct negatives R; event = value >= tau)
are summed over the whole test set before any ratio is formed; undefined ratios are NaN.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import check_generator, check_int


def _check_pair(pred, obs):
    for name, x in (("pred", pred), ("obs", obs)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 4 or x.numel() == 0:
            raise ValueError(f"{name} must be a non-empty (B, T, H, W) tensor, got shape {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a float tensor, got {x.dtype}")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name} must be finite")
    if pred.shape != obs.shape:
        raise ValueError(f"pred and obs must have the same shape, got {tuple(pred.shape)} and {tuple(obs.shape)}")


def _check_thresholds(thresholds):
    if isinstance(thresholds, str | bytes):
        raise TypeError(f"thresholds must be a sequence of numbers, got {thresholds!r}")
    try:
        th = [float(v) for v in thresholds]
    except (TypeError, ValueError) as e:
        raise TypeError(f"thresholds must be a sequence of numbers, got {thresholds!r}") from e
    if not th or any(not math.isfinite(v) for v in th) or any(b <= a for a, b in zip(th, th[1:], strict=False)):
        raise ValueError(f"thresholds must be a non-empty, strictly increasing sequence, got {thresholds!r}")
    return th


def contingency(pred: torch.Tensor, obs: torch.Tensor, thresholds) -> torch.Tensor:
    """Counts (n_thr, T, 4) = (H, M, F, R) per threshold and lead, summed over cases and pixels (float64)."""
    _check_pair(pred, obs)
    th = torch.tensor(_check_thresholds(thresholds), device=pred.device, dtype=pred.dtype).view(-1, 1, 1, 1, 1)
    p, o = pred[None] >= th, obs[None] >= th                                        # (n_thr, B, T, H, W)
    red = (1, 3, 4)
    h = (p & o).sum(red)
    m = (~p & o).sum(red)
    f = (p & ~o).sum(red)
    r = (~p & ~o).sum(red)
    return torch.stack([h, m, f, r], -1).double()


def _div(a, b):
    return torch.where(b > 0, a / b.clamp_min(1e-300), torch.full_like(a, float("nan")))


def _check_counts(counts) -> torch.Tensor:
    """Contingency counts (..., 4) = (H, M, F, R): a real tensor of finite, non-negative entries (float64)."""
    if not isinstance(counts, torch.Tensor) or counts.is_complex() or counts.dtype == torch.bool:
        raise TypeError(f"counts must be a real tensor (..., 4), got {type(counts).__name__}")
    if counts.dim() < 1 or counts.shape[-1] != 4:
        raise ValueError(f"counts must have a last dimension of 4 (H, M, F, R), got shape {tuple(counts.shape)}")
    c = counts.double()
    if not bool(torch.isfinite(c).all()) or bool((c < 0).any()):
        raise ValueError("counts must be finite and non-negative (they count hits, misses, false alarms, "
                         "correct negatives)")
    return c


def scores_from_counts(counts: torch.Tensor) -> dict:
    """CSI, POD, FAR, HSS and frequency BIAS from counts (..., 4); zero denominators give NaN.

    CSI, POD and FAR lie in [0, 1], HSS in [-1, 1], BIAS in [0, inf)."""
    c = _check_counts(counts)
    h, m, f, r = c.unbind(-1)
    return {"csi": _div(h, h + m + f), "pod": _div(h, h + m), "far": _div(f, h + f),
            "hss": _div(2 * (h * r - f * m), (h + m) * (m + r) + (h + f) * (f + r)), "bias": _div(h + f, h + m)}


def max_pool(x: torch.Tensor, k: int) -> torch.Tensor:
    """Non-overlapping k x k max-pool of (B, T, H, W); k must divide H and W."""
    check_int("k", k)
    if x.shape[-1] % k or x.shape[-2] % k:
        raise ValueError(f"k={k} must divide H and W, got {tuple(x.shape[-2:])}")
    return F.max_pool2d(x, k)


def _check_window(window):
    if not isinstance(window, int) or isinstance(window, bool) or window < 1 or window % 2 == 0:
        raise ValueError(f"window must be a positive odd int, got {window!r}")


def fss_sums(pred: torch.Tensor, obs: torch.Tensor, threshold: float, window: int) -> torch.Tensor:
    """Per lead (T, 3): sum (P_f - P_o)^2, sum P_f^2, sum P_o^2 over cases and pixels, with fractions
    from a zero-padded ``window`` x ``window`` moving average (Roberts and Lean, as pysteps)."""
    _check_pair(pred, obs)
    _check_window(window)
    th = _check_thresholds([threshold])[0]
    B, T, H, W = pred.shape
    pf = (pred >= th).to(torch.float64).reshape(B * T, 1, H, W)
    po = (obs >= th).to(torch.float64).reshape(B * T, 1, H, W)
    pad = window // 2
    pf = F.avg_pool2d(pf, window, stride=1, padding=pad, count_include_pad=True).view(B, T, H, W)
    po = F.avg_pool2d(po, window, stride=1, padding=pad, count_include_pad=True).view(B, T, H, W)
    red = (0, 2, 3)
    return torch.stack([((pf - po) ** 2).sum(red), (pf**2).sum(red), (po**2).sum(red)], -1)


def fss_from_sums(sums: torch.Tensor) -> torch.Tensor:
    """FSS = 1 - sum (P_f - P_o)^2 / (sum P_f^2 + sum P_o^2); NaN where both fields are empty."""
    if not isinstance(sums, torch.Tensor) or not sums.is_floating_point():
        raise TypeError(f"sums must be a float tensor (..., 3) from fss_sums, got {type(sums).__name__}")
    if sums.dim() < 1 or sums.shape[-1] != 3:
        raise ValueError(f"sums must have a last dimension of 3, got shape {tuple(sums.shape)}")
    if not bool(torch.isfinite(sums).all()) or bool((sums < 0).any()):
        raise ValueError("sums must be finite and non-negative")
    return 1 - _div(sums[..., 0], sums[..., 1] + sums[..., 2])


def nanmean(x) -> float:
    x = torch.as_tensor(x, dtype=torch.float64)
    ok = torch.isfinite(x)
    return float(x[ok].mean()) if bool(ok.any()) else float("nan")


class NowcastEvaluator:
    """Accumulates counts and sums over a test set: per-lead CSI/POD/FAR/HSS/BIAS per threshold,
    CSI-M, pooled CSI (max-pool ``pool``), FSS per window, MSE and advection consistency."""

    def __init__(self, thresholds, t_out: int, fss_windows=(1, 3, 5, 9), pool: int = 4, clip: bool = False):
        self.thresholds = _check_thresholds(thresholds)
        check_int("t_out", t_out)
        for w in fss_windows:
            _check_window(w)
        check_int("pool", pool)
        self.t_out, self.windows, self.pool, self.clip = t_out, tuple(fss_windows), pool, clip
        nt = len(self.thresholds)
        self.counts = torch.zeros(nt, t_out, 4, dtype=torch.float64)
        self.pooled = torch.zeros(nt, t_out, 4, dtype=torch.float64)
        self.fss = torch.zeros(nt, len(self.windows), t_out, 3, dtype=torch.float64)
        self.sse = torch.zeros(t_out, dtype=torch.float64)
        self.sse_sl = torch.zeros(t_out, dtype=torch.float64)
        self.n = 0

    def update(self, pred: torch.Tensor, obs: torch.Tensor, x_sl: torch.Tensor | None = None) -> None:
        _check_pair(pred, obs)
        if pred.shape[1] != self.t_out:
            raise ValueError(f"pred must have t_out={self.t_out} leads, got {pred.shape[1]}")
        if self.clip:
            pred = pred.clamp(0, 1)
        elif float(pred.min()) < 0 or float(pred.max()) > 1 or float(obs.min()) < 0 or float(obs.max()) > 1:
            raise ValueError("pred and obs must lie in [0, 1] (pass clip=True to clip pred explicitly)")
        self.counts += contingency(pred, obs, self.thresholds).cpu()
        pp, po = max_pool(pred, self.pool), max_pool(obs, self.pool)
        self.pooled += contingency(pp, po, self.thresholds).cpu()
        for i, th in enumerate(self.thresholds):
            for j, w in enumerate(self.windows):
                self.fss[i, j] += fss_sums(pred, obs, th, w).cpu()
        B, _, H, W = pred.shape
        self.sse += ((pred - obs).double() ** 2).sum((0, 2, 3)).cpu()
        if x_sl is not None:
            self.sse_sl += ((pred - x_sl).double() ** 2).sum((0, 2, 3)).cpu()
        self.n += B * H * W

    def summary(self) -> dict:
        if self.n == 0:
            raise ValueError("no data: call update() first")
        s = {k: v.numpy() for k, v in scores_from_counts(self.counts).items()}        # (n_thr, T)
        sp = scores_from_counts(self.pooled)
        s["csi_m"] = nanmean(s["csi"])
        s["pooled_csi"] = sp["csi"].numpy()
        s["fss"] = fss_from_sums(self.fss).numpy()                                    # (n_thr, n_win, T)
        s["mse"] = (self.sse / self.n).numpy()
        s["adv_mse"] = (self.sse_sl / self.n).numpy()
        s["thresholds"], s["windows"] = self.thresholds, self.windows
        return s


def off_manifold_residual(x: torch.Tensor, P: torch.Tensor) -> float:
    """Mean || (I - P P^T) x || over samples x (n, D) for an orthonormal P (D, k) (NB1)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not isinstance(P, torch.Tensor) or P.dim() != 2 \
            or x.shape[1] != P.shape[0] or x.numel() == 0:
        raise ValueError(f"x must be (n, D) and P (D, k), got {getattr(x, 'shape', x)} and {getattr(P, 'shape', P)}")
    for name, v in (("x", x), ("P", P)):
        if not v.is_floating_point() or not bool(torch.isfinite(v).all()):
            raise ValueError(f"{name} must be a finite float tensor")
    r = x - (x @ P) @ P.T
    return float(r.norm(dim=1).mean())


def sliced_wasserstein(x: torch.Tensor, y: torch.Tensor, n_proj: int = 256,
                       generator: torch.Generator | None = None) -> float:
    """Sliced 2-Wasserstein distance between equal-size samples x, y (n, d)."""
    for name, v in (("x", x), ("y", y)):
        if not isinstance(v, torch.Tensor) or v.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{name} must be a float32/float64 tensor (n, d), got "
                            f"{v.dtype if isinstance(v, torch.Tensor) else type(v).__name__}")
        if not bool(torch.isfinite(v).all()):
            raise ValueError(f"{name} must be finite")
    if x.shape != y.shape or x.dim() != 2 or x.numel() == 0:
        raise ValueError(f"x and y must be non-empty (n, d) of equal shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.dtype != y.dtype:
        raise TypeError(f"x and y must share one dtype, got {x.dtype} and {y.dtype}")
    check_int("n_proj", n_proj)
    g = check_generator(generator, "generator")
    g = g if g is not None else torch.Generator().manual_seed(0)
    th = torch.randn(x.shape[1], n_proj, generator=g).to(x)
    th = th / th.norm(dim=0, keepdim=True)
    a, _ = torch.sort(x @ th, 0)
    b, _ = torch.sort(y @ th, 0)
    return float(((a - b) ** 2).mean().sqrt())
