"""SynGR: synergistic multimodal generative recommendation (Chen et al., ICML 2026).

- :mod:`.data`: the synthetic catalogue SynCat, users, leave-one-out split, oracles and slices.
- :mod:`.pid`: partial information decomposition (Williams-Beer I_min).
- :mod:`.tokenizer`: residual k-means semantic IDs, collision suffixes, diagnostics.
- :mod:`.sequences`: token layout, batches, the identifier trie and constrained beam search.
- :mod:`.method`: the generator, saliency diagnosis, dominant-modality masking, the synergy
  contrastive loss and SynGR's training loss.
- :mod:`.baselines`: popularity (the GR baselines are the generator with the plain NLL).
- :mod:`.train`: training loop, Recall/NDCG, the pair-shuffle diagnostic.
- :mod:`.experiments`: the notebooks' runners. :mod:`.presets`: scales.
"""

from .baselines import popularity_ranks
from .data import (
    Catalogue,
    CatalogueConfig,
    InteractionConfig,
    Interactions,
    Split,
    leave_one_out,
    make_catalogue,
    make_interactions,
    motif_partner,
    oracle_ranks,
    oracle_scores,
    slice_masks,
)
from .method import (
    GRSeq2Seq,
    SynGRConfig,
    dominant_modality,
    mask_dominant_topr,
    nll_loss,
    synergy_contrastive_loss,
    syngr_loss,
    token_saliency,
    unimodal_view,
)
from .pid import empirical_table, gate_table, mutual_information, pid_williams_beer, syncat_style_table
from .presets import PRESETS, SynGRPreset, preset
from .sequences import (
    IDTrie,
    TokenLayout,
    brute_force_scores,
    build_inputs,
    constrained_beam_search,
    make_layout,
)
from .tokenizer import (
    RQCodebooks,
    SemanticIDs,
    assign_semantic_ids,
    attribute_codes,
    attribute_recoverability,
    attribute_recoverability_loo,
    codebook_stats,
    fit_rq_kmeans,
    residual_norms,
    rq_decode,
    rq_encode,
)
from .train import (
    TrainConfig,
    evaluate,
    ndcg_at_k,
    pair_shuffle,
    ranks_from_beams,
    recall_at_k,
    synergy_reliance,
    train_generator,
)

__all__ = [
    "PRESETS", "Catalogue", "CatalogueConfig", "GRSeq2Seq", "IDTrie", "InteractionConfig", "Interactions",
    "RQCodebooks", "SemanticIDs", "Split", "SynGRConfig", "SynGRPreset", "TokenLayout", "TrainConfig",
    "assign_semantic_ids", "attribute_codes", "attribute_recoverability", "attribute_recoverability_loo",
    "brute_force_scores", "build_inputs", "codebook_stats", "constrained_beam_search", "dominant_modality",
    "empirical_table", "evaluate", "fit_rq_kmeans", "gate_table", "gpu_check", "leave_one_out", "make_catalogue",
    "make_interactions", "make_layout", "mask_dominant_topr", "motif_partner", "mutual_information", "ndcg_at_k", "nll_loss",
    "oracle_ranks", "oracle_scores", "pair_shuffle", "pid_williams_beer", "popularity_ranks", "preset",
    "ranks_from_beams", "recall_at_k", "residual_norms", "rq_decode", "rq_encode", "slice_masks",
    "syncat_style_table", "synergy_contrastive_loss", "synergy_reliance", "syngr_loss", "token_saliency",
    "train_generator", "unimodal_view",
]


def gpu_check(dev):
    """The chapter's headline kernels at the gpu preset's sizes: one SynGR training step (saliency
    pass, three views, contrastive term, backward) and a constrained beam search over 256 users."""
    import torch

    from . import experiments as ex
    from .presets import replace_for_check

    cfg = replace_for_check(preset("gpu"))
    world = ex.build_world(cfg)
    model = ex.make_model(cfg, world.layout, "fused", 0).to(dev)
    world.trie.to(dev)
    syn = SynGRConfig(alpha=cfg.alpha, mask_ratio=cfg.mask_ratio, tau=cfg.tau)
    tr = world.batches["train"]
    b = {k: tr[k][:cfg.batch_size].to(dev) for k in ("input_ids", "valid", "labels")}
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    test = {k: v[:256] for k, v in world.batches["test"].items()}

    def step():
        loss, _ = syngr_loss(model, b, syn)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return {"syngr train step": step, "beam search (256 users)": lambda: constrained_beam_search(model, test, world.trie,
                                                                                               cfg.beam)}
