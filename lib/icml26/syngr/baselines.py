"""Baselines (spec Sec. 3.7 / 7.3). The generative baselines GR-text, GR-image and GR-fused
(TIGER / MQL4GRec-style) are :class:`~icml26.syngr.method.GRSeq2Seq` with ``history_mode`` set and
the plain NLL (:func:`~icml26.syngr.method.nll_loss`); this module adds the popularity ranking and
SASRec-ID (Kang & McAuley, 2018), the paper's sequential-recommender baseline over item ids."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .data import Split, ranks_from_scores
from .method import _Attention


def popularity_ranks(train: Split, split: Split, n_items: int, seed: int = 0) -> np.ndarray:
    """Rank of each target when items are ranked by their frequency as training targets."""
    if not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be a positive integer, got {n_items!r}")
    freq = np.bincount(train.target, minlength=n_items).astype(float)
    return ranks_from_scores(np.broadcast_to(freq, (len(split), n_items)).copy(), split.target, seed)


class _SASBlock(nn.Module):
    """Pre-LN self-attention block with an explicit [B, 1, L, L] attention mask."""

    def __init__(self, d, heads, dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = _Attention(d, heads)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Dropout(dropout), nn.Linear(2 * d, d))
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask):
        x = x + self.drop(self.attn(self.ln1(x), mask=mask)[0])
        return x + self.drop(self.ff(self.ln2(x)))


class SASRec(nn.Module):
    """SASRec-ID: causal self-attention over item-id embeddings plus learned positions; the last
    position's state h_L scores every item by h_L^T E_item (embeddings shared with the input), and
    training is cross-entropy over the whole catalogue (spec Sec. 3.7). Histories are left-padded with
    -1; a padded position attends only to itself, so no attention row is empty."""

    def __init__(self, n_items: int, max_hist: int, d_model: int = 48, heads: int = 4, layers: int = 2,
                 dropout: float = 0.1):
        super().__init__()
        for name, v in (("n_items", n_items), ("max_hist", max_hist), ("layers", layers)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if d_model % heads:
            raise ValueError(f"d_model={d_model} must be divisible by heads={heads}")
        self.n_items = n_items
        self.item = nn.Embedding(n_items + 1, d_model)          # index n_items = PAD
        nn.init.normal_(self.item.weight, std=d_model**-0.5)    # unit-norm rows: logits O(1) at the start
        self.pos = nn.Parameter(0.02 * torch.randn(max_hist, d_model))
        self.blocks = nn.ModuleList(_SASBlock(d_model, heads, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)

    def forward(self, hist: torch.Tensor) -> torch.Tensor:
        """Scores [B, n_items] of every item as the next one after each history [B, max_hist]."""
        pad = hist < 0
        L = hist.shape[1]
        x = self.item(torch.where(pad, self.n_items, hist)) + self.pos[:L]
        eye = torch.eye(L, dtype=torch.bool, device=hist.device)
        causal = torch.tril(torch.ones(L, L, dtype=torch.bool, device=hist.device))
        mask = (causal & (~pad[:, None, :] | eye))[:, None]   # [B, 1, L, L]
        for blk in self.blocks:
            x = blk(x, mask)
        return self.ln(x[:, -1]) @ self.item.weight[:self.n_items].T


@torch.no_grad()
def sasrec_ranks(model: SASRec, split: Split, seed: int = 0, chunk: int = 2048) -> np.ndarray:
    """1-based rank of each target under the model's scores over the whole catalogue (no exclusion
    of history items, the paper's protocol)."""
    was = model.training
    model.eval()
    dev = next(model.parameters()).device
    h = torch.as_tensor(split.hist)
    scores = torch.cat([model(h[s:s + chunk].to(dev)).cpu() for s in range(0, len(h), chunk)])
    model.train(was)
    return ranks_from_scores(scores.double().numpy(), split.target, seed)


def train_sasrec(model: SASRec, train: Split, val: Split, cfg, desc: str = "SASRec-ID"):
    """Cross-entropy over the catalogue on the (history, next item) training pairs, with the generators'
    loop and settings (:func:`~icml26.syngr.train.fit`: same epochs, batch, learning rate, schedule and
    best-validation selection); validation Recall@10 by full ranking."""
    from .train import fit

    dev = torch.device(cfg.device)
    model.to(dev).train()
    hist, tgt = torch.as_tensor(train.hist), torch.as_tensor(train.target)

    def step_loss(idx):
        return F.cross_entropy(model(hist[idx].to(dev)), tgt[idx].to(dev)), len(idx)

    def val_recall():
        return float((sasrec_ranks(model, val, cfg.seed) <= 10).mean())

    return fit(model, len(tgt), step_loss, val_recall, cfg, torch.Generator().manual_seed(cfg.seed), desc)
