"""Governance (issue 13): release mode at any n, checks before the charge, a public schema that depends only on
declared metadata, no confidential residue, and bad inputs that hang or lie."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import tabrelease as tr
from tabrelease.testing import plan_at
from tabrelease.noise import SimulationNoise
from tabrelease.pipeline import released_frames
from tabrelease.cli import main
from tabrelease.ledger import budget_status, init_ledger
from tabrelease.tables import margin_counts


@pytest.fixture(autouse=True)
def no_environment_key(monkeypatch):
    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)


def _simulated(**settings):
    """A simulation-mode spec at epsilon 1, seed 1 (built when called: its own checks are among those tested)."""
    return tr.ReleaseSpec(loss=tr.loss_of(1.0), mode="simulation", seed=1, **settings)


def _table(shape, big_cell, seed=0):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 50, size=shape).astype(np.int64)
    counts.flat[7] = big_cell
    levels = [[str(i) for i in range(k)] for k in shape]
    return tr.ContingencyTable(tuple(f"V{i}" for i in range(len(shape))), tuple(map(tuple, levels)), counts, "big")


@pytest.mark.parametrize("shape, cell", [((10, 10, 2), 3 * 10**7), ((51, 18, 2), 3.3 * 10**8), ((4, 3, 2), 10**12)])
@pytest.mark.parametrize("mechanism", ["planned", "auto", "cells", "margins"])
@pytest.mark.unit
def test_release_mode_draws_exact_64_bit_integers_at_any_n(shape, cell, mechanism):
    """The 32-bit OpenDP domain failed at 2.4e9 and the float check at n = 3.3e8; the released margins are the
    truth plus noise of the planned size (a relative error far below 1e-3 at these n)."""
    table = _table(shape, int(cell))
    margins = [(0, 1), (1, 2)]
    release = tr.release_margins(table, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=margins, mechanism=mechanism,
                                                   mode="release"))
    for g, m in zip(release.margins, release.released_margins):
        truth = margin_counts(table.counts, g)
        assert np.abs(m - truth).sum() < 1e-3 * table.n


def test_counts_too_large_for_the_sampler_are_refused_before_the_charge(tmp_path, capsys):
    table = _table((4, 3, 2), 2**61)
    table.with_counts(table.counts).write_csv(tmp_path / "huge.csv")
    ledger = init_ledger(tmp_path / "ledger.json")
    code = main(["release", str(tmp_path / "huge.csv"), "--epsilon", "1", "--mechanism", "auto", "--margins", "[AB][BC]",
                 "--ledger", str(ledger), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "too large for release mode's 64-bit secure sampler" in err
    assert str(2**61) not in err and str(table.n) not in err
    assert budget_status(ledger, "huge").releases == 0 and not (tmp_path / "r").exists()


def test_the_public_files_do_not_depend_on_the_input_file_s_order(tmp_path, capsys):
    frame = tr.builtin_table("journey_to_work").to_frame()
    frame["A"] = frame["A"].map({"a": "walk", "b": "bus", "c": "car", "d": "rail"})
    outputs = []
    for i, ordered in enumerate([frame, frame.sort_values("count", ascending=False), frame.sample(frac=1, random_state=3)]):
        ordered.to_csv(tmp_path / f"t{i}.csv", index=False)
        out = tmp_path / f"r{i}"
        assert main(["release", str(tmp_path / f"t{i}.csv"), "--epsilon", "1", "--simulate", "--seed", "4",
                     "--margins", "[AB][AC][BC]", "--out", str(out)]) == 0
        release = json.loads((out / "public" / "release.json").read_text())
        files = {p.name: p.read_text() for p in (out / "public").iterdir() if p.suffix == ".csv"}
        outputs.append((release, files))
    capsys.readouterr()
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0][0]["variables"][0]["levels"] == ["bus", "car", "rail", "walk"]


def test_levels_read_from_sparse_data_are_refused_in_release_mode_and_flagged_in_simulation(tmp_path, capsys):
    (tmp_path / "s.csv").write_text("A,B,count\nx,p,4\ny,q,1\nx,q,2\n")  # a level nobody has would be missing
    base = ["release", str(tmp_path / "s.csv"), "--epsilon", "1", "--sparse", "--margins", "[AB]"]
    assert main([*base, "--out", str(tmp_path / "r1")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "declare every variable's levels (--levels FILE" in err
    assert not (tmp_path / "r1").exists()
    assert main([*base, "--simulate", "--out", str(tmp_path / "r2")]) == 0
    assert "the published schema reveals which values occur" in capsys.readouterr().out
    (tmp_path / "levels.json").write_text(json.dumps({"A": ["x", "y", "z"], "B": ["p", "q"]}))
    assert main([*base, "--levels", str(tmp_path / "levels.json"), "--out", str(tmp_path / "r3")]) == 0
    release = json.loads((tmp_path / "r3" / "public" / "release.json").read_text())
    assert release["variables"][0]["levels"] == ["x", "y", "z"]  # the declared level nobody has is published


def test_a_killed_run_s_staging_folder_is_removed_by_the_next_run(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".r.staging-{dead.pid}-abc"
    (stale / "internal").mkdir(parents=True)
    (stale / "internal" / "audit.json").write_text("{}")
    alive = tmp_path / f".r.staging-{os.getpid()}-xyz"  # a run still going (this process) is left alone
    alive.mkdir()
    assert main(["release", "czech", "--epsilon", "1", "--simulate", "--out", str(tmp_path / "r")]) == 0
    assert f"removed {stale.name}" in capsys.readouterr().out
    assert not stale.exists() and alive.exists()


SLOW_WRITE = """
import sys, time
import tabrelease.reports as reports
def slow(audit, figures=None):
    open(sys.argv[2], "w").close()
    time.sleep(60)
