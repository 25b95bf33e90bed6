"""The curated substitutes of frequent sentiment words (``engine/data/costello_substitutes.yaml``).

WordNet orders senses by general English, so its candidates for a review's "good acting"
include "full acting"; for the words reviews use most, a person chose the candidates
instead, or marked the word as one whose sense cannot be read locally (``never``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from checkray.engine.errors import InputError

SUBSTITUTES_FILE = Path(__file__).resolve().parents[1] / "data" / "costello_substitutes.yaml"
PARTS_OF_SPEECH = ("ADJ", "VERB", "NOUN", "ADV")


@dataclass(frozen=True)
class Curated:
    """One word's entry: its candidates per kind, or why it is never substituted."""

    synonyms: tuple[str, ...] = ()
    antonyms: tuple[str, ...] = ()
    never: str | None = None
    # Phrases in which the word is never substituted ("awkward age": the early teens, not a
    # clumsy age); the word itself may be written in any inflection, the others as listed.
    fixed: tuple[str, ...] = ()

    def candidates(self, kind: str) -> tuple[str, ...]:
        return self.synonyms if kind == "synonym" else self.antonyms


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses a key written twice (PyYAML keeps the last silently)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    keys = [loader.construct_object(k) for k, _ in node.value]
    twice = sorted({str(k) for k in keys if keys.count(k) > 1})
    if twice:
        raise InputError(f"{SUBSTITUTES_FILE.name}: {', '.join(twice)} listed twice (line {node.start_mark.line + 1})")
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def parse_substitutes(text: str, source: str = SUBSTITUTES_FILE.name) -> dict[tuple[str, str], Curated]:
    """{(lemma, coarse POS): entry}; an unknown POS or key, a word listed as its own
    substitute, or an entry with both candidates and ``never`` is an InputError."""
    raw = yaml.load(text, Loader=_UniqueKeyLoader) or {}
    table: dict[tuple[str, str], Curated] = {}
    for pos, words in raw.items():
        if pos not in PARTS_OF_SPEECH:
            raise InputError(f"{source}: unknown part of speech {pos!r} (one of {', '.join(PARTS_OF_SPEECH)})")
        for lemma, entry in (words or {}).items():
            table[(str(lemma), pos)] = _entry(str(lemma), pos, entry or {}, source)
    return table


def _entry(lemma: str, pos: str, entry: dict, source: str) -> Curated:
    unknown = set(entry) - {"synonyms", "antonyms", "never", "fixed"}
    if unknown:
        raise InputError(f"{source}: {pos} {lemma!r} has unknown keys {sorted(unknown)}")
    syn, ant = tuple(entry.get("synonyms") or ()), tuple(entry.get("antonyms") or ())
    if entry.get("never") is not None and (syn or ant):
        raise InputError(f"{source}: {pos} {lemma!r} lists candidates and `never` both")
    if lemma in syn + ant:
        raise InputError(f"{source}: {pos} {lemma!r} lists itself as a candidate")
    if set(syn) & set(ant):
        raise InputError(f"{source}: {pos} {lemma!r} lists {sorted(set(syn) & set(ant))} as synonym and antonym")
    fixed = tuple(str(p).lower() for p in entry.get("fixed") or ())
    if any(len(p.split()) < 2 for p in fixed):
        raise InputError(f"{source}: {pos} {lemma!r} lists a fixed phrase of one word")
    return Curated(syn, ant, entry.get("never"), fixed)


@cache
def curated_substitutes() -> dict[tuple[str, str], Curated]:
    return parse_substitutes(SUBSTITUTES_FILE.read_text(encoding="utf-8"))


def curated(lemma: str, pos: str) -> Curated | None:
    """The entry for a lemma in a coarse part of speech, or None (WordNet decides)."""
    return curated_substitutes().get((lemma.lower(), pos))
