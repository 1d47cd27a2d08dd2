"""Semantic identifiers (spec Sec. 3.2 / 7.2): residual k-means ("RQ-KMeans") per modality.

Residual quantisation with D levels and codebooks C_d = {e^d_k}:
r_0 = z,  c_d = argmin_k ||r_{d-1} - e^d_k||^2,  r_d = r_{d-1} - e^d_{c_d},  z_hat = sum_d e^d_{c_d}
(paper Sec. 3.2). The book fits each codebook with k-means on the residuals (batched torch), the
deterministic, training-free variant of the paper's RQ-VAE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ._checks import pos_int


def _check_feats(X, name="X") -> np.ndarray:
    if X is None or isinstance(X, (str, bytes)):
        raise TypeError(f"{name} must be a 2-D float array, got {type(X).__name__}")
    X = np.asarray(X.detach().cpu() if isinstance(X, torch.Tensor) else X, dtype=np.float32)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array [N, d], got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf")
    return X


_pos_int = pos_int


@dataclass
class RQCodebooks:
    centers: list          # D arrays [K, d]
    mean: np.ndarray       # standardisation applied before quantising
    scale: np.ndarray

    @property
    def levels(self) -> int:
        return len(self.centers)


def kmeans_torch(X: torch.Tensor, K: int, n_init: int, iters: int, gen: torch.Generator) -> torch.Tensor:
    """Lloyd's k-means with ``n_init`` restarts run as one batch (k-means++ seeding); best inertia wins."""
    N, d = X.shape
    # k-means++ seeding, batched over restarts
    idx0 = torch.randint(0, N, (n_init,), generator=gen)
    C = X[idx0][:, None, :]                                        # [R, 1, d]
    dmin = ((X[None] - C) ** 2).sum(-1)                           # [R, N]
    for _ in range(1, K):
        probs = dmin.clamp_min(0) + 1e-12
        nxt = torch.multinomial(probs / probs.sum(1, keepdim=True), 1, generator=gen)[:, 0]
        newc = X[nxt][:, None, :]
        C = torch.cat([C, newc], 1)
        dmin = torch.minimum(dmin, ((X[None] - newc) ** 2).sum(-1))
    for _ in range(iters):
        dist = torch.cdist(X[None].expand(n_init, N, d), C) ** 2   # [R, N, K]
        a = dist.argmin(-1)                                        # [R, N]
        one = torch.nn.functional.one_hot(a, K).to(X.dtype)        # [R, N, K]
        cnt = one.sum(1)                                           # [R, K]
        sums = one.transpose(1, 2) @ X                             # [R, K, d]
        C = torch.where(cnt[..., None] > 0, sums / cnt.clamp_min(1)[..., None], C)
    dist = torch.cdist(X[None].expand(n_init, N, d), C) ** 2
    inertia = dist.min(-1).values.sum(1)
    return C[int(inertia.argmin())]


def fit_rq_kmeans(X, levels: int = 3, K: int = 16, seed: int = 0, n_init: int = 4, iters: int = 30) -> RQCodebooks:
    """Residual k-means on standardised features: level d clusters the residuals of level d-1."""
    X = _check_feats(X)
    levels, K, n_init, iters = (_pos_int(levels, "levels"), _pos_int(K, "K"), _pos_int(n_init, "n_init"),
                                _pos_int(iters, "iters"))
    if K > X.shape[0]:
        raise ValueError(f"K={K} exceeds the number of points {X.shape[0]}")
    mean, scale = X.mean(0), X.std(0) + 1e-6
    r = torch.from_numpy((X - mean) / scale)
    gen = torch.Generator().manual_seed(int(seed))
    centers = []
    for _ in range(levels):
        C = kmeans_torch(r, K, n_init, iters, gen)
        code = torch.cdist(r, C).argmin(1)
        r = r - C[code]
        centers.append(C.numpy())
    return RQCodebooks(centers, mean, scale)


