"""A throw-away book for runner and pipeline tests: jupytext notebooks under ``front/`` of a tmp folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

HEADER = textwrap.dedent("""\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
        format_version: 0.13
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---
    """)


def cell(code: str, tags: str = "") -> str:
    """One MyST code cell, with optional cell tags (``"parameters"``)."""
    opts = f":tags: [{tags}]\n" if tags else ""
    return f"```{{code-cell}} ipython3\n{opts}{textwrap.dedent(code).strip()}\n```\n\n"


PARAMS = cell('SCALE = "book"', "parameters")


def make_book(root: Path, notebooks: dict[str, str]) -> Path:
    """A minimal book in ``root``: a toc, a config and one notebook per ``{name: body}`` in ``front/``."""
    (root / "_toc.yml").write_text("format: jb-book\nroot: intro\n")
    (root / "_config.yml").write_text("title: test\n")
    (root / "front").mkdir(exist_ok=True)
    for name, body in notebooks.items():
        (root / "front" / f"{name}.md").write_text(HEADER + "\n# " + name + "\n\n" + body)
    return root


LEDGER_PAGE = "# Reproduction ledger\n\n<!-- reproduction-ledger -->\n"


def make_chapter_book(root: Path, chapter: str, notebooks: dict[str, str], toc_extra: tuple[str, ...] = ()) -> Path:
    """A book whose ``_toc.yml`` lists the ledger page and one chapter, ``chapters/<chapter>/``: an
    ``index.md`` and one notebook per ``{stem: body}`` (in order), then the stems of ``toc_extra``
    (files a test writes itself)."""
    (root / "_config.yml").write_text("title: test\n")
    (root / "intro.md").write_text("# A test book\n")
    (root / "front").mkdir(exist_ok=True)
    (root / "front" / "ledger.md").write_text(LEDGER_PAGE)
    folder = root / "chapters" / chapter
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.md").write_text(f"# The {chapter} chapter\n")
    for stem, body in notebooks.items():
        (folder / f"{stem}.md").write_text(HEADER + "\n# " + stem + "\n\n" + body)
    sections = "".join(f"          - file: chapters/{chapter}/{stem}\n" for stem in [*notebooks, *toc_extra])
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n"
        "  - caption: About\n    chapters:\n      - file: front/ledger\n"
        f"  - caption: Part\n    chapters:\n      - file: chapters/{chapter}/index\n        sections:\n{sections}")
    return root
