"""One encoder for many heads: ``st_head`` models that share a sentence encoder.

A zoo typically fits several classifier heads on the same encoder's embeddings (MiniLM +
logistic regression, + SVM, + MLP ...). Encoding dominates their cost, so the benchmark
encodes each input once in a ``SharedEncoder`` actor and sends the embedding batches
(Ray object refs: stored once, read by every head) to the heads' actors, which load only
their head. Heads of one encoder are grouped only when they score the same inputs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from checkray.engine.benchmark.families import has_trait
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import ContentCache, text_digests
from checkray.engine.runtime import ActorPlan


class SharedEncoder:
    """A sentence-transformers encoder computing embeddings for a group of heads."""

    def __init__(
        self,
        encoder: str,
        *,
        normalize: bool,
        encode_batch_size: int,
        threads: int,
        import_paths: Sequence[str] = (),
    ):
        for path in import_paths:
            if path not in sys.path and os.path.isdir(path):
                sys.path.append(path)
        from checkray.actors.embedder import load_sentence_transformer

        self.model = load_sentence_transformer(encoder, threads=threads)
        self.normalize, self.encode_batch_size = normalize, encode_batch_size

    def fill(self, known: np.ndarray, missing: list[int], texts: list[str]) -> np.ndarray:
        """A batch whose rows ``missing`` (encoded from ``texts``) the cache lacked."""
        out = np.array(known, dtype=np.float32)
        out[missing] = self.embed(texts)
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(
            self.model.encode(
                texts,
                batch_size=self.encode_batch_size,
                convert_to_numpy=True,
                normalize_embeddings=self.normalize,
                show_progress_bar=False,
            ),
            dtype=np.float32,
        )


def encoder_key(spec: ModelSpec) -> tuple[str, bool, int]:
    o = spec.options
    return (
        str(o.get("encoder", "builtin:minilm")),
        bool(o.get("normalize", True)),
        int(o.get("encode_batch_size", 64)),
    )


def encoder_groups(
    specs: Sequence[ModelSpec], rows_of: dict[str, list[int]], pairs: Sequence[str | None] | None, least: int = 2
) -> dict[tuple, list[str]]:
    """Groups of ``least`` or more heads (families fed by a shared encoder) with one encoder and the same single-text inputs."""
    groups: dict[tuple, list[str]] = {}
    for spec in specs:
        rows = rows_of[spec.name]
        if not has_trait(spec, "shared_encoder") or not rows:
            continue
        if pairs is not None and any(pairs[i] is not None for i in rows):
            continue  # pair inputs go through the adapter's own pair policy
        groups.setdefault((encoder_key(spec), tuple(rows)), []).append(spec.name)
    return {key: names for key, names in groups.items() if len(names) >= least}


def _gather(picks: list[tuple[int, int]], *batches: np.ndarray) -> np.ndarray:
    """A batch of embeddings picked from an encoder's batches: ``(batch, row)`` pairs."""
    return np.stack([batches[b][r] for b, r in picks]).astype(np.float32, copy=False)


def union_rows(row_sets: Sequence[list[int]]) -> list[int]:
    """The union of an encoder's heads' inputs, the largest row set first (its batches are the union's)."""
    union: list[int] = []
    seen: set[int] = set()
    for rows in sorted(row_sets, key=lambda rows: -len(rows)):
        union += [i for i in rows if i not in seen]
        seen.update(rows)
    return union


