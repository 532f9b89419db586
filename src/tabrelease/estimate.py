"""Estimators: from measurements to a non-negative table (or margins), before rounding.

An estimator is a named choice, separate from the mechanism: any mechanism whose measurements it
can read may use it. Each reads the plan and the `Measurements`, never the mechanism's name, and this module
imports no mechanism (a plan names its default estimator; `tabrelease.planner` resolves the name here). The
`Estimate` record and the names are in `postprocessing.py`; `noise_variance` and `best_total` (functions of the
measurements alone) in `measurements.py`; both are re-exported here.

| name                | reads                       | gives                                                         |
|---------------------|-----------------------------|---------------------------------------------------------------|
| linf-lp             | coefficient blocks          | the paper's step 5: min b s.t. w >= 0, abs(phi - F w) <= b    |
| as-measured         | margin-cell blocks          | the measured cells as they are (a full table, or margins)     |
| least-squares       | any linear measurements     | GLS over w >= 0 with the total pinned to its estimate          |
| local-least-squares | any linear measurements     | the same on the margins themselves (no cells): locally         |
|                     |                             | consistent and non-negative margins                           |
| shifted-synthesis   | coefficient blocks          | margins synthesised from the coefficients with the constant   |
|                     |                             | term lifted by t d scale (DMT 4.5.3): no LP                   |
| copula-synthesis    | dummy-coded tables          | n records sampled from a Gaussian copula (copula.py), their   |
|                     |                             | margins: integer and consistent by construction               |
| relaxed-projection  | margin-cell blocks          | RAP: a relaxed synthetic dataset (n' rows of per-variable     |
|                     |                             | probability vectors) fitted to the noisy cells, its table     |
| randomized-response-| randomized-response reports | the unbiased cells (y - n q) / (p - q), then least-squares    |
| least-squares       |                             | with the total pinned to the public n                         |
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from functools import lru_cache
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import TabreleaseError
from .measurements import (COEFFICIENTS, DUMMY_TABLES, EXACT, LINEAR, MARGIN_CELLS, RANDOMIZED_REPORTS, Measurement,
                           Measurements, best_total, noise_variance)
from .postprocessing import (AS_MEASURED, COPULA_SYNTHESIS, LEAST_SQUARES, LINF_LP, LOCAL_LEAST_SQUARES,
                             RANDOMIZED_RESPONSE_LEAST_SQUARES, RELAXED_PROJECTION, SHIFTED_SYNTHESIS, Estimate)

if TYPE_CHECKING:  # pragma: no cover
    from .models import Margin

# An estimator reads a plan's fields (shape, margins, basis, encoding, calibration) and never imports the mechanisms,
# not even for an annotation: a plan is a `mechanisms.MechanismPlan`.
MechanismPlan = Any


class Estimator(ABC):
    """Base class: `estimate(plan, measurements)`; `for_plan` builds what can be reused across runs."""

    name: str = ""
    reads: tuple[str, ...] = (COEFFICIENTS,)  # the query kinds of the measurements it can read
    # Whether `estimate` may run in several threads at once on one prepared estimator (the audit's simulation fits
    # in threads where it may): only where every solver it holds is one per thread.
    thread_safe: bool = False
    # Whether `estimate` draws a synthetic record per person: its work is then the total, not the cells (the audit's
    # simulation counts it so, `error_model.released_table_errors`).
    draws_records: bool = False

    def simulation_work(self, plan: MechanismPlan, table: np.ndarray) -> int:
        """What one of the audit's simulated runs of a release costs with this estimator, counted in cells fitted
        by least squares (the default's work; the audit bounds its simulation by it, `error_model`): by default the
        table's cells; an estimator that draws a record per person, the released total; an iterative synthesis,
        its steps in that unit.

        Parameters
        ----------
        plan : MechanismPlan
            The release's plan.
        table : numpy.ndarray
            The released table.

        Returns
        -------
        int
            At least the table's cells.
        """
        cells = int(np.asarray(table).size)
        return max(cells, _records(table)) if self.draws_records else cells

    def for_plan(self, plan: MechanismPlan) -> Estimator:
        """This estimator made ready for one plan: what depends only on the plan (an LP or QP's operators, the
        encoding's structural zeros) is built here once, and reused by every `estimate` for that plan.

        Parameters
        ----------
        plan : MechanismPlan
            The release's plan (shape, margins, basis, encoding, calibration).

        Returns
        -------
        Estimator
            An estimator for this plan (this one when nothing needs preparing).

        Raises
        ------
        TabreleaseError
            If the estimator cannot work with the plan (an encoded plan for `local-least-squares`).
        """
        return self

    def for_simulation(self) -> Estimator:
        """This estimator as a simulation of errors may fit with it: to a small fraction of a count rather than
        exactly (an estimator that refines its fit to integer exactness, for rounding, can skip that).

        Returns
        -------
        Estimator
            An estimator whose estimates agree with this one's to the solver's accuracy (this one by default).
        """
        return self

    @abstractmethod
    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        """The real-valued estimate from the measurements (post-processing only).

        Never reads the table: only the plan and the noisy measurements, so the estimate is post-processing of the
        differentially private answers.

        Parameters
        ----------
        plan : MechanismPlan
            The plan the measurements were taken under (prepared by `for_plan` where the estimator needs it).
        measurements : Measurements
            The noisy blocks of one run.

        Returns
        -------
        Estimate
            A real-valued table on the table's own shape (decoded from a bit encoding), or margins alone (the plan's
            margins, or a junction tree's clique margins), with the seconds taken and any notes; rounding turns it
            into counts. Non-negative except where the estimator keeps the noise's sign (`as-measured`, and
            `shifted-synthesis` with probability at most exp(-t)).

        Raises
        ------
        TabreleaseError
            If the measurements are of a kind the estimator does not read, the plan lacks what it needs, or the
            optimisation does not solve.
        """

    def _check(self, measurements: Measurements) -> None:
        if any(b.query not in self.reads for b in measurements.blocks):
            raise TabreleaseError(f"the {self.name} estimator reads {' and '.join(self.reads)} measurements only")


class _ProblemEstimator(Estimator):
    """An estimator with an optimisation problem built once per plan (its basis and structural zeros)."""

    def __init__(self, problem=None):
        self.problem = problem

    @abstractmethod
    def build(self, basis, structural_zeros):
        """The problem for this basis (and structural zeros), built once and solved per run.

        Parameters
        ----------
        basis : CoefficientBasis
            The plan's coefficient basis.
        structural_zeros : numpy.ndarray of bool or None
            Cells that are zero by construction (of a binary encoding), or None.

        Returns
        -------
        object
            The problem (a `consistency.ConsistencyProblem` for the LP), held by the estimator `for_plan` returns.
        """

    def for_plan(self, plan: MechanismPlan) -> _ProblemEstimator:
        cells = int(np.prod(plan.basis.shape, dtype=object))
        if cells > CELL_PROBLEM_MAX_CELLS:
            # Refused before the problem's arrays are made (over 2^30 cells they alone were 8 GiB per margin).
            raise TabreleaseError(f"the {self.name} estimator solves over every cell of the table: {cells:.3g} cells, "
                                  f"more than the {CELL_PROBLEM_MAX_CELLS:,} (2^22) it handles; use the planned "
                                  "mechanism, whose fit is over the margins at this size; nothing was charged")
        zeros = None if plan.encoding is None else plan.encoding.structural_zeros()
        return type(self)(self.build(plan.basis, zeros))

    def _problem(self):
        if self.problem is None:
            raise TabreleaseError(f"internal error: the {self.name} estimator was not prepared for this plan")
        return self.problem


# The cell-level problems (the paper's LP, least squares over the cells) hold a few vectors and a sparse operator with
# a non-zero per cell and measured set: past this many cells they are refused in one line, not attempted.
CELL_PROBLEM_MAX_CELLS = 2**22


class LInfinityLP(_ProblemEstimator):
    """The paper's consistency LP (Tables 1-2, step 5), built once per basis and re-solved per run."""

    name = LINF_LP

    def simulation_work(self, plan: MechanismPlan, table: np.ndarray) -> int:
        """The LP's domain's cells (a bit encoding's, for binary-encoded releases) to the power 1.5, halved: a
        scratch timing of stop 44 (2 CPUs; random tables of 3,000 records, every two-way margin) fitted 1,024 cells
        in 0.2 s, 4,096 in 0.9-1.2 s, and a review's 16,384 in 1.9 s at epsilon 1 and 25 s at 0.1, where least
        squares fits about 10-35 microseconds a cell. The solver's time depends on the noise; this counts it high
        at the sizes measured.

        Parameters
        ----------
        plan, table
            As for `Estimator.simulation_work` (the plan's basis gives the LP's domain).

        Returns
        -------
        int
        """
        cells = int(np.prod(plan.basis.shape, dtype=object))
        return max(int(np.asarray(table).size), int(cells**1.5) // 2)

    def build(self, basis, structural_zeros):
        from .consistency import ConsistencyProblem

        return ConsistencyProblem(basis, structural_zeros=structural_zeros)

    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        self._check(measurements)
        exact = np.concatenate([np.full(b.size, b.distribution == EXACT) for b in measurements.blocks])
        vector = measurements.vector()
        lp = self._problem_for(exact).solve(vector)
        # The LP lives on the measured domain (a bit encoding, for binary-encoded releases).
        table = lp.table if plan.encoding is None else plan.encoding.decode(lp.table)
        pinned, total = (), None
        if exact.any() and plan.encoding is None:
            pinned = exact_margins(self._problem().basis, measurements)
            # every maximal exact set contains the empty set's block: n is exact, the sum of any pinned margin
            total = int(np.sum(pinned[0][1], dtype=object)) if pinned else None
        return Estimate(table=table, margins=None, seconds=lp.seconds, lp=lp, pinned=pinned, total=total,
                        total_exact=total is not None)

    def _problem_for(self, exact: np.ndarray):
        """The LP with every exactly measured coefficient an equality (no deviation b allowed on it): a released
        table then has them exactly. Built once per pattern of exact coefficients."""
        if not exact.any():
            return self._problem()
        from .consistency import ConsistencyProblem

        cache = self.__dict__.setdefault("_exact_problems", {})
        key = exact.tobytes()
        if key not in cache:
            problem = self._problem()
            cache[key] = ConsistencyProblem(problem.basis, structural_zeros=problem.structural_zeros, exact=exact)
        return cache[key]


def exact_margins(basis, measurements: Measurements) -> tuple:
    """The margins the exactly measured coefficients determine: over each maximal set of the closure whose
    blocks (it and all its subsets) were measured exactly, as integers (axes, cells).

    Parameters
    ----------
    basis : CoefficientBasis
        The plan's coefficient basis.
    measurements : Measurements
        The coefficient blocks of one run, some measured exactly.

    Returns
    -------
    tuple of (tuple of int, numpy.ndarray)
        For each maximal exactly measured set, by size then axes: its axes and its margin (int64).

    Raises
    ------
    TabreleaseError
        If the exact coefficients are not those of an integer table.
    """
    from .bases import margin_from_coefficients

    exact_sets = {tuple(b.variables) for b in measurements.blocks if b.distribution == EXACT}
    complete = [s for s in exact_sets if all(tuple(t) in exact_sets for t in _subsets(s))]
    maximal = [s for s in complete if not any(set(s) < set(t) for t in complete)]
    vector = measurements.vector()
    out = []
    for s in sorted(maximal, key=lambda s: (len(s), s)):
        margin = margin_from_coefficients(basis, vector, s)
        rounded = np.rint(margin)
        if np.abs(margin - rounded).max(initial=0.0) > 1e-6 * max(1.0, float(np.abs(margin).max(initial=0.0))):
            raise TabreleaseError("the exactly measured coefficients are not those of an integer table")
        out.append((tuple(s), rounded.astype(np.int64)))
    return tuple(out)


def _subsets(s):
    from itertools import combinations

    return [c for r in range(len(s)) for c in combinations(s, r)]


# Operators of a dense factorisation per cell of least-squares work (`LeastSquares.simulation_work`): least squares
# fits about 10-35 microseconds a cell (`LinfLP.simulation_work`), and 20 x 20's 400^3 operations took 1.3 s.
DENSE_WORK_PER_CELL = 1000


class LeastSquares(Estimator):
    """Generalised least squares over non-negative tables from any linear measurements (coefficient blocks,
    margin cells, or both, each weighted by 1 / its noise variance), the total pinned to its best linear
    unbiased estimate from the measurements, or to an exactly measured (public) total."""

    name = LEAST_SQUARES
    reads = LINEAR
    # Its problems are cached, and each keeps one Clarabel solver per thread (`_ResidualQP`); a subclass inherits
    # this, and must say False where it holds anything else that a fit changes.
    thread_safe = True

    def __init__(self, structural_zeros=None, *, refine: bool = True):
        self.structural_zeros = structural_zeros
        self.refine = refine

    def for_plan(self, plan: MechanismPlan) -> LeastSquares:
        _check_only_the_total_exact(plan, self.name)
        return LeastSquares(None if plan.encoding is None else plan.encoding.structural_zeros(), refine=self.refine)

    def simulation_work(self, plan: MechanismPlan, table: np.ndarray) -> int:
        """The table's cells, or more where the plan measures coefficient blocks that the fit keeps over the cells
        (`consistency.fits_over_margins` says where it writes them over the table's margins instead, sparse rows:
        then the cells): each coefficient is a dense row over every cell, and R such rows over c cells cost the
        solver's factorisation about min(R, c)^2 max(R, c) operations, counted here as that over
        `DENSE_WORK_PER_CELL` cells. Over its cells, a Gaussian plan's residual blocks of a 42 x 22 table (861 dense
        rows over 924 cells) took 48-59 s a fit, where the cells alone had counted it as a fit of 924 cells, and the
        audit ran on after its charge for over 40 minutes (a new user's trial; 20 x 20 took 1.3 s and 30 x 22 3.9 s
        a fit in a scratch timing, 64,000 and 287,000 by this count).

        Parameters
        ----------
        plan, table
            As for `Estimator.simulation_work` (the plan's design gives its blocks).

        Returns
        -------
        int
        """
        from math import prod

        from .consistency import fits_over_margins
        from .measurements import MARGIN_CELLS

        cells = int(np.asarray(table).size)
        design = getattr(plan, "design", None)
        shape = tuple(np.asarray(table).shape)
        if design is None or len(shape) != len(plan.shape):  # an encoded plan's domain is not the table's
            return cells
        signature = [(b.query, tuple(b.variables), design.basis_kind) for b in design.blocks]
        if fits_over_margins(shape, signature):  # its rows are sparse over the table's margins: a fit of its cells
            return cells
        rows = sum(prod(shape[a] - 1 for a in b.variables) for b in design.blocks if b.query != MARGIN_CELLS)
        return max(cells, min(rows, cells) ** 2 * max(rows, cells) // DENSE_WORK_PER_CELL)

    def for_simulation(self) -> LeastSquares:
        """The fit without its refinement rounds (`consistency.LeastSquaresProblem.fit`): they make the fit exact
        to integers at any count, for the rounding; a simulation of unrounded errors needs a fraction of a count.

        Returns
        -------
        LeastSquares
            Without refinement (a subclass, which fits otherwise, is returned as it is).
        """
        if type(self) is not LeastSquares:
            return self
        return LeastSquares(self.structural_zeros, refine=False)

    def problem_for(self, domain, signature):
        """The least-squares problem for a domain and the signature of its measured blocks (cached by design).

        Parameters
        ----------
        domain : sequence of int
            The shape of the measured table (a bit encoding's, for encoded plans).
        signature : tuple of (str, tuple of int, str or None)
            Each noisy block's query kind, axes and basis kind, in order.

        Returns
        -------
        consistency.LeastSquaresProblem
            The problem, with this estimator's structural zeros.
        """
        zeros = None if self.structural_zeros is None else np.asarray(self.structural_zeros, bool)
        return _least_squares_problem(tuple(domain), signature, None if zeros is None else (zeros.tobytes(), zeros.shape))

    def prepared(self, measurements: Measurements):
        """(signature of the noisy blocks, their values, weights 1 / variance, the total to pin).

        Parameters
        ----------
        measurements : Measurements
            The blocks of one run (noisy linear blocks, and at most an exact total).

        Returns
        -------
        signature : tuple of (str, tuple of int, str or None)
            Each noisy block's query kind, axes and basis kind.
        values : numpy.ndarray
            The noisy values, block after block.
        weights : numpy.ndarray
            1 / the noise variance of each value.
        total : int or float
            The exactly measured total, or the best linear unbiased estimate of n from the noisy blocks.

        Raises
        ------
        TabreleaseError
            If a block is of a kind not read, no block is noisy, or an exact block is not the total.
        """
        self._check(measurements)
        fitted = [b for b in measurements.blocks if b.distribution != EXACT]
        exact = [b for b in measurements.blocks if b.distribution == EXACT]
        if not fitted:
            raise TabreleaseError("the least-squares estimator needs at least one noisy measurement")
        if any(b.query != MARGIN_CELLS or b.variables for b in exact):
            raise TabreleaseError("only the total can be given exactly (a public total)")
        signature = tuple((b.query, tuple(b.variables), b.basis) for b in fitted)
        values = np.concatenate([b.values for b in fitted])
        # Variance of Laplace(b) is 2 b^2, of a Gaussian sigma^2.
        weights = np.concatenate([np.full(b.size, 1.0 / noise_variance(b)) for b in fitted])
        total = int(np.rint(exact[0].values[0])) if exact else best_total(fitted)
        return signature, values, weights, total

    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        start = time.perf_counter()
        signature, values, weights, total = self.prepared(measurements)
        exact_total = any(b.distribution == EXACT for b in measurements.blocks)
        domain = measurements.blocks[0].domain
        problem = self.problem_for(domain, signature)
        base, change = problem.fit(values, weights, total, exact_total=exact_total, refine=self.refine)
        # The total rounding keeps: n when it was measured exactly, else the fit's own total, rounded exactly.
        rounded_total = int(total) if exact_total else int(base.sum()) + int(np.floor(float(change.sum()) + 0.5))
        table = np.maximum(base + change, 0.0).reshape(domain)
        if plan.encoding is not None:
            return Estimate(table=plan.encoding.decode(table), margins=None, seconds=time.perf_counter() - start,
                            total=rounded_total, total_exact=exact_total)
        return Estimate(table=table, margins=None, seconds=time.perf_counter() - start, base=base, change=change,
                        total=rounded_total, total_exact=exact_total)


class LocalLeastSquares(LeastSquares):
    """Least squares on the released margins themselves (no cells): locally consistent, locally non-negative
    margins from any linear measurements, the total pinned as for `least-squares` (ReM / GReM-LNN's idea)."""

    name = LOCAL_LEAST_SQUARES

    def __init__(self, cliques: tuple[Margin, ...] | None = None):
        # With cliques (a junction tree's, each holding released margins), the fit is over non-negative clique
        # margins that agree on their separators: those are the margins of one non-negative table, so the
        # released margins are globally consistent at the cost of the cliques' cells.
        super().__init__()
        self.cliques = None if cliques is None else tuple(tuple(c) for c in cliques)

    def for_plan(self, plan: MechanismPlan) -> LocalLeastSquares:
        _check_only_the_total_exact(plan, self.name)
        if plan.encoding is not None:
            raise TabreleaseError("the local least-squares estimator works on the table's own variables only")
        return LocalLeastSquares(self.cliques)

    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        start = time.perf_counter()
        signature, values, weights, total = self.prepared(measurements)
        if any(b.distribution == EXACT for b in measurements.blocks):
            return replace(self._estimate(plan, signature, values, weights, total, start), total=int(total),
                           total_exact=True)
        return self._estimate(plan, signature, values, weights, total, start)

    def _estimate(self, plan, signature, values, weights, total, start) -> Estimate:
        if self.cliques:
            try:
                problem = _local_problem(tuple(plan.shape), _with_measured(self.cliques, signature), signature)
                margins, _ = problem.solve(values, weights, total)
                return Estimate(table=None, margins=tuple(margins[c] for c in self.cliques),
                                seconds=time.perf_counter() - start, cliques=self.cliques)
            except TabreleaseError:
                pass  # the clique fit did not solve: the margins' own fit, with local consistency (said below)
        problem = _local_problem(tuple(plan.shape), _with_measured(plan.margins, signature), signature)
        margins, _ = problem.solve(values, weights, total)
        notes = (("the junction-tree fit did not solve; the margins were fitted on themselves (locally consistent)",)
                 if self.cliques else ())
        return Estimate(table=None, margins=tuple(margins[g] for g in plan.margins), seconds=time.perf_counter() - start,
                        notes=notes)


def _with_measured(sets, signature) -> tuple[Margin, ...]:
    """The sets a local fit is over: these, and every measured set inside none of them (a margin above the released
    ones, the full table included), so that each measurement lives on a fitted margin."""
    sets = tuple(tuple(g) for g in sets)
    above = [tuple(v) for _, v, _ in signature if not any(set(v) <= set(g) for g in sets)]
    if not above:
        return sets
    from .models import maximal_margins

    return tuple(maximal_margins(list(sets) + list(dict.fromkeys(above)))[0])


@lru_cache(maxsize=8)
def _local_problem(shape, generators, signature):
    from .consistency import LocalLeastSquaresProblem

    return LocalLeastSquaresProblem(shape, generators, signature)


@lru_cache(maxsize=16)
def _least_squares_problem(domain, signature, zeros):
    """The problem's operators depend on what was measured, not on the values: built once per design."""
    from .consistency import LeastSquaresProblem

    structural = None if zeros is None else np.frombuffer(zeros[0], bool).reshape(zeros[1])
    return LeastSquaresProblem(domain, signature, structural)


class AsMeasured(Estimator):
    """Measured cells, taken as they are: the full table if it was measured, else each margin on its own."""

    name = AS_MEASURED
    reads = (MARGIN_CELLS,)

    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        self._check(measurements)
        start = time.perf_counter()
        full = tuple(range(len(plan.shape)))
        whole = [b for b in measurements.blocks if tuple(b.variables) == full]
        if whole:
            return Estimate(table=whole[0].values.reshape(plan.shape), margins=None,
                            seconds=time.perf_counter() - start)
        margins = tuple(b.values.reshape(tuple(plan.shape[j] for j in b.variables)) for b in measurements.blocks)
        return Estimate(table=None, margins=margins, seconds=time.perf_counter() - start)


def _check_lift(plan: MechanismPlan) -> None:
    if "constant_term_shift" not in (plan.parameters or {}):
        raise TabreleaseError("the shifted-synthesis estimator needs a plan with a lift t (the nonneg mechanism's)")


def _check_only_the_total_exact(plan: MechanismPlan, name: str) -> None:
    """Refuse, as the estimator is chosen (before any charge), a plan that publishes margins exactly: the
    sensitive-attributes mechanism's, whose margins without a sensitive attribute are exact. The least-squares fits
    take only the total as exact (`LeastSquares.prepared`), so such a release failed after its charge."""
    if (plan.parameters or {}).get("sensitive") is not None:
        raise TabreleaseError(f"the {name} estimator takes only the total as exact, and this plan publishes the "
                              "margins without a sensitive attribute exactly: use the mechanism's own estimator "
                              "(linf-lp)")


class ShiftedSynthesis(Estimator):
    """DMT section 4.5.3, Corollary 1: lift the constant coefficient by t * d * scale and synthesise the
    margins from the coefficients directly; non-negative with probability >= 1 - exp(-t), no LP."""

    name = SHIFTED_SYNTHESIS

    def for_plan(self, plan: MechanismPlan) -> ShiftedSynthesis:
        _check_lift(plan)  # before the charge (`planner.with_post_processing`), not at the first estimate after it
        return self

    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        from .bases import margin_from_coefficients

        self._check(measurements)
        _check_lift(plan)
        start = time.perf_counter()
        coefficients = measurements.vector().copy()
        coefficients[plan.basis.empty_set_index] += plan.parameters["constant_term_shift"]
        margins = tuple(margin_from_coefficients(plan.basis, coefficients, g) for g in plan.margins)
        notes = []
        if any(np.any(m < 0) for m in margins):
            notes.append("a released margin has a negative cell (the event Corollary 1 bounds by exp(-t))")
        from .rounding import mutually_consistent

        if not mutually_consistent(margins, plan.margins, atol=1e-9 * max(1.0, plan.calibration.scale)):
            # Fourier blocks are single orthogonal numbers; Efron-Stein blocks are vectors that sum to zero
            # along each of their axes only when they are exact.
            notes.append("the margins are inconsistent because noisy Efron-Stein components do not sum to zero "
                         "along their axes (even the margins' totals differ)")
        return Estimate(table=None, margins=margins, seconds=time.perf_counter() - start, notes=tuple(notes))


class CopulaSynthesis(Estimator):
    """Asghar et al.'s Gaussian copula fitted to dummy-coded noisy counts, n records sampled from it (randomness:
    noise.post_processing_rng of the measurements' source), their margins (copula.py)."""

    name = COPULA_SYNTHESIS
    reads = (DUMMY_TABLES,)
    draws_records = True

    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        from .copula import measurements_rng, synthesise

        self._check(measurements)
        return synthesise(plan, measurements, measurements_rng(measurements))

class RelaxedProjection(Estimator):
    """RAP's projection (relaxed.py): a relaxed synthetic dataset of n' rows fitted by L-BFGS to the noisy margin
    cells (as proportions of n estimated from them), then its table (or margins) times that n. Randomness (the
    initial rows): noise.post_processing_rng of the measurements' source."""

    name = RELAXED_PROJECTION
    reads = (MARGIN_CELLS,)

    def simulation_work(self, plan: MechanismPlan, table: np.ndarray) -> int:
        """Its fit's steps (synthetic rows x L-BFGS iterations x the plan's margins' cells) over
        `relaxed.STEPS_PER_CELL_FIT`: a run on Edwards' six-way margin is about 1.3e5 cell fits, where least squares
        fits 64 (see `Estimator.simulation_work`).

        Parameters
        ----------
        plan, table
            As for `Estimator.simulation_work` (the plan's shape, margins and ``parameters["synthetic_rows"]``).

        Returns
        -------
        int
        """
        from .relaxed import DEFAULT_ITERATIONS, DEFAULT_ROWS, ROUND_ITERATIONS, STEPS_PER_CELL_FIT

        rows = int(plan.parameters.get("synthetic_rows", DEFAULT_ROWS))
        margin_cells = sum(int(np.prod([plan.shape[a] for a in g], dtype=object)) for g in plan.margins)
        # Adaptive RAP (rounds T > 1) fits T - 1 more times in its measurement, which a run repeats: counted as
        # though each of those fits were over every margin (a review's timing: 8.3 s a run at 28 rounds on
        # Rochdale's two-way margins, 1.3 s at one; this counts 7.75 times as much).
        iterations = DEFAULT_ITERATIONS + ROUND_ITERATIONS * (int(plan.parameters.get("rounds", 1) or 1) - 1)
        steps = rows * iterations * margin_cells
        return max(int(np.asarray(table).size), -(-steps // STEPS_PER_CELL_FIT))

    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        from .copula import measurements_rng
        from .relaxed import project

        self._check(measurements)
        return project(plan, measurements, measurements_rng(measurements))


# Records randomised (randomized response's simulated runs) that cost about as much as least squares fitting a cell.
RECORDS_PER_CELL_FIT = 100


def _records(table) -> int:
    """The records a released table counts (its total, to the nearest whole number)."""
    return int(round(float(np.asarray(table).sum())))


class RandomizedResponseLeastSquares(Estimator):
    """Unbias the randomised report counts, then the planned release's least squares with the total pinned to n."""

    name = RANDOMIZED_RESPONSE_LEAST_SQUARES
    reads = (RANDOMIZED_REPORTS,)

    def simulation_work(self, plan: MechanismPlan, table: np.ndarray) -> int:
        """Each run randomises every record again (`noise`): the records over RECORDS_PER_CELL_FIT, or the cells
        where more (a review's timing: 4.9 s a run for 10^8 records, about 50 ns a record, where least squares
        fits about 10 microseconds a cell; this counts it twice as high).

        Parameters
        ----------
        plan, table
            As for `Estimator.simulation_work`.

        Returns
        -------
        int
        """
        return max(int(np.asarray(table).size), _records(table) // RECORDS_PER_CELL_FIT)

    def estimate(self, plan: MechanismPlan, measurements: Measurements) -> Estimate:
        from .noise import rr_probabilities

        self._check(measurements)
        (block,) = measurements.blocks
        p, q = rr_probabilities(block.values.size, plan.calibration.epsilon)
        n = float(block.values.sum())
        cells = unbiased_cells(block.values, p, q)
        sd = np.sqrt(mean_cell_variance(n, block.values.size, p, q)) if n > 0 else 1.0
        # a Gaussian-kind block of standard deviation sd: LeastSquares weights it by 1 / sd^2
        linear = Measurements((Measurement(MARGIN_CELLS, block.variables, cells, "unbiased-randomized-response", sd,
                                           block.domain),
                               Measurement(MARGIN_CELLS, (), np.array([n]), EXACT, 0.0, block.domain)),
                              measurements.noise_mode, measurements.seed)
        return LeastSquares().estimate(plan, linear)


# The unbiasing of k-ary randomized response (mechanisms/randomized_response.py's docstring derives it).
def unbiased_cells(reports: np.ndarray, p: float, q: float) -> np.ndarray:
    """x_hat = (y - n q) / (p - q): E[x_hat] = x.

    Parameters
    ----------
    reports : numpy.ndarray
        The randomised report counts y, one per cell.
    p : float
        The probability of reporting one's own cell.
    q : float
        The probability of reporting each other cell.

    Returns
    -------
    numpy.ndarray
        The unbiased cell estimates (float; may be negative).
    """
    y = np.asarray(reports, float)
    return (y - y.sum() * q) / (p - q)


def cell_variance(x: np.ndarray, p: float, q: float) -> np.ndarray:
    """Var(x_hat_c) for true counts x: a sum of independent Bernoulli reports, divided by (p - q)^2.

    Parameters
    ----------
    x : numpy.ndarray
        The true cell counts.
    p : float
        The probability of reporting one's own cell.
    q : float
        The probability of reporting each other cell.

    Returns
    -------
    numpy.ndarray
        The variance of each cell's unbiased estimate.
    """
    x = np.asarray(x, float)
    return (x * p * (1 - p) + (x.sum() - x) * q * (1 - q)) / (p - q) ** 2


def mean_cell_variance(n: float, k: int, p: float, q: float) -> float:
    """The variance of an unbiased cell estimate, averaged over the k cells: it depends on n alone, not on the
    counts (so it can weigh the cells in least squares without reading them).

    Parameters
    ----------
    n : float
        The number of reports.
    k : int
        The number of cells.
    p : float
        The probability of reporting one's own cell.
    q : float
        The probability of reporting each other cell.

    Returns
    -------
    float
        The mean variance.
    """
    return n * (p * (1 - p) + (k - 1) * q * (1 - q)) / (k * (p - q) ** 2)


# Up to 2^53 float64 holds every integer exactly; above it a count, and so an estimate, cannot be exact to a unit.
MAX_EXACT_COUNT = 2**53


def check_exact_range(table) -> None:
    """Refuse, before any charge, a table too large for its estimate to be exact: above 2^53 (9.007e15) float64
    cannot hold every count, and the measured values themselves (floats) carry errors of 2 and more, above the
    noise of a typical release. Every estimator computes in float64, so the limit holds for every mechanism and
    mode. (The message names no count.)

    Parameters
    ----------
    table : ContingencyTable or MicrodataTable
        The table to be released.

    Raises
    ------
    TabreleaseError
        If the table's total is above 2^53.
    """
    if int(table.n) > MAX_EXACT_COUNT:
        raise TabreleaseError("the table's total is above 2^53 (9.007e15), where 64-bit floating point stops holding "
                              "every count exactly: the release could not be exact to within its noise; nothing was "
                              "charged")


ESTIMATORS = {e.name: e for e in (LInfinityLP(), LeastSquares(), LocalLeastSquares(), AsMeasured(), ShiftedSynthesis(),
                                  CopulaSynthesis(), RelaxedProjection(), RandomizedResponseLeastSquares())}


def get_estimator(name: str) -> Estimator:
    """The estimator of this name (not yet prepared for a plan: see `Estimator.for_plan`).

    Parameters
    ----------
    name : str
        One of the names in `ESTIMATORS` (``"linf-lp"``, ``"least-squares"``, ...).

    Returns
    -------
    Estimator
        The shared instance.

    Raises
    ------
    TabreleaseError
        If no estimator has this name.
    """
    if name not in ESTIMATORS:
        raise TabreleaseError(f"unknown estimator {name!r}; choose one of {', '.join(ESTIMATORS)}")
    return ESTIMATORS[name]
