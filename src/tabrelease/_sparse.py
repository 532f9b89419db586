"""Sparse matrices for the designs, fits and roundings: the few operations tabrelease needs, over numpy alone.

Why not scipy.sparse: with scipy 1.17, importing any of scipy imports its array-API layer, which imports every
lazily loaded part of numpy (f2py, testing, the masked arrays, ...): that took more than twice as long as importing
numpy, in a command-line release that has to start within a few times numpy's time. The matrices here are margin
designs, coefficient operators and the constraint matrices of Clarabel and HiGHS; what they need is construction,
stacking, products and the compressed-column arrays the solvers read.

A `SparseMatrix` holds its entries sorted by row then column, duplicates summed (the compressed-row order), and
works out the compressed-column order when it is asked for (`tocsc`, or a `format="csc"` matrix's `indptr`,
`indices` and `data`, which Clarabel and HiGHS read). Matrices are not changed in place: every operation returns a
new one. Integer matrices stay integer: products with integer vectors are exact in int64 (the least-squares fit's
refinement relies on it).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np


class SparseMatrix:
    """A sparse matrix: `shape`, and its entries (`row`, `col`, `values`) in row-major order, no two at one place.

    Parameters
    ----------
    shape : tuple of int
        (rows, columns).
    row, col : numpy.ndarray
        Each entry's row and column (int64), sorted by row, then column, without repeats.
    values : numpy.ndarray
        Each entry's value.
    format : {"csr", "csc"}
        Which compressed arrays `indptr`, `indices` and `data` give (a solver reads "csc").

    Build one with `from_dense`, `from_entries`, `identity`, `zeros`, `stack` or `kron`, which sort and
    sum; the constructor trusts its arguments.
    """

    __array_ufunc__ = None  # numpy defers its operators to ours (dense @ sparse calls __rmatmul__)

    def __init__(self, shape, row: np.ndarray, col: np.ndarray, values: np.ndarray, format: str = "csr"):
        self.shape = (int(shape[0]), int(shape[1]))
        self.row, self.col, self.values = row, col, values
        self.format = format

    # --- what the solvers and callers read -----------------------------------------------------------------------
    @property
    def nnz(self) -> int:
        return int(self.values.size)

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return 2

    has_canonical_format = True  # sorted within each row (column), no duplicates: as Clarabel checks
    has_sorted_indices = True

    @cached_property
    def _by_column(self) -> np.ndarray:
        """The permutation of the entries into column-major order (stable: rows stay sorted within a column)."""
        return np.argsort(self.col, kind="stable")

    @cached_property
    def _row_starts(self) -> np.ndarray:
        return _pointers(self.row, self.shape[0])

    @property
    def indptr(self) -> np.ndarray:
        if self.format == "csc":
            return _pointers(self.col[self._by_column], self.shape[1])
        return self._row_starts

    @property
    def indices(self) -> np.ndarray:
        return self.row[self._by_column] if self.format == "csc" else self.col

    @property
    def data(self) -> np.ndarray:
        return self.values[self._by_column] if self.format == "csc" else self.values

    def tocsr(self) -> SparseMatrix:
        """The same matrix, read in compressed-row order.

        Returns
        -------
        SparseMatrix
            This one where it is read so already.
        """
        return self if self.format == "csr" else SparseMatrix(self.shape, self.row, self.col, self.values, "csr")

    def tocsc(self) -> SparseMatrix:
        """The same matrix, read in compressed-column order (as Clarabel and HiGHS read it).

        Returns
        -------
        SparseMatrix
            This one where it is read so already.
        """
        return self if self.format == "csc" else SparseMatrix(self.shape, self.row, self.col, self.values, "csc")

    def toarray(self) -> np.ndarray:
        """The dense matrix.

        Returns
        -------
        numpy.ndarray
            Of `shape`, zeros where there is no entry.
        """
        dense = np.zeros(self.shape, self.values.dtype)
        dense[self.row, self.col] = self.values
        return dense

    def astype(self, dtype) -> SparseMatrix:
        """The matrix with its values converted.

        Parameters
        ----------
        dtype : numpy dtype
            The values' new type.

        Returns
        -------
        SparseMatrix
        """
        return SparseMatrix(self.shape, self.row, self.col, self.values.astype(dtype), self.format)

    @property
    def T(self) -> SparseMatrix:
        return from_entries(self.values, self.col, self.row, (self.shape[1], self.shape[0]),
                            format="csc" if self.format == "csr" else "csr")

    def diagonal(self) -> np.ndarray:
        """The main diagonal.

        Returns
        -------
        numpy.ndarray
            min(shape) values, zeros where there is no entry.
        """
        out = np.zeros(min(self.shape), self.values.dtype)
        on = self.row == self.col
        out[self.row[on]] = self.values[on]
        return out

    # --- arithmetic ----------------------------------------------------------------------------------------------
    def __neg__(self) -> SparseMatrix:
        return SparseMatrix(self.shape, self.row, self.col, -self.values, self.format)

    def __abs__(self) -> SparseMatrix:
        return SparseMatrix(self.shape, self.row, self.col, np.abs(self.values), self.format)

    def __mul__(self, scalar) -> SparseMatrix:
        if not np.isscalar(scalar):
            raise TypeError("a sparse matrix is multiplied by a scalar here; use `multiply` for entrywise products")
        return SparseMatrix(self.shape, self.row, self.col, self.values * scalar, self.format)

    __rmul__ = __mul__

    def multiply(self, other) -> SparseMatrix:
        """The entrywise product with a dense array that broadcasts to this shape (a column or a row of weights).

        Parameters
        ----------
        other : array_like
            Broadcastable to `shape`.

        Returns
        -------
        SparseMatrix
            The entries times the array's values at their places.
        """
        other = np.broadcast_to(np.asarray(other), self.shape)
        return SparseMatrix(self.shape, self.row, self.col, self.values * other[self.row, self.col], self.format)

    def sum(self, axis=None):
        """The sum of the entries, of each row or of each column.

        Parameters
        ----------
        axis : {None, 0, 1}
            None: all entries; 1: each row's; 0: each column's.

        Returns
        -------
        scalar or numpy.ndarray
            Exact for integer values.
        """
        if axis is None:
            return self.values.sum()
        if axis in (1, -1):
            return _row_sums(self.values, self.row, self._row_starts, self.shape[0])
        if axis == 0:
            return self.T.sum(axis=1)
        raise ValueError(f"axis {axis} of a matrix")

    def __matmul__(self, other):
        if isinstance(other, SparseMatrix):
            return _sparse_product(self, other)
        other = np.asarray(other)
        if other.ndim not in (1, 2) or other.shape[0] != self.shape[1]:
            raise ValueError(f"a {self.shape} matrix times an array of shape {other.shape}")
        products = self.values * other[self.col] if other.ndim == 1 else self.values[:, None] * other[self.col]
        return _row_sums(products, self.row, self._row_starts, self.shape[0])

    def __rmatmul__(self, other):
        other = np.asarray(other)
        if other.ndim == 1:
            return self.T @ other
        return (self.T @ other.T).T

    # --- selection -----------------------------------------------------------------------------------------------
    def __getitem__(self, key):
        if isinstance(key, tuple):
            rows, cols = key
            if not (isinstance(rows, slice) or isinstance(cols, slice)):
                # scipy would pair the two (elements, not a block): ask for rows, then columns.
                raise IndexError("index a sparse matrix by rows and columns one at a time: [rows][:, columns]")
            matrix = self if _everything(rows) else self._take_rows(rows)
            if _everything(cols):
                return matrix
            if isinstance(cols, slice):
                cols = np.arange(*cols.indices(self.shape[1]))
            taken = matrix.T._take_rows(cols).T
            return taken.tocsc() if self.format == "csc" else taken.tocsr()
        return self._take_rows(key)

    def _take_rows(self, rows) -> SparseMatrix:
        """The rows given by a slice, an index array or a boolean mask, in that order (repeats allowed)."""
        if isinstance(rows, slice):
            rows = np.arange(*rows.indices(self.shape[0]))
        rows = np.asarray(rows)
        if rows.dtype == bool:
            if rows.shape != (self.shape[0],):
                raise IndexError("a boolean mask of rows must have one entry per row")
            rows = np.flatnonzero(rows)
        rows = rows.astype(np.int64).ravel()
        if rows.size and (rows.min() < -self.shape[0] or rows.max() >= self.shape[0]):
            raise IndexError("row index out of range")
        rows = np.where(rows < 0, rows + self.shape[0], rows)
        starts, ends = self._row_starts[rows], self._row_starts[rows + 1]
        taken = _ranges(starts, ends)
        new_row = np.repeat(np.arange(rows.size, dtype=np.int64), ends - starts)
        return SparseMatrix((rows.size, self.shape[1]), new_row, self.col[taken], self.values[taken], self.format)

    def __repr__(self) -> str:
        return f"<SparseMatrix {self.shape[0]}x{self.shape[1]}, {self.nnz} entries, {self.values.dtype}, {self.format}>"


# --- construction ----------------------------------------------------------------------------------------------
def from_entries(values, row, col, shape, format: str = "csr") -> SparseMatrix:
    """A matrix from its entries in any order; entries at one place are summed (as scipy's COO constructor does).

    Parameters
    ----------
    values : array_like
        The entries' values.
    row, col : array_like of int
        Their rows and columns.
    shape : tuple of int
        (rows, columns).
    format : {"csr", "csc"}, default "csr"

    Returns
    -------
    SparseMatrix
    """
    values = np.asarray(values)
    if values.dtype == bool or values.dtype.kind not in "iuf":
        values = values.astype(float)
    row = np.asarray(row, np.int64).ravel()
    col = np.asarray(col, np.int64).ravel()
    values = np.broadcast_to(values, row.shape).ravel() if values.ndim == 0 else values.ravel()
    m, n = int(shape[0]), int(shape[1])
    if not (row.shape == col.shape == values.shape):
        raise ValueError("a sparse matrix needs one row and one column per value")
    if row.size and (row.min() < 0 or row.max() >= m or col.min() < 0 or col.max() >= n):
        raise ValueError(f"an entry lies outside a {m}x{n} matrix")
    key = row * n + col
    if key.size > 1 and not np.all(key[1:] > key[:-1]):
        order = np.argsort(key, kind="stable")
        key, values = key[order], values[order]
        first = np.concatenate([[True], key[1:] != key[:-1]])
        if not first.all():
            values = _group_sums(values, first)
            key = key[first]
    return SparseMatrix((m, n), key // n if n else key, key % n if n else key, values, format)


def _group_sums(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """The sum of each run of values (`first`: where each run starts), each added one after another in the given
    order as scipy adds duplicates (floats), exactly for integers."""
    if values.dtype.kind == "f":
        return np.bincount(np.cumsum(first) - 1, weights=values).astype(values.dtype, copy=False)
    return np.add.reduceat(values, np.flatnonzero(first))


def from_dense(array, format: str = "csr") -> SparseMatrix:
    """The nonzero entries of a dense array.

    Parameters
    ----------
    array : array_like
        2-D (a 1-D array is one row).
    format : {"csr", "csc"}, default "csr"

    Returns
    -------
    SparseMatrix
    """
    array = np.asarray(array)
    if array.ndim == 1:
        array = array[None, :]
    if array.dtype == bool or array.dtype.kind not in "iuf":
        array = array.astype(float)
    row, col = np.nonzero(array)
    return SparseMatrix(array.shape, row.astype(np.int64), col.astype(np.int64), array[row, col], format)


def zeros(shape, format: str = "csr", dtype=float) -> SparseMatrix:
    """A matrix with no entries.

    Parameters
    ----------
    shape : tuple of int
        (rows, columns).
    format : {"csr", "csc"}, default "csr"
    dtype : numpy dtype, default float

    Returns
    -------
    SparseMatrix
    """
    empty = np.zeros(0, np.int64)
    return SparseMatrix(shape, empty, empty, np.zeros(0, dtype), format)


def identity(n: int, format: str = "csr", dtype=float) -> SparseMatrix:
    """The identity.

    Parameters
    ----------
    n : int
        Its rows (and columns).
    format : {"csr", "csc"}, default "csr"
    dtype : numpy dtype, default float

    Returns
    -------
    SparseMatrix
    """
    index = np.arange(int(n), dtype=np.int64)
    return SparseMatrix((n, n), index, index, np.ones(int(n), dtype), format)


def stack(along: int, blocks, format: str = "csr") -> SparseMatrix:
    """The blocks one above the other (`along` 0, as scipy's vstack) or side by side (`along` 1, as its hstack).

    Parameters
    ----------
    along : {0, 1}
        0: rows after rows (equal numbers of columns); 1: columns after columns (equal numbers of rows).
    blocks : sequence of SparseMatrix
    format : {"csr", "csc"}, default "csr"

    Returns
    -------
    SparseMatrix
    """
    blocks, offsets, across = _stacking(blocks, along)
    if along == 0:
        # Row-major blocks one after another stay row-major: no sort needed.
        return SparseMatrix((int(offsets[-1]), across), np.concatenate([b.row + o for b, o in zip(blocks, offsets)]),
                            np.concatenate([b.col for b in blocks]), np.concatenate([b.values for b in blocks]),
                            format)
    return from_entries(np.concatenate([b.values for b in blocks]), np.concatenate([b.row for b in blocks]),
                        np.concatenate([b.col + o for b, o in zip(blocks, offsets)]), (across, int(offsets[-1])),
                        format)


def _stacking(blocks, along: int):
    """(the blocks, where each starts along the stacking axis, the other axis's common length); a mismatch refused."""
    blocks = list(blocks)
    if not blocks:
        raise ValueError("nothing to stack")
    across = {b.shape[1 - along] for b in blocks}
    if len(across) != 1:
        raise ValueError(f"blocks stacked {'side by side' if along else 'vertically'} have {sorted(across)} "
                         f"{'rows' if along else 'columns'}")
    return blocks, np.cumsum([0] + [b.shape[along] for b in blocks]), across.pop()


def kron(a: SparseMatrix, b: SparseMatrix, format: str = "csr") -> SparseMatrix:
    """The Kronecker product.

    Parameters
    ----------
    a, b : SparseMatrix
    format : {"csr", "csc"}, default "csr"

    Returns
    -------
    SparseMatrix
        Block (i, j) is a[i, j] * b.
    """
    shape = (a.shape[0] * b.shape[0], a.shape[1] * b.shape[1])
    if a.nnz == 0 or b.nnz == 0:
        return zeros(shape, format, np.result_type(a.values, b.values))
    row = a.row[:, None] * b.shape[0] + b.row
    col = a.col[:, None] * b.shape[1] + b.col
    return from_entries((a.values[:, None] * b.values).ravel(), row.ravel(), col.ravel(), shape, format)


# --- internals -------------------------------------------------------------------------------------------------
def _everything(key) -> bool:
    return isinstance(key, slice) and key == slice(None)


def _pointers(sorted_index: np.ndarray, n: int) -> np.ndarray:
    """Compressed pointers of a sorted index: where each of 0..n-1 starts, and the end."""
    return np.searchsorted(sorted_index, np.arange(n + 1, dtype=np.int64)).astype(np.int64)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of range(start, end) for each pair, without a Python loop."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    nonempty = lengths > 0
    starts, lengths = starts[nonempty], lengths[nonempty]
    steps = np.ones(total, np.int64)
    first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    steps[first] = starts - np.concatenate([[0], starts[:-1] + lengths[:-1] - 1])
    return np.cumsum(steps)


def _row_sums(products: np.ndarray, row: np.ndarray, pointers: np.ndarray, n: int) -> np.ndarray:
    """Each row's sum of its entries' products (in row-major order; `pointers` are the rows' starts), 0 where empty.

    Floats are added one after another in column order, as scipy's compressed products add them: an add.reduceat
    adds long rows pairwise, and the last bit it changes can turn a rounding's near-tie. Integers are summed by an
    add.reduceat, exactly (a bincount sums in floats)."""
    if products.dtype.kind == "f":
        if products.ndim == 1:
            # (astype: with no entries, bincount gives integers whatever the weights.)
            return np.bincount(row, weights=products, minlength=n).astype(products.dtype, copy=False)
        out = np.zeros((n,) + products.shape[1:], products.dtype)
        np.add.at(out, row, products)
        return out
    out = np.zeros((n,) + products.shape[1:], products.dtype)
    if products.shape[0] == 0:
        return out
    nonempty = np.flatnonzero(pointers[1:] > pointers[:-1])
    out[nonempty] = np.add.reduceat(products, pointers[nonempty], axis=0)
    return out


def _sparse_product(a: SparseMatrix, b: SparseMatrix) -> SparseMatrix:
    """a @ b: each entry a[i, k] meets the entries of row k of b."""
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a {a.shape} matrix times a {b.shape} matrix")
    starts = b._row_starts[a.col]
    ends = b._row_starts[a.col + 1]
    taken = _ranges(starts, ends)
    counts = ends - starts
    product = from_entries(np.repeat(a.values, counts) * b.values[taken], np.repeat(a.row, counts), b.col[taken],
                           (a.shape[0], b.shape[1]), a.format)
    # scipy's product keeps no entry whose terms cancel to 0 (its constructors keep explicit zeros; this does not).
    kept = product.values != 0
    if kept.all():
        return product
    return SparseMatrix(product.shape, product.row[kept], product.col[kept], product.values[kept], product.format)
