"""The privacy account cannot be fooled: every case a review reproduced against the ledger, each refused (or
charged correctly), with the rule it breaks computed here by hand.

| case                                                                  | test                                      |
|-----------------------------------------------------------------------|-------------------------------------------|
| randomized response against an add-remove budget                      | test_randomized_response_...              |
| sensitive-attributes against a replace budget                         | test_sensitive_attributes_...             |
| a hard link to the ledger and its key                                 | test_a_hard_linked_ledger_...             |
| the same table under a second dataset id                              | test_a_second_dataset_id_...              |
| a batch spec raising a budget the ledger holds                        | test_a_batch_that_would_change_a_budget...|
| a batch spec with a mistyped ledger path                              | test_a_batch_never_makes_a_ledger         |
| an old copy put back; deleted and re-made; records rewritten          | test_rollback_..., test_reinit..., ...    |
| an add-remove (epsilon, delta) release under a replace budget         | test_group_privacy_...                    |
| a 1% overspend                                                        | test_the_smallest_overspend_is_refused    |
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import shutil

import numpy as np
import pytest

from tabrelease import builtin_table
from tabrelease.cli import main
from tabrelease.errors import BudgetRefused, LedgerIntegrityError, TabreleaseError
from tabrelease.ledger import (budget_status, charge, copied_from, init_ledger, ledger_entries, ledger_key,
                               set_budget, verify_bundles, verify_ledger)
from tabrelease.spec import LedgerAccount
from tabrelease.privacy import (APPROXIMATE, PURE, ZCDP, PrivacyGuarantee, PrivacyLoss, PrivacyUnit)


@pytest.fixture(autouse=True)
def no_environment(monkeypatch):
    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)
    monkeypatch.delenv("TABRELEASE_LEDGER_ANCHOR", raising=False)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def release(capsys, ledger, out, *extra, table="czech"):
    return run(capsys, "release", table, "--simulate", "--seed", "1", "--ledger", ledger, "--out", out, *extra)


def guarantee(unit="add-remove", kind=PURE, epsilon=0.5, delta=0.0, rho=None, attributes=()):
    return PrivacyGuarantee(unit=PrivacyUnit(kind=unit, attributes=attributes),
                            loss=PrivacyLoss(kind=kind, epsilon=epsilon, delta=delta, rho=rho))


def charge_guarantee(ledger, g, table="czech", **account):
    return charge(LedgerAccount(ledger=ledger, **account), builtin_table(table), g, mechanism="test", margins=[],
                  output=None, noise_mode="simulation")


def records(ledger):
    return json.loads(ledger.read_text())["records"]


# --- units --------------------------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_randomized_response_is_refused_by_an_add_remove_budget_and_charged_epsilon_under_replace(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    assert run(capsys, "ledger", ledger, "--set-budget", "czech", "--epsilon", "1")[0] == 0
    before = ledger.read_bytes()
    code, _, err = release(capsys, ledger, tmp_path / "rr", "--mechanism", "randomized-response", "--epsilon", "0.5",
                           "--margins", "[AB]")
    # RR publishes the number of reports, n, exactly: it has no add-remove guarantee at all.
    assert code == BudgetRefused.exit_status == 5
    assert err.count("\n") == 1 and "local" in err and "publishes n exactly" in err
    assert ledger.read_bytes() == before and not (tmp_path / "rr").exists()
    # Under replace, epsilon-local DP is epsilon-DP: charged epsilon, not more, not less.
    assert run(capsys, "ledger", ledger, "--set-budget", "czech-r", "--epsilon", "1", "--budget-neighbours",
               "replace")[0] == 0
    code, _, err = release(capsys, ledger, tmp_path / "rr2", "--mechanism", "randomized-response", "--epsilon", "0.5",
                           "--margins", "[AB]", "--dataset", "czech-r")
    assert code == 0, err
    status = budget_status(ledger, "czech-r")
    assert status.epsilon_spent == pytest.approx(0.5) and status.unit == "replace"
    written = json.loads((tmp_path / "rr2" / "public" / "release.json").read_text())
    assert written["guarantee"]["unit"] == {"kind": "local", "attributes": [], "n_public": True}
    assert written["guarantee"]["loss"]["kind"] == "pure" and written["guarantee"]["loss"]["epsilon"] == 0.5


@pytest.mark.e2e
def test_sensitive_attributes_are_refused_by_a_replace_budget_and_charged_under_their_own_unit(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    czech = builtin_table("czech")
    sensitive = czech.variables[0]
    assert run(capsys, "ledger", ledger, "--set-budget", "czech", "--epsilon", "1", "--budget-neighbours",
               "replace")[0] == 0
    args = ("--mechanism", "sensitive-attributes", "--neighbours", "replace", "--sensitive", sensitive,
            "--epsilon", "0.4", "--margins", "[AB][BC]")
    before = ledger.read_bytes()
    code, _, err = release(capsys, ledger, tmp_path / "s", *args)
    # The blocks without the sensitive attribute are released exactly, and an unrestricted replace moves them.
    assert code == BudgetRefused.exit_status and "protects" in err and sensitive in err and ledger.read_bytes() == before
    # A budget for the sensitive attribute of the same dataset covers it; one for another attribute does not.
    other = czech.variables[1]
    assert run(capsys, "ledger", ledger, "--set-budget", "czech-other", "--epsilon", "1", "--budget-neighbours",
               "sensitive-attributes", "--budget-attributes", other)[0] == 0
    code, _, err = release(capsys, ledger, tmp_path / "s", *args, "--dataset", "czech-other", "--allow-alias")
    assert code == BudgetRefused.exit_status and "protects" in err
    assert run(capsys, "ledger", ledger, "--set-budget", "czech-s", "--epsilon", "1", "--budget-neighbours",
               "sensitive-attributes", "--budget-attributes", sensitive)[0] == 0
    code, _, err = release(capsys, ledger, tmp_path / "s", *args, "--dataset", "czech-s", "--allow-alias")
    assert code == 0, err
    assert budget_status(ledger, "czech-s").epsilon_spent == pytest.approx(0.4)
    # An ordinary add-remove release also protects the attribute: by group privacy at twice its epsilon.
    code, _, err = release(capsys, ledger, tmp_path / "a", "--epsilon", "0.1", "--dataset", "czech-s",
                           "--allow-alias")
    assert code == 0, err
    assert budget_status(ledger, "czech-s").epsilon_spent == pytest.approx(0.4 + 2 * 0.1)


def test_a_replace_budget_is_refused_when_a_recorded_release_has_no_guarantee_under_it(tmp_path):
    ledger = init_ledger(tmp_path / "ledger.json")
    charge_guarantee(ledger, guarantee("sensitive-attributes", attributes=("A",)))
    with pytest.raises(BudgetRefused, match="no guarantee under this budget's unit"):
        set_budget(ledger, "czech", 5.0, neighbours="replace")


# --- group privacy and losses -------------------------------------------------------------------------------------
def test_group_privacy_of_an_add_remove_release_under_a_replace_budget(tmp_path):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 10.0, delta=1e-4, neighbours="replace")
    epsilon, delta = 2.0, 1e-6
    charge_guarantee(ledger, guarantee(kind=APPROXIMATE, epsilon=epsilon, delta=delta))
    status = budget_status(ledger, "czech")
    # Two add-remove steps make one replace step: (2 eps, (1 + e^eps) delta), here 2.56 times the naive 2 delta.
    assert status.epsilon_spent == pytest.approx(4.0)
    assert status.delta_spent == pytest.approx((1 + math.exp(2.0)) * 1e-6, rel=1e-12, abs=0)
    # rho-zCDP: group privacy of two steps is 4 rho.
    zcdp = init_ledger(tmp_path / "zcdp.json")
    set_budget(zcdp, "czech", rho=1.0, neighbours="replace")
    charge_guarantee(zcdp, guarantee(kind=ZCDP, epsilon=1.0, delta=1e-6, rho=0.05))
    assert budget_status(zcdp, "czech").rho_spent == pytest.approx(0.2)
    # Pure epsilon under a rho budget: epsilon^2 / 2 (Bun & Steinke 2016, Proposition 1.4), under its own unit.
    set_budget(zcdp, "edwards", rho=1.0)
    charge_guarantee(zcdp, guarantee(epsilon=0.6), table="edwards")
    assert budget_status(zcdp, "edwards").rho_spent == pytest.approx(0.18)
    # An (epsilon, delta) loss that is not zCDP cannot be charged to a rho budget.
    with pytest.raises(BudgetRefused, match="not zCDP"):
        charge_guarantee(zcdp, guarantee(kind=APPROXIMATE, epsilon=0.5, delta=1e-7), table="edwards")


def test_the_smallest_overspend_is_refused(tmp_path):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 1.0)
    for _ in range(10):
        charge_guarantee(ledger, guarantee(epsilon=0.1))  # 0.1 ten times is 0.9999999999999999: it fits
    with pytest.raises(BudgetRefused, match="exceeded"):
        charge_guarantee(ledger, guarantee(epsilon=1e-9))
    other = init_ledger(tmp_path / "other.json")
    set_budget(other, "czech", 1.0)
    charge_guarantee(other, guarantee(epsilon=0.5))
    with pytest.raises(BudgetRefused, match="exceeded"):
        charge_guarantee(other, guarantee(epsilon=0.5 * (1 + 1e-9)))
    set_budget(other, "edwards", 1.0, delta=1e-6)
    charge_guarantee(other, guarantee(kind=APPROXIMATE, epsilon=0.1, delta=1e-6), table="edwards")
    with pytest.raises(BudgetRefused, match="needs delta"):
        charge_guarantee(other, guarantee(kind=APPROXIMATE, epsilon=0.1, delta=1e-15), table="edwards")


# --- one identity ---------------------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_a_hard_linked_ledger_or_key_is_refused(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "L.json")
    set_budget(ledger, "czech", 1.0)
    os.link(ledger, tmp_path / "H.json")
    os.link(tmp_path / "L.json.key", tmp_path / "H.json.key")
    for name in ("L.json", "H.json"):
        code, _, err = release(capsys, tmp_path / name, tmp_path / f"out-{name}", "--epsilon", "0.6")
        assert code == LedgerIntegrityError.exit_status == 6
        assert "hard links" in err and not (tmp_path / f"out-{name}").exists()
    # The key's own links are refused too (a ledger copied beside a linked key).
    (tmp_path / "H.json").unlink()
    shutil.copy(ledger, tmp_path / "H.json")
    with pytest.raises(LedgerIntegrityError, match="hard links"):
        budget_status(tmp_path / "H.json", "czech")
    assert len(records(ledger)) == 1


@pytest.mark.e2e
def test_a_second_dataset_id_for_the_same_table_is_refused_unless_said(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "survey", 1.0)
    set_budget(ledger, "survey-again", 1.0)
    assert release(capsys, ledger, tmp_path / "a", "--epsilon", "0.9", "--dataset", "survey")[0] == 0
    code, _, err = release(capsys, ledger, tmp_path / "b", "--epsilon", "0.9", "--dataset", "survey-again")
    assert code == BudgetRefused.exit_status and "released before under the dataset 'survey'" in err
    assert not (tmp_path / "b").exists()
    code, _, err = release(capsys, ledger, tmp_path / "b", "--epsilon", "0.9", "--dataset", "survey-again",
                           "--allow-alias")
    assert code == 0, err
    code, out, _ = run(capsys, "ledger", ledger)
    assert "NOTE: survey released data also released, whole or in part, under survey-again" in out
    code, out, _ = run(capsys, "ledger", "verify", ledger)
    assert code == 0 and "NOTE: survey-again released data also released, whole or in part, under survey" in out


@pytest.mark.e2e
def test_a_batch_that_would_change_a_budget_the_ledger_holds_is_refused_unless_said(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 1.0)
    spec = tmp_path / "season.toml"
    spec.write_text('ledger = "ledger.json"\n[datasets.czech]\nbuiltin = "czech"\nbudget = 10.0\n'
                    '[[releases]]\ndataset = "czech"\nepsilon = 5.0\nout = "r1"\nsimulate = true\n')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    for dry in (["--dry-run"], []):
        code, _, err = run(capsys, "batch", spec, *dry)
        assert code == BudgetRefused.exit_status and err.count("\n") == 1
        assert "change the budget of czech from epsilon 1 (add-remove) to epsilon 10 (add-remove)" in err
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    code, out, _ = run(capsys, "batch", spec, "--dry-run", "--set-budgets")
    assert code == 0 and "budget: would change the budget of czech from epsilon 1" in out
    assert budget_status(ledger, "czech").epsilon_budget == 1.0
    assert run(capsys, "batch", spec, "--set-budgets")[0] == 0
    status = budget_status(ledger, "czech")
    assert status.epsilon_budget == 10.0 and status.epsilon_spent == pytest.approx(5.0)


@pytest.mark.e2e
def test_a_batch_never_makes_a_ledger(tmp_path, capsys):
    spec = tmp_path / "season.toml"
    spec.write_text('ledger = "ledgr.json"\n[datasets.czech]\nbuiltin = "czech"\n'
                    '[[releases]]\ndataset = "czech"\nepsilon = 0.5\nout = "r1"\nsimulate = true\n')
    for dry in (["--dry-run"], []):
        code, _, err = run(capsys, "batch", spec, *dry)
        assert code == 2 and "ledgr.json does not exist" in err and "ledger init" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["season.toml"]


# --- rollback, re-initialisation, rewriting ----------------------------------------------------------------------
@pytest.mark.e2e
def test_an_old_copy_put_back_is_found(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 1.0)
    old = ledger.read_bytes()
    assert release(capsys, ledger, tmp_path / "a", "--epsilon", "0.9")[0] == 0
    ledger.write_bytes(old)  # the charge of 0.9 "forgotten"
    problems = verify_ledger(ledger)
    assert problems and "an older copy was put back" in problems[0]
    code, _, err = release(capsys, ledger, tmp_path / "b", "--epsilon", "0.9")
    assert code == LedgerIntegrityError.exit_status and "fails verification" in err and not (tmp_path / "b").exists()


@pytest.mark.e2e
def test_a_ledger_deleted_and_made_again_is_found(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 1.0)
    assert release(capsys, ledger, tmp_path / "a", "--epsilon", "0.9")[0] == 0
    ledger.unlink()
    (tmp_path / "ledger.json.key").unlink()
    with pytest.raises(LedgerIntegrityError, match="records an earlier ledger"):
        init_ledger(ledger)
    # With the anchor removed too, nothing beside the ledger remembers it: the bundles do.
    (tmp_path / "ledger.json.anchor").unlink()
    init_ledger(ledger)
    problems = verify_bundles(ledger, [tmp_path / "a"])
    assert len(problems) == 1 and "charged to another ledger" in problems[0]
    code, out, _ = run(capsys, "ledger", "verify", ledger, "--bundles", tmp_path / "a")
    assert code == 6 and "FAILED: the bundle" in out


@pytest.mark.e2e
def test_records_rewritten_by_the_key_holder_are_found_by_the_anchor(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 1.0)
    assert release(capsys, ledger, tmp_path / "a", "--epsilon", "0.9")[0] == 0
    # Whoever holds the key rewrites the release's epsilon to 0.1 and re-computes every MAC and the head.
    key = ledger_key(ledger)
    data = json.loads(ledger.read_text())
    data["records"][1]["epsilon"] = 0.1
    data["records"][1]["guarantee"]["loss"]["epsilon"] = 0.1
    previous = ""
    for record in data["records"]:
        body = {k: v for k, v in record.items() if k != "mac"}
        record["mac"] = hmac.new(key, previous.encode() + b"|" + json.dumps(
            body, sort_keys=True, separators=(",", ":")).encode(), hashlib.sha256).hexdigest()
        previous = record["mac"]
    assert data["anchor"] == "beside"  # the anchor the ledger is bound to, under the head's MAC
    data["head"]["mac"] = hmac.new(key, f"head|2|{previous}|{data['ledger_id']}|anchored|anchor=beside".encode(),
                                   hashlib.sha256).hexdigest()
    ledger.write_text(json.dumps(data))
    problems = verify_ledger(ledger)
    assert problems and "the records were rewritten" in problems[0]
    # And the bundle's charge no longer matches a record.
    data_anchor = tmp_path / "ledger.json.anchor"
    data_anchor.unlink()
    assert any("not in the ledger" in p for p in verify_bundles_after_reanchor(ledger, tmp_path / "a"))


def verify_bundles_after_reanchor(ledger, bundle):
    """The chain verifies (the anchor is gone and its absence alone is reported): compare the bundle directly."""
    problems = verify_ledger(ledger)
    assert problems and "no record of this ledger" in problems[0]
    charge_record = json.loads((bundle / "internal" / "charge.json").read_text())
    record = records(ledger)[charge_record["sequence"] - 1]
    return [] if record["mac"] == charge_record["mac"] else ["the bundle's charge is not in the ledger"]


@pytest.mark.e2e
def test_bundles_and_charges_are_held_together(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    for name in ("a", "b"):
        assert release(capsys, ledger, tmp_path / name, "--epsilon", "0.1")[0] == 0
    assert verify_bundles(ledger, [tmp_path / "a", tmp_path / "b"]) == []
    missing = verify_bundles(ledger, [tmp_path / "a"])
    assert len(missing) == 1 and "charge 2" in missing[0] and "has no bundle" in missing[0]
    (tmp_path / "plain").mkdir()
    assert any("records no charge" in p for p in verify_bundles(ledger, [tmp_path / "plain"]))
    release_id = json.loads((tmp_path / "a" / "public" / "release.json").read_text())["release_id"]
    assert release_id == ledger_entries(ledger)[0]["release_id"]
    assert len(release_id) == 32 and set(release_id) <= set("0123456789abcdef")  # random hex, nothing of the data
    assert release_id != ledger_entries(ledger)[1]["release_id"]


def test_the_ledger_its_key_and_its_anchor_are_owner_only(tmp_path):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 1.0)
    for path in (ledger, tmp_path / "ledger.json.key", tmp_path / "ledger.json.anchor"):
        assert (path.stat().st_mode & 0o777) == 0o600, path


def test_a_version_2_ledger_is_read_and_anchored_from_its_next_write(tmp_path):
    key = b"k" * 64
    os.environ["TABRELEASE_LEDGER_KEY"] = key.decode()
    try:
        from tabrelease.ledger import _append, _head_mac, _key_id

        data = {"version": 2, "key_id": _key_id(key), "records": []}
        _append(data, key, {"kind": "budget", "dataset": "czech", "epsilon": 1.0, "delta": 0.0,
                            "neighbours": "add-remove"})
        _append(data, key, {"kind": "release", "dataset": "czech", "fingerprint": "f", "epsilon": 0.4, "delta": 0.0,
                            "neighbours": "add-remove", "total_public": False})
        data["head"] = {"count": 2, "mac": _head_mac(key, 2, data["records"][-1]["mac"])}
        ledger = tmp_path / "old.json"
        ledger.write_text(json.dumps(data))
        ledger.chmod(0o600)
        assert verify_ledger(ledger) == [] and budget_status(ledger, "czech").epsilon_spent == pytest.approx(0.4)
        charge_guarantee(ledger, guarantee(epsilon=0.5))
        upgraded = json.loads(ledger.read_text())
        assert upgraded["version"] == 3 and verify_ledger(ledger) == []
        assert budget_status(ledger, "czech").epsilon_spent == pytest.approx(0.9)
        with pytest.raises(BudgetRefused):
            charge_guarantee(ledger, guarantee(epsilon=0.2))
    finally:
        del os.environ["TABRELEASE_LEDGER_KEY"]


@pytest.mark.e2e
def test_a_bad_budget_is_one_line(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    for args, message in [
        (("--budget-neighbours", "sensitive-attributes", "--epsilon", "1"), "names the protected attributes"),
        (("--rho", "1", "--epsilon", "1"), "not both"),
        (("--accounting", "zcdp", "--epsilon", "1"), "rho, or an (epsilon, delta > 0) target"),
    ]:
        code, _, err = run(capsys, "ledger", ledger, "--set-budget", "czech", *args)
        assert code == 2 and err.count("\n") == 1 and message in err, err
    with pytest.raises(TabreleaseError):
        PrivacyUnit(kind="household")


def test_a_hard_link_to_the_ledger_alone_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "q" * 40)  # no key file: the ledger's own links are what counts
    ledger = init_ledger(tmp_path / "L.json")
    set_budget(ledger, "czech", 1.0)
    os.link(ledger, tmp_path / "H.json")
    for name in ("L.json", "H.json"):
        with pytest.raises(LedgerIntegrityError, match="2 hard links"):
            charge_guarantee(tmp_path / name, guarantee(epsilon=0.6))
    assert len(records(ledger)) == 1


def test_another_ledger_put_in_the_place_of_one_is_found(tmp_path):
    first = init_ledger(tmp_path / "A.json")
    set_budget(first, "czech", 1.0)
    charge_guarantee(first, guarantee(epsilon=0.9))
    second = init_ledger(tmp_path / "B.json")  # a fresh ledger, spending from zero
    shutil.copy(second, first)
    shutil.copy(tmp_path / "B.json.key", tmp_path / "A.json.key")
    problems = verify_ledger(first)
    assert problems and "last saw another ledger at this path" in problems[0]


@pytest.mark.parametrize("excess", [1, 256, 512])
@pytest.mark.e2e
def test_counts_just_beyond_the_sampler_domain_are_refused_before_the_charge(tmp_path, excess):
    """n * W was compared in floating point: 2^62 + 512 rounds to 2^62 and passed, then the sampler refused it
    after the charge. Exact integers refuse it first."""
    import numpy as np

    from tabrelease import LedgerAccount, ReleaseSpec, loss_of
    from tabrelease.workflow import publish_release

    czech = builtin_table("czech")
    counts = np.zeros_like(czech.counts)
    counts.flat[0] = 2**62 + excess  # as a float: 2^62 exactly, what the old comparison saw
    ledger = init_ledger(tmp_path / "ledger.json")
    with pytest.raises(TabreleaseError, match="too large for release mode's 64-bit secure sampler"):
        publish_release(czech.with_counts(counts), ReleaseSpec(loss=loss_of(1.0), margins=[(0, 1)], mechanism="cells"),
                        tmp_path / "r", account=LedgerAccount(ledger=ledger))
    assert ledger_entries(ledger) == [] and not (tmp_path / "r").exists()


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["release", "plan", "fit"])
def test_json_output_is_one_json_document_on_stdout(tmp_path, command):
    """A solver that prints a banner when first made (HiGHS 1.16) must not reach stdout: each command that solves
    (release: the rounding MILP; plan: the paper's LP column; fit: the facial-set LP) in a fresh process."""
    import subprocess
    import sys

    arguments = {"release": ["release", "czech", "--epsilon", "1", "--simulate", "--seed", "3",
                             "--out", str(tmp_path / "r")],
                 "plan": ["plan", "czech", "--epsilon", "1"],
                 "fit": ["fit", "journey_to_work"]}[command]
    done = subprocess.run([sys.executable, "-m", "tabrelease", *arguments, "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # the whole of stdout is one document
    if command == "release":
        assert document["release"]["guarantee"]["loss"]["epsilon"] == 1.0
    elif command == "plan":
        assert {row["epsilon"] for row in document["margins"]} == {1.0}
    else:
        assert document["table"] == "journey_to_work"


@pytest.mark.e2e
def test_the_copula_refuses_a_table_beyond_its_records_before_the_charge(tmp_path, monkeypatch):
    import numpy as np

    import tabrelease.copula as copula
    import tabrelease.mechanisms.gaussian_copula as copula_mechanism
    from tabrelease import LedgerAccount, ReleaseSpec, loss_of
    from tabrelease.workflow import publish_release

    czech = builtin_table("czech")
    monkeypatch.setattr(copula_mechanism, "MAX_SYNTHETIC_RECORDS", int(czech.n) - 1)  # one record beyond the limit
    ledger = init_ledger(tmp_path / "ledger.json")
    with pytest.raises(TabreleaseError, match="synthesises one record per person") as refused:
        publish_release(czech,
                        ReleaseSpec(loss=loss_of(1.0), margins=[(0, 1)], mechanism="copula-id", mode="simulation"),
                        tmp_path / "r", account=LedgerAccount(ledger=ledger))
    assert str(int(czech.n)) not in str(refused.value)
    assert ledger_entries(ledger) == [] and not (tmp_path / "r").exists()
    # Below the limit the records are drawn in chunks: the same table as one draw, with memory that does not grow.
    monkeypatch.setattr(copula, "CHUNK_VALUES", 64)
    from tabrelease.testing import plan_at
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import measure

    plan = plan_at(czech.shape, [(0, 1)], 1.0, mechanism="copula-id")
    measurements = measure(plan, czech, SimulationNoise(5))
    model = copula.fit_copula(czech.shape, measurements)
    chunked = copula.synthesise(plan, measurements, np.random.default_rng(9)).table
    monkeypatch.setattr(copula, "CHUNK_VALUES", 2**24)
    whole = copula.synthetic_counts(czech.shape, copula.sample_records(model, np.random.default_rng(9)))
    assert np.array_equal(chunked, whole) and chunked.sum() == model.n


def test_a_rho_budget_composes_ten_gaussian_releases_and_refuses_the_eleventh(tmp_path):
    """Gaussian releases compose by adding rho; the budget, declared as an (epsilon, delta) target, is the largest
    rho whose exact conversion (Canonne, Kamath & Steinke 2020, checked here with OpenDP's own) meets it."""
    import opendp.prelude as dp

    from tabrelease import LedgerAccount
    from tabrelease.testing import plan_at
    from tabrelease.workflow import charge_release

    dp.enable_features("contrib")

    def opendp_epsilon(rho, delta):  # OpenDP's conversion: a unit Gaussian at L2 distance sqrt(2 rho)
        base = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float),
                                  scale=1.0)
        return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(base), delta).map(math.sqrt(2 * rho))[0]

    czech = builtin_table("czech")
    plan = plan_at(czech.shape, [(0, 1), (1, 2)], 0.5, mechanism="gaussian", delta=1e-6)
    one = PrivacyGuarantee.from_dict(plan_guarantee(plan, czech)).loss.rho
    # The plan's rho is that of its Gaussian: (L2 sensitivity / sigma)^2 / 2.
    assert one == pytest.approx((plan.calibration.sensitivity / plan.calibration.scale) ** 2 / 2, rel=1e-12)
    target_delta = 1e-6
    target_epsilon = opendp_epsilon(10.5 * one, target_delta)  # room for ten and a half
    assert opendp_epsilon(10 * one, target_delta) < target_epsilon < opendp_epsilon(11 * one, target_delta)
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", target_epsilon, target_delta, accounting="zcdp")
    account = LedgerAccount(ledger=ledger)
    for i in range(10):
        charge_release(account, czech, plan, tmp_path / f"r{i}", "simulation")
    status = budget_status(ledger, "czech")
    assert status.rho_spent == pytest.approx(10 * one, rel=1e-12)
    assert status.epsilon_spent == pytest.approx(opendp_epsilon(10 * one, target_delta), rel=1e-6)
    with pytest.raises(BudgetRefused, match="needs rho"):
        charge_release(account, czech, plan, tmp_path / "r10", "simulation")
    # (Basic composition of the same releases' (epsilon, delta) would have stopped far sooner: ten of them cost
    # epsilon 5 against a target of about 1.9.)


