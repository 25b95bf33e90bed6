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
it as the corpus's casing; a lower-case sentence after "!" or "." in a text written in
sentence case is ("could not act AT ALL! she had").

User reviews (IMDB) have slips that edited critics' snippets (SST) rarely do: "its" for
"it's" ("its worth watching", "Its a shame"), a backtick for an apostrophe ("I`ll"), a
stray closing quote ("a direct-to-video' release"), a double quote with no partner, two
sentences run into one, and misspelled words ("absolutey"). A misspelled word is one that
no English word list has (pyspellchecker's 160k words, WordNet) and the reference corpus
has at most three times; a coined word reviewers use ("rewatch") is seen more often, but
one a single writer coined ("outgag", "funnybone") is refused with the typos.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from checkray.engine.costello.context import tokenize

if TYPE_CHECKING:
    from checkray.engine.costello.context import ReferenceModel

# The same word twice in a row where English never repeats it ("the the", "to to").
_NEVER_TWICE = {"the", "a", "an", "to", "of", "and", "in", "for", "with", "is", "was", "are"}
_COMMA_GLUED = re.compile(r"[A-Za-z)],(?:[A-Za-z(]|[\"'][A-Za-z0-9])")  # "it,I find it", "Masters,(Kyd", ",\"Dream"
_BACKTICK_APOSTROPHE = re.compile(r"[A-Za-z]`[a-z]")  # "I`ll", "doesn`t"
_QUESTION_APOSTROPHE = re.compile(r"[A-Za-z] ?\? ?s (?=[a-z])")  # "cube ? s personal revelations": an encoding slip
# A closing quote after a word that is no plural and opened nowhere ("a direct-to-video'
# release"): a stray mark. "goin' home" drops a g, "ol'" more; "the actors' work" is a possessive.
_STRAY_QUOTE = re.compile(r"([A-Za-z]+)' (?=[a-z])")
_ELISIONS = {"lil", "ole"}
_OPENING_QUOTE = re.compile(r"(?:^|\s)['`‘][A-Za-z]")
_FINAL_QUOTE = re.compile(r"\s'\s*$")  # "... the concession stand . '"
_SENTENCE_THEN_WORD = re.compile(r"([.!?]+)\s+([a-z]\w*)")
# Words a full stop ends that need not end a sentence ("e.g. the", "vs. his").
_ABBREVIATIONS = frozenset("etc vs mr mrs ms dr st jr sr approx no vol ca bros co inc corp ltd".split())
# "its" where "it's" is meant: before an article, a negation, a verb form or an adverb
# that cannot follow a possessive ("its a shame", "its not", "its been").
_ITS_BEFORE = frozenset(
    "a an the not so really been being going gonna got too still about never always definitely "
    "probably obviously clearly also actually basically".split()
)
# An adjective after "its" ends there or opens a clause: "Its unfortunate that", "its hard to"
# (not a comma: "all its odd , quirky charm"; not "its own", "of its kind").
_CLAUSE_AFTER_ADJECTIVE = {"that", "to", ".", "!", "?", "how", "when", "if"}
_ITS_NOUNS = {"own", "kind", "sort", "type"}  # "on its own", "of its kind"
_ITS_WORTH_BEFORE = {"it", "the", "a", "seeing", "watching", "renting", "buying", "checking", "your"}
_OPENS_CUT = re.compile(r"\s*[,;]")  # ", The Sum of All Fears is simply ...": the corpus cut the sentence
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
def verb_lemmas(word: str) -> frozenset[str]:
    from lemminflect import getAllLemmas

    return frozenset(getAllLemmas(word).get("VERB", ()))


def _doubled(a: str, b: str) -> str | None:
    """Why two adjacent words are one word written twice, or None ("had had" is English)."""
    if a == b and a in _NEVER_TWICE:
        return f"'{a} {b}' writes one word twice"
    if a != b and a.islower() and b.islower() and not ({a, b} & _AUXILIARY_FORMS):
        if b in verb_lemmas(a) or a in verb_lemmas(b):
            return f"'{a} {b}' writes one verb twice"
    return None


def seed_slip(text: str, ref: ReferenceModel | None = None) -> str | None:
    """What slip the sentence as written has, or None. With ``ref`` (the reference corpus)
    a misspelled word is one too."""
    if _CUT_OFF.search(text):
        return "it ends on a dash, cut off mid-sentence"
    if _OPENS_CUT.match(text):
        return "it opens with a comma or a semicolon, cut from the sentence it belonged to"
    entity = _ENTITY.search(text)
    if entity and (entity.group().startswith("&#") or entity.group().endswith(";")):
        return f"an HTML entity ('{entity.group()}') the corpus left undecoded"
    for pattern, what in (
        (_COMMA_GLUED, "no space after the comma in"),
        (_BACKTICK_APOSTROPHE, "a backtick for an apostrophe in"),
        (_QUESTION_APOSTROPHE, "a question mark for an apostrophe in"),
    ):
        found = pattern.search(text)
        if found:
            return f"{what} '{found.group()}'"
    tokens = text.split()
    for a, b in zip(tokens, tokens[1:]):
        why = _doubled(a, b) if a.isalpha() and b.isalpha() else None
        if why:
            return why
    return (
        _two_finite_verbs(tokens)
        or _inflected_after_to(tokens)
        or _stray_quote(text)
        or _unbalanced_double_quotes(text)
        or _unopened_final_quote(text)
        or _lower_case_sentence(text)
        or _its_for_it_is(tokenize(text))
        or (misspelled(text.split(), ref) if ref is not None else None)
    )


def _stray_quote(text: str) -> str | None:
    """A closing single quote glued to a word that is no plural and has no opening quote
    before it, then a word: "a direct-to-video' release"."""
    for m in _STRAY_QUOTE.finditer(text):
        word = m.group(1).lower()
        if len(word) <= 2 or word in _ELISIONS or word.endswith(("s", "z", "x", "in")):
            continue  # "ol' ball-and-chain", "lil' bow wow", "goin' home", "the actors' work", "solondz'"
        if _OPENING_QUOTE.search(text[: m.end(1)]):
            continue  # "rock 'n' roll", "the 'laughing at' variety"
        return f"a stray quote in '{m.group(0).strip()}'"
    return None


def _unbalanced_double_quotes(text: str) -> str | None:
    """An odd number of double quotes: a quotation opened or closed nowhere, or closed with
    another mark ("'barbershop \" is a good-hearted ensemble comedy", "sweet home alabama \"
    is what it is"). An inch mark ("a 9 \" tv") reads the same to this rule and is as rare."""
    if text.count('"') % 2:
        return "unbalanced double quotes: a quotation opened or closed nowhere"
    return None


def _unopened_final_quote(text: str) -> str | None:
    """A single quote that ends the text and opens nowhere ("to keep parents away from the
    concession stand . '"): no backtick and no quote glued to the start of a word before it."""
    if _FINAL_QUOTE.search(text) and "`" not in text and not _OPENING_QUOTE.search(text):
        return "a closing quote at the end that opens nowhere"
    return None


def _lower_case_sentence(text: str) -> str | None:
    """In a text written in sentence case, a sentence that starts lower case after a full
    stop, "!" or "?" ("could not act AT ALL! she had no emotion"): two sentences run into
    one. Lower-cased corpora (no capital at the start) are not read."""
    if not text[:1].isupper():
        return None
    for m in _SENTENCE_THEN_WORD.finditer(text):
        stop = m.group(1)
        if len(stop) > 1 and set(stop) == {"."}:
            continue  # "..." trails off; what follows may go on in lower case
        before = re.search(r"([\w.]+)$", text[: m.start()])
        word = before.group(1).lower() if before else ""
        if len(word) <= 1 or word in _ABBREVIATIONS or "." in word:
            continue  # "e.g. the", "vs. his", an initial
        return f"'{text[m.start() - len(word) : m.end()]}' starts a sentence in lower case"
    return None


def _its_for_it_is(words: list[str]) -> str | None:
    """'its' written for "it's": before an article, a negation, a verb form, an adverb no
    possessive takes ("its a shame", "its not"), before "worth" + what is worth it ("its
    worth watching"), or before an adjective that ends the clause ("Its unfortunate that")."""
    low = [w.lower() for w in words]
    for k in range(len(low) - 1):
        if low[k] != "its":
            continue
        nxt = low[k + 1]
        after = low[k + 2] if k + 2 < len(low) else "."
        slip = nxt in _ITS_BEFORE or (nxt == "worth" and after in _ITS_WORTH_BEFORE)
        slip = slip or (nxt not in _ITS_NOUNS and _mostly_adjective(nxt) and after in _CLAUSE_AFTER_ADJECTIVE)
        if slip:
            return f"'{words[k]} {words[k + 1]}' writes 'its' for \"it's\""
    return None


@lru_cache(maxsize=8192)
def _mostly_adjective(word: str) -> bool:
    """A word WordNet knows mostly as an adjective ("unfortunate", "hard"): more adjective
    senses than noun senses, and one noun sense at most ("its material that is" is a noun)."""
    from checkray.engine.lang.wordnet import wordnet

    wn = wordnet()
    nouns = len(wn.synsets(word, pos="n"))
    return nouns <= 1 and len(wn.synsets(word, pos="a")) + len(wn.synsets(word, pos="s")) > nouns


MAX_MISSPELLED_COUNT = 3  # a word the reference corpus has more often is in use, listed or not
_EDGE_PUNCTUATION = re.compile(r"^[\"'`(\[]+|[\"'`)\].,;:!?]+$")
_LOWER_WORD = re.compile(r"[a-z]+")


@lru_cache(maxsize=1)
def _word_list() -> frozenset[str]:
    from spellchecker import SpellChecker

    return frozenset(SpellChecker().word_frequency.dictionary)


def misspelled(words: list[str], ref: ReferenceModel) -> str | None:
    """A lower-case word of three letters or more that no English word list has (the
    spell checker's, WordNet's) and the reference corpus has at most
    ``MAX_MISSPELLED_COUNT`` times: "absolutey", "laugther", "exporing". ``words`` are the
    text's whitespace-separated tokens; only letters with at most punctuation around them
    are read, so no half of a hyphenated compound ("show-stoppingly") or of a name with
    an accent ("Schütte") is. Capitalised words are names; a coined word reviewers use
    ("rewatch") is seen more often."""
    from checkray.engine.lang.wordnet import wordnet

    known = _word_list()
    for token in words:
        w = _EDGE_PUNCTUATION.sub("", token)
        if len(w) < 3 or not _LOWER_WORD.fullmatch(w) or w in known:
            continue
        if wordnet().morphy(w) or ref.count(w) > MAX_MISSPELLED_COUNT:
            continue
        return f"'{w}' is misspelled (in no English word list)"
    return None


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
        lemmas = verb_lemmas(word)
        if lemmas and word not in lemmas and any(word in (f"{lem}s", f"{lem}es") for lem in lemmas):
            return f"'to {tokens[k + 1]}' writes the infinitive inflected"
    return None
