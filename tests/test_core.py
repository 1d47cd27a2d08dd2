"""The shared core: device, seeding, scales, meters, ledger, style, glue."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from icml26.book import intro
from icml26.core import (
    ClaimFailed,
    Ledger,
    PeakMemory,
    ScaleError,
    count_flops,
    device,
    fingerprint,
    method_color,
    method_colors,
    preset_for,
    report,
    resolve_scale,
    seed_all,
    set_threads,
    time_fn,
)


def test_device_defaults_to_cpu_without_cuda(monkeypatch):
    monkeypatch.delenv("ICML26_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else None
    assert device().type in ({expected} if expected else {"cpu", "mps"})
    assert device("cpu").type == "cpu"


def test_device_env_override_and_bad_input(monkeypatch):
    monkeypatch.setenv("ICML26_DEVICE", "cpu")
    assert device().type == "cpu"
    with pytest.raises(ValueError, match="prefer"):
        device("tpu")
    with pytest.raises(TypeError, match="prefer"):
        device(3)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            device("cuda")


def test_seed_all_makes_draws_repeat():
    seed_all(7)
    a = (torch.rand(3), np.random.rand(3))
    seed_all(7)
    b = (torch.rand(3), np.random.rand(3))
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    gen = seed_all(7)
    assert torch.equal(torch.rand(2, generator=gen), torch.rand(2, generator=torch.Generator().manual_seed(7)))


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_seed_all_bad_input(bad):
    with pytest.raises((TypeError, ValueError), match="seed"):
        seed_all(bad)


def test_set_threads(monkeypatch):
    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("ICML26_THREADS", "1")
        assert set_threads() == 1
        with pytest.raises(ValueError, match="n must"):
            set_threads(0)
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class _P:
    steps: int


PRESETS = {"smoke": _P(1), "book": _P(10), "gpu": _P(100)}


def test_scale_resolution(monkeypatch):
    monkeypatch.delenv("ICML26_SCALE", raising=False)
    assert resolve_scale(None) == "book"
    assert preset_for(PRESETS, "smoke").steps == 1
    monkeypatch.setenv("ICML26_SCALE", "gpu")
    assert preset_for(PRESETS, "smoke").steps == 100  # the environment wins for a whole build


def test_scale_bad_input(monkeypatch):
    monkeypatch.delenv("ICML26_SCALE", raising=False)
    with pytest.raises(ScaleError, match="smoke, book, gpu"):
        resolve_scale("huge")
    with pytest.raises(TypeError, match="scale"):
        resolve_scale(3)
    with pytest.raises(ValueError, match="missing"):
        preset_for({"smoke": _P(1)}, "smoke")
    monkeypatch.setenv("ICML26_SCALE", "tiny")
    with pytest.raises(ScaleError, match="ICML26_SCALE"):
        resolve_scale("book")


def test_time_fn_and_meters():
    seconds = time_fn(lambda: torch.ones(100).sum(), warmup=1, repeat=3)
    assert 0 <= seconds < 1
    with pytest.raises(ValueError, match="repeat"):
        time_fn(lambda: None, repeat=0)
    with PeakMemory() as mem:
        torch.ones(1000)
    assert mem.cpu_mib > 10
    a, b = torch.ones(8, 16), torch.ones(16, 4)
    assert count_flops(lambda: a @ b) == 2 * 8 * 16 * 4


def _ledger(scale="book"):
    return Ledger("demo", "01-test", scale=scale)


def test_ledger_statuses(monkeypatch):
    monkeypatch.delenv("ICML26_SCALE", raising=False)
    ledger = _ledger("smoke")
    assert ledger.check("a", 0.5, ">=", 0.2).status == "holds"
    assert ledger.check("b", 0.1, ">=", 0.2, assert_at=("book", "gpu")).status == "not asserted"
    assert ledger.check("c", 0.1, ">=", 0.2).status == "fails"
    with pytest.raises(ValueError, match="claim 'd'"):  # a non-finite value is an error, not a failure
        ledger.check("d", float("nan"), "<=", 1.0)
    assert ledger.check_true("e", True, measured="identity").status == "holds"
    assert ledger.report("f", 3.0).status == "reported"
    assert [c.name for c in ledger.failures] == ["c"]
    assert list(ledger.table().columns) == ["claim", "paper", "this book", "bar", "status"]


def test_ledger_assert_all_names_every_failing_claim(tmp_path, monkeypatch):
    monkeypatch.setenv("ICML26_LEDGER_DIR", str(tmp_path))
    monkeypatch.delenv("ICML26_SCALE", raising=False)
    ledger = _ledger()
    ledger.check("fine", 1.0, ">=", 0.0)
    ledger.check("tail tokens explore", 0.01, ">=", 0.02, paper="+0.02 reward")
    ledger.check_true("identity", False)
    with pytest.raises(ClaimFailed) as info:
        ledger.assert_all()
    message = str(info.value)
    assert "tail tokens explore" in message and "identity" in message and "fine" not in message
    saved = json.loads((tmp_path / "demo--01-test.json").read_text())
    assert [c["status"] for c in saved["claims"]] == ["holds", "fails", "fails"]


def test_ledger_text_is_stable_and_hides_timings(monkeypatch):
    monkeypatch.delenv("ICML26_SCALE", raising=False)
    ledger = _ledger()
    ledger.check("speed-up", 123.456789, ">=", 2, volatile=True)
    ledger.check("error", 0.0123456, "<=", 0.1)
    text = ledger.to_text()
    assert "(varies)" in text and "123.4" not in text and "0.012" in text


def test_ledger_bad_input(monkeypatch):
    monkeypatch.delenv("ICML26_SCALE", raising=False)
    with pytest.raises(ValueError, match="chapter"):
        Ledger("", "nb")
    ledger = _ledger()
    with pytest.raises(ValueError, match="op"):
        ledger.check("x", 1.0, "=>", 0.0)
    with pytest.raises(ValueError, match="assert_at"):
        ledger.check("x", 1.0, ">=", 0.0, assert_at=("large",))
    with pytest.raises(TypeError, match="measured"):
        ledger.check("x", "big", ">=", 0.0)
    ledger.check("x", 1.0, ">=", 0.0)
    with pytest.raises(ValueError, match="already"):
        ledger.check("x", 1.0, ">=", 0.0)


def test_style_colours_are_stable():
    assert method_color("BandPO") == method_color("bandpo")
    colours = method_colors(["a", "b", "c", "d"])
    assert len(set(colours.values())) == 4
    with pytest.raises(ValueError, match="name"):
        method_color("")


def test_report_outside_a_kernel_returns_the_value():
    assert report("x_value", torch.tensor(2.5)) == 2.5
    with pytest.raises(ValueError, match="key"):
        report("bad key!", 1)


@pytest.mark.parametrize("display", [False, True])
@pytest.mark.parametrize("kind", ["float", "int", "text", "figure"])
def test_glue_output_is_what_myst_nb_glue_emits(kind, display, monkeypatch):
    """``report`` emits myst-nb's glue output without importing myst-nb (2.4 s per kernel)."""
    import IPython.display
    import matplotlib.pyplot as plt
    import myst_nb.ext.glue as myst_glue
    from icml26.core.glue import GLUE_PREFIX, glue_output

    value = {"float": 0.125, "int": 3, "text": "a phrase"}.get(kind)
    if kind == "figure":
        value, _ = plt.subplots(figsize=(2, 2))
    emitted = []
    monkeypatch.setattr(IPython.display, "display", lambda *a, **kw: emitted.append((a, kw)))
    monkeypatch.setattr(myst_glue, "ipy_display", lambda *a, **kw: emitted.append((a, kw)))
    myst_glue.glue("some_key", value, display=display)
    glue_output("some_key", value, display=display)
    assert len(emitted) == 2 and emitted[0] == emitted[1]
    assert GLUE_PREFIX == myst_glue.GLUE_PREFIX
    if kind == "figure":
        plt.close(value)


