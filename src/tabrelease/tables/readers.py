"""Reading tables: long-format frames (CSV, Parquet, .xlsx) with a count column, and microdata (one row per person);
`load_table` and `load_input` read what a user names (a built-in table by name, or a file)."""

from __future__ import annotations

import copy as _copy
import csv
import io
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# The rule against formulas in CSV files (OWASP) is one of _files' rules of writing files; the readers undo its
# protective quote.
from .._files import CSV_SEPARATORS, csv_field_for_label, csv_label_from_field
from ..errors import TabreleaseError
from .catalogue import BUILTIN_TABLES, builtin_table
from .metadata import read_levels_file, read_metadata, with_declared_metadata
from .model import MAX_TABLE_CELLS, ContingencyTable, MicrodataTable, check_cells, too_few_levels
from ._text import (LEVELS_FROM_DATA, SOURCE_FILE, declared_levels, detect_separator, fields_like_a_record,
                    header_confirmed, level_order, missing_values, not_text, python_codec, refuse_wide_text,
                    same_name_columns, the_columns, undeclared_metadata, undeclared_values)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
# pandas is imported where a frame is read or made: a release of a built-in table needs none, and
# importing it costs a third of a second of start-up.

# --- construction --------------------------------------------------------------------------------
def _level_order(values: pd.Series) -> list[str]:
    """Numeric order when every level is a number, else sorted text (`_text.level_order`)."""
    return level_order(values.unique().tolist())


def _resolve_levels(frame: pd.DataFrame, variables: Sequence[str], levels: Mapping[str, Sequence[str]] | None):
    resolved = []
    for var in variables:
        observed = frame[var]
        if levels is not None and var in levels:
            given = _declared_levels(var, levels[var])
            unknown = sorted(set(observed.unique().tolist()) - set(given))
            if unknown:
                raise undeclared_values(var, given)
            resolved.append(given)
        else:
            resolved.append(_level_order(observed))
    return resolved


_declared_levels = declared_levels


