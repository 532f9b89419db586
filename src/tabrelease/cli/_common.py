"""Argument helpers shared by the sub-commands."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from .._numbers import decimal_number


def add_table_arguments(parser) -> None:
    """The table and how to read it (`spec.INPUT_SETTINGS`, the one list of them)."""
    from ..spec import INPUT_SETTINGS

    parser.add_argument("table", metavar="TABLE", help="a built-in table name, or a CSV or Parquet file: long format "
                        "(a count column) or, with --microdata, one row per person")
    _add_settings(parser, INPUT_SETTINGS)


def add_table_arguments_for_many(parser) -> None:
    """How the tables named by a command taking several are read (`spec.INPUT_SETTINGS`), but --scheduler: a sweep
    has its own, the cluster it runs on, which also counts microdata given --engine dask."""
    from ..spec import INPUT_SETTINGS

    _add_settings(parser, [s for s in INPUT_SETTINGS if s.name != "scheduler"])


def load_many_from_args(args) -> list:
    """The tables a command taking several names (`args.tables`), each read as the input settings say."""
    from ..errors import TabreleaseError
    from ..spec import INPUT_SETTINGS, source_from_settings
    from ..workflow import read_source

    settings = {s.name: getattr(args, s.name, None) for s in INPUT_SETTINGS}
    if settings.get("engine") not in ("dask", "spark"):
        settings["scheduler"] = None
    tables = []
    for name in args.tables:
        try:
            tables.append(read_source(source_from_settings(name, settings)))
        except TabreleaseError as exc:
            if len(args.tables) < 2 or name in str(exc):
                raise
            # Which of several files it was (a methodologist's trial: "no count column" named none of them).
            raise type(exc)(f"{name}: {exc}") from None
    return tables


def add_spec_arguments(parser, omit: tuple[str, ...] = (), required: tuple[str, ...] = ()) -> None:
    """The release settings (`spec.SETTINGS`, the one list of them) as command-line flags, but those in `omit`."""
    from ..spec import SETTINGS

    _add_settings(parser, [s for s in SETTINGS if s.name not in omit], required)


def _add_settings(parser, settings, required: tuple[str, ...] = ()) -> None:
    for setting in settings:
        if setting.flag:
            parser.add_argument(setting.cli, action="store_true", help=setting.help)
            continue
        # The mechanisms are listed when help is shown, not whenever the parser is built: finding the installed
        # ones reads every package's metadata (importlib.metadata's import alone was a tenth of a release's time).
        action = _MechanismsListed if setting.name == "mechanism" else "store"
        parser.add_argument(setting.cli, action=action, type=_argument_type(setting.parse), choices=setting.choices,
                            metavar=setting.metavar, required=setting.name in required, default=None,
                            help=setting.help)


class _MechanismsListed(argparse._StoreAction):
    """`--mechanism`: its help names every registered mechanism, found when the help is formatted."""

    @property
    def help(self):
        return f"{self._help}: {', '.join(registered_mechanisms())}"

    @help.setter
    def help(self, text):
        self._help = text


def registered_mechanisms() -> tuple[str, ...]:
    """Every mechanism `--mechanism` takes: those registered in this process where the registry is loaded already
    (an API user's own), else the built-in ones and those installed packages declare (read from their metadata,
    without importing numpy: `--help` stays fast)."""
    import sys

    if "tabrelease.mechanisms" in sys.modules:
        return sys.modules["tabrelease.mechanisms"].mechanism_names()
    from importlib.metadata import entry_points

    from ..spec import BUILT_IN_MECHANISMS

    installed = tuple(p.name for p in entry_points(group="tabrelease.mechanisms") if p.name not in BUILT_IN_MECHANISMS)
    return ("auto",) + BUILT_IN_MECHANISMS + installed


def _argument_type(parse):
    def convert(text):
        try:
            return parse(text)
        except ValueError as exc:  # TabreleaseError is one: argparse reports it as the flag's problem
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def spec_settings_from_args(args, omit: tuple[str, ...] = ()) -> dict:
    """The settings given on the command line (those left out are None or False), by name."""
    from ..spec import SETTINGS

    return {s.name: getattr(args, s.name) for s in SETTINGS if s.name not in omit}


def load_from_args(args):
    """The table the command line names, read as its input settings say."""
    from ..spec import INPUT_SETTINGS, source_from_settings
    from ..workflow import read_source

    return read_source(source_from_settings(args.table, {s.name: getattr(args, s.name) for s in INPUT_SETTINGS}))


def decimal_float(text: str) -> float:
    """A flag's number in ASCII decimal notation (`_numbers.decimal_number`: ``0_5`` is not 5)."""
    try:
        return decimal_number(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_float(text: str) -> float:
    value = decimal_float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive finite number")
    return value


def epsilon_list(text: str) -> tuple[float, ...]:
    from .._limits import MAX_EPSILONS

    try:
        if ":" in text:
            start, stop, step = (decimal_number(p) for p in text.split(":"))
            if step <= 0 or stop <= start:  # numbers, but no range (a methodologist's trial: "1:0.1:0.1")
                raise argparse.ArgumentTypeError(f"{text!r}: START:STOP:STEP runs up from START to below STOP by a "
                                                 "positive STEP (STOP above START)")
            span = (stop - start) / step - 1e-9
            if not span <= MAX_EPSILONS:  # counted before any value is made (and inf or nan is no count)
                raise argparse.ArgumentTypeError(f"{text!r} gives more than {MAX_EPSILONS:,} epsilons, the most "
                                                 "one grid may have")
            count = math.ceil(span)
            values = tuple(round(start + i * step, 12) for i in range(count))
        else:
            parts = text.split(",")
            if any(not p.strip() for p in parts):  # "1,,2" or a trailing comma: a value left out by mistake
                raise argparse.ArgumentTypeError(f"{text!r} has an empty value between commas")
            values = tuple(decimal_number(p) for p in parts)
            if len(values) > MAX_EPSILONS:
                raise argparse.ArgumentTypeError(f"{len(values):,} epsilons are more than {MAX_EPSILONS:,}, the most "
                                                 "one grid may have")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of numbers or START:STOP:STEP") from None
    if not values or any(not math.isfinite(v) or v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every epsilon must be a positive finite number")
    return values


def name_list(text: str) -> tuple[str, ...]:
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one name")
    return names


def _whole_number(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be at least {minimum}")
        return value

    return parse


positive_int = _whole_number(1)
non_negative_int = _whole_number(0)


def print_json(payload: Any) -> None:
    # Written whole or not at all (a failure half-way left a cut-off document on stdout), and a figure that is not
    # defined (NaN: the epsilon spent under a rho budget without a delta) is null: strict JSON has no NaN, and a
    # release made and charged was reported as an internal error by its --json summary (a new user's trial).
    text = json.dumps(_undefined_as_null(payload), indent=2, allow_nan=False, default=_json_default)
    sys.stdout.write(text + "\n")


def _undefined_as_null(value):
    """`value` with every NaN float (numpy's too) in its dicts, lists and tuples replaced by None."""
    import numpy as np

    if isinstance(value, (float, np.floating)):
        return None if value != value else value
    if isinstance(value, dict):
        return {k: _undefined_as_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_undefined_as_null(v) for v in value]
    return value


def _json_default(value):
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def dropped_note(model, table) -> str | None:
    """The note that some asked-for margins were dropped as inside another, naming them by their variables (as a
    release's note does: letters depend on which variables were read); None where none was."""
    from ..tables import margin_titles

    if not model.dropped:
        return None
    return ("not planned separately, being inside another margin (sum that one to get it): "
            + ", ".join(margin_titles(table, model.dropped)))


def report_dropped(model, table) -> None:
    """Say which asked-for margins were dropped as inside another (on standard error, so --json stays one document)."""
    if (note := dropped_note(model, table)) is not None:
        print(f"note: {note}", file=sys.stderr)


def budget_line(status) -> str:
    """What a dataset has spent and has left, in words: under which unit, by which accounting."""
    if status.rho_budget is not None:
        return (f"spent rho {status.rho_spent:.6g} of {status.rho_budget:.6g} (zCDP, {status.unit}), "
                f"{status.rho_remaining:.6g} remains")
    if status.unit == "none":
        return "no unit covers all its releases, so no total can be stated"
    if status.epsilon_budget is None:
        return f"spent epsilon {status.epsilon_spent:.6g} ({status.unit}); no budget set"
    return (f"spent epsilon {status.epsilon_spent:.6g} of {status.epsilon_budget:g} ({status.unit}), "
            f"{status.epsilon_remaining:.6g} remains")


def import_numpy_with_signals_held() -> None:
    """Import numpy, the first compiled module a release imports, with SIGINT and SIGTERM held (acted on once it is
    imported), as `workflow.preload_release_modules` imports the later ones: a signal inside a compiled module's
    import can leave it half made, and a second import of it then fails with another error (numpy raised
    RecursionError or AttributeError so, in a scratch check of stop 42), which the command would report as an
    internal error instead of the signal. The commands that charge a ledger call it first."""
    from .._signals import deferred_signals

    with deferred_signals():
        import numpy  # noqa: F401