reports.render_audit_html = slow
from tabrelease.cli import main
sys.exit(main(["release", "czech", "--epsilon", "1", "--simulate", "--out", sys.argv[1]]))
"""


def test_a_terminated_release_leaves_nothing_behind(tmp_path):
    marker = tmp_path / "writing"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITE, str(tmp_path / "out"), str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300  # a bound for a hang, not a speed: a loaded machine starts Python slowly
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate()[1]
    staged = [p for p in tmp_path.iterdir() if p.name.startswith(".out.staging-")]
    assert staged and all((p.stat().st_mode & 0o777) == 0o700 for p in staged)  # mid-write, owner-only
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=300) == 128 + signal.SIGTERM  # a bound for a hang, not a speed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["writing"]


@pytest.mark.parametrize("label, prepare, argv, message", [
    ("a FIFO", lambda d: os.mkfifo(d / "t.csv"), ["fit", "t.csv"], "t.csv is not a regular file"),
    ("a device", None, ["fit", "/dev/zero"], "/dev/zero is not a regular file"),
    ("duplicate columns", lambda d: (d / "t.csv").write_text("A,A,count\n0,0,1\n0,1,1\n1,0,1\n1,1,1\n"),
     ["fit", "t.csv"], "t.csv: columns 1 and 2 have the same name"),
    ("a huge lift", None, ["release", "czech", "--epsilon", "1", "--mechanism", "nonneg", "--nonneg-t", "1e308",
                           "--simulate", "--out", "o"], "lifts the counts by more than 1e15"),
    ("a negative seed", None, ["release", "czech", "--epsilon", "1", "--simulate", "--seed", "-1", "--out", "o"],
     "argument --seed: -1 must be a non-negative whole number"),
])
def test_inputs_that_hung_or_lied_get_one_line(tmp_path, monkeypatch, capsys, label, prepare, argv, message):
    monkeypatch.chdir(tmp_path)
    if prepare:
        prepare(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(argv) == 2, label
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.unit
def test_a_count_above_2_to_the_53_is_kept_exactly():
    frame = pd.DataFrame({"A": ["0", "0", "1", "1"], "B": ["0", "1", "0", "1"],
                          "count": [str(2**53 + 1), "1", "2", "3"]})
    table = tr.table_from_frame(frame)
    assert int(table.counts[0, 0]) == 2**53 + 1 and table.n == 2**53 + 7


@pytest.mark.parametrize("call, message", [
    (lambda t: tr.release_margins(t, _simulated(margins=7)), "give the margins as a list, e.g."),
    (lambda t: tr.release_margins(t, _simulated(margins=[(0, 1.5)])),
     "a margin is a tuple of axis numbers or variable names, not"),
    (lambda t: tr.release_margins(t, _simulated(margins=[("A", "Z")])), "unknown variable 'Z'"),
    (lambda t: tr.release_margins(t, _simulated(margins="[AZ]")), "Z"),
    (lambda t: plan_at((2, 0, 3), [(0, 1)], 1.0), "every variable needs at least 2 levels"),
    (lambda t: tr.release_margins(t, _simulated(mechanism="nonneg", options={"nonneg_t": float("nan")})),
     "--nonneg-t must be a finite number"),
    # A new user's trial: each of these had raised AttributeError or TypeError from inside.
    (lambda t: tr.release_margins("czech", _simulated()), "a release is made from a table .*not str"),
    (lambda t: tr.release_margins(t.counts, _simulated()), "a release is made from a table .*not ndarray"),
    (lambda t: tr.publish_release(t, _simulated(), None), "a release's folder is a path, not NoneType"),
    (lambda t: tr.publish_release(t, _simulated(), "out", account="ledger.json"),
     r"charged through a LedgerAccount \(LedgerAccount\(ledger=...\)\), not str"),
    (lambda t: tr.unit_of("replace", sensitive=5), "the sensitive attributes are variables' names or letters"),
    (lambda t: tr.LedgerAccount(ledger=5), "a ledger is named by its path, not 5"),
    (lambda t: SimulationNoise(seed="x"), "a seed is a non-negative whole number, not 'x'"),
    (lambda t: tr.run_plan(plan_at(t.shape, [(0, 1)], 1.0), -t.counts - 1, SimulationNoise(1)),
     r"the counts must be whole non-negative numbers \(a cell is negative"),
    (lambda t: tr.run_plan(plan_at(t.shape, [(0, 1)], 1.0), t.counts + 0.5, SimulationNoise(1)),
     "the counts must be whole non-negative numbers"),
    (lambda t: tr.run_plan(plan_at(t.shape, [(0, 1)], 1.0), t.counts, None), "the noise comes from a noise source"),
])
@pytest.mark.unit
def test_api_misuse_is_refused_in_words(call, message):
    """(Margins by name, letter or bracket notation are accepted: see the test below.)"""
    with pytest.raises(tr.TabreleaseError, match=message):
        call(tr.builtin_table("czech"))


def test_an_unwritable_destination_is_found_before_the_charge(tmp_path, capsys):
    ledger = init_ledger(tmp_path / "ledger.json")
    # /proc takes no new folders, even from root (a chmod would not stop root)
    code = main(["release", "czech", "--epsilon", "1", "--ledger", str(ledger), "--out", "/proc/tabrelease-release"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot write a release into /proc" in err
    assert budget_status(ledger, "czech").releases == 0


@pytest.mark.unit
def test_microdata_levels_must_be_declared_for_release_mode():
    people = pd.DataFrame({"sex": ["f", "m", "f", "f", "m"], "region": ["n", "s", "s", "s", "n"]})
    undeclared = tr.table_from_microdata(people)
    with pytest.raises(tr.TabreleaseError, match="declare every variable's levels"):
        tr.release_margins(undeclared, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[(0, 1)], mode="release"))
    simulated = tr.release_margins(undeclared, _simulated(margins=[(0, 1)]))  # simulation: allowed
    assert simulated.noise_mode == "simulation" and simulated.released_margins[0].shape == (2, 2)
    declared = tr.table_from_microdata(people, levels={"sex": ["f", "m"], "region": ["e", "n", "s"]})
    release = tr.release_margins(declared, tr.ReleaseSpec(loss=tr.loss_of(1.0), margins=[(0, 1)], mode="release"))
    assert release.released_margins[0].shape == (2, 3)  # the declared region nobody lives in is released too


@pytest.mark.unit
def test_margins_are_accepted_by_name_letter_or_bracket_notation():
    table = tr.builtin_table("czech")
    by_axes = tr.release_margins(table, _simulated(margins=[(0, 1), (1, 2)]))
    for margins in ([("A", "B"), ("B", "C")], "[AB][BC]", [(0, "B"), ("B", 2)],
                    [tuple(table.variables[:2]), tuple(table.variables[1:3])]):
        again = tr.release_margins(table, _simulated(margins=margins))
        assert again.margins == by_axes.margins
        for x, y in zip(again.released_margins, by_axes.released_margins):
            np.testing.assert_array_equal(x, y)


@pytest.mark.unit
def test_released_margins_come_back_as_labelled_frames():
    table = tr.builtin_table("czech")
    release = tr.release_margins(table, _simulated(margins=[("A", "B")]))
    frames = released_frames(release, table)
    (label, frame), = frames.items()
    assert label == f"{table.variables[0]} x {table.variables[1]}"
    assert list(frame.columns) == [table.variables[0], table.variables[1], "count"]
    assert len(frame) == table.shape[0] * table.shape[1]
    for row in frame.itertuples(index=False):
        i, j = table.levels[0].index(row[0]), table.levels[1].index(row[1])
        assert row[2] == release.released_margins[0][i, j]


SIGNAL_IN = """
import os, signal, sys, tempfile
import tabrelease.bundle as bundle
where = sys.argv[2]
if where == "mkdtemp":  # SIGTERM at once after the staging folder's mkdir, before mkdtemp returns its name
    real = tempfile.mkdtemp
    def mkdtemp(*args, **kwargs):
        made = real(*args, **kwargs)
        if "-probe-" not in kwargs.get("prefix", ""):
            os.kill(os.getpid(), signal.SIGTERM)
        return made
    bundle.tempfile.mkdtemp = mkdtemp
