"""The cost model of the protein-tokens notebooks (:mod:`icml26.book.budget`).

Notebook 2 loads the shipped tokenizers when ``retrain_steps == 0`` and otherwise trains both here: one
item per tokenizer, real steps of :func:`~icml26.protein_tokens.model.train_tokenizer` (``steps=3``, the
model's set-up spread over them, the recipe's batch, backbones drawn on the host inside each step). Decoding is counted per ODE sampler
step: one decoder step of 64 proteins, FLOPs and bytes scaled to the decoded set (``n_test`` for the
reconstructions at every k, ``n_swap`` per swapped position). Notebook 1 is NumPy geometry and one FSQ
layer (its fixed part); notebook 3's probes and shrinking are not modelled yet."""

from __future__ import annotations

from dataclasses import replace

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets

_B = 64
_PER = 3        # training steps per measured call (model set-up spread over them: an upper estimate)


def _mcfg(cfg, name):
    from .checkpoints import tokenizer_config

    return replace(tokenizer_config(name), **dict(pick(cfg, "model_overrides", ())))


def _train(cfg, name):
    def build():
        from .checkpoints import RECIPE
        from .model import train_tokenizer

        mcfg, r = _mcfg(cfg, name), RECIPE
        return lambda: train_tokenizer(mcfg, tuple(cfg.lengths), _PER, batch=r["batch"], lr=r["lr"], warmup=1,
                                       seed=0, noise_deg=r["noise_deg"], device="cpu", progress=False)
    return build


def _decode_step(cfg, name):
    def build():
        import torch

        from .backbone import make_backbones
        from .geometry import center_and_scale
        from .model import DiffusionTokenizer

        torch.manual_seed(0)
        model = DiffusionTokenizer(_mcfg(cfg, name)).eval()
        length = max(tuple(cfg.lengths))
        x = center_and_scale(make_backbones(_B, length, seed=0)["CA"])
        with torch.no_grad():
            _, tok = model.encode(x)

        @torch.no_grad()
        def step():
            return model.decode(tok, length, n_keep=8, steps=1, eta=0.0, guidance=1.0, score_weight=0.0)
        return step
    return build


def notebooks(scale: str) -> dict:
    from .checkpoints import NAMES

    cfg = gpu_preset(presets, scale)
    retrain = pick(cfg, "retrain_steps", 0)
    steps = pick(cfg, "sampler_steps", 1)
    ks = n_of(pick(cfg, "ks"), 1)
    nb2 = [Item(f"train step, {name}", retrain, _train(cfg, name), per_call=_PER) for name in NAMES]
    nb2 += [Item(f"decode step of {pick(cfg, 'n_test', _B)} proteins, {name} (every k)", ks * steps,
                 _decode_step(cfg, name), flop_scale=pick(cfg, "n_test", _B) / _B, key=f"decode {name}")
            for name in NAMES]
    swaps = {NAMES[0]: n_of(pick(cfg, "apt_swap_positions"), 1), NAMES[-1]: n_of(pick(cfg, "kanzi_swap_positions"), 1)}
    nb2 += [Item(f"decode step of {pick(cfg, 'n_swap', _B)} proteins, {name} (swaps)", n * steps,
                 _decode_step(cfg, name), flop_scale=pick(cfg, "n_swap", _B) / _B, key=f"decode {name}")
            for name, n in swaps.items()]
    return {"01-backbones-and-fsq": [], "02-global-vs-local-tokens": nb2, "03-embeddings-and-shrinking": []}
