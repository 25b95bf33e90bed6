"""CR3 at sentence level: the sentences a contrast set's editors changed, one pair each.

The paper's CR3 negatives are the IMDB contrast set (Gardner et al. 2020): whole reviews
that people edited until the sentiment reversed. Read whole, such a triple is not English
a person would sign (docs/costello.md): every review carries several hand edits, and in a
long review at least one of them is clumsy ("it's made almost such fab impression on me").
Read sentence by sentence, most single edits are clean ("The theme music is excellent!"
-> "The theme music is dull!"). So ``inversion_unit: sentence`` aligns each review with its
edit, takes every sentence the editors changed as a (sentence, reversed sentence) pair and
keeps the pairs that read as one clean inversion:

* ``not_a_sentence``: both texts are whole sentences (a capital or digit first, ``.``, ``!``
  or ``?`` last, 4-40 words, not ending on a dotted abbreviation); the review splitter
  leaves fragments around ``(...!)`` and cuts "... so bad that my i.q." at its periods.
* ``seed_slip``: neither text has a slip its writer left that a rule can see
  (``seed_slips.py``: "gives give", "it,I find it", "the the"); the sentence as written is
  copied into all three sentences of its triple.
* ``edit_span``: the edit is one stretch of at most ``MAX_SPAN`` tokens on each side and not
  a bare deletion (nor a word replaced by an article alone: "glimpses of sad characters" ->
  "of the characters"). Read one by one, a pair whose editor rewrote more is mostly not
  fluent ("Could thing they didn't try someone like Danny Devito!!!"), or no longer an
  inversion.
* ``unknown_word``: every word the edit puts in is English: seen in the reference corpus
  of reviews or in lemminflect's dictionary (editors' typos: "EXICTEMENT").
* ``edit_grammar``: the edit leaves no article that disagrees with the word after it or
  stands before a verb ("a awkward movie", "a egregiously distorting film") where the
  sentence as written had none.
* ``polarity_flip``: two lexicons (VADER and TextBlob, ``llm_output.polarity``) score the two
  sentences on opposite sides, each at least ``MIN_POLARITY`` away from neutral, so the edit
  reverses what the sentence says on its own, not only in its review's context
  ("Cheap Canadian Production." -> "A Canadian Production.").
* ``grammar`` (with ``costello.inversion_grammar``): Link Grammar links every word of the
  sentence and of its edit (``engine/lang/link_grammar.py``). It sees the slips that are
  real words in the wrong place, which ``seed_slip`` cannot: "This must me one of the
  worst", "The jokes and script was terrible!", "I thought is was impossible".

The sentence as its reviewer wrote it is the seed and the edit the farther sentence, so two
of a triple's three sentences are a person's own writing. The LM check
(``costello.fluency`` with ``inversion`` among its operators) then refuses edits that cost
the sentence too much log-probability. Every refused pair keeps its reason.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from checkray.engine.costello.seed_slips import seed_slip

MIN_WORDS, MAX_WORDS = 4, 40
MAX_SPAN = 3  # tokens an edit may change on each side
MIN_POLARITY = 0.1  # |polarity| each side of a flip must reach
MIN_ALIGNMENT = 0.5  # word-level similarity for two sentences to be one sentence edited

_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]")
_OPENS = re.compile(r"""^["'(]*[A-Z0-9]""")
# What a replaced word may not become alone: the edit then only deletes it.
_DETERMINERS = frozenset("a an the this that these those its his her their my your our".split())
_ABBREVIATION_END = re.compile(r"""(?:\b[A-Za-z]\.){2,}["']*$""")  # "my i.q.", "the U.S."
_ENDS = re.compile(r"""[.!?]["']*$""")  # not ")": the splitter cuts "... (as the title character!)" there


@dataclass(frozen=True)
class SentencePair:
    """One sentence of a review and the contrast set's edit of it."""

    sentence: str
    reversed: str
    review: int  # the (review, edit) pair it came from, by position
    check: str | None = None  # the rule that refused it; None: kept
    reason: str | None = None


@lru_cache(maxsize=1)
def _sentencizer():
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split_sentences(text: str) -> list[str]:
    """Sentences of a review; an HTML line break (IMDB's ``<br />``) always ends one."""
    out: list[str] = []
    for paragraph in _BREAK.sub("\n", text).split("\n"):
        if paragraph.strip():
            out += [s.text.strip() for s in _sentencizer()(paragraph.strip()).sents if s.text.strip()]
    return out


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(a=_tokens(a.lower()), b=_tokens(b.lower()), autojunk=False).ratio()


