"""Filling S²LCT masks: candidate words, ranking, and the paper's validation (pure).

Candidates (offline backend) are words the corpus uses with the mask's Penn tag, most
frequent first. They are ranked by a causal language-model score of the filled sentence
(a bigram LM counted on the reference texts: only the terms log P(w | prev) and
log P(next | w) change with the filled word w) plus how well their word vector fits the
context (cosine to the mean vector of the nearby words); an HF fill-mask model ranks by
its own probability instead. A filled sentence is kept only when (paper, §3.2.2):

1. spaCy tags the filled word with the mask's tag;
2. the word is neutral in the polarity lexicon (VADER+AFINN) and is not a negator
   (VADER's NEGATE list: "not", "never", "without" ... carry no polarity but flip it);
3. for capabilities with ``recheck_rule`` (LC1, LC2) the search rule still holds;

and among the valid fills of one masked sentence the best-ranked are kept (ties broken
by the ranking score, then the word).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from checkray.engine.lang.polarity import polarity_class
from checkray.engine.s2lct.grammar import FILLABLE_TAGS
from checkray.engine.s2lct.search import matches
from checkray.engine.s2lct.spec import SearchRule


def build_vocabulary(
    sentences: Iterable[Sequence[Mapping[str, Any]]], per_tag: int = 200, min_count: int = 2
) -> dict[str, list[tuple[str, int]]]:
    """tag -> [(word, count)] of alphabetic corpus words, most frequent first."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for tokens in sentences:
        for tok in tokens:
            word = tok["t"]
            if tok["tag"] in FILLABLE_TAGS and word.isalpha():
                counts[tok["tag"]][word if tok["tag"] in ("NNP", "NNPS") else word.lower()] += 1
    return {
        tag: [(w, c) for w, c in counter.most_common() if c >= min_count][:per_tag]
        for tag, counter in sorted(counts.items())
    }


class BigramLM:
    """Interpolated bigram LM over lowercased tokens:
    P(b | a) = lam * c(a, b) / c(a) + (1 - lam) * (c(b) + 1) / (N + V)."""

    def __init__(self, unigrams: Mapping[str, int], bigrams: Mapping[tuple[str, str], int], lam: float = 0.7):
        self.uni, self.bi, self.lam = dict(unigrams), dict(bigrams), lam
        self.total, self.vocab = sum(self.uni.values()), len(self.uni) + 1

    def prob(self, a: str | None, b: str | None) -> float:
        if b is None:
            return 1.0
        b = b.lower()
        unigram = (self.uni.get(b, 0) + 1) / (self.total + self.vocab)
        if a is None or not self.uni.get(a.lower()):
            return unigram
        return self.lam * self.bi.get((a.lower(), b), 0) / self.uni[a.lower()] + (1 - self.lam) * unigram

    def attested(self, prev: str | None, word: str, nxt: str | None, min_count: int = 1) -> str | None:
        """Why ``word`` between ``prev`` and ``nxt`` is not attested in the reference text
        (a bigram on either side seen fewer than ``min_count`` times); None when both are
        (a side at the sentence edge or next to punctuation needs no bigram)."""
        w = word.lower()
        for a, b in ((prev, w), (w, nxt)):
            if a is None or b is None or not any(ch.isalnum() for ch in a + b if ch not in "'"):
                continue
            if not any(ch.isalnum() for ch in a) or not any(ch.isalnum() for ch in b):
                continue
            if self.bi.get((a.lower(), b.lower()), 0) < min_count:
                return f"'{a.lower()} {b.lower()}' unseen in the reference text"
        return None

    def local_logprob(self, prev: str | None, word: str, nxt: str | None) -> float:
        """log P(word | prev) + log P(next | word): the part of the sentence's log-probability
        that depends on ``word``."""
        return float(np.log(self.prob(prev, word)) + np.log(self.prob(word, nxt)))


def count_ngrams(
    sentences: Iterable[Sequence[Mapping[str, Any]]], keep: set[str] | None = None
) -> tuple[Counter, Counter]:
    """Unigram and bigram counts of lowercased tokens; with ``keep``, only bigrams that
    touch a word of ``keep`` (the candidates) are stored."""
    uni: Counter = Counter()
    bi: Counter = Counter()
    for tokens in sentences:
        words = [t["t"].lower() for t in tokens if t["t"].strip()]
        uni.update(words)
        for a, b in zip(words, words[1:]):
            if keep is None or a in keep or b in keep:
                bi[(a, b)] += 1
    return uni, bi


