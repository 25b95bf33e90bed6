"""The automatic checks of Li et al.'s generated MFTs and paraphrases
(``checkray.engine.llm_output``), run per split x version before the LLM's label check.

Originals: artefact -> one sentence -> pair pronoun ("neither" of a pair never named) ->
prompt leak (n-grams of the generation prompt's instructions and its few-shot example
that the representative does not hold) -> near copy of the
representative (word overlap >= ``mft.near_copy_overlap``) -> polarity (VADER/TextBlob on
the deciding clause strongly against the label) -> contradiction; then de-duplication
(normalized text met before in this version, then embedding cosine >=
``mft.near_duplicate_cosine``). Paraphrases: the same checks, with the original as a text
they may repeat, and the normalized duplicate check over originals and paraphrases.
The collect stage removes duplicates across versions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from checkray.engine.case_checks import Check, row_check
from checkray.engine.llm_output import (
    POLAR_LABELS,
    artefact_check,
    contradiction_check,
    instruction_text,
    near_copy_check,
    pair_pronoun_check,
    polarity_check,
    prompt_leak_check,
    vader_compound,
)
from checkray.engine.mft.parsing import dedupe_near
from checkray.engine.prompts import load_prompt

NEAR_COPY_OVERLAP = 0.75  # default of mft.near_copy_overlap


# A sentence ends at . ! ? (closing quotes or brackets may follow) before a capital or a
# digit; not after an abbreviation or an initial ("Mr. Lee", "J. Smith"), nor inside an
# ellipsis written with spaces (". . . quite amusing": the next word is lower case anyway).
_SENTENCE_BREAK = re.compile(r"(\S*?)([.!?]+)[\"'”’)\]]*\s+[\"'“‘(]?(?=[A-Z0-9])")
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr vs etc no vol mt ft prof gen col lt sgt rev".split())


def sentence_count(text: str) -> int:
    """Sentences in ``text`` by its final punctuation (an LLM's MFTs are cased prose)."""
    count = 1
    for m in _SENTENCE_BREAK.finditer(text.strip()):
        word = m.group(1).lower().strip("\"'“‘(")
        if m.group(2) == "." and (word in _ABBREVIATIONS or re.fullmatch(r"[a-z]|(?:[a-z]\.)+[a-z]?", word)):
            continue
        count += 1
    return count


def one_sentence_reason(text: str) -> str | None:
    """Li et al.'s prompt asks for "a customer review with one single sentence"; a second
    sentence is where the small generators drift off the review (a definition, a story
    about the director, "A case in point: ...")."""
    n = sentence_count(text)
    return f"{n} sentences: an MFT is a review in one sentence" if n > 1 else None


def prompt_instructions(*names: str) -> str:
    return " ".join(instruction_text([s for _, s in load_prompt(n).sections]) for n in names)


def content_checks(
    instructions: Callable[[Mapping[str, Any]], str],
    sources: Callable[[Mapping[str, Any]], Sequence[str]],
    representative: Callable[[Mapping[str, Any]], str],
    expected: Callable[[Mapping[str, Any]], str],
    near_copy: float,
    parse: Callable[[str], Any] | None = None,
) -> list[Check]:
    """artefact, one sentence, pair pronoun (with a spaCy ``parse``), prompt leak, near copy
    (of the representative), polarity, contradiction."""
    return [
        artefact_check(),
        row_check("one sentence", lambda r: one_sentence_reason(r["text"]), "more than one sentence"),
        *([pair_pronoun_check(parse)] if parse is not None else []),
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


def classifier_label_reason(confidence: float | None, label: str, threshold: float) -> str | None:
    """Why a case's text does not carry its label to a classifier of the corpus (None: it
    does, or the classifier has no score for the label)."""
    if confidence is None or np.isnan(confidence) or confidence >= threshold:
        return None
    return (
        f"a classifier fitted on the corpus gives the text its label '{label}' with p = {confidence:.2f} "
        f"< {threshold:g}: no clear verdict of that polarity"
    )


def lexicon_disagreement_reason(text: str, label: str) -> str | None:
    """Why VADER does not lean towards a polar label (None: it does, or the label is not
    positive/negative). A review written to be positive or negative that VADER reads as
    neutral or opposite is, in the cases people read, mostly a description with no verdict
    ("the movie reveals how past decisions impact our present") or a hedge."""
    if label not in POLAR_LABELS:
        return None
    compound = vader_compound(text)
    if (compound > 0) == (label == "positive") and compound != 0:
        return None
    return f"VADER's compound score {compound:+.2f} does not lean {label}"


def classifier_checks(confidence: Mapping[str, float], threshold: float, lexicon_agrees: bool) -> list[Check]:
    """The classifier's label check (``confidence``: a case's text -> the probability of
    its label) and, with ``lexicon_agrees``, VADER's direction."""
    checks = [
        row_check(
            "classifier label",
            lambda r: classifier_label_reason(confidence.get(r["text"]), r["label"], threshold),
            f"a classifier of the corpus gives the label p >= {threshold:g}",
        )
    ]
    if lexicon_agrees:
        checks.append(
            row_check(
                "lexicon agrees",
                lambda r: lexicon_disagreement_reason(r["text"], r["label"]),
                "VADER leans towards the label",
            )
        )
    return checks
