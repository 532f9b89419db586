"""A season's releases from one reviewed file: `tabrelease batch SPEC.toml` (tau-Argus users run batch files).

The spec names the ledger, the datasets (their files, declared levels and budgets) and the releases in order::

    ledger = "ledger.json"                 # must exist (`tabrelease ledger init`); paths are relative to the spec's folder

    [datasets.households]
    file = "households.csv"                # or builtin = "rochdale"
    microdata = true                       # one row per person (then `variables`)
    variables = ["wife_active", "asian"]
    levels = "levels.json"                 # or metadata = "meta.json"; sep, encoding, decimal, thousands, sheet,
                                           # count_column, sparse: as on the command line
    budget = 2.0                           # total epsilon of the dataset (optional; budget_delta, budget_neighbours,
                                           # budget_attributes, budget_rho too: as `tabrelease ledger --set-budget`)

    [[releases]]
    dataset = "households"
    margins = "[wife_active,asian]"
    epsilon = 0.5
    out = "spring/households-1"
    # every setting of `tabrelease release` by its flag's name (mechanism, delta, neighbours, sensitive,
    # public_total, plan_objective, nonneg_t, calibration, estimator, rounding, simulate, seed, bound_delta, xlsx,
    # out_sep, out_bom),
    # and allow_alias, allow_unbudgeted; release mode unless simulate = true

Everything is checked before anything happens (`read_spec`). `dry_run` reads the data, plans every release and
charges a throw-away copy of the ledger with the ledger's own rule, so it predicts exactly which release a budget
would refuse, and changes nothing. `run_batch` does the same first, and refuses the batch whole where a release
would be refused; then it publishes the releases in order through `publish_release`, and stops at a refusal the
copy could not foresee (another process charging the ledger meanwhile), saying what was made, what was refused and
what was not attempted; it stops too at a release that fails after its charge (a signal, a full disk), which it
reports as such, never as a refusal.

A batch never makes a ledger (a mistyped path would start every dataset's spending from zero) and never changes a
budget the ledger already holds unless told to (`set_budgets`, `--set-budgets`): a spec that would is refused whole,
listing every change; the dry run shows every budget it would set or change.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import BudgetRefused, ChargedReleaseFailed, ReleaseInterrupted, TabreleaseError

from .spec import INPUT_SETTING_NAMES, SETTING_NAMES, LedgerAccount, ReleaseSpec, TableSource

BUDGET_KEYS = ("budget", "budget_delta", "budget_neighbours", "budget_attributes", "budget_rho")
DATASET_KEYS = {"file", "builtin", *INPUT_SETTING_NAMES, *BUDGET_KEYS}
RELEASE_KEYS = {"dataset", "out", "allow_alias", "allow_unbudgeted", *SETTING_NAMES}


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    source: TableSource
    budget: float | None = None
    budget_delta: float | None = None
    budget_neighbours: str = "add-remove"
    budget_attributes: tuple[str, ...] = ()
    budget_rho: float | None = None

    @property
    def has_budget(self) -> bool:
        return self.budget is not None or self.budget_rho is not None

    def budget_record(self) -> dict:
        """The budget as the ledger records it (its unit and loss).

        Returns
        -------
        dict
            As `ledger.budget_record` makes it.

        Raises
        ------
        TabreleaseError
            The budget's terms are invalid (no epsilon or rho, a delta out of range, an unknown unit).
        """
        from .ledger import budget_record

        return budget_record(self.budget, self.budget_delta, self.budget_neighbours,
                             attributes=self.budget_attributes, rho=self.budget_rho)


@dataclass(frozen=True)
class BatchRelease:
    """One release of a batch file: its dataset, where it is written, how it is charged, and what it is."""

    number: int  # 1-based, in the spec's order
    dataset: str
    out: Path
    spec: ReleaseSpec
    allow_alias: bool = False
    allow_unbudgeted: bool = False

    def where(self) -> str:
        """How messages name this release.

        Returns
        -------
        str
            "release N (dataset 'NAME')".
        """
        return f"release {self.number} (dataset {self.dataset!r})"

    def account(self, ledger: Path) -> LedgerAccount:
        """How this release is charged to `ledger`: its dataset, and what it allows (aliases, no budget).

        Parameters
        ----------
        ledger : Path
            The ledger (the spec's, or a dry run's throw-away copy).

        Returns
        -------
        LedgerAccount
        """
        return LedgerAccount(ledger=ledger, dataset=self.dataset, allow_alias=self.allow_alias,
                             allow_unbudgeted=self.allow_unbudgeted)


@dataclass(frozen=True)
class BatchSpec:
    path: Path
    ledger: Path
    datasets: dict[str, DatasetSpec]
    releases: tuple[BatchRelease, ...]


# A release charged to the ledger that then failed (a signal, a full disk): the charge stands, nothing was published.
FAILED_AFTER_CHARGE = "failed after its charge"


@dataclass(frozen=True)
class Step:
    """What happened, or would happen, to one release of the spec."""

    number: int
    dataset: str
    out: str
    mechanism: str
    epsilon: float
    margins: tuple[str, ...] = ()
    expected_l1: dict[str, float] = field(default_factory=dict)  # the plan's, per margin, where it has one
    mode: str = "release"  # "release" (secure noise, publishable) or "simulation" (seeded: not for publication)
    epsilon_spent_after: float | None = None  # the dataset's, after this release (None under a rho budget)
    epsilon_budget: float | None = None
    rho_spent_after: float | None = None  # under a zCDP budget: the rho spent after this release, and the budget
    rho_budget: float | None = None
    # made | would be made | refused | would be refused | failed after its charge | not attempted
    status: str = "made"
    reason: str | None = None
    exit_status: int | None = None  # a refusal's: that of its type (errors.py), what the command exits with
    # The guarantee the release has (or would have), in words: `epsilon` is the setting asked for, which a public
    # total turns into twice it for replace neighbours.
    guarantee: str = ""
    # A made release's warnings, as `release` prints them and release.json holds them (none before it is made).
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """The step as plain data (for JSON): every field, the release's number as `release`.

        Returns
        -------
        dict
        """
        return {"release": self.number, "dataset": self.dataset, "out": self.out, "mechanism": self.mechanism,
                "epsilon": self.epsilon, "mode": self.mode, "margins": list(self.margins),
                "expected_l1": dict(self.expected_l1),
                "epsilon_spent_after": self.epsilon_spent_after, "epsilon_budget": self.epsilon_budget,
                "rho_spent_after": self.rho_spent_after, "rho_budget": self.rho_budget,
                "status": self.status, "reason": self.reason, "exit_status": self.exit_status,
                "guarantee": self.guarantee, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class BatchResult:
    spec: Path
    dry_run: bool
    steps: tuple[Step, ...]
    budget_changes: tuple[str, ...] = ()  # every budget the run sets or changes, in words
    # A signal stopped the run (the releases made before it, and the one it came in, stand): the status it exits
    # with then, 130 or 128 + N for signal N; None where none did.
    interrupted_status: int | None = None

    @property
    def interrupted(self) -> bool:
        return self.interrupted_status is not None

    @property
    def stopped(self) -> bool:
        return any(s.status in ("refused", "would be refused", FAILED_AFTER_CHARGE) for s in self.steps)

    @property
    def charged_failure(self) -> Step | None:
        """The release that was charged and then failed (the run stopped there), or None."""
        return next((s for s in self.steps if s.status == FAILED_AFTER_CHARGE), None)

    def as_dict(self) -> dict:
        """The result as plain data (for JSON).

        Returns
        -------
        dict
            `spec` (its path), `dry_run`, `stopped_at_refusal`, `interrupted`, `budget_changes` and `releases`
            (each step's `Step.as_dict`).
        """
        return {"spec": str(self.spec), "dry_run": self.dry_run, "stopped_at_refusal": self.stopped,
                "interrupted": self.interrupted, "budget_changes": list(self.budget_changes),
                "releases": [s.as_dict() for s in self.steps]}


# --- reading and checking the spec ----------------------------------------------------------------------------
def read_spec(path: str | Path) -> BatchSpec:
    """The spec, checked whole: one line naming the entry that is wrong; nothing read but the spec itself.

    Parameters
    ----------
    path : path
        The batch file (TOML); the paths it gives are relative to its folder.

    Returns
    -------
    BatchSpec
        With absolute paths (ledger, files, outs).

    Raises
    ------
    TabreleaseError
        The file is missing, unreadable or not TOML; a key or setting is unknown, missing or invalid; a file it
        names does not exist; two releases write to one folder, a release's folder exists, or its parent does not.
    """
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # Notepad writes a BOM
    except FileNotFoundError:
        raise TabreleaseError(f"no batch spec {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TabreleaseError(f"cannot read the batch spec {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TabreleaseError(f"the batch spec {path} is not valid TOML ({exc})") from None
    base = path.resolve().parent
    unknown = sorted(set(raw) - {"ledger", "datasets", "releases"})
    if unknown:
        raise TabreleaseError(f"the batch spec has an unknown key {unknown[0]!r} (keys: ledger, datasets, releases)")
    if not isinstance(raw.get("ledger"), str):
        raise TabreleaseError('the batch spec names no ledger (ledger = "ledger.json"): every batch release is recorded')
    datasets_raw = raw.get("datasets")
    if not isinstance(datasets_raw, dict) or not datasets_raw:
        raise TabreleaseError("the batch spec declares no datasets ([datasets.NAME] tables)")
    datasets = {name: _dataset(name, entry, base) for name, entry in datasets_raw.items()}
    releases_raw = raw.get("releases")
    if not isinstance(releases_raw, list) or not releases_raw:
        raise TabreleaseError("the batch spec lists no releases ([[releases]] tables)")
    releases = tuple(_release(i, entry, base, datasets) for i, entry in enumerate(releases_raw, start=1))
    outs: dict[Path, int] = {}
    for r in releases:
        if r.out in outs:
            raise TabreleaseError(f"{r.where()} writes to {r.out}, as release {outs[r.out]} does")
        outs[r.out] = r.number
        if r.out.exists():
            raise TabreleaseError(f"{r.where()}: {r.out} already exists; a batch never replaces a release")
        if not r.out.parent.is_dir():
            raise TabreleaseError(f"{r.where()}: the folder {r.out.parent} does not exist")
    # Made absolute, links not followed: the ledger's own checks read the path as named (a link put in the
    # ledger's place is refused there; resolved here, a batch had charged the older copy it pointed to).
    return BatchSpec(path, Path(os.path.abspath(base / raw["ledger"])), datasets, releases)


def _dataset(name: str, entry: Any, base: Path) -> DatasetSpec:
    where = f"dataset {name!r}"
    if not isinstance(entry, dict):
        raise TabreleaseError(f"{where} is not a table of settings")
    unknown = sorted(set(entry) - DATASET_KEYS)
    if unknown:
        raise TabreleaseError(f"{where} has an unknown setting {unknown[0]!r} (settings: {', '.join(sorted(DATASET_KEYS))})")
    if ("file" in entry) == ("builtin" in entry):
        raise TabreleaseError(f"{where} needs exactly one of file = ... or builtin = ...")
    if "builtin" in entry:
        from .tables import BUILTIN_TABLES

        if entry["builtin"] not in BUILTIN_TABLES:
            raise TabreleaseError(f"{where}: no built-in table {entry['builtin']!r} ({', '.join(BUILTIN_TABLES)})")
        source = entry["builtin"]
    else:
        source = str(_existing(base, entry["file"], f"{where}: its file"))
    from .spec import source_from_settings

    try:
        table_source = source_from_settings(source, {k: v for k, v in entry.items() if k in INPUT_SETTING_NAMES})
    except TabreleaseError as exc:
        raise TabreleaseError(f"{where}: {exc}") from None
    for key in ("levels", "metadata"):
        if getattr(table_source, key) is not None:
            table_source = replace(table_source, **{key: _existing(base, entry[key], f"{where}: its {key} file")})
    budget = _number(entry.get("budget"), f"{where}: budget", positive=True)
    attributes = entry.get("budget_attributes", [])
    if not isinstance(attributes, list) or not all(isinstance(a, str) for a in attributes):
        raise TabreleaseError(f"{where}: budget_attributes is a list of variable names")
    dataset = DatasetSpec(
        name=name, source=table_source, budget=budget, budget_delta=_number(entry.get("budget_delta"), f"{where}: budget_delta"),
        budget_neighbours=str(entry.get("budget_neighbours", "add-remove")), budget_attributes=tuple(attributes),
        budget_rho=_number(entry.get("budget_rho"), f"{where}: budget_rho", positive=True))
    if dataset.has_budget:
        try:
            dataset.budget_record()
        except TabreleaseError as exc:
            raise TabreleaseError(f"{where}: {exc}") from None
    return dataset


def _release(number: int, entry: Any, base: Path, datasets: dict[str, DatasetSpec]) -> BatchRelease:
    from .spec import spec_from_settings

    where = f"release {number}"
    if not isinstance(entry, dict):
        raise TabreleaseError(f"{where} is not a table of settings")
    unknown = sorted(set(entry) - RELEASE_KEYS)
    if unknown:
        raise TabreleaseError(f"{where} has an unknown setting {unknown[0]!r} (settings: {', '.join(sorted(RELEASE_KEYS))})")
    for key in ("dataset", "epsilon", "out"):
        if key not in entry:
            raise TabreleaseError(f"{where} has no {key}")
    if entry["dataset"] not in datasets:
        raise TabreleaseError(f"{where} names the dataset {entry['dataset']!r}, which the spec does not declare")
    where = f"{where} (dataset {entry['dataset']!r})"
    flags = {}
    for key in ("allow_alias", "allow_unbudgeted"):
        if not isinstance(entry.get(key, False), bool):
            raise TabreleaseError(f"{where}: {key} is true or false")
        flags[key] = entry.get(key, False)
    try:
        spec = spec_from_settings({k: v for k, v in entry.items() if k in SETTING_NAMES})
    except TabreleaseError as exc:
        raise TabreleaseError(f"{where}: {exc}") from None
    return BatchRelease(number, entry["dataset"], (base / str(entry["out"])).resolve(), spec, **flags)


def _existing(base: Path, name: Any, what: str) -> Path:
    path = (base / str(name)).resolve()
    if not path.is_file():
        raise TabreleaseError(f"{what} {name} does not exist")
    return path


def _number(value: Any, what: str, positive: bool = False) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or (positive and value <= 0):
        raise TabreleaseError(f"{what} must be a {'positive ' if positive else ''}number, not {value!r}")
    return float(value)


# --- planning and running -------------------------------------------------------------------------------------
def _prepared(spec: BatchSpec) -> tuple[BatchSpec, list[tuple[BatchRelease, Any, Any, list, dict]]]:
    """Every release's table and plan, through `prepare_release` (the very checks `publish_release` makes before its
    charge), before anything is charged: a release that would be refused stops the batch before its first release,
    naming it. With them, the spec whose budgets name their attributes by the datasets' variables
    (`_budgets_by_variable`)."""
    from .tables import margin_title, people_names
    from .workflow import prepare_release, read_source

    tables = {}
    for name, dataset in spec.datasets.items():
        try:
            tables[name] = read_source(dataset.source)
        except TabreleaseError as exc:
            raise TabreleaseError(f"dataset {name!r}: {exc}") from None
    spec = _budgets_by_variable(spec, tables)
    prepared = []
    for r in spec.releases:
        table = tables[r.dataset]
        try:
            plan = prepare_release(table, r.spec, out=r.out).plan
        except TabreleaseError as exc:
            raise TabreleaseError(f"{r.where()}: {exc}") from None
        expected = plan.implementation.expected_errors(plan) or {}
        # Shown by the variables' names for people: letters depend on the variables a dataset was read with.
        names, _ = people_names(table)
        labels = [margin_title(names, g) for g in plan.margins]
        prepared.append((r, table, plan, labels, {margin_title(names, g): e.expected_l1 for g, e in expected.items()}))
    return spec, prepared


def _budgets_by_variable(spec: BatchSpec, tables: dict) -> BatchSpec:
    """The spec with each dataset's budget_attributes named by its table's variables, as a release's --sensitive is
    (`workflow.variables_named`: a name, a name for people, or a letter): a release's guarantee names the variables,
    and a budget for the word as written would cover no release of it. A word that names no variable, or two, is
    refused before anything is done."""
    from .workflow import variables_named

    datasets = {}
    for name, dataset in spec.datasets.items():
        if dataset.budget_attributes:
            attributes = variables_named(dataset.budget_attributes, tables[name],
                                         f"dataset {name!r}: budget_attributes", known=True)
            dataset = replace(dataset, budget_attributes=attributes)
        datasets[name] = dataset
    return replace(spec, datasets=datasets)


def budget_changes(ledger: Path, spec: BatchSpec) -> tuple[list[tuple[DatasetSpec, dict]], list[str], list[str]]:
    """The budgets the spec would set: (dataset and budget to set, every one in words, those that change a budget
    the ledger already holds, in words).

    Parameters
    ----------
    ledger : Path
        The ledger read (not changed).
    spec : BatchSpec

    Returns
    -------
    tuple of (list of (DatasetSpec, dict), list of str, list of str)
        The datasets whose budget is to be set, with the budget record; every budget set or changed, in words; the
        changes to a budget the ledger holds, in words. A budget equal to the one held is left out of all three.

    Raises
    ------
    TabreleaseError
        No ledger or key, or a dataset's budget is invalid.
    LedgerIntegrityError
        The ledger fails verification.
    """
    from .ledger import _budget_terms, current_budget

    to_set, said, changes = [], [], []
    for dataset in spec.datasets.values():
        if not dataset.has_budget:
            continue
        wanted = dataset.budget_record()
        held = current_budget(ledger, dataset.name)
        if held is not None and _same_budget(held, wanted):
            continue
        new = _budget_words(_budget_terms(wanted))
        if held is None:
            said.append(f"set the budget of {dataset.name}: {new}")
        else:
            old = _budget_words(_budget_terms(held))
            change = f"change the budget of {dataset.name} from {old} to {new}"
            said.append(change)
            changes.append(change)
        to_set.append((dataset, wanted))
    return to_set, said, changes


def _same_budget(held: dict, wanted: dict) -> bool:
    from .ledger import _budget_terms

    a, b = _budget_terms(held), _budget_terms(wanted)
    return a[:2] == b[:2] and all(x == y or (x != x and y != y) for x, y in zip(a[2:], b[2:]))


def _budget_words(terms) -> str:
    unit, accounting, epsilon, delta, rho = terms
    if accounting == "zcdp":
        return f"rho {rho:g} (zCDP, {unit.label()})"
    return f"epsilon {epsilon:g}{f', delta {delta:g}' if delta else ''} ({unit.label()})"


def _apply_budgets(ledger: Path, spec: BatchSpec, set_budgets: bool) -> list[str]:
    """Set the spec's budgets in the ledger; refused whole, before anything, where one would change a budget the
    ledger holds and `set_budgets` was not said."""
    from .ledger import set_budget

    to_set, said, changes = budget_changes(ledger, spec)
    if changes and not set_budgets:
        raise BudgetRefused(f"the spec would {'; '.join(changes)}: a batch changes a budget the ledger holds only "
                            "with --set-budgets; nothing was done")
    for dataset, record in to_set:
        set_budget(ledger, dataset.name, record["epsilon"] if record["accounting"] == "basic" else None,
                   record["delta"], record["neighbours"], attributes=dataset.budget_attributes,
                   rho=record["rho"] if record["accounting"] == "zcdp" else None)
    return said


def _check_ledger_exists(spec: BatchSpec) -> None:
    if not spec.ledger.exists():
        raise TabreleaseError(f"the spec's ledger {spec.ledger} does not exist: make it with `tabrelease ledger init "
                              f"{spec.ledger}` (a batch never makes one, so that a mistyped path cannot start "
                              "spending from zero)")


def dry_run(spec: BatchSpec, set_budgets: bool = False) -> BatchResult:
    """What `run_batch` would do, changing nothing: the data are read and every release planned, and a throw-away
    copy of the ledger and its anchor (in an owner-only temporary folder, removed however this ends) is charged with
    the ledger's own rule, so the release a budget refuses is the one the real run would stop at.

    Parameters
    ----------
    spec : BatchSpec
        As `read_spec` returns it.
    set_budgets : bool
        Whether the run may change a budget the ledger already holds.

    Returns
    -------
    BatchResult
        `dry_run` true; each step "would be made", "would be refused" (with its reason and exit status) or "not
        attempted" (after a refusal).

    Raises
    ------
    TabreleaseError
        The ledger does not exist, a dataset cannot be read, or a release cannot be planned (naming it).
    BudgetRefused
        The spec would change a budget the ledger holds without `set_budgets`, or a budget below what was spent.
    LedgerIntegrityError
        The ledger fails verification.
    """
    _check_ledger_exists(spec)
    spec, prepared = _prepared(spec)
    steps, said, _ = _charged_on_a_copy(spec, prepared, set_budgets)
    return BatchResult(spec.path, True, tuple(steps), tuple(said))


SCRATCH_PREFIX = "tabrelease-batch-"
# A throw-away folder named by no process (made by an earlier version, with a copy of the ledger's key in it) is
# removed once this old: a prediction takes seconds to minutes.
UNNAMED_SCRATCH_AGE = 3600


def _host() -> str:
    """This machine's name as a folder name may hold it (a shared temporary folder, on NFS or between containers,
    holds other machines' process ids)."""
    import re
    import socket

    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:64] or "host"


