"""Versioned JSON schemas of what tabrelease writes (pyhf ships its `schemas/` the same way).

* `release-1`: public/release.json, and the allow-list of what may be published;
* `audit-1`: internal/audit.json;
* `sweep-row-1`, `sweep-margin-row-1`: a sweep's rows.

`validate` raises a one-line `TabreleaseError` that names where a document breaks its schema,
never the offending value (an audit holds confidential numbers).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from ..errors import TabreleaseError

RELEASE = "release-1"
AUDIT = "audit-1"
SWEEP_ROW = "sweep-row-1"
SWEEP_MARGIN_ROW = "sweep-margin-row-1"
ALL = (RELEASE, AUDIT, SWEEP_ROW, SWEEP_MARGIN_ROW)


@cache
def load_schema(name: str) -> dict:
    """A schema by name, read from the package once.

    Parameters
    ----------
    name : str
        One of `ALL` (``"release-1"``, ``"audit-1"``, ``"sweep-row-1"``, ``"sweep-margin-row-1"``).

    Returns
    -------
    dict
        The JSON schema (shared between calls: do not change it).

    Raises
    ------
    TabreleaseError
        If there is no schema of that name.
    """
    if name not in ALL:
        raise TabreleaseError(f"no schema {name!r}; the schemas are {', '.join(ALL)}")
    return json.loads((resources.files(__name__) / f"{name}.schema.json").read_text(encoding="utf-8"))


@cache
def _validator(name: str):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    registry = Registry().with_resources(
        (load_schema(other)["$id"], Resource.from_contents(load_schema(other))) for other in ALL
    )
    return Draft202012Validator(load_schema(name), registry=registry)


def validate(document, name: str) -> None:
    """Check a document against a schema; a failure names the place and the rule broken, not the value.

    Parameters
    ----------
    document : object
        The JSON document (dicts, lists, strings, numbers) to check.
    name : str
        The schema's name (one of `ALL`).

    Raises
    ------
    TabreleaseError
        If the document breaks the schema (the first error by path), or there is no schema of that name.
    """
    error = next(iter(sorted(_validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise TabreleaseError(f"internal error: the document does not match schema {name} at {where} "
                              f"(rule: {error.validator})")


def check_columns(frame, name: str) -> None:
    """A table of rows has exactly the columns its schema names (rows are checked whole in the tests).

    Parameters
    ----------
    frame : pandas.DataFrame
        The rows.
    name : str
        The schema's name (one of `ALL`); its properties are the columns expected.

    Raises
    ------
    TabreleaseError
        If a column is extra or missing.
    """
    expected = set(load_schema(name)["properties"])
    columns = set(frame.columns)
    if columns != expected:
        extra, missing = sorted(columns - expected), sorted(expected - columns)
        raise TabreleaseError(f"internal error: rows do not match schema {name} (extra {extra}, missing {missing})")
