import json
import subprocess
import sys

import numpy as np
import pytest

from tabrelease import builtin_table
from tabrelease.cli import main


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.figures
def test_release_writes_public_and_internal(capsys, tmp_path):
    out = tmp_path / "rel"
    code, stdout, _ = run_cli(capsys, "release", "journey_to_work", "--epsilon", "1", "--mechanism", "auto",
                              "--out", out)
    assert code == 0, stdout
    public = sorted(p.name for p in (out / "public").iterdir())
    # Files named for people (the built-in table's variable labels), letters kept in release.json.
    assert public == ["home_zone__income.csv", "home_zone__work_zone.csv", "release.json", "work_zone__income.csv"]
    assert sorted(p.name for p in (out / "internal").iterdir()) == ["audit.html", "audit.json", "released_table.csv"]
    rel = json.loads((out / "public" / "release.json").read_text())
    assert rel["mechanism"] == "efron-stein" and rel["noise"]["mode"] == "release"
    assert rel["noise"]["sampler"] == "OpenDP (secure)"
    assert rel["noise"]["sensitivity"] == pytest.approx(439 / 256)
    assert rel["noise"]["scale"] == pytest.approx(439 / 256)
    # The guarantee in one sentence, on the terminal and in release.json.
    assert rel["privacy"] == "epsilon=1 differential privacy (pure) for add-remove neighbours: Laplace noise"
    assert f"privacy:  {rel['privacy']}" in stdout
    audit = json.loads((out / "internal" / "audit.json").read_text())
    ev = audit["evaluation"]
    assert ev["n"] == 2291 and ev["g2_original"] == pytest.approx(262.93, abs=0.005)
    assert audit["lp"]["b_star"] >= 0 and set(ev["l1_error_by_margin"]) == {"[AB]", "[AC]", "[BC]"}
    # the released margins in public/ are those of w', so they agree with each other
    import pandas as pd

    ab = pd.read_csv(out / "public" / "home_zone__work_zone.csv", dtype=str)
    ac = pd.read_csv(out / "public" / "home_zone__income.csv", dtype=str)
    ab["count"], ac["count"] = ab["count"].astype(int), ac["count"].astype(int)
    assert ab.groupby("home_zone")["count"].sum().to_dict() == ac.groupby("home_zone")["count"].sum().to_dict()
    files = {m["label"]: m["file"] for m in rel["margins"]}
    assert files == {"[AB]": "home_zone__work_zone.csv", "[AC]": "home_zone__income.csv",
                     "[BC]": "work_zone__income.csv"}
    assert ev["n_released"] == ab["count"].sum()
    html = (out / "internal" / "audit.html").read_text()
    assert "LP b*" in html and "Do not publish" in html


def test_public_release_json_does_not_depend_on_the_counts(capsys, tmp_path):
    # Two tables of the same shape and levels but different counts: release.json must be the same but for the
    # variables' names for people and the files' names, so nothing in it was computed from the confidential counts.
    rochdale = builtin_table("rochdale")
    shuffled = rochdale.to_frame()
    shuffled["count"] = np.random.default_rng(0).permutation(shuffled["count"].to_numpy()) * 3
    path = tmp_path / "other.csv"
    shuffled.to_csv(path, index=False)
    spec = "[ACE][ACG][ADG][BDH][BF][BE][CEF][CFG]"
    docs = []
    for source, name in [("rochdale", "a"), (path, "b")]:
        code, _, err = run_cli(capsys, "release", source, "--epsilon", "0.7", "--margins", spec, "--out", tmp_path / name)
        assert code == 0, err
        doc = json.loads((tmp_path / name / "public" / "release.json").read_text())
        # Names for people come from the built-in table's metadata (the CSV copy has none): not from counts.
        for variable in doc["variables"]:
            variable.pop("label"), variable.pop("level_labels")
        for margin in doc["margins"]:
            margin.pop("file")
        docs.append(doc)
    assert docs[0] == docs[1]


