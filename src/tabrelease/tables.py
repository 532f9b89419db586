"""Contingency tables: named variables, ordered levels, a non-negative integer count per cell.

A table is built from a long-format frame (one column per variable plus a count column),
from microdata (one row per person), or by name from the built-in tables; it goes back out as
a long frame. Everything else in the tool takes a `ContingencyTable`.
"""

from __future__ import annotations

import csv
import json
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import TabreleaseError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
# pandas is imported where a frame is read or made: a release of a built-in table needs none, and
# importing it costs a third of a second of start-up.

LETTERS = string.ascii_uppercase
BUILTIN_TABLES = ("edwards", "czech", "rochdale", "journey_to_work")


@dataclass(frozen=True, eq=False)
class ContingencyTable:
    """A complete k-way table of counts.

    `counts[i1, ..., ik]` is the number of units with level `levels[0][i1]` of `variables[0]`,
    and so on; every cell is present, zeros included. The count array is read-only.
    """

    variables: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    counts: np.ndarray
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counts = np.asarray(self.counts)
        if len(self.variables) == 0:
            raise TabreleaseError("a table needs at least one variable")
        if len(set(self.variables)) != len(self.variables):
            raise TabreleaseError(f"duplicate variable names: {list(self.variables)}")
        if counts.shape != tuple(len(lv) for lv in self.levels) or len(self.levels) != len(self.variables):
            raise TabreleaseError(
                f"counts of shape {counts.shape} do not match the levels "
                f"{[len(lv) for lv in self.levels]} of {list(self.variables)}"
            )
        for variable, lv in zip(self.variables, self.levels):
            if len(lv) < 2:
                raise TabreleaseError(f"variable {variable!r} has only one level ({list(lv)}); it carries no information")
            if len(set(lv)) != len(lv):
                raise TabreleaseError(f"variable {variable!r} has repeated levels {list(lv)}")
        if not np.issubdtype(counts.dtype, np.integer):
            if not np.all(np.isfinite(counts)) or np.any(counts != np.round(counts)):
                raise TabreleaseError("counts must be whole numbers")
        if np.any(counts < 0):
            raise TabreleaseError("counts must be non-negative")
        frozen = counts.astype(np.int64, copy=True)
        frozen.flags.writeable = False
        object.__setattr__(self, "counts", frozen)
        object.__setattr__(self, "variables", tuple(str(v) for v in self.variables))
        object.__setattr__(self, "levels", tuple(tuple(str(x) for x in lv) for lv in self.levels))

    # --- shape -------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.counts.shape

    @property
    def k(self) -> int:
        return len(self.variables)

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def cells(self) -> int:
        return int(self.counts.size)

    @property
    def zero_cells(self) -> int:
        return int(np.count_nonzero(self.counts == 0))

    @property
    def is_binary(self) -> bool:
        return all(len(lv) == 2 for lv in self.levels)

    @property
    def letters(self) -> tuple[str, ...]:
        """The papers' letters: A for the first variable, B for the second, ..."""
        return tuple(LETTERS[i] if i < len(LETTERS) else f"V{i + 1}" for i in range(self.k))

    # --- naming ------------------------------------------------------------------------------
    def axis(self, token: str) -> int:
        """The axis of a variable named by its name or, failing that, by its letter."""
        if token in self.variables:
            return self.variables.index(token)
        if token in self.letters:
            return self.letters.index(token)
        raise TabreleaseError(f"unknown variable {token!r}; the table has {describe_variables(self)}")

    def axes(self, tokens: Iterable[str]) -> tuple[int, ...]:
        return tuple(sorted({self.axis(t) for t in tokens}))

    # --- derived tables ----------------------------------------------------------------------
    def margin(self, variables: Iterable[str] | str) -> ContingencyTable:
        """The marginal table over the given variables (names or letters; a string of letters works)."""
        tokens = [variables] if isinstance(variables, str) and variables in self.variables else variables
        axes = self.axes(tokens)
        if not axes:
            raise TabreleaseError("a margin needs at least one variable")
        return ContingencyTable(
            variables=tuple(self.variables[a] for a in axes),
            levels=tuple(self.levels[a] for a in axes),
            counts=margin_counts(self.counts, axes),
            name=None if self.name is None else f"{self.name}[{''.join(self.letters[a] for a in axes)}]",
        )

    def with_counts(self, counts: np.ndarray) -> ContingencyTable:
        """The same variables and levels with other counts (a released table, say)."""
        return ContingencyTable(self.variables, self.levels, counts, self.name, self.metadata)

    def to_frame(self, count_column: str = "count") -> pd.DataFrame:
        """Long format: one row per cell, first variable varying slowest."""
        grids = np.meshgrid(*[np.arange(len(lv)) for lv in self.levels], indexing="ij")
        data = {
            var: np.asarray(lv, dtype=object)[grid.ravel()]
            for var, lv, grid in zip(self.variables, self.levels, grids)
        }
        data[count_column] = self.counts.ravel()
        import pandas as pd

        return pd.DataFrame(data)

    def write_csv(self, path: str | Path, count_column: str = "count") -> None:
        """Long format as CSV, without pandas (the release path writes its bundle this way)."""
        write_long_csv(path, self.variables, self.levels, tuple(range(self.k)), self.counts, count_column)

    def __repr__(self) -> str:
        label = self.name or "table"
        return f"<ContingencyTable {label}: {' x '.join(map(str, self.shape))}, n={self.n}, zero cells={self.zero_cells}>"


