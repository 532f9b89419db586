"""tabrelease's own sparse matrices (tabrelease._sparse) against scipy.sparse on random matrices: every operation the
designs, fits and roundings use gives scipy's result (bit for bit where scipy's order of additions is the same), and
integer products are exact."""

import numpy as np
import pytest
import scipy.sparse as sps

from tabrelease import _sparse as sp

SEEDS = range(12)


def _random(rng, shape=None, density=None, integer=False, duplicates=True):
    """(our matrix, scipy's) built from the same random entries, duplicates among them summed by both."""
    m, n = shape if shape is not None else tuple(rng.integers(1, 9, size=2))
    count = int(rng.integers(0, m * n * 2 + 1) if density is None else density * m * n)
    row, col = rng.integers(0, m, count), rng.integers(0, n, count)
    if not duplicates:
        keep = np.unique(row * n + col, return_index=True)[1]
        row, col = row[keep], col[keep]
    values = rng.integers(-5, 6, row.size) if integer else rng.standard_normal(row.size)
    ours = sp.from_entries(values, row, col, (m, n))
    theirs = sps.coo_matrix((values, (row, col)), shape=(m, n)).tocsr()
    theirs.sum_duplicates()
    return ours, theirs


def _same(ours, theirs, exact=True):
    assert ours.shape == theirs.shape
    if exact:
        np.testing.assert_array_equal(ours.toarray(), theirs.toarray())
    else:
        np.testing.assert_allclose(ours.toarray(), theirs.toarray(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_construction_and_the_compressed_arrays_are_scipys(seed):
    rng = np.random.default_rng(seed)
    ours, theirs = _random(rng)
    _same(ours, theirs, exact=False)  # duplicates summed in order (scipy's order after its unstable sort varies)
    ours, theirs = _random(rng, duplicates=False)
    _same(ours, theirs)
    for format in ("csr", "csc"):
        mine = ours.tocsc() if format == "csc" else ours.tocsr()
        other = theirs.asformat(format)
        other.sort_indices()
        # What Clarabel and HiGHS read: the compressed arrays, sorted within each column (row).
        np.testing.assert_array_equal(mine.indptr, other.indptr)
        np.testing.assert_array_equal(mine.indices, other.indices)
        np.testing.assert_array_equal(mine.data, other.data)
        assert mine.format == format and mine.nnz == other.nnz
    dense = rng.standard_normal((4, 5)) * (rng.random((4, 5)) < 0.5)
    _same(sp.from_dense(dense), sps.csr_matrix(dense))
    _same(sp.identity(5), sps.identity(5, format="csr"))
    _same(sp.zeros((3, 4)), sps.csr_matrix((3, 4)))


@pytest.mark.parametrize("seed", SEEDS)
def test_products_are_scipys_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    ours, theirs = _random(rng, duplicates=False)
    x = rng.standard_normal(ours.shape[1])
    # The same order of additions as scipy's (each row's products in column order): the same bits.
    np.testing.assert_array_equal(ours @ x, theirs @ x)
    np.testing.assert_array_equal(ours.tocsc() @ x, theirs.tocsc() @ x)
    many = rng.standard_normal((ours.shape[1], 3))
    np.testing.assert_array_equal(ours @ many, theirs @ many)
    y = rng.standard_normal(ours.shape[0])
    np.testing.assert_allclose(y @ ours, theirs.T @ y, rtol=1e-13, atol=1e-13)
    other, other_theirs = _random(rng, shape=(ours.shape[1], int(rng.integers(1, 7))), duplicates=False)
    for mine, scipys in ((ours @ other, theirs @ other_theirs), (ours.T @ ours, theirs.T @ theirs)):
        # Each entry's terms added in scipy's order, and no entry where they cancel to 0: the same entries, bits.
        scipys = scipys.tocsr()
        scipys.sort_indices()
        assert mine.nnz == scipys.nnz
        np.testing.assert_array_equal(mine.indptr, scipys.indptr)
        np.testing.assert_array_equal(mine.indices, scipys.indices)
        np.testing.assert_array_equal(mine.data, scipys.data)
    _same(ours.T, theirs.T.tocsr())
    cancelling = sp.from_dense([[1.0, -1.0]]) @ sp.from_dense([[1.0], [1.0]])
    assert cancelling.nnz == 0 and (sps.csr_matrix([[1.0, -1.0]]) @ sps.csr_matrix([[1.0], [1.0]])).nnz == 0
    empty = sp.zeros((2, 3))
    assert (empty @ np.ones(3)).dtype == float and (np.ones(2) @ empty).dtype == float


def test_integer_products_are_exact_where_floats_would_round():
    rng = np.random.default_rng(0)
    ours, _ = _random(rng, shape=(6, 9), integer=True)
    x = rng.integers(2**55, 2**56, size=9, dtype=np.int64)  # products and sums beyond float64's 2^53
    expected = [sum(int(v) * int(x[c]) for v, r, c in zip(ours.values, ours.row, ours.col) if r == i) for i in range(6)]
    found = ours @ x
    assert found.dtype == np.int64 and [int(v) for v in found] == expected
    assert [int(v) for v in abs(ours).sum(axis=1)] == [int(np.abs(ours.toarray()[i]).sum()) for i in range(6)]


@pytest.mark.parametrize("seed", SEEDS)
def test_stacking_selection_and_entrywise_operations_are_scipys(seed):
    rng = np.random.default_rng(seed)
    a, a_theirs = _random(rng, shape=(4, 6), duplicates=False)
    b, b_theirs = _random(rng, shape=(3, 6), duplicates=False)
    c, c_theirs = _random(rng, shape=(4, 2), duplicates=False)
    _same(sp.stack(0, [a, b]), sps.vstack([a_theirs, b_theirs]).tocsr())
    _same(sp.stack(1, [a, c]), sps.hstack([a_theirs, c_theirs]).tocsr())
    _same(sp.kron(b, c), sps.kron(b_theirs, c_theirs).tocsr())
    mask = rng.random(4) < 0.5
    _same(a[mask], a_theirs[mask])
    rows = rng.integers(0, 4, size=5)
    _same(a[rows], a_theirs[rows])
    cols = np.flatnonzero(rng.random(6) < 0.5)
    _same(a[:, cols], a_theirs[:, cols])
    _same(a[1:, :4], a_theirs[1:, :4])
    _same(a.tocsc()[::2, 2:], a_theirs.tocsc()[::2, 2:])
    assert a.tocsc()[1:, 2:].format == "csc"
    weights = rng.standard_normal((4, 1))
    _same(a.multiply(weights), a_theirs.multiply(weights).tocsr())
    _same(-a, -a_theirs)
    _same(a * 2.5, a_theirs * 2.5)
    _same(abs(a), abs(a_theirs))
    np.testing.assert_allclose(a.sum(axis=1), np.asarray(a_theirs.sum(axis=1)).ravel(), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(a.sum(axis=0), np.asarray(a_theirs.sum(axis=0)).ravel(), rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(a.diagonal(), a_theirs.diagonal())


def test_mistakes_are_refused():
    with pytest.raises(ValueError, match="outside"):
        sp.from_entries([1.0], [3], [0], (2, 2))
    with pytest.raises(ValueError, match="columns"):
        sp.stack(0, [sp.zeros((1, 2)), sp.zeros((1, 3))])
    with pytest.raises(ValueError, match="rows"):
        sp.stack(1, [sp.zeros((1, 2)), sp.zeros((2, 2))])
    with pytest.raises(ValueError):
        sp.identity(3) @ np.ones(4)
    with pytest.raises(IndexError):
        sp.identity(3)[np.array([3])]
    with pytest.raises(TypeError):
        sp.identity(3) * np.ones(3)
    with pytest.raises(IndexError, match="one at a time"):
        sp.identity(3)[np.array([0, 1]), np.array([1, 2])]