def test_simulation_is_reproducible_and_labelled(capsys, tmp_path):
    for name in ("s1", "s2"):
        code, stdout, _ = run_cli(capsys, "release", "edwards", "--epsilon", "1", "--simulate", "--seed", "42", "--out", tmp_path / name)
        assert code == 0 and "simulation mode" in stdout
    for f in ("a367__p53a.simulation.csv", "c365__la10.simulation.csv"):
        assert (tmp_path / "s1" / "public" / f).read_text() == (tmp_path / "s2" / "public" / f).read_text()
    # Each margin file says in its name that its noise was simulated (a new user's trial: copied out of the bundle,
    # a simulated margin had been indistinguishable from a secure one).
    files = [p.name for p in (tmp_path / "s1" / "public").iterdir() if p.name != "release.json"]
    assert files and all(f.endswith(".simulation.csv") for f in files)
    rel = json.loads((tmp_path / "s1" / "public" / "release.json").read_text())
    assert rel["noise"]["mode"] == "simulation" and any("do not publish" in w for w in rel["warnings"])


def test_a_release_at_a_large_epsilon_says_its_guarantee_is_weak(capsys, tmp_path):
    """A new user's release at epsilon 300 was every margin exact and said "warnings: none". Past epsilon 10 the
    terminal and release.json say the guarantee is weak, with e^epsilon (e^300 computed here by Python's own
    exponent); at 10 they do not."""
    import math

    for epsilon, weak in ((10, False), (10.5, True), (300, True)):
        out = tmp_path / f"e{epsilon}"
        code, stdout, _ = run_cli(capsys, "release", "czech", "--epsilon", epsilon, "--simulate", "--seed", "1",
                                  "--out", out)
        warnings = json.loads((out / "public" / "release.json").read_text())["warnings"]
        assert code == 0
        assert any(w.startswith(f"epsilon {epsilon:g} is a weak guarantee") for w in warnings) is weak
        assert ("is a weak guarantee" in stdout) is weak
    assert f"({math.exp(300):.3g})" in stdout


def test_paper_calibration_says_epsilon_does_not_hold(capsys, tmp_path):
    code, stdout, _ = run_cli(capsys, "release", "journey_to_work", "--epsilon", "1", "--calibration", "paper",
                              "--mechanism", "auto", "--out", tmp_path / "p")
    assert code == 0 and "does not hold" in stdout
    rel = json.loads((tmp_path / "p" / "public" / "release.json").read_text())
    assert rel["noise"]["calibration"] == "paper" and rel["noise"]["epsilon_holds"] is False
    assert rel["noise"]["epsilon_actual"] == pytest.approx(1.2988, abs=1e-4)
    assert "Laplace noise (the noise gives only epsilon=1.2988" in rel["privacy"]


def test_existing_output_is_refused_unless_forced(capsys, tmp_path):
    out = tmp_path / "rel"
    assert run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", out)[0] == 0
    code, _, err = run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", out)
    assert code == 2 and "already exists" in err
    assert run_cli(capsys, "release", "czech", "--epsilon", "2", "--out", out, "--force")[0] == 0
    assert json.loads((out / "public" / "release.json").read_text())["epsilon"] == 2.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel"]  # no staging folders left behind


def test_force_never_replaces_a_folder_that_is_not_a_release(capsys, tmp_path):
    # A mistyped --out with --force must not delete someone's folder.
    documents = tmp_path / "documents"
    documents.mkdir()
    (documents / "thesis.tex").write_text("years of work")
    code, _, err = run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", documents, "--force")
    assert code == 2 and "not a release folder" in err and "thesis.tex" in err
    assert [p.name for p in documents.iterdir()] == ["thesis.tex"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["documents"]
    # Refused before the budget is charged: the ledger is never created.
    code, _, err = run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", documents, "--force",
                           "--ledger", tmp_path / "ledger.json")
    assert code == 2 and "not a release folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["documents"]


