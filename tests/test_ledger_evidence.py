"""The ledger counts only evidence (issue 36, points 7-9): bars that cannot be missed are refused,
identities and settings are their own kinds, and a claim asserted only at gpu is "not yet run at gpu"
everywhere else, never "holds"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from icml26.book.pages import _counts, ledger_markdown
from icml26.core import ClaimFailed, Ledger

ROOT = Path(__file__).resolve().parents[1]


# -- 7. the API refuses claims that cannot fail -------------------------------------------------------
@pytest.mark.parametrize("threshold", [float("inf"), -float("inf"), "inf", None, True, [1.0]])
def test_a_bar_that_cannot_be_missed_is_refused(threshold):
    ledger = Ledger("demo", "01-x", scale="book")
    with pytest.raises((TypeError, ValueError), match="threshold"):
        ledger.check("a", 1e300, "<=", threshold)


@pytest.mark.parametrize("holds", ["no", [False], lambda: False, 1.0, None])
def test_check_true_needs_a_real_boolean(holds):
    with pytest.raises(TypeError, match="holds"):
        Ledger("demo", "01-x", scale="book").check_true("a", holds)


def test_check_true_takes_python_numpy_and_torch_booleans():
    ledger = Ledger("demo", "01-x", scale="book")
    assert ledger.check_true("py", 1 < 2).status == "holds"
    assert ledger.check_true("np", np.all([True, True])).status == "holds"
    assert ledger.check_true("torch", torch.tensor([1, 2]).lt(3).all()).status == "holds"
    assert ledger.check_true("false", np.bool_(False)).status == "fails"


def test_assert_at_must_name_a_scale_and_dry_is_for_the_gpu_dry_run_only():
    ledger = Ledger("demo", "01-x", scale="book")
    with pytest.raises(ValueError, match="assert_at"):
        ledger.check("a", 1.0, "<=", 2.0, assert_at=())
    with pytest.raises(ValueError, match="assert_at"):
        ledger.check_true("b", True, assert_at=())
    with pytest.raises(TypeError, match="assert_at"):
        ledger.check("c", 1.0, "<=", 2.0, assert_at="book")
    for scale in ("smoke", "book"):
        with pytest.raises(ValueError, match="dry"):
            Ledger("demo", "01-x", scale=scale, dry=True)
    assert Ledger("demo", "01-x", scale="gpu", dry=True).dry


# -- 8. identities and settings are their own kinds ----------------------------------------------------
def test_identities_are_asserted_everywhere_and_counted_apart_settings_are_not_counted():
    ledger = Ledger("demo", "01-x", scale="smoke")
    ident = ledger.identity("round-off", 1e-15, "<=", 1e-12)
    ledger.identity_true("exact", True)
    setting = ledger.setting("seeds", 10)
    ledger.check("paper claim", 0.5, ">=", 0.2)
    assert ident.kind == "identity" and ident.status == "holds"
    assert setting.kind == "setting" and setting.status == "setting"
    counts = _counts([{"status": c.status, "kind": c.kind} for c in ledger.claims])
    assert counts["identity"] == 2 and counts["holds"] == 1 and sum(counts.values()) == 3
    bad = Ledger("demo", "01-x", scale="smoke")
    bad.identity("round-off", 1.0, "<=", 1e-12)
    with pytest.raises(ClaimFailed):
        bad.assert_all(save=False)
    assert _counts([{"status": c.status, "kind": c.kind} for c in bad.claims])["fails"] == 1


def cell_sources(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# The claims issue 36 found counted as evidence although they hold by construction, are configuration,
# assert a null result or were never asserted: each is now of the right kind.
BY_CONSTRUCTION = {
    "focusing/02-carving-and-zooming": ['identity_true("carved set is inside the frustum set"',
                                        'identity_true("a larger eps never removes a voxel"',
                                        'identity("focus_zoom max decoded voxels / n_hi"'],
    "paced-rl/01-partition-function": ['identity_true("beta log Z* >= p_old'],
    "dp-c4/02-equal-privacy": ['identity("largest ||S_with - S_without|| / C_k'],
    "unrolled-gsp/01-graph-priors-and-admm": ['identity_true("eigenvalues of the normalised L^u in [0, 2]"'],
    "unrolled-gsp/02-unrolled-forecaster": ['setting("unrolled parameters"',
                                            'report("unrolled MAE / min(persistence, HA)"',
                                            'report("HA MAE / persistence MAE - 1'],
    "cgmt/01-score-law": ['setting("seeds behind each spread"'],
    "cgmt/02-minmax": ['setting("finite size: seeds per p"'],
    # the null result is a comparison reported without a bar (no operator), not an assertion
    "syngr/02-syngr-vs-gr": ['ledger.compare("SynGR - GR-fused, test recall@10", syn, "SynGR", "GR-fused", paper='],
    "syngr/01-semantic-ids-and-synergy": ['identity("no-synergy oracle recall@10 on the other-series slice (0 by construction)"'],
    "syngr/03-gr-text-vs-gr-fused": ['identity("motif-shift drop of GR-text (input unchanged)'],
    "protein-tokens/02-global-vs-local-tokens": ['report("RMSD of APT-mini with all 16 tokens'],
}


@pytest.mark.parametrize("notebook", sorted(BY_CONSTRUCTION))
def test_claims_that_cannot_fail_are_recorded_as_what_they_are(notebook):
    text = cell_sources(ROOT / "chapters" / f"{notebook}.md")
    for needle in BY_CONSTRUCTION[notebook]:
        assert needle in text, f"{notebook}: expected {needle!r}"


def test_no_notebook_asserts_a_claim_at_no_scale_or_checks_configuration():
    for path in sorted((ROOT / "chapters").glob("*/0*.md")):
        text = cell_sources(path)
        assert "assert_at=()" not in text, f"{path}: a claim asserted at no scale is a report"
        # a preset field compared with a bar is configuration, not a measurement
        assert not re.search(r"check_true\([^)]*cfg\.\w+\s*>=", text), f"{path}: checks a preset value"


def test_paced_rl_kl_bars_are_the_papers_value():
    for stem in ("01-partition-function", "02-paced-training"):
        text = cell_sources(ROOT / "chapters" / "paced-rl" / f"{stem}.md")
        bars = re.findall(r'beta KL\(pi_old \|\| pi_theta\) per step[^"]*", \w+(?:\["beta_kl"\])?, "<=", ([\d.e-]+)',
                          text)
        assert bars and all(float(b) == 4e-3 for b in bars), (stem, bars)


# -- 9. "asserted at gpu" is its own status until a gpu run exists -------------------------------------
def test_gpu_only_claims_are_not_yet_run_below_gpu_and_asserted_at_gpu():
    for scale in ("smoke", "book"):
        ledger = Ledger("demo", "01-x", scale=scale)
        held = ledger.check("holds below gpu", 1.0, ">=", 0.5, assert_at=("gpu",))
        missed = ledger.check("misses below gpu", 0.1, ">=", 0.5, assert_at=("gpu",))
        assert held.status == missed.status == "not yet run at gpu"
        ledger.assert_all(save=False)  # neither fails the notebook
    gpu = Ledger("demo", "01-x", scale="gpu", dry=False)
    assert gpu.check("at gpu", 0.1, ">=", 0.5, assert_at=("gpu",)).status == "fails"
    assert Ledger("demo", "01-x", scale="book").check("book too", 0.1, ">=", 0.5,
                                                     assert_at=("book", "gpu")).status == "fails"


def test_the_ledger_page_counts_gpu_promises_and_identities_apart(tmp_path):
    folder = tmp_path / "_build" / "ledger" / "book" / "demo"
    (folder / "01-x").mkdir(parents=True)
    ledger = Ledger("demo", "01-x", scale="book")
    ledger.check("paper claim", 0.5, ">=", 0.2)
    ledger.check("promise", 0.1, ">=", 0.5, assert_at=("gpu",))
    ledger.identity("identity", 0.0, "<=", 1e-9)
    ledger.setting("seeds", 5)
    (folder / "01-x" / "ledger.json").write_text(json.dumps(
        {"chapter": "demo", "notebook": "01-x", "scale": "book", "claims": [c.__dict__ for c in ledger.claims]}))
    page = ledger_markdown(tmp_path, "book")
    assert "3 claims: 1 holds, 1 not yet run at gpu, 1 identity" in page
    assert "status-not-yet-run-at-gpu" in page and "status-holds" in page
