"""Sensitive and insensitive attributes (Dwork, McSherry & Talwar's section 5 remark on Barak et al.): Laplace noise
only on the Fourier / Efron-Stein coefficients whose set contains a sensitive attribute; the others are released
exactly; then the consistency LP and nearest rounding, as the fourier and efron-stein mechanisms do.

The guarantee is weaker than differential privacy over whole records. A coefficient of a set S with no sensitive
attribute is a function of the insensitive attributes alone, so releasing it exactly is private only if those are
public: the neighbour relation is "one record's sensitive attributes changed, every insensitive attribute (and n)
unchanged" (a restriction of replace neighbours). DMT state no relation; under add-remove or an unrestricted
replace the exact coefficients would change, so this is the only one under which their remark holds. Under it a
change on the sensitive coordinates D (non-empty, D within the sensitive set) moves exactly the blocks S that meet
D; the sensitivity is the largest, over such D, L1 change of the noised blocks (bases.block_changes' replace rows
restricted to D within the sensitive set). DMT's own count for one sensitive a_1 and all 3-way margins also noises
the lower-order sets without a_1 (binom(k,2) + k + 1 of them): under this relation those do not change, and noising
them is unnecessary; under add-remove it would not be enough (the exact 3-way sets without a_1 change).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..bases import block_changes, coefficients, integer_coefficients
from ..errors import TabreleaseError
from ..measurements import COEFFICIENTS, EXACT, Measurement, measured
from ..noise import laplace_calibration
from ..privacy import PURE, SENSITIVE, PrivacyGuarantee, PrivacyLoss, PrivacyUnit
from ..tables import LETTERS
from ._base import calibration_loss, MechanismPlan, no_paper_calibration
from ._coefficients import CoefficientMechanism

SENSITIVE_ATTRIBUTES = "sensitive-attributes"
SENSITIVE_WARNING = ("weaker guarantee: only the sensitive attributes are protected; the insensitive attributes and n "
                     "are treated as public and their coefficients are released exactly")


def sensitive_axes(sensitive, k: int, names: Sequence[str] | None = None) -> tuple[int, ...]:
    """The sensitive variables as sorted axis numbers, from axis numbers, letters (A, B, ...) or variable names.

    Parameters
    ----------
    sensitive : str or iterable
        A comma-separated string, or a sequence of axis numbers and names.
    k : int
        The table's number of variables.
    names : sequence of str, optional
        The variables' names (letters are accepted either way).

    Returns
    -------
    tuple of int
        Sorted, distinct axes.

    Raises
    ------
    TabreleaseError
        If none is given, or an item is not a variable of the table.
    """
    if sensitive is None or isinstance(sensitive, (str, bytes)) and not sensitive.strip():
        raise TabreleaseError("the sensitive-attributes mechanism needs the sensitive variables (--sensitive VAR,VAR)")
    items = [s.strip() for s in sensitive.split(",")] if isinstance(sensitive, str) else list(sensitive)
    axes = set()
    for item in items:
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool) and 0 <= item < k:
            axes.add(int(item))
        elif isinstance(item, str) and names is not None and item in names:
            axes.add(list(names).index(item))
        elif isinstance(item, str) and len(item) == 1 and item.upper() in LETTERS[:k]:
            axes.add(LETTERS.index(item.upper()))
        else:
            raise TabreleaseError(f"--sensitive names {item!r}, which is not a variable of this table")
    return tuple(sorted(axes))


def noised_sets(closure, sensitive: Sequence[int]) -> list[bool]:
    """Per set of the closure: does it contain a sensitive attribute (is it noised).

    Parameters
    ----------
    closure : sequence of Margin
        The basis's sets.
    sensitive : sequence of int
        The sensitive axes.

    Returns
    -------
    list of bool
        One flag per set, in closure order.
    """
    return [bool(set(s) & set(sensitive)) for s in closure]


def sensitive_sensitivity(basis, sensitive: Sequence[int]) -> float:
    """Exact L1 sensitivity of the noised blocks when one record's sensitive attributes change.

    Parameters
    ----------
    basis : CoefficientBasis
        The released basis (at most 22 variables: the replace patterns are enumerated).
    sensitive : sequence of int
        The sensitive axes.

    Returns
    -------
    float
        The largest L1 change of the noised blocks over non-empty sets D of changed coordinates within `sensitive`.
    """
    mask = sum(1 << j for j in sensitive)
    patterns = np.arange(1, 2**basis.k, dtype=np.int64)
    rows = (patterns & ~mask) == 0  # D within the sensitive set
    noised = np.array(noised_sets(basis.closure, sensitive))
    changes = block_changes(basis, "replace", 1)
    return float(changes[np.ix_(rows, noised)].sum(axis=1).max())


class SensitiveAttributes(CoefficientMechanism):
    name = SENSITIVE_ATTRIBUTES
    summary = "noise only on coefficients of sets with a sensitive attribute (weaker guarantee), consistency LP, round"
    basis_kind = None  # Fourier for all-binary tables, Efron-Stein otherwise
    options = ("sensitive",)

    def plan(self, shape, margins, epsilon, *, neighbours, delta, calibration, options):
        no_paper_calibration(self.name, calibration)
        if neighbours != "replace":
            raise TabreleaseError("the sensitive-attributes mechanism protects one record's sensitive attributes "
                                  "with n and the insensitive attributes public (a restriction of replace "
                                  "neighbours): give --neighbours replace")
        sensitive = sensitive_axes(options.get("sensitive"), len(shape))
        basis = self.basis_for(shape, margins)
        if not any(noised_sets(basis.closure, sensitive)):
            raise TabreleaseError("no released margin contains a sensitive attribute: nothing would be protected")
        cal = laplace_calibration(sensitive_sensitivity(basis, sensitive), epsilon, neighbours)
        return MechanismPlan(self.name, tuple(shape), tuple(margins), cal, self.estimator, basis,
                             parameters={"sensitive": sensitive}, notes=(SENSITIVE_WARNING,), rounding=self.rounding)

    def measure(self, plan, counts, noise):
        basis, cal = plan.basis, plan.calibration
        exact = coefficients(basis, counts)
        flags = noised_sets(basis.closure, plan.parameters["sensitive"])
        noisy_index = np.concatenate([np.arange(lo, hi) for f, lo, hi in
                                      zip(flags, basis.offsets[:-1], basis.offsets[1:]) if f])
        noisy = exact.copy()
        noisy[noisy_index] = noise.perturb(exact[noisy_index], cal, basis.integer_scale,
                                           integers=lambda: integer_coefficients(basis, counts)[noisy_index])
        blocks = tuple(
            Measurement(COEFFICIENTS, tuple(s), noisy[lo:hi], cal.distribution if f else EXACT,
                        cal.scale if f else 0.0, tuple(basis.shape), basis.kind)
            for s, f, lo, hi in zip(basis.closure, flags, basis.offsets[:-1], basis.offsets[1:]))
        return measured(blocks, noise)

    def check_measurements(self, plan, measurements):
        flags = noised_sets(plan.basis.closure, plan.parameters["sensitive"])
        wanted = [(tuple(s), plan.calibration.distribution if f else EXACT, plan.calibration.scale if f else 0.0)
                  for s, f in zip(plan.basis.closure, flags)]
        if [(tuple(b.variables), b.distribution, b.scale) for b in measurements.blocks] != wanted:
            raise TabreleaseError("these measurements were not drawn with this plan's noise (a block's set, "
                                  "distribution or scale differs)")

    def expected_errors(self, plan):
        return None  # not derived for blocks partly exact

    def l1_bounds(self, plan, delta):
        return None  # not derived for blocks partly exact

    def guarantee(self, plan, variables=None):
        # Only a change of the sensitive attributes of one record, its other attributes and n fixed: the blocks
        # released exactly do not move under it, and move under any other change.
        names = variables if variables is not None else LETTERS
        return PrivacyGuarantee(
            unit=PrivacyUnit(kind=SENSITIVE, attributes=tuple(names[j] for j in plan.parameters["sensitive"])),
            loss=calibration_loss(plan.calibration),
            how="Laplace noise on the coefficients of sets with a sensitive attribute, the others released exactly")

    def privacy_statement(self, plan):
        # By the names the public files use where the plan knows them (a plan made from a table), else by letters.
        labels = plan.variable_names or LETTERS
        names = ", ".join(labels[j] for j in plan.parameters["sensitive"])
        return (f"epsilon={plan.calibration.epsilon:g} differential privacy for the sensitive attributes only "
                f"({names}): neighbours differ in the sensitive attributes of one record, its insensitive attributes "
                "and n being public (weaker than record-level DP); Laplace noise on the coefficients of sets with a "
                "sensitive attribute, the others released exactly")