def plan_guarantee(plan, table):
    from tabrelease.mechanisms import get_mechanism

    return get_mechanism(plan.mechanism).guarantee(plan, table.variables).as_dict()


# --- found by review ----------------------------------------------------------------------------------------------
def _version_2_ledger(tmp_path, records_to_add, name="old.json"):
    """A ledger as version 2 wrote it (no id, no anchor, no guarantee field), under the environment's key."""
    from tabrelease.ledger import _append, _head_mac, _key_id

    key = os.environ["TABRELEASE_LEDGER_KEY"].encode()
    data = {"version": 2, "key_id": _key_id(key), "records": []}
    for record in records_to_add:
        _append(data, key, record)
    data["head"] = {"count": len(data["records"]),
                    "mac": _head_mac(key, len(data["records"]), data["records"][-1]["mac"] if data["records"] else "")}
    ledger = tmp_path / name
    ledger.write_text(json.dumps(data))
    ledger.chmod(0o600)
    return ledger


def test_version_2_records_of_randomized_response_and_sensitive_attributes_keep_their_real_units(tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "v" * 40)
    # Version 2 wrote randomized response with the neighbours asked for, sensitive-attributes as replace.
    ledger = _version_2_ledger(tmp_path, [
        {"kind": "release", "dataset": "czech", "fingerprint": "f", "epsilon": 0.5, "delta": 0.0,
         "neighbours": "add-remove", "total_public": False, "mechanism": "randomized-response"},
        {"kind": "release", "dataset": "czech-s", "fingerprint": "g", "epsilon": 0.5, "delta": 0.0,
         "neighbours": "replace", "total_public": False, "mechanism": "sensitive-attributes"}])
    with pytest.raises(BudgetRefused, match="local"):
        set_budget(ledger, "czech", 1.0)  # RR has no add-remove guarantee
    set_budget(ledger, "czech", 1.0, neighbours="replace")  # its local epsilon is replace epsilon
    assert budget_status(ledger, "czech").epsilon_spent == pytest.approx(0.5)
    for unit, attributes in (("replace", ()), ("sensitive-attributes", ("B",))):
        with pytest.raises(BudgetRefused, match="no guarantee under this budget's unit"):
            set_budget(ledger, "czech-s", 1.0, neighbours=unit, attributes=attributes)


