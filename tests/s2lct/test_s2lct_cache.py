"""S²LCT's own predictions through the content cache (engine/cache.py), without Ray: the
consistency judge and the minimal-token explanations. A warm run loads no model and
predicts nothing, and reads what the cold run read; new texts alone are predicted; with
the cache off the readings are the same."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from checkray.actors.models import load_model as REAL_LOAD
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import ContentCache

KEYWORD = ModelSpec(name="keyword", family="callable", path="tests.fakes.models:keyword_sentiment")
TEXTS = ["a good film", "a bad film", "the room is small", "not a good film", "a great and fun story"]


class Counting:
    """Wraps a loaded model: counts loads and the texts it predicts."""

    def __init__(self, spec: ModelSpec):
        self.inner, self.predicted = REAL_LOAD(spec), []
        self.labels = self.inner.labels

    def predict_proba(self, texts, pairs=None):
        self.predicted += list(texts)
        return self.inner.predict_proba(texts, pairs)


@pytest.fixture
def counting(monkeypatch):

    made: list[Counting] = []

    def load(spec):
        made.append(Counting(spec))
        return made[-1]

    import checkray.actors.models

    monkeypatch.setattr(checkray.actors.models, "load_model", load)
    return made


@pytest.mark.trusts_code
def test_the_judge_reads_only_what_no_run_had_it_read(tmp_path, counting):
    from checkray.jobs.s2lct.consistency import judge_reader

    cache = ContentCache(str(tmp_path / "cache"))
    read, predictor = judge_reader(KEYWORD, "neutral", cache)
    cold = read(TEXTS + TEXTS[:2])
    predictor.flush()
    assert len(counting) == 1 and sorted(counting[0].predicted) == sorted(TEXTS)  # each text once

    read, predictor = judge_reader(KEYWORD, "neutral", cache)  # another run: everything cached
    assert read(TEXTS + TEXTS[:2]) == cold
    predictor.flush()
    assert len(counting) == 1 and predictor.hits == len(TEXTS) and predictor.computed == 0

    read, predictor = judge_reader(KEYWORD, "neutral", cache)
    more = ["an awful film", *TEXTS]
    warm = read(more)
    predictor.flush()
    assert len(counting) == 2 and counting[1].predicted == ["an awful film"]
    uncached, _ = judge_reader(KEYWORD, "neutral", None)
    assert warm == uncached(more) and warm[1:] == cold[: len(TEXTS)]
    assert warm[0]["label"] == "negative" and cold[2]["neutral"]  # real readings: the band rule


@pytest.mark.trusts_code
def test_explanations_predict_nothing_on_a_rerun(tmp_path, counting):
    from checkray.engine.s2lct.config import ExplainConfig
    from checkray.jobs.s2lct.evaluate import explain_failures

    e = ExplainConfig(failures=2)
    suite = pa.table(
        {
            "case_id": ["a", "b"],
            "meta": ['{"kind": "seed"}', '{"kind": "seed"}'],
        }
    )
    results = pa.Table.from_pylist(
        [
            {"model": "keyword", "case_id": "a", "capability": "LC2", "text": "a truly bad and boring film",
             "expected_label": "positive", "predicted": "negative", "pass": False},
            {"model": "keyword", "case_id": "b", "capability": "LC5", "text": "a good fun film",
             "expected_label": "negative", "predicted": "positive", "pass": False},
        ]
    )  # fmt: skip
    cache = ContentCache(str(tmp_path / "cache"))

    def explain(with_cache):
        from checkray.actors.models import load_model

        clf = load_model(KEYWORD)
        return explain_failures(results, suite, [(KEYWORD, clf)], e, with_cache), clf

    cold, clf = explain(cache)
    assert len(cold) == 2 and clf.predicted  # occlusions and prefixes were scored
    warm, clf = explain(cache)
    assert warm == cold and clf.predicted == []
    off, clf = explain(None)
    assert off == cold and clf.predicted
    assert {r["minimal tokens"] for r in cold} == {"bad", "good"}  # one cue word is enough


@pytest.mark.trusts_code
def test_cached_predictor_loads_no_model_when_all_is_cached_and_maps_label_order(tmp_path, counting):
    from checkray.actors.benchmark.cached import CachedPredictor

    cache = ContentCache(str(tmp_path / "cache"))
    cold = CachedPredictor(KEYWORD, lambda: Counting(KEYWORD), cache)
    first = cold(TEXTS)
    cold.flush()
    warm = CachedPredictor(KEYWORD, lambda: pytest.fail("model loaded"), cache)
    assert np.array_equal(warm(TEXTS), first) and warm.labels == ["negative", "positive"]
    # A caller that wants another label order gets the columns mapped.
    flipped = CachedPredictor(KEYWORD, lambda: pytest.fail("model loaded"), cache, labels=["positive", "negative"])
    assert np.array_equal(flipped(TEXTS), first[:, ::-1])
