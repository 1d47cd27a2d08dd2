"""Baselines (spec Sec. 7.3): persistence, historical average, ridge, a small spatio-temporal transformer.

A *forecast function* maps a split of :func:`~icml26.unrolled_gsp.data.make_windows` to predictions
``(S, t_out, N)`` in data units (mph); :func:`~icml26.unrolled_gsp.experiments.evaluate` scores it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .data import STEPS_PER_DAY, RoadTraffic
from .method import _check_int, _check_tensor, fit_ridge, ridge_features, time_features


def persistence_forecast(y_in: torch.Tensor, t_out: int) -> torch.Tensor:
    """Repeat the last observed value: ``y_in (S, t_in, N) -> (S, t_out, N)`` (missing = 0 carried back)."""
    _check_tensor("y_in", y_in, 3)
    t_out = _check_int("t_out", t_out, 1)
    return y_in[:, -1:].expand(-1, t_out, -1).clone()


def persistence(windows: dict):
    """Forecast function: last observed value of each node (raw units; a missing last value is
    replaced by the last observed one in the window)."""
    t_in, t_out = windows["t_in"], windows["t_out"]

    def fn(split):
        raw, mask = split["raw"][:, :t_in], split["mask"][:, :t_in]
        idx = torch.where(mask, torch.arange(t_in)[None, :, None], torch.zeros_like(mask, dtype=torch.long))
        last = idx.max(dim=1).values                                           # (S, N)
        val = torch.gather(raw, 1, last[:, None])                              # (S, 1, N)
        return persistence_forecast(val, t_out)
    return fn


def historical_average(train_values: np.ndarray, train_mask: np.ndarray, tod_train: np.ndarray):
    """Per node x time-of-day mean of the observed training values: ``(288, N)`` table."""
    v = np.where(train_mask, train_values, 0.0)
    table = np.zeros((STEPS_PER_DAY, v.shape[1]))
    count = np.zeros_like(table)
    np.add.at(table, tod_train, v)
    np.add.at(count, tod_train, train_mask.astype(float))
    overall = v.sum(0) / np.maximum(train_mask.sum(0), 1)
    return np.where(count > 0, table / np.maximum(count, 1), overall[None])


def historical_average_fn(data: RoadTraffic, windows: dict, train_frac: float = 0.7):
    """Forecast function: the historical-average table looked up at the target times."""
    n_train = int(round(train_frac * data.values.shape[0]))
    table = torch.as_tensor(historical_average(data.values[:n_train], data.mask[:n_train],
                                               data.time_of_day[:n_train]), dtype=torch.float32)
    t_in = windows["t_in"]

    def fn(split):
        return table[split["tod"][:, t_in:]]                                   # (S, t_out, N)
    return fn


def ridge_forecaster(windows: dict, neighbors: torch.Tensor, alpha: float = 1.0):
    """Forecast function: ridge regression on [own last ``t_in``, neighbour mean, sin/cos time of day, 1],
    shared across nodes, one output per horizon step (closed form on the training windows)."""
    t_in = windows["t_in"]
    W, b = fit_ridge(windows["train"], neighbors, t_in, alpha)
    mean, std = windows["mean"], windows["std"]

    def fn(split):
        F = ridge_features(split["x"][:, :t_in], split["tod"][:, t_in - 1], neighbors)
        return ((F @ W + b).transpose(1, 2)) * std + mean
    fn.n_params = W.numel() + b.numel()
    return fn


class STTransformer(nn.Module):
    """A small spatio-temporal transformer: per-node temporal self-attention over the ``t_in`` inputs,
    then one spatial self-attention layer across nodes, a linear head to ``t_out`` (residual on the
    last input value). ``d = 32``, 2 temporal layers, 2 heads, feed-forward 64, no dropout."""

    returns_full = False

    def __init__(self, n_nodes: int, t_in: int = 12, t_out: int = 12, d: int = 32, heads: int = 2,
                 layers: int = 2, ff: int = 64):
        super().__init__()
        self.n_nodes, self.t_in, self.t_out = n_nodes, t_in, t_out
        self.inp = nn.Linear(1 + 5, d)
        self.pos = nn.Parameter(0.02 * torch.randn(t_in, d))
        self.node = nn.Parameter(0.02 * torch.randn(n_nodes, d))
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        self.temporal = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.spatial = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d * 2, t_out)

    def forward(self, y: torch.Tensor, tod: torch.Tensor, dow: torch.Tensor, ymask=None) -> torch.Tensor:
        """``y (B,t_in,N)`` z-scored -> ``(B,t_out,N)`` z-scored."""
        B, t_in, N = y.shape
        tf = time_features(tod[:, :t_in], dow[:, :t_in])[:, :, None].expand(B, t_in, N, 5)
        h = self.inp(torch.cat([y[..., None], tf], -1)) + self.pos[None, :, None] + self.node[None, None]
        h = h.permute(0, 2, 1, 3).reshape(B * N, t_in, -1)
        h = self.temporal(h)
        last = h[:, -1].reshape(B, N, -1)
        mean = h.mean(1).reshape(B, N, -1)
        s = self.spatial(last)
        out = self.head(torch.cat([s, mean], -1)).transpose(1, 2)
        return y[:, -1:] + out


def transformer_param_ratio(n_small: int, n_large: int) -> float:
    if n_large <= 0:
        raise ValueError("n_large must be > 0")
    return n_small / n_large


def mape(pred, truth, mask):
    """Masked MAPE (entries with truth <= 1e-8 excluded), in percent."""
    m = mask & (truth.abs() > 1e-8)
    return float(((pred - truth).abs() / truth.abs())[m].mean() * 100) if bool(m.any()) else math.nan
