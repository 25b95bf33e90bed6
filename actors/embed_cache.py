"""Embedding through the content cache (``engine/cache.py``): only texts that no run
embedded before with the same model reach an encoder.

``embed_texts(texts, model, cache=...)`` returns the (n, d) float32 embeddings;
``embed_stream(chunks, model, ...)`` does the same chunk by chunk, so a corpus of any size
is embedded in bounded memory (the topics job). A model is an ``EmbedModel``: what it is
by content (``identity``, the cache key) and how to build the callable that encodes a
``text`` batch (``actor_cls(**kwargs)``, the same classes ``checkray.actors.pool.map_with_actors``
runs: ``EmbeddingActor``, COSTELLO's ``ContrastEmbedder`` ...).

The misses go to an ``EmbedPool``: plain Ray actors holding the model, started once per
call (one model load per actor, several actors per node on CPU: processes scale better
than torch threads on few cores) and fed blocks of texts sorted by length (longest
first), two in hand per actor so an encoder never waits for the driver. The pool starts only when
something can be missing (at once when the cache holds nothing for the model, so its
actors load the model while the driver reads the first chunk; else at the first miss).

Small work on a local one-node CPU Ray (at most ``runtime.embed_in_driver_below`` texts,
``cluster_plan(texts=...)``) encodes in this process instead, with every CPU of the node:
starting two encoder processes (each importing torch and loading the model) costs about as
long on 2 cores as encoding the demo's 8,530 sentences (docs/performance.md).
"""

from __future__ import annotations

import importlib.metadata
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from checkray.actors.assets import pin_model
from checkray.engine.cache import ContentCache, text_digests
from checkray.engine.errors import user_error
from checkray.engine.memory import release_memory
from checkray.engine.runtime import EMBED_IN_DRIVER_ENV, ActorPlan, driver_node_cpus, plan_actor_pool
from checkray.engine.stages import reference_digest

CHUNK_ROWS = 16_384  # rows looked up, embedded and written at a time by embed_texts
BLOCK_ROWS = 256  # texts per actor call
QUEUED_PER_ACTOR = 2  # blocks queued on each actor: one running, one waiting
MAX_ACTORS_PER_NODE = 4  # CPU: model copies per node (memory) ...
MAX_RESTARTS = 2  # ... bounded restarts and retries, as actors.pool
MAX_TASK_RETRIES = 2
IN_DRIVER_ENV = EMBED_IN_DRIVER_ENV  # runtime.embed_in_driver_below (engine/runtime.py)
IN_DRIVER_BELOW = 20_000


# ---------------------------------------------------------------------------- identity
def pin_builtins(value: Any) -> Any:
    """``reference_digest(value)`` with every ``builtin:`` string pinned (``pin_model``):
    a model spec's identity for the predictions cache."""

    def pin(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: pin(x) for k, x in v.items()}
        if isinstance(v, list):
            return [pin(x) for x in v]
        return pin_model(v) if isinstance(v, str) and v.startswith("builtin:") else v

    return pin(reference_digest(value))


def library_versions(*packages: str) -> dict[str, str]:
    out = {}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "none"
    return out


@dataclass(frozen=True)
class EmbedModel:
    """An embedding model: its identity (the cache key: everything that changes its
    vectors) and the callable class that encodes a batch (``text`` column in,
    ``embedding`` column out), built in each actor as ``actor_cls(**kwargs)``."""

    identity: dict[str, Any]
    actor_cls: type
    kwargs: dict[str, Any] = field(default_factory=dict)


def embedding_identity(model: str, *, transformer: bool = True, **settings: Any) -> dict[str, Any]:
    """The cache identity of an encoder: its model by content (``pin_model``), every
    setting that changes its vectors (normalisation, pooling, max length ...), and the
    versions of the libraries that run it (pinned by the lock file; recorded so a cache
    shared across installs keeps them apart), and the runtime that runs it
    (``checkray.engine.inference``: PyTorch, ONNX fp32 or int8) when it is a transformer."""
    from checkray.engine.inference import inference_identity

    return {
        "model": pin_model(model),
        **settings,
        "libraries": library_versions("sentence-transformers", "transformers", "torch"),
        **({"inference": inference_identity()} if transformer else {}),
    }


