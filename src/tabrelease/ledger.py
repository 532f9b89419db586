"""A tamper-evident privacy-budget ledger, per dataset.

Releases from the same data compose. The ledger applies basic sequential composition: the
epsilons of the releases of one **dataset** add up, and so do their deltas. A release names its
dataset (`--dataset`, by default the table's name); budgets and spending are per dataset, and each
release also records a keyed fingerprint (HMAC-SHA256) of the exact table it was drawn from, so an
auditor sees when one dataset was released from tables that differ, which is never a reason for a
new budget. Without the key, the ledger cannot be used to test guesses of a table.

Tamper evidence: the ledger is a chain of records (budgets set, releases charged), each carrying a
MAC under the ledger's key over its content and the previous record's MAC, and the file carries a
MAC of its head (how many records, the last MAC). An edited, deleted, inserted or reordered record,
or a truncated chain, breaks it: `verify_ledger` says where, and no budget is spent or set until an
auditor has resolved it. (A whole older copy of the file put back in place cannot be told from the
file alone: keep the ledger where only the release process may write, and back it up.)

The key is made only by `init_ledger` (`tabrelease ledger init FILE`), in FILE.key, readable by its
owner only, or given in $TABRELEASE_LEDGER_KEY (at least 32 characters). A missing key, a key that is
not the ledger's, or a key file that others can read is refused. The ledger's path is resolved to
its real path before locking and writing, so a link cannot fork it. The file is JSON, rewritten
atomically (temporary file, then rename) under an exclusive lock: concurrent releases never lose
an entry and never spend the same budget twice; the check and the entry happen under one lock,
before any noise is drawn. A release that fails after its charge stays charged, and the failure is
recorded in a record of its own.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets
import stat
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ._files import temporary_path, write_text_atomic

from .errors import TabreleaseError
from .tables import ContingencyTable

NEIGHBOURS = ("add-remove", "replace")

KEY_ENVIRONMENT = "TABRELEASE_LEDGER_KEY"
LEDGER_VERSION = 2
MIN_KEY_LENGTH = 32
# Budgets are compared with this relative slack, so that 0.5 + 0.5 fits a budget of 1.
_SLACK = 1e-9
LOCK_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class BudgetStatus:
    dataset: str
    releases: int
    epsilon_spent: float
    delta_spent: float
    epsilon_budget: float | None
    delta_budget: float | None
    fingerprints: tuple[str, ...] = ()  # the distinct tables released under this dataset
    neighbours: str = "add-remove"  # the relation the spending is summed under

    @property
    def table(self) -> str:  # the name a release gave; kept for callers of version 1
        return self.dataset

    @property
    def epsilon_remaining(self) -> float | None:
        return None if self.epsilon_budget is None else max(self.epsilon_budget - self.epsilon_spent, 0.0)

    @property
    def delta_remaining(self) -> float | None:
        return None if self.delta_budget is None else max(self.delta_budget - self.delta_spent, 0.0)

    def as_dict(self) -> dict:
        return {**self.__dict__, "fingerprints": list(self.fingerprints),
                "epsilon_remaining": self.epsilon_remaining, "delta_remaining": self.delta_remaining}


# --- keys -----------------------------------------------------------------------------------------
def _key_path(path: Path) -> Path:
    return Path(f"{path}.key")


def ledger_key(path: str | os.PathLike) -> bytes:
    """The ledger's key: $TABRELEASE_LEDGER_KEY, or FILE.key (owner-only). Never made here."""
    env = os.environ.get(KEY_ENVIRONMENT)
    if env is not None:
        if len(env) < MIN_KEY_LENGTH:
            raise TabreleaseError(f"${KEY_ENVIRONMENT} is too short to be a key (at least {MIN_KEY_LENGTH} characters)")
        return env.encode()
    key_path = _key_path(Path(os.path.realpath(path)))
    if not key_path.exists():
        raise TabreleaseError(f"no key for the ledger {path}: expected {key_path} or ${KEY_ENVIRONMENT} (a new ledger "
                              "is made with `tabrelease ledger init FILE`)")
    mode = os.stat(key_path).st_mode
    if not stat.S_ISREG(mode):
        raise TabreleaseError(f"the ledger key {key_path} is not a regular file")
    if mode & 0o077:
        raise TabreleaseError(f"the ledger key {key_path} can be read by others (mode {stat.S_IMODE(mode):o}); "
                              f"make it owner-only: chmod 600 {key_path}")
    key = key_path.read_text().strip()
    if len(key) < MIN_KEY_LENGTH:
        raise TabreleaseError(f"the ledger key {key_path} is too short to be a key (64 hex characters expected)")
    return key.encode()


