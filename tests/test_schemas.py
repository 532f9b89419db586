"""Versioned schemas: what is written matches them, and a document that does not is refused without its values."""

import copy
import json
import math

import pytest

import tabrelease.reports as reports
from tabrelease import TabreleaseError, builtin_table, make_grid, run_sweep
from tabrelease.cli import main
from tabrelease.schemas import AUDIT, PLAN, RELEASE, SWEEP_MARGIN_ROW, SWEEP_ROW, load_schema, validate


@pytest.mark.unit
def test_every_schema_is_a_valid_draft_2020_12_schema():
    from jsonschema import Draft202012Validator

    for name in (RELEASE, AUDIT, SWEEP_ROW, SWEEP_MARGIN_ROW, PLAN):
        Draft202012Validator.check_schema(load_schema(name))


MECHANISMS = ("auto", "gaussian", "binary-encoding", "cells", "margins", "nonneg", "gaussian-copula", "copula-id",
              "randomized-response", "sensitive-attributes")


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """(public release.json, internal audit.json) of one release by each kind of mechanism."""
    made = {}
    for mechanism in MECHANISMS:
        out = tmp_path_factory.mktemp("bundles") / mechanism
        extra = {"gaussian": ["--delta", "1e-6"],
                 "sensitive-attributes": ["--sensitive", "A", "--neighbours", "replace"]}.get(mechanism, [])
        assert main(["release", "journey_to_work", "--epsilon", "1", "--mechanism", mechanism, "--simulate",
                     "--seed", "1", "--out", str(out), *extra]) == 0
        made[mechanism] = (json.loads((out / "public" / "release.json").read_text()),
                           json.loads((out / "internal" / "audit.json").read_text()))
    return made


def test_bundles_of_every_mechanism_match_their_schemas(documents):
    from jsonschema import Draft202012Validator

    for public, audit in documents.values():
        validate(public, RELEASE)
        validate(audit, AUDIT)
        assert not list(Draft202012Validator(load_schema(RELEASE)).iter_errors(public))
        assert public["schema"] == "tabrelease/release/1" and audit["schema"] == "tabrelease/audit/1"


def _breakages(document):
    """The document broken at every place, one way at a time (changed in place, restored after each yield): each key
    dropped, a key added, each value replaced by a value of every JSON type (numbers and strings at the edges the
    schemas draw)."""
    replacements = (None, True, 0, 1, -1, 2.5, "", "x", [], {})
    places = []

    def walk(value, parent, key):
        places.append((parent, key))
        if isinstance(value, dict):
            for k, item in value.items():
                walk(item, value, k)
        elif isinstance(value, list):
            for i, item in enumerate(value[:1]):
                walk(item, value, i)

    walk(document, None, None)
    for parent, key in places:
        if parent is None:
            yield from replacements
            continue
        original = parent[key]
        for new in replacements:
            parent[key] = new
            yield document
        if isinstance(key, str):
            del parent[key]
            yield document
        if isinstance(original, dict):
            parent[key] = {**original, "not_in_the_schema": 1}
            yield document
        parent[key] = original


def test_the_own_check_agrees_with_jsonschema_on_every_document_and_its_breakages(documents):
    # tabrelease checks its documents itself (jsonschema's import is slower than numpy's): the two must agree on
    # whether each document is valid and where it breaks, for every kind of release and every way of breaking it.
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    from tabrelease.schemas import ALL, schema_errors

    registry = Registry().with_resources((load_schema(n)["$id"], Resource.from_contents(load_schema(n))) for n in ALL)
    checked = broken = 0
    for mechanism in ("auto", "sensitive-attributes"):
        for document, name in zip(copy.deepcopy(documents[mechanism]), (RELEASE, AUDIT)):
            reference = Draft202012Validator(load_schema(name), registry=registry)
            for variant in _breakages(document):
                theirs = {(tuple(e.absolute_path), e.validator) for e in reference.iter_errors(variant)}
                ours = set(schema_errors(variant, name))
                assert ours == theirs, (mechanism, name, ours ^ theirs)
                checked += 1
                broken += bool(ours)
    assert broken > 1000 and checked - broken > 100  # both kinds were compared, many times


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


def test_plan_json_is_one_object_of_its_schema_whichever_question_is_asked(capsys):
    """`plan --json` printed a list for --epsilon and an object for --target-l1: a reader had to know the flag. Both
    are now one `plan-1` object, checked by jsonschema as well as the own check, alone on stdout."""
    from jsonschema import Draft202012Validator

    checker = Draft202012Validator(load_schema(PLAN))
    asked = {"expected_errors": ["--epsilon", "0.1,1"], "epsilon_for_target": ["--target-l1", "30"]}
    for question, flags in asked.items():
        for extra in ([], ["--delta", "1e-6", "--neighbours", "replace"], ["--public-total"]):
            assert main(["plan", "czech", *flags, *extra, "--json"]) == 0
            document = json.loads(capsys.readouterr().out)  # json.loads refuses anything beside the object
            assert list(checker.iter_errors(document)) == []
            validate(document, PLAN)
            assert document["question"] == question and document["margins"]
            assert document["noise"] == ("gaussian" if "--delta" in extra else "laplace")
            assert document["public_total"] is ("--public-total" in extra)
    # A target beyond reach: null, and a note says why (the terminal says "beyond").
    assert main(["plan", "czech", "--target-l1", "0.001", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["epsilon_needed_for_all"] is None and all(r["epsilon_needed"] is None for r in document["margins"])
    assert any("null where the target is beyond reach" in note for note in document["notes"])
    validate(document, PLAN)
    broken = dict(document, question="something else")
    assert list(checker.iter_errors(broken))
    with pytest.raises(TabreleaseError):
        validate(broken, PLAN)


@pytest.mark.unit
def test_a_schema_keyword_the_check_does_not_know_is_refused():
    from tabrelease.schemas import _keywords_known

    _keywords_known({"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}})
    with pytest.raises(TabreleaseError, match="oneOf"):
        _keywords_known({"type": "object", "properties": {"a": {"oneOf": [{"type": "integer"}]}}})
    with pytest.raises(TabreleaseError, match="maxItems"):
        _keywords_known({"type": "array", "items": {"type": "array", "maxItems": 2}})


@pytest.mark.unit
def test_a_final_newline_does_not_pass_a_pattern_anchored_at_the_end():
    # JSON Schema's patterns are ECMA-262's, where `$` is the end of the string; Python's `$` also matches before a
    # final newline, so a file name "a.csv\n" would pass the allow-list of what is published.
    from tabrelease.schemas import schema_errors

    def pattern_errors(document):
        return {path for path, keyword in schema_errors(document, RELEASE) if keyword == "pattern"}

    good = {"margins": [{"file": "a.csv"}], "release_id": "0" * 32}
    assert pattern_errors(good) == set()
    assert pattern_errors({"margins": [{"file": "a.csv\n"}], "release_id": "0" * 32 + "\n"}) == {
        ("margins", 0, "file"), ("release_id",)}
