"""COSTELLO through the content cache (engine/cache.py): ``embed_all`` embeds only what the
cache lacks for each model (a warm call starts no actor and equals the cold one); a
costello run into a new --out embeds nothing and publishes the same tables; the repair
reads its anchors (the original model's embeddings of benign triples) from the cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from checkray.engine.cache import ContentCache
from tests.fakes.cli import run_cli

pytestmark = pytest.mark.ray

WORDS = ["a good film", "a great movie", "fine acting", "a lovely story", "a bad film", "an awful movie"]


def _tiny(tmp_path: Path, extra: list[str] = ()) -> Path:
    from tests.fakes.tiny_hf import build_tiny_bert

    return build_tiny_bert(tmp_path / "bert", WORDS + list(extra) + ["he is she great fine poor dull"])


def _record_actor_starts(monkeypatch) -> list[dict]:
    """The keyword arguments of each actor pool ``map_with_actors`` starts from now on."""
    import checkray.actors.pool

    started: list[dict] = []
    real = checkray.actors.pool.map_with_actors
    monkeypatch.setattr(
        checkray.actors.pool, "map_with_actors", lambda *a, **kw: started.append(a[2]) or real(*a, **kw)
    )
    return started


def _cache_rows(cache_dir: Path) -> int:
    cache = ContentCache(str(cache_dir))
    return sum(pq.read_metadata(s.path).num_rows for s in cache.shards() if s.kind == "embeddings")


@pytest.mark.timeout(600)
def test_embed_all_embeds_only_what_the_cache_lacks(ray_session, tmp_path, monkeypatch):
    """Also: mean and CLS pooling of one encoder come from one actor (one forward pass)
    and equal separate runs of each."""
    import checkray.actors.pool
    from checkray.actors.costello.embedders import contrast_identity, embed_all, embedder_class
    from checkray.engine.costello.config import EmbedderSpec

    model = _tiny(tmp_path)
    specs = [
        EmbedderSpec(name="mean", model=str(model), pooling="mean"),
        EmbedderSpec(name="cls", model=str(model), pooling="cls"),
    ]
    # Pooling (and max length) change the vectors: two spaces; the name is only a label.
    assert contrast_identity(specs[0]) != contrast_identity(specs[1])
    assert contrast_identity(specs[0]) == contrast_identity(specs[0].model_copy(update={"name": "other"}))
    cache = ContentCache(str(tmp_path / "cache"))
    texts = WORDS + [WORDS[0]]  # a duplicate is embedded once
    more = ["a dull story", *WORDS, "poor acting"]
    # The reference: each pooling alone, no cache, over every text this test embeds, by the
    # encoder an actor runs, here in the test's process (two actor starts fewer).
    alone = {s.name: np.asarray(embedder_class(s)(s).encode(more)) for s in specs}
    assert not np.allclose(alone["mean"], alone["cls"])  # two poolings, two spaces

    stats: dict[str, int] = {}
    started = _record_actor_starts(monkeypatch)
    cold = embed_all(texts, specs, cache=cache, stats=stats)
    assert [s["poolings"] for s in started] == [["cls", "mean"]]  # one actor, one forward pass for both
    assert stats == {"mean": 6, "cls": 6}
    for name in ("mean", "cls"):
        assert cold[name].shape == (7, 32) and np.allclose(cold[name][:6], alone[name][1:7], atol=1e-6)
        assert np.array_equal(cold[name][0], cold[name][6])
    monkeypatch.undo()

    # Warm: nothing is embedded, no actor starts, the vectors are the cold run's.
    def no_actor(*args, **kwargs):
        raise AssertionError("an encoder was started although the cache holds every text")

    monkeypatch.setattr(checkray.actors.pool, "map_with_actors", no_actor)
    warm = embed_all(texts[::-1], specs, cache=cache, stats=stats)
    assert stats == {"mean": 0, "cls": 0}
    for name in ("mean", "cls"):
        assert np.array_equal(warm[name], cold[name][::-1])
    monkeypatch.undo()

    # Two new texts among known ones: only those two are embedded, per model.
    mixed = embed_all(more, specs, cache=cache, stats=stats)
    assert stats == {"mean": 2, "cls": 2}
    for name in ("mean", "cls"):
        assert np.array_equal(mixed[name][1:7], cold[name][:6])
        assert np.allclose(mixed[name], alone[name], atol=1e-6)
    assert _cache_rows(tmp_path / "cache") == 2 * 8


@pytest.mark.timeout(600)
def test_a_costello_rerun_into_a_new_out_embeds_nothing_and_repair_reads_its_anchors(
    ray_session, tmp_path, monkeypatch, capsys
):
    import pyarrow as pa
    import pyarrow.csv as pcsv

    from checkray.engine.arrays import column_to_numpy

    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("CHECKRAY_CACHE_URI", str(cache_dir))
    good = ["a good film", "a great movie", "fine acting", "a lovely story", "good fun", "great music"]
    bad = ["a bad film", "an awful movie", "poor acting", "a dull story", "bad fun", "awful music"]
    texts = [t for pair in zip(good, bad) for t in pair] * 2
    corpus = tmp_path / "c.csv"
    pcsv.write_csv(pa.table({"text": texts, "label": ["positive", "negative"] * (len(texts) // 2)}), corpus)
    released = tmp_path / "paper_triples.json"
    released.write_text(
        json.dumps(
            {
                "SenWordFuzz": [
                    ["a good film", "a great film", "a bad film"],
                    ["fine acting", "good acting", "poor acting"],
                    ["a lovely story", "a fine story", "a dull story"],
                    ["good fun", "great fun", "bad fun"],
                ],
                "synon_contr": [["great music", "good music", "awful music"]],
            }
        )
    )
    model = _tiny(tmp_path, texts)
    embedders = tmp_path / "emb.yaml"
    embedders.write_text(f"embedders:\n  - {{name: tiny, model: {model}, pooling: mean}}\n")
    config = tmp_path / "c.yaml"
    config.write_text("costello:\n  classifiers: 5\n  classifier_train: 24\n  classifier_max_iter: 30\n")

    def costello(out: Path) -> None:
        args = ["--corpus", str(corpus), "--embedders", str(embedders), "--config", str(config)]
        code = run_cli("costello", *args, "--triples", str(released), "--out", str(out))
        assert code == 0, capsys.readouterr()

    costello(tmp_path / "first")
    stored = _cache_rows(cache_dir)
    embedded = pq.read_table(tmp_path / "first" / "stages" / "embed" / "texts.parquet").num_rows
    assert stored == embedded > 0  # every text the stage embeds, once
    costello(tmp_path / "second")  # a new --out: the embed stage runs and reads everything from the cache
    assert _cache_rows(cache_dir) == stored
    for name in ("violations.parquet", "thresholds.parquet", "classifiers.parquet", "triples.parquet"):
        assert pq.read_table(tmp_path / "first" / name).equals(pq.read_table(tmp_path / "second" / name)), name

    # The repair's anchors (the original model on the benign triples) come from the cache.
    from checkray.engine.cache import CacheConfig
    from checkray.engine.costello.config import RepairConfig
    from checkray.engine.stages import RunDir
    from checkray.jobs.config import load_config
    from checkray.jobs.costello.repair import cached_anchors, read_repair_inputs

    cfg = load_config(None, {"repair.threshold": "zero"})
    inputs = read_repair_inputs(RunDir(str(tmp_path / "first")), cfg.section(RepairConfig), "tiny")
    anchors = cached_anchors(cfg.section(CacheConfig), inputs.spec, inputs.benign)
    benign = {t for triple in inputs.benign for t in triple}
    assert benign and set(anchors) == benign
    stage = tmp_path / "first" / "stages" / "embed"
    vectors = column_to_numpy(pq.read_table(stage / "emb-tiny.parquet").column("embedding"))
    by_text = dict(zip(pq.read_table(stage / "texts.parquet").column("text").to_pylist(), vectors))
    assert all(np.array_equal(anchors[t], by_text[t]) for t in benign)


def test_pooling_variants_of_one_encoder_share_a_group():
    from checkray.actors.costello.embedders import encoder_groups
    from checkray.engine.costello.config import EmbedderSpec

    def spec(name, model="m", pooling="mean", **kw):
        return EmbedderSpec(name=name, model=model, pooling=pooling, **kw)

    specs = [
        spec("m_mean"),
        spec("other_cls", model="o", pooling="cls"),
        spec("m_cls", pooling="cls"),
        spec("m_model", pooling="model"),  # the model's own pooling: its own pass
        spec("m_mean_short", max_length=32),  # other max length, other vectors
        spec("m_mean_again"),  # a second mean of the same encoder: a second group
        EmbedderSpec(name="vectors", kind="spacy", model="builtin:md"),
    ]
    groups = [[s.name for s in g] for g in encoder_groups(specs)]
    assert groups == [["m_cls", "m_mean"], ["other_cls"], ["m_model"], ["m_mean_short"], ["m_mean_again"], ["vectors"]]


@pytest.mark.timeout(600)
def test_transformers_share_the_cpus_and_spacy_vectors_follow_with_all_of_them(ray_session, tmp_path, monkeypatch):
    import ray

    from checkray.actors.costello.embedders import embed_all
    from checkray.engine.costello.config import EmbedderSpec

    model = _tiny(tmp_path)
    specs = [
        EmbedderSpec(name="vectors", kind="spacy", model="builtin:md"),
        EmbedderSpec(name="mean", model=str(model), pooling="mean"),
        EmbedderSpec(name="short", model=str(model), pooling="mean", max_length=16),
    ]
    from checkray.actors.embed_cache import IN_DRIVER_ENV

    monkeypatch.setenv(IN_DRIVER_ENV, "0")  # the actor pools, whatever the size of the work
    starts = _record_actor_starts(monkeypatch)
    out = embed_all(WORDS, specs)
    started = [(s["spec"].name, s["threads"]) for s in starts]
    cpus = int(ray.cluster_resources()["CPU"])
    assert sorted(started[:2]) == [("mean", max(1, cpus // 2)), ("short", max(1, cpus // 2))]
    assert started[2] == ("vectors", cpus)  # after the transformers, every thread
    assert out["vectors"].shape == (len(WORDS), 300) and out["mean"].shape == (len(WORDS), 32)

    # Small work in the driver (the default below runtime.embed_in_driver_below): one encoder
    # after another in the specs' order, each with every CPU of the node, and the same vectors.
    monkeypatch.setenv(IN_DRIVER_ENV, "100000")
    starts.clear()
    here = embed_all(WORDS, specs)
    assert [(s["spec"].name, s["threads"]) for s in starts] == [(spec.name, cpus) for spec in specs]
    for name in out:
        np.testing.assert_allclose(here[name], out[name], atol=1e-5)
