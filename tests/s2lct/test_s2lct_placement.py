"""Where S²LCT's parse and expansion maps run: a few rows on a one-node CPU Ray in the
driver (an actor takes seconds to start), many on the pool; the rows are the same."""

from __future__ import annotations

import pyarrow as pa
import pytest

from checkray.actors.s2lct.parser import ParserActor
from checkray.engine.s2lct.config import S2lctConfig
from checkray.jobs.s2lct.stages import ray_map

TEXTS = pa.table({"text": ["the film is good .", "a dull , long movie .", "he plays a kind doctor ."]})


@pytest.mark.ray
def test_few_rows_parse_in_the_driver_like_the_pool(ray_session, monkeypatch, pool_placements):
    s = S2lctConfig(batch_size=2)
    kwargs = dict(pipeline="builtin:sm", parser="spacy-dep2const", keep=("text",))
    here = ray_map(TEXTS, ParserActor, kwargs, s, in_driver_below=10)
    pooled = ray_map(TEXTS, ParserActor, kwargs, s, in_driver_below=2)  # 3 rows: over the limit
    assert pool_placements == [True, False]
    assert here.num_rows == 3 and here.equals(pooled)
    # runtime.embed_in_driver_below: 0 keeps every map on the pool, as for encoders
    monkeypatch.setenv("CHECKRAY_EMBED_IN_DRIVER_BELOW", "0")
    assert ray_map(TEXTS, ParserActor, kwargs, s, in_driver_below=10).equals(here)
    # a pool size set by the user is a pool
    assert ray_map(TEXTS, ParserActor, kwargs, S2lctConfig(batch_size=2, pool_size=1), in_driver_below=10).equals(here)
    assert pool_placements[1:] == [False, False, False]
