"""What a sweep found, summarised: per table, mechanism, calibration and epsilon, the spread of each run's
errors (summary.csv), and one figure per measure against epsilon (SVG) (one panel per table, a line per mechanism
and calibration). `tabrelease sweep` writes them beside the runs, as `reproduce` does for the paper's grid.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .._files import labels_protected, write_frame_atomic, write_text_atomic

# measure -> (column of the runs, axis label). Every one is a function of a run's own release and refit.
MEASURES = {
    "max_l1_error": ("max_l1_error", "largest L1 error of a released margin (counts)"),
    "n_drift": ("n_drift", "n' - n (counts)"),
    "g2_difference": ("g2_difference", "G2 of the release - G2 of the data"),
    "mle_l1": ("mle_l1", "L1 distance between the MLEs"),
}
KEYS = ["table", "mechanism", "calibration", "epsilon"]
SUMMARY_FILE = "summary.csv"
SUMMARY_OUTPUTS = (SUMMARY_FILE,) + tuple(f"{m}.svg" for m in MEASURES)


def noise_modes(modes) -> str:
    """The one noise mode of a point's runs ("simulation" or "release"), or each, joined by "+", should they differ.

    Parameters
    ----------
    modes : iterable of str

    Returns
    -------
    str
    """
    return "+".join(sorted(set(modes)))


def summarise_sweep(runs: pd.DataFrame) -> pd.DataFrame:
    """Per grid point: the runs, and each measure's mean, sd, median and 10% / 90% quantiles (NaN-aware: a run
    whose refit is undefined, e.g. inconsistent margins, does not count towards that measure).

    Parameters
    ----------
    runs : pandas.DataFrame
        A sweep's rows, one per run (`SweepResult.runs`).

    Returns
    -------
    pandas.DataFrame
        One row per table, mechanism, calibration and epsilon (in the order first met): `runs`, `noise_mode`
        (the noise that made them), and for each
        measure of `MEASURES` the columns `<measure>_defined` (runs with a value), `_mean`, `_sd`, `_median`, `_q10`
        and `_q90`.
    """
    # A measure no run defines (G2 of a release whose margins are inconsistent, e.g. nonneg's) is read as NaN, not
    # left as a column of None, which pandas cannot take quantiles of.
    runs = runs.assign(**{column: pd.to_numeric(runs[column]) for column, _ in MEASURES.values()})
    grouped = runs.groupby(KEYS, sort=False)
    # Which noise made the runs, in every row, so that a copy of summary.csv away from its sweep.json says so.
    pieces = {"runs": grouped.size(), "noise_mode": grouped["noise_mode"].agg(noise_modes)}
    for name, (column, _) in MEASURES.items():
        values = grouped[column]
        pieces[f"{name}_defined"] = values.count()
        pieces[f"{name}_mean"] = values.mean()
        pieces[f"{name}_sd"] = values.std(ddof=1)
        pieces[f"{name}_median"] = values.median()
        pieces[f"{name}_q10"] = values.quantile(0.1)
        pieces[f"{name}_q90"] = values.quantile(0.9)
    return pd.DataFrame(pieces).reset_index()


def plot_sweep(summary: pd.DataFrame, measure: str, path: Path) -> None:
    """The measure's median (line) and 10-90% band against epsilon (log axis), one panel per table, one colour and
    marker per mechanism and calibration. An SVG file (`charts`: drawn in milliseconds, sharp at any size).

    Parameters
    ----------
    summary : pandas.DataFrame
        As `summarise_sweep` returns it.
    measure : str
        A key of `MEASURES`.
    path : Path
        The SVG file written (atomically; replaced if it exists).
    """
    from .. import charts

    _, label = MEASURES[measure]
    tables = list(dict.fromkeys(summary.table))
    series = list(dict.fromkeys(zip(summary.mechanism, summary.calibration)))
    panels = []
    for name in tables:
        part = summary[summary.table == name]
        panel = charts.Panel(title=name, xlabel="epsilon", ylabel=label,
                             xlog=bool(part.epsilon.nunique() > 1 and part.epsilon.min() > 0))
        for (mechanism, calibration), line in part.groupby(["mechanism", "calibration"], sort=False):
            line = line.sort_values("epsilon")
            colour, marker = charts.style_of(series.index((mechanism, calibration)))
            tag = mechanism if calibration == "exact" else f"{mechanism} ({calibration} calibration)"
            panel.band(line.epsilon, line[f"{measure}_q10"], line[f"{measure}_q90"], colour=colour, opacity=0.15)
            panel.line(line.epsilon, line[f"{measure}_median"], colour=colour, marker=marker, label=tag)
        panels.append(panel)
    svg = charts.render(panels, width=900, panel_height=240,
                        title="median (line) and 10-90% of the runs (band); simulation-mode noise",
                        description=f"{label} against epsilon, per table")
    write_text_atomic(path, svg)


def write_sweep_summary(runs: pd.DataFrame, out: Path) -> tuple[str, ...]:
    """summary.csv and one figure per measure with any defined value, into `out`; returns the names written.

    Parameters
    ----------
    runs : pandas.DataFrame
        A sweep's rows, one per run.
    out : path
        An existing folder.

    Returns
    -------
    tuple of str
        The names of the files written, relative to `out`.
    """
    out = Path(out)
    summary = summarise_sweep(runs)
    write_frame_atomic(labels_protected(summary), out / SUMMARY_FILE)  # table names must not become formulas
    written = [SUMMARY_FILE]
    for measure in MEASURES:
        if np.isfinite(summary[f"{measure}_median"].astype(float)).any():
            plot_sweep(summary, measure, out / f"{measure}.svg")
            written.append(f"{measure}.svg")
    return tuple(written)
