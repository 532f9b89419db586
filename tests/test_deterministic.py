"""Deterministic output: the same input, seed and options give byte-identical public files, whatever the order of
the input rows and however loaded the machine (no solver that decides what is published stops on a clock)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

import tabrelease as tr
from tabrelease.testing import plan_at
from tabrelease.tables import read_microdata, read_table_csv

# Rochdale's model: the controlled rounding MILP needs up to ~180 branch-and-bound nodes to prove its table closest
# (the old 20 ms wall-clock limit decided, on a busy machine, which table was kept).
NAME = "rochdale"


def _public_csvs(out) -> dict:
    return {p.name: p.read_bytes() for p in sorted((out / "public").glob("*.csv"))}


def _publish(table, out, **settings):
    settings = {"mode": "simulation", "seed": 7, **settings}
    return tr.publish_release(table, tr.ReleaseSpec(loss=tr.loss_of(0.5), **settings), out)


def test_the_same_release_twice_gives_byte_identical_public_margins(tmp_path):
    table = tr.builtin_table(NAME)
    first = _publish(table, tmp_path / "a")
    second = _publish(table, tmp_path / "b")
    a, b = _public_csvs(tmp_path / "a"), _public_csvs(tmp_path / "b")
    assert a and a == b
    assert first.release.rounding_gap == 0.0  # proved closest within the node limit


def test_the_same_release_twice_gives_byte_identical_public_files_workbook_included(tmp_path):
    """Every public file, byte for byte, for two runs of one release more than a second apart: release.json has no
    time stamp, and the workbook's (openpyxl stamps the time of making and saving into docProps/core.xml and into
    each zip entry) are fixed to 1980-01-01 (`workbook.FIXED_TIME`); the workbook still opens."""
    import openpyxl

    table = tr.builtin_table("titanic")
    _publish(table, tmp_path / "a", workbook=True)
    time.sleep(1.1)
    _publish(table, tmp_path / "b", workbook=True)
    files = {p.name: p.read_bytes() for p in sorted((tmp_path / "a" / "public").iterdir())}
    assert "margins.xlsx" in files and "release.json" in files
    assert files == {p.name: p.read_bytes() for p in sorted((tmp_path / "b" / "public").iterdir())}
    book = openpyxl.load_workbook(tmp_path / "a" / "public" / "margins.xlsx")
    assert book.properties.created.year == 1980 and book.properties.modified.year == 1980
    assert "release" in book.sheetnames


def _records(table) -> pd.DataFrame:
    """One row per record, in level order."""
    index = np.repeat(np.arange(table.counts.size), table.counts.ravel())
    codes = np.unravel_index(index, table.shape)
    return pd.DataFrame({v: np.asarray(levels, object)[c] for v, levels, c in zip(table.variables, table.levels, codes)})


@pytest.mark.parametrize("kind", ["microdata", "long"])
def test_shuffled_input_rows_give_identical_public_files(tmp_path, kind):
    source = tr.builtin_table(NAME)
    frame = _records(source) if kind == "microdata" else source.to_frame()
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert not frame.equals(shuffled)
    tables = []
    for which, rows in (("ordered", frame), ("shuffled", shuffled)):
        folder = tmp_path / which
        folder.mkdir()
        path = folder / "survey.csv"
        rows.to_csv(path, index=False)
        # levels read from the data (simulation allows it, with a note): their order must not follow the file's
        read = read_microdata(path) if kind == "microdata" else read_table_csv(path)
        assert read.shape == source.shape
        tables.append(read)
    np.testing.assert_array_equal(tables[0].counts, tables[1].counts)
    _publish(tables[0], tmp_path / "a", margins=tr.default_model(source).generators)
    _publish(tables[1], tmp_path / "b", margins=tr.default_model(source).generators)
    a, b = _public_csvs(tmp_path / "a"), _public_csvs(tmp_path / "b")
    assert a and a == b
    json_a = (tmp_path / "a" / "public" / "release.json").read_text().splitlines()
    json_b = (tmp_path / "b" / "public" / "release.json").read_text().splitlines()
    assert json_a == json_b  # byte for byte: release.json has no time stamp (audit.json's copy has)
    assert not any('"created"' in line for line in json_a)  # two releases within one second would agree anyway
    assert '"created"' in (tmp_path / "a" / "internal" / "audit.json").read_text()


class _Clock:
    """A clock that jumps an hour at every reading (a machine so loaded that any time limit is past)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 3600.0
        return self.now


@pytest.mark.unit
def test_no_wall_clock_limit_decides_what_is_published(monkeypatch):
    import clarabel
    import highspy

    table = tr.builtin_table(NAME)
    model = tr.default_model(table).generators
    plans = [plan_at(table.shape, model, 0.5),  # least squares, controlled rounding (MILP)
             plan_at(table.shape, model, 0.5, mechanism="auto")]  # the consistency LP, nearest

    def released(plan, seed):
        return [m.tolist() for m in tr.run_plan(plan, table.counts, tr.noise.SimulationNoise(seed)).released_margins]

    expected = [released(p, s) for p in plans for s in range(3)]

    limits = []
    original = highspy.Highs

    class SpyHighs(original):  # every HiGHS model built anywhere: record any time limit it is given
        def setOptionValue(self, option, value):
            if option == "time_limit" and np.isfinite(value):
                limits.append(value)
            return super().setOptionValue(option, value)

    settings = []
    solver = clarabel.DefaultSolver

    def spy_solver(P, q, A, b, cones, s):
        settings.append(s.time_limit)
        return solver(P, q, A, b, cones, s)

    # Problems (and their Clarabel solvers, re-solved with new data) are cached by design: built afresh under the spy.
    from tabrelease import estimate

    estimate._least_squares_problem.cache_clear()
    monkeypatch.setattr(highspy, "Highs", SpyHighs)
    monkeypatch.setattr(clarabel, "DefaultSolver", spy_solver)
    monkeypatch.setattr(time, "perf_counter", _Clock())
    monkeypatch.setattr(time, "monotonic", _Clock())
    monkeypatch.setattr(time, "time", _Clock())
    loaded = [released(p, s) for p in plans for s in range(3)]
    assert loaded == expected
    assert limits == []  # no HiGHS model was given a wall-clock limit
    assert settings and all(t == float("inf") for t in settings)  # nor Clarabel
