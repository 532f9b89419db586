"""The bundle transaction: a release's folder `out` (`public/` and `internal/`) appears whole, or not at all.

The content is built in a staging folder beside `out` (owner-only, named with this process's id) and renamed into
place; a failure leaves either the old folder or nothing, never half a release, and staging folders of killed runs
are removed before the next release. What goes into the folders is the presentation layer's: `write_release_bundle`
calls the one report writer registered here (`reports.py` registers `write_release_contents` when it is imported),
so that the workflow imports no presentation module. When nothing has registered a writer yet (a program that calls
`publish_release` without having imported the reports), `report_writer` loads the modules the package's `__init__`
named for it in `_hooks`: the wiring is done from the top, and this module names nothing above it.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from . import _hooks
from ._files import FILE_NAME_MAX_BYTES, foreign_entries, process_alive
from .errors import TabreleaseError


@dataclass(frozen=True)
class ReportWriter:
    """The report content of a bundle: `write(public_dir, internal_dir, table, release, evaluation, *,
    version, workbook, charge, out_sep, out_bom)` fills the staged folders; `check(workbook, margin_shapes)` refuses,
    before the charge, what it cannot write (`margin_shapes`: the released margins' shapes, empty before the plan)."""

    write: Callable[..., None]
    check: Callable[..., None]


_WRITER: list[ReportWriter] = []


def register_report_writer(writer: ReportWriter) -> None:
    """Write bundles' content with `writer` from now on (the last registered is used).

    Parameters
    ----------
    writer : ReportWriter
        Replaces any writer registered before.
    """
    _WRITER[:] = [writer]


def report_writer() -> ReportWriter:
    """The registered report writer (importing `tabrelease.reports`, which registers the package's, if none is).

    Returns
    -------
    ReportWriter
    """
    if not _WRITER:
        for name in _hooks.REPORT_WRITER_MODULES:  # named by the package's __init__ (see _hooks)
            importlib.import_module(name)
    if not _WRITER:
        raise TabreleaseError("no report writer is registered: import tabrelease.reports (or register your own with "
                              "bundle.register_report_writer)")
    return _WRITER[0]


def check_report_support(workbook: bool = False, margin_shapes=()) -> None:
    """Refuse, before any charge, report content the writer cannot produce here (a workbook without openpyxl, or a
    margin too large for a sheet).

    Parameters
    ----------
    workbook : bool
        The release asks for an .xlsx workbook.
    margin_shapes : sequence of sequence of int
        The released margins' shapes, where the plan is known (checked again then).

    Raises
    ------
    TabreleaseError
        The registered writer cannot write it here (the package's: `workbook` without openpyxl, or a margin whose
        sheet Excel cannot hold).
    """
    report_writer().check(workbook, margin_shapes)


def check_release_destination(out, force: bool) -> Path:
    """Refuse an --out a release may not be written to; the CLI calls this before any noise is drawn or budget
    charged, and the writer again before it writes.

    Parameters
    ----------
    out : path
        The bundle's folder.
    force : bool
        An existing release bundle at `out` may be replaced.

    Returns
    -------
    Path
        `out`, as a Path.

    Raises
    ------
    TabreleaseError
        `out` exists (without `force`), is not a folder, holds anything besides public/ and internal/, or its
        parent folder does not exist.
    """
    out = Path(out)
    if (bundle := enclosing_bundle(out)) is not None:
        # A release inside another's public/ would put its internal audit (the true counts' errors) in the folder
        # meant for publication, and break that bundle's seal (a new user's trial).
        raise TabreleaseError(f"{out} is inside the release bundle {bundle}: a bundle's public/ (or a copy of it) "
                              "holds only what it published and its internal/ only its own files; choose an --out "
                              "outside it")
    if out.exists() and not force:
        raise TabreleaseError(f"{out} already exists; choose another --out or pass --force to replace it")
    if out.exists() and not out.is_dir():
        raise TabreleaseError(f"{out} exists and is not a folder")
    if out.exists() and (foreign := foreign_entries(out, ("public", "internal"))):
        # --force replaces a release bundle, never a folder of other things (a mistyped --out).
        listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise TabreleaseError(f"{out} is not a release folder (it holds {listed}); --force replaces only a release; "
                              "choose another --out")
    if out.exists() and (strays := files_a_release_did_not_write(out)):
        # Nor a bundle's folders holding other things: a ledger kept in internal/ had been deleted with its key, and
        # its dataset's budget started again from nothing (a new user's trial).
        listed = ", ".join(strays[:3]) + (", ..." if len(strays) > 3 else "")
        raise TabreleaseError(f"{out} holds what no release wrote ({listed}); --force replaces only a release's own "
                              "files: move them, or choose another --out")
    parent = out.resolve().parent
    if parent.exists() and not parent.is_dir():
        raise TabreleaseError(f"the parent of {out} is a file, not a folder")
    if not parent.is_dir():
        raise TabreleaseError(f"the parent folder of {out} does not exist")
    return out


def is_release_bundle(folder: Path) -> bool:
    """Whether `folder` holds a release bundle: its public/ and internal/ folders, with public/release.json or one of
    internal/'s `INTERNAL_FILES` in them.

    Parameters
    ----------
    folder : Path
        The folder looked in (one above a release's --out, say).

    Returns
    -------
    bool
        True where both folders are there and one of those files is.
    """
    public, internal = folder / "public", folder / "internal"
    try:
        return public.is_dir() and internal.is_dir() and (
            (public / "release.json").is_file() or any((internal / name).is_file() for name in INTERNAL_FILES))
    except OSError:  # a folder this user may not search is no bundle of theirs (`/srv/internal`, say)
        return False


def is_published_folder(folder: Path) -> bool:
    """Whether `folder` is a release's public/ or a copy of it (a web root it was deployed to): it holds a
    release.json of this tool's schema.

    Parameters
    ----------
    folder : Path
        The folder whose release.json is read.

    Returns
    -------
    bool
        True where that file is a release's description (its `schema` is this tool's release schema).
    """
    try:
        described = json.loads((folder / "release.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(described, dict) and str(described.get("schema", "")).startswith("tabrelease/release")


def enclosing_bundle(out) -> Path | None:
    """The release bundle `out` would be written inside (the nearest folder above it that `is_release_bundle`, or
    that `is_published_folder`: a copy of a bundle's public/ deployed elsewhere; symbolic links followed), or None.

    Parameters
    ----------
    out : path
        A release's destination.

    Returns
    -------
    Path or None
    """
    try:
        above = Path(out).resolve().parents
    except (OSError, RuntimeError):  # a loop of links: the destination checks after this say what is wrong
        return None
    return next((folder for folder in above if is_release_bundle(folder) or is_published_folder(folder)), None)


# What a release writes in internal/: the report writer's audit and released table (`reports`), and the ledger's
# charge (`ledger.CHARGE_FILE`). In public/ it writes release.json and the files that names.
RELEASED_TABLE_FILE = "released_table.csv"
INTERNAL_FILES = ("audit.json", "audit.html", RELEASED_TABLE_FILE, "charge.json")


def files_a_release_did_not_write(out: Path) -> list[str]:
    """What a release bundle's public/ and internal/ hold besides the files a release writes there: internal/'s
    `INTERNAL_FILES`, and public/'s release.json with the margins' files and workbook it names (where it cannot be
    read, nothing else in public/ is a release's).

    Parameters
    ----------
    out : Path
        An existing release folder.

    Returns
    -------
    list of str
        Each such entry as ``public/NAME`` or ``internal/NAME``, sorted (this tool's temporary files aside; a
        folder inside either is never a release's).
    """
    public, internal = out / "public", out / "internal"
    own = {"release.json"}
    try:
        described = json.loads((public / "release.json").read_text(encoding="utf-8"))
        own.update(m["file"] for m in described.get("margins", []) if isinstance(m, dict) and isinstance(m.get("file"), str))
        if isinstance(described.get("workbook"), str):
            own.add(described["workbook"])
    except (OSError, ValueError, AttributeError, TypeError):
        pass
    strays = []
    for folder, names in ((public, own), (internal, set(INTERNAL_FILES))):
        if folder.is_dir() and not folder.is_symlink():
            strays += [f"{folder.name}/{name}" for name in foreign_entries(folder, names)]
            strays += [f"{folder.name}/{p.name}" for p in folder.iterdir() if p.name in names and p.is_dir()]
    return sorted(strays)


def _check_room(parent: Path, bundle_bytes: int, file_bytes: int) -> None:
    """Refuse where the disk holding `parent` has less free room than `bundle_bytes`, or the process's file-size
    limit is below `file_bytes` (where the system says; where it cannot, nothing is refused)."""
    try:
        found = os.statvfs(parent)
        free = found.f_bavail * found.f_frsize
    except (AttributeError, OSError):  # no statvfs on this system
        free = None
    if free is not None and free < bundle_bytes:
        raise TabreleaseError(f"the disk holding {parent} has {free:,} bytes free, less than the {bundle_bytes:,} a "
                              "release bundle needs; nothing was charged")
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError):
        return
    if limit != resource.RLIM_INFINITY and limit < file_bytes:
        raise TabreleaseError(f"this process may write files of at most {limit:,} bytes (ulimit -f), less than the "
                              f"{file_bytes:,} a release's largest file may need; nothing was charged")


def _staging_prefix(out: Path) -> str:
    return f".{Path(out).name}.staging-"


# The room a bundle needs, checked before a charge (`check_writable`): a bundle of a small table is about 50-110 kB
# (audit.html the largest file, 20-35 kB; a scratch measurement of four built-in and one 924-cell table), and each
# released or audited cell adds a line of about 10 bytes to a file (the 924-cell table's released_table.csv held
# 9,301 bytes). A full disk, or a file-size limit (ulimit -f), had let a release be charged and then fail writing,
# every time (a reviewer's trial).
BUNDLE_BASE_BYTES = 2**20
BYTES_PER_CELL = 64
LARGEST_FILE_BASE_BYTES = 2**18


def check_writable(out, cells: int = 0, largest: int = 0) -> None:
    """Can a bundle be written beside `out`? Tried for real (a folder made and removed) before anything is charged,
    and the room it needs looked for: the disk's free space, and the largest file the process may write.

    Parameters
    ----------
    out : path
        The bundle's folder (its parent folder is tried).
    cells : int, default 0
        The cells the bundle will write (released margins' and the fitted table's), where known: each adds
        `BYTES_PER_CELL` to the room needed.
    largest : int, default 0
        The most cells one file holds: each adds `BYTES_PER_CELL` to the largest file the process must be allowed.

    Raises
    ------
    TabreleaseError
        No folder can be made in the parent folder (permissions, a full or read-only disk), the disk has less free
        room than a bundle needs (`BUNDLE_BASE_BYTES` and its cells'), or the process may not write files that large.
    """
    from ._signals import deferred_signals

    parent = Path(out).resolve().parent
    try:
        # Signals held: one acted on inside mkdtemp, after its mkdir, would leave the probe behind.
        with deferred_signals():
            probe = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(out)}{os.getpid()}-probe-", dir=parent))
            probe.rmdir()
    except OSError as exc:
        raise TabreleaseError(f"cannot write a release into {parent}: {exc.strerror}") from None
    _check_room(parent, BUNDLE_BASE_BYTES + BYTES_PER_CELL * int(cells),
                LARGEST_FILE_BASE_BYTES + BYTES_PER_CELL * int(largest))
    # The files go into a staging folder beside `out`: its path, then the longest path a bundle writes inside it
    # (a published file name of at most FILE_NAME_MAX_BYTES, behind a temporary name's prefix and a folder's name).
    # Past the system's limit a file failed to be written after the charge ("File name too long").
    limit = _path_max(parent)
    staging = len(os.fsencode(str(parent))) + 1 + len(os.fsencode(_staging_prefix(out))) + STAGING_SUFFIX_BYTES
    if limit is not None and staging + BUNDLE_PATH_MAX_BYTES >= limit:
        given = len(os.fsencode(str(parent / Path(out).name)))
        most = limit - 1 - BUNDLE_PATH_MAX_BYTES - (staging - given)
        raise TabreleaseError(f"the path of --out is too long for the files a release writes in it: at most {most} "
                              f"bytes as an absolute path (this one has {given}); choose a shorter one")


# Bytes of the staging folder's name after its prefix (the process id, a dash, mkdtemp's random part), and of the
# longest path a bundle writes inside it: "internal/" or "public/", a temporary file's prefix
# (`_files.temporary_path`, ".tmp-<process>-<thread>-"), then a file name of at most `_files.FILE_NAME_MAX_BYTES`.
STAGING_SUFFIX_BYTES = 32
BUNDLE_PATH_MAX_BYTES = 9 + 48 + FILE_NAME_MAX_BYTES


def _path_max(folder: Path) -> int | None:
    """The longest path, in bytes, the system takes in `folder` (None where it does not say)."""
    try:
        limit = int(os.pathconf(folder, "PC_PATH_MAX"))
    except (AttributeError, OSError, ValueError):  # no pathconf (Windows)
        return None
    return limit if limit > 0 else None  # -1: POSIX's "no limit"


_STAGING_MARK = ".staging-"


def remove_stale_staging(out) -> list[Path]:
    """Staging folders in the folder of `out` left by releases that were killed (their process is gone), whatever
    release they were for: removed, and returned so that the caller can say so. They may hold an audit of a
    confidential table. Temporary files of dead processes (`_files.TEMPORARY_PREFIX`) go too.

    Parameters
    ----------
    out : path
        A bundle's folder: its parent folder is cleaned.

    Returns
    -------
    list of Path
        The staging folders and temporary files removed.
    """
    from ._files import remove_dead_temporaries

    parent = Path(out).resolve().parent
    removed = []
    for candidate in parent.glob(f".*{_STAGING_MARK}*"):
        try:
            pid = int(candidate.name.rsplit(_STAGING_MARK, 1)[1].split("-", 1)[0])
        except (IndexError, ValueError):
            continue
        if candidate.is_dir() and not candidate.is_symlink() and not process_alive(pid):
            shutil.rmtree(candidate, ignore_errors=True)
            removed.append(candidate)
    return removed + remove_dead_temporaries(parent)


def write_bundle(out: str | Path, write: Callable[[Path, Path], None], *, force: bool = False,
                 held_over_rename: list | None = None) -> Path:
    """Stage DIR/public and DIR/internal, fill them with `write(public_dir, internal_dir)`, and rename them into
    place as DIR; refuse an existing DIR unless `force` (then the old bundle is replaced whole).

    Parameters
    ----------
    out : path
        DIR, the bundle's folder.
    write : callable
        Called as `write(public_dir, internal_dir)` with the two staged, empty folders. Whatever it raises is
        raised again after the staging folder is removed (an old bundle stays).
    force : bool
        Replace an existing release bundle.
    held_over_rename : list or None
        Where given, a signal that arrives while the bundle is renamed into place is appended to it, not acted on
        once it is in place: for a caller that must say the release stands (acted on, it had ended a published,
        charged release with an exit that says nothing was charged).

    Returns
    -------
    Path
        DIR.

    Raises
    ------
    TabreleaseError
        As `check_release_destination`.
    """
    from ._signals import deferred_signals

    out = check_release_destination(out, force)
    parent = out.resolve().parent
    staging = None
    try:
        # Owner-only (mkdtemp), named with this process's id so that a later run can tell a killed run's folder.
        # Signals held until `staging` names it: one acted on inside mkdtemp, after its mkdir, would leave it behind.
        with deferred_signals():
            staging = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(out)}{os.getpid()}-", dir=parent))
        public_dir = staging / "public"
        internal_dir = staging / "internal"
        public_dir.mkdir()
        # internal/ is owner-only itself, not only inside the owner-only bundle: a bundle's folder opened up later to
        # publish public/ (chmod of DIR) had exposed the audit and the released table (a reviewer's trial).
        internal_dir.mkdir(mode=0o700)
        write(public_dir, internal_dir)
        _owner_only(internal_dir)
        # The bundle appears whole (and an old one goes whole), or not at all.
        with deferred_signals(act=held_over_rename is None, noted=held_over_rename):
            if out.exists():
                old = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(out)}{os.getpid()}-old-", dir=parent))
                os.replace(out, old / out.name)
                os.replace(staging, out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(staging, out)
    except BaseException:
        if staging is not None:
            # Not cut by a further signal: a Ctrl-C in the removal had left the staging folder, audit and all, on disk
            # (a review's trial).
            with deferred_signals(act=False):
                shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _owner_only(folder: Path) -> None:
    """Make a folder's files 0600 and its folders 0700, itself included (links are left alone)."""
    for root, folders, files in os.walk(folder):
        for name in files:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), 0o600)
        for name in folders:
            os.chmod(os.path.join(root, name), 0o700)
    os.chmod(folder, 0o700)


