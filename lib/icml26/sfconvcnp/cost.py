"""The cost model of the sfconvcnp notebooks (:mod:`icml26.book.budget`): the work each one runs at a scale.

Each training item is one real step of :func:`~icml26.sfconvcnp.experiments.train_np` (``n_steps=1``: task
sampling, loss, backward, clipping, AdamW, the scheduler and the loss read back), evaluation items one
batch of :func:`~icml26.sfconvcnp.experiments.evaluate_np`; counts are models x seeds x steps. Notebooks 2
(GP-RBF) and 3 (periodic GPs) run ``cfg.notebook2()`` and train each model ``len(lr_grid) + lr_extensions``
more times (the learning-rate tuning runs on the tuning seed, scored on ``val_batches`` validation batches): the grid
grows past an end while a best value sits there, at most ``lr_extensions`` times, one value per extension when the
best values sit at one end, so this is the largest grid of one-sided growth (book: 3 + 3 = 6 values). A tuning that
stops earlier trains fewer; one that extends both sides at once (best values at opposite ends) trains more, up to
``len(lr_grid) + 2 * lr_extensions``. The book run of notebook 3 tunes its 4 models (with the wide-reach ConvCNP) on 6
values: both sides at the first extension (the wide model's best at the lower end, the others' at the upper), the
upper side once more, then no best value at an end; each value trains once per model (scores are cached)."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_preset, n_of, pick

from . import presets


def _train(cfg, name, sampler_fn, **kw):
    def build():
        from . import experiments as ex

        model = ex.make_model(name, cfg, 0)
        sampler = ex._sampler(cfg, sampler_fn, **kw)
        return lambda: ex.train_np(model, sampler, 1, lr=cfg.lr, progress=False)
    return build


def _eval(cfg, name, sampler_fn, oracle=False, **kw):
    def build():
        from . import experiments as ex

        model = ex.make_model(name, cfg, 0)
        sampler = ex._sampler(cfg, sampler_fn, test=True, **kw)
        return lambda: ex.evaluate_np(model, sampler, 1, oracle=oracle)
    return build


def _toy(cfg, rank):
    def build():
        from . import experiments as ex

        return lambda: ex.fit_operator_toy(rank, 1, 1e-3, pick(cfg, "toy_batch", 32), progress=False)
    return build


def notebooks(scale: str) -> dict:
    from .data import sample_gp_tasks, sample_sawtooth_tasks

    cfg = gpu_preset(presets, scale)
    seeds = n_of(pick(cfg, "seeds"), 1)
    tb = pick(cfg, "test_batches", 1)
    saw = ["sfconvcnp-linear", "sfvconvcnp", "sfconvcnp"]
    gp = ["cnp", "convcnp", "sfconvcnp", "sfconvcnp-matched"] + (["te-attention"] if pick(cfg, "train_attention", False)
                                                                  else [])
    per = ["convcnp", "convcnp-wide", "sfconvcnp", "sfconvcnp-matched"]   # matched: capacity control; wide: reach
    nb1 = [Item("operator toy SFConv step", pick(cfg, "toy_steps", 0), _toy(cfg, 0)),
           Item("operator toy SFVConv step", pick(cfg, "toy_steps", 0), _toy(cfg, 1))]
    nb1 += [Item(f"sawtooth {n} train step", seeds * pick(cfg, "steps_saw", 0), _train(cfg, n, sample_sawtooth_tasks),
                 key=f"train {n}") for n in saw]
    nb1 += [Item(f"sawtooth {n} test batch", seeds * tb, _eval(cfg, n, sample_sawtooth_tasks)) for n in saw]
    c2 = cfg.notebook2() if hasattr(cfg, "notebook2") else cfg
    n_lr = n_of(pick(c2, "lr_grid"), 0) + pick(c2, "lr_extensions", 0)    # the largest grid the tuning can reach
    runs = n_of(pick(c2, "seeds"), 1) + n_lr                              # test seeds + tuning runs
    vb = n_lr * pick(c2, "val_batches", 0)
    pre = "" if (c2.sf, c2.convcnp) == (cfg.sf, cfg.convcnp) else "nb2 "   # same sizes: share the measurement
    nb2 = [Item(f"GP-RBF {n} train step", runs * pick(c2, "steps_rbf", 0),
                _train(c2, n, sample_gp_tasks, kernel="rbf"), key=f"{pre}train {n}") for n in gp]
    nb2 += [Item(f"GP-RBF {n} test batch", n_of(pick(c2, "seeds"), 1) * tb * n_of(pick(c2, "shifts"), 1) + vb,
                 _eval(c2, n, sample_gp_tasks, oracle=True, kernel="rbf"), key=f"{pre}test {n}") for n in gp]
    nb3 = [Item(f"periodic {n} train step", runs * pick(c2, "steps_periodic", 0),
                 _train(c2, n, sample_gp_tasks, kernel="periodic"), key=f"{pre}train {n}",
                 note="measured as the GP-RBF step of the same model (same sizes)" if n in gp else "") for n in per]
    nb3 += [Item(f"periodic {n} test batch", 2 * n_of(pick(c2, "seeds"), 1) * tb + vb,
                 _eval(c2, n, sample_gp_tasks, oracle=True, kernel="periodic"), key=f"{pre}test {n}") for n in per]
    return {"01-set-fourier-convolution": nb1, "02-neural-processes": nb2, "03-periodic-extrapolation": nb3}
