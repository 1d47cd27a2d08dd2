"""Render the book: stage the sources with executed notebooks in place of their Markdown,
generate the reproduction-ledger page, and run Jupyter Book with warnings as errors."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from .execute import executed_path
from .sources import BookError, discover

LEDGER_MARKER = "<!-- reproduction-ledger -->"
_SKIP = {"_build", ".venv", ".git", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".ruff_cache"}
_COPY = ("_config.yml", "_toc.yml", "references.bib")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def ledger_markdown(root: Path, scale: str, listed: set[Path] | None = None) -> str:
    """Every chapter's claims as one Markdown table per chapter, from the run's JSON files
    (``_build/ledger/<scale>/<chapter>/<notebook>/``); with ``listed``, only notebooks in the book."""
    folder = root / "_build" / "ledger" / scale
    files = sorted(folder.rglob("*.json")) if folder.is_dir() else []
    if listed is not None:
        def in_book(file: Path) -> bool:
            chapter, stem = file.parent.parent.name, file.parent.name
            base = root / "front" if chapter == "front" else root / "chapters" / chapter
            return (base / stem).resolve() in listed

        files = [f for f in files if in_book(f)]
    if not files:
        return f"No notebook has recorded claims at scale `{scale}` yet."
    by_chapter: dict[str, list[dict]] = {}
    for file in files:
        payload = json.loads(file.read_text())
        by_chapter.setdefault(payload["chapter"], []).extend(payload["claims"])
    counts = {k: sum(c["status"] == "holds" for c in v) for k, v in by_chapter.items()}
    checked = {k: sum(c["status"] in ("holds", "fails") for c in v) for k, v in by_chapter.items()}
    out = [f"Scale of this build: `{scale}`.", "",
           "| chapter | claims checked | hold |", "|---|---|---|"]
    out += [f"| {k} | {checked[k]} | {counts[k]} |" for k in sorted(by_chapter)]
    for chapter in sorted(by_chapter):
        out += ["", f"## {chapter}", "",
                "| notebook | claim | paper | this book | bar | status |", "|---|---|---|---|---|---|"]
        for c in by_chapter[chapter]:
            measured = c["measured"]
            if isinstance(measured, float):
                measured = f"{measured:.4g}"
            out.append("| " + " | ".join(_cell(x) for x in (
                c["notebook"], c["name"], c["paper"], measured, c["bar"], c["status"])) + " |")
    return "\n".join(out)


_MD_LINK = re.compile(r"\]\(([^)#\s]+)\.md(#[^)\s]*)?\)")


def _relink(text: str, folder: Path, notebooks: set[Path]) -> str:
    """Markdown links to a notebook's ``.md`` source point to its executed ``.ipynb`` instead."""

    def swap(match: re.Match) -> str:
        target = (folder / f"{match.group(1)}.md").resolve()
        ext = ".ipynb" if target in notebooks else ".md"
        return f"]({match.group(1)}{ext}{match.group(2) or ''})"

    return _MD_LINK.sub(swap, text)


_WIDGET = "application/vnd.jupyter.widget-view+json"


def _tidy_outputs(src: Path, target: Path) -> None:
    """Copy an executed notebook for rendering, dropping what a static page cannot show:
    progress-bar widgets (no widget state is saved) and, in figure cells, the text repr of a
    trailing expression (a figure cell must hold one figure for its caption and label)."""
    nb = json.loads(src.read_text())
    for cell in nb["cells"]:
        if cell.get("cell_type") != "code":
            continue
        is_figure = "figure" in cell.get("metadata", {}).get("mystnb", {})
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if _WIDGET in data:
                continue
            if is_figure and out.get("output_type") == "execute_result" and set(data) == {"text/plain"}:
                continue
            kept.append(out)
        cell["outputs"] = kept
    target.write_text(json.dumps(nb))
    shutil.copystat(src, target)


def _bibfiles(root: Path) -> list[str]:
    files = ["references.bib"] if (root / "references.bib").exists() else []
    files += [str(p.relative_to(root)) for p in sorted((root / "chapters").glob("*/references.bib"))]
    return files


