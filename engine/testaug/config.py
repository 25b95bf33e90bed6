"""The ``testaug:`` and ``validity:`` config sections (Yang et al., TestAug): what the
testaug job generates, filters, expands and measures (``TestAugConfig``, with
``PatchConfig`` for Table 3), and how ``checkray validity train`` trains its classifier
(``ValidityConfig``)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from checkray.engine.config import NOT_FINGERPRINTED, JobSection, Section, repo_path
from checkray.engine.llm import GenerationParams
from checkray.engine.lm_fluency import LMFluencyCheck
from checkray.engine.testaug.validity import VALIDITY_BACKENDS
from checkray.engine.training import FineTuneConfig

# The testaug expansion's fluency limit, set on expansion cases people read (docs/testaug.md).
EXPANSION_MAX_DROP = 6.0
# Expansion fields the validity stage's fingerprint leaves out: it never reads them, and
# runs made before they existed keep their LLM labeler's checkpoint.
LATER_EXPANSION_FIELDS = ("expansion_fluency", "expansion_draws")


class PatchConfig(Section):
    enabled: bool = True
    models: list[str] | None = None  # None: every trainable model (sklearn, st_head families)
    seeds: list[int] = Field(default_factory=lambda: [11, 14, 25, 42, 74])  # the paper's five
    test_fraction: float = Field(default=0.3, gt=0, lt=1)  # share of the merged suites held out
    # Which common-test cases score a model: "trainable", those whose label it can produce
    # (a binary model learns nothing from neutral cases, and patching it with polar ones
    # makes it surer, so its neutral-band failures grow whichever suite patched it);
    # "all", every case, neutral ones by the benchmark's band rule.
    test_cases: Literal["trainable", "all"] = "trainable"


class TestAugConfig(JobSection):
    key: ClassVar[str] = "testaug"

    spec: str | None = None  # capability spec (template JSONL/YAML): descriptions, seeds, pools
    suite: str = "testaug"
    task: Literal["sentiment", "paraphrase", "nli"] = "sentiment"  # sets the validity threshold
    label_map: dict[str, str] | None = None  # as templates.label_map
    descriptions: list[str] | None = None  # keep these (key d01.., capability or description text)
    max_descriptions: int | None = Field(default=None, ge=1)
    seeds_per_template: int = Field(default=10, ge=1)
    demonstrations: int = Field(default=3, ge=1)  # seed cases shown per prompt (the paper: 3)
    prompts_per_description: int = Field(default=4, ge=1)
    # Top-up (the topup stage): a description with fewer kept cases than min_kept
    # after the validity filter gets more prompts, one per round, up to
    # max_prompts_per_description in all (None: 4 x prompts_per_description). 0: off.
    min_kept: int = Field(default=0, ge=0)
    max_prompts_per_description: int | None = Field(default=None, ge=1)
    cases_per_prompt: int = Field(default=5, ge=1)
    # A generated case whose normalized words overlap a seed's this much (Jaccard) is a
    # near-copy and rejected (rejected.parquet); short template sentences differ by a word.
    near_copy_overlap: float = Field(default=0.9, gt=0, le=1)
    generation: GenerationParams = GenerationParams(temperature=0.9, max_tokens=200)
    validity: str | None = None  # classifier directory (`checkray validity train`)
    annotations: str | None = None  # people's validity annotations of generated cases (JSONL)
    first_sample: int = Field(default=30, ge=1)  # phase-1 sample per description
    threshold: float | None = Field(default=None, gt=0, le=1)  # None: 0.9 / 0.9 / 0.8 by task
    llm_labeler: bool = True  # judge cases with the LLM when nobody annotated them
    # Seed cases of the description shown to the LLM labeler as valid examples (0: none).
    labeler_examples: int = Field(default=0, ge=0)
    label_generation: GenerationParams = GenerationParams(temperature=0.0, max_tokens=8)
    expansion_match: Literal["filling", "pool"] = "filling"  # §4.3 text / Table 12 behaviour
    expansion_per_template: int = Field(default=5, ge=1)  # cases kept from each new template
    # A drawn expansion case whose text loses more than max_drop nats of LM log-probability
    # against the case its template came from is refused (a pool word that does not fit the
    # sentence: "The restaurant is not a fast airline."); null turns the check off.
    expansion_fluency: LMFluencyCheck | None = LMFluencyCheck(max_drop=EXPANSION_MAX_DROP)
    # Cases drawn from each new template, of which the first expansion_per_template that
    # pass every check are kept (null: 3 x expansion_per_template with the fluency check,
    # else expansion_per_template), so refusals cost little yield.
    expansion_draws: int | None = Field(default=None, ge=1)
    max_expansion_per_description: int = Field(default=200, ge=0)
    spacy: str = "builtin:sm"
    baseline_nsamples: int = Field(default=100, ge=1)  # template-only suite, cases per template
    diversity_per_description: int = Field(default=100, ge=2)  # Table 5 sample (the paper: 100)
    # Registry / zoo recipe for failure rates and Table 3. The stages that use models
    # fingerprint the resolved models themselves, so naming them never re-asks the LLM.
    models: str | None = Field(default=None, json_schema_extra=NOT_FINGERPRINTED)
    patch: PatchConfig = PatchConfig()

    def expansion_candidates(self) -> int:
        """Cases drawn from each new template (``expansion_draws``)."""
        if self.expansion_draws is not None:
            return self.expansion_draws
        return self.expansion_per_template * (3 if self.expansion_fluency else 1)

    @field_validator("spec")
    @classmethod
    def _found_from_anywhere(cls, value: str | None) -> str | None:  # configs/... from any directory
        return repo_path(value) if value and "://" not in value else value

    @model_validator(mode="after")
    def _budget(self) -> TestAugConfig:
        if (
            self.max_prompts_per_description is not None
            and self.max_prompts_per_description < self.prompts_per_description
        ):
            raise ValueError(
                f"max_prompts_per_description ({self.max_prompts_per_description}) is below "
                f"prompts_per_description ({self.prompts_per_description})"
            )
        return self

    @field_validator("label_map", mode="before")
    @classmethod
    def _int_keys(cls, value: Any) -> Any:
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value


# The encoder each backend scores best with on TestAug's annotations (docs/testaug.md,
# Measured): a frozen mpnet under a logistic head is worse than MiniLM (0.713 vs 0.815),
# while mpnet fine-tuned end to end is the best classifier measured (0.889 over five splits).
DEFAULT_VALIDITY_ENCODER: dict[str, str] = {b.name: b.default_encoder for b in VALIDITY_BACKENDS.records()}


class ValidityConfig(JobSection):
    key: ClassVar[str] = "validity"

    # TestAug's classifier is a fine-tuned encoder (§4.2): the default, minutes on CPU;
    # embedding_lr is the seconds-long, less accurate choice.
    backend: str = "finetune"  # a name in VALIDITY_BACKENDS (engine/testaug/validity.py)
    encoder: str | None = None  # None: the backend's default (DEFAULT_VALIDITY_ENCODER)
    seed: int = 42  # the paper fixes the fine-tuning seed to 42
    class_weight: Literal["balanced", "none"] = "balanced"  # fine-tune: the minority class oversampled
    calibrate: bool = False  # threshold of best accuracy on 20 % of the training cases, not 0.5
    ensemble: int = Field(default=1, ge=1)  # finetune: members of seeds seed..seed+n-1, P(valid) averaged
    # The paper (Table 8): lr 5e-6, batch 16, 10 epochs, length 128, for roberta-base on a GPU.
    # mpnet on CPU: 4 epochs at 3e-5 scored best of the settings measured (docs/testaug.md),
    # with random batches: grouping by length would also put the oversampled copies of a
    # minority case in one batch.
    finetune: FineTuneConfig = FineTuneConfig(
        train_size=None, epochs=4, max_length=64, batch_size=16, learning_rate=3e-5, group_by_length=False
    )

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value not in VALIDITY_BACKENDS:
            raise ValueError(f"Input should be one of: {', '.join(VALIDITY_BACKENDS.names())} (got {value!r})")
        return value

    @model_validator(mode="before")
    @classmethod
    def _backend_encoder(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("encoder") is None:
            backend = value.get("backend") or cls.model_fields["backend"].default
            value = {**value, "encoder": DEFAULT_VALIDITY_ENCODER.get(backend)}
        return value
