"""The testaug job's LLM stages before the filter: generation (§4.1) and parsing, over
``engine/testaug/generate.py``; the top-up stage (``topup.py``) asks later rounds of the
same prompts for the descriptions short of kept cases."""

from __future__ import annotations

import pyarrow as pa

from checkray.engine.case_checks import rejected_table
from checkray.engine.llm import LLMConfig
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.prompts import load_prompt
from checkray.engine.stages import Stage, StageContext, file_digest
from checkray.engine.testaug.config import TestAugConfig
from checkray.engine.testaug.generate import ANSWER_SCHEMA, PARSED_SCHEMA, ask_round, parse_answers
from checkray.engine.testaug.prompt import Description
from checkray.jobs.console import item_progress

VERSION = "2"  # generate stage: raw answers
PARSER_VERSION = "6"  # 2: cleaned cases, automatic checks and their rejected table; 3: a word missing after an article, a/an not fitting the next word; 4: a brace or unbalanced bracket; 5: a change over time names a time, "my opinion matters" holds another's; 6: a verb missing or in the wrong form, an open question answered yes/no, habitual "would" with a state verb  # bump with a parser change: cached answers are parsed again
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


def llm_progress(step: str, total: int):
    """How the job's LLM stages show their prompts' progress (``StageChat``)."""
    return item_progress(f"  testaug · {step}", total, "prompts")


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


def parse_stage(t: TestAugConfig, descs: list[Description]) -> Stage:
    """Cases from the raw answers (single or pair format), cleaned and counted; the ones
    the automatic checks reject (seeds and repeats among them) in ``rejected``."""
    near_copy = t.near_copy_overlap

    def run(ctx: StageContext):
        rejected: list[dict] = []
        rows, parsing = parse_answers(descs, ctx.input("generate").to_pylist(), near_copy, rejected)
        return {
            "data": pa.Table.from_pylist(rows, schema=PARSED_SCHEMA),
            "parsing": pa.Table.from_pylist(parsing),
            "rejected": rejected_table(rejected),
        }

    return Stage("parse", run, inputs=("generate",), config=[near_copy], version=PARSER_VERSION)
