"""Preconditioned DeltaNet: the diagonal preconditioner and the (preconditioned) delta rule.

Tumma, Loo and Rus, *Preconditioned DeltaNet: Curvature-aware Sequence Modeling for Linear
Recurrences*, ICML 2026 (arXiv:2604.21100). Official kernels: ntumm120/preconditioned-deltanet
(a fork of fla-org/flash-linear-attention). The paper's body was not available when this module was
written; equation labels below follow the chapter's notebooks (``(eq-…)``) and the formulas are pinned
to the official reference code.

The state ``S`` (``[B, H, K, V]``, one row per key coordinate) is a linear map fitted online so that
``S^T k_i ≈ v_i``. With a decay ``D_t`` (1, a scalar ``α_t = e^{g_t}`` or ``Diag(α_t)``), every member of
the family computes its error on the decayed state and writes along a *write key* ``k̃_t``::

    u_t = β_t (v_t − (D_t S_{t−1})^T k_t)           (eq-delta-error)
    S_t = D_t S_{t−1} + k̃_t u_t^T                  (eq-delta-write)
    o_t = S_t^T q_t                                 (eq-readout)

``k̃ = k`` gives DeltaNet (DN, ``D = 1``), Gated DeltaNet (GDN, scalar gate) and Kimi Delta Attention
(KDA, per-channel gate). The paper's preconditioned versions (PDN, PGDN, PKDA) use ``k̃ = m ⊙ k`` with
the diagonal preconditioner

    a_t = e^{g^atk_t} a_{t−1} + β^atk_t (k_t ⊙ k_t)                    (eq-atk)
    r_t = log(a_t + ε) − c,  s_t = r_t / (1 + |r_t|)                   (eq-squash)
    m_t = exp(−log(x) · s_t) ∈ (1/x, x)                                 (eq-m)

Only the *write* key is preconditioned; the read key ``k`` (inside the error) and the query are not.

Two implementations of the recurrence are given and tested against each other:

- :func:`delta_rule_recurrent` — token by token (the reference);
- :func:`delta_rule_chunk` — the chunkwise-parallel (WY / UT-transform) algorithm with asymmetric
  read/write keys, batched over batch, heads and chunks; only the ``T / C`` state hand-offs are
  sequential. This is the implementation used for training and on a GPU.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor

# ------------------------------------------------------------------------------------------------
# input validation (shared by the public ops)
# ------------------------------------------------------------------------------------------------

_G_TOL = 1e-6  # decays must satisfy g <= 0; tiny positive round-off is tolerated


def _check_tensor(name: str, t, ndim: int | tuple[int, ...] | None = None) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype, got {t.dtype}")
    if t.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(f"{name} must be float32 or float64, got {t.dtype}: the recurrences accumulate over "
                        f"the sequence and the chunked form solves triangular systems, which half precision "
                        f"cannot do reliably (convert with .float())")
    dims = (ndim,) if isinstance(ndim, int) else ndim
    if dims is not None and t.dim() not in dims:
        raise ValueError(f"{name} must be {' or '.join(f'{d}-D' for d in dims)}, got shape {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite (found NaN or inf)")
    return t


def _check_chunk_size(chunk_size) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(f"chunk_size must be a positive int, got {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return chunk_size


def _check_recurrence_inputs(q, k, v, beta, g, k_write, initial_state, need_beta: bool = True):
    """Validate ``[B,T,H,K]`` / ``[B,T,H,V]`` inputs; return ``(B, T, H, K, V)``."""
    _check_tensor("q", q, 4)
    _check_tensor("k", k, 4)
    _check_tensor("v", v, 4)
    if q.shape != k.shape:
        raise ValueError(f"q and k must have the same shape [B,T,H,K], got {tuple(q.shape)} and {tuple(k.shape)}")
    B, T, H, K = k.shape
    if v.shape[:3] != (B, T, H):
        raise ValueError(f"v must be [B,T,H,V] with B,T,H = {(B, T, H)}, got {tuple(v.shape)}")
    V = v.shape[-1]
    if beta is None and need_beta:
        raise TypeError("beta must be a [B,T,H] tensor of write strengths, got None")
    if beta is not None:
        _check_tensor("beta", beta, 3)
        if beta.shape != (B, T, H):
            raise ValueError(f"beta must be [B,T,H] = {(B, T, H)}, got {tuple(beta.shape)}")
        if bool((beta < 0).any()) or bool((beta > 2).any()):
            raise ValueError("beta must lie in [0, 2]")
    if g is not None:
        _check_tensor("g", g, (3, 4))
        if g.shape not in ((B, T, H), (B, T, H, K)):
            raise ValueError(f"g must be [B,T,H] (scalar gate) or [B,T,H,K] (per-channel gate), got {tuple(g.shape)}")
        if bool((g > _G_TOL).any()):
            raise ValueError("g is a log-decay and must be <= 0 (decay factor exp(g) <= 1)")
    if k_write is not None:
        _check_tensor("k_write", k_write, 4)
        if k_write.shape != k.shape:
            raise ValueError(f"k_write must have the shape of k {tuple(k.shape)}, got {tuple(k_write.shape)}")
    if initial_state is not None:
        _check_tensor("initial_state", initial_state, 4)
        if initial_state.shape != (B, H, K, V):
            raise ValueError(f"initial_state must be [B,H,K,V] = {(B, H, K, V)}, got {tuple(initial_state.shape)}")
    return B, T, H, K, V


# ------------------------------------------------------------------------------------------------
# the diagonal preconditioner
# ------------------------------------------------------------------------------------------------


def l2_normalize(x: Tensor, dim: int = -1, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(Σ x² + eps)`` along ``dim`` (the L2 norm used by FLA's kernels)."""
    return x * torch.rsqrt((x * x).sum(dim=dim, keepdim=True) + eps)


