"""Scale presets for the dp-c4 chapter (spec Sec. 3.7 and 7.3). Notebooks never hard-code sizes."""

from __future__ import annotations

from dataclasses import dataclass, replace

from icml26.core import preset_for


@dataclass(frozen=True)
class DPC4Preset:
    n: int                          # training examples (heavy-tailed logistic)
    d: int                          # dimension
    seeds: int                      # seeds per configuration
    # notebook 1 (noiseless)
    T_noiseless: int                # steps of the clipped-GD / DP-C4 race
    C_fixed: tuple                  # fixed thresholds of the race
    C_bias_grid: tuple              # thresholds for x_C vs C
    T_fixed_point: int              # steps to reach x_C
    decay_rhos: tuple               # per-step threshold decay (NB1 "too fast" cell)
    # notebook 2 (equal privacy, Poisson q)
    T: int                          # steps
    K: int                          # stages
    C_grid: tuple                   # DP-SGD clipping norms
    C0_grid: tuple                  # DP-C4 initial thresholds
    rho_grid: tuple                 # DP-C4 per-stage decay
    # notebook 2 (full batch, GDP)
    T_full: int
    C_grid_full: tuple
    C0_grid_full: tuple
    rho_grid_full: tuple            # per-step decay
    # the comparison protocol (issue 37): step sizes of every method, equal grid sizes
    # (grids of equal size per comparison: 2 x 3 = 1 x 3 x 2 = 2 x 3 at q = 0.1, 3 x 6 = 2 x 3 x 3 full batch).
    # At q = 0.1 DP-C4's step size is fixed at 0.25: on an earlier 18-configuration grid (2 validation seeds)
    # lr 0.125, 0.25 and 0.5 scored within 0.5% of each other for both DP-C4 rows, so the equal budget goes
    # to the axes that matter (DP-SGD: step size x clipping norm; DP-C4: C0 x rho)
    val_seeds: int = 8                           # validation seeds at q = 0.1 (disjoint from the test seeds)
    val_seeds_full: int = 2                      # validation seeds, full batch
    eval_seeds_full: int = 30                    # paired test seeds, full batch (the allocation rows need them)
    lr_grid_sgd: tuple = (2 ** -6, 2 ** -5)      # q = 0.1, DP-SGD step sizes (x C_grid_sgd)
    C_grid_sgd: tuple = (2.0, 4.0, 8.0)          # q = 0.1, DP-SGD clipping norms
    lr_grid_c4: tuple = (0.25,)                  # q = 0.1, DP-C4 step size (x C0_grid x rho_grid)
    lr_grid: tuple = (0.125, 0.25)               # q = 0.1, DP-C4 with a constant threshold (x C0_grid_const)
    C0_grid_const: tuple = (0.025, 0.05, 0.1)    # DP-C4 with a constant threshold (rho = 1)
    lr_grid_gd: tuple = (0.0625, 0.125, 0.25)    # full batch, DP-GD step sizes (x C_grid_gd)
    C_grid_gd: tuple = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)   # full batch, DP-GD clipping norms
    lr_grid_full: tuple = (0.5, 1.0)             # full batch, DP-C4 step sizes (x C0_grid_c4f x rho_grid_c4f)
    C0_grid_c4f: tuple = (0.03125, 0.0625, 0.125)   # full batch, DP-C4 initial thresholds (protocol grid)
    rho_grid_c4f: tuple = (0.98, 0.99, 0.995)    # full batch, DP-C4 per-step decay (protocol grid)
    C0_grid_coarse: tuple = (0.5, 1.0, 2.0)
    rho_grid_coarse: tuple = (0.5, 0.7)
    K_coarse: int = 10
    lam: float = 0.1
    lr: float = 0.5
    lr_full: float = 1.0
    q: float = 0.1
    delta: float = 1e-5
    eps_list: tuple = (1.0, 4.0)
    lr_noiseless: float = 0.5
    log_every: int = 10
    bc_seeds: int = 3               # breast-cancer seeds
    pld: bool = True                # PLD epsilon in the accountant table
    acct_eps: tuple = (1.0, 4.0)    # targets of the accountant cross-check table
    seed: int = 0
    eval_seeds: int = 10            # fresh seeds re-running the best configurations (spread, claims)
    # notebook 2, digits MLP (non-convex, Poisson q, K stages of T/K steps)
    dg_hidden: int = 32
    dg_T: int = 300
    dg_K: int = 10
    dg_lr: float = 0.5
    dg_C_grid: tuple = (0.25, 0.5, 1.0, 2.0)
    dg_C0_grid: tuple = (0.25, 0.5)
    dg_rho_grid: tuple = (0.6, 0.8)
    dg_tune_seeds: int = 2
    dg_log_every: int = 30
    # notebook 3 (accounting table, tilt against n)
    tilt_n: tuple = (625, 1250, 2500, 5000, 10000, 20000)
    tilt_T: int = 200
    tilt_seeds: int = 10
    tilt_C: float = 1.0             # DP-GD clipping norm (fixed for every n)
    tilt_C_large: float = 4.0       # DP-GD with a clipping norm that rarely clips (the fixed-C caveat)
    tilt_C0: float = 0.25           # DP-C4 schedule (fixed for every n)
    tilt_rho: float = 0.95
    prv: bool = True                # Opacus PRV epsilon in the accountant table (staged rows only)

    def dry_run(self) -> DPC4Preset:
        """Loop counts cut (steps, stages, seeds, grids), sizes (n, d) kept."""
        return replace(self, seeds=1, val_seeds=1, val_seeds_full=1, eval_seeds_full=1, C_grid_sgd=self.C_grid_sgd[:1], T_noiseless=10, T_fixed_point=10, T=4, K=4, T_full=4,
                       C_bias_grid=self.C_bias_grid[:2], decay_rhos=self.decay_rhos[:2], C_grid=self.C_grid[:1], C0_grid=self.C0_grid[:1], rho_grid=self.rho_grid[:1],
                       lr_grid=self.lr_grid[:1], C0_grid_const=self.C0_grid_const[:1],
                       lr_grid_sgd=self.lr_grid_sgd[:1], lr_grid_c4=self.lr_grid_c4[:1],
                       lr_grid_gd=self.lr_grid_gd[:1], C0_grid_c4f=self.C0_grid_c4f[:1],
                       rho_grid_c4f=self.rho_grid_c4f[:1],
                       lr_grid_full=self.lr_grid_full[:1], C_grid_gd=self.C_grid_gd[:1],
                       C_grid_full=self.C_grid_full[:2], C0_grid_full=self.C0_grid_full[:1],
                       rho_grid_full=self.rho_grid_full[:1], C0_grid_coarse=self.C0_grid_coarse[:1],
                       rho_grid_coarse=self.rho_grid_coarse[:1], K_coarse=2, bc_seeds=1, pld=False, acct_eps=(1.0,),
                       eps_list=self.eps_list[:1], eval_seeds=1, dg_T=6, dg_K=2, dg_C_grid=self.dg_C_grid[:1],
                       dg_C0_grid=self.dg_C0_grid[:1], dg_rho_grid=self.dg_rho_grid[:1], dg_tune_seeds=1,
                       dg_log_every=3, tilt_n=self.tilt_n[:2], tilt_T=10, tilt_seeds=2, prv=False)


