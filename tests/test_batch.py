"""tabrelease batch: a reviewed spec's releases in order, stopping at the first refusal; the dry run predicts it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tabrelease.cli import main
from tabrelease.errors import BudgetRefused
from tabrelease.ledger import budget_status, init_ledger, ledger_entries

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial"

SPEC = """
ledger = "ledger.json"

[datasets.households]
file = "households.csv"
microdata = true
variables = ["wife_active", "husband_unemployed", "child_under_4", "wife_educated", "asian"]
levels = "levels.json"
budget = 1.5

[datasets.czech]
builtin = "czech"
budget = 1.0

[datasets.housing]
builtin = "housing"
budget = 2.0

[[releases]]
dataset = "households"
margins = "[wife_active,husband_unemployed][wife_active,child_under_4]"
epsilon = 1.0
out = "out/households-1"
simulate = true
seed = 1

[[releases]]
dataset = "czech"
margins = "[AB][BC]"
epsilon = 0.5
out = "out/czech-1"
simulate = true
seed = 2

[[releases]]
dataset = "housing"
epsilon = 1.0
out = "out/housing-1"
simulate = true
seed = 3

[[releases]]
dataset = "households"
margins = "[asian,husband_unemployed]"
epsilon = 1.0
out = "out/households-2"
simulate = true
seed = 4

