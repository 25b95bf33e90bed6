"""End to end: a gated benchmark (exit codes, junit.xml, summary.md, provenance.json),
compare on two runs and on two models run now, a changed suite refused, the MLflow export
read back through MLflow's API, and export-failures on a real run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from checkray.engine.benchmark.inputs import read_suite
from checkray.engine.benchmark.provenance import case_digests, suite_digests
from checkray.engine.errors import InputError
from tests.compare.helpers import registry, regress_suite

ROOT = Path(__file__).resolve().parents[2]

FAILING_GATE = """
rules:
  - {name: vocabulary, capability: Vocabulary, min_pass_rate: 0.9}
  - {name: negation, capability: "Neg*", min_pass_rate: 0.8}
"""
PASSING_GATE = """
rules:
  - {name: vocabulary, capability: Vocabulary, min_pass_rate: 0.9}
  - {name: mft, test_type: MFT, min_pass_rate: 0.5, model: keyword}
"""
DROP_GATE = """
rules:
  - {name: no regression, max_drop: 0.0}
  - {name: negation floor, capability: Negation, min_pass_rate: 0.5}
"""


def _cli(*args):
    from checkray.jobs.cli import app

    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def bench(ray_session, tmp_path_factory):
    """One benchmark run of naive and keyword on the regress suite, gated (it fails)."""
    root = tmp_path_factory.mktemp("cmp")
    suite_path = root / "regress.parquet"
    pq.write_table(regress_suite(root), suite_path)
    gate = root / "gate_fail.yaml"
    gate.write_text(FAILING_GATE)
    out = root / "bench"
    # the registry's models are this module's callables; the trusts_code marker is per test
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHECKRAY_TRUST_CODE", "1")
        res = _cli(
            "benchmark",
            "--models",
            str(registry(root)),
            "--suites",
            str(suite_path),
            "--out",
            str(out),
            "--gate",
            str(gate),
        )
    return {"root": root, "suite": suite_path, "out": out, "result": res}


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_gated_benchmark_fails_then_passes_and_records_provenance(bench):
    res, out = bench["result"], bench["out"]
    assert res.exit_code == 1, (res.output, res.exception)
    assert "gate · FAIL naive: negation: pass rate 0.000 < min 0.8 (n=9, 9 failed)" in res.output
    assert "gate · ok   keyword: negation" in res.output and "gate · FAILED: 1 of 4 checks" in res.output
    root = ET.parse(out / "junit.xml").getroot()
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "4", "1")
    failure = root.find(".//testcase[@name='negation']/failure")
    assert failure is not None and "pass rate 0.000" in failure.get("message")
    assert "This" in failure.text and "not" in failure.text  # an example of a failing negation
    assert "**FAILED**: 1 of 4 checks" in (out / "summary.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"provenance.json", "junit.xml", "summary.md"} <= set(manifest["published"])

    prov = json.loads((out / "provenance.json").read_text())
    suite = read_suite(str(bench["suite"]))
    expected = suite_digests(
        suite.column("suite").to_pylist(), suite.column("case_id").to_pylist(), case_digests(suite).to_pylist()
    )
    assert prov["suites"] == expected and prov["suite_files"][0]["file"] == str(bench["suite"])
    assert len(prov["suite_files"][0]["file_digest"]) == 20
    models = {m["name"]: m for m in prov["models"]}
    assert models["naive"]["family"] == "callable" and models["naive"]["status"] == "ok"
    assert models["naive"]["content"]["path"]["digest"]  # the module's source file, by content
    assert models["naive"]["digest"] != models["keyword"]["digest"]
    packages = prov["environment"]["packages"]
    assert packages["checkray"] and packages["pyarrow"] and packages["ray"] and "torch" in packages
    results = pq.read_table(out / "results.parquet")
    assert results.column("case_digest").null_count == 0

    # The same run with a gate that holds: served from the checkpoints, exit 0, files rewritten.
    gate = bench["root"] / "gate_pass.yaml"
    gate.write_text(PASSING_GATE)
    again = _cli(
        "benchmark",
        "--models",
        str(registry(bench["root"])),
        "--suites",
        str(bench["suite"]),
        "--out",
        str(out),
        "--gate",
        str(gate),
    )
    assert again.exit_code == 0, (again.output, again.exception)
    assert "gate · passed: all 3 checks" in again.output
    assert ET.parse(out / "junit.xml").getroot().get("failures") == "0"


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_compare_two_runs_then_two_models_run_now(bench, tmp_path):
    out = bench["out"]
    res = _cli(
        "compare",
        "--baseline",
        str(out),
        "--baseline-model",
        "naive",
        "--candidate",
        str(out),
        "--candidate-model",
        "keyword",
        "--out",
        str(tmp_path / "c1"),
        "--bootstrap",
        "300",
    )
    assert res.exit_code == 0, (res.output, res.exception)
    table = {(r["level"], r["capability"]): r for r in pq.read_table(tmp_path / "c1" / "compare.parquet").to_pylist()}
    neg = table[("capability", "Negation")]
    assert (neg["n"], neg["pass_to_fail"], neg["fail_to_pass"]) == (9, 0, 9)
    assert neg["p_value"] == pytest.approx(2 / 2**9)
    overall = table[("overall", None)]
    assert overall["n"] == 24 and overall["diff"] == pytest.approx(9 / 24)
    assert overall["ci_low"] <= 9 / 24 <= overall["ci_high"]
    assert "compare · capability Negation: 0.000 -> 1.000 (+1.000" in res.output
    assert "McNemar p=0.003906 *" in res.output
    assert "compare · baseline: naive [callable] tests.fakes.models:naive_sentiment digest" in res.output
    assert "compare · suite regress: 26 cases, digest" in res.output
    flips = pq.read_table(tmp_path / "c1" / "flips.parquet")
    assert flips.num_rows == 9 and set(flips.column("direction").to_pylist()) == {"fail->pass"}
    compared = json.loads((tmp_path / "c1" / "compared.json").read_text())
    assert compared["baseline"]["identity"]["name"] == "naive" and compared["paired"] == 24
    html = (tmp_path / "c1" / "report.html").read_text()
    assert "Per capability" in html and "Flipped cases" in html

    # The same two models, benchmarked now: the same comparison.
    res = _cli(
        "compare",
        "--models",
        str(registry(bench["root"])),
        "--suites",
        str(bench["suite"]),
        "--baseline",
        "naive",
        "--candidate",
        "keyword",
        "--out",
        str(tmp_path / "c2"),
        "--bootstrap",
        "300",
    )
    assert res.exit_code == 0, (res.output, res.exception)
    now = pq.read_table(tmp_path / "c2" / "compare.parquet")
    assert now.to_pylist() == pq.read_table(tmp_path / "c1" / "compare.parquet").to_pylist()
    assert (tmp_path / "c2" / "benchmark" / "provenance.json").is_file()

    # A candidate run on an edited suite is refused with one line.
    edited = read_suite(str(bench["suite"]))
    texts = edited.column("text").to_pylist()
    texts[0] = texts[0].replace("This", "That")
    edited = edited.set_column(edited.schema.get_field_index("text"), "text", pa.array(texts))
    pq.write_table(edited, tmp_path / "edited.parquet")
    res = _cli(
        "compare",
        "--models",
        str(registry(bench["root"])),
        "--suites",
        str(tmp_path / "edited.parquet"),
        "--baseline",
        str(out),
        "--baseline-model",
        "naive",
        "--candidate",
        "keyword",
        "--out",
        str(tmp_path / "c3"),
    )
    assert isinstance(res.exception, InputError), res.output
    assert "suite 'regress' changed" in str(res.exception) and "\n" not in str(res.exception)


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_compare_gate_exit_codes_from_the_console(bench, tmp_path):
    """The real entry point: exit 1 on a failed rule (no traceback), 0 when all hold, 2 on a bad gate."""
    gate = tmp_path / "drop.yaml"
    gate.write_text(DROP_GATE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(baseline, candidate, out, gate_file):
        cmd = [
            sys.executable,
            "-m",
            "checkray.jobs.cli",
            "compare",
            "--baseline",
            str(bench["out"]),
            "--baseline-model",
            baseline,
            "--candidate",
            str(bench["out"]),
            "--candidate-model",
            candidate,
            "--out",
            str(out),
            "--gate",
            str(gate_file),
            "--bootstrap",
            "100",
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env, check=False)

    worse = run("keyword", "naive", tmp_path / "worse", gate)
    assert worse.returncode == 1, worse.stderr
    assert "Traceback" not in worse.stderr + worse.stdout
    assert (
        "gate · FAIL naive: no regression: drop 0.375 > max 0 vs baseline (0.958 -> 0.583 on 24 paired cases, "
        "9 pass->fail, McNemar p=0.003906)" in worse.stdout
    )
    assert "gate · FAIL naive: negation floor: pass rate 0.000 < min 0.5 (n=9, 9 failed)" in worse.stdout
    assert "gate · FAILED: 2 of 2 checks" in worse.stderr
    junit = ET.parse(tmp_path / "worse" / "junit.xml").getroot()
    assert junit.get("failures") == "2"

    better = run("naive", "keyword", tmp_path / "better", gate)
    assert better.returncode == 0, better.stderr
    assert "gate · passed: all 2 checks" in better.stdout

    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {capability: Negation, min_pass_rate: yes}\n")
    broken = run("naive", "keyword", tmp_path / "broken", bad)
    assert broken.returncode == 2
    assert broken.stderr.strip().splitlines() == [
        f"error: {bad}: rules.0.min_pass_rate: expected a number, got the boolean true "
        "(YAML reads yes/no/on/off as booleans)"
    ]


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_mlflow_export_read_back_through_its_api(bench, tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from checkray.jobs.compare.export import log_benchmark

    uri = f"file:{tmp_path / 'mlruns'}"
    parent = log_benchmark(str(bench["out"]), uri, experiment="ci")
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ci")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 3  # the benchmark and one nested run per model
    top = client.get_run(parent)
    assert top.data.tags["checkray.job"] == "benchmark"
    assert top.data.metrics["pass_rate.naive.Negation"] == 0.0
    assert top.data.metrics["pass_rate.keyword.Negation"] == 1.0
    assert top.data.params["benchmark.batch_size"] == "256"
    assert top.data.params["suite.regress"].startswith("26 cases, digest")
    artifacts = {a.path for a in client.list_artifacts(parent)}
    assert {"failing_examples.json", "config.json", "provenance.json", "summary.json", "junit.xml"} <= artifacts
    children = {r.info.run_name: r for r in runs if r.info.run_id != parent}
    assert set(children) == {"naive", "keyword"}
    naive = children["naive"]
    assert naive.data.tags["mlflow.parentRunId"] == parent and naive.info.status == "FINISHED"
    assert naive.data.params["error"] == "None"
    assert naive.data.metrics["pass_rate.capability.Negation"] == 0.0
    assert naive.data.metrics["pass_rate.capability.Vocabulary"] == 1.0
    assert naive.data.params["family"] == "callable" and len(naive.data.params["digest"]) == 20
    path = client.download_artifacts(naive.info.run_id, "failing_examples.json", str(tmp_path))
    table = json.loads(Path(path).read_text())
    assert "Negation" in json.dumps(table) and len(table["data"]) >= 1

    # The CLI: compare with --mlflow-uri (no Ray needed for two finished runs).
    res = _cli(
        "compare",
        "--baseline",
        str(bench["out"]),
        "--baseline-model",
        "naive",
        "--candidate",
        str(bench["out"]),
        "--candidate-model",
        "keyword",
        "--out",
        str(tmp_path / "c"),
        "--bootstrap",
        "100",
        "--mlflow-uri",
        uri,
        "--mlflow-experiment",
        "ci",
    )
    assert res.exit_code == 0, (res.output, res.exception)
    compare_run = client.search_runs([exp.experiment_id], filter_string="tags.`checkray.job` = 'compare'")
    assert len(compare_run) == 1
    metrics = compare_run[0].data.metrics
    assert metrics["fail_to_pass.capability.Negation"] == 9 and metrics["p_value.capability.Negation"] == pytest.approx(
        2 / 2**9
    )
    assert "flips.json" in {a.path for a in client.list_artifacts(compare_run[0].info.run_id)}


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(120)
def test_export_failures_cli_on_a_real_run(bench, tmp_path):
    res = _cli("export-failures", str(bench["out"]), "--out", str(tmp_path / "f.parquet"), "--model", "naive")
    assert res.exit_code == 0, (res.output, res.exception)
    assert "10 failing case(s), 1 original(s) of failing INV/DIR cases, 0 template neighbour(s)" in res.output
    suite = read_suite(str(tmp_path / "f.parquet"))  # a valid suite, to rerun
    assert suite.num_rows == 11