def sentence_model(
    model: str, normalize: bool = True, encode_batch_size: int = 64, threads: int | None = None
) -> EmbedModel:
    """A sentence-transformers model (``builtin:minilm``, a local path, a hub id) as the
    topics and zoo jobs and the benchmark's shared encoders use it."""
    from checkray.actors.embedder import EmbeddingActor

    identity = embedding_identity(model, encoder="sentence-transformers", normalize=bool(normalize))
    kwargs = dict(model=model, encode_batch_size=encode_batch_size, normalize=normalize, threads=threads, keep=())
    return EmbedModel(identity, EmbeddingActor, kwargs)


# ---------------------------------------------------------------------------- lookups
@dataclass
class Lookup:
    """What the cache holds of ``texts`` (``lookup_embeddings``): the vectors of the hit
    rows, and one row per distinct missing text (``todo``) to encode and ``fill`` in."""

    texts: Sequence[str]
    digests: np.ndarray | None
    hit: np.ndarray  # (n,) bool
    values: np.ndarray | None  # (hits, d): the vectors of the hit rows, in row order
    todo: list[int]  # the first row of each distinct missing text

    @property
    def todo_texts(self) -> list[str]:
        return [self.texts[i] for i in self.todo]


def lookup_embeddings(cache: ContentCache | None, identity: Mapping[str, Any], texts: Sequence[str]) -> Lookup:
    """Look ``texts`` up in the embedding space of ``identity`` (no cache: all missing)."""
    n = len(texts)
    if cache is None or not n:
        seen: dict[str, int] = {}
        todo = [seen.setdefault(t, i) for i, t in enumerate(texts) if t not in seen]
        return Lookup(texts, None, np.zeros(n, bool), None, todo)
    digests = text_digests(texts)
    found = cache.space("embeddings", identity).find(digests)
    which = np.flatnonzero(found.mask)
    ok, values = found.read(which)
    hit = np.zeros(n, bool)
    hit[which[ok]] = True
    missing = np.flatnonzero(~hit)
    _, first = np.unique(digests[missing].view(f"V{digests.shape[1]}").ravel(), return_index=True)
    return Lookup(texts, digests, hit, values[ok], sorted(missing[first].tolist()))


def fill_embeddings(
    cache: ContentCache | None, identity: Mapping[str, Any], found: Lookup, computed: np.ndarray | None
) -> np.ndarray:
    """The (n, d) embeddings of ``found.texts``: its hits and ``computed`` (the vectors of
    ``found.todo_texts``, in that order), which are stored in the cache (one shard)."""
    n = len(found.texts)
    if found.todo and (computed is None or len(computed) != len(found.todo)):
        raise ValueError(f"{len(found.todo)} texts to embed, {0 if computed is None else len(computed)} vectors")
    parts = [m for m in (found.values, computed) if m is not None and len(m)]
    width = parts[0].shape[1] if parts else 0
    out = np.zeros((n, width), dtype=np.float32)
    if found.values is not None and len(found.values):
        out[found.hit] = found.values
    if found.todo:
        computed = np.asarray(computed, dtype=np.float32)
        position = {found.texts[i]: k for k, i in enumerate(found.todo)}
        rows = np.flatnonzero(~found.hit)
        out[rows] = computed[[position[found.texts[i]] for i in rows]]
        if cache is not None and found.digests is not None:
            cache.space("embeddings", identity).put(found.digests[found.todo], computed)
    return out


# ---------------------------------------------------------------------------- the pool
def plan_embedders(
    node_cpus: Sequence[float], gpus: float = 0.0, backend: str = "auto", pool_size: int | None = None
) -> ActorPlan:
    """How many encoder actors, with which resources (pure: tested with plain numbers).

    GPU (when Ray reports one and the backend allows it): ``checkray.engine.runtime``'s GPU plan, an
    actor per GPU. CPU: up to ``MAX_ACTORS_PER_NODE`` actors per node, one thread each on
    a 2-core node; no CPU is held back, since no Ray Data task runs beside them. Every
    actor asks for the smallest node's share, so the pool always fits (never a hang)."""
    cpus = float(sum(node_cpus))
    if gpus > 0 and backend != "cpu" or backend == "gpu":
        return plan_actor_pool({"CPU": cpus, "GPU": gpus}, backend, pool_size)
    nodes = [c for c in node_cpus if c >= 1] or [max(cpus, 1.0)]
    per_node = [max(1, min(int(c), MAX_ACTORS_PER_NODE)) for c in nodes]
    share = min(c / k for c, k in zip(nodes, per_node))
    size = pool_size or sum(per_node)
    return ActorPlan("cpu", size, num_cpus=round(share, 3), num_gpus=0.0, threads=max(1, int(share)))


