"""Probing fixed-size representations of structures (spec Sec. 3.6, claim 4).

APT's embedding is the flattened FSQ codes of its first k tokens (no pooling). A local tokenizer's
per-residue tokens must be pooled into one vector for a variable-length protein; the book compares
three poolings of Kanzi-mini: mean FSQ codes, a bag-of-codes histogram, and mean pre-quantisation
encoder features.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor

from .backbone import length_groups
from .geometry import canonicalize, check_coords, check_prefix_mask
from .model import DiffusionTokenizer


def probe_accuracy(features: np.ndarray, labels: np.ndarray, model: str = "mlp", folds: int = 5, seed: int = 0,
                   hidden: int = 128, max_iter: int = 400) -> tuple[float, float]:
    """Mean and sd of stratified k-fold CV accuracy of a logistic-regression (``"linear"``) or a
    one-hidden-layer MLP (``"mlp"``) probe on standardised features (scikit-learn)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = np.asarray(features, dtype=float)
    y = np.asarray(labels)
    if x.ndim != 2 or y.ndim != 1 or len(x) != len(y):
        raise ValueError(f"features must be (n, d) and labels (n,), got {x.shape} and {y.shape}")
    if not np.isfinite(x).all():
        raise ValueError("features must be finite")
    if model not in ("linear", "mlp"):
        raise ValueError(f"model must be 'linear' or 'mlp', got {model!r}")
    if not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an int >= 2, got {folds!r}")
    if len(np.unique(y)) < 2:
        raise ValueError("labels must contain at least two classes")
    if len(y) < folds or np.bincount(np.unique(y, return_inverse=True)[1]).min() < folds:
        raise ValueError(f"every class needs at least folds={folds} samples")
    clf = (LogisticRegression(max_iter=2000, C=1.0) if model == "linear"
           else MLPClassifier((hidden,), max_iter=max_iter, random_state=seed, alpha=1e-3))
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        acc = cross_val_score(make_pipeline(StandardScaler(), clf), x, y, cv=cv)
    return float(acc.mean()), float(acc.std())


def _prefix_lengths(model, x_angstrom, mask) -> Tensor:
    """Lengths of the proteins of a zero-padded batch: ``x_angstrom (B, L, 3)`` and a ``mask (B, L)``
    that keeps a prefix of every row (the batching reads ``x[:, :n]``; another mask is refused)."""
    if not isinstance(model, DiffusionTokenizer):
        raise TypeError(f"model must be a DiffusionTokenizer, got {type(model).__name__}")
    x = check_coords(x_angstrom, "x_angstrom")
    if x_angstrom.ndim != 3:
        raise ValueError(f"x_angstrom must be a (B, L, 3) batch, got shape {tuple(x_angstrom.shape)}")
    return check_prefix_mask(mask, x).sum(1)


@torch.no_grad()
def local_token_features(model: DiffusionTokenizer, x_angstrom: Tensor, mask: Tensor, kind: str = "codes") -> np.ndarray:
    """Pooled per-residue representation of a (local) tokenizer for variable-length proteins:
    ``"codes"`` mean FSQ codes, ``"bag"`` normalised code histogram, ``"features"`` mean pre-quantisation
    encoder features. Proteins are canonicalised (PCA pose) first, like APT's ``embed``. ``mask (B, L)``
    must keep a prefix of every row (residues ``0..n-1``); a mask with leading or inner gaps is refused
    (it used to be read as a length, so residues 10-39 gave the features of residues 0-29)."""
    if kind not in ("codes", "bag", "features"):
        raise ValueError(f"kind must be 'codes', 'bag' or 'features', got {kind!r}")
    lengths = _prefix_lengths(model, x_angstrom, mask)
    p = next(model.parameters())
    out: list = [None] * x_angstrom.shape[0]
    for length, idx in length_groups({"length": lengths}):
        x = canonicalize(x_angstrom[idx, :length].to(p.device, p.dtype)) / 10.0
        if kind == "features":
            f = model.encoder_features(x).mean(1)
        else:
            _, ids, codes = model.encode_codes(x)
            if kind == "codes":
                f = codes.mean(1)
            else:
                f = torch.zeros(len(idx), model.fsq.codebook_size, device=x.device)
                f.scatter_add_(1, ids, torch.ones_like(ids, dtype=f.dtype))
                f = f / length
        for j, i in enumerate(idx.tolist()):
            out[i] = f[j].float().cpu().numpy()
    return np.stack(out)


@torch.no_grad()
def global_embeddings(model: DiffusionTokenizer, x_angstrom: Tensor, mask: Tensor, ntoks: int = 8) -> np.ndarray:
    """APT ``embed`` (first ``ntoks`` codes, flattened) for variable-length proteins (``mask`` as in
    :func:`local_token_features`: a prefix of every row)."""
    lengths = _prefix_lengths(model, x_angstrom, mask)
    if not isinstance(ntoks, int) or isinstance(ntoks, bool) or ntoks < 1:
        raise ValueError(f"ntoks must be an int >= 1, got {ntoks!r}")
    out: list = [None] * x_angstrom.shape[0]
    for length, idx in length_groups({"length": lengths}):
        e = model.embed(x_angstrom[idx, :length], ntoks)
        for j, i in enumerate(idx.tolist()):
            out[i] = e[j].float().cpu().numpy()
    return np.stack(out)