def test_a_version_2_copy_put_back_after_the_upgrade_is_found(tmp_path, monkeypatch):
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "v" * 40)
    ledger = _version_2_ledger(tmp_path, [])
    backup = ledger.read_bytes()
    set_budget(ledger, "czech", 1.0)  # upgraded to version 3, anchored
    charge_guarantee(ledger, guarantee(epsilon=0.5))
    charge_guarantee(ledger, guarantee(epsilon=0.5))
    ledger.write_bytes(backup)
    problems = verify_ledger(ledger)
    assert problems and "an older copy of version 2 was put back" in problems[0]
    with pytest.raises(LedgerIntegrityError):
        charge_guarantee(ledger, guarantee(epsilon=0.5))


def test_a_budget_below_the_delta_already_spent_is_refused(tmp_path):
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 10.0, delta=1e-5)
    charge_guarantee(ledger, guarantee(kind=APPROXIMATE, epsilon=1.0, delta=1e-5))
    with pytest.raises(BudgetRefused, match="already spent delta"):
        set_budget(ledger, "czech", 10.0, delta=1e-9)


def test_a_reader_never_sees_a_writer_s_ledger_behind_its_anchor(tmp_path, monkeypatch):
    """Another process's charge between a reader's two reads (the ledger, then the anchor) looked like a rollback.
    The anchor is read first: whatever is written in between leaves the ledger ahead, which is allowed."""
    import tabrelease.ledger as ledger_module

    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "czech", 5.0)
    real = {"load": ledger_module._load, "anchor": ledger_module._anchor_lines}
    state = {"armed": False, "writing": False}

    def read_then_write(kind):
        def read(path):
            value = real[kind](path)
            if state["armed"] and not state["writing"]:  # right after the reader's first read: a charge
                state["armed"], state["writing"] = False, True
                try:
                    charge_guarantee(ledger, guarantee(epsilon=0.1))
                finally:
                    state["writing"] = False
            return value
        return read

    monkeypatch.setattr(ledger_module, "_load", read_then_write("load"))
    monkeypatch.setattr(ledger_module, "_anchor_lines", read_then_write("anchor"))
    for _ in range(3):
        state["armed"] = True
        budget_status(ledger, "czech")
    monkeypatch.undo()
    assert verify_ledger(ledger) == [] and budget_status(ledger, "czech").releases == 3


