"""Registries of pluggable parts: records whose code is imported on first use.

Every registry in checkray is one of these: the jobs, their config sections and the
methods (``jobs/registry.py``), the model families (``engine/benchmark/families.py``),
the LLM backends and local engines (``engine/llm.py``), COSTELLO's embedder kinds and the
packaged assets (``actors/assets.py``). An entry is a **record**: a frozen dataclass with
a ``name``, a ``ref`` (``"module:attribute"``, imported only by ``get``) and whatever
traits say what the part *is* (a model family is heavy, trainable, fed by a shared
encoder ...), so code that only asks about traits imports nothing. As in RLlib's algorithm
registry, listing the names costs no import and nothing registers itself as a side effect
of being imported; as in MTEB, a name given twice is an error instead of a silent override.

Adding a part is its own module plus one registration line in its registry's table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from checkray.engine.errors import ConfigError

T = TypeVar("T")


class Record(Protocol):
    """What a registry entry has at least: its name and where its code lives."""

    @property
    def name(self) -> str: ...

    @property
    def ref(self) -> str: ...


R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class Entry:
    """A record with no traits: a name and the ``"module:attribute"`` it stands for."""

    name: str
    ref: str


class LazyRegistry(Generic[T]):
    """Names to records, and to the objects their refs name (imported on first ``get``).

    ``kind`` names the registry in error messages; ``check(name, obj)`` validates an
    object when it is first imported.
    """

    def __init__(self, kind: str, check: Callable[[str, Any], None] | None = None):
        self.kind = kind
        self._records: dict[str, Any] = {}
        self._loaded: dict[str, T] = {}
        self._check = check

    def register(self, record: R) -> R:
        """Add ``record`` (any frozen dataclass with ``name`` and ``ref``); returns it."""
        name, ref = record.name, record.ref
        if name in self._records:
            raise ValueError(f"{self.kind} '{name}' registered twice ({self._records[name].ref} and {ref})")
        module, sep, attr = ref.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"{self.kind} '{name}': '{ref}' is not of the form module:attribute")
        self._records[name] = record
        return record

    def add(self, name: str, ref: str) -> None:
        """Add a record with no traits."""
        self.register(Entry(name, ref))

    def __contains__(self, name: object) -> bool:
        return name in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def names(self) -> list[str]:
        return sorted(self._records)

    def ref(self, name: str) -> str:
        return self.record(name).ref

    def record(self, name: str) -> Any:
        """The record registered as ``name`` (nothing imported); unknown: one-line error."""
        if name not in self._records:
            raise ConfigError(f"unknown {self.kind} '{name}' (have: {', '.join(self.names())})")
        return self._records[name]

    def records(self) -> list[Any]:
        """Every record, in registration order."""
        return list(self._records.values())

    def get(self, name: str) -> T:
        """The registered object; an unknown name is a one-line error listing the known ones."""
        record = self.record(name)
        if name not in self._loaded:
            module, _, attr = record.ref.partition(":")
            obj = getattr(importlib.import_module(module), attr)
            if self._check is not None:
                self._check(name, obj)
            self._loaded[name] = obj
        return self._loaded[name]
