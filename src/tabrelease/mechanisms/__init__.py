"""Release mechanisms: one small module each, behind one protocol (`Mechanism`), in a registry.

| name             | measures                                          | default estimator, rounding     |
|------------------|---------------------------------------------------|---------------------------------|
| planned          | margins or residual blocks, scales planned per    | least-squares, controlled       |
|                  | block (Laplace; Gaussian with delta)              | (the default of `release`)      |
| fourier          | Fourier coefficients of the closure (binary)      | linf-lp, nearest (Table 1)      |
| efron-stein      | Efron-Stein components of the closure             | linf-lp, nearest (Table 2)      |
| gaussian         | the same coefficients, Gaussian noise, (eps, d)   | linf-lp, nearest (DMT s.5)      |
| binary-encoding  | Fourier coefficients of a bit encoding            | linf-lp with structural zeros   |
| cells            | every cell of the full table                      | as-measured, nearest            |
| margins          | every cell of each released margin independently | as-measured, nearest            |
| nonneg           | coefficients; the constant term lifted            | shifted-synthesis, none         |
| gaussian-copula  | dummy-coded one-way and pairwise counts (Asghar   | copula-synthesis (n synthetic   |
|                  | et al.'s DP Gaussian copula)                      | records, their margins)         |
| copula-id        | dummy-coded one-way counts (the paper's cop-ID)   | copula-synthesis, independent   |
| randomized-      | every record's cell by k-ary randomized response  | unbiased, least squares with n  |
| response         | (local DP; n public)                              | pinned, controlled              |
| sensitive-       | coefficients of sets with a sensitive attribute   | linf-lp, nearest (DMT s.5;      |
| attributes       | noised, the others exact                          | weaker guarantee)               |

`register(mechanism)` adds one; `planner.plan_release` and `with_epsilon` dispatch through the registry,
and nothing outside this package branches on a mechanism's name. A mechanism's plan names its default estimator
and rounding; `tabrelease.planner` (the pipeline layer) resolves the estimator's name, so that no mechanism
imports an estimator and no estimator imports a mechanism.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace as _replace

from ..bases import EFRON_STEIN, FOURIER
from ..errors import TabreleaseError
from ._base import REGISTRY, Mechanism, MechanismPlan, check_margins_fit
from .binary_encoding import BinaryEncoding, BinaryEncodingMechanism, binary_encoding
from .cells import Cells
from .copula_id import CopulaID
from .efron_stein import EfronStein
from .fourier import Fourier
from .gaussian import Gaussian
from .gaussian_copula import GaussianCopula
from .margins import Margins
from .nonneg import DEFAULT_NONNEG_T, NonNeg, nonneg_shift
from .hdmm_marginals import HDMMMarginals
from .planned import Planned
from .randomized_response import RandomizedResponse
from .rap import RAP
from .sensitive_attributes import SensitiveAttributes

AUTO = "auto"
DEFAULT = "planned"  # what `release` uses unless told otherwise; 'auto' is the paper's choice
_REGISTRY = REGISTRY  # the registry's dict lives beside the plan (mechanisms/_base.py)


def register(mechanism: Mechanism) -> Mechanism:
    """Add a mechanism (an instance of a `Mechanism` subclass) under a name not yet taken; returns it.

    Parameters
    ----------
    mechanism : Mechanism
        The instance to register under its `name`.

    Returns
    -------
    Mechanism
        `mechanism` itself.

    Raises
    ------
    TabreleaseError
        If it is not a `Mechanism` instance, has no name or the name 'auto', or its name is taken.
    """
    if not isinstance(mechanism, Mechanism) or not mechanism.name or mechanism.name == AUTO:
        raise TabreleaseError("a mechanism is a Mechanism instance with a name other than 'auto'")
    if mechanism.name in _REGISTRY:
        raise TabreleaseError(f"a mechanism named {mechanism.name!r} is registered already; choose another name")
    _REGISTRY[mechanism.name] = mechanism
    return mechanism


def unregister(name: str) -> None:
    """Remove a mechanism that was registered here (the built-in ones stay).

    Parameters
    ----------
    name : str
        The mechanism's name (an unknown name is ignored).

    Raises
    ------
    TabreleaseError
        If `name` is a built-in mechanism's.
    """
    if name in BUILT_IN:
        raise TabreleaseError(f"{name!r} is a built-in mechanism and cannot be removed")
    _REGISTRY.pop(name, None)


for _mechanism in (Planned(), Fourier(), EfronStein(), Gaussian(), BinaryEncodingMechanism(), Cells(), Margins(),
                   NonNeg(), GaussianCopula(), CopulaID(), RandomizedResponse(), SensitiveAttributes(), RAP(), HDMMMarginals()):
    register(_mechanism)

# The built-in mechanisms, 'auto' first (what the command line offers).
BUILT_IN = tuple(_REGISTRY)
MECHANISMS = (AUTO,) + BUILT_IN


# Third-party mechanisms are found through this entry-point group: a package declares, e.g. in its pyproject.toml,
# [project.entry-points."tabrelease.mechanisms"] my-mechanism = "my_package.module:MyMechanism" (a Mechanism
# subclass or instance). They are loaded on first need, in every process (a sweep's workers too).
ENTRY_POINT_GROUP = "tabrelease.mechanisms"
_entry_points_loaded = False


def load_entry_points() -> None:
    """Register the mechanisms installed packages declare in the `tabrelease.mechanisms` entry-point group (once).

    A broken or clashing entry point is refused with its name, not skipped in silence."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
        except Exception as exc:
            raise TabreleaseError(f"the installed mechanism {point.name!r} ({point.value}) cannot be loaded: "
                                  f"{type(exc).__name__}") from None
        if point.name in _REGISTRY:
            if type(_REGISTRY[point.name]).__module__ == point.value.split(":")[0].strip():
                continue  # its module registered it when imported
            raise TabreleaseError(f"the installed mechanism {point.value} takes the name {point.name!r}, which "
                                  "another mechanism has")
        mechanism = loaded() if isinstance(loaded, type) else loaded
        if getattr(mechanism, "name", None) != point.name:
            raise TabreleaseError(f"the installed mechanism {point.value} is named {getattr(mechanism, 'name', None)!r},"
                                  f" not {point.name!r} as its entry point says")
        register(mechanism)