def test_an_anchor_that_cannot_be_appended_after_the_write_does_not_undo_the_charge(tmp_path, monkeypatch):
    import tabrelease.ledger as ledger_module

    ledger = init_ledger(tmp_path / "ledger.json")

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ledger_module, "_append_anchor", full)
    with pytest.warns(RuntimeWarning, match="could not be appended"):
        entry = charge_guarantee(ledger, guarantee(epsilon=0.5))
    monkeypatch.undo()
    assert entry["sequence"] == 1 and verify_ledger(ledger) == []  # ahead of its anchor: allowed
    charge_guarantee(ledger, guarantee(epsilon=0.5))
    assert verify_ledger(ledger) == [] and budget_status(ledger, "czech").epsilon_spent == pytest.approx(1.0)


def test_a_relative_anchor_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", "agency.anchor")
    with pytest.raises(TabreleaseError, match="must be an absolute path"):
        init_ledger(tmp_path / "ledger.json")


def test_a_line_cut_by_a_crash_does_not_swallow_the_next(tmp_path):
    ledger = init_ledger(tmp_path / "ledger.json")
    anchor = tmp_path / "ledger.json.anchor"
    with open(anchor, "a") as handle:
        handle.write('{"ledger_id": "cut')  # a crash mid-line
    charge_guarantee(ledger, guarantee(epsilon=0.5))
    assert json.loads(anchor.read_text().splitlines()[-1])["count"] == 1
    assert verify_ledger(ledger) == []


