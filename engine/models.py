"""Models under test: the protocol every adapter meets, the spec a registry file holds,
and the registry that maps a spec's ``family`` to the adapter that loads it.

A registry file (``zoo.yaml``, ``--models``) is YAML ``{models: [ModelSpec, ...]}``.
Adapters live in ``actors/models/`` (they hold weights) and register themselves with
``@register_family("name")``; ``load_model(spec)`` returns a ready ``ModelUnderTest``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.errors import ConfigError, InputError


@runtime_checkable
class ModelUnderTest(Protocol):
    """A classifier the benchmark can test.

    ``labels`` is the label map: column j of ``predict_proba`` is the probability of
    ``labels[j]`` (label names match the suites' ``expected_label``, e.g. "negative",
    "positive"). ``pairs`` is given for pair tasks (paraphrase, NLI), else None.
    """

    name: str
    labels: list[str]

    def predict_proba(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray: ...


class ModelSpec(BaseModel):
    """One entry of a model registry file."""

    model_config = ConfigDict(extra="forbid")

    name: str
    family: str  # registered adapter: hf, st_head, sklearn, vader, textblob, callable, ...
    path: str | None = None  # weights/joblib file/directory, hub id, or module:function
    labels: list[str] = Field(default_factory=lambda: ["negative", "positive"])
    options: dict[str, Any] = Field(default_factory=dict)  # family-specific (e.g. pooling)
    trust_remote_code: bool = False
    accuracy: float | None = None  # held-out accuracy recorded by the zoo job
    meta: dict[str, Any] = Field(default_factory=dict)  # training details, corpus, seed


class ModelRegistry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: list[ModelSpec]


Loader = Callable[[ModelSpec], ModelUnderTest]
_FAMILIES: dict[str, Loader] = {}
# Adapter modules imported on first use, so the registry knows every built-in family.
_ADAPTER_MODULES = ("actors.models",)


def register_family(name: str) -> Callable[[Loader], Loader]:
    def deco(loader: Loader) -> Loader:
        _FAMILIES[name] = loader
        return loader

    return deco


def families() -> list[str]:
    for module in _ADAPTER_MODULES:
        importlib.import_module(module)
    return sorted(_FAMILIES)


def load_model(spec: ModelSpec) -> ModelUnderTest:
    """Load a model under test; unknown family or missing file is a one-line error."""
    known = families()
    if spec.family not in known:
        raise InputError(f"model '{spec.name}': unknown family '{spec.family}' (have: {', '.join(known)})")
    return _FAMILIES[spec.family](spec)


def read_registry(path: str | Path) -> list[ModelSpec]:
    """Model specs from a registry YAML; relative model paths resolve against its folder."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: model registry not found")
    from engine.config import read_yaml

    try:
        reg = ModelRegistry.model_validate(read_yaml(p) or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(map(str, err["loc"]))
        raise ConfigError(f"{p}: {loc}: {'unknown field' if err['type'] == 'extra_forbidden' else err['msg']}") from None
    if not reg.models:
        raise InputError(f"{p}: model registry lists no models")
    out = []
    for spec in reg.models:
        if spec.path and not Path(spec.path).is_absolute() and (p.parent / spec.path).exists():
            spec = spec.model_copy(update={"path": str((p.parent / spec.path).resolve())})
        out.append(spec)
    return out


def write_registry(path: str | Path, specs: Sequence[ModelSpec]) -> None:
    """Write a registry YAML atomically."""
    import os
    import tempfile

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump({"models": [s.model_dump(mode="json", exclude_defaults=False) for s in specs]},
                          sort_keys=False, allow_unicode=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, p)