def _remove_dead_scratch() -> list[Path]:
    """Remove the throw-away folders of batches whose process is gone (killed with SIGKILL, which runs no clean-up):
    each held a copy of a ledger. Only this user's, and of processes of this machine; a folder named by a live
    process is left."""
    import time

    from ._files import process_alive

    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        try:
            info = folder.lstat()
            if not folder.is_dir() or folder.is_symlink() or (hasattr(os, "getuid") and info.st_uid != os.getuid()):
                continue
            pid, at, rest = folder.name[len(SCRATCH_PREFIX):].partition("@")
            if at and pid.isdigit() and "~" in rest:
                gone = (rest.rsplit("~", 1)[0] == _host() and int(pid) != os.getpid()
                        and not process_alive(int(pid)))
            elif not at:  # an earlier version's folder: no process named
                gone = time.time() - info.st_mtime > UNNAMED_SCRATCH_AGE
            else:
                gone = False
        except OSError:
            continue
        if gone:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _charged_on_a_copy(spec: BatchSpec, prepared: list, set_budgets: bool):
    """The batch's budgets set and its releases charged, in order, on a throw-away copy of the ledger and its anchor
    (an owner-only temporary folder, removed however this ends): the steps ("would be made", "would be refused",
    "not attempted"), the budget changes said, and the refusal's exception (None where none is refused)."""
    from .ledger import budget_status, scratch_copy
    from .workflow import charge_release

    _remove_dead_scratch()
    # Named by this process and host, so that a later batch removes it if this one is killed (SIGKILL runs no
    # clean-up).
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}@{_host()}~"))
    refusal = None
    try:
        # A copy of the ledger and its anchor, with the real anchor's lines for it (marked a copy's), the key in
        # memory only: outside this block the copy is refused for writing.
        with scratch_copy(spec.ledger, scratch) as copy:
            said = _apply_budgets(copy, spec, set_budgets)
            steps = []
            for r, table, plan, labels, expected in prepared:
                step = dict(number=r.number, dataset=r.dataset, out=str(r.out), mechanism=plan.mechanism,
                            epsilon=r.spec.epsilon, margins=tuple(labels), expected_l1=expected, mode=r.spec.mode,
                            guarantee=plan.implementation.guarantee(plan, table.variables).describe())
                if refusal is not None:
                    steps.append(Step(**step, status="not attempted"))
                    continue
                try:
                    charge_release(r.account(copy), table, plan, r.out, r.spec.mode)
                except TabreleaseError as exc:
                    # Said of the ledger, not of the throw-away copy (removed below) the words may name.
                    reason = str(exc).replace(os.fspath(copy), os.fspath(spec.ledger))
                    refusal = type(exc)(reason)
                    steps.append(Step(**step, status="would be refused", reason=reason, exit_status=exc.exit_status))
                    continue
                steps.append(Step(**step, **_spent_after(budget_status(copy, r.dataset)), status="would be made"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return steps, said, refusal


def run_batch(spec: BatchSpec, set_budgets: bool = False) -> BatchResult:
    """Publish the releases in order (each through `publish_release`, with the ledger), or none. Every release is
    planned, and the whole batch charged on a throw-away copy of the ledger (`dry_run`'s), before the first is made:
    a spec that cannot be planned, or one release of which the ledger's rule would refuse, releases nothing; a spec
    that would change a budget the ledger holds is refused unless `set_budgets`. A refusal the copy could not foresee
    (another process charging the ledger meanwhile) stops the run at that release.

    Parameters
    ----------
    spec : BatchSpec
        As `read_spec` returns it.
    set_budgets : bool
        Whether the run may change a budget the ledger already holds.

    Returns
    -------
    BatchResult
        `dry_run` false; each step "made", "refused" (a refusal before its charge, with its reason and exit status),
        "failed after its charge" (`ChargedReleaseFailed`: the charge stands), or "not attempted" (after either).

    Raises
    ------
    TabreleaseError
        Before any release: the ledger does not exist, a dataset cannot be read, or a release cannot be planned.
    BudgetRefused
        Before any release: the spec would change a budget the ledger holds without `set_budgets`, or set one below
        what was spent, or the ledger's rule would refuse one of its releases (or another refusal's class, naming
        the release).
    LedgerIntegrityError
        The ledger fails verification before any release (later, a release's refusal is a step).
    """
    from .ledger import budget_status
    from .workflow import publish_release

    _check_ledger_exists(spec)
    spec, prepared = _prepared(spec)
    # The whole batch is charged on a copy of the ledger first, as the dry run does: a release the ledger's rule
    # refuses (its budget spent by those before it, or a guarantee its budget does not cover) refuses the batch
    # before anything is set, charged or written (a new user's trial: a third release's delta under a budget without
    # one was refused after the first two were published). Charges made by others in between can still stop the
    # run at a release (a step "refused", those before it made).
    predicted, _, refusal = _charged_on_a_copy(spec, prepared, set_budgets)
    if refusal is not None:
        step = next(s for s in predicted if s.status == "would be refused")
        # Its figures are the ledger's after the batch's earlier releases, which were not made: said so.
        after = "" if step.number == 1 else f" after release{'s 1-' if step.number > 2 else ' '}{step.number - 1}"
        raise type(refusal)(f"release {step.number} of the batch ({step.out}) would be refused{after}: {refusal}; so no "
                            "release of the batch was made (a batch is made whole, or not at all, where the "
                            "ledger's rule can tell beforehand); see --dry-run")
    said = _apply_budgets(spec.ledger, spec, set_budgets)
    # `signalled`: the status a signal that stopped the run asks for; `why`: what the first release not attempted
    # after it says.
    steps, stopped, signalled, why = [], False, None, None
    for r, table, plan, labels, expected in prepared:
        step = dict(number=r.number, dataset=r.dataset, out=str(r.out), mechanism=plan.mechanism,
                    epsilon=r.spec.epsilon, margins=tuple(labels), expected_l1=expected, mode=r.spec.mode,
                    guarantee=plan.implementation.guarantee(plan, table.variables).describe())
        if stopped:
            steps.append(Step(**step, status="not attempted", reason=why))
            why = None
            continue
        try:
            published = publish_release(table, r.spec, r.out, account=r.account(spec.ledger))
        except ReleaseInterrupted as exc:  # a Ctrl-C held over this release's making: made, and the batch stops
            published, stopped, signalled = exc.published, True, 130
            why = f"interrupted during release {r.number}, which was finished"
        except ChargedReleaseFailed as exc:  # not a refusal: its budget is spent (a second Ctrl-C ends up here too)
            stopped = True
            if getattr(exc, "signalled", False):  # said in the JSON as interrupted; the run still exits 4
                signalled = 130
            steps.append(Step(**step, status=FAILED_AFTER_CHARGE, reason=str(exc)))
            continue
        except TabreleaseError as exc:
            stopped = True
            steps.append(Step(**step, status="refused", reason=str(exc), exit_status=exc.exit_status))
            continue
        except (KeyboardInterrupt, SystemExit) as exc:  # before its charge: this and the rest not attempted
            stopped, signalled = True, _signal_status(exc)
            steps.append(Step(**step, status="not attempted", reason=f"interrupted before release {r.number}'s "
                              "charge"))
            continue
        try:
            spent = _spent_after(budget_status(spec.ledger, r.dataset))
        except (TabreleaseError, KeyboardInterrupt, SystemExit) as exc:  # made and charged all the same
            spent = {}
            if not isinstance(exc, TabreleaseError):
                stopped, signalled = True, _signal_status(exc)
                why = f"interrupted after release {r.number}, which was made"
        steps.append(Step(**step, **spent, status="made", warnings=tuple(published.warnings)))
    return BatchResult(spec.path, False, tuple(steps), tuple(said), interrupted_status=signalled)


def _spent_after(status) -> dict:
    """A step's spending fields from the dataset's budget status: rho under a zCDP budget (its epsilon spent is not
    a number there: a dry run had said "spent nan"), epsilon otherwise."""
    if status.rho_budget is not None:
        return {"rho_spent_after": status.rho_spent, "rho_budget": status.rho_budget}
    return {"epsilon_spent_after": status.epsilon_spent, "epsilon_budget": status.epsilon_budget}


def _signal_status(exc: BaseException) -> int:
    """The exit status of the signal an exception stands for: 130 for an interrupt, SystemExit's 128 + N for a
    termination or a hang-up (the batch ends with it after its summary)."""
    if isinstance(exc, SystemExit) and isinstance(exc.code, int) and exc.code > 128:
        return exc.code
    return 130
