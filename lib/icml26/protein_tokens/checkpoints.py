"""The shipped book checkpoints; ``python -m icml26.protein_tokens.pretrain`` (:func:`main`) remakes them.

Trains APT-mini and Kanzi-mini with :data:`RECIPE` (:func:`icml26.protein_tokens.model.train_tokenizer`)
on one CPU thread (the thread count changes float summation order), writes
``data/protein-tokens/{apt_mini,kanzi_mini}.pt`` and ``provenance.json`` (recipe, seed, steps, command,
content and file SHA-256, a per-tensor fingerprint, the training log, CPU seconds).
``--steps N`` trains an N-step run of the same recipe (the schedule stretched to N steps); the test
compares such a short run with the fingerprint stored under ``short_run``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import torch

from icml26.core import one_thread

from .geometry import check_device
from .model import DiffusionTokenizer, TokenizerConfig, config_dict, train_tokenizer

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "protein-tokens"
COMMAND = "python -m icml26.protein_tokens.pretrain"
SHORT_STEPS = 12
#: the recipe of the shipped checkpoints (spec Sec. 3.10 book defaults, 7.2)
RECIPE = {
    "lengths": [36, 48], "batch": 32, "lr": 1e-3, "warmup": 100, "noise_deg": 6.0, "steps": 3500, "seed": 0,
    "models": {
        "apt_mini": {"window": None, "nested": True, "n_tokens": 16},
        "kanzi_mini": {"window": 4, "nested": False, "n_tokens": 16},
    },
}
NAMES = tuple(RECIPE["models"])


def tokenizer_config(name: str) -> TokenizerConfig:
    if name not in RECIPE["models"]:
        raise ValueError(f"name must be one of {list(RECIPE['models'])}, got {name!r}")
    return TokenizerConfig(**RECIPE["models"][name])


def state_digest(model: torch.nn.Module) -> str:
    """SHA-256 of the float32 parameters in sorted-name order (independent of how the file is written)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def fingerprint(model: torch.nn.Module) -> list[float]:
    """Sum and sum of squares of every tensor (sorted names): a tolerance-friendly identity check."""
    out = []
    for _, t in sorted(model.state_dict().items()):
        t = t.detach().double().cpu()
        out += [float(t.sum()), float((t * t).sum())]
    return out


def train_one(name: str, steps: int | None = None, progress: bool = False):
    r = RECIPE
    with one_thread():
        return train_tokenizer(tokenizer_config(name), tuple(r["lengths"]), steps or r["steps"], batch=r["batch"],
                               lr=r["lr"], warmup=r["warmup"], seed=r["seed"], noise_deg=r["noise_deg"],
                               progress=progress)


def save(model: DiffusionTokenizer, name: str, log: dict, path: Path) -> str:
    meta = {"name": name, "recipe": RECIPE, "config": config_dict(model.cfg), "log": log,
            "digest": state_digest(model)}
    torch.save({"state_dict": {k: v.clone() for k, v in model.state_dict().items()}, "meta": json.dumps(meta)}, path)
    return meta["digest"]


def load_pretrained(name: str, path: str | Path | None = None, device="cpu") -> DiffusionTokenizer:
    """Load a shipped checkpoint, checking its recipe and its content hash against ``provenance.json``."""
    check_device(device)
    cfg = tokenizer_config(name)
    path = Path(path) if path is not None else DATA_DIR / f"{name}.pt"
    if not path.exists():
        raise ValueError(f"no checkpoint at {path}; run `{COMMAND}` to create it")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    meta = json.loads(blob["meta"])
    if meta.get("recipe") != json.loads(json.dumps(RECIPE)) or meta.get("config") != config_dict(cfg):
        raise ValueError(f"checkpoint {path.name} was made with a different recipe or configuration")
    model = DiffusionTokenizer(cfg)
    model.load_state_dict(blob["state_dict"])
    prov_path = path.parent / "provenance.json"
    if prov_path.exists():
        prov = json.loads(prov_path.read_text())
        want = prov.get("models", {}).get(name, {}).get("content_sha256")
        if want is not None and want != state_digest(model):
            raise ValueError(f"checkpoint {path.name} has SHA-256 {state_digest(model)[:12]}..., "
                             f"provenance.json expects {want[:12]}...")
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(device)


def training_log(name: str, path: str | Path | None = None) -> dict:
    path = Path(path) if path is not None else DATA_DIR / f"{name}.pt"
    return json.loads(torch.load(path, map_location="cpu", weights_only=True)["meta"])["log"]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=None, help="a shorter run of the same recipe")
    ap.add_argument("--out", type=Path, default=DATA_DIR)
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args(argv)
    prov = {"command": COMMAND, "recipe": RECIPE, "threads": 1, "torch": torch.__version__, "models": {}}
    for name in NAMES:
        t0, c0 = time.perf_counter(), time.process_time()
        model, log = train_one(name, a.steps, progress=True)
        entry = {"steps": a.steps or RECIPE["steps"], "seed": RECIPE["seed"], "content_sha256": state_digest(model),
                 "fingerprint": fingerprint(model), "final_flow_loss": log["flow"][-1],
                 "cpu_seconds": round(time.process_time() - c0), "wall_seconds": round(time.perf_counter() - t0)}
        if not a.no_save:
            a.out.mkdir(parents=True, exist_ok=True)
            f = a.out / f"{name}.pt"
            save(model, name, log, f)
            entry["file"] = f.name
            entry["file_sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
        prov["models"][name] = entry
        print(f"{name}: steps={entry['steps']} flow={log['flow'][-1]:.4f} perplexity={log['perplexity'][-1]:.1f} "
              f"sha256={entry['content_sha256']} ({entry['cpu_seconds']} CPU s)", flush=True)
    if not a.no_save and a.steps is None:
        short = {}
        for name in NAMES:
            m, log = train_one(name, SHORT_STEPS)
            short[name] = {"fingerprint": fingerprint(m), "flow": log["flow"]}
        prov["short_run"] = {"command": f"{COMMAND} --steps {SHORT_STEPS} --no-save", "steps": SHORT_STEPS,
                             "models": short}
        (a.out / "provenance.json").write_text(json.dumps(prov, indent=1))

