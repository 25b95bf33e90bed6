"""``ModelHost``: a Ray actor holding one or several models under test.

A heavy model (a transformer, an LLM) gets a host of its own. Cheap models (scikit-learn
pipelines, lexicon models, classifier heads reading shared embeddings) share a host: a
process start and its imports cost more than predicting with them, so one process per
cheap model made the benchmark slower than a plain loop.

Errors stay per model: a model that fails to load or raises while predicting is reported
with a one-line error and the host goes on with the others. Only a crash of the process
itself (segfault, OOM kill, ``os._exit``) takes the whole host down; the scheduler
(``checkray.actors.benchmark.predictor``) then reruns each of its models alone.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

import numpy as np

from checkray.engine.benchmark.qa import checked_answers
from checkray.engine.benchmark.registry import ModelSpec


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    line = f"{name}: {text}" if text and not text.startswith(name) else (text or name)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def checked_probs(probs, n: int, labels: Sequence[str]) -> np.ndarray:
    """The model's output as float32 (n, labels), or ValueError saying what is wrong with it."""
    try:
        probs = np.asarray(probs, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"predict_proba returned something that is not an array of numbers ({exc})") from None
    if probs.shape != (n, len(labels)):
        raise ValueError(f"predict_proba returned shape {probs.shape}, expected {(n, len(labels))}")
    if not np.isfinite(probs).all():
        raise ValueError("predict_proba returned NaN or infinite values")
    if probs.size and (probs.min() < -1e-4 or probs.max() > 1 + 1e-4):
        raise ValueError(f"predict_proba returned values outside [0, 1] ({probs.min():.3g} .. {probs.max():.3g})")
    return np.clip(probs, 0.0, 1.0)


def answers_or_probs(model, texts: list[str], pairs: list[str | None] | None):
    """What ``model`` says of a batch: answers when it answers questions (it has no label
    map), else its probabilities."""
    if model.labels:
        return model.predict_proba(texts, pairs)
    if pairs is None or any(p is None for p in pairs):
        raise ValueError("a question-answering model was given a case with no question (text_pair)")
    return model.answer(texts, pairs)


class ModelHost:
    """Loads its models once; answers batches for any subset of them.

    ``head_only``: the models are ``st_head`` classifier heads fed embeddings by a
    ``SharedEncoder``, so only the heads are loaded.
    """

    def __init__(
        self, specs: list[dict], threads: int = 1, import_paths: Sequence[str] = (), *, head_only: bool = False
    ):
        # A local Ray does not give workers the driver's sys.path; "callable" models named
        # as module:function from a script's folder must still import.
        for path in import_paths:
            if path not in sys.path and os.path.isdir(path):
                sys.path.append(path)
        self.models: dict[str, object] = {}
        self.state: dict[str, tuple[list[str], str | None, float]] = {}
        for raw in specs:
            spec = ModelSpec.model_validate(raw)
            start = time.perf_counter()
            try:
                model = self._load(spec, head_only=head_only)
                self.models[spec.name] = model
                self.state[spec.name] = (list(model.labels), None, time.perf_counter() - start)
            except Exception as exc:  # any adapter failure becomes this model's error
                self.state[spec.name] = (list(spec.labels), one_line(exc), time.perf_counter() - start)
        if "torch" in sys.modules and threads:
            sys.modules["torch"].set_num_threads(threads)  # share the node's cores with the other hosts

    @staticmethod
    def _load(spec: ModelSpec, *, head_only: bool):
        if head_only:
            from checkray.actors.models.sklearn_models import EncoderHeadModel, load_estimator

            return EncoderHeadModel(spec, load_estimator(spec), encoder=None)
        from checkray.actors.models import load_model

        return load_model(spec)

    def status(self) -> dict[str, tuple[list[str], str | None, float]]:
        """Per model: (labels, load error or None, load seconds)."""
        return self.state

    def predict(self, names: list[str], texts: list[str], pairs: list[str | None] | None) -> dict:
        """Per model: probabilities for ``texts`` (an answering model: its answers to the
        questions ``pairs`` about the contexts ``texts``), or a one-line error string."""
        return self._each(names, len(texts), lambda m: answers_or_probs(m, texts, pairs))

    def predict_embedded(self, names: list[str], embeddings: np.ndarray) -> dict:
        """Per head: probabilities for a batch of embeddings from a shared encoder."""
        return self._each(names, len(embeddings), lambda m: m.predict_embeddings(embeddings))

    def _each(self, names: list[str], n: int, run) -> dict:
        out: dict[str, np.ndarray | str] = {}
        for name in names:
            model = self.models.get(name)
            if model is None:
                out[name] = self.state.get(name, ([], "model is not loaded", 0))[1] or "model is not loaded"
                continue
            try:
                labels = self.state[name][0]
                got = run(model)
                out[name] = (
                    np.asarray(checked_answers(got, n), dtype=object) if not labels else checked_probs(got, n, labels)
                )
            except Exception as exc:  # this model's failure, not the host's
                out[name] = one_line(exc)
                self.models.pop(name, None)
                # Batches already queued still name it: they get this error again, not a
                # "not loaded" that would hide the cause from whichever answer is read first.
                labels, _, load_seconds = self.state[name]
                self.state[name] = (labels, out[name], load_seconds)
        return out