def cluster_plan(backend: str = "auto", pool_size: int | None = None, texts: int | None = None) -> ActorPlan:
    """The encoder pool for what Ray reports; with ``texts`` (how many will be embedded),
    small CPU work on a one-node cluster runs in this process (``embeds_in_driver``)."""
    import ray

    nodes = [n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]
    gpus = float(ray.cluster_resources().get("GPU", 0.0))
    plan = plan_embedders([c for c in nodes if c > 0], gpus, backend, pool_size)
    if texts is None or pool_size is not None:
        return plan
    return driver_plan(plan, texts, len(nodes), backend) or plan


def driver_plan(
    plan: ActorPlan, texts: int, nodes: int, backend: str = "auto", below: int | None = None
) -> ActorPlan | None:
    """The plan that encodes ``texts`` texts (or maps that many rows) in this process with
    every CPU of its node, when ``embeds_in_driver`` allows it instead of ``plan``'s actors;
    else None. ``below``: the most rows this process takes (default ``in_driver_below()``)."""
    if backend == "gpu":
        return None
    driver_cpus = driver_node_cpus()
    if not embeds_in_driver(plan, texts, nodes, driver_cpus, in_driver_below() if below is None else below):
        return None
    return ActorPlan("cpu", 1, num_cpus=driver_cpus, num_gpus=0.0, threads=int(driver_cpus), in_driver=True)


def small_work_plan(plan: ActorPlan, rows: int, below: int, backend: str = "auto") -> ActorPlan:
    """``plan``, or the plan that does ``rows`` rows of work in this process when there are
    at most ``below`` of them (``driver_plan``) and ``runtime.embed_in_driver_below`` is not
    0: the one rule by which a small map or a one-off task skips its actors."""
    from checkray.engine.runtime import alive_node_count

    return driver_plan(plan, rows, alive_node_count(), backend, below if in_driver_below() else 0) or plan


def in_driver_below() -> int:
    """``runtime.embed_in_driver_below`` (``IN_DRIVER_ENV``; 0: never in the driver)."""
    import os

    value = os.environ.get(IN_DRIVER_ENV)
    return int(value) if value not in (None, "") else IN_DRIVER_BELOW


def embeds_in_driver(plan: ActorPlan, texts: int, nodes: int, driver_cpus: float, below: int) -> bool:
    """Whether ``texts`` texts are few enough to encode in this process (pure). Only on a
    CPU plan (a GPU's encoders run in its actors), on a cluster of one node (several
    nodes' actors spread the work; this one may be a laptop driving them), and where
    this node offers Ray CPUs (a cluster head started with ``--num-cpus=0`` does not)."""
    return plan.device == "cpu" and nodes == 1 and driver_cpus >= 1 and 0 < texts <= below


class EmbedWorker:
    """The Ray actor: ``actor_cls(**kwargs)`` loaded once; ``embed`` encodes a block."""

    def __init__(self, actor_cls: type, kwargs: Mapping[str, Any]):
        self.inner = actor_cls(**dict(kwargs))

    def embed(self, texts: list[str]) -> np.ndarray:
        from checkray.engine.arrays import column_to_numpy

        out = self.inner(pa.table({"text": pa.array(texts, pa.string())}))
        vectors = column_to_numpy(out.column("embedding"))
        if len(vectors) != len(texts):
            raise RuntimeError(f"{type(self.inner).__name__} returned {len(vectors)} embeddings for {len(texts)} texts")
        return vectors


