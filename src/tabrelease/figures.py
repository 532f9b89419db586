"""The audit's pictures: released against true counts per margin, and each margin's error against the plan's.

Drawn as inline SVG by `charts` (a few milliseconds; the text stays legible at any width), so that `audit.html`
is one self-contained file. The audit is internal: these read the confidential counts, and nothing here is
written to `public/`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from . import charts

# The audit draws one released-against-true panel per margin up to this many (the worst, by error against the
# plan's expectation, first); past it the page says how many were left out. Keeps the page readable and quick.
MAX_MARGIN_FIGURES = 12
# Each cell's band in the released-against-true panel: +/- this many planned standard deviations (95%).
BAND_Z = 1.959963984540054
# The audit page's text column is 60rem (960 px at the default font size): figures are drawn to fit it.
FIGURE_WIDTH = 920
RED, BLUE, BAND, GREY = "#c8412b", "#2166ac", "#9ecae1", "#444444"


def released_against_true(panels: Sequence[tuple[str, np.ndarray, np.ndarray, float | None]]) -> str:
    """Released against true counts, one panel per margin (label, true, released, planned cell sd), three to a
    row in one figure: each cell a point, the line of no error, and (where the plan has one) the band of
    +/- 1.96 planned standard deviations around it. One figure, the panels sharing its legend.

    Parameters
    ----------
    panels : sequence of (str, ndarray, ndarray, float or None)
        Per margin: its title, its true counts, its released counts (same size, any shape) and the plan's standard
        deviation of a cell in counts (None or NaN: no band). At least one.

    Returns
    -------
    str
        An inline `<svg>` element.
    """
    columns = min(3, len(panels))
    drawn = []
    for label, true, released, cell_sd in panels:
        true, released = np.ravel(true).astype(float), np.ravel(released).astype(float)
        top = float(max(true.max(initial=0.0), released.max(initial=0.0), 1.0)) * 1.05
        panel = charts.Panel(title=label, xlabel="true count", ylabel="released count")
        line = np.array([0.0, top])
        if cell_sd is not None and np.isfinite(cell_sd):
            panel.band(line, line - BAND_Z * cell_sd, line + BAND_Z * cell_sd, colour=BAND, opacity=0.6,
                       label="planned 95% range of each cell")
            panel.title += f" (±{BAND_Z * cell_sd:.3g})"
        panel.line(line, line, colour=GREY, width=1.2, label="released = true")
        panel.points(true, released, colour=RED, size=5 if true.size < 2000 else 2.5, label="cells")
        panel.xlim = (0.0, top)
        panel.ylim = (min(0.0, float(released.min(initial=0.0)) * 1.05), top)
        drawn.append(panel)
    return charts.render(drawn, columns=columns, width=FIGURE_WIDTH if columns > 1 else FIGURE_WIDTH / 2,
                         panel_height=200 if columns > 1 else 260,
                         description="released against true counts, per margin")


def errors_against_plan(labels: Sequence[str], realised: Mapping[str, float], expected: Mapping[str, float] | None,
                        quantile: Mapping[str, float] | None, quantile_label: str,
                        band_from: Mapping[str, float] | None = None) -> str:
    """Every margin's realised L1 error beside the plan's expected L1 error and its upper quantile. An inline SVG.

    Parameters
    ----------
    labels : sequence of str
        The margins' labels, top to bottom.
    realised : mapping of str to float
        Each margin's realised L1 error (counts).
    expected : mapping of str to float, or None
        The plan's expected L1 error of each margin (None: not drawn).
    quantile : mapping of str to float, or None
        An upper quantile of each margin's L1 error, drawn as a band from `band_from` (by default the expected error;
        from 0 without either; None: not drawn).
    quantile_label : str
        The band's legend entry.
    band_from : mapping of str to float, or None
        Where each margin's band starts (e.g. the simulated mean error).

    Returns
    -------
    str
        An inline `<svg>` element.
    """
    y = np.arange(len(labels))[::-1].astype(float)
    panel = charts.Panel(xlabel="L1 error of the released margin (counts)", ylabels=tuple(labels))
    if quantile:
        start = band_from or expected or {}
        panel.hsegments([start.get(g, 0.0) for g in labels], [quantile[g] for g in labels], y, colour=BAND,
                        width=9, label=quantile_label)
    if expected:
        panel.points([expected[g] for g in labels], y, colour=BLUE, size=10, marker="plus",
                     label="planned expected L1")
    panel.points([realised[g] for g in labels], y, colour=RED, size=8, label="realised L1")
    panel.xlim = (0.0, max(panel.data_range(0)[1], 1e-9))
    return charts.render([panel], width=FIGURE_WIDTH, panel_height=24 * max(len(labels), 2),
                         description="realised L1 error of each margin against the plan")
