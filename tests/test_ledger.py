"""The privacy ledger: keyed fingerprints, budgets, composition, refusal before noise, concurrency."""

import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tabrelease import builtin_table
from tabrelease.cli import main
from tabrelease.errors import TabreleaseError
from tabrelease.ledger import budget_status, charge, ledger_key, ledger_summary, set_budget, table_fingerprint


def cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "TABRELEASE_LEDGER_KEY"}
    return subprocess.run([sys.executable, "-m", "tabrelease", *args], capture_output=True, text=True, cwd=cwd, env=env)


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
    assert cli("ledger", str(ledger), "--set-budget", "czech", "--epsilon", "1", cwd=tmp_path).returncode == 0
    # Two releases of 0.5 at once, from two processes.
    commands = [[sys.executable, "-m", "tabrelease", "release", "czech", "--epsilon", "0.5", "--simulate",
                 "--seed", str(i), "--ledger", str(ledger), "--out", str(tmp_path / f"r{i}")] for i in range(2)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    results = [p.communicate() + (p.returncode,) for p in procs]
    assert [r[2] for r in results] == [0, 0], results
    third = cli("release", "czech", "--epsilon", "0.1", "--simulate", "--ledger", str(ledger),
                "--out", str(tmp_path / "r3"), cwd=tmp_path)
    assert third.returncode == 2
    assert third.stderr.count("\n") == 1 and "exceeded" in third.stderr and "0 of 1 remains" in third.stderr
    assert not (tmp_path / "r3").exists()
    data = json.loads(ledger.read_text())
    assert len(data["entries"]) == 2 and sum(e["epsilon"] for e in data["entries"]) == pytest.approx(1.0)
    shown = cli("ledger", str(ledger), "--json", cwd=tmp_path)
    row = json.loads(shown.stdout)["tables"][0]
    assert row["releases"] == 2 and row["epsilon_remaining"] == pytest.approx(0.0)


def test_concurrent_releases_lose_no_entry_and_never_overspend(tmp_path):
    ledger = tmp_path / "ledger.json"
    table = builtin_table("edwards")
    set_budget(ledger, table, 1.0)
    commands = [[sys.executable, "-m", "tabrelease", "release", "edwards", "--epsilon", "0.25", "--simulate",
                 "--seed", str(i), "--ledger", str(ledger), "--out", str(tmp_path / f"r{i}")] for i in range(6)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    codes = [p.wait() for p in procs]
    assert sorted(codes) == [0, 0, 0, 0, 2, 2]
    status = budget_status(ledger, table)
    assert status.releases == 4 and status.epsilon_spent == pytest.approx(1.0)
    # Without a budget, many threads appending at once keep every entry.
    free = tmp_path / "free.json"
    czech = builtin_table("czech")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: charge(free, czech, epsilon=0.1, delta=None, mechanism="fourier", margins=["[AB]"],
                                       output=None, noise_mode="simulation"), range(40)))
    assert budget_status(free, czech).releases == 40


def test_refusal_happens_before_any_noise_is_drawn(tmp_path, monkeypatch):
    import tabrelease.noise as noise

    ledger = tmp_path / "ledger.json"
    set_budget(ledger, builtin_table("czech"), 0.3)

    def no_noise(*args, **kwargs):
        raise AssertionError("noise was drawn for a refused release")

    monkeypatch.setattr(noise.SecureNoise, "perturb", no_noise)
    code = main(["release", "czech", "--epsilon", "0.5", "--ledger", str(ledger), "--out", str(tmp_path / "r")])
    assert code == 2 and not (tmp_path / "r").exists()


def test_deltas_add_and_a_pure_budget_refuses_delta(tmp_path):
    ledger = tmp_path / "ledger.json"
    table = builtin_table("czech")
    set_budget(ledger, table, 2.0, delta=1e-6)
    for _ in range(2):
        charge(ledger, table, epsilon=0.5, delta=4e-7, mechanism="gaussian", margins=[], output=None, noise_mode="simulation")
    with pytest.raises(TabreleaseError, match="delta"):
        charge(ledger, table, epsilon=0.5, delta=4e-7, mechanism="gaussian", margins=[], output=None, noise_mode="simulation")
    status = budget_status(ledger, table)
    assert status.delta_spent == pytest.approx(8e-7) and status.epsilon_spent == pytest.approx(1.0)
    pure = tmp_path / "pure.json"
    set_budget(pure, table, 2.0)
    with pytest.raises(TabreleaseError, match="delta"):
        charge(pure, table, epsilon=0.5, delta=1e-9, mechanism="gaussian", margins=[], output=None, noise_mode="simulation")


def test_paper_calibration_is_charged_at_the_epsilon_it_really_gives(tmp_path):
    ledger = tmp_path / "ledger.json"
    code = main(["release", "journey_to_work", "--epsilon", "1", "--calibration", "paper", "--mechanism", "auto",
                 "--simulate",
                 "--ledger", str(ledger), "--out", str(tmp_path / "r")])
    assert code == 0
    (entry,) = json.loads(ledger.read_text())["entries"]
    audit = json.loads((tmp_path / "r" / "internal" / "audit.json").read_text())
    actual = audit["calibration_check"]["epsilon_actual"]
    assert actual == pytest.approx(1.2988, abs=1e-3)  # 1.715 / 1.3203, the paper's Theorem 2 scale
    assert entry["epsilon"] == pytest.approx(actual)


def test_the_ledger_holds_no_data_and_its_key_stays_beside_it(tmp_path):
    ledger = tmp_path / "ledger.json"
    table = builtin_table("edwards")
    set_budget(ledger, table, 1.0)
    data = json.loads(ledger.read_text())
    assert set(data) == {"version", "budgets", "entries"}
    assert [set(b) for b in data["budgets"].values()] == [{"table", "epsilon", "delta", "set"}]
    key = tmp_path / "ledger.json.key"
    assert key.exists() and (key.stat().st_mode & 0o777) == 0o600
    (status,) = ledger_summary(ledger)
    assert status.table == "edwards" and status.epsilon_budget == 1.0


def test_a_new_key_is_never_seen_half_written(tmp_path, monkeypatch):
    # CI once saw an empty key file: one thread created it while another read it. Threads released together
    # must all get the same whole key, and only the key file (0600) is left behind.
    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)
    for attempt in range(20):
        ledger = tmp_path / f"ledger{attempt}.json"
        start = threading.Barrier(16)

        def read_key(_):
            start.wait()
            return ledger_key(ledger)

        with ThreadPoolExecutor(16) as pool:
            keys = set(pool.map(read_key, range(16)))
        assert len(keys) == 1 and len(keys.pop()) == 64
        assert (os.stat(f"{ledger}.key").st_mode & 0o777) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"ledger{a}.json.key" for a in range(20))
