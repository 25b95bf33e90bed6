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

from checkray.engine.llm import LLMConfig
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.prompts import load_prompt
from checkray.engine.stages import Stage, StageContext, file_digest
from checkray.engine.testaug.prompt import Description, ParseCount, dedupe, normalize, seed_keys
from checkray.jobs.testaug.config import TestAugConfig
from checkray.jobs.testaug.generation import PROMPT_FIELDS, answer_cases, ask_round
from checkray.jobs.testaug.metrics import VALIDITY_SCHEMA, CaseJudges, decide_case, llm_progress, validity_external

VERSION = "1"
# What the top-up stage reads of the section: the target, the prompts, the judges.
FIELDS = (
    "min_kept",
    "max_prompts_per_description",
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


def topup_stage(t: TestAugConfig, llm: LLMConfig, descs: list[Description], chat, seed: int, chat_id: str) -> Stage:
    t = t.view(*FIELDS)

    def run(ctx: StageContext):
        cases = ctx.input("validity").to_pylist()
        decisions = ctx.input("validity", "decisions").to_pylist()
        labeler = ctx.input("validity", "labeler").to_pylist()
        added: list[dict] = []
        prompts: Counter[str] = Counter()
        parse_count, verdicts = ParseCount(), ParseCount()
        if t.min_kept:
            with StageChat(chat, ctx, chat_id, llm.part_size, progress=llm_progress) as stage_chat:
                added, prompts = top_up(stage_chat, cases, decisions, parse_count, verdicts)
        for r in decisions:
            mine = [c for c in added if c["key"] == r["key"]]
            r.update(
                topup_prompts=prompts[r["key"]],
                topup_cases=len(mine),
                generated=r["generated"] + len(mine),
                kept=r["kept"] + sum(c["kept"] for c in mine),
                dropped=r["dropped"] + sum(not c["kept"] for c in mine),
            )
        for log in labeler:
            log.update(
                answers=log["answers"] + verdicts.outputs,
                verdicts=log["verdicts"] + verdicts.items,
                unparsed=log["unparsed"] + verdicts.unparsed,
                topup_answers=parse_count.outputs,
                topup_parsed=parse_count.items,
                topup_unparsed=parse_count.unparsed,
            )
        rows = cases + [{k: c.get(k) for k in VALIDITY_SCHEMA.names} for c in added]
        return {
            "data": pa.Table.from_pylist(rows, schema=VALIDITY_SCHEMA),
            "decisions": pa.Table.from_pylist(decisions),
            "labeler": pa.Table.from_pylist(labeler),
        }

    def top_up(chat: StageChat, cases, decisions, parse_count: ParseCount, verdicts: ParseCount):
        needs_filter = {r["key"]: bool(r["filter"]) for r in decisions}
        kept = Counter(c["key"] for c in cases if c["kept"])
        seen = {d.key: seed_keys(d) for d in descs}
        for c in cases:
            seen[c["key"]].add((normalize(c["text"]), normalize(c["text_pair"] or "")))
        judges = CaseJudges(t, descs)
        added: list[dict] = []
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
                found, _ = dedupe(answer_cases(d, answer, parse_count), seen[d.key])
                new += found
            judges.annotate(new)
            judges.ask_llm(chat, [c for c in new if needs_filter[c["key"]] and judges.needs_llm(c)], verdicts)
            for c in new:
                c["first_sample"] = False
                decide_case(c, needs_filter[c["key"]])
                kept[c["key"]] += c["kept"]
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