def mechanism_names() -> tuple[str, ...]:
    """'auto' and every registered mechanism: built-in, installed (entry points) or registered in this process.

    Returns
    -------
    tuple of str
        'auto' first, then the registered names in registration order.
    """
    load_entry_points()
    return (AUTO,) + tuple(_REGISTRY)


def get_mechanism(name) -> Mechanism:
    """The registered mechanism of this name (a Mechanism given is returned as it is).

    Parameters
    ----------
    name : str or Mechanism
        A registered name (installed entry points are loaded if it is not found), or a mechanism.

    Returns
    -------
    Mechanism

    Raises
    ------
    TabreleaseError
        If no mechanism of that name is registered or installed.
    """
    if isinstance(name, Mechanism):
        return name
    if name not in _REGISTRY:
        load_entry_points()
    if name not in _REGISTRY:
        raise TabreleaseError(f"unknown mechanism {name!r}; choose one of {', '.join(mechanism_names())}")
    return _REGISTRY[name]


def mechanism_of(plan: MechanismPlan) -> Mechanism:
    """The mechanism that made `plan`: the object it carries (so a plan works in any process), else the registry's.

    Parameters
    ----------
    plan : MechanismPlan

    Returns
    -------
    Mechanism

    Raises
    ------
    TabreleaseError
        If the plan carries no mechanism and its name is not registered.
    """
    return plan.implementation if plan.implementation is not None else get_mechanism(plan.mechanism)


def resolve_mechanism(mechanism, shape: Sequence[int]):
    """'auto' is Fourier for all-binary tables and Efron-Stein otherwise (the paper's choice); a Mechanism object is
    itself.

    Parameters
    ----------
    mechanism : str or Mechanism
        'auto', a registered mechanism's name, or a mechanism.
    shape : sequence of int
        The table's levels per variable.

    Returns
    -------
    str or Mechanism
        The mechanism's name ("fourier" or "efron-stein" for 'auto'), or the mechanism object given.

    Raises
    ------
    TabreleaseError
        If the name is not registered.
    """
    if isinstance(mechanism, Mechanism):
        return mechanism
    if mechanism == AUTO:
        return FOURIER if all(k == 2 for k in shape) else EFRON_STEIN
    get_mechanism(mechanism)
    return mechanism


def delta_takers() -> list[str]:
    """The registered mechanisms that take --delta (needed or accepted).

    Returns
    -------
    list of str
        Their names, in registration order.
    """
    return [n for n, m in _REGISTRY.items() if m.accepts_delta or m.needs_delta]


def with_epsilon(plan: MechanismPlan, epsilon: float) -> MechanismPlan:
    """The same plan at another epsilon: only the noise scale changes; queries and the estimator's LP are shared.

    Parameters
    ----------
    plan : MechanismPlan
        A plan made by a registered mechanism (or carrying its mechanism).
    epsilon : float
        The new epsilon.

    Returns
    -------
    MechanismPlan
        The mechanism's `rescale` of the plan, carrying the mechanism.

    Raises
    ------
    TabreleaseError
        If epsilon is not positive and finite (or the mechanism refuses it).
    """
    mechanism = mechanism_of(plan)
    return _replace(mechanism.rescale(plan, epsilon), implementation=mechanism)


__all__ = [
    "AUTO", "DEFAULT", "delta_takers", "BinaryEncoding", "DEFAULT_NONNEG_T", "MECHANISMS", "Mechanism", "MechanismPlan", "binary_encoding",
    "check_margins_fit", "get_mechanism", "mechanism_names", "mechanism_of", "nonneg_shift", "register", "resolve_mechanism",
    "unregister", "with_epsilon",
]