def squash_preconditioner(a: Tensor, center: Tensor | float = -0.2, x: float = 1.5, eps: float = 1e-6) -> Tensor:
    """The bounded diagonal preconditioner ``m = exp(−log(x)·softsign(log(a+ε) − c))``, eqs. (eq-squash), (eq-m).

    ``a`` is the non-negative preconditioner state ``[..., H, K]``; ``center`` is a float or a per-head
    tensor ``[H]``. The output lies in ``(1/x, x)``, equals 1 at ``a = e^c − ε`` and decreases in ``a``:
    rarely excited key coordinates (small ``a``) get larger writes.
    """
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        raise TypeError(f"x must be a float, got {type(x).__name__}")
    if x < 1:
        raise ValueError(f"x must be >= 1 (m lies in (1/x, x)), got {x}")
    if not isinstance(eps, (int, float)) or eps <= 0:
        raise ValueError(f"eps must be a positive float, got {eps!r}")
    if isinstance(center, Tensor):
        if center.dim() == 1:
            if a.dim() < 2 or center.shape[0] != a.shape[-2]:
                raise ValueError(f"center must be a float or a per-head tensor [H], got shape {tuple(center.shape)}")
            center = center[:, None]  # [H, 1] broadcasts over [..., H, K]
        elif center.dim() != 0:
            raise ValueError(f"center must be a float or a per-head tensor [H], got shape {tuple(center.shape)}")
    r = torch.log(a + eps) - center  # (eq-squash) log-space distance from the centre
    s = r / (1.0 + r.abs())  # softsign ∈ (−1, 1)
    return torch.exp(-math.log(x) * s)  # (eq-m) m ∈ (1/x, x)


