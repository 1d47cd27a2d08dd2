"""Experiment runners for the Preconditioned DeltaNet chapter (Tumma, Loo and Rus, ICML 2026).

Every runner returns plain tensors / dicts / DataFrames; the notebooks only plot and discuss them.

- :func:`regression_stream`, :func:`online_regression` — test-time regression with anisotropic keys (NB1).
- :func:`exactness_table` — P1/P2: RLS = ridge = linear attention read with ``R_t^{-1} q_t`` (NB1).
- :func:`agreement_table`, :func:`time_modes`, :func:`stress_test` — chunk = recurrent, speed, stability (NB2).
- :func:`single_pass_recall`, :func:`recall_curves`, :func:`mqar_batch`, :func:`train_mqar` — recall (NB3).
"""

from __future__ import annotations

import copy
import math
import time

import pandas as pd
import torch
from torch import Tensor
from torch.func import functional_call, stack_module_state, vmap
from tqdm.auto import tqdm

from ..core import synchronize, time_fn
from .baselines import (
    linear_attention,
    mesa_readout,
    preconditioned_queries,
    ridge_state,
    rls_delta_rule,
    rls_states,
)
from .method import (
    atk_state,
    delta_rule_chunk,
    delta_rule_recurrent,
    delta_rule_states,
    l2_normalize,
    precond_delta_rule,
    squash_preconditioner,
    write_eigenvalues,
)
from .model import TinyRecurrentLM

# ------------------------------------------------------------------------------------------------
# anisotropic keys and the online regression stream (NB1)
# ------------------------------------------------------------------------------------------------


def _check_pos_int(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")


def anisotropic_keys(batch: int, T: int, d_k: int, kappa: float = 30.0, rotate: bool = False,
                     generator: torch.Generator | None = None, dtype=torch.float64) -> tuple[Tensor, Tensor]:
    """Unit keys ``k = normalize(Q Λ^{1/2} z)``, ``z ~ N(0, I)``, ``Λ`` geometric from 1 to ``1/κ``.

    ``Q`` is the identity (axis-aligned skew) or a random orthogonal matrix per batch element (rotated
    skew). Returns ``(k [batch,T,d_k], Σ [batch,d_k,d_k])`` with ``Σ = Q Λ Q^T`` (before normalising).
    """
    _check_pos_int("T", T)
    _check_pos_int("d_k", d_k)
    _check_pos_int("batch", batch)
    if not isinstance(kappa, (int, float)) or kappa < 1:
        raise ValueError(f"kappa must be a number >= 1, got {kappa!r}")
    expo = torch.arange(d_k, dtype=dtype) / max(d_k - 1, 1)
    lam = float(kappa) ** (-expo)  # Λ: 1 ... 1/κ
    if rotate:
        Q, R = torch.linalg.qr(torch.randn(batch, d_k, d_k, generator=generator, dtype=dtype))
        Q = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))[:, None, :]  # Haar-distributed
    else:
        Q = torch.eye(d_k, dtype=dtype).expand(batch, d_k, d_k)
    z = torch.randn(batch, T, d_k, generator=generator, dtype=dtype)
    k = l2_normalize(torch.einsum("bij,btj->bti", Q, z * lam.sqrt()), eps=0.0)
    return k, Q @ torch.diag(lam) @ Q.transpose(-1, -2)


def regression_stream(T: int, d_k: int, d_v: int, kappa: float = 30.0, rotate: bool = False, noise: float = 0.0,
                      batch: int = 1, generator: torch.Generator | None = None,
                      dtype=torch.float64) -> tuple[Tensor, Tensor, Tensor]:
    """A test-time-regression stream: keys from :func:`anisotropic_keys`, ``v = W^T k + σ ε``.

    Returns ``(k [batch,T,1,d_k], v [batch,T,1,d_v], W [batch,1,d_k,d_v])`` (one head).
    """
    _check_pos_int("d_v", d_v)
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    k, _ = anisotropic_keys(batch, T, d_k, kappa, rotate, generator, dtype)
    W = torch.randn(batch, d_k, d_v, generator=generator, dtype=dtype)
    v = torch.einsum("btk,bkv->btv", k, W) + noise * torch.randn(batch, T, d_v, generator=generator, dtype=dtype)
    return k[:, :, None], v[:, :, None], W[:, None]