def rq_encode(cb: RQCodebooks, X) -> np.ndarray:
    """[N, D] codes by greedy residual nearest neighbour (Sec. 3.2)."""
    if not isinstance(cb, RQCodebooks):
        raise TypeError(f"cb must be RQCodebooks, got {type(cb).__name__}")
    X = _check_feats(X)
    if X.shape[1] != cb.centers[0].shape[1]:
        raise ValueError(f"X has {X.shape[1]} features, the codebooks expect {cb.centers[0].shape[1]}")
    r = torch.from_numpy((X - cb.mean) / cb.scale)
    codes = []
    for C in cb.centers:
        c = torch.cdist(r, torch.from_numpy(C)).argmin(1)
        r = r - torch.from_numpy(C)[c]
        codes.append(c.numpy())
    return np.stack(codes, 1).astype(np.int64)


def rq_decode(cb: RQCodebooks, codes, standardised: bool = True) -> np.ndarray:
    """z_hat = sum_d e^d_{c_d} (in standardised units; ``standardised=False`` maps back to features)."""
    if not isinstance(cb, RQCodebooks):
        raise TypeError(f"cb must be RQCodebooks, got {type(cb).__name__}")
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] > cb.levels or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"codes must be an integer array [N, <= {cb.levels}], got shape {codes.shape}")
    K = cb.centers[0].shape[0]
    if codes.size and (codes.min() < 0 or codes.max() >= K):
        raise ValueError(f"codes must lie in [0, {K})")
    z = sum(cb.centers[d][codes[:, d]] for d in range(codes.shape[1]))
    return z if standardised else z * cb.scale + cb.mean


def residual_norms(cb: RQCodebooks, X) -> np.ndarray:
    """Mean squared residual norm after 0..D levels: [D + 1]."""
    X = _check_feats(X)
    z = (X - cb.mean) / cb.scale
    codes = rq_encode(cb, X)
    out = [float((z**2).sum(1).mean())]
    for d in range(1, cb.levels + 1):
        out.append(float(((z - rq_decode(cb, codes[:, :d])) ** 2).sum(1).mean()))
    return np.array(out)


@dataclass
class SemanticIDs:
    text: np.ndarray     # [N, D] text codes
    image: np.ndarray    # [N, D] image codes
    suffix: np.ndarray   # [N] collision suffix
    joint: np.ndarray    # [N, 2D + 1] text (+) image (+) suffix

    @property
    def n_suffix(self) -> int:
        return int(self.suffix.max()) + 1


