"""The report site in a real headless browser (Debian's chromium, tests/browser.py): a
small demo run (templates suite -> benchmark of two keyword models with a --gate file)
gets an index.html; the index and every page it links render, their plotly plots draw,
and the console stays free of errors. Every job's report page, built from hostile text,
renders with no script of the payload run. A PNG screenshot of each page is kept under
runs/test-artifacts/ (or $CHECKRAY_TEST_ARTIFACTS)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from checkray.engine.report import plotly_asset
from tests.browser import artifact_dir, check_page, chromium_driver, open_drawn
from tests.compare.test_report import compare_page
from tests.core.test_report_escaping import REPORT_PAGES, P
from tests.core.test_report_glance import empty_rows_and_columns

# A browser (installed with apt-get when missing) is no part of `make test-fast`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

GATE = """
rules:
  - name: vocabulary
    capability: Vocabulary
    min_pass_rate: 0.5
  - test_type: MFT
    min_pass_rate: 0.99
    each: capability
"""


@pytest.fixture(scope="module")
def browser():
    driver = chromium_driver()
    yield driver
    driver.quit()


def _small_demo(tmp_path: Path) -> Path:
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.engine.compare.gate import read_gate
    from checkray.jobs.benchmark.job import BenchmarkJob
    from checkray.jobs.config import load_config
    from checkray.jobs.demo import run_demo
    from checkray.jobs.run.job import Step, _suite_done
    from checkray.jobs.templates.job import TemplatesJob

    gate_file = tmp_path / "gate.yaml"
    gate_file.write_text(GATE)
    gate = read_gate(gate_file)
    specs = [
        ModelSpec.model_validate({"name": name, "family": "callable", "path": f"tests.fakes.models:{name}_sentiment"})
        for name in ("keyword", "naive")
    ]
    cfg = load_config(
        None,
        {
            "templates.spec": str(ROOT / "configs" / "suites" / "sentiment_templates.jsonl"),
            "templates.suite": "checklist-sentiment",
            "templates.nsamples": 8,
            "runtime.num_cpus": 2,
        },
    )
    steps = [
        Step("templates", lambda s: TemplatesJob(s.cfg), _suite_done),
        Step("benchmark", lambda s: BenchmarkJob(s.cfg, specs, s.suites, gate=gate)),
    ]
    out = tmp_path / "demo"
    run_demo(cfg, str(out), steps)
    return out


@pytest.mark.trusts_code
@pytest.mark.timeout(600)
def test_demo_index_and_every_report_in_a_browser(ray_session, tmp_path, browser):
    out = _small_demo(tmp_path)
    index = out / "index.html"
    assert index.is_file() and (out / "timings.json").is_file()
    source = index.read_text()
    assert "Run steps" in source and "Gate checks (--gate file)" in source  # the benchmark's junit.xml
    # each step's wall time and peak memory; a local Ray's workers count in the benchmark's
    steps = {s["step"]: s for s in json.loads((out / "timings.json").read_text())["steps"]}
    assert set(steps) == {"templates", "benchmark"}
    assert 0 < steps["templates"]["peak_rss_mib"] < steps["benchmark"]["peak_rss_mib"]
    assert 0 < steps["benchmark"]["driver_peak_rss_mib"] < steps["benchmark"]["peak_rss_mib"]
    assert re.search(r"FAIL</td>", source) and "checklist-sentiment" in source

    found = check_page(browser, index, "demo-index")
    assert sorted(found["links"]) == ["benchmark/leaderboard.html", "report.html"]
    assert "Models, best first" in source and "keyword" in source  # the index answers first
    assert empty_rows_and_columns(source) == []
    # one plotly bundle for the whole site, at its top; every page with a figure loads it
    assert [p.relative_to(out).as_posix() for p in out.rglob("*.js")] == [plotly_asset()]
    plots = 0
    for link in found["links"]:
        page = out / unquote(link)
        assert page.is_file(), link
        seen = check_page(browser, page, "demo-" + link.replace("/", "-").removesuffix(".html"))
        plots += len(seen["plots"])
        assert seen["title"].startswith("checkray")
        assert empty_rows_and_columns(page.read_text()) == [], link
        assert len(page.read_text()) < 1_000_000 and "<script defer src=" in page.read_text()
    assert plots >= 2  # the leaderboard's heatmap, and again in the combined report

    # The leaderboard opens with the heatmap: 2 models x the suite's capabilities, each
    # cell that failed linking to failing examples that are on the page.
    assert open_drawn(browser, out / "benchmark" / "leaderboard.html") >= 1
    heat = browser.execute_script(HEATMAP_JS)
    assert heat["first"] == "Failure rate by model and capability"
    assert heat["rows"] == 2 and heat["cells"] == 2 * heat["columns"] and heat["columns"] >= 3
    assert heat["links"] > 0 and heat["missing"] == []
    shots = sorted(p.name for p in artifact_dir().glob("demo-*.png"))
    assert shots == ["demo-benchmark-leaderboard.png", "demo-index.png", "demo-report.png"]
    print(f"screenshots: {artifact_dir()}")


HEATMAP_JS = """
const el = document.querySelector('.plotly-graph-div');
const spec = JSON.parse(document.querySelector('script.figure-spec').textContent);
const z = el._fullData[0].z;
const hrefs = spec.links[0].flat().filter(h => h);
return {
  first: document.querySelector('section h2').textContent,
  rows: z.length, columns: z[0].length, cells: z.flat().length,
  links: hrefs.length, missing: hrefs.filter(h => !document.getElementById(h.slice(1))),
};
"""


def _index_page(tmp_path: Path) -> Path:
    """An index over a run whose directory name and config are the payload."""
    from checkray.engine.stages import RunDir
    from checkray.jobs.base import run_job
    from checkray.jobs.config import CheckrayConfig
    from checkray.jobs.index import write_index
    from tests.core.test_report_index import GatedJob

    top = tmp_path / "runs"
    run_job(
        GatedJob(CheckrayConfig.model_validate({"corpus": {"path": P}})), str(top / "x<img src=y onerror=alert(3)>")
    )
    return Path(write_index(RunDir(str(top)), title=P))


PAGES = {**REPORT_PAGES, "compare": compare_page}


@pytest.mark.parametrize("name", [*sorted(PAGES), "index"])
def test_every_report_page_with_hostile_text_in_a_browser(name, tmp_path, browser):
    """Each job's report page, built from tables whose every text is a script/img payload
    (tests/core/test_report_escaping.py), with the real plotly.js: it renders, its plots
    draw, and no payload runs (no dialog, no console error)."""
    if name == "index":
        page = _index_page(tmp_path)
    else:
        page = tmp_path / f"{name}.html"
        page.write_text(PAGES[name](), encoding="utf-8")
    found = check_page(browser, page, f"hostile-{name}")
    assert found["title"] == (P if name != "demo" else "checkray · demo report")  # the title is text, too
    if name in ("topics", "benchmark", "s2lct", "compare"):
        assert found["plots"], f"{name}: the report's figure is missing"
    text = browser.execute_script("return document.body.innerText")
    assert "<img src=x onerror=alert(1)>" in text  # the payload shows as text


def test_the_browser_check_catches_console_errors_and_empty_plots(tmp_path, browser):
    from checkray.engine.report import plotly_js

    broken = tmp_path / "error.html"
    broken.write_text("<!doctype html><title>t</title><h1>x</h1><script>undefinedFunction()</script>")
    with pytest.raises(AssertionError, match="console errors"):
        check_page(browser, broken, "check-console-error")
    empty = tmp_path / "empty-plot.html"
    empty.write_text(
        f"<!doctype html><title>t</title><script>{plotly_js()}</script><h1>x</h1>"
        '<div id="p" class="plotly-graph-div" style="height:300px;width:100%"></div>'
        "<script>Plotly.newPlot('p', [], {})</script>"
    )
    with pytest.raises(AssertionError, match="has no traces"):
        check_page(browser, empty, "check-empty-plot")
    dialog = tmp_path / "dialog.html"
    dialog.write_text("<!doctype html><title>t</title><h1>x</h1><img src=x onerror=alert(1)>")
    with pytest.raises(AssertionError, match="opened a dialog"):
        check_page(browser, dialog, "check-dialog")
