"""Lexicon sentiment models: ``vader`` (VADER's compound score) and ``textblob``
(TextBlob's pattern-lexicon polarity). Neither has weights to load; both work offline
(TextBlob's sentiment needs no NLTK data, unlike its noun phrases and tags).

Labels must be ``negative``/``positive`` and optionally ``neutral``; scores become
probabilities with ``checkray.actors.models.common.lexicon_probabilities``. ``options.neutral_band``
sets the half-width of the neutral zone (VADER's documented convention is 0.05; TextBlob
has none, so its default is the same).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from checkray.actors.models.common import lexicon_probabilities, single_texts
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError


class LexiconModel:
    def __init__(self, spec: ModelSpec, score):
        self.spec, self.name, self.labels = spec, spec.name, list(spec.labels)
        self.score = score
        self.neutral_band = float(spec.options.get("neutral_band", 0.05))
        if not 0 < self.neutral_band < 1:
            raise InputError(f"model '{spec.name}': options.neutral_band must be in (0, 1), got {self.neutral_band}")
        lexicon_probabilities(spec, np.zeros(0), self.neutral_band)  # label map checked at load time

    def polarity(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.score(t) for t in texts], dtype=np.float64)

    def predict_proba(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray:
        inputs = single_texts(self.spec, texts, pairs)
        return lexicon_probabilities(self.spec, self.polarity(inputs), self.neutral_band)


def load_vader(spec: ModelSpec) -> LexiconModel:
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ModuleNotFoundError:
        raise InputError(f"model '{spec.name}': family vader needs the 'vadersentiment' package") from None
    analyzer = SentimentIntensityAnalyzer()
    return LexiconModel(spec, lambda text: analyzer.polarity_scores(text)["compound"])


def load_textblob(spec: ModelSpec) -> LexiconModel:
    from checkray.engine.lang.pattern_sentiment import pattern_polarity  # TextBlob's scores, without NLTK

    try:
        pattern_polarity("")
    except ModuleNotFoundError:
        raise InputError(f"model '{spec.name}': family textblob needs the 'textblob' package") from None
    return LexiconModel(spec, pattern_polarity)
