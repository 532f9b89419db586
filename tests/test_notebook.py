"""The HTML summaries Jupyter shows for a release, a plan, a fit and a published release."""

from __future__ import annotations

import re

import pytest

import tabrelease as tr
from tabrelease.loglinear import fit_loglinear
from tabrelease.notebook import glance_html


def cells(html: str) -> dict:
    return dict(re.findall(r"<th[^>]*>(.*?)</th><td[^>]*>(.*?)</td>", html))


def test_release_and_plan_summaries():
    table = tr.builtin_table("journey_to_work")
    release = tr.release_margins(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=3))
    shown = cells(release._repr_html_())
    assert shown["margins"] == "[home_zone, work_zone] [home_zone, income] [work_zone, income]"
    assert "NOT for publication" in shown["noise"] and shown["privacy"] == release.privacy
    # A release in memory has not been compared with the truth: no error against it is shown.
    assert "worst margin error" not in shown and shown["released total"] == f"n&#39; = {release.n_released:.6g}"
    plan = cells(release.plan._repr_html_())
    assert plan["table shape"] == "4 x 4 x 16" and set(k for k in plan if k.startswith("expected L1")) == {
        "expected L1 [home_zone, work_zone]", "expected L1 [home_zone, income]", "expected L1 [work_zone, income]"}


def test_fit_summary():
    table = tr.builtin_table("journey_to_work")
    fit = fit_loglinear(table.counts, tr.default_model(table))
    shown = cells(fit._repr_html_())
    assert shown["model"] == "[AB][AC][BC]" and shown["G²"].startswith("262.93")


@pytest.mark.e2e
def test_published_release_shows_the_audit_box(tmp_path):
    done = tr.publish_release(tr.builtin_table("edwards"),
                              tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=2), tmp_path / "r")
    shown = cells(done._repr_html_())
    assert shown["worst margin error"].startswith(f"L1 {done.evaluation.max_l1_error:.6g}")
    assert "internal" in done._repr_html_()


def test_values_are_escaped():
    html = glance_html("t<i>", [{"item": "<script>", "value": "a & b", "flag": "bad"}])
    assert "<script>" not in html and "&lt;script&gt;" in html and "a &amp; b" in html and "t&lt;i&gt;" in html
