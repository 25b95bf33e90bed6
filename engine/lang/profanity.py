"""Words a generator must never introduce: better-profanity's list and WordNet senses
glossed as offensive, obscene or a slur (COSTELLO's operators draw no such word)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def profane_words() -> frozenset[str]:
    """better-profanity's word list (single words)."""
    from importlib import resources

    text = resources.files("better_profanity").joinpath("profanity_wordlist.txt").read_text(encoding="utf-8")
    return frozenset(w.strip().lower() for w in text.splitlines() if w.strip() and " " not in w.strip())


def offensive(word: str) -> bool:
    """Profane (better-profanity's list) or glossed offensive in WordNet."""
    from checkray.engine.lang.wordnet import is_offensive

    return word.lower() in profane_words() or is_offensive(word)
