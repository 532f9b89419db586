import json
import subprocess
import sys

import pytest

from tabrelease.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_tables_json_lists_the_four_tables(capsys):
    code, out, _ = run_cli(capsys, "tables", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0
    assert rows["rochdale"]["n"] == 665 and rows["rochdale"]["zero_cells"] == 165
    assert rows["journey_to_work"]["shape"] == [4, 4, 16]
    assert rows["czech"]["model"] == "[BF][ADE][ABCE]"


def test_fit_json_has_the_documented_fields(capsys):
    code, out, _ = run_cli(capsys, "fit", "rochdale", "--json")
    s = json.loads(out)
    assert code == 0
    for key in ("n", "cells", "zero_cells", "model", "g2", "pearson_x2", "df", "df_adjusted", "mle_exists",
                "facial_set_size", "iterations", "converged", "l1_to_uniform"):
        assert key in s
    assert (s["n"], s["cells"], s["zero_cells"]) == (665, 256, 165)
    assert round(s["g2"], 2) == 149.58 and s["df"] == 226 and s["df_adjusted"] == 168
    # the paper's printed values are shown beside the tool's, not substituted
    assert s["paper"]["g2"] == 238.18 and s["paper"]["df"] == 225


def test_fit_of_a_csv_with_a_model_by_names(capsys, write_csv):
    path = write_csv("sex,smoker,count\nm,y,10\nm,n,20\nf,y,30\nf,n,40\n")
    code, out, _ = run_cli(capsys, "fit", str(path), "--model", "[sex][smoker]", "--json")
    s = json.loads(out)
    # independence on a 2x2 table: fitted m_ij = r_i c_j / n; G2 by hand
    import math

    obs = {(0, 0): 10, (0, 1): 20, (1, 0): 30, (1, 1): 40}
    rows, cols, n = [30, 70], [40, 60], 100
    g2 = 2 * sum(o * math.log(o / (rows[i] * cols[j] / n)) for (i, j), o in obs.items())
    assert s["g2"] == pytest.approx(g2, rel=1e-9)
    assert s["df"] == 1 and s["mle_exists"]


BAD_INPUTS = [
    ("missing file", ["fit", "{tmp}/nope.csv", "--model", "[A]"], None, "no such file"),
    ("directory", ["fit", "{tmp}", "--model", "[A]"], None, "is a directory"),
    ("unknown name", ["fit", "mildew", "--model", "[A]"], None, "neither a built-in table"),
    ("no count column", ["fit", "{csv}", "--model", "[A]"], "a,b,n\nx,p,1\nx,q,2\ny,p,3\ny,q,4\n", "no count column"),
    ("negative", ["fit", "{csv}", "--model", "[A]"], "a,b,count\nx,p,1\nx,q,-2\ny,p,3\ny,q,4\n", "negative count"),
    ("fractional", ["fit", "{csv}", "--model", "[A]"], "a,b,count\nx,p,1\nx,q,2.5\ny,p,3\ny,q,4\n", "fractional count"),
    ("missing count", ["fit", "{csv}", "--model", "[A]"], "a,b,count\nx,p,1\nx,q,\ny,p,3\ny,q,4\n", "missing count"),
    ("duplicate", ["fit", "{csv}", "--model", "[A]"], "a,b,count\nx,p,1\nx,p,2\ny,p,3\ny,q,4\n", "duplicate cell"),
    ("missing cells", ["fit", "{csv}", "--model", "[A]"], "a,b,count\nx,p,1\nx,q,2\ny,p,3\n", "1 missing"),
    ("one level", ["fit", "{csv}", "--model", "[A]"], "a,b,count\nx,p,1\nx,q,2\n", "only one level"),
    ("unknown variable", ["fit", "edwards", "--model", "[AZ]"], None, "unknown variable 'Z'"),
    ("empty model", ["fit", "edwards", "--model", ""], None, "model is empty"),
    ("no default model", ["fit", "{csv}"], "a,b,count\nx,p,1\nx,q,2\ny,p,3\ny,q,4\n", "no default model"),
    ("empty file", ["fit", "{csv}", "--model", "[A]"], "", "not a readable CSV"),
    ("bad tolerance", ["fit", "edwards", "--tol", "-1"], None, "positive finite"),
]


@pytest.mark.parametrize("label, argv, text, message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_gives_one_line_and_exit_2(capsys, tmp_path, label, argv, text, message):
    csv = tmp_path / "bad.csv"
    if text is not None:
        csv.write_text(text)
    argv = [a.format(tmp=tmp_path, csv=csv) for a in argv]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tabrelease: error:")
    assert message in lines[0]


def test_console_script_reports_errors_without_a_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "tabrelease", "fit", "edwards", "--model", "[AQ]"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        "tabrelease: error: model names unknown variable 'Q' in [AQ]; the table has A, B, C, D, E, F"
    )
