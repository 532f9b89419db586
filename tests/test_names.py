"""Names for people everywhere: published file and sheet names keep the variables' own names (accents and all) but
for what a file system or Excel forbids; margins are shown by their variables' names, not by letters that depend on
which variables were read; and a margin list that reads two ways is refused.

The expected names are written out by hand from the rules (Windows' forbidden characters and device names, Excel's
sheet-name rules), not taken from the code's output."""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pytest

from tabrelease.cli import main

FRENCH = ("Région de résidence", "Sexe de la personne", "Âge")


def _french_table():
    from tabrelease.tables import ContingencyTable

    counts = np.arange(1, 13).reshape(2, 2, 3)
    return ContingencyTable(FRENCH, (("Île-de-France", "Bretagne"), ("femme", "homme"), ("<30", "30-59", "60+")),
                            counts, name="recensement")


# --- 1. file names and sheet names ---------------------------------------------------------------------------
@pytest.mark.unit
def test_file_names_keep_accents_and_replace_only_what_a_file_system_forbids():
    from tabrelease._files import published_file_names

    got = published_file_names([["Région de résidence", "Sexe"], ["a<b>c:d\"e/f\\g|h?i*j", "k"], ["tab\there", "x"],
                                ["NUL"], ["con.x", "y"], ["lpt1 "], ["trailing.. ", "lead"], [".hidden", "z"]])
    assert got == ["Région de résidence__Sexe.csv", "a_b_c_d_e_f_g_h_i_j__k.csv", "tab_here__x.csv", "NUL_.csv",
                   "con_.x__y.csv", "lpt1_.csv", "trailing__lead.csv", "hidden__z.csv"]


@pytest.mark.unit
def test_file_names_are_nfc_and_distinct_without_regard_to_case():
    from tabrelease._files import published_file_names

    decomposed = unicodedata.normalize("NFD", "Région")
    assert decomposed != "Région"
    got = published_file_names([[decomposed], ["Région"], ["RÉGION"], ["région~2"], ["Sexe"]])
    # NFC: "Région" once composed is the name the first one already took; case differs only: Windows and macOS see
    # one file, so each later one gets the next suffix free.
    assert got == ["Région.csv", "Région~2.csv", "RÉGION~3.csv", "région~2~2.csv", "Sexe.csv"]
    assert all(unicodedata.is_normalized("NFC", f) for f in got)


