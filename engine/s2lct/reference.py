"""What the ``grammar`` stage leaves for the expansion (pure): the reference productions
Algorithm 1 reads, the candidate vocabulary per Penn tag and the unigram/bigram counts the
offline filler's language model scores with; as Arrow tables (the stage's outputs) and as
the one ``ReferenceGrammar`` record the expansion actors are given."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from checkray.engine.s2lct.grammar import reference_index
from checkray.engine.s2lct.mask_fill import build_vocabulary, count_ngrams, count_trigrams


@dataclass(frozen=True)
class ReferenceGrammar:
    productions: Mapping[str, list[tuple[tuple[str, ...], int]]]  # lhs -> [(rhs, count)] (Algorithm 1)
    vocabulary: Mapping[str, list[tuple[str, int]]]  # Penn tag -> [(word, count)], most frequent first
    unigrams: Mapping[str, int]  # lowercased word -> count
    bigrams: Mapping[tuple[str, str], int]  # (word, next word) -> count, for bigrams touching a candidate
    trigrams: Mapping[str, int] = field(default_factory=dict)  # "a b c" -> count, b or c a candidate


TOKEN_RE = re.compile(r"[A-Za-z]+(?=n't)|n't|'[a-z]+|[A-Za-z0-9]+(?:[-'][A-Za-z0-9]+)*|[^\sA-Za-z0-9]")


def regex_tokens(text: str) -> list[dict]:
    """Token dicts (``t`` only) of a text, split about as spaCy splits English ("do n't",
    "it 's"); enough for n-gram counts."""
    return [{"t": m.group(0)} for m in TOKEN_RE.finditer(text)]


def filler_tables(
    token_lists: Iterable[Sequence[Mapping[str, Any]]],
    per_tag: int,
    min_count: int,
    ngram_texts: Iterable[str] = (),
) -> dict[str, pa.Table]:
    """The candidate vocabulary and the n-gram counts of the reference sentences and of
    ``ngram_texts`` (regex-tokenized; only bigrams that touch a candidate word are kept:
    the LM and the fills' n-gram check read nothing else)."""
    token_lists = list(token_lists)
    vocab = build_vocabulary(token_lists, per_tag, min_count)
    words = {w.lower() for entries in vocab.values() for w, _ in entries}
    uni, bi = count_ngrams(token_lists, keep=words)
    tri = count_trigrams(token_lists, words)
    for text in ngram_texts:
        tokens = [regex_tokens(text)]
        extra_uni, extra_bi = count_ngrams(tokens, keep=words)
        uni.update(extra_uni)
        bi.update(extra_bi)
        tri.update(count_trigrams(tokens, words))
    return {
        "vocabulary": pa.Table.from_pylist(
            [{"tag": tag, "word": w, "count": c} for tag, entries in vocab.items() for w, c in entries]
        ),
        "unigrams": pa.table({"word": list(uni), "count": pa.array(list(uni.values()), pa.int64())}),
        "bigrams": pa.table(
            {"a": [a for a, _ in bi], "b": [b for _, b in bi], "count": pa.array(list(bi.values()), pa.int64())}
        ),
        "trigrams": pa.table({"gram": list(tri), "count": pa.array(list(tri.values()), pa.int64())}),
    }


def reference_grammar(
    grammar: pa.Table,
    vocabulary: pa.Table,
    unigrams: pa.Table,
    bigrams: pa.Table,
    min_count: int,
    trigrams: pa.Table | None = None,
) -> ReferenceGrammar:
    """The grammar stage's tables as one record; productions seen fewer than ``min_count``
    times are left out."""
    vocab: dict[str, list[tuple[str, int]]] = {}
    for row in vocabulary.to_pylist():
        vocab.setdefault(row["tag"], []).append((row["word"], row["count"]))
    return ReferenceGrammar(
        productions=reference_index(grammar, min_count),
        vocabulary=vocab,
        unigrams=dict(zip(unigrams.column("word").to_pylist(), unigrams.column("count").to_pylist())),
        bigrams={(a, b): n for a, b, n in zip(*(bigrams.column(c).to_pylist() for c in ("a", "b", "count")))},
        trigrams=dict(zip(trigrams.column("gram").to_pylist(), trigrams.column("count").to_pylist()))
        if trigrams is not None
        else {},
    )
