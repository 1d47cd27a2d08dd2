"""Baselines and the exact end of the spectrum for Preconditioned DeltaNet (Tumma, Loo and Rus, ICML 2026).

- :func:`linear_attention` — ``S_t = α_t S_{t−1} + k_t v_t^T`` (plain, or Mamba-2-style gated); the
  "write without error correction" end of the family.
- :func:`rls_delta_rule` — the delta rule preconditioned with the *exact* inverse Hessian
  ``P_t = R_t^{-1}``, ``R_t = γ_t R_{t−1} + β_t k_t k_t^T``, ``R_0 = λI`` (recursive least squares)::

      S_t = S_{t−1} + β_t R_t^{-1} k_t (v_t − S_{t−1}^T k_t)^T           (eq-rls)

  Note: no decay is applied to ``S``; forgetting lives entirely in ``R`` (P2).
- :func:`ridge_state` — the closed form ``S_t = R_t^{-1} B_t`` with ``B_t = γ_t B_{t−1} + β_t k_t v_t^T`` (P1).
- :func:`mesa_readout` — linear attention read with the preconditioned query,
  ``o_t = B_t^T R_t^{-1} q_t`` (MesaNet's read-out, P2).

The plain delta-rule baselines (DeltaNet, Gated DeltaNet, KDA) are :func:`~.method.delta_rule_chunk` /
:func:`~.method.delta_rule_recurrent` with ``k_write=None``. These exact solvers cost ``O(K²)`` per token
and a ``K × K`` state: references for the theory, never used in the learned layers.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .method import _check_chunk_size, _check_recurrence_inputs, _check_tensor, _chunk_scan


def linear_attention(q: Tensor, k: Tensor, v: Tensor, g: Tensor | None = None, initial_state: Tensor | None = None,
                     output_final_state: bool = False, chunk_size: int = 64) -> tuple[Tensor, Tensor | None]:
    """(Gated) linear attention ``S_t = D_t S_{t−1} + k_t v_t^T``, ``o_t = S_t^T q_t`` (chunkwise, exact).

    ``g``: ``None``, ``[B,T,H]`` or ``[B,T,H,K]`` log-decays. Returns ``(o [B,T,H,V], S_T or None)``.
    """
    B, T, H, K, V = _check_recurrence_inputs(q, k, v, None, g, None, initial_state, need_beta=False)
    C = _check_chunk_size(chunk_size)
    S0 = initial_state if initial_state is not None else v.new_zeros(B, H, K, V)
    o, S = _chunk_scan(q, k, k, v, None, g, C, S0, delta=False)
    return o, (S if output_final_state else None)


def _check_exact(q, k, v, beta, g, lam):
    if q is not None:
        _check_recurrence_inputs(q, k, v, beta, None, None, None, need_beta=False)
    else:
        _check_recurrence_inputs(k, k, v, beta, None, None, None, need_beta=False)
    if not isinstance(lam, (int, float)) or isinstance(lam, bool):
        raise TypeError(f"lam must be a float, got {type(lam).__name__}")
    if lam <= 0:
        raise ValueError(f"lam must be > 0 (ridge term R_0 = lam I), got {lam}")
    B, T, H, _ = k.shape
    beta = torch.ones(B, T, H, dtype=k.dtype, device=k.device) if beta is None else beta
    if g is not None:
        _check_tensor("g", g, 3)
        if g.shape != (B, T, H):
            raise ValueError(f"g must be a scalar-per-head log-decay [B,T,H] = {(B, T, H)}, got {tuple(g.shape)}")
        if bool((g > 1e-6).any()):
            raise ValueError("g is a log-decay and must be <= 0")
    return beta


def _rls_scan(q, k, v, beta, g, lam, keep_states: bool):
    B, T, H, K = k.shape
    V = v.shape[-1]
    P = torch.eye(K, dtype=k.dtype, device=k.device).expand(B, H, K, K) / lam  # P_0 = R_0^{-1}
    S = v.new_zeros(B, H, K, V)
    outs, states = [], []
    for t in range(T):
        kt, bt = k[:, t], beta[:, t, :, None]  # [B,H,K], [B,H,1]
        gam = torch.ones_like(bt) if g is None else g[:, t, :, None].exp()  # γ_t
        # Sherman–Morrison: (γR + β k k^T)^{-1} = (P − β P k k^T P / (γ + β k^T P k)) / γ
        Pk = torch.einsum("bhij,bhj->bhi", P, kt)
        denom = gam + bt * (kt * Pk).sum(-1, keepdim=True)
        P = (P - bt[..., None] * Pk[..., :, None] * Pk[..., None, :] / denom[..., None]) / gam[..., None]
        err = v[:, t] - torch.einsum("bhk,bhkv->bhv", kt, S)  # v_t − S_{t−1}^T k_t
        S = S + bt[..., None] * torch.einsum("bhij,bhj->bhi", P, kt)[..., None] * err[:, :, None, :]  # (eq-rls)
        if q is not None:
            outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
        if keep_states:
            states.append(S)
    o = torch.stack(outs, dim=1) if q is not None else None
    return o, S, (torch.stack(states, dim=1) if keep_states else None)


def rls_delta_rule(q: Tensor, k: Tensor, v: Tensor, beta: Tensor | None = None, g: Tensor | None = None,
                   lam: float = 1e-3) -> tuple[Tensor, Tensor]:
    """Exactly preconditioned delta rule (recursive least squares), eq. (eq-rls).

    ``q, k``: ``[B,T,H,K]`` (used as given), ``v``: ``[B,T,H,V]``, ``beta``: ``[B,T,H]`` (default 1),
    ``g``: ``[B,T,H]`` log-decay of ``R`` (default none). ``R_t^{-1}`` is propagated by Sherman–Morrison,
    ``O(K²)`` per token. Returns ``(o [B,T,H,V], S_T [B,H,K,V])``.
    """
    beta = _check_exact(q, k, v, beta, g, lam)
    o, S, _ = _rls_scan(q, k, v, beta, g, float(lam), keep_states=False)
    return o, S


def rls_states(k: Tensor, v: Tensor, beta: Tensor | None = None, g: Tensor | None = None,
               lam: float = 1e-3) -> Tensor:
    """Every state ``S_1..S_T`` of :func:`rls_delta_rule` (``[B,T,H,K,V]``)."""
    beta = _check_exact(None, k, v, beta, g, lam)
    return _rls_scan(None, k, v, beta, g, float(lam), keep_states=True)[2]


def _running_moments(k, v, beta, g, lam, decay_ridge: bool = True):
    """``R_t`` ``[B,T,H,K,K]`` and ``B_t`` ``[B,T,H,K,V]`` for every ``t`` (eqs. of P1/P2).

    ``decay_ridge=True``: ``R_0 = λI`` decays with the gates like the rest of ``R`` (the RLS Hessian);
    ``False``: MesaNet's form, ``R_t = Σ_i w_i β_i k_i k_i^T + λI`` with an undecayed ridge."""
    B, T, H, K = k.shape
    eye = torch.eye(K, dtype=k.dtype, device=k.device)
    R = (lam if decay_ridge else 0.0) * eye.expand(B, H, K, K)
    M = v.new_zeros(B, H, K, v.shape[-1])
    Rs, Ms = [], []
    for t in range(T):
        gam = 1.0 if g is None else g[:, t, :, None, None].exp()
        bk = beta[:, t, :, None] * k[:, t]  # β_t k_t
        R = gam * R + bk[..., :, None] * k[:, t, :, None, :]  # R_t = γ R_{t−1} + β k k^T
        M = gam * M + bk[..., :, None] * v[:, t, :, None, :]  # B_t = γ B_{t−1} + β k v^T
        Rs.append(R if decay_ridge else R + lam * eye)
        Ms.append(M)
    return torch.stack(Rs, 1), torch.stack(Ms, 1)


