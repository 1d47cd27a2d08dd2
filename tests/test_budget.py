"""The cost model of issue 43 (icml26.book.budget): counting, projection, bad inputs, the CLI."""

from __future__ import annotations

import pytest
import torch
from icml26.book import budget as b


def _train_step(sync: bool):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(32, 8)

    def step():
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.detach()) if sync else loss.detach()
    return step


def test_counts_launches_flops_and_syncs():
    quiet = b.count_step(_train_step(False), warmup=1)
    loud = b.count_step(_train_step(True), warmup=1)
    assert quiet.syncs == 0                      # Adam's host-side step counters are not syncs
    assert loud.syncs == 1 and loud.sync_ops == {"aten._local_scalar_dense": 1}
    assert quiet.launches > 5 and quiet.flops > 0 and quiet.bytes > 0
    # forward and weight gradient of the first layer (the input needs no gradient): 2 x 2*32*8*16 FLOPs
    assert quiet.flops >= 2 * 2 * 32 * 8 * 16


def test_sync_ops_seen():
    x = torch.randn(50)

    def step():
        x[x > 0].sum()
        x.tolist()
        (x > 1).nonzero()
    c = b.count_step(step)
    assert c.syncs == 3 and set(c.sync_ops) == {"aten.index", "tolist", "aten.nonzero"}


def test_host_copy_by_name_counts_and_cpu_only_one_hot_check_does_not():
    x = torch.tensor([0, 2, 1])
    # .to("cpu") copies to the host (a wait on CUDA); .to(device) moves to the compute device, which is the
    # CPU on this run but a GPU where the notebook runs: not a sync
    assert b.count_step(lambda: x.to("cpu")).sync_ops == {"to('cpu')": 1}
    assert b.count_step(lambda: x.to(device="cpu:0")).syncs == 1
    assert b.count_step(lambda: x.to(torch.device("cpu"), torch.float64)).syncs == 1
    device, named = "cpu", torch.device("cpu")
    assert b.count_step(lambda: (x.to(device), x.to(device=named))).syncs == 0
    assert b.count_step(lambda: x.to(torch.float64)).syncs == 0
    # one_hot with its class count checks the range on the CPU only; without it, the max is read everywhere
    assert b.count_step(lambda: torch.nn.functional.one_hot(x, 3)).syncs == 0
    assert b.count_step(lambda: torch.nn.functional.one_hot(x, num_classes=3)).syncs == 0
    assert b.count_step(lambda: torch.nn.functional.one_hot(x)).syncs >= 1
    # a sync inside a one_hot call's neighbours is still counted
    assert b.count_step(lambda: (torch.nn.functional.one_hot(x, 3), x.sum().item())).syncs == 1


def test_views_are_not_launches():
    x = torch.randn(4, 6)
    c = b.count_step(lambda: x.view(6, 4).t().unsqueeze(0).transpose(1, 2))
    assert c.launches == 0 and c.syncs == 0


def test_projection_is_max_of_bounds():
    item = b.Item("x", 10, lambda: (lambda: None))
    c = b.Count(launches=100, syncs=2, flops=4e12, bytes=0.0)
    per = b.step_seconds(c, item, b.H100)
    assert per == pytest.approx(max(100 * 5e-6 + 2 * 20e-6, 4e12 / 40e12))
    scaled = b.Item("x", 10, lambda: (lambda: None), flop_scale=4.0)
    assert b.step_seconds(c, scaled, b.H100) == pytest.approx(4 * 4e12 / 40e12)
    host = b.Item("x", 10, lambda: (lambda: None), host=True)
    assert b.step_seconds(b.Count(wall_s=0.25), host, b.H100) == 0.25


def test_notebook_total_and_table():
    items = [b.Item("tiny step", 1000, lambda: _train_step(False), warmup=1),
             b.Item("nothing", 0, lambda: (lambda: None))]
    nb = b.project("demo", "01-demo", items, b.H100)
    assert not nb.failed and nb.seconds > b.H100.notebook_s
    assert nb.seconds == pytest.approx(b.H100.notebook_s + nb.items[0].total_s)
    text = b.budget_table([nb], 300.0)
    assert "demo/01-demo" in text and "tiny step" in text and "[ok]" in text
    assert "[OVER]" in b.budget_table([nb], 1.0)


