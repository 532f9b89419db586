"""The audit's 'at a glance' box, its planned error quantile and its figures."""

from __future__ import annotations

import json
from statistics import NormalDist

import numpy as np
import pytest

from tabrelease.cli import main
from tabrelease.planning import MarginError


@pytest.mark.unit
def test_l1_quantile_by_hand():
    error = MarginError(total_variance=16.0, cell_sd=2.0, expected_l1=4 * 2.0 * np.sqrt(2 / np.pi), cells=4)
    # cells * sd * z(1 - delta / (2 cells)), with the normal quantile from the standard library.
    assert error.l1_quantile(0.05) == pytest.approx(4 * 2.0 * NormalDist().inv_cdf(1 - 0.05 / 8), rel=1e-12)


@pytest.mark.parametrize("correlated", [False, True])
@pytest.mark.unit
def test_l1_quantile_covers_whatever_the_correlation(correlated):
    # Normal cell errors, independent or all equal (the two extremes): the L1 error exceeds the quantile in at
    # most a delta share of draws.
    cells, sd, delta = 12, 3.0, 0.1
    error = MarginError(cells * sd**2, sd, cells * sd * np.sqrt(2 / np.pi), cells)
    rng = np.random.default_rng(7)
    draws = rng.normal(0, sd, size=(200_000, 1 if correlated else cells))
    l1 = np.abs(draws).sum(axis=1) * (cells if correlated else 1)
    assert np.mean(l1 > error.l1_quantile(delta)) <= delta


