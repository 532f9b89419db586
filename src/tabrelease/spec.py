"""What a release is asked to be, as one frozen value: `ReleaseSpec`; how it is charged: `LedgerAccount`; and the
one list of the settings a person can give (`SETTINGS`), from which the command line, batch files and sweeps all
read, so that no list of settings is spelled out twice.

A spec holds no table and no counts: it can be written in a batch file, compared, hashed, pickled to a sweep's
workers, and checked against a table by `workflow.prepare_release(table, spec)` (every check made before a
charge). The model is OpenDP's configuration values (keyword-only, frozen, validated on construction) and its
privacy unit and loss as values (`privacy.PrivacyUnit`, `privacy.PrivacyLoss`).

Examples
--------
>>> from tabrelease import ReleaseSpec, loss_of
>>> spec = ReleaseSpec(loss=loss_of(1.0), margins="[AB][BC]", mode="simulation", seed=7)
>>> spec.epsilon, spec.delta, spec.neighbours
(1.0, None, 'add-remove')
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ._numbers import decimal_number
from .errors import TabreleaseError
from .privacy import ADD_REMOVE, APPROXIMATE, PURE, REPLACE, SENSITIVE, PrivacyLoss, PrivacyUnit

RELEASE = "release"
SIMULATION = "simulation"
DEFAULT_MECHANISM = "planned"  # what `release`, `sweep` and `batch` use unless told otherwise
# The built-in mechanisms' names, for `--help` without importing them (a test keeps this equal to the registry's).
BUILT_IN_MECHANISMS = ("planned", "fourier", "efron-stein", "gaussian", "binary-encoding", "cells", "margins", "nonneg",
                       "gaussian-copula", "copula-id", "randomized-response", "sensitive-attributes", "rap",
                       "hdmm-marginals")
CALIBRATIONS = ("exact", "paper")
ROUNDING_CHOICES = ("nearest", "controlled", "none")
PLAN_OBJECTIVES = ("total-squared-error", "max-cell-variance")
PLAN_CANDIDATES = ("all", "closure")
# The units a release can be calibrated for (local DP is what a mechanism states of itself, not a request).
RELEASE_UNITS = (ADD_REMOVE, REPLACE, SENSITIVE)
# A CSV's field separators, by the names the command line and batch files give them (read and written).
SEPARATORS = {"comma": ",", "semicolon": ";", "tab": "\t", "pipe": "|"}
# The epsilons and deltas a release may ask for. Past them the arithmetic of a release fails after its noise is drawn
# (and charged): e^epsilon overflows a float above 709.78 (group privacy, randomized response); at 1e-160 a scale's
# square overflows, and at 1e-20 a total's noise passes 2^53 (counts are no longer exact); below about 1e-300 a delta
# is lost in subnormal floats (the Gaussian's calibration is not solved). At 1e-6 a table of 2.4 x 10^8 records was
# still released to a relative L1 error of 6.6% (a review's scratch run). No privacy is left long before the top.
EPSILON_RANGE = (1e-6, 700.0)
SMALLEST_DELTA = 1e-300
# `plan` computes expected errors only, and takes epsilons past a release's range (a planner may ask what 800 buys),
# but not where its own arithmetic fails: at 1e-160 a noise variance overflows (a new user's trial: an internal error,
# and Infinity in --json).
PLANNING_EPSILON_RANGE = (1e-100, 1e100)


def loss_of(epsilon: float, delta: float | None = None) -> PrivacyLoss:
    """The privacy loss a release is asked for: pure epsilon, or (epsilon, delta) when `delta` is given.

    Parameters
    ----------
    epsilon : float
        Positive and finite (a release checks `EPSILON_RANGE`, `check_releasable_loss`).
    delta : float or None
        In (0, 1) for approximate differential privacy; None (or 0) for pure.

    Returns
    -------
    PrivacyLoss
    """
    epsilon = _positive_number("epsilon", epsilon)
    if delta is None or delta == 0:
        return PrivacyLoss(kind=PURE, epsilon=epsilon)
    if not (_is_number(delta) and 0 < delta < 1):
        raise TabreleaseError(f"delta must lie strictly between 0 and 1, not {delta!r}")
    return PrivacyLoss(kind=APPROXIMATE, epsilon=epsilon, delta=float(delta))


def check_releasable_loss(loss: PrivacyLoss) -> None:
    """Refuse, before a release is drawn or charged, a loss whose arithmetic fails (`EPSILON_RANGE`,
    `SMALLEST_DELTA`). Sweeps check their epsilons by it too (their runs are releases); `plan` by the wider
    `PLANNING_EPSILON_RANGE`; the reading of old bundles takes any positive loss.

    Parameters
    ----------
    loss : PrivacyLoss
        The release's loss.

    Raises
    ------
    TabreleaseError
        Epsilon outside the range, or a delta below its floor.
    """
    low, high = EPSILON_RANGE
    if loss.epsilon is not None and not low <= loss.epsilon <= high:
        raise TabreleaseError(f"a release's epsilon must lie between {low:g} and {high:g}, not {loss.epsilon!r} "
                              "(past either end its arithmetic fails; no privacy is left long before the top)")
    if loss.delta and loss.delta < SMALLEST_DELTA:
        raise TabreleaseError(f"a release's delta must be at least {SMALLEST_DELTA:g} (a smaller one is lost in the "
                              f"arithmetic of its calibration), not {loss.delta!r}")


def unit_of(neighbours: str = ADD_REMOVE, sensitive: Sequence[str] | str | None = None) -> PrivacyUnit:
    """The privacy unit a release is calibrated for, from the command line's words.

    Parameters
    ----------
    neighbours : {"add-remove", "replace"}
        One record added or removed, or one record changed.
    sensitive : sequence of str, comma-separated str, or None
        The protected attributes (names or letters): the sensitive-attribute unit, whose neighbours change those
        attributes of one record only (a restriction of replace; `neighbours` must then be "replace").

    Returns
    -------
    PrivacyUnit
    """
    if neighbours not in (ADD_REMOVE, REPLACE):
        raise TabreleaseError(f"unknown neighbour relation {neighbours!r}; choose add-remove or replace")
    if sensitive is None:
        return PrivacyUnit(kind=neighbours)
    if not isinstance(sensitive, (str, Sequence)) or isinstance(sensitive, bytes):
        raise TabreleaseError(f"the sensitive attributes are variables' names or letters (a list, or text with commas), "
                              f"not {sensitive!r}")
    names = [s.strip() for s in sensitive.split(",")] if isinstance(sensitive, str) else [str(s) for s in sensitive]
    names = [s for s in names if s]
    if not names:
        raise TabreleaseError("the sensitive-attribute unit needs the sensitive variables (--sensitive VAR,VAR)")
    if neighbours != REPLACE:
        raise TabreleaseError("the sensitive-attribute unit protects one record's sensitive attributes with n and "
                              "the other attributes public (a restriction of replace): give --neighbours replace")
    return PrivacyUnit(kind=SENSITIVE, attributes=tuple(names))


@dataclass(frozen=True, kw_only=True)
class ReleaseSpec:
    """Everything a release needs except the table: privacy, margins, mechanism, post-processing, noise, outputs.

    Parameters
    ----------
    loss : PrivacyLoss
        The loss asked for: pure epsilon or (epsilon, delta) (`loss_of`).
    unit : PrivacyUnit or str
        What the noise is calibrated to protect: "add-remove" (default), "replace", or a sensitive-attribute unit
        (`unit_of("replace", sensitive=...)`), which only the sensitive-attributes mechanism measures.
    margins : str, sequence of margins, or None
        Bracket notation ("[sex,age][age,region]" or "[AB][BC]"), or margins as tuples of axis numbers, variable
        names or letters (a list of lists: a flat list of two or more names, ["sex", "age"], is refused as
        ambiguous); None: the table's paper model.
    mechanism : str or Mechanism
        A registered mechanism's name, "auto" (the paper's choice), or a `Mechanism` object (which travels with the
        plan to a sweep's workers without being registered there). Default "planned".
    options : mapping
        The mechanism's own options (e.g. ``public_total``, ``plan_objective``, ``nonneg_t``, or those a
        third-party mechanism declares); checked against the mechanism when the release is prepared.
    calibration : {"exact", "paper"}
        Exact sensitivity, or the paper's formulas (reproduction presets; labelled as such in every output).
    estimator, rounding : str or None
        Post-processing; None: the mechanism's defaults.
    mode : {"release", "simulation"}
        Release mode draws from the secure sampler and accepts no seed; simulation is seeded numpy noise.
    seed : int or None
        The simulation's seed (None: a fresh one, recorded in the audit).
    bound_delta : float
        The audit's L1 error bounds hold with probability 1 - bound_delta.
    workbook : bool
        Also write the public margins as one Excel workbook (needs the excel extra).
    out_sep : {"comma", "semicolon", "tab", "pipe"}
        The field separator of the public CSV files (default comma).
    out_bom : bool
        Start the public CSV files with a UTF-8 byte-order mark.
    """

    loss: PrivacyLoss
    unit: PrivacyUnit | str = ADD_REMOVE
    margins: str | tuple | None = None
    mechanism: Any = DEFAULT_MECHANISM
    options: Mapping[str, Any] | tuple = ()
    calibration: str = "exact"
    estimator: str | None = None
    rounding: str | None = None
    mode: str = RELEASE
    seed: int | None = None
    bound_delta: float = 0.05
    workbook: bool = False
    out_sep: str = "comma"
    out_bom: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.loss, PrivacyLoss) or self.loss.kind not in (PURE, APPROXIMATE):
            raise TabreleaseError("a release's loss is pure epsilon or (epsilon, delta): give loss=loss_of(epsilon) "
                                  "or loss_of(epsilon, delta)")
        unit = PrivacyUnit(kind=self.unit) if isinstance(self.unit, str) else self.unit
        if not isinstance(unit, PrivacyUnit) or unit.kind not in RELEASE_UNITS:
            raise TabreleaseError(f"a release is calibrated for one of the units {', '.join(RELEASE_UNITS)}, not "
                                  f"{self.unit!r}")
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "margins", _frozen_margins(self.margins))
        if not (isinstance(self.mechanism, str) and self.mechanism) and not _is_mechanism(self.mechanism):
            raise TabreleaseError(f"a mechanism is a registered mechanism's name or a Mechanism object, not "
                                  f"{self.mechanism!r}")
        object.__setattr__(self, "options", _frozen_options(self.options))
        _check_options(self.options)
        if "sensitive" in dict(self.options):
            raise TabreleaseError("the sensitive attributes are the privacy unit's: unit=unit_of('replace', "
                                  "sensitive=...), not an option")
        _check_choice("calibration", self.calibration, CALIBRATIONS)
        if self.estimator is not None and not isinstance(self.estimator, str):
            raise TabreleaseError(f"an estimator is named by a string, not {self.estimator!r}")
        if self.rounding is not None:
            _check_choice("rounding", self.rounding, ROUNDING_CHOICES)
        _check_choice("mode", self.mode, (RELEASE, SIMULATION))
        if self.seed is not None:
            if self.mode == RELEASE:
                raise TabreleaseError("release mode draws from a secure sampler and accepts no seed; use --simulate "
                                      "(mode='simulation') for seeded, reproducible (non-secure) noise")
            if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
                raise TabreleaseError(f"a seed is a non-negative whole number, not {self.seed!r}")
        if not (_is_number(self.bound_delta) and 0 < self.bound_delta < 1):
            raise TabreleaseError(f"--bound-delta must lie strictly between 0 and 1, not {self.bound_delta!r}")
        if self.bound_delta < SMALLEST_DELTA:  # shared over up to 2^27 cells, a smaller one underflows to 0
            raise TabreleaseError(f"--bound-delta must be at least {SMALLEST_DELTA:g}, not {self.bound_delta!r}")
        if not isinstance(self.workbook, bool):
            raise TabreleaseError(f"workbook is true or false, not {self.workbook!r}")
        _check_choice("out_sep", self.out_sep, tuple(SEPARATORS))
        if not isinstance(self.out_bom, bool):
            raise TabreleaseError(f"out_bom is true or false, not {self.out_bom!r}")

    @property
    def mechanism_name(self) -> str:
        return self.mechanism if isinstance(self.mechanism, str) else self.mechanism.name

    @property
    def epsilon(self) -> float:
        return self.loss.epsilon

    @property
    def delta(self) -> float | None:
        """The delta asked for, or None for a pure loss."""
        return self.loss.delta if self.loss.kind == APPROXIMATE else None

    @property
    def neighbours(self) -> str:
        """The neighbour relation the noise is calibrated for ("replace" for the sensitive-attribute unit)."""
        return REPLACE if self.unit.kind == SENSITIVE else self.unit.kind

    @property
    def sensitive(self) -> tuple[str, ...] | None:
        """The protected attributes of a sensitive-attribute unit (names or letters, as given), else None."""
        return self.unit.attributes if self.unit.kind == SENSITIVE else None

    def option(self, name: str, default=None):
        """One mechanism option's value, or `default`.

        Parameters
        ----------
        name : str
            The option's name (e.g. "public_total").
        default : object
            What to return when the spec does not set it.

        Returns
        -------
        object
            The option's value (lists held as tuples), or `default`.
        """
        return dict(self.options).get(name, default)

    def with_epsilon(self, epsilon: float) -> ReleaseSpec:
        """The same spec at another epsilon (delta kept).

        Parameters
        ----------
        epsilon : float
            Positive and finite.

        Returns
        -------
        ReleaseSpec

        Raises
        ------
        TabreleaseError
            `epsilon` is not a positive finite number.
        """
        return replace(self, loss=loss_of(epsilon, self.delta))

    def with_changes(self, **changes) -> ReleaseSpec:
        """A copy with some fields changed (validated again).

        Parameters
        ----------
        **changes
            Fields of `ReleaseSpec` and their new values.

        Returns
        -------
        ReleaseSpec

        Raises
        ------
        TabreleaseError
            A name that is not a field, or a new value that fails the spec's checks.
        """
        unknown = sorted(set(changes) - set(self.__dataclass_fields__))
        if unknown:
            raise TabreleaseError(f"a ReleaseSpec has no field {unknown[0]!r}")
        return replace(self, **changes)

    def describe(self) -> dict:
        """The spec as plain data (what a sweep saves beside its results and a dry run prints).

        Returns
        -------
        dict
            JSON-ready: loss and unit as dicts, margins as text or lists, the mechanism's name, options as a dict, and
            every other field as it is.
        """
        return {"loss": self.loss.as_dict(), "unit": self.unit.as_dict(), "margins": _margins_data(self.margins),
                "mechanism": self.mechanism_name, "options": {k: v for k, v in self.options},
                "calibration": self.calibration, "estimator": self.estimator, "rounding": self.rounding,
                "mode": self.mode, "seed": self.seed, "bound_delta": self.bound_delta, "workbook": self.workbook,
                "out_sep": self.out_sep, "out_bom": self.out_bom}


@dataclass(frozen=True, kw_only=True)
class LedgerAccount:
    """Where and how a release is charged.

    Parameters
    ----------
    ledger : path
        The privacy ledger (made with `tabrelease ledger init`).
    dataset : str or None
        The dataset whose budget the release spends (default: the table's name).
    allow_unbudgeted : bool
        Let a ledger that holds budgets record a release of a dataset that has none.
    allow_alias : bool
        Let the ledger charge a table already released under another dataset id to this one.
    """

    ledger: Path | str
    dataset: str | None = None
    allow_unbudgeted: bool = False
    allow_alias: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.ledger, (str, os.PathLike)):
            raise TabreleaseError(f"a ledger is named by its path, not {self.ledger!r}")
        object.__setattr__(self, "ledger", Path(self.ledger))
        if self.dataset is not None and (not isinstance(self.dataset, str) or not self.dataset.strip()):
            raise TabreleaseError(f"a dataset id is a non-empty string, not {self.dataset!r}")


# --- the settings a person gives, once --------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """One setting of a release, as the command line, a batch file and a sweep all take it.

    `name` is the batch key and, with dashes, the command-line flag; `parse` turns text or a TOML value into the
    value; `flag` means a switch (true when given); `option` means a mechanism option (it goes into
    `ReleaseSpec.options`)."""

    name: str
    help: str
    parse: Callable[[Any], Any] | None = None
    choices: tuple[str, ...] | None = None
    default: Any = None
    flag: bool = False
    option: bool = False
    metavar: str | None = None

    @property
    def cli(self) -> str:
        return "--" + self.name.replace("_", "-")


def _is_mechanism(value) -> bool:
    """A Mechanism object (told by its protocol, as this module sits below the mechanisms)."""
    return isinstance(getattr(value, "name", None), str) and callable(getattr(value, "plan", None)) and callable(
        getattr(value, "measure", None))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _positive_number(name: str, value) -> float:
    if isinstance(value, str):
        try:
            value = decimal_number(value)
        except ValueError:
            raise TabreleaseError(f"{name} {value!r} is not a number") from None
    if not (_is_number(value) and value > 0):
        raise TabreleaseError(f"{name} must be a positive finite number, not {value!r}")
    return float(value)


def positive_number(value) -> float:
    """A positive finite number, from a number or text.

    Parameters
    ----------
    value : int, float or str

    Returns
    -------
    float

    Raises
    ------
    TabreleaseError
        Not a number, or not positive and finite.
    """
    return _positive_number("the value", value)


def fraction(value) -> float:
    """A number strictly between 0 and 1, from a number or text.

    Parameters
    ----------
    value : int, float or str

    Returns
    -------
    float

    Raises
    ------
    TabreleaseError
        Not a number, or not in (0, 1).
    """
    if isinstance(value, str):
        try:
            value = decimal_number(value)
        except ValueError:
            raise TabreleaseError(f"{value!r} is not a number") from None
    if not (_is_number(value) and 0 < value < 1):
        raise TabreleaseError(f"{value!r} must lie strictly between 0 and 1")
    return float(value)


def whole_number(value) -> int:
    """A non-negative whole number, from a number or text.

    Parameters
    ----------
    value : int or str
        A float is refused, even a whole one.

    Returns
    -------
    int

    Raises
    ------
    TabreleaseError
        Not a whole number, or negative.
    """
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise TabreleaseError(f"{value!r} is not a whole number") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TabreleaseError(f"{value!r} must be a non-negative whole number")
    return value


def name_list(value) -> tuple[str, ...]:
    """Names, from comma-separated text or a list.

    Parameters
    ----------
    value : str, list or tuple
        Comma-separated text, or a list or tuple of items (each turned into text).

    Returns
    -------
    tuple of str
        Stripped, empty names dropped; at least one.

    Raises
    ------
    TabreleaseError
        Neither text nor a list, or no name.
    """
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise TabreleaseError(f"give names as a comma-separated text or a list, not {value!r}")
    names = tuple(str(p).strip() for p in items if str(p).strip())
    if not names:
        raise TabreleaseError("give at least one name")
    return names


def separator_name(value) -> str:
    """A CSV field separator's name (`SEPARATORS`) from its name or the character itself.

    Parameters
    ----------
    value : str
        "comma", "semicolon", "tab", "pipe", or one of ``, ; | `` and a tab (also typed as the two characters
        ``\\t``, as a shell passes ``'\\t'``).

    Returns
    -------
    str
        The name; any other text is returned as it is, for the choice check to refuse in words.

    Raises
    ------
    TabreleaseError
        Not text.
    """
    value = _text(value)
    by_character = {character: name for name, character in SEPARATORS.items()}
    by_character["\\t"] = "tab"
    return by_character.get(value, value.strip().lower() if value.strip() else value)


def _text(value) -> str:
    if not isinstance(value, str):
        raise TabreleaseError(f"{value!r} is not text")
    return value


def _missing_label(value) -> str:
    """The level a missing value is read as: text, stripped as every field is, not empty (empty is what is missing)."""
    label = _text(value).strip()
    if not label:
        raise TabreleaseError("the missing level is a label that is not empty (e.g. --missing-level unknown)")
    return label


# Every setting of a release, in the order `--help` shows them. `epsilon` is required by `release` and `batch`; a
# sweep takes a list of epsilons (and of mechanisms and calibrations) in their place.
SETTINGS: tuple[Setting, ...] = (
    Setting("epsilon", "privacy loss epsilon (> 0)", positive_number, metavar="EPSILON"),
    Setting("delta", "delta in (0, 1): (epsilon, delta)-DP: Gaussian noise (gaussian, planned), or the copula's "
            "advanced composition (gaussian-copula, copula-id)", fraction),
    Setting("neighbours", "neighbouring data sets differ by one added/removed record (default) or one changed record",
            _text, choices=(ADD_REMOVE, REPLACE), default=ADD_REMOVE),
    Setting("sensitive", "the sensitive-attribute unit (sensitive-attributes mechanism, with --neighbours replace): "
            "the protected variables (names, letters, or names for people)", name_list, metavar="VAR,VAR"),
    Setting("margins", "margins to release, e.g. '[AB][BC]' or all-2-way (every two-way margin); default: the "
            "table's paper model", _text),
    Setting("mechanism", "planned (default: noise planned per block, least squares, controlled rounding), auto (the "
            "paper's: Fourier for all-binary tables, Efron-Stein otherwise), or another registered mechanism",
            _text, default=DEFAULT_MECHANISM),
    Setting("public_total", "treat the total n as public (an invariant): released exactly, not noised (planned only)",
            flag=True, option=True),
    Setting("plan_objective", "what the planned mechanism minimises: the total expected squared error of the released "
            "margins (default) or the largest variance of a released cell", _text, choices=PLAN_OBJECTIVES,
            option=True),
    Setting("plan_candidates", "which margins the planned mechanism may measure: every set's, the full table and "
            "margins above the released ones included, where the fit is over the cells (all, default), or only the "
            "released margins' sets and their residuals (closure, as ResidualPlanner)", _text,
            choices=PLAN_CANDIDATES, option=True),
    Setting("nonneg_t", "t of the nonneg mechanism: the implied table is non-negative w.p. 1 - exp(-t) (default 5)",
            positive_number, option=True),
    Setting("calibration", "exact sensitivity (default) or the paper's formulas, for reproduction only", _text,
            choices=CALIBRATIONS, default="exact"),
    Setting("estimator", "least-squares (GLS over non-negative tables with the total pinned; default of planned), "
            "local-least-squares (the same over the released margins themselves, for tables past the cell limit), "
            "linf-lp (the paper's LP; default of the paper's mechanisms), as-measured, shifted-synthesis, "
            "copula-synthesis (the copula mechanisms'), relaxed-projection (rap's), "
            "randomized-response-least-squares (randomized response's)", _text),
    Setting("rounding", "controlled (an integer table whose margins are as close as possible to the estimate's; "
            "default of planned), nearest (each cell, the paper's step 6; default of the paper's mechanisms), none",
            _text, choices=ROUNDING_CHOICES),
    Setting("simulate", "seeded, reproducible numpy noise instead of the secure sampler (not for publication)",
            flag=True),
    Setting("seed", "seed of the simulation noise (only with --simulate)", whole_number),
    Setting("bound_delta", "the audit's L1 error bounds hold with probability 1 - this (default 0.05)", fraction,
            default=0.05),
    Setting("xlsx", "also write the public margins as one Excel workbook, public/margins.xlsx (a sheet describing the "
            "release, a notes sheet with the guarantee and each margin's margin of error, a cross-tab per margin); "
            "needs tabrelease[excel]", flag=True),
    # Excel in a French or German locale splits CSV files at semicolons, and reads a file without a byte-order
    # mark in the system's code page: these two make the public files open as columns of the right characters.
    Setting("out_sep", "the field separator of the public CSV files: comma (default), semicolon, tab or pipe (by "
            "name, or the character itself)", separator_name, choices=tuple(SEPARATORS),
            default="comma", metavar="SEP"),
    Setting("out_bom", "start the public CSV files with a UTF-8 byte-order mark (Excel then reads them as UTF-8)",
            flag=True),
)
SETTING_NAMES = tuple(s.name for s in SETTINGS)


@dataclass(frozen=True, kw_only=True)
class TableSource:
    """Where a table comes from and how to read it (the command line's table arguments, a batch file's dataset).

    Parameters
    ----------
    source : str
        A built-in table's name, or a CSV, Parquet or .xlsx file: long format (a count column) or, with
        `microdata`, one row per person.
    microdata : bool
        One row per person: counted straight into the margins a release needs.
    variables : tuple of str or None
        With `microdata`: the columns to tabulate (default: all).
    levels, metadata : path or None
        A JSON file declaring each variable's levels in order; or declaring the variables, their levels and labels.
    count_column : str
        The count column of a long table.
    sparse : bool
        A long table may omit zero cells.
    sep, encoding, decimal, thousands, sheet
        How the file is written (`INPUT_SETTINGS` says each one).
    missing_level : str or None
        The level an empty field (or a Parquet null) is read as; None: a missing value is refused.
    engine, scheduler : str or None
        With `microdata`: who counts the file ("arrow", streaming, by default; "pandas"; "dask"; "spark") and the
        Dask scheduler's address or the Spark master URL.
    """

    source: str
    microdata: bool = False
    variables: tuple[str, ...] | None = None
    levels: Path | str | None = None
    metadata: Path | str | None = None
    count_column: str = "count"
    sparse: bool = False
    sep: str | None = None
    encoding: str = "utf-8"
    decimal: str | None = None
    thousands: str | None = None
    sheet: str | None = None
    missing_level: str | None = None
    engine: str | None = None
    scheduler: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source:
            raise TabreleaseError(f"a table's source is a built-in name or a file's path, not {self.source!r}")
        if self.sep is not None:
            _check_choice("separator", self.sep, tuple(SEPARATORS))
        if self.engine is not None:
            _check_choice("engine", self.engine, ENGINE_NAMES)
        if self.variables is not None:
            object.__setattr__(self, "variables", name_list(self.variables))


# The counting engines of microdata (`tables.aggregation.ENGINES`, written out: --help imports no numpy).
ENGINE_NAMES = ("arrow", "pandas", "dask", "spark")

# How a table is read: the command line's table arguments and a batch dataset's keys (besides file/builtin).
INPUT_SETTINGS: tuple[Setting, ...] = (
    Setting("count_column", "name of the count column in a CSV (default: count)", _text, default="count"),
    Setting("sparse", "a CSV may omit zero cells (by default every cell must be listed)", flag=True),
    Setting("microdata", "the file has one row per person (no count column); it is counted straight into the margins "
            "a release needs", flag=True),
    Setting("variables", "with --microdata: the columns to tabulate (default: all)", name_list, metavar="V1,V2,..."),
    Setting("levels", 'a JSON file declaring each variable\'s levels in order, {"sex": ["f", "m"], ...}: needed in '
            "release mode for --microdata and a --sparse table, whose data need not show every level", _text,
            metavar="FILE"),
    Setting("metadata", "a JSON file declaring the variables in order, each one's levels in order and optional label "
            "and level_labels (the shape of tables/*.json)", _text, metavar="FILE"),
    Setting("sheet", "the sheet of an .xlsx workbook (default: the first); needs the excel extra (openpyxl)", _text),
    Setting("sep", "the CSV field separator (default: detected from the header among , ; tab |)", _text,
            choices=tuple(SEPARATORS)),
    Setting("encoding", "the CSV text encoding (default utf-8, with or without a BOM; e.g. latin-1, cp1252)", _text,
            default="utf-8"),
    Setting("decimal", "the decimal mark of the count column (default . or, with --thousands ., a comma); counts must "
            "still be whole numbers", _text),
    Setting("thousands", "the thousands mark of the count column, e.g. . or ' (default none)", _text),
    Setting("missing_level", "the level an empty field (or a Parquet null) is read as, LABEL, in every variable "
            "read; by default a missing value is refused (in release mode, declare LABEL among the levels)",
            _missing_label, metavar="LABEL"),
    Setting("engine", "with --microdata: who counts the file: arrow (default: streams Parquet or CSV, memory flat in "
            "the rows), pandas (reads it whole; .xlsx), dask (on a Dask cluster), spark (on Spark; the spark extra)",
            _text, choices=ENGINE_NAMES),
    Setting("scheduler", "with --engine dask: the scheduler's address (default: a local cluster of 2 workers); with "
            "--engine spark: the master URL (default: local[2])", _text, metavar="ADDRESS"),
)
INPUT_SETTING_NAMES = tuple(s.name for s in INPUT_SETTINGS)


def source_from_settings(source: str, settings: Mapping[str, Any]) -> TableSource:
    """A `TableSource` from input settings (the command line's, or a batch dataset's), each checked.

    Parameters
    ----------
    source : str
        A built-in table's name or a file's path.
    settings : mapping
        Names of `INPUT_SETTINGS` to values; None or missing: the default.

    Returns
    -------
    TableSource
    """
    by_name = {s.name: s for s in INPUT_SETTINGS}
    unknown = sorted(set(settings) - set(by_name))
    if unknown:
        raise TabreleaseError(f"unknown input setting {unknown[0]!r}; they are {', '.join(INPUT_SETTING_NAMES)}")
    values = {}
    for name, value in settings.items():
        chosen = by_name[name]
        if value is None:
            continue
        if chosen.flag:
            if not isinstance(value, bool):
                raise TabreleaseError(f"{name} is true or false, not {value!r}")
        else:
            value = chosen.parse(value)
            if chosen.choices is not None:
                _check_choice(name, value, chosen.choices)
        values[name] = value
    return TableSource(source=source, **values)
_BY_NAME = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The release setting of this name (one of `SETTING_NAMES`).

    Parameters
    ----------
    name : str

    Returns
    -------
    Setting

    Raises
    ------
    TabreleaseError
        Not a setting's name.
    """
    if name not in _BY_NAME:
        raise TabreleaseError(f"unknown setting {name!r}; the settings are {', '.join(SETTING_NAMES)}")
    return _BY_NAME[name]


def parse_setting(name: str, value):
    """A setting's value from text or a TOML value, checked (a choice among its choices).

    Parameters
    ----------
    name : str
        One of `SETTING_NAMES`.
    value : object
        Text, or a TOML value; a switch (`Setting.flag`) takes a bool.

    Returns
    -------
    object
        The parsed value; None for a None value (except a switch, which must be a bool).

    Raises
    ------
    TabreleaseError
        The value does not parse, or is not among the setting's choices.
        Or not a setting's name.
    """
    chosen = setting(name)
    if chosen.flag:
        if not isinstance(value, bool):
            raise TabreleaseError(f"{name} is true or false, not {value!r}")
        return value
    if value is None:
        return None
    value = chosen.parse(value) if chosen.parse is not None else value
    if chosen.choices is not None:
        _check_choice(name, value, chosen.choices)
    return value


def spec_from_settings(settings: Mapping[str, Any], *, epsilon: float | None = None) -> ReleaseSpec:
    """The one place settings (the command line's, or a batch release's keys) become a `ReleaseSpec`.

    Parameters
    ----------
    settings : mapping
        Setting names (`SETTING_NAMES`) to values; a missing or None value takes the setting's default. Unknown
        names are refused.
    epsilon : float or None
        Overrides ``settings["epsilon"]`` (a sweep gives each grid point's).

    Returns
    -------
    ReleaseSpec
    """
    unknown = sorted(set(settings) - set(SETTING_NAMES))
    if unknown:
        raise TabreleaseError(f"unknown setting {unknown[0]!r}; the settings are {', '.join(SETTING_NAMES)}")
    values = {s.name: s.default for s in SETTINGS}
    for name, value in settings.items():
        parsed = parse_setting(name, value)
        values[name] = _BY_NAME[name].default if parsed is None else parsed
    eps = epsilon if epsilon is not None else values["epsilon"]
    if eps is None:
        raise TabreleaseError("give epsilon, the privacy loss")
    simulate = bool(values["simulate"])
    if values["seed"] is not None and not simulate:
        raise TabreleaseError("release mode draws from a secure sampler and accepts no seed; add --simulate for "
                              "seeded, reproducible (non-secure) noise")
    options = {s.name: values[s.name] for s in SETTINGS if s.option and values[s.name] not in (None, False)}
    return ReleaseSpec(
        loss=loss_of(eps, values["delta"]), unit=unit_of(values["neighbours"], values["sensitive"]),
        margins=values["margins"], mechanism=values["mechanism"], options=options,
        calibration=values["calibration"], estimator=values["estimator"], rounding=values["rounding"],
        mode=SIMULATION if simulate else RELEASE, seed=values["seed"], bound_delta=values["bound_delta"],
        workbook=bool(values["xlsx"]), out_sep=values["out_sep"], out_bom=bool(values["out_bom"]),
    )


def _check_choice(name: str, value, choices) -> None:
    if value not in choices:
        raise TabreleaseError(f"unknown {name.replace('_', ' ')} {value!r}; choose one of {', '.join(choices)}")


def _frozen_options(options) -> tuple[tuple[str, Any], ...]:
    items = options.items() if isinstance(options, Mapping) else options
    try:
        pairs = tuple(sorted((str(k), _hashable(v)) for k, v in items))
    except (TypeError, ValueError):
        raise TabreleaseError(f"a mechanism's options are a mapping of names to values, not {options!r}") from None
    return pairs


def _check_options(options) -> None:
    """Refuse a value the command line could not have given to one of the settings that are mechanism options
    (`SETTINGS`): a switch takes True or False only (the string "no" had been taken as true, and a release
    published the exact total, a new user's trial), a choice one of its choices."""
    settings = {s.name: s for s in SETTINGS if s.option}
    for key, value in options:
        setting = settings.get(key)
        if setting is None:  # a mechanism's own option (rap's rounds, ...): its plan checks it
            continue
        if setting.flag:
            if not isinstance(value, bool):
                raise TabreleaseError(f"the option {key} is a switch: True or False, not {value!r}")
            continue
        # A number is left to the mechanism, which may take more than the flag does (nonneg's t = 0: no lift).
        if setting.choices and value not in setting.choices:
            raise TabreleaseError(f"the option {key} is one of {', '.join(setting.choices)}, not {value!r}")


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    hash(value)
    return value


_COUNT_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _count_word(n: int) -> str:
    return _COUNT_WORDS[n] if n < len(_COUNT_WORDS) else str(n)


def refuse_ambiguous_margins(margins) -> None:
    """Refuse a flat list of two or more variable names as margins: it reads as one margin of those variables, or as
    one one-way margin per variable, and the two releases differ.

    A list of lists (or tuples), a list mixing names and lists, a single name in a list, bracket notation and axis
    numbers are not ambiguous and pass.

    Parameters
    ----------
    margins : object
        The margins as given (`ReleaseSpec.margins` before it is frozen).

    Raises
    ------
    TabreleaseError
        One line naming both readings, asking for a list of lists.
    """
    if (isinstance(margins, Sequence) and not isinstance(margins, (str, bytes)) and len(margins) >= 2
            and all(isinstance(g, str) for g in margins)):
        names = list(margins)
        k = len(names)
        raise TabreleaseError(
            f"margins={names!r} is ambiguous: one {_count_word(k)}-way margin {[names]!r} or {_count_word(k)} one-way "
            f"margins {[[n] for n in names]!r}? give a list of lists")


def _frozen_margins(margins):
    if margins is None or isinstance(margins, str):
        return margins
    if not isinstance(margins, Sequence):
        raise TabreleaseError(f"give the margins as a list, e.g. [('sex', 'age'), (1, 2)], or in bracket notation, "
                              f"not {margins!r}")
    refuse_ambiguous_margins(margins)
    out = []
    for g in margins:
        items = (g,) if isinstance(g, str) else g
        if not isinstance(items, Sequence) or isinstance(items, bytes):
            raise TabreleaseError(f"a margin is a tuple of axis numbers or variable names, not {g!r}")
        for item in items:
            if not (isinstance(item, str) or (hasattr(item, "__index__") and not isinstance(item, bool))):
                raise TabreleaseError(f"a margin is a tuple of axis numbers or variable names, not {g!r}")
        out.append(tuple(item if isinstance(item, str) else int(item) for item in items))
    return tuple(out)


def _margins_data(margins):
    return margins if margins is None or isinstance(margins, str) else [list(g) for g in margins]


__all__ = ["DEFAULT_MECHANISM", "LedgerAccount", "RELEASE", "ReleaseSpec", "SETTINGS", "SETTING_NAMES",
           "SIMULATION", "Setting", "TableSource", "loss_of", "refuse_ambiguous_margins", "source_from_settings",
           "spec_from_settings", "unit_of"]
