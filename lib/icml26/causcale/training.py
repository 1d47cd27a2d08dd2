"""Training the book's tiny CauScale models and the shipped checkpoint (spec Sec. 7.4).

Regenerate the checkpoint with::

    ICML26_THREADS=1 python -m icml26.causcale.training --scale book --out data/causcale/causcale_book.pt

It trains, for every seed of the preset, the full model (``steps_full`` steps, snapshot at
``steps_ablation``) and the no-prior ablation for ``steps_ablation`` steps, and the untied-attention
ablation (the slowest) for the seeds in ``untied_seeds`` (its official-scale twin for
``official_untied_seeds``), on CPU with one thread, and stores fp16 state dicts plus the fp32 loss
curves. ``tests/test_causcale.py`` retrains the first steps and compares them with the stored curve.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import torch

from icml26.core import one_thread

from .data import collate, make_task
from .method import AVICIStyle, CauScale, train_amortized
from .presets import CauScalePreset, preset

VARIANTS = ("full", "no_prior", "untied", "untied_official")
UNTIED = ("untied", "untied_official")    # the slow ablations
VARIANT_NAMES = {"full": "CauScale", "no_prior": "no prior", "untied": "untied, per-row scale",
                 "untied_official": "untied, official rhnij scale"}
DEFAULT_CHECKPOINT = Path(__file__).resolve().parents[3] / "data" / "causcale" / "causcale_book.pt"


def task_sampler(cfg: CauScalePreset, mechanism: str = "linear"):
    """Training distribution of Algorithm 2 at the preset's scale: ``n ~ U{train_n}``, ER or SF,
    degree from ``cfg.degrees``, ``m = cfg.n_samples`` with all single-node interventions."""
    lo, hi = cfg.train_n

    def sample(rng: np.random.Generator, batch_size: int) -> dict:
        items = [make_task(int(rng.integers(lo, hi + 1)), cfg.n_samples, mechanism=mechanism,
                           graph_type=str(rng.choice(list(cfg.graph_types))), rng=rng, degrees=cfg.degrees)
                 for _ in range(batch_size)]
        return collate(items)

    return sample


def build_model(cfg: CauScalePreset, variant: str = "full") -> torch.nn.Module:
    """The full model or a one-change ablation: ``no_prior`` (constant prior), ``untied`` (untied
    attention in both streams, standard per-row scaling ``1/sqrt(d_h)``), ``untied_official`` (untied
    with the official ``--attn_shape rhnij`` scaling, which keeps the tied layer's ``1/sqrt(R)``);
    ``avici`` is the AVICI-style data-only untied baseline."""
    kw = dict(embed_dim=cfg.embed_dim, n_heads=cfg.n_heads, ffn_dim=cfg.ffn_dim)
    if variant == "avici":
        return AVICIStyle(n_layers=cfg.n_blocks, **kw)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS + ('avici',)}, got {variant!r}")
    return CauScale(n_blocks=cfg.n_blocks, reduction_k=cfg.reduction_k, reduction_r=cfg.reduction_r,
                    use_graph_prior=variant != "no_prior", tied=variant not in UNTIED,
                    untied_scaling="official" if variant == "untied_official" else "sdpa", **kw)


def train_variant(cfg: CauScalePreset, variant: str, seed: int, n_steps: int, device="cpu",
                  snapshot_steps=(), progress: bool = True):
    """Initialise with ``torch.manual_seed(seed)``, train on the data stream seeded ``seed`` (all
    training seeds are below the test seeds)."""
    torch.manual_seed(seed)
    model = build_model(cfg, variant)
    hist = train_amortized(model, task_sampler(cfg), n_steps, batch_size=cfg.batch_size, lr=cfg.lr,
                           weight_decay=cfg.weight_decay, seed=seed, device=device,
                           snapshot_steps=snapshot_steps, progress=progress)
    return model, hist


def train_checkpoint(cfg: CauScalePreset, out: str | Path, progress: bool = True, resume: bool = True) -> dict:
    """Train every (seed, variant) of the preset and save them (fp16 state dicts, fp32 losses). The file
    is rewritten after each (seed, variant); with ``resume`` the finished ones of a matching file are kept."""
    out = Path(out)
    payload = load_checkpoint(out) if resume and out.exists() else None
    if payload is None or not checkpoint_matches(payload, cfg):
        payload = {"preset": dataclasses.asdict(cfg), "models": {}, "losses": {},
                   "command": "ICML26_THREADS=1 python -m icml26.causcale.training --scale book "
                              "--out data/causcale/causcale_book.pt",
                   "torch": torch.__version__}
    out.parent.mkdir(parents=True, exist_ok=True)
    for seed in cfg.train_seeds:
        for variant in variants_for(cfg, seed):
            if f"seed{seed}/{variant}" in payload["losses"]:
                continue
            steps = cfg.steps_full if variant == "full" else cfg.steps_ablation
            snaps = (cfg.steps_ablation, cfg.steps_full) if variant == "full" else (steps,)
            _, hist = train_variant(cfg, variant, seed, steps, snapshot_steps=snaps, progress=progress)
            for step, sd in hist.snapshots.items():
                payload["models"][f"seed{seed}/{variant}@{step}"] = pack_state_dict(sd)
            payload["losses"][f"seed{seed}/{variant}"] = hist.losses
            torch.save(payload, out)
    return payload


def pack_state_dict(sd: dict) -> dict:
    """A state dict as one flat float16 tensor plus its names and shapes (a fifth of the pickle
    overhead of storing every tensor apart). Buffers and parameters are all floating here."""
    names = list(sd)
    return {"flat": torch.cat([sd[k].detach().reshape(-1).half() for k in names]), "names": names,
            "shapes": [tuple(sd[k].shape) for k in names]}


def unpack_state_dict(entry: dict) -> dict:
    """The float32 state dict of a stored model (packed by :func:`pack_state_dict`, or a plain dict of
    float16 tensors as the first version of the checkpoint stored it)."""
    if "flat" not in entry:
        return {k: v.float() for k, v in entry.items()}
    out, start = {}, 0
    for name, shape in zip(entry["names"], entry["shapes"], strict=True):
        size = int(np.prod(shape)) if len(shape) else 1
        out[name] = entry["flat"][start:start + size].float().reshape(shape)
        start += size
    return out


def merge_checkpoints(out: str | Path, parts, cfg: CauScalePreset) -> dict:
    """Merge checkpoints trained (e.g. in parallel, one seed each) with the same training fields; every
    model is stored packed (:func:`pack_state_dict`)."""
    payload = None
    for part in parts:
        ck = load_checkpoint(part)
        if not checkpoint_matches(ck, cfg):
            raise ValueError(f"parts: {part} was not trained with this preset")
        if payload is None:
            payload = ck
        else:
            payload["models"].update(ck["models"])
            payload["losses"].update(ck["losses"])
    payload["preset"] = dataclasses.asdict(cfg)
    payload["models"] = {k: v if "flat" in v else pack_state_dict(unpack_state_dict(v))
                         for k, v in sorted(payload["models"].items())}
    payload["losses"] = dict(sorted(payload["losses"].items()))
    torch.save(payload, out)
    return payload


def variants_for(cfg: CauScalePreset, seed: int) -> tuple:
    """The variants trained for ``seed``: the untied ablation with the standard scale (the slowest
    variant) for ``cfg.untied_seeds``, the one with the official rhnij scale for
    ``cfg.official_untied_seeds``."""
    seeds = {"untied": cfg.untied_seeds, "untied_official": cfg.official_untied_seeds}
    return tuple(v for v in VARIANTS if v not in seeds or seed in seeds[v])


def stored_seeds(ckpt: dict, cfg: CauScalePreset) -> tuple:
    """The training seeds for which the checkpoint holds the full model and the no-prior ablation."""
    return tuple(s for s in cfg.train_seeds if all(f"seed{s}/{v}" in ckpt["losses"] for v in ("full", "no_prior")))


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_checkpoint(path: str | Path | None = None) -> dict | None:
    """The shipped checkpoint as a dict, or None when the file is missing."""
    path = Path(path) if path is not None else DEFAULT_CHECKPOINT
    if not path.exists():
        return None
    return torch.load(path, map_location="cpu", weights_only=False)


def model_from_checkpoint(ckpt: dict, cfg: CauScalePreset, variant: str, seed: int, step: int) -> torch.nn.Module:
    """Rebuild a stored model in fp32 (eval mode)."""
    key = f"seed{seed}/{variant}@{step}"
    if key not in ckpt["models"]:
        raise KeyError(f"checkpoint has no model {key!r}; it holds {sorted(ckpt['models'])}")
    model = build_model(cfg, variant)
    model.load_state_dict(unpack_state_dict(ckpt["models"][key]))
    return model.eval()


TRAIN_FIELDS = ("seed", "embed_dim", "n_heads", "ffn_dim", "n_blocks", "reduction_k", "reduction_r", "train_n",
                "n_samples", "degrees", "graph_types", "batch_size", "lr", "weight_decay", "steps_full",
                "steps_ablation")


def checkpoint_matches(ckpt: dict, cfg: CauScalePreset) -> bool:
    """Whether a checkpoint was trained with this preset's model, data and training fields."""
    if ckpt is None:
        return False
    stored, now = ckpt.get("preset", {}), dataclasses.asdict(cfg)
    return all(stored.get(f) == now[f] for f in TRAIN_FIELDS)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="book")
    ap.add_argument("--out", default=str(DEFAULT_CHECKPOINT))
    ap.add_argument("--seeds", default=None, help="comma-separated subset of the preset's training seeds")
    ap.add_argument("--merge", nargs="*", default=(), help="checkpoints of the same preset to merge into --out")
    args = ap.parse_args(argv)
    one_thread().pin()
    cfg = preset(args.scale)
    if args.merge:
        merge_checkpoints(args.out, args.merge, cfg)
    else:
        if args.seeds:
            cfg = dataclasses.replace(cfg, train_seeds=tuple(int(s) for s in args.seeds.split(",")))
        train_checkpoint(cfg, args.out)
    print(f"wrote {args.out}  sha256 {sha256(args.out)}")


if __name__ == "__main__":
    main()
