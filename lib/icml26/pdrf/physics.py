"""Motion estimation and semi-Lagrangian extrapolation: the physics teacher (spec Sec. 3.3, 7.2).

Paper Sec. 3.2, Eqs. 9-11: motion u = Flow(X_{-1}, X_0) from the last two frames; Eqs. 13-14:
the straight backtrace X_SL^(k)(p) = I(X_0; p - k u(p)). The official code uses OpenCV
Farneback; the book uses a batched torch Horn-Schunck pyramid (a book choice, spec Sec. 7.2).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._checks import check_int, check_real

SCHEMES = ("straight", "trajectory")
INTERPS = ("bilinear", "bicubic")
BOUNDARIES = ("zeros", "border")


def _check_frames(name, x, ndim):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(x.shape)}")
    if not x.is_floating_point() or x.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(f"{name} must be float32 or float64, got {x.dtype}")
    if x.numel() == 0:
        raise ValueError(f"{name} must not be empty, got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} must be finite")


def _base_grid(H, W, ref):
    ys, xs = torch.meshgrid(torch.arange(H, device=ref.device, dtype=ref.dtype),
                            torch.arange(W, device=ref.device, dtype=ref.dtype), indexing="ij")
    return torch.stack([xs, ys])                                                    # (2, H, W)


def _sample(img, coords, mode="bilinear", padding="zeros"):
    """Sample img (B, C, H, W) at pixel coordinates coords (B, 2, H, W) (x first), align_corners."""
    H, W = img.shape[-2:]
    gx = 2 * coords[:, 0] / max(W - 1, 1) - 1
    gy = 2 * coords[:, 1] / max(H - 1, 1) - 1
    return F.grid_sample(img, torch.stack([gx, gy], -1), mode=mode, padding_mode=padding, align_corners=True)


def semi_lagrangian(frame: torch.Tensor, motion: torch.Tensor, n_steps: int, scheme: str = "straight",
                    interp: str = "bilinear", boundary: str = "zeros") -> torch.Tensor:
    """Extrapolate ``frame`` (B, H, W) along ``motion`` (B, 2, H, W) for ``n_steps`` frames.

    ``scheme="straight"`` is the official PDRF teacher (Eq. 13): X^(k)(p) = I(X_0; p - k u(p)).
    ``scheme="trajectory"`` is the pysteps backward midpoint scheme with one iteration: keep a
    displacement D, per step w <- u(p + D - w/2), D <- D - w, w <- u(p + D), sample X_0(p + D)
    (velocity sampled bilinearly with border clamping). Returns (B, n_steps, H, W).
    """
    _check_frames("frame", frame, 3)
    _check_frames("motion", motion, 4)
    B, H, W = frame.shape
    if motion.shape != (B, 2, H, W):
        raise ValueError(f"motion must have shape {(B, 2, H, W)} to match frame, got {tuple(motion.shape)}")
    check_int("n_steps", n_steps)
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if interp not in INTERPS:
        raise ValueError(f"interp must be one of {INTERPS}, got {interp!r}")
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
    motion = motion.to(frame.dtype)
    p = _base_grid(H, W, frame)[None]
    img = frame[:, None]
    out = []
    if scheme == "straight":
        for k in range(1, n_steps + 1):
            out.append(_sample(img, p - k * motion, interp, boundary)[:, 0])
    else:
        D = torch.zeros_like(motion)
        w = motion
        for _ in range(n_steps):
            w = _sample(motion, p + D - 0.5 * w, "bilinear", "border")
            D = D - w
            w = _sample(motion, p + D, "bilinear", "border")
            out.append(_sample(img, p + D, interp, boundary)[:, 0])
    return torch.stack(out, 1)


def _gauss_kernel(sigma, ref):
    r = max(1, int(math.ceil(3 * sigma)))
    x = torch.arange(-r, r + 1, device=ref.device, dtype=ref.dtype)
    k = torch.exp(-0.5 * (x / sigma) ** 2)
    return k / k.sum()


def gaussian_blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of x (B, C, H, W) with replicate padding; sigma <= 0 is the identity."""
    if sigma <= 0:
        return x
    k = _gauss_kernel(sigma, x)
    r = (k.numel() - 1) // 2
    C = x.shape[1]
    x = F.conv2d(F.pad(x, (r, r, 0, 0), mode="replicate"), k.view(1, 1, 1, -1).repeat(C, 1, 1, 1), groups=C)
    return F.conv2d(F.pad(x, (0, 0, r, r), mode="replicate"), k.view(1, 1, -1, 1).repeat(C, 1, 1, 1), groups=C)


_HS_AVG = torch.tensor([[1 / 12, 1 / 6, 1 / 12], [1 / 6, 0.0, 1 / 6], [1 / 12, 1 / 6, 1 / 12]])


