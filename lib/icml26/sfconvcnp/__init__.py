"""Neural processes via set Fourier convolutions and Volterra series (Mohseni, Duffield & Wong, ICML 2026).

- :mod:`.method`: the frequency grid, the closed-form spectrum of the Gaussian set embedding, the
  set Fourier convolution (SFConv), its second-order Volterra extension (SFVConv), blocks and the
  SFConvCNP / SFVConvCNP model.
- :mod:`.baselines`: CNP, SetConv + CNN ConvCNP, a translation-equivariant attention NP.
- :mod:`.data`: batched GP / sawtooth / square-wave / operator-toy tasks and the GP oracle.
- :mod:`.experiments`: training, evaluation and the notebooks' runners. :mod:`.presets`: scales.
"""

from .baselines import CNP, ConvCNP, SetConv, TEAttentionLayer, TEAttentionNP, n_params
from .data import (
    KERNELS,
    Task,
    gp_kernel,
    gp_oracle_loglik,
    gp_oracle_predict,
    operator_targets,
    sample_gp_tasks,
    sample_operator_tasks,
    sample_sawtooth_tasks,
    sample_square_wave_tasks,
)
from .experiments import (
    MODEL_LABELS,
    crps_gaussian,
    effective_receptive_field,
    evaluate_np,
    make_model,
    np_loss,
    time_vs_context,
    train_np,
    translation_sweep,
)
from .method import (
    PhaseCache,
    Phases,
    SetFourierConv,
    SetFourierVolterraConv,
    SFBlock,
    SFConvCNP,
    SFVConvCNP,
    check_span,
    frequency_grid,
    gaussian_set_spectrum,
    gaussian_spectrum,
    inverse_real_transform,
    phases,
)
from .presets import PRESETS, SFConvCNPPreset, preset

__all__ = [
    "CNP", "KERNELS", "MODEL_LABELS", "PRESETS", "ConvCNP", "PhaseCache", "Phases", "SFBlock", "SFConvCNP",
    "SFConvCNPPreset", "SFVConvCNP", "SetConv", "SetFourierConv", "SetFourierVolterraConv", "TEAttentionLayer",
    "TEAttentionNP", "Task", "check_span", "crps_gaussian", "effective_receptive_field", "evaluate_np",
    "frequency_grid", "gaussian_set_spectrum", "gaussian_spectrum", "gp_kernel", "gp_oracle_loglik",
    "gp_oracle_predict", "gpu_check", "inverse_real_transform", "make_model", "n_params", "np_loss",
    "operator_targets", "phases", "preset", "sample_gp_tasks", "sample_operator_tasks", "sample_sawtooth_tasks",
    "sample_square_wave_tasks", "time_vs_context", "train_np", "translation_sweep",
]


def gpu_check(dev):
    """One training step of the gpu-preset SFConvCNP and SFVConvCNP on ``dev`` (batch 64, N, M <= 50)."""
    import torch

    cfg = preset("gpu")
    gen = torch.Generator().manual_seed(0)
    task = sample_gp_tasks(cfg.batch, generator=gen, device=dev)

    def step_for(name):
        model = make_model(name, cfg, 0, dev)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)

        def step():
            loss = np_loss(model, task)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return step

    return {"sfconvcnp train step": step_for("sfconvcnp"), "sfvconvcnp train step": step_for("sfvconvcnp")}
