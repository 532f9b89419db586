"""Versioned schemas: what is written matches them, and a document that does not is refused without its values."""

import json
import math

import pytest

import tabrelease.reports as reports
from tabrelease import TabreleaseError, builtin_table, make_grid, run_sweep
from tabrelease.cli import main
from tabrelease.schemas import AUDIT, RELEASE, SWEEP_MARGIN_ROW, SWEEP_ROW, load_schema, validate


@pytest.mark.unit
def test_every_schema_is_a_valid_draft_2020_12_schema():
    from jsonschema import Draft202012Validator

    for name in (RELEASE, AUDIT, SWEEP_ROW, SWEEP_MARGIN_ROW):
        Draft202012Validator.check_schema(load_schema(name))


def test_bundles_of_every_mechanism_match_their_schemas(tmp_path, capsys):
    for mechanism in ("auto", "gaussian", "binary-encoding", "cells", "margins", "nonneg", "gaussian-copula",
                      "copula-id", "randomized-response", "sensitive-attributes"):
        out = tmp_path / mechanism
        extra = {"gaussian": ["--delta", "1e-6"],
                 "sensitive-attributes": ["--sensitive", "A", "--neighbours", "replace"]}.get(mechanism, [])
        assert main(["release", "journey_to_work", "--epsilon", "1", "--mechanism", mechanism, "--simulate",
                     "--seed", "1", "--out", str(out), *extra]) == 0
        public = json.loads((out / "public" / "release.json").read_text())
        audit = json.loads((out / "internal" / "audit.json").read_text())
        validate(public, RELEASE)
        validate(audit, AUDIT)
        assert public["schema"] == "tabrelease/release/1" and audit["schema"] == "tabrelease/audit/1"
    capsys.readouterr()


def test_a_key_outside_the_schema_is_never_published(tmp_path, monkeypatch, capsys):
    parameters = reports.release_parameters

    def leaky(table, release, version, release_id=None):
        return {**parameters(table, release, version, release_id), "n": table.n}  # a confidential number

    monkeypatch.setattr(reports, "release_parameters", leaky)
    assert main(["release", "czech", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "schema release-1" in err and err.count("\n") == 1
    assert "1841" not in err  # the value itself is never printed
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_a_failure_names_the_place_not_the_value():
    audit_like = {"schema": "tabrelease/audit/1", "table": {"n": "1841 people"}}
    with pytest.raises(TabreleaseError) as caught:
        validate(audit_like, AUDIT)
    assert "1841" not in str(caught.value)


def test_sweep_rows_match_their_schemas():
    grid = make_grid([builtin_table("rochdale")], [0.5], 2, mechanisms=("auto", "margins"), master_seed=2)
    result = run_sweep(grid, progress=False)

    def records(frame):
        for row in frame.to_dict(orient="records"):
            yield {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}

    for row in records(result.runs):
        validate(row, SWEEP_ROW)
    for row in records(result.margin_errors):
        validate(row, SWEEP_MARGIN_ROW)
