"""Embeddings through the content cache (actors/embed_cache.py): the packaged MiniLM on a
few dozen sentences. A cold call equals plain ``SentenceTransformer.encode``; a warm one
encodes only what the cache lacks and starts no actor when it lacks nothing; a corrupt
shard is recomputed; the topics job into a new --out and the zoo's embed stage read the
corpus embeddings a topics run stored, and give the same results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from checkray.engine.cache import ContentCache

pytestmark = pytest.mark.ray

TEXTS = [
    f"the {w} film number {i} was {adj}"
    for i, (w, adj) in enumerate(zip(["short", "long"] * 15, ["fine", "dull", "great"] * 10))
]


def shard_rows(cache_dir: Path) -> list[int]:
    return sorted(pq.read_metadata(p).num_rows for p in cache_dir.rglob("*.parquet"))


@pytest.mark.timeout(600)
def test_embed_texts_encodes_only_what_the_cache_lacks(ray_session, minilm_path, tmp_path):
    from checkray.actors.embed_cache import EmbedPool, EmbedStats, embed_texts, plan_embedders, sentence_model
    from checkray.actors.embedder import load_sentence_transformer

    cache = ContentCache(str(tmp_path / "cache"))
    model = sentence_model("builtin:minilm", normalize=True)
    plan = plan_embedders([2.0])
    assert (plan.pool_size, plan.threads, plan.num_cpus) == (2, 1, 1.0)  # two processes of one thread on 2 cores

    cold_stats = EmbedStats()
    cold = embed_texts(TEXTS, model, cache=cache, plan=plan, block_rows=8, stats=cold_stats)
    plain = load_sentence_transformer(minilm_path, device="cpu").encode(TEXTS, normalize_embeddings=True)
    assert cold.shape == (30, 384) and np.allclose(cold, plain, atol=1e-6)
    assert (cold_stats.hits, cold_stats.computed) == (0, 30)

    # Five new sentences (and a duplicate) among known ones: five are encoded, once.
    more = (
        TEXTS[:10]
        + ["a brand new sentence 1", "a brand new sentence 2"] * 2
        + TEXTS[10:]
        + [f"new {i}" for i in range(3)]
    )
    stats = EmbedStats()
    warm = embed_texts(more, model, cache=cache, plan=plan, stats=stats)
    assert (stats.hits, stats.computed) == (30, 5)
    assert np.array_equal(warm[:10], cold[:10]) and np.array_equal(warm[14:34], cold[10:])
    assert np.array_equal(warm[10], warm[12])
    assert shard_rows(tmp_path / "cache") == [5, 30]

    # Everything cached: no actor is started at all.
    pool = EmbedPool(model, plan)
    again = embed_texts(more, model, cache=cache, pool=pool)
    assert pool.actors == [] and np.array_equal(again, warm)

    # Another normalisation is another model: nothing shared.
    stats = EmbedStats()
    embed_texts(TEXTS[:4], sentence_model("builtin:minilm", normalize=False), cache=cache, plan=plan, stats=stats)
    assert stats.computed == 4

    # A truncated shard: ignored, its rows recomputed (and equal), the cache whole again.
    (big,) = [p for p in (tmp_path / "cache").rglob("*.parquet") if pq.read_metadata(p).num_rows == 30]
    big.write_bytes(big.read_bytes()[:300])
    stats = EmbedStats()
    redone = embed_texts(TEXTS, model, cache=cache, plan=plan, stats=stats)
    assert stats.computed == 30 and np.allclose(redone, cold, atol=1e-6) and not big.exists()


def _embeddings(run: Path):
    table = pads.dataset(run / "stages" / "embed" / "embeddings", format="parquet").to_table().sort_by("pos")
    return table


@pytest.mark.timeout(900)
def test_topics_into_a_new_out_and_the_zoo_read_the_stored_corpus_embeddings(ray_session, tmp_path, monkeypatch):
    from checkray.engine.arrays import column_to_numpy
    from checkray.engine.cache import CacheConfig
    from checkray.engine.stages import RunDir, StageRunner
    from checkray.jobs.config import load_config
    from checkray.jobs.topics.job import run_topics
    from checkray.jobs.zoo.job import embed_stage, split_stage

    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("CHECKRAY_CACHE_URI", str(cache_dir))
    cfg = load_config(None, {"corpus.sample": 80, "topics.clusterer.n_clusters": 2, "topics.representatives.top_k": 3})
    run_topics(cfg, str(tmp_path / "first"))
    assert shard_rows(cache_dir) == [80]
    run_topics(cfg, str(tmp_path / "second"))  # a new --out: the embed stage runs, reading the cache
    assert shard_rows(cache_dir) == [80]  # nothing was embedded again
    a, b = _embeddings(tmp_path / "first"), _embeddings(tmp_path / "second")
    assert a.equals(b)
    for name in ("assignments.parquet", "clusters.parquet", "representatives.parquet"):
        assert pq.read_table(tmp_path / "first" / name).equals(pq.read_table(tmp_path / "second" / name)), name

    # The zoo embeds the same corpus with the same encoder: every sentence from the cache.
    runner = StageRunner(RunDir(str(tmp_path / "zoo")))
    zoo = cfg.section("zoo")
    runner.run_stage(split_stage(cfg, zoo))
    runner.run_stage(embed_stage(zoo, "builtin:minilm", cfg.section(CacheConfig)))
    assert shard_rows(cache_dir) == [80]
    split = runner.output("split", columns=["id", "pos"])
    zoo_vectors = pads.dataset(tmp_path / "zoo" / "stages" / "embed-minilm" / "embeddings").to_table().sort_by("pos")
    by_id = dict(zip(a.column("id").to_pylist(), column_to_numpy(a.column("embedding"))))
    expected = np.stack([by_id[i] for i in split.column("id").to_pylist()])
    assert np.array_equal(column_to_numpy(zoo_vectors.column("embedding")), expected)

    # With the cache off the stage computes the same vectors.
    monkeypatch.setenv("CHECKRAY_CACHE_URI", "off")
    run_topics(cfg, str(tmp_path / "uncached"))
    c = _embeddings(tmp_path / "uncached")
    assert np.allclose(column_to_numpy(c.column("embedding")), column_to_numpy(a.column("embedding")), atol=1e-6)


def test_small_work_on_a_one_node_cpu_ray_is_embedded_in_the_driver():
    from checkray.actors.embed_cache import embeds_in_driver, plan_embedders

    cpu = plan_embedders([2.0])
    assert embeds_in_driver(cpu, 8_530, nodes=1, driver_cpus=2.0, below=20_000)
    assert not embeds_in_driver(cpu, 20_001, nodes=1, driver_cpus=2.0, below=20_000)  # big: actors
    assert not embeds_in_driver(cpu, 0, nodes=1, driver_cpus=2.0, below=20_000)  # nothing to do
    assert not embeds_in_driver(cpu, 100, nodes=2, driver_cpus=2.0, below=20_000)  # a cluster: its actors
    assert not embeds_in_driver(cpu, 100, nodes=1, driver_cpus=0.0, below=20_000)  # a head with no CPU
    assert not embeds_in_driver(cpu, 100, nodes=1, driver_cpus=2.0, below=0)  # switched off
    gpu = plan_embedders([2.0], gpus=1.0)
    assert not embeds_in_driver(gpu, 100, nodes=1, driver_cpus=2.0, below=20_000)  # the GPU's actors


@pytest.mark.timeout(600)
def test_the_driver_encodes_what_the_actors_would(ray_session, tmp_path, monkeypatch):
    import ray

    from checkray.actors.embed_cache import (
        IN_DRIVER_ENV,
        EmbedPool,
        EmbedWorker,
        cluster_plan,
        embed_texts,
        sentence_model,
    )

    model = sentence_model("builtin:minilm", normalize=True)
    monkeypatch.setenv(IN_DRIVER_ENV, "0")
    actors = cluster_plan(texts=len(TEXTS))
    assert not actors.in_driver
    monkeypatch.setenv(IN_DRIVER_ENV, "100")
    assert cluster_plan(texts=101).in_driver is False and cluster_plan(pool_size=2, texts=10).in_driver is False
    here = cluster_plan(texts=len(TEXTS))
    assert here.in_driver and here.threads == int(ray.cluster_resources()["CPU"])
    pool = EmbedPool(model, here)
    with pool:
        got = embed_texts(TEXTS, model, pool=pool, block_rows=8)
        assert [type(a) for a in pool.actors] == [EmbedWorker]  # no Ray actor was started
    want = embed_texts(TEXTS, model, plan=actors, block_rows=8)
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.timeout(600)
def test_map_with_actors_on_a_driver_plan_maps_here_with_the_same_rows(ray_session):
    import pyarrow as pa

    from checkray.actors.embedder import EmbeddingActor
    from checkray.actors.pool import map_with_actors
    from checkray.engine.runtime import ActorPlan

    table = pa.table({"id": list(range(len(TEXTS))), "text": TEXTS})
    kwargs = dict(model="builtin:minilm", encode_batch_size=8, threads=1)
    actors = map_with_actors(table, EmbeddingActor, kwargs, ActorPlan("cpu", 2, 1.0, 0.0, 1), batch_size=7)
    here = map_with_actors(
        table, EmbeddingActor, kwargs, ActorPlan("cpu", 1, 2.0, 0.0, 2, in_driver=True), batch_size=7
    )
    assert here.column("id").to_pylist() == actors.column("id").to_pylist() == list(range(len(TEXTS)))
    a, b = (np.stack(t.column("embedding").to_numpy(zero_copy_only=False)) for t in (actors, here))
    np.testing.assert_allclose(a, b, atol=1e-6)
    empty = map_with_actors(
        table.slice(0, 0),
        EmbeddingActor,
        kwargs,
        ActorPlan("cpu", 1, 2.0, 0.0, 2, in_driver=True),
        batch_size=7,
        schema=here.schema,
    )
    assert empty.num_rows == 0
