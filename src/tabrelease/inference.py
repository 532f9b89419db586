"""Inference for whoever holds only the public bundle: a log-linear model tested on the released margins, with a
p-value that knows the noise.

The nominal G² test treats the released margins as if they were the counts: DP noise, the non-negative fit and the
rounding inflate G², and the test rejects true models too often at small epsilon. Here the test statistic is G² of
the model against the model of the released margins (both fitted by IPF to the released margins alone, so the
statistic is computable from `public/`), and its null distribution is simulated by a parametric bootstrap through
the published plan: tables drawn from the fitted model (multinomial, n the released total), each released by the
same plan (simulated noise of the published scales, the same estimator and rounding), refitted. The nominal
chi-squared p-value is reported beside it.

Assumptions: the model holds; n is estimated by the released total; the plan is rebuilt from `release.json` and
refused unless its noise scales are the published ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import TabreleaseError

DEFAULT_BOOTSTRAP = 500
_SCALE_TOLERANCE = 1e-6  # relative: a rebuilt plan's noise scales match the published ones to this


@dataclass(frozen=True, eq=False)
class PublicRelease:
    """What `public/` says: the variables and levels, the released margins (axis tuples and counts) and
    `release.json` itself.

    Parameters
    ----------
    variables : tuple of str
    levels : tuple of tuple of str
    margins : tuple of tuple of int
    released : tuple of numpy.ndarray
        Each released margin's counts, axes in the margin's order.
    document : dict
        `release.json`.
    labels : tuple of str, optional
        Each variable's name for people (its label where the metadata gave one, as the CSV files show it).
    level_labels : tuple of tuple of str, optional
        Each variable's levels as the CSV files show them.
    """

    variables: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]
    margins: tuple[tuple[int, ...], ...]
    released: tuple[np.ndarray, ...]
    document: dict
    labels: tuple[str, ...] = ()
    level_labels: tuple[tuple[str, ...], ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(lv) for lv in self.levels)

    @property
    def n(self) -> float:
        """The released total (of the first margin; a consistent release has one total)."""
        return float(self.released[0].sum())


def read_public_release(folder: str | Path) -> PublicRelease:
    """The public bundle of a release (`DIR` or `DIR/public`): `release.json` and the margins' CSV files.

    Parameters
    ----------
    folder : str or Path

    Returns
    -------
    PublicRelease

    Raises
    ------
    TabreleaseError
        No `release.json`, or a margin file that does not match it.
    """
    from .tables.readers import read_csv_frame

    folder = Path(folder)
    if folder.name == "release.json" and folder.is_file():  # the bundle's own file named: its folder is meant
        folder = folder.parent
    public = folder / "public" if (folder / "public" / "release.json").is_file() else folder
    path = public / "release.json"
    if not path.is_file():
        raise TabreleaseError(f"{folder} holds no release.json (give a release's folder or its public/ folder)")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        variables = tuple(v["name"] for v in document["variables"])
        levels = tuple(tuple(str(x) for x in v["levels"]) for v in document["variables"])
        # The CSV files name levels by their labels for people where the metadata gave some.
        shown = tuple(tuple(str(x) for x in (v.get("level_labels") or v["levels"])) for v in document["variables"])
        labels = tuple(str(v.get("label") or v["name"]) for v in document["variables"])
        entries = document["margins"]
    except (ValueError, KeyError, TypeError):
        raise TabreleaseError(f"{path} is not a release.json this version reads") from None
    margins, released = [], []
    for entry in entries:
        try:
            axes = tuple(variables.index(v) for v in entry["variables"])
            entry["file"]
        except (ValueError, KeyError, TypeError):
            raise TabreleaseError(f"{path} names a margin it does not describe (its variables or its file)") from None
        frame = read_csv_frame(public / entry["file"])
        if frame.shape[1] != len(axes) + 1:
            raise TabreleaseError(f"{entry['file']} does not have the columns release.json gives it")
        # The columns are read by position: a file whose variables' columns were reordered (by hand, by a
        # spreadsheet) would be read transposed where the levels allow it. A column headed by another variable of
        # the margin (its name for people, or its own name), and not by its own label, is such a reordering. Only
        # that is refused: a header the reader gives back otherwise than written (a label protected against
        # spreadsheet formulas, edge spaces) is no sign of one.
        headers = [str(c).strip() for c in frame.columns[:-1]]

        def names_another(h: str, a: int) -> bool:
            return h != labels[a].strip() and any(h in (labels[b].strip(), variables[b].strip())
                                                   for b in axes if b != a)

        if any(names_another(h, a) for h, a in zip(headers, axes)):
            expected = ", ".join(labels[a] for a in axes)
            raise TabreleaseError(f"{entry['file']}'s columns are headed {', '.join(headers)}, not {expected} as "
                                  "release.json gives them (reordered or renamed after the release?)")
        counts = np.zeros([len(levels[a]) for a in axes])
        try:
            index = tuple(np.array([shown[a].index(x) if x in shown[a] else levels[a].index(x)
                                    for x in frame.iloc[:, j]]) for j, a in enumerate(axes))
            counts[index] = frame.iloc[:, -1].astype(float).to_numpy()
        except ValueError:
            raise TabreleaseError(f"{entry['file']} has a level or count release.json does not give it") from None
        # Each cell once, every cell there: a cell listed twice would be read as its last row, one left out as 0.
        if len(frame) != counts.size or len(set(zip(*index))) != counts.size:
            raise TabreleaseError(f"{entry['file']} does not list each of its {counts.size} cells once (a row "
                                  "repeated or left out after the release)")
        margins.append(axes)
        released.append(counts)
    return PublicRelease(variables, levels, tuple(margins), tuple(released), document, labels, shown)


def _check_agreement(release: PublicRelease) -> None:
    """Refuse margins that release.json calls consistent but that disagree: a count below 0, or two margins whose
    shared sub-margin differs (their totals included), by `rounding.mutually_consistent`. A file edited after the
    release was tested as if it were the release (a new user's trial)."""
    from .rounding import mutually_consistent

    if any(np.any(m < 0) for m in release.released):
        raise TabreleaseError("a released margin holds a negative count: the files are not as released")
    # Each margin with its axes sorted, as the check takes them. The files hold 6 decimals (an unrounded release's
    # cells within 5e-7 each), and a huge count has its floats' own precision: a cell's tolerance (the check
    # multiplies it by the cells a sub-margin sums).
    sorted_axes = [tuple(sorted(g)) for g in release.margins]
    values = [np.transpose(m, np.argsort(g)) for g, m in zip(release.margins, release.released)]
    atol = 1e-6 + 4e-16 * max(float(np.abs(m).sum()) for m in values)
    if not mutually_consistent(values, sorted_axes, atol=atol):
        raise TabreleaseError("the released margins disagree where they share variables: the files are not as "
                              "released (edited, or from two releases)")


def published_plan(release: PublicRelease):
    """The release's plan, rebuilt from `release.json` (a plan is a function of the shape, the margins and the
    settings alone), and checked: its noise scales must be the published ones.

    Parameters
    ----------
    release : PublicRelease

    Returns
    -------
    MechanismPlan

    Raises
    ------
    TabreleaseError
        The plan rebuilt here does not have the published scales (another version, or settings not recorded).
    """
    from .planner import plan_release
    from .spec import SIMULATION, ReleaseSpec, loss_of, unit_of

    d = release.document
    if d.get("consistent") is False:
        raise TabreleaseError("the released margins are not consistent (they are not the margins of one table): a "
                              "log-linear model cannot be fitted to them")
    _check_agreement(release)
    attributes = (d.get("guarantee") or {}).get("unit", {}).get("attributes")
    try:
        from .mechanisms.planned import PLAN_SETTING_PARAMETERS

        parameters = d.get("parameters") or {}
        options = {"public_total": True} if parameters.get("total_is_public") else {}
        # The planner's settings the release recorded (those not the default), for the planned mechanism only.
        options.update({option: value for key, (option, value) in PLAN_SETTING_PARAMETERS.items()
                        if parameters.get(key) and d.get("mechanism") == "planned"})
        # The recorded estimator and rounding: the replicates must be released exactly as the release was.
        # A sensitive-attribute release is planned for the attributes its guarantee names (recorded by name).
        unit = unit_of(d["neighbours"], sensitive=tuple(attributes)) if attributes else d["neighbours"]
        spec = ReleaseSpec(loss=loss_of(float(d["epsilon"]), d.get("delta") or None), unit=unit,
                           mechanism=d["mechanism"], options=options, estimator=d.get("estimator"),
                           rounding=d.get("rounding"), mode=SIMULATION, seed=0)
        # The margins asked for inside the released ones, which the plan weighed (release.json's plan records them).
        inside = [tuple(release.variables.index(v) for v in g) for g in (d.get("plan") or {}).get("weighed_inside", [])]
        plan = plan_release(release.shape, list(release.margins) + inside, spec, release.variables)
        published = [(b["query"], tuple(release.variables.index(v) for v in b["variables"]), float(b["scale"]))
                     for b in (d.get("plan") or {}).get("blocks", [])]
        scale = float(d["noise"]["scale"])
    except TabreleaseError as exc:
        raise TabreleaseError(f"the release's plan could not be rebuilt from release.json ({exc})") from None
    except (KeyError, TypeError, ValueError):
        raise TabreleaseError("the release's plan could not be rebuilt: release.json lacks or garbles what the plan "
                              "needs (epsilon, neighbours, mechanism, its blocks' variables and scales)") from None
    if plan.design is not None:
        from .measurements import MARGIN_CELLS

        # release.json names a block's query as reports.plan_description writes it: a margin, or a residual block.
        rebuilt = [("margin" if b.query == MARGIN_CELLS else "residual", tuple(b.variables),
                    plan.calibration.scale * b.relative_scale) for b in plan.design.blocks]
        same = len(rebuilt) == len(published) and all(
            q == pq and v == pv and math.isclose(s, ps, rel_tol=_SCALE_TOLERANCE)
            for (q, v, s), (pq, pv, ps) in zip(rebuilt, published))
    else:
        same = True
    # The noise's published scale too (an edited noise.scale had gone unnoticed beside unedited blocks).
    same = same and math.isclose(plan.calibration.scale, scale, rel_tol=_SCALE_TOLERANCE)
    same = same and plan.estimator_name == d.get("estimator", plan.estimator_name) and plan.rounding == d.get(
        "rounding", plan.rounding)
    if not same:
        raise TabreleaseError("the release's plan could not be rebuilt with its published noise scales (made by "
                              "another version, or with settings release.json does not record): no noise-aware test")
    return plan


@dataclass(frozen=True)
class ModelTest:
    """A hierarchical log-linear model tested on released margins.

    Attributes
    ----------
    model : str
        The model, by variable names.
    g2 : float
        G² of the model against the model of the released margins, both fitted to the released margins.
    df : int
        Its nominal degrees of freedom.
    p_value_naive : float
        The chi-squared p-value, as if the released margins were the counts.
    p_value : float
        The noise-aware p-value: (1 + replicates at least as large) / (1 + replicates).
    bootstrap : int
        Replicates, each a table drawn from the fitted model and released by the published plan.
    n : float
        The released total (the n the replicates draw).
    seed : int
    level : float
        The intervals' confidence level.
    intervals : tuple of dict
        Per cell of each of the model's margins: its variables and levels, the fitted probability and the
        noise-aware interval (`low`, `high`) from the same bootstrap.
    bundle_mode : str
        How the bundle tested was made, as its release.json says: "release" (secure noise) or "simulation" (seeded,
        not for publication), said beside the test's result.
    intervals_note : str or None
        Why the intervals are missing (their bounds None), where they are.
    """

    model: str
    g2: float
    df: int
    p_value_naive: float
    p_value: float
    bootstrap: int
    n: float
    seed: int
    level: float = 0.95
    intervals: tuple = ()
    bundle_mode: str = "release"
    intervals_note: str | None = None

    @property
    def p_value_error(self) -> float:
        """The noise-aware p-value's Monte Carlo standard error, sqrt(p (1 - p) / B): how far another seed's p-value
        may fall (with B = 500 and p near 0.05, about 0.01; more replicates where that matters)."""
        return math.sqrt(self.p_value * (1.0 - self.p_value) / self.bootstrap)

    def as_dict(self) -> dict:
        """The test as a JSON-ready dict.

        Returns
        -------
        dict
        """
        return {"model": self.model, "g2": self.g2, "df": self.df, "p_value_naive": self.p_value_naive,
                "p_value": self.p_value, "p_value_error": self.p_value_error, "bootstrap": self.bootstrap,
                "n": self.n, "seed": self.seed, "method": "parametric bootstrap through the published plan",
                "level": self.level, "intervals": list(self.intervals), "bundle_mode": self.bundle_mode,
                **({"intervals_note": self.intervals_note} if self.intervals_note else {})}


def _fits(targets_by_margin: Sequence[np.ndarray], margins, shape, batch_ndim: int) -> np.ndarray:
    from .loglinear.ipf import ipf_to_margins

    batch = np.shape(targets_by_margin[0])[:batch_ndim]
    fitted, _, _ = ipf_to_margins(list(targets_by_margin), list(margins), tuple(batch) + tuple(shape),
                                  batch_ndim=batch_ndim, tol=1e-8, max_iter=5000)
    return fitted


def _sub_margin(released, margins, generator, batch_ndim: int = 0) -> np.ndarray:
    """The count margin over `generator` from the released margin holding it."""
    from .tables import margin_counts

    holder = next(i for i, m in enumerate(margins) if set(generator) <= set(m))
    m = margins[holder]
    return margin_counts(np.asarray(released[holder], float), [m.index(a) for a in generator], batch_ndim)


def _g2(full: np.ndarray, model: np.ndarray, batch_ndim: int = 0) -> np.ndarray | float:
    axes = tuple(range(batch_ndim, full.ndim))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(full > 0, full * np.log(full / np.where(model > 0, model, 1.0)), 0.0)
    return np.maximum(2.0 * terms.sum(axis=axes), 0.0)


def _model_g2(released, margins, generators, shape, batch_ndim: int = 0) -> tuple[np.ndarray | float, np.ndarray]:
    """G² of the model against the released margins' own model, both fitted to the released margins (a stack of
    releases with `batch_ndim` 1), and the model's fit."""
    from .models import maximal_margins

    released_model = tuple(maximal_margins(margins)[0])
    full = _fits([_sub_margin(released, margins, g, batch_ndim) for g in released_model], released_model, shape,
                 batch_ndim)
    fitted = _fits([_sub_margin(released, margins, g, batch_ndim) for g in generators], generators, shape, batch_ndim)
    return _g2(full, fitted, batch_ndim), fitted


def _bootstrap_p_value(observed: float, replicated: np.ndarray) -> float:
    """(1 + replicates with G² at least the observed) / (1 + replicates); "at least" up to the fits' rounding."""
    return float((1 + np.sum(replicated >= observed - 1e-9 * max(observed, 1.0))) / (len(replicated) + 1))


def model_test(release: PublicRelease | str | Path, model, *, bootstrap: int = DEFAULT_BOOTSTRAP,
               seed: int = 0, level: float = 0.95, intervals: bool = False, jobs: int = 1,
               progress: bool | None = None) -> ModelTest:
    """Test a hierarchical log-linear model on a release's margins alone, with a noise-aware p-value.

    Parameters
    ----------
    release : PublicRelease or path
        The public bundle (or its folder).
    model : str or sequence of sequence
        The model: bracket notation by variable names or letters (``"[sex,age][age,region]"``), or generators.
    bootstrap : int, default DEFAULT_BOOTSTRAP
        Replicates of the parametric bootstrap.
    seed : int, default 0
        Seed of the replicates' tables and noise (the test is reproducible).
    level : float, default 0.95
        Confidence level of the intervals for the model's cell probabilities over each of its margins.
    intervals : bool, default False
        Whether to give the intervals (they need at least 1 / tail - 1 replicates: 39 at 95%).
    jobs : int, default 1
        Worker processes for the replicates' releases. The result is the same for any number.
    progress : bool, optional
        A progress bar of the replicates on standard error (default: when it is a terminal).

    Returns
    -------
    ModelTest

    Raises
    ------
    TabreleaseError
        The model's margins are not inside the released ones, the model is the released margins' own model (nothing
        to test), the plan cannot be rebuilt, or the released total is 0.
    """
    from .models import HierarchicalModel, free_parameters, maximal_margins, parse_model
    from .tables import ContingencyTable, margin_title

    _check_settings(bootstrap, level, intervals, jobs)
    if not isinstance(release, PublicRelease):
        release = read_public_release(release)
    shape, margins = release.shape, release.margins
    # The model may name variables as the published files do (their names for people), as `release` takes them.
    names = ContingencyTable(release.variables, release.levels, np.zeros(shape, np.int64), metadata={"variables": [
        {"name": v, "label": label} for v, label in zip(release.variables, release.labels or release.variables)]})
    generators = (parse_model(model, names).generators if isinstance(model, str)
                  else HierarchicalModel(tuple(tuple(g) for g in model), len(shape)).generators)
    outside = [g for g in generators if not any(set(g) <= set(m) for m in margins)]
    if outside:
        named = release.labels or release.variables  # as the public files name them
        raise TabreleaseError(f"the model's margin {margin_title(named, outside[0])} is inside no released margin: "
                              "the released margins do not determine its fit")
    released_model = tuple(maximal_margins(margins)[0])
    df = free_parameters(released_model, shape) - free_parameters(generators, shape)
    label = "".join(margin_title(release.labels or release.variables, g) for g in generators)
    if df <= 0:
        raise TabreleaseError(f"the model {label} is the released margins' own model: they fit it exactly, so they "
                              "cannot test it (test a smaller model)")
    plan = published_plan(release)
    g2, p_value, p_naive, bounds = margins_model_test(plan, release.released, generators, bootstrap=bootstrap,
                                                       seed=seed, level=level, jobs=jobs, intervals=intervals,
                                                       progress=progress)
    cells = []
    for g, (estimate, low, high) in zip(generators, bounds):
        for index in np.ndindex(estimate.shape):
            cells.append({"margin": [release.variables[a] for a in g],
                          "levels": [release.levels[a][i] for a, i in zip(g, index)],
                          "shown": [f"{(release.labels or release.variables)[a]}="
                                    f"{(release.level_labels or release.levels)[a][i]}" for a, i in zip(g, index)],
                          "probability": float(estimate[index]), "low": float(low[index]), "high": float(high[index])})
    mode = str((release.document.get("noise") or {}).get("mode", "release"))
    if any(not (math.isfinite(c["low"]) and math.isfinite(c["high"])) for c in cells):
        # Said, not shown as NaN (a reviewer's trial printed numpy's warning, and the JSON held nulls unexplained).
        cells = [{**c, "low": None, "high": None} for c in cells]
        note = ("no intervals: some replicates released an empty table (the released total is small against the "
                "noise), whose cell probabilities are undefined")
    else:
        note = None
    return ModelTest(label, g2, int(df), p_naive, p_value, bootstrap, release.n, seed, level, tuple(cells), mode,
                     note)


def _check_settings(bootstrap, level, intervals: bool, jobs) -> None:
    """The bootstrap's settings, refused in one line each."""
    import numbers

    def whole(x) -> bool:
        return isinstance(x, numbers.Integral) and not isinstance(x, bool)

    if not whole(bootstrap) or bootstrap < 19:
        raise TabreleaseError(f"the bootstrap needs at least 19 replicates, not {bootstrap!r}")
    if not whole(jobs) or jobs < 1:
        raise TabreleaseError(f"jobs is a whole number of at least 1, not {jobs!r}")
    if not isinstance(level, numbers.Real) or not 0.5 <= level < 1:
        raise TabreleaseError(f"the intervals' level is at least 0.5 and below 1, not {level!r}")
    if intervals and (bootstrap + 1) * (1 - level) / 2 < 1 - 1e-9:
        # A bound is the order statistic at (B + 1) tail: below the first, the interval cannot reach its level.
        # (The tolerance: 20 * (1 - 0.9) / 2 is 0.9999999999999998 in floating point.)
        needed = math.ceil(2 / (1 - level) - 1e-9) - 1
        raise TabreleaseError(f"intervals at level {level:g} need at least {needed} bootstrap replicates, not "
                              f"{bootstrap}")


def margins_model_test(plan, released: Sequence[np.ndarray], generators, *, bootstrap: int = DEFAULT_BOOTSTRAP,
                       seed: int = 0, level: float = 0.95, jobs: int = 1,
                       intervals: bool = True, progress: bool | None = False) -> tuple[float, float, float, list]:
    """The test itself, on released margins and the plan that released them (`model_test` reads both from a
    bundle; a simulation study passes them directly).

    Parameters
    ----------
    plan : MechanismPlan
        The plan that released the margins (`plan.margins`, in order).
    released : sequence of numpy.ndarray
        The released margins' counts.
    generators : sequence of tuple of int
        The model's generators, each inside a released margin, the model smaller than the released margins' own.
    bootstrap : int
    seed : int
    level : float, default 0.95
        The intervals' confidence level.
    jobs : int, default 1
        Worker processes for the replicates' releases (the tables and seeds are drawn here, in order, so the
        result does not depend on it). They are started by forkserver (spawn outside Linux), which imports the
        calling script again: call from a script under ``if __name__ == "__main__":``.
    intervals : bool, default True
        Whether to give the intervals (they need at least 2 / (1 - level) - 1 replicates).
    progress : bool, optional, default False
        A progress bar of the replicates on standard error (None: when it is a terminal).

    Returns
    -------
    tuple
        (G², the noise-aware p-value, the nominal chi-squared p-value, the intervals): per generator, (estimate,
        low, high) arrays of the model's cell probabilities over that generator (`_intervals`); empty without
        `intervals`.

    Raises
    ------
    TabreleaseError
        A setting is out of range, or the released total is 0 (no fit, no replicate is defined).
    """
    from scipy import stats

    from .models import free_parameters, maximal_margins

    _check_settings(bootstrap, level, intervals, jobs)
    bootstrap, jobs = int(bootstrap), int(jobs)
    shape, margins = plan.shape, tuple(tuple(m) for m in plan.margins)
    generators = tuple(tuple(g) for g in generators)
    released_model = tuple(maximal_margins(margins)[0])
    df = free_parameters(released_model, shape) - free_parameters(generators, shape)
    n = float(np.asarray(released[0]).sum())
    if n <= 0:  # every released margin is empty: no model's fit, and no replicate, is defined
        raise TabreleaseError("the release's total is 0 (its margins are empty): there is nothing to test")
    g2, fitted = _model_g2(released, margins, generators, shape)
    g2 = float(g2)
    rng = np.random.default_rng([seed, 20261126])
    probabilities = (fitted / fitted.sum()).ravel()

    def draws():  # each replicate's table, then its noise seed: the order the result depends on
        for _ in range(bootstrap):
            table = rng.multinomial(int(round(n)), probabilities).reshape(shape)
            yield table, int(rng.integers(2**62))

    chunks = _released_replicates(plan, draws(), bootstrap, jobs, progress)
    stacked = [np.concatenate([c[i] for c in chunks]) for i in range(len(margins))]
    if stacked[0].shape[0] != bootstrap:  # the p-value divides by B + 1: every replicate must be here
        raise RuntimeError(f"{stacked[0].shape[0]} of {bootstrap} bootstrap replicates came back")
    p_value = _bootstrap_p_value(g2, _model_g2(stacked, margins, generators, shape, 1)[0])
    totals = stacked[0].sum(axis=tuple(range(1, stacked[0].ndim)))
    with np.errstate(invalid="ignore", divide="ignore"):  # a replicate released empty has no proportions: NaN
        bounds = [_intervals(_sub_margin(released, margins, g) / n,
                             _sub_margin(stacked, margins, g, 1) / totals.reshape((-1,) + (1,) * len(g)), level)
                  for g in (generators if intervals else ())]
    return g2, p_value, float(stats.chi2.sf(g2, df)), bounds


def _release_chunk(plan, tables: Sequence[np.ndarray], seeds: Sequence[int]) -> list[np.ndarray]:
    """Release each table by the plan with simulated noise of its seed; each released margin stacked over them."""
    from .noise import SimulationNoise
    from .pipeline import run_plan

    done = [run_plan(plan, t, SimulationNoise(seed=s)).released_margins for t, s in zip(tables, seeds)]
    return [np.stack([np.asarray(d[i], float) for d in done]) for i in range(len(plan.margins))]


def _released_replicates(plan, draws, bootstrap: int, jobs: int, progress: bool | None = False
                         ) -> list[list[np.ndarray]]:
    """The replicates' released margins, in chunks in the order drawn: here (`jobs` 1), or by `jobs` worker
    processes, each chunk's tables drawn when it is sent, at most two chunks per worker waiting. (The stacked
    margins, and the batched fits after, hold all B replicates at once in any case.)"""
    import sys
    from collections import deque
    from itertools import islice

    from tqdm.auto import tqdm

    # One replicate at a time here (the bar moves with each); a few chunks per worker there.
    size = max(1, math.ceil(bootstrap / (4 * jobs))) if jobs > 1 else 1
    batches = iter(lambda: list(islice(draws, size)), [])
    bar = tqdm(total=bootstrap, unit="release", desc="bootstrap", file=sys.stderr,
               disable=not (sys.stderr.isatty() if progress is None else progress))
    chunks = []

    def take(chunk):
        chunks.append(chunk)
        bar.update(len(chunk[0]))

    with bar:
        if jobs == 1:
            for b in batches:
                take(_release_chunk(plan, [t for t, _ in b], [s for _, s in b]))
            return chunks
        from .sweeps.driver import local_executor

        waiting = deque()
        with local_executor(jobs) as pool:
            try:
                for b in batches:
                    waiting.append(pool.submit(_release_chunk, plan, [t for t, _ in b], [s for _, s in b]))
                    if len(waiting) >= 2 * jobs:
                        take(waiting.popleft().result())
                for f in waiting:
                    take(f.result())
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)  # an error ends the test: nothing queued is started
                raise
    return chunks


