"""Counting microdata files by an engine (`tables.aggregation`): the streaming default, Dask and pandas give the same
margins as an independent count, a table too large for its cells is held as its file, and the ledger knows it as
the same data however it comes in."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import tabrelease as tr
from tabrelease.errors import BudgetRefused, TabreleaseError
from tabrelease.ledger import (budget_status, canonical_multiset_fingerprint, charge, init_ledger, ledger_key,
                               multiset_fingerprint, table_prints)
from tabrelease.loglinear import fit_loglinear
from tabrelease.privacy import PrivacyGuarantee, PrivacyUnit
from tabrelease.tables import MicrodataTable, read_microdata, table_from_microdata
from tabrelease.tables import aggregation
from tabrelease.tables.aggregation import FileTable, record_lanes, table_lanes

KEY = b"k" * 32


def _people(table, seed=0):
    """One row per person of a table held as cells, shuffled (a file is in no particular order)."""
    rows = np.argwhere(table.counts > 0)
    people = np.repeat(rows, table.counts[table.counts > 0], axis=0)
    people = people[np.random.default_rng(seed).permutation(len(people))]
    return pd.DataFrame({v: np.asarray(lv)[people[:, j]] for j, (v, lv) in enumerate(zip(table.variables,
                                                                                           table.levels))})


def _levels(table) -> dict:
    return {v: list(lv) for v, lv in zip(table.variables, table.levels)}


def _independent_margin(frame: pd.DataFrame, names, levels) -> np.ndarray:
    """A margin counted by pandas' group-by, on its own: no code of the tool."""
    counted = frame.groupby(list(names)).size()
    index = pd.MultiIndex.from_product([levels[v] for v in names]) if len(names) > 1 else pd.Index(levels[names[0]])
    return counted.reindex(index, fill_value=0).to_numpy().reshape([len(levels[v]) for v in names])


@pytest.fixture()
def as_files(monkeypatch):
    """Tables past a tiny cell limit are held as their files: real tables exercise the FileTable path."""
    monkeypatch.setattr(aggregation, "MAX_TABLE_CELLS", 16)


@pytest.mark.parametrize("name", ["rochdale", "journey_to_work"])
@pytest.mark.parametrize("form", ["parquet", "csv-semicolon-bom", "csv-latin1"])
def test_the_streaming_engine_counts_every_margin_as_an_independent_count(tmp_path, name, form, as_files):
    table = tr.builtin_table(name)
    frame = _people(table)
    if form == "parquet":
        path = tmp_path / "people.parquet"
        frame.to_parquet(path)
        options = None
    elif form == "csv-semicolon-bom":
        path = tmp_path / "people.csv"
        path.write_bytes(b"\xef\xbb\xbf" + frame.to_csv(index=False, sep=";").encode())
        options = None
    else:
        path = tmp_path / "people.csv"
        path.write_bytes(frame.to_csv(index=False).encode("latin-1"))
        options = tr.tables.CsvOptions(encoding="latin-1")
    levels = _levels(table)
    streamed = read_microdata(path, levels=levels, csv_options=options, batch_rows=97)
    assert isinstance(streamed, FileTable) and streamed.n == len(frame)
    pairs = [(a, b) for a in range(table.k) for b in range(a + 1, table.k)]
    streamed.count_margins(pairs + [(0, 1, 2)])
    for axes in pairs + [(0, 1, 2), (1,), ()]:
        names = [table.variables[a] for a in axes]
        expected = _independent_margin(frame, names, levels) if names else np.array(len(frame))
        assert np.array_equal(streamed.margin_counts(axes), expected), axes


def test_large_margins_are_counted_exactly_in_every_key_width(tmp_path):
    # 20 levels a variable: margins of 400 (16-bit keys), 8,000 and 3.2 million cells (32-bit keys, added by their
    # distinct keys per batch, not densely), against pandas' group-by.
    rng = np.random.default_rng(9)
    levels = {f"v{j}": [f"l{i:02d}" for i in range(20)] for j in range(7)}
    frame = pd.DataFrame({v: rng.choice(lv[: min(20, 3 + 3 * j)], 4000) for j, (v, lv) in enumerate(levels.items())})
    path = tmp_path / "wide.parquet"
    frame.to_parquet(path)
    streamed = read_microdata(path, levels=levels, batch_rows=500)
    assert isinstance(streamed, FileTable)
    margins = [(0, 5), (1, 2, 3), (0, 1, 2, 3, 4)]
    streamed.count_margins(margins)
    for axes in margins:
        names = [f"v{a}" for a in axes]
        assert np.array_equal(streamed.margin_counts(axes), _independent_margin(frame, names, levels)), axes


def test_a_table_whose_cells_fit_is_counted_cell_by_cell(tmp_path):
    table = tr.builtin_table("rochdale")
    path = tmp_path / "people.parquet"
    _people(table).to_parquet(path)
    counted = read_microdata(path, levels=_levels(table))
    assert isinstance(counted, tr.ContingencyTable)
    assert np.array_equal(counted.counts, table.counts)