[[releases]]
dataset = "czech"
margins = "[DE]"
epsilon = 0.25
out = "out/czech-2"
simulate = true
seed = 5
"""


@pytest.fixture
def folder(tmp_path):
    for name in ("households.csv", "levels.json"):
        shutil.copy(TUTORIAL / name, tmp_path / name)
    (tmp_path / "out").mkdir()
    (tmp_path / "season.toml").write_text(SPEC)
    init_ledger(tmp_path / "ledger.json")  # a batch never makes its ledger
    return tmp_path


def tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_batch_the_ledger_would_refuse_midway_is_refused_whole_as_the_dry_run_predicts(folder, capsys):
    before = tree(folder)
    code, out, _ = run(capsys, "batch", folder / "season.toml", "--dry-run", "--json")
    assert code == BudgetRefused.exit_status == 5  # the refusal's own status
    predicted = json.loads(out)
    # The dry run changed nothing: not the ledger, its anchor, a file or a folder.
    assert tree(folder) == before
    assert predicted["budget_changes"] == ["set the budget of households: epsilon 1.5 (add-remove)",
                                           "set the budget of czech: epsilon 1 (add-remove)",
                                           "set the budget of housing: epsilon 2 (add-remove)"]
    statuses = [r["status"] for r in predicted["releases"]]
    # households has 1.5: its first release spends 1, its second (1 more) exceeds the budget.
    assert statuses == ["would be made"] * 3 + ["would be refused", "not attempted"]
    assert "budget of households exceeded" in predicted["releases"][3]["reason"]
    assert [r["epsilon_spent_after"] for r in predicted["releases"][:3]] == [1.0, 0.5, 1.0]
    # The plan's expected errors are shown for each margin of the planned releases, by the variables' names.
    assert set(predicted["releases"][0]["expected_l1"]) == {"[wife_active, husband_unemployed]",
                                                            "[wife_active, child_under_4]"}

    # The real run charges the batch on a copy first, as the dry run does, and refuses it whole: nothing is set,
    # charged or written (it had published the three releases before the refusal).
    code, out, err = run(capsys, "batch", folder / "season.toml", "--json")
    assert code == BudgetRefused.exit_status and out == ""
    assert err.startswith("tabrelease: error: release 4 of the batch") and "budget of households exceeded" in err
    assert "so no release of the batch was made" in err and err.count("\n") == 1
    assert tree(folder) == before


@pytest.mark.parametrize("change, message", [
    (lambda s: s.replace('dataset = "czech"\nmargins = "[DE]"', 'dataset = "census"\nmargins = "[DE]"'),
     "release 5 names the dataset 'census'"),
    (lambda s: s.replace('out = "out/czech-2"', 'out = "out/czech-1"'), "release 5 (dataset 'czech') writes to"),
    (lambda s: s.replace('margins = "[DE]"', 'margins = "[DZ]"'), "release 5 (dataset 'czech'):"),
    (lambda s: s.replace('file = "households.csv"', 'file = "missing.csv"'), "dataset 'households': its file"),
    (lambda s: s.replace("budget = 1.0", "budget = -1"), "dataset 'czech': budget must be a positive number"),
    (lambda s: s.replace("epsilon = 0.25", "epsilon = 0.25\ncolour = 3"), "release 5 has an unknown setting 'colour'"),
    (lambda s: s + "\n[[releases]]\n", "release 6 has no dataset"),
    (lambda s: s.replace("seed = 5", "seed = 5\nsimulate = false").replace("simulate = true\nseed = 5", "seed = 5"),
     "release mode draws from a secure sampler and accepts no seed"),
    (lambda s: s.replace("[[releases]]", "[[release]]", 1), "unknown key 'release'"),
    (lambda s: s + "\n[oops", "is not valid TOML"),
])
def test_a_bad_spec_is_one_line_and_nothing_happens(folder, capsys, change, message):
    (folder / "season.toml").write_text(change(SPEC))
    before = tree(folder)
    for argv in (["--dry-run"], []):
        code, out, err = run(capsys, "batch", folder / "season.toml", *argv)
        assert code == 2 and err.count("\n") == 1 and message in err, err
        assert tree(folder) == before


def test_an_existing_output_is_refused_before_anything(folder, capsys):
    (folder / "out" / "czech-2").mkdir()
    before = tree(folder)
    code, _, err = run(capsys, "batch", folder / "season.toml")
    assert code == 2 and "already exists" in err and tree(folder) == before


def test_the_text_summary(folder, capsys):
    code, out, _ = run(capsys, "batch", folder / "season.toml", "--dry-run")
    assert code == BudgetRefused.exit_status and "dry run: nothing was charged or written" in out
    assert "4. would be refused" in out and "5. not attempted" in out
    assert "expected L1: [wife_active, husband_unemployed]" in out
    # Each simulated release says so (they are not for publication), in the text and the JSON (a new user's trial).
    assert out.count("(planned, simulation: not for publication)") == 5
    code, out, _ = run(capsys, "batch", folder / "season.toml", "--dry-run", "--json")
    assert [r["mode"] for r in json.loads(out)["releases"]] == ["simulation"] * 5


def test_a_release_that_fails_after_its_charge_stops_the_run_and_says_so(folder, capsys, monkeypatch):
    import tabrelease.workflow as release_module

    real, calls = release_module.run_plan, []

    def interrupted_second(*args, **kwargs):  # Ctrl-C while the second release draws its noise
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(release_module, "run_plan", interrupted_second)
    spec = folder / "season.toml"
    spec.write_text(spec.read_text().replace("budget = 1.5", "budget = 3.0"))  # no release refused by the ledger
    code, out, err = run(capsys, "batch", spec)
    # Not a refusal (exit 5): the second release was charged and nothing published, as `release` says it (exit 4).
    assert code == 4
    assert "2. failed after its charge" in out and "3. not attempted" in out
    assert err.startswith("tabrelease: error: release 2: charged epsilon=0.5") and "the release failed" in err
    entries = ledger_entries(folder / "ledger.json")
    assert [e["failed"] is not None for e in entries] == [False, True]
    assert (folder / "out" / "households-1").is_dir() and not (folder / "out" / "czech-1").exists()
    assert not [p.name for p in (folder / "out").iterdir() if p.name.startswith(".")]


SENSITIVE_SPEC = """
ledger = "ledger.json"

[datasets.titanic]
builtin = "titanic"
budget = 1.5
budget_neighbours = "sensitive-attributes"
budget_attributes = ["{attribute}"]

[[releases]]
dataset = "titanic"
epsilon = 1.0
mechanism = "sensitive-attributes"
neighbours = "replace"
sensitive = "{sensitive}"
out = "out/titanic-1"
simulate = true
seed = 1
"""


@pytest.mark.parametrize("attribute", ["class", "A"])
def test_a_budget_may_name_its_attributes_as_the_public_files_do(folder, capsys, attribute):
    """A batch's budget_attributes were kept as written: a budget for "class" (Titanic's A, so named in every public
    file) covered no release, whose guarantee names the variable A, and every release was refused. They are now
    read as a release's --sensitive is, and the release is charged to that budget."""
    (folder / "titanic.toml").write_text(SENSITIVE_SPEC.format(attribute=attribute, sensitive="class"))
    for argv, made in ((["--dry-run"], "would be made"), ([], "made")):  # the dry run predicts it, mapped alike
        code, out, err = run(capsys, "batch", folder / "titanic.toml", "--json", *argv)
        assert code == 0, err
        assert json.loads(out)["budget_changes"] == [
            "set the budget of titanic: epsilon 1.5 (sensitive-attributes(A))"]
        assert [r["status"] for r in json.loads(out)["releases"]] == [made]
    status = budget_status(folder / "ledger.json", "titanic")
    assert (status.epsilon_spent, status.epsilon_budget) == (1.0, 1.5)


