"""BA-solver (Bi-Anchor Interpolation Solver, arXiv:2601.21542, ICML 2026) in batched PyTorch.

- :mod:`.method`: SideNet, chain loss (Algorithm 1), bi-anchor and single-anchor samplers (Algorithms 2-3);
- :mod:`.baselines`: Euler, Heun, midpoint, RK4, AB2, DPM-Solver++(2M), the float64 reference, NFE counting;
- :mod:`.fields`: the exact Gaussian-mixture velocity and the learned MLP backbone;
- :mod:`.data`, :mod:`.metrics`, :mod:`.experiments`, :mod:`.presets`.
"""

from .baselines import CountingField, ab2, dpmpp_2m, euler, heun, midpoint, reference_solve, rk4
from .data import GMMParams, load_digits_tensor, ring_gmm, sample_checkerboard, sample_gmm, sample_two_moons
from .fields import GMMVelocityField, VelocityMLP, fm_loss, gmm_log_density, gmm_velocity, train_backbone
from .method import (
    ALPHA_LOBATTO,
    ALPHA_MIN,
    GL3_NODES,
    GL3_WEIGHTS,
    SideNetMLP,
    ba_bi_anchor,
    ba_chain_loss,
    ba_single_anchor,
    gauss_legendre,
    lobatto_weights,
    oracle_sidenet,
    sample_offsets,
    train_sidenet,
    zero_sidenet,
)
from .metrics import (
    DigitsEvaluator,
    cost_table,
    endpoint_error,
    energy_distance,
    frechet_distance,
    sliced_wasserstein,
)
from .presets import PRESETS, preset

SOLVERS = {"euler": euler, "heun": heun, "midpoint": midpoint, "rk4": rk4, "ab2": ab2, "dpmpp_2m": dpmpp_2m}
"""Training-free baselines by name: ``SOLVERS[name](velocity_fn, x0, nfe, y=None)``."""

__all__ = [
    "ALPHA_LOBATTO", "ALPHA_MIN", "GL3_NODES", "GL3_WEIGHTS", "PRESETS", "SOLVERS", "CountingField",
    "DigitsEvaluator", "GMMParams", "GMMVelocityField", "SideNetMLP", "VelocityMLP", "ab2", "ba_bi_anchor",
    "ba_chain_loss", "ba_single_anchor", "cost_table", "dpmpp_2m", "endpoint_error", "energy_distance", "euler",
    "fm_loss", "frechet_distance", "gauss_legendre", "gmm_log_density", "gmm_velocity", "heun",
    "load_digits_tensor", "lobatto_weights", "midpoint", "oracle_sidenet", "preset", "reference_solve",
    "ring_gmm", "rk4", "sample_checkerboard", "sample_gmm", "sample_offsets", "sample_two_moons",
    "sliced_wasserstein", "train_backbone", "train_sidenet", "zero_sidenet",
]
