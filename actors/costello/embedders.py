"""Embedding models under COSTELLO test: one Ray Data actor per model, all in parallel.

An embedder is an ``EmbedderSpec`` (``configs/costello/embedders.yaml``) whose ``kind``
names a record of ``checkray.engine.costello.embedder_kinds.EMBEDDER_KINDS``; the class the
record names runs it: ``sentence-transformers`` (``st_embedder.py``: a local directory, a
hub id or ``builtin:minilm`` / ``builtin:mpnet``, its own pooling or rebuilt as ``mean`` /
``cls``) and ``spacy`` (``spacy_embedder.py``: a pipeline's word vectors averaged,
``builtin:md``).

``embed_all`` maps the texts through one ``checkray.actors.pool.map_with_actors`` pool of size 1 per
encoder, the pools of kinds that share the CPUs (transformer encoders) started
concurrently from driver threads: they embed at the same time, each actor holding a share
of the CPUs (or of a GPU when Ray reports one); the others (spaCy's static vectors, a
tokenizer pass) follow with the whole share. Pooling
variants of one encoder (``mean`` and ``cls`` of the same model and max length) share one
actor and one forward pass: a ``Pooling`` layer of both modes gives their vectors side by
side, which ``embed_all`` splits (``encoder_groups``). With a
content cache (``engine/cache.py``) each model embeds only the texts no run embedded
with it before (``contrast_identity``: the model by content, kind, pooling, max length);
a model the cache holds everything of starts no actor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from checkray.engine.cache import ContentCache
from checkray.engine.costello.config import EmbedderSpec
from checkray.engine.costello.embedder_kinds import EMBEDDER_KINDS, POOLINGS, Embedder, embedder_kind


def embedder_class(spec: EmbedderSpec) -> type[Embedder]:
    """The class that runs ``spec``'s kind (``EMBEDDER_KINDS``; imported on first use)."""
    return EMBEDDER_KINDS.get(spec.kind)


def check_spec(spec: EmbedderSpec) -> None:
    """Fail on the driver, in one line, before any actor starts."""
    embedder_class(spec).check(spec)


def vocabulary(spec: EmbedderSpec, tokens: str) -> list[str]:
    """The model's own threshold dictionary (``costello.dictionary: tokenizer``)."""
    return embedder_class(spec).vocabulary(spec, tokens)


def encoder_groups(specs: Sequence[EmbedderSpec]) -> list[list[EmbedderSpec]]:
    """The specs by the encoder pass that serves them: pooling variants (``POOLINGS``) of
    one model and max length of a kind with ``pooling_variants`` together, in ``POOLINGS``
    order; any other spec alone. The groups keep the order of their first spec."""
    groups: list[list[EmbedderSpec]] = []
    open_groups: dict[tuple[str, int], list[EmbedderSpec]] = {}
    for spec in specs:
        key = (spec.model, spec.max_length)
        if not embedder_kind(spec.kind).pooling_variants or spec.pooling not in POOLINGS:
            groups.append([spec])
            continue
        group = open_groups.get(key)
        if group is None or any(s.pooling == spec.pooling for s in group):
            group = open_groups[key] = []
            groups.append(group)
        group.append(spec)
    return [sorted(g, key=lambda s: POOLINGS.index(s.pooling)) if len(g) > 1 else g for g in groups]


class ContrastEmbedder:
    """Callable class for ``map_with_actors``: a ``text`` batch in, its ``embedding`` out.
    ``poolings``: the pooling variants of an ``encoder_groups`` group, whose vectors come
    side by side in one ``embedding``."""

    def __init__(self, spec: EmbedderSpec, threads: int | None = None, poolings: Sequence[str] = ()):
        self.encoder = embedder_class(spec)(spec, threads=threads, poolings=poolings)

    def __call__(self, batch: pa.Table) -> pa.Table:
        from checkray.engine.arrays import embeddings_column

        vectors = self.encoder.encode(batch.column("text").to_pylist())
        return pa.table({"embedding": embeddings_column(vectors)})


