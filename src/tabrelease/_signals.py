"""Holding SIGINT and SIGTERM over the few steps that must not be cut: an import of a compiled module (an
exception raised inside one can abort the interpreter, and an abort may write a core file holding the
confidential table), the ledger's charge (charged, or not: never charged without the caller knowing), and the
writing of a bundle."""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

HELD = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def deferred_signals(*, act: bool = True):
    """Within the block, SIGINT and SIGTERM are noted, not acted on; at its end the first one noted is acted on as
    it would have been (its handler is called, or the default action taken). Outside the main thread (where
    handlers cannot be set) the block runs as it is.

    Parameters
    ----------
    act : bool, default True
        False drops the signals noted instead: for a block whose caller is already ending the command and must say
        how (a charged release's failure: a second signal had ended it before it said it was charged).

    Yields
    ------
    None
        A context manager: use as ``with deferred_signals():``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum, frame):
        received.append(signum)

    previous = {signum: signal.signal(signum, hold) for signum in HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if received and act:
            _act_on(received[0], previous[received[0]])


def _act_on(signum: int, handler) -> None:
    if callable(handler):
        handler(signum, None)  # Python's SIGINT handler raises KeyboardInterrupt; the command's SIGTERM, SystemExit
    elif handler == signal.SIG_DFL:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        os.kill(os.getpid(), signum)


def no_core_files() -> None:
    """A crash must not leave the confidential table on disk in a core file: the command sets the core size to 0."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):  # not on this platform, or not allowed: nothing to lower
        pass
