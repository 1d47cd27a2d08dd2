"""Where the book's sources are, which files are notebooks, and what a notebook depends on."""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

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


NOTEBOOK_KEYS = ("jupytext", "kernelspec")


def front_matter(text: str) -> tuple[dict | None, str]:
    """``(metadata, problem)`` of a Markdown source's YAML front matter (the block between a first
    line ``---`` and the next ``---``): ``(None, "")`` when there is none, ``(None, problem)`` when
    it is unclosed, not YAML, or not a mapping. Line numbers in ``problem`` are the file's."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None, ""
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        return None, "the front matter opened by '---' on line 1 is never closed by a '---' line"
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
        where = f"line {mark.line + 2}: " if mark is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        if context is not None and getattr(exc, "context", None):
            problem += f", {exc.context} from line {context.line + 2}"
        return None, f"invalid YAML front matter ({where}{problem})"
    if data is None:
        return {}, ""
    if not isinstance(data, dict):
        return None, f"the front matter is a YAML {type(data).__name__}, not a mapping of keys"
    return data, ""


def notebook_problem(text: str) -> str:
    """'' when ``text`` is a notebook source (front matter declaring ``jupytext`` and a
    ``kernelspec`` with a name), else why not, naming a key that looks misspelled."""
    data, problem = front_matter(text)
    if problem:
        return problem
    if data is None:
        return "no front matter (a notebook opens with a '---' block declaring jupytext and kernelspec)"
    keys = [str(k) for k in data]
    for key in NOTEBOOK_KEYS:
        if key not in data:
            near = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
            hint = f" (found {near[0]!r}: misspelled?)" if near else ""
            return f"the front matter has no {key!r}{hint}"
    if not isinstance(data["jupytext"], dict):
        return "'jupytext' in the front matter is not a mapping"
    spec = data["kernelspec"]
    if not isinstance(spec, dict) or not spec.get("name"):
        return "'kernelspec' in the front matter has no 'name'"
    return ""


def is_notebook_source(path: Path) -> bool:
    """A MyST Markdown file is a notebook when its front matter (valid YAML) declares jupytext and a kernel."""
    if path.suffix != ".md" or not path.is_file():
        return False
    return not notebook_problem(path.read_text(encoding="utf-8"))


def _meant_as_notebook(data: dict | None) -> bool:
    keys = [str(k) for k in data or {}]
    return any(difflib.get_close_matches(k, keys, n=1, cutoff=0.6) for k in NOTEBOOK_KEYS)


def source_problems(root: Path, chapter_names: list[str] | None = None,
                    listed: set[Path] | None = None) -> list[str]:
    """Markdown files the runner would skip or the build would render unexecuted, one line each,
    naming the file: in a chapter folder every ``.md`` but ``index.md`` must be a notebook, and
    ``index.md`` must have valid front matter; under ``front/`` a page that tries to be a notebook
    (a front matter key close to jupytext or kernelspec) must be one, and broken front matter is an
    error. ``chapter_names`` limits the scan to those chapters ('front' included); ``listed`` (paths
    without suffix, as ``_toc.yml`` gives them) to those files."""
    files: list[Path] = []
    if chapter_names is None or "front" in chapter_names:
        files += sorted((root / "front").glob("*.md")) if (root / "front").is_dir() else []
    for folder in sorted((root / "chapters").glob("*/")) if (root / "chapters").is_dir() else []:
        if chapter_names is None or folder.name in chapter_names:
            files += sorted(folder.glob("*.md"))
    problems = []
    for path in files:
        if listed is not None and path.resolve().with_suffix("") not in listed:
            continue
        rel = path.relative_to(root)
        text = path.read_text(encoding="utf-8")
        data, problem = front_matter(text)
        if rel.parts[0] == "chapters" and path.name != "index.md":
            problem = notebook_problem(text)
            if problem:
                problems.append(f"{rel}: not a notebook ({problem}); a chapter folder holds index.md and "
                                "notebooks only")
        elif problem:
            problems.append(f"{rel}: {problem}")
        elif path.name != "index.md" and _meant_as_notebook(data) and notebook_problem(text):
            problems.append(f"{rel}: not a notebook ({notebook_problem(text)})")
    return problems


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
        if not picked and not (name != "front" and (root / "chapters" / name).is_dir()):
            raise BookError(f"unknown chapter {name!r}; known: {', '.join(known) or 'none'}")
        chosen += picked
    for raw in notebook_paths or []:
        path = Path(raw)
        path = (path if path.is_absolute() else Path.cwd() / path).resolve()
        if not path.exists():
            raise BookError(f"notebook not found: {raw}")
        problem = notebook_problem(path.read_text(encoding="utf-8")) if path.suffix == ".md" else "not a .md file"
        if problem:
            raise BookError(f"not a notebook source (jupytext MyST .md with a kernelspec): {raw}: {problem}")
        try:
            path.relative_to(root)
        except ValueError:
            raise BookError(f"notebook outside the book's root {root}: {raw}") from None
        chosen.append(Notebook(root, path))
    unique: dict[Path, Notebook] = {nb.path: nb for nb in chosen}
    return list(unique.values())


_CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)


def code_cells(source: str) -> list[str]:
    """The code cells of a MyST notebook source, options included, numbered from 1 as ``check``
    and the runner's error messages number them."""
    return _CELL.findall(source)


