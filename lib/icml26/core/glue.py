"""Put computed numbers into the prose: no number in the text is typed by hand."""

from __future__ import annotations

from typing import Any

# The mime-type prefix myst-nb's ``glue`` gives a value glued without display
# (``myst_nb.ext.glue.GLUE_PREFIX``); the book's build reads glued values back by it.
GLUE_PREFIX = "application/papermill.record/"


def report(key: str, value: Any, *, display: bool = False) -> Any:
    """Glue ``value`` under ``key`` for MyST (``{glue:text}`key:.3f```) and return it.

    Outside a Jupyter kernel (plain Python, tests) it only returns the value. Figures can be
    glued too and shown with ``{glue:figure}`` on the same page.
    """
    if not isinstance(key, str) or not key.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"key must be a non-empty string of letters, digits, '_' and '-', got {key!r}")
    size = getattr(value, "numel", None) or getattr(value, "size", None)
    size = size() if callable(size) else size
    if hasattr(value, "item") and callable(value.item) and size == 1:
        value = value.item()  # a one-element tensor or array glues as a plain number
    try:
        from IPython import get_ipython

        in_kernel = get_ipython() is not None and hasattr(get_ipython(), "kernel")
    except ImportError:  # pragma: no cover - IPython ships with the book extra
        in_kernel = False
    if in_kernel:
        glue_output(key, value, display=display)
    return value


def glue_output(key: str, value: Any, *, display: bool = False) -> None:
    """Emit the output myst-nb's ``glue(key, value, display)`` emits, without importing myst-nb.

    The output is the value's display bundle, its mime types prefixed with :data:`GLUE_PREFIX`
    unless it is displayed, and ``{"scrapbook": {"name": key, "mime_prefix": prefix}}`` in its
    metadata (``tests/test_core.py`` compares the two). Importing ``myst_nb.ext.glue`` imports
    nbformat and its JSON-schema validator, 2.4 s of every kernel's start; IPython is loaded already.
    """
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    bundle, metadata = format_display_data(value)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = dict(name=key, mime_prefix=prefix)
    ipy_display({prefix + mime: data for mime, data in bundle.items()}, raw=True, metadata=metadata)
