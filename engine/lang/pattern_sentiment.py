"""TextBlob's sentiment (the pattern analyzer over ``en-sentiment.xml``) without importing
TextBlob: ``import textblob`` imports NLTK, ~9 s of CPU per process, paid by every stage
that checks a generated case's polarity. The analyzer itself lives in ``textblob/_text.py``,
which imports only the standard library: it is loaded on its own, under a private name,
and configured exactly as ``textblob.en.sentiment`` configures it, so the scores equal
``TextBlob(text).sentiment.polarity`` (tests/core/test_pattern_sentiment.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import cache
from typing import Any

_MODULE = "checkray_textblob_text"


def _text_module() -> Any:
    spec = importlib.util.find_spec("textblob")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("textblob is not installed (it ships the en-sentiment.xml lexicon)")
    root = spec.submodule_search_locations[0]
    if _MODULE not in sys.modules:
        loaded = importlib.util.spec_from_file_location(_MODULE, os.path.join(root, "_text.py"))
        module = importlib.util.module_from_spec(loaded)
        sys.modules[_MODULE] = module
        loaded.loader.exec_module(module)
    return sys.modules[_MODULE], root


@cache
def _analyzer() -> Any:
    text, root = _text_module()

    class Sentiment(text.Sentiment):  # textblob.en.Sentiment: adverbs from adjectives
        def load(self, path=None):
            text.Sentiment.load(self, path)
            if not path:
                for w, pos in list(dict.items(self)):
                    if "JJ" in pos:
                        if w.endswith("y"):
                            w = w[:-1] + "i"
                        if w.endswith("le"):
                            w = w[:-2]
                        p, s, i = pos["JJ"]
                        self.annotate(w + "ly", "RB", p, s, i)

    return Sentiment(
        path=os.path.join(root, "en", "en-sentiment.xml"),
        synset="wordnet_id",
        negations=("no", "not", "n't", "never"),
        modifiers=("RB",),
        modifier=lambda w: w.endswith("ly"),
        tokenizer=text.find_tokens,
        language="en",
    )


def pattern_polarity(sentence: str) -> float:
    """TextBlob's polarity of ``sentence`` (-1 .. 1)."""
    return float(_analyzer()(sentence)[0])


def pattern_lexicon() -> Any:
    """The analyzer's word table (word -> {part of speech: (polarity, subjectivity,
    intensity)}), as ``textblob.en.sentiment`` holds it."""
    return _analyzer()
