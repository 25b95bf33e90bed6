"""Embedding models under COSTELLO test: one Ray Data actor per model, all in parallel.

An embedder is an ``EmbedderSpec`` (``configs/costello/embedders.yaml``):

* ``kind: sentence-transformers``: a local directory, a hub id or ``builtin:minilm`` /
  ``builtin:mpnet``. ``pooling: model`` keeps the model's own pooling; ``mean`` or
  ``cls`` rebuilds it as a transformers module + a ``Pooling`` layer, which is how the
  pooling variants of one encoder are tested (the paper wraps encoders to give [CLS]).
  Any plain transformers encoder directory (the zoo's fine-tuned ``minilm_ft``, whose
  classification head is dropped) loads the same way with ``mean`` or ``cls``.
* ``kind: spacy``: a spaCy pipeline's word vectors averaged (``builtin:md``).

``embed_all`` maps the texts through one ``actors.pool.map_with_actors`` pool of size 1 per
model, the pools started concurrently from driver threads: the models embed at the same
time, each actor holding a share of the CPUs (or of a GPU when Ray reports one).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from engine.config import Section
from engine.errors import InputError


class EmbedderSpec(Section):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["sentence-transformers", "spacy"] = "sentence-transformers"
    model: str  # builtin:minilm, a local path, a hub id, zoo:<name>, or a spaCy pipeline
    pooling: Literal["model", "mean", "cls"] = "model"
    max_length: int = Field(default=128, ge=8)
    encode_batch_size: int = Field(default=64, ge=1)


def check_spec(spec: EmbedderSpec) -> None:
    """Fail on the driver, in one line, before any actor starts."""
    if spec.kind == "spacy":
        from actors.spacy_nlp import resolve_pipeline

        resolve_pipeline(spec.model)
    else:
        from actors.embedder import resolve_model

        try:
            resolve_model(spec.model)
        except InputError as exc:
            raise InputError(f"embedder '{spec.name}': {exc}") from None


def load_encoder(spec: EmbedderSpec, device: str | None = None, threads: int | None = None):
    """A SentenceTransformer for a sentence-transformers spec (pooling rebuilt if asked)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from actors.embedder import load_sentence_transformer, resolve_model, torch_device

    if threads:
        torch.set_num_threads(threads)
    if spec.pooling == "model":
        model = load_sentence_transformer(spec.model, device=device, threads=threads)
        model.max_seq_length = min(model.max_seq_length or spec.max_length, spec.max_length)
        return model
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers < 5.4
        from sentence_transformers.models import Pooling, Transformer
    path = resolve_model(spec.model)
    try:
        encoder = Transformer(path, max_seq_length=spec.max_length)
    except (OSError, ValueError) as exc:
        raise InputError(f"embedder '{spec.name}': cannot load {spec.model}: {str(exc).splitlines()[0]}") from None
    dim = (
        encoder.get_embedding_dimension()
        if hasattr(encoder, "get_embedding_dimension")
        else encoder.get_word_embedding_dimension()
    )
    return SentenceTransformer(
        modules=[encoder, Pooling(dim, pooling_mode=spec.pooling)], device=device or torch_device()
    )


class ContrastEmbedder:
    """Callable class for ``map_with_actors``: a ``text`` batch in, its ``embedding`` out."""

    def __init__(self, spec: dict, threads: int | None = None):
        self.spec = EmbedderSpec.model_validate(spec)
        if self.spec.kind == "spacy":
            from actors.spacy_nlp import load_spacy

            self.nlp = load_spacy(self.spec.model)
            self.model = None
        else:
            self.model = load_encoder(self.spec, threads=threads)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if self.model is None:  # static vectors: the tokenizer alone gives them
            docs = self.nlp.pipe(texts, disable=list(self.nlp.pipe_names))
            return np.stack([doc.vector for doc in docs]).astype(np.float32)
        return self.model.encode(
            list(texts),
            batch_size=self.spec.encode_batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        ).astype(np.float32)

    def __call__(self, batch: pa.Table) -> pa.Table:
        from engine.arrays import embeddings_column

        vectors = self.encode(batch.column("text").to_pylist())
        return pa.table({"embedding": embeddings_column(vectors)})


def embed_all(
    texts: Sequence[str],
    specs: Sequence[EmbedderSpec],
    backend: str = "auto",
    batch_size: int = 128,
    parallel: bool = True,
) -> dict[str, np.ndarray]:
    """Embed ``texts`` with every model; returns name -> (len(texts), dim) float32.

    Parallel: one actor per model at once, the CPUs left after Ray Data's reserve split
    between them (torch threads set to match). Sequential (``parallel=False``, for the
    bench): one model after another, each actor with the whole share.
    """
    from actors.pool import map_with_actors
    from engine.arrays import column_to_numpy
    from engine.runtime import cluster_resources, plan_actor_pool

    for spec in specs:
        check_spec(spec)
    # Shortest texts first, so each batch pads little; ``order`` puts the rows back.
    order = np.array(sorted(range(len(texts)), key=lambda i: len(texts[i])), dtype=np.int64)
    table = pa.table({"text": pa.array([texts[i] for i in order], pa.string())})
    resources = cluster_resources()

    def run(spec: EmbedderSpec, share: int) -> np.ndarray:
        # Each model's pool is ONE actor holding 1/share of the CPUs (threads to match); on
        # GPUs the models share them (a fraction each) instead of queueing for a whole one.
        plan = plan_actor_pool(resources, backend, pool_size=share, gpu_fraction=1.0 / share)
        out = map_with_actors(
            table,
            ContrastEmbedder,
            dict(spec=spec.model_dump(), threads=plan.threads),
            dataclasses.replace(plan, pool_size=1),
            batch_size=batch_size,
        )
        vectors = column_to_numpy(out.column("embedding"))
        unsorted = np.empty_like(vectors)
        unsorted[order] = vectors
        return unsorted

    if not parallel or len(specs) == 1:
        return {spec.name: run(spec, 1) for spec in specs}
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        futures = {spec.name: pool.submit(run, spec, len(specs)) for spec in specs}
        return {name: f.result() for name, f in futures.items()}
