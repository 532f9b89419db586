"""The audit's disclosure-risk numbers, counted by hand on small tables where every cell is known.

Every expected dict below was written from the tables in the comments, cell by cell, not by
running the code. A released cell is "small" when it reads as 1..small under the tool's
rounding (halves up): released in [0.5, small + 0.5).
"""

import numpy as np
import pytest

from tabrelease.disclosure import disclosure_risk
from tabrelease.pipeline import Release
from tabrelease.noise import laplace_calibration
from tabrelease.tables import ContingencyTable

#          b0 b1 b2                     b0 b1 b2
# true  a0  1  0  1   [A] 2      released a0  0  1  1   [A] 2
#       a1  0  2  7   [A] 9               a1  1  2  5   [A] 8
#     [B]   1  2  8   n = 11          [B]   1  3  6   n' = 10
TRUE = np.array([[1, 0, 1], [0, 2, 7]])
RELEASED = np.array([[0, 1, 1], [1, 2, 5]])


def _table(counts):
    return ContingencyTable(("A", "B"), (("a0", "a1"), ("b0", "b1", "b2")), np.asarray(counts))


def _release(margins, released_margins, table=None):
    return Release(
        mechanism="hand-built", margins=tuple(margins), released_margins=tuple(np.asarray(m) for m in released_margins),
        table=table, lp=None, noise=laplace_calibration(1.0, 1.0, "add-remove"), noise_mode="test",
        consistent=True, basis=None, coefficients_released=0, timings={},
    )


def test_counts_of_small_cells_by_hand_on_a_released_table():
    release = _release([(0,), (1,)], [[2, 8], [1, 3, 6]], table=RELEASED)
    risk = disclosure_risk(_table(TRUE), release)
    assert risk["small_count"] == 2
    assert risk["margins"] == {
        # true (2, 9), released (2, 8): the true 2 is a pair, released as exactly 2.
        "[A]": {"cells": 2, "true_count_1": 0, "true_count_2": 1, "true_small": 1, "smallest_nonzero": 2,
                "released_small": 1, "released_small_true_zero": 0, "released_small_true_small": 1,
                "released_small_true_exact": 1, "true_small_released_zero": 0},
        # true (1, 2, 8), released (1, 3, 6): b0 is a unique released exactly; b1 (a pair) is released as 3.
        "[B]": {"cells": 3, "true_count_1": 1, "true_count_2": 1, "true_small": 2, "smallest_nonzero": 1,
                "released_small": 1, "released_small_true_zero": 0, "released_small_true_small": 1,
                "released_small_true_exact": 1, "true_small_released_zero": 0},
    }
    # Cells in order a0b0..a1b2: true 1 0 1 0 2 7, released 0 1 1 1 2 5.
    # Released 1..2: a0b1, a0b2, a1b0, a1b1; of these a0b1 and a1b0 are true zeros, a0b2 (1) and a1b1 (2) exact.
    # The true unique a0b0 is released as 0.
    assert risk["full_table"] == {
        "cells": 6, "true_count_1": 2, "true_count_2": 1, "true_small": 3, "smallest_nonzero": 1,
        "released_small": 4, "released_small_true_zero": 2, "released_small_true_small": 2,
        "released_small_true_exact": 2, "true_small_released_zero": 1,
    }
    assert "released cells of 1..2" in risk["reading"]


def test_fractional_margins_without_a_table_and_a_wider_small_window():
    # Margins-only releases (the nonneg mechanism) are real numbers; small = 3 reads [0.5, 3.5) as small.
    # [AB] released  a0: 3.5 1.2 0.2   (true 1 0 1)   the window's edges: 3.5 reads 4 (not small), 0.5 reads 1
    #                a1: 0.7 2.6 0.5   (true 0 2 7)
    release = _release([(0,), (1,), (0, 1)], [[0.49, 9.2], [0.51, 3.49, 3.51], [[3.5, 1.2, 0.2], [0.7, 2.6, 0.5]]])
    risk = disclosure_risk(_table(TRUE), release, small=3)
    assert risk["small_count"] == 3
    assert risk["margins"] == {
        # true (2, 9): the 2 is small (1..3) and is released as 0.49, i.e. 0.
        "[A]": {"cells": 2, "true_count_1": 0, "true_count_2": 1, "true_small": 1, "smallest_nonzero": 2,
                "released_small": 0, "released_small_true_zero": 0, "released_small_true_small": 0,
                "released_small_true_exact": 0, "true_small_released_zero": 1},
        # true (1, 2, 8) released (0.51, 3.49, 3.51): 0.51 reads 1 (= true), 3.49 reads 3 (true 2), 3.51 is not small.
        "[B]": {"cells": 3, "true_count_1": 1, "true_count_2": 1, "true_small": 2, "smallest_nonzero": 1,
                "released_small": 2, "released_small_true_zero": 0, "released_small_true_small": 2,
                "released_small_true_exact": 1, "true_small_released_zero": 0},
        # small: 1.2 (true 0), 0.7 (true 0), 2.6 (true 2, reads 3), 0.5 (true 7); the true 1 at a0b2 reads 0.
        "[AB]": {"cells": 6, "true_count_1": 2, "true_count_2": 1, "true_small": 3, "smallest_nonzero": 1,
                 "released_small": 4, "released_small_true_zero": 2, "released_small_true_small": 1,
                 "released_small_true_exact": 0, "true_small_released_zero": 1},
    }
    # No released table: the full table row has the true counts only (1..3 counts 1, 1 and 2).
    assert risk["full_table"] == {"cells": 6, "true_count_1": 2, "true_count_2": 1, "true_small": 3,
                                  "smallest_nonzero": 1}
    assert "released cells of 1..3" in risk["reading"]


def test_an_empty_table_has_no_smallest_cell_and_every_released_small_cell_is_a_true_zero():
    zeros = ContingencyTable(("A", "B"), (("a0", "a1"), ("b0", "b1")), np.zeros((2, 2), int))
    released = np.array([[0, 2], [3, 1]])
    release = _release([(0, 1)], [released], table=released)
    risk = disclosure_risk(zeros, release)
    expected = {"cells": 4, "true_count_1": 0, "true_count_2": 0, "true_small": 0, "smallest_nonzero": None,
                "released_small": 2, "released_small_true_zero": 2, "released_small_true_small": 0,
                "released_small_true_exact": 0, "true_small_released_zero": 0}
    assert risk["margins"] == {"[AB]": expected}
    assert risk["full_table"] == expected


def test_a_released_half_is_read_one_way_by_every_count():
    # true [A] = (1, 1), [B] = (0, 2); released [A] = (0.5, 1.5), [B] = (0.5, 1.5), read (halves up) as 1 and 2.
    table = ContingencyTable(("A", "B"), (("a0", "a1"), ("b0", "b1")), np.array([[0, 1], [0, 1]]))
    release = _release([(0,), (1,)], [[0.5, 1.5], [0.5, 1.5]])
    rows = disclosure_risk(table, release)["margins"]
    # [A]: a0 reads 1 = true 1 (exact); a1 reads 2, true 1.
    assert (rows["[A]"]["released_small"], rows["[A]"]["released_small_true_small"]) == (2, 2)
    assert rows["[A]"]["released_small_true_exact"] == 1
    # [B]: b0 reads 1 over a true 0 (not exact); b1 reads 2 = true 2 (exact).
    assert (rows["[B]"]["released_small_true_zero"], rows["[B]"]["released_small_true_small"]) == (1, 1)
    assert rows["[B]"]["released_small_true_exact"] == 1
