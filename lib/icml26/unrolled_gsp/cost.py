"""The cost model of the unrolled-gsp notebooks (:mod:`icml26.book.budget`), read defensively from the presets.

The unrolled step is the training step of the unrolled model (``n_blocks`` blocks of ``n_iter`` ADMM
iterations) at the **gpu** preset's sizes, on 2 windows with FLOPs and bytes scaled to the batch (its
launches and syncs do not depend on the batch): this model projects the gpu scale only. Notebook 2 runs
it for the warm start (``epochs``) and the cold start (``scratch_epochs``) on the main benchmark, and for
``len(ablations) x ablation_seeds x ablation_epochs`` on the ablation benchmark (each at its own windows
per epoch over ``batch_size``). Also declared: the transformer baseline (``epochs``) and the
extrapolator-alone control (``control_seeds x len(control_lrs)`` runs of ``epochs``). Notebook 3 trains
each model ``cmp_tune_seeds x len(cmp_lrs)`` times (tuning) and then on its remaining seeds at the chosen
rate (the unrolled model ``cmp_seeds``, the transformer and the extrapolator alone ``cmp_cheap_seeds``), each run
to its epoch cap (``cmp_epochs`` for the unrolled model and the extrapolator, ``cmp_tf_epochs``), on its own instance (``cmp_nodes`` sensors, ``cmp_days`` days). The closed-form
baselines and the exact-(P) and denoising studies (CG solves without training) are not declared."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets

_SMALL = 2      # measured on 2 windows, FLOPs and bytes scaled to the batch (the full batch under the
                # counting modes takes over 10 GB on the CPU)


def _step(cfg, bench, kind: str):
    def build():
        import torch

        from . import baselines as bl
        from .experiments import ExtrapolatorOnly, _masked_huber, build_model

        torch.manual_seed(0)
        if kind == "unrolled":
            model = build_model(cfg, bench)
        elif kind == "extrapolator":
            model = ExtrapolatorOnly(build_model(cfg, bench).extrap)
        else:
            model = bl.STTransformer(cfg.n_nodes, cfg.t_in, cfg.t_out)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        b = {k: v[:_SMALL] for k, v in bench["windows"]["train"].items()}

        def train_step():        # the step of train_forecaster (losses stay on the device)
            out = model(b["x"][:, :cfg.t_in], b["tod"], b["dow"], b["mask"][:, :cfg.t_in])
            t0 = b["x"].shape[1] - out.shape[1]      # the transformer forecasts the future only
            loss = _masked_huber(out, b["x"][:, t0:], b["mask"][:, t0:].float())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            if hasattr(model, "clamp_"):
                model.clamp_()
            return loss
        return train_step
    return build


def _per_epoch(bench, batch: int) -> int:
    windows = len(next(iter(bench["windows"]["train"].values())))
    return -(-windows // max(batch, 1))


def notebooks(scale: str) -> dict:
    if scale != "gpu":
        return {}
    from .experiments import make_ablation_benchmark, make_benchmark

    cfg = gpu_preset(presets, scale)
    bench = make_benchmark(cfg)
    batch = pick(cfg, "batch_size", 1)
    per_epoch = _per_epoch(bench, batch)
    per_epoch_abl = _per_epoch(make_ablation_benchmark(cfg), batch)
    epochs = pick(cfg, "epochs", 0) + pick(cfg, "scratch_epochs", 0)
    abl = n_of(pick(cfg, "ablations", ()), 0) * pick(cfg, "ablation_seeds", 0) * pick(cfg, "ablation_epochs", 0)
    ctrl = pick(cfg, "control_seeds", 0) * n_of(pick(cfg, "control_lrs", ()), 0) * pick(cfg, "epochs", 0)
    scale_b = batch / _SMALL
    step = _step(cfg, bench, "unrolled")
    from .experiments import comparison_preset

    c = comparison_preset(cfg)
    cbench = make_benchmark(c)
    tune_runs = pick(cfg, "cmp_tune_seeds", 0) * n_of(pick(cfg, "cmp_lrs", ()), 0)
    cruns = (tune_runs + pick(cfg, "cmp_seeds", 0) - pick(cfg, "cmp_tune_seeds", 0)) * pick(cfg, "cmp_epochs", 0)
    truns = ((tune_runs + pick(cfg, "cmp_cheap_seeds", 0) - pick(cfg, "cmp_tune_seeds", 0))
             * pick(cfg, "cmp_tf_epochs", 0))
    eruns = (tune_runs + pick(cfg, "cmp_cheap_seeds", 0) - pick(cfg, "cmp_tune_seeds", 0)) * pick(cfg, "cmp_epochs", 0)
    per_epoch_cmp = _per_epoch(cbench, batch)
    nb3 = [Item(f"unrolled train step, tuned comparison ({cruns} run-epochs x {per_epoch_cmp})",
                cruns * per_epoch_cmp, _step(c, cbench, "unrolled"), flop_scale=scale_b, key="unrolled-cmp"),
           Item(f"transformer train step, tuned comparison ({truns} run-epochs x {per_epoch_cmp})",
                truns * per_epoch_cmp, _step(c, cbench, "transformer"), flop_scale=scale_b),
           Item(f"extrapolator-alone train step, tuned comparison ({eruns} run-epochs x {per_epoch_cmp})",
                eruns * per_epoch_cmp, _step(c, cbench, "extrapolator"), flop_scale=scale_b)]
    return {"03-tuned-comparison": nb3, "02-unrolled-forecaster": [
        Item(f"unrolled train step, main benchmark ({epochs} epochs x {per_epoch})", epochs * per_epoch, step,
             flop_scale=scale_b, key="unrolled"),
        Item(f"unrolled train step, ablations ({abl} variant-seed-epochs x {per_epoch_abl})", abl * per_epoch_abl,
             step, flop_scale=scale_b, key="unrolled"),
        Item(f"transformer train step ({pick(cfg, 'epochs', 0)} epochs x {per_epoch})",
             pick(cfg, "epochs", 0) * per_epoch, _step(cfg, bench, "transformer"), flop_scale=scale_b),
        Item(f"extrapolator-alone train step ({ctrl} run-epochs x {per_epoch})", ctrl * per_epoch,
             _step(cfg, bench, "extrapolator"), flop_scale=scale_b)]}
