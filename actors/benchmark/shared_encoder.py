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
from collections.abc import Sequence

import numpy as np

from engine.benchmark.registry import ModelSpec
from engine.runtime import ActorPlan

SHARED_FAMILY = "st_head"


class SharedEncoder:
    """A sentence-transformers encoder computing embeddings for a group of heads."""

    def __init__(
        self, encoder: str, normalize: bool, encode_batch_size: int, threads: int, import_paths: Sequence[str] = ()
    ):
        for path in import_paths:
            if path not in sys.path and os.path.isdir(path):
                sys.path.append(path)
        from actors.embedder import load_sentence_transformer

        self.model = load_sentence_transformer(encoder, threads=threads)
        self.normalize, self.encode_batch_size = normalize, encode_batch_size

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
    specs: Sequence[ModelSpec], rows_of: dict[str, list[int]], pairs: Sequence[str | None] | None
) -> dict[tuple, list[str]]:
    """Groups of two or more ``st_head`` models with one encoder and the same single-text inputs."""
    groups: dict[tuple, list[str]] = {}
    for spec in specs:
        rows = rows_of[spec.name]
        if spec.family != SHARED_FAMILY or not rows:
            continue
        if pairs is not None and any(pairs[i] is not None for i in rows):
            continue  # pair inputs go through the adapter's own pair policy
        groups.setdefault((encoder_key(spec), tuple(rows)), []).append(spec.name)
    return {key: names for key, names in groups.items() if len(names) > 1}


def start_shared_encoders(
    specs: Sequence[ModelSpec],
    rows_of: dict[str, list[int]],
    texts: Sequence[str],
    pairs: Sequence[str | None] | None,
    batch_size: int,
    plan: ActorPlan,
    threads: int,
    import_paths: Sequence[str],
) -> tuple[dict[str, list], dict[str, object]]:
    """Start one encoder actor per group and queue every batch on it.

    Returns ``feeds`` (model -> embedding refs, one per batch of its rows) and
    ``encoders`` (model -> the encoder actor it reads from).
    """
    import ray

    encoder_cls = ray.remote(max_restarts=0)(SharedEncoder).options(**plan.ray_options())
    feeds: dict[str, list] = {}
    encoders: dict[str, object] = {}
    for ((name, normalize, encode_batch_size), rows), members in encoder_groups(specs, rows_of, pairs).items():
        actor = encoder_cls.remote(name, normalize, encode_batch_size, threads, list(import_paths))
        refs = [
            actor.embed.remote([texts[i] for i in rows[lo : lo + batch_size]]) for lo in range(0, len(rows), batch_size)
        ]
        for member in members:
            feeds[member], encoders[member] = refs, actor
    return feeds, encoders