@pytest.mark.parametrize("attribute, message", [
    ("clas", "dataset 'titanic': budget_attributes 'clas' names no variable of the table (its variables: A, B, C, D)"),
    ("b", "budget_attributes 'b' could name"),
])
def test_a_budget_attribute_that_names_no_variable_or_two_is_refused_before_anything(folder, capsys, monkeypatch,
                                                                                    attribute, message):
    from tabrelease import tables

    if attribute == "b":  # a letter that is also another variable's name for people: as --sensitive, refused
        real = tables.people_names
        monkeypatch.setattr(tables, "people_names",
                            lambda t: (("b",) + real(t)[0][1:], real(t)[1]) if t.name == "titanic" else real(t))
    (folder / "titanic.toml").write_text(SENSITIVE_SPEC.format(attribute=attribute, sensitive="A"))
    before = tree(folder)
    for argv in (["--dry-run"], []):
        code, _, err = run(capsys, "batch", folder / "titanic.toml", *argv)
        assert code == 2 and err.count("\n") == 1 and message in err, err
        assert tree(folder) == before


def test_a_guarantee_a_budget_does_not_cover_refuses_the_batch_before_anything(folder, capsys):
    """A new user's trial: a third release with a delta under a budget without one was refused after the first two
    were published and charged, though the dry run foretold it. Now the batch is refused whole: no budget set, no
    charge, no file."""
    spec = folder / "season.toml"
    text = spec.read_text().replace("budget = 1.5", "budget = 3.0")
    spec.write_text(text.replace('out = "out/housing-1"\n', 'out = "out/housing-1"\ndelta = 1e-6\n'))
    before = tree(folder)
    code, out, err = run(capsys, "batch", spec)
    assert code != 0 and out == "" and err.startswith("tabrelease: error: release 3 of the batch (")
    assert "so no release of the batch was made" in err and err.count("\n") == 1
    assert tree(folder) == before


def test_a_batch_on_a_copied_ledger_is_refused_dry_run_and_real_run_alike(folder, capsys, tmp_path_factory):
    """A copy of the batch's folder, ledger, key and anchor and all, while the original stands: the real run is
    refused before anything (the ledger is a copy), and the dry run says so too; it had said "would be made", as its
    throw-away copy of the copy hid what it was (a review). Neither message names a throw-away file."""
    copy = tmp_path_factory.mktemp("season") / "copy"
    shutil.copytree(folder, copy)
    spec = copy / "season.toml"
    spec.write_text(spec.read_text().replace("budget = 1.5", "budget = 3.0"))
    before = tree(copy)
    for dry in (["--dry-run"], []):
        code, out, err = run(capsys, "batch", spec, *dry)
        assert code == 6 and out == "", err
        assert f"the ledger {copy / 'ledger.json'} is a copy of the one its anchor last saw at" in err
        assert "tabrelease-batch-" not in err
    assert tree(copy) == before


def test_each_step_states_the_guarantee_it_has_not_the_epsilon_asked(folder, capsys):
    """A public total: noise calibrated per add-remove step at 0.25 gives epsilon 0.5 for replace neighbours (two
    steps), which a replace budget is charged; the step's line says the guarantee, not 'at epsilon 0.25'."""
    (folder / "season.toml").write_text('''
ledger = "ledger.json"

[datasets.czech]
builtin = "czech"
budget = 2.0
budget_neighbours = "replace"

[[releases]]
dataset = "czech"
margins = "[AB][BC]"
epsilon = 0.25
public_total = true
out = "out/czech-1"
simulate = true
seed = 2
''')
    code, out, _ = run(capsys, "batch", folder / "season.toml")
    assert code == 0, out
    line = next(x for x in out.splitlines() if x.lstrip().startswith("1. made"))
    assert "with epsilon=0.5 (pure) for one record changed (n public) (planned" in line, line
    assert "czech spent 0.5 of 2" in line


