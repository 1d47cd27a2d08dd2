"""Scale presets for the cgmt chapter (spec Sec. 7.2). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class CGMTPreset:
    p: int                      # dimension
    alphas: tuple               # n / p grid
    seeds: int                  # independent training sets B (>= 10 wherever a spread is stated)
    n_test: int                 # test-set size
    n_quad: int = 61            # Gauss-Hermite nodes for xi
    ge_nodes: int = 41          # Gauss-Hermite nodes per latent dimension (Gaussian equivalent)
    lam: float = 0.1            # ridge strength
    m_norm: float = 2.0         # ||m||
    seed: int = 0
    p_grid: tuple = (100, 200)  # finite-size study (NB2)
    p_grid_seeds: int = 4
    p_cvx: int = 50             # cvxpy ERM size (hinge, l1)
    hinge_seeds: int = 3        # cvxpy hinge fits per alpha (reported only: no spread is stated)
    p_grid_reg: tuple = (100, 200)  # T3 relative difference vs p (NB3)
    reg_seeds: int = 3          # training sets per regulariser comparison (NB3; means only)
    ao_losses: tuple = ("logistic", "square")  # losses for the cvxpy min-max check (NB2)
    n_t: int = 15               # points of the AO-value curve
    deltas: tuple = (1.0, 0.3, 0.1, 0.05, 0.02)  # pseudo-Huber delta grid (NB3)
    damping: float = 0.5        # fixed-point damping in the sweeps (Algorithm 1); 1.0 = undamped
    n_boot: int = 2000          # bootstrap resamples for intervals

    def dry_run(self) -> CGMTPreset:
        """Loop counts cut (seeds, alpha grid, the p and delta grids, AO points, bootstrap, test points),
        sizes kept.

        ``p`` and the quadrature sizes stay as they are, so the dry run exercises the gpu
        configuration's main shapes. The alpha grid keeps its smallest value and the p grids their
        three (two) smallest: the cost of batched Newton grows as ``n p^2``, and the larger grid points
        run the same code at larger shapes only. The test set is cut to 20,000 points (the gpu's
        100,000 x 2,000 test matrices cost minutes of CPU per dry run and exercise no other code).
        """
        return replace(self, alphas=self.alphas[:1], seeds=2, p_grid=self.p_grid[:3], p_grid_seeds=2,
                       hinge_seeds=1, p_grid_reg=self.p_grid_reg[:2], reg_seeds=1, n_t=3,
                       deltas=self.deltas[:2], n_boot=50, n_test=min(self.n_test, 20000))


PRESETS = {
    "smoke": CGMTPreset(p=100, alphas=(1.0, 4.0), seeds=2, n_test=5000, n_quad=41, ge_nodes=25,
                        p_grid=(50, 71, 100), p_grid_seeds=2, p_cvx=40, hinge_seeds=1, p_grid_reg=(50, 100),
                        reg_seeds=1, ao_losses=("square",), n_t=7, deltas=(1.0, 0.1), damping=1.0,
                        n_boot=200),
    "book": CGMTPreset(p=400, alphas=(0.5, 1.0, 2.0, 4.0), seeds=10, n_test=20000,
                       p_grid=(100, 141, 200, 283, 400, 566, 800), p_grid_seeds=12, p_cvx=200,
                       p_grid_reg=(100, 200, 400, 800),
                       deltas=(1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02)),
    "gpu": CGMTPreset(p=2000, alphas=(0.5, 1.0, 2.0, 4.0, 8.0), seeds=16, n_test=100000,
                      p_grid=(200, 283, 400, 566, 800, 1131, 1600, 2263, 3200), p_grid_seeds=16, p_cvx=200,
                      p_grid_reg=(200, 400, 800, 1600, 3200), reg_seeds=8,
                      deltas=(1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01)),
}


def preset(scale: str | None = "book") -> CGMTPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
