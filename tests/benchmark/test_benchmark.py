"""The benchmark job end to end: suites x callable keyword models as Ray actors, files,
numbers, failing models, label-map mismatch, and one-line errors for bad inputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from checkray.engine.errors import InputError
from checkray.engine.schema import make_cases

HERE = Path(__file__).resolve().parent


def _mft(cid, text, label, capability, version=None, suite="basics"):
    return {
        "case_id": cid,
        "suite": suite,
        "method": "hand",
        "capability": capability,
        "text": text,
        "expected_label": label,
        "meta": {"version": version} if version else None,
    }


def _pair(cid, text, perturbs, test_type, capability, relation=None, label=None, version="v1"):
    return {
        "case_id": cid,
        "suite": "basics",
        "method": "hand",
        "capability": capability,
        "text": text,
        "test_type": test_type,
        "perturbs": perturbs,
        "relation": relation,
        "expected_label": label,
        "meta": {"version": version},
    }


def basics_suite() -> pa.Table:
    rows = [
        _mft("v1-voc-0", "a good movie", "positive", "Vocabulary", "v1"),
        _mft("v1-voc-1", "a great film", "positive", "Vocabulary", "v1"),
        _mft("v1-voc-2", "an awful plot", "negative", "Vocabulary", "v1"),
        _mft("v1-voc-3", "a boring story", "negative", "Vocabulary", "v1"),
        _mft("v2-voc-0", "I love this film", "positive", "Vocabulary", "v2"),
        _mft("v2-voc-1", "excellent acting", "positive", "Vocabulary", "v2"),
        _mft("v2-voc-2", "I hate the ending", "negative", "Vocabulary", "v2"),
        _mft("v2-voc-3", "terrible pacing", "negative", "Vocabulary", "v2"),
        # The naive model ignores negation: fails v1 2/2 and v2 2/3.
        _mft("v1-neg-0", "the movie was not good", "negative", "Negation", "v1"),
        _mft("v1-neg-1", "the plot is not bad", "positive", "Negation", "v1"),
        _mft("v2-neg-0", "I did not love it", "negative", "Negation", "v2"),
        _mft("v2-neg-1", "the story is never boring", "positive", "Negation", "v2"),
        _mft("v2-neg-2", "bad, awful and not good", "negative", "Negation", "v2"),
        _pair("inv-0", "a good movie, said Maria", "v1-voc-0", "INV", "Robustness", "same"),
        _pair("inv-1", "a great film with a bad parking lot", "v1-voc-1", "INV", "Robustness"),
        _pair("dir-0", "a good movie. I love it", "v1-voc-0", "DIR", "Intensifiers", "up", "positive"),
        _pair("dir-1", "an awful plot, terrible", "v1-voc-2", "DIR", "Intensifiers", "up"),
        _pair("dir-2", "a good movie, boring and bad", "v1-voc-0", "DIR", "Intensifiers", "up", "positive"),
    ]
    for i in range(30):  # filler so batches and dedup matter; repeated texts score once
        rows.append(
            _mft(
                f"fill-{i}",
                "a good movie" if i % 2 else f"great fun number {i}",
                "positive",
                "Vocabulary",
                "v1" if i < 15 else "v2",
            )
        )
    return make_cases(rows)


def neutral_suite() -> pa.Table:
    return make_cases(
        [
            _mft("n-0", "the film starts at noon", "neutral", "Neutral", suite="neutral"),
            _mft("n-1", "a good movie", "neutral", "Neutral", suite="neutral"),
            _mft("n-2", "kaboom goes the screen", "neutral", "Neutral", suite="neutral"),
        ]
    )


def nli_suite() -> pa.Table:
    return make_cases(
        [
            {
                "case_id": "e-0",
                "suite": "nli",
                "method": "hand",
                "capability": "Entailment",
                "text": "a man sleeps",
                "text_pair": "a person rests",
                "expected_label": "entailment",
            }
        ]
    )


@pytest.fixture
def suite_files(tmp_path):
    paths = []
    for name, table in (("basics", basics_suite()), ("neutral", neutral_suite()), ("nli", nli_suite())):
        pq.write_table(table, tmp_path / f"{name}.parquet")
        paths.append(str(tmp_path / f"{name}.parquet"))
    return paths


def _registry(tmp_path) -> str:
    models = [
        {"name": "keyword", "family": "callable", "path": "tests.fakes.models:keyword_sentiment", "accuracy": 0.9},
        {"name": "naive", "family": "callable", "path": "tests.fakes.models:naive_sentiment", "accuracy": 0.8},
        {
            "name": "three_way",
            "family": "callable",
            "path": "tests.fakes.models:three_way_sentiment",
            "labels": ["negative", "neutral", "positive"],
        },
        {"name": "exploding", "family": "callable", "path": "tests.fakes.models:exploding_sentiment"},
        {"name": "typo", "family": "no_such_family", "path": "x"},
        {"name": "missing", "family": "callable", "path": "no_such_model_file:predict"},
        {"name": "gone", "family": "sklearn", "path": str(tmp_path / "deleted_model.joblib")},
    ]
    path = tmp_path / "zoo.yaml"
    path.write_text(yaml.safe_dump({"models": models}))
    return str(path)


def _rows(results, model, **where):
    t = results.filter(pc.equal(results.column("model"), model))
    for col, value in where.items():
        t = t.filter(pc.equal(t.column(col), value))
    return t


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(240)
def test_benchmark_cli_end_to_end(ray_session, tmp_path, suite_files):
    from checkray.jobs.cli import app

    out = tmp_path / "bench"
    res = CliRunner().invoke(
        app,
        [
            "benchmark",
            "--models",
            _registry(tmp_path),
            "--suites",
            *suite_files,
            "--out",
            str(out),
            "--batch-size",
            "8",
        ],
    )
    assert res.exit_code == 0, (res.output, res.exception)
    results = pq.read_table(out / "results.parquet")
    summary = pq.read_table(out / "summary.parquet")
    html = (out / "leaderboard.html").read_text()
    n_cases = 48 + 3 + 1
    assert results.num_rows == 7 * n_cases

    # The negation-aware model passes every MFT of the basics suite; the naive one fails negation.
    keyword = _rows(results, "keyword", suite="basics")
    assert keyword.column("error").null_count == keyword.num_rows
    mft = _rows(results, "keyword", suite="basics", test_type="MFT")
    assert all(mft.column("pass").to_pylist())
    assert _rows(results, "keyword", case_id="inv-0").column("pass").to_pylist() == [True]
    assert _rows(results, "keyword", case_id="inv-1").column("pass").to_pylist() == [False]
    assert [_rows(results, "keyword", case_id=c).column("pass")[0].as_py() for c in ("dir-0", "dir-1", "dir-2")] == [
        True,
        True,
        False,
    ]
    probs = _rows(results, "keyword", case_id="v1-voc-0").column("probabilities")[0].as_py()
    assert len(probs) == 2 and probs[1] > 0.5 and sum(probs) == pytest.approx(1, abs=1e-5)

    # Neutral band: binary models predict neutral only for the cue-less sentence.
    assert _rows(results, "naive", suite="neutral").column("pass").to_pylist() == [True, False, True]
    assert _rows(results, "three_way", case_id="n-0").column("predicted").to_pylist() == ["neutral"]

    # Label-map mismatch: only the nli suite fails, with a clear error.
    nli = _rows(results, "keyword", suite="nli")
    assert nli.column("pass").to_pylist() == [None] and "label-map mismatch" in nli.column("error")[0].as_py()

    # Failing models are marked, the others finished.
    for model, needle in (
        ("exploding", "kaboom"),
        ("typo", "unknown family"),
        ("missing", "no_such_model_file"),
        ("gone", "deleted_model.joblib"),
    ):
        rows = _rows(results, model)
        assert rows.column("pass").null_count == n_cases
        assert needle in rows.column("error")[0].as_py()
        assert needle in html or model in html

    # Summary: pooled rate and spread over versions for the naive model's negation tests.
    neg = [r for r in summary.to_pylist() if r["model"] == "naive" and r["capability"] == "Negation"][0]
    assert (neg["n"], neg["failures"], neg["n_versions"]) == (5, 4, 2)
    assert neg["failure_rate"] == pytest.approx(0.8)
    assert neg["failure_rate_mean"] == pytest.approx((1 + 2 / 3) / 2)
    assert neg["failure_rate_std"] == pytest.approx(0.2357, abs=1e-3)
    assert "Failure rate by model and capability" in html and "plotly" in html.lower()
    assert html.index(">keyword<") < html.index(">naive<")  # leaderboard sorted by failure rate


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(120)
def test_run_benchmark_in_process_without_dedup_gives_the_same_results(ray_session):
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.jobs.benchmark.job import BenchmarkConfig, run_benchmark

    specs = [ModelSpec(name="keyword", family="callable", path="tests.fakes.models:keyword_sentiment")]
    cases = basics_suite()
    results, summary = run_benchmark(cases, specs, BenchmarkConfig(batch_size=64))
    undeduped, _ = run_benchmark([cases], specs, BenchmarkConfig(batch_size=5, dedup_texts=False, in_flight=1))
    assert results.column("pass").to_pylist() == undeduped.column("pass").to_pylist()
    assert sum(summary.column("n").to_pylist()) == cases.num_rows


def _invoke(*args):
    from checkray.jobs.cli import app  # the real entry point: every job registered

    return CliRunner().invoke(app, ["benchmark", *args])


def test_bad_suites_are_one_line_errors(tmp_path, suite_files):
    registry = _registry(tmp_path)
    empty = tmp_path / "empty.parquet"
    pq.write_table(make_cases([]), empty)
    wrong = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"sentence": ["hello"]}), wrong)
    for suite, needle in (
        (empty, "no test cases"),
        (wrong, "missing column"),
        (tmp_path / "absent.parquet", "suite file not found"),
    ):
        res = _invoke("--models", registry, "--suites", str(suite), "--out", str(tmp_path / "o"))
        assert isinstance(res.exception, InputError), res.output
        assert needle in str(res.exception) and str(suite) in str(res.exception)
    res = _invoke("--models", str(tmp_path / "nope.yaml"), "--suites", suite_files[0], "--out", str(tmp_path / "o"))
    assert isinstance(res.exception, InputError)
    assert "nope.yaml" in str(res.exception) and "not found" in str(res.exception)


def test_cli_prints_one_line_and_exits_2(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "checkray.jobs.cli",
            "benchmark",
            "--models",
            "m.yaml",
            "--suites",
            str(tmp_path / "absent.parquet"),
            "--out",
            str(tmp_path / "o"),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE.parents[1],
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {tmp_path / 'absent.parquet'}: suite file not found"]


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(240)
def test_heads_on_one_encoder_share_its_embeddings(ray_session, tmp_path, minilm_path):
    """Two st_head models: embeddings computed once in a shared encoder actor give the
    probabilities each model computes on its own."""
    import joblib
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from checkray.actors.benchmark.shared_encoder import encoder_groups
    from checkray.actors.models import load_model
    from checkray.engine.benchmark.registry import ModelSpec
    from checkray.jobs.benchmark.job import BenchmarkConfig, run_benchmark

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 384)), np.array(["negative", "positive"] * 20)
    specs = []
    for i, C in enumerate((0.1, 10.0)):
        joblib.dump(LogisticRegression(C=C).fit(X, y), tmp_path / f"head{i}.joblib")
        specs.append(
            ModelSpec(
                name=f"head{i}",
                family="st_head",
                path=str(tmp_path / f"head{i}.joblib"),
                options={"encoder": minilm_path},
            )
        )
    assert list(encoder_groups(specs, {"head0": [0, 1], "head1": [0, 1]}, None).values()) == [["head0", "head1"]]
    cases = neutral_suite()
    # in_process_below=0: hosts and the shared encoder actor, not the driver (small work)
    shared, _ = run_benchmark(cases, specs, BenchmarkConfig(batch_size=2, in_process_below=0))
    assert shared.column("error").null_count == shared.num_rows
    got = np.array(shared.column("probabilities").to_pylist())
    texts = cases.column("text").to_pylist()
    alone = np.vstack([load_model(spec).predict_proba(texts) for spec in specs])
    assert got.shape == (6, 2) and np.allclose(got, alone, atol=1e-5)