def estimate_motion(prev: torch.Tensor, curr: torch.Tensor, levels: int = 2, iters: int = 100,
                    alpha: float = 0.15, presmooth: float = 1.0, smooth_sigma: float = 1.2,
                    clip_ratio: float = 0.1, warps: int = 2) -> torch.Tensor:
    """Horn-Schunck optical flow with a pyramid and warping (book stand-in for Farneback, Eq. 9).

    ``prev``, ``curr``: (B, H, W) frames on a fixed [0, 1] scale (no per-frame normalisation).
    Returns u (B, 2, H, W) in pixels per frame, forward in time: curr(p) ~ prev(p - u(p)); then
    Gaussian-smoothed (``smooth_sigma``) and clipped to +-``clip_ratio`` min(H, W) (official).
    """
    _check_frames("prev", prev, 3)
    _check_frames("curr", curr, 3)
    if prev.shape != curr.shape:
        raise ValueError(f"prev and curr must have the same shape, got {tuple(prev.shape)} and {tuple(curr.shape)}")
    check_int("levels", levels)
    B, H, W = prev.shape
    if min(H, W) // 2 ** (levels - 1) < 8:
        raise ValueError(f"levels={levels} makes the coarsest level smaller than 8 px for a {H}x{W} frame")
    check_int("iters", iters)
    check_int("warps", warps)
    check_real("alpha", alpha, lo=0.0, strict=True)
    for name, v in (("presmooth", presmooth), ("smooth_sigma", smooth_sigma), ("clip_ratio", clip_ratio)):
        check_real(name, v, lo=0.0)
    a = gaussian_blur(prev[:, None], presmooth)
    b = gaussian_blur(curr[:, None], presmooth)
    pyr = [(a, b)]
    for _ in range(levels - 1):
        a, b = F.avg_pool2d(a, 2), F.avg_pool2d(b, 2)
        pyr.append((a, b))
    avg = _HS_AVG.to(prev.device, prev.dtype).view(1, 1, 3, 3)
    u = None
    for lev in reversed(range(levels)):
        a, b = pyr[lev]
        h, w = a.shape[-2:]
        u = torch.zeros(B, 2, h, w, device=a.device, dtype=a.dtype) if u is None else \
            2 * F.interpolate(u, size=(h, w), mode="bilinear", align_corners=False)
        p = _base_grid(h, w, a)[None]
        for _ in range(warps):
            bw = _sample(b, p + u, "bilinear", "border")                           # curr(p + u) ~ prev(p)
            m = 0.5 * (a + bw)
            mp = F.pad(m, (1, 1, 1, 1), mode="replicate")
            Ix = 0.5 * (mp[..., 1:-1, 2:] - mp[..., 1:-1, :-2])
            Iy = 0.5 * (mp[..., 2:, 1:-1] - mp[..., :-2, 1:-1])
            It = bw - a
            den = alpha**2 + Ix**2 + Iy**2
            du = torch.zeros_like(u)
            for _ in range(iters):
                dup = F.pad(du, (1, 1, 1, 1), mode="replicate")
                ub = F.conv2d(dup.reshape(-1, 1, h + 2, w + 2), avg).view(B, 2, h, w)
                r = (Ix * ub[:, :1] + Iy * ub[:, 1:] + It) / den
                du = ub - torch.cat([Ix, Iy], 1) * r
            u = u + du
    u = gaussian_blur(u, smooth_sigma)
    lim = clip_ratio * min(H, W)
    return u.clamp(-lim, lim)


def persistence(frames_in: torch.Tensor, t_out: int) -> torch.Tensor:
    """The last observed frame repeated ``t_out`` times: (B, t_out, H, W)."""
    _check_frames("frames_in", frames_in, 4)
    check_int("t_out", t_out)
    return frames_in[:, -1:].expand(-1, t_out, -1, -1).clone()


def sl_teacher(frames_in: torch.Tensor, t_out: int, motion: torch.Tensor | None = None,
               scheme: str = "straight", **flow_kw) -> torch.Tensor:
    """The semi-Lagrangian teacher X_SL (spec Sec. 3.3, Eqs. 9-14): motion from the last two input
    frames (or the given ``motion``), straight backtrace of the last frame, clipped to [0, 1], detached."""
    _check_frames("frames_in", frames_in, 4)
    if frames_in.shape[1] < 2:
        raise ValueError(f"frames_in needs t_in >= 2 frames (motion needs two), got {frames_in.shape[1]}")
    check_int("t_out", t_out)
    with torch.no_grad():
        if motion is None:
            motion = estimate_motion(frames_in[:, -2], frames_in[:, -1], **flow_kw)
        return semi_lagrangian(frames_in[:, -1], motion, t_out, scheme=scheme).clamp(0, 1).detach()


def centroid(field: torch.Tensor) -> torch.Tensor:
    """Intensity-weighted centroid (B, 2) = (x, y) of field (B, H, W)."""
    _check_frames("field", field, 3)
    p = _base_grid(*field.shape[-2:], field)
    mass = field.sum((-1, -2)).clamp_min(1e-12)
    return torch.stack([(field * p[0]).sum((-1, -2)), (field * p[1]).sum((-1, -2))], -1) / mass[:, None]


def rotation_test(n_steps: int = 8, omega: float = 0.05, size: int = 32, blob=(22.0, 15.5), sigma: float = 2.5,
                  centre=(15.5, 15.5)) -> dict:
    """Spec claim 5: centroid error vs lead of both schemes for a solid-body rotation (float64)."""
    dt = torch.float64
    ys, xs = torch.meshgrid(torch.arange(size, dtype=dt), torch.arange(size, dtype=dt), indexing="ij")
    frame = torch.exp(-0.5 * ((xs - blob[0]) ** 2 + (ys - blob[1]) ** 2) / sigma**2)[None]
    motion = torch.stack([-omega * (ys - centre[1]), omega * (xs - centre[0])])[None]
    k = torch.arange(1, n_steps + 1, dtype=dt)
    rx, ry = blob[0] - centre[0], blob[1] - centre[1]
    true = torch.stack([centre[0] + rx * torch.cos(omega * k) - ry * torch.sin(omega * k),
                        centre[1] + rx * torch.sin(omega * k) + ry * torch.cos(omega * k)], -1)
    out = {"lead": k.numpy()}
    for scheme in SCHEMES:
        ext = semi_lagrangian(frame, motion, n_steps, scheme=scheme)[0]
        out[scheme] = (centroid(ext) - true).norm(dim=-1).numpy()
    return out
