"""CSV files as agencies write them: other separators, Latin-1, decimal/thousands marks, trailing blank rows and
trailing separators. Each fixture in tests/data is compared with a clean, comma-separated UTF-8 file of the same data
written out by hand here (the independent expectation)."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tabrelease.cli import main
from tabrelease.errors import TabreleaseError
from tabrelease.tables import CsvOptions, read_microdata, read_table_csv

DATA = Path(__file__).parent / "data"


def _same_table(got, expected):
    assert got.variables == expected.variables
    assert got.levels == expected.levels
    np.testing.assert_array_equal(got.counts, expected.counts)


def _clean(tmp_path, text, name="clean.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_semicolon_latin1_with_thousands_marks_equals_the_clean_csv(tmp_path):
    clean = _clean(tmp_path, "région,sexe,nombre\nÎle,femme,1204\nÎle,homme,987\nCôte,femme,0\nCôte,homme,2010\n")
    expected = read_table_csv(clean, "nombre")
    got = read_table_csv(DATA / "latin1_semicolon.csv", "nombre",
                         csv_options=CsvOptions(encoding="latin-1", thousands="."))
    _same_table(got, expected)
    assert got.levels[0] == ("Côte", "Île")  # the accented labels decoded, not mangled


def test_the_separator_is_detected_and_can_be_forced(tmp_path):
    expected = read_table_csv(_clean(tmp_path, "region,sex,count\nnorth,f,3\nnorth,m,5\nsouth,f,0\nsouth,m,7\n"))
    _same_table(read_table_csv(DATA / "tab_trailing.tsv"), expected)
    _same_table(read_table_csv(DATA / "tab_trailing.tsv", csv_options=CsvOptions(sep="\t")), expected)
    # Forcing the wrong separator leaves one column: there is no count column, said in one line.
    with pytest.raises(TabreleaseError, match="no count column"):
        read_table_csv(DATA / "tab_trailing.tsv", csv_options=CsvOptions(sep=","))


def test_pipe_separator_decimal_comma_and_a_bom(tmp_path):
    expected = read_table_csv(_clean(tmp_path, "a,b,count\n0,0,1\n0,1,2\n1,0,3\n1,1,4000\n"))
    path = tmp_path / "pipe.csv"
    path.write_bytes("a|b|count\n0|0|1,0\n0|1|2\n1|0|3,00\n1|1|4 000\n".encode("utf-8-sig"))
    got = read_table_csv(path, csv_options=CsvOptions(decimal=",", thousands=" "))
    _same_table(got, expected)
    assert got.variables == ("a", "b")  # the BOM is not part of the first name


def test_a_fractional_count_with_a_decimal_comma_is_still_refused(tmp_path):
    path = tmp_path / "frac.csv"
    path.write_text("a;count\n0;1,5\n1;2\n", encoding="utf-8")
    with pytest.raises(TabreleaseError, match=r"a fractional count in column 'count' \(data row 1\)"):
        read_table_csv(path, csv_options=CsvOptions(decimal=","))


def test_whole_counts_with_a_point_or_an_exponent_are_read_as_spreadsheets_export_them(tmp_path):
    """As the README says: 3.0 is 3, 1e3 is 1000, 1.5e1 is 15; 2.5e-1 is fractional and refused."""
    path = tmp_path / "exported.csv"
    path.write_text("a,count\n0,3.0\n1,1e3\n2,1.5e1\n3,4\n", encoding="utf-8")
    assert read_table_csv(path).counts.tolist() == [3, 1000, 15, 4]
    path.write_text("a,count\n0,2.5e-1\n1,4\n", encoding="utf-8")
    with pytest.raises(TabreleaseError, match=r"a fractional count in column 'count' \(data row 1\)"):
        read_table_csv(path)


def test_microdata_with_trailing_commas_and_blank_rows(tmp_path):
    clean = _clean(tmp_path, "sex,age,region\nf,young,north\nm,old,north\nf,old,south\nf,young,south\nm,young,north\n")
    _same_table(read_microdata(DATA / "microdata_trailing.csv"), read_microdata(clean))
    _same_table(read_microdata(DATA / "microdata_trailing.csv", ["age", "sex"]), read_microdata(clean, ["age", "sex"]))


def _cli_error(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert err.startswith("tabrelease: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.e2e
def test_a_ragged_row_is_one_line_naming_the_row(tmp_path, capsys):
    path = tmp_path / "ragged.csv"
    path.write_text("a,b,count\n0,0,1\n0,1,2,9\n1,0,3\n1,1,4\n", encoding="utf-8")
    err = _cli_error(["fit", str(path)], capsys)
    assert "data row 2 has 4 fields where the header has 3" in err
    assert "9" not in err.replace(str(path), "")  # the stray value is not echoed


@pytest.mark.e2e
def test_a_latin1_file_read_as_utf8_suggests_an_encoding_without_echoing_content(tmp_path, capsys):
    err = _cli_error(["fit", str(DATA / "latin1_semicolon.csv"), "--count-column", "nombre"], capsys)
    assert "--encoding latin-1" in err and "cp1252" in err
    assert "1.204" not in err and "Île" not in err


@pytest.mark.e2e
def test_the_cli_reads_the_latin1_semicolon_file_with_its_options(tmp_path, capsys):
    code = main(["fit", str(DATA / "latin1_semicolon.csv"), "--count-column", "nombre", "--encoding", "latin-1",
                 "--sep", "semicolon", "--thousands", ".", "--model", "[A][B]", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["n"] == 1204 + 987 + 0 + 2010  # the thousands marks removed, not read as decimals
    assert report["variables"] == ["région", "sexe"]


# --- a metadata file -------------------------------------------------------------------------------
def test_metadata_declares_variables_levels_and_labels(tmp_path, capsys):
    from tabrelease.cli._common import add_table_arguments, load_from_args
    from tabrelease.tables import people_names
    import argparse

    parser = argparse.ArgumentParser()
    add_table_arguments(parser)
    args = parser.parse_args([str(DATA / "microdata_trailing.csv"), "--microdata",
                              "--metadata", str(DATA / "microdata_meta.json")])
    table = load_from_args(args)
    # Counted by hand from the five records: (age, sex) young-f 2, old-m 1, old-f 1, young-m 1, nobody middle.
    assert table.variables == ("age", "sex")
    assert table.levels == (("young", "middle", "old"), ("m", "f"))
    np.testing.assert_array_equal(table.counts, [[1, 2], [0, 0], [1, 1]])
    assert people_names(table) == (("age group", "sex"),
                                   (("under 30", "30 to 59", "60 and over"), ("male", "female")))


@pytest.mark.e2e
def test_a_value_not_declared_in_the_metadata_is_one_line_naming_the_variable(tmp_path, capsys):
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"variables": [{"name": "age", "levels": ["young", "middle"]},
                                              {"name": "sex", "levels": ["m", "f"]}]}), encoding="utf-8")
    err = _cli_error(["fit", str(DATA / "microdata_trailing.csv"), "--microdata", "--metadata", str(meta),
                      "--model", "[A][B]"], capsys)
    assert "variable 'age' has values that are not among its declared levels" in err and "'old'" not in err


@pytest.mark.e2e
@pytest.mark.parametrize("engine", ["arrow", "pandas"])
def test_a_repeated_cell_or_a_one_level_column_is_refused_without_its_values(tmp_path, capsys, engine):
    """A reviewer's trial: a sparse long table listing one cell twice was refused with "duplicate cell {'A':
    'SECRET', ...}", an undeclared category, and a microdata column holding one value with "has only one level
    (['SECRETA'])", both before the refusal of undeclared levels. They now name data rows and the variable only."""
    (tmp_path / "dup.csv").write_text("A,B,count\na1,b1,5\nSECRET,b2,17\nSECRET,b2,3\n")
    (tmp_path / "lv.json").write_text(json.dumps({"A": ["a1", "a2"], "B": ["b1", "b2"]}))
    (tmp_path / "one.csv").write_text("A,B\nSECRETA,b1\nSECRETA,b2\n")
    (tmp_path / "lvB.json").write_text(json.dumps({"B": ["b1", "b2"]}))
    err = _cli_error(["release", str(tmp_path / "dup.csv"), "--sparse", "--levels", str(tmp_path / "lv.json"),
                      "--epsilon", "1", "--margins", "[A][B]", "--out", str(tmp_path / "o1")], capsys)
    assert "data rows 2 and 3 describe the same cell" in err and "SECRET" not in err.replace(str(tmp_path), "")
    # Without a levels file naming B, the header is not known to be one: the variable is numbered, not named.
    for levels, named in (([], "variable 1"), (["--levels", str(tmp_path / "lvB.json")], "variable 'A'")):
        err = _cli_error(["release", str(tmp_path / "one.csv"), "--microdata", "--engine", engine, *levels,
                          "--epsilon", "1", "--margins", "[A][B]", "--out", str(tmp_path / "o2")], capsys)
        assert f"{named} has only one level" in err and "SECRET" not in err.replace(str(tmp_path), "")


