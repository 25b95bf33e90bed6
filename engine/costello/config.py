"""COSTELLO's config types: the ``costello:`` and ``repair:`` sections, the matching pairs
(CR4), one embedding model under test (``EmbedderSpec``, an entry of the embedders file),
the repair's training settings and the mutation actors' settings. Actors take these typed
objects (they pickle through Ray) rather than their fields one by one."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from checkray.engine.config import NOT_FINGERPRINTED, Backend, JobSection, Section
from checkray.engine.costello.embedder_kinds import EMBEDDER_KINDS
from checkray.engine.costello.fluency import FluencyCheck

Distance = Literal["l1", "l2", "cos"]
ThresholdName = Literal["zero", "min", "mu-2sigma", "mu-sigma"]


class PairsConfig(Section):
    path: str | list[str]  # semantic-matching pairs (CR4): parquet/csv/json(l), one file or several
    text_column: str = "text"
    pair_column: str = "text_pair"
    # A pair stored as one text (MRPC's "a [SEP] b"): split at this separator when the
    # pair column is absent.
    separator: str | None = None
    label_column: str | None = None
    keep_label: str | None = None  # only pairs with this label (MRPC: "1", paraphrases)
    limit: int | None = Field(default=None, ge=1)

    def paths(self) -> list[str]:
        return [self.path] if isinstance(self.path, str) else list(self.path)


class CostelloConfig(JobSection):
    key: ClassVar[str] = "costello"

    embedders: str = "configs/costello/embedders.yaml"
    # More corpus files read like corpus.path (same columns and label map) and appended to
    # it: SST-2's train and test files are one corpus for the paper's setting.
    more_corpora: list[str] = Field(default_factory=list)
    # Semantic-inversion reference table (CR3): JSON lines {sentence, reversed}, or a
    # released-triples JSON whose CR3 relation gives (seed, farther) pairs. None: no CR3.
    inversions: str | None = "configs/costello/inversions.jsonl"
    # The table's sentences are seeds too, even when the corpus lacks them (the paper's CR3
    # seeds are the IMDB contrast-set reviews, not SST sentences).
    inversion_seeds: bool = False
    # "text": each table entry is one inversion, as written (the paper's whole IMDB reviews).
    # "sentence": the entries cut into the single sentences their edit changed, each kept
    # only as one clean inversion (engine/costello/contrast_sentences.py); the sentence as
    # written is the seed, the edit the farther sentence.
    inversion_unit: Literal["text", "sentence"] = "text"
    # With "sentence": Link Grammar must link every word of the sentence as written and of
    # its edit (engine/lang/link_grammar.py; Debian's python3-link-grammar). It refuses the
    # reviewers' slips that are real words ("This must me one of the worst").
    inversion_grammar: bool = False
    # CR1 and CR2: Link Grammar must link every word of each seed sentence as written, so
    # a seed with a writer's slip (user reviews: "He makes great job expressing", "Strange
    # things happens") makes no triple. Off by default: it also refuses about a quarter of
    # the clean sentences people read on IMDB reviews (docs/costello.md).
    seed_grammar: bool = False
    # CR3's positive: "word" (one polarity-guarded synonym, as CR1) or "dense" (the
    # authors' code: every notional word swapped for a random WordNet synonym w.p. 0.5).
    cr3_synonym: Literal["word", "dense"] = "word"
    gender_pairs: str | None = "configs/costello/gender_pairs.tsv"  # extra gendered word pairs
    pairs: PairsConfig | None = None  # None: no CR4
    # Given suites scored with the generated one (no mutation step): released-triples JSON
    # or suite Parquet files (engine/costello/released.py). ``generate: false`` scores only them.
    triples: list[str] = Field(default_factory=list)
    generate: bool = True
    suite: str = "costello"
    seeds: int = Field(default=1000, ge=1)  # seed sentences (inversion-table hits first)
    pipeline: str = "builtin:sm"  # spaCy pipeline for POS tags and lemmas
    polarity_guard: bool = True
    # Substitutions and gender swaps checked in context (engine/costello/checked.py): sense,
    # common word, fixed expression, name/title, n-gram fit, profanity; rejected candidates
    # are published in rejected.parquet. False: the plain first-WordNet-lemma operators.
    context_checks: bool = True
    # Where the checked synonyms and antonyms of a sentiment word come from: "table+wordnet"
    # (the curated table, engine/data/costello_substitutes.yaml, and WordNet's frequent
    # senses for a word it does not list) or "table" (only words the table lists; any other
    # polar word is rejected as `sense`). Read at size, WordNet's candidates for unlisted
    # words were in the sentence's sense far less often than the table's (docs/costello.md).
    substitutes: Literal["table", "table+wordnet"] = "table+wordnet"
    # Substitutions scored in their sentence by a causal LM (engine/costello/fluency.py):
    # a variant whose sentence loses more than max_drop nats against its seed is rejected.
    # None: no LM check.
    fluency: FluencyCheck | None = None
    per_seed: int = Field(default=1, ge=1)  # triples per CR per seed
    # Threshold dictionary: each model's own vocabulary (the paper's default: a tokenizer's
    # every entry but its special tokens, or a spaCy model's vector rows) or words of the
    # corpus (the paper's "SST dictionary" rows of Table 2).
    dictionary: Literal["tokenizer", "corpus"] = "tokenizer"
    # "all": every vocabulary entry as the authors' code embeds it (word pieces included);
    # "words": whole alphabetic words only.
    dictionary_tokens: Literal["all", "words"] = "all"
    # None: the WHOLE dictionary. A number samples that many entries (seeded), a speed
    # option with a known bias: nearest neighbours in a sparse sample are farther apart
    # than in the whole dictionary, so mu, theta = mu - 2 sigma and min come out inflated
    # and fewer triples are reported as violations.
    dictionary_size: int | None = Field(default=None, ge=10)
    classifiers: int = Field(default=14, ge=5)  # Wilcoxon needs >= 5 pairs for p < 0.05
    # Labeled corpus sentences per model's MLPs (non-seed sentences first, then seeds).
    classifier_train: int = Field(default=2000, ge=10)
    classifier_max_iter: int = Field(default=200, ge=10)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    distance: Distance = "l2"  # the default verdict (paper: L2, mu-2sigma)
    threshold: ThresholdName = "mu-2sigma"
    backend: Backend = "auto"
    batch_size: int = Field(default=128, ge=1, json_schema_extra=NOT_FINGERPRINTED)  # texts per Ray Data batch
    seed: int | None = None  # None: the top-level seed

    @model_validator(mode="after")
    def _grammar_checks_sentences(self) -> CostelloConfig:
        if self.inversion_grammar and self.inversion_unit != "sentence":
            raise ValueError("inversion_grammar checks single sentences: it needs inversion_unit: sentence")
        return self


class RepairSettings(Section):
    """How the repair trains (§5.4; the paper's defaults)."""

    alpha: float = Field(default=0.5, ge=0.0, le=1.0)
    learning_rate: float = Field(default=1e-4, gt=0)
    epochs: int = Field(default=8, ge=1)
    batch_size: int = Field(default=16, ge=2)  # triples per batch: half violated, half benign
    margin: float = Field(default=1.0, gt=0)  # TripletMarginLoss margin (torch default)
    max_triples: int | None = Field(default=None, ge=1)  # cap on triples of each kind per epoch
    seed: int = 0


class RepairConfig(JobSection, RepairSettings):
    key: ClassVar[str] = "repair"

    model: str | None = None  # embedder to repair in the demo; "most-violated" picks it
    suite: str | None = None  # suite trained on and re-tested; None: the run's generated suite
    # The verdict whose violations are repaired; None: the costello run's default.
    distance: Distance | None = None
    threshold: ThresholdName | None = None
    backend: str = Field(default="auto", pattern="^(auto|cpu|gpu)$")

    def settings(self) -> RepairSettings:
        """The training settings alone (what the repair actor reads)."""
        return RepairSettings.model_validate(self.model_dump(include=set(RepairSettings.model_fields)))


class EmbedderSpec(Section):
    """One embedding model under test. ``kind`` names an ``EMBEDDER_KINDS`` record."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: str = "sentence-transformers"
    model: str  # builtin:minilm, a local path, a hub id, zoo:<name>, or a spaCy pipeline
    pooling: Literal["model", "mean", "cls"] = "model"
    max_length: int = Field(default=128, ge=8)
    encode_batch_size: int = Field(default=64, ge=1)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in EMBEDDER_KINDS:
            raise ValueError(f"unknown embedder kind '{value}' (have: {', '.join(EMBEDDER_KINDS.names())})")
        return value


class MutationSettings(Section):
    """What a mutation actor applies to each seed (file paths already resolved)."""

    pipeline: str = "builtin:sm"  # spaCy pipeline for POS tags and lemmas
    inversions: str | None = None  # the semantic-inversion table (CR3)
    inversion_unit: Literal["text", "sentence"] = "text"  # CostelloConfig.inversion_unit
    inversion_grammar: bool = False  # CostelloConfig.inversion_grammar
    seed_grammar: bool = False  # CostelloConfig.seed_grammar
    polarity_guard: bool = True
    per_word: int = Field(default=1, ge=1)  # synonyms / antonyms kept per word
    context_checks: bool = True  # checked operators (engine/costello/checked.py)
    substitutes: Literal["table", "table+wordnet"] = "table+wordnet"  # CostelloConfig.substitutes
    gender_pairs: str | None = None  # extra gendered word pairs
    dense_seed: int | None = None  # the authors' dense synonym substitution (CR3's positive), seeded
