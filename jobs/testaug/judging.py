"""The validity stage of the testaug job (§4.2): the judges loaded (people's annotations,
the classifier, the LLM labeler through the stage's checkpointed chat) and the two-phase
rule of ``engine/testaug/judges.py`` run over the parsed cases."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from checkray.engine.llm import GenerationParams, LLMConfig
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.prompts import load_prompt
from checkray.engine.stages import Stage, StageContext, file_digest
from checkray.engine.testaug.config import LATER_EXPANSION_FIELDS, TestAugConfig
from checkray.engine.testaug.judges import (
    CaseJudges,
    Labeler,
    cases_table,
    decision_rows,
    judge_cases,
    people_verdicts,
    read_cases,
)
from checkray.engine.testaug.prompt import Description, ParseCount
from checkray.engine.testaug.validity import llm_label, read_annotations, threshold_for
from checkray.jobs.console import console
from checkray.jobs.testaug.generation import llm_progress


def stage_labeler(chat: StageChat, params: GenerationParams, count: ParseCount) -> Labeler:
    """The LLM labeler over a stage's checkpointed chat, its answers counted in ``count``."""

    def label(requests: list[dict]) -> list[bool | None]:
        with chat.step("LLM labeler", len(requests)):
            return llm_label(requests, chat, params, count)

    return label


def load_judges(t: TestAugConfig, descs: list[Description], labeler: Labeler) -> CaseJudges:
    """People's annotations (``testaug.annotations``), the classifier (``testaug.validity``)
    and the LLM labeler (``testaug.llm_labeler``) for ``descs``; a classifier that covers
    none of them is named in a warning and not used."""
    from checkray.actors.testaug.validity import ValidityClassifier

    judges = CaseJudges(
        descs,
        people=people_verdicts(read_annotations(t.annotations), descs) if t.annotations else None,
        classifier=ValidityClassifier.load(t.validity) if t.validity else None,
        labeler=labeler if t.llm_labeler else None,
        labeler_examples=t.labeler_examples,
    )
    if judges.classifier_unused:
        console.print(
            f"[yellow]warning:[/] validity classifier {t.validity} was trained on "
            f"{'; '.join(judges.classifier.descriptions or [])!r}: it judges none of this spec's descriptions",
            highlight=False,
        )
    return judges


def labeler_log(count: ParseCount) -> dict:
    """The LLM labeler's answers, verdicts and unreadable answers (the ``labeler`` table)."""
    return {
        "key": "(llm labeler)",
        "answers": count.outputs,
        "verdicts": count.items,
        "unparsed": count.unparsed,
        "examples": " | ".join(count.examples),
    }


def validity_stage(t: TestAugConfig, llm: LLMConfig, descs: list[Description], chat, chat_id: str) -> Stage:
    """Phase 1 on each description's first sample (people > LLM labeler > classifier),
    phase 2 (people > classifier > LLM labeler) where the valid share is under threshold.
    The LLM labeler's answers are checkpointed prompt by prompt (``StageChat``)."""

    def run(ctx: StageContext):
        count = ParseCount()
        with StageChat(chat, ctx, chat_id, llm.part_size, progress=llm_progress) as stage_chat:
            judges = load_judges(t, descs, stage_labeler(stage_chat, t.label_generation, count))
            cases = read_cases(ctx.input("parse"))
            decisions = judge_cases(
                cases, descs, judges, first_sample=t.first_sample, threshold=threshold_for(t.task, t.threshold)
            )
        return {
            "data": cases_table(cases),
            "decisions": pa.Table.from_pylist(decision_rows(cases, descs, decisions, judges.judged)),
            "labeler": pa.Table.from_pylist([labeler_log(count)]),
        }

    return Stage(
        "validity",
        run,
        inputs=("parse",),
        config=[
            # the top-up target does not change what this stage decides (``jobs/testaug/topup.py``),
            # nor do the expansion's later fields (the LLM labeler is not asked again for them)
            t.model_copy(update={"min_kept": 0, "max_prompts_per_description": None}).view(
                *(f for f in TestAugConfig.model_fields if f not in LATER_EXPANSION_FIELDS)
            ),
            llm,
            load_prompt("testaug_validity").sections,
            load_prompt("testaug_validity_examples").sections,
            chat_id,
        ],
        external=validity_external(t),
        version="1",
    )


def validity_external(t) -> tuple[str, str]:
    """What the judges read from disk: the annotations' digest and the classifier's metadata."""
    digest = file_digest(t.annotations) if t.annotations else None
    clf_meta = None
    if t.validity:
        meta = Path(t.validity) / "metadata.json"
        clf_meta = meta.read_text(encoding="utf-8") if meta.is_file() else "missing"
    return str(digest), str(clf_meta)
