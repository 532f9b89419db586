"""Counting a file of records (one row per person) into the margins a release needs, as a step of its own.

An *engine* reads the file and counts: ``arrow`` (the default) streams Parquet and CSV a batch of rows at a time,
so memory stays flat in the number of rows; ``dask`` counts the same batches on a Dask cluster (``--scheduler``,
or a local one of two workers); ``spark`` on Spark executors (``--scheduler`` is the master URL, default
``local[2]``); ``pandas`` reads the whole file into memory (the reader of earlier versions, and the only one for
.xlsx). Every engine counts with the same function (`_count_codes`), so they return identical margins; the tests
check each against an independent count.

A table whose cells fit in memory is counted cell by cell into a `ContingencyTable`. A larger one becomes a
`FileTable`: it holds the file's name and the margins counted so far, and counts more in one pass over the file when
asked (`FileTable.count_margins`, which the release path calls with every margin its plan measures, before any
charge). What a ledger needs to recognise the same data in another form, a multiset fingerprint of the records
(`record_lanes`), is counted in the same pass.

Levels must be declared for a release (the data never choose the schema); without declared levels a first pass
reads each variable's values (simulation only: the release refuses such a table).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TabreleaseError
from ._text import (declared_levels, detect_separator, level_order, missing_values, nfc, not_text, python_codec,
                    refuse_wide_text, same_name_columns, the_columns, undeclared_metadata, undeclared_values)
from .model import (MAX_MARGIN_CELLS, MAX_TABLE_CELLS, ContingencyTable, TableView, check_cells, check_one_encoding,
                    too_few_levels)

ENGINES = ("arrow", "pandas", "dask", "spark")
DEFAULT_ENGINE = "arrow"
BATCH_ROWS = 2**18  # rows per batch: a batch's codes and keys take tens of MB whatever the file's size
_DENSE_PER_BATCH = 4  # a margin of more than this many cells per batch row is added by its distinct keys instead


def cells_counted_whole() -> int:
    """The most cells microdata are counted cell by cell: no more than a margin may have (the table is counted as
    one margin); a table between that and MAX_TABLE_CELLS had been refused as a margin no one asked for (a new user's
    trial). A larger table is a FileTable, its margins counted from the file. (Read at each call: tests lower the
    limits.)

    Returns
    -------
    int
        The smaller of `MAX_TABLE_CELLS` and `MAX_MARGIN_CELLS`.
    """
    return min(MAX_TABLE_CELLS, MAX_MARGIN_CELLS)


# --- the multiset fingerprint ------------------------------------------------------------------------------
LANES = 2  # two independent 64-bit sums: 128 bits
# The canonical sums (`_label_values`) have one lane: a print that recognises the same data needs no resistance to a
# forged match (a false match refuses a release as an alias, which no one gains by), and at 2^-64 two honest tables
# never match by chance; a second lane would have cost a fifth again of counting a file of records.
CANONICAL_LANES = 1


@lru_cache(maxsize=64)
def _lane_values(shape: tuple[int, ...]) -> tuple[tuple[np.ndarray, ...], ...]:
    """Per lane and variable, a fixed pseudo-random 64-bit value per level (SHA-256 in counter mode of the lane,
    the axis and the level's position): public and data-independent, so any engine in any process computes the
    same sums. The ledger keys what it records (an HMAC of the sums), not these."""
    lanes = []
    for lane in range(LANES):
        per_axis = []
        for axis, levels in enumerate(shape):
            prefix = f"tabrelease multiset v1 lane {lane} axis {axis}".encode()
            raw = b"".join(hashlib.sha256(prefix + block.to_bytes(8, "little")).digest()
                           for block in range((8 * levels + 31) // 32))
            values = np.frombuffer(raw[: 8 * levels], dtype="<u8").astype(np.uint64)
            values.flags.writeable = False
            per_axis.append(values)
        lanes.append(tuple(per_axis))
    return tuple(lanes)


@lru_cache(maxsize=64)
def _label_values(variables: tuple[str, ...], levels: tuple[tuple[str, ...], ...]
                  ) -> tuple[tuple[np.ndarray, ...], ...]:
    """Per lane and variable, a fixed pseudo-random 64-bit value per level from the variable's name and the level's
    label, both NFC-normalised (SHA-256 of the lane, the name and the label), not from their positions: the multiset
    sums built on them (`canonical_lanes`) are the same whatever order the variables come in, whatever levels are
    declared beside those anyone is in (a reviewer padded a variable with 9,000 unused levels to give the same
    records a second budget), and whether labels are written composed or decomposed (macOS writes NFD). Public and
    data-independent, as `_lane_values`."""
    lanes = []
    for lane in range(CANONICAL_LANES):
        per_axis = []
        for name, labels in zip(variables, levels):
            prefix = f"tabrelease canonical multiset v1 lane {lane}\0{nfc(name)}\0".encode()
            raw = b"".join(hashlib.sha256(prefix + nfc(label).encode()).digest()[:8] for label in labels)
            values = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
            values.flags.writeable = False
            per_axis.append(values)
        lanes.append(tuple(per_axis))
    return tuple(lanes)


def _fmix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (a bijection that mixes every bit into every other), in place."""
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


def record_lanes(codes: np.ndarray, weights: np.ndarray | None, shape: Sequence[int], *,
                 labelled: tuple | None = None) -> tuple[int, ...]:
    """The multiset sums of a block of records: per lane, the sum over records of weight x hash(record), modulo 2^64.
    Sums add, so a table's sums are the same whether it comes as cells (the non-zero cells with their counts), as
    one row per person, or as distinct records with counts, in any order and any split into batches.

    Parameters
    ----------
    codes : numpy.ndarray
        Records by variables, level positions.
    weights : numpy.ndarray or None
        People per record (None: one each).
    shape : sequence of int
        Levels per variable.
    labelled : tuple of (variables, levels), optional
        Hash each record by its variables' names and its labels (`_label_values`: the canonical sums) instead of
        by its level positions.

    Returns
    -------
    tuple of int
        One sum per lane, each in [0, 2^64).
    """
    values = (_lane_values(tuple(int(k) for k in shape)) if labelled is None
              else _label_values(*_as_key(*labelled)))
    return _lane_sums(codes, weights, values)


def _lane_sums(codes: np.ndarray, weights: np.ndarray | None, lanes) -> tuple[int, ...]:
    """Per lane (a value table per axis), the sum over records of weight x fmix64(the sum of the record's values),
    modulo 2^64. Each column is read once, contiguous, for every lane, and gathered into one buffer without bounds
    checks (the codes were checked against the levels when read, `batch_codes`): a fresh array per gather had cost
    page faults, a third of the time."""
    if not codes.shape[0]:
        return (0,) * len(lanes)
    columns = np.ascontiguousarray(codes.T)
    sums = [np.zeros(codes.shape[0], dtype=np.uint64) for _ in lanes]
    gathered = np.empty(codes.shape[0], dtype=np.uint64)
    for axis, column in enumerate(columns):
        for h, per_axis in zip(sums, lanes):
            np.take(per_axis[axis], column, out=gathered, mode="clip")
            h += gathered
    multiplier = None if weights is None else np.asarray(weights).astype(np.uint64)
    out = []
    for h in sums:
        _fmix64(h)
        if multiplier is not None:
            h *= multiplier
        out.append(int(np.add.reduce(h, dtype=np.uint64)))
    return tuple(out)


def both_lanes(codes: np.ndarray, variables: Sequence[str], levels: Sequence[Sequence[str]]
               ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`record_lanes` of a block of records (one each) by positions and by names and labels, in one pass over its
    columns (two calls of `record_lanes` read each column twice: the canonical sums would have added half to
    counting 10^8 records).

    Parameters
    ----------
    codes : numpy.ndarray
        Records by variables, level positions.
    variables : sequence of str
    levels : sequence of sequence of str

    Returns
    -------
    tuple of (tuple of int, tuple of int)
        The positional sums and the canonical sums.
    """
    shape = tuple(len(lv) for lv in levels)
    out = _lane_sums(codes, None, _lane_values(shape) + _label_values(*_as_key(variables, levels)))
    return out[:LANES], out[LANES:]


def _as_key(variables, levels) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    return tuple(map(str, variables)), tuple(tuple(map(str, lv)) for lv in levels)


def add_lanes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """Two blocks' sums together (modulo 2^64).

    Parameters
    ----------
    a, b : sequence of int
        Sums per lane.

    Returns
    -------
    tuple of int
    """
    return tuple((x + y) % 2**64 for x, y in zip(a, b))


def table_lanes(table) -> tuple[int, ...]:
    """The multiset sums of a whole table, held as cells, as records, or as its file (counted when it was read).

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable

    Returns
    -------
    tuple of int
    """
    return _table_lanes(table, canonical=False)


def table_canonical_lanes(table) -> tuple[int, ...]:
    """The canonical multiset sums of a whole table (`record_lanes` with ``labelled``: each record hashed by its
    variables' names and its labels), held as cells, as records, or as its file (counted when it was read).

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable or FileTable

    Returns
    -------
    tuple of int
    """
    return _table_lanes(table, canonical=True)


def _table_lanes(table, canonical: bool) -> tuple[int, ...]:
    if isinstance(table, FileTable):
        return table.canonical_lanes if canonical else table.lanes
    labelled = (table.variables, table.levels) if canonical else None
    empty = (0,) * (CANONICAL_LANES if canonical else LANES)
    if not getattr(table, "held_as_cells", True):  # records in memory, with or without weights
        total = empty
        for start in range(0, table.codes.shape[0], BATCH_ROWS):
            block = slice(start, start + BATCH_ROWS)
            weights = None if table.weights is None else table.weights[block]
            total = add_lanes(total, record_lanes(table.codes[block], weights, table.shape, labelled=labelled))
        return total
    flat = np.asarray(table.counts).reshape(-1)
    total = empty
    for start in range(0, flat.size, BATCH_ROWS * 16):
        block = flat[start:start + BATCH_ROWS * 16]
        where = np.flatnonzero(block)
        codes = np.column_stack(np.unravel_index(where + start, table.shape)) if where.size else np.zeros(
            (0, table.k), np.int64)
        total = add_lanes(total, record_lanes(codes, block[where], table.shape, labelled=labelled))
    return total


# --- reading a file in batches ------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class RecordFile:
    """A file of records and how to read it: what a `FileTable` keeps instead of its records.

    Parameters
    ----------
    path : Path
        A Parquet or CSV file.
    variables : tuple of str
        The columns counted, in the table's order.
    csv : CsvOptions or None
        How a CSV file is written.
    batch_rows : int
        Rows read at a time.
    """

    path: Path
    variables: tuple[str, ...]
    csv: Any = None
    batch_rows: int = BATCH_ROWS

    @property
    def is_parquet(self) -> bool:
        return self.path.suffix.lower() == ".parquet"

    @property
    def missing(self) -> str | None:
        """The level a missing value is read as (`CsvOptions.missing`), or None: refused."""
        return getattr(self.csv, "missing", None)


def _file_columns(record_file: RecordFile) -> list[str]:
    """The columns the file has (its header), read without reading its rows."""
    path = record_file.path
    try:
        if record_file.is_parquet:
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        return [name for name in _csv_header(record_file)[0] if name]
    except TabreleaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors have no common base
        raise _read_failure(record_file, exc) from None


def _reason(exc: Exception) -> str:
    """A one-line reason that names the kind of failure, never a value from the file (Arrow's messages quote the
    row they stopped at)."""
    if isinstance(exc, MemoryError) or "Memory" in type(exc).__name__:
        return "out of memory while reading a batch of its rows"
    if _is_ragged(exc):
        return "a row has another number of fields than the header, or a quote is not closed"
    return type(exc).__name__


def _is_ragged(exc: Exception) -> bool:
    return "Expected" in str(exc) and ("columns" in str(exc) or "fields" in str(exc))


def _read_failure(record_file: RecordFile, exc: Exception) -> TabreleaseError:
    """The one-line refusal of a file the streaming reader stopped in. A row with another number of fields is
    named by its line, as the in-memory reader names it: Arrow's streaming reader does not know the row it stopped
    at, so the file is read again here, with Python's csv module, to the first such row (on this failure only)."""
    path, text = record_file.path, str(exc)
    if record_file.is_parquet:
        return parquet_failure(path, exc)
    if "invalid UTF8" in text or isinstance(exc, UnicodeError):  # the in-memory reader's words, with the line
        encoding = getattr(record_file.csv, "encoding", "utf-8")
        return not_text(path, encoding, _first_undecodable_line(path, encoding))
    if "Could not skip initial" in text:  # a header and no line after it
        return TabreleaseError(f"{path}: the microdata have no rows")
    line = _ragged_line(record_file) if _is_ragged(exc) else None
    if line is None:
        return TabreleaseError(f"cannot read {path} ({_reason(exc)})")
    number, fields, width, sep = line
    return TabreleaseError(f"{record_file.path}: line {number:,} has {fields} fields where the header has {width} "
                           f"(is the separator {sep!r} right, and every quote closed?)")


def parquet_failure(path: Path, exc: Exception) -> TabreleaseError:
    """The one-line refusal of a Parquet file pyarrow cannot read: its kind of failure, never its message (which
    may quote a value); a file without Parquet's closing mark is said to be one.

    Parameters
    ----------
    path : Path
    exc : Exception
        pyarrow's error.

    Returns
    -------
    TabreleaseError
    """
    if "magic bytes not found" in str(exc):
        return TabreleaseError(f"{path} is not a readable Parquet file: it lacks Parquet's closing mark (a copy cut "
                               "short, or a file of another format named .parquet)")
    return TabreleaseError(f"cannot read {path} as Parquet ({_reason(exc)})")


def _first_undecodable_line(path: Path, encoding: str) -> int | None:
    """The line holding the first bytes that are not text in `encoding`, read a block at a time (on this failure
    only); None where the whole file decodes. The bytes themselves are never shown: they may be a record's."""
    import codecs

    try:
        decoder = codecs.getincrementaldecoder(python_codec(encoding))()
    except LookupError:
        return None
    lines = 1
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                return lines + block[: max(exc.start, 0)].count(b"\n")
            lines += block.count(b"\n")
    return None


def _ragged_line(record_file: RecordFile) -> tuple[int, int, int, str] | None:
    """(its line number, its fields, the header's, the separator) of the first row after the header whose number
    of fields is not the header's, blank lines skipped as Arrow skips them; None where Python's csv module finds
    none (Arrow and it may read a stray quote differently). The row's text is not kept: it is confidential."""
    import csv

    names, sep, skip = _csv_header(record_file)
    width = len(names)
    try:
        with open(record_file.path, encoding=_python_codec(record_file), errors="replace", newline="") as handle:
            rows = csv.reader(handle, delimiter=sep)
            for _ in range(skip):
                next(rows, None)
            for row in rows:
                if row and len(row) != width:
                    return rows.line_num, len(row), width, sep
    except (OSError, csv.Error, UnicodeError):
        return None
    return None


def rows_below_header(record_file: RecordFile, count: int = 1000) -> list[list[str]]:
    """The first rows of data of a CSV file, to tell its header from a record (`the_columns`); read only for
    that, and never quoted.

    Parameters
    ----------
    record_file : RecordFile
    count : int

    Returns
    -------
    list of list of str
    """
    import csv
    import itertools

    _, sep, skip = _csv_header(record_file)
    try:
        with open(record_file.path, encoding=_python_codec(record_file), errors="replace", newline="") as handle:
            rows = (row for row in itertools.islice(csv.reader(handle, delimiter=sep), skip, None) if row)
            return list(itertools.islice(rows, count))
    except (OSError, csv.Error, UnicodeError):
        return []


def _python_codec(record_file: RecordFile) -> str:
    return python_codec(getattr(record_file.csv, "encoding", "utf-8"))


def _csv_encoding(record_file: RecordFile) -> str:
    encoding = getattr(record_file.csv, "encoding", "utf-8")
    return "utf8" if encoding.lower().replace("_", "-") in {"utf-8", "utf8", "utf-8-sig"} else encoding


def _csv_header(record_file: RecordFile) -> tuple[list[str], str, int]:
    """(the header's names, stripped and read back from a protective quote, "" for an unnamed column such as a
    trailing separator's; the separator; the lines before the first row of data): the header is read here, as the
    in-memory reader reads it, and Arrow is given the names."""
    import csv

    from .._files import csv_label_from_field

    encoding = _csv_encoding(record_file)
    with open(record_file.path, "rb") as handle:
        head = handle.read(1 << 16)
    if head[:4] == b"PK\x03\x04":  # a zip archive: a workbook named .csv had been "a row has another number of fields"
        raise TabreleaseError(f"{record_file.path} is a zip archive, as an Excel workbook is, not CSV text: give a "
                              "workbook its .xlsx name (read with --engine pandas), or save it as CSV")
    refuse_wide_text(record_file.path, head, getattr(record_file.csv, "encoding", "utf-8"))
    import codecs

    try:
        # Strictly: a header read with errors="replace" had published a variable 's\ufffdx' (a review's trial).
        # Incremental, so that a character cut by the end of the block is not taken for bad text.
        text = codecs.getincrementaldecoder(_python_codec(record_file))().decode(head)
    except LookupError:
        raise TabreleaseError(f"unknown text encoding {encoding!r}") from None
    except UnicodeError as exc:  # a decode error, or the codec's own ("UTF-16 stream does not start with BOM")
        line = head[: exc.start].count(b"\n") + 1 if isinstance(exc, UnicodeDecodeError) else None
        raise not_text(record_file.path, getattr(record_file.csv, "encoding", "utf-8"), line) from None
    # Lines as Arrow counts them (\n, \r\n, \r), not as str.splitlines (which also splits at form feeds and \u2028):
    # the rows skipped before the data must be the header's.
    lines = re.split(r"\r\n|\r|\n", text)
    index = next((i for i, line in enumerate(lines) if line.strip()), None)
    if index is None:
        raise TabreleaseError(f"{record_file.path} is not a readable CSV table: it is empty")
    chosen = getattr(record_file.csv, "sep", None)
    sep = chosen if chosen is not None else detect_separator(lines[index])
    fields = next(csv.reader([lines[index]], delimiter=sep), [])
    names = [csv_label_from_field(f.strip()) for f in fields]
    repeated = same_name_columns([n if n else f"\x00unnamed {j}" for j, n in enumerate(names)])
    if repeated:
        raise TabreleaseError(f"{record_file.path}: {repeated}; every column needs its own name")
    return names, sep, index + 1


def _csv_reader(record_file: RecordFile, columns: Sequence[str] | None):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names, sep, skip = _csv_header(record_file)
    arrow_names = [n if n else f"\x00unnamed {i}" for i, n in enumerate(names)]
    # With a missing level a row of separators only (a spreadsheet's trailing rows) would be a person of missing
    # values; the in-memory reader drops such trailing rows and refuses one inside. Telling it needs every field.
    every_field = record_file.missing is not None and len(names) > 1
    read = None if columns is None or every_field else list(columns)
    convert = pacsv.ConvertOptions(
        include_columns=read,
        column_types=None if columns is None else {c: pa.string() for c in (read or arrow_names)},
        strings_can_be_null=False, quoted_strings_can_be_null=False)
    read_options = pacsv.ReadOptions(encoding=_csv_encoding(record_file), block_size=1 << 22,
                                     column_names=arrow_names, skip_rows=skip)
    # Arrow skips blank lines. In a file of one column a blank line is a row with that one field empty (a missing
    # value, which the in-memory reader refuses), not nothing: there Arrow keeps them, for _without_trailing_blanks.
    one_column = len(names) == 1
    parse = pacsv.ParseOptions(delimiter=sep, ignore_empty_lines=not one_column)
    reader = pacsv.open_csv(record_file.path, read_options=read_options, parse_options=parse,
                            convert_options=convert)
    if not (one_column or every_field):
        return reader
    kept = _without_trailing_blanks(reader, record_file.path)
    return kept if read is not None or columns is None else (batch.select(list(columns)) for batch in kept)


def _without_trailing_blanks(batches, path: Path):
    """The batches of a CSV file (every column read) with its trailing blank rows (every field empty) dropped, as
    the in-memory reader drops them; a blank row before the last value is refused, named by its data row as that
    reader names it."""
    import pyarrow.compute as pc

    held, rows = 0, 0  # blank rows at the end of what has been read; rows read
    for batch in batches:
        blank = np.logical_and.reduce([
            pc.equal(pc.utf8_trim_whitespace(column.cast("string")), "").to_numpy(zero_copy_only=False)
            for column in batch.columns])
        filled = np.flatnonzero(~blank)
        if filled.size and (held or blank[: filled[-1]].any()):
            first = rows - held if held else rows + int(np.flatnonzero(blank[: filled[-1]])[0])
            raise TabreleaseError(f"{path}: data row {first + 1:,} is blank (only trailing blank rows are allowed)")
        if filled.size:
            yield batch.slice(0, int(filled[-1]) + 1)
            held = batch.num_rows - int(filled[-1]) - 1
        else:
            held += batch.num_rows
        rows += batch.num_rows


def _arrow_batches(record_file: RecordFile):
    """The file's batches (pyarrow RecordBatches of the counted columns), streamed."""
    path, columns = record_file.path, list(record_file.variables)
    if record_file.is_parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pq.read_schema(path)
        strings = [c for c in columns if pa.types.is_string(schema.field(c).type)
                   or pa.types.is_large_string(schema.field(c).type)]
        parquet = pq.ParquetFile(path, read_dictionary=strings or None)
        yield from parquet.iter_batches(batch_size=record_file.batch_rows, columns=columns, use_threads=True)
    else:
        yield from _csv_reader(record_file, columns)


def _labels_of(dictionary, variable: str, protected: bool, missing: str | None = None) -> list[str]:
    """A column's distinct values as the labels the in-memory reader gives them (stripped text); a missing one
    (None, or empty) as `missing` where it is given, else refused."""
    from .._files import csv_label_from_field

    labels = []
    for value in dictionary.to_pylist():
        label = "" if value is None else str(value).strip()
        if protected and label:  # as the in-memory reader: the field stripped, read back from its quote, stripped
            label = csv_label_from_field(label).strip()
        if label == "":
            if missing is None:
                raise missing_values(variable)
            label = missing
        labels.append(label)
    return labels


def _stored_as_floats(batch, variable: str) -> bool:
    """Whether a batch's column is of a floating-point type (an Arrow batch's, or a pandas partition's)."""
    import pyarrow as pa

    if hasattr(batch, "num_rows"):
        kind = batch.schema.field(variable).type
        return pa.types.is_floating(kind.value_type if pa.types.is_dictionary(kind) else kind)
    import pandas as pd

    return pd.api.types.is_float_dtype(batch[variable].dtype)


def _encoded(column, variable: str, missing: str | None = None):
    """(indices into the dictionary, the dictionary) of one column of a batch; its nulls refused, or, where a
    `missing` level is given, a null entry of the dictionary (`_labels_of` reads it as that level)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        if missing is None:
            raise missing_values(variable)
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        column = pc.dictionary_encode(column, null_encoding="encode")
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    indices = column.indices.to_numpy(zero_copy_only=False)
    dictionary = column.dictionary
    used = np.bincount(indices, minlength=len(dictionary)) > 0 if len(indices) else np.zeros(len(dictionary), bool)
    if not used.all():
        # A stored dictionary may list values no row has (a categorical's unused category): only those used count.
        positions = np.flatnonzero(used)
        renumber = np.zeros(len(dictionary), dtype=np.int64)
        renumber[positions] = np.arange(len(positions))
        indices = renumber[indices]
        dictionary = dictionary.take(pa.array(positions))
    return indices, dictionary


def batch_codes(batch, variables: Sequence[str], levels: Sequence[Sequence[str]], protected: bool,
                missing: str | None = None) -> np.ndarray:
    """One batch's records as level positions (records by variables), checked against the levels.

    Parameters
    ----------
    batch : pyarrow.RecordBatch or pandas.DataFrame
        The counted columns of some records.
    variables : sequence of str
    levels : sequence of sequence of str
        Each variable's levels, in order.
    protected : bool
        Whether fields may carry the CSV writer's protective quote.
    missing : str, optional
        The level a missing value is read as (None: refused).

    Returns
    -------
    numpy.ndarray
        uint8, uint16 or uint32 codes.

    Raises
    ------
    TabreleaseError
        A missing value, or a value not among its variable's levels (named, with the variable).
    """
    widest = max(len(lv) for lv in levels)
    dtype = np.uint8 if widest <= 2**8 else np.uint16 if widest <= 2**16 else np.uint32
    rows = batch.num_rows if hasattr(batch, "num_rows") else len(batch)
    codes = np.empty((rows, len(variables)), dtype=dtype, order="F")
    for j, (variable, declared) in enumerate(zip(variables, levels)):
        if hasattr(batch, "num_rows"):
            indices, dictionary = _encoded(batch.column(variable), variable, missing)
        else:
            indices, dictionary = _factorized_partition(batch[variable], variable, missing)
        labels = _labels_of(dictionary, variable, protected, missing)
        where = {label: i for i, label in enumerate(declared)}
        unknown = sorted({label for label in labels if label not in where})
        if unknown:
            raise undeclared_values(variable, declared, _stored_as_floats(batch, variable))
        lookup = np.array([where[label] for label in labels], dtype=dtype)
        codes[:, j] = lookup[indices] if lookup.size else 0
    return codes


class _PyList:
    """A pandas Index of uniques with the `to_pylist` of an Arrow dictionary."""

    def __init__(self, uniques):
        self.uniques = uniques

    def to_pylist(self):
        return [None if v is None or v != v else v for v in self.uniques.tolist()]


def _factorized_partition(column, variable: str, missing: str | None):
    """(indices, a dictionary with `to_pylist`) of a pandas partition's column, as `_encoded` gives an Arrow
    column's: a missing value refused, or, where a `missing` level is given, one more entry (None) for it."""
    import pandas as pd

    indices, uniques = pd.factorize(column, use_na_sentinel=True)
    dictionary = _PyList(uniques)
    if (indices < 0).any():
        if missing is None:
            raise missing_values(variable)
        indices = np.where(indices < 0, len(uniques), indices)
        dictionary = _PyList(pd.Index([*uniques.tolist(), None], dtype=object))
    return indices, dictionary


def batch_labels(batch, variables: Sequence[str], protected: bool, missing: str | None = None) -> list[set[str]]:
    """Each variable's distinct labels in one batch (for levels read from the data).

    Parameters
    ----------
    batch : pyarrow.RecordBatch or pandas.DataFrame
    variables : sequence of str
    protected : bool
        Whether fields may carry the CSV writer's protective quote.
    missing : str, optional
        The level a missing value is read as (None: refused).

    Returns
    -------
    list of set of str
    """
    found = []
    for variable in variables:
        if hasattr(batch, "num_rows"):
            _, dictionary = _encoded(batch.column(variable), variable, missing)
        else:
            _, dictionary = _factorized_partition(batch[variable], variable, missing)
        found.append(set(_labels_of(dictionary, variable, protected, missing)))
    return found


# --- counting --------------------------------------------------------------------------------------------
@dataclass
class Counts:
    """What one pass over records counts: the margins asked for (axis tuples to int64 arrays; the empty tuple is
    the total), the number of people, and the multiset sums. Counts of two blocks of records add (`merge`)."""

    margins: dict[tuple[int, ...], np.ndarray]
    n: int = 0
    lanes: tuple[int, ...] = (0,) * LANES
    canonical_lanes: tuple[int, ...] = (0,) * CANONICAL_LANES

    def merge(self, other: Counts) -> Counts:
        """Add another block's counts into these.

        Parameters
        ----------
        other : Counts

        Returns
        -------
        Counts
            These counts, with `other`'s added.
        """
        for axes, array in other.margins.items():
            self.margins[axes] = self.margins[axes] + array if axes in self.margins else array.copy()
        self.n += other.n
        self.lanes = add_lanes(self.lanes, other.lanes)
        self.canonical_lanes = add_lanes(self.canonical_lanes, other.canonical_lanes)
        return self


def _count_codes(codes: np.ndarray, variables: Sequence[str], levels: Sequence[Sequence[str]],
                 margins: Sequence[tuple[int, ...]]) -> Counts:
    """The counts of one batch of records: each margin by its mixed-radix keys, the total, the multiset sums (by
    level positions and by names and labels). Every engine counts through this function, which is what makes their
    margins identical."""
    shape = tuple(len(lv) for lv in levels)
    counted = {}
    rows = codes.shape[0]
    for axes in margins:
        sizes = [int(shape[a]) for a in axes]
        cells = int(np.prod(sizes, dtype=object))
        if not axes:
            counted[axes] = np.array(rows, dtype=np.int64)
            continue
        # Keys in the narrowest type that holds the margin's cells (every partial key is below the last): a margin of
        # 144 cells is built in bytes, twice as fast as in 64-bit integers.
        dtype = next(t for t in (np.uint8, np.uint16, np.uint32, np.int64) if cells - 1 <= np.iinfo(t).max)
        keys = codes[:, axes[0]].astype(dtype)
        for a, size in zip(axes[1:], sizes[1:]):
            keys *= dtype(size)
            keys += codes[:, a]
        if cells <= max(_DENSE_PER_BATCH * rows, 1 << 16):
            counted[axes] = np.bincount(keys, minlength=cells).astype(np.int64, copy=False).reshape(sizes)
        else:  # a large margin: a sparse batch of it, kept as (keys, counts) until it is added in
            unique, counts = np.unique(keys, return_counts=True)
            counted[axes] = _SparseBlock(unique, counts.astype(np.int64), tuple(sizes))
    return Counts(counted, rows, *both_lanes(codes, variables, levels))


@dataclass
class _SparseBlock:
    """A batch's counts of a margin too large to hold densely per batch: its distinct keys and their counts."""

    keys: np.ndarray
    counts: np.ndarray
    sizes: tuple[int, ...]
    __array_ufunc__ = None  # `dense + block` comes to __radd__, not to numpy's element-by-element object addition

    def __radd__(self, dense: np.ndarray) -> np.ndarray:
        flat = dense.reshape(-1)
        flat[self.keys] += self.counts
        return dense

    def copy(self) -> np.ndarray:
        dense = np.zeros(self.sizes, dtype=np.int64)
        return dense + self


def _check_margin_sizes(shape, margins, variables) -> None:
    for axes in margins:
        cells = int(np.prod([shape[a] for a in axes], dtype=object))
        if cells > MAX_MARGIN_CELLS:
            raise TabreleaseError(f"the margin over {', '.join(variables[a] for a in axes)} has {cells:.3g} cells, "
                                  f"more than the {MAX_MARGIN_CELLS:,} a margin may have")


def count_file(record_file: RecordFile, levels: Sequence[Sequence[str]], margins: Sequence[tuple[int, ...]], *,
               engine: str = DEFAULT_ENGINE, scheduler: str | None = None) -> Counts:
    """One pass over a file of records, counting the margins asked for, the total and the multiset sums.

    Parameters
    ----------
    record_file : RecordFile
    levels : sequence of sequence of str
        Each variable's levels, in order (a value outside them is refused).
    margins : sequence of tuple of int
        Sorted axis tuples; the empty tuple counts the total.
    engine : {"arrow", "dask"}
        Who reads and counts: this process, streaming, or a Dask cluster.
    scheduler : str, optional
        With ``dask``: the scheduler's address (default: a local cluster for this count).

    Returns
    -------
    Counts

    Raises
    ------
    TabreleaseError
        The file cannot be read, a value is missing or undeclared, or a margin is too large.
    """
    shape = tuple(len(lv) for lv in levels)
    margins = list(dict.fromkeys(tuple(sorted(int(a) for a in m)) for m in margins))
    _check_margin_sizes(shape, margins, record_file.variables)
    protected = not record_file.is_parquet
    if engine == "dask":
        return _dask_count(record_file, levels, margins, scheduler)
    if engine == "spark":
        return _spark_count(record_file, levels, margins, scheduler)
    if engine != "arrow":
        raise TabreleaseError(f"unknown counting engine {engine!r}; the engines are {', '.join(ENGINES)}")
    total = Counts({})
    try:
        for batch in _arrow_batches(record_file):
            if batch.num_rows:
                total.merge(_count_codes(batch_codes(batch, record_file.variables, levels, protected,
                                                     record_file.missing), record_file.variables, levels, margins))
    except TabreleaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors have no common base: any failure to read is one line
        raise _read_failure(record_file, exc) from None
    for axes in margins:  # a file with no rows (refused by the caller) or a margin no batch reached
        if axes not in total.margins:
            total.margins[axes] = np.zeros([shape[a] for a in axes], dtype=np.int64)
    return total


def read_labels(record_file: RecordFile, *, engine: str = DEFAULT_ENGINE, scheduler: str | None = None
                ) -> list[set[str]]:
    """Each variable's distinct labels in the file (a pass of its own; levels read from the data).

    Parameters
    ----------
    record_file : RecordFile
    engine : {"arrow", "dask"}
    scheduler : str, optional

    Returns
    -------
    list of set of str
    """
    protected = not record_file.is_parquet
    if engine == "dask":
        return _dask_labels(record_file, scheduler)
    if engine == "spark":
        return _spark_labels(record_file, scheduler)
    found = [set() for _ in record_file.variables]
    try:
        for batch in _arrow_batches(record_file):
            for seen, labels in zip(found, batch_labels(batch, record_file.variables, protected, record_file.missing)):
                seen |= labels
    except TabreleaseError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _read_failure(record_file, exc) from None
    return found


# --- Dask ------------------------------------------------------------------------------------------------
def _require_dask():
    """The dask module, or the one-line refusal that names the extra (an unguarded import had given "internal
    error (ModuleNotFoundError)": a user's trial of --engine dask without it)."""
    try:
        import dask
    except ImportError:
        raise TabreleaseError("--engine dask needs Dask: pip install 'tabrelease[dask]'") from None
    return dask


def _dask_frame(record_file: RecordFile):
    try:
        import dask.dataframe as dd
    except ImportError:
        raise TabreleaseError("--engine dask needs Dask: pip install 'tabrelease[dask]'") from None
    columns = list(record_file.variables)
    if record_file.is_parquet:
        return dd.read_parquet(str(record_file.path), columns=columns)
    names, sep, skip = _csv_header(record_file)
    # Every column is read, then the counted ones kept: with usecols, pandas would drop a row's extra fields silently.
    frame = dd.read_csv(str(record_file.path), sep=sep, header=None, names=[n or f"\x00unnamed {i}" for i, n in
                        enumerate(names)], skiprows=skip, dtype=str,
                        encoding=_python_codec(record_file), keep_default_na=False,
                        na_values=[], skip_blank_lines=True, blocksize=64 << 20)
    if record_file.missing is not None:
        # With a missing level a row of separators only would be a person of missing values: rows blank in every
        # field are dropped (a partition cannot tell a trailing one from one inside, which the in-memory reader
        # refuses; counted alike).
        frame = frame.map_partitions(_without_blank_rows, meta=frame._meta)
    return frame[columns]


def _without_blank_rows(frame):
    """A pandas partition without its rows whose every field is empty once stripped."""
    blank = np.ones(len(frame), dtype=bool)
    for column in frame.columns:
        blank &= frame[column].astype(str).str.strip().eq("").to_numpy()
    return frame[~blank]


def _client(scheduler: str | None):
    """(a client, the local cluster it made or None): on the scheduler named, else on 2 local worker processes."""
    try:
        import distributed
    except ImportError:
        raise TabreleaseError("--engine dask needs Dask: pip install 'tabrelease[dask]'") from None
    if scheduler:
        try:
            return distributed.Client(scheduler, timeout="10s", set_as_default=False), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise TabreleaseError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    global _LOCAL_CLUSTER
    if _LOCAL_CLUSTER is None:  # one per process, for every count it makes (starting one takes seconds)
        import atexit

        import logging

        # The workers' own logs stay silent: a task that fails (a value outside the declared levels, refused in one
        # line by the command) had its traceback logged to stderr by the worker first (a reviewer's trial), and a
        # failure's text could quote a value of the file.
        import warnings

        # A SIGINT while the cluster starts is held and acted on once it has (an interrupt inside the start could
        # leave it half made; one ignored there had let a release be charged, a review's trial); the workers
        # ignore SIGINT from their own start (`_dask_worker`, their preload).
        from .._signals import deferred_signals

        with warnings.catch_warnings(), deferred_signals():
            warnings.simplefilter("ignore")  # "Port 8787 is already in use" (another cluster's): not the user's concern
            _LOCAL_CLUSTER = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                                      dashboard_address=None, silence_logs=logging.CRITICAL,
                                                      preload=["tabrelease.tables._dask_worker"])
        atexit.register(_LOCAL_CLUSTER.close)
    return distributed.Client(_LOCAL_CLUSTER, set_as_default=False), None


_LOCAL_CLUSTER = None


def _count_partition(frame, variables, levels, margins, protected, missing=None) -> Counts:
    shape = tuple(len(lv) for lv in levels)
    if len(frame) == 0:
        return Counts({axes: np.zeros([shape[a] for a in axes], dtype=np.int64) for axes in margins})
    counted = _count_codes(batch_codes(frame, variables, levels, protected, missing), variables, levels, margins)
    for axes, value in counted.margins.items():
        if isinstance(value, _SparseBlock):
            counted.margins[axes] = value.copy()
    return counted


def _merge_all(parts: list[Counts]) -> Counts:
    total = Counts({})
    for part in parts:
        total.merge(part)
    return total


def _dask_count(record_file: RecordFile, levels, margins, scheduler) -> Counts:
    dask = _require_dask()

    try:
        frame = _dask_frame(record_file)
    except TabreleaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - dask reads the file's head to plan, and fails as the reader fails
        raise TabreleaseError(f"cannot read {record_file.path} ({_reason(exc)})") from None
    protected = not record_file.is_parquet
    parts = [dask.delayed(_count_partition)(p, record_file.variables, [list(lv) for lv in levels], margins, protected,
                                            record_file.missing) for p in frame.to_delayed()]
    while len(parts) > 1:  # a tree of sums: no worker holds more than two partitions' margins at once
        parts = [dask.delayed(_merge_all)(parts[i:i + 2]) for i in range(0, len(parts), 2)]
    client, cluster = _client(scheduler)
    try:
        return client.compute(parts[0]).result()
    except TabreleaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - a worker's failure arrives as the worker's exception
        raise TabreleaseError(f"cannot count {record_file.path} on the Dask cluster ({_reason(exc)})") from None
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _partition_labels(frame, variables, protected, missing=None):
    return batch_labels(frame, variables, protected, missing)


def _union_labels(parts):
    return [set().union(*column) for column in zip(*parts)]


def _dask_labels(record_file: RecordFile, scheduler) -> list[set[str]]:
    dask = _require_dask()

    try:
        frame = _dask_frame(record_file)
    except TabreleaseError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise TabreleaseError(f"cannot read {record_file.path} ({_reason(exc)})") from None
    protected = not record_file.is_parquet
    parts = [dask.delayed(_partition_labels)(p, record_file.variables, protected, record_file.missing)
             for p in frame.to_delayed()]
    client, cluster = _client(scheduler)
    try:
        return client.compute(dask.delayed(_union_labels)(parts)).result()
    except TabreleaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - a worker's failure arrives as the worker's exception
        raise TabreleaseError(f"cannot read {record_file.path} on the Dask cluster ({_reason(exc)})") from None
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# --- Spark ----------------------------------------------------------------------------------------------
def _spark_session(master: str | None):
    """The Spark session counts run in: on the master named, else local[2] (one per process, stopped at exit)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise TabreleaseError("--engine spark needs pyspark and Java: pip install 'tabrelease[spark]'") from None
    import atexit

    import os
    import sys

    builder = (SparkSession.builder.appName("tabrelease counts").master(master or "local[2]")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.log.level", "ERROR").config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    if not master or master.startswith("local"):
        # Local executors run this interpreter (which has tabrelease), not the first python3 on the PATH; a
        # cluster's executors must have tabrelease installed.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The JVM is started with standard error on /dev/null: it logs its start-up to it, whatever the log level, and
    # its failures reach this process as exceptions anyway.
    saved, quiet = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(quiet, 2)
        session = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - the JVM's failures arrive as many kinds
        raise TabreleaseError(f"cannot start Spark ({type(exc).__name__}): is Java installed?") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(quiet)
    session.sparkContext.setLogLevel("ERROR")
    atexit.register(session.stop)
    return session


def _spark_frame(session, record_file: RecordFile):
    columns = list(record_file.variables)
    if record_file.is_parquet:
        return session.read.parquet(str(record_file.path)).select(*columns)
    from pyspark.sql.types import StringType, StructField, StructType

    names, sep, _ = _csv_header(record_file)
    schema = StructType([StructField(n or f"_unnamed {i}", StringType()) for i, n in enumerate(names)])
    encoding = _csv_encoding(record_file)
    # escape='"': a quote inside a quoted field is doubled (RFC 4180, as the other engines read it), not backslashed.
    frame = session.read.csv(str(record_file.path), schema=schema, sep=sep, header=True, enforceSchema=True,
                             encoding="UTF-8" if encoding == "utf8" else encoding, mode="FAILFAST", escape='"')
    if record_file.missing is not None:  # as the Dask engine: a row of separators only is no person
        frame = frame.dropna(how="all")
    return frame.select(*columns)


def _spark_run(record_file: RecordFile, master: str | None, work) -> list:
    """`work(frames)` run on each Spark partition (its pandas batches), each returning one picklable result, or
    the one-line reason it refused: the results, or that reason raised here."""
    import pickle

    def payloads(batches):
        import pandas as pd

        try:
            result = ("done", work(batches))
        except TabreleaseError as exc:
            result = ("refused", str(exc))
        yield pd.DataFrame({"payload": [pickle.dumps(result)]})

    import warnings

    session = _spark_session(master)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="PySpark does not yet fully support", category=FutureWarning)
            rows = _spark_frame(session, record_file).mapInPandas(payloads, "payload binary").collect()
    except TabreleaseError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise TabreleaseError(f"cannot count {record_file.path} on Spark ({_reason(exc)})") from None
    results = [pickle.loads(row["payload"]) for row in rows]
    refused = [text for kind, text in results if kind == "refused"]
    if refused:
        raise TabreleaseError(refused[0])
    return [value for _, value in results]


def _spark_count(record_file: RecordFile, levels, margins, master) -> Counts:
    variables, level_lists = record_file.variables, [list(lv) for lv in levels]
    protected, missing = not record_file.is_parquet, record_file.missing

    def count(batches):
        return _merge_all([_count_partition(frame, variables, level_lists, margins, protected, missing)
                           for frame in batches])

    total = _merge_all(_spark_run(record_file, master, count))
    shape = tuple(len(lv) for lv in levels)
    for axes in margins:
        total.margins.setdefault(axes, np.zeros([shape[a] for a in axes], dtype=np.int64))
    return total


def _spark_labels(record_file: RecordFile, master) -> list[set[str]]:
    variables, protected, missing = record_file.variables, not record_file.is_parquet, record_file.missing

    def labels(batches):
        return _union_labels([batch_labels(frame, variables, protected, missing) for frame in batches]
                             or [[set() for _ in variables]])

    return _union_labels(_spark_run(record_file, master, labels))


# --- the table held as its file ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class FileTable(TableView):
    """A table too large to hold as cells, held as its file of records: each margin is counted from the file when
    first asked (all that are asked together in one pass), then kept; a margin inside one already counted is summed
    from it. The records themselves are never held, so memory stays flat in the number of rows.

    The full table's non-zero cells are never listed (that would hold every distinct record): what needs them (the
    audit's small cells of the whole table, its zero cells) is not given for such a table, and says so.
    """

    variables: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    source: RecordFile
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    engine: str = DEFAULT_ENGINE
    scheduler: str | None = None
    _counted: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def held_as_file(self) -> bool:
        return True

    @property
    def zero_cells(self) -> None:
        """Not counted: it would need every distinct record."""
        return None

    def _first_pass(self) -> None:
        if "n" not in self._counted:
            self.count_margins([()])

    @property
    def n(self) -> int:
        self._first_pass()
        return self._counted["n"]

    @property
    def lanes(self) -> tuple[int, ...]:
        """The records' multiset sums (`record_lanes`), counted in the first pass."""
        self._first_pass()
        return self._counted["lanes"]

    @property
    def canonical_lanes(self) -> tuple[int, ...]:
        """The records' canonical multiset sums (`record_lanes` by names and labels), counted in the first pass."""
        self._first_pass()
        return self._counted["canonical_lanes"]

    def _from_counted(self, axes: tuple[int, ...]) -> np.ndarray | None:
        margins = self._counted.setdefault("margins", {})
        if axes in margins:
            return margins[axes]
        parent = min((m for m in margins if set(axes) <= set(m)), key=len, default=None)
        if parent is None:
            return None
        from .model import margin_counts

        array = np.asarray(margin_counts(margins[parent], [parent.index(a) for a in axes]), dtype=np.int64)
        array.flags.writeable = False
        margins[axes] = array
        return array

    def count_margins(self, margins: Sequence[Sequence[int]]) -> None:
        """Count, in one pass over the file, every margin asked for that is neither counted nor inside one counted.

        Parameters
        ----------
        margins : sequence of sequence of int
            Axis tuples (the empty one is the total).
        """
        wanted = [tuple(sorted(int(a) for a in m)) for m in margins]
        missing = [m for m in dict.fromkeys(wanted) if self._from_counted(m) is None]
        if "n" in self._counted and not missing:
            return
        counts = count_file(self.source, self.levels, missing or [()], engine=self.engine, scheduler=self.scheduler)
        if counts.n == 0:
            raise TabreleaseError("the microdata have no rows")
        if counts.n >= 2**53:
            raise TabreleaseError("the table's total is 2^53 or more; counts that large are not held exactly")
        if "n" in self._counted and (counts.n, counts.lanes) != (self._counted["n"], self._counted["lanes"]):
            raise TabreleaseError(f"{self.source.path} changed while it was being released: read it again")
        self._counted["n"], self._counted["lanes"] = counts.n, counts.lanes
        self._counted["canonical_lanes"] = counts.canonical_lanes
        margins_held = self._counted.setdefault("margins", {})
        for axes, array in counts.margins.items():
            array = np.asarray(array, dtype=np.int64)
            array.flags.writeable = False
            margins_held[axes] = array

    def margin_counts(self, axes: Sequence[int]) -> np.ndarray:
        """The count array of the margin over `axes` (counted from the file if no margin counted holds it).

        Parameters
        ----------
        axes : sequence of int

        Returns
        -------
        numpy.ndarray
            int64, read-only, one axis per axis asked for, in sorted order.
        """
        axes = tuple(sorted(int(a) for a in axes))
        found = self._from_counted(axes)
        if found is None:
            if self._counted.get("frozen"):
                raise TabreleaseError(f"the margin over {', '.join(self.variables[a] for a in axes)} was not counted "
                                      "before the release, and the file is not read after it")
            self.count_margins([axes])
            found = self._from_counted(axes)
        return found

    def freeze(self) -> None:
        """From now on only margins counted already (or inside one) are given; `count_margins` still counts more.
        The release path freezes a table once it has counted, before the charge, all it needs: no pass over the
        file happens after a budget is spent."""
        self._counted["frozen"] = True

    def distinct_records(self):
        """Never listed: a table counted from its file does not hold its records.

        Returns
        -------
        None
            Never: it raises.

        Raises
        ------
        TabreleaseError
            Always.
        """
        raise TabreleaseError("a table counted from its file as margins does not list its records (they are never "
                              "held); read it with --engine pandas to hold them")

    @property
    def counts(self) -> np.ndarray:
        raise TabreleaseError(f"this needs every cell of the table, and it has {self.cells:.3g} cells (counted from its "
                              f"file as margins; cells are held up to {cells_counted_whole():,}): use the default (planned) "
                              "mechanism, which works from margins")

    def __repr__(self) -> str:
        label = self.name or "table"
        return f"<FileTable {label}: {' x '.join(map(str, self.shape))}, counted from {self.source.path.name}>"


def refuse_nested_columns(path, schema, columns) -> None:
    """Refuse a Parquet file whose counted columns hold lists, records or maps (nested types): a microdata column is
    one plain value per person. pandas had failed on them with an internal error (TypeError), and Arrow's reader with
    its own error's name alone (a reviewer's trial).

    Parameters
    ----------
    path : path-like
        The file, for the message.
    schema : pyarrow.Schema
        Its schema.
    columns : sequence of str or None
        The columns counted (None: every column).
    """
    import pyarrow.types as pat

    for column in schema:
        if (columns is None or column.name in columns) and pat.is_nested(column.type):
            raise TabreleaseError(f"{Path(path).name}: column {column.name!r} holds {column.type} values (lists, "
                                  "records or maps): a microdata column holds one plain value per person")


def read_microdata_file(path: Path, variables: Sequence[str] | None, levels: Mapping[str, Sequence[str]] | None, *,
                        csv_options=None, engine: str = DEFAULT_ENGINE, scheduler: str | None = None,
                        batch_rows: int = BATCH_ROWS):
    """Microdata counted by an engine: a `ContingencyTable` when the cells fit (every cell counted in one pass),
    else a `FileTable` (margins counted when the release asks for them).

    Parameters
    ----------
    path : Path
        A Parquet or CSV file.
    variables : sequence of str, optional
        The columns counted (default: every column).
    levels : mapping, optional
        Declared levels of some or all variables; the others are read from the data in a first pass.
    csv_options : CsvOptions, optional
    engine : {"arrow", "dask"}
    scheduler : str, optional
    batch_rows : int

    Returns
    -------
    ContingencyTable or FileTable
    """
    if engine not in ("arrow", "dask", "spark"):
        raise TabreleaseError(f"unknown counting engine {engine!r}; the engines are {', '.join(ENGINES)}")
    if path.suffix.lower() not in (".parquet", ".csv", ".txt", ".tsv"):
        raise TabreleaseError(f"the {engine} engine reads Parquet and CSV files, not {path.name}: use --engine pandas")
    probe = RecordFile(path=path, variables=(), csv=csv_options, batch_rows=batch_rows)
    columns = _file_columns(probe)
    asked = variables is not None or probe.is_parquet  # a Parquet schema's names are names, never a record
    variables = [str(v) for v in (variables if variables is not None else columns)]
    missing = [v for v in variables if v not in columns]
    if missing:
        rows = () if probe.is_parquet else rows_below_header(probe)
        named = the_columns(columns, [*variables, *(levels or ())], rows, levels, schema=probe.is_parquet)
        raise TabreleaseError(f"{path} has no column {missing[0]!r}; {named}")
    if probe.is_parquet:
        import pyarrow.parquet as pq

        refuse_nested_columns(path, pq.read_schema(path), variables)
    if not variables:
        raise TabreleaseError(f"{path} has no columns to count")
    record_file = RecordFile(path=path, variables=tuple(variables), csv=csv_options, batch_rows=batch_rows)
    declared = {v: declared_levels(v, levels[v]) for v in variables if levels is not None and v in levels}
    undeclared = [v for v in variables if v not in declared]
    level_lists = []
    if undeclared:
        found = read_labels(record_file, engine=engine, scheduler=scheduler)
    for j, variable in enumerate(variables):
        if variable in declared:
            level_lists.append(list(declared[variable]))
        else:
            level_lists.append(level_order(found[j]))
        if len(level_lists[-1]) < 2:
            raise too_few_levels(variable, level_lists[-1])
    metadata = {} if not undeclared else undeclared_metadata(variables, levels, asked)
    shape = tuple(len(lv) for lv in level_lists)
    check_one_encoding(variables, level_lists)  # before the pass that counts
    cells = int(np.prod(shape, dtype=object))
    if cells <= cells_counted_whole():
        check_cells(variables, shape)
        counts = count_file(record_file, level_lists, [tuple(range(len(shape)))], engine=engine, scheduler=scheduler)
        if counts.n == 0:
            raise TabreleaseError("the microdata have no rows")
        return ContingencyTable(tuple(variables), tuple(map(tuple, level_lists)),
                                counts.margins[tuple(range(len(shape)))], path.stem, metadata)
    table = FileTable(tuple(variables), tuple(map(tuple, level_lists)), record_file, path.stem, metadata, engine,
                      scheduler)
    table.count_margins([()])  # the first pass: n, the fingerprint's sums, and every value checked
    return table