def _as_text(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    out = frame.loc[:, list(columns)].copy()
    for col in columns:
        if out[col].isna().any():
            raise missing_values(col)
        # Vectorised (a million rows per column in well under a second, where a Python map took seconds).
        out[col] = out[col].astype(str).str.strip()
        if (out[col] == "").any():
            raise missing_values(col)
    return out


MAX_COUNT = 2**63 - 1
# A count as written in a file, once the thousands and decimal marks are normalised: ASCII digits, an optional sign,
# point and exponent. Python's int() and Decimal() also take 5_000 and digits of other scripts (Arabic-Indic ٥,
# fullwidth ５): a count written so is a typo or a trick, and is refused.
_COUNT_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _parse_counts(raw: pd.Series, count_column: str) -> np.ndarray:
    """Counts parsed exactly as integers. Messages name the row, never the value (it is a confidential count)."""
    from decimal import Decimal, InvalidOperation

    values = []
    for row, item in enumerate(raw.tolist()):
        text = "" if item is None or (isinstance(item, float) and np.isnan(item)) else str(item).strip()
        where = f"in column {count_column!r} (data row {row + 1})"
        if text == "":
            raise TabreleaseError(f"missing count {where}")
        if not _COUNT_TEXT.fullmatch(text):
            raise TabreleaseError(f"the count {where} is not a number written in the digits 0-9")
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise TabreleaseError(f"the count {where} is not a number") from None
        if not number.is_finite():
            raise TabreleaseError(f"the count {where} is not a number")
        if number < 0:
            raise TabreleaseError(f"a negative count {where}")
        if number != number.to_integral_value():
            # A thousands mark read as a decimal one (1.286 for 1286) is the common cause: named, never the value.
            raise TabreleaseError(f"a fractional count {where}: counts are whole numbers (one written with a "
                                  "thousands mark, as 1.286 for 1286? give --thousands)")
        if number > MAX_COUNT:  # compared before int(): 1e999999999 would take minutes to turn into an integer
            raise TabreleaseError(f"the count {where} is too large (above 2^63 - 1)")
        values.append(int(number))
    if sum(values) > MAX_COUNT:
        raise TabreleaseError(f"the counts in column {count_column!r} add up to more than 2^63 - 1")
    return np.array(values, dtype=np.int64)


def table_from_frame(
    frame: pd.DataFrame,
    count_column: str = "count",
    *,
    complete: bool = True,
    levels: Mapping[str, Sequence[str]] | None = None,
    name: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> ContingencyTable:
    """A table from long format: one column per variable and a count column.

    With `complete=True` (the default) every combination of levels must be listed once, zeros
    included, so that a cell dropped by mistake is caught; `complete=False` takes unlisted
    cells as zero.

    Parameters
    ----------
    frame : pandas.DataFrame
        One column per variable and a count column, one row per cell.
    count_column : str, default "count"
        Name of the count column.
    complete : bool, default True
        Whether every cell must be listed.
    levels : mapping of str to sequence of str, optional
        Declared levels of some or all variables, in order; the others are taken from the data (numeric order when
        every level is a number, else sorted text).
    name : str, optional
        The table's name.
    metadata : mapping, optional
        The table's metadata.

    Returns
    -------
    ContingencyTable or MicrodataTable
        The table; its metadata marks levels read from data when `complete` is False and some are not declared.
        A sparse table (`complete=False`) with more cells than are held (`MAX_TABLE_CELLS`) is kept as its listed
        cells, each with its count (a `MicrodataTable` with weights): its margins are counted from them.

    Raises
    ------
    TabreleaseError
        If the count column is missing, a count is not a non-negative whole number, a cell is listed twice or
        (with `complete`) missing, a value is not among its declared levels, or the table has too many cells.
    """
    frame = _named_by_text(frame, "the table")
    if count_column not in frame.columns:
        given = [count_column, *(levels or ())]
        columns = the_columns(frame.columns, given, _head(frame), levels)
        raise TabreleaseError(f"no count column {count_column!r}; {columns} (one row per person? add --microdata, or "
                              "use table_from_microdata)")
    variables = [str(c) for c in frame.columns if c != count_column]
    if not variables:
        raise TabreleaseError("a long table needs at least one variable column besides the count column")
    if len(frame) == 0:
        raise TabreleaseError("the table has no rows")
    keys = _as_text(frame, variables)
    counts = _parse_counts(frame[count_column], count_column)
    dup = keys.duplicated(keep=False)
    if dup.any():
        # Named by its data rows, never its values: they may be undeclared (confidential) categories, and in a
        # sparse listing even a declared cell's presence says someone has it (a reviewer's trial).
        again = int(np.argmax(keys.duplicated(keep="first").to_numpy()))
        first = int(np.argmax((keys == keys.iloc[again]).all(axis=1).to_numpy()))
        raise TabreleaseError(f"a cell is listed more than once: data rows {first + 1} and {again + 1} describe the "
                              f"same cell ({int(dup.sum())} rows describe repeated cells)")
    level_lists = _resolve_levels(keys, variables, levels)
    for var, lv in zip(variables, level_lists):
        if len(lv) < 2:
            raise too_few_levels(var, lv)
    shape = tuple(len(lv) for lv in level_lists)
    cells = int(np.prod(shape, dtype=object))
    import pandas as pd

    if cells > MAX_TABLE_CELLS and not complete:
        # Counts aggregated elsewhere, over more cells than are held: the listed cells stay as records, each with
        # its count (a MicrodataTable with weights), and every margin is counted from them.
        codes = np.column_stack([pd.Categorical(keys[var], categories=lv).codes for var, lv in zip(variables, level_lists)])
        metadata = dict(metadata or {})
        if not _all_declared(variables, levels):
            metadata.update(undeclared_metadata(variables, levels, asked=True))
        return MicrodataTable(tuple(variables), tuple(map(tuple, level_lists)), codes, name, metadata,
                              weights=counts.astype(np.int64))
    if cells > MAX_TABLE_CELLS:
        raise TabreleaseError(f"the long table has {cells:.3g} cells (held as cells up to {MAX_TABLE_CELLS:,}); list "
                              "only the cells people have, with their counts, and say the table is sparse (--sparse, "
                              "complete=False): it is then kept as those records")
    index = tuple(
        pd.Categorical(keys[var], categories=lv).codes.astype(np.int64) for var, lv in zip(variables, level_lists)
    )
    if complete and len(frame) != cells:
        missing = cells - len(frame)
        # Which cells are missing is not said: a cell left out of a full listing is most often an empty one, and an
        # error message says nothing of the confidential counts.
        raise TabreleaseError(
            f"the long table lists {len(frame)} of {cells} cells ({missing} missing); "
            f"{_sparse_level(keys, variables, level_lists, levels, cells)}list every cell, zeros included, or say the "
            "table is sparse (--sparse, complete=False)"
        )
    array = np.zeros(shape, dtype=np.int64)
    array[index] = counts
    metadata = dict(metadata or {})
    if not complete and not _all_declared(variables, levels):
        # A level nobody has would be missing from the schema; the names are the header beside the count column.
        metadata.update(undeclared_metadata(variables, levels, asked=True))
    return ContingencyTable(tuple(variables), tuple(map(tuple, level_lists)), array, name, metadata)


def _sparse_level(keys, variables, level_lists, levels, cells: int) -> str:
    """Where a full listing misses cells, a variable (of those whose levels were read from the data) with a rare level
    whose rows fill in the missing cells of another level (their rows add up to one level's full listing, the rare
    one at most a quarter of it, and no cell of the others is listed under both), said before the usual advice: a
    misspelt level (one "hang" written "hnag") makes a level of its own, whose cells are then missing under both, and
    --sparse would publish both (a new user's trial). No level is named, and no number of rows (where zeros were left
    out, a level's rows are its non-empty cells). Per variable, the rarest level and at most `MISSPELT_PARTNERS` of
    its possible partners are looked at: a few passes over the rows."""
    for variable, found in zip(variables, level_lists):
        if levels is not None and variable in levels:
            continue
        full = cells // len(found)  # rows per level in a full listing
        rows = keys[variable].value_counts()
        rare, few = rows.idxmin(), int(rows.min())
        if few > full // 4:
            continue
        others = [v for v in variables if v != variable]
        cell_of = (np.ravel_multi_index([_codes(keys[v]) for v in others], [len(lv) for v, lv in
                                        zip(variables, level_lists) if v != variable]) if others
                   else np.zeros(len(keys), np.int64))
        column = keys[variable].to_numpy()
        under_rare = cell_of[column == rare]
        partners = rows[(rows == full - few) & (rows.index != rare)].index[:MISSPELT_PARTNERS]
        for partner in partners:
            if not np.intersect1d(under_rare, cell_of[column == partner]).size:
                return (f"{variable!r} has a rare level whose rows fill in the cells another level lacks (a misspelt "
                        "level? declare the levels with --levels); else ")
    return ""


MISSPELT_PARTNERS = 3


def _codes(column) -> np.ndarray:
    """A column's values as integer codes (pandas' factorisation: one pass)."""
    import pandas as pd

    return pd.factorize(column)[0].astype(np.int64)


def _head(frame: pd.DataFrame) -> list:
    """A frame's first rows as lists of text (to tell a header from a record: `the_columns`)."""
    return frame.head(1000).astype(str).to_numpy().tolist()


def _leading_rows(body: str, sep: str) -> list[list[str]]:
    """The first rows of data of a CSV text (its header skipped), read by the csv module."""
    import itertools

    try:
        return list(itertools.islice(csv.reader(io.StringIO(body, newline=""), delimiter=sep), 1, 1001))
    except csv.Error:
        return []


def _named_by_text(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    """The frame with its column names as text, refused in one line if two are the same (pandas would hand back a
    frame where a column is asked for, and fail somewhere else)."""
    names = [str(c) for c in frame.columns]
    repeated = same_name_columns(names)
    if repeated:
        raise TabreleaseError(f"{what}: {repeated}; every column needs its own name")
    if all(isinstance(c, str) for c in frame.columns):
        return frame
    return frame.set_axis(names, axis=1)


# Set in a table's metadata when its levels were read from data that need not show every level.


def _all_declared(variables, levels) -> bool:
    return levels is not None and all(v in levels for v in variables)


def table_from_microdata(
    frame: pd.DataFrame,
    variables: Sequence[str] | None = None,
    *,
    levels: Mapping[str, Sequence[str]] | None = None,
    name: str | None = None,
    as_records: bool | None = None,
) -> ContingencyTable | MicrodataTable:
    """A table from one row per person: counts of each combination of the given variables.

    Levels are taken from the data unless given; a given level that nobody has is a zero cell. A table with more
    cells than memory holds (past 2^27) is kept as its records (a `MicrodataTable`, which counts each margin when
    asked); `as_records` forces one form or the other.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per person.
    variables : sequence of str, optional
        The columns to count (every column by default).
    levels : mapping of str to sequence of str, optional
        Declared levels of some or all variables, in order.
    name : str, optional
        The table's name.
    as_records : bool, optional
        True to keep the records, False to count the cells; None (the default) decides by the number of cells.

    Returns
    -------
    ContingencyTable or MicrodataTable
        The table, held as cells or as records.

    Raises
    ------
    TabreleaseError
        If a column is missing or has missing values, the frame has no rows, a value is not among its declared
        levels, or a variable has one level.
    """
    frame = _named_by_text(frame, "the microdata frame")
    asked = variables is not None
    variables = [str(v) for v in (variables if variables is not None else frame.columns)]
    unknown = [v for v in variables if v not in frame.columns]
    if unknown:
        given = [*variables, *(levels or ())]
        raise TabreleaseError(f"microdata has no column {unknown[0]!r}; "
                              f"{the_columns(frame.columns, given, _head(frame), levels)}")
    if len(frame) == 0:
        raise TabreleaseError("the microdata have no rows")
    codes, level_lists = [], []
    for var in variables:
        column_codes, column_levels = _factorized(frame[var], var, None if levels is None else levels.get(var))
        codes.append(column_codes)
        level_lists.append(column_levels)
    shape = tuple(len(lv) for lv in level_lists)
    metadata = {} if _all_declared(variables, levels) else undeclared_metadata(variables, levels, asked)
    cells = int(np.prod(shape, dtype=object))
    if cells > MAX_TABLE_CELLS if as_records is None else as_records:
        # Too many cells to hold: the table stays as its records, and the release path asks it for margins.
        return MicrodataTable(tuple(variables), tuple(map(tuple, level_lists)), np.column_stack(codes), name, metadata)
    check_cells(variables, shape)
    flat = np.ravel_multi_index(codes, shape)
    array = np.bincount(flat, minlength=cells).reshape(shape)
    return ContingencyTable(tuple(variables), tuple(map(tuple, level_lists)), array, name, metadata)


def _factorized(column: pd.Series, variable: str, declared: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    """(each record's level position, the levels) of one microdata column. The distinct values are found first
    (a hash pass) and only they are turned into trimmed text: a million records per column in milliseconds."""
    import pandas as pd

    positions, uniques = pd.factorize(column, use_na_sentinel=True)
    labels = [str(u).strip() for u in uniques]
    if (positions < 0).any() or "" in labels:
        raise missing_values(variable)
    if declared is not None:
        given = _declared_levels(variable, declared)
        unknown = sorted(set(labels) - set(given))
        if unknown:
            raise undeclared_values(variable, given, pd.api.types.is_float_dtype(column.dtype))
        order = given
    else:
        order = _level_order(pd.Series(labels))
    if len(order) < 2:
        raise too_few_levels(variable, order)
    where = {label: i for i, label in enumerate(order)}
    lookup = np.array([where[label] for label in labels], dtype=np.int64)
    return lookup[positions], list(order)


def read_microdata(path: str | Path, variables: Sequence[str] | None = None, *,
                   levels: Mapping[str, Sequence[str]] | None = None,
                   csv_options: CsvOptions | None = None, engine: str | None = None,
                   scheduler: str | None = None, batch_rows: int | None = None) -> ContingencyTable | MicrodataTable:
    """Microdata (one row per person) from a CSV or Parquet file: only the named columns are read (all by
    default) and counted into a table. By default (`engine` "arrow") the file is streamed a batch of rows at a time
    (`aggregation`): a table whose cells fit is counted cell by cell, a larger one is a `FileTable` whose margins
    are counted from the file when the release asks for them. With "pandas" the whole file is read into memory, and
    a table with too many cells is held as its records (a `MicrodataTable`); .xlsx files are read so.

    Parameters
    ----------
    path : str or Path
        A CSV, Parquet or .xlsx file.
    variables : sequence of str, optional
        The columns to read and count (every column by default).
    levels : mapping of str to sequence of str, optional
        Declared levels of some or all variables, in order.
    csv_options : CsvOptions, optional
        How the CSV file is written (and which .xlsx sheet to read).
    engine : {"arrow", "pandas", "dask", "spark"}, optional
        Who reads and counts the file (default: "arrow", or "pandas" for .xlsx).
    scheduler : str, optional
        With "dask": the scheduler's address (default: a local cluster of two workers).
    batch_rows : int, optional
        With "arrow": rows read at a time (default `aggregation.BATCH_ROWS`).

    Returns
    -------
    ContingencyTable or MicrodataTable or FileTable
        The table, named after the file's stem.

    Raises
    ------
    TabreleaseError
        If the file cannot be read, a variable is named twice or missing, or the data do not make a table.
    """
    path = _regular_file(path)
    try:
        table = _read_microdata(path, variables, levels, csv_options, engine, scheduler, batch_rows)
    except TabreleaseError as error:
        hidden = error if variables is not None else _header_names_hidden(error, path, levels, csv_options)
        raise _naming_the_file(hidden, path) from None
    if variables is None:
        _refuse_a_record_for_names(path, levels, csv_options)
    if variables is None and table.metadata.get("undeclared_named") and _unconfirmed_names(path, levels, csv_options):
        # Its names are a first row not known to be a header: later messages (a margin's unknown name, a model's)
        # letter the variables instead (`model.names_not_shown`).
        from dataclasses import replace

        table = replace(table, metadata={**table.metadata, "undeclared_named": False})
    return table


def _refuse_a_record_for_names(path: Path, levels, csv_options) -> None:
    """Refuse a file read without --variables whose first row looks like a record (`fields_like_a_record`): a file
    saved without its header row had its first person's record published as the variables' names (in a
    simulation's public files, its sensitive-attribute unit and margins' file names) and left out of the counts."""
    names, rows = _first_rows(path, csv_options)
    # An empty field is no evidence: a trailing separator's unnamed column is empty below too.
    numbers = [j for j in fields_like_a_record(names, rows, levels) if str(names[j - 1]).strip()] if names else []
    if numbers:
        which = numbers[0] if len(numbers) == 1 else f"{', '.join(map(str, numbers[:-1]))} and {numbers[-1]}"
        raise TabreleaseError(f"{path}: its first row, read as the header, looks like a record: in "
                              f"column{'s' if len(numbers) > 1 else ''} {which} it holds a value found again below it "
                              "or a declared level; add a header row naming the columns (or, if that row is the "
                              "header, remove its copies below, or name the columns to read with --variables)")


def _unconfirmed_names(path: Path, levels, csv_options) -> list[str]:
    """The file's first row, read again, where it is not known to be its header (`header_confirmed`); else []."""
    names, rows = _first_rows(path, csv_options)
    return [] if not names or header_confirmed(names, levels or (), rows, levels) else names


def _naming_the_file(error: TabreleaseError, path: Path) -> TabreleaseError:
    """The refusal with the file it is about named first, where it does not name it ("column 'x' has missing
    values" had left a batch of several files unsure which)."""
    if str(path) in str(error):
        return error
    named = _copy.copy(error)
    named.args = (f"{path}: {error}",)
    return named


def _header_names_hidden(error: TabreleaseError, path: Path, levels, csv_options) -> TabreleaseError:
    """The refusal with the header's names taken out where the header is not known to be one
    (`header_confirmed`: no variable was named and the levels file declares none of its names, or a field of it
    is a declared level or recurs in its column): a file without its header row has its first record for names,
    and a refusal that named a column ("column 'male' has missing values", "variable 'yes' has only one level")
    quoted that record."""
    names = _unconfirmed_names(path, levels, csv_options)
    message = str(error)
    for j, name in sorted(enumerate(names), key=lambda item: -len(item[1])):  # 'ab' before 'a' (quotes bound both)
        message = (message.replace(f"column {name!r}", f"column {j + 1}")
                   .replace(f"variable {name!r}", f"variable {j + 1}").replace(repr(name), f"column {j + 1}'s name"))
    if message == str(error):
        return error
    hidden = _copy.copy(error)
    hidden.args = (f"{message} (the columns are numbered, not named: the first row is not known to be a header, and "
                   "a file without a header row would have a record quoted)",)
    return hidden


def _first_rows(path: Path, csv_options) -> tuple[list[str], list]:
    """(the header's names, the first thousand rows below it) of a CSV or .xlsx file, to tell a header from a
    record; ([], []) for a Parquet file (its names are its schema's, always names) and for one that cannot be
    read."""
    from .aggregation import RecordFile, _csv_header, rows_below_header

    try:
        if path.suffix.lower() == ".parquet":
            return [], []
        if path.suffix.lower() == ".xlsx":
            frame = read_xlsx_frame(path, (csv_options or CsvOptions()).sheet)
            return [str(c) for c in frame.columns], _head(frame)
        record_file = RecordFile(path=path, variables=(), csv=csv_options)
        return _csv_header(record_file)[0], rows_below_header(record_file)
    except Exception:  # noqa: BLE001 - a file that cannot be read has no names in its refusal
        return [], []


def _read_microdata(path: Path, variables, levels, csv_options, engine, scheduler, batch_rows):
    """`read_microdata`'s work, its refusals as they are made."""
    columns = None if variables is None else [str(v) for v in variables]
    if columns is not None and len(set(columns)) != len(columns):
        repeated = sorted({c for c in columns if columns.count(c) > 1})
        raise TabreleaseError(f"duplicate variable names: {', '.join(repeated)}")
    from .aggregation import ENGINES, read_microdata_file

    if engine is None:
        engine = "pandas" if path.suffix.lower() == ".xlsx" else "arrow"
    if engine not in ENGINES:
        raise TabreleaseError(f"unknown counting engine {engine!r}; the engines are {', '.join(ENGINES)}")
    if scheduler is not None and engine not in ("dask", "spark"):
        raise TabreleaseError("--scheduler names a Dask scheduler or a Spark master: it goes with --engine dask or "
                              "spark")
    if engine != "pandas":
        return read_microdata_file(path, columns, levels, csv_options=csv_options, engine=engine,
                                   scheduler=scheduler, **({} if batch_rows is None else {"batch_rows": batch_rows}))
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq

            schema = pq.read_schema(path)
            schema_names = schema.names
            missing = [c for c in (columns or []) if c not in schema_names]
            if missing:
                raise TabreleaseError(f"{path} has no column {missing[0]!r}; "
                                      f"{the_columns(schema_names, schema=True)}")
            from .aggregation import refuse_nested_columns

            refuse_nested_columns(path, schema, columns)
            frame = pq.read_table(path, columns=columns).to_pandas()
        except TabreleaseError:
            raise
        except Exception as exc:  # pyarrow's errors have no common base: any failure to read is one line
            from .aggregation import parquet_failure

            raise parquet_failure(path, exc) from None
    elif path.suffix.lower() == ".xlsx":
        frame = read_xlsx_frame(path, (csv_options or CsvOptions()).sheet, columns)
    else:
        frame = read_csv_frame(path, csv_options, columns)
    if columns is None and path.suffix.lower() == ".parquet":  # a Parquet schema's names are names, never a record
        columns = [str(c) for c in frame.columns]
    frame = missing_as(frame, columns if columns is not None else frame.columns, (csv_options or CsvOptions()).missing)
    return table_from_microdata(frame, columns, levels=levels, name=path.stem)


def missing_as(frame: pd.DataFrame, columns: Sequence, label: str | None) -> pd.DataFrame:
    """The frame with every missing value of `columns` (a null, or a field empty once stripped) read as the level
    `label`, as the streaming engine reads it (`aggregation._labels_of`); the frame itself where `label` is None.

    Parameters
    ----------
    frame : pandas.DataFrame
    columns : sequence
        The variables' columns (never a count column).
    label : str or None
        The level; None leaves missing values to be refused.

    Returns
    -------
    pandas.DataFrame
    """
    if label is None:
        return frame
    import pandas as pd

    out = frame.copy(deep=False)
    for column in columns:
        values = out[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            values = values.astype(object)
        empty = values.isna().to_numpy().copy()
        present = ~empty
        if values.dtype == object or pd.api.types.is_string_dtype(values.dtype):
            empty[present] = values[present].astype(str).str.strip().eq("").to_numpy()
        if empty.any():
            out[column] = values.astype(object).where(~empty, label)
    return out


# --- CSV reading options ---------------------------------------------------------------------------
SEPARATORS = CSV_SEPARATORS


@dataclass(frozen=True)
class CsvOptions:
    """How a file is written: separator (None: detected from the header among , ; tab |), text encoding, the
    decimal and thousands marks of the count column, and the level a missing value stands for (a CSV's empty
    field, a Parquet null; None: refused), in any file."""

    sep: str | None = None
    encoding: str = "utf-8"
    sheet: str | None = None  # of an .xlsx workbook: None is the first
    decimal: str | None = None  # None: a point, or a comma when the thousands mark is a point
    thousands: str | None = None
    missing: str | None = None


def _decode(path: Path, encoding: str) -> str:
    data = path.read_bytes()
    refuse_wide_text(path, data, encoding)
    try:
        return data.decode(python_codec(encoding))
    except LookupError:
        raise TabreleaseError(f"unknown text encoding {encoding!r}") from None
    except UnicodeDecodeError as exc:
        # Never the offending bytes: they could be part of a confidential count or label.
        if data[:4] == b"PK\x03\x04":  # a zip archive: an .xlsx workbook named .csv (latin-1 would not help)
            raise TabreleaseError(f"{path} is a zip archive, as an Excel workbook is, not CSV text: give a workbook "
                                  "its .xlsx name (the sheet read is --sheet), or save it as CSV") from None
        raise not_text(path, encoding, data[: exc.start].count(b"\n") + 1) from None
    except UnicodeError:  # the codec's own refusal ("UTF-16 stream does not start with BOM")
        raise not_text(path, encoding, None) from None


_detect_separator = detect_separator


def read_csv_frame(path: str | Path, options: CsvOptions | None = None,
                   columns: Sequence[str] | None = None, *, as_written: Sequence[str] = ()) -> pd.DataFrame:
    """Every field of a CSV file as text. Trailing blank rows and empty trailing columns (trailing separators,
    as spreadsheets write them) are dropped silently; a row with another number of fields is one line naming it.
    Names and fields behind a protective single quote (as `write_long_csv` writes labels a spreadsheet would take
    for a formula) are read back as the labels they protect, except in the columns named in `as_written` (a count
    column: a count is never a label).

    Parameters
    ----------
    path : str or Path
        The CSV file (a regular file).
    options : CsvOptions, optional
        Separator, encoding and marks (the defaults detect the separator and read UTF-8).
    columns : sequence of str, optional
        The columns to keep, in this order (every column by default).
    as_written : sequence of str, default ()
        Columns whose fields are read as written.

    Returns
    -------
    pandas.DataFrame
        Every field as stripped text, one column per name.

    Raises
    ------
    TabreleaseError
        If the file is missing, empty, not text in its encoding, ragged, has a blank row inside, has a column
        without a name or two with the same name, or lacks a column asked for.
    """
    options = options or CsvOptions()
    path = _regular_file(path)
    text = _decode(path, options.encoding)
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        raise TabreleaseError(f"{path} is not a readable CSV table: it is empty")
    sep = options.sep if options.sep is not None else _detect_separator(first)
    if len(sep) != 1:
        raise TabreleaseError(f"the separator must be one character, not {sep!r}")
    quoted = "'" in text  # no single quote anywhere (nearly every file): nothing to read back, and no cost
    if quoted and columns is not None:
        # A column asked for by its label is found under its protected name.
        try:
            header = [h.strip() for h in next(csv.reader([first], delimiter=sep), [])]
        except csv.Error:
            header = [h.strip() for h in first.split(sep)]
        columns = [csv_field_for_label(c) if csv_field_for_label(c) in header else c for c in columns]
    frame = _fast_frame(path, text, first, sep, columns)
    if frame is None:
        try:
            rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=sep))
        except csv.Error as exc:
            raise TabreleaseError(f"{path} is not a readable CSV table ({exc})") from None
        rows = [[field.strip() for field in row] for row in rows]
        frame = _frame_from_rows(path, rows, f"the separator {sep!r}", columns)
    return _labels_from_fields(frame, as_written) if quoted else frame


def _labels_from_fields(frame: pd.DataFrame, as_written: Sequence[str]) -> pd.DataFrame:
    """The frame with its names, and the fields of every column not in `as_written`, read by csv_label_from_field."""
    import pandas as pd

    names = [csv_label_from_field(str(c)) for c in frame.columns]
    columns = {}
    for j, name in enumerate(names):
        column = frame.iloc[:, j]
        if name not in as_written:
            protected = column.str.startswith("'").to_numpy(dtype=bool)
            if protected.any():
                column = column.copy()
                column[protected] = [csv_label_from_field(v) for v in column[protected]]
        columns[j] = column.reset_index(drop=True)
    out = pd.DataFrame(columns)
    out.columns = names  # set after: two names may now be one, and the table's checks name it
    return out


def _fast_frame(path: Path, text: str, first: str, sep: str, columns: Sequence[str] | None) -> pd.DataFrame | None:
    """The file through pandas' C parser (six times faster on a million rows than the csv module), where that
    gives exactly what the careful reader would: no quotes, a header of distinct non-empty names, no blank or
    short row inside. Otherwise None, and the careful reader runs (and names the row that is wrong)."""
    import pandas as pd

    quoted = '"' in text
    try:
        header = [h.strip() for h in (next(csv.reader([first], delimiter=sep)) if quoted else first.split(sep))]
    except (csv.Error, StopIteration):
        return None
    if "" in header or len(set(header)) < len(header):
        return None
    # Trailing rows of separators and spaces only are dropped as the careful reader drops them, here in the text:
    # in the frame, with only some columns read, a last record empty in those columns looked like one (a review).
    body = _without_trailing_blank_rows(text, sep)
    if "\n\n" in body or "\n\r\n" in body:
        return None  # a blank line inside: the careful reader refuses it by number
    if "\r" in body and body.count("\r") != body.count("\r\n"):
        return None  # a line ended by a carriage return alone (old Mac files): pandas and the csv module differ
    # A row with more or fewer fields: pandas pads a short row silently. Without quotes the separators are counted;
    # with them (R's write.csv quotes every label) the csv module counts each row's fields, keeping none: the
    # careful reader's rows had cost 10 GB for 10^7 rows. pandas' tokenizer reads quotes as the csv module does.
    if not (_every_row_has(body, sep, len(header)) if quoted else
            body.count(sep) == (body.count("\n") + 1) * (len(header) - 1)):
        return None
    try:
        # skip_blank_lines=False: pandas skips a line of spaces too, which in a file of one column is a row with
        # its one field empty (a missing value): kept, it is refused below as the careful reader refuses it.
        frame = pd.read_csv(io.StringIO(body), sep=sep, dtype=str, keep_default_na=False, engine="c",
                            skip_blank_lines=False,
                            usecols=None if columns is None else [c for c in columns if c in header])
    except (pd.errors.ParserError, ValueError, UnicodeError):
        return None
    if frame.isna().to_numpy().any() or not isinstance(frame.index, pd.RangeIndex) or [
            str(c) for c in frame.columns] != (header if columns is None else [c for c in header if c in columns]):
        return None  # a short row (filled with NaN), a first column taken for the index, or names pandas changed
    if quoted or _PADDING.search(body):
        # Padded fields (most files have none), as the careful reader strips them: any space (a no-break space
        # too), and a quoted field's line breaks.
        frame = frame.apply(lambda column: column.str.strip())
    if (frame == "").all(axis=1).to_numpy().any():
        return None  # a row empty in the columns read: the careful reader says which (blank, or missing values)
    if columns is not None:
        missing = [c for c in columns if c not in header]
        if missing:
            raise TabreleaseError(f"{path} has no column {missing[0]!r}; "
                                  f"{the_columns(header, columns, _leading_rows(body, sep))}")
        frame = frame.loc[:, list(columns)]
    return frame.reset_index(drop=True)


_PADDING = re.compile(r"[^\S\r\n]")  # whitespace other than line breaks


def _without_trailing_blank_rows(text: str, sep: str) -> str:
    """The text without its trailing line breaks and trailing lines of separators and spaces only, found from the
    end (a regex over the whole text had cost a fifth of the read)."""
    end = len(text)
    while True:
        while end > 0 and text[end - 1] in "\r\n":
            end -= 1
        start = text.rfind("\n", 0, end)
        if start < 0 or text[start + 1:end].replace(sep, "").strip():
            return text[:end].lstrip("\r\n")
        end = start


def _every_row_has(body: str, sep: str, width: int) -> bool:
    """Whether every row of a CSV text (quotes read as the csv module reads them) has `width` fields."""
    try:
        return all(len(row) == width for row in csv.reader(io.StringIO(body, newline=""), delimiter=sep))
    except csv.Error:
        return False


def _frame_from_rows(path: Path, rows: list[list[str]], hint: str, columns: Sequence[str] | None) -> pd.DataFrame:
    """Rows of text as a frame: trailing blank rows and empty trailing columns dropped, a ragged row named."""
    import pandas as pd

    while rows and not any(rows[-1]):
        rows.pop()  # trailing blank rows (also rows of separators only)
    while rows and not rows[0]:
        rows.pop(0)
    if not rows:
        raise TabreleaseError(f"{path} is not a readable table: it is empty")
    header = rows[0]
    width = len(header)
    while width > 0 and header[width - 1] == "" and all(len(r) < width or r[width - 1] == "" for r in rows[1:]):
        width -= 1  # an empty trailing column: trailing separators on every row
    if width == 0:
        raise TabreleaseError(f"{path} has no column names")
    body = []
    for number, row in enumerate(rows[1:], start=1):  # data rows, the header not counted
        if not any(row):
            raise TabreleaseError(f"{path}: data row {number} is blank (only trailing blank rows are allowed)")
        # Every row has the header's fields, its trailing separators too (a spreadsheet writes them on every row):
        # a row with more, even empty, or fewer is ragged, as the streaming reader finds it.
        if len(row) != len(header):
            raise TabreleaseError(f"{path}: data row {number} has {len(row)} fields where the header has "
                                  f"{len(header)} (is {hint} right, and every quote closed?)")
        body.append(row[:width])
    names = header[:width]
    if "" in names:
        raise TabreleaseError(f"{path}: column {names.index('') + 1} has no name")
    repeated = same_name_columns(names)
    if repeated:
        raise TabreleaseError(f"{path}: {repeated}; every column needs its own name")
    frame = pd.DataFrame(body, columns=names, dtype=str)
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise TabreleaseError(f"{path} has no column {missing[0]!r}; {the_columns(names, columns, body)}")
        frame = frame.loc[:, list(columns)]
    return frame


def _sheet_names(path: Path) -> list[str] | str:
    """The workbook's sheet names (its structure, not its data), or a word where they cannot be read."""
    try:
        import openpyxl

        book = openpyxl.load_workbook(path, read_only=True)
        try:
            return list(book.sheetnames)
        finally:
            book.close()
    except Exception:  # noqa: BLE001 - the refusal stands whatever stops the names being read
        return "unreadable"


def read_xlsx_frame(path: str | Path, sheet: str | None = None, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Every cell of one sheet of an .xlsx workbook as text (the first sheet unless named), with blank trailing rows
    and columns dropped as in a CSV file. Needs openpyxl (the `excel` extra).

    Parameters
    ----------
    path : str or Path
        The .xlsx workbook.
    sheet : str, optional
        The sheet's name (the first sheet by default).
    columns : sequence of str, optional
        The columns to keep, in this order (every column by default).

    Returns
    -------
    pandas.DataFrame
        Every field as stripped text (a whole float written as an integer), the first row as the names.

    Raises
    ------
    TabreleaseError
        If openpyxl is not installed, the file cannot be read, the sheet does not exist, or the rows do not make a
        table.
    """
    from .._optional import module_available

    path = _regular_file(path)
    if not module_available("openpyxl"):
        raise TabreleaseError("reading .xlsx files needs openpyxl: pip install tabrelease[excel]")
    import pandas as pd

    try:
        # keep_default_na=False, as every CSV read: a cell holding the text "None" or "NA" is a label (a new user's
        # trial: Arthritis's level "None" was refused as missing in a workbook, read in its CSV); an empty cell is
        # still missing.
        raw = pd.read_excel(path, sheet_name=0 if sheet is None else sheet, header=None, dtype=object,
                            engine="openpyxl", keep_default_na=False, na_values=[])
    except ValueError as exc:
        if sheet is not None and "not found" in str(exc):
            raise TabreleaseError(f"{path} has no sheet {sheet!r}; its sheets are {_sheet_names(path)}") from None
        raise TabreleaseError(f"cannot read {path} as an .xlsx workbook") from None
    except Exception as exc:  # zip and XML errors have no common base: any failure to read is one line
        raise TabreleaseError(f"cannot read {path} as an .xlsx workbook ({type(exc).__name__})") from None

    def text(value) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))  # a count typed as 12 is stored as 12.0 by some writers
        return str(value).strip()

    rows = [[text(v) for v in row] for row in raw.itertuples(index=False, name=None)]
    return _frame_from_rows(path, rows, "the header", columns)


def _normalise_counts(frame: pd.DataFrame, count_column: str, options: CsvOptions) -> pd.DataFrame:
    """The count column in plain notation: thousands marks removed, the decimal mark made a point (counts must
    still be whole numbers: _parse_counts checks)."""
    decimal = options.decimal or ("," if options.thousands == "." else ".")
    thousands = options.thousands or ""
    if count_column not in frame.columns or (decimal == "." and not thousands):
        return frame
    if thousands == decimal:
        raise TabreleaseError("the decimal and thousands separators must differ")
    # One string per cell of a long table (not per person): plain Python is quick enough and dtype-agnostic.
    column = [str(text).replace(thousands, "").replace(decimal, ".") if thousands else str(text).replace(decimal, ".")
              for text in frame[count_column].tolist()]
    out = frame.copy()
    out[count_column] = column
    return out


def _regular_file(path) -> Path:
    path = Path(path)
    if not path.exists():
        raise TabreleaseError(f"no such file: {path}")
    if path.is_dir():
        raise TabreleaseError(f"{path} is a directory, not a data file")
    if not path.is_file():  # a FIFO, a device (/dev/zero), a socket: reading could block or never end
        raise TabreleaseError(f"{path} is not a regular file")
    if path.suffix.lower() in COMPRESSED_SUFFIXES:
        # A new user's trial: a .csv.gz was refused as "not valid utf-8 text, try --encoding latin-1".
        raise TabreleaseError(f"{path} is compressed ({path.suffix}); tables and microdata are read uncompressed: "
                              "decompress it first (or save it as Parquet, which compresses inside the file)")
    return path


# Files no reader here opens: compressed archives and streams.
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip", ".7z", ".lz4", ".tgz")


def read_table_csv(path: str | Path, count_column: str = "count", *, complete: bool = True,
                   levels: Mapping[str, Sequence[str]] | None = None,
                   csv_options: CsvOptions | None = None) -> ContingencyTable:
    """A long-format CSV file; every field is read as text so that level labels such as '01' survive.

    Parameters
    ----------
    path : str or Path
        The CSV file.
    count_column : str, default "count"
        Name of the count column.
    complete : bool, default True
        Whether every cell must be listed (False takes unlisted cells as zero).
    levels : mapping of str to sequence of str, optional
        Declared levels of some or all variables, in order.
    csv_options : CsvOptions, optional
        Separator, encoding and the count column's marks.

    Returns
    -------
    ContingencyTable
        The table, named after the file's stem.

    Raises
    ------
    TabreleaseError
        If the file cannot be read or does not make a table (see `table_from_frame`).
    """
    options = csv_options or CsvOptions()
    path = Path(path)
    if path.is_dir():
        raise TabreleaseError(f"{path} is a directory, not a CSV file")
    frame = _normalise_counts(read_csv_frame(path, options, as_written=(count_column,)), count_column, options)
    frame = missing_as(frame, [c for c in frame.columns if c != count_column], options.missing)
    return table_from_frame(frame, count_column, complete=complete, name=path.stem, levels=levels)


def load_table(source: str | Path | ContingencyTable, count_column: str = "count", *, complete: bool = True,
               levels: Mapping[str, Sequence[str]] | None = None,
               csv_options: CsvOptions | None = None) -> ContingencyTable:
    """A built-in table by name, a long-format CSV by path, or a table passed through.

    Parameters
    ----------
    source : str or Path or ContingencyTable
        A built-in table's name, a path to a long table (.csv, .txt, .tsv, .parquet or .xlsx), or a table.
    count_column : str, default "count"
        Name of the count column.
    complete : bool, default True
        Whether every cell must be listed (False takes unlisted cells as zero).
    levels : mapping of str to sequence of str, optional
        Declared levels of some or all variables, in order.
    csv_options : CsvOptions, optional
        Separator, encoding, marks and (of an .xlsx file) the sheet.

    Returns
    -------
    ContingencyTable
        The table.

    Raises
    ------
    TabreleaseError
        If `source` is neither a built-in table nor a readable file that makes a table.
    """
    if isinstance(source, ContingencyTable):
        return source
    if isinstance(source, str) and source in BUILTIN_TABLES:
        return builtin_table(source)
    path = Path(source)
    if path.suffix.lower() not in {".csv", ".txt", ".tsv", ".parquet", ".xlsx"} and not path.exists():
        raise TabreleaseError(
            f"{str(source)!r} is neither a built-in table ({', '.join(BUILTIN_TABLES)}) nor an existing CSV file"
        )
    if path.suffix.lower() == ".parquet":
        return read_table_parquet(path, count_column, complete=complete, levels=levels,
                                  missing=(csv_options or CsvOptions()).missing)
    if path.suffix.lower() == ".xlsx":
        options = csv_options or CsvOptions()
        frame = _normalise_counts(read_xlsx_frame(path, options.sheet), count_column, options)
        frame = missing_as(frame, [c for c in frame.columns if c != count_column], options.missing)
        return table_from_frame(frame, count_column, complete=complete, name=path.stem, levels=levels)
    return read_table_csv(path, count_column, complete=complete, levels=levels, csv_options=csv_options)


def read_table_parquet(path: str | Path, count_column: str = "count", *, complete: bool = True,
                       levels: Mapping[str, Sequence[str]] | None = None,
                       missing: str | None = None) -> ContingencyTable:
    """A long-format Parquet file (one column per variable and a count column); labels read as text.

    Parameters
    ----------
    path : str or Path
        The Parquet file.
    count_column : str, default "count"
        Name of the count column.
    complete : bool, default True
        Whether every cell must be listed (False takes unlisted cells as zero).
    levels : mapping of str to sequence of str, optional
        Declared levels of some or all variables, in order.
    missing : str, optional
        The level a missing value is read as (None: refused).

    Returns
    -------
    ContingencyTable
        The table, named after the file's stem.

    Raises
    ------
    TabreleaseError
        If the file cannot be read as Parquet, has no count column, or does not make a table.
    """
    path = _regular_file(path)
    try:
        import pyarrow.parquet as pq

        frame = pq.read_table(path).to_pandas()
    except Exception as exc:  # pyarrow's errors have no common base: any failure to read is one line
        from .aggregation import parquet_failure

        raise parquet_failure(path, exc) from None
    if count_column not in frame.columns:
        raise TabreleaseError(f"no count column {count_column!r} in {path}; "
                              f"{the_columns(frame.columns, schema=True)} "
                              "(one row per person? add --microdata)")
    frame = missing_as(frame, [c for c in frame.columns if c != count_column], missing)
    return table_from_frame(frame, count_column, complete=complete, name=path.stem, levels=levels)


def load_input(source, *, microdata: bool = False, variables: Sequence[str] | None = None, levels_file=None,
               metadata_file=None, count_column: str = "count", sparse: bool = False,
               csv_options: CsvOptions | None = None, engine: str | None = None, scheduler: str | None = None):
    """A table from what a user names: a built-in table, a long table with a count column (CSV, Parquet, .xlsx),
    or a file of one row per person (`microdata`, its `variables`), with levels declared in a levels file or a
    metadata file (which declares labels too). What the command line and batch specs both read through.

    Parameters
    ----------
    source : str or Path or ContingencyTable
        A built-in table's name, a file, or (not microdata) a table.
    microdata : bool, default False
        Whether the file holds one row per person.
    variables : sequence of str, optional
        The microdata columns to count (only with `microdata`; default: those the metadata file declares, else all).
    levels_file : str or Path, optional
        A levels JSON file.
    metadata_file : str or Path, optional
        A metadata JSON file (declares levels and labels; not with `levels_file`).
    count_column : str, default "count"
        Name of the count column of a long table.
    sparse : bool, default False
        Whether unlisted cells of a long table are zero (not with `microdata`).
    csv_options : CsvOptions, optional
        How a CSV file is written (and which .xlsx sheet to read).
    engine : {"arrow", "pandas", "dask", "spark"}, optional
        With `microdata`: who reads and counts the file (`read_microdata`).
    scheduler : str, optional
        With engine "dask": the scheduler's address.

    Returns
    -------
    ContingencyTable or MicrodataTable or FileTable
        The table, carrying the declared labels when a metadata file is given.

    Raises
    ------
    TabreleaseError
        If the options conflict (levels and metadata files, `sparse` or no `microdata` with `variables`), or the
        input cannot be read as a table.
    """
    levels = read_levels_file(levels_file)
    declared = None
    if metadata_file:
        if levels is not None:
            raise TabreleaseError("give either --levels or --metadata (which declares the levels too), not both")
        declared = read_metadata(metadata_file)
        levels = dict(declared.levels)
    if microdata:
        if sparse:
            raise TabreleaseError("--sparse is for long tables with a count column; microdata have no cells to list")
        variables = variables or (declared.variables if declared else None)
        _refuse_a_count_column(source, variables, count_column, csv_options)
        table = read_microdata(source, variables, levels=levels, csv_options=csv_options, engine=engine,
                               scheduler=scheduler)
        if variables is None and count_column in getattr(table, "variables", ()):  # a workbook, read whole
            raise _count_column_in_microdata(source, count_column, counted=True)
    else:
        if engine is not None or scheduler is not None:
            raise TabreleaseError("--engine and --scheduler choose how microdata are counted: add --microdata")
        if variables:
            raise TabreleaseError("--variables chooses the columns of a microdata file: add --microdata")
        table = load_table(source, count_column, complete=not sparse, levels=levels, csv_options=csv_options)
    table = table if declared is None else with_declared_metadata(table, declared)
    return _with_source_file(table, source, None if csv_options is None else csv_options.sheet)


def _count_column_in_microdata(source, count_column: str, *, counted: bool) -> TabreleaseError:
    fate = "counted as a variable" if counted else "ignored"
    return TabreleaseError(f"{Path(source).name} has a column {count_column!r}: with --microdata each row is one "
                           f"person and {count_column!r} would be {fate}. A long table (one row per cell, with its "
                           "count)? Drop --microdata. Microdata with a variable of that name? Rename the column")


def _refuse_a_count_column(source, variables, count_column: str, csv_options) -> None:
    """Refuse microdata whose CSV or Parquet file has a column named as a long table's count column, unless the
    variables named include it: a long table read with --microdata is released as row counts (one per cell), and
    no later check can tell (a new user's release of vcd's Suicide table gave n = 90 for 53,182 people). Only the
    header is read; a workbook is checked once it is read (`load_input`), where every column is counted."""
    from .aggregation import RecordFile, _file_columns

    if not isinstance(source, (str, os.PathLike)) or (isinstance(source, str) and source in BUILTIN_TABLES):
        return
    path = _regular_file(source)
    if path.suffix.lower() == ".xlsx":  # checked once read (`load_input`), where every column is counted
        return
    if variables is not None and count_column in [str(v) for v in variables]:
        return
    if count_column in _file_columns(RecordFile(path=path, variables=(), csv=csv_options)):
        raise _count_column_in_microdata(source, count_column, counted=variables is None)


def _with_source_file(table, source, sheet: str | None):
    """The table, its metadata naming the file it was read from (`SOURCE_FILE`: its real path, the sheet read of a
    workbook, and the file's size and modification time when read, which the ledger's print checks) where `source`
    is a file read (not a built-in table's name, which is read before a file of that name, nor a table)."""
    from dataclasses import replace

    if not isinstance(source, (str, os.PathLike)) or (isinstance(source, str) and source in BUILTIN_TABLES):
        return table
    try:
        info = os.stat(source)
    except OSError:
        return table
    if not stat.S_ISREG(info.st_mode):
        return table
    read = {"path": os.path.realpath(source), "sheet": None if sheet is None else str(sheet),
            "size": info.st_size, "mtime_ns": info.st_mtime_ns}
    return replace(table, metadata={**dict(table.metadata or {}), SOURCE_FILE: read})
