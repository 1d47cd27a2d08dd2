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

from .execute import executed_path, publish_problem
from .pages import (
    CARDS_MARKER,
    TEACHERS_MARKER,
    WEEKS_MARKER,
    book_chapters,
    compute_markdown,
    landing_markdown,
    ledger_markdown,
    teachers_markdown,
    update_timings,
    week_plan_markdown,
)
from .sources import BookError, discover, source_problems
from .tidy import tidy_notebook

LEDGER_MARKER = "<!-- reproduction-ledger -->"
_SKIP = {"_build", ".venv", ".git", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".ruff_cache"}
_COPY = ("_config.yml", "_toc.yml", "references.bib")
_STATIC = "_static"


_MD_LINK = re.compile(r"\]\(([^)#\s]+)\.md(#[^)\s]*)?\)")


def _relink(text: str, folder: Path, notebooks: set[Path]) -> str:
    """Markdown links to a notebook's ``.md`` source point to its executed ``.ipynb`` instead."""

    def swap(match: re.Match) -> str:
        target = (folder / f"{match.group(1)}.md").resolve()
        ext = ".ipynb" if target in notebooks else ".md"
        return f"]({match.group(1)}{ext}{match.group(2) or ''})"

    return _MD_LINK.sub(swap, text)


def _tidy_outputs(src: Path, target: Path, repo_url: str = "") -> None:
    """Copy an executed notebook for rendering and download (see :mod:`icml26.book.tidy`)."""
    nb = tidy_notebook(json.loads(src.read_text()), repo_url)
    target.write_text(json.dumps(nb))
    shutil.copystat(src, target)


def repository_url(root: Path) -> str:
    """The book's repository URL from ``_config.yml`` (``repository: url:``); empty when unset."""
    config = yaml.safe_load((root / "_config.yml").read_text()) or {}
    return str((config.get("repository") or {}).get("url") or "").strip()


CLONE_MARKER = "<!-- clone-command -->"


def clone_markdown(repo_url: str) -> str:
    """What "Running the book" says about getting the sources."""
    if repo_url:
        name = repo_url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git") or "book"
        return (f"```bash\ngit clone {repo_url}\ncd {name}\nmake book\n```")
    return ("The repository's public address is not set yet (`repository: url:` in `_config.yml` is "
            "empty). From a copy of the sources, install the package in editable mode with "
            "`pip install -e .` (or run `make book`, which does it in `.venv`).")


def configure(config: dict, repo_url: str) -> dict:
    """Turn the repository, issue and launch buttons on when the repository URL is set."""
    html_cfg = config.setdefault("html", {})
    # an unset mode makes the theme log "Got invalid theme mode" on a reader's first visit
    sphinx_cfg = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx_cfg.setdefault("html_context", {}).setdefault("default_mode", "auto")
    launch = config.setdefault("launch_buttons", {})
    if repo_url:
        repo = config.setdefault("repository", {})
        repo["url"] = repo_url
        repo.setdefault("branch", "main")
        html_cfg.update(use_repository_button=True, use_issues_button=True)
        launch.setdefault("colab_url", "https://colab.research.google.com")
        launch.setdefault("binderhub_url", "https://mybinder.org")
    else:
        config.pop("repository", None)
        html_cfg.update(use_repository_button=False, use_issues_button=False, use_edit_page_button=False)
        launch.update(colab_url="", binderhub_url="", thebe=False)
    return config


_FRONT_BOOK = re.compile(r"\A---\s*\n(?:#[^\n]*\n)*book:\n(?:[ \t]+[^\n]*\n)+---\s*\n")


