"""Issue 42, part 1: the published ledger, ``verify`` and ``import-ledger``, on a throw-away book.

One tiny notebook (numpy draws, an identity, a comparison over five paired seeds) runs three times
at smoke scale through the real runner: as "the book", with a deliberate perturbation, and with
other seeds. The gpu report that ``import-ledger`` takes is faked (no kernel): its ledger and run
record are written the way the runner writes them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from icml26.book import __main__ as cli
from icml26.book import sources
from icml26.book import verify as vf
from icml26.book.execute import executed_path, ledger_dir, run
from icml26.book.site import stage
from icml26.book.sources import BookError, content_hash, discover
from icml26.book.student import chapter_notebooks
from minibook import PARAMS, cell, make_chapter_book

NOTEBOOK = PARAMS + cell("""
    import os
    import numpy as np
    from icml26.core import Comparison, Ledger
    shift = int(os.environ.get("DEMO_SEED_SHIFT", "0"))  # another reader's seeds
    bump = float(os.environ.get("DEMO_PERTURB", "0"))     # a deliberate perturbation
    ledger = Ledger("demo", "01-claims", scale=SCALE)
    ledger.identity("sum of 0..9", float(np.arange(10).sum()) + 10 * bump, ">=", 0.0)
    ledger.identity("float32 round-off of 0.1 * 3", abs(float(np.float32(0.1) * 3) - 0.3), "<=", 1e-6)
    draws = np.random.default_rng(7 + shift).normal(1.0, 1.0, 4000)
    ledger.check("mean of the draws", float(draws.mean()) + bump, ">=", 0.5, assert_at=("book", "gpu"))
    ledger.check("speed-up", 3.0 + shift, ">=", 1.0, volatile=True, unit="x")
    cmp = Comparison("error", goal="min", seeds=[s + shift for s in range(5)], budget="steps", no_control="a toy")
    base = {s: np.random.default_rng(s).normal(1.0, 0.2) for s in cmp.seeds}
    cmp.add("new", [base[s] for s in cmp.seeds], untuned="a toy", cost=1)
    cmp.add("old", [base[s] + 0.5 + np.random.default_rng(s + 99).normal(0, 0.1) for s in cmp.seeds],
            untuned="a toy", cost=1)
    ledger.compare("new beats old", cmp, "new", "old", "<", 0.0, on="hi")
    ledger.setting("seeds", 5)
