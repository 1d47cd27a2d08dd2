"""Runners the notebooks call (return dicts / DataFrames)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core.compare import t_interval
from .camera import make_camera, random_camera, rasterize
from .losses import render_losses
from .metrics import (
    activation_memory_estimate,
    chamfer_fscore,
    oracle_field,
    render_gradient,
    saved_tensor_bytes,
    surface_voxels,
)
from .model import NeighborhoodAttention, SparseConv3d, SparseVAE
from .presets import FocusingPreset
from .render import render_sdf
from .shapes import SELF_OCCLUDING, SHAPE_KINDS, make_shape, sample_surface
from .train import (
    DEGENERATE_SHARE,
    TrainConfig,
    evaluate,
    fit_field,
    prepare,
    reference_fields,
    score_field,
    step_loss,
    train_vae,
    view_for_scheme,
)
from .views import adaptive_zoom, carve, frustum_section, in_frustum
from .voxels import SparseGrid, voxelize_points


def sphere_mesh(r: float = 0.35, n_uv: int = 64):
    """An exact (un-randomised) UV sphere of radius ``r`` centred at the origin."""
    from .shapes import Mesh, _grid_mesh, _sphere_grid
    T, Ph = _sphere_grid(n_uv)
    P = r * torch.stack([T.sin() * Ph.cos(), T.sin() * Ph.sin(), T.cos()], -1)
    v, f = _grid_mesh(P, False, True)
    return Mesh(v.float(), f, False, "sphere")


def gallery(cfg: FocusingPreset, H: int = 96) -> list[dict]:
    """Ground-truth renders of one shape of every kind from a fixed camera."""
    cam = make_camera([1.3, -1.5, 1.1], H, H)
    return [{"kind": k, **rasterize(make_shape(k, 0, cfg.n_uv), cam)} for k in SHAPE_KINDS]


def plane_band(res: int, depth_axis_sign: float = 1.0) -> tuple[SparseGrid, torch.Tensor]:
    """Fine voxels of a two-voxel band around the plane ``z = 0`` and the vertex field ``sign * z``."""
    ar = torch.arange(res)
    c = torch.stack(torch.meshgrid(ar, ar, torch.arange(res // 2 - 2, res // 2 + 2), indexing="ij"), -1).reshape(-1, 3)
    g = SparseGrid(c, res)
    v, _ = g.corner_vertices()
    return g, depth_axis_sign * (v[:, 2].float() / res - 0.5)


def renderer_checks(res: int = 32, H: int = 64, d: float = 2.0, r: float = 0.35) -> dict:
    """Depth/opacity of a sheet from both sides (both field signs) and sphere silhouette coverage."""
    out = {"depth_err": 0.0, "min_opacity": 1.0}
    for sign in (1.0, -1.0):
        g, s = plane_band(res, sign)
        for eye in ([0, 0, d], [0, 0, -d]):
            pr = render_sdf(s, g, make_camera(eye, H, H, fov_deg=20))
            c = H // 2
            out["depth_err"] = max(out["depth_err"], abs(float(pr["depth"][c, c]) - d))
            out["min_opacity"] = min(out["min_opacity"], float(pr["mask"][c, c]))
    # sphere band: the field is the exact signed distance at the vertices of the voxels near the sphere
    pts, nrm = sample_surface(sphere_mesh(r, 96), 60000, 0)
    coords = voxelize_points(pts, res)
    g = SparseGrid(coords, res)
    v, _ = g.corner_vertices()
    s = (v.float() / res - 0.5).norm(dim=-1) - r
    cam = make_camera([0, 0, d], H, H)
    pr = render_sdf(s, g, cam)
    rp = cam.fx * r / math.sqrt(d * d - r * r)
    out["coverage"] = float(pr["mask"].mean())
    out["coverage_formula"] = math.pi * rp * rp / (H * H)
    return out


def dense_equivalence(res: int = 4, dim: int = 8, seed: int = 0) -> dict:
    """Max abs difference of the sparse convolution vs ``conv3d`` and of neighbourhood attention vs masked
    dense attention on a fully occupied ``res^3`` grid."""
    torch.manual_seed(seed)
    ar = torch.arange(res)
    c = torch.stack(torch.meshgrid(ar, ar, ar, indexing="ij"), -1).reshape(-1, 3)
    g = SparseGrid(c, res)
    x = torch.randn(res ** 3, dim)
    conv = SparseConv3d(dim, dim)
    dense = x.T.reshape(1, dim, res, res, res)
    w = conv.weight.reshape(3, 3, 3, dim, dim).permute(4, 3, 0, 1, 2)
    ref = torch.nn.functional.conv3d(dense, w, conv.bias, padding=1).reshape(dim, -1).T
    att = NeighborhoodAttention(dim, 2)
    q, k, v = att.qkv(x).reshape(-1, 3, 2, dim // 2).unbind(1)
    nb = ((c[:, None, :] - c[None, :, :]).abs().max(-1).values <= 1)
    logit = torch.einsum("ihd,jhd->hij", q, k) / math.sqrt(dim // 2)
    a = logit.masked_fill(~nb[None], -math.inf).softmax(-1)
    dref = att.proj(torch.einsum("hij,jhd->ihd", a, v).reshape(res ** 3, dim))
    with torch.no_grad():
        return {"conv": float((conv(x, g) - ref).abs().max()), "attention": float((att(x, g) - dref).abs().max())}


def tsdf_warmup_runs(cfg: FocusingPreset) -> dict:
    """NB1: fit the free field of one shape four ways (plain / +TSDF warm-up / +TV / both)."""
    sd = prepare(make_shape(cfg.fit_kind, cfg.seed, cfg.n_uv), cfg.res_lat, cfg.n_points, cfg.seed)
    q = max(1, cfg.fit_steps // 4)
    eval_at = sorted({0, q // 2, q, 2 * q, cfg.fit_steps})
    runs = {}
    for name, tsdf, tv in tqdm([("plain", False, False), ("tsdf warm-up", True, False), ("tv", False, True),
                                ("tsdf warm-up + tv", True, True)], leave=False):
        runs[name] = fit_field(sd, cfg.fit_steps, cfg.H, cfg.H, tsdf, tv, seed=cfg.seed, lr=cfg.fit_lr,
                               eval_at=eval_at, n_eval=cfg.fit_eval)
    rows = [{"run": n, "step": s, "hole": h, "render": r, "cd_l1": c}
            for n, o in runs.items() for s, h, r, c in zip(o["step"], o["hole"], o["render"], o["cd_l1"])]
    return {"runs": runs, "frame": pd.DataFrame(rows), "quarter": q, "shape": sd}


def watertight_detour(eps_list, n: int = 100_000, seed: int = 0) -> pd.DataFrame:
    """CD-L1 between an open unit-square sheet (scaled to 0.8) and the closed shell ``|udf| = eps`` built
    from it (two sheets at ``+-eps``; the rim is left out, which only lowers the error)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for eps in eps_list:
        a = (torch.rand(n, 2, generator=g) - 0.5) * 0.8
        b = (torch.rand(n, 2, generator=g) - 0.5) * 0.8
        sheet = torch.cat([a, torch.zeros(n, 1)], 1)
        side = torch.where(torch.rand(n, 1, generator=g) < 0.5, eps, -eps)
        shell = torch.cat([b, side], 1)
        rows.append({"eps": eps, "cd_l1": chamfer_fscore(shell, sheet, (eps / 2,))["cd_l1"]})
    return pd.DataFrame(rows)


def test_shapes(cfg: FocusingPreset) -> list:
    return [prepare(make_shape(k, s, cfg.n_uv), cfg.res_lat, cfg.n_points, s)
            for k in cfg.test_kinds for s in cfg.test_seeds]


def count_study(cfg: FocusingPreset, shapes=None) -> pd.DataFrame:
    """Kept latent voxels per view for every scheme (spec claims 1, 2, 5)."""
    shapes = shapes or test_shapes(cfg)
    rng = torch.Generator().manual_seed(cfg.seed + 7)
    zrng = torch.Generator().manual_seed(cfg.seed + 8)
    rows = []
    for i, sd in enumerate(tqdm(shapes, leave=False)):
        for v in range(cfg.views):
            cam = random_camera(rng, cfg.H, cfg.H)
            gt = rasterize(sd.mesh, cam)
            base = {"shape": i, "kind": sd.mesh.kind, "is_open": sd.mesh.is_open, "view": v,
                    "N": sd.latent.shape[0]}
            rows.append({**base, "scheme": "full", "kept": int(in_frustum(sd.latent, sd.res_lat, cam).sum()),
                         "pixels": int(gt["mask"].sum())})
            for a in cfg.fsv_alphas:
                k, _ = frustum_section(sd.latent, sd.res_lat, cam, a)
                rows.append({**base, "scheme": f"fsv (alpha={a:g})", "kept": int(k.sum())})
            keep = carve(sd.latent, sd.res_lat, cam, gt["depth"])
            rows.append({**base, "scheme": "focus", "kept": int(keep.sum()), "pixels": int(gt["mask"].sum())})
            zc, zgt, zkeep, info = adaptive_zoom(sd.mesh, sd.latent, sd.res_lat, cam, cfg.budget // 2,
                                                 cfg.budget, zrng, cfg.zeta_max)
            rows.append({**base, "scheme": "focus_zoom", "kept": int(zkeep.sum()), "zeta": info["zeta"],
                         "capped": info["capped"], "n0": info["n0"], "pixels": int(zgt["mask"].sum())})
    return pd.DataFrame(rows)