@pytest.mark.e2e
def test_the_dry_run_of_a_moved_ledger_reads_its_anchor(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ledger = init_ledger(tmp_path / "a" / "l.json")
    set_budget(ledger, "czech", 1.0)
    for suffix in ("", ".key", ".anchor"):
        os.replace(tmp_path / "a" / f"l.json{suffix}", tmp_path / "b" / f"l.json{suffix}")
    spec = tmp_path / "b" / "season.toml"
    spec.write_text('ledger = "l.json"\n[datasets.czech]\nbuiltin = "czech"\n'
                    '[[releases]]\ndataset = "czech"\nepsilon = 0.5\nout = "r1"\nsimulate = true\n')
    assert verify_ledger(tmp_path / "b" / "l.json") == []
    code, out, err = run(capsys, "batch", spec, "--dry-run")
    assert code == 0, err


@pytest.mark.e2e
def test_a_rho_budget_s_json_is_valid_and_a_charged_release_reports_success(tmp_path, capsys):
    """Under a rho budget without a delta the epsilon spent is not defined (NaN). Strict JSON has no NaN, and the
    --json summary of a release made and charged failed with an internal error (exit 3, "nothing charged") and a
    cut-off document on stdout; `ledger --json` failed too (a new user's trial). Now the summary is whole, exit 0,
    and the undefined figure is null."""
    ledger = init_ledger(tmp_path / "ledger.json")
    assert run(capsys, "ledger", ledger, "--set-budget", "czech", "--rho", "0.5")[0] == 0
    code, out, err = release(capsys, ledger, tmp_path / "a", "--epsilon", "0.2", "--json")
    assert code == 0, err
    assert json.loads(out)["release"] and [r["kind"] for r in records(ledger)] == ["budget", "release"]
    code, out, err = run(capsys, "ledger", ledger, "--json")
    assert code == 0, err
    (czech,) = [d for d in json.loads(out)["datasets"] if d["dataset"] == "czech"]
    assert czech["epsilon_spent"] is None and czech["rho_spent"] == pytest.approx(0.2**2 / 2)


def test_json_is_written_whole_or_not_at_all(capsys):
    from tabrelease.cli._common import print_json

    with pytest.raises(TypeError):
        print_json({"fine": 1, "then": object()})
    assert capsys.readouterr().out == ""
    print_json({"nan": float("nan"), "list": [1.0, float("nan")]})
    assert json.loads(capsys.readouterr().out) == {"nan": None, "list": [1.0, None]}


@pytest.mark.parametrize("held_as", ["cells", "records"])
def test_the_same_data_with_its_variables_in_another_order_is_the_same_table(tmp_path, held_as):
    """A second dataset id for the same data read with its columns in another order was given a fresh budget (the
    fingerprints took the variables in their given order; a new user's trial: one file, two batch datasets, two
    budgets). The order-free fingerprint recognises it, held as cells or as records; a table that differs by one
    record is not matched."""
    import numpy as np

    from tabrelease import ContingencyTable
    from tabrelease.tables.model import MicrodataTable

    czech = builtin_table("czech")
    order = [3, 0, 5, 1, 4, 2]

    def held(variables, levels, counts):
        if held_as == "cells":
            return ContingencyTable(variables, levels, counts, name="czech")
        codes = np.argwhere(counts > 0)
        return MicrodataTable(variables, levels, codes, name="czech", weights=counts[counts > 0])

    original = held(czech.variables, czech.levels, np.asarray(czech.counts))
    moved = held(tuple(czech.variables[a] for a in order), tuple(czech.levels[a] for a in order),
                 np.transpose(czech.counts, order))
    ledger = init_ledger(tmp_path / "ledger.json")
    for dataset in ("survey", "survey-b", "survey-c"):
        set_budget(ledger, dataset, 1.0)
    charge(LedgerAccount(ledger=ledger, dataset="survey"), original, guarantee(), mechanism="test", margins=[],
           output=None, noise_mode="simulation")
    with pytest.raises(BudgetRefused, match="released before under the dataset 'survey'"):
        charge(LedgerAccount(ledger=ledger, dataset="survey-b"), moved, guarantee(), mechanism="test", margins=[],
               output=None, noise_mode="simulation")
    other = np.asarray(czech.counts).copy()
    other.flat[0] += 1
    charge(LedgerAccount(ledger=ledger, dataset="survey-c"), held(czech.variables, czech.levels, other), guarantee(),
           mechanism="test", margins=[], output=None, noise_mode="simulation")  # distinct data: no alias
    assert [r["dataset"] for r in records(ledger) if r["kind"] == "release"] == ["survey", "survey-c"]


def _held(table, held_as, name):
    """`table` held as cells, or as its records (one row of codes per non-zero cell, with its count)."""
    import numpy as np

    from tabrelease import ContingencyTable
    from tabrelease.tables.model import MicrodataTable

    counts = np.asarray(table.counts)
    if held_as == "cells":
        return ContingencyTable(table.variables, table.levels, counts, name=name)
    return MicrodataTable(table.variables, table.levels, np.argwhere(counts > 0), name=name,
                          weights=counts[counts > 0])


@pytest.mark.parametrize("held_as", ["cells", "records"])
def test_data_released_in_part_under_a_second_dataset_id_is_refused_unless_said(tmp_path, held_as):
    """Some of a dataset's variables released under a second dataset id had a fresh budget: the fingerprints were of
    whole tables, and a margin of released data (fewer columns of the same file) is a smaller table. Each release now
    records its margins' fingerprints, and a table that is a margin of earlier data, of which earlier data is a
    margin, or which shares a margin of two or more variables with it, is refused; nothing is charged."""
    czech = builtin_table("czech")  # six variables: A..F

    def charged(ledger, dataset, letters, **allowed):
        table = _held(czech if letters == "ABCDEF" else czech.margin(letters), held_as, f"czech-{letters}")
        return charge(LedgerAccount(ledger=ledger, dataset=dataset, allow_unbudgeted=True, **allowed), table,
                      guarantee(), mechanism="test", margins=[], output=None, noise_mode="simulation")

    names = dict(zip("ABCDEF", czech.variables))
    cases = [("ABCDEF", "ABC", "this table and one released before share the margin \\[[^]]+, [^]]+\\]"),
             ("AB", "ABCDEF", f"a table released before is this table's margin \\[{names['A']}, {names['B']}\\]"),
             ("D", "ABCDEF", f"a table released before is this table's margin \\[{names['D']}\\]"),
             ("ABCDEF", "F", "this table is a margin of one released before"),
             ("ABC", "ABD", f"this table and one released before share the margin \\[{names['A']}, {names['B']}\\]"),
             ("ACE", "BCDE", f"this table and one released before share the margin \\[{names['C']}, {names['E']}\\]")]
    for i, (first, second, how) in enumerate(cases):
        ledger = init_ledger(tmp_path / f"ledger-{i}.json")
        charged(ledger, "survey", first)
        with pytest.raises(BudgetRefused, match=f"under the dataset 'survey' \\(record 1 of the ledger\\): {how}, by"):
            charged(ledger, "other", second)
        assert [r["dataset"] for r in records(ledger) if r["kind"] == "release"] == ["survey"]
        charged(ledger, "other", second, allow_alias=True)
        assert [r["aliases"] for r in records(ledger) if r["kind"] == "release"] == [[], ["survey"]]
        assert budget_status(ledger, "survey").aliases == ("other",)
        assert budget_status(ledger, "other").aliases == ("survey",)
    # Sharing one variable only (AB and AC share A) is too weak a sign; data with one record more is other data.
    ledger = init_ledger(tmp_path / "ledger-weak.json")
    charged(ledger, "survey", "AB")
    charged(ledger, "other", "AC")
    import numpy as np

    from tabrelease import ContingencyTable

    more = np.asarray(czech.counts).copy()
    more[(0,) * 6] += 1
    charge(LedgerAccount(ledger=ledger, dataset="third", allow_unbudgeted=True),
           _held(ContingencyTable(czech.variables, czech.levels, more), held_as, "czech-more"), guarantee(),
           mechanism="test", margins=[], output=None, noise_mode="simulation")
    assert [r["dataset"] for r in records(ledger) if r["kind"] == "release"] == ["survey", "other", "third"]
    assert budget_status(ledger, "survey").aliases == ()


@pytest.mark.e2e
def test_fewer_columns_of_a_released_file_under_a_second_dataset_id_are_refused_in_one_line(tmp_path, capsys):
    import numpy as np

    rng = np.random.default_rng(3)
    rows = ["sex,region,tenure"] + [f"{rng.choice(['f', 'm'])},{rng.choice(['n', 's', 'e', 'w'])},"
                                    f"{rng.choice(['own', 'rent', 'other'])}" for _ in range(300)]
    people = tmp_path / "people.csv"
    people.write_text("\n".join(rows) + "\n")
    ledger = init_ledger(tmp_path / "ledger.json")
    set_budget(ledger, "census", 1.0)
    set_budget(ledger, "census-tenure", 1.0)

    def release_of(variables, dataset, out, *extra):
        return run(capsys, "release", people, "--microdata", "--variables", variables, "--margins", "all-2-way",
                   "--epsilon", "0.5", "--simulate", "--seed", "1", "--ledger", ledger, "--dataset", dataset,
                   "--out", tmp_path / out, *extra)

    assert release_of("sex,region,tenure", "census", "a")[0] == 0
    code, out, err = release_of("tenure,sex", "census-tenure", "b")
    assert code == BudgetRefused.exit_status and not (tmp_path / "b").exists() and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "under the dataset 'census' (record 3 of the ledger): this table is a margin of one released before" in err
    assert [r["dataset"] for r in records(ledger) if r["kind"] == "release"] == ["census"]
    assert release_of("tenure,sex", "census-tenure", "b", "--allow-alias")[0] == 0


def test_margins_are_fingerprinted_whatever_the_order_of_variables_and_levels_and_the_levels_no_one_is_in(
        monkeypatch):
    """Each margin's fingerprint is that of the margin given as a table of its own with its variables and levels in
    another order and a level declared that no one is in (a review found a second dataset id given a fresh budget
    for the same data read with `--levels` in another order, or one more declared level); every margin of a table
    and two-way margin, whatever the table's counts."""
    import numpy as np

    from tabrelease import ContingencyTable
    from tabrelease.ledger import canonical_fingerprint, margin_prints

    key = b"k" * 32
    czech = builtin_table("czech")
    printed = margin_prints(czech, key)
    assert [len(v) for v, _ in printed] == [1] * 6 + [2] * 15
    for variables, fingerprint in printed[::2]:
        axes = czech.axes(variables)[::-1]
        counts = np.transpose(czech.margin(variables).counts)
        levels = [tuple(czech.levels[a])[::-1] + ("nobody",) for a in axes]
        counts = np.flip(counts)  # the levels reversed ...
        counts = np.pad(counts, [(0, 1)] * counts.ndim)  # ... and one more, with no one in it
        alone = ContingencyTable(tuple(czech.variables[a] for a in axes), tuple(levels), counts)
        assert canonical_fingerprint(alone, key) == fingerprint
    assert canonical_fingerprint(czech.margin("AB"), key) != canonical_fingerprint(czech.margin("AC"), key)
    # A margin too large to count densely (an origin-destination table of thousands of zones) is aggregated by
    # sorting its rows: the same fingerprints.
    import tabrelease.ledger as ledger_module

    records = _held(czech, "records", "czech")  # margins of records are aggregated from them, not summed from cells
    assert margin_prints(records, key) == printed
    monkeypatch.setattr(ledger_module, "DENSE_MARGIN_MAX_CELLS", 0)
    assert margin_prints(records, key) == printed
    monkeypatch.undo()
    rng = np.random.default_rng(0)
    for cells in (rng.poisson(2, (2,) * 10), (rng.random((2,) * 10) < 0.02).astype(int)):
        wide = ContingencyTable(tuple(f"v{i}" for i in range(10)), tuple(("a", "b") for _ in range(10)), cells)
        assert [len(v) for v, _ in margin_prints(wide, key)] == [1] * 10 + [2] * 45


@pytest.mark.parametrize("change", ["levels reversed", "a level no one is in"])
def test_the_same_table_with_its_levels_in_another_order_or_one_more_is_the_same_data(tmp_path, change):
    import numpy as np

    from tabrelease import ContingencyTable

    czech = builtin_table("czech")
    counts = np.asarray(czech.counts)
    levels = list(czech.levels)
    if change == "levels reversed":
        levels[2], counts = tuple(levels[2])[::-1], np.flip(counts, axis=2)
    else:
        levels[2], counts = tuple(levels[2]) + ("unknown",), np.pad(counts, [(0, 0), (0, 0), (0, 1)] + [(0, 0)] * 3)
    ledger = init_ledger(tmp_path / "ledger.json")
    charge(LedgerAccount(ledger=ledger, dataset="survey", allow_unbudgeted=True), czech, guarantee(), mechanism="test",
           margins=[], output=None, noise_mode="simulation")
    with pytest.raises(BudgetRefused, match="released before under the dataset 'survey'"):
        charge(LedgerAccount(ledger=ledger, dataset="other", allow_unbudgeted=True),
               ContingencyTable(czech.variables, tuple(levels), counts, name="czech"), guarantee(), mechanism="test",
               margins=[], output=None, noise_mode="simulation")


@pytest.mark.parametrize("shared_anchor", [False, True])
def test_a_copied_ledger_is_refused_while_its_original_stands_and_a_moved_one_is_not(tmp_path, monkeypatch, capsys,
                                                                                    shared_anchor):
    """A copy of the ledger's folder (ledger, key and anchor; or ledger and key beside a shared anchor) verified as
    intact and spent its budget a second time (a new user's trial: budget 1, 0.8 charged to each). The anchor's last
    line for the ledger names where it was written: while a ledger of the same id stands there, a copy elsewhere is
    refused, before anything is recorded in it, and the original is not disturbed. A ledger moved (nothing left at
    the old path) is accepted where it now stands."""
    if shared_anchor:
        monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(tmp_path / "shared.anchor"))
    original = init_ledger(tmp_path / "ledger.json")
    set_budget(original, "czech", 1.0)
    fork = tmp_path / "fork"
    fork.mkdir()
    for name in ("ledger.json", "ledger.json.key") + (() if shared_anchor else ("ledger.json.anchor",)):
        shutil.copy2(tmp_path / name, fork / name)
    copied = fork / "ledger.json"
    before = copied.read_bytes()
    with pytest.raises(LedgerIntegrityError, match=f"is a copy of the one its anchor last saw at {original}"):
        charge_guarantee(copied, guarantee(epsilon=0.8))
    with pytest.raises(LedgerIntegrityError, match="is a copy of the one"):
        set_budget(copied, "czech", 2.0)
    assert copied.read_bytes() == before
    # A copy is read as a backup is: it verifies, and says what it is.
    assert verify_ledger(copied) == [] and copied_from(copied) == str(original)
    code, out, _ = run(capsys, "ledger", "verify", copied)
    assert code == 0 and f"NOTE: this is a copy of the ledger at {original}" in out
    charge_guarantee(original, guarantee(epsilon=0.8))  # the original spends as before
    assert verify_ledger(original) == [] and copied_from(original) is None
    moved = tmp_path / "moved"
    moved.mkdir()
    for name in ("ledger.json", "ledger.json.key") + (() if shared_anchor else ("ledger.json.anchor",)):
        os.replace(tmp_path / name, moved / name)
    # Another ledger made at the old path (another id) does not make the moved one a copy; a shared anchor remembers
    # a ledger at that path, and `init` refuses it there.
    if not shared_anchor:
        init_ledger(tmp_path / "ledger.json")
    charge_guarantee(moved / "ledger.json", guarantee(epsilon=0.1))
    assert [r["kind"] for r in records(moved / "ledger.json")] == ["budget", "release", "release"]


