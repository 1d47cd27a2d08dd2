"""Where the book's sources are, which files are notebooks, and what a notebook depends on."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # lib/icml26


class BookError(Exception):
    """A user-facing error of the runner: printed as one line, exit status 2."""


def find_root(start: Path | None = None) -> Path:
    """The book's root: the nearest folder (from ``start`` or the package) holding ``_toc.yml``."""
    candidates = []
    if start is not None:
        candidates.append(Path(start).resolve())
    candidates += [Path.cwd().resolve(), PACKAGE_DIR]
    for base in candidates:
        for folder in (base, *base.parents):
            if (folder / "_toc.yml").exists() and (folder / "_config.yml").exists():
                return folder
    raise BookError("no book root found: run from the repository (a folder with _toc.yml and _config.yml)")


_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.S)


def is_notebook_source(path: Path) -> bool:
    """A MyST Markdown file is a notebook when its front matter declares jupytext and a kernel."""
    if path.suffix != ".md" or not path.is_file():
        return False
    match = _FRONT_MATTER.match(path.read_text(encoding="utf-8"))
    return bool(match) and "jupytext:" in match.group(1) and "kernelspec:" in match.group(1)


@dataclass(frozen=True)
class Notebook:
    """One notebook source of the book."""

    root: Path
    path: Path  # absolute path of the .md source

    @property
    def rel(self) -> Path:
        return self.path.relative_to(self.root)

    @property
    def chapter(self) -> str:
        """'front' for the front matter, else the chapter's slug."""
        parts = self.rel.parts
        return parts[1] if parts[0] == "chapters" else parts[0]

    @property
    def name(self) -> str:
        return f"{self.chapter}/{self.path.stem}"

    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")


def discover(root: Path) -> list[Notebook]:
    """Every notebook of the book, front matter first, then chapters in alphabetical order."""
    found = sorted((root / "front").glob("*.md")) if (root / "front").is_dir() else []
    found += sorted((root / "chapters").glob("*/*.md"))
    return [Notebook(root, p.resolve()) for p in found if is_notebook_source(p)]


def chapters(root: Path) -> list[str]:
    """Names accepted by ``--chapter``: 'front' and every chapter slug that has a notebook."""
    return sorted({nb.chapter for nb in discover(root)})


def select(root: Path, chapter_names: list[str] | None, notebook_paths: list[str] | None) -> list[Notebook]:
    """The notebooks named by ``--chapter`` and ``--notebook`` (all when neither is given)."""
    everything = discover(root)
    if not chapter_names and not notebook_paths:
        return everything
    chosen: list[Notebook] = []
    known = sorted({nb.chapter for nb in everything})
    for name in chapter_names or []:
        picked = [nb for nb in everything if nb.chapter == name]
        if not picked:
            raise BookError(f"unknown chapter {name!r}; known: {', '.join(known) or 'none'}")
        chosen += picked
    for raw in notebook_paths or []:
        path = Path(raw)
        path = (path if path.is_absolute() else Path.cwd() / path).resolve()
        if not path.exists():
            raise BookError(f"notebook not found: {raw}")
        if not is_notebook_source(path):
            raise BookError(f"not a notebook source (jupytext MyST .md with a kernelspec): {raw}")
        try:
            path.relative_to(root)
        except ValueError:
            raise BookError(f"notebook outside the book's root {root}: {raw}") from None
        chosen.append(Notebook(root, path))
    unique: dict[Path, Notebook] = {nb.path: nb for nb in chosen}
    return list(unique.values())


_IMPORT = re.compile(r"(?:import|from)\s+icml26\.(\w+)|from\s+icml26\s+import\s+([\w, ]+)")


def modules_used(source: str) -> set[str]:
    """The ``icml26`` subpackages a notebook imports (the core always counts)."""
    names = {"core"}
    for dotted, listed in _IMPORT.findall(source):
        if dotted:
            names.add(dotted)
        if listed:
            names.update(n.strip() for n in listed.split(",") if n.strip())
    return names


def _hash_tree(digest, folder: Path) -> None:
    if folder.is_file():
        digest.update(folder.name.encode())
        digest.update(folder.read_bytes())
        return
    if not folder.is_dir():
        return
    for file in sorted(folder.rglob("*")):
        if file.is_file() and "__pycache__" not in file.parts:
            digest.update(str(file.relative_to(folder)).encode())
            digest.update(file.read_bytes())


def content_hash(nb: Notebook, scale: str) -> str:
    """What decides whether a notebook must run again: its source, the scale, the package code it
    imports (the core included) and the chapter's data folder."""
    source = nb.source()
    digest = hashlib.sha256()
    digest.update(scale.encode())
    digest.update(source.encode())
    digest.update((PACKAGE_DIR / "__init__.py").read_bytes())
    for module in sorted(modules_used(source)):
        for candidate in (PACKAGE_DIR / module, PACKAGE_DIR / f"{module}.py"):
            _hash_tree(digest, candidate)
    _hash_tree(digest, nb.root / "data" / nb.chapter)
    return digest.hexdigest()