def sphere_distance(cfg: FocusingPreset, r: float = 0.35, views: int = 8, H: int | None = None) -> pd.DataFrame:
    """Kept fraction of a voxelised sphere shell vs camera distance, against ``(1 - r/d)/2``. The image
    (``H``, default ``4 cfg.H``) is fine enough that even at the largest distance every latent voxel
    covers several pixels: the law is about geometry, not about pixel sampling."""
    H = H or 4 * cfg.H
    pts, _ = sample_surface(sphere_mesh(r, 64), cfg.n_points, 0)
    mesh = sphere_mesh(r, 64)
    coords = voxelize_points(pts, cfg.res_lat)
    rows = []
    for d in cfg.sphere_dists:
        rng = torch.Generator().manual_seed(cfg.seed + 11)   # the same directions at every distance
        fr = []
        for _ in range(views):
            cam = random_camera(rng, H, H, dist=(d, d), fov_deg=45.0)
            gt = rasterize(mesh, cam)
            fr.append(float(carve(coords, cfg.res_lat, cam, gt["depth"]).float().mean()))
        rows.append({"d": d, "kept_fraction": sum(fr) / len(fr), "cap_fraction": (1 - r / d) / 2})
    return pd.DataFrame(rows)


def coverage_study(cfg: FocusingPreset, shapes=None, kappas=(0.02, 0.1), rel_tol: float = 1e-6) -> pd.DataFrame:
    """Render coverage of the decoded fine voxels per scheme (claim 4) with a converged field (the
    oracle signed distance of :func:`oracle_field`) standing in for a trained decoder [book choice].

    ``coverage``: share of the decoded *surface* voxels (corner signs differ) that get a render-loss
    gradient above ``rel_tol`` of the largest, with the sharp renderer ``kappa = kappas[0]`` (closest to
    the paper's rasteriser, where occluded voxels get exactly zero gradient); ``coverage_all``: the same
    over all decoded fine voxels; ``coverage_soft``: surface voxels at the training sharpness
    ``kappas[1]``; ``recall``: share of the surface voxels covered under ``full`` (same camera) that the
    scheme decodes (not defined for the zoomed camera)."""
    shapes = shapes or test_shapes(cfg)
    rng = torch.Generator().manual_seed(cfg.seed + 21)
    zrng = torch.Generator().manual_seed(cfg.seed + 22)
    tcfg = TrainConfig(H=cfg.H, W=cfg.H, res_lat=cfg.res_lat, budget=cfg.budget, zeta_max=cfg.zeta_max,
                       alpha=0.3)
    rows = []
    for i, sd in enumerate(tqdm(shapes, leave=False)):
        for v in range(cfg.coverage_views):
            cam0 = random_camera(rng, cfg.H, cfg.H)
            covered_full = None
            for scheme in ("full", "fsv", "focus", "focus_zoom"):
                cam, gt, keep, info = view_for_scheme(sd, cam0, scheme, tcfg, zrng)
                lat = sd.latent if keep is None else sd.latent[keep]
                fine = _children_in(lat, sd.fine_occ) if lat.shape[0] else None
                if fine is None:
                    continue
                s = oracle_field(fine, sd.points, sd.normals)
                surf = surface_voxels(fine, s)
                g = render_gradient(fine, s, cam, gt, kappas[0])
                cov = g > rel_tol * g.max()
                gs = render_gradient(fine, s, cam, gt, kappas[1])
                keys = set(fine.key(fine.coords[cov & surf]).tolist())
                if scheme == "full":
                    covered_full = keys
                recall = (len(keys & covered_full) / max(1, len(covered_full))
                          if scheme in ("full", "fsv", "focus") and covered_full is not None else float("nan"))
                rows.append({"shape": i, "kind": sd.mesh.kind, "is_open": sd.mesh.is_open,
                             "self_occluding": sd.mesh.kind in SELF_OCCLUDING, "view": v, "scheme": scheme,
                             "decoded": len(fine), "coverage": float(cov[surf].float().mean()),
                             "coverage_all": float(cov.float().mean()),
                             "coverage_soft": float((gs[surf] > rel_tol * gs.max()).float().mean()),
                             "recall": recall})
    return pd.DataFrame(rows)


def _children_in(latent: torch.Tensor, fine_occ: torch.Tensor):
    from .voxels import CORNERS
    ch = (2 * latent[:, None, :] + CORNERS.to(latent.device)[None]).reshape(-1, 3)
    ch = ch[fine_occ[ch[:, 0], ch[:, 1], ch[:, 2]]]
    return SparseGrid(ch, fine_occ.shape[0], check=False) if ch.shape[0] else None


def train_config(cfg: FocusingPreset, scheme: str, seed: int = 0, device: str = "cpu", **kw) -> TrainConfig:
    """The :class:`TrainConfig` of a preset; ``kw`` overrides fields (one change per ablation)."""
    base = dict(scheme=scheme, steps=cfg.steps, H=cfg.H, W=cfg.H, res_lat=cfg.res_lat, width=cfg.width,
                blocks=cfg.blocks, lr=cfg.lr, budget=cfg.budget, zeta_max=cfg.zeta_max, n_points=cfg.n_points,
                seed=seed, device=device, tsdf_warmup_frac=cfg.tsdf_frac)
    return TrainConfig(**{**base, **kw})


#: training runs of notebook 3: label -> (scheme, TrainConfig overrides); one change per ablation
RUNS = {
    "full": ("full", {}),
    "fsv": ("fsv", {}),
    "focus": ("focus", {}),
    "focus_zoom": ("focus_zoom", {}),
    "focus_zoom, no TSDF term": ("focus_zoom", {"tsdf_warmup_frac": 0.0}),
    "focus_zoom, whole-grid context": ("focus_zoom", {"context": True}),
    "full, 10% warm-up": ("full", {"tsdf_warmup_frac": 0.1}),
}


