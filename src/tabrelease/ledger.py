"""A privacy-budget ledger: every release against a confidential table, and what remains of its budget.

Releases from the same data compose. The ledger applies basic sequential composition: the
epsilons of the releases of one table add up, and so do their deltas. A table is known to the
ledger only by a keyed hash (HMAC-SHA256) of its variables, levels and counts, never by its
data: without the key, the ledger cannot be used to test guesses of the table. The key lives
in FILE.key beside the ledger (created on first use, readable by its owner only) unless the
environment variable TABRELEASE_LEDGER_KEY gives one; auditors can be given the ledger alone.

The ledger file is JSON, rewritten atomically (temporary file, then rename) under an
exclusive lock on FILE.lock, so concurrent releases from several processes never lose an entry
and never spend the same budget twice: the check and the entry happen under one lock, before
any noise is drawn. A release whose output fails to be written afterwards still counts
(conservatively: its noise was drawn).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ._files import temporary_path, write_text_atomic
from .errors import TabreleaseError
from .tables import ContingencyTable

KEY_ENVIRONMENT = "TABRELEASE_LEDGER_KEY"
LEDGER_VERSION = 1
# Budgets are compared with this relative slack, so that 0.5 + 0.5 fits a budget of 1.
_SLACK = 1e-9
LOCK_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class BudgetStatus:
    fingerprint: str
    table: str
    releases: int
    epsilon_spent: float
    delta_spent: float
    epsilon_budget: float | None
    delta_budget: float | None

    @property
    def epsilon_remaining(self) -> float | None:
        return None if self.epsilon_budget is None else max(self.epsilon_budget - self.epsilon_spent, 0.0)

    @property
    def delta_remaining(self) -> float | None:
        return None if self.delta_budget is None else max(self.delta_budget - self.delta_spent, 0.0)

    def as_dict(self) -> dict:
        return {**self.__dict__, "epsilon_remaining": self.epsilon_remaining, "delta_remaining": self.delta_remaining}


def table_fingerprint(table: ContingencyTable, key: bytes) -> str:
    """HMAC-SHA256 of the table's variables, level labels and counts under the ledger's key."""
    message = json.dumps(
        {"variables": list(table.variables), "levels": [list(map(str, lv)) for lv in table.levels],
         "counts": table.counts.ravel().tolist()},
        separators=(",", ":"),
    ).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def ledger_key(path: str | os.PathLike, *, create: bool = True) -> bytes:
    env = os.environ.get(KEY_ENVIRONMENT)
    if env:
        return env.encode()
    key_path = Path(f"{os.fspath(path)}.key")
    if key_path.exists():
        key = key_path.read_text().strip()
        if len(key) < 32:
            raise TabreleaseError(f"the ledger key {key_path} is too short to be a key (64 hex characters expected)")
        return key.encode()
    if not create:
        raise TabreleaseError(f"no key for the ledger {path}: expected {key_path} or ${KEY_ENVIRONMENT}")
    # The key must appear whole or not at all: another process or thread may read it the moment it exists. So
    # it is written to a private temporary file and hard-linked into place; the link fails if a key won the race.
    tmp = temporary_path(key_path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
        try:
            os.link(tmp, key_path)
        except FileExistsError:
            pass
    finally:
        tmp.unlink()
    return key_path.read_text().strip().encode()


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextmanager
def _lock(path: Path):
    """Exclusive use of the ledger: a file lock between processes, and a lock between this process's threads
    (an OS file lock need not exclude two threads of one process)."""
    from filelock import FileLock

    key = os.path.realpath(path)
    with _THREAD_LOCKS_GUARD:
        thread_lock = _THREAD_LOCKS.setdefault(key, threading.Lock())
    with thread_lock, FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_SECONDS):
        yield


def _read(path: Path) -> dict:
    if not path.exists():
        return {"version": LEDGER_VERSION, "budgets": {}, "entries": []}
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TabreleaseError(f"{path} is not a tabrelease ledger (not valid JSON)") from None
    if not isinstance(data, dict) or data.get("version") != LEDGER_VERSION or not isinstance(data.get("entries"), list):
        raise TabreleaseError(f"{path} is not a tabrelease ledger (version {LEDGER_VERSION} expected)")
    return data


def _write(path: Path, data: dict) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def _check_location(path: Path) -> Path:
    path = Path(path)
    if path.is_dir():
        raise TabreleaseError(f"the ledger {path} is a directory; give a file path")
    if not path.parent.exists():
        raise TabreleaseError(f"the ledger's folder {path.parent} does not exist")
    return path


def set_budget(path, table: ContingencyTable, epsilon: float, delta: float | None = None) -> BudgetStatus:
    """Give a table a total budget (epsilon, and delta for (epsilon, delta) releases; no delta means 0)."""
    path = _check_location(path)
    if not (epsilon > 0 and epsilon < float("inf")):
        raise TabreleaseError(f"a budget epsilon must be a positive finite number, not {epsilon!r}")
    if delta is not None and not 0 <= delta < 1:
        raise TabreleaseError(f"a budget delta must lie in [0, 1), not {delta!r}")
    _read(path)  # a damaged ledger is refused before anything (even a lock file) is made beside it
    fingerprint = table_fingerprint(table, ledger_key(path))
    with _lock(path):
        data = _read(path)
        spent = _spent(data, fingerprint)
        if spent[0] > epsilon * (1 + _SLACK):
            raise TabreleaseError(f"{table.name} has already spent epsilon {spent[0]:g}; a budget of {epsilon:g} is below that")
        data["budgets"][fingerprint] = {"table": table.name, "epsilon": float(epsilon),
                                        "delta": float(delta or 0.0), "set": _now()}
        _write(path, data)
    return budget_status(path, table)


def charge(path, table: ContingencyTable, *, epsilon: float, delta: float | None, mechanism: str,
           margins: list[str], output: str | None, noise_mode: str) -> dict:
    """Record a release before its noise is drawn, or refuse it if it would exceed the table's budget."""
    path = _check_location(path)
    _read(path)  # a damaged ledger is refused before anything (even a lock file) is made beside it
    fingerprint = table_fingerprint(table, ledger_key(path))
    with _lock(path):
        data = _read(path)
        eps_spent, delta_spent, _ = _spent(data, fingerprint)
        budget = data["budgets"].get(fingerprint)
        if budget is not None:
            eps_left = budget["epsilon"] - eps_spent
            delta_left = budget["delta"] - delta_spent
            if epsilon > eps_left + _SLACK * budget["epsilon"]:
                raise TabreleaseError(
                    f"privacy budget of {table.name} exceeded: this release needs epsilon {epsilon:g}, "
                    f"{max(eps_left, 0):g} of {budget['epsilon']:g} remains (spent {eps_spent:g}); nothing was released"
                )
            if (delta or 0.0) > delta_left + _SLACK * max(budget["delta"], 1e-300):
                raise TabreleaseError(
                    f"privacy budget of {table.name} exceeded: this release needs delta {delta:g}, "
                    f"{max(delta_left, 0):g} of {budget['delta']:g} remains; nothing was released"
                )
        entry = {
            "fingerprint": fingerprint, "table": table.name, "epsilon": float(epsilon), "delta": float(delta or 0.0),
            "mechanism": mechanism, "margins": list(margins), "output": output, "noise_mode": noise_mode,
            "time": _now(), "process": os.getpid(),
        }
        data["entries"].append(entry)
        _write(path, data)
    return entry


