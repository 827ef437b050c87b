"""The ``lsnpc`` command line (Typer + Rich); also ``python -m lsnpc``.

Heavy modules (torch, pandas, matplotlib) are imported inside the commands, so ``lsnpc --help``
stays fast. Every command follows the same conventions, for people and for scripts:

- results go to stdout: a table or a line, or with ``--json`` one JSON document; one-line messages
  are never wrapped, whatever the width (pipes, logs);
- progress bars (epochs and time left) go to stderr, and only when stderr is a terminal;
- a user mistake (a missing file, a wrong shape, a bad parameter or config) ends with one line
  ``error: ...`` on stderr that names the command-line flag, and exit status 1 — never a traceback;
- a warning from the library is one line ``warning: ...`` on stderr, in the same words (flags named);
- files the user owns are never replaced without ``--force``.
"""

from __future__ import annotations

# Each module registers its commands on app; this order is the order of `lsnpc --help`.
from . import correcting, plotting, labels, data, experiments  # noqa: F401  (isort: skip)
from ._app import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``lsnpc`` console script and of ``python -m lsnpc``."""
    app(prog_name="lsnpc")
