import itertools

import numpy as np
import pytest

from tabrelease import builtin_table, default_model
from tabrelease.bases import (
    EFRON_STEIN,
    FOURIER,
    coefficient_basis,
    coefficients,
    margin_from_coefficients,
    sensitivity,
)
from tabrelease.paper.theorems import paper_noise_scale
from tabrelease.models import maximal_margins


def dense_fourier(shape, s):
    """chi^S over every cell, straight from the definition 2^{-k/2} (-1)^{<S, x>}."""
    k = len(shape)
    cells = np.array(list(itertools.product(*[range(n) for n in shape])))
    return ((-1.0) ** cells[:, list(s)].sum(axis=1)) / 2 ** (k / 2)


def dense_efron_stein(counts, s):
    """f^S(x_S) from eq. (4): sum over S' in S of (-1)^{|S - S'|} E[f | X_S' = x_S'] under the uniform measure."""
    k = counts.ndim
    out = np.zeros(tuple(counts.shape[j] for j in s))
    for r in range(len(s) + 1):
        for sub in itertools.combinations(s, r):
            cond = counts.mean(axis=tuple(j for j in range(k) if j not in sub))  # E[f | X_sub]
            # broadcast onto the S axes
            idx = tuple(slice(None) if j in sub else None for j in s)
            out = out + (-1) ** (len(s) - r) * cond[idx]
    return out


def random_case(rng, binary=False):
    k = int(rng.integers(2, 5))
    shape = tuple(2 if binary else int(rng.integers(2, 5)) for _ in range(k))
    margins = []
    for _ in range(int(rng.integers(1, 4))):
        size = int(rng.integers(1, k + 1))
        margins.append(tuple(sorted(rng.choice(k, size=size, replace=False).tolist())))
    return shape, maximal_margins(margins)[0]


@pytest.mark.parametrize("seed", range(5))
def test_coefficients_from_margins_equal_the_definitions(seed):
    rng = np.random.default_rng(seed)
    shape, margins = random_case(rng)
    counts = rng.poisson(3, size=shape)
    es = coefficient_basis(EFRON_STEIN, shape, margins)
    c = coefficients(es, counts)
    for s in es.closure:
        np.testing.assert_allclose(es.block(c, s), dense_efron_stein(counts.astype(float), s).ravel(), atol=1e-10)
    binary_shape = (2,) * len(shape)
    bcounts = rng.poisson(3, size=binary_shape)
    fb = coefficient_basis(FOURIER, binary_shape, margins)
    cf = coefficients(fb, bcounts)
    for s in fb.closure:
        assert fb.block(cf, s)[0] == pytest.approx(dense_fourier(binary_shape, s) @ bcounts.ravel())


@pytest.mark.parametrize("name", ["edwards", "czech", "rochdale"])
def test_fourier_and_efron_stein_agree_on_binary_tables(name):
    # The paper's Example 4: f^S(x_S) = <f, chi^S> chi^S(x); chi^S at x_S is 2^{-k/2} (-1)^{|x_S|}.
    table = builtin_table(name)
    model = default_model(table)
    fb = coefficient_basis(FOURIER, table.shape, model.generators)
    es = coefficient_basis(EFRON_STEIN, table.shape, model.generators)
    cf, ce = coefficients(fb, table.counts), coefficients(es, table.counts)
    k = table.k
    for s in fb.closure:
        signs = np.array([(-1.0) ** sum(x) for x in itertools.product((0, 1), repeat=len(s))])
        np.testing.assert_allclose(es.block(ce, s), fb.block(cf, s)[0] * signs / 2 ** (k / 2), atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_margins_come_back_from_the_coefficients(seed):
    rng = np.random.default_rng(100 + seed)
    binary = seed % 2 == 0
    shape, margins = random_case(rng, binary=binary)
    counts = rng.poisson(4, size=shape)
    basis = coefficient_basis(FOURIER if binary else EFRON_STEIN, shape, margins)
    c = coefficients(basis, counts)
    for s in basis.closure:
        if s:
            expected = counts.sum(axis=tuple(j for j in range(len(shape)) if j not in s))
            np.testing.assert_allclose(margin_from_coefficients(basis, c, s), expected, atol=1e-9)


def test_integer_scaled_coefficients_are_integers():
    for name in ["rochdale", "journey_to_work"]:
        table = builtin_table(name)
        kind = FOURIER if table.is_binary else EFRON_STEIN
        basis = coefficient_basis(kind, table.shape, default_model(table).generators)
        scaled = coefficients(basis, table.counts) * basis.integer_scale
        np.testing.assert_allclose(scaled, np.round(scaled), atol=1e-8)


def brute_force_sensitivities(basis):
    """Over every possible record: add/remove moves the vector by v(x); replace by v(x) - v(y)."""
    cells = int(np.prod(basis.shape))
    units = np.eye(cells).reshape((cells,) + basis.shape)
    v = coefficients(basis, units, batch_ndim=1)
    diff = v[:, None, :] - v[None, :, :]
    return {
        ("add-remove", 1): np.abs(v).sum(axis=1).max(),
        ("replace", 1): np.abs(diff).sum(axis=2).max(),
        ("add-remove", 2): np.sqrt((v**2).sum(axis=1).max()),
        ("replace", 2): np.sqrt((diff**2).sum(axis=2).max()),
    }


SENSITIVITY_CASES = [(seed, binary) for seed in range(14) for binary in (False, True)]


@pytest.mark.parametrize("seed, binary", SENSITIVITY_CASES)
def test_exact_sensitivity_equals_brute_force_over_every_record(seed, binary):
    rng = np.random.default_rng(1000 + seed)
    shape, margins = random_case(rng, binary=binary)
    kinds = [EFRON_STEIN] + ([FOURIER] if binary else [])
    for kind in kinds:
        basis = coefficient_basis(kind, shape, margins)
        brute = brute_force_sensitivities(basis)
        for (neighbours, norm), value in brute.items():
            assert sensitivity(basis, neighbours, norm) == pytest.approx(value, rel=1e-9), (shape, margins, kind, neighbours, norm)


def test_paper_theorem2_is_below_the_true_sensitivity_for_journey_to_work():
    table = builtin_table("journey_to_work")
    basis = coefficient_basis(EFRON_STEIN, table.shape, default_model(table).generators)
    assert paper_noise_scale(basis, 1.0) == pytest.approx(1.3203125)  # sum 2/prod k over B, by hand: 338/256
    assert sensitivity(basis) == pytest.approx(439 / 256)  # PROVENANCE.md: 1.715
    assert sensitivity(basis) > paper_noise_scale(basis, 1.0)


def test_fourier_add_remove_sensitivity_is_B_over_2_to_the_k_over_2():
    table = builtin_table("rochdale")
    basis = coefficient_basis(FOURIER, table.shape, default_model(table).generators)
    assert sensitivity(basis) == pytest.approx(30 / 16)
