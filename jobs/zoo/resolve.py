"""Which models a job tests: the ones handed to it, a registry file, or a zoo recipe
(built, or reused from its cache). Written once for every job that takes ``--models``."""

from __future__ import annotations

from collections.abc import Sequence

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.jobs.zoo.job import resolve_models


def select_models(
    given: Sequence[ModelSpec] | None, registry: str | None, only: Sequence[str] | None = None, what: str = "models"
) -> list[ModelSpec] | None:
    """The models a job tests: those ``given`` (by the demo), else the ``registry`` file or
    zoo recipe; ``only`` keeps the named ones. None when no models were asked for."""
    specs = list(given) if given is not None else (resolve_models(registry) if registry else None)
    if specs and only:
        unknown = sorted(set(only) - {s.name for s in specs})
        if unknown:
            raise InputError(f"{what}: no model named {', '.join(unknown)} among the models given")
        specs = [s for s in specs if s.name in only]
    return specs


__all__ = ["resolve_models", "select_models"]
