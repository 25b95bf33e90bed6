"""The testaug job's LLM stages before the filter: generation (§4.1) and parsing.

``ask_round`` and ``answer_cases`` are shared with the top-up stage (``topup.py``), which
asks later rounds of the same prompts for the descriptions short of kept cases.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from checkray.engine.llm import LLMConfig, count_finish_reasons, make_generation
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.prompts import load_prompt
from checkray.engine.stages import Stage, StageContext, file_digest
from checkray.engine.testaug.prompt import (
    Description,
    ParseCount,
    dedupe,
    parse_pair_cases,
    parse_single_cases,
    prompt_examples,
    sample_seeds,
    seed_keys,
)
from checkray.jobs.testaug.config import TestAugConfig
from checkray.jobs.testaug.metrics import llm_progress

VERSION = "2"  # generate stage: raw answers
PARSER_VERSION = "1"  # bump with a parser change: cached answers are parsed again
# What shapes the generation prompts and the descriptions they come from (the generate
# stage's view of the section; the top-up stage asks later rounds of the same prompts).
PROMPT_FIELDS = (
    "prompts_per_description",
    "demonstrations",
    "cases_per_prompt",
    "generation",
    "spec",
    "label_map",
    "seeds_per_template",
    "descriptions",
    "max_descriptions",
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
            "seeds": json.dumps([x.template_id + "\t" + json.dumps(x.filling) for x in s]),
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


def generation_stage(
    t: TestAugConfig, llm: LLMConfig, descs: list[Description], chat, seed: int, chat_id: str
) -> Stage:
    """The LLM calls; raw answers are kept, so a parser change never re-asks the LLM. The
    stage sees only what shapes the prompts and the descriptions they come from, so a
    change of the validity, expansion or evaluation settings reuses the answers. Answers
    are committed in parts as they come (``StageChat``; ``chat_id``: the model's
    identity), errors never: a rerun asks only the prompts without an answer."""
    t = t.view(*PROMPT_FIELDS)

    def run(ctx: StageContext):
        total = t.prompts_per_description * len(descs)
        with (
            StageChat(chat, ctx, chat_id, llm.part_size, progress=llm_progress) as stage_chat,
            stage_chat.step("generate", total),
        ):
            return ask(stage_chat)

    def ask(chat: StageChat):
        rows = []
        for p in range(t.prompts_per_description):  # one batch per round: every description at once
            rows += ask_round(chat, t, descs, seed, p, range(len(descs)))
        return {"data": pa.Table.from_pylist(rows, schema=ANSWER_SCHEMA)}

    prompts = [load_prompt(n).sections for n in ("testaug_generate", "testaug_generate_pair")]
    return Stage(
        "generate",
        run,
        config=[t, llm, seed, prompts, chat_id],
        external=(file_digest(t.spec),),
        version=VERSION,
    )


def parse_stage(descs: list[Description]) -> Stage:
    """Cases from the raw answers (single or pair format), counted; seeds and repeats dropped."""

    def run(ctx: StageContext):
        answers = ctx.input("generate").to_pylist()
        rows, parsing = [], []
        for d in descs:
            count, mine = ParseCount(), [a for a in answers if a["key"] == d.key]
            found = [case for a in mine for case in answer_cases(d, a, count)]
            kept, dropped = dedupe(found, seed_keys(d))
            rows += kept
            reasons = count_finish_reasons([make_generation(a["answer"], a["finish_reason"]) for a in mine])
            parsing.append(
                {
                    "key": d.key,
                    "answers": count.outputs,
                    "parsed": count.items,
                    "unparsed": count.unparsed,
                    "duplicates": dropped,
                    "kept": len(kept),
                    "truncated": reasons["length"],
                    "empty": reasons["empty"] + reasons["error"],
                    "examples": " | ".join(count.examples),
                }
            )
        schema = pa.schema(
            [
                ("key", pa.string()),
                ("prompt", pa.int64()),
                ("text", pa.string()),
                ("text_pair", pa.string()),
                ("seeds", pa.string()),
            ]
        )
        return {"data": pa.Table.from_pylist(rows, schema=schema), "parsing": pa.Table.from_pylist(parsing)}

    return Stage("parse", run, inputs=("generate",), version=PARSER_VERSION)
