"""Versioned JSON schemas of what tabrelease writes (pyhf ships its `schemas/` the same way).

* `release-1`: public/release.json, and the allow-list of what may be published;
* `audit-1`: internal/audit.json;
* `sweep-row-1`, `sweep-margin-row-1`: a sweep's rows;
* `plan-1`: what `tabrelease plan --json` prints.

`validate` raises a one-line `TabreleaseError` that names where a document breaks its schema,
never the offending value (an audit holds confidential numbers).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

from ..errors import TabreleaseError

RELEASE = "release-1"
AUDIT = "audit-1"
SWEEP_ROW = "sweep-row-1"
SWEEP_MARGIN_ROW = "sweep-margin-row-1"
PLAN = "plan-1"
ALL = (RELEASE, AUDIT, SWEEP_ROW, SWEEP_MARGIN_ROW, PLAN)


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


# The keywords the schemas use, all that `validate` checks. A schema with any other keyword is refused when it is
# loaded for checking (`_keywords_known`), so a keyword added to a schema cannot be silently ignored.
_ANNOTATIONS = frozenset({"$schema", "$id", "title", "description"})
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "const", "$ref",
                       "minimum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "minItems", "pattern"})
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    # Draft 2020-12: a number with no fractional part is an integer (1.0 is).
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}


def _json_equal(a, b) -> bool:
    """Equality of JSON values (enum, const): true and 1 differ, 1 and 1.0 do not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if _TYPES["number"](a) and _TYPES["number"](b):
        return a == b
    return type(a) is type(b) and a == b


@cache
def _schemas_by_id() -> dict:
    schemas = {load_schema(name)["$id"]: load_schema(name) for name in ALL}
    for schema in schemas.values():
        _keywords_known(schema)
    return schemas


def _keywords_known(schema) -> None:
    if not isinstance(schema, dict):
        if isinstance(schema, bool):
            return
        raise TabreleaseError("internal error: a schema is neither an object nor a boolean")
    unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise TabreleaseError(f"internal error: a schema uses keywords that tabrelease does not check: "
                              f"{sorted(unknown)}")
    for sub in schema.get("properties", {}).values():
        _keywords_known(sub)
    for key in ("items", "additionalProperties"):
        if key in schema:
            _keywords_known(schema[key])


def _ecma_end(pattern: str) -> str:
    """The pattern with a final `$` read as JSON Schema (ECMA-262) reads it, the end of the string: Python's `$` also
    matches before a final newline, which would let "a.csv\n" through the file-name pattern of what is published
    (jsonschema, using Python's `re` as it is, lets it through)."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        return pattern[:-1] + r"\Z"
    return pattern


def _errors(value, schema, path: tuple, schemas: dict):
    """(path, keyword) of every place where `value` breaks `schema` (the subset of Draft 2020-12 in `_KEYWORDS`)."""
    if schema is True:
        return
    if schema is False:
        yield path, "false schema"
        return
    if "$ref" in schema:
        yield from _errors(value, schemas[schema["$ref"]], path, schemas)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            yield path, "type"
    if "const" in schema and not _json_equal(value, schema["const"]):
        yield path, "const"
    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        yield path, "enum"
    if _TYPES["number"](value):
        if "minimum" in schema and not value >= schema["minimum"]:
            yield path, "minimum"
        if "exclusiveMinimum" in schema and not value > schema["exclusiveMinimum"]:
            yield path, "exclusiveMinimum"
        if "exclusiveMaximum" in schema and not value < schema["exclusiveMaximum"]:
            yield path, "exclusiveMaximum"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            yield path, "minLength"
        if "pattern" in schema and re.search(_ecma_end(schema["pattern"]), value) is None:
            yield path, "pattern"
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            yield path, "minItems"
        if "items" in schema:
            for i, item in enumerate(value):
                yield from _errors(item, schema["items"], path + (i,), schemas)
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                yield path, "required"
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties", True)
        if additional is False and any(key not in properties for key in value):
            yield path, "additionalProperties"  # one error for the object, as jsonschema reports it
        for key, item in value.items():
            if key in properties:
                yield from _errors(item, properties[key], path + (key,), schemas)
            elif additional is not False:
                yield from _errors(item, additional, path + (key,), schemas)


def schema_errors(document, name: str) -> list[tuple[tuple, str]]:
    """Where a document breaks a schema, and how.

    Parameters
    ----------
    document : object
        The JSON document to check.
    name : str
        The schema's name (one of `ALL`).

    Returns
    -------
    list of (tuple, str)
        Each error's path in the document (keys and indices) and the keyword it breaks; empty when it is valid.
    """
    if name not in ALL:
        raise TabreleaseError(f"no schema {name!r}; the schemas are {', '.join(ALL)}")
    return list(_errors(document, load_schema(name), (), _schemas_by_id()))


def validate(document, name: str) -> None:
    """Check a document against a schema; a failure names the place and the rule broken, not the value.

    The check is tabrelease's own, of the Draft 2020-12 keywords its schemas use (a schema with another keyword
    is refused): jsonschema's import alone took longer than numpy's, in a command-line release that has to start
    in a few times numpy's time. The tests check that the two agree on every kind of document and on documents
    broken in every way the schemas constrain.

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
    errors = schema_errors(document, name)
    if errors:
        path, keyword = min(errors, key=lambda e: [str(p) for p in e[0]])
        where = "/".join(str(p) for p in path) or "(top level)"
        raise TabreleaseError(f"internal error: the document does not match schema {name} at {where} "
                              f"(rule: {keyword})")


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
