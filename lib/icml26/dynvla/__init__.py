"""DynVLA: dynamics chain-of-thought for driving VLAs (Shang et al., ICML 2026).

- :mod:`.sim`: MiniDrive, procedural scenes with scripted agent futures.
- :mod:`.render`: camera-like rasters and BEV maps (world-fixed texture).
- :mod:`.metric`: the NAVSIM-style PDM score (NC, DAC, TTC, EP, C), batched torch.
- :mod:`.planners`: the privileged expert (PDM-Closed-like) and constant velocity.
- :mod:`.actions`: FAST-lite action tokens (DCT + quantisation).
- :mod:`.tokenizer`: the Dynamics Tokenizer (ego/env queries and codebooks, VQ, action
  regularisation) and the coupled baseline.
- :mod:`.vla`: token space, CoT targets, the policy, SFT, constrained decoding, evaluation.
- :mod:`.rft`: GRPO on the PDM score. :mod:`.experiments`: runners. :mod:`.presets`: scales.
"""

from .actions import FastLite, dct_matrix
from .data import DriveData, build_dataset
from .metric import (
    NAVSIM_BOUNDS,
    PDMSConfig,
    boxes_overlap,
    boxes_overlap_t,
    combine,
    pdm_score,
    pdm_score_t,
    waypoints_to_states,
)
from .planners import constant_velocity_plan, expert_candidates, expert_plan
from .presets import PRESETS, DynVLAPreset, preset
from .render import RasterConfig, render_bev, render_camera
from .rft import GRPOConfig, group_advantages, grpo_loss, rft_train
from .sim import ALL_FAMILIES, ScenarioBatch, WorldConfig, sample_scenarios
from .tokenizer import (
    DynamicsTokenizer,
    DynTokConfig,
    VectorQuantizer,
    code_usage,
    probe_ego_motion,
    train_tokenizer,
    transfer_decode,
)
from .vla import (
    MODES,
    DrivingVLA,
    SFTConfig,
    TokenSpace,
    build_targets,
    evaluate_policy,
    generate,
    parse_output,
    sft_train,
)

__all__ = [
    "ALL_FAMILIES", "MODES", "NAVSIM_BOUNDS", "PRESETS", "DriveData", "DrivingVLA", "DynTokConfig", "DynVLAPreset",
    "DynamicsTokenizer", "FastLite", "GRPOConfig", "PDMSConfig", "RasterConfig", "SFTConfig", "ScenarioBatch",
    "TokenSpace", "VectorQuantizer", "WorldConfig", "boxes_overlap", "boxes_overlap_t", "build_dataset",
    "build_targets", "code_usage", "combine", "constant_velocity_plan", "dct_matrix", "evaluate_policy",
    "expert_candidates", "expert_plan", "generate", "gpu_check", "group_advantages", "grpo_loss", "parse_output",
    "pdm_score", "pdm_score_t", "preset", "probe_ego_motion", "render_bev", "render_camera", "rft_train",
    "sample_scenarios", "sft_train", "train_tokenizer", "transfer_decode", "waypoints_to_states",
]


def gpu_check(dev):
    """Headline kernels at the gpu preset's sizes: one tokenizer training step, one SFT step of the
    dynamics policy, and one GRPO iteration (sampling 16 x 8 outputs, batched PDMS, update)."""
    import torch

    from . import experiments as ex
    from .rft import clone_frozen
    from .tokenizer import DynamicsTokenizer as _Tok
    from .vla import sft_loss

    cfg = preset("gpu")
    data = build_dataset(256, WorldConfig(), seed=0)
    pairs = [p.to(dev) for p in data.pairs()]
    tok = _Tok(ex.tok_config(cfg)).to(dev)
    opt = torch.optim.AdamW(tok.parameters(), lr=1e-3)
    b = [p[: cfg.tok_batch] for p in pairs]
    space = TokenSpace(m_ego=cfg.m_codes, m_env=cfg.m_codes)
    act = FastLite()
    tgt = torch.randint(0, 2, (len(data), space.length("dynamics")))
    ranges, is_cot = space.template("dynamics")
    tgt = (ranges[:, 0] + tgt % (ranges[:, 1] - ranges[:, 0])).to(dev)
    pol = ex.make_policy(space, cfg, 0).to(dev)
    popt = torch.optim.AdamW(pol.parameters(), lr=1e-3)
    img, speed = data.cam[:, :2].flatten(1, 2).to(dev), data.speed.to(dev)

    def tok_step():
        loss, _ = tok.loss(*b)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def sft_step():
        loss, _, _ = sft_loss(pol, img[: cfg.sft_batch], speed[: cfg.sft_batch], tgt[: cfg.sft_batch], is_cot.to(dev))
        popt.zero_grad()
        loss.backward()
        popt.step()

    ref = clone_frozen(pol)

    def grpo_iter():
        rft_train(pol, ref, data, "dynamics", space, act, GRPOConfig(iterations=1), seed=0)

    return {"tokenizer train step": tok_step, "SFT step (dynamics)": sft_step, "GRPO iteration (16 x 8)": grpo_iter}