def count_trigrams(sentences: Iterable[Sequence[Mapping[str, Any]]], keep: set[str]) -> Counter:
    """Counts of lowercased word trigrams with a word of ``keep`` (the candidates): what the
    fills' context check reads on both sides ("a [main] character", "[main] character is",
    "the [film] .")."""
    tri: Counter = Counter()
    for tokens in sentences:
        words = [t["t"].lower() for t in tokens if t["t"].strip()]
        for a, b, c in zip(words, words[1:], words[2:]):
            if a in keep or b in keep or c in keep:
                tri[f"{a} {b} {c}"] += 1
    return tri


def context_gram(items: Sequence[Mapping[str, Any]], p: int, word: str) -> str:
    """The trigram a fill at item ``p`` must be attested in: (prev, word, next), or
    before punctuation or the end (prev2, prev, word)."""
    prev = items[p - 1].get("t", "") if p > 0 else ""
    nxt = items[p + 1].get("t") if p + 1 < len(items) else None
    if nxt is not None and any(ch.isalnum() for ch in nxt):
        return f"{prev.lower()} {word.lower()} {nxt.lower()}"
    prev2 = items[p - 2].get("t", "") if p >= 2 and "mask" not in items[p - 2] else ""
    return f"{prev2.lower()} {prev.lower()} {word.lower()}"


def context_reason(
    items: Sequence[Mapping[str, Any]],
    mask_index: int,
    word: str,
    lm: BigramLM,
    trigrams: Mapping[str, int],
    min_count: int = 1,
) -> str | None:
    """Why ``word`` does not fit where the ``mask_index``-th mask stands (None: it fits):
    never first (the wrapper, or the sentence start, precedes it) nor inside a hyphenated
    word; both bigrams with its neighbours attested; a trigram attested: (prev, word,
    next) or, before punctuation or the end, (prev2, prev, word); and, before a compound
    noun, (word, next, next2)."""
    positions = [i for i, it in enumerate(items) if "mask" in it]
    p = positions[mask_index]
    if p == 0:
        return "first word of the sentence"
    before = items[p - 1]
    after = items[p + 1] if p + 1 < len(items) else None
    if not before.get("ws") or before.get("t") == "-" or (after is not None and after.get("t") == "-"):
        return "inside a hyphenated word"
    prev, nxt = before.get("t"), after.get("t") if after else None
    # An inserted noun or adjective modifies the noun (or adjective) after it: "a [sports]
    # movie", "a [psychological] thriller"; elsewhere it reads as a broken phrase
    # ("in a word [anyone]", "one [short] of").
    if after is None or after.get("tag") not in ("NN", "NNS", "JJ"):
        return "not right before a noun or adjective"
    why = lm.attested(prev, word, nxt, min_count)
    if why:
        return why
    gram = context_gram(items, p, word)
    if not trigrams.get(gram):
        return f"'{gram}' unseen in the reference text"
    # Before a compound noun the word modifies the compound as a whole, which must be
    # attested with it: "a [quiet] film director" is attested on the left only. Before a
    # verb or preposition ("the [american] film suffers") the noun phrase has ended.
    after2 = items[p + 2] if p + 2 < len(items) and "mask" not in items[p + 2] else None
    if after2 is not None and after2.get("tag") in ("NN", "NNS"):
        right = f"{word.lower()} {nxt.lower()} {after2['t'].lower()}"
        if not trigrams.get(right):
            return f"'{right}' unseen in the reference text"
    return None


def modifier_reason(
    items: Sequence[Mapping[str, Any]],
    mask_index: int,
    word: str,
    tag: str,
    lm: BigramLM,
    compound_min_count: int = 2,
) -> str | None:
    """Why ``word`` (Penn ``tag``) cannot modify the noun after the ``mask_index``-th mask
    (None: it can). The fill must restrict what the noun refers to and nothing else:

    * an adjective must classify (WordNet: relational, "a [french] film"); an evaluative one
      judges the film the seed judged ("a [deep] movie", "the [ultimate] movie") or breaks
      an idiom ("food for [deep] thought", "a feast for the [red] eyes");
    * a noun must not make a lexicalised compound with the head, which names another
      thing ("the [plot] lines" -> plotlines, "the [home] movies");
    * the pair (fill, head) must be attested ``compound_min_count`` times: a pair seen
      once is as likely one reviewer's quirk as English ("the [feature] actors");
    * the fill must not split a multiword expression of the seed ("food for thought");
    * the noun must not name people: "the [voice] actors" are other people than the actors.
    """
    from checkray.engine.lang.identity import is_person_noun
    from checkray.engine.lang.wordnet import is_classifying_adjective, is_multiword, is_noun

    p = [i for i, it in enumerate(items) if "mask" in it][mask_index]
    words = [it.get("t", "") for it in items]
    after = items[p + 1] if p + 1 < len(items) and "mask" not in items[p + 1] else {}
    head = after["t"] if after.get("tag") in ("NN", "NNS", "JJ") else None  # what the fill modifies
    if tag.startswith("JJ") and not is_classifying_adjective(word):
        return f"'{word}' is not a classifying adjective (WordNet): it would judge, not sort, the noun"
    if head is None:
        return None
    if is_person_noun(head):
        # "the [voice] actors", "the [cast] members of this group": another group of people
        return f"'{word} {head}' names other people than '{head}'"
    if tag.startswith("NN") and (is_multiword([word, head]) or is_noun(word + head)):
        return f"'{word} {head}' is a lexicalised compound: it names something else than '{head}'"
    if lm.bi.get((word.lower(), head.lower()), 0) < compound_min_count:
        return f"'{word.lower()} {head.lower()}' seen fewer than {compound_min_count} times in the reference text"
    for left in range(max(0, p - 3), p):
        for right in range(p + 2, min(len(items), left + 5) + 1):  # at most 4 words besides the fill
            span = [w for i, w in enumerate(words[left:right], start=left) if i != p]
            if all(w.isalpha() for w in span) and is_multiword(span):
                return f"'{' '.join(span)}' is a fixed expression: a word inside it breaks it"
    return None


