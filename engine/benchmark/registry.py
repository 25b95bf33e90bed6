"""Models under test: the protocol every adapter meets, the spec a registry file holds,
and reading/writing registry files.

A registry file (``zoo.yaml``, ``--models``) is YAML ``{models: [ModelSpec, ...]}``.
The adapters that load a spec by its ``family`` hold weights, so they are actors: the
family table and ``load_model(spec)`` are in ``actors/models/__init__.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import yaml
from pydantic import ConfigDict, Field, ValidationError

from checkray.engine.errors import ConfigError, InputError
from checkray.engine.strict import StrictInput


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


@runtime_checkable
class AnsweringModel(Protocol):
    """A question-answering model the benchmark can test (families with the ``answers`` trait).

    ``answer(contexts, questions)`` returns one answer string per question (None: it gave
    none). It has no label map: ``labels`` is empty, which is how the benchmark's hosts and
    checkpoints tell answers from probabilities.
    """

    name: str
    labels: list[str]

    def answer(self, contexts: Sequence[str], questions: Sequence[str]) -> list[str | None]: ...


class ModelSpec(StrictInput):
    """One entry of a model registry file."""

    model_config = ConfigDict(extra="forbid")

    name: str
    family: str  # registered adapter: hf, st_head, sklearn, vader, textblob, callable, ...
    path: str | None = None  # weights/joblib file/directory, hub id, or module:function
    labels: list[str] = Field(default_factory=lambda: ["negative", "positive"])
    options: dict[str, Any] = Field(default_factory=dict)  # family-specific (e.g. pooling)
    trust_remote_code: bool = False
    accuracy: float | None = None  # held-out accuracy recorded by the zoo job
    max_cases: int | None = Field(default=None, ge=1)  # sample the suites for a slow model
    meta: dict[str, Any] = Field(default_factory=dict)  # training details, corpus, seed


class ModelRegistry(StrictInput):
    model_config = ConfigDict(extra="forbid")

    models: list[ModelSpec]


def read_registry(path: str | Path) -> list[ModelSpec]:
    """Model specs from a registry YAML; relative model paths resolve against its folder."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: model registry not found")
    from checkray.engine.config import read_yaml

    try:
        reg = ModelRegistry.model_validate(read_yaml(p) or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(map(str, err["loc"]))
        raise ConfigError(
            f"{p}: {loc}: {'unknown field' if err['type'] == 'extra_forbidden' else err['msg']}"
        ) from None
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
    text = yaml.safe_dump(
        {"models": [s.model_dump(mode="json", exclude_defaults=False) for s in specs]},
        sort_keys=False,
        allow_unicode=True,
    )
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, p)
