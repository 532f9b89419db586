"""Writing files so that a reader never sees half of one: write beside the target, then rename."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path


TEMPORARY_PREFIX = ".tmp-"
# A side file (a levels or metadata file, a batch spec) is a few kilobytes, and is read whole: one past this is not
# one (a data file given by mistake), and is refused before it fills memory.
SIDE_FILE_LIMIT = 8 * 2**20
SIDE_FILE_LIMIT_TEXT = "8 MiB"


def read_side_file(path, what: str, limit: int = SIDE_FILE_LIMIT) -> bytes:
    """The bytes of a small file the tool reads whole, refused in one line unless it is a regular file of at most
    `limit` bytes.

    A FIFO would block the read for ever and a device such as /dev/zero would never end: the file is opened without
    blocking and judged by what was opened (not by its name, which could be swapped between a check and the open).

    Parameters
    ----------
    path : str or path-like
        The file.
    what : str
        What the file is, for messages ("levels file").
    limit : int
        The most bytes read.

    Returns
    -------
    bytes
        The file's content.
    """
    import stat

    from .errors import TabreleaseError

    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except IsADirectoryError:
        raise TabreleaseError(f"the {what} {path} is a directory, not a file") from None
    except OSError as exc:
        raise TabreleaseError(f"cannot read the {what} {path}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise TabreleaseError(f"the {what} {path} is a directory, not a file")
        if not stat.S_ISREG(mode):
            raise TabreleaseError(f"the {what} {path} is not a regular file (a pipe or a device is not read)")
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise TabreleaseError(f"cannot read the {what} {path}: {exc.strerror}") from None
    if len(data) > limit:
        limit_text = SIDE_FILE_LIMIT_TEXT if limit == SIDE_FILE_LIMIT else f"{limit:,} bytes"
        raise TabreleaseError(f"the {what} {path} is larger than {limit_text}, the most read for a {what}")
    return data


def check_side_file(path, what: str, limit: int = SIDE_FILE_LIMIT) -> None:
    """Refuse, in one line, a small file that `read_side_file` would refuse (for readers that open it themselves).

    Parameters
    ----------
    path : str or path-like
        The file.
    what : str
        What the file is, for messages ("batch spec").
    limit : int
        The most bytes allowed.

    Raises
    ------
    TabreleaseError
        If the file cannot be opened, is not a regular file, or holds more than `limit` bytes.
    """
    read_side_file(path, what, limit)


def temporary_path(path: Path) -> Path:
    """A temporary name beside `path`, unique per process and thread, so that two writers never share (or delete)
    one.

    Parameters
    ----------
    path : Path
        The file to be written.

    Returns
    -------
    Path
        ``.tmp-<process id>-<thread id>-<name>`` in the same folder.
    """
    path = Path(path)
    return path.with_name(f"{TEMPORARY_PREFIX}{os.getpid()}-{threading.get_ident()}-{path.name}")


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (one we may not signal exists too).

    Parameters
    ----------
    pid : int
        A process id.

    Returns
    -------
    bool
        False only when no such process exists.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_temporaries(folder: Path) -> list[Path]:
    """Temporary files this tool left in `folder` from processes that are gone (killed mid-write): removed and
    returned. Each is named with its writer's process id, so a live writer's file is never touched.

    Parameters
    ----------
    folder : Path
        The folder to clean.

    Returns
    -------
    list of Path
        The files removed (those that could not be removed are left silently).
    """
    removed = []
    for candidate in Path(folder).glob(f"{TEMPORARY_PREFIX}*"):
        try:
            pid = int(candidate.name[len(TEMPORARY_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not process_alive(pid) and (candidate.is_file() or candidate.is_symlink()):
            try:
                candidate.unlink()
                removed.append(candidate)
            except OSError:
                pass
    return removed


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call write(temporary path) in the target's folder, then rename it over `path`; no temporary file is left.

    Parameters
    ----------
    path : Path
        The file to write (replaced when it exists).
    write : callable
        Called with the temporary path; writes the whole file there.
    """
    path = Path(path)
    tmp = temporary_path(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all (see `write_atomic`).

    Parameters
    ----------
    path : Path
        The file to write (replaced when it exists).
    text : str
        The file's content, written in the locale's encoding.
    """
    write_atomic(path, lambda tmp: tmp.write_text(text))


def write_frame_atomic(frame, path: Path) -> None:
    """A DataFrame as Parquet or CSV, by the path's suffix.

    Parameters
    ----------
    frame : pandas.DataFrame
        The rows to write (without the index).
    path : Path
        The file: Parquet when it ends in ``.parquet``, CSV otherwise; written atomically.
    """
    if Path(path).suffix == ".parquet":
        write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))
    else:
        write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def labels_protected(frame):
    """The frame with every text cell and column name written as `csv_field_for_label` writes labels (behind
    a single quote where a spreadsheet would take it for a formula); numbers are left as they are. For CSV files
    holding names people chose, such as a table named after its file (=cmd.csv).

    Parameters
    ----------
    frame : pandas.DataFrame
        The rows to write.

    Returns
    -------
    pandas.DataFrame
        A copy with text column names and text cells protected.
    """
    out = frame.rename(columns=lambda c: csv_field_for_label(c) if isinstance(c, str) else c)
    for column in out.columns:
        if out[column].dtype == object or str(out[column].dtype) in ("string", "str"):
            out[column] = [csv_field_for_label(v) if isinstance(v, str) else v for v in out[column]]
    return out


def foreign_entries(folder: Path, own: Iterable[str]) -> list[str]:
    """What `folder` holds that this tool did not write there (by name), so that --force never deletes it.

    Parameters
    ----------
    folder : Path
        An existing folder.
    own : iterable of str
        The names this tool writes there.

    Returns
    -------
    list of str
        The other names in `folder`, sorted (this tool's temporary files aside).
    """
    own = set(own)
    return sorted(p.name for p in Path(folder).iterdir() if p.name not in own and not p.name.startswith(TEMPORARY_PREFIX))


def remove_own_outputs(folder: Path, own: Iterable[str]) -> None:
    """--force on a results folder: delete the files and folders this tool writes there, and nothing else.

    Parameters
    ----------
    folder : Path
        The results folder.
    own : iterable of str
        The names this tool writes there (files, or folders removed whole; a symbolic link is unlinked, never
        followed).
    """
    import shutil

    for name in own:
        path = Path(folder) / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


# OWASP's rule against CSV injection: spreadsheet programs take a field that starts with = + - @, a tab or a carriage
# return as a formula (which can compute, fetch or run things), so a label written to a CSV file that starts with one
# is written behind a single quote, which makes it text ('=1+1, '-1). Counts are never changed: they are numbers.
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def _formula_like(text: str) -> bool:
    # Leading quotes are looked through, so that a label that itself starts with a quote before a trigger ('=x) gets
    # one more, and csv_label_from_field undoes the rule exactly: every label reads back as it was written.
    return text.lstrip("'").startswith(FORMULA_TRIGGERS)


def csv_field_for_label(label: str) -> str:
    """A label (a level, a variable's name) as it is written to a CSV file: behind a single quote when a spreadsheet
    would read it as a formula (it starts with ``= + - @``, a tab or a carriage return; OWASP's rule).

    Parameters
    ----------
    label : str
        The label as the table holds it.

    Returns
    -------
    str
        The field to write; `csv_label_from_field` gives the label back.
    """
    return "'" + label if _formula_like(label) else label


def csv_label_from_field(field: str) -> str:
    """The label a CSV field written by `csv_field_for_label` holds (the inverse: one protective quote removed).

    Parameters
    ----------
    field : str
        A field of a CSV file.

    Returns
    -------
    str
        The label; a field that was not protected is returned as it is.
    """
    return field[1:] if field.startswith("'") and _formula_like(field) else field


# The field separators a CSV reader detects from a header (`tables.readers`), and so the only ones written.
CSV_SEPARATORS = (",", ";", "\t", "|")


# --- names of published files ---------------------------------------------------------------------------------
# What a file name may not hold somewhere a bundle is copied to: "/" anywhere, <>:"\|?* on Windows, and control
# characters (Windows refuses 0-31; none is readable anyway). Everything else, accents and any script included, is
# kept: a name is for people.
_FILE_FORBIDDEN = frozenset('<>:"/\\|?*')
# Names Windows reserves for devices, whatever the extension (NUL.csv and nul.tar.gz are the device NUL).
_WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"{d}{n}" for d in ("COM", "LPT") for n in "0123456789\u00b9\u00b2\u00b3"])
# The longest published file name in UTF-8 bytes: file systems allow 255, and headroom is left for the temporary
# name a copying tool (or `temporary_path`, ".tmp-<process>-<thread>-") puts in front of it.
FILE_NAME_MAX_BYTES = 200


def _cut(text: str, fits: Callable[[str], bool], longest: int) -> str:
    """The longest start of `text`, of at most `longest` characters, that `fits`, never cutting a character from the
    combining marks after it."""
    import unicodedata

    end = min(len(text), longest)
    while end and not fits(text[:end]):
        end -= 1
    while 0 < end < len(text) and unicodedata.combining(text[end]):
        end -= 1  # the mark belongs to the character before the cut: leave both out
    return text[:end]


def _file_part(name: str) -> str:
    """One variable's name as part of a file name: NFC, forbidden characters as "_", no dot or space at either end
    (Windows drops trailing ones; a leading dot hides a file on Unix)."""
    import unicodedata

    name = unicodedata.normalize("NFC", name)
    name = "".join("_" if c in _FILE_FORBIDDEN or unicodedata.category(c) == "Cc" else c for c in name)
    return name.strip(" .") or "_"


def _not_reserved(stem: str) -> str:
    """`stem`, with "_" after its part before the first dot when Windows reserves that part for a device."""
    head, dot, rest = stem.partition(".")
    if head.rstrip(" ").upper() in _WINDOWS_RESERVED:
        return head + "_" + dot + rest
    return stem


def _file_key(name: str) -> str:
    # Windows and macOS compare names without regard to case (and macOS to normalisation): so does the check.
    import unicodedata

    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def published_file_names(parts: Iterable[Iterable[str]], extension: str = ".csv", *,
                         max_bytes: int = FILE_NAME_MAX_BYTES) -> list[str]:
    """Distinct file names, for people, from the names they are made of: ``["Région de résidence", "Sexe"]`` gives
    ``Région de résidence__Sexe.csv``.

    The names are kept as they are (NFC-normalised) but for what a file system forbids: the characters ``<>:"/\\|?*``
    and control characters become "_"; dots and spaces at either end of a part are dropped; a name Windows reserves
    (CON, NUL, COM1, ...) gets "_" after it. A name longer than `max_bytes` bytes in UTF-8 is shortened (never inside
    a character or before its accents). Names equal without regard to case or normalisation (as Windows and macOS
    compare them) are told apart by a suffix ~2, ~3, ... in order.

    Parameters
    ----------
    parts : iterable of iterable of str
        Per file, the names it is made of (joined by "__").
    extension : str
        Appended to each name.
    max_bytes : int
        The longest name, extension and suffix included, in UTF-8 bytes.

    Returns
    -------
    list of str
        One file name per entry of `parts`, in order, all distinct without regard to case.
    """
    files: list[str] = []
    seen: set[str] = set()
    room = max_bytes - len(extension.encode())
    for names in parts:
        stem = "__".join(_file_part(name) for name in names) or "_"
        number, suffix = 1, ""
        while True:
            cut = _cut(stem, lambda s: len(s.encode()) + len(suffix.encode()) <= room, room).rstrip(" .") or "_"
            name = _not_reserved(cut + suffix) + extension
            if _file_key(name) not in seen:
                break
            number += 1
            suffix = f"~{number}"
        seen.add(_file_key(name))
        files.append(name)
    return files