@pytest.mark.unit
def test_long_file_names_are_cut_to_the_byte_limit_between_characters():
    from tabrelease._files import FILE_NAME_MAX_BYTES, published_file_names

    # "é" is two bytes in UTF-8 (one code point in NFC): 300 of them are 600 bytes.
    long = "é" * 300
    got = published_file_names([[long], [long], ["e\u0301" * 300]])
    assert FILE_NAME_MAX_BYTES <= 255
    room = FILE_NAME_MAX_BYTES - len(".csv")
    assert got[0] == "é" * (room // 2) + ".csv"
    assert got[1] == "é" * ((room - len("~2")) // 2) + "~2.csv"
    assert got[2] == "é" * ((room - len("~3")) // 2) + "~3.csv"  # NFC makes e + accent the same é
    assert all(len(f.encode()) <= FILE_NAME_MAX_BYTES for f in got)
    # A cut never leaves a base letter without the accents that follow it (here there is no composed form).
    combining = published_file_names([["q\u0301\u0302" * 100]])[0]
    assert combining == "q\u0301\u0302" * ((FILE_NAME_MAX_BYTES - 4) // 5) + ".csv"


@pytest.mark.unit
def test_margin_files_of_a_french_table_by_its_names():
    from tabrelease.reports import margin_files
    from tabrelease.tables import ContingencyTable

    assert margin_files(_french_table(), [(0, 1), (2,)]) == ["Région de résidence__Sexe de la personne.csv",
                                                             "Âge.csv"]
    counts = np.ones((2, 2, 2), int)
    clash = ContingencyTable(("Sexe", "sexe", "c"), (("0", "1"),) * 3, counts)  # one file on Windows or macOS
    assert margin_files(clash, [(0, 2), (1, 2)]) == ["Sexe__c.csv", "sexe__c~2.csv"]


@pytest.mark.unit
def test_sheet_names_keep_accents_and_keep_excels_rules():
    from tabrelease.workbook import SHEET_MAX, sheet_names

    files = ["Région de résidence__Sexe de la personne.csv", "Région de résidence__Sexe de la personne~2.csv",
             "x[1]:y*z?\\w/.csv", "'quoted'.csv", "History.csv", "RELEASE.csv", "\U0001F600" * 20 + ".csv",
             unicodedata.normalize("NFD", "Âge") + ".csv", "âge.csv", "'.csv"]
    got = sheet_names(files)
    # Excel counts UTF-16 units: an emoji is two, so 15 fit in 31; "Région ... de la" is exactly 31 characters.
    assert got == ["Région de résidence__Sexe de la", "Région de résidence__Sexe de~2", "x_1__y_z__w_", "quoted",
                   "History~2", "RELEASE~2", "\U0001F600" * 15, "Âge", "âge~2", "margin"]
    assert all(len(n.encode("utf-16-le")) // 2 <= SHEET_MAX for n in got)


def test_a_french_release_publishes_files_and_sheets_named_as_its_variables(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    source = tmp_path / "recensement.csv"
    rows = ["Région de résidence;Sexe de la personne;Âge;count"]
    rows += [f"{r};{s};{a};{3 + i}" for i, (r, s, a) in enumerate(
        (r, s, a) for r in ("Île-de-France", "Bretagne") for s in ("femme", "homme") for a in ("jeune", "vieux"))]
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "r"
    assert main(["release", str(source), "--epsilon", "1", "--simulate", "--seed", "1", "--margins",
                 "[Région de résidence,Sexe de la personne][Âge]", "--xlsx", "--out", str(out)]) == 0
    public = json.loads((out / "public" / "release.json").read_text(encoding="utf-8"))
    files = sorted(p.name for p in (out / "public").iterdir())
    assert files == ["Région de résidence__Sexe de la personne.simulation.csv", "margins.xlsx", "release.json",
                     "Âge.simulation.csv"]
    assert [m["file"] for m in public["margins"]] == ["Région de résidence__Sexe de la personne.simulation.csv",
                                                      "Âge.simulation.csv"]
    book = openpyxl.load_workbook(out / "public" / "margins.xlsx")
    assert book.sheetnames == ["release", "notes", "Région de résidence__Sexe de la", "Âge"]


# --- 3. an ambiguous margin list is refused ---------------------------------------------------------------------
@pytest.mark.unit
def test_a_flat_list_of_names_is_refused_naming_both_readings():
    import tabrelease as tr
    from tabrelease.errors import TabreleaseError

    with pytest.raises(TabreleaseError) as caught:
        tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=["région", "sexe"])
    assert str(caught.value) == ("margins=['région', 'sexe'] is ambiguous: one two-way margin [['région', 'sexe']] "
                                 "or two one-way margins [['région'], ['sexe']]? give a list of lists")
    with pytest.raises(TabreleaseError, match=r"one three-way margin \[\['a', 'b', 'c'\]\] or three one-way margins"):
        tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=("a", "b", "c"))


@pytest.mark.unit
def test_lists_of_lists_and_single_names_are_not_ambiguous():
    import tabrelease as tr
    from tabrelease.workflow import resolve_margins

    table = _french_table()
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[["Région de résidence", "Sexe de la personne"]])
    assert resolve_margins(table, spec.margins) == [(0, 1)]
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[["Région de résidence"], ["Âge"]])
    assert resolve_margins(table, spec.margins) == [(0,), (2,)]
    assert resolve_margins(table, ["Âge"]) == [(2,)]  # one name: both readings are the one one-way margin
    assert resolve_margins(table, ["Âge", ("Région de résidence", "Sexe de la personne")]) == [(2,), (0, 1)]


@pytest.mark.unit
def test_resolve_margins_refuses_the_flat_list_too():
    from tabrelease.errors import TabreleaseError
    from tabrelease.workflow import resolve_margins

    with pytest.raises(TabreleaseError, match="is ambiguous: one two-way margin"):
        resolve_margins(_french_table(), ["Âge", "Sexe de la personne"])


# --- 2. margins shown by their variables' names --------------------------------------------------------------------
def _french_csv(path, columns):
    """A long CSV of the same counts with its columns in the given order (letters follow the order)."""
    cells = {(r, s, a): 3 + i for i, (r, s, a) in enumerate(
        (r, s, a) for r in ("Île-de-France", "Bretagne") for s in ("femme", "homme") for a in ("jeune", "vieux"))}
    order = {"Région de résidence": 0, "Sexe": 1, "Âge": 2}
    rows = [";".join(columns) + ";count"]
    rows += [";".join(key[order[c]] for c in columns) + f";{n}" for key, n in cells.items()]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_the_ledger_names_margins_by_variables_and_reads_records_without_names(tmp_path, capsys, monkeypatch):
    from tabrelease import builtin_table
    from tabrelease.ledger import charge, guarantee_from_parameters, init_ledger, ledger_entries, verify_ledger
    from tabrelease.spec import LedgerAccount

    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)
    ledger = init_ledger(tmp_path / "ledger.json")
    # A record as every release wrote it before names were recorded: margins in letters only.
    charge(LedgerAccount(ledger=ledger), builtin_table("czech"), guarantee_from_parameters(0.1), mechanism="planned",
           margins=["[AB]"], output=None, noise_mode="simulation")
    # One dataset read twice with its columns in another order: [AB] is Région x Sexe in the first, Âge x Région in
    # the second; the margin released both times is Région x Sexe.
    first = _french_csv(tmp_path / "a.csv", ["Région de résidence", "Sexe", "Âge"])
    second = _french_csv(tmp_path / "b.csv", ["Âge", "Région de résidence", "Sexe"])
    for n, source in enumerate((first, second)):
        assert main(["release", str(source), "--dataset", "recensement", "--epsilon", "0.5", "--simulate",
                     "--margins", "[Région de résidence,Sexe]", "--ledger", str(ledger),
                     "--out", str(tmp_path / f"r{n}")]) == 0
    assert verify_ledger(ledger) == []
    entries = ledger_entries(ledger)
    assert "margin_names" not in entries[0]
    assert [e["margins"] for e in entries[1:]] == [["[AB]"], ["[BC]"]]  # the letters differ ...
    assert [e["margin_names"] for e in entries[1:]] == [[["Région de résidence", "Sexe"]]] * 2  # ... the names do not
    capsys.readouterr()
    assert main(["ledger", str(ledger), "--releases"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert " [AB] -> None" in lines[1]  # the old record, as it was written
    assert all(" [Région de résidence, Sexe] -> " in line for line in lines[2:4])
    assert main(["ledger", str(ledger), "--releases", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["releases"]
    assert [r["margin_names"] for r in listed] == [None, [["Région de résidence", "Sexe"]],
                                                   [["Région de résidence", "Sexe"]]]


@pytest.mark.unit
def test_a_record_without_names_still_verifies_after_one_with_them(tmp_path, monkeypatch):
    from tabrelease import builtin_table
    from tabrelease.ledger import (charge, entry_margins, guarantee_from_parameters, init_ledger, ledger_entries,
                                   verify_ledger)
    from tabrelease.spec import LedgerAccount

    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)
    ledger = init_ledger(tmp_path / "ledger.json")
    table = builtin_table("czech")
    for names in (None, [["smoking", "mental"]], None):
        charge(LedgerAccount(ledger=ledger), table, guarantee_from_parameters(0.1), mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation", margin_names=names)
    assert verify_ledger(ledger) == []
    assert [entry_margins(e) for e in ledger_entries(ledger)] == [["[AB]"], ["[smoking, mental]"], ["[AB]"]]
    # The names are under the record's MAC like every other field: changing one is found.
    data = json.loads(ledger.read_text())
    data["records"][1]["margin_names"] = [["smoking", "pressure"]]
    ledger.write_text(json.dumps(data))
    assert any("record 2 was edited" in p for p in verify_ledger(ledger))


def test_plan_shows_margins_by_names_with_letters_beside_them_in_json(tmp_path, capsys):
    source = _french_csv(tmp_path / "b.csv", ["Âge", "Région de résidence", "Sexe"])
    assert main(["plan", str(source), "--epsilon", "1", "--margins", "[Région de résidence,Sexe][Âge]"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("  ")[0] for line in out.splitlines()[2:4]]
    assert rows == ["[Région de résidence, Sexe]", "[Âge]"] and "[BC]" not in out
    assert main(["plan", str(source), "--epsilon", "1", "--margins", "[Région de résidence,Sexe][Âge]",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["margins"]
    assert [(r["margin"], r["letters"]) for r in rows] == [("[Région de résidence, Sexe]", "[BC]"), ("[Âge]", "[A]")]
    assert main(["plan", str(source), "--target-l1", "40", "--margins", "[Région de résidence,Sexe]"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("[Région de résidence, Sexe] ")


def test_plan_names_a_margin_left_inside_another_and_puts_it_among_the_json_notes(tmp_path, capsys):
    """A new user's trial: plan's note on [Sexe] inside [Région de résidence, Sexe] named it by letters ([C]), and
    with --json it was on standard error only while the document's notes were empty."""
    source = _french_csv(tmp_path / "b.csv", ["Âge", "Région de résidence", "Sexe"])
    margins = "[Région de résidence,Sexe][Sexe][Âge]"
    note = "not planned separately, being inside another margin (sum that one to get it): [Sexe]"
    assert main(["plan", str(source), "--epsilon", "1", "--margins", margins]) == 0
    assert capsys.readouterr().err == f"note: {note}\n"
    for question in (["--epsilon", "1"], ["--target-l1", "40"]):
        assert main(["plan", str(source), *question, "--margins", margins, "--json"]) == 0
        captured = capsys.readouterr()
        assert note in json.loads(captured.out)["notes"] and captured.err == ""


def test_batch_summary_names_margins_by_variables(tmp_path, capsys):
    from tabrelease.ledger import init_ledger

    _french_csv(tmp_path / "b.csv", ["Âge", "Région de résidence", "Sexe"])
    init_ledger(tmp_path / "ledger.json")
    (tmp_path / "season.toml").write_text(
        'ledger = "ledger.json"\n[datasets.recensement]\nfile = "b.csv"\n[[releases]]\ndataset = "recensement"\n'
        'margins = "[Région de résidence,Sexe][Âge]"\nepsilon = 0.5\nout = "r"\nsimulate = true\n', encoding="utf-8")
    assert main(["batch", str(tmp_path / "season.toml"), "--dry-run", "--json"]) == 0
    step = json.loads(capsys.readouterr().out)["releases"][0]
    assert step["margins"] == ["[Région de résidence, Sexe]", "[Âge]"]
    assert set(step["expected_l1"]) == {"[Région de résidence, Sexe]", "[Âge]"}
    assert main(["batch", str(tmp_path / "season.toml"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "recensement [Région de résidence, Sexe] [Âge] with epsilon=0.5 (pure)" in out and "[BC]" not in out


def test_the_audit_page_names_margins_by_their_variables(tmp_path):
    source = _french_csv(tmp_path / "b.csv", ["Âge", "Région de résidence", "Sexe"])
    assert main(["release", str(source), "--epsilon", "1", "--simulate", "--seed", "4",
                 "--margins", "[Région de résidence,Sexe][Âge]", "--out", str(tmp_path / "r")]) == 0
    page = (tmp_path / "r" / "internal" / "audit.html").read_text(encoding="utf-8")
    # The release's margins, each per-margin table's rows, and the model refitted.
    assert page.count("<code>[Région de résidence, Sexe]</code>") == 3
    assert page.count("<code>[Âge]</code>") == 3
    assert "<code>[Région de résidence, Sexe][Âge]</code>" in page
    assert "<code>[BC]</code>" not in page and "<code>[A]</code>" not in page
    assert "on [Région de résidence, Sexe]:" in page or "on [Âge]:" in page  # the worst margin, at a glance
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text(encoding="utf-8"))
    assert set(audit["evaluation"]["l1_error_by_margin"]) == {"[BC]", "[A]"}  # audit.json keeps its keys


@pytest.mark.unit
def test_notebook_boxes_name_margins_by_variables_where_the_plan_knows_them():
    import tabrelease as tr
    from tabrelease.notebook import plan_html, release_html

    table = _french_table()
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[["Région de résidence", "Sexe de la personne"], ["Âge"]],
                          mode="simulation", seed=3)
    release = tr.release_margins(table, spec)
    for html in (release_html(release), plan_html(release.plan)):
        assert "[Région de résidence, Sexe de la personne] [Âge]" in html and "[AB]" not in html
    # A plan made from a shape alone has no names: letters are all it can show.
    bare = tr.plan_release(table.shape, [(0, 1), (2,)], spec)
    assert "[AB] [C]" in plan_html(bare)


def test_a_margin_may_name_its_variables_as_the_published_files_do():
    """Titanic's variables are A-D, published as class, sex, age, survived (its names for people). `--margins
    "[class,age]"` was refused ("unknown variable 'class'") though `--sensitive class` was taken and the file is
    class__age.csv (a new user's trial). A label names its variable in a margin, alone or with others; a label two
    variables share, or one that is another variable's own name, is refused."""
    import tabrelease as tr
    from tabrelease.errors import TabreleaseError
    from tabrelease.models import parse_model

    titanic = tr.builtin_table("titanic")
    assert parse_model("[class,age][survived]", titanic).generators == parse_model("[AC][D]", titanic).generators
    assert parse_model("[class,C]", titanic).generators == ((0, 2),)
    with pytest.raises(TabreleaseError, match="names a variable twice"):
        parse_model("[class,A]", titanic)
    shared = tr.ContingencyTable(("x", "y"), (("0", "1"), ("0", "1")), np.ones((2, 2), dtype=np.int64),
                                 metadata={"variables": [{"name": "x", "label": "age"}, {"name": "y", "label": "age"}]})
    with pytest.raises(TabreleaseError, match="'age' names more than one variable"):
        parse_model("[age]", shared)
    # A list of names says the same (a review's trial: it had said "unknown variable 'age'").
    with pytest.raises(TabreleaseError, match=r"'age' names more than one variable \(x, y\)"):
        shared.axis("age")
    crossed = tr.ContingencyTable(("x", "y"), (("0", "1"), ("0", "1")), np.ones((2, 2), dtype=np.int64),
                                  metadata={"variables": [{"name": "x", "label": "y"}]})
    with pytest.raises(TabreleaseError, match="'y' names more than one variable"):
        parse_model("[y,x]", crossed)


def test_a_release_s_margins_by_the_names_for_people(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["release", "titanic", "--margins", "[class,age][sex,survived]", "--epsilon", "1", "--simulate",
                 "--seed", "1", "--out", str(out)]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (out / "public").glob("*.csv")) == ["class__age.simulation.csv", "sex__survived.simulation.csv"]


def test_levels_labelled_alike_are_refused_and_a_level_called_total_is_not(tmp_path):
    """Two levels labelled alike would give a file two rows of one label: refused as the metadata is read. A level
    labelled "Total" is a level like any other (hearing loss: None, Partial, Total); the workbook's total row is
    then called "Total (all)" (a review: refusing it refused a real variable). A variable labelled as the CSV files'
    count column ("count", whatever the workbook's word) or as the workbook's is refused."""
    from tabrelease.errors import TabreleaseError
    from tabrelease.tables.metadata import read_metadata

    def meta(labels, words=None, label=None):
        path = tmp_path / "meta.json"
        path.write_text(json.dumps({"variables": [{"name": "x", "levels": ["a", "b"], "level_labels": labels},
                                                  {"name": "y", "levels": ["0", "1"], **({"label": label} if label
                                                                                         else {})}],
                                    **({"words": words} if words else {})}))
        return path

    assert read_metadata(meta({"a": "Total"})).variables == ("x", "y")
    with pytest.raises(TabreleaseError, match="labels two levels alike"):
        read_metadata(meta({"a": "b"}))
    for label, words, column in (("count", {"count": "Effectif"}, "the CSV files' count column"),
                                 ("Effectif", {"count": "Effectif"}, "the workbook's count column")):
        with pytest.raises(TabreleaseError, match=f"names a variable '{label}' for people, the name of {column}"):
            read_metadata(meta({}, words, label))


def test_the_workbook_s_total_row_is_told_from_a_level_called_total(tmp_path, capsys):
    from openpyxl import load_workbook

    (tmp_path / "meta.json").write_text(json.dumps({"variables": [
        {"name": "hearing", "levels": ["n", "p", "t"], "level_labels": {"n": "None", "p": "Partial", "t": "Total"}},
        {"name": "sex", "levels": ["f", "m"]}]}))
    (tmp_path / "t.csv").write_text("hearing,sex,count\nn,f,30\nn,m,25\np,f,12\np,m,9\nt,f,4\nt,m,6\n")
    out = tmp_path / "r"
    assert main(["release", str(tmp_path / "t.csv"), "--metadata", str(tmp_path / "meta.json"), "--margins",
                 "[hearing,sex]", "--epsilon", "1", "--simulate", "--seed", "1", "--xlsx", "--out", str(out)]) == 0, \
        capsys.readouterr().err
    cells = [str(c.value) for sheet in load_workbook(out / "public" / "margins.xlsx") for row in sheet.iter_rows()
             for c in row if c.value is not None]
    assert "Total (all)" in cells and "Total" in cells
