"""Incremental reruns through the content cache (engine/cache.py): adding cases to a suite
or a model to a registry, into a NEW run directory, computes only the new (model, input)
pairs, and the results equal a cold run's. Models: callable keyword rules, a TF-IDF
pipeline and two classifier heads on the packaged MiniLM (shared encoder)."""

from __future__ import annotations

import time
from pathlib import Path

import joblib
import numpy as np
import pyarrow.parquet as pq
import pytest

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import ContentCache
from tests.fakes.suites import typo_suite

pytestmark = pytest.mark.ray


def suite(n: int):
    return typo_suite(n, "incremental")


def make_models(tmp_path: Path, minilm_path: str) -> dict[str, ModelSpec]:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts = ["a good film", "a great movie", "fun", "a bad film", "awful acting", "boring"] * 3
    labels = ["positive"] * 3 + ["negative"] * 3
    joblib.dump(
        make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(texts, labels * 3), tmp_path / "tfidf.joblib"
    )
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 384)), np.array(["negative", "positive"] * 20)
    for i, C in enumerate((0.1, 10.0)):
        joblib.dump(LogisticRegression(C=C).fit(X, y), tmp_path / f"head{i}.joblib")
    specs = [
        {"name": "keyword", "family": "callable", "path": "tests.fakes.models:keyword_sentiment"},
        {"name": "naive", "family": "callable", "path": "tests.fakes.models:naive_sentiment"},
        {"name": "tfidf", "family": "sklearn", "path": str(tmp_path / "tfidf.joblib")},
        {
            "name": "head0",
            "family": "st_head",
            "path": str(tmp_path / "head0.joblib"),
            "options": {"encoder": minilm_path},
        },
        {
            "name": "head1",
            "family": "st_head",
            "path": str(tmp_path / "head1.joblib"),
            "options": {"encoder": minilm_path},
        },
        {
            "name": "three_way",
            "family": "callable",
            "path": "tests.fakes.models:three_way_sentiment",
            "labels": ["negative", "neutral", "positive"],
        },
    ]
    return {s["name"]: ModelSpec.model_validate(s) for s in specs}


def bench(specs, cases, out: Path):
    from checkray.jobs.base import run_job
    from checkray.jobs.benchmark.config import BenchmarkConfig
    from checkray.jobs.benchmark.job import BenchmarkJob
    from checkray.jobs.config import CheckrayConfig

    cfg = CheckrayConfig().with_section(BenchmarkConfig(batch_size=8))
    start = time.perf_counter()
    result = run_job(BenchmarkJob(cfg, list(specs), [cases]), str(out))
    models = {r["model"]: r for r in pq.read_table(out / "models.parquet").to_pylist()}
    return models, result.stages["predict"].seconds, time.perf_counter() - start


def results(out: Path):
    cols = ["model", "case_id", "predicted", "probabilities", "pass", "error"]
    return pq.read_table(out / "results.parquet", columns=cols).sort_by(
        [("model", "ascending"), ("case_id", "ascending")]
    )


def of(table, model: str):
    return table.filter(table.column("model").to_numpy(zero_copy_only=False) == model)


def embedded_texts(cache_dir: Path) -> int:
    """Texts the cache holds embeddings of; each was embedded once (no digest in two shards)."""
    cache = ContentCache(str(cache_dir))
    shards = [s.path for s in cache.shards() if s.kind == "embeddings"]
    digests = [d for path in shards for d in pq.read_table(path, columns=["digest"]).column("digest").to_pylist()]
    assert len(digests) == len(set(digests)), "a text was embedded twice"
    return len(digests)


@pytest.mark.trusts_code
@pytest.mark.timeout(900)
def test_adding_cases_and_models_computes_only_the_new_pairs_and_equals_a_cold_run(
    ray_session, tmp_path, minilm_path, monkeypatch
):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("CHECKRAY_CACHE_URI", str(cache_dir))
    m = make_models(tmp_path, minilm_path)
    timings = {}

    # 1. Four models on 20 cases (40 inputs).
    first, timings["first run, 4 models x 40 inputs"], _ = bench(
        [m["keyword"], m["naive"], m["tfidf"], m["head0"]], suite(20), tmp_path / "run1"
    )
    assert all(r["error"] is None and not r["cache_hits"] for r in first.values())
    assert embedded_texts(cache_dir) == 40  # the shared encoder stored what it embedded

    # 2. Into a new run directory: 10 more cases (20 more inputs) and two more models.
    specs = [m["keyword"], m["naive"], m["tfidf"], m["head0"], m["head1"], m["three_way"]]
    second, timings["rerun, +20 inputs, +2 models"], _ = bench(specs, suite(30), tmp_path / "run2")
    for name in ("keyword", "naive", "tfidf", "head0"):
        assert second[name]["cache_hits"] == 40 and second[name]["rows"] == 60, second[name]
    assert second["head1"]["cache_hits"] == 0 and second["three_way"]["cache_hits"] == 0
    # One encoder embedded the 20 new inputs once, for both heads; the 40 others came from the cache.
    assert embedded_texts(cache_dir) == 60

    # 3. The same again, in a third directory: nothing to compute, no model loaded.
    third, timings["rerun, nothing new"], _ = bench(specs, suite(30), tmp_path / "run3")
    assert all(r["cache_hits"] == 60 and r["cached"] and r["load_seconds"] is None for r in third.values())

    # 4. A cold run (empty cache) of step 2's suites and models gives the same results.
    monkeypatch.setenv("CHECKRAY_CACHE_URI", str(tmp_path / "cold-cache"))
    cold, timings["cold run, 6 models x 60 inputs"], _ = bench(specs, suite(30), tmp_path / "cold")
    assert all(not r["cache_hits"] for r in cold.values())
    a, b, c = results(tmp_path / "run2"), results(tmp_path / "cold"), results(tmp_path / "run3")
    assert a.num_rows == 6 * 60
    for name in ("keyword", "naive", "tfidf", "three_way"):  # per-row models: identical
        assert of(a, name).equals(of(b, name)) and of(c, name).equals(of(b, name)), name
    # The heads read MiniLM embeddings computed in other batches: equal up to float32 rounding.
    for name in ("head0", "head1"):
        x, y = of(a, name), of(b, name)
        assert x.column("case_id").equals(y.column("case_id")) and x.column("pass").equals(y.column("pass"))
        px, py = (np.array(t.column("probabilities").to_pylist()) for t in (x, y))
        assert px.shape == (60, 2) and np.allclose(px, py, atol=1e-5), name
    print("\nincremental rerun predict-stage seconds:", {k: round(v, 1) for k, v in timings.items()})


@pytest.mark.trusts_code
@pytest.mark.timeout(300)
def test_a_rerun_in_the_same_directory_with_more_cases_reuses_the_cache(ray_session, tmp_path, monkeypatch):
    monkeypatch.setenv("CHECKRAY_CACHE_URI", str(tmp_path / "cache"))
    specs = [ModelSpec(name="keyword", family="callable", path="tests.fakes.models:keyword_sentiment")]
    bench(specs, suite(10), tmp_path / "run")
    again, _, _ = bench(specs, suite(12), tmp_path / "run")  # the cases changed: the part is stale, the cache not
    assert again["keyword"]["cache_hits"] == 20 and again["keyword"]["rows"] == 24
    # The cache off: everything is computed, same results.
    monkeypatch.setenv("CHECKRAY_CACHE_URI", "off")
    off, _, _ = bench(specs, suite(12), tmp_path / "off")
    assert not off["keyword"]["cache_hits"]
    assert results(tmp_path / "run").equals(results(tmp_path / "off"))
