"""Pages rendered as a person sees them: headless Chromium (Debian's chromium and chromium-driver), driven by
Selenium. `.ci/run` installs both where it can; where they are missing the browser tests are skipped and say why.

`page_problems` loads a page at a laptop's width and returns what a reader would see wrong: horizontal
overflow of the page, elements sticking out past the right edge, figures that did not load, and figure text drawn
smaller than 10 px on screen.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMEDRIVER = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")
# A laptop's window: the audit's and the report's layouts must fit it without a horizontal scroll bar.
WIDTH, HEIGHT = 1280, 900
# The smallest text a figure may show on screen at that width (issue 25: tick labels were about 7 px).
MIN_FIGURE_TEXT_PX = 10


def _first(candidates, name):
    for path in candidates:
        if Path(path).is_file():
            return path
    return shutil.which(name)


def start_browser():
    """A headless Chromium driven by Selenium, or pytest.skip naming what is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("browser tests need selenium (pip install '.[test]')")
    binary, driver = _first(CHROMIUM, "chromium"), _first(CHROMEDRIVER, "chromedriver")
    if binary is None or driver is None:
        pytest.skip("browser tests need Chromium and ChromeDriver (Debian: apt-get install chromium chromium-driver; "
                    ".ci/run installs them where it can)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    # The flags this machine needs (no sandbox as root, no GPU, no network chatter: the network is closed).
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


# Runs in the page: what sticks out past the viewport's right edge, and which figures did not load.
_CHECK = """
const width = document.documentElement.clientWidth;
const out = {page_width: document.documentElement.scrollWidth, viewport: width, overflowing: [], broken: [],
             figures: 0, title: document.title, text_length: document.body.innerText.length};
for (const el of document.body.querySelectorAll('*')) {
  const r = el.getBoundingClientRect();
  if (r.width > 0 && r.right > width + 1) {
    // Report the outermost offender only (its children stick out with it).
    if (!out.overflowing.some(o => o.el.contains(el))) out.overflowing.push({el: el, tag: el.tagName,
      text: (el.innerText || el.getAttribute('alt') || '').slice(0, 60), right: Math.round(r.right)});
  }
}
for (const img of document.images) {
  out.figures += 1;
  if (!img.complete || img.naturalWidth === 0) out.broken.push(img.getAttribute('alt') || img.src.slice(0, 60));
}
for (const svg of document.querySelectorAll('svg')) {
  out.figures += 1;
  const r = svg.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) out.broken.push('inline svg');
}
// Figure text as rendered: an inline SVG (or one opened on its own) is drawn scaled to its box, so a text's size on
// screen is its font size times the figure's rendered width over its own. The smallest one, and what it says.
out.smallest_figure_text = null;
for (const svg of document.querySelectorAll('svg')) {
  const box = svg.viewBox && svg.viewBox.baseVal && svg.viewBox.baseVal.width ? svg.viewBox.baseVal.width : null;
  const scale = box ? svg.getBoundingClientRect().width / box : 1;
  for (const t of svg.querySelectorAll('text')) {
    const px = parseFloat(getComputedStyle(t).fontSize) * scale;
    if (out.smallest_figure_text === null || px < out.smallest_figure_text.px)
      out.smallest_figure_text = {px: px, text: t.textContent.slice(0, 40)};
  }
}
out.overflowing = out.overflowing.map(o => `${o.tag} "${o.text}" ends at ${o.right}px`);
return out;
"""


def page_problems(browser, path: Path) -> dict:
    """Load `path` (a file) and return the check's findings, with `problems`: a list of what is wrong."""
    import time

    browser.get(Path(path).resolve().as_uri())
    # The load event should cover the images, but on a loaded machine a file:// image can still be decoding: wait
    # until every image has finished, loaded or failed, before judging (up to 120 s: a bound for a hang, not a speed).
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not browser.execute_script(
            "return Array.from(document.images).every(i => i.complete)"):
        time.sleep(0.1)
    found = browser.execute_script(_CHECK)
    problems = []
    if found["page_width"] > found["viewport"] + 1:
        problems.append(f"the page is {found['page_width']}px wide in a {found['viewport']}px window")
    problems += [f"overflows: {o}" for o in found["overflowing"]]
    problems += [f"figure did not load: {b}" for b in found["broken"]]
    small = found["smallest_figure_text"]
    if small is not None and small["px"] < MIN_FIGURE_TEXT_PX:
        problems.append(f"figure text {small['text']!r} is {small['px']:.1f}px (at least {MIN_FIGURE_TEXT_PX}px)")
    found["problems"] = problems
    return found
