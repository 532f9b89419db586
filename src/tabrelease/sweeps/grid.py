"""A sweep's grid: tables x mechanisms x calibrations x epsilon x repetitions, and each run's seed.

Every run's noise seed is a hash of the master seed and the run's own coordinates (table name,
mechanism actually run, calibration, epsilon, repetition), not of its position in the grid, so any
run replays alone, adding tables or epsilons leaves the other runs' seeds unchanged, and the rows do
not depend on how the work was split among processes or machines.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .._limits import MAX_EPSILONS, MAX_REPETITIONS, MAX_RUNS
from ..errors import TabreleaseError
from ..models import Margin, default_model, maximal_margins
from ..noise import check_epsilon
from ..spec import SIMULATION, ReleaseSpec, check_releasable_loss, loss_of
from ..tables import MAX_TABLE_CELLS, ContingencyTable, counts_digest

@dataclass(frozen=True, eq=False)
class SweepGrid:
    """What a sweep runs. Tables carry their counts, so workers (local or on a cluster) read no files.

    `spec` holds every setting the grid does not vary (privacy unit, delta, the mechanism's options, estimator,
    rounding, and the master seed as its `seed`); each grid point is that spec at its own mechanism, calibration
    and epsilon."""

    tables: tuple[ContingencyTable, ...]
    margins: tuple[tuple[Margin, ...], ...]  # per table
    epsilons: tuple[float, ...]
    repetitions: int
    mechanisms: tuple[str, ...]
    calibrations: tuple[str, ...]
    spec: ReleaseSpec

    @property
    def master_seed(self) -> int:
        return self.spec.seed

    @property
    def neighbours(self) -> str:
        return self.spec.neighbours

    @property
    def delta(self) -> float | None:
        return self.spec.delta

    def describe(self) -> dict:
        """The grid as plain data (no counts): saved beside the results and checked on --resume.

        Returns
        -------
        dict
            JSON-ready: table names and fingerprints of their counts, margins, epsilons, repetitions, mechanisms,
            calibrations, neighbours, delta, master seed, noise mode, and the spec's other settings.
        """
        return {
            "tables": [t.name for t in self.tables],
            "table_fingerprints": [counts_digest(t) for t in self.tables],
            "margins": [[list(g) for g in m] for m in self.margins],
            "epsilons": list(self.epsilons),
            "repetitions": self.repetitions,
            "mechanisms": list(self.mechanisms),
            "calibrations": list(self.calibrations),
            "neighbours": self.neighbours,
            "delta": self.delta,
            "master_seed": self.master_seed,
            "noise_mode": SIMULATION,
            "spec": {k: v for k, v in self.spec.describe().items()
                     if k not in ("loss", "mechanism", "calibration", "margins", "seed")},
        }

    @property
    def runs(self) -> int:
        return len(self.tables) * len(self.mechanisms) * len(self.calibrations) * len(self.epsilons) * self.repetitions

    def point_spec(self, mechanism: str, calibration: str, epsilon: float, shape) -> ReleaseSpec:
        """The spec of one grid point: the grid's, at this mechanism, calibration and epsilon (delta kept only for
        the mechanisms that take one).

        Parameters
        ----------
        mechanism : str
            A mechanism's name, as the grid gives it ("auto" allowed).
        calibration : str
        epsilon : float
        shape : sequence of int
            The table's levels per variable (what "auto" and `delta_for` decide on).

        Returns
        -------
        ReleaseSpec
            The grid's spec with this mechanism, calibration and loss, and no margins (they are the table's).
        """
        delta = delta_for(mechanism, shape, self.delta)
        return replace(self.spec, mechanism=mechanism, calibration=calibration, margins=None,
                       loss=loss_of(epsilon, delta))


@dataclass(frozen=True, eq=False)
class SweepChunk:
    """One grid point: every repetition of one table and one spec (mechanism, calibration, epsilon)."""

    table: ContingencyTable
    margins: tuple[Margin, ...]
    spec: ReleaseSpec
    repetitions: int

    label: str = ""  # the grid's name of the mechanism ("auto" stays "auto": it names the chunk's results)

    mechanism = property(lambda self: self.label or self.spec.mechanism_name)
    calibration = property(lambda self: self.spec.calibration)
    epsilon = property(lambda self: self.spec.epsilon)
    neighbours = property(lambda self: self.spec.neighbours)
    delta = property(lambda self: self.spec.delta)
    master_seed = property(lambda self: self.spec.seed)

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
    spec: ReleaseSpec | None = None,
    margins: Sequence[Sequence[Margin]] | None = None,
    mechanisms: Sequence[str] | None = None,
    calibrations: Sequence[str] | None = None,
    master_seed: int | None = None,
) -> SweepGrid:
    """Check a grid.

    Parameters
    ----------
    tables : sequence of ContingencyTable
    epsilons : iterable of float
    repetitions : int
    spec : ReleaseSpec or None
        Every setting the grid does not vary; its `seed` is the master seed (its mode must be simulation). Default:
        `release`'s defaults in simulation mode, master seed 0. Its epsilon and margins are not used.
    margins : sequence of margin lists, or None
        Per table; default: each table's paper model (tables/*.json), else its default model.
    mechanisms, calibrations : sequence of str, or None
        What the grid varies; default: the spec's own (so a sweep runs what `release` publishes).
    master_seed : int or None
        The seed every run's seed derives from: the spec's `seed` (this overrides it; default 0).

    Returns
    -------
    SweepGrid

    Raises
    ------
    TabreleaseError
        A setting is out of range (spec not in simulation mode, no table or epsilon, duplicate names or epsilons,
        too many runs), or a table x mechanism x calibration cannot be planned.
    """
    if spec is None:
        spec = ReleaseSpec(loss=loss_of(1.0), mode=SIMULATION, seed=0)
    if not isinstance(spec, ReleaseSpec) or spec.mode != SIMULATION:
        raise TabreleaseError("a sweep's spec is a ReleaseSpec in simulation mode (sweeps never use the secure "
                              "sampler)")
    if master_seed is not None:
        if isinstance(master_seed, bool) or not isinstance(master_seed, (int, np.integer)) or master_seed < 0:
            raise TabreleaseError(f"the master seed must be a non-negative whole number, not {master_seed!r}")
        spec = replace(spec, seed=int(master_seed))
    elif spec.seed is None:
        spec = replace(spec, seed=0)
    if spec.margins is not None:
        raise TabreleaseError("a sweep's margins are given per table (margins=), not in its spec")
    mechanisms = (spec.mechanism,) if mechanisms is None else tuple(mechanisms)
    calibrations = (spec.calibration,) if calibrations is None else tuple(calibrations)
    tables = tuple(tables)
    if not tables:
        raise TabreleaseError("a sweep needs at least one table")
    names = [t.name for t in tables]
    if len(set(names)) != len(names):
        raise TabreleaseError(f"two tables in one sweep have the same name: {sorted(n for n in names if names.count(n) > 1)[0]!r}")
    for t in tables:
        if not getattr(t, "held_as_cells", True):
            # A sweep scores each release against the table's cells (the log-linear fits, G², the MLE distance).
            raise TabreleaseError(f"a sweep compares each release with the table's cells, and {t.name or 'a table'} "
                                  f"has {t.cells:.3g} cells, more than are held ({MAX_TABLE_CELLS:,}): sweep a "
                                  "table whose cells fit (fewer variables, or fewer levels)")
    epsilons = tuple(float(check_epsilon(e)) for e in epsilons)
    for epsilon in epsilons:  # a sweep's runs are releases: past the range their arithmetic fails mid-sweep
        check_releasable_loss(loss_of(epsilon))
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
    sizes = (len(tables), len(mechanisms), len(calibrations), len(epsilons), int(repetitions))
    runs = sizes[0] * sizes[1] * sizes[2] * sizes[3] * sizes[4]
    if runs > MAX_RUNS:
        raise TabreleaseError("the grid has {:,} runs ({} tables x {} mechanisms x {} calibrations x {} epsilons x {} "
                              "repetitions), more than {:,}, the most one sweep runs: split it"
                              .format(runs, *sizes, MAX_RUNS))
    if margins is None:
        margins = [default_model(t).generators for t in tables]
    margins = tuple(tuple(maximal_margins(m)[0]) for m in margins)
    if len(margins) != len(tables):
        raise TabreleaseError("give one margin set per table")
    grid = SweepGrid(tables, margins, epsilons, int(repetitions), mechanisms, calibrations, spec)
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
                plan_for(table, m, grid.point_spec(mech, cal, 1.0, table.shape))
    if grid.delta is not None and all(delta_for(mech, t.shape, grid.delta) is None for t in tables
                                      for mech in grid.mechanisms):
        raise TabreleaseError("--delta applies to the mechanisms that give (epsilon, delta)-DP; none of this "
                              f"sweep's mechanisms ({', '.join(grid.mechanisms)}) does")
    return grid


def grid_chunks(grid: SweepGrid) -> list[SweepChunk]:
    """The grid's points. Each carries its mechanism as an object, not a name, so a mechanism registered in this
    process only (not installed) runs in a worker process too.

    Parameters
    ----------
    grid : SweepGrid

    Returns
    -------
    list of SweepChunk
        One per table x mechanism x calibration x epsilon, in that order of nesting; each holds every repetition.
    """
    from ..mechanisms import get_mechanism, resolve_mechanism

    return [
        SweepChunk(table, m, replace(grid.point_spec(mech, cal, eps, table.shape),
                                     mechanism=get_mechanism(resolve_mechanism(mech, table.shape))),
                   grid.repetitions, label=mech)
        for table, m in zip(grid.tables, grid.margins)
        for mech in grid.mechanisms
        for cal in grid.calibrations
        for eps in grid.epsilons
    ]


def run_seed(master_seed: int, table: str, mechanism: str, calibration: str, epsilon: float, repetition: int) -> int:
    """The noise seed of one run: a hash of the master seed and the run's coordinates (63 bits).

    Parameters
    ----------
    master_seed : int
        The sweep's seed.
    table : str
        The table's name.
    mechanism : str
        The mechanism's name as the grid gives it.
    calibration : str
    epsilon : float
    repetition : int
        The run's number within its grid point.

    Returns
    -------
    int
        A non-negative seed below 2**63.
    """
    label = f"{int(master_seed)}|{table}|{mechanism}|{calibration}|{float(epsilon)!r}|{int(repetition)}"
    return int.from_bytes(hashlib.blake2b(label.encode(), digest_size=8).digest(), "big") >> 1



def delta_for(mechanism: str, shape, delta: float | None) -> float | None:
    """A sweep's delta goes to the mechanisms that take one (as `release` gives it: the planned mechanism turns
    Gaussian); the others run at pure epsilon, beside them at the same epsilon.

    Parameters
    ----------
    mechanism : str or Mechanism
        A mechanism's name ("auto" allowed) or object.
    shape : sequence of int
        The table's levels per variable.
    delta : float or None
        The sweep's delta.

    Returns
    -------
    float or None
        `delta` if the mechanism needs or accepts one, else None.

    Raises
    ------
    TabreleaseError
        The mechanism is not registered.
    """
    from ..mechanisms import get_mechanism, resolve_mechanism

    chosen = get_mechanism(resolve_mechanism(mechanism, shape))
    return delta if chosen.needs_delta or chosen.accepts_delta else None


def plan_for(table: ContingencyTable, margins, spec: ReleaseSpec):
    """The plan of a grid point's table and spec (each grid point builds it at epsilon 1 and rescales it).

    Parameters
    ----------
    table : ContingencyTable
        Its shape, variable names and names for people (`--sensitive` may use them) are read.
    margins : sequence of tuple of int
        The margins released, as axis tuples.
    spec : ReleaseSpec
        The grid point's spec (`SweepGrid.point_spec`).

    Returns
    -------
    MechanismPlan

    Raises
    ------
    TabreleaseError
        The spec cannot be planned for this table (see `tabrelease.planner.plan_release`).
    """
    from ..planner import plan_release
    from ..workflow import sensitive_by_variable

    # --sensitive by a variable's name for people too, as a release takes it (`workflow.sensitive_by_variable`).
    return plan_release(table.shape, margins, sensitive_by_variable(spec, table), table.variables)