def margin_counts(counts: np.ndarray, axes: Sequence[int], batch_ndim: int = 0) -> np.ndarray:
    """Sum an array of tables over every table axis not in `axes` (leading batch axes kept)."""
    k = counts.ndim - batch_ndim
    drop = tuple(batch_ndim + a for a in range(k) if a not in set(axes))
    return counts.sum(axis=drop) if drop else counts


def write_long_csv(path, variables, levels, axes, values: np.ndarray, count_column: str = "count") -> None:
    """One row per cell of the array over `axes` (first axis slowest): the level labels, then the value."""
    values = np.asarray(values)
    integer = np.issubdtype(values.dtype, np.integer)
    labels = [levels[a] for a in axes]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow([variables[a] for a in axes] + [count_column])
        for index in np.ndindex(*values.shape):
            v = values[index]
            out.writerow([lv[i] for lv, i in zip(labels, index)] + [int(v) if integer else repr(round(float(v), 6))])


# A table is held as an array of cells (8 bytes each): past this it is refused before any work, in one line.
MAX_TABLE_CELLS = 2**27


def check_cells(variables: Sequence[str], shape: Sequence[int]) -> None:
    cells = int(np.prod([int(k) for k in shape], dtype=object))
    if cells > MAX_TABLE_CELLS:
        levels = " x ".join(str(k) for k in shape)
        raise TabreleaseError(f"the table of {len(variables)} variables ({levels}) has {cells:.3g} cells; tables are held "
                              f"as cells up to {MAX_TABLE_CELLS:,} (2^27, 1 GiB) for now: release fewer variables")


def describe_variables(table: ContingencyTable) -> str:
    if table.variables == table.letters:
        return "variables " + ", ".join(table.variables)
    return "variables " + ", ".join(f"{v} ({letter})" for v, letter in zip(table.variables, table.letters))


# --- construction --------------------------------------------------------------------------------
def _level_order(values: pd.Series) -> list[str]:
    """Numeric order when every level is a number, else sorted text: never the order of the file, which would
    let the published schema and row order depend on the confidential data (a file sorted by count)."""
    seen = set(values.unique().tolist())
    try:
        return sorted(seen, key=lambda v: (float(v), v))
    except ValueError:
        return sorted(seen)


def _resolve_levels(frame: pd.DataFrame, variables: Sequence[str], levels: Mapping[str, Sequence[str]] | None):
    resolved = []
    for var in variables:
        observed = frame[var]
        if levels is not None and var in levels:
            given = [str(x) for x in levels[var]]
            unknown = sorted(set(observed.unique().tolist()) - set(given))
            if unknown:
                raise TabreleaseError(f"variable {var!r} has values {unknown[:5]} that are not among its levels {given}")
            resolved.append(given)
        else:
            resolved.append(_level_order(observed))
    return resolved


