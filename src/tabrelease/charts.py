"""Small charts as SVG, drawn with numpy: the audit's, the sweep summaries' and the frontier's figures.

Why by hand and not matplotlib: these figures are points, lines, bands and labels, and matplotlib cost most of a
release's wall time (its import alone was 0.34 s of a 1.73 s release, drawing the audit's two PNGs most of the
rest: reports/benchmarks/startup.txt before issue 25).
SVG text stays sharp and legible at any width, its size is a number a test can read in the rendered page, and
an inline `<svg>` keeps a page one self-contained file. The reproduction's figures are drawn here too, so the tool
has no plotting dependency.

The pieces: `Panel` (one plot area with its axes, linear or log) collects marks in data coordinates;
`render` lays panels out in a grid under one legend and returns the `<svg>` element as a string. Sizes are in CSS
pixels and the SVG is drawn at its natural width (never stretched), so a font size here is the size on screen
unless the window is narrower than the figure.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from html import escape
from math import ceil, floor, log10

import numpy as np

# Text sizes in CSS pixels: tick labels and legends, axis titles, panel titles.
TICK_PX, LABEL_PX, TITLE_PX = 12, 13, 13
# An average glyph's width as a share of the font size (for room, not for layout precision).
GLYPH_WIDTH, BOLD_GLYPH_WIDTH = 0.6, 0.68
# Distinct colours (Okabe & Ito's palette, then Tol's muted): no two strategies share one. Markers cycle apart,
# so that a colour-blind reader or a grey print still tells the lines apart.
COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#882255",
           "#44AA99", "#999933", "#AA4499", "#661100", "#6699CC", "#888888")
MARKERS = ("circle", "square", "triangle", "diamond", "cross", "triangle-down", "plus", "star")


def nice_ticks(low: float, high: float, count: int = 5) -> np.ndarray:
    """Round tick values covering [low, high]: steps of 1, 2, 2.5 or 5 times a power of ten.

    Parameters
    ----------
    low, high : float
        The axis range (high > low).
    count : int, default 5
        About how many ticks.

    Returns
    -------
    numpy.ndarray
        The ticks inside [low, high], increasing.
    """
    span = high - low
    if not np.isfinite(span) or span <= 0:
        return np.array([low])
    raw = span / max(count - 1, 1)
    power = 10.0 ** floor(log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * 0.999)
    first = ceil(low / step - 1e-9) * step
    ticks = first + step * np.arange(int(floor((high - first) / step + 1e-9)) + 1)
    return np.round(ticks, 12)


def log_ticks(low: float, high: float) -> np.ndarray:
    """Ticks for a log axis over [low, high] (both > 0): powers of ten, with 2 and 5 between them when the range
    spans at most three decades, and round linear steps when that gives fewer than three.

    Parameters
    ----------
    low, high : float

    Returns
    -------
    numpy.ndarray
    """
    first, last = floor(log10(low)), ceil(log10(high))
    mantissas = (1, 2, 5) if last - first <= 3 else (1,)
    ticks = np.array([m * 10.0**p for p in range(first, last + 1) for m in mantissas])
    ticks = ticks[(ticks >= low * (1 - 1e-9)) & (ticks <= high * (1 + 1e-9))]
    if len(ticks) < 3:  # less than a decade: round linear steps read better than one or two powers
        ticks = nice_ticks(low, high, 5)
        ticks = ticks[ticks > 0]
    return ticks


def tick_text(value: float) -> str:
    """A tick's label: short, no trailing zeros, thousands as 1k etc. past 10,000.

    Parameters
    ----------
    value : float

    Returns
    -------
    str
    """
    if value != 0 and abs(value) >= 1e4:
        for suffix, size in (("M", 1e6), ("k", 1e3)):
            if abs(value) >= size * 10 or suffix == "k":
                return f"{value / size:.4g}{suffix}"
    return f"{value:.4g}"


def _finite(values) -> np.ndarray:
    values = np.asarray(values, dtype=float).ravel()
    return values[np.isfinite(values)]


@dataclass
class Panel:
    """One plot area: its marks in data coordinates, its axes' titles and scales.

    Parameters
    ----------
    title : str
        Above the plot area ('' for none).
    xlabel, ylabel : str
        The axes' titles.
    xlog, ylog : bool
        Log scales.
    ylabels : sequence of str, optional
        Category labels of a dot plot, top to bottom (y = 0 is the last); the y axis is then categorical.
    """

    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    xlog: bool = False
    ylog: bool = False
    ylabels: tuple = ()
    marks: list = field(default_factory=list)
    xlim: tuple | None = None
    ylim: tuple | None = None

    def line(self, x, y, *, colour: str, width: float = 1.5, dash: str | None = None, label: str | None = None,
             marker: str | None = None):
        """A polyline through (x, y), broken where a value is not finite (or not positive on a log axis).

        Parameters
        ----------
        x, y : array-like
            The points, in data units.
        colour : str
            A CSS colour.
        width : float, default 1.5
            Stroke width in pixels.
        dash : str, optional
            An SVG dash array ("2 3": dotted).
        label : str, optional
            The legend's entry (None: none).
        marker : str, optional
            A marker of `MARKERS` at each point.

        Returns
        -------
        None
        """
        self.marks.append(("line", np.asarray(x, float), np.asarray(y, float), dict(colour=colour, width=width,
                                                                                  dash=dash, marker=marker)))
        self._legend(label, "line", colour, marker, dash)

    def points(self, x, y, *, colour: str, size: float = 5.0, marker: str = "circle", label: str | None = None):
        """Markers at (x, y).

        Parameters
        ----------
        x, y : array-like
        colour : str
        size : float, default 5
            The marker's diameter in pixels.
        marker : str, default "circle"
            One of `MARKERS`.
        label : str, optional

        Returns
        -------
        None
        """
        self.marks.append(("points", np.asarray(x, float), np.asarray(y, float), dict(colour=colour, size=size,
                                                                                    marker=marker)))
        self._legend(label, "points", colour, marker, None)

    def band(self, x, low, high, *, colour: str, opacity: float = 0.25, label: str | None = None):
        """The region between two curves over x.

        Parameters
        ----------
        x, low, high : array-like
        colour : str
        opacity : float, default 0.25
        label : str, optional

        Returns
        -------
        None
        """
        self.marks.append(("band", np.asarray(x, float), (np.asarray(low, float), np.asarray(high, float)),
                           dict(colour=colour, opacity=opacity)))
        self._legend(label, "band", colour, None, None)

    def errorbars(self, x, low, high, *, colour: str):
        """Vertical bars from low to high at each x.

        Parameters
        ----------
        x, low, high : array-like
        colour : str

        Returns
        -------
        None
        """
        self.marks.append(("errorbars", np.asarray(x, float), (np.asarray(low, float), np.asarray(high, float)),
                           dict(colour=colour)))

    def hsegments(self, start, end, y, *, colour: str, width: float = 8.0, label: str | None = None):
        """Horizontal bars from start to end at each category y (a dot plot's ranges).

        Parameters
        ----------
        start, end, y : array-like
        colour : str
        width : float, default 8
            The bar's thickness in pixels.
        label : str, optional

        Returns
        -------
        None
        """
        self.marks.append(("hsegments", (np.asarray(start, float), np.asarray(end, float)), np.asarray(y, float),
                           dict(colour=colour, width=width)))
        self._legend(label, "band", colour, None, None)

    def _legend(self, label, kind, colour, marker, dash):
        if label is not None:
            self.marks.append(("legend", label, kind, dict(colour=colour, marker=marker, dash=dash)))

    def legend_entries(self) -> list[tuple]:
        """The panel's labelled marks, in order.

        Returns
        -------
        list of (str, str, dict)
            Label, kind ("line", "points" or "band") and style.
        """
        return [(m[1], m[2], m[3]) for m in self.marks if m[0] == "legend"]

    def data_range(self, axis: int) -> tuple[float, float]:
        """The range the panel's marks span on an axis, padded by 4% (on a log axis, of the positive values).

        Parameters
        ----------
        axis : int
            0 for x, 1 for y.

        Returns
        -------
        (float, float)
            Low and high ends; (0, 1), or (1, 10) on a log axis, when nothing is drawn.
        """
        log = self.ylog if axis else self.xlog
        values = []
        for kind, x, y, _ in self.marks:
            if kind == "legend":
                continue
            picked = (x, y)[axis]
            for part in (picked if isinstance(picked, tuple) else (picked,)):
                values.append(_finite(part))
        values = np.concatenate(values) if values else np.array([])
        if log:
            values = values[values > 0]
        if values.size == 0:
            return (1.0, 10.0) if log else (0.0, 1.0)
        low, high = float(values.min()), float(values.max())
        if log:
            if high <= low:
                low, high = low / 2, high * 2
            pad = (high / low) ** 0.04
            return low / pad, high * pad
        if high <= low:
            low, high = low - 1, high + 1
        pad = 0.04 * (high - low)
        return low - pad, high + pad


class _Frame:
    """A panel's mapping from data to pixels inside its plot area."""

    def __init__(self, panel: Panel, left: float, top: float, width: float, height: float, *, y_gutter: float,
                 title_width: float, clip_id: str):
        self.panel, self.left, self.top, self.width, self.height = panel, left, top, width, height
        # The room left of the plot area for the y axis' labels, the width a title wraps at, the clip path's id.
        self.y_gutter, self.title_width, self.clip_id = y_gutter, title_width, clip_id
        if panel.ylabels:
            self.y_range = (-0.7, len(panel.ylabels) - 0.3)
        else:
            self.y_range = panel.ylim or panel.data_range(1)
        self.x_range = panel.xlim or panel.data_range(0)

    def _unit(self, values, bounds, log):
        values = np.asarray(values, float)
        low, high = bounds
        if log:
            with np.errstate(divide="ignore", invalid="ignore"):
                return (np.log10(np.where(values > 0, values, np.nan)) - log10(low)) / (log10(high) - log10(low))
        return (values - low) / (high - low)

    def x(self, values):
        return self.left + self.width * self._unit(values, self.x_range, self.panel.xlog)

    def y(self, values):
        return self.top + self.height * (1 - self._unit(values, self.y_range, self.panel.ylog))


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _text(x, y, text, *, size=TICK_PX, anchor="middle", baseline="auto", weight=None, rotate=None, fill="#222"):
    transform = f' transform="rotate({rotate} {_num(x)} {_num(y)})"' if rotate is not None else ""
    bold = f' font-weight="{weight}"' if weight else ""
    base = f' dominant-baseline="{baseline}"' if baseline != "auto" else ""
    return (f'<text x="{_num(x)}" y="{_num(y)}" font-size="{size}" text-anchor="{anchor}"{base}{bold}{transform} '
            f'fill="{fill}">{escape(str(text))}</text>')


def _marker_path(marker: str, xs, ys, size: float) -> str:
    """Markers at pixel positions as one path's data (one element per series keeps large scatters small)."""
    r = size / 2
    shapes = {
        "square": lambda x, y: f"M{_num(x - r)} {_num(y - r)}h{_num(2 * r)}v{_num(2 * r)}h{_num(-2 * r)}z",
        "triangle": lambda x, y: f"M{_num(x)} {_num(y - 1.2 * r)}l{_num(1.1 * r)} {_num(2 * r)}h{_num(-2.2 * r)}z",
        "triangle-down": lambda x, y: f"M{_num(x)} {_num(y + 1.2 * r)}l{_num(1.1 * r)} {_num(-2 * r)}h{_num(-2.2 * r)}z",
        "diamond": lambda x, y: f"M{_num(x)} {_num(y - 1.3 * r)}l{_num(1.3 * r)} {_num(1.3 * r)}l{_num(-1.3 * r)} "
                                f"{_num(1.3 * r)}l{_num(-1.3 * r)} {_num(-1.3 * r)}z",
        "star": lambda x, y: f"M{_num(x)} {_num(y - 1.3 * r)}l{_num(0.4 * r)} {_num(0.9 * r)}h{_num(0.9 * r)}"
                             f"l{_num(-0.7 * r)} {_num(0.6 * r)}l{_num(0.3 * r)} {_num(r)}l{_num(-0.9 * r)} "
                             f"{_num(-0.6 * r)}l{_num(-0.9 * r)} {_num(0.6 * r)}l{_num(0.3 * r)} {_num(-r)}"
                             f"l{_num(-0.7 * r)} {_num(-0.6 * r)}h{_num(0.9 * r)}z",
    }
    if marker in shapes:
        return "".join(shapes[marker](x, y) for x, y in zip(xs, ys))
    if marker == "cross":
        return "".join(f"M{_num(x - r)} {_num(y - r)}l{_num(2 * r)} {_num(2 * r)}m0 {_num(-2 * r)}"
                       f"l{_num(-2 * r)} {_num(2 * r)}" for x, y in zip(xs, ys))
    if marker == "plus":
        return "".join(f"M{_num(x - r)} {_num(y)}h{_num(2 * r)}M{_num(x)} {_num(y - r)}v{_num(2 * r)}"
                       for x, y in zip(xs, ys))
    return "".join(f"M{_num(x)} {_num(y)}h0" for x, y in zip(xs, ys))  # a round dot: a zero-length round-capped line


def _draw_marker(marker: str, xs, ys, colour: str, size: float) -> str:
    if not len(xs):
        return ""
    path = _marker_path(marker, xs, ys, size)
    if marker in (None, "circle"):
        return (f'<path d="{path}" stroke="{colour}" stroke-width="{_num(size)}" stroke-linecap="round" '
                f'fill="none"/>')
    if marker in ("cross", "plus"):
        return f'<path d="{path}" stroke="{colour}" stroke-width="1.6" fill="none"/>'
    return f'<path d="{path}" fill="{colour}" stroke="none"/>'


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The [start, end) index runs where mask is true."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return list(zip(edges[::2], edges[1::2]))


def _polyline(xs, ys) -> str:
    return "M" + "L".join(f"{_num(x)} {_num(y)}" for x, y in zip(xs, ys))


def _draw_panel(frame: _Frame) -> list[str]:
    p, out = frame.panel, []
    left, top, width, height = frame.left, frame.top, frame.width, frame.height
    right, bottom = left + width, top + height
    out.append(f'<rect x="{_num(left)}" y="{_num(top)}" width="{_num(width)}" height="{_num(height)}" '
               f'fill="#fff" stroke="#999" stroke-width="1"/>')
    # Grid and ticks.
    xt = log_ticks(*frame.x_range) if p.xlog else nice_ticks(*frame.x_range)
    for v, px in zip(xt, frame.x(xt)):
        out.append(f'<path d="M{_num(px)} {_num(top)}V{_num(bottom)}" stroke="#e4e4e4" stroke-width="1"/>')
        out.append(_text(px, bottom + TICK_PX + 3, tick_text(v)))
    if p.ylabels:
        for i, name in enumerate(p.ylabels):
            py = frame.y(len(p.ylabels) - 1 - i)
            out.append(f'<path d="M{_num(left)} {_num(py)}H{_num(right)}" stroke="#eee" stroke-width="1"/>')
            out.append(_text(left - 6, py, name, anchor="end", baseline="middle"))
    else:
        yt = log_ticks(*frame.y_range) if p.ylog else nice_ticks(*frame.y_range)
        for v, py in zip(yt, frame.y(yt)):
            out.append(f'<path d="M{_num(left)} {_num(py)}H{_num(right)}" stroke="#e4e4e4" stroke-width="1"/>')
            out.append(_text(left - 5, py, tick_text(v), anchor="end", baseline="middle"))
    clip = frame.clip_id
    out.append(f'<clipPath id="{clip}"><rect x="{_num(left)}" y="{_num(top)}" width="{_num(width)}" '
               f'height="{_num(height)}"/></clipPath><g clip-path="url(#{clip})">')
    for kind, x, y, style in p.marks:
        if kind == "band":
            low, high = y
            px, pl, ph = frame.x(x), frame.y(low), frame.y(high)
            ok = np.isfinite(px) & np.isfinite(pl) & np.isfinite(ph)
            for a, b in _runs(ok):
                xs = np.concatenate([px[a:b], px[a:b][::-1]])
                ys = np.concatenate([pl[a:b], ph[a:b][::-1]])
                out.append(f'<path d="{_polyline(xs, ys)}Z" fill="{style["colour"]}" '
                           f'fill-opacity="{style["opacity"]}" stroke="none"/>')
        elif kind == "line":
            px, py = frame.x(x), frame.y(y)
            dash = f' stroke-dasharray="{style["dash"]}"' if style["dash"] else ""
            for a, b in _runs(np.isfinite(px) & np.isfinite(py)):
                out.append(f'<path d="{_polyline(px[a:b], py[a:b])}" stroke="{style["colour"]}" '
                           f'stroke-width="{style["width"]}" fill="none"{dash}/>')
            if style["marker"]:
                ok = np.isfinite(px) & np.isfinite(py)
                out.append(_draw_marker(style["marker"], px[ok], py[ok], style["colour"], 6.5))
        elif kind == "points":
            px, py = frame.x(x), frame.y(y)
            ok = np.isfinite(px) & np.isfinite(py)
            out.append(_draw_marker(style["marker"], px[ok], py[ok], style["colour"], style["size"]))
        elif kind == "errorbars":
            low, high = y
            px, pl, ph = frame.x(x), frame.y(low), frame.y(high)
            ok = np.isfinite(px) & np.isfinite(pl) & np.isfinite(ph)
            d = "".join(f"M{_num(a)} {_num(b)}V{_num(c)}" for a, b, c in zip(px[ok], pl[ok], ph[ok]))
            if d:
                out.append(f'<path d="{d}" stroke="{style["colour"]}" stroke-width="1.2" fill="none"/>')
        elif kind == "hsegments":
            start, end = x
            ps, pe, py = frame.x(start), frame.x(end), frame.y(y)
            ok = np.isfinite(ps) & np.isfinite(pe) & np.isfinite(py)
            d = "".join(f"M{_num(a)} {_num(c)}H{_num(b)}" for a, b, c in zip(ps[ok], pe[ok], py[ok]))
            if d:
                out.append(f'<path d="{d}" stroke="{style["colour"]}" stroke-width="{style["width"]}" fill="none"/>')
    out.append("</g>")
    title = wrap(p.title, frame.title_width) if p.title else []
    for i, line in enumerate(title):  # centred over the whole cell, the axis' labels included: it has their room
        out.append(_text(left + (width - frame.y_gutter) / 2, top - 8 - (len(title) - 1 - i) * (TITLE_PX + 3), line,
                         size=TITLE_PX, weight="600"))
    if p.xlabel:
        out.append(_text(left + width / 2, bottom + TICK_PX + LABEL_PX + 12, p.xlabel, size=LABEL_PX))
    if p.ylabel:
        out.append(_text(left - frame.y_gutter + LABEL_PX, top + height / 2, p.ylabel, size=LABEL_PX, rotate=-90))
    return out


def _legend_item(label: str, kind: str, style: dict, x: float, y: float) -> list[str]:
    c = style["colour"]
    if kind == "band":
        swatch = f'<rect x="{_num(x)}" y="{_num(y - 6)}" width="22" height="12" fill="{c}" fill-opacity="0.45"/>'
    elif kind == "line":
        dash = f' stroke-dasharray="{style["dash"]}"' if style.get("dash") else ""
        swatch = f'<path d="M{_num(x)} {_num(y)}h22" stroke="{c}" stroke-width="2"{dash}/>'
        if style.get("marker"):
            swatch += _draw_marker(style["marker"], [x + 11], [y], c, 6.5)
    else:
        swatch = _draw_marker(style.get("marker") or "circle", [x + 11], [y], c, 7)
    return [swatch, _text(x + 28, y, label, anchor="start", baseline="middle")]


def _text_width(text: str, size: float = TICK_PX) -> float:
    return GLYPH_WIDTH * size * len(str(text))


def wrap(text: str, width: float, size: float = TITLE_PX, lines: int = 3) -> list[str]:
    """`text` broken at spaces into at most `lines` lines of about `width` pixels of bold text; the last one cut
    with an ellipsis if the text is longer still (a word longer than a line is cut too).

    Parameters
    ----------
    text : str
    width : float
        Pixels.
    size : float, default TITLE_PX
        The font size in pixels.
    lines : int, default 3

    Returns
    -------
    list of str
    """
    room = max(4, int(width / (BOLD_GLYPH_WIDTH * size)))
    out, current = [], ""
    for word in str(text).split(" "):
        if current and len(current) + 1 + len(word) > room:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    out.append(current)
    out = [line if len(line) <= room else line[:room - 1] + "…" for line in out]
    if len(out) > lines:
        out = out[:lines - 1] + [(out[lines - 1][:room - 1] + "…")]
    return out


def render(panels: list[Panel], *, columns: int = 1, width: float = 900, panel_height: float = 260,
           title: str = "", description: str = "") -> str:
    """Panels in a grid (row by row) under one shared legend, as an `<svg>` element.

    Parameters
    ----------
    panels : list of Panel
        At least one. The legend is the union of their labelled marks, in order, without repeats.
    columns : int, default 1
    width : float, default 900
        The figure's width in CSS pixels (drawn at this width; narrower windows scale it down).
    panel_height : float, default 260
        Each plot area's height in pixels.
    title : str
        Above everything ('' for none).
    description : str
        The figure's accessible name (what a screen reader says; also its tooltip).

    Returns
    -------
    str
        `<svg ...>...</svg>`, self-contained.
    """
    columns = max(1, min(columns, len(panels)))
    # Clip paths need ids unique in the page (several figures share one): a digest of what this one shows.
    figure_id = hashlib.sha1(repr((description, title, [p.title for p in panels], len(panels))).encode()
                             ).hexdigest()[:10]
    rows = -(-len(panels) // columns)
    entries = list(dict.fromkeys((label, kind, tuple(sorted(style.items())))
                                 for p in panels for label, kind, style in p.legend_entries()))
    # The legend: entries flow left to right and wrap at the figure's width.
    legend, x, y = [], 10.0, (28 if title else 8) + TICK_PX
    for label, kind, style in entries:
        item = 36 + _text_width(label)
        if x + item > width - 10 and x > 10:
            x, y = 10.0, y + TICK_PX + 10
        legend += _legend_item(label, kind, dict(style), x, y)
        x += item + 14
    top = (y + TICK_PX + 4) if entries else (32 if title else 8)
    cell_width = width / columns
    title_lines = max((len(wrap(p.title, cell_width - 22)) for p in panels if p.title), default=0)
    title_room = title_lines * (TITLE_PX + 3) + 11 if title_lines else 6
    pitch = title_room + panel_height + TICK_PX + (LABEL_PX + 30 if any(p.xlabel for p in panels) else 24)
    body = []
    for i, panel in enumerate(panels):
        r, c = divmod(i, columns)
        labels = panel.ylabels
        tick_room = (max((_text_width(t) for t in labels), default=0) if labels else
                     _text_width("0.0000"))
        y_gutter = min(0.45 * cell_width, tick_room + 10 + (LABEL_PX + 8 if panel.ylabel else 0))
        cell_top = top + r * pitch
        frame = _Frame(panel, c * cell_width + y_gutter + 4, cell_top + title_room, cell_width - y_gutter - 18,
                       panel_height, y_gutter=y_gutter, title_width=cell_width - 22, clip_id=f"clip-{figure_id}-{i}")
        body += _draw_panel(frame)
    height = top + rows * pitch
    head = _text(width / 2, 20, title, size=TITLE_PX + 1, weight="600") if title else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(description)}" '
            f'width="{_num(width)}" height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" '
            f'style="max-width:100%;height:auto" font-family="system-ui, sans-serif">'
            f'<title>{escape(description)}</title><rect width="100%" height="100%" fill="#fff"/>'
            + head + "".join(legend) + "".join(body) + "</svg>")


def style_of(index: int) -> tuple[str, str]:
    """The colour and marker of the index-th series: distinct colours first, markers cycling apart.

    Parameters
    ----------
    index : int

    Returns
    -------
    (str, str)
        A CSS colour and a marker of `MARKERS`.
    """
    return COLOURS[index % len(COLOURS)], MARKERS[index % len(MARKERS)]
