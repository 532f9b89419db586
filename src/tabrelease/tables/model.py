"""The table model: a `ContingencyTable` (named variables, ordered levels, a non-negative integer count per cell)
and a `MicrodataTable` (one row per person, held as level codes), their margins, and how they go out as long
rows. Everything else in the tool takes one of these."""

from __future__ import annotations

import csv
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# The rule against formulas in CSV files (OWASP) is one of _files' rules of writing files; write_long_csv applies it.
from .._files import CSV_SEPARATORS, csv_field_for_label
from ..errors import TabreleaseError
from ._text import NOT_A_NAME, all_nfc, header_looks_like_names, nfc

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
# pandas is imported where a frame is read or made: a release of a built-in table needs none, and
# importing it costs a third of a second of start-up.

LETTERS = string.ascii_uppercase



def too_few_levels(variable: str, levels: Sequence) -> TabreleaseError:
    """The refusal of a variable with fewer than two levels: one level carries no information; none means the data
    have no rows (a file with a header and nothing under it), which is said so.

    Parameters
    ----------
    variable : str
        The variable's name.
    levels : sequence
        Its levels (fewer than two).

    Returns
    -------
    TabreleaseError
        The error to raise.
    """
    # A name that is a number (a file without its header has a row of data for names) is not shown either.
    named = (f"variable {variable!r}" if header_looks_like_names([variable]) else
             f"a variable (its name not shown: it is {NOT_A_NAME}; does the file have a header row?)")
    if len(levels) == 0:  # levels read from data that have no rows (as the in-memory reader says it)
        return TabreleaseError("the microdata have no rows")
    # The level is not named: read from the data, it is a confidential value (a reviewer's column held one).
    return TabreleaseError(f"{named} has only one level; it carries no information")


