"""Coefficients that a set of margins depends on: Fourier (binary tables) and Efron-Stein (any table).

For a set of margins A with downward closure B, the released statistics are one block of
coefficients per S in B:

* Fourier (Barak et al.): one number <f, chi^S> = 2^{-k/2} sum_x (-1)^{|x_S|} f(x).
* Efron-Stein with the uniform measure (Yang, Fienberg & Rinaldo, eq. (4)-(5)): the component
  f^S(x_S) = sum_{S' in S} (-1)^{|S minus S'|} f_{S'}(x_{S'}) / prod_{j not in S'} k_j, one number per x_S.

Both are computed from the margins (each block from the margin of a generator containing S)
by small Kronecker-product matrices, never from a 2^k x 2^k matrix. For binary tables
f^S(x_S) = <f, chi^S> chi^S(x) (the paper's Example 4).

Sensitivities are exact for the stated neighbour relation: "add-remove" (a record added or
removed) or "replace" (a record's value changed). The closed forms below are checked in the
tests against brute force over every possible record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from math import prod, sqrt

import numpy as np

from .errors import TabreleaseError
from .models import Margin, downward_closure, maximal_margins
from .tables import margin_counts

FOURIER = "fourier"
EFRON_STEIN = "efron-stein"
NEIGHBOURS = ("add-remove", "replace")
# Replace-one sensitivity is a maximum over the 2^k patterns of differing coordinates.
MAX_REPLACE_VARIABLES = 22


@dataclass(frozen=True, eq=False)
class CoefficientBasis:
    """The linear map from a table's generator margins to the coefficients of its closure."""

    kind: str
    shape: tuple[int, ...]
    generators: tuple[Margin, ...]
    closure: tuple[Margin, ...]
    parents: tuple[Margin, ...]
    analysis: tuple[np.ndarray, ...]  # per S: margin of its parent (flattened) -> block of S
    offsets: tuple[int, ...]

    @property
    def k(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of released coefficients (|B| for Fourier, sum over B of prod k_j for Efron-Stein)."""
        return self.offsets[-1]

    @property
    def integer_scale(self) -> float:
        """Multiplying coefficients by this gives integers for an integer table (2^{k/2} or prod k_j)."""
        return 2.0 ** (self.k / 2) if self.kind == FOURIER else float(prod(self.shape))

    def block(self, coefficients: np.ndarray, s: Margin) -> np.ndarray:
        """The block of the set `s` in a coefficient vector (or a stack of them).

        Parameters
        ----------
        coefficients : numpy.ndarray
            Coefficients in this basis's order, along the last axis (length `size`).
        s : Margin
            A set of the closure.

        Returns
        -------
        numpy.ndarray
            A view of the block's coefficients (last axis: 1 for Fourier, prod k_j over `s` for Efron-Stein).

        Raises
        ------
        ValueError
            If `s` is not in the closure.
        """
        i = self.closure.index(s)
        return coefficients[..., self.offsets[i] : self.offsets[i + 1]]

    @property
    def empty_set_index(self) -> int:
        return self.offsets[self.closure.index(())]


def _kron(factors: Sequence[np.ndarray]) -> np.ndarray:
    return reduce(np.kron, factors, np.ones((1, 1)))


def coefficient_basis(kind: str, shape: Sequence[int], margins: Sequence[Margin], *,
                      analysis: bool = True) -> CoefficientBasis:
    """Build the analysis/synthesis matrices for the closure of `margins` on a table of this shape (`analysis=False`:
    the closure, parents and block sizes only, for planning: the dense matrices of a large margin take gigabytes).

    Parameters
    ----------
    kind : {"fourier", "efron-stein"}
        The basis.
    shape : sequence of int
        The table's number of levels per variable (all 2 for Fourier).
    margins : sequence of Margin
        The margins to release; their maximal ones are the generators.
    analysis : bool, default True
        Whether to build the analysis matrices (False leaves `analysis` empty).

    Returns
    -------
    CoefficientBasis
        One block per set of the downward closure of the generators, each with its parent generator.

    Raises
    ------
    TabreleaseError
        If the basis is unknown, or the Fourier basis is asked for a table that is not all binary.
    """
    shape = tuple(int(s) for s in shape)
    k = len(shape)
    if kind == FOURIER and any(s != 2 for s in shape):
        raise TabreleaseError(
            f"the Fourier basis needs an all-binary table; this one has levels {list(shape)} "
            "(use the Efron-Stein mechanism, or binary encoding)"
        )
    if kind not in (FOURIER, EFRON_STEIN):
        raise TabreleaseError(f"unknown basis {kind!r}")
    generators, _ = maximal_margins(margins)
    closure = downward_closure(generators)
    parents, matrices, offsets = [], [], [0]
    for s in closure:
        parent = next(g for g in generators if set(s) <= set(g))
        if not analysis:
            rows = 1 if kind == FOURIER else prod(shape[j] for j in s)
            parents.append(parent)
            offsets.append(offsets[-1] + rows)
            continue
        factors = []
        for j in parent:
            kj = shape[j]
            if kind == FOURIER:
                factors.append(np.array([[1.0, -1.0]]) if j in s else np.ones((1, 2)))
            else:
                factors.append(np.eye(kj) - 1.0 / kj if j in s else np.ones((1, kj)))
        if kind == FOURIER:
            a = _kron(factors) * 2.0 ** (-k / 2)
        else:
            a = _kron(factors) / prod(shape[j] for j in range(k) if j not in s)
        parents.append(parent)
        matrices.append(a)
        offsets.append(offsets[-1] + a.shape[0])
    return CoefficientBasis(kind, shape, generators, closure, tuple(parents), tuple(matrices), tuple(offsets))


def coefficients(basis: CoefficientBasis, counts: np.ndarray, batch_ndim: int = 0) -> np.ndarray:
    """Coefficients of a table (or of a stack of tables along leading batch axes), from its generator margins:
    `counts` may be a count array or a table that gives margins (one held as records).

    Parameters
    ----------
    basis : CoefficientBasis
        A basis built with its analysis matrices.
    counts : numpy.ndarray or table
        Cell counts of shape ``batch + basis.shape``, or an object with a ``margin_counts(margin)`` method
        (then `batch_ndim` is not used).
    batch_ndim : int, default 0
        The number of leading batch axes of `counts`.

    Returns
    -------
    numpy.ndarray
        Float coefficients of shape ``batch + (basis.size,)``, block after block in closure order.
    """
    if not isinstance(counts, np.ndarray) and hasattr(counts, "margin_counts"):
        margins = {g: np.asarray(counts.margin_counts(g), float).reshape(-1) for g in basis.generators}
        return np.concatenate([margins[p] @ a.T for p, a in zip(basis.parents, basis.analysis)], axis=-1)
    counts = np.asarray(counts, float)
    batch = counts.shape[:batch_ndim]
    margins = {g: margin_counts(counts, g, batch_ndim).reshape(batch + (-1,)) for g in basis.generators}
    blocks = [margins[p] @ a.T for p, a in zip(basis.parents, basis.analysis)]
    return np.concatenate(blocks, axis=-1)


def integer_coefficients(basis: CoefficientBasis, counts: np.ndarray) -> np.ndarray:
    """coefficients * integer_scale, computed exactly in integer arithmetic: each is an integer combination of
    margin counts (Fourier: +-1; Efron-Stein: the tensor product of (k_j I - J) over S). int64 where that cannot
    overflow, Python integers otherwise.

    Parameters
    ----------
    basis : CoefficientBasis
        A basis built with its analysis matrices.
    counts : numpy.ndarray or table
        Integer cell counts of shape `basis.shape`, or a table that gives margins (one held as records).

    Returns
    -------
    numpy.ndarray
        1-d array of length `basis.size`: int64, or object (Python int) where int64 could overflow.
    """
    from .tables import margin_of, total_of

    if isinstance(counts, np.ndarray) or not hasattr(counts, "margin_counts"):
        counts = np.asarray(counts)
    total = total_of(counts)
    blocks = []
    for p, a in zip(basis.parents, basis.analysis):
        weights = np.rint(a * basis.integer_scale).astype(np.int64)  # small integers, exactly
        widest = int(np.abs(weights).sum(axis=1).max())
        if isinstance(counts, np.ndarray):
            margin = margin_counts(counts.astype(np.int64) if total < 2**62 else counts.astype(object), p).reshape(-1)
        else:
            margin = np.asarray(margin_of(counts, p)).reshape(-1)
        if total * widest < 2**62:
            blocks.append(weights @ margin.astype(np.int64))
        else:
            blocks.append(np.array([sum(int(w) * int(m) for w, m in zip(row, margin)) for row in weights], object))
    return np.concatenate(blocks)


def margin_from_coefficients(basis: CoefficientBasis, coeffs: np.ndarray, margin: Margin) -> np.ndarray:
    """The margin over `margin` (a subset of some generator) that the coefficients determine.

    Parameters
    ----------
    basis : CoefficientBasis
    coeffs : numpy.ndarray
        Coefficients in the basis's order along the last axis (leading axes are a batch).
    margin : Margin
        The axes of the margin (sorted here); must be a set of the closure.

    Returns
    -------
    numpy.ndarray
        Float margin counts of shape ``batch + (k_j for j in margin)``.

    Raises
    ------
    TabreleaseError
        If the coefficients do not determine the margin (it is not in the closure).
    """
    margin = tuple(sorted(margin))
    if margin not in basis.closure:
        raise TabreleaseError(f"margin {margin} is not determined by these coefficients")
    coeffs = np.asarray(coeffs, float)
    batch = coeffs.shape[:-1]
    parent = next(g for g in basis.generators if set(margin) <= set(g))
    total = np.zeros(batch + (prod(basis.shape[j] for j in parent),))
    for s, lo, hi in zip(basis.closure, basis.offsets[:-1], basis.offsets[1:]):
        if set(s) <= set(margin):
            total += coeffs[..., lo:hi] @ _synthesis_for(basis, s, parent).T
    full = total.reshape(batch + tuple(basis.shape[j] for j in parent))
    drop = tuple(len(batch) + i for i, j in enumerate(parent) if j not in margin)
    return full.sum(axis=drop) if drop else full


def _synthesis_for(basis: CoefficientBasis, s: Margin, parent: Margin) -> np.ndarray:
    """Block S -> its contribution to the margin over `parent` (C^parent chi^S, or the f^S broadcast)."""
    shape, k = basis.shape, basis.k
    factors = []
    for j in parent:
        if basis.kind == FOURIER:
            factors.append(np.array([[1.0], [-1.0]]) if j in s else np.ones((2, 1)))
        else:
            factors.append(np.eye(shape[j]) if j in s else np.ones((shape[j], 1)))
    outside = prod(shape[j] for j in range(k) if j not in parent)
    scale = 2.0 ** (k / 2 - len(parent)) if basis.kind == FOURIER else outside
    return _kron(factors) * scale


# --- sensitivity ------------------------------------------------------------------------------------
def _per_axis_norms(kj: int) -> tuple[float, float]:
    """L1 and squared-L2 norms of the centred indicator e_j = delta(x_j) - 1/k_j."""
    return 2.0 * (kj - 1) / kj, (kj - 1) / kj


def _block_weight(basis: CoefficientBasis, s: Margin) -> float:
    return 2.0 ** (-basis.k / 2) if basis.kind == FOURIER else 1.0 / prod(
        basis.shape[j] for j in range(basis.k) if j not in s
    )


def _difference_norms(ks: Sequence[int]) -> tuple[float, float]:
    """L1 and squared L2 of (tensor of e_j(x_j)) - (tensor of e_j(y_j)) when x_j != y_j on every axis.

    Each axis has three kinds of level (x_j's, y_j's, the k_j - 2 others), so the sum runs over
    3^|T| kinds with multiplicities rather than over every cell of the margin.
    """
    kinds = []
    for kj in ks:
        a = np.array([1 - 1 / kj, -1 / kj, -1 / kj])
        b = np.array([-1 / kj, 1 - 1 / kj, -1 / kj])
        mult = np.array([1.0, 1.0, kj - 2.0])
        kinds.append((a, b, mult))
    pa, pb, pm = np.ones(1), np.ones(1), np.ones(1)
    for a, b, mult in kinds:
        pa, pb, pm = np.outer(pa, a).ravel(), np.outer(pb, b).ravel(), np.outer(pm, mult).ravel()
    diff = pa - pb
    return float((pm * np.abs(diff)).sum()), float((pm * diff**2).sum())


def sensitivity(basis: CoefficientBasis, neighbours: str = "add-remove", norm: int = 1) -> float:
    """Exact L1 (norm=1) or L2 (norm=2) sensitivity of the whole coefficient vector.

    Parameters
    ----------
    basis : CoefficientBasis
        The released basis (planning bases without matrices suffice).
    neighbours : {"add-remove", "replace"}
        The neighbour relation.
    norm : {1, 2}
        The norm.

    Returns
    -------
    float
        The largest change of the coefficient vector between neighbouring tables.

    Raises
    ------
    TabreleaseError
        If the neighbour relation or norm is unknown, or a replace sensitivity is asked for more than 22
        variables.
    """
    changes = block_changes(basis, neighbours, norm)
    best = float(changes.sum(axis=1).max())
    return best if norm == 1 else sqrt(best)


def block_changes(basis: CoefficientBasis, neighbours: str = "add-remove", norm: int = 1) -> np.ndarray:
    """How far one neighbouring record moves each block: L1 norm (norm=1) or squared L2 norm (norm=2).

    Rows are the ways two neighbouring tables can differ: one row for add-remove (by symmetry a record
    at any x moves a block by the same amount), one row per non-empty set D of coordinates on which the
    old and new record differ for replace (the change depends on D only). Columns are the closure's
    blocks. The sensitivity of blocks measured with scales b_B is the largest row of sum_B change / b_B
    (L1) or sum_B change / b_B^2 (squared L2).

    Parameters
    ----------
    basis : CoefficientBasis
        The released basis.
    neighbours : {"add-remove", "replace"}
        The neighbour relation.
    norm : {1, 2}
        1 for L1 norms, 2 for squared L2 norms.

    Returns
    -------
    numpy.ndarray
        Float array of shape (1, blocks) for add-remove, (2^k - 1, blocks) for replace.

    Raises
    ------
    TabreleaseError
        If the neighbour relation or norm is unknown, or replace is asked for more than 22 variables.
    """
    if neighbours not in NEIGHBOURS:
        raise TabreleaseError(f"unknown neighbour relation {neighbours!r}; choose add-remove or replace")
    if norm not in (1, 2):
        raise TabreleaseError("norm must be 1 or 2")
    shape = basis.shape
    if neighbours == "add-remove":
        row = [
            _block_weight(basis, s) ** norm * (1.0 if basis.kind == FOURIER
                                               else prod(_per_axis_norms(shape[j])[norm - 1] for j in s))
            for s in basis.closure
        ]
        return np.array([row])
    return _replace_changes(basis, norm)


def _replace_changes(basis: CoefficientBasis, norm: int) -> np.ndarray:
    """Per set D of coordinates where the old and new record differ (rows), each block's change (columns)."""
    k = basis.k
    if k > MAX_REPLACE_VARIABLES:
        raise TabreleaseError(
            f"replace-one sensitivity enumerates 2^{k} patterns; use --neighbours add-remove for tables this wide"
        )
    patterns = np.arange(1, 2**k, dtype=np.int64)
    changes = np.zeros((patterns.size, len(basis.closure)))
    for column, s in enumerate(basis.closure):
        if not s:
            continue  # the empty-set block (the total) does not change when a record is replaced
        weight = _block_weight(basis, s) ** norm
        # Value for every subset T of s (as a bit mask over s's positions) of the block's change.
        values = np.empty(2 ** len(s))
        for mask in range(2 ** len(s)):
            t = [s[i] for i in range(len(s)) if mask >> i & 1]
            if not t:
                values[mask] = 0.0
                continue
            rest = prod(_per_axis_norms(basis.shape[j])[norm - 1] for j in s if j not in t)
            if basis.kind == FOURIER:
                # chi^S(x) - chi^S(y) is 0 or +-2 * 2^{-k/2}: the parity of |S and D|.
                values[mask] = (2.0**norm) if len(t) % 2 else 0.0
            else:
                values[mask] = rest * _difference_norms([basis.shape[j] for j in t])[norm - 1]
        index = np.zeros(patterns.size, dtype=np.int64)
        for i, j in enumerate(s):
            index |= ((patterns >> j) & 1) << i
        changes[:, column] = weight * values[index]
    return changes