else:  # SIGTERM during the rename that puts the bundle in place
    real = os.replace
    class OS:
        def __getattr__(self, name):
            return getattr(os, name)
        def replace(self, a, b):
            real(a, b)
            if ".staging-" in str(a):
                os.kill(os.getpid(), signal.SIGTERM)
    bundle.os = OS()
from tabrelease.cli import main
folder = sys.argv[1]
sys.exit(main(["release", "czech", "--epsilon", "1", "--simulate", "--ledger", folder + "/L.json",
               "--out", folder + "/r"]))
"""


@pytest.mark.parametrize("where", ["mkdtemp", "rename"])
def test_a_sigterm_at_the_edges_of_the_bundle_s_writing(tmp_path, where):
    from tabrelease.ledger import ledger_entries, verify_bundles

    init_ledger(tmp_path / "L.json")
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN, str(tmp_path), where], capture_output=True, text=True,
                          timeout=300)
    entries = ledger_entries(tmp_path / "L.json")
    assert len(entries) == 1
    left = sorted(p.name for p in tmp_path.iterdir())
    if where == "mkdtemp":
        # Charged, and the staging folder (made, not yet named) removed on the way out.
        assert done.returncode == 4 and "the release failed (terminated by signal 15)" in done.stderr
        assert entries[0]["failed"] and left == ["L.json", "L.json.anchor", "L.json.key", "L.json.lock"]
    else:
        # The bundle was in place when the held signal was acted on: made, published, not marked failed, and said
        # so (exit 0: 143 says nothing was charged, which a release in place and charged would belie).
        assert done.returncode == 0 and "the release was finished and published, and it stands" in done.stdout
        assert entries[0]["failed"] is None and "r" in left
        assert verify_bundles(tmp_path / "L.json", [tmp_path / "r"]) == []
        assert not [name for name in left if name.startswith(".")]


SIGNAL_IN_NUMPY = """
import atexit, os, signal, sys
from tabrelease.cli import main
assert "numpy" not in sys.modules  # the command's own first import of it is the one signalled

