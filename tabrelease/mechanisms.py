"""The release mechanisms of the papers, all returning one `Release` shape.

| name             | what is perturbed                                | then                               |
|------------------|--------------------------------------------------|------------------------------------|
| fourier          | Fourier coefficients of B (binary tables)        | consistency LP, round (Table 1)    |
| efron-stein      | Efron-Stein components of B (any table)          | consistency LP, round (Table 2)    |
| gaussian         | the same coefficients, Gaussian noise, (eps, d)  | consistency LP, round (DMT s.5)    |
| binary-encoding  | Fourier coefficients of a bit encoding           | LP with structural zeros, decode   |
| cells            | every cell of the full table                     | clip at 0, round                   |
| margins          | every cell of each released margin independently | clip at 0, round; inconsistent     |
| nonneg           | coefficients, plus a shift of the constant term  | margins from coefficients (DMT 4.5.3, no LP) |

A plan (basis, calibration, LP) depends only on the table's shape, never its counts, so it is
built once and reused across the repetitions of a sweep.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import ceil, log2
from typing import Any

import numpy as np

from .bases import EFRON_STEIN, FOURIER, NEIGHBOURS, CoefficientBasis, coefficient_basis, coefficients
from .bases import margin_from_coefficients, paper_noise_scale, sensitivity
from .consistency import ConsistencyProblem, LPSolution, round_table
from .errors import TabreleaseError
from .models import Margin, default_model, maximal_margins
from .noise import (
    RELEASE,
    SIMULATION,
    NoiseCalibration,
    NoiseSource,
    check_delta,
    gaussian_calibration,
    laplace_calibration,
    noise_source,
)
from .tables import ContingencyTable, margin_counts

MECHANISMS = ("auto", "fourier", "efron-stein", "gaussian", "binary-encoding", "cells", "margins", "nonneg")
DEFAULT_NONNEG_T = 5.0


@dataclass(frozen=True, eq=False)
class Release:
    """What one run of a mechanism produced, in one shape for every mechanism.

    `released_margins` is what would be published. `table` is the rounded non-negative table
    w' whose margins they are (None for mechanisms that release margins only), `lp` the
    consistency LP's solution where there is one.
    """

    mechanism: str
    margins: tuple[Margin, ...]
    released_margins: tuple[np.ndarray, ...]
    table: np.ndarray | None
    lp: LPSolution | None
    noise: NoiseCalibration
    noise_mode: str
    consistent: bool
    basis: str | None
    coefficients_released: int
    timings: Mapping[str, float]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    # The plan's operator, kept so that evaluating many releases does not rebuild it.
    basis_operator: CoefficientBasis | None = field(default=None, repr=False)
    # The seed that replays a simulated release (None for secure noise, which has none).
    noise_seed: int | None = None

    @property
    def n_released(self) -> float:
        """n' = sum of w' (or of the first released margin when there is no table)."""
        source = self.table if self.table is not None else self.released_margins[0]
        return float(np.sum(source))

    @property
    def lp_b(self) -> float | None:
        return None if self.lp is None else self.lp.b


@dataclass(frozen=True, eq=False)
class BinaryEncoding:
    """Each variable with k_j levels as ceil(log2 k_j) bits; codes >= k_j are structural zeros."""

    shape: tuple[int, ...]
    bits: tuple[int, ...]

    @property
    def encoded_shape(self) -> tuple[int, ...]:
        return (2,) * sum(self.bits)

    def axes_of(self, variables: Sequence[int]) -> tuple[int, ...]:
        starts = np.cumsum((0,) + self.bits)
        return tuple(a for j in sorted(variables) for a in range(starts[j], starts[j] + self.bits[j]))

    def encode(self, counts: np.ndarray) -> np.ndarray:
        padded = np.zeros(tuple(2**b for b in self.bits), dtype=float)
        padded[tuple(slice(0, k) for k in self.shape)] = counts
        return padded.reshape(self.encoded_shape)

    def decode(self, encoded: np.ndarray) -> np.ndarray:
        full = np.asarray(encoded).reshape(tuple(2**b for b in self.bits))
        return full[tuple(slice(0, k) for k in self.shape)]

    def structural_zeros(self) -> np.ndarray:
        valid = np.zeros(tuple(2**b for b in self.bits), dtype=bool)
        valid[tuple(slice(0, k) for k in self.shape)] = True
        return ~valid.reshape(self.encoded_shape)


def binary_encoding(shape: Sequence[int]) -> BinaryEncoding:
    return BinaryEncoding(tuple(shape), tuple(max(1, ceil(log2(k))) for k in shape))


@dataclass(frozen=True, eq=False)
class MechanismPlan:
    """Everything about a release that does not depend on the counts."""

    mechanism: str
    shape: tuple[int, ...]
    margins: tuple[Margin, ...]
    calibration: NoiseCalibration
    basis: CoefficientBasis | None = None
    problem: ConsistencyProblem | None = None
    encoding: BinaryEncoding | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def resolve_mechanism(mechanism: str, shape: Sequence[int]) -> str:
    if mechanism not in MECHANISMS:
        raise TabreleaseError(f"unknown mechanism {mechanism!r}; choose one of {', '.join(MECHANISMS)}")
    binary = all(k == 2 for k in shape)
    if mechanism == "auto":
        return FOURIER if binary else EFRON_STEIN
    if mechanism == FOURIER and not binary:
        raise TabreleaseError(
            f"the Fourier mechanism needs an all-binary table; this one has levels {list(shape)} "
            "(use efron-stein, or binary-encoding)"
        )
    return mechanism


def plan_release(
    shape: Sequence[int],
    margins: Sequence[Margin],
    epsilon: float,
    *,
    mechanism: str = "auto",
    neighbours: str = "add-remove",
    delta: float | None = None,
    calibration: str = "exact",
    nonneg_t: float = DEFAULT_NONNEG_T,
) -> MechanismPlan:
    """Choose the basis, compute the exact sensitivity and noise scale, and build the LP once."""
    shape = tuple(int(k) for k in shape)
    mechanism = resolve_mechanism(mechanism, shape)
    if neighbours not in NEIGHBOURS:
        raise TabreleaseError(f"unknown neighbour relation {neighbours!r}; choose add-remove or replace")
    if calibration not in ("exact", "paper"):
        raise TabreleaseError(f"unknown calibration {calibration!r}; choose exact or paper")
    if calibration == "paper" and mechanism not in (FOURIER, EFRON_STEIN):
        raise TabreleaseError("--calibration paper reproduces the Fourier and Efron-Stein mechanisms only")
    if mechanism == "gaussian":
        if delta is None:
            raise TabreleaseError("the gaussian mechanism gives (epsilon, delta)-DP; give --delta")
        delta = check_delta(delta)
    elif delta is not None:
        raise TabreleaseError(f"--delta applies to the gaussian mechanism only, not to {mechanism}")
    generators, _ = maximal_margins(margins)
    if not generators or any(len(g) == 0 for g in generators):
        raise TabreleaseError("give at least one non-empty margin to release")
    if any(a < 0 or a >= len(shape) for g in generators for a in g):
        raise TabreleaseError("a margin names a variable the table does not have")
    notes: list[str] = []
    replace_factor = 2 if neighbours == "replace" else 1

    if mechanism in (FOURIER, EFRON_STEIN, "gaussian", "nonneg"):
        kind = FOURIER if mechanism == FOURIER or (mechanism != EFRON_STEIN and all(k == 2 for k in shape)) else EFRON_STEIN
        basis = coefficient_basis(kind, shape, generators)
        if mechanism == "gaussian":
            cal = gaussian_calibration(sensitivity(basis, neighbours, 2), epsilon, delta, neighbours)
        else:
            paper = paper_noise_scale(basis, epsilon) if calibration == "paper" else None
            cal = laplace_calibration(sensitivity(basis, neighbours, 1), epsilon, neighbours, paper_scale=paper)
            if calibration == "paper":
                notes.append(_paper_note(cal))
        if mechanism == "nonneg":
            plan = MechanismPlan(mechanism, shape, generators, cal, basis, parameters={"t": float(nonneg_t)})
            return _with_nonneg_shift(plan)
        return MechanismPlan(mechanism, shape, generators, cal, basis, ConsistencyProblem(basis), notes=tuple(notes))

    if mechanism == "binary-encoding":
        encoding = binary_encoding(shape)
        bit_margins = [encoding.axes_of(g) for g in generators]
        basis = coefficient_basis(FOURIER, encoding.encoded_shape, bit_margins)
        cal = laplace_calibration(sensitivity(basis, neighbours, 1), epsilon, neighbours)
        if neighbours == "replace" and any(2**b != k for b, k in zip(encoding.bits, shape)):
            notes.append("replace-one sensitivity is taken over all bit codes, structural zeros included: an upper bound")
        zeros = encoding.structural_zeros()
        problem = ConsistencyProblem(basis, structural_zeros=zeros)
        params = {"bits": list(encoding.bits), "structural_zero_cells": int(zeros.sum())}
        return MechanismPlan(mechanism, shape, generators, cal, basis, problem, encoding, params, tuple(notes))

    if mechanism == "cells":
        # A histogram: one record moves one cell by 1 (two cells when replaced).
        cal = laplace_calibration(1.0 * replace_factor, epsilon, neighbours)
        return MechanismPlan(mechanism, shape, generators, cal)

    # mechanism == "margins": each released margin is a histogram of its own.
    cal = laplace_calibration(float(len(generators) * replace_factor), epsilon, neighbours)
    return MechanismPlan(mechanism, shape, generators, cal)


def with_epsilon(plan: MechanismPlan, epsilon: float) -> MechanismPlan:
    """The same plan at another epsilon: only the noise scale changes; basis and LP are shared.

    Sweeps over epsilon build the LP once per table and mechanism this way.
    """
    cal = plan.calibration
    if cal.distribution == "gaussian":
        new = gaussian_calibration(cal.sensitivity, epsilon, cal.delta, cal.neighbours)
    else:
        paper = paper_noise_scale(plan.basis, epsilon) if cal.calibration == "paper" else None
        new = laplace_calibration(cal.sensitivity, epsilon, cal.neighbours, paper_scale=paper)
    notes = tuple(n for n in plan.notes if not n.startswith("paper calibration"))
    if cal.calibration == "paper":
        notes += (_paper_note(new),)
    plan = replace(plan, calibration=new, notes=notes)
    return _with_nonneg_shift(plan) if plan.mechanism == "nonneg" else plan


def _with_nonneg_shift(plan: MechanismPlan) -> MechanismPlan:
    """Record the nonneg shift (it moves with the scale) in the plan's parameters and notes."""
    shift = nonneg_shift(plan)
    note = (
        f"nonneg: every released count is lifted on purpose, by {shift['shift_per_cell']:.6g} per cell of the full "
        f"table ({shift['shift_total']:.6g} in all; t * d * scale = {shift['constant_term_shift']:.6g} on the constant "
        "coefficient), so that the margins are non-negative without an LP; the released margins are not counts"
    )
    notes = tuple(n for n in plan.notes if not n.startswith("nonneg:")) + (note,)
    return replace(plan, parameters={"t": plan.parameters["t"], **shift}, notes=notes)


