"""The ``mft:`` config section (Li et al.): what the mft job generates and how."""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field

from checkray.engine.config import NOT_FINGERPRINTED, JobSection, Section
from checkray.engine.llm import GenerationParams


class ClassifierCheckConfig(Section):
    """The label check by a classifier of the corpus (``engine/mft/checks.py``): a logistic
    regression on ``encoder`` embeddings of ``train_size`` labeled corpus sentences must
    give a case its expected label with p >= ``min_confidence``, and with
    ``lexicon_agrees`` VADER must lean the same way (positive/negative labels only)."""

    encoder: Optional[str] = "builtin:mpnet"  # None: no classifier check
    min_confidence: float = Field(default=0.9, ge=0, le=1)
    train_size: Optional[int] = Field(default=2000, ge=10)  # None: every labeled sentence
    lexicon_agrees: bool = True


class MFTConfig(JobSection):
    key: ClassVar[str] = "mft"

    splits: list[Literal["train", "test"]] = ["train", "test"]
    test_fraction: float = Field(default=0.2, gt=0.0, lt=1.0)  # same split as the zoo
    split_seed: int = 0
    versions: int = Field(default=3, ge=1)  # seeds seed+1 .. seed+versions
    representatives_per_cluster: int = Field(default=10, ge=1)
    diversity: float = Field(default=0.5, ge=0.0, le=1.0)
    paraphrases: int = Field(default=5, ge=0)
    paraphrase_limit: int | None = Field(default=None, ge=0)  # MFTs paraphrased per version
    label_check: bool = True  # the LLM's own label check (Li et al.)
    # The generated cases a classifier of the corpus does not give their label (mostly LLM
    # text with no verdict, or one the reader would not give) are rejected after the LLM's
    # check; docs/mft.md has what it buys on the cases people read.
    classifier_check: ClassifierCheckConfig = ClassifierCheckConfig()
    # Steps decoded under their prompt file's GBNF grammar (### grammar) where the backend
    # can (llama.cpp, vLLM, a server with llm.grammar_style): small models then always
    # follow the format. On llama.cpp a grammar is checked against Qwen's 151k-token
    # vocabulary at every step (measured 16 -> 3.6 tok/s), so CPU configs constrain only
    # the short label answers; vLLM's xgrammar masks cost little (configs/mft_paper.yaml).
    constrained: list[Literal["examples", "generate", "paraphrase", "label"]] = ["label"]
    near_duplicate_cosine: float = Field(default=0.92, gt=0.0, le=1.0)
    # A case whose normalized words overlap its representative's this much (Jaccard) is a
    # near-copy of a corpus sentence, not a new test, and is rejected (rejected.parquet).
    near_copy_overlap: float = Field(default=0.75, gt=0.0, le=1.0)
    mft_topics: int = Field(default=4, ge=1)
    embedder: str = "builtin:minilm"
    # corpus label -> the word the LLM answers with (Positive/Negative)
    label_words: dict[str, str] = Field(default_factory=lambda: {"positive": "positive", "negative": "negative"})
    # A repetition penalty keeps small models from looping on one sentence.
    generation: GenerationParams = GenerationParams(temperature=0.7, max_tokens=320, repetition_penalty=1.15)
    paraphrase_generation: GenerationParams = GenerationParams(temperature=0.7, max_tokens=160, repetition_penalty=1.15)
    label_generation: GenerationParams = GenerationParams(temperature=0.0, max_tokens=40)
    # Registry or zoo recipe to evaluate on the suite (Tables 7/8). Only the evaluate stage
    # reads it (the models it is given), so naming models never re-asks the LLM.
    models: str | None = Field(default=None, json_schema_extra=NOT_FINGERPRINTED)
