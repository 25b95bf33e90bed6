"""Families built on scikit-learn estimators saved with joblib.

``sklearn``: a whole pipeline that takes raw texts (e.g. TF-IDF + logistic regression).
``st_head``: a sentence-transformers encoder (``options.encoder``: ``builtin:minilm``, a
path, or a hub name) followed by a classifier head fitted on its embeddings.

Options both understand: ``pair_separator`` (join pair inputs; otherwise pairs are an
error). ``st_head`` also reads ``normalize`` (default true: the zoo fits heads on
unit-length embeddings) and ``encode_batch_size``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from checkray.actors.models.common import class_columns, require_path, single_texts
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.trust import load_pickle


def load_estimator(spec: ModelSpec) -> Any:
    path = require_path(spec, "joblib file")
    if path.is_dir():
        raise InputError(
            f"model '{spec.name}' (family {spec.family}): expected a joblib file, got a directory: {spec.path}"
        )
    estimator = load_pickle(path, f"model '{spec.name}'")  # checkray's own, or --trust-code
    if not hasattr(estimator, "predict_proba") or not hasattr(estimator, "classes_"):
        raise InputError(
            f"model '{spec.name}': {spec.path} holds a {type(estimator).__name__}, "
            "not a fitted classifier with predict_proba"
        )
    return estimator


class SklearnTextModel:
    """A fitted scikit-learn pipeline over raw texts."""

    def __init__(self, spec: ModelSpec, estimator: Any):
        self.spec, self.name, self.labels = spec, spec.name, list(spec.labels)
        self.estimator = estimator
        self.columns = class_columns(spec, estimator.classes_)

    def predict_proba(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray:
        inputs = single_texts(self.spec, texts, pairs)
        if not inputs:
            return np.zeros((0, len(self.labels)))
        return np.asarray(self.estimator.predict_proba(inputs), dtype=np.float64)[:, self.columns]


class EncoderHeadModel:
    """Sentence embeddings from an encoder, classified by a scikit-learn head."""

    def __init__(self, spec: ModelSpec, head: Any, encoder: Any):
        self.spec, self.name, self.labels = spec, spec.name, list(spec.labels)
        self.head, self.encoder = head, encoder
        self.columns = class_columns(spec, head.classes_)
        self.normalize = bool(spec.options.get("normalize", True))
        self.batch_size = int(spec.options.get("encode_batch_size", 64))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.encoder.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    def predict_embeddings(self, X: np.ndarray) -> np.ndarray:
        """Head probabilities for precomputed embeddings, in label-map order."""
        return np.asarray(self.head.predict_proba(X), dtype=np.float64)[:, self.columns]

    def predict_proba(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray:
        inputs = single_texts(self.spec, texts, pairs)
        if not inputs:
            return np.zeros((0, len(self.labels)))
        return self.predict_embeddings(self.embed(inputs))


def load_sklearn(spec: ModelSpec) -> SklearnTextModel:
    return SklearnTextModel(spec, load_estimator(spec))


def load_st_head(spec: ModelSpec) -> EncoderHeadModel:
    from checkray.actors.embedder import load_sentence_transformer, resolve_model

    head = load_estimator(spec)
    encoder_name = str(spec.options.get("encoder", "builtin:minilm"))
    try:
        resolve_model(encoder_name)
    except InputError as exc:
        raise InputError(f"model '{spec.name}': encoder {exc}") from None
    threads = spec.options.get("threads")
    encoder = load_sentence_transformer(encoder_name, threads=int(threads) if threads else None)
    dim = encoder.get_embedding_dimension()
    expected = getattr(head, "n_features_in_", None)
    if expected is not None and dim is not None and int(expected) != int(dim):
        raise InputError(
            f"model '{spec.name}': head expects {expected}-d embeddings but encoder '{encoder_name}' gives {dim}-d"
        )
    return EncoderHeadModel(spec, head, encoder)