def test_a_throw_away_copy_a_killed_dry_run_left_is_never_charged_and_the_next_batch_removes_it(
        folder, capsys, monkeypatch, tmp_path_factory):
    """A dry run charges a copy of the ledger in a temporary folder. Killed with SIGKILL (no clean-up runs), it left
    the copy, the ledger's key beside it, and an anchor whose lines named the copy, so that the copy passed for the
    ledger: a reviewer charged it with $TABRELEASE_LEDGER_ANCHOR pointing there, a second budget for every dataset.
    Now the key is not copied, the anchor's lines are marked a copy's under their MAC (so a key holder, the key given
    in $TABRELEASE_LEDGER_KEY, is refused too), and the next batch removes the folders of processes that are gone."""
    import subprocess
    import sys
    import tempfile

    from tabrelease.ledger import copy_ledger

    temporary = tmp_path_factory.mktemp("tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process id no process has now
    from tabrelease.batch import _host

    left = temporary / f"tabrelease-batch-{gone.pid}@{_host()}~killed"
    left.mkdir(mode=0o700)
    copy = copy_ledger(folder / "ledger.json", left)
    assert sorted(p.name for p in left.iterdir()) == ["anchor", "ledger.json"]  # no key beside it
    before = tree(left)
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(left / "anchor"))
    release = ["release", "czech", "--epsilon", "0.1", "--ledger", copy, "--dataset", "czech", "--allow-unbudgeted",
               "--simulate", "--seed", "1"]
    code, out, err = run(capsys, *release, "--out", folder / "out" / "fork-1")
    assert code == 2 and "no key for the ledger" in err, err
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", (folder / "ledger.json.key").read_text().strip())
    code, out, err = run(capsys, *release, "--out", folder / "out" / "fork-2")
    assert code == 6 and "is a throw-away copy that a batch's prediction made" in err, err
    assert {k: v for k, v in tree(left).items() if not k.endswith(".lock")} == before  # the copy is unchanged
    assert not (folder / "out" / "fork-1").exists() and not (folder / "out" / "fork-2").exists()
    # The next batch's dry run removes the dead process's folder, and leaves one a live process named (pid 1).
    monkeypatch.delenv("TABRELEASE_LEDGER_ANCHOR")
    monkeypatch.delenv("TABRELEASE_LEDGER_KEY")
    alive = temporary / f"tabrelease-batch-1@{_host()}~running"
    elsewhere = temporary / f"tabrelease-batch-{gone.pid}@another-machine~running"  # its own process ids
    for kept in (alive, elsewhere):
        kept.mkdir(mode=0o700)
    code, out, err = run(capsys, "batch", folder / "season.toml", "--dry-run")
    assert code == 5 and "would be refused" in out, err  # this spec's fourth release exceeds its budget
    assert not left.exists() and alive.exists() and elsewhere.exists()
    assert sorted(p.name for p in temporary.iterdir()) == sorted([alive.name, elsewhere.name])  # its own: gone


