"""The `tabrelease` command: sub-commands that assemble calls to the public API.

Every sub-command module exposes `register(subparsers)`; `main` turns the tool's own errors into one line on stderr
and the exit status of their type (`errors`: 2 bad input, 3 internal, 4 failed after the charge, 5 budget refused,
6 ledger integrity), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from ..errors import TabreleaseError
from . import batch, fit, frontier, ledger, plan, release, reproduce, sweep, table8, tables, test

SUBCOMMANDS = (tables, fit, plan, release, batch, ledger, sweep, reproduce, frontier, table8, test)


class _Parser(argparse.ArgumentParser):
    """argparse with the tool's one-line error format (usage stays available through --help), and no abbreviated
    options: `--margin` had been taken for `--margins` in silence, and an abbreviation that a later option makes
    ambiguous would change what an old script asks for (a new user's trial)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"tabrelease: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None):
        # Arguments no parser took are found by the top one, which had pointed to 'tabrelease --help' (a new user's
        # trial: `plan ... --mechanism auto`); the command's own help lists what it takes.
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(self, "commands", {}).get(getattr(parsed, "command", None), self)
            command.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tabrelease",
        description="Differentially private release of contingency-table margins, and what it costs.",
    )
    parser.add_argument("--version", action="version", version=f"tabrelease {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    for module in SUBCOMMANDS:
        module.register(subparsers)
    parser.commands = dict(subparsers.choices)
    return parser


# Every matrix the tool factors is small (a few hundred rows) and sweeps run one worker per CPU, so
# BLAS threads only contend. The command sets one thread before numpy loads, which is free, where a
# threadpoolctl controller built later costs about 0.1 s of a 0.5 s release.
SINGLE_THREAD_BLAS = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _terminate(signum, frame):
    # SIGTERM (a scheduler's kill, a timeout) unwinds like an interrupt, so that a half-written release's staging
    # folder is removed on the way out. (SIGKILL cannot be caught: the next run removes what it left.)
    raise SystemExit(128 + signum)


def entry() -> int:
    """The console script: one BLAS thread (unless the user chose otherwise), then `main`."""
    if "numpy" not in sys.modules and not any(var in os.environ for var in SINGLE_THREAD_BLAS):
        os.environ.update(SINGLE_THREAD_BLAS)
        os.environ["TABRELEASE_SINGLE_THREAD_BLAS"] = "1"  # read by loglinear.one_blas_thread
    return main(console=True)


def main(argv: list[str] | None = None, *, console: bool = False) -> int:
    """Run one command (`argv`, default the process's arguments) and return its exit status; the tool's own errors,
    an interrupt and a bug each end it as one line on standard error. `console` (the console script): once the
    status is decided, SIGINT, SIGTERM and SIGHUP are ignored for the rest of the process (`block_signals_at_exit`)."""
    from .._signals import block_signals_at_exit, command_signals, no_core_files

    no_core_files()
    with command_signals(_terminate):
        status = _run(argv)
        if console:
            try:
                block_signals_at_exit()
            except (KeyboardInterrupt, SystemExit):  # one pending as the last line was printed: the status stands
                block_signals_at_exit()
        return status


def _run(argv: list[str] | None) -> int:
    try:
        parser = build_parser()  # a fiftieth of a second: an interrupt here is one line too (a reviewer's trial)
    except KeyboardInterrupt:
        print("tabrelease: interrupted", file=sys.stderr)
        return 130
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return int(exc.code or 0)
    try:
        return int(args.run(args) or 0)
    except TabreleaseError as exc:
        print(f"tabrelease: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:
        # Output piped into `head` and the like: stop quietly, as Unix tools do. (`os` is the module's: imported
        # here, it would be local to main, unbound in the internal-error branch below.)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        print(f"tabrelease: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tabrelease: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line naming its kind (never its text, which could hold a count)
        if os.environ.get("TABRELEASE_DEBUG"):
            raise
        from ..errors import InternalError

        print(f"tabrelease: internal error ({type(exc).__name__}): please report it; TABRELEASE_DEBUG=1 shows the "
              "traceback", file=sys.stderr)
        return InternalError.exit_status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
