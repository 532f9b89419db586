"""Screenshots of what a person sees: the audit page and a frontier figure in Chromium at a laptop's width, and the
public workbook as LibreOffice Calc prints it (its first sheet, the notes sheet and a cross-tab sheet).

    python benchmarks/make_screenshots.py [--out reports/screenshots]

Needs Chromium with ChromeDriver and selenium (as the browser tests), LibreOffice (`soffice`; Debian:
libreoffice-calc-nogui) and pdftoppm (poppler-utils). Each missing one is named in one line. Writes audit.png,
frontier.png and workbook-*.png (each sheet as Calc prints it: one page wide).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1280


def _browser():
    sys.path.insert(0, str(ROOT))
    from tests.browser import start_browser

    try:
        return start_browser()
    except BaseException as exc:  # pytest.skip outside pytest: say what is missing
        raise SystemExit(f"make_screenshots: no browser ({exc})") from None


def _page(browser, page: Path, png: Path) -> None:
    browser.set_window_size(WIDTH, 900)
    browser.get(page.resolve().as_uri())
    time.sleep(0.5)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(WIDTH, height + 140)  # the whole page: nothing cut
    time.sleep(0.3)
    browser.save_screenshot(str(png))


def _sheet(book: Path, index: int, png: Path, tmp: Path) -> str:
    """Sheet `index` of the workbook as Calc prints it (the tool sets every sheet to one page wide): a copy holding
    that sheet alone, converted to PDF by LibreOffice, its first page drawn at 110 dpi."""
    import openpyxl

    wb = openpyxl.load_workbook(book)
    title = wb.worksheets[index].title
    for i, ws in reversed(list(enumerate(wb.worksheets))):
        if i != index:
            wb.remove(ws)
    copy = tmp / f"sheet{index}.xlsx"
    wb.save(copy)
    subprocess.run(["soffice", "--headless", "--convert-to", "pdf", "--outdir", str(tmp), str(copy)], check=True,
                   capture_output=True, timeout=300)
    subprocess.run(["pdftoppm", "-r", "110", "-png", "-f", "1", "-l", "1", "-singlefile", str(tmp / f"sheet{index}.pdf"),
                    str(tmp / f"sheet{index}")], check=True, capture_output=True, timeout=120)
    shutil.move(tmp / f"sheet{index}.png", png)
    return title


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "reports" / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for program, package in (("soffice", "libreoffice-calc-nogui"), ("pdftoppm", "poppler-utils")):
        if shutil.which(program) is None:
            raise SystemExit(f"make_screenshots: {program} is missing (Debian: apt-get install {package})")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        release = tmp / "release"
        subprocess.run([sys.executable, "-m", "tabrelease", "release", "rochdale", "--epsilon", "1", "--simulate",
                        "--seed", "1", "--xlsx", "--out", str(release)], check=True, capture_output=True)
        browser = _browser()
        try:
            _page(browser, release / "internal" / "audit.html", out / "audit.png")
            figure = ROOT / "reports" / "frontier" / "rochdale-all-2-way.svg"
            page = tmp / "frontier.html"
            page.write_text(f"<html><body style='margin:1rem'>{figure.read_text()}</body></html>", encoding="utf-8")
            _page(browser, page, out / "frontier.png")
        finally:
            browser.quit()
        book = release / "public" / "margins.xlsx"
        for index, name in ((0, "workbook-first-sheet.png"), (1, "workbook-notes.png"), (2, "workbook-cross-tab.png")):
            title = _sheet(book, index, out / name, tmp)
            print(f"{name}: sheet {title!r}")
    print(f"audit.png, frontier.png and the workbook's sheets in {out}")


if __name__ == "__main__":
    main()