def ema_preconditioner(k: Tensor, gamma: float, x: float | None, center: float, jacobi_floor: float = 1e-3,
                       bias_correct: bool = False) -> Tensor:
    """``m`` for a fixed-gate preconditioner ``a ← γ a + (1−γ) k²`` (eq-atk with ``g^atk = log γ``,
    ``β^atk = 1−γ``): the squash (eq-m) for a float ``x``, or unsquashed Jacobi ``1/(K (a + floor))`` for
    ``x=None``. ``bias_correct=True`` divides ``a`` by ``1 − γ^t`` first (Adam's correction of an average
    started at 0; not part of the paper's layer). ``k``: ``[B,T,H,K]``."""
    B, T, H, K = k.shape
    g_atk = torch.full((B, T, H), math.log(gamma), dtype=k.dtype, device=k.device)
    a, _ = atk_state(k, g_atk, torch.full_like(g_atk, 1 - gamma), chunk_size=64)
    if bias_correct:
        t = torch.arange(1, T + 1, dtype=k.dtype, device=k.device)
        a = a / (1 - gamma ** t)[None, :, None, None]
    if x is None:
        return 1.0 / (K * (a + jacobi_floor))
    return squash_preconditioner(a, center=center, x=x)


def online_regression(T: int, seeds: int, d_k: int = 16, d_v: int = 8, kappa: float = 30.0, rotate: bool = False,
                      beta: float = 0.5, gamma: float = 0.99, lam: float = 1e-3, seed: int = 0, noise: float = 0.0,
                      controls: bool = True) -> dict:
    """Relative error ``‖S_t − W‖_F / ‖W‖_F`` for every ``t`` and method, seeds batched.

    Methods: linear attention (best scalar rescaling), DeltaNet, PDN (x = 1.5, 2; centre ``log(1/d_k)``),
    unsquashed Jacobi, RLS. With ``controls``, also the step-size controls: DeltaNet with ``β = 1``, PDN with
    ``m`` divided by its mean over coordinates at every token (same average step as DeltaNet, only the
    per-coordinate shape kept) and unsquashed Jacobi on the bias-corrected average ``a/(1−γ^t)``.
    ``noise``: standard deviation of the target noise. Returns ``{'err': {method: [seeds, T]},
    'cond': (κ(Σ), κ(D^{-1/2}ΣD^{-1/2})), 'm_mean': [T] mean multiplier of PDN x=1.5}``.
    """
    gen = torch.Generator().manual_seed(seed + (1000 if rotate else 0))
    k, v, W = regression_stream(T, d_k, d_v, kappa, rotate, noise, seeds, gen)
    Wn = W.flatten(-2).norm(dim=-1)  # [seeds,1]
    b = torch.full(k.shape[:3], beta, dtype=k.dtype)
    center = math.log(1.0 / d_k)

    def rel(states):  # states [seeds,T,1,K,V]
        return ((states - W[:, None]).flatten(-2).norm(dim=-1) / Wn[:, None])[..., 0]

    err = {}
    M = torch.cumsum(k[..., :, None] * v[..., None, :], dim=1)  # Σ k v^T  [seeds,T,1,K,V]
    c = (M * W[:, None]).sum((-1, -2)) / (M * M).sum((-1, -2))  # best scalar rescaling per t
    err["linear attention"] = rel(c[..., None, None] * M)
    err["DeltaNet"] = rel(delta_rule_states(k, v, b))
    for x in (1.5, 2.0):
        m = ema_preconditioner(k, gamma, x, center)
        err[f"PDN x={x:g}"] = rel(delta_rule_states(k, v, b, k_write=m * k))
        if x == 1.5:
            m15 = m
    err["Jacobi (unsquashed)"] = rel(delta_rule_states(k, v, b, k_write=ema_preconditioner(k, gamma, None, center) * k))
    err["RLS"] = rel(rls_states(k, v, None, None, lam))
    if controls:
        err["DeltaNet beta=1"] = rel(delta_rule_states(k, v, torch.ones_like(b)))
        m_flat = m15 / m15.mean(-1, keepdim=True)  # mean 1 over coordinates: the shape of m, not its size
        err["PDN x=1.5, m mean 1"] = rel(delta_rule_states(k, v, b, k_write=m_flat * k))
        m_bc = ema_preconditioner(k, gamma, None, center, bias_correct=True)
        err["Jacobi (bias-corrected)"] = rel(delta_rule_states(k, v, b, k_write=m_bc * k))
    # conditioning of the key covariance before / after diagonal (Jacobi) scaling
    Sig = torch.einsum("btk,btl->bkl", k[:, :, 0], k[:, :, 0]) / T
    d = torch.diagonal(Sig, dim1=-2, dim2=-1).rsqrt()
    cond = torch.linalg.cond(Sig).mean().item(), torch.linalg.cond(d[:, :, None] * Sig * d[:, None, :]).mean().item()
    return {"err": err, "cond": cond, "m_mean": m15.mean((0, 2, 3))}


