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
    assert main(["plan", str(first), "--margins", "[AB]", "--target-l1", "50", "--reference", str(first),
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
