"""The rendered book as readers use it: staging of executed notebooks (one parameters cell, the
install cell, hidden nbval copy of the claims, no widget state), the generated pages (ledger,
measured compute), the claims table, the method palette and the colour words of captions."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from icml26.book import site, tidy
from icml26.book.pages import book_chapters, compute_markdown, ledger_markdown, update_timings
from icml26.core import Ledger, method_color, method_colors
from icml26.core.style import METHOD_COLORS, PALETTE
from icml26.core.tables import claims_html, format_number, style_table

ROOT = Path(__file__).resolve().parents[1]


def code(source: str, tags=(), **meta) -> dict:
    md = dict(meta)
    if tags:
        md["tags"] = list(tags)
    return {"cell_type": "code", "execution_count": 1, "metadata": md, "outputs": [], "source": source, "id": "x"}


# -- one parameters cell ---------------------------------------------------------------------------
def test_merge_parameters_keeps_one_cell_with_the_run_value():
    nb = {"cells": [code('# the scale\nSCALE = "book"\nSEED = 1', ["parameters"]),
                    code('# Parameters\nSCALE = "smoke"\nEXTRA = 2\n', ["injected-parameters"]),
                    code("print(SCALE)")], "metadata": {}}
    tidy.merge_parameters(nb)
    assert len(nb["cells"]) == 2
    assert nb["cells"][0]["source"] == '# the scale\nSCALE = "smoke"\nSEED = 1\nEXTRA = 2'
    assert nb["cells"][0]["metadata"]["tags"] == ["parameters"]
    assert tidy.parameter_cells(nb) == [nb["cells"][0]]


def test_merge_without_parameters_cell_retags_the_injected_one():
    nb = {"cells": [code('SCALE = "smoke"', ["injected-parameters"])], "metadata": {}}
    tidy.merge_parameters(nb)
    assert nb["cells"][0]["metadata"]["tags"] == ["parameters"]


def test_editing_the_parameters_cell_changes_the_scale(tmp_path):
    """A notebook executed by papermill, staged, then edited by a reader: the edit wins."""
    nbformat = pytest.importorskip("nbformat")
    papermill = pytest.importorskip("papermill")
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.cells = [nbformat.v4.new_code_cell('SCALE = "book"', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("from icml26.core import resolve_scale\nprint(resolve_scale(SCALE))")]
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    env = {k: v for k, v in os.environ.items() if k != "ICML26_SCALE"}
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        papermill.execute_notebook(str(src), str(out), parameters={"SCALE": "smoke"}, progress_bar=False,
                                   kernel_name="python3")
        staged = tidy.tidy_notebook(json.loads(out.read_text()))
        params = tidy.parameter_cells(staged)
        assert len(params) == 1 and '"smoke"' in params[0]["source"]
        assert "parameters" in params[0]["metadata"]["tags"]
        printed = [c for c in staged["cells"] if "resolve_scale" in tidy._source(c)][0]
        assert "".join(printed["outputs"][0]["text"]).strip() == "smoke"
        # the reader edits the one parameters cell and runs all cells (the install cell included)
        params[0]["source"] = 'SCALE = "gpu"'
        edited = nbformat.reads(json.dumps(staged), as_version=4)
        NotebookClient(edited, kernel_name="python3", timeout=120).execute()
        printed = [c for c in edited.cells if "resolve_scale" in c.source][0]
        assert printed.outputs[0]["text"].strip() == "gpu"
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_staged_book_notebooks_have_one_parameters_cell_and_the_install_cell():
    folder = ROOT / "_build" / "src" / "smoke"
    staged = sorted(folder.rglob("*.ipynb")) if folder.is_dir() else []
    if not staged:
        pytest.skip("no staged smoke build (run: python -m icml26.book build --scale smoke)")
    for path in staged:
        nb = json.loads(path.read_text())
        params = tidy.parameter_cells(nb)
        assert len(params) == 1, f"{path}: {len(params)} cells set SCALE"
        assert '"smoke"' in tidy._source(params[0]), path
        first = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert {"remove-cell", tidy.INSTALL_TAG} <= set(first["metadata"]["tags"]), path
        assert "widgets" not in nb["metadata"], path
        for cell in nb["cells"]:
            for out in cell.get("outputs", []):
                plain = "".join(out.get("data", {}).get("text/plain", ""))
                assert not plain.startswith("Claim("), f"{path}: a stray Claim repr"
                assert tidy.WIDGET_MIME not in out.get("data", {}), f"{path}: a widget output"
            text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
            if text.startswith("claims of "):
                assert "remove-output" in cell["metadata"].get("tags", []), f"{path}: the text ledger is shown"


COLUMN_PX = 768


def figure_css_widths(nb: dict) -> list[tuple[str, float]]:
    """(figure name, width on the page in CSS pixels) of every PNG output: the output's metadata
    width for a 2x ("retina") image, else the PNG's own width."""
    import base64
    import struct

    out = []
    for cell in nb["cells"]:
        name = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("name", "(no name)")
        for o in cell.get("outputs", []):
            png = o.get("data", {}).get("image/png")
            if not png:
                continue
            raw = base64.b64decode("".join(png) if isinstance(png, list) else png)
            width = struct.unpack(">I", raw[16:20])[0]
            out.append((name, float(o.get("metadata", {}).get("image/png", {}).get("width", width))))
    return out