def exactness_table(T: int = 200, d_k: int = 8, d_v: int = 4, heads: int = 2, batch: int = 2, lam: float = 1e-3,
                    seed: int = 0) -> pd.DataFrame:
    """P1/P2 in float64: max-abs gaps between RLS, ridge, the decayed-ridge MesaNet-style read-out and linear
    attention read with ``R_t^{-1} q_t``; the relative gap to MesaNet's own read-out (undecayed ``λ``); order
    invariance of RLS versus DeltaNet. Without and with decay."""
    gen = torch.Generator().manual_seed(seed)
    dt = torch.float64
    k = l2_normalize(torch.randn(batch, T, heads, d_k, generator=gen, dtype=dt))
    q = torch.randn(batch, T, heads, d_k, generator=gen, dtype=dt)
    v = torch.randn(batch, T, heads, d_v, generator=gen, dtype=dt)
    beta = torch.rand(batch, T, heads, generator=gen, dtype=dt)
    g_decay = -0.05 * torch.rand(batch, T, heads, generator=gen, dtype=dt)
    perm = torch.randperm(T, generator=gen)
    rows = []
    for label, g in (("no decay", None), ("with decay", g_decay)):
        o, S = rls_delta_rule(q, k, v, beta, g, lam)
        o_mesa = mesa_readout(q, k, v, beta, g, lam)
        o_la, _ = linear_attention(preconditioned_queries(q, k, beta, g, lam), beta[..., None] * k, v, g)
        row = {"setting": label,
               "RLS state vs ridge": (S - ridge_state(k, v, beta, g, lam)).abs().max().item(),
               "RLS output vs decayed-ridge read-out": (o - o_mesa).abs().max().item(),
               "decayed-ridge read-out vs LA with R^-1 q": (o_mesa - o_la).abs().max().item(),
               "RLS vs MesaNet read-out (undecayed lambda), relative":
                   ((o - mesa_readout(q, k, v, beta, g, lam, decay_ridge=False)).norm() / o.norm()).item()}
        if g is None:
            _, S_p = rls_delta_rule(q, k[:, perm], v[:, perm], beta[:, perm], None, lam)
            _, D = delta_rule_recurrent(q, k, v, beta, output_final_state=True)
            _, D_p = delta_rule_recurrent(q, k[:, perm], v[:, perm], beta[:, perm], output_final_state=True)
            row["RLS: permuted order"] = (S - S_p).abs().max().item()
            row["DeltaNet: permuted order"] = (D - D_p).abs().max().item()
        rows.append(row)
    return pd.DataFrame(rows).set_index("setting")


# ------------------------------------------------------------------------------------------------
# chunk = recurrent, speed, stability (NB2)
# ------------------------------------------------------------------------------------------------


def random_inputs(B: int, T: int, H: int, K: int, V: int, gate: str | None, dtype=torch.float64,
                  device=None, seed: int = 0) -> dict:
    """Seeded random inputs of the shapes the ops expect; ``gate`` in ``{None, 'scalar', 'vector'}``."""
    gen = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    out = {"q": r(B, T, H, K), "k": r(B, T, H, K), "v": r(B, T, H, V), "beta": torch.sigmoid(r(B, T, H)),
           "g": None, "g_atk": torch.nn.functional.logsigmoid(r(B, T, H) + 2.0),
           "beta_atk": torch.sigmoid(r(B, T, H)), "center": -0.2 + 0.1 * r(H),
           "initial_state": 0.5 * r(B, H, K, V)}
    if gate == "scalar":
        out["g"] = torch.nn.functional.logsigmoid(r(B, T, H) + 3.0)
    elif gate == "vector":
        out["g"] = torch.nn.functional.logsigmoid(r(B, T, H, K) + 3.0)
    return {n: (t.to(dtype=dtype, device=device) if isinstance(t, Tensor) else t) for n, t in out.items()}


_GATES = {"DN": None, "GDN": "scalar", "KDA": "vector"}


def _run_variant(inp, precond: bool, mode: str, chunk_size: int, x: float = 1.5):
    q, k, v, beta, g = inp["q"], inp["k"], inp["v"], inp["beta"], inp["g"]
    if precond:
        o, S, _ = precond_delta_rule(q, k, v, beta, g, inp["g_atk"], inp["beta_atk"], center=inp["center"], x=x,
                                     mode=mode, chunk_size=chunk_size, initial_state=inp["initial_state"],
                                     output_final_state=True)
        return o, S
    q, k = l2_normalize(q) * q.shape[-1] ** -0.5, l2_normalize(k)
    fn = delta_rule_chunk if mode == "chunk" else delta_rule_recurrent
    kw = {"chunk_size": chunk_size} if mode == "chunk" else {}
    return fn(q, k, v, beta, g, initial_state=inp["initial_state"], output_final_state=True, **kw)


