"""Token layout, vocabulary, batches, the identifier trie and constrained beam search (spec Sec. 3.2, 3.5, 7.3).

Input layout (static, vectorisable): ``[P prompt tokens] + max_hist x [D text codes, D image codes]``,
histories left-padded with whole PAD items, so every position has a fixed modality label. The
generation target is the joint identifier text (+) image (+) collision suffix (2D + 1 tokens; a book
choice, spec Sec. 7.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .data import Split
from .tokenizer import SemanticIDs

PROMPT, TEXT, IMAGE = 0, 1, 2
HISTORY_MODES = ("fused", "text", "image")


@dataclass(frozen=True)
class TokenLayout:
    n_prompt: int
    levels: int
    K: int
    max_hist: int
    n_suffix: int

    def __post_init__(self):
        for f in ("n_prompt", "levels", "K", "max_hist", "n_suffix"):
            v = getattr(self, f)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{f} must be an integer >= 1, got {v!r}")

    # vocabulary: PAD, BOS, prompt tokens, D*K text codes, D*K image codes, suffixes
    PAD = 0
    BOS = 1

    @property
    def text_base(self) -> int:
        return 2 + self.n_prompt

    @property
    def image_base(self) -> int:
        return self.text_base + self.levels * self.K

    @property
    def suffix_base(self) -> int:
        return self.image_base + self.levels * self.K

    @property
    def vocab_size(self) -> int:
        return self.suffix_base + self.n_suffix

    @property
    def stride(self) -> int:
        return 2 * self.levels

    @property
    def seq_len(self) -> int:
        return self.n_prompt + self.max_hist * self.stride

    @property
    def target_len(self) -> int:
        return 2 * self.levels + 1

    def pos_modality(self) -> torch.Tensor:
        """[S] PROMPT / TEXT / IMAGE label of every input position (static)."""
        block = torch.tensor([TEXT] * self.levels + [IMAGE] * self.levels)
        return torch.cat([torch.full((self.n_prompt,), PROMPT), block.repeat(self.max_hist)])

    def item_tokens(self, ids: SemanticIDs) -> np.ndarray:
        """[N, 2D] history tokens (level-specific text then image code tokens) of every item."""
        lv = np.arange(self.levels) * self.K
        return np.concatenate([self.text_base + lv + ids.text, self.image_base + lv + ids.image], 1)

    def target_tokens(self, ids: SemanticIDs) -> np.ndarray:
        """[N, 2D + 1] target token sequence of every item."""
        return np.concatenate([self.item_tokens(ids), self.suffix_base + ids.suffix[:, None]], 1)


def make_layout(ids: SemanticIDs, n_prompt: int, K: int, max_hist: int) -> TokenLayout:
    return TokenLayout(n_prompt, ids.text.shape[1], K, max_hist, ids.n_suffix)


def build_inputs(split: Split, ids: SemanticIDs, layout: TokenLayout, history_mode: str = "fused",
                 image_of=None, image_hist=None) -> dict:
    """``input_ids`` [M, S], ``valid`` [M, S], ``labels`` [M, T], ``target`` [M] for a split.

    ``image_of`` ([N] item ids, optional) shows every history item's text tokens with the image tokens
    of item ``image_of[i]``; ``image_hist`` ([M, max_hist] item ids, optional, -1 exactly on the empty
    slots) shows history slot ``j`` of row ``m`` with the image tokens of item ``image_hist[m, j]`` (one
    choice per row and slot, :func:`icml26.syngr.data.redraw_motifs`). Both are interventions on the
    histories; the targets are unchanged. At most one of the two."""
    if history_mode not in HISTORY_MODES:
        raise ValueError(f"history_mode must be one of {HISTORY_MODES}, got {history_mode!r}")
    if split.hist.shape[1] != layout.max_hist:
        raise ValueError(f"split histories have {split.hist.shape[1]} slots, layout expects {layout.max_hist}")
    if image_of is not None and image_hist is not None:
        raise ValueError("image_of and image_hist: pass at most one of them")
    tok = layout.item_tokens(ids)                                 # [N, 2D]
    if image_of is not None:
        image_of = np.asarray(image_of)
        if image_of.shape != (len(tok),) or not np.issubdtype(image_of.dtype, np.integer) \
                or image_of.min() < 0 or image_of.max() >= len(tok):
            raise ValueError(f"image_of must hold one item id in [0, {len(tok)}) per item, got shape {image_of.shape}")
        tok = np.concatenate([tok[:, :layout.levels], tok[image_of, layout.levels:]], 1)
    h = split.hist
    M = len(h)
    body = np.where(h[..., None] >= 0, tok[np.maximum(h, 0)], layout.PAD)   # [M, H, 2D]
    if image_hist is not None:
        image_hist = np.asarray(image_hist)
        if image_hist.shape != h.shape or not np.issubdtype(image_hist.dtype, np.integer) \
                or not np.array_equal(image_hist < 0, h < 0) or image_hist.max(initial=-1) >= len(tok):
            raise ValueError(f"image_hist must hold an item id in [0, {len(tok)}) for every filled history slot "
                             f"and -1 for every empty one (shape {h.shape}), got shape {image_hist.shape}")
        img = np.where(image_hist[..., None] >= 0, tok[np.maximum(image_hist, 0), layout.levels:], layout.PAD)
        body = np.concatenate([body[..., :layout.levels], img], 2)
    body = body.reshape(M, -1)
    prompt = np.broadcast_to(2 + np.arange(layout.n_prompt), (M, layout.n_prompt))
    input_ids = torch.from_numpy(np.concatenate([prompt, body], 1).astype(np.int64))
    valid = input_ids != layout.PAD
    if (valid[:, layout.n_prompt:].sum(1) == 0).any():
        raise ValueError("split has a history with zero valid items")
    input_ids, valid = apply_history_mode(input_ids, valid, layout.pos_modality(), history_mode, layout.PAD)
    labels = torch.from_numpy(layout.target_tokens(ids)[split.target])
    return {"input_ids": input_ids, "valid": valid, "labels": labels, "target": torch.from_numpy(split.target)}


def apply_history_mode(input_ids, valid, pos_mod, history_mode: str, pad_id: int = 0):
    """Hide the other modality's positions (PAD, not valid) for ``text``/``image`` histories."""
    if history_mode not in HISTORY_MODES:
        raise ValueError(f"history_mode must be one of {HISTORY_MODES}, got {history_mode!r}")
    if history_mode == "fused":
        return input_ids, valid
    drop = (pos_mod == (IMAGE if history_mode == "text" else TEXT)).to(valid.device)[None, :]
    return input_ids.masked_fill(drop, pad_id), valid & ~drop