def write_release_bundle(
    out: str | Path,
    table,
    release,
    evaluation,
    *,
    version: str,
    force: bool = False,
    workbook: bool = False,
    charge: Mapping | None = None,
    out_sep: str = ",",
    out_bom: bool = False,
    held_over_rename: list | None = None,
) -> Path:
    """Write DIR/public and DIR/internal; refuse an existing DIR unless `force`. With `workbook`, public/ also holds
    the margins as one .xlsx workbook (its CSV files' values as cross-tabs with totals, release.json's description, and the plan's margins of error). `charge`, the ledger's
    record of the release's charge, is kept in internal/charge.json (ledger id, record number and MAC) and its
    random release id in public/release.json, so that `ledger verify --bundles` can hold bundles and charges
    together.

    Parameters
    ----------
    out : path
        DIR, the bundle's folder.
    table : ContingencyTable
        The confidential table.
    release : Release
    evaluation : ReleaseEvaluation
        The release compared with the truth (the audit's).
    version : str
        The tool's version.
    force : bool
        Replace an existing release bundle.
    workbook : bool
        Also write public/margins.xlsx.
    charge : mapping or None
        The ledger's record of the charge (`ledger.charge`); None: a release made without a ledger.
    out_sep : str
        The public CSV files' field separator (the character).
    out_bom : bool
        Start the public CSV files with a UTF-8 byte-order mark.
    held_over_rename : list or None
        As `write_bundle`'s.

    Returns
    -------
    Path
        DIR.

    Raises
    ------
    TabreleaseError
        As `check_release_destination`; or the report writer's own errors.
    """
    writer = report_writer()

    def write(public_dir: Path, internal_dir: Path) -> None:
        writer.write(public_dir, internal_dir, table, release, evaluation, version=version,
                     workbook=workbook, charge=charge, out_sep=out_sep, out_bom=out_bom)
        if charge is not None:
            from .ledger import CHARGE_FILE, public_digest, public_seal

            record = {key: charge.get(key) for key in ("ledger_id", "sequence", "mac", "release_id", "dataset", "time")}
            # public/ is whole here (it is staged and renamed into place as it is): sealed with the ledger's key.
            digest = public_digest(public_dir)
            record.update(public_sha256=digest, public_seal=public_seal(charge["ledger"], charge, digest))
            (internal_dir / CHARGE_FILE).write_text(json.dumps(record, indent=2) + "\n")

    return write_bundle(out, write, force=force, held_over_rename=held_over_rename)
