"""The fast paths of the refit give what the general ones give: dense Newton steps, the product-form IPF,
and the facial set's shortcuts."""

import numpy as np
import pytest

from tabrelease.loglinear import facial_set, ipf, one_blas_thread
from tabrelease.loglinear.newton import _newton_on_facial_set

MODELS = [
    # (shape, generators): a cycle (no MLE in closed form), and the paper's journey-to-work shape.
    ((3, 3, 4), ((0, 1), (0, 2), (1, 2))),
    ((2, 2, 2, 2, 2), ((0, 1), (1, 2), (2, 3), (3, 0), (4,))),
    ((4, 4, 16), ((0, 1), (0, 2), (1, 2))),
]


def _sparse_table(rng, shape, zero_fraction):
    table = rng.poisson(rng.gamma(0.6, 4.0, size=shape)).astype(float)
    table[rng.random(shape) < zero_fraction] = 0.0
    return table


@pytest.mark.parametrize("shape, generators", MODELS)
def test_dense_newton_equals_sparse_newton_on_random_tables(shape, generators):
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(30):
        table = _sparse_table(rng, shape, rng.uniform(0.0, 0.5))
        if table.sum() == 0:
            continue
        facial = facial_set(table, generators)
        # A few IPF cycles: Newton's starting point, as the extended-MLE fit gives it.
        start, _, _ = ipf(table, generators, start=facial.astype(float), max_iter=3)
        with one_blas_thread():  # as the fit calls it (threads only slow products this small)
            sparse = _newton_on_facial_set(table, start, facial, generators, 1e-8, 50, dense=False)
            dense = _newton_on_facial_set(table, start, facial, generators, 1e-8, 50, dense=True)
        assert (sparse is None) == (dense is None)
        if sparse is None:
            continue
        assert sparse[1] == dense[1] and sparse[2] == dense[2]
        np.testing.assert_allclose(dense[0], sparse[0], rtol=1e-10, atol=1e-10)
        compared += 1
    assert compared >= 20


IPF_MODELS = MODELS + [
    ((2,) * 8, ((0, 2, 4), (0, 2, 6), (0, 3, 6), (1, 3, 7), (1, 5), (1, 4), (2, 4, 5), (2, 5, 6))),  # Rochdale's
    ((2, 3, 2, 2), ((2, 0), (1,), (3, 1, 2))),  # generators not in axis order, and a margin of one variable
]


@pytest.mark.parametrize("shape, generators", IPF_MODELS)
def test_product_ipf_equals_ipf_over_axes_on_random_stacks(shape, generators):
    import importlib

    from tabrelease.tables import margin_counts

    ipf_module = importlib.import_module("tabrelease.loglinear.ipf")
    rng = np.random.default_rng(11)
    stack = np.stack([_sparse_table(rng, shape, rng.uniform(0.0, 0.4)) for _ in range(12)])
    starts = np.stack([facial_set(t, [tuple(sorted(g)) for g in generators]) for t in stack]).astype(float)
    targets = [margin_counts(stack, sorted(g), 1) for g in generators]
    for max_iter in (1, 7, 5000):
        axes = ipf_module._ipf_stack(starts.copy(), targets, generators, 1e-8, max_iter, product=False)
        product = ipf_module._ipf_stack(starts.copy(), targets, generators, 1e-8, max_iter, product=True)
        np.testing.assert_array_equal(axes[1], product[1])
        np.testing.assert_array_equal(axes[2], product[2])
        np.testing.assert_allclose(product[0], axes[0], rtol=1e-10, atol=1e-9)


FACIAL_MODELS = [
    ((3, 3, 4), ((0, 1), (0, 2), (1, 2))),
    ((4, 4, 16), ((0, 1), (0, 2), (1, 2))),
    ((2,) * 8, ((0, 2, 4), (0, 2, 6), (0, 3, 6), (1, 3, 7), (1, 5), (1, 4), (2, 4, 5), (2, 5, 6))),
    ((2, 2, 2, 2, 2), ((0, 1), (1, 2), (2, 3), (3, 0), (4,))),
]


@pytest.mark.parametrize("shape, generators", FACIAL_MODELS)
def test_facial_set_with_the_move_certificate_equals_the_lp(shape, generators):
    from tabrelease.loglinear import facial as facial_module
    from tabrelease.loglinear.design import _positive_margin_cells

    rng = np.random.default_rng(3)
    certified = 0
    for _ in range(60):
        table = _sparse_table(rng, shape, rng.uniform(0.2, 0.8))
        support = table > 0
        candidates = _positive_margin_cells(support, generators)
        if np.array_equal(support, candidates):
            continue
        by_lp = facial_module._facial_set_program(shape, generators).solve(support.ravel(), candidates.ravel())
        np.testing.assert_array_equal(facial_set(table, generators), by_lp.reshape(shape))
        if facial_module._moves_reach_every_candidate(support, candidates, generators):
            # The certificate is only ever given when the LP agrees that every candidate is in.
            assert by_lp.reshape(shape).sum() == candidates.sum()
            certified += 1
    assert certified > 0


def test_parity_moves_leave_every_generator_margin_unchanged():
    from tabrelease.loglinear import margin_design
    from tabrelease.loglinear.facial import _parity_moves

    for shape, generators in FACIAL_MODELS:
        plus, minus = _parity_moves(shape, generators)
        design = margin_design(shape, generators)
        cells = int(np.prod(shape))
        for p, m in zip(plus[:: max(1, len(plus) // 200)], minus[:: max(1, len(minus) // 200)]):
            move = np.zeros(cells)
            np.add.at(move, np.unique(p), 1.0)
            np.add.at(move, np.unique(m), -1.0)
            assert np.abs(move).sum() > 0 and not np.any(design @ move)
