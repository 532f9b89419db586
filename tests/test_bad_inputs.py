"""A catalogue of bad input across the command line: one clear line, exit status 2, nothing written.

Each case runs in a fresh folder holding only the inputs it prepared; afterwards the folder
must hold exactly those inputs, byte for byte (no output folder, no partial file, no ledger
entry, no temporary file).
"""

from pathlib import Path

import pytest

from tabrelease.cli import main

GOOD = "A,B,count\n0,0,3\n0,1,1\n1,0,2\n1,1,5\n"


def _csv(text):
    return lambda d: (d / "t.csv").write_text(text)


def _ledger(text):
    return lambda d: (d / "ledger.json").write_text(text)


def _mkdir(name):
    return lambda d: (d / name).mkdir()


CASES = [
    # files and tables
    ("missing file", None, ["fit", "missing.csv"], "no such file"),
    ("folder for a table", _mkdir("folder.csv"), ["fit", "folder.csv"], "folder"),
    ("unknown built-in name", None, ["release", "nosuchtable", "--epsilon", "1", "--out", "o"], "nosuchtable"),
    ("empty file", _csv(""), ["fit", "t.csv"], "no columns"),
    ("no count column", _csv("A,B,n\n0,0,1\n0,1,1\n1,0,1\n1,1,1\n"), ["fit", "t.csv"], "count"),
    ("negative count", _csv(GOOD.replace("0,0,3", "0,0,-3")), ["release", "t.csv", "--epsilon", "1", "--out", "o"], "negative"),
    ("fractional count", _csv(GOOD.replace("0,0,3", "0,0,2.5")), ["release", "t.csv", "--epsilon", "1", "--out", "o"], "fractional"),
    ("text count", _csv(GOOD.replace("0,0,3", "0,0,many")), ["fit", "t.csv"], "count"),
    ("duplicate cell", _csv(GOOD + "1,1,2\n"), ["release", "t.csv", "--epsilon", "1", "--out", "o"], "duplicate"),
    ("missing cell", _csv("A,B,count\n0,0,3\n0,1,1\n1,0,2\n"), ["release", "t.csv", "--epsilon", "1", "--out", "o"], "missing"),
    ("one-level variable", _csv("A,B,count\n0,0,3\n0,1,1\n"), ["fit", "t.csv"], "one level"),
    ("not a CSV", lambda d: (d / "t.csv").write_bytes(b"\x00\xff\xfe\x00garbage"), ["fit", "t.csv"], ""),
    # models and margins
    ("model names an unknown variable", None, ["fit", "czech", "--model", "[AZ]"], "Z"),
    ("malformed model", None, ["release", "czech", "--epsilon", "1", "--margins", "AB]", "--out", "o"], "model"),
    ("empty model", None, ["fit", "czech", "--model", "[]"], ""),
    # privacy and mechanism parameters
    ("zero epsilon", None, ["release", "czech", "--epsilon", "0", "--out", "o"], "epsilon"),
    ("NaN epsilon", None, ["release", "czech", "--epsilon", "nan", "--out", "o"], "epsilon"),
    ("Fourier on a non-binary table", None, ["release", "journey_to_work", "--epsilon", "1", "--mechanism", "fourier", "--out", "o"], "binary"),
    ("unknown mechanism", None, ["release", "czech", "--epsilon", "1", "--mechanism", "magic", "--out", "o"], "mechanism"),
    ("delta without gaussian", None, ["release", "czech", "--epsilon", "1", "--delta", "1e-6", "--out", "o"], "delta"),
    ("gaussian without delta", None, ["release", "czech", "--epsilon", "1", "--mechanism", "gaussian", "--out", "o"], "delta"),
    ("delta of 1", None, ["release", "czech", "--epsilon", "1", "--mechanism", "gaussian", "--delta", "1", "--out", "o"], "delta"),
    ("seed in release mode", None, ["release", "czech", "--epsilon", "1", "--seed", "3", "--out", "o"], "seed"),
    ("paper calibration of cells", None, ["release", "czech", "--epsilon", "1", "--mechanism", "cells", "--calibration", "paper", "--out", "o"], "paper"),
    ("bound delta out of range", None, ["release", "czech", "--epsilon", "1", "--bound-delta", "1.5", "--out", "o"], "bound-delta"),
    ("output already there", _mkdir("o"), ["release", "czech", "--epsilon", "1", "--out", "o"], "exists"),
    # ledger
    ("ledger is a folder", _mkdir("ledger.json"), ["release", "czech", "--epsilon", "1", "--ledger", "ledger.json", "--out", "o"], "directory"),
    ("ledger is not JSON", _ledger("not json"), ["release", "czech", "--epsilon", "1", "--ledger", "ledger.json", "--out", "o"], "ledger"),
    ("ledger of another format", _ledger('{"version": 99}'), ["ledger", "ledger.json"], "ledger"),
    ("ledger in a missing folder", None, ["release", "czech", "--epsilon", "1", "--ledger", "nowhere/l.json", "--out", "o"], "does not exist"),
    ("no ledger to show", None, ["ledger", "missing.json"], "no ledger"),
    ("budget without epsilon", None, ["ledger", "l.json", "--set-budget", "czech"], "--epsilon"),
    ("negative budget", None, ["ledger", "l.json", "--set-budget", "czech", "--epsilon", "-1"], "epsilon"),
    # sweeps
    ("bad epsilon grid", None, ["sweep", "czech", "--epsilons", "0.1:0.05:0.01", "--repetitions", "2", "--out", "s"], "epsilons"),
    ("zero repetitions", None, ["sweep", "czech", "--epsilons", "1", "--repetitions", "0", "--out", "s"], "repetitions"),
    ("resume of nothing", None, ["sweep", "czech", "--epsilons", "1", "--repetitions", "2", "--out", "s", "--resume"], "resume"),
    ("resume and force", None, ["reproduce", "--quick", "--out", "p", "--resume", "--force"], "contradict"),
    ("unreachable Dask scheduler", None, ["sweep", "czech", "--epsilons", "1", "--repetitions", "1", "--out", "s", "--scheduler", "tcp://127.0.0.1:9"], "Dask"),
]


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


@pytest.mark.parametrize("label, prepare, argv, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input(label, prepare, argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    if prepare is not None:
        prepare(tmp_path)
    before = _snapshot(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("tabrelease: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert message.lower() in err.lower()
    after = _snapshot(tmp_path)
    if label == "resume of nothing":  # --resume on a fresh folder must not leave one behind either
        assert after == before
    assert after == before, f"{label}: wrote {sorted(set(after) - set(before))}"


def test_the_catalogue_is_wide():
    assert len(CASES) >= 20