def start_shared_encoders(
    specs: Sequence[ModelSpec],
    rows_of: dict[str, list[int]],
    texts: Sequence[str],
    pairs: Sequence[str | None] | None,
    batch_size: int,
    plan: ActorPlan,
    threads: int,
    import_paths: Sequence[str],
    cache: ContentCache | None = None,
) -> tuple[dict[str, list], dict[str, object], Callable[[], None]]:
    """Start one encoder actor per encoder and queue its batches on it.

    Returns ``feeds`` (model -> embedding refs, one per batch of its rows), ``encoders``
    (model -> the encoder actor it reads from) and ``flush``, which stores what the
    encoders computed in the cache.

    Without a cache, heads share an encoder when two or more score the same inputs. With
    a ``cache``, every head reads its embeddings from it: an encoder embeds the union of
    its heads' inputs once (heads on other inputs, as when a rerun adds cases and a
    model, get their batches gathered from it), sends the batches the cache holds whole
    as they are, and starts only when a batch needs it.
    """
    import ray

    feeds: dict[str, list] = {}
    encoders: dict[str, object] = {}
    flushes: list[Callable[[], None]] = []
    if cache is None:
        by_encoder = {
            (key, rows): [(n, list(rows)) for n in names]
            for (key, rows), names in encoder_groups(specs, rows_of, pairs).items()
        }
    else:
        by_encoder = {}
        for (key, rows), names in encoder_groups(specs, rows_of, pairs, least=1).items():
            by_encoder.setdefault((key, None), []).extend((n, list(rows)) for n in names)
    encoder_cls = ray.remote(max_restarts=0)(SharedEncoder).options(**plan.ray_options())
    gather = ray.remote(num_cpus=0)(_gather)
    for ((name, normalize, encode_batch_size), _), members in by_encoder.items():
        start = partial(
            encoder_cls.remote,
            name,
            normalize=normalize,
            encode_batch_size=encode_batch_size,
            threads=threads,
            import_paths=list(import_paths),
        )
        union = union_rows([rows for _, rows in members])
        refs, actor, flush = _encode_union(union, texts, batch_size, cache, (name, normalize), start)
        flushes.append(flush)
        where = {row: (k // batch_size, k % batch_size) for k, row in enumerate(union)}
        by_rows: dict[tuple[int, ...], list] = {}  # one feed per row set: its heads share a host
        for member, rows in members:
            feed = by_rows.get(tuple(rows))
            if feed is None and rows == union[: len(rows)] and (len(rows) % batch_size == 0 or rows == union):
                feed = refs[: -(-len(rows) // batch_size)]
            elif feed is None:
                feed = []
                for lo in range(0, len(rows), batch_size):
                    picks = [where[i] for i in rows[lo : lo + batch_size]]
                    used = sorted({b for b, _ in picks})
                    feed.append(gather.remote([(used.index(b), r) for b, r in picks], *[refs[b] for b in used]))
            feeds[member] = by_rows.setdefault(tuple(rows), feed)
            if actor is not None:
                encoders[member] = actor

    def flush() -> None:
        for f in flushes:
            f()

    return feeds, encoders, flush


def _encode_union(
    rows: list[int],
    texts: Sequence[str],
    batch_size: int,
    cache: ContentCache | None,
    encoder: tuple[str, bool],
    start: Callable[[], object],
) -> tuple[list, object | None, Callable[[], None]]:
    """Refs of the embeddings of ``rows``, one per batch; the encoder actor (None when the
    cache held every batch whole); and a ``flush`` that stores what the actor computed."""
    import ray

    batches = [[texts[i] for i in rows[lo : lo + batch_size]] for lo in range(0, len(rows), batch_size)]
    if cache is None:
        actor = start()
        return [actor.embed.remote(b) for b in batches], actor, lambda: None
    from checkray.actors.embed_cache import sentence_model

    space = cache.space("embeddings", sentence_model(*encoder).identity)
    digests = text_digests([texts[i] for i in rows])
    found = space.find(digests)
    ok, values = found.read(np.arange(len(rows)))
    refs, computed, actor = [], [], None
    for k, batch in enumerate(batches):
        lo = k * batch_size
        have = ok[lo : lo + len(batch)]
        if have.all():
            refs.append(ray.put(values[lo : lo + len(batch)]))
            continue
        actor = actor or start()
        missing = np.flatnonzero(~have).tolist()
        if have.any():
            ref = actor.fill.remote(values[lo : lo + len(batch)], missing, [batch[i] for i in missing])
        else:
            ref = actor.embed.remote(batch)
        refs.append(ref)
        computed.append((ref, lo, missing))

    def flush() -> None:
        got = []
        for ref, lo, missing in computed:
            try:
                got.append((lo, missing, ray.get(ref, timeout=60)))
            except Exception:  # noqa: BLE001 - its encoder failed or was stopped: nothing to keep
                continue
        if got:
            at = np.concatenate([lo + np.asarray(missing, np.int64) for lo, missing, _ in got])
            space.put(digests[at], np.concatenate([v[missing] for _, missing, v in got]))
        computed.clear()

    return refs, actor, flush


def local_feeds(
    specs: Sequence[ModelSpec],
    rows_of: dict[str, list[int]],
    texts: Sequence[str],
    pairs: Sequence[str | None] | None,
    batch_size: int,
    cache: ContentCache | None = None,
) -> dict[str, list[np.ndarray]]:
    """``start_shared_encoders`` in this process, for small work (``InProcessCalls``): each
    encoder embeds its heads' inputs once, here, reading and filling the content cache;
    model -> its embedding batches (heads on the same inputs share one list, so one host)."""
    feeds: dict[str, list[np.ndarray]] = {}
    for ((name, normalize, encode_batch_size), rows), members in encoder_groups(specs, rows_of, pairs, least=1).items():
        batch = [texts[i] for i in rows]
        embeddings = _embed_here(batch, name, normalize, encode_batch_size, cache)
        feed = [embeddings[lo : lo + batch_size] for lo in range(0, len(rows), batch_size)]
        feeds.update({member: feed for member in members})
    return feeds


def _embed_here(
    texts: list[str], encoder: str, normalize: bool, encode_batch_size: int, cache: ContentCache | None
) -> np.ndarray:
    """Embeddings of ``texts``: what the cache holds, the rest encoded now (and stored)."""
    from checkray.actors.embed_cache import fill_embeddings, lookup_embeddings, sentence_model

    identity = sentence_model(encoder, normalize).identity
    found = lookup_embeddings(cache, identity, texts)
    computed = None
    if found.todo:
        encoder_here = SharedEncoder(encoder, normalize=normalize, encode_batch_size=encode_batch_size, threads=0)
        computed = encoder_here.embed(found.todo_texts)
    return fill_embeddings(cache, identity, found, computed)
