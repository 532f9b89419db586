"""The compiled modules a release needs are imported before its charge (workflow.preload_release_modules): a release
of each kind, in a fresh process, imports no compiled module after the preload."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_SCRIPT = r"""
import json, sys
from importlib.machinery import EXTENSION_SUFFIXES
import tabrelease as tr
import tabrelease.workflow as workflow

argv = json.loads(sys.argv[1])
real, seen = workflow.preload_release_modules, {}

def preload(*args, **kwargs):
    real(*args, **kwargs)
    seen["after"] = set(sys.modules)

workflow.preload_release_modules = preload
from tabrelease.cli import main
code = main(argv)
compiled = sorted(name for name, module in list(sys.modules.items())
                  if name not in seen.get("after", set(sys.modules))
                  and str(getattr(module, "__file__", "") or "").endswith(tuple(EXTENSION_SUFFIXES)))
print(json.dumps({"code": code, "preloaded": "after" in seen, "compiled_after": compiled}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    # Release mode: OpenDP's sampler, the ledger's lock, a workbook.
    ["release", "rochdale", "--epsilon", "1", "--ledger", "{ledger}", "--xlsx"],
    ["release", "journey_to_work", "--epsilon", "1", "--mechanism", "efron-stein", "--ledger", "{ledger}"],
    ["release", "czech", "--epsilon", "1", "--delta", "1e-6", "--mechanism", "rap"],
    ["release", "edwards", "--epsilon", "1", "--delta", "1e-6", "--mechanism", "gaussian-copula", "--simulate",
     "--seed", "1"],
    ["release", "czech", "--epsilon", "1", "--simulate", "--seed", "1"],
])
def test_no_compiled_module_is_imported_after_the_preload(argv, tmp_path):
    ledger = tmp_path / "ledger.json"
    subprocess.run([sys.executable, "-m", "tabrelease", "ledger", "init", str(ledger)], check=True,
                   capture_output=True)
    argv = [a.replace("{ledger}", str(ledger)) for a in argv] + ["--out", str(tmp_path / "out")]
    done = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(argv)], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["code"] == 0 and found["preloaded"]
    assert found["compiled_after"] == []
