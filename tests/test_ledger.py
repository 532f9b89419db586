"""The privacy ledger: budgets per dataset, a MAC chain that finds edits, explicit keys, real paths, refusal
before noise, concurrency through links."""

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tabrelease import builtin_table
from tabrelease.cli import main
from tabrelease.errors import BudgetRefused, LedgerIntegrityError, TabreleaseError
from tabrelease.ledger import (budget_status, charge, guarantee_from_parameters, init_ledger, ledger_key,
                               ledger_summary, set_budget, table_fingerprint, verify_ledger)
from tabrelease.spec import LedgerAccount


@pytest.fixture(autouse=True)
def no_environment_key(monkeypatch):
    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)


def cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "TABRELEASE_LEDGER_KEY"}
    return subprocess.run([sys.executable, "-m", "tabrelease", *args], capture_output=True, text=True, cwd=cwd, env=env)


def new_ledger(tmp_path, name="ledger.json"):
    return init_ledger(tmp_path / name)


def release_charge(ledger, table, epsilon=0.1, delta=None, neighbours="add-remove", total_public=False, **account):
    return charge(LedgerAccount(ledger=ledger, **account), table,
                  guarantee_from_parameters(epsilon, delta, neighbours, total_public), mechanism="planned",
                  margins=["[AB]"], output=None, noise_mode="simulation")


@pytest.mark.unit
def test_fingerprint_is_keyed_and_depends_on_the_counts():
    czech = builtin_table("czech")
    a = table_fingerprint(czech, b"k" * 32)
    assert a == table_fingerprint(czech, b"k" * 32)
    assert a != table_fingerprint(czech, b"j" * 32)
    counts = czech.counts.copy()
    counts.flat[0] += 1
    assert a != table_fingerprint(czech.with_counts(counts), b"k" * 32)


