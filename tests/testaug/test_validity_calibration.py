"""Class weighting by oversampling and the calibrated decision threshold of the validity classifier."""

import numpy as np
import pytest

from checkray.actors.testaug.validity import ValidityClassifier, best_threshold, oversample
from checkray.engine.errors import InputError


def test_oversample_balances_the_classes_and_keeps_every_case():
    valid = [1] * 9 + [0] * 3
    order = oversample(valid, seed=0)
    assert sorted(set(order)) == list(range(12))  # every case at least once
    labels = [valid[i] for i in order]
    assert labels.count(0) == labels.count(1) == 9
    assert oversample(valid, seed=0) == order  # seeded


def test_best_threshold_maximizes_accuracy_and_prefers_half_among_equals():
    probs = np.array([0.1, 0.3, 0.55, 0.62, 0.7, 0.9])
    gold = np.array([0, 0, 0, 0, 1, 1])
    cut = best_threshold(probs, gold)
    assert 0.62 < cut <= 0.7
    assert (((probs >= cut).astype(int)) == gold).all()
    assert best_threshold(np.array([0.2, 0.8]), np.array([0, 1])) == 0.5  # 0.5 already perfect


def test_predict_uses_the_threshold():
    clf = ValidityClassifier("embedding_lr", threshold=0.8)
    clf.predict_proba = lambda texts: np.array([0.7, 0.9])
    assert clf.predict(["a", "b"]).tolist() == [False, True]


def test_unknown_class_weight_is_one_line():
    with pytest.raises(InputError, match="unknown class_weight 'heavy'"):
        ValidityClassifier("embedding_lr", class_weight="heavy")


def _fake_fit(monkeypatch, cls, sizes: list[int]):
    """``cls``'s fit records how many cases it was fitted on; P(valid) = 0.9 for 'no' texts."""

    def fit(self, texts, valid, seed, on_step=None):
        sizes.append(len(texts))
        return {}

    monkeypatch.setattr(cls, "fit", fit)
    monkeypatch.setattr(cls, "predict_proba", lambda self, texts: np.array([0.9 if "no" in t else 0.2 for t in texts]))


@pytest.mark.parametrize("backend, fits", [("embedding_lr", [11, 14]), ("finetune", [11])])
def test_calibration_holds_out_a_fifth_and_a_quick_backend_refits_on_every_case(monkeypatch, backend, fits):
    from checkray.actors.testaug.validity import EmbeddingHead, FineTunedEncoder

    sizes: list[int] = []
    _fake_fit(monkeypatch, EmbeddingHead if backend == "embedding_lr" else FineTunedEncoder, sizes)
    texts = [f"no {i}" for i in range(7)] + [f"yes {i}" for i in range(7)]
    clf = ValidityClassifier(backend, calibrate=True).fit(texts, [1] * 7 + [0] * 7, seed=0)
    assert sizes == fits  # the quick backend is refitted on all 14 once the threshold is chosen
    assert clf.meta["calibration"] == {"cases": 3, "threshold": clf.threshold}
    assert 0.2 < clf.threshold <= 0.9 and clf.meta["n_train"] == 14
