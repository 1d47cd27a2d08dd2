"""Data for the BA-solver chapter: an exact Gaussian mixture, 2-D toys and the 8x8 digits.

Book convention (spec section 3.1): ``t = 0`` is noise, ``t = 1`` is data, and
``x_t = t x_1 + (1 - t) x_0`` with ``x_0 ~ N(0, I)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GMMParams:
    """An isotropic Gaussian mixture ``sum_k pi_k N(mu_k, sigma_k^2 I_d)``.

    ``means (K, d)``, ``stds (K,)``, ``weights (K,)``; validated on construction.
    """

    means: torch.Tensor
    stds: torch.Tensor
    weights: torch.Tensor

    def __post_init__(self):
        for name in ("means", "stds", "weights"):
            if not isinstance(getattr(self, name), torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(getattr(self, name)).__name__}")
        if self.means.ndim != 2:
            raise ValueError(f"means must have shape (K, d), got {tuple(self.means.shape)}")
        k = self.means.shape[0]
        if self.stds.shape != (k,) or self.weights.shape != (k,):
            raise ValueError(
                f"means, stds and weights must describe the same number of components: means {k}, "
                f"stds {tuple(self.stds.shape)}, weights {tuple(self.weights.shape)}")
        if not bool((self.stds > 0).all()):
            raise ValueError("stds must be > 0")
        if bool((self.weights < 0).any()):
            raise ValueError("weights must be non-negative")
        total = float(self.weights.sum())
        if abs(total - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1 (tolerance 1e-6), got {total:.8f}")

    @property
    def dim(self) -> int:
        return int(self.means.shape[1])

    def to(self, device=None, dtype=None) -> GMMParams:
        """A copy on ``device``/``dtype``; ``self`` when nothing changes, and no re-validation
        (values do not change under a cast, and the checks would cost host syncs per call)."""
        same = all((device is None or t.device == torch.device(device)) and (dtype is None or t.dtype == dtype)
                   for t in (self.means, self.stds, self.weights))
        if same:
            return self
        out = object.__new__(GMMParams)
        for name in ("means", "stds", "weights"):
            object.__setattr__(out, name, getattr(self, name).to(device, dtype))
        return out


def ring_gmm(n_modes: int = 8, radius: float = 3.0, std: float = 0.3, dim: int = 2) -> GMMParams:
    """``n_modes`` equal-weight components on a circle of ``radius`` in the first two coordinates."""
    if not isinstance(n_modes, int) or n_modes < 1:
        raise ValueError(f"n_modes must be a positive int, got {n_modes!r}")
    if not isinstance(dim, int) or dim < 2:
        raise ValueError(f"dim must be an int >= 2, got {dim!r}")
    if std <= 0:
        raise ValueError(f"std must be > 0, got {std}")
    angle = 2 * math.pi * torch.arange(n_modes, dtype=torch.float64) / n_modes
    means = torch.zeros(n_modes, dim, dtype=torch.float64)
    means[:, 0], means[:, 1] = radius * torch.cos(angle), radius * torch.sin(angle)
    return GMMParams(means, torch.full((n_modes,), float(std), dtype=torch.float64),
                     torch.full((n_modes,), 1.0 / n_modes, dtype=torch.float64))


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    return n


def sample_gmm(n: int, params: GMMParams, generator: torch.Generator | None = None) -> torch.Tensor:
    """Exact mixture samples ``(n, d)`` in the dtype of ``params``."""
    _check_n(n)
    dev = generator.device if generator is not None else params.means.device    # draw where the generator is
    p = params.to(dev)
    k = torch.multinomial(p.weights.float(), n, replacement=True, generator=generator)  # (n,)
    z = torch.randn(n, params.dim, generator=generator, dtype=params.means.dtype, device=dev)
    return p.means[k] + p.stds[k, None] * z


def sample_checkerboard(n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """4x4 checkerboard on ``[-2, 2]^2``: uniform on the 8 squares whose integer corners sum to an even number."""
    _check_n(n)
    dev = generator.device if generator is not None else None
    u = torch.rand(n, 2, generator=generator, device=dev)                           # (n, 2)
    cell = torch.randint(0, 8, (n,), generator=generator, device=dev)              # which black square
    row = cell // 2                                                                 # 0..3
    col = 2 * (cell % 2) + (row % 2)                                                # alternate per row
    return torch.stack([col + u[:, 0], row + u[:, 1]], dim=1) - 2.0


def sample_two_moons(n: int, noise: float = 0.05, generator: torch.Generator | None = None) -> torch.Tensor:
    """Two interleaved half circles (scikit-learn's layout, centred), Gaussian jitter ``noise``."""
    _check_n(n)
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    which = torch.randint(0, 2, (n,), generator=generator)
    a = math.pi * torch.rand(n, generator=generator)
    x = torch.where(which == 0, torch.cos(a), 1 - torch.cos(a))
    y = torch.where(which == 0, torch.sin(a), 0.5 - torch.sin(a))
    pts = torch.stack([x - 0.5, y - 0.25], dim=1) * 1.5
    return pts + noise * torch.randn(n, 2, generator=generator)


def load_digits_tensor() -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's bundled 8x8 digits: ``(1797, 64)`` float32 in ``[-1, 1]`` and labels ``(1797,)``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 8.0 - 1.0                      # 0..16 -> -1..1
    return x, torch.tensor(d.target, dtype=torch.long)
