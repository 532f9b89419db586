"""Junction trees: the running-intersection property, coverage of every margin, and decomposability as GYO says."""

import itertools
import random

import pytest

from tabrelease.junction import junction_tree
from tabrelease.loglinear.design import is_decomposable


def _assert_running_intersection(jt):
    for i, clique in enumerate(jt.cliques):
        before = set().union(*map(set, jt.cliques[:i])) if i else set()
        shared = set(clique) & before
        assert shared == set(jt.separators[i])
        if jt.parents[i] is None:
            assert not shared
        else:
            assert jt.parents[i] < i and shared <= set(jt.cliques[jt.parents[i]])


def test_chain_is_its_own_tree():
    jt = junction_tree([(0, 1), (1, 2), (2, 3)], (2, 3, 4, 5))
    assert jt.decomposable and set(jt.cliques) == {(0, 1), (1, 2), (2, 3)}
    assert sorted(jt.separators) == [(), (1,), (2,)]
    assert jt.clique_cells((2, 3, 4, 5)) == 6 + 12 + 20


def test_cycle_is_filled_in():
    jt = junction_tree([(0, 1), (1, 2), (2, 3), (0, 3)], (2, 2, 2, 2))
    assert not jt.decomposable
    assert sorted(len(c) for c in jt.cliques) == [3, 3]  # one chord: two triangles
    _assert_running_intersection(jt)


def test_variables_outside_every_margin_get_their_own_clique():
    jt = junction_tree([(0, 1)], (2, 2, 3))
    assert set(jt.cliques) == {(0, 1), (2,)}


@pytest.mark.parametrize("seed", range(5))
def test_random_margins(seed):
    rng = random.Random(seed)
    for _ in range(60):
        k = rng.randint(2, 8)
        margins = [tuple(sorted(rng.sample(range(k), rng.randint(1, min(3, k))))) for _ in range(rng.randint(1, 6))]
        jt = junction_tree(margins, (3,) * k)
        _assert_running_intersection(jt)
        assert {j for c in jt.cliques for j in c} == set(range(k))
        for m in margins:
            assert set(m) <= set(jt.cliques[jt.clique_of(m)])
        # Decomposable (no fill-in) exactly when GYO reduces the generators (one connected component) to one.
        from tabrelease.models import maximal_margins

        generators, _ = maximal_margins(margins)
        if all(p is not None for p in jt.parents[1:]) and {j for m in margins for j in m} == set(range(k)):
            assert jt.decomposable == is_decomposable(generators)
        assert junction_tree(list(itertools.combinations(range(k), 2)), (2,) * k).decomposable == (k <= 2)
