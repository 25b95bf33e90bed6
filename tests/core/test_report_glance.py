"""Reports read at a glance (issue 36): every table lists only what exists (no all-empty
row or column, and CheckList's summary no test that no model evaluated), the leaderboard
opens with its heatmap whose cells link to failing examples that are on the page, compare
opens with its flips, and a site's pages share one plotly bundle."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

from checkray.engine.report import (
    Section,
    figure_html,
    inline_assets,
    page_figures,
    plotly_asset,
    real_rows,
    render,
    table_html,
    write_assets,
    write_page,
)
from checkray.engine.rundir import RunDir
from tests.core.test_report_escaping import REPORT_PAGES


class Tables(HTMLParser):
    """Every ``<table>`` of a page: its header and its rows of cell texts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables: list[dict] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"head": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables:
            text = "".join(self._cell).strip()
            rows = self.tables[-1]["rows"]
            if tag == "th" and len(rows) == 1:
                self.tables[-1]["head"].append(text)
            elif rows:
                rows[-1].append(text)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def empty_rows_and_columns(page: str) -> list[str]:
    """Each all-empty row or column of every table of ``page`` (a cell is empty when blank
    or '-'), one line each."""
    parser = Tables()
    parser.feed(page)
    found = []
    for t, table in enumerate(parser.tables):
        rows = [r for r in table["rows"] if r]
        blank = lambda v: v.strip() in ("", "-", "–")  # noqa: E731
        for i, row in enumerate(rows):
            if all(blank(v) for v in row):
                found.append(f"table {t}: row {i} is empty")
        for j, name in enumerate(table["head"]):
            if rows and all(j >= len(r) or blank(r[j]) for r in rows):
                found.append(f"table {t}: column {name!r} is empty")
    return found


def test_the_check_finds_empty_rows_and_columns():
    page = "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td></td></tr>"
    page += "<tr><td> </td><td>-</td></tr></tbody></table>"
    assert empty_rows_and_columns(page) == ["table 0: row 1 is empty", "table 0: column 'b' is empty"]


def test_tables_drop_empty_rows_and_columns():
    rows = [{"a": 1, "b": None, "c": ""}, {"a": None, "b": float("nan"), "c": "-"}, {"a": 2, "b": None, "c": "x"}]
    assert real_rows(rows, ["a", "b", "c"]) == ([rows[0], rows[2]], ["a", "c"])
    page = table_html(rows, ids=["r0", "r1", "r2"])
    assert empty_rows_and_columns(page) == [] and "<th>b</th>" not in page
    assert 'id="r0"' in page and 'id="r1"' not in page and 'class="data sortable"' in page
    assert table_html([{"a": None}]) == "<p><em>(no rows)</em></p>"


@pytest.fixture(autouse=True)
def _no_plotlyjs(monkeypatch):
    from checkray.engine import report

    monkeypatch.setattr(report, "plotly_js", lambda: "/* plotly.js */")


@pytest.mark.parametrize("name", sorted(REPORT_PAGES))
def test_no_report_page_has_an_empty_row_or_column(name):
    assert empty_rows_and_columns(REPORT_PAGES[name]()) == []


# A benchmark like the demo's: a CheckList suite (capabilities, no topics) and an MFT suite
# (topics as tests of a capability): pivoting every suite x capability x topic would make
# 2 x 3 x 3 = 18 rows, 4 real.
MODELS = ["good", "bad", "worse"]
TESTS = [
    ("checklist", "Negation", None),
    ("checklist", "Vocabulary", None),
    ("mft", "1_story", "0_cold"),
    ("mft", "1_story", "1_warm"),
]


def summary_and_examples() -> tuple[pa.Table, pa.Table]:
    from checkray.engine.benchmark.summary import SUMMARY_SCHEMA

    rows, examples = [], []
    for m, model in enumerate(MODELS):
        for t, (suite, cap, topic) in enumerate(TESTS):
            n, k = 20, min(20, 3 * m + t)
            rows.append(
                {
                    "model": model,
                    "suite": suite,
                    "capability": cap,
                    "topic": topic,
                    "test_type": "MFT",
                    "n": n,
                    "failures": k,
                    "failure_rate": k / n,
                    "errors": 0,
                    "testcases": n,
                    "testcase_failures": k,
                    "testcase_failure_rate": k / n,
                    "n_versions": 1,
                    "failure_rate_mean": k / n,
                    "failure_rate_std": 0.0,
                    "error": None,
                }
            )
            if k:
                examples.append(
                    {"model": model, "capability": cap, "topic": topic, "text": f"case {m}{t}", "expected": "positive"}
                )
    return pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA), pa.Table.from_pylist(examples)