class Runs:
    """The trained models of notebook 3, cached by ``(label, seed, lr)``, and their scores.

    Three disjoint shape sets of the same kinds: **training** shapes (shape seeds ``cfg.train_seeds``),
    **validation** shapes (``cfg.val_seeds``: tuning only) and **test** shapes (``cfg.test_seeds``:
    the reported numbers). A training seed fixes the initial weights (the model is built right after
    ``torch.manual_seed(seed)``, as :func:`icml26.core.paired_init` does), the camera sequence and the
    latent noise, the same for every run. A tuning run with training seed ``s`` on the training shapes
    *is* the run of seed ``s`` for the test table: it is trained once and scored on both sets."""

    def __init__(self, cfg: FocusingPreset, device: str = "cpu", progress: bool = True):
        def shapes(seeds):
            return [prepare(make_shape(k, s, cfg.n_uv), cfg.res_lat, cfg.n_points, s, device)
                    for k in cfg.test_kinds for s in seeds]

        if set(cfg.val_seeds) & (set(cfg.test_seeds) | set(cfg.train_seeds)):
            raise ValueError("cfg: val_seeds must be disjoint from train_seeds and test_seeds")
        self.cfg, self.device, self.progress = cfg, device, progress
        self.train, self.val, self.test = shapes(cfg.train_seeds), shapes(cfg.val_seeds), shapes(cfg.test_seeds)
        h = 1.0 / (2 * cfg.res_lat)
        self.taus = (h / 2, h)
        self._models, self._scores = {}, {}

    def _score(self, model, shapes) -> list[dict]:
        return evaluate(model, shapes, self.taus, n_views=self.cfg.eval_views, H=self.cfg.H)

    def tsdf_of(self, label: str, tsdf: float | None = None) -> float:
        """The TSDF share of run ``label``: its own where :data:`RUNS` fixes it (a control of that knob),
        else ``tsdf``, else the preset's ``tsdf_frac``."""
        if label not in RUNS:
            raise ValueError(f"label must be one of {sorted(RUNS)}, got {label!r}")
        over = RUNS[label][1]
        if "tsdf_warmup_frac" in over:
            return float(over["tsdf_warmup_frac"])
        t = self.cfg.tsdf_frac if tsdf is None else tsdf
        if not 0.0 <= float(t) <= 1.0:
            raise ValueError(f"tsdf must lie in [0, 1], got {t!r}")
        return float(t)

    def trained(self, label: str, seed: int, lr: float, tsdf: float | None = None):
        """``(model, history DataFrame, snapshots)`` of run ``label`` with learning rate ``lr`` and TSDF
        share ``tsdf`` (:meth:`tsdf_of`), trained on first use."""
        t = self.tsdf_of(label, tsdf)
        key = (label, int(seed), float(lr), t)
        if key not in self._models:
            scheme, over = RUNS[label]
            tc = train_config(self.cfg, scheme, int(seed), self.device,
                              **{**over, "lr": float(lr), "tsdf_warmup_frac": t})
            model, hh = train_vae(self.train, tc, progress=self.progress, snap_every=self.cfg.snap_every)
            snaps = hh.pop("snapshots")
            self._models[key] = (model, pd.DataFrame(hh), snaps)
        return self._models[key]

    def scores(self, label: str, seed: int, lr: float, split: str = "test", tsdf: float | None = None) -> pd.DataFrame:
        """Per-shape scores (:func:`~icml26.focusing.train.score_field`) of a trained run on ``split``."""
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {split!r}")
        t = self.tsdf_of(label, tsdf)
        key = (label, int(seed), float(lr), t, split)
        if key not in self._scores:
            model = self.trained(label, seed, lr, t)[0]
            rows = self._score(model, self.val if split == "val" else self.test)
            self._scores[key] = pd.DataFrame([{"run": label, "seed": seed, "lr": lr, "tsdf_frac": t, **r}
                                              for r in rows])
        return self._scores[key]

    def validation_cd(self, label: str, lr: float, degenerate: str = "inf", tsdf: float | None = None) -> float:
        """Tuning objective: mean CD-L1 on the validation shapes of the run with the first training seed
        (learning rate ``lr``, TSDF share ``tsdf``).

        A field with no zero crossing on a shape is scored by its fine voxel centres
        (:func:`~icml26.focusing.train.score_field`), which lands near the ground-truth band's CD-L1,
        *below* the untrained decoder's: ranked by CD-L1 alone, a run that collapsed to an empty field
        would win the tuning. A field with a handful of zero crossings is no surface either
        (**degenerate**: fewer than :data:`~icml26.focusing.train.DEGENERATE_SHARE` of the band's voxels).
        So with ``degenerate="inf"`` a configuration whose field is degenerate (or empty) on any
        validation shape scores ``+inf`` (ranked last; :func:`~icml26.core.compare.tune` raises where
        every configuration does, see :func:`tune_lr`). ``degenerate="share"`` is the fallback objective
        ``10 x (share of degenerate validation fields) + mean CD-L1``: fewest degenerate fields first,
        CD-L1 (below 1 in the unit cube) breaking ties."""
        if degenerate not in ("inf", "share"):
            raise ValueError(f"degenerate must be 'inf' or 'share', got {degenerate!r}")
        sc = self.scores(label, self.cfg.train_seeds_runs[0], lr, "val", tsdf)
        share = float(sc["degenerate"].astype(bool).mean())
        if degenerate == "share":
            return 10.0 * share + float(sc.cd_l1.mean())
        return math.inf if share > 0 else float(sc.cd_l1.mean())

    def floor(self, seed: int, split: str = "test") -> pd.DataFrame:
        """The no-learning floor: the untrained decoder of training seed ``seed`` (zero steps), scored on
        the ``split`` shapes (``"test"`` or ``"val"``) exactly as a trained run."""
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {split!r}")
        key = ("no training", int(seed), 0.0, 0.0, split)
        if key not in self._scores:
            torch.manual_seed(int(seed))                       # the same initial weights as the runs
            model = SparseVAE(self.cfg.res_lat, self.cfg.width, self.cfg.blocks).to(self.device)
            self._scores[key] = pd.DataFrame([{"run": "no training", "seed": seed, "lr": 0.0, **r}
                                              for r in self._score(model, self.val if split == "val" else self.test)])
        return self._scores[key]

    def reference(self, which: str) -> pd.DataFrame:
        """The ground-truth band (``"band"``) or the oracle field (``"oracle"``) of every test shape
        (:func:`~icml26.focusing.train.reference_fields`), scored like a decode."""
        key = (which, 0, 0.0, 0.0, "test")
        if key not in self._scores:
            rows = [score_field(*reference_fields(sd, which), sd, i, self.taus, n_views=self.cfg.eval_views,
                                H=self.cfg.H) for i, sd in enumerate(self.test)]
            self._scores[key] = pd.DataFrame([{"run": which, "seed": 0, "lr": 0.0, **r} for r in rows])
        return self._scores[key]

    def result(self, configs: dict) -> dict:
        """The trained runs with configurations ``configs[label]`` (``{"lr": ..., "tsdf_frac": ...}``, or
        a learning rate alone) in the layout the notebook's plots read: ``hist`` and ``models`` keyed by
        ``(label, seed)``, ``eval`` (test scores), shapes and ``taus``."""
        hist, models, evals = {}, {}, []
        want = {lab: _config(c) for lab, c in configs.items()}
        for (label, seed, lr, t), (model, hh, snaps) in self._models.items():
            if label in want and want[label]["lr"] == lr and self.tsdf_of(label, want[label]["tsdf_frac"]) == t:
                hist[(label, seed)] = hh
                models[(label, seed)] = (model, snaps)
                evals.append(self.scores(label, seed, lr, tsdf=t))
        return {"hist": hist, "models": models, "eval": pd.concat(evals, ignore_index=True), "test": self.test,
                "train": self.train, "taus": self.taus, "configs": want,
                "eval_views": self.cfg.eval_views, "H": self.cfg.H}


def _config(c) -> dict:
    """``{"lr": float, "tsdf_frac": float | None}`` from a config dict or a bare learning rate."""
    if isinstance(c, dict):
        if "lr" not in c:
            raise ValueError(f"configs: a configuration needs an 'lr', got {c!r}")
        return {"lr": float(c["lr"]), "tsdf_frac": None if c.get("tsdf_frac") is None else float(c["tsdf_frac"])}
    if isinstance(c, (int, float)):
        return {"lr": float(c), "tsdf_frac": None}
    raise TypeError(f"configs: a configuration must be a dict or a learning rate, got {type(c).__name__}")


#: why a best value at an end of the grid is accepted (:meth:`~icml26.core.compare.Tuned.state_edge`)
#: where no measurement is needed; notebook 3's text states the same reason. A learning rate at either
#: end is stated with a measurement instead (:func:`probe_upper_lr`, :func:`probe_lower_lr`), and so is
#: the TSDF warm-up at the lower end (:func:`probe_tsdf_share`).
TSDF_EDGE_REASONS = {
    "upper": "1.0 is the largest share there is: the TSDF term on every step",
}


def tune_lr(runs: Runs, label: str, grid) -> tuple:
    """Tune run ``label`` on the validation shapes (:meth:`Runs.validation_cd`) over ``grid``
    (axes ``lr`` and optionally ``tsdf_frac``): ``(Tuned, note)``. Where every configuration decodes an
    degenerate field on some validation shape (all score ``+inf``, so :func:`~icml26.core.compare.tune`
    raises), the runs are ranked by the fallback objective (``degenerate="share"``) and ``note`` says so (the
    notebook prints it); otherwise ``note`` is empty."""
    from icml26.core import tune
    if not isinstance(runs, Runs):
        raise TypeError(f"runs must be a Runs, got {type(runs).__name__}")
    if label not in RUNS:
        raise ValueError(f"label must be one of {sorted(RUNS)}, got {label!r}")
    try:
        return tune(label, lambda c: runs.validation_cd(label, c["lr"], tsdf=c.get("tsdf_frac")), grid), ""
    except ValueError as err:
        if "diverged" not in str(err):
            raise
    t = tune(label, lambda c: runs.validation_cd(label, c["lr"], degenerate="share", tsdf=c.get("tsdf_frac")), grid)
    return t, (f"{label}: every configuration decoded a degenerate field (fewer zero crossings than "
               f"{DEGENERATE_SHARE:.0%} of the band's voxels) on at least one validation shape; ranked by "
               "10 x the share of degenerate validation fields + CD-L1 instead")


def validation_fields(runs: Runs, label: str, lr: float, tsdf) -> dict:
    """What the tuning objective hides behind ``+inf``: on the validation shapes, the run of the first
    training seed (``label``, ``lr``, ``tsdf``) scores ``own`` (its mean CD-L1 with every field at its own
    score, degenerate ones included), has ``degenerate`` degenerate fields of ``n`` and ``low_share`` (its
    lowest zero crossings per band voxel). Read from the cached scores: no extra training or decoding."""
    sc = runs.scores(label, runs.cfg.train_seeds_runs[0], lr, "val", tsdf)
    return {"own": float(sc.cd_l1.mean()), "degenerate": int(sc["degenerate"].sum()), "n": len(sc),
            "low_share": float((sc.n_points / sc.n_band.clip(lower=1)).min())}


