"""A tiny transformer that learns linear regression in context (spec Sec. 7, the book's stand-in for an LLM).

Tokens: one per demonstration pair, ``[x_i, y_i, 1]``; one per query, ``[x_q, 0, 0]``. No positional
encodings. Demonstration tokens attend causally to earlier demonstrations (this produces a key/value
cache, as an LLM's prompt does); every query attends to an allowed subset of the cache
(``prefix_mask``) and to itself, never to other queries. In pretraining, query ``j`` is ``x_j``
re-presented and may see demonstrations ``1..j-1``, so one pass trains every prefix length.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from ..core.checks import check_device  # noqa: F401

KV = list[tuple[Tensor, Tensor]]


# ----------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class ICLTaskConfig:
    """A family of linear-regression tasks: ``w ~ N(0, w_scale^2 I)``, ``x ~ N(0, x_scale^2 I)``,
    ``y = w.x / sqrt(dim) + noise * eps``."""

    dim: int = 8
    max_demos: int = 24
    noise: float = 0.1
    x_scale: float = 1.0
    w_scale: float = 1.0

    def __post_init__(self):
        for name in ("dim", "max_demos"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        for name in ("noise", "x_scale", "w_scale"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if self.noise < 0:
            raise ValueError(f"noise must be >= 0, got {self.noise}")
        if self.x_scale <= 0 or self.w_scale <= 0:
            raise ValueError(f"x_scale and w_scale must be > 0, got {self.x_scale}, {self.w_scale}")

    @property
    def ridge_lambda(self) -> float:
        """The Bayes-optimal ridge penalty for this family (posterior mean under the Gaussian prior)."""
        return max(self.noise**2 / self.w_scale**2, 1e-8)


def _count(name: str, v, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")
    return v


def sample_tasks(n_tasks: int, n_demos: int, n_queries: int, cfg: ICLTaskConfig,
                 generator: torch.Generator | None = None, device="cpu") -> dict[str, Tensor]:
    """Draw ``n_tasks`` tasks; returns ``x_demo [B,k,D]``, ``y_demo [B,k]``, ``x_query [B,q,D]``,
    ``y_query [B,q]``, ``w [B,D]`` (drawn on the CPU from ``generator``, then moved to ``device``)."""
    _count("n_tasks", n_tasks)
    _count("n_demos", n_demos, 0)
    _count("n_queries", n_queries, 0)
    if not isinstance(cfg, ICLTaskConfig):
        raise TypeError(f"cfg must be an ICLTaskConfig, got {type(cfg).__name__}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    check_device(device)
    g = generator
    B, k, q, D = n_tasks, n_demos, n_queries, cfg.dim
    w = cfg.w_scale * torch.randn(B, D, generator=g)
    x = cfg.x_scale * torch.randn(B, k + q, D, generator=g)
    y = torch.einsum("bnd,bd->bn", x, w) / math.sqrt(D) + cfg.noise * torch.randn(B, k + q, generator=g)
    out = dict(x_demo=x[:, :k], y_demo=y[:, :k], x_query=x[:, k:], y_query=y[:, k:], w=w)
    return {n: t.contiguous().to(device) for n, t in out.items()}


def demo_tokens(x: Tensor, y: Tensor) -> Tensor:
    """Demonstration tokens ``[x, y, 1]``: ``x [B,k,D]``, ``y [B,k]`` -> ``[B,k,D+2]``."""
    return torch.cat([x, y.unsqueeze(-1), torch.ones_like(y).unsqueeze(-1)], dim=-1)


def query_tokens(x: Tensor) -> Tensor:
    """Query tokens ``[x, 0, 0]``: ``x [B,q,D]`` -> ``[B,q,D+2]``."""
    return torch.cat([x, x.new_zeros(*x.shape[:-1], 2)], dim=-1)


def model_dtype(model) -> torch.dtype:
    """The floating dtype of a model's weights (float32 unless it was cast)."""
    for p in model.parameters():
        return p.dtype
    return torch.get_default_dtype()


