"""Constituency trees as data, a reference CFG with production counts, and S²LCT's
Algorithm 1 (syntax expansion identification).

Trees are PTB bracket strings (``(S (NP (DT The) (NN film)) (VP ...))``) read into
nested tuples; leaf i is token i of the sentence (the parser guarantees it). A production
is a node's label and its children's labels (``NP -> DT NNS``); lexical productions
(``DT -> both``) are not part of the grammar. ``ROOT`` joins the sentences of a
multi-sentence text and is not counted either.

Algorithm 1: for each production ``lhs -> s_rhs`` of a seed's tree and each reference
production ``lhs -> r_rhs`` whose right side contains ``s_rhs`` in order, the extra
symbols of ``r_rhs`` are inserted as masks where they stand; the left-to-right leaves of
the expanded tree form a masked sentence. At most ``k`` are sampled per seed.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

MASK = "{MASK}"
SKIP_LHS = {"ROOT"}
# Penn word tags a mask may take (phrases and punctuation cannot be filled by one word).
FILLABLE_TAGS = {
    "CC",
    "CD",
    "DT",
    "EX",
    "FW",
    "IN",
    "JJ",
    "JJR",
    "JJS",
    "MD",
    "NN",
    "NNS",
    "NNP",
    "NNPS",
    "PDT",
    "PRP",
    "PRP$",
    "RB",
    "RBR",
    "RBS",
    "RP",
    "TO",
    "UH",
    "VB",
    "VBD",
    "VBG",
    "VBN",
    "VBP",
    "VBZ",
    "WDT",
    "WP",
    "WP$",
    "WRB",
}
# The default: content words. A lone inserted function word (CC, WP, WRB, IN, TO ...)
# made ungrammatical sentences in the demo ("consummate and actor barry", "what the
# turntable is now ..."): coordination and wh-movement need more than one word.
CONTENT_TAGS = (
    "CD",
    "JJ",
    "JJR",
    "JJS",
    "NN",
    "NNS",
    "NNP",
    "NNPS",
    "RB",
    "RBR",
    "RBS",
    "VB",
    "VBD",
    "VBG",
    "VBN",
    "VBP",
    "VBZ",
)
GRAMMAR_SCHEMA = pa.schema([pa.field("lhs", pa.string()), pa.field("rhs", pa.string()), pa.field("count", pa.int64())])


@dataclass(frozen=True)
class Production:
    lhs: str
    rhs: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]  # leaf span [start, end) of each right-side child

    def __str__(self) -> str:
        return f"{self.lhs} -> {' '.join(self.rhs)}"


def read_tree(text: str) -> tuple:
    """A PTB bracket string as nested ``(label, children)`` tuples with word leaves as str.

    A 30-line reader instead of ``nltk.Tree.fromstring``: importing nltk takes seconds,
    which every parser/expansion actor would pay at start-up.
    """
    tokens = re.findall(r"\(|\)|[^\s()]+", text)
    if not tokens or tokens[0] != "(":
        raise ValueError(f"not a bracketed tree: {text[:60]!r}")
    pos = 0

    def node() -> tuple:
        nonlocal pos
        pos += 1  # "("
        label = tokens[pos] if tokens[pos] not in "()" else ""
        pos += 1 if label else 0
        children: list = []
        while pos < len(tokens) and tokens[pos] != ")":
            if tokens[pos] == "(":
                children.append(node())
            else:
                children.append(tokens[pos])
                pos += 1
        if pos >= len(tokens):
            raise ValueError(f"unbalanced brackets in tree: {text[:60]!r}")
        pos += 1  # ")"
        return (label, children)

    return node()


def leaves(tree: tuple) -> list[str]:
    return [w for c in tree[1] for w in (leaves(c) if isinstance(c, tuple) else [c])]


def tree_productions(text: str) -> list[Production]:
    """Non-lexical productions of a tree, each with the leaf spans of its children."""
    out: list[Production] = []

    def walk(node, start: int) -> int:
        if not isinstance(node, tuple):
            return start + 1  # a leaf (word)
        spans, pos = [], start
        for child in node[1]:
            end = walk(child, pos)
            spans.append((pos, end))
            pos = end
        phrasal = len(node[1]) > 0 and all(isinstance(c, tuple) for c in node[1])
        if phrasal and node[0] not in SKIP_LHS:
            out.append(Production(node[0], tuple(c[0] for c in node[1]), tuple(spans)))
        return pos

    walk(read_tree(text), 0)
    return out


def count_productions(trees: Iterable[str]) -> Counter:
    counts: Counter = Counter()
    for text in trees:
        counts.update((p.lhs, p.rhs) for p in tree_productions(text))
    return counts


def grammar_table(counts: Mapping[tuple[str, tuple[str, ...]], int]) -> pa.Table:
    rows = sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1]))
    return pa.table(
        {
            "lhs": [k[0] for k, _ in rows],
            "rhs": [" ".join(k[1]) for k, _ in rows],
            "count": pa.array([c for _, c in rows], pa.int64()),
        },
        schema=GRAMMAR_SCHEMA,
    )


def reference_index(grammar: pa.Table, min_count: int = 1) -> dict[str, list[tuple[tuple[str, ...], int]]]:
    """lhs -> [(rhs, count)] from a grammar table, productions seen fewer than ``min_count`` times dropped."""
    index: dict[str, list[tuple[tuple[str, ...], int]]] = {}
    for lhs, rhs, count in zip(*(grammar.column(c).to_pylist() for c in ("lhs", "rhs", "count"))):
        if count >= min_count:
            index.setdefault(lhs, []).append((tuple(rhs.split(" ")), count))
    return index


def align(s_rhs: Sequence[str], r_rhs: Sequence[str]) -> list[int] | None:
    """Positions in ``r_rhs`` of ``s_rhs``'s symbols (leftmost, order kept), or None when
    ``s_rhs`` is not a subsequence of ``r_rhs``."""
    positions, j = [], 0
    for symbol in s_rhs:
        while j < len(r_rhs) and r_rhs[j] != symbol:
            j += 1
        if j == len(r_rhs):
            return None
        positions.append(j)
        j += 1
    return positions


def insertions(prod: Production, r_rhs: Sequence[str]) -> list[tuple[int, str]] | None:
    """(token position, tag) of each extra symbol of ``r_rhs`` inserted into ``prod``."""
    positions = align(prod.rhs, r_rhs)
    if positions is None or len(r_rhs) <= len(prod.rhs):
        return None
    matched = dict(zip(positions, prod.spans))
    out = []
    for j, symbol in enumerate(r_rhs):
        if j in matched:
            continue
        after = [matched[p] for p in positions if p > j]
        before = [matched[p] for p in positions if p < j]
        out.append((after[0][0] if after else before[-1][1], symbol))
    return out


def masked_tokens(tokens: Sequence[Mapping[str, Any]], inserts: Sequence[tuple[int, str]]) -> list[dict]:
    """The sentence as ``[{t, ws, tag}]`` items with ``{mask: TAG, ws}`` items inserted
    before the given token positions (several at one position keep their order)."""
    items = [{"t": t["t"], "ws": t["ws"], "tag": t.get("tag")} for t in tokens]
    for pos, tag in sorted(inserts, key=lambda x: x[0], reverse=True):
        if pos > 0:  # the mask takes the previous token's spacing; that token gets a space
            ws, items[pos - 1] = items[pos - 1]["ws"], {**items[pos - 1], "ws": " "}
        else:
            ws = " "
        items.insert(pos, {"mask": tag, "ws": ws})
    return items


def masked_text(items: Sequence[Mapping[str, Any]]) -> str:
    return "".join((MASK if "mask" in it else it["t"]) + it["ws"] for it in items).strip()


def expansion_candidates(
    tree: str,
    tokens: Sequence[Mapping[str, Any]],
    reference: Mapping[str, list[tuple[tuple[str, ...], int]]],
    fillable: Iterable[str] = FILLABLE_TAGS,
    max_masks: int = 1,
) -> list[dict]:
    """Every masked sentence Algorithm 1 finds for one seed (deduplicated by text and tags)."""
    found: dict[str, dict] = {}
    fillable = set(fillable)
    for prod in tree_productions(tree):
        for r_rhs, count in reference.get(prod.lhs, []):
            inserts = insertions(prod, r_rhs)
            if not inserts or len(inserts) > max_masks or any(tag not in fillable for _, tag in inserts):
                continue
            items = masked_tokens(tokens, inserts)
            text = masked_text(items)
            key = f"{text}\x1f{' '.join(t for _, t in sorted(inserts))}"  # same text, other tag: another mask
            if key not in found:
                found[key] = {
                    "masked": text,
                    "items": items,
                    "tags": [t for _, t in sorted(inserts)],
                    "production": str(prod),
                    "reference": f"{prod.lhs} -> {' '.join(r_rhs)}",
                    "reference_count": count,
                }
    return list(found.values())


def sample_masked(candidates: Sequence[dict], k: int, rng: random.Random) -> list[dict]:
    """``random(M, k)``: an unbiased sample of at most ``k`` masked sentences."""
    if len(candidates) <= k:
        return list(candidates)
    return rng.sample(list(candidates), k)


@dataclass(frozen=True)
class MaskSampling:
    """How Algorithm 1 runs on each seed: at most ``max_masks`` inserted symbols, all of
    them tags in ``fillable``; ``k`` of the masked sentences drawn, seeded by ``seed`` and
    the seed's case id (so a seed gets the same ones in any batch, on any actor)."""

    k: int
    max_masks: int = 1
    fillable: frozenset[str] = frozenset(FILLABLE_TAGS)
    seed: int = 0
    tries: int = 1  # masked sentences drawn per one kept: the expansion keeps the first k with a valid fill

    def masked_sentences(
        self,
        tree: str,
        tokens: Sequence[Mapping[str, Any]],
        reference: Mapping[str, list[tuple[tuple[str, ...], int]]],
        case_id: str,
    ) -> tuple[int, list[dict]]:
        """(how many masked sentences Algorithm 1 found, the ``k`` sampled)."""
        found = expansion_candidates(tree, tokens, reference, self.fillable, self.max_masks) if tokens else []
        return len(found), sample_masked(found, self.k * self.tries, random.Random(f"{self.seed}:{case_id}"))