COPULAS = frozenset("is was are were 's be been being seems seemed feels felt remains remained".split())
NOMINAL_TAGS = ("NN", "NNS")
PREMODIFIER_TAGS = frozenset(("JJ", "JJR", "JJS", "NN", "NNS", "HYPH"))


def denied_head(items: Sequence[Mapping[str, Any]], form: str) -> int | None:
    """The item index of the noun a denying wrapper denies (None: no such noun): the head
    of a noun-phrase seed ("Would I call it a british [film] ...? No") or of the predicate
    nominal of a clause ("... that it is an entertaining [hybrid] of ..."). A preposition,
    a verb or a relative word before any noun means the denied part has no nominal head."""
    toks = [(i, it) for i, it in enumerate(items) if "mask" not in it]
    start = 0
    if form != "np":
        cop = next(
            (
                k
                for k, (_, it) in enumerate(toks)
                if it.get("t", "").lower() in COPULAS and it.get("tag", "").startswith("VB")  # not a possessive 's
            ),
            None,
        )
        if cop is None:
            return None
        start = cop + 1
    for i, it in toks[start:]:
        tag = it.get("tag", "")
        if tag in NOMINAL_TAGS:
            return i
        if tag in ("IN", "TO", "WDT", "WP", "CC") or tag.startswith("VB"):
            return None
    return None


def fill_head(items: Sequence[Mapping[str, Any]], p: int) -> int | None:
    """The noun a fill at item ``p`` modifies: the last noun of the premodifier run after it."""
    head = None
    for i in range(p + 1, len(items)):
        tag = items[i].get("tag", "")
        if "mask" in items[i] or tag not in PREMODIFIER_TAGS:
            break
        if tag in NOMINAL_TAGS:
            head = i
    return head


def denied_fill_reason(items: Sequence[Mapping[str, Any]], words: Sequence[str], form: str) -> str | None:
    """Why a fill changes what a denying wrapper denies (None: it does not): a word added
    to a noun of a noun-phrase seed (denied whole), or to the predicate nominal of a
    clause. "Would I call it a [british] film that affirms ...? No" may deny
    that the film is British; "Do I think that the [american] film suffers from ...? No"
    keeps the denial on what it says of the film."""
    masks = [i for i, it in enumerate(items) if "mask" in it]
    if form == "np":
        # a noun phrase is denied whole, so any noun in it may be what the "no" is about:
        # "Would I call it an unsuccessful attempt at a [british] movie of ideas? No"
        for p, word in zip(masks, words):
            noun = fill_head(items, p)
            if noun is not None:
                return f"'{word}' would modify '{items[noun]['t']}' in the noun phrase the wrapper denies whole"
        return None
    target = denied_head(items, form)
    if target is None:
        return None
    for p, word in zip(masks, words):
        if fill_head(items, p) == target:
            return (
                f"'{word}' would modify '{items[target]['t']}', the noun the wrapper denies: the denial could target it"
            )
    return None


def repeat_reason(items: Sequence[Mapping[str, Any]], words: Sequence[str]) -> str | None:
    """Why a fill repeats the sentence (None: it does not): a word already in it ("an
    entertaining british hybrid of [british] comedy")."""
    have = {it.get("t", "").lower() for it in items if "mask" not in it}
    for word in words:
        if word.lower() in have:
            return f"'{word}' is already in the sentence"
    return None


def neighbours(items: Sequence[Mapping[str, Any]], mask_index: int) -> tuple[str | None, str | None]:
    """The tokens right before and after the ``mask_index``-th mask (None at the edges or
    next to another mask)."""
    positions = [i for i, it in enumerate(items) if "mask" in it]
    p = positions[mask_index]
    prev = items[p - 1].get("t") if p > 0 else None
    nxt = items[p + 1].get("t") if p + 1 < len(items) else None
    return prev, nxt


