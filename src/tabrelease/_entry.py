"""The console script's first step, kept apart from `cli` so that an interrupt while the command's modules are
imported (the first tenth of a second or so) ends it as one line, as an interrupt later does: the import of `cli`
itself is inside the handler here (a reviewer's trial saw a full traceback for a SIGINT in those first moments)."""

from __future__ import annotations

import sys


def entry() -> int:
    """Import the command line and run it (`cli.entry`); an interrupt during the import is said in one line.

    Returns
    -------
    int
        The exit status: 130 where interrupted before the command started.
    """
    try:
        from .cli import entry as run
    except KeyboardInterrupt:
        print("tabrelease: interrupted", file=sys.stderr)
        return 130
    return run()