class EmbedPool:
    """Encoder actors of one model. ``submit`` queues a block of texts and returns its
    ticket; blocks go to whichever actor has fewer than ``QUEUED_PER_ACTOR`` in hand (one
    running, one waiting: no actor idles while the driver works, and a slow actor gets
    fewer blocks); ``get`` returns a block's vectors. Actors start on ``start()`` (or the
    first block) and are killed on ``close()``."""

    last_times: ClassVar[dict[str, float]] = {}  # ``times`` of the last pool closed in this process

    def __init__(self, model: EmbedModel, plan: ActorPlan | None = None, backend: str = "auto"):
        self.model, self.plan, self.backend = model, plan, backend
        self.actors: list = []
        self.busy: list[int] = []
        self.waiting: deque[tuple[int, list[str]]] = deque()
        self.running: dict = {}  # ObjectRef -> (ticket, actor index)
        self.done: dict[int, Any] = {}  # ticket -> ObjectRef of its vectors
        self.tickets = 0
        self.times: dict[str, float] = {}  # perf_counter at start, first block done, close (benches read it)

    def start(self) -> EmbedPool:
        import ray

        if self.actors:
            return self
        self.times = {"start": time.perf_counter()}
        self.plan = self.plan or cluster_plan(self.backend)
        kwargs = dict(self.model.kwargs)
        if "threads" in kwargs and kwargs["threads"] is None:
            kwargs["threads"] = self.plan.threads
        if self.plan.in_driver:  # one encoder, here: ``submit`` encodes at once
            self.actors, self.busy = [EmbedWorker(self.model.actor_cls, kwargs)], [0]
            return self
        cls = ray.remote(EmbedWorker).options(
            **self.plan.ray_options(),
            max_restarts=MAX_RESTARTS,
            max_task_retries=MAX_TASK_RETRIES,
            scheduling_strategy="SPREAD",
        )
        self.actors = [cls.remote(self.model.actor_cls, kwargs) for _ in range(self.plan.pool_size)]
        self.busy = [0] * len(self.actors)
        return self

    def submit(self, texts: list[str]) -> int:
        self.start()
        ticket = self.tickets
        self.tickets += 1
        if self.plan.in_driver:
            self.done[ticket] = self.actors[0].embed(texts)
            self.times.setdefault("first", time.perf_counter())
            return ticket
        self.waiting.append((ticket, texts))
        self._pump()
        return ticket

    def _pump(self) -> None:
        while self.waiting and min(self.busy) < QUEUED_PER_ACTOR:
            a = int(np.argmin(self.busy))
            ticket, texts = self.waiting.popleft()
            self.running[self.actors[a].embed.remote(texts)] = (ticket, a)
            self.busy[a] += 1

    def get(self, ticket: int) -> np.ndarray:
        import ray

        if self.plan is not None and self.plan.in_driver:
            return self.done.pop(ticket)
        while ticket not in self.done:
            ready, _ = ray.wait(list(self.running), num_returns=1)
            self.times.setdefault("first", time.perf_counter())
            for ref in ready:
                done, a = self.running.pop(ref)
                self.busy[a] -= 1
                self.done[done] = ref
            self._pump()
        try:
            return ray.get(self.done.pop(ticket))
        except Exception as exc:  # a user error inside the actor (missing model ...) stays one line
            cause = user_error(exc)
            if cause is None:
                raise
            raise cause from None

    def close(self) -> None:
        import ray

        if self.actors:
            self.times["close"] = time.perf_counter()
            EmbedPool.last_times = dict(self.times)
        in_driver = bool(self.plan and self.plan.in_driver and self.actors)
        for actor in self.actors if not in_driver else ():
            ray.kill(actor)
        self.actors, self.busy = [], []
        self.waiting.clear()
        self.running.clear()
        self.done.clear()
        if in_driver:  # the model this process held
            release_memory()

    def __enter__(self) -> EmbedPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------- embedding
@dataclass
class _Chunk:
    n: int
    digests: np.ndarray | None
    hit_rows: np.ndarray
    hit_values: np.ndarray | None
    unique: np.ndarray  # rows computed (one per distinct missing text), sorted by length
    inverse: np.ndarray  # every missing row -> its position in ``unique``
    missing: np.ndarray
    tickets: list = field(default_factory=list)


@dataclass
class EmbedStats:
    texts: int = 0
    hits: int = 0
    computed: int = 0