def agreement_table(B: int = 2, T: int = 70, H: int = 2, K: int = 16, V: int = 8, chunk_size: int = 16,
                    device=None, seed: int = 0) -> pd.DataFrame:
    """Max-abs gaps chunk vs recurrent (outputs, final states, gradients of every input) for
    {DN, GDN, KDA} × {plain, preconditioned} × {float64, float32}, non-zero initial state."""
    rows = []
    for dtype in (torch.float64, torch.float32):
        for name, gate in _GATES.items():
            for precond in (False, True):
                res = {}
                for mode in ("recurrent", "chunk"):
                    inp = random_inputs(B, T, H, K, V, gate, dtype, device, seed)
                    leaves = [n for n, t in inp.items() if isinstance(t, Tensor)]
                    for n in leaves:
                        inp[n].requires_grad_(True)
                    o, S = _run_variant(inp, precond, mode, chunk_size)
                    (o.square().mean() + S.square().mean()).backward()
                    used = [n for n in leaves if inp[n].grad is not None]
                    res[mode] = (o.detach(), S.detach(), {n: inp[n].grad for n in used})
                (o1, S1, g1), (o2, S2, g2) = res["recurrent"], res["chunk"]
                rows.append({"dtype": str(dtype).replace("torch.", ""),
                             "variant": ("P" if precond else "") + name,
                             "max |o diff|": (o1 - o2).abs().max().item(),
                             "max |S diff|": (S1 - S2).abs().max().item(),
                             "max |grad diff|": max((g1[n] - g2[n]).abs().max().item() for n in g1)})
    return pd.DataFrame(rows)