def _probe(runs: Runs, label: str, tuned, lr: float, tsdf, what: str) -> tuple:
    """Score one configuration outside the grid on the validation shapes and say how it compares."""
    best = tuned.best_score
    val = runs.validation_cd(label, lr, tsdf=tsdf)
    worse = not val < best
    if math.isfinite(val):
        got = f"{val:.4f}"
    else:
        f = validation_fields(runs, label, lr, tsdf)
        floor = float(runs.floor(runs.cfg.train_seeds_runs[0], "val").cd_l1.mean())
        got = (f"inf (degenerate on {f['degenerate']} of the {f['n']} validation shapes, ranked last; at its own "
               f"score CD-L1 {f['own']:.4f}, {f['own'] / floor:.1f} times the validation floor)")
    return val, (f"{what} measured on the validation shapes scores {got} against {best:.4f} at the tuned "
                 "configuration: " + ("worse" if worse else "better, but the grid stops here for CPU time"))


def probe_upper_lr(runs: Runs, label: str, tuned, factor: float = 2.0) -> tuple:
    """Where ``tuned``'s best learning rate is the upper end of its grid, measure ``factor`` times it
    (the other knobs as tuned) on the validation shapes and return ``(probe lr, its validation score,
    reason)``; the reason states both numbers and is what the notebook passes to
    :meth:`~icml26.core.compare.Tuned.state_edge`. The probe is not a grid point (the budget of
    configurations stays equal across methods); a probe that scores *better* says so in the reason."""
    if tuned.edges.get("lr") != "upper":
        raise ValueError(f"tuned: {tuned.method}'s best lr is not at the upper edge (edges {tuned.edges})")
    if not factor > 1:
        raise ValueError(f"factor must be > 1, got {factor!r}")
    lr = tuned.best["lr"] * factor
    val, why = _probe(runs, label, tuned, lr, tuned.best.get("tsdf_frac"), f"lr {lr:g} (the same other knobs)")
    return lr, val, why


def probe_lower_lr(runs: Runs, label: str, tuned, factor: float = 0.5) -> tuple:
    """:func:`probe_upper_lr` at the lower end: where the best learning rate is the lowest of the grid,
    measure ``factor`` (< 1) times it on the validation shapes; ``(probe lr, score, reason)``."""
    if tuned.edges.get("lr") != "lower":
        raise ValueError(f"tuned: {tuned.method}'s best lr is not at the lower edge (edges {tuned.edges})")
    if not 0 < factor < 1:
        raise ValueError(f"factor must lie in (0, 1), got {factor!r}")
    lr = tuned.best["lr"] * factor
    val, why = _probe(runs, label, tuned, lr, tuned.best.get("tsdf_frac"), f"lr {lr:g} (the same other knobs)")
    return lr, val, why


def probe_tsdf_share(runs: Runs, label: str, tuned, share: float = 0.0) -> tuple:
    """Where ``tuned``'s best TSDF share is the lowest of its grid, measure the smaller ``share``
    (default 0: no TSDF term at all) at the tuned learning rate on the validation shapes;
    ``(share, score, reason)``."""
    if tuned.edges.get("tsdf_frac") != "lower":
        raise ValueError(f"tuned: {tuned.method}'s best tsdf_frac is not at the lower edge (edges {tuned.edges})")
    if not 0 <= share < tuned.best["tsdf_frac"]:
        raise ValueError(f"share must lie in [0, {tuned.best['tsdf_frac']}), got {share!r}")
    what = ("no TSDF term" if share == 0 else f"TSDF share {share:g}") + f" (lr {tuned.best['lr']:g})"
    val, why = _probe(runs, label, tuned, tuned.best["lr"], share, what)
    return share, val, why


#: the measured probe one step beyond each measurable end of notebook 3's grid
PROBES = {("lr", "upper"): probe_upper_lr, ("lr", "lower"): probe_lower_lr,
          ("tsdf_frac", "lower"): probe_tsdf_share}


def tune_methods(runs: Runs, grid, labels=("full", "focus_zoom")) -> dict:
    """Notebook 3's tuning: every run of ``labels`` tuned on the validation shapes over the same ``grid``
    (:func:`tune_lr`); a best value at a measurable end of an axis is probed one step beyond it
    (:data:`PROBES`, outside the grid, so the budget of configurations stays equal) and stated with the
    measured reason, the upper end of the TSDF share with :data:`TSDF_EDGE_REASONS`. Returns a dict:
    ``tuned`` and ``notes`` per label, ``edge_text`` (one sentence per probed edge), the validation floor
    ``val_floor`` (the untrained decoder of the first training seed), ``val_beat`` (configurations below
    it), ``val_margin`` (floor minus the best score), ``val_text`` and the ``table`` of every score."""
    if not isinstance(runs, Runs):
        raise TypeError(f"runs must be a Runs, got {type(runs).__name__}")
    tuned, notes, edge_text, probes = {}, {}, [], {}
    for n in labels:
        tuned[n], notes[n] = tune_lr(runs, n, grid)
        for axis, side in tuned[n].edges.items():
            if (axis, side) in PROBES:
                value, _, why = PROBES[axis, side](runs, n, tuned[n])
                probes[n, axis, side] = value
                knob = "learning rate" if axis == "lr" else "TSDF share"
                edge_text.append(f"{n}'s best {knob} is the {side} end of the grid, and {why}")
            elif axis == "tsdf_frac":
                why = TSDF_EDGE_REASONS[side]
            else:
                raise ValueError(f"grid: no probe or stated reason for the {side} end of axis {axis!r}")
            tuned[n].state_edge(axis, why)
    val_floor = float(runs.floor(runs.cfg.train_seeds_runs[0], "val").cd_l1.mean())
    val_all = [v for t in tuned.values() for _, v in t.scores]
    beat, margin = sum(v < val_floor for v in val_all), val_floor - min(val_all)
    val_text = (f"{beat} of the {len(val_all)} configurations score below it, the best by {margin:.4f}" if beat
                else f"none of the {len(val_all)} configurations scores below it")
    frames = []
    for n, t in tuned.items():
        fr = t.frame().assign(method=n)
        own = [validation_fields(runs, n, lr, ts) for lr, ts in
               zip(fr.lr, fr.tsdf_frac if "tsdf_frac" in fr else [None] * len(fr))]
        frames.append(fr.assign(own=[f["own"] for f in own], degenerate=[f["degenerate"] for f in own],
                                low_share=[f["low_share"] for f in own]))
    table = pd.concat(frames + [pd.DataFrame([{"validation": val_floor, "own": val_floor,
                                               "method": "no training (floor)"}])])
    if "degenerate" in table:
        table["degenerate"] = table["degenerate"].astype("Int64")
    return {"tuned": tuned, "notes": notes, "edge_text": "; ".join(edge_text)
            or "no best value sits at a measurable end of the grid", "val_floor": val_floor, "val_beat": beat,
            "val_margin": margin, "val_text": val_text, "table": table,
            "near_text": near_bar_text(table), "gap_text": tuning_gap_text(runs, tuned, probes)}


def near_bar_text(table: pd.DataFrame, factor: float = 4.0) -> str:
    """The tuning configurations whose lowest validation share (zero crossings per band voxel, column
    ``low_share`` of :func:`tune_methods`' table) lies within ``factor`` of
    :data:`~icml26.focusing.train.DEGENERATE_SHARE`: where the bar's exact value could matter."""
    rows = table[table.low_share.notna()] if "low_share" in table else table.iloc[:0]
    near = rows[(rows.low_share >= DEGENERATE_SHARE / factor) & (rows.low_share <= DEGENERATE_SHARE * factor)]
    if near.empty:
        return (f"no tuning configuration has its lowest validation share within a factor {factor:g} of the "
                f"{DEGENERATE_SHARE:.0%} bar")
    return (f"{len(near)} tuning configurations have their lowest validation share within a factor {factor:g} "
            "of the bar: " + "; ".join(f"{r.method} lr {r.lr:g}"
                                       + (f", TSDF share {r.tsdf_frac:g}" if "tsdf_frac" in near else "")
                                       + f": {r.low_share:.1%}" for r in near.itertuples()))