def _spent(data: dict, fingerprint: str) -> tuple[float, float, int]:
    mine = [e for e in data["entries"] if e["fingerprint"] == fingerprint]
    return sum(e["epsilon"] for e in mine), sum(e["delta"] for e in mine), len(mine)


def budget_status(path, table: ContingencyTable) -> BudgetStatus:
    path = _check_location(path)
    fingerprint = table_fingerprint(table, ledger_key(path))
    return _status(_read(path), fingerprint, table.name)


def _status(data: dict, fingerprint: str, name: str) -> BudgetStatus:
    eps, delta, count = _spent(data, fingerprint)
    budget = data["budgets"].get(fingerprint)
    return BudgetStatus(fingerprint, name, count, eps, delta,
                        None if budget is None else budget["epsilon"], None if budget is None else budget["delta"])


def ledger_summary(path) -> list[BudgetStatus]:
    """Spent and remaining budget of every table the ledger knows (needs no key and no data)."""
    path = Path(path)
    if not path.exists():
        raise TabreleaseError(f"no ledger at {path}")
    if path.is_dir():
        raise TabreleaseError(f"the ledger {path} is a directory; give a file path")
    data = _read(path)
    names: dict[str, str] = {}
    for fingerprint, budget in data["budgets"].items():
        names[fingerprint] = budget["table"]
    for entry in data["entries"]:
        names.setdefault(entry["fingerprint"], entry["table"])
    return [_status(data, fp, name) for fp, name in names.items()]


def ledger_entries(path) -> list[dict]:
    return list(_read(Path(path))["entries"])


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
