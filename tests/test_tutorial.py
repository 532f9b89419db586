"""docs/tutorial.md, run as a reader would: every `$ ` command of its console blocks, in order, in a fresh folder
holding the tutorial's files, with the installed `tabrelease` on the PATH. Each must succeed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"


def tutorial_commands() -> list[str]:
    blocks = re.findall(r"```console\n(.*?)```", TUTORIAL.read_text(), flags=re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


@pytest.mark.skipif(not TUTORIAL.exists(), reason="the tutorial is in the source tree, not the wheel")
def test_the_tutorial_runs(tmp_path):
    for name in ("households.csv", "levels.json", "season.toml"):
        shutil.copy(ROOT / "docs" / "tutorial" / name, tmp_path / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("TABRELEASE_LEDGER_KEY", None)
    commands = tutorial_commands()
    assert len(commands) >= 8
    for command in commands:
        done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True)
        # The batch's dry run predicts a budget refusal (exit 5, as the tutorial says); every other command succeeds.
        expected = 5 if command.startswith("tabrelease batch") else 0
        assert done.returncode == expected, f"{command}\n{done.stdout}\n{done.stderr}"
        if expected == 5:
            assert "1. would be made" in done.stdout and "2. would be refused" in done.stdout
        assert "Traceback" not in done.stderr
    # What the tutorial says the reader will find.
    public = sorted(p.name for p in (tmp_path / "spring" / "public").iterdir())
    assert "wife_active__child_under_4.csv" in public and "release.json" in public
    release = json.loads((tmp_path / "spring" / "public" / "release.json").read_text())
    assert release["noise"]["mode"] == "release" and release["epsilon"] == 1
    ledger = subprocess.run("tabrelease ledger ledger.json --json", shell=True, cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    (dataset,) = json.loads(ledger.stdout)["datasets"]
    assert dataset["dataset"] == "households" and dataset["epsilon_spent"] == 1 and dataset["epsilon_remaining"] == 1
    # The real run the tutorial describes (not one of its commands: it would be refused): the batch is refused whole,
    # before any noise, so no release of it is made (a new user's trial found the tutorial saying the summer one
    # would be).
    done = subprocess.run("tabrelease batch season.toml", shell=True, cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 5 and "Traceback" not in done.stderr and "would be refused after release 1:" in done.stderr
    assert not (tmp_path / "summer").exists() and not (tmp_path / "autumn").exists()
    again = subprocess.run("tabrelease ledger ledger.json --json", shell=True, cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert json.loads(again.stdout) == json.loads(ledger.stdout)
