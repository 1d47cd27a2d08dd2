"""Shared plumbing: non-finite claims and dry runs in the ledger (issues 28, 29), seeding without
warnings, the one-thread helper and the intro module in their new homes (issue 12), the GPU
guard, gpu-check and CUDA-test hooks, and sanity of every chapter's presets (issue 28)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import icml26
import pytest
import torch
from icml26.book import discover, run
from icml26.book import gpu as gpu_tool
from icml26.book.execute import executed_path, run_label
from icml26.core import ClaimFailed, Ledger, one_thread, preset_for, seed_all

ROOT = Path(__file__).resolve().parents[1]


# -- the ledger: non-finite values are errors; a dry run asserts nothing ----------------------------
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), torch.tensor(float("nan"))])
def test_a_non_finite_measurement_is_an_error_naming_the_claim(value):
    ledger = Ledger("demo", "nb", scale="book")
    with pytest.raises(ValueError, match="claim 'c'.*not a finite number"):
        ledger.check("c", value, "<", 1.0)
    with pytest.raises(ValueError, match="claim 'r'"):
        ledger.report("r", value)
    assert ledger.claims == []


def test_a_nan_threshold_is_an_error():
    with pytest.raises(ValueError, match="claim 'c': threshold"):
        Ledger("demo", "nb", scale="book").check("c", 1.0, "<", float("nan"))


def test_a_dry_run_records_claims_and_asserts_none(monkeypatch, tmp_path):
    monkeypatch.setenv("ICML26_DRY", "1")
    ledger = Ledger("demo", "nb", scale="gpu")
    ledger.check("fails", 0.0, ">=", 1.0)
    ledger.check("nan is fine here", float("nan"), ">=", 1.0)
    ledger.check_true("no", False)
    ledger.report("r", 3.0)
    assert {c.status for c in ledger.claims[:3]} == {"dry run"}
    assert "dry run" in ledger.to_text().splitlines()[0]
    monkeypatch.setenv("ICML26_LEDGER_DIR", str(tmp_path))
    ledger.assert_all()  # does not raise
    saved = json.loads((tmp_path / "demo--nb.json").read_text())
    assert saved["dry_run"] is True
    # the switch concerns the gpu scale only
    smoke = Ledger("demo", "nb2", scale="smoke")
    smoke.check("fails", 0.0, ">=", 1.0)
    with pytest.raises(ClaimFailed):
        smoke.assert_all(save=False)


# -- seeding: no deterministic-mode warnings unless asked for ----------------------------------------
def test_seed_all_does_not_switch_on_deterministic_algorithms_by_default():
    try:
        seed_all(0)
        assert not torch.are_deterministic_algorithms_enabled()
        seed_all(0, deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
        assert not torch.is_deterministic_algorithms_warn_only_enabled()  # raises, never prints
        seed_all(0)
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.cuda
def test_seed_all_prints_no_warning_on_cuda():
    seed_all(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = torch.rand(1000, device="cuda")
        x.cumsum(0)
        torch.bincount(torch.randint(0, 5, (100,), device="cuda"), weights=torch.rand(100, device="cuda"))
        torch.nn.functional.nll_loss(torch.randn(8, 4, device="cuda").log_softmax(-1),
                                     torch.randint(0, 4, (8,), device="cuda"))
        torch.cuda.synchronize()


# -- one thread, from the core (issue 12) ------------------------------------------------------------
def test_one_thread_restores_and_nests():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with one_thread():
            assert torch.get_num_threads() == 1
            with one_thread():
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2

        @one_thread()
        def inner():
            return torch.get_num_threads()

        assert inner() == 1 and torch.get_num_threads() == 2
        with one_thread("cuda" if torch.cuda.is_available() else "meta"):
            assert torch.get_num_threads() == 2  # another device: the host's count is left alone
        assert one_thread("cpu").pin() == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_only_the_core_sets_thread_counts():
    from icml26.cgmt import theory

    assert isinstance(theory.single_thread, one_thread)
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "lib" / "icml26").rglob("*.py")
                 if "set_num_threads" in p.read_text() and p.name != "device.py"]
    assert offenders == []
    assert not hasattr(importlib.import_module("icml26.ba_solver.experiments"), "small_net_threads")


def test_intro_lives_beside_the_runner():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("icml26.intro")
    intro = importlib.import_module("icml26.book.intro")
    assert intro.preset("smoke").sizes
    page = (ROOT / "front" / "how-this-book-works.md").read_text()
    assert "from icml26.book import intro" in page and "../lib/icml26/book/intro.py" in page
    assert (ROOT / "lib" / "icml26" / "book" / "intro.py").exists()


# -- make gpu: the guard, the CUDA-test hook, gpu-check ----------------------------------------------
def _recipe(target: str) -> str:
    text = (ROOT / "Makefile").read_text()
    start = text.index(f"\n{target}:")
    end = text.find("\n\n", start + 1)
    return text[start:end]


def test_make_targets_are_wired():
    assert "gpu-guard" in _recipe("gpu").splitlines()[1] and "ICML26_REQUIRE_CUDA=1" in _recipe("gpu")
    assert "gpu-guard" in _recipe("gpu-check").splitlines()[1] and "icml26.book.gpu check" in _recipe("gpu-check")
    assert "icml26.book.gpu guard" in _recipe("gpu-guard")
    assert "--scale gpu --dry" in _recipe("gpu-dry")
    test = _recipe("test")
    assert test.index("$(MAKE) nbval") < test.index("$(MAKE) gpu-dry")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_the_gpu_guard_refuses_a_cpu_torch_and_says_how_to_fix_it():
    message = gpu_tool.guard_message()
    assert "CPU build" in message and "--index-url https://download.pytorch.org/whl/cu" in message
    proc = subprocess.run([sys.executable, "-m", "icml26.book.gpu", "guard"], capture_output=True, text=True)
    assert proc.returncode == 1 and "refusing to start" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "icml26.book.gpu", "check"], capture_output=True, text=True)
    assert proc.returncode == 1 and "refusing to start" in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skip-to-failure on a machine without CUDA")
@pytest.mark.slow
def test_a_skipped_cuda_test_fails_when_cuda_is_required(tmp_path):
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    cuda: needs CUDA\n")
    (tmp_path / "test_gpu.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.cuda
        def test_on_cuda():
            assert False, "must not run without CUDA"

        def test_plain():
            pass
        """))
    env = dict(os.environ)
    env.pop("ICML26_REQUIRE_CUDA", None)

    def pytest_run(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                              cwd=tmp_path, capture_output=True, text=True, env=env)

    skipped = pytest_run()
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout
    env["ICML26_REQUIRE_CUDA"] = "1"
    required = pytest_run()
    assert required.returncode == 1 and "ICML26_REQUIRE_CUDA=1 forbids skipping" in required.stdout, required.stdout
    nothing = pytest_run("-m", "not cuda")
    assert nothing.returncode == 1 and "no cuda test was selected" in nothing.stdout, nothing.stdout


