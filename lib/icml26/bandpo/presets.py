"""Scale presets of the BandPO chapter: one frozen dataclass per notebook, keyed by scale."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class OperatorPreset:
    """Notebook 1: operator, cvxpy parity and timing."""

    seed: int = 0
    n_parity: int = 30  # random old distributions per divergence solved with cvxpy
    n_grid: int = 999  # p grid for the identities
    n_timing_tokens: int = 100_000  # tokens for the batched-operator timing
    n_map: int = 60  # radii in the delta heat map

    def dry_run(self) -> OperatorPreset:
        """Loop counts cut (cvxpy solves, radii); the p grid kept. The timing batch is cut to the book's
        100k tokens: it is a workload, not a shape (the same code path at any length), and 1e7 tokens of
        float32 bisection take minutes on a CPU."""
        return replace(self, n_parity=2, n_map=4, n_timing_tokens=min(self.n_timing_tokens, 100_000))


@dataclass(frozen=True)
class BanditPreset:
    """Notebook 2: head-tail bandit (spec Sec. 7)."""

    seed: int = 0
    n_seeds: int = 15  # stacked replicas of one batched run: paired margins need more than 5
    iters: int = 150
    n_contexts: int = 64
    n_actions: int = 16
    group_size: int = 16
    inner_steps: int = 8  # with lr 0.1: the regime in which the bound rules differ (see notebook 2)
    lr: float = 0.1
    dual_clip: float | None = 10.0  # the official recipes' dual-clip constant
    # tuning grids (notebook 2): Band-KL and Clip get the same lr axis and knob axes of one length (equal
    # budgets); no clipping, whose only knob is the lr, its own lr axis (its best lr is far smaller).
    # Scored on validation seeds val_seed, val_seed + 1, ... (disjoint from the test seeds 0, 1, ...)
    lrs: tuple[float, ...] = (0.1, 0.2, 0.4, 0.8)
    deltas: tuple[float, ...] = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
    epsilons: tuple[float, ...] = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2)
    no_clip_lrs: tuple[float, ...] = (0.00625, 0.0125, 0.025, 0.05, 0.1, 0.2)
    val_seed: int = 1000
    n_val_seeds: int = 5
    gentle: tuple[tuple[int, float], ...] = ((4, 0.1), (8, 0.05))  # (inner_steps, lr) of the regime control
    early_iters: int = 30  # window of the clip diagnostics
    control_iters: int = 20  # iterations of the inner_steps = 1 control

    def __post_init__(self):
        if len(self.deltas) != len(self.epsilons):
            raise ValueError(f"deltas and epsilons: equal tuning budgets need grids of one length, got "
                             f"{len(self.deltas)} and {len(self.epsilons)}")
        if self.lr not in self.lrs or 0.05 not in self.deltas or not {0.05, 0.1, 0.2} <= set(self.epsilons):
            raise ValueError("lrs, deltas, epsilons: the grids must hold the recipe points notebook 2 reads "
                             f"(lr {self.lr}, delta 0.05, eps 0.05, 0.1 and 0.2)")
        if self.val_seed < self.seed + self.n_seeds:
            raise ValueError(f"val_seed: validation seeds must follow the test seeds {self.seed}..."
                             f"{self.seed + self.n_seeds - 1}, got {self.val_seed}")

    def dry_run(self) -> BanditPreset:
        """Loop counts cut (seeds, iterations, grid lengths), sizes kept (contexts, actions, group,
        inner steps)."""
        return replace(self, n_seeds=2, iters=6, early_iters=3, control_iters=2, n_val_seeds=1,  # iters > 5: entropy @ 5
                       lrs=(self.lr,), deltas=(0.01, 0.02, 0.05), epsilons=(0.05, 0.1, 0.2), no_clip_lrs=(self.lr,))


@dataclass(frozen=True)
class TokenPreset:
    """Notebook 3: token-level task (spec Sec. 7)."""

    seed: int = 0
    n_seeds: int = 3
    iters: int = 200
    n_prompts: int = 128
    seq_len: int = 6
    vocab: int = 12
    prompts_per_iter: int = 32
    group_size: int = 16
    inner_steps: int = 4
    lr: float = 3e-3
    warm_steps: int = 300  # keep warm_steps / n_prompts >= 300 / 128 (tests/test_bandpo.py)
    eval_every: int = 10
    hidden: int = 128  # width of the MLP policy

    def dry_run(self) -> TokenPreset:
        """Loop counts cut (seeds, iterations, warm-start steps), sizes kept (prompts, widths, batch)."""
        return replace(self, n_seeds=1, iters=2, warm_steps=5, eval_every=1)


@dataclass(frozen=True)
class ChapterPresets:
    """The chapter's three presets at one scale; ``presets["bandit"]`` works like a dict."""

    operator: OperatorPreset
    bandit: BanditPreset
    token: TokenPreset

    def __getitem__(self, key: str):
        if key not in ("operator", "bandit", "token"):
            raise KeyError(f"key must be 'operator', 'bandit' or 'token', got {key!r}")
        return getattr(self, key)

    def dry_run(self) -> ChapterPresets:
        """Every notebook's preset with its loop counts cut (``ICML26_DRY=1``)."""
        return ChapterPresets(self.operator.dry_run(), self.bandit.dry_run(), self.token.dry_run())


PRESETS = {
    "smoke": ChapterPresets(
        OperatorPreset(n_parity=4, n_grid=199, n_timing_tokens=10_000, n_map=12),
        BanditPreset(n_seeds=2, iters=10, control_iters=3, early_iters=5, lrs=(0.1, 0.2), deltas=(0.01, 0.02, 0.05),
                     epsilons=(0.05, 0.1, 0.2), no_clip_lrs=(0.05, 0.1), n_val_seeds=1),
        TokenPreset(n_seeds=1, iters=20, warm_steps=150, eval_every=5),
    ),
    "book": ChapterPresets(OperatorPreset(), BanditPreset(), TokenPreset()),
    # gpu: the token task keeps the book's ratios warm_steps / n_prompts and prompts_per_iter / n_prompts
    # (2048 prompts with 300 warm steps cannot learn the chains; 512 with 1200 can)
    "gpu": ChapterPresets(
        OperatorPreset(n_timing_tokens=10_000_000),
        BanditPreset(n_seeds=15, n_contexts=4096),
        TokenPreset(n_seeds=5, n_prompts=512, warm_steps=1200, prompts_per_iter=128),
    ),
}


def preset(scale: str | None = "book") -> ChapterPresets:
    """The chapter's presets at ``scale``: ``preset(scale)["operator" | "bandit" | "token"]``."""
    return preset_for(PRESETS, scale)
