"""Training loop, metrics and the pair-shuffle diagnostic (spec Sec. 3.5, 4d, 7.3)."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from icml26.core import adamw_flat

from . import _checks as C
from .method import GRSeq2Seq, SynGRConfig, modality_scores, nll_loss, saliency_pass, syngr_loss
from .sequences import IMAGE, TEXT, IDTrie, TokenLayout, check_inputs, constrained_beam_search

METHODS = ("nll", "syngr")


_pos_int = C.pos_int


def recall_at_k(ranks, k: int) -> float:
    """Recall@K (= HR@K under leave-one-out): share of targets at rank 1..K (rank 0 = not retrieved)."""
    k = _pos_int(k, "k")
    r = np.asarray(ranks)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"ranks must be a non-empty 1-D array, got shape {r.shape}")
    return float(((r >= 1) & (r <= k)).mean())


def ndcg_at_k(ranks, k: int) -> float:
    """NDCG@K with one relevant item: mean of 1/log2(rank + 1) over targets ranked within K."""
    k = _pos_int(k, "k")
    if isinstance(ranks, (str, bytes)) or ranks is None:
        raise TypeError(f"ranks must be an array of ranks, got {type(ranks).__name__}")
    r = np.asarray(ranks, dtype=float)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"ranks must be a non-empty 1-D array, got shape {r.shape}")
    hit = (r >= 1) & (r <= k)
    return float(np.where(hit, 1.0 / np.log2(np.maximum(r, 1) + 1), 0.0).mean())


def ranks_from_beams(items: torch.Tensor, target: torch.Tensor) -> np.ndarray:
    """1-based rank of the target in each row of beam items [B, beam], 0 if absent.

    ``target`` holds one item per row (shape [B]); it is never broadcast (a length-1 target
    against B rows is a ValueError naming ``target``)."""
    for name, t, nd in (("items", items, 2), ("target", target, 1)):
        if not isinstance(t, torch.Tensor) or t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"{name} must be an integer tensor of item ids, got "
                            f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
        if t.dim() != nd:
            raise ValueError(f"{name} must have {nd} dimension(s), got shape {tuple(t.shape)}")
    if target.shape[0] != items.shape[0]:
        raise ValueError(f"target must hold one item per row of items (B = {items.shape[0]}), "
                         f"got {target.shape[0]}")
    if items.shape[1] == 0:
        raise ValueError("items must hold at least one beam per row")
    hit = items == target.to(items.device)[:, None]
    pos = hit.float().argmax(1) + 1
    return torch.where(hit.any(1), pos, 0).cpu().numpy()


def pair_shuffle(input_ids, valid, layout: TokenLayout, generator: torch.Generator | None = None):
    """Permute the image blocks across each row's valid history items (Sec. 4d): every item keeps
    its text tokens and receives another history item's image tokens. The per-row multisets of text
    and of image tokens are unchanged; only the pairing is destroyed. Needs left-padded whole items."""
    if not isinstance(layout, TokenLayout):
        raise TypeError(f"layout must be a TokenLayout, got {type(layout).__name__}")
    C.generator(generator)
    check_inputs(input_ids, valid, layout)
    B, P, H, D = len(input_ids), layout.n_prompt, layout.max_hist, layout.levels
    blocks = input_ids[:, P:].reshape(B, H, 2, D)
    vblk = valid[:, P:].reshape(B, H, 2, D)
    item_ok = vblk[:, :, 0, 0] | vblk[:, :, 1, 0]                              # [B, H]
    slot = torch.arange(H, dtype=torch.float32).expand(B, H)
    key = torch.where(item_ok, torch.rand(B, H, generator=generator), slot - H)  # PAD slots stay first, in order
    perm = key.argsort(1).to(input_ids.device)
    img = blocks[:, :, 1].gather(1, perm[..., None].expand(-1, -1, D))
    img_v = vblk[:, :, 1].gather(1, perm[..., None].expand(-1, -1, D))
    out = torch.stack([blocks[:, :, 0], img], 2).reshape(B, -1)
    vout = torch.stack([vblk[:, :, 0], img_v], 2).reshape(B, -1)
    return torch.cat([input_ids[:, :P], out], 1), torch.cat([valid[:, :P], vout], 1)


def evaluate(model, batch: dict, trie: IDTrie, beam: int = 20, ks=(5, 10), mask=None, renormalise: bool = False) -> dict:
    """Recall@K and NDCG@K from constrained beam search; ``mask`` restricts to a slice; ``renormalise``
    as in :func:`constrained_beam_search`."""
    beam = _pos_int(beam, "beam")
    if isinstance(ks, (str, bytes)) or not hasattr(ks, "__iter__") or len(ks) == 0:
        raise ValueError(f"ks must be a non-empty tuple of cutoffs, got {ks!r}")
    ks = tuple(_pos_int(k, "ks") for k in ks)
    if beam < max(ks):
        raise ValueError(f"beam={beam} must be >= max(K)={max(ks)}")
    items, _ = constrained_beam_search(model, batch, trie, beam, renormalise=renormalise)
    ranks = ranks_from_beams(items, batch["target"])
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != ranks.shape:
            raise ValueError(f"mask must be a boolean array with one entry per row ({ranks.shape}), "
                             f"got {mask.dtype} {mask.shape}")
        ranks = ranks[mask]
    out = {f"recall@{k}": recall_at_k(ranks, k) for k in ks}
    out.update({f"ndcg@{k}": ndcg_at_k(ranks, k) for k in ks})
    out["ranks"] = ranks
    return out


@torch.no_grad()
def text_attention_share(model: GRSeq2Seq, batch: dict, chunk: int = 1024) -> float:
    """Mean share of the last-layer saliency that falls on text tokens (of text + image)."""
    model.eval()
    dev = next(model.parameters()).device
    shares = []
    for s in range(0, len(batch["input_ids"]), chunk):
        ids, valid = batch["input_ids"][s:s + chunk].to(dev), batch["valid"][s:s + chunk].to(dev)
        sal, v = saliency_pass(model, ids, valid)
        t = (sal * (v & (model.pos_mod == TEXT))).sum(1)
        i = (sal * (v & (model.pos_mod == IMAGE))).sum(1)
        shares.append((t / (t + i).clamp_min(1e-12)).cpu())
    model.train()
    return float(torch.cat(shares).mean())


def dominant_share(model: GRSeq2Seq, batch: dict) -> float:
    """Share of rows whose dominant modality (larger mean saliency) is text."""
    model.eval()
    dev = next(model.parameters()).device
    sal, v = saliency_pass(model, batch["input_ids"].to(dev), batch["valid"].to(dev))
    sc = modality_scores(sal, model.pos_mod, v)
    model.train()
    return float((sc[:, 0] >= sc[:, 1]).float().mean())


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 15
    batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.01
    eval_every: int = 5
    beam: int = 20
    max_steps: int = 0             # cap on steps per epoch (0 = none; dry runs)
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        for f in ("epochs", "batch_size", "eval_every", "beam"):
            _pos_int(getattr(self, f), f)
        _pos_int(self.max_steps, "max_steps", 0)
        _pos_int(self.seed, "seed", 0)
        C.real(self.lr, "lr", lo=0.0, strict=True)
        C.real(self.weight_decay, "weight_decay", lo=0.0)
        C.device(self.device, "device")


@dataclass
class TrainLog:
    epochs: list = field(default_factory=list)
    val_recall: list = field(default_factory=list)
    text_share: list = field(default_factory=list)
    best_epoch: int = 0
    seconds: float = 0.0
    rows_forward: int = 0          # decoder rows with gradient (B per step for NLL, 3B for SynGR)


def fit(model, n_rows: int, step_loss, val_recall, cfg: TrainConfig, generator: torch.Generator, desc: str,
        after_eval=None) -> TrainLog:
    """The loop every model of the chapter trains with: AdamW + cosine schedule over shuffled
    mini-batches of ``n_rows`` training rows; validation Recall@10 every ``eval_every`` epochs (and at
    the end), best weights kept. ``step_loss(idx) -> (loss, rows_forward)`` for a batch of row indices;
    ``val_recall() -> float``; ``after_eval(log)`` adds per-evaluation logs.

    AdamW runs over one flat buffer that holds every parameter (:func:`icml26.core.adamw_flat`, built after
    the first backward pass, once every parameter is seen to have a gradient; otherwise over the parameter
    list): AdamW is elementwise, so this is the multi-tensor AdamW over the parameter list, element for
    element (bit-identical weights, tested), in one call per operation instead of one per parameter. A
    parameter with a gradient on the first step is taken to have one on every step (true of every model here:
    each step's loss reaches all weights)."""
    params = [p for p in model.parameters() if p.requires_grad]
    steps_per = (n_rows + cfg.batch_size - 1) // cfg.batch_size
    if cfg.max_steps:
        steps_per = min(steps_per, cfg.max_steps)
    opt = sched = gflat = None
    log, best, best_state = TrainLog(), -1.0, None
    t0 = time.perf_counter()
    for ep in tqdm(range(1, cfg.epochs + 1), desc=desc, leave=False):
        perm = torch.randperm(n_rows, generator=generator)
        stop = n_rows if not cfg.max_steps else min(n_rows, cfg.max_steps * cfg.batch_size)
        for s in range(0, stop, cfg.batch_size):
            loss, rows = step_loss(perm[s:s + cfg.batch_size])
            log.rows_forward += rows
            if gflat is not None:
                gflat.zero_()
            elif opt is not None:
                opt.zero_grad(set_to_none=True)
            else:
                for p in params:
                    p.grad = None
            loss.backward()
            if opt is None:        # first step: the optimiser's tensors, once the gradients are known
                opt, gflat = adamw_flat(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
                sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.epochs * steps_per)
            opt.step()
            sched.step()
        if ep % cfg.eval_every == 0 or ep == cfg.epochs:
            r = val_recall()
            log.epochs.append(ep)
            log.val_recall.append(r)
            if after_eval is not None:
                after_eval(log)
            if r > best:
                best, log.best_epoch = r, ep
                best_state = copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    model.eval()
    log.seconds = time.perf_counter() - t0
    return log


def train_generator(model: GRSeq2Seq, train: dict, val: dict, trie: IDTrie, cfg: TrainConfig,
                    method: str = "nll", syngr: SynGRConfig | None = None, desc: str = "") -> TrainLog:
    """:func:`fit` with the plain NLL or, for ``method="syngr"``, :func:`syngr_loss` (3 rows per
    example); validation Recall@10 from constrained beam search, and the text share of saliency."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "syngr" and syngr is None:
        syngr = SynGRConfig()
    dev = torch.device(cfg.device)
    model.to(dev).train()
    trie.to(dev)
    gen = torch.Generator().manual_seed(cfg.seed)

    def step_loss(idx):
        b = {k: train[k][idx].to(dev) for k in ("input_ids", "valid", "labels")}
        if method == "syngr":
            return syngr_loss(model, b, syngr, gen)[0], 3 * len(idx)
        return nll_loss(model, b)[0], len(idx)

    def text_share(log):
        log.text_share.append(text_attention_share(model, val) if model.history_mode == "fused" else float("nan"))

    return fit(model, len(train["input_ids"]), step_loss, lambda: evaluate(model, val, trie, cfg.beam)["recall@10"],
               cfg, gen, desc or method, text_share)


def synergy_reliance(model: GRSeq2Seq, batch: dict, trie: IDTrie, beam: int = 20, k: int = 10, seed: int = 0,
                     mask=None, p_full: float | None = None, shifted: dict | None = None) -> dict:
    """The book's synergy diagnostics (Sec. 4d): Recall@k on the full histories, on the motif-shifted
    histories ``shifted`` (every history item's image replaced by that of the item whose motif is moved
    by a constant mod C, :func:`icml26.syngr.data.motif_partner`; the style of every history item moves,
    nothing a single modality shows does), and on text-only and image-only histories.

    ``delta_syn = P_full - P_motif_shift`` is what the model loses when the style it could read from the
    pairs is moved; ``delta_uni = P_full - max(P_text_only, P_image_only)`` is what it loses without the
    second modality. (The within-row pair shuffle, :func:`pair_shuffle`, keeps the multisets of text and
    of image tokens, from which an additive style mod C can still be read; it cannot see such a style.)
    ``p_full``: Recall@k on the full histories when the caller has it already (skips one beam search)."""
    from .sequences import apply_history_mode

    if shifted is not None and (not isinstance(shifted, dict) or shifted.get("input_ids") is None
                                or shifted["input_ids"].shape != batch["input_ids"].shape):
        raise ValueError("shifted must be a batch (dict) with the shape of batch, built with build_inputs(image_of=)")
    ids, valid = batch["input_ids"], batch["valid"]
    pm = model.pos_mod.cpu()
    views = {"full": (ids, valid), "text_only": apply_history_mode(ids, valid, pm, "text"),
             "image_only": apply_history_mode(ids, valid, pm, "image")}
    if shifted is not None:
        views["motif_shift"] = (shifted["input_ids"], shifted["valid"])
    out = {} if p_full is None else {"full": float(p_full)}
    for name, (i, v) in views.items():
        if name in out:
            continue
        out[name] = evaluate(model, dict(batch, input_ids=i, valid=v), trie, beam, ks=(k,), mask=mask)[f"recall@{k}"]
    out["delta_syn"] = out["full"] - out["motif_shift"] if shifted is not None else float("nan")
    out["delta_uni"] = out["full"] - max(out["text_only"], out["image_only"])
    return out
