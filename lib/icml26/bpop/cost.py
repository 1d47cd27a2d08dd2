"""The cost model of the bpop notebooks (:mod:`icml26.book.budget`).

Every MCMC study is one call of :func:`~icml26.bpop.mcmc.run_mcmc_many` with all chains of all its data
sets batched; an item is one MCMC iteration of such a call, measured on a short run of the same data
(``per_call`` iterations, set-up spread over them) and counted ``n_iter`` times per call. The Python loop
of an iteration issues its tensor operators one by one, so on a GPU the step is launch-bound whatever the
batch. The queue-jump likelihood is Python on the host (``host=True``: its CPU time). Enumerations and
executor simulations (NumPy) are left out: seconds at book scale."""

from __future__ import annotations

from icml26.book.budget import Item, gpu_preset, pick

from . import presets

_PER = 10


def _mcmc(cfg, scenario: str, datasets: int, chains: int, traces: int | None = None, sra: bool = False,
          likelihood: str = "bpop"):
    def build():
        from . import experiments as ex
        from .mcmc import run_mcmc_many
        from .scenarios import cloud_iac, scheduler_traces, softmax_traces, srasearch_dag

        if sra:
            po = srasearch_dag(pick(cfg, "sra_accessions", 10))
            data = [scheduler_traces(po, pick(cfg, "sra_traces", 50), seed=0, eps=0.05)] * datasets
        else:
            po = cloud_iac(scenario)
            data = [softmax_traces(po, traces or pick(cfg, "recovery_traces", 30), 1.0, 0.05, seed=s)
                    for s in range(datasets)]
        mc = ex.mcmc_config(cfg, n_chains=chains, n_iter=_PER, likelihood=likelihood)
        return lambda: run_mcmc_many(data, po.n, mc, progress=False)
    return build


def notebooks(scale: str) -> dict:
    cfg = gpu_preset(presets, scale)
    n_iter = pick(cfg, "n_iter", 1)
    chains = pick(cfg, "recovery_chains", 1)
    scen = tuple(pick(cfg, "recovery_scenarios", ("simple_ecs",)))
    per_scenario = pick(cfg, "recovery_seeds", 1) + pick(cfg, "validation_seeds", 0)
    personas = pick(cfg, "persona_seeds", 1) + pick(cfg, "persona_validation_seeds", 0)
    nb1 = [Item(f"recovery MCMC iteration, {s}", n_iter, _mcmc(cfg, s, per_scenario, chains), per_call=_PER)
           for s in scen]
    nb1.append(Item("persona MCMC iteration, slb_ecs_rds", n_iter, _mcmc(cfg, "slb_ecs_rds", personas, chains),
                    per_call=_PER))
    ipcov = pick(cfg, "ipcov_seeds", 1) * len(tuple(pick(cfg, "ipcov_targets", (1.0,))))
    nb2 = [Item("queue-jump MCMC iteration (Python likelihood)", pick(cfg, "qj_iter", 1),
                _mcmc(cfg, "simple_ecs", 1, 1, likelihood="queue_jump"), per_call=_PER, host=True),
           Item("queue-jump study, BPOP MCMC iteration", pick(cfg, "qj_iter", 1),
                _mcmc(cfg, "simple_ecs", 1, 1), per_call=_PER),
           Item("SRASearch robustness MCMC iteration", pick(cfg, "sra_iter", 1),
                _mcmc(cfg, "", 2, pick(cfg, "n_chains", 1), sra=True), per_call=_PER),
           Item("IP-Cov sweep MCMC iteration", n_iter, _mcmc(cfg, pick(cfg, "ipcov_scenario", "slb_ecs_rds"), ipcov, 1),
                per_call=_PER),
           Item("diversity recovery MCMC iteration", n_iter, _mcmc(cfg, "slb_ecs_rds", per_scenario, chains),
                per_call=_PER)]
    return {"01-frontier-likelihood": nb1, "02-baselines-robustness": nb2}
