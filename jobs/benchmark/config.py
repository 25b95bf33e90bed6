"""Config section(s) of the job: BenchmarkConfig."""

from __future__ import annotations

from typing import ClassVar, Optional

from pydantic import Field, field_validator

from checkray.engine.benchmark.expectations import (
    ExpectationSettings,
)
from checkray.engine.config import (
    NOT_FINGERPRINTED,
    Backend,
    JobSection,
)


class BenchmarkConfig(JobSection):
    key: ClassVar[str] = "benchmark"

    models: Optional[str] = None  # model registry (zoo.yaml) or zoo recipe config
    suites: list[str] = Field(default_factory=list)  # suite Parquet files
    # A named suite that people reviewed (``checkray review apply``) is read reviewed;
    # False (--as-generated): as its generator wrote it.
    reviewed: bool = True
    batch_size: int = Field(default=256, ge=1, json_schema_extra=NOT_FINGERPRINTED)  # texts per predict call
    in_flight: int = Field(default=2, ge=1, json_schema_extra=NOT_FINGERPRINTED)  # batches queued per host
    max_concurrent_models: Optional[int] = Field(default=None, ge=1, json_schema_extra=NOT_FINGERPRINTED)
    # hosts alive at once (None: all). Cheap models share hosts (None: about one host per
    # CPU per group of models on the same inputs); heavy ones (hf, llm_zero_shot) get their own.
    models_per_host: Optional[int] = Field(default=None, ge=1, json_schema_extra=NOT_FINGERPRINTED)
    load_timeout_s: float = Field(default=900.0, gt=0, json_schema_extra=NOT_FINGERPRINTED)
    batch_timeout_s: float = Field(default=600.0, gt=0, json_schema_extra=NOT_FINGERPRINTED)
    # Sample at most this many cases per model (whole CheckList test cases, spread over every
    # test in proportion): for slow models such as llm_zero_shot. A model's own
    # ``max_cases`` in the registry overrides it. None: every case.
    max_cases_per_model: Optional[int] = Field(default=None, ge=1)
    sample_seed: int = 0
    backend: Backend = "auto"
    gpu_fraction: Optional[float] = Field(default=None, gt=0, le=1)  # None: GPUs shared evenly
    dedup_texts: bool = True  # score each distinct (text, text_pair) once per model
    share_encoders: bool = True  # st_head models on one encoder read embeddings computed once
    # At most this many (model, input) predictions, every model of a family that runs no user
    # code (sklearn, st_head, hf up to 512 MB, vader, textblob), no GPU, and a driver on a
    # node with CPUs (not a cluster's head): the models predict in the driver. A host process
    # costs 10-30 s of start-up and imports on 2 cores, more than such work takes; 0 gives
    # every model its process (crash isolation, timeouts).
    in_process_below: int = Field(default=10_000, ge=0, json_schema_extra=NOT_FINGERPRINTED)
    neutral_label: str = "neutral"
    positive_label: str = "positive"
    negative_label: str = "negative"
    neutral_band: tuple[float, float] = (1 / 3, 2 / 3)  # CheckList: binary P(positive) in it -> neutral
    dir_tolerance: float = Field(default=0.1, ge=0, le=1)  # CheckList suites' monotonic tolerance
    examples: int = Field(default=3, ge=0)  # example failures per model x test in the report

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
