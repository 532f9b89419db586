"""tabrelease: differentially private release of contingency-table margins, and what it costs.

Start here
----------
A release is described by one value, a `ReleaseSpec`, and made from a table::

    import tabrelease as tr

    table = tr.builtin_table("rochdale")                      # or tr.load_table("counts.csv"), tr.read_source(...)
    spec = tr.ReleaseSpec(loss=tr.loss_of(1.0),               # epsilon 1 (tr.loss_of(1.0, 1e-6): with delta)
                          margins="[AB][BC]",                 # default: the table's paper model
                          mode="simulation", seed=7)          # default mode "release": the secure sampler, no seed
    release = tr.release_margins(table, spec)                 # in memory: release.released_margins
    done = tr.publish_release(table, spec, "out/r1",          # the bundle: out/r1/public, out/r1/internal
                              account=tr.LedgerAccount(ledger="ledger.json"))

`prepare_release(table, spec)` makes every check done before a charge without drawing anything. Sweeps of simulated
releases: `make_grid` and `run_sweep`. The mechanisms (`mechanism_names()`) are in `tabrelease.mechanisms`, with
`register` and the contract checks for your own (`tabrelease.mechanisms.checks`); the privacy ledger is
`tabrelease.ledger`; log-linear fitting `tabrelease.loglinear`; the errors, each with its exit status,
`tabrelease.errors`.

The exports load on first use (PEP 562), so that `tabrelease --help` does not pay for pandas, SciPy and HiGHS.
"""

from __future__ import annotations

import importlib

from . import _hooks

__version__ = "0.1.0"

# The composition root: the presentation layer's modules, named for the layers below that load them on first need
# (a record's display, a bundle's report), so that no module imports a layer above its own.
_hooks.RENDERER_MODULES[:] = ["tabrelease.notebook"]
_hooks.REPORT_WRITER_MODULES[:] = ["tabrelease.reports"]

# The whole top-level surface (25 names); everything else is in the submodule that holds it.
_EXPORTS = {
    "errors": ("TabreleaseError",),
    "spec": ("LedgerAccount", "ReleaseSpec", "TableSource", "loss_of", "unit_of"),
    "workflow": ("prepare_release", "publish_release", "read_source", "release_margins"),
    "pipeline": ("Release", "release_from_measurements", "run_plan"),
    "mechanisms": ("mechanism_names",),
    "planner": ("plan_release",),
    "tables": ("ContingencyTable", "builtin_table", "load_table", "table_from_frame", "table_from_microdata"),
    "models": ("default_model", "parse_model"),
    "evaluation": ("evaluate_release",),
    "sweeps": ("make_grid", "run_sweep"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF) + ["__version__"]


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'tabrelease' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