def _intervals(estimate: np.ndarray, replicates: np.ndarray, level: float) -> tuple[np.ndarray, ...]:
    """Basic bootstrap intervals: the replicates' spread around the bootstrap world's truth (the fitted model, whose
    generator margins are the estimate) reflected about the estimate, [2 p - q_high, 2 p - q_low], within [0, 1],
    the upper bound at least q_high where q_low is 0 (see below).
    Reflection carries the release's bias (rounding and the non-negative fit lift small cells) into the interval,
    where a percentile interval would repeat it.

    The quantiles are the replicates' order statistics at (B + 1) tail (numpy's "weibull" rule): a pivot
    exchangeable with B replicates falls below the k-th smallest with probability k / (B + 1). numpy's default
    rule puts the bound at (B - 1) tail + 1, inside that, and cost 2 points of coverage at B = 99 (93.1% for 95%)."""
    tail = (1 - level) / 2
    low_q, high_q = np.quantile(replicates, [tail, 1 - tail], axis=0, method="weibull")
    # Zero is a wall: where the replicates' lower quantile is at 0, their spread below the estimate is cut off (a
    # cell released as 0 is 0 in every table drawn, and the noise and the non-negative fit only lift it), so the
    # reflected upper bound 2 p - q_low shrinks to the estimate, [0, 0] at a released 0, whatever the truth. There
    # the upper bound is at least the replicates' own upper quantile: what a true value of the estimate is
    # released as, at most, in all but the tail. (At a released 0 under Laplace noise of scale b, that is about
    # b ln(1 / (2 tail)) above 0, and a true count of that size is released as 0 with probability about the tail:
    # the bound a test inversion gives.) Away from the wall the reflection stands alone: the larger of the two
    # there would only widen the interval by Monte Carlo error, past its level.
    wall = low_q <= 1e-12  # 0, but for the interpolation's rounding (a count of 1 is 1 / n, far above)
    high = np.where(wall, np.maximum(2 * estimate - low_q, high_q), 2 * estimate - low_q)
    return estimate, np.clip(2 * estimate - high_q, 0.0, 1.0), np.clip(high, 0.0, 1.0)
