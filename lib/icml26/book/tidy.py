"""What staging does to an executed notebook before it is rendered and offered for download.

- **One parameters cell.** papermill keeps the source's ``parameters`` cell and adds its own
  ``injected-parameters`` cell after it; a reader who edits the first and runs all would be
  reset to the build's scale by the second. :func:`merge_parameters` writes the injected values
  into the ``parameters`` cell and drops the injected one.
- **An install cell.** :func:`install_cell` is inserted first: it installs the book's package
  when it is missing (from the repository URL of ``_config.yml``; without one, it says to
  install from a clone with ``pip install -e .``). Tagged ``remove-cell``: hidden on the page,
  present in the downloaded ``.ipynb``.
- **What a static page cannot show**: progress-bar widgets and the notebook's widget state,
  the text repr of a trailing expression in a figure cell, stray ``Claim(...)`` reprs; ``nan``
  in an HTML table becomes ``-``.
- **The claims once**: the fixed-text copy of the ledger (``ledger.show()``, compared by nbval)
  stays in the notebook but is hidden on the page (``remove-output``); the HTML table shows them.
- **Alt text**: a figure's image gets its caption as alt text (math as Unicode); an image
  without a caption gets the notebook's words around it (:func:`context_alt`), never a file name.
"""

from __future__ import annotations

import re

INSTALL_TAG = "book-install"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
_ASSIGN = re.compile(r"^([A-Za-z_]\w*)\s*=")


