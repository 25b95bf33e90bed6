"""TestAug generation (§4.1) over a chat passed in: rounds of prompts (each showing a few
seed cases of its description) and the cases parsed from the raw answers.

``chat(messages_list, params) -> list[Generation]`` is any LLM (the job's checkpointed
``StageChat``, a rule-based fake in tests). ``ask_round`` serves the generate stage and
the top-up's later rounds alike: a description's prompt ``p`` is the same in both.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from checkray.engine.case_checks import apply_checks
from checkray.engine.llm import count_finish_reasons, make_generation
from checkray.engine.prompts import load_prompt
from checkray.engine.testaug.checks import NEAR_COPY_OVERLAP, generated_checks, with_description
from checkray.engine.testaug.config import TestAugConfig
from checkray.engine.testaug.prompt import (
    Description,
    ParseCount,
    parse_pair_cases,
    parse_single_cases,
    prompt_examples,
    sample_seeds,
    seed_entry,
    seed_keys,
)

ANSWER_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("prompt", pa.int64()),
        ("answer", pa.string()),
        ("finish_reason", pa.string()),
        ("seeds", pa.string()),
    ]
)


def ask_round(chat, t: TestAugConfig, descs: list[Description], seed: int, p: int, which: Sequence[int]) -> list[dict]:
    """Round ``p`` of generation prompts for the descriptions at indices ``which``: each
    prompt shows seeds drawn from (seed, p, index), so a description's prompt ``p`` is
    the same whichever descriptions share its round. Returns answer rows (ANSWER_SCHEMA)."""
    which = list(which)
    shown = [sample_seeds(descs[i], t.demonstrations, np.random.default_rng([seed, p, i])) for i in which]
    messages = [
        load_prompt("testaug_generate_pair" if descs[i].is_pair else "testaug_generate").render(
            description=descs[i].description, examples=prompt_examples(s), n=t.cases_per_prompt
        )
        for i, s in zip(which, shown)
    ]
    answers = chat(messages, t.generation.model_copy(update={"seed": seed + p})) if messages else []
    return [
        {
            "key": descs[i].key,
            "prompt": p,
            "answer": a.text,
            "finish_reason": a.finish_reason,
            "seeds": json.dumps([seed_entry(x) for x in s]),
        }
        for i, s, a in zip(which, shown, answers)
    ]


def answer_cases(d: Description, answer: dict, count: ParseCount) -> list[dict]:
    """The cases of one raw answer row of description ``d`` (single or pair format)."""
    parse = parse_pair_cases if d.is_pair else parse_single_cases
    found = []
    for case in parse(answer["answer"] or "", count, truncated=answer["finish_reason"] == "length"):
        text, pair = (case, None) if isinstance(case, str) else case
        found.append(
            {"key": d.key, "prompt": answer["prompt"], "text": text, "text_pair": pair, "seeds": answer["seeds"]}
        )
    return found


PARSED_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("prompt", pa.int64()),
        ("text", pa.string()),
        ("text_pair", pa.string()),
        ("seeds", pa.string()),
        ("checks", pa.list_(pa.string())),  # the automatic checks it passed (engine/testaug/checks.py)
    ]
)


def check_cases(
    d: Description, found: Sequence[dict], seen: set, near_copy: float, suite: str = "testaug-gpt"
) -> tuple[list[dict], list[dict]]:
    """(kept, rejected) of description ``d``'s parsed cases after ``generated_checks``;
    rejected rows carry their check and reason (``rejected.parquet``'s fields)."""
    outcome = apply_checks(found, generated_checks(d, seen, near_copy))
    return outcome.kept, with_description(outcome.rejected, d, suite)


def parse_answers(
    descs: Sequence[Description],
    answers: Sequence[dict],
    near_copy: float = NEAR_COPY_OVERLAP,
    rejected: list[dict] | None = None,
) -> tuple[list[dict], list[dict]]:
    """(cases, parsing counts per description) from raw answer rows: every case parsed and
    cleaned (``PARSED_SCHEMA``) that passed ``generated_checks`` (the rest appended to
    ``rejected`` with its reason; a seed or a case met before is a duplicate), and per
    description its answers, parsed, unparsed, truncated and empty ones, rejected ones, with
    examples of what could not be read."""
    rows, parsing = [], []
    for d in descs:
        count, mine = ParseCount(), [a for a in answers if a["key"] == d.key]
        found = [case for a in mine for case in answer_cases(d, a, count)]
        kept, out = check_cases(d, found, seed_keys(d), near_copy)
        dropped = sum(r["check"] == "duplicate" for r in out)
        if rejected is not None:
            rejected += out
        rows += kept
        reasons = count_finish_reasons([make_generation(a["answer"], a["finish_reason"]) for a in mine])
        parsing.append(
            {
                "key": d.key,
                "answers": count.outputs,
                "parsed": count.items,
                "unparsed": count.unparsed,
                "duplicates": dropped,
                "rejected": len(out) - dropped,
                "kept": len(kept),
                "truncated": reasons["length"],
                "empty": reasons["empty"] + reasons["error"],
                "examples": " | ".join(count.examples),
            }
        )
    return rows, parsing
