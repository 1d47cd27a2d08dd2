"""Put computed numbers into the prose: no number in the text is typed by hand."""

from __future__ import annotations

from typing import Any


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
        from myst_nb import glue

        glue(key, value, display=display)
    return value
