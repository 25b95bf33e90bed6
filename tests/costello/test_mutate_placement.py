"""Where COSTELLO's mutation operators run: a few seeds on a one-node CPU Ray in the
driver (no actor pool to start), many on the pool; the variants are the same either way."""

from __future__ import annotations

import pyarrow as pa
import pytest

from checkray.actors.costello import mutators
from checkray.engine.costello.config import MutationSettings

SEEDS = pa.table(
    {
        "id": ["a", "b", "c"],
        "text": ["the film is good and the cast is happy .", "a bad , dull movie .", "he is a kind actor ."],
        "text_pair": [None, None, None],
    }
)


@pytest.mark.ray
def test_few_seeds_mutate_in_the_driver_like_the_pool(ray_session, monkeypatch, pool_placements):
    settings = MutationSettings(context_checks=False)
    here = mutators.mutate_corpus(SEEDS, settings, batch_size=2)
    monkeypatch.setattr(mutators, "MUTATE_IN_DRIVER_BELOW", 2)  # 3 seeds: over the limit
    pooled = mutators.mutate_corpus(SEEDS, settings, batch_size=2)
    assert pool_placements == [True, False]
    assert here.num_rows > 0 and here.equals(pooled)
    # runtime.embed_in_driver_below: 0 keeps every mapping on the pool
    monkeypatch.setattr(mutators, "MUTATE_IN_DRIVER_BELOW", 1_000)
    monkeypatch.setenv("CHECKRAY_EMBED_IN_DRIVER_BELOW", "0")
    assert mutators.mutate_corpus(SEEDS, settings, batch_size=2).equals(here)
    assert pool_placements[-1] is False


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_the_repair_trains_in_the_driver_like_in_an_actor(ray_session, monkeypatch, tmp_path):
    """On a one-node CPU Ray the repair runs here (no actor to start); an actor, as on a
    cluster, trains the same model to the same losses."""
    import ray

    from checkray.actors.costello import repair
    from checkray.engine.costello.config import EmbedderSpec, RepairSettings
    from tests.fakes.tiny_hf import build_tiny_bert

    violated = [
        ("the film is good", "the film is bad", "the film is fine"),
        ("a great movie", "an awful movie", "a fine movie"),
    ]
    benign = [
        ("the cast is fine", "the cast is good", "the cast is awful"),
        ("a dull story", "a boring story", "a lively story"),
    ]
    words = [w for tr in violated + benign for s in tr for w in s.split()]
    spec = EmbedderSpec(name="tiny", model=str(build_tiny_bert(tmp_path / "tiny", words, seed=0)), pooling="mean")
    settings = RepairSettings(epochs=1, learning_rate=0.05, batch_size=4)
    actors = []
    real_remote = ray.remote
    monkeypatch.setattr(ray, "remote", lambda cls: actors.append(cls) or real_remote(cls))
    here = repair.repair_in_actor(spec, violated, benign, settings, str(tmp_path / "here"))
    assert actors == []  # no actor started
    monkeypatch.setenv("CHECKRAY_EMBED_IN_DRIVER_BELOW", "0")
    there = repair.repair_in_actor(spec, violated, benign, settings, str(tmp_path / "there"))
    assert actors == [repair.RepairActor]
    assert here.history == there.history
    assert (here.loss_before, here.loss_after) == (there.loss_before, there.loss_after)
