"""ICML 2026 in Code: the package behind the executable book.

One subpackage per paper (``icml26.bandpo``, ``icml26.cgmt``, ...) and a small shared core
(:mod:`icml26.core`): device choice, seeding, scale presets, meters, the claims ledger,
the book's plot style and the glue helper that puts computed numbers into the prose.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
