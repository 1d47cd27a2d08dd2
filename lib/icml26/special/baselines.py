r"""Baselines the chapter compares SPECIAL with (spec section 3.3).

* **FedAvg** (McMahan et al., 2017) and **FedAvg-slr**, FedAvg with a server learning rate
  (Reddi et al., 2021): :math:`w^{t+1}=w^t+\eta_g\Delta^t`; plain FedAvg is :math:`\eta_g=1`.
* **FedProx** (Li et al., 2020): clients minimise :math:`f_{i,k}(w)+\frac\mu2\|w-w^t\|^2`, the
  server averages (the proximal client term is in :func:`~icml26.special.method.local_train_batched`).
  The client-side placement **SPECIAL-C** read naturally is the same objective (weight
  :math:`\lambda_c`), so it shares this code path.
* **Replay** (an oracle that breaks federated privacy): each client keeps ``replay_per_class``
  raw samples per class from each past domain's shard and trains on them with the new data.
* **Joint** (upper bound): every stage trains on the union of all domains.
"""

from __future__ import annotations

import numpy as np
import torch

from .method import client_mean_update


def fedavg_server_step(w: torch.Tensor, local_models: torch.Tensor, server_lr: float = 1.0,
                       weights: torch.Tensor | None = None) -> torch.Tensor:
    r"""FedAvg(-slr): :math:`w^{t+1}=w^t+\eta_g\Delta^t` with :math:`\Delta^t` of eq. (S1)."""
    if not server_lr > 0:
        raise ValueError(f"server_lr must be > 0, got {server_lr}")
    return w + server_lr * client_mean_update(w, local_models, weights)


def replay_indices(y_shard: np.ndarray, per_class: int, rng: np.random.Generator) -> np.ndarray:
    """Positions of up to ``per_class`` samples of every class present in ``y_shard`` (a client's memory)."""
    if per_class < 0:
        raise ValueError(f"per_class must be >= 0, got {per_class}")
    keep = [rng.permutation(np.flatnonzero(y_shard == c))[:per_class] for c in np.unique(y_shard)]
    return np.sort(np.concatenate(keep)) if keep else np.zeros(0, np.int64)


def client_shards(domains, parts, k: int, cfg) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Training data of every client during stage ``k`` for ``cfg.method``.

    ``parts[j][i]`` are client i's sample indices in domain j (Dirichlet partition). Returns
    lists of X (n_i, d) and y (n_i,) arrays, one per client.
    """
    M = len(parts[k])
    Xs, ys = [], []
    for i in range(M):
        if cfg.method == "joint":
            stages = range(len(domains))  # all domains at once
        else:
            stages = [k]
        X = [domains[j].X_train[parts[j][i]] for j in stages]
        y = [domains[j].y_train[parts[j][i]] for j in stages]
        if cfg.method == "replay" and cfg.replay_per_class > 0:
            for j in range(k):  # memory of every past domain, drawn once per (client, domain)
                rng = np.random.default_rng([cfg.seed, j, i, 7])
                yj = domains[j].y_train[parts[j][i]]
                keep = replay_indices(yj, cfg.replay_per_class, rng)
                X.append(domains[j].X_train[parts[j][i][keep]])
                y.append(yj[keep])
        Xs.append(np.concatenate(X))
        ys.append(np.concatenate(y))
    return Xs, ys