@pytest.mark.e2e
def test_the_released_files_carry_the_metadata_labels(tmp_path, capsys):
    out = tmp_path / "rel"
    code = main(["release", str(DATA / "microdata_trailing.csv"), "--microdata", "--metadata",
                 str(DATA / "microdata_meta.json"), "--margins", "[A][B]", "--epsilon", "1", "--simulate", "--seed",
                 "1", "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    text = "".join(p.read_text(encoding="utf-8") for p in sorted((out / "public").glob("*.csv")))
    assert "60 and over" in text and "female" in text


# --- Excel input -------------------------------------------------------------------------------------
def _workbook(path, sheets):
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, rows in sheets.items():
        sheet = book.create_sheet(title)
        for row in rows:
            sheet.append(row)
    book.save(path)
    return path


def test_an_xlsx_table_with_blank_trailing_rows_and_columns_equals_the_clean_csv(tmp_path):
    expected = read_table_csv(_clean(tmp_path, "region,sex,count\nnorth,f,3\nnorth,m,5\nsouth,f,0\nsouth,m,7\n"))
    rows = [["region", "sex", "count", None], ["north", "f", 3, None], ["north", "m", 5.0, None],
            ["south", "f", 0, None], ["south", "m", 7, None], [None, None, None, None]]
    path = _workbook(tmp_path / "t.xlsx", {"notes": [["read me"]], "counts": rows})
    from tabrelease.tables import load_table

    _same_table(load_table(path, csv_options=CsvOptions(sheet="counts")), expected)
    with pytest.raises(TabreleaseError, match=r"has no sheet 'nope'; its sheets are \['notes', 'counts'\]"):
        load_table(path, csv_options=CsvOptions(sheet="nope"))


def test_xlsx_microdata_equals_the_clean_csv(tmp_path):
    clean = _clean(tmp_path, "sex,age\nf,young\nm,old\nf,old\n")
    path = _workbook(tmp_path / "m.xlsx", {"data": [["sex", "age"], ["f", "young"], ["m", "old"], ["f", "old"], []]})
    _same_table(read_microdata(path), read_microdata(clean))


@pytest.mark.e2e
def test_xlsx_without_openpyxl_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    path = _workbook(tmp_path / "t.xlsx", {"s": [["a", "count"], ["0", 1], ["1", 2]]})
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openpyxl" else real(name, *a))
    err = _cli_error(["fit", str(path), "--model", "[A]"], capsys)
    assert "pip install tabrelease[excel]" in err


@pytest.mark.parametrize("text", [
    "A,B,count\n0,0,1\n0,1,2\n1,0,3\n1,1,4\n",
    "A;B;count\r\n x ;y;1\r\nz;y;2\r\n;;\r\n\r\n",  # padded fields, a trailing row of separators, CRLF
    "A\tB\tcount\nx\ty\t1\nz\ty\t2\n\n\n",  # trailing blank rows
    "A,B,count,\nx,y,1,\nz,y,2,\n",  # trailing separators: the careful reader
    'A,B,count\n"x, with comma",y,1\nz,y,2\n',  # quotes: the careful reader
    "A,B,count\nx,y,1\n,,\nz,y,2\n",  # a row of separators inside: refused by number
    "A,B,count\nx,y\nz,y,2\n",  # a short row: refused by number
    "A,A,count\nx,y,1\n",  # duplicate names: refused
])
def test_the_fast_reader_reads_what_the_careful_one_does(tmp_path, monkeypatch, text):
    # The same file through pandas' C parser and through the csv module gives the same frame, or the same refusal.
    from tabrelease.tables import readers as tables

    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())

    def read():
        try:
            return tables.read_csv_frame(path)
        except TabreleaseError as exc:
            return str(exc)

    fast = read()
    monkeypatch.setattr(tables, "_fast_frame", lambda *a, **k: None)
    careful = read()
    if isinstance(careful, str):
        assert fast == careful
    else:
        pd.testing.assert_frame_equal(fast, careful)


def test_a_clean_file_takes_the_fast_reader(tmp_path, monkeypatch):
    import csv as csv_module

    path = tmp_path / "t.csv"
    path.write_text("A,B,count\nx,y,1\nz,y,2\n")
    monkeypatch.setattr(csv_module, "reader", None)  # the careful reader would fail
    from tabrelease.tables import read_csv_frame

    assert read_csv_frame(path)["count"].tolist() == ["1", "2"]


def test_a_workbook_named_csv_is_said_to_be_a_workbook(tmp_path, capsys):
    """A new user's trial: an .xlsx file renamed .csv was refused as text of the wrong encoding, with the advice to
    try --encoding latin-1, which does not help."""
    path = _workbook(tmp_path / "book.xlsx", {"t": [["region", "count"], ["north", 3], ["south", 4]]})
    named = path.rename(tmp_path / "table.csv")
    assert main(["release", str(named), "--epsilon", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "is a zip archive, as an Excel workbook is, not CSV text" in err and "latin-1" not in err
    assert main(["release", str(named), "--microdata", "--epsilon", "1", "--out", str(tmp_path / "r")]) == 2
    assert "is a zip archive, as an Excel workbook is, not CSV text" in capsys.readouterr().err


def _random_csv(rng) -> str:
    """A small CSV file of awkward fields: quoted or not, with separators, quotes, spaces, line breaks inside; now
    and then a short or long row, a blank row, trailing blank rows, CRLF, a carriage return alone."""
    import csv as csv_module
    import io as io_module

    pieces = ["a", "b", "x y", " p ", "", ",", '"', "\n", "\r\n", "\r", "\t", "\u00a0", "1", "'=q"]
    width = int(rng.integers(1, 4))
    rows = [[f"c{j}" for j in range(width)]]
    for _ in range(int(rng.integers(1, 6))):
        n = width + (int(rng.choice([-1, 1])) if rng.random() < 0.1 else 0)
        rows.append(["".join(rng.choice(pieces, int(rng.integers(0, 3)))) or "v" for _ in range(max(n, 1))])
    out = io_module.StringIO()
    quoting = [csv_module.QUOTE_MINIMAL, csv_module.QUOTE_ALL, csv_module.QUOTE_NONNUMERIC][int(rng.integers(0, 3))]
    ending = str(rng.choice(["\n", "\r\n", "\r"], p=[0.45, 0.45, 0.1]))
    csv_module.writer(out, quoting=quoting, lineterminator=ending).writerows(rows)
    text = out.getvalue()
    if rng.random() < 0.1:
        lines = text.split("\n")
        lines.insert(int(rng.integers(1, max(len(lines), 2))), "")
        text = "\n".join(lines)
    return text + ("\n\n" if rng.random() < 0.2 else "")


def _first_and_separator(text: str) -> tuple[str, str]:
    return next(line for line in text.splitlines() if line.strip()), ","


def test_the_fast_reader_reads_what_the_careful_one_does_on_random_quoted_files(tmp_path, monkeypatch):
    """The quoted files (R's write.csv quotes every label) now also go through pandas' C parser, its rows' widths
    checked first by the csv module: 400 random files of awkward fields give the same frame, or the same
    refusal, as the careful reader."""
    from tabrelease.tables import readers as tables

    rng = np.random.default_rng(20261203)
    path = tmp_path / "t.csv"
    fast_frame = tables._fast_frame

    def read(fast):
        monkeypatch.setattr(tables, "_fast_frame", fast_frame if fast else (lambda *a, **k: None))
        try:
            return tables.read_csv_frame(path)
        except TabreleaseError as exc:
            return str(exc)

    taken = 0
    for _ in range(400):
        text = _random_csv(rng)
        path.write_bytes(text.encode())
        fast, careful = read(True), read(False)
        if isinstance(careful, str):
            assert isinstance(fast, str) and fast == careful, (text, fast, careful)
        else:
            assert not isinstance(fast, str), (text, fast)
            pd.testing.assert_frame_equal(fast, careful, obj=repr(text))
        if not isinstance(careful, str):
            taken += fast_frame(path, text, *_first_and_separator(text), None) is not None
    assert taken > 100  # the fast reader did read most of the files it could


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
@pytest.mark.parametrize("text, fields, header", [
    ("sex,area\nmale,urban,\nfemale,rural\n", 3, 2),  # one row's empty extra field
    ("sex,area,\nmale,urban\nfemale,rural,\n", 2, 3),  # trailing separators on some rows only
    ("sex,area,,\nmale,urban,,\nfemale,rural,\n", 3, 4),
])
def test_a_row_with_empty_fields_past_the_header_is_ragged_in_either_engine(engine, text, fields, header, tmp_path,
                                                                           capsys):
    """A new user's trial: the in-memory reader took a row with an empty field more than the header, and rows
    without the header's trailing separators, which the streaming engine refused and the README calls ragged."""
    path = tmp_path / "people.csv"
    path.write_text(text)
    assert main(["release", str(path), "--microdata", "--variables", "sex,area", "--engine", engine, "--margins",
                 "[AB]", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"has {fields} fields where the header has {header}" in err and not (tmp_path / "r").exists()
    path.write_text("sex,area,\nmale,urban,\nfemale,rural,\n")  # on every row, as a spreadsheet writes them: read
    assert main(["release", str(path), "--microdata", "--variables", "sex,area", "--engine", engine, "--margins",
                 "[AB]", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(tmp_path / "r")]) == 0


MISSING_ROWS = [("male", "urban", "yes"), ("female", "", "no"), ("male", "rural", " "), ("female", "urban", "yes"),
                ("male", "rural", "no"), ("female", "", "")]


@pytest.mark.parametrize("engine", ["arrow", "pandas", "dask"])
@pytest.mark.parametrize("form", ["csv", "parquet"])
def test_missing_values_are_read_as_the_level_given_in_every_engine(engine, form, tmp_path):
    """An agency's microdata have missing values (an empty field, a Parquet null), which were refused with no way
    round but editing the file. With `missing` (--missing-level) each is read as that level, in every engine; the
    counts match a count made by hand of the rows with the blanks filled in."""
    import pandas as pd

    from tabrelease.tables import CsvOptions

    frame = pd.DataFrame(MISSING_ROWS, columns=["sex", "area", "smoker"])
    path = tmp_path / f"people.{form}"
    if form == "csv":
        frame.to_csv(path, index=False)
    else:  # nulls, one column of them a categorical (pandas' dictionary)
        frame.replace({"": None, " ": None}).astype({"area": "category"}).to_parquet(path)
    table = read_microdata(path, engine=engine, csv_options=CsvOptions(missing="unknown"))
    assert table.variables == ("sex", "area", "smoker")
    assert table.levels == (("female", "male"), ("rural", "unknown", "urban"), ("no", "unknown", "yes"))
    filled = [tuple(v.strip() or "unknown" for v in row) for row in MISSING_ROWS]
    expected = np.zeros((2, 3, 3), dtype=np.int64)
    for row in filled:
        expected[tuple(lv.index(v) for lv, v in zip(table.levels, row))] += 1
    margins = [(0, 1), (1, 2), (0, 1, 2)]
    if hasattr(table, "count_margins"):
        table.count_margins(margins)
    for axes in margins:
        other = tuple(a for a in range(3) if a not in axes)
        np.testing.assert_array_equal(table.margin_counts(axes), expected.sum(axis=other))
    with pytest.raises(TabreleaseError, match="has missing values: --missing-level LABEL"):
        table = read_microdata(path, engine=engine)
        table.count_margins(margins) if hasattr(table, "count_margins") else None


def test_a_missing_level_reads_a_long_tables_blank_label_and_must_be_declared_for_a_release(tmp_path, capsys):
    """A long table's blank label is read as the missing level too; in release mode the level is declared as any
    other (refused where it is not: it is a value of the data); the batch key is missing_level."""
    path = tmp_path / "cells.csv"
    path.write_text("sex,area,count\nmale,urban,3\nmale,,2\nfemale,urban,4\nfemale,,1\n")
    from tabrelease.tables import CsvOptions

    table = read_table_csv(path, "count", csv_options=CsvOptions(missing="unknown"))
    assert table.levels == (("female", "male"), ("unknown", "urban"))
    np.testing.assert_array_equal(table.counts, [[1, 4], [2, 3]])
    (tmp_path / "lv.json").write_text('{"sex": ["female", "male"], "area": ["urban"]}')
    argv = ["release", str(path), "--levels", str(tmp_path / "lv.json"), "--missing-level", "unknown",
            "--epsilon", "1", "--margins", "[AB]", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "not among its declared levels" in capsys.readouterr().err
    (tmp_path / "lv.json").write_text('{"sex": ["female", "male"], "area": ["urban", "unknown"]}')
    assert main(["ledger", "init", str(tmp_path / "L.json")]) == 0
    (tmp_path / "b.toml").write_text(
        f'ledger = "L.json"\n[datasets.d]\nfile = "cells.csv"\nlevels = "lv.json"\nmissing_level = "unknown"\n'
        'budget = 5.0\n[[releases]]\ndataset = "d"\nepsilon = 0.5\nout = "r1"\nsimulate = true\nmargins = "[AB]"\n')
    assert main(["batch", str(tmp_path / "b.toml")]) == 0, capsys.readouterr().err
    released = (tmp_path / "r1" / "public").glob("*.csv")
    assert any("unknown" in p.read_text() for p in released)


def test_a_workbook_cell_holding_the_text_none_or_na_is_a_label_as_in_a_csv_file(tmp_path):
    """A new user's trial: Arthritis's level "None" (and a long table's "NA") was refused as missing in a workbook,
    and read as a label from the same data in CSV; an empty cell is still missing."""
    rows = [["treatment", "improved"], ["placebo", "None"], ["treated", "Some"], ["placebo", "NA"], ["treated", "None"]]
    table = read_microdata(_workbook(tmp_path / "a.xlsx", {"data": rows}), engine="pandas")
    csv = _clean(tmp_path, "\n".join(",".join(r) for r in rows) + "\n")
    _same_table(table, read_microdata(csv, engine="pandas"))
    assert table.levels[1] == ("NA", "None", "Some")
    rows[2][1] = None
    with pytest.raises(TabreleaseError, match="has missing values"):
        read_microdata(_workbook(tmp_path / "b.xlsx", {"data": rows}), engine="pandas")


def test_a_levels_files_names_and_levels_are_stripped_as_the_data_are(tmp_path):
    """A new user's trial: a level declared " Male " matched no record (fields are stripped) and was published
    as an always-empty category beside "Male", which the bundle's own `test` then took for an edited file. The
    levels file is read stripped, as the data and the metadata file are; a level repeated so is refused."""
    from tabrelease.tables.metadata import read_levels_file

    path = _clean(tmp_path, "sex,area\nmale,urban\nfemale,rural\nmale,rural\n", "people.csv")
    (tmp_path / "lv.json").write_text('{" sex ": ["female", " male "], "area": ["rural", "urban "]}')
    declared = read_levels_file(tmp_path / "lv.json")
    assert declared == {"sex": ["female", "male"], "area": ["rural", "urban"]}
    table = read_microdata(path, levels=declared)
    assert table.levels == (("female", "male"), ("rural", "urban")) and table.n == 3
    for text, said in (('{"sex": ["Male", " Male "]}', "lists the level 'Male' twice"),
                       ('{"sex": ["f", " "]}', "declares an empty level"),
                       ('{"sex": ["f", "m"], "sex ": ["f", "m"]}', "declares the variable 'sex' twice")):
        (tmp_path / "bad.json").write_text(text)
        with pytest.raises(TabreleaseError, match=said):
            read_levels_file(tmp_path / "bad.json")


@pytest.mark.parametrize("engine", ["arrow", "pandas", "dask"])
@pytest.mark.parametrize("variables", [None, ["smoker", "sex"]])
def test_with_a_missing_level_rows_of_separators_only_are_no_people_in_any_engine(engine, variables, tmp_path):
    """With --missing-level, a row of separators only (a spreadsheet's trailing rows) had been counted by the
    streaming engine as a person of missing values, where the in-memory reader drops trailing ones: the counts of
    two engines differed. Every engine now counts the rows of people alone; one inside the file is refused by the
    arrow and pandas readers (named by its data row) and dropped by Dask's partitions."""
    from tabrelease.tables import CsvOptions

    body = "sex,area,smoker\nmale,urban,yes\nfemale,,no\nmale,rural,\nfemale,urban,yes\n"
    options = CsvOptions(missing="unknown")
    clean = read_microdata(_clean(tmp_path, body), variables, engine="pandas", csv_options=options)
    trailing = read_microdata(_clean(tmp_path, body + ",,\n , ,\n,,\n", "trailing.csv"), variables, engine=engine,
                              csv_options=options)
    _same_table(trailing, clean)
    inside = _clean(tmp_path, body.replace("female,urban,yes\n", ",,\nfemale,urban,yes\n"), "inside.csv")
    if engine == "dask":
        _same_table(read_microdata(inside, variables, engine=engine, csv_options=options), clean)
    else:
        with pytest.raises(TabreleaseError, match="data row 4 is blank"):
            read_microdata(inside, variables, engine=engine, csv_options=options)


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
def test_utf16_text_is_named_as_such_with_the_encoding_to_give(engine, tmp_path, capsys):
    """A new user's trial: Excel's "Unicode text" (UTF-16) was advised to try latin-1, which then said "data row 33
    has 1 fields"; UTF-16 without its byte-order mark under --encoding utf-16 was an internal error."""
    text = "sex,area\nmale,urban\nfemale,rural\nmale,rural\n"
    (tmp_path / "marked.csv").write_text(text, encoding="utf-16")
    (tmp_path / "bare.csv").write_bytes(text.encode("utf-16-le"))
    argv = ["release", "--microdata", "--engine", engine, "--epsilon", "1", "--simulate", "--seed", "1", "--margins",
            "[AB]", "--out", str(tmp_path / "r"), "--force"]
    for name, options, said in (("marked.csv", [], "looks like UTF-16 text"), ("marked.csv", ["--encoding", "latin-1"],
                                                                                "give --encoding utf-16"),
                                ("bare.csv", [], "give --encoding utf-16-le"),
                                ("bare.csv", ["--encoding", "utf-16"], "without a byte-order mark")):
        assert main([*argv, str(tmp_path / name), *options]) == 2, (name, options)
        err = capsys.readouterr().err
        assert said in err and "internal error" not in err and len(err.strip().splitlines()) == 1, err
    assert main([*argv, str(tmp_path / "marked.csv"), "--encoding", "utf-16"]) == 0
    assert main([*argv, str(tmp_path / "bare.csv"), "--encoding", "utf-16-le"]) == 0