def _figures(page: str) -> list[dict]:
    return page_figures(page)


def test_leaderboard_opens_with_the_heatmap_and_lists_only_real_tests():
    from checkray.jobs.benchmark.report import leaderboard_sections

    summary, examples = summary_and_examples()
    sections = leaderboard_sections(summary, examples)
    assert [s.title for s in sections[:4]] == [
        "Failure rate by model and capability",
        "Failure rate by model and test",
        "Benchmark leaderboard",
        "Failure rate per test (CheckList summary)",
    ]
    page = render("t", sections)
    assert empty_rows_and_columns(page) == []
    checklist = "".join(sections[3].blocks)
    assert checklist.count("<tr>") == 1 + len(TESTS)  # the header and the 4 tests that exist
    heat, tests = _figures(page)
    z = heat["data"][0]["z"]
    assert len(z) == len(MODELS) and all(len(r) == 3 for r in z)  # 3 capabilities
    assert heat["data"][0]["y"] == MODELS  # best first
    assert heat["data"][0]["x"] == ["1_story", "Vocabulary", "Negation"]  # the hardest capability first
    assert "27.5% [16.1%, 42.8%]" in heat["data"][0]["hovertext"][1][0]  # "bad" on 1_story: 11 of 40 failed
    assert "11 of 40 cases failed" in heat["data"][0]["hovertext"][1][0]
    assert len(tests["data"][0]["x"]) == len(TESTS)
    ids = set(re.findall(r'id="([^"]+)"', page))
    links = [href for row in heat["links"][0] for href in row if href]
    assert links and all(href[1:] in ids for href in links)  # every cell's link lands on the page
    assert heat["links"][0][0][2] is None  # "good" never failed Negation: nothing to link to


def test_compare_opens_with_the_flips_per_capability():
    from tests.compare.test_report import compare_page

    page = compare_page()
    assert page.index("<h2>Flips per capability</h2>") < page.index("<h2>What was compared</h2>")
    flips = _figures(page)[0]
    assert [t["name"] for t in flips["data"]] == ["pass→fail (regressions)", "fail→pass (fixes)"]
    ids = set(re.findall(r'id="([^"]+)"', page))
    assert all(h[1:] in ids for t in flips["links"] for h in t if h)


def _figure_section() -> Section:
    import plotly.graph_objects as go

    return Section("plot", [figure_html(go.Figure(go.Bar(x=[1], y=[2])))])


def test_a_site_shares_one_plotly_bundle(tmp_path):
    top = RunDir(str(tmp_path / "site"))
    write_assets(top)
    nested = RunDir(str(tmp_path / "site" / "testaug" / "benchmark"))
    write_page(nested, "leaderboard.html", "t", [_figure_section()])
    write_page(RunDir(str(tmp_path / "site" / "zoo")), "report.html", "t", [Section("no plot", ["<p>x</p>"])])
    alone = RunDir(str(tmp_path / "alone"))
    write_page(alone, "report.html", "t", [_figure_section()])

    assert [p.relative_to(tmp_path).as_posix() for p in sorted(tmp_path.rglob("*.js"))] == [
        f"alone/{plotly_asset()}",
        f"site/{plotly_asset()}",
    ]
    page = (Path(nested.root) / "leaderboard.html").read_text()
    assert f'<script defer src="../../{plotly_asset()}"></script>' in page and "/* plotly.js */" not in page
    assert "<script defer src=" not in (tmp_path / "site" / "zoo" / "report.html").read_text()  # no figure, no plotly
    assert f'<script defer src="{plotly_asset()}"></script>' in (tmp_path / "alone" / "report.html").read_text()
    standalone = inline_assets(page)
    assert "<script defer src=" not in standalone and "<script>/* plotly.js */</script>" in standalone
    assert "/* plotly.js */" in render("t", [_figure_section()])  # a page alone inlines it


