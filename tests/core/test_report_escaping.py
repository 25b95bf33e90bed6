"""Every HTML report escapes every text that came from a corpus, a model or an LLM.

Each report's section builder gets small tables whose every text is a payload
(``<script>alert(1)</script>`` and ``<img src=x onerror=alert(1)>``); the rendered page is
parsed with ``html.parser`` and must hold no element or attribute that came from the
payload, neither in the page nor as markup inside a plotly figure's data (plotly.js renders
tags in hover text, names and labels). Each page must also show the payload, escaped, so a
builder that dropped its input would not pass for a safe one.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from types import SimpleNamespace

import pyarrow as pa
import pytest

from checkray.engine.report import Section, plot_text, render, script_json, table_html

P = "<script>alert(1)</script><img src=x onerror=alert(1)>"
SHOWN = "&lt;img src=x onerror=alert(1)&gt;"  # how the payload reads once escaped
FIGURE = 'class="figure-spec"'  # a figure's JSON, drawn by the page once plotly.js is loaded


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        self._in_script = False if tag == "script" else self._in_script

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _decoded(script: str) -> str:
    """A figure's JSON as plotly.js sees it (plotly writes ``<``, ``>``, ``/`` as ``\\u....``)."""
    for esc, ch in (("\\u003c", "<"), ("\\u003e", ">"), ("\\u002f", "/"), ("\\u0026", "&")):
        script = script.replace(esc, ch)
    return script


def assert_escaped(page: str) -> None:
    parser = _Page()
    parser.feed(page)
    parser.close()
    injected = [(t, a) for t, a in parser.tags if t == "img" or any(name.startswith("on") for name, _ in a)]
    assert not injected, f"elements from the payload: {injected[:3]}"
    assert not [s for s in parser.scripts if s.strip() == "alert(1)"], "a <script> from the payload"
    for script in parser.scripts:
        decoded = _decoded(script)
        assert "<img" not in decoded and "<script>alert" not in decoded, "payload markup inside a figure"
    assert SHOWN in page or any(SHOWN in _decoded(s) for s in parser.scripts), "the payload never reached the page"


def _page(sections) -> str:
    return render(P, sections, subtitle=P)


@pytest.fixture(autouse=True)
def _no_plotlyjs(monkeypatch):
    """plotly.js (1.5 MB, inlined once per page) is not under test: leave it out."""
    from checkray.engine import report

    monkeypatch.setattr(report, "plotly_js", lambda: "/* plotly.js */")


# A candidate the automatic checks rejected, every shown field hostile (the reports' rejection tables)
REJECTED = [
    {
        "case_id": "r1",
        "suite": P,
        "capability": P,
        "text": P,
        "expected_label": "positive",
        "check": P,
        "reason": P,
        "source": P,
    }
]


class FakeRunner:
    """What the report builders read of a StageRunner: ``output(stage, name)`` and ``done``."""

    def __init__(self, outputs: dict[tuple[str, str], list[dict]]):
        self.outputs = outputs
        self.done = {stage: SimpleNamespace(seconds=1.0, computed_seconds=1.0, skipped=False) for stage, _ in outputs}
        self.run = SimpleNamespace(write_table=lambda *a, **k: None, path=lambda *a: "/tmp/run/" + "/".join(a))

    def output(self, stage: str, output: str = "data", columns=None) -> pa.Table:
        return pa.Table.from_pylist(self.outputs[(stage, output)])


def test_the_check_finds_an_unescaped_payload():
    for block in (P, f"<p>{P}</p>", "<div onclick=x>a</div>"):
        with pytest.raises(AssertionError):
            assert_escaped(_page([Section("t", [block], "s")]))
    fig_json = '<script>Plotly.newPlot("x", [{"text": ["\\u003cimg src=x onerror=alert(1)\\u003e"]}])</script>'
    with pytest.raises(AssertionError, match="inside a figure"):
        assert_escaped(_page([Section("t", [fig_json], "s")]))


def test_section_titles_summaries_tables_and_inline_json():
    table = table_html([{P: P, "n": 1, "list": [P, P]}])
    assert_escaped(_page([Section(P, [table], P)]))
    assert "<" not in script_json({"a": P, "b": "&\u2028"}) and json.loads(script_json({"a": P})) == {"a": P}
    assert plot_text(f"a<br>b {P}") == "a<br>b &lt;script&gt;alert(1)&lt;/script&gt;" + SHOWN


