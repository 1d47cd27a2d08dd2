"""The federated domain-incremental digits benchmark (book construction, offline).

Every domain (task) is a transformed copy of scikit-learn's bundled 8x8 digits, in the spirit of
Rotated-MNIST: the label set (0..9) never changes, the input distribution does.

* ``kind="rotations"`` (default): rotation by each angle in ``angles`` (degrees), bilinear,
  zero fill, image size kept.
* ``kind="mixed"`` (harder): identity, 90 degrees clockwise, intensity inversion ``1 - x``, a
  fixed random pixel permutation (seed 0), transpose followed by a vertical flip (which is a
  90 degree counter-clockwise turn; with the clockwise ``rot90`` of domain 2 the two differ by
  180 degrees).
* ``kind="noise"`` (mild): Gaussian blur with sigma 0, 0.5, 1 and additive pixel noise.

Clients receive a Dirichlet(``alpha``) label-skewed share of each task's training set,
re-drawn for every task (:func:`dirichlet_partition`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

KINDS = ("rotations", "mixed", "noise")


@dataclass
class DomainData:
    """One domain (task): a transformed copy of the digits with a fixed train/test split."""

    X_train: np.ndarray  # (n_train, 64) float32 in [0, 1]
    y_train: np.ndarray  # (n_train,) int64
    X_test: np.ndarray  # (n_test, 64)
    y_test: np.ndarray  # (n_test,)
    name: str


def _rotate(img: np.ndarray, angle: float) -> np.ndarray:
    """Rotate a stack (n, 8, 8) by ``angle`` degrees in the image plane."""
    from scipy.ndimage import rotate

    out = rotate(img, angle, axes=(1, 2), reshape=False, order=1, mode="constant", cval=0.0)
    return np.clip(out, 0.0, 1.0)


def _transforms(kind: str, angles: Sequence[float], n_domains: int | None):
    """List of (name, fn) with fn: (n, 8, 8) -> (n, 8, 8)."""
    if kind == "rotations":
        def rot(angle):
            return lambda im: _rotate(im, angle)

        out = [(f"rot{float(a):g}", rot(float(a))) for a in angles]
    elif kind == "mixed":
        perm = np.random.default_rng(0).permutation(64)
        out = [
            ("identity", lambda im: im),
            ("rot90", lambda im: np.rot90(im, k=-1, axes=(1, 2))),
            ("invert", lambda im: 1.0 - im),
            ("permute", lambda im: im.reshape(len(im), 64)[:, perm].reshape(-1, 8, 8)),
            ("transpose-flip", lambda im: np.flip(np.transpose(im, (0, 2, 1)), axis=1)),
        ]
    else:  # noise
        from scipy.ndimage import gaussian_filter

        def blur(s):
            return lambda im: im if s == 0 else gaussian_filter(im, sigma=(0, s, s))

        def noisy(im):
            return np.clip(im + 0.1 * np.random.default_rng(1).standard_normal(im.shape), 0.0, 1.0)

        out = [("blur0", blur(0.0)), ("blur0.5", blur(0.5)), ("blur1", blur(1.0)), ("noise0.1", noisy)]
    if n_domains is not None:
        out = out[:n_domains]
    return out


def make_digit_domains(kind: str = "rotations", angles: Sequence[float] = (0, 25, 50, 75, 100),
                       test_size: float = 0.2, seed: int = 0,
                       n_domains: int | None = None) -> list[DomainData]:
    """Build domain-incremental tasks from sklearn digits by per-domain transforms.

    One stratified train/test split (``seed``) is shared by all domains; every domain applies its
    transform to the same images. ``angles`` is used by ``kind="rotations"``; ``n_domains`` keeps
    the first domains of the other families (and of the rotations).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    angles = list(angles)
    if kind == "rotations" and len(angles) == 0:
        raise ValueError("angles must hold at least one angle (degrees), got an empty sequence")
    if not all(math.isfinite(float(a)) for a in angles):
        raise ValueError(f"angles must be finite numbers, got {angles}")
    if not (0.0 < float(test_size) < 1.0):
        raise ValueError(f"test_size must lie in (0, 1), got {test_size}")
    if n_domains is not None and (not isinstance(n_domains, int) or n_domains < 1):
        raise ValueError(f"n_domains must be a positive int or None, got {n_domains!r}")
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)  # (1797, 8, 8) in [0, 1]
    labels = digits.target.astype(np.int64)
    idx_tr, idx_te = train_test_split(np.arange(len(labels)), test_size=test_size,
                                      stratify=labels, random_state=seed)
    domains = []
    for name, fn in _transforms(kind, angles, n_domains):
        Xtr = np.ascontiguousarray(fn(images[idx_tr])).reshape(len(idx_tr), 64).astype(np.float32)
        Xte = np.ascontiguousarray(fn(images[idx_te])).reshape(len(idx_te), 64).astype(np.float32)
        domains.append(DomainData(Xtr, labels[idx_tr].copy(), Xte, labels[idx_te].copy(), name))
    return domains


