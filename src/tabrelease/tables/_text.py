"""Small rules of reading text shared by the in-memory readers (`readers`) and the streaming counts (`aggregation`):
the order of levels read from data, declared levels, the CSV separator of a header."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from .._files import CSV_SEPARATORS
from ..errors import TabreleaseError
from .metadata import _repeated

# A table's metadata flag: its levels were read from the data (simulation only; a release refuses it).
LEVELS_FROM_DATA = "levels_from_data"
# The metadata key of the file a table was read from (its real path): the ledger fingerprints the file whole, so that
# two releases of one file under two dataset ids are recognised whatever columns each took (`ledger.source_prints`).
SOURCE_FILE = "source_file"


def level_order(labels: Iterable[str]) -> list[str]:
    """Numeric order when every level is a number, else sorted text: never the order of the file, which would
    let the published schema and row order depend on the confidential data (a file sorted by count).

    Parameters
    ----------
    labels : iterable of str
        The levels seen (repeats are ignored).

    Returns
    -------
    list of str
    """
    seen = set(labels)
    try:
        return sorted(seen, key=lambda v: (float(v), v))
    except ValueError:
        return sorted(seen)


def declared_levels(variable: str, declared: Sequence[str]) -> list[str]:
    """A variable's declared levels as text, refused if one is listed twice.

    Parameters
    ----------
    variable : str
    declared : sequence

    Returns
    -------
    list of str
    """
    given = [str(x).strip() for x in declared]  # as every field is read: " Male " is "Male"
    if "" in given:
        raise TabreleaseError(f"the declared levels of {variable!r} hold an empty level (a missing value is read as a "
                              "level with --missing-level LABEL, and LABEL declared)")
    repeated = _repeated(given)
    if repeated is not None:
        raise TabreleaseError(f"the declared levels of {variable!r} list {repeated!r} twice")
    return given


def detect_separator(header_line: str) -> str:
    """The candidate separator the header uses most outside double quotes (a comma when none): headers are names,
    not data, and a quoted name ("a;b" in a comma file) holds no separator.

    Parameters
    ----------
    header_line : str

    Returns
    -------
    str
    """
    unquoted = re.sub(r'"[^"]*"', "", header_line)
    counts = {sep: unquoted.count(sep) for sep in CSV_SEPARATORS}
    best = max(CSV_SEPARATORS, key=lambda sep: counts[sep])
    return best if counts[best] > 0 else ","


def undeclared_values(variable, declared, floats: bool = False) -> TabreleaseError:
    """The refusal of a variable whose data hold values its declared levels lack. The values are not named: which
    values the confidential data hold (a rare category among them) is not for an error message or a log (a new
    user's trial found a category of seven records named so).

    Parameters
    ----------
    variable : str
        The variable.
    declared : sequence of str
        Its declared levels (named: they are the user's, not the data's).
    floats : bool
        The column is stored as floating-point numbers (its type, not its values): its values read as text such as
        "1.0", which is not a level "1" (a new user's trial: Parquet codes written by pandas as floats).

    Returns
    -------
    TabreleaseError
        To raise.
    """
    hint = ("; the column is stored as floating-point numbers, read as text such as '1.0' (not '1'): declare the "
            "levels as written, or store the codes as integers or text") if floats else ""
    return TabreleaseError(f"variable {variable!r} has values that are not among its declared levels {list(declared)} "
                           "(the values are not shown: which ones the data hold is confidential); declare every value "
                           f"the column can take{hint}")


def python_codec(encoding: str) -> str:
    """The Python codec that reads text written in `encoding`: UTF-8 read with its byte-order mark dropped.

    Parameters
    ----------
    encoding : str
        As the user names it (``utf-8``, ``utf8``, ``latin-1``, ...).

    Returns
    -------
    str
    """
    return "utf-8-sig" if encoding.lower().replace("_", "-") in {"utf-8", "utf8", "utf-8-sig"} else encoding


def not_text(path, encoding: str, line: int | None) -> TabreleaseError:
    """The refusal of a file that is not text in its encoding, by line, never its bytes (they could be part of a
    confidential count or label), with the encodings to try.

    Parameters
    ----------
    path : path-like
    encoding : str
        As the user named it.
    line : int or None
        The line of the first bytes that are not text, where known.

    Returns
    -------
    TabreleaseError
    """
    return TabreleaseError(f"{path} is not valid {encoding} text{f' (line {line})' if line else ''}; if it was "
                           "saved by Excel or an older system, try --encoding latin-1 or --encoding cp1252")


def refuse_wide_text(path, head: bytes, encoding: str) -> None:
    """Refuse, with the encoding to give, text saved in UTF-16 or UTF-32 (Excel's "Unicode text") read in a
    one-byte encoding: its byte-order mark, or NUL bytes between its characters (a new user's trial: told to try
    latin-1, which then said "data row 33 has 1 fields").

    Parameters
    ----------
    path : path-like
    head : bytes
        The file's first bytes.
    encoding : str
        The encoding the user named.
    """
    codec = python_codec(encoding).replace("_", "-").lower().replace("utf16", "utf-16").replace("utf32", "utf-32")
    sample = head[:4096]
    marked = sample[:2] in (b"\xff\xfe", b"\xfe\xff")
    if codec.startswith("utf-32") or codec.startswith("utf-16") and (marked or codec != "utf-16"):
        return  # read as it says (utf-16 without its byte order needs the mark)
    if marked or (sample and sample.count(0) * 4 >= len(sample)):
        # Without the mark, the byte order from where the NULs fall: after each ASCII character (little-endian)
        # or before it. Python's utf-16 needs the mark.
        order = "" if marked else "-le" if sample[1::2].count(0) >= sample[0::2].count(0) else "-be"
        if codec == "utf-16":
            raise TabreleaseError(f"{path} looks like UTF-16 text without a byte-order mark, which utf-16 needs: give "
                                  f"--encoding utf-16{order}")
        raise TabreleaseError(f"{path} looks like UTF-16 text (as Excel's \"Unicode text\" saves it: "
                              f"{'a UTF-16 byte-order mark' if marked else 'NUL bytes between its characters'}), "
                              f"not {encoding}: give --encoding utf-16{order}")


def nfc(text) -> str:
    """Text in Unicode's composed form (NFC: "é" one character, not "e" and a combining accent), as every
    fingerprint and every comparison of names and labels across files takes it: macOS tools write NFD.

    Parameters
    ----------
    text : object
        Made a str first.

    Returns
    -------
    str
    """
    return unicodedata.normalize("NFC", str(text))


def all_nfc(texts: Iterable) -> bool:
    """Whether every text is in NFC already (`nfc` would change none): a quick check, no text made.

    Parameters
    ----------
    texts : iterable

    Returns
    -------
    bool
    """
    return all(unicodedata.is_normalized("NFC", str(t)) for t in texts)


# Why a name is not quoted in a message (`header_looks_like_names`).
NOT_A_NAME = "a number, very long or not printable, as a row of data would be"

# A column's name longer than this is not shown in a message: a file read in the wrong encoding comes as one
# "column" holding the whole file (a new user's trial: a UTF-8 file read as UTF-16 quoted its 1.1 KB in a refusal).
LONGEST_NAME_SHOWN = 64
_NUMBER = re.compile(r"^\s*[-+]?(\d+([.,]\d*)?|[.,]\d+)([eE][-+]?\d+)?\s*$")


def header_looks_like_names(columns: Sequence) -> bool:
    """Whether a file's header can be quoted in a message: no field is a number (a count, or a numeric code, as in a
    row of data), too long to be a name, or holds control characters. A file without a header has its first row of
    data read as one, and a refusal that listed "the columns" quoted that row (a new user's trial: a cell and its
    count), so a header that fails this is described, not quoted.

    Parameters
    ----------
    columns : sequence
        The header's fields.

    Returns
    -------
    bool
    """
    texts = [str(c) for c in columns]
    return all(len(t) <= LONGEST_NAME_SHOWN and not _NUMBER.match(t) and t.isprintable() for t in texts)


def header_confirmed(columns: Sequence, names: Iterable = (), rows: Iterable = (), levels=None) -> bool:
    """Whether a file's first row is known to be its header: it holds a name the user gave (a column asked for, a
    variable of the levels file, the count column), and nothing in it looks like data: no field is a declared
    level of any variable, and none recurs in its column among the rows below (a record's categories do; a
    header's names do not). A file without a header row has its first record read as one, and a record's fields
    need not look like data (a new user's trial: ``male,urban,yes`` was quoted as "the columns"; a review's: a
    record's ``employed`` is also a variable's name). No guess from numbers: a column of numbers under a word is
    also a first record whose number is missing (``male,urban,NA``).

    Parameters
    ----------
    columns : sequence
        The first row's fields.
    names : iterable
        The user's names.
    rows : iterable of sequences
        Rows below it (the first thousand are looked at).
    levels : mapping, optional
        Declared levels.

    Returns
    -------
    bool
    """
    if set(nfc(c) for c in columns).isdisjoint(nfc(name) for name in names):
        return False
    return not fields_like_a_record(columns, rows, levels)


def fields_like_a_record(columns: Sequence, rows: Iterable = (), levels=None) -> list[int]:
    """The first row's fields that look like a record's, numbered from 1: a declared level of any variable, or a
    value that recurs in its column among the first thousand rows below (a record's categories do; a header's
    names do not).

    Parameters
    ----------
    columns : sequence
        The first row's fields.
    rows : iterable of sequences
        Rows below it.
    levels : mapping, optional
        Declared levels.

    Returns
    -------
    list of int
        The fields' numbers (1 for the first); empty where none looks like data.
    """
    fields = [nfc(c) for c in columns]
    declared = {nfc(level) for values in (levels or {}).values() for level in values}
    below = [[nfc(str(v).strip()) for v in row] for _, row in zip(range(1000), rows)]
    return [j + 1 for j, field in enumerate(fields)
            if field in declared or any(len(row) > j and row[j] == field for row in below)]


def the_columns(columns: Sequence, names: Iterable = (), rows: Iterable = (), levels=None, *,
                schema: bool = False) -> str:
    """A message's words for a file's columns: ``the columns are [...]`` where the first row is known to be a header
    (`header_confirmed` by the user's `names`) and looks like names
    (`header_looks_like_names`); else how many fields it has and why they are not shown.

    Parameters
    ----------
    columns : sequence
        The header's fields.
    names : iterable
        The names the user gave: the columns asked for, the levels file's variables.
    rows : iterable of sequences
        Rows of data below the header (`header_confirmed`).
    levels : mapping, optional
        Declared levels (`header_confirmed`).
    schema : bool
        The columns are a file format's schema (Parquet's), never a row of data.

    Returns
    -------
    str
    """
    columns, names = [str(c) for c in columns], [str(n) for n in names]
    if header_looks_like_names(columns) and (schema or header_confirmed(columns, names, rows, levels)):
        return f"the columns are {columns}"
    count = f"the file's first row has {len(columns)} field{'s' if len(columns) != 1 else ''}, not shown"
    if not header_looks_like_names(columns):
        return (f"{count}: one is {NOT_A_NAME}, or a file read in the wrong encoding (does the file have a header "
                "row? is --encoding right?)")
    # Not even a field that differs from a name asked for only in case: the user's word may be a record's value.
    return (f"{count}: the first row is not known to be a header (it holds no name you gave, or a value of the "
            "data), and a file without a header row would have a record quoted (does the file have a header row?)")


def undeclared_metadata(variables: Sequence, levels, asked: bool) -> dict:
    """The metadata of a table whose levels were read from its data: which variables the levels file left out (a
    levels file naming other variables, a typo among them, had left a release refused with "declare every
    variable's levels" and no word of which: a new user's trial), as microdata's refusal names them, and whether
    those names may be shown: only where the header is known to be one (`asked`: the variables were named by the
    user or found beside a count column, or the levels file declares one of them), not a headerless file's first
    record.

    Parameters
    ----------
    variables : sequence of str
        The table's variables.
    levels : mapping or None
        The declared levels.
    asked : bool
        Whether the variables' names are known to be a header's.

    Returns
    -------
    dict
    """
    missing = [v for v in variables if levels is None or v not in levels]
    others = sorted(set(levels or ()) - set(variables))  # names the file declares that the table lacks: a typo?
    return {LEVELS_FROM_DATA: True, "undeclared_levels": missing,
            "undeclared_named": bool(asked or len(missing) < len(variables)),
            **({"levels_not_in_table": others} if others else {})}


def same_name_columns(names: Sequence) -> str | None:
    """Where two columns share a name, the words that say which (by position: a file without a header row has a
    record for names, and ``yes,yes,male`` is not to be quoted); None where every name is distinct.

    Parameters
    ----------
    names : sequence of str

    Returns
    -------
    str or None
        Such as ``"columns 1 and 2 have the same name"``.
    """
    first: dict[str, int] = {}
    for j, name in enumerate(names):
        if name in first:
            return f"columns {first[name] + 1} and {j + 1} have the same name"
        first[name] = j
    return None


def missing_values(variable) -> TabreleaseError:
    """The refusal of a column with a missing value (a null, or a field empty once stripped), with the way to read
    one as a level of its own.

    Parameters
    ----------
    variable : str
        The column's name (numbered instead by the reader where the header is not known to be one).

    Returns
    -------
    TabreleaseError
    """
    return TabreleaseError(f"column {variable!r} has missing values: --missing-level LABEL reads them as a level of "
                           "their own (declared among its levels in release mode)")
