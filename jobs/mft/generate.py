"""The generate stages of the mft job: one per split x version, running Li et al.'s LLM
steps (``checkray.engine.mft.generation``) with its answers checkpointed prompt by prompt
(``checkray.engine.llm_checkpoint``); then one collect stage with everything kept."""

from __future__ import annotations

from collections.abc import Sequence

from checkray.engine.llm import LLMConfig
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.mft.config import MFTConfig
from checkray.engine.mft.generation import (
    GENERATION_FIELDS,
    VersionTarget,
    collect_versions,
    generate_version,
    version_tables,
)
from checkray.engine.mft.suite import GateLog
from checkray.engine.prompts import load_prompt
from checkray.engine.stages import Stage, StageContext
from checkray.jobs.console import console, item_progress

PROMPTS = ("mft_fewshot_example", "mft_generate", "mft_paraphrase", "mft_label")


def generation_stage(
    m: MFTConfig, llm: LLMConfig, base_seed: int, chat, embed, split: str, version: int, chat_id: str
) -> Stage:
    """Few-shot examples, generation, de-duplication, paraphrases and the label gate for
    one split x version. LLM answers are committed in parts as they come (``StageChat``,
    keyed by ``chat_id``, the model's identity), errors never: a crash, a timeout or failed
    prompts cost a rerun only the prompts without an answer. The stage sees only the fields
    it reads, so adding versions or changing the evaluation reuses every finished pair."""
    m = m.view(*GENERATION_FIELDS)
    target = VersionTarget(split, version, base_seed + version)

    def run(ctx: StageContext):
        reps = [r for r in ctx.input("representatives").to_pylist() if r["split"] == split]
        docs = [d for d in ctx.input("representatives", "corpus").to_pylist() if d["split"] == split]
        log = GateLog(on_add=print_gate)
        with StageChat(chat, ctx, chat_id, llm.part_size, progress=progress(split, version)) as stage_chat:
            rejected: list[dict] = []
            cases = generate_version(reps, docs, m, stage_chat, embed, target, log, rejected, parse=parse_text)
        return version_tables(cases, log, rejected)

    prompts = [(load_prompt(name).sections, load_prompt(name).grammar) for name in PROMPTS]
    return Stage(
        f"generate-{split}-v{version}",
        run,
        inputs=("representatives",),
        config=[m, llm, base_seed, prompts, chat_id],
        # 2: cleaned answers, automatic checks, the rejected table; 3: a word missing after an
        # article, a/an not fitting the next word; 4: a brace or unbalanced bracket; 5: the
        # pair-pronoun check; 6: a verb missing or in the wrong form, an open question
        # answered yes/no, habitual "would" with a state verb
        version="6",
    )


def parse_text(text: str):
    """spaCy's default pipeline on ``text``, loaded on the first call (most runs never
    meet a "neither" that needs it)."""
    from checkray.actors.spacy_nlp import load_spacy

    return load_spacy()(text)


def collect_stage(names: Sequence[str]) -> Stage:
    """All split x version outputs in one table each; an error if nothing survived."""
    names = tuple(names)

    def run(ctx: StageContext):
        return collect_versions(
            [{output: ctx.input(name, output) for output in ("data", "gates", "parsing", "rejected")} for name in names]
        )

    return Stage("generate", run, inputs=names, version="3")  # 3: rejected candidates, duplicates across versions


def progress(split: str, version: int):
    return lambda step, total: item_progress(f"  mft · {split} v{version} · {step}", total, "prompts")


def print_gate(row: dict) -> None:
    note = f" ({row['note']})" if row["note"] else ""
    took = f" in {row['seconds']:.0f}s" if row.get("seconds") is not None else ""
    console.print(
        f"  mft · {row['split']} v{row['version']} · {row['gate']}: kept {row['kept']}, dropped {row['dropped']}{note}{took}",
        highlight=False,
    )