def test_gpu_check_collects_and_tables_the_kernels(monkeypatch):
    good = types.ModuleType("icml26_fake_good")
    good.gpu_check = lambda dev: {"matmul": lambda: torch.ones(64, 64, device=dev) @ torch.ones(64, 64, device=dev)}
    single = types.ModuleType("icml26_fake_single")
    single.gpu_check = lambda dev: (lambda: torch.zeros(3, device=dev).sum())
    broken = types.ModuleType("icml26_fake_broken")
    broken.gpu_check = lambda dev: {"boom": lambda: 1 / 0}
    absent = types.ModuleType("icml26_fake_absent")
    for module in (good, single, broken, absent):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    rows = gpu_tool.check([m.__name__ for m in (good, single, broken, absent)], "cpu", repeat=1,
                          echo=lambda *_: None)
    by = {(r.module, r.kernel): r for r in rows}
    assert by[("icml26_fake_good", "matmul")].error == "" and by[("icml26_fake_good", "matmul")].seconds >= 0
    assert by[("icml26_fake_single", "headline")].error == ""
    assert "ZeroDivisionError" in by[("icml26_fake_broken", "boom")].error
    assert by[("icml26_fake_absent", "-")].error == "no gpu_check()"
    text = gpu_tool.table(rows, "cpu")
    assert "seconds" in text and "peak RSS MiB" in text and "matmul" in text
    chapters = gpu_tool.chapter_modules()
    assert "icml26.bandpo" in chapters and "icml26.book.intro" in chapters and "icml26.core" not in chapters


# -- gpu dry runs: a separate output folder ---------------------------------------------------------
def test_the_dry_run_has_its_own_label(monkeypatch):
    monkeypatch.delenv("ICML26_DRY", raising=False)
    assert run_label("gpu") == "gpu"
    monkeypatch.setenv("ICML26_DRY", "1")
    assert run_label("gpu") == "gpu-dry" and run_label("smoke") == "smoke"


