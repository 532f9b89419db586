import numpy as np
import pandas as pd
import pytest

from tabrelease import ContingencyTable, builtin_table, load_table, table_from_frame, table_from_microdata
from tabrelease.tables import PAPER_TABLES

from pathlib import Path

# The verified counts (shared/tables, with their PROVENANCE.md), copied here so that the check runs wherever the
# suite does, never skipped for want of a folder beside the checkout.
VERIFIED = Path(__file__).resolve().parent / "data" / "verified"

# (shape, n, zero cells) as stated in shared/tables/PROVENANCE.md
EXPECTED = {
    "edwards": ((2,) * 6, 70, 42),
    "czech": ((2,) * 6, 1841, 1),
    "rochdale": ((2,) * 8, 665, 165),
    "journey_to_work": ((4, 4, 16), 2291, 182),
}


@pytest.mark.parametrize("name", PAPER_TABLES)
def test_builtin_tables_have_the_verified_shape_n_and_zeros(name):
    table = builtin_table(name)
    shape, n, zeros = EXPECTED[name]
    assert table.shape == shape
    assert table.n == n
    assert table.zero_cells == zeros
    assert table.metadata["model"]


@pytest.mark.parametrize("name", PAPER_TABLES)
def test_builtin_tables_match_the_shared_verified_counts_cell_by_cell(name):
    frame = pd.read_csv(VERIFIED / f"{name}.csv", dtype=str)
    table = builtin_table(name)
    # Both are in lexicographic order with the first variable slowest.
    assert table.to_frame()["count"].tolist() == frame["count"].astype(int).tolist()
    assert table.to_frame().drop(columns="count").astype(str).values.tolist() == frame.drop(columns="count").values.tolist()


def test_journey_to_work_levels_are_in_printed_order():
    table = builtin_table("journey_to_work")
    assert table.levels[0] == ("a", "b", "c", "d")
    assert table.levels[2] == tuple(str(i) for i in range(1, 17))
    # Row a, work zone c of the paper's Table 6: 243 200 0 0 45 0 0 0 70 0 0 80 0 0 0 0
    assert table.counts[0, 2].tolist() == [243, 200, 0, 0, 45, 0, 0, 0, 70, 0, 0, 80, 0, 0, 0, 0]


def test_margins_by_letters_and_names_agree_with_hand_sums():
    frame = pd.DataFrame(
        {"sex": ["m", "m", "f", "f"], "smoker": ["y", "n", "y", "n"], "count": [3, 5, 2, 7]}
    )
    table = table_from_frame(frame)  # text levels sorted: sex f, m; smoker n, y
    assert table.margin(["sex"]).counts.tolist() == [9, 8]
    assert table.margin("B").counts.tolist() == [12, 5]  # letter B = smoker: n 5+7, y 3+2
    assert table.margin(["smoker", "sex"]).counts.tolist() == [[7, 2], [5, 3]]  # axes kept in table order


def test_round_trip_through_long_format():
    table = builtin_table("journey_to_work")
    again = table_from_frame(table.to_frame())
    assert again.levels == table.levels
    assert np.array_equal(again.counts, table.counts)


def test_numeric_levels_sort_numerically_and_text_levels_sort_as_text_never_in_file_order():
    frame = pd.DataFrame({"age": ["10", "9", "10", "9"], "zone": ["z", "z", "a", "a"], "count": [1, 2, 3, 4]})
    table = table_from_frame(frame)
    assert table.levels == (("9", "10"), ("a", "z"))
    assert table.counts.tolist() == [[4, 2], [3, 1]]
    shuffled = table_from_frame(frame.sort_values("count", ascending=False))
    assert shuffled.levels == table.levels and shuffled.counts.tolist() == table.counts.tolist()


def test_sparse_long_table_fills_zeros():
    frame = pd.DataFrame({"a": ["x", "y"], "b": ["p", "q"], "count": [4, 1]})
    table = table_from_frame(frame, complete=False)
    assert table.counts.tolist() == [[4, 0], [0, 1]]


def test_microdata_are_counted_with_given_levels():
    people = pd.DataFrame({"sex": ["f", "m", "f", "f"], "region": ["n", "s", "s", "s"]})
    table = table_from_microdata(people, levels={"region": ["n", "s", "e"]})
    assert table.levels == (("f", "m"), ("n", "s", "e"))
    assert table.counts.tolist() == [[1, 2, 0], [0, 1, 0]]


def test_table_counts_are_read_only():
    table = builtin_table("edwards")
    with pytest.raises(ValueError):
        table.counts[0, 0, 0, 0, 0, 0] = 5


def test_load_table_reads_csv_and_names(write_csv):
    path = write_csv("a,b,count\nx,p,1\nx,q,2\ny,p,3\ny,q,4\n")
    table = load_table(str(path))
    assert isinstance(table, ContingencyTable) and table.n == 10