def audit_of(tmp_path, capsys, *argv):
    out = tmp_path / "rel"
    assert main([str(a) for a in (*argv, "--out", out)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    return json.loads((out / "internal" / "audit.json").read_text()), (out / "internal" / "audit.html").read_text()


@pytest.mark.figures
def test_at_a_glance_box(tmp_path, capsys):
    audit, html = audit_of(tmp_path, capsys, "release", "journey_to_work", "--epsilon", "1", "--mechanism",
                           "efron-stein", "--calibration", "paper", "--simulate", "--seed", "4")
    glance = {row["item"]: row for row in audit["at_a_glance"]}
    ev = audit["evaluation"]
    assert glance["noise"]["flag"] == "bad" and "NOT for publication" in glance["noise"]["value"]
    assert glance["calibration"]["flag"] == "bad" and "does NOT hold" in glance["calibration"]["value"]
    worst = max(ev["l1_error_by_margin"], key=ev["l1_error_by_margin"].get)
    # Shown by its variables' names (journey to work's labels), not by the letters audit.json keys it by.
    worst = {"[AB]": "[home_zone, work_zone]", "[AC]": "[home_zone, income]", "[BC]": "[work_zone, income]"}[worst]
    share = 100 * ev["max_l1_error"] / 2291
    assert glance["worst margin error"]["value"] == f"L1 {ev['max_l1_error']:.6g} on {worst}: {share:.1f}% of n"
    assert glance["released total"]["value"].startswith(f"n = 2291 -> n' = {ev['n_released']:.6g}")
    assert glance["privacy"]["value"] == audit["release"]["privacy"]
    assert "At a glance" in html and html.count("<svg") == 2
    # The paper's mechanism has planned expected errors too (of the unbiased reconstruction), and their quantile.
    assert set(ev["expected_l1_quantile_by_margin"]) == {"[AB]", "[AC]", "[BC]"}
    assert all(ev["expected_l1_quantile_by_margin"][g] > ev["expected_l1_by_margin"][g] for g in ev["expected_l1_by_margin"])
    # The loose union bound stays in audit.json for the record, but no longer on the page.
    assert ev["l1_bound_by_margin"] is not None and "derived bound" not in html
    # The planned union bound above the quantile is named a bound, not a quantile (a new user's read of stop 42).
    assert "planned 95% bound (a union bound above the quantile, not a quantile)" in html
    assert "quantile (union bound)" not in html
    # ... and so is it in the paragraph that explains it (which had called it "an upper 95% quantile": an auditor's
    # read of stop 47).
    assert "The planned bound is a union bound above the 95% quantile of that error, not a quantile" in html
    assert "The quantile is an upper" not in html


def test_secure_release_box_is_green(tmp_path, capsys):
    audit, _ = audit_of(tmp_path, capsys, "release", "rochdale", "--epsilon", "1")
    glance = {row["item"]: row for row in audit["at_a_glance"]}
    assert glance["noise"]["flag"] == "ok" and glance["calibration"]["flag"] == "ok"
    assert glance["consistency"]["value"].startswith("global")


def test_the_box_says_which_ledger_was_charged_or_that_none_was(tmp_path, capsys):
    """A release charged to a ledger: audit.json's ledger_charge is the ledger's own record of it (read from the
    ledger file: its id, the record's number, the dataset, the release id and the guarantee charged, beside the
    ledger's path), and the box's ledger row says so, green. Made without a ledger: null, and the row says nothing
    accounts for it, red for a release drawn by the secure sampler (it must be weighed before publishing), unflagged
    for a simulation."""
    import html as markup

    ledger = tmp_path / "l.json"
    assert main(["ledger", "init", str(ledger)]) == 0
    assert main(["ledger", str(ledger), "--set-budget", "czech", "--epsilon", "2"]) == 0
    capsys.readouterr()
    audit, page = audit_of(tmp_path, capsys, "release", "czech", "--epsilon", "0.5", "--simulate", "--seed", "2",
                           "--ledger", ledger)
    book = json.loads(ledger.read_text())
    (number, record), = [(i + 1, r) for i, r in enumerate(book["records"]) if r.get("release_id")]
    assert number == 2  # the budget's record is the first
    charged = audit["ledger_charge"]
    assert charged == {"ledger": str(ledger), "ledger_id": book["ledger_id"], "dataset": "czech",
                       "record": number, "release_id": record["release_id"], "guarantee": record["guarantee"]}
    assert charged["release_id"] == audit["release"]["release_id"] and charged["guarantee"]["loss"]["epsilon"] == 0.5
    row = {r["item"]: r for r in audit["at_a_glance"]}["ledger"]
    assert row["flag"] == "ok" and row["value"].startswith("charged to the dataset czech: epsilon=0.5 (pure)")
    assert row["value"].endswith(f"; in the ledger {ledger} (id {book['ledger_id']}), its record {number}; release id "
                                 f"{record['release_id']}") and markup.escape(row["value"]) in page
    for argv, flag in [(["--simulate", "--seed", "2"], ""), ([], "bad")]:
        out = tmp_path / f"without-{flag}" / "rel"
        out.parent.mkdir()
        assert main(["release", "czech", "--epsilon", "0.5", *argv, "--out", str(out)]) == 0
        said = capsys.readouterr().out  # the terminal says it too, for the publishable release
        assert ("ledger:   none: no privacy budget accounts for this release" in said) is (flag == "bad")
        audit = json.loads((out / "internal" / "audit.json").read_text())
        row = {r["item"]: r for r in audit["at_a_glance"]}["ledger"]
        assert audit["ledger_charge"] is None and row["value"].startswith("not charged") and row["flag"] == flag


def test_an_unfit_release_is_red_at_a_glance(tmp_path, capsys):
    # Edwards (n = 70) at epsilon 0.05: the noise dwarfs the table. The box flags the worst error (a share of n
    # above UNFIT_ERROR_SHARE) and counts the warnings, each computed here from the audit's own numbers.
    audit, _ = audit_of(tmp_path, capsys, "release", "edwards", "--epsilon", "0.05", "--simulate", "--seed", "1")
    glance = {row["item"]: row for row in audit["at_a_glance"]}
    ev = audit["evaluation"]
    assert ev["max_l1_error"] / 70 > 0.25 and glance["worst margin error"]["flag"] == "bad"
    assert glance["released total"]["flag"] == ("bad" if abs(ev["n_released"] - 70) > 7 else "ok")
    public = audit["release"]["warnings"]
    internal = [n for n in audit["notes"] if n not in public]
    assert glance["warnings"] == {"item": "warnings", "value": f"{len(public) + len(internal)} (listed below)",
                                  "flag": "bad"}


def test_a_large_released_total_is_written_whole_on_the_audit_page(tmp_path):
    # n' of 875,000,017 was shown as 8.75e+08 beside n = 875000000 (found trying the tool with large counts).
    import re

    import tabrelease as tr
    from tabrelease.reports import _count_text

    assert _count_text(875000017.0) == "875000017" and _count_text(877.25) == "877.2" and _count_text(3) == "3"
    table = tr.builtin_table("czech")
    big = table.with_counts(table.counts.astype(np.int64) * 10**6)
    out = tmp_path / "r"
    tr.publish_release(big, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[(0, 1), (2, 3)], mode="simulation",
                                           seed=1), out)
    page = (out / "internal" / "audit.html").read_text()
    text = page.split("<svg")[0]  # the page's text before the figures
    assert "e+0" not in text and re.search(r"n&#39; = \d{9}", text) and re.search(r"→ \d{9}", text)
    # The change in the total reads the same in the box and in "What the release did" (a new user saw "+0.015%"
    # beside "over by 8 (0.0%)").
    audit = json.loads((out / "internal" / "audit.json").read_text())["evaluation"]
    change = audit["n_released"] - audit["n"]
    assert change != 0 and abs(change) / audit["n"] < 5e-4  # where one decimal of a percent would read 0.0%
    percent = np.format_float_positional(100 * abs(change) / audit["n"], precision=2, unique=False, fractional=False,
                                         trim="-")  # two significant figures, written out
    assert f"by {_count_text(abs(change))} ({percent}%)" in text and "(0.0%)" not in text and "e-0" not in text


def test_the_page_describes_the_varied_total_only_where_the_audit_simulated_it(tmp_path):
    """The page explains how the simulation's total was chosen, and its batches of runs, where audit.json's
    reference says so: the total conditioned on the release's; for an audit written before, rendered again from the
    file, the reflected total it had (and its batches' grouped standard error), or nothing of either."""
    import json

    import tabrelease as tr
    from tabrelease.error_model import BATCHES_ADDED, TOTAL_CONDITIONED, TOTALS_REFLECTED
    from tabrelease.reports import render_audit_html

    out = tmp_path / "r"
    tr.publish_release(tr.builtin_table("rochdale"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=2),
                       out)
    audit = json.loads((out / "internal" / "audit.json").read_text())
    simulated = audit["evaluation"]["simulated_errors"]
    assert simulated["reference"].endswith(TOTAL_CONDITIONED + BATCHES_ADDED)
    conditioned, reflected = "Each run's world has a total the truth's may have had", "The world's total is varied"
    batched, grouped = "The runs come in batches of 60", "the runs sharing a released total taken together"
    page = (out / "internal" / "audit.html").read_text()
    assert conditioned in page and batched in page and reflected not in page and grouped not in page
    base = simulated["reference"][: -len(TOTAL_CONDITIONED + BATCHES_ADDED)]
    simulated["reference"] = base + TOTALS_REFLECTED + BATCHES_ADDED  # written at stop 40
    older = render_audit_html(audit)
    assert reflected in older and grouped in older and conditioned not in older
    simulated["reference"] = base + TOTALS_REFLECTED  # before the batches
    assert reflected in render_audit_html(audit) and batched not in render_audit_html(audit)
    simulated["reference"] = base  # before the total was varied
    page = render_audit_html(audit)
    assert reflected not in page and conditioned not in page and "The world they are simulated on" in page


@pytest.fixture(scope="module")
def titanic_audit(tmp_path_factory):
    """A default release of Titanic at epsilon 1 (seed 2): a reader of its audit.json and its page."""
    import json

    import tabrelease as tr

    out = tmp_path_factory.mktemp("titanic") / "r"
    tr.publish_release(tr.builtin_table("titanic"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=2),
                       out)
    return (lambda: json.loads((out / "internal" / "audit.json").read_text()),
            (out / "internal" / "audit.html").read_text())


def test_the_page_says_how_the_runs_were_seeded(titanic_audit):
    """An audit's runs are seeded from the released margins, and its page says so (the reference's marker is
    explained, not echoed); an audit written before, with one fixed seed, rendered again from its file, says fixed
    seeds."""
    from tabrelease.error_model import SEEDED_FROM_THE_RELEASE
    from tabrelease.reports import render_audit_html

    read, page = titanic_audit
    audit = read()
    simulated = audit["evaluation"]["simulated_errors"]
    assert SEEDED_FROM_THE_RELEASE in simulated["reference"]
    assert "estimator, seeded from the released margins;" in page and "fixed seeds" not in page
    assert SEEDED_FROM_THE_RELEASE not in page
    simulated["reference"] = simulated["reference"].replace(SEEDED_FROM_THE_RELEASE, "")  # written before
    older = render_audit_html(audit)
    assert "estimator, with fixed seeds;" in older and "seeded from the released margins" not in older


def test_the_page_says_how_the_runs_stand_in_for_the_rounding(titanic_audit):
    """The audit's runs are not rounded; with the default controlled rounding each run's margin cells are rounded to
    their nearest integers, and the reference and page say so (in words of their own, the reference's text not
    repeated in the world's description); a page rendered from an audit written before says the rounding is not
    simulated."""
    from tabrelease.error_model import ROUNDED_LIKE
    from tabrelease.reports import render_audit_html

    read, page = titanic_audit
    audit = read()
    simulated = audit["evaluation"]["simulated_errors"]
    assert ROUNDED_LIKE["controlled"] in simulated["reference"]
    assert page.count("margin cells rounded to their nearest integers") == 1
    assert "; each run's margin cells rounded to their nearest integers, where the release's controlled rounding " \
           "puts most of them (it is not run: it is most of a release's time). They are post-processing" in page
    simulated["reference"] = simulated["reference"].replace(ROUNDED_LIKE["controlled"], "")  # written before
    older = render_audit_html(audit)
    assert "rounding, which keeps each cell within 1 of the fit, is not simulated" in older
    assert "nearest integers" not in older


def test_the_page_explains_the_worlds_move_toward_the_release_where_the_audit_made_one(tmp_path):
    """Journey to work's default plan puts noise on every cell: audit.json's reference states the share the world
    was moved by, and the page explains the move with that share (and not as part of the world's name). Rochdale's
    plan measures margins: neither says anything of a move."""
    import json

    import tabrelease as tr
    from tabrelease.error_model import TOWARD_THE_RELEASE
    from tabrelease.reports import render_audit_html

    explained = "so the released table's cells say more of the table than its margins"
    for name, moved in [("journey_to_work", True), ("rochdale", False)]:
        out = tmp_path / name
        tr.publish_release(tr.builtin_table(name), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=3),
                           out)
        reference = json.loads((out / "internal" / "audit.json").read_text())["evaluation"]["simulated_errors"][
            "reference"]
        page = (out / "internal" / "audit.html").read_text()
        assert (TOWARD_THE_RELEASE in reference) is moved and (explained in page) is moved
        assert "does not explain: " not in page  # the reference's own wording is not pasted into the world's name
        if moved:
            share = reference.split(TOWARD_THE_RELEASE)[1].split(";")[0]
            assert 0.5 < float(share) < 1 and f"by the share {share} of the released table's departure" in page
            assert f"moved toward the released table by the share {share} (below)" in page
            assert "less smooth than the table of greatest entropy by that share" in page
            # A share of 0 (the noise explains the whole departure): the page says the world was not moved.
            audit = json.loads((out / "internal" / "audit.json").read_text())
            simulated = audit["evaluation"]["simulated_errors"]
            simulated["reference"] = reference.replace(TOWARD_THE_RELEASE + share, TOWARD_THE_RELEASE + "0")
            unmoved = render_audit_html(audit)
            assert "here the noise explains all of it (the share is 0)" in unmoved and "by the share 0 " not in unmoved
            assert "the smoothest table with the released margins (which carry" in unmoved
            assert "less smooth than" not in unmoved