def test_item_bad_inputs():
    with pytest.raises(ValueError, match="count"):
        b.Item("x", -1, lambda: None)
    with pytest.raises(ValueError, match="count"):
        b.Item("x", True, lambda: None)
    with pytest.raises(TypeError, match="build"):
        b.Item("x", 1, None)
    with pytest.raises(ValueError, match="flop_scale"):
        b.Item("x", 1, lambda: None, flop_scale=0.0)
    with pytest.raises(TypeError, match="name"):
        b.Item("", 1, lambda: None)
    with pytest.raises(TypeError, match="step"):
        b.count_step(None)
    with pytest.raises(ValueError, match="scale"):
        b.run("huge")


def test_errors_are_reported_not_raised():
    def broken():
        raise RuntimeError("boom")
    nb = b.project("demo", "01", [b.Item("broken", 3, broken)], b.H100)
    assert nb.failed and "boom" in nb.items[0].error


def test_every_cost_module_declares_notebooks_that_exist():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "chapters"
    for slug, declared in b.chapter_costs("smoke").items():
        if declared == "no cost.py":
            continue
        assert isinstance(declared, dict), f"{slug}: {declared}"
        for stem, items in declared.items():
            assert (root / slug / f"{stem}.md").is_file(), f"{slug}/{stem} is not a notebook"
            assert all(isinstance(i, b.Item) for i in items)


def test_budget_cli_sfconvcnp(capsys):
    from icml26.book.gpu import _main

    rc = _main(["budget", "--scale", "smoke", "--chapter", "sfconvcnp"])
    out = capsys.readouterr().out
    assert "sfconvcnp/02-neural-processes" in out and "projected" in out
    assert rc == 0, out


def test_stored_counts_are_reused_and_keyed_by_fingerprint():
    assert b.fingerprint("sfconvcnp", "gpu") != b.fingerprint("sfconvcnp", "book")
    assert b.fingerprint("sfconvcnp", "gpu") == b.fingerprint("sfconvcnp", "gpu")
    calls = []

    def build():
        calls.append(1)
        return lambda: torch.ones(3).sum()
    stored: dict = {}
    first = b.project("demo", "01", [b.Item("s", 5, build)], b.H100, stored=stored)
    again = b.project("demo", "01", [b.Item("s", 5, build)], b.H100, stored=stored)
    assert len(calls) == 1 and "01|s" in stored
    assert again.seconds == first.seconds


# -- issue 43 continued: cost models of ba-solver, context-tuning, paced-rl, preconditioned-delta, special --------
NEW_COST_MODELS = {"ba-solver": "ba_solver", "context-tuning": "context_tuning", "paced-rl": "paced_rl",
                   "preconditioned-delta": "precond_delta", "special": "special"}
# issue 43 continued (helper 49): cost models of bandpo, cgmt, watermark (swe-rebench declares no measured item)
MEASURED_COST_MODELS_49 = {"bandpo": "bandpo", "cgmt": "cgmt", "watermark": "watermark"}


@pytest.mark.parametrize("slug", sorted(NEW_COST_MODELS))
def test_new_cost_models_declare_gpu_work(slug):
    declared = b.chapter_costs("gpu", [slug])[slug]
    assert isinstance(declared, dict), declared
    items = [i for its in declared.values() for i in its]
    assert items and any(i.count > 0 for i in items)
    assert len({i.name for its in declared.values() for i in its}) >= len(items) // 2


@pytest.mark.parametrize("slug", sorted(NEW_COST_MODELS | MEASURED_COST_MODELS_49))
def test_new_cost_models_project_under_budget_from_stored_counts(slug):
    """The stored counts (``budget --refresh``) of the chapter project every gpu notebook under 300 s."""
    entry = b._load_store().get(f"{slug}|gpu", {})
    if entry.get("hash") != b.fingerprint((NEW_COST_MODELS | MEASURED_COST_MODELS_49)[slug], "gpu"):
        pytest.skip(f"{slug}: stored counts are stale (run budget --scale gpu --refresh --chapter {slug})")
    stored = dict(entry["counts"])
    for notebook, items in b.chapter_costs("gpu", [slug])[slug].items():
        missing = [i.name for i in items if i.count and f"{notebook}|{i.name}" not in stored]
        assert not missing, missing
        nb = b.project(slug, notebook, items, b.H100, stored=stored)
        assert not nb.failed and nb.seconds < 300, (nb.key, nb.seconds)


def test_ba_solver_gpu_steps_follow_the_cost_model():
    """The gpu SideNet steps were cut from the projection (issue 43); the dry run still cuts them."""
    from icml26.ba_solver.presets import PRESETS

    gpu = PRESETS["gpu"]
    assert gpu.nb1.side_steps <= 6000 and gpu.nb2.side_steps <= 6000 and gpu.nb3.side_steps <= 8000
    dry = gpu.dry_run()
    assert dry.nb1.side_steps < gpu.nb1.side_steps and dry.nb3.side_steps < gpu.nb3.side_steps


