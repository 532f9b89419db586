"""Holding SIGINT and SIGTERM over the few steps that must not be cut: an import of a compiled module (an
exception raised inside one can abort the interpreter, and an abort may write a core file holding the
confidential table), the ledger's charge (charged, or not: never charged without the caller knowing), and the
writing of a bundle."""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager

# SIGHUP (a dropped SSH session, a closed terminal) ends the command as SIGTERM does: it had killed a release
# outright, leaving a staging folder with its audit on disk and a charge not recorded as failed (a reviewer's trial).
HANGUP = (signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()
HELD = (signal.SIGINT, signal.SIGTERM) + HANGUP
# The signals the command's own handlers have received (`command_signals`). The exception a handler raises
# can be lost inside compiled code: a SIGINT while pyarrow imported pandas for it (reading a file) was swallowed
# there, and the release ran on, was charged and exited 0 (a new user's trial). So a release looks here before its
# charge (`raise_if_signalled`), whatever became of the exception.
_RECEIVED: list[int] = []


@contextmanager
def command_signals(terminate):
    """Within the block (a command's run), the command's handlers, in the main thread: SIGINT raises
    KeyboardInterrupt (as Python's own does) and SIGTERM and SIGHUP call `terminate`; each notes its signal first
    (`raise_if_signalled`). At its end the previous handlers are back and nothing noted is kept.

    Parameters
    ----------
    terminate : callable
        The command's SIGTERM handler, ``terminate(signum, frame)`` (it raises SystemExit).

    Yields
    ------
    None
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        _RECEIVED.append(signum)
        raise KeyboardInterrupt

    def end(signum, frame):
        _RECEIVED.append(signum)
        terminate(signum, frame)

    _RECEIVED.clear()
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, interrupt),
                **{signum: signal.signal(signum, end) for signum in (signal.SIGTERM,) + HANGUP}}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _RECEIVED.clear()


def raise_if_signalled() -> None:
    """Raise for a signal the command's handlers received whose exception did not end the command (it was lost in
    compiled code): KeyboardInterrupt for SIGINT, SystemExit(128 + signum) for SIGTERM; nothing if none was.

    Raises
    ------
    KeyboardInterrupt, SystemExit
        A signal was received.
    """
    if _RECEIVED:
        signum = _RECEIVED[0]
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)


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


@contextmanager
def finishing_after_charge(say):
    """Within the block (a charged release being made), the first SIGINT is held, not acted on: `say()` is called
    to tell the user so, and the release goes on to its end; a second SIGINT raises KeyboardInterrupt (the user
    abandons it: the charge stands, and the caller records the failure). SIGTERM is left as it is. Outside the main
    thread the block runs as it is.

    Why: an interrupt after the charge had lost the budget spent and the release with it, and that window is most of
    a release's run (the noise, the fit, the rounding, the audit and the writing; a new user's trial: seven Ctrl-Cs,
    seven epsilon charged, nothing published).

    Parameters
    ----------
    say : callable
        Called with no arguments when the first SIGINT is held.

    Yields
    ------
    list
        Empty unless a SIGINT was held (then it holds SIGINT's number): the caller says so once the release is made.
    """
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum, frame):
        if held:
            raise KeyboardInterrupt
        held.append(signum)
        try:
            say()
        except RuntimeError:  # a write to stderr interrupted by this very handler: the release goes on unsaid
            pass

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)


def block_signals_at_exit() -> None:
    """Block SIGINT and SIGTERM for the rest of the process: the command has done its work and decided its exit
    status, which a signal arriving while the interpreter shuts down would replace by a death by signal (a completed,
    charged release exited 130 with no word; a new user's trial)."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, set(HELD))


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
