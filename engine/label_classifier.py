"""How surely a classifier trained on a labeled corpus gives a sentence a label.

Two generators lean on it. S²LCT asks whether a corpus sentence carries its review's
verdict on its own (``cross_fitted_confidence``: each sentence scored by the folds that
did not train on it). The mft job asks whether an LLM's generated review carries the
label it was asked for (``fitted_confidence``: a classifier fitted on corpus sentences
scores new text). Both are a logistic regression on sentence embeddings; the embeddings
come from the caller (an embedder actor pool through the content cache).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _labeled(labels: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray]:
    rows = np.array([i for i, label in enumerate(labels) if label is not None], dtype=int)
    return rows, np.array([str(labels[i]) for i in rows])


def _learnable(y: np.ndarray, per_label: int) -> bool:
    """At least two labels with ``per_label`` rows each: something to learn polarity from."""
    names, counts = np.unique(y, return_counts=True)
    return len(names) >= 2 and counts.min() >= per_label


def cross_fitted_confidence(
    vectors: np.ndarray, labels: Sequence[str | None], *, folds: int = 5, seed: int = 0, c: float = 1.0
) -> np.ndarray:
    """(n,) probability that a k-fold cross-fitted logistic regression gives each row its
    own label; NaN for an unlabeled row, and for every row when fewer than two labels
    have ``folds`` rows each (nothing to learn a sentence's polarity from)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    out = np.full(len(labels), np.nan)
    rows, y = _labeled(labels)
    if not len(rows) or not _learnable(y, folds):
        return out
    x = np.asarray(vectors, dtype=np.float32)[rows]
    split = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    proba = cross_val_predict(LogisticRegression(C=c, max_iter=2000), x, y, cv=split, method="predict_proba")
    out[rows] = proba[np.arange(len(rows)), np.searchsorted(np.unique(y), y)]  # columns: sorted labels
    return out


def fitted_confidence(
    train_vectors: np.ndarray,
    train_labels: Sequence[str | None],
    vectors: np.ndarray,
    labels: Sequence[str],
    *,
    c: float = 1.0,
) -> np.ndarray:
    """(n,) probability that a logistic regression fitted on the labeled training rows
    gives each new row its ``labels`` entry; NaN for a label the training rows never have,
    and for every row when fewer than two labels have two training rows each."""
    from sklearn.linear_model import LogisticRegression

    out = np.full(len(labels), np.nan)
    rows, y = _labeled(train_labels)
    if not len(labels) or not len(rows) or not _learnable(y, 2):
        return out
    clf = LogisticRegression(C=c, max_iter=2000).fit(np.asarray(train_vectors, dtype=np.float32)[rows], y)
    proba = clf.predict_proba(np.asarray(vectors, dtype=np.float32))
    column = {str(name): j for j, name in enumerate(clf.classes_)}
    for i, label in enumerate(labels):
        if str(label) in column:
            out[i] = proba[i, column[str(label)]]
    return out