@pytest.mark.parametrize("version", [3, 2])
def test_a_left_over_copy_is_refused_whatever_is_done_to_its_anchor_and_says_so_when_verified(
        version, tmp_path, monkeypatch, capsys):
    """A second review: the mark on the copy's anchor lines was taken off by deleting those lines (the lines the
    prediction's own charges had appended carried none), and a version-2 ledger's copy had no lines to mark at all.
    The mark is now in the copy's head, under the head's MAC: the copy charged inside the prediction, then left, is
    refused outside it with its anchor whole, emptied, or its lines deleted; a head with the mark taken off fails
    verification; `ledger verify` says what the copy is."""
    import json as json_module

    from tabrelease import builtin_table
    from tabrelease.errors import LedgerIntegrityError
    from tabrelease.ledger import (_append, _head_mac, _key_id, charge, guarantee_from_parameters, scratch_copy,
                                   verify_ledger)
    from tabrelease.spec import LedgerAccount

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)  # a key holder
    key = ("k" * 64).encode()
    ledger = tmp_path / "ledger.json"
    if version == 3:
        init_ledger(ledger)
    else:  # as version 2 wrote it: no id, no anchor
        data = {"version": 2, "key_id": _key_id(key), "records": []}
        _append(data, key, {"kind": "budget", "dataset": "czech", "neighbours": "add-remove", "accounting": "basic",
                            "epsilon": 1.0, "delta": 0.0, "rho": None,
                            "unit": {"kind": "add-remove", "attributes": [], "n_public": False}})
        data["head"] = {"count": 1, "mac": _head_mac(key, 1, data["records"][-1]["mac"])}
        ledger.write_text(json_module.dumps(data))
        ledger.chmod(0o600)
    table = builtin_table("czech")

    def charged(path):
        return charge(LedgerAccount(ledger=path, dataset="czech", allow_unbudgeted=True), table,
                      guarantee_from_parameters(0.3), mechanism="test", margins=[], output=None,
                      noise_mode="simulation")

    left = tmp_path / "tabrelease-batch-left"
    left.mkdir(mode=0o700)
    with scratch_copy(ledger, left) as copy:
        assert all(oct(p.stat().st_mode & 0o777) == oct(0o600) for p in left.iterdir())  # owner-only
        charged(copy)  # the prediction's own charge, allowed inside
        charged(copy)
    anchor = left / "anchor"
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(anchor))
    assert verify_ledger(copy) == []
    assert main(["ledger", "verify", str(copy)]) == 0
    assert "a throw-away copy that a batch's prediction made" in capsys.readouterr().out
    spent = copy.read_bytes()
    with pytest.raises(LedgerIntegrityError, match="is a throw-away copy that a batch's prediction made"):
        charged(copy)
    for kept in (lambda lines: lines[:1], lambda lines: []):  # lines deleted, or all of them
        anchor.write_text("".join(kept(anchor.read_text().splitlines(keepends=True))))
        with pytest.raises(LedgerIntegrityError):
            charged(copy)
    assert copy.read_bytes() == spent
    data = json_module.loads(spent)
    del data["head"]["scratch"]
    copy.write_text(json_module.dumps(data))
    monkeypatch.delenv("TABRELEASE_LEDGER_ANCHOR")
    with pytest.raises(LedgerIntegrityError, match="does not match its head"):
        charged(copy)
    assert [r["kind"] for r in json_module.loads(ledger.read_text())["records"]] == (
        ["budget"] if version == 2 else [])  # the ledger itself was never charged


def test_each_made_release_carries_its_warnings_as_release_does(folder, capsys):
    """A new user's batch summary said "made" where `release` would have printed the release's warnings ("unfit to
    publish as it stands", simulation mode). Each made step now carries them, in the text and the JSON, exactly as
    its own release.json holds them."""
    first_three = SPEC.split("[[releases]]\ndataset = \"households\"\nmargins = \"[asian")[0]
    (folder / "three.toml").write_text(first_three)
    code, out, _ = run(capsys, "batch", folder / "three.toml", "--json")
    steps = json.loads(out)["releases"]
    assert code == 0 and [s["status"] for s in steps] == ["made"] * 3
    for step in steps:
        published = json.loads((folder / step["out"] / "public" / "release.json").read_text())["warnings"]
        assert step["warnings"] == published and any("do not publish" in w for w in published)
    for name in ("out/households-1", "out/czech-1", "out/housing-1"):
        shutil.rmtree(folder / name)
    init_ledger(folder / "ledger2.json")
    (folder / "three.toml").write_text(first_three.replace('"ledger.json"', '"ledger2.json"'))
    code, out, _ = run(capsys, "batch", folder / "three.toml")
    assert code == 0 and out.count("     WARNING: made in simulation mode") == 3


def test_a_read_only_ledger_is_refused_by_the_dry_run_as_by_the_run(folder, capsys):
    """A review: the prediction charged an owner-writable copy, so a ledger made read-only was "would be made" in the
    dry run and refused in the run. Both now refuse it, alike, and nothing is written."""
    ledger = folder / "ledger.json"
    ledger.chmod(0o400)
    before = tree(folder)
    said = []
    for argv in (["--dry-run"], []):
        code, out, err = run(capsys, "batch", folder / "season.toml", *argv)
        said.append((code, "is read-only (its owner may not write it)" in out + err))
    assert said == [(2, True), (2, True)]
    assert tree(folder) == before