def check_one_encoding(variables, levels) -> None:
    """Refuse names or labels that are one text written two ways: composed and decomposed Unicode (NFC and NFD: "é"
    as one character, or as "e" and a combining accent). They look the same but are different strings, so a file
    mixing both (data merged from macOS and other sources) had its one level published as two identical-looking
    rows (a new user's trial). The labels are not named: which values the data hold may be confidential.

    Parameters
    ----------
    variables : sequence of str
    levels : sequence of sequence of str

    Raises
    ------
    TabreleaseError
        Two variables' names, or two levels of one variable, are equal once NFC-normalised.
    """
    def two_ways(texts) -> bool:  # distinct as written, not once composed (texts in NFC already cannot be)
        return not all_nfc(texts) and len({nfc(t) for t in texts}) < len(set(map(str, texts))) == len(texts)

    fix = ("the file mixes composed and decomposed Unicode (NFC and NFD); write it one way, NFC (Python's "
           "unicodedata.normalize, or `uconv -x any-nfc`)")
    if two_ways(variables):
        raise TabreleaseError(f"two variables' names differ only in how their accents are encoded: {fix}")
    for variable, lv in zip(variables, levels):
        if two_ways(lv):
            raise TabreleaseError(f"variable {str(variable)!r} has two levels that differ only in how their accents "
                                  f"are encoded: {fix}")


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
        check_one_encoding(self.variables, self.levels)
        if counts.shape != tuple(len(lv) for lv in self.levels) or len(self.levels) != len(self.variables):
            raise TabreleaseError(
                f"counts of shape {counts.shape} do not match the levels "
                f"{[len(lv) for lv in self.levels]} of {list(self.variables)}"
            )
        for variable, lv in zip(self.variables, self.levels):
            if len(lv) < 2:
                raise too_few_levels(variable, lv)
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
        """The axis of a variable named by its name, or else its name for people (a built-in table's label, as
        the published files name it: titanic's "class"), or else its letter.

        Parameters
        ----------
        token : str
            A variable's name, its name for people (`people_names`), or its letter (A for the first variable, ...).

        Returns
        -------
        int
            The variable's axis (position in `variables`).

        Raises
        ------
        TabreleaseError
            If no variable has that name or letter.
        """
        if token in self.variables:
            return self.variables.index(token)
        # As the bracket notation reads them (`models._labelled_axis`): a label one variable's alone (a new user's
        # trial: [["home_zone", "work_zone"]] was refused, naming home_zone among the table's variables).
        labelled = [a for a, label in enumerate(people_names(self)[0]) if label == token]
        if len(labelled) == 1:
            return labelled[0]
        if len(labelled) > 1:  # as the bracket notation says it
            raise TabreleaseError(f"{token!r} names more than one variable ("
                                  + ", ".join(self.variables[a] for a in labelled) + "): name one by its own name")
        if token in self.letters:
            return self.letters.index(token)
        raise TabreleaseError(f"unknown variable {token!r}{near_miss(token, self)}; the table has "
                              f"{describe_variables(self)}")

    def axes(self, tokens: Iterable[str]) -> tuple[int, ...]:
        """The sorted, distinct axes of variables named by their names or letters.

        Parameters
        ----------
        tokens : iterable of str
            Variable names or letters (a string of letters names one variable per letter).

        Returns
        -------
        tuple of int
            The axes, sorted, each once.

        Raises
        ------
        TabreleaseError
            If a token names no variable.
        """
        return tuple(sorted({self.axis(t) for t in tokens}))

    # --- derived tables ----------------------------------------------------------------------
    def margin(self, variables: Iterable[str] | str) -> ContingencyTable:
        """The marginal table over the given variables (names or letters; a string of letters works).

        Parameters
        ----------
        variables : str or iterable of str
            A variable's name, or names or letters of several (a string such as ``"AC"`` names A and C).

        Returns
        -------
        ContingencyTable
            The margin, its variables in the table's order; named ``"<name>[AC]"`` when the table has a name.

        Raises
        ------
        TabreleaseError
            If a variable is unknown, or none is given.
        """
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

    def margin_counts(self, axes: Sequence[int]) -> np.ndarray:
        """The count array of the margin over `axes` (sorted axis numbers), as every source of margins gives it.

        Parameters
        ----------
        axes : sequence of int
            Sorted axis numbers of the margin.

        Returns
        -------
        numpy.ndarray
            The margin's counts (int64), one axis per entry of `axes`.
        """
        return margin_counts(self.counts, tuple(axes))

    @property
    def held_as_cells(self) -> bool:
        return True

    def with_counts(self, counts: np.ndarray) -> ContingencyTable:
        """The same variables and levels with other counts (a released table, say).

        Parameters
        ----------
        counts : numpy.ndarray
            Non-negative whole counts of the table's shape.

        Returns
        -------
        ContingencyTable
            A new table with this table's variables, levels, name and metadata.

        Raises
        ------
        TabreleaseError
            If the counts do not fit the shape, are negative or are not whole numbers.
        """
        return ContingencyTable(self.variables, self.levels, counts, self.name, self.metadata)

    def to_frame(self, count_column: str = "count") -> pd.DataFrame:
        """Long format: one row per cell, first variable varying slowest.

        Parameters
        ----------
        count_column : str, default "count"
            Name of the column of counts.

        Returns
        -------
        pandas.DataFrame
            One column per variable (level labels) and the count column; one row per cell.
        """
        grids = np.meshgrid(*[np.arange(len(lv)) for lv in self.levels], indexing="ij")
        data = {
            var: np.asarray(lv, dtype=object)[grid.ravel()]
            for var, lv, grid in zip(self.variables, self.levels, grids)
        }
        data[count_column] = self.counts.ravel()
        import pandas as pd

        return pd.DataFrame(data)

    def write_csv(self, path: str | Path, count_column: str = "count") -> None:
        """Long format as CSV, without pandas (the release path writes its bundle this way).

        Parameters
        ----------
        path : str or Path
            The CSV file to write (overwritten).
        count_column : str, default "count"
            Name of the column of counts.
        """
        write_long_csv(path, self.variables, self.levels, tuple(range(self.k)), self.counts, count_column)

    def __repr__(self) -> str:
        label = self.name or "table"
        return f"<ContingencyTable {label}: {' x '.join(map(str, self.shape))}, n={self.n}, zero cells={self.zero_cells}>"


