"""A small recurrent language model with (preconditioned) delta-rule mixers, for the MQAR benchmark.

The mixer follows the official PGDN / PKDA layers of Tumma, Loo and Rus (ICML 2026), scaled down:
``h → (q, k, v) = Linear(h)`` → depthwise causal conv (kernel 4) + SiLU → heads → L2-normalised ``q, k``
(``q`` scaled by ``K^{-1/2}``) → gates → recurrence → per-head RMSNorm → ``o_proj``. Gates:

    β = σ(W_b h),  g = −exp(A_log) · softplus(W_a h + dt_bias)            (GDN, scalar per head)
    g = −exp(A_log) · softplus(f_proj(h) + dt_bias)                       (KDA, per channel)

The preconditioner has its *own* gate ``(W_a^atk, W_b^atk, A_log^atk, dt_bias^atk)`` and a learnable
per-head centre ``c`` (init −0.2). Blocks are pre-norm: ``h += Mixer(LN(h)); h += MLP(LN(h))``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .method import _chunk_scan, _precond_forward, _recurrent_scan, l2_normalize

VARIANTS = ("linear", "deltanet", "gdn", "kda")


class ShortConv(nn.Module):
    """Depthwise causal convolution over time followed by SiLU; ``[B,T,D] -> [B,T,D]``."""

    def __init__(self, dim: int, kernel_size: int = 4):
        super().__init__()
        if kernel_size < 1:
            raise ValueError(f"kernel_size must be >= 1, got {kernel_size}")
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(dim, dim, kernel_size, groups=dim, padding=kernel_size - 1)

    def forward(self, x: Tensor) -> Tensor:
        # y_t = b + Σ_j w_j ⊙ x_{t−(k−1)+j}: a depthwise causal conv written as k shifted products
        # (same parameters as nn.Conv1d, several times faster than its CPU kernel for k = 4)
        T, w = x.shape[1], self.conv.weight[:, 0]  # w: [D, k]
        xp = F.pad(x, (0, 0, self.kernel_size - 1, 0))  # [B, T+k−1, D]
        y = self.conv.bias + sum(xp[:, j:j + T] * w[:, j] for j in range(self.kernel_size))
        return F.silu(y)


def _dt_bias(n: int, generator: torch.Generator | None = None) -> Tensor:
    """``softplus^{-1}(dt)`` with ``dt ~ logU[1e-3, 1e-1]`` (Mamba-2 / GDN initialisation)."""
    u = torch.rand(n, generator=generator)
    dt = torch.exp(u * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
    return dt + torch.log(-torch.expm1(-dt))


class DeltaMixer(nn.Module):
    """Token mixer: linear attention, DeltaNet, GDN or KDA, optionally with the diagonal preconditioner."""

    def __init__(self, d_model: int, n_heads: int = 2, head_dim: int = 32, variant: str = "gdn",
                 precond: bool = False, squash_x: float = 1.5, center_init: float = -0.2, chunk_size: int = 16,
                 conv_size: int = 4, mode: str = "chunk"):
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if mode not in ("chunk", "recurrent"):
            raise ValueError(f"mode must be 'chunk' or 'recurrent', got {mode!r}")
        if precond and variant == "linear":
            raise ValueError("precond=True needs a delta-rule variant ('deltanet', 'gdn' or 'kda'), got 'linear'")
        if not (1.0 <= squash_x <= 2.0):
            raise ValueError(f"squash_x must lie in [1, 2], got {squash_x}")
        self.variant, self.precond, self.x = variant, precond, float(squash_x)
        self.H, self.K, self.chunk_size, self.mode = n_heads, head_dim, chunk_size, mode
        D = n_heads * head_dim
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d_model, D, bias=False) for _ in range(3))
        self.q_conv, self.k_conv, self.v_conv = (ShortConv(D, conv_size) for _ in range(3))
        if variant != "linear":
            self.b_proj = nn.Linear(d_model, n_heads)  # β = σ(W_b h)
        if variant == "gdn":
            self.a_proj = nn.Linear(d_model, n_heads, bias=False)
            self.A_log = nn.Parameter(torch.empty(n_heads).uniform_(1, 16).log())
            self.dt_bias = nn.Parameter(_dt_bias(n_heads))
        if variant == "kda":
            self.f_proj = nn.Sequential(nn.Linear(d_model, head_dim, bias=False), nn.Linear(head_dim, D, bias=False))
            self.A_log = nn.Parameter(torch.empty(n_heads).uniform_(1, 16).log())
            self.dt_bias = nn.Parameter(_dt_bias(D))
        if precond:  # the preconditioner's own gates and the learnable per-head centre
            self.a_atk_proj = nn.Linear(d_model, n_heads, bias=False)
            self.b_atk_proj = nn.Linear(d_model, n_heads)
            lo = 0.0 if variant == "kda" else 1.0
            self.A_log_atk = nn.Parameter(torch.empty(n_heads).uniform_(lo, 16).clamp_min(1e-4).log())
            self.dt_bias_atk = nn.Parameter(_dt_bias(n_heads))
            self.center = nn.Parameter(torch.full((n_heads,), float(center_init)))
        self.o_norm = nn.RMSNorm(head_dim)
        self.o_proj = nn.Linear(D, d_model, bias=False)

    def gates(self, h: Tensor) -> dict[str, Tensor]:
        """β, g (and the preconditioner's β^atk, g^atk) for ``h`` ``[B,T,d]``."""
        B, T, _ = h.shape
        out = {}
        if self.variant == "linear":
            return out
        out["beta"] = torch.sigmoid(self.b_proj(h))  # [B,T,H]
        if self.variant == "gdn":
            out["g"] = -self.A_log.exp() * F.softplus(self.a_proj(h) + self.dt_bias)  # [B,T,H]
        elif self.variant == "kda":
            f = F.softplus(self.f_proj(h) + self.dt_bias).view(B, T, self.H, self.K)
            out["g"] = -self.A_log.exp()[:, None] * f  # [B,T,H,K]
        if self.precond:
            out["g_atk"] = -self.A_log_atk.exp() * F.softplus(self.a_atk_proj(h) + self.dt_bias_atk)
            out["beta_atk"] = torch.sigmoid(self.b_atk_proj(h))
        return out

    def forward(self, h: Tensor) -> Tensor:
        B, T, _ = h.shape
        q = self.q_conv(self.q_proj(h)).view(B, T, self.H, self.K)
        k = self.k_conv(self.k_proj(h)).view(B, T, self.H, self.K)
        v = self.v_conv(self.v_proj(h)).view(B, T, self.H, self.K)
        gt = self.gates(h)
        # inside the model the ops are called without input validation (it would cost a sync per call);
        # precond_delta_rule / delta_rule_chunk are the validated public versions of the same code
        if self.precond:
            o, _, _ = _precond_forward(q, k, v, gt["beta"], gt.get("g"), gt["g_atk"], gt["beta_atk"], self.center,
                                       self.x, 1e-6, self.mode, self.chunk_size, True, None, None, None, False)
        else:
            q, k = l2_normalize(q) * self.K ** -0.5, l2_normalize(k)
            S0 = v.new_zeros(B, self.H, self.K, self.K)
            if self.variant == "linear":
                o, _ = _chunk_scan(q, k, k, v, None, None, self.chunk_size, S0, delta=False)
            elif self.mode == "chunk":
                o, _ = _chunk_scan(q, k, k, v, gt["beta"], gt.get("g"), self.chunk_size, S0, delta=True)
            else:
                o, _, _ = _recurrent_scan(q, k, v, gt["beta"], gt.get("g"), None, S0, keep_states=False)
        return self.o_proj(self.o_norm(o).reshape(B, T, -1))

    @torch.no_grad()
    def preconditioner_values(self, h: Tensor) -> Tensor:
        """The multipliers ``m`` ``[B,T,H,K]`` the mixer applies to its write keys for input ``h``."""
        if not self.precond:
            raise ValueError("preconditioner_values needs a mixer built with precond=True")
        from .method import atk_state, squash_preconditioner

        B, T, _ = h.shape
        k = l2_normalize(self.k_conv(self.k_proj(h)).view(B, T, self.H, self.K))
        gt = self.gates(h)
        a, _ = atk_state(k, gt["g_atk"], gt["beta_atk"])
        return squash_preconditioner(a, self.center, self.x)


class Block(nn.Module):
    def __init__(self, d_model: int, mlp_ratio: int, **mixer_kwargs):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.mixer = DeltaMixer(d_model, **mixer_kwargs)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_ratio * d_model), nn.GELU(),
                                 nn.Linear(mlp_ratio * d_model, d_model))

    def forward(self, h: Tensor) -> Tensor:
        h = h + self.mixer(self.norm1(h))
        return h + self.mlp(self.norm2(h))


class TinyRecurrentLM(nn.Module):
    """Embedding → ``n_layers`` pre-norm blocks (mixer + GELU MLP) → LayerNorm → tied output head."""

    def __init__(self, vocab_size: int, d_model: int = 64, n_layers: int = 2, mlp_ratio: int = 2, **mixer_kwargs):
        super().__init__()
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        self.embed = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embed.weight, std=0.02)  # small init: the tied head starts near uniform
        self.blocks = nn.ModuleList(Block(d_model, mlp_ratio, **mixer_kwargs) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.embed(tokens)  # [B,T,d]
        for block in self.blocks:
            h = block(h)
        return self.norm(h) @ self.embed.weight.T  # tied head: logits [B,T,vocab]