def _topics_page(labels):
    from checkray.jobs.config import load_config
    from checkray.jobs.topics.report import topics_sections

    corpus = pa.table({"id": ["a", "b"], "text": [P, P + " two"], "label": labels, "meta": pa.nulls(2, pa.string())})
    assignments = pa.table({"id": ["a", "b"], "cluster": [0, 1], "x": [0.0, 1.0], "y": [1.0, 0.0]})
    clusters = pa.table(
        {
            "cluster": [0, 1],
            "topic": [P, "1_" + P],
            "size": [1, 1],
            "majority_label": [P, "positive"],
            "majority_share": [1.0, 1.0],
            "keywords": [[P, "w"], ["w", P]],
        }
    )
    reps = pa.table(
        {
            "cluster": [0, 1],
            "topic": [P, P],
            "rank": [1, 1],
            "label": [P, "positive"],
            "relevance": [0.5, 0.4],
            "text": [P, P],
        }
    )
    return _page(topics_sections(corpus, assignments, clusters, reps, load_config(None)))


def test_topics_report():
    page = _topics_page([P, "positive"])
    assert page.count(FIGURE) == 1  # the map (by topic, by label) is there, with the payload in hover text and legend
    assert_escaped(page)


def test_topics_map_shows_missing_labels_as_missing():
    page = _topics_page([None, "positive"])
    assert "(no label)" in page and '"name":"None"' not in page


def _summary_rows():
    row = {
        "model": P,
        "suite": P,
        "capability": P,
        "topic": P,
        "test_type": "MFT",
        "n": 4,
        "failures": 1,
        "failure_rate": 0.25,
        "errors": 0,
        "testcases": 4,
        "testcase_failures": 1,
        "testcase_failure_rate": 0.25,
        "n_versions": 2,
        "failure_rate_mean": 0.25,
        "failure_rate_std": 0.0,
        "error": P,
    }
    return [row, {**row, "model": "m2", "capability": "Negation"}]


def _benchmark_page() -> str:
    from checkray.engine.benchmark.summary import SUMMARY_SCHEMA
    from checkray.jobs.benchmark.report import leaderboard_sections

    summary = pa.Table.from_pylist(_summary_rows(), schema=SUMMARY_SCHEMA)
    examples = pa.Table.from_pylist(
        [{"model": P, "capability": P, "topic": P, "text": P, "original": P, "expected": P, "predicted": P}]
    )
    models = pa.Table.from_pylist([{"model": P, "error": P}])
    return _page(leaderboard_sections(summary, examples, models, {P: 0.9}))


def test_benchmark_leaderboard():
    page = _benchmark_page()
    assert page.count(FIGURE) == 1  # the heatmap (one test per capability: no drill-down): names on its axes
    assert 'href="#ex-' not in page and '"#ex-0-' in page  # cells link by index, never by name
    assert_escaped(page)


def _mft_page() -> str:
    from checkray.engine.schema import make_cases
    from checkray.jobs.mft.report import mft_sections

    suite = make_cases(
        [
            {
                "suite": "mft-test-original",
                "method": "mft",
                "capability": P,
                "topic": P,
                "text": P,
                "expected_label": "positive",
                "test_type": "MFT",
                "meta": {"summary": P, "paraphrase_of": None},
            }
        ]
    )
    runner = FakeRunner(
        {
            ("generate", "gates"): [{"gate": P, "kept": 1, "dropped": 0}],
            ("generate", "parsing"): [{"topic": P, "answers": 1, "examples": [P, P]}],
            ("generate", "rejected"): REJECTED,
            ("generate", "data"): [{"case_id": "c1", "text": P}],
        }
    )
    return _page(
        mft_sections(
            runner, suite, table7=[{"model": P, "accuracy": "50.0%"}], table8=[{"model": P, P: "50.0% (±1.0)"}]
        )
    )


def test_mft_report():
    assert_escaped(_mft_page())


