"""Pages and tables generated at build time: the reproduction ledger, the measured compute per
notebook (``data/timings.json``), the chapter cards of the landing page and the teachers' table.

Chapter metadata lives in the front matter of ``chapters/<slug>/index.md`` (see CONTRIBUTING.md)::

    ---
    book:
      question: Does the test score of high-dimensional ERM stay Gaussian?
      teaser: fig-cgmt-score-hist      # a figure name of one of the chapter's notebooks
      prerequisites: convex optimisation, Gaussian integration by parts
      reading_minutes: 90
    ---
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml

from ..core.tables import claims_html, format_number

_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.S)
_TITLE = re.compile(r"^#\s+(.+?)\s*$", re.M)


def split_front_matter(text: str) -> tuple[dict, str]:
    match = _FRONT.match(text)
    if not match:
        return {}, text
    data = yaml.safe_load(match.group(1)) or {}
    return (data if isinstance(data, dict) else {}), text[match.end():]


def title_of(path: Path) -> str:
    """The first level-1 heading of a Markdown source, as plain text."""
    _, body = split_front_matter(path.read_text(encoding="utf-8"))
    match = _TITLE.search(body)
    return match.group(1).strip() if match else path.stem


def plain_title(text: str) -> str:
    """A title as plain text: Markdown emphasis and roles dropped, math turned into Unicode by
    :func:`tex_to_text` (``$(\\varepsilon,\\delta)$`` becomes ``(ε,δ)``). Titles go where MathJax
    does not look (the browser tab, link texts, cards), so no TeX may survive."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    text = re.sub(r"\{math\}`([^`]*)`", lambda m: tex_to_text(m.group(1)), text)
    text = re.sub(r"\{[\w:-]+\}`([^`]*)`", r"\1", text)
    text = _MATH.sub(lambda m: tex_to_text(next(g for g in m.groups() if g is not None)), text)
    text = re.sub(r"(\*{1,2}|_{1,2})(\S[^*_]*?)\1", r"\2", text)
    return text.replace("`", "")


# -- TeX as plain Unicode text -------------------------------------------------------------------
_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_GREEK = ("alpha α beta β gamma γ delta δ epsilon ϵ varepsilon ε zeta ζ eta η theta θ vartheta ϑ iota ι "
          "kappa κ lambda λ mu μ nu ν xi ξ pi π varpi ϖ rho ρ varrho ϱ sigma σ varsigma ς tau τ "
          "upsilon υ phi ϕ varphi φ chi χ psi ψ omega ω Gamma Γ Delta Δ Theta Θ Lambda Λ Xi Ξ Pi Π "
          "Sigma Σ Upsilon Υ Phi Φ Psi Ψ Omega Ω")
_SYMBOLS = ("ell ℓ partial ∂ nabla ∇ infty ∞ sum ∑ prod ∏ int ∫ forall ∀ exists ∃ emptyset ∅ "
            "varnothing ∅ neg ¬ lnot ¬ prime ′ top ⊤ langle ⟨ rangle ⟩ lfloor ⌊ rfloor ⌋ lceil ⌈ "
            "rceil ⌉ cdots ⋯ ldots … dots … star ⋆ ast ∗ circ ∘ cdot · sqrt √ { { } } % % _ _ & & # # "
            "| ‖ Vert ‖ vert | lvert | rvert | lVert ‖ rVert ‖ hbar ℏ dagger †")
# relations and binary operators: set off by spaces
_RELATIONS = ("le ≤ leq ≤ ge ≥ geq ≥ ne ≠ neq ≠ approx ≈ sim ∼ simeq ≃ equiv ≡ propto ∝ ll ≪ gg ≫ "
              "to → rightarrow → leftarrow ← Rightarrow ⇒ Leftrightarrow ⇔ iff ⇔ mapsto ↦ implies ⇒ "
              "in ∈ notin ∉ subset ⊂ subseteq ⊆ supset ⊃ cup ∪ cap ∩ times × pm ± mp ∓ oplus ⊕ "
              "otimes ⊗ wedge ∧ land ∧ vee ∨ lor ∨ mid | perp ⊥ setminus ∖ div ÷")
_OPERATORS = set("log ln exp min max sup inf arg argmin argmax det tr lim sin cos tan tanh sinh cosh "
                 "sign softmax var cov Pr KL".split())
_SPACES = {",": " ", ";": " ", ":": " ", " ": " ", "quad": " ", "qquad": " ", "!": "", "enspace": " "}
_DROP = set("left right big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr displaystyle textstyle "
            "scriptstyle limits nolimits".split())
_FONTS = set("mathrm mathit mathbf mathsf mathtt mathnormal text textrm textit textbf texttt textsf "
             "mbox operatorname boldsymbol bm mathcal mathscr mathfrak emph".split())
_ACCENTS = {"hat": "\u0302", "widehat": "\u0302", "bar": "\u0304", "overline": "\u0305", "tilde": "\u0303",
            "widetilde": "\u0303", "dot": "\u0307", "ddot": "\u0308", "vec": "\u20d7"}
_BLACKBOARD = {"E": "𝔼", "R": "ℝ", "N": "ℕ", "Z": "ℤ", "Q": "ℚ", "C": "ℂ", "P": "ℙ", "1": "𝟙"}
_SUP = dict(zip("0123456789+-=()nijkT", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱʲᵏᵀ"))
_SUB = dict(zip("0123456789+-=()aehijklmnoprstuvxβγρφϕχ", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓᵦᵧᵨᵩᵩᵪ"))


def _pairs(spec: str) -> dict[str, str]:
    words = spec.split(" ")
    return dict(zip(words[::2], words[1::2]))


_COMMANDS = {**_pairs(_GREEK), **_pairs(_SYMBOLS), **{k: f" {v} " for k, v in _pairs(_RELATIONS).items()},
             **{k: f" {k} " for k in _OPERATORS}, **_SPACES}
# the book's own macros (``mathjax3_config`` in _config.yml)
_COMMANDS.update(E="𝔼", R="ℝ")
_TOKEN = re.compile(r"\\([A-Za-z]+|.)|(\{)|(\})|([\^_])|(\s+)|(.)", re.S)


class _TexReader:
    """A small recursive reader of inline TeX math (commands, groups, scripts) that writes what a
    reader would see as plain Unicode text; what it does not know it spells out without the
    backslash (``\\foo`` becomes ``foo``)."""

    def __init__(self, tex: str):
        self.tokens = [m for m in _TOKEN.finditer(tex)]
        self.i = 0

    def _next(self):
        token = self.tokens[self.i] if self.i < len(self.tokens) else None
        self.i += 1
        return token

    def group(self, *, keep_spaces: bool = False) -> str:
        """Until the closing brace (or the end)."""
        out = []
        while (token := self._next()) is not None and token.group(3) is None:
            out.append(self.one(token, keep_spaces=keep_spaces))
        return "".join(out)

    def argument(self, *, keep_spaces: bool = False) -> str:
        """The next group or single token, as text."""
        while self.i < len(self.tokens) and self.tokens[self.i].group(5) is not None:
            self.i += 1
        token = self._next()
        if token is None:
            return ""
        if token.group(2) is not None:
            return self.group(keep_spaces=keep_spaces)
        return self.one(token, keep_spaces=keep_spaces)

    def one(self, token, *, keep_spaces: bool = False) -> str:
        command, opening, _, script, space, char = token.groups()
        if opening is not None:
            return self.group(keep_spaces=keep_spaces)
        if space is not None:
            return " " if keep_spaces else ""
        if char is not None:
            return {"~": " ", "'": "′", "=": " = ", "<": " < ", ">": " > "}.get(char, char)
        if script is not None:
            body = " ".join(self.argument().split())
            table = _SUP if script == "^" else _SUB
            if body and all(c in table for c in body.replace(" ", "")):
                return "".join(table[c] for c in body.replace(" ", ""))
            if script == "^" and body in ("*", "∗", "⋆", "′", "⊤"):
                return {"⊤": "ᵀ", "∗": "*"}.get(body, body)  # x^\star: x⋆
            text = script + (body if len(body) == 1 or body.isalnum() else f"({body})")
            following = self.tokens[self.i] if self.i < len(self.tokens) else None
            if len(body) > 1 and following is not None and (following.group(1) or following.group(6) or "").isalnum():
                text += " "  # p_{old}e^x: "p_old e^x", not "p_olde^x"
            return text
        if command is None:
            return ""
        if command in _DROP:
            return ""
        if command in _FONTS:
            return self.argument(keep_spaces=command.startswith(("text", "mbox", "emph")))
        if command == "mathbb":
            body = self.argument()
            return "".join(_BLACKBOARD.get(c, c) for c in body)
        if command in _ACCENTS:
            body = self.argument()
            return body + _ACCENTS[command] if len(body) == 1 else body
        if command in ("frac", "dfrac", "tfrac"):
            num, den = self.argument().strip(), self.argument().strip()
            wrap = lambda s: s if len(s) == 1 or s.isalnum() else f"({s})"  # noqa: E731
            return f"{wrap(num)}/{wrap(den)}"
        if command == "sqrt":
            body = self.argument().strip()
            return "√" + (body if len(body) == 1 or body.isalnum() else f"({body})")
        return _COMMANDS.get(command, command)

    def read(self) -> str:
        out = []
        while (token := self._next()) is not None:
            out.append(self.one(token))
        return "".join(out)


def tex_to_text(tex: str) -> str:
    """Inline TeX math as the plain Unicode text a reader sees: Greek letters and common symbols
    as characters, fonts and sizes dropped, ``^``/``_`` as Unicode super- and subscripts where
    every character has one (``x^2`` is ``x²``, ``p_{old}`` stays ``p_old``), ``\\frac{a}{b}`` as
    ``a/b``. Used for ``<title>``, link texts, cards and alt text, where MathJax does not run."""
    if not isinstance(tex, str):
        raise TypeError(f"tex must be a str, got {type(tex).__name__}")
    text = " ".join(unicodedata.normalize("NFC", _TexReader(tex).read()).split())
    text = re.sub(r"([(\[{⟨]) ", r"\1", text)
    return re.sub(r" ([)\]},;.⟩])", r"\1", text)


# -- plain titles in Sphinx ----------------------------------------------------------------------
def _node_text(node) -> str:
    """A title node as plain text, its math nodes through :func:`tex_to_text`."""
    from docutils import nodes

    if isinstance(node, nodes.math):
        return tex_to_text(node.astext())
    if isinstance(node, nodes.Text):
        return str(node)
    return "".join(_node_text(child) for child in node.children)


def plain_titles(app, doctree) -> None:
    """Sphinx ``doctree-read`` hook, after Sphinx has collected the page's title: the title that
    goes into ``<title>``, the navigation (sidebar, previous/next, breadcrumbs) and the search
    index is plain text; the page's own heading keeps its math for MathJax."""
    from docutils import nodes

    env = app.env
    docname = env.docname
    for store in (env.titles, env.longtitles):
        node = store.get(docname)
        if node is not None and next(iter(node.findall(nodes.math)), None) is not None:
            store[docname] = nodes.title("", _node_text(node))
    toc = env.tocs.get(docname)
    if toc is None:
        return
    for ref in toc.findall(nodes.reference):  # the page's own entry, as the sidebar lists it
        if not ref.get("anchorname") and next(iter(ref.findall(nodes.math)), None) is not None:
            ref.children[:] = [nodes.Text(_node_text(ref))]
        break


def setup(app) -> dict:
    """``icml26.book.pages`` as a Sphinx extension (listed in ``_config.yml``): plain page titles."""
    app.connect("doctree-read", plain_titles, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


@dataclass
class Chapter:
    """A chapter of the book as the table of contents lists it."""

    slug: str
    part: str
    title: str
    notebooks: list[str]  # stems, in book order
    notebook_titles: dict[str, str]
    meta: dict = field(default_factory=dict)


def book_chapters(root: Path) -> list[Chapter]:
    """The chapters of ``_toc.yml`` in book order (the front matter and back matter excluded)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    out = []
    for part in toc.get("parts", []):
        for entry in part.get("chapters", []):
            file = entry.get("file", "")
            m = re.fullmatch(r"chapters/([^/]+)/index", file)
            if not m:
                continue
            slug = m.group(1)
            folder = root / "chapters" / slug
            stems = [Path(s["file"]).name for s in entry.get("sections", []) if "file" in s]
            titles = {s: title_of(folder / f"{s}.md") for s in stems if (folder / f"{s}.md").exists()}
            index = folder / "index.md"
            meta, _ = split_front_matter(index.read_text(encoding="utf-8")) if index.exists() else ({}, "")
            out.append(Chapter(slug, part.get("caption", ""), title_of(index) if index.exists() else slug,
                               stems, titles, dict(meta.get("book") or {})))
    return out


# -- the reproduction ledger ---------------------------------------------------------------------
_KINDS = ("holds", "fails", "not asserted", "not yet run at gpu", "reported", "identity")


def _column(claim: dict) -> str | None:
    """The summary column a claim counts in: identities (checks of the implementation) apart from
    the paper's claims unless they fail; settings are not claims and count nowhere."""
    kind, status = claim.get("kind", "check"), claim["status"]
    if kind == "setting" or status == "setting":
        return None
    if kind == "identity" and status != "fails":
        return "identity"
    return status


def _counts(claims: list[dict]) -> dict[str, int]:
    columns = [_column(c) for c in claims]
    return {k: sum(col == k for col in columns) for k in _KINDS}


def _summary(counts: dict[str, int]) -> str:
    total = sum(counts.values())
    parts = [f"{counts[k]} {k}" for k in _KINDS if counts[k]]
    return f"{total} claim{'s' if total != 1 else ''}: " + ", ".join(parts) if total else "no claims"


def ledger_markdown(root: Path, scale: str, listed: set[Path] | None = None) -> str:
    """The ledger page's body: a summary table, then one collapsible section per chapter (book
    order, chapter titles) with one row per claim linking to its notebook. The front matter is not
    a chapter: its demonstration claims stay on its own page."""
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
    by_notebook: dict[tuple[str, str], list[dict]] = {}
    for file in files:
        payload = json.loads(file.read_text())
        key = (file.parent.parent.name, file.parent.name)
        by_notebook.setdefault(key, []).extend(payload["claims"])
    chapters = book_chapters(root) if (root / "_toc.yml").exists() else []
    order = [(c.slug, c.title, c.notebooks, c.notebook_titles) for c in chapters]
    known = {c.slug for c in chapters}
    for slug in sorted({k[0] for k in by_notebook} - known - {"front"}):
        stems = sorted(s for c, s in by_notebook if c == slug)
        order.append((slug, slug, stems, {}))
    sections = []
    summary_rows = []
    everything: list[dict] = []
    for slug, title, stems, titles in order:
        claims = [{**c, "notebook": s} for s in stems for c in by_notebook.get((slug, s), [])]
        if not claims:
            continue
        everything += claims
        counts = _counts(claims)
        base = f"../chapters/{slug}/"
        links = {s: f"{base}{s}.html" for s in stems}
        names = {s: plain_title(titles.get(s, s)) for s in stems}
        anchor = f"ledger-{slug}"
        label = html.escape(plain_title(title))
        sections.append(
            f'<details class="ledger-chapter" id="{anchor}"><summary><span class="ledger-chapter-title">{label}'
            f'</span> <span class="ledger-chapter-counts">{html.escape(_summary(counts))}</span></summary>'
            + claims_html(claims, links=links, notebook_titles=names) + "</details>")
        cells = [f'<a href="#{anchor}">{label}</a>'] + [str(counts[k]) for k in _KINDS] + [str(sum(counts.values()))]
        summary_rows.append("<tr>" + "".join(f'<td data-label="{h}">{x}</td>' for h, x in
                                             zip(("chapter", *_KINDS, "total"), cells)) + "</tr>")
    total = _counts(everything)
    head = "".join(f"<th>{h}</th>" for h in ("chapter", *_KINDS, "total"))
    foot = ("<tr class=\"ledger-total\">" + '<td data-label="chapter">all chapters</td>'
            + "".join(f'<td data-label="{k}">{total[k]}</td>' for k in _KINDS)
            + f'<td data-label="total">{sum(total.values())}</td></tr>')
    summary = ('<div class="book-claims-wrap"><table class="book-claims ledger-summary"><thead><tr>' + head
               + "</tr></thead><tbody>" + "".join(summary_rows) + foot + "</tbody></table></div>")
    intro = (f"Scale of this build: `{scale}`. {_summary(total)}. "
             "Open a chapter to see its claims; each row links to the notebook that checks it.")
    return "\n".join([intro, "", summary, "", "\n".join(sections), ""])


# -- measured compute ----------------------------------------------------------------------------
TIMINGS = Path("data") / "timings.json"


def _current(root: Path, run: dict, scale: str) -> bool:
    """Whether a runner record still describes the notebook as it is (its content hash matches)."""
    from .sources import Notebook, content_hash

    if not run.get("hash") or "/" not in run.get("name", ""):
        return True
    chapter, stem = run["name"].split("/", 1)
    path = root / ("front" if chapter == "front" else f"chapters/{chapter}") / f"{stem}.md"
    return path.exists() and content_hash(Notebook(root.resolve(), path.resolve()), scale) == run["hash"]


def update_timings(root: Path, scale: str | None = None) -> dict:
    """Merge the runner's summaries (``_build/executed/<scale>/**/*.run.json``; every scale when
    ``scale`` is None) into ``data/timings.json``: ``{notebook: {scale: {seconds, cpu_seconds, peak_mib,
    cores, date}}}`` (``seconds`` is wall-clock and grows with the machine's load; ``cpu_seconds``, user +
    system time of the worker and its kernel, does not, and is what the 5-minute budget is judged on). Only successful runs of the notebook's current content count; a dry run of the gpu
    scale (``ICML26_DRY``, kept in ``gpu-dry``) measures nothing and is not recorded."""
    from ..core.scale import SCALES, dry_run_enabled

    path = root / TIMINGS
    data = json.loads(path.read_text()) if path.exists() else {}
    changed = False
    for name in ([scale] if scale else list(SCALES)):
        if name == "gpu" and dry_run_enabled():
            continue
        changed |= _merge_scale(root, name, data)
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    return data


def _merge_scale(root: Path, scale: str, data: dict) -> bool:
    folder = root / "_build" / "executed" / scale
    changed = False
    for meta in sorted(folder.rglob("*.run.json")) if folder.is_dir() else []:
        run = json.loads(meta.read_text())
        if run.get("error") or "seconds" not in run or not _current(root, run, scale):
            continue
        cpu = run.get("cpu_seconds")
        entry = {"seconds": round(float(run["seconds"]), 1),
                 "cpu_seconds": None if cpu is None or math.isnan(cpu) else round(float(cpu), 1),
                 "peak_mib": None if run.get("peak_mib") is None or math.isnan(run["peak_mib"])
                 else round(float(run["peak_mib"])),
                 "cores": os.cpu_count()}
        old = data.get(run["name"], {}).get(scale, {})
        if {k: old.get(k) for k in entry} != entry:
            entry["date"] = date.today().isoformat()
            data.setdefault(run["name"], {})[scale] = entry
            changed = True
    return changed


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _seconds(entry: dict | None) -> str:
    """Wall-clock time, and the CPU time (what the 5-minute budget is judged on) where recorded."""
    if not entry:
        return "not measured"
    cpu = entry.get("cpu_seconds")
    return _duration(entry["seconds"]) + ("" if cpu is None else f" ({_duration(cpu)} CPU)")


def _mib(entry: dict | None) -> str:
    return "-" if not entry or entry.get("peak_mib") is None else f"{entry['peak_mib']:,} MiB"


def compute_markdown(chapter: Chapter, timings: dict) -> str:
    """The chapter's measured compute: seconds and peak memory per notebook and scale."""
    has_gpu = any(timings.get(f"{chapter.slug}/{s}", {}).get("gpu") for s in chapter.notebooks)
    head = ["notebook", "smoke", "book", "book peak memory"] + (["gpu", "gpu peak memory"] if has_gpu else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for stem in chapter.notebooks:
        t = timings.get(f"{chapter.slug}/{stem}", {})
        row = [f"[{plain_title(chapter.notebook_titles.get(stem, stem))}]({stem}.ipynb)",
               _seconds(t.get("smoke")), _seconds(t.get("book")), _mib(t.get("book"))]
        if has_gpu:
            row += [_seconds(t.get("gpu")), _mib(t.get("gpu"))]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
    cores = sorted({e.get("cores") for t in (timings.get(f"{chapter.slug}/{s}", {}) for s in chapter.notebooks)
                    for e in t.values() if e.get("cores")})
    where = f" on {'/'.join(map(str, cores))} CPU cores" if cores else ""
    note = (f"Measured by the runner when the book was last built{where} (wall-clock time of one "
            "execution, which grows with the machine's load, and in brackets, where recorded, its CPU time, "
            "which does not; peak resident memory of the kernel; from `data/timings.json`)."
            + ("" if has_gpu else " The `gpu` column appears once a `make gpu` run has been recorded."))
    return "\n".join(lines + ["", note, ""])


def chapter_book_seconds(chapter: Chapter, timings: dict) -> float | None:
    values = [timings.get(f"{chapter.slug}/{s}", {}).get("book", {}).get("seconds") for s in chapter.notebooks]
    return None if not values or any(v is None for v in values) else float(sum(values))


def format_minutes(seconds: float | None) -> str:
    if seconds is None:
        return "not measured"
    return f"{max(1, round(seconds / 60))} min" if seconds >= 60 else f"{seconds:.0f} s"


__all__ = ["Chapter", "book_chapters", "chapter_book_seconds", "compute_markdown", "format_minutes",
           "format_number", "ledger_markdown", "update_timings"]


# -- the landing page and the teachers' page -----------------------------------------------------
_EXERCISE = re.compile(r"^(```|:::)\{exercise\}", re.M)
CARDS_MARKER = "<!-- chapter-cards -->"
TEACHERS_MARKER = "<!-- teachers-table -->"
WEEKS_MARKER = "<!-- week-plan -->"


def chapter_facts(root: Path, chapter: Chapter, timings: dict) -> dict:
    """What the cards and the teachers' table say about a chapter: exercises, reading time
    (words at 180 a minute, code included, unless the metadata gives ``reading_minutes``),
    book-scale run time (measured), the first notebook."""
    folder = root / "chapters" / chapter.slug
    texts = [(folder / f"{s}.md").read_text(encoding="utf-8") for s in chapter.notebooks
             if (folder / f"{s}.md").exists()]
    index = folder / "index.md"
    words = sum(len(t.split()) for t in texts) + (len(index.read_text().split()) if index.exists() else 0)
    minutes = chapter.meta.get("reading_minutes") or max(5, 5 * round(words / 180 / 5))
    return {"exercises": sum(len(_EXERCISE.findall(t)) for t in texts), "reading_minutes": int(minutes),
            "book_seconds": chapter_book_seconds(chapter, timings),
            "first": chapter.notebooks[0] if chapter.notebooks else None}


def _card(chapter: Chapter, facts: dict, teaser: tuple[str, str] | None) -> list[str]:
    question = plain_title(str(chapter.meta.get("question") or "").strip())  # cards are plain text
    lines = [f":::{{grid-item-card}} {plain_title(chapter.title)}", ":class-card: chapter-card"]
    if teaser:
        lines += [f":img-top: {teaser[0]}", f":img-alt: {' '.join(teaser[1].split())}"]
    lines += ["", question or "", ""]
    links = [f"[read the chapter](chapters/{chapter.slug}/index.md)"]
    if facts["first"]:
        links.append(f"[start here](chapters/{chapter.slug}/{facts['first']}.ipynb)")
    lines.append(f"<small>reading: about {facts['reading_minutes']} min · run at book scale: "
                 f"{format_minutes(facts['book_seconds'])}</small>")
    lines += ["", " · ".join(links)]
    return lines + [":::", ""]


def landing_markdown(root: Path, timings: dict, teasers: dict[str, tuple[str, str]]) -> str:
    """A card per chapter grouped by part (book order), then the planned chapters, collapsed."""
    chapters = book_chapters(root)
    out: list[str] = []
    for part in dict.fromkeys(c.part for c in chapters):
        out += [f"### {part}", "", "::::{grid} 1 1 2 2", ":gutter: 3", ""]
        for chapter in (c for c in chapters if c.part == part):
            out += _card(chapter, chapter_facts(root, chapter, timings), teasers.get(chapter.slug))
        out += ["::::", ""]
    planned_file = root / "front" / "planned.yml"
    written = {c.slug for c in chapters}
    planned = [p for p in (yaml.safe_load(planned_file.read_text()) or [])] if planned_file.exists() else []
    planned = [p for p in planned if p.get("slug") not in written]
    if planned:
        out += [f":::{{dropdown}} Chapters not yet written ({len(planned)})", ""]
        out += [f"- {p['paper']} ({p['part']})" for p in planned]
        out += ["", ":::", ""]
    return "\n".join(out)


def teachers_markdown(root: Path, timings: dict) -> str:
    """One row per chapter: part, prerequisites, notebooks, exercises, run time and reading time."""
    head = ["chapter", "prerequisites", "notebooks", "exercises", "run (book)", "reading"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for chapter in book_chapters(root):
        facts = chapter_facts(root, chapter, timings)
        row = [f"[{plain_title(chapter.title)}](../chapters/{chapter.slug}/index.md)",
               str(chapter.meta.get("prerequisites") or "-"), str(len(chapter.notebooks)),
               str(facts["exercises"]), format_minutes(facts["book_seconds"]),
               f"{facts['reading_minutes']} min"]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
    return "\n".join(lines)


def week_plan_markdown(root: Path) -> str:
    """A week per chapter that exists, in book order, between an opening and a project week."""
    chapters = book_chapters(root)
    lines = ["| week | topic |", "|---|---|",
             "| 1 | [How this book works](how-this-book-works.ipynb): scales, seeds, measurement, claims |"]
    for week, chapter in enumerate(chapters, start=2):
        lines.append(f"| {week} | [{plain_title(chapter.title)}](../chapters/{chapter.slug}/index.md) "
                     f"({chapter.part}) |")
    lines.append(f"| {len(chapters) + 2} | Student projects: take a chapter to `gpu` scale, or change one "
                 "assumption and re-check the claims |")
    return "\n".join(lines)