@pytest.mark.e2e
def test_a_ctrl_c_held_over_a_release_stops_the_batch_after_it(folder, capsys, monkeypatch):
    """A Ctrl-C after release 2's charge is held (`finishing_after_charge`): release 2 is made and published, the
    batch stops there, the rest are not attempted and say why, and the run exits 130."""
    import os
    import signal

    from tabrelease import workflow

    real, calls = workflow.run_plan, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    spec = folder / "season.toml"
    spec.write_text(spec.read_text().replace("budget = 1.5", "budget = 3.0"))  # no release refused by the ledger
    monkeypatch.setattr(workflow, "run_plan", interrupted)
    code, out, err = run(capsys, "batch", spec, "--json")
    assert code == 130 and "interrupt held" in err
    steps = json.loads(out)["releases"]
    assert [s["status"] for s in steps] == ["made", "made", "not attempted", "not attempted", "not attempted"]
    assert steps[2]["reason"] == "interrupted during release 2, which was finished"
    assert any("interrupted after its charge" in w for w in steps[1]["warnings"])
    assert (folder / "out" / "czech-1" / "public" / "release.json").is_file()
    assert not (folder / "out" / "housing-1").exists()


@pytest.mark.e2e
def test_a_sigterm_between_a_batch_s_releases_ends_it_with_its_summary(folder, capsys, monkeypatch):
    """A second review's trial: a SIGTERM between releases (release 1 made and charged) ended the batch with 143 and
    no summary. It now stops there with its summary (release 1 made, the rest not attempted) and exits 143."""
    import signal

    # The seventh preparation is release 2's: the dry run's five come first (the batch charges a copy first).
    code, out, err = _batch_signalled(folder, capsys, monkeypatch, "prepare_release", 2 + 5, [signal.SIGTERM])
    steps = json.loads(out)["releases"]
    assert code == 143 and [s["status"] for s in steps] == ["made"] + ["not attempted"] * 4, err
    assert steps[1]["reason"] == "interrupted before release 2's charge"


@pytest.mark.e2e
def test_a_batch_release_abandoned_by_a_second_ctrl_c_is_said_interrupted_and_exits_4(folder, capsys, monkeypatch):
    """A second review's trial: a release abandoned by a second Ctrl-C left the batch's JSON saying
    "interrupted": false; its exit 4 (charged, then failed) was right and stays."""
    import signal

    from tabrelease import _signals

    monkeypatch.setattr(_signals, "ONE_SIGNAL_SECONDS", -1.0)  # the second later than a double delivery
    code, out, _ = _batch_signalled(folder, capsys, monkeypatch, "run_plan", 1, [signal.SIGINT, signal.SIGINT])
    result = json.loads(out)
    assert code == 4 and result["interrupted"] is True
    assert [s["status"] for s in result["releases"]][:2] == ["failed after its charge", "not attempted"]


def _batch_signalled(folder, capsys, monkeypatch, step: str, call: int, signals):
    """The batch of `folder` (its budgets raised so the ledger refuses none) run with `signals` sent to this
    process as workflow's `step` is called the `call`-th time; (exit status, stdout, stderr) of `batch --json`."""
    import os

    from tabrelease import workflow

    real, calls = getattr(workflow, step), []

    def signalled(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            for signum in signals:
                os.kill(os.getpid(), signum)
        return real(*args, **kwargs)

    spec = folder / "season.toml"
    spec.write_text(spec.read_text().replace("budget = 1.5", "budget = 3.0"))
    monkeypatch.setattr(workflow, step, signalled)
    return run(capsys, "batch", spec, "--json")


def test_under_a_rho_budget_the_summary_says_the_rho_spent_not_nan(tmp_path, capsys):
    """A reviewer's trial: under `budget_rho` the dry run printed "cz spent nan" (the epsilon spent is no number
    under a zCDP budget), and its JSON held NaN. A pure release of epsilon 0.5 spends rho 0.5^2 / 2 = 0.125."""
    init_ledger(tmp_path / "L.json")
    spec = tmp_path / "spec.toml"
    spec.write_text('ledger = "L.json"\n[datasets.cz]\nbuiltin = "czech"\nbudget_rho = 0.5\n\n[[releases]]\n'
                    'dataset = "cz"\nmargins = "[AB][CD]"\nepsilon = 0.5\nout = "p1"\nsimulate = true\nseed = 1\n')
    assert main(["batch", str(spec), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "cz spent rho 0.125 of 0.5" in out and "nan" not in out
    assert main(["batch", str(spec), "--dry-run", "--json"]) == 0
    text = capsys.readouterr().out
    step = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in the JSON"))["releases"][0]
    assert (step["rho_spent_after"], step["rho_budget"], step["epsilon_spent_after"]) == (0.125, 0.5, None)
