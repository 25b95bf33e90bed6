"""Small benchmarks predict in the driver: when, and with the hosts' own results."""

from __future__ import annotations

import joblib
import numpy as np
import pytest

from checkray.actors.benchmark.scheduler import HostPlan, InProcessCalls, PredictionScheduler, PredictOptions
from checkray.engine.benchmark.families import IN_PROCESS_MAX_BYTES, runs_in_process
from checkray.engine.benchmark.registry import ModelSpec
from checkray.jobs.benchmark.config import BenchmarkConfig
from checkray.jobs.benchmark.stages import predicts_in_process
from tests.benchmark.test_benchmark import basics_suite

CPU = {"CPU": 2.0}


def _tfidf(tmp_path) -> ModelSpec:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    texts = ["a good film", "a great movie", "fun", "a bad film", "awful acting", "boring"]
    labels = ["positive"] * 3 + ["negative"] * 3
    joblib.dump(make_pipeline(TfidfVectorizer(), LogisticRegression()).fit(texts, labels), tmp_path / "tfidf.joblib")
    return ModelSpec(name="tfidf", family="sklearn", path=str(tmp_path / "tfidf.joblib"))


VADER = ModelSpec(name="vader", family="vader")


def test_small_work_of_builtin_families_runs_in_process(tmp_path):
    tfidf = _tfidf(tmp_path)
    bench = BenchmarkConfig(in_process_below=100)
    assert predicts_in_process([tfidf, VADER], {"tfidf": 50, "vader": 50}, bench, CPU, 2.0) == 100
    # more work than the limit, none at all, a GPU, or the limit turned off: hosts
    assert predicts_in_process([tfidf, VADER], {"tfidf": 51, "vader": 50}, bench, CPU, 2.0) == 0
    assert predicts_in_process([tfidf, VADER], {"tfidf": 0, "vader": 0}, bench, CPU, 2.0) == 0
    assert predicts_in_process([tfidf, VADER], {"tfidf": 5, "vader": 5}, bench, {"CPU": 8.0, "GPU": 1.0}, 2.0) == 0
    on_gpu = BenchmarkConfig(in_process_below=100, backend="gpu")
    assert predicts_in_process([tfidf, VADER], {"tfidf": 5, "vader": 5}, on_gpu, CPU, 2.0) == 0
    # the driver on a cluster's head, which offers no CPU (cluster.yaml): the workers do it
    assert predicts_in_process([tfidf, VADER], {"tfidf": 5, "vader": 5}, bench, CPU, 0.0) == 0
    off = BenchmarkConfig(in_process_below=0)
    assert predicts_in_process([tfidf, VADER], {"tfidf": 5, "vader": 5}, off, CPU, 2.0) == 0
    # one model that needs a process of its own keeps every model in hosts
    user_code = ModelSpec(name="mine", family="callable", path="tests.fakes.models:keyword_sentiment")
    assert predicts_in_process([VADER, user_code], {"vader": 5, "mine": 5}, bench, CPU, 2.0) == 0


def test_user_code_big_weights_and_unknown_sizes_need_a_process(tmp_path):
    assert runs_in_process(VADER)
    assert runs_in_process(ModelSpec(name="h", family="st_head", path=None, options={"encoder": "builtin:minilm"}))
    assert not runs_in_process(ModelSpec(name="c", family="callable", path="tests.fakes.models:keyword_sentiment"))
    assert not runs_in_process(ModelSpec(name="z", family="llm_zero_shot", path="builtin:qwen2.5-0.5b-instruct"))
    assert not runs_in_process(ModelSpec(name="v", family="vader", options={"heavy": True}))
    big = tmp_path / "big"
    big.mkdir()
    with open(big / "model.safetensors", "wb") as f:  # sparse: no disk used
        f.truncate(IN_PROCESS_MAX_BYTES + 1)
    assert not runs_in_process(ModelSpec(name="big", family="hf", path=str(big)))
    (big / "model.safetensors").unlink()
    (big / "config.json").write_text("{}")
    assert runs_in_process(ModelSpec(name="small", family="hf", path=str(big)))
    # a hub id: its size is not on this disk
    assert not runs_in_process(ModelSpec(name="hub", family="hf", path="someone/some-model"))
    head = ModelSpec(name="h", family="st_head", path=None, options={"encoder": "someone/some-encoder"})
    assert not runs_in_process(head)


