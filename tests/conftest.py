from pathlib import Path

import pytest

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