@pytest.mark.e2e
def test_disjoint_columns_of_one_file_under_two_dataset_ids_are_refused_unless_said(tmp_path, capsys):
    """Columns of one microdata file that share no variable, released under two dataset ids: each had a full budget
    for the same people (a reviewer released three such sets of Rochdale's records at epsilon 1 each, and a batch
    spec naming the file under two datasets ran both). The ledger now prints the file a table was read from, whole,
    and refuses a second dataset id for it, whatever columns it takes; a copy of the file is the same bytes. A file
    with one record less is other data (not recognised: said in docs/ledger.md). The batch's prediction refuses the
    spec whole, before anything is made."""
    import numpy as np

    rng = np.random.default_rng(5)
    header = "sex,region,tenure,work"
    rows = [f"{rng.choice(['f', 'm'])},{rng.choice(['n', 's', 'e', 'w'])},{rng.choice(['own', 'rent'])},"
            f"{rng.choice(['yes', 'no'])}" for _ in range(400)]
    people = tmp_path / "people.csv"
    people.write_text("\n".join([header, *rows]) + "\n")
    ledger = init_ledger(tmp_path / "ledger.json")
    for dataset in ("health", "work", "copy", "fewer"):
        set_budget(ledger, dataset, 1.0)

    def release_of(source, variables, dataset, out, *extra):
        return run(capsys, "release", source, "--microdata", "--variables", variables, "--margins", "all-2-way",
                   "--epsilon", "1", "--simulate", "--seed", "1", "--ledger", ledger, "--dataset", dataset,
                   "--out", tmp_path / out, *extra)

    assert release_of(people, "sex,region", "health", "a")[0] == 0
    before = ledger.read_bytes()
    code, out, err = release_of(people, "tenure,work", "work", "b")
    assert code == BudgetRefused.exit_status and out == "" and len(err.strip().splitlines()) == 1, err
    assert ("under the dataset 'health' (record 5 of the ledger): this table and one released before were read from "
            "the same file, or copies of it (whatever columns each took)") in err
    assert ledger.read_bytes() == before and not (tmp_path / "b").exists()
    shutil.copy(people, tmp_path / "people-copy.csv")
    code, _, err = release_of(tmp_path / "people-copy.csv", "work,tenure", "copy", "c")
    assert code == BudgetRefused.exit_status and "read from the same file" in err, err
    (tmp_path / "fewer.csv").write_text("\n".join([header, *rows[1:]]) + "\n")
    assert release_of(tmp_path / "fewer.csv", "tenure,work", "fewer", "d")[0] == 0  # not recognised
    assert release_of(people, "tenure,work", "work", "b", "--allow-alias")[0] == 0
    assert budget_status(ledger, "health").aliases == ("work",)
    assert budget_status(ledger, "work").aliases == ("health",)
    # Copies as editors and checkouts rewrite them (a reviewer's trial: a CRLF copy and one with a newline more had
    # each a full budget): the same lines, so the same file's people. Refused likewise, whatever columns each takes.
    text = people.read_bytes()
    for name, rewritten in (("crlf", text.replace(b"\n", b"\r\n")), ("bom", b"\xef\xbb\xbf" + text),
                            ("newlines", text + b"\n\n"), ("no-newline", text.rstrip(b"\n")),
                            ("cr", text.replace(b"\n", b"\r"))):
        set_budget(ledger, name, 1.0)
        (tmp_path / f"{name}.csv").write_bytes(rewritten)
        code, _, err = release_of(tmp_path / f"{name}.csv", "sex,work", name, name)
        assert code == BudgetRefused.exit_status and "read from the same file" in err, (name, err)
        assert not (tmp_path / name).exists()
    # A field changed in one record is other bytes of its lines: not recognised (other data, as the docs say).
    set_budget(ledger, "edited", 1.0)
    (tmp_path / "edited.csv").write_bytes(text.replace(rows[7].encode(), rows[7].replace("yes", "YES").replace(
        "no", "NO").encode(), 1).replace(b"\n", b"\r\n"))
    assert release_of(tmp_path / "edited.csv", "sex,work", "edited", "e")[0] == 0
    # A batch naming the file under two datasets: refused whole by its prediction, nothing made or charged.
    ledger2 = init_ledger(tmp_path / "ledger2.json")
    (tmp_path / "season.toml").write_text(
        'ledger = "ledger2.json"\n'
        '[datasets.health]\nfile = "people.csv"\nmicrodata = true\nvariables = ["sex", "region"]\nbudget = 1.0\n'
        '[datasets.work]\nfile = "people.csv"\nmicrodata = true\nvariables = ["tenure", "work"]\nbudget = 1.0\n'
        '[[releases]]\ndataset = "health"\nmargins = "all-2-way"\nepsilon = 1.0\nout = "bh"\nsimulate = true\n'
        'seed = 1\n[[releases]]\ndataset = "work"\nmargins = "all-2-way"\nepsilon = 1.0\nout = "bw"\n'
        'simulate = true\nseed = 2\n')
    before = ledger2.read_bytes()
    code, out, err = run(capsys, "batch", tmp_path / "season.toml")
    assert code == BudgetRefused.exit_status and "read from the same file" in err, (out, err)
    assert ledger2.read_bytes() == before and not (tmp_path / "bh").exists() and not (tmp_path / "bw").exists()


@pytest.mark.unit
def test_a_release_record_with_malformed_source_prints_is_a_problem():
    from tabrelease.ledger import _check_record

    record = {"kind": "release", "dataset": "d", "fingerprint": "f", "epsilon": 1.0, "delta": 0.0,
              "neighbours": "add-remove"}
    assert _check_record(record) == ""
    assert _check_record({**record, "source_prints": ["a" * 64]}) == ""
    for bad in ("a" * 64, ["A" * 64], ["a" * 63], [1]):
        assert "source files' fingerprints" in _check_record({**record, "source_prints": bad})


@pytest.mark.e2e
@pytest.mark.parametrize("text", [
    b"a,b\r\nx,y\r\n\r\n", b"\xef\xbb\xbfa,b\rx,y", b"\xef\xbb", b"\r\n\r\na,b\n\nx,y\r\n", b"a,\r\r\n\n,b"])
