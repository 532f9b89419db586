"""A sweep's grid: tables x mechanisms x calibrations x epsilon x repetitions, and each run's seed.

Every run's noise seed is a hash of the master seed and the run's own coordinates (table name,
mechanism actually run, calibration, epsilon, repetition), not of its position in the grid, so any
run replays alone, adding tables or epsilons leaves the other runs' seeds unchanged, and the rows do
not depend on how the work was split among processes or machines.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .._limits import MAX_EPSILONS, MAX_REPETITIONS, MAX_RUNS
from ..errors import TabreleaseError
from ..models import Margin, default_model, maximal_margins
from ..noise import SIMULATION, check_delta, check_epsilon
from ..tables import ContingencyTable

@dataclass(frozen=True, eq=False)
class SweepGrid:
    """What a sweep runs. Tables carry their counts, so workers (local or on a cluster) read no files."""

    tables: tuple[ContingencyTable, ...]
    margins: tuple[tuple[Margin, ...], ...]  # per table
    epsilons: tuple[float, ...]
    repetitions: int
    mechanisms: tuple[str, ...] = ("auto",)
    calibrations: tuple[str, ...] = ("exact",)
    neighbours: str = "add-remove"
    delta: float | None = None
    master_seed: int = 0

    def describe(self) -> dict:
        """The grid as plain data (no counts): saved beside the results and checked on --resume."""
        return {
            "tables": [t.name for t in self.tables],
            "table_fingerprints": [_counts_digest(t) for t in self.tables],
            "margins": [[list(g) for g in m] for m in self.margins],
            "epsilons": list(self.epsilons),
            "repetitions": self.repetitions,
            "mechanisms": list(self.mechanisms),
            "calibrations": list(self.calibrations),
            "neighbours": self.neighbours,
            "delta": self.delta,
            "master_seed": self.master_seed,
            "noise_mode": SIMULATION,
        }

    @property
    def runs(self) -> int:
        return len(self.tables) * len(self.mechanisms) * len(self.calibrations) * len(self.epsilons) * self.repetitions


@dataclass(frozen=True, eq=False)
class SweepChunk:
    """One grid point: every repetition of one table, mechanism, calibration and epsilon."""

    table: ContingencyTable
    margins: tuple[Margin, ...]
    mechanism: str
    calibration: str
    epsilon: float
    repetitions: int
    neighbours: str
    delta: float | None
    master_seed: int

    @property
    def key(self) -> str:
        label = f"{self.table.name}|{self.mechanism}|{self.calibration}|{self.neighbours}|{self.epsilon!r}"
        digest = hashlib.blake2b(label.encode(), digest_size=6).hexdigest()
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.table.name)
        return f"{safe}-{self.mechanism}-{self.calibration}-{self.epsilon:.6g}-{digest}"


def make_grid(
    tables: Sequence[ContingencyTable],
    epsilons: Iterable[float],
    repetitions: int,
    *,
    margins: Sequence[Sequence[Margin]] | None = None,
    mechanisms: Sequence[str] = ("auto",),
    calibrations: Sequence[str] = ("exact",),
    neighbours: str = "add-remove",
    delta: float | None = None,
    master_seed: int = 0,
) -> SweepGrid:
    """Check a grid; margins default to each table's paper model (tables/*.json), else its default model."""
    tables = tuple(tables)
    if not tables:
        raise TabreleaseError("a sweep needs at least one table")
    names = [t.name for t in tables]
    if len(set(names)) != len(names):
        raise TabreleaseError(f"two tables in one sweep have the same name: {sorted(n for n in names if names.count(n) > 1)[0]!r}")
    epsilons = tuple(float(check_epsilon(e)) for e in epsilons)
    if not epsilons:
        raise TabreleaseError("a sweep needs at least one epsilon")
    if len(set(epsilons)) != len(epsilons):
        raise TabreleaseError("an epsilon appears twice in the sweep grid")
    try:
        whole = int(repetitions) == repetitions
    except (OverflowError, TypeError, ValueError):  # inf, nan, text
        whole = False
    if not whole or repetitions < 1:
        raise TabreleaseError(f"repetitions must be a positive whole number, not {repetitions!r}")
    if repetitions > MAX_REPETITIONS:
        raise TabreleaseError(f"{int(repetitions):,} repetitions are more than {MAX_REPETITIONS:,}, the most a sweep "
                              "runs of each grid point")
    if len(epsilons) > MAX_EPSILONS:
        raise TabreleaseError(f"{len(epsilons):,} epsilons are more than {MAX_EPSILONS:,}, the most one grid may have")
    sizes = (len(tables), len(tuple(mechanisms)), len(tuple(calibrations)), len(epsilons), int(repetitions))
    runs = sizes[0] * sizes[1] * sizes[2] * sizes[3] * sizes[4]
    if runs > MAX_RUNS:
        raise TabreleaseError("the grid has {:,} runs ({} tables x {} mechanisms x {} calibrations x {} epsilons x {} "
                              "repetitions), more than {:,}, the most one sweep runs: split it"
                              .format(runs, *sizes, MAX_RUNS))
    if int(master_seed) != master_seed or master_seed < 0:
        raise TabreleaseError(f"the master seed must be a non-negative whole number, not {master_seed!r}")
    if delta is not None:
        delta = check_delta(delta)
    if margins is None:
        margins = [default_model(t).generators for t in tables]
    margins = tuple(tuple(maximal_margins(m)[0]) for m in margins)
    if len(margins) != len(tables):
        raise TabreleaseError("give one margin set per table")
    grid = SweepGrid(
        tables, margins, epsilons, int(repetitions), tuple(mechanisms), tuple(calibrations), neighbours,
        delta, int(master_seed),
    )
    # Fail before any work: every table x mechanism x calibration must make a valid plan, and two names of the
    # grid must not be one mechanism (auto and fourier on a binary table would run the same seeds twice).
    from ..mechanisms import resolve_mechanism

    for table, m in zip(tables, margins):
        resolved = [resolve_mechanism(mech, table.shape) for mech in grid.mechanisms]
        for name in set(resolved):
            if resolved.count(name) > 1:
                same = " and ".join(mech for mech, r in zip(grid.mechanisms, resolved) if r == name)
                raise TabreleaseError(f"the mechanisms {same} are the same mechanism ({name}) on {table.name}; give it once")
        for mech in grid.mechanisms:
            for cal in grid.calibrations:
                plan_for(table.shape, m, mech, cal, neighbours, delta)
    if delta is not None and all(delta_for(mech, t.shape, delta) is None for t in tables for mech in grid.mechanisms):
        raise TabreleaseError("--delta applies to the mechanisms that give (epsilon, delta)-DP (gaussian); none of "
                              f"this sweep's mechanisms ({', '.join(grid.mechanisms)}) does")
    return grid