def _key_id(key: bytes) -> str:
    return hmac.new(key, b"tabrelease ledger key id", hashlib.sha256).hexdigest()[:16]


def init_ledger(path: str | os.PathLike) -> Path:
    """Make a new, empty ledger and (unless $TABRELEASE_LEDGER_KEY gives one) its key, owner-only."""
    path = _resolve(path, must_exist=False)
    if path.exists():
        raise TabreleaseError(f"a ledger already exists at {path}")
    if os.environ.get(KEY_ENVIRONMENT) is None:
        key_path = _key_path(path)
        if key_path.exists():
            raise TabreleaseError(f"a key already exists at {key_path}; remove it or use it with its own ledger")
        # The key must appear whole or not at all: written to a private temporary file, then hard-linked.
        tmp = temporary_path(key_path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_hex(32) + "\n")
            try:
                os.link(tmp, key_path)
            except FileExistsError:
                raise TabreleaseError(f"a key already exists at {key_path}") from None
        finally:
            tmp.unlink()
    key = ledger_key(path)
    with _lock(path):
        if path.exists():
            raise TabreleaseError(f"a ledger already exists at {path}")
        _write(path, {"version": LEDGER_VERSION, "key_id": _key_id(key), "records": []}, key)
    return path


# --- the file -------------------------------------------------------------------------------------
def _resolve(path, must_exist: bool = True) -> Path:
    """The ledger's real path (links resolved), so that every way of naming it locks and writes one file."""
    path = Path(os.path.realpath(os.fspath(path)))
    if path.is_dir():
        raise TabreleaseError(f"the ledger {path} is a directory; give a file path")
    if not path.parent.exists():
        raise TabreleaseError(f"the ledger's folder {path.parent} does not exist")
    if must_exist and not path.exists():
        raise TabreleaseError(f"no ledger at {path}; make one with `tabrelease ledger init {path}`")
    if path.exists() and not path.is_file():
        raise TabreleaseError(f"the ledger {path} is not a regular file")
    return path


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextmanager
def _lock(path: Path):
    """Exclusive use of the ledger: a file lock between processes, and a lock between this process's threads
    (an OS file lock need not exclude two threads of one process). `path` is already the real path."""
    from filelock import FileLock

    key = os.fspath(path)
    with _THREAD_LOCKS_GUARD:
        thread_lock = _THREAD_LOCKS.setdefault(key, threading.Lock())
    with thread_lock, FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_SECONDS):
        yield


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _mac(key: bytes, previous: str, record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "mac"}
    return hmac.new(key, previous.encode() + b"|" + _canonical(body), hashlib.sha256).hexdigest()


def _head_mac(key: bytes, count: int, last: str) -> str:
    return hmac.new(key, f"head|{count}|{last}".encode(), hashlib.sha256).hexdigest()


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TabreleaseError(f"{path} is not a tabrelease ledger (not valid JSON)") from None
    if not isinstance(data, dict) or data.get("version") != LEDGER_VERSION:
        raise TabreleaseError(f"{path} is not a tabrelease ledger of version {LEDGER_VERSION}")
    if not isinstance(data.get("records"), list) or not isinstance(data.get("key_id"), str) \
            or not isinstance(data.get("head"), dict):
        raise TabreleaseError(f"the ledger {path} is damaged: its records, key id or head are missing")
    return data


def _problems(data: dict, key: bytes) -> list[str]:
    """Everything that breaks the chain, by record; empty when the ledger is intact."""
    out = []
    if not hmac.compare_digest(data["key_id"], _key_id(key)):
        return ["the key is not this ledger's key"]
    previous = ""
    for i, record in enumerate(data["records"]):
        if not isinstance(record, dict) or not isinstance(record.get("mac"), str):
            out.append(f"record {i + 1} is not a ledger record")
            previous = ""
            continue
        try:
            expected = _mac(key, previous, record)
        except (TypeError, ValueError):
            expected = ""
        if not hmac.compare_digest(record["mac"], expected):
            out.append(f"record {i + 1} was edited, inserted, removed before it, or moved")
        else:
            problem = _check_record(record)
            if problem:
                out.append(f"record {i + 1}: {problem}")
        previous = record["mac"]
    head = data["head"]
    if head.get("count") != len(data["records"]) or not isinstance(head.get("mac"), str) or not hmac.compare_digest(
            head["mac"], _head_mac(key, len(data["records"]), previous)):
        out.append("the end of the ledger does not match its head: records were removed from or added to its end")
    return out


