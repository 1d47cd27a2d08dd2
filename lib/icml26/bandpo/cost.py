"""The cost model of the bandpo notebooks (:mod:`icml26.book.budget`): the work each one runs at a scale.

Notebook 1: the cvxpy reference solves (host, timed), the batched operator on the timing batch (four calls:
``time_fn``'s warm-up and three repeats), the delta map and the identity checks. Notebook 2: every head-tail
bandit run is one batched :func:`~icml26.bandpo.experiments.train_bandit` call over (rule, seed) replicas, so an
item is one iteration (rollout, per-rule bounds, ``inner_steps`` Adam steps, the clip counts and the per-iteration
record) of one such call with its rules and seeds, measured over two iterations (``per_call=2``, the set-up
spread over them) at a reduced number of contexts (``flop_scale`` restores the preset's: every tensor of an
iteration is linear in the contexts; launches and syncs do not depend on them). Notebook 3: the supervised
warm-start steps (one warm start per seed plus the notebook's own) and the GRPO iterations of the four rules,
measured as one iteration of all four (``per_call`` = one evaluation interval, its exact evaluation included)."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_preset

from . import presets

_CONTEXTS = 256   # contexts of a measured bandit iteration (flop_scale restores the preset's)
_ITERS = 2        # bandit iterations per measured call


def _bandit(cfg, rules_fn, seeds, inner_steps=None, lr=None, dual_clip="preset"):
    """One call of ``train_bandit`` over ``rules_fn()`` x ``seeds`` replicas, ``_ITERS`` iterations."""
    def build():
        from .envs import HeadTailBandit
        from .experiments import train_bandit

        env = HeadTailBandit(n_contexts=min(cfg.n_contexts, _CONTEXTS), n_actions=cfg.n_actions)
        rules, lrs = rules_fn()
        kw = dict(iters=_ITERS, group_size=cfg.group_size, inner_steps=inner_steps or cfg.inner_steps,
                  lr=lrs if lr is None else lr, seed=list(range(seeds)),
                  dual_clip=cfg.dual_clip if dual_clip == "preset" else dual_clip)
        return lambda: train_bandit(env, rules, **kw)
    return build


def _methods(delta=0.05):
    from .experiments import bandit_methods

    rules = list(bandit_methods(delta).values())
    return rules, [0.1] * len(rules)


def _sweep(cfg):
    def rules():
        from icml26.core import Grid

        from .experiments import bandit_rule

        grids = {"Band-KL": Grid(lr=list(cfg.lrs), delta=list(cfg.deltas)),
                 "Clip": Grid(lr=list(cfg.lrs), eps=list(cfg.epsilons)), "no clipping": Grid(lr=list(cfg.no_clip_lrs))}
        out = [(bandit_rule(f, c), float(c["lr"])) for f, g in grids.items() for c in g.configs()]
        return [r for r, _ in out], [v for _, v in out]
    return rules


def _tuned(cfg):
    def rules():
        from .experiments import bandit_rule

        picks = [("Band-KL", {"delta": 0.05}), ("Clip", {"eps": 0.2}), ("no clipping", {})] * 2  # 2 scores x 3
        lrs = [cfg.lr, cfg.lr, min(cfg.no_clip_lrs)] * 2
        return [bandit_rule(f, c) for f, c in picks], lrs
    return rules


def _named(fn_name, *args):
    def rules():
        from . import experiments as ex

        rs = list(getattr(ex, fn_name)(*args).values())
        return rs, [0.1] * len(rs)
    return rules


def _control(cfg):
    """The 7 methods, one seed each, one inner step: separate calls as in the notebook."""
    def build():
        from .envs import HeadTailBandit
        from .experiments import bandit_methods, train_bandit

        env = HeadTailBandit(n_contexts=min(cfg.n_contexts, _CONTEXTS), n_actions=cfg.n_actions)
        fns = list(bandit_methods(0.05).values())
        return lambda: [train_bandit(env, fn, iters=_ITERS, inner_steps=1, lr=cfg.lr, seed=[cfg.seed],
                                     dual_clip=cfg.dual_clip) for fn in fns]
    return build


def _parity(n_div):
    def build():
        import numpy as np

        from .experiments import random_old_distribution
        from .method import DIVERGENCES, band_bounds_cvxpy

        q = random_old_distribution(np.random.default_rng(0))
        return lambda: [band_bounds_cvxpy(q, 0, 0.05, d) for d in list(DIVERGENCES)[:n_div]]
    return build


def _operator(n):
    def build():
        import torch

        from .method import band_bounds

        tokens = torch.rand(n, dtype=torch.float32).clamp(min=1e-6)
        return lambda: band_bounds(tokens, 0.05, "kl")
    return build


def _delta_map():
    def build():
        import numpy as np
        import torch

        from .method import band_bounds

        pg = torch.logspace(-3, np.log10(0.99), 120, dtype=torch.float64)
        return lambda: band_bounds(pg, 0.01, "kl", ratio_cap=None)
    return build


def _identities(n_grid):
    def build():
        from .experiments import identity_checks

        return lambda: identity_checks(n_grid)
    return build


def _warm(cfg):
    def build():
        from .envs import TokenChainTask
        from .experiments import warm_start

        task = TokenChainTask(n_prompts=cfg.n_prompts, seq_len=cfg.seq_len, vocab=cfg.vocab, seed=0)
        return lambda: warm_start(task, steps=2, seed=0, hidden=cfg.hidden)
    return build


def _grpo(cfg):
    def build():
        from .baselines import make_bound_fn
        from .envs import TokenChainTask
        from .experiments import train_token_policy, warm_start

        task = TokenChainTask(n_prompts=cfg.n_prompts, seq_len=cfg.seq_len, vocab=cfg.vocab, seed=0)
        policy = warm_start(task, steps=1, seed=0, hidden=cfg.hidden)
        rules = [make_bound_fn(r) for r in ("clip", "clip_higher", "band_kl", "band_chi2")]
        k = cfg.eval_every
        return lambda: [train_token_policy(task, fn, iters=k, prompts_per_iter=cfg.prompts_per_iter,
                                           group_size=cfg.group_size, inner_steps=cfg.inner_steps, lr=cfg.lr,
                                           eval_every=k, policy=policy) for fn in rules]
    return build


def notebooks(scale: str) -> dict:
    from .method import DIVERGENCES

    ch = gpu_preset(presets, scale)
    op, b, t = ch.operator, ch.bandit, ch.token
    n_div = len(DIVERGENCES)
    n_op = min(op.n_timing_tokens, 100_000)
    nb1 = [Item("cvxpy reference solve (all divergences)", op.n_parity, _parity(n_div), host=True),
           Item("cvxpy rearrangement check (4 KL solves)", 4, _parity(1), host=True),
           Item("batched operator on the timing batch", 4, _operator(n_op), flop_scale=op.n_timing_tokens / n_op,
                note="time_fn: one warm-up call and three repeats"),
           Item("delta map row (120 p, KL, float64)", op.n_map + 4, _delta_map()),
           Item("identity checks (p grid, float64)", 1, _identities(op.n_grid))]
    fs = b.n_contexts / min(b.n_contexts, _CONTEXTS)
    n_cfg = len(b.lrs) * (len(b.deltas) + len(b.epsilons)) + len(b.no_clip_lrs)

    def it(name, count, build):
        return Item(name, count, build, flop_scale=fs, per_call=_ITERS)
    nb2 = [it("control iteration (7 rules, 1 seed each, 1 inner step)", b.control_iters, _control(b)),
           it("main runs iteration (7 rules x seeds)", b.iters, _bandit(b, _methods, b.n_seeds)),
           it(f"validation sweep iteration ({n_cfg} configs x val seeds)", b.iters, _bandit(b, _sweep(b), b.n_val_seeds)),
           it("tuned test runs iteration (6 rules x seeds)", b.iters, _bandit(b, _tuned(b), b.n_seeds)),
           it("ablation iteration (6 rules x seeds)", b.iters,
              _bandit(b, _named("ablation_rules", [0.01, 0.1], [0.05]), b.n_seeds))]
    nb2 += [it(f"regime iteration (5 rules x seeds, {k} inner steps)", b.iters,
               _bandit(b, _named("regime_rules"), b.n_seeds, inner_steps=k, lr=lr)) for k, lr in b.gentle]
    nb2 += [it("no dual clip iteration (2 rules x seeds)", b.iters,
               _bandit(b, lambda: (_methods()[0][::3][:2], [b.lr] * 2), b.n_seeds, dual_clip=None)),
            it("exercise iteration (1 rule, 1 seed, 3 inner steps)", 2 * 2 * 5,
               _bandit(b, lambda: (_methods()[0][:1], [b.lr]), 1, inner_steps=3))]
    nb3 = [Item("warm-start step (batch 256)", (t.n_seeds + 1) * t.warm_steps, _warm(t), per_call=2),
           Item("GRPO iteration of the 4 rules (eval every interval)", t.n_seeds * t.iters, _grpo(t),
                per_call=t.eval_every, note="one iteration of each of Clip, Clip-Higher, Band-KL, Band-chi2")]
    return {"01-band-operator": nb1, "02-head-tail-bandit": nb2, "03-token-level": nb3}
