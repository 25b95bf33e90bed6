"""Config section(s) of the job: PairsConfig, CostelloConfig, RepairConfig."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from actors.costello.repair import RepairSettings
from engine.config import NOT_FINGERPRINTED, Backend, JobSection, Section


class PairsConfig(Section):
    path: str  # semantic-matching pairs (CR4): parquet/csv/jsonl
    text_column: str = "text"
    pair_column: str = "text_pair"
    limit: int | None = Field(default=None, ge=1)


class CostelloConfig(JobSection):
    key: ClassVar[str] = "costello"

    embedders: str = "configs/costello/embedders.yaml"
    inversions: str | None = "configs/costello/inversions.jsonl"  # None: no CR3
    pairs: PairsConfig | None = None  # None: no CR4
    suite: str = "costello"
    seeds: int = Field(default=1000, ge=1)  # seed sentences (inversion-table hits first)
    pipeline: str = "builtin:sm"  # spaCy pipeline for POS tags and lemmas
    polarity_guard: bool = True
    per_seed: int = Field(default=1, ge=1)  # triples per CR per seed
    # Threshold dictionary: each model's tokenizer vocabulary (whole words; the paper's
    # default) or words of the corpus (the paper's "SST dictionary"); spaCy vectors have no
    # tokenizer vocabulary and always use corpus words.
    dictionary: Literal["tokenizer", "corpus"] = "tokenizer"
    dictionary_size: int = Field(default=2000, ge=10)  # words sampled (seeded)
    classifiers: int = Field(default=14, ge=5)  # Wilcoxon needs >= 5 pairs for p < 0.05
    classifier_train: int = Field(default=2000, ge=10)  # corpus sentences per model's MLPs
    classifier_max_iter: int = Field(default=200, ge=10)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    distance: Literal["l1", "l2", "cos"] = "l2"  # the default verdict (paper: L2, mu-2sigma)
    threshold: Literal["zero", "min", "mu-2sigma", "mu-sigma"] = "mu-2sigma"
    backend: Backend = "auto"
    batch_size: int = Field(default=128, ge=1, json_schema_extra=NOT_FINGERPRINTED)  # texts per Ray Data batch
    seed: int | None = None  # None: the top-level seed


class RepairConfig(JobSection, RepairSettings):
    key: ClassVar[str] = "repair"

    model: str | None = None  # embedder to repair in the demo; "most-violated" picks it
    # The verdict whose violations are repaired; None: the costello run's default.
    distance: Literal["l1", "l2", "cos"] | None = None
    threshold: Literal["zero", "min", "mu-2sigma", "mu-sigma"] | None = None
    backend: str = Field(default="auto", pattern="^(auto|cpu|gpu)$")
