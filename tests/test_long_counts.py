"""Counts aggregated elsewhere: a long table of distinct records with a count column, at any number of cells, and
one fingerprint for one table however it comes in (cells, one row per person, distinct records with counts)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tabrelease as tr
from tabrelease.errors import BudgetRefused
from tabrelease.ledger import (charge, init_ledger, ledger_key, legacy_cells_fingerprint, multiset_fingerprint,
                               order_free_fingerprint, table_fingerprint, canonical_fingerprint,
                               canonical_multiset_fingerprint)
from tabrelease.privacy import PrivacyGuarantee, PrivacyUnit
from tabrelease.tables import MicrodataTable, table_from_frame, table_from_microdata
from tabrelease.tables.model import MAX_TABLE_CELLS

KEY = b"k" * 32


def _people(table):
    """One row per person of a table held as cells (np.repeat of its non-zero cells), as text."""
    rows = np.argwhere(table.counts > 0)
    people = np.repeat(rows, table.counts[table.counts > 0], axis=0)
    return pd.DataFrame({v: np.asarray(lv)[people[:, j]] for j, (v, lv) in enumerate(zip(table.variables,
                                                                                           table.levels))})


def _long(table, zeros=0):
    """The table's non-zero cells as a long frame with counts (and `zeros` listed cells of count 0)."""
    rows = np.argwhere(table.counts > 0)
    if zeros:
        rows = np.vstack([rows, np.argwhere(table.counts == 0)[:zeros]])
    frame = pd.DataFrame({v: np.asarray(lv)[rows[:, j]] for j, (v, lv) in enumerate(zip(table.variables,
                                                                                          table.levels))})
    return frame.assign(count=table.counts[tuple(rows.T)])


@pytest.mark.parametrize("name", ["czech", "rochdale", "journey_to_work"])
def test_one_table_has_one_fingerprint_however_it_comes_in(name):
    cells = tr.builtin_table(name)
    levels = dict(zip(cells.variables, map(list, cells.levels)))
    records = table_from_microdata(_people(cells), levels=levels, as_records=True)
    frame = _long(cells, zeros=3)
    codes = np.column_stack([pd.Categorical(frame[v], categories=lv).codes for v, lv in levels.items()])
    weighted = MicrodataTable(cells.variables, cells.levels, codes, weights=frame["count"].to_numpy())
    prints = {table_fingerprint(t, KEY) for t in (cells, records, weighted)}
    assert len(prints) == 1
    # Every margin is the same, counted three ways; so are n and the cells nobody has.
    for axes in [(0,), (0, 1), tuple(range(cells.k))]:
        expected = cells.counts.sum(axis=tuple(a for a in range(cells.k) if a not in axes))
        assert np.array_equal(weighted.margin_counts(axes), expected)
        assert np.array_equal(records.margin_counts(axes), expected)
    assert weighted.n == records.n == int(cells.counts.sum())
    assert weighted.zero_cells == records.zero_cells == int((cells.counts == 0).sum())
    # One count changed, one label changed: another fingerprint.
    changed = frame.assign(count=frame["count"] + np.r_[1, np.zeros(len(frame) - 1, int)])
    other = MicrodataTable(cells.variables, cells.levels, codes, weights=changed["count"].to_numpy())
    assert table_fingerprint(other, KEY) not in prints


def test_a_long_table_past_the_cell_limit_is_kept_as_its_records():
    # 30 binary variables (2^30 cells, past the 2^27 held as cells), 400 distinct records with counts, given as a
    # sparse long table: its margins are those of the same people given one row each.
    rng = np.random.default_rng(5)
    k = 30
    codes = np.unique(rng.integers(0, 2, size=(400, k)), axis=0)
    counts = rng.integers(1, 40, size=len(codes))
    variables = [f"v{j}" for j in range(k)]
    frame = pd.DataFrame({v: np.where(codes[:, j] == 1, "yes", "no") for j, v in enumerate(variables)})
    levels = {v: ["no", "yes"] for v in variables}
    table = table_from_frame(frame.assign(count=counts), complete=False, levels=levels, name="wide")
    assert isinstance(table, MicrodataTable) and table.cells == 2**k > MAX_TABLE_CELLS
    people = table_from_microdata(frame.loc[np.repeat(np.arange(len(frame)), counts)], levels=levels,
                                  name="wide", as_records=True)
    for axes in [(0, 1), (3, 17, 29), ()]:
        assert np.array_equal(table.margin_counts(axes), people.margin_counts(axes))
    assert table.n == int(counts.sum()) and table_fingerprint(table, KEY) == table_fingerprint(people, KEY)
    # Listed as complete it cannot be: one line says to list the non-zero cells as a sparse table.
    with pytest.raises(tr.TabreleaseError, match="--sparse"):
        table_from_frame(frame.assign(count=counts), complete=True, levels=levels)


def test_bad_weights_are_refused():
    codes = np.array([[0, 1], [1, 0]])
    for weights in (np.array([1, -1]), np.array([1.5, 2.0]), np.array([1, 2, 3]),
                    np.array([2**64 - 1, 2], np.uint64), np.array([2**63, 5], np.uint64)):
        with pytest.raises(tr.TabreleaseError, match="non-negative whole number"):
            MicrodataTable(("a", "b"), (("0", "1"), ("0", "1")), codes, weights=weights)


