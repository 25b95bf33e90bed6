"""Fluent S²LCT wrappers and the checks a seed sentence must pass before one wraps it (pure).

The paper's wrappers ("Do I agree that <sentence>? yes", "I agreed that <sentence> but it
wasn't.") paste any corpus sentence after "that"; most results are not English (a noun
phrase or several sentences after "that") or contradict themselves. Here a found sentence
is first read for its **form** (``seed_form``):

* ``clause``: one sentence with a subject and a finite verb ("the plot is a mess"),
  embedded as is (lowercased, final punctuation dropped);
* ``np``: a noun-phrase fragment ("a compelling film about grief"), or the predicate of
  a clause about the film itself ("it's / this is / the film is <predicate>"), which
  wrappers embed after "it was", "call it" ...;

and everything else is refused with its reason (several sentences, questions, quotes,
brackets, colons, dashes, first/second person, contrast words that make a sentence mixed,
too long). Its **polarity** must be clear (``polarity_reason``): for a polar label both
sentence-level sources (VADER's compound, TextBlob) must agree with the corpus label; for
a neutral one every word must be neutral in VADER, AFINN and TextBlob's movie-review
lexicon and both sentence scores must be 0.

A capability's ``fluent`` wrappers (its YAML) then pick a template by form; the
template's ``{s}`` is the seed, other ``{name}`` fields are drawn from the wrapper's
``choose`` lists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from checkray.engine.lang.identity import is_person_noun
from checkray.engine.lang.polarity import polar_sources, sentence_polarity

Token = Mapping[str, Any]

NON_WORDS = {"PUNCT", "SPACE", "SYM", "X"}
# Tokens that make an embedded sentence unreadable after "that" or inside a question.
BAD_PUNCT = {
    ";",
    ":",
    "--",
    "-",
    "?",
    "!",
    "(",
    ")",
    "[",
    "]",
    "-lrb-",
    "-rrb-",
    "...",
    "..",
    "`",
    "``",
    "''",
    '"',
    "/",
    "*",
}
FINAL_PUNCT = {".", "!", "?", "..."}
# Words English repeats on purpose ("he had had enough", "that that", "very very good" is
# not among them: a corpus sentence repeating any other word is a typo such as "the the").
REPEATABLE = {"had", "that"}
# A sentence with one of these is often mixed ("X, but Y"): its polarity is not one label.
CONTRAST = {
    "but",
    "although",
    "though",
    "however",
    "yet",
    "while",
    "whereas",
    "despite",
    "except",
    "unless",
    "nevertheless",
    "nonetheless",
    "if",
    "otherwise",
    "instead",
}
# Inside "Do I think that ..." or "Some critics say ...", a first or second person reads
# as someone else than the wrapper's speaker.
PERSONAL = {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your", "yours", "yourself", "'re"}
SUBJECT_DEPS = {"nsubj", "nsubjpass", "expl", "csubj"}
FINITE_TAGS = {"VBZ", "VBP", "VBD", "MD"}
FILM_SUBJECTS = {
    "it",
    "this",
    "the film",
    "the movie",
    "this film",
    "this movie",
    "the picture",
    "this picture",
    "the result",
}
NEGATION_WORDS = {"not", "n't", "never", "no"}
LEADING_ADVERBS = {
    "also",
    "still",
    "just",
    "certainly",
    "definitely",
    "really",
    "simply",
    "actually",
    "surely",
    "indeed",
}
# Past tense of the finite verbs a tense shift rewrites ("I used to think it was ...").
PAST = {
    "is": "was",
    "'s": "was",
    "are": "were",
    "'re": "were",
    "am": "was",
    "has": "had",
    "have": "had",
    "does": "did",
    "do": "did",
    "can": "could",
    "will": "would",
    "'ll": "would",
}


_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")


def _text_words(text: str) -> list[str]:
    """The words of lower-cased ``text`` (hyphenated and with apostrophes kept whole)."""
    return _WORD.findall(text)


def _words(tokens: Sequence[Token]) -> list[Token]:
    return [t for t in tokens if t["pos"] not in NON_WORDS]


def _text(tokens: Sequence[Token]) -> str:
    return "".join(t["t"] + t["ws"] for t in tokens).strip()


def _strip_final(tokens: Sequence[Token]) -> list[Token]:
    toks = list(tokens)
    while toks and (toks[-1]["t"] in FINAL_PUNCT or toks[-1]["t"] in {",", "."}):
        toks = toks[:-1]
    return toks


def _lower_first(tokens: list[Token]) -> list[Token]:
    if tokens and tokens[0]["tag"] not in ("NNP", "NNPS") and tokens[0]["t"] != "I":
        first = dict(tokens[0])
        first["t"] = first["t"][:1].lower() + first["t"][1:]
        tokens = [first, *tokens[1:]]
    return tokens


def _children(tokens: Sequence[Token], i: int) -> list[int]:
    return [j for j, t in enumerate(tokens) if t["head"] == i and j != i]


def _relative(tokens: Sequence[Token]) -> list[dict]:
    """Tokens with ``head`` relative to the sentence (the parser's heads are document-level)."""
    base = min((t["head"] for t in tokens), default=0)
    roots = [t for t in tokens if t["dep"] == "ROOT"]
    if roots and all(0 <= t["head"] < len(tokens) for t in tokens):
        return [dict(t) for t in tokens]
    return [dict(t, head=t["head"] - base) for t in tokens] if roots else [dict(t) for t in tokens]


def form_reason(tokens: Sequence[Token], *, max_words: int = 20) -> str | None:
    """Why a sentence cannot be embedded in a wrapper (None: it can)."""
    words = _words(tokens)
    if not words:
        return "empty"
    if sum(t["dep"] == "ROOT" for t in tokens) != 1:
        return "several sentences"
    if len(words) > max_words:
        return f"long ({len(words)} words > {max_words})"
    if any(t["t"] in ("?", "!") for t in tokens):
        return "punctuation '?'/'!' (a question or exclamation)"
    inner = _strip_final(tokens)
    for t in inner:
        low = t["t"].lower()
        joined = t["t"] == "-" and not t["ws"]  # "fast-moving" is three tokens
        if (low in BAD_PUNCT and not joined) or (low == "'" and t["tag"] != "POS"):
            return f"punctuation '{t['t']}'"
        if low == "." and t["pos"] == "PUNCT":
            return "several sentences"
    for a, b in zip(words, words[1:], strict=False):
        if a["t"].lower() == b["t"].lower() and a["t"].lower() not in REPEATABLE:
            return f"repeated word '{a['t']} {b['t']}' (a typo)"
    lows = {t["t"].lower() for t in words}
    if lows & CONTRAST:
        return f"contrast word '{sorted(lows & CONTRAST)[0]}' (mixed polarity)"
    if lows & PERSONAL:
        return f"first/second person '{sorted(lows & PERSONAL)[0]}'"
    first = words[0]
    if first["pos"] in ("CCONJ", "SCONJ", "INTJ") or first["t"].lower() in {"so", "then", "and", "or", "too"}:
        return f"starts with '{first['t']}'"
    if not all(ch.isascii() for t in tokens for ch in t["t"]):
        return "non-ASCII"
    return None


def _with_aux(toks: Sequence[Token], root: int, kids: list[int]) -> list[int]:
    """The root's children and those of its auxiliaries (a misparse hangs a subject there)."""
    out = list(kids)
    for j in kids:
        if toks[j]["dep"] in ("aux", "auxpass"):
            out += _children(toks, j)
    return out


def is_comparative(tok: Token) -> bool:
    """A comparative adjective or adverb: tagged so, or an -er form WordNet's regular rules
    reduce to another adjective (spaCy tags "stupider" as a noun)."""
    from checkray.engine.lang.wordnet import wordnet

    if tok.get("tag") in ("JJR", "RBR"):
        return True
    word = tok["t"].lower()
    base = wordnet().morphy(word, "a") if word.endswith("er") else None
    return base is not None and base != word


def seed_form(tokens: Sequence[Token], *, max_words: int = 20) -> tuple[dict[str, str], str | None]:
    """The views of a found sentence a wrapper can embed: ``clause`` (embedded clause
    text), ``past`` (the clause with its first finite verb in the past tense, when one
    was rewritten), ``np`` (a noun-phrase fragment, or the predicate of "it/this/the film
    is ..."), or ({}, reason)."""
    why = form_reason(tokens, max_words=max_words)
    if why:
        return {}, why
    toks = _relative(_strip_final(tokens))
    root = next((i for i, t in enumerate(toks) if t["dep"] == "ROOT"), None)
    if root is None:
        return {}, "no root"
    r = toks[root]
    kids = _children(toks, root)
    heads = [root] + [j for j in kids if toks[j]["dep"] in ("attr", "acomp")]
    compared = next((toks[j]["t"] for j in heads if is_comparative(toks[j])), None)
    if compared and not any(t["t"].lower() == "than" for t in toks):
        # "Would I call it stupider?": stupider than what? The standard was in the review's
        # sentence before.
        return {}, f"comparative '{compared}' without its standard ('than ...')"
    why = back_reference_reason(toks)
    if why:
        return {}, why
    if r["pos"] in ("VERB", "AUX"):
        return _clause_views(toks, root, kids)
    if r["tag"] in ("NN", "NNS"):
        return _noun_phrase_views(toks, r)
    return {}, f"fragment ({r['pos']} root)"


# Words at the end of a clause that point to what the review said before it.
_BACK_POINTING_ENDINGS = (("as", "well"), ("too",), ("either",))
# ... and words at its start that place it after something the review told before
_BACK_POINTING_OPENINGS = (("after", "that"), ("before", "that"), ("since", "then"), ("by", "then"), ("then",))
# "two such likeable actors": a "such" after these announces a "that ..." or "as ..."
_QUANTIFIERS = frozenset("no any all many some these those other few several".split())


def back_reference_reason(tokens: Sequence[Token]) -> str | None:
    """Why a sentence reads right only inside its review (None: it stands alone): it ends
    on a word that adds to something said before ("the voices are fine as well", "it's
    funny too"), opens with one that follows on from it ("after that , it just gets stupid
    and maudlin"), or its "such" after a number or quantifier lost the "that ..." or "as ..."
    it announces ("Hugh Grant and Sandra Bullock are two such likeable actors")."""
    kept = _words(tokens)
    words = [t["t"].lower() for t in kept]
    for ending in _BACK_POINTING_ENDINGS:
        if len(words) > len(ending) and tuple(words[-len(ending) :]) == ending:
            return f"ends on '{' '.join(ending)}': it adds to something the review said before"
    for opening in _BACK_POINTING_OPENINGS:
        if len(words) > len(opening) and tuple(words[: len(opening)]) == opening:
            return f"opens with '{' '.join(opening)}': it follows on from something the review told before"
    for i, word in enumerate(words[1:], start=1):
        # "such a sweet film" exclaims and stands alone; "two such likeable actors" points on
        if word == "such" and (kept[i - 1]["tag"] == "CD" or words[i - 1] in _QUANTIFIERS):
            if not {"that", "as"} & set(words[i + 1 :]):
                return f"'{words[i - 1]} such' without the 'that ...' or 'as ...' it announces"
    return None


def open_quote_reason(tokens: Sequence[Token]) -> str | None:
    """Why a sentence was cut inside a quotation (None: its quotes close): more opening
    quote marks than closing ones ("As Hugh Grant says repeatedly throughout the movie ,
    ` Lovely !" is the character's word, and the review goes on)."""
    opened = sum(t["t"] in ("`", "``") for t in tokens)
    closed = sum(t["t"] in ("'", "''") and t.get("tag") != "POS" for t in tokens)
    return "a quotation left open: the sentence was cut inside it" if opened > closed else None


def _in_hyphenated_word(toks: Sequence[Token], i: int) -> bool:
    """Whether token i is joined by a hyphen to its neighbour ("must-see" is three tokens)."""
    before = i > 0 and toks[i - 1]["t"] == "-" and not toks[i - 1].get("ws")
    after = i + 1 < len(toks) and toks[i + 1]["t"] == "-" and not toks[i].get("ws")
    return bool(before or after)


def _clause_reason(toks: Sequence[Token], root: int, kids: list[int]) -> str | None:
    """Why a sentence with a verb root is not a clause a wrapper can embed (None: it is)."""
    r = toks[root]
    subjects = [j for j in kids if toks[j]["dep"] in SUBJECT_DEPS]
    finite = r["tag"] in FINITE_TAGS or any(
        toks[j]["dep"] in ("aux", "auxpass") and toks[j]["tag"] in FINITE_TAGS for j in kids
    )
    if not subjects:
        return "no subject (imperative or fragment)"
    if sum(toks[j]["dep"] in ("nsubj", "nsubjpass") for j in kids) > 1:
        # "a film about friendship that men can embrace and women will talk about":
        # a noun phrase misparsed as a clause, which "Do I think that ...?" cannot embed
        return "two subjects of one verb (a noun phrase misparsed as a clause)"
    verbs = [root] + [j for j in kids if toks[j]["dep"] in ("aux", "auxpass")]
    hyphenated = next((toks[j]["t"] for j in verbs if _in_hyphenated_word(toks, j)), None)
    if hyphenated:
        # "a backstage must-see for true fans of comedy": the "verb" is part of a noun
        return f"verb '{hyphenated}' inside a hyphenated word (a noun phrase misparsed as a clause)"
    relative = [j for j in _with_aux(toks, root, kids) if toks[j]["tag"] in ("WDT", "WP")]
    if any(toks[j]["dep"] in SUBJECT_DEPS for j in relative):
        # "a remarkable film that appears destined to become a landmark": the relative
        # pronoun is the subject, so the sentence is a noun phrase with a relative clause
        return f"relative pronoun '{toks[relative[0]]['t']}' as the subject (a noun phrase misparsed as a clause)"
    if toks[0]["tag"] == "VB":
        return f"starts with the bare verb '{toks[0]['t']}' (an imperative)"
    if not finite:
        return "no finite verb"
    if subjects[0] > root and not any(toks[j]["dep"] in ("aux", "auxpass") for j in kids if j < subjects[0]):
        return "inverted subject"
    if toks[0]["t"].lower() in {"what", "how", "why", "who", "when", "where"} and subjects[0] != 0:
        return "starts with a wh-word"
    return None


def _clause_views(toks: Sequence[Token], root: int, kids: list[int]) -> tuple[dict[str, str], str | None]:
    """A clause's views: itself, its past tense, and the predicate of "it is ..." as a noun phrase."""
    why = _clause_reason(toks, root, kids)
    if why:
        return {}, why
    clause = _lower_first(toks)
    views = {"clause": _text(clause)}
    past = past_tense(clause, root, kids)
    if past:
        views["past"] = _text(past)
    predicate = _film_predicate(toks, root, kids)
    if predicate:
        views["np"] = predicate
    return views, None


def _film_predicate(toks: Sequence[Token], root: int, kids: list[int]) -> str | None:
    """ "it's / this is / the film is <predicate>": the predicate is what the film is, a
    noun-phrase view ("call it <predicate>"); None when there is none a reader would sign."""
    subjects = [j for j in kids if toks[j]["dep"] in SUBJECT_DEPS]
    subj = " ".join(toks[j]["t"].lower() for j in _subtree(toks, subjects[0]))
    if toks[root]["lemma"] != "be" or subj not in FILM_SUBJECTS or subjects[0] > root:
        return None
    after = toks[root + 1 :]
    if not after or after[0]["t"].lower() in NEGATION_WORDS or any(t["dep"] in ("aux", "auxpass") for t in after):
        return None
    attrs = [j for j in kids if toks[j]["dep"] in ("attr", "acomp") and j > root]
    # "it's also extremely effective" -> "extremely effective" ("call it also ..." is not English)
    while after and after[0]["pos"] == "ADV" and after[0]["t"].lower() in LEADING_ADVERBS:
        after = after[1:]
    # A finite verb outside a relative clause is a second clause, which "call it ..." cannot
    # take ("a travesty of the genre and even as spoof takes itself too seriously").
    clause = any(t["tag"] in FINITE_TAGS and t["dep"] != "relcl" for t in after)
    # "it is a dream cast of ...": 'it' (the film) is not people
    people = any(toks[j]["pos"] == "NOUN" and is_person_noun(toks[j]["t"]) for j in attrs)
    if not after or not attrs or clause or people or any(t["t"].lower() in NEGATION_WORDS for t in after):
        return None
    return _text(after)


def _noun_phrase_views(toks: Sequence[Token], r: Token) -> tuple[dict[str, str], str | None]:
    """A noun-phrase fragment's view, or why it is not one a wrapper can embed."""
    # A finite verb outside a relative clause means a mis-parsed clause ("the potential remains unrealized").
    if any(t["tag"] in FINITE_TAGS and t["dep"] != "relcl" for t in toks):
        return {}, "noun phrase with a finite verb"
    # So does a plural noun right before a determiner or an -ly adverb: "top-notch action
    # powers this romantic drama", "the tone shifts abruptly from ..." are clauses whose
    # verb was tagged as a noun.
    for a, b in zip(toks, toks[1:]):
        determiner = b["tag"] in ("DT", "PRP$") and b["t"].lower() not in ("all", "both")
        ly_adverb = b["tag"] == "RB" and b["t"].lower().endswith("ly")
        if a["tag"] == "NNS" and (determiner or ly_adverb):
            return {}, f"noun phrase with '{a['t']} {b['t']}' (a verb tagged as a noun)"
    if len(_words(toks)) > 14:
        return {}, "long noun phrase"
    if is_person_noun(r["t"]):
        # "Would I call it a dream cast of solid female talent?": "it" is the film
        return {}, f"noun phrase naming people ('{r['t']}'), which 'it' (the film) is not"
    first = toks[0]["t"].lower()
    if first in {"a", "an", "the", "this", "another"} or (r["tag"] == "NNS" and toks[0]["pos"] == "ADJ"):
        return {"np": _text(_lower_first(toks))}, None
    return {}, f"noun phrase starting with '{toks[0]['t']}'"


CONTENT_POS = {"ADJ", "ADV", "NOUN", "VERB"}


CLEAR_CORPUS_POLARITY = 0.5  # |value| from which a labeled corpus's word counts as polar


def clear_corpus_polarity(word: str, corpus_polarity: Mapping[str, float] | None) -> float:
    """The word's polarity in the labeled corpora when clear (|value| >= 0.5), else 0."""
    value = (corpus_polarity or {}).get(word.lower(), 0.0)
    return value if abs(value) >= CLEAR_CORPUS_POLARITY else 0.0


def is_polar(tok: Token, corpus_polarity: Mapping[str, float] | None = None) -> bool:
    """A content word with a polarity in a lexicon (VADER, AFINN, TextBlob) or, clearly
    (|value| >= 0.5), in the labeled corpus."""
    if tok["pos"] not in CONTENT_POS:
        return False
    if polar_sources(tok["t"], tok.get("lemma")):
        return True
    return clear_corpus_polarity(tok["t"], corpus_polarity) != 0.0


def denial_reason(tokens: Sequence[Token], corpus_polarity: Mapping[str, float] | None = None) -> str | None:
    """Why denying a clause as a whole does not flip its sentiment (None: it does).

    A wrapper that denies its seed ("Do I think that {s}? No, I don't.", "I was told that
    {s}, but that wasn't true") denies the clause's predicate. Praise or blame in the
    subject ("its engaging simplicity is driven by appealing leads") or in a modifier put
    before it ("hailed as a clever exercise, this picture is more accurately chabrolian")
    stays true after the "no", so the expected label would be wrong; a predicate with no
    polar word denies nothing a reader would call sentiment."""
    toks = _relative(_strip_final(tokens))
    root = next((i for i, t in enumerate(toks) if t["dep"] == "ROOT"), None)
    if root is None:
        return None
    kids = _children(toks, root)
    subjects = [j for j in kids if toks[j]["dep"] in SUBJECT_DEPS]
    if not subjects:
        return None  # a noun phrase: denied whole
    for j in kids:
        # "Do I think that it is amusing, and that's all it needs to be? No": whether the
        # "no" takes the second clause too is anyone's guess.
        if toks[j]["dep"] == "conj" and any(toks[k]["dep"] in SUBJECT_DEPS for k in _children(toks, j)):
            return f"two coordinated clauses ('... {toks[j]['t']} ...'): the denial's scope is unclear"
    side = set(_subtree(toks, subjects[0]))
    for j in kids:
        if j < subjects[0] and toks[j]["dep"] not in ("aux", "auxpass", "neg", "punct"):
            side |= set(_subtree(toks, j))  # fronted modifiers: "hailed as ..., this picture ..."
    for j in sorted(side):
        if is_polar(toks[j], corpus_polarity):
            return f"polar word '{toks[j]['t']}' outside the denied predicate (subject or fronted modifier)"
    kept = presupposed(toks, root)
    for j in range(len(toks)):
        if j not in side and j in kept and is_polar(toks[j], corpus_polarity):
            return f"polar word '{toks[j]['t']}' is presupposed, not denied ({kept[j]})"
    if not any(is_polar(toks[j], corpus_polarity) for j in range(len(toks)) if j not in side):
        return "no polar word in the predicate the wrapper denies"
    return None


TOP_DEGREE = 0.75  # mean lexicon value (each source in [-1, 1]) of a word at the top of its scale
SUPERLATIVE_TAGS = {"JJS", "RBS"}
# Maximizers (Quirk et al.'s degree adverbs that put their word at the end of the scale,
# unlike boosters such as "very" or "really": "not very good" is a pan, "not extremely
# unpleasant" is not praise).
MAXIMIZERS = frozenset(
    "absolutely completely entirely extremely fully perfectly thoroughly totally utterly incredibly "
    "infinitely unbelievably exceptionally amazingly remarkably extraordinarily supremely "
    "exceedingly immensely tremendously enormously".split()
)


def degree_reason(tokens: Sequence[Token], core: str) -> str | None:
    """Why denying the embedded ``core`` does not give the opposite verdict (None: it does):
    it claims the top of a scale. "Would I call it a masterpiece? No" or "not the best
    of his comedies" only takes back the top degree and leaves room for good (a scalar
    implicature), as "not brilliant" does; "not good" is a pan. A top-degree word is a
    superlative with a polar word (itself or the adjective it heads: "the most repellent")
    or a polar word whose lexicon values average |v| >= ``TOP_DEGREE`` ("masterpiece",
    "brilliant", "outstanding"; "great", "impressive" and "good" stay below), or a polar
    word after a maximizer ("extremely unpleasant", "utterly painful")."""
    words = set(_text_words(core.lower()))
    toks = [t for t in tokens if t["t"].lower() in words]
    for i, t in enumerate(toks):
        values = list(polar_sources(t["t"].lower()).values()) or list(
            polar_sources(t.get("lemma", "").lower()).values()
        )
        if values and abs(sum(values) / len(values)) >= TOP_DEGREE:
            return f"'{t['t']}' is the top of its scale: denying it leaves room for the same verdict, weaker"
        prev = toks[i - 1]["t"].lower() if i else ""
        if values and prev in MAXIMIZERS:
            return f"'{prev} {t['t']}' is the top of its scale: denying it leaves room for the same verdict, weaker"
        if t.get("tag") in SUPERLATIVE_TAGS:
            nxt = toks[i + 1] if i + 1 < len(toks) else None
            heads_polar = nxt is not None and nxt.get("tag", "").startswith("JJ") and polar_sources(nxt["t"].lower())
            # "most" and "least" are superlatives of the adjective they head ("most people": none)
            if heads_polar or (values and t["t"].lower() not in ("most", "least")):
                return f"superlative '{t['t']}': denying it leaves room for the same verdict, weaker"
    return None


COMPARATIVE_TAGS = {"JJR", "RBR"}
# "as good as", "almost as much as" (not "as well as", which joins two things)
_AS_AS = re.compile(r"\bas\s+(?!well\s+as\b)[a-z'-]+(?:\s+[a-z'-]+)?\s+as\b")


def comparison_reason(tokens: Sequence[Token], core: str) -> str | None:
    """Why denying ``core`` has no single side (None: it has): it makes a comparison.
    "I wouldn't say that Moore's performance impresses almost as much as her work in Safe"
    may only say it is less than her best; "not better than the first" leaves it good."""
    low = core.lower()
    m = _AS_AS.search(low)
    if m:
        return f"a comparison ('{m.group(0)}'): denying it may deny only the degree"
    words = set(_text_words(low))
    for t in tokens:
        w = t["t"].lower()
        if w in words and (w == "than" or t.get("tag") in COMPARATIVE_TAGS):
            return f"a comparison ('{t['t']}'): denying it may deny only the degree"
    return None


# Exclusive focus words: "the sole bright spot", "the only good thing", "just a bad movie".
EXCLUSIVES = frozenset("only sole lone solely merely just".split())
# Universal claims: "Do I think that it's always fascinating ...? No" says "not always",
# which leaves it fascinating most of the time.
UNIVERSALS = frozenset("always every everything everyone everybody everywhere".split())


def exclusive_reason(core: str) -> str | None:
    """Why denying ``core`` has no clear verdict (None: it has): an exclusive focus word
    singles out one part. "Do I think that William Shatner is the sole bright spot? No"
    may deny that he is bright or that he is alone (the rest is as good), and the praise
    of "the sole bright spot" already implies the rest is bad."""
    for word in _text_words(core.lower()):
        if word in EXCLUSIVES:
            return f"'{word}' singles out one part: denying it may deny the part or its being alone"
        if word in UNIVERSALS:
            return f"'{word}' makes a universal claim: denying it says only 'not {word}'"
        if word == "both":
            return "'both' joins two claims: denying them may leave one of the two"
    return None


# A claim about the whole length of the film: "a story that zings all the way through" or
# "funny from start to finish" denied may mean it zings part of the way.
_WHOLE_SPAN = re.compile(
    r"\b(?:all the way through|from (?:start|beginning) to (?:finish|end)|throughout|all along|the whole way)\b"
)
# A claim about expectations: "a surprisingly funny movie" denied may take back only the surprise.
EXPECTATION_ADVERBS = frozenset("surprisingly unexpectedly unusually".split())


def scope_reason(core: str) -> str | None:
    """Why denying ``core`` may deny less than its verdict (None: it denies the verdict):
    a claim about the whole length of the film, or about what was expected."""
    low = core.lower()
    m = _WHOLE_SPAN.search(low)
    if m:
        return f"'{m.group(0)}' claims the whole length: denying it may deny only the span"
    for word in _text_words(low):
        if word in EXPECTATION_ADVERBS:
            return f"'{word}' is about what was expected: denying it may take back only that"
    return None


def mixed_reason(text: str, label: str, corpus_polarity: Mapping[str, float] | None = None) -> str | None:
    """Why a seed a wrapper denies is not of one polarity (None: it is): a word whose
    polarity is the opposite of ``label`` in a lexicon or, clearly, in the labeled corpus.
    Denying a mixed description ("Would I call it a smart, arch and rather cold-blooded
    comedy? No, I wouldn't.") says nothing a reader could call positive or negative."""
    opposite = {"positive": "negative", "negative": "positive"}.get(label)
    if opposite is None:
        return None
    for word in _text_words(text.lower()):
        if _word_sign(word, corpus_polarity) == opposite:
            return f"'{word}' is {opposite} in a {label} seed the wrapper denies (mixed: the denial says nothing clear)"
    return None


WEAK_LEXICON = 0.3  # |mean lexicon value| under which the labeled corpus may dispute a word


def disputed_reason(text: str, corpus_polarity: Mapping[str, float] | None = None) -> str | None:
    """Why a polar seed's label is open to dispute (None: it is not): a word whose polarity
    sources disagree in sign, the lexicons among themselves ("haunting": VADER -0.28, AFINN
    +0.2) or the lexicons against its clear polarity in the labeled corpus. Reviews use such
    words both ways ("silly", "relentless", "sentimental"), so a reader cannot tell which
    side the seed, and every case built on it, is on."""
    for word in _text_words(text.lower()):
        values = polar_sources(word)
        signs = {v > 0 for v in values.values() if v}
        mean = sum(values.values()) / len(values) if values else 0.0
        corpus = clear_corpus_polarity(word, corpus_polarity)
        # the corpus disputes only a weak lexicon verdict: reviews praise films about
        # "grief" (positive in the corpus), yet no reader hears the word as praise
        if corpus and 0 < abs(mean) < WEAK_LEXICON and (mean > 0) != (corpus > 0):
            side = "positive" if corpus > 0 else "negative"
            return f"'{word}' is {side} in the labeled corpus, weakly the other way in the lexicons: its polarity is disputed"
        if len(signs) == 2:
            shown = ", ".join(f"{k} {v:+.2f}" for k, v in values.items())
            return f"'{word}' has polarities of both signs ({shown}): its polarity is disputed"
    return None


def _word_sign(word: str, corpus_polarity: Mapping[str, float] | None) -> str:
    """A word's polarity: the sign of its lexicon values (VADER, AFINN, TextBlob) taken
    together, else its clear polarity in the labeled corpus, else that of its hyphenated
    parts ("cold-blooded")."""
    values = list(polar_sources(word).values())
    if not values:
        values = [clear_corpus_polarity(word, corpus_polarity)]
    if not any(values) and "-" in word:
        signs = {_word_sign(part, corpus_polarity) for part in word.split("-") if part}
        return next(iter(signs - {"neutral"})) if len(signs - {"neutral"}) == 1 else "neutral"
    total = sum(values)
    return "positive" if total > 0 else "negative" if total < 0 else "neutral"


# A noun with one of these determiners names something the speaker takes as given
# ("such" is not among them: "made such a wonderful film? No" denies the praise).
PRESUPPOSING_DETS = {"this", "that", "these", "those"}
SUBORDINATE_DEPS = {"relcl", "acl", "advcl", "ccomp"}


def presupposed(toks: Sequence[Token], root: int) -> dict[int, str]:
    """Token index -> why a denial of the clause leaves it standing: inside a subordinate
    clause of the predicate ("the chief reasons brown sugar is such a sweet film"), or a
    modifier of a demonstrative or possessive noun phrase ("in this fascinating portrait"); "No, I don't" denies the main claim, not what it takes as given."""
    out: dict[int, str] = {}
    for j, tok in enumerate(toks):
        if j != root and tok["dep"] in SUBORDINATE_DEPS:
            for k in _subtree(toks, j):
                out.setdefault(k, f"in the subordinate clause '{toks[j]['t']} ...'")
    for j, tok in enumerate(toks):
        if tok["pos"] not in ("NOUN", "PROPN") or j == root:
            continue
        kids = _children(toks, j)
        given = [k for k in kids if toks[k]["t"].lower() in PRESUPPOSING_DETS or toks[k]["dep"] == "poss"]
        if given:
            for k in kids:
                if toks[k]["dep"] in ("amod", "compound", "nmod", "advmod"):
                    for m in _subtree(toks, k):
                        out.setdefault(m, f"modifies '{toks[given[0]]['t']} ... {tok['t']}'")
    return out


def _subtree(tokens: Sequence[Token], i: int) -> list[int]:
    out, todo = [], [i]
    while todo:
        j = todo.pop()
        out.append(j)
        todo.extend(_children(tokens, j))
    return sorted(out)


def past_tense(tokens: list[Token], root: int, kids: list[int]) -> list[Token] | None:
    """The clause with its main finite verb (or its first auxiliary) in the past tense,
    for the verbs ``PAST`` knows; None when there is none to rewrite, or when another verb
    outside a relative clause would stay in the present ("I thought that it was so
    referential that the final product is a ghost")."""
    candidates = [j for j in kids if tokens[j]["dep"] in ("aux", "auxpass") and j < root] + [root]
    for j in candidates:
        tok = tokens[j]
        new = PAST.get(tok["t"].lower())
        if new and tok["tag"] in FINITE_TAGS:
            if any(t["tag"] in ("VBZ", "VBP") and t["dep"] != "relcl" for k, t in enumerate(tokens) if k != j):
                return None
            out = [dict(t) for t in tokens]
            # "it's" -> "it was": the clitic gets its own space back.
            if tok["t"].startswith("'") and j > 0:
                out[j - 1]["ws"] = " "
            out[j]["t"] = new
            return out
    return None


def corpus_polar_words(
    texts: Sequence[str], labels: Sequence[str | None], *, min_count: int = 3, share: float = 0.75
) -> dict[str, float]:
    """Words a labeled review corpus uses mostly in one label: word -> smoothed share of
    positive uses mapped to [-1, 1], for words seen ``min_count`` times whose smoothed
    share of one label is at least ``share``. The lexicons miss many review words that
    readers take as polar ("erratic", "tasty", "clunker"); the corpus does not."""
    import re
    from collections import Counter

    pos, neg = Counter(), Counter()
    for text, label in zip(texts, labels):
        if label not in ("positive", "negative"):
            continue
        words = set(re.findall(r"[a-z][a-z'-]*", text.lower()))
        (pos if label == "positive" else neg).update(words)
    out = {}
    for word in set(pos) | set(neg):
        n = pos[word] + neg[word]
        p = (pos[word] + 1) / (n + 2)
        if n >= min_count and (p >= share or p <= 1 - share):
            out[word] = round(2 * p - 1, 3)
        elif n >= BALANCED_MIN_COUNT and abs(2 * p - 1) <= BALANCED_SPREAD:
            out[word] = 0.0  # seen often, as much in praise as in pans: attested neutral
    return out


# A modifier (adjective, adverb) in a neutral seed must be attested neutral: seen this
# often in the labeled corpora, with a positive share within 0.5 +- spread / 2.
BALANCED_MIN_COUNT = 6
BALANCED_SPREAD = 0.4


def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def polarity_reason(
    tokens: Sequence[Token] | None,
    text: str,
    label: str,
    *,
    neutral_label: str = "neutral",
    corpus_polarity: Mapping[str, float] | None = None,
) -> str | None:
    """Why a sentence's polarity does not clearly match ``label`` (None: it does).

    Neutral: no word polar in any lexicon (VADER, AFINN, TextBlob) nor in the labeled
    corpus (``corpus_polarity``, ``corpus_polar_words``) and both sentence scores 0.
    Positive/negative: VADER's compound has the label's sign (|c| >= 0.05) and TextBlob's
    polarity does not have the opposite sign."""
    scores = sentence_polarity(text)
    if label == neutral_label:
        for tok in _words(tokens or []):
            polar = polar_sources(tok["t"], tok.get("lemma"))
            if polar:
                name, value = next(iter(polar.items()))
                return f"polar word '{tok['t']}' ({name} {value:+.2f})"
            if corpus_polarity is None:
                continue
            value = corpus_polarity.get(tok["t"].lower())
            if value and tok["pos"] in ("ADJ", "ADV", "NOUN", "VERB", "PROPN"):
                return f"polar word '{tok['t']}' (labeled corpus {value:+.2f})"
            if value is None and tok["pos"] in ("ADJ", "ADV") and tok["t"].lower() not in _stop_words():
                return f"modifier '{tok['t']}' not attested neutral in the labeled corpora"
        for name, value in scores.items():
            if value != 0:
                return f"{name} sentence score {value:+.2f}"
        return None
    sign = {"positive": 1, "negative": -1}.get(label)
    if sign is None:
        return None
    if scores["vader"] * sign < 0.05:
        return f"vader sentence score {scores['vader']:+.2f} does not say {label}"
    if scores["textblob"] * sign < -0.1:
        return f"textblob sentence score {scores['textblob']:+.2f} says the opposite of {label}"
    return None


def fill_template(template: str, seed: str, choices: Mapping[str, str]) -> str:
    """The wrapper text with its ``{name}`` fields from ``choices`` and ``{s}`` (the seed)
    left in place for the expansion to fill later."""
    out = template
    for name, value in choices.items():
        out = out.replace("{" + name + "}", value)
    return out