def toc_files(root: Path) -> set[Path]:
    """The documents ``_toc.yml`` lists, as absolute paths without suffix."""
    found: set[Path] = set()

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str):
                    found.add((root / node[key]).with_suffix("").resolve())
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load((root / "_toc.yml").read_text()))
    return found


def stage(root: Path, scale: str) -> Path:
    """Copy the book's sources to ``_build/src/<scale>``; notebooks become their executed ``.ipynb``.

    Only notebooks that ``_toc.yml`` lists are needed (and copied): a chapter being written
    stays out of the build until it enters the table of contents.
    """
    dest = root / "_build" / "src" / scale
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    listed = toc_files(root)
    notebooks = {nb.path: nb for nb in discover(root) if nb.path.with_suffix("") in listed}
    missing = [str(nb.rel) for nb in notebooks.values() if not executed_path(root, nb, scale).exists()]
    if missing:
        raise BookError(f"not executed at scale {scale}: {', '.join(missing)} (run: python -m icml26.book run)")
    for name in _COPY:
        if (root / name).exists():
            shutil.copy2(root / name, dest / name)
    for top in sorted(root.iterdir()):
        if top.suffix == ".md" and top.name not in ("README.md", "CONTRIBUTING.md"):
            shutil.copy2(top, dest / top.name)
    for folder in ("front", "chapters"):
        for src in sorted((root / folder).rglob("*")):
            if not src.is_file() or _SKIP & set(src.parts) or src.suffix == ".ipynb":
                continue
            target = dest / src.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            if src.resolve() in notebooks:
                _tidy_outputs(executed_path(root, notebooks[src.resolve()], scale), target.with_suffix(".ipynb"))
            elif src.suffix == ".md" and src.resolve().with_suffix("") not in listed:
                continue  # not in the book (yet)
            elif src.suffix == ".md":
                target.write_text(_relink(src.read_text(), src.parent, set(notebooks)))
                shutil.copystat(src, target)
            else:
                shutil.copy2(src, target)
    for link in ("lib", "data"):  # literalinclude and figures refer to ../../lib, ../../data
        if (root / link).exists():
            (dest / link).symlink_to(root / link, target_is_directory=True)
    config = yaml.safe_load((root / "_config.yml").read_text())
    config["bibtex_bibfiles"] = _bibfiles(root)
    config.setdefault("exclude_patterns", []).extend(["lib/**", "data/**"])
    (dest / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    page = dest / "front" / "ledger.md"
    if page.exists():
        text = page.read_text()
        if LEDGER_MARKER not in text:
            raise BookError(f"front/ledger.md lacks the marker {LEDGER_MARKER}")
        page.write_text(text.replace(LEDGER_MARKER, ledger_markdown(root, scale, listed)))
    return dest


def html_dir(root: Path, scale: str) -> Path:
    return root / "_build" / ("html" if scale == "book" else f"html-{scale}")


def build(root: Path, scale: str, *, strict: bool = True, echo=print) -> Path:
    """Stage and render; returns the folder holding ``index.html``. Warnings fail the build."""
    src = stage(root, scale)
    work = root / "_build" / "site" / scale
    # Sphinx's incremental build misses changes to bibliographies and configuration: start afresh then.
    digest = hashlib.sha256()
    for file in [Path(__file__), src / "_config.yml", src / "_toc.yml", *sorted(src.rglob("*.bib"))]:
        digest.update(file.read_bytes())
    stamp = work / "inputs.sha256"
    if work.exists() and (not stamp.exists() or stamp.read_text() != digest.hexdigest()):
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest.hexdigest())
    cmd = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()",
           "build", str(src), "--path-output", str(work),
           "--builder", "html"]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    echo(f"rendering the book at scale {scale}: jupyter-book build {'-W -n --keep-going' if strict else ''}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    (root / "_build" / f"jupyter-book-{scale}.log").write_text(log)
    warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    if proc.returncode != 0 or (strict and warnings) or not (work / "_build" / "html").is_dir():
        shown = "\n".join(warnings[:30]) or log[-3000:]
        raise BookError(f"jupyter-book build failed at scale {scale}:\n{shown}")
    out = html_dir(root, scale)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(work / "_build" / "html", out)
    # The intro links to "index.html"; Jupyter Book writes a redirect there, keep it.
    echo(f"book written to {out / 'index.html'}")
    return out