def test_the_page_explains_the_shrink_of_the_released_margins_with_the_share_kept(tmp_path):
    """A least-squares release's world is built on its released table shrunk toward its lower-order fit: audit.json's
    reference states the share kept, and the page names it in the world's description and explains it in a sentence
    of its own (not the reference's wording pasted in). With the shrink's part taken out of the reference (an audit
    of another estimator, or one written before stop 48), the page says nothing of a shrink."""
    import json

    import tabrelease as tr
    from tabrelease.error_model import SHRUNK_TOWARD_LOWER_ORDER
    from tabrelease.reports import render_audit_html

    out = tmp_path / "titanic"
    tr.publish_release(tr.builtin_table("titanic"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=3),
                       out)
    audit = json.loads((out / "internal" / "audit.json").read_text())
    reference = audit["evaluation"]["simulated_errors"]["reference"]
    keep = reference.split(SHRUNK_TOWARD_LOWER_ORDER)[1].split(";")[0]
    assert 0 <= float(keep) <= 1
    page = (out / "internal" / "audit.html").read_text()
    assert f"first shrunk toward its lower-order fit, keeping the share {keep} (below)" in page
    assert f"keeping the share {keep} of its margins' departure from that fit" in page
    assert "do not make by noise alone: " not in page
    audit["evaluation"]["simulated_errors"]["reference"] = reference.replace(SHRUNK_TOWARD_LOWER_ORDER + keep, "")
    unshrunk = render_audit_html(audit)
    assert "shrunk" not in unshrunk


