"""Every mechanism's calibration under both neighbour relations, and at another epsilon, against values
computed independently (brute force over every record pair, or by hand)."""

import itertools

import numpy as np
import pytest


from tabrelease.testing import plan_at
from tabrelease.mechanisms import with_epsilon
from tabrelease.bases import coefficients


def brute_force_sensitivity(basis, neighbours, norm):
    """max over neighbouring data sets of the change of every released coefficient, record by record."""
    cells = int(np.prod(basis.shape))
    one = coefficients(basis, np.eye(cells).reshape((cells,) + basis.shape), batch_ndim=1)
    if neighbours == "add-remove":
        changes = one
    else:
        changes = np.array([one[i] - one[j] for i, j in itertools.combinations(range(cells), 2)])
    return float(np.linalg.norm(changes, ord=norm, axis=1).max())


@pytest.mark.parametrize("neighbours", ["add-remove", "replace"])
@pytest.mark.parametrize("shape, margins", [((3, 2, 3), [(0, 1), (1, 2)]), ((2, 2, 2), [(0, 1), (0, 2)])])
def test_binary_encoding_and_gaussian_sensitivity_equal_brute_force(shape, margins, neighbours):
    encoded = plan_at(shape, margins, 1.0, mechanism="binary-encoding", neighbours=neighbours)
    brute = brute_force_sensitivity(encoded.basis, neighbours, 1)
    if neighbours == "add-remove" or all(k in (2, 4) for k in shape):
        assert encoded.calibration.sensitivity == pytest.approx(brute)
    else:  # structural-zero codes included: the README's stated upper bound
        assert encoded.calibration.sensitivity >= brute * (1 - 1e-12)
    gaussian = plan_at(shape, margins, 1.0, mechanism="gaussian", neighbours=neighbours, delta=1e-6)
    assert gaussian.calibration.sensitivity == pytest.approx(brute_force_sensitivity(gaussian.basis, neighbours, 2))


@pytest.mark.parametrize("neighbours, factor", [("add-remove", 1), ("replace", 2)])
def test_margins_and_cells_are_histograms(neighbours, factor):
    # A record added moves one cell of each margin by 1; a record changed moves two.
    margins = [(0, 1), (1, 2), (0, 2)]
    plan = plan_at((2, 3, 2), margins, 0.5, mechanism="margins", neighbours=neighbours)
    assert plan.calibration.scale == pytest.approx(3 * factor / 0.5)
    plan = plan_at((2, 3, 2), margins, 0.5, mechanism="cells", neighbours=neighbours)
    assert plan.calibration.scale == pytest.approx(factor / 0.5)


@pytest.mark.parametrize("mechanism, extra", [
    ("gaussian", {"delta": 1e-6}), ("nonneg", {}), ("binary-encoding", {}), ("cells", {}), ("margins", {}),
    ("efron-stein", {}), ("efron-stein", {"calibration": "paper"}),
])
def test_a_plan_at_another_epsilon_is_the_plan_made_there(mechanism, extra):
    # Sweeps build each plan at epsilon 1 and rescale it: that must equal planning at the epsilon itself.
    shape, margins = (3, 2, 2), [(0, 1), (1, 2)]
    rescaled = with_epsilon(plan_at(shape, margins, 1.0, mechanism=mechanism, **extra), 0.3)
    direct = plan_at(shape, margins, 0.3, mechanism=mechanism, **extra)
    assert rescaled.calibration == direct.calibration
    assert rescaled.parameters == direct.parameters and rescaled.notes == direct.notes
