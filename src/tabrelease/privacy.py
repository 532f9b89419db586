"""A release's privacy guarantee as a value: its *unit* (what change of the data it protects against) and its
*loss* (how much the output may move), and the exact rules by which a guarantee stated under one unit is read
under another.

The model is OpenDP's: a measurement's privacy is a pair (unit, loss), not a sentence. A ledger composes only
what its budget's unit covers, so the rules here are the whole of what may be converted:

========================  ====================================================================================
release's unit            read under a budget's unit
========================  ====================================================================================
add-remove                replace: group privacy with two steps (a replaced record is one removed and one
                          added): pure epsilon -> 2 epsilon; (epsilon, delta) -> (2 epsilon, (1 + e^epsilon)
                          delta); rho -> 4 rho. The sensitive-attribute unit likewise (its change is a replace).
replace                   the sensitive-attribute unit (any attributes): as it is (its neighbours are replace
                          neighbours). Add-remove: none (n is published exactly).
local (n public)          replace and the sensitive-attribute unit: epsilon-local DP is epsilon-DP for replace
                          neighbours. Add-remove: none (n is published exactly).
sensitive-attributes S    the sensitive-attribute unit of a set T within S: as it is. Any other: none (the
                          coefficients of the other attributes are released exactly).
========================  ====================================================================================

Losses: pure epsilon (delta 0); approximate (epsilon, delta); zCDP rho, which also states its tightest (epsilon,
delta). A budget is (epsilon, delta), composed by adding both (basic composition), or rho, composed by adding rho
(zCDP composes by addition); under a rho budget a pure epsilon costs epsilon^2 / 2 (Bun & Steinke 2016,
Proposition 1.4) and an approximate (epsilon, delta > 0) loss that is not zCDP cannot be charged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .errors import TabreleaseError

ADD_REMOVE = "add-remove"
REPLACE = "replace"
SENSITIVE = "sensitive-attributes"
LOCAL = "local"
UNITS = (ADD_REMOVE, REPLACE, SENSITIVE, LOCAL)
# What a budget may be declared for: local DP is a property of a release, not of a dataset's total.
BUDGET_UNITS = (ADD_REMOVE, REPLACE, SENSITIVE)

PURE = "pure"
APPROXIMATE = "approximate"
ZCDP = "zcdp"
LOSSES = (PURE, APPROXIMATE, ZCDP)


class GuaranteeMismatch(TabreleaseError):
    """A release's guarantee says nothing under a budget's unit (or cannot be charged to its kind of loss)."""


@dataclass(frozen=True, kw_only=True)
class PrivacyUnit:
    """What change of the data a guarantee protects against.

    Parameters
    ----------
    kind : {"add-remove", "replace", "sensitive-attributes", "local"}
        add-remove: one record added or removed (n private). replace: one record changed (n public).
        sensitive-attributes: the named attributes of one record changed, its other attributes and n public.
        local: every record randomised on its own before collection (n public).
    attributes : tuple of str
        The protected variables' names (the sensitive-attribute unit only; sorted, distinct).
    """

    kind: str
    attributes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in UNITS:
            raise TabreleaseError(f"unknown privacy unit {self.kind!r}; choose one of {', '.join(UNITS)}")
        attributes = tuple(sorted(set(map(str, self.attributes))))
        if (self.kind == SENSITIVE) != bool(attributes):
            raise TabreleaseError("the sensitive-attribute unit, and only it, names the protected attributes")
        object.__setattr__(self, "attributes", attributes)

    @property
    def n_public(self) -> bool:
        """Whether the number of records is treated as public (every unit but add-remove)."""
        return self.kind != ADD_REMOVE

    def describe(self) -> str:
        """The unit in words, for the audit and the terminal.

        Returns
        -------
        str
            E.g. "one record added or removed".
        """
        return {ADD_REMOVE: "one record added or removed",
                REPLACE: "one record changed (n public)",
                LOCAL: "each record randomised before collection (local; n public)",
                SENSITIVE: f"the attributes {', '.join(self.attributes)} of one record changed (its other "
                           "attributes and n public)"}[self.kind]

    def label(self) -> str:
        """A short label: the kind, with the protected attributes for the sensitive-attribute unit.

        Returns
        -------
        str
            E.g. "replace" or "sensitive-attributes(age,income)".
        """
        return self.kind if self.kind != SENSITIVE else f"{SENSITIVE}({','.join(self.attributes)})"

    def as_dict(self) -> dict:
        """The unit as a JSON-ready mapping (read back by `from_dict`).

        Returns
        -------
        dict
            ``kind``, ``attributes`` (a list) and ``n_public``.
        """
        return {"kind": self.kind, "attributes": list(self.attributes), "n_public": self.n_public}

    @classmethod
    def from_dict(cls, value) -> "PrivacyUnit":
        if not isinstance(value, dict):
            raise TabreleaseError(f"a privacy unit is a mapping with a kind, not {value!r}")
        return cls(kind=value.get("kind"), attributes=tuple(value.get("attributes") or ()))


@dataclass(frozen=True, kw_only=True)
class PrivacyLoss:
    """How much one release's output may move between neighbours.

    Parameters
    ----------
    kind : {"pure", "approximate", "zcdp"}
    epsilon : float
        Pure: epsilon. Approximate: epsilon at `delta`. zCDP: the tightest epsilon at `delta`.
    delta : float
        0 for pure loss.
    rho : float or None
        The zCDP parameter (zCDP only).
    """

    kind: str
    epsilon: float
    delta: float = 0.0
    rho: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in LOSSES:
            raise TabreleaseError(f"unknown privacy loss {self.kind!r}; choose one of {', '.join(LOSSES)}")
        if not _positive(self.epsilon):
            raise TabreleaseError(f"a privacy loss's epsilon is a positive finite number, not {self.epsilon!r}")
        if not (isinstance(self.delta, (int, float)) and 0 <= self.delta < 1):
            raise TabreleaseError(f"a privacy loss's delta lies in [0, 1), not {self.delta!r}")
        if self.kind == PURE and self.delta != 0:
            raise TabreleaseError("a pure privacy loss has delta 0")
        if (self.kind == ZCDP) != (self.rho is not None) or (self.rho is not None and not _positive(self.rho)):
            raise TabreleaseError("a zCDP loss, and only it, has a positive finite rho")
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "delta", float(self.delta))

    @property
    def zcdp_rho(self) -> float | None:
        """The loss as rho-zCDP, where it is one: rho, or epsilon^2 / 2 for pure loss; None for approximate."""
        if self.kind == ZCDP:
            return float(self.rho)
        if self.kind == PURE:
            from .accounting import pure_to_rho

            return pure_to_rho(self.epsilon)
        return None

    def describe(self) -> str:
        """The loss in words.

        Returns
        -------
        str
            E.g. "epsilon=1 (pure)" or "rho=0.05-zCDP and (epsilon=..., delta=...)" (both hold: a Gaussian
            release's (epsilon, delta) is the analytic Gaussian's, tighter than rho's conversion).
        """
        if self.kind == PURE:
            return f"epsilon={self.epsilon:.6g} (pure)"
        if self.kind == APPROXIMATE:
            return f"(epsilon={self.epsilon:.6g}, delta={self.delta:.3g})"
        return f"rho={self.rho:.6g}-zCDP and (epsilon={self.epsilon:.6g}, delta={self.delta:.3g})"

    def as_dict(self) -> dict:
        """The loss as a JSON-ready mapping (read back by `from_dict`).

        Returns
        -------
        dict
            ``kind``, ``epsilon``, ``delta`` and ``rho`` (None unless zCDP).
        """
        return {"kind": self.kind, "epsilon": self.epsilon, "delta": self.delta, "rho": self.rho}

    @classmethod
    def from_dict(cls, value) -> "PrivacyLoss":
        if not isinstance(value, dict):
            raise TabreleaseError(f"a privacy loss is a mapping with a kind, not {value!r}")
        return cls(kind=value.get("kind"), epsilon=value.get("epsilon"), delta=value.get("delta", 0.0),
                   rho=value.get("rho"))


@dataclass(frozen=True, kw_only=True)
class PrivacyGuarantee:
    """A release's guarantee: `loss` holds between any two datasets that differ by one step of `unit`.

    `how` says in a few words how the loss was obtained (the calibration, a group-privacy step)."""

    unit: PrivacyUnit
    loss: PrivacyLoss
    how: str = field(default="", compare=False)

    def describe(self) -> str:
        """The guarantee in words: the loss, then the unit.

        Returns
        -------
        str
            E.g. "epsilon=1 (pure) for one record added or removed".
        """
        return f"{self.loss.describe()} for {self.unit.describe()}"

    def as_dict(self) -> dict:
        """The guarantee as a JSON-ready mapping (read back by `from_dict`).

        Returns
        -------
        dict
            ``unit`` and ``loss`` (each a mapping) and ``how``.
        """
        return {"unit": self.unit.as_dict(), "loss": self.loss.as_dict(), "how": self.how}

    @classmethod
    def from_dict(cls, value) -> "PrivacyGuarantee":
        if not isinstance(value, dict):
            raise TabreleaseError(f"a privacy guarantee is a mapping with a unit and a loss, not {value!r}")
        return cls(unit=PrivacyUnit.from_dict(value.get("unit")), loss=PrivacyLoss.from_dict(value.get("loss")),
                   how=str(value.get("how", "")))


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def group_steps(release: PrivacyUnit, budget: PrivacyUnit) -> int | None:
    """How many steps of the release's unit make one step of the budget's unit: 1 (it covers it as it is), 2
    (group privacy), or None (the release has no guarantee under the budget's unit).

    Parameters
    ----------
    release : PrivacyUnit
        The unit the release's guarantee is stated under.
    budget : PrivacyUnit
        The unit of the budget it would be charged to.

    Returns
    -------
    int or None
        1, 2, or None, by the rules in this module's table.
    """
    if budget.kind == ADD_REMOVE:
        return 1 if release.kind == ADD_REMOVE else None
    if budget.kind == LOCAL:
        return 1 if release.kind == LOCAL else None
    if release.kind == ADD_REMOVE:
        return 2
    if release.kind in (REPLACE, LOCAL):
        return 1
    # A sensitive-attribute release: only a budget protecting some of the same attributes.
    if budget.kind == SENSITIVE and set(budget.attributes) <= set(release.attributes):
        return 1
    return None


def group_loss(loss: PrivacyLoss, steps: int) -> PrivacyLoss:
    """The loss between datasets `steps` steps apart (group privacy, `accounting`): pure k epsilon; approximate
    (2 epsilon, (1 + e^epsilon) delta) for two steps; zCDP k^2 rho, with the group bound of its (epsilon, delta).

    Parameters
    ----------
    loss : PrivacyLoss
        The loss between neighbours (one step).
    steps : int
        The number of steps apart (1 returns `loss` itself).

    Returns
    -------
    PrivacyLoss
        The loss of the same kind between datasets `steps` steps apart.

    Raises
    ------
    GuaranteeMismatch
        If the group delta reaches 1 (no guarantee).
    """
    from .accounting import group_approx, group_pure, group_rho

    if steps == 1:
        return loss
    if loss.kind == PURE:
        return PrivacyLoss(kind=PURE, epsilon=group_pure(loss.epsilon, steps))
    epsilon, delta = group_approx(loss.epsilon, loss.delta, steps)
    if delta >= 1:
        raise GuaranteeMismatch(f"group privacy of (epsilon={loss.epsilon:g}, delta={loss.delta:g}) gives a delta "
                                "of 1 or more: no guarantee")
    if loss.kind == APPROXIMATE:
        return PrivacyLoss(kind=APPROXIMATE, epsilon=epsilon, delta=delta)
    return PrivacyLoss(kind=ZCDP, epsilon=epsilon, delta=delta, rho=group_rho(float(loss.rho), steps))


def under_unit(guarantee: PrivacyGuarantee, unit: PrivacyUnit) -> PrivacyLoss:
    """The loss `guarantee` gives under `unit`, by the rules in this module's table; refused with the reason
    where it gives none.

    Parameters
    ----------
    guarantee : PrivacyGuarantee
        The release's guarantee.
    unit : PrivacyUnit
        The unit to read it under (a budget's).

    Returns
    -------
    PrivacyLoss
        The guarantee's loss, through group privacy where the units differ.

    Raises
    ------
    GuaranteeMismatch
        If the guarantee says nothing under `unit` (the message says why).
    """
    steps = group_steps(guarantee.unit, unit)
    if steps is None:
        if guarantee.unit.kind == SENSITIVE:
            why = ("releases the coefficients of the attributes it does not protect exactly, so it protects "
                   f"{', '.join(guarantee.unit.attributes)} only")
        elif unit.kind == ADD_REMOVE and guarantee.unit.n_public:
            why = "publishes n exactly"
        else:
            why = "has no guarantee under that unit"
        raise GuaranteeMismatch(f"this release ({guarantee.unit.label()}) {why}: it has no guarantee for "
                                f"{unit.describe()}, the unit of the budget")
    return group_loss(guarantee.loss, steps)


def cost_under_budget(loss: PrivacyLoss, budget_kind: str) -> tuple[float, float]:
    """What a loss (already under the budget's unit) spends of a budget: (epsilon, delta) for an approximate
    budget, (rho, 0) for a zCDP one; refused for an approximate loss under a rho budget.

    Parameters
    ----------
    loss : PrivacyLoss
        The loss, already read under the budget's unit (`under_unit`).
    budget_kind : str
        "zcdp" for a rho budget; any other kind is an (epsilon, delta) budget.

    Returns
    -------
    tuple of float
        (epsilon, delta), or (rho, 0.0) for a zCDP budget (a pure loss costs epsilon^2 / 2).

    Raises
    ------
    GuaranteeMismatch
        If the budget is zCDP and the loss is approximate (not zCDP).
    """
    if budget_kind == ZCDP:
        rho = loss.zcdp_rho
        if rho is None:
            raise GuaranteeMismatch(f"this release's loss {loss.describe()} is not zCDP, so it cannot be charged "
                                    "to a rho budget")
        return rho, 0.0
    return loss.epsilon, loss.delta
