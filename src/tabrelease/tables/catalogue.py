"""The built-in tables: the Yang-Fienberg-Rinaldo paper's four and classic outside tables, read from the package
(a wheel carries them as tabrelease/_tables) or, in a source checkout, from the repository's tables/ folder."""

from __future__ import annotations

import csv
import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import TabreleaseError


from .model import ContingencyTable

# The four tables of the Yang-Fienberg-Rinaldo paper (the reproduction and its tests use exactly these), and
# classic log-linear tables from outside the paper (R's MASS and datasets) for comparing mechanisms beyond it.
PAPER_TABLES = ("edwards", "czech", "rochdale", "journey_to_work")
OUTSIDE_TABLES = ("housing", "titanic", "minn38")
BUILTIN_TABLES = PAPER_TABLES + OUTSIDE_TABLES


# --- built-in tables ---------------------------------------------------------------------------
def _builtin_dir() -> Path:
    # An installed wheel carries the tables inside the package; a source checkout (and an
    # editable install) finds them at the top of the repository.
    packaged = resources.files("tabrelease") / "_tables"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "tables"  # src/tabrelease/tables/catalogue.py -> the repository


@cache
def builtin_metadata(name: str) -> dict[str, Any]:
    if name not in BUILTIN_TABLES:
        raise TabreleaseError(f"no built-in table {name!r}; the built-in tables are {', '.join(BUILTIN_TABLES)}")
    with open(_builtin_dir() / f"{name}.json", encoding="utf-8") as fh:
        return json.load(fh)


def counts_digest(table) -> str:
    """A short digest of a table's counts and shape (BLAKE2b, 8 bytes, in hex): whether two runs released the same
    counts (a sweep's --resume, the frontier's --keep-others). Unkeyed: it is kept beside outputs that are internal.

    Parameters
    ----------
    table : ContingencyTable
        The table (its names are not digested).

    Returns
    -------
    str
    """
    import hashlib

    return hashlib.blake2b(np.ascontiguousarray(table.counts).tobytes() + repr(table.shape).encode(),
                           digest_size=8).hexdigest()


def holds_builtin_counts(name: str, table) -> bool:
    """Whether `table` holds the counts of the built-in table `name` (a file may take a built-in table's name only
    so: else its rows, seeds and figures would read as that table's).

    Parameters
    ----------
    name : str
        A built-in table's name.
    table : ContingencyTable

    Returns
    -------
    bool
    """
    built_in = builtin_table(name).counts
    return table.counts.shape == built_in.shape and bool(np.array_equal(table.counts, built_in))


@cache
def builtin_table(name: str) -> ContingencyTable:
    """A built-in table (one of the paper's four, or an outside table), with its metadata."""
    meta = builtin_metadata(name)
    variables = [v["name"] for v in meta["variables"]]
    levels = [[str(x) for x in v["levels"]] for v in meta["variables"]]
    # Read with the csv module (no pandas on the release path); the files are ours, and checked all the same.
    with open(_builtin_dir() / f"{name}.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    if rows[0] != variables + ["count"]:
        raise TabreleaseError(f"the built-in table {name} has columns {rows[0]}, not {variables + ['count']}")
    shape = tuple(len(lv) for lv in levels)
    position = [{label: i for i, label in enumerate(lv)} for lv in levels]
    counts = np.full(shape, -1, dtype=np.int64)
    for row in rows[1:]:
        counts[tuple(p[label] for p, label in zip(position, row[:-1]))] = int(row[-1])
    if len(rows) - 1 != counts.size or (counts < 0).any():
        raise TabreleaseError(f"the built-in table {name} does not list every cell once")
    return ContingencyTable(tuple(variables), tuple(map(tuple, levels)), counts, name, meta)


def describe_builtin_tables() -> list[dict[str, Any]]:
    """Name, shape, n, zero cells and default model of each built-in table, and whether it is the paper's.

    Returns
    -------
    list of dict
        One dict per built-in table: ``name``, ``title``, ``shape`` (list of int), ``cells``, ``n``,
        ``zero_cells``, ``model`` (the default model's text), ``paper_table``, ``from_paper`` (bool) and
        ``variables`` (each variable's name mapped to its meaning).
    """
    rows = []
    for name in BUILTIN_TABLES:
        table = builtin_table(name)
        meta = table.metadata
        rows.append(
            {
                "name": name,
                "title": meta["title"],
                "shape": list(table.shape),
                "cells": table.cells,
                "n": table.n,
                "zero_cells": table.zero_cells,
                "model": meta["model"],
                "paper_table": meta["paper_table"],
                "from_paper": name in PAPER_TABLES,
                "variables": {v["name"]: v["meaning"] for v in meta["variables"]},
            }
        )
    return rows