def test_the_page_explains_the_world_s_correction_for_the_fit_s_bias(tmp_path):
    """A least-squares release's world is corrected for the non-negative fit's bias last
    (`corrected_for_the_fits_bias`): audit.json's reference says so with its rounds and releases, and the page says
    it in a sentence of its own with those counts (the reference's wording not pasted in). With that part taken out
    of the reference (an audit of another estimator, or one written before stop 49), the page says nothing of it."""
    import json

    import tabrelease as tr
    from tabrelease.error_model import BIAS_RELEASES, BIAS_ROUNDS, CORRECTED_FOR_THE_FITS_BIAS
    from tabrelease.reports import render_audit_html

    out = tmp_path / "titanic"
    tr.publish_release(tr.builtin_table("titanic"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=3),
                       out)
    audit = json.loads((out / "internal" / "audit.json").read_text())
    reference = audit["evaluation"]["simulated_errors"]["reference"]
    part = CORRECTED_FOR_THE_FITS_BIAS.format(rounds=BIAS_ROUNDS, releases=BIAS_RELEASES)
    assert part in reference
    page = (out / "internal" / "audit.html").read_text()
    assert f"Last, in {BIAS_ROUNDS} rounds, {BIAS_RELEASES} releases of the world are drawn" in page
    assert "its margins then corrected as said, not the truth" in page
    assert "mean margins of" not in page
    audit["evaluation"]["simulated_errors"]["reference"] = reference.replace(part, "")
    uncorrected = render_audit_html(audit)
    assert "Last, in" not in uncorrected and "corrected as said" not in uncorrected
    audit["evaluation"]["simulated_errors"]["reference"] = reference.replace(part, part.replace("3 rounds", "2 rounds"))
    assert "Last, in 2 rounds, " in render_audit_html(audit)