def extract_teaser(dest: Path, slug: str, name: str | None) -> tuple[str, str] | None:
    """Copy the PNG of the figure called ``name`` from the chapter's staged notebooks to
    ``_static/teasers/<slug>.png``; returns (path from the book's root, caption as alt text)."""
    if not name:
        return None
    import base64

    from .tidy import _plain

    for path in sorted((dest / "chapters" / slug).glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
            if figure.get("name") != name:
                continue
            for out in cell.get("outputs", []):
                png = out.get("data", {}).get("image/png")
                if png:
                    target = dest / "_static" / "teasers" / f"{slug}.png"
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(base64.b64decode("".join(png) if isinstance(png, list) else png))
                    return f"_static/teasers/{slug}.png", _plain(figure.get("caption", "")) or name
    return None


_COMPUTE_MARKER = "<!-- compute-table -->"
_H2 = re.compile(r"^## .*$", re.M)


def insert_compute(text: str, table: str) -> str:
    """Put the measured compute table at the marker, else at the end of the chapter's
    "Compute" section (the first level-2 heading naming compute), else leave the page alone."""
    if _COMPUTE_MARKER in text:
        return text.replace(_COMPUTE_MARKER, table)
    heads = list(_H2.finditer(text))
    for i, head in enumerate(heads):
        if "compute" in head.group(0).lower():
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            block = "\n\n**Measured per notebook**\n\n" + table.strip() + "\n\n"
            return text[:end].rstrip() + block + text[end:]
    return text


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
    # Only what ran, at the current content, is published; a chapter .md that is not a notebook
    # would be rendered unexecuted (issue 36).
    refused = source_problems(root, listed=listed) + [
        f"{nb.rel}: {why}" for nb in notebooks.values() if (why := publish_problem(root, nb, scale))]
    if refused:
        raise BookError(f"cannot build at scale {scale}: {'; '.join(refused)} "
                        f"(run: python -m icml26.book run --scale {scale})")
    for name in _COPY:
        if (root / name).exists():
            shutil.copy2(root / name, dest / name)
    if (root / _STATIC).is_dir():
        shutil.copytree(root / _STATIC, dest / _STATIC)
    repo_url = repository_url(root)
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
                _tidy_outputs(executed_path(root, notebooks[src.resolve()], scale), target.with_suffix(".ipynb"),
                              repo_url)
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
    configure(config, repo_url)
    extensions = config.setdefault("sphinx", {}).setdefault("extra_extensions", [])
    if "icml26.book.numbering" not in extensions:
        extensions.append("icml26.book.numbering")  # figures, theorems, exercises numbered per chapter
    (dest / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    for page in dest.rglob("*.md"):
        text = page.read_text()
        if CLONE_MARKER in text:
            page.write_text(text.replace(CLONE_MARKER, clone_markdown(repo_url)))
    timings = update_timings(root)  # every scale's current runs, not only this build's
    teasers = {}
    for chapter in book_chapters(root):
        index = dest / "chapters" / chapter.slug / "index.md"
        if index.exists():
            text = _FRONT_BOOK.sub("", index.read_text(), count=1)  # the card metadata is not for Sphinx
            index.write_text(insert_compute(text, compute_markdown(chapter, timings)))
        teaser = extract_teaser(dest, chapter.slug, chapter.meta.get("teaser"))
        if teaser:
            teasers[chapter.slug] = teaser
    for rel, marker, make in (("intro.md", CARDS_MARKER, lambda: landing_markdown(root, timings, teasers)),
                              ("front/teachers.md", TEACHERS_MARKER, lambda: teachers_markdown(root, timings)),
                              ("front/teachers.md", WEEKS_MARKER, lambda: week_plan_markdown(root))):
        page = dest / rel
        if page.exists() and marker in page.read_text():
            page.write_text(page.read_text().replace(marker, make()))
    page = dest / "front" / "ledger.md"
    if page.exists():
        text = page.read_text()
        if LEDGER_MARKER not in text:
            raise BookError(f"front/ledger.md lacks the marker {LEDGER_MARKER}")
        body = missing_ledgers_markdown(root, scale, list(notebooks.values())) + ledger_markdown(root, scale, listed)
        page.write_text(text.replace(LEDGER_MARKER, body))
    from .verify import publish_site  # issue 42: the ledgers as data, the student edition's zips
    publish_site(root, dest, scale)
    return dest


def missing_ledgers_markdown(root: Path, scale: str, notebooks: list) -> str:
    """A warning on the ledger page naming each chapter with a notebook that keeps a ``Ledger``
    but has no recorded ledger at ``scale``: such a chapter is marked, not silently left out."""
    from .execute import ledger_dir
    from .pages import plain_title

    missing: dict[str, list[str]] = {}
    for nb in notebooks:
        if nb.chapter != "front" and "Ledger(" in nb.source() and not any(ledger_dir(root, nb, scale).glob("*.json")):
            missing.setdefault(nb.chapter, []).append(nb.path.stem)
    if not missing:
        return ""
    titles = {c.slug: c.title for c in book_chapters(root)}
    items = "\n".join(f"- {plain_title(titles.get(slug, slug))} (`{slug}`): no ledger for "
                      + ", ".join(f"`{stem}`" for stem in sorted(stems)) for slug, stems in sorted(missing.items()))
    return (f"```{{warning}}\nLedger missing at scale `{scale}`: these chapters' claims are not in the "
            f"counts below.\n\n{items}\n```\n\n")


_THEBE = re.compile(r"<script>const THEBE_JS_URL = [^<]*</script>\n?")


def dedupe_thebe(page: str) -> str:
    """sphinx-thebe writes its configuration script twice, and the second ``const`` declaration is
    a JavaScript error on every page ("THEBE_JS_URL has already been declared"): keep the first."""
    seen = []

    def keep_first(match: re.Match) -> str:
        seen.append(match)
        return match.group(0) if len(seen) == 1 else ""

    return _THEBE.sub(keep_first, page)


MATHJAX_PATH = "mathjax/tex-mml-chtml.js"  # ``mathjax_path`` of _config.yml, relative to _static
_MATHJAX_PARTS = ("tex-mml-chtml.js", "a11y", "adaptors", "input", "output", "sre", "ui")


def mathjax_source() -> Path | None:
    """MathJax 3's ``es5`` folder as the ``django-static-mathjax`` package installs it; None when
    the package is missing."""
    try:
        import mathjax  # django-static-mathjax
    except ImportError:
        return None
    folder = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    return folder if (folder / "tex-mml-chtml.js").is_file() else None


def _require_mathjax() -> Path:
    folder = mathjax_source()
    if folder is None:
        raise BookError("MathJax is not installed, and the book ships its own copy "
                        "(pip install django-static-mathjax)")
    return folder


def ship_mathjax(site: Path) -> Path:
    """Copy MathJax into the built site's ``_static/mathjax`` (about 10 MB: the combined
    TeX/MathML/CHTML component and the pieces it loads on demand: fonts, TeX extensions, the menu
    and the accessibility tools), so that the site renders its math without a network;
    ``mathjax_path`` in ``_config.yml`` points there. It is copied after Sphinx, not staged under
    ``_static``: Jupyter Book adds every ``.js`` file it finds there to every page's head. Raises
    BookError when MathJax is not installed rather than leave the site to a CDN."""
    if not isinstance(site, (str, Path)):
        raise TypeError(f"site must be a path, got {type(site).__name__}")
    if not Path(site).is_dir():
        raise ValueError(f"site must be the built site's folder, got {site!r}")
    folder = _require_mathjax()
    target = Path(site) / _STATIC / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for part in _MATHJAX_PARTS:
        if (folder / part).is_dir():
            shutil.copytree(folder / part, target / part)
        else:
            shutil.copy2(folder / part, target / part)
    licence = folder.parent / "LICENSE"
    if licence.is_file():
        shutil.copy2(licence, target / "LICENSE")
    return target


def html_dir(root: Path, scale: str) -> Path:
    return root / "_build" / ("html" if scale == "book" else f"html-{scale}")


def build(root: Path, scale: str, *, strict: bool = True, echo=print) -> Path:
    """Stage and render; returns the folder holding ``index.html``. Warnings fail the build."""
    src = stage(root, scale)
    _require_mathjax()  # before Sphinx runs, not after
    work = root / "_build" / "site" / scale
    # Sphinx's incremental build misses changes to bibliographies and configuration: start afresh then.
    digest = hashlib.sha256()
    for file in [*sorted(Path(__file__).parent.glob("*.py")), src / "_config.yml", src / "_toc.yml",
                 *sorted(src.rglob("*.bib"))]:
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
    ship_mathjax(out)  # the site renders its math offline (mathjax_path in _config.yml)
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        fixed = dedupe_thebe(text)
        if fixed != text:
            page.write_text(fixed, encoding="utf-8")
    # The intro links to "index.html"; Jupyter Book writes a redirect there, keep it.
    echo(f"book written to {out / 'index.html'}")
    return out
