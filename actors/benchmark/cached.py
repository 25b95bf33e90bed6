"""Predictions of models under test through the content cache (``engine/cache.py``).

A model's predictions are keyed by what the model is (``prediction_identity``: its spec
with every file, directory or module it names digested by content, ``builtin:`` assets
pinned, without its name, recorded accuracy or case budget, which change no prediction)
and by the digest of each (text, text pair). The benchmark looks a model's inputs up
before it runs it (``lookup``), runs it only on the misses, and stores what it computed
(``store``), so adding cases to a suite or a model to a registry runs only the new
(model, input) pairs, in any run directory. ``cached_predict`` does the same for a model
a job holds in its own process (a judge, an explainer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from checkray.actors.embed_cache import pin_builtins
from checkray.engine.benchmark.families import has_trait
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import ContentCache, text_digests

NOT_PREDICTIVE = {"name", "accuracy", "meta", "max_cases"}  # spec fields that change no prediction


def prediction_identity(spec: ModelSpec) -> dict[str, Any]:
    """The cache key of a model under test (see the module docstring); for a model that
    runs a transformer, also the runtime that runs it (PyTorch, ONNX fp32 or int8)."""
    identity = {"predictor": pin_builtins(spec.model_dump(mode="json", exclude=NOT_PREDICTIVE))}
    if has_trait(spec, "encoder"):
        from checkray.engine.inference import inference_identity

        identity["inference"] = inference_identity()
    return identity


@dataclass
class Cached:
    """What the cache holds of one model's inputs: ``rows`` with ``probs`` (in
    ``labels`` order), and the rows still to predict (``missing``, in the given order)."""

    rows: np.ndarray
    probs: np.ndarray
    labels: list[str] | None
    missing: list[int] = field(default_factory=list)

    @property
    def hits(self) -> int:
        return len(self.rows)


def lookup(cache: ContentCache | None, spec: ModelSpec, rows: Sequence[int], digests: np.ndarray | None) -> Cached:
    """The cached predictions of ``spec`` on input ``rows`` (``digests``: one per input)."""
    rows = np.asarray(rows, dtype=np.int64)
    if cache is None or digests is None or not len(rows):
        return Cached(np.zeros(0, np.int64), np.zeros((0, 0), np.float32), None, rows.tolist())
    found = cache.space("predictions", prediction_identity(spec)).find(digests[rows])
    labels = found.meta.get("labels")
    if not isinstance(labels, list) or found.width != len(labels):
        return Cached(np.zeros(0, np.int64), np.zeros((0, 0), np.float32), None, rows.tolist())
    which = np.flatnonzero(found.mask)
    ok, probs = found.read(which)
    held = np.zeros(len(rows), bool)
    held[which[ok]] = True
    return Cached(rows[which[ok]], probs[ok], [str(x) for x in labels], rows[~held].tolist())


def store(
    cache: ContentCache | None,
    spec: ModelSpec,
    rows: Sequence[int],
    probs: np.ndarray,
    labels: Sequence[str],
    digests: np.ndarray | None,
) -> None:
    """Add a model's predictions on input ``rows`` (one shard)."""
    if cache is None or digests is None or not len(rows):
        return
    space = cache.space("predictions", prediction_identity(spec))
    space.put(digests[np.asarray(rows, dtype=np.int64)], np.asarray(probs, np.float32), {"labels": list(labels)})