def tuning_gap_text(runs: Runs, tuned: dict, probes: dict) -> str:
    """By how much each method's chosen configuration beat its runner-up on the validation shapes (first
    training seed only), and, where its learning rate is the upper end of the grid, how many validation
    fields the probe above it (``probes[label, "lr", "upper"]``, the probed rate) decodes degenerate."""
    parts = []
    for n, t in tuned.items():
        vals = sorted(v for _, v in t.scores if math.isfinite(v))
        part = (f"`{n}`'s best configuration beat the next by {vals[1] - vals[0]:.4f}" if len(vals) > 1
                else f"`{n}` has {len(vals)} configuration(s) without a degenerate validation field")
        lr = probes.get((n, "lr", "upper"))
        if lr is not None:
            f = validation_fields(runs, n, lr, t.best.get("tsdf_frac"))
            part += (f", and its learning rate sits a factor {lr / t.best['lr']:g} below one whose field is "
                     f"degenerate on {f['degenerate']} of the {f['n']} validation shapes")
        parts.append(part)
    return "; ".join(parts) + " (one training seed)"


def step_trend(cfg: FocusingPreset, points=((100, 2.5e-3), (200, 2.5e-3), (200, 5e-3), (400, 2.5e-3)),
               label: str = "full", tsdf: float = 0.1, device: str = "cpu") -> pd.DataFrame:
    """Does training longer make ``label`` beat the no-learning floor? For each ``(steps, lr)`` of
    ``points``, the run of notebook 3 (first training seed, TSDF share ``tsdf``) trained for ``steps``
    instead of ``cfg.steps`` and scored on the **validation** shapes: mean CD-L1, F1 at ``h/2``, degenerate
    fields and the validation floor (the untrained decoder of the same seed). Too costly for a book
    notebook (a 200-step run of ``full`` costs four times the book's); :data:`STEP_TREND` holds its
    measured output, which the notebook quotes."""
    rows = []
    for steps, lr in points:
        runs = Runs(replace(cfg, steps=int(steps), snap_every=int(steps)), device, progress=False)
        seed = cfg.train_seeds_runs[0]
        sc, fl = runs.scores(label, seed, lr, "val", tsdf), runs.floor(seed, "val")
        f1 = f"f1@{runs.taus[0]:g}"
        rows.append({"steps": int(steps), "lr": float(lr), "cd_l1": float(sc.cd_l1.mean()),
                     "f1": float(sc[f1].mean()), "degenerate": int(sc["degenerate"].sum()),
                     "floor": float(fl.cd_l1.mean()), "floor_f1": float(fl[f1].mean())})
    return pd.DataFrame(rows)


#: :func:`step_trend` with the book preset, measured on 2026-12-06 (one CPU thread, the 10% TSDF warm-up):
#: run, training seed, steps, lr, validation CD-L1, F1 at h/2, empty validation fields (no zero crossing: the
#: rule of the day, before degenerate fields were counted), and the validation
#: floor of that training seed (its untrained decoder). Seed 0 (floor 0.02229, F1 0.311) is the helper's
#: sweep of ``full``; the ``full`` point on seed 1 and the ``focus_zoom`` point on seed 0 are the referee's
#: (notes/wip/focusing-referee-50.md). The book's 50 steps are in notebook 3's tuning table.
STEP_TREND = pd.DataFrame(
    [("full", 0, 100, 2.5e-3, 0.08304, 0.002, 0, 0.02229), ("full", 0, 200, 2.5e-3, 0.02108, 0.413, 0, 0.02229),
     ("full", 0, 200, 5e-3, 0.02023, 0.465, 0, 0.02229), ("full", 0, 400, 2.5e-3, 0.01796, 0.530, 0, 0.02229),
     ("full", 1, 200, 2.5e-3, 0.02436, 0.323, 0, 0.02383),
     ("focus_zoom", 0, 200, 2.5e-3, 0.01854, 0.517, 0, 0.02229)],
    columns=["run", "seed", "steps", "lr", "cd_l1", "f1", "empty", "floor"])


def step_trend_text(trend: pd.DataFrame, floor: float | None = None) -> str:
    """One sentence of :func:`step_trend`'s numbers, each against the validation floor of its training
    seed (the ``floor`` column, or ``floor`` where the frame has none)."""
    if "floor" not in trend and floor is None:
        raise ValueError("floor must be given where trend has no 'floor' column")
    parts = []
    for r in trend.itertuples():
        f = float(getattr(r, "floor", floor))
        who = f"`{getattr(r, 'run', 'full')}` on seed {int(getattr(r, 'seed', 0))}"
        parts.append(f"{who}, {int(r.steps)} steps at lr {r.lr:g}: {r.cd_l1:.4f} "
                     f"({r.cd_l1 - f:+.4f} against its floor {f:.4f})")
    return "; ".join(parts)


def snapshot_trend(cfg: FocusingPreset, seeds, label: str = "full", lr: float = 2.5e-3, tsdf: float = 0.1,
                   every: int = 50, device: str = "cpu") -> pd.DataFrame:
    """Does a longer, cheaper recipe make ``label`` beat the no-learning floor? One run per training seed
    with the preset ``cfg`` (its ``steps`` and image size ``H``), weights kept every ``every`` steps and
    each snapshot scored on the **validation** shapes: one row per seed and snapshot with ``rel`` (mean
    CD-L1 over the validation floor of that seed, the untrained decoder), the degenerate validation fields,
    and ``cpu_per_step`` (CPU seconds of one training step on the calling thread, including the view
    sampling and the ground-truth renders). Too costly for a book notebook (:data:`LONG_TREND` holds its
    measured output, which notebook 3 quotes)."""
    import time

    runs = Runs(replace(cfg, snap_every=int(every)), device, progress=False)
    rows = []
    for seed in seeds:
        t0 = time.process_time()
        model, _, snaps = runs.trained(label, seed, lr, tsdf)
        per_step = (time.process_time() - t0) / cfg.steps
        floor = float(runs.floor(seed, "val").cd_l1.mean())
        for k in sorted(k for k in snaps if k > 0):
            sc = evaluate_state(model, snaps[k], runs.val, runs.taus, cfg.eval_views, cfg.H)
            rows.append({"run": label, "seed": int(seed), "H": cfg.H, "lr": float(lr), "tsdf": float(tsdf),
                         "step": int(k), "rel": float(sc.cd_l1.mean()) / floor,
                         "degenerate": int(sc["degenerate"].sum()),
                         "floor": floor, "cpu_per_step": per_step})
    return pd.DataFrame(rows)


@torch.no_grad()
def evaluate_state(model, state: dict, shapes, taus, n_views: int, H: int) -> pd.DataFrame:
    """:func:`~icml26.focusing.train.evaluate` of ``model`` with the weights ``state`` (its own weights
    restored afterwards)."""
    cur = {a: b.clone() for a, b in model.state_dict().items()}
    model.load_state_dict(state)
    try:
        return pd.DataFrame(evaluate(model, shapes, taus, n_views=n_views, H=H))
    finally:
        model.load_state_dict(cur)


#: :func:`snapshot_trend` measured on 2026-12-07 (one CPU thread, on a machine shared by about six
#: processes per core): the book preset with 32 x 32 training images (48 in notebook 3), 300 steps,
#: lr 2.5e-3, the 10% TSDF warm-up, ``full``, training seeds 0-3 (seed 4's run was stopped for time),
#: snapshots every 50 steps; plus the same run with the TSDF term on every step (seed 0). ``rel`` is
#: validation CD-L1 over the validation floor of that seed (0.02229, 0.02383, 0.02334, 0.02268 for seeds
#: 0-3); no validation field was empty (no zero crossing: the rule of the day, before degenerate fields were
#: counted) except where ``empty`` says so. ``cpu_per_step`` is the run's
#: training CPU time per step.
LONG_TREND = pd.DataFrame(
    [("full", s, 32, 2.5e-3, t, k, r, e, c) for s, t, c, ks in (
        (0, 0.1, 0.143, ((50, 0.967, 0), (100, 0.960, 0), (150, 0.902, 0), (200, 1.126, 0), (250, 0.861, 0),
                         (300, 0.836, 0))),
        (1, 0.1, 0.147, ((50, 1.084, 0), (100, 0.941, 0), (150, 0.871, 0), (200, 0.899, 0), (250, 0.888, 0),
                         (300, 0.842, 0))),
        (2, 0.1, 0.156, ((50, 1.006, 0), (100, 0.985, 0), (150, 0.965, 0), (200, 0.986, 0), (250, 0.938, 0),
                         (300, 0.899, 0))),
        (3, 0.1, 0.153, ((50, 2.185, 0), (100, 0.909, 0), (150, 0.939, 0), (200, 0.991, 0), (250, 0.837, 0),
                         (300, 0.874, 0))),
        (0, 1.0, 0.149, ((50, 3.823, 0), (100, 3.968, 1), (150, 1.164, 0), (200, 1.080, 0), (250, 1.720, 0),
                         (300, 1.138, 0))),
        ) for k, r, e in ks],
    columns=["run", "seed", "H", "lr", "tsdf", "step", "rel", "empty", "cpu_per_step"])


