"""The privacy guarantee every mechanism states, checked against a brute-force oracle.

For every registered mechanism (and its variants: public total, Gaussian under delta, the copula's advanced
composition, one sensitive attribute, RAP's adaptive rounds, local randomized response), under each neighbour
relation it accepts, the plan's `guarantee` is read under every unit the ledger would charge it to
(`privacy.group_steps` not None: the guarantee's own unit, and group privacy from add-remove to replace and to the
sensitive-attribute units) and checked on every neighbouring pair of that unit, on a small table:

* add-remove: x against x + e_i, for every cell i;
* replace: x + e_i against x + e_j, for all i != j;
* sensitive attributes S: the replace pairs whose cells differ only in the axes of S.

Both tables of a pair are measured with `NoNoise` (the exact answers) and compared block by block. What a block's
change may be is computed here from its values and the scale it was drawn with, never from the mechanism's own
sensitivity code:

* blocks released exactly (distribution "exact"), and the number of randomized-response reports, never move;
* pure epsilon: sum over Laplace blocks of ||change||_1 / scale <= epsilon (the Laplace privacy loss);
* rho-zCDP: sum over Gaussian blocks of ||change||_2^2 / (2 sigma^2) <= rho; the stated (epsilon, delta) is
  checked against the exact privacy profile of that Gaussian release (Balle & Wang's analytic formula);
* the copula's approximate (epsilon, delta): every block moves by at most epsilon_0 = ||change||_1 / scale, and
  advanced composition (Dwork, Rothblum & Vadhan) of its k blocks at that epsilon_0 and delta is <= epsilon;
* randomized response (local): the channel P(report | cell), built from the plan's keep probability and read off
  `measure` on one-record tables, has max P(y|x) / P(y|x') <= e^epsilon;
* adaptive RAP (noisy-max selection, so the blocks of two tables need not be the same margins): its rho is the
  sum, computed here, of T K Gaussian measurements at sigma and T K Gumbel selections at the stated scale, with
  sensitivities found by brute force over the unit's pairs; its (epsilon, delta) is checked against Canonne, Kamath
  & Steinke's zCDP conversion.

The converse: for every unit a guarantee does not cover, a neighbouring pair of that unit is exhibited under
which an exact block (or the number of reports) changes, so the ledger is right to refuse it. A release with no
exact statistic at all (a replace-calibrated one whose every block is noised) has no such pair: its refusal of
add-remove is conservative, and the test says so rather than pretending otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from tabrelease.mechanisms import BUILT_IN, get_mechanism, mechanism_names
from tabrelease.testing import plan_at
from tabrelease.mechanisms.randomized_response import channel_matrix
from tabrelease.noise import NoNoise
from tabrelease.privacy import (ADD_REMOVE, APPROXIMATE, LOCAL, PURE, REPLACE, SENSITIVE, ZCDP, PrivacyUnit,
                                group_steps, under_unit)

SHAPE = (2, 3, 2)
MARGINS = ((0, 1), (1, 2))
BINARY = (2, 2, 2)
SIX_BINARY = (2,) * 6
EXACT, LAPLACE, GAUSSIAN, RR = "exact", "laplace", "gaussian", "randomized-response"
REL = 1e-9  # relative slack on a loss (floating point only)
EXACT_TOL = 1e-9  # an exact block "does not move": its values agree to this (coefficients are floats)


@dataclass(frozen=True)
class Case:
    id: str
    mechanism: str
    loss: str  # the kind of loss the variant exists to exercise
    neighbours: str = ADD_REMOVE
    delta: float | None = None
    options: tuple = ()
    shape: tuple = SHAPE
    margins: tuple = MARGINS
    epsilon: float = 1.0
    calibration: str = "exact"
    names: tuple = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "names", tuple(f"v{j}" for j in range(len(self.shape))))

    def plan(self):
        return _plan(self)


def _both(case_id, mechanism, loss, **kw):
    return [Case(f"{case_id}[{n}]", mechanism, loss, neighbours=n, **kw) for n in (ADD_REMOVE, REPLACE)]


CASES = [
    *_both("planned", "planned", PURE),
    *_both("planned-public-total", "planned", PURE, options=(("public_total", True),)),
    *_both("planned-gaussian", "planned", ZCDP, delta=1e-6),
    Case("planned-gaussian-public-total", "planned", ZCDP, delta=1e-6, options=(("public_total", True),)),
    *_both("fourier", "fourier", PURE, shape=BINARY),
    Case("fourier-paper[replace]", "fourier", PURE, neighbours=REPLACE, shape=BINARY, calibration="paper"),
    *_both("efron-stein", "efron-stein", PURE),
    *_both("efron-stein-paper", "efron-stein", PURE, calibration="paper"),
    *_both("gaussian", "gaussian", ZCDP, delta=1e-6),
    *_both("binary-encoding", "binary-encoding", PURE),
    *_both("cells", "cells", PURE),
    *_both("hdmm-marginals", "hdmm-marginals", PURE),
    *_both("margins", "margins", PURE),
    *_both("nonneg", "nonneg", PURE),
    *_both("gaussian-copula", "gaussian-copula", PURE),
    # Advanced composition gives each block less than epsilon / m' at a small delta: the pure split is kept.
    Case("gaussian-copula-small-delta", "gaussian-copula", PURE, delta=1e-6),
    *_both("gaussian-copula-delta", "gaussian-copula", APPROXIMATE, delta=0.2),
    *_both("copula-id", "copula-id", PURE),
    Case("copula-id-small-delta", "copula-id", PURE, delta=1e-6),
    *_both("copula-id-delta", "copula-id", APPROXIMATE, delta=0.1, shape=SIX_BINARY, margins=((0, 1),),
           epsilon=0.5),
    *_both("randomized-response", "randomized-response", PURE),
    Case("sensitive-attributes-v0", "sensitive-attributes", PURE, neighbours=REPLACE, options=(("sensitive", (0,)),)),
    Case("sensitive-attributes-v1", "sensitive-attributes", PURE, neighbours=REPLACE, options=(("sensitive", (1,)),)),
    Case("sensitive-attributes-binary-v2", "sensitive-attributes", PURE, neighbours=REPLACE, shape=BINARY,
         options=(("sensitive", (2,)),)),
    *_both("rap", "rap", ZCDP, delta=1e-6),
    *_both("rap-rounds-1", "rap", ZCDP, delta=1e-6, options=(("rounds", 1),)),
    *_both("rap-adaptive", "rap", ZCDP, delta=1e-6, options=(("rounds", 2),)),
]
IDS = [c.id for c in CASES]


def test_every_registered_mechanism_has_a_case():
    covered = {c.mechanism for c in CASES}
    registered = set(mechanism_names()) - {"auto"}
    assert set(BUILT_IN) <= registered
    assert registered <= covered, f"no guarantee contract case for {sorted(registered - covered)}"


# --- the oracle ---------------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _plan(case):
    return plan_at(case.shape, [list(g) for g in case.margins], case.epsilon, mechanism=case.mechanism,
                        neighbours=case.neighbours, delta=case.delta, calibration=case.calibration,
                        options=dict(case.options))


def base_table(shape):
    return np.random.default_rng(20240611).integers(0, 4, size=shape)


def tables(shape):
    """tables[0] = x; tables[1 + i] = x + e_i (cells i in C order)."""
    x = base_table(shape)
    out = [x]
    for i in range(x.size):
        y = x.copy().ravel()
        y[i] += 1
        out.append(y.reshape(shape))
    return out


def adaptive(plan):
    return plan.mechanism == "rap" and int(plan.parameters.get("rounds", 1)) > 1


@lru_cache(maxsize=None)
def measured(case):
    """The blocks `measure` gives (noise off) for every table of `tables` (adaptive RAP: for x only)."""
    plan, mech = _plan(case), get_mechanism(case.mechanism)
    chosen = tables(case.shape)[:1] if adaptive(plan) else tables(case.shape)
    return [mech.measure(plan, t, NoNoise()).blocks for t in chosen]


def unit_pairs(unit, case):
    """Neighbouring pairs of `unit`, as indices into `tables`."""
    shape = case.shape
    cells = list(np.ndindex(*shape))
    if unit.kind == ADD_REMOVE:
        return [(0, 1 + i) for i in range(len(cells))]
    if unit.kind in (REPLACE, LOCAL):
        return [(1 + i, 1 + j) for i, j in combinations(range(len(cells)), 2)]
    assert unit.kind == SENSITIVE
    axes = {case.names.index(a) for a in unit.attributes}
    return [(1 + i, 1 + j) for i, j in combinations(range(len(cells)), 2)
            if all(cells[i][a] == cells[j][a] for a in range(len(shape)) if a not in axes)]


def budget_units(case):
    """Every unit a budget may be declared for, on this table: add-remove, replace, each set of attributes."""
    k = len(case.shape)
    units = [PrivacyUnit(kind=ADD_REMOVE), PrivacyUnit(kind=REPLACE)]
    units += [PrivacyUnit(kind=SENSITIVE, attributes=tuple(case.names[a] for a in s))
              for r in range(1, k + 1) for s in combinations(range(k), r)]
    return units


@dataclass
class PairLoss:
    exact: float = 0.0  # largest change of a value released exactly (or of the number of reports)
    laplace: float = 0.0  # sum over Laplace blocks of ||change||_1 / scale
    block_laplace: float = 0.0  # largest single Laplace block's ||change||_1 / scale
    gaussian: float = 0.0  # sum over Gaussian blocks of ||change||_2^2 / (2 sigma^2)


def pair_loss(a_blocks, b_blocks) -> PairLoss:
    assert ([(a.query, tuple(a.variables), a.distribution, a.scale) for a in a_blocks]
            == [(b.query, tuple(b.variables), b.distribution, b.scale) for b in b_blocks]), \
        "the blocks measured, or their noise, depend on the counts"
    out = PairLoss()
    for a, b in zip(a_blocks, b_blocks):
        change = np.asarray(b.values, float) - np.asarray(a.values, float)
        if a.distribution == EXACT:
            out.exact = max(out.exact, float(np.abs(change).max()))
        elif a.distribution == LAPLACE:
            assert a.scale > 0
            moved = float(np.abs(change).sum()) / a.scale
            out.laplace += moved
            out.block_laplace = max(out.block_laplace, moved)
        elif a.distribution == GAUSSIAN:
            assert a.scale > 0
            out.gaussian += float((change ** 2).sum()) / (2.0 * a.scale ** 2)
        elif a.distribution == RR:
            out.exact = max(out.exact, abs(float(b.values.sum()) - float(a.values.sum())))  # n is published
        else:
            raise AssertionError(f"no oracle for a block of distribution {a.distribution!r}")
    return out


def worst(case, pairs) -> PairLoss:
    blocks = measured(case)
    losses = [pair_loss(blocks[i], blocks[j]) for i, j in pairs]
    return PairLoss(*(max(getattr(p, f) for p in losses) for f in ("exact", "laplace", "block_laplace", "gaussian")))


# --- reference formulas, written out here ---------------------------------------------------------------------------
def analytic_gaussian_delta(epsilon, mu):
    """The exact delta(epsilon) of a Gaussian mechanism whose privacy loss is N(mu^2 / 2, mu^2) (Balle & Wang 2018)."""
    if mu == 0:
        return 0.0
    return float(norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu))


def zcdp_delta(epsilon, rho):
    """Canonne, Kamath & Steinke (2020), Corollary 13: rho-zCDP gives (epsilon, delta) with
    delta = inf over alpha > 1 of exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) * (1 - 1/alpha)^alpha."""
    def log_delta(t):
        a = 1.0 + math.exp(t)
        return (a - 1) * (a * rho - epsilon) - math.log(a - 1) + a * math.log1p(-1 / a)
    best = minimize_scalar(log_delta, bounds=(-20, 12), method="bounded", options={"xatol": 1e-12})
    return math.exp(min(best.fun, 0.0))


def advanced_composition(epsilon_0, k, delta):
    """Dwork, Rothblum & Vadhan (2010): k epsilon_0-DP mechanisms compose to (epsilon, delta) with
    epsilon = sqrt(2 k ln(1/delta)) epsilon_0 + k epsilon_0 (e^epsilon_0 - 1)."""
    return math.sqrt(2 * k * math.log(1 / delta)) * epsilon_0 + k * epsilon_0 * math.expm1(epsilon_0)


def margin_by_hand(table, g):
    return np.asarray(table).sum(axis=tuple(j for j in range(np.ndim(table)) if j not in g))


# --- the contract ----------------------------------------------------------------------------------------------------
def covered_units(guarantee, case):
    units = [guarantee.unit] + [u for u in budget_units(case) if u != guarantee.unit]
    return [(u, group_steps(guarantee.unit, u)) for u in units if group_steps(guarantee.unit, u) is not None]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_stated_loss_holds_on_every_pair_of_every_unit_it_covers(case):
    plan, mech = case.plan(), get_mechanism(case.mechanism)
    guarantee = mech.guarantee(plan, case.names)
    base = guarantee.loss
    assert base.kind == case.loss, f"{case.id}: the variant does not exercise a {case.loss} loss"
    units = covered_units(guarantee, case)
    assert units[0] == (guarantee.unit, 1)
    for unit, steps in units:
        loss = under_unit(guarantee, unit)
        pairs = unit_pairs(unit, case)
        assert pairs, unit
        where = f"{case.id} under {unit.label()} ({steps} step(s))"

        # Group privacy, by hand: k steps of pure epsilon are k epsilon; of rho-zCDP k^2 rho; (epsilon, delta) two
        # steps are (2 epsilon, (1 + e^epsilon) delta).
        if steps == 2:
            assert loss.epsilon == pytest.approx(2 * base.epsilon, rel=1e-12), where
            assert loss.delta == pytest.approx((1 + math.exp(base.epsilon)) * base.delta, rel=1e-12, abs=0), where
            if base.kind == ZCDP:
                assert loss.rho == pytest.approx(4 * base.rho, rel=1e-12), where
        else:
            assert loss == base, where

        if guarantee.unit.kind == LOCAL:
            check_local(case, plan, loss, pairs, where)
        elif adaptive(plan):
            check_adaptive_rap(case, plan, loss, pairs, steps, where)
        else:
            check_blocks(case, plan, loss, pairs, steps, where, own=unit == guarantee.unit)


def check_blocks(case, plan, loss, pairs, steps, where, own):
    w = worst(case, pairs)
    blocks = measured(case)[0]
    kinds = {b.distribution for b in blocks}
    assert w.exact <= EXACT_TOL, f"{where}: a block released exactly moves by {w.exact}"
    if loss.kind == PURE:
        assert kinds <= {LAPLACE, EXACT}, f"{where}: a pure loss with {kinds} blocks"
        assert w.laplace <= loss.epsilon * (1 + REL), f"{where}: Laplace loss {w.laplace} > epsilon {loss.epsilon}"
    elif loss.kind == ZCDP:
        assert kinds <= {GAUSSIAN, EXACT}, f"{where}: a zCDP loss with {kinds} blocks"
        assert w.gaussian <= loss.rho * (1 + REL), f"{where}: Gaussian loss {w.gaussian} > rho {loss.rho}"
        # The whole release is one Gaussian mechanism: its privacy loss is N(mu^2/2, mu^2), mu^2 = 2 * the sum above.
        exact_delta = analytic_gaussian_delta(loss.epsilon, math.sqrt(2 * w.gaussian))
        assert exact_delta <= loss.delta * (1 + 1e-6), f"{where}: delta({loss.epsilon}) is {exact_delta} > {loss.delta}"
    else:
        assert loss.kind == APPROXIMATE and kinds <= {LAPLACE, EXACT}, (where, kinds)
        if steps == 1:  # the two-step loss is group privacy of this one (checked by hand above)
            k = sum(b.distribution == LAPLACE for b in blocks)
            composed = advanced_composition(w.block_laplace, k, loss.delta)
            assert composed <= loss.epsilon * (1 + REL), (
                f"{where}: {k} blocks of epsilon_0 = {w.block_laplace} compose to {composed} > {loss.epsilon}")
            if own:  # ...a better deal than the pure split it replaces (else the pure loss would be stated)
                assert w.laplace > loss.epsilon, where


def check_local(case, plan, loss, pairs, where):
    k = int(np.prod(case.shape))
    keep = plan.calibration.scale
    by_hand = np.where(np.eye(k, dtype=bool), keep, (1 - keep) / (k - 1))
    mech = get_mechanism(case.mechanism)
    read = np.array([mech.measure(plan, np.eye(k, dtype=np.int64)[c].reshape(case.shape), NoNoise()).blocks[0].values
                     for c in range(k)])  # row c: the expected reports of one record in cell c, P(y | c)
    np.testing.assert_allclose(read, by_hand, rtol=1e-12, atol=0)
    np.testing.assert_allclose(channel_matrix(k, plan.calibration.epsilon), by_hand, rtol=1e-12)
    np.testing.assert_allclose(by_hand.sum(axis=1), 1.0)
    ratio = max(by_hand[:, y].max() / by_hand[:, y].min() for y in range(k))
    assert ratio <= math.exp(loss.epsilon) * (1 + REL), f"{where}: channel ratio {ratio} > e^{loss.epsilon}"
    w = worst(case, pairs)
    assert w.exact <= EXACT_TOL, f"{where}: the number of reports changes by {w.exact}"


def check_adaptive_rap(case, plan, loss, pairs, steps, where):
    p = plan.parameters
    rounds, per_round = int(p["rounds"]), int(p["queries_per_round"])
    blocks = measured(case)[0]
    assert len(blocks) == rounds * per_round
    assert {b.distribution for b in blocks} == {GAUSSIAN}
    sigma = plan.calibration.scale
    assert all(b.scale == sigma for b in blocks)
    gumbel = float(p["selection_scale"])
    ts = tables(case.shape)
    # Brute-force sensitivities over this unit's pairs: a margin's cells in L2 (a measurement), and in L1 (a bound on
    # the change of a selection score ||m(D) - c||_1 for a c fixed by earlier outputs, reached when c is far off).
    l2 = l1 = 0.0
    for i, j in pairs:
        for g in plan.margins:
            change = (margin_by_hand(ts[j], g) - margin_by_hand(ts[i], g)).ravel()
            l2, l1 = max(l2, float(np.linalg.norm(change))), max(l1, float(np.abs(change).sum()))
    measuring = rounds * per_round * l2 ** 2 / (2 * sigma ** 2)
    # Report noisy max with Gumbel scale b and score sensitivity D is (2 D / b)-bounded range, so (2 D / b)^2 / 8 -zCDP
    # (Cesar & Rogers 2021).
    selecting = rounds * per_round * (2 * l1 / gumbel) ** 2 / 8
    assert measuring + selecting <= loss.rho * (1 + REL), f"{where}: rho {loss.rho} < {measuring} + {selecting}"
    if steps == 1:
        assert p["rho_measurements"] == pytest.approx(measuring, rel=1e-6), where
        assert p["rho_selections"] == pytest.approx(selecting, rel=1e-6), where
        assert loss.rho == pytest.approx(measuring + selecting, rel=1e-6), where
        assert zcdp_delta(loss.epsilon, loss.rho) <= loss.delta * (1 + 1e-6), where


@pytest.mark.parametrize("case", [c for c in CASES if c.calibration == "exact"], ids=lambda c: c.id)
def test_an_exact_calibration_spends_what_was_asked(case):
    """Soundness aside, the stated loss is the one asked for: epsilon (and delta), or twice epsilon (and (1 + e^epsilon)
    delta) where n is published exactly under add-remove noise (group privacy, the unit then being replace)."""
    guarantee = get_mechanism(case.mechanism).guarantee(case.plan(), case.names)
    public_n = dict(case.options).get("public_total") and case.neighbours == ADD_REMOVE
    epsilon = case.epsilon * (2 if public_n else 1)
    assert guarantee.loss.epsilon == pytest.approx(epsilon, rel=1e-9)
    if guarantee.loss.kind != PURE:
        asked = case.delta * ((1 + math.exp(case.epsilon)) if public_n else 1)
        assert guarantee.loss.delta == pytest.approx(asked, rel=1e-9, abs=0)


# --- the converse ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_unit_the_guarantee_refuses_has_a_pair_that_moves_an_exact_statistic(case):
    plan, mech = case.plan(), get_mechanism(case.mechanism)
    guarantee = mech.guarantee(plan, case.names)
    refused = [u for u in budget_units(case) if group_steps(guarantee.unit, u) is None]
    if guarantee.unit.kind == ADD_REMOVE:
        assert refused == []  # add-remove is read under every unit (group privacy)
        return
    assert PrivacyUnit(kind=ADD_REMOVE) in refused  # n public (or the insensitive attributes): never add-remove
    blocks = measured(case)[0]
    publishes_exactly = any(b.distribution in (EXACT, RR) for b in blocks)
    for unit in refused:
        if not publishes_exactly:
            # Every block noised: no pair moves anything exact. The refusal (a replace-calibrated release read under
            # add-remove) is conservative, not proven; the only refusal such a release meets is that one.
            assert guarantee.unit.kind == REPLACE and unit.kind == ADD_REMOVE, (case.id, unit)
            continue
        witness = next((pair for pair in unit_pairs(unit, case)
                        if worst(case, [pair]).exact > 1e-6), None)
        assert witness is not None, f"{case.id}: no {unit.label()} pair moves an exact statistic, yet it is refused"


def test_conservative_refusals_are_those_of_fully_noised_replace_releases():
    """Which releases' refusal of add-remove cannot be witnessed (no exact statistic): listed, so a change shows."""
    found = set()
    for case in CASES:
        guarantee = get_mechanism(case.mechanism).guarantee(case.plan(), case.names)
        if guarantee.unit.kind == REPLACE and not any(b.distribution in (EXACT, RR) for b in measured(case)[0]):
            found.add(case.mechanism)
    assert found == {"fourier", "efron-stein", "gaussian", "binary-encoding", "cells", "margins", "nonneg",
                     "gaussian-copula", "copula-id", "rap"}


