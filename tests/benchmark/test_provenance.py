"""The benchmark's reproducibility record (provenance.json), without starting Ray."""

from __future__ import annotations

import os

import pyarrow.parquet as pq

from checkray.engine.benchmark.inputs import prepare_cases
from checkray.engine.benchmark.provenance import case_digests, model_identity, package_versions, suite_digests
from checkray.engine.benchmark.registry import ModelSpec
from checkray.jobs.benchmark.config import BenchmarkConfig
from checkray.jobs.benchmark.provenance import benchmark_provenance, describe_model
from tests.benchmark.test_benchmark import basics_suite, neutral_suite


def test_record_names_models_by_content_packages_and_suites(tmp_path):
    weights = tmp_path / "model.joblib"
    weights.write_bytes(b"weights v1")
    specs = [
        ModelSpec(name="clf", family="sklearn", path=str(weights), accuracy=0.8),
        ModelSpec(name="kw", family="callable", path="tests.fakes.models:keyword_sentiment"),
        ModelSpec(name="hub", family="hf", path="org/model", options={"revision": "abc123"}),
    ]
    files = []
    for name, table in (("basics", basics_suite()), ("neutral", neutral_suite())):
        files.append(str(tmp_path / f"{name}.parquet"))
        pq.write_table(table, files[-1])
    cases, _ = prepare_cases([basics_suite(), neutral_suite()])
    record = benchmark_provenance(specs, cases, files, BenchmarkConfig(dir_tolerance=0.2))
    models = {m["name"]: m for m in record["models"]}
    assert models["clf"]["content"]["path"] == {
        "path": str(weights),
        "digest": models["clf"]["content"]["path"]["digest"],
    }
    assert models["kw"]["content"]["path"]["callable"] == "tests.fakes.models:keyword_sentiment"
    assert models["hub"]["revision"] == "abc123" and models["hub"]["content"]["path"] == "org/model"
    assert models["clf"]["status"] == "not run" and models["clf"]["accuracy"] == 0.8
    assert [f["file"] for f in record["suite_files"]] == files
    assert set(record["suite_files"][0]["suites"]) == {"basics"}
    assert record["suites"]["basics"]["cases"] == 48 and record["suites"]["neutral"]["cases"] == 3
    assert record["settings"]["dir_tolerance"] == 0.2
    assert record["environment"]["packages"]["pyarrow"] == package_versions(["pyarrow"])["pyarrow"]
    assert "clf [sklearn]" in describe_model(models["clf"], "clf")

    # Retrained weights: a new digest; the same file content: the same digest.
    before = model_identity(specs[0].model_dump(mode="json"))["digest"]
    weights.write_bytes(b"weights v2")
    assert model_identity(specs[0].model_dump(mode="json"))["digest"] != before
    weights.write_bytes(b"weights v1")
    os.utime(weights, (1, 1))
    assert model_identity(specs[0].model_dump(mode="json"))["digest"] == before


def test_prepared_cases_and_results_carry_the_content_digest():
    suite = basics_suite()
    cases, _ = prepare_cases([suite])
    assert cases.column("case_digest").to_pylist() == case_digests(suite).to_pylist()
    digests = suite_digests(
        suite.column("suite").to_pylist(), suite.column("case_id").to_pylist(), case_digests(suite).to_pylist()
    )
    shuffled = suite.take(list(reversed(range(suite.num_rows))))
    again = suite_digests(
        shuffled.column("suite").to_pylist(), shuffled.column("case_id").to_pylist(), case_digests(shuffled).to_pylist()
    )
    assert digests == again  # order does not matter
