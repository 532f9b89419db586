"""The contract every mechanism keeps, as checks anyone can run on their own (scikit-learn's `check_estimator` and
`parametrize_with_checks` are the model).

`mechanism_checks(mechanism)` yields `(name, check)` pairs; each `check(mechanism)` raises AssertionError with a
plain sentence when the mechanism breaks the contract. `parametrize_with_checks(mechanisms)` turns them into one
pytest parametrization, so a third-party package tests its mechanism with two lines::

    from tabrelease.testing import parametrize_with_checks

    @parametrize_with_checks([MyMechanism()])
    def test_my_mechanism(mechanism, check):
        check(mechanism)

What is checked, on a small table (shape (2, 3, 2), or the mechanism's `contract_shape`; margins AB and BC; the
mechanism's `contract_options` if it needs some):

* the plan: made through `plan_release`, it is for the shape and margins asked, carries the mechanism object, and
  survives pickling (a sweep sends it to other processes), measuring the same after the round trip;
* noise: the privacy step goes through the noise source only (with no noise, two runs agree; a seed replays a run);
* rescaling: `with_epsilon` changes the calibration's epsilon and nothing about the queries;
* the guarantee: a value whose loss is no more than asked (exact calibration), and which holds on every
  neighbouring pair of its own unit on the small table, by brute force over every record that can be added, removed
  or changed (Laplace: the summed L1 change over scale; Gaussian: the summed squared L2 change over 2 sigma^2 against
  the stated rho; blocks released exactly must not move);
* post-processing: the release made from the measurements has one released margin per margin, of its shape.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from itertools import product

import numpy as np

from .noise import NoNoise, SimulationNoise
from .privacy import ADD_REMOVE, LOCAL, PURE, REPLACE, SENSITIVE, ZCDP

SHAPE = (2, 3, 2)
MARGINS = ((0, 1), (1, 2))
EPSILON = 0.7
DELTA = 1e-6
REL = 1e-9  # floating-point slack on a loss


def contract_plan(mechanism, epsilon: float = EPSILON):
    """The plan the checks use: the small table, the mechanism's own options for the contract
    (`contract_options`), delta where it needs one, and the sensitive-attribute unit (of A) where it protects
    attributes.

    Parameters
    ----------
    mechanism : Mechanism
    epsilon : float

    Returns
    -------
    MechanismPlan
    """
    from .planner import plan_release
    from .spec import ReleaseSpec, loss_of, unit_of

    options = dict(getattr(mechanism, "contract_options", None) or {})
    unit = unit_of(REPLACE, sensitive=["A"]) if "sensitive" in mechanism.options else ADD_REMOVE
    shape = tuple(getattr(mechanism, "contract_shape", None) or SHAPE)
    spec = ReleaseSpec(loss=loss_of(epsilon, DELTA if mechanism.needs_delta else None), unit=unit,
                       mechanism=mechanism, options=options)
    return plan_release(shape, [list(g) for g in MARGINS], spec)


def _table(shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, 12, size=shape).astype(float)


def check_plan_is_for_what_was_asked(mechanism) -> None:
    """The plan is for the shape and margins asked, names the mechanism, and carries the mechanism object.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism checked (planned on the contract's small table by `contract_plan`).

    Raises
    ------
    AssertionError
        The plan's shape, margins, mechanism name or object differ from what was asked.
    """
    plan = contract_plan(mechanism)
    shape = tuple(getattr(mechanism, "contract_shape", None) or SHAPE)
    assert plan.shape == shape, f"the plan is for shape {plan.shape}, not {shape}"
    assert set(map(tuple, plan.margins)) == set(MARGINS), f"the plan releases {plan.margins}, not {MARGINS}"
    assert plan.mechanism == mechanism.name, f"the plan names {plan.mechanism!r}, not {mechanism.name!r}"
    assert plan.implementation is mechanism, "the plan does not carry the mechanism object that made it"


def check_plan_survives_pickling(mechanism) -> None:
    """A plan pickled and unpickled (as a sweep sends it to other processes) still carries its mechanism and
    measures the same, without noise.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism checked (planned on the contract's small table by `contract_plan`).

    Raises
    ------
    AssertionError
        The round trip loses the mechanism or changes what the plan measures.
    """
    from .pipeline import measure

    plan = contract_plan(mechanism)
    again = pickle.loads(pickle.dumps(plan))
    assert again.implementation is not None and again.implementation.name == mechanism.name
    x = _table(plan.shape)
    a, b = measure(plan, x, NoNoise()), measure(again, x, NoNoise())
    assert len(a.blocks) == len(b.blocks)
    for u, v in zip(a.blocks, b.blocks):
        np.testing.assert_allclose(u.values, v.values, err_msg="a pickled plan measures differently")


def check_noise_comes_from_the_source(mechanism) -> None:
    """The privacy step draws only from the noise source: with no noise, or the same seed, two runs agree.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism checked (planned on the contract's small table by `contract_plan`).

    Raises
    ------
    AssertionError
        Two runs with the same noise source measure different blocks or values.
    """
    from .pipeline import measure

    plan = contract_plan(mechanism)
    x = _table(plan.shape)
    for a, b in ((measure(plan, x, NoNoise()), measure(plan, x, NoNoise())),
                 (measure(plan, x, SimulationNoise(11)), measure(plan, x, SimulationNoise(11)))):
        assert [u.variables for u in a.blocks] == [v.variables for v in b.blocks]
        for u, v in zip(a.blocks, b.blocks):
            np.testing.assert_array_equal(u.values, v.values, err_msg="the same noise source gave different answers")


def check_rescale_changes_only_the_noise(mechanism) -> None:
    """`with_epsilon` sets the calibration's epsilon and changes nothing about the queries.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism checked (planned on the contract's small table by `contract_plan`).

    Raises
    ------
    AssertionError
        The rescaled plan's epsilon is not the one asked, or its margins or shape changed.
    """
    from .mechanisms import with_epsilon

    plan = contract_plan(mechanism)
    other = with_epsilon(plan, 2 * EPSILON)
    assert other.calibration.epsilon == 2 * EPSILON, "with_epsilon did not set the calibration's epsilon"
    assert other.margins == plan.margins and other.shape == plan.shape, "with_epsilon changed the queries"


def check_guarantee_is_no_more_than_asked(mechanism) -> None:
    """The guarantee the mechanism states has no more epsilon (and delta) than asked, under exact calibration.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism checked (planned on the contract's small table by `contract_plan`).

    Raises
    ------
    AssertionError
        The stated epsilon or delta exceeds what was asked.
    """
    plan = contract_plan(mechanism)
    guarantee = mechanism.guarantee(plan, ("A", "B", "C"))
    assert guarantee.loss.epsilon <= EPSILON * (1 + REL), (
        f"the guarantee's epsilon {guarantee.loss.epsilon} is more than the {EPSILON} asked")
    if guarantee.loss.kind != PURE:
        assert guarantee.loss.delta <= DELTA * (1 + REL), f"the guarantee's delta {guarantee.loss.delta} > {DELTA}"


def _pairs(unit, x: np.ndarray, attributes: tuple[int, ...]):
    cells = list(product(*[range(k) for k in x.shape]))
    if unit == ADD_REMOVE:
        for c in cells:
            y = x.copy()
            y[c] += 1
            yield x, y
        return
    for c, d in product(cells, cells):
        if c == d or (unit == SENSITIVE and any(c[a] != d[a] for a in range(x.ndim) if a not in attributes)):
            continue
        y = x.copy()
        y[c] -= 1
        y[d] += 1
        yield x, y


def check_guarantee_holds_on_every_neighbouring_pair(mechanism) -> None:
    """Brute force over every pair of the guarantee's own unit: the loss the blocks' changes imply is at most the
    stated one. (Local guarantees are a channel property, checked by the mechanism's own tests; adaptive
    mechanisms, whose blocks differ between tables, say so with `adaptive = True` and are skipped here.)

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism checked (planned on the contract's small table by `contract_plan`).

    Raises
    ------
    AssertionError
        A neighbouring pair moves an exact block, or moves the noisy blocks by more loss than stated.
    """
    from .pipeline import measure

    plan = contract_plan(mechanism)
    guarantee = mechanism.guarantee(plan, ("A", "B", "C"))
    if guarantee.unit.kind == LOCAL or getattr(mechanism, "adaptive", lambda p: False)(plan):
        return
    attributes = tuple("ABC".index(a) for a in guarantee.unit.attributes)
    x = _table(plan.shape)
    worst_laplace = worst_rho = 0.0
    for a, b in _pairs(guarantee.unit.kind, x, attributes):
        ma, mb = measure(plan, a, NoNoise()), measure(plan, b, NoNoise())
        laplace = rho = 0.0
        for u, v in zip(ma.blocks, mb.blocks):
            change = np.asarray(v.values, float) - np.asarray(u.values, float)
            if u.distribution == "exact":
                assert np.allclose(change, 0, atol=1e-9), f"an exact block {u.variables} moves on a neighbouring pair"
            elif u.distribution == "laplace":
                laplace += np.abs(change).sum() / u.scale
            elif u.distribution == "gaussian":
                rho += (change ** 2).sum() / (2 * u.scale ** 2)
        worst_laplace, worst_rho = max(worst_laplace, laplace), max(worst_rho, rho)
    if guarantee.loss.kind == ZCDP:
        assert worst_rho <= guarantee.loss.rho * (1 + REL) + 1e-12, (
            f"a neighbouring pair moves the Gaussian blocks by rho {worst_rho:.6g} > the stated {guarantee.loss.rho}")
    elif worst_rho == 0:
        assert worst_laplace <= guarantee.loss.epsilon * (1 + REL) + 1e-12, (
            f"a neighbouring pair moves the Laplace blocks by {worst_laplace:.6g} > epsilon {guarantee.loss.epsilon}")


def check_release_has_one_margin_per_margin(mechanism) -> None:
    """The release made from the measurements has one finite released margin per margin, of the margin's shape.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism checked (planned on the contract's small table by `contract_plan`).

    Raises
    ------
    AssertionError
        A margin is missing, has another shape, or holds values that are not finite.
    """
    from .pipeline import run_plan

    plan = contract_plan(mechanism)
    release = run_plan(plan, _table(plan.shape), SimulationNoise(5))
    assert len(release.released_margins) == len(plan.margins), "not one released margin per margin"
    for g, values in zip(plan.margins, release.released_margins):
        expected = tuple(plan.shape[a] for a in g)
        assert np.asarray(values).shape == expected, f"the margin {g} is released with shape {np.shape(values)}"
        assert np.all(np.isfinite(values)), f"the margin {g} is released with values that are not finite"


CHECKS: tuple[Callable, ...] = (
    check_plan_is_for_what_was_asked, check_plan_survives_pickling, check_noise_comes_from_the_source,
    check_rescale_changes_only_the_noise, check_guarantee_is_no_more_than_asked,
    check_guarantee_holds_on_every_neighbouring_pair, check_release_has_one_margin_per_margin,
)


def mechanism_checks(mechanism) -> Iterator[tuple[str, Callable]]:
    """Every check of the contract, as (name, check) pairs; run one as `check(mechanism)`.

    Parameters
    ----------
    mechanism : Mechanism

    Returns
    -------
    iterator of (str, callable)
    """
    for check in CHECKS:
        yield check.__name__, check


def parametrize_with_checks(mechanisms: Iterable):
    """A pytest decorator running every check on every mechanism given (arguments `mechanism` and `check`).

    Parameters
    ----------
    mechanisms : iterable of Mechanism

    Returns
    -------
    decorator
    """
    import pytest

    cases = [(m, check) for m in mechanisms for _, check in mechanism_checks(m)]
    ids = [f"{m.name}-{check.__name__}" for m, check in cases]
    return pytest.mark.parametrize("mechanism, check", cases, ids=ids)


def plan_at(shape, margins, epsilon: float, **settings):
    """A plan from keyword settings, for tests and benchmarks that plan many shapes at once.

    Parameters
    ----------
    shape : sequence of int
    margins : sequence of tuple of int
    epsilon : float
    **settings
        `ReleaseSpec`'s fields (`mechanism`, `calibration`, `options`, `estimator`, `rounding`), and `delta` and
        `neighbours` in place of its loss and unit; a `sensitive` option (axis numbers or letters) becomes the
        sensitive-attribute unit, and `nonneg_t` an option.

    Returns
    -------
    MechanismPlan
    """
    from .planner import plan_release
    from .spec import SIMULATION, ReleaseSpec, loss_of, unit_of

    delta = settings.pop("delta", None)
    neighbours = settings.pop("neighbours", ADD_REMOVE)
    options = dict(settings.pop("options", None) or {})
    if settings.get("nonneg_t") is not None:
        options["nonneg_t"] = settings.pop("nonneg_t")
    settings.pop("nonneg_t", None)
    sensitive = options.pop("sensitive", None)
    if sensitive is not None:
        letters = [chr(ord("A") + a) if isinstance(a, (int, np.integer)) else str(a) for a in
                   ((sensitive,) if isinstance(sensitive, (int, np.integer)) else sensitive)]
        unit = unit_of(neighbours, sensitive=letters)
    else:
        unit = neighbours
    spec = ReleaseSpec(loss=loss_of(epsilon, delta), unit=unit, options=options, mode=SIMULATION, **settings)
    return plan_release(shape, margins, spec)
