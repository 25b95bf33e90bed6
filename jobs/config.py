"""The whole config file: shared sections plus one section per job.

One YAML file configures every job (``configs/demo.yaml``). Which top-level sections
exist comes from the job registry (``jobs/registry.py``), which imports a section's
class only when the file uses it, so ``load_config("configs/demo.yaml")`` needs no CLI.
``cfg.section(TestAugConfig)`` returns that type, validated, with defaults when absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ConfigDict, model_validator

from checkray.engine.config import (
    CorpusConfig,
    JobSection,
    RuntimeConfig,
    Section,
    read_yaml,
    set_dotted,
    validate_section,
)
from checkray.engine.errors import ConfigError
from checkray.jobs.registry import SECTIONS

S = TypeVar("S", bound=JobSection)


class CheckrayConfig(Section):
    """The whole file. Jobs read their section plus the shared ones."""

    # Job sections (topics, zoo, benchmark, mft, ...) are listed in jobs/registry.py;
    # an unknown top-level key is an error naming it.
    model_config = ConfigDict(extra="allow", frozen=True)

    seed: int = 0
    out: str | None = None
    runtime: RuntimeConfig = RuntimeConfig()
    corpus: CorpusConfig = CorpusConfig()

    @model_validator(mode="after")
    def _known_sections(self) -> CheckrayConfig:
        for key in self.model_extra or {}:
            if key not in SECTIONS:
                raise ValueError(f"{key}: unknown section (have: {', '.join(SECTIONS.names())})")
        return self

    def section(self, key: str | type[S]) -> S:
        """A job's section, validated, with defaults when absent: ``cfg.section(MFTConfig)``
        (typed) or ``cfg.section("mft")``."""
        name = key if isinstance(key, str) else key.key
        model = SECTIONS.get(name)
        if not isinstance(key, str) and model is not key:
            raise TypeError(f"section '{name}' is {model.__name__}, not {key.__name__}")
        raw = (self.model_extra or {}).get(name) or {}
        return raw if isinstance(raw, model) else validate_section(model, raw, prefix=name)

    def with_section(self, section: JobSection) -> CheckrayConfig:
        """A copy with one section replaced (``section.key`` says which)."""
        data = self.model_dump(mode="python")
        data[section.key] = section.model_dump(mode="python")
        return type(self).model_validate(data)


def load_config(path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> CheckrayConfig:
    """Read YAML (or nothing: all defaults), apply ``overrides`` (dotted keys), validate."""
    data: dict[str, Any] = {}
    source = str(path) if path else "defaults"
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"{p}: config file not found")
        loaded = read_yaml(p)
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: top level must be a mapping, got {type(loaded).__name__}")
        data = loaded
    for key, value in (overrides or {}).items():
        if value is not None:
            set_dotted(data, key, value)
    cfg = validate_section(CheckrayConfig, data, source=source)
    for name in cfg.model_extra or {}:  # validate every section the file has, eagerly
        try:
            cfg.section(name)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    return cfg
