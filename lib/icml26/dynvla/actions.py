"""FAST-lite action tokens (spec Sec. 7.2): orthonormal DCT-II over time per dimension, scale,
round, clip, shift; no BPE (the paper's FAST {cite}`dynvla-pertsch2025fast` adds BPE on top)."""

from __future__ import annotations

import numpy as np
import torch

from ._checks import pos_int, real


def dct_matrix(T: int) -> np.ndarray:
    """Orthonormal DCT-II matrix C [T,T]: coefficients = C @ x, x = C.T @ coefficients."""
    n = np.arange(T)
    C = np.cos(np.pi * (n[None] + 0.5) * n[:, None] / T) * np.sqrt(2.0 / T)
    C[0] /= np.sqrt(2.0)
    return C


class FastLite:
    """Trajectory [N,8,2] (ego frame, metres) <-> 16 tokens in [0, 255].

    tokens = clip(round(gamma * DCT(x / s)), -128, 127) + 128, interleaved low frequency first:
    [q^x_0, q^y_0, q^x_1, q^y_1, ...]. Without clipping, Parseval bounds the L2 reconstruction
    error per dimension by sqrt(T) * 0.5 / gamma * s (spec Sec. 4.6)."""

    vocab_size = 256

    def __init__(self, gamma: float = 64.0, scale=(60.0, 6.0), clip: int = 127, T: int = 8):
        real(gamma, "gamma", lo=0.0, strict=True)
        # a token is q + clip + 1 with q in [-clip - 1, clip], i.e. in [0, 2 clip + 1]: the 256-token
        # vocabulary holds it only for clip <= 127 (clip = 1000 would emit tokens up to 2001)
        pos_int(clip, "clip", 0)
        if 2 * (clip + 1) > self.vocab_size:
            raise ValueError(f"clip must be <= {self.vocab_size // 2 - 1} so that the tokens 0..2 clip + 1 fit the "
                             f"{self.vocab_size}-token vocabulary, got {clip}")
        try:
            scale = np.asarray(scale, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"scale must be two positive numbers, got {scale!r}") from exc
        if scale.shape != (2,) or not np.isfinite(scale).all() or (scale <= 0).any():
            raise ValueError(f"scale must be two positive numbers, got {scale!r}")
        pos_int(T, "T")
        self.gamma, self.scale, self.clip, self.T = float(gamma), scale, int(clip), T
        self.C = dct_matrix(T)
        self.n_tokens = 2 * T

    def bound(self) -> np.ndarray:
        """Per-dimension L2 error bound sqrt(T) * 0.5 / gamma * s (no clipping)."""
        return np.sqrt(self.T) * 0.5 / self.gamma * self.scale

    def coefficients(self, traj) -> np.ndarray:
        from .metric import check_traj
        traj = np.asarray(check_traj(traj), dtype=float)
        if traj.shape[-2] != self.T:
            raise ValueError(f"traj must have {self.T} waypoints, got {traj.shape[-2]}")
        return np.einsum("kt,...td->...kd", self.C, traj / self.scale) * self.gamma    # [...,T,2]

    def encode(self, traj) -> np.ndarray:
        q = np.clip(np.round(self.coefficients(traj)), -self.clip - 1, self.clip).astype(np.int64) + self.clip + 1
        return q.reshape(q.shape[:-2] + (2 * self.T,))

    def clipped(self, traj) -> np.ndarray:
        """[N] bool: was any coefficient clipped?"""
        c = np.round(self.coefficients(traj))
        return ((c < -self.clip - 1) | (c > self.clip)).reshape(c.shape[:-2] + (-1,)).any(-1)

    def decode(self, tokens) -> np.ndarray:
        if isinstance(tokens, torch.Tensor):
            tokens = tokens.detach().cpu().numpy()
        tokens = np.asarray(tokens)
        if tokens.ndim < 1 or tokens.shape[-1] != 2 * self.T:
            raise ValueError(f"tokens must have {2 * self.T} entries in the last dim, got shape {tokens.shape}")
        if not np.issubdtype(tokens.dtype, np.integer):
            if not np.isfinite(tokens).all() or not np.all(tokens == np.round(tokens)):
                raise ValueError("tokens must be integers")
            tokens = tokens.astype(np.int64)
        if tokens.min(initial=0) < 0 or tokens.max(initial=0) > 2 * self.clip + 1:
            raise ValueError(f"tokens must lie in [0, {2 * self.clip + 1}]")
        q = (tokens.reshape(tokens.shape[:-1] + (self.T, 2)) - self.clip - 1) / self.gamma
        return np.einsum("kt,...kd->...td", self.C, q) * self.scale