def test_report_in_a_kernel_does_not_import_nbformat():
    """What a notebook's first ``report`` costs: no nbformat, jsonschema or myst-nb in the kernel."""
    code = ("import sys, types, IPython\n"
            "shell = IPython.core.interactiveshell.InteractiveShell.instance()\n"
            "shell.kernel = types.SimpleNamespace()\n"  # what report() takes for a kernel
            "from icml26.core import report\n"
            "report('x', 1.5)\n"
            "print(sorted(m for m in ('nbformat', 'jsonschema', 'myst_nb') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_fingerprint_has_versions():
    info = fingerprint(torch.device("cpu"))
    assert info["torch"] == torch.__version__ and "cpu" in info["device"]


def test_intro_loop_equals_batched():
    x, w = intro.make_inputs(20, 8, seed=1)
    torch.testing.assert_close(intro.squared_norms_loop(x, w), intro.squared_norms_batched(x, w))
    with pytest.raises(ValueError, match="n must"):
        intro.make_inputs(0, 8)
    with pytest.raises(ValueError, match="dim must"):
        intro.make_inputs(4, -1)


@pytest.mark.cuda
def test_core_on_cuda():
    dev = device()
    assert dev.type == "cuda"
    x = torch.randn(256, 256, device=dev)
    assert time_fn(lambda: x @ x, device=dev) > 0
    with PeakMemory() as mem:
        torch.empty(2**20, device=dev)
    assert mem.cuda_bytes >= 4 * 2**20


def test_report_unwraps_one_element_arrays():
    assert report("one_tensor", torch.tensor([1.5])) == 1.5
    assert report("one_array", np.array([[2.0]])) == 2.0
    assert report("many", [1, 2]) == [1, 2]


def test_dry_run_switch_uses_the_gpu_presets_dry_run(monkeypatch):
    """ICML26_DRY=1 passes the gpu preset (and only it) through its dry_run(); a preset without one is an error."""
    from dataclasses import dataclass, replace

    from icml26.core import preset_for

    @dataclass(frozen=True)
    class P:
        steps: int
        width: int

        def dry_run(self):
            return replace(self, steps=2)

    presets = {"smoke": P(10, 8), "book": P(100, 8), "gpu": P(1000, 64)}
    monkeypatch.delenv("ICML26_SCALE", raising=False)
    monkeypatch.setenv("ICML26_DRY", "1")
    assert preset_for(presets, "gpu") == P(2, 64)
    assert preset_for(presets, "book") == P(100, 8)
    monkeypatch.setenv("ICML26_DRY", "0")
    assert preset_for(presets, "gpu") == P(1000, 64)

    @dataclass(frozen=True)
    class NoDry:
        steps: int

    monkeypatch.setenv("ICML26_DRY", "1")
    with pytest.raises(TypeError, match="dry_run"):
        preset_for({"smoke": NoDry(1), "book": NoDry(2), "gpu": NoDry(3)}, "gpu")


# -- bootstrap_mean ---------------------------------------------------------------------------------
def test_bootstrap_mean_interval_and_bad_inputs():
    import numpy as np
    from icml26.core import bootstrap_mean

    v = np.array([1.0, 2.0, 3.0, 4.0])
    mean, lo, hi = bootstrap_mean(v, n_boot=4000, seed=1)
    assert mean == 2.5 and 1.0 <= lo < mean < hi <= 4.0
    assert bootstrap_mean(v, seed=1) == bootstrap_mean(v, seed=1)          # seeded
    assert bootstrap_mean(np.full(7, 0.3)) == (0.3, 0.3, 0.3)                # no spread, no interval
    narrow = bootstrap_mean(np.random.default_rng(0).normal(size=400), level=0.5)
    wide = bootstrap_mean(np.random.default_rng(0).normal(size=400), level=0.99)
    assert wide[1] < narrow[1] < narrow[2] < wide[2]
    for bad, match in (([], "non-empty"), ([[1.0, 2.0]], "1-D"), ([1.0, float("nan")], "finite")):
        with pytest.raises(ValueError, match=match):
            bootstrap_mean(bad)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_mean(v, n_boot=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_mean(v, level=1.0)


# -- optim: AdamW over one flat buffer --------------------------------------------------------------
def _mlp_steps(flat: bool, steps: int = 5):
    from icml26.core import adamw_flat

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.GELU(), torch.nn.LayerNorm(7), torch.nn.Linear(7, 2))
    x, y = torch.randn(32, 5), torch.randn(32, 2)
    params = list(net.parameters())
    opt = gflat = None
    for _ in range(steps):
        if gflat is not None:
            gflat.zero_()
        else:
            for p in params:
                p.grad = None
        ((net(x) - y) ** 2).mean().backward()
        if opt is None:
            kw = dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.05)
            opt, gflat = adamw_flat(params, **kw) if flat else (torch.optim.AdamW(params, foreach=False, **kw), None)
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
    return [p.detach().clone() for p in net.parameters()], gflat


