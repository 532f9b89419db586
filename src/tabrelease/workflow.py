"""The workflow an agency runs around the pipeline: every check before the charge, the ledger's charge before any
noise is drawn, then measure, estimate, evaluate and write the bundle (public/ and internal/), or nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ._signals import HeldInterrupts, deferred_signals, finishing_after_charge, raise_if_signalled
from .errors import ChargedReleaseFailed, ReleaseInterrupted, TabreleaseError
from .mechanisms import MechanismPlan
from .planner import plan_release
from .models import default_model
from .noise import NoiseSource, noise_source
from .pipeline import Release, fitness_notes, run_plan
from .spec import (RELEASE, SEPARATORS, LedgerAccount, ReleaseSpec, TableSource, check_releasable_loss,
                   refuse_ambiguous_margins)
from .tables import ContingencyTable, people_names


@dataclass(frozen=True, eq=False)
class PreparedRelease:
    """A release checked against its table and planned, before any charge or noise.

    Attributes
    ----------
    spec : ReleaseSpec
        What was asked for.
    plan : MechanismPlan
        Everything that does not depend on the counts (queries, exact sensitivity, calibration, estimator).
    noise : NoiseSource
        Where the noise will come from (the secure sampler, or seeded simulation noise).
    """

    spec: ReleaseSpec
    plan: MechanismPlan
    noise: NoiseSource


def _cells_written(table, spec: ReleaseSpec) -> tuple[int, int]:
    """About how many cells a bundle writes, and the most in one file, for the room it needs
    (`bundle.check_writable`): the released margins' (the spec's, parsed as the release parses them; every variable's
    levels where they are not known yet) and the fitted table's, which the audit writes cell by cell where the fit is
    over the cells (at most `estimate.CELL_PROBLEM_MAX_CELLS` of them)."""
    from math import prod

    from .estimate import CELL_PROBLEM_MAX_CELLS
    from .models import parse_model

    shape = tuple(int(k) for k in table.shape)
    try:
        margins = (parse_model(spec.margins, table).generators if isinstance(spec.margins, str)
                   else [tuple(int(j) for j in m) for m in spec.margins or ()])
        sizes = [prod(shape[j] for j in margin) for margin in margins]
    except (TabreleaseError, TypeError, ValueError, IndexError):  # refused later, in its own words
        sizes = []
    sizes = sizes or [shape[j] for j in range(len(shape))]
    cells = prod(shape)
    fitted = cells if cells <= CELL_PROBLEM_MAX_CELLS else 0
    return sum(sizes) + fitted, max(max(sizes), fitted)


def prepare_release(table: ContingencyTable, spec: ReleaseSpec, *, out: str | os.PathLike | None = None,
                    force: bool = False) -> PreparedRelease:
    """Every check made before a charge, and the plan: what `publish_release`, `release_margins` and a batch's dry run
    all call, so a dry run predicts exactly what the run will refuse.

    Parameters
    ----------
    table : ContingencyTable
        The confidential table (its counts are read only by the checks of size and range, never reported).
    spec : ReleaseSpec
        The release asked for.
    out : path or None
        Where the bundle will be written: checked too when given (absent unless `force`, writable).
    force : bool
        Whether an existing `out` may be replaced.

    Returns
    -------
    PreparedRelease

    Raises
    ------
    TabreleaseError
        With one line naming the problem; nothing is charged or written.
    """
    from .tables import LEVELS_FROM_DATA, ContingencyTable
    from .tables._text import NOT_A_NAME, header_looks_like_names
    from .tables.model import TableView

    if not isinstance(table, (ContingencyTable, TableView)):
        # A name, a path or a DataFrame had raised AttributeError from inside (a new user's trial).
        raise TabreleaseError(f"a release is made from a table (builtin_table, load_table, table_from_frame, "
                              f"read_source), not {type(table).__name__}")
    if not isinstance(spec, ReleaseSpec):
        raise TabreleaseError(f"a release is described by a ReleaseSpec, not {type(spec).__name__}")
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise TabreleaseError(f"a release's folder is a path, not {type(out).__name__}")
    check_releasable_loss(spec.loss)
    if out is not None:
        from .bundle import check_release_destination, check_report_support, check_writable

        check_release_destination(out, force)
        check_writable(out, *_cells_written(table, spec))
        check_report_support(spec.workbook)
    if spec.mode == RELEASE and table.metadata.get(LEVELS_FROM_DATA):
        missing, others = table.metadata.get("undeclared_levels"), table.metadata.get("levels_not_in_table")
        which, named = "", table.metadata.get("undeclared_named", False)
        if missing and named and header_looks_like_names(missing):
            which = f" (undeclared: {', '.join(missing)})"
        elif missing:
            # A headerless file's first record is its "names": they are shown only where the header is known to be
            # one (the user named a variable in it), and never where they look like data.
            why = (f"one name is {NOT_A_NAME}" if not header_looks_like_names(missing) else
                   "the first row is not known to be a header, and a file without a header row would have a "
                   "record quoted")
            which = (f" ({len(missing)} variable{'s' if len(missing) != 1 else ''} undeclared, not named: {why}; "
                     "does the file have a header row?)")
        if missing and others:  # the user's own names, from the levels file: not the data's
            which += f"; the levels file declares {', '.join(others)}, which the table does not have"
        # Reading fewer variables helps only where an undeclared one is not released (a new user's trial: the hint
        # came where every variable was released, and for a --sparse table, which --variables does not take).
        try:
            released = {a for margin in resolve_margins(table, spec.margins) for a in margin}
        except TabreleaseError:
            released = set()
        unreleased = [v for v in (missing or table.variables) if table.variables.index(v) not in released]
        fewer = ", or, with --microdata, read only the variables released (--variables A,B,...)" if unreleased else ""
        raise TabreleaseError("the table's levels were read from data that need not show every level (microdata, or "
                              "a --sparse table): the published schema would reveal which values occur; declare "
                              f"every variable's levels (--levels FILE, or levels= in the API){which}{fewer}")
    if not getattr(table, "held_as_cells", True):
        # Before the plan: a mechanism over every cell would plan (and its estimator build) over all of them.
        from .mechanisms import get_mechanism, resolve_mechanism

        chosen = get_mechanism(resolve_mechanism(spec.mechanism, table.shape))
        if not chosen.reads_margins:
            raise TabreleaseError(f"the {chosen.name} mechanism needs every cell of the table, and it has "
                                  f"{table.cells:.3g} cells (held as records): use the planned mechanism, which works "
                                  "from margins; nothing was charged")
    noise = noise_source(spec.mode, spec.seed)
    spec = sensitive_by_variable(spec, table)
    # The planner refuses, before the mechanism plans, margins too large to plan (sizes are the shape's alone).
    plan = plan_release(table.shape, resolve_margins(table, spec.margins), spec, table.variables)
    if table.metadata.get(LEVELS_FROM_DATA):  # simulation only (release mode refused it above); in release.json too
        plan = replace(plan, notes=plan.notes + ("the levels were read from the data: the published schema reveals "
                                                 "which values occur (declare them with --levels FILE before a "
                                                 "release for publication)",))
    if hasattr(table, "count_margins"):
        # A table counted from its file: every margin the measurement and the audit read, in one pass, before any
        # charge; then nothing more is read from the file (what else the audit would read, it leaves out). The
        # one-way margins too: the ledger fingerprints a sensitive-attribute budget's columns by them.
        from .evaluation import margins_the_audit_reads

        table.count_margins(plan.implementation.margins_read(plan) + margins_the_audit_reads(plan.margins, plan.shape)
                            + [(j,) for j in range(len(plan.shape))])
        table.freeze()
    check_before_charge(plan, table, spec.mode)
    if out is not None and spec.workbook:  # the workbook's sheets, now that the margins are known
        from .bundle import check_report_support

        check_report_support(spec.workbook, [[table.shape[a] for a in m] for m in plan.margins])
    from .tables import people_names

    plan = replace(plan, variable_names=people_names(table)[0])
    return PreparedRelease(spec=spec, plan=plan, noise=noise)


def sensitive_by_variable(spec: ReleaseSpec, table) -> ReleaseSpec:
    """The spec with a sensitive-attribute unit's attributes named by the table's variables where they were named
    by the variables' names for people (a built-in table's labels, `class` for Titanic's A), which the public files
    and margins use, or by their letters: the guarantee, and so the ledger, name the variables either way
    (`variables_named`). A word that names no variable is kept as given (the planner says it is none).

    Parameters
    ----------
    spec : ReleaseSpec
    table : ContingencyTable or MicrodataTable
        Its variables, letters and names for people.

    Returns
    -------
    ReleaseSpec
        `spec` itself where nothing changed.

    Raises
    ------
    TabreleaseError
        An attribute that names more than one variable.
    """
    from dataclasses import replace as replaced

    if not spec.sensitive:
        return spec
    attributes = variables_named(spec.sensitive, table, "--sensitive")
    return spec if attributes == spec.sensitive else replaced(spec, unit=replaced(spec.unit, attributes=attributes))


def variables_named(words, table, what: str, *, known: bool = False) -> tuple[str, ...]:
    """The table's variable each word names: by its name, its name for people (a built-in table's label), or its
    letter. A word that could name two variables (a variable's name and another's label, a letter and a label, a
    label two variables share) is refused: for a protected attribute, the wrong variable would go unprotected.

    Parameters
    ----------
    words : sequence of str
    table : ContingencyTable or MicrodataTable
    what : str
        What the words are, for the error ("--sensitive", "dataset 'x': budget_attributes").
    known : bool, default False
        Whether a word that names no variable is refused (else it is returned as given).

    Returns
    -------
    tuple of str
        The variables' names, in the words' order.

    Raises
    ------
    TabreleaseError
        A word that names more than one variable, or (with `known`) none.
    """
    from .tables import LETTERS, people_names

    variables, labels = list(table.variables), list(people_names(table)[0])
    found = []
    for word in words:
        named = {v for v, label in zip(variables, labels) if word in (v, label)}
        if len(word) == 1 and word.upper() in LETTERS[:len(variables)]:
            named.add(variables[LETTERS.index(word.upper())])
        if len(named) > 1:  # the word is the user's, and so (matched) is the name
            which = " or ".join(f"{v} (letter {LETTERS[i]}, called {label!r})"
                                for i, (v, label) in enumerate(zip(variables, labels)) if v in named)
            raise TabreleaseError(f"{what} {word!r} could name {which}: use a word that names one of them alone")
        if not named and known:
            from .tables.model import describe_variables, names_not_shown

            listed = describe_variables(table) if names_not_shown(table) else ", ".join(variables)
            raise TabreleaseError(f"{what} {word!r} names no variable of the table (its variables: {listed})")
        found.append(named.pop() if named else word)
    return tuple(found)


def release_margins(table: ContingencyTable, spec: ReleaseSpec) -> Release:
    """Release margins of `table` as `spec` asks, in memory: no ledger, no files (`publish_release` does both).

    Parameters
    ----------
    table : ContingencyTable
    spec : ReleaseSpec

    Returns
    -------
    Release
    """
    prepared = prepare_release(table, spec)
    return run_plan(prepared.plan, table, prepared.noise)


def read_source(source: TableSource):
    """The table a `TableSource` names (a built-in table, a long table, or microdata), read as it says.

    Parameters
    ----------
    source : TableSource

    Returns
    -------
    ContingencyTable or MicrodataTable
    """
    from .tables import CsvOptions, load_input

    csv = CsvOptions(sep=None if source.sep is None else SEPARATORS[source.sep], encoding=source.encoding,
                     decimal=source.decimal, sheet=source.sheet, thousands=source.thousands,
                     missing=source.missing_level)
    return load_input(source.source, microdata=source.microdata, variables=source.variables,
                      levels_file=source.levels, metadata_file=source.metadata, count_column=source.count_column,
                      sparse=source.sparse, csv_options=csv, engine=source.engine, scheduler=source.scheduler)


def resolve_margins(table, margins) -> list:
    """Margins as axis tuples, from what a person writes: None (the table's paper model), bracket notation
    ("[sex,age][age,region]" or "[AB][BC]"), or a list whose margins are axis numbers, variable names or letters
    (("sex", "age"), or "sex" for a one-way margin). A flat list of two or more names, ["sex", "age"], is refused as
    ambiguous (one two-way margin, or two one-way ones?).

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable
        Names the variables and letters; gives the default model.
    margins : str, sequence, or None
        As `ReleaseSpec.margins`.

    Returns
    -------
    list of tuple of int
        The margins as axis tuples (from bracket notation: the model's generators, then the margins it dropped as
        inside another). Axis numbers are not range-checked here (the plan does that).

    Raises
    ------
    TabreleaseError
        Unreadable notation, an unknown variable, a margin that is neither names nor axis numbers, or an ambiguous
        flat list of names.
    """
    from .models import parse_model

    if margins is None:
        return list(default_model(table).generators)
    if isinstance(margins, str):
        model = parse_model(margins, table)
        return list(model.generators) + list(model.dropped)
    if not isinstance(margins, Sequence):
        raise TabreleaseError(f"give the margins as a list, e.g. [('sex', 'age'), (1, 2)], or in bracket notation, "
                              f"not {margins!r}")
    refuse_ambiguous_margins(margins)
    resolved = []
    for g in margins:
        items = [g] if isinstance(g, str) else g
        if not isinstance(items, Sequence) or isinstance(items, bytes):
            raise TabreleaseError(f"a margin is a tuple of axis numbers or variable names, not {g!r}")
        axes = []
        for item in items:
            if isinstance(item, str):
                axes.append(table.axis(item))
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                axes.append(int(item))
            else:
                raise TabreleaseError(f"a margin is a tuple of axis numbers or variable names, not {g!r}")
        if len(set(axes)) < len(axes):  # as "[AA]" is refused
            raise TabreleaseError(f"the margin {list(items)!r} names a variable twice")
        resolved.append(tuple(axes))
    return resolved



def check_before_charge(plan: MechanismPlan, table: ContingencyTable, mode: str) -> None:
    """Every check of a planned release against its table that must refuse before any charge: the secure sampler's
    domain, the range in which estimates are exact (floats hold every count), the mechanism's own size limit, and
    release mode's randomized response, which draws each record in turn, at most `noise.MAX_SECURE_RESPONSES`
    records (simulation draws binomials per cell and moves the changed records with numpy, seconds at 10^8).

    Parameters
    ----------
    plan : MechanismPlan
    table : ContingencyTable
        Its total n is read (never reported).
    mode : {"release", "simulation"}

    Raises
    ------
    TabreleaseError
        The table is too large for the secure sampler, for exact estimates, for the mechanism, or for release mode's
        randomized response; nothing is charged.
    """
    from .estimate import check_exact_range
    from .noise import MAX_SECURE_RESPONSES

    check_sampler_domain(plan, table, mode)
    check_exact_range(table)
    plan.implementation.check_table_size(plan, int(table.n))
    drawn_in_turn = mode == RELEASE and plan.calibration.distribution == "randomized-response"
    if drawn_in_turn and int(table.n) > MAX_SECURE_RESPONSES:
        raise TabreleaseError(f"randomized response in release mode draws each record in turn through the secure "
                              f"sampler, and this table has more than {MAX_SECURE_RESPONSES:,} (this tool's limit "
                              "for it); use the planned mechanism; nothing was charged")


def check_sampler_domain(plan: MechanismPlan, table: ContingencyTable, mode: str) -> None:
    """Release mode draws on 64-bit integers: refuse, before any charge, a table whose measured integers could
    exceed them (the message names no count).

    Parameters
    ----------
    plan : MechanismPlan
    table : ContingencyTable
        Its total n is read.
    mode : {"release", "simulation"}
        Only release mode with Laplace noise is checked.

    Raises
    ------
    TabreleaseError
        n times the mechanism's sampler bound exceeds `MAX_SAMPLER_INTEGER`; nothing is charged.
    """
    from .noise import MAX_SAMPLER_INTEGER

    if mode != RELEASE or plan.calibration.distribution != "laplace":
        return
    from fractions import Fraction

    # Exact: in floating point n * W rounds, and counts just above 2^62 passed this check and failed after the charge.
    n = int(table.n)
    if Fraction(n) * Fraction(plan.implementation.sampler_bound(plan)) > MAX_SAMPLER_INTEGER:
        raise TabreleaseError("the table's counts are too large for release mode's 64-bit secure sampler "
                              f"(measured integers may reach {MAX_SAMPLER_INTEGER:.3g}); nothing was charged")


# --- the workflow ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class PublishedRelease:
    """What `publish_release` did: the release, its evaluation, where it was written, the ledger's word."""

    release: Release
    evaluation: Any
    out: Path
    ledger_entry: Mapping[str, Any] | None
    budget: Any  # ledger.BudgetStatus after the charge, or None without a ledger
    warnings: tuple[str, ...]
    interrupted: bool = False  # a SIGINT came after the charge: held, and the release made (`finishing_after_charge`)

    def _repr_html_(self) -> str:
        from ._display import html_for

        return html_for(self)


def charge_release(account: LedgerAccount, table, plan: MechanismPlan, out, mode: str) -> dict:
    """Charge the ledger for a release of `plan` before any noise is drawn (or refuse it).

    What `publish_release` does, and what a batch's dry run does on a throw-away copy of the ledger. The charge is
    the mechanism's guarantee as a value (`Mechanism.guarantee`: its unit and loss; a paper preset is charged the
    epsilon its noise really gives), which the ledger reads under the unit of the dataset's budget.

    Parameters
    ----------
    account : LedgerAccount
        The ledger, the dataset charged, and what the ledger may allow.
    table : ContingencyTable
    plan : MechanismPlan
    out : path
        Where the bundle is written (recorded in the ledger).
    mode : {"release", "simulation"}

    Returns
    -------
    dict
        The ledger's record of the charge.
    """
    from .ledger import charge
    from .models import margin_label
    from .tables import people_names

    names, _ = people_names(table)
    return charge(account, table, plan.implementation.guarantee(plan, table.variables), mechanism=plan.mechanism,
                  margins=[margin_label(g, table.letters) for g in plan.margins], output=str(Path(out).resolve()),
                  noise_mode=mode, margin_names=[[names[a] for a in g] for g in plan.margins])


def charged_failure(ledger, entry: Mapping, exc: BaseException) -> ChargedReleaseFailed:
    """The error for a release that failed after its charge, the failure recorded in the ledger first. The message
    names the charge and the kind of failure only (an exception's text could hold something derived from the
    counts).

    Parameters
    ----------
    ledger : path-like
        The ledger charged.
    entry : mapping
        The charge, as `ledger.charge` returned it.
    exc : BaseException
        What made the release fail (only its kind is recorded and reported).

    Returns
    -------
    ChargedReleaseFailed
        For the caller to raise; its `entry` is the charge. If the failure could not be recorded, its message says
        so (the charge stands either way).
    """
    from .ledger import record_failure
    from .privacy import PrivacyGuarantee

    kind = type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        kind += f": {exc.strerror}"
    elif isinstance(exc, SystemExit) and isinstance(exc.code, int) and exc.code > 128:
        kind = f"terminated by signal {exc.code - 128}"
    elif isinstance(exc, KeyboardInterrupt):
        kind = "interrupted"
    recorded = ""
    try:
        # A second signal (a user pressing Ctrl-C again) is dropped, not acted on: acted on at the block's end, it
        # ended the command with 130 or 143 and no word of the charge (a reviewer's trial, 8 runs of 14).
        with deferred_signals(act=False):
            record_failure(ledger, entry, f"the release failed after its charge ({kind})")
    except Exception as record_exc:  # the charge stands all the same; say the failure is not in the ledger
        recorded = f"; the failure could not be recorded in the ledger ({type(record_exc).__name__})"
    loss = PrivacyGuarantee.from_dict(entry["guarantee"]).loss.describe()
    failed = ChargedReleaseFailed(
        f"charged {loss} to {entry['dataset']} (ledger record {entry.get('sequence')}); the release failed ({kind}) "
        f"and nothing was published{recorded}", entry)
    failed.signalled = isinstance(exc, (KeyboardInterrupt, SystemExit))  # a user's or a scheduler's stop, not a fault
    return failed


def _bundle_of(out, entry: Mapping) -> bool:
    """Whether `out` holds the bundle of this charge (its internal/charge.json names the charge's MAC)."""
    import hmac
    import json

    from .ledger import CHARGE_FILE

    try:
        recorded = json.loads((Path(out) / "internal" / CHARGE_FILE).read_text()).get("mac")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    return isinstance(recorded, str) and hmac.compare_digest(recorded, str(entry.get("mac")))


# The compiled modules a release imports lazily after the point of the charge (measured: tests/test_preload.py
# runs releases of every kind and fails if one more comes in after the preload). Nothing here is imported that
# the release will not use: the import time is a large share of a command-line release. (The audit fits its
# simulation in threads: concurrent.futures.thread brings _queue.)
RELEASE_MODULES = ("numpy.random", "highspy", "clarabel", "threadpoolctl",
                   "markupsafe", "statistics", "uuid", "unicodedata", "concurrent.futures.thread")
# Gaussian noise's accounting and the copula's normal scores use scipy's special functions (a slow import that a
# Laplace release does without).
SPECIAL_FUNCTION_MODULES = ("scipy.special",)
# Release mode draws from OpenDP's sampler; the ledger locks its file; a workbook is written by openpyxl.
SECURE_NOISE_MODULES = ("opendp.prelude",)
LEDGER_MODULES = ("filelock",)
WORKBOOK_MODULES = ("openpyxl",)


def preload_release_modules(workbook: bool = False, *, secure: bool = True, ledger: bool = True,
                            special_functions: bool = True) -> None:
    """Import, before the charge and with signals held, the compiled modules the release path would otherwise
    import lazily after it (a signal during such an import can abort the interpreter).

    Parameters
    ----------
    workbook : bool
        Import openpyxl too. A missing optional module is skipped (its own check refuses before the charge).
    secure : bool, default True
        The noise comes from OpenDP's sampler (release mode).
    ledger : bool, default True
        A ledger is charged.
    special_functions : bool, default True
        The release uses scipy's special functions (Gaussian noise, copula synthesis).
    """
    import importlib

    names = (RELEASE_MODULES + (SPECIAL_FUNCTION_MODULES if special_functions else ())
             + (SECURE_NOISE_MODULES if secure else ()) + (LEDGER_MODULES if ledger else ())
             + (WORKBOOK_MODULES if workbook else ()))
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional module: its own check, before the charge, says what is missing
            pass
    from . import estimate, evaluation  # noqa: F401  (their own compiled imports, before the charge)
    from .bundle import report_writer

    report_writer()  # the presentation layer's writer, registered (and its module imported) before the charge


def _uses_special_functions(plan: MechanismPlan) -> bool:
    """Whether the release path calls scipy.special: Gaussian noise's accounting, or the copula's normal scores."""
    from .estimate import CopulaSynthesis

    return getattr(plan.calibration, "distribution", None) != "laplace" or isinstance(plan.estimator, CopulaSynthesis)


def publish_release(table: ContingencyTable, spec: ReleaseSpec, out: str | os.PathLike, *,
                    account: LedgerAccount | None = None, force: bool = False,
                    version: str | None = None) -> PublishedRelease:
    """The whole release, with the guarantees of the command line.

    Check everything (`prepare_release`), charge the ledger before any noise is drawn, measure, estimate, evaluate,
    and write `out/public` and `out/internal`. Every check that can refuse happens before the charge; a refusal
    charges nothing and writes nothing.

    Parameters
    ----------
    table : ContingencyTable
    spec : ReleaseSpec
        The release asked for.
    out : path
        The bundle's folder (must not exist unless `force`).
    account : LedgerAccount or None
        The ledger to charge; None: no ledger.
    force : bool
        Replace an existing `out`.
    version : str or None
        The version written into the outputs (default: this package's).

    Returns
    -------
    PublishedRelease

    Raises
    ------
    TabreleaseError, BudgetRefused, LedgerIntegrityError
        Before the charge: nothing charged, nothing written.
    ChargedReleaseFailed
        After the charge: it stands and the ledger records the failure; nothing was published.
    ReleaseInterrupted
        A Ctrl-C (or a hang-up) after the charge, held while the release was made (`finishing_after_charge`): the
        release stands, published and charged, and is the exception's `published`; raised so that a caller's loop
        stops. A second one before the bundle is in place abandons the release (ChargedReleaseFailed).
    """
    from . import __version__
    from .bundle import remove_stale_staging

    if out is None:  # prepare_release refuses a folder that is not a path; a bundle needs one
        raise TabreleaseError("a release's folder is a path, not NoneType")
    if account is not None and not isinstance(account, LedgerAccount):
        raise TabreleaseError(f"a release is charged through a LedgerAccount (LedgerAccount(ledger=...)), not "
                              f"{type(account).__name__}")
    prepared = prepare_release(table, spec, out=out, force=force)
    plan, noise, mode, workbook = prepared.plan, prepared.noise, spec.mode, spec.workbook
    ledger = None if account is None else account.ledger
    stale = remove_stale_staging(out)  # folders of killed runs (they may hold an audit): gone before anything else
    with deferred_signals():
        preload_release_modules(workbook, secure=mode == RELEASE, ledger=account is not None,
                                special_functions=_uses_special_functions(plan))
    from .ledger import holding

    entry = budget = None
    held, noted, extra = HeldInterrupts(), [], []
    try:
        # Charged and known to be, or not charged: a signal waits for the charge's end. With a ledger, one noted
        # meanwhile is not acted on after the charge, which would lose it: it is the first held while the release
        # is made (`finishing_after_charge`). The ledger's lock is awaited before the hold: a Ctrl-C or SIGTERM
        # while another release charges ends the command with nothing charged.
        with holding(ledger) if ledger is not None else contextlib.nullcontext():
            with deferred_signals(act=ledger is None, noted=noted):
                raise_if_signalled()  # an interrupt whose exception compiled code lost (reading the table): none
                if ledger is not None:
                    entry = charge_release(account, table, plan, out, mode)
        if entry is not None and signal.SIGTERM in noted:  # a termination asked for during the charge: honoured
            raise SystemExit(128 + signal.SIGTERM)
        with contextlib.ExitStack() as stack:
            if entry is not None:  # charged: a first Ctrl-C is held and the release made, a second abandons it
                held = stack.enter_context(finishing_after_charge(lambda: _say_held(entry), already=noted))
            written, release, evaluation, said = _make_and_write(table, plan, noise, spec, out, entry, ledger,
                                                                 version or __version__, force, workbook, held)
            if ledger is not None:
                from .ledger import budget_status

                try:  # the release is made and charged: a failure to read the account now must not say otherwise
                    budget = budget_status(ledger, entry["dataset"])
                except TabreleaseError as exc:
                    extra.append(f"released and charged, but the ledger's account could not be read back: {exc}")
                except (KeyboardInterrupt, SystemExit):  # a signal not held here (SIGTERM): the release stands
                    held.received.append(signal.SIGTERM)
                    extra.append("released and charged; the ledger's account was not read back (interrupted)")
                except Exception as exc:  # a fault reading it (a folder unreadable now): the release stands
                    extra.append(f"released and charged, but the ledger's account could not be read back "
                                 f"({type(exc).__name__})")
            if held and entry is None:  # no ledger: a signal held over the rename, the bundle in place
                extra.append("interrupted as the bundle was put in place: the release was published, and it stands")
            elif held:
                extra.append(f"interrupted after its charge (ledger record {entry.get('sequence')}): the release "
                             "was finished and published, and it stands")
            warnings = tuple(extra + [f"removed {p.name}, left beside {Path(out).name} by a release that was killed"
                                      for p in stale] + said)
            published = PublishedRelease(release, evaluation, written, entry, budget, warnings,
                                         interrupted=bool(held))
    except BaseException as exc:
        if entry is not None:
            with deferred_signals(act=False):  # a second signal must not end the command before it says which
                in_place = _bundle_of(out, entry)
        if entry is None or in_place:
            # Not charged; or published, and the failure came after (a signal held over the bundle's rename is
            # acted on once the bundle is in place): the release stands, and is not recorded as failed.
            raise
        raise charged_failure(ledger, entry, exc) from exc
    if published.interrupted:
        # The release stands; the interrupt is acted on now, carrying it, so that a caller's loop stops as a Ctrl-C
        # asks (the command line prints the release and exits 0; a batch stops after it).
        raise ReleaseInterrupted(published)
    return published


def _say_held(entry: Mapping) -> None:
    """What the terminal says when a charged release's first Ctrl-C is held (`finishing_after_charge`); nothing
    where there is no standard error (print would fall back on standard output, which may be --json's)."""
    if sys.stderr is None:
        return
    print(f"tabrelease: interrupt held: the release is charged (ledger record {entry.get('sequence')}) and is being "
          "finished; Ctrl-C again abandons it (the charge stands)", file=sys.stderr, flush=True)


def _make_and_write(table, plan, noise, spec, out, entry, ledger, version, force, workbook, held):
    """The release's noise, fit, rounding, evaluation and bundle (`publish_release`'s steps after its charge):
    (the bundle's folder, the release, its evaluation, the warnings its reader is told). `held`: the interrupts
    held since the charge (`finishing_after_charge`), committed once the bundle is in place, with any signal that
    came while it was renamed into place (the release stands then: said as interrupted, not acted on)."""
    from .bundle import write_release_bundle
    from .evaluation import evaluate_release, release_warnings, released_warnings
    from .models import HierarchicalModel

    release = run_plan(plan, table, noise)
    # Judged once per published release (not in run_plan: sweeps draw tens of thousands of releases).
    release = replace(release, notes=release.notes + tuple(fitness_notes(plan, release.released_margins,
                                                                         people_names(table)[0])))
    refit = HierarchicalModel(release.margins, table.k)
    evaluation = evaluate_release(table, release, refit, bound_delta=spec.bound_delta, simulate=True)
    # What the terminal says (the audit says it all): not the warnings that read the true counts, nor how many
    # there are (a review's trial: "2 warnings" or "1" told whether the true n lay within 10% of the released one,
    # and whether a category with people in it was released empty). The audit's line says where they are.
    said = release_warnings(release) + released_warnings(evaluation, release)
    over_rename: list = []
    written = write_release_bundle(out, table, release, evaluation, version=version, force=force, workbook=workbook,
                                   charge=None if entry is None else {**entry, "ledger": str(ledger)},
                                   out_sep=SEPARATORS[spec.out_sep], out_bom=spec.out_bom, held_over_rename=over_rename)
    held.received.extend(over_rename)
    held.committed = True  # in place: a further signal has nothing left to abandon
    return written, release, evaluation, said