def test_staged_figures_fit_the_column():
    folder = ROOT / "_build" / "src" / "smoke"
    staged = sorted(folder.rglob("*.ipynb")) if folder.is_dir() else []
    if not staged:
        pytest.skip("no staged smoke build (run: python -m icml26.book build --scale smoke)")
    wide = [f"{p.relative_to(folder)}: {name} is {w:.0f} px" for p in staged
            for name, w in figure_css_widths(json.loads(p.read_text())) if w > 1.05 * COLUMN_PX]
    # 5 % of slack: a 7-inch figure at 110 dpi comes out at about 770 px after the tight bounding box
    assert not wide, f"figures wider than the {COLUMN_PX}-px column (they shrink on the page): " + "; ".join(wide)


# -- the install cell and the repository setting ---------------------------------------------------
def test_install_cell_follows_the_repository_url():
    empty = tidy.install_cell("")
    assert "pip install -e ." in empty["source"] and "git+" not in empty["source"]
    assert "remove-cell" in empty["metadata"]["tags"]
    url = tidy.install_cell("https://github.com/o/icml26-book/")
    assert '%pip install --quiet "icml26 @ git+https://github.com/o/icml26-book"' in url["source"]
    compile(empty["source"], "cell", "exec")


def test_configure_turns_buttons_on_only_with_a_url():
    off = site.configure({"html": {}, "repository": {"url": ""}}, "")
    assert "repository" not in off and not off["html"]["use_repository_button"]
    assert off["launch_buttons"]["colab_url"] == ""
    on = site.configure({"html": {}}, "https://github.com/o/r")
    assert on["repository"]["url"] == "https://github.com/o/r"
    assert on["html"]["use_repository_button"] and on["html"]["use_issues_button"]
    assert on["launch_buttons"]["colab_url"] and on["launch_buttons"]["binderhub_url"]
    assert "git clone https://github.com/o/r\ncd r" in site.clone_markdown("https://github.com/o/r")
    assert "pip install -e ." in site.clone_markdown("")
    assert site.CLONE_MARKER in (ROOT / "front" / "running.md").read_text()


def test_licence_files_and_footer():
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert "Attribution 4.0 International" in (ROOT / "LICENSE-CONTENT").read_text()
    config = (ROOT / "_config.yml").read_text()
    assert "CC BY 4.0" in config and "MIT" in config
    assert "CC BY 4.0" in (ROOT / "README.md").read_text()


