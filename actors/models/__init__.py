"""Adapters for models under test, by family, and ``load_model(spec)``.

``FAMILIES`` maps a registry entry's ``family`` to the function that loads it; a family
module is imported only when a spec of that family is loaded (``vader`` never imports
transformers). A new family is one line here and one module beside this file.
"""

from __future__ import annotations

from checkray.engine.benchmark.registry import ModelSpec, ModelUnderTest
from checkray.engine.errors import InputError
from checkray.engine.lazy import LazyRegistry

FAMILIES: LazyRegistry = LazyRegistry("model family")
for _family, _ref in [
    ("callable", "checkray.actors.models.callable_model:load_callable"),
    ("hf", "checkray.actors.models.hf_model:load_hf"),
    ("vader", "checkray.actors.models.lexicon_models:load_vader"),
    ("textblob", "checkray.actors.models.lexicon_models:load_textblob"),
    ("llm_zero_shot", "checkray.actors.models.llm_zero_shot:load_llm_zero_shot"),
    ("sklearn", "checkray.actors.models.sklearn_models:load_sklearn"),
    ("st_head", "checkray.actors.models.sklearn_models:load_st_head"),
]:
    FAMILIES.add(_family, _ref)


# Families whose models hold a network (a transformer, an LLM): each gets a host process
# of its own. The others are cheap enough that several share one (``checkray.actors.benchmark``).
HEAVY_FAMILIES = frozenset({"hf", "llm_zero_shot", "st_head"})


def is_heavy(spec: ModelSpec) -> bool:
    """Whether a model gets its own host; ``options: {heavy: true|false}`` overrides the family."""
    flag = spec.options.get("heavy")
    return bool(flag) if flag is not None else spec.family in HEAVY_FAMILIES


def families() -> list[str]:
    return FAMILIES.names()


def load_model(spec: ModelSpec) -> ModelUnderTest:
    """Load a model under test; an unknown family or a missing file is a one-line error."""
    if spec.family not in FAMILIES:
        raise InputError(f"model '{spec.name}': unknown family '{spec.family}' (have: {', '.join(families())})")
    return FAMILIES.get(spec.family)(spec)
