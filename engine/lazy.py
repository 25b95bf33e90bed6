"""A name -> ``"module:attribute"`` table whose entries are imported on first use.

Every registry in checkray is one of these: the jobs and their config sections
(``jobs/registry.py``), the model families (``actors/models/__init__.py``) and the
packaged assets (``engine/assets.py``). As in RLlib's algorithm registry, listing the
names costs no import, and nothing registers itself as a side effect of being imported;
as in MTEB, a name given twice is an error instead of a silent override.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from checkray.engine.errors import ConfigError

T = TypeVar("T")


class LazyRegistry(Generic[T]):
    """Names to lazily imported objects; ``kind`` names the registry in error messages."""

    def __init__(self, kind: str, check: Callable[[str, Any], None] | None = None):
        self.kind = kind
        self._refs: dict[str, str] = {}
        self._loaded: dict[str, T] = {}
        self._check = check

    def add(self, name: str, ref: str) -> None:
        if name in self._refs:
            raise ValueError(f"{self.kind} '{name}' registered twice ({self._refs[name]} and {ref})")
        module, sep, attr = ref.partition(":")
        if not sep or not module or not attr:
            raise ValueError(f"{self.kind} '{name}': '{ref}' is not of the form module:attribute")
        self._refs[name] = ref

    def __contains__(self, name: object) -> bool:
        return name in self._refs

    def __iter__(self) -> Iterator[str]:
        return iter(self._refs)

    def names(self) -> list[str]:
        return sorted(self._refs)

    def ref(self, name: str) -> str:
        return self._refs[name]

    def get(self, name: str) -> T:
        """The registered object; an unknown name is a one-line error listing the known ones."""
        if name not in self._refs:
            raise ConfigError(f"unknown {self.kind} '{name}' (have: {', '.join(self.names())})")
        if name not in self._loaded:
            module, _, attr = self._refs[name].partition(":")
            obj = getattr(importlib.import_module(module), attr)
            if self._check is not None:
                self._check(name, obj)
            self._loaded[name] = obj
        return self._loaded[name]