# -- what staging removes or hides ---------------------------------------------------------------
def test_tidy_hides_the_text_ledger_and_drops_widgets_and_claim_reprs():
    widget = {"output_type": "display_data", "metadata": {},
              "data": {tidy.WIDGET_MIME: {"model_id": "m"}, "text/plain": "bar"}}
    claim = {"output_type": "execute_result", "metadata": {}, "execution_count": 1,
             "data": {"text/plain": "Claim(name='x', paper='', measured=1.0)"}}
    text = {"output_type": "stream", "name": "stdout", "text": ["claims of c/n at scale smoke\n", "..."]}
    fig = code("plot()", mystnb={"figure": {"caption": "Error against {math}`n`, see [there](x.md).",
                                            "name": "fig-x"}})
    fig["outputs"] = [{"output_type": "execute_result", "metadata": {}, "execution_count": 1,
                       "data": {"text/plain": "<Figure>"}}]
    nb = {"cells": [code("x"), code("ledger.check(...)"), code("# NBVAL_CHECK_OUTPUT\nledger.show()"),
                    fig], "metadata": {"widgets": {"state": {}}}, "nbformat": 4, "nbformat_minor": 5}
    nb["cells"][0]["outputs"] = [widget]
    nb["cells"][1]["outputs"] = [claim]
    nb["cells"][2]["outputs"] = [text]
    tidy.tidy_notebook(nb)
    assert "widgets" not in nb["metadata"]
    cells = nb["cells"]
    assert tidy.INSTALL_TAG in cells[0]["metadata"]["tags"]
    assert cells[1]["outputs"] == [] and cells[2]["outputs"] == []
    assert cells[3]["outputs"] == [text] and "remove-output" in cells[3]["metadata"]["tags"]
    assert cells[4]["outputs"] == []
    assert cells[4]["metadata"]["mystnb"]["image"]["alt"] == "Error against n, see there."


# -- the claims table and number formatting --------------------------------------------------------
@pytest.mark.parametrize("value, text", [(17.0, "17"), (0.123456, "0.123"), (2.776e-5, "2.78×10^-5"),
                                         (1234.5678, "1235"), (float("nan"), "-"), (None, "-"),
                                         (0.5, "0.500"), (-0.00123, "-0.00123"), (3.2e8, "3.20×10^8"),
                                         ("text", "text")])
def test_format_number(value, text):
    assert format_number(value) == text


def test_format_number_bad_input():
    with pytest.raises(TypeError, match="value"):
        format_number([1])
    with pytest.raises(ValueError, match="digits"):
        format_number(1.5, 0)


def test_claims_table_has_badges_no_index_and_a_frame():
    ledger = Ledger("demo", "nb", scale="smoke")
    ledger.check("tiny error", 2.776e-5, "<=", 1e-3)
    ledger.report("speed", 17.0, paper="10x")
    table = ledger.table()
    page = table._repr_html_()
    assert 'class="claim-status status-holds"' in page and "status-reported" in page
    assert "2.78×10<sup>−5</sup>" in page and "<th>claim</th>" in page
    assert '<span class="claim-bar">&lt;= 0.001</span>' in page
    assert "claims of demo/nb" in repr(table)
    assert list(table.columns) == ["claim", "paper", "this book", "bar", "status"]
    linked = claims_html(ledger.claims, links={"nb": "../x.html"}, notebook_titles={"nb": "Title"})
    assert '<a href="../x.html">Title</a>' in linked


def test_style_table_uses_dashes_for_missing():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, float("nan")], "b": ["x", None]})
    out = style_table(frame).to_html()
    assert ">-</td>" in out and "1" in out and "nan" not in out.lower().replace("dataframe", "")


# -- generated pages ---------------------------------------------------------------------------------
def _claims_file(root: Path, chapter: str, stem: str, statuses: list[str]) -> None:
    folder = root / "_build" / "ledger" / "smoke" / chapter / stem
    folder.mkdir(parents=True)
    claims = [{"name": f"{chapter} claim {i}", "paper": "p", "measured": 0.5, "bar": ">= 0.1", "status": s,
               "scale": "smoke", "chapter": chapter, "notebook": stem, "note": "", "volatile": False}
              for i, s in enumerate(statuses)]
    (folder / f"{chapter}--{stem}.json").write_text(json.dumps({"chapter": chapter, "notebook": stem,
                                                               "scale": "smoke", "claims": claims}))


