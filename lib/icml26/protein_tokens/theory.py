"""Checkable theory behind APT (spec Sec. 4): nested dropout orders a linear autoencoder's units by
principal component (Rippel et al. 2014), and the token-budget arithmetic of FSQ codes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from icml26.core import bootstrap_mean


def gaussian_data(n: int, eigenvalues, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """n samples of N(0, Q diag(eigenvalues) Q^T) with a random orthogonal Q; returns (X, Q)."""
    lam = torch.as_tensor(eigenvalues, dtype=torch.float64)
    if lam.ndim != 1 or len(lam) < 2 or (lam <= 0).any():
        raise ValueError("eigenvalues must be a 1-D sequence of at least 2 positive numbers")
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(len(lam), len(lam), generator=g, dtype=torch.float64))
    x = torch.randn(n, len(lam), generator=g, dtype=torch.float64) * lam.sqrt()
    return (x @ q.T).float(), q.float()


def train_linear_ae(x: torch.Tensor, n_codes: int, steps: int, nested: bool, seeds: int = 1, lr: float = 1e-2,
                    seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Train ``seeds`` linear autoencoders x -> D (m * E x) at once (batched over seeds), with nested
    dropout (m keeps the first b ~ U{1..K} units, per sample and step) or without (m = 1).
    Returns encoders (S, K, d) and decoders (S, d, K)."""
    if not isinstance(n_codes, int) or n_codes < 1 or n_codes > x.shape[1]:
        raise ValueError(f"n_codes must be an int in [1, {x.shape[1]}], got {n_codes!r}")
    g = torch.Generator().manual_seed(seed)
    d = x.shape[1]
    enc = (torch.randn(seeds, n_codes, d, generator=g) / math.sqrt(d)).requires_grad_()
    dec = (torch.randn(seeds, d, n_codes, generator=g) / math.sqrt(n_codes)).requires_grad_()
    opt = torch.optim.Adam([enc, dec], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps, eta_min=lr * 0.01)
    n = x.shape[0]
    for _ in range(steps):
        z = torch.einsum("skd,nd->snk", enc, x)
        if nested:
            b = torch.randint(1, n_codes + 1, (seeds, n, 1), generator=g)
            z = z * (torch.arange(n_codes) < b).float()
        rec = torch.einsum("sdk,snk->snd", dec, z)
        loss = (rec - x).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return enc.detach(), dec.detach()


def principal_angles_deg(basis: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Largest principal angle (degrees) between span(basis[..., :, :k]) and span(target[:, :k])."""
    qb, _ = torch.linalg.qr(basis.double())
    s = torch.linalg.svdvals(qb.transpose(-1, -2) @ target.double())
    return torch.rad2deg(torch.arccos(s.min(-1).values.clamp(-1, 1)))


def nested_dropout_study(eigenvalues, n_codes: int, n_samples: int, steps: int, seeds: int,
                         seed: int = 0) -> pd.DataFrame:
    """Principal angles and prefix reconstruction MSE vs k, with and without nested dropout.

    Rows: ``nested`` (bool), ``seed``, ``k``, ``angle_deg`` (largest principal angle between the span of
    the first k decoder columns and the top-k PCA subspace), ``mse`` (prefix-k reconstruction error on
    fresh data) and ``optimum`` = sum_{j>k} lambda_j (the best rank-k error)."""
    x, q = gaussian_data(n_samples, eigenvalues, seed)
    x_test, _ = gaussian_data(n_samples, eigenvalues, seed)   # same Q (same seed), fresh samples below
    g = torch.Generator().manual_seed(seed + 7)
    lam = torch.as_tensor(eigenvalues, dtype=torch.float32)
    x_test = (torch.randn(n_samples, len(lam), generator=g) * lam.sqrt()) @ q.T
    rows = []
    for nested in (True, False):
        enc, dec = train_linear_ae(x, n_codes, steps, nested, seeds=seeds, seed=seed + int(nested))
        z = torch.einsum("skd,nd->snk", enc, x_test)
        for k in range(1, n_codes + 1):
            ang = principal_angles_deg(dec[:, :, :k], q[:, :k])
            keep = (torch.arange(n_codes) < k).float()
            mse = (torch.einsum("sdk,snk->snd", dec, z * keep) - x_test).pow(2).sum(-1).mean(1)
            for s in range(seeds):
                rows.append({"nested": nested, "seed": s, "k": k, "angle_deg": float(ang[s]),
                             "mse": float(mse[s]), "optimum": float(lam[k:].sum())})
    return pd.DataFrame(rows)


def token_budget_table(levels=(8, 5, 5, 5), n_tokens: int = 16, lengths=(32, 64, 128)) -> pd.DataFrame:
    """Bits carried by k global tokens vs one local token per residue (spec Sec. 4, fact 2)."""
    bits = math.log2(math.prod(levels))
    rows = []
    for L in lengths:
        k = min(L, n_tokens)
        rows.append({"L": L, "bits per token": bits, "global tokens": k, "global bits": k * bits,
                     "global bits/residue": k * bits / L, "local tokens": L, "local bits/residue": bits})
    return pd.DataFrame(rows)


def ideal_helix_geometry(phi_deg: float = -57.0, psi_deg: float = -47.0, n: int = 40) -> dict[str, float]:
    """Rise per residue, radius and residues per turn of an ideal helix built by NeRF (C-alpha trace),
    from the helix axis fitted by PCA of a long segment."""
    from .backbone import build_backbone

    phi = torch.full((1, n), math.radians(phi_deg), dtype=torch.float64)
    psi = torch.full((1, n), math.radians(psi_deg), dtype=torch.float64)
    ca = build_backbone(phi, psi)[0, :, 1]
    # axis points: mean of 4 consecutive CA lies near the axis for an alpha helix
    mid = ca.unfold(0, 4, 1).mean(-1)
    axis = mid[-1] - mid[0]
    axis = axis / axis.norm()
    rise = float(((ca[1:] - ca[:-1]) @ axis).mean().abs())
    cen = ca - ca.mean(0)
    radial = cen - (cen @ axis)[:, None] * axis
    radius = float(radial[5:-5].norm(dim=-1).mean())
    u = radial[5:-5] / radial[5:-5].norm(dim=-1, keepdim=True)
    cosang = (u[1:] * u[:-1]).sum(-1).clamp(-1, 1)
    per_turn = 2 * math.pi / float(torch.arccos(cosang).mean())
    d = (ca[:, None] - ca[None]).norm(dim=-1)
    return {"ca_ca": float(d.diagonal(1).mean()), "i_i2": float(d.diagonal(2).mean()),
            "i_i3": float(d.diagonal(3).mean()), "i_i4": float(d.diagonal(4).mean()),
            "rise": rise, "radius": radius, "per_turn": per_turn}


def bootstrap_mean_ci(values: np.ndarray, n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (:func:`icml26.core.bootstrap_mean`)."""
    return bootstrap_mean(values, n_boot, seed, level)[1:]