def test_adamw_flat_gives_the_per_tensor_weights_to_the_bit():
    (a, gflat), (b, none) = _mlp_steps(True), _mlp_steps(False)
    assert gflat is not None and none is None and gflat.numel() == sum(p.numel() for p in a)
    assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_adamw_flat_keeps_the_parameter_list_when_a_parameter_has_no_gradient():
    from icml26.core import adamw_flat

    used, unused = torch.nn.Linear(3, 1), torch.nn.Linear(3, 1)
    used(torch.randn(4, 3)).sum().backward()
    opt, gflat = adamw_flat([*used.parameters(), *unused.parameters()], lr=1e-2)
    assert gflat is None and len(opt.param_groups[0]["params"]) == 4


def test_flatten_params_makes_views_and_rejects_bad_input():
    from icml26.core import adamw_flat, flatten_params

    lin = torch.nn.Linear(3, 2)
    lin(torch.randn(4, 3)).sum().backward()
    w_before, g_before = lin.weight.detach().clone(), lin.weight.grad.clone()
    flat, gflat = flatten_params(list(lin.parameters()))
    assert torch.equal(lin.weight, w_before) and torch.equal(lin.weight.grad, g_before)
    flat.zero_()
    gflat.fill_(1.0)
    assert (lin.weight == 0).all() and (lin.bias.grad == 1).all()      # views into the buffers
    with pytest.raises(ValueError, match="params"):
        flatten_params([])
    with pytest.raises(TypeError, match=r"params\[0\]"):
        flatten_params([1.0])
    with pytest.raises(ValueError, match="no gradient"):
        flatten_params([torch.nn.Parameter(torch.zeros(2))])
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    a.grad, b.grad = torch.zeros(2), torch.zeros(2, dtype=torch.float64)
    with pytest.raises(ValueError, match="one device and dtype"):
        flatten_params([a, b])
    with pytest.raises(ValueError, match="requires a gradient"):
        adamw_flat([torch.zeros(2)], lr=1e-2)
    with pytest.raises(TypeError, match="foreach"):
        adamw_flat(list(lin.parameters()), lr=1e-2, foreach=False)
