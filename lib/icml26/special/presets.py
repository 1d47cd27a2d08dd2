"""Scale presets of the ``special`` chapter (spec section 7.4): one preset for all three notebooks."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core import preset_for


@dataclass(frozen=True)
class SpecialPreset:
    # federated domain-incremental digits (NB1, NB2)
    n_clients: int  # M
    clients_per_round: int  # N
    rounds_per_task: int  # T
    local_epochs: int  # E
    lr: float  # local step eta_l
    batch_size: int  # B
    hidden: int  # MLP width H
    seeds: int  # independent runs per method (stacked as one batch)
    angles: tuple[float, ...]  # rotation domains (degrees)
    n_mixed: int  # domains of the hard "mixed" sequence
    alpha: float = 0.5  # Dirichlet label skew
    lams_round: tuple[float, ...] = (0.0, 0.5, 1.0, 3.0)
    lams_task: tuple[float, ...] = (0.03, 0.1)
    fedprox_mus: tuple[float, ...] = (0.1, 1.0, 3.0)  # FedProx client weight, swept like lambda
    replay_per_class: int = 2
    mixed_keep: tuple[str, ...] = ("FedAvg", "SPECIAL lam=1", "SPECIAL-T lam=0.5", "Replay",
                                   "Joint")  # variants run on the "mixed" sequence
    mixed_joint_seeds: int = 3  # joint training on the mixed sequence: a capacity control (mean only)
    ident_seeds: int = 3  # seeds of the float64 server-lr identity on a full run
    # the tuned headline (NB2): both methods tuned on a validation split with equal grids
    tune_lams: tuple[float, ...] = (3.0, 9.0, 19.0)  # SPECIAL's lambda axis (server step 1/4, 1/10, 1/20) ...
    tune_lrs_special: tuple[float, ...] = (0.1, 0.2, 0.4)  # ... times its local-step axis
    tune_lrs_fedavg: tuple[float, ...] = (0.00625, 0.0088, 0.0125, 0.0177, 0.025, 0.035, 0.05, 0.07,
                                          0.1)  # FedAvg: as many local steps as SPECIAL has configs
    val_fraction: float = 0.2  # share of each domain's training split held out for validation
    val_seeds: int = 3  # validation runs per configuration (seeds disjoint from the test seeds)
    val_seed0: int = 1000  # first validation seed; test seeds are seed .. seed + seeds - 1
    # theory (NB3)
    quad_rounds: int = 50
    quad_lams: tuple[float, ...] = (0.0, 0.5, 1.0, 3.0, 9.0, 30.0)
    quad_seeds: int = 5
    quad_rounds_grid: tuple[int, ...] = (10, 30, 100)  # the bound against rounds ...
    quad_steps_grid: tuple[int, ...] = (1, 5, 20)  # ... local steps ...
    quad_clients_grid: tuple[int, ...] = (2, 5, 10)  # ... and clients per round (of 10)
    rate_T: tuple[int, ...] = (50, 200, 800)
    rate_N: tuple[int, ...] = (2, 8, 32)
    rate_E: tuple[int, ...] = (1, 4)
    rate_seeds: int = 16
    rate_gamma_nc: float = 2.0  # weight of the non-convex term; > 1 makes the toy non-convex
    rate_burn_in: int = 3200  # rounds run before G is averaged, in the noise-floor control
    seed: int = 0

    def dry_run(self) -> SpecialPreset:
        """Loop counts cut (rounds, epochs, seeds, grids), sizes kept (clients, width, domains,
        batch size), for ``ICML26_DRY=1`` (see :mod:`icml26.core.scale`)."""
        return replace(self, rounds_per_task=min(self.rounds_per_task, 2), local_epochs=1,
                       seeds=min(self.seeds, 2), ident_seeds=min(self.ident_seeds, 2),
                       mixed_joint_seeds=min(self.mixed_joint_seeds, 2),
                       tune_lams=self.tune_lams[:2], tune_lrs_special=self.tune_lrs_special[:1],
                       tune_lrs_fedavg=self.tune_lrs_fedavg[:2], val_seeds=1,
                       quad_rounds=min(self.quad_rounds, 5), quad_seeds=min(self.quad_seeds, 2),
                       quad_rounds_grid=(5, 10), quad_steps_grid=(1, 2), rate_T=(10, 20),
                       rate_seeds=min(self.rate_seeds, 2), rate_burn_in=min(self.rate_burn_in, 20))


PRESETS = {
    "smoke": SpecialPreset(n_clients=10, clients_per_round=3, rounds_per_task=5, local_epochs=2, lr=0.1,
                           batch_size=16, hidden=64, seeds=1, angles=(0, 25, 50), n_mixed=3, lams_task=(0.1,),
                           fedprox_mus=(0.1, 3.0), ident_seeds=2, mixed_joint_seeds=1,
                           tune_lams=(1.0, 3.0), tune_lrs_special=(0.1,), tune_lrs_fedavg=(0.05, 0.1), val_seeds=1,
                           quad_rounds=20, quad_lams=(0.0, 1.0, 3.0), quad_seeds=2,
                           quad_rounds_grid=(10, 20), quad_steps_grid=(2, 5), quad_clients_grid=(2, 5),
                           rate_T=(25, 100), rate_N=(2, 8), rate_E=(1, 4), rate_seeds=4, rate_burn_in=400),
    "book": SpecialPreset(n_clients=20, clients_per_round=5, rounds_per_task=30, local_epochs=2, lr=0.05,
                          batch_size=16, hidden=64, seeds=10, angles=(0, 25, 50, 75, 100), n_mixed=5),
    "gpu": SpecialPreset(n_clients=100, clients_per_round=10, rounds_per_task=100, local_epochs=2, lr=0.05,
                         batch_size=32, hidden=256, seeds=10, angles=tuple(range(0, 200, 25)), n_mixed=5,
                         quad_seeds=10, rate_T=(50, 200, 800, 3200), rate_seeds=64, rate_burn_in=12800),
}


def preset(scale: str | None = "book") -> SpecialPreset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