def validation_domains(domains: Sequence[DomainData], fraction: float = 0.2, seed: int = 0) -> list[DomainData]:
    """The tuning copy of a task sequence: each domain's *training* split is cut (stratified,
    ``seed``) into a smaller training split and a validation split, which takes the place of the
    test split. Tuning runs train and score on these; the test split is never read.

    Every domain is cut at the same positions when the domains share their labels (the digit
    domains are transforms of the same images), so a validation image is held out of every domain.
    """
    from sklearn.model_selection import train_test_split

    validate_domains(domains)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not (0.0 < float(fraction) < 1.0):
        raise ValueError(f"fraction must lie in (0, 1), got {fraction!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    out = []
    for d in domains:
        idx_tr, idx_va = train_test_split(np.arange(len(d.y_train)), test_size=float(fraction),
                                          stratify=d.y_train, random_state=int(seed))
        out.append(DomainData(d.X_train[idx_tr], d.y_train[idx_tr], d.X_train[idx_va], d.y_train[idx_va],
                              f"{d.name} (validation)"))
    return out


def validate_domains(domains: Sequence[DomainData]) -> None:
    """Raise ``ValueError`` unless ``domains`` is a non-empty list of consistent, finite tasks."""
    if not isinstance(domains, (list, tuple)) or len(domains) == 0:
        raise ValueError("domains must be a non-empty list of DomainData")
    dim = None
    for k, d in enumerate(domains):
        if not isinstance(d, DomainData):
            raise TypeError(f"domains[{k}] must be a DomainData, got {type(d).__name__}")
        for split in ("train", "test"):
            X, y = getattr(d, f"X_{split}"), getattr(d, f"y_{split}")
            if X.ndim != 2 or y.ndim != 1 or len(X) != len(y):
                raise ValueError(f"domains[{k}]: X_{split} must be (n, d) and y_{split} (n,) of the same "
                                 f"length, got {X.shape} and {y.shape}")
            if len(y) == 0:
                raise ValueError(f"domains[{k}]: the {split} split is empty")
            if not np.all(np.isfinite(X)):
                raise ValueError(f"domains[{k}]: X_{split} holds NaN or inf")
            if y.min() < 0 or y.max() > 9:
                raise ValueError(f"domains[{k}]: labels must lie in 0..9, got range "
                                 f"[{y.min()}, {y.max()}]")
        if dim is None:
            dim = d.X_train.shape[1]
        if d.X_train.shape[1] != dim or d.X_test.shape[1] != dim:
            raise ValueError(f"domains must share one feature dimension; domains[{k}] has "
                             f"{d.X_train.shape[1]}, expected {dim}")


def dirichlet_partition(y: np.ndarray, n_clients: int, alpha: float, rng: np.random.Generator,
                        min_size: int = 2, max_tries: int = 100) -> list[np.ndarray]:
    """Split sample indices across clients with Dirichlet(``alpha``) label skew.

    For each class, the class's indices are shuffled and cut according to proportions
    ``p ~ Dir(alpha * 1_M)``. The draw is repeated until every client holds ``>= min_size``
    samples. When ``max_tries`` draws all leave a client short (small ``alpha`` with many clients:
    at ``alpha=0.1`` and 100 clients almost every draw does), the last draw is *topped up*: each
    short client receives random samples taken from the currently largest shard, so the label skew
    of the draw is kept except for those few samples. Returns ``n_clients`` sorted index arrays
    that partition ``range(len(y))``.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {y.shape}")
    if isinstance(n_clients, bool) or not isinstance(n_clients, (int, np.integer)) or n_clients < 1:
        raise ValueError(f"n_clients must be a positive int, got {n_clients!r}")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha}")
    if min_size < 0 or min_size * n_clients > len(y):
        raise ValueError(f"min_size * n_clients must not exceed len(y) = {len(y)}, got "
                         f"{min_size} * {n_clients}")
    if isinstance(max_tries, bool) or not isinstance(max_tries, int) or max_tries < 1:
        raise ValueError(f"max_tries must be a positive int, got {max_tries!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}")
    classes = np.unique(y)
    for _ in range(max_tries):
        shards: list[list[np.ndarray]] = [[] for _ in range(n_clients)]
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y == c))
            p = rng.dirichlet(alpha * np.ones(n_clients))
            cuts = (np.cumsum(p)[:-1] * len(idx)).astype(int)
            for i, part in enumerate(np.split(idx, cuts)):
                shards[i].append(part)
        parts = [np.concatenate(s) for s in shards]
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(p) for p in parts]
    # top-up of the last draw: move samples from the largest shard to each short client
    for i in range(n_clients):
        while len(parts[i]) < min_size:
            big = int(np.argmax([len(p) for p in parts]))
            take = rng.choice(len(parts[big]), min(min_size - len(parts[i]), len(parts[big]) - min_size),
                              replace=False)
            parts[i] = np.concatenate([parts[i], parts[big][take]])
            parts[big] = np.delete(parts[big], take)
    return [np.sort(p) for p in parts]