def collision_suffix(codes: np.ndarray) -> np.ndarray:
    """TIGER-style suffix 0, 1, 2, ... among items sharing a code tuple (in item order)."""
    _, inv = np.unique(codes, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.argsort(inv, kind="stable")
    sorted_inv = inv[order]
    first = np.r_[0, np.flatnonzero(np.diff(sorted_inv)) + 1]
    start = np.repeat(first, np.diff(np.r_[first, len(inv)]))
    suf = np.empty(len(inv), dtype=np.int64)
    suf[order] = np.arange(len(inv)) - start
    return suf


def assign_semantic_ids(text_codes, image_codes) -> SemanticIDs:
    """Add collision suffixes so that every joint identifier text (+) image (+) suffix is unique."""
    t, v = np.asarray(text_codes), np.asarray(image_codes)
    for nm, a in (("text_codes", t), ("image_codes", v)):
        if a.ndim != 2 or a.shape[0] == 0 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{nm} must be a non-empty integer array [N, D], got shape {a.shape}")
    if t.shape[0] != v.shape[0]:
        raise ValueError(f"text_codes and image_codes must have the same N, got {t.shape[0]} and {v.shape[0]}")
    base = np.concatenate([t, v], 1)
    suf = collision_suffix(base)
    return SemanticIDs(t.astype(np.int64), v.astype(np.int64), suf, np.concatenate([base, suf[:, None]], 1))


def _check_codes(codes, name: str = "codes") -> np.ndarray:
    """A non-empty [N, D] array of non-negative integer codes."""
    if codes is None or isinstance(codes, (str, bytes)):
        raise TypeError(f"{name} must be an integer array [N, D], got {type(codes).__name__}")
    codes = np.asarray(codes.detach().cpu() if isinstance(codes, torch.Tensor) else codes)
    if codes.ndim != 2 or codes.shape[0] == 0 or codes.shape[1] == 0:
        raise ValueError(f"{name} must be a non-empty array [N, D], got shape {codes.shape}")
    if not np.issubdtype(codes.dtype, np.integer):
        raise TypeError(f"{name} must hold integer codes, got dtype {codes.dtype}")
    if codes.min() < 0:
        raise ValueError(f"{name} must be non-negative, got a code {int(codes.min())}")
    return codes


def _check_attr(attr, n: int) -> np.ndarray:
    """A length-``n`` array of non-negative integer labels."""
    if attr is None or isinstance(attr, (str, bytes)):
        raise TypeError(f"attr must be an integer array [N], got {type(attr).__name__}")
    attr = np.asarray(attr)
    if attr.ndim != 1 or len(attr) != n:
        raise ValueError(f"attr must be an array [N] with N = len(codes) = {n}, got shape {attr.shape}")
    if not np.issubdtype(attr.dtype, np.integer) or attr.min() < 0:
        raise ValueError("attr must hold non-negative integer labels")
    return attr


def codebook_stats(codes, K: int) -> dict:
    """Per-level usage (fraction of the K codes used) and perplexity, and the collision rate
    1 - #unique tuples / N."""
    codes = _check_codes(codes)
    K = _pos_int(K, "K")
    if codes.max() >= K:
        raise ValueError(f"codes must lie in [0, K) = [0, {K}), got a code {int(codes.max())}")
    usage, perp = [], []
    for d in range(codes.shape[1]):
        cnt = np.bincount(codes[:, d], minlength=K)
        p = cnt / cnt.sum()
        usage.append(float((cnt > 0).mean()))
        nz = p[p > 0]
        perp.append(float(np.exp(-(nz * np.log(nz)).sum())))
    uniq = len(np.unique(codes, axis=0))
    return {"usage": usage, "perplexity": perp, "collision_rate": 1.0 - uniq / codes.shape[0]}


def attribute_recoverability(codes, attr) -> float:
    """Accuracy of predicting ``attr`` from the code tuple by majority vote within each tuple."""
    codes = _check_codes(codes)
    attr = _check_attr(attr, len(codes))
    _, inv = np.unique(codes, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    tab = np.zeros((inv.max() + 1, attr.max() + 1))
    np.add.at(tab, (inv, attr), 1)
    return float(tab.max(1).sum() / len(attr))


def attribute_recoverability_loo(codes, attr) -> float:
    """Leave-one-out recoverability: predict each item's ``attr`` by majority vote over the *other*
    items that share its longest code prefix (full tuple, else D-1 codes, ..., else the catalogue).

    Unlike :func:`attribute_recoverability`, a unique tuple cannot "recover" an attribute it does not
    encode. The score of such an attribute is not its base rate either: it falls *below* chance. Leaving
    an item out takes one of its own value from the group's counts, so when a group holds every value
    about equally often the vote of the others tends to name another value (never the item's own when
    the counts are exactly equal: in the product catalogue the motif from the text codes scores 0).
    Compare a score with a majority vote over the catalogue, not with an unrelated attribute's score."""
    codes = _check_codes(codes)
    attr = _check_attr(attr, len(codes))
    if len(attr) < 2:
        raise ValueError(f"codes must hold N >= 2 items for a leave-one-out score, got {len(attr)}")
    N, D = codes.shape
    A = int(attr.max()) + 1
    own = np.eye(A)[attr]
    glob = np.bincount(attr, minlength=A)[None, :] - own
    pred = glob.argmax(1)
    done = np.zeros(N, dtype=bool)
    for d in range(D, 0, -1):
        _, inv = np.unique(codes[:, :d], axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        tab = np.zeros((inv.max() + 1, A))
        np.add.at(tab, (inv, attr), 1)
        loo = tab[inv] - own
        ok = (loo.sum(1) > 0) & ~done
        pred[ok] = loo[ok].argmax(1)
        done |= ok
    return float((pred == attr).mean())


ID_MODES = ("rq_kmeans", "attribute")


def attribute_codes(attrs: dict) -> tuple[np.ndarray, np.ndarray]:
    """``id_mode="attribute"`` (spec Sec. 7.2, debug fallback): the attribute tuples themselves as codes,
    text (series, category, tone) and image (category, motif, background)."""
    a = attrs
    return (np.stack([a["series"], a["category"], a["tone"]], 1).astype(np.int64),
            np.stack([a["category"], a["motif"], a["background"]], 1).astype(np.int64))