def long_trend_summary(trend: pd.DataFrame, tsdf: float = 0.1, margin: float = 0.1) -> dict:
    """Numbers notebook 3 quotes from :data:`LONG_TREND` (rows with TSDF share ``tsdf``): the last step,
    the seeds, on how many of them the last snapshot is at least ``margin`` below the floor
    (``rel <= 1 - margin``) and on how many it is below it at all, the mean and range of ``rel`` at the
    last step, the mean CPU seconds per step, and the training CPU seconds of a paired two-method
    comparison over 5 seeds at that recipe (10 runs, before any tuning run), and ``rel_hi``, the upper
    end of the 95% t interval over seeds of ``rel`` at the last step (what notebook 3's gate reads)."""
    if not 0 < margin < 1:
        raise ValueError(f"margin must lie in (0, 1), got {margin!r}")
    t = trend[trend.tsdf == tsdf]
    if t.empty:
        raise ValueError(f"trend: no rows with tsdf {tsdf!r}")
    last = int(t.step.max())
    end = t[t.step == last].set_index("seed").rel
    per_step = float(t.groupby("seed").cpu_per_step.first().mean())
    rel_hi = t_interval(end.to_numpy())[2] if end.size > 1 else float("nan")
    return {"steps": last, "n_seeds": int(end.size), "n_clear": int((end <= 1 - margin).sum()),
            "n_below": int((end < 1).sum()), "rel_mean": float(end.mean()), "rel_min": float(end.min()),
            "rel_max": float(end.max()), "rel_hi": float(rel_hi), "cpu_per_step": per_step,
            "cost_5x2": 10 * last * per_step,
            "nonmonotone": int(sum((g.sort_values("step").rel.diff() > 0).any() for _, g in t.groupby("seed")))}


def long_trend_verdict(summary: dict, bar: float, budget_s: float = 300.0) -> str:
    """One clause of notebook 3 from :func:`long_trend_summary`: whether the recipe passes notebook 3's
    gate over the seeds measured (the upper end ``rel_hi`` of the interval of ``full`` / floor at most
    ``bar``), and whether its paired five-seed comparison fits ``budget_s`` CPU seconds."""
    if not isinstance(summary, dict) or not {"n_seeds", "rel_hi", "cost_5x2"} <= set(summary):
        raise ValueError("summary must be a dict from long_trend_summary")
    if isinstance(bar, bool) or not isinstance(bar, (int, float, np.floating)) or not 0 < bar < np.inf:
        raise ValueError(f"bar must be a positive finite number, got {bar!r}")
    n, hi = int(summary["n_seeds"]), float(summary["rel_hi"])
    if np.isfinite(hi) and hi <= bar:
        part = f"over the {n} seeds measured the recipe passes the gate (upper end {hi:.3f} <= {bar:.3f})"
    else:
        part = (f"even so, over the {n} seeds measured the recipe misses the gate (upper end {hi:.3f} of the "
                f"interval of full / floor against {bar:.3f})")
    fits = summary["cost_5x2"] <= budget_s
    return part + (", and its comparison would fit a book notebook" if fits
                   else ", and its comparison does not fit a book notebook")


def run_lrs(labels, lrs: dict) -> dict:
    """The configuration of every run label (a learning rate, or a dict of tuned knobs): its own tuned
    one where ``lrs`` has it, else the one tuned for the run it changes (``full`` for the ``full``
    scheme, ``focus_zoom`` for the others)."""
    return {lab: lrs[lab] if lab in lrs else lrs["full" if RUNS[lab][0] == "full" else "focus_zoom"]
            for lab in labels}


def _field_count(runs: Runs, label: str, seeds, config: dict, flag: str) -> int:
    if not isinstance(config, dict) or "lr" not in config:
        raise ValueError(f"config must be a dict with an 'lr', got {config!r}")
    return sum(int(runs.scores(label, s, config["lr"], tsdf=config.get("tsdf_frac"))[flag].sum()) for s in seeds)


def degenerate_count(runs: Runs, label: str, seeds, config: dict) -> int:
    """Test shape-seed pairs on which run ``label`` (configuration ``config``: ``lr``, ``tsdf_frac``)
    decodes a degenerate field, over training seeds ``seeds``: fewer zero crossings than
    :data:`~icml26.focusing.train.DEGENERATE_SHARE` of the band's voxels, none included (a field with
    none is scored by its fine voxel centres, near the ground-truth band; one with a handful holds no
    surface either)."""
    return _field_count(runs, label, seeds, config, "degenerate")


def empty_count(runs: Runs, label: str, seeds, config: dict) -> int:
    """:func:`degenerate_count` for **empty** fields only (no zero crossing at all): the fields
    :func:`~icml26.focusing.train.score_field` scores by their fine voxel centres, near the ground-truth
    band and below the untrained decoder."""
    return _field_count(runs, label, seeds, config, "empty")


def blocked_note(empty: dict, degenerate: dict) -> str:
    """``""`` where a Chamfer ratio or difference may be computed; otherwise the reason it is not.

    ``empty`` maps every compared row to its empty test fields (no zero crossing: scored by the voxel
    centres, near the ground-truth band and *below* the floor, an artefact that favours the row that has
    it); ``degenerate`` maps the **baseline** row(s) only to their degenerate test fields (a collapsed
    denominator scores high and would flatter the treatment). A degenerate field of the treatment is not
    listed here: it enters the ratio at its own score (:func:`gated_compare`)."""
    for what, d in (("empty", empty), ("degenerate", degenerate)):
        if not isinstance(d, dict):
            raise TypeError(f"{what} must be a dict of row name -> count, got {type(d).__name__}")
    parts = [f"{k} ({int(v)})" for k, v in empty.items() if int(v) > 0]
    base = [f"{k} ({int(v)})" for k, v in degenerate.items() if int(v) > 0]
    why = []
    if parts:
        why.append("empty test fields (no zero crossing, scored by voxel centres) in " + ", ".join(parts))
    if base:
        why.append(f"degenerate test fields (fewer zero crossings than {DEGENERATE_SHARE:.0%} of the band's "
                   "voxels, empty ones included) in the baseline " + ", ".join(base))
    return "not computed: " + "; ".join(why) if why else ""


def gated_compare(ledger, precondition: bool, name: str, comparison, a: str, b: str, op: str, threshold,
                  degenerate: dict | None = None, empty: dict | None = None, **kw):
    """Record a Chamfer comparison claim whose precondition is "``full`` clearly beats the no-learning floor"
    (notebook 3: the upper end of the interval of ``full`` / floor at most the ground-truth band's ratio):
    asserted as ``op threshold`` (at the ledger's default scales or ``assert_at``) only where
    ``precondition`` holds; otherwise reported, the reason in its note (a comparison of two runs that
    learned nothing the metric can see is not evidence either way).

    ``empty`` and ``degenerate`` map row names to their empty / degenerate test fields. No ratio is
    computed (the claim is reported as the text of :func:`blocked_note`) where a compared row has an
    **empty** field or the baseline ``b`` a **degenerate** one. Degenerate fields of the treatment ``a``
    enter at their own score, which counts a collapse against ``a``; their number is added to the note,
    and where the precondition holds the claim is asserted (and can fail) with them."""
    if not isinstance(precondition, bool):
        raise TypeError(f"precondition must be a bool, got {type(precondition).__name__}")
    degenerate, empty = degenerate or {}, empty or {}
    why = blocked_note({k: v for k, v in empty.items() if k in (a, b)}, {b: degenerate.get(b, 0)})
    if why:
        return ledger.report(name, why, paper=kw.get("paper", ""))
    own = int(degenerate.get(a, 0))
    if own:
        kw["note"] = "; ".join(x for x in (kw.pop("note", ""), (
            f"{a} has {own} degenerate test fields (fewer zero crossings than {DEGENERATE_SHARE:.0%} of the "
            "band's voxels), kept at their own score: the ratio counts them against it")) if x)
    if precondition:
        return ledger.compare(name, comparison, a, b, op, threshold, **kw)
    kw.pop("assert_at", None)
    note = ("not asserted: full does not clearly beat the no-learning floor here (the precondition of Chamfer "
            "claims: test CD-L1 full / floor, at the interval's upper end, at most the ground-truth band's ratio)")
    return ledger.compare(name, comparison, a, b, note="; ".join(x for x in (kw.pop("note", ""), note) if x), **kw)


def equal_voxel_step(hist: pd.DataFrame, total: float) -> int:
    """Completed steps after which a run with per-step decoded counts ``hist.decoded`` has decoded
    ``total`` latent voxels (the last step whose running total is still <= ``total``)."""
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total!r}")
    return int((hist.decoded.cumsum() <= total).sum())