def _check_atk_inputs(k, g_atk, beta_atk, initial_state):
    _check_tensor("k", k, 4)
    _check_tensor("g_atk", g_atk, 3)
    _check_tensor("beta_atk", beta_atk, 3)
    B, T, H, K = k.shape
    for name, t in (("g_atk", g_atk), ("beta_atk", beta_atk)):
        if t.shape != (B, T, H):
            raise ValueError(f"{name} must be [B,T,H] = {(B, T, H)}, got {tuple(t.shape)}")
    if bool((g_atk > _G_TOL).any()):
        raise ValueError("g_atk is a log-decay and must be <= 0")
    if bool((beta_atk < 0).any()):
        raise ValueError("beta_atk must be >= 0")
    if initial_state is not None:
        _check_tensor("initial_a_state", initial_state, 3)
        if initial_state.shape != (B, H, K):
            raise ValueError(f"initial_a_state must be [B,H,K] = {(B, H, K)}, got {tuple(initial_state.shape)}")
        if bool((initial_state < 0).any()):
            raise ValueError("initial_a_state must be >= 0 (it accumulates squared keys)")


def atk_state(k: Tensor, g_atk: Tensor, beta_atk: Tensor, initial_state: Tensor | None = None,
              chunk_size: int | None = None) -> tuple[Tensor, Tensor]:
    """Preconditioner state ``a_t = e^{g^atk_t} a_{t−1} + β^atk_t k_t²`` for every token, eq. (eq-atk).

    ``k``: ``[B,T,H,K]``; ``g_atk``, ``beta_atk``: ``[B,T,H]``; ``initial_state``: ``[B,H,K]`` (``a_0``, zeros by
    default). Returns ``(a [B,T,H,K], a_T [B,H,K])``. ``chunk_size=None`` scans token by token; an integer
    uses the chunked closed form ``a_i = e^{Λ_i} a_0 + Σ_{j≤i} e^{Λ_i−Λ_j} β_j k_j²`` (Λ = cumsum of ``g_atk``
    inside the chunk), batched over chunks.
    """
    _check_atk_inputs(k, g_atk, beta_atk, initial_state)
    if chunk_size is not None:
        _check_chunk_size(chunk_size)
    return _atk_scan(k, g_atk, beta_atk, initial_state, chunk_size)


def _atk_scan(k, g_atk, beta_atk, initial_state, chunk_size):
    """Unvalidated body of :func:`atk_state`."""
    B, T, H, K = k.shape
    a0 = initial_state if initial_state is not None else k.new_zeros(B, H, K)
    x = beta_atk[..., None] * k * k  # [B,T,H,K] the increments β^atk k²
    if chunk_size is None:
        a, out = a0, []
        for t in range(T):
            a = g_atk[:, t, :, None].exp() * a + x[:, t]  # (eq-atk)
            out.append(a)
        return torch.stack(out, dim=1), a
    C = chunk_size
    N = -(-T // C)
    pad = N * C - T
    xs = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, pad)).view(B, N, C, H, K)
    lam = torch.nn.functional.pad(g_atk, (0, 0, 0, pad)).view(B, N, C, H).cumsum(2)  # Λ_i inside each chunk
    causal = torch.ones(C, C, dtype=torch.bool, device=k.device).tril()  # j <= i
    diff = (lam[:, :, :, None, :] - lam[:, :, None, :, :]).masked_fill(~causal[:, :, None], -math.inf)
    local = torch.einsum("bnijh,bnjhk->bnihk", diff.exp(), xs)  # [B,N,C,H,K] with a_0 = 0
    starts, a = [], a0
    for n in range(N):  # sequential only across chunks
        starts.append(a)
        a = lam[:, n, -1, :, None].exp() * a + local[:, n, -1]
    start = torch.stack(starts, dim=1)  # [B,N,H,K]
    full = local + lam[..., None].exp() * start[:, :, None]  # a_i = e^{Λ_i} a_0 + local_i
    return full.reshape(B, N * C, H, K)[:, :T], a


