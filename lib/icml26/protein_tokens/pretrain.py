"""Regenerate the shipped checkpoints: ``python -m icml26.protein_tokens.pretrain [--steps N] [--no-save]``.

Trains APT-mini and Kanzi-mini with :data:`icml26.protein_tokens.checkpoints.RECIPE` on one CPU thread and
writes ``data/protein-tokens/{apt_mini,kanzi_mini}.pt`` and ``provenance.json`` (see
:func:`icml26.protein_tokens.checkpoints.main`).
"""

from .checkpoints import main

if __name__ == "__main__":
    main()