def test_fingerprint_ignores_docstrings_and_comments_not_code():
    src = 'def f(x):\n    """Say what f does."""\n    return x + 1  # one\n'
    prose = 'def f(x):\n    """Say it better."""\n    # a new comment\n    return x + 1\n'
    code = 'def f(x):\n    """Say what f does."""\n    return x + 2\n'
    assert b._code_of(src) == b._code_of(prose)
    assert b._code_of(src) != b._code_of(code)
    assert b._code_of('"""Only a docstring."""') == b._code_of('"""Another."""')


def test_store_writes_merge_entries_of_other_chapters(tmp_path, monkeypatch):
    """Two ``--refresh`` runs of different chapters at once keep each other's entries (the store is re-read
    under a lock just before it is written)."""
    import json

    monkeypatch.setattr(b, "STORE", tmp_path / "budget_counts.json")
    b.STORE.write_text(json.dumps({"a|gpu": {"hash": "1", "counts": {}}}))
    b._save_store({"b|gpu": {"hash": "2", "counts": {}}})
    b._save_store({"a|gpu": {"hash": "3", "counts": {}}})
    assert json.loads(b.STORE.read_text()) == {"a|gpu": {"hash": "3", "counts": {}}, "b|gpu": {"hash": "2", "counts": {}}}


# -- issue 43 continued (helper 49): cost models of bandpo, cgmt, watermark, swe-rebench -----------------------------


@pytest.mark.parametrize("slug", sorted(MEASURED_COST_MODELS_49))
def test_cost_models_49_declare_gpu_work(slug):
    declared = b.chapter_costs("gpu", [slug])[slug]
    assert isinstance(declared, dict), declared
    items = [i for its in declared.values() for i in its]
    assert items and all(i.count > 0 for i in items)
    for stem, its in declared.items():   # item names are the keys of the stored counts: unique per notebook
        assert len({i.name for i in its}) == len(its), stem


def test_watermark_is_host_work_and_its_gpu_preset_follows_the_cost_model():
    """Every watermark sampler runs on the CPU whatever the device, so its items are host items; the gpu sizes
    were cut from the projection (3,075 s and 1,931 s before); the dry run still cuts them."""
    from icml26.watermark.presets import PRESETS

    declared = b.chapter_costs("gpu", ["watermark"])["watermark"]
    assert all(i.host for its in declared.values() for i in its)
    gpu, book = PRESETS["gpu"], PRESETS["book"]
    assert gpu.n_mc * gpu.n_vocab <= 60000 * 1024 and gpu.n_seq * gpu.T_max <= 4000 * 400
    assert gpu.vocab_size <= 256 and gpu.n_seq_wm <= 1000 and gpu.n_seq_seed <= 1500 and gpu.n_cal <= 16384
    assert gpu.n_mc >= book.n_mc and gpu.n_seq_wm >= book.n_seq_wm and gpu.n_keys >= 5   # not below book
    dry = gpu.dry_run()
    assert dry.n_mc < gpu.n_mc and dry.n_seq_wm < gpu.n_seq_wm and dry.n_seq_seed < gpu.n_seq_seed


def test_cgmt_newton_items_scale_with_the_hessian_flops():
    """A cgmt Newton item is measured at n, p <= 1000 on one training set and scaled by B n p^2."""
    from icml26.cgmt import cost

    item = cost._fits("t", 2000, 16000, 16, "logistic")
    assert item.flop_scale == pytest.approx(16 * 16000 * 2000**2 / (1000 * 1000**2))
    assert item.count == cost.NEWTON_ITERS["logistic"]


def test_swe_rebench_declares_no_measured_items_and_an_estimate():
    """swe-rebench is subprocess work the counting modes cannot see: no items, and an estimate from the book times."""
    from icml26.swe_rebench import cost

    declared = b.chapter_costs("gpu", ["swe-rebench"])["swe-rebench"]
    assert declared == {"01-from-prs-to-tasks": [], "02-judges-metadata-rl": []}
    est = cost.estimate("gpu")
    assert est == pytest.approx(cost.estimate("gpu", cores=16))
    assert cost.estimate("book") == pytest.approx(cost.BOOK_S)
    assert all(v < 300 for v in est.values())
    with pytest.raises(ValueError, match="cores"):
        cost.estimate("gpu", cores=0)
    with pytest.raises(ValueError, match="scale"):
        cost.notebooks("huge")