def check_inputs(input_ids: torch.Tensor, valid: torch.Tensor, layout: TokenLayout) -> None:
    """Raise ValueError on a batch that does not match the layout or the vocabulary."""
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError("input_ids must be an integer torch.Tensor [B, S]")
    if input_ids.ndim != 2 or input_ids.shape[1] != layout.seq_len:
        raise ValueError(f"input_ids must have shape [B, {layout.seq_len}] (n_prompt + max_hist*(n_text+n_image)),"
                         f" got {tuple(input_ids.shape)}")
    if input_ids.numel() and (input_ids.min() < 0 or input_ids.max() >= layout.vocab_size):
        raise ValueError(f"input_ids has tokens outside the vocabulary [0, {layout.vocab_size})")
    if not isinstance(valid, torch.Tensor) or valid.dtype != torch.bool or valid.shape != input_ids.shape:
        raise ValueError("valid must be a bool tensor with the shape of input_ids")


class IDTrie:
    """Prefix trie over the valid target sequences, exported as dense tables for batched decoding:
    ``next_state[state, token]`` (-1 if not allowed) and ``leaf_item[state]`` (-1 if not a leaf)."""

    def __init__(self, target_tokens, vocab_size: int):
        tt = np.asarray(target_tokens)
        if tt.ndim != 2 or tt.shape[0] == 0:
            raise ValueError(f"target_tokens must be a non-empty array [N, T], got shape {tt.shape}")
        if len(np.unique(tt, axis=0)) != len(tt):
            raise ValueError("target_tokens must be unique per item (add collision suffixes)")
        N, T = tt.shape
        self.T, self.vocab_size = T, int(vocab_size)
        parent = np.zeros(N, dtype=np.int64)              # state of each item's prefix at the current depth
        edges, n_states = [], 1
        for t in range(T):
            key = parent * vocab_size + tt[:, t]
            uniq, inv = np.unique(key, return_inverse=True)
            child = n_states + np.arange(len(uniq))
            edges.append((uniq // vocab_size, uniq % vocab_size, child))
            parent = child[inv.reshape(-1)]
            n_states += len(uniq)
        nxt = np.full((n_states, vocab_size), -1, dtype=np.int64)
        for p, tok, c in edges:
            nxt[p, tok] = c
        leaf = np.full(n_states, -1, dtype=np.int64)
        leaf[parent] = np.arange(N)
        self.next_state = torch.from_numpy(nxt)
        self.leaf_item = torch.from_numpy(leaf)
        self.tokens = torch.from_numpy(tt.astype(np.int64))

    def to(self, dev) -> IDTrie:
        self.next_state, self.leaf_item, self.tokens = (x.to(dev) for x in (self.next_state, self.leaf_item, self.tokens))
        return self

    def allowed(self, state: torch.Tensor) -> torch.Tensor:
        """Bool mask [..., V] of tokens allowed after each prefix state."""
        return self.next_state[state] >= 0


def _masked_logp(logits: torch.Tensor, allowed: torch.Tensor, renormalise: bool = False) -> torch.Tensor:
    """Per-step scores of the allowed tokens. Default (HuggingFace ``generate`` with
    ``prefix_allowed_tokens_fn``, which TIGER, MQL4GRec and SynGR's released code use): log-softmax over
    the *whole* vocabulary, then -inf on the disallowed tokens, so a token the trie forces still costs
    its model log-probability. ``renormalise=True``: softmax over the allowed tokens only (forced tokens
    cost nothing); the book's control for what that convention throws away."""
    if renormalise:
        return torch.log_softmax(logits.masked_fill(~allowed, float("-inf")), -1)
    return torch.log_softmax(logits, -1).masked_fill(~allowed, float("-inf"))


@torch.no_grad()
def constrained_beam_search(model, batch: dict, trie: IDTrie, beam: int = 20, chunk: int = 512,
                            renormalise: bool = False):
    """Trie-constrained beam search (spec Sec. 3.5), batched over users and beams.

    Returns item ids [B, beam] (-1 where fewer than ``beam`` items exist) and their sequence
    log-probabilities [B, beam] (sum of the per-step scores of :func:`_masked_logp`: full-vocabulary
    log-softmax by default, as HuggingFace beam search; ``renormalise=True`` renormalises each step over
    the allowed tokens)."""
    if not isinstance(beam, (int, np.integer)) or isinstance(beam, bool) or beam < 1:
        raise ValueError(f"beam must be an integer >= 1, got {beam!r}")
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    outs_i, outs_s = [], []
    ids_all, valid_all = batch["input_ids"], batch["valid"]
    for s in range(0, len(ids_all), chunk):
        ids, valid = ids_all[s:s + chunk].to(dev), valid_all[s:s + chunk].to(dev)
        B = len(ids)
        mem, mvalid, _ = model.encode(ids, valid)
        cache = model.memory_cache(mem, mvalid)           # encoder memory K/V: once per user, not per beam
        state = torch.zeros(B, beam, dtype=torch.long, device=dev)
        score = torch.full((B, beam), float("-inf"), device=dev)
        score[:, 0] = 0.0
        last = torch.full((B, beam), model.bos_id, dtype=torch.long, device=dev)
        for _ in range(trie.T):
            h = model.decode_step(last, cache)             # [B, beam, d], cached self-attention
            logp = _masked_logp(model.head(h), trie.allowed(state), renormalise)
            cand = (score[..., None] + logp).view(B, -1)
            top, idx = cand.topk(beam, dim=1)
            V = logp.shape[-1]
            bi, tok = idx // V, idx % V
            model.reorder_cache(cache, bi)
            state = trie.next_state[state.gather(1, bi), tok]
            dead = ~torch.isfinite(top) | (state < 0)
            state = state.clamp_min(0)
            score = top.masked_fill(dead, float("-inf"))
            last = tok
        items = trie.leaf_item[state].masked_fill(~torch.isfinite(score), -1)
        outs_i.append(items.cpu())
        outs_s.append(score.cpu())
    model.train(was_training)
    return torch.cat(outs_i), torch.cat(outs_s)


@torch.no_grad()
def brute_force_scores(model, batch: dict, trie: IDTrie, renormalise: bool = False) -> torch.Tensor:
    """Exact sequence log-probability [B, N] of every valid identifier (teacher forcing), with the
    same per-step scores as the beam search. For checks on small catalogues."""
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    ids, valid = batch["input_ids"].to(dev), batch["valid"].to(dev)
    B, N, T = len(ids), len(trie.tokens), trie.T
    mem, mvalid, _ = model.encode(ids, valid)
    mem, mvalid = mem.repeat_interleave(N, 0), mvalid.repeat_interleave(N, 0)
    tgt = trie.tokens.to(dev).repeat(B, 1)                          # [B*N, T]
    dec_in = torch.cat([torch.full_like(tgt[:, :1], model.bos_id), tgt[:, :-1]], 1)
    logits = model.head(model.decode(dec_in, mem, mvalid))         # [B*N, T, V]
    states = [torch.zeros(len(tgt), dtype=torch.long, device=dev)]
    for t in range(T - 1):
        states.append(trie.next_state[states[-1], tgt[:, t]])
    st = torch.stack(states, 1)                                     # [B*N, T]
    logp = _masked_logp(logits, trie.allowed(st), renormalise).gather(-1, tgt[..., None])[..., 0]
    model.train(was_training)
    return logp.sum(1).view(B, N).cpu()
