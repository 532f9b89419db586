"""The classical disclosure-risk picture beside epsilon, for the internal audit only.

What a plain, non-private release of the same margins would have exposed (cells of count 1
and 2, the sample uniques and pairs, and the smallest non-zero cell per margin), and what the
released margins show in their small cells: how many correspond to true zeros (noise that looks
like a rare combination) and how many to true small counts (where the release sits close to a
disclosive value). It reads the confidential counts: never part of the public bundle.
"""

from __future__ import annotations

import numpy as np

from .models import margin_label
from .pipeline import Release
from .tables import ContingencyTable

SMALL_COUNT = 2


def _small_cells(true: np.ndarray, released: np.ndarray | None, small: int) -> dict:
    true = np.asarray(true)
    nonzero = true[true > 0]
    record = {
        "cells": int(true.size),
        "true_count_1": int((true == 1).sum()),
        "true_count_2": int((true == 2).sum()),
        "true_small": int(((true >= 1) & (true <= small)).sum()),
        "smallest_nonzero": None if nonzero.size == 0 else int(nonzero.min()),
    }
    if released is not None:
        released = np.asarray(released, float)
        small_released = (released >= 0.5) & (released < small + 0.5)
        true_small = (true >= 1) & (true <= small)
        record.update({
            "released_small": int(small_released.sum()),
            "released_small_true_zero": int((small_released & (true == 0)).sum()),
            "released_small_true_small": int((small_released & true_small).sum()),
            # Read as a count the same way as everywhere else here: halves up.
            "released_small_true_exact": int((small_released & (np.floor(released + 0.5) == true)).sum()),
            "true_small_released_zero": int((true_small & (released < 0.5)).sum()),
        })
    return record


def disclosure_risk(table: ContingencyTable, release: Release, small: int = SMALL_COUNT) -> dict:
    """Per released margin (and for the full table): small true cells and small released cells.

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable
        The confidential table.
    release : Release
        Its release (margins, and the table when one was released).
    small : int, default SMALL_COUNT
        The largest count called small.

    Returns
    -------
    dict
        ``small_count``; ``margins``, each released margin's label (``"[AB]"``) mapped to its counts of small true
        and small released cells; ``full_table``, the same for the whole table (true cells only when it is held as
        records); and ``reading``, a sentence on how to read them. Holds confidential counts: for the internal audit.
    """
    margins = {
        margin_label(g, table.letters): _small_cells(table.margin_counts(g), released, small)
        for g, released in zip(release.margins, release.released_margins)
    }
    if getattr(table, "held_as_file", False):
        # Counted from its file as margins: the whole table's small cells would need every distinct record.
        full = {"cells": table.cells, "true_count_1": None, "true_count_2": None, "true_small": None,
                "smallest_nonzero": None}
    elif getattr(table, "held_as_cells", True):
        full = _small_cells(table.counts, release.table, small)
    else:
        # Held as records: the non-zero cells are the distinct records (no released table exists at this size).
        full = _small_cells(table.distinct_records()[1], None, small)
        full["cells"] = table.cells
    return {
        "small_count": small,
        "margins": margins,
        "full_table": full,
        "reading": (
            "true_count_1 / true_count_2: sample uniques and pairs a plain release of the margin would show; "
            f"released_small: released cells of 1..{small}, of which true_zero correspond to empty cells and "
            f"true_small to true counts of 1..{small} (true_exact: equal to the true count)"
        ),
    }