def _mini_book(tmp_path: Path) -> Path:
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n  - caption: About\n    chapters:\n      - file: front/ledger\n"
        "  - caption: Part B\n    chapters:\n      - file: chapters/zeta/index\n        sections:\n"
        "          - file: chapters/zeta/01-one\n"
        "  - caption: Part A\n    chapters:\n      - file: chapters/alpha/index\n        sections:\n"
        "          - file: chapters/alpha/01-first\n")
    for slug, stem, title in (("zeta", "01-one", "Zeta"), ("alpha", "01-first", "Alpha")):
        (tmp_path / "chapters" / slug).mkdir(parents=True)
        (tmp_path / "chapters" / slug / "index.md").write_text(
            f"---\nbook:\n  question: why {slug}?\n---\n# The {title} chapter\n\n## Compute per scale\n\ntext\n")
        (tmp_path / "chapters" / slug / f"{stem}.md").write_text(f"# {title} notebook *one*\n")
    return tmp_path


def test_ledger_page_in_book_order_with_titles_links_and_counts(tmp_path):
    root = _mini_book(tmp_path)
    _claims_file(root, "alpha", "01-first", ["holds", "reported"])
    _claims_file(root, "zeta", "01-one", ["holds", "not asserted", "reported"])
    page = ledger_markdown(root, "smoke")
    assert page.index("The Zeta chapter") < page.index("The Alpha chapter")
    assert "5 claims: 2 holds, 1 not asserted, 2 reported" in page
    assert '<a href="../chapters/zeta/01-one.html">Zeta notebook one</a>' in page
    assert page.count("<details") == 2
    # raw HTML blocks must not be cut by a blank line (CommonMark ends an HTML block there)
    assert all(line.strip() for line in page.split("<details", 1)[1].splitlines()[:-1])
    chapters = book_chapters(root)
    assert [c.slug for c in chapters] == ["zeta", "alpha"] and chapters[0].meta == {"question": "why zeta?"}


def test_landing_cards_teachers_table_and_week_plan(tmp_path):
    from icml26.book.pages import landing_markdown, teachers_markdown, week_plan_markdown

    root = _mini_book(tmp_path)
    (root / "front").mkdir()
    (root / "front" / "planned.yml").write_text("- {slug: later, part: Part C, paper: A later paper}\n"
                                                "- {slug: alpha, part: Part A, paper: written}\n")
    timings = {"zeta/01-one": {"book": {"seconds": 125.0}}}
    page = landing_markdown(root, timings, {"zeta": ("_static/teasers/zeta.png", "a caption")})
    assert page.index("### Part B") < page.index("### Part A")
    assert ":img-top: _static/teasers/zeta.png" in page and ":img-alt: a caption" in page
    assert "why zeta?" in page and "run at book scale: 2 min" in page and "not measured" in page
    assert "[start here](chapters/zeta/01-one.ipynb)" in page
    assert "Chapters not yet written (1)" in page and "- A later paper (Part C)" in page and "written (Part" not in page
    table = teachers_markdown(root, timings)
    assert table.count("\n") == 3 and "The Zeta chapter" in table
    plan = week_plan_markdown(root)
    assert "| 2 | [The Zeta chapter]" in plan and "| 3 | [The Alpha chapter]" in plan and "| 4 |" in plan


