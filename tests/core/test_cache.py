"""The content cache (engine/cache.py): keys, shards, lookups, corrupt shards, concurrent
writers, pruning, and a cache on an object store. No Ray, no model: values are made up."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from checkray.engine.cache import (
    COMPACT_AT,
    ENV_URI,
    CacheConfig,
    ContentCache,
    cache_uri,
    open_cache,
    space_key,
    text_digests,
)
from checkray.engine.cache_admin import cache_info, prune

IDENTITY = {"encoder": "fake", "model": {"path": "m", "digest": "abc"}, "normalize": True}


def values_for(texts: list[str], width: int = 4) -> np.ndarray:
    """A deterministic vector per text (so any process can check what it reads back)."""
    digests = text_digests(texts).astype(np.float32)
    return digests[:, :width] / 255.0


def shards(root: Path) -> list[Path]:
    return sorted(root.rglob("*.parquet"))


def test_keys_are_content_digests():
    a, b = text_digests(["good film", "bad film"]), text_digests(["good film"])
    assert a.shape == (2, 16) and (a[0] == b[0]).all() and not (a[0] == a[1]).all()
    # A pair is part of the input; an empty pair is not the same input as none.
    single, paired, empty = text_digests(["q"]), text_digests(["q"], ["a"]), text_digests(["q"], [""])
    assert not (single == paired).all() and not (single == empty).all() and not (paired == empty).all()
    assert space_key("embeddings", IDENTITY) == space_key("embeddings", dict(IDENTITY))
    assert space_key("embeddings", IDENTITY) != space_key("embeddings", {**IDENTITY, "normalize": False})
    assert space_key("embeddings", IDENTITY) != space_key("predictions", IDENTITY)


def test_put_then_lookup_returns_exactly_what_was_stored(tmp_path):
    cache = ContentCache(str(tmp_path))
    space = cache.space("embeddings", IDENTITY)
    texts = [f"sentence {i}" for i in range(50)]
    assert not space.has_shards()
    space.put(text_digests(texts + texts[:5]), np.concatenate([values_for(texts), values_for(texts[:5])]))
    (shard,) = shards(tmp_path)
    assert pq.read_metadata(shard).num_rows == 50  # duplicates stored once
    query = ["sentence 3", "unknown", "sentence 49", "sentence 3"]
    ok, values, meta = space.get(text_digests(query))
    assert ok.tolist() == [True, False, True, True] and meta == {}
    assert np.array_equal(values[[0, 2, 3]], values_for(["sentence 3", "sentence 49", "sentence 3"]))
    # Another identity (another normalisation) sees nothing.
    other = cache.space("embeddings", {**IDENTITY, "normalize": False})
    assert not other.get(text_digests(query))[0].any()


def test_values_spread_over_shards_are_found_and_read_by_row_group(tmp_path, monkeypatch):
    import checkray.engine.cache as cache_mod

    monkeypatch.setattr(cache_mod, "ROW_GROUP_ROWS", 7)
    space = ContentCache(str(tmp_path)).space("predictions", {"model": "x"})
    first, second = [f"a{i}" for i in range(40)], [f"b{i}" for i in range(40)]
    space.put(text_digests(first), values_for(first, 3), meta={"labels": ["neg", "neu", "pos"]})
    space.put(text_digests(second), values_for(second, 3), meta={"labels": ["neg", "neu", "pos"]})
    query = ["b39", "a0", "zz", "a17", "b1"]
    found = space.find(text_digests(query))
    assert found.mask.tolist() == [True, True, False, True, True] and found.meta == {"labels": ["neg", "neu", "pos"]}
    ok, values = found.read([4, 0, 3])
    assert ok.all() and np.array_equal(values, values_for(["b1", "b39", "a17"], 3))


def test_a_truncated_shard_is_ignored_deleted_and_recomputed(tmp_path, caplog):
    cache = ContentCache(str(tmp_path))
    space = cache.space("embeddings", IDENTITY)
    good, bad = [f"kept {i}" for i in range(30)], [f"lost {i}" for i in range(30)]
    space.put(text_digests(good), values_for(good))
    space.put(text_digests(bad), values_for(bad))
    lost = text_digests(["lost 0"])[0].tobytes()
    (victim,) = [p for p in shards(tmp_path) if lost in pq.read_table(p).column("digest").to_pylist()]
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    ok, values, _ = space.get(text_digests(good + bad))
    assert ok[:30].all() and not ok[30:].any()
    assert np.array_equal(values[:30], values_for(good))
    assert not victim.exists() and "unreadable shard" in caplog.text
    # The caller recomputes and puts the rows again: the cache is whole again.
    space.put(text_digests(bad), values_for(bad))
    ok, values, _ = space.get(text_digests(bad))
    assert ok.all() and np.array_equal(values, values_for(bad))


def test_a_foreign_file_and_a_writers_temporary_file_are_not_read(tmp_path):
    cache = ContentCache(str(tmp_path))
    space = cache.space("embeddings", IDENTITY)
    space.put(text_digests(["a"]), values_for(["a"]))
    folder = Path(space.path)
    pq.write_table(pa.table({"digest": [b"x" * 16], "value": [[1.0, 2.0, 3.0, 4.0]]}), folder / "foreign.parquet")
    (folder / "20990101T000000-feed.parquet.tmp-1234abcd").write_bytes(b"half a shard")
    ok, values, _ = space.get(text_digests(["a", "b"]))  # a miss: every shard is looked at
    assert ok.tolist() == [True, False] and np.array_equal(values[:1], values_for(["a"]))
    assert (folder / "foreign.parquet").exists()  # not checkray's: skipped, never deleted


def _writer(root: str, worker: int, rounds: int) -> None:
    space = ContentCache(root).space("embeddings", IDENTITY)
    for r in range(rounds):
        # Overlapping texts: every worker also writes the shared ones.
        texts = [f"shared {i}" for i in range(20)] + [f"w{worker} r{r} {i}" for i in range(30)]
        space.put(text_digests(texts), values_for(texts))
        ok, values, _ = space.get(text_digests(texts[:25]))
        assert ok.all() and np.array_equal(values, values_for(texts[:25]))


def test_concurrent_writers_never_corrupt_the_cache(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 6)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert all(p.exitcode == 0 for p in procs)
    assert len(shards(tmp_path)) == 4 * 6 and not list(tmp_path.rglob("*.tmp-*"))
    expected = [f"shared {i}" for i in range(20)] + [
        f"w{w} r{r} {i}" for w in range(4) for r in range(6) for i in range(30)
    ]
    ok, values, _ = ContentCache(str(tmp_path)).space("embeddings", IDENTITY).get(text_digests(expected))
    assert ok.all() and np.array_equal(values, values_for(expected))


def test_prune_bounds_size_least_recently_used_first_and_by_age(tmp_path):
    cache = ContentCache(str(tmp_path))
    spaces = [cache.space("embeddings", {"model": f"m{i}"}) for i in range(3)]
    for i, space in enumerate(spaces):
        texts = [f"m{i} {j}" for j in range(200)]
        space.put(text_digests(texts), values_for(texts, 64))
    now = time.time()
    for age, space in zip((300, 200, 100), spaces):  # m0 used longest ago
        for path in Path(space.path).glob("*.parquet"):
            os.utime(path, (now - age, now - age))
    # A hit marks m0 as just used: m1 is now the least recently used.
    assert spaces[0].get(text_digests(["m0 1"]))[0].all()
    sizes = {p.parent.name: p.stat().st_size for p in shards(tmp_path)}
    report = prune(cache, max_bytes=sum(sizes.values()) - 1)
    assert report.deleted == 1 and report.freed == sizes[spaces[1].key]
    assert not spaces[1].has_shards() and spaces[0].has_shards() and spaces[2].has_shards()
    # By age, 60 s later: m2 was last used 160 s before, m0 60 s before; the bound is 120 s.
    report = prune(cache, max_age_s=120, now=now + 60)
    assert report.deleted == 1 and spaces[0].has_shards() and not spaces[2].has_shards()
    assert [r["space"] for r in cache_info(cache)] == [spaces[0].key]


def test_prune_merges_small_shards_and_removes_debris(tmp_path):
    cache = ContentCache(str(tmp_path))
    space = cache.space("predictions", {"model": "many runs"})
    texts = [f"case {i}" for i in range(COMPACT_AT * 10)]
    for lo in range(0, len(texts), 10):
        space.put(text_digests(texts[lo : lo + 10]), values_for(texts[lo : lo + 10], 2), meta={"labels": ["a", "b"]})
    debris = Path(space.path) / "x.parquet.tmp-dead0000"
    debris.write_bytes(b"crashed writer")
    old = time.time() - 7200
    os.utime(debris, (old, old))
    report = prune(cache)
    assert report.merged == COMPACT_AT and report.debris == 1 and not debris.exists()
    assert len(list(Path(space.path).glob("*.parquet"))) == 1
    ok, values, meta = space.get(text_digests(texts))
    assert ok.all() and np.array_equal(values, values_for(texts, 2)) and meta == {"labels": ["a", "b"]}
    (row,) = cache_info(cache)
    assert row["rows"] == len(texts) and row["shards"] == 1 and row["kind"] == "predictions"


def test_where_the_cache_is(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_URI, str(tmp_path / "env"))
    assert cache_uri() == str(tmp_path / "env")
    assert cache_uri(CacheConfig(dir=str(tmp_path / "cfg"))) == str(tmp_path / "cfg")
    assert cache_uri(CacheConfig(enabled=False)) is None and open_cache(CacheConfig(enabled=False)) is None
    monkeypatch.setenv(ENV_URI, "off")
    assert open_cache() is None
    monkeypatch.delenv(ENV_URI)
    monkeypatch.setenv("CHECKRAY_CACHE", str(tmp_path / "root"))
    assert cache_uri() == str(tmp_path / "root")


@pytest.fixture(scope="module")
def s3():
    from tests.fakes.s3_server import local_s3

    with local_s3() as store:
        yield store


def test_a_cache_on_an_object_store(s3, monkeypatch):
    for key, value in s3.env.items():
        monkeypatch.setenv(key, value)
    cache = ContentCache(f"s3://{s3.bucket}/cache")
    space = cache.space("embeddings", IDENTITY)
    texts = [f"s3 {i}" for i in range(100)]
    space.put(text_digests(texts), values_for(texts))
    space.put(text_digests(texts[:10] + ["new"]), values_for(texts[:10] + ["new"]))
    ok, values, _ = space.get(text_digests(["new", *texts]))
    assert ok.all() and np.array_equal(values, values_for(["new", *texts]))
    (row,) = cache_info(cache)
    assert row["shards"] == 2 and row["rows"] == 111
    assert prune(cache, max_bytes=0).deleted == 2 and not space.has_shards()


def test_cache_cli_info_and_prune(tmp_path, capsys):
    from tests.fakes.cli import run_cli

    cache = ContentCache(str(tmp_path))
    space = cache.space("embeddings", {"encoder": "sentence-transformers", "model": {"builtin": "minilm"}})
    texts = [f"cli {i}" for i in range(300)]
    space.put(text_digests(texts), values_for(texts, 64))
    assert run_cli("cache", "info", "--dir", str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "300 rows" in out and "minilm" in out and "total: 1 space(s)" in out
    assert run_cli("cache", "prune", "--dir", str(tmp_path), "--max-size", "1KB") == 0
    assert "deleted 1 shard(s)" in capsys.readouterr().out and not space.has_shards()
    assert run_cli("cache", "prune", "--dir", str(tmp_path), "--max-size", "lots") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: --max-size 'lots': not a size")