def test_budget_of_one_allows_two_halves_across_processes_and_refuses_a_tenth(tmp_path):
    ledger = tmp_path / "ledger.json"
    assert cli("ledger", "init", str(ledger), cwd=tmp_path).returncode == 0
    assert cli("ledger", str(ledger), "--set-budget", "czech", "--epsilon", "1", cwd=tmp_path).returncode == 0
    commands = [[sys.executable, "-m", "tabrelease", "release", "czech", "--epsilon", "0.5", "--simulate",
                 "--seed", str(i), "--ledger", str(ledger), "--out", str(tmp_path / f"r{i}")] for i in range(2)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    results = [p.communicate() + (p.returncode,) for p in procs]
    assert [r[2] for r in results] == [0, 0], results
    third = cli("release", "czech", "--epsilon", "0.1", "--simulate", "--ledger", str(ledger),
                "--out", str(tmp_path / "r3"), cwd=tmp_path)
    assert third.returncode == BudgetRefused.exit_status == 5
    assert third.stderr.count("\n") == 1 and "exceeded" in third.stderr and "0 of 1 remains" in third.stderr
    assert not (tmp_path / "r3").exists()
    shown = json.loads(cli("ledger", str(ledger), "--json", cwd=tmp_path).stdout)
    (row,) = shown["datasets"]
    assert row["dataset"] == "czech" and row["releases"] == 2 and row["epsilon_remaining"] == pytest.approx(0.0)


RACE = """
import sys, time
from pathlib import Path
from tabrelease import builtin_table
from tabrelease.errors import BudgetRefused
from tabrelease.ledger import charge, guarantee_from_parameters
folder, me, processes, attempts = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
table = builtin_table("edwards")
codes = []
for attempt in range(attempts):
    # Every process ready (its imports done, its last attempt over) before any charges: they all race at once.
    (folder / f"ready-{attempt}-{me}").touch()
    deadline = time.monotonic() + 300  # a bound for a hang (a sibling that died), not a speed
    while sum(1 for _ in folder.glob(f"ready-{attempt}-*")) < processes:
        if time.monotonic() > deadline:
            sys.exit(f"attempt {attempt}: the other processes never came")
        time.sleep(0.001)
    ledger = folder / (f"link{attempt}.json" if me % 2 else f"ledger{attempt}.json")
    try:
        charge(ledger, table, guarantee_from_parameters(0.2, None, "add-remove", False), mechanism="planned",
               margins=[], output=None, noise_mode="simulation")
        codes.append(0)
    except BudgetRefused:  # any other failure is a fault of the race, and fails the test
        codes.append(3)
print(" ".join(map(str, codes)))
"""


@pytest.mark.slow
def test_eight_processes_through_a_link_and_the_real_file_spend_exactly_the_budget(tmp_path):
    """A budget for exactly 5 releases; 8 processes, half through a symlink, all charging at once: exactly 5
    succeed, 10 times (each process takes part in all 10 races, so that 8 start-ups are paid, not 80)."""
    env = {k: v for k, v in os.environ.items() if k != "TABRELEASE_LEDGER_KEY"}
    processes, attempts = 8, 10
    for attempt in range(attempts):
        real = init_ledger(tmp_path / f"ledger{attempt}.json")
        (tmp_path / f"link{attempt}.json").symlink_to(real)
        set_budget(real, "edwards", 1.0)
    procs = [subprocess.Popen([sys.executable, "-c", RACE, str(tmp_path), str(i), str(processes), str(attempts)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(processes)]
    outputs = [p.communicate(timeout=600) for p in procs]  # a bound for a hang, not a speed
    assert [p.returncode for p in procs] == [0] * processes, [err for _, err in outputs]
    codes = [[int(c) for c in out.split()] for out, _ in outputs]
    assert all(len(c) == attempts for c in codes), outputs
    for attempt in range(attempts):
        assert sorted(c[attempt] for c in codes) == [0] * 5 + [3] * 3, (attempt, [c[attempt] for c in codes])
        real, link = tmp_path / f"ledger{attempt}.json", tmp_path / f"link{attempt}.json"
        status = budget_status(real, "edwards")
        assert status.releases == 5 and status.epsilon_spent == pytest.approx(1.0)
        assert link.is_symlink() and verify_ledger(link) == []


def test_threads_appending_at_once_keep_every_entry(tmp_path):
    free = new_ledger(tmp_path)
    czech = builtin_table("czech")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: release_charge(free, czech), range(40)))
    assert budget_status(free, "czech").releases == 40 and verify_ledger(free) == []


def test_refusal_happens_before_any_noise_is_drawn(tmp_path, monkeypatch):
    import tabrelease.noise as noise

    ledger = new_ledger(tmp_path)
    set_budget(ledger, "czech", 0.3)

    def no_noise(*args, **kwargs):
        raise AssertionError("noise was drawn for a refused release")

    monkeypatch.setattr(noise.SecureNoise, "perturb", no_noise)
    code = main(["release", "czech", "--epsilon", "0.5", "--ledger", str(ledger), "--out", str(tmp_path / "r")])
    assert code == BudgetRefused.exit_status and not (tmp_path / "r").exists()


@pytest.mark.unit
def test_deltas_add_and_a_pure_budget_refuses_delta(tmp_path):
    ledger = new_ledger(tmp_path)
    table = builtin_table("czech")
    set_budget(ledger, "czech", 2.0, delta=1e-6)
    for _ in range(2):
        release_charge(ledger, table, 0.5, 4e-7)
    with pytest.raises(BudgetRefused, match="delta"):
        release_charge(ledger, table, 0.5, 4e-7)
    status = budget_status(ledger, "czech")
    assert status.delta_spent == pytest.approx(8e-7, abs=0) and status.epsilon_spent == pytest.approx(1.0)
    pure = new_ledger(tmp_path, "pure.json")
    set_budget(pure, "czech", 2.0)
    with pytest.raises(BudgetRefused, match="delta"):
        release_charge(pure, table, 0.5, 1e-9)


def test_paper_calibration_is_charged_at_the_epsilon_it_really_gives(tmp_path):
    ledger = new_ledger(tmp_path)
    code = main(["release", "journey_to_work", "--epsilon", "1", "--calibration", "paper", "--mechanism", "auto",
                 "--simulate", "--ledger", str(ledger), "--out", str(tmp_path / "r")])
    assert code == 0
    (entry,) = [r for r in json.loads(ledger.read_text())["records"] if r["kind"] == "release"]
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    actual = audit["calibration_check"]["epsilon_actual"]
    assert actual == pytest.approx(1.2988, abs=1e-3)  # 1.715 / 1.3203, the paper's Theorem 2 scale
    assert entry["epsilon"] == pytest.approx(actual)


@pytest.mark.unit
def test_the_ledger_holds_no_data_and_its_key_is_owner_only(tmp_path):
    ledger = new_ledger(tmp_path)
    set_budget(ledger, "edwards", 1.0)
    release_charge(ledger, builtin_table("edwards"))
    data = json.loads(ledger.read_text())
    assert set(data) == {"version", "ledger_id", "key_id", "records", "head", "anchor"}
    # A table held as cells also names the keyed fingerprint earlier versions recorded and its multiset fingerprint
    # (fingerprints_also), says which fingerprints it carries (prints), and keeps its margins' keyed fingerprints
    # with how many variables each has (margin_prints), never their names or counts.
    assert set(data["records"][1]) == {"kind", "dataset", "fingerprint", "fingerprints_also", "table", "guarantee",
                                       "epsilon", "delta",
                                       "neighbours", "total_public", "mechanism", "margins", "output", "noise_mode",
                                       "release_id", "aliases", "prints", "margin_prints", "time", "process", "mac"}
    printed = data["records"][1]["margin_prints"]
    assert [size for size, _ in printed] == [1] * 6 + [2] * 15 and all(
        len(f) == 64 and int(f, 16) >= 0 for _, f in printed)
    for private in (tmp_path / "ledger.json.key", ledger, tmp_path / "ledger.json.anchor"):
        assert private.exists() and (private.stat().st_mode & 0o777) == 0o600, private
    (status,) = ledger_summary(ledger)
    assert status.dataset == "edwards" and status.epsilon_budget == 1.0


# --- budgets per dataset ----------------------------------------------------------------------------
def test_a_changed_table_under_one_dataset_spends_the_same_budget_and_is_shown(tmp_path, capsys):
    ledger = new_ledger(tmp_path)
    set_budget(ledger, "census-2026", 0.5)
    czech = builtin_table("czech")
    counts = czech.counts.copy()
    counts.flat[3] += 1  # one record added
    relabelled = czech.with_counts(counts)
    release_charge(ledger, czech, epsilon=0.3, dataset="census-2026")
    with pytest.raises(BudgetRefused, match="privacy budget of census-2026 exceeded"):
        release_charge(ledger, relabelled, epsilon=0.3, dataset="census-2026")
    release_charge(ledger, relabelled, epsilon=0.2, dataset="census-2026")
    status = budget_status(ledger, "census-2026")
    assert status.releases == 2 and len(status.fingerprints) == 2
    assert main(["ledger", str(ledger)]) == 0
    assert "released from 2 different tables" in capsys.readouterr().out


def test_a_ledger_with_budgets_refuses_a_dataset_without_one_unless_told(tmp_path):
    ledger = new_ledger(tmp_path)
    release_charge(ledger, builtin_table("edwards"))  # no budgets at all: recorded
    set_budget(ledger, "czech", 1.0)
    with pytest.raises(BudgetRefused, match="none for the dataset 'edwards'"):
        release_charge(ledger, builtin_table("edwards"))
    release_charge(ledger, builtin_table("edwards"), allow_unbudgeted=True)
    assert budget_status(ledger, "edwards").releases == 2
    code = main(["release", "edwards", "--epsilon", "0.1", "--simulate", "--ledger", str(ledger),
                 "--out", str(tmp_path / "r")])
    assert code == BudgetRefused.exit_status and not (tmp_path / "r").exists()


# --- tamper evidence --------------------------------------------------------------------------------
def _tampered(tmp_path, change):
    ledger = new_ledger(tmp_path)
    set_budget(ledger, "edwards", 1.0)
    for _ in range(3):
        release_charge(ledger, builtin_table("edwards"), epsilon=0.2)
    assert verify_ledger(ledger) == []
    data = json.loads(ledger.read_text())
    change(data)
    ledger.write_text(json.dumps(data))
    return ledger


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["records"][2].update(epsilon=-5), "record 3 was edited"),
    (lambda d: d["records"][0].update(epsilon=float(100)), "record 1 was edited"),
    (lambda d: d["records"].pop(1), "record 2 was edited, inserted, removed"),
    (lambda d: d["records"].insert(1, d["records"].pop(2)), "record 2 was edited, inserted, removed"),
    (lambda d: (d["records"].pop(), d["head"].update(count=3)), "end of the ledger does not match"),
    (lambda d: d["records"].pop(), "end of the ledger does not match"),
    (lambda d: d["records"][1].pop("fingerprint"), "record 2 was edited"),
    (lambda d: d["records"][1].update(epsilon="0.2"), "record 2 was edited"),
    (lambda d: d.update(key_id="0" * 16), "the key is not this ledger's key"),
])
def test_an_edited_deleted_or_reordered_record_is_found_and_stops_spending(tmp_path, capsys, change, expected):
    ledger = _tampered(tmp_path, change)
    problems = verify_ledger(ledger)
    assert problems and expected in problems[0], problems
    assert main(["ledger", "verify", str(ledger)]) == LedgerIntegrityError.exit_status == 6
    assert expected in capsys.readouterr().out
    # --json: one document on stdout, nothing else, with the same verdict and exit status.
    assert main(["ledger", "verify", str(ledger), "--json"]) == 6
    document = json.loads(capsys.readouterr().out)
    assert document["intact"] is False and expected in document["problems"][0]
    code = main(["release", "edwards", "--epsilon", "0.1", "--simulate", "--ledger", str(ledger),
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == LedgerIntegrityError.exit_status == 6
    assert err.count("\n") == 1 and "fails verification" in err and not (tmp_path / "r").exists()
    with pytest.raises(LedgerIntegrityError):
        set_budget(ledger, "edwards", 5.0)


def test_verify_json_of_an_intact_ledger_is_one_document(tmp_path, capsys):
    ledger = new_ledger(tmp_path)
    set_budget(ledger, "edwards", 1.0)
    release_charge(ledger, builtin_table("edwards"), epsilon=0.2)
    capsys.readouterr()
    assert main(["ledger", "verify", str(ledger), "--json"]) == 0
    out = capsys.readouterr().out
    document = json.loads(out)
    assert document["intact"] is True and document["chain_intact"] is True and document["problems"] == []
    assert document["ledger"] == str(ledger) and document["bundles_checked"] is None


# A file that is not a ledger at all (not JSON, or of no version this reads) is bad input (2); a ledger whose own
# fields are missing fails verification (6).
@pytest.mark.parametrize("content, expected, status", [
    ("{", "not valid JSON", 2),
    ('{"version": 2}', "damaged", 6),
    ('{"version": 2, "key_id": "x", "records": {}, "head": {}}', "damaged", 6),
    ('{"version": 1, "budgets": {}, "entries": []}', "version 2 or 3 (it has another version)", 2),
    ('[1, 2]', "its JSON is a list or a value, not a ledger", 2),
])
def test_a_damaged_ledger_gives_one_line(tmp_path, capsys, content, expected, status):
    ledger = new_ledger(tmp_path)
    ledger.write_text(content)
    assert main(["ledger", str(ledger)]) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err


def test_a_file_that_is_no_ledger_and_has_no_key_is_said_to_be_no_ledger(tmp_path, capsys):
    """Without a key beside it (or in the environment), a file that is not a ledger is said to be that, not only
    that it has no key (a new user's trial pointed `tabrelease ledger` at a text file); a ledger whose key is missing
    is still said to have none."""
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    assert main(["ledger", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.txt is not a tabrelease ledger (not valid JSON); give the path of a " \
        "ledger (`tabrelease ledger init FILE` makes one)" in err
    assert "no key" not in err
    ledger = tmp_path / "l.json"
    assert main(["ledger", "init", str(ledger)]) == 0
    (tmp_path / "l.json.key").unlink()
    capsys.readouterr()
    assert main(["ledger", str(ledger)]) == 2
    assert "no key for the ledger" in capsys.readouterr().err


def test_init_over_a_file_that_is_no_ledger_says_so_and_makes_no_key(tmp_path, capsys):
    """`ledger init` at a path holding a file that is not a ledger says that (not that a ledger exists there) and
    leaves no key behind; over a ledger, or one whose fields are missing, it says a ledger exists; over a ledger
    overwritten with what is not JSON, the anchor's word that a ledger was there and was damaged or replaced."""
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    assert main(["ledger", "init", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a tabrelease ledger: `ledger init` makes a new ledger where there is no " \
        "file yet" in err and "already exists" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    ledger = tmp_path / "l.json"
    assert main(["ledger", "init", str(ledger)]) == 0
    for content in (None, '{"version": 3}'):  # the ledger itself, then damaged (its fields missing)
        if content is not None:
            ledger.write_text(content)
        capsys.readouterr()
        assert main(["ledger", "init", str(ledger)]) == 2
        assert f"a ledger already exists at {ledger}" in capsys.readouterr().err
    ledger.write_text("garbage")  # overwritten: the anchor has seen a ledger here
    assert main(["ledger", "init", str(ledger)]) == 2
    err = capsys.readouterr().err
    assert "records a ledger here" in err and "damaged or replaced, restore it from a copy" in err
    assert "`ledger init` makes a new ledger" not in err


# --- keys ---------------------------------------------------------------------------------------------
def test_keys_are_made_only_by_init_and_must_be_the_ledgers_own(tmp_path, monkeypatch, capsys):
    ledger = tmp_path / "ledger.json"
    with pytest.raises(TabreleaseError, match="no ledger at .*ledger init"):
        set_budget(ledger, "edwards", 1.0)
    assert not (tmp_path / "ledger.json.key").exists()  # never made silently
    assert main(["ledger", "init", str(ledger)]) == 0
    with pytest.raises(TabreleaseError, match="already exists"):
        init_ledger(ledger)
    set_budget(ledger, "edwards", 1.0)
    key = tmp_path / "ledger.json.key"
    original = key.read_text()
    key.unlink()
    with pytest.raises(TabreleaseError, match="no key for the ledger"):
        budget_status(ledger, "edwards")
    key.write_text("f" * 64 + "\n")
    key.chmod(0o600)
    with pytest.raises(LedgerIntegrityError, match="the key is not this ledger's key"):
        release_charge(ledger, builtin_table("edwards"))
    key.write_text(original)
    key.chmod(0o644)
    with pytest.raises(TabreleaseError, match="can be read by others"):
        release_charge(ledger, builtin_table("edwards"))
    key.chmod(0o600)
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "x")
    with pytest.raises(TabreleaseError, match="too short to be a key"):
        release_charge(ledger, builtin_table("edwards"))
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "y" * 40)  # a long key, but not this ledger's
    with pytest.raises(LedgerIntegrityError, match="not this ledger's key"):
        release_charge(ledger, builtin_table("edwards"))
    monkeypatch.delenv("TABRELEASE_LEDGER_KEY")
    assert len(ledger_key(ledger)) == 64


@pytest.mark.unit
def test_a_ledger_made_with_an_environment_key_has_no_key_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "z" * 48)
    ledger = new_ledger(tmp_path)
    set_budget(ledger, "czech", 1.0)
    assert not (tmp_path / "ledger.json.key").exists() and verify_ledger(ledger) == []


def test_a_release_that_fails_after_its_charge_stays_charged_and_says_so(tmp_path, monkeypatch, capsys):
    import tabrelease.reports as reports

    ledger = new_ledger(tmp_path)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(reports, "render_audit_html", broken)
    code = main(["release", "edwards", "--epsilon", "0.1", "--simulate", "--ledger", str(ledger),
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    # Its own status (4, not 2: "nothing charged"), and it says what was charged.
    assert code == 4 and not (tmp_path / "r").exists()
    assert err.count("\n") == 1 and "charged epsilon=0.1 (pure) to edwards (ledger record 1); the release failed" in err
    assert "No space left on device" in err
    records = json.loads(ledger.read_text())["records"]
    assert [r["kind"] for r in records] == ["release", "failure"]
    assert records[1]["release_mac"] == records[0]["mac"] and "OSError" in records[1]["reason"]
    assert budget_status(ledger, "edwards").epsilon_spent == pytest.approx(0.1) and verify_ledger(ledger) == []


@pytest.mark.unit
def test_releases_that_publish_n_exactly_do_not_add_to_an_add_remove_budget(tmp_path):
    """A review found 0.5 (add-remove) + 0.3 (public total) + 0.2 (replace) recorded as 1 spent of 1, where the
    releases together have no add-remove guarantee and are 2(0.5) + 2(0.3) + 0.2 = 1.8-DP under replace."""
    czech = builtin_table("czech")
    ledger = new_ledger(tmp_path)
    set_budget(ledger, "czech", 1.0)
    release_charge(ledger, czech, epsilon=0.5)
    with pytest.raises(BudgetRefused, match="publishes n exactly.*--budget-neighbours replace"):
        release_charge(ledger, czech, epsilon=0.3, total_public=True)
    with pytest.raises(BudgetRefused, match="publishes n exactly.*--budget-neighbours replace"):
        release_charge(ledger, czech, epsilon=0.2, neighbours="replace")
    replace = new_ledger(tmp_path, "replace.json")
    set_budget(replace, "czech", 2.0, neighbours="replace")
    release_charge(replace, czech, epsilon=0.5)
    release_charge(replace, czech, epsilon=0.3, total_public=True)
    release_charge(replace, czech, epsilon=0.2, neighbours="replace")
    status = budget_status(replace, "czech")
    assert status.neighbours == "replace" and status.epsilon_spent == pytest.approx(1.8)
    with pytest.raises(BudgetRefused, match="needs epsilon 0.4"):
        release_charge(replace, czech, epsilon=0.2)  # 2 x 0.2 > 0.2 left
    free = new_ledger(tmp_path, "free.json")  # no budget: the summary says under which relation the sum holds
    release_charge(free, czech, epsilon=0.5)
    assert budget_status(free, "czech").neighbours == "add-remove"
    release_charge(free, czech, epsilon=0.3, total_public=True)
    status = budget_status(free, "czech")
    assert status.neighbours == "replace" and status.epsilon_spent == pytest.approx(1.6)


def test_the_command_line_charges_a_public_total_release_as_publishing_n(tmp_path, capsys):
    ledger = new_ledger(tmp_path)
    assert main(["ledger", str(ledger), "--set-budget", "czech", "--epsilon", "1"]) == 0
    code = main(["release", "czech", "--epsilon", "0.3", "--public-total", "--simulate", "--ledger", str(ledger),
                 "--out", str(tmp_path / "r")])
    assert code == BudgetRefused.exit_status and "publishes n exactly" in capsys.readouterr().err
    assert main(["ledger", str(ledger), "--set-budget", "other", "--epsilon", "1", "--budget-neighbours", "replace"]) == 0
    assert main(["release", "czech", "--epsilon", "0.3", "--public-total", "--simulate", "--ledger", str(ledger),
                 "--dataset", "other", "--out", str(tmp_path / "r2")]) == 0
    assert budget_status(ledger, "other").epsilon_spent == pytest.approx(0.6)


def test_the_ledger_lists_its_releases_with_failures_marked(tmp_path, capsys, monkeypatch):
    import json as _json

    from tabrelease.cli import main
    from tabrelease.ledger import init_ledger, record_failure

    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)
    ledger = init_ledger(tmp_path / "ledger.json")
    for name, eps in (("czech", "0.5"), ("edwards", "0.25")):
        assert main(["release", name, "--epsilon", eps, "--simulate", "--ledger", str(ledger),
                     "--out", str(tmp_path / name)]) == 0
    from tabrelease.ledger import ledger_entries

    record_failure(ledger, ledger_entries(ledger)[1], "the release failed after its charge (OSError)")
    capsys.readouterr()
    assert main(["ledger", "show", str(ledger), "--releases", "--json"]) == 0
    listed = _json.loads(capsys.readouterr().out)["releases"]
    assert [(r["dataset"], r["epsilon"], r["failed"]) for r in listed] == [
        ("czech", 0.5, None), ("edwards", 0.25, "the release failed after its charge (OSError)")]
    assert listed[0]["output"] == str((tmp_path / "czech").resolve()) and listed[0]["noise_mode"] == "simulation"
    assert main(["ledger", str(ledger), "--releases"]) == 0
    text = capsys.readouterr().out
    assert "2 release(s)" in text and "FAILED (the release failed after its charge (OSError))" in text


def test_ledger_init_with_json_prints_one_json_document(tmp_path, capsys):
    ledger = tmp_path / "made.json"
    assert main(["ledger", "init", str(ledger), "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["ledger"].endswith("made.json") and made["key"] == made["ledger"] + ".key" and ledger.exists()


def test_ledger_init_says_where_its_key_is_or_that_the_environment_holds_it(tmp_path, capsys, monkeypatch):
    """With no key in the environment, init names the key file it made (and it exists, owner-only); with
    $TABRELEASE_LEDGER_KEY set it makes no key file and says the environment's key signs the ledger (it said
    "key: FILE.key" either way, a file that did not exist)."""
    import stat

    ledger = tmp_path / "a.json"
    assert main(["ledger", "init", str(ledger)]) == 0
    said = capsys.readouterr().out
    assert f"and its key {ledger}.key (owner-only" in said
    assert stat.S_IMODE((tmp_path / "a.json.key").stat().st_mode) == 0o600
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 40)
    other = tmp_path / "b.json"
    assert main(["ledger", "init", str(other)]) == 0
    assert capsys.readouterr().out.strip() == f"made the ledger {other}, keyed by $TABRELEASE_LEDGER_KEY (no key file)"
    assert not (tmp_path / "b.json.key").exists()
    assert main(["ledger", "init", str(tmp_path / "c.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["key"] is None


def test_setting_a_budget_says_so_before_the_account(tmp_path, capsys):
    """`ledger FILE --set-budget D --epsilon E` says it set D's budget, then shows the account with it (a new user
    saw only the table); --json prints the JSON document alone."""
    ledger = tmp_path / "l.json"
    assert main(["ledger", "init", str(ledger)]) == 0
    capsys.readouterr()
    assert main(["ledger", str(ledger), "--set-budget", "czech", "--epsilon", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"set the budget of the dataset czech (recorded in the ledger {ledger}):"
    assert any(line.startswith("czech") and line.endswith("spent epsilon 0 of 2 (add-remove), 2 remains")
               for line in lines[1:])
    assert main(["ledger", str(ledger), "--set-budget", "czech", "--epsilon", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["datasets"][0]["epsilon_budget"] == 3


def test_the_ledger_commands_usage_names_its_words_once(capsys):
    """argparse's own usage for a repeatable positional printed "[init|verify|show] FILE [[init|verify|show] FILE
    ...]" (a new user's trial): the usage line is written out."""
    assert main(["ledger", "--help"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "usage: tabrelease ledger [init|verify|show] FILE [options]"


def test_a_known_ledger_overwritten_is_called_damaged_not_only_not_a_ledger(tmp_path, capsys):
    """A file that is no ledger, where the anchor has seen one, is said to be that ledger damaged or replaced (with
    the anchor's id and count), not only "not a tabrelease ledger"; at a path the anchor has not seen, the plain
    message stands."""
    import re

    path = tmp_path / "l.json"
    assert main(["ledger", "init", str(path)]) == 0
    ledger_id = json.loads(path.read_text())["ledger_id"]
    capsys.readouterr()
    for text in ("garbage", "[1, 2]", '{"version": 99}'):
        path.write_text(text)
        assert main(["ledger", "verify", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "not a tabrelease ledger" in err
        assert re.search(rf"records a ledger here \(id {ledger_id}, 0 records\): it was damaged or replaced", err)
    other = tmp_path / "other.json"
    other.write_text("garbage")
    assert main(["release", "czech", "--epsilon", "1", "--ledger", str(other), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "not a tabrelease ledger (not valid JSON)" in err and "records a ledger here" not in err
    assert not (tmp_path / "o").exists()


def test_an_account_at_the_top_of_epsilons_range_reads_and_past_it_nothing_is_charged(tmp_path, capsys):
    """A replace release, then an add-remove Gaussian release of epsilon 800 was charged and published, then the
    command raised an internal error (OverflowError: e^800 in its group privacy for the replace unit), and so did
    every later release of the dataset and `tabrelease ledger`. Epsilon is now at most 700 (`spec.EPSILON_RANGE`):
    800 is refused before the charge, and at 700 both releases succeed and the account reads (the Gaussian
    release's guarantee under replace has a delta of 1, so no unit covers both)."""
    import json

    from tabrelease.cli import main

    ledger = tmp_path / "L.json"
    assert main(["ledger", "init", str(ledger)]) == 0
    assert main(["release", "edwards", "--epsilon", "1", "--neighbours", "replace", "--simulate", "--seed", "1",
                 "--ledger", str(ledger), "--out", str(tmp_path / "a")]) == 0
    gaussian = ["release", "edwards", "--mechanism", "gaussian", "--delta", "1e-6", "--simulate", "--seed", "1",
                "--ledger", str(ledger)]
    records = len(json.loads(ledger.read_text())["records"])
    assert main([*gaussian, "--epsilon", "800", "--out", str(tmp_path / "b")]) == 2
    assert len(json.loads(ledger.read_text())["records"]) == records and not (tmp_path / "b").exists()
    assert main([*gaussian, "--epsilon", "700", "--out", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    assert main(["ledger", str(ledger)]) == 0
    shown = capsys.readouterr().out
    assert "edwards" in shown and "no unit covers all its releases" in shown


def test_a_budget_changed_is_said_with_the_one_it_replaces(tmp_path, capsys):
    """A reviewer raised a spent budget from 1 to 100 and the output read as if the budget were new (the ledger's
    chain keeps both; the terminal now names the one replaced)."""
    ledger = init_ledger(tmp_path / "ledger.json")
    assert main(["ledger", str(ledger), "--set-budget", "czech", "--epsilon", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(f"(recorded in the ledger {ledger}):")
    assert main(["ledger", str(ledger), "--set-budget", "czech", "--epsilon", "100", "--delta", "1e-6"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("; it replaces epsilon 1 (add-remove):")
    assert main(["ledger", str(ledger), "--set-budget", "czech", "--epsilon", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("; it replaces epsilon 100, delta 1e-06 (add-remove):")


def test_a_dataset_of_several_tables_is_noted_with_the_everyday_reason_first(tmp_path, capsys):
    """Two column sets of one file under one dataset id are two tables: the note named only a changed file or a
    misnamed one (a user's check read it as a mistake); it names other columns first."""
    ledger = init_ledger(tmp_path / "ledger.json")
    czech = builtin_table("czech")
    for letters in ("AB", "CD"):
        charge(LedgerAccount(ledger=ledger, dataset="czech", allow_unbudgeted=True), czech.margin(letters),
               guarantee_from_parameters(0.5), mechanism="test", margins=[], output=None, noise_mode="simulation")
    assert main(["ledger", str(ledger)]) == 0
    note = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("NOTE: czech"))
    assert note.startswith("NOTE: czech was released from 2 different tables (other columns or levels of its data,")


def test_a_ledger_its_owner_or_its_folder_forbids_writing_is_refused_before_any_write(tmp_path, monkeypatch):
    """A ledger made read-only (chmod 400) was charged anyway: the rename replaced it and it came back 0600. An anchor
    that could not be opened for permissions was refused as a failed verification (exit 6), and a folder that could
    not take the new file named the temporary file (a new user's trial). Each is now refused before anything is
    written, in one plain line (exit 2): the ledger byte for byte as it was, and its mode too."""
    import stat

    from tabrelease import ledger as ledger_module
    from tabrelease.ledger import anchor_path

    table = builtin_table("czech")
    path = new_ledger(tmp_path)
    before = path.read_bytes()
    path.chmod(0o400)
    with pytest.raises(TabreleaseError, match="is read-only \\(its owner may not write it\\)") as refused:
        release_charge(path, table)
    assert type(refused.value) is TabreleaseError and refused.value.exit_status == 2
    with pytest.raises(TabreleaseError, match="is read-only"):
        set_budget(path, "czech", 1.0)
    assert path.read_bytes() == before and stat.S_IMODE(path.stat().st_mode) == 0o400
    path.chmod(0o600)
    # The folder and the anchor: permissions the test's user (root, in CI) may override, so the system's answers
    # are stood in for.
    real_access = os.access
    monkeypatch.setattr(ledger_module.os, "access", lambda p, mode, **kw: False if os.fspath(p) == os.fspath(
        path.parent) else real_access(p, mode, **kw))
    with pytest.raises(TabreleaseError, match=f"its folder {tmp_path} is not writable; nothing is spent or set"):
        release_charge(path, table)
    monkeypatch.setattr(ledger_module.os, "access", real_access)
    real_open = os.open

    def no_anchor(p, flags, *args, **kwargs):
        if os.fspath(p) == os.fspath(anchor_path(path)) and flags & os.O_WRONLY:
            raise PermissionError(13, "Permission denied")
        return real_open(p, flags, *args, **kwargs)

    monkeypatch.setattr(ledger_module.os, "open", no_anchor)
    with pytest.raises(TabreleaseError, match="cannot append to the ledger's anchor .*: permission denied") as refused:
        release_charge(path, table)
    assert not isinstance(refused.value, LedgerIntegrityError) and refused.value.exit_status == 2
    monkeypatch.setattr(ledger_module.os, "open", real_open)
    assert path.read_bytes() == before
    release_charge(path, table)  # writable again: charged
    assert path.read_bytes() != before


def test_a_second_signal_while_a_failed_release_is_recorded_does_not_hide_its_charge(tmp_path, monkeypatch):
    """A reviewer's trial: a second SIGTERM or SIGINT, arriving while a release that failed after its charge was
    being recorded as failed, was acted on at the end of that step and ended the command with 143 or 130 and no word
    of the charge. Here SIGINT is sent while the failure is recorded: the failure is recorded whole, and the error
    that says "charged" (exit 4) is still returned."""
    import signal

    from tabrelease import ledger as ledger_module
    from tabrelease.errors import ChargedReleaseFailed
    from tabrelease.ledger import ledger_entries
    from tabrelease.workflow import charged_failure

    path = new_ledger(tmp_path)
    entry = release_charge(path, builtin_table("czech"))
    real = ledger_module.record_failure

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # held by the step, as a user's second Ctrl-C would be
        return real(*args, **kwargs)

    monkeypatch.setattr(ledger_module, "record_failure", interrupted)
    failed = charged_failure(path, entry, SystemExit(143))
    assert isinstance(failed, ChargedReleaseFailed) and failed.exit_status == 4
    assert str(failed).startswith("charged epsilon=0.1") and "could not be recorded" not in str(failed)
    assert "terminated by signal 15" in str(ledger_entries(path)[-1])


def test_a_full_disk_or_a_file_size_limit_is_refused_before_the_charge(tmp_path, monkeypatch, capsys):
    """A reviewer's trial: on a disk already full (a new folder needs no data block on tmpfs, so the probe folder
    was made), and under ulimit -f, each release was charged and then failed writing, every time. Both are now
    refused before the charge: exit 2, one line, the ledger byte for byte as it was, no bundle."""
    import resource
    from types import SimpleNamespace

    from tabrelease import bundle

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")
    before = path.read_bytes()
    argv = ["release", "journey_to_work", "--epsilon", "0.1", "--ledger", str(path), "--out", str(tmp_path / "r")]
    real_statvfs = os.statvfs
    monkeypatch.setattr(bundle.os, "statvfs", lambda p: SimpleNamespace(f_bavail=3, f_frsize=4096))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has 12,288 bytes free, less than the" in err and "nothing was charged" in err
    monkeypatch.setattr(bundle.os, "statvfs", real_statvfs)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (16 * 1024, resource.RLIM_INFINITY)
                        if which == resource.RLIMIT_FSIZE else (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "may write files of at most 16,384 bytes (ulimit -f)" in err
    assert path.read_bytes() == before and not (tmp_path / "r").exists()
    monkeypatch.undo()
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    assert main(argv) == 0 and path.read_bytes() != before  # room enough: released and charged


def test_an_interrupted_or_failed_init_leaves_no_key_without_its_ledger(tmp_path, monkeypatch):
    """A reviewer's trial: SIGTERM during `ledger init` left the key and no ledger, and the next init was refused
    ("a key already exists"); at another moment it ended the command silently with the ledger made. The two steps
    now hold signals and drop them (init takes milliseconds), and a key made for a ledger that failed is removed."""
    import signal

    from tabrelease import ledger as ledger_module

    path = tmp_path / "L.json"
    real_make_key, real_write = ledger_module._make_key, ledger_module._write

    def failing_write(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ledger_module, "_write", failing_write)
    with pytest.raises(OSError):
        init_ledger(path)
    assert not path.exists() and not (tmp_path / "L.json.key").exists()
    monkeypatch.setattr(ledger_module, "_write", real_write)

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C between the key and the ledger
        return real_make_key(*args, **kwargs)

    monkeypatch.setattr(ledger_module, "_make_key", interrupted)
    made = init_ledger(path)  # no KeyboardInterrupt: held, then dropped
    assert made.exists() and (tmp_path / "L.json.key").exists() and verify_ledger(made) == []


def _swallowing_interrupt(real):
    """`real`, then a SIGINT whose KeyboardInterrupt is lost, as compiled code lost it (a new user's trial: pyarrow,
    importing pandas while a file was read, swallowed a Ctrl-C, and the release ran on, was charged and exited 0)."""
    import signal

    def loaded(*args, **kwargs):
        value = real(*args, **kwargs)
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            pass
        return value

    return loaded


@pytest.mark.unit
def test_an_interrupt_lost_in_compiled_code_still_stops_the_release_before_its_charge(tmp_path, monkeypatch, capsys):
    """The command's handler notes the signal as it raises, and the release looks at the note before its charge:
    exit 130, the ledger byte for byte as it was, no bundle."""
    from tabrelease.cli import release as release_command

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")
    before = path.read_bytes()
    monkeypatch.setattr(release_command, "load_from_args", _swallowing_interrupt(release_command.load_from_args))
    out = tmp_path / "r"
    assert main(["release", "czech", "--epsilon", "0.1", "--ledger", str(path), "--out", str(out)]) == 130
    assert capsys.readouterr().err == "tabrelease: interrupted\n"
    assert path.read_bytes() == before and not out.exists()
    # The note is the command's: a release after it, in the same process, is made.
    monkeypatch.undo()
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    assert main(["release", "czech", "--epsilon", "0.1", "--ledger", str(path), "--out", str(out)]) == 0
    assert out.exists() and path.read_bytes() != before


@pytest.mark.unit
def test_an_interrupt_lost_while_a_batch_reads_its_data_makes_no_release(tmp_path, monkeypatch, capsys):
    """The same for a batch: its tables are read before its first release, whose charge the note stops."""
    from tabrelease import workflow

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")
    (tmp_path / "b.toml").write_text(
        'ledger = "L.json"\n[datasets.czech]\nbuiltin = "czech"\nbudget = 1.0\n'
        '[[releases]]\ndataset = "czech"\nepsilon = 0.1\nout = "one"\n'
        '[[releases]]\ndataset = "czech"\nepsilon = 0.1\nout = "two"\n')
    monkeypatch.setattr(workflow, "read_source", _swallowing_interrupt(workflow.read_source))
    monkeypatch.chdir(tmp_path)
    assert main(["batch", "b.toml", "--set-budgets"]) == 130
    assert not (tmp_path / "one").exists() and not (tmp_path / "two").exists()
    assert budget_status(path, "czech").epsilon_spent == 0  # its budget was set; nothing charged


def _interrupting_run_plan(monkeypatch, times: int):
    """workflow.run_plan (the first step after the charge), sending this process `times` SIGINTs as it starts, as
    a user's Ctrl-C would arrive."""
    import signal

    from tabrelease import workflow

    real = workflow.run_plan

    def interrupted(*args, **kwargs):
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(workflow, "run_plan", interrupted)


@pytest.mark.e2e
def test_a_ctrl_c_after_the_charge_is_held_and_the_release_made_and_a_second_abandons_it(tmp_path, monkeypatch,
                                                                                            capsys):
    """A new user's trial: each Ctrl-C after the charge (most of a release's run) cost the epsilon and the release
    (exit 4). The first is now held: the release is made, published and charged once (exit 0, said on stderr); a
    second one abandons it (exit 4, the failure recorded); without a ledger nothing is charged, and one ends it
    (130, nothing written)."""
    from tabrelease.ledger import ledger_entries

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")
    argv = ["release", "rochdale", "--epsilon", "0.5", "--ledger", str(path), "--simulate", "--seed", "1"]
    _interrupting_run_plan(monkeypatch, 1)
    assert main(argv + ["--out", str(tmp_path / "held")]) == 0
    out, err = capsys.readouterr()
    assert "interrupt held: the release is charged (ledger record 1) and is being finished" in err
    assert "WARNING: interrupted after its charge (ledger record 1): the release was finished and published" in out
    assert (tmp_path / "held" / "public" / "release.json").is_file()
    assert main(["ledger", "verify", str(path), "--bundles", str(tmp_path / "held")]) == 0
    capsys.readouterr()
    # Two at once are one signal delivered twice (GNU timeout signals the command and its process group; an
    # adversarial review's `timeout -s INT` had abandoned a charged release): held as one, the release made.
    _interrupting_run_plan(monkeypatch, 2)
    assert main(argv + ["--out", str(tmp_path / "twice")]) == 0
    assert "interrupt held" in capsys.readouterr().err and (tmp_path / "twice" / "public" / "release.json").is_file()
    # A second one later than that (here: the window closed at once) abandons it.
    from tabrelease import _signals

    monkeypatch.setattr(_signals, "ONE_SIGNAL_SECONDS", -1.0)
    assert main(argv + ["--out", str(tmp_path / "abandoned")]) == 4
    assert "the release failed (interrupted) and nothing was published" in capsys.readouterr().err
    assert not (tmp_path / "abandoned").exists()
    # made, made, then abandoned: three charges
    assert [bool(e["failed"]) for e in ledger_entries(path)] == [False, False, True]
    _interrupting_run_plan(monkeypatch, 1)
    assert main(argv[:4] + ["--simulate", "--out", str(tmp_path / "no-ledger")]) == 130
    assert capsys.readouterr().err.endswith("tabrelease: interrupted\n")
    assert not (tmp_path / "no-ledger").exists()


@pytest.mark.e2e
def test_a_charge_whose_bundle_is_gone_is_said_by_releases_and_verify(tmp_path, monkeypatch, capsys):
    """A new user's trial: a release killed after its charge (SIGKILL) was listed by `--releases` as any other,
    and `verify --bundles` said its missing folder "records no charge"."""
    import shutil

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")
    for name in ("kept", "gone"):
        assert main(["release", "rochdale", "--epsilon", "0.5", "--ledger", str(path), "--simulate", "--seed", "1",
                     "--out", str(tmp_path / name)]) == 0
    shutil.rmtree(tmp_path / "gone")  # as a SIGKILL after the charge leaves it: the charge, no folder
    capsys.readouterr()
    assert main(["ledger", str(path), "--releases", "--json"]) == 0
    assert [r["bundle_found"] for r in json.loads(capsys.readouterr().out)["releases"]] == [True, False]
    assert main(["ledger", str(path), "--releases"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "no bundle of this charge there now" not in lines[1] and "no bundle of this charge there now" in lines[2]
    assert main(["ledger", "verify", str(path), "--bundles", str(tmp_path / "kept"), str(tmp_path / "gone")]) == 6
    out = capsys.readouterr().out
    assert f"FAILED: the bundle {tmp_path / 'gone'} does not exist" in out and "records no charge" not in out


def test_a_folder_that_cannot_be_synced_after_the_rename_does_not_unsay_a_charge(tmp_path, monkeypatch):
    """A reviewer's trial: a ledger folder searchable but not readable let the new ledger be renamed into place,
    then the folder's sync failed, and the release ended "refused: nothing charged" (exit 2) with its charge in the
    ledger and no anchor line. The sync is now warned of: the charge is made, anchored, and verifies."""
    from tabrelease import ledger as ledger_module
    from tabrelease.ledger import ledger_entries, verify_ledger

    path = new_ledger(tmp_path)
    real_open = os.open

    def unreadable_folder(p, flags, *args, **kwargs):
        if os.fspath(p) == os.fspath(path.parent) and not flags & (os.O_WRONLY | os.O_RDWR):
            raise PermissionError(13, "Permission denied")
        return real_open(p, flags, *args, **kwargs)

    anchored = ledger_module.anchor_path(path).read_text().count("\n")
    monkeypatch.setattr(ledger_module.os, "open", unreadable_folder)
    with pytest.warns(RuntimeWarning, match="its folder could not be synced to disk \\(Permission denied\\)"):
        entry = release_charge(path, builtin_table("czech"))
    monkeypatch.undo()
    assert entry["sequence"] == 1 and len(ledger_entries(path)) == 1
    assert ledger_module.anchor_path(path).read_text().count("\n") == anchored + 1  # the charge is anchored
    assert verify_ledger(path) == []


def test_a_link_put_in_the_ledger_s_place_beside_its_anchor_is_refused(tmp_path):
    """A reviewer's trial: the ledger moved aside and a symbolic link to an older copy (with its own anchor) put in
    its place; verification read the copy's anchor and found it intact, and a budget of 1 was spent twice. A link
    beside an anchor not its target's is refused (exit 6), for a charge, a verification and an init alike; a link to
    a ledger with nothing beside it still works."""
    import shutil

    from tabrelease.ledger import init_ledger as init, verify_ledger

    work = tmp_path / "w"
    work.mkdir()
    path = new_ledger(work, "L.json")
    set_budget(path, "czech", 1.0)
    shutil.copytree(work, tmp_path / "backup")  # an ordinary backup, its key and anchor with it
    release_charge(path, builtin_table("czech"), epsilon=1.0)
    path.rename(work / "L.json.hidden")
    path.symlink_to(tmp_path / "backup" / "L.json")
    for attempt in (lambda: verify_ledger(path), lambda: release_charge(path, builtin_table("czech"), epsilon=1.0)):
        with pytest.raises(LedgerIntegrityError, match="stands beside the link .*: the link stands in for the ledger"):
            attempt()
    path.unlink()
    (tmp_path / "empty").mkdir()
    path.symlink_to(tmp_path / "empty" / "L.json")
    with pytest.raises(LedgerIntegrityError, match="stands beside the link"):
        init(path)
    assert not (tmp_path / "empty" / "L.json").exists()
    elsewhere = tmp_path / "link.json"
    elsewhere.symlink_to(tmp_path / "backup" / "L.json")
    assert verify_ledger(elsewhere) == []


@pytest.mark.parametrize("neighbours", ["sensitive-attributes", "local", "Replace", "replace ", "add_remove"])
def test_a_plain_guarantee_names_one_of_the_two_neighbour_relations(neighbours):
    """A reviewer's trial: any `neighbours` but exactly "replace" was read as add-remove (the strongest unit), so a
    sensitive-attribute or local release stated through this helper passed an add-remove budget at face value."""
    with pytest.raises(TabreleaseError, match="a plain release's neighbours are 'add-remove' or 'replace'"):
        guarantee_from_parameters(0.5, None, neighbours)
    with pytest.raises(TabreleaseError, match="total_public is True or False"):
        guarantee_from_parameters(0.5, None, "replace", "no")
    assert guarantee_from_parameters(0.5, None, "replace").unit.kind == "replace"


@pytest.mark.e2e
def test_a_hangup_after_the_charge_is_held_as_a_ctrl_c_is_and_stays_ignored_under_nohup(tmp_path, monkeypatch,
                                                                                          capsys):
    """A reviewer's trial: SIGHUP (a dropped SSH session) killed a release outright: its staging folder, audit and
    all, stayed on disk, and its charge was not recorded as failed. After the charge it is now held as a first Ctrl-C
    is (the release made, exit 0); a second abandons it (exit 4, recorded as terminated by signal 1, nothing left
    beside the output); where SIGHUP is ignored (nohup), it stays ignored (a review's trial: the command's handler
    had overridden nohup)."""
    import signal

    from tabrelease import workflow
    from tabrelease.ledger import ledger_entries

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")
    real = workflow.run_plan
    times = []

    def hung_up(*args, **kwargs):
        for _ in range(times[0]):
            os.kill(os.getpid(), signal.SIGHUP)
        return real(*args, **kwargs)

    monkeypatch.setattr(workflow, "run_plan", hung_up)
    argv = ["release", "rochdale", "--epsilon", "0.5", "--ledger", str(path), "--simulate", "--out"]
    times[:] = [1]
    assert main(argv + [str(tmp_path / "held")]) == 0
    assert "interrupt held: the release is charged" in capsys.readouterr().err
    times[:] = [2]
    from tabrelease import _signals

    monkeypatch.setattr(_signals, "ONE_SIGNAL_SECONDS", -1.0)  # the second later than a double delivery
    assert main(argv + [str(tmp_path / "abandoned")]) == 4
    assert "the release failed (terminated by signal 1) and nothing was published" in capsys.readouterr().err
    assert [e["failed"] for e in ledger_entries(path)] == [
        None, "the release failed after its charge (terminated by signal 1)"]
    assert not (tmp_path / "abandoned").exists() and not list(tmp_path.glob(".tabrelease-*"))
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup leaves it
    try:
        times[:] = [2]
        assert main(argv + [str(tmp_path / "nohup")]) == 0
        assert "interrupt held" not in capsys.readouterr().err
        assert (tmp_path / "nohup" / "public" / "release.json").is_file()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def _release_argv(path, out):
    return ["release", "rochdale", "--epsilon", "0.5", "--ledger", str(path), "--simulate", "--seed", "1", "--out",
            str(out)]


@pytest.mark.e2e
@pytest.mark.parametrize("moment", ["charge", "account", "rename", "broken pipe"])
def test_an_interrupt_at_each_moment_after_the_lock_leaves_the_release_made_and_charged_once(moment, tmp_path,
                                                                                               monkeypatch, capsys):
    """A review's trials, each a path by which a charged release had been lost or mis-said: a Ctrl-C while the
    charge was made (the ledger's lock awaited) was acted on after it (exit 4); one while the account was read back,
    or a second one held over the bundle's rename, ended a published, charged release with 130 (which says nothing
    was charged); a terminal gone with the pipe it wrote to made the held-interrupt message raise and abandon the
    release. Each now ends with the release made, published and charged once (exit 0, said)."""
    import signal

    from tabrelease import bundle, ledger as ledger_module, workflow
    from tabrelease.ledger import ledger_entries

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")

    def sending(real):
        def step(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            return real(*args, **kwargs)
        return step

    def renaming_the_bundle(source, destination):  # the bundle's own rename, then a Ctrl-C
        os_replace(source, destination)
        if os.fspath(destination) == os.fspath(tmp_path / "r"):
            os.kill(os.getpid(), signal.SIGINT)

    if moment == "charge":
        monkeypatch.setattr(workflow, "charge_release", sending(workflow.charge_release))
    elif moment == "account":
        monkeypatch.setattr(ledger_module, "budget_status", sending(ledger_module.budget_status))
    elif moment == "rename":  # a first Ctrl-C held at the fit, a second one while the bundle is renamed into place
        monkeypatch.setattr(workflow, "run_plan", sending(workflow.run_plan))
        os_replace = os.replace
        monkeypatch.setattr(bundle.os, "replace", renaming_the_bundle)
    else:
        def gone(entry):
            raise BrokenPipeError(32, "Broken pipe")
        monkeypatch.setattr(workflow, "_say_held", gone)
        monkeypatch.setattr(workflow, "run_plan", sending(workflow.run_plan))
    assert main(_release_argv(path, tmp_path / "r")) == 0
    out, err = capsys.readouterr()
    assert "WARNING: interrupted after its charge (ledger record 1): the release was finished and published" in out
    assert (tmp_path / "r" / "public" / "release.json").is_file()
    assert [e["failed"] for e in ledger_entries(path)] == [None]
    monkeypatch.undo()
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    assert main(["ledger", "verify", str(path), "--bundles", str(tmp_path / "r")]) == 0


def test_a_library_caller_s_ctrl_c_after_the_charge_stops_its_loop_with_the_release_made(tmp_path, monkeypatch):
    """A review's trial: publish_release held the first Ctrl-C and returned, so a caller's loop of releases went on
    charging. It now raises ReleaseInterrupted (a KeyboardInterrupt) once the release stands, carrying it."""
    import signal

    from tabrelease import ReleaseSpec, loss_of, workflow
    from tabrelease.errors import ReleaseInterrupted
    from tabrelease.ledger import ledger_entries
    from tabrelease.spec import unit_of

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")
    real = workflow.run_plan

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(workflow, "run_plan", interrupted)
    spec = ReleaseSpec(loss=loss_of(0.5), unit=unit_of("add-remove"), mode="simulation", seed=1)
    made = []
    with pytest.raises(KeyboardInterrupt) as stopped:
        for i in range(3):
            made.append(workflow.publish_release(builtin_table("rochdale"), spec, tmp_path / f"r{i}",
                                                 account=LedgerAccount(ledger=path)))
    assert isinstance(stopped.value, ReleaseInterrupted) and made == []
    assert stopped.value.published.out == tmp_path / "r0" and (tmp_path / "r0" / "public").is_dir()
    assert len(ledger_entries(path)) == 1 and not (tmp_path / "r1").exists()


def test_a_batch_and_a_chain_of_links_are_held_to_the_link_check(tmp_path):
    """A review's trials: a batch resolved its ledger's path before the ledger's checks read it, and a link further
    along a chain (`current.json -> L.json`, L.json then made a link to an older copy) was not looked beside. Both
    are refused now."""
    import shutil

    from tabrelease.batch import read_spec
    from tabrelease.ledger import verify_ledger

    work = tmp_path / "w"
    work.mkdir()
    path = new_ledger(work, "L.json")
    set_budget(path, "czech", 1.0)
    shutil.copytree(work, tmp_path / "backup")
    release_charge(path, builtin_table("czech"), epsilon=1.0)
    (tmp_path / "current.json").symlink_to(path)
    path.rename(work / "L.json.hidden")
    path.symlink_to(tmp_path / "backup" / "L.json")
    with pytest.raises(LedgerIntegrityError, match="stands beside the link"):
        verify_ledger(tmp_path / "current.json")
    (tmp_path / "season.toml").write_text('ledger = "w/L.json"\n[datasets.czech]\nbuiltin = "czech"\n'
                                          '[[releases]]\ndataset = "czech"\nepsilon = 1.0\nout = "r"\nsimulate = true\n')
    spec = read_spec(tmp_path / "season.toml")
    assert spec.ledger == work / "L.json"  # as named, not resolved to the copy
    with pytest.raises(LedgerIntegrityError, match="stands beside the link"):
        verify_ledger(spec.ledger)


@pytest.mark.e2e
def test_signals_around_the_charge_and_the_account_a_second_review_found(tmp_path, monkeypatch, capsys):
    """A second review's trials: a Ctrl-C while the ledger's lock was awaited could not cancel (it was held, then
    the release charged); a SIGTERM while the account was read back ended a published, charged release with 143;
    under nohup a SIGHUP during the charge was taken for an interrupt. Now the wait is outside the hold (130,
    nothing charged), the read-back's SIGTERM leaves the release made (exit 0), and an ignored SIGHUP is ignored."""
    import signal

    from tabrelease import ledger as ledger_module, workflow
    from tabrelease.ledger import ledger_entries

    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    path = init_ledger(tmp_path / "L.json")
    real_lock, real_status, real_charge = ledger_module._lock, ledger_module.budget_status, workflow.charge_release

    def awaited(p):  # the wait for the lock, a Ctrl-C in it
        os.kill(os.getpid(), signal.SIGINT)
        return real_lock(p)

    monkeypatch.setattr(ledger_module, "_lock", awaited)
    assert main(_release_argv(path, tmp_path / "waited")) == 130
    assert capsys.readouterr().err.endswith("tabrelease: interrupted\n")
    assert ledger_entries(path) == [] and not (tmp_path / "waited").exists()
    monkeypatch.setattr(ledger_module, "_lock", real_lock)

    def terminated(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real_status(*args, **kwargs)

    monkeypatch.setattr(ledger_module, "budget_status", terminated)
    assert main(_release_argv(path, tmp_path / "account")) == 0
    assert "the ledger's account was not read back (interrupted)" in capsys.readouterr().out
    assert [e["failed"] for e in ledger_entries(path)] == [None]
    monkeypatch.setattr(ledger_module, "budget_status", real_status)

    def hung_up(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGHUP)
        return real_charge(*args, **kwargs)

    monkeypatch.setattr(workflow, "charge_release", hung_up)
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert main(_release_argv(path, tmp_path / "nohup")) == 0
        out, err = capsys.readouterr()
        assert "interrupt held" not in err and "interrupted after its charge" not in out
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.mark.e2e
def test_a_release_without_a_ledger_signalled_over_its_rename_stands_and_says_so(tmp_path, monkeypatch, capsys):
    """A second review's trial: without a ledger a signal held over the rename ended the command with 130, the
    bundle in place (the exit codes say a release being written is removed)."""
    import signal

    from tabrelease import bundle

    os_replace = os.replace

    def renaming(source, destination):
        os_replace(source, destination)
        if os.fspath(destination) == os.fspath(tmp_path / "r"):
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(bundle.os, "replace", renaming)
    assert main(["release", "rochdale", "--epsilon", "0.5", "--simulate", "--out", str(tmp_path / "r")]) == 0
    assert "interrupted as the bundle was put in place: the release was published" in capsys.readouterr().out
    assert (tmp_path / "r" / "public" / "release.json").is_file()


@pytest.mark.skipif(os.name != "posix", reason="the folder's flock is POSIX; Windows cannot delete an open file")
def test_a_lock_file_deleted_while_it_is_held_does_not_let_a_second_process_in(tmp_path, monkeypatch):
    """A reviewer's loop deleted L.json.lock while releases ran: the next process locked a new file of that name
    while another still held the old one, and charges of published releases were lost. The ledger's folder is
    locked too, so a second process still waits, and one that cannot get in says so in one line."""
    from tabrelease import ledger as ledger_module

    path = tmp_path / "L.json"
    init_ledger(path)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom pathlib import Path\nfrom tabrelease import ledger\n"
        f"with ledger._lock(Path({str(path.resolve())!r})):\n"
        "    print('held', flush=True)\n    time.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(ledger_module, "LOCK_TIMEOUT_SECONDS", 0.5)
        # Held, the lock file in place: the wait ends in one line (it had been filelock's Timeout, a traceback).
        with pytest.raises(TabreleaseError, match=r"^the ledger .* is in use by another process \(waited 0.5 s"):
            with ledger_module._lock(path.resolve()):
                pass
        (tmp_path / "L.json.lock").unlink()
        with pytest.raises(TabreleaseError, match=r"^the ledger .* is in use by another process \(waited 0.5 s"):
            with ledger_module._lock(path.resolve()):
                pass
    finally:
        holder.kill()
        holder.wait()
    with ledger_module._lock(path.resolve()):  # free again once the holder is gone
        pass


def test_a_ledger_gone_from_beside_its_anchor_is_said_to_be_missing_not_to_be_made(tmp_path, capsys):
    """A new user's trial: with the ledger moved away, a release said "no ledger ...; make one with `tabrelease
    ledger init`", and that init was then refused because the anchor records a ledger there. The release (and the
    ledger's display) now say the ledger was moved or deleted and must be restored: exit 6, nothing charged."""
    path = tmp_path / "L.json"
    assert main(["ledger", "init", str(path)]) == 0
    assert main(["ledger", str(path), "--set-budget", "czech", "--epsilon", "1"]) == 0
    path.rename(tmp_path / "away.json")
    capsys.readouterr()
    for argv in (["release", "czech", "--epsilon", "0.5", "--ledger", str(path), "--out", str(tmp_path / "r")],
                 ["ledger", str(path)]):
        assert main(argv) == 6
        err = capsys.readouterr().err
        assert "records one there" in err and "restore it" in err and "ledger init" not in err
    assert not (tmp_path / "r").exists() and not path.exists()
