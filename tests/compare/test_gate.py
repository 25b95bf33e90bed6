"""Gate files (strict), rule verdicts, JUnit XML and the Markdown summary."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from checkray.engine.benchmark.summary import summarize
from checkray.engine.compare.gate import cells_from_summary, evaluate_gate, read_gate
from checkray.engine.compare.junit import junit_xml, summary_markdown
from checkray.engine.compare.pairing import pair_results
from checkray.engine.errors import CheckrayError
from tests.compare.helpers import regress_suite, results_for

GATE = """
rules:
  - name: vocabulary
    capability: Vocab*
    min_pass_rate: 0.9
  - capability: [Negation, Temporal]
    min_pass_rate: 0.8
  - test_type: MFT
    min_pass_rate: 0.5
    each: capability
"""


def _write(tmp_path, text: str):
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, needle",
    [
        (
            "rules:\n  - capability: A\n    min_pass_rate: 0.9\n    min_pass_rate: 0.8\n",
            "duplicate key 'min_pass_rate'",
        ),
        ("rules:\n  - capabilty: A\n    min_pass_rate: 0.9\n", "rules.0.capabilty: unknown field"),
        ("rules:\n  - capability: A\n    min_pass_rate: yes\n", "got the boolean true"),
        ("rules:\n  - capability: A\n    min_pass_rate: .inf\n", "rules.0.min_pass_rate"),
        ("rules:\n  - capability: A\n    min_pass_rate: 1.5\n", "less than or equal to 1"),
        ("rules:\n  - capability: A\n", "a rule needs min_pass_rate, max_drop or both"),
        ("rules:\n  - capability: A\n    min_pass_rate: 0.5\n    alpha: 0.05\n", "alpha applies to max_drop"),
        ("rules: []\n", "rules: List should have at least 1 item"),
        ("- 1\n", "a gate file is a mapping"),
        ("rules: [\n", "bad YAML"),
    ],
)
def test_gate_files_are_read_strictly(tmp_path, text, needle):
    with pytest.raises(CheckrayError) as err:
        read_gate(_write(tmp_path, text))
    assert needle in str(err.value) and "gate.yaml" in str(err.value) and "\n" not in str(err.value)


def test_missing_gate_file(tmp_path):
    with pytest.raises(CheckrayError, match="gate file not found"):
        read_gate(tmp_path / "nope.yaml")


def _cells(tmp_path):
    suite = regress_suite(tmp_path)
    results = {m: results_for(suite, m) for m in ("naive", "keyword")}
    summary = pd.concat([summarize(r).to_pandas() for r in results.values()], ignore_index=True)
    return suite, results, cells_from_summary(summary)


def test_rules_per_model_with_globs_lists_and_each(tmp_path):
    _, results, cells = _cells(tmp_path)
    checks = evaluate_gate(read_gate(_write(tmp_path, GATE)), cells, models=["naive", "keyword"])
    verdict = {(c.model, c.name): c for c in checks}
    assert verdict[("naive", "vocabulary")].passed and verdict[("naive", "vocabulary")].pass_rate == 1.0
    neg = verdict[("naive", "capability=Negation,Temporal: min_pass_rate 0.8")]
    assert not neg.passed and neg.n == 9 and neg.pass_rate == 0.0
    assert (
        neg.line()
        == "FAIL naive: capability=Negation,Temporal: min_pass_rate 0.8: pass rate 0.000 < min 0.8 (n=9, 9 failed)"
    )
    assert verdict[("keyword", "capability=Negation,Temporal: min_pass_rate 0.8")].passed
    each = sorted(name for model, name in verdict if model == "naive" and name.startswith("test_type=MFT"))
    assert each == [
        "test_type=MFT: min_pass_rate 0.5 [capability=Negation]",
        "test_type=MFT: min_pass_rate 0.5 [capability=Vocabulary]",
    ]
    assert len(checks) == 2 * 4


def test_a_rule_that_matches_nothing_fails(tmp_path):
    _, _, cells = _cells(tmp_path)
    gate = read_gate(_write(tmp_path, "rules:\n  - capability: Negaton\n    min_pass_rate: 0.1\n"))
    (check,) = evaluate_gate(gate, cells, models=["keyword"])
    assert not check.passed and check.reasons == ["the rule matched no judged case"]


def test_max_drop_against_a_baseline_with_and_without_significance(tmp_path):
    _, results, cells = _cells(tmp_path)
    # keyword as the baseline, naive as the candidate: 9 regressions on Negation.
    paired = {"naive": pair_results(results["keyword"], results["naive"]).paired}
    gate = read_gate(
        _write(
            tmp_path,
            "rules:\n"
            "  - {capability: Negation, max_drop: 0.5}\n"
            "  - {capability: Negation, max_drop: 0.5, alpha: 0.001}\n"
            "  - {capability: Vocabulary, max_drop: 0.0}\n",
        )
    )
    strict, lenient, vocab = evaluate_gate(gate, cells, paired, models=["naive"])
    assert not strict.passed and strict.drop == 1.0 and strict.pass_to_fail == 9
    assert strict.p_value == pytest.approx(2 / 2**9)
    assert "drop 1.000 > max 0.5" in strict.reasons[0]
    assert lenient.passed  # p = 0.0039 is not below alpha 0.001
    assert vocab.passed and vocab.drop == 0.0
    (missing,) = evaluate_gate(
        read_gate(_write(tmp_path, "rules:\n  - {max_drop: 0.1}\n")), cells, None, models=["naive"]
    )
    assert not missing.passed and "needs a baseline" in missing.reasons[0]


def test_junit_xml_and_summary(tmp_path):
    _, _, cells = _cells(tmp_path)
    examples = pd.DataFrame(
        [
            {
                "model": "naive",
                "suite": "regress",
                "capability": "Negation",
                "topic": None,
                "test_type": "MFT",
                "text": "This film is not <b>good</b> | really",
                "expected": "negative",
                "predicted": "positive",
            }
        ]
    )
    checks = evaluate_gate(read_gate(_write(tmp_path, GATE)), cells, examples=examples, models=["naive", "keyword"])
    xml = junit_xml(checks, properties={"run": "runs/x"})
    root = ET.fromstring(xml.split("\n", 1)[1])
    assert root.tag == "testsuites" and root.get("tests") == "8" and root.get("failures") == "2"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["checkray.gate.naive", "checkray.gate.keyword"]
    for s in suites:
        cases = s.findall("testcase")
        assert int(s.get("tests")) == len(cases) == 4
        assert int(s.get("failures")) == sum(c.find("failure") is not None for c in cases)
        assert all(c.get("classname") == s.get("name") and c.get("name") for c in cases)
        assert s.find("properties/property").get("value") == "runs/x"
    failure = suites[0].find("testcase/failure")
    assert failure.get("type") == "GateFailure" and "pass rate 0.000 < min 0.8" in failure.get("message")
    assert "This film is not <b>good</b>" in failure.text  # escaped in the file, intact once parsed
    md = summary_markdown(checks, "gate", ["run runs/x"])
    assert md.startswith("## gate\n\n**FAILED**: 2 of 8 checks")
    assert "&lt;b&gt;good&lt;/b&gt; \\| really" in md and "<b>" not in md
    assert summary_markdown([c for c in checks if c.passed], "gate").splitlines()[2] == "**PASSED**: all 6 checks"


def test_examples_with_a_missing_test_name_show_no_nan(tmp_path):
    _, _, cells = _cells(tmp_path)
    examples = pd.DataFrame(
        [
            {
                "model": "naive",
                "suite": "regress",
                "capability": "Negation",
                "topic": float("nan"),
                "test_type": "MFT",
                "text": "This film is not good.",
                "expected": "negative",
                "predicted": "positive",
            }
        ]
    )
    gate = read_gate(_write(tmp_path, "rules:\n  - {capability: Negation, min_pass_rate: 0.5}\n"))
    (check,) = evaluate_gate(gate, cells, examples=examples, models=["naive"])
    assert check.examples[0]["topic"] is None
    text = ET.fromstring(junit_xml([check]).split("\n", 1)[1]).find(".//failure").text
    assert "[Negation / MFT] 'This film is not good.': expected negative, predicted positive" in text
    assert "nan" not in summary_markdown([check], "g")


def test_a_gated_benchmark_compares_each_model_with_the_gate_baseline_run(tmp_path):
    """``benchmark --gate`` with max_drop rules, without Ray: the baseline found before the
    run (``check_gate_baseline``) is what ``benchmark_gate`` pairs each model with."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from checkray.engine.benchmark.provenance import case_digests, suite_digests
    from checkray.engine.benchmark.results import example_failures
    from checkray.engine.stages import RunDir
    from checkray.jobs.compare.gating import benchmark_gate, check_gate_baseline
    from tests.compare.helpers import fake_run

    suite = regress_suite(tmp_path)
    runs = {}
    for name, model in (("base", "keyword"), ("cand", "naive")):
        run = fake_run(tmp_path / name, suite, models=(model,))
        pq.write_table(pa.Table.from_pylist([{"model": model, "error": None}]), run / "models.parquet")
        manifest = {"job": "benchmark", "published": ["results.parquet", "models.parquet"]}
        (run / "manifest.json").write_text(json.dumps(manifest))
        runs[name] = run
    gate = read_gate(
        _write(
            tmp_path,
            f"baseline: {runs['base']}\nrules:\n"
            "  - {name: negation, capability: Negation, max_drop: 0.5}\n"
            "  - {name: vocabulary, capability: Vocabulary, max_drop: 0.0}\n",
        )
    )
    baseline = check_gate_baseline(gate, [suite], ["naive"])
    assert baseline is not None and baseline.model_of == {"naive": "keyword"}  # the baseline's only model
    results = pq.read_table(runs["cand"] / "results.parquet")
    digests = suite_digests(
        suite.column("suite").to_pylist(), suite.column("case_id").to_pylist(), case_digests(suite).to_pylist()
    )
    negation, vocabulary = benchmark_gate(
        gate,
        baseline,
        RunDir(str(runs["cand"])),
        models=["naive"],
        provenance={"suites": digests},
        summary=summarize(results),
        examples=example_failures(results, 3),
    )
    assert not negation.passed and negation.pass_to_fail == 9 and negation.drop == 1.0
    assert vocabulary.passed and vocabulary.drop == 0.0
    summary_md = (runs["cand"] / "summary.md").read_text()
    assert f"baseline: {runs['base']} (naive vs keyword)" in summary_md
    assert ET.parse(runs["cand"] / "junit.xml").getroot().get("failures") == "1"