def test_the_page_says_a_released_total_is_exact_only_where_it_is(tmp_path):
    """A public total is released exactly: the page says so, not "over by 0 (0.0%)"; a noisy total's page gives its
    direction and size, from audit.json's n and n'."""
    import json

    import tabrelease as tr

    for name, options in [("public", {"public_total": True}), ("noisy", {})]:
        out = tmp_path / name
        tr.publish_release(tr.builtin_table("czech"), tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=3,
                                                                      options=options), out)
        audit = json.loads((out / "internal" / "audit.json").read_text())
        n, released = audit["evaluation"]["n"], audit["evaluation"]["n_released"]
        page = (out / "internal" / "audit.html").read_text()
        if name == "public":
            assert n == released and "states the population's size exactly" in page and "by 0 (" not in page
        else:
            assert n != released and "states the population's size exactly" not in page
            assert f"{'over' if released > n else 'under'} by {abs(released - n):g} (" in page


def test_an_audit_whose_batches_the_work_limit_cut_says_so(tmp_path, monkeypatch):
    """The runs come in as many batches as a first batch asks for, within a limit on the fits' work. The reference
    said only the first, so an audit the limit cut short (a RAP release's, whose fits are long) claimed a precision
    it did not have. Here the limit is lowered to one batch of an audit that asks for several (Edwards' two-way
    margins at epsilon 0.05): its figures are the first batch's, and the reference and the page say how many of how
    many the limit allowed."""
    import json
    from itertools import combinations

    import tabrelease as tr
    from tabrelease import error_model
    from tabrelease.error_model import AUDIT_RUNS, BATCHES_LIMITED, FIRST_BATCH_KEPT

    table = tr.builtin_table("edwards")
    spec = tr.ReleaseSpec(loss=tr.loss_of(0.05), margins=list(combinations(range(6), 2)), mode="simulation", seed=2)
    release = tr.release_margins(table, spec)
    whole, _ = error_model.released_table_errors(release)
    wanted = whole.runs // AUDIT_RUNS
    assert wanted > 2 and "the limit on the simulation's work" not in whole.reference
    for allowed in (1, 2):
        monkeypatch.setattr(error_model, "MAX_SIMULATED_CELL_RUNS", allowed * AUDIT_RUNS * table.counts.size)
        out = tmp_path / f"r{allowed}"
        tr.publish_release(table, spec, out)
        simulated = json.loads((out / "internal" / "audit.json").read_text())["evaluation"]["simulated_errors"]
        assert simulated["runs"] == allowed * AUDIT_RUNS
        kept = FIRST_BATCH_KEPT if allowed == 1 else ""  # one batch: its figures are the first's, not further ones
        assert simulated["reference"].endswith(BATCHES_LIMITED.format(count=allowed, wanted=wanted) + kept)
        page = (out / "internal" / "audit.html").read_text()
        said = (f"Here the limit on the work allowed {allowed} of the {wanted} batches the first asked for, so the "
                "mean is known less precisely than that" + (", and the figures are the first batch's own" if kept
                                                             else "") + ".")
        assert said in page
        assert "limit on the simulation" not in page and "batch's own" not in page.split("The runs come in")[0]


