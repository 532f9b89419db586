"""Publishable outputs (issue: "A publishable workbook and CSV"): the public CSV files in the dialect a statistical
office's spreadsheet reads (--out-sep, --out-bom), read back by every reader of the tool; and the workbook as
cross-tabs with a notes sheet that states the guarantee and each margin's data-independent margin of error.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from tabrelease import builtin_table, load_table
from tabrelease.batch import read_spec, run_batch
from tabrelease.cli import main
from tabrelease.ledger import init_ledger
from tabrelease.schemas import RELEASE, validate
from tabrelease.spec import spec_from_settings

BOM = b"\xef\xbb\xbf"
SEPARATORS = {"semicolon": ";", "tab": "\t", "pipe": "|"}


def _release(tmp_path, name, *extra, table="czech", margins="[AB][BCD]"):
    out = tmp_path / name
    args = ["release", table, "--epsilon", "1", "--simulate", "--seed", "4", "--margins", margins, "--out", str(out),
            *extra]
    assert main(args) == 0
    return out


def _rows(path, sep):
    with open(path, newline="", encoding="utf-8-sig") as fh:
        return list(csv.reader(fh, delimiter=sep))


@pytest.mark.unit
@pytest.mark.parametrize("given, name", [(";", "semicolon"), ("semicolon", "semicolon"), ("\t", "tab"),
                                         ("\\t", "tab"), ("TAB", "tab"), ("|", "pipe"), (",", "comma")])
def test_out_sep_is_taken_by_name_or_as_the_character(given, name):
    assert spec_from_settings({"epsilon": 1, "out_sep": given}).out_sep == name
    assert spec_from_settings({"epsilon": 1}).out_sep == "comma" and not spec_from_settings({"epsilon": 1}).out_bom


@pytest.mark.e2e
@pytest.mark.parametrize("sep", sorted(SEPARATORS))
def test_public_csv_files_in_another_dialect_hold_the_same_rows_and_read_back(sep, tmp_path, capsys):
    plain = _release(tmp_path, "plain")
    other = _release(tmp_path, "other", "--out-sep", SEPARATORS[sep], "--out-bom")
    capsys.readouterr()
    release = json.loads((other / "public" / "release.json").read_text(encoding="utf-8"))
    validate(release, RELEASE)
    assert release["csv"] == {"separator": SEPARATORS[sep], "bom": True}
    assert "csv" not in json.loads((plain / "public" / "release.json").read_text())  # the default is unchanged
    for margin in release["margins"]:
        written = (other / "public" / margin["file"]).read_bytes()
        default = (plain / "public" / margin["file"]).read_bytes()
        assert written.startswith(BOM) and not default.startswith(BOM)
        assert default.decode().splitlines()[0].count(",") == len(margin["variables"])  # comma, no BOM: as before
        # The same fields, split at the other separator (same seed: the same release).
        assert _rows(other / "public" / margin["file"], SEPARATORS[sep]) == _rows(plain / "public" / margin["file"],
                                                                                ",")
        # Every reader of a long table (release, fit, plan --reference: load_table) finds the separator itself.
        back, before = load_table(other / "public" / margin["file"]), load_table(plain / "public" / margin["file"])
        assert back.variables == before.variables and back.levels == before.levels
        np.testing.assert_array_equal(back.counts, before.counts)
    # The command line reads it too: fit, and plan with the margin as its public reference.
    first = other / "public" / release["margins"][1]["file"]
    assert main(["fit", str(first), "--model", "[AB][BC]", "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    assert fitted["n"] == int(load_table(plain / "public" / release["margins"][1]["file"]).n)
    from tests.helpers import neighbouring_reference

    neighbouring_reference(load_table(first), tmp_path / "ref.csv")
    assert main(["plan", str(first), "--margins", "[AB]", "--target-l1", "50", "--reference", str(tmp_path / "ref.csv"),
                 "--json"]) == 0
    json.loads(capsys.readouterr().out)


@pytest.mark.e2e
@pytest.mark.parametrize("sep", [",", ";"])
def test_labels_holding_separators_do_not_outvote_the_real_one(sep, tmp_path, capsys):
    # A reader detects the separator from the header (the character it holds most): a variable labelled
    # "age | years | ..." must not make a file of commas or semicolons read as pipe-separated.
    (tmp_path / "t.csv").write_text("a,b,count\nx,u,5\nx,v,7\ny,u,2\ny,v,9\n")
    (tmp_path / "meta.json").write_text(json.dumps({"variables": [
        {"name": "a", "label": "age | years; grouped | in | five", "levels": ["x", "y"], "level_labels": {"x": "young; a|b"}},
        {"name": "b", "label": "place|kind", "levels": ["u", "v"]}]}))
    out = tmp_path / "r"
    assert main(["release", str(tmp_path / "t.csv"), "--metadata", str(tmp_path / "meta.json"), "--margins", "[AB]",
                 "--epsilon", "1", "--simulate", "--seed", "1", "--out-sep", sep, "--out", str(out)]) == 0
    capsys.readouterr()
    (margin,) = json.loads((out / "public" / "release.json").read_text())["margins"]
    back = load_table(out / "public" / margin["file"])
    assert back.variables == ("age | years; grouped | in | five", "place|kind")
    assert set(back.levels[0]) == {"young; a|b", "y"} and back.levels[1] == ("u", "v")
    assert _rows(out / "public" / margin["file"], sep)[0] == ["age | years; grouped | in | five", "place|kind", "count"]


@pytest.mark.e2e
@pytest.mark.parametrize("value", [":", "semi", ""])
def test_an_unknown_out_sep_is_one_line_and_nothing_is_written_or_charged(value, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    init_ledger(tmp_path / "l.json")
    before = (tmp_path / "l.json").read_bytes()
    code = main(["release", "czech", "--epsilon", "1", "--out-sep", value, "--ledger", "l.json", "--out", "r"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.count("\n") == 1 and "--out-sep" in captured.err and "Traceback" not in captured.err
    assert "semicolon" in captured.err  # the line names what would do
    assert (tmp_path / "l.json").read_bytes() == before and not (tmp_path / "r").exists()
    assert not [p.name for p in tmp_path.iterdir() if "staging" in p.name]


@pytest.mark.e2e
def test_a_batch_file_writes_the_dialect_it_asks_for(tmp_path):
    init_ledger(tmp_path / "ledger.json")
    (tmp_path / "season.toml").write_text("\n".join([
        'ledger = "ledger.json"', "[datasets.data]", 'builtin = "czech"', "[[releases]]", 'dataset = "data"',
        "epsilon = 1.0", 'margins = "[AB]"', 'out_sep = "tab"', "out_bom = true", "simulate = true", "seed = 3",
        'out = "r"']) + "\n")
    result = run_batch(read_spec(tmp_path / "season.toml"))
    assert [s.status for s in result.steps] == ["made"]
    (margin,) = json.loads((tmp_path / "r" / "public" / "release.json").read_text())["margins"]
    data = (tmp_path / "r" / "public" / margin["file"]).read_bytes()
    assert data.startswith(BOM) and data[3:].decode().splitlines()[0].split("\t")[-1] == "count"
    assert int(load_table(tmp_path / "r" / "public" / margin["file"]).n) > 0
    assert builtin_table("czech").shape[:2] == load_table(tmp_path / "r" / "public" / margin["file"]).shape


# --- the workbook ---------------------------------------------------------------------------------------------
FRENCH = [("tabac", "fumeur", {"1": "oui", "2": "non"}), ("stress", "stress mental", {"1": "élevé", "2": "faible"}),
          ("physique", "travail physique", {"1": "pénible", "2": "léger"}), ("tension", "tension artérielle",
                                                                               {"1": "haute", "2": "basse"}),
          ("ratio", "rapport des lipoprotéines", {"1": "< 3", "2": "≥ 3"}), ("famille", "antécédents familiaux",
                                                                            {"1": "non", "2": "oui"})]


def _french_czech(folder, counts=None):
    """Czech's counts as a long CSV file with a metadata file in French (variable and level labels)."""
    table = builtin_table("czech")
    names = [n for n, _, _ in FRENCH]
    frame = table.to_frame()
    frame.columns = names + ["count"]
    if counts is not None:
        frame["count"] = counts
    frame.to_csv(folder / "czech.csv", index=False)
    (folder / "meta.json").write_text(json.dumps({"variables": [
        {"name": n, "label": label, "levels": list(lv), "level_labels": levels}
        for (n, label, levels), lv in zip(FRENCH, table.levels)]}, ensure_ascii=False), encoding="utf-8")
    return folder / "czech.csv", folder / "meta.json"