def merge(
    cached: Cached, rows: Sequence[int], probs: np.ndarray, labels: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Cached and fresh predictions of one model, as (rows, probs) in ``labels`` order.
    The cache's label order is the model's (same identity), but a permutation is mapped."""
    if not cached.hits:
        return np.asarray(rows, np.int64), np.asarray(probs, np.float32)
    hit_probs = cached.probs
    if list(cached.labels or []) != list(labels):
        if sorted(cached.labels or []) != sorted(labels):
            raise ValueError(f"cached predictions have labels {cached.labels}, the model now {list(labels)}")
        hit_probs = hit_probs[:, [cached.labels.index(lab) for lab in labels]]
    fresh = np.asarray(probs, np.float32).reshape(-1, hit_probs.shape[1]) if len(rows) else hit_probs[:0]
    return np.concatenate([cached.rows, np.asarray(rows, np.int64)]), np.concatenate([hit_probs, fresh])


def cached_predict(
    model: Any,
    spec: ModelSpec,
    texts: Sequence[str],
    pairs: Sequence[str | None] | None = None,
    cache: ContentCache | None = None,
) -> np.ndarray:
    """``model.predict_proba(texts, pairs)`` (a model loaded in this process), computing
    only the inputs the cache lacks; (len(texts), labels) in ``model.labels`` order."""
    predictor = CachedPredictor(spec, lambda: model, cache)
    try:
        return predictor(texts, pairs)
    finally:
        predictor.flush()


class CachedPredictor:
    """A model under test called from a job's own process (S²LCT's consistency judge and
    explanations ...), through the predictions cache: ``predictor(texts, pairs)`` returns
    (n, labels) probabilities in ``labels`` order, computing only inputs neither this
    predictor nor the cache has seen. The model is built by ``load()`` at the first miss
    (never, when the cache holds everything); what it computed is stored by ``flush()`` as
    one shard (call it once at the end: many small calls, one shard)."""

    def __init__(self, spec: ModelSpec, load: Any, cache: ContentCache | None, labels: Sequence[str] | None = None):
        self.spec, self._load, self.cache = spec, load, cache
        self.model: Any = None
        self.labels: list[str] | None = [str(x) for x in labels] if labels is not None else None  # output order
        self.memo: dict[bytes, np.ndarray] = {}
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []  # (digest, probs in self.labels order)
        self.hits = self.computed = 0

    def loaded(self) -> Any:
        if self.model is None:
            self.model = self._load()
        return self.model

    def _in_order(self, probs: np.ndarray, labels: Sequence[str]) -> np.ndarray:
        labels = [str(x) for x in labels]
        if self.labels is None:
            self.labels = labels
        if labels == self.labels:
            return probs
        if sorted(labels) != sorted(self.labels):
            raise ValueError(f"{self.spec.name}: cached predictions have labels {self.labels}, the model {labels}")
        return probs[:, [labels.index(lab) for lab in self.labels]]

    def __call__(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray:
        texts = list(texts)
        if self.cache is None:
            model = self.loaded()
            return self._in_order(np.asarray(model.predict_proba(texts, pairs), dtype=np.float32), model.labels)
        digests = text_digests(texts, pairs)
        keys = [d.tobytes() for d in digests]
        first = list({k: i for i, k in reversed(list(enumerate(keys))) if k not in self.memo}.values())
        if first:
            hit = lookup(self.cache, self.spec, first, digests)
            if hit.hits:
                for row, probs in zip(hit.rows.tolist(), self._in_order(hit.probs, hit.labels or [])):
                    self.memo[keys[row]] = probs
                self.hits += hit.hits
            if hit.missing:
                model = self.loaded()
                sub_pairs = None if pairs is None else [pairs[i] for i in hit.missing]
                fresh = np.asarray(model.predict_proba([texts[i] for i in hit.missing], sub_pairs), np.float32)
                fresh = self._in_order(fresh.reshape(len(hit.missing), -1), model.labels)
                for row, probs in zip(hit.missing, fresh):
                    self.memo[keys[row]] = probs
                    self.pending.append((digests[row], probs))
                self.computed += len(hit.missing)
        if not keys:
            return np.zeros((0, len(self.labels or [])), np.float32)
        return np.stack([self.memo[k] for k in keys])

    def flush(self) -> None:
        """Store what the model computed since the last flush (one shard)."""
        if self.pending and self.cache is not None and self.labels is not None:
            digests = np.stack([d for d, _ in self.pending])
            store(
                self.cache, self.spec, range(len(digests)), np.stack([p for _, p in self.pending]), self.labels, digests
            )
        self.pending = []
