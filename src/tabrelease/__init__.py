"""tabrelease: differentially private release of contingency-table margins, and what it costs.

The public API is what this module re-exports; everything else is internal. The exports load
on first use (PEP 562), so that `tabrelease --help` does not pay for pandas, SciPy and HiGHS.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "bases": ("coefficient_basis", "coefficients", "margin_from_coefficients", "sensitivity"),
    "errors": ("TabreleaseError",),
    "evaluation": ("ReleaseEvaluation", "evaluate_release", "evaluate_releases"),
    "loglinear": (
        "LogLinearFit", "fit_loglinear", "fit_summary", "g_squared", "ipf", "l1_distance", "pearson_x2",
        "total_variation",
    ),
    "estimate": ("Estimate", "Estimator", "get_estimator"),
    "ledger": ("BudgetStatus", "budget_status", "charge", "ledger_entries", "ledger_summary", "set_budget"),
    "measurements": ("Measurement", "Measurements"),
    "mechanisms": ("MECHANISMS", "Mechanism", "MechanismPlan", "get_mechanism", "mechanism_names", "register",
                   "with_epsilon"),
    "planner": ("plan_release",),
    "pipeline": ("Release", "measure", "release_from_measurements", "released_frames", "run_plan"),
    "workflow": ("PublishedRelease", "publish_release", "release_margins", "resolve_margins"),
    "models": ("HierarchicalModel", "default_model", "downward_closure", "free_parameters", "parse_model"),
    "noise": ("NoiseCalibration", "SecureNoise", "SimulationNoise"),
    "reports": ("write_release_bundle",),
    "sweeps": ("SweepGrid", "SweepResult", "make_grid", "replay_run", "run_seed", "run_sweep"),
    "tables": (
        "BUILTIN_TABLES", "OUTSIDE_TABLES", "PAPER_TABLES", "ContingencyTable", "MicrodataTable", "builtin_table",
        "load_table", "read_microdata",
        "read_table_csv", "table_from_frame", "table_from_microdata",
    ),
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