def options_and_body(cell: str) -> tuple[str, str]:
    """A code cell's options (``:tags:`` lines or a ``---`` block) and its code."""
    lines = cell.splitlines()
    if lines and lines[0].strip() == "---":
        end = lines[1:].index("---") + 1 if "---" in lines[1:] else 0
        return "\n".join(lines[1:end]), "\n".join(lines[end + 1:])
    opts = [ln for ln in lines if ln.startswith(":")]
    return "\n".join(opts), "\n".join(ln for ln in lines if not ln.startswith(":"))


def python_of(body: str) -> str:
    """A code cell's body as Python: IPython line magics and shell escapes become ``pass``, a
    cell magic (``%%``) empties the cell."""
    if body.lstrip().startswith("%%"):
        return ""
    return "\n".join(ln[: len(ln) - len(ln.lstrip())] + "pass" if ln.lstrip().startswith(("%", "!")) else ln
                     for ln in body.splitlines())


_PACKAGE = "icml26"
_IMPORT = re.compile(r"(?:import|from)\s+icml26\.(\w+)|from\s+icml26\s+import\s+([\w, ]+)")


def _subpackages() -> set[str]:
    return {p.stem for p in PACKAGE_DIR.iterdir()
            if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__")}


def _imports(tree: ast.AST) -> set[str]:
    """The subpackages of ``icml26`` a parsed cell imports: ``import icml26.x[.y] [as z]``,
    ``from icml26[.x] import ...`` (aliases, parentheses), ``icml26.x`` after ``import icml26 [as i]``,
    and ``importlib.import_module`` / ``__import__`` of a literal name. A computed name under
    ``icml26`` (an f-string) counts as every subpackage."""
    names: set[str] = set()
    aliases: set[str] = set()  # local names bound to the icml26 package itself

    def dotted(name: str) -> None:
        parts = name.split(".")
        if parts[0] == _PACKAGE and len(parts) > 1 and parts[1]:
            names.add(parts[1])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                dotted(alias.name)
                if alias.name == _PACKAGE or (alias.asname is None and alias.name.startswith(_PACKAGE + ".")):
                    aliases.add(alias.asname or _PACKAGE)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == _PACKAGE:
                names.update(alias.name for alias in node.names if alias.name != "*")
            dotted(node.module)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in ("import_module", "__import__"):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                package = node.args[1] if len(node.args) > 1 else next(
                    (k.value for k in node.keywords if k.arg == "package"), None)
                if first.value.startswith(".") and isinstance(package, ast.Constant) and isinstance(package.value, str):
                    dotted(package.value + first.value)
                else:
                    dotted(first.value)
            elif isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant) \
                    and str(first.values[0].value).startswith(_PACKAGE + "."):
                names.update(_subpackages())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            names.add(node.attr)
    return names


def modules_used(source: str) -> set[str]:
    """The ``icml26`` subpackages a notebook source's code cells import (the core always counts).

    Imports are read with :mod:`ast`, cell by cell; a cell that is not valid Python (``check``
    reports it) falls back to a textual scan of that cell."""
    names = {"core"}
    for cell in code_cells(source) if "```{code-cell}" in source else [source]:
        code = python_of(options_and_body(cell)[1])
        try:
            names |= _imports(ast.parse(code))
        except SyntaxError:
            for dotted, listed in _IMPORT.findall(code):
                names.update([dotted] if dotted else [n.strip() for n in listed.split(",") if n.strip()])
    return names


# Files of a chapter package that no notebook runs: its gpu cost model (``python -m icml26.book.gpu budget``).
# Editing one must not send every notebook of the chapter back to the runner nor stale its published ledger.
NOT_RUN_BY_NOTEBOOKS = frozenset({"cost.py"})


def _hash_tree(digest, folder: Path, skip: frozenset[str] = frozenset()) -> None:
    if folder.is_file():
        digest.update(folder.name.encode())
        digest.update(folder.read_bytes())
        return
    if not folder.is_dir():
        return
    for file in sorted(folder.rglob("*")):
        if file.is_file() and "__pycache__" not in file.parts and file.name not in skip:
            digest.update(str(file.relative_to(folder)).encode())
            digest.update(file.read_bytes())


def content_hash(nb: Notebook, scale: str) -> str:
    """What decides whether a notebook must run again: its source, the scale, the package code it
    imports (the core included; a chapter's ``cost.py``, which no notebook runs, left out) and the
    chapter's data folder."""
    source = nb.source()
    digest = hashlib.sha256()
    digest.update(scale.encode())
    digest.update(source.encode())
    digest.update((PACKAGE_DIR / "__init__.py").read_bytes())
    for module in sorted(modules_used(source)):
        for candidate in (PACKAGE_DIR / module, PACKAGE_DIR / f"{module}.py"):
            _hash_tree(digest, candidate, skip=NOT_RUN_BY_NOTEBOOKS)
    _hash_tree(digest, nb.root / "data" / nb.chapter)
    return digest.hexdigest()
