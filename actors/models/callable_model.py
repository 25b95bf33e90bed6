"""Family ``callable``: any Python function given as ``module:function``.

The function takes ``(texts, pairs)`` (``pairs`` is None for single-text tasks) and returns
an (n, len(labels)) array of probabilities.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import numpy as np

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.trust import require_code_trust


class CallableModel:
    def __init__(self, name: str, labels: list[str], fn: Callable):
        self.name, self.labels, self.fn = name, labels, fn

    def predict_proba(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray:
        probs = np.asarray(self.fn(list(texts), None if pairs is None else list(pairs)), dtype=np.float64)
        if probs.shape != (len(texts), len(self.labels)):
            raise ValueError(
                f"model '{self.name}' returned shape {probs.shape}, expected {(len(texts), len(self.labels))}"
            )
        return probs


def import_callable(ref: str, what: str) -> Callable:
    module_name, _, attr = (ref or "").partition(":")
    if not module_name or not attr:
        raise InputError(f"{what}: '{ref}' is not of the form module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"{what}: cannot import module '{module_name}': {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise InputError(f"{what}: '{module_name}' has no callable '{attr}'")
    return fn


def load_callable(spec: ModelSpec) -> CallableModel:
    require_code_trust(f"model '{spec.name}'", f"family callable imports the module of '{spec.path}'")
    return CallableModel(spec.name, list(spec.labels), import_callable(spec.path or "", f"model '{spec.name}'"))