def write_eigenvalues(k: Tensor, beta: Tensor, m: Tensor | None = None) -> Tensor:
    """The non-unit eigenvalue ``λ_w = 1 − β ⟨k, m ⊙ k⟩`` of the write ``I − β Diag(m) k k^T`` (P4).

    ``k``: ``[B,T,H,K]``, ``beta``: ``[B,T,H]``, ``m``: ``[B,T,H,K]`` or ``None`` (``m = 1``). The other
    ``K − 1`` eigenvalues equal 1. With ``‖k‖ = 1`` and ``m ∈ (1/x, x)``, ``λ_w ∈ (1 − βx, 1 − β/x)``.
    """
    _check_tensor("k", k, 4)
    _check_tensor("beta", beta, 3)
    if beta.shape != k.shape[:3]:
        raise ValueError(f"beta must be [B,T,H] = {tuple(k.shape[:3])}, got {tuple(beta.shape)}")
    kk = k * k if m is None else k * _check_tensor("m", m, 4) * k
    return 1.0 - beta * kk.sum(-1)


# ------------------------------------------------------------------------------------------------
# the delta rule: token-by-token reference
# ------------------------------------------------------------------------------------------------


def _decay_state(S: Tensor, g_t: Tensor | None) -> Tensor:
    """``D_t S``: scalar gate ``[B,H]`` scales all of S, per-channel gate ``[B,H,K]`` scales its rows."""
    if g_t is None:
        return S
    if g_t.dim() == 2:
        return S * g_t.exp()[..., None, None]
    return S * g_t.exp()[..., None]  # KDA: Diag(α) acts on key coordinates (rows)


def _recurrent_scan(q, k, v, beta, g, k_write, S, keep_states: bool):
    """Token loop of eqs. (eq-delta-error)-(eq-readout); batched over B and H. Returns (o, S_T, states)."""
    kw = k if k_write is None else k_write
    outs, states = [], []
    for t in range(k.shape[1]):
        S = _decay_state(S, None if g is None else g[:, t])  # D_t S_{t−1}
        err = v[:, t] - torch.einsum("bhk,bhkv->bhv", k[:, t], S)  # v_t − (D_t S)^T k_t  (read key)
        u = beta[:, t, :, None] * err  # (eq-delta-error)
        S = S + kw[:, t, :, :, None] * u[:, :, None, :]  # (eq-delta-write)  (write key)
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))  # (eq-readout)
        if keep_states:
            states.append(S)
    o = torch.stack(outs, dim=1)  # [B,T,H,V]
    return o, S, (torch.stack(states, dim=1) if keep_states else None)


def delta_rule_recurrent(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None,
                         k_write: Tensor | None = None, initial_state: Tensor | None = None,
                         output_final_state: bool = False) -> tuple[Tensor, Tensor | None]:
    """Token-by-token DN / GDN / KDA and their preconditioned versions, eqs. (eq-delta-error)-(eq-readout).

    Shapes: ``q, k, k_write`` ``[B,T,H,K]``, ``v`` ``[B,T,H,V]``, ``beta`` ``[B,T,H]``, ``g`` ``None`` (DeltaNet),
    ``[B,T,H]`` (GDN) or ``[B,T,H,K]`` (KDA), ``initial_state`` ``[B,H,K,V]``. ``k_write = None`` means
    ``k̃ = k``. No normalisation is applied here (see :func:`precond_delta_rule`). Returns
    ``(o [B,T,H,V], S_T or None)``.
    """
    B, T, H, K, V = _check_recurrence_inputs(q, k, v, beta, g, k_write, initial_state)
    S0 = initial_state if initial_state is not None else v.new_zeros(B, H, K, V)
    o, S, _ = _recurrent_scan(q, k, v, beta, g, k_write, S0, keep_states=False)
    return o, (S if output_final_state else None)


def delta_rule_states(k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None, k_write: Tensor | None = None,
                      initial_state: Tensor | None = None) -> Tensor:
    """Every state ``S_1..S_T`` of the recurrence (``[B,T,H,K,V]``); used to plot learning curves."""
    B, T, H, K, V = _check_recurrence_inputs(k, k, v, beta, g, k_write, initial_state)
    S0 = initial_state if initial_state is not None else v.new_zeros(B, H, K, V)
    return _recurrent_scan(k, k, v, beta, g, k_write, S0, keep_states=True)[2]


