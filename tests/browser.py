"""A real headless browser for the report pages: Debian's ``chromium`` driven through its
``chromedriver`` by selenium (nothing downloaded at run time: selenium is given the
driver's path, so Selenium Manager never fetches one).

``chromium_driver()`` installs ``chromium`` and ``chromium-driver`` with apt-get when they
are missing (as root, else through ``sudo -n``) and skips only when there is no apt-get.
``check_page`` opens a page, scrolls to each figure and waits for plotly to draw it, and fails on a page without a
title or body, a plot that did not draw (no SVG/canvas, zero size, no traces), any
console error or a dialog (a script the page should never have run); it keeps a full-page PNG screenshot in ``artifact_dir()``
(``$CHECKRAY_TEST_ARTIFACTS``, default ``runs/test-artifacts/``; ``runs/`` is ignored by git).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
APT_PACKAGES = ("chromium", "chromium-driver")
MAX_SHOT_HEIGHT = 8000  # px: a long report's screenshot is cut here

# Per plotly div: traces plotly computed, drawn SVG/canvas layers and trace nodes, and size.
_PLOTS_JS = """
return [...document.querySelectorAll('.plotly-graph-div')].map(el => {
  const box = el.getBoundingClientRect();
  return {
    id: el.id,
    ready: !!el._fullLayout,
    traces: (el._fullData || []).length,
    svg: el.querySelectorAll('svg.main-svg').length,
    drawn: el.querySelectorAll('g.trace, g.hm, image, canvas').length,
    width: box.width, height: box.height,
  };
});
"""


def artifact_dir() -> Path:
    path = Path(os.environ.get("CHECKRAY_TEST_ARTIFACTS") or ROOT / "runs" / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _paths() -> tuple[str | None, str | None]:
    return shutil.which("chromium"), shutil.which("chromedriver")


def ensure_chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installed with apt-get if missing."""
    browser, driver = _paths()
    if browser and driver:
        return browser, driver
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.skip("no chromium/chromedriver and no apt-get to install them (Debian: chromium chromium-driver)")
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if prefix and shutil.which("sudo") is None:
        pytest.fail(f"chromium and chromedriver are missing; install {' '.join(APT_PACKAGES)} as root (make browser)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*prefix, apt, "install", "-y", *APT_PACKAGES]
    proc = subprocess.run(install, capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:  # a fresh image has no package lists yet
        subprocess.run([*prefix, apt, "update"], capture_output=True, text=True, env=env, timeout=600)
        proc = subprocess.run(install, capture_output=True, text=True, env=env, timeout=900)
    browser, driver = _paths()
    if proc.returncode != 0 or not (browser and driver):
        pytest.fail(f"apt-get install {' '.join(APT_PACKAGES)} failed: {(proc.stderr or proc.stdout)[-800:]}")
    return browser, driver


def chromium_driver():
    """A headless chromium (selenium WebDriver) that records the console."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = ensure_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def _wait(driver, condition: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.execute_script(f"return !!({condition});"):
            return True
        time.sleep(0.2)
    return False


def _no_alert(driver, page: Path) -> None:
    """A dialog means a script ran that no report writes (an injected ``alert(1)``)."""
    from selenium.common.exceptions import NoAlertPresentException

    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    text = alert.text
    alert.dismiss()
    raise AssertionError(f"{page}: a script opened a dialog: {text!r}")


def check_page(driver, page: Path, shot_name: str) -> dict[str, Any]:
    """Open ``page``, check that it renders, its plots draw and the console has no error;
    save a screenshot. Returns what was found (title, plots, links, screenshot path)."""
    from selenium.common.exceptions import UnexpectedAlertPresentException

    try:
        return _check_page(driver, page, shot_name)
    except UnexpectedAlertPresentException as exc:
        # The dialog can open at any moment after load (an ``onerror`` fires
        # asynchronously), so any later WebDriver call may be the one that meets it;
        # chromedriver has already dismissed it by then.
        raise AssertionError(f"{page}: a script opened a dialog: {exc.alert_text!r}") from exc


def open_drawn(driver, page: Path) -> int:
    """Open ``page`` and wait until it has loaded and plotly has drawn every figure in it;
    returns how many figures the page holds. A script that reads a figure's data must
    come after this: the bundle is deferred and a figure draws only near the screen."""
    expected_plots = len(re.findall(r'class="plotly-graph-div"', page.read_text(encoding="utf-8")))
    driver.get(page.resolve().as_uri())
    _no_alert(driver, page)
    assert _wait(driver, "document.readyState === 'complete'"), f"{page}: never finished loading"
    # A figure is drawn when it comes near the screen: bring each one there in turn.
    for index in range(expected_plots):
        plot = f"document.querySelectorAll('.plotly-graph-div')[{index}]"
        driver.execute_script(f"{plot} && {plot}.scrollIntoView()")
        drawn = f"!{plot} || ({plot}._fullLayout && {plot}._fullData)"
        assert _wait(driver, drawn), f"{page}: plotly did not draw figure {index + 1}"
    driver.execute_script("window.scrollTo(0, 0)")
    return expected_plots


def _check_page(driver, page: Path, shot_name: str) -> dict[str, Any]:
    driver.get_log("browser")  # drop what an earlier page logged
    expected_plots = open_drawn(driver, page)
    title = driver.title
    body = driver.execute_script("return document.body ? document.body.innerText.length : 0")
    assert title and body > 0, f"{page}: blank page (title {title!r}, {body} characters)"
    assert driver.execute_script("return document.querySelectorAll('h1').length") >= 1, f"{page}: no heading"
    plots = driver.execute_script(_PLOTS_JS)
    assert len(plots) == expected_plots, f"{page}: {len(plots)} plots drawn, {expected_plots} in the page"
    for p in plots:
        assert p["ready"] and p["traces"] > 0, f"{page}: plot {p['id']} has no traces: {p}"
        assert p["svg"] > 0 and p["drawn"] > 0, f"{page}: plot {p['id']} drew nothing: {p}"
        assert p["width"] > 100 and p["height"] > 100, f"{page}: plot {p['id']} has no size: {p}"
    _no_alert(driver, page)
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, f"{page}: console errors: {errors[:5]}"
    shot = artifact_dir() / f"{shot_name}.png"
    height = min(driver.execute_script("return document.documentElement.scrollHeight"), MAX_SHOT_HEIGHT)
    driver.set_window_size(1280, max(height, 600))
    driver.save_screenshot(str(shot))
    driver.set_window_size(1280, 1000)
    links = driver.execute_script("return [...document.querySelectorAll('a.report')].map(a => a.getAttribute('href'))")
    return {"title": title, "plots": plots, "links": links, "screenshot": shot}


def check_site(index: Path, shot: Path | None = None) -> list[str]:
    """Check ``index`` and every report it links (``check_page``); with ``shot``, save the
    top of the index (1280 px wide) there. Returns one line per page."""
    from urllib.parse import unquote

    driver = chromium_driver()
    lines = []
    try:
        start = time.perf_counter()
        found = check_page(driver, index, "site-index")
        lines.append(f"{index}: ok, {len(found['links'])} links ({time.perf_counter() - start:.1f}s)")
        for link in found["links"]:
            start = time.perf_counter()
            seen = check_page(driver, index.parent / unquote(link), "site-" + link.replace("/", "-"))
            lines.append(f"{link}: ok, {len(seen['plots'])} plots ({time.perf_counter() - start:.1f}s)")
        if shot is not None:
            driver.set_window_size(1280, 1100)
            driver.get(index.resolve().as_uri())
            driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    return lines


if __name__ == "__main__":
    # python -m tests.browser DIR/index.html [PNG]: the site checked in headless chromium.
    import sys

    for line in check_site(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None):
        print(line)
    print(f"screenshots: {artifact_dir()}")
