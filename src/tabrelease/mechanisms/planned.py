"""The planned release (tabrelease's default): noise planned per block to minimise the expected error of the
released margins at an exact privacy cost, least squares over non-negative tables with the total pinned,
controlled rounding to one integer table.

What is measured and each block's scale come from `tabrelease.planning` (margins, Fourier or Efron-Stein
residual blocks; Laplace, or Gaussian under (epsilon, delta) with ResidualPlanner's closed form); the
privacy is that of the whitened sensitivity, computed exactly for the neighbour relation.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..bases import coefficient_basis, coefficients, integer_coefficients
from ..measurements import EXACT, MARGIN_CELLS, Measurement, measured
from ..noise import gaussian_calibration, laplace_calibration
from ..planning import MAX_CELL_VARIANCE, TOTAL_SQUARED_ERROR, expected_margin_errors, plan_measurements
from ..postprocessing import CONTROLLED, LEAST_SQUARES, LOCAL_LEAST_SQUARES
from ..tables import margin_of, total_of
from ._base import Mechanism, MechanismPlan, no_paper_calibration
from ._coefficients import integer_row_bound

PUBLIC_TOTAL_NOTE = ("the total n is treated as public (an invariant, as in census practice): it is released "
                     "exactly; the noise is calibrated to epsilon per add-remove step of everything else, and the "
                     "release's guarantee is between tables of equal n (one record changed): 2 epsilon-DP, or "
                     "(2 epsilon, (1 + e^epsilon) delta) under Gaussian noise")
# Up to this many cells the fit is over the table's cells: the released margins are those of one table. Above,
# it is over the margins themselves (no cell is materialised), and they agree on every shared sub-margin.
GLOBAL_MAX_CELLS = 2**12
# Above it, where the released margins' junction tree (a triangulation where they are not decomposable) is small
# enough, the fit is over the cliques: globally consistent without the cells. Every cell of a clique depends on
# every residual below it, so the fit's operator has prod_j (3 k_j - 2) non-zeros per clique (a 4^8 clique: 10^8,
# gigabytes in the solver); the clique fit is used up to this many, and at most this many sets below the cliques
# (one residual block each: all 2-way margins of 14 binary variables make one clique of 2^14 sets).
CLIQUE_MAX_NONZEROS = 2**19
CLIQUE_MAX_SETS = 2**10
# The fit on the margins themselves has the same operator per released margin; past this many non-zeros in all
# (about half a minute of solver time) a release is refused before its charge, naming the largest margin.
LOCAL_MAX_NONZEROS = 2**20


def fit_nonzeros(shape, margins) -> int:
    """Non-zeros of the fit's operator over these sets: every cell of a set depends on every residual below it.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.
    margins : iterable of Margin
        The sets the fit is over (released margins or cliques).

    Returns
    -------
    int
        The sum over sets of prod_j (3 k_j - 2).
    """
    from math import prod

    return sum(prod(3 * int(shape[j]) - 2 for j in g) for g in margins)
LOCAL_NOTE = ("the margins were fitted on themselves, not on the table's cells (it has too many) nor on a junction "
              "tree's cliques (they would be too large): they agree on every shared sub-margin (locally "
              "consistent), and are not shown to be the margins of one table")
CLIQUE_NOTE = ("the margins were fitted on the clique margins of a junction tree, not on the table's cells (it has "
               "too many): they are the margins of one non-negative table (globally consistent)")
REPLACE_TOTAL_NOTE = "under replace neighbours no neighbouring pair changes n: the total is exact (sensitivity 0)"


class Planned(Mechanism):
    name = "planned"
    summary = ("margins or residual blocks with noise planned per block (Laplace; Gaussian with --delta), least "
               "squares with the total pinned, controlled rounding")
    accepts_delta = True
    options = ("public_total", "plan_objective", "plan_candidates", "workload")
    bound_source = ""
    reads_margins = True  # measures margins (and residual blocks, from margins): a table held as records will do

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        distribution = "laplace" if delta is None else "gaussian"
        # Margins above the released ones (the full table included) are candidates where the fit is over the cells,
        # which holds them; past that, the local and clique fits are over the released margins' own sets.
        over_cells = int(np.prod(shape, dtype=object)) <= GLOBAL_MAX_CELLS
        closure_only = options.get("plan_candidates") == "closure"
        design = plan_measurements(shape, margins, distribution=distribution, neighbours=neighbours,
                                   public_total=bool(options.get("public_total", False)),
                                   objective=options.get("plan_objective") or TOTAL_SQUARED_ERROR,
                                   superset_cells=GLOBAL_MAX_CELLS if over_cells and not closure_only else 0,
                                   workload=options.get("workload"))
        notes = () if closure_only else _candidate_notes(shape, distribution, over_cells)
        if design.public_total:
            notes += (REPLACE_TOTAL_NOTE if neighbours == "replace" and not options.get("public_total")
                     else PUBLIC_TOTAL_NOTE,)
        estimator, estimator_options, note = _estimator_for(tuple(shape), tuple(margins))
        notes += note
        return MechanismPlan(self.name, tuple(shape), tuple(margins), _calibrate(design, epsilon, delta, neighbours),
                             estimator, parameters=_recorded_parameters(options),
                             notes=notes, rounding=CONTROLLED, design=design, estimator_options=estimator_options)

    def rescale(self, plan, epsilon):
        d = plan.design
        return replace(plan, calibration=_calibrate(d, epsilon, plan.calibration.delta, d.neighbours))

    def measure(self, plan, counts, noise):
        design, multiplier = plan.design, plan.calibration.scale
        blocks = []
        for block in design.blocks:
            scale = multiplier * block.relative_scale
            if block.query == MARGIN_CELLS:
                integers = np.asarray(margin_of(counts, block.variables), np.int64).ravel()
                exact, integer_scale, kind = integers.astype(float), 1.0, None
            else:
                basis = coefficient_basis(design.basis_kind, plan.shape, [block.variables])
                exact = basis.block(coefficients(basis, counts), block.variables)
                # computed only if the noise source draws on integers (release mode), not in every simulation
                integers = lambda b=basis, s=block.variables: b.block(integer_coefficients(b, counts), s)  # noqa: E731
                integer_scale, kind = basis.integer_scale, design.basis_kind
            noisy = noise.perturb(exact, replace(plan.calibration, scale=scale), integer_scale, integers=integers)
            blocks.append(Measurement(block.query, block.variables, np.asarray(noisy, float), design.distribution,
                                      scale, plan.shape, kind))
        if design.public_total:
            blocks.append(Measurement(MARGIN_CELLS, (), np.array([float(total_of(counts))]), EXACT, 0.0, plan.shape))
        return measured(blocks, noise)

    def sampler_bound(self, plan):
        d = plan.design
        coefficient_sets = [b.variables for b in d.blocks if b.query != MARGIN_CELLS]
        if not coefficient_sets:
            return 1.0
        return integer_row_bound(coefficient_basis(d.basis_kind, plan.shape, coefficient_sets))

    def expected_errors(self, plan):
        d = plan.design
        variance = 2.0 if d.distribution == "laplace" else 1.0
        blocks = [(b.query, b.variables, d.basis_kind, variance * (plan.calibration.scale * b.relative_scale) ** 2)
                  for b in d.blocks]
        return expected_margin_errors(plan.shape, plan.margins, blocks, d.public_total)


CANDIDATES_NOT_ABOVE_NOTE = ("the plan measured only the released margins' own sets and their residuals: margins above "
                             "them (the full table included) are candidates only where the fit is over the table's "
                             f"cells (at most {GLOBAL_MAX_CELLS} cells)")
CANDIDATES_BOUNDED_NOTE = ("with more than {limit} variables not every set's margin was a candidate: the released "
                           "margins' sets, each with up to {extra} more variables, and the full table")


# The planner's settings that change the plan, recorded in release.json's parameters (numbers only) where they are
# not the default, so that the plan can be rebuilt from the public bundle (`inference.published_plan`, which reads
# them back): a release made with them was otherwise refused by `test` (a new user's trial).
PLAN_SETTING_PARAMETERS = {"objective_max_cell_variance": ("plan_objective", MAX_CELL_VARIANCE),
                           "candidates_closure": ("plan_candidates", "closure")}


def _recorded_parameters(options) -> dict:
    """release.json's parameters of a planned release: whether the total is public, and the planner's settings
    that are not the default (`PLAN_SETTING_PARAMETERS`), as 1."""
    recorded = {"total_is_public": int(bool(options.get("public_total")))}
    for key, (option, value) in PLAN_SETTING_PARAMETERS.items():
        if options.get(option) == value:
            recorded[key] = 1
    return recorded


def _candidate_notes(shape, distribution, over_cells) -> tuple[str, ...]:
    """What the plan did not consider, in words (nothing when every set's margin was a candidate)."""
    from ..planning import ALL_SUBSETS_MAX_VARIABLES, SUPERSET_EXTRA_VARIABLES

    if distribution != "laplace":
        return ()
    if not over_cells:
        return (CANDIDATES_NOT_ABOVE_NOTE,)
    if len(shape) > ALL_SUBSETS_MAX_VARIABLES:
        return (CANDIDATES_BOUNDED_NOTE.format(limit=ALL_SUBSETS_MAX_VARIABLES, extra=SUPERSET_EXTRA_VARIABLES),)
    return ()


def _estimator_for(shape: tuple[int, ...], margins: tuple) -> tuple:
    """The fit a table of this size allows: over the cells (small tables), over the margins themselves where they
    are decomposable (non-negative margins that agree are then those of one table), over a triangulation's
    cliques where those are small enough, or else over the margins with local consistency only.

    Returns (estimator name, the keyword arguments it is built with, notes)."""
    if int(np.prod(shape, dtype=object)) <= GLOBAL_MAX_CELLS:
        return LEAST_SQUARES, {}, ()
    from ..junction import junction_tree

    tree = junction_tree(margins, shape)
    if tree.decomposable:
        return LOCAL_LEAST_SQUARES, {}, ()
    from ..models import downward_closure

    if fit_nonzeros(shape, tree.cliques) <= CLIQUE_MAX_NONZEROS and len(downward_closure(tree.cliques)) <= CLIQUE_MAX_SETS:
        return LOCAL_LEAST_SQUARES, {"cliques": tree.cliques}, (CLIQUE_NOTE,)
    return LOCAL_LEAST_SQUARES, {}, (LOCAL_NOTE,)


def _calibrate(design, epsilon, delta, neighbours):
    """The multiplier of the relative scales: exact for the whitened sensitivity of everything measured.

    Gaussian: the blocks, each with sigma_B = multiplier * beta_B, are one Gaussian mechanism: the whitened values
    (each block's values divided by beta_B) with noise of standard deviation `multiplier`, whose L2 sensitivity is
    the whitened sensitivity. The analytic Gaussian calibration of that one mechanism is exact, and its rho is the
    release's."""
    sensitivity = design.whitened_sensitivity()
    if design.distribution == "laplace":
        return laplace_calibration(sensitivity, epsilon, neighbours)
    return gaussian_calibration(sensitivity, epsilon, delta, neighbours)