def test_timings_are_recorded_and_tabled(tmp_path, monkeypatch):
    root = _mini_book(tmp_path)
    folder = root / "_build" / "executed" / "smoke" / "chapters" / "zeta"
    folder.mkdir(parents=True)
    (folder / "01-one.run.json").write_text(json.dumps({"name": "zeta/01-one", "scale": "smoke", "seconds": 4.24,
                                                        "peak_mib": 512.3, "error": ""}))
    data = update_timings(root, "smoke")
    assert data["zeta/01-one"]["smoke"]["seconds"] == 4.2
    assert json.loads((root / "data" / "timings.json").read_text()) == data
    table = compute_markdown(book_chapters(root)[0], data)
    assert "| [Zeta notebook one](01-one.ipynb) | 4 s | not measured | - |" in table
    assert "gpu" not in table.split("\n")[0]
    # the runner's CPU seconds (user + system of worker and kernel) are recorded and shown beside the wall time
    (folder / "01-one.run.json").write_text(json.dumps({"name": "zeta/01-one", "scale": "smoke", "seconds": 300.0,
                                                        "cpu_seconds": 150.04, "peak_mib": 512.3, "error": ""}))
    data = update_timings(root, "smoke")
    assert data["zeta/01-one"]["smoke"]["cpu_seconds"] == 150.0
    assert "| 5.0 min (2.5 min CPU) |" in compute_markdown(book_chapters(root)[0], data)
    monkeypatch.setenv("ICML26_DRY", "1")
    gpu_folder = root / "_build" / "executed" / "gpu" / "chapters" / "zeta"
    gpu_folder.mkdir(parents=True)
    (gpu_folder / "01-one.run.json").write_text(json.dumps({"name": "zeta/01-one", "scale": "gpu", "seconds": 9,
                                                            "peak_mib": 900, "error": ""}))
    assert "gpu" not in update_timings(root, "gpu")["zeta/01-one"]
    monkeypatch.delenv("ICML26_DRY")
    data = update_timings(root)
    assert "| gpu |" in compute_markdown(book_chapters(root)[0], data).replace("gpu peak", "x")
    # a record of an older version of the notebook (its content hash differs) is not a measurement of it
    (folder / "01-one.run.json").write_text(json.dumps({"name": "zeta/01-one", "scale": "smoke", "seconds": 99,
                                                        "peak_mib": 1, "error": "", "hash": "stale"}))
    assert update_timings(root, "smoke")["zeta/01-one"]["smoke"]["seconds"] == 300.0
    text = site.insert_compute((root / "chapters" / "zeta" / "index.md").read_text(), "TABLE")
    assert text.rstrip().endswith("TABLE")


# -- colours --------------------------------------------------------------------------------------------
def test_method_palette_is_fixed_and_documented():
    assert method_color("Band-KL") == method_color("band-kl") == METHOD_COLORS["band-kl"]
    assert set(METHOD_COLORS.values()) <= set(PALETTE)
    colours = method_colors(["Euler", "some new method", "another"])
    assert colours["Euler"] == METHOD_COLORS["euler"]
    assert len(set(colours.values())) == 3
    assert method_colors(["q1", "q2"]) == method_colors(["q1", "q2"])
    with pytest.raises(ValueError, match="name"):
        method_colors(["ok", ""])


COLOUR_WORDS = re.compile(r"\b(red|blue|green|orange|purple|pink|yellow|brown|gr[ae]y|black|cyan|magenta|violet|"
                          r"teal|olive|vermill?ion|sky)\b(?!-box)", re.I)
def hex_colour_words(code: str) -> set[str]:
    """Colour words for the hex colours the code sets by value ("#d55e00" is orange/vermillion)."""
    import colorsys

    words: set[str] = set()
    for hexcode in re.findall(r"""['"]#([0-9a-fA-F]{6})['"]""", code):
        r, g, b = (int(hexcode[i:i + 2], 16) / 255 for i in (0, 2, 4))
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        hue = h * 360
        if v < 0.2:
            words.add("black")
        elif s < 0.15:
            words |= {"grey", "gray"} if v < 0.95 else {"white"}
        elif hue < 15 or hue >= 345:
            words |= {"red", "vermilion", "vermillion"}
        elif hue < 45:
            words |= {"orange", "vermilion", "vermillion", "brown"}
        elif hue < 70:
            words |= {"yellow", "olive"}
        elif hue < 170:
            words |= {"green", "teal"}
        elif hue < 200:
            words |= {"cyan", "teal", "sky"}
        elif hue < 260:
            words |= {"blue", "sky"}
        elif hue < 290:
            words |= {"purple", "violet"}
        else:
            words |= {"magenta", "pink", "purple"}
    return words


# how code can set the colour a caption names (matplotlib's one-letter codes, grey levels "0.5")
SPELLINGS = {"grey": r"grey|gray|0?\.\d+|greys|binary", "gray": r"grey|gray|0?\.\d+|greys|binary",
             "black": r"black|k|#000000|#000", "red": r"red|r|reds", "blue": r"blue|b|blues",
             "green": r"green|g|greens", "cyan": r"cyan|c", "magenta": r"magenta|m",
             "yellow": r"yellow|y", "orange": r"orange|oranges", "purple": r"purple|purples"}
