"""The top-up stage of the testaug job: more generation rounds for the descriptions whose
kept cases fall short of ``testaug.min_kept``.

The validity filter can drop most of a description's cases (a strict judge, a hard
description), leaving too few to test or expand. A user asks for "at least N valid cases
per description", so this stage asks the generator again, one prompt per short
description per round (prompt indices after the first ``prompts_per_description``, the
same seeding as the generate stage), parses and de-duplicates the answers against every
case met so far, judges the new cases as phase 2 would (people > classifier > LLM labeler;
a description without a filter keeps them all), and stops when every description reaches
``min_kept`` or has used ``max_prompts_per_description`` prompts. Its output is the
validity stage's, with the new cases appended and the decisions updated, so the stages
after it read one table. Prompts and verdicts are checkpointed one by one (``StageChat``):
a run cut off in round k resumes there.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from checkray.engine.case_checks import rejected_table
from checkray.engine.llm import LLMConfig
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.prompts import load_prompt
from checkray.engine.stages import Stage, StageContext, file_digest
from checkray.engine.testaug.config import TestAugConfig
from checkray.engine.testaug.generate import answer_cases, ask_round, check_cases
from checkray.engine.testaug.judges import (
    CaseJudges,
    GeneratedCase,
    add_topup,
    cases_table,
    judge_new_cases,
    read_cases,
)
from checkray.engine.testaug.prompt import Description, ParseCount, normalize, seed_keys
from checkray.jobs.testaug.generation import PROMPT_FIELDS, llm_progress
from checkray.jobs.testaug.judging import load_judges, stage_labeler, validity_external

VERSION = "2"  # 2: new cases pass the automatic checks; their rejected table
# What the top-up stage reads of the section: the target, the prompts, the judges.
FIELDS = (
    "min_kept",
    "max_prompts_per_description",
    "near_copy_overlap",
    *PROMPT_FIELDS,
    "validity",
    "annotations",
    "llm_labeler",
    "labeler_examples",
    "label_generation",
)


def prompt_budget(t: TestAugConfig) -> int:
    """Prompts a description may use in all (the first round's included)."""
    return t.max_prompts_per_description or 4 * t.prompts_per_description


def topup_log(labeler: list[dict], verdicts: ParseCount, parsed: ParseCount) -> list[dict]:
    """The validity stage's labeler log with the top-up's answers and verdicts added."""
    return [
        {
            **log,
            "answers": log["answers"] + verdicts.outputs,
            "verdicts": log["verdicts"] + verdicts.items,
            "unparsed": log["unparsed"] + verdicts.unparsed,
            "topup_answers": parsed.outputs,
            "topup_parsed": parsed.items,
            "topup_unparsed": parsed.unparsed,
        }
        for log in labeler
    ]


def topup_stage(t: TestAugConfig, llm: LLMConfig, descs: list[Description], chat, seed: int, chat_id: str) -> Stage:
    t = t.view(*FIELDS)

    def run(ctx: StageContext):
        cases = read_cases(ctx.input("validity"))
        decisions = ctx.input("validity", "decisions").to_pylist()
        added: list[GeneratedCase] = []
        prompts: Counter[str] = Counter()
        parsed, verdicts = ParseCount(), ParseCount()
        rejected: list[dict] = []
        if t.min_kept:
            with StageChat(chat, ctx, chat_id, llm.part_size, progress=llm_progress) as stage_chat:
                judges = load_judges(t, descs, stage_labeler(stage_chat, t.label_generation, verdicts))
                needs_filter = {r["key"]: bool(r["filter"]) for r in decisions}
                added, prompts = top_up(stage_chat, judges, cases, needs_filter, parsed, rejected)
        return {
            "rejected": rejected_table(rejected),
            "data": cases_table(cases + added),
            "decisions": pa.Table.from_pylist(add_topup(decisions, added, prompts)),
            "labeler": pa.Table.from_pylist(topup_log(ctx.input("validity", "labeler").to_pylist(), verdicts, parsed)),
        }

    def top_up(
        chat: StageChat,
        judges: CaseJudges,
        cases: list[GeneratedCase],
        needs_filter: dict[str, bool],
        parsed: ParseCount,
        rejected: list[dict],
    ) -> tuple[list[GeneratedCase], Counter[str]]:
        """Rounds of one prompt per short description until each has ``min_kept`` kept
        cases or has spent its budget; new cases checked as the parse stage checks them
        (``check_cases``: de-duplicated against every case met), the rejected ones kept in
        ``rejected``."""
        kept = Counter(c.key for c in cases if c.kept)
        seen = {d.key: seed_keys(d) for d in descs}
        for c in cases:
            seen[c.key].add((normalize(c.text), normalize(c.text_pair or "")))
        added: list[GeneratedCase] = []
        prompts: Counter[str] = Counter()
        for p in range(t.prompts_per_description, prompt_budget(t)):
            short = [i for i, d in enumerate(descs) if kept[d.key] < t.min_kept]
            if not short:
                break
            with chat.step(f"top-up round {p + 1 - t.prompts_per_description}", len(short)):
                answers = ask_round(chat, t, descs, seed, p, short)
            new = []
            for i, answer in zip(short, answers):
                d = descs[i]
                prompts[d.key] += 1
                found, out = check_cases(d, answer_cases(d, answer, parsed), seen[d.key], t.near_copy_overlap)
                rejected += out
                new += [GeneratedCase.from_row(c) for c in found]
            judge_new_cases(new, judges, needs_filter)
            kept.update(c.key for c in new if c.kept)
            added += new
        return added, prompts

    prompt_sections = [
        load_prompt(n).sections
        for n in ("testaug_generate", "testaug_generate_pair", "testaug_validity", "testaug_validity_examples")
    ]
    return Stage(
        "topup",
        run,
        inputs=("validity",),
        config=[t, llm, seed, prompt_sections, chat_id],
        external=(file_digest(t.spec), *validity_external(t)),
        version=VERSION,
    )
