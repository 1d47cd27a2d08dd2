"""A Sphinx extension: number figures, tables, equations' neighbours (theorems, exercises, any
enumerable node) per chapter instead of across the whole book.

Sphinx numbers enumerable nodes continuously over the book unless the table of contents is
numbered, and Jupyter Book 1.x restarts a numbered table of contents at every part. This
extension runs after Sphinx has assigned its numbers and renumbers each chapter (the documents
under ``chapters/<slug>/``, in book order) from 1; front and back matter are numbered each on
their own. The staged ``_config.yml`` loads it (``icml26.book.numbering``).
"""

from __future__ import annotations


def _group(docname: str) -> str:
    parts = docname.split("/")
    return "/".join(parts[:2]) if parts[0] == "chapters" and len(parts) > 2 else docname


def renumber(fignumbers: dict, order: list[str]) -> dict:
    """``fignumbers[doc][figtype][id] = (n,)`` renumbered per chapter, documents in ``order``."""
    rank = {doc: i for i, doc in enumerate(order)}
    docs = sorted(fignumbers, key=lambda d: (rank.get(d, len(rank)), d))
    counters: dict[tuple[str, str], int] = {}
    for doc in docs:
        group = _group(doc)
        for figtype, ids in fignumbers[doc].items():
            for node_id, _ in sorted(ids.items(), key=lambda kv: kv[1]):
                key = (group, figtype)
                counters[key] = counters.get(key, 0) + 1
                ids[node_id] = (counters[key],)
    return fignumbers


def _book_order(env) -> list[str]:
    order: list[str] = []

    def walk(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(env.config.root_doc)
    return order


def _on_env_get_updated(app, env):
    numbers = getattr(env, "toc_fignumbers", None)
    if not numbers:
        return []
    before = {doc: {t: dict(ids) for t, ids in types.items()} for doc, types in numbers.items()}
    renumber(numbers, _book_order(env))
    return [doc for doc, types in numbers.items() if before.get(doc) != types]  # to be written again


def setup(app):
    # after Sphinx's TocTreeCollector (priority 500) has assigned the book-wide numbers
    app.connect("env-get-updated", _on_env_get_updated, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
