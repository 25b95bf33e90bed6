"""Tiny keyword-rule models for tests, loaded through the "callable" family as
``fake_models:<function>`` (the tests folder is on the path pytest gives the driver,
and the benchmark passes that path on to its actors)."""

from __future__ import annotations

import numpy as np

POSITIVE = {"good", "great", "love", "excellent", "fun"}
NEGATIVE = {"bad", "awful", "hate", "boring", "terrible"}


def _positive_probability(text: str, negation_aware: bool) -> float:
    words = text.lower().replace(".", " ").replace(",", " ").split()
    score = 0
    for i, word in enumerate(words):
        polarity = (word in POSITIVE) - (word in NEGATIVE)
        if negation_aware and i > 0 and words[i - 1] in {"not", "never"}:
            polarity = -polarity
        score += polarity
    return float(1 / (1 + np.exp(-1.5 * score)))  # 0.5 when no cue word: neutral for the band rule


def keyword_sentiment(texts, pairs=None):
    """Counts cue words and understands negation: [P(negative), P(positive)]."""
    p = np.array([_positive_probability(t, negation_aware=True) for t in texts])
    return np.column_stack([1 - p, p])


def naive_sentiment(texts, pairs=None):
    """Counts cue words but ignores negation ("not good" reads as positive)."""
    p = np.array([_positive_probability(t, negation_aware=False) for t in texts])
    return np.column_stack([1 - p, p])


def three_way_sentiment(texts, pairs=None):
    """A 3-label model (negative, neutral, positive) built on the negation-aware rules."""
    p = np.array([_positive_probability(t, negation_aware=True) for t in texts])
    neutral = np.where(np.abs(p - 0.5) < 0.1, 0.8, 0.1)
    rest = 1 - neutral
    return np.column_stack([rest * (1 - p), neutral, rest * p])


def exploding_sentiment(texts, pairs=None):
    """Raises when it meets the word 'kaboom' (a model that fails mid-benchmark)."""
    if any("kaboom" in t for t in texts):
        raise ValueError("kaboom: this model cannot handle the input")
    return keyword_sentiment(texts, pairs)


def garbage_sentiment(texts, pairs=None):
    """Returns NaN probabilities (a broken model that does not raise)."""
    return np.full((len(texts), 2), np.nan)


def hanging_sentiment(texts, pairs=None):
    """Never answers (a model stuck in a deadlock)."""
    import time

    time.sleep(3600)
    return keyword_sentiment(texts, pairs)


def suicidal_sentiment(texts, pairs=None):
    """Kills its own process while predicting (a segfault or an OOM kill)."""
    import os

    os._exit(9)


def slow_sentiment(texts, pairs=None):
    """The keyword model at a few batches per second (to kill a run while it works)."""
    import time

    time.sleep(0.5)
    return keyword_sentiment(texts, pairs)


def chatty_sentiment(texts, pairs=None):
    """The keyword model, which also writes a line to stdout and stderr of its worker (a
    library that prints: its lines belong in the run's log, not in a notebook)."""
    import sys

    print("chatty model: stdout line", flush=True)
    print("chatty model: stderr line", file=sys.stderr, flush=True)
    return keyword_sentiment(texts, pairs)


def qa_first_name(contexts, questions):
    """A QA model that ignores the question: the context's first word."""
    return [c.split()[0] for c in contexts]


def qa_reads_question(contexts, questions):
    """A QA model that reads "shorter" (only when spelled right): the name after "than"."""
    return [c.split(" than ")[1].rstrip(".") if "shorter" in q else c.split()[0] for c, q in zip(contexts, questions)]


def qa_not_a_list(contexts, questions):
    """A QA model that returns one string for the whole batch."""
    return "Ann"
