"""Holding SIGINT, SIGTERM and SIGHUP over the few steps that must not be cut: an import of a compiled module (an
exception raised inside one can abort the interpreter, and an abort may write a core file holding the
confidential table), the ledger's charge (charged, or not: never charged without the caller knowing), and the
writing of a bundle."""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

# SIGHUP (a dropped SSH session, a closed terminal) ends the command as SIGTERM does: it had killed a release
# outright, leaving a staging folder with its audit on disk and a charge not recorded as failed (a reviewer's trial).
HANGUP = (signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()
HELD = (signal.SIGINT, signal.SIGTERM) + HANGUP
# Which of several signals one hold received is acted on: a termination before a hang-up before an interrupt.
STRENGTH = {signal.SIGTERM: 0, **{s: 1 for s in HANGUP}, signal.SIGINT: 2}
# The signals the command's own handlers have received (`command_signals`). The exception a handler raises
# can be lost inside compiled code: a SIGINT while pyarrow imported pandas for it (reading a file) was swallowed
# there, and the release ran on, was charged and exited 0 (a new user's trial). So a release looks here before its
# charge (`raise_if_signalled`), whatever became of the exception.
_RECEIVED: list[int] = []
# Set by `block_signals_at_exit`: the command's handlers are not put back at its end (they would replace SIG_IGN).
_IGNORED_TO_THE_END = False


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

    global _IGNORED_TO_THE_END
    _IGNORED_TO_THE_END = False
    _RECEIVED.clear()
    # A signal the caller ignores stays ignored (nohup's SIGHUP; a background job's SIGINT in a non-interactive
    # shell: a review's trial, `kill -INT` had ended such a job).
    previous = {signum: signal.signal(signum, interrupt if signum == signal.SIGINT else end)
                for signum in _heeded(HELD)}
    try:
        yield
    finally:
        if not _IGNORED_TO_THE_END:  # `block_signals_at_exit` said the process is done with signals
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


def _heeded(signals) -> tuple:
    """Those of `signals` that are not ignored: a signal the process was started ignoring (SIGHUP under nohup,
    SIGINT in a background job of a non-interactive shell) stays ignored (a review's trial: under nohup a dropped
    session had abandoned a charged release)."""
    return tuple(s for s in signals if signal.getsignal(s) is not signal.SIG_IGN)


@contextmanager
def deferred_signals(*, act: bool = True, noted: list | None = None):
    """Within the block, SIGINT, SIGTERM and SIGHUP (those not ignored) are noted, not acted on; at its end the
    strongest noted (`STRENGTH`) is acted on as it would have been (its handler is called, or the default action
    taken). Outside the main thread (where handlers cannot be set) the block runs as it is.

    Parameters
    ----------
    act : bool, default True
        False drops the signals noted instead: for a block whose caller is already ending the command and must say
        how (a charged release's failure: a second signal had ended it before it said it was charged).
    noted : list or None
        Where given, the signals noted are appended to it, for a caller that acts on them itself (with act=False).

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

    previous = {signum: signal.signal(signum, hold) for signum in _heeded(HELD)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if noted is not None:
            noted.extend(received)
        if received and act:
            # The strongest held, not the first: a SIGTERM after a SIGINT in one hold had been dropped (a review's
            # trial: exit 0).
            strongest = min(received, key=STRENGTH.__getitem__)  # the first of the strongest (min keeps order)
            _act_on(strongest, previous[strongest])


# A second signal this soon after the first held is the same one, delivered twice: GNU timeout sends its signal to
# the command and then to the command's process group, and batch schedulers signal every process of a job, so one
# `timeout -s INT` had abandoned a charged release (an adversarial review). A person's second Ctrl-C comes later.
ONE_SIGNAL_SECONDS = 1.0


class HeldInterrupts:
    """What `finishing_after_charge` held: the signals noted (`received`), when the first was (`first_at`, the
    monotonic clock), and whether the release is in place (`committed`: after it, a further signal is noted, never
    acted on, since there is nothing left to abandon)."""

    def __init__(self, received=()):
        self.received = list(received)
        self.committed = False
        # From the block's start: a signal held during the charge counts as the first, and its second delivery
        # within the window is the same signal.
        self.first_at = time.monotonic()

    def __bool__(self) -> bool:
        return bool(self.received)


@contextmanager
def finishing_after_charge(say, already=()):
    """Within the block (a charged release being made), the first SIGINT (or SIGHUP, where it is heeded) is held,
    not acted on: `say()` is called to tell the user so, and the release goes on to its end; a second one, more than
    `ONE_SIGNAL_SECONDS` after the first (sooner, it is the same signal delivered twice), abandons it
    (KeyboardInterrupt, or SystemExit(128 + signum) for a hang-up: the charge stands, and the caller records the
    failure), unless the release is in place by then (`HeldInterrupts.committed`). SIGTERM is left as it is.
    Outside the main thread the block runs as it is.

    Why: an interrupt after the charge had lost the budget spent and the release with it, and that window is most of
    a release's run (the noise, the fit, the rounding, the audit and the writing; a new user's trial: seven Ctrl-Cs,
    seven epsilon charged, nothing published).

    Parameters
    ----------
    say : callable
        Called with no arguments when the first signal is held (whatever it raises is ignored: a terminal gone with
        the pipe it wrote to must not abandon the release).
    already : sequence of int
        Signals noted while the charge was made (`deferred_signals(noted=...)`): held as the first.

    Yields
    ------
    HeldInterrupts
    """
    state = HeldInterrupts(s for s in already if s in _heeded((signal.SIGINT,) + HANGUP))
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def tell() -> None:
        try:
            say()
        except Exception:  # BrokenPipeError where the pipe's reader went with the Ctrl-C; a reentrant write
            pass

    def hold(signum, frame):
        if state.received and not state.committed and time.monotonic() - state.first_at > ONE_SIGNAL_SECONDS:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)
        state.received.append(signum)
        if len(state.received) == 1:
            state.first_at = time.monotonic()
            tell()

    if state.received:
        tell()
    watched = _heeded((signal.SIGINT,) + HANGUP)
    previous = {signum: signal.signal(signum, hold) for signum in watched}
    try:
        yield state
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def block_signals_at_exit() -> None:
    """Ignore SIGINT, SIGTERM and SIGHUP for the rest of the process: the command has done its work and decided its
    exit status, which a signal arriving while the interpreter shuts down would replace by a death by signal (a
    completed, charged release exited 130 with no word; a new user's trial). Ignored, not blocked: a mask is the
    calling thread's, and the kernel gives a signal to any other thread (BLAS's) that has it unblocked (a review's
    trial: 143 with two OpenMP threads). Only SIGKILL ends the process after this."""
    global _IGNORED_TO_THE_END
    if threading.current_thread() is threading.main_thread():
        for signum in HELD:
            signal.signal(signum, signal.SIG_IGN)
        _IGNORED_TO_THE_END = True


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