def _cpu_median(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return sorted(times)[len(times) // 2]


def time_modes(Ts, chunk_sizes, B: int = 4, H: int = 2, K: int = 32, V: int = 32, variant: str = "GDN",
               precond: bool = True, repeat: int = 3, device=None, dtype=torch.float32) -> pd.DataFrame:
    """Forward time of the recurrent and chunk modes as ``T`` grows (and for several chunk sizes).

    On CPU the median *CPU time* (``time.process_time``) is reported, robust on a shared machine; on a GPU
    the median synchronised wall time. Returns a long DataFrame ``(T, mode, chunk, seconds)``.
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    rows = []
    jobs = [(T, "recurrent", None) for T in Ts] + [(T, "chunk", C) for T in Ts for C in chunk_sizes]
    for T, mode, C in tqdm(jobs, desc="timing", leave=False):
        inp = random_inputs(B, T, H, K, V, _GATES[variant], dtype, device)

        def fn(inp=inp, mode=mode, C=C):
            with torch.no_grad():
                _run_variant(inp, precond, mode, C or 16)
            synchronize(device)

        secs = _cpu_median(fn, repeat) if device.type == "cpu" else time_fn(fn, repeat=repeat, device=device)
        rows.append({"T": T, "mode": mode, "chunk": C, "seconds": secs})
    return pd.DataFrame(rows)


def stress_test(x_values=(1.5, 2.0, 3.0), steps: int = 200, K: int = 8, V: int = 4, beta: float = 1.0,
                beta_atk: float = 0.01, gamma_atk: float = 0.5, center: float = -0.2) -> dict:
    """P4 stress test: every key is ``e_1``, ``v = 1``; returns ``‖S_t‖_F`` per ``x`` and the limiting write
    eigenvalue. Only row 1 of ``S`` is ever written, so ``‖S_t‖ = ‖S_t^T e_1‖ = ‖o_t‖`` with ``q = e_1``."""
    dt = torch.float64
    k = torch.zeros(1, steps, 1, K, dtype=dt)
    k[..., 0] = 1.0
    v = torch.ones(1, steps, 1, V, dtype=dt)
    b = torch.full((1, steps, 1), beta, dtype=dt)
    g_atk = torch.full_like(b, math.log(gamma_atk))
    b_atk = torch.full_like(b, beta_atk)
    out = {"norm": {}, "eig": {}}
    for x in x_values:
        o, _, _ = precond_delta_rule(k, k, v, b, None, g_atk, b_atk, center=center, x=x, mode="recurrent",
                                     normalize_qk=False, scale=1.0, allow_unstable=x > 2)
        out["norm"][x] = o[0, :, 0].norm(dim=-1)  # [steps]
        a_inf = beta_atk / (1 - gamma_atk)
        m_inf = squash_preconditioner(torch.tensor(a_inf, dtype=dt), center, x).item()
        out["eig"][x] = 1 - beta * m_inf  # λ_w at the fixed point of a
    return out


# ------------------------------------------------------------------------------------------------
# single-pass recall (NB3, part A)
# ------------------------------------------------------------------------------------------------

RECALL_METHODS = ("la", "dn", "pdn", "rls")


def single_pass_recall(k: Tensor, v: Tensor, method: str, beta: float = 0.5, x: float = 1.5, gamma: float = 0.95,
                       center: float | None = None, lam: float = 1e-3, normalize_m: bool = False) -> Tensor:
    """Write ``n`` pairs once, read every key back: accuracy per batch element ``[B]``.

    ``k``: ``[B,n,K]`` unit keys, ``v``: ``[B,n,V]`` unit values. A pair counts as recalled when its value is
    the stored value with the largest cosine to ``S^T k_i``. ``method``: ``'la'`` (``Σ k v^T``), ``'dn'``,
    ``'pdn'`` (EMA ``a ← γ a + (1−γ) k²``, centre ``log(1/K)`` by default) or ``'rls'``. ``normalize_m``
    (PDN only): divide ``m`` by its mean over coordinates at every token — the step-size control.
    """
    if method not in RECALL_METHODS:
        raise ValueError(f"method must be one of {RECALL_METHODS}, got {method!r}")
    if not isinstance(k, Tensor) or k.dim() != 3 or not isinstance(v, Tensor) or v.dim() != 3 \
            or v.shape[:2] != k.shape[:2]:
        raise ValueError("k must be [B,n,K] and v [B,n,V] with the same B and n")
    K = k.shape[-1]
    k4, v4 = k[:, :, None], v[:, :, None]
    b = torch.full(k4.shape[:3], float(beta), dtype=k.dtype, device=k.device)
    if method == "la":
        _, S = linear_attention(k4, k4, v4, output_final_state=True)
    elif method == "dn":
        _, S = delta_rule_chunk(k4, k4, v4, b, output_final_state=True)
    elif method == "pdn":
        m = ema_preconditioner(k4, gamma, x, math.log(1.0 / K) if center is None else center)
        if normalize_m:
            m = m / m.mean(-1, keepdim=True)
        _, S = delta_rule_chunk(k4, k4, v4, b, k_write=m * k4, output_final_state=True)
    else:
        _, S = rls_delta_rule(k4, k4, v4, b, None, lam)
    read = torch.einsum("bkv,bnk->bnv", S[:, 0], k)  # S^T k_i
    cos = torch.einsum("bnv,bmv->bnm", l2_normalize(read, eps=1e-12), v)  # against every stored value
    hit = cos.argmax(-1) == torch.arange(k.shape[1], device=k.device)
    return hit.to(k.dtype).mean(-1)


def recall_curves(ns, seeds: int, d_k: int = 32, d_v: int = 32, kappa: float = 20.0, betas=(0.5, 1.0),
                  seed: int = 0) -> pd.DataFrame:
    """Accuracy vs number of stored pairs for LA, DN, PDN (x = 1.5, 2) and RLS; axis-aligned and rotated."""
    rows = []
    for rotate in (False, True):
        for n in ns:
            gen = torch.Generator().manual_seed(seed + 7919 * n + (1 if rotate else 0))
            k, _ = anisotropic_keys(seeds, n, d_k, kappa, rotate, gen)
            v = l2_normalize(torch.randn(seeds, n, d_v, generator=gen, dtype=k.dtype), eps=0.0)
            for beta in betas:
                specs = [("linear attention", "la", {}), ("DeltaNet", "dn", {}), ("PDN x=1.5", "pdn", {"x": 1.5}),
                         ("PDN x=2", "pdn", {"x": 2.0}), ("PDN x=2, m mean 1", "pdn", {"x": 2.0, "normalize_m": True}),
                         ("RLS", "rls", {})]
                for label, method, kw in specs:
                    acc = single_pass_recall(k, v, method, beta=beta, **kw)
                    rows.append({"skew": "rotated" if rotate else "axis-aligned", "n": n, "beta": beta,
                                 "method": label, "acc": acc.mean().item(), "acc_std": acc.std().item()})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------
# MQAR (NB3, part B)
# ------------------------------------------------------------------------------------------------


def _check_mqar_sizes(n_pairs: int, vocab_size: int) -> None:
    _check_pos_int("n_pairs", n_pairs)
    _check_pos_int("vocab_size", vocab_size, low=4)
    half = vocab_size // 2
    if n_pairs >= half:
        raise ValueError(f"n_pairs must be < vocab_size // 2 = {half} (distinct keys from [1, {half})), got {n_pairs}")


def mqar_batch(batch_size: int, n_pairs: int, vocab_size: int = 128, generator: torch.Generator | None = None,
               key_zipf: float | None = None, device=None) -> tuple[Tensor, Tensor]:
    """Multi-query associative recall: ``n`` key–value pairs, then the keys again in a random order, each
    followed by its value. Keys come from ``[1, V/2)`` without replacement (Zipf-weighted if ``key_zipf``),
    values uniformly from ``[V/2, V)``. Returns ``(tokens [B,4n], targets [B,4n])``; targets are the paired
    value at query-key positions and ``-100`` elsewhere.
    """
    _check_pos_int("batch_size", batch_size)
    _check_mqar_sizes(n_pairs, vocab_size)
    half = vocab_size // 2
    if key_zipf is not None and key_zipf < 0:
        raise ValueError(f"key_zipf must be >= 0, got {key_zipf}")
    B, n = batch_size, n_pairs
    weights = torch.ones(B, half - 1)
    if key_zipf is not None:
        weights = weights * torch.arange(1, half, dtype=torch.float64).pow(-key_zipf).float()
    keys = torch.multinomial(weights, n, replacement=False, generator=generator) + 1  # [B,n] in [1, V/2)
    vals = torch.randint(half, vocab_size, (B, n), generator=generator)
    order = torch.rand(B, n, generator=generator).argsort(-1)
    ctx = torch.stack([keys, vals], -1).reshape(B, 2 * n)
    qk, qv = keys.gather(1, order), vals.gather(1, order)
    tokens = torch.cat([ctx, torch.stack([qk, qv], -1).reshape(B, 2 * n)], 1)
    targets = torch.full_like(tokens, -100)
    targets[:, 2 * n::2] = qv  # predict the value at each query-key position
    return tokens.to(device), targets.to(device)


MQAR_VARIANTS = {"linear": ("linear", False), "DN": ("deltanet", False), "PDN": ("deltanet", True),
                 "GDN": ("gdn", False), "PGDN": ("gdn", True), "KDA": ("kda", False), "PKDA": ("kda", True)}


def build_model(name: str, vocab_size: int = 128, d_model: int = 64, n_heads: int = 2, head_dim: int = 32,
                chunk_size: int = 16, seed: int = 0, device=None) -> TinyRecurrentLM:
    """A seeded :class:`TinyRecurrentLM` for a variant name in :data:`MQAR_VARIANTS`."""
    if name not in MQAR_VARIANTS:
        raise ValueError(f"name must be one of {tuple(MQAR_VARIANTS)}, got {name!r}")
    variant, precond = MQAR_VARIANTS[name]
    torch.manual_seed(seed)
    return TinyRecurrentLM(vocab_size, d_model=d_model, n_heads=n_heads, head_dim=head_dim, variant=variant,
                           precond=precond, chunk_size=chunk_size).to(device)


def train_mqar(model: TinyRecurrentLM, steps: int, batch_size: int = 32, n_pairs: int = 8, vocab_size: int = 128,
               lr: float = 3e-3, seed: int = 0, log_every: int = 50, key_zipf: float | None = None) -> dict:
    """AdamW (wd 0.01, none on gains/biases/centres) with a one-cycle schedule (10 % warm-up) on fresh MQAR
    batches. Returns ``{'step': [...], 'loss': [...]}`` (loss averaged over each logging window).

    One model, one step at a time: the reference for :func:`train_mqar_stacked`, which trains several
    seeds of a variant at once and is what :func:`mqar_benchmark` uses."""
    _check_pos_int("steps", steps)
    _check_pos_int("log_every", log_every)
    _check_mqar_sizes(n_pairs, vocab_size)
    dev = next(model.parameters()).device
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    gen = torch.Generator().manual_seed(seed)
    hist, window, n_win = {"step": [], "loss": []}, torch.zeros((), device=dev), 0
    model.train()
    for step in tqdm(range(1, steps + 1), desc="mqar", leave=False):
        tokens, targets = mqar_batch(batch_size, n_pairs, vocab_size, gen, key_zipf, dev)
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        window += loss.detach()  # stays on the device; one host sync per logging window
        n_win += 1
        if step % log_every == 0 or step == steps:
            hist["step"].append(step)
            hist["loss"].append((window / n_win).item())
            window.zero_()
            n_win = 0
    return hist


def _stacked(models):
    """``(base, params, buffers)``: the models' parameters stacked along a new leading dimension
    (``torch.func.stack_module_state``) and a weightless copy of the architecture to call them with."""
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    return base, params, buffers


def _stacked_forward(base, params, buffers, tokens: Tensor) -> Tensor:
    """Logits ``[M,B,T,V]`` of ``M`` same-architecture models on their own token batches ``[M,B,T]`` (one
    ``vmap``-ed call: the kernel count per step is that of one model, whatever ``M``)."""
    return vmap(lambda p, b, t: functional_call(base, (p, b), (t,)))(params, buffers, tokens)


def _per_model_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy over the query positions of each model's batch, ``[M]``."""
    M = logits.shape[0]
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 2), targets.flatten(), ignore_index=-100,
                                           reduction="none").view(M, -1)
    mask = (targets.view(M, -1) != -100).to(ce.dtype)
    return (ce * mask).sum(1) / mask.sum(1)


