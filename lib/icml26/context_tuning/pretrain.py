"""Regenerate the shipped checkpoint: ``python -m icml26.context_tuning.pretrain``.

Trains :func:`icml26.context_tuning.model.pretrain` with the recipe ``RECIPE`` on one CPU thread
(thread count changes float summation order), writes ``data/context-tuning/icl_tiny_d8.pt`` and prints
its content SHA-256 (:func:`state_digest`), which must equal ``EXPECTED_DIGEST``.
``--steps N`` trains an N-step run of the same recipe (the one-cycle schedule is
stretched to N steps); the test compares a short run with ``SHORT_RUN_DIGEST``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from icml26.core import one_thread

from .model import (
    CHECKPOINT,
    DATA_DIR,
    EXPECTED_DIGEST,
    RECIPE,
    ICLTaskConfig,
    pretrain,
    save_checkpoint,
    state_digest,
)


def run(steps: int | None = None, out: Path | None = None, return_model: bool = False):
    """Train the recipe (``steps`` overrides its length) on one thread; save to ``out`` if given."""
    r = RECIPE
    with one_thread():
        model, log = pretrain(ICLTaskConfig(**r["task"]), steps=steps or r["steps"], batch=r["batch"], lr=r["lr"],
                              seed=r["seed"], model_kw=r["model"], progress=False)
    if out is not None:
        save_checkpoint(model, log, out)
    return (state_digest(model), log, model) if return_model else (state_digest(model), log)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=None, help="train a shorter run (default: the recipe's)")
    ap.add_argument("--out", type=Path, default=DATA_DIR / CHECKPOINT)
    ap.add_argument("--no-save", action="store_true")
    a = ap.parse_args(argv)
    t = time.perf_counter()
    digest, log = run(a.steps, None if a.no_save else a.out)
    print(f"steps={a.steps or RECIPE['steps']} final loss={log['loss'][-1]:.4f} sha256={digest} "
          f"({time.perf_counter() - t:.0f} s)")
    if a.steps is None and digest != EXPECTED_DIGEST:
        print(f"note: differs from EXPECTED_DIGEST={EXPECTED_DIGEST}")


if __name__ == "__main__":
    main()
