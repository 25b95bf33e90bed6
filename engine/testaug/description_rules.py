"""What a TestAug description says about its cases' words, checked on each case.

TestAug's sentiment descriptions name the polarity of the words a case must hold: "a
neutral sentiment sentence with negated negative word", "a negative sentiment sentence
with positive sentiment question and word no as the answer", "a neutral sentence with
neutral words". Read at size, the generator often writes the opposite and the labeler
keeps it: "No one loves this cabin crew." (a negated *positive* word, so negative, under
"negated negative word"), "Can you believe this? Yes" (no positive question),
"Did you have a good time at the concert? Yes" (under "... question and word no as the
answer"). ``description_check`` reads three description forms and checks the words'
polarity (VADER + AFINN, ``engine/lang/polarity``) against them:

``negated X word``     a negator (not, n't, no, never, nobody ...) and, after it, a word of
                       polarity X and none of the opposite one; X neutral: no polar word
``X sentiment question and word Y as the answer``
                       a question whose words are of polarity X (none of the opposite;
                       neutral: none polar), answered by Y
``with X words``       no word of the opposite polarity; X neutral: none polar
``I used to have X sentiment to something, but now I have Y sentiment to it``
                       the case's past clause (the one without "now", or the one with "in the
                       past", "used to", "at first" ...) does not read strongly against X,
                       nor its present clause against Y ("I absolutely love this restaurant,
                       but in the past I would not like it." under past positive, now negative)
                       and a word marks the change over time ("used to", "at first", "in
                       the past", "now", "these days", "no longer"): "I am grateful for the
                       job, but I am not sure about my work-life balance" is mixed, not
                       changed
``I thought something was X, but it was Y``
                       the clause before "but" (the expectation) does not read strongly
                       against X, nor the one after it against Y
``My opinion is more important than others' when expressing X sentiment``
                       someone else's opinion is in the case ("others", "people", "my
                       friends", "I had heard ...") and its clause does not read X: the case
                       sets the writer's X opinion against theirs ("I like you, but others
                       hate you"); "I think you are so smart, I wish I could learn more"
                       holds no other opinion, "I appreciate your kindness, my friends
                       appreciate your kindness" no contrast

A clause reads strongly against a polarity when VADER/TextBlob (``llm_output.polarity``)
score it at least ``CLAUSE_AGAINST`` the other way (for neutral: that far either way); a
clause they find neutral never rejects, so these two forms catch reversals, not vagueness.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from checkray.engine.case_checks import Check, row_check
from checkray.engine.lang.polarity import polarity_class, textblob_lexicon
from checkray.engine.llm_output import NEGATOR_WORDS, polarity

NEGATED_WORD = re.compile(r"\bnegated (positive|negative|neutral)(?: sentiment)? word", re.IGNORECASE)
QUESTION = re.compile(
    r"\b(positive|negative|neutral) sentiment question and (?:the )?word (yes|no) as the answer", re.IGNORECASE
)
WORDS_OF = re.compile(r"\bwith (positive|negative|neutral) words\b", re.IGNORECASE)
USED_TO = re.compile(
    r"\bused to have (positive|negative|neutral) sentiment .*\bnow I have (positive|negative|neutral) sentiment",
    re.IGNORECASE,
)
THOUGHT = re.compile(r"\bI thought something was (positive|negative|neutral), but it was (positive|negative|neutral)\b")
MINE = re.compile(
    r"\bmy opinion is more important than others'? when expressing (positive|negative|neutral) sentiment", re.IGNORECASE
)
# The two clauses of a contrast: at "but", "although", "even though", a semicolon, or a
# comma before a time phrase ("I dislike this restaurant, in the past I would value it").
_CONTRAST_SPLIT = re.compile(
    r",?\s+(?:but|although|even though|though|yet)\s+|;\s*|,\s+(?=(?:in the past|at first|now)\b)", re.IGNORECASE
)
_PRESENT = re.compile(r"\b(?:now|nowadays|these days|today)\b", re.IGNORECASE)
_PAST = re.compile(r"\b(?:in the past|used to|at first|once|previously|back then|before)\b", re.IGNORECASE)
CLAUSE_AGAINST = 0.3
# More words that mark a time, which the clause order above does not read.
_OTHER_TIMES = re.compile(r"\b(?:anymore|any more|no longer|initially|originally|earlier)\b", re.IGNORECASE)
# Someone else's opinion: other people, or what the writer heard or was told.
_OTHERS = re.compile(
    r"\b(?:others?|other people|people|everyone|everybody|they|friends?|critics?|reviewers?|"
    r"heard|told|says?|said|rumou?rs?)\b",
    re.IGNORECASE,
)
_CLAUSES = re.compile(r",?\s+(?:but|although|even though|though|yet|while|whereas)\s+|;\s*|,\s*", re.IGNORECASE)

_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|n't")
NEGATORS = NEGATOR_WORDS | {"n't"}
# Words the lexicons score that these forms use for their structure, not their sentiment.
# "not sure / not certain if ..." hedges; it does not negate a sentiment word.
STRUCTURE = NEGATORS | {"yes", "please", "want", "sure", "certain"}
POLARITY_MIN = 0.2  # |polarity| in [-1, 1] (VADER/AFINN averaged) below this counts as neutral
# A word VADER and AFINN lack is polar when TextBlob's movie-review adjectives score it this
# far from zero ("tiresome" -0.5, "incredible" 0.9), not for its many faint ones ("new" 0.14).
TEXTBLOB_MIN = 0.5
OPPOSITE = {"positive": "negative", "negative": "positive"}


def word_class(word: str) -> str:
    """positive / negative / neutral: VADER + AFINN, else a strong TextBlob score, else the
    opposite of the word without a negating prefix ("unsatisfactory")."""
    cls = polarity_class(word, threshold=POLARITY_MIN)
    if cls != "neutral":
        return cls
    score = textblob_lexicon().get(word, 0.0)
    if abs(score) >= TEXTBLOB_MIN:
        return "positive" if score > 0 else "negative"
    for prefix in ("un", "dis", "in"):
        if word.startswith(prefix) and len(word) > len(prefix) + 3:
            stem = polarity_class(word[len(prefix) :], threshold=POLARITY_MIN)
            if stem != "neutral":
                return OPPOSITE[stem]
    return "neutral"


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("\u2019", "'"))


def _polar(tokens: list[str]) -> list[tuple[str, str]]:
    """(word, class) of each polar word, structure words left out."""
    out = []
    for t in tokens:
        if t in STRUCTURE or t.endswith("n't"):
            continue
        cls = word_class(t)
        if cls != "neutral":
            out.append((t, cls))
    return out


def _words_reason(polar: list[tuple[str, str]], wanted: str, where: str, require: bool = True) -> str | None:
    """Why ``polar`` words do not fit a ``wanted`` polarity (None: they do); ``require``:
    a word of that polarity must be among them."""
    if wanted == "neutral":
        if polar:
            return f"{where} holds a {polar[0][1]} word ('{polar[0][0]}'), the description asks for neutral ones"
        return None
    against = [w for w, c in polar if c == OPPOSITE[wanted]]
    if against:
        return f"{where} holds a {OPPOSITE[wanted]} word ('{against[0]}'), the description asks for {wanted} ones"
    if require and not any(c == wanted for _, c in polar):
        return f"{where} holds no {wanted} word, the description asks for one"
    return None


def negated_word_reason(text: str, wanted: str) -> str | None:
    tokens = _tokens(text)
    first = next((i for i, t in enumerate(tokens) if t in NEGATORS or t.endswith("n't")), None)
    if first is None:
        return f"negates nothing, the description asks for a negated {wanted} word"
    if wanted == "neutral":
        return _words_reason(_polar(tokens), "neutral", "the case")
    return _words_reason(_polar(tokens[first + 1 :]), wanted, "what it negates")


def question_reason(text: str, wanted: str, answer: str) -> str | None:
    question, mark, after = text.rpartition("?")
    if not mark:
        return "asks no question, the description asks for one"
    given = _tokens(after)
    if not given or given[0] != answer.lower():
        return f"answers '{after.strip()}', the description asks for '{answer.lower()}'"
    return _words_reason(_polar(_tokens(question)), wanted, "the question")


def description_reason(description: str, text: str) -> str | None:
    """Why ``text`` does not have the words ``description`` names (None: it has, or the
    description names none)."""
    if m := NEGATED_WORD.search(description):
        return negated_word_reason(text, m.group(1).lower())
    if m := QUESTION.search(description):
        return question_reason(text, m.group(1).lower(), m.group(2))
    if m := WORDS_OF.search(description):
        # Only words against the named polarity: the lexicons miss too many of the words a
        # case may use for it ("exceeded my expectations", "can't stand").
        return _words_reason(_polar(_tokens(text)), m.group(1).lower(), "the case", require=False)
    if m := USED_TO.search(description):
        return contrast_reason(text, m.group(1).lower(), m.group(2).lower(), by_time=True)
    if m := THOUGHT.search(description):
        return contrast_reason(text, m.group(1).lower(), m.group(2).lower(), by_time=False)
    if m := MINE.search(description):
        return others_reason(text, m.group(1).lower())
    return None


def time_change_reason(text: str) -> str | None:
    """Why ``text`` tells no change of opinion over time (None: a word marks a time, past or
    present: "used to", "at first", "in the past", "now", "these days", "no longer")."""
    if any(marker.search(text) for marker in (_PRESENT, _PAST, _OTHER_TIMES)):
        return None
    return "no change over time: no word marks a past or present opinion ('used to', 'at first', 'now', ...)"


def others_reason(text: str, wanted: str) -> str | None:
    """Why ``text`` does not set the writer's ``wanted`` opinion against someone else's."""
    clauses = [c for c in _CLAUSES.split(text.strip()) if c.strip()]
    theirs = [c for c in clauses if _OTHERS.search(c)]
    if not theirs:
        return "no one else's opinion in it (others, people, friends, what the writer heard)"
    for clause in theirs:
        score = polarity(clause)
        if wanted != "neutral" and _leans(score, wanted):
            return f"the others' clause {clause.strip()!r} reads {wanted} too ({score:+.2f}): no contrast with the writer's"
    return None


def _leans(score: float, side: str) -> bool:
    """Whether a clause's polarity reads strongly toward ``side`` (positive or negative)."""
    return score * (1 if side == "positive" else -1) >= CLAUSE_AGAINST