def evaluate_snapshot(result: dict, label: str, step: int, seed: int = 0, rule: str = "nearest") -> pd.DataFrame:
    """Held-out CD / F1 of the weights of ``label`` after ``step`` completed steps: the nearest snapshot
    (ties go to the later one) or, with ``rule="at_or_below"``, the last snapshot at or before ``step``
    (so the run has not decoded more than the budget that gave ``step``)."""
    if rule not in ("nearest", "at_or_below"):
        raise ValueError(f"rule must be 'nearest' or 'at_or_below', got {rule!r}")
    model, snaps = result["models"][(label, seed)]
    if rule == "nearest":
        near = min(snaps, key=lambda s: (abs(s - step), -s))
    else:
        near = max([s for s in snaps if s <= step], default=min(snaps))
    cur = {a: b.clone() for a, b in model.state_dict().items()}
    model.load_state_dict(snaps[near])
    rows = evaluate(model, result["test"], result["taus"], n_views=result.get("eval_views", 2),
                    H=result.get("H", 48))
    model.load_state_dict(cur)
    return pd.DataFrame([{"run": label, "seed": seed, "step": near, **r} for r in rows])


@torch.no_grad()
def field_counts(model, state: dict | None, shapes) -> list:
    """``[(zero crossings, ground-truth band voxels)]`` of the field the model (with weights ``state``, or
    its own where None) decodes on each of ``shapes`` (every latent voxel decoded, as
    :func:`~icml26.focusing.train.evaluate` does). The model's own weights are restored afterwards."""
    from .metrics import surface_points
    from .train import band_voxels, decode_field
    cur = None
    if state is not None:
        cur = {a: b.clone() for a, b in model.state_dict().items()}
        model.load_state_dict(state)
    try:
        return [(int(surface_points(*decode_field(model, sd)).shape[0]), band_voxels(sd)) for sd in shapes]
    finally:
        if cur is not None:
            model.load_state_dict(cur)


def degenerate_fields(model, state: dict | None, shapes) -> int:
    """How many of ``shapes`` the model (with weights ``state``, or its own where None) decodes to a
    degenerate field (:func:`field_counts`): fewer zero crossings than
    :data:`~icml26.focusing.train.DEGENERATE_SHARE` of the band's voxels, none included
    (:func:`~icml26.focusing.train.is_degenerate`, the rule of :func:`~icml26.focusing.train.score_field`)."""
    from .train import is_degenerate
    return sum(int(is_degenerate(p, b)) for p, b in field_counts(model, state, shapes))


def equal_voxel_snapshots(result: dict, seeds, label: str = "full", ref: str = "focus_zoom") -> pd.DataFrame:
    """The equal-decoded-voxels snapshot of run ``label`` for every training seed, gated on degenerate
    fields.

    The budget is ``ref``'s decoded total over its whole run; the candidates are the trained snapshots of
    ``label`` (step >= 1) at or below the step where its running total reaches that budget
    (:func:`equal_voxel_step`), so it never decodes more than ``ref``. From the latest down, the first
    candidate whose field is not degenerate on **any** test shape (:func:`degenerate_fields`) is the one
    compared; where every candidate has a degenerate field, ``snapshot`` is None and that seed has no
    comparable snapshot (a field with no zero crossing scores the band's voxel centres, one with a
    handful holds no surface). One row per seed: ``budget``, ``step``, ``degenerate_at`` (step ->
    degenerate test fields, the candidates looked at), ``snapshot`` and ``decoded`` (``label``'s decoded
    total at the snapshot)."""
    rows = []
    for s in seeds:
        model, snaps = result["models"][(label, s)]
        hist = result["hist"][(label, s)]
        budget = float(result["hist"][(ref, s)].decoded.sum())
        step = equal_voxel_step(hist, budget)
        bad_at, chosen = {}, None
        for k in sorted((k for k in snaps if 1 <= k <= step), reverse=True):
            bad_at[k] = degenerate_fields(model, snaps[k], result["test"])
            if bad_at[k] == 0:
                chosen = k
                break
        rows.append({"seed": s, "budget": budget, "step": step, "degenerate_at": bad_at, "snapshot": chosen,
                     "decoded": int(hist.decoded[:chosen].sum()) if chosen else 0})
    return pd.DataFrame(rows)


def evaluate_equal_voxel(result: dict, eqs: pd.DataFrame, label: str = "full") -> dict:
    """Test scores (:func:`evaluate_snapshot`) of the snapshots :func:`equal_voxel_snapshots` chose,
    ``{seed: frame}``; empty unless **every** seed has one (a paired comparison needs all of them)."""
    if not bool(eqs.snapshot.notna().all()):
        return {}
    return {s: evaluate_snapshot(result, label, int(k), seed=s, rule="at_or_below")
            for s, k in zip(eqs.seed, eqs.snapshot)}


def first_full_snapshot(result: dict, label: str = "full", seed: int = 0) -> dict:
    """The first snapshot of run ``label`` (training seed ``seed``) whose field is not degenerate on any
    test shape: ``{"step", "decoded", "degenerate_at", "shares_at"}`` (``step`` None where no snapshot
    is; ``shares_at``: step -> sorted zero crossings per band voxel of each test field, the candidates
    looked at)."""
    from .train import is_degenerate
    model, snaps = result["models"][(label, seed)]
    hist = result["hist"][(label, seed)]
    bad_at, shares_at = {}, {}
    for k in sorted(k for k in snaps if k >= 1):
        counts = field_counts(model, snaps[k], result["test"])
        bad_at[k] = sum(int(is_degenerate(p, b)) for p, b in counts)
        shares_at[k] = sorted(p / max(b, 1) for p, b in counts)
        if bad_at[k] == 0:
            return {"step": k, "decoded": int(hist.decoded[:k].sum()), "degenerate_at": bad_at,
                    "shares_at": shares_at}
    return {"step": None, "decoded": 0, "degenerate_at": bad_at, "shares_at": shares_at}


def equal_voxel_text(eqs: pd.DataFrame, first: dict, ref_total: float, n_shapes: int) -> dict:
    """Sentences for notebook 3 from :func:`equal_voxel_snapshots` (``eqs``) and
    :func:`first_full_snapshot` (``first``): ``eq_text`` (which seeds have a comparable snapshot, and the
    degenerate test fields where none has) and ``first_text`` (when the first seed's field is first
    non-degenerate on every test shape, against ``ref_total`` decoded voxels)."""
    ok = eqs.snapshot.notna()
    if bool(ok.all()):
        eq = ("on every seed one does, with no degenerate test field (snapshot steps "
              + ", ".join(str(int(k)) for k in eqs.snapshot) + ")")
    else:
        latest = [f"{d[max(d)]} at step {max(d)}" if d else "no trained snapshot"
                  for d in eqs.degenerate_at[~ok]]
        eq = (f"on {int((~ok).sum())} of the {len(eqs)} seeds none does: every trained snapshot of `full` "
              f"within the budget decodes a degenerate field on at least one of the {n_shapes} test shapes "
              f"(at the latest one: {'; '.join(latest)}), so no ratio is computed or claimed")
    if first["step"] is None:
        fst = "no snapshot of `full` on the first seed is non-degenerate on every test shape"
    else:
        fst = (f"on the first seed, `full`'s first snapshot that is non-degenerate on every test shape is step "
               f"{first['step']}, after {first['decoded']:,} decoded latent voxels, "
               f"{first['decoded'] / max(ref_total, 1.0):.1f} times `focus_zoom`'s total for its whole run")
        fst += first_share_text(first)
    return {"eq_text": eq, "first_text": fst}


def first_share_text(first: dict, n_low: int = 5) -> str:
    """How much the step of :func:`first_full_snapshot` depends on the degenerate rule: the lowest share
    (zero crossings per band voxel) of the chosen snapshot, and the ``n_low`` lowest of the candidate
    before it, with the largest bar under which that earlier candidate would have qualified."""
    k = first.get("step")
    shares = first.get("shares_at", {})
    if k is None or k not in shares:
        return ""
    txt = f"; its lowest test field holds {shares[k][0]:.1%} of the band's voxel count in zero crossings"
    prev = [j for j in shares if j < k]
    if not prev:
        return txt
    j = max(prev)
    low = shares[j][:n_low]
    txt += (f". The bar ({DEGENERATE_SHARE:.0%}) decides this step: at step {j} the {len(low)} lowest fields "
            "hold " + ", ".join(f"{x:.1%}" for x in low))
    if low[0] > 0:
        return txt + (f", so any bar at or below {math.floor(low[0] * 1e4) / 1e4:.2%} (the lowest, rounded down) "
                      f"would have picked step {j}")
    return txt + f", so step {j} has a field with no zero crossing, degenerate under any bar"