_FIGURE_CELL = re.compile(r"```\{code-cell\}[^\n]*\n---\n(.*?)\n---\n(.*?)```", re.S)


def caption_colour_words(source: str, package_code: str) -> list[tuple[str, str]]:
    """(figure name, colour word) for captions that name a colour the code does not set: the
    chapter's figures take their colours from the method palette, so a colour word in a caption
    is only allowed when the cell or the chapter's package sets that colour by name."""
    import yaml

    found = []
    for options, body in _FIGURE_CELL.findall(source):
        meta = yaml.safe_load(options) or {}
        figure = (meta.get("mystnb") or {}).get("figure") or {}
        caption = figure.get("caption") or ""
        explicit = hex_colour_words(body + "\n" + package_code)
        for word in {m.group(1).lower() for m in COLOUR_WORDS.finditer(caption)}:
            names = SPELLINGS.get(word, word)
            literal = re.compile(rf"""['"](tab:|xkcd:)?({names})(_r)?['"]""", re.I)
            if not (literal.search(body) or literal.search(package_code) or word in explicit):
                found.append((figure.get("name", "?"), word))
    return found


def test_caption_colour_check_flags_unset_colours():
    src = ("```{code-cell} ipython3\n---\nmystnb:\n  figure:\n    caption: The orange line is the method;"
           " black dots are data.\n    name: fig-a\n---\nplot(color='black')\n```\n")
    assert caption_colour_words(src, "") == [("fig-a", "orange")]
    assert caption_colour_words(src, "ax.plot(c='orange')") == []
    assert caption_colour_words(src, 'ListedColormap(["white", "#d55e00"])') == []
    assert caption_colour_words(src, 'ListedColormap(["#0072b2"])') == [("fig-a", "orange")]


def _palette_chapters():
    for index in sorted((ROOT / "chapters").glob("*/index.md")):
        slug = index.parent.name
        module = ROOT / "lib" / "icml26" / slug.replace("-", "_")
        if slug == "preconditioned-delta":
            module = ROOT / "lib" / "icml26" / "precond_delta"
        files = sorted(module.rglob("*.py")) if module.is_dir() else []
        package = "\n".join(f.read_text() for f in files)
        if "method_color" in package:
            yield slug, package


@pytest.mark.parametrize("slug, package", list(_palette_chapters()), ids=lambda x: x if len(x) < 40 else "")
def test_captions_name_no_colour_the_code_does_not_set(slug, package):
    problems = []
    for path in sorted((ROOT / "chapters" / slug).glob("[0-9]*.md")):
        problems += [f"{path.name}: {name} says {word!r}" for name, word in
                     caption_colour_words(path.read_text(), package)]
    assert not problems, "captions name colours from the palette: " + "; ".join(problems)


def test_units_show_in_both_tables():
    ledger = Ledger("demo", "nb", scale="smoke")
    ledger.check("speed-up", 12.0, ">=", 2.0, unit="x")
    ledger.report("time", 3.5, unit="s", volatile=True)
    text = ledger.to_text()
    assert "12.000 x" in text and ">= 2.000 x" in text and "(varies)" in text
    page = ledger.table()._repr_html_()
    assert "12 x" in page and "&gt;= 2.000 x" in page and "3.50 s" in page


def test_numbering_restarts_per_chapter():
    from icml26.book.numbering import renumber

    numbers = {"chapters/a/02-x": {"figure": {"f3": (3,)}},
               "chapters/a/01-x": {"figure": {"f2": (2,), "f1": (1,)}, "proof": {"t1": (1,)}},
               "chapters/b/01-y": {"figure": {"g1": (4,)}, "proof": {"t2": (2,)}},
               "front/how": {"figure": {"h": (5,)}}}
    order = ["intro", "front/how", "chapters/a/index", "chapters/a/01-x", "chapters/a/02-x", "chapters/b/01-y"]
    out = renumber(numbers, order)
    assert out["chapters/a/01-x"]["figure"] == {"f1": (1,), "f2": (2,)}
    assert out["chapters/a/02-x"]["figure"] == {"f3": (3,)}
    assert out["chapters/b/01-y"] == {"figure": {"g1": (1,)}, "proof": {"t2": (1,)}}
    assert out["front/how"]["figure"] == {"h": (1,)}