def check_demos(x_demo, y_demo, dim: int | None = None, x_query=None, name: str = "x_demo",
                dtype: torch.dtype | None = None) -> None:
    """Raise ``ValueError``/``TypeError`` unless ``x_demo [B,k,D]``, ``y_demo [B,k]`` (and ``x_query [B,q,D]``)
    are consistent finite floating tensors of one dtype (``dtype``, the model's, when given: float64
    demonstrations for a float32 model are refused here rather than failing inside a matmul) and ``D``
    matches ``dim``."""
    named = ((name, x_demo), ("y_demo", y_demo)) + ((("x_query", x_query),) if x_query is not None else ())
    for n, t in named:
        if not isinstance(t, Tensor):
            raise TypeError(f"{n} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"{n} must be float32 or float64, got {t.dtype}")
        if t.numel() and not torch.isfinite(t).all():
            raise ValueError(f"{n} must be finite")
    want = x_demo.dtype if dtype is None else dtype
    for n, t in named:
        if t.dtype != want:
            whose = "the model's weights are" if dtype is not None else f"{name} is"
            raise TypeError(f"{n} is {t.dtype} but {whose} {want}; cast the inputs with .to({want})")
    if x_demo.dim() != 3 or x_demo.shape[1] < 1 or x_demo.shape[0] < 1 or x_demo.shape[2] < 1:
        raise ValueError(f"{name} must be [B,k,D] with B, k, D >= 1, got shape {tuple(x_demo.shape)}")
    if y_demo.shape != x_demo.shape[:2]:
        raise ValueError(f"y_demo must be [B,k] = {tuple(x_demo.shape[:2])} to match {name}, got {tuple(y_demo.shape)}")
    if dim is not None and x_demo.shape[2] != dim:
        raise ValueError(f"{name} has D={x_demo.shape[2]} but the model's dim is {dim}")
    if x_query is not None:
        if x_query.dim() != 3 or x_query.shape[0] != x_demo.shape[0] or x_query.shape[2] != x_demo.shape[2]:
            raise ValueError(f"x_query must be [B,q,D] = [{x_demo.shape[0]},q,{x_demo.shape[2]}], "
                             f"got {tuple(x_query.shape)}")


def check_queries(x_query, y_query, batch: int, dim: int, dtype: torch.dtype | None = None) -> None:
    """``x_query [B,q,D]`` and ``y_query [B,q]`` exactly (no broadcasting of one task's targets
    across tasks), finite, of the model's dtype."""
    for n, t in (("x_query", x_query), ("y_query", y_query)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{n} must be a torch.Tensor, got {type(t).__name__}")
        if t.dtype not in (torch.float32, torch.float64) or (dtype is not None and t.dtype != dtype):
            raise TypeError(f"{n} must be {dtype or 'float32 or float64'}, got {t.dtype}")
        if t.numel() and not torch.isfinite(t).all():
            raise ValueError(f"{n} must be finite")
    if x_query.dim() != 3 or x_query.shape[0] != batch or x_query.shape[2] != dim or x_query.shape[1] < 1:
        raise ValueError(f"x_query must be [B,q,D] = [{batch},q,{dim}] with q >= 1, got {tuple(x_query.shape)}")
    if y_query.shape != x_query.shape[:2]:
        raise ValueError(f"y_query must be [B,q] = {tuple(x_query.shape[:2])}, got {tuple(y_query.shape)}")


# ----------------------------------------------------------------------------------------- model
def attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor) -> tuple[Tensor, Tensor]:
    """Masked softmax attention. ``q [..,Tq,dh]``, ``k, v [..,Tk,dh]``, ``allowed`` bool broadcastable to
    ``[..,Tq,Tk]``. Masked logits are ``-inf`` (not zeroed keys), so their weights are exactly 0."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    return w @ v, w


class Block(nn.Module):
    """Pre-LayerNorm transformer block (attention + GELU MLP)."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp_ratio * d_model), nn.GELU(),
                                 nn.Linear(mlp_ratio * d_model, d_model))

    def heads(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``h [B,T,d]`` -> ``q, k, v`` each ``[B,H,T,d_h]`` (after the first LayerNorm)."""
        B, T, d = h.shape
        qkv = self.qkv(self.ln1(h)).view(B, T, 3, self.n_heads, d // self.n_heads)
        return tuple(qkv.permute(2, 0, 3, 1, 4).unbind(0))

    def finish(self, h: Tensor, out: Tensor) -> Tensor:
        """Residual update from the attention output ``out [B,H,T,d_h]``, then the MLP."""
        B, H, T, dh = out.shape
        h = h + self.proj(out.transpose(1, 2).reshape(B, T, H * dh))
        return h + self.mlp(self.ln2(h))


class TinyICLTransformer(nn.Module):
    """The in-context regressor: ``n_layers`` pre-LN blocks of width ``d_model``, no positions."""

    def __init__(self, dim: int = 8, d_model: int = 64, n_layers: int = 4, n_heads: int = 4,
                 mlp_ratio: int = 4, max_demos: int = 24):
        super().__init__()
        for n, v in dict(dim=dim, d_model=d_model, n_layers=n_layers, n_heads=n_heads, mlp_ratio=mlp_ratio,
                         max_demos=max_demos).items():
            _count(n, v)
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.config = dict(dim=dim, d_model=d_model, n_layers=n_layers, n_heads=n_heads, mlp_ratio=mlp_ratio,
                           max_demos=max_demos)
        self.dim, self.n_layers, self.n_heads, self.max_demos = dim, n_layers, n_heads, max_demos
        self.d_head = d_model // n_heads
        self.embed = nn.Linear(dim + 2, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, mlp_ratio) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, 1)

    # -- the demonstrations: a causal pass that returns the per-layer cache --------------------------
    def encode_demos(self, demo_tok: Tensor, demo_mask: Tensor | None = None) -> KV:
        """Causal pass over demonstration tokens ``[B,k,D+2]``; returns per-layer ``(K, V)``, each
        ``[B,H,k,d_h]``. ``demo_mask [B or 1,k,k]`` (bool, True = may attend) further restricts the causal
        pattern; a token always sees itself."""
        return self.encode_demos_from_embeddings(self.embed(demo_tok), demo_mask)

    def encode_demos_from_embeddings(self, h: Tensor, attn_mask: Tensor | None = None) -> KV:
        """The same pass from input embeddings ``h [B,k,d]`` (what CT-Prompt and Prompt Tuning train)."""
        k = h.shape[1]
        allowed = torch.ones(k, k, dtype=torch.bool, device=h.device).tril()
        if attn_mask is not None:
            allowed = (allowed & attn_mask) | torch.eye(k, dtype=torch.bool, device=h.device)
        allowed = allowed.unsqueeze(-3)  # broadcast over heads
        kv = []
        for i, blk in enumerate(self.blocks):
            q, kk, v = blk.heads(h)
            kv.append((kk, v))
            if i + 1 < self.n_layers:  # the last layer's demo outputs are never read
                h = blk.finish(h, attend(q, kk, v, allowed)[0])
        return kv

    # -- the queries: attend to the allowed cache positions and to themselves ------------------------
    def predict(self, kv: KV, query_tok: Tensor, prefix_mask: Tensor | None = None,
                return_attn: bool = False):
        """Predictions ``[B,q]`` for query tokens ``[B,q,D+2]`` given the cache ``kv`` (per layer
        ``[B,H,N,d_h]``). ``prefix_mask [B,q,N]`` (bool, True = may attend; default all) selects cache
        positions per query; each query also attends to itself, so no row is empty and the softmax is
        always defined. With ``return_attn``, also the per-layer weights on the cache ``[B,H,q,N]``."""
        check_kv(self, kv, query_tok.shape[0])
        B, q, _ = query_tok.shape
        N = kv[0][0].shape[-2]
        if prefix_mask is None:
            prefix_mask = torch.ones(B, q, N, dtype=torch.bool, device=query_tok.device)
        elif prefix_mask.shape != (B, q, N) or prefix_mask.dtype != torch.bool:
            raise ValueError(f"prefix_mask must be a bool tensor of shape {(B, q, N)}, "
                             f"got {prefix_mask.dtype} {tuple(prefix_mask.shape)}")
        allowed = torch.cat([prefix_mask, prefix_mask.new_ones(B, q, 1)], dim=-1).unsqueeze(1)
        h = self.embed(query_tok)
        attn = []
        for blk, (K, V) in zip(self.blocks, kv):
            Q, Kq, Vq = blk.heads(h)
            s_pre = Q @ K.transpose(-1, -2)                       # [B,H,q,N]
            s_self = (Q * Kq).sum(-1, keepdim=True)               # [B,H,q,1]
            s = torch.cat([s_pre, s_self], -1) / math.sqrt(self.d_head)
            w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
            out = w[..., :N] @ V + w[..., N:] * Vq
            attn.append(w[..., :N])
            h = blk.finish(h, out)
        pred = self.head(self.ln_f(h)).squeeze(-1)
        return (pred, attn) if return_attn else pred

    def forward(self, *args, mode: str = "icl"):
        """One entry point for ``torch.func.functional_call`` (used to run per-task weights):
        ``mode="icl"``: ``(demo_tok, query_tok, prefix_mask=None, demo_mask=None)`` -> predictions
        (encode the demonstrations, then predict the queries); ``mode="encode"``: the arguments of
        :meth:`encode_demos`; ``mode="predict"``: those of :meth:`predict`."""
        if mode == "encode":
            return self.encode_demos(*args)
        if mode == "predict":
            return self.predict(*args)
        if mode != "icl":
            raise ValueError(f"mode must be 'icl', 'encode' or 'predict', got {mode!r}")
        demo_tok, query_tok, prefix_mask, demo_mask = (list(args) + [None, None])[:4]
        return self.predict(self.encode_demos(demo_tok, demo_mask), query_tok, prefix_mask)


def check_kv(model, kv, batch: int | None = None) -> None:
    """Raise ``ValueError`` unless ``kv`` is a list of ``n_layers`` pairs of ``[B,H,N,d_h]`` tensors."""
    if not isinstance(kv, (list, tuple)) or len(kv) != model.n_layers:
        raise ValueError(f"kv must be a list of {model.n_layers} (K, V) pairs, got "
                         f"{type(kv).__name__} of length {len(kv) if hasattr(kv, '__len__') else '?'}")
    shape = None
    for i, pair in enumerate(kv):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(isinstance(t, Tensor) for t in pair):
            raise ValueError(f"kv[{i}] must be a (K, V) pair of tensors")
        for t in pair:
            if t.dim() != 4 or t.shape[1] != model.n_heads or t.shape[3] != model.d_head:
                raise ValueError(f"kv[{i}] tensors must be [B,{model.n_heads},N,{model.d_head}], "
                                 f"got {tuple(t.shape)}")
            if shape is None:
                shape = t.shape
            elif t.shape != shape:
                raise ValueError(f"kv tensors must all have shape {tuple(shape)}, kv[{i}] has {tuple(t.shape)}")
    if batch is not None and shape[0] != batch:
        raise ValueError(f"kv has {shape[0]} tasks but the queries have {batch}")


# ----------------------------------------------------------------------------------------- pretraining
def pretrain(cfg: ICLTaskConfig = ICLTaskConfig(), steps: int = 2500, batch: int = 32, lr: float = 1e-3,
             seed: int = 0, device="cpu", log_every: int = 100, model_kw: dict | None = None,
             progress: bool = True) -> tuple[TinyICLTransformer, dict]:
    """Meta-train the in-context regressor: MSE on every query position (query ``j`` sees demonstrations
    ``1..j-1``), fresh tasks each step, AdamW (weight decay 0) with a one-cycle schedule (5% warm-up),
    grad-norm clip 1.0. Returns the model and a log ``{"step": [...], "loss": [...]}`` (mean training
    loss over each ``log_every`` window)."""
    from tqdm.auto import tqdm

    _count("steps", steps, 1)
    _count("batch", batch)
    check_device(device)
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"lr must be > 0, got {lr!r}")
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    model = TinyICLTransformer(dim=cfg.dim, max_demos=cfg.max_demos, **(model_kw or {})).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.05)
    K = cfg.max_demos
    mask = torch.ones(K, K, dtype=torch.bool, device=device).tril(-1).expand(batch, K, K)
    log, acc = {"step": [], "loss": []}, []
    for step in tqdm(range(1, steps + 1), desc="pretrain", leave=False, disable=not progress):
        t = sample_tasks(batch, K, 0, cfg, g, device)
        pred = model(demo_tokens(t["x_demo"], t["y_demo"]), query_tokens(t["x_demo"]), mask)
        loss = F.mse_loss(pred, t["y_demo"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        acc.append(loss.item())
        if step % log_every == 0 or step == steps:
            log["step"].append(step)
            log["loss"].append(sum(acc) / len(acc))
            acc = []
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, log


def state_digest(model: nn.Module) -> str:
    """SHA-256 of the model's float32 parameters (sorted names, little-endian bytes): a content hash
    that does not depend on how the file was written."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "context-tuning"
CHECKPOINT = "icl_tiny_d8.pt"
#: the recipe of the shipped checkpoint (spec Sec. 7); ``python -m icml26.context_tuning.pretrain`` remakes it
RECIPE = dict(task=asdict(ICLTaskConfig()), steps=2500, batch=32, lr=1e-3, seed=0,
              model=dict(d_model=64, n_layers=4, n_heads=4, mlp_ratio=4))
#: content hash (:func:`state_digest`) of the shipped checkpoint
EXPECTED_DIGEST = "8d4a0fdba6cdee8da7181cdd08e4be449d4b6c87f902b2ce28bfba8cb59119c7"
SMOKE_STEPS = 300


def load_pretrained(path: str | Path | None = None, allow_train: bool = True, setting: str = "book",
                    device="cpu") -> TinyICLTransformer:
    """Load the shipped checkpoint and check its content hash and recipe. If the file is missing or does
    not match, retrain when ``allow_train`` (the full recipe, or ``SMOKE_STEPS`` steps when
    ``setting == "smoke"``) with a warning, else raise ``ValueError``."""
    if setting not in ("smoke", "book", "gpu"):
        raise ValueError(f"setting must be 'smoke', 'book' or 'gpu', got {setting!r}")
    check_device(device)
    path = Path(path) if path is not None else DATA_DIR / CHECKPOINT
    problem = None
    if path.exists():
        blob = torch.load(path, map_location="cpu", weights_only=True)
        meta = json.loads(blob.get("meta", "{}")) if isinstance(blob, dict) else {}
        expected = dict(dim=RECIPE["task"]["dim"], max_demos=RECIPE["task"]["max_demos"], **RECIPE["model"])
        if meta.get("recipe") != json.loads(json.dumps(RECIPE)) or meta.get("config") != expected:
            problem = f"checkpoint {path.name} was made with a different recipe or model configuration"
        else:
            model = TinyICLTransformer(dim=RECIPE["task"]["dim"], max_demos=RECIPE["task"]["max_demos"],
                                       **RECIPE["model"])
            model.load_state_dict(blob["state_dict"])
            if state_digest(model) != EXPECTED_DIGEST:
                problem = f"checkpoint {path.name} has SHA-256 {state_digest(model)[:12]}..., expected " \
                          f"{EXPECTED_DIGEST[:12]}..."
            else:
                model.eval()
                for p in model.parameters():
                    p.requires_grad_(False)
                return model.to(device)
    else:
        problem = f"no checkpoint at {path}"
    if not allow_train:
        raise ValueError(problem + " (pass allow_train=True to retrain)")
    steps = SMOKE_STEPS if setting == "smoke" else RECIPE["steps"]
    warnings.warn(f"{problem}; pretraining {steps} steps instead", stacklevel=2)
    r = RECIPE
    model, _ = pretrain(ICLTaskConfig(**r["task"]), steps=steps, batch=r["batch"], lr=r["lr"], seed=r["seed"],
                        device=device, model_kw=r["model"])
    return model


def save_checkpoint(model: TinyICLTransformer, log: dict, path: str | Path) -> str:
    """Write ``model`` with its recipe and training log; returns its content digest."""
    meta = dict(recipe=RECIPE, config=model.config, log=log, digest=state_digest(model))
    torch.save({"state_dict": {k: v.clone() for k, v in model.state_dict().items()},
                "meta": json.dumps(meta)}, path)
    return meta["digest"]


def load_log(path: str | Path | None = None) -> dict | None:
    """The pretraining log stored with the checkpoint (``None`` if there is no checkpoint)."""
    path = Path(path) if path is not None else DATA_DIR / CHECKPOINT
    if not path.exists():
        return None
    blob = torch.load(path, map_location="cpu", weights_only=True)
    return json.loads(blob["meta"])["log"]


def fingerprint(model: nn.Module) -> list[float]:
    """Per-parameter (sum, sum of squares) in float64, sorted by name: compared with a tolerance where
    an exact :func:`state_digest` could differ between CPU kernels."""
    out = []
    for _, t in sorted(model.state_dict().items()):
        t = t.detach().to("cpu", torch.float64)
        out += [t.sum().item(), t.pow(2).sum().item()]
    return out
