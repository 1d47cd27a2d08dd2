"""Adaptive protein tokenization (APT, Dilip, Varshney & Van Valen, ICML 2026): global, coarse-to-fine
structure tokens from nested dropout and a flow-matching decoder, against a local (one token per
residue) tokenizer with the same decoder (Kanzi-mini). Chapter ``protein-tokens``; spec
``papers/protein-tokens.md``."""

from .backbone import (
    CLASSES,
    FOLD_PROGRAMS,
    IDEAL_ANGLES_DEG,
    IDEAL_BONDS,
    build_backbone,
    length_groups,
    make_backbones,
    nerf_place,
    program_min_length,
)
from .checkpoints import RECIPE, fingerprint, load_pretrained, state_digest
from .fsq import FSQ, code_usage
from .geometry import (
    ca_geometry_stats,
    canonicalize,
    center_and_scale,
    d0,
    kabsch_rmsd,
    random_rotation,
    tm_align,
    tm_from_distances,
    tm_score,
)
from .model import DiffusionTokenizer, TokenizerConfig, nested_keep_mask, train_tokenizer, velocity_to_score
from .presets import PRESETS, PTPreset, preset
from .probe import global_embeddings, local_token_features, probe_accuracy

__all__ = [
    "CLASSES", "FOLD_PROGRAMS", "FSQ", "IDEAL_ANGLES_DEG", "IDEAL_BONDS", "PRESETS", "PTPreset", "RECIPE",
    "DiffusionTokenizer", "TokenizerConfig", "build_backbone", "ca_geometry_stats", "canonicalize",
    "center_and_scale", "code_usage", "d0", "fingerprint", "global_embeddings", "gpu_check", "kabsch_rmsd",
    "length_groups", "load_pretrained", "local_token_features", "make_backbones", "nerf_place",
    "nested_keep_mask", "preset", "probe_accuracy", "program_min_length", "random_rotation", "state_digest",
    "tm_align", "tm_from_distances", "tm_score", "train_tokenizer", "velocity_to_score",
]


def gpu_check(dev):
    """Headline kernels at the gpu preset's sizes on ``dev``: one training step of APT-mini (batch 64,
    L = 48) and one 50-step guided decode of 256 proteins."""
    from dataclasses import replace

    import torch

    cfg = preset("gpu")
    mcfg = replace(TokenizerConfig(), **dict(cfg.model_overrides))
    torch.manual_seed(0)
    model = DiffusionTokenizer(mcfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = center_and_scale(make_backbones(64, 48, seed=0)["CA"]).to(dev)
    idx = torch.randint(0, model.fsq.codebook_size, (256, 16), device=dev)

    def step():
        loss = model.loss(x)["total"]
        opt.zero_grad()
        loss.backward()
        opt.step()

    return {"train step": step, "decode 256 x 50 steps": lambda: model.decode(idx, 48, steps=50)}
