"""Does a found sentence carry its corpus label? A classifier that never saw it says how sure.

A sentence-polarity corpus (Rotten Tomatoes, SST-2) labels a sentence with the verdict of
the review it came from, and many sentences do not carry that verdict on their own: "death
might be a release", "she must have a very strong back", or praise and blame mixed ("a
bravura exercise in emptiness"). Wrapped in "I wouldn't say that ..." such a sentence makes
a case whose expected label no careful reader gives. The lexicons look at words; this looks
at the sentence: a logistic regression on sentence embeddings of the searched corpus,
cross-fitted (each sentence scored by the fold that did not train on it,
``engine/label_classifier.py``), gives the probability of the sentence's own label.
``s2lct.label_check`` sets the encoder and the probability a seed needs (docs/s2lct.md has what it buys on the annotated seeds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


def low_confidence_reason(confidence: float | None, label: str, threshold: float) -> str | None:
    """Why a seed's sentence does not carry its corpus label clearly enough (None: it does,
    or there is no score for it)."""
    if confidence is None or np.isnan(confidence) or confidence >= threshold:
        return None
    return (
        f"a classifier cross-fitted on the corpus gives the sentence its label '{label}' with "
        f"p = {confidence:.2f} < {threshold:g}: it may not carry its review's verdict on its own"
    )


@dataclass(frozen=True)
class LabelConfidence:
    """The cross-fitted scores of the searched sentences (id -> corpus label and its
    probability) and the probability a polar seed needs; the seed checks ask ``reason``."""

    scores: Mapping[str, tuple[str, float]]
    threshold: float

    def reason(self, sentence_id: str, label: str) -> str | None:
        corpus_label, p = self.scores.get(sentence_id, (None, None))
        if corpus_label != label:  # not scored, or labeled by a rule rather than the corpus
            return None
        return low_confidence_reason(p, label, self.threshold)