def test_levels_read_from_the_data_match_the_in_memory_reader(tmp_path):
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"age": rng.choice([10, 2, 30], 500), "sex": rng.choice(["m", "f"], 500),
                          "x": rng.choice([1.5, 0.5], 500)})
    path = tmp_path / "p.parquet"
    frame.to_parquet(path)
    streamed, in_memory = read_microdata(path), read_microdata(path, engine="pandas")
    assert streamed.levels == in_memory.levels == (("2", "10", "30"), ("f", "m"), ("0.5", "1.5"))
    assert np.array_equal(streamed.counts, in_memory.counts)
    assert streamed.metadata["undeclared_levels"] == ["age", "sex", "x"]


@pytest.mark.parametrize("bad,message", [
    ({"value": "unknown"}, "variable 'sex' has values that are not among its declared levels"),
    ({"value": None}, "column 'sex' has missing values"),
    ({"value": "  "}, "column 'sex' has missing values"),
])
def test_a_value_outside_the_declared_levels_or_missing_is_refused_in_any_batch(tmp_path, bad, message):
    frame = pd.DataFrame({"sex": ["f", "m"] * 500, "age": ["1", "2", "3", "4"] * 250})
    frame.loc[977, "sex"] = bad["value"]  # far past the first batch
    path = tmp_path / "p.parquet"
    frame.to_parquet(path)
    with pytest.raises(TabreleaseError, match=message):
        read_microdata(path, levels={"sex": ["f", "m"], "age": ["1", "2", "3", "4"]}, batch_rows=64)


@pytest.mark.parametrize("text", [
    "\x0c\na,b\nx,u\ny,v\nx,v\n",  # a form feed line before the header (str.splitlines would count two lines)
    "a,b\r\nx,u\r\ny,v\r\nx,v\r\n",
    "\n\na,b\nx,u\ny,v\nx,v\n\n",
])
def test_lines_before_the_header_are_skipped_as_arrow_counts_them(tmp_path, text):
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    counted = read_microdata(path, levels={"a": ["x", "y"], "b": ["u", "v"]})
    assert counted.counts.tolist() == [[1, 1], [0, 1]]


@pytest.mark.parametrize("blank", ["", "  "])
@pytest.mark.parametrize("batch_rows", [64, 1 << 16])
def test_a_blank_row_of_a_one_column_file_is_a_missing_value_in_every_engine(tmp_path, blank, batch_rows):
    """In a file of one column a blank line is that one field empty: the streaming reader had skipped it (and the
    in-memory reader's fast path a line of spaces), counting 999 people of 1,000. Now every engine refuses it by its
    data row, inside a batch or at a batch's end, and drops trailing blank rows, as the in-memory reader always did."""
    values = ["f", "m"] * 500
    path = tmp_path / "one.csv"
    for row in (1, 63, 64, 977):  # data rows: inside the first batch, a batch's last row, a next batch's first, later
        inside = values[:row - 1] + [blank] + values[row - 1:]
        path.write_text("sex\n" + "\n".join(inside) + "\n")
        for engine in ("arrow", "pandas"):
            with pytest.raises(TabreleaseError, match=f"data row {row} is blank \\(only trailing blank rows"):
                read_microdata(path, engine=engine, batch_rows=batch_rows) if engine == "arrow" else \
                    read_microdata(path, engine=engine)
    path.write_text("sex\n" + "\n".join(values + [blank] * 70) + "\n")
    streamed, in_memory = read_microdata(path, batch_rows=batch_rows), read_microdata(path, engine="pandas")
    assert streamed.counts.tolist() == in_memory.counts.tolist() == [500, 500]


def test_labels_are_read_as_the_in_memory_reader_reads_them(tmp_path):
    # A protected label (a leading quote before a tab) is stripped after its quote is removed; a stored category
    # no row has is not a value of the file.
    path = tmp_path / "t.csv"
    path.write_text("a,b\n'\tx,u\ny,v\n x ,v\n")
    streamed, in_memory = read_microdata(path), read_microdata(path, engine="pandas")
    assert streamed.levels == in_memory.levels == (("x", "y"), ("u", "v"))
    assert np.array_equal(streamed.counts, in_memory.counts)
    frame = pd.DataFrame({"a": pd.Categorical(["x", "y", "x"], categories=["x", "y", "zzz"]), "b": ["u", "v", "v"]})
    frame.to_parquet(tmp_path / "c.parquet")
    levels = {"a": ["x", "y"], "b": ["u", "v"]}
    streamed = read_microdata(tmp_path / "c.parquet", levels=levels)
    assert np.array_equal(streamed.counts, read_microdata(tmp_path / "c.parquet", levels=levels, engine="pandas").counts)
    assert read_microdata(tmp_path / "c.parquet").levels[0] == ("x", "y")


def test_engine_options_are_checked():
    with pytest.raises(TabreleaseError, match="unknown counting engine 'duck'"):
        read_microdata(__file__, engine="duck")
    with pytest.raises(TabreleaseError, match="--scheduler .* goes with --engine dask or spark"):
        read_microdata(__file__, engine="arrow", scheduler="tcp://localhost:1")