def step_memory(cfg: FocusingPreset, scheme: str, device: str = "cpu", n_views: int = 4) -> dict:
    """Activation bytes saved for backward by one training step (mean over ``n_views`` views of the first
    training shapes), decoded latent voxels and the analytic estimate."""
    tc = train_config(cfg, scheme, 0, device)
    torch.manual_seed(0)
    model = SparseVAE(cfg.res_lat, cfg.width, cfg.blocks).to(device)
    rng = torch.Generator().manual_seed(5)
    zrng = torch.Generator().manual_seed(6)
    sds = [prepare(make_shape(k, 0, cfg.n_uv), cfg.res_lat, cfg.n_points, 0, device) for k in cfg.test_kinds[:n_views]]
    saved, dec = [], []
    for sd in sds:
        cam0 = random_camera(rng, cfg.H, cfg.H)
        cam, gt, keep, _ = view_for_scheme(sd, cam0, scheme, tc, zrng)
        gt = {a: b.to(device) for a, b in gt.items()}
        n = int(keep.sum()) if keep is not None else sd.latent.shape[0]
        dec.append(n)
        saved.append(saved_tensor_bytes(
            lambda sd=sd, cam=cam, gt=gt, keep=keep: step_loss(model, sd, cam, gt, keep, tc, 0.1, True)[0].backward()))
    n_mean = sum(dec) / len(dec)
    return {"scheme": scheme, "decoded": n_mean, "saved_mib": sum(saved) / len(saved) / 2 ** 20,
            "estimate_mib": activation_memory_estimate(int(n_mean), cfg.width, cfg.blocks) / 2 ** 20}


def peak_memory(cfg: FocusingPreset, scheme: str, device: str = "cpu") -> float:
    """Peak memory (MiB) of a few training steps: CUDA ``max_memory_allocated`` on a GPU; on the CPU the
    peak resident set of a fresh subprocess above its resident set before the steps."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step_memory(cfg, scheme, device)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    code = ("import json,sys,dataclasses,resource,torch;from icml26.core import one_thread;one_thread().pin();"
            "from icml26.focusing import presets,experiments as ex;"
            "cfg=dataclasses.replace(presets.FocusingPreset(),**json.loads(sys.argv[1]));"
            "import icml26.focusing.train as tr;"
            "r0=int(open('/proc/self/statm').read().split()[1])*4096;"
            "ex.step_memory(cfg,sys.argv[2]);"
            "print(json.dumps((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss*1024-r0)/2**20))")
    fields = {k: getattr(cfg, k) for k in ("res_lat", "H", "n_points", "n_uv", "width", "blocks", "budget",
                                           "test_kinds", "zeta_max")}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(fields), scheme], capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def zoom_plane_counts(res: int = 128, H: int = 64, zetas=(1.0, 2.0, 4.0), d: float = 1.0) -> dict:
    """Voxel centres of a fronto-parallel plane (larger than the view) that project into the image, vs zoom
    factor (spec Sec. 4, fact 2: the count falls like ``zeta^-2``)."""
    from .camera import project, zoom_camera
    ar = torch.arange(res)
    c = torch.stack(torch.meshgrid(ar, ar, torch.tensor([res // 2]), indexing="ij"), -1).reshape(-1, 3)
    centers = (c.float() + 0.5) / res - 0.5
    cam = make_camera([0, 0, d], H, H, fov_deg=40)
    out = {}
    for z in zetas:
        uv, _ = project(centers, zoom_camera(cam, z, torch.tensor([H / 2, H / 2])))
        out[z] = int(((uv >= 0) & (uv[:, :1] < H) & (uv[:, 1:] < H)).all(1).sum())
    return out


def loss_at(pred, gt) -> float:
    return float(render_losses(pred, gt)["total"])


class VoxelMLP(torch.nn.Module):
    """A decoder with receptive radius 0: every fine voxel's corner values are a field ``base`` plus an MLP
    of its own centre only. Used to show that carving leaves the parameter gradient unchanged (fact 3)."""

    def __init__(self, width: int = 32, h: float = 1 / 32, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.net = torch.nn.Sequential(torch.nn.Linear(3, width), torch.nn.Tanh(), torch.nn.Linear(width, 8))
        self.scale = 0.3 * h

    def forward(self, grid: SparseGrid, base_vertex: torch.Tensor) -> torch.Tensor:
        _, cv = grid.corner_vertices()
        return base_vertex[cv] + self.scale * torch.tanh(self.net(grid.centers()))


def carving_gradient_gap(sd, cam, gt, kappa: float = 0.02, seed: int = 0) -> dict:
    """Relative difference of the render-loss gradient w.r.t. the parameters of a per-voxel decoder
    (:class:`VoxelMLP`) between decoding all latent voxels and decoding the carved ones (spec Sec. 4,
    fact 3), and, as the control, a random subset of the same size. The base field is the oracle signed
    distance, so that the visible surface is opaque."""
    from .voxels import shared_corner_average
    res_f = sd.fine_occ.shape[0]
    keep = carve(sd.latent, sd.res_lat, cam, gt["depth"])
    g = torch.Generator().manual_seed(seed + 5)
    rand = torch.zeros_like(keep)
    rand[torch.randperm(keep.numel(), generator=g)[:int(keep.sum())]] = True
    grads = []
    for lat in (sd.latent, sd.latent[keep], sd.latent[rand]):
        fine = _children_in(lat, sd.fine_occ)
        base = oracle_field(fine, sd.points, sd.normals)
        dec = VoxelMLP(h=1 / res_f, seed=seed)
        _, cv = fine.corner_vertices()
        s, _ = shared_corner_average(dec(fine, base), cv, base.shape[0])
        loss = render_losses(render_sdf(s, fine, cam, kappa=kappa), gt)["total"]
        g = torch.autograd.grad(loss, list(dec.parameters()))
        grads.append(torch.cat([x.reshape(-1) for x in g]))
    nrm = grads[0].norm().clamp_min(1e-30)
    return {"gap": float((grads[0] - grads[1]).norm() / nrm), "gap_random": float((grads[0] - grads[2]).norm() / nrm),
            "kept": int(keep.sum()), "N": int(keep.numel())}


def gradient_gap_study(cfg: FocusingPreset, shapes=None) -> pd.DataFrame:
    """:func:`carving_gradient_gap` on one random view of every test shape."""
    shapes = shapes or test_shapes(cfg)
    rng = torch.Generator().manual_seed(cfg.seed + 31)
    rows = []
    for sd in shapes:
        cam = random_camera(rng, cfg.H, cfg.H)
        rows.append({"kind": sd.mesh.kind, "is_open": sd.mesh.is_open,
                     **carving_gradient_gap(sd, cam, rasterize(sd.mesh, cam), seed=cfg.seed)})
    return pd.DataFrame(rows)


@torch.no_grad()
def recon_renders(result: dict, kinds, labels, seed: int = 0, H: int = 64) -> dict:
    """Normal/mask renders of held-out reconstructions (every voxel decoded) and the ground truth."""
    from .voxels import shared_corner_average
    cam = make_camera([1.2, -1.4, 1.0], H, H)
    out = {}
    for k in kinds:
        sd = next(s for s in result["test"] if s.mesh.kind == k)
        c = cam.to(sd.points.device)
        for lab in labels:
            model, _ = result["models"][(lab, seed)]
            grid, mu, _ = model.encode(sd.points, sd.normals)
            dec = model.decode(grid, mu)
            v, cv = dec.fine.corner_vertices()
            s, _ = shared_corner_average(dec.corner_sdf, cv, v.shape[0])
            out[(k, lab)] = render_sdf(s, dec.fine, c)
        gt = rasterize(sd.mesh, c)
        out[(k, "ground truth")] = {"normal": gt["normal"], "mask": gt["mask"].float()}
    return out


@torch.no_grad()
def predicted_depth_carving(result: dict, label: str, seed: int = 0, view_seed: int = 3) -> dict:
    """Exercise: carve one held-out view with the model's rendered depth instead of the ground truth and
    count the visible voxels (kept by GT carving) that the predicted-depth carving loses."""
    from .voxels import shared_corner_average
    model, _ = result["models"][(label, seed)]
    sd = result["test"][0]
    cam = random_camera(torch.Generator().manual_seed(view_seed), 48, 48)
    gt = rasterize(sd.mesh, cam)
    grid, mu, _ = model.encode(sd.points, sd.normals)
    dec = model.decode(grid, mu)
    v, cv = dec.fine.corner_vertices()
    s, _ = shared_corner_average(dec.corner_sdf, cv, v.shape[0])
    pr = render_sdf(s, dec.fine, cam)
    pd_depth = torch.where(pr["mask"] > 0.5, pr["depth"], torch.full_like(pr["depth"], math.inf))
    k_gt = carve(sd.latent, sd.res_lat, cam, gt["depth"])
    k_pr = carve(sd.latent, sd.res_lat, cam, pd_depth)
    return {"shape": sd.mesh.kind, "kept (GT depth)": int(k_gt.sum()), "kept (predicted depth)": int(k_pr.sum()),
            "visible voxels lost": int((k_gt & ~k_pr).sum()), "extra voxels kept": int((k_pr & ~k_gt).sum())}
