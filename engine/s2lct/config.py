"""The ``s2lct:`` config section (``S2lctConfig``) and its sub-sections; the mask filler's
resolved backend and name (read by the job, its stages and its report)."""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field, field_validator

from checkray.engine.config import NOT_FINGERPRINTED, JobSection, Section
from checkray.engine.s2lct.fillers import FILLERS


class ReferenceSource(Section):
    path: str  # corpus file or builtin:<name>
    text_column: str = "text"
    sample: Optional[int] = Field(default=None, ge=1)  # documents drawn at random (seeded)


class FillerConfig(Section):
    backend: str = "auto"  # a name in engine/s2lct/fillers.FILLERS; auto: hf when hf_model is set, else offline
    hf_model: Optional[str] = None  # a fill-mask (MLM) model: local path or hub id
    pipeline: str = "builtin:md"  # spaCy pipeline with word vectors; also tags the fills
    vocabulary_per_tag: int = Field(default=200, ge=1)  # candidate words per Penn tag
    vocabulary_min_count: int = Field(default=2, ge=1)
    # best-ranked fills validated per masked sentence (most fail the context check, which costs a lookup)
    candidates: int = Field(default=30, ge=1)
    keep: int = Field(default=2, ge=1)  # valid fills kept per masked sentence
    window: int = Field(default=3, ge=1)  # context words on each side of a mask (vector score)
    vector_weight: float = Field(default=1.0, ge=0)  # offline score = bigram log-prob + weight x cosine
    min_score: Optional[float] = -14.0  # offline: fills scored lower are dropped as implausible (None: keep all)
    # The filled word must form bigrams seen at least ngram_min_count times in the
    # reference text with both neighbours ("gives see a", "central main character" are not).
    ngram_check: bool = True
    ngram_min_count: int = Field(default=1, ge=1)
    # The fill must only restrict what its noun refers to (engine/s2lct/mask_fill.modifier_reason):
    # a classifying adjective, no lexicalised compound, the (fill, noun) pair attested
    # compound_min_count times, no fixed expression split.
    modifier_check: bool = True
    compound_min_count: int = Field(default=2, ge=1)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value != "auto" and value not in FILLERS:
            raise ValueError(f"Input should be one of: auto, {', '.join(FILLERS.names())} (got {value!r})")
        return value


class CoverageConfig(Section):
    enabled: bool = True
    models: Optional[list[str]] = None  # None: every zoo model whose family exposes neurons (hf, torch)
    train_sample: Optional[int] = Field(default=1000, ge=10)  # training sentences that set the bounds (None: all)
    max_cases: int = Field(default=500, ge=1)  # cases per suite (same number for both suites)
    points: int = Field(default=4, ge=1)  # suite sizes on the coverage curve
    templates: str = "configs/suites/sentiment_templates.jsonl"  # the CheckList suite compared
    # What one output of a unit is for a sentence (docs/s2lct.md): its mean over the
    # tokens, or every token's value (a sentence reaches the unit's max/min over its tokens).
    neurons: list[Literal["mean", "token"]] = Field(default_factory=lambda: ["mean", "token"], min_length=1)


class ExplainConfig(Section):
    failures: int = Field(default=3, ge=0)  # failures explained per model
    models: Optional[list[str]] = None  # None: the coverage models, else the first zoo model
    p_thresh: float = Field(default=0.5, gt=0, le=1)
    mask_token: str = ""  # "" deletes masked tokens


class ConsistencyConfig(Section):
    """Label consistency (the paper's RQ1) checked by an offline judge: docs/s2lct.md."""

    enabled: bool = True
    per_capability: int = Field(default=10, ge=1)  # cases sampled per capability (half seeds, half expansions)
    judge: Optional[str] = None  # a model of the registry; None: the strongest not trained on the searched sentences
    max_overlap: float = Field(default=0.05, ge=0, le=1)  # share of the seeds' sentences a judge may have trained on


class LabelCheckConfig(Section):
    """Seeds whose sentence a cross-fitted classifier does not give its corpus label
    (``engine/s2lct/confidence.py``): the encoder of the sentence embeddings (None: no
    such check) and the probability a polar seed's sentence needs."""

    encoder: Optional[str] = "builtin:mpnet"
    min_confidence: float = Field(default=0.8, ge=0, le=1)
    folds: int = Field(default=5, ge=2)


