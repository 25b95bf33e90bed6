"""``checkray review`` in a real headless browser (Debian's chromium, tests/browser.py): the
server runs on a free loopback port, a reviewer decides 20 cases by keyboard only (accept,
reject with a reason from the list and with a typed one, relabel, edit, skip, undo),
reloads the page half-way, and the saved decisions and the page's running estimate are
checked against reviews.parquet. One case and every triple carry a script payload: no
dialog opens and the console stays clean. A screenshot is kept in the test artifacts
(``review.png``; docs/img/review.png is one)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from checkray.engine.review import ReviewStore, current, estimate, units_of_run
from tests.browser import artifact_dir, chromium_driver
from tests.review.runs import make_run

pytestmark = pytest.mark.slow

REVIEWER = "tester"


class Server:
    """The review server of ``run`` in a thread of this process."""

    def __init__(self, run: Path, sample: int):
        import uvicorn

        from checkray.jobs.review.app import ReviewApp
        from checkray.jobs.review.job import bind, review_units

        store = ReviewStore(run)
        self.app = ReviewApp(store, review_units(str(run), sample, "generator", 0, store), REVIEWER)
        self.sock = bind(0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/?token={self.app.token}"
        config = uvicorn.Config(self.app.asgi(), log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.server.started, "the review server did not start"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


def _wait(driver, condition: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if driver.execute_script(f"return !!({condition});"):
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {condition}")


def _saved(driver) -> int:
    return int(driver.execute_script("return Number((document.body && document.body.dataset.saved) || 0);"))


def _keys(driver, *keys: str, wait_save: bool = True) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    before = _saved(driver)
    chain = ActionChains(driver)
    for key in keys:
        chain = chain.send_keys(key)
    chain.perform()
    if wait_save:
        _wait(driver, f"Number(document.body.dataset.saved || 0) > {before}")


def _edit(driver, text: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    before = _saved(driver)
    ActionChains(driver).send_keys("e").perform()
    _wait(driver, "document.getElementById('entry') === document.activeElement")
    box = driver.find_element("id", "entry")
    box.clear()
    box.send_keys(text)
    ActionChains(driver).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()
    _wait(driver, f"Number(document.body.dataset.saved || 0) > {before}")


def _on_screen(driver) -> str:
    return driver.execute_script("return document.querySelector('#facts dd:last-of-type').textContent;")


def _open(driver, url: str) -> None:
    driver.get(url)
    _wait(driver, "document.body && document.body.dataset.ready === '1'")  # body is null while the page reloads


@pytest.fixture(scope="module")
def browser():
    driver = chromium_driver()
    yield driver
    driver.quit()


@pytest.mark.timeout(300)
def test_review_twenty_cases_by_keyboard_with_a_reload(tmp_path, browser):
    run = make_run(tmp_path / "demo")
    with Server(run, sample=24) as server:
        browser.get_log("browser")
        _open(browser, server.url)
        title = browser.title
        assert title == "checkray review"
        plan: list[tuple] = [
            ("a",),
            ("r", "1"),  # wrong label
            ("a",),
            ("l", "1"),  # relabel (a case: the other label; a triple: farther)
            ("a",),
            ("r", "5", "typed reason <b>x</b>\n"),  # a reason of one's own
            ("edit", "An edited <i>case</i>."),
            ("s",),
            ("a",),
            ("r", "2"),  # not fluent
        ]
        second: list[tuple] = [("a",), ("a",), ("r", "3"), ("a",), ("a",), ("r", "4"), ("a",), ("a",), ("a",), ("a",)]
        decided: list[str] = []
        start = time.perf_counter()
        for i, step in enumerate(plan + second):
            if i == len(plan):  # reload mid-review: the page comes back at the first undecided case
                _open(browser, server.url)
                progress = browser.find_element("id", "progress").text
                assert progress == f"decided {len(plan) - 1} of {len(server.app.units)}", progress
            decided.append(_on_screen(browser))
            if step[0] == "edit":
                _edit(browser, step[1])
            elif step[-1].endswith("\n"):
                from selenium.webdriver.common.action_chains import ActionChains

                ActionChains(browser).send_keys(*step[:-1]).perform()
                _wait(browser, "document.getElementById('entry') === document.activeElement")
                _keys(browser, step[-1])
            else:
                _keys(browser, *step)
        # undo the last decision, then decide it again
        _keys(browser, "u")
        assert _on_screen(browser) == decided[-1]
        _keys(browser, "r", "1")
        seconds = time.perf_counter() - start
        print(f"20 keyboard reviews (one reload, one undo) took {seconds:.1f} s")
        # a stale page: the case on screen is decided again elsewhere (another tab); the
        # page's next decision on it is refused, it says so, and the newer decision stands
        store = ReviewStore(run)
        unit = server.app.by_id[decided[-1]]
        from selenium.webdriver.common.keys import Keys

        from checkray.engine.review import decision_row

        for _ in range(len(server.app.units)):  # back to that case with the arrow key
            if _on_screen(browser) == decided[-1]:
                break
            _keys(browser, Keys.ARROW_LEFT, wait_save=False)
        assert _on_screen(browser) == decided[-1]
        store.append([decision_row(unit, REVIEWER, {"decision": "edit", "new_text": "from another tab"})])
        _keys(browser, "a")
        assert "decided it again elsewhere" in browser.find_element("id", "msg").text
        assert current(store.rows())[(unit["case_id"], REVIEWER)]["new_text"] == "from another tab"
        store.append([decision_row(unit, REVIEWER, {"decision": "undo"})])  # back to this page's decision

        rows = ReviewStore(run).rows()
        mine = {c: r for (c, who), r in current(rows).items() if who == REVIEWER}
        assert set(mine) == set(decided) and len(decided) == 20
        kinds = [mine[c]["decision"] for c in decided]
        assert kinds[:10] == [
            "accept",
            "reject",
            "accept",
            "relabel",
            "accept",
            "reject",
            "edit",
            "skip",
            "accept",
            "reject",
        ]
        assert mine[decided[5]]["reason"] == "typed reason <b>x</b>"
        assert mine[decided[6]]["new_text"] == "An edited <i>case</i>."
        assert mine[decided[-1]]["reason"] == "wrong label"
        assert any(r["decision"] == "undo" for r in rows)
        # the page's estimate is the one computed from the file
        want = {
            (r["generator"], r["capability"]): r["all_three_text"]
            for r in estimate(rows, server.app.units)
            if r["capability"] == ""
        }
        shown = browser.execute_script(
            "return [...document.querySelectorAll('#estimate tbody tr.gen')].map(tr => "
            "[...tr.children].map(td => td.textContent));"
        )
        assert {(r[0], ""): r[7] for r in shown} == want
        assert all(r[3] != "0" for r in shown)  # 20 reviews reached every generator
        # hostile text is shown as text: the payload is in the DOM as characters, no element,
        # in the case view and in the list view of every case
        _keys(browser, "v", wait_save=False)
        assert browser.execute_script("return document.body.classList.contains('listing')")
        assert "<script>alert(1)</script>" in browser.find_element("id", "listing").text
        assert browser.execute_script("return document.querySelectorAll('img').length") == 0
        assert browser.execute_script("return document.scripts.length") == 1
        _keys(browser, "v", wait_save=False)
        errors = [
            e
            for e in browser.get_log("browser")
            if e.get("level") == "SEVERE" and "status of 409" not in e.get("message", "")  # the stale page, above
        ]
        assert not errors, errors
        shot = artifact_dir() / "review.png"
        _open(browser, server.url)
        browser.set_window_size(1280, 1250)
        browser.save_screenshot(str(shot))
        browser.set_window_size(1280, 1000)
        if (docs := Path(__file__).resolve().parents[2] / "docs" / "img").is_dir() and __import__("os").environ.get(
            "CHECKRAY_UPDATE_DOCS_IMG"
        ):
            shutil.copy(shot, docs / "review.png")
    assert len(units_of_run(run)) == 36
