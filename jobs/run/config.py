"""The ``run:`` config section: what ``checkray run`` tests and with which methods."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from checkray.engine.config import JobSection

# The suite-generating methods ``checkray run`` knows, in the order their suites are
# merged: the hand-written templates first, so a generated duplicate of a template case
# is the one dropped.
METHOD_ORDER: tuple[str, ...] = ("templates", "mft", "s2lct", "testaug", "costello")


class RunConfig(JobSection):
    key: ClassVar[str] = "run"

    # The models under test: a registry file (YAML {models: [...]}) or a zoo recipe.
    # None: the zoo the run trains on the corpus is what it tests (the demo).
    models: str | None = None
    methods: list[str] | None = None  # of METHOD_ORDER; None: every method that serves the task
    baselines: list[Literal["zoo"]] = Field(default_factory=list)  # trained on the corpus, compared with
    # single: one text per case (sentiment and other text classification); pair: two
    # texts per case (paraphrase, NLI): only templates (a pair spec) and TestAug serve it.
    task: Literal["single", "pair"] = "single"
    # COSTELLO also tests the encoder inside each model under test that has one (a
    # Hugging Face classifier's transformer, a sentence-transformer head's encoder),
    # beside costello.embedders; an encoder already listed there is not tested twice.
    test_model_encoders: bool = True

    @field_validator("methods")
    @classmethod
    def _known_methods(cls, value: list[str] | None) -> list[str] | None:
        for method in value or ():
            if method not in METHOD_ORDER:
                raise ValueError(f"unknown method '{method}' (have: {', '.join(METHOD_ORDER)})")
        return value