class S2lctConfig(JobSection):
    key: ClassVar[str] = "s2lct"

    capabilities: list[str] = Field(default_factory=list)  # spec files/folders; empty: configs/s2lct
    search_sample: Optional[int] = Field(default=None, ge=1)  # corpus sentences searched (None: all)
    # A corpus without neutral labels (SST-2, Rotten Tomatoes) labels every sentence polar:
    # with the proxy on, a sentence no lexicon finds polar stands for neutral anyway, and
    # read by people those were not neutral ("a sudsy cautionary tale", "boisterous and
    # daft documentary"). Off: LC1/LC5 get no seeds from such a corpus, and the report says so.
    neutral_proxy: bool = False
    neutral_label: str = "neutral"
    max_seeds: int = Field(default=50, ge=1)  # per capability (the paper: 50)
    # fluent: the capabilities' fluent wrappers around checked seeds (docs/s2lct.md);
    # paper: the paper's literal templates around any found sentence, unchecked.
    wrappers: Literal["fluent", "paper"] = "fluent"
    # Labeled corpora (positive/negative) whose word use marks words as polar for the
    # neutral seeds' check, besides the searched corpus (corpus files or builtin: names).
    polarity_corpora: list[str] = Field(default_factory=lambda: ["builtin:rotten_tomatoes"])
    reference: list[ReferenceSource] = Field(
        default_factory=lambda: [ReferenceSource(path="builtin:imdb", sample=1000)]
    )
    reference_includes_corpus: bool = True  # the searched corpus's parses join the grammar
    grammar_file: Optional[str] = None  # reuse a saved grammar.parquet (the reference texts are then not parsed)
    grammar_min_count: int = Field(default=2, ge=1)  # reference productions seen fewer times are ignored
    k: int = Field(default=4, ge=1)  # masked sentences sampled per seed (Algorithm 1)
    # masked sentences drawn per one kept: most masks find no fill that passes the checks,
    # so k x mask_tries are drawn and the first k with a valid fill kept
    mask_tries: int = Field(default=10, ge=1)
    max_masks: int = Field(default=1, ge=1)  # extra symbols one expansion may insert
    # Penn tags a mask may take: nouns and adjectives. Adverbs were mostly degree words,
    # hedges or discourse markers that change the claim ("hardly", "still", "twice"),
    # proper nouns and numbers broke the phrase ("incident US that", "menace two and"),
    # plural nouns made bad compounds ("the scenes story").
    fillable_tags: list[str] = Field(default_factory=lambda: ["JJ", "NN"])
    # Extra text whose word bigrams only count for the fill's n-gram check and LM score
    # (tokenized by a regex, not parsed: cheap); [] for none.
    ngram_reference: list[ReferenceSource] = Field(
        default_factory=lambda: [
            ReferenceSource(path="builtin:imdb", sample=5000),
            ReferenceSource(path="builtin:rotten_tomatoes"),
        ]
    )
    parser: Literal["auto", "benepar", "spacy-dep2const"] = "auto"
    pipeline: str = "builtin:sm"  # spaCy pipeline of the parser actors
    # Speed only (stage fingerprints leave them out): parser/expansion actors (None: one per
    # CPU, spaCy is single-threaded) and rows per Ray Data batch.
    pool_size: Optional[int] = Field(default=None, ge=1, json_schema_extra=NOT_FINGERPRINTED)
    batch_size: int = Field(default=128, ge=1, json_schema_extra=NOT_FINGERPRINTED)
    suite: str = "s2lct"  # suites are named <suite>-<capability id>
    seed: Optional[int] = None  # None: the top-level seed
    models: Optional[str] = None  # model registry (zoo.yaml): benchmark the suite
    only_models: Optional[list[str]] = None  # benchmark only these of the given models (None: all)
    filler: FillerConfig = FillerConfig()
    coverage: CoverageConfig = CoverageConfig()
    explain: ExplainConfig = ExplainConfig()
    consistency: ConsistencyConfig = ConsistencyConfig()
    label_check: LabelCheckConfig = LabelCheckConfig()


def filler_backend(f: FillerConfig) -> str:
    """The backend that fills the masks: the configured one, or for ``auto`` ``hf`` when
    a fill-mask model is named, else ``offline``."""
    return f.backend if f.backend != "auto" else ("hf" if f.hf_model else "offline")


def filler_name(f: FillerConfig) -> str:
    """The mask filler as named in the suite's provenance and the report."""
    return FILLERS.record(filler_backend(f)).provenance.format(**f.model_dump())
