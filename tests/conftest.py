"""The suite's tiers and shared fixtures.

Tiers: every test is `unit` or `e2e`, never both. A test is `e2e` when it runs the command line (`tabrelease.cli.main`
or a child process), writes a release bundle (`publish_release`, `run_batch`), runs a sweep or a frontier, or drives
a browser; the rest are `unit`. A test takes its file's tier (FILE_TIERS: a new test file must be entered there, or
collection stops saying so) unless it is marked `@pytest.mark.e2e` or `@pytest.mark.unit` itself.

Figures: the audit's figures are SVG drawn in milliseconds (tabrelease.charts), so every test draws the real ones;
`@pytest.mark.figures` marks the tests that read them (`-m figures` runs those).
"""

from __future__ import annotations

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
    "test_charts.py": "unit",
    "test_cli_fit.py": "e2e",
    "test_cli_release.py": "e2e",
    "test_preload.py": "e2e",
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
    "test_long_counts.py": "unit",
    "test_aggregation.py": "e2e",
    "test_inference.py": "e2e",
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
    "test_minimise.py": "unit",
    "test_sparse.py": "unit",
    "test_planned_privacy.py": "unit",
    "test_properties.py": "unit",
    "test_public_separation.py": "e2e",
    "test_randomized_response.py": "unit",
    "test_rap.py": "unit",
    "test_readme_console.py": "e2e",
    "test_registry.py": "unit",
    "test_release_noise.py": "unit",
    "test_release_spec.py": "e2e",
    "test_reproduction_honesty.py": "unit",
    "test_scale.py": "unit",
    "test_schemas.py": "e2e",
    "test_sensitive_attributes.py": "unit",
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
