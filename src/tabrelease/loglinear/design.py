"""The margin design of a hierarchical model: its sparse 0/1 matrix, ranks and decomposability.

The consistency LP and the refit share this one design matrix."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .. import _sparse as sp

from ..models import Margin
from ..tables import margin_counts
from .ipf import one_blas_thread


def margin_design(shape: Sequence[int], generators: Sequence[Margin]) -> sp.SparseMatrix:
    """Sparse 0/1 matrix mapping a flattened table to its stacked generator margins.

    Parameters
    ----------
    shape : sequence of int
        The table's shape.
    generators : sequence of tuple of int
        The model's generators, each a sorted tuple of axes.

    Returns
    -------
    tabrelease._sparse.SparseMatrix
        Shape (sum of the generators' margin cells, cells): row r of a generator's block has a 1 in each cell (C
        order) that adds to its margin cell r (C order); the blocks are stacked in the generators' order.
    """
    cells = int(np.prod(shape))
    coords = np.unravel_index(np.arange(cells), tuple(shape))
    blocks = []
    for g in generators:
        rows = np.ravel_multi_index(tuple(coords[j] for j in g), tuple(shape[j] for j in g))
        size = int(np.prod([shape[j] for j in g]))
        blocks.append(sp.from_entries(np.ones(cells), rows, np.arange(cells), (size, cells)))
    return sp.stack(0, blocks)


def _positive_margin_cells(support: np.ndarray, generators: Sequence[Margin]) -> np.ndarray:
    """Cells whose every generator margin is positive: the facial set can hold no other cell."""
    cells = np.ones(support.shape, bool)
    for g in generators:
        positive = margin_counts(support, g) > 0
        cells &= positive.reshape(tuple(support.shape[j] if j in g else 1 for j in range(support.ndim)))
    return cells


def _unpack(packed: bytes, cells: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(packed, np.uint8))[:cells].astype(bool)


def is_decomposable(generators: Sequence[Margin]) -> bool:
    """Whether a (reduced) generating class is decomposable: the GYO reduction of an acyclic hypergraph.

    Repeatedly remove a generator whose intersection with the union of the others lies inside
    one other generator (a leaf of a junction tree); decomposable iff one generator remains.

    Parameters
    ----------
    generators : sequence of tuple of int
        The model's generators, each a sorted tuple of axes.

    Returns
    -------
    bool
        True when the hypergraph of the generators is acyclic.
    """
    remaining = [frozenset(g) for g in generators]
    while len(remaining) > 1:
        for i, g in enumerate(remaining):
            others = remaining[:i] + remaining[i + 1 :]
            shared = g & frozenset().union(*others)
            if any(shared <= h for h in others):
                remaining = others
                break
        else:
            return False
    return True


def design_rank(shape: Sequence[int], generators: Sequence[Margin], cells: np.ndarray | None = None) -> int:
    """Rank of the margin design, restricted to a set of cells when given.

    Parameters
    ----------
    shape : sequence of int
        The table's shape.
    generators : sequence of tuple of int
        The model's generators, each a sorted tuple of axes.
    cells : numpy.ndarray of bool, optional
        A mask of the table's shape: only these cells' columns of the design count.

    Returns
    -------
    int
        The rank (0 when no cell is selected); cached by shape, generators and mask.
    """
    packed = None if cells is None else np.packbits(np.asarray(cells, bool).ravel()).tobytes()
    return _design_rank(tuple(int(k) for k in shape), tuple(tuple(g) for g in generators), packed)


@lru_cache(maxsize=1024)
def _design_rank(shape: tuple[int, ...], generators: tuple[Margin, ...], packed: bytes | None) -> int:
    A = margin_design(shape, generators)
    if packed is not None:
        A = A[:, np.flatnonzero(_unpack(packed, A.shape[1]))]
    if A.shape[1] == 0:
        return 0
    with one_blas_thread():
        return int(np.linalg.matrix_rank(A.toarray()))