@pytest.mark.e2e
def test_a_table_released_before_fingerprints_changed_is_still_recognised(tmp_path, monkeypatch):
    # A ledger written by the earlier version holds the cells table's legacy fingerprint alone. Today's charge of the
    # same table under another dataset must still find it, and record the legacy fingerprint beside the new one.
    import tabrelease.ledger as ledger_module

    table = tr.builtin_table("czech")
    ledger = init_ledger(tmp_path / "ledger.json")
    guarantee = PrivacyGuarantee(unit=PrivacyUnit(kind="add-remove"), loss=tr.loss_of(1.0))
    key = ledger_key(ledger)
    legacy = legacy_cells_fingerprint(table, key)
    with monkeypatch.context() as old_version:
        old_version.setattr(ledger_module, "table_prints", lambda t, k, *_: (legacy_cells_fingerprint(t, k), []))
        first = charge(ledger, table, guarantee, mechanism="planned", margins=["[AB]"], output=None,
                       noise_mode="simulation")
    assert first["fingerprint"] == legacy and "fingerprints_also" not in first
    account = tr.LedgerAccount(ledger=ledger, dataset="czech-again")
    with pytest.raises(BudgetRefused, match="released before under the dataset 'czech'"):
        charge(account, table, guarantee, mechanism="planned", margins=["[AB]"], output=None,
               noise_mode="simulation")
    allowed = tr.LedgerAccount(ledger=ledger, dataset="czech-again", allow_alias=True)
    entry = charge(allowed, table, guarantee, mechanism="planned", margins=["[AB]"], output=None,
                   noise_mode="simulation")
    assert entry["fingerprint"] == table_fingerprint(table, key) != legacy
    assert entry["fingerprints_also"] == [legacy, multiset_fingerprint(table, key), order_free_fingerprint(table, key),
                                          canonical_fingerprint(table, key), canonical_multiset_fingerprint(table, key)]
    assert entry["aliases"] == ["czech"]
    # The same table given as one row per person is the same table to the ledger.
    people = table_from_microdata(_people(table), levels=dict(zip(table.variables, map(list, table.levels))),
                                  name="czech", as_records=True)
    with pytest.raises(BudgetRefused, match="released before under the dataset"):
        charge(tr.LedgerAccount(ledger=ledger, dataset="czech-third"), people, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")


@pytest.mark.e2e
def test_a_table_released_as_cells_before_is_recognised_when_it_comes_back_as_records(tmp_path, monkeypatch):
    # The earlier version recorded the cells fingerprint only; the same people given one row each (held as records)
    # under another dataset must be found, and counted as the same table in the first dataset's status.
    import tabrelease.ledger as ledger_module
    from tabrelease.ledger import budget_status

    table = tr.builtin_table("rochdale")
    ledger = init_ledger(tmp_path / "ledger.json")
    guarantee = PrivacyGuarantee(unit=PrivacyUnit(kind="add-remove"), loss=tr.loss_of(1.0))
    with monkeypatch.context() as old_version:
        old_version.setattr(ledger_module, "table_prints", lambda t, k, *_: (legacy_cells_fingerprint(t, k), []))
        charge(ledger, table, guarantee, mechanism="planned", margins=["[AB]"], output=None, noise_mode="simulation")
    people = table_from_microdata(_people(table), levels=dict(zip(table.variables, map(list, table.levels))),
                                  name="rochdale", as_records=True)
    with pytest.raises(BudgetRefused, match="released before under the dataset 'rochdale'"):
        charge(tr.LedgerAccount(ledger=ledger, dataset="rochdale-records"), people, guarantee, mechanism="planned",
               margins=["[AB]"], output=None, noise_mode="simulation")
    charge(ledger, people, guarantee, mechanism="planned", margins=["[AB]"], output=None, noise_mode="simulation")
    assert len(budget_status(ledger, "rochdale").fingerprints) == 1


def test_the_legacy_fingerprint_is_the_hmac_of_the_json_earlier_versions_wrote():
    # Earlier versions took HMAC-SHA256 of json.dumps({variables, levels, counts: every cell}, separators=(",", ":"));
    # the legacy fingerprint, streamed block by block, must be those very bytes (else old records go unrecognised).
    import hashlib
    import hmac
    import json

    from tabrelease.tables import ContingencyTable

    rng = np.random.default_rng(3)
    tables = [tr.builtin_table(name) for name in ("edwards", "journey_to_work")]
    tables.append(ContingencyTable(("a", "b"), (("x", "y", "z"), ("1", "2")), rng.integers(0, 10**12, size=(3, 2))))
    # Past one block of 2^20 cells: the blocks are joined as the list's own commas join them.
    wide = (tuple(map(str, range(1024))), tuple(map(str, range(1027))))
    tables.append(ContingencyTable(("c", "d"), wide, rng.integers(0, 50, size=(1024, 1027))))
    for table in tables:
        text = json.dumps({"variables": list(table.variables), "levels": [list(map(str, lv)) for lv in table.levels],
                           "counts": [int(c) for c in table.counts.ravel()]}, separators=(",", ":"))
        assert legacy_cells_fingerprint(table, KEY) == hmac.new(KEY, text.encode(), hashlib.sha256).hexdigest()
