"""Declared metadata: the levels file and the --metadata file (variables, levels, labels for people), and a table
carrying the declared labels."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import read_side_file
from ..errors import TabreleaseError


@dataclass(frozen=True)
class DeclaredMetadata:
    """A --metadata file, in the shape of the built-in tables' JSON: variables in order, each with its levels in
    order and optional `label` and `level_labels` (names for people in published files)."""

    variables: tuple[str, ...]
    levels: Mapping[str, tuple[str, ...]]
    described: tuple[Mapping[str, Any], ...]
    # The words a published cross-tab uses, in the user's language: {"total": "Ensemble", "count": "Effectif"}.
    words: Mapping[str, str] = field(default_factory=dict)


# The words a metadata file may give for the published workbook's own labels (English by default).
WORDS = {"total": "Total", "count": "count"}


def read_metadata(path: str | Path) -> DeclaredMetadata:
    """A --metadata file read and checked: its variables in order, their levels and their labels for people.

    Parameters
    ----------
    path : str or Path
        The JSON file (UTF-8, a byte-order mark allowed), ``{"variables": [{"name", "levels", "label",
        "level_labels"}, ...]}``.

    Returns
    -------
    DeclaredMetadata
        The declared variables, levels and descriptions.

    Raises
    ------
    TabreleaseError
        If the file cannot be read or is not valid JSON, or a variable has no name, fewer than two levels, a level
        listed twice, labels for undeclared levels, or is declared twice.
    """
    path = Path(path)
    meta = _read_side_json(path, "metadata file")
    entries = meta.get("variables") if isinstance(meta, dict) else None
    if not isinstance(entries, list) or not entries or not all(isinstance(v, dict) for v in entries):
        raise TabreleaseError(f"the metadata file {path} needs a list \"variables\" of objects with a name and levels")
    described = []
    for number, entry in enumerate(entries, start=1):
        name, levels = entry.get("name"), entry.get("levels")
        if not isinstance(name, str) or not name.strip():
            raise TabreleaseError(f"the metadata file {path}: variable {number} has no name")
        if not isinstance(levels, list) or len(levels) < 2:
            raise TabreleaseError(f"the metadata file {path}: variable {name!r} needs a list of at least two levels")
        levels = [str(x).strip() for x in levels]
        if len(set(levels)) != len(levels):
            raise TabreleaseError(f"the metadata file {path}: variable {name!r} lists a level twice")
        labels = entry.get("level_labels") or {}
        if not isinstance(labels, dict) or set(map(str, labels)) - set(levels):
            raise TabreleaseError(f"the metadata file {path}: variable {name!r} has level labels for levels it does "
                                  "not declare")
        item = {"name": name.strip(), "levels": levels, "level_labels": {str(k): str(v) for k, v in labels.items()}}
        if entry.get("label"):
            item["label"] = str(entry["label"])
        described.append(item)
    names = [d["name"] for d in described]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise TabreleaseError(f"the metadata file {path} declares {', '.join(repeated)} twice")
    words = meta.get("words", {})
    if not isinstance(words, dict) or set(words) - set(WORDS) or not all(
            isinstance(w, str) and w.strip() for w in words.values()):
        raise TabreleaseError(f"the metadata file {path}: \"words\" gives texts for {' and '.join(WORDS)} (the "
                              "workbook's own labels), e.g. {\"total\": \"Ensemble\", \"count\": \"Effectif\"}")
    # The published files name their columns and rows by these labels: two variables of one label, or one labelled
    # as the count column, gave a file with two columns of one name that the tool could not read back; a level
    # labelled as the total gave a workbook two rows labelled so (a new user's trial): that one is allowed ("Total"
    # hearing loss is a level), and the workbook's total row says what it is.
    said = {**WORDS, **{k: v.strip() for k, v in words.items()}}
    people = [d.get("label") or d["name"] for d in described]
    twice = sorted({p for p in people if people.count(p) > 1})
    if twice:
        raise TabreleaseError(f"the metadata file {path} gives two variables the name {twice[0]!r} for people (the "
                              "published files name their columns by it)")
    for word, column in ((WORDS["count"], "the CSV files' count column"), (said["count"], "the workbook's count "
                                                                                           "column")):
        if word in people:
            raise TabreleaseError(f"the metadata file {path} names a variable {word!r} for people, the name of "
                                  f"{column}")
    for d in described:
        shown = [d["level_labels"].get(level, level) for level in d["levels"]]
        if len(set(shown)) != len(shown):
            raise TabreleaseError(f"the metadata file {path}: variable {d['name']!r} labels two levels alike")
    return DeclaredMetadata(tuple(names), {d["name"]: tuple(d["levels"]) for d in described}, tuple(described),
                            {k: v.strip() for k, v in words.items()})


def with_declared_metadata(table, declared: DeclaredMetadata):
    """The table carrying the declared labels (as a built-in table carries its own: see people_names).

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable
        The table read.
    declared : DeclaredMetadata
        What the metadata file declares.

    Returns
    -------
    ContingencyTable or MicrodataTable
        A copy of the table whose ``metadata["variables"]`` holds the declared descriptions of its variables.

    Raises
    ------
    TabreleaseError
        If a variable of the table is not declared.
    """
    from dataclasses import replace

    undeclared = [v for v in table.variables if v not in declared.levels]
    if undeclared:
        raise TabreleaseError(f"variable {undeclared[0]!r} is not declared in the metadata file")
    metadata = dict(table.metadata or {})
    metadata["variables"] = [d for d in declared.described if d["name"] in table.variables]
    if declared.words:
        metadata["words"] = dict(declared.words)
    return replace(table, metadata=metadata)


def _read_side_json(path, what: str, encoding: str = "utf-8-sig"):
    """A small JSON file (levels, metadata), read whole: a pipe, a device, a file past the side-file limit, text
    that is not JSON and JSON nested past what the parser can follow are each one line."""
    data = read_side_file(path, what)
    try:
        return json.loads(data.decode(encoding))
    except json.JSONDecodeError as exc:  # where, and what the parser wanted: never the text itself
        raise TabreleaseError(f"the {what} {path} is not valid JSON ({exc.msg} at line {exc.lineno}, column "
                              f"{exc.colno})") from None
    except UnicodeDecodeError:
        raise TabreleaseError(f"the {what} {path} is not valid JSON") from None
    except RecursionError:
        raise TabreleaseError(f"the {what} {path} nests too deeply to read (thousands of brackets inside each "
                              "other)") from None


def read_levels_file(path) -> dict[str, list[str]] | None:
    """The declared levels of a levels JSON file: {variable: [level, ...]} (None without a path).

    Parameters
    ----------
    path : str or Path or None
        The levels JSON file, or None.

    Returns
    -------
    dict of str to list of str, or None
        Each variable's declared levels, in order; None when `path` is None.

    Raises
    ------
    TabreleaseError
        If the file cannot be read, is not JSON mapping each variable to a non-empty list, or lists a level twice.
    """
    if path is None:
        return None
    levels = _read_side_json(path, "levels file")
    if not isinstance(levels, dict) or not all(isinstance(v, list) and v for v in levels.values()):
        raise TabreleaseError(f"the levels file {path} must map each variable to a list of its levels")
    # Stripped as every field and name of a file is read (and as the metadata file's are): a level declared
    # " Male " matched no record and was published as a category of its own, always empty, beside "Male" (a new
    # user's trial; the bundle's own `test` then refused it as edited).
    declared = {}
    for name, given in levels.items():
        variable = str(name).strip()
        if variable in declared:
            raise TabreleaseError(f"the levels file {path} declares the variable {variable!r} twice (spaces around a "
                                  "name are not part of it)")
        declared[variable] = [str(x).strip() for x in given]
    for variable, lv in declared.items():
        if "" in lv:
            raise TabreleaseError(f"the levels file {path}: variable {variable!r} declares an empty level (a missing "
                                  "value is read as a level with --missing-level LABEL, and LABEL declared)")
        repeated = _repeated(lv)
        if repeated is not None:
            raise TabreleaseError(f"the levels file {path}: variable {variable!r} lists the level {repeated!r} twice "
                                  "(spaces around a level are not part of it)")
    return declared


def _repeated(items: Sequence[str]) -> str | None:
    """The first item that appeared before, or None."""
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None
