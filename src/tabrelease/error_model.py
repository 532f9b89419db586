"""The error of the fitted, rounded release, by simulation: what the plan's expected error (that of the unbiased linear
reconstruction) cannot say, because non-negative fitting and rounding remove more error the sparser the table is
against its noise.

The release is simulated on a reference table: the plan's own noise (simulation mode, seeded), its own estimator
and rounding, `runs` times; each margin's L1 error against the reference's margins gives a mean and an empirical upper
quantile. The reference is never confidential. After a release it is the released margins' world (`released_world`):
the released margins shrunk toward the fit of their sub-margins (least-squares releases), the table of greatest entropy
with those margins, moved toward that table where the plan put noise on every cell by the share of the cells'
departure that the noise does not explain, its margins corrected for the non-negative fit's bias (least-squares
releases), rounded at random to counts
(post-processing of the release; its seeds come from the released table, `audit_seed`, so the figures are
reproducible from it and the plan), each
run's world of a total the truth's may have had given the release's total, in as many batches of runs as a first batch
estimates make the mean error known to 3%, within caps (`released_table_errors`). Before one, it is a table the user
states. The figures are those of a table like the reference, which the validation in `benchmarks/bench_error_model.py`
measures (realised / simulated mean error, and the quantile's coverage).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field, replace
from math import ceil
from statistics import NormalDist

import numpy as np

from .errors import TabreleaseError
from .postprocessing import CONTROLLED, NEAREST
from .tables import margin_counts

# Runs of the audit's simulation, and its seed: a simulation before a release uses it as it is; an audit after one
# seeds its runs from it and the released margins (`audit_seed`), so the figures are a function of the release.
AUDIT_RUNS = 60
AUDIT_SEED = 20261123
# What an audit's reference says of its seeds (audits written before 2026-11-27 used AUDIT_SEED and say nothing).
SEEDED_FROM_THE_RELEASE = "; the runs seeded from the released margins"
# Cells past which a simulation is not run (each run is a fit over the cells).
MAX_SIMULATED_CELLS = 2**14
# A simulation's runs are fitted by the estimator's faster fit (`Estimator.for_simulation`) where, on the first run,
# every margin's L1 error it gives is within this fraction of the one the release's own fit gives: far below the
# figures' Monte Carlo error (of the order of a hundredth, from 60 runs). A count of 1e-4 per cell was too strict:
# with 244 people per cell, one solve differed from the refined fit by 1.9e-4 in a cell (5e-5 of a margin's L1 error
# on the audit's world), and the audit's simulation took ten times as long (`benchmarks/bench_scale.py`).
SIMULATION_FIT_TOLERANCE = 1e-3


@dataclass(frozen=True)
class SimulatedErrors:
    """Each margin's L1 error over simulated releases of a reference table."""

    reference: str  # what the reference table was, in words
    runs: int
    level: float  # of the quantile, e.g. 0.95
    mean_l1: dict = field(default_factory=dict)  # margin axes -> mean L1 error
    quantile_l1: dict = field(default_factory=dict)  # margin axes -> the `level` quantile (`upper_order_statistic`)
    mean_max_l1: float = 0.0  # mean over runs of the largest margin's L1 error
    order_statistic: int = 0  # k: the quantile is the k-th smallest of the runs' errors (`upper_order_statistic`)
    # Margin axes -> (runs whose error is below the quantile, runs whose error equals it): where errors are integers
    # (rounded releases) many runs tie at the quantile, and a check of its coverage counts a tie at random
    # (`benchmarks/bench_error_model_ties.py`). Not in `as_dict`: audit.json is unchanged.
    ties: dict = field(default_factory=dict)

    def as_dict(self, label=lambda g: str(g)) -> dict:
        """The figures as a JSON-ready mapping, margins named by `label`.

        Parameters
        ----------
        label : callable
            Maps a margin's axes to its name.

        Returns
        -------
        dict
            ``reference``, ``runs``, ``level``, ``mean_l1_by_margin``, ``quantile_l1_by_margin``,
            ``mean_max_l1`` and ``order_statistic``.
        """
        return {"reference": self.reference, "runs": self.runs, "level": self.level,
                "mean_l1_by_margin": {label(g): v for g, v in self.mean_l1.items()},
                "quantile_l1_by_margin": {label(g): v for g, v in self.quantile_l1.items()},
                "mean_max_l1": self.mean_max_l1, "order_statistic": self.order_statistic}


def simulate_errors(plan, reference: np.ndarray, *, runs: int = AUDIT_RUNS, level: float = 0.95,
                    seed: int = AUDIT_SEED, described: str = "a reference table",
                    rounded: bool = False) -> SimulatedErrors:
    """Release `reference` `runs` times by `plan` (simulated noise, the plan's estimator) and summarise each
    margin's L1 error against the reference's own margins.

    The plan's rounding is not run unless asked (`rounded`): a controlled rounding keeps every released cell
    within 1 of the fit and costs most of a release's time. Each unrounded run's margins are rounded instead as
    `_rounded_like` says (with a controlled rounding, each margin cell to its nearest integer); the validation
    benchmark compares these figures with realised errors of rounded releases. Unrounded runs are fitted by the
    estimator's faster fit
    (`Estimator.for_simulation`) where, on the first run, it gives every margin's L1 error within
    `SIMULATION_FIT_TOLERANCE` of itself by the plan's own fit.

    Parameters
    ----------
    plan : MechanismPlan
        The plan whose release is simulated (its scales, estimator and rounding).
    reference : numpy.ndarray
        Non-negative counts of the plan's shape (public: the released table, or a stated one).
    runs : int, default 60
        Simulated releases.
    level : float, default 0.95
        The quantile's level, in (0, 1).
    seed : int
        The simulation's seed (fixed: the figures are reproducible from the reference).
    described : str
        What the reference is, in words, for the record.
    rounded : bool, default False
        Whether each simulated release is rounded as the plan says.

    Returns
    -------
    SimulatedErrors

    Raises
    ------
    TabreleaseError
        The reference is not a non-negative table of the plan's shape, or too large to simulate, or runs < 2.
    """
    counts = _table_of_plan(plan, reference, "the reference")
    if counts.size > MAX_SIMULATED_CELLS:
        raise TabreleaseError(f"a simulation refits the {counts.size} cells per run; at most {MAX_SIMULATED_CELLS}")
    if runs < 2 or not 0 < level < 1:
        raise TabreleaseError("a simulation needs at least 2 runs and a level in (0, 1)")
    counts = np.rint(counts).astype(np.int64)
    errors, _ = _simulated_runs(plan, [counts] * runs, seed=seed, rounded=rounded)
    return _summary(plan, errors, level=level, described=described)


def _summary(plan, errors: np.ndarray, *, level: float, described: str) -> SimulatedErrors:
    """The figures of a (runs x margins) array of simulated L1 errors."""
    runs = len(errors)
    k = upper_order_statistic(runs, level) - 1
    ordered = np.sort(errors, axis=0)
    return SimulatedErrors(reference=described, runs=runs, level=level,
                           mean_l1={tuple(g): float(errors[:, i].mean()) for i, g in enumerate(plan.margins)},
                           quantile_l1={tuple(g): float(ordered[k, i]) for i, g in enumerate(plan.margins)},
                           mean_max_l1=float(errors.max(axis=1).mean()), order_statistic=k + 1,
                           ties={tuple(g): (int(np.sum(errors[:, i] < ordered[k, i])),
                                            int(np.sum(errors[:, i] == ordered[k, i])))
                                 for i, g in enumerate(plan.margins)})