def test_the_page_says_where_the_release_barely_tells_its_total(tmp_path):
    """Where the audit's reference says the released total is within its interval's reach of 0 (Edwards at epsilon
    0.05, this seed: total 18, sd 126), the page says so in a paragraph of its own with both figures, and the
    reference's words are not pasted into the world's description; rendered again without them, it says nothing."""
    import json

    import tabrelease as tr
    from tabrelease.error_model import TOTAL_UNCERTAIN
    from tabrelease.reports import render_audit_html

    out = tmp_path / "r"
    tr.publish_release(tr.builtin_table("edwards"),
                       tr.ReleaseSpec(loss=tr.loss_of(0.05), mode="simulation", seed=3), out)
    audit = json.loads((out / "internal" / "audit.json").read_text())
    simulated = audit["evaluation"]["simulated_errors"]
    said = TOTAL_UNCERTAIN.format(total="18", z="1.96", sd="126", level="95")
    assert simulated["reference"].endswith(said)
    page = (out / "internal" / "audit.html").read_text()
    paragraph = ("Here the release barely tells its total</strong>: the released total 18 is within 1.96 standard "
                 "deviations of 0 (the noise in it has standard deviation 126), so a 95% interval for the total "
                 "reaches 0.")
    assert paragraph in page and "so its 95% interval reaches 0" not in page  # the reference's words not pasted
    assert "a total the release barely tells" in page  # the warning, among the audit's warnings
    assert "This release is empty" not in page and "the release is empty (every released cell 0)" not in page
    base = simulated["reference"][: -len(said)]
    # Another level, and the work limit's words after it (the reference's order): both read back.
    from tabrelease.error_model import BATCHES_LIMITED, FIRST_BATCH_KEPT

    simulated["reference"] = (base + TOTAL_UNCERTAIN.format(total="1.23457e+06", z="2.81", sd="1.23e+06",
                                                            level="99.5")
                              + BATCHES_LIMITED.format(count=1, wanted=4) + FIRST_BATCH_KEPT)
    page = render_audit_html(audit)
    assert ("the released total 1.23457e+06 is within 2.81 standard deviations of 0 (the noise in it has standard "
            "deviation 1.23e+06), so a 99.5% interval for the total reaches 0.") in page
    assert "allowed 1 of the 4 batches the first asked for" in page and "so its 99.5% interval" not in page
    simulated["reference"] = base
    assert "Here the release barely tells" not in render_audit_html(audit)


def test_a_public_total_is_not_called_noisy(tmp_path):
    """With a public total the audit's runs all have it (no noise in it): the reference says so (TOTAL_PUBLIC, not
    TOTAL_CONDITIONED), and the page says the total is public and nothing of a noisy total (a new user's trial found
    "the released total is noisy" on such a page)."""
    import json

    import tabrelease as tr
    from tabrelease.error_model import TOTAL_CONDITIONED, TOTAL_PUBLIC

    out = tmp_path / "r"
    tr.publish_release(tr.builtin_table("edwards"), tr.ReleaseSpec(loss=tr.loss_of(0.05), mode="simulation", seed=12,
                                                                   options={"public_total": True}), out)
    simulated = json.loads((out / "internal" / "audit.json").read_text())["evaluation"]["simulated_errors"]
    assert TOTAL_PUBLIC in simulated["reference"] and TOTAL_CONDITIONED not in simulated["reference"]
    page = (out / "internal" / "audit.html").read_text()
    assert "The total is public: the release gives it exactly, so every run's world has it" in page
    assert "the released total is noisy" not in page and "barely tells" not in page


