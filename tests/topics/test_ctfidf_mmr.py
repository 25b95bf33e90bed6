"""c-TF-IDF against a hand-computed example; MMR diversity; label stratification."""

import math

import numpy as np
import pyarrow as pa
import pytest

from checkray.engine.config import RepresentationConfig, RepresentativesConfig
from checkray.engine.topics.ctfidf import class_tfidf_weights, fit_class_tfidf, topic_name
from checkray.engine.topics.describe import describe_clusters
from checkray.engine.topics.representatives import label_quotas, mmr_select


def test_ctfidf_matches_hand_computation():
    # class 0: "apple apple banana", class 1: "banana cherry"
    docs = ["apple apple banana", "banana cherry"]
    model = fit_class_tfidf(docs, [0, 1], stop_words=None)
    terms = list(model.terms)
    assert terms == ["apple", "banana", "cherry"]
    # A = (3 + 2) / 2 = 2.5 words per class; f = apple 2, banana 2, cherry 1
    idf = {"apple": math.log(1 + 2.5 / 2), "banana": math.log(1 + 2.5 / 2), "cherry": math.log(1 + 2.5 / 1)}
    expected = np.array(
        [
            [2 / 3 * idf["apple"], 1 / 3 * idf["banana"], 0.0],
            [0.0, 1 / 2 * idf["banana"], 1 / 2 * idf["cherry"]],
        ]
    )
    np.testing.assert_allclose(model.class_matrix.toarray(), expected, rtol=1e-12)
    np.testing.assert_allclose(model.idf, [idf[t] for t in terms])


def test_ctfidf_classes_pool_their_documents():
    # Two documents of one class weigh the same as their concatenation.
    split = fit_class_tfidf(["apple", "apple banana", "cherry"], [0, 0, 1], stop_words=None)
    joined = fit_class_tfidf(["apple apple banana", "cherry"], [0, 1], stop_words=None)
    np.testing.assert_allclose(split.class_matrix.toarray(), joined.class_matrix.toarray())


def test_class_weights_ignore_absent_terms():
    weights, idf = class_tfidf_weights(np.array([[1, 0], [1, 0]]))
    assert np.isfinite(idf).all() and weights.toarray()[:, 1].tolist() == [0, 0]


def test_keywords_and_topic_name():
    docs = ["the lego sets build", "lego sets for kids build", "great song album", "song lyrics album"]
    model = fit_class_tfidf(docs, [0, 0, 1, 1])
    words = [[w for w, _ in kw] for kw in model.keywords(3)]
    assert set(words[0]) <= {"lego", "sets", "build", "kids"} and "lego" in words[0]
    assert "song" in words[1] and "album" in words[1]
    assert topic_name(4, ["lego", "legos", "sets", "build", "x"], 4) == "4_lego_legos_sets_build"


def test_mmr_does_not_pick_near_duplicates_together():
    docs = [
        "Five Stars",
        "five stars!!!",
        "Five stars! Five stars!",
        "stars for this album",
        "great album",
        "great songs on the album",
        "loved the songs",
    ]
    model = fit_class_tfidf(docs, [0] * len(docs))
    vectors = model.transform(docs)
    no_diversity = mmr_select(vectors, model.class_matrix[0], k=5, diversity=0.0)
    with_diversity = mmr_select(vectors, model.class_matrix[0], k=5, diversity=0.5)
    dupes = {0, 1, 2}
    assert len(dupes & set(no_diversity)) == 3  # pure relevance picks all the duplicates
    assert len(dupes & set(with_diversity)) == 1  # MMR keeps only one of them


def test_label_quotas_keep_proportions():
    labels = ["positive"] * 40 + ["negative"] * 60
    assert label_quotas(labels, 10) == {"positive": 4, "negative": 6}
    q = label_quotas(["a"] * 5 + ["b"] * 3 + ["c"] * 2, 5)
    assert sum(q.values()) == 5 and q["a"] >= q["b"] >= q["c"]
    assert (
        label_quotas(["a"] * 2 + ["b"] * 50, 10) == {"a": 1, "b": 9}
        or label_quotas(["a"] * 2 + ["b"] * 50, 10)["b"] == 10
    )
    assert label_quotas(["a", "b"], 10) == {"a": 1, "b": 1}  # never more than exist


def test_mmr_with_quotas_respects_label_counts():
    rng = np.random.default_rng(0)
    vectors = rng.random((30, 8))
    labels = ["pos"] * 12 + ["neg"] * 18
    picks = mmr_select(
        vectors, vectors.mean(axis=0), k=10, diversity=0.5, quotas=label_quotas(labels, 10), labels=labels
    )
    picked = [labels[i] for i in picks]
    assert picked.count("pos") == 4 and picked.count("neg") == 6


def _corpus(texts, labels):
    n = len(texts)
    return pa.table({"id": [str(i) for i in range(n)], "text": texts, "label": labels, "meta": [None] * n})


def test_describe_clusters_stratifies_representatives():
    texts = [f"lego set number {i} was fun to build" for i in range(20)] + [
        f"album track {i} has great songs" for i in range(20)
    ]
    labels = ["positive"] * 8 + ["negative"] * 12 + ["positive"] * 15 + ["negative"] * 5
    clusters = np.array([0] * 20 + [1] * 20)
    table, reps = describe_clusters(
        _corpus(texts, labels),
        clusters,
        RepresentationConfig(min_df=1),
        RepresentativesConfig(top_k=10, diversity=0.5),
        seed=0,
    )
    assert table.column("size").to_pylist() == [20, 20]
    assert table.column("topic").to_pylist()[0].startswith("0_")
    assert "lego" in table.column("keywords").to_pylist()[0]
    rows = reps.to_pylist()
    c0 = [r["label"] for r in rows if r["cluster"] == 0]
    c1 = [r["label"] for r in rows if r["cluster"] == 1]
    assert (c0.count("positive"), c0.count("negative")) == (4, 6)
    assert (c1.count("positive"), c1.count("negative")) == (8, 2)
    assert [r["rank"] for r in rows if r["cluster"] == 0] == list(range(10))


def test_top_k_is_not_capped():
    texts = [f"word{i} common text" for i in range(60)]
    _, reps = describe_clusters(
        _corpus(texts, ["positive"] * 60),
        np.zeros(60, dtype=int),
        RepresentationConfig(min_df=1),
        RepresentativesConfig(top_k=25),
        seed=1,
    )
    assert reps.num_rows == 25


@pytest.mark.parametrize("stratify", [True, False])
def test_unlabeled_corpus_still_gets_representatives(stratify):
    texts = [f"doc about thing {i}" for i in range(12)]
    _, reps = describe_clusters(
        _corpus(texts, [None] * 12),
        np.array([0, 1] * 6),
        RepresentationConfig(min_df=1),
        RepresentativesConfig(top_k=3, stratify=stratify),
        seed=0,
    )
    assert reps.num_rows == 6