# ------------------------------------------------------------------------------------------------
# the delta rule: chunkwise-parallel algorithm
# ------------------------------------------------------------------------------------------------


def _to_chunks(t: Tensor, N: int, C: int) -> Tensor:
    """``[B,T,H,*]`` -> zero-padded ``[B,H,N,C,*]``."""
    pad = N * C - t.shape[1]
    t = t.movedim(1, 2)  # [B,H,T,*]
    if pad:
        t = torch.nn.functional.pad(t, (0, 0) * (t.dim() - 3) + (0, pad))
    return t.reshape(*t.shape[:2], N, C, *t.shape[3:])


def _chunk_scan(q, k, kw, v, beta, g, C, S0, delta: bool):
    """Chunkwise algorithm (chapter notebook 2, algorithm ``alg-chunk``) for the delta rule (``delta=True``)
    or for (gated) linear attention (``delta=False``: ``u = v``, no error term).

    Inputs in ``[B,T,H,*]`` layout. Returns ``(o [B,T,H,V], S_T [B,H,K,V])``.
    """
    B, T, H, K = k.shape
    N = -(-T // C)
    Q, Kr, Kw, Vc = (_to_chunks(t, N, C) for t in (q, k, kw, v))  # [B,H,N,C,K|V]
    dev = k.device
    incl = torch.ones(C, C, dtype=torch.bool, device=dev).tril()  # j <= i
    strict = torch.ones(C, C, dtype=torch.bool, device=dev).tril(-1)  # j < i
    vector_gate = g is not None and g.dim() == 4
    if g is None:
        G = None
    else:
        G = _to_chunks(g if vector_gate else g[..., None], N, C)
        G = (G if vector_gate else G[..., 0]).cumsum(3)  # [B,H,N,C(,K)] cumulative log-decay G_i
    # pairwise decays e^{G_i − G_j}, masked *before* exp (i >= j): no overflow, no inf*0
    if G is None:
        E = incl.to(k.dtype)  # [C,C]
        A = (Q @ Kw.transpose(-1, -2)) * E  # step 5: A_ij = <q_i, k̃_j>, i >= j
        KKt = (Kr @ Kw.transpose(-1, -2)) * strict  # <k_i, k̃_j>, i > j
        Qg, Kg, GL, Kd = Q, Kr, None, Kw
    elif not vector_gate:
        diff = (G[..., :, None] - G[..., None, :]).masked_fill(~incl, -math.inf)
        E = diff.exp()  # [B,H,N,C,C]
        A = (Q @ Kw.transpose(-1, -2)) * E
        KKt = (Kr @ Kw.transpose(-1, -2)) * E * strict
        Qg, Kg = Q * G[..., None].exp(), Kr * G[..., None].exp()  # e^{G_i} q_i, e^{G_i} k_i
        GL = G[..., -1]  # [B,H,N] decay over the whole chunk
        Kd = Kw * (GL[..., None, None] - G[..., None]).exp()  # k̃_j e^{G_L − G_j}
    else:  # KDA: per-channel decay needs the pairwise [C,C,K] form
        diff = (G[..., :, None, :] - G[..., None, :, :]).masked_fill(~incl[..., None], -math.inf)
        E = diff.exp()  # [B,H,N,C,C,K]
        A = torch.einsum("bhnik,bhnijk,bhnjk->bhnij", Q, E, Kw)
        KKt = torch.einsum("bhnik,bhnijk,bhnjk->bhnij", Kr, E, Kw) * strict
        Qg, Kg = Q * G.exp(), Kr * G.exp()
        GL = G[..., -1, :]  # [B,H,N,K]
        Kd = Kw * (GL[..., None, :] - G).exp()
    if delta:
        Bc = _to_chunks(beta[..., None], N, C)  # [B,H,N,C,1]
        Lm = Bc * KKt  # step 2: L_ij = β_i <k_i e^{G_i−G_j}, k̃_j>, strictly lower
        eye = torch.eye(C, dtype=k.dtype, device=dev)
        Tm = torch.linalg.solve_triangular(eye + Lm, eye.expand_as(Lm), upper=False, unitriangular=True)  # step 3
        W = Tm @ (Bc * Kg)  # step 4: [B,H,N,C,K]
        U0 = Tm @ (Bc * Vc)  # [B,H,N,C,V]
    else:
        W, U0 = None, Vc
    S, outs = S0, []
    for n in range(N):  # sequential only across chunks
        U = U0[:, :, n] if W is None else U0[:, :, n] - W[:, :, n] @ S  # step 4: U = U0 − W S_0
        outs.append(Qg[:, :, n] @ S + A[:, :, n] @ U)  # step 6: O = (e^G Q) S_0 + A U
        if GL is None:
            S = S + Kd[:, :, n].transpose(-1, -2) @ U  # step 7
        elif GL.dim() == 3:
            S = GL[:, :, n, None, None].exp() * S + Kd[:, :, n].transpose(-1, -2) @ U
        else:
            S = GL[:, :, n, :, None].exp() * S + Kd[:, :, n].transpose(-1, -2) @ U
    o = torch.stack(outs, dim=2).reshape(B, H, N * C, -1)[:, :, :T].movedim(1, 2)  # [B,T,H,V]
    return o, S


def delta_rule_chunk(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None,
                     k_write: Tensor | None = None, chunk_size: int = 32, initial_state: Tensor | None = None,
                     output_final_state: bool = False) -> tuple[Tensor, Tensor | None]:
    """Chunkwise-parallel delta rule with asymmetric read/write keys; same semantics as
    :func:`delta_rule_recurrent`.

    Inside a chunk with entering state ``S_0`` and cumulative log-decay ``G_i``, the pseudo-values solve the
    unit lower-triangular system ``(I + L) U = β V − β (e^G ⊙ K) S_0`` with
    ``L_ij = β_i ⟨k_i ⊙ e^{G_i−G_j}, k̃_j⟩`` (``i > j``); then ``O = (e^G ⊙ Q) S_0 + A U`` with
    ``A_ij = ⟨q_i ⊙ e^{G_i−G_j}, k̃_j⟩`` (``i ≥ j``) and ``S_L = e^{G_L} S_0 + (k̃ ⊙ e^{G_L−G})^T U``.
    All chunks are processed at once; only the hand-off of ``S`` between chunks is a loop.
    A ``T`` that is not a multiple of ``chunk_size`` is zero-padded (``β = 0``, ``g = 0``: no effect).
    """
    B, T, H, K, V = _check_recurrence_inputs(q, k, v, beta, g, k_write, initial_state)
    C = _check_chunk_size(chunk_size)
    S0 = initial_state if initial_state is not None else v.new_zeros(B, H, K, V)
    kw = k if k_write is None else k_write
    o, S = _chunk_scan(q, k, kw, v, beta, g, C, S0, delta=True)
    return o, (S if output_final_state else None)


# ------------------------------------------------------------------------------------------------
# the full preconditioned operator (PDN / PGDN / PKDA)
# ------------------------------------------------------------------------------------------------


def precond_delta_rule(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor | None = None,
                       g_atk: Tensor | None = None, beta_atk: Tensor | None = None,
                       center: Tensor | float = -0.2, x: float = 1.5, eps: float = 1e-6, mode: str = "chunk",
                       chunk_size: int = 32, normalize_qk: bool = True, scale: float | None = None,
                       initial_state: Tensor | None = None, initial_a_state: Tensor | None = None,
                       output_final_state: bool = False, allow_unstable: bool = False,
                       ) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """PDN (``g=None``), PGDN (``g`` ``[B,T,H]``) or PKDA (``g`` ``[B,T,H,K]``), as in the official op.

    1. L2-normalise ``q, k`` over ``K`` and multiply ``q`` by ``scale`` (default ``K^{-1/2}``);
    2. preconditioner state ``a`` (eq-atk) from the normalised keys, ``m`` by the squash (eq-squash, eq-m);
    3. write key ``k̃ = m ⊙ k``; run the recurrence (``mode='chunk'`` or ``'recurrent'``).

    ``g_atk`` / ``beta_atk`` (``[B,T,H]``) default to 0 / 1. **Fallback when the preconditioner gates are
    omitted:** the state is then the *undecayed* running sum ``a_t = Σ_{i≤t} k_i²`` (Adagrad-like), which
    grows without bound (about ``t/K`` per coordinate for unit keys). Once ``a ≫ e^c`` the squash saturates
    and ``m`` drifts towards ``1/x`` in every coordinate, so on long sequences the write is damped uniformly
    rather than preconditioned. The official layer always passes learned gates (a decayed state); pass
    ``g_atk < 0`` to get a running *average*.
    ``center`` is a float or a per-head tensor ``[H]`` (learnable in the layer). ``x`` must lie in
    ``[1, 2]`` (the write eigenvalue then stays in ``[−1, 1]`` for ``β ≤ 1``, P4) unless
    ``allow_unstable=True``; ``x = 1`` gives ``m ≡ 1``, the unpreconditioned recurrence.
    Returns ``(o [B,T,H,V], S_T or None, a_T or None)``.
    """
    if mode not in ("chunk", "recurrent"):
        raise ValueError(f"mode must be 'chunk' or 'recurrent', got {mode!r}")
    _check_chunk_size(chunk_size)
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        raise TypeError(f"x must be a float, got {type(x).__name__}")
    if x < 1:
        raise ValueError(f"x must be >= 1 (x < 1 inverts the preconditioner), got {x}")
    if x > 2 and not allow_unstable:
        raise ValueError(f"x must be <= 2 for a stable write (pass allow_unstable=True to override), got {x}")
    if not isinstance(eps, (int, float)) or eps <= 0:
        raise ValueError(f"eps must be a positive float, got {eps!r}")
    B, T, H, K, V = _check_recurrence_inputs(q, k, v, beta, g, None, initial_state)
    if x > 1 and bool((beta > 1).any()):
        warnings.warn("beta > 1 combined with x > 1 can push the write eigenvalue below -1 (unstable)",
                      RuntimeWarning, stacklevel=2)
    g_atk = torch.zeros_like(beta) if g_atk is None else g_atk
    beta_atk = torch.ones_like(beta) if beta_atk is None else beta_atk
    if isinstance(center, Tensor) and center.dim() == 1 and center.shape[0] != H:
        raise ValueError(f"center must be a float or a per-head tensor [H] = [{H}], got shape {tuple(center.shape)}")
    _check_atk_inputs(k, g_atk, beta_atk, initial_a_state)
    return _precond_forward(q, k, v, beta, g, g_atk, beta_atk, center, float(x), eps, mode, chunk_size,
                            normalize_qk, scale, initial_state, initial_a_state, output_final_state)


def _precond_forward(q, k, v, beta, g, g_atk, beta_atk, center, x, eps, mode, chunk_size, normalize_qk, scale,
                     initial_state, initial_a_state, output_final_state):
    """Unvalidated body of :func:`precond_delta_rule` (the learned layers call this directly)."""
    B, T, H, K = k.shape
    if normalize_qk:
        q, k = l2_normalize(q), l2_normalize(k)
    q = q * (K ** -0.5 if scale is None else scale)
    a, a_T = _atk_scan(k, g_atk, beta_atk, initial_a_state, chunk_size if mode == "chunk" else None)
    m = squash_preconditioner(a, center=center, x=x, eps=eps)  # [B,T,H,K]
    k_write = m * k  # k̃ = m ⊙ k: only the write key is preconditioned
    S0 = initial_state if initial_state is not None else v.new_zeros(B, H, K, v.shape[-1])
    if mode == "chunk":
        o, S = _chunk_scan(q, k, k_write, v, beta, g, chunk_size, S0, delta=True)
    else:
        o, S, _ = _recurrent_scan(q, k, v, beta, g, k_write, S0, keep_states=False)
    if not output_final_state:
        return o, None, None
    return o, S, a_T
