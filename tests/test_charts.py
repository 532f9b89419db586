"""The SVG charts (tabrelease.charts) and the audit's figures drawn with them: ticks against their definition,
well-formed SVG whose marks sit where the data say, legible text, escaped labels."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from tabrelease import charts, figures

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on anything not well-formed


def dots(element: ET.Element, colour: str) -> np.ndarray:
    """The centres of the round dots of one colour (each 'Mx yh0' in a round-capped path)."""
    found = []
    for path in element.iter(f"{SVG}path"):
        if path.get("stroke") == colour and path.get("stroke-linecap") == "round":
            found += re.findall(r"M([-\d.]+) ([-\d.]+)h0", path.get("d"))
    return np.array(found, float).reshape(-1, 2)


@pytest.mark.parametrize("low, high", [(0, 1), (0, 237.4), (-3.2, 41), (1e-3, 2.2e-3), (5, 5.5), (0, 1e7),
                                       (-1e-6, 1e-6), (12345, 12399)])
def test_nice_ticks_are_round_even_and_inside(low, high):
    ticks = charts.nice_ticks(low, high)
    assert 2 <= len(ticks) <= 10
    assert ticks.min() >= low - 1e-12 * max(1, abs(low)) and ticks.max() <= high + 1e-12 * max(1, abs(high))
    steps = np.diff(ticks)
    assert np.allclose(steps, steps[0], rtol=1e-9)
    mantissa = steps[0] / 10 ** np.floor(np.log10(steps[0]))
    assert any(np.isclose(mantissa, m) for m in (1, 2, 2.5, 5))
    # No room for one more step below the first or above the last.
    assert ticks[0] - steps[0] < low - 1e-12 and ticks[-1] + steps[0] > high + 1e-12


@pytest.mark.parametrize("low, high, expected", [
    (0.04, 2.1, [0.05, 0.1, 0.2, 0.5, 1, 2]),
    (20, 5000, [20, 50, 100, 200, 500, 1000, 2000, 5000]),
    (0.5, 5e4, [1, 10, 100, 1000, 1e4]),
])
def test_log_ticks(low, high, expected):
    assert np.allclose(charts.log_ticks(low, high), expected)


def test_log_ticks_within_a_decade_are_linear_steps():
    ticks = charts.log_ticks(600, 1400)
    assert len(ticks) >= 3 and np.allclose(np.diff(ticks), np.diff(ticks)[0])


def test_marks_sit_where_the_data_say():
    panel = charts.Panel(xlabel="x", ylabel="y")
    x = np.array([0.0, 2.0, 5.0, 10.0])
    y = np.array([10.0, 0.0, 5.0, 2.0])
    panel.points(x, y, colour="#123456")
    panel.xlim, panel.ylim = (0.0, 10.0), (0.0, 10.0)
    svg = parse(charts.render([panel], width=500, panel_height=200))
    frame = next(r for r in svg.iter(f"{SVG}rect") if r.get("stroke") == "#999")
    left, top = float(frame.get("x")), float(frame.get("y"))
    width, height = float(frame.get("width")), float(frame.get("height"))
    centres = dots(svg, "#123456")
    assert len(centres) == 4
    # Linear maps: x from the left edge, y up from the bottom edge (to the 0.1 px the SVG is written with).
    assert np.allclose(centres[:, 0], left + width * x / 10, atol=0.06)
    assert np.allclose(centres[:, 1], top + height * (1 - y / 10), atol=0.06)


def test_log_axes_map_decades_evenly():
    panel = charts.Panel(xlog=True, ylog=True)
    panel.points([1, 10, 100], [1, 10, 100], colour="#654321")
    panel.xlim = panel.ylim = (1.0, 100.0)
    centres = dots(parse(charts.render([panel], width=400)), "#654321")
    assert np.allclose(np.diff(centres[:, 0]), np.diff(centres[:, 0])[0], atol=0.1)
    assert np.all(np.diff(centres[:, 1]) < 0)


def test_text_is_legible_and_escaped():
    hostile = 'région <script>alert("x")</script> & "quoted"'
    panel = charts.Panel(title=hostile, xlabel=hostile, ylabel="y")
    panel.line([0, 1], [0, 1], colour="#000", label=hostile)
    svg = charts.render([panel], description=hostile)
    root = parse(svg)
    assert "<script" not in svg
    texts = list(root.iter(f"{SVG}text"))
    assert texts and all(float(t.get("font-size")) >= 10 for t in texts)
    assert any(hostile == t.text for t in texts)  # the legend entry, whole and as text
    assert root.get("aria-label") == hostile and root.find(f"{SVG}title").text == hostile


def test_long_titles_wrap_within_their_panel():
    title = " x ".join(["a_rather_long_variable_name"] * 4)
    lines = charts.wrap(title, 700)
    assert len(lines) > 1 and all(len(line) * charts.BOLD_GLYPH_WIDTH * charts.TITLE_PX <= 700 for line in lines)
    assert " ".join(lines) == title
    cut = charts.wrap("word " * 200, 300, lines=2)
    assert len(cut) == 2 and cut[-1].endswith("…")


def test_clip_paths_are_unique_in_a_page():
    one, two = charts.Panel(title="a"), charts.Panel(title="b")
    for p in (one, two):
        p.points([0, 1], [0, 1], colour="#000")
    page = charts.render([one, two], columns=2, description="first") + charts.render([one], description="second")
    ids = re.findall(r'<clipPath id="([^"]+)"', page)
    assert len(ids) == 3 and len(set(ids)) == 3


def test_released_against_true_draws_every_cell_and_its_band():
    rng = np.random.default_rng(3)
    true = [rng.integers(0, 50, size=(2, 3)), rng.integers(0, 500, size=(4,))]
    released = [t + rng.integers(-3, 4, size=t.shape) for t in true]
    svg = figures.released_against_true([("A x B", true[0], released[0], 2.0), ("C", true[1], released[1], None)])
    root = parse(svg)
    centres = dots(root, figures.RED)
    assert len(centres) == 6 + 4 + 1  # every cell, and the legend's dot
    bands = [p for p in root.iter(f"{SVG}path") if p.get("fill") == figures.BAND]
    assert len(bands) == 1  # the first margin's band only (the second has no planned sd)
    assert "A x B (±3.92)" in svg  # 1.96 planned standard deviations


def test_errors_against_plan_one_row_per_margin():
    labels = ["[A, B]", "[B, C]", "[A, C]"]
    realised = {"[A, B]": 3.0, "[B, C]": 10.0, "[A, C]": 6.0}
    expected = {"[A, B]": 4.0, "[B, C]": 5.0, "[A, C]": 6.0}
    quantile = {"[A, B]": 8.0, "[B, C]": 9.0, "[A, C]": 12.0}
    root = parse(figures.errors_against_plan(labels, realised, expected, quantile, "95% quantile"))
    centres = dots(root, figures.RED)[1:]  # the first is the legend's
    # Rows top to bottom in the order given; the realised errors in proportion along x.
    assert np.all(np.diff(centres[:, 1]) > 0)
    x = centres[:, 0]
    assert np.isclose((x[1] - x[0]) / (x[2] - x[0]), (10 - 3) / (6 - 3), rtol=1e-3)
    names = [t.text for t in root.iter(f"{SVG}text")]
    assert all(label in names for label in labels)