def _s2lct_page() -> str:
    from checkray.engine.s2lct.spec import CapabilitySpec
    from checkray.jobs.config import load_config
    from checkray.jobs.s2lct.report import Consistency, Evaluation, s2lct_sections

    seed_meta = {"kind": "seed"}
    exp_meta = {"kind": "expansion", "seed_case_id": "c1", "masked": P, "production": P, "reference_production": P}
    suite = pa.Table.from_pylist(
        [
            {"case_id": "c1", "capability": "LC1: " + P, "expected_label": P, "text": P, "meta": json.dumps(seed_meta)},
            {"case_id": "c2", "capability": "LC1: " + P, "expected_label": P, "text": P, "meta": json.dumps(exp_meta)},
        ]
    )
    runner = FakeRunner(
        {
            ("seeds", "data"): [
                {"case_id": "c1", "capability_id": "LC1", "found": json.dumps({P: 2}), "label_source": P}
            ],
            ("expand", "data"): [{"case_id": "c1", "parser": P, "expansions": json.dumps([{"rejected": {P: 1}}])}],
            ("grammar", "sources"): [{"trees": 3}],
            ("parse", "info"): [{"reference_documents": 2}],
            ("suite", "rejected"): REJECTED,
        }
    )
    grammar = pa.table({"lhs": [P], "rhs": [P], "count": [3]})
    spec = CapabilitySpec.model_validate({"id": "LC1", "name": "LC1: " + P, "search": [{"name": "r", "label": P}]})
    evaluation = Evaluation(
        table3=[
            {
                "capability": P,
                "model": P,
                "seeds": 1,
                "seed_fail_pct": 0.0,
                "expansions": 1,
                "exp_fail_pct": 0.0,
                "pass_to_fail": 0,
            }
        ],
        coverage=[{"suite": P, "model": P, "cases": 1, "BoundCov": 0.1, "SActCov": 0.2}],
        explanations=[{"model": P, "text": P, "tokens": P}],
        notes=[P],
        consistency=Consistency(
            cases=pa.Table.from_pylist(
                [
                    {
                        "capability_id": P,
                        "kind": P,
                        "text": P,
                        "expected_label": P,
                        "parts": json.dumps([{"text": P, "needs": P, "judge": P, "lexicon": P}]),
                        "judge_seed": P,
                        "judge_text": P,
                        "agree_judge": False,
                        "agree_lexicon": False,
                    }
                ]
            ),
            summary=[{"capability": P, "agreement": 0.5}],
            info={"judge": P, "notes": [P]},
        ),
    )
    s = load_config(None).section("s2lct")
    return _page(s2lct_sections(runner, suite, grammar, [spec], s, evaluation))


def test_s2lct_report():
    page = _s2lct_page()
    assert FIGURE in page  # coverage curves: suite and model names in legend and facets
    assert_escaped(page)


def _violations():
    rows = []
    for cr, verdict in (("CR1", True), ("CR2", False), ("CR4", True)):
        rows.append(
            {
                "model": P,
                "suite": P,
                "capability": cr,
                "distance": "l2",
                "threshold": "mu-2sigma",
                "theta": 0.1,
                "verdict": verdict,
                "gt_a": True,
                "gt_b": False,
                "d_pos": 0.5,
                "d_neg": 0.1,
                "triple": f"t-{cr}",
            }
        )
    return pa.Table.from_pylist(rows)


def _costello_page() -> str:
    from checkray.engine.costello.config import CostelloConfig
    from checkray.jobs.costello.report import costello_sections

    cc = CostelloConfig(distance="l2", threshold="mu-2sigma")
    wide = pa.Table.from_pylist(
        [
            {"triple": f"t-{cr}", "suite": P, "capability": cr, "seed": P, "positive": P, "negative": P}
            for cr in ("CR1", "CR2", "CR4")
        ]
    )
    thresholds = pa.Table.from_pylist(
        [
            {"model": P, "distance": "l2", "words": 10, "nn_mean": 0.3, "nn_std": 0.1, "threshold": t, "theta": 0.1}
            for t in ("zero", "mu-2sigma")
        ]
    )
    classifiers = pa.Table.from_pylist([{"model": P, "classifier": P, "accuracy": 0.9}])
    return _page(costello_sections(wide, _violations(), thresholds, classifiers, cc))


def test_costello_report():
    assert_escaped(_costello_page())


