"""The ``templates:`` config section: the capability spec and how it is expanded."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from checkray.engine.config import JobSection, repo_path


class TemplatesConfig(JobSection):
    key: ClassVar[str] = "templates"

    spec: str | None = None  # capability spec file (.jsonl, .yaml)
    suite: str | None = None  # suite name; None: the spec file's stem
    nsamples: int = Field(default=100, ge=0)  # cases per template; 0: every combination
    seed: int | None = None  # None: the top-level seed
    # Integer label -> name. None: {0: negative, 1: positive, 2: neutral} for single
    # texts and {0: not_duplicate, 1: duplicate} (QQP) for pair templates.
    label_map: dict[str, str] | None = None
    max_combinations: int = Field(default=100_000, ge=1)  # cap on nsamples: 0

    @field_validator("spec")
    @classmethod
    def _found_from_anywhere(cls, value: str | None) -> str | None:  # configs/... from any directory
        return repo_path(value) if value and "://" not in value else value

    @field_validator("label_map", mode="before")
    @classmethod
    def _int_keys(cls, value: Any) -> Any:  # YAML reads `0: negative` with an int key
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
        return value