PRESETS = {
    "smoke": DPC4Preset(n=1000, d=10, seeds=1, T_noiseless=2000, C_fixed=(0.1, 1.0, 10.0),
                        C_bias_grid=(0.5, 1.0, 2.0, 4.0), T_fixed_point=1500, decay_rhos=(0.9, 0.99),
                        T=50, K=5, C_grid=(0.5, 1.0), C0_grid=(0.25, 0.5), rho_grid=(0.5,), C_grid_sgd=(0.5, 1.0),
                        lr_grid=(0.5,), C0_grid_const=(0.05, 0.25), lr_grid_full=(1.0,), C_grid_gd=(1.0, 4.0),
                        lr_grid_sgd=(0.0625,), lr_grid_c4=(0.5,), lr_grid_gd=(0.25,), C0_grid_c4f=(0.25,),
                        rho_grid_c4f=(0.95, 0.98), val_seeds=1, val_seeds_full=1, eval_seeds_full=2,
                        T_full=50, C_grid_full=(1.0, 4.0), C0_grid_full=(0.25,), rho_grid_full=(0.95,),
                        C0_grid_coarse=(0.5,), rho_grid_coarse=(0.5,), K_coarse=5, bc_seeds=1, pld=False,
                        acct_eps=(1.0,), log_every=10, eval_seeds=2, dg_hidden=8, dg_T=10, dg_K=2,
                        dg_C_grid=(0.5,), dg_C0_grid=(0.25,), dg_rho_grid=(0.6,), dg_tune_seeds=1, dg_log_every=5,
                        tilt_n=(250, 500, 1000), tilt_T=40, tilt_seeds=3, prv=False),
    "book": DPC4Preset(n=5000, d=10, seeds=3, T_noiseless=2000, C_fixed=(0.1, 1.0, 10.0),
                       C_bias_grid=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0), T_fixed_point=3000,
                       decay_rhos=(0.9, 0.97, 0.99, 0.995),
                       T=1000, K=10, C_grid=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0), C0_grid=(0.0625, 0.125, 0.25),
                       rho_grid=(0.5, 0.85), T_full=200, C_grid_full=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
                       C0_grid_full=(0.25, 0.5, 1.0), rho_grid_full=(0.9, 0.95, 0.98)),
    "gpu": DPC4Preset(n=50000, d=100, seeds=5, T_noiseless=3000, C_fixed=(0.1, 1.0, 10.0),
                      C_bias_grid=(0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0), T_fixed_point=3000,
                      decay_rhos=(0.9, 0.97, 0.99, 0.995),
                      # T sized from the cost model (issue 43): 5,000 steps projected 411 s for notebook 2 on one H100, 2,000 about 210 s
                      T=2000, K=20, C_grid=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0), C0_grid=(0.0625, 0.125, 0.25),
                      rho_grid=(0.6, 0.9), T_full=400, C_grid_full=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
                      C0_grid_full=(0.25, 0.5, 1.0), rho_grid_full=(0.95, 0.975, 0.99), K_coarse=20,
                      log_every=50, eval_seeds=20, val_seeds=8, eval_seeds_full=40, dg_T=600, dg_K=20, dg_tune_seeds=5, dg_log_every=50,
                      tilt_n=(625, 1250, 2500, 5000, 10000, 20000, 40000, 80000), tilt_seeds=20),
}


def preset(scale: str | None = "book") -> DPC4Preset:
    """The preset for ``scale`` (``ICML26_SCALE`` overrides)."""
    return preset_for(PRESETS, scale)
