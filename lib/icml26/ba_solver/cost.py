"""The cost model of the ba-solver notebooks (:mod:`icml26.book.budget`): the work each one runs at a scale.

Training items are one real step of :func:`~icml26.ba_solver.method.train_sidenet` (through
:func:`~icml26.ba_solver.experiments.train_exact_sidenet` / ``train_learned_sidenet`` with ``steps=1``) or of
:func:`~icml26.ba_solver.fields.train_backbone` (``backbone_steps=1``) at the preset's widths and batches;
counts are steps x SideNets (one per comparison seed, plus the ablation arms). The float64 RK4 references
(one per test case and one for the validation noise) are measured over 8 of their steps (``per_call=8``).
The solver tables and tuning (a few thousand batched evaluations) are left out: a lower bound there."""

from __future__ import annotations

from dataclasses import replace

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets

_REF = 8    # reference steps per measured call


def _exact_side(c1, lam=50.0):
    def build():
        from . import experiments as ex
        from .data import ring_gmm
        from .fields import GMMVelocityField

        field = GMMVelocityField(ring_gmm())
        return lambda: ex.train_exact_sidenet(field, c1, 1, lam=lam, seed=1)
    return build


def _backbone(c, dim):
    def build():
        import torch

        from . import experiments as ex

        if dim == 2:
            return lambda: ex.train_flow_backbone(2, ex.checkerboard_sampler(), replace(c, backbone_steps=1),
                                                  torch.Generator().manual_seed(0))
        sample = ex.digits_setup()[2]
        return lambda: ex.train_flow_backbone(64, sample, replace(c, backbone_steps=1), torch.Generator().manual_seed(0),
                                              n_classes=10, label_dropout=0.1)
    return build


def _learned_side(c, dim, **kw):
    def build():
        from . import experiments as ex
        from .fields import VelocityMLP

        if dim == 2:
            backbone = VelocityMLP(2, hidden=c.backbone_hidden, depth=c.backbone_depth).requires_grad_(False)
            sample = ex.checkerboard_sampler()
            return lambda: ex.train_learned_sidenet(backbone, 2, sample, c, steps=1, seed=1, **kw)
        backbone = VelocityMLP(64, hidden=c.backbone_hidden, depth=c.backbone_depth, n_classes=10).requires_grad_(False)
        sample = ex.digits_setup()[2]
        return lambda: ex.train_learned_sidenet(backbone, 64, sample, c, steps=1, n_classes=10, seed=1,
                                                label_dropout=0.1, null_class=10, **kw)
    return build


def _reference(c, dim, n):
    def build():
        import torch

        from .baselines import reference_solve
        from .data import ring_gmm
        from .fields import GMMVelocityField, VelocityMLP

        if dim == 2 and c is None:
            fn, y = GMMVelocityField(ring_gmm()), None
        elif dim == 2:
            fn, y = VelocityMLP(2, hidden=c.backbone_hidden, depth=c.backbone_depth).requires_grad_(False), None
        else:
            fn = VelocityMLP(64, hidden=c.backbone_hidden, depth=c.backbone_depth, n_classes=10).requires_grad_(False)
            y = torch.arange(n) % 10
        x0 = torch.randn(n, dim, dtype=torch.float64)
        return lambda: reference_solve(fn, x0, y, steps=_REF)
    return build


def _ref_item(name, c, dim, n, steps, cases):
    return Item(name, cases * steps, _reference(c, dim, n), per_call=_REF,
                note="float64 RK4, 4 backbone calls per step")


def notebooks(scale: str) -> dict:
    cfg = gpu_preset(presets, scale)
    c1, c2, c3 = cfg.nb1, cfg.nb2, cfg.nb3
    seeds = n_of(pick(cfg, "seeds"), 5)
    nb1 = [Item("SideNet step (exact field, lam 50)", seeds * c1.side_steps, _exact_side(c1), key="side1"),
           Item("SideNet step (lam 10 ablation)", c1.ablation_steps, _exact_side(c1, 10.0), key="side1"),
           _ref_item("float64 reference step (test + validation)", None, 2, c1.n_eval,
                     pick(c1, "case_ref_steps", 512), seeds + 1)]
    k1 = c2.ablation_steps * (c2.chain_steps + 1) // 2
    nb2 = [Item("backbone step (checkerboard)", c2.backbone_steps, _backbone(c2, 2)),
           Item("SideNet step (learned field)", seeds * c2.side_steps + c2.ablation_steps, _learned_side(c2, 2),
                key="side2"),
           Item("SideNet step (K 1 ablation)", k1, _learned_side(c2, 2, chain_steps=1)),
           _ref_item("float64 reference step (test + validation)", c2, 2, c2.n_eval, c2.ref_steps, 2)]
    nb3 = [Item("backbone step (digits, conditional)", c3.backbone_steps, _backbone(c3, 64)),
           Item("SideNet step (digits)", seeds * c3.side_steps, _learned_side(c3, 64)),
           _ref_item("float64 reference step (test + validation)", c3, 64, c3.n_eval, c3.ref_steps, 2)]
    return {"01-anchors-and-probes": nb1, "02-learned-flow-and-cost": nb2, "03-digits": nb3}
