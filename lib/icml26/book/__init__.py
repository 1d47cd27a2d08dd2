"""The book's runner: execute notebooks with papermill, check them with nbval, render with Jupyter Book.

Command line (``python -m icml26.book --help``)::

    python -m icml26.book run   --scale smoke --jobs 2          # execute (cached by content hash)
    python -m icml26.book nbval --scale smoke --jobs 2          # re-run, compare checked outputs
    python -m icml26.book build --scale smoke                   # render HTML, warnings are errors
    python -m icml26.book all   --scale book  --jobs 2          # run + build
    python -m icml26.book check                                 # static checks of the sources
"""

from .checks import check_notebook, nbval
from .execute import Result, run, summary_table
from .site import build, ledger_markdown, stage
from .sources import BookError, Notebook, discover, find_root, select

__all__ = [
    "BookError",
    "Notebook",
    "Result",
    "build",
    "check_notebook",
    "discover",
    "find_root",
    "ledger_markdown",
    "nbval",
    "run",
    "select",
    "stage",
    "summary_table",
]