def test_thebe_configuration_is_declared_once():
    line = '<script>const THEBE_JS_URL = "x"; const thebe_selector = ".cell"</script>\n'
    page = "<head>\n" + line + "<script src=a.js></script>\n" + line + "</head>"
    fixed = site.dedupe_thebe(page)
    assert fixed.count("THEBE_JS_URL") == 1 and "a.js" in fixed


def test_missing_values_in_html_tables_become_dashes():
    pd = pytest.importorskip("pandas")
    html = pd.DataFrame({"a": [1.0, float("nan")]}).style.format("{:.4f}").to_html()
    assert "nan" in html
    fixed = tidy.dash_missing(html)
    assert "nan" not in fixed and ">-</td>" in fixed and "1.0000" in fixed
    assert tidy.dash_missing(["<td class='x'>NaN</td>", "<td>nano</td>"]) == ["<td class='x'>-</td>", "<td>nano</td>"]


# -- plain titles, alt text and offline math (issue 44) ----------------------------------------------
@pytest.mark.parametrize("tex, text", [
    (r"(\varepsilon,\delta)", "(ε,δ)"), (r"\gamma", "γ"), (r"p_{old}(x)", "p_old(x)"), (r"x^2 + y_i", "x²+yᵢ"),
    (r"\beta\log Z_\phi", "β log Zᵩ"), (r"\pi_{old}e^{r/\beta}", "π_old e^(r/β)"), (r"x^\star", "x⋆"),
    (r"\mathbb{E}[X] \le \frac{1}{n}", "𝔼[X] ≤ 1/n"), (r"\|w\|_2^2", "‖w‖₂²"), (r"\hat{y}", "ŷ"),
    (r"\mathrm{KL}(p\,\|\,q)", "KL(p ‖ q)"), (r"\epsilon\text{-DP at } n", "ϵ-DP at n"), (r"\E_{x\sim p}", "𝔼_(x ∼ p)"),
])
def test_tex_to_text(tex, text):
    from icml26.book.pages import tex_to_text

    assert tex_to_text(tex) == text


def test_plain_title_turns_math_into_unicode():
    from icml26.book.pages import plain_title, tex_to_text

    assert plain_title(r"DP-SGD against DP-C4 at the same $(\varepsilon,\delta)$") == \
        "DP-SGD against DP-C4 at the same (ε,δ)"
    assert plain_title(r"choosing $\gamma$ and $\delta$, *fast* `code` {math}`x_1`") == "choosing γ and δ, fast code x₁"
    assert plain_title(r"$x_1$ and $y_2$") == "x₁ and y₂"  # subscripts are not emphasis
    with pytest.raises(TypeError, match="text"):
        plain_title(None)
    with pytest.raises(TypeError, match="tex"):
        tex_to_text(3)


def test_every_title_of_the_book_is_plain_text():
    """What the ledger, the cards, the teachers' table and the compute tables show of each title."""
    from icml26.book.pages import plain_title

    tex = re.compile(r"\$|\\[A-Za-z()\[\]]")
    titles = [(c.slug, t) for c in book_chapters(ROOT) for t in [c.title, *c.notebook_titles.values()]]
    assert titles
    bad = [f"{slug}: {plain_title(t)!r}" for slug, t in titles if tex.search(plain_title(t))]
    assert not bad, "TeX left in plain titles: " + "; ".join(bad)


