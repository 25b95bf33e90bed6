"""Config section(s) of the job: BenchmarkConfig."""

from __future__ import annotations

from typing import ClassVar, Optional

from pydantic import Field, field_validator

from engine.benchmark.expectations import (
    ExpectationSettings,
)
from engine.config import (
    Backend,
    JobSection,
)


class BenchmarkConfig(JobSection):
    key: ClassVar[str] = "benchmark"

    models: Optional[str] = None  # model registry (zoo.yaml) or zoo recipe config
    suites: list[str] = Field(default_factory=list)  # suite Parquet files
    batch_size: int = Field(default=256, ge=1)  # texts per predict call sent to an actor
    in_flight: int = Field(default=2, ge=1)  # batches queued per actor, so none idles
    max_concurrent_models: Optional[int] = Field(default=None, ge=1)  # None: every model at once
    backend: Backend = "auto"
    gpu_fraction: Optional[float] = Field(default=None, gt=0, le=1)  # None: GPUs shared evenly
    dedup_texts: bool = True  # score each distinct (text, text_pair) once per model
    share_encoders: bool = True  # st_head models on one encoder read embeddings computed once
    neutral_label: str = "neutral"
    positive_label: str = "positive"
    negative_label: str = "negative"
    neutral_band: tuple[float, float] = (1 / 3, 2 / 3)  # CheckList: binary P(positive) in it -> neutral
    dir_tolerance: float = Field(default=0.1, ge=0, le=1)  # CheckList suites' monotonic tolerance
    examples: int = Field(default=3, ge=0)  # example failures per model x capability in the report

    @field_validator("neutral_band")
    @classmethod
    def _band(cls, band: tuple[float, float]) -> tuple[float, float]:
        lo, hi = band
        if not 0 <= lo <= hi <= 1:
            raise ValueError("must be [low, high] with 0 <= low <= high <= 1")
        return band

    def settings(self) -> ExpectationSettings:
        return ExpectationSettings(
            self.neutral_label, self.positive_label, self.negative_label, tuple(self.neutral_band), self.dir_tolerance
        )