def _repair_page() -> str:
    from checkray.engine.costello.tables import costello_table3, violation_counts
    from checkray.jobs.costello.report import repair_sections

    inputs = SimpleNamespace(
        cc=SimpleNamespace(distance="l2", threshold="mu-2sigma"),
        settings=SimpleNamespace(epochs=1, learning_rate=0.01, alpha=0.5),
        spec=SimpleNamespace(name=P),
        suite=P,
        violated=[1],
        benign=[2],
    )
    counts = violation_counts(_violations(), "l2", "mu-2sigma")
    table3 = pa.Table.from_pylist(costello_table3(counts, counts, 0.8, 0.7))
    history = pa.Table.from_pylist([{"epoch": 1, "note": P, "loss_before": 1.0, "loss_after": 0.5}])
    return _page(repair_sections(inputs, table3, history, P))


def test_costello_repair_report():
    assert_escaped(_repair_page())


def _testaug_page() -> str:
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.engine.testaug.config import TestAugConfig
    from checkray.engine.testaug.prompt import Description
    from checkray.jobs.testaug.report import testaug_sections

    decision = {
        "first_sample": 3,
        "annotated_by": "llm",
        "valid_share": 0.5,
        "threshold": 0.9,
        "filter": True,
        "kept": 1,
        "dropped": 1,
        "classifier_accuracy": None,
        "classifier_vs_llm": None,
        "generated": 2,
    }
    runner = FakeRunner(
        {
            ("parse", "parsing"): [
                {
                    "key": "d01",
                    "answers": 1,
                    "truncated": 0,
                    "parsed": 1,
                    "unparsed": 1,
                    "duplicates": 0,
                    "examples": [P],
                }
            ],
            ("topup", "decisions"): [decision],
            ("topup", "labeler"): [{"raw answer": P, P: 1}],
            ("topup", "data"): [{"key": "d01", "kept": True, "decided_by": "llm", "text": P, "text_pair": P}],
            ("diversity", "table4"): [{"description": P, "saved": 0.5}],
            ("diversity", "table5"): [{"suite": P, "self_bleu": 0.3}],
            ("expand", "templates"): [{"key": "d01", "template": json.dumps([P, "{x}"]), "source": P, "cases": 2}],
            ("benchmark", "data"): [
                {"suite": P, "capability": P, "topic": P, "model": P, "n": 2, "failures": 1, "failure_rate": 0.5}
            ],
            ("patch", "data"): [{"model": P, "seed": 11, "column": "Unpatched", "failure_rate": 0.5}],
            ("patch", "skipped"): [{"model": P, "reason": P}],
            ("suites", "suite"): [
                {"case_id": "c1", "capability": P, "text": P, "expected_label": "positive", "checks": [P]}
            ],
            ("suites", "rejected"): REJECTED,
        }
    )
    descs = [Description("d01", P, P, P, False, [])]
    specs = [ModelSpec.model_validate({"name": P, "family": "sklearn", "path": "/x", "accuracy": 0.8})]
    return _page(testaug_sections(runner, TestAugConfig(), descs, specs, P))


def test_testaug_report():
    page = _testaug_page()
    assert "LLM labeler answers" in page and "failure rates per description" in page and "Table 3 shape" in page
    assert_escaped(page)


def _demo_page() -> str:
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.jobs.zoo.job import zoo_section

    spec = ModelSpec.model_validate({"name": P, "family": "tfidf", "path": "/x", "accuracy": 0.8})
    sections = [zoo_section([spec]), Section("COSTELLO repair", [], f"repair skipped: {P}")]
    sections.append(Section("Demo timings", [table_html([{"step": P, "seconds": 1.0}])]))
    return render("checkray · demo report", sections, subtitle=P)


def test_demo_report():
    assert_escaped(_demo_page())


# Every report page, built from payload-laden tables: also opened in a real browser
# (tests/core/test_report_site.py), with plotly.js, to see it render with no script run.
REPORT_PAGES = {
    "topics": lambda: _topics_page([P, "positive"]),
    "benchmark": _benchmark_page,
    "mft": _mft_page,
    "s2lct": _s2lct_page,
    "costello": _costello_page,
    "repair": _repair_page,
    "testaug": _testaug_page,
    "demo": _demo_page,
}