def test_ledger_and_cards_show_math_titles_as_unicode(tmp_path):
    from icml26.book.pages import landing_markdown

    root = _mini_book(tmp_path)
    (root / "chapters" / "alpha" / "01-first.md").write_text("# Alpha at the same $(\\varepsilon,\\delta)$\n")
    (root / "chapters" / "zeta" / "index.md").write_text(
        "---\nbook:\n  question: why $\\gamma$?\n---\n# The $\\gamma$ chapter\n")
    _claims_file(root, "alpha", "01-first", ["holds"])
    page = ledger_markdown(root, "smoke")
    assert '<a href="../chapters/alpha/01-first.html">Alpha at the same (ε,δ)</a>' in page
    cards = landing_markdown(root, {}, {})
    assert ":::{grid-item-card} The γ chapter" in cards and "why γ?" in cards
    assert "$" not in page + cards and "\\" not in page + cards


def test_page_titles_in_sphinx_are_plain_but_the_heading_keeps_its_math():
    from docutils import nodes
    from icml26.book.pages import plain_titles

    heading = nodes.title("", "", nodes.Text("Choosing "), nodes.math("", r"\gamma"), nodes.Text(" well"))
    doctree = nodes.document("", "")
    doctree += nodes.section("", heading)
    entry = nodes.reference("", "", nodes.Text("Choosing "), nodes.math("", r"\gamma"), nodes.Text(" well"),
                            anchorname="", refuri="page")
    env = type("Env", (), {"docname": "page", "titles": {"page": heading.deepcopy()},
                           "longtitles": {"page": heading.deepcopy()},
                           "tocs": {"page": nodes.bullet_list("", nodes.list_item("", entry))}})()
    plain_titles(type("App", (), {"env": env})(), doctree)
    assert env.titles["page"].astext() == env.longtitles["page"].astext() == "Choosing γ well"
    assert not list(env.titles["page"].findall(nodes.math))
    assert env.tocs["page"].astext() == "Choosing γ well"
    assert list(doctree.findall(nodes.math)), "the page's own heading keeps its math"


def test_alt_text_comes_from_the_caption_or_the_page_never_a_file_name():
    png = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}
    captioned = code("plot()", mystnb={"figure": {"caption": "Error $\\beta\\log Z_\\phi$ against *n*.",
                                                  "name": "fig-a"}})
    bare = code("plots.curves(runs)")
    commented = code("# accuracy against steps\nplots.curves(runs)")
    for cell in (captioned, bare, commented):
        cell["outputs"] = [dict(png)]
    prose = {"cell_type": "markdown", "metadata": {}, "source": (
        "```{exercise} Equal steps\n:label: ex-a\n\nRe-draw it.\n```\n\n```{solution-start} ex-a\n:class: dropdown\n"
        "```\n\nAgainst steps, dynamic sampling looks better than it is.\n")}
    nb = {"cells": [captioned, prose, bare, commented], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    tidy.tidy_notebook(nb)
    alts = [c["metadata"].get("mystnb", {}).get("image", {}).get("alt") for c in nb["cells"] if c.get("outputs")]
    assert alts == ["Error β log Zᵩ against n.", "Figure: Against steps, dynamic sampling looks better than it is.",
                    "Figure: accuracy against steps"]
    with pytest.raises(ValueError, match="index"):
        tidy.context_alt(nb["cells"], 99)


def test_the_site_ships_mathjax_and_the_config_points_to_it(tmp_path):
    import yaml

    if site.mathjax_source() is None:
        pytest.skip("django-static-mathjax is not installed")
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["config"]["mathjax_path"] == site.MATHJAX_PATH
    assert "icml26.book.pages" in config["sphinx"]["extra_extensions"]
    shipped = site.ship_mathjax(tmp_path)
    assert shipped == tmp_path / "_static" / "mathjax"
    assert (tmp_path / "_static" / site.MATHJAX_PATH).is_file() and (shipped / "LICENSE").is_file()
    assert list((shipped / "output" / "chtml" / "fonts").rglob("*.woff")), "the CHTML fonts"
    assert (shipped / "input" / "tex" / "extensions" / "ams.js").is_file()
    site.ship_mathjax(tmp_path)  # again, over the first copy
    with pytest.raises(ValueError, match="site"):
        site.ship_mathjax(tmp_path / "missing")
    with pytest.raises(TypeError, match="site"):
        site.ship_mathjax(None)
