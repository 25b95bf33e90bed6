"""S²LCT's label check: a cross-fitted classifier's probability of a sentence's own corpus
label, and the seed check that refuses a polar seed whose sentence does not carry it."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from checkray.actors.s2lct.parser import token_dicts
from checkray.engine.label_classifier import cross_fitted_confidence
from checkray.engine.s2lct.confidence import LabelConfidence, low_confidence_reason
from checkray.engine.s2lct.search import checked_seed_rows, matching_rules
from checkray.engine.s2lct.spec import load_capabilities


def clusters(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = np.vstack([rng.normal(+2, 0.5, (n, 4)), rng.normal(-2, 0.5, (n, 4))])
    return x, ["positive"] * n + ["negative"] * n


def test_cross_fitting_scores_each_row_by_a_model_that_never_saw_it():
    x, labels = clusters()
    labels[0] = "negative"  # a positive-looking row labeled negative: the other folds disagree
    p = cross_fitted_confidence(x, labels, folds=5)
    assert p[0] < 0.2
    assert np.median(p[1:]) > 0.9


def test_unlabeled_rows_and_too_few_labels_get_no_score():
    x, labels = clusters(n=10)
    labels[3] = None
    p = cross_fitted_confidence(x, labels, folds=5)
    assert np.isnan(p[3]) and not np.isnan(p[4])
    assert np.isnan(cross_fitted_confidence(x[:12], labels[:12], folds=5)).all()  # one label only
    two = ["positive"] * 16 + ["negative"] * 4  # 4 negatives cannot fill 5 folds
    assert np.isnan(cross_fitted_confidence(x[:20], two, folds=5)).all()


def test_low_confidence_reason_names_the_label_and_threshold():
    why = low_confidence_reason(0.54, "positive", 0.8)
    assert "'positive'" in why and "0.54" in why and "0.8" in why
    assert low_confidence_reason(0.8, "positive", 0.8) is None
    assert low_confidence_reason(float("nan"), "positive", 0.8) is None
    lc = LabelConfidence({"a": ("positive", 0.3)}, 0.8)
    assert lc.reason("a", "positive") and lc.reason("a", "negative") is None and lc.reason("b", "positive") is None


@pytest.fixture(scope="module")
def nlp():
    from checkray.actors.spacy_nlp import load_spacy

    return load_spacy("builtin:sm")


def test_a_seed_whose_sentence_the_classifier_doubts_is_rejected_with_its_reason(nlp):
    caps = {c.id: c for c in load_capabilities()}
    specs = [caps["LC9"], caps["LC10"]]
    pairs = [("The acting is good.", "positive"), ("The acting is wonderful.", "positive")]
    rows = []
    for i, (text, label) in enumerate(pairs):
        t = token_dicts(nlp(text))
        matches = {c.id: r for c in specs if (r := matching_rules(c, t, label, neutral_proxy=True))}
        rows.append({"id": f"d{i}", "matches": json.dumps(matches), "tokens": json.dumps(t)})
    table = pa.Table.from_pylist(rows)
    confidence = LabelConfidence({"d0": ("positive", 0.95), "d1": ("positive", 0.4)}, 0.8)
    seeds, rejected = checked_seed_rows(
        specs, table, suite="s", max_seeds=10, seed=0, neutral_proxy=True, confidence=confidence
    )
    assert seeds and all("wonderful" not in r["text"] for r in seeds)
    assert all("seed-label-confidence" in json.loads(r["checks"]) for r in seeds)
    doubted = [r for r in rejected if "wonderful" in r["text"]]
    assert doubted and all(r["check"] == "seed-label-confidence" and "p = 0.40" in r["reason"] for r in doubted)
    # Without the classifier's scores the same sentence is a seed.
    seeds, _ = checked_seed_rows(specs, table, suite="s", max_seeds=10, seed=0, neutral_proxy=True)
    assert any("wonderful" in r["text"] for r in seeds)