def train_mqar_stacked(models, steps: int, batch_size: int = 32, n_pairs: int = 8, vocab_size: int = 128,
                       lr: float = 3e-3, seeds=None, log_every: int = 50, key_zipf: float | None = None) -> list[dict]:
    """Train ``M`` same-architecture models (one variant, several seeds) *together*: parameters stacked,
    one ``vmap``-ed forward and backward per step, one AdamW over the stacked tensors (element-wise, so each
    model's update is its own), gradient clipping at 1 *per model*, per-model data streams seeded by
    ``seeds``. This is the same training as :func:`train_mqar` run once per model — to round-off — with
    ``M`` times fewer kernel launches. The loss stays on the device and is read once per logging window.
    The trained weights are copied back into ``models``. Returns one ``{'step', 'loss'}`` history per model.
    """
    _check_pos_int("steps", steps)
    _check_pos_int("log_every", log_every)
    models = list(models)
    if not models:
        raise ValueError("models must be a non-empty list of TinyRecurrentLM")
    seeds = list(range(len(models))) if seeds is None else list(seeds)
    if len(seeds) != len(models):
        raise ValueError(f"seeds must have one entry per model ({len(models)}), got {len(seeds)}")
    _check_mqar_sizes(n_pairs, vocab_size)
    if len(models) == 1:  # nothing to stack: the plain loop is the same training with less overhead
        return [train_mqar(models[0], steps, batch_size, n_pairs, vocab_size, lr, seeds[0], log_every, key_zipf)]
    dev = next(models[0].parameters()).device
    base, params, buffers = _stacked(models)
    decay = [p for p in params.values() if p.dim() >= 3]  # a matrix per model: weight decay
    no_decay = [p for p in params.values() if p.dim() < 3]  # gains, biases, centres, gate scalars
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, fused=dev.type == "cuda" or None)  # one fused kernel per step on a GPU
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    M = len(models)
    hists = [{"step": [], "loss": []} for _ in range(M)]
    window, n_win = torch.zeros(M, device=dev), 0
    plist = list(params.values())
    for step in tqdm(range(1, steps + 1), desc="mqar", leave=False):
        batches = [mqar_batch(batch_size, n_pairs, vocab_size, g, key_zipf) for g in gens]
        tokens = torch.stack([b[0] for b in batches]).to(dev, non_blocking=True)
        targets = torch.stack([b[1] for b in batches]).to(dev, non_blocking=True)
        loss = _per_model_loss(_stacked_forward(base, params, buffers, tokens), targets)  # [M]
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()  # each model's loss only reaches its own slice of the stacked parameters
        # clip_grad_norm_(max_norm=1) per model: norm over that model's slice of every parameter
        sq = torch.stack([p.grad.flatten(1).square().sum(1) for p in plist]).sum(0)  # [M]
        coef = (1.0 / (sq.sqrt() + 1e-6)).clamp(max=1.0)
        torch._foreach_mul_([p.grad for p in plist], [coef.view(-1, *([1] * (p.dim() - 1))) for p in plist])
        opt.step()
        sched.step()
        window += loss.detach()
        n_win += 1
        if step % log_every == 0 or step == steps:
            mean = (window / n_win).tolist()  # the only host sync of the window
            for h, val in zip(hists, mean):
                h["step"].append(step)
                h["loss"].append(val)
            window.zero_()
            n_win = 0
    with torch.no_grad():
        for i, model in enumerate(models):
            for name, p in model.named_parameters():
                p.copy_(params[name][i])
    return hists