def _clause_reason(clause: str, wanted: str, which: str) -> str | None:
    score = polarity(clause)
    against = abs(score) >= CLAUSE_AGAINST if wanted == "neutral" else _leans(score, OPPOSITE[wanted])
    if against:
        reads = "positive" if score > 0 else "negative"
        return f"its {which} clause {clause.strip()!r} reads {reads} ({score:+.2f}), the description asks for {wanted}"
    return None


def contrast_reason(text: str, first: str, second: str, by_time: bool) -> str | None:
    """The two clauses of a contrast against the polarities the description gives them:
    ``first`` the past (or expectation), ``second`` the present (or outcome); a change
    over time must tell both ends (``time_change_reason``)."""
    if by_time and (why := time_change_reason(text)):
        return why
    parts = _CONTRAST_SPLIT.split(text.strip(), maxsplit=1)
    if len(parts) != 2:
        return None
    a, b = parts
    if by_time:  # the past clause may come second: "I love it now, but in the past I hated it"
        if _PRESENT.search(a) and not _PRESENT.search(b) or _PAST.search(b) and not _PAST.search(a):
            a, b = b, a
        elif not (_PRESENT.search(b) or _PAST.search(a)):
            return None  # no telling which clause is the past one
    names = ("past", "present") if by_time else ("expectation", "outcome")
    return _clause_reason(a, first, names[0]) or _clause_reason(b, second, names[1])


def description_check(description: Callable[[Mapping[str, Any]], str]) -> Check:
    """The ``description_words`` check of single-text cases (pairs are not read)."""

    def one(r: Mapping[str, Any]) -> str | None:
        return None if r.get("text_pair") else description_reason(description(r), r["text"])

    return row_check("description_words", one, "the polarity of the words the description names")
