import pandas as pd
import pytest

from tabrelease import builtin_table, default_model, parse_model, table_from_frame
from tabrelease.errors import TabreleaseError
from tabrelease.models import downward_closure


def test_closure_sizes_match_the_papers_B_with_the_empty_set():
    # PROVENANCE.md: |B| = 12, 22, 30 for Edwards, Czech and Rochdale (empty set included);
    # journey to work: empty, A, B, C, AB, AC, BC.
    sizes = {name: len(default_model(builtin_table(name)).closure) for name in ("edwards", "czech", "rochdale", "journey_to_work")}
    assert sizes == {"edwards": 12, "czech": 22, "rochdale": 30, "journey_to_work": 7}


def test_downward_closure_by_hand():
    assert downward_closure([(0, 1), (1, 2)]) == ((), (0,), (1,), (2,), (0, 1), (1, 2))


def test_free_parameters_give_the_nominal_df():
    # journey to work, [AB][AC][BC] on 4x4x16: 1 + 3 + 3 + 15 + 9 + 45 + 45 = 121 parameters, 135 df.
    table = builtin_table("journey_to_work")
    assert default_model(table).free_parameters(table.shape) == 121
    # binary tables: parameters = |closure|
    edwards = builtin_table("edwards")
    assert default_model(edwards).free_parameters(edwards.shape) == 12


def test_generators_contained_in_others_are_dropped_and_reported():
    table = builtin_table("czech")
    model = parse_model("[AB][ABC][B][DE]", table)
    assert model.generators == ((0, 1, 2), (3, 4))
    assert model.dropped == ((0, 1), (1,))
    assert model.letters() == "[ABC][DE]"


def test_names_and_letters_give_the_same_model():
    frame = pd.DataFrame(
        {"sex": list("mmmmffff"), "age": list("yyooyyoo"), "zone": list("nsnsnsns"), "count": range(1, 9)}
    )
    table = table_from_frame(frame)
    by_names = parse_model("[sex,age][age,zone]", table)
    by_letters = parse_model("[AB][BC]", table)
    assert by_names == by_letters
    assert by_names.names(table.variables) == "[sex,age][age,zone]"
    assert parse_model("AB BC", table) == by_letters



def test_all_k_way_is_every_margin_of_k_variables():
    # Rochdale has 8 variables: C(8, 2) = 28 two-way margins, written out by hand as letter pairs.
    table = builtin_table("rochdale")
    pairs = "".join(f"[{a}{b}]" for i, a in enumerate("ABCDEFGH") for b in "ABCDEFGH"[i + 1:])
    assert len(parse_model("all-2-way", table).generators) == 28
    assert parse_model("all-2-way", table) == parse_model(pairs, table)
    assert parse_model("ALL-2-WAY", table) == parse_model("[all-2-way]", table) == parse_model(pairs, table)
    # with other generators, in brackets or beside them; the margins inside a larger one are dropped as usual
    mixed = parse_model("all-2-way [ABC]", table)
    assert mixed == parse_model("[all-2-way][ABC]", table) == parse_model(pairs + "[ABC]", table)
    assert set(mixed.dropped) == {(0, 1), (0, 2), (1, 2)}
    assert parse_model("all-1-way", table).generators == tuple((j,) for j in range(8))
    assert parse_model("all-8-way", table).generators == (tuple(range(8)),)


def test_all_k_way_is_counted_before_it_is_listed_and_long_position_letters_are_read():
    """all-10-way of 20 variables is C(20, 10) = 184,756 margins: refused in one line before any is listed (a review
    found all-15-way of 30 variables exhausting memory). Past Z the position letters are V27, V28, ...: [V27] is the
    27th variable alone, as in [V27,A]."""
    import pytest

    from tabrelease import table_from_microdata
    from tabrelease.errors import TabreleaseError
    from tabrelease.models import MAX_SHORTHAND_MARGINS

    wide = table_from_microdata(pd.DataFrame({f"x{i}": ["a", "b"] for i in range(28)}))
    with pytest.raises(TabreleaseError, match="'all-10-way' names 13123110 margins of this table's 28 variables; "
                                              f"at most {MAX_SHORTHAND_MARGINS} can be asked for at once"):
        parse_model("all-10-way", wide)
    assert len(parse_model("all-3-way", wide).generators) == 3276  # C(28, 3), within the limit
    assert parse_model("[V27]", wide).generators == ((26,),)
    assert parse_model("[V27,A]", wide).generators == ((0, 26),)


def test_a_variable_named_like_the_shorthand_is_the_variable():
    frame = pd.DataFrame({"all-2-way": list("xxxxyyyy"), "b": list("ppqqppqq"), "c": list("uvuvuvuv"),
                          "count": range(1, 9)})
    table = table_from_frame(frame)
    assert parse_model("[all-2-way]", table).generators == ((0,),)
    assert parse_model("all-1-way", table).generators == ((0,), (1,), (2,))