""") + cell("ledger.assert_all()")


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    """The tiny book, run once at smoke: its ledger is what the book publishes. Content hashes
    read a snapshot of the package code the notebook imports, so that an edit elsewhere in the
    tree while the tests run does not make the runs stale."""
    snapshot = tmp_path_factory.mktemp("pkg")
    shutil.copy2(sources.PACKAGE_DIR / "__init__.py", snapshot / "__init__.py")
    shutil.copytree(sources.PACKAGE_DIR / "core", snapshot / "core", ignore=shutil.ignore_patterns("__pycache__"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sources, "PACKAGE_DIR", snapshot)
        root = make_chapter_book(tmp_path_factory.mktemp("book"), "demo", {"01-claims": NOTEBOOK})
        (result,) = run(root, discover(root), "smoke", echo=lambda *_: None)
        assert result.ok, result.error
        vf.write_published(root, "smoke", chapter_notebooks(root), root / "site")  # package copy and site
        yield root


def verdicts(report_path: Path) -> dict[str, str]:
    return {c["name"]: c["verdict"] for c in json.loads(report_path.read_text())["claims"]}


def test_the_published_ledger_says_what_is_deterministic_and_the_spread_to_expect(book):
    ledger = json.loads((vf.published_dir(book) / "smoke" / "demo.json").read_text())
    assert ledger["format"] == vf.FORMAT and set(ledger["notebooks"]) == {"01-claims"}
    claims = {c["name"]: c for c in ledger["claims"]}
    assert claims["sum of 0..9"]["id"] == "demo/01-claims/sum of 0..9"
    assert claims["sum of 0..9"]["nature"] == "deterministic" and claims["sum of 0..9"]["spread"] < 1e-3
    assert claims["float32 round-off of 0.1 * 3"]["spread"] == 1e-6  # an error bounded by its bar
    compared = claims["new beats old"]
    assert compared["nature"] == "statistical" and compared["spread_from"].startswith("half-width")
    assert compared["spread"] == pytest.approx((compared["interval"]["hi"] - compared["interval"]["lo"]) / 2)
    assert claims["mean of the draws"]["spread"] == pytest.approx(0.1 * claims["mean of the draws"]["measured"])
    assert claims["speed-up"]["nature"] == "timing" and claims["speed-up"]["spread"] is None
    for claim in claims.values():
        assert {"id", "name", "measured", "bar", "status", "scale", "nature", "spread"} <= set(claim)


def test_a_perturbed_run_differs_on_exactly_the_perturbed_claims(book, monkeypatch, tmp_path):
    monkeypatch.chdir(book)
    monkeypatch.setenv("DEMO_PERTURB", "1")
    status = cli.main(["verify", "--chapter", "demo", "--scale", "smoke", "--force", "--out", str(tmp_path)])
    assert status == 1  # a deterministic value differs
    found = verdicts(tmp_path / "verify-demo-smoke.json")
    assert {k for k, v in found.items() if v == "differs"} == {"sum of 0..9", "mean of the draws"}
    assert [c["fails"] for c in json.loads((tmp_path / "verify-demo-smoke.json").read_text())["claims"]
            if c["verdict"] == "differs"] == [True, False]  # deterministic, statistical
    assert found["new beats old"] == found["seeds"] == "reproduced"
    text = (tmp_path / "verify-demo-smoke.md").read_text()
    assert "| 01-claims: sum of 0..9 | 45 | 55 |" in text and "differs (fails)" in text
    env = json.loads((tmp_path / "verify-demo-smoke.json").read_text())["environment"]
    assert {"python", "torch", "cuda", "cuda_device", "device", "threads"} <= set(env)


def test_other_seeds_stay_within_noise_against_the_site_copy(book, monkeypatch, tmp_path):
    site = book / "site"
    monkeypatch.chdir(book)
    monkeypatch.setenv("DEMO_SEED_SHIFT", "100")
    status = cli.main(["verify", "--chapter", "demo", "--scale", "smoke", "--force", "--out", str(tmp_path),
                       "--against", str(site / "_static" / "ledger")])
    assert status == 0
    found = verdicts(tmp_path / "verify-demo-smoke.json")
    assert found["new beats old"] == found["mean of the draws"] == found["speed-up"] == "within noise"
    assert found["sum of 0..9"] == found["float32 round-off of 0.1 * 3"] == "reproduced"


def fake_gpu_run(root: Path, claims: list[dict]) -> None:
    """What the runner leaves after a gpu run of the notebook (no kernel)."""
    import jupytext

    (nb,) = discover(root)
    out = executed_path(root, nb, "gpu")
    out.parent.mkdir(parents=True, exist_ok=True)
    jupytext.write(jupytext.read(nb.path), out, fmt="ipynb")
    record = {"name": nb.name, "scale": "gpu", "seconds": 12.5, "peak_mib": 900.0, "claims_held": 1,
              "claims_total": 1, "cached": False, "error": "", "hash": content_hash(nb, "gpu"),
              "output_sha256": hashlib.sha256(out.read_bytes()).hexdigest()}
    out.with_suffix(".run.json").write_text(json.dumps(record))
    folder = ledger_dir(root, nb, "gpu")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "demo--01-claims.json").write_text(json.dumps({"chapter": "demo", "notebook": "01-claims",
                                                             "scale": "gpu", "dry_run": False, "claims": claims}))


GPU_CLAIM = {"name": "mean of the draws", "paper": "", "measured": 1.01, "bar": ">= 0.500", "status": "holds",
             "scale": "gpu", "chapter": "demo", "notebook": "01-claims", "note": "", "volatile": False, "unit": "",
             "kind": "check", "protocol": None}


def test_import_ledger_takes_a_gpu_report_and_refuses_one_from_other_sources(book, monkeypatch, tmp_path):
    monkeypatch.chdir(book)
    fake_gpu_run(book, [GPU_CLAIM])
    cuda = {"python": "3.11", "torch": "2.13.0", "numpy": "2", "cvxpy": "1", "icml26": "0.1",
            "device": "cuda:0 (NVIDIA H100)", "threads": "16", "cuda": "12.8", "cuda_device": "NVIDIA H100",
            "platform": "Linux", "cpu_count": "16"}
    monkeypatch.setattr(vf, "environment", lambda threads=None: dict(cuda))
    assert cli.main(["verify", "--chapter", "demo", "--scale", "gpu", "--no-run", "--out", str(tmp_path)]) == 0
    report = tmp_path / "verify-demo-gpu.json"
    assert verdicts(report) == {"mean of the draws": "no book value"}
    assert cli.main(["import-ledger", str(report)]) == 0
    ledger = json.loads((vf.published_dir(book) / "gpu" / "demo.json").read_text())
    assert ledger["source"]["kind"] == "import" and ledger["source"]["device"] == "NVIDIA H100"
    assert ledger["claims"][0]["status"] == "holds" and ledger["claims"][0]["measured"] == 1.01
    timings = json.loads((book / "data" / "timings.json").read_text())
    assert timings["demo/01-claims"]["gpu"]["device"] == "NVIDIA H100"
    # the maintainer's checkout has no gpu run of its own: the build publishes the imported
    # ledger and names the device on the ledger page
    for folder in ("executed", "ledger"):
        shutil.rmtree(book / "_build" / folder / "gpu")
    page = (stage(book, "smoke") / "front" / "ledger.md").read_text()
    assert "Evidence from readers' runs" in page and "NVIDIA H100" in page
    assert '_static/ledger/gpu/demo.json' in page and '_static/ledger/smoke/demo.json' in page

    tampered = json.loads(report.read_text())
    tampered["notebooks"]["01-claims"]["content_hash"] = "0" * 64
    (tmp_path / "tampered.json").write_text(json.dumps(tampered))
    with pytest.raises(BookError, match="do not match this checkout's sources: 01-claims"):
        vf.import_ledger(book, tmp_path / "tampered.json")
    cpu = {**tampered, "notebooks": json.loads(report.read_text())["notebooks"],
           "environment": {**cuda, "cuda": "none", "cuda_device": "none"}}
    (tmp_path / "cpu.json").write_text(json.dumps(cpu))
    with pytest.raises(BookError, match="no CUDA device"):
        vf.import_ledger(book, tmp_path / "cpu.json")
    assert cli.main(["import-ledger", str(tmp_path / "missing.json")]) == 2


def test_verdict_rules():
    stat = {"name": "x", "measured": 1.0, "bar": ">= 0.5", "status": "holds", "kind": "check"}
    assert vf.verdict(stat, {**stat, "measured": 1.15})["verdict"] == "within noise"  # 1.5 spreads
    assert vf.verdict(stat, {**stat, "measured": 1.4})["verdict"] == "differs"
    assert not vf.verdict(stat, {**stat, "measured": 1.4})["fails"]  # statistical: a warning only
    assert vf.verdict(stat, {**stat, "measured": 0.4, "status": "fails"})["verdict"] == "bar missed"
    ident = {**stat, "kind": "identity", "bar": "== 4"}
    assert vf.verdict(ident, {**ident, "measured": 1.0 + 1e-9})["verdict"] == "reproduced"
    assert vf.verdict(ident, {**ident, "measured": 1.001})["fails"]
    gap = {**stat, "measured": 1.7e-13, "bar": "<= 1e-10"}  # an exact property measured as round-off
    assert vf.expected_spread(gap)[:2] == ("deterministic", 1e-10)
    assert vf.verdict(gap, {**gap, "measured": 5e-11})["verdict"] == "reproduced"
    yes = {"name": "y", "measured": "yes", "bar": "true", "status": "holds", "kind": "check"}
    assert vf.verdict(yes, yes)["verdict"] == "reproduced" and vf.verdict(yes, None)["verdict"] == "not in your run"
    assert vf.verdict({**stat, "status": "not yet run at gpu"}, stat)["verdict"] == "no book value"
    with pytest.raises(TypeError, match="claim"):
        vf.expected_spread("x")


def test_claims_table_outside_the_build_shows_the_published_value_beside_the_readers(monkeypatch):
    import icml26.book.verify as verify_mod
    from icml26.core import Ledger

    published = {"speed-up": {"name": "speed-up", "measured": 11.5, "unit": "x"}}
    seen = []
    monkeypatch.setattr(verify_mod, "published_values",
                        lambda chapter, notebook, scale, against=None: seen.append((chapter, notebook, scale))
                        or published)
    monkeypatch.delenv("ICML26_LEDGER_DIR", raising=False)
    ledger = Ledger("demo", "01-x", scale="book")
    ledger.check("speed-up", 12.0, ">=", 2.0, unit="x", paper="faster")
    ledger.check("not published", 1.0, ">=", 0.5)
    text = ledger.to_text()
    header = text.splitlines()[1]
    assert "book's value" in header and header.index("this book") < header.index("book's value")
    assert "11.500 x" in text and seen[0] == ("demo", "01-x", "book")
    row = next(line for line in text.splitlines() if line.startswith("not published"))
    assert " - " in row  # the book has no value for it
    html = ledger.table()._repr_html_()
    assert "<th>book&#x27;s value</th>" in html or "<th>book's value</th>" in html
    assert 'class="claim-published">11.5 x<' in html
    assert list(ledger.table().frame.columns) == ["claim", "paper", "this book", "book's value", "bar", "status"]
    monkeypatch.setenv("ICML26_LEDGER_DIR", "/tmp/inside-the-build")  # the book's own run: its table only
    assert "book's value" not in ledger.to_text() and "claim-published" not in ledger.table()._repr_html_()



def test_a_failed_run_of_older_code_is_stale_and_never_published(tmp_path):
    """A failed run is published (its failures are part of the record) only while it is current: once
    the source changes, the old failure is stale and the chapter's ledger leaves it out."""
    from icml26.book.execute import _meta_path, publish_problem
    from icml26.book.sources import Notebook, content_hash

    src = tmp_path / "chapters" / "demo" / "01-a.md"
    src.parent.mkdir(parents=True)
    src.write_text("# A\n")
    nb = Notebook(tmp_path.resolve(), src.resolve())
    out = executed_path(tmp_path, nb, "smoke")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("{}")
    _meta_path(out).write_text(json.dumps({"error": "boom", "hash": content_hash(nb, "smoke")}))
    assert publish_problem(tmp_path, nb, "smoke").startswith("its run failed")
    src.write_text("# A, edited\n")
    assert publish_problem(tmp_path, nb, "smoke").startswith("stale")
    assert vf.chapter_ledger(tmp_path, "demo", "smoke", [nb]) is None
