"""TextBlob's polarity without importing TextBlob (engine/lang/pattern_sentiment.py): the
same scores, without NLTK's import cost in every stage that checks polarity."""

from __future__ import annotations

import subprocess
import sys

import pytest

SENTENCES = [
    "The movie was not good at all.",
    "a riveting documentary .",
    "I didn't think this was good",
    "Leaving you cold, it is very disappointing.",
    "terribly funny and very bad",
    "The plot is not disappointing at all, it is very disappointing.",
    "kinnear gives a tremendous performance .",
    "",
]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_scores_equal_textblobs(sentence):
    from textblob import TextBlob

    from checkray.engine.lang.pattern_sentiment import pattern_polarity

    assert pattern_polarity(sentence) == pytest.approx(TextBlob(sentence).sentiment.polarity, abs=1e-12)


def test_nltk_is_not_imported():
    code = (
        "import sys; from checkray.engine.lang.pattern_sentiment import pattern_polarity; "
        "pattern_polarity('a good film'); print('nltk' in sys.modules, 'textblob' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_the_word_table_equals_textblobs():
    from textblob.en import sentiment

    from checkray.engine.lang.pattern_sentiment import pattern_lexicon

    mine = pattern_lexicon()
    assert dict(mine.items()) == dict(sentiment.items()) and len(mine) > 2000