def test_an_empty_release_s_page_says_why_its_fit_figures_are_not_defined(tmp_path):
    """Edwards at epsilon 0.05, seed 12: the released total came out 0. Its margins are consistent and its table
    is released (all zeros), so the page must not say "the released margins are inconsistent" or "no released
    table" (a new user's trial found both beside "consistency: global"); it says the release is empty."""
    import tabrelease as tr

    out = tmp_path / "r"
    done = tr.publish_release(tr.builtin_table("edwards"),
                              tr.ReleaseSpec(loss=tr.loss_of(0.05), mode="simulation", seed=12), out)
    assert done.release.n_released == 0 and done.release.consistent
    page = (out / "internal" / "audit.html").read_text()
    said = "not defined: the release is empty (its total is 0), and no model is fitted to it"
    assert f"<tr><th>G² released</th><td>{said}</td></tr>" in page
    assert f"<tr><th>MLE distance, original vs released</th><td>{said}</td></tr>" in page
    assert "the released margins are inconsistent" not in page and "not defined: no released table" not in page
    # Its error is exactly n in every margin (each released cell 0): the page says so, with the interval's upper end
    # (1.96 x 126, the noise in the total's sd as the barely-tells paragraph gives it), and the warning says it too.
    assert ("This release is empty</strong>: every released cell is 0, so each margin's L1 error is exactly the "
            "table's total, which the release does not tell; by the same interval it is at most about 1.96 × 126 = "
            "247. The simulated figures above are those of releases of an empty world") in page
    import html

    assert ("the release is empty (every released cell 0): each margin's error is exactly the table's total"
            in html.unescape(page))
    assert "a total the release barely tells" not in page  # the empty release's warning in its place


def test_the_released_totals_change_never_reads_as_zero_when_it_is_not():
    from tabrelease.reports import _percent_change

    assert _percent_change(-2, 4526) == "-0.044%"  # 100 * 2 / 4526 = 0.0442 (a user saw "-0.0%")
    assert _percent_change(30, 70) == "+42.9%" and _percent_change(-7, 70) == "-10.0%"
    assert _percent_change(0, 70) == "+0%"
    assert _percent_change(1, 10**8) == "+0.000001%" and _percent_change(-3, 10**7) == "-0.00003%"  # no "1e-06%"


@pytest.mark.parametrize("mechanism, extra", [("margins", []), ("cells", ["--estimator", "as-measured"])])
def test_negative_published_counts_are_never_called_the_margins_of_one_non_negative_table(mechanism, extra, tmp_path):
    """A new user's trial: `--rounding none` on an estimator without non-negativity published x,u = -1.76, and the
    audit's consistency row said "global: the released margins are those of one non-negative table". Where any
    published cell is negative the claim is now "local" (they agree, but are no non-negative table's), in
    release.json and the audit alike; where none is, it stays global ([AB][BC] is decomposable: non-negative margins
    that agree are one non-negative table's). Each case's negativity is read off the published files."""
    import csv

    (tmp_path / "t.csv").write_text("A,B,C,count\nx,u,p,0\nx,u,q,0\nx,v,p,1\nx,v,q,0\ny,u,p,0\ny,u,q,2\n"
                                    "y,v,p,30\ny,v,q,12\n")
    claims = set()
    for seed in range(1, 7):
        out = tmp_path / f"{mechanism}-{seed}"
        assert main(["release", str(tmp_path / "t.csv"), "--margins", "[A,B][B,C]", "--epsilon", "1", "--mechanism",
                     mechanism, *extra, "--rounding", "none", "--simulate", "--seed", str(seed), "--out",
                     str(out)]) == 0
        public = json.loads((out / "public" / "release.json").read_text())
        cells = [float(row["count"]) for m in public["margins"]
                 for row in csv.DictReader(open(out / "public" / m["file"], encoding="utf-8"))]
        audit = json.loads((out / "internal" / "audit.json").read_text())
        glance = {r["item"]: r for r in audit["at_a_glance"]}
        negative = min(cells) < 0
        claims.add(negative)
        if public["consistent"]:
            assert public["consistency"] == ("local" if negative else "global"), (seed, min(cells))
            assert glance["consistency"]["value"].startswith("local only" if negative else "global")
        else:
            assert public["consistency"] == "none"
    assert any(claims)  # at least one of the six published a negative count
