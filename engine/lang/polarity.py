"""Word polarity from the offline lexicons that ship on PyPI: VADER and AFINN.

One number per word in [-1, 1]: the mean of the lexicons that know the word, each
scaled to [-1, 1] (VADER's mean rating / 4, AFINN-111's score / 5). A word neither
lexicon lists is neutral (0.0). ``polarity_class`` turns that into the word classes the
S2LCT rules and the COSTELLO polarity guard use: ``positive``, ``negative``, ``neutral``.

Multi-word AFINN entries ("no fun") are skipped: lookups are per token.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Literal

from checkray.engine.errors import InputError

PolarityClass = Literal["positive", "negative", "neutral"]
LEXICONS = ("vader", "afinn")


def _read_lines(package: str, name: str, hint: str) -> list[str]:
    try:
        return resources.files(package).joinpath(name).read_text(encoding="utf-8").splitlines()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise InputError(f"polarity lexicon {package}/{name} is missing ({exc}); install it: {hint}") from None


@cache
def vader_lexicon() -> dict[str, float]:
    scores = {}
    for line in _read_lines("vaderSentiment", "vader_lexicon.txt", "pip install vadersentiment==3.3.2"):
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0] and " " not in parts[0]:
            scores[parts[0].lower()] = max(-1.0, min(1.0, float(parts[1]) / 4.0))
    return scores


@cache
def afinn_lexicon() -> dict[str, float]:
    scores = {}
    for line in _read_lines("afinn", "data/AFINN-111.txt", "pip install afinn==0.1"):
        word, sep, score = line.rpartition("\t")
        if sep and word and " " not in word:
            scores[word.lower()] = int(score) / 5.0
    return scores


@cache
def _combined(lexicons: tuple[str, ...]) -> dict[str, float]:
    tables = [{"vader": vader_lexicon, "afinn": afinn_lexicon}[name]() for name in lexicons]
    words = set().union(*tables)
    return {w: sum(t[w] for t in tables if w in t) / sum(w in t for t in tables) for w in words}


def word_polarity(word: str, lemma: str | None = None, lexicons: tuple[str, ...] = LEXICONS) -> float:
    """Polarity of a word in [-1, 1]; the lemma is tried when the surface form is unknown."""
    table = _combined(tuple(lexicons))
    for form in (word, lemma):
        if form:
            score = table.get(form.lower())
            if score is not None:
                return score
    return 0.0


def polarity_class(
    word: str, lemma: str | None = None, threshold: float = 0.0, lexicons: tuple[str, ...] = LEXICONS
) -> PolarityClass:
    """``positive`` / ``negative`` when |polarity| > threshold, else ``neutral``."""
    score = word_polarity(word, lemma, lexicons)
    if score > threshold:
        return "positive"
    if score < -threshold:
        return "negative"
    return "neutral"


# --- Several polarity sources at once (S²LCT's "clear polarity" and "truly neutral" checks) ---


@cache
def textblob_lexicon() -> dict[str, float]:
    """TextBlob's ``en-sentiment.xml`` word polarities (adjectives from movie reviews), in
    [-1, 1]: the mean over the word's senses; {} when TextBlob is not installed."""
    from checkray.engine.lang.pattern_sentiment import pattern_lexicon

    try:
        sentiment = pattern_lexicon()
    except ModuleNotFoundError:  # pragma: no cover - textblob ships with the project's extras
        return {}
    out = {}
    for word, senses in sentiment.items():
        values = [v[0] for v in senses.values() if v]
        if values:
            out[word.lower()] = sum(values) / len(values)
    return out


# British spellings the (American) lexicons lack: humour, marvellous, theatre, realise.
_BRITISH = (
    (re.compile(r"(?<=\w\w)our(s|ed|ing|ful|fully|less|able|ite|ites)?$"), r"or\1"),
    (re.compile(r"ll(ous|ously|ed|ing|er|ers)$"), r"l\1"),
    (re.compile(r"is(e|ed|es|ing|ation|ations)$"), r"iz\1"),
    (re.compile(r"tre(s)?$"), r"ter\1"),
)


def american_spelling(word: str) -> str | None:
    """``word`` respelled the American way ("marvellous" -> "marvelous"), or None when no
    British pattern applies; callers use it only when the word itself is unknown."""
    w = word.lower()
    for pattern, repl in _BRITISH:
        out = pattern.sub(repl, w, count=1)
        if out != w:
            return out
    return None


def polar_sources(word: str, lemma: str | None = None) -> dict[str, float]:
    """The non-zero polarities a word has in each source (VADER, AFINN, TextBlob), by
    source name; {} for a word every source calls neutral. A British spelling no source
    lists is read as its American one ("marvellous")."""
    out = _polar_sources(word, lemma)
    if not out and word:
        american = american_spelling(word)
        if american:
            out = _polar_sources(american, None)
    return out


def _polar_sources(word: str, lemma: str | None) -> dict[str, float]:
    out = {}
    for name, table in (("vader", vader_lexicon()), ("afinn", afinn_lexicon()), ("textblob", textblob_lexicon())):
        for form in (word, lemma):
            score = table.get(form.lower()) if form else None
            if score:
                out[name] = score
                break
    return out


@cache
def _vader_analyzer():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def sentence_polarity(text: str) -> dict[str, float]:
    """Sentence-level polarity scores: VADER's compound and TextBlob's pattern polarity
    (TextBlob's score is 0.0 when it is not installed)."""
    scores = {"vader": float(_vader_analyzer().polarity_scores(text)["compound"])}
    from checkray.engine.lang.pattern_sentiment import pattern_polarity

    try:
        scores["textblob"] = pattern_polarity(text)
    except ModuleNotFoundError:  # pragma: no cover
        scores["textblob"] = 0.0
    return scores
