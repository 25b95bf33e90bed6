"""Helpers every adapter shares: finding the model file, mapping a model's classes onto the
spec's label map, and the pair-input policy.

Label map: column j of ``predict_proba`` must be ``spec.labels[j]``. A trained model has
its own class order (``classes_`` of a scikit-learn estimator, ``id2label`` of an HF
config); ``class_columns`` turns that into the column order the spec asks for, or fails
with a one-line error when the two cannot describe the same classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError


def require_path(spec: ModelSpec, kind: str = "file", must_be_dir: bool = False) -> Path:
    """The spec's model path, which must exist on disk."""
    if not spec.path:
        raise InputError(f"model '{spec.name}' (family {spec.family}): no model path given")
    path = Path(spec.path).expanduser()
    if not path.exists():
        raise InputError(f"model '{spec.name}' (family {spec.family}): {kind} not found: {spec.path}")
    if must_be_dir and not path.is_dir():
        raise InputError(f"model '{spec.name}' (family {spec.family}): expected a directory, got a file: {spec.path}")
    return path


def class_columns(spec: ModelSpec, classes: Sequence) -> np.ndarray:
    """Index into the model's class axis for each of ``spec.labels``.

    Classes that are label names (strings) are matched by name, so a model trained on
    ``["negative", "positive"]`` serves a spec listing them in any order. Integer classes
    0..k-1 are taken as positions into ``spec.labels``.
    """
    classes = list(classes)
    labels = list(spec.labels)
    if len(classes) != len(labels):
        raise InputError(
            f"model '{spec.name}': label map has {len(labels)} labels ({', '.join(labels)}) "
            f"but the model predicts {len(classes)} classes"
        )
    if all(isinstance(c, str) for c in classes):
        missing = [lab for lab in labels if lab not in classes]
        if missing:
            raise InputError(
                f"model '{spec.name}': labels {missing} are not among the model's classes ({', '.join(classes)})"
            )
        return np.array([classes.index(lab) for lab in labels])
    as_int = [int(c) for c in classes]
    if sorted(as_int) != list(range(len(labels))):
        raise InputError(f"model '{spec.name}': model classes {classes} are not 0..{len(labels) - 1}")
    return np.array([as_int.index(j) for j in range(len(labels))])


def single_texts(spec: ModelSpec, texts: Sequence[str], pairs: Sequence[str | None] | None) -> list[str]:
    """Inputs for a model that reads one text: ``texts`` alone, or each pair joined with
    ``options.pair_separator`` when the spec sets one; otherwise pairs are an error."""
    texts = [str(t) for t in texts]
    if pairs is None:
        return texts
    if len(pairs) != len(texts):
        raise InputError(f"model '{spec.name}': {len(texts)} texts but {len(pairs)} pair texts")
    sep = spec.options.get("pair_separator")
    if sep is None:
        raise InputError(
            f"model '{spec.name}' (family {spec.family}) reads single texts and cannot take pairs; "
            "set options.pair_separator to join them"
        )
    return [t if p is None else f"{t}{sep}{p}" for t, p in zip(texts, pairs)]


def lexicon_probabilities(spec: ModelSpec, scores: np.ndarray, neutral_band: float) -> np.ndarray:
    """Probabilities over ``spec.labels`` from polarity scores in [-1, 1].

    Two labels (negative, positive): P(positive) = (score + 1) / 2. With a ``neutral``
    label, P(neutral) falls linearly from 1 at score 0 to 0.5 at |score| = neutral_band
    (the argmax then follows the lexicon's own convention: neutral inside the band) and
    the rest goes to the score's sign.
    """
    labels = list(spec.labels)
    allowed = {"negative", "positive", "neutral"}
    if not {"negative", "positive"} <= set(labels) or not set(labels) <= allowed or len(set(labels)) != len(labels):
        raise InputError(
            f"model '{spec.name}' (family {spec.family}): labels must be negative, positive and optionally "
            f"neutral, got {labels}"
        )
    s = np.clip(np.asarray(scores, dtype=np.float64), -1.0, 1.0)
    probs: dict[str, np.ndarray] = {}
    if "neutral" in labels:
        neutral = np.clip(1.0 - np.abs(s) / (2.0 * neutral_band), 0.0, 1.0)
        polar = 1.0 - neutral
        probs["neutral"] = neutral
        probs["positive"] = np.where(s > 0, polar, 0.0)
        probs["negative"] = np.where(s < 0, polar, 0.0)
    else:
        probs["positive"] = (s + 1.0) / 2.0
        probs["negative"] = 1.0 - probs["positive"]
    return np.stack([probs[lab] for lab in labels], axis=1)
