"""The audit's pictures: released against true counts per margin, and each margin's error against the plan's.

Drawn with matplotlib's object API (a `Figure`, no pyplot and no global backend state) and embedded in the
page as PNG data URIs, so that `audit.html` is one self-contained file. The audit is internal: these read
the confidential counts, and nothing here is written to `public/`.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence

import numpy as np

# The audit draws one released-against-true panel per margin up to this many (the worst, by error against the
# plan's expectation, first); past it the page says how many were left out. Keeps the page readable and quick.
MAX_MARGIN_FIGURES = 12
# Each cell's band in the released-against-true panel: +/- this many planned standard deviations (95%).
BAND_Z = 1.959963984540054


def _figure(width: float, height: float, margins: dict | None = None, axes: bool = True):
    """A figure (and its axes, unless `axes=False`). With `margins` (subplots_adjust's) the layout is fixed,
    twice as fast as a computed one."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=80, layout=None if margins else "constrained")
    if margins:
        fig.subplots_adjust(**margins)
    return fig, fig.add_subplot() if axes else None


def png_data_uri(fig) -> str:
    """A matplotlib figure as a PNG data URI, to embed in a page as it is.

    Parameters
    ----------
    fig : matplotlib.figure.Figure

    Returns
    -------
    str
        "data:image/png;base64,..."
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def released_against_true(panels: Sequence[tuple[str, np.ndarray, np.ndarray, float | None]]) -> str:
    """Released against true counts, one panel per margin (label, true, released, planned cell sd), three to a
    row in one figure: each cell a point, the line of no error, and (where the plan has one) the band of
    +/- 1.96 planned standard deviations around it. One figure for all the panels is four times faster to draw
    than one per margin. A PNG data URI.

    Parameters
    ----------
    panels : sequence of (str, ndarray, ndarray, float or None)
        Per margin: its title, its true counts, its released counts (same size, any shape) and the plan's standard
        deviation of a cell in counts (None or NaN: no band). At least one.

    Returns
    -------
    str
        A PNG data URI.
    """
    from matplotlib.ticker import MaxNLocator

    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, _ = _figure(3.5 * columns, 3.1 * rows + 0.5, {"left": 0.08 if columns == 3 else 0.12, "right": 0.98,
                                                       "bottom": 0.3 / (3.1 * rows + 0.5) * 1.8,
                                                       "top": 1 - 0.55 / (3.1 * rows + 0.5),
                                                       "wspace": 0.32, "hspace": 0.55}, axes=False)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, (label, true, released, cell_sd) in zip(axes, panels):
        true, released = np.ravel(true).astype(float), np.ravel(released).astype(float)
        top = float(max(true.max(initial=0.0), released.max(initial=0.0), 1.0)) * 1.05
        line = np.array([0.0, top])
        title = label
        if cell_sd is not None and np.isfinite(cell_sd):
            ax.fill_between(line, line - BAND_Z * cell_sd, line + BAND_Z * cell_sd, color="#9ecae1", alpha=0.5,
                            lw=0, label="planned 95% band of each cell")
            title += f" (band ±{BAND_Z * cell_sd:.3g})"
        ax.plot(line, line, color="#444", lw=0.8, label="released = true")
        ax.scatter(true, released, s=9 if true.size < 2000 else 2, color="#d6604d", zorder=3, label="cells",
                   rasterized=True)
        ax.set_xlim(0, top)
        ax.set_ylim(min(0.0, float(released.min(initial=0.0)) * 1.05), top)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.yaxis.set_major_locator(MaxNLocator(4))
        ax.tick_params(labelsize=7)
        ax.set_xlabel("true count", fontsize=8)
        ax.set_ylabel("released count", fontsize=8)
        ax.set_title(title, fontsize=8)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncols=3, fontsize=8, frameon=False)
    return png_data_uri(fig)


def errors_against_plan(labels: Sequence[str], realised: Mapping[str, float], expected: Mapping[str, float] | None,
                        quantile: Mapping[str, float] | None, quantile_label: str,
                        band_from: Mapping[str, float] | None = None) -> str:
    """Every margin's realised L1 error beside the plan's expected L1 error and its upper quantile. A PNG data URI.

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
        A PNG data URI.
    """
    height = 1.1 + 0.28 * max(len(labels), 2)
    # A fixed layout (a computed one took most of the audit's drawing time): room for the labels on the left, the
    # axis title below and the legend above, in inches turned into shares of the figure.
    left = min(0.45, (0.25 + 0.075 * max(len(g) for g in labels)) / 7.2)
    fig, ax = _figure(7.2, height, {"left": left, "right": 0.98, "bottom": 0.55 / height, "top": 1 - 0.4 / height})
    y = np.arange(len(labels))[::-1]
    if quantile:
        start = band_from or expected or {}
        for yi, g in zip(y, labels):
            ax.plot([start.get(g, 0.0), quantile[g]], [yi, yi], color="#9ecae1", lw=5, solid_capstyle="butt",
                    label=quantile_label if yi == y[0] else None)
    if expected:
        ax.scatter([expected[g] for g in labels], y, marker="|", s=160, color="#2166ac", zorder=3,
                   label="planned expected L1")
    ax.scatter([realised[g] for g in labels], y, color="#d6604d", s=22, zorder=4, label="realised L1")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("L1 error of the released margin (counts)")
    ax.set_xlim(left=0)
    fig.legend(fontsize=7, loc="upper center", ncols=3, frameon=False)
    return png_data_uri(fig)
