"""Fault injection, a few deterministic trials of benchmarks/kill_trials.py: SIGKILL, SIGTERM and SIGINT, each at an
early moment (a fixed short delay: the command is still starting) and a late one (once a release's staging folder
appears: after its charge, while its bundle is written), against `release` and `batch`. Each trial checks what the
script's do: no abort or core file, nothing but bundles and the ledger's files left after the next run's clean-up,
no bundle without its charge, a charge without its bundle only when marked failed (exit 4, saying so) or after
SIGKILL, and the ledger intact."""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kill_trials.py"


def _script():
    spec = importlib.util.spec_from_file_location("kill_trials", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["kill_trials"] = module
    spec.loader.exec_module(module)
    return module


kill_trials = _script()

EARLY = 0.3  # seconds: the command is still importing (reaching a charge takes over a second)
TRIALS = [  # (command, signal, moment): each signal early and late, both commands
    ("release", "KILL", "early"), ("release", "KILL", "late"),
    ("batch", "TERM", "early"), ("release", "TERM", "late"),
    ("release", "INT", "early"), ("batch", "INT", "late"),
]


@pytest.mark.slow
def test_signals_at_an_early_and_a_late_moment_leave_no_bundle_without_its_charge(tmp_path):
    def one(numbered):
        number, (command, signame, moment) = numbered
        when = dict(delay=EARLY) if moment == "early" else dict(wait_for=kill_trials.staging_appeared())
        return kill_trials.run_trial(number, command, signame, tmp_path / f"trial-{number}", cleanup="function",
                                     **when)

    kill_trials.deliverable_sigint()
    # Two at a time: the checks hold whatever the load; a trial's late moment is a file, not a time.
    with ThreadPoolExecutor(max_workers=2) as pool:
        trials = list(pool.map(one, enumerate(TRIALS, 1)))
    report = kill_trials.summary(trials, cleanup="function")
    for trial, (_, _, moment) in zip(trials, TRIALS):
        assert not trial.violations, report
        assert not trial.residue_after, report
        if moment == "late":  # the staging folder appears after the charge
            assert trial.charges >= 1, report
            assert trial.phase != kill_trials.NOT_CHARGED, report
