"""Step 6: from a real-valued estimate to the released counts, and whether the margins agree.

`nearest` rounds each cell to the nearest integer (halves up) and never below 0 (the paper's step
6); `none` releases the estimate as it is (nonneg's lifted margins are not counts). Released
margins come from the rounded table when there is one, so they are consistent by construction;
margins estimated on their own are checked on every shared sub-margin.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .models import Margin
from .tables import margin_counts

NEAREST = "nearest"
NO_ROUNDING = "none"


def round_table(table: np.ndarray) -> np.ndarray:
    """The nearest integer to each cell (halves up), never below 0."""
    return np.maximum(np.floor(np.asarray(table, float) + 0.5), 0).astype(np.int64)


def mutually_consistent(released: Sequence[np.ndarray], margins: Sequence[Margin], atol: float = 0.0) -> bool:
    """Do the margins agree on every shared sub-margin (exactly, or within atol for real-valued margins)?"""
    for i, (a, ma) in enumerate(zip(margins, released)):
        for b, mb in zip(margins[i + 1 :], released[i + 1 :]):
            shared = tuple(sorted(set(a) & set(b)))
            sa = margin_counts(ma, [a.index(j) for j in shared]) if shared else ma.sum()
            sb = margin_counts(mb, [b.index(j) for j in shared]) if shared else mb.sum()
            if not np.allclose(sa, sb, rtol=0.0, atol=atol):
                return False
    return True


@dataclass(frozen=True, eq=False)
class Rounded:
    table: np.ndarray | None  # the released table w' (None when only margins were estimated)
    margins: tuple[np.ndarray, ...]
    consistent: bool
    seconds: float


def round_estimate(estimate, margins: Sequence[Margin], rounding: str, scale: float) -> Rounded:
    """Round an estimate as the plan says and take the released margins from it."""
    start = time.perf_counter()
    if estimate.table is not None:
        table = round_table(estimate.table) if rounding == NEAREST else np.asarray(estimate.table)
        released = tuple(margin_counts(table, g) for g in margins)
        return Rounded(table, released, True, time.perf_counter() - start)
    pieces = estimate.margins
    released = tuple(round_table(m) for m in pieces) if rounding == NEAREST else tuple(pieces)
    # Real-valued margins agree up to floating-point error at best.
    atol = 0.0 if rounding == NEAREST else 1e-9 * max(1.0, scale)
    return Rounded(None, released, mutually_consistent(released, margins, atol), time.perf_counter() - start)
