"""Focusing: view-consistent sparse-voxel training for render-supervised 3D VAEs (ICML 2026).

Only the abstract is public: everything beyond it is the book's reconstruction on TripoSF/SparseFlex
and TRELLIS (spec Sec. 1), marked [book choice] where it is one.

- :mod:`.shapes`, :mod:`.camera`: procedural open/closed meshes, pinhole cameras, the exact z-buffer.
- :mod:`.voxels`, :mod:`.render`: sparse voxel grids and the two-sided NeuS renderer of their field.
- :mod:`.views`: the method (depth-driven carving, adaptive zoom) and the ``fsv`` baseline.
- :mod:`.model`, :mod:`.losses`, :mod:`.train`, :mod:`.metrics`: the sparse VAE, losses, training, metrics.
- :mod:`.experiments`: the notebook runners. :mod:`.presets`: scales.
"""

from .camera import Camera, look_at, make_camera, project, random_camera, rasterize, zoom_camera
from .losses import render_losses, sparse_tv, ssim, tsdf_loss, tsdf_target
from .metrics import (
    activation_memory_estimate,
    chamfer_fscore,
    hole_fraction,
    oracle_field,
    render_coverage,
    saved_tensor_bytes,
    surface_points,
)
from .model import NeighborhoodAttention, SparseConv3d, SparseVAE, fine_occupancy, kl_divergence
from .presets import PRESETS, FocusingPreset, preset
from .render import render_sdf
from .shapes import (
    CLOSED_KINDS,
    OPEN_KINDS,
    SELF_OCCLUDING,
    SHAPE_KINDS,
    Mesh,
    make_shape,
    sample_surface,
    shape_set,
)
from .train import SCHEMES, TrainConfig, evaluate, fit_field, prepare, reconstruct_points, train_vae
from .views import adaptive_zoom, carve, frustum_section, in_frustum
from .voxels import SparseGrid, shared_corner_average, voxelize_points

__all__ = [
    "CLOSED_KINDS", "OPEN_KINDS", "PRESETS", "SCHEMES", "SELF_OCCLUDING", "SHAPE_KINDS", "Camera",
    "FocusingPreset", "Mesh", "NeighborhoodAttention", "SparseConv3d", "SparseGrid", "SparseVAE", "TrainConfig",
    "activation_memory_estimate", "adaptive_zoom", "carve", "chamfer_fscore", "evaluate", "fine_occupancy",
    "fit_field", "frustum_section", "gpu_check", "hole_fraction", "in_frustum", "kl_divergence", "look_at",
    "make_camera", "make_shape", "oracle_field", "prepare", "preset", "project", "random_camera", "rasterize",
    "reconstruct_points", "render_coverage", "render_losses", "render_sdf", "sample_surface", "saved_tensor_bytes",
    "shape_set", "shared_corner_average", "sparse_tv", "ssim", "surface_points", "train_vae", "tsdf_loss",
    "tsdf_target", "voxelize_points", "zoom_camera",
]


def gpu_check(dev):
    """One focus_zoom and one full training step at the gpu preset's sizes on ``dev``."""
    import torch

    from .experiments import train_config
    from .train import kappa_at, step_loss, view_for_scheme

    cfg = preset("gpu")
    sd = prepare(make_shape("bumpy_sphere", 0, cfg.n_uv), cfg.res_lat, cfg.n_points, 0, dev)
    torch.manual_seed(0)
    model = SparseVAE(cfg.res_lat, cfg.width, cfg.blocks).to(dev)
    fns = {}
    for scheme in ("full", "focus_zoom"):
        tc = train_config(cfg, scheme, 0, str(dev))
        cam, gt, keep, _ = view_for_scheme(sd, random_camera(torch.Generator().manual_seed(1), cfg.H, cfg.H),
                                           scheme, tc, torch.Generator().manual_seed(2))
        gt = {a: b.to(dev) for a, b in gt.items()}

        def run(cam=cam, gt=gt, keep=keep, tc=tc):
            loss, _ = step_loss(model, sd, cam, gt, keep, tc, kappa_at(0, 1), False)
            loss.backward()
        fns[f"focusing {scheme} step"] = run
    return fns
