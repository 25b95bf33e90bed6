"""Embedding models under COSTELLO test: one Ray Data actor per model, all in parallel.

An embedder is an ``EmbedderSpec`` (``configs/costello/embedders.yaml``):

* ``kind: sentence-transformers``: a local directory, a hub id or ``builtin:minilm`` /
  ``builtin:mpnet``. ``pooling: model`` keeps the model's own pooling; ``mean`` or
  ``cls`` rebuilds it as a transformers module + a ``Pooling`` layer, which is how the
  pooling variants of one encoder are tested (the paper wraps encoders to give [CLS]).
  Any plain transformers encoder directory (the zoo's fine-tuned ``minilm_ft``, whose
  classification head is dropped) loads the same way with ``mean`` or ``cls``.
* ``kind: spacy``: a spaCy pipeline's word vectors averaged (``builtin:md``).

``embed_all`` maps the texts through one ``checkray.actors.pool.map_with_actors`` pool of size 1 per
encoder, the transformer encoders' pools started concurrently from driver threads: they
embed at the same time, each actor holding a share of the CPUs (or of a GPU when Ray
reports one); spaCy's static vectors, a tokenizer pass, follow with the whole share. Pooling
variants of one encoder (``mean`` and ``cls`` of the same model and max length) share one
actor and one forward pass: a ``Pooling`` layer of both modes gives their vectors side by
side, which ``embed_all`` splits (``encoder_groups``). With a
content cache (``engine/cache.py``) each model embeds only the texts no run embedded
with it before (``contrast_identity``: the model by content, kind, pooling, max length);
a model the cache holds everything of starts no actor.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from checkray.engine.cache import ContentCache
from checkray.engine.config import Section
from checkray.engine.errors import InputError


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
        from checkray.actors.spacy_nlp import resolve_pipeline

        resolve_pipeline(spec.model)
    else:
        from checkray.actors.embedder import resolve_model

        try:
            resolve_model(spec.model)
        except InputError as exc:
            raise InputError(f"embedder '{spec.name}': {exc}") from None


# Pooling modes one forward pass can serve together, in the order a multi-mode ``Pooling``
# concatenates them (every sentence-transformers version puts cls before mean).
POOLINGS = ("cls", "mean")


def encoder_groups(specs: Sequence[EmbedderSpec]) -> list[list[EmbedderSpec]]:
    """The specs by the encoder pass that serves them: pooling variants (``POOLINGS``) of
    one sentence-transformers model and max length together, in ``POOLINGS`` order; any
    other spec alone. The groups keep the order of their first spec."""
    groups: list[list[EmbedderSpec]] = []
    open_groups: dict[tuple[str, int], list[EmbedderSpec]] = {}
    for spec in specs:
        key = (spec.model, spec.max_length)
        if spec.kind != "sentence-transformers" or spec.pooling not in POOLINGS:
            groups.append([spec])
            continue
        group = open_groups.get(key)
        if group is None or any(s.pooling == spec.pooling for s in group):
            group = open_groups[key] = []
            groups.append(group)
        group.append(spec)
    return [sorted(g, key=lambda s: POOLINGS.index(s.pooling)) if len(g) > 1 else g for g in groups]


def load_encoder(
    spec: EmbedderSpec, device: str | None = None, threads: int | None = None, poolings: Sequence[str] = ()
):
    """A SentenceTransformer for a sentence-transformers spec (pooling rebuilt if asked).
    ``poolings``: several of ``POOLINGS`` at once, in that order: the vectors of each side
    by side, from one forward pass."""
    import torch
    from sentence_transformers import SentenceTransformer

    from checkray.actors.embedder import load_sentence_transformer, resolve_model, torch_device

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
    modes = tuple(poolings) or (spec.pooling,)
    if len(modes) == 1:
        pooling = Pooling(dim, pooling_mode=modes[0])
    elif "pooling_mode_cls_token" in inspect.signature(Pooling).parameters:
        # sentence-transformers < 5.4: one flag per mode, concatenated cls before mean
        pooling = Pooling(dim, pooling_mode_cls_token="cls" in modes, pooling_mode_mean_tokens="mean" in modes)
    else:
        pooling = Pooling(dim, pooling_mode=modes)  # concatenated in the order given
    return SentenceTransformer(modules=[encoder, pooling], device=device or torch_device())


class ContrastEmbedder:
    """Callable class for ``map_with_actors``: a ``text`` batch in, its ``embedding`` out.
    ``poolings``: the pooling variants of an ``encoder_groups`` group, whose vectors come
    side by side in one ``embedding``."""

    def __init__(self, spec: dict, threads: int | None = None, poolings: Sequence[str] = ()):
        self.spec = EmbedderSpec.model_validate(spec)
        if self.spec.kind == "spacy":
            from checkray.actors.spacy_nlp import load_spacy

            self.nlp = load_spacy(self.spec.model)
            self.model = None
        else:
            self.model = load_encoder(self.spec, threads=threads, poolings=poolings)

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
        from checkray.engine.arrays import embeddings_column

        vectors = self.encode(batch.column("text").to_pylist())
        return pa.table({"embedding": embeddings_column(vectors)})


def contrast_identity(spec: EmbedderSpec) -> dict[str, Any]:
    """The content-cache identity of an embedder as ``ContrastEmbedder`` runs it: the
    model by content (``checkray.actors.embed_cache.pin_model``: a local directory such as a zoo
    model by ``path_digest``, a ``builtin:`` asset by its pinned package), its kind,
    pooling and max length (what changes its vectors; not its name, which is a label,
    nor its batch size), and the versions of the libraries that run it."""
    from checkray.actors.embed_cache import embedding_identity, library_versions

    if spec.kind == "spacy":  # the pipeline's static word vectors, averaged
        package = spec.model if "/" not in spec.model and not spec.model.startswith("builtin:") else "spacy"
        return embedding_identity(spec.model, encoder="costello/spacy", spacy=library_versions("spacy", package))
    return embedding_identity(
        spec.model, encoder="costello/sentence-transformers", pooling=spec.pooling, max_length=spec.max_length
    )


def embed_all(
    texts: Sequence[str],
    specs: Sequence[EmbedderSpec],
    backend: str = "auto",
    batch_size: int = 128,
    parallel: bool = True,
    cache: ContentCache | None = None,
    stats: dict[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """Embed ``texts`` with every model; returns name -> (len(texts), dim) float32.

    Parallel: one actor per transformer encoder (``encoder_groups``) at once, the CPUs left
    after Ray Data's reserve split between them (torch threads set to match); spaCy vectors
    after them. Sequential (``parallel=False``, for the bench): one encoder after another,
    each actor with the whole share. ``cache``: each
    model embeds only the texts the cache lacks for it (each distinct text once) and stores
    them; the CPUs are shared among the models that have something to embed.
    ``stats``: filled with name -> texts embedded.
    """
    from checkray.actors.embed_cache import fill_embeddings, lookup_embeddings
    from checkray.actors.pool import map_with_actors
    from checkray.engine.arrays import column_to_numpy
    from checkray.engine.runtime import cluster_resources, plan_actor_pool

    for spec in specs:
        check_spec(spec)
    identities = {spec.name: contrast_identity(spec) for spec in specs}
    found = {spec.name: lookup_embeddings(cache, identities[spec.name], texts) for spec in specs}
    todo = encoder_groups([spec for spec in specs if found[spec.name].todo])
    if stats is not None:
        stats.update({name: len(f.todo) for name, f in found.items()})
    resources = cluster_resources() if todo else {}

    def run(group: list[EmbedderSpec], share: int) -> dict[str, np.ndarray]:
        # The texts any member lacks, each once; every member takes its own rows back.
        missing = list(dict.fromkeys(t for spec in group for t in found[spec.name].todo_texts))
        # Shortest texts first, so each batch pads little; ``order`` puts the rows back.
        order = np.array(sorted(range(len(missing)), key=lambda i: len(missing[i])), dtype=np.int64)
        table = pa.table({"text": pa.array([missing[i] for i in order], pa.string())})
        # Each encoder's pool is ONE actor holding 1/share of the CPUs (threads to match); on
        # GPUs the encoders share them (a fraction each) instead of queueing for a whole one.
        plan = plan_actor_pool(resources, backend, pool_size=share, gpu_fraction=1.0 / share)
        poolings = [spec.pooling for spec in group] if len(group) > 1 else []
        out = map_with_actors(
            table,
            ContrastEmbedder,
            dict(spec=group[0].model_dump(), threads=plan.threads, poolings=poolings),
            dataclasses.replace(plan, pool_size=1),
            batch_size=batch_size,
        )
        vectors = column_to_numpy(out.column("embedding"))
        unsorted = np.empty_like(vectors)
        unsorted[order] = vectors
        row = {t: i for i, t in enumerate(missing)}
        parts = np.split(unsorted, len(group), axis=1)  # a multi-mode Pooling: side by side
        return {spec.name: part[[row[t] for t in found[spec.name].todo_texts]] for spec, part in zip(group, parts)}

    # Only transformer passes run side by side, sharing the CPUs: static word vectors cost a
    # tokenizer pass, and an actor of theirs holding half the CPUs would leave that half idle
    # while a transformer runs on the other (measured: bench_costello's fan-out).
    encoders = [g for g in todo if g[0].kind != "spacy"] if parallel else []
    computed: dict[str, np.ndarray] = {}
    if len(encoders) > 1:
        with ThreadPoolExecutor(max_workers=len(encoders)) as pool:
            for future in [pool.submit(run, group, len(encoders)) for group in encoders]:
                computed.update(future.result())
    for group in todo:
        if group[0].name not in computed:
            computed.update(run(group, 1))
    return {
        spec.name: fill_embeddings(cache, identities[spec.name], found[spec.name], computed.get(spec.name))
        for spec in specs
    }
