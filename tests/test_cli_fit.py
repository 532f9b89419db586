import json
import subprocess
import sys

import pytest

from tabrelease.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_tables_json_lists_the_four_paper_tables_and_marks_them(capsys):
    code, out, _ = run_cli(capsys, "tables", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0
    assert {name for name, row in rows.items() if row["from_paper"]} == {"edwards", "czech", "rochdale",
                                                                          "journey_to_work"}
    assert {name for name, row in rows.items() if not row["from_paper"]} == {"housing", "titanic", "minn38"}
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


def test_console_script_reports_errors_without_a_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "tabrelease", "fit", "edwards", "--model", "[AQ]"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        "tabrelease: error: model names unknown variable 'Q' in [AQ]; the table has A, B, C, D, E, F"
    )


def test_fit_names_the_model_as_the_public_files_do(capsys):
    """Rochdale's variables are A-H, named wife_active, ... for people: fit printed only "[ACE][ACG]..." (a new user's
    trial). The model is given in both, generator by generator, in the text and the JSON."""
    code, out, _ = run_cli(capsys, "fit", "czech", "--model", "[AB][CD]", "--json")
    s = json.loads(out)
    assert code == 0 and s["model"] == "[AB][CD]" and s["model_named"] == "[smoking, mental][physical, pressure]"
    code, out, _ = run_cli(capsys, "fit", "czech", "--model", "[AB][CD]")
    assert "             [smoking, mental][physical, pressure]" in out
