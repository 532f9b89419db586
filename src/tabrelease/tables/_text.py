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
    given = [str(x) for x in declared]
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


def undeclared_values(variable, declared) -> TabreleaseError:
    """The refusal of a variable whose data hold values its declared levels lack. The values are not named: which
    values the confidential data hold (a rare category among them) is not for an error message or a log (a new
    user's trial found a category of seven records named so).

    Parameters
    ----------
    variable : str
        The variable.
    declared : sequence of str
        Its declared levels (named: they are the user's, not the data's).

    Returns
    -------
    TabreleaseError
        To raise.
    """
    return TabreleaseError(f"variable {variable!r} has values that are not among its declared levels {list(declared)} "
                           "(the values are not shown: which ones the data hold is confidential); declare every value "
                           "the column can take")


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


def the_columns(columns: Sequence) -> str:
    """A message's words for a file's columns: ``the columns are [...]`` where the header looks like names
    (`header_looks_like_names`), else how many there are and why they are not shown.

    Parameters
    ----------
    columns : sequence
        The header's fields.

    Returns
    -------
    str
    """
    columns = list(columns)
    if header_looks_like_names(columns):
        return f"the columns are {[str(c) for c in columns]}"
    return (f"the file's first row has {len(columns)} field{'s' if len(columns) != 1 else ''}, not shown: one is "
            f"{NOT_A_NAME}, or a file read in the wrong encoding (does the file have a header row? is --encoding "
            "right?)")
