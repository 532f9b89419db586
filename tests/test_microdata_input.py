"""Microdata and Parquet input (issue 12): a file of one row per person, CSV or Parquet, counted straight into
the margins a release needs; a long table from Parquet as from CSV; bad input refused in one line."""

import json

import numpy as np
import pandas as pd
import pytest

import tabrelease as tr
from tabrelease.cli import main
from tabrelease.tables import margin_counts, read_microdata


@pytest.fixture()
def people(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({f"q{j}": rng.integers(0, 3, 3000) for j in range(5)})
    frame.to_parquet(tmp_path / "people.parquet")
    frame.to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "levels.json").write_text(json.dumps({f"q{j}": ["0", "1", "2"] for j in range(5)}))
    return tmp_path, frame


@pytest.mark.unit
def test_microdata_from_csv_and_parquet_count_what_pandas_counts(people):
    path, frame = people
    for name in ("people.csv", "people.parquet"):
        table = read_microdata(path / name, ["q0", "q2", "q4"])
        assert table.variables == ("q0", "q2", "q4") and table.n == 3000
        expected = frame.groupby(["q0", "q2"]).size()  # an independent count of the same records
        got = margin_counts(table.counts, (0, 1))
        for (a, b), count in expected.items():
            assert got[int(a), int(b)] == count


def test_the_release_of_a_parquet_file_is_that_of_the_same_csv(people, capsys):
    path, _ = people
    for name in ("people.csv", "people.parquet"):
        code = main(["release", str(path / name), "--microdata", "--levels", str(path / "levels.json"),
                     "--margins", "[AB][BC]", "--epsilon", "1", "--simulate", "--seed", "4",
                     "--out", str(path / f"out_{name}")])
        assert code == 0
    for margin in sorted(p.name for p in (path / "out_people.csv" / "public").glob("margin_*.csv")):
        assert ((path / "out_people.csv" / "public" / margin).read_text()
                == (path / "out_people.parquet" / "public" / margin).read_text())


@pytest.mark.unit
def test_a_long_table_from_parquet_is_the_long_table_from_csv(tmp_path):
    table = tr.builtin_table("czech")
    frame = table.to_frame()
    frame.to_parquet(tmp_path / "czech.parquet")
    from_parquet = tr.load_table(tmp_path / "czech.parquet")
    np.testing.assert_array_equal(from_parquet.counts, table.counts)