def embed_stream(
    chunks: Iterable[Sequence[str]],
    model: EmbedModel,
    *,
    cache: ContentCache | None = None,
    pool: EmbedPool | None = None,
    block_rows: int = BLOCK_ROWS,
    stats: EmbedStats | None = None,
) -> Iterator[np.ndarray]:
    """Embeddings of each chunk of texts, in order. A chunk's cache hits are read, its
    missing texts (each distinct text once) sent to the pool in blocks, and the new vectors
    written to the cache as one shard; the next chunk is queued before this one is
    collected, so the encoders stay busy across chunks. ``pool``: a pool to use (and
    leave open); by default one is started at the first miss and closed at the end."""
    space = cache.space("embeddings", model.identity) if cache is not None else None
    own = pool is None
    pool = pool or EmbedPool(model)
    stats = stats if stats is not None else EmbedStats()
    queued: deque[_Chunk] = deque()

    def prepare(texts: Sequence[str]) -> _Chunk:
        n = len(texts)
        digests = text_digests(texts) if space is not None else None
        hit_rows, hit_values = np.zeros(0, np.int64), None
        if space is not None and n:
            found = space.find(digests)
            ok, values = found.read(np.flatnonzero(found.mask))
            hit_rows, hit_values = np.flatnonzero(found.mask)[ok], values[ok]
        hit = np.zeros(n, bool)
        hit[hit_rows] = True
        missing = np.flatnonzero(~hit)
        if digests is not None:
            _, first, inverse = np.unique(
                digests[missing].view(f"V{digests.shape[1]}").ravel(), return_index=True, return_inverse=True
            )
        else:
            first, inverse = np.arange(len(missing)), np.arange(len(missing))
        lengths = np.array([len(texts[missing[i]]) for i in first], dtype=np.int64)
        # Longest first (as encode() orders its input): the slow blocks start first and the
        # last blocks are the shortest, so the actors finish together instead of one of them
        # working alone through a long last block.
        by_length = np.argsort(-lengths, kind="stable")
        rank = np.empty_like(by_length)
        rank[by_length] = np.arange(len(by_length))
        unique = missing[first[by_length]]
        chunk = _Chunk(n, digests, hit_rows, hit_values, unique, rank[inverse], missing)
        for lo in range(0, len(unique), block_rows):
            chunk.tickets.append(pool.submit([texts[i] for i in unique[lo : lo + block_rows]]))
        stats.texts += n
        stats.hits += len(hit_rows)
        stats.computed += len(unique)
        return chunk

    def finish(chunk: _Chunk) -> np.ndarray:
        computed = [pool.get(t) for t in chunk.tickets]
        new = np.concatenate(computed).astype(np.float32, copy=False) if computed else None
        hits = chunk.hit_values if chunk.hit_values is not None and len(chunk.hit_rows) else None
        width = new.shape[1] if new is not None else hits.shape[1] if hits is not None else 0
        out = np.zeros((chunk.n, width), dtype=np.float32)
        if hits is not None:
            out[chunk.hit_rows] = hits
        if new is not None:
            out[chunk.missing] = new[chunk.inverse]
            if space is not None:
                space.put(chunk.digests[chunk.unique], new)
        return out

    if space is None or not space.has_shards():
        pool.start()  # nothing cached: the actors load the model while the first chunk is read
    try:
        for texts in chunks:
            queued.append(prepare(texts))
            if len(queued) > 1:  # the next chunk is queued: collect the previous one
                yield finish(queued.popleft())
        while queued:
            yield finish(queued.popleft())
    finally:
        if own:
            pool.close()


def embed_texts(
    texts: Sequence[str],
    model: EmbedModel,
    *,
    cache: ContentCache | None = None,
    pool: EmbedPool | None = None,
    plan: ActorPlan | None = None,
    block_rows: int = BLOCK_ROWS,
    stats: EmbedStats | None = None,
) -> np.ndarray:
    """(len(texts), d) float32 embeddings; only texts the cache lacks are encoded (see
    ``embed_stream``). ``plan``: the pool's resources (default: ``plan_embedders`` on
    what Ray reports)."""
    if pool is None and plan is not None:
        pool = EmbedPool(model, plan)
        with pool:
            return embed_texts(texts, model, cache=cache, pool=pool, block_rows=block_rows, stats=stats)
    chunks = (texts[lo : lo + CHUNK_ROWS] for lo in range(0, len(texts), CHUNK_ROWS))
    parts = list(embed_stream(chunks, model, cache=cache, pool=pool, block_rows=block_rows, stats=stats))
    return np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
