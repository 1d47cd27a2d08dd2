"""Power-calibrated green-list watermarking (ICML 2026; only the abstract is public).

The KGW watermark of Kirchenbauer et al. (2023) and the book's power-calibrated framework built on it.

- :mod:`.method`: keyed green lists, the logit bias, green mass, closed-form KL, detection
  (de-duplication, z-test, exact binomial test).
- :mod:`.framework`: the book's framework: calibration, exact and normal power, required length,
  Algorithms A/B and the Pareto test.
- :mod:`.baselines`: fixed defaults and the uncalibrated (high-entropy) theory.
- :mod:`.teachers`: distributions and HMM language models of settable entropy.
- :mod:`.experiments`: the notebooks' runners. :mod:`.presets`: scales.
"""

from .baselines import DEFAULTS, high_entropy_calibration, select_uncalibrated
from .framework import (
    Calibration,
    calibrate,
    pareto_mask,
    power_exact,
    power_mixture,
    power_normal,
    predict,
    required_length,
    select_max_power,
    select_min_distortion,
)
from .method import (
    CONVENTIONS,
    DIRECT_DELTA_MAX,
    EXACT_N_MAX,
    MAX_MASK_BYTES,
    binomial_sf,
    binomial_threshold,
    detect,
    effective_gamma,
    entropy,
    first_occurrence_mask,
    green_indicators,
    green_matrix,
    green_size,
    kgw_lower_bound,
    kl_closed_form,
    kl_max,
    kl_uniform_exact,
    mu1_uniform_exact,
    mu_max,
    phi,
    random_green_masks,
    softmax_gaussian,
    spike_entropy,
    uniform_support,
    watermark_logits,
    z_score,
    zipf,
)
from .presets import PRESETS, WatermarkPreset, preset
from .teachers import FAMILIES, HMMTeacher, draw_probs, sample_iid

__all__ = [
    "CONVENTIONS", "DIRECT_DELTA_MAX", "EXACT_N_MAX", "MAX_MASK_BYTES",
    "DEFAULTS", "FAMILIES", "PRESETS", "Calibration", "HMMTeacher", "WatermarkPreset", "binomial_sf",
    "binomial_threshold", "calibrate", "detect", "draw_probs", "effective_gamma", "entropy",
    "first_occurrence_mask", "gpu_check", "green_indicators", "green_matrix", "green_size",
    "high_entropy_calibration", "kgw_lower_bound", "kl_closed_form", "kl_max", "kl_uniform_exact",
    "mu1_uniform_exact", "mu_max", "pareto_mask", "phi", "power_exact", "power_mixture", "power_normal", "predict", "preset",
    "random_green_masks", "required_length", "sample_iid", "select_max_power", "select_min_distortion",
    "select_uncalibrated", "softmax_gaussian", "spike_entropy", "uniform_support", "watermark_logits",
    "z_score", "zipf",
]


def gpu_check(dev):
    """The chapter's headline kernels at the gpu preset's sizes: watermarked HMM generation with
    detection, and a batch of watermarked i.i.d. draws."""
    import torch

    cfg = preset("gpu")
    teacher = HMMTeacher(cfg.n_states, cfg.vocab_size, cfg.taus[0], seed=cfg.seed).to(dev)
    gm = green_matrix(cfg.vocab_size, 0.25, cfg.key, device=dev)

    def generate_and_detect():
        gen = torch.Generator().manual_seed(0)
        out = teacher.generate(cfg.n_seq_wm, cfg.T, gen, green_mat=gm, delta=1.5)
        return detect(out["tokens"], gm, 0.25, teacher.bos, alpha=cfg.alpha)

    return {"hmm generate + detect": generate_and_detect}