def test_maximal_margins_agree_with_every_pair_compared():
    # The subset scan (small margins) and the pair comparison (margins past SUBSET_SCAN_MAX_SIZE) against the
    # definition: a margin is dropped iff it is a strict subset of another.
    import random

    from tabrelease.models import SUBSET_SCAN_MAX_SIZE, maximal_margins

    rng = random.Random(4)
    for _ in range(200):
        k = rng.choice([4, 8, SUBSET_SCAN_MAX_SIZE + 4])
        margins = [tuple(sorted(rng.sample(range(k), rng.randint(0, k)))) for _ in range(rng.randint(1, 12))]
        unique = list(dict.fromkeys(margins))
        expected_dropped = [m for m in unique if any(set(m) < set(o) for o in unique)]
        expected_kept = [m for m in unique if m not in expected_dropped]
        assert maximal_margins(margins) == (tuple(expected_kept), tuple(expected_dropped))


@pytest.mark.parametrize("spec", ["[sex,year", "sex,year]", "[A][B", "[[A]]", "[A]]"])
def test_brackets_that_do_not_pair_are_said_so(spec):
    """A new user's trial: '[sex,year' was refused as "'[sex,year' is outside brackets"."""
    from tabrelease import TabreleaseError, builtin_table, parse_model

    with pytest.raises(TabreleaseError, match="its brackets do not pair"):
        parse_model(spec, builtin_table("rochdale"))


@pytest.mark.parametrize("spec, near", [("[Asian]", "asian"), ("[wife_activ,asian]", "wife_active"),
                                        ("[asian,husband_unemploed]", "husband_unemployed")])
def test_an_unknown_variable_near_a_name_suggests_it(spec, near):
    """A new user's trial: near misses ('yaer', 'Sex') got no suggestion."""
    from tabrelease import TabreleaseError, builtin_table, parse_model

    with pytest.raises(TabreleaseError, match=f"\\(did you mean '{near}'\\?\\)"):
        parse_model(spec, builtin_table("rochdale"))
    with pytest.raises(TabreleaseError) as far:
        parse_model("[zzz]", builtin_table("rochdale"))
    assert "did you mean" not in str(far.value)


@pytest.mark.parametrize("spec", ["Hair,Eye", "Hair,Eye Sex", "A,B+C"])
def test_names_listed_without_brackets_are_refused_as_ambiguous(spec):
    """A new user's trial: `--margins "Hair,Eye"` was read as the one margin [Hair,Eye]; one who meant [Hair][Eye]
    published a finer table without being told. Names listed with commas need brackets (letters run together, "AB",
    and generators split by spaces or plus signs, "AB BC", keep their meaning)."""
    table = table_from_frame(pd.DataFrame({"Hair": ["a", "a", "b", "b"] * 2, "Eye": ["x", "y"] * 4,
                                              "Sex": ["m"] * 4 + ["f"] * 4, "count": range(8)}), "count")
    with pytest.raises(TabreleaseError, match=r"write \[.*\] for one margin of .* together, or \[.*\]\[.*\] for a "
                                              r"margin of each alone"):
        parse_model(spec, table)
    assert parse_model("AB BC", table).generators == parse_model("[AB][BC]", table).generators
    assert parse_model("[Hair,Eye]", table).generators == ((0, 1),)


def test_a_letter_that_names_one_variable_and_is_the_position_letter_of_another_is_refused():
    """A new user's trial: with columns B, A, C, [AC] was read by name (the variables at positions 2 and 3), where
    the README says bracket letters are positions. Such a letter is refused; [A,C] names them; where the names are
    the letters of their own positions, nothing changes."""
    import numpy as np

    from tabrelease import ContingencyTable
    from tabrelease.errors import TabreleaseError
    from tabrelease.models import parse_model

    levels = (("x", "y"), ("p", "q"), ("u", "v"))
    table = ContingencyTable(("B", "A", "C"), levels, np.ones((2, 2, 2), dtype=np.int64), "bac")
    for text in ("[AC]", "[A]", "[BA]"):
        with pytest.raises(TabreleaseError, match="is the name of variable .* and the letter of variable"):
            parse_model(text, table)
    assert parse_model("[A,C]", table).generators == ((1, 2),)
    assert parse_model("[C]", table).generators == ((2,),)
    ordered = ContingencyTable(("A", "B", "C"), levels, np.ones((2, 2, 2), dtype=np.int64), "abc")
    assert parse_model("[AC]", ordered).generators == ((0, 2),)