def aligned_sentences(original: str, edited: str) -> list[tuple[str, str]]:
    """(original sentence, edited sentence) for every sentence the edit changed: sentences
    aligned as sequences, and inside each replaced block the most similar pairs matched one
    to one (at least ``MIN_ALIGNMENT`` alike), in the review's order."""
    a, b = split_sentences(original), split_sentences(edited)
    pairs: list[tuple[int, int]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op != "replace":
            continue
        scored = sorted(
            ((_similarity(a[i], b[j]), i, j) for i in range(i1, i2) for j in range(j1, j2)),
            key=lambda s: (-s[0], s[1], s[2]),
        )
        used_a: set[int] = set()
        used_b: set[int] = set()
        for ratio, i, j in scored:
            if ratio >= MIN_ALIGNMENT and i not in used_a and j not in used_b:
                used_a.add(i)
                used_b.add(j)
                pairs.append((i, j))
    return [(a[i], b[j]) for i, j in sorted(pairs)]


def _edit_spans(sentence: str, reversed_: str) -> list[tuple[list[str], list[str]]]:
    a, b = _tokens(sentence), _tokens(reversed_)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [(a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def known_word(word: str) -> bool:
    """Seen in the reference corpus of reviews (``costello/context.py``) or an English word
    of lemminflect's dictionary (any inflection: "abhorred", "lousiest")."""
    from lemminflect import getAllLemmas

    from checkray.engine.costello.context import reference_model

    return reference_model().count(word.lower()) > 0 or bool(getAllLemmas(word.lower()))


def refusal(sentence: str, reversed_: str, grammar: bool = False) -> tuple[str, str] | None:
    """(check, reason) when the pair is not one clean sentence-level inversion, else None;
    ``grammar``: Link Grammar must link every word of both texts too."""
    from checkray.engine.llm_output import missing_word_reason, polarity

    for text in (sentence, reversed_):
        words = len(text.split())
        whole = _OPENS.match(text) and _ENDS.search(text) and not _ABBREVIATION_END.search(text)
        if not whole or not MIN_WORDS <= words <= MAX_WORDS:
            return "not_a_sentence", f"'{text}' is not one whole sentence of {MIN_WORDS}-{MAX_WORDS} words"
    for which, text in (("the sentence", sentence), ("its edit", reversed_)):
        slip = seed_slip(text)
        if slip:
            return "seed_slip", f"{which} as written has a slip: {slip}"
    spans = _edit_spans(sentence, reversed_)
    if len(spans) != 1:
        return "edit_span", f"the edit changes {len(spans)} places, not one"
    old, new = spans[0]
    if not [w for w in new if w.lower() not in _DETERMINERS]:
        return "edit_span", f"the edit only deletes '{' '.join(old)}'" + (f" (for '{' '.join(new)}')" if new else "")
    if max(len(old), len(new)) > MAX_SPAN:
        return "edit_span", f"the edit rewrites '{' '.join(old)}' -> '{' '.join(new)}' (over {MAX_SPAN} tokens)"
    unknown = [w for w in new if w.isalpha() and not known_word(w)]
    if unknown:
        return (
            "unknown_word",
            f"the edit puts in {', '.join(repr(w) for w in unknown)}, no word of the reviews or the dictionary",
        )
    broken = missing_word_reason(reversed_)
    if broken and not missing_word_reason(sentence):
        return "edit_grammar", f"the edit breaks the sentence: {broken}"
    before, after = polarity(sentence), polarity(reversed_)
    if before * after >= 0 or min(abs(before), abs(after)) < MIN_POLARITY:
        return "polarity_flip", f"polarity {before:+.2f} -> {after:+.2f}: the sentence's sentiment is not reversed"
    return grammar_refusal(sentence, reversed_) if grammar else None


def grammar_refusal(sentence: str, reversed_: str) -> tuple[str, str] | None:
    """("grammar", reason) when Link Grammar cannot link every word of either text."""
    from checkray.engine.lang.link_grammar import unlinked_words

    for which, text in (("the sentence as written", sentence), ("its edit", reversed_)):
        left_out = unlinked_words(text)
        if left_out:
            words = ", ".join(repr(w) for w in left_out)
            return "grammar", f"{which} has no parse that links every word (Link Grammar leaves out {words})"
    return None


def edit_of(sentence: str, reversed_: str) -> tuple[str, str]:
    """(the words the edit took out, the words it put in), each joined by spaces; for a pair
    of more than one edit, those of the first."""
    spans = _edit_spans(sentence, reversed_)
    return (" ".join(spans[0][0]), " ".join(spans[0][1])) if spans else ("", "")


def sentence_inversions(pairs: Iterable[tuple[str, str]], grammar: bool = False) -> list[SentencePair]:
    """Every edited sentence of the (original, edited) review pairs, kept or refused
    (``grammar``: the Link Grammar check too)."""
    out: list[SentencePair] = []
    for review, (original, edited) in enumerate(pairs):
        for sentence, reversed_ in aligned_sentences(original, edited):
            refused = refusal(sentence, reversed_, grammar)
            check, reason = refused if refused else (None, None)
            out.append(SentencePair(sentence, reversed_, review, check, reason))
    return out


def refused_table(pairs: Iterable[SentencePair]):
    """The refused pairs as a table (sentence, reversed, review, check, reason)."""
    import pyarrow as pa

    rows = [p for p in pairs if p.check is not None]
    return pa.table(
        {
            "sentence": pa.array([p.sentence for p in rows], pa.string()),
            "reversed": pa.array([p.reversed for p in rows], pa.string()),
            "review": pa.array([p.review for p in rows], pa.int64()),
            "check": pa.array([p.check for p in rows], pa.string()),
            "reason": pa.array([p.reason for p in rows], pa.string()),
        }
    )
