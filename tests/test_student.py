"""Issue 42, part 2: the student edition (``python -m icml26.book student``).

Static checks run on every chapter (text processing, a few seconds); two chapters' student
notebooks execute at smoke scale (syngr and causcale, the cheapest), causcale's instructor version
runs with its solutions to show that the autograder cells pass, and ``nbgrader
generate_assignment`` takes syngr's instructor version into a throw-away course.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from icml26.book import __main__ as cli
from icml26.book.sources import BookError, find_root
from icml26.book.student import (
    BEGIN,
    END,
    ERROR_TAG,
    STUB_CODE,
    TESTS,
    _assigned,
    chapter_notebooks,
    check_student,
    edition,
    execute,
    grades,
    parse_myst,
)
from minibook import PARAMS, cell, make_chapter_book

ROOT = find_root()
EXECUTED = ("syngr", "causcale")  # the two chapters whose student notebooks run (smoke, ~15 s each)


@pytest.fixture(scope="module")
def editions():
    return {slug: [edition(nb) for nb in nbs] for slug, nbs in chapter_notebooks(ROOT).items()}


def test_every_student_notebook_passes_the_static_checks(editions):
    import nbformat
    from nbformat import from_dict
    from nbgrader.nbgraderformat import MetadataValidator

    validator = MetadataValidator()
    problems, exercises = [], 0
    for eds in editions.values():
        for ed in eds:
            problems += check_student(ed)
            validator.validate_nb(from_dict(ed.student))  # nbgrader's own schema and rules
            validator.validate_nb(from_dict(ed.source))
            nbformat.validate(from_dict(ed.student))
            source = ed.notebook.source()
            assert len(ed.exercises) == source.count("{solution-start}"), ed.notebook.rel
            text = json.dumps(ed.student)
            assert "{solution-start}" not in text and "{solution-end}" not in text
            stubs = [c for c in ed.student["cells"] if c["metadata"].get("nbgrader", {}).get("solution")
                     and c["cell_type"] == "code"]
            assert len(stubs) == sum(e.code for e in ed.exercises)
            assert all(ERROR_TAG in c["metadata"]["tags"] for c in stubs)
            exercises += len(ed.exercises)
    assert not problems, "\n".join(problems)
    assert exercises >= 100
    assert sum(e.autograded for eds in editions.values() for ed in eds for e in ed.exercises) >= 8


def test_the_registry_tests_name_real_exercises_and_read_what_their_solutions_define(editions):
    by_label = {e.label: (ed, e) for eds in editions.values() for ed in eds for e in ed.exercises}
    for label, code in TESTS.items():
        assert label in by_label, f"TESTS names {label!r}, which no chapter has"
        ed, exercise = by_label[label]
        assert exercise.tests == [code] and exercise.reads, label
        assert "assert" in code
        solution = "\n".join(c["source"] for c in ed.source["cells"] if BEGIN in c["source"]
                             and f"Exercise {label}:" in c["source"])
        assert set(exercise.reads) <= _assigned(solution), label


def minibook(tmp_path: Path, solution: str, test: str = "", exercise_label: str = "demo-ex-one") -> Path:
    """A chapter with one exercise whose solution is ``solution``, with an ``autograde`` cell
    ``test`` inside the solution when given."""
    body = PARAMS + cell("import numpy as np\nx = np.arange(4)") + (
        f"## Exercises\n\n```{{exercise}}\n:label: {exercise_label}\n\nSquare x.\n```\n\n"
        f"```{{solution-start}} {exercise_label}\n:class: dropdown\n```\n\nSquaring each entry of the vector.\n\n"
        + cell(solution) + (cell(test, "autograde") if test else "")
        + "```{solution-end}\n```\n\n## Summary\n\n" + cell("print('the end')"))
    return make_chapter_book(tmp_path, "demo", {"01-a": body})


def test_a_leak_a_moved_stub_and_a_dangling_solution_are_caught(tmp_path):
    root = minibook(tmp_path, "squares_of_the_vector = x ** 2\nprint(squares_of_the_vector)",
                    test="assert np.all(squares_of_the_vector == x * x)")
    (nb,) = chapter_notebooks(root)["demo"]
    ed = edition(nb)
    assert check_student(ed) == []
    (exercise,) = ed.exercises
    assert exercise.tests == ["assert np.all(squares_of_the_vector == x * x)"]  # the source's autograde cell
    assert exercise.reads == ["squares_of_the_vector"] and exercise.written and exercise.code == 1
    test = next(c for c in ed.student["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "demo-ex-one-test")
    assert test["metadata"]["nbgrader"]["locked"] and test["metadata"]["editable"] is False
    cells = ed.student["cells"]
    stub = next(c for c in cells if STUB_CODE in c["source"])
    stub["source"] = "squares_of_the_vector = x ** 2\n" + stub["source"]
    assert any("solution text in the student version" in p for p in check_student(ed))
    ed = edition(nb)
    cells = ed.student["cells"]
    i = next(i for i, c in enumerate(cells) if STUB_CODE in c["source"])
    cells.insert(2, cells.pop(i))  # the stub no longer stands where the solution stood
    assert any("differ from the source's" in p for p in check_student(ed))

    nb.path.write_text(nb.source().replace("```{solution-end}\n```\n", ""))
    with pytest.raises(BookError, match="has no solution-end"):
        edition(nb)


def test_a_cell_that_needs_a_solution_is_reported(tmp_path):
    root = minibook(tmp_path, "sq = x ** 2")
    (nb,) = chapter_notebooks(root)["demo"]
    nb.path.write_text(nb.source().replace("print('the end')", "print(sq)"))
    assert any("reads sq, which only a solution defines" in p for p in check_student(edition(nb)))


def test_the_myst_reader():
    cells = parse_myst((ROOT / "chapters" / "bandpo" / "01-band-operator.md").read_text())
    assert cells[0]["cell_type"] == "markdown" and cells[1]["metadata"] == {"tags": ["parameters"]}
    assert any(c["cell_type"] == "code" and "mystnb" in c["metadata"] for c in cells)


@pytest.mark.slow
@pytest.mark.parametrize("slug", EXECUTED)
def test_student_notebooks_run_past_their_stubs_at_smoke(slug, tmp_path):
    for nb in chapter_notebooks(ROOT, [slug])[slug]:
        ed = edition(nb, scale="smoke")
        done = execute(ed.student, nb.path.parent, ledger_dir=tmp_path)
        stubs = [c for c in done["cells"] if c["metadata"].get("nbgrader", {}).get("solution")
                 and c["cell_type"] == "code"]
        assert stubs and all(any(o.get("ename") == "NotImplementedError" for o in c["outputs"]) for c in stubs)
        others = [c for c in done["cells"] if c["cell_type"] == "code" and "nbgrader" not in c["metadata"]]
        assert all(c.get("execution_count") for c in others), "a book cell did not run"
        assert not any(o.get("output_type") == "error" for c in others for o in c["outputs"])
        assert "ledger.assert_all()" in others[-1]["source"]
        assert all(score == 0 for score, _ in grades(done).values())  # unanswered: no points
        assert list(tmp_path.glob(f"{slug}--{nb.path.stem}.json")), "the ledger went elsewhere"


@pytest.mark.slow
def test_the_autograder_cells_pass_when_the_solutions_are_filled_back(tmp_path):
    scored = {}
    for nb in chapter_notebooks(ROOT, ["causcale"])["causcale"]:
        ed = edition(nb, scale="smoke")
        filled = json.loads(json.dumps(ed.source).replace(BEGIN + "\\n", "").replace("\\n" + END, ""))
        done = execute(filled, nb.path.parent, ledger_dir=tmp_path)
        scored.update(grades(done))
    assert len(scored) >= 4
    assert all(score == full for score, full in scored.values()), scored


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    assert cli.main(["student", "--chapter", "syngr", "--out", str(out)]) == 0
    return out


def test_the_student_command_writes_notebooks_instructor_versions_and_a_reproducible_zip(written, tmp_path):
    with zipfile.ZipFile(written / "syngr.zip") as archive:
        names = sorted(archive.namelist())
        readme = archive.read("syngr/README.md").decode()
    assert names == ["syngr/01-semantic-ids-and-synergy.ipynb", "syngr/02-syngr-vs-gr.ipynb",
                     "syngr/03-gr-text-vs-gr-fused.ipynb", "syngr/04-no-style-control.ipynb", "syngr/README.md"]
    assert "syngr-ex-unique" in readme and "Checked by a test cell: syngr-ex-unique, syngr-ex-levels" in readme
    assert (written / "source" / "nbgrader_config.py").exists()
    assert sorted(f"syngr/{p.name}" for p in (written / "source" / "syngr").iterdir()) == names[:4]
    again = tmp_path / "again"
    assert cli.main(["student", "--chapter", "syngr", "--out", str(again)]) == 0
    assert (again / "syngr.zip").read_bytes() == (written / "syngr.zip").read_bytes()
    assert cli.main(["student", "--chapter", "no-such-chapter", "--out", str(again)]) == 2


def text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@pytest.mark.slow
def test_nbgrader_generate_assignment_takes_a_chapter_as_is(written, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(written / "source" / "syngr", course / "source" / "syngr")
    shutil.copy2(written / "source" / "nbgrader_config.py", course / "nbgrader_config.py")
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "syngr", "--no-db", "--force"],
                          cwd=course, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for ours in sorted((written / "syngr").glob("*.ipynb")):
        released = json.loads((course / "release" / "syngr" / ours.name).read_text())
        mine = json.loads(ours.read_text())
        # nbgrader's release is our student version, cell for cell
        assert [text(c) for c in released["cells"]] == [text(c) for c in mine["cells"]]
        assert all(c["metadata"]["nbgrader"].get("checksum") for c in released["cells"]
                   if c["metadata"].get("nbgrader", {}).get("grade"))
