"""The ``spacy`` embedder kind: a spaCy pipeline's static word vectors averaged
(``builtin:md``). Its dictionary is one word per row of its vector table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from checkray.engine.costello.config import EmbedderSpec


def spacy_vocabulary(spec: EmbedderSpec) -> list[str]:
    """One alphabetic key per row of the vector table (keys sharing a row are the same
    embedding; ``en_core_web_md`` maps ~500k keys onto 20k rows), lower case preferred."""
    from checkray.actors.spacy_nlp import load_spacy

    nlp = load_spacy(spec.model)
    by_row: dict[int, str] = {}
    for key, row in nlp.vocab.vectors.key2row.items():
        word = nlp.vocab.strings[key]
        if word.isascii() and word.isalpha() and (row not in by_row or word.islower() and not by_row[row].islower()):
            by_row[row] = word
    return sorted(set(by_row.values()))


class SpacyVectorsEmbedder:
    """Averaged static word vectors: the tokenizer alone gives them (no pipeline component runs)."""

    def __init__(self, spec: EmbedderSpec, *, threads: int | None = None, poolings: Sequence[str] = ()):
        from checkray.actors.spacy_nlp import load_spacy

        self.nlp = load_spacy(spec.model)

    @classmethod
    def check(cls, spec: EmbedderSpec) -> None:
        from checkray.actors.spacy_nlp import resolve_pipeline

        resolve_pipeline(spec.model)

    @classmethod
    def identity(cls, spec: EmbedderSpec) -> dict[str, Any]:
        from checkray.actors.embed_cache import embedding_identity, library_versions

        package = spec.model if "/" not in spec.model and not spec.model.startswith("builtin:") else "spacy"
        return embedding_identity(
            spec.model, transformer=False, encoder="costello/spacy", spacy=library_versions("spacy", package)
        )

    @classmethod
    def vocabulary(cls, spec: EmbedderSpec, tokens: str) -> list[str]:
        return spacy_vocabulary(spec)  # a vector table holds words only: ``tokens`` changes nothing

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        docs = self.nlp.pipe(texts, disable=list(self.nlp.pipe_names))
        return np.stack([doc.vector for doc in docs]).astype(np.float32)
