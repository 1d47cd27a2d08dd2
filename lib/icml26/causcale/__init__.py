"""CauScale: neural causal discovery that scales (Peng et al., ICML 2026).

- :mod:`.data`: random DAGs (ER / scale-free), SEMs with perfect single-node interventions (five
  mechanisms), the precision-matrix prior, batching with node masks.
- :mod:`.method`: tied axial attention, axial layers, reduction units and their schedule,
  Data2Graph, the two-stream CauScale model, the three-class pair loss, the AVICI-style baseline,
  training (Algorithm 2), the attention-memory formula.
- :mod:`.metrics`: directed AP, AUROC, SHD, orientation accuracy, greedy cycle breaking.
- :mod:`.baselines`: CORR, INVCOV, NOTEARS-linear, PC (causal-learn).
- :mod:`.training`: the book's tiny models and the shipped checkpoint.
- :mod:`.experiments`: the notebooks' runners. :mod:`.presets`: scales.
"""

from .baselines import (
    causallearn_to_scores,
    corr_scores,
    interventional_orienter,
    invcov_scores,
    notears_linear,
    pc_baseline,
)
from .data import (
    SCMData,
    collate,
    make_task,
    moral_graph,
    population_precision,
    precision_prior,
    regime_sizes,
    sample_dag,
    sample_linear_scm_batch,
    simulate_scm,
    standardize,
)
from .method import (
    AVICIStyle,
    AxialLayer,
    CauScale,
    Data2Graph,
    PairLogits,
    ReductionUnit,
    TiedAxialAttention,
    TrainHistory,
    attention_map_floats,
    avici_loss,
    causcale_loss,
    pair_labels,
    pair_probs_to_matrix,
    predicted_reduction_factor,
    reduction_schedule,
    train_amortized,
)
from .metrics import auroc, average_precision, break_cycles_greedy, evaluate, orientation_accuracy, shd
from .presets import PRESETS, CauScalePreset, preset

__all__ = [
    "AVICIStyle", "AxialLayer", "CauScale", "CauScalePreset", "Data2Graph", "PRESETS", "PairLogits",
    "ReductionUnit", "SCMData", "TiedAxialAttention", "TrainHistory", "attention_map_floats", "auroc",
    "average_precision", "avici_loss", "break_cycles_greedy", "causallearn_to_scores", "causcale_loss",
    "collate", "corr_scores", "evaluate", "gpu_check", "interventional_orienter", "invcov_scores", "make_task", "moral_graph",
    "notears_linear", "orientation_accuracy", "pair_labels", "pair_probs_to_matrix", "pc_baseline",
    "population_precision", "precision_prior", "predicted_reduction_factor", "preset", "reduction_schedule",
    "regime_sizes", "sample_dag", "sample_linear_scm_batch", "shd", "simulate_scm", "standardize",
    "train_amortized",
]


def gpu_check(dev):
    """The chapter's headline kernels at gpu-preset sizes: one training step of CauScale on a batch of
    linear SEMs from the vectorised generator, and one forward+backward pass of a tied data-stream
    layer at n=500, m=1000 (the scale where untied attention runs out of memory)."""
    import torch

    from .training import build_model

    cfg = preset("gpu")
    torch.manual_seed(0)
    model = build_model(cfg, "full").to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)
    data = sample_linear_scm_batch(cfg.batch_size, 30, cfg.n_samples, 2.0, generator=gen)
    prior = torch.stack([torch.as_tensor(precision_prior(x.numpy())) for x in data["x_raw"]]).float()
    batch = {"x": data["x"].float().to(dev), "interv": data["interv"].float().to(dev), "prior": prior.to(dev),
             "adj": data["adj"].long().to(dev), "node_mask": torch.ones(cfg.batch_size, 30, dtype=torch.bool, device=dev)}
    layer = AxialLayer(cfg.mem_layer_dim, cfg.mem_heads, 4 * cfg.mem_layer_dim, tied=True).to(dev)
    z = torch.randn(1, 1000, 500, cfg.mem_layer_dim, device=dev, requires_grad=True)

    def train_step():
        loss = model.loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    def tied_layer_n500():
        layer(z).sum().backward()

    return {"causcale train step (n=30)": train_step, "tied layer fwd+bwd (n=500, m=1000)": tied_layer_n500}