def _csv_cells(path):
    header, *body = _rows(path, ",")
    return header, {tuple(row[:-1]): int(row[-1]) for row in body}


@pytest.mark.e2e
def test_the_workbook_holds_each_margin_as_a_labelled_cross_tab_with_totals(tmp_path, capsys):
    pytest.importorskip("openpyxl")
    from openpyxl import load_workbook

    from tabrelease.workbook import sheet_names

    from .helpers import read_crosstab

    source, meta = _french_czech(tmp_path)
    out = tmp_path / "r"
    assert main(["release", str(source), "--metadata", str(meta), "--margins", "[A][BC][CDE]", "--epsilon", "1",
                 "--simulate", "--seed", "6", "--xlsx", "--out", str(out)]) == 0
    capsys.readouterr()
    release = json.loads((out / "public" / "release.json").read_text(encoding="utf-8"))
    book = load_workbook(out / "public" / release["workbook"])
    files = [m["file"] for m in release["margins"]]
    assert [len(m["variables"]) for m in release["margins"]] == [1, 2, 3]
    assert book.sheetnames == ["release"] + sheet_names(["notes.csv", *files])
    labels = {n: (label, levels) for n, label, levels in FRENCH}
    for sheet_name, margin in zip(book.sheetnames[2:], release["margins"]):
        sheet = book[sheet_name]
        header, expected = _csv_cells(out / "public" / margin["file"])
        # Labelled in French, from the metadata: the variables' labels and the levels' (never the codes 1, 2).
        assert header[:-1] == [labels[v][0] for v in margin["variables"]]
        assert {lv for key in expected for lv in key} <= {x for _, (_, ls) in labels.items() for x in ls.values()}
        cells, totals = read_crosstab(sheet)
        assert cells == expected  # every cell of the released margin, in its place
        k = len(margin["variables"])
        # Totals: sums of the released cells, computed here from the CSV file.
        for key, value in totals.items():
            wanted = sum(v for cell, v in expected.items()
                         if all(t == "Total" or t == c for t, c in zip(key, cell)))
            assert value == wanted, (sheet_name, key)
        if k == 1:
            assert set(totals) == {("Total",)} and sheet.freeze_panes == "A3"
        else:
            blocks = 2 ** (k - 2)
            assert len(totals) == blocks * (2 + 2 + 1) and sheet.freeze_panes == "B4"
            assert sheet.cell(2, 2).value == labels[margin["variables"][-1]][0]  # the column variable, titled
            assert sheet.cell(3, 1).value == labels[margin["variables"][-2]][0]  # the row variable
        if k == 3:  # each block titled by the outer variable's label and level
            titles = [r[0] for r in sheet.iter_rows(values_only=True) if r[0] and r[1] is None and ": " in r[0]
                      and not r[0].startswith(("Margin", margin["label"]))]
            outer_label, outer_levels = labels[margin["variables"][0]]
            assert titles == [f"{outer_label}: {outer_levels[c]}" for c in ("1", "2")]
        # Counts are number cells, shown with thousands separators; labels are text; column A fits its labels.
        widest = max(len(str(r[0])) for r in sheet.iter_rows(min_row=3, values_only=True)
                     if r[0] and not str(r[0]).startswith(("Margin", labels[margin["variables"][0]][0] + ":")))
        assert sheet.column_dimensions["A"].width >= widest
        numbers = [c for row in sheet.iter_rows(min_row=4) for c in row if isinstance(c.value, int)]
        assert numbers and all(c.data_type == "n" and c.number_format == "#,##0" for c in numbers)


