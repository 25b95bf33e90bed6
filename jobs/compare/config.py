"""Config section of ``checkray compare``: CompareConfig."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from checkray.engine.config import JobSection


class CompareConfig(JobSection):
    key: ClassVar[str] = "compare"

    bootstrap: int = Field(default=2000, ge=0)  # paired bootstrap resamples (0: no interval)
    confidence: float = Field(default=0.95, gt=0, lt=1)  # level of the bootstrap interval
    seed: int = 0  # the bootstrap's seed (each group draws from (seed, group name))
    alpha: float = Field(default=0.05, gt=0, lt=1)  # "significant" in the report and console
    examples: int = Field(default=5, ge=0)  # flipped cases shown per capability and direction