def _simulated_runs(plan, worlds: list, *, seed: int | None = None, rounded: bool,
                    drawn: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Release each of `worlds` (integer tables of the plan's shape) once by `plan` with seeded simulation noise (or
    from `drawn`, each world's measurements drawn already): each run's L1 error of every margin against its own
    world's margins, and each run's released total.

    Returns
    -------
    errors : numpy.ndarray
        (runs x margins).
    totals : numpy.ndarray
        Each run's released total (of its table, or the mean of its margins' totals where it has no table).
    """
    from .noise import SimulationNoise
    from .pipeline import measure, release_from_measurements
    from .planner import with_post_processing

    runs = len(worlds)
    rounding = plan.rounding  # the release's: an unrounded run's margins are rounded as `_rounded_like` says
    # Where the total is measured exactly (public, or n under replace), "nearest" rounding keeps each world's.
    exact_total = rounding == NEAREST and conditions_on_total(plan) and total_noise_sd(plan) == 0
    if not rounded:
        plan = with_post_processing(plan, rounding="none")
    # One world's margins once, however many runs release it (`simulate_errors` passes one table `runs` times).
    margins_of = {id(world): [margin_counts(world, g).astype(float) for g in plan.margins] for world in worlds}
    truths = [margins_of[id(world)] for world in worlds]
    # Every run's noise first, in the order the runs draw it one after another; then the fits: the first here, the
    # rest in threads where the estimator allows (Clarabel's solve runs without the GIL), each thread taking a
    # contiguous share of the runs in order, so the figures are the same on any number of CPUs.
    if drawn is None:
        if seed is None:  # an unseeded source would draw from the operating system: the figures would not replay
            raise TabreleaseError("a simulation draws its noise from a seed, or is given its measurements")
        noise = SimulationNoise(seed=seed)
        drawn = [measure(plan, world, noise) for world in worlds]
    stop = threading.Event()  # set when the caller is interrupted: each thread stops at its next run

    def errors_of(released, i, as_released: bool = True) -> tuple[list, float]:
        total = (float(np.asarray(released.table).sum()) if released.table is not None
                 else float(np.mean([np.asarray(m, float).sum() for m in released.released_margins])))
        margins = released.released_margins
        if not rounded and as_released:
            margins = _rounded_like(released, plan.margins, rounding,
                                    int(worlds[i].sum()) if exact_total else None)
        return [np.abs(np.asarray(m, float) - t).sum() for m, t in zip(margins, truths[i])], total

    def errors_by(by, i) -> tuple[list, float]:
        return errors_of(release_from_measurements(by, drawn[i]), i)

    def errors_in(indices) -> list:
        rows = []
        for i in indices:
            if stop.is_set():
                break
            rows.append(errors_by(fitting, i))
        return rows

    # The first run fitted here, on the world with the most people: it builds what the fits share, and the faster
    # fit is checked on it (its accuracy falls as counts grow; a check on one run is a screen, not a bound: at 30,000
    # per cell of Rochdale the checked run passed while others were off by up to 2e-2 of their error, review of
    # stop 39, their mean by 4e-4, far below the figures' Monte Carlo error).
    first = int(np.argmax([int(world.sum()) for world in worlds]))
    order = [first] + [i for i in range(runs) if i != first]
    first_released = release_from_measurements(plan, drawn[first])
    rows = {first: errors_of(first_released, first)}
    fitting = plan
    faster_estimator = plan.estimator.for_simulation()
    if not rounded and faster_estimator is not plan.estimator:
        # The estimator can fit faster to a fraction of a count (the least-squares fit without its refinement to
        # integer exactness: two thirds of the audit's time). The first run is fitted both ways, and the faster fit
        # is used where it agrees: compared before rounding, as a margin cell whose fit sits at a half rounds apart
        # on a difference far below the tolerance.
        faster = replace(plan, estimator=faster_estimator)
        fits = (errors_of(release_from_measurements(faster, drawn[first]), first, as_released=False)[0],
                errors_of(first_released, first, as_released=False)[0])
        if all(abs(a - b) <= SIMULATION_FIT_TOLERANCE * b for a, b in zip(*fits)):
            fitting = faster
    rest = np.array(order[1:], dtype=int)
    shares = np.array_split(rest, simulation_threads(plan, runs))
    if len(shares) == 1:
        found = errors_in(shares[0])
    else:
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(len(shares))
        try:
            found = [row for part in pool.map(errors_in, shares) for row in part]
        except BaseException:  # an interrupt, or a fit that failed: the other threads stop at their next run
            stop.set()
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    rows.update(zip(rest.tolist(), found))
    return (np.array([rows[i][0] for i in range(runs)], float).reshape(runs, len(plan.margins)),
            np.array([rows[i][1] for i in range(runs)], float))


# Appended to the audit's reference: how its runs, which are not rounded, stand in for the release's rounding.
ROUNDED_LIKE = {CONTROLLED: "; each run's margin cells rounded to their nearest integers, where the release's "
                            "controlled rounding puts most of them (it is not run: it is most of a release's time)",
                NEAREST: "; each run's table rounded cell by cell to the nearest integer, as the release is"}


def _rounded_like(released, margins, rounding: str, exact_total: int | None = None) -> list:
    """An unrounded run's released margins rounded as the release's `rounding` would leave them, without its cost:
    where it rounds each cell to the nearest integer ("nearest"), the run's table so, and its margins summed from
    it, as the release does; where it rounds under control ("controlled": each cell next to its fit, the margins
    as close as can be to the fit's, the total kept), each margin cell to its nearest integer, which is where the
    controlled rounding puts most of them; none where it does not round. Where the total is exact (`exact_total`:
    public, or n under replace neighbours), "nearest" gives the nearest integers with that total, as the release's
    rounding does (`rounding.round_to_total`).

    Why: the truth is integer, and where the noise is below a count a rounded margin cell is often exactly right,
    which an unrounded run's error does not show. Over 42 points (`benchmarks/bench_error_model_rounding.py`: the
    frontier's and the held-out tables at epsilon 0.5 and 2, 100 releases each) the unrounded mean L1 error was up to
    15.6% above the rounded release's (HairEyeColor's full table, measured cell by cell, at epsilon 2; 14.4% for
    UCBAdmissions'), and the margins rounded to their nearest integers within 2% of it everywhere (0.980-1.006). At
    small epsilon the errors are many counts, and rounding moves them by a fraction of one.
    """
    from .rounding import round_nearest, round_table

    if rounding == NEAREST and released.table is not None:
        table = round_nearest(np.asarray(released.table, float), exact_total)
        return [margin_counts(table, g) for g in margins]
    if rounding == NEAREST:
        return [round_nearest(np.asarray(m, float), exact_total) for m in released.released_margins]
    if rounding == CONTROLLED:
        return [round_table(m) for m in released.released_margins]
    return list(released.released_margins)


# Threads for a simulation's fits: at most this many (the audit's 60 fits are short; more threads cost more to start).
MAX_SIMULATION_THREADS = 4


def simulation_threads(plan, runs: int) -> int:
    """How many threads fit a simulation's runs: several only where the plan's estimator is thread-safe, there is
    no rounding to run (the controlled rounding's MILP solver is not shared across threads) and the process is not a
    worker of a process pool, and at most one per CPU and per two runs.

    Parameters
    ----------
    plan : MechanismPlan
        The simulated plan, its estimator resolved.
    runs : int
        Simulated releases.

    Returns
    -------
    int
        At least 1.
    """
    import sys

    from ._cpus import available_cpus
    from .postprocessing import NO_ROUNDING

    if not getattr(plan.estimator, "thread_safe", False) or plan.rounding != NO_ROUNDING:
        return 1
    processes = sys.modules.get("multiprocessing")  # a pool's worker has it imported; nothing else needs it here
    if processes is not None and processes.parent_process() is not None:  # the pool has the CPUs already
        return 1
    return max(1, min(MAX_SIMULATION_THREADS, available_cpus(), runs // 2))


def upper_order_statistic(runs: int, level: float) -> int:
    """Which order statistic of `runs` simulated errors is stated as their `level` quantile: the k-th smallest, k the
    least with k / (runs + 1) >= level (capped at `runs`).

    A further draw from the same distribution falls at or below the k-th smallest of `runs` draws with probability
    k / (runs + 1) (the draws are exchangeable), so the stated quantile covers at least `level` of the errors it
    describes. The k-th smallest for k = ceil(level * runs) covers less: 57 / 61 = 93.4% for 60 runs at 95%.

    Parameters
    ----------
    runs : int
        Simulated errors, at least 1.
    level : float
        The quantile's level, in (0, 1).

    Returns
    -------
    int
        k, from 1 to `runs`.
    """
    return min(runs, max(1, ceil(level * (runs + 1) - 1e-9)))


def _table_of_plan(plan, table, what: str) -> np.ndarray:
    """`table` as an array, refused with one TabreleaseError naming `what` unless it is a finite non-negative table
    of the plan's shape."""
    counts = np.asarray(table)
    if counts.shape != tuple(plan.shape) or not np.all(np.isfinite(counts)) or counts.min(initial=0) < 0:
        raise TabreleaseError(f"{what} of a simulation is a non-negative table of the plan's shape")
    return counts


WORLD_IPF_CYCLES = 300
RELEASED_WORLD = "the released margins' world (the maximum-entropy table with the released margins, rounded at random)"
# Where the release's total is not the least-squares fit's pinned total of linear noisy blocks (the paper's LP, the
# copula's and RAP's syntheses, randomized response), a run cannot learn its noise in the total from a replay of its
# noise, and the world's total is reflected instead: about the released totals of TOTAL_RUNS releases of the world,
# which the runs share (`_reflected_batch`). Audits of least-squares releases written before 75c92d6 did so too.
TOTAL_RUNS = 20
TOTALS_REFLECTED = ("; the world's total varied run by run as the release's own total varies about the truth (twice "
                    "the world's total less that of a simulated release of the world, at least 0)")
# Run i of a batch with seed s draws its noise from SimulationNoise(s * RUN_SEED_STRIDE + i) (twice: once to learn its
# noise in the total, once for its world; `_conditioned_batch`).
RUN_SEED_STRIDE = 2**20
TOTAL_CONDITIONED = ("; each run's world of the total the truth's may have had, given the release's total: the "
                     "released total less the run's own noise in its total, at least 0, so that each run whose world "
                     "is not clamped at 0 releases about the released total")
# In its place where the total is public (released exactly, no noise in it): every run's world has that total.
TOTAL_PUBLIC = "; each run's world of the public total, which the release gives exactly"

# Appended where the release barely tells its total: the interval for the total at the audit's level (the released
# total give or take z standard deviations of the noise in the total the least-squares fit pins, z the normal
# quantile; that noise is a sum of many draws) reaches 0. Each run's world then has a total that is little more than
# a draw of that noise, and the stated error is that of the totals the release allows, which can be far from the
# error at the truth's total. On Edwards (70 records) at epsilon 0.05, realised / stated mean L1 was 0.807 and 0.764
# over 50 releases (its model; every two-way margin), and with the audit's world at the truth's total 1.057 and
# 1.079 (`reports/benchmarks/error_model_misses.txt`; at Edwards' flagged points there the audit stated more than it
# would at the truth's total, at two of Rochdale's a little less, within a standard error). The flag says the
# figures are a rough guide, not which way they err, nor that the total decides a point's miss: it fires on most of
# Rochdale's two-way releases at epsilon 0.05 too, whose miss the released margins decide. The test is of each
# release: one whose total came out high is not flagged, though its figures rest on that total too.
TOTAL_UNCERTAIN = ("; the release barely tells its total: the released total {total} is within {z} standard "
                   "deviations of 0 (the noise in it has standard deviation {sd}), so its {level}% interval reaches 0")


def released_world(plan, table, *, seed: int | None = None) -> tuple[np.ndarray, str]:
    """The table the audit simulates a release on: the released table shrunk toward the fit of its margins'
    sub-margins by the share of its margins' departure from that fit that noise alone does not make, where the
    release is a least-squares fit (`shrunk_toward_lower_order`), then the table of greatest entropy whose margins
    over the plan's margins are that table's (iterative proportional fitting from a uniform table), moved toward it
    where the plan put noise on every cell and its cells depart from it by more than that noise
    (`_toward_the_release`), its margins then corrected so that its own releases' mean margins come near the
    released ones, where the release is a least-squares fit (`corrected_for_the_fits_bias`), each cell then rounded
    down or up at random with the probability of its fraction
    (seeded), so that it is a table of counts whose cells have that table as their expectation.

    Why not the released table itself: where the noise is large, what the released table holds beyond its margins is
    mostly the fit's allocation of noise, which a non-negative fit spreads over every margin cell alike; the error of
    a non-negative fit depends on how dense or empty each margin cell is (clipping at zero biases an empty one up and
    a dense one down). That is the reason this world was tried; the validation benchmark
    (`benchmarks/bench_error_model.py`, and for Rochdale with every two-way margin, where the audit understated the
    error most, `benchmarks/bench_error_model_rochdale.py`) measures both worlds against the realised error. The
    world is the smoothest table with those (shrunk) margins: it describes a table like that, not the truth.

    Parameters
    ----------
    plan : MechanismPlan
        The release's plan (its margins).
    table : numpy.ndarray
        The released table, non-negative counts of the plan's shape.
    seed : int, optional
        Seed of the rounding, [seed, 1]; by default the audit's (`audit_seed`), which rounds its first batch's world
        so.

    Returns
    -------
    world : numpy.ndarray
        Non-negative integer counts of the plan's shape.
    described : str
        What the world is, in words (RELEASED_WORLD, and how far its margins were from the released ones where IPF
        stopped before it converged).

    Raises
    ------
    TabreleaseError
        The table is not a non-negative table of the plan's shape.
    """
    fitted, described = _unrounded_world(plan, table)
    seed = audit_seed(plan, table) if seed is None else seed
    return _rounded_at_random(fitted, np.random.default_rng([seed, 1])), described


def _unrounded_world(plan, table) -> tuple[np.ndarray, str]:
    """The world before its rounding, and what it is in words: the released table shrunk toward the fit of its
    margins' sub-margins where `shrunk_toward_lower_order` shrinks it, then the maximum-entropy table with that
    table's margins (`_maximum_entropy_world`), moved toward that table where `_toward_the_release` moves it, then
    corrected toward that table's margins for the fit's bias where `corrected_for_the_fits_bias` corrects it (with
    the audit's seed of the released table as released)."""
    counts = _table_of_plan(plan, table, "the released table")
    shrunk, keep = shrunk_toward_lower_order(plan, counts)
    fitted, described = _maximum_entropy_world(plan, shrunk)
    fitted, share = _toward_the_release(plan, fitted, shrunk)
    fitted, rounds = corrected_for_the_fits_bias(plan, fitted, shrunk, seed=audit_seed(plan, counts))
    if keep is not None:
        described += SHRUNK_TOWARD_LOWER_ORDER + f"{keep:.3g}"
    if share is not None:
        described += TOWARD_THE_RELEASE + f"{share:.3g}"
    if rounds is not None:
        described += CORRECTED_FOR_THE_FITS_BIAS.format(rounds=rounds, releases=BIAS_RELEASES)
    return fitted, described


# Releases of the lower-order fit whose margins' departure from their own lower-order fit is the part of the released
# margins' departure that noise alone makes (`shrunk_toward_lower_order`).
SHRINK_RELEASES = 8
# Appended to the world's description where the released margins were shrunk (`shrunk_toward_lower_order`), with the
# share of their departure kept (three significant figures).
# The released margins and table the rest of the description names are then the shrunk ones.
SHRUNK_TOWARD_LOWER_ORDER = ("; the released table first shrunk toward the fit of its margins' sub-margins (the "
                             "released margins and table this names are the shrunk ones), keeping the share of its "
                             "margins' departure from that fit that releases of the fit do not make by noise alone: ")


def lower_order_fit(plan, counts: np.ndarray) -> np.ndarray:
    """The table of greatest entropy (IPF from a uniform table) with `counts`' margins over the maximal sets one
    variable smaller than a plan's margin (each margin's sub-margins); where every margin is one variable, the uniform
    table of `counts`' total.

    Parameters
    ----------
    plan : MechanismPlan
        The plan (its margins).
    counts : numpy.ndarray
        A non-negative table of the plan's shape.

    Returns
    -------
    numpy.ndarray
        Non-negative, of `counts`' total and shape (not rounded).
    """
    import itertools

    from .loglinear.ipf import ipf_to_margins
    from .models import maximal_margins

    counts = np.asarray(counts, float)
    below = (s for g in plan.margins for s in itertools.combinations(sorted(g), len(g) - 1) if s)
    generators = list(maximal_margins(below)[0])
    if not generators:
        return np.full(counts.shape, counts.sum() / counts.size)
    fitted, _, _ = ipf_to_margins([margin_counts(counts, g) for g in generators], generators, counts.shape, tol=1e-3,
                                  max_iter=WORLD_IPF_CYCLES)
    return fitted


def _departure(plan, counts: np.ndarray) -> tuple[float, np.ndarray]:
    """The squared departure of `counts`' margins (the plan's) from those of their lower-order fit, and that fit."""
    lower = lower_order_fit(plan, counts)
    return sum(float(((margin_counts(counts, g) - margin_counts(lower, g)) ** 2).sum()) for g in plan.margins), lower


def shrunk_toward_lower_order(plan, counts: np.ndarray) -> tuple[np.ndarray, float | None]:
    """The released table shrunk toward the fit of its margins' sub-margins, q + keep (released - q), q the lower-order
    fit (`lower_order_fit`), keep the positive-part James-Stein share max(0, 1 - D0 / D): D the squared departure of
    the released margins (the plan's) from q's, D0 its mean over `SHRINK_RELEASES` releases of q itself (rounded at
    random, released by the plan without rounding; each release's departure from its own lower-order fit): the
    departure that the noise alone makes (fitted without refinement, as the audit's runs are). Seeded from the release
    (`audit_seed`): [seed, 5] for the roundings, run k
    the noise of SimulationNoise(seed * RUN_SEED_STRIDE + RUN_SEED_STRIDE - 1 - k), which no batch's run draws.

    Why: the world is built on the released margins, noise and all. Where the noise is large against the table, the
    released margins' departures from their lower-order structure are mostly noise, and a world that keeps them is
    sparser or smoother than the truth where the truth is not, and a non-negative fit's error depends on that. In
    the validation (`benchmarks/bench_error_model.py`, against its run before the shrink) realised / stated went from
    1.119 to 1.088 on Rochdale's two-way margins at epsilon 0.1 and from 1.049 to 0.997 on journey to work at epsilon
    0.05 (the 95% quantile's coverage from 84.0% to 89.3%); it raised the stated mean at 45 of the 66 points (at
    none by the validation's figures did it fall), so where the audit overstated it overstates a little more
    (Edwards' two-way margins at epsilon 0.5, 0.977 to 0.937, partly a change in the realised mean's releases;
    `benchmarks/bench_error_model_shrink.py` compares the two release by release). The released margins are
    non-negative fits, whose departure the noise-only releases measure as fitted (not the unbiased noise's), so keep
    is that of like against like. Only where the audit conditions on the total (`conditions_on_total`: least squares,
    a fit cheap to repeat); other estimators' worlds are not shrunk.

    Parameters
    ----------
    plan : MechanismPlan
        The release's plan.
    counts : numpy.ndarray
        The released table, non-negative counts of the plan's shape.

    Returns
    -------
    table : numpy.ndarray
        Non-negative (a mix of two non-negative tables of one total), of the released table's total.
    keep : float or None
        The share kept, to three significant figures; None where the world is not shrunk.
    """
    from .noise import SimulationNoise
    from .pipeline import measure
    from .planner import with_post_processing

    counts = np.asarray(counts, float)
    if not conditions_on_total(plan):
        return counts, None
    observed, lower = _departure(plan, counts)
    if observed <= 0:  # the released margins are their lower-order fit's: nothing to shrink
        return lower, 0.0
    seed = audit_seed(plan, counts)
    # Fitted as the audit's runs are, without the refinement to integer exactness (`Estimator.for_simulation`): the
    # departures are of noise, far above the fraction of a count the refinement adds, and the refined fits took
    # longer than the audit's first batch (2.7 s against 1.9 s on all 2-way margins of 2^10 cells, a scratch
    # profile of stop 48).
    bare = with_post_processing(plan, rounding="none")
    bare = replace(bare, estimator=bare.estimator.for_simulation())
    rng = np.random.default_rng([seed, 5])
    drawn = [measure(bare, _rounded_at_random(lower, rng),
                     SimulationNoise(seed=seed * RUN_SEED_STRIDE + RUN_SEED_STRIDE - 1 - k))
             for k in range(SHRINK_RELEASES)]
    noise_only = [_departure(bare, table)[0] for table in _released_tables(bare, drawn)]
    keep = float(f"{max(0.0, 1.0 - float(np.mean(noise_only)) / observed):.3g}")
    return lower + keep * (counts - lower), keep


def _maximum_entropy_world(plan, table) -> tuple[np.ndarray, str]:
    """The maximum-entropy table with `table`'s margins over the plan's margins (not rounded), and what it is in
    words. `table` is the released table, shrunk where `shrunk_toward_lower_order` shrinks it."""
    from .loglinear.ipf import ipf_to_margins

    counts = _table_of_plan(plan, table, "the released table").astype(float)
    generators = [tuple(sorted(g)) for g in plan.margins]
    targets = [margin_counts(counts, g) for g in generators]
    # To a hundredth of a count, or WORLD_IPF_CYCLES cycles: where the maximum has empty cells (a sparse table), IPF
    # approaches it slowly (journey to work's), and the world is rounded at random anyway; where it stops first, the
    # description says how far from the released margins.
    fitted, _, converged = ipf_to_margins(targets, generators, counts.shape, tol=1e-2, max_iter=WORLD_IPF_CYCLES)
    described = RELEASED_WORLD
    if not converged:
        gap = max(float(np.abs(margin_counts(fitted, g) - t).max()) for g, t in zip(generators, targets))
        described += (f"; its fit stopped after {WORLD_IPF_CYCLES} cycles, its margins within {gap:.3g} of the "
                      "released ones")
    return fitted, described


# Appended to the world's description where it was moved toward the released table (`_toward_the_release`), with
# the share (three significant figures; the world is moved by the share as stated).
TOWARD_THE_RELEASE = ("; before its rounding, moved toward the released table by the share of the released cells' "
                      "departure from it which the noise on every cell does not explain: ")


def _toward_the_release(plan, world: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, float | None]:
    """The world moved toward the released table by the share of the released cells' departure from it that the
    noise does not explain, where the plan put noise on every cell: world + s (table - world), s the positive-part
    James-Stein share max(0, 1 - r v / sum of (released cell - world)^2) to three significant figures, v the noise's
    variance per cell, r the cells less the free parameters of the log-linear model of the plan's margins (the
    dimension the departure lies in: the two tables have the same margins; James-Stein's own rule has r - 2, and r
    leans toward the smooth world).

    Why: the maximum-entropy world keeps only the released margins and is smoother than a sparse truth, and a
    non-negative fit's error depends on how sparse the table is: on journey to work (182 of 256 cells empty), at
    epsilon 1 and 2, realised / stated mean error was 0.920 and 0.892 with the world unmoved (stop 41's validation).
    Where the noise is small against the table, the released table is close to the truth and s is near 1; where it
    is large, the departure is mostly noise and s is 0 (the world unchanged). The released cells are a non-negative
    fit with its total pinned, which removes part of the noise, so r v overstates the noise left in them: s leans
    toward the smooth world. Plans without noise on every cell keep the world: their released cells beyond the
    released margins are the fit's allocation, not measured.

    Parameters
    ----------
    plan : MechanismPlan
        The release's plan (its design: blocks, distribution and scales).
    world : numpy.ndarray
        The maximum-entropy world (`_maximum_entropy_world`), before rounding.
    table : numpy.ndarray
        The released table (shrunk where `shrunk_toward_lower_order` shrinks it: its departure from the world is
        then about keep times the released table's, and the share here falls with it, while r v does not: the two
        shares compound, which is how the validation measured the audit), whose margins over the plan's margins are
        the world's.

    Returns
    -------
    world : numpy.ndarray
        Non-negative (a mix of two non-negative tables of one total).
    share : float or None
        s, or None where the plan put no noise on every cell, or its margins include every variable.
    """
    from .measurements import MARGIN_CELLS, variance_per_value
    from .models import free_parameters

    design = getattr(plan, "design", None)
    shape = tuple(world.shape)
    every_cell = (MARGIN_CELLS, tuple(range(len(shape))))
    if design is None or tuple(design.shape) != shape or every_cell not in {(b.query, b.variables)
                                                                           for b in design.blocks}:
        return world, None
    scale = design.scales(plan.calibration.scale)[every_cell]
    variance = variance_per_value(design.distribution, scale)
    residual = world.size - free_parameters(plan.margins, shape)
    if residual <= 0:  # the margins include every variable: the world is the (shrunk) released table already
        return world, None
    departure = np.asarray(table, float) - world
    spread = float((departure**2).sum())
    share = float(f"{max(0.0, 1.0 - residual * variance / spread):.3g}") if spread > 0 else 0.0
    return world + share * departure, share


# Rounds of the world's correction for the non-negative fit's bias, and releases of the world in each
# (`corrected_for_the_fits_bias`).
BIAS_ROUNDS = 3
BIAS_RELEASES = 8
# Seeds at the top of each seed block that the audit's batches never draw: the shrink's, then the correction's.
RESERVED_SEEDS = SHRINK_RELEASES + BIAS_ROUNDS * BIAS_RELEASES
# Appended to the world's description where it was corrected (`corrected_for_the_fits_bias`).
CORRECTED_FOR_THE_FITS_BIAS = ("; then its margins corrected for the non-negative fit's bias, in {rounds} rounds: each "
                               "moved by the released margins less the mean margins of {releases} releases of it")


def corrected_for_the_fits_bias(plan, world: np.ndarray, released: np.ndarray, *,
                                seed: int) -> tuple[np.ndarray, int | None]:
    """The world with its margins corrected so that its own releases' mean margins come near the released ones
    (least-squares releases, `conditions_on_total`): `BIAS_ROUNDS` rounds, each drawing `BIAS_RELEASES` releases of
    the world (rounded at random, released by the plan without rounding, fitted as the audit's runs are), then moving
    each plan margin of the world by the released margin less those releases' mean margin (cells below zero set to 0,
    the margin scaled back to the world's total), and fitting the world to the moved margins by IPF from itself,
    scaled back to its total. A round stops the correction where a margin would be moved to nothing (every cell set
    to 0), or the fit would be empty: the rounds done are stated.
    Seeded from the release (`seed`, the audit's, `audit_seed`): [seed, 6] for the roundings, round r's release k
    the noise of SimulationNoise(seed * RUN_SEED_STRIDE + RUN_SEED_STRIDE - 1 - SHRINK_RELEASES - r * BIAS_RELEASES
    - k), which no batch's run draws.

    Why: a non-negative fit with its total pinned is biased: an empty or small cell comes out high, a dense one low, by
    amounts that grow with the noise. The released margins carry that bias, and a world built on them is flatter
    than the truth; its releases are flatter still, and their errors, which depend on how sparse or dense each margin
    cell is, differ from the truth's. A world whose releases' mean margins are the released ones is the truth that
    would, on average, have given them (the idea of indirect inference, and of the bootstrap's bias correction). In
    the validation (`benchmarks/bench_error_model.py`, against its run before the correction) realised / stated went
    from 1.119 to 1.006 on Rochdale's two-way margins at epsilon 0.05 and from 1.088 to 0.987 at epsilon 0.1, and the
    widest margin of journey to work at epsilon 0.05 from 1.271 to 1.187; it overstates more on Rochdale's two-way
    margins at epsilon 0.25 to 1 (1.019 to 0.906 at 0.25) and Edwards' at 0.1 (0.901 to 0.887); within 0.9-1.1 at 64
    of the 66 points, as before, both outside now overstating (`benchmarks/bench_error_model_bias.py` compares the
    two release by release).

    Parameters
    ----------
    plan : MechanismPlan
        The release's plan.
    world : numpy.ndarray
        The world before rounding (`_toward_the_release`).
    released : numpy.ndarray
        The released table (shrunk where `shrunk_toward_lower_order` shrinks it), of the world's total.
    seed : int
        The audit's seed (`audit_seed` of the released table, as released).

    Returns
    -------
    world : numpy.ndarray
        Non-negative, of the world's total.
    rounds : int or None
        The rounds done (BIAS_ROUNDS unless a round stopped the correction); None where the world is not corrected.
    """
    from .loglinear.ipf import ipf_to_margins
    from .noise import SimulationNoise
    from .pipeline import measure
    from .planner import with_post_processing

    world = np.asarray(world, float)
    total = float(world.sum())
    if not conditions_on_total(plan) or total <= 0:
        return world, None
    bare = with_post_processing(plan, rounding="none")
    bare = replace(bare, estimator=bare.estimator.for_simulation())
    generators = [tuple(sorted(g)) for g in plan.margins]
    rng = np.random.default_rng([seed, 6])
    top = seed * RUN_SEED_STRIDE + RUN_SEED_STRIDE - 1 - SHRINK_RELEASES
    done = 0
    for r in range(BIAS_ROUNDS):
        drawn = [measure(bare, _rounded_at_random(world, rng), SimulationNoise(seed=top - r * BIAS_RELEASES - k))
                 for k in range(BIAS_RELEASES)]
        mean = np.zeros_like(world)
        for table in _released_tables(bare, drawn):
            mean += table / BIAS_RELEASES
        # Each margin moved, then its cells below zero set to 0 and scaled back to the total. Before that the moved
        # margins are those of one table (world + released - mean), so they agree where they share variables; a
        # scratch variant that clipped that table's cells instead (margins of one table after the clip too) clipped
        # far more of a sparse table's cells and moved less: realised / stated 1.085 against 1.026 on Rochdale's
        # two-way margins at epsilon 0.05 (20 releases, stop 49).
        targets = []
        for g in generators:
            moved = np.clip(margin_counts(world, g) + margin_counts(released, g) - margin_counts(mean, g), 0, None)
            targets.append(moved * (total / moved.sum()) if moved.sum() > 0 else moved)
        # From the world itself (a thousandth of a count added, so that a cell it emptied can refill): what it holds
        # beyond its margins (its move toward the release) stays. Once cells are set to 0 the moved margins need
        # not agree where they share variables, and IPF, which cannot refill a cell one margin empties, may end
        # short of the total (a review of stop 49 found Edwards' audit worlds emptied by it): scaled back to it.
        fitted, _, _ = ipf_to_margins(targets, generators, world.shape, start=world + 1e-3, tol=1e-2,
                                      max_iter=WORLD_IPF_CYCLES)
        if fitted.sum() <= 0:  # a margin moved to nothing (every cell set to 0) empties the fit
            break
        world, done = fitted * (total / fitted.sum()), r + 1
    return world, (done or None)


def _released_tables(plan, drawn: list) -> list:
    """Each of `drawn` (measurements) released by `plan` (no rounding), its table as floats: the first fitted here
    (it builds what the fits share), the rest in threads where `simulation_threads` allows, as the audit's runs are;
    each fit is its own, so the tables are the same on any number of CPUs."""
    from .pipeline import release_from_measurements

    def table_of(measurements) -> np.ndarray:
        return np.asarray(release_from_measurements(plan, measurements).table, float)

    if not drawn:
        return []
    tables = [table_of(drawn[0])]
    threads = simulation_threads(plan, len(drawn) - 1)
    if threads <= 1:
        return tables + [table_of(m) for m in drawn[1:]]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        return tables + list(pool.map(table_of, drawn[1:]))


def _rounded_at_random(fitted: np.ndarray, rng) -> np.ndarray:
    """Each cell rounded down or up at random with the probability of its fraction: counts whose expectation is
    `fitted`."""
    below = np.floor(fitted)
    return (below + (rng.random(fitted.shape) < fitted - below)).astype(np.int64)


def released_table_errors(release, *, level: float = 0.95, runs: int = AUDIT_RUNS):
    """The release's error simulated on its released margins' world (`released_world`), each run's world of the
    total the truth's may have had given the release's own total: post-processing, nothing confidential is read, and
    the seeds come from the released table (`audit_seed`), so the figures are a function of the release.

    A release's error depends most on its total where the noise is large against the table (a non-negative fit's
    error grows with the counts it fits), and the released total T is a noisy one: the truth's total n is T less the
    release's noise in its total, which is not known, but whose distribution is. Where the estimator is least
    squares (its total pinned to the best linear unbiased estimate from linear noisy blocks, or to a public total;
    `conditions_on_total`), each run draws its noise first, takes its own noise in the total (e: that estimate less
    its world's total; 0 where the total is public) and releases, with the same noise, the world (before rounding:
    the maximum-entropy table of the released table shrunk toward its lower-order fit, `shrunk_toward_lower_order`,
    moved toward that table where `_toward_the_release` does, its margins corrected for the fit's bias,
    `corrected_for_the_fits_bias`) scaled to max(0, T - e), rounded at random: every run whose T - e is not clamped
    at 0 releases about T, from a world of a total n might have had (`_conditioned_batch`). The figures are then
    those of a release of total T, which is known, not of releases of any total; the runs are independent draws.
    Other estimators' totals are no such estimate (the LP's, the syntheses'), or their noise is not the same on another
    world (RAP's noisy choices, randomized response), so there the world's total is reflected (`_reflected_batch`):
    `TOTAL_RUNS` releases of the world give released totals T*, and the runs release the world (before rounding) scaled
    to max(0, 2 T - T*), the T* in turn, each run's own total varying again about its world's; the runs share the T*.
    The reference string says which was done.

    That is one batch. A first batch (the pilot) estimates how many batches make the runs' mean error known to
    `MEAN_RELATIVE_SE` of itself, within caps (`audit_batches`): on a small table at small epsilon one batch's mean
    is not that precise (`benchmarks/bench_error_model_seeds.py` measures the spread of the stated mean over audit
    seeds). Where that is one, the pilot's figures are stated; else those of that many further batches, each with
    its own seeds (its own noise and rounding), the pilot left out (a count chosen from the pilot would lean the mean
    the pilot's way). The decision reads only the runs, so the figures stay a function of the release. The
    validation benchmark (`benchmarks/bench_error_model.py`) measures them against realised errors.

    Parameters
    ----------
    release : Release
        A release with its plan and, for a simulation, its released table.
    level : float, default 0.95
        The quantile's level.
    runs : int, default 60
        Simulated releases per batch.

    Returns
    -------
    simulated : SimulatedErrors or None
    note : str or None
        Why there is no simulation, when there is none.
    """
    if release.plan is None or release.table is None:
        return None, "no simulated error: the release has no table of cells to simulate on (its margins only)"
    if np.asarray(release.table).size > MAX_SIMULATED_CELLS:
        return None, f"no simulated error: the table has more than {MAX_SIMULATED_CELLS} cells"
    if runs < 2 or not 0 < level < 1:
        return None, "no simulated error: a simulation needs at least 2 runs and a level in (0, 1)"
    if runs > RUN_SEED_STRIDE - RESERVED_SEEDS:  # the shrink's and the correction's seeds are the top of each block
        return None, f"no simulated error: a batch has at most {RUN_SEED_STRIDE - RESERVED_SEEDS} runs"
    work = _work_per_run(release.plan, release.table)
    conditioned = conditions_on_total(release.plan)
    fits = runs if conditioned else runs + TOTAL_RUNS  # a reflected batch fits its TOTAL_RUNS totals' releases too
    # A conditioned audit's world fits its RESERVED_SEEDS releases (the shrink's, the correction's) once, before the
    # first batch.
    if work * (fits + (RESERVED_SEEDS if conditioned else 0)) > MAX_SIMULATED_WORK:
        return None, _too_much_work(release.plan, work, fits + (RESERVED_SEEDS if conditioned else 0))
    try:
        fitted, described = _unrounded_world(release.plan, np.asarray(release.table))
        # The first batch (the pilot) says how many batches make the mean known to MEAN_RELATIVE_SE
        # (`audit_batches`). Where that is more than one, the figures are those of that many further batches, the
        # pilot left out: a pilot whose runs happened to agree asks for fewer batches, and where the errors are skewed
        # such a pilot's mean is also high (rochdale's two-way margins at epsilon 0.05, with the pilot kept: the
        # stated mean correlated -0.25 with the runs over 30 audit seeds, a scratch measurement of stop 40 with the
        # totals then reflected; 0.03 with it left out), so a mean that kept it would lean its way.
        batch = _conditioned_batch if conditioned else _reflected_batch
        seed = audit_seed(release.plan, release.table)
        pilot = batch(release.plan, fitted, runs=runs, seed=seed)
        shared = None if conditioned else TOTAL_RUNS
        count = audit_batches(pilot, cells=work, shared_totals=shared, fits=fits)
        batches = [pilot] if count == 1 else [batch(release.plan, fitted, runs=runs, seed=seed + 2 * b)
                                              for b in range(1, count + 1)]
        errors = np.concatenate(batches)
        spread = total_noise_sd(release.plan) if conditioned else None
        described += (ROUNDED_LIKE.get(release.plan.rounding, "") + SEEDED_FROM_THE_RELEASE
                      + (TOTALS_REFLECTED if not conditioned else TOTAL_PUBLIC if spread == 0 else TOTAL_CONDITIONED)
                      + BATCHES_ADDED)
        if conditioned:
            total = float(fitted.sum())
            z = NormalDist().inv_cdf((1.0 + level) / 2.0)
            if spread > 0 and total <= z * spread:  # a public total (no noise) is known, even where it is 0
                described += TOTAL_UNCERTAIN.format(total=f"{total:.6g}", z=f"{z:.3g}", sd=f"{spread:.3g}",
                                                    level=f"{100 * level:g}")
        wanted = batches_wanted(pilot, shared_totals=shared)
        if count < wanted:  # the limit on work, not the mean's precision, decided
            described += BATCHES_LIMITED.format(count=count, wanted=wanted) + (FIRST_BATCH_KEPT if count == 1 else "")
        return _summary(release.plan, errors, level=level, described=described), None
    except (TabreleaseError, ArithmeticError, ValueError, MemoryError) as exc:  # ValueError: numpy's LinAlgError too
        # The release was drawn already: a simulation that fails is recorded, never fatal.
        return None, f"the error simulation failed ({type(exc).__name__})"


# The audit's simulation is bounded by its work, counted in cells fitted by least squares
# (`Estimator.simulation_work`): a synthesising estimator (the Gaussian copula's, `Estimator.draws_records`) draws a
# record per person in each run, and the audit of a copula release at epsilon 1e-6 on Edwards (a noisy total of 9e5)
# ran after the release's charge until a 4-minute timeout stopped it (a scratch run); RAP's relaxed projection runs
# 400 L-BFGS iterations over 500 synthetic rows, and the audit of a RAP release of Edwards' six-way margin ran for over
# 5 minutes after its charge (a release of 1.5 s; stop 44, scratch): 32 batches of 60 runs of about 1 s each. Past
# this much work in the first batch's runs the simulation is not run; further batches are counted by the same work,
# within MAX_SIMULATED_CELL_RUNS.
MAX_SIMULATED_WORK = 2**24


def _work_per_run(plan, table) -> int:
    """What one simulated run of `plan` costs, in cells fitted by least squares (`Estimator.simulation_work`)."""
    return int(plan.estimator.simulation_work(plan, np.asarray(table)))


def _too_much_work(plan, work: int, fits: int) -> str:
    """The audit's note where its first batch would pass MAX_SIMULATED_WORK."""
    if plan.estimator.draws_records:
        return (f"no simulated error: the estimator draws a synthetic record per person, {work:.3g} per run (the "
                f"released total), more than {MAX_SIMULATED_WORK:.3g} in a first batch's {fits} fits")
    return (f"no simulated error: a run of the {plan.estimator.name} estimator costs about {work:.3g} cells fitted "
            f"by least squares, more than {MAX_SIMULATED_WORK:.3g} in a first batch's {fits} fits")


def audit_seed(plan, table) -> int:
    """The seed of the audit's simulation of a release: `AUDIT_SEED` followed by 64 bits of the SHA-256 of its
    released margins, those of the plan's margins in the released table: the table's shape (its repr), then for each
    margin its axes (their repr) and its values rounded to 6 decimals, a negative zero made 0, as little-endian
    float64 in C order.

    A function of the release, so the figures are reproducible from it; but not one seed for every release. With one
    fixed seed, every release of a plan shared the same Monte Carlo draw of the noise, so where the simulation's own
    error put its quantile high (or low), it did so for all of them: the stated quantile's coverage over releases then
    rested on that one draw (its 58th of 60 runs misses the 95% quantile's level by a standard deviation of about 2.7
    points, Beta(58, 3)), and the validation benchmark's standard errors, computed over releases, could not see it.
    Seeded from the release, each release's audit draws its own runs, and over releases the quantile's coverage is
    k / (runs + 1) on a world like the truth, as `upper_order_statistic` says. The margins, not the cells: where the
    world is not moved toward the released table it is a function of the released margins, which `public/` holds, so
    such an audit is recomputable from them alone. Rounded to 6 decimals (the precision the bundle's files keep): a
    release left unrounded whose fit differs in its last bits on another machine keeps its seed.

    Parameters
    ----------
    plan : MechanismPlan
        The release's plan (its margins).
    table : array_like
        The released table (counts of the plan's shape).

    Returns
    -------
    int
        Non-negative; batch b of the audit uses it plus 2 b (`released_table_errors`).
    """
    cells = np.asarray(table, dtype=float)
    digest = hashlib.sha256(repr(cells.shape).encode())
    for axes in plan.margins:
        values = np.round(margin_counts(cells, tuple(axes)), 6) + 0.0  # + 0.0: a negative zero hashes as 0
        digest.update(repr(tuple(int(a) for a in axes)).encode())
        digest.update(np.ascontiguousarray(values, dtype="<f8").tobytes())
    return AUDIT_SEED * 2**64 + int.from_bytes(digest.digest()[:8], "big")


# The audit's runs come in batches, as many as make the runs' mean error's standard error at most MEAN_RELATIVE_SE of
# itself (estimated from the first batch), at most MAX_BATCHES, and no more than MAX_SIMULATED_CELL_RUNS cells x runs
# in the batches stated (the first batch, where left out, comes on top).
MEAN_RELATIVE_SE = 0.03
MAX_BATCHES = 32
MAX_SIMULATED_CELL_RUNS = 2**21
BATCHES_ADDED = (f"; the runs came in batches, each with its own seeds, as many as make the runs' mean error's "
                 f"standard error at most {MEAN_RELATIVE_SE:.0%} of itself (as a first batch estimated it; where "
                 "that asked for more than one, the first batch is not among them)")
# Appended where the limit on the simulation's work (MAX_SIMULATED_CELL_RUNS, in cells fitted by least squares)
# allowed fewer batches than the first asked for: the mean is then known less precisely than MEAN_RELATIVE_SE.
BATCHES_LIMITED = "; the limit on the simulation's work allowed {count} of the {wanted} batches asked for"
# Appended after it where that is one: the figures are then the first batch's, though it asked for more.
FIRST_BATCH_KEPT = ", so the figures are the first batch's own"


def audit_batches(first: np.ndarray, *, cells: int, shared_totals: int | None = None, fits: int | None = None) -> int:
    """How many batches the audit's simulation takes, from the (runs x margins) errors of its first batch:
    ceil((r / MEAN_RELATIVE_SE)^2), r the relative standard error (sd / sqrt(n) / mean) of the batch's mean error
    (each run's mean over the margins), so that the mean of that many batches has about MEAN_RELATIVE_SE; at least 1,
    at most MAX_BATCHES, and at most as many as keep cells x runs within MAX_SIMULATED_CELL_RUNS.

    The runs of a conditioned batch (`_conditioned_batch`) are independent: n is the runs. Those of a reflected
    batch (`_reflected_batch`) share `shared_totals` released totals, run i the (i mod shared_totals)-th; where the
    total decides the error, runs sharing one err alike, so the standard error is that of the means of the runs
    sharing each total (n = shared_totals such groups, or the runs where they are fewer).

    Parameters
    ----------
    first : numpy.ndarray
        (runs x margins) L1 errors of the first batch.
    cells : int
        The work of each run, in cells fitted by least squares (`Estimator.simulation_work`).
    shared_totals : int, optional
        How many released totals the runs share, in turn (None: independent runs).
    fits : int, optional
        The fits a batch makes (by default its runs; a reflected batch also fits its shared totals' releases).

    Returns
    -------
    int
        At least 1.
    """
    return min(batches_wanted(first, shared_totals=shared_totals),
               affordable_batches(len(first) if fits is None else fits, cells))


def affordable_batches(runs: int, cells: int) -> int:
    """How many batches of `runs` fits of `cells` work each keep within MAX_SIMULATED_CELL_RUNS (at least 1).

    Parameters
    ----------
    runs : int
        Fits per batch.
    cells : int
        The work of each run, in cells fitted by least squares.

    Returns
    -------
    int
        At least 1.
    """
    return max(1, MAX_SIMULATED_CELL_RUNS // max(1, runs * cells))


def batches_wanted(first: np.ndarray, *, shared_totals: int | None = None) -> int:
    """The batches `audit_batches` asks for before its limit on work: ceil((r / MEAN_RELATIVE_SE)^2), at least 1,
    at most MAX_BATCHES.

    Parameters
    ----------
    first, shared_totals
        As for `audit_batches`.

    Returns
    -------
    int
    """
    runs = len(first)
    per_run = first.mean(axis=1)
    groups = runs if shared_totals is None else min(shared_totals, runs)
    means = np.array([per_run[i::groups].mean() for i in range(groups)])
    mean = per_run.mean()
    if groups < 2 or mean <= 0:  # every run erred by 0: the mean is known
        return 1
    relative = means.std(ddof=1) / np.sqrt(groups) / mean
    return int(min(MAX_BATCHES, max(1, ceil((relative / MEAN_RELATIVE_SE) ** 2 - 1e-9))))


def conditions_on_total(plan) -> bool:
    """Whether the audit's runs condition on the release's total (`_conditioned_batch`): the plan's estimator is
    least squares, which pins the total to the best linear unbiased estimate from its linear noisy blocks (or to a
    public total), and those blocks' noise is drawn the same whatever the table (additive noise of fixed scales).
    Else the world's total is reflected (`_reflected_batch`).

    Parameters
    ----------
    plan : MechanismPlan
        The release's plan (its estimator).

    Returns
    -------
    bool
    """
    from .estimate import LeastSquares

    return isinstance(plan.estimator, LeastSquares)


def _reflected_batch(plan, fitted: np.ndarray, *, runs: int, seed: int) -> np.ndarray:
    """One reflected batch of the audit's simulation (`released_table_errors`): the world (`fitted` rounded at
    random), its `TOTAL_RUNS` released totals T*, then `runs` releases of `fitted` scaled to max(0, 2 T - T*) and
    rounded at random; the (runs x margins) L1 errors. Seeds: `seed` for the totals' noise, `seed + 1` for the runs'
    noise, [seed, 1] and [seed, 2] for the roundings."""
    world = _rounded_at_random(fitted, np.random.default_rng([seed, 1]))
    _, released_totals = _simulated_runs(plan, [world] * TOTAL_RUNS, seed=seed, rounded=False)
    totals = np.maximum(0.0, 2.0 * world.sum() - released_totals)
    shape = _shape_of(fitted)
    rng = np.random.default_rng([seed, 2])
    worlds = [_rounded_at_random(shape * totals[i % TOTAL_RUNS], rng) for i in range(runs)]
    errors, _ = _simulated_runs(plan, worlds, seed=seed + 1, rounded=False)
    return errors


def _conditioned_batch(plan, fitted: np.ndarray, *, runs: int, seed: int) -> np.ndarray:
    """One conditioned batch of the audit's simulation (`released_table_errors`): `runs` releases, run i with the
    noise of SimulationNoise(seed * RUN_SEED_STRIDE + i), of `fitted` (total T) scaled to max(0, T - e) and rounded
    at random ([seed, 2]), e the run's noise in its total (`_noise_in_total`, learnt by drawing the same noise on
    `fitted` rounded at random with [seed, 1]); the (runs x margins) L1 errors, each against its own world."""
    from .noise import SimulationNoise
    from .pipeline import measure

    total = float(fitted.sum())
    shape = _shape_of(fitted)
    at_total = _rounded_at_random(fitted, np.random.default_rng([seed, 1]))
    rng = np.random.default_rng([seed, 2])
    worlds, drawn = [], []
    for i in range(runs):
        noise_seed = seed * RUN_SEED_STRIDE + i
        noise = _noise_in_total(plan.estimator, measure(plan, at_total, SimulationNoise(seed=noise_seed)),
                                float(at_total.sum()))
        world = _rounded_at_random(shape * max(0.0, total - noise), rng)
        worlds.append(world)
        drawn.append(measure(plan, world, SimulationNoise(seed=noise_seed)))  # the same noise, on the run's world
    errors, _ = _simulated_runs(plan, worlds, rounded=False, drawn=drawn)
    return errors


def total_noise_sd(plan) -> float:
    """The standard deviation of the noise in the total a least-squares plan pins (`LeastSquares.prepared`): that of
    the best linear unbiased estimate of n from its noisy blocks (`measurements.best_total_variance`), or 0 where the
    total is measured exactly (public). A function of the plan's scales alone.

    Parameters
    ----------
    plan : MechanismPlan
        A plan whose estimator is least squares (`conditions_on_total`).

    Returns
    -------
    float

    Raises
    ------
    TabreleaseError
        No noisy block carries the total.
    """
    from .measurements import EXACT, best_total_variance
    from .noise import SimulationNoise
    from .pipeline import measure

    # The noise's variance is the scales', whatever the table: any table of the plan's shape will do, and an empty
    # one reads nothing.
    blocks = measure(plan, np.zeros(tuple(plan.shape), dtype=np.int64), SimulationNoise(seed=0)).blocks
    if any(b.distribution == EXACT for b in blocks):
        return 0.0
    return float(np.sqrt(best_total_variance([b for b in blocks if b.distribution != EXACT])))


def _shape_of(fitted: np.ndarray) -> np.ndarray:
    """The world's shape: `fitted` over its total (all zeros where the total is 0, a world that stays empty)."""
    total = fitted.sum()
    return fitted / total if total > 0 else fitted


def _noise_in_total(estimator, measurements, world_total: float) -> float:
    """The total a least-squares `estimator` pins for `measurements` (`LeastSquares.prepared`: the best linear
    unbiased estimate of n from the noisy blocks, or the public total), less the total of the table measured: the
    run's noise in its total (0 where the total is public). Only for plans that `conditions_on_total`.

    Raises
    ------
    TabreleaseError
        The measurements are not ones the estimator reads (no block carries the total, say).
    """
    return float(estimator.prepared(measurements)[3]) - world_total