@pytest.mark.e2e
def test_the_workbooks_own_words_come_from_the_metadata_in_the_users_language(tmp_path, capsys):
    # "words" in the metadata file: the cross-tabs' totals and the one-way margin's count column are in French, the
    # totals still the sums of the released cells; release.json carries the words; a bad "words" is one line.
    pytest.importorskip("openpyxl")
    from openpyxl import load_workbook

    from .helpers import read_crosstab

    source, meta = _french_czech(tmp_path)
    doc = json.loads(meta.read_text(encoding="utf-8"))
    meta.write_text(json.dumps({**doc, "words": {"total": "Ensemble", "count": "Effectif"}}, ensure_ascii=False),
                    encoding="utf-8")
    out = tmp_path / "r"
    assert main(["release", str(source), "--metadata", str(meta), "--margins", "[A][BC][CDE]", "--epsilon", "1",
                 "--simulate", "--seed", "6", "--xlsx", "--out", str(out)]) == 0
    capsys.readouterr()
    release = json.loads((out / "public" / "release.json").read_text(encoding="utf-8"))
    assert release["words"] == {"total": "Ensemble", "count": "Effectif"}
    book = load_workbook(out / "public" / release["workbook"])
    texts = {c for ws in book.worksheets[2:] for row in ws.iter_rows(values_only=True) for c in row
             if isinstance(c, str)}
    assert "Ensemble" in texts and "Effectif" in texts and "Total" not in texts and "count" not in texts
    for sheet_name, margin in zip(book.sheetnames[2:], release["margins"]):
        header, expected = _csv_cells(out / "public" / margin["file"])
        cells, totals = read_crosstab(book[sheet_name], total="Ensemble")
        assert cells == expected and totals
        for key, value in totals.items():
            assert value == sum(v for cell, v in expected.items()
                                if all(t == "Total" or t == c for t, c in zip(key, cell)))
    meta.write_text(json.dumps({**doc, "words": {"sum": "Somme"}}), encoding="utf-8")
    assert main(["release", str(source), "--metadata", str(meta), "--epsilon", "1", "--simulate", "--out",
                 str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and '"words"' in err and not (tmp_path / "bad").exists()


def _notes(book):
    rows = [list(r) for r in book["notes"].iter_rows(values_only=True)]
    about = {r[0]: r[1] for r in rows if r[0] and r[1] is not None and not isinstance(r[2], (int, float))}
    start = next(i for i, r in enumerate(rows) if r[0] == "margin")
    errors = {}
    for r in rows[start + 1:]:
        if r[0] is None:
            break
        errors[r[0]] = (r[2], r[3], r[4])
    return about, errors, " ".join(str(v) for r in rows for v in r if v is not None)


@pytest.mark.e2e
def test_the_notes_sheet_states_the_guarantee_and_each_margins_error_from_the_noise_scale(tmp_path, capsys):
    # Fourier on an all-binary table (k = 6): Laplace noise of scale b on every coefficient of the closure B, b =
    # |B| / (2^(k/2) epsilon) under add-remove (Barak et al.'s sensitivity). A cell of the margin over S is
    # 2^(k/2 - |S|) times a signed sum of the 2^|S| coefficients of subsets of S, so its variance is
    # 2^(k - |S|) * 2 b^2.
    pytest.importorskip("openpyxl")
    from openpyxl import load_workbook

    out = _release(tmp_path, "r", "--mechanism", "fourier", "--xlsx", margins="[A][BC]")
    capsys.readouterr()
    release = json.loads((out / "public" / "release.json").read_text())
    k, closure = 6, 5  # {}, A, B, C, BC
    b = closure / (2 ** (k / 2) * 1.0)
    assert release["noise"]["scale"] == pytest.approx(b)
    about, errors, text = _notes(load_workbook(out / "public" / "margins.xlsx"))
    for margin in release["margins"]:
        size = len(margin["variables"])
        sd = np.sqrt(2 ** (k - size) * 2 * b**2)
        got_sd, half, note = errors[margin["label"]]
        assert got_sd == pytest.approx(sd, rel=1e-9)
        assert half == pytest.approx(1.6448536269514722 * sd, rel=1e-9)  # the 90% two-sided normal interval
        assert "linf-lp" in note  # the figure is the linear reconstruction's, and the sheet says so
    assert about["privacy guarantee"] == "differential privacy, epsilon=1 (pure) for one record added or removed"
    assert about["neighbouring data sets"] == "differ by one record added or removed"
    assert about["privacy loss"] == "epsilon=1 (pure)"
    assert about["statement"] == release["privacy"]
    assert about["mode"].startswith("simulation") and "not for publication" in about["mode"]
    assert "fourier" in about["made by"]
    # And the margin's own sheet carries its margin of error as a footnote.
    book = load_workbook(out / "public" / "margins.xlsx")
    last = [r[0] for r in book.worksheets[2].iter_rows(values_only=True) if r[0]][-1]
    assert last.startswith("Margin of error") and f"±{errors[release['margins'][0]['label']][1]:.3g}" in last


@pytest.mark.e2e
def test_the_planned_margin_of_error_is_the_plans_and_reads_no_count(tmp_path, capsys):
    pytest.importorskip("openpyxl")
    from openpyxl import load_workbook

    table = builtin_table("czech")
    source, meta = _french_czech(tmp_path)
    shuffled = tmp_path / "other"
    shuffled.mkdir()
    other, other_meta = _french_czech(shuffled, np.random.default_rng(1).permutation(table.counts.ravel()) * 3 + 1)
    notes = []
    for folder, (csv_file, meta_file) in (("a", (source, meta)), ("b", (other, other_meta))):
        out = tmp_path / folder
        assert main(["release", str(csv_file), "--metadata", str(meta_file), "--margins", "[AB][CDE]",
                     "--epsilon", "0.5", "--xlsx", "--out", str(out)]) == 0
        capsys.readouterr()
        release = json.loads((out / "public" / "release.json").read_text(encoding="utf-8"))
        about, errors, _ = _notes(load_workbook(out / "public" / "margins.xlsx"))
        planned = {e["margin"]: e["cell_sd"] for e in release["plan"]["expected_error"]}
        assert {m: e[0] for m, e in errors.items()} == pytest.approx(planned, rel=1e-12)
        assert all(e[2] is None for e in errors.values())  # least squares: the figure is its own
        assert about["mode"].startswith("release: the noise was drawn by OpenDP's secure samplers")
        notes.append(errors)
    # Two tables of one shape, counts unrelated: the same margins of error (nothing read from the counts).
    assert notes[0] == notes[1]


@pytest.mark.e2e
def test_a_mechanism_without_a_planned_error_says_so(tmp_path, capsys):
    pytest.importorskip("openpyxl")
    from openpyxl import load_workbook

    out = _release(tmp_path, "r", "--mechanism", "margins", "--xlsx", margins="[AB][C]")
    capsys.readouterr()
    book = load_workbook(out / "public" / "margins.xlsx")
    _, errors, _ = _notes(book)
    assert set(errors) == {"[AB]", "[C]"}
    for sd, half, note in errors.values():
        assert sd is None and half is None and "no planned error" in note and "margins mechanism" in note
    for sheet in book.worksheets[2:]:
        last = [r[0] for r in sheet.iter_rows(values_only=True) if r[0]][-1]
        assert last.startswith("Margin of error: none planned")


@pytest.mark.e2e
def test_the_workbook_states_the_guarantee_beside_the_calibration(tmp_path, capsys):
    """With a public total the noise is calibrated per add-remove step at epsilon 1 and the guarantee is for replace
    neighbours at 2 (two steps): the release sheet states the guarantee, and names the settings as asked for."""
    pytest.importorskip("openpyxl")
    from openpyxl import load_workbook

    out = _release(tmp_path, "r", "--public-total", "--xlsx")
    capsys.readouterr()
    release = json.loads((out / "public" / "release.json").read_text())
    sheet = load_workbook(out / "public" / release["workbook"])["release"]
    rows = {r[0]: r[1] for r in sheet.iter_rows(values_only=True)}
    assert rows["guarantee"] == "epsilon=2 (pure) for one record changed (n public)"
    assert rows["epsilon asked for"] == 1 and rows["neighbours asked for"] == "add-remove"
    assert "epsilon" not in rows and "neighbours" not in rows  # no bare setting that reads as the guarantee
