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