def test_force_never_deletes_a_ledger_kept_inside_a_bundle(capsys, tmp_path, monkeypatch):
    """A new user's trial: a ledger kept in a bundle's internal/ was deleted by --force with its key and anchor, and
    its dataset's budget started again from nothing; with --ledger inside --out the release was charged and its
    ledger then deleted. Each is refused before anything is charged or removed, naming the ledger."""
    from tabrelease.ledger import budget_status, init_ledger, set_budget

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    spring = tmp_path / "spring"
    assert run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", spring, "--simulate", "--seed", "1")[0] == 0
    ledger = init_ledger(spring / "internal" / "ledger.json")
    set_budget(ledger, "czech", 1.0)
    before = sorted(p.name for p in (spring / "internal").iterdir())
    code, _, err = run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", spring, "--force", "--simulate",
                           "--seed", "2")
    assert code == 2 and err.count("\n") == 1 and "internal/ledger.json" in err and "no release wrote" in err
    code, _, err = run_cli(capsys, "release", "czech", "--epsilon", "0.5", "--out", spring, "--force",
                           "--ledger", ledger, "--dataset", "czech")
    assert code == 2 and "internal/ledger.json" in err
    assert sorted(p.name for p in (spring / "internal").iterdir()) == before
    assert budget_status(ledger, "czech").epsilon_spent == 0
    # A stray file in public/ too; a bundle with only its own files (a workbook and a charge among them) is replaced.
    autumn = tmp_path / "autumn"
    assert run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", autumn, "--simulate")[0] == 0
    (autumn / "public" / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", autumn, "--force", "--simulate")
    assert code == 2 and "(public/notes.txt)" in err and (autumn / "public" / "notes.txt").read_text() == "mine"
    charged = tmp_path / "charged"
    other = init_ledger(tmp_path / "other.json")
    set_budget(other, "czech", 3.0)
    assert run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", charged, "--xlsx", "--ledger", other,
                   "--dataset", "czech")[0] == 0
    from tabrelease.bundle import INTERNAL_FILES, files_a_release_did_not_write

    assert files_a_release_did_not_write(charged) == []
    assert sorted(p.name for p in (charged / "internal").iterdir()) == sorted(INTERNAL_FILES)
    assert run_cli(capsys, "release", "czech", "--epsilon", "1", "--out", charged, "--force", "--ledger", other,
                   "--dataset", "czech")[0] == 0


def test_solver_failure_is_reported_and_leaves_nothing(capsys, tmp_path, monkeypatch):
    from tabrelease import consistency
    from tabrelease.errors import TabreleaseError

    def failing(self, noisy):
        raise TabreleaseError("the consistency LP did not solve: HiGHS says Time limit reached")

    monkeypatch.setattr(consistency.ConsistencyProblem, "solve", failing)
    code, _, err = run_cli(capsys, "release", "edwards", "--epsilon", "1", "--mechanism", "auto",
                           "--out", tmp_path / "out")
    assert code == 2 and "did not solve" in err
    assert list(tmp_path.iterdir()) == []


