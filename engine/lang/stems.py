"""Porter stems (NLTK's rules; no NLTK data needed): two words of one stem are one word
for the checks that refuse a repeat ("beautiful" beside "beautifully")."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def _porter():
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The Porter stem of a lower-cased ``word``."""
    return _porter().stem(word.lower())