def test_the_lines_print_does_not_depend_on_where_the_chunks_fall(text):
    """The print of a text file's lines, fed in chunks at every split point (three pieces), is that of its lines
    normalised at once: the byte-order mark dropped, CRLF and CR made LF, the line breaks at the end dropped."""
    import hashlib
    import hmac

    from tabrelease.ledger import _TextPrint

    key = b"k" * 64
    expected = text.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n").replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    want = hmac.new(key, b"source-text-v1:" + expected, hashlib.sha256).hexdigest()
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            lines = _TextPrint(hmac.new(key, b"source-text-v1:", hashlib.sha256))
            for piece in (text[:i], text[i:j], text[j:]):
                if piece:
                    lines.update(piece)
            assert lines.hexdigest() == want, (text, i, j)


def test_the_source_print_is_of_the_bytes_read_the_sheet_read_and_never_of_a_file_shadowed_by_a_built_in(
        tmp_path, monkeypatch):
    """A second review of the source print: it was taken of the file as it stood at the charge (a file rewritten
    after it was read gave the print of other bytes, and one gone was silently not printed); two sheets of one
    workbook, different people, were refused as one dataset; and a file in the working folder named like a built-in
    table gave the built-in table its print. Now a file changed or gone since it was read refuses the release before
    its charge, the sheet is part of the print, and a built-in table has none."""
    import pandas as pd

    from tabrelease.ledger import source_prints
    from tabrelease.tables import load_input
    from tabrelease.tables._text import SOURCE_FILE

    key = b"k" * 64
    people = tmp_path / "people.csv"
    people.write_text("sex,tenure\nf,own\nm,rent\nf,rent\n")
    table = load_input(people, microdata=True)
    assert len(source_prints(table, key)) == 2  # of the bytes, and of the lines
    people.write_text("sex,tenure\nf,own\nm,rent\nf,rent\nm,own\n")  # a record more since it was read
    with pytest.raises(TabreleaseError, match="changed after it was read"):
        source_prints(table, key)
    ledger = init_ledger(tmp_path / "ledger.json")
    with pytest.raises(TabreleaseError, match="changed after it was read"):
        charge(LedgerAccount(ledger=ledger, dataset="people", allow_unbudgeted=True), table, guarantee(),
               mechanism="test", margins=[], output=None, noise_mode="simulation")
    assert [r for r in records(ledger) if r["kind"] == "release"] == []
    people.unlink()
    with pytest.raises(TabreleaseError, match="could not be read again"):
        source_prints(table, key)
    # Two sheets of one workbook: two prints; one sheet read twice: one.
    book = tmp_path / "book.xlsx"
    with pd.ExcelWriter(book) as writer:
        pd.DataFrame({"sex": ["f", "m", "f"], "tenure": ["own", "rent", "rent"]}).to_excel(writer, sheet_name="2019",
                                                                                           index=False)
        pd.DataFrame({"sex": ["m", "m", "f"], "tenure": ["own", "own", "rent"]}).to_excel(writer, sheet_name="2020",
                                                                                          index=False)

    def sheet(name):
        from tabrelease.tables import CsvOptions

        return source_prints(load_input(book, microdata=True, csv_options=CsvOptions(sheet=name)), key)

    assert sheet("2019") != sheet("2020") and sheet("2019") == sheet("2019") and len(sheet("2019")) == 1
    # A file named like a built-in table: the built-in table is read, and has no print.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "czech").write_text("a,count\nx,1\ny,2\n")
    assert SOURCE_FILE not in load_input("czech").metadata and source_prints(load_input("czech"), key) == []


@pytest.mark.e2e
def test_a_public_file_changed_after_its_release_is_found(tmp_path, capsys):
    """A new user's trial: with the stated epsilon edited in release.json, a count in a CSV file edited, or a CSV
    file deleted, `ledger verify --bundles` said intact. Each public file is now sealed at the release with the
    ledger's key (internal/charge.json), and each change is found; a seal rewritten to the edited files' digest
    without the key is found too."""
    import shutil

    from tabrelease.ledger import public_digest

    ledger = init_ledger(tmp_path / "ledger.json")
    assert release(capsys, ledger, tmp_path / "a", "--epsilon", "0.1")[0] == 0
    assert verify_bundles(ledger, [tmp_path / "a"]) == []
    charge_record = json.loads((tmp_path / "a" / "internal" / "charge.json").read_text())
    assert charge_record["public_sha256"] == public_digest(tmp_path / "a" / "public")
    public = tmp_path / "a" / "public"
    csv = sorted(public.glob("*.csv"))[0]

    def edited(change):
        shutil.copytree(tmp_path / "a", tmp_path / "e")
        change(tmp_path / "e")
        problems = verify_bundles(ledger, [tmp_path / "e"])
        shutil.rmtree(tmp_path / "e")
        return problems

    said = "public files were changed after its release"
    epsilon = lambda b: (b / "public" / "release.json").write_text(  # noqa: E731
        (b / "public" / "release.json").read_text().replace('"epsilon": 0.1', '"epsilon": 0.01'))
    count = lambda b: (b / "public" / csv.name).write_text(  # noqa: E731
        (b / "public" / csv.name).read_text()[:-2] + str((int((b / "public" / csv.name).read_text()[-2]) + 1) % 10)
        + "\n")
    for change in (epsilon, count, lambda b: (b / "public" / csv.name).unlink(),
                   lambda b: (b / "public" / "extra.csv").write_text("a,count\n")):
        problems = edited(change)
        assert len(problems) == 1 and said in problems[0], problems

    def forged(b):  # the edit, and the digest in charge.json rewritten to match it (without the key)
        epsilon(b)
        record = json.loads((b / "internal" / "charge.json").read_text())
        record["public_sha256"] = public_digest(b / "public")
        (b / "internal" / "charge.json").write_text(json.dumps(record))

    problems = edited(forged)
    assert len(problems) == 1 and "seal of its public files is not the ledger's" in problems[0]
    code, out, _ = run(capsys, "ledger", "verify", ledger, "--bundles", tmp_path / "a")
    assert code == 0 and "each of the 1 bundles has its charge and its public files as released" in out


@pytest.mark.unit
def test_the_public_digest_is_the_same_on_every_system_and_copy(tmp_path):
    """A review's trial: the digest followed the platform's order of paths (Windows' ignores case) and the names as
    the file system gave them (a decomposed é after a macOS copy), so an honest bundle could fail elsewhere. Names are
    NFC-normalised and ordered by their UTF-8 bytes; an empty folder added is found."""
    import hashlib
    import unicodedata

    from tabrelease.ledger import public_digest

    one, other = tmp_path / "a", tmp_path / "b"
    for folder, form in ((one, "NFC"), (other, "NFD")):
        folder.mkdir()
        for name, text in (("Région__Sexe.csv", "r,s,count\n"), ("age.csv", "a,count\n"), ("release.json", "{}\n")):
            (folder / unicodedata.normalize(form, name)).write_text(text)
    assert public_digest(one) == public_digest(other)
    # By hand: each file's kind, name and bytes, the names in UTF-8 byte order ('R' < 'a' < 'r').
    expected = hashlib.sha256(b"tabrelease public-v1")
    for name, text in (("Région__Sexe.csv", "r,s,count\n"), ("age.csv", "a,count\n"), ("release.json", "{}\n")):
        encoded, content = name.encode(), text.encode()
        expected.update(b"F" + len(encoded).to_bytes(8, "big") + encoded + len(content).to_bytes(8, "big") + content)
    assert public_digest(one) == expected.hexdigest()
    (one / "extra").mkdir()
    assert public_digest(one) != public_digest(other)


@pytest.mark.e2e
def test_an_anchor_put_in_the_place_of_the_ledger_s_own_is_refused(tmp_path, capsys, monkeypatch):
    """A reviewer's trial: with the anchor on append-only storage ($TABRELEASE_LEDGER_ANCHOR), an old copy of the
    ledger was put back and the variable pointed at a copy of the anchor without its last line (or that copy put
    beside the ledger, the variable unset): the copy verified and a spent budget was spent again. The ledger records
    its anchor under its head's MAC, and any other anchor is refused; a ledger moved with its anchor beside it
    still works."""
    worm = tmp_path / "worm.anchor"
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(worm))
    ledger = init_ledger(tmp_path / "L.json")
    set_budget(ledger, "czech", 1.0)
    backup = ledger.read_text()
    assert release(capsys, ledger, tmp_path / "r1", "--epsilon", "1")[0] == 0
    ledger.write_text(backup)  # the rollback
    lines = worm.read_text().splitlines(keepends=True)
    forged = tmp_path / "forged.anchor"
    forged.write_text("".join(lines[:-1]))
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(forged))
    (problem,) = verify_ledger(ledger)
    assert problem.startswith(f"the ledger is anchored at {os.path.realpath(worm)} ($TABRELEASE_LEDGER_ANCHOR), but "
                              f"the anchor in use is {os.path.realpath(forged)}")
    assert release(capsys, ledger, tmp_path / "r2", "--epsilon", "1")[0] == 6
    monkeypatch.delenv("TABRELEASE_LEDGER_ANCHOR")
    shutil.copy(forged, tmp_path / "L.json.anchor")
    (problem,) = verify_ledger(ledger)
    assert "but the anchor in use is" in problem and "(beside it)" in problem
    assert not (tmp_path / "r2").exists()
    # With its own anchor again, the rollback is found as before.
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(worm))
    assert "an older copy was put back" in verify_ledger(ledger)[0]
    # A ledger whose anchor is beside it moves with it.
    monkeypatch.delenv("TABRELEASE_LEDGER_ANCHOR")
    here = tmp_path / "here"
    here.mkdir()
    moved = init_ledger(here / "M.json")
    set_budget(moved, "czech", 1.0)
    assert json.loads(moved.read_text())["anchor"] == "beside"
    there = tmp_path / "there"
    here.rename(there)
    assert verify_ledger(there / "M.json") == []
    assert release(capsys, there / "M.json", tmp_path / "r3", "--epsilon", "0.5")[0] == 0


