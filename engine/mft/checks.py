"""The automatic checks of Li et al.'s generated MFTs and paraphrases
(``checkray.engine.llm_output``), run per split x version before the LLM's label check.

Originals: artefact -> prompt leak (n-grams of the generation prompt's instructions and
its few-shot example that the representative does not hold) -> near copy of the
representative (word overlap >= ``mft.near_copy_overlap``) -> polarity (VADER/TextBlob on
the deciding clause strongly against the label) -> contradiction; then de-duplication
(normalized text met before in this version, then embedding cosine >=
``mft.near_duplicate_cosine``). Paraphrases: the same checks, with the original as a text
they may repeat, and the normalized duplicate check over originals and paraphrases.
The collect stage removes duplicates across versions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from checkray.engine.case_checks import Check
from checkray.engine.llm_output import (
    artefact_check,
    contradiction_check,
    instruction_text,
    near_copy_check,
    polarity_check,
    prompt_leak_check,
)
from checkray.engine.mft.parsing import dedupe_near
from checkray.engine.prompts import load_prompt

NEAR_COPY_OVERLAP = 0.75  # default of mft.near_copy_overlap


def prompt_instructions(*names: str) -> str:
    return " ".join(instruction_text([s for _, s in load_prompt(n).sections]) for n in names)


def content_checks(
    instructions: Callable[[Mapping[str, Any]], str],
    sources: Callable[[Mapping[str, Any]], Sequence[str]],
    representative: Callable[[Mapping[str, Any]], str],
    expected: Callable[[Mapping[str, Any]], str],
    near_copy: float,
) -> list[Check]:
    """artefact, prompt leak, near copy (of the representative), polarity, contradiction."""
    return [
        artefact_check(),
        prompt_leak_check(instructions, sources),
        near_copy_check(lambda r: [representative(r)], near_copy),
        polarity_check(expected),
        contradiction_check(expected),
    ]


def near_duplicate_check(embed: Callable[[list[str]], np.ndarray], threshold: float) -> Check:
    """Greedy near-duplicate removal over the batch (``dedupe_near``), as a check."""

    def batch(rows: Sequence[Mapping[str, Any]]) -> list[str | None]:
        if not rows:
            return []
        kept = set(dedupe_near(embed([r["text"] for r in rows]), threshold))
        why = f"near-duplicate (embedding cosine >= {threshold}) of a case kept before"
        return [None if i in kept else why for i in range(len(rows))]

    return Check("near duplicate", batch, f"embedding cosine >= {threshold}")
