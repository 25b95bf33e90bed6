"""The language-model fluency check shared by the generators that substitute words.

COSTELLO's operators and TestAug's template expansion both make a new sentence by putting
other words into a sentence that was written whole (a seed; an LLM-generated case). What a
reader then finds wrong is a word that does not fit there: "the deal is expected to shut",
"The restaurant is not a fast airline.", "flying at this seat". A causal LM sees the whole
sentence, and such a word costs it log-probability. The check compares the new sentence
with the one it was made from and refuses it when the drop exceeds ``max_drop`` nats (for
a pair, the larger drop of its two texts). Scores come from ``actors/lm_scorer.py``.

The drop is a sum over tokens, not a mean: one odd word in a long sentence is what it
should catch, and a mean would dilute it. A rarer but right word costs a little too, so
each generator sets ``max_drop`` from cases people read (docs/costello.md, docs/testaug.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field

from checkray.engine.config import Backend, Section

CHECK = "fluency"  # the name a refused case's ``check`` and a kept case's ``checks`` carry
DEFAULT_MODEL = "builtin:smollm2-135m-instruct"


class LMFluencyCheck(Section):
    """The LM that scores sentences and the largest drop a new sentence may have."""

    model: str = DEFAULT_MODEL  # builtin LLM alias, a GGUF file or a model directory
    max_drop: float = Field(default=5.0, gt=0)  # nats of sentence log-probability a new sentence may lose
    backend: Backend = "auto"


def texts_of(text: str, text_pair: str | None) -> list[str]:
    """The one or two texts of a case."""
    return [text] if text_pair is None else [text, text_pair]


def sentence_drop(original: tuple[str, str | None], new: tuple[str, str | None], scores: Mapping[str, float]) -> float:
    """The largest log-probability a new case's text lost against the text it was made from
    (0 when every text is unchanged)."""
    pairs = zip(texts_of(*original), texts_of(*new))
    return max((scores[o] - scores[n] for o, n in pairs if o != n), default=0.0)