def grid_chunks(grid: SweepGrid) -> list[SweepChunk]:
    return [
        SweepChunk(table, m, mech, cal, eps, grid.repetitions, grid.neighbours, grid.delta, grid.master_seed)
        for table, m in zip(grid.tables, grid.margins)
        for mech in grid.mechanisms
        for cal in grid.calibrations
        for eps in grid.epsilons
    ]


def available_cpus() -> int:
    """The CPUs this process may run on (the affinity mask where there is one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_seed(master_seed: int, table: str, mechanism: str, calibration: str, epsilon: float, repetition: int) -> int:
    """The noise seed of one run: a hash of the master seed and the run's coordinates (63 bits)."""
    label = f"{int(master_seed)}|{table}|{mechanism}|{calibration}|{float(epsilon)!r}|{int(repetition)}"
    return int.from_bytes(hashlib.blake2b(label.encode(), digest_size=8).digest(), "big") >> 1



def delta_for(mechanism: str, shape, delta: float | None) -> float | None:
    """A sweep's delta goes to the mechanisms that need one ((epsilon, delta)-DP: gaussian); the others run at pure
    epsilon, so that a Gaussian release is swept beside them at the same epsilon. (The planned mechanism would
    turn Gaussian given a delta: in a sweep it stays the default, Laplace release.)"""
    from ..mechanisms import get_mechanism, resolve_mechanism

    return delta if get_mechanism(resolve_mechanism(mechanism, shape)).needs_delta else None


def plan_for(shape, margins, mechanism, calibration, neighbours, delta):
    """The plan of a grid point's table and mechanism, built at epsilon 1 (each grid point rescales it)."""
    from ..planner import plan_release

    return plan_release(shape, margins, 1.0, mechanism=mechanism, neighbours=neighbours,
                        delta=delta_for(mechanism, shape, delta), calibration=calibration)


def _counts_digest(table: ContingencyTable) -> str:
    return hashlib.blake2b(np.ascontiguousarray(table.counts).tobytes() + repr(table.shape).encode(), digest_size=8).hexdigest()


