"""Adapters for models under test, one module per family, and ``load_model(spec)``.

What a family is (its loader and traits) is a record in
``checkray.engine.benchmark.families.FAMILIES``; the loader it names lives here and is
imported only when a model of that family is loaded.
"""

from __future__ import annotations

from checkray.engine.benchmark.families import FAMILIES, families, family_of, is_heavy
from checkray.engine.benchmark.registry import ModelSpec, ModelUnderTest

__all__ = ["families", "is_heavy", "load_model"]


def load_model(spec: ModelSpec) -> ModelUnderTest:
    """Load a model under test; an unknown family or a missing file is a one-line error."""
    family_of(spec)  # an unknown family: one line naming the model
    return FAMILIES.get(spec.family)(spec)