def test_the_dask_engine_on_two_local_workers_gives_identical_margins(tmp_path, as_files):
    pytest.importorskip("distributed")
    table = tr.builtin_table("journey_to_work")
    frame = _people(table)
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    levels = _levels(table)
    arrow = read_microdata(path, levels=levels)
    dask = read_microdata(path, levels=levels, engine="dask")
    pairs = [(a, b) for a in range(table.k) for b in range(a + 1, table.k)]
    arrow.count_margins(pairs)
    dask.count_margins(pairs)
    assert dask.n == arrow.n == len(frame) and dask.lanes == arrow.lanes
    for axes in pairs:
        assert np.array_equal(dask.margin_counts(axes), arrow.margin_counts(axes))
        names = [table.variables[a] for a in axes]
        assert np.array_equal(dask.margin_counts(axes), _independent_margin(frame, names, levels))
    # A row with a field too many is refused, as by the other engines (not read with the field dropped); here past
    # the head Dask reads to plan, so that a worker finds it.
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b\n" + "x,u\ny,v\n" * 40_000 + "y,v,z\nx,v\n")
    for engine in ("dask", "arrow", "pandas"):
        with pytest.raises(TabreleaseError):
            read_microdata(ragged, engine=engine)


def test_a_refusal_on_the_dask_engine_is_one_line_with_no_worker_log(tmp_path):
    """A reviewer's trial: a value outside the declared levels, counted by the Dask engine, was refused in one line,
    but after 8 lines of a worker's "Compute Failed ... Traceback" log on stderr. The local workers' logs are silent;
    stderr holds the command's line alone."""
    import subprocess
    import sys

    import socket

    (tmp_path / "m.csv").write_text("region,sex\nnorth,f\nsouth,m\nwest,f\nnorth,m\n")
    (tmp_path / "lv.json").write_text(json.dumps({"region": ["north", "south"], "sex": ["f", "m"]}))
    # Dask's port 8787 taken (by another cluster: CI's run saw "UserWarning: Port 8787 is already in use" on stderr).
    busy = socket.socket()
    try:
        busy.bind(("127.0.0.1", 8787))
        busy.listen()
    except OSError:  # in use already: the case itself
        pass
    done = subprocess.run([sys.executable, "-m", "tabrelease", "release", str(tmp_path / "m.csv"), "--microdata",
                           "--levels", str(tmp_path / "lv.json"), "--epsilon", "1", "--out", str(tmp_path / "o"),
                           "--engine", "dask"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    busy.close()
    assert "variable 'region' has values that are not among its declared levels" in done.stderr


def test_the_spark_engine_gives_identical_margins_where_pyspark_is_installed(tmp_path, as_files):
    pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra); the spark engine is not run")
    table = tr.builtin_table("journey_to_work")
    frame = _people(table)
    levels = _levels(table)
    pairs = [(a, b) for a in range(table.k) for b in range(a + 1, table.k)]
    for path in (tmp_path / "people.parquet", tmp_path / "people.csv"):
        frame.to_parquet(path) if path.suffix == ".parquet" else frame.to_csv(path, index=False, sep=";")
        spark = read_microdata(path, levels=levels, engine="spark")
        arrow = read_microdata(path, levels=levels)
        spark.count_margins(pairs)
        assert spark.n == arrow.n == len(frame) and spark.lanes == arrow.lanes
        for axes in pairs:
            names = [table.variables[a] for a in axes]
            assert np.array_equal(spark.margin_counts(axes), _independent_margin(frame, names, levels))
    # A quote inside a quoted field is doubled, as the other engines read it.
    quoted = tmp_path / "quoted.csv"
    quoted.write_text('a,b\n"say ""hi""",u\nno,v\n')
    assert read_microdata(quoted, engine="spark").levels[0] == read_microdata(quoted).levels[0] == ("no", 'say "hi"')
    # A value outside the levels, found on an executor, is the same one line.
    frame.loc[len(frame) - 1, table.variables[0]] = "nowhere"
    frame.to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(TabreleaseError, match="has values that are not among its declared levels") as found:
        read_microdata(tmp_path / "bad.parquet", levels=levels, engine="spark")
    assert "nowhere" not in str(found.value)
    # From the command line: the JSON document alone on stdout, and nothing of the JVM's on stderr.
    import subprocess
    import sys

    (tmp_path / "levels.json").write_text(json.dumps(levels))
    done = subprocess.run([sys.executable, "-m", "tabrelease", "release", str(tmp_path / "people.parquet"),
                           "--microdata", "--engine", "spark", "--levels", str(tmp_path / "levels.json"), "--margins",
                           "[AB][BC]", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(tmp_path / "r"),
                           "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout) and done.stderr == "", done.stderr


# --- the ledger ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["czech", "rochdale", "journey_to_work"])
def test_the_multiset_fingerprint_is_one_however_the_table_comes_in(tmp_path, name, as_files):
    cells = tr.builtin_table(name)
    levels = _levels(cells)
    frame = _people(cells)
    records = table_from_microdata(frame, levels=levels, as_records=True)
    nonzero = np.argwhere(cells.counts > 0)
    long = pd.DataFrame({v: np.asarray(lv)[nonzero[:, j]] for j, (v, lv) in enumerate(levels.items())}).assign(
        count=cells.counts[cells.counts > 0])
    codes_long = np.column_stack([pd.Categorical(long[v], categories=lv).codes for v, lv in levels.items()])
    weighted = MicrodataTable(cells.variables, cells.levels, codes_long, weights=long["count"].to_numpy())
    path = tmp_path / "people.parquet"
    frame.iloc[::-1].to_parquet(path)  # another order
    streamed = read_microdata(path, levels=levels, batch_rows=50)
    assert isinstance(streamed, FileTable)
    prints = {multiset_fingerprint(t, KEY) for t in (cells, records, weighted, streamed)}
    assert len(prints) == 1
    # The sums are what a brute force over every person gives (each person's hash added once, modulo 2^64).
    codes = np.column_stack([pd.Categorical(frame[v], categories=lv).codes for v, lv in levels.items()])
    brute = [0] * aggregation.LANES
    for row in codes[:200]:
        brute = [(s + h) % 2**64 for s, h in zip(brute, record_lanes(row[None, :], None, cells.shape))]
    assert tuple(brute) == record_lanes(codes[:200], None, cells.shape)
    # One person more, or one moved to another cell: another fingerprint.
    more = cells.counts.copy()
    more.flat[0] += 1
    moved = cells.counts.copy()
    first = np.flatnonzero(moved)[0]
    moved.flat[first] -= 1
    moved.flat[(first + 1) % moved.size] += 1
    # Two people exchanging the first variable's levels ((a, rest), (a', rest') becoming (a, rest'), (a', rest)) leave
    # the first variable's margin and the other variables' joint margin as they were: a hash that merely added
    # per-variable values would give both tables the same sums.
    x = tuple(0 for _ in cells.shape)
    y = tuple(1 for _ in cells.shape)
    pair, exchanged = np.zeros(cells.shape, np.int64), np.zeros(cells.shape, np.int64)
    pair[x] += 1
    pair[y] += 1
    exchanged[(x[0],) + y[1:]] += 1
    exchanged[(y[0],) + x[1:]] += 1
    one = tr.ContingencyTable(cells.variables, cells.levels, cells.counts + pair, cells.name)
    two = tr.ContingencyTable(cells.variables, cells.levels, cells.counts + exchanged, cells.name)
    assert multiset_fingerprint(one, KEY) != multiset_fingerprint(two, KEY)
    for changed in (more, moved):
        other = tr.ContingencyTable(cells.variables, cells.levels, changed, cells.name)
        assert multiset_fingerprint(other, KEY) not in prints
    # Weights count: a weighted table is not its distinct records counted once each.
    once = MicrodataTable(weighted.variables, weighted.levels, weighted.codes)
    assert (weighted.weights > 1).any() and table_lanes(once) != table_lanes(weighted)


def test_a_table_counted_from_its_file_is_recognised_in_any_other_form(tmp_path, as_files):
    table = tr.builtin_table("rochdale")
    levels = _levels(table)
    path = tmp_path / "people.parquet"
    _people(table).to_parquet(path)
    streamed = read_microdata(path, levels=levels)
    ledger = init_ledger(tmp_path / "ledger.json")
    key = ledger_key(ledger)
    guarantee = PrivacyGuarantee(unit=PrivacyUnit(kind="add-remove"), loss=tr.loss_of(1.0))
    main, also = table_prints(streamed, key)
    assert main == multiset_fingerprint(streamed, key) and also == [canonical_multiset_fingerprint(streamed, key)]
    first = charge(tr.LedgerAccount(ledger=ledger, dataset="survey"), streamed, guarantee, mechanism="planned",
                   margins=["[AB]"], output=None, noise_mode="simulation")
    assert first["fingerprint"] == main
    for other in (table, table_from_microdata(_people(table, 1), levels=levels, as_records=True)):
        with pytest.raises(BudgetRefused, match="released before under the dataset 'survey'"):
            charge(tr.LedgerAccount(ledger=ledger, dataset="survey-2"), other, guarantee, mechanism="planned",
                   margins=["[AB]"], output=None, noise_mode="simulation")
    # And the other way round: a table released as cells, then counted from its file under another name.
    ledger2 = init_ledger(tmp_path / "ledger2.json")
    entry = charge(tr.LedgerAccount(ledger=ledger2, dataset="cells"), table, guarantee, mechanism="planned",
                   margins=["[AB]"], output=None, noise_mode="simulation")
    assert multiset_fingerprint(table, ledger_key(ledger2)) in entry["fingerprints_also"]
    with pytest.raises(BudgetRefused, match="released before under the dataset 'cells'"):
        charge(tr.LedgerAccount(ledger=ledger2, dataset="file"), streamed, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")
    # Counted once among the dataset's tables, though recorded by two fingerprints.
    charge(tr.LedgerAccount(ledger=ledger2, dataset="cells"), streamed, guarantee, mechanism="planned",
           margins=["[AB]"], output=None, noise_mode="simulation")
    assert len(budget_status(ledger2, "cells").fingerprints) == 1


def test_a_file_table_is_refused_beside_releases_an_earlier_version_made(tmp_path, as_files, monkeypatch):
    # Records written before the multiset fingerprint existed carry only fingerprints a table counted from its file
    # cannot compute: the data of one of them could come back under another name, so that is refused, and the
    # operator is told how to settle it.
    import tabrelease.ledger as ledger_module

    table = tr.builtin_table("rochdale")
    levels = _levels(table)
    path = tmp_path / "people.parquet"
    _people(table).to_parquet(path)
    records = table_from_microdata(_people(table), levels=levels, as_records=True)
    ledger = init_ledger(tmp_path / "ledger.json")
    guarantee = PrivacyGuarantee(unit=PrivacyUnit(kind="add-remove"), loss=tr.loss_of(1.0))
    with monkeypatch.context() as old_version:  # as the earlier version charged: its fingerprint alone, no mark
        old_version.setattr(ledger_module, "table_prints", lambda t, k, *_: (ledger_module.table_fingerprint(t, k), []))
        old_version.setattr(ledger_module, "PRINTS_VERSION", None)
        charge(tr.LedgerAccount(ledger=ledger, dataset="census-a"), records, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")
    streamed = read_microdata(path, levels=levels)
    with pytest.raises(BudgetRefused, match="holds releases made by an earlier version \\(of 'census-a'\\).*"
                       "--engine pandas"):
        charge(tr.LedgerAccount(ledger=ledger, dataset="census-b"), streamed, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")
    # Held as records, the same data is matched with the old record, and then the file form is known too.
    with pytest.raises(BudgetRefused, match="released before under the dataset 'census-a'"):
        charge(tr.LedgerAccount(ledger=ledger, dataset="census-b"), records, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")
    charge(tr.LedgerAccount(ledger=ledger, dataset="census-a"), records, guarantee, mechanism="planned",
           margins=["[AB]"], output=None, noise_mode="simulation")
    with pytest.raises(BudgetRefused, match="released before under the dataset 'census-a'"):
        charge(tr.LedgerAccount(ledger=ledger, dataset="census-b"), streamed, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")
    # The same dataset id is charged as ever.
    charge(tr.LedgerAccount(ledger=ledger, dataset="census-a"), streamed, guarantee, mechanism="planned",
           margins=["[AB]"], output=None, noise_mode="simulation")


# --- releases from a file ------------------------------------------------------------------------------
def _public_files(out):
    return {p.name: p.read_bytes() for p in sorted((out / "public").iterdir()) if p.name != "release.json"}


def test_a_release_from_the_file_equals_the_release_from_the_records_in_memory(tmp_path, as_files, monkeypatch):
    table = tr.builtin_table("rochdale")
    levels = _levels(table)
    path = tmp_path / "people.parquet"
    frame = _people(table)
    frame.to_parquet(path)
    spec = tr.ReleaseSpec(loss=tr.loss_of(0.5), margins="[AB][BC][CDE]", mode="simulation", seed=11)
    passes = []
    real = aggregation.count_file
    monkeypatch.setattr(aggregation, "count_file", lambda *a, **k: passes.append(a[2]) or real(*a, **k))
    streamed = read_microdata(path, levels=levels)
    in_memory = table_from_microdata(frame, levels=levels, name="people", as_records=True)
    assert isinstance(in_memory, MicrodataTable)
    tr.publish_release(streamed, spec, tmp_path / "a")
    # Two passes over the file: the first (n, the sums, every value checked) and every margin the plan measures.
    assert len(passes) == 2 and len(passes[1]) >= 3
    tr.publish_release(in_memory, spec, tmp_path / "b")
    assert _public_files(tmp_path / "a") == _public_files(tmp_path / "b")
    audit = json.loads((tmp_path / "a" / "internal" / "audit.json").read_text())
    assert audit["disclosure_risk"]["full_table"]["true_count_1"] is None
    assert "not counted" in (tmp_path / "a" / "internal" / "audit.html").read_text()


def test_a_fit_of_a_table_past_the_cell_limit_is_refused_in_one_line(tmp_path, as_files):
    table = tr.builtin_table("rochdale")
    path = tmp_path / "people.parquet"
    _people(table).to_parquet(path)
    with pytest.raises(TabreleaseError, match="a log-linear fit is over every cell, and the table has 256 cells "
                       "\\(counted from its file as margins"):
        fit_loglinear(read_microdata(path, levels=_levels(table)), "[AB][BC]")
    records = table_from_microdata(_people(table), levels=_levels(table), as_records=True)
    assert fit_loglinear(records, "[AB][BC]").g2 == pytest.approx(fit_loglinear(table, "[AB][BC]").g2)


def test_a_sweep_of_a_table_past_the_cell_limit_is_refused_in_one_line(tmp_path, as_files):
    from tabrelease.sweeps.grid import make_grid

    table = tr.builtin_table("rochdale")
    path = tmp_path / "people.parquet"
    _people(table).to_parquet(path)
    streamed = read_microdata(path, levels=_levels(table))
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation")
    with pytest.raises(TabreleaseError, match="a sweep compares each release with the table's cells, and people has"):
        make_grid([streamed], [0.5], 2, spec=spec)


def test_nothing_is_read_from_the_file_after_the_charge(tmp_path, as_files, monkeypatch):
    # 13 binary variables (8,192 cells: the plan measures the released margins' own sets), three of them released:
    # the audit's refit also reads the other ten variables' margins, which are counted before the charge too.
    import tabrelease.ledger as ledger_module

    rng = np.random.default_rng(6)
    variables = [f"b{j}" for j in range(13)]
    frame = pd.DataFrame({v: rng.choice(["n", "y"], 3000) for v in variables})
    path = tmp_path / "wide.parquet"
    frame.to_parquet(path)
    events = []
    real_count, real_charge = aggregation.count_file, ledger_module.charge
    monkeypatch.setattr(aggregation, "count_file", lambda *a, **k: events.append("count") or real_count(*a, **k))
    monkeypatch.setattr(ledger_module, "charge", lambda *a, **k: events.append("charge") or real_charge(*a, **k))
    table = read_microdata(path, levels={v: ["n", "y"] for v in variables})
    init_ledger(tmp_path / "ledger.json")
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0), margins="[b0,b1][b1,b2][b0,b2]", mode="simulation", seed=2)
    done = tr.publish_release(table, spec, tmp_path / "r", account=tr.LedgerAccount(ledger=tmp_path / "ledger.json"))
    assert events == ["count", "count", "charge"]
    assert "the log-linear refit was computed from the generator margins" in done.evaluation.refit_note
    # Frozen: a margin not counted before the release is refused, not read.
    with pytest.raises(TabreleaseError, match="was not counted before the release"):
        table.margin_counts((3, 4))


@pytest.mark.e2e
def test_the_command_line_releases_a_file_counted_out_of_memory_and_refuses_bad_values(tmp_path, monkeypatch):
    import subprocess
    import sys

    rng = np.random.default_rng(5)
    variables = [f"q{j}" for j in range(10)]
    frame = pd.DataFrame({v: rng.choice(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"], 3000)
                          for v in variables})
    path = tmp_path / "survey.parquet"
    frame.to_parquet(path)
    levels = tmp_path / "levels.json"
    levels.write_text(json.dumps({v: list("abcdefghij") for v in variables}))
    ledger = tmp_path / "ledger.json"
    run = [sys.executable, "-m", "tabrelease"]
    subprocess.run(run + ["ledger", "init", str(ledger)], check=True, capture_output=True)
    done = subprocess.run(run + ["release", str(path), "--microdata", "--levels", str(levels), "--margins",
                                 "[q0,q1][q2,q3]", "--epsilon", "1", "--ledger", str(ledger), "--out",
                                 str(tmp_path / "r"), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)  # stdout is the JSON document alone
    assert (tmp_path / "r" / "public" / "q0__q1.csv").exists() and (tmp_path / "r" / "public" / "q2__q3.csv").exists()
    records = [r for r in json.loads(ledger.read_text())["records"] if r["kind"] == "release"]
    # The multiset print, and beside it the canonical multiset print (order-, padding- and NFC-free).
    assert len(records) == 1 and records[0]["fingerprint"] and len(records[0]["fingerprints_also"]) == 1
    frame.loc[2999, "q5"] = "zz"
    bad = tmp_path / "bad.parquet"
    frame.to_parquet(bad)
    refused = subprocess.run(run + ["release", str(bad), "--microdata", "--levels", str(levels), "--margins",
                                    "[q0,q1]", "--epsilon", "1", "--ledger", str(ledger), "--out",
                                    str(tmp_path / "r2"), "--dataset", "other"], capture_output=True, text=True)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().count("\n") == 0 and "'q5' has values that are not among" in refused.stderr
    assert "zz" not in refused.stderr  # the value the data hold is not named
    assert not (tmp_path / "r2").exists()
    assert len([r for r in json.loads(ledger.read_text())["records"] if r["kind"] == "release"]) == 1


def test_the_command_line_offers_every_engine_there_is():
    from tabrelease.spec import ENGINE_NAMES

    assert ENGINE_NAMES == aggregation.ENGINES


def test_the_dask_engine_without_dask_is_refused_in_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    """A user's trial: --engine dask without Dask installed gave "internal error (ModuleNotFoundError)"; the count
    and the labels imported dask before the guarded reader did. Each import is guarded now."""
    import sys

    from tabrelease.cli import main

    (tmp_path / "people.csv").write_text("sex,region\nf,n\nm,s\nf,s\n")
    (tmp_path / "levels.json").write_text('{"sex": ["f", "m"], "region": ["n", "s"]}')
    for name in ("dask", "dask.dataframe", "distributed"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    for levels in (["--levels", str(tmp_path / "levels.json")], []):
        code = main(["release", str(tmp_path / "people.csv"), "--microdata", "--engine", "dask", *levels,
                     "--margins", "[sex,region]", "--epsilon", "1", "--simulate", "--seed", "1", "--out",
                     str(tmp_path / "o")])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert "--engine dask needs Dask: pip install 'tabrelease[dask]'" in err
        assert not (tmp_path / "o").exists()


def _sigint_ignored_after_the_preload() -> bool:
    import importlib
    import signal

    importlib.import_module("tabrelease.tables._dask_worker")
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN


@pytest.mark.unit
def test_a_dask_worker_ignores_interrupts_and_one_during_the_cluster_s_start_is_taken_after_it(monkeypatch):
    """A new user's trial: a Ctrl-C during a Dask count printed each worker's KeyboardInterrupt traceback under the
    command's one line: each worker ignores SIGINT from its preload. A review's trial: SIGINT ignored in this process
    while the cluster started had let the release be charged and exit 0; it is held there and acted on after, as the
    command's handler (which notes it) would."""
    import multiprocessing
    import os
    import signal

    import distributed

    from tabrelease._signals import _RECEIVED, command_signals
    from tabrelease.tables import aggregation

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(_sigint_ignored_after_the_preload) is True
    started = []

    class Starting:  # the local cluster, whose start a Ctrl-C interrupts (no cluster is started here)
        def __init__(self, **settings):
            started.append(settings)
            os.kill(os.getpid(), signal.SIGINT)  # held until the start ends
            assert _RECEIVED == []
            started.append("started whole")

    monkeypatch.setattr(distributed, "LocalCluster", Starting)
    monkeypatch.setattr(aggregation, "_LOCAL_CLUSTER", None)
    with command_signals(lambda signum, frame: None):
        with pytest.raises(KeyboardInterrupt):
            aggregation._client(None)
        assert _RECEIVED == [signal.SIGINT]
    assert started[0]["preload"] == ["tabrelease.tables._dask_worker"] and started[1] == "started whole"


def _accented_people(seed=0) -> tuple[pd.DataFrame, dict]:
    """People of a small table with accented names and labels (12 cells, within `as_files`' limit of 16)."""
    levels = {"région": ["Côte", "Étang", "Île"], "sexe": ["femme", "homme"], "âge": ["jeune", "âgé"]}
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({v: rng.choice(lv, size=60) for v, lv in levels.items()})
    return frame, levels


def _second_dataset_refused(tmp_path, first, second, match: str) -> None:
    """`first` charged to dataset A of a new ledger, then `second` refused under dataset B as the same data."""
    ledger = init_ledger(tmp_path / "ledger.json")
    guarantee = PrivacyGuarantee(unit=PrivacyUnit(kind="add-remove"), loss=tr.loss_of(1.0))
    charge(tr.LedgerAccount(ledger=ledger, dataset="A"), first, guarantee, mechanism="planned", margins=["[AB]"],
           output=None, noise_mode="simulation")
    with pytest.raises(BudgetRefused, match=match):
        charge(tr.LedgerAccount(ledger=ledger, dataset="B"), second, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")


def _nfd(text: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFD", text)


def test_the_canonical_multiset_sums_are_those_computed_by_hand_and_ignore_order_padding_and_composition():
    """An independent computation of `record_lanes` by names and labels: per lane, the sum over people of
    fmix64(sum over variables of the first 8 bytes (little-endian) of SHA-256 of the lane's prefix, the NFC name and
    the NFC label), modulo 2^64. The same for the columns reordered, levels declared that no one is in, and every
    name and label in NFD; another for one person moved."""
    import hashlib
    import unicodedata

    frame, levels = _accented_people()
    mask = 2**64 - 1

    def fmix(x):
        x ^= x >> 33
        x = (x * 0xFF51AFD7ED558CCD) & mask
        x ^= x >> 33
        x = (x * 0xC4CEB9FE1A85EC53) & mask
        return x ^ (x >> 33)

    def by_hand(people):
        sums = []
        for lane in range(aggregation.CANONICAL_LANES):
            total = 0
            for _, person in people.iterrows():
                h = sum(int.from_bytes(hashlib.sha256(
                    f"tabrelease canonical multiset v1 lane {lane}\0{unicodedata.normalize('NFC', name)}\0"
                    f"{unicodedata.normalize('NFC', str(label))}".encode()).digest()[:8], "little")
                    for name, label in person.items()) & mask
                total = (total + fmix(h)) % 2**64
            sums.append(total)
        return tuple(sums)

    table = table_from_microdata(frame, levels=levels)
    assert aggregation.table_canonical_lanes(table) == by_hand(frame)
    # Columns reordered, a level no one is in declared first, and every name and label decomposed.
    other = frame[["âge", "sexe", "région"]].map(_nfd).rename(columns=_nfd).sample(frac=1, random_state=1)
    padded = {_nfd(v): ["Aaa"] + [_nfd(label) for label in lv] for v, lv in levels.items()}
    again = table_from_microdata(other, levels=padded, as_records=True)
    assert again.variables != table.variables and again.shape != table.shape
    assert aggregation.table_canonical_lanes(again) == by_hand(frame)
    moved = frame.copy()
    moved.loc[0, "sexe"] = "homme" if moved.loc[0, "sexe"] == "femme" else "femme"
    assert aggregation.table_canonical_lanes(table_from_microdata(moved, levels=levels)) != by_hand(frame)


@pytest.mark.parametrize("first_as", ["cells", "file"])
def test_the_same_people_padded_past_the_cells_held_or_written_in_nfd_are_not_given_a_second_budget(
        tmp_path, as_files, first_as):
    """A reviewer's attack: microdata released under dataset A, then the same people, rows shuffled, released under
    dataset B with 9,000 unused levels declared on an unreleased variable, which took the table past the cells
    held: counted from its file, it had the multiset print alone (which names every declared level) and was charged
    to a second budget. Another gave a file rewritten in NFD a second budget. Now both are refused, in either
    order (here the cell limit is 16: the padded table, and in the second case both, are counted from the file)."""
    frame, levels = _accented_people()
    plain, shuffled = tmp_path / "people.csv", tmp_path / "copy.csv"
    frame.to_csv(plain, index=False)
    nfd = frame.sample(frac=1, random_state=2)[["sexe", "âge", "région"]].map(_nfd).rename(columns=_nfd)
    nfd.to_csv(shuffled, index=False)
    padded = {_nfd(v): [_nfd(label) for label in lv] for v, lv in levels.items()}
    padded[_nfd("région")] += [f"zz{i}" for i in range(9000)]
    if first_as == "file":
        levels = {**levels, "âge": levels["âge"] + ["vieux"]}  # 18 cells: past the limit too
    first = read_microdata(plain, levels=levels)
    second = read_microdata(shuffled, levels=padded)
    assert isinstance(second, FileTable) and isinstance(first, FileTable) == (first_as == "file")
    _second_dataset_refused(tmp_path, first, second, "released before under the dataset 'A'")


@pytest.mark.parametrize("decomposed", ["the part", "the whole"])
def test_two_columns_of_the_same_people_written_in_nfd_are_recognised_by_their_margin(tmp_path, decomposed):
    """Held as cells: the table's canonical print and its margins' prints are of NFC names and labels, so two of
    its columns released under another dataset are matched as a margin of the table released before, where either
    was rewritten in NFD (as macOS tools write text)."""
    frame, levels = _accented_people()
    whole, whole_levels = frame, levels
    part, part_levels = frame[["sexe", "région"]], {v: levels[v] for v in ("sexe", "région")}
    if decomposed == "the part":
        part, part_levels = part.map(_nfd).rename(columns=_nfd), {_nfd(v): [_nfd(x) for x in lv]
                                                                  for v, lv in part_levels.items()}
    else:
        whole, whole_levels = whole.map(_nfd).rename(columns=_nfd), {_nfd(v): [_nfd(x) for x in lv]
                                                                     for v, lv in whole_levels.items()}
    first = table_from_microdata(whole, levels=whole_levels)
    second = table_from_microdata(part, levels=part_levels)
    _second_dataset_refused(tmp_path, first, second, "dataset 'A'")


def test_a_table_not_in_nfc_also_records_the_print_releases_made_before_normalising_recorded():
    """Releases recorded before names were normalised hold the canonical print of the names as written; a table
    whose names or labels are not in NFC records that print beside the normalised one, so those are still matched."""
    from tabrelease.ledger import canonical_fingerprint

    frame, levels = _accented_people()
    key = b"k" * 32
    nfd = table_from_microdata(frame.map(_nfd).rename(columns=_nfd),
                               levels={_nfd(v): [_nfd(x) for x in lv] for v, lv in levels.items()})
    nfc = table_from_microdata(frame, levels=levels)
    _, also = table_prints(nfd, key)
    assert canonical_fingerprint(nfd, key, composed=False) in also
    assert canonical_fingerprint(nfd, key) == canonical_fingerprint(nfc, key) in also
    assert canonical_fingerprint(nfd, key, composed=False) != canonical_fingerprint(nfc, key)
    assert len(table_prints(nfc, key)[1]) == len(also) - 1  # in NFC already: the two are one


def test_both_lanes_in_one_pass_are_the_two_record_lanes():
    table = tr.builtin_table("rochdale")
    rows = np.argwhere(table.counts > 0)
    codes = np.repeat(rows, table.counts[table.counts > 0], axis=0)
    positional, canonical = aggregation.both_lanes(codes, table.variables, table.levels)
    assert positional == record_lanes(codes, None, table.shape) == table_lanes(table)
    assert canonical == record_lanes(codes, None, table.shape, labelled=(table.variables, table.levels))
    assert canonical == aggregation.table_canonical_lanes(table) != positional


def test_a_margin_released_before_prints_were_normalised_is_still_recognised(tmp_path, monkeypatch):
    """A review's trial: a two-way table with NFD labels released by the previous version (its canonical prints of
    the names as written) went unrecognised as a margin of a three-way table of the same people released after the
    change. A table not in NFC records its margins' prints as written beside the normalised ones."""
    import functools

    from tabrelease import ledger as ledger_module

    frame, levels = _accented_people()
    nfd = frame.map(_nfd).rename(columns=_nfd)
    nfd_levels = {_nfd(v): [_nfd(x) for x in lv] for v, lv in levels.items()}
    two = [_nfd("région"), "sexe"]
    part = table_from_microdata(nfd[two], levels={v: nfd_levels[v] for v in two})
    whole = table_from_microdata(nfd, levels=nfd_levels)
    ledger = init_ledger(tmp_path / "ledger.json")
    guarantee = PrivacyGuarantee(unit=PrivacyUnit(kind="add-remove"), loss=tr.loss_of(1.0))
    with monkeypatch.context() as before:  # as the version before normalising printed it
        before.setattr(ledger_module, "_canonical_digest",
                       functools.partial(ledger_module._canonical_digest, composed=False))
        as_written = ledger_module.canonical_fingerprint
        before.setattr(ledger_module, "canonical_fingerprint",
                       lambda t, k, listed=None, composed=True: as_written(t, k, listed, composed=False))
        before.setattr(ledger_module, "canonical_multiset_fingerprint", lambda *a: "0" * 64)
        charge(tr.LedgerAccount(ledger=ledger, dataset="two"), part, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")
    with pytest.raises(BudgetRefused, match="dataset 'two'"):
        charge(tr.LedgerAccount(ledger=ledger, dataset="three"), whole, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")