@torch.no_grad()
def evaluate_mqar(model: TinyRecurrentLM, n_pairs: int, vocab_size: int = 128, n_samples: int = 512,
                  seed: int = 999, key_zipf: float | None = None) -> float:
    """Query accuracy (argmax = paired value) on ``n_samples`` fresh sequences."""
    dev = next(model.parameters()).device
    model.eval()
    tokens, targets = mqar_batch(n_samples, n_pairs, vocab_size, torch.Generator().manual_seed(seed), key_zipf, dev)
    pred = model(tokens).argmax(-1)
    mask = targets != -100
    return (pred[mask] == targets[mask]).float().mean().item()


def mqar_benchmark(variants, steps: int, n_pairs: int, seeds=(0,), batch_size: int = 32, vocab_size: int = 128,
                   d_model: int = 64, n_heads: int = 2, head_dim: int = 32, chunk_size: int = 16, lr: float = 3e-3,
                   device=None, log_every: int = 50) -> dict:
    """Train and evaluate every variant for every seed; the seeds of a variant train together
    (:func:`train_mqar_stacked`). Sizes are validated before any training starts. Returns
    ``{'results': DataFrame, 'curves': {(name, seed): hist}, 'models': {(name, seed): model}}``."""
    _check_mqar_sizes(n_pairs, vocab_size)
    _check_pos_int("steps", steps)
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("seeds must not be empty")
    for name in variants:
        if name not in MQAR_VARIANTS:
            raise ValueError(f"variants must be names in {tuple(MQAR_VARIANTS)}, got {name!r}")
    rows, curves, models = [], {}, {}
    for name in variants:
        group = [build_model(name, vocab_size, d_model, n_heads, head_dim, chunk_size, seed=s, device=device)
                 for s in seeds]
        t0 = time.process_time()
        hists = train_mqar_stacked(group, steps, batch_size, n_pairs, vocab_size, lr, seeds=seeds,
                                   log_every=log_every)
        cpu = (time.process_time() - t0) / len(seeds)
        for s, model, hist in zip(seeds, group, hists):
            acc = evaluate_mqar(model, n_pairs, vocab_size)
            rows.append({"variant": name, "seed": s, "n_pairs": n_pairs, "acc": acc,
                         "params": sum(p.numel() for p in model.parameters()), "cpu_s": cpu})
            curves[(name, s)] = hist
            models[(name, s)] = model
    return {"results": pd.DataFrame(rows), "curves": curves, "models": models}