def _finite_non_negative(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _check_record(record: dict) -> str:
    kind = record.get("kind")
    if kind not in ("budget", "release", "failure") or not isinstance(record.get("dataset"), str):
        return "unknown kind or no dataset"
    if kind == "budget":
        if not (_finite_non_negative(record.get("epsilon")) and record["epsilon"] > 0
                and _finite_non_negative(record.get("delta")) and record["delta"] < 1):
            return "a budget must have a positive finite epsilon and a delta in [0, 1)"
    if kind == "release":
        if not (_finite_non_negative(record.get("epsilon")) and record["epsilon"] > 0
                and _finite_non_negative(record.get("delta")) and isinstance(record.get("fingerprint"), str)):
            return "a release must have a positive finite epsilon, a finite delta and a fingerprint"
    return ""


def _read_verified(path: Path, key: bytes) -> dict:
    data = _load(path)
    problems = _problems(data, key)
    if problems:
        raise TabreleaseError(f"the ledger {path} fails verification ({problems[0]}"
                              f"{f'; {len(problems) - 1} more' if len(problems) > 1 else ''}); nothing is spent or "
                              f"set until an auditor resolves it (`tabrelease ledger verify {path}`)")
    return data


def _write(path: Path, data: dict, key: bytes) -> None:
    last = data["records"][-1]["mac"] if data["records"] else ""
    data["head"] = {"count": len(data["records"]), "mac": _head_mac(key, len(data["records"]), last)}
    write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def _append(data: dict, key: bytes, record: dict) -> dict:
    previous = data["records"][-1]["mac"] if data["records"] else ""
    record = {**record, "time": _now(), "process": os.getpid()}
    record["mac"] = _mac(key, previous, record)
    data["records"].append(record)
    return record


# --- what a release does --------------------------------------------------------------------------
def table_fingerprint(table: ContingencyTable, key: bytes) -> str:
    """HMAC-SHA256 of the table's variables, level labels and counts under the ledger's key (for a table held as
    records, of its distinct records and how many of each: its non-zero cells, without listing every cell)."""
    content = {"variables": list(table.variables), "levels": [list(map(str, lv)) for lv in table.levels]}
    if getattr(table, "held_as_cells", True):
        content["counts"] = [int(c) for c in table.counts.ravel()]
        message = json.dumps(content, separators=(",", ":")).encode()
        return hmac.new(key, message, hashlib.sha256).hexdigest()
    rows, counts = table.distinct_records()
    digest = hmac.new(key, json.dumps(content, separators=(",", ":")).encode(), hashlib.sha256)
    digest.update(np.ascontiguousarray(rows, dtype="<u4").tobytes())
    digest.update(np.ascontiguousarray(counts, dtype="<i8").tobytes())
    return digest.hexdigest()


def _check_dataset(dataset: str) -> str:
    if not isinstance(dataset, str) or not dataset.strip() or len(dataset) > 200:
        raise TabreleaseError(f"a dataset is named by a non-empty text of at most 200 characters, not {dataset!r}")
    return dataset.strip()


def _check_budget_values(epsilon, delta) -> tuple[float, float]:
    if not _finite_non_negative(epsilon) or epsilon <= 0:
        raise TabreleaseError(f"a budget epsilon must be a positive finite number, not {epsilon!r}")
    if delta is not None and not (_finite_non_negative(delta) and delta < 1):
        raise TabreleaseError(f"a budget delta must lie in [0, 1), not {delta!r}")
    return float(epsilon), float(delta or 0.0)


def set_budget(path, dataset: str, epsilon: float, delta: float | None = None,
               neighbours: str = "add-remove") -> BudgetStatus:
    """Give a dataset a total budget (epsilon, and delta for (epsilon, delta) releases; no delta means 0), for the
    guarantee under `neighbours`: "add-remove" (the default) or "replace" (n treated as known)."""
    dataset = _dataset_name(dataset)
    epsilon, delta = _check_budget_values(epsilon, delta)
    if neighbours not in NEIGHBOURS:
        raise TabreleaseError(f"a budget's neighbour relation is add-remove or replace, not {neighbours!r}")
    path = _resolve(path)
    _load(path)  # a damaged ledger is refused before anything (even a lock file) is made beside it
    key = ledger_key(path)
    with _lock(path):
        data = _read_verified(path, key)
        spent = _spent(data, dataset, neighbours)
        if spent[0] > epsilon * (1 + _SLACK):
            raise TabreleaseError(f"{dataset} has already spent epsilon {spent[0]:g} (under {neighbours} neighbours); "
                                  f"a budget of {epsilon:g} is below that")
        _append(data, key, {"kind": "budget", "dataset": dataset, "epsilon": epsilon, "delta": delta,
                            "neighbours": neighbours})
        _write(path, data, key)
        return _status(data, dataset)


def _dataset_name(dataset) -> str:
    if isinstance(dataset, ContingencyTable):
        return _check_dataset(dataset.name)
    return _check_dataset(dataset)


def charge(path, table: ContingencyTable, *, epsilon: float, delta: float | None, mechanism: str,
           margins: list[str], output: str | None, noise_mode: str, dataset: str | None = None,
           allow_unbudgeted: bool = False, neighbours: str = "add-remove", total_public: bool = False) -> dict:
    """Record a release before its noise is drawn, or refuse it if it would exceed its dataset's budget.

    A ledger that holds any budget refuses a dataset without one, unless `allow_unbudgeted`. Releases compose
    under the budget's neighbour relation: under add-remove only add-remove releases with a noised total count
    (one that publishes n exactly has no add-remove guarantee); under replace an add-remove release costs 2
    epsilon (group privacy; and an add-remove release with a public total is 2 epsilon-DP between tables of
    equal n), a replace release its epsilon."""
    dataset = _check_dataset(table.name if dataset is None else dataset)
    if not (_finite_non_negative(epsilon) and epsilon > 0) or (delta is not None and not _finite_non_negative(delta)):
        raise TabreleaseError(f"a release is charged a positive finite epsilon and a finite delta, not {epsilon!r}, {delta!r}")
    path = _resolve(path)
    _load(path)  # a damaged ledger is refused before anything (even a lock file) is made beside it
    key = ledger_key(path)
    fingerprint = table_fingerprint(table, key)
    with _lock(path):
        data = _read_verified(path, key)
        budgets = _budgets(data)
        budget = budgets.get(dataset)
        relation = budget.get("neighbours", "add-remove") if budget is not None else _relation(data, dataset)
        release = {"neighbours": neighbours, "total_public": bool(total_public), "epsilon": float(epsilon)}
        cost = _cost(release, relation)
        if cost is None and budget is not None:
            raise TabreleaseError(
                f"the budget of {dataset} bounds an add-remove guarantee, and this release publishes n exactly "
                f"({'replace neighbours' if neighbours == 'replace' else 'a public total'}), which has none; set the "
                f"dataset's budget under replace neighbours (--budget-neighbours replace); nothing was released")
        eps_spent, delta_spent, _ = _spent(data, dataset, relation if cost is not None else "replace")
        epsilon_charged = cost if cost is not None else 2.0 * float(epsilon)
        if budget is None and budgets and not allow_unbudgeted:
            raise TabreleaseError(
                f"the ledger has budgets but none for the dataset {dataset!r}; set one (`tabrelease ledger FILE "
                f"--set-budget {dataset} --epsilon E`) or say --allow-unbudgeted; nothing was released")
        if budget is not None:
            eps_left = budget["epsilon"] - eps_spent
            delta_left = budget["delta"] - delta_spent
            if epsilon_charged > eps_left + _SLACK * budget["epsilon"]:
                raise TabreleaseError(
                    f"privacy budget of {dataset} exceeded: this release needs epsilon {epsilon_charged:g}, "
                    f"{max(eps_left, 0):g} of {budget['epsilon']:g} remains (spent {eps_spent:g}); nothing was released"
                )
            if (delta or 0.0) > delta_left + _SLACK * max(budget["delta"], 1e-300):
                raise TabreleaseError(
                    f"privacy budget of {dataset} exceeded: this release needs delta {delta:g}, "
                    f"{max(delta_left, 0):g} of {budget['delta']:g} remains; nothing was released"
                )
        entry = _append(data, key, {
            "kind": "release", "dataset": dataset, "fingerprint": fingerprint, "table": table.name,
            "epsilon": float(epsilon), "delta": float(delta or 0.0), "neighbours": neighbours,
            "total_public": bool(total_public), "mechanism": mechanism, "margins": list(margins), "output": output,
            "noise_mode": noise_mode,
        })
        _write(path, data, key)
    return entry


def record_failure(path, entry: dict, reason: str) -> None:
    """After a charge: the release failed (it stays charged; its noise may have been drawn). `reason` must not
    hold anything derived from the counts."""
    path = _resolve(path)
    key = ledger_key(path)
    with _lock(path):
        data = _read_verified(path, key)
        _append(data, key, {"kind": "failure", "dataset": entry["dataset"], "release_mac": entry["mac"],
                            "reason": str(reason)[:500]})
        _write(path, data, key)


def verify_ledger(path) -> list[str]:
    """What breaks the ledger's chain (empty: intact). Needs the key."""
    path = _resolve(path)
    return _problems(_load(path), ledger_key(path))


def _budgets(data: dict) -> dict[str, dict]:
    out = {}
    for record in data["records"]:
        if record["kind"] == "budget":
            out[record["dataset"]] = record  # the latest budget set for a dataset holds
    return out


def _cost(release: dict, relation: str) -> float | None:
    """What a release spends of a budget under `relation`; None: it has no guarantee under that relation."""
    epsilon = float(release["epsilon"])
    publishes_n = release.get("neighbours", "add-remove") == "replace" or release.get("total_public", False)
    if relation == "add-remove":
        return None if publishes_n else epsilon
    return epsilon if release.get("neighbours", "add-remove") == "replace" else 2.0 * epsilon


def _relation(data: dict, dataset: str) -> str:
    """The relation a dataset's releases can be summed under: add-remove while none publishes n exactly."""
    mine = [r for r in data["records"] if r["kind"] == "release" and r["dataset"] == dataset]
    return "add-remove" if all(_cost(r, "add-remove") is not None for r in mine) else "replace"


def _spent(data: dict, dataset: str, relation: str | None = None) -> tuple[float, float, int]:
    relation = relation or _relation(data, dataset)
    mine = [r for r in data["records"] if r["kind"] == "release" and r["dataset"] == dataset]
    costs = [_cost(r, relation) for r in mine]
    return (sum(2.0 * r["epsilon"] if c is None else c for r, c in zip(mine, costs)),
            sum(r["delta"] for r in mine), len(mine))


def _status(data: dict, dataset: str) -> BudgetStatus:
    budget = _budgets(data).get(dataset)
    relation = budget.get("neighbours", "add-remove") if budget is not None else _relation(data, dataset)
    eps, delta, count = _spent(data, dataset, relation)
    prints = tuple(dict.fromkeys(r["fingerprint"] for r in data["records"]
                                 if r["kind"] == "release" and r["dataset"] == dataset))
    return BudgetStatus(dataset, count, eps, delta, None if budget is None else budget["epsilon"],
                        None if budget is None else budget["delta"], prints, relation)


def budget_status(path, dataset) -> BudgetStatus:
    path = _resolve(path)
    return _status(_read_verified(path, ledger_key(path)), _dataset_name(dataset))


def ledger_summary(path) -> list[BudgetStatus]:
    """Spent and remaining budget of every dataset the ledger knows, after verifying its chain."""
    path = _resolve(path)
    data = _read_verified(path, ledger_key(path))
    names = list(dict.fromkeys(r["dataset"] for r in data["records"]))
    return [_status(data, name) for name in names]


def ledger_entries(path) -> list[dict]:
    """Every release the ledger records (after verifying its chain), each with `failed`: the reason recorded when
    the release did not happen after its charge, else None."""
    path = _resolve(path)
    records = _read_verified(path, ledger_key(path))["records"]
    failures = {r["release_mac"]: r.get("reason") for r in records if r["kind"] == "failure"}
    return [{**r, "failed": failures.get(r["mac"])} for r in records if r["kind"] == "release"]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