def ridge_state(k: Tensor, v: Tensor, beta: Tensor | None = None, g: Tensor | None = None,
                lam: float = 1e-3) -> Tensor:
    """Closed-form ridge solution ``S_T = R_T^{-1} B_T`` on all pairs (P1), ``[B,H,K,V]``.

    ``R_T = λ Π_t γ_t · I + Σ_i w_i β_i k_i k_i^T``, ``B_T = Σ_i w_i β_i k_i v_i^T``, ``w_i = Π_{s>i} γ_s``.
    """
    beta = _check_exact(None, k, v, beta, g, lam)
    B, T, H, K = k.shape
    logw = torch.zeros(B, T, H, dtype=k.dtype, device=k.device) if g is None else \
        g.flip(1).cumsum(1).flip(1) - g  # log w_i = Σ_{s>i} g_s
    w = (logw.exp() * beta)[..., None]  # [B,T,H,1]
    decay_all = torch.ones(B, H, dtype=k.dtype, device=k.device) if g is None else g.sum(1).exp()
    R = torch.einsum("bthi,bthj->bhij", w * k, k) + lam * decay_all[..., None, None] * torch.eye(
        K, dtype=k.dtype, device=k.device)
    M = torch.einsum("bthi,bthv->bhiv", w * k, v)
    return torch.linalg.solve(R, M)


def mesa_readout(q: Tensor, k: Tensor, v: Tensor, beta: Tensor | None = None, g: Tensor | None = None,
                 lam: float = 1e-3, decay_ridge: bool = True) -> Tensor:
    """Linear attention read with the preconditioned query: ``o_t = B_t^T solve(R_t, q_t)`` for all ``t`` (P2).

    ``B_t`` is the (β-weighted, decayed) linear-attention state, ``R_t`` the key Gram matrix with ridge
    ``λ``; one batched solve of ``[B,T,H,K,K]`` systems. Returns ``o`` ``[B,T,H,V]``.

    ``decay_ridge=True`` (default) decays ``λI`` together with the key Gram matrix, which is what makes
    the read-out equal to :func:`rls_delta_rule` with decay. MesaNet itself adds an *undecayed* ``λI`` at read
    time (``decay_ridge=False``): without decay (``g=None``) the two coincide, with decay they differ.
    """
    beta = _check_exact(q, k, v, beta, g, lam)
    if not isinstance(decay_ridge, bool):
        raise TypeError(f"decay_ridge must be a bool, got {type(decay_ridge).__name__}")
    R, M = _running_moments(k, v, beta, g, float(lam), decay_ridge)
    q_pre = torch.linalg.solve(R, q[..., None])[..., 0]  # R_t^{-1} q_t  [B,T,H,K]
    return torch.einsum("bthkv,bthk->bthv", M, q_pre)


def preconditioned_queries(q: Tensor, k: Tensor, beta: Tensor | None = None, g: Tensor | None = None,
                           lam: float = 1e-3) -> Tensor:
    """``R_t^{-1} q_t`` for every ``t`` (``[B,T,H,K]``): feeding these to :func:`linear_attention` with
    write keys ``β k`` reproduces :func:`mesa_readout`."""
    beta = _check_exact(q, k, q, beta, g, lam)
    R, _ = _running_moments(k, q, beta, g, float(lam))
    return torch.linalg.solve(R, q[..., None])[..., 0]
