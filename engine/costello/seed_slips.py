"""Slips in a seed sentence as its writer left them, which a reader stops at.

A COSTELLO triple copies its seed into all three sentences, so a slip the reviewer made
("This must me one of the worst", "gives give a solid performance", "I see it,I find it")
makes the whole triple unfluent whatever the substitution does. Read at size, such
slips were the largest share of the CR3 triples people would not sign, and some of CR1's.
``seed_slip`` names the slips that a rule can see without guessing what was meant; a
wrong word that is itself English ("quiet mediocre", "exiting serial") is not one of them,
nor is a word glued to the next ("moviejust"): splitting unknown words into two known ones
flagged more right words than slips on the bundled corpora ("semimusical", "counties").
Lower case ("i decided") is no slip either: the annotation guide (docs/validity.md) reads
it as the corpus's casing.
"""

from __future__ import annotations

import re
from functools import lru_cache

# The same word twice in a row where English never repeats it ("the the", "to to").
_NEVER_TWICE = {"the", "a", "an", "to", "of", "and", "in", "for", "with", "is", "was", "are"}
_COMMA_GLUED = re.compile(r"[a-z],[A-Za-z]")  # "it,I find it"
_CUT_OFF = re.compile(r"\s-{1,2}\s*$")  # "... a sweet little girl -": the corpus cut the sentence
_ENTITY = re.compile(r"&#?\w+;?")  # "can&#8217 ; t": HTML the corpus did not decode
# Forms of the auxiliaries, which do stand beside a form of themselves ("have had").
_AUXILIARY_FORMS = {
    "be",
    "is",
    "am",
    "are",
    "was",
    "were",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "done",
}


@lru_cache(maxsize=65536)
def _verb_lemmas(word: str) -> frozenset[str]:
    from lemminflect import getAllLemmas

    return frozenset(getAllLemmas(word).get("VERB", ()))


def _doubled(a: str, b: str) -> str | None:
    """Why two adjacent words are one word written twice, or None ("had had" is English)."""
    if a == b and a in _NEVER_TWICE:
        return f"'{a} {b}' writes one word twice"
    if a != b and a.islower() and b.islower() and not ({a, b} & _AUXILIARY_FORMS):
        if b in _verb_lemmas(a) or a in _verb_lemmas(b):
            return f"'{a} {b}' writes one verb twice"
    return None


def seed_slip(text: str) -> str | None:
    """What slip the sentence as written has, or None."""
    if _CUT_OFF.search(text):
        return "it ends on a dash, cut off mid-sentence"
    entity = _ENTITY.search(text)
    if entity and (entity.group().startswith("&#") or entity.group().endswith(";")):
        return f"an HTML entity ('{entity.group()}') the corpus left undecoded"
    if _COMMA_GLUED.search(text):
        return f"no space after the comma in '{_COMMA_GLUED.search(text).group()}'"
    tokens = text.split()
    for a, b in zip(tokens, tokens[1:]):
        why = _doubled(a, b) if a.isalpha() and b.isalpha() else None
        if why:
            return why
    return _two_finite_verbs(tokens) or _inflected_after_to(tokens)


# A subject pronoun whose "is" is followed straight by a form of "do" ("in that it is does
# not rely"): two finite verbs. After a wh-word the "is" closes a clause of its own ("what
# it is does not matter"), which is English.
_SUBJECTS = {"it", "he", "she", "this", "that", "there"}
_WH = {"what", "who", "whoever", "whatever", "how", "where", "why", "when"}
# Object pronouns that show the word before them is a verb ("to makes us laugh").
_OBJECTS = {"us", "me", "him", "them", "you", "her", "it"}


def _two_finite_verbs(tokens: list[str]) -> str | None:
    low = [t.lower() for t in tokens]
    for k in range(1, len(low) - 1):
        if low[k] in ("is", "was") and low[k + 1] in ("does", "did") and low[k - 1] in _SUBJECTS:
            if k < 2 or low[k - 2] not in _WH:
                return f"'{tokens[k - 1]} {tokens[k]} {tokens[k + 1]}' writes two finite verbs"
    return None


def _inflected_after_to(tokens: list[str]) -> str | None:
    """'to' + a verb in its -s form + an object pronoun ("tries to makes us laugh"): the
    infinitive written inflected. A noun plural after "to" ("to movies") takes no object
    pronoun after it."""
    low = [t.lower() for t in tokens]
    for k in range(len(low) - 2):
        word = low[k + 1]
        if low[k] != "to" or low[k + 2] not in _OBJECTS or not word.endswith("s"):
            continue
        lemmas = _verb_lemmas(word)
        if lemmas and word not in lemmas and any(word in (f"{lem}s", f"{lem}es") for lem in lemmas):
            return f"'to {tokens[k + 1]}' writes the infinitive inflected"
    return None
