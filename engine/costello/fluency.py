"""COSTELLO's language-model check: a substitution must read as naturally as its seed.

The checked operators (``checked.py``) pick senses and collocations from WordNet and
movie-review n-grams; read at size, what they let through is a word in a sense the
sentence does not use ("raw beef" -> "rude beef", "the deal is expected to close" ->
"shut") or a synonym of the right sense that nobody would write there ("his finest
chance"). ``fluency`` applies the shared LM check (``checkray.engine.lm_fluency``: the new
sentence's log-probability against its seed's, at most ``max_drop`` nats lost) to the
variants. By default it scores CR4's pair substitutions only: the movie-review operators
have the curated table, and there the check mostly rejected triples people had read as
right. A rejected variant keeps its reason and reaches ``rejected.parquet`` like any
other check's; a variant that passes lists ``fluency`` in its checks. ``max_drop`` was set
on the triples read by people (docs/costello.md), not on this code's own output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, field_validator

from checkray.engine.lm_fluency import CHECK, LMFluencyCheck, sentence_drop, texts_of

SUBSTITUTIONS = ("synonym", "antonym", "pair_synonym", "pair_antonym")
PAIR_SUBSTITUTIONS = ("pair_synonym", "pair_antonym")
# What ``operators`` may list: the substitutions, and CR3's inversion when it is a sentence
# of the table (``inversion_unit: sentence``), whose edit is scored against the sentence as written.
CHECKABLE = SUBSTITUTIONS + ("inversion",)


class FluencyCheck(LMFluencyCheck):
    """``costello.fluency``: the shared LM check, and the operators whose variants it scores."""

    # The matching-pair substitutions (CR4) by default. On the single-sentence operators the
    # curated table and movie-review n-grams already decide, and replayed on the CR1 triples
    # read since 18fc8cf's operators the check rejected 42 right triples and 5 wrong ones
    # (bench/costello_fluency_replay.py).
    operators: list[str] = Field(default_factory=lambda: list(PAIR_SUBSTITUTIONS))
    # A limit of its own for an operator (else ``max_drop``): a contrast-set edit swaps a
    # polar word for its opposite, which costs more than a synonym does (docs/costello.md).
    operator_max_drop: dict[str, float] = Field(default_factory=dict)

    @field_validator("operators")
    @classmethod
    def _checkable_only(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(CHECKABLE))
        if unknown:
            raise ValueError(f"operators {unknown} cannot be scored (have: {', '.join(CHECKABLE)})")
        return value

    @field_validator("operator_max_drop")
    @classmethod
    def _positive_limits(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(CHECKABLE))
        if unknown:
            raise ValueError(
                f"operator_max_drop names {unknown}, which cannot be scored (have: {', '.join(CHECKABLE)})"
            )
        if any(limit <= 0 for limit in value.values()):
            raise ValueError("operator_max_drop limits must be positive")
        return value

    def limit(self, operator: str) -> float:
        """The largest drop a variant of ``operator`` may have."""
        return self.operator_max_drop.get(operator, self.max_drop)


# CR1 and CR4 take a synonym and an antonym of the same word (triples.combine).
SAME_WORD = {"synonym": "antonym", "antonym": "synonym", "pair_synonym": "pair_antonym", "pair_antonym": "pair_synonym"}
# CR3 takes a seed's first synonym and CR2 its first antonym, at any word: the first few
# of each are scored, so one the LM rejects has a scored successor. A seed has at most one
# inversion.
FIRST_OF = ("synonym", "antonym", "inversion")


def checked_rows(rows: Sequence[Mapping[str, Any]], operators: Sequence[str], first: int = 3) -> list[int]:
    """Indices of the variant rows the check applies to: kept so far, of a listed operator,
    and usable by a triple (a word with both a synonym and an antonym kept, or one of a
    seed's ``first`` synonyms / antonyms). Scoring only these keeps the LM's work to what
    can reach a suite: most kept variants of a matching pair have no partner."""
    kept = [i for i, r in enumerate(rows) if not r["check"] and r["op"] in operators]
    ops_at: dict[tuple[str, int], set[str]] = {}
    for i in kept:
        ops_at.setdefault((rows[i]["seed_id"], rows[i]["index"]), set()).add(rows[i]["op"])
    seen: dict[tuple[str, str], int] = {}
    usable = []
    for i in kept:
        r = rows[i]
        rank = seen[(r["seed_id"], r["op"])] = seen.get((r["seed_id"], r["op"]), 0) + 1
        partner = SAME_WORD.get(r["op"])
        if (partner and partner in ops_at[(r["seed_id"], r["index"])]) or (r["op"] in FIRST_OF and rank <= first):
            usable.append(i)
    return usable


def sentences_to_score(
    rows: Sequence[Mapping[str, Any]], seeds: Mapping[str, tuple[str, str | None]], operators: Sequence[str]
) -> set[str]:
    """Every seed sentence and variant sentence the check compares."""
    texts: set[str] = set()
    for i in checked_rows(rows, operators):
        r = rows[i]
        texts.update(texts_of(*seeds[r["seed_id"]]))
        texts.update(texts_of(r["text"], r["text_pair"]))
    return texts


def apply_fluency(
    rows: Sequence[Mapping[str, Any]],
    seeds: Mapping[str, tuple[str, str | None]],
    scores: Mapping[str, float],
    check: FluencyCheck,
) -> list[dict[str, Any]]:
    """The variant rows with the check applied: a failing row gets ``check``/``reason``, a
    passing one ``fluency`` appended to ``checks``; other rows are unchanged."""
    out = [dict(r) for r in rows]
    for i in checked_rows(rows, check.operators):
        r = out[i]
        drop = sentence_drop(seeds[r["seed_id"]], (r["text"], r["text_pair"]), scores)
        limit = check.limit(r["op"])
        if drop > limit:
            edit = f"'{r['word']}' -> '{r['replacement']}'" if r["word"] else f"the {r['op']}"
            r["check"] = CHECK
            r["reason"] = f"{edit} costs the sentence {drop:.1f} nats under {check.model} (limit {limit:g})"
        else:
            r["checks"] = ",".join(c for c in (r["checks"] or "", CHECK) if c)
    return out