def test_figures_export_as_svg_and_png(tmp_path):
    """plotly's static export (kaleido, optional) writes each figure of a page as files."""
    pytest.importorskip("kaleido")
    from checkray.engine.report import export_figures
    from checkray.jobs.benchmark.report import leaderboard_sections

    summary, examples = summary_and_examples()
    page = render("t", leaderboard_sections(summary, examples))
    written = export_figures(page, str(tmp_path))
    names = sorted(Path(p).name for p in written)
    assert names == [f"failure-rate-by-{w}.{f}" for w in ("capability", "test") for f in ("png", "svg")]
    assert all(Path(p).stat().st_size > 1000 for p in written)
    assert (tmp_path / "failure-rate-by-capability.svg").read_text().startswith("<svg")


def test_the_index_answers_first(tmp_path):
    """Per benchmark its models best first (overall rate, worst capabilities); per generated
    suite its size and estimated validity (validity_estimate.parquet, first quality table)."""
    import pyarrow.parquet as pq

    from checkray.jobs.index import write_index
    from checkray.jobs.index_runs import find_runs

    bench, suite = tmp_path / "benchmark", tmp_path / "testaug"
    bench.mkdir()
    suite.mkdir()
    summary, _ = summary_and_examples()
    pq.write_table(summary, bench / "summary.parquet")
    (bench / "manifest.json").write_text(json.dumps({"job": "benchmark", "published": ["summary.parquet"]}))
    estimate = [
        {"generator": "testaug", "capability": "Negation", "cases": 30, "rejected": 4, "all_three": 0.5,
         "all_three_low": 0.4, "all_three_high": 0.6},
        {"generator": "testaug", "capability": "Vocabulary", "cases": 10, "rejected": 0, "all_three": 0.9,
         "all_three_low": 0.8, "all_three_high": 0.95},
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(estimate), suite / "validity_estimate.parquet")
    manifest = {
        "job": "testaug",
        "published": ["validity_estimate.parquet", "suite.parquet"],
        "quality": [{"file": "validity_estimate.parquet", "title": "Estimated validity"}],
    }
    (suite / "manifest.json").write_text(json.dumps(manifest))
    runs = {r.job: r for r in find_runs(str(tmp_path))}
    models = runs["benchmark"].models
    assert [m["model"] for m in models] == MODELS and models[0]["rank"] == 1
    assert models[2]["worst capabilities"].startswith("1_story")  # "worse" fails 1_story most
    assert models[0]["failure rate [95 % CI]"].startswith("7.5% [")  # "good": 6 of 80 cases
    answer = runs["testaug"].suite
    assert answer["cases"] == 40 and answer["rejected"] == 4
    assert answer["valid (all three)"] == "60% [50%, 69%]"  # weighted by cases: (30 * .5 + 10 * .9) / 40
    assert answer["least valid"] == "Negation 50%"
    page = Path(write_index(RunDir(str(tmp_path)))).read_text()
    assert page.index("At a glance") < page.index('id="reports"') < page.index('id="times"')
    assert "Generated suites" in page and "Models, best first" in page
    assert empty_rows_and_columns(page) == []


def test_the_shipped_plotly_bundle_matches_the_plotly_package_and_refuses_other_traces():
    """Figures are written by the installed plotly package for its plotly.js version; the
    shipped cartesian bundle must be that version, and a trace it cannot draw is refused."""
    import plotly.graph_objects as go
    from plotly.offline import get_plotlyjs

    from checkray.engine import report

    full = re.search(r"plotly\.js v([0-9.]+)", get_plotlyjs()[:400]).group(1)
    shipped = re.search(r"plotly\.js \(cartesian - minified\) v([0-9.]+)", report.PLOTLY_BUNDLE.read_text()[:400])
    assert full == shipped.group(1) == report.PLOTLY_JS_VERSION
    assert report.PLOTLY_BUNDLE.stat().st_size < 2_000_000  # the point of it: the full bundle is 4.8 MB
    with pytest.raises(ValueError, match="scattergl are not in the shipped plotly.js bundle"):
        figure_html(go.Figure(go.Scattergl(x=[1], y=[2])))