def _paper_note(cal: NoiseCalibration) -> str:
    verdict = "holds" if cal.epsilon_holds else "does NOT hold"
    return (
        f"paper calibration (reproduction only): scale {cal.scale:.6g} against exact sensitivity "
        f"{cal.sensitivity:.6g}; the stated epsilon {cal.epsilon:g} {verdict} (actual epsilon {cal.epsilon_actual:.6g})"
    )


def _margins_of(counts: np.ndarray, margins: Sequence[Margin]) -> tuple[np.ndarray, ...]:
    return tuple(margin_counts(counts, g) for g in margins)


def run_plan(plan: MechanismPlan, counts: np.ndarray, noise: NoiseSource) -> Release:
    """Draw the noise and produce the release for one table."""
    counts = np.asarray(counts)
    if counts.shape != plan.shape:
        raise TabreleaseError(f"the plan is for a table of shape {plan.shape}, not {counts.shape}")
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    table = lp = None
    consistent = True
    d = 0
    mech = plan.mechanism
    notes = list(plan.notes)

    if plan.problem is not None:
        source = plan.encoding.encode(counts) if plan.encoding is not None else counts
        exact = coefficients(plan.basis, source)
        d = exact.size
        noisy = noise.perturb(exact, plan.calibration, plan.basis.integer_scale)
        timings["noise"] = time.perf_counter() - clock
        lp = plan.problem.solve(noisy)
        timings["lp"] = lp.seconds
        clock = time.perf_counter()
        table = round_table(lp.table)
        if plan.encoding is not None:
            table = plan.encoding.decode(table)
        released = _margins_of(table, plan.margins)
        timings["round"] = time.perf_counter() - clock
    elif mech == "nonneg":
        exact = coefficients(plan.basis, counts)
        d = exact.size
        noisy = noise.perturb(exact, plan.calibration, plan.basis.integer_scale)
        # DMT Corollary 1: lift the constant term by t * d * scale so that the implied table is
        # non-negative with probability at least 1 - exp(-t).
        noisy[plan.basis.empty_set_index] += nonneg_shift(plan)["constant_term_shift"]
        released = tuple(margin_from_coefficients(plan.basis, noisy, g) for g in plan.margins)
        timings["noise"] = time.perf_counter() - clock
        if any(np.any(m < 0) for m in released):
            notes.append("a released margin has a negative cell (the event Corollary 1 bounds by exp(-t))")
        # Noisy Fourier coefficients always give consistent margins; noisy Efron-Stein components
        # need not sum to zero along their axes, and then the margins disagree on what they share.
        consistent = _mutually_consistent(released, plan.margins, atol=1e-9 * max(1.0, plan.calibration.scale))
        if not consistent:
            notes.append(
                "nonneg: the margins are inconsistent because noisy Efron-Stein components do not sum to zero "
                "along their axes (even the margins' totals differ)"
            )
    elif mech == "cells":
        d = counts.size
        noisy = noise.perturb(counts.ravel(), plan.calibration, 1.0).reshape(counts.shape)
        timings["noise"] = time.perf_counter() - clock
        table = round_table(noisy)
        released = _margins_of(table, plan.margins)
    else:  # margins
        exact = _margins_of(counts, plan.margins)
        flat = np.concatenate([m.ravel() for m in exact])
        d = flat.size
        noisy = noise.perturb(flat, plan.calibration, 1.0)
        timings["noise"] = time.perf_counter() - clock
        pieces = np.split(round_table(noisy), np.cumsum([m.size for m in exact])[:-1])
        released = tuple(p.reshape(m.shape) for p, m in zip(pieces, exact))
        consistent = _mutually_consistent(released, plan.margins)
        if not consistent:
            notes.append("independently perturbed margins disagree on their shared sub-margins: no table has them all")

    return Release(
        mechanism=mech,
        margins=plan.margins,
        released_margins=released,
        table=table,
        lp=lp,
        noise=plan.calibration,
        noise_mode=noise.mode,
        consistent=consistent,
        basis=None if plan.basis is None else plan.basis.kind,
        coefficients_released=int(d),
        timings=timings,
        parameters=dict(plan.parameters),
        notes=tuple(notes),
        basis_operator=plan.basis,
        noise_seed=getattr(noise, "seed", None) if noise.mode == SIMULATION else None,
    )


