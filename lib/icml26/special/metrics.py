r"""Continual-learning metrics on the accuracy matrix :math:`A\in[0,1]^{K\times K}` (spec section 3.6).

:math:`A_{k,j}` is the test accuracy on task :math:`j` after training task :math:`k`.

* ACC :math:`=\frac1K\sum_j A_{K,j}` (final average accuracy),
* FGT :math:`=\frac1{K-1}\sum_{j<K}\big(\max_{j\le k\le K-1}A_{k,j}-A_{K,j}\big)` (forgetting; the max
  stops before the final task),
* BWT :math:`=\frac1{K-1}\sum_{j<K}(A_{K,j}-A_{j,j})` (backward transfer),
* PLA :math:`=\frac1K\sum_k A_{k,k}` (plasticity: accuracy on each task right after learning it).

Since the max in FGT includes :math:`k=j`, :math:`\mathrm{FGT}\ge-\mathrm{BWT}`. FGT itself can be
negative only when every old task ends *more* accurate than it ever was before the final task.
"""

from __future__ import annotations

import numpy as np


def check_acc_matrix(A) -> np.ndarray:
    """Return ``A`` as a float array after checking it is square, finite and inside [0, 1]."""
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"A must be a non-empty square (K, K) accuracy matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)) or A.min() < 0 or A.max() > 1:
        raise ValueError("A must hold accuracies in [0, 1] (no NaN)")
    return A


def average_accuracy(A) -> float:
    """ACC: mean of the last row."""
    A = check_acc_matrix(A)
    return float(A[-1].mean())


def forgetting(A) -> float:
    """FGT: mean over old tasks of (best accuracy before the final task) - (final accuracy)."""
    A = check_acc_matrix(A)
    K = len(A)
    if K == 1:
        return 0.0
    drops = [A[j:K - 1, j].max() - A[K - 1, j] for j in range(K - 1)]
    return float(np.mean(drops))


def backward_transfer(A) -> float:
    """BWT: mean over old tasks of (final accuracy) - (accuracy right after learning it)."""
    A = check_acc_matrix(A)
    K = len(A)
    if K == 1:
        return 0.0
    return float(np.mean(A[K - 1, : K - 1] - np.diag(A)[: K - 1]))


def plasticity(A) -> float:
    """PLA: mean of the diagonal."""
    A = check_acc_matrix(A)
    return float(np.diag(A).mean())


def all_metrics(A) -> dict[str, float]:
    return {"ACC": average_accuracy(A), "FGT": forgetting(A), "BWT": backward_transfer(A),
            "PLA": plasticity(A)}
