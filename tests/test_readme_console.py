"""The console samples of the README and of the docs (docs/*.md but the tutorial, which tests/test_tutorial.py runs
as one session) are what the tool prints: each sample whose output does not depend on its noise is run as written (in a fresh folder, one child process per command); every command must exit as its sample shows (0,
or non-zero where the sample shows an error line), and each command's output the sample shows is compared with what
it prints, line by line.

An auditor found the `fit` sample a line short of what the command prints (stop 47): a sample typed once drifts as
the tool changes, and nothing read it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Where the samples are: the README and the pages the README links to (the tutorial's are run by test_tutorial.py).
DOCS = (README, *sorted(path for path in (ROOT / "docs").glob("*.md") if path.name != "tutorial.md"))
# The samples run here, by their first command: those whose printed lines do not depend on the noise drawn (a
# release's summary line is its plan's; the ledger's lines are its arithmetic).
RUN = ("tabrelease fit journey_to_work", "tabrelease plan journey_to_work --epsilon 0.1,1",
       "tabrelease ledger init ledger.json")
# The samples not run, and why: every console block of the README and the docs is in one of the two, so a new one is
# not skipped unseen.
NOT_RUN = {
    "tabrelease release rochdale --epsilon 1 --margins \"[AB][AC][BC][DE]\" --out r":
        "commands only; the bootstrap test behind it takes half a minute",
    "tabrelease sweep edwards journey_to_work --epsilons 0.05:2:0.05 --repetitions 20 --mechanisms auto "
    "--calibrations exact,paper --seed 1 --out sweep1": "commands only; sweeps of minutes",
}
ERROR_LINE = "tabrelease: error:"


def _command(line: str) -> tuple[str, bool]:
    """A sample's command line without its trailing comment, and whether it continues on the next line."""
    line = line.rstrip()
    continued = line.endswith("\\")
    return shlex.join(shlex.split(line[:-1] if continued else line, comments=True)), continued


def console_samples() -> dict[str, list[tuple[str, list[str]]]]:
    """Each ```console block of the README and the docs, by its first command: its commands (after "$ ", a trailing
    "# ..." comment left out, continuation lines joined), each with the lines printed after it."""
    samples: dict[str, list[tuple[str, list[str]]]] = {}
    blocks = [block for path in DOCS
              for block in re.findall(r"```console\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)]
    for block in blocks:
        steps: list[tuple[str, list[str]]] = []
        continued = False
        for line in block.splitlines():
            if line.startswith("$ ") or continued:
                command, more = _command(line[2:] if not continued else line)
                if continued:
                    steps[-1] = (f"{steps[-1][0]} {command}".strip(), [])
                else:
                    steps.append((command, []))
                continued = more
            elif steps:
                steps[-1][1].append(line)
        assert steps, "a console sample without a command"
        first = shlex.join(shlex.split(steps[0][0]))
        assert first not in samples, f"two console samples begin with `{first}`"
        samples[first] = steps
    return samples


def test_every_console_sample_is_run_or_says_why_not():
    named = {shlex.join(shlex.split(first)) for first in (*RUN, *NOT_RUN)}
    assert set(console_samples()) == named


@pytest.mark.parametrize("first", RUN)
def test_readme_console_sample(first, tmp_path):
    # The sample's own ledger, key and anchor, not any the environment points to.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TABRELEASE_LEDGER_")}
    for command, printed in console_samples()[first]:
        words = shlex.split(command)
        assert words[0] == "tabrelease"
        done = subprocess.run([sys.executable, "-m", "tabrelease", *words[1:]], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, env=environment)
        fails = any(line.startswith(ERROR_LINE) for line in printed)
        assert (done.returncode != 0) == fails, f"`{command}` exited {done.returncode}: {done.stderr[-500:]}"
        # A command the sample shows no output for is run for what the next needs (a ledger, its budget); its output
        # is left out of the sample, not claimed to be empty.
        if printed:
            shown = (done.stdout + done.stderr).splitlines()
            assert shown == printed, f"the docs' sample of `{command}` is not what it prints"
