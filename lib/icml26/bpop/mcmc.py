"""Posterior inference for BPOP (spec Sec. 3.3): Metropolis-Hastings over (U, rho, beta), chains batched.

Every chain (and, through per-chain data, every data set) advances in lock-step: one iteration draws a
move type per chain with the authors' dimension-proportional weights (U-row: n, rho: 2, beta: 2),
builds all proposals at once, evaluates all proposed likelihoods with one call of
:func:`~icml26.bpop.method.batched_log_likelihood`, and accepts with a per-chain mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import norm
from tqdm.auto import tqdm

from .method import (
    UTILITIES,
    PartialOrder,
    _batched_core,
    _check_count,
    _check_device,
    _check_prob,
    _check_real,
    check_complete_traces,
    dominance,
    queue_jump_log_likelihood,
    remaining_tensor,
)


@dataclass
class MCMCConfig:
    """MCMC settings (spec Sec. 3.3; book defaults).

    Where the book departs from the authors' sampler: the U-row step is ``U_i + step_U z`` with
    ``z ~ N(0, Sigma_rho)``, i.e. covariance ``step_U^2 Sigma_rho``, and ``step_U = 0.5`` (the authors
    use 1.0); chains start from the realiser (``init="realizer"``, the authors from a prior draw) with
    ``rho`` and ``beta`` fixed at :data:`RHO_INIT` and :data:`BETA_INIT`; the ``rho`` prior is truncated
    to ``rho < 1 - RHO_TOL``.
    """

    K: int = 3
    n_iter: int = 20000
    burn_in: float = 0.5
    thin: int = 10
    n_chains: int = 2
    eps: float = 0.05
    step_U: float = 0.5
    rho_d: float = 0.9
    beta_step: float = 0.3
    rho_prior_b: float = 1 / 6
    beta_prior: tuple[float, float] = (2.0, 2.0)
    init: str = "realizer"            # realizer | prior
    utility: str = "log_successors"   # log_successors | uniform (BPOP-uniform ablation)
    likelihood: str = "bpop"          # bpop | queue_jump
    seed: int = 0
    device: str = "cpu"
    keep_closures: bool = False
    dtype: str = "float64"           # float32 halves the cost; float64 is exact to the reference loop

    def __post_init__(self):
        self.validate()

    def validate(self) -> MCMCConfig:
        """Refuse a field of the wrong type or outside its range (ValueError/TypeError naming it), and a
        run that would keep no sample after burn-in and thinning."""
        for name in ("K", "n_iter", "thin", "n_chains"):
            _check_count(name, getattr(self, name))
        _check_count("seed", self.seed, lo=0)
        _check_prob("burn_in", self.burn_in)
        _check_prob("eps", self.eps)
        if not 0 < _check_real("rho_d", self.rho_d) < 1:
            raise ValueError(f"rho_d must lie in (0, 1), got {self.rho_d}")
        for name in ("step_U", "beta_step", "rho_prior_b"):
            _check_real(name, getattr(self, name), lo=0.0, strict=True)
        bp = self.beta_prior
        if isinstance(bp, (str, bytes)) or not hasattr(bp, "__len__") or len(bp) != 2:
            raise TypeError(f"beta_prior must be a (shape, rate) pair, got {bp!r}")
        _check_real("beta_prior[0] (shape)", bp[0], lo=0.0, strict=True)
        _check_real("beta_prior[1] (rate)", bp[1], lo=0.0, strict=True)
        for name, options in (("init", ("realizer", "prior")), ("utility", UTILITIES),
                              ("dtype", ("float32", "float64")), ("likelihood", ("bpop", "queue_jump"))):
            if getattr(self, name) not in options:
                raise ValueError(f"{name} must be one of {options}, got {getattr(self, name)!r}")
        if not isinstance(self.keep_closures, bool):
            raise TypeError(f"keep_closures must be a bool, got {type(self.keep_closures).__name__}")
        _check_device(self.device, "device")
        if self.n_saved_post_burn() < 1:
            raise ValueError(f"no sample survives burn-in and thinning: n_iter={self.n_iter}, burn_in={self.burn_in}, "
                             f"thin={self.thin} keep 0 samples (need n_iter * (1 - burn_in) >= thin)")
        return self

    def n_saved_post_burn(self) -> int:
        """Thinned samples after burn-in: iterations k (0-based) with (k + 1) % thin == 0 and k >= burn,
        i.e. the multiples of ``thin`` in (burn, n_iter]."""
        burn = int(self.burn_in * self.n_iter)
        return self.n_iter // self.thin - burn // self.thin


@dataclass
class Posterior:
    """MCMC output for one data set (chains pooled)."""

    edge_prob: np.ndarray            # (n, n) P(i before j | Y)
    loglik: np.ndarray               # (n_chains, n_saved) thinned log-likelihood traces (whole run)
    beta: np.ndarray                 # (n_chains, n_saved)
    rho: np.ndarray                  # (n_chains, n_saved)
    accept_rate: dict
    closures: np.ndarray | None = None   # (S, n, n) thinned post-burn-in samples (if kept)


RHO_TOL = 1e-4     # the Beta(1, 1/6) prior on rho is truncated to rho < 1 - RHO_TOL (Sigma_rho stays invertible)
TOL = RHO_TOL
RHO_INIT = 0.5     # every chain starts at rho = RHO_INIT and beta = BETA_INIT (not drawn from the priors)
BETA_INIT = 1.0


def log_prior_U(U: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """sum_j log N(U_j; 0, Sigma_rho), Sigma_rho = (1-rho) I + rho 11^T (Sec. 3.1). U (c,n,K), rho (c,)."""
    K = U.shape[-1]
    r = rho[:, None]
    sq = (U ** 2).sum(-1)
    s = U.sum(-1)
    quad = (sq - r / (1 + (K - 1) * r) * s ** 2) / (1 - r)
    logdet = (K - 1) * torch.log1p(-rho) + torch.log1p((K - 1) * rho)
    n = U.shape[1]
    return -0.5 * quad.sum(-1) - 0.5 * n * logdet - 0.5 * n * K * math.log(2 * math.pi)


def realizer_init(traces: np.ndarray, K: int, rng: np.random.Generator) -> np.ndarray:
    """Book choice: U[:, k] = Phi^{-1}(1 - (pos_k(a) + 1/2) / n) for K random traces (Sec. 3.3)."""
    m, n = traces.shape
    pick = rng.choice(m, size=K, replace=m < K)
    U = np.empty((n, K))
    for k, i in enumerate(pick):
        pos = np.empty(n)
        pos[traces[i]] = np.arange(n)
        U[:, k] = norm.ppf(1 - (pos + 0.5) / n)
    return U


def _qj_loglik_fn(datasets, p, n, dtype):
    caches: dict = {}

    def f(closures: torch.Tensor, owner: np.ndarray) -> torch.Tensor:
        out = []
        for c, d in zip(closures.cpu().numpy(), owner, strict=True):
            key = (int(d), c.tobytes())
            if key not in caches:
                po = PartialOrder(None, c)
                cnt: dict = {}
                caches[key] = sum(queue_jump_log_likelihood(y, po, p, max_n=n, cache=cnt) for y in datasets[d])
            out.append(caches[key])
        return torch.tensor(out, dtype=dtype, device=closures.device)

    return f


def run_mcmc_many(datasets, n_actions: int, cfg: MCMCConfig, progress: bool = True) -> list[Posterior]:
    """Run ``cfg.n_chains`` chains on each data set, all chains batched (Sec. 3.3).

    ``datasets``: list of complete-trace arrays ``(m_d, n)``; shorter ones are padded with weight-0
    traces so every chain shares one tensor shape (the GPU path).
    """
    cfg = MCMCConfig(**vars(cfg)).validate() if isinstance(cfg, MCMCConfig) else None
    if cfg is None:
        raise TypeError("cfg must be an MCMCConfig")
    if isinstance(datasets, np.ndarray) or not isinstance(datasets, (list, tuple)) or len(datasets) == 0:
        raise ValueError("datasets must be a non-empty list of trace arrays")
    n = _check_count("n_actions", n_actions)
    data = [check_complete_traces(d, n) for d in datasets]
    D, nc, K = len(data), cfg.n_chains, cfg.K
    C = D * nc
    dev = torch.device(cfg.device)
    dt = getattr(torch, cfg.dtype)
    rng = np.random.default_rng(cfg.seed)
    gen = torch.Generator(device="cpu").manual_seed(cfg.seed)
    m_max = max(len(d) for d in data)
    owner = np.repeat(np.arange(D), nc)
    # data tensors: per-chain remaining tensors (c, n, m, n), chosen (c, n, m), weights (c, m)
    Rs, Ch, W = [], [], []
    for d in data:
        pad = np.concatenate([d, np.repeat(d[:1], m_max - len(d), 0)]) if len(d) < m_max else d
        Rs.append(remaining_tensor(pad, n, dtype=dt))
        Ch.append(torch.as_tensor(pad.T.copy()))
        W.append(torch.cat([torch.ones(len(d)), torch.zeros(m_max - len(d))]).to(dt))
    R = torch.stack(Rs)[owner].to(dev) if D > 1 else Rs[0].to(dev)
    chosen = torch.stack(Ch)[owner].to(dev) if D > 1 else Ch[0].to(dev)
    weights = torch.stack(W)[owner].to(dev) if D > 1 else None

    if cfg.likelihood == "bpop":
        def loglik(Cl, beta):
            return _batched_core(R, Cl, beta, cfg.eps, chosen, cfg.utility, weights)
    else:
        qj = _qj_loglik_fn(data, cfg.eps, n, dt)

        def loglik(Cl, beta):
            return qj(Cl, owner)

    # initial state
    if cfg.init == "realizer":
        U0 = np.stack([realizer_init(data[d], K, rng) for d in owner])
    else:
        g = rng.standard_normal((C, n, K))
        U0 = math.sqrt(0.5) * g + math.sqrt(0.5) * rng.standard_normal((C, n, 1))
    U = torch.as_tensor(U0, dtype=dt, device=dev)
    rho = torch.full((C,), RHO_INIT, dtype=dt, device=dev)
    beta = torch.full((C,), BETA_INIT, dtype=dt, device=dev)
    ll = loglik(dominance(U), beta)
    lpU = log_prior_U(U, rho)
    a_beta, b_beta = cfg.beta_prior
    bprior = cfg.rho_prior_b

    def lp_rho(r):
        return (bprior - 1) * torch.log1p(-r)

    def lp_beta(b):
        return (a_beta - 1) * torch.log(b) - b_beta * b

    burn = int(cfg.burn_in * cfg.n_iter)
    n_saved = cfg.n_iter // cfg.thin
    tr_ll = np.empty((C, n_saved))
    tr_beta = np.empty((C, n_saved))
    tr_rho = np.empty((C, n_saved))
    edge_sum = torch.zeros(C, n, n, dtype=dt, device=dev)
    n_post = 0
    kept = []
    acc = torch.zeros(3, dtype=dt, device=dev)
    tried = torch.zeros(3, dtype=dt, device=dev)
    wts = torch.tensor([n, 2.0, 2.0], dtype=dt)
    block = 500
    ar = torch.arange(C, device=dev)
    it = 0
    bar = tqdm(total=cfg.n_iter, leave=False, disable=not progress, desc="mcmc")
    while it < cfg.n_iter:
        b = min(block, cfg.n_iter - it)
        mv = torch.multinomial(wts, b * C, replacement=True, generator=gen).view(b, C).to(dev)
        rows = torch.randint(0, n, (b, C), generator=gen).to(dev)
        z = torch.randn(b, C, K, generator=gen, dtype=dt).to(dev)
        z0 = torch.randn(b, C, 1, generator=gen, dtype=dt).to(dev)
        delta = (cfg.rho_d + (1 / cfg.rho_d - cfg.rho_d) * torch.rand(b, C, generator=gen, dtype=dt)).to(dev)
        xi = torch.randn(b, C, generator=gen, dtype=dt).to(dev)
        logu = torch.log(torch.rand(b, C, generator=gen, dtype=dt)).to(dev)
        for s in range(b):
            t = mv[s]
            isU, isR, isB = t == 0, t == 1, t == 2
            # U-row move: U'_i = U_i + s_U z, z ~ N(0, Sigma_rho)
            step = cfg.step_U * (torch.sqrt(1 - rho)[:, None] * z[s] + torch.sqrt(rho)[:, None] * z0[s])
            rowmask = torch.zeros(C, n, 1, dtype=dt, device=dev)
            rowmask[ar, rows[s], 0] = isU.to(dt)
            U_new = U + rowmask * step[:, None, :]
            # rho move: rho' = 1 - (1 - rho) delta
            rho_new = torch.where(isR, 1 - (1 - rho) * delta[s], rho)
            rho_ok = (rho_new > 0) & (rho_new < 1 - TOL)
            rho_safe = torch.where(rho_ok, rho_new, rho)
            # beta move: log beta' = log beta + 0.3 xi
            beta_new = torch.where(isB, beta * torch.exp(cfg.beta_step * xi[s]), beta)
            Cl_new = dominance(U_new)
            ll_new = loglik(Cl_new, beta_new)
            lpU_new = log_prior_U(U_new, rho_safe)
            log_a = torch.where(isU, ll_new - ll + lpU_new - lpU, torch.zeros_like(ll))
            log_a = torch.where(isR, lpU_new - lpU + lp_rho(rho_safe) - lp_rho(rho) - torch.log(delta[s]), log_a)
            log_a = torch.where(isB, ll_new - ll + lp_beta(beta_new) - lp_beta(beta)
                                + torch.log(beta_new) - torch.log(beta), log_a)
            accept = (logu[s] < log_a) & (~isR | rho_ok)
            U = torch.where(accept[:, None, None], U_new, U)
            rho = torch.where(accept, rho_safe, rho)
            beta = torch.where(accept, beta_new, beta)
            ll = torch.where(accept, ll_new, ll)
            lpU = torch.where(accept, lpU_new, lpU)
            acc += torch.stack([(accept & isU).sum(), (accept & isR).sum(), (accept & isB).sum()]).to(dt)
            tried += torch.stack([isU.sum(), isR.sum(), isB.sum()]).to(dt)
            k = it + s
            if (k + 1) % cfg.thin == 0:
                j = (k + 1) // cfg.thin - 1
                tr_ll[:, j] = ll.cpu().numpy()
                tr_beta[:, j] = beta.cpu().numpy()
                tr_rho[:, j] = rho.cpu().numpy()
                if k >= burn:
                    cl = dominance(U)
                    edge_sum += cl.to(dt)
                    n_post += 1
                    if cfg.keep_closures:
                        kept.append(cl.cpu().numpy())
        it += b
        bar.update(b)
    bar.close()
    rates = (acc / tried.clamp(min=1)).cpu().numpy()
    acc_rate = {"U": float(rates[0]), "rho": float(rates[1]), "beta": float(rates[2])}
    ep = (edge_sum / max(n_post, 1)).cpu().numpy()
    out = []
    for d in range(D):
        sl = slice(d * nc, (d + 1) * nc)
        cls_ = np.concatenate([k_[sl] for k_ in kept]) if kept else None
        out.append(Posterior(edge_prob=ep[sl].mean(0), loglik=tr_ll[sl], beta=tr_beta[sl], rho=tr_rho[sl],
                             accept_rate=acc_rate, closures=cls_))
    return out


def run_mcmc(traces, n_actions: int, cfg: MCMCConfig, progress: bool = True) -> Posterior:
    """BPOP posterior for one data set (``cfg.n_chains`` batched chains)."""
    return run_mcmc_many([traces], n_actions, cfg, progress)[0]