@pytest.mark.parametrize("delta", [None, 1e-6])
@pytest.mark.parametrize("public_total", [False, True])
def test_the_privacy_statement_states_the_guarantee(delta, public_total):
    """The one-line statement written to release.json, the workbook and the terminal states the release's own
    guarantee: with n published exactly it had said "epsilon=1 ... for add-remove neighbours", which no such release
    has (its guarantee is epsilon 2 under replace; a new user's trial). A Gaussian loss's rho and (epsilon, delta)
    both hold ("and"; it had said "so", though the analytic Gaussian's epsilon is tighter than rho's conversion)."""
    from tabrelease.accounting import zcdp_to_approx_dp

    options = {"public_total": True} if public_total else {}
    plan = plan_at((2, 3, 2), [(0, 1), (1, 2)], 1.0, delta=delta, options=options)
    mechanism = get_mechanism(plan.mechanism)
    guarantee, statement = mechanism.guarantee(plan), mechanism.privacy_statement(plan)
    assert guarantee.unit.kind == (REPLACE if public_total else ADD_REMOVE)
    assert f"epsilon={guarantee.loss.epsilon:g}" in statement
    assert (f"for {ADD_REMOVE} neighbours" in statement) == (not public_total)
    assert ("for replace neighbours only: n is published exactly" in statement) == public_total
    if public_total:
        assert guarantee.loss.epsilon == pytest.approx(2.0) and statement.startswith(guarantee.loss.describe())
    if delta is not None:
        described = guarantee.loss.describe()
        assert "-zCDP and (epsilon=" in described and ", so " not in described
        assert zcdp_to_approx_dp(guarantee.loss.rho, guarantee.loss.delta) > guarantee.loss.epsilon
