"""The suite's tiers, the audit figures' stand-in, and shared fixtures.

Tiers: every test is `unit` or `e2e`, never both. A test is `e2e` when it runs the command line (`tabrelease.cli.main`
or a child process), writes a release bundle (`publish_release`, `run_batch`), runs a sweep or a frontier, or drives
a browser; the rest are `unit`. A test takes its file's tier (FILE_TIERS: a new test file must be entered there, or
collection stops saying so) unless it is marked `@pytest.mark.e2e` or `@pytest.mark.unit` itself.

Figures: drawing the audit page's matplotlib figures is a large share of a release, and most tests read only
`audit.json` or `release.json`. In-process calls therefore get a one-pixel PNG in place of each figure, unless the
test is marked `@pytest.mark.figures` (every test that reads `audit.html`, its figures or a rendered page is). A
command line run as a child process is not affected: it draws the real figures.
"""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path

import pytest

TIERS = ("unit", "e2e")

# The tier of each test file's tests, but for those marked with the other tier.
FILE_TIERS = {
    "test_account.py": "unit",
    "test_accounting.py": "unit",
    "test_audit_page.py": "e2e",
    "test_bad_inputs.py": "unit",
    "test_bases.py": "unit",
    "test_batch.py": "e2e",
    "test_blackbox_audit.py": "unit",
    "test_browser.py": "e2e",
    "test_calibration_by_mechanism.py": "unit",
    "test_cli_fit.py": "e2e",
    "test_cli_release.py": "e2e",
    "test_consistency.py": "unit",
    "test_deterministic.py": "e2e",
    "test_disclosure.py": "unit",
    "test_docs.py": "unit",
    "test_error_model.py": "e2e",
    "test_error_bound.py": "unit",
    "test_exact.py": "unit",
    "test_fitness.py": "unit",
    "test_frontier.py": "e2e",
    "test_gaussian_copula.py": "unit",
    "test_governance.py": "e2e",
    "test_guarantee_contract.py": "unit",
    "test_honest_outputs.py": "e2e",
    "test_hostile_labels.py": "unit",
    "test_import_layers.py": "unit",
    "test_input_formats.py": "unit",
    "test_junction_tree.py": "unit",
    "test_kill_trials.py": "e2e",
    "test_least_squares.py": "unit",
    "test_ledger.py": "e2e",
    "test_loglinear.py": "unit",
    "test_loglinear_speed_paths.py": "unit",
    "test_margins_fit.py": "unit",
    "test_mechanism_contract.py": "unit",
    "test_mechanisms.py": "unit",
    "test_microdata_input.py": "e2e",
    "test_models.py": "unit",
    "test_names.py": "e2e",
    "test_notebook.py": "unit",
    "test_outside_tables.py": "unit",
    "test_planned.py": "unit",
    "test_planned_privacy.py": "unit",
    "test_properties.py": "unit",
    "test_public_separation.py": "e2e",
    "test_randomized_response.py": "unit",
    "test_rap.py": "unit",
    "test_registry.py": "unit",
    "test_release_noise.py": "unit",
    "test_release_spec.py": "e2e",
    "test_reproduction_honesty.py": "unit",
    "test_scale.py": "unit",
    "test_schemas.py": "e2e",
    "test_sensitive_attributes.py": "unit",
    "test_suite_tiers.py": "e2e",
    "test_sweeps.py": "e2e",
    "test_tables.py": "unit",
    "test_tutorial.py": "e2e",
}


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    stale = sorted(name for name in FILE_TIERS if not (here / name).is_file())
    if stale:
        raise pytest.UsageError(f"tests/conftest.py: FILE_TIERS names files that do not exist: {', '.join(stale)}")
    unclassified = set()
    for item in items:
        own = [tier for tier in TIERS if item.get_closest_marker(tier) is not None]
        if len(own) > 1:
            raise pytest.UsageError(f"{item.nodeid} is marked both unit and e2e: a test has exactly one tier")
        tier = own[0] if own else FILE_TIERS.get(item.path.name)
        if tier is None:
            unclassified.add(item.path.name)
        elif not own:
            item.add_marker(getattr(pytest.mark, tier))
    if unclassified:
        raise pytest.UsageError(
            f"tests/conftest.py: no tier for {', '.join(sorted(unclassified))}: enter each file in FILE_TIERS as 'unit' "
            "or 'e2e' (e2e: runs the command line or a child process, writes a bundle, runs a sweep or a frontier, "
            "or drives a browser)")


# --- the audit's figures -------------------------------------------------------------------------------------------

# Where the audit's figures are drawn, and the functions that draw them. If one is renamed or moved it is simply
# drawn for real (slower, never wrong); if none is found, the session stops, so that a move is not missed silently.
FIGURE_MODULE = "tabrelease.figures"
FIGURE_FUNCTIONS = ("errors_against_plan", "released_against_true")
# What the page embeds in place of a figure: a valid one-pixel PNG data URI (the page keeps its structure).
PLACEHOLDER_PNG = ("data:image/png;base64,"
                   "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII=")

_draw = {"real": True}  # whether the running test draws the real figures
_stand_ins: dict = {}  # each real figure function -> its stand-in


def _stand_in(real):
    @functools.wraps(real)
    def stand_in(*args, **kwargs):
        return real(*args, **kwargs) if _draw["real"] else PLACEHOLDER_PNG

    stand_in.draws_for_real = real
    return stand_in


def _bind_stand_ins() -> None:
    """Put the stand-ins wherever a tabrelease module holds a real figure function: in the figures module, and in any
    module that imported one by name (loaded so far; run before every test, so later imports are covered too). The
    stand-ins stay for the session: whether they draw is decided test by test."""
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("tabrelease"):
            continue
        for attribute, value in list(vars(module).items()):
            stand_in = _stand_ins.get(id(value))
            if stand_in is not None and stand_in.draws_for_real is value:
                setattr(module, attribute, stand_in)


def _install_figure_stand_ins() -> None:
    try:
        figures = importlib.import_module(FIGURE_MODULE)
    except ImportError as error:
        raise pytest.UsageError(f"tests/conftest.py: the audit figures' module {FIGURE_MODULE} is gone ({error}): "
                                "point FIGURE_MODULE and FIGURE_FUNCTIONS at where the figures are drawn now") from None
    for name in FIGURE_FUNCTIONS:
        real = getattr(figures, name, None)
        if callable(real):
            real = getattr(real, "draws_for_real", real)
            _stand_ins[id(real)] = _stand_in(real)
    if not _stand_ins:
        raise pytest.UsageError(f"tests/conftest.py: none of {', '.join(FIGURE_FUNCTIONS)} is in {FIGURE_MODULE}: "
                                "every test would draw the audit's figures; point FIGURE_FUNCTIONS at the new names")
    for module in ("tabrelease.reports", "tabrelease.bundle"):  # where the audit page is put together
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    _bind_stand_ins()


def pytest_configure(config):
    _install_figure_stand_ins()


@pytest.fixture(autouse=True)
def _audit_figures(request):
    """The audit's figures as one-pixel PNGs for this test, unless it is marked `figures`."""
    _bind_stand_ins()
    _draw["real"] = request.node.get_closest_marker("figures") is not None
    yield
    _draw["real"] = True


# --- shared fixtures -----------------------------------------------------------------------------------------------

@pytest.fixture
def write_csv(tmp_path):
    """Write text to a CSV file in a fresh folder and return its path."""

    def _write(text: str, name: str = "table.csv") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return _write


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session's page checks (skipped, saying why, where none is installed)."""
    from .browser import start_browser

    driver = start_browser()
    yield driver
    driver.quit()
