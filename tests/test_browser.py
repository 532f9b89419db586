"""Every HTML page the tool writes, rendered in headless Chromium as a person sees it: no horizontal overflow
at a laptop's width, and every figure loads. (The reproduction's report.html is checked in
test_sweeps.test_reproduce_quick, which makes one.)"""

from __future__ import annotations

import base64

import pytest

from tabrelease.cli import main

from .browser import page_problems

# The audit pages are checked with their real figures.
pytestmark = pytest.mark.figures


def release(tmp_path, capsys, name, *argv):
    out = tmp_path / name
    code = main([str(a) for a in (*argv, "--simulate", "--seed", "5", "--out", out)])
    stdout, _ = capsys.readouterr()
    assert code == 0, stdout
    return out / "internal" / "audit.html"


def test_the_check_sees_overflow_and_broken_figures(browser, tmp_path):
    # The checker itself: a page that overflows and a figure that cannot load must both be reported.
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n not really a png").decode()
    page = tmp_path / "bad.html"
    # An unbreakable header (what ran the reproduction's Table 8 off the page) and a PNG that cannot decode.
    page.write_text(f'<html><body><table><tr><th>{"paper_formula_bound_multiplier_" * 60}</th></tr></table>'
                    f'<img alt="broken" src="data:image/png;base64,{png}"></body></html>')
    problems = page_problems(browser, page)["problems"]
    assert any("px wide in a" in p for p in problems) and any("TABLE" in p for p in problems)
    assert "figure did not load: broken" in problems
    good = tmp_path / "good.html"
    good.write_text("<html><body><p>fits</p></body></html>")
    assert page_problems(browser, good)["problems"] == []


def test_the_check_reads_figure_text_as_rendered(browser, tmp_path):
    # 12 px text in an SVG drawn at its own width is 12 px; the same figure squeezed to half its width is 6 px.
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="800" height="100" viewBox="0 0 800 100" '
           'style="{style}"><text x="10" y="50" font-size="12">tick</text></svg>')
    page = tmp_path / "svg.html"
    page.write_text(f"<html><body>{svg.format(style='')}</body></html>")
    found = page_problems(browser, page)
    assert found["smallest_figure_text"]["px"] == pytest.approx(12) and found["problems"] == []
    page.write_text(f"<html><body>{svg.format(style='width:400px;height:auto')}</body></html>")
    found = page_problems(browser, page)
    assert found["smallest_figure_text"]["px"] == pytest.approx(6)
    assert found["problems"] == ["figure text 'tick' is 6.0px (at least 10px)"]


@pytest.mark.parametrize("argv, left_out", [
    # The default (planned) release: eight margins, all drawn.
    (("release", "rochdale", "--epsilon", "1"), 0),
    # The paper's mechanism with its LP: the b* sentence and the paper's bound column.
    (("release", "journey_to_work", "--epsilon", "0.5", "--mechanism", "efron-stein"), 0),
    # Many margins: the panels stop at twelve and the page says how many more there are.
    (("release", "czech", "--epsilon", "2", "--margins", "[AB][AC][AD][AE][AF][BC][BD][BE][BF][CD][CE][CF][DE][DF][EF]"),
     3),
])
def test_audit_pages_render_without_overflow(browser, tmp_path, capsys, argv, left_out):
    page = release(tmp_path, capsys, "rel", *argv)
    found = page_problems(browser, page)
    assert found["problems"] == []  # the figures' text included: none below 10 px at a laptop's width
    # Two figures: every margin's error against the plan, and the released-against-true panels.
    assert found["figures"] == 2 and found["smallest_figure_text"]["px"] >= 10
    assert found["text_length"] > 1000 and "audit" in found["title"]
    assert (f"{left_out} more are in the table above" in page.read_text()) == (left_out > 0)


def test_audit_of_a_table_with_long_names_fits(browser, tmp_path, capsys):
    # A user's own table: long variable names and labels must wrap, not push the page wide.
    long_a = "region_of_residence_at_the_time_of_the_census_interview"
    long_b = "highest_educational_attainment_reported_by_the_respondent"
    rows = [f"{long_a},{long_b},count"]
    for i in range(6):
        for j in range(5):
            rows.append(f"Region_number_{i}_with_a_long_administrative_name,Level_{j}_of_schooling_completed,{7 * i + j + 3}")
    csv = tmp_path / "long.csv"
    csv.write_text("\n".join(rows) + "\n")
    page = release(tmp_path, capsys, "long", "release", csv, "--epsilon", "1", "--margins", f"[{long_a},{long_b}]")
    found = page_problems(browser, page)
    assert found["problems"] == [] and found["figures"] == 2


def test_committed_frontier_figures_are_legible(browser, tmp_path):
    # Each committed frontier figure as a page shows it (inline, at its own width): every strategy's legend entry is
    # text, none below 10 px, and nothing runs off a laptop's window.
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "reports" / "frontier"
    figures = sorted(folder.glob("*.svg"))
    assert figures, "reports/frontier has no figures"
    for figure in figures[:3]:
        page = tmp_path / f"{figure.stem}.html"
        page.write_text(f"<html><body>{figure.read_text()}</body></html>")
        found = page_problems(browser, page)
        assert found["problems"] == [] and found["smallest_figure_text"]["px"] >= 10, figure.name