def eigen_samples(T: int, x_values=(1.5, 3.0), B: int = 4, H: int = 2, K: int = 32, center: float = -0.2,
                  seed: int = 0) -> dict:
    """Write eigenvalues ``1 − β ⟨k, m ⊙ k⟩`` (P4) on random gated inputs: plain GDN (``m = 1``) and the
    preconditioned write for each ``x``. Keys are L2-normalised, ``β = σ(z)``, the preconditioner gate
    ``g^atk = log σ(z + 2)``, ``β^atk = σ(z)``."""
    inp = random_inputs(B, T, H, K, 1, "scalar", seed=seed)
    k = l2_normalize(inp["k"])
    a, _ = atk_state(k, inp["g_atk"], inp["beta_atk"], chunk_size=64)
    out = {"GDN (m = 1)": write_eigenvalues(k, inp["beta"])}
    for x in x_values:
        m = squash_preconditioner(a, center=center, x=x)
        out[f"PGDN x={x:g}"] = write_eigenvalues(k, inp["beta"], m)
    return out


def nonnormal_writes(x: float = 1.5, beta: float = 1.0, steps: int = 60, n_angles: int = 4001,
                     shrink: float = 0.999) -> dict:
    """P4 beyond eigenvalues, in ``K = 2`` with ``m ∈ {(x', 1/x'), (1/x', x')}``, ``x' = shrink·x`` (inside the
    squash's range). The write ``A = I − β Diag(m) k k^T`` is not normal, so its *spectral norm* can exceed 1
    although both eigenvalues lie in ``[−1, 1]``. Returns ``{'max_norm': max_k ‖A‖_2 (fixed m),
    'max_weighted_norm': max_k ‖D^{-1/2} A D^{1/2}‖_2 (fixed m; = max(1, |λ_w|)), 'max_abs_eig',
    'growth': ‖s_T‖/‖s_0‖ for a greedy adversarial sequence of keys and multipliers (m switching between
    the two choices, a unit key at the worst of ``n_angles`` angles each step)}``."""
    _check_pos_int("steps", steps)
    _check_pos_int("n_angles", n_angles, low=2)
    if not (1.0 <= x) or not (0 < beta):
        raise ValueError(f"need x >= 1 and beta > 0, got x={x}, beta={beta}")
    dt = torch.float64
    th = torch.linspace(0, math.pi, n_angles, dtype=dt)
    k = torch.stack([th.cos(), th.sin()], -1)  # [N,2] unit keys
    xs = shrink * x
    ms = torch.tensor([[xs, 1 / xs], [1 / xs, xs]], dtype=dt)  # two multiplier vectors
    eye = torch.eye(2, dtype=dt)
    A = eye - beta * (ms[:, None, :] * k[None])[..., :, None] * k[None, :, None, :]  # [2,N,2,2]
    Dh = ms.sqrt()[:, None, :]  # D^{1/2}
    Aw = A * Dh[..., None, :] / Dh[..., :, None]  # D^{-1/2} A D^{1/2}
    s = torch.tensor([1.0, 0.0], dtype=dt)
    for _ in range(steps):
        cand = (A @ s).flatten(0, 1)  # every (m, k) choice applied to the current state
        s = cand[cand.norm(dim=-1).argmax()]
    return {"max_norm": torch.linalg.matrix_norm(A, ord=2).max().item(),
            "max_weighted_norm": torch.linalg.matrix_norm(Aw, ord=2).max().item(),
            "max_abs_eig": torch.linalg.eigvals(A).abs().max().item(), "growth": s.norm().item()}