# A released margin (or any margin the release path counts) is held as cells: past this it is refused in one line
# before anything is charged (the table itself may be far larger when it is held as records).
MAX_MARGIN_CELLS = 2**26


class TableView:
    """What a table held otherwise than as cells (its records, or its file) shares with one held as cells: the
    variables' names, letters and levels, the shape and the number of cells, and a margin as a ContingencyTable
    (through the subclass's `margin_counts`)."""

    k = ContingencyTable.k
    letters = ContingencyTable.letters
    is_binary = ContingencyTable.is_binary
    axis = ContingencyTable.axis
    axes = ContingencyTable.axes
    with_counts = ContingencyTable.with_counts

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(lv) for lv in self.levels)

    @property
    def cells(self) -> int:
        return int(np.prod(self.shape, dtype=object))

    @property
    def held_as_cells(self) -> bool:
        return False

    def margin(self, variables) -> ContingencyTable:
        """The marginal table over the given variables (names or letters), counted when first asked.

        Parameters
        ----------
        variables : str or iterable of str
            A variable's name, or names or letters of several (a string such as ``"AC"`` names A and C).

        Returns
        -------
        ContingencyTable
            The margin (unnamed), its variables in the table's order.

        Raises
        ------
        TabreleaseError
            If a variable is unknown, or the margin has more than `MAX_MARGIN_CELLS` cells.
        """
        tokens = [variables] if isinstance(variables, str) and variables in self.variables else variables
        axes = self.axes(tokens)
        return ContingencyTable(tuple(self.variables[a] for a in axes), tuple(self.levels[a] for a in axes),
                                self.margin_counts(axes), None)


