"""CauScale (Peng et al., ICML 2026): two-stream amortized causal discovery with tied axial attention
and sample-reduction units. Section numbers refer to the chapter's specification, which follows
the paper and the official code (OpenCausaLab/CauScale).

- :class:`TiedAxialAttention` (Sec. 3.3, Eq. tied / untied): one attention map per head along an
  axis, logits summed over the other axis *before* the softmax (MSA-Transformer tying).
- :class:`AxialLayer` (Sec. 3.3): pre-LN residual attention along C, along R, then an FFN.
- :class:`ReductionUnit`, :func:`reduction_schedule` (Sec. 3.5): mean of consecutive samples.
- :class:`Data2Graph` (Sec. 3.4): pooled node embeddings ``u_i``, ``v_j`` and ``S_ij = <u_i, v_j>``.
- :class:`CauScale` (Sec. 3.6, Algorithm 1) and the three-class pair loss (Sec. 3.7).
- :class:`AVICIStyle`: the untied data-only amortized baseline (AVICI-like), for comparison.
- :func:`train_amortized` (Algorithm 2).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ._checks import check_device, check_int, check_real

SCALINGS = ("sqrt_rows", "none")
UNTIED_SCALINGS = ("sdpa", "official")
SCHEDULES = ("figure", "code")


# ----------------------------------------------------------------------------------------------
# tied axial attention (Sec. 3.3)
# ----------------------------------------------------------------------------------------------
class TiedAxialAttention(nn.Module):
    """Multi-head attention along the C axis of ``z [B, R, C, d]``.

    Tied (CauScale, Sec. 3.3)::

        a_cc' = softmax_c'( s * sum_r <q_rc, k_rc'> ),   o_rc = W_O [sum_c' a_cc' v_rc']_heads

    with ``s = 1 / (sqrt(d_h) sqrt(R))`` (``scaling="sqrt_rows"``) or ``s = 1`` (``"none"``, the
    official graph stream). One ``C x C`` map per head is shared by all rows. Untied, one map per
    row, ``a_{r,cc'} = softmax_c'(s_u <q_rc, k_rc'>)``, with two scalings (``untied_scaling``):

    - ``"sdpa"`` (default): ``s_u = 1 / sqrt(d_h)``, standard attention applied to every row (AVICI /
      ESM column attention; ``scaled_dot_product_attention`` row by row);
    - ``"official"``: ``s_u = 1 / (sqrt(d_h) sqrt(R))``, what the official code's
      ``--attn_shape rhnij`` computes: the tied layer's scale kept, each row's logits divided by
      ``sqrt(R)`` although nothing is summed over rows (a softmax about ``sqrt(R)`` times flatter).

    With ``scaling="none"`` neither variant scales its logits.

    ``key_mask [B, C]`` (True = valid) masks keys; ``row_mask [B, R]`` removes padded rows from the
    tied row sum (and from ``R``). ``return_attn=True`` also returns the map(s):
    ``[B, h, C, C]`` tied, ``[B, R, h, C, C]`` untied.
    """

    def __init__(self, embed_dim: int, n_heads: int, tied: bool = True, scaling: str = "sqrt_rows",
                 dropout: float = 0.0, untied_scaling: str = "sdpa"):
        super().__init__()
        _check_dims(embed_dim, n_heads)
        if scaling not in SCALINGS:
            raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
        if untied_scaling not in UNTIED_SCALINGS:
            raise ValueError(f"untied_scaling must be one of {UNTIED_SCALINGS}, got {untied_scaling!r}")
        self.embed_dim, self.n_heads, self.head_dim = embed_dim, n_heads, embed_dim // n_heads
        self.tied, self.scaling, self.untied_scaling = bool(tied), scaling, untied_scaling
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, z: torch.Tensor, key_mask: torch.Tensor | None = None,
                row_mask: torch.Tensor | None = None, return_attn: bool = False):
        if not isinstance(z, torch.Tensor) or z.dim() != 4 or z.shape[-1] != self.embed_dim:
            raise ValueError(f"z must be a [B, R, C, {self.embed_dim}] tensor, got "
                             f"{tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__}")
        b, r, c, _ = z.shape
        h, dh = self.n_heads, self.head_dim
        q = self.q_proj(z).view(b, r, c, h, dh)
        k = self.k_proj(z).view(b, r, c, h, dh)
        v = self.v_proj(z).view(b, r, c, h, dh)
        if row_mask is not None:
            n_rows = row_mask.sum(1).clamp_min(1).to(q.dtype)           # [B] valid rows
        else:
            n_rows = torch.full((b,), float(r), dtype=q.dtype, device=q.device)
        if self.tied:
            if row_mask is not None:
                q = q * row_mask[:, :, None, None, None].to(q.dtype)   # padded rows leave the sum
            logits = torch.einsum("brihd,brjhd->bhij", q, k)           # summed over rows before softmax
            if self.scaling == "sqrt_rows":
                logits = logits / (math.sqrt(dh) * n_rows.sqrt())[:, None, None, None]
            if key_mask is not None:
                logits = logits.masked_fill(~key_mask[:, None, None, :], float("-inf"))
            attn = self.dropout(torch.softmax(logits, dim=-1))         # [B, h, C, C]
            out = torch.einsum("bhij,brjhd->brihd", attn, v)
        else:
            logits = torch.einsum("brihd,brjhd->brhij", q, k)
            if self.scaling == "sqrt_rows":
                logits = logits / math.sqrt(dh)
                if self.untied_scaling == "official":   # official rhnij: the tied 1/sqrt(R) kept per row
                    logits = logits / n_rows.sqrt()[:, None, None, None, None]
            if key_mask is not None:
                logits = logits.masked_fill(~key_mask[:, None, None, None, :], float("-inf"))
            attn = self.dropout(torch.softmax(logits, dim=-1))         # [B, R, h, C, C]
            out = torch.einsum("brhij,brjhd->brihd", attn, v)
        out = self.out_proj(out.reshape(b, r, c, h * dh))
        return (out, attn) if return_attn else out


def _check_dims(embed_dim, n_heads):
    for name, val in (("embed_dim", embed_dim), ("n_heads", n_heads)):
        check_int(name, val, 1)
    if embed_dim % n_heads != 0:
        raise ValueError(f"embed_dim must be divisible by n_heads, got embed_dim={embed_dim}, n_heads={n_heads}")


class AxialLayer(nn.Module):
    """Three pre-LayerNorm residual sub-layers on ``z [B, R, C, d]`` (Sec. 3.3)::

        z <- z + Attn_along_C(LN z)   (maps tied over R)
        z <- z + Attn_along_R(LN z)   (maps tied over C)
        z <- z + FFN(LN z)            (Linear -> GELU -> Linear)

    Data stream: ``R = m`` samples, ``C = n`` variables; graph stream: ``R = C = n`` (pair grid).
    ``r_mask [B, R]`` / ``c_mask [B, C]`` mark valid rows / columns (True = valid).
    """

    def __init__(self, embed_dim: int, n_heads: int, ffn_dim: int, tied: bool = True,
                 scaling: str = "sqrt_rows", dropout: float = 0.0, scaling_r: str | None = None,
                 untied_scaling: str = "sdpa"):
        super().__init__()
        check_int("ffn_dim", ffn_dim, 1)
        self.ln_c, self.ln_r, self.ln_f = nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim)
        self.attn_c = TiedAxialAttention(embed_dim, n_heads, tied, scaling, dropout, untied_scaling)
        self.attn_r = TiedAxialAttention(embed_dim, n_heads, tied, scaling_r or scaling, dropout, untied_scaling)
        self.ffn = nn.Sequential(nn.Linear(embed_dim, ffn_dim), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(ffn_dim, embed_dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, z, r_mask=None, c_mask=None, return_attn: bool = False):
        a, attn_c = self.attn_c(self.ln_c(z), key_mask=c_mask, row_mask=r_mask, return_attn=True)
        z = z + self.drop(a)
        zt = z.transpose(1, 2)
        a, attn_r = self.attn_r(self.ln_r(zt), key_mask=r_mask, row_mask=c_mask, return_attn=True)
        z = z + self.drop(a.transpose(1, 2))
        z = z + self.drop(self.ffn(self.ln_f(z)))
        return (z, (attn_c, attn_r)) if return_attn else z


# ----------------------------------------------------------------------------------------------
# reduction units (Sec. 3.5)
# ----------------------------------------------------------------------------------------------
class ReductionUnit(nn.Module):
    """Parameter-free sample reduction (Sec. 3.5): ``H'_{s,i} = (1/r) sum_t H_{rs+t, i}`` for
    ``s < floor(m / r)``; the last ``m mod r`` rows are dropped. Pools *consecutive* samples only."""

    def __init__(self, r: int = 2):
        super().__init__()
        r = check_int("r", r, 1)
        self.r = r

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if not isinstance(h, torch.Tensor) or h.dim() != 4:
            raise ValueError("h must be a [B, m, n, d] tensor")
        b, m, n, d = h.shape
        keep = (m // self.r) * self.r
        if keep == 0:
            raise ValueError(f"h has m={m} samples, fewer than the reduction factor r={self.r}")
        return h[:, :keep].reshape(b, keep // self.r, self.r, n, d).mean(2)


def reduce_after(block: int, n_blocks: int, k: int, variant: str = "figure") -> bool:
    """Whether a reduction follows block ``block`` (0-indexed). ``figure``: after every group of ``k``
    blocks, never after the last; ``code``: the official loop, after blocks ``b >= k`` with
    ``b mod k = 0`` (one block later)."""
    if variant == "figure":
        return (block + 1) % k == 0 and block < n_blocks - 1
    if variant == "code":
        return block >= k and block % k == 0 and block < n_blocks - 1
    raise ValueError(f"variant must be one of {SCHEDULES}, got {variant!r}")


def reduction_schedule(m: int, n_blocks: int, k: int = 2, r: int = 2, variant: str = "figure") -> list[int]:
    """Effective sample length ``m_b`` at each block (Sec. 3.5); ``figure``:
    ``m_b = m / r^floor(b/k)`` (integer division at each reduction)."""
    m, n_blocks, k, r = (check_int(name, val, 1) for name, val in (("m", m), ("n_blocks", n_blocks), ("k", k),
                                                                     ("r", r)))
    if variant not in SCHEDULES:
        raise ValueError(f"variant must be one of {SCHEDULES}, got {variant!r}")
    out, cur = [], int(m)
    for b in range(n_blocks):
        out.append(cur)
        if reduce_after(b, n_blocks, k, variant):
            cur //= r
    return out


def predicted_reduction_factor(m: int, n_blocks: int, k: int = 2, r: int = 2, variant: str = "figure"):
    """(T3) Fractions of the no-reduction work that remain: ``sum m_b / (L m)`` (work linear in the
    sample count: FFN, variable attention) and ``sum m_b^2 / (L m^2)`` (sample attention)."""
    s = np.asarray(reduction_schedule(m, n_blocks, k, r, variant), dtype=np.float64)
    return float(s.sum() / (n_blocks * m)), float((s ** 2).sum() / (n_blocks * m ** 2))


def attention_map_floats(m: int, n: int, n_heads: int = 1, tied: bool = True, stream: str = "data") -> int:
    """(T1) Attention probabilities stored by one axial layer per dataset: data stream
    ``h (n^2 + m^2)`` tied, ``h (m n^2 + n m^2)`` untied; graph stream (both axes over the ``n x n``
    grid) ``2 h n^2`` tied, ``2 h n^3`` untied."""
    m, n, h = (check_int(name, val, 1) for name, val in (("m", m), ("n", n), ("n_heads", n_heads)))
    if stream == "data":
        return h * (n * n + m * m) if tied else h * (m * n * n + n * m * m)
    if stream == "graph":
        return 2 * h * n * n if tied else 2 * h * n ** 3
    raise ValueError(f"stream must be 'data' or 'graph', got {stream!r}")


# ----------------------------------------------------------------------------------------------
# Data2Graph and the full model (Sec. 3.4, 3.6)
# ----------------------------------------------------------------------------------------------
def _pool_mlp(d):
    return nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d), nn.Linear(d, d))


class Data2Graph(nn.Module):
    """Bridge from the data stream to the graph stream (Sec. 3.4): its own axial layer (FFN width
    ``d``), mean over samples, two pooling MLPs and ``S_ij = <u_i, v_j>`` (not symmetric)."""

    def __init__(self, embed_dim: int, n_heads: int, tied: bool = True, scaling: str = "sqrt_rows",
                 dropout: float = 0.0, untied_scaling: str = "sdpa"):
        super().__init__()
        # official: variable-axis attention scaled, sample-axis attention not
        self.axial = AxialLayer(embed_dim, n_heads, embed_dim, tied, scaling, dropout, scaling_r="none",
                                untied_scaling=untied_scaling)
        self.pool_u, self.pool_v = _pool_mlp(embed_dim), _pool_mlp(embed_dim)

    def forward(self, h_data: torch.Tensor, node_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.axial(h_data, r_mask=None, c_mask=node_mask).mean(1)   # [B, n, d], all samples valid
        return torch.einsum("bid,bjd->bij", self.pool_u(h), self.pool_v(h))


@dataclass
class PairLogits:
    logits: torch.Tensor       # [B, P, 3]: no edge / i -> j / j -> i for the pairs i < j
    pair_index: torch.Tensor   # [2, P]
    graph_repr: torch.Tensor   # [B, n, n, d] final graph representation (after the last LN)


# Value checks (finite, binary, >= 2 valid nodes) read tensors back to the host: a sync per call on a GPU.
# ``train_amortized`` checks its first batch and trusts the later ones, which come from the same sampler.
_VALUE_CHECKS = contextvars.ContextVar("causcale_value_checks", default=True)


@contextlib.contextmanager
def trusted_values():
    """Skip the value checks of ``_check_inputs`` inside (shape and type checks still run)."""
    token = _VALUE_CHECKS.set(False)
    try:
        yield
    finally:
        _VALUE_CHECKS.reset(token)


def _check_inputs(x, interv, prior, node_mask, need_prior=True):
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"x must be a [B, m, n] tensor, got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    if not torch.is_floating_point(x):
        raise TypeError(f"x must be a floating tensor, got {x.dtype}")
    b, m, n = x.shape
    if n < 2:
        raise ValueError(f"x must have n >= 2 variables, got {n}")
    if m < 1 or b < 1:
        raise ValueError(f"x must have at least one sample and one dataset, got shape {tuple(x.shape)}")
    values = _VALUE_CHECKS.get()
    if values and not torch.isfinite(x).all():
        raise ValueError("x must be finite")
    if not isinstance(interv, torch.Tensor) or tuple(interv.shape) != (b, m, n):
        raise ValueError(f"interv must be a [B, m, n] = {(b, m, n)} tensor matching x")
    if values and not ((interv == 0) | (interv == 1)).all():
        raise ValueError("interv must be binary (0/1)")
    if need_prior:
        if not isinstance(prior, torch.Tensor) or tuple(prior.shape) != (b, n, n):
            raise ValueError(f"prior must be a [B, n, n] = {(b, n, n)} tensor")
        if values and not torch.isfinite(prior).all():
            raise ValueError("prior must be finite")
    if node_mask is None:
        return torch.ones(b, n, dtype=torch.bool, device=x.device)
    if not isinstance(node_mask, torch.Tensor) or tuple(node_mask.shape) != (b, n):
        raise ValueError(f"node_mask must be a [B, n] = {(b, n)} boolean tensor")
    node_mask = node_mask.bool()
    if values and (node_mask.sum(1) < 2).any():
        raise ValueError("node_mask must mark at least 2 valid nodes in every graph")
    return node_mask


class CauScale(nn.Module):
    """CauScale (Sec. 3.6, Algorithm 1). ``forward(x, interv, prior, node_mask) -> PairLogits``.

    Flags: ``tied`` (tied vs untied attention everywhere; ``untied_scaling`` picks the untied
    logits' scale, ``"sdpa"`` standard attention per row or ``"official"`` the official
    ``--attn_shape rhnij`` that keeps the extra ``1/sqrt(R)``), ``use_reduction`` and the schedule
    (``reduction_k``, ``reduction_r``, ``schedule_variant``), ``use_graph_prior`` (False: the prior
    is replaced by the constant 0.2, the official ``feature_map=zero`` ablation), ``graph_scaling``
    (official: ``"none"``; book default ``"sqrt_rows"``), ``symmetric_head`` (exactly
    permutation-equivariant pair head, Sec. 4 T4; official: False).
    """

    def __init__(self, embed_dim: int = 32, n_heads: int = 4, ffn_dim: int = 64, n_blocks: int = 4,
                 reduction_k: int = 2, reduction_r: int = 2, use_reduction: bool = True, tied: bool = True,
                 use_graph_prior: bool = True, data_scaling: str = "sqrt_rows", graph_scaling: str = "sqrt_rows",
                 symmetric_head: bool = False, dropout: float = 0.0, schedule_variant: str = "figure",
                 untied_scaling: str = "sdpa"):
        super().__init__()
        _check_dims(embed_dim, n_heads)
        if untied_scaling not in UNTIED_SCALINGS:
            raise ValueError(f"untied_scaling must be one of {UNTIED_SCALINGS}, got {untied_scaling!r}")
        for name, val in (("reduction_k", reduction_k), ("reduction_r", reduction_r), ("n_blocks", n_blocks)):
            check_int(name, val, 1)
        for name, val in (("data_scaling", data_scaling), ("graph_scaling", graph_scaling)):
            if val not in SCALINGS:
                raise ValueError(f"{name} must be one of {SCALINGS}, got {val!r}")
        if schedule_variant not in SCHEDULES:
            raise ValueError(f"schedule_variant must be one of {SCHEDULES}, got {schedule_variant!r}")
        self.config = dict(embed_dim=embed_dim, n_heads=n_heads, ffn_dim=ffn_dim, n_blocks=n_blocks,
                           reduction_k=reduction_k, reduction_r=reduction_r, use_reduction=use_reduction,
                           tied=tied, use_graph_prior=use_graph_prior, data_scaling=data_scaling,
                           graph_scaling=graph_scaling, symmetric_head=symmetric_head, dropout=dropout,
                           schedule_variant=schedule_variant, untied_scaling=untied_scaling)
        d = embed_dim
        us = untied_scaling
        self.n_blocks, self.k, self.r = n_blocks, reduction_k, reduction_r
        self.use_reduction, self.use_graph_prior, self.symmetric_head = use_reduction, use_graph_prior, symmetric_head
        self.schedule_variant = schedule_variant
        self.embed_data = nn.Sequential(nn.Linear(2, d), nn.LayerNorm(d))
        self.embed_graph = nn.Sequential(nn.Linear(1, d), nn.LayerNorm(d))
        self.data_layers = nn.ModuleList(AxialLayer(d, n_heads, ffn_dim, tied, data_scaling, dropout,
                                                    untied_scaling=us) for _ in range(n_blocks))
        self.bridges = nn.ModuleList(Data2Graph(d, n_heads, tied, data_scaling, dropout, us) for _ in range(n_blocks))
        self.fuse = nn.ModuleList(nn.Linear(d + 1, d) for _ in range(n_blocks))
        self.graph_layers = nn.ModuleList(AxialLayer(d, n_heads, ffn_dim, tied, graph_scaling, dropout,
                                                     untied_scaling=us) for _ in range(n_blocks))
        self.reduce = ReductionUnit(reduction_r)
        self.ln_out = nn.LayerNorm(d)
        self.head = nn.Sequential(nn.Linear(2 * d, 2 * d), nn.GELU(), nn.LayerNorm(2 * d), nn.Linear(2 * d, 3))

    def schedule(self, m: int) -> list[int]:
        if not self.use_reduction:
            return [m] * self.n_blocks
        return reduction_schedule(m, self.n_blocks, self.k, self.r, self.schedule_variant)

    def forward(self, x, interv, prior=None, node_mask=None) -> PairLogits:
        node_mask = _check_inputs(x, interv, prior, node_mask, need_prior=self.use_graph_prior)
        b, m, n = x.shape
        dtype = self.embed_data[0].weight.dtype
        x, interv = x.to(dtype), interv.to(dtype)
        prior = prior.to(dtype) if prior is not None else None
        if min(self.schedule(m)) < 1:
            raise ValueError(f"x has m={m} samples, too few for the reduction schedule {self.schedule(m)}")
        if not self.use_graph_prior:
            prior = torch.full((b, n, n), 0.2, dtype=x.dtype, device=x.device)
        hd = self.embed_data(torch.stack([x, interv.to(x.dtype)], -1))             # [B, m, n, d]
        hg = self.embed_graph(prior.to(x.dtype)[..., None])                          # [B, n, n, d]
        for blk in range(self.n_blocks):
            hd = self.data_layers[blk](hd, r_mask=None, c_mask=node_mask)
            s = self.bridges[blk](hd, node_mask)
            hg = self.fuse[blk](torch.cat([hg, s[..., None]], -1))
            hg = self.graph_layers[blk](hg, r_mask=node_mask, c_mask=node_mask)
            if self.use_reduction and reduce_after(blk, self.n_blocks, self.k, self.schedule_variant):
                hd = self.reduce(hd)
        hg = self.ln_out(hg)
        iu = torch.triu_indices(n, n, offset=1, device=x.device)
        fwd = torch.cat([hg[:, iu[0], iu[1]], hg[:, iu[1], iu[0]]], -1)             # [H_ij ; H_ji], i < j
        logits = self.head(fwd)
        if self.symmetric_head:
            rev = self.head(torch.cat([hg[:, iu[1], iu[0]], hg[:, iu[0], iu[1]]], -1))
            logits = 0.5 * (logits + rev[..., [0, 2, 1]])
        return PairLogits(logits, iu, hg)

    def loss(self, batch: dict) -> torch.Tensor:
        out = self(batch["x"], batch["interv"], batch["prior"], batch["node_mask"])
        return causcale_loss(out.logits, batch["adj"], out.pair_index, batch["node_mask"])

    @torch.no_grad()
    def edge_probs(self, x, interv, prior=None, node_mask=None) -> torch.Tensor:
        """``P[i, j]`` = probability of ``i -> j`` (Algorithm 1, line 11); zero diagonal and padding."""
        out = self(x, interv, prior, node_mask)
        return pair_probs_to_matrix(out.logits, out.pair_index, x.shape[2], node_mask)


def pair_probs_to_matrix(logits: torch.Tensor, pair_index: torch.Tensor, n: int, node_mask=None) -> torch.Tensor:
    """Softmax the pair logits; ``P[i, j] = p(class 1)``, ``P[j, i] = p(class 2)`` for ``i < j``."""
    p = torch.softmax(logits, -1)
    out = logits.new_zeros(logits.shape[0], n, n)
    out[:, pair_index[0], pair_index[1]] = p[..., 1]
    out[:, pair_index[1], pair_index[0]] = p[..., 2]
    if node_mask is not None:
        nm = node_mask.to(out.dtype)
        out = out * nm[:, :, None] * nm[:, None, :]
    return out


def pair_labels(adj: torch.Tensor, pair_index: torch.Tensor) -> torch.Tensor:
    """Three-class pair labels ``y_ij = A_ij + 2 A_ji`` for the pairs ``i < j`` (Sec. 3.7)."""
    if not isinstance(adj, torch.Tensor) or adj.dim() != 3 or adj.shape[1] != adj.shape[2]:
        raise ValueError("adj must be a [B, n, n] tensor")
    a = adj.long()
    return a[:, pair_index[0], pair_index[1]] + 2 * a[:, pair_index[1], pair_index[0]]


def causcale_loss(logits, adj, pair_index, node_mask=None) -> torch.Tensor:
    """Mean cross-entropy over all valid unordered pairs pooled over the batch (Sec. 3.7)."""
    y = pair_labels(adj, pair_index)
    if logits.shape[:2] != y.shape:
        raise ValueError(f"logits must be [B, P, 3] with P={y.shape[1]}, got {tuple(logits.shape)}")
    ce = F.cross_entropy(logits.reshape(-1, 3), y.reshape(-1), reduction="none").view_as(y)
    if node_mask is None:
        return ce.mean()
    valid = (node_mask[:, pair_index[0]] & node_mask[:, pair_index[1]]).to(ce.dtype)
    return (ce * valid).sum() / valid.sum().clamp_min(1)


class AVICIStyle(nn.Module):
    """AVICI-style amortized baseline: data stream only, *untied* axial attention, max-pool over
    samples and an inner-product edge head ``logit_ij = <u_i, v_j> / sqrt(d) + c`` trained with BCE."""

    def __init__(self, embed_dim: int = 32, n_heads: int = 4, ffn_dim: int = 64, n_layers: int = 4,
                 dropout: float = 0.0):
        super().__init__()
        _check_dims(embed_dim, n_heads)
        self.config = dict(embed_dim=embed_dim, n_heads=n_heads, ffn_dim=ffn_dim, n_layers=n_layers, dropout=dropout)
        d = embed_dim
        self.embed = nn.Sequential(nn.Linear(2, d), nn.LayerNorm(d))
        self.layers = nn.ModuleList(AxialLayer(d, n_heads, ffn_dim, False, "sqrt_rows", dropout)
                                    for _ in range(n_layers))
        self.ln = nn.LayerNorm(d)
        self.u, self.v = nn.Linear(d, d), nn.Linear(d, d)
        self.bias = nn.Parameter(torch.tensor(-2.0))

    def forward(self, x, interv, prior=None, node_mask=None) -> torch.Tensor:
        node_mask = _check_inputs(x, interv, prior, node_mask, need_prior=False)
        x, interv = x.to(self.embed[0].weight.dtype), interv.to(self.embed[0].weight.dtype)
        h = self.embed(torch.stack([x, interv.to(x.dtype)], -1))
        for layer in self.layers:
            h = layer(h, r_mask=None, c_mask=node_mask)
        h = self.ln(h).max(1).values                                                  # [B, n, d]
        return torch.einsum("bid,bjd->bij", self.u(h), self.v(h)) / math.sqrt(h.shape[-1]) + self.bias

    def loss(self, batch: dict) -> torch.Tensor:
        return avici_loss(self(batch["x"], batch["interv"], None, batch["node_mask"]), batch["adj"], batch["node_mask"])

    @torch.no_grad()
    def edge_probs(self, x, interv, prior=None, node_mask=None) -> torch.Tensor:
        p = torch.sigmoid(self(x, interv, None, node_mask))
        n = x.shape[2]
        p = p * (1 - torch.eye(n, dtype=p.dtype, device=p.device))
        if node_mask is not None:
            nm = node_mask.to(p.dtype)
            p = p * nm[:, :, None] * nm[:, None, :]
        return p


def avici_loss(logits, adj, node_mask=None) -> torch.Tensor:
    """Binary cross-entropy over the valid off-diagonal ordered pairs."""
    n = logits.shape[-1]
    valid = (1 - torch.eye(n, dtype=logits.dtype, device=logits.device)).expand_as(logits)
    if node_mask is not None:
        nm = node_mask.to(logits.dtype)
        valid = valid * nm[:, :, None] * nm[:, None, :]
    bce = F.binary_cross_entropy_with_logits(logits, adj.to(logits.dtype), reduction="none")
    return (bce * valid).sum() / valid.sum().clamp_min(1)


# ----------------------------------------------------------------------------------------------
# training (Algorithm 2)
# ----------------------------------------------------------------------------------------------
@dataclass
class TrainHistory:
    steps: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    snapshots: dict = field(default_factory=dict)   # step -> state dict (cpu copies)


def param_groups(model: nn.Module, weight_decay: float):
    """AdamW groups: weight decay only on >= 2-D weights (not on biases / LayerNorm gains)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def train_amortized(model: nn.Module, task_sampler, n_steps: int, batch_size: int = 8, lr: float = 1e-3,
                    weight_decay: float = 1e-5, seed: int = 0, device="cpu", snapshot_steps=(),
                    progress: bool = True) -> TrainHistory:
    """Algorithm 2: each step draws ``batch_size`` fresh (dataset, DAG) pairs with
    ``task_sampler(rng, batch_size) -> batch dict`` and takes one AdamW step on the model's loss.
    The data stream is seeded by ``seed`` (numpy); returns the loss per step and the requested
    snapshots (state dicts at the given step counts)."""
    check_int("n_steps", n_steps, 0)
    check_int("batch_size", batch_size, 1)
    check_real("lr", lr, lo=0.0, strict=True)
    check_real("weight_decay", weight_decay, lo=0.0)
    if not callable(task_sampler):
        raise TypeError(f"task_sampler must be a callable (rng, batch_size) -> batch, got {type(task_sampler).__name__}")
    device = check_device(device, "device")
    from tqdm.auto import tqdm

    rng = np.random.default_rng(check_int("seed", seed, 0))
    model.to(device).train()
    opt = torch.optim.AdamW(param_groups(model, weight_decay), lr=lr)
    hist, losses = TrainHistory(), []
    for step in tqdm(range(1, n_steps + 1), leave=False, disable=not progress, desc="train"):
        batch = {k: v.to(device) for k, v in task_sampler(rng, batch_size).items()}
        with trusted_values() if step > 1 else contextlib.nullcontext():   # the first batch is checked
            loss = model.loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        hist.steps.append(step)
        losses.append(loss.detach())            # kept on the device: read once after the loop
        if step in snapshot_steps:
            hist.snapshots[step] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    hist.losses = torch.stack(losses).tolist() if losses else []
    model.eval()
    return hist