def _tags(cell: dict) -> list[str]:
    return cell.setdefault("metadata", {}).setdefault("tags", [])


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def merge_parameters(nb: dict) -> dict:
    """Fold papermill's ``injected-parameters`` cell into the ``parameters`` cell (in place).

    Each assignment of the injected cell replaces the line that assigns the same name in the
    parameters cell (or is appended to it). A notebook without an injected cell is unchanged;
    one with an injected cell but no parameters cell gets the injected cell re-tagged.
    """
    cells = nb.get("cells", [])
    injected = [i for i, c in enumerate(cells) if "injected-parameters" in c.get("metadata", {}).get("tags", [])]
    if not injected:
        return nb
    params = [i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    for i in injected[1:]:
        cells[i]["metadata"]["tags"].remove("injected-parameters")
    inj = cells[injected[0]]
    if not params:
        tags = _tags(inj)
        tags.remove("injected-parameters")
        tags.append("parameters")
        return nb
    target = cells[params[0]]
    lines = _source(target).splitlines()
    for line in _source(inj).splitlines():
        match = _ASSIGN.match(line)
        if not match:
            continue
        name = match.group(1)
        hits = [k for k, old in enumerate(lines) if (m := _ASSIGN.match(old)) and m.group(1) == name]
        if hits:
            lines[hits[0]] = line
        else:
            lines.append(line)
    target["source"] = "\n".join(lines)
    del cells[injected[0]]
    return nb


def install_cell(repo_url: str = "") -> dict:
    """The first cell of a downloaded notebook: install ``icml26`` when it is missing."""
    head = ("# Run this cell first when you opened the notebook outside the book's environment\n"
            "# (a download, Colab, Binder): it installs the book's package `icml26` if it is missing.\n"
            "import importlib.util\n\n"
            "if importlib.util.find_spec(\"icml26\") is None:\n")
    url = (repo_url or "").strip().rstrip("/")
    if url:
        body = (f"    %pip install --quiet \"icml26 @ git+{url}\"\n"
                "    print(\"installed icml26; if an import below fails, restart the kernel\")")
    else:
        body = ("    raise ModuleNotFoundError(\n"
                "        \"this notebook needs the book's package icml26: in a clone of the book's repository \"\n"
                "        \"run `pip install -e .`, then restart the kernel\"\n"
                "    )")
    return {"cell_type": "code", "execution_count": None, "id": "book-install",
            "metadata": {"tags": ["remove-cell", INSTALL_TAG]}, "outputs": [], "source": head + body}


_NAN_CELL = re.compile(r"(<td\b[^>]*>)\s*(?:nan|NaN|<NA>|None)\s*(</td>)")


def dash_missing(page):
    """HTML tables (pandas DataFrames and Stylers) show ``-`` for a missing value, not ``nan``."""
    if isinstance(page, list):
        return [_NAN_CELL.sub(r"\1-\2", line) for line in page]
    return _NAN_CELL.sub(r"\1-\2", page)


def _plain(text: str) -> str:
    """Caption Markdown as plain text for an ``alt`` attribute (math as Unicode, see
    :func:`icml26.book.pages.tex_to_text`)."""
    from .pages import plain_title

    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links
    text = plain_title(text).replace("*", "")
    return " ".join(text.split())


_FENCE = re.compile(r"^(`{3,}|:{3,})\{[^}]*\}[^\n]*\n(?::[^\n]*\n)*(.*?)^\1[ \t]*$", re.S | re.M)
_DIRECTIVE_TITLE = re.compile(r"^(?:`{3,}|:{3,})\{(?:exercise|solution-start|figure)\}[ \t]*(\S[^\n]*)$", re.M)


def context_alt(cells: list[dict], index: int) -> str:
    """Alt text for the image of a code cell without a caption (``mystnb: figure: caption:``).
    Without one, docutils writes the image's file name as its alt text; this gives the page's own
    words instead: a first comment line of the cell, else the last paragraph of prose before it
    (directive fences skipped), prefixed "Figure: ". The fix a chapter should make is a caption."""
    if not isinstance(index, int) or not 0 <= index < len(cells):
        raise ValueError(f"index must be a cell index below {len(cells)}, got {index!r}")
    first = _source(cells[index]).lstrip().splitlines()[:1]
    if first and first[0].startswith("#") and not first[0].startswith(("#!", "# NBVAL", "# noqa")):
        said = first[0].lstrip("#").strip()
        if said:
            return "Figure: " + _plain(said)
    for cell in reversed(cells[:index]):
        if cell.get("cell_type") != "markdown":
            continue
        text = _source(cell)
        titles = _DIRECTIVE_TITLE.findall(text)
        prose = re.sub(r"^(`{3,}|:{3,})[^\n]*$", "", _FENCE.sub(r"\2", text), flags=re.M)
        paragraphs = [p for p in re.split(r"\n\s*\n", prose) if p.strip() and not p.lstrip().startswith(":")]
        if paragraphs or titles:
            said = _plain(paragraphs[-1] if paragraphs else titles[-1])
            return "Figure: " + (said if len(said) <= 300 else said[:297].rsplit(" ", 1)[0] + " ...")
    return "Figure drawn by the code above"


def tidy_notebook(nb: dict, repo_url: str = "") -> dict:
    """Everything staging does to one executed notebook (in place; returns it)."""
    merge_parameters(nb)
    nb.get("metadata", {}).pop("widgets", None)
    for position, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        mystnb = cell.get("metadata", {}).get("mystnb", {})
        is_figure = "figure" in mystnb
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_MIME in data:
                continue
            plain = data.get("text/plain", "")
            plain = "".join(plain) if isinstance(plain, list) else plain
            if out.get("output_type") == "execute_result" and set(data) == {"text/plain"}:
                if is_figure or plain.startswith("Claim("):
                    continue
            if "text/html" in data:
                data["text/html"] = dash_missing(data["text/html"])
            kept.append(out)
        cell["outputs"] = kept
        shown = "".join("".join(o.get("text", "")) for o in kept if o.get("output_type") == "stream")
        if shown.startswith("claims of ") and "remove-output" not in _tags(cell):
            _tags(cell).append("remove-output")
        if "tags" in cell.get("metadata", {}) and not cell["metadata"]["tags"]:
            del cell["metadata"]["tags"]
        caption = (mystnb.get("figure") or {}).get("caption") if is_figure else None
        if caption:
            mystnb.setdefault("image", {}).setdefault("alt", _plain(caption))
        elif any(k.startswith("image/") for o in kept for k in o.get("data", {})):
            image = cell.setdefault("metadata", {}).setdefault("mystnb", {}).setdefault("image", {})
            image.setdefault("alt", context_alt(nb["cells"], position))
    if not any(INSTALL_TAG in c.get("metadata", {}).get("tags", []) for c in nb["cells"]):
        first = next((i for i, c in enumerate(nb["cells"]) if c.get("cell_type") == "code"), len(nb["cells"]))
        cell = install_cell(repo_url)
        if nb.get("nbformat", 4) == 4 and nb.get("nbformat_minor", 5) < 5:
            del cell["id"]  # cell ids exist from nbformat 4.5 on
        nb["cells"].insert(first, cell)
    return nb


def parameter_cells(nb: dict) -> list[dict]:
    """The code cells that assign ``SCALE`` (a staged notebook has exactly one, tagged parameters)."""
    return [c for c in nb["cells"] if c.get("cell_type") == "code"
            and re.search(r"^SCALE\s*=", _source(c), re.M)]
