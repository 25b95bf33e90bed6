"""The LLM steps of Li et al. (§2.2-2.4) for one split x version: few-shot examples, MFT
generation from representative documents, de-duplication, paraphrases and the label gate,
one stage per split x version whose LLM answers are checkpointed prompt by prompt
(``checkray.engine.llm_checkpoint``); then one table of everything kept."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from checkray.engine.errors import InputError
from checkray.engine.llm import LLMConfig
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.mft.suite import (
    GateLog,
    dedupe_cases,
    few_shot_examples,
    generate_mfts,
    label_gate,
    paraphrase_cases,
)
from checkray.engine.prompts import load_prompt
from checkray.engine.stages import Stage, StageContext
from checkray.jobs.console import console, item_progress
from checkray.jobs.mft.config import MFTConfig


def generation_stage(
    m: MFTConfig, llm: LLMConfig, base_seed: int, chat, embed, split: str, version: int, chat_id: str
) -> Stage:
    """Few-shot examples, generation, de-duplication, paraphrases and the label gate for
    one split x version. LLM answers are committed in parts as they come (``StageChat``,
    keyed by ``chat_id``, the model's identity), errors never: a crash, a timeout or failed
    prompts cost a rerun only the prompts without an answer. The stage sees only the fields
    it reads, so adding versions or changing the evaluation reuses every finished pair."""
    m = m.view(
        "generation",
        "constrained",
        "near_duplicate_cosine",
        "paraphrase_limit",
        "paraphrases",
        "paraphrase_generation",
        "label_words",
        "label_check",
        "label_generation",
        "embedder",
    )

    def run(ctx: StageContext):
        with StageChat(chat, ctx, chat_id, llm.part_size, progress=_progress(split, version)) as stage_chat:
            return steps(ctx, stage_chat)

    def steps(ctx: StageContext, chat: StageChat):
        reps = [r for r in ctx.input("representatives").to_pylist() if r["split"] == split]
        docs = [d for d in ctx.input("representatives", "corpus").to_pylist() if d["split"] == split]
        log = GateLog(on_add=_print_gate)
        seed = base_seed + version
        rng = np.random.default_rng(seed)
        clock = [time.perf_counter()]

        def _lap() -> float:  # seconds since the previous gate: the wall time of this step
            now = time.perf_counter()
            spent, clock[0] = now - clock[0], now
            return spent

        examples = few_shot_examples(
            docs,
            chat,
            m.generation.model_copy(update={"seed": seed}),
            rng,
            log,
            constrained="examples" in m.constrained,
        )
        missing = sorted({r["label"] for r in reps} - set(examples))
        log.add(
            "few-shot examples",
            split,
            version,
            len(examples),
            len(missing),
            f"no parseable example for {missing}" if missing else "",
            seconds=_lap(),
        )
        with chat.step("MFT generation", sum(r["label"] in examples for r in reps)):
            generated = generate_mfts(
                reps,
                examples,
                chat,
                m.generation.model_copy(update={"seed": seed}),
                log,
                constrained="generate" in m.constrained,
            )
        log.add(
            "generated MFTs", split, version, len(generated), 0, f"from {len(reps)} representatives", seconds=_lap()
        )
        kept, exact, near = dedupe_cases(generated, embed, m.near_duplicate_cosine)
        log.add(
            "de-duplication", split, version, len(kept), exact + near, f"{exact} exact, {near} near", seconds=_lap()
        )
        to_paraphrase = kept[: m.paraphrase_limit] if m.paraphrase_limit is not None else kept
        with chat.step("paraphrases", len(to_paraphrase) if m.paraphrases > 0 else 0):
            paraphrased = paraphrase_cases(
                to_paraphrase,
                m.paraphrases,
                chat,
                m.paraphrase_generation.model_copy(update={"seed": seed}),
                log,
                constrained="paraphrase" in m.constrained,
            )
        log.add(
            "paraphrases",
            split,
            version,
            len(paraphrased),
            0,
            f"{m.paraphrases} asked for each of {len(to_paraphrase)}",
            seconds=_lap(),
        )
        candidates = [{**r, "paraphrase_of": None} for r in kept] + paraphrased
        for r in candidates:
            r.update(split=split, version=version, seed=seed, expected=m.label_words[r["label"]])
        if m.label_check:
            with chat.step("label check", len(candidates)):
                gated, counts = label_gate(
                    candidates, chat, m.label_generation, log, constrained="label" in m.constrained
                )
            log.add(
                "label check",
                split,
                version,
                len(gated),
                len(candidates) - len(gated),
                ", ".join(f"{k} {v}" for k, v in counts.items()),
                seconds=_lap(),
            )
        else:
            gated = candidates
        return {
            "data": pa.Table.from_pylist([_flat(r) for r in gated], schema=CASE_ROW_SCHEMA),
            "gates": pa.Table.from_pylist(log.rows, schema=GATE_SCHEMA),
            "parsing": pa.Table.from_pylist(
                [
                    {"step": k, **{f: getattr(v, f) for f in ("outputs", "items", "unparsed")}, "examples": v.examples}
                    for k, v in log.parse.items()
                ],
                schema=PARSING_SCHEMA,
            ),
        }

    prompts = [
        (load_prompt(n).sections, load_prompt(n).grammar)
        for n in ("mft_fewshot_example", "mft_generate", "mft_paraphrase", "mft_label")
    ]
    return Stage(
        f"generate-{split}-v{version}",
        run,
        inputs=("representatives",),
        config=[m, llm, base_seed, prompts, chat_id],
    )


def collect_stage(names: Sequence[str]) -> Stage:
    """All split x version outputs in one table each; an error if nothing survived."""
    names = tuple(names)

    def run(ctx: StageContext):
        data = pa.concat_tables([ctx.input(n) for n in names])
        if not data.num_rows:
            raise InputError(
                "the mft job kept no test case: every generation was unparseable or dropped "
                "(see the gate counts in stages/generate-*/gates.parquet)"
            )
        parsing: dict[str, dict] = {}
        for row in pa.concat_tables([ctx.input(n, "parsing") for n in names]).to_pylist():
            acc = parsing.setdefault(
                row["step"], {"step": row["step"], "outputs": 0, "items": 0, "unparsed": 0, "examples": []}
            )
            for f in ("outputs", "items", "unparsed"):
                acc[f] += row[f]
            acc["examples"] = (acc["examples"] + list(row["examples"] or []))[:3]
        return {
            "data": data,
            "gates": pa.concat_tables([ctx.input(n, "gates") for n in names]),
            "parsing": pa.Table.from_pylist(list(parsing.values()), schema=PARSING_SCHEMA),
        }

    return Stage("generate", run, inputs=names, version="2")


CASE_ROW_SCHEMA = pa.schema(
    [
        ("text", pa.string()),
        ("summary", pa.string()),
        ("source_id", pa.string()),
        ("label", pa.string()),
        ("source_topic", pa.string()),
        ("paraphrase_of", pa.string()),
        ("split", pa.string()),
        ("version", pa.int64()),
        ("seed", pa.int64()),
        ("llm_reason", pa.string()),
    ]
)


GATE_SCHEMA = pa.schema(
    [
        ("gate", pa.string()),
        ("split", pa.string()),
        ("version", pa.int64()),
        ("kept", pa.int64()),
        ("dropped", pa.int64()),
        ("note", pa.string()),
        ("seconds", pa.float64()),  # wall time of the step in the run that computed the stage
    ]
)


PARSING_SCHEMA = pa.schema(
    [
        ("step", pa.string()),
        ("outputs", pa.int64()),
        ("items", pa.int64()),
        ("unparsed", pa.int64()),
        ("examples", pa.list_(pa.string())),
    ]
)


def _progress(split: str, version: int):
    return lambda step, total: item_progress(f"  mft · {split} v{version} · {step}", total, "prompts")


def _print_gate(row: dict) -> None:
    note = f" ({row['note']})" if row["note"] else ""
    took = f" in {row['seconds']:.0f}s" if row.get("seconds") is not None else ""
    console.print(
        f"  mft · {row['split']} v{row['version']} · {row['gate']}: kept {row['kept']}, dropped {row['dropped']}{note}{took}",
        highlight=False,
    )


def _flat(r: dict) -> dict:
    keep = (
        "text",
        "summary",
        "source_id",
        "label",
        "source_topic",
        "paraphrase_of",
        "split",
        "version",
        "seed",
        "llm_reason",
    )
    return {k: r.get(k) for k in keep}