def test_failure_while_writing_leaves_nothing(capsys, tmp_path, monkeypatch):
    from tabrelease import reports

    def broken(audit, figures=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(reports, "render_audit_html", broken)
    code, _, err = run_cli(capsys, "release", "edwards", "--epsilon", "1", "--out", tmp_path / "out")
    assert code == 2 and "No space left" in err
    assert list(tmp_path.iterdir()) == []


def test_table8_command(capsys):
    code, out, _ = run_cli(capsys, "table8", "--json")
    doc = json.loads(out)
    assert code == 0 and len(doc["rows"]) == 12
    assert any("|B| = 29" in f for f in doc["findings"])


def test_a_margin_inside_another_is_reported_not_dropped_silently(tmp_path, capsys):
    from tabrelease.cli import main

    code = main(["release", "czech", "--margins", "[AB][A][BC]", "--epsilon", "1", "--simulate", "--seed", "1",
                 "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 0 and "released 2 margins" in out
    assert "not released separately, being inside another released margin (sum that one to get it): [A]" in out
    public = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    assert any("inside another released margin" in w and "[A]" in w for w in public["warnings"])
    assert [m["label"] for m in public["margins"]] == ["[AB]", "[BC]"]
    # A table's own variables name it, not letters that depend on which variables were read.
    csv = tmp_path / "t.csv"
    csv.write_text("région,sexe,âge,count\n" + "".join(f"{r},{s},{a},{3 + i}\n" for i, (r, s, a) in enumerate(
        (r, s, a) for r in "ab" for s in "hf" for a in "12")), encoding="utf-8")
    code = main(["release", str(csv), "--margins", "[région,sexe][sexe][sexe,âge]", "--epsilon", "1", "--simulate",
                 "--seed", "1", "--out", str(tmp_path / "named")])
    out = capsys.readouterr().out
    assert code == 0 and "(sum that one to get it): [sexe]" in out


@pytest.mark.unit
def test_published_files_are_named_for_people_and_told_apart_on_a_clash():
    from tabrelease.reports import margin_files
    from tabrelease.tables import ContingencyTable

    counts = np.ones((2, 2, 2), int)
    table = ContingencyTable(("hs", "phs", "sex / gender"), (("0", "1"),) * 3, counts)
    # Only "/" is forbidden in a file name: the spaces stay.
    assert margin_files(table, [(0, 1), (1, 2)]) == ["hs__phs.csv", "phs__sex _ gender.csv"]
    clash = ContingencyTable(("a:b", "a?b", "c"), (("0", "1"),) * 3, counts)  # both read a_b on disk
    assert margin_files(clash, [(0, 2), (1, 2)]) == ["a_b__c.csv", "a_b__c~2.csv"]


def test_release_json_output_is_what_was_written(capsys, tmp_path):
    from tabrelease.ledger import init_ledger

    ledger = init_ledger(tmp_path / "ledger.json")
    code = main(["release", "czech", "--epsilon", "0.5", "--simulate", "--seed", "3", "--ledger", str(ledger),
                 "--out", str(tmp_path / "r"), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    printed = json.loads(out)
    assert printed["release"] == json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    assert printed["public"] == str(tmp_path / "r" / "public")
    assert any("do not publish" in w for w in printed["warnings"])
    assert printed["ledger"]["dataset"] == "czech" and printed["ledger"]["epsilon_charged"] == 0.5
    assert printed["seed"] == 3


def test_release_json_output_gives_the_seed_the_tool_drew(capsys, tmp_path):
    """Without --seed a simulation draws its own; --json prints it (as the terminal's line does), and it is the seed
    the audit kept, which replays the release."""
    assert main(["release", "czech", "--epsilon", "0.5", "--simulate", "--out", str(tmp_path / "r"), "--json"]) == 0
    seed = json.loads(capsys.readouterr().out)["seed"]
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    assert isinstance(seed, int) and seed == audit["noise_seed"]


def test_plan_and_sweep_report_a_margin_inside_another(tmp_path, capsys):
    from tabrelease.cli import main

    assert main(["plan", "czech", "--margins", "[AB][A][BC]", "--epsilon", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)["margins"]
    assert [r["margin"] for r in rows] == ["[smoking, mental]", "[mental, physical]"]  # czech's labels
    assert [r["letters"] for r in rows] == ["[AB]", "[BC]"] and err == ""
    assert any("inside another" in n and n.endswith(": [smoking]") for n in json.loads(out)["notes"])
    assert main(["sweep", "czech", "--margins", "[AB][A][BC]", "--epsilons", "1", "--repetitions", "2", "--out",
                 str(tmp_path / "s"), "--jobs", "1", "--quiet"]) == 0
    assert "inside another margin (sum that one to get it): [smoking]" in capsys.readouterr().err


def test_an_unrounded_release_is_published_whole_and_its_audit_recomputes_from_it(capsys, tmp_path):
    """`--rounding none` publishes the fit's values unrounded. Its bundle is written: it failed with "counts must be
    whole numbers" once the release was drawn, in release mode after the charge (a release charged to the ledger and
    never published). internal/released_table.csv holds the fit's values whole (its floats, read back exactly), and
    the audit's figures recompute from that file and the plan (the audit's seed reads its released margins)."""
    import pandas as pd

    import tabrelease as tr
    from tabrelease.error_model import released_table_errors
    from tabrelease.ledger import init_ledger
    from tabrelease.testing import plan_at

    ledger = init_ledger(tmp_path / "ledger.json")
    out = tmp_path / "r"
    code, printed, err = run_cli(capsys, "release", "titanic", "--epsilon", "1", "--rounding", "none", "--ledger",
                                 ledger, "--out", out)
    assert code == 0, err
    charged = [r for r in json.loads(ledger.read_text())["records"] if r.get("release_id")]
    assert len(charged) == 1 and charged[0]["dataset"] == "titanic"
    table = builtin_table("titanic")
    cells = pd.read_csv(out / "internal" / "released_table.csv", dtype={"count": str})
    released = np.zeros(table.shape)
    for row in cells.itertuples(index=False):
        released[tuple(table.levels[j].index(str(v)) for j, v in enumerate(row[:-1]))] = float(row[-1])
    assert (released != np.round(released)).any() and (released >= 0).all()
    public = pd.read_csv(out / "public" / "class__sex.csv")
    assert public["count"].to_numpy() == pytest.approx(np.round(released.sum(axis=(2, 3)).ravel(), 6), abs=1e-6)

    from types import SimpleNamespace

    from tabrelease.planner import with_post_processing

    # The release's plan, unrounded as it was (its runs' margins are then not rounded either: `_rounded_like`).
    plan = with_post_processing(plan_at(table.shape, tr.default_model(table).generators, 1.0), rounding="none")
    simulated = json.loads((out / "internal" / "audit.json").read_text())["evaluation"]["simulated_errors"]
    again, note = released_table_errors(SimpleNamespace(plan=plan, table=released), level=0.95)
    assert note is None and again.reference == simulated["reference"]
    labels = {tr.models.margin_label(g, table.letters): g for g in plan.margins}
    for label, value in simulated["mean_l1_by_margin"].items():
        assert value == pytest.approx(again.mean_l1[labels[label]], rel=1e-9)


def test_an_out_path_too_long_for_the_bundles_files_is_refused_before_the_charge(capsys, tmp_path):
    """Files of 200-byte names (the longest a bundle writes, from 250-character variable names) under an --out of
    4000 bytes failed with "File name too long" after the charge. The longest --out the check allows
    (`bundle.check_writable`) writes such a release whole; one byte more is refused in one line, before the ledger
    is charged, and nothing is left."""
    import os

    from tabrelease.ledger import init_ledger

    if not hasattr(os, "pathconf"):
        pytest.skip("the system states no path limit")
    names = ["v" * 250, "w" * 250]
    table = tmp_path / "t.csv"
    table.write_text(f"{names[0]},{names[1]},count\na,x,5\na,y,3\nb,x,2\nb,y,7\n")
    ledger = init_ledger(tmp_path / "ledger.json")
    limit, deep = int(os.pathconf(tmp_path, "PC_PATH_MAX")), tmp_path / "deep"
    while len(os.fsencode(str(deep))) < limit - 320:  # to 320 bytes short of the limit, no name past 240 bytes
        deep = deep / ("d" * max(1, min(240, limit - 320 - len(os.fsencode(str(deep))) - 1)))
    deep.mkdir(parents=True)
    argv = ["release", table, "--epsilon", "1", "--margins", "[A][B]", "--ledger", ledger]
    over = deep / ("o" * 60)
    code, _, err = run_cli(capsys, *argv, "--out", over)
    most = int(err.split("at most ")[1].split(" bytes")[0])
    assert code == 2 and err.count("\n") == 1 and f"(this one has {len(os.fsencode(str(over)))})" in err, err
    assert len(os.fsencode(str(over))) > most
    records = json.loads(ledger.read_text())["records"]
    assert records == [] and sorted(p.name for p in deep.iterdir()) == []
    for length, expected in ((most + 1, 2), (most, 0)):
        out = deep / ("o" * (length - len(os.fsencode(str(deep))) - 1))  # an --out of `length` bytes
        code, _, err = run_cli(capsys, *argv, "--out", out)
        assert code == expected, err
        assert (f"(this one has {length})" in err) == (expected == 2), err  # the path's length, as the check counts it
    assert len(json.loads(ledger.read_text())["records"]) == 1  # the one release made
    assert any(len(p.name.encode()) >= 200 for p in (out / "public").iterdir())


def test_controlled_rounding_of_cells_as_measured_falls_back_to_the_nearest(capsys, tmp_path):
    """Cells as measured keep the noise's sign: on Edwards at epsilon 0.05 no controlled rounding exists next to
    them (seed after seed), and such a release failed after its charge. It is now rounded to the nearest integers
    (post-processing, no privacy cost), published, charged once, and says so: release.json records the rounding
    done, and the audit the reason."""
    from tabrelease.ledger import init_ledger

    ledger = init_ledger(tmp_path / "ledger.json")
    out = tmp_path / "r"
    code, _, err = run_cli(capsys, "release", "edwards", "--epsilon", "0.05", "--mechanism", "cells", "--rounding",
                           "controlled", "--simulate", "--seed", "1", "--ledger", ledger, "--out", out)
    assert code == 0, err
    assert len([r for r in json.loads(ledger.read_text())["records"] if r.get("release_id")]) == 1
    assert json.loads((out / "public" / "release.json").read_text())["rounding"] == "nearest"
    audit = (out / "internal" / "audit.json").read_text()
    assert "controlled rounding found no integer table or margins next to the cells as measured" in audit


def test_the_release_range_of_epsilon_binds_releases_only(capsys, tmp_path, monkeypatch):
    """A release's epsilon lies within `spec.EPSILON_RANGE` (checked as it is prepared), but planning takes
    epsilons past it (within `spec.PLANNING_EPSILON_RANGE`), in any order, and a loss outside the range is still a loss (old bundles are read again with theirs);
    `plan --target-l1` searches within the range. A system whose path limit is -1 (POSIX: none) refuses no --out."""
    import os

    from tabrelease import ReleaseSpec, TabreleaseError, loss_of, release_margins
    from tabrelease.bundle import check_writable

    for epsilons in ("0.00005,1", "1,0.00005", "800,1"):
        assert run_cli(capsys, "plan", "edwards", "--epsilon", epsilons)[0] == 0
    spec = ReleaseSpec(loss=loss_of(800.0), mode="simulation", seed=1)
    with pytest.raises(TabreleaseError, match="a release's epsilon must lie between 1e-06 and 700, not 800.0"):
        release_margins(builtin_table("edwards"), spec)
    code, printed, _ = run_cli(capsys, "plan", "edwards", "--target-l1", "0.02")
    assert code == 0 and "epsilon beyond 700" in printed
    monkeypatch.setattr(os, "pathconf", lambda path, name: -1)
    check_writable(tmp_path / "o")


def test_sensitive_attributes_may_be_named_as_the_public_files_name_them(capsys, tmp_path):
    """--sensitive class on Titanic (its variable A, named "class" in every public file) was refused as "not a
    variable of this table". It is the same release as --sensitive A: the same public margins at one seed, the same
    guarantee, naming the variable A (so the ledger composes the two alike)."""
    common = ["release", "titanic", "--epsilon", "1", "--mechanism", "sensitive-attributes", "--neighbours",
              "replace", "--simulate", "--seed", "3"]
    by_label, by_letter = tmp_path / "label", tmp_path / "letter"
    assert run_cli(capsys, *common, "--sensitive", "class", "--out", by_label)[0] == 0
    assert run_cli(capsys, *common, "--sensitive", "A", "--out", by_letter)[0] == 0
    files = sorted(p.name for p in (by_letter / "public").iterdir())
    assert files == sorted(p.name for p in (by_label / "public").iterdir())
    for name in files:
        if name != "release.json":
            assert (by_label / "public" / name).read_bytes() == (by_letter / "public" / name).read_bytes()
    label, letter = (json.loads((d / "public" / "release.json").read_text()) for d in (by_label, by_letter))
    assert label["guarantee"] == letter["guarantee"] and "A" in json.dumps(label["guarantee"])


@pytest.mark.parametrize("argv, guarantee", [
    # Local: epsilon 1 for any change of one record, whatever central relation was asked for.
    (["czech", "--mechanism", "randomized-response", "--epsilon", "1"],
     "(epsilon=1 (pure) for each record randomised before collection (local; n public); randomized response, each "
     "record's true cell kept with probability "),
    (["rochdale", "--mechanism", "sensitive-attributes", "--sensitive", "A", "--neighbours", "replace", "--epsilon",
      "0.3"], "(epsilon=0.3 (pure) for the attributes A of one record changed (its other attributes and n public); "),
    # The paper's calibration: the epsilon that holds, 1.29882 (the paper's scale 1.32 for journey to work's
    # efron-stein at epsilon 1), not the 1 asked for.
    (["journey_to_work", "--mechanism", "efron-stein", "--calibration", "paper", "--epsilon", "1"],
     "(epsilon=1.29882 (pure) for one record added or removed; laplace scale 1.32,"),
])
def test_the_first_line_states_the_guarantee_that_holds(argv, guarantee, tmp_path, capsys):
    assert main(["release", *argv, "--simulate", "--seed", "1", "--out", str(tmp_path / "r")]) == 0
    headline = capsys.readouterr().out.splitlines()[0]
    assert guarantee in headline and "calibrated to" not in headline, headline
    stated = json.loads((tmp_path / "r" / "public" / "release.json").read_text())["guarantee"]["loss"]["epsilon"]
    assert f"epsilon={stated:.6g} " in headline


def test_an_interrupt_while_the_command_line_is_imported_is_one_line(monkeypatch, capsys):
    """A reviewer's trial: SIGINT in the command's first tenth of a second printed a full traceback (the console
    script imported `cli` before any handler). The script's first step (`_entry`) imports it inside one: an
    interrupt there is one line and exit 130. (Python's own start-up, before the script runs, stays outside.)"""
    import builtins

    from tabrelease import _entry

    real_import = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "cli" or name.endswith(".cli"):
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    assert _entry.entry() == 130
    out, err = capsys.readouterr()
    assert out == "" and err == "tabrelease: interrupted\n"


def test_an_interrupt_while_the_parser_is_built_is_one_line(monkeypatch, capsys):
    """The review of the fix above: building the parser (about 50 ms) was outside any handler."""
    from tabrelease import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["tables"]) == 130
    assert capsys.readouterr().err == "tabrelease: interrupted\n"


@pytest.mark.e2e
def test_a_signal_while_the_console_script_shuts_down_does_not_replace_its_exit_status(tmp_path):
    """A new user's trial: a completed, charged release exited 130 with no word, a SIGINT having arrived as the
    interpreter shut down. The console script ignores SIGINT, SIGTERM and SIGHUP once its status is decided
    (ignored, not blocked: a mask is one thread's, and CPython's finalisation resets a Python handler to the system's
    but leaves SIG_IGN); `main`, as tests call it, leaves the handlers as they were. Read from an exit hook, and a
    SIGTERM sent there does not change the console script's status."""
    script = ("import atexit, os, signal, sys\n"
              "def late():\n"
              "    said = [signal.getsignal(s) is signal.SIG_IGN for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]\n"
              "    print('ignored' if all(said) else 'heeded', file=sys.stderr)\n"
              "    if all(said):\n"
              "        os.kill(os.getpid(), signal.SIGTERM)\n"
              "atexit.register(late)\n"
              "from tabrelease.cli import entry, main\n"
              "how, sys.argv[1:] = sys.argv[1], sys.argv[2:]\n"
              "sys.exit(entry() if how == 'console' else main())\n")
    argv = ["plan", "rochdale", "--epsilon", "1", "--json"]
    for how, said in (("console", "ignored"), ("main", "heeded")):
        done = subprocess.run([sys.executable, "-c", script, how, *argv], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)
        assert done.returncode == 0 and json.loads(done.stdout)["question"] == "expected_errors"
        assert done.stderr.strip().splitlines()[-1] == said


@pytest.mark.e2e
def test_a_release_with_standard_output_closed_is_made(tmp_path):
    """A reviewer's trial: with standard output closed (`1>&-`, a daemon), every default release failed after its
    charge (exit 4): silencing HiGHS's banner at the rounding flushed a stdout that was None. Made now, and charged
    once."""
    import os

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TABRELEASE_LEDGER_")}, "TABRELEASE_LEDGER_KEY": "k" * 64}
    run = lambda *argv, **kw: subprocess.run([sys.executable, "-m", "tabrelease", *argv], cwd=tmp_path, env=env,
                                             capture_output=True, text=True, timeout=300, **kw)
    assert run("ledger", "init", "L.json").returncode == 0
    done = subprocess.run([sys.executable, "-m", "tabrelease", "release", "edwards", "--epsilon", "0.1", "--ledger",
                           "L.json", "--out", "pp"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
                          timeout=300, preexec_fn=lambda: os.close(1))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "pp" / "public" / "release.json").is_file()
    listed = json.loads(run("ledger", "L.json", "--releases", "--json").stdout)["releases"]
    assert [r["failed"] for r in listed] == [None]


@pytest.mark.e2e
def test_a_release_made_whose_summary_cannot_be_printed_says_it_was_made(tmp_path):
    """A reviewer's trial: a terminal that cannot take the table's names (PYTHONIOENCODING=ascii:strict) ended a
    published, charged release as an internal error (exit 3, which says nothing was charged). It now exits 0 with
    one line saying the release is made and charged (the table's name, from its file, is not ASCII)."""
    import os

    (tmp_path / "données.csv").write_text("région,sexe,count\nNord,Homme,50\nNord,Femme,40\nSüd,Homme,30\nSüd,Femme,35\n",
                                     encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TABRELEASE_LEDGER_")},
           "TABRELEASE_LEDGER_KEY": "k" * 64}
    run = lambda *argv, **extra: subprocess.run([sys.executable, "-m", "tabrelease", *argv], cwd=tmp_path,
                                                env={**env, **extra}, capture_output=True, timeout=300)
    assert run("ledger", "init", "F.json").returncode == 0
    done = run("release", "données.csv", "--margins", "[région,sexe]", "--epsilon", "0.01", "--ledger", "F.json", "--out",
               "fr2", "--simulate", "--seed", "1", PYTHONIOENCODING="ascii:strict")
    err = done.stderr.decode("ascii")
    assert done.returncode == 0 and err.strip().splitlines() == [
        "tabrelease: the release is made, published to fr2 and charged (ledger record 1), but its summary could not "
        "be printed (UnicodeEncodeError)"]
    assert (tmp_path / "fr2" / "public" / "release.json").is_file()
    assert done.stdout.decode("ascii") == ""  # the first line names the table: nothing printed


def test_quiet_highs_with_standard_output_closed_leaves_dev_null_on_it(tmp_path):
    """A review's trial: with descriptor 1 closed, the open of /dev/null took 1 itself and its close freed it again,
    so the next file opened took descriptor 1 and received what was printed."""
    script = ("import os, sys\n"
              "os.close(1); sys.stdout = None\n"
              "from tabrelease import _highs\n"
              "_highs.quiet_highs()\n"
              "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\n"
              "print(fd, os.path.realpath(f'/proc/self/fd/1'), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "f")], capture_output=True, text=True,
                          timeout=120)
    fd, target = done.stderr.split()
    assert done.returncode == 0 and fd != "1" and target == "/dev/null"
