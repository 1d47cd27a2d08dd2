"""The notebook pipeline: source checks, the runner's errors, failing claims, caching, nbval."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from icml26.book import check_notebook, discover, find_root, nbval, run, select
from icml26.book.site import ledger_markdown
from icml26.book.sources import BookError, Notebook, content_hash, modules_used, source_problems
from minibook import PARAMS, cell, make_book

ROOT = Path(__file__).resolve().parents[1]

# -- every notebook of the book obeys the conventions ---------------------------------------------
def test_every_book_notebook_passes_the_source_checks():
    notebooks = discover(find_root(ROOT))
    assert notebooks, "the book has no notebooks"
    problems = source_problems(ROOT) + [p for nb in notebooks for p in check_notebook(nb)]
    assert not problems, "\n".join(problems)


def test_every_chapter_in_the_toc_has_an_index_and_notebooks():
    toc = (ROOT / "_toc.yml").read_text()
    for folder in sorted((ROOT / "chapters").glob("*/")):
        assert (folder / "index.md").exists(), f"{folder.name} has no index.md"
        assert f"chapters/{folder.name}/index" in toc, f"{folder.name} is not in _toc.yml"
        assert any(nb.chapter == folder.name for nb in discover(ROOT)), f"{folder.name} has no notebook"


# -- static checks catch what they should ------------------------------------------------------------
def test_check_catches_missing_parameters_and_scale(tmp_path):
    root = make_book(tmp_path, {
        "no-params": cell("x = 1"),
        "no-scale": cell("SEED = 0", "parameters"),
        "no-assert": PARAMS + cell('from icml26.core import Ledger\nledger = Ledger("a", "b")') + cell("1 + 1"),
        "good": PARAMS + cell("print(SCALE)"),
    })
    problems = {nb.path.stem: check_notebook(nb) for nb in discover(root)}
    assert "no code cell tagged 'parameters'" in problems["no-params"][0]
    assert "does not set SCALE" in problems["no-scale"][0]
    assert "assert_all" in problems["no-assert"][0]
    assert problems["good"] == []


def test_modules_used_and_hash_follow_imports(tmp_path):
    src = "import icml26.bandpo as b\nfrom icml26 import intro, core\nfrom icml26.core import Ledger"
    assert modules_used(src) == {"core", "bandpo", "intro"}
    root = make_book(tmp_path, {"a": PARAMS + cell("print(1)")})
    nb = discover(root)[0]
    assert content_hash(nb, "smoke") != content_hash(nb, "book")


# -- the command line answers bad input with one line ----------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["run", "--scale", "huge"], "unknown scale 'huge'"),
    (["run", "--chapter", "no-such-chapter"], "unknown chapter 'no-such-chapter'"),
    (["run", "--notebook", "chapters/none/01-missing.md"], "notebook not found"),
    (["run", "--jobs", "0"], "positive integer"),
    ([], "a command is needed"),
])
def test_cli_bad_input_is_one_line(args, message):
    proc = subprocess.run([sys.executable, "-m", "icml26.book", *args], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_select_errors(tmp_path):
    root = make_book(tmp_path, {"a": PARAMS})
    (tmp_path / "plain.md").write_text("# not a notebook\n")
    with pytest.raises(BookError, match="not a notebook source"):
        select(root, None, [str(tmp_path / "plain.md")])
    assert [nb.name for nb in select(root, ["front"], None)] == ["front/a"]


# -- execution: failing claims stop the run, the cache works, nbval catches unseeded output ----------
FAILING = PARAMS + cell("""
    from icml26.core import Ledger
    ledger = Ledger("demo", "failing", scale=SCALE)
    ledger.check("tail tokens get explored", 0.01, ">=", 0.02, paper="+0.02")
    ledger.check("this one holds", 1.0, ">=", 0.0)
""") + cell("ledger.assert_all()")

PASSING = PARAMS + cell("""
    from icml26.core import Ledger, seed_all
    import torch
    gen = seed_all(3)
    value = torch.rand(1, generator=gen).item()
""") + cell("""
    # NBVAL_CHECK_OUTPUT
    print(f"{value:.4f} at {SCALE}")
""")

UNSEEDED = PARAMS + cell("""
    # NBVAL_CHECK_OUTPUT
    import random
    print(random.random())
""")


@pytest.mark.slow
def test_failing_claim_fails_the_run_and_names_the_claim(tmp_path):
    root = make_book(tmp_path, {"failing": FAILING})
    (result,) = run(root, discover(root), "smoke", echo=lambda *_: None)
    assert not result.ok
    assert "ClaimFailed" in result.error and "tail tokens get explored" in result.error
    assert "this one holds" not in result.error
    assert (result.claims_held, result.claims_total) == (1, 2)


@pytest.mark.slow
def test_second_run_is_cached_and_nbval_checks_outputs(tmp_path):
    root = make_book(tmp_path, {"passing": PASSING, "unseeded": UNSEEDED})
    notebooks = discover(root)
    messages: list[str] = []
    first = run(root, notebooks, "smoke", jobs=2, echo=messages.append)
    assert all(r.ok and not r.cached for r in first), [r.error for r in first]
    second = run(root, notebooks, "smoke", echo=messages.append)
    assert all(r.cached for r in second)
    assert "nothing to execute" in messages[-1]
    passing = [nb for nb in notebooks if nb.path.stem == "passing"]
    unseeded = [nb for nb in notebooks if nb.path.stem == "unseeded"]
    assert nbval(root, passing, "smoke") == 0
    assert nbval(root, unseeded, "smoke") != 0  # an unseeded number in a checked cell is caught
    # a change to the source invalidates the cache of that notebook only
    nb = passing[0]
    nb.path.write_text(nb.source().replace("value:.4f", "value:.3f"))
    third = run(root, notebooks, "smoke", echo=messages.append)
    assert {r.name: r.cached for r in third} == {"front/passing": False, "front/unseeded": True}


def test_ledger_page_lists_claims(tmp_path):
    folder = tmp_path / "_build" / "ledger" / "book" / "demo" / "nb"
    folder.mkdir(parents=True)
    (folder / "demo--nb.json").write_text(
        '{"chapter": "demo", "notebook": "nb", "scale": "book", "claims": [{"name": "x | y", "paper": "p",'
        ' "measured": 0.123456, "bar": ">= 0.1", "status": "holds", "scale": "book", "chapter": "demo",'
        ' "notebook": "nb", "note": "", "volatile": false}]}')
    page = ledger_markdown(tmp_path, "book")
    assert "demo" in page and "x | y" in page and "0.123" in page and "1 claim: 1 holds" in page
    assert "No notebook" in ledger_markdown(tmp_path, "gpu")


def test_notebook_names():
    nb = Notebook(ROOT, ROOT / "chapters" / "bandpo" / "01-band-operator.md")
    assert nb.chapter == "bandpo" and nb.name == "bandpo/01-band-operator"