@pytest.mark.slow
def test_a_dry_run_executes_apart_and_asserts_no_claim(tmp_path, monkeypatch):
    from minibook import HEADER as header

    body = textwrap.dedent("""
        ```{code-cell} ipython3
        :tags: [parameters]
        SCALE = "book"
        ```

        ```{code-cell} ipython3
        from icml26.core import Ledger
        ledger = Ledger("demo", "dry", scale=SCALE)
        ledger.check("cannot hold", 0.0, ">=", 1.0)
        ```

        ```{code-cell} ipython3
        ledger.assert_all()
        ```
        """)
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (tmp_path / "_config.yml").write_text("title: test\n")
    (tmp_path / "front").mkdir()
    (tmp_path / "front" / "dry.md").write_text(header + "\n# dry\n" + body)
    monkeypatch.setenv("ICML26_DRY", "1")
    (result,) = run(tmp_path, discover(tmp_path), "gpu", echo=lambda *_: None)
    assert result.ok and result.scale == "gpu-dry", result.error
    nb = discover(tmp_path)[0]
    assert executed_path(tmp_path, nb, "gpu-dry").exists()
    assert not executed_path(tmp_path, nb, "gpu").exists()
    monkeypatch.delenv("ICML26_DRY")
    (real,) = run(tmp_path, discover(tmp_path), "gpu", echo=lambda *_: None)
    assert not real.ok and not real.cached and "cannot hold" in real.error  # the dry run certified nothing


# -- presets of every chapter -----------------------------------------------------------------------
def _preset_tables() -> dict[str, dict]:
    tables = {}
    for info in pkgutil.iter_modules(icml26.__path__):
        if not info.ispkg or info.name in ("core", "book"):
            continue
        try:
            module = importlib.import_module(f"icml26.{info.name}.presets")
        except ModuleNotFoundError:
            module = importlib.import_module(f"icml26.{info.name}")
        tables[info.name] = module.PRESETS
    tables["book.intro"] = importlib.import_module("icml26.book.intro").PRESETS
    return tables


PRESET_TABLES = _preset_tables()


@pytest.mark.parametrize("module", sorted(PRESET_TABLES))
def test_every_preset_has_a_dry_run_that_keeps_its_type(module, monkeypatch):
    table = PRESET_TABLES[module]
    assert set(table) >= {"smoke", "book", "gpu"}
    for scale, cfg in table.items():
        assert callable(getattr(cfg, "dry_run", None)), f"{module} {scale}: {type(cfg).__name__} has no dry_run()"
        cut = cfg.dry_run()
        assert type(cut) is type(cfg), f"{module} {scale}: dry_run() returned {type(cut).__name__}"
    monkeypatch.delenv("ICML26_SCALE", raising=False)
    monkeypatch.setenv("ICML26_DRY", "1")
    assert preset_for(table, "gpu") == table["gpu"].dry_run()
    assert preset_for(table, "book") == table["book"]


def _numbers(cfg, prefix=""):
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            yield from _numbers(value, f"{prefix}{f.name}.")
        elif isinstance(value, int) and not isinstance(value, bool):
            yield f"{prefix}{f.name}", value


@pytest.mark.parametrize("module", sorted(PRESET_TABLES))
def test_a_dry_run_never_grows_a_count(module):
    cfg = PRESET_TABLES[module]["gpu"]
    before, after = dict(_numbers(cfg)), dict(_numbers(cfg.dry_run()))
    grown = {k: (before[k], after[k]) for k in before if after[k] > before[k] and k != "seed"}
    assert not grown, f"{module}: dry_run() increased {grown}"


@pytest.mark.parametrize("scale", ["smoke", "book", "gpu"])
def test_special_partitions_succeed_at_every_preset(scale):
    import numpy as np
    from icml26.special import data
    from icml26.special import experiments as ex

    cfg = PRESET_TABLES["special"][scale]
    y = ex.domains_for(cfg)[0].y_train
    for alpha in (cfg.alpha, 0.1, 100.0):  # the preset's skew and the exercise's two extremes
        parts = data.dirichlet_partition(y, cfg.n_clients, alpha, np.random.default_rng(0))
        assert len(parts) == cfg.n_clients and min(len(p) for p in parts) >= 2


@pytest.mark.parametrize("scale", ["smoke", "book", "gpu"])
def test_precond_delta_mqar_pairs_fit_the_vocabulary(scale):
    for cfg in (PRESET_TABLES["precond_delta"][scale], PRESET_TABLES["precond_delta"][scale].dry_run()):
        assert cfg.mqar_n_pairs < cfg.mqar_vocab // 2
        assert all(n < cfg.mqar_extra_vocab // 2 for n in cfg.mqar_extra_n_pairs)
