"""COSTELLO's substituting operators with their candidates checked in context.

The plain operators (``mutations.py``) take WordNet's first lemma whatever the sentence:
good -> honorable ("honorable performances"), smart -> chic, like -> wish ("you'll
probably wish rollerball"), and they edit fixed expressions ("too bad", "the big screen")
and titles ("the bad news bears"). Here every candidate runs through named checks, in this
order; the first it fails rejects it, with the reason, and a rejected candidate is kept as a
``Variant`` whose ``check``/``reason`` say so (the job publishes them in ``rejected.parquet``):

``sense``            the candidate is one a person chose for the word
                     (``engine/data/costello_substitutes.yaml``: the frequent sentiment
                     words, some marked never substituted) or, for a word not listed, comes
                     from one of its most frequent WordNet senses (``SENSES``); it is a
                     single word and inflects to the original's form (lemminflect)
``fixed_expression`` the word is not part of a WordNet multiword lemma with its neighbours
                     (``too_bad``, ``brain_dead``, ``at_worst``, ``allow_for``) nor of a
                     strong collocation of the corpus (``the big screen``, ``precious little``)
``named_entity``     the word is not in a title or a name: spaCy's entities, a span written
                     capitalised mid-sentence in the corpus ("Bad News Bears", "Birthday
                     Girl"), a proper noun, a quoted span, half of a hyphenated word
``common_word``      the (inflected) candidate occurs at least ``MIN_COUNT`` times in the
                     reference corpus (the bundled IMDB + Rotten Tomatoes reviews)
``polarity``         synonym keeps the word's polarity class, antonym flips it (CR1-CR3)
``context_fit``      the bigrams the candidate forms with its neighbours are attested where
                     the original's are, and a trigram around it when one around the
                     original is (``ReferenceModel.fits``), and it is not already in the
                     sentence
``profanity``        the variant adds no profane or offensive word the seed lacks
                     (better-profanity's list + WordNet senses glossed offensive/slur/obscene)

Of the candidates that pass them all, the one that fits its context best is kept: the
summed log counts of the n-grams it forms with its neighbours, less ``SENSE_PENALTY`` per
less frequent sense; a candidate of a sense other than the first must also have been seen
beside a content-word neighbour (``context_fit``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from functools import lru_cache

from checkray.engine.costello.context import ReferenceModel
from checkray.engine.costello.mutations import (
    NOTIONAL_POS,
    Kind,
    Token,
    Variant,
    detokenize,
    gender_lexicon,
    in_compound,
    match_case,
    replace_word,
)
from checkray.engine.costello.substitutes import curated
from checkray.engine.lang.polarity import polar_sources, polarity_class, word_polarity
from checkray.engine.lang.stems import stem

SENSES = 4  # WordNet senses of a word whose synonyms/antonyms are candidates
MIN_COUNT = 10  # occurrences in the reference corpus (~1.4 per million words): a common word
PMI_COLLOCATION = 80.0  # two content words observed >= 80x more often than chance ...
MIN_COLLOCATION = 10  # ... at least this often: a fixed expression
PMI_TRIGRAM = 50.0  # a trigram >= 50x likelier than its likelier split into bigram + word
CANDIDATES = 8  # candidates tried per word
SENSE_PENALTY = 2.0  # context score (sum of log n-gram counts) a less frequent sense must make up
_OPPOSITE = {"positive": "negative", "negative": "positive"}
# Substitutable fine tags per operator family: base and inflected forms (lemminflect).
WORD_TAGS = {
    "JJ": "ADJ",
    "JJR": "ADJ",
    "JJS": "ADJ",
    "VB": "VERB",
    "VBP": "VERB",
    "VBD": "VERB",
    "VBZ": "VERB",
    "VBG": "VERB",
    "VBN": "VERB",
}
PAIR_TAGS = {**WORD_TAGS, "NN": "NOUN", "NNS": "NOUN", "RB": "ADV"}
CHECKS = ("sense", "fixed_expression", "named_entity", "common_word", "polarity", "context_fit", "profanity")
PAIR_CHECKS = ("sense", "verb_frame") + tuple(c for c in CHECKS[1:] if c != "polarity")
# Entity types of spaCy's NER that mark titles and names.
_NAME_ENTS = {"PERSON", "WORK_OF_ART", "ORG", "GPE", "NORP", "FAC", "EVENT", "PRODUCT", "LOC", "LAW"}
_QUOTES = {'"', "``", "''", "“", "”"}
_SENTENCE_ENDS = {".", "!", "?", "...", ":"}
_WORD = re.compile(r"[a-z]+")
# Adjectives read in another sense before a noun that names a person.
PERSON_SENSES = {"poor": "penniless or pitiable", "sad": "pathetic", "sorry": "pitiable"}
# Superlatives that read in another sense than their adjective's judgement: "far from the
# worst" -> "far from the poorest" is the least wealthy, not the least good.
SUPERLATIVE_SENSES = {"poorest": "the least wealthy"}
# Words that negate what follows: a negated prefixed antonym is a double negative people
# rarely write ("not very funny" -> "not very unfunny", "isn't uninteresting").
NEGATORS = frozenset("not n't never no hardly nor".split())
NEGATIVE_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non")
# Words before a second copy of a word that tie it to the first ("an equally beautiful"):
# editing one copy breaks the echo.
ECHO_WORDS = frozenset("equally also".split())
# Words before which an adjective stands for a noun when no noun follows ("what good",
# "no good", "any good", "much good", "some good").
NOMINAL_BEFORE = {"what", "no", "any", "much", "some"}
# After "the", an adjective heading its phrase names a group of people ("the rich and the
# powerful who ...") when a pronoun, verb or preposition follows it instead of a noun.
NOMINAL_AFTER_THE = {"PRON", "AUX", "VERB", "ADP", "DET", "SCONJ"}
REFLEXIVES = frozenset("myself yourself yourselves himself herself itself ourselves themselves oneself".split())
# An -ly adverb this polar (either lexicon, scaled to [-1, 1]; or the adjective it is made
# from) before an adjective judges it: "delightfully charming", "hilariously wicked" (fun,
# not evil). Adverbs of degree ("really", "truly good") only scale it.
POLAR_ADVERB = 0.4
# Adverbs that scale or frame a judgement without making one ("truly", "surprisingly dull",
# "mostly boring"), beside VADER's intensifiers.
DEGREE_ADVERBS = frozenset({"truly", "genuinely", "surprisingly", "unexpectedly", "mostly", "largely", "partly"})
# Intensifiers VADER's list lacks, which also go with any adjective ("pretty good", "downright silly").
PLAIN_INTENSIFIERS = frozenset("pretty damn damned downright outright plain way altogether real super".split())
# Adverbs of stance, frequency and time: they go with any adjective ("undeniably strong",
# "usually superb"), so an unseen pair with one says nothing of its fit.
STANCE_ADVERBS = frozenset(
    "undeniably usually certainly obviously clearly probably generally definitely simply actually admittedly "
    "arguably typically relatively fairly equally consistently frequently increasingly merely seemingly "
    "apparently supposedly undoubtedly unquestionably basically essentially initially eventually finally "
    "ultimately originally rarely surely honestly frankly seriously literally normally occasionally "
    "sometimes often always never still already also only even just nearly almost mainly".split()
)
# Adverbs that go with any adjective: an unseen pair with one of them says nothing.
_ANY_ADJECTIVE_ADVERBS = DEGREE_ADVERBS | STANCE_ADVERBS | PLAIN_INTENSIFIERS
# A superlative after "the" heads its own phrase before a clause ("the best you can say
# about it", "the worst that can be said"): a fixed frame, not a judgement of a noun.
NOMINAL_SUPERLATIVE_AFTER = {"PRON", "AUX", "VERB", "SCONJ"}
# Dependents that give a verb its object; one with none of them that ends its clause is
# used intransitively ("go see it and enjoy .").
OBJECT_DEPS = {"dobj", "obj", "ccomp", "xcomp", "dative", "attr", "acomp", "oprd", "prep", "agent", "nsubjpass"}


def inflect(lemma: str, tag: str) -> str | None:
    """``lemma`` in the form ``tag`` (lemminflect); the lemma itself for base tags."""
    if tag in ("JJ", "VB", "VBP", "NN", "RB"):
        if tag == "VBP" and lemma == "be":
            return None
        return lemma
    from lemminflect import getInflection

    forms = getInflection(lemma, tag=tag)
    return forms[0] if forms else None


def added_profanity(seed: str, variant: str) -> list[str]:
    """Profane / offensive words of ``variant`` that ``seed`` does not contain."""
    from checkray.engine.lang.profanity import offensive

    have = set(_WORD.findall(seed.lower()))
    new = [w for w in dict.fromkeys(_WORD.findall(variant.lower())) if w not in have]
    return [w for w in new if offensive(w)]


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def profanity_checked(seed: str, v: Variant) -> Variant:
    """A whole-sentence variant (inversion, dense synonyms) through the profanity check."""
    bad = added_profanity(seed, v.text + " " + (v.text_pair or ""))
    if bad:
        return _reject(v, [], "profanity", f"adds {', '.join(bad)}")
    return _keep(v, ["profanity"])


def _neighbours(tokens: Sequence[Token], i: int, replace: dict[int, str] | None = None) -> tuple[list[str], list[str]]:
    replace = replace or {}
    left = [replace.get(j, tokens[j].text).lower() for j in range(max(0, i - 2), i)]
    right = [replace.get(j, tokens[j].text).lower() for j in range(i + 1, min(len(tokens), i + 3))]
    return left, right


def nominal_adjective(tokens: Sequence[Token], i: int) -> str | None:
    """Why adjective i stands for a noun ("asks what good the execution could do", "does no
    good", "is it any good ?"), or None. There a synonym or antonym is not English ("what
    decent the execution"); before a noun ("no good reason") the adjective is a plain one."""
    if i == 0 or tokens[i].tag not in ("JJ", "JJS"):
        return None
    before = tokens[i - 1].text.lower()
    after = tokens[i + 1].pos if i + 1 < len(tokens) else "PUNCT"
    if tokens[i].tag == "JJS":
        if before == "the" and after in NOMINAL_SUPERLATIVE_AFTER:
            return f"'the {tokens[i].text.lower()}' opens a clause of its own (a fixed frame, not a judgement)"
        if tokens[i - 1].tag == "POS" and after not in ("NOUN", "PROPN", "ADJ", "NUM"):
            # "new york's finest" (its police), "hollywood's best": a group named by it
            return f"'{tokens[i - 1].text} {tokens[i].text.lower()}' names a group (the superlative as a noun)"
        return None
    if before in NOMINAL_BEFORE and after not in ("NOUN", "PROPN", "ADJ", "NUM") and not _coordinated(tokens, i):
        return f"'{before} {tokens[i].text.lower()}' uses the adjective as a noun"
    end = i + 1 >= len(tokens) or tokens[i + 1].text in _SENTENCE_ENDS
    if before == "the" and (after in NOMINAL_AFTER_THE or end):
        return f"'the {tokens[i].text.lower()}' names a group of people (the adjective as a noun)"
    return None


def _coordinated(tokens: Sequence[Token], i: int) -> bool:
    """Adjective i is joined by a conjunction to another modifier of a noun ("no good or
    decent reason"), not ending its phrase before a new predicate ("none of them are ever
    any good or make any money")."""
    if i + 2 >= len(tokens) or tokens[i + 1].pos != "CCONJ":
        return False
    return tokens[i + 2].pos in ("ADJ", "NOUN", "PROPN", "NUM", "ADV")


def reflexive_verb(tokens: Sequence[Token], i: int) -> str | None:
    """Why verb i with a reflexive object is an idiom of its own ("enjoy yourselves" is have
    a good time: "like yourselves" is self-esteem), or None."""
    if tokens[i].pos != "VERB" or i + 1 >= len(tokens) or tokens[i + 1].text.lower() not in REFLEXIVES:
        return None
    return f"'{tokens[i].text} {tokens[i + 1].text}': a verb with a reflexive object is an idiom of its own"


def _adverb_base(adverb: str) -> str:
    """The adjective an -ly adverb is made from: hilariously -> hilarious, horribly ->
    horrible, happily -> happy, ironically -> ironic."""
    for suffix, base in (("ically", "ic"), ("ibly", "ible"), ("ably", "able"), ("ily", "y"), ("ly", "")):
        if adverb.endswith(suffix) and len(adverb) > len(suffix) + 2:
            return adverb[: -len(suffix)] + base
    return adverb


@lru_cache(maxsize=1)
def _intensifiers() -> frozenset[str]:
    from vaderSentiment.vaderSentiment import BOOSTER_DICT  # VADER's intensifiers

    return frozenset(BOOSTER_DICT)


def _same_strong_sign(tilt: float, lean: float) -> bool:
    """Adverb and adjective are both polar (|value| >= POLAR_ADVERB) and of one sign: the
    adjective's antonym would make an oxymoron ("fabulously funny" -> "fabulously unfunny")."""
    return abs(tilt) >= POLAR_ADVERB and abs(lean) >= POLAR_ADVERB and tilt * lean > 0


def polar_adverb(tokens: Sequence[Token], i: int) -> str | None:
    """Why adjective i is judged by the polar -ly adverb before it, or None. The adverb
    fixes the word's reading: its antonym turns the phrase into an oxymoron ("delightfully
    charming" -> "delightfully charmless"), and an ironic use has no synonym ("hilariously
    wicked" is fun, not evil)."""
    if i == 0 or tokens[i].pos != "ADJ" or tokens[i - 1].tag != "RB":
        return None
    adverb = tokens[i - 1].text.lower()
    if not adverb.endswith("ly") or adverb in DEGREE_ADVERBS:
        return None
    tilt = max(word_polarity(adverb), word_polarity(_adverb_base(adverb)), key=abs)
    if adverb in _intensifiers():
        # VADER's intensifiers scale; one made from a polar adjective also judges when it
        # agrees with the word ("awfully good" -> "awfully bad" stays)
        judged = _same_strong_sign(tilt, word_polarity(tokens[i].text.lower(), tokens[i].lemma))
    else:
        judged = abs(tilt) >= POLAR_ADVERB or _agreeing_adverb(adverb, tokens[i])
    if judged:
        return f"'{adverb} {tokens[i].text.lower()}': the polar adverb sets the adjective's reading"
    return None


def _strongest(word: str, lemma: str | None = None) -> float:
    """The source polarity (VADER, AFINN, TextBlob) of largest magnitude, 0 if none."""
    return max(polar_sources(word, lemma).values(), key=abs, default=0.0)


def _agreeing_adverb(adverb: str, adjective: Token) -> bool:
    """The adverb is polar only in TextBlob's review lexicon ("refreshingly") and agrees in
    sign with a polar adjective ("refreshingly honest" -> "refreshingly dishonest"). Where
    they disagree ("mostly boring") the adverb does not judge."""
    tilt = _strongest(adverb) or _strongest(_adverb_base(adverb))
    return _same_strong_sign(tilt, _strongest(adjective.text.lower(), (adjective.lemma or "").lower() or None))


def table_phrase(tokens: Sequence[Token], i: int) -> str | None:
    """The curated table's fixed phrase that token i is part of ("that awkward age"), or None."""
    upos = PAIR_TAGS.get(tokens[i].tag)
    entry = curated((tokens[i].lemma or tokens[i].text).lower(), upos) if upos else None
    if entry is None:
        return None
    words = [t.text.lower() for t in tokens]
    own = {words[i], (tokens[i].lemma or words[i]).lower()}
    for phrase in entry.fixed:
        parts = phrase.split()
        for k, part in enumerate(parts):
            start = i - k
            if part not in own or start < 0 or start + len(parts) > len(tokens):
                continue
            window = words[start : start + len(parts)]
            if all(w == p for j, (w, p) in enumerate(zip(window, parts)) if j != k):
                return f"'{' '.join(window)}' is a fixed phrase of the substitutes table ('{phrase}')"
    return None


# Nouns that "great" or "good" measures rather than judges ("made with great evident care",
# "a great deal", "for a good while"), and adjectives a "good" or "nice" before them
# intensifies ("a good , hard yank", "a nice cool glass"): there an excellent or a poor one is
# another sense.
AMOUNT_NOUNS = frozenset(
    "care deal lengths length detail pains extent effort importance interest speed relief while".split()
)
INTENSIFIED_ADJECTIVES = frozenset("hard long close swift thorough healthy cool big warm quiet clean".split())


def amount_sense(tokens: Sequence[Token], i: int) -> str | None:
    """Why "great"/"good" at i measures an amount, or "good"/"nice" intensifies the adjective
    after it ("a nice cool glass"), or None."""
    word = tokens[i].text.lower()
    if word not in ("great", "good", "nice"):
        return None
    j = i + 1
    while j < len(tokens) and j <= i + 2 and tokens[j].pos in ("ADJ", "ADV"):
        j += 1  # "great evident care"
    if word != "nice" and j < len(tokens) and tokens[j].text.lower() in AMOUNT_NOUNS:
        return f"'{word} ... {tokens[j].text}': {word} says how much, not how good"
    k = i + 2 if i + 1 < len(tokens) and tokens[i + 1].text in (",", "and") else i + 1
    if word in ("good", "nice") and k < len(tokens) and tokens[k].text.lower() in INTENSIFIED_ADJECTIVES:
        return f"'{word} {tokens[k].text}' intensifies, it does not judge"
    return None


# Nouns that introduce the words of a saying after a colon ("the old hollywood saw : evil
# is interesting and good is boring"): what follows is quoted, not the reviewer's own words.
SAYING_NOUNS = frozenset("saw adage maxim motto proverb saying credo mantra slogan tagline aphorism".split())
_CLAUSE_ENDS = {".", "!", "?", ";"}


def quoted_saying(tokens: Sequence[Token], i: int) -> str | None:
    """Why token i is in a saying the sentence quotes after "<saying noun> :", or None."""
    for k in range(i - 1, 0, -1):
        text = tokens[k].text
        if text in _CLAUSE_ENDS:
            return None
        if text == ":" and tokens[k - 1].text.lower() in SAYING_NOUNS:
            return f"'{tokens[i].text}' is in the {tokens[k - 1].text.lower()} the sentence quotes after ':'"
    return None


def fixed_expression(tokens: Sequence[Token], i: int, ref: ReferenceModel) -> str | None:
    """Why token i is part of a fixed expression, or None."""
    from checkray.engine.lang.wordnet import is_multiword

    why = (
        nominal_adjective(tokens, i)
        or reflexive_verb(tokens, i)
        or polar_adverb(tokens, i)
        or table_phrase(tokens, i)
        or quoted_saying(tokens, i)
        or amount_sense(tokens, i)
    )
    if why:
        return why
    words = [t.text.lower() for t in tokens]
    lemmas = [(t.lemma or t.text).lower() for t in tokens]
    for start in range(max(0, i - 2), i + 1):
        for end in range(max(i + 1, start + 2), min(len(tokens), start + 3) + 1):
            for seq in (words[start:end], lemmas[start:end]):
                # "good and" (= very) is a WordNet adverb, but "good and funny" is no idiom
                if all(w.isalpha() for w in seq) and not set(seq) & {"and", "or", "but"} and is_multiword(seq):
                    return f"'{' '.join(words[start:end])}' is a WordNet multiword expression"
    for a, b in ((i - 1, i), (i, i + 1)):
        if a < 0 or b >= len(tokens) or not (words[a].isalpha() and words[b].isalpha()):
            continue
        if words[a] in _stop_words() or words[b] in _stop_words():
            continue  # "his wife", "an intelligent": grammar, not an expression
        n = ref.count(words[a], words[b])
        if n >= MIN_COLLOCATION:
            pmi = n * ref.total / max(1, ref.count(words[a]) * ref.count(words[b]))
            if pmi >= PMI_COLLOCATION:
                return f"'{words[a]} {words[b]}' is a collocation of the reference corpus ({n}x, {pmi:.0f}x chance)"
    for a in range(max(0, i - 2), i + 1):  # "sad to say": a trigram far likelier than either split
        tri = words[a : a + 3]
        if len(tri) < 3 or not all(w.isalpha() for w in tri):
            continue
        n = ref.count(*tri)
        if n < MIN_COLLOCATION:
            continue
        split = min(
            n * ref.total / max(1, ref.count(tri[0], tri[1]) * ref.count(tri[2])),
            n * ref.total / max(1, ref.count(tri[0]) * ref.count(tri[1], tri[2])),
        )
        if split >= PMI_TRIGRAM:
            return f"'{' '.join(tri)}' is a collocation of the reference corpus ({n}x, {split:.0f}x chance)"
    return None


def named_entity(tokens: Sequence[Token], i: int, ref: ReferenceModel, ents: Sequence[str] | None = None) -> str | None:
    """Why token i is inside a name or title, or None."""
    tok = tokens[i]
    if ents is not None and ents[i] in _NAME_ENTS:
        return f"inside a named entity ({ents[i]})"
    if tok.pos == "PROPN":
        return "a proper noun"
    if in_compound(tokens, i):
        return "half of a hyphenated word"
    quotes = [j for j, t in enumerate(tokens) if t.text in _QUOTES]
    if any(a < i < b for a, b in zip(quotes[::2], quotes[1::2])) or single_quoted(tokens, i):
        return "inside a quoted span"
    if capitalised_mid_sentence(tokens, i):  # cased text: "Hey , Happy !" names the film Hey, Happy!
        return f"'{tok.text}' is capitalised mid-sentence (a name or a title)"
    if adjective_subject(tokens, i):
        return f"'{tok.text}' opens the sentence as its subject: an adjective there is a title ('earnest falls short')"
    words = [t.text.lower() for t in tokens]
    if ref.title_like(words[i]):
        return f"'{words[i]}' is mostly written capitalised (a name)"
    for a, b in ((i - 1, i), (i, i + 1)):
        if 0 <= a and b < len(tokens) and ref.title_like(words[a], words[b], share=0.4):
            return f"'{words[a]} {words[b]}' is mostly written capitalised (a title or name)"
    return None


def capitalised_mid_sentence(tokens: Sequence[Token], i: int) -> bool:
    """Token i is capitalised where a sentence does not start (not "I"): in cased text, a
    name or a title."""
    return i > 0 and tokens[i].text[:1].isupper() and tokens[i].text != "I" and tokens[i - 1].text not in _SENTENCE_ENDS


def adjective_subject(tokens: Sequence[Token], i: int) -> bool:
    """Adjective i is among the words that open the sentence before its first finite verb,
    and those words are adjectives and conjunctions only: no adjective is a subject, so
    they name something, a title in lower-cased text ("earnest falls short of its
    predecessor", "lovely and amazing is holofcener's ...")."""
    if tokens[i].pos != "ADJ":
        return False
    k = 0
    while k < len(tokens) and (tokens[k].pos in ("ADJ", "CCONJ") or tokens[k].text == "&"):
        k += 1
    finite = k < len(tokens) and (tokens[k].tag == "POS" or tokens[k].tag in _FINITE)
    return finite and i < k and tokens[0].pos == "ADJ"


def single_quoted(tokens: Sequence[Token], i: int, longest: int = 6, quoted: int = 20) -> bool:
    """Token i sits inside a short span in single quotes: a title, or words mentioned
    rather than used ("the 'laughing at' variety", "'easier' to watch"). An opening quote
    is glued to the word after it; the closing one comes within ``longest`` tokens (a
    lone "'" with a space after it is a plural possessive: "the actors ' work"). A
    Penn-Treebank opening quote, a backtick, is never an apostrophe, so its span may run
    to ``quoted`` tokens (SST's "the anarchist maxim that ` the urge to destroy is also a
    creative urge '"), as may a glued one that opens after a space and closes before
    punctuation (the lower-cased Rotten Tomatoes' "that 'the urge ... urge' ,")."""
    for a in range(max(0, i - quoted), i):
        if tokens[a].text == "`":
            # spaCy splits a double "``" into two backticks and keeps the closing "''" whole
            end = min(len(tokens), a + quoted + 2)
            close = next((b for b in range(a + 1, end) if tokens[b].text in ("'", "''")), None)
            if close is not None and a < i < close:
                return True
    for a in range(max(0, i - quoted), i):
        if tokens[a].text not in ("'", "‘") or tokens[a].ws or not tokens[a + 1].text[:1].isalnum():
            continue
        close = next((b for b in range(a + 2, min(len(tokens), a + quoted + 2)) if tokens[b].text in ("'", "’")), None)
        if close is None or not a < i < close:
            continue
        # Past ``longest`` tokens, a quotation opens after a space and closes before
        # punctuation or the end ("the maxim that 'the urge to destroy is also a creative
        # urge' ,", "his poem to , 'do not go gentle into that good theatre . '"); a lone
        # "'" before a word is a plural possessive ("the actors ' work").
        if close - a <= longest + 1 or ((a == 0 or tokens[a - 1].ws) and _ends_quote(tokens, close)):
            return True
    return False


def _ends_quote(tokens: Sequence[Token], close: int) -> bool:
    return close + 1 == len(tokens) or not tokens[close + 1].text[:1].isalnum()


def _scored(*words: str) -> bool:
    from checkray.engine.lang.polarity import afinn_lexicon, vader_lexicon

    return any(w and (w.lower() in vader_lexicon() or w.lower() in afinn_lexicon()) for w in words)


def _reject(v: Variant, passed: list[str], check: str, reason: str) -> Variant:
    return Variant(
        v.op, v.text, v.text_pair, v.index, v.word, v.replacement, ",".join(passed), check, " ".join(reason.split())
    )


def _keep(v: Variant, passed: list[str]) -> Variant:
    return Variant(v.op, v.text, v.text_pair, v.index, v.word, v.replacement, ",".join(passed))


def ranked_candidates(lemma: str, upos: str, kind: Kind, ref: ReferenceModel) -> list[tuple[str, int]]:
    """(candidate, sense rank): a curated word's own candidates, in the table's order, all of
    the sense reviews mean (rank 1); else those of the word's most frequent WordNet senses,
    in sense order, then corpus frequency. A word curated as ``never``: none."""
    from checkray.engine.lang.wordnet import sense_candidates

    entry = curated(lemma, upos)
    if entry is not None:
        return [(c, 1) for c in entry.candidates(kind)]
    cands = sense_candidates(lemma, upos, kind, SENSES)
    return sorted(cands, key=lambda c: (c[1], -ref.count(c[0])))[:CANDIDATES]


def _never(lemma: str, upos: str) -> bool:
    entry = curated(lemma, upos)
    return entry is not None and entry.never is not None


def context_score(tokens: Sequence[Token], i: int, form: str, ref: ReferenceModel) -> tuple[float, bool]:
    """(sum of log counts of the n-grams ``form`` makes at token i, whether it forms an
    attested bigram with a content-word neighbour or has none)."""
    import math

    left, right = _neighbours(tokens, i, replace_word(tokens, i, form))
    w = form.lower()
    grams = []
    if left:
        grams.append((left[-1], w))
    if right:
        grams.append((w, right[0]))
    grams += ReferenceModel._trigrams(left, w, right)
    score = sum(math.log1p(ref.count(*g)) for g in grams)
    content = [n for n in (left[-1:] + right[:1]) if n.isalpha() and n not in _stop_words()]
    attested = not content or any(ref.count(*g) > 0 for g in grams[:2] if set(g) & set(content))
    return score, attested


_VOWELS = re.compile(r"[aeiouy]")
_DOUBLED = re.compile(r"(.)\1+")


def spelling_variant(word: str, candidate: str) -> bool:
    """Whether ``candidate`` spells ``word`` another way (favorite / favourite, humorous /
    humourous, theater / theatre, gray / grey): the same first letter, the same consonants
    in order (doubled letters and s/z counted once) and most letters alike, so short words
    that differ in a vowel (bad / bid) are other words. WordNet lists such pairs as
    synonyms, and as a closer sentence one tests nothing."""
    a, b = word.lower(), candidate.lower()
    if a == b or a[:1] != b[:1] or difflib.SequenceMatcher(a=a, b=b).ratio() < 0.75:
        return False

    def skeleton(w: str) -> str:
        return _DOUBLED.sub(r"\1", _VOWELS.sub("", w.replace("z", "s")))

    return skeleton(a) == skeleton(b)


def word_checks(
    tokens: Sequence[Token],
    i: int,
    candidate_lemma: str,
    kind: Kind,
    ref: ReferenceModel,
    *,
    guard: bool,
    position: str | None,
    seed_text: str,
    rank: int = 1,
) -> tuple[Variant, list[str], str | None, str | None]:
    """One candidate at token i through the checks: (variant, passed, failed check, reason)."""
    tok = tokens[i]
    form = inflect(candidate_lemma, tok.tag)
    base = Variant(kind, detokenize(tokens), index=i, word=tok.text, replacement=form or candidate_lemma)
    passed: list[str] = []
    if form is None or " " in form or "_" in form:
        return base, passed, "sense", f"'{candidate_lemma}' has no single-word {tok.tag} form"
    variant = Variant(kind, detokenize(tokens, replace_word(tokens, i, form)), index=i, word=tok.text, replacement=form)
    if kind == "synonym" and spelling_variant(tok.text, form):
        return variant, passed, "sense", f"'{form}' is another spelling of '{tok.text}', not another word"
    why = person_sense(tokens, i, form) or objectless_verb(tokens, i, candidate_lemma) or stranded_npi(tokens, i, form)
    if why:
        return variant, passed, "sense", why
    if position:  # a word that must not be edited says so before a candidate's own sense
        check, why = position.split(":", 1)
        return variant, passed + ["sense"], check, why
    why = superlative_sense(tokens, i, form) or negated_prefix_antonym(tokens, i, form)
    if why:
        return variant, passed, "sense", why
    passed.append("sense")
    passed += ["fixed_expression", "named_entity"]
    if ref.count(form) < MIN_COUNT:
        return (
            variant,
            passed,
            "common_word",
            f"'{form}' occurs {ref.count(form)}x in the reference corpus (< {MIN_COUNT})",
        )
    passed.append("common_word")
    if guard:
        cls = polarity_class(tok.text.lower(), (tok.lemma or tok.text).lower())
        want = cls if kind == "synonym" else _OPPOSITE.get(cls)
        got = polarity_class(form, candidate_lemma)
        if cls == "neutral":
            return variant, passed, "polarity", f"'{tok.text}' is neutral"
        # A candidate neither lexicon lists inherits the sense's polarity (WordNet's
        # synonymy / antonymy); one the lexicons score must have the wanted class.
        if got != want and (got != "neutral" or _scored(form, candidate_lemma)):
            return variant, passed, "polarity", f"'{form}' is {got}, a {kind} of {cls} '{tok.text}' must be {want}"
        passed.append("polarity")
    new_left, right = _neighbours(tokens, i, replace_word(tokens, i, form))
    left, _ = _neighbours(tokens, i)
    why = (
        repeated_stem(tokens, i, form)
        or broken_repetition(tokens, i)
        or broken_echo(tokens, i)
        or ref.fits(left, tok.text.lower(), form.lower(), right, new_left)
        or unwritten_adverb_pair(tokens, i, form, ref)
    )
    if why is None and rank > 1 and not context_score(tokens, i, form, ref)[1]:
        # A less frequent sense needs positive evidence: the candidate seen beside a
        # content-word neighbour ("smart wordplay" -> "chic wordplay" is never seen).
        why = f"'{form}' is from sense {rank} of '{tok.text}' and never seen beside its content-word neighbours"
    if why:
        return variant, passed, "context_fit", why
    passed.append("context_fit")
    bad = added_profanity(seed_text, variant.text)
    if bad:
        return variant, passed, "profanity", f"adds {', '.join(bad)}"
    passed.append("profanity")
    return variant, passed, None, None


def repeated_stem(tokens: Sequence[Token], i: int, form: str) -> str | None:
    """Why ``form`` in place of word i repeats a stem the sentence already has, or None:
    "smart wordplay and clever plot" -> "clever wordplay and clever plot"; "a lovely and
    beautifully photographed romance" -> "a beautiful and beautifully ..."; an adverb's stem
    is its adjective's ("fun ... entertainingly nasty" -> "entertaining ... entertainingly")."""
    own = stem(form)
    again = [
        t.text
        for j, t in enumerate(tokens)
        if j != i and t.text.isalpha() and own in (stem(t.text), stem(_adverb_base(t.text.lower())))
    ]
    return f"'{form}' repeats '{again[0]}' of the sentence (one stem)" if again else None


def broken_repetition(tokens: Sequence[Token], i: int, span: int = 3) -> str | None:
    """Why word i is one half of a repetition, or None: the same word again within ``span``
    tokens with only short function words between ("the best of the best", "over and
    over", "more and more"). Editing one half breaks the figure ("the worst of the best")."""
    word = tokens[i].text.lower()
    for j in range(max(0, i - span - 1), min(len(tokens), i + span + 2)):
        if j == i or tokens[j].text.lower() != word:
            continue
        between = tokens[min(i, j) + 1 : max(i, j)]
        if between and all(t.text.isalpha() and t.text.lower() in _stop_words() for t in between):
            phrase = " ".join(t.text for t in tokens[min(i, j) : max(i, j) + 1])
            return f"'{tokens[i].text}' is half of the repetition '{phrase}'"
    return None


def broken_echo(tokens: Sequence[Token], i: int) -> str | None:
    """Why word i echoes another copy of itself further on, or None: the copies share their
    two words before or after, or the word each side ("a great premise but only a great
    premise", "is n't really good enough ... is n't really good enough"), or one is negated
    or tied back ("silly beyond comprehension , and even if it were n't silly", "an equally
    beautiful"). Editing one copy breaks the echo; copies in different frames ("a boring
    movie about a boring man", "bad writing , bad direction") stay editable."""
    word = tokens[i].text.lower()
    words = [t.text.lower() for t in tokens]
    for j, other in enumerate(words):
        if j == i or other != word:
            continue
        same_left = i >= 2 and j >= 2 and words[i - 2 : i] == words[j - 2 : j]
        same_right = words[i + 1 : i + 3] == words[j + 1 : j + 3] and len(words[i + 1 : i + 3]) == 2
        same_frame = 0 < i < len(words) - 1 and 0 < j < len(words) - 1
        same_frame = same_frame and (words[i - 1], words[i + 1]) == (words[j - 1], words[j + 1])
        tied = any(k >= 0 and words[k] in NEGATORS | ECHO_WORDS for k in (i - 1, j - 1))
        if same_left or same_right or same_frame or tied:
            return f"'{tokens[i].text}' echoes its other copy in the sentence; editing one breaks the echo"
    return None


def superlative_sense(tokens: Sequence[Token], i: int, form: str) -> str | None:
    """Why the superlative ``form`` reads in another sense than the word at i, or None."""
    sense = SUPERLATIVE_SENSES.get(form.lower())
    return f"'{form}' in place of '{tokens[i].text}' reads as {sense}" if sense else None


def negated_prefix_antonym(tokens: Sequence[Token], i: int, form: str) -> str | None:
    """Why ``form``, the word at i with a negative prefix ("unfunny"), stands in a negated
    phrase, or None: "not very funny" -> "not very unfunny" is a double negative no one writes.
    The negator is the word before, or the one before that with a degree word between."""
    low, word = form.lower(), tokens[i].text.lower()
    if not any(
        low.startswith(p) and low[len(p) :] in (word, (tokens[i].lemma or "").lower()) for p in NEGATIVE_PREFIXES
    ):
        return None
    before = [tokens[k].text.lower() for k in range(max(0, i - 2), i)]
    if before and (before[-1] in NEGATORS or (len(before) == 2 and before[0] in NEGATORS)):
        return f"'{' '.join(before)} {form}' negates a negative prefix: a double negative"
    return None


def unwritten_adverb_pair(tokens: Sequence[Token], i: int, form: str, ref: ReferenceModel) -> str | None:
    """Why the adverb before adjective i never modifies ``form``, or None: "heavily flawed"
    -> "heavily perfect", "dead brilliant" -> "dead excellent", seen 0 times. An adverb that
    is no intensifier, degree or stance word picks the adjectives it goes with; "very",
    "really", "so", "undeniably" go with any."""
    if i == 0 or tokens[i].pos != "ADJ" or tokens[i - 1].tag != "RB":
        return None
    adverb = tokens[i - 1].text.lower()
    if not adverb.isalpha() or adverb in _ANY_ADJECTIVE_ADVERBS:
        return None
    if adverb in _intensifiers() or adverb in _stop_words():  # "as good as", "too", "rather", "not"
        return None
    if ref.count(adverb, form.lower()) == 0:
        return f"'{adverb} {form.lower()}' is never written in the reference corpus"
    return None


def person_sense(tokens: Sequence[Token], i: int, form: str) -> str | None:
    """Why the word at i or its candidate ``form`` is read in another sense before the noun
    after it, a person ("the sad schlock merchant" is a pathetic one; "good kids" -> "poor
    kids" are penniless ones), or None."""
    end = i + 1
    while end < len(tokens) and tokens[end].pos in ("NOUN", "PROPN"):
        end += 1  # the head of "schlock merchant" is its last noun; "daniel auteuil", a name
    after = tokens[end - 1]
    if end == i + 1 or not (denotes_person(after.text) or after.pos == "PROPN"):
        return None
    for word in (tokens[i].text.lower(), form.lower()):
        if word in PERSON_SENSES:
            return f"'{word} {after.text}': before a person {word} means {PERSON_SENSES[word]}"
    return None


# Words whose sense is negative enough to license a negative-polarity item after them
# ("it's difficult to feel anything much", "hard to imagine ... let alone funny"), and those
# items: a candidate that does not license them strands them ("it's easy to feel anything
# much" is not English).
NPI_LICENSERS = frozenset(
    "difficult hard tough impossible unable unlikely reluctant hesitant fail fails failed refuse refuses refused "
    "deny denies denied doubt doubts doubted".split()
)
NEGATIVE_POLARITY_ITEMS = (("let", "alone"), ("at", "all"), ("anything", "much"), ("much", "of", "anything"))


def stranded_npi(tokens: Sequence[Token], i: int, form: str) -> str | None:
    """Why replacing word i by ``form`` leaves a negative-polarity item after it without
    its licence, or None."""
    word = tokens[i].text.lower()
    if word not in NPI_LICENSERS or form.lower() in NPI_LICENSERS:
        return None
    words = [t.text.lower() for t in tokens[i + 1 :]]
    for item in NEGATIVE_POLARITY_ITEMS:
        if any(tuple(words[k : k + len(item)]) == item for k in range(len(words))):
            return f"'{' '.join(item)}' after '{tokens[i].text}' needs its negative sense: '{form}' strands it"
    return None


def objectless_verb(tokens: Sequence[Token], i: int, candidate_lemma: str) -> str | None:
    """Why the candidate cannot stand for verb i used without an object, or None. A verb
    that ends its clause with no object ("go see it and enjoy .") takes only a candidate
    WordNet lets stand alone: "go see it and hate ." is not English. A verb whose object
    sits elsewhere ("things to like", a relative clause) is not checked."""
    tok = tokens[i]
    if tok.pos != "VERB" or (i + 1 < len(tokens) and tokens[i + 1].text not in _SENTENCE_ENDS | {",", ";", "!"}):
        return None
    if tok.dep:
        if tok.dep in ("relcl", "acl", "amod", "advcl", "xcomp"):
            return None
        if any(tokens[j].dep in OBJECT_DEPS for j in _children(tokens).get(i, [])):
            return None
    elif not (i == 0 or tokens[i - 1].text.lower() in ("and", "or", ",")):
        # unparsed (single sentences are tagged only): a verb ending a coordination or
        # standing alone ("sit back and enjoy .") has no object; one after its subject may
        # close a relative clause whose object went before ("a film you'll enjoy .")
        return None
    if _stands_alone(candidate_lemma.lower()):
        return None
    return f"'{tok.text}' has no object here and '{candidate_lemma}' needs one"


@lru_cache(maxsize=4096)
def _stands_alone(lemma: str, senses: int = 4) -> bool:
    """WordNet lists an intransitive frame ("Somebody ----s") for one of the verb's first
    senses, or does not know the verb (no evidence either way)."""
    from checkray.engine.lang.wordnet import wordnet

    synsets = wordnet().synsets(lemma, pos="v")[:senses]
    if not synsets:
        return True
    for synset in synsets:
        for lem in synset.lemmas():
            if lem.name().lower() != lemma:
                continue
            if any(f.endswith((f" {lemma}", f" {lemma} PP")) for f in lem.frame_strings()):
                return True
    return False


def position_verdict(tokens: Sequence[Token], i: int, ref: ReferenceModel, ents: Sequence[str] | None) -> str | None:
    """'check:reason' when token i must not be edited (fixed expression, name, title)."""
    why = fixed_expression(tokens, i, ref)
    if why:
        return f"fixed_expression:{why}"
    why = named_entity(tokens, i, ref, ents)
    return f"named_entity:{why}" if why else None


def checked_substitutions(
    tokens: Sequence[Token],
    kind: Kind,
    ref: ReferenceModel,
    *,
    ents: Sequence[str] | None = None,
    guard: bool = True,
    per_word: int = 1,
    senses: dict[int, int] | None = None,
    wordnet_fallback: bool = True,
) -> list[Variant]:
    """Per substitutable word (adjective or verb, any inflection) up to ``per_word`` kept
    variants, and every candidate rejected on the way (``check``/``reason`` set).

    ``senses`` (token index -> WordNet sense rank): for synonyms it is filled with the sense
    of each kept synonym; for antonyms it restricts a word's antonyms to that sense (or the
    first), so that CR1's antonym opposes the sense its synonym found in this context
    ("sick society": ill / healthy, not ill / well). ``wordnet_fallback=False``: only words
    the curated table lists are substituted; another polar word is one rejection (``sense``)."""
    out: list[Variant] = []
    seed_text = detokenize(tokens)
    for i, tok in enumerate(tokens):
        upos = WORD_TAGS.get(tok.tag)
        if upos is None or tok.pos not in ("ADJ", "VERB") or not tok.text.isalpha():
            continue
        lemma = (tok.lemma or tok.text).lower()
        if guard and polarity_class(tok.text.lower(), lemma) == "neutral":
            continue  # not a sentiment word: no candidate is generated (as the plain operator)
        if _never(lemma, upos):
            continue  # its sense cannot be read from the sentence around it: not a substitution site
        if not wordnet_fallback and curated(lemma, upos) is None:
            why = f"'{lemma}' is not in the substitutes table, and WordNet's senses are not used (substitutes: table)"
            out.append(Variant(kind, seed_text, index=i, word=tok.text, check="sense", reason=why))
            continue
        position = position_verdict(tokens, i, ref, ents)
        good: list[tuple[float, int, Variant]] = []
        for n, (cand, rank) in enumerate(ranked_candidates(lemma, upos, kind, ref)):
            v, passed, check, why = word_checks(
                tokens, i, cand, kind, ref, guard=guard, position=position, seed_text=seed_text, rank=rank
            )
            if kind == "antonym" and senses is not None and i in senses and rank not in (1, senses[i]):
                check = "sense"
                why = f"antonym of sense {rank}; the synonym kept here is of sense {senses[i]}"
                passed = []
            if check:
                out.append(_reject(v, passed, check, why or ""))
                continue
            # Best fit first: the n-grams it forms, less a penalty per less frequent sense.
            score = context_score(tokens, i, v.replacement or cand, ref)[0] - SENSE_PENALTY * (rank - 1)
            good.append((-score, n, rank, _keep(v, passed)))
        best = sorted(good)[:per_word]
        if best and kind == "synonym" and senses is not None:
            senses[i] = best[0][2]
        out += [v for *_, v in best]
    return out


def strength_shift(word: str, replacement: str, lemma: str | None = None) -> float:
    """|polarity(word) - polarity(replacement)|: how much a synonym changes the strength."""
    return abs(word_polarity(word, lemma) - word_polarity(replacement))


# ------------------------------------------------------------------ gender swap (CR2)

PRONOUNS = {"he", "she", "him", "her", "his", "hers", "himself", "herself"}
_POSSESSED_TAGS = {"NN", "NNS", "NNP", "NNPS", "JJ", "JJR", "JJS", "VBG", "CD"}
_ADVERBIAL_NOUNS = {"yesterday", "today", "tonight", "tomorrow", "again", "now", "home"}
GENDER_CHECKS = ("person", "fixed_expression", "named_entity", "consistent", "profanity")


@lru_cache(maxsize=4096)
def denotes_person(word: str) -> bool:
    """A noun whose most frequent WordNet noun sense is a person (noun.person)."""
    from checkray.engine.lang.wordnet import wordnet

    synsets = wordnet().synsets(word.lower(), pos="n")
    return bool(synsets) and synsets[0].lexname() == "noun.person"


def checked_gender_swap(
    tokens: Sequence[Token],
    ref: ReferenceModel,
    *,
    ents: Sequence[str] | None = None,
    extra_pairs: str | None = None,
) -> list[Variant]:
    """Every word denoting a person's gender swapped at once: pronouns, person nouns
    (actor/actress, girls; not "host to some sequences", not "female" before a non-person
    noun), first names (case-insensitive when the corpus is lower-cased and the corpus
    writes the word capitalised). Refused (one rejected variant with the reason) when a
    gendered word sits in a title or fixed expression, or when a person's mention cannot be
    swapped with the rest (a name of both genders' lists, or a PERSON name we have no
    counterpart for beside swapped pronouns)."""
    words, names = gender_lexicon(extra_pairs)
    lower_names = {k.lower(): v for k, v in names.items()}
    replace: dict[int, str] = {}
    problems: list[tuple[str, str]] = []
    gendered_any = False
    for i, tok in enumerate(tokens):
        low = tok.text.lower()
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        repl = None
        if low == "her":
            possessive = tok.tag == "PRP$" or (
                nxt is not None and nxt.tag in _POSSESSED_TAGS and nxt.text.lower() not in _ADVERBIAL_NOUNS
            )
            # "her maid claims" tagged a verb ("made"): a word with no verb reading is owned
            possessive = possessive or (nxt is not None and nxt.tag.startswith("VB") and _no_verb_reading(nxt.text))
            repl = "his" if possessive else "him"
        elif low in PRONOUNS:
            repl = words.get(low, "her")
        elif low in words and tok.pos in ("NOUN", "ADJ") and tok.text.isalpha():
            gendered_any = True
            if tok.pos == "NOUN" and not (denotes_person(low) or denotes_person((tok.lemma or low).lower())):
                problems.append(("person", f"'{tok.text}' does not denote a person here"))
                continue
            if tok.pos == "ADJ":  # "female director" yes, "female empowerment picture" no
                if nxt is None or nxt.pos != "NOUN" or not denotes_person((nxt.lemma or nxt.text).lower()):
                    problems.append(("person", f"'{tok.text}' does not modify a person"))
                    continue
            repl = words[low]
            if tok.pos == "NOUN":  # "host to some sequences" -> "hostess to": not this sense
                left, right = _neighbours(tokens, i)
                why = (
                    ref.fits(left, low, repl, right) or vocative(tokens, i) or unwritten_compound(tokens, i, repl, ref)
                )
                if why:
                    problems.append(("person", f"'{tok.text}' -> '{repl}': {why}"))
                    continue
        elif low in lower_names and tok.text.isalpha() and (tok.pos == "PROPN" or ref.title_like(low)):
            repl = lower_names[low]
            if tok.text[:1].islower():
                repl = repl.lower()
        if repl is None:
            continue
        gendered_any = True
        position = position_verdict(tokens, i, ref, None) if low not in PRONOUNS else None
        if position:
            check, why = position.split(":", 1)
            problems.append((check, f"'{tok.text}': {why}"))
            continue
        replace[i] = repl if tok.pos == "PROPN" else match_case(repl, tok.text)
    if not gendered_any:
        return []
    seed_text = detokenize(tokens)
    first = min(replace) if replace else 0
    text = detokenize(tokens, replace) if replace else seed_text
    variant = Variant(
        "gender", text, index=first, word=tokens[first].text, replacement=replace.get(first, tokens[first].text)
    )
    passed: list[str] = []
    for check in ("person", "fixed_expression", "named_entity"):
        bad = [why for c, why in problems if c == check]
        if bad:
            return [_reject(variant, passed, check, "; ".join(bad))]
        passed.append(check)
    if not replace:
        return []
    why = _inconsistent(tokens, replace, ents, ref, lower_names)
    if why:
        return [_reject(variant, passed, "consistent", why)]
    passed.append("consistent")
    bad_words = added_profanity(seed_text, text)
    if bad_words:
        return [_reject(variant, passed, "profanity", f"adds {', '.join(bad_words)}")]
    passed.append("profanity")
    return [_keep(variant, passed)]


def _no_verb_reading(word: str) -> bool:
    """An alphabetic word lemminflect has no verb lemma for ("maid", "boss")."""
    from checkray.engine.costello.seed_slips import verb_lemmas

    return word.isalpha() and not verb_lemmas(word.lower())


# What may stand beside a word said to someone or exclaimed ("shred , dude .", "Man , that
# was close", "oh boy"): a sentence edge, a comma or dash, an interjection.
_VOCATIVE_EDGES = {",", "--", "-", "!", "?", ".", "...", ";", ":"}
_INTERJECTIONS = {"oh", "hey", "yo", "ah", "uh", "well", "boy"}


def vocative(tokens: Sequence[Token], i: int) -> str | None:
    """Why noun i addresses the reader or exclaims, or None: set off on both sides (a
    sentence edge, a comma or dash, "oh") with no determiner. "shred , dude" -> "shred ,
    chick" and "oh boy" -> "oh girl" name no person of the sentence; the swap changes the
    register, not a person's gender."""
    prev = tokens[i - 1].text.lower() if i > 0 else None
    nxt = tokens[i + 1].text if i + 1 < len(tokens) else None
    before = prev is None or prev in _VOCATIVE_EDGES or prev in _INTERJECTIONS
    after = nxt is None or nxt in _VOCATIVE_EDGES
    if before and after:
        return "said to someone or exclaimed, not a person of the sentence"
    return None


def unwritten_compound(tokens: Sequence[Token], i: int, repl: str, ref: ReferenceModel) -> str | None:
    """Why noun i heads a compound whose swapped form the reference corpus never writes,
    or None: a non-person noun modifying it ("plastic army men" are toy soldiers, "a family
    man", "a con man"). A compound seen only once or twice escapes ``fits``; its swap,
    never seen at all, names a thing that is not there."""
    if i == 0:
        return None
    mod = tokens[i - 1]
    is_compound = mod.dep == "compound" and mod.head == i if mod.dep else mod.pos == "NOUN"
    if not is_compound or mod.pos not in ("NOUN", "PROPN") or denotes_person((mod.lemma or mod.text).lower()):
        return None
    if ref.count(mod.text.lower(), repl.lower()) == 0:
        return f"'{mod.text} {repl}' is a compound the reference corpus never writes"
    return None


@lru_cache(maxsize=8192)
def _english_word(word: str, lemma: str | None = None) -> bool:
    from checkray.engine.lang.wordnet import wordnet

    wn = wordnet()
    return bool(wn.synsets(word)) or bool(lemma and wn.synsets(lemma.lower()))


# Bodies and states of one sex, which a swapped person cannot keep (lemmas and forms).
SEX_SPECIFIC = frozenset(
    "breast breasts boob boobs tit tits bosom cleavage bra bikini womb uterus vagina ovary penis "
    "testicle testicles erection beard bearded moustache mustache pregnant pregnancy miscarriage "
    "menopause menstruation menstrual breastfeed breastfeeding lactate".split()
)
_GENDER_DEFINITION_WORDS = frozenset(
    {"female", "male", "woman", "man", "wife", "husband", "girl", "boy", "mother", "father"}
)


@lru_cache(maxsize=8192)
def _gendered_noun(word: str, lemma: str) -> bool:
    """A noun whose first WordNet sense is defined by a sex in its first four words: "a
    female lion" (lioness), "a woman religious" (nun), "a man whose wife is dead" (widower)."""
    from checkray.engine.lang.wordnet import wordnet

    for form in dict.fromkeys((word, lemma)):
        synsets = wordnet().synsets(form, pos="n")
        if synsets:
            head = synsets[0].definition().lower().replace(";", " ").split()[:4]
            return bool(_GENDER_DEFINITION_WORDS.intersection(head))
    return False


def _inconsistent(
    tokens: Sequence[Token],
    replace: dict[int, str],
    ents: Sequence[str] | None,
    ref: ReferenceModel,
    lower_names: dict[str, str],
) -> str | None:
    """Why the swap leaves a mention of a swapped person unswapped, or None: a first name
    (PERSON entity or a capitalised-in-corpus word) that no list maps, a word capitalised
    mid-sentence (cased text: a name or a title), or a noun the reference corpus mostly
    writes capitalised (a surname in lower-cased text:
    "soderbergh", "hoffman") or that WordNet does not know ("gantz", "ozpetek"), beside
    swapped pronouns or person nouns. A swap must not change a real person's gender, and
    which person a pronoun means cannot be told."""
    for j, tok in enumerate(tokens):
        if j in replace or not tok.text.isalpha():
            continue
        low = tok.text.lower()
        prev_is_name = j > 0 and (j - 1) in replace and tokens[j - 1].text.lower() in lower_names
        if prev_is_name:
            continue  # a surname after a swapped first name
        person_ent = ents is not None and ents[j] == "PERSON" and (j == 0 or ents[j - 1] != "PERSON")
        if person_ent or (low in lower_names and (tok.pos == "PROPN" or ref.title_like(low))):
            return f"'{tok.text}' names a person whose name is not swapped"
        if tok.pos in ("PROPN", "NOUN") and low not in _stop_words() and ref.title_like(low):
            return f"'{tok.text}' is a name (written capitalised in the reference corpus) the swap leaves as it is"
        if j == 0 and tok.pos == "PROPN" and tok.text[:1].isupper():
            # a name that opens the sentence: "Bright seems amused ... he", "Bow 's best moments"
            return f"'{tok.text}' opens the sentence as a proper noun: a name the swap leaves as it is"
        if j == 0 and _opens_as_subject(tokens):
            # lower-cased text: "bow's best moments ... he", "bright seems amused ... he" (no
            # adjective is a subject or an owner; the parser's guess for an unknown name)
            return f"'{tok.text}' opens the sentence as its subject or owner: a name the swap leaves as it is"
        if tok.pos in ("PROPN", "NOUN") and _famous_name(low):
            # "goodall and her chimpanzees": WordNet's first sense is a person (or place)
            return f"'{tok.text}' is first of all a name in WordNet (a real person the swap would regender)"
        if capitalised_mid_sentence(tokens, j):
            # cased text: "..., Silberling also trivializes" (spaCy: a verb), "in Talk to Her"
            return f"'{tok.text}' is capitalised mid-sentence: a name or a title the swap leaves as it is"
        if 0 < j < len(tokens) - 1 and tokens[j - 1].text == "[" and tokens[j + 1].text == "]":
            # a critic's quote with the subject filled in: "[soderbergh] tends to ..."
            return f"'[{tok.text}]' stands in for a person the quote names"
        if (tok.lemma or low).lower() in SEX_SPECIFIC or low in SEX_SPECIFIC:
            # "the main character flashed her boobs" -> "his boobs"
            return f"'{tok.text}' belongs to one sex: the swap would give it to the other"
        if tok.pos == "NOUN" and _gendered_noun(low, (tok.lemma or low).lower()):
            # "the lioness ... her cubs" -> "his cubs": a gendered word no pair list swaps
            return f"'{tok.text}' is gendered and the swap has no counterpart for it"
        unlisted = tok.pos in ("PROPN", "NOUN") or (tok.pos in ("ADJ", "X") and not low.endswith(_ADJECTIVE_ENDINGS))
        if unlisted and len(low) > 2 and not _english_word(low, tok.lemma):
            # "the dispassionate gantz brothers", "director ferzan ozpetek ... he", "so de
            # palma ... him" (tagged an adjective): a word no dictionary lists beside a
            # gendered word is most likely a person's name
            return f"'{tok.text}' is no English word (not in WordNet): likely a name the swap leaves as it is"
    return None


_SUBJECT_DEPS = ("nsubj", "nsubjpass", "poss")
# An adjective WordNet lacks but built like one ("watchable", "quick-witted" as "witted") is
# a word; one built like none ("so de palma", tagged an adjective) is most likely a name.
_ADJECTIVE_ENDINGS = ("able", "ible", "ed", "ing", "ful", "less", "ous", "ive", "al", "ic", "y", "ish", "ly", "esque")
_FINITE = ("VBZ", "VBD", "MD")


def _opens_as_subject(tokens: Sequence[Token]) -> bool:
    """The sentence opens with a proper noun or an adjective as its subject or owner: the
    parser's label where there is one, else the tags (followed by "'s" or a finite verb).
    No adjective is a subject or an owner, so it is the tagger's guess for an unknown name."""
    first = tokens[0]
    if first.pos not in ("PROPN", "ADJ") or len(tokens) < 2:
        return False
    if first.dep:
        return first.dep in _SUBJECT_DEPS
    return tokens[1].tag == "POS" or tokens[1].tag in _FINITE


@lru_cache(maxsize=8192)
def _famous_name(word: str) -> bool:
    """WordNet's most frequent noun sense of ``word`` is an instance, a named person or place
    ("goodall", "spielberg", "welles"), not a kind of thing ("king", "hope")."""
    from checkray.engine.lang.wordnet import wordnet

    synsets = wordnet().synsets(word, pos="n")
    return bool(synsets) and bool(synsets[0].instance_hypernyms())


# ------------------------------------------------------------------ matching pairs (CR4)

# Complements whose shape depends on the verb: a synonym or antonym rarely takes the same
# one ("began spreading" -> "ended spreading", "refused to share" -> "accepted to share",
# "would remain functional" -> "change functional", "granting options to executives").
FRAME_DEPS = {
    "xcomp": "a verb complement",
    "acomp": "an adjective complement",
    "oprd": "a predicate",
    "attr": "a predicate",
    "dative": "an indirect object",
}
# A figure in the verb's object or prepositional phrase is a price or quantity reading
# ("closed at $21.63", "decline 2.1 percent", "stay above the 75 cent mark").
_FIGURE_WORDS = {"$", "%", "percent", "cent", "cents", "point", "points"}
_FIGURE_DEPS = {"dobj", "npadvmod", "prep", "pobj"}
# ... and so is a bare number after these ("closing at 418.40", "rising from 76 systems to
# 152"); "in 2001" is a date, not a figure.
_FIGURE_PREPS = {"at", "to", "from", "by", "above", "below", "around", "near"}


def _children(tokens: Sequence[Token]) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for j, t in enumerate(tokens):
        if t.head >= 0 and t.head != j:
            kids.setdefault(t.head, []).append(j)
    return kids


def _subtree(kids: dict[int, list[int]], i: int) -> list[int]:
    out, todo = [], [i]
    while todo:
        j = todo.pop()
        out.append(j)
        todo.extend(kids.get(j, []))
    return out


def _figure_object(tokens: Sequence[Token], kids: dict[int, list[int]], prep: int) -> bool:
    """Whether the preposition's object is a number or counted by one ("at 418.40", "from 76
    systems"); a number deeper in the phrase ("from a lot about 25 miles north") is not."""
    for j in kids.get(prep, []):
        if tokens[j].dep == "pobj" and (
            tokens[j].tag == "CD" or any(tokens[k].dep == "nummod" for k in kids.get(j, []))
        ):
            return True
    return False


def verb_frame(tokens: Sequence[Token], i: int) -> str | None:
    """Why the word at token i cannot be swapped for another word in this sentence, or None:
    a verb whose complement or figure belongs to it, a participle modifying a noun, an
    adjective of a figure ("an average 220 pounds"). Needs the parser's labels; an unparsed
    sentence passes."""
    tok = tokens[i]
    if tok.pos not in ("VERB", "ADJ") or not tok.dep:
        return None
    kids = _children(tokens)
    if tok.pos == "ADJ":
        head = tok.head if tok.dep == "amod" else -1
        if head >= 0 and any(tokens[j].dep == "nummod" for j in kids.get(head, [])):
            return f"'{tok.text}' modifies a figure ('{tokens[head].text}')"
        return None
    if tok.dep == "amod":  # "the remaining three": a participle read as an adjective
        return f"'{tok.text}' is a participle modifying a noun"
    for j in kids.get(i, []):
        if tokens[j].dep in FRAME_DEPS:
            return f"'{tok.text}' takes {FRAME_DEPS[tokens[j].dep]} ('{tokens[j].text}') its replacement may not take"
        if tokens[j].dep in _FIGURE_DEPS:
            below = _subtree(kids, j)
            words = {tokens[k].text.lower() for k in below}
            number = tokens[j].text.lower() in _FIGURE_PREPS and _figure_object(tokens, kids, j)
            if words & _FIGURE_WORDS or number:
                return f"'{tok.text}' takes a figure ('{tokens[j].text} ...'): a price or quantity sense"
    return None


def checked_shared_substitutions(
    a: Sequence[Token], b: Sequence[Token], kind: Kind, ref: ReferenceModel, per_pair: int = 1
) -> list[Variant]:
    """For shared notional words (same lemma and tag in both sentences), the first candidate
    that passes the checks in BOTH sentences at every occurrence; rejected candidates kept
    with their reasons (no polarity guard: matching is not about sentiment).

    Candidates come from the word's first WordNet sense only, so the synonym and the
    antonym of a triple read the word one way ("appear" -> "look" is sense 1, seem;
    "disappear" opposes sense 2, come into view)."""
    from checkray.engine.lang.wordnet import usual_sense_pair

    b_index: dict[tuple[str, str], list[int]] = {}
    for j, tok in enumerate(b):
        if tok.pos in NOTIONAL_POS and tok.text.isalpha():
            b_index.setdefault(((tok.lemma or tok.text).lower(), tok.pos), []).append(j)
    out: list[Variant] = []
    kept = 0
    seen: set[tuple[str, str]] = set()
    seed_text = detokenize(a) + " " + detokenize(b)
    for i, tok in enumerate(a):
        key = ((tok.lemma or tok.text).lower(), tok.pos)
        if key not in b_index or key in seen or not tok.text.isalpha() or tok.tag not in PAIR_TAGS:
            continue
        seen.add(key)
        if any(b[j].tag != tok.tag for j in b_index[key]) or _never(key[0], PAIR_TAGS[tok.tag]):
            continue
        a_at = [k for k, t in enumerate(a) if ((t.lemma or t.text).lower(), t.pos) == key and t.tag == tok.tag]
        sites = [(a, k) for k in a_at] + [(b, k) for k in b_index[key]]
        positions = [position_verdict(s, k, ref, None) for s, k in sites]
        position = next((p for p in positions if p), None)
        frame = next((f for f in (verb_frame(s, k) for s, k in sites) if f), None)
        for cand, rank in ranked_candidates(key[0], PAIR_TAGS[tok.tag], kind, ref):
            # No polarity guard or curated table picks the sense of a news pair's word: it is
            # read in its most frequent sense only, and that sense must be a usual one of
            # both words ("began" -> "got", "son" -> "word" are not).
            rare = f"a {kind} of sense {rank}; a pair word is read in its first sense" if rank > 1 else None
            rare = rare or usual_sense_pair(key[0], cand, PAIR_TAGS[tok.tag], kind)
            verdict: tuple[list[str], str, str | None] | None = ([], "sense", rare) if rare else None
            if verdict is None and frame:
                verdict = (["sense"], "verb_frame", frame)
            if verdict is None:
                for s, k in sites:
                    _, passed, check, why = word_checks(
                        s, k, cand, kind, ref, guard=False, position=position, seed_text=seed_text, rank=rank
                    )
                    if check:
                        verdict = (passed, check, why)
                        break
            form = inflect(cand, tok.tag) or cand
            ra = {j: w for k in a_at for j, w in replace_word(a, k, form).items()}  # a/an fixed too
            rb = {j: w for k in b_index[key] for j, w in replace_word(b, k, form).items()}
            variant = Variant(
                f"pair_{kind}", detokenize(a, ra), detokenize(b, rb), index=i, word=tok.text, replacement=form
            )
            if verdict:
                out.append(_reject(variant, verdict[0], verdict[1], verdict[2] or ""))
                continue
            out.append(_keep(variant, list(PAIR_CHECKS)))
            kept += 1
            break
        if kept >= per_pair:
            break
    return out
