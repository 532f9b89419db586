"""A tamper-evident privacy-budget ledger, per dataset, that composes only what a budget's unit covers.

Releases from the same data compose. A release names its dataset (`--dataset`, by default the table's name);
budgets and spending are per dataset. Every release is charged with its **guarantee** (`privacy.PrivacyGuarantee`:
a unit and a loss), read under the unit the dataset's budget is declared for by the exact rules of
`privacy.under_unit` (group privacy from add-remove to replace; local to replace; nothing into add-remove from a
release that publishes n exactly; nothing out of the sensitive-attribute unit). A release with no guarantee under
the budget's unit is refused before its charge, with the reason. A budget is either (epsilon, delta), composed by
adding both (basic sequential composition), or rho, composed by adding rho (zCDP), where a budget declared as an
(epsilon, delta) target is turned into the largest rho whose exact conversion (Canonne, Kamath & Steinke 2020)
meets it.

One identity. Each release also records a keyed fingerprint (HMAC-SHA256) of the exact table it was drawn from; a
table already released under another dataset id is refused (a second id would be a fresh budget for the same data)
unless the operator says the datasets are distinct (`allow_alias`), and aliases are listed. So is a table that holds
such data in part (`margin_prints`: one is a margin of the other, or they share a margin of two or more variables).
The ledger is locked and written by its real path; a ledger or key file with more than one hard link is refused (an
atomic rewrite would split the links into two ledgers). Ledger and key are owner-only (0600).

Tamper evidence: the ledger is a chain of records (budgets set, releases charged, failures after a charge), each
carrying a MAC under the ledger's key over its content and the previous record's MAC, and the file carries a MAC of
its head (its id, how many records, the last MAC). An edited, deleted, inserted or reordered record, or a truncated
chain, breaks it. A whole older copy of the file put back, or a ledger deleted and made anew, cannot be told from
the file alone: so every write also appends the head to an **anchor** file, opened for appending only (FILE.anchor
beside the ledger, or $TABRELEASE_LEDGER_ANCHOR: point it at storage where the release process may append but not
rewrite, e.g. a file with `chattr +a`, or a WORM share). A ledger behind its anchor (fewer records, or other records
where the anchor saw some) or a path whose anchor names another ledger fails verification. A copy of a ledger that
still stands where the anchor last saw it written verifies (a backup), but nothing is spent or set in it. Every
bundle records its charge (ledger id, record number and MAC in internal/charge.json; a random, non-secret release
id in public/), and `verify_bundles` finds bundles without a charge and charges without a bundle.

The key is made only by `init_ledger` (`tabrelease ledger init FILE`), in FILE.key, or given in
$TABRELEASE_LEDGER_KEY (at least 32 characters). The check and the entry happen under one exclusive lock, before
any noise is drawn. A release that fails after its charge stays charged, and the failure is recorded.
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
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ._files import remove_dead_temporaries, temporary_path
from .errors import BudgetRefused, LedgerIntegrityError, TabreleaseError
from .privacy import (ADD_REMOVE, APPROXIMATE, BUDGET_UNITS, LOCAL, PURE, REPLACE, SENSITIVE, ZCDP, GuaranteeMismatch,
                      PrivacyGuarantee, PrivacyLoss, PrivacyUnit, cost_under_budget, group_loss, under_unit)
from .tables import ContingencyTable, margin_counts

NEIGHBOURS = (ADD_REMOVE, REPLACE)

KEY_ENVIRONMENT = "TABRELEASE_LEDGER_KEY"
ANCHOR_ENVIRONMENT = "TABRELEASE_LEDGER_ANCHOR"
LEDGER_VERSION = 3
READABLE_VERSIONS = (2, 3)  # version 2 (no id, no anchor) is read, and becomes version 3 at its next write
MIN_KEY_LENGTH = 32
# Spending is summed exactly (math.fsum) and may exceed a budget by this relative amount only: rounding of the
# sum of decimal fractions (0.1 + 0.2 is 3e-17 above 0.3), never a real overspend.
_SLACK = 1e-12
LOCK_TIMEOUT_SECONDS = 60
# Composition of a budget: basic ((epsilon, delta) add up) or zCDP (rho adds up).
BASIC = "basic"
ACCOUNTINGS = (BASIC, ZCDP)


@dataclass(frozen=True)
class BudgetStatus:
    dataset: str
    releases: int
    epsilon_spent: float
    delta_spent: float
    epsilon_budget: float | None
    delta_budget: float | None
    fingerprints: tuple[str, ...] = ()  # the distinct tables released under this dataset
    neighbours: str = ADD_REMOVE  # the unit the spending is summed under (its label)
    accounting: str = BASIC
    rho_spent: float | None = None
    rho_budget: float | None = None
    aliases: tuple[str, ...] = ()  # other datasets that released one of the same tables

    @property
    def table(self) -> str:  # the name a release gave; kept for callers of version 1
        return self.dataset

    @property
    def unit(self) -> str:
        return self.neighbours

    @property
    def epsilon_remaining(self) -> float | None:
        if self.epsilon_budget is None or self.accounting == ZCDP:
            return None
        return max(self.epsilon_budget - self.epsilon_spent, 0.0)

    @property
    def delta_remaining(self) -> float | None:
        if self.delta_budget is None or self.accounting == ZCDP:
            return None
        return max(self.delta_budget - self.delta_spent, 0.0)

    @property
    def rho_remaining(self) -> float | None:
        return None if self.rho_budget is None else max(self.rho_budget - (self.rho_spent or 0.0), 0.0)

    def as_dict(self) -> dict:
        """The status as plain data (for JSON), with what remains of each budget.

        Returns
        -------
        dict
            Every field (fingerprints and aliases as lists), and `epsilon_remaining`, `delta_remaining` and
            `rho_remaining` (None where there is no such budget).
        """
        return {**self.__dict__, "fingerprints": list(self.fingerprints), "aliases": list(self.aliases),
                "epsilon_remaining": self.epsilon_remaining, "delta_remaining": self.delta_remaining,
                "rho_remaining": self.rho_remaining}


# --- keys -----------------------------------------------------------------------------------------
def _key_path(path: Path) -> Path:
    return Path(f"{path}.key")


def key_file(path: str | os.PathLike) -> Path | None:
    """The key file of the ledger at `path` (FILE.key, beside the ledger's real path), or None where
    $TABRELEASE_LEDGER_KEY holds the key (no key file is made or read then).

    Parameters
    ----------
    path : path
        The ledger.

    Returns
    -------
    Path or None
    """
    return None if os.environ.get(KEY_ENVIRONMENT) is not None else _key_path(Path(os.path.realpath(path)))


def ledger_key(path: str | os.PathLike) -> bytes:
    """The ledger's key: $TABRELEASE_LEDGER_KEY, or FILE.key (owner-only, one link). Never made here.

    Parameters
    ----------
    path : path-like
        The ledger (its real path names the key file).

    Returns
    -------
    bytes
        The key, at least `MIN_KEY_LENGTH` characters.

    Raises
    ------
    TabreleaseError
        No key; the key is too short, not a regular file, or readable by others.
    LedgerIntegrityError
        The key file has more than one hard link.
    """
    scratch = _SCRATCH.get()
    if scratch is not None and os.path.realpath(path) == scratch[0]:
        return scratch[1]  # a batch's throw-away copy: its key is held in memory, never written beside it
    env = os.environ.get(KEY_ENVIRONMENT)
    if env is not None:
        if len(env) < MIN_KEY_LENGTH:
            raise TabreleaseError(f"${KEY_ENVIRONMENT} is too short to be a key (at least {MIN_KEY_LENGTH} characters)")
        return env.encode()
    key_path = _key_path(Path(os.path.realpath(path)))
    if not key_path.exists():
        if Path(path).is_file():
            _load(Path(path))  # a file that is no ledger is said to be that first: no key would make it one
        raise TabreleaseError(f"no key for the ledger {path}: expected {key_path} or ${KEY_ENVIRONMENT} (a new ledger "
                              "is made with `tabrelease ledger init FILE`)")
    info = os.stat(key_path)
    if not stat.S_ISREG(info.st_mode):
        raise TabreleaseError(f"the ledger key {key_path} is not a regular file")
    if info.st_mode & 0o077:
        raise TabreleaseError(f"the ledger key {key_path} can be read by others (mode {stat.S_IMODE(info.st_mode):o}); "
                              f"make it owner-only: chmod 600 {key_path}")
    if info.st_nlink > 1:
        raise LedgerIntegrityError(
            f"the ledger key {key_path} has {info.st_nlink} hard links: another name for it could serve a second "
            "copy of the ledger; remove the other links (find / -samefile KEY)")
    key = key_path.read_text().strip()
    if len(key) < MIN_KEY_LENGTH:
        raise TabreleaseError(f"the ledger key {key_path} is too short to be a key (64 hex characters expected)")
    return key.encode()


def _key_id(key: bytes) -> str:
    return hmac.new(key, b"tabrelease ledger key id", hashlib.sha256).hexdigest()[:16]


def init_ledger(path: str | os.PathLike) -> Path:
    """Make a new, empty ledger and (unless $TABRELEASE_LEDGER_KEY gives one) its key, owner-only.

    Refused where the ledger exists, or where the anchor records an earlier ledger at this path (a ledger deleted
    and made anew would restart every dataset's spending from zero).

    Parameters
    ----------
    path : path-like
        The new ledger's file (its folder must exist). The key goes to FILE.key.

    Returns
    -------
    Path
        The ledger's real path (links resolved).

    Raises
    ------
    TabreleaseError
        A ledger or key file already exists there, or the path is a folder or in a missing folder.
    LedgerIntegrityError
        The anchor records an earlier ledger at this path, or the anchor cannot be appended to.
    """
    path = _resolve(path, must_exist=False)
    if path.exists():
        try:
            _load(path)
        except LedgerIntegrityError:  # a ledger, damaged: it exists all the same
            pass
        except TabreleaseError:  # a file that is no ledger is said to be that, not a ledger that exists
            if _seen_here(path) is not None:  # unless the anchor has seen a ledger here: damaged or replaced, it says
                raise
            raise TabreleaseError(f"there is a file at {path}, and it is not a tabrelease ledger: `ledger init` makes "
                                  "a new ledger where there is no file yet") from None
        raise TabreleaseError(f"a ledger already exists at {path}")
    earlier = [line for line in _anchor_lines(path) if line.get("path") == os.fspath(path)]
    if earlier:
        raise LedgerIntegrityError(
            f"the anchor {anchor_path(path)} records an earlier ledger at {path} (id {earlier[-1].get('ledger_id')}, "
            f"{earlier[-1].get('count')} records): a new ledger there would restart spending from zero; restore that "
            "ledger, or choose another path")
    # Signals held over the key and the ledger, then dropped: a SIGTERM between the two had left a key with no
    # ledger, which the next `init` refused, and one after both had ended the command silently with the ledger made
    # (a reviewer's trial). The two take milliseconds; a key made for a ledger that was not is removed.
    from ._signals import deferred_signals

    _refuse_an_unwritable(path)  # its folder: the key's temporary file would be named in the message otherwise
    # The lock is taken first, outside the held signals: waiting for it (up to a minute) can be interrupted.
    with _lock(path), deferred_signals(act=False):
        made_key = _make_key(path)
        try:
            key = ledger_key(path)
            if path.exists():
                raise TabreleaseError(f"a ledger already exists at {path}")
            _write(path, {"version": LEDGER_VERSION, "ledger_id": secrets.token_hex(8), "key_id": _key_id(key),
                          "records": []}, key)
        except BaseException:
            if made_key is not None and not path.exists():
                made_key.unlink(missing_ok=True)
            raise
    return path


def _make_key(path: Path) -> Path | None:
    """Make the ledger's key file (FILE.key), whole or not at all, unless $TABRELEASE_LEDGER_KEY gives the key: the
    key file made, or None."""
    key_path = key_file(path)
    if key_path is None:
        return None
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
    return key_path


# --- the file -------------------------------------------------------------------------------------
def _resolve(path, must_exist: bool = True) -> Path:
    """The ledger's real path (links resolved), so that every way of naming it locks and writes one file; a file
    with other hard links is refused (a rewrite by rename would leave the other names on the old content), and so is a
    link that stands beside an anchor not its target's (`_check_link_beside_an_anchor`)."""
    _check_link_beside_an_anchor(Path(os.fspath(path)))
    path = Path(os.path.realpath(os.fspath(path)))
    if path.is_dir():
        raise TabreleaseError(f"the ledger {path} is a directory; give a file path")
    if not path.parent.exists():
        raise TabreleaseError(f"the ledger's folder {path.parent} does not exist")
    if must_exist and not path.exists():
        earlier = [line for line in _anchor_lines(path) if line.get("path") == os.fspath(path)]
        if earlier:  # `init` would refuse it: the ledger went missing, and its spending with it (a new user's trial)
            raise LedgerIntegrityError(
                f"no ledger at {path}, but the anchor {anchor_path(path)} records one there (id "
                f"{earlier[-1].get('ledger_id')}, {earlier[-1].get('count')} records): it was moved or deleted; "
                "restore it (a new ledger there would restart spending from zero); nothing was charged or set")
        raise TabreleaseError(f"no ledger at {path}; make one with `tabrelease ledger init {path}`")
    if path.exists():
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise TabreleaseError(f"the ledger {path} is not a regular file")
        if info.st_nlink > 1:
            raise LedgerIntegrityError(
                f"the ledger {path} has {info.st_nlink} hard links: each name would become a ledger of its own at the "
                "next write; remove the other links (find / -samefile LEDGER) and keep one name")
    return path


def _check_link_beside_an_anchor(given: Path) -> None:
    """Refuse a ledger named by a symbolic link where an anchor stands beside the link that is not its target's: the
    ledger that anchor records was put aside and the link made to stand in for it (an older copy with its own
    anchor, or an empty folder to `init` in), and verification read the target's anchor and found it intact (a
    reviewer's trial: a budget of 1 spent twice). A link to a ledger with nothing beside it is left alone."""
    target = Path(os.path.realpath(given))
    hop, seen = given, 0
    # Every link of the chain, not only the name given: `current.json -> L.json` with L.json then made a link to
    # an older copy had passed (a review's trial).
    while hop.is_symlink() and seen < 40:
        beside = Path(f"{hop}.anchor")
        if os.path.lexists(beside) and os.path.realpath(beside) != os.path.realpath(f"{target}.anchor"):
            raise LedgerIntegrityError(
                f"the ledger {given} is a link to {target}, but the anchor {beside} stands beside the link {hop}: the "
                "link stands in for the ledger that anchor records; give that ledger's own path, or have an auditor "
                "resolve it (nothing is charged or set)")
        hop, seen = hop.parent / os.readlink(hop), seen + 1


_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextmanager
def _lock(path: Path):
    """Exclusive use of the ledger: a file lock between processes, and a lock between this process's threads
    (an OS file lock need not exclude two threads of one process). `path` is already the real path."""
    from filelock import FileLock

    key = os.fspath(path)
    held = getattr(_HELD_HERE, "paths", None)
    if held is None:
        held = _HELD_HERE.paths = set()
    if key in held:  # this thread holds it already (`holding`, around a charge): taken once
        yield
        return
    from filelock import Timeout

    with _THREAD_LOCKS_GUARD:
        thread_lock = _THREAD_LOCKS.setdefault(key, threading.Lock())
    deadline = time.monotonic() + LOCK_TIMEOUT_SECONDS
    busy = TabreleaseError(f"the ledger {path} is in use by another process (waited {LOCK_TIMEOUT_SECONDS} s for "
                           "its lock); try again when it is done (nothing was charged or set)")
    with thread_lock:
        try:
            file_lock = FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_SECONDS, mode=0o600)
            file_lock.acquire()
        except Timeout:
            raise busy from None
        try:
            with _folder_lock(path.parent, deadline, busy):
                held.add(key)
                try:
                    yield
                finally:
                    held.discard(key)
        finally:
            file_lock.release()


@contextmanager
def _folder_lock(folder: Path, deadline: float, busy: TabreleaseError):
    """An exclusive flock on the ledger's folder, beside its lock file: a lock file deleted while it is held (a
    clean-up of stale locks, say) lets the next process lock a new file of that name while the first still holds
    the old one, and a reviewer's loop deleting it lost charges of published releases. A folder cannot be deleted
    while the ledger is in it. Where flock is not (Windows, whose open files cannot be deleted), the lock file
    alone, as where the folder cannot be opened for reading (searchable only: its files still open)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        handle = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield
        return
    try:  # closing the handle releases the flock
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise busy from None
                time.sleep(0.01)
            except OSError:  # a file system that cannot flock a folder (NFS emulates flock and refuses: EBADF)
                break
        yield
    finally:
        os.close(handle)


# The ledgers this thread holds the lock of (`_lock` takes a lock its thread holds once).
_HELD_HERE = threading.local()


@contextmanager
def holding(path):
    """The ledger's lock, taken here and kept over the block (the charge within it takes it no more): so that the
    wait for it (up to LOCK_TIMEOUT_SECONDS, while another release charges) is outside the signals a charge holds,
    and a Ctrl-C or SIGTERM while waiting ends the command with nothing charged (a review's trial: a SIGTERM in the
    wait was acted on after the charge, the budget spent and nothing published).

    Parameters
    ----------
    path : path-like
        The ledger.

    Yields
    ------
    None
    """
    path = _resolve(path)
    _load(path)  # a file that is no ledger is refused before its lock file is made (nothing written)
    with _lock(path):
        yield


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _seen_here(path: Path) -> dict | None:
    """The anchor's last line for a ledger at `path`, or None (none, or the anchor unreadable)."""
    try:
        seen = [line for line in _anchor_lines(path) if line.get("path") in (os.fspath(path), os.path.realpath(path))]
    except (TabreleaseError, OSError):  # the anchor itself unreadable: the message stays the plain one
        return None
    return seen[-1] if seen else None


def _known_here(path: Path) -> str:
    """Where a file that is no ledger stands at a path the anchor has seen a ledger at: the words that say so (a
    ledger damaged or replaced, not a wrong path); else what to give instead."""
    seen = _seen_here(path)
    if seen is None:
        return "; give the path of a ledger (`tabrelease ledger init FILE` makes one)"
    return (f"; its anchor {anchor_path(path)} records a ledger here (id {seen.get('ledger_id')}, "
            f"{seen.get('count')} records): it was damaged or replaced, restore it from a copy")


def _mac(key: bytes, previous: str, record: dict) -> str:
    body = {k: v for k, v in record.items() if k != "mac"}
    return hmac.new(key, previous.encode() + b"|" + _canonical(body), hashlib.sha256).hexdigest()


def _head_mac(key: bytes, count: int, last: str, ledger_id: str | None = None, scratch: bool = False,
              anchor: str | None = None) -> str:
    text = f"head|{count}|{last}" if ledger_id is None else f"head|{count}|{last}|{ledger_id}|anchored"
    # Which anchor the ledger is bound to (`anchor_binding`), under the MAC, where the ledger records it.
    text += "" if anchor is None else f"|anchor={anchor}"
    # A batch's throw-away copy says so in its head (`copy_ledger`), under the MAC: taking the mark off takes the key.
    return hmac.new(key, (text + ("|scratch" if scratch else "")).encode(), hashlib.sha256).hexdigest()


def _scratch(data: dict) -> bool:
    """Whether the ledger is a batch's throw-away copy (`copy_ledger`): its head says so."""
    return bool(data["head"].get("scratch")) if isinstance(data.get("head"), dict) else False


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TabreleaseError(f"{path} is not a tabrelease ledger (not valid JSON){_known_here(path)}") from None
    except RecursionError:  # the JSON parser follows nesting by recursion
        raise TabreleaseError(f"{path} is not a tabrelease ledger (it nests too deeply to read){_known_here(path)}") \
            from None
    if not isinstance(data, dict):
        raise TabreleaseError(f"{path} is not a tabrelease ledger (its JSON is a list or a value, not a ledger)"
                              f"{_known_here(path)}")
    if data.get("version") not in READABLE_VERSIONS:
        # Say which versions are read, not what the file holds beyond its version: a ledger's contents stay out of
        # error messages.
        if "version" not in data:  # JSON of something else: no ledger's version field at all
            raise TabreleaseError(f"{path} is not a tabrelease ledger (its JSON has no ledger's version field)"
                                  f"{_known_here(path)}")
        readable = " or ".join(map(str, READABLE_VERSIONS))
        raise TabreleaseError(f"{path} is not a tabrelease ledger of version {readable} (it has another version)"
                              f"{_known_here(path)}")
    if not isinstance(data.get("records"), list) or not isinstance(data.get("key_id"), str) \
            or not isinstance(data.get("head"), dict) \
            or (data["version"] >= 3 and not isinstance(data.get("ledger_id"), str)):
        raise LedgerIntegrityError(f"the ledger {path} is damaged: its records, id, key id or head are missing")
    return data


def _ledger_id(data: dict) -> str | None:
    return data.get("ledger_id") if data.get("version", 2) >= 3 else None


def _problems(data: dict, key: bytes, path: Path | None = None, anchor_lines: list[dict] | None = None) -> list[str]:
    """Everything that breaks the chain or disagrees with the anchor (its lines read before the ledger: a writer
    writes the ledger first, so what was read can only be behind it); empty when the ledger is intact."""
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
    count = len(data["records"])
    if head.get("count") != count or not isinstance(head.get("mac"), str) or not hmac.compare_digest(
            head["mac"], _head_mac(key, count, previous, _ledger_id(data), _scratch(data), _bound(data))):
        out.append("the end of the ledger does not match its head: records were removed from or added to its end")
    if path is not None and not out:
        # A batch's throw-away copy has its own anchor beside it (`copy_ledger`), whatever its ledger's was.
        problem = None if _scratch(data) else _binding_problem(path, data, anchor_binding())
        out.extend([problem] if problem else _anchor_problems(path, data, key, anchor_lines))
    return out


def _binding_problem(path: Path, data: dict, used: str | None) -> str | None:
    """What is wrong with the anchor in use (`used`, as `anchor_binding` gives it) against the one the ledger is bound
    to, or None. The two are compared as files: the same anchor named two ways (the variable naming FILE.anchor, a
    bind mount) is the same; an anchor the ledger is bound to that this machine cannot see (another host's mount of
    a shared one) cannot be told from another, and is let be."""
    bound = _bound(data)
    if bound is None or used is None:
        return None
    bound_file, used_file = (f"{path}.anchor" if b == "beside" else b for b in (bound, used))
    if os.path.realpath(bound_file) == os.path.realpath(used_file):
        return None
    try:
        if os.path.samefile(bound_file, used_file):
            return None
    except OSError:  # one of them is not there
        if not os.path.exists(bound_file):
            return None
    return (f"the ledger is anchored at {_binding_words(bound, path)}, but the anchor in use is "
            f"{_binding_words(used, path)}: an anchor put in its place would let an older copy of the ledger pass; "
            f"use the ledger's own anchor (set or unset ${ANCHOR_ENVIRONMENT} to name it)")


def _bound(data: dict) -> str | None:
    """The anchor the ledger records it is bound to (None: a ledger written before ledgers recorded it)."""
    value = data.get("anchor")
    return value if isinstance(value, str) else None


def anchor_binding() -> str | None:
    """The anchor a ledger written now is bound to, as the ledger records it: "beside" (FILE.anchor, which moves
    with the ledger) or the real path of $TABRELEASE_LEDGER_ANCHOR. None inside a batch's prediction, whose
    throw-away copy has a throw-away anchor (`anchored_at`). A reviewer's trial restored an old copy of a ledger and
    pointed $TABRELEASE_LEDGER_ANCHOR at a copy of its append-only anchor without the last line (or put that copy
    beside the ledger): the copy verified and was charged again. A ledger records its anchor under its head's MAC,
    and an anchor other than that one is refused (`_binding_problem`).

    Returns
    -------
    str or None
    """
    if _ANCHOR_OVERRIDE.get() is not None:
        return None
    return _binding_from_environment()


def _binding_from_environment() -> str:
    """`anchor_binding` as the environment alone says it (a batch's prediction checks the real ledger's so)."""
    env = _environment_anchor()
    return "beside" if env is None else os.path.realpath(env)


def _binding_words(binding: str, path) -> str:
    return f"{path}.anchor (beside it)" if binding == "beside" else f"{binding} (${ANCHOR_ENVIRONMENT})"


def _finite_non_negative(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _check_record(record: dict) -> str:
    kind = record.get("kind")
    if kind not in ("budget", "release", "failure") or not isinstance(record.get("dataset"), str):
        return "unknown kind or no dataset"
    try:
        if kind == "budget":
            _budget_terms(record)
        if kind == "release":
            _release_guarantee(record)
            if not isinstance(record.get("fingerprint"), str):
                return "a release must have a fingerprint"
            also = record.get("fingerprints_also", [])
            if not isinstance(also, list) or not all(isinstance(f, str) for f in also):
                return "a release's other fingerprints must be a list of texts"
            margins = record.get("margin_prints", [])
            if not isinstance(margins, list) or not all(
                    isinstance(m, list) and len(m) == 2 and type(m[0]) is int and m[0] >= 1 and _is_print(m[1])
                    for m in margins):
                return "a release's margins' fingerprints must be a list of [variables, fingerprint] pairs"
            sources = record.get("source_prints", [])
            if not isinstance(sources, list) or not all(map(_is_print, sources)):
                return "a release's source files' fingerprints must be a list of 64 hexadecimal characters each"
            attributes = record.get("attribute_prints", {})
            if not isinstance(attributes, dict) or not all(isinstance(n, str) and _is_print(f)
                                                           for n, f in attributes.items()):
                return "a release's protected columns' fingerprints must map names to 64 hexadecimal characters"
    except TabreleaseError as exc:
        return str(exc)
    return ""


def _is_print(value) -> bool:
    """Whether `value` is a fingerprint as records keep them: 64 lower-case hexadecimal characters."""
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _read_verified(path: Path, key: bytes, *, writing: bool = False) -> dict:
    lines = _anchor_lines(path)  # first: the ledger read next can only be ahead of it, never behind
    data = _load(path)
    problems = _problems(data, key, path, lines)
    if problems:
        raise _fails_verification(path, problems)
    if writing:  # a copy is read (a backup verifies) but never written
        _refuse_a_copy(path, data, lines, key)
    return data


def _fails_verification(path: Path, problems: list[str]) -> LedgerIntegrityError:
    """The refusal of a ledger that fails verification: its first problem, how many more, and what to run."""
    more = f"; {len(problems) - 1} more" if len(problems) > 1 else ""
    return LedgerIntegrityError(f"the ledger {path} fails verification ({problems[0]}{more}); nothing is spent or set "
                                f"until an auditor resolves it (`tabrelease ledger verify {path}`)")


def _refuse_a_copy(path: Path, data: dict, lines: list[dict], key: bytes | None = None) -> None:
    """Raise LedgerIntegrityError where the ledger at `path` is a copy of one still standing (`_copied_from`), or a
    batch's throw-away copy (`copy_ledger`) outside the block that made it (`scratch_copy`)."""
    scratch = _SCRATCH.get()
    if _scratch(data) and (scratch is None or os.path.realpath(path) != scratch[0]):
        # The copy's anchor lines name the copy, so it would pass for the ledger (a reviewer charged one a killed
        # dry run had left behind, with $TABRELEASE_LEDGER_ANCHOR pointing at its anchor). The mark is in its head,
        # under the head's MAC: taking it off takes the key (a mark on the anchor's lines alone was taken off by
        # deleting them, and a version-2 ledger's copy had none: a second review).
        raise LedgerIntegrityError(
            f"the ledger {path} is a throw-away copy that a batch's prediction made (its head says so): charging it "
            "would give each dataset a second budget; nothing is spent or set")
    original = _copied_from(path, data, lines, key)
    if original is not None:
        raise LedgerIntegrityError(
            f"the ledger {path} is a copy of the one its anchor last saw at {original}, which is still there: "
            "charging or setting both would give each dataset two budgets; use that one (a ledger moved, not "
            "copied, is accepted where it now stands); nothing is spent or set")


def _write_private(path: Path, text: str) -> None:
    """Write owner-only (0600), whole or not at all: a private temporary file, flushed to disk, renamed (after the
    temporary files of writers that were killed are removed)."""
    remove_dead_temporaries(path.parent)
    tmp = temporary_path(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _sync_folder(path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _sync_folder(path: Path) -> None:
    """The rename of `path` on disk before the anchor says so, where the system allows it. The write is made by
    then: a folder that cannot be opened or synced (searchable but not readable, or a file system that does not sync
    folders) is warned of, not raised, since an error here had ended a charged release as refused, "nothing
    charged", with its charge in the ledger and no anchor line (a reviewer's trial)."""
    try:
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        import warnings

        try:  # under -W error a warning raises: here that would unsay the write made
            warnings.warn(f"the ledger {path} was written, but its folder could not be synced to disk "
                          f"({exc.strerror or type(exc).__name__}): a power cut now could lose the write",
                          RuntimeWarning, stacklevel=4)
        except Exception:
            pass


def _refuse_an_unwritable(path: Path) -> None:
    """Refuse, before anything is written, a ledger its owner may not write (a user's chmod 400 was charged anyway:
    the rename replaced it, and it came back 0600) or one whose folder cannot take the new file (the message named
    the temporary file). The owner's write bit is read, not access(2): root may write anything."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not mode & stat.S_IWUSR:
        raise TabreleaseError(f"the ledger {path} is read-only (its owner may not write it): make it writable to "
                              "charge it or set a budget; nothing is spent or set")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise TabreleaseError(f"cannot write the ledger {path}: its folder {path.parent} is not writable; nothing is "
                              "spent or set")


def _write(path: Path, data: dict, key: bytes) -> None:
    if data.get("version", 2) < LEDGER_VERSION:  # a version 2 ledger gets an id and an anchor from now on
        data["version"] = LEDGER_VERSION
        data["ledger_id"] = _upgraded_id(key, data)
    last = data["records"][-1]["mac"] if data["records"] else ""
    count = len(data["records"])
    scratch = _scratch(data)
    binding = anchor_binding()
    if _bound(data) is None and binding is not None:  # bound from its first write on
        data["anchor"] = binding
    data["head"] = {"count": count, "mac": _head_mac(key, count, last, data["ledger_id"], scratch, _bound(data)),
                    **({"scratch": True} if scratch else {})}
    _refuse_an_unwritable(path)
    # The anchor is opened before the ledger is written (an anchor that cannot be opened refuses the write whole),
    # and its line appended after: a crash between the two leaves the ledger ahead of its anchor, which is allowed
    # (the next write anchors it); an anchor ahead of its ledger is a rollback.
    with _open_anchor(path) as anchor:
        _write_private(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
        try:
            _append_anchor(anchor, path, data, key)
        except OSError as exc:  # the write stands (a ledger ahead of its anchor is allowed): said, not raised
            import warnings

            warnings.warn(f"the ledger {path} was written but its anchor {anchor_path(path)} could not be appended "
                          f"to ({exc.strerror}); the next write anchors it", RuntimeWarning, stacklevel=3)


def _upgraded_id(key: bytes, data: dict) -> str:
    """The id a version-2 ledger takes at its first write: drawn from its key and its first record's MAC, not at
    random, so that two copies of one version-2 ledger take one id and the anchor tells them apart as copies (a
    reviewer copied a version-2 ledger and its key, and each copy, given a random id of its own at its first write,
    spent the whole budget again, both verifying, even beside a shared append-only anchor)."""
    first = data["records"][0].get("mac", "") if data["records"] else ""
    return hmac.new(key, f"version-2 ledger upgraded|{first}".encode(), hashlib.sha256).hexdigest()[:16]


def _append(data: dict, key: bytes, record: dict) -> dict:
    previous = data["records"][-1]["mac"] if data["records"] else ""
    record = {**record, "time": _now(), "process": os.getpid()}
    record["mac"] = _mac(key, previous, record)
    data["records"].append(record)
    return record


# --- the anchor -----------------------------------------------------------------------------------
_ANCHOR_OVERRIDE: ContextVar[Path | None] = ContextVar("tabrelease_ledger_anchor", default=None)
# Inside `scratch_copy`: (the copy's real path, the ledger's key). The copy may be charged only there.
_SCRATCH: ContextVar[tuple[str, bytes] | None] = ContextVar("tabrelease_ledger_scratch", default=None)


def anchor_path(path: str | os.PathLike) -> Path:
    """Where the ledger's heads are appended: $TABRELEASE_LEDGER_ANCHOR, or FILE.anchor beside the ledger (a
    batch's dry run points its throw-away copy at a throw-away anchor with `anchored_at`).

    Parameters
    ----------
    path : path-like
        The ledger.

    Returns
    -------
    Path
        The anchor file (it need not exist yet).

    Raises
    ------
    TabreleaseError
        $TABRELEASE_LEDGER_ANCHOR is not an absolute path.
    """
    override = _ANCHOR_OVERRIDE.get()
    if override is not None:
        return override
    env = _environment_anchor()
    return Path(env) if env else Path(f"{os.path.realpath(path)}.anchor")


def _environment_anchor() -> str | None:
    """$TABRELEASE_LEDGER_ANCHOR, or None where it is not set (or empty); a relative path is refused."""
    env = os.environ.get(ANCHOR_ENVIRONMENT)
    if env and not os.path.isabs(env):
        raise TabreleaseError(f"${ANCHOR_ENVIRONMENT} must be an absolute path (a relative one would name another "
                              f"file from every folder), not {env!r}")
    return env or None


@contextmanager
def anchored_at(anchor: Path):
    """Within this block, every ledger's anchor is `anchor` (a dry run's copy must not append to the real one).

    A context manager (per thread and task: a context variable).

    Parameters
    ----------
    anchor : path
        The anchor file used in the block.

    Yields
    ------
    None
    """
    token = _ANCHOR_OVERRIDE.set(Path(anchor))
    try:
        yield
    finally:
        _ANCHOR_OVERRIDE.reset(token)


@contextmanager
def scratch_copy(path, folder: Path):
    """Within this block, a throw-away copy of the ledger (`copy_ledger`) in `folder` can be charged, with its anchor
    `folder / "anchor"` and the ledger's key held in memory: spending on it predicts spending on the ledger and
    changes nothing. Outside the block the copy is refused for writing, and no key is on disk beside it.

    A context manager (per thread and task: context variables).

    Parameters
    ----------
    path : path-like
        The ledger.
    folder : Path
        An existing, owner-only folder for the copy.

    Yields
    ------
    Path
        The copy of the ledger.
    """
    # The copy is written owner-writable whatever the ledger's mode: the prediction must refuse what the run will
    # (a read-only ledger said "would be made" in a dry run, then "refused" in the run: a review).
    _refuse_an_unwritable(_resolve(path))
    copy = copy_ledger(path, folder)
    token = _SCRATCH.set((os.path.realpath(copy), ledger_key(path)))
    try:
        with anchored_at(Path(folder) / "anchor"):
            yield copy
    finally:
        _SCRATCH.reset(token)


def copy_ledger(path, folder: Path) -> Path:
    """A throw-away copy of the ledger and its anchor in `folder`, charged inside `scratch_copy` only: its head is
    marked a copy's (under its MAC), so that it is refused for writing elsewhere, and its key is not copied.

    Parameters
    ----------
    path : path-like
        The ledger copied (read, not locked or verified here).
    folder : Path
        An existing folder; the copy is FOLDER/ledger.json, with FOLDER/anchor.

    Returns
    -------
    Path
        The copy of the ledger.

    Raises
    ------
    TabreleaseError
        No ledger at `path`, or it is not a ledger.
    LedgerIntegrityError
        The ledger has other hard links, is damaged, or its anchor is not a regular file.
    """
    path = _resolve(path)
    lines = _anchor_lines(path)  # before the ledger, as every reader
    data = _load(path)
    _refuse_a_copy(path, data, lines)  # the copy's lines below name the copy: it would pass for the ledger
    # The copy has an anchor of its own, so the real ledger's binding is checked here: the prediction must refuse
    # what the run would (a review's trial: a dry run said "would be made" where the run refused, exit 6).
    problem = _binding_problem(path, data, _binding_from_environment())
    if problem:
        raise _fails_verification(path, [problem])
    key = ledger_key(path)
    # The copy's head is marked a throw-away copy's, under its MAC (`_refuse_a_copy`); a head that did not verify is
    # marked with its MAC as it was, so that the copy fails as the ledger does (a prediction must not pass a ledger
    # that the run would refuse).
    ledger_id = _ledger_id(data)
    count, last = len(data["records"]), str(data["records"][-1].get("mac", "") if data["records"] else "")
    held = isinstance(data["head"].get("mac"), str) and hmac.compare_digest(
        data["head"]["mac"], _head_mac(key, count, last, ledger_id, _scratch(data), _bound(data)))
    data["head"] = {**data["head"], "scratch": True,
                    **({"mac": _head_mac(key, count, last, ledger_id, True, _bound(data))} if held else {})}
    copy = Path(folder) / "ledger.json"
    _write_private(copy, json.dumps(data, indent=2, allow_nan=False) + "\n")
    anchor = Path(folder) / "anchor"
    # The copy's lines name the copy's path (a line's MAC does not cover its path: the path only tells which
    # ledger last stood there, which the key of another ledger could not check anyway).
    with os.fdopen(os.open(anchor, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as handle:
        for line in lines:  # this ledger's lines wherever it stood, and what else stood at its path (owner-only)
            if line.get("path") == os.fspath(path) or (ledger_id is not None and line.get("ledger_id") == ledger_id):
                handle.write(json.dumps({**line, "path": os.fspath(copy)}, sort_keys=True) + "\n")
    return copy


def scratch_copy_of(path) -> bool:
    """Whether the ledger at `path` is a batch's throw-away copy (`copy_ledger`), which is never written outside the
    prediction that made it: `ledger verify` says so.

    Parameters
    ----------
    path : path-like
        The ledger.

    Returns
    -------
    bool
    """
    return _scratch(_load(_resolve(path)))


_MAX_ANCHOR_BYTES = 256 * 2**20


def _anchor_lines(path: Path) -> list[dict]:
    anchor = anchor_path(path)
    if not anchor.exists():
        return []
    info = os.stat(anchor)
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_ANCHOR_BYTES:
        raise LedgerIntegrityError(f"the ledger anchor {anchor} is not a regular file of at most 256 MiB")
    lines = []
    with open(anchor, encoding="utf-8", errors="replace") as handle:
        for text in handle:
            try:
                line = json.loads(text)
            except (json.JSONDecodeError, RecursionError):
                line = {"damaged": True}
            lines.append(line if isinstance(line, dict) else {"damaged": True})
    return lines


def _anchor_mac(key: bytes, line: dict) -> str:
    return hmac.new(key, b"anchor|" + _canonical({k: v for k, v in line.items() if k not in ("mac", "path")}),
                    hashlib.sha256).hexdigest()


@contextmanager
def _open_anchor(path: Path):
    anchor = anchor_path(path)
    try:
        fd = os.open(anchor, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except PermissionError:  # permissions, not a failed verification: a plain refusal (exit 2)
        raise TabreleaseError(f"cannot append to the ledger's anchor {anchor}: permission denied (make it writable "
                              "by its owner); nothing was written") from None
    except OSError as exc:
        raise LedgerIntegrityError(f"cannot append to the ledger's anchor {anchor}: {exc.strerror}; nothing was "
                                   "written") from None
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        size = os.fstat(fd).st_size
        if size:  # a line cut by a crash would swallow the next one: it is ended first
            with open(anchor, "rb") as reader:
                reader.seek(size - 1)
                if reader.read(1) != b"\n":
                    handle.write("\n")
        yield handle


def _append_anchor(handle, path: Path, data: dict, key: bytes) -> None:
    count = len(data["records"])
    line = {"ledger_id": data["ledger_id"], "path": os.fspath(path), "count": count,
            "last": data["records"][-1]["mac"] if count else "", "time": _now()}
    line["mac"] = _anchor_mac(key, line)
    handle.write(json.dumps(line, sort_keys=True) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def _anchor_problems(path: Path, data: dict, key: bytes, lines: list[dict] | None = None) -> list[str]:
    ledger_id = _ledger_id(data)
    lines = _anchor_lines(path) if lines is None else lines
    anchor = anchor_path(path)
    if ledger_id is None:  # a version 2 ledger: anchored from its next write, unless one already stood here
        seen = [line for line in lines if line.get("path") == os.fspath(path)]
        if seen:
            return [f"the anchor {anchor} saw a ledger of version 3 at this path (id {seen[-1].get('ledger_id')}, "
                    f"{seen[-1].get('count')} records): an older copy of version 2 was put back"]
        return []
    mine = []
    for number, line in enumerate(lines, 1):
        if line.get("ledger_id") != ledger_id:
            continue
        if not isinstance(line.get("mac"), str) or not hmac.compare_digest(line["mac"], _anchor_mac(key, line)):
            return [f"line {number} of the anchor {anchor} names this ledger but its MAC fails: it was forged or edited"]
        mine.append(line)
    here = [line for line in lines if line.get("path") == os.fspath(path)]
    if here and here[-1].get("ledger_id") != ledger_id:
        return [f"the anchor {anchor} last saw another ledger at this path (id {here[-1].get('ledger_id')}, "
                f"{here[-1].get('count')} records): it was deleted and a new one made in its place"]
    count = len(data["records"])
    if not mine:
        return [f"the anchor {anchor} has no record of this ledger (id {ledger_id}): it was removed, or this is a "
                "copy made elsewhere"]
    seen = max(int(line.get("count", 0)) for line in mine)
    if seen > count:
        return [f"the ledger has {count} records where its anchor {anchor} saw {seen}: an older copy was put back "
                "(the charges since are missing)"]
    for line in mine:
        at = int(line.get("count", 0))
        expected = data["records"][at - 1]["mac"] if at else ""
        if not hmac.compare_digest(str(line.get("last", "")), expected):
            return [f"record {at} differs from what the anchor {anchor} saw: the records were rewritten"]
    return []  # a ledger ahead of its anchor: a write interrupted between the two, anchored at the next


def copied_from(path) -> str | None:
    """Where the ledger at `path` was copied from: the path its anchor last saw it written at, where a ledger of the
    same id still stands (`_a_copy_of`); None where it is not such a copy. A copy verifies (a backup is checked so)
    but is never written: charging or setting it is refused (`_read_verified` for a write), since charging both
    would give each dataset two budgets.

    Parameters
    ----------
    path : path-like
        The ledger.

    Returns
    -------
    str or None

    Raises
    ------
    TabreleaseError
        No ledger at `path`, or it is not a ledger.
    LedgerIntegrityError
        The anchor is not a regular file.
    """
    path = _resolve(path)
    return _copied_from(path, _load(path), _anchor_lines(path))


def _copied_from(path: Path, data: dict, lines: list[dict], key: bytes | None = None) -> str | None:
    ledger_id = _ledger_id(data)
    if ledger_id is None and key is not None and data.get("version", 2) < LEDGER_VERSION:
        # A version-2 ledger, about to be written: the id its upgrade takes (`_upgraded_id`), which a copy of it
        # upgraded first holds already.
        ledger_id = _upgraded_id(key, data)
    if ledger_id is None:
        return None
    mine = [line for line in lines if line.get("ledger_id") == ledger_id]
    last = mine[-1].get("path") if mine else None
    return last if _a_copy_of(path, last, ledger_id) else None


def _a_copy_of(path: Path, last_path, ledger_id: str) -> bool:
    """Whether the ledger at `path` is a copy of one still at `last_path` (where the anchor last saw this ledger id
    written): another file there, holding a ledger of the same id. A ledger moved (nothing left there) or reached by
    another name of the same file (a symbolic link on the way) is not. A copy of the folder, anchor and all, would
    otherwise verify as intact and spend its budget a second time (a new user's trial)."""
    if not isinstance(last_path, str) or not last_path:
        return False
    try:
        if os.path.samefile(last_path, path):
            return False
        with open(last_path, encoding="utf-8") as handle:
            other = json.load(handle)
    except (OSError, ValueError, RecursionError):  # nothing there, or not a ledger: moved, or replaced
        return False
    return isinstance(other, dict) and _ledger_id(other) == ledger_id


# --- guarantees, budgets and their costs ------------------------------------------------------------
def _release_guarantee(record: dict) -> PrivacyGuarantee:
    """A release record's guarantee: its own field, or (records of version 2) its neighbours, public total,
    epsilon and delta."""
    if "guarantee" in record:
        return PrivacyGuarantee.from_dict(record["guarantee"])
    epsilon, delta = record.get("epsilon"), record.get("delta", 0.0)
    if not (_finite_non_negative(epsilon) and epsilon > 0 and _finite_non_negative(delta) and delta < 1):
        raise TabreleaseError("a release must have a positive finite epsilon and a delta in [0, 1)")
    loss = PrivacyLoss(kind=APPROXIMATE if delta > 0 else PURE, epsilon=epsilon, delta=delta)
    # Before guarantees were recorded, randomized response was written down with whatever neighbours were asked
    # for (its guarantee is local), and sensitive-attributes as replace (its guarantee protects attributes the
    # record does not name): read as what they were, the second under a unit no budget covers.
    if record.get("mechanism") == "randomized-response":
        return PrivacyGuarantee(unit=PrivacyUnit(kind=LOCAL), loss=loss)
    if record.get("mechanism") == "sensitive-attributes":
        return PrivacyGuarantee(unit=PrivacyUnit(kind=SENSITIVE, attributes=(UNRECORDED_ATTRIBUTES,)), loss=loss)
    if record.get("neighbours") == REPLACE:
        return PrivacyGuarantee(unit=PrivacyUnit(kind=REPLACE), loss=loss)
    if record.get("total_public"):
        return PrivacyGuarantee(unit=PrivacyUnit(kind=REPLACE), loss=group_loss(loss, 2))
    return PrivacyGuarantee(unit=PrivacyUnit(kind=ADD_REMOVE), loss=loss)


# The attributes of a sensitive-attributes release recorded before guarantees were: not a variable name.
UNRECORDED_ATTRIBUTES = "(attributes not recorded)"


def _budget_terms(record: dict) -> tuple[PrivacyUnit, str, float, float, float | None]:
    """(unit, accounting, epsilon, delta, rho) of a budget record; epsilon is NaN for a budget in rho alone."""
    unit = PrivacyUnit.from_dict(record["unit"]) if "unit" in record else PrivacyUnit(
        kind=record.get("neighbours", ADD_REMOVE))
    if unit.kind not in BUDGET_UNITS:
        raise TabreleaseError(f"a budget is declared for one of {', '.join(BUDGET_UNITS)}, not {unit.kind}")
    accounting = record.get("accounting", BASIC)
    delta = record.get("delta", 0.0)
    if accounting not in ACCOUNTINGS or not (_finite_non_negative(delta) and delta < 1):
        raise TabreleaseError("a budget has basic or zcdp accounting and a delta in [0, 1)")
    if accounting == BASIC:
        epsilon = record.get("epsilon")
        if not (_finite_non_negative(epsilon) and epsilon > 0):
            raise TabreleaseError("a budget must have a positive finite epsilon")
        return unit, BASIC, float(epsilon), float(delta), None
    rho = record.get("rho")
    epsilon = record.get("epsilon")
    if not (_finite_non_negative(rho) and rho > 0) or not (epsilon is None or _finite_non_negative(epsilon)):
        raise TabreleaseError("a zCDP budget must have a positive finite rho")
    return unit, ZCDP, float("nan") if epsilon is None else float(epsilon), float(delta), float(rho)


def _releases(data: dict, dataset: str) -> list[dict]:
    return [r for r in data["records"] if r["kind"] == "release" and r["dataset"] == dataset]


def _budgets(data: dict) -> dict[str, dict]:
    out = {}
    for record in data["records"]:
        if record["kind"] == "budget":
            out[record["dataset"]] = record  # the latest budget set for a dataset holds
    return out


def _costs(releases: list[dict], unit: PrivacyUnit, accounting: str) -> list[tuple[float, float]]:
    """Each release's cost under the unit and accounting; raises GuaranteeMismatch for one that has none, naming
    it (it is a release already recorded)."""
    out = []
    for record in releases:
        try:
            out.append(cost_under_budget(under_unit(_release_guarantee(record), unit), accounting))
        except GuaranteeMismatch as exc:
            raise GuaranteeMismatch(f"a release already recorded ({record.get('time')}, {record.get('mechanism')}): "
                                    f"{exc}") from None
    return out


def _display_unit(data: dict, dataset: str) -> PrivacyUnit | None:
    """The unit a dataset without a budget is summed under: the first of add-remove, replace and the sensitive
    units of its releases under which every release has a guarantee (None: no common unit)."""
    releases = _releases(data, dataset)
    candidates = [PrivacyUnit(kind=ADD_REMOVE), PrivacyUnit(kind=REPLACE)] + [
        g.unit for g in map(_release_guarantee, releases) if g.unit.kind == SENSITIVE]
    for unit in candidates:
        try:
            _costs(releases, unit, BASIC)
        except GuaranteeMismatch:
            continue
        return unit
    return None


def _sum(values) -> float:
    return math.fsum(values)


def _within(spent: float, budget: float) -> bool:
    return spent <= budget * (1 + _SLACK)


# --- what a release does --------------------------------------------------------------------------
def table_fingerprint(table: ContingencyTable, key: bytes) -> str:
    """HMAC-SHA256, under the ledger's key, of the table's variables, level labels and non-zero cells (each as its
    level codes, in lexicographic order, with its count): the same for one table however it came in, as cells, as
    one row per person, or as a long table of distinct records with counts, and never listing every cell.

    Parameters
    ----------
    table : ContingencyTable
        A table held as cells, or as records (`MicrodataTable`, with or without weights).
    key : bytes
        The ledger's key (`ledger_key`).

    Returns
    -------
    str
        64 hex characters; equal tables (same variables, labels and counts) have equal fingerprints.
    """
    return _cells_digest(table, key, tuple(range(len(table.variables))), b"")


def _cells_digest(table, key: bytes, order: tuple[int, ...], prefix: bytes) -> str:
    """HMAC-SHA256 of `prefix`, the variables' names and level labels in `order`, and the non-zero cells as their
    level codes in that order (in lexicographic order) with their counts."""
    content = {"variables": [table.variables[a] for a in order],
               "levels": [list(map(str, table.levels[a])) for a in order]}
    if getattr(table, "held_as_cells", True):
        counts = np.transpose(np.asarray(table.counts), order)
        rows = np.argwhere(counts > 0)  # C order: the cells' codes in lexicographic order
        counts = counts[counts > 0]
    else:
        rows, counts = table.distinct_records()  # in lexicographic order of the given order
        if order != tuple(range(len(order))):
            rows = np.asarray(rows)[:, order]
            ranked = np.lexsort(rows.T[::-1]) if len(rows) else np.arange(0)
            rows, counts = rows[ranked], np.asarray(counts)[ranked]
    digest = hmac.new(key, prefix + json.dumps(content, separators=(",", ":")).encode(), hashlib.sha256)
    digest.update(np.ascontiguousarray(rows, dtype="<u4").tobytes())
    digest.update(np.ascontiguousarray(counts, dtype="<i8").tobytes())
    return digest.hexdigest()


# Release records that carry the multiset fingerprint say so ("prints": 2); records made before it do not.
PRINTS_VERSION = 2


def multiset_fingerprint(table, key: bytes) -> str:
    """HMAC-SHA256, under the ledger's key, of the table's variables, level labels and its records' multiset sums
    (`aggregation.record_lanes`: per lane, the sum over records of a 64-bit hash of the record, modulo 2^64). Sums
    add, so it is computed in one streaming pass over a file of records, in any order, on any engine, and equals
    the same table's when held as cells or as records: what recognises a table counted from its file (whose
    distinct records are never listed, so `table_fingerprint` is not computed for it). Every release records it.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable
    key : bytes

    Returns
    -------
    str
        64 hex characters.
    """
    from .tables.aggregation import table_lanes

    content = {"variables": list(table.variables), "levels": [list(map(str, lv)) for lv in table.levels]}
    digest = hmac.new(key, b"multiset-v1:" + json.dumps(content, separators=(",", ":")).encode(), hashlib.sha256)
    digest.update(b"".join(int(lane).to_bytes(8, "little") for lane in table_lanes(table)))
    return digest.hexdigest()


def canonical_multiset_fingerprint(table, key: bytes) -> str:
    """HMAC-SHA256, under the ledger's key, of the table's variables' names (NFC, sorted) and its records' canonical
    multiset sums (`aggregation.table_canonical_lanes`: each record hashed by its variables' names and its labels,
    NFC-normalised, not by their positions). Computed for every table, a table counted from its file included (in
    the pass that counts it), it is the same whatever order its columns come in, whatever levels are declared that
    no one is in, and whether its names and labels are written composed or decomposed: a reviewer gave the same
    records a second budget by declaring 9,000 unused levels (which took the table past the cells held, so that only
    the multiset print, which names every declared level, was recorded), and another by writing the file in NFD.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable
    key : bytes

    Returns
    -------
    str
        64 hex characters.
    """
    from .tables._text import nfc
    from .tables.aggregation import table_canonical_lanes

    names = sorted(nfc(v) for v in table.variables)
    digest = hmac.new(key, b"canonical-multiset-v1:" + json.dumps(names, separators=(",", ":")).encode(),
                      hashlib.sha256)
    digest.update(b"".join(int(lane).to_bytes(8, "little") for lane in table_canonical_lanes(table)))
    return digest.hexdigest()


def order_free_fingerprint(table, key: bytes) -> str | None:
    """HMAC-SHA256, under the ledger's key, of the table with its variables in the order of their names: their
    names, level labels and non-zero cells (as `table_fingerprint`, the cells' codes permuted to that order and
    sorted again). The same for one table whatever the order of its columns, so that the same data read with its
    variables in another order under a second dataset is recognised (a new user's trial gave one file two budgets
    so). None for a table counted from its file, which lists no records. Names and labels still count: data
    renamed or recoded is not recognised, as no fingerprint can tell it from other data without a false match.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable
    key : bytes

    Returns
    -------
    str or None
        64 hex characters, or None.
    """
    if getattr(table, "held_as_file", False):
        return None
    order = tuple(sorted(range(len(table.variables)), key=lambda a: str(table.variables[a])))
    return _cells_digest(table, key, order, b"order-free-v1:")


def table_prints(table, key: bytes, listed: tuple | None = None) -> tuple[str, list[str]]:
    """(the fingerprint a release records, the others it records beside it): the non-zero cells' fingerprint where
    the table lists them, else the multiset one; the multiset one, the legacy cells one, the order-free one
    (`order_free_fingerprint`), the canonical one (`canonical_fingerprint`) where computable, and the canonical
    multiset one (`canonical_multiset_fingerprint`).

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable
    key : bytes
    listed : tuple, optional
        The table's non-zero cells and counts (`_listed_cells`), where the caller listed them already.

    Returns
    -------
    tuple of (str, list of str)
    """
    multiset = multiset_fingerprint(table, key)
    main = multiset if getattr(table, "held_as_file", False) else table_fingerprint(table, key)
    legacy = legacy_cells_fingerprint(table, key)
    order_free = order_free_fingerprint(table, key)
    canonical = canonical_fingerprint(table, key, listed)
    # Where a name or label is not in NFC, the print releases recorded before names were normalised, so that they
    # are still matched.
    as_written = (canonical_fingerprint(table, key, listed, composed=False)
                  if canonical and not _composed(table) else None)
    canonical_multiset = canonical_multiset_fingerprint(table, key)
    return main, [f for f in dict.fromkeys((legacy, multiset, order_free, canonical, as_written, canonical_multiset))
                  if f and f != main]


def _composed(table) -> bool:
    """Every name and label of the table is in NFC."""
    from .tables._text import all_nfc

    return all_nfc((*table.variables, *(label for labels in table.levels for label in labels)))


def legacy_cells_fingerprint(table: ContingencyTable, key: bytes) -> str | None:
    """The fingerprint ledgers recorded for a table held as cells before fingerprints were taken of non-zero cells
    (HMAC of a JSON text listing every cell), or None for a table with more cells than are ever held (it was never
    fingerprinted so). Computed whatever form the table comes in (the same data given as records may have been
    released as cells before); a release records it beside the current one, so that a table released before the
    change is still recognised under another dataset's name.

    Parameters
    ----------
    table : ContingencyTable
    key : bytes

    Returns
    -------
    str or None
    """
    from .tables import MAX_TABLE_CELLS

    if table.cells > MAX_TABLE_CELLS or getattr(table, "held_as_file", False):
        return None  # never held as cells (a table counted from its file is one only past the cell limit)
    # The bytes of json.dumps({"variables", "levels", "counts": [every cell]}, separators=(",", ":")), fed to the HMAC
    # a block of cells at a time: the text of 2^27 cells is never held whole (nor a Python int per cell).
    head = json.dumps({"variables": list(table.variables), "levels": [list(map(str, lv)) for lv in table.levels],
                       "counts": []}, separators=(",", ":"))
    digest = hmac.new(key, head[:-2].encode(), hashlib.sha256)  # up to and including '"counts":['
    cells = np.asarray(table.counts, dtype=np.int64).ravel()
    for start in range(0, cells.size, 2**20):
        digest.update((("," if start else "") + ",".join(map(str, cells[start:start + 2**20].tolist()))).encode())
    digest.update(b"]}")
    return digest.hexdigest()


def _prints(record: dict) -> set[str]:
    """Every fingerprint a release record names its table by (the current one, and the legacy one if recorded)."""
    return {record["fingerprint"], *record.get("fingerprints_also", ())}


# The margins whose fingerprints a release records (`margin_prints`): every one- and two-way margin. Enough: any
# table of two or more of a table's variables shares a two-way margin with it, and a table of one of them is one of
# its one-way margins; and a rule of the table's shape alone, so how many are recorded tells nothing of its counts.
LARGEST_PRINTED_MARGIN = 2
# Above this many cells a margin is aggregated from its non-zero rows by sorting them (not a dense count).
DENSE_MARGIN_MAX_CELLS = 2**22
# Two tables sharing a margin of at least this many variables are the same people's data; a shared one-way margin
# (a sample's fixed quotas by sex, say) is too weak a sign, though a table that *is* a one-way margin of another is
# matched.
SHARED_MARGIN_MIN_VARIABLES = 2


def margin_prints(table, key: bytes, listed: tuple | None = None) -> list[tuple[tuple[str, ...], str]]:
    """The canonical fingerprints (`canonical_fingerprint`) of the table's margins over proper subsets of its
    variables: each the fingerprint that margin has when given as a table of its own, whatever the order of its
    variables or of their levels, and whatever levels it declares without anyone in them. With them the ledger
    recognises data released under one dataset id and again, in part, under another (`_overlap`): a table that is
    a margin of one released before (some of its columns: `--variables` naming fewer, or a margin saved as a table),
    one of which a table released before is a margin, and two tables that share a margin of two or more variables
    (two cross-tabulations of the same records).

    Every one- and two-way margin (`LARGEST_PRINTED_MARGIN`) short of the table itself: any table of two or more of
    its variables shares a two-way margin with it, and a table of one of them is a one-way margin, so these
    recognise every subset of its variables, in either order of release. None for a table counted from its file,
    which is never held as cells or records.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable
    key : bytes
    listed : tuple, optional
        The table's non-zero cells and counts (`_listed_cells`), where the caller listed them already.

    Returns
    -------
    list of (tuple of str, str)
        Each margin's variables (by name) and its fingerprint (64 hex characters), smallest margins first.
    """
    from itertools import combinations

    k = len(table.variables)
    if getattr(table, "held_as_file", False) or k < 2:
        return []
    largest = min(k - 1, LARGEST_PRINTED_MARGIN)
    cells = np.asarray(table.counts) if getattr(table, "held_as_cells", True) else None
    if cells is not None and np.count_nonzero(cells) * k > cells.size:
        # A dense table: each margin summed from the cells (a reduction over the other axes: faster than listing
        # every non-zero cell's codes once per margin), then its own non-zero cells listed. (Which way is taken
        # changes the time, never the prints.)
        def margin_of(axes):
            summed = margin_counts(cells, axes)
            return np.argwhere(summed > 0), summed[summed > 0].astype(np.int64)
    else:
        rows, weights = _listed_cells(table) if listed is None else listed
        columns = np.ascontiguousarray(rows.T)  # one contiguous row of codes per variable

        def margin_of(axes):
            return _aggregated(columns[list(axes)].T, weights, tuple(len(table.levels[a]) for a in axes))
    found = []
    # Where a name or label is not in NFC, the margins' prints of the names as written too: releases recorded before
    # prints were normalised hold those (a review found an NFD margin released so no longer matched).
    forms = (True,) if _composed(table) else (True, False)
    for size in range(1, largest + 1):
        for axes in combinations(range(k), size):
            sub, counts = margin_of(axes)
            names, levels = [table.variables[a] for a in axes], [table.levels[a] for a in axes]
            for composed in forms:
                printed = _canonical_digest(names, levels, sub, counts, key, composed=composed)
                if (tuple(names), printed) not in found:
                    found.append((tuple(names), printed))
    return found


SOURCE_PRINT_CHUNK = 2**22


def source_prints(table, key: bytes) -> list[str]:
    """HMAC-SHA256, under the ledger's key, of the whole file the table was read from (its bytes, every column and row,
    whatever `--variables` took of it, and the sheet read of a workbook), or nothing for a table not read from a
    file by `tables.load_input` (the command line's and a batch's reader; a built-in table; one made in Python). Two
    releases of one file under two dataset ids are the same people's data even where they share no variable (a
    reviewer released disjoint columns of one microdata file under three ids, each with a full budget): the ledger
    matches them by this print (`_overlap`). A copy of the file is the same bytes; a text file's second print, of
    its lines (`_TextPrint`), is the same for a copy that differs only in its line breaks or a byte-order mark. A
    file cut into its columns, or rewritten otherwise, is not recognised.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable
        Its metadata names the file it was read from (`tables.SOURCE_FILE`, set by `tables.load_input`).
    key : bytes

    Returns
    -------
    list of str
        The prints (64 hex characters each): of the bytes, then, for a text file, of its lines; or none.

    Raises
    ------
    TabreleaseError
        The file changed or went after it was read.
    """
    from .tables._text import SOURCE_FILE

    read = (getattr(table, "metadata", None) or {}).get(SOURCE_FILE)
    if not isinstance(read, dict) or not isinstance(read.get("path"), str):
        return []
    path = read["path"]
    text = read.get("sheet") is None and Path(path).suffix.lower() not in BINARY_SUFFIXES
    # The print is of the file as it is now: one changed or gone since it was read would give the print of other
    # bytes than those released (and match the wrong releases), so the release is refused before its charge.
    changed = (f"the file {path} changed after it was read (its size or modification time differs): the ledger "
               "could not fingerprint the data released; read it again (run the release again); nothing was released")
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if (info.st_size, info.st_mtime_ns) != (read.get("size"), read.get("mtime_ns")):
                raise TabreleaseError(changed)
            # A workbook's sheets are different tables: the sheet read is part of the print.
            digest = hmac.new(key, b"source-file-v1:" + json.dumps(read.get("sheet")).encode() + b":", hashlib.sha256)
            lines = _TextPrint(hmac.new(key, b"source-text-v1:", hashlib.sha256)) if text else None
            while chunk := handle.read(SOURCE_PRINT_CHUNK):
                digest.update(chunk)
                if lines is not None:
                    lines.update(chunk)
            if os.fstat(handle.fileno()).st_size != info.st_size:
                raise TabreleaseError(changed)
    except OSError:
        raise TabreleaseError(f"the file {path} could not be read again after it was read: the ledger could not "
                              "fingerprint the data released; nothing was released") from None
    return [digest.hexdigest()] + ([lines.hexdigest()] if lines is not None else [])


def _lf(text: bytes) -> bytes:
    """Every line break (CRLF, CR, LF) made LF."""
    return text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


# Files whose bytes are not lines of text: their source print is of the bytes alone.
BINARY_SUFFIXES = (".parquet", ".xlsx", ".xlsm", ".gz", ".bz2", ".xz", ".zst", ".zip")


class _TextPrint:
    """The print of a text file's lines, streamed: its bytes with a leading UTF-8 byte-order mark dropped, every line
    break (CRLF, CR, LF) made LF and the line breaks at its end dropped. A copy saved with Windows line endings, a
    byte-order mark or one more (or one fewer) newline at its end is the same people's file, and the readers read it
    so (a reviewer released disjoint columns of one file under three dataset ids, a full budget each, after a CRLF
    copy and one with a newline added, each of whose raw bytes were new). A run of line-break bytes is held back
    until a byte that is not one follows it, so the print does not depend on where the chunks fall."""

    def __init__(self, digest):
        self._digest, self._held, self._started = digest, b"", False

    def update(self, chunk: bytes) -> None:
        if not self._started:
            data = self._held + chunk
            if len(data) < 3 and b"\xef\xbb\xbf".startswith(data):
                self._held = data  # too little yet to tell a byte-order mark
                return
            self._started, self._held, chunk = True, b"", data.removeprefix(b"\xef\xbb\xbf")
        # Without copying the chunk where it holds no CR (most files): its leading run of line breaks is joined to
        # the run held (a CRLF may fall across chunks), its trailing run held, and the body between hashed as it is.
        end = len(chunk)
        while end and chunk[end - 1] in b"\r\n":
            end -= 1
        if not end:
            self._held += chunk
            return
        start = 0
        while chunk[start] in b"\r\n":
            start += 1
        self._digest.update(_lf(self._held + chunk[:start]))
        self._digest.update(_lf(chunk[start:end]) if chunk.find(b"\r", start, end) >= 0
                            else memoryview(chunk)[start:end])
        self._held = chunk[end:]

    def hexdigest(self) -> str:
        if not self._started:  # a file of one or two bytes, the start of a byte-order mark: kept
            self._digest.update(self._held)
            self._held, self._started = b"", True
        return self._digest.hexdigest()  # what is held at the end is the line breaks there, dropped


def canonical_fingerprint(table, key: bytes, listed: tuple | None = None, *, composed: bool = True) -> str | None:
    """HMAC-SHA256, under the ledger's key, of the table in a canonical form: its variables in the order of their
    names, each one's levels that anyone is in, in the order of their labels, and its non-zero cells. The same for
    one table whatever the order of its columns or of its levels (`--levels`, `--metadata`), and whatever levels it
    declares that no one is in; data renamed or recoded is not recognised. None for a table counted from its file.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable
    key : bytes
    listed : tuple, optional
        The table's non-zero cells and counts (`_listed_cells`), where the caller listed them already.
    composed : bool
        Names and labels NFC-normalised first (False: as they are, the print releases recorded before).

    Returns
    -------
    str or None
        64 hex characters, or None.
    """
    if getattr(table, "held_as_file", False):
        return None
    rows, weights = _listed_cells(table) if listed is None else listed
    return _canonical_digest(list(table.variables), list(table.levels), rows, weights, key, composed=composed)


def _canonical_digest(variables, levels, rows: np.ndarray, counts: np.ndarray, key: bytes, *,
                      composed: bool = True) -> str:
    """The canonical fingerprint of the non-zero cells `rows` (level codes, one column per variable; distinct) with
    `counts`: names and labels NFC-normalised (`composed`; a file written in NFD, as macOS writes it, is the same
    data: a reviewer's trial gave it a second budget), levels no row uses dropped, the rest renumbered in the order
    of their labels, the variables in the order of their names, the rows in lexicographic order. (No table has two
    labels of one variable that differ only in their composition: `tables.model.check_one_encoding` refuses it.)"""
    from math import prod

    from .tables._text import nfc

    text = nfc if composed else str

    variables = [text(v) for v in variables]
    order = sorted(range(len(variables)), key=lambda a: variables[a])
    columns, kept_levels = [], []
    for a in order:
        labels = [text(label) for label in levels[a]]
        used = np.flatnonzero(np.bincount(rows[:, a], minlength=len(labels))) if len(rows) else np.zeros(0, int)
        by_label = sorted(used.tolist(), key=lambda code: labels[code])
        recode = np.zeros(len(labels), np.int64)
        recode[by_label] = np.arange(len(by_label))
        columns.append(recode[rows[:, a]] if len(rows) else np.zeros(0, np.int64))
        kept_levels.append([labels[code] for code in by_label])
    sizes = tuple(max(len(kept), 1) for kept in kept_levels)
    if len(rows) and columns and prod(sizes) < 2**63:  # one key per row: a sort of integers, skipped when in order
        keys = np.ravel_multi_index(tuple(columns), sizes)
        ranked = slice(None) if bool(np.all(keys[1:] > keys[:-1])) else np.argsort(keys, kind="stable")
    elif len(rows) and columns:
        ranked = np.lexsort(columns[::-1])
    else:
        ranked = slice(None)
    table_rows = np.column_stack(columns) if columns else np.zeros((len(rows), 0), np.int64)
    content = {"variables": [variables[a] for a in order], "levels": kept_levels}
    digest = hmac.new(key, b"canonical-v1:" + json.dumps(content, separators=(",", ":")).encode(), hashlib.sha256)
    digest.update(np.ascontiguousarray(table_rows[ranked], dtype="<u4").tobytes())
    digest.update(np.ascontiguousarray(np.asarray(counts)[ranked], dtype="<i8").tobytes())
    return digest.hexdigest()


def _aggregated(sub: np.ndarray, weights: np.ndarray, sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of `sub` (codes over a margin's variables, in lexicographic order) and the summed weights
    (int64 counts) of each: by a dense count where the margin has at most `DENSE_MARGIN_MAX_CELLS` cells, else by
    sorting each row's mixed-radix key (or the rows themselves past 2^63 cells). Exact at any count."""
    from math import prod

    weights = np.asarray(weights, np.int64)
    if not len(sub):
        return np.zeros((0, sub.shape[1]), np.int64), np.zeros(0, np.int64)
    cells = prod(sizes)
    if cells < 2**63:
        keys = np.ravel_multi_index(tuple(sub.T), sizes)
        if cells <= DENSE_MARGIN_MAX_CELLS and int(weights.sum(dtype=object)) < 2**53:  # float sums exact
            counts = np.bincount(keys, weights=weights, minlength=cells)
            found = np.flatnonzero(counts > 0)
            return np.column_stack(np.unravel_index(found, sizes)), np.rint(counts[found]).astype(np.int64)
        distinct, inverse = np.unique(keys, return_inverse=True)
        rows = np.column_stack(np.unravel_index(distinct, sizes))
    else:
        rows, inverse = np.unique(sub, axis=0, return_inverse=True)
    counts = np.zeros(len(rows), np.int64)
    np.add.at(counts, inverse.ravel(), weights)
    return rows, counts


def _listed_cells(table) -> tuple[np.ndarray, np.ndarray]:
    """(the non-zero cells' level codes, one row each, and their counts, int64) of a table held as cells or
    records."""
    if getattr(table, "held_as_cells", True):
        counts = np.asarray(table.counts)
        rows = np.argwhere(counts > 0)
        return rows, counts[counts > 0].astype(np.int64)
    rows, weights = table.distinct_records()
    return np.asarray(rows, np.int64).reshape(-1, len(table.variables)), np.asarray(weights, np.int64)


def _margin_records(printed: list) -> list[list]:
    """`margin_prints` as a release record keeps them: [how many variables, fingerprint] (not their names)."""
    return [[len(variables), fingerprint] for variables, fingerprint in printed]


def _overlap(record: dict, prints: set[str], margins: list, names: dict | None = None,
             sources: list | None = None) -> str | None:
    """How a release record's table and a table with fingerprints `prints` and margins `margins` (as
    `_margin_records` keeps them) hold the same data in part, in words, or None: one is a margin of the other,
    they share a margin of at least `SHARED_MARGIN_MIN_VARIABLES` variables, or both were read from one file
    (`sources`, `source_prints`). `names` (fingerprint to the margin's variables, for this table's own
    margins) names the margin in the words."""
    names = names or {}

    def named(f) -> str:
        return f" [{', '.join(map(str, names[f]))}]" if f in names else ""

    theirs = {f: size for size, f in record.get("margin_prints", ())}
    ours = {f: size for size, f in margins}
    if matched := _prints(record) & set(ours):
        return "a table released before is this table's margin" + named(min(matched))
    if prints & set(theirs):
        return "this table is a margin of one released before"
    shared = sorted((f for f, size in ours.items() if size >= SHARED_MARGIN_MIN_VARIABLES and f in theirs),
                    key=lambda f: (-ours[f], f))
    if shared:
        return "this table and one released before share the margin" + named(shared[0])
    if set(sources or ()) & set(record.get("source_prints", ())):  # last: the words above say more where they hold
        return ("this table and one released before were read from the same file, or copies of it (whatever columns "
                "each took)")
    return None


def _check_dataset(dataset: str) -> str:
    if not isinstance(dataset, str) or not dataset.strip() or len(dataset) > 200:
        raise TabreleaseError(f"a dataset is named by a non-empty text of at most 200 characters, not {dataset!r}")
    return dataset.strip()


def _dataset_name(dataset) -> str:
    if isinstance(dataset, ContingencyTable):
        return _check_dataset(dataset.name)
    return _check_dataset(dataset)


def budget_record(epsilon: float | None = None, delta: float | None = None, neighbours: str = ADD_REMOVE, *,
                  attributes=(), rho: float | None = None, accounting: str | None = None) -> dict:
    """The content of a budget: its unit and its total loss.

    Parameters
    ----------
    epsilon, delta : float, optional
        Basic accounting: the total (epsilon, delta), composed by adding both (delta 0 when not given). zCDP
        accounting without `rho`: the (epsilon, delta) target, turned into the largest rho whose exact
        conversion meets it.
    neighbours : {"add-remove", "replace", "sensitive-attributes"}
        The unit the budget bounds.
    attributes : sequence of str
        The protected variables (the sensitive-attribute unit only).
    rho : float, optional
        A zCDP budget: releases compose by adding rho.
    accounting : {"basic", "zcdp"}, optional
        Default: zcdp when `rho` is given, else basic.

    Returns
    -------
    dict
        The budget's fields, as the ledger records them.
    """
    unit = PrivacyUnit(kind=neighbours, attributes=tuple(attributes or ()))
    if unit.kind not in BUDGET_UNITS:
        raise TabreleaseError(f"a budget bounds one of {', '.join(BUDGET_UNITS)}, not {neighbours!r}")
    accounting = accounting or (ZCDP if rho is not None else BASIC)
    if accounting not in ACCOUNTINGS:
        raise TabreleaseError(f"a budget's accounting is basic or zcdp, not {accounting!r}")
    if delta is not None and not (_finite_non_negative(delta) and delta < 1):
        raise TabreleaseError(f"a budget delta must lie in [0, 1), not {delta!r}")
    from .spec import SMALLEST_DELTA

    if delta and delta < SMALLEST_DELTA:  # as a release's: below it, a delta is lost in subnormal floats (rho NaN)
        raise TabreleaseError(f"a budget delta must be 0 or at least {SMALLEST_DELTA:g}, not {delta!r}")
    if epsilon is not None and not (_finite_non_negative(epsilon) and epsilon > 0):
        raise TabreleaseError(f"a budget epsilon must be a positive finite number, not {epsilon!r}")
    record = {"unit": unit.as_dict(), "neighbours": unit.kind, "accounting": accounting,
              "delta": float(delta or 0.0)}
    if accounting == BASIC:
        if rho is not None:
            raise TabreleaseError("rho sets a zCDP budget; give epsilon (and delta) for basic composition")
        if epsilon is None:
            raise TabreleaseError("a budget needs epsilon (or rho, for zCDP accounting)")
        return {**record, "epsilon": float(epsilon), "rho": None}
    if rho is None:
        if epsilon is None or not delta:
            raise TabreleaseError("a zCDP budget is rho, or an (epsilon, delta > 0) target to convert")
        from .accounting import approx_dp_to_rho

        try:
            rho = float(approx_dp_to_rho(float(epsilon), float(delta)))
        except (ValueError, OverflowError) as exc:
            raise TabreleaseError(f"the budget's (epsilon, delta) target has no zCDP rho: {exc}") from None
        return {**record, "epsilon": float(epsilon), "rho": rho}
    if not (_finite_non_negative(rho) and rho > 0):
        raise TabreleaseError(f"a budget rho must be a positive finite number, not {rho!r}")
    if epsilon is not None:
        raise TabreleaseError("give a zCDP budget as rho, or as an (epsilon, delta) target, not both")
    return {**record, "epsilon": None, "rho": float(rho)}


def set_budget(path, dataset: str, epsilon: float | None = None, delta: float | None = None,
               neighbours: str = ADD_REMOVE, *, attributes=(), rho: float | None = None,
               accounting: str | None = None) -> BudgetStatus:
    """Give a dataset a total budget for a unit (see `budget_record`). Refused where a release already recorded
    has no guarantee under that unit, or has spent more than the new budget.

    Parameters
    ----------
    path : path-like
        The ledger.
    dataset : str or ContingencyTable
        The dataset's id (a table stands for its name).
    epsilon, delta, neighbours, attributes, rho, accounting
        The budget, as for `budget_record`.

    Returns
    -------
    BudgetStatus
        The dataset's spending under the new budget.

    Raises
    ------
    TabreleaseError
        The budget's terms are invalid (see `budget_record`), the dataset's id is empty or too long, no ledger or
        no key.
    BudgetRefused
        A release already recorded has no guarantee under the budget's unit, or has spent more than it.
    LedgerIntegrityError
        The ledger fails verification; nothing is set.
    """
    dataset = _dataset_name(dataset)
    record = budget_record(epsilon, delta, neighbours, attributes=attributes, rho=rho, accounting=accounting)
    path = _resolve(path)
    _load(path)  # a damaged ledger is refused before anything (even a lock file) is made beside it
    key = ledger_key(path)
    with _lock(path):
        data = _read_verified(path, key, writing=True)
        unit, kind, eps_budget, delta_budget, rho_budget = _budget_terms(record)
        try:
            costs = _costs(_releases(data, dataset), unit, kind)
        except GuaranteeMismatch as exc:
            raise BudgetRefused(f"{dataset} already has a release with no guarantee under this budget's unit ({exc}); "
                                "declare the budget for a unit its releases cover") from None
        spent = _sum(c[0] for c in costs)
        limit = rho_budget if kind == ZCDP else eps_budget
        if not _within(spent, limit):
            raise BudgetRefused(f"{dataset} has already spent {'rho' if kind == ZCDP else 'epsilon'} {spent:g} "
                                f"(under {unit.label()}); a budget of {limit:g} is below that")
        spent_delta = _sum(c[1] for c in costs)
        if kind == BASIC and spent_delta > 0 and not _within(spent_delta, delta_budget):
            raise BudgetRefused(f"{dataset} has already spent delta {spent_delta:.3g} (under {unit.label()}); a "
                                f"budget delta of {delta_budget:g} is below that")
        _append(data, key, {"kind": "budget", "dataset": dataset, **record})
        _write(path, data, key)
        return _status(data, dataset)


def guarantee_from_parameters(epsilon: float, delta: float | None = None, neighbours: str = ADD_REMOVE,
                              total_public: bool = False) -> PrivacyGuarantee:
    """The guarantee of a plain Laplace (pure) or approximate release from its parameters: what a caller that
    has no plan states (a release under add-remove that publishes n exactly is, by group privacy, 2 epsilon under
    replace).

    Parameters
    ----------
    epsilon : float
        Positive and finite.
    delta : float or None
        In [0, 1); None or 0 for a pure guarantee.
    neighbours : {"add-remove", "replace"}
        The unit the release was calibrated for.
    total_public : bool
        The release publishes the total n exactly.

    Returns
    -------
    PrivacyGuarantee

    Raises
    ------
    TabreleaseError
        `epsilon` or `delta` out of range, `neighbours` not one of the two, or `total_public` not a bool.
    """
    if neighbours not in (ADD_REMOVE, REPLACE):
        # Anything but "replace" had been read as add-remove, the strongest unit: a sensitive-attribute or local
        # release stated so passed an add-remove budget at face value (a reviewer's trial).
        raise TabreleaseError(f"a plain release's neighbours are {ADD_REMOVE!r} or {REPLACE!r}, not {neighbours!r} (a "
                              "release under another unit is charged its mechanism's own guarantee, `Mechanism.guarantee`)")
    if not isinstance(total_public, (bool, np.bool_)):
        raise TabreleaseError(f"total_public is True or False, not {total_public!r}")
    if not (_finite_non_negative(epsilon) and epsilon > 0) or (delta is not None and not (
            _finite_non_negative(delta) and delta < 1)):
        raise TabreleaseError(f"a release is charged a positive finite epsilon and a delta in [0, 1), not "
                              f"{epsilon!r}, {delta!r}")
    return _release_guarantee({"epsilon": float(epsilon), "delta": float(delta or 0.0), "neighbours": neighbours,
                               "total_public": bool(total_public)})


def charge(account, table: ContingencyTable, guarantee: PrivacyGuarantee, *, mechanism: str, margins: list[str],
           output: str | None, noise_mode: str, margin_names: list[list[str]] | None = None) -> dict:
    """Record a release before its noise is drawn, or refuse it.

    Parameters
    ----------
    account : LedgerAccount or path-like
        The ledger, the dataset charged (default: the table's name), and what the ledger may allow (a release of a
        dataset without a budget in a ledger that holds budgets; a table already released under another dataset
        id, the operator saying the datasets are distinct). A path alone is a `LedgerAccount` of that ledger.
    table : ContingencyTable
        The table the release is drawn from (fingerprinted under the ledger's key).
    guarantee : PrivacyGuarantee
        The release's guarantee (`guarantee_from_parameters` makes one from epsilon, delta and neighbours).
    mechanism, margins, output, noise_mode : str
        What the record says of the release (`margins` in letters, as every record since the first has them).
    margin_names : list of list of str, optional
        Each margin's variables by their names for people, recorded beside the letters as ``margin_names`` (letters
        depend on the variables a table was read with: two releases of one dataset may give one letter to different
        variables). Records written before it was added have none and still verify (a record's MAC covers the
        fields it has).

    Returns
    -------
    dict
        The ledger's record, with `sequence` (its number in the ledger) and `ledger_id`.

    Raises
    ------
    TabreleaseError
        No ledger or key, a bad dataset id, or `guarantee` is not a PrivacyGuarantee.
    BudgetRefused
        Over the dataset's budget, no guarantee under the budget's unit, an alias not allowed, or no budget for the
        dataset in a ledger that holds budgets (unless allowed); nothing is charged.
    LedgerIntegrityError
        The ledger fails verification; nothing is charged.
    """
    from .spec import LedgerAccount

    if not isinstance(account, LedgerAccount):
        account = LedgerAccount(ledger=account)
    dataset = _check_dataset(table.name if account.dataset is None else account.dataset)
    allow_alias, allow_unbudgeted = account.allow_alias, account.allow_unbudgeted
    if not isinstance(guarantee, PrivacyGuarantee):
        raise TabreleaseError("a release is charged with a PrivacyGuarantee")
    path = _resolve(account.ledger)
    _load(path)  # a damaged ledger is refused before anything (even a lock file) is made beside it
    key = ledger_key(path)
    # The non-zero cells listed once, for the canonical print and a sparse table's margins (listed twice before).
    listed = None if getattr(table, "held_as_file", False) else _listed_cells(table)
    fingerprint, also = table_prints(table, key, listed)
    prints = {fingerprint, *also}
    printed = margin_prints(table, key, listed)
    margins_printed = _margin_records(printed)
    sources = source_prints(table, key)
    with _lock(path):
        data = _read_verified(path, key, writing=True)
        others = [r for r in data["records"] if r["kind"] == "release" and r["dataset"] != dataset]
        same = sorted({r["dataset"] for r in others if _prints(r) & prints})
        if same and not allow_alias:
            raise BudgetRefused(
                f"this table was released before under the dataset {same[0]!r} (the keyed fingerprints match): "
                f"charging it to {dataset!r} would give the same data a second budget; release it under "
                f"{same[0]!r}, or, if the two datasets are truly distinct, say --allow-alias; nothing was released")
        names = {f: variables for variables, f in printed}
        overlaps = {}  # dataset -> (its first overlapping record's number in the ledger, how it overlaps)
        for number, r in enumerate(data["records"], 1):
            if (r["kind"] == "release" and r["dataset"] not in (dataset, *same, *overlaps)
                    and (how := _overlap(r, prints, margins_printed, names, sources))):
                overlaps[r["dataset"]] = (number, how)
        in_part = sorted(overlaps)
        if in_part and not allow_alias:
            raise BudgetRefused(
                f"this table holds data released before under the dataset {in_part[0]!r} (record "
                f"{overlaps[in_part[0]][0]} of the ledger): {overlaps[in_part[0]][1]}, by their keyed fingerprints; "
                f"charging it to {dataset!r} would give the same people a second budget; release it under "
                f"{in_part[0]!r}, or, if the two datasets are truly distinct, say --allow-alias; nothing was released")
        aliases = sorted({*same, *in_part})
        if getattr(table, "held_as_file", False) and not allow_alias:
            # A table counted from its file has the multiset fingerprint alone, which records made before it existed
            # lack: one of them may be this very table (then held as records), and nothing here could tell.
            unknown = sorted({r["dataset"] for r in data["records"] if r["kind"] == "release"
                              and r["dataset"] != dataset and r.get("prints") != PRINTS_VERSION})
            if unknown:
                raise BudgetRefused(
                    f"this ledger holds releases made by an earlier version (of {unknown[0]!r}"
                    f"{f' and {len(unknown) - 1} other datasets' if len(unknown) > 1 else ''}) whose fingerprints a "
                    "table counted from its file cannot be matched with: it could be the same data under another "
                    "name; release this table once with --engine pandas (which holds its records and matches every "
                    "fingerprint), or, if it is truly distinct from those datasets, say --allow-alias; nothing was "
                    "released")
        budgets = _budgets(data)
        budget = budgets.get(dataset)
        if budget is None and budgets and not allow_unbudgeted:
            raise BudgetRefused(
                f"the ledger has budgets but none for the dataset {dataset!r}; set one (`tabrelease ledger FILE "
                f"--set-budget {dataset} --epsilon E`) or say --allow-unbudgeted; nothing was released")
        attribute_prints = {}
        if budget is not None:
            _check_fits(data, dataset, budget, guarantee)
            attribute_prints = _protected_columns(data, dataset, budget, table, key, guarantee)
        entry = _append(data, key, {
            "kind": "release", "dataset": dataset, "fingerprint": fingerprint,
            **({"fingerprints_also": also} if also else {}), "table": table.name,
            "guarantee": guarantee.as_dict(), "epsilon": guarantee.loss.epsilon, "delta": guarantee.loss.delta,
            "neighbours": guarantee.unit.kind, "total_public": guarantee.unit.n_public,
            "mechanism": mechanism, "margins": list(margins), "output": output, "noise_mode": noise_mode,
            "release_id": secrets.token_hex(16), "aliases": aliases, "prints": PRINTS_VERSION,
            **({"margin_prints": margins_printed} if margins_printed else {}),
            **({"source_prints": sources} if sources else {}),
            **({"attribute_prints": attribute_prints} if attribute_prints else {}),
            **({} if margin_names is None else {"margin_names": [[str(v) for v in g] for g in margin_names]}),
        })
        sequence = len(data["records"])
        _write(path, data, key)
    return {**entry, "sequence": sequence, "ledger_id": data["ledger_id"]}


def column_print(labels, counts, key: bytes) -> str:
    """A keyed fingerprint of one variable's column, without its name: its labels (NFC) with the count of each,
    those nobody has left out, in the order of the labels (so a level order declared otherwise is the same column).

    Parameters
    ----------
    labels : sequence of str
    counts : numpy.ndarray
        The variable's one-way margin.
    key : bytes

    Returns
    -------
    str
        64 hexadecimal characters.
    """
    from .tables._text import nfc

    pairs = sorted((nfc(str(label)), int(count)) for label, count in zip(labels, np.ravel(counts)) if count > 0)
    return hmac.new(key, json.dumps(["column", pairs]).encode(), hashlib.sha256).hexdigest()


def _protected_columns(data: dict, dataset: str, budget: dict, table, key: bytes,
                       guarantee: PrivacyGuarantee) -> dict[str, str]:
    """The prints (`column_print`) of the columns a sensitive-attribute budget protects, as this release records
    them; refused where the table's column of a protected name is not the one earlier releases of the dataset
    recorded under it, or a column by another name is (a review's trial: with two headers swapped, the true
    income was released exactly as the insensitive "age" while "income" was charged; the budget names
    variables, and names are only what a file's header says). Refused only for a release that protects some
    attributes alone (a record-level one protects every column, whatever its name). {} for any other budget."""
    unit = _budget_terms(budget)[0]
    if unit.kind != SENSITIVE:
        return {}
    current = {name: column_print(table.levels[j], table.margin_counts((j,)), key)
               for j, name in enumerate(table.variables)}
    if guarantee.unit.kind != SENSITIVE:
        return {name: current[name] for name in unit.attributes if name in current}
    bound = {}
    for record in _releases(data, dataset):
        for name, printed in (record.get("attribute_prints") or {}).items():
            bound.setdefault(name, printed)
    for name in unit.attributes:
        if name in bound and name in current and current[name] != bound[name]:
            raise BudgetRefused(f"the variable {name!r}, which {dataset}'s budget protects, is not the column of "
                                f"that name released before (its counts by level differ, by their keyed "
                                f"fingerprints): its name may have moved to another column; release the table "
                                f"those releases came from; nothing was released")
    moved = sorted(name for name, printed in current.items()
                   if name not in unit.attributes and printed in set(bound.values()))
    if moved:
        raise BudgetRefused(f"the variable {moved[0]!r} holds the counts by level of a column {dataset}'s budget "
                            f"protects, released before under another name (by their keyed fingerprints): a "
                            f"protected column renamed would be released as an insensitive one; nothing was "
                            f"released")
    return {name: current[name] for name in unit.attributes if name in current}


def _check_fits(data: dict, dataset: str, budget: dict, guarantee: PrivacyGuarantee) -> None:
    unit, kind, eps_budget, delta_budget, rho_budget = _budget_terms(budget)
    try:
        cost, cost_delta = cost_under_budget(under_unit(guarantee, unit), kind)
    except GuaranteeMismatch as exc:
        hint = ("; a budget declared for replace (--budget-neighbours replace) covers it"
                if unit.kind == ADD_REMOVE and guarantee.unit.kind in (REPLACE, LOCAL) else "")
        raise BudgetRefused(f"{exc} ({dataset}'s budget is declared for {unit.label()}){hint}; nothing was "
                            "released") from None
    costs = _costs(_releases(data, dataset), unit, kind)
    if kind == ZCDP:
        spent = _sum(c[0] for c in costs)
        if not _within(spent + cost, rho_budget):
            raise BudgetRefused(f"privacy budget of {dataset} exceeded: this release needs rho {cost:.6g}, "
                                f"{max(rho_budget - spent, 0):.6g} of {rho_budget:.6g} remains; nothing was released")
        return
    spent, spent_delta = _sum(c[0] for c in costs), _sum(c[1] for c in costs)
    if not _within(spent + cost, eps_budget):
        raise BudgetRefused(f"privacy budget of {dataset} exceeded: this release needs epsilon {cost:.6g}, "
                            f"{max(eps_budget - spent, 0):.6g} of {eps_budget:g} remains (spent {spent:.6g}); "
                            "nothing was released")
    if cost_delta > 0 and not _within(spent_delta + cost_delta, delta_budget):
        raise BudgetRefused(f"privacy budget of {dataset} exceeded: this release needs delta {cost_delta:.3g}, "
                            f"{max(delta_budget - spent_delta, 0):.3g} of {delta_budget:g} remains; nothing was "
                            "released")


def record_failure(path, entry: dict, reason: str) -> None:
    """After a charge: the release failed (it stays charged; its noise may have been drawn). `reason` must not
    hold anything derived from the counts.

    Parameters
    ----------
    path : path-like
        The ledger the release was charged to.
    entry : dict
        The charge, as `charge` returned it.
    reason : str
        Why it failed (kept to 500 characters); never anything derived from the counts.

    Raises
    ------
    TabreleaseError
        No ledger at `path`, it is not a ledger, or its key is missing or unfit.
    LedgerIntegrityError
        The ledger or its key has other hard links, or the ledger fails verification (chain or anchor).
    """
    path = _resolve(path)
    key = ledger_key(path)
    with _lock(path):
        data = _read_verified(path, key, writing=True)
        _append(data, key, {"kind": "failure", "dataset": entry["dataset"], "release_mac": entry["mac"],
                            "reason": str(reason)[:500]})
        _write(path, data, key)


def verify_ledger(path) -> list[str]:
    """What breaks the ledger's chain, or disagrees with its anchor (empty: intact). Needs the key.

    Parameters
    ----------
    path : path-like
        The ledger.

    Returns
    -------
    list of str
        One sentence per problem found; empty when the ledger is intact.

    Raises
    ------
    TabreleaseError
        No ledger at `path`, it is not a ledger, or its key is missing or unfit.
    LedgerIntegrityError
        The ledger or its key has other hard links, the file lacks its records, id or head, or the anchor is not a
        regular file (a broken chain is returned, not raised).
    """
    path = _resolve(path)
    key = ledger_key(path)
    lines = _anchor_lines(path)
    return _problems(_load(path), key, path, lines)


def ledger_aliases(path) -> dict[str, tuple[str, ...]]:
    """Per dataset, the other datasets that released one of its tables (keyed fingerprints equal).

    Parameters
    ----------
    path : path-like
        The ledger.

    Returns
    -------
    dict of str to tuple of str
        Only datasets that have aliases; the aliases sorted.

    Raises
    ------
    TabreleaseError
        No ledger at `path`, it is not a ledger, or its key is missing or unfit.
    LedgerIntegrityError
        The ledger or its key has other hard links, or the ledger fails verification (chain or anchor).
    """
    path = _resolve(path)
    data = _read_verified(path, ledger_key(path))
    return {name: aliases for name in _dataset_names(data) if (aliases := _aliases(data, name))}


def _aliases(data: dict, dataset: str) -> tuple[str, ...]:
    """The other datasets whose releases hold this dataset's data, whole or in part (`_overlap`)."""
    releases = _releases(data, dataset)
    return tuple(sorted({r["dataset"] for r in data["records"] if r["kind"] == "release" and r["dataset"] != dataset
                         and any(_prints(r) & _prints(o) or _overlap(r, _prints(o), o.get("margin_prints", []),
                                                                     sources=o.get("source_prints", []))
                                 for o in releases)}))


CHARGE_FILE = "charge.json"


def public_digest(public_dir) -> str:
    """SHA-256 of a bundle's public/ folder: each file's path within it and its bytes, in sorted order.

    Parameters
    ----------
    public_dir : path-like
        The bundle's public/ folder.

    Returns
    -------
    str
        The hex digest (of an empty listing where the folder is missing): of every entry's NFC-normalised POSIX name
        (in UTF-8 byte order) and kind, and each file's bytes.
    """
    import unicodedata

    public_dir = Path(public_dir)
    digest = hashlib.sha256(b"tabrelease public-v1")
    # Every entry, by its NFC-normalised POSIX name in UTF-8 byte order: the same on every system and copy (Windows
    # orders paths without regard to case, and macOS or a zip tool may hand accented names back decomposed; a
    # review's trial). A folder or link is hashed by its name and kind, a file by its bytes too.
    entries = []
    for path in (public_dir.rglob("*") if public_dir.is_dir() else ()):
        name = unicodedata.normalize("NFC", path.relative_to(public_dir).as_posix()).encode()
        kind = b"L" if path.is_symlink() else b"F" if path.is_file() else b"D"
        entries.append((name, kind, path))
    for name, kind, path in sorted(entries, key=lambda e: e[0]):
        content = path.read_bytes() if kind == b"F" else b""
        digest.update(kind + len(name).to_bytes(8, "big") + name + len(content).to_bytes(8, "big") + content)
    return digest.hexdigest()


def public_seal(path, charge: dict, digest: str) -> str:
    """The ledger key's MAC over a charge's record (ledger id, record number, release id, the record's MAC) and its
    bundle's `public_digest`: kept in internal/charge.json, so that `verify_bundles` finds a public file changed after
    the release (a count, the stated guarantee, a file removed), which the charge alone could not (a new user's
    trial: an edited release.json and CSV were reported intact), and a digest rewritten without the key.

    Parameters
    ----------
    path : path-like
        The ledger (its key is read).
    charge : dict
        The ledger's record of the charge (``ledger_id``, ``sequence``, ``release_id``, ``mac``).
    digest : str
        `public_digest` of the bundle's public/.

    Returns
    -------
    str
        The hex MAC.
    """
    key = ledger_key(_resolve(path))
    text = "|".join(str(charge.get(k)) for k in ("ledger_id", "sequence", "release_id", "mac")) + "|" + digest
    return hmac.new(key, b"public-seal-v1|" + text.encode(), hashlib.sha256).hexdigest()


def verify_bundles(path, bundles) -> list[str]:
    """Hold release bundles against the ledger: a bundle whose charge is not in this ledger (made without one, or
    the ledger was rolled back, re-made or rewritten), a bundle whose public files are not those sealed at its
    release (`public_seal`), and a charge (not marked failed) with no bundle among those given. Empty: every bundle
    has its charge and its public files as released, and every charge its bundle.

    Parameters
    ----------
    path : path-like
        The ledger.
    bundles : iterable of path-like
        Release bundle folders (each with internal/charge.json and public/release.json).

    Returns
    -------
    list of str
        One sentence per bundle without its charge and per charge (not marked failed) without a bundle.

    Raises
    ------
    TabreleaseError
        No ledger at `path`, it is not a ledger, or its key is missing or unfit.
    LedgerIntegrityError
        The ledger or its key has other hard links, or the ledger fails verification (chain or anchor).
    """
    path = _resolve(path)
    data = _read_verified(path, ledger_key(path))
    records = data["records"]
    failed = {r["release_mac"] for r in records if r["kind"] == "failure"}
    found = set()
    out = []
    for folder in map(Path, bundles):
        charge_file = folder / "internal" / CHARGE_FILE
        if not folder.exists():  # a release killed after its charge (SIGKILL) leaves its charge and no folder
            out.append(f"the bundle {folder} does not exist (never written, moved or deleted)")
            continue
        try:
            charge_record = json.loads(charge_file.read_text())
            sequence = int(charge_record["sequence"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            out.append(f"the bundle {folder} records no charge (made without a ledger, or not a release bundle)")
            continue
        if charge_record.get("ledger_id") != data["ledger_id"]:
            out.append(f"the bundle {folder} was charged to another ledger (id {charge_record.get('ledger_id')}): this "
                       "one was re-made, or the bundle belongs elsewhere")
            continue
        record = records[sequence - 1] if 0 < sequence <= len(records) else None
        if record is None or record.get("kind") != "release" or not hmac.compare_digest(
                str(record.get("mac")), str(charge_record.get("mac"))):
            out.append(f"the bundle {folder}'s charge (record {sequence}) is not in the ledger: it was rolled back "
                       "or rewritten")
            continue
        public_id = _public_release_id(folder)
        if public_id != record.get("release_id"):
            out.append(f"the bundle {folder}'s public release id does not match its charge (record {sequence})")
        sealed = charge_record.get("public_sha256")
        if not isinstance(sealed, str) or not isinstance(charge_record.get("public_seal"), str):
            out.append(f"the bundle {folder} holds no seal of its public files (written before seals were kept, or "
                       "its charge.json was edited): they cannot be checked against the release")
        elif not hmac.compare_digest(public_seal(path, charge_record, sealed), charge_record["public_seal"]):
            out.append(f"the bundle {folder}'s seal of its public files is not the ledger's (its charge.json was "
                       "edited or copied from another bundle)")
        elif not hmac.compare_digest(public_digest(folder / "public"), sealed):
            out.append(f"the bundle {folder}'s public files were changed after its release (a file edited, added or "
                       "removed): they are not what was released")
        found.add(record["mac"])
    for sequence, record in enumerate(records, 1):
        if record["kind"] == "release" and record.get("release_id") and record["mac"] not in found \
                and record["mac"] not in failed:
            out.append(f"charge {sequence} ({record['dataset']}, {_release_guarantee(record).loss.describe()}, "
                       f"to {record.get('output')}) has no bundle among those given")
    return out


def _public_release_id(folder: Path) -> str | None:
    try:
        return json.loads((folder / "public" / "release.json").read_text()).get("release_id")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None


def _dataset_names(data: dict) -> list[str]:
    return list(dict.fromkeys(r["dataset"] for r in data["records"]))


def _status(data: dict, dataset: str) -> BudgetStatus:
    budget = _budgets(data).get(dataset)
    releases = _releases(data, dataset)
    # One entry per distinct table: a legacy fingerprint that a later record links to its current one counts once.
    current = {old: r["fingerprint"] for r in data["records"] if r["kind"] == "release"
               for old in r.get("fingerprints_also", ())}
    prints = tuple(dict.fromkeys(current.get(r["fingerprint"], r["fingerprint"]) for r in releases))
    aliases = _aliases(data, dataset)
    if budget is None:
        unit = _display_unit(data, dataset)
        if unit is None:  # no unit covers every release: nothing can be summed
            return BudgetStatus(dataset, len(releases), float("nan"), float("nan"), None, None, prints, "none",
                                BASIC, None, None, aliases)
        costs = _costs(releases, unit, BASIC)
        return BudgetStatus(dataset, len(releases), _sum(c[0] for c in costs), _sum(c[1] for c in costs), None, None,
                            prints, unit.label(), BASIC, None, None, aliases)
    unit, kind, eps_budget, delta_budget, rho_budget = _budget_terms(budget)
    try:
        costs = _costs(releases, unit, kind)
    except GuaranteeMismatch:  # a budget older than the rules, over a release it does not cover: nothing to sum
        return BudgetStatus(dataset, len(releases), float("nan"), float("nan"), None if math.isnan(eps_budget)
                            else eps_budget, delta_budget, prints, "none", kind, None, rho_budget, aliases)
    if kind == ZCDP:
        rho_spent = _sum(c[0] for c in costs)
        epsilon_spent = float("nan")
        if rho_spent > 0 and delta_budget > 0:
            from .accounting import zcdp_to_approx_dp

            epsilon_spent = float(zcdp_to_approx_dp(rho_spent, delta_budget))
        return BudgetStatus(dataset, len(releases), epsilon_spent if rho_spent > 0 else 0.0, delta_budget if rho_spent
                            else 0.0, None if math.isnan(eps_budget) else eps_budget, delta_budget, prints,
                            unit.label(), ZCDP, rho_spent, rho_budget, aliases)
    return BudgetStatus(dataset, len(releases), _sum(c[0] for c in costs), _sum(c[1] for c in costs), eps_budget,
                        delta_budget, prints, unit.label(), BASIC, None, None, aliases)


def current_budget(path, dataset) -> dict | None:
    """The budget record that holds for a dataset (its latest), or None.

    Parameters
    ----------
    path : path-like
        The ledger.
    dataset : str or ContingencyTable
        The dataset's id (a table stands for its name).

    Returns
    -------
    dict or None
        The record as the ledger holds it (see `budget_record`, with kind, dataset, time and MAC), or None when
        the dataset has no budget.

    Raises
    ------
    TabreleaseError
        No ledger at `path`, it is not a ledger, or its key is missing or unfit.
    LedgerIntegrityError
        The ledger or its key has other hard links, or the ledger fails verification (chain or anchor).
    """
    path = _resolve(path)
    return _budgets(_read_verified(path, ledger_key(path))).get(_dataset_name(dataset))


def budget_status(path, dataset) -> BudgetStatus:
    """Spent and remaining budget of one dataset, after verifying the ledger's chain.

    Parameters
    ----------
    path : path-like
        The ledger.
    dataset : str or ContingencyTable
        The dataset's id (a table stands for its name); one the ledger does not know has no releases.

    Returns
    -------
    BudgetStatus
        Spending is summed under the budget's unit (without a budget: the first unit covering every release; NaN
        where none does).

    Raises
    ------
    TabreleaseError
        No ledger at `path`, it is not a ledger, or its key is missing or unfit.
    LedgerIntegrityError
        The ledger or its key has other hard links, or the ledger fails verification (chain or anchor).
    """
    path = _resolve(path)
    return _status(_read_verified(path, ledger_key(path)), _dataset_name(dataset))


def ledger_summary(path) -> list[BudgetStatus]:
    """Spent and remaining budget of every dataset the ledger knows, after verifying its chain.

    Parameters
    ----------
    path : path-like
        The ledger.

    Returns
    -------
    list of BudgetStatus
        One per dataset, in the order the ledger first names them.

    Raises
    ------
    TabreleaseError
        No ledger at `path`, it is not a ledger, or its key is missing or unfit.
    LedgerIntegrityError
        The ledger or its key has other hard links, or the ledger fails verification (chain or anchor).
    """
    path = _resolve(path)
    data = _read_verified(path, ledger_key(path))
    return [_status(data, name) for name in _dataset_names(data)]


def ledger_entries(path) -> list[dict]:
    """Every release the ledger records (after verifying its chain), each with `failed`: the reason recorded when
    the release did not happen after its charge, else None, and `sequence`, its number in the ledger.

    Parameters
    ----------
    path : path-like
        The ledger.

    Returns
    -------
    list of dict
        The release records in ledger order, each with `sequence` and `failed` added.

    Raises
    ------
    TabreleaseError
        No ledger at `path`, it is not a ledger, or its key is missing or unfit.
    LedgerIntegrityError
        The ledger or its key has other hard links, or the ledger fails verification (chain or anchor).
    """
    path = _resolve(path)
    records = _read_verified(path, ledger_key(path))["records"]
    failures = {r["release_mac"]: r.get("reason") for r in records if r["kind"] == "failure"}
    return [{**r, "sequence": i, "failed": failures.get(r["mac"])}
            for i, r in enumerate(records, 1) if r["kind"] == "release"]


def entry_margins(entry: dict) -> list[str]:
    """A release record's margins as a person reads them: by their variables' names (``[Région, Sexe]``) where the
    record has them (`margin_names`), else by the letters older records hold.

    Parameters
    ----------
    entry : dict
        A release record (`ledger_entries`).

    Returns
    -------
    list of str
        One per margin, in the record's order.
    """
    from .tables import margin_title

    names = entry.get("margin_names")
    if isinstance(names, list) and all(isinstance(g, list) for g in names):
        return [margin_title(g, range(len(g))) for g in names]
    return [str(m) for m in entry.get("margins", [])]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
