"""The kinds of embedding model COSTELLO tests, as registry records.

An embedder's ``kind`` (``configs/costello/embedders.yaml``) names one ``EmbedderKind``.
Its ``ref`` is the class in ``actors/costello/`` that runs such a model (``Embedder``
below: check a spec on the driver, load it, embed texts, give its content-cache identity
and its vocabulary), imported only when a model of the kind is used; its traits answer
what the jobs ask without importing anything: whether its encoders may share the CPUs
side by side with others, whether the repair can fine-tune it, whether pooling variants
of one model share a forward pass.

Adding a kind is its class's module in ``actors/costello/`` and one ``EmbedderKind(...)``
line below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from checkray.engine.lazy import LazyRegistry

# Pooling modes one forward pass can serve together, in the order a multi-mode
# sentence-transformers ``Pooling`` concatenates them (every version puts cls before mean).
POOLINGS = ("cls", "mean")


class Embedder(Protocol):
    """What an embedder kind's class (its record's ``ref``) implements. The constructor
    loads the model; ``poolings``: several of ``POOLINGS`` served by one pass, their
    vectors side by side (kinds with ``pooling_variants`` only)."""

    def __init__(self, spec: Any, *, threads: int | None = None, poolings: Sequence[str] = ()) -> None: ...

    @classmethod
    def check(cls, spec: Any) -> None:
        """Fail on the driver, in one line, before any actor starts."""

    @classmethod
    def identity(cls, spec: Any) -> dict[str, Any]:
        """The content-cache identity of ``spec``'s vectors (what changes them)."""

    @classmethod
    def vocabulary(cls, spec: Any, tokens: str) -> list[str]:
        """The model's own dictionary (``costello.dictionary: tokenizer``); ``tokens``:
        ``all`` entries or whole alphabetic ``words``."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32."""


@dataclass(frozen=True)
class EmbedderKind:
    """One kind of embedding model; ``ref`` is ``"module:Class"`` implementing ``Embedder``."""

    name: str
    ref: str
    # Its encoders run side by side with the others, each on a share of the CPUs. A cheap
    # pass (static word vectors: a tokenizer run) would leave its share idle while a
    # transformer runs on the rest; it runs after them with every thread instead.
    shares_cpus: bool = False
    # ``checkray repair`` can fine-tune it (a sentence-transformers model).
    trainable: bool = False
    # Its ``POOLINGS`` variants of one model and max length share one forward pass.
    pooling_variants: bool = False


def _check_embedder(name: str, cls: Any) -> None:
    missing = [m for m in ("check", "identity", "vocabulary", "encode") if not callable(getattr(cls, m, None))]
    if missing:
        raise TypeError(f"embedder kind '{name}': {cls!r} lacks {', '.join(missing)}")


EMBEDDER_KINDS: LazyRegistry[type[Embedder]] = LazyRegistry("embedder kind", _check_embedder)
for _kind in [
    EmbedderKind(
        "sentence-transformers",
        "checkray.actors.costello.st_embedder:SentenceTransformerEmbedder",
        shares_cpus=True,
        trainable=True,
        pooling_variants=True,
    ),
    EmbedderKind("spacy", "checkray.actors.costello.spacy_embedder:SpacyVectorsEmbedder"),
]:
    EMBEDDER_KINDS.register(_kind)


def embedder_kind(name: str) -> EmbedderKind:
    """The record of kind ``name`` (nothing imported); unknown: a one-line error."""
    return EMBEDDER_KINDS.record(name)
