"""PDRF: physically-guided data-space rectified flow for precipitation nowcasting (ICML 2026).

- :mod:`.data`: a seeded synthetic radar world with known motion, the NB1 toy manifold.
- :mod:`.physics`: Horn-Schunck motion estimation, semi-Lagrangian extrapolation (straight and
  trajectory backtrace), the advection teacher X_SL, persistence.
- :mod:`.models`: the conditional U-Net and the toy MLP.
- :mod:`.flow`: data-space rectified flow, the PDRF loss, the Euler sampler, training.
- :mod:`.metrics`: CSI, POD, FAR, HSS, BIAS, pooled CSI, FSS, the nowcast evaluator.
- :mod:`.experiments`: the notebooks' runners. :mod:`.presets`: scales.
"""

from .data import THRESHOLDS, RadarConfig, embedded_ring, generate_radar, make_splits
from .flow import KINDS, det_loss, induced_velocity, interpolate, loss_weight_share, pdrf_loss, sample, train
from .metrics import (
    NowcastEvaluator,
    contingency,
    fss_from_sums,
    fss_sums,
    max_pool,
    off_manifold_residual,
    scores_from_counts,
    sliced_wasserstein,
)
from .models import CondUNet, ToyMLP
from .physics import centroid, estimate_motion, persistence, rotation_test, semi_lagrangian, sl_teacher
from .presets import PRESETS, PDRFPreset, preset

SETTINGS = PRESETS


def get_setting(name: str) -> PDRFPreset:
    """The preset called ``name`` ("smoke", "book" or "gpu"); spec Sec. 7.7 name for :func:`preset`."""
    if name not in PRESETS:
        raise ValueError(f"name must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name]


__all__ = [
    "KINDS", "PRESETS", "SETTINGS", "THRESHOLDS", "CondUNet", "NowcastEvaluator", "PDRFPreset", "RadarConfig",
    "ToyMLP", "centroid", "contingency", "det_loss", "embedded_ring", "estimate_motion", "fss_from_sums", "fss_sums",
    "generate_radar", "get_setting", "gpu_check", "induced_velocity", "interpolate", "loss_weight_share", "make_splits", "max_pool",
    "off_manifold_residual", "pdrf_loss", "persistence", "preset", "rotation_test", "sample", "scores_from_counts",
    "semi_lagrangian", "sl_teacher", "sliced_wasserstein", "train",
]


def gpu_check(dev):
    """One PDRF training step and one 5-step sampling of the gpu-preset U-Net on ``dev`` (64 x 64, 5 -> 20)."""
    import torch

    from .experiments import make_unet

    cfg = preset("gpu")
    r = cfg.radar
    x = generate_radar(cfg.batch_size, r, torch.Generator().manual_seed(0), device=dev)
    cond, x1 = x[:, :r.t_in], x[:, r.t_in:]
    x_sl = sl_teacher(cond, r.t_out)
    model = make_unet(cfg, "pdrf", dev)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr_of("pdrf"))
    g = torch.Generator(device=dev).manual_seed(0)

    def step():
        loss, _ = pdrf_loss(model, x1, cond, x_sl, lambda_phy=cfg.lambda_phy, generator=g)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def sampler():
        sample(model, cond, x1.shape, nfe=cfg.nfe, generator=g)

    return {"pdrf train step": step, "pdrf 5-step sampling": sampler}
