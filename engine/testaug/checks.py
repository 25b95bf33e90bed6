"""The automatic checks of TestAug's generated cases (``checkray.engine.llm_output``):
run on every parsed case before the validity filter, and on the expansion's cases.

Generated cases: artefact (a prompt label left in, a cut-off phrase, an article right
before a verb or not fitting the next word, a brace or unbalanced bracket) -> prompt leak (n-grams of the generation prompt's instructions
and the description that no seed holds) -> near copy of a seed (word overlap >=
``testaug.near_copy_overlap``) -> duplicate (of a seed or a case met before) ->
description words (the polarity of the words the description names: a negated negative
word, a positive question answered "no"; ``description_rules.py``) -> polarity
(VADER/TextBlob on the deciding clause strongly against the label, or a label resting
on a negated negative word alone: "not very bad" is not positive, "not sad" not negative)
-> contradiction. A case that fails is not judged, kept or expanded: a wrongly labelled
generated seed never becomes a template. Expansion cases: artefact -> duplicate ->
description words -> polarity -> contradiction, then the LM fluency check against their source case
(``expand.Expansion.select``, ``testaug.expansion_fluency``).
"""

from __future__ import annotations

from collections.abc import Sequence

from checkray.engine.case_checks import Check
from checkray.engine.llm_output import (
    artefact_check,
    contradiction_check,
    duplicate_check,
    instruction_text,
    near_copy_check,
    polarity_check,
    prompt_leak_check,
)
from checkray.engine.prompts import load_prompt
from checkray.engine.testaug.description_rules import description_check
from checkray.engine.testaug.prompt import Description

NEAR_COPY_OVERLAP = 0.9  # default of testaug.near_copy_overlap: short template sentences differ by a word or two


def generated_checks(d: Description, seen: set, near_copy: float = NEAR_COPY_OVERLAP) -> list[Check]:
    """The checks of description ``d``'s generated cases; ``seen`` (updated): the normalized
    (text, text_pair) keys met so far (the seeds' at least)."""
    prompt = load_prompt("testaug_generate_pair" if d.is_pair else "testaug_generate")
    instructions = instruction_text([s for _, s in prompt.sections]) + " " + d.description
    seeds = [x for s in d.seeds for x in (s.text, s.text_pair) if x]
    seed_texts = [" ".join(x for x in (s.text, s.text_pair) if x) for s in d.seeds]
    return [
        artefact_check(),
        prompt_leak_check(lambda r: instructions, lambda r: seeds),
        near_copy_check(lambda r: seed_texts, near_copy),
        duplicate_check(seen),
        description_check(lambda r: d.description),
        polarity_check(lambda r: d.label),
        contradiction_check(lambda r: d.label),
    ]


def expansion_checks(d: Description, seen: set) -> list[Check]:
    return [
        artefact_check(),  # a slot can make what its source was not ("in the past I would admire it")
        duplicate_check(seen),
        description_check(lambda r: d.description),
        polarity_check(lambda r: d.label),
        contradiction_check(lambda r: d.label),
    ]


def with_description(rows: Sequence[dict], d: Description, suite: str) -> list[dict]:
    """Rejected rows with the fields ``rejected.parquet`` reads (suite, capability, label)."""
    return [
        {**r, "suite": suite, "capability": d.capability, "expected_label": d.label, "meta": {"description": d.key}}
        for r in rows
    ]