def test_a_ledger_written_before_ledgers_recorded_their_anchor_is_bound_at_its_next_write(tmp_path):
    ledger = init_ledger(tmp_path / "L.json")
    key = ledger_key(ledger)
    data = json.loads(ledger.read_text())
    del data["anchor"]  # as an earlier version wrote it: the head's MAC without the anchor
    data["head"]["mac"] = hmac.new(key, f"head|0||{data['ledger_id']}|anchored".encode(), hashlib.sha256).hexdigest()
    ledger.write_text(json.dumps(data))
    assert verify_ledger(ledger) == []
    set_budget(ledger, "czech", 1.0)
    assert json.loads(ledger.read_text())["anchor"] == "beside" and verify_ledger(ledger) == []


def test_two_copies_of_a_version_2_ledger_take_one_id_and_the_second_is_refused_as_a_copy(tmp_path, monkeypatch):
    """A reviewer's trial: a version-2 ledger (no id) copied with its key, before its upgrade; each copy took a random
    id at its first write, so the shared append-only anchor never linked them, and each spent the whole budget.
    The id is now drawn from the key and the first record's MAC: the copies take one id, and the second to be
    written is a copy of a ledger that still stands."""
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "v" * 40)
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(tmp_path / "shared.anchor"))
    budget = {"kind": "budget", "dataset": "czech", "epsilon": 1.0, "delta": 0.0, "neighbours": "add-remove"}
    ledger = _version_2_ledger(tmp_path, [budget])
    copy = tmp_path / "copy.json"
    shutil.copy(ledger, copy)
    copy.chmod(0o600)
    charge_guarantee(ledger, guarantee(epsilon=0.5))
    with pytest.raises(LedgerIntegrityError, match="copy"):
        charge_guarantee(copy, guarantee(epsilon=0.5))
    first, second = json.loads(ledger.read_text()), json.loads(copy.read_text())
    assert first["version"] == 3 and second["version"] == 2  # the copy was not written
    assert copied_from(copy) is None  # a version-2 file is not yet anyone's copy ...
    other = _version_2_ledger(tmp_path, [{**budget, "epsilon": 2.0}], name="other.json")
    charge_guarantee(other, guarantee(epsilon=0.5))  # ... and another version-2 ledger takes an id of its own
    assert json.loads(other.read_text())["ledger_id"] != first["ledger_id"]


@pytest.mark.e2e
def test_the_anchor_binding_compares_files_and_a_batch_s_prediction_checks_it(tmp_path, capsys, monkeypatch):
    """A review's trials of the binding: the variable naming the ledger's own FILE.anchor, or the anchor reached by
    a link (as two mounts of one share reach it), is the ledger's anchor; a bound anchor this machine cannot see is
    let be; and a batch's prediction refuses an anchor put in the place of the ledger's own, as its run does (it had
    said "would be made")."""
    ledger = init_ledger(tmp_path / "L.json")
    set_budget(ledger, "czech", 3.0)
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(tmp_path / "L.json.anchor"))
    assert verify_ledger(ledger) == []
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "L.json.anchor", tmp_path / "elsewhere" / "same.anchor")
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(tmp_path / "elsewhere" / "same.anchor"))
    assert verify_ledger(ledger) == []
    shutil.copy(tmp_path / "L.json.anchor", tmp_path / "copy.anchor")
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(tmp_path / "copy.anchor"))
    assert "but the anchor in use is" in verify_ledger(ledger)[0]
    spec = tmp_path / "spec.toml"
    spec.write_text('ledger = "L.json"\n[datasets.czech]\nbuiltin = "czech"\n[[releases]]\ndataset = "czech"\n'
                    'margins = "[A,B]"\nepsilon = 0.5\nout = "r1"\nsimulate = true\nseed = 1\n')
    capsys.readouterr()
    assert main(["batch", str(spec), "--dry-run"]) == 6
    assert "but the anchor in use is" in capsys.readouterr().err
    # Bound to an anchor this machine does not see (another host's mount of a shared one): not told, let be.
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(tmp_path / "mnt" / "shared.anchor"))
    (tmp_path / "mnt").mkdir()
    other = init_ledger(tmp_path / "M.json")
    set_budget(other, "czech", 3.0)
    (tmp_path / "mnt").rename(tmp_path / "mnt-elsewhere")
    (tmp_path / "mnt2").mkdir()
    (tmp_path / "mnt-elsewhere" / "shared.anchor").rename(tmp_path / "mnt2" / "shared.anchor")
    monkeypatch.setenv("TABRELEASE_LEDGER_ANCHOR", str(tmp_path / "mnt2" / "shared.anchor"))
    assert verify_ledger(other) == []


@pytest.mark.skipif(os.name != "posix", reason="flock is POSIX")
def test_a_file_system_that_cannot_flock_a_folder_keeps_the_lock_file_alone(tmp_path, monkeypatch):
    """A review's trial: on NFS flock is emulated and a folder opened read-only gets EBADF; every ledger command
    failed ("Bad file descriptor"). The lock file alone is used there, as before."""
    import errno
    import fcntl
    import stat as stat_module

    real = fcntl.flock

    def nfs_like(fd, operation):
        if stat_module.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        return real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", nfs_like)
    ledger = init_ledger(tmp_path / "L.json")
    set_budget(ledger, "czech", 1.0)
    charge_guarantee(ledger, guarantee(epsilon=0.5))
    assert budget_status(ledger, "czech").epsilon_spent == pytest.approx(0.5) and verify_ledger(ledger) == []


def test_a_sensitive_attribute_budget_protects_its_columns_not_only_their_names(tmp_path, capsys):
    """A review's trial: a budget for sensitive-attributes(income) took any release whose --sensitive named a
    variable called income. With two headers swapped, the column really holding income was released exactly as the
    insensitive "age" (the true income x smoke margin in public/) while "income" was charged. The ledger now
    records the protected columns' keyed prints (names left out) and refuses a release that protects some
    attributes alone where a protected name holds another column, or another name holds a protected column;
    nothing is charged. A record-level release of the same file protects every column and is charged."""
    import pandas as pd

    czech = builtin_table("czech")
    frame = pd.DataFrame([(*(czech.levels[a][i] for a, i in enumerate(cell)), int(czech.counts[cell]))
                          for cell in np.ndindex(czech.shape)],
                         columns=["income", "age", "smoke", "work", "press", "family", "count"])
    frame.to_csv(tmp_path / "survey.csv", index=False)
    frame.rename(columns={"income": "age", "age": "income"}).to_csv(tmp_path / "swapped.csv", index=False)
    # A copy of income under another name beside it (every cell listed: its off-diagonal ones 0).
    copied = frame.groupby(["income", "smoke"], as_index=False)["count"].sum()
    levels = sorted(set(frame["income"]))
    pd.DataFrame([(i, j, s, c if i == j else 0) for i, s, c in copied.itertuples(index=False) for j in levels],
                 columns=["income", "salary", "smoke", "count"])[["income", "salary", "smoke", "count"]].to_csv(
        tmp_path / "copied.csv", index=False)
    ledger = tmp_path / "L.json"
    assert main(["ledger", "init", str(ledger)]) == 0
    assert main(["ledger", str(ledger), "--set-budget", "survey", "--epsilon", "3", "--budget-neighbours",
                 "sensitive-attributes", "--budget-attributes", "income"]) == 0

    def release(name, *options, out):
        capsys.readouterr()
        code = main(["release", str(tmp_path / name), "--epsilon", "0.5", "--neighbours", "replace", *options,
                     "--margins", "[AB][AC]", "--ledger", str(ledger), "--dataset", "survey", "--out",
                     str(tmp_path / out)])
        return code, capsys.readouterr().err

    sensitive = ("--sensitive", "income", "--mechanism", "sensitive-attributes")
    assert release("survey.csv", *sensitive, out="r1")[0] == 0
    code, err = release("swapped.csv", *sensitive, out="r2")
    assert code == 5 and "the variable 'income', which survey's budget protects, is not the column" in err, err
    code, err = release("copied.csv", *sensitive, out="r3")
    assert code == 5 and "the variable 'salary' holds the counts by level of a column" in err, err
    assert not (tmp_path / "r2").exists() and not (tmp_path / "r3").exists()
    records = json.loads(ledger.read_text())["records"]
    assert [r["kind"] for r in records] == ["budget", "release"]  # nothing charged for the two refused
    assert release("survey.csv", *sensitive, out="r4")[0] == 0  # the same columns again
    assert release("swapped.csv", out="r5")[0] == 0  # record-level: every column protected, whatever its name