class SignalOnNumpy:  # SIGTERM once numpy's import has begun (its spec is being looked for)
    sent = False
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and not SignalOnNumpy.sent:
            SignalOnNumpy.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
        return None

sys.meta_path.insert(0, SignalOnNumpy())
atexit.register(lambda: print("numpy imported whole:", hasattr(sys.modules.get("numpy"), "ndarray"), file=sys.stderr))
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["release", "batch"])
def test_a_sigterm_during_the_first_import_of_numpy_is_acted_on_after_it(tmp_path, command):
    """A SIGTERM that arrives while `release` or `batch` first imports numpy is held until numpy is imported whole,
    then ends the command as a SIGTERM does (exit 143, nothing charged or written). Acted on inside the import, it
    left numpy half made, which a later import turns into another error (stop 42: a kill trial exited 3, an internal
    error, after a SIGTERM 0.3 s into a batch)."""
    init_ledger(tmp_path / "L.json")
    if command == "release":
        argv = ["release", "czech", "--epsilon", "1", "--simulate", "--ledger", str(tmp_path / "L.json"), "--out",
                str(tmp_path / "r")]
    else:
        (tmp_path / "spec.toml").write_text(f'ledger = "{tmp_path / "L.json"}"\n\n[datasets.czech]\nbuiltin = '
                                            f'"czech"\n\n[[releases]]\ndataset = "czech"\nmargins = "[AB]"\n'
                                            f'epsilon = 0.5\nout = "{tmp_path / "r"}"\nmode = "simulation"\n')
        argv = ["batch", str(tmp_path / "spec.toml")]
    done = subprocess.run([sys.executable, "-c", SIGNAL_IN_NUMPY, *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "numpy imported whole: True" in done.stderr and "internal error" not in done.stderr
    from tabrelease.ledger import ledger_entries

    assert ledger_entries(tmp_path / "L.json") == [] and not (tmp_path / "r").exists()