@pytest.mark.parametrize("arguments, message", [
    (["people.parquet", "--microdata", "--variables", "q0,zz"], "people.parquet has no column 'zz'; the columns are"),
    (["people.csv", "--microdata", "--variables", "q0,zz"], "people.csv has no column 'zz'; the columns are"),
    (["people.parquet"], "no count column 'count' in people.parquet; the columns are"),
    (["people.csv", "--variables", "q0,q1"], "--variables chooses the columns of a microdata file: add --microdata"),
    (["people.csv", "--microdata", "--sparse"], "--sparse is for long tables with a count column"),
])
def test_bad_microdata_input_is_one_line_and_writes_nothing(people, capsys, monkeypatch, arguments, message):
    path, _ = people
    monkeypatch.chdir(path)
    code = main(["release", *arguments, "--epsilon", "1", "--simulate", "--out", "r"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err
    assert not (path / "r").exists()


def test_a_repeated_variable_and_an_undeclared_one_are_named_in_one_line(people, capsys, monkeypatch):
    path, _ = people
    monkeypatch.chdir(path)
    levels = json.loads((path / "levels.json").read_text())
    levels.pop("q3")
    (path / "partial.json").write_text(json.dumps(levels))
    for arguments, message in [
        (["people.parquet", "--microdata", "--variables", "q0,q0"], "duplicate variable names: q0"),
        (["people.parquet", "--microdata", "--levels", "partial.json", "--margins", "[AB][CD]"],
         "declare every variable's levels (--levels FILE, or levels= in the API) (undeclared: q3)"),
    ]:
        code = main(["release", *arguments, "--epsilon", "1", "--out", "r"])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and message in err
        assert not (path / "r").exists()


def test_levels_read_from_the_data_are_named_in_release_json_too(people, capsys):
    path, _ = people
    code = main(["release", str(path / "people.csv"), "--microdata", "--margins", "[AB]", "--epsilon", "1",
                 "--simulate", "--seed", "1", "--out", str(path / "r")])
    assert code == 0
    out = capsys.readouterr().out
    public = json.loads((path / "r" / "public" / "release.json").read_text())
    assert any("the levels were read from the data" in w for w in public["warnings"])
    assert out.count("the levels were read from the data") == 1


@pytest.mark.parametrize("levels, written", [(3, True), (5, False)])
def test_a_microdata_release_writes_its_released_table_or_says_why_not(tmp_path, capsys, levels, written):
    # Six declared variables: 3^6 = 729 cells are fitted over every cell (a released table is written); 5^6 =
    # 15,625 are past the fit over cells, so the margins are fitted alone and the audit says there is no table.
    rng = np.random.default_rng(5)
    names = list("UVWXYZ")
    values = [chr(ord("a") + i) for i in range(levels)]
    pd.DataFrame({c: rng.choice(values, 800) for c in names}).to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "levels.json").write_text(json.dumps({c: values for c in names}))
    out = tmp_path / "out"
    assert main(["release", str(tmp_path / "people.csv"), "--microdata", "--levels", str(tmp_path / "levels.json"),
                 "--margins", "[UV][VW][WX][XY][YZ]", "--epsilon", "1", "--simulate", "--seed", "2",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    audit = json.loads((out / "internal" / "audit.json").read_text())
    table_file = out / "internal" / "released_table.csv"
    assert table_file.exists() is written
    html = (out / "internal" / "audit.html").read_text()
    if written:
        assert audit["released_table"] == {"file": "released_table.csv", "note": None}
        released = pd.read_csv(table_file, dtype={c: str for c in names})
        assert len(released) == levels ** 6 and released["count"].min() >= 0
        # It is the table whose margins were published: its [UV] margin is public/U__V.simulation.csv.
        published = pd.read_csv(out / "public" / "U__V.simulation.csv", dtype={"U": str, "V": str})
        summed = released.groupby(["U", "V"], as_index=False)["count"].sum()
        merged = published.merge(summed, on=["U", "V"], suffixes=("_published", "_table"))
        assert len(merged) == levels ** 2 and (merged.count_published == merged.count_table).all()
        assert "internal/released_table.csv" in html
    else:
        assert audit["released_table"]["file"] is None
        note = audit["released_table"]["note"]
        assert "no released table" in note and f"{levels ** 6:,} cells" in note
        assert note in html


def test_microdata_of_more_cells_than_a_margin_may_have_are_counted_as_margins(tmp_path, capsys):
    """A new user's trial: a table of between 2^26 and 2^27 cells (held as cells up to 2^27) was counted whole as one
    margin and refused as 'the margin over every variable' no one asked for. It is counted from its file as margins,
    as larger tables are, and its small margins are released."""
    from tabrelease.tables import MAX_MARGIN_CELLS, MAX_TABLE_CELLS

    sizes = {"u": 512, "v": 512, "w": 384}  # 100,663,296 cells
    cells = int(np.prod(list(sizes.values())))
    assert MAX_MARGIN_CELLS < cells <= MAX_TABLE_CELLS
    levels = {v: [f"{v}{i}" for i in range(k)] for v, k in sizes.items()}
    (tmp_path / "levels.json").write_text(json.dumps(levels))
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({v: rng.choice(levels[v][:4], size=200) for v in sizes})
    frame.to_csv(tmp_path / "people.csv", index=False)
    table = read_microdata(tmp_path / "people.csv", levels=levels)
    assert table.shape == (512, 512, 384) and table.n == 200
    assert type(table).__name__ == "FileTable"
    assert table.margin_counts((0,))[:4].tolist() == frame["u"].value_counts().reindex(levels["u"][:4]).tolist()
    out = tmp_path / "r"
    assert main(["release", str(tmp_path / "people.csv"), "--microdata", "--levels", str(tmp_path / "levels.json"),
                 "--margins", "[u][w]", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(out)]) == 0
    assert (out / "public" / "u.simulation.csv").exists()


def test_a_plan_whose_levels_were_read_from_the_data_says_so(tmp_path, capsys):
    """A new user's trial: `plan` on microdata without --levels took the levels from the data and still said it was
    "computed from the shape and margins only". It now notes where the shape came from (and not with --levels)."""
    from tabrelease.cli import main
    from tabrelease.cli.plan import LEVELS_READ_NOTE

    (tmp_path / "people.csv").write_text("a,b\nx,u\ny,u\nx,v\n")
    argv = ["plan", str(tmp_path / "people.csv"), "--microdata", "--margins", "[a,b]", "--epsilon", "1"]
    assert main(argv) == 0
    assert f"note: {LEVELS_READ_NOTE}" in capsys.readouterr().out.splitlines()
    assert main(argv + ["--json"]) == 0
    assert LEVELS_READ_NOTE in json.loads(capsys.readouterr().out)["notes"]
    (tmp_path / "levels.json").write_text(json.dumps({"a": ["x", "y"], "b": ["u", "v"]}))
    assert main(argv + ["--levels", str(tmp_path / "levels.json")]) == 0
    assert LEVELS_READ_NOTE not in capsys.readouterr().out
