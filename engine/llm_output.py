"""What an LLM wrote, made into candidate test cases a careful reader would sign.

Shared by the LLM generators (MFT, TestAug): cleaning prompt and reasoning artefacts off
a candidate before it is parsed, and the checks (``checkray.engine.case_checks.Check``)
that reject a candidate with its reason:

* ``artefact``: a label the cleaning could not take off (``Explanation:`` inside the text);
* ``prompt leak``: the candidate repeats the prompt's instructions (``minimum requirements``
  after "A Minimum Functionality test ..."): a bigram of content words, or a word of the
  task's own vocabulary, that the prompt's instructions hold and its source texts do not;
* ``near copy``: normalized word overlap (Jaccard) with a source (the representative, the
  demonstration seeds) of at least a stated threshold;
* ``duplicate``: the normalized text (and text pair) met before;
* ``polarity``: a second, independent judgement of the label, VADER's compound score
  (TextBlob where VADER knows no word) of the clause that decides: the text after the last
  contrastive marker ("but", "however", "yet"), else the whole sentence; strongly against
  the expected label (|score| >= ``POLARITY_AGAINST``) is a rejection;
* ``pair pronoun``: "neither", "either" or "both" standing for a pair that the sentence
  never names ("One crime story is unusual ..., and neither is well told");
* ``contradiction``: two clauses not joined by a contrastive marker whose polarities are
  both strong and opposite ("interesting, leaving you cold"; "not disappointing at all, it
  is very disappointing").

The polarity checks look only at single texts labelled ``positive`` or ``negative``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from checkray.engine.case_checks import Check, row_check
from checkray.engine.lang.stems import stem
from checkray.engine.schema import normalize_text

# ------------------------------------------------------------------------ cleaning

# Labels a model writes in front of (or after) a case: "Explanation:", "Answer:",
# "Sentence 1:", "Rephrased review 2:", "Output:" ...
_LABEL_WORDS = (
    r"explanation|answer|sentence|output|input|example|review|customer\s+review|rephrased(?:\s+review)?|"
    r"rephrasing|paraphrase|rewritten(?:\s+review)?|version|test\s*case|case|test|sample|result|response|"
    r"new\s+(?:test\s+)?case|option"
)
_LEAD_LABEL = re.compile(rf"^\s*\**\s*(?:{_LABEL_WORDS})\s*#?\s*\d*\s*\**\s*[:.)\-]\s*\**\s*", re.IGNORECASE)
_NUMBERING = re.compile(r"^\s*(?:\(?\d+[.)]|[-*\u2022]|\d+\s*[:\-])\s+")
# Commentary after the case: "... (This sentence is positive.)", " - Sentiment: Positive",
# " Label: negative", " Explanation: ...", '" - Should return: "...' (an instruction echoed)
_TRAILING = re.compile(
    r"\s*(?:\((?:this|the|it|note|positive|negative|label|sentiment|explanation)\b[^()]*\)"
    r"|[\"”]?\s*[-–—]+\s*should\s+(?:return|be|output|read|say)\s*:.*"
    r"|[-\u2013\u2014|]*\s*\b(?:label|sentiment|explanation|reason|note|polarity)\s*:.*)\s*$",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’`"
# A label left anywhere in a cleaned text: the model's reasoning, not a case.
_ARTEFACT = re.compile(
    r"\b(?:explanation|answer|label|sentiment|reason|rephrased(?: review)?|customer review|test case \d*|sentence \d+"
    r"|should (?:return|output))\s*:",
    re.IGNORECASE,
)


def clean_output(text: str) -> str:
    """A candidate without the prompt and reasoning artefacts around it: markdown bold,
    numbering and bullets, leading labels (``Explanation:``, ``Answer:``, ``Sentence 1:``,
    repeated ones too), surrounding quotes or brackets and trailing commentary."""
    text = " ".join((text or "").split()).replace("**", "")
    for _ in range(4):  # "1. Answer: "..."" peels in rounds
        before = text
        text = _NUMBERING.sub("", text)
        text = _LEAD_LABEL.sub("", text)
        text = _TRAILING.sub("", text)
        text = text.strip().strip(_QUOTES).strip()
        if len(text) > 1 and text[0] == "[" and text[-1] == "]":
            text = text[1:-1].strip()
        if text == before:
            break
    return text


def artefact_reason(text: str) -> str | None:
    m = _ARTEFACT.search(text or "")
    if m:
        return f"prompt/reasoning label {m.group(0)!r} left in the text"
    return markup_reason(text) or unfinished_reason(text) or missing_word_reason(text) or unidiomatic_reason(text)


# An open question answered yes or no: "What do you think about the staff? Yes" (read in a
# TestAug run, three expansions of one generated case).
_OPEN_QUESTION_YES_NO = re.compile(
    r"^\W*(?:what|how|why|where|who|whom|whose|which|when)\b[^?]*\?\s*(?:yes|no)\b", re.I
)
# Habitual "would" with a verb of state, for the past: "in the past I would like it" (one says
# "I used to like it" or "I would have liked it"; read in TestAug runs, four cases).
_STATE_VERBS = "like love admire hate prefer adore dislike loathe abhor detest despise appreciate welcome"
_PAST_WOULD_STATE = re.compile(
    r"\bin the past,?\s+(?:I|we|you|they|he|she)\s+would\s+(?:" + "|".join(_STATE_VERBS.split()) + r")\b", re.I
)


# A question answered yes or no opens with an auxiliary or a modal; a statement given a
# question mark is none: "I don't think the plane is ridiculous? No" (read in a TestAug run,
# six cases of one generated template).
_QUESTION_ANSWERED = re.compile(r"^\W*([\w']+)[^?]*\?\s*(?:yes|no)\b", re.I)
_QUESTION_OPENERS = set(
    "do does did is are was were am have has had can could will would shall should may might must "
    "don't doesn't didn't isn't aren't wasn't weren't haven't hasn't hadn't can't couldn't won't "
    "wouldn't shouldn't".split()
)
_WH_WORDS = {"what", "how", "why", "where", "who", "whom", "whose", "which", "when"}


def unidiomatic_reason(text: str) -> str | None:
    """Why ``text`` is grammatical-looking but not English anyone writes (None: no rule sees it)."""
    text = text or ""
    if _OPEN_QUESTION_YES_NO.search(text):
        return "an open question answered yes or no"
    m = _QUESTION_ANSWERED.search(text)
    if m and m.group(1).lower() not in _QUESTION_OPENERS | _WH_WORDS:
        return f"a statement given a question mark and an answer ({m.group(0)!r})"
    m = _PAST_WOULD_STATE.search(text)
    if m:
        return f"habitual 'would' with a verb of state ({m.group(0)!r}): 'used to' or 'would have' is English"
    return None


_PAIRS = {"(": ")", "[": "]"}


def markup_reason(text: str) -> str | None:
    """Why ``text`` holds markup no test case has (None: it does not): a brace, which is a
    template's slot syntax or a JSON answer's ("{ I have been confused about ...", read in a
    TestAug run), or a bracket opened and never closed, or closed and never opened."""
    text = text or ""
    for brace in "{}":
        if brace in text:
            return f"markup {brace!r} left in the text"
    for opening, closing in _PAIRS.items():
        depth = 0
        for ch in text:
            depth += (ch == opening) - (ch == closing)
            if depth < 0:
                break
        if depth:
            return f"an unbalanced {opening!r}{closing!r} in the text"
    return None


# An article right before a finite verb: the noun between them was left out ("that the was
# a bad meal", read in a TestAug run). "will" and "can" are left out: they are nouns too.
_ARTICLE_VERB = re.compile(r"\b(?:the|an?)\s+(?:is|are|was|were|has|have|had|does|did)\b(?!-)", re.IGNORECASE)


# A "that" clause that ends on its subject: "We found that the staff." (read in a TestAug
# run, with "We find that the company."). "that" before a determiner is a conjunction,
# never the demonstrative ("I like that movie."), so its clause needs a verb.
_THAT_NO_VERB = re.compile(
    r"\bthat\s+(?:the|an?|this|these|those|our|their|my|his|her|its)\s+[A-Za-z]+\s*[.!?]*\s*$", re.IGNORECASE
)
# "have" with a simple past that is no participle: "We have saw that the company."
_PAST_NOT_PARTICIPLE = (
    "saw went ate did took gave wrote came ran began drank knew spoke broke chose drove flew forgot froze "
    "rode rose sang stole swam threw woke wore fell grew hid shook"
).split()
_HAVE_PAST = re.compile(r"\b(?:have|has|had|'ve)\s+(?:" + "|".join(_PAST_NOT_PARTICIPLE) + r")\b", re.IGNORECASE)
# "disapprove" takes "of": "No one disapproves that crew." (a TestAug template's slot).
_DISAPPROVE_OBJECT = re.compile(
    r"\bdisapprov(?:e|es|ed|ing)\s+(?:that|this|these|those|the|an?|my|our|their|his|her|its)\b", re.IGNORECASE
)

_MISSING_WORD_RULES = (
    (_ARTICLE_VERB, "a word missing after the article ({})"),
    (_HAVE_PAST, "a simple past after 'have' ({}), where a participle belongs"),
    (_THAT_NO_VERB, "a verb missing in the clause {}"),
    (_DISAPPROVE_OBJECT, "'of' missing after 'disapprove' ({})"),
)


def missing_word_reason(text: str) -> str | None:
    """Why ``text`` reads as missing a word (None: it does not): an article followed by a
    verb, where the noun it introduces should stand; "have" with a simple past; a "that"
    clause with no verb; "disapprove" without "of"; else ``article_reason``."""
    text = text or ""
    for pattern, why in _MISSING_WORD_RULES:
        m = pattern.search(text)
        if m:
            return why.format(repr(m.group(0).strip()))
    return article_reason(text)


# "an" before a consonant sound, "a" before a vowel sound ("an European service", "an Swiss
# airline", read in a TestAug run). Spelling decides, with the usual exceptions: a silent h
# takes "an"; eu-, uni-, use-, one- sound a consonant and take "a". Capitals only words
# (acronyms: "an MBA", "a UN report") and single letters are read aloud and skipped.
_ARTICLE_WORD = re.compile(r"\b(an?)\s+([A-Za-z][a-z]+)\b")
_SILENT_H = ("hour", "honest", "honor", "honour", "heir")
_EITHER = ("hist", "homa", "herb", "hotel", "humbl")  # "an historical" is written too
_CONSONANT_VOWEL = ("eu", "unic", "unif", "unio", "uniq", "unis", "unit", "univ", "unil", "use", "usu", "util")
_CONSONANT_VOWEL += ("one", "once", "ubiq", "ufo")


def _vowel_sound(word: str) -> bool:
    w = word.lower()
    if w.startswith(_SILENT_H):
        return True
    return w[0] in "aeiou" and not w.startswith(_CONSONANT_VOWEL)


def article_reason(text: str) -> str | None:
    """Why ``text``'s a/an disagrees with the next word's sound (None: it does not)."""
    for m in _ARTICLE_WORD.finditer(text or ""):
        article, word = m.group(1).lower(), m.group(2)
        if word.lower() in ("a", "an") or word.lower().startswith(_EITHER):
            continue
        if (article == "an") != _vowel_sound(word):
            return f"the article does not fit the word after it ({m.group(0)!r})"
    return None


# Words no English sentence ends on: articles, prepositions, conjunctions, possessives.
_NEVER_LAST = frozenset(
    "a an the of to in on at for with by from into onto than and or nor but because although whose "
    "their its our my your".split()
)
_ARTICLES = frozenset({"a", "an", "the"})
_FINAL = re.compile(r"[.!?…\"'”’)\]]$")


def unfinished_reason(text: str) -> str | None:
    """Why ``text`` reads as cut off (None: it does not): no final punctuation and a last
    word no sentence ends on, or an article right before it ("He has been working on a
    new"): the generation stopped at its token limit, mid-phrase."""
    text = (text or "").strip()
    words = re.findall(r"[A-Za-z']+", text)
    if not words or _FINAL.search(text):
        return None
    last, before = words[-1].lower(), (words[-2].lower() if len(words) > 1 else "")
    if last in _NEVER_LAST or before in _ARTICLES:
        return f"cut off mid-phrase ('... {' '.join(words[-2:])}')"
    return None


# ------------------------------------------------------------------------ reference

# "neither", "either" or "both" standing alone for a pair, as the subject of the verb after
# it ("One crime story is unusual ..., and neither is well told", read in a demo MFT whose
# source named two stories). In an inversion ("neither is it as smart", "neither do
# cliches") the word means "nor" and the verb's subject follows it: that is English.
_PAIR_PRONOUN = re.compile(
    r"\b(neither|either|both)\s+(?:is|are|was|were|has|have|had|does|do|did|can|could|will|would|works?|worked"
    r"|seems?|seemed|manages?|managed|succeeds?|succeeded|comes?|came|holds?|held|feels?|felt|makes?|made)\b",
    re.IGNORECASE,
)
# Words that name (or point back at) more than one thing before the pronoun.
_PAIR_NAMING = frozenset("two both pair couple duo each either neither they them we us these those".split())
_SUBJECT_TAGS = frozenset({"PRP", "NN", "NNS", "NNP", "NNPS"})


def _names_a_pair(token: Any) -> bool:
    """A plural noun, a word like "two" or "they", or the second of coordinated nominals."""
    if token.tag_ in ("NNS", "NNPS") or token.lower_ in _PAIR_NAMING:
        return True
    return token.dep_ == "conj" and token.pos_ in ("NOUN", "PROPN", "PRON")


def pair_pronoun_reason(text: str, parse: Callable[[str], Any]) -> str | None:
    """Why ``text`` says "neither"/"either"/"both" of a pair it never names (None: it does
    not). A one-sentence case has no earlier sentence to name the pair, so the words
    before the pronoun must: a plural noun, coordinated nouns, "two", "they". ``parse``: a
    spaCy pipeline (called only when the pattern occurs)."""
    matches = list(_PAIR_PRONOUN.finditer(text or ""))
    if not matches:
        return None
    doc = parse(text)
    for m in matches:
        word = next((t for t in doc if t.idx == m.start()), None)
        if word is None or not (word.pos_ == "PRON" or word.dep_ in ("nsubj", "nsubjpass")):
            continue  # "either ... or", a determiner
        after = next((t for t in doc[word.i + 2 :] if t.lower_ not in ("n't", "not")), None)
        if after is not None and (after.tag_ in _SUBJECT_TAGS or after.pos_ == "PRON"):
            continue  # an inversion: "neither is it as smart"
        if not any(_names_a_pair(t) for t in doc[: word.i]):
            return f"{m.group(1)!r} stands for a pair the sentence never names ({m.group(0)!r})"
    return None


# ------------------------------------------------------------------------ overlap

_STOP = frozenset(
    "a an the and or but of to in on at for with by from as is are was were be been it its this that these those "
    "i you he she we they my your his her our their me him us them not no so very too just than then there here "
    "do does did have has had will would can could should may might must one each every all some any".split()
)
# The task's own vocabulary: a case using one of these words that its prompt's instructions
# use and its source texts do not repeats the instructions.
META_WORDS = frozenset(
    "minimum minimal functionality functional mft test tests testing sample samples customer format summary summarize "
    "rephrase rephrased rephrasing paraphrase nlp bracket brackets adjective adjectives noun nouns clause clauses "
    "negated description annotator label labels".split()
)


@lru_cache(maxsize=1)
def _meta_stems() -> frozenset[str]:
    return frozenset(stem(w) for w in META_WORDS)


def tokens(text: str) -> list[str]:
    return normalize_text(text or "").split()


def word_overlap(a: str, b: str) -> float:
    """Jaccard overlap of the normalized word sets of ``a`` and ``b`` (0..1)."""
    x, y = set(tokens(a)), set(tokens(b))
    return len(x & y) / len(x | y) if x and y else 0.0


def _content_bigrams(words: Sequence[str]) -> set[tuple[str, str]]:
    return {(a, b) for a, b in zip(words, words[1:]) if not (a in _STOP or b in _STOP)}


def instruction_text(sections: Iterable[str]) -> str:
    """A prompt's instruction words: its sections with the ``{placeholders}`` taken out."""
    return " ".join(re.sub(r"\{[^{}]*\}", " ", s) for s in sections)


def prompt_leak_reason(text: str, instructions: str, sources: Iterable[str] = ()) -> str | None:
    """Why ``text`` repeats the prompt's ``instructions`` (None: it does not): a content-word
    bigram or a ``META_WORDS`` word of the instructions, found in none of ``sources``."""
    words = tokens(text)
    inst = tokens(instructions)
    allowed = set()
    allowed_bigrams: set[tuple[str, str]] = set()
    for s in sources:
        w = tokens(s)
        allowed.update(w)
        allowed_bigrams |= _content_bigrams(w)
    shared = sorted((_content_bigrams(words) & _content_bigrams(inst)) - allowed_bigrams)
    if shared:
        return "repeats the prompt: " + ", ".join(" ".join(b) for b in shared[:3])
    # by stem: "testing the accuracy of family photos" repeats a prompt that says "test"
    allowed_stems = {stem(w) for w in allowed}
    inst_stems = {stem(w) for w in inst} & _meta_stems()
    meta = sorted({w for w in words if stem(w) in inst_stems and stem(w) not in allowed_stems})
    if meta:
        return "repeats the prompt's words: " + ", ".join(meta[:3])
    return None


# ------------------------------------------------------------------------ polarity

POLARITY_AGAINST = 0.5  # |score| of the deciding clause against the label that rejects
CONTRADICTION = 0.3  # |score| both clauses reach for a self-contradiction
_CONTRAST = re.compile(r"\b(?:but|however|yet|although|though|whereas|while|nevertheless|still)\b", re.IGNORECASE)
_CLAUSE = re.compile(r"\s*[,;:\u2013\u2014]\s*|\s+-\s+")
POLAR_LABELS = ("positive", "negative")
# "The film is not poor at all, it is remarkable": a last clause that restates decides.
_RESTATEMENT = re.compile(r"(?:it|this|that|the \w+)\s+(?:is|was|'s|turned out|feels|felt)\b", re.IGNORECASE)


# The words that negate what follows them (``n't`` is matched as a suffix too). "hardly"
# also softens a clause enough for the clause judges below, but is no negator of a word.
NEGATOR_WORDS = frozenset("not no never nobody nothing none neither nor without cannot".split())
_NEGATOR = re.compile(rf"\b(?:{'|'.join(sorted(NEGATOR_WORDS | {'hardly'}))})\b|n't\b", re.IGNORECASE)
# A negated clause is judged by VADER alone. VADER flips the word it negates reliably ("not
# great" -0.51), so a negated clause scoring negative against a positive label rejects at
# NEGATED_NEGATIVE; VADER misses a negation that scopes over a clause ("didn't think this was
# great" +0.63), so a positive score against a negative label must be this sure.
NEGATED_AGAINST = 0.7
NEGATED_NEGATIVE = 0.3


def negated(text: str) -> bool:
    return bool(_NEGATOR.search(text))


@lru_cache(maxsize=1)
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def vader_compound(text: str) -> float:
    """VADER's compound score of ``text`` (-1 .. 1)."""
    return float(_vader().polarity_scores(text)["compound"])


@lru_cache(maxsize=8192)
def polarity(text: str) -> float:
    """Two lexicon judges of ``text`` in one score: VADER's compound and TextBlob's polarity.
    Where one is about neutral (|x| < 0.1) the other decides; where both lean the same way
    the stronger one; where they disagree their mean (weak: neither rejects alone). VADER
    misses words ("leaving you cold") and TextBlob negations, so each covers the other."""
    if not text.strip():
        return 0.0
    from checkray.engine.lang.pattern_sentiment import pattern_polarity

    v = float(_vader().polarity_scores(text)["compound"])
    if negated(text):  # TextBlob reads "didn't think this was good" as positive; VADER negates
        return v
    b = pattern_polarity(text)
    if abs(v) < 0.1 or abs(b) < 0.1:
        return v if abs(v) >= abs(b) else b
    if (v > 0) == (b > 0):
        return v if abs(v) >= abs(b) else b
    return (v + b) / 2


def deciding_clause(text: str) -> str:
    """The text after the last contrastive marker; else a last clause that restates ("...,
    it is very disappointing"); else the whole text. A sentence that opens with a marker
    ("Although X, Y") is decided by what follows its first comma."""
    first = _CONTRAST.match(text.strip())
    if first:
        head, _, tail = text.partition(",")
        return tail.strip() or text
    parts = _CONTRAST.split(text)
    tail = parts[-1].strip(" ,;.")
    if len(parts) > 1 and tail:
        return tail
    last = _CLAUSE.split(text.strip(" .!"))[-1]
    return last if _RESTATEMENT.match(last) and last != text.strip(" .!") else text


_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|n't")
NEGATION_REACH = 3  # words before a polar word that a negator scopes over (as VADER)


def negated_polar_words(clause: str) -> tuple[list[str], bool, bool]:
    """The clause's negated negative words (VADER's lexicon, |valence| >= 1), and whether
    it holds an un-negated positive or an un-negated negative word."""
    lexicon = _vader().lexicon
    words = _WORD.findall(clause.lower())
    negated_negatives, praise, blame = [], False, False
    for i, word in enumerate(words):
        valence = lexicon.get(word, 0.0)
        if abs(valence) < 1.0:
            continue
        is_negated = any(_NEGATOR.fullmatch(w) or w.endswith("n't") for w in words[max(0, i - NEGATION_REACH) : i])
        if valence < 0 and is_negated:
            negated_negatives.append(word)
        elif valence > 0 and not is_negated:
            praise = True
        elif valence < 0:
            blame = True
    return negated_negatives, praise, blame


def litotes_reason(clause: str, expected: str) -> str | None:
    """A clause whose only polarity is a negated negative word ("the ending was not very
    bad", "the cast is not sad"): faint praise, which careful readers do not sign as
    positive, and never a negative verdict."""
    negatives, praise, blame = negated_polar_words(clause)
    if not negatives or praise or blame:
        return None
    words = ", ".join(negatives)
    if expected == "positive":
        return f"positive only by a negated negative ({words}): faint praise, not a positive verdict"
    return f"a negated negative ({words}) cannot make it negative"


def polarity_reason(text: str, expected: str) -> str | None:
    """Why VADER/TextBlob contradicts ``expected`` (None: it does not, or not strongly), or
    why a positive label rests on litotes alone."""
    if expected not in POLAR_LABELS:
        return None
    clause = deciding_clause(text)
    if negated(clause):
        faint = litotes_reason(clause, expected)
        if faint:
            which = "sentence" if clause == text else f"deciding clause {clause!r}"
            return f"{which}: {faint}"
    score = polarity(clause)
    if negated(clause):
        limit = NEGATED_NEGATIVE if expected == "positive" else NEGATED_AGAINST
    else:
        limit = POLARITY_AGAINST
    against = score <= -limit if expected == "positive" else score >= limit
    if not against:
        return None
    which = "sentence" if clause == text else f"deciding clause {clause!r}"
    return f"{which} scores {score:+.2f} (VADER/TextBlob), against {expected}"


def contradiction_reason(text: str) -> str | None:
    """Two clauses of strong, opposite polarity that no contrastive marker joins."""
    for segment in _CONTRAST.split(text):
        clauses = [c for c in _CLAUSE.split(segment) if len(tokens(c)) >= 2]
        scored = [(c, polarity(c)) for c in clauses]
        pos = [(c, s) for c, s in scored if s >= CONTRADICTION]
        neg = [(c, s) for c, s in scored if s <= -CONTRADICTION]
        if pos and neg:
            (p, ps), (n, ns) = pos[0], neg[0]
            return f"self-contradiction: {p.strip()!r} ({ps:+.2f}) vs {n.strip()!r} ({ns:+.2f})"
    return None


# ------------------------------------------------------------------------ checks

Row = Mapping[str, Any]


def artefact_check() -> Check:
    return row_check(
        "artefact",
        lambda r: artefact_reason(r["text"]) or artefact_reason(r.get("text_pair") or ""),
        "label left in, or cut off mid-phrase",
    )


def pair_pronoun_check(parse: Callable[[str], Any]) -> Check:
    """``pair_pronoun_reason`` on every text of a row; ``parse``: a spaCy pipeline."""
    return row_check(
        "pair pronoun",
        lambda r: pair_pronoun_reason(r["text"], parse) or pair_pronoun_reason(r.get("text_pair") or "", parse),
        "'neither'/'both' of a pair the sentence never names",
    )


def prompt_leak_check(instructions: Callable[[Row], str], sources: Callable[[Row], Iterable[str]]) -> Check:
    """``instructions(row)``: the row's prompt instructions; ``sources(row)``: the texts it may repeat."""

    def one(r: Row) -> str | None:
        texts = [t for t in (r["text"], r.get("text_pair")) if t]
        for t in texts:
            why = prompt_leak_reason(t, instructions(r), sources(r))
            if why:
                return why
        return None

    return row_check("prompt leak", one, "n-grams of the prompt's instructions")


def near_copy_check(sources: Callable[[Row], Iterable[str]], threshold: float) -> Check:
    """Rejects a row whose text overlaps one of ``sources(row)`` by >= ``threshold``."""

    def one(r: Row) -> str | None:
        text = " ".join(t for t in (r["text"], r.get("text_pair")) if t)
        best, which = 0.0, ""
        for s in sources(r):
            o = word_overlap(text, s)
            if o > best:
                best, which = o, s
        if best >= threshold:
            return f"near-copy ({best:.2f} >= {threshold:.2f} word overlap) of {which[:120]!r}"
        return None

    return row_check("near copy", one, f"word overlap with a source >= {threshold}")


def duplicate_check(seen: set | None = None) -> Check:
    """Rejects a row whose normalized (text, text_pair) was met before (in ``seen``, updated,
    or earlier in the batch)."""
    seen = set() if seen is None else seen

    def batch(rows: Sequence[Row]) -> list[str | None]:
        out = []
        for r in rows:
            key = (normalize_text(r["text"]), normalize_text(r.get("text_pair") or ""))
            if key in seen:
                out.append("duplicate of a case met before (normalized text)")
            else:
                seen.add(key)
                out.append(None)
        return out

    return Check("duplicate", batch, "normalized text met before")


def polarity_check(expected: Callable[[Row], str]) -> Check:
    def one(r: Row) -> str | None:
        return None if r.get("text_pair") else polarity_reason(r["text"], expected(r))

    return row_check(
        "polarity", one, "VADER/TextBlob strongly against the label, or the label resting on a negated negative"
    )


def contradiction_check(expected: Callable[[Row], str]) -> Check:
    def one(r: Row) -> str | None:
        if r.get("text_pair") or expected(r) not in POLAR_LABELS:
            return None
        return contradiction_reason(r["text"])

    return row_check("contradiction", one, "two clauses of opposite strong polarity")
