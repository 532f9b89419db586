"""Limited-memory BFGS for the planner's small smooth searches, optionally within box bounds.

Why by hand: the planner's searches (a few dozen variables, a few thousand gradient steps in all) were run by
`scipy.optimize.minimize(method="L-BFGS-B")`, but importing `scipy.optimize` imports all of it (linear programming,
FFTs, special functions, spatial transforms), a large share of a command-line release's wall time, for searches
that take milliseconds each. This module is numpy alone.

The method is L-BFGS (Nocedal & Wright, Numerical Optimization, 2nd ed., Algorithm 7.4, the two-loop recursion)
with a line search for the strong Wolfe conditions (Algorithms 3.5 and 3.6; the extrapolation matters here: the
planner's log-weights travel far). Within bounds, a variable at a bound that the gradient pushes outward is held
there; the quasi-Newton step is taken in the subspace of the others (the correction pairs restricted to it), and
each iteration searches the segment from the point to that step projected onto the box. That is L-BFGS-B's first
step exactly (Byrd, Lu, Nocedal & Zhu, 1995: the whole steepest-descent step to the box's faces, which the
planner's searches rely on to leave even weights) and a simplification of its later ones (no generalised Cauchy
point). The stopping rules are those of scipy's L-BFGS-B defaults: the projected gradient's largest component at
most `gtol`, or a relative decrease of the value at most `ftol`. Deterministic: no clock, no randomness.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["MinimiseResult", "minimise"]

# scipy's L-BFGS-B defaults: factr 1e7 times the machine epsilon, pgtol 1e-5, 10 correction pairs, 20 line steps.
FTOL = 1e7 * np.finfo(float).eps
GTOL = 1e-5
MEMORY = 10
LINE_STEPS = 20
# L-BFGS-B's line search: sufficient decrease 1e-3, curvature 0.9, extrapolation by up to 4 times the step.
ARMIJO = 1e-3
CURVATURE = 0.9
EXTRAPOLATE = 4.0


@dataclass(frozen=True)
class MinimiseResult:
    """Where the search stopped: the point, its value, the iterations taken and whether a stopping rule was met
    (False: the iteration limit, or no step along the direction decreased the value)."""

    x: np.ndarray
    fun: float
    iterations: int
    converged: bool


def _direction(gradient: np.ndarray, steps: list, changes: list, free: np.ndarray | None = None) -> np.ndarray:
    """The two-loop recursion: minus the inverse-Hessian approximation times the gradient; with `free`, in the
    subspace of the free variables (the pairs restricted to it, those of positive curvature there), zero elsewhere.

    The recursion's vector updates are written through the pairs' inner products (S S', S Y', Y Y' and the
    gradient's with S and Y, one product each), so that its loops run over at most `memory` numbers: the planner's
    searches call this thousands of times on vectors of a few dozen entries, where each small numpy operation
    costs more than its arithmetic."""
    if free is not None:
        gradient = np.where(free, gradient, 0.0)
    if not steps:
        return -gradient
    S, Y = np.array(steps), np.array(changes)
    if free is not None:
        S, Y = S * free, Y * free
        keep = np.einsum("ij,ij->i", S, Y) > 1e-10 * np.einsum("ij,ij->i", Y, Y)
        S, Y = S[keep], Y[keep]
        if not len(S):
            return -gradient
    m = len(S)
    sy = (S @ Y.T).tolist()  # sy[i][j] = s_i . y_j
    sg = (S @ gradient).tolist()
    rho = [1.0 / sy[i][i] for i in range(m)]
    # First loop, newest pair first: alpha_i = rho_i s_i . q, q = g - sum over newer j of alpha_j y_j.
    alpha = [0.0] * m
    for i in range(m - 1, -1, -1):
        row, acc = sy[i], sg[i]
        for j in range(i + 1, m):
            acc -= row[j] * alpha[j]
        alpha[i] = rho[i] * acc
    q = gradient - np.array(alpha) @ Y
    last = Y[-1]
    gamma = sy[-1][-1] / float(last @ last)
    # r starts as gamma q; second loop, oldest first: beta_i = rho_i y_i . r, r += (alpha_i - beta_i) s_i.
    yq = (Y @ q).tolist()
    coefficients = [0.0] * m
    for i in range(m):
        acc = gamma * yq[i]
        for j in range(i):
            acc += sy[j][i] * coefficients[j]
        coefficients[i] = alpha[i] - rho[i] * acc
    return -(gamma * q + np.array(coefficients) @ S)


def _cubic_minimiser(a, fa, da, b, fb, db) -> float:
    """The minimiser of the cubic through (a, fa, da) and (b, fb, db) (Nocedal & Wright, eq. 3.59), or the
    midpoint where the cubic has none."""
    d1 = da + db - 3 * (fa - fb) / (a - b)
    radicand = d1 * d1 - da * db
    if radicand < 0:
        return 0.5 * (a + b)
    d2 = np.sign(b - a) * np.sqrt(radicand)
    denominator = db - da + 2 * d2
    if denominator == 0:
        return 0.5 * (a + b)
    return float(b - (b - a) * (db + d2 - d1) / denominator)


def _wolfe_step(phi, f0, d0, first, largest):
    """A step meeting the strong Wolfe conditions for phi(t) = f(x + t d) (Nocedal & Wright, Algorithms 3.5 and
    3.6: extrapolation, then a zoom by cubic interpolation), with L-BFGS-B's constants; `phi` returns (value,
    derivative, gradient). The step is at most `largest` (the nearest bound), and is taken there when the value
    still falls. Returns (t, value, gradient), or None when no step decreased the value."""
    previous = (0.0, f0, d0)
    t = min(first, largest)
    best = None
    for attempt in range(LINE_STEPS):
        f, d, g = phi(t)
        if not np.isfinite(f) or f > f0 + ARMIJO * t * d0 or (attempt > 0 and f >= previous[1]):
            return _zoom(phi, f0, d0, previous, (t, f, d), best)
        if abs(d) <= -CURVATURE * d0:
            return t, f, g
        best = (t, f, g)
        if d >= 0:
            return _zoom(phi, f0, d0, (t, f, d), previous, best)
        if t >= largest:
            return t, f, g
        previous = (t, f, d)
        t = min(EXTRAPOLATE * t, largest)
    return best


def _zoom(phi, f0, d0, low, high, best):
    """Algorithm 3.6: shrink [low, high] (low: the lower value, meeting sufficient decrease) to a Wolfe step."""
    for _ in range(LINE_STEPS):
        (a, fa, da), (b, fb, db) = low, high
        if not np.isfinite(fb):
            t = 0.5 * (a + b)
        else:
            t = _cubic_minimiser(a, fa, da, b, fb, db)
            lo, hi = min(a, b), max(a, b)
            if not lo + 0.1 * (hi - lo) <= t <= hi - 0.1 * (hi - lo):  # keep away from the ends (safeguard)
                t = 0.5 * (a + b)
        f, d, g = phi(t)
        if not np.isfinite(f) or f > f0 + ARMIJO * t * d0 or f >= fa:
            high = (t, f, d)
            continue
        if best is None or f < best[1]:
            best = (t, f, g)
        if abs(d) <= -CURVATURE * d0:
            return t, f, g
        if d * (b - a) >= 0:
            high = low
        low = (t, f, d)
        if abs(high[0] - low[0]) <= 1e-12 * max(1.0, low[0]):
            break
    return best


def minimise(value_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray, *,
             bounds: tuple[float, float] | None = None, max_iter: int = 15000, ftol: float = FTOL,
             gtol: float = GTOL, memory: int = MEMORY) -> MinimiseResult:
    """Minimise a smooth function from `x0`.

    Parameters
    ----------
    value_and_gradient : callable
        x -> (f(x), gradient of f at x).
    x0 : numpy.ndarray
        The starting point (projected onto the bounds).
    bounds : (float, float), optional
        One lower and one upper bound for every variable (either may be infinite).
    max_iter : int
        At most this many iterations.
    ftol, gtol : float
        Stop when (f_k - f_k+1) <= ftol * max(|f_k|, |f_k+1|, 1), or when the projected gradient's largest
        absolute component is at most gtol.
    memory : int
        Correction pairs kept.

    Returns
    -------
    MinimiseResult
    """
    lower, upper = bounds if bounds is not None else (-np.inf, np.inf)
    boxed = bounds is not None
    x = np.clip(np.asarray(x0, dtype=float), lower, upper)
    f, g = value_and_gradient(x)
    steps: list[np.ndarray] = []
    changes: list[np.ndarray] = []
    for iteration in range(max_iter):
        # Held: at a bound with the gradient pointing out of the box.
        held = ((x <= lower) & (g > 0)) | ((x >= upper) & (g < 0))
        free_gradient = np.where(held, 0.0, g)
        if not np.isfinite(f) or np.abs(free_gradient).max(initial=0.0) <= gtol:
            return MinimiseResult(x, float(f), iteration, bool(np.isfinite(f)))
        if boxed:
            # As L-BFGS-B does, search along the segment to the quasi-Newton point projected onto the box (on the
            # first iteration the projected steepest-descent point: the whole step, to the box's faces).
            d = np.clip(x + _direction(g, steps, changes, ~held), lower, upper) - x
            if d @ g >= 0:
                steps.clear(), changes.clear()
                d = np.clip(x - g, lower, upper) - x
            largest, first = 1.0, 1.0
        else:
            d = _direction(g, steps, changes)
            if d @ g >= 0:  # not a descent direction: start afresh from steepest descent
                steps.clear(), changes.clear()
                d = -g
            # The first step (or a fresh start) has no curvature to scale it: unit length, as L-BFGS-B takes.
            largest, first = np.inf, (1.0 if steps else min(1.0, 1.0 / np.linalg.norm(d)))

        def phi(t, x=x, d=d):  # t <= largest: the point stays in the box
            x_t = x + t * d
            f_t, g_t = value_and_gradient(x_t)
            return f_t, float(g_t @ d), (x_t, g_t)

        found = _wolfe_step(phi, f, float(g @ d), first, largest)
        if found is None or not found[1] < f:
            if steps:  # the curvature pairs misled the search: start afresh from steepest descent
                steps.clear(), changes.clear()
                continue
            return MinimiseResult(x, float(f), iteration, False)
        _, f_new, (x_new, g_new) = found
        s, y = x_new - x, g_new - g
        if s @ y > 1e-10 * (y @ y):  # keep only pairs of positive curvature (the approximation stays positive)
            steps.append(s), changes.append(y)
            if len(steps) > memory:
                steps.pop(0), changes.pop(0)
        decrease = f - f_new
        x, f, g = x_new, f_new, g_new
        if decrease <= ftol * max(abs(f), abs(f + decrease), 1.0):
            return MinimiseResult(x, float(f), iteration + 1, True)
    return MinimiseResult(x, float(f), max_iter, False)
