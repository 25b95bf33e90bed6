"""The classifier's label check of generated MFTs: its reasons and the shared classifier."""

import numpy as np

from checkray.engine.case_checks import apply_checks
from checkray.engine.label_classifier import fitted_confidence
from checkray.engine.mft.checks import classifier_checks, classifier_label_reason, lexicon_disagreement_reason


def test_fitted_confidence_scores_new_rows_by_their_label():
    rng = np.random.default_rng(0)
    train = np.vstack([rng.normal(2, 1, (40, 3)), rng.normal(-2, 1, (40, 3))])
    labels = ["positive"] * 40 + ["negative"] * 40
    new = np.array([[2.0, 2.0, 2.0], [2.0, 2.0, 2.0], [-2.0, -2.0, -2.0], [0.0, 0.0, 0.0]])
    p = fitted_confidence(train, labels, new, ["positive", "negative", "negative", "neutral"])
    assert p[0] > 0.95 and p[1] < 0.05 and p[2] > 0.95
    assert np.isnan(p[3])  # a label the corpus never has gets no score
    assert np.isnan(fitted_confidence(train[:40], labels[:40], new, ["positive"] * 4)).all()  # one label only


def test_reasons_name_the_probability_and_the_lexicon():
    assert classifier_label_reason(0.95, "positive", 0.9) is None
    assert classifier_label_reason(float("nan"), "positive", 0.9) is None
    assert "p = 0.42 < 0.9" in classifier_label_reason(0.42, "negative", 0.9)
    # read as no verdict by people (bench/data/annotations): VADER reads them neutral
    assert "does not lean positive" in lexicon_disagreement_reason(
        "The movie reveals how past decisions impact our present.", "positive"
    )
    assert "does not lean negative" in lexicon_disagreement_reason("A delightful, moving film.", "negative")
    assert lexicon_disagreement_reason("The narrative is jumbled and unclear, a dull mess.", "negative") is None
    assert lexicon_disagreement_reason("Anything at all.", "neutral") is None  # only polar labels


def test_checks_run_in_order_and_record_their_names():
    rows = [
        {"text": "A wonderful, warm film.", "label": "positive"},
        {"text": "The film explores memory.", "label": "positive"},
        {"text": "A dull, tedious film.", "label": "positive"},
    ]
    confidence = {"A wonderful, warm film.": 0.97, "The film explores memory.": 0.93, "A dull, tedious film.": 0.2}
    outcome = apply_checks(rows, classifier_checks(confidence, 0.9, lexicon_agrees=True))
    assert [r["text"] for r in outcome.kept] == ["A wonderful, warm film."]
    assert outcome.kept[0]["checks"] == ["classifier label", "lexicon agrees"]
    assert {r["text"]: r["check"] for r in outcome.rejected} == {
        "A dull, tedious film.": "classifier label",
        "The film explores memory.": "lexicon agrees",
    }
    assert len(apply_checks(rows, classifier_checks(confidence, 0.9, lexicon_agrees=False)).kept) == 2