@pytest.mark.trusts_code  # a joblib model is a pickle
def test_in_process_hosts_answer_and_a_model_that_fails_to_load_fails_alone(tmp_path):
    tfidf = _tfidf(tmp_path)
    missing = ModelSpec(name="missing", family="sklearn", path=str(tmp_path / "absent.joblib"))
    texts = ["a good film", "awful acting", "boring", "fun"]
    runs = PredictionScheduler(
        [HostPlan([tfidf, missing, VADER], [0, 1, 2, 3])],
        texts,
        None,
        PredictOptions(batch_size=3, in_process=True),
        pool_size=1,
        actors=InProcessCalls(),
    ).run()
    assert runs["missing"].error and "absent.joblib" in runs["missing"].error
    assert runs["tfidf"].error is None and runs["vader"].error is None
    probs = runs["tfidf"].probs
    assert probs.shape == (4, 2) and np.allclose(probs.sum(axis=1), 1)
    assert list(probs.argmax(axis=1)) == [1, 0, 0, 1]  # negative, positive order
    assert runs["vader"].probs[1].argmax() == 0  # "awful acting" is negative to VADER too


@pytest.mark.trusts_code
@pytest.mark.ray
@pytest.mark.timeout(300)
def test_in_process_and_hosts_give_the_same_results(ray_session, tmp_path, minilm_path, monkeypatch):
    """The demo's kinds of model (TF-IDF, heads on a shared encoder, a lexicon) on one
    suite: predicted in the driver, then in host processes with the shared encoder actor."""
    from sklearn.linear_model import LogisticRegression

    from checkray.engine.runtime import driver_node_cpus
    from checkray.jobs.benchmark.job import run_benchmark

    assert driver_node_cpus() > 0  # a local Ray: this process's node is the one with the CPUs
    started: list[list[str]] = []  # the hosts started in this process
    start_host = InProcessCalls.start_host
    monkeypatch.setattr(
        InProcessCalls,
        "start_host",
        lambda self, host: started.append([m.name for m in host.members]) or start_host(self, host),
    )

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 384)), np.array(["negative", "positive"] * 20)
    joblib.dump(LogisticRegression(C=1.0).fit(X, y), tmp_path / "head.joblib")
    head = ModelSpec(
        name="head", family="st_head", path=str(tmp_path / "head.joblib"), options={"encoder": minilm_path}
    )
    specs = [_tfidf(tmp_path), head, VADER]
    cases = basics_suite()
    local, _ = run_benchmark(cases, specs, BenchmarkConfig(batch_size=8))
    assert sorted(m for host in started for m in host) == ["head", "tfidf", "vader"]
    started.clear()
    hosts, _ = run_benchmark(cases, specs, BenchmarkConfig(batch_size=8, in_process_below=0))
    assert started == []
    order = [("model", "ascending"), ("case_id", "ascending")]
    local, hosts = local.sort_by(order), hosts.sort_by(order)
    assert local.num_rows == hosts.num_rows == 3 * cases.num_rows
    assert local.column("error").null_count == local.num_rows
    for column in ("predicted", "pass"):
        assert local.column(column).to_pylist() == hosts.column(column).to_pylist()
    assert np.allclose(
        np.array(local.column("probabilities").to_pylist()),
        np.array(hosts.column("probabilities").to_pylist()),
        atol=1e-5,
    )


def test_in_process_encoding_reads_the_cache_and_encodes_only_the_rest(tmp_path, minilm_path, monkeypatch):
    from checkray.actors.benchmark import shared_encoder
    from checkray.engine.cache import ContentCache

    texts = ["a good film", "awful acting", "boring", "fun", "a great movie"]
    head = ModelSpec(name="h", family="st_head", path=None, options={"encoder": minilm_path})
    rows = {"h": [0, 1, 2, 3, 4]}
    cold = shared_encoder.local_feeds([head], rows, texts, None, batch_size=2)["h"]
    assert [len(b) for b in cold] == [2, 2, 1]
    cache = ContentCache(str(tmp_path / "cache"))
    shared_encoder.local_feeds([head], {"h": [0, 2]}, texts, None, batch_size=2, cache=cache)
    encoded: list[list[str]] = []
    embed = shared_encoder.SharedEncoder.embed
    monkeypatch.setattr(shared_encoder.SharedEncoder, "embed", lambda self, t: encoded.append(t) or embed(self, t))
    warm = shared_encoder.local_feeds([head], rows, texts, None, batch_size=2, cache=cache)["h"]
    assert encoded == [["awful acting", "fun", "a great movie"]]  # rows 0 and 2 came from the cache
    assert np.allclose(np.vstack(warm), np.vstack(cold), atol=1e-5)