def contrast_identity(spec: EmbedderSpec) -> dict[str, Any]:
    """The content-cache identity of an embedder as ``ContrastEmbedder`` runs it: the
    model by content (``checkray.actors.assets.pin_model``: a local directory such as a zoo
    model by ``path_digest``, a ``builtin:`` asset by its pinned package), its kind and
    what changes its vectors (pooling, max length; not its name, which is a label, nor its
    batch size), and the versions of the libraries that run it."""
    return embedder_class(spec).identity(spec)


def embed_all(
    texts: Sequence[str],
    specs: Sequence[EmbedderSpec],
    backend: str = "auto",
    batch_size: int = 128,
    *,
    parallel: bool = True,
    cache: ContentCache | None = None,
    stats: dict[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """Embed ``texts`` with every model; returns name -> (len(texts), dim) float32.

    Parallel: one actor per encoder (``encoder_groups``) of a kind that ``shares_cpus`` at
    once, the CPUs left after Ray Data's reserve split between them (torch threads set to
    match); the other kinds (spaCy vectors) after them. Sequential (``parallel=False``, for
    the bench): one encoder after another, each actor with the whole share. ``cache``: each
    model embeds only the texts the cache lacks for it (each distinct text once) and stores
    them; the CPUs are shared among the models that have something to embed.
    ``stats``: filled with name -> texts embedded.
    """
    from checkray.actors.embed_cache import driver_plan, fill_embeddings, lookup_embeddings, plan_embedders
    from checkray.actors.pool import map_with_actors
    from checkray.engine.arrays import column_to_numpy
    from checkray.engine.runtime import alive_node_count, cluster_resources, plan_actor_pool

    for spec in specs:
        check_spec(spec)
    identities = {spec.name: contrast_identity(spec) for spec in specs}
    found = {spec.name: lookup_embeddings(cache, identities[spec.name], texts) for spec in specs}
    todo = encoder_groups([spec for spec in specs if found[spec.name].todo])
    if stats is not None:
        stats.update({name: len(f.todo) for name, f in found.items()})
    resources = cluster_resources() if todo else {}

    # Few texts on a one-node CPU Ray: each encoder in turn in this process, every CPU its own.
    here = None
    if todo:
        n_todo = len({t for group in todo for spec in group for t in found[spec.name].todo_texts})
        cpu_plan = plan_embedders([resources.get("CPU", 1.0)], resources.get("GPU", 0.0), backend)
        here = driver_plan(cpu_plan, n_todo, alive_node_count(), backend)

    def run(group: list[EmbedderSpec], share: int) -> dict[str, np.ndarray]:
        # The texts any member lacks, each once; every member takes its own rows back.
        missing = list(dict.fromkeys(t for spec in group for t in found[spec.name].todo_texts))
        # Shortest texts first, so each batch pads little; ``order`` puts the rows back.
        order = np.array(sorted(range(len(missing)), key=lambda i: len(missing[i])), dtype=np.int64)
        table = pa.table({"text": pa.array([missing[i] for i in order], pa.string())})
        # Each encoder's pool is ONE actor holding 1/share of the CPUs (threads to match); on
        # GPUs the encoders share them (a fraction each) instead of queueing for a whole one.
        plan = here or plan_actor_pool(resources, backend, pool_size=share, gpu_fraction=1.0 / share)
        poolings = [spec.pooling for spec in group] if len(group) > 1 else []
        out = map_with_actors(
            table,
            ContrastEmbedder,
            dict(spec=group[0], threads=plan.threads, poolings=poolings),
            dataclasses.replace(plan, pool_size=1),
            batch_size=batch_size,
        )
        vectors = column_to_numpy(out.column("embedding"))
        unsorted = np.empty_like(vectors)
        unsorted[order] = vectors
        row = {t: i for i, t in enumerate(missing)}
        parts = np.split(unsorted, len(group), axis=1)  # a multi-mode Pooling: side by side
        return {spec.name: part[[row[t] for t in found[spec.name].todo_texts]] for spec, part in zip(group, parts)}

    # Only kinds that share the CPUs run side by side (transformer passes): static word
    # vectors cost a tokenizer pass, and an actor of theirs holding half the CPUs would leave
    # that half idle while a transformer runs on the other (measured: bench_costello's fan-out).
    encoders = [g for g in todo if embedder_kind(g[0].kind).shares_cpus] if parallel and here is None else []
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