def nonneg_shift(plan: MechanismPlan) -> dict[str, float]:
    """What the nonneg mechanism adds to every release: t * d * scale on the constant coefficient.

    It depends on t, the number of coefficients and the noise scale only (never on the counts),
    so it may be published. Per cell of the full table the lift is the shift times the constant
    basis function (2^{-k/2} for Fourier, 1 for Efron-Stein), found here by synthesising the total.
    """
    basis = plan.basis
    shift = float(plan.parameters["t"]) * basis.size * plan.calibration.scale
    unit = np.zeros(basis.size)
    unit[basis.empty_set_index] = shift
    total = float(margin_from_coefficients(basis, unit, ()))
    cells = float(np.prod(plan.shape))
    return {"constant_term_shift": shift, "shift_total": total, "shift_per_cell": total / cells}


def _mutually_consistent(released: Sequence[np.ndarray], margins: Sequence[Margin], atol: float = 0.0) -> bool:
    """Do the margins agree on every shared sub-margin (exactly, or within atol for real-valued margins)?"""
    for i, (a, ma) in enumerate(zip(margins, released)):
        for b, mb in zip(margins[i + 1 :], released[i + 1 :]):
            shared = tuple(sorted(set(a) & set(b)))
            sa = margin_counts(ma, [a.index(j) for j in shared]) if shared else ma.sum()
            sb = margin_counts(mb, [b.index(j) for j in shared]) if shared else mb.sum()
            if not np.allclose(sa, sb, rtol=0.0, atol=atol):
                return False
    return True


def release_margins(
    table: ContingencyTable,
    epsilon: float,
    margins: Sequence[Margin] | None = None,
    *,
    mechanism: str = "auto",
    neighbours: str = "add-remove",
    delta: float | None = None,
    calibration: str = "exact",
    mode: str = RELEASE,
    seed: int | None = None,
    nonneg_t: float = DEFAULT_NONNEG_T,
) -> Release:
    """Release margins of `table` under differential privacy.

    `margins` are axis tuples (default: the table's paper model). `mode="release"` draws from
    OpenDP and refuses a seed; `mode="simulation"` is seeded numpy noise for experiments.
    """
    if margins is None:
        margins = default_model(table).generators
    plan = plan_release(
        table.shape, margins, epsilon, mechanism=mechanism, neighbours=neighbours, delta=delta,
        calibration=calibration, nonneg_t=nonneg_t,
    )
    return run_plan(plan, table.counts, noise_source(mode, seed))
