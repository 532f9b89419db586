"""Labels chosen to attack whoever opens the outputs: formulas in spreadsheets, markup in the audit page.

A level or variable named `=1+1` (or `=HYPERLINK(...)`, `@SUM(...)`) is a live formula when a spreadsheet opens a
CSV field or a workbook cell that starts with it; `<script>` in the audit page would run. The outputs must carry
every label as text, and read back as the labels they were.
"""

from __future__ import annotations

import csv
import zipfile

import numpy as np
import pandas as pd
import pytest

from tabrelease import table_from_frame
from tabrelease.cli import main
from tabrelease.tables import FORMULA_TRIGGERS, csv_field_for_label, csv_label_from_field, load_table

# Levels of two variables whose names are formulas too: triggers of OWASP's rule, a negative number, a label that
# starts with a quote before a trigger, and harmless ones.
LEVELS_A = ["=1+1", "+44", "-1", "@SUM(A1)"]
LEVELS_B = ["'=quoted", "plain", "a=b"]
# As an input file holds them: formulas as they are (as agencies' files have them), and the label '=quoted with the
# protective quote of the rule in front, as this tool would write it.
FIELDS_B = ["''=quoted", "plain", "a=b"]


def _hostile_csv(path):
    rows = ["=HYPERLINK(\"http://x\"),@who,count"]
    rows += [f"{a},{b},{3 + i + 2 * j}" for i, a in enumerate(LEVELS_A) for j, b in enumerate(FIELDS_B)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("label", ["=1+1", "+1", "-1", "@x", "\tx", "\rx", "'=x", "''=x", "'", "''", "'x", "x=1",
                                   "1", "", "-", "'-1"])
def test_the_csv_rule_protects_formula_like_labels_and_is_undone_exactly(label):
    field = csv_field_for_label(label)
    assert not field.startswith(FORMULA_TRIGGERS)  # a spreadsheet reads every field as text
    assert field == ("'" + label if label.lstrip("'").startswith(FORMULA_TRIGGERS) else label)
    assert csv_label_from_field(field) == label


@pytest.mark.e2e
def test_released_csv_files_quote_formula_labels_and_keep_counts(tmp_path, capsys):
    pytest.importorskip("openpyxl")
    source = _hostile_csv(tmp_path / "hostile.csv")
    out = tmp_path / "rel"
    code = main(["release", str(source), "--margins", "[AB]", "--epsilon", "1", "--simulate", "--seed", "2",
                 "--xlsx", "--out", str(out)])
    _, err = capsys.readouterr()
    assert code == 0, err
    table = load_table(source)
    assert table.variables == ('=HYPERLINK("http://x")', "@who")
    assert set(table.levels[0]) == set(LEVELS_A) and set(table.levels[1]) == set(LEVELS_B)
    # Every field that is a label and would start a formula is behind a quote; the count column is numbers as written.
    for path in [*(out / "public").glob("*.csv"), out / "internal" / "released_table.csv"]:
        with open(path, newline="", encoding="utf-8") as fh:
            header, *body = list(csv.reader(fh))
        assert header == ["'=HYPERLINK(\"http://x\")", "'@who", "count"], path.name
        for row in body:
            assert not any(field.startswith(FORMULA_TRIGGERS) for field in row[:-1]), row
            assert row[-1].isdigit(), row
        assert {row[0] for row in body} == {"'=1+1", "'+44", "'-1", "'@SUM(A1)"}
        assert {row[1] for row in body} == {"''=quoted", "plain", "a=b"}
    # Read back by the tool, the files give the labels and the counts they were written from.
    released = load_table(out / "internal" / "released_table.csv")
    assert released.variables == table.variables and released.levels == table.levels
    margin = pd.read_csv(next((out / "public").glob("*.csv")), dtype=str)
    assert margin["count"].astype(int).sum() == released.n
    # The workbook: every label a text cell (never a formula), every count a number.
    from openpyxl import load_workbook

    book = load_workbook(out / "public" / "margins.xlsx")
    sheet = book.worksheets[2]  # the cross-tab of [AB]: A down, B across
    rows = list(sheet.iter_rows())
    assert rows[1][1].value == table.variables[1] and rows[2][0].value == table.variables[0]
    assert [c.value for c in rows[2][1:]] == list(table.levels[1]) + ["Total"]
    assert [r[0].value for r in rows[3:3 + len(LEVELS_A)]] == list(table.levels[0])
    assert set(table.levels[0]) == set(LEVELS_A) and set(table.levels[1]) == set(LEVELS_B)
    for row in rows:
        for cell in row:
            if cell.value is not None:
                assert cell.data_type == ("n" if isinstance(cell.value, int) else "s"), (cell.coordinate, cell.value)
    assert all(isinstance(c.value, int) for r in rows[3:3 + len(LEVELS_A)] for c in r[1:])
    with zipfile.ZipFile(out / "public" / "margins.xlsx") as archive:
        sheets = [n for n in archive.namelist() if n.startswith("xl/worksheets/")]
        assert not any("<f>" in archive.read(n).decode() or "<f " in archive.read(n).decode() for n in sheets)


def test_workbook_cells_hold_control_characters_as_their_pictures(tmp_path):
    # XML cannot hold most control characters; openpyxl refuses them (after the budget is spent, in a release).
    openpyxl = pytest.importorskip("openpyxl")
    from tabrelease.workbook import append_row

    book = openpyxl.Workbook()
    append_row(book.active, ["bell\x07", "=2*3", 5, None, 2.5])
    book.save(tmp_path / "w.xlsx")
    cells = next(openpyxl.load_workbook(tmp_path / "w.xlsx").active.iter_rows())
    assert [c.value for c in cells] == ["bell\u2407", "=2*3", 5, None, 2.5]
    assert [c.data_type for c in cells[:3]] == ["s", "s", "n"]


@pytest.mark.e2e
@pytest.mark.figures
def test_the_audit_page_escapes_every_label(tmp_path):
    from tabrelease import ReleaseSpec, loss_of, publish_release

    script, attribute, entity = "<script>alert(1)</script>", '"onload=alert(2)', "&amp;"
    frame = pd.DataFrame(
        [(a, b, c, 2 + i) for i, (a, b, c) in enumerate(
            (a, b, c) for a in (script, "x") for b in (attribute, entity) for c in ("<b>", "</table>"))],
        columns=[script, attribute, entity, "count"])
    table = table_from_frame(frame, name="<img src=x onerror=alert(3)>")
    out = tmp_path / "rel"
    publish_release(table, ReleaseSpec(loss=loss_of(1.0), margins=[(0, 1), (1, 2)], mode="simulation", seed=3), out)
    html = (out / "internal" / "audit.html").read_text(encoding="utf-8")
    # Nothing of the labels is markup: no script element, no injected attribute or image, no raw entity.
    assert "<script" not in html.lower()
    assert "<img src=x" not in html and '"onload=' not in html and "<b>" not in html
    # The labels are on the page, escaped: the table's name and the variables' names in the plan's blocks.
    assert "&lt;img src=x onerror=alert(3)&gt;" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&#34;onload=alert(2)" in html
    assert "&amp;amp;" in html
    # The page's own markup is intact: as many table openings as closings.
    assert html.count("<table") == html.count("</table>")


def test_duplicate_column_names_in_a_frame_are_one_line_naming_the_columns_by_position():
    # By position, not by name: a file read without its header row has a record for names (a review's trial).
    from tabrelease import TabreleaseError, table_from_microdata

    frame = pd.DataFrame([["x", "p", 1], ["x", "q", 2], ["y", "p", 3], ["y", "q", 4]], columns=["a", "a", "count"])
    with pytest.raises(TabreleaseError, match="the table: columns 1 and 2 have the same name"):
        table_from_frame(frame)
    with pytest.raises(TabreleaseError, match="the table: columns 2 and 3 have the same name"):
        table_from_frame(frame.set_axis(["a", "count", "count"], axis=1))
    with pytest.raises(TabreleaseError, match="columns 1 and 2 have the same name"):
        table_from_microdata(frame.iloc[:, :2])
    # Names that are not text are taken as text (they were looked up as text, and failed).
    table = table_from_frame(frame.set_axis([0, 1, "count"], axis=1))
    assert table.variables == ("0", "1")
    np.testing.assert_array_equal(table.counts, [[1, 2], [3, 4]])


@pytest.mark.e2e
def test_a_sweep_of_a_table_named_like_a_formula_writes_text(tmp_path):
    # A sweep's table is named after its file: =cmd.csv is the table "=cmd", in every row of runs.csv and summary.csv.
    from tabrelease import make_grid, run_sweep
    from tabrelease.sweeps.summary import write_sweep_summary

    frame = pd.DataFrame({"A": ["0", "0", "1", "1"], "B": ["0", "1", "0", "1"], "count": [30, 10, 20, 40]})
    name = "=cmd $\\frac$"  # a formula, and TeX (a figure's title must show it as text)
    grid = make_grid([table_from_frame(frame, name=name)], [1.0], 2, margins=[[(0,), (1,)]], mechanisms=["planned"])
    out = tmp_path / "sweep"
    result = run_sweep(grid, out, progress=False)
    files = write_sweep_summary(result.runs, out)
    assert "max_l1_error.svg" in files
    # The table's name is the panel's title, as text (escaped), not TeX: a formula or markup stays what it is.
    assert "=cmd $\\frac$" in (out / "max_l1_error.svg").read_text()
    for file in ("runs.csv", "margin_errors.csv", "summary.csv"):
        with open(out / file, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        assert not any(field.startswith(FORMULA_TRIGGERS) for row in rows for field in row
                       if not _is_number(field)), file
    runs = pd.read_csv(out / "runs.csv", dtype=str)
    assert set(runs["table"]) == {"'" + name} and set(runs["run_id"].str[:2]) == {"'="}
    assert pd.read_parquet(out / "runs.parquet")["table"].tolist() == [name, name]  # the data keep the name


def _is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True