def _as_text(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    out = frame.loc[:, list(columns)].copy()
    for col in columns:
        if out[col].isna().any():
            raise TabreleaseError(f"column {col!r} has missing values")
        # Vectorised (a million rows per column in well under a second, where a Python map took seconds).
        out[col] = out[col].astype(str).str.strip()
        if (out[col] == "").any():
            raise TabreleaseError(f"column {col!r} has missing values")
    return out


MAX_COUNT = 2**63 - 1


def _parse_counts(raw: pd.Series, count_column: str) -> np.ndarray:
    """Counts parsed exactly as integers. Messages name the row, never the value (it is a confidential count)."""
    from decimal import Decimal, InvalidOperation

    values = []
    for row, item in enumerate(raw.tolist()):
        text = "" if item is None or (isinstance(item, float) and np.isnan(item)) else str(item).strip()
        where = f"in column {count_column!r} (data row {row + 1})"
        if text == "":
            raise TabreleaseError(f"missing count {where}")
        try:
            number = Decimal(text)
        except InvalidOperation:
            raise TabreleaseError(f"the count {where} is not a number") from None
        if not number.is_finite():
            raise TabreleaseError(f"the count {where} is not a number")
        if number < 0:
            raise TabreleaseError(f"a negative count {where}")
        if number != number.to_integral_value():
            raise TabreleaseError(f"a fractional count {where}")
        value = int(number)
        if value > MAX_COUNT:
            raise TabreleaseError(f"the count {where} is too large (above 2^63 - 1)")
        values.append(value)
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
    """
    if count_column not in frame.columns:
        raise TabreleaseError(f"no count column {count_column!r}; the columns are {list(frame.columns)}")
    variables = [str(c) for c in frame.columns if c != count_column]
    if not variables:
        raise TabreleaseError("a long table needs at least one variable column besides the count column")
    if len(frame) == 0:
        raise TabreleaseError("the table has no rows")
    keys = _as_text(frame, variables)
    counts = _parse_counts(frame[count_column], count_column)
    dup = keys.duplicated(keep=False)
    if dup.any():
        first = keys[dup].iloc[0].to_dict()
        raise TabreleaseError(f"duplicate cell {first} ({int(dup.sum())} rows describe repeated cells)")
    level_lists = _resolve_levels(keys, variables, levels)
    for var, lv in zip(variables, level_lists):
        if len(lv) < 2:
            raise TabreleaseError(f"variable {var!r} has only one level ({lv}); it carries no information")
    shape = tuple(len(lv) for lv in level_lists)
    check_cells(variables, shape)
    import pandas as pd

    index = tuple(
        pd.Categorical(keys[var], categories=lv).codes.astype(np.int64) for var, lv in zip(variables, level_lists)
    )
    cells = int(np.prod(shape))
    if complete and len(frame) != cells:
        missing = cells - len(frame)
        raise TabreleaseError(
            f"the long table lists {len(frame)} of {cells} cells ({missing} missing); list every cell, zeros "
            "included, or say the table is sparse (--sparse, complete=False)"
        )
    array = np.zeros(shape, dtype=np.int64)
    array[index] = counts
    metadata = dict(metadata or {})
    if not complete and not _all_declared(variables, levels):
        metadata[LEVELS_FROM_DATA] = True  # a level nobody has would be missing from the schema
    return ContingencyTable(tuple(variables), tuple(map(tuple, level_lists)), array, name, metadata)


# Set in a table's metadata when its levels were read from data that need not show every level.
LEVELS_FROM_DATA = "levels_from_data"


def _all_declared(variables, levels) -> bool:
    return levels is not None and all(v in levels for v in variables)


def table_from_microdata(
    frame: pd.DataFrame,
    variables: Sequence[str] | None = None,
    *,
    levels: Mapping[str, Sequence[str]] | None = None,
    name: str | None = None,
) -> ContingencyTable:
    """A table from one row per person: counts of each combination of the given variables.

    Levels are taken from the data unless given; a given level that nobody has is a zero cell.
    """
    variables = [str(v) for v in (variables if variables is not None else frame.columns)]
    unknown = [v for v in variables if v not in frame.columns]
    if unknown:
        raise TabreleaseError(f"microdata has no column {unknown[0]!r}; the columns are {list(frame.columns)}")
    if len(frame) == 0:
        raise TabreleaseError("the microdata have no rows")
    keys = _as_text(frame, variables)
    level_lists = _resolve_levels(keys, variables, levels)
    shape = tuple(len(lv) for lv in level_lists)
    check_cells(variables, shape)
    import pandas as pd

    codes = [pd.Categorical(keys[v], categories=lv).codes for v, lv in zip(variables, level_lists)]
    flat = np.ravel_multi_index(codes, shape)
    array = np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape)
    metadata = {} if _all_declared(variables, levels) else {LEVELS_FROM_DATA: True}
    return ContingencyTable(tuple(variables), tuple(map(tuple, level_lists)), array, name, metadata)


def read_table_csv(path: str | Path, count_column: str = "count", *, complete: bool = True,
                   levels: Mapping[str, Sequence[str]] | None = None) -> ContingencyTable:
    """A long-format CSV file; every field is read as text so that level labels such as '01' survive."""
    path = Path(path)
    if not path.exists():
        raise TabreleaseError(f"no such file: {path}")
    if path.is_dir():
        raise TabreleaseError(f"{path} is a directory, not a CSV file")
    if not path.is_file():  # a FIFO, a device (/dev/zero), a socket: reading could block or never end
        raise TabreleaseError(f"{path} is not a regular file")
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        header = next(csv.reader(fh), [])
    names = [h.strip() for h in header]
    repeated = sorted({h for h in names if names.count(h) > 1})
    if repeated:
        raise TabreleaseError(f"{path} has duplicate column names: {', '.join(repeated)}")
    import pandas as pd

    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (OSError, UnicodeDecodeError) as exc:
        raise TabreleaseError(f"cannot read {path}: {exc}") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        raise TabreleaseError(f"{path} is not a readable CSV table: {str(exc).splitlines()[0]}") from None
    return table_from_frame(frame, count_column, complete=complete, name=path.stem, levels=levels)


# --- built-in tables ---------------------------------------------------------------------------
def _builtin_dir() -> Path:
    # An installed wheel carries the tables inside the package; a source checkout (and an
    # editable install) finds them at the top of the repository.
    packaged = resources.files("tabrelease") / "_tables"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "tables"  # src/tabrelease/tables.py -> the repository


@cache
def builtin_metadata(name: str) -> dict[str, Any]:
    if name not in BUILTIN_TABLES:
        raise TabreleaseError(f"no built-in table {name!r}; the built-in tables are {', '.join(BUILTIN_TABLES)}")
    with open(_builtin_dir() / f"{name}.json", encoding="utf-8") as fh:
        return json.load(fh)


@cache
def builtin_table(name: str) -> ContingencyTable:
    """One of the four reference tables of the Yang-Fienberg-Rinaldo paper, with its metadata."""
    meta = builtin_metadata(name)
    variables = [v["name"] for v in meta["variables"]]
    levels = [[str(x) for x in v["levels"]] for v in meta["variables"]]
    # Read with the csv module (no pandas on the release path); the files are ours, and checked all the same.
    with open(_builtin_dir() / f"{name}.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if rows[0] != variables + ["count"]:
        raise TabreleaseError(f"the built-in table {name} has columns {rows[0]}, not {variables + ['count']}")
    shape = tuple(len(lv) for lv in levels)
    position = [{label: i for i, label in enumerate(lv)} for lv in levels]
    counts = np.full(shape, -1, dtype=np.int64)
    for row in rows[1:]:
        counts[tuple(p[label] for p, label in zip(position, row[:-1]))] = int(row[-1])
    if len(rows) - 1 != counts.size or (counts < 0).any():
        raise TabreleaseError(f"the built-in table {name} does not list every cell once")
    return ContingencyTable(tuple(variables), tuple(map(tuple, levels)), counts, name, meta)


def load_table(source: str | Path | ContingencyTable, count_column: str = "count", *, complete: bool = True,
               levels: Mapping[str, Sequence[str]] | None = None) -> ContingencyTable:
    """A built-in table by name, a long-format CSV by path, or a table passed through."""
    if isinstance(source, ContingencyTable):
        return source
    if isinstance(source, str) and source in BUILTIN_TABLES:
        return builtin_table(source)
    path = Path(source)
    if path.suffix.lower() not in {".csv", ".txt"} and not path.exists():
        raise TabreleaseError(
            f"{str(source)!r} is neither a built-in table ({', '.join(BUILTIN_TABLES)}) nor an existing CSV file"
        )
    return read_table_csv(path, count_column, complete=complete, levels=levels)


def describe_builtin_tables() -> list[dict[str, Any]]:
    """Name, shape, n, zero cells and paper model of each built-in table."""
    rows = []
    for name in BUILTIN_TABLES:
        table = builtin_table(name)
        meta = table.metadata
        rows.append(
            {
                "name": name,
                "title": meta["title"],
                "shape": list(table.shape),
                "cells": table.cells,
                "n": table.n,
                "zero_cells": table.zero_cells,
                "model": meta["model"],
                "paper_table": meta["paper_table"],
                "variables": {v["name"]: v["meaning"] for v in meta["variables"]},
            }
        )
    return rows