@dataclass(frozen=True, eq=False)
class MicrodataTable(TableView):
    """A table held as its records, one row of level codes per person, for tables with more cells than memory
    holds (20 variables of 10 levels: 10^20 cells). Each margin is counted from the records when asked (a
    bincount over the margin's columns), never the cross-product of all the variables; `counts` (every cell)
    exists only while the cells fit in memory.

    With `weights`, each row stands for that many people: a long table of distinct records with a count column,
    aggregated elsewhere (a row of weight 0 is a cell nobody has). Without, each row is one person.
    """

    variables: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    codes: np.ndarray  # records x variables, level positions
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    weights: np.ndarray | None = None  # people per row (int64 >= 0); None: one each
    _margins: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        codes = np.asarray(self.codes)
        if codes.ndim != 2 or codes.shape[1] != len(self.variables) or len(self.levels) != len(self.variables):
            raise TabreleaseError("records must have one code column per variable")
        if len(set(self.variables)) != len(self.variables):
            raise TabreleaseError(f"duplicate variable names: {list(self.variables)}")
        check_one_encoding(self.variables, self.levels)
        for variable, lv in zip(self.variables, self.levels):
            if len(lv) < 2:
                raise too_few_levels(variable, lv)
        if codes.shape[0] == 0:
            raise TabreleaseError("the microdata have no rows")
        if self.weights is not None:
            weights = np.asarray(self.weights)
            # Checked before the conversion to int64 (an unsigned weight past 2^63 would wrap to a negative one).
            if weights.shape != (codes.shape[0],) or not np.issubdtype(weights.dtype, np.integer) or (
                    weights.size and (int(weights.min()) < 0 or int(weights.max()) > np.iinfo(np.int64).max)):
                raise TabreleaseError("record weights are one non-negative whole number per row")
            weights = weights.astype(np.int64)
            # Margins are counted by a float bincount over the weights: exact while the total stays below 2^53.
            if int(weights.sum(dtype=object)) >= 2**53:
                raise TabreleaseError("the table's total is 2^53 or more; counts that large are not held exactly")
            weights.flags.writeable = False
            object.__setattr__(self, "weights", weights)
        widest = max(len(lv) for lv in self.levels)
        dtype = np.uint8 if widest <= 2**8 else np.uint16 if widest <= 2**16 else np.uint32
        if codes.min() < 0 or any(int(codes[:, j].max()) >= len(lv) for j, lv in enumerate(self.levels)):
            raise TabreleaseError("a record has a level code outside its variable's levels")
        # Column-major: a margin reads a few whole columns, each contiguous.
        frozen = np.asfortranarray(codes.astype(dtype))
        frozen.flags.writeable = False
        object.__setattr__(self, "codes", frozen)
        object.__setattr__(self, "variables", tuple(str(v) for v in self.variables))
        object.__setattr__(self, "levels", tuple(tuple(str(x) for x in lv) for lv in self.levels))

    @property
    def n(self) -> int:
        return int(self.codes.shape[0]) if self.weights is None else int(self.weights.sum())

    def _bincount(self, keys: np.ndarray, cells: int) -> np.ndarray:
        """Records (or their weights) counted by key, as int64."""
        if self.weights is None:
            return np.bincount(keys, minlength=cells).astype(np.int64, copy=False)
        return np.rint(np.bincount(keys, weights=self.weights, minlength=cells)).astype(np.int64)

    @property
    def zero_cells(self) -> int | None:
        """Cells nobody has: computable from the distinct records, whatever the size."""
        return self.cells - self.distinct_records()[0].shape[0]

    def margin_counts(self, axes: Sequence[int]) -> np.ndarray:
        """The count array of the margin over `axes`, counted from the records once and then kept.

        Parameters
        ----------
        axes : sequence of int
            Axis numbers of the margin (sorted here); empty gives the total as a 0-d array.

        Returns
        -------
        numpy.ndarray
            The margin's counts (int64, read-only), one axis per axis asked for, in sorted order.

        Raises
        ------
        TabreleaseError
            If the margin has more than `MAX_MARGIN_CELLS` cells.
        """
        axes = tuple(sorted(int(a) for a in axes))
        if axes not in self._margins:
            shape = tuple(self.shape[a] for a in axes)
            cells = int(np.prod(shape, dtype=object))
            if cells > MAX_MARGIN_CELLS:
                raise TabreleaseError(f"the margin over {', '.join(self.variables[a] for a in axes)} has {cells:.3g} "
                                      f"cells, more than the {MAX_MARGIN_CELLS:,} a margin may have")
            if not axes:
                counts = np.array(self.n, dtype=np.int64)
            else:
                counts = self._bincount(_mixed_radix(self.codes, axes, shape), cells).reshape(shape)
            counts.flags.writeable = False
            self._margins[axes] = counts
        return self._margins[axes]

    def distinct_records(self) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct rows of codes, how many people each): the table's non-zero cells, at any size.

        Returns
        -------
        tuple of numpy.ndarray
            The distinct rows of level codes (distinct x variables, in lexicographic order) and the number of people
            in each (int64, all positive: a row of weight 0 is no one).
        """
        if "distinct" not in self._margins:
            # Each record packed into as few 63-bit keys as its levels need, then one lexicographic sort.
            keys, group = [], []
            for a in range(self.k):
                if group and int(np.prod([self.shape[b] for b in group + [a]], dtype=object)) >= 2**63:
                    keys.append(_mixed_radix(self.codes, group, [self.shape[b] for b in group]))
                    group = []
                group.append(a)
            keys.append(_mixed_radix(self.codes, group, [self.shape[b] for b in group]))
            order = np.lexsort(keys[::-1])
            ordered = [key[order] for key in keys]
            starts = np.flatnonzero(np.r_[True, np.any([np.diff(key) != 0 for key in ordered], axis=0)])
            if self.weights is None:
                counts = np.diff(np.r_[starts, self.codes.shape[0]]).astype(np.int64)
            else:
                counts = np.add.reduceat(self.weights[order], starts).astype(np.int64)
            kept = counts > 0
            self._margins["distinct"] = (np.asarray(self.codes[order[starts[kept]]]), counts[kept])
        return self._margins["distinct"]

    @property
    def counts(self) -> np.ndarray:
        """Every cell, where they fit in memory (a paper mechanism or a cell-by-cell fit needs them)."""
        if self.cells > MAX_TABLE_CELLS:
            raise TabreleaseError(f"this needs every cell of the table, and it has {self.cells:.3g} cells (held as "
                                  f"records; cells are held up to {MAX_TABLE_CELLS:,}): use the default (planned) "
                                  "mechanism, which works from margins")
        if "cells" not in self._margins:
            flat = np.ravel_multi_index(tuple(self.codes[:, a].astype(np.int64) for a in range(self.k)), self.shape)
            cells = self._bincount(flat, self.cells).reshape(self.shape)
            cells.flags.writeable = False
            self._margins["cells"] = cells
        return self._margins["cells"]

    def to_cells(self) -> ContingencyTable:
        """The same table held as cells (where they fit).

        Returns
        -------
        ContingencyTable
            The table with every cell counted.

        Raises
        ------
        TabreleaseError
            If the table has more than `MAX_TABLE_CELLS` cells.
        """
        return ContingencyTable(self.variables, self.levels, self.counts, self.name, self.metadata)

    def __repr__(self) -> str:
        label = self.name or "table"
        return f"<MicrodataTable {label}: {' x '.join(map(str, self.shape))}, n={self.n}, held as records>"


def _mixed_radix(codes: np.ndarray, axes, sizes) -> np.ndarray:
    """Each record's position in the margin over `axes` (first axis slowest), in the narrowest integer that holds
    it: arithmetic on small integers is what makes a margin of a million records take milliseconds."""
    cells = int(np.prod([int(x) for x in sizes], dtype=object))
    dtype = next(t for t in (np.uint16, np.uint32, np.int64) if cells <= np.iinfo(t).max)
    flat = np.zeros(codes.shape[0], dtype=dtype)
    for a, size in zip(axes, sizes):
        flat *= dtype(size)
        flat += codes[:, a]
    return flat


def margin_of(data, axes: Sequence[int]) -> np.ndarray:
    """The margin over `axes` of a count array, or of a table (held as cells or as records).

    Parameters
    ----------
    data : numpy.ndarray or ContingencyTable or MicrodataTable
        A count array, or a table.
    axes : sequence of int
        Sorted axis numbers of the margin.

    Returns
    -------
    numpy.ndarray
        The margin's counts, one axis per entry of `axes`.
    """
    if isinstance(data, np.ndarray):
        return margin_counts(data, tuple(axes))
    return data.margin_counts(tuple(axes))


def total_of(data) -> int:
    """n of a count array or of a table, exactly.

    Parameters
    ----------
    data : numpy.ndarray or ContingencyTable or MicrodataTable
        A count array, or a table.

    Returns
    -------
    int
        The total count (a Python int: no overflow).
    """
    if isinstance(data, np.ndarray):
        return int(np.sum(data, dtype=object))
    return int(data.n)


def margin_counts(counts: np.ndarray, axes: Sequence[int], batch_ndim: int = 0) -> np.ndarray:
    """Sum an array of tables over every table axis not in `axes` (leading batch axes kept).

    Parameters
    ----------
    counts : numpy.ndarray
        Tables of counts, `batch_ndim` leading batch axes then one axis per variable.
    axes : sequence of int
        Table axes to keep (numbered from 0 after the batch axes).
    batch_ndim : int, default 0
        Number of leading batch axes.

    Returns
    -------
    numpy.ndarray
        The batch axes, then the kept axes in increasing order; `counts` itself when nothing is summed.
    """
    k = counts.ndim - batch_ndim
    drop = tuple(batch_ndim + a for a in range(k) if a not in set(axes))
    return counts.sum(axis=drop) if drop else counts


def long_rows(levels, axes, values: np.ndarray):
    """One row per cell of the array over `axes` (first axis slowest): the level labels, then the value (an int, or
    a float rounded to 6 decimals). What a margin's CSV file and its workbook sheet both hold.

    Parameters
    ----------
    levels : sequence of sequence of str
        Every variable's level labels.
    axes : sequence of int
        The axes of `values`, in order.
    values : numpy.ndarray
        One axis per entry of `axes`.

    Yields
    ------
    list
        The level labels of one cell, then its value.
    """
    values = np.asarray(values)
    integer = np.issubdtype(values.dtype, np.integer)
    labels = [levels[a] for a in axes]
    for index in np.ndindex(*values.shape):
        v = values[index]
        yield [lv[i] for lv, i in zip(labels, index)] + [int(v) if integer else round(float(v), 6)]


def write_long_csv(path, variables, levels, axes, values: np.ndarray, count_column: str = "count", *,
                   sep: str = ",", bom: bool = False, digits: int | None = 6) -> None:
    """One row per cell of the array over `axes` (first axis slowest): the level labels, then the value. Labels and
    names that a spreadsheet would take for a formula are written behind a single quote (`csv_field_for_label`).

    Parameters
    ----------
    path : str or Path
        The CSV file to write (overwritten, UTF-8).
    variables : sequence of str
        Every variable's name.
    levels : sequence of sequence of str
        Every variable's level labels.
    axes : sequence of int
        The axes of `values`, in order.
    values : numpy.ndarray
        One axis per entry of `axes`; integers are written as such, floats rounded to `digits` decimals.
    count_column : str, default "count"
        Name of the value column.
    sep : str, default ","
        The field separator: one of ``, ; | `` or a tab (the separators a reader detects from the header).
    bom : bool, default False
        Start the file with a UTF-8 byte-order mark (Excel then reads it as UTF-8, not in its code page).
    digits : int or None, default 6
        Decimals a float is rounded to; None writes it whole (the shortest text that reads back as the same float).
    """
    if sep not in CSV_SEPARATORS:
        raise ValueError(f"a CSV file is written with one of the separators {CSV_SEPARATORS!r}, not {sep!r}")
    values = np.asarray(values)
    integer = np.issubdtype(values.dtype, np.integer)
    labels = [[csv_field_for_label(x) for x in levels[a]] for a in axes]
    header = [csv_field_for_label(variables[a]) for a in axes] + [csv_field_for_label(count_column)]
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as fh:
        # A reader finds the separator by counting candidates in the header outside quotes: a name holding one
        # (a label "a;b" in a comma file) is quoted there so it cannot outvote the real separator.
        quote = csv.QUOTE_ALL if any(c in name for name in header for c in CSV_SEPARATORS) else csv.QUOTE_MINIMAL
        csv.writer(fh, delimiter=sep, lineterminator="\n", quoting=quote).writerow(header)
        out = csv.writer(fh, delimiter=sep, lineterminator="\n")
        for index in np.ndindex(*values.shape):
            v = values[index]
            value = int(v) if integer else repr(float(v) if digits is None else round(float(v), digits))
            out.writerow([lv[i] for lv, i in zip(labels, index)] + [value])


# A table is held as an array of cells (8 bytes each): past this it is refused before any work, in one line.
MAX_TABLE_CELLS = 2**27


def check_cells(variables: Sequence[str], shape: Sequence[int]) -> None:
    """Refuse, in one line, a table with more cells than are held in memory (`MAX_TABLE_CELLS`).

    Parameters
    ----------
    variables : sequence of str
        The table's variables (named in the message).
    shape : sequence of int
        The number of levels of each.

    Raises
    ------
    TabreleaseError
        If the table has more than `MAX_TABLE_CELLS` cells.
    """
    cells = int(np.prod([int(k) for k in shape], dtype=object))
    if cells > MAX_TABLE_CELLS:
        levels = " x ".join(str(k) for k in shape)
        raise TabreleaseError(f"the table of {len(variables)} variables ({levels}) has {cells:.3g} cells; tables are held "
                              f"as cells up to {MAX_TABLE_CELLS:,} (2^27, 1 GiB) for now: release fewer variables")


def people_names(table) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """(each variable's name for people, each level's label for people): a built-in table's labels from its metadata
    ("wife_active", "no"), any other table's own names and levels.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable
        The table; labels come from ``metadata["variables"]`` where present.

    Returns
    -------
    tuple
        A tuple of the variables' names for people, and a tuple (one per variable) of tuples of level labels.
    """
    described = {v.get("name"): v for v in (table.metadata or {}).get("variables", []) if isinstance(v, dict)}
    names, levels = [], []
    for variable, lv in zip(table.variables, table.levels):
        meta = described.get(variable, {})
        names.append(str(meta.get("label") or variable))
        labels = meta.get("level_labels") or {}
        levels.append(tuple(str(labels.get(level, level)) for level in lv))
    return tuple(names), tuple(levels)


def margin_title(names, margin) -> str:
    """A margin as people read it: its variables' names in brackets, ``[Région de résidence, Sexe]``.

    Letters (``[AB]``) depend on which variables a table was read with, so that one letter names different variables
    in two releases of one dataset; a margin shown to a person is named by its variables.

    Parameters
    ----------
    names : sequence of str
        Each variable's name for people, in axis order (`people_names`).
    margin : tuple of int
        The margin's axes.

    Returns
    -------
    str
        The names, in the margin's order, joined by ", " in brackets.
    """
    return "[" + ", ".join(str(names[a]) for a in margin) + "]"


def margin_titles(table, margins) -> list[str]:
    """Each margin of `table` as people read it (`margin_title` with the table's names for people).

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable
        Its variables' names for people are read (metadata labels where present).
    margins : iterable of tuple of int
        The margins' axes.

    Returns
    -------
    list of str
        One title per margin, in order.
    """
    names, _ = people_names(table)
    return [margin_title(names, g) for g in margins]


def near_miss(token: str, table) -> str:
    """For a message about an unknown variable: the one name of the table (its own, or the name people read) that
    `token` most nearly spells, ignoring case, as ``" (did you mean 'year'?)"``; empty where none is near.

    Parameters
    ----------
    token : str
        What the user typed.
    table : ContingencyTable or MicrodataTable

    Returns
    -------
    str
    """
    import difflib

    if names_not_shown(table):
        return ""
    names = list(dict.fromkeys([*people_names(table)[0], *table.variables]))
    folded = {name.casefold(): name for name in names}
    close = difflib.get_close_matches(token.casefold(), list(folded), n=1, cutoff=0.75)
    return f" (did you mean {folded[close[0]]!r}?)" if close else ""


def names_not_shown(table) -> bool:
    """Whether a table's variable names are not for a message: read from a file's first row that is not known to
    be a header (`_text.undeclared_metadata`: no name of it given by the user), they may be a record's values.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable

    Returns
    -------
    bool
    """
    return (getattr(table, "metadata", None) or {}).get("undeclared_named") is False


def describe_variables(table: ContingencyTable) -> str:
    """The table's variables for a message: their names, each with its letter where the two differ.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable
        The table.

    Returns
    -------
    str
        Such as ``"variables sex (A), age (B)"``; by the names people read where labels give them (a built-in
        table's variables are letters: ``"variables smoking (A), mental (B)"``, as a margin's unknown word is
        answered).
    """
    if names_not_shown(table):
        return (f"{table.k} variables, {', '.join(table.letters)} by letter (their names not shown: the first row "
                "is not known to be a header, and a file without a header row would have a record quoted)")
    shown = people_names(table)[0]
    if tuple(shown) == tuple(table.letters):
        return "variables " + ", ".join(shown)
    return "variables " + ", ".join(f"{v} ({letter})" for v, letter in zip(shown, table.letters))
