"""Tables as the book shows them: the claims table of a notebook and of the ledger page, number
formatting, and one style for every pandas table (``-`` for a missing value).

The HTML uses the classes ``book-claims`` and ``claim-status status-<kind>``, styled by the book's
``_static/book.css`` (padding, badges, and rows as cards on a phone).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping

STATUS_LABELS = {"holds": "holds", "fails": "fails", "not asserted": "not asserted", "reported": "reported",
                 "not yet run at gpu": "not yet run at gpu", "setting": "setting"}
MISSING = "-"


def format_number(value, digits: int = 3, *, markup: bool = False) -> str:
    """A number as a reader wants it: ``digits`` significant digits, no ``e-05``.

    Integers stay integers (``17``), moderate values get fixed decimals (``0.0123``, ``2.78``,
    ``1234``), very small or very large ones a power of ten (``2.78×10^-5``, or
    ``2.78×10<sup>−5</sup>`` with ``markup=True``). Strings pass through; NaN and None give ``-``.
    """
    if value is None:
        return MISSING
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"value must be a number or a string, got {type(value).__name__}") from None
    if not isinstance(digits, int) or digits < 1:
        raise ValueError(f"digits must be a positive integer, got {digits!r}")
    if math.isnan(x):
        return MISSING
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e7:
        return f"{int(x)}"
    exponent = math.floor(math.log10(abs(x)))
    if -3 <= exponent < 6:
        decimals = max(0, digits - 1 - exponent)
        return f"{x:.{decimals}f}"
    mantissa = x / 10**exponent
    if round(abs(mantissa), digits - 1) >= 10:
        mantissa /= 10
        exponent += 1
    head = f"{mantissa:.{digits - 1}f}"
    if markup:
        return f"{head}×10<sup>{'−' if exponent < 0 else ''}{abs(exponent)}</sup>"
    return f"{head}×10^{exponent}"


def _cell_text(value, digits: int) -> str:
    """Escaped HTML for one value (numbers formatted with a power of ten in markup)."""
    if isinstance(value, str):
        return html.escape(value)
    return format_number(value, digits, markup=True)


def _bar(bar: str, unit: str) -> str:
    if not bar or bar == "-":
        return MISSING
    return f"{bar} {unit}" if unit and bar != "true" else bar


def protocol_html(protocol: Mapping) -> str:
    """A comparison claim's protocol as a small nested list: seeds, then per method its interval,
    chosen configuration (grid size, edges) and cost."""
    from .compare import protocol_lines

    lines = protocol_lines("", protocol)
    head, rows = lines[0].split(": ", 1)[1], lines[1:]
    rows += [f"protocol fault: {p}" for p in protocol.get("problems") or []]
    items = "".join(f"<li>{html.escape(r.strip())}</li>" for r in rows)
    return f'<details class="claim-protocol"><summary>{html.escape(head)}</summary><ul>{items}</ul></details>'


def status_badge(status: str) -> str:
    kind = status.replace(" ", "-")
    label = STATUS_LABELS.get(status, status)
    return f'<span class="claim-status status-{html.escape(kind)}">{html.escape(label)}</span>'


def claims_html(claims: Iterable, *, digits: int = 3, links: Mapping[str, str] | None = None,
                notebook_titles: Mapping[str, str] | None = None, caption: str = "",
                published: Mapping[str, Mapping] | None = None) -> str:
    """An HTML table of claims (objects or dicts with name, paper, measured, bar, status and
    optionally unit, note, volatile, notebook); no row index. With ``links`` (notebook -> URL)
    a first column links each row to its notebook. With ``published`` (claim name -> the book's
    published claim, :meth:`icml26.core.ledger.Ledger.published`) a column "book's value" stands
    beside the reader's."""
    def get(c, key, default=""):
        return c.get(key, default) if isinstance(c, Mapping) else getattr(c, key, default)

    with_nb = links is not None
    head = (["notebook"] if with_nb else []) + ["claim", "paper", "this book"] + (
        ["book's value"] if published else []) + ["bar", "status"]
    rows = []
    for c in claims:
        unit = get(c, "unit") or ""
        measured = _cell_text(get(c, "measured"), digits)
        if unit and measured != MISSING:
            measured += f" {html.escape(unit)}"
        note = get(c, "note") or ""
        name = html.escape(get(c, "name"))
        if note:
            name += f'<br><span class="claim-note">{html.escape(note)}</span>'
        protocol = get(c, "protocol", None)
        if protocol:
            name += protocol_html(protocol)
        cells = []
        if with_nb:
            nb = get(c, "notebook")
            title = (notebook_titles or {}).get(nb, nb)
            url = links.get(nb)
            text = html.escape(title)
            cells.append(f'<a href="{html.escape(url)}">{text}</a>' if url else text)
        cells += [name, html.escape(get(c, "paper") or MISSING),
                  measured if isinstance(get(c, "measured"), str) else f'<span class="claim-value">{measured}</span>']
        if published:
            book = published.get(get(c, "name")) or {}
            value = _cell_text(book.get("measured"), digits)
            if book.get("unit") and value != MISSING:
                value += f" {html.escape(book['unit'])}"
            cells.append(f'<span class="claim-published">{value}</span>')
        cells += [f'<span class="claim-bar">{html.escape(_bar(get(c, "bar"), unit))}</span>',
                  status_badge(get(c, "status"))]
        rows.append("<tr>" + "".join(f'<td data-label="{h}">{x}</td>' for h, x in zip(head, cells)) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return ('<div class="book-claims-wrap"><table class="book-claims">' + cap + "<thead><tr>"
            + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></div>")


class ClaimsTable:
    """What :meth:`Ledger.table` returns: renders as the book's claims table in HTML; ``.frame``
    (or any DataFrame attribute, such as ``.columns``) gives the rows as a ``pandas.DataFrame``."""

    def __init__(self, ledger):
        self._ledger = ledger

    @property
    def frame(self):
        import pandas as pd

        rows = self._ledger.rows(published=self._ledger.published())
        return pd.DataFrame(rows, columns=list(rows[0]) if rows else ["claim", "paper", "this book", "bar", "status"])

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.frame, name)

    def __len__(self) -> int:
        return len(self._ledger.claims)

    def _repr_html_(self) -> str:
        return claims_html(self._ledger.claims, digits=self._ledger.digits, published=self._ledger.published())

    def __repr__(self) -> str:
        return self._ledger.to_text()


def style_table(frame, digits: int = 3):
    """The book's style for a ``pandas`` table: no index, numbers formatted by
    :func:`format_number`, ``-`` for missing values; returns a ``Styler``."""
    styler = frame.style.hide(axis="index")
    styler = styler.format(lambda v: format_number(v, digits) if not isinstance(v, str) else v, na_rep=MISSING)
    return styler.set_table_attributes('class="dataframe book-table"')


def set_pandas_defaults() -> None:
    """Options so that every Styler of the book shows ``-`` for missing values."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        return
    pd.set_option("styler.format.na_rep", MISSING)
    pd.set_option("styler.format.precision", 3)