def fill(items: Sequence[Mapping[str, Any]], words: Sequence[str]) -> tuple[str, list[int]]:
    """Text with the masks replaced by ``words`` (in order) and the character offset of
    each filled word."""
    text, offsets, k = "", [], 0
    for it in items:
        if "mask" in it:
            offsets.append(len(text))
            text += words[k] + it["ws"]
            k += 1
        else:
            text += it["t"] + it["ws"]
    stripped = text.lstrip()
    shift = len(text) - len(stripped)
    return stripped.rstrip(), [o - shift for o in offsets]


def context_words(items: Sequence[Mapping[str, Any]], mask_index: int, window: int = 3) -> list[str]:
    """Words within ``window`` items of the ``mask_index``-th mask (other masks skipped)."""
    positions = [i for i, it in enumerate(items) if "mask" in it]
    p = positions[mask_index]
    near = items[max(0, p - window) : p] + items[p + 1 : p + 1 + window]
    return [it["t"] for it in near if "mask" not in it and any(ch.isalpha() for ch in it["t"])]


def cosine_scores(candidates: np.ndarray, context: np.ndarray) -> np.ndarray:
    """Cosine of each candidate vector (rows) to the context vector; 0 for zero vectors."""
    norms = np.linalg.norm(candidates, axis=1) * (np.linalg.norm(context) or 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = candidates @ context / norms
    return np.nan_to_num(scores, nan=-1.0)


# Words that change what a sentence claims, or how strongly, without being polar: an
# expansion never inserts them ("hardly an elegant comedy", "I think twice that", "not
# exactly", "still it's", "much more"). Degree words, hedges, focus particles, discourse
# markers, quantifiers and time adverbs that reorder events.
NEVER_INSERT = frozenset(
    """hardly barely scarcely not never too so only just even still more most less least also again
    exactly twice thrice really quite maybe perhaps probably possibly actually certainly surely
    definitely simply merely almost nearly rather fairly pretty somewhat very much many few little
    enough all any some every each both either neither none nothing else however though although
    yet but then now therefore thus hence instead otherwise anyway besides meanwhile indeed
    ever already soon later once sometimes often always usually seldom rarely first last next
    other another same such own whole entire main real true right wrong old new big great
    good bad well better best worse worst far away back down up out off over here there
    ago apparently obviously clearly seemingly supposedly truly totally completely utterly
    absolutely entirely fully highly deeply extremely particularly especially mostly largely
    generally basically essentially literally virtually practically
    second third fourth different similar total final short long full certain various several
    next previous former latter late early single double major minor key top high low large small
    huge tiny possible likely actual usual original recent particular specific special general
    someone anyone everyone somebody anybody everybody people person thing things something
    anything everything one ones way ways time times lot bit kind sort part parts overall simple basic present local wooden""".split()
)


@lru_cache(maxsize=1)
def negators() -> frozenset[str]:
    from vaderSentiment.vaderSentiment import NEGATE

    return frozenset(w.lower() for w in NEGATE) | {"no", "n't", "nothing", "none", "nobody", "neither", "nor"}


@dataclass
class Check:
    ok: bool
    reason: str  # "ok", "tag", "polarity", "negation", "rule", "tokenization"


def validate_fill(
    doc_tokens: Sequence[Mapping[str, Any]],
    offsets: Sequence[int],
    words: Sequence[str],
    tags: Sequence[str],
    rule: SearchRule | None = None,
    neutral_threshold: float = 0.0,
) -> Check:
    """The paper's three criteria on a tagged filled sentence (``doc_tokens`` carry ``t``,
    ``tag``, ``pos``, ``lemma`` and ``idx``, the character offset)."""
    by_offset = {t["idx"]: t for t in doc_tokens}
    for offset, word, tag in zip(offsets, words, tags):
        tok = by_offset.get(offset)
        if tok is None or tok["t"] != word:
            return Check(False, "tokenization")
        if tok["tag"] != tag:
            return Check(False, "tag")
        if polarity_class(word, tok.get("lemma"), neutral_threshold) != "neutral":
            return Check(False, "polarity")
        if word.lower() in negators():
            return Check(False, "negation")
    if rule is not None and not matches(rule, doc_tokens, rule.label, check_label=False):
        return Check(False, "rule")
    return Check(True, "ok")


def pick_fills(scored: Sequence[tuple[float, str, Any]], keep: int) -> list[tuple[float, str, Any]]:
    """The ``keep`` best valid fills: highest score first, ties by word (deterministic)."""
    return sorted(scored, key=lambda x: (-x[0], x[1]))[:keep]
