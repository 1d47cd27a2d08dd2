"""The fair-comparison protocol (icml26.core.compare) and its ledger claims (Ledger.compare)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from icml26.core import MIN_SEEDS, ClaimFailed, Comparison, Grid, Ledger, paired_init, t_interval, tune

ROOT = Path(__file__).resolve().parents[1]


def quadratic(opt):
    return lambda cfg: (math.log10(cfg["lr"]) - math.log10(opt)) ** 2


# -- grids and tuning -------------------------------------------------------------------------------
def test_grid_sorts_numeric_axes_and_counts_configs():
    g = Grid(lr=[1e-1, 1e-3, 1e-2], kind=["a", "b"])
    assert g.axes["lr"] == (1e-3, 1e-2, 1e-1) and g.ordered == {"lr": True, "kind": False}
    assert g.size == 6 and len(g.configs()) == 6


@pytest.mark.parametrize("bad", [dict(), dict(lr=[]), dict(lr="0.1"), dict(lr=[1, 1]), dict(lr=[1.0, math.nan])])
def test_grid_refuses_bad_axes(bad):
    with pytest.raises(ValueError, match="axes"):
        Grid(**bad)


def test_tune_picks_the_validation_best_and_flags_no_inner_optimum():
    t = tune("m", quadratic(1e-2), Grid(lr=[1e-3, 1e-2, 1e-1]), progress=False)
    assert t.best == {"lr": 1e-2} and t.edges == {} and t.n_configs == 3


@pytest.mark.parametrize("opt,side", [(1e-4, "lower"), (1.0, "upper")])
def test_tune_flags_a_best_value_at_the_grid_edge(opt, side):
    t = tune("m", quadratic(opt), Grid(lr=[1e-3, 1e-2, 1e-1]), progress=False)
    assert t.edges == {"lr": side} and t.unstated_edges == {"lr": side}
    assert "NOT stated" in t.describe()
    t.state_edge("lr", "a larger step diverges on every validation task")
    assert t.unstated_edges == {} and "stated" in t.describe()


def test_tune_goal_max_and_categorical_axes_have_no_edges():
    t = tune("m", lambda c: {"a": 1.0, "b": 3.0, "c": 2.0}[c["kind"]], Grid(kind=["a", "b", "c"]), goal="max",
             progress=False)
    assert t.best == {"kind": "b"} and t.edges == {}
    t = tune("m", lambda c: {"a": 5.0, "b": 3.0, "c": 2.0}[c["kind"]], Grid(kind=["a", "b", "c"]), goal="max",
             progress=False)
    assert t.best == {"kind": "a"} and t.edges == {}


def test_tune_ranks_diverged_configurations_last_and_refuses_all_diverged():
    t = tune("m", lambda c: math.nan if c["lr"] > 0.05 else -c["lr"], Grid(lr=[1e-3, 1e-2, 1e-1]), progress=False)
    assert t.best == {"lr": 1e-2}
    with pytest.raises(ValueError, match="evaluate"):
        tune("m", lambda c: math.inf, Grid(lr=[1e-3, 1e-2]), progress=False)


def test_tune_bad_arguments_are_named():
    with pytest.raises(ValueError, match="method"):
        tune("", quadratic(1), Grid(lr=[1.0]))
    with pytest.raises(TypeError, match="evaluate"):
        tune("m", 3, Grid(lr=[1.0]))
    with pytest.raises(TypeError, match="grid"):
        tune("m", quadratic(1), [1, 2])
    with pytest.raises(ValueError, match="goal"):
        tune("m", quadratic(1), Grid(lr=[1.0]), goal="best")
    with pytest.raises(TypeError, match="evaluate"):
        tune("m", lambda c: "low", Grid(lr=[1.0]), progress=False)
    t = tune("m", quadratic(1e-2), Grid(lr=[1e-3, 1e-2, 1e-1]), progress=False)
    with pytest.raises(ValueError, match="axis"):
        t.state_edge("lr", "not at an edge at all, so refused")
    t2 = tune("m", quadratic(1.0), Grid(lr=[1e-3, 1e-2, 1e-1]), progress=False)
    with pytest.raises(ValueError, match="reason"):
        t2.state_edge("lr", "ok")


# -- paired seeds and intervals ----------------------------------------------------------------------
def test_paired_init_gives_the_same_weights_per_seed_and_leaves_the_global_stream():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = paired_init(3, lambda: torch.nn.Linear(4, 2))
    b = paired_init(3, lambda: torch.nn.Linear(4, 2))
    c = paired_init(4, lambda: torch.nn.Linear(4, 2))
    assert torch.equal(a.weight, b.weight) and not torch.equal(a.weight, c.weight)
    assert torch.equal(torch.random.get_rng_state(), before)
    with pytest.raises(TypeError, match="seed"):
        paired_init("3", lambda: None)


def test_t_interval_matches_scipy():
    from scipy import stats

    v = np.array([0.1, 0.3, 0.2, 0.5, 0.4])
    mean, lo, hi = t_interval(v)
    ref = stats.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=stats.sem(v))
    assert mean == pytest.approx(0.3) and (lo, hi) == pytest.approx(ref)
    assert t_interval([2.0]) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError, match="values"):
        t_interval([1.0, math.nan])


def make_comparison(n_seeds=5, **kw):
    seeds = list(range(n_seeds))
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 1, n_seeds)  # a seed effect both methods share: pairing removes it
    grid = Grid(lr=[1e-3, 1e-2, 1e-1])
    cmp = Comparison("test MSE", goal="min", seeds=seeds, budget="optimiser steps", **kw)
    cmp.add("method", 1.0 + shared, tuned=tune("method", quadratic(1e-2), grid, progress=False), cost=100)
    cmp.add("baseline", 1.5 + shared + rng.normal(0, 0.01, n_seeds),
            tuned=tune("baseline", quadratic(1e-2), grid, progress=False), cost=100)
    cmp.add("no training", 3.0 + shared, untuned="zero steps: the prior alone", cost=0, control=True)
    return cmp


def test_paired_difference_removes_the_shared_seed_effect():
    cmp = make_comparison()
    d = cmp.diff("method", "baseline")
    assert d.mean == pytest.approx(-0.5, abs=0.02) and d.hi < 0 and d.wins == 5 and d.n == 5
    r = cmp.diff("method", "baseline", "ratio")
    assert r.per_seed == pytest.approx(cmp.rows["method"].per_seed / cmp.rows["baseline"].per_seed)
    assert cmp.problems() == []
    frame = cmp.frame()
    assert list(frame["method"]) == ["method", "baseline", "no training (control)"]
    assert "lr=0.01 of 3 configs" in frame["tuned"][0]


def test_comparison_bad_arguments_are_named():
    with pytest.raises(ValueError, match="goal"):
        Comparison("m", goal="best", seeds=[0], budget="steps")
    with pytest.raises(ValueError, match="seeds"):
        Comparison("m", goal="min", seeds=[0, 0], budget="steps")
    with pytest.raises(ValueError, match="budget"):
        Comparison("m", goal="min", seeds=[0], budget="")
    cmp = Comparison("m", goal="min", seeds=[0, 1], budget="steps")
    with pytest.raises(ValueError, match="per_seed"):
        cmp.add("a", [1.0])
    with pytest.raises(ValueError, match="per_seed"):
        cmp.add("a", [1.0, math.nan])
    with pytest.raises(ValueError, match="cost"):
        cmp.add("a", [1.0, 2.0], cost=-1)
    with pytest.raises(TypeError, match="tuned"):
        cmp.add("a", [1.0, 2.0], tuned={"lr": 1})
    cmp.add("a", [1.0, 2.0])
    with pytest.raises(ValueError, match="name"):
        cmp.add("a", [1.0, 2.0])
    with pytest.raises(ValueError, match="stat"):
        cmp.diff("a", "a", "log")
    with pytest.raises(ValueError, match="not in the comparison"):
        cmp.diff("a", "b")


# -- the protocol's faults, each caught --------------------------------------------------------------
def test_each_protocol_fault_is_named():
    assert any("fewer than 5" in p for p in make_comparison(n_seeds=3).problems())
    assert make_comparison(n_seeds=3).problems(scale="smoke") == []
    assert any("not paired" in p for p in make_comparison(paired=False).problems())

    cmp = make_comparison()
    cmp.rows["baseline"].tuned = tune("baseline", quadratic(1e-2), Grid(lr=[1e-2]), progress=False)
    assert any("baseline had 1 configurations, another method 3" in p for p in cmp.problems())
    cmp.rows["baseline"].fewer_configs = "its only knob is the step size, fixed by theory"
    assert cmp.problems() == []

    cmp = make_comparison()
    cmp.rows["baseline"].tuned = tune("baseline", quadratic(1.0), Grid(lr=[1e-3, 1e-2, 1e-1]), progress=False)
    assert any("upper edge" in p for p in cmp.problems())

    cmp = make_comparison()
    cmp.rows["baseline"].tuned = None
    assert any("baseline is not tuned" in p for p in cmp.problems())

    cmp = make_comparison()
    cmp.rows["baseline"].cost = None
    assert any("no cost" in p for p in cmp.problems())

    cmp = make_comparison()
    cmp.rows["no training"].control = False
    assert any("no control row" in p for p in cmp.problems())


def test_ledger_compare_fails_an_asserted_claim_with_a_protocol_fault_whatever_the_value():
    # an untuned-looking baseline (a smaller grid than the method's), at book scale
    cmp = make_comparison()
    cmp.rows["baseline"].tuned = tune("baseline", quadratic(1e-2), Grid(lr=[1e-2]), progress=False)
    ledger = Ledger("demo", "01-x", scale="book")
    claim = ledger.compare("method beats baseline", cmp, "method", "baseline", "<", 0.0)
    assert claim.kind == "comparison" and claim.status == "fails"
    with pytest.raises(ClaimFailed, match="protocol: baseline had 1 configurations"):
        ledger.assert_all(save=False)

    # an unstated edge
    cmp = make_comparison()
    cmp.rows["method"].tuned = tune("method", quadratic(1e-5), Grid(lr=[1e-3, 1e-2, 1e-1]), progress=False)
    assert Ledger("demo", "01-x", scale="book").compare("c", cmp, "method", "baseline", "<", 0.0).failed

    # fewer than MIN_SEEDS seeds at book, but fine at smoke (not asserted there either)
    few = make_comparison(n_seeds=MIN_SEEDS - 1)
    assert Ledger("demo", "01-x", scale="book").compare("c", few, "method", "baseline", "<", 0.0).failed
    assert Ledger("demo", "01-x", scale="smoke").compare("c", few, "method", "baseline", "<", 0.0).status == "holds"


def test_ledger_compare_records_and_shows_the_protocol(tmp_path):
    cmp = make_comparison()
    ledger = Ledger("demo", "01-x", scale="book")
    c = ledger.compare("method beats baseline", cmp, "method", "baseline", "<", 0.0, on="hi")
    assert c.status == "holds" and c.measured == pytest.approx(cmp.diff("method", "baseline").hi)
    r = ledger.compare("ratio, reported", cmp, "method", "no training", stat="ratio")
    assert r.status == "reported" and r.kind == "comparison"
    text = ledger.to_text()
    assert "protocol of 'method beats baseline': 5 paired seeds" in text
    assert re.search(r"baseline: .* lr=0.01 of 3 configs; cost 100", text)
    assert "no training [control]" in text and "untuned: zero steps" in text
    saved = json.loads(ledger.save(tmp_path).read_text())
    proto = saved["claims"][0]["protocol"]
    assert proto["seeds"] == [0, 1, 2, 3, 4] and proto["claim"]["wins"] == 5 and proto["problems"] == []
    assert {m["name"]: m["n_configs"] for m in proto["methods"]} == {"method": 3, "baseline": 3, "no training": 0}
    html = ledger.table()._repr_html_()
    assert 'class="claim-protocol"' in html and "lr=0.01 of 3 configs" in html
    with pytest.raises(TypeError, match="comparison"):
        ledger.compare("x", {"a": 1}, "a", "b", "<", 0)
    with pytest.raises(ValueError, match="on"):
        ledger.compare("y", cmp, "method", "baseline", "<", 0.0, on="median")
    with pytest.raises(ValueError, match="threshold"):
        ledger.compare("z", cmp, "method", "baseline", threshold=0.0)


def test_protocol_lines_print_fewer_configs_reasons_and_snap_round_off_to_zero():
    from icml26.core.compare import protocol_lines

    cmp = Comparison("error", goal="min", seeds=range(5), budget="steps")
    small = tune("method", lambda c: (c["lr"] - 0.02) ** 2, Grid(lr=[0.01, 0.02, 0.04]), goal="min", progress=False)
    big = tune("base", lambda c: (c["lr"] - 0.02) ** 2, Grid(lr=[0.005, 0.01, 0.02, 0.04, 0.08]), goal="min",
               progress=False)
    noise = np.array([1e-18, -3e-18, 2e-18, -2e-18, 0.0])
    cmp.add("method", 1.0 + noise, tuned=small, cost=1, fewer_configs="its third knob is fixed by theory")
    cmp.add("base", 1.0 + noise, tuned=big, cost=1)
    cmp.add("none", noise, untuned="nothing to tune", cost=0, control=True)
    lines = protocol_lines("claim", cmp.protocol())
    assert any("fewer configs: its third knob is fixed by theory" in ln for ln in lines)
    control = next(ln for ln in lines if ln.lstrip().startswith("none"))
    assert "e-18" not in control and ": 0 [" in control


def test_dry_runs_assert_no_protocol():
    few = make_comparison(n_seeds=2)
    ledger = Ledger("demo", "01-x", scale="gpu", dry=True)
    assert ledger.compare("c", few, "method", "baseline", "<", 0.0).status == "dry run"


# -- every chapter's headline comparisons go through the protocol -----------------------------------
# Chapters whose headline comparisons have not yet moved to Ledger.compare. The chapter issues
# empty this list; it may only shrink.
NOT_YET_ON_THE_PROTOCOL = {
    "cgmt", "protein-tokens", "swe-rebench",
}


def chapters() -> list[str]:
    return sorted(p.name for p in (ROOT / "chapters").iterdir() if (p / "index.md").exists())


def test_the_allow_list_only_names_real_chapters():
    assert NOT_YET_ON_THE_PROTOCOL <= set(chapters())


@pytest.mark.parametrize("slug", chapters())
def test_every_chapter_records_its_headline_comparisons_with_the_protocol(slug):
    """A chapter off the allow-list records at least one ``ledger.compare`` claim; one on it must
    not (then it has moved: take it off the list)."""
    text = "".join(p.read_text() for p in sorted((ROOT / "chapters" / slug).glob("0*.md")))
    uses = "ledger.compare(" in text or ".compare(ledger" in text
    if slug in NOT_YET_ON_THE_PROTOCOL:
        assert not uses, f"{slug} uses Ledger.compare now: remove it from NOT_YET_ON_THE_PROTOCOL"
    else:
        assert uses, f"{slug}: its headline comparisons must be recorded with Ledger.compare (see CONTRIBUTING)"
