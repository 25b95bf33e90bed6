"""Stages of the testaug job after generation: the validity filter (§4.2), diversity
(Table 4/5), failure rates with the benchmark runner, and the patched failure rate
(Table 3, ``jobs/testaug/patch.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.llm import LLMConfig
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.prompts import load_prompt
from checkray.engine.stages import RunDir, Stage, StageContext, file_digest, fingerprint
from checkray.engine.testaug.prompt import Description, ParseCount, normalize
from checkray.engine.testaug.validity import classifier_input, phase_decision, read_annotations, threshold_for
from checkray.jobs.benchmark.config import BenchmarkConfig
from checkray.jobs.config import CheckrayConfig
from checkray.jobs.console import console, item_progress
from checkray.jobs.testaug.config import TestAugConfig

VALIDITY_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("prompt", pa.int64()),
        ("text", pa.string()),
        ("text_pair", pa.string()),
        ("seeds", pa.string()),
        ("first_sample", pa.bool_()),
        ("valid_people", pa.int64()),
        ("valid_llm", pa.int64()),
        ("valid_p", pa.float64()),
        ("valid_clf", pa.int64()),
        ("kept", pa.bool_()),
        ("decided_by", pa.string()),
    ]
)


def llm_progress(step: str, total: int):
    return item_progress(f"  testaug · {step}", total, "prompts")


def _flag(value) -> int | None:
    return None if value is None else int(bool(value))


def validity_stage(t: TestAugConfig, llm: LLMConfig, descs: list[Description], chat, chat_id: str) -> Stage:
    """Phase 1 on each description's first sample (people > LLM labeler > classifier),
    phase 2 (people > classifier > LLM labeler) where the valid share is under threshold.
    The LLM labeler's answers are checkpointed prompt by prompt (``StageChat``)."""

    def run(ctx: StageContext):
        with StageChat(chat, ctx, chat_id, llm.part_size, progress=llm_progress) as stage_chat:
            return decide(ctx, stage_chat)

    def decide(ctx: StageContext, chat: StageChat):
        from checkray.actors.testaug.validity import ValidityClassifier, case_text, llm_label

        cases = ctx.input("parse").to_pylist()
        people = {}
        if t.annotations:
            people = {
                (normalize(r["text"]), normalize(r["text_pair"] or "")): r["validity"]
                for r in read_annotations(t.annotations)
            }
        clf = ValidityClassifier.load(t.validity) if t.validity else None
        # A classifier judges only the descriptions it was trained for (validity is relative
        # to a description); the LLM labeler stands in for it on the others.
        judged = {d.key for d in descs if clf is not None and clf.covers(d.description)}
        if clf is not None and not judged:
            console.print(
                f"[yellow]warning:[/] validity classifier {t.validity} was trained on "
                f"{'; '.join(clf.descriptions or [])!r}: it judges none of this spec's descriptions",
                highlight=False,
            )
        to_judge = [i for i, c in enumerate(cases) if c["key"] in judged]
        inputs = [classifier_input(cases[i]["text"], cases[i]["text_pair"]) for i in to_judge]
        prob_of = dict(zip(to_judge, (float(p) for p in clf.predict_proba(inputs)))) if inputs else {}
        desc_of = {d.key: d for d in descs}
        seen: dict[str, int] = {}
        for i, c in enumerate(cases):
            c["first_sample"] = seen.get(c["key"], 0) < t.first_sample
            seen[c["key"]] = seen.get(c["key"], 0) + 1
            c["valid_people"] = people.get((normalize(c["text"]), normalize(c["text_pair"] or "")))
            c["valid_p"] = prob_of.get(i)
            c["valid_clf"] = None if c["valid_p"] is None else int(c["valid_p"] >= clf.threshold)
            c["valid_llm"] = None
            c["description"] = desc_of[c["key"]].description
            c["examples"] = [case_text(e.text, e.text_pair) for e in desc_of[c["key"]].seeds[: t.labeler_examples]]
        count = ParseCount()

        def ask_llm(rows):
            if t.llm_labeler and rows:
                with chat.step("LLM labeler", len(rows)):
                    verdicts = llm_label(rows, chat, t.label_generation, count)
                for c, verdict in zip(rows, verdicts):
                    c["valid_llm"] = _flag(verdict)

        threshold = threshold_for(t.task, t.threshold)
        # phase 1: who annotates each description's first sample
        sources = {}
        for d in descs:
            first = [c for c in cases if c["key"] == d.key and c["first_sample"]]
            sources[d.key] = (
                "people"
                if any(c["valid_people"] is not None for c in first)
                else "llm"
                if t.llm_labeler
                else "classifier"
                if d.key in judged
                else "none"
            )
        ask_llm([c for c in cases if c["first_sample"] and sources[c["key"]] == "llm"])
        decisions = {}
        for d in descs:
            first = [c for c in cases if c["key"] == d.key and c["first_sample"]]
            field = {"people": "valid_people", "llm": "valid_llm"}.get(sources[d.key])
            flags = (
                [c[field] for c in first]
                if field
                else [bool(c["valid_clf"]) for c in first]
                if sources[d.key] == "classifier"
                else []
            )
            decisions[d.key] = phase_decision(flags, threshold, sources[d.key])
        # phase 2: filter the descriptions below threshold
        filtered = [c for c in cases if decisions[c["key"]].needs_filter]
        ask_llm(
            [c for c in filtered if c["key"] not in judged and c["valid_people"] is None and c["valid_llm"] is None]
        )
        for c in cases:
            if not decisions[c["key"]].needs_filter:
                c["kept"], c["decided_by"] = True, "no filter (phase 1)"
            elif c["valid_people"] is not None:
                c["kept"], c["decided_by"] = bool(c["valid_people"]), "people"
            elif c["valid_clf"] is not None:
                c["kept"], c["decided_by"] = bool(c["valid_clf"]), "classifier"
            elif c["valid_llm"] is not None:
                c["kept"], c["decided_by"] = bool(c["valid_llm"]), "llm labeler"
            else:
                c["kept"], c["decided_by"] = True, "unfiltered (no classifier or labeler)"
        rows = []
        for d in descs:
            mine = [c for c in cases if c["key"] == d.key]
            dec = decisions[d.key]
            scored = [c for c in mine if c["valid_people"] is not None and c["valid_clf"] is not None]
            rows.append(
                {
                    "key": d.key,
                    "generated": len(mine),
                    "first_sample": dec.n,
                    "classifier": d.key in judged,
                    "annotated_by": dec.source,
                    "valid_share": dec.valid_share,
                    "threshold": dec.threshold,
                    "filter": dec.needs_filter,
                    "kept": sum(c["kept"] for c in mine),
                    "dropped": sum(not c["kept"] for c in mine),
                    "classifier_accuracy": (sum(c["valid_clf"] == c["valid_people"] for c in scored) / len(scored))
                    if scored
                    else None,
                    "classifier_vs_llm": _agreement(mine),
                }
            )
        log = {
            "key": "(llm labeler)",
            "answers": count.outputs,
            "verdicts": count.items,
            "unparsed": count.unparsed,
            "examples": " | ".join(count.examples),
        }
        return {
            "data": pa.Table.from_pylist(
                [{k: c.get(k) for k in VALIDITY_SCHEMA.names} for c in cases], schema=VALIDITY_SCHEMA
            ),
            "decisions": pa.Table.from_pylist(rows),
            "labeler": pa.Table.from_pylist([log]),
        }

    digest = file_digest(t.annotations) if t.annotations else None
    clf_meta = None
    if t.validity:
        meta = Path(t.validity) / "metadata.json"
        clf_meta = meta.read_text(encoding="utf-8") if meta.is_file() else "missing"
    return Stage(
        "validity",
        run,
        inputs=("parse",),
        config=[
            t,
            llm,
            load_prompt("testaug_validity").sections,
            load_prompt("testaug_validity_examples").sections,
            chat_id,
        ],
        external=(str(digest), str(clf_meta)),
        version="1",
    )


def _agreement(rows: list[dict]) -> float | None:
    both = [c for c in rows if c["valid_llm"] is not None and c["valid_clf"] is not None]
    return sum(c["valid_clf"] == c["valid_llm"] for c in both) / len(both) if both else None


def _groups(table: pa.Table) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for topic, text, pair in zip(
        table.column("topic").to_pylist(), table.column("text").to_pylist(), table.column("text_pair").to_pylist()
    ):
        out.setdefault(topic, []).append(text if pair is None else f"{text} {pair}")
    return out


def diversity_stage(t: TestAugConfig, descs: list[Description], suite: pa.Table, baseline: pa.Table) -> Stage:
    """Table 5 (Self-BLEU-4, unique dependency paths; same sample size per description) and
    Table 4 (unique seed vs new sentences, seed vs new templates)."""

    def run(ctx: StageContext):
        from checkray.actors.spacy_nlp import load_spacy
        from checkray.engine.testaug.diversity import suite_diversity

        nlp = load_spacy(t.spacy)
        gpt = suite.filter(pc.equal(suite.column("suite"), f"{t.suite}-gpt"))
        named = {"T_TestAug": suite, "T_GPT": gpt, "T_CheckList": baseline}
        table5 = [
            {"suite": name, **suite_diversity(_groups(tab), nlp, t.diversity_per_description)}
            for name, tab in named.items()
            if tab.num_rows
        ]
        seeds = {(s.text, s.text_pair) for d in descs for s in d.seeds}
        new = {(a, b) for a, b in zip(suite.column("text").to_pylist(), suite.column("text_pair").to_pylist())}
        templates = ctx.input("expand", "templates").column("template").to_pylist()
        table4 = [
            {
                "unique seed sentences": len(seeds),
                "unique new sentences": len(new - seeds),
                "ratio": round(len(new - seeds) / max(1, len(seeds)), 1),
                "seed templates": len({x.template_id for d in descs for x in d.templates}),
                "new templates": len(set(templates)),
            }
        ]
        return {"table5": pa.Table.from_pylist(table5), "table4": pa.Table.from_pylist(table4)}

    return Stage(
        "diversity",
        run,
        inputs=("expand",),
        config=t,
        external=(fingerprint(suite.column("case_id").to_pylist(), baseline.column("case_id").to_pylist()),),
        version="1",
    )


def benchmark_step(
    cfg: CheckrayConfig, run: RunDir, suite: pa.Table, baseline: pa.Table, specs: Sequence[ModelSpec]
) -> pa.Table:
    """Failure rates per model x suite x capability x description (``topic``)."""
    from checkray.jobs.benchmark.job import run_benchmark

    _, summary = run_benchmark([suite, baseline], specs, cfg, out=RunDir(run.path("benchmark")))
    return summary


def patch_stage(cfg: CheckrayConfig, suite: pa.Table, baseline: pa.Table, specs: Sequence[ModelSpec]) -> Stage:
    """Table 3: each trainable model refitted per seed and suite (``jobs/testaug/patch.py``)."""
    from checkray.jobs.benchmark.stages import spec_fingerprint  # a spec with its model files digested

    t = cfg.section(TestAugConfig)
    settings = cfg.section(BenchmarkConfig).settings()

    def run(ctx: StageContext):
        from checkray.jobs.testaug.patch import patched_failure_rates

        gpt = suite.filter(pc.equal(suite.column("suite"), f"{t.suite}-gpt"))
        expansion = suite.filter(pc.equal(suite.column("suite"), f"{t.suite}-expansion"))
        suites = {
            "T_CheckList": baseline,
            "T_TestAug": suite,
            "T_TestAug\\T_GPT": expansion,
            "T_TestAug\\T_Expansion": gpt,
        }
        rows, skipped = patched_failure_rates(
            suites, specs, t.patch.seeds, t.patch.test_fraction, settings, t.patch.models, t.patch.test_cases
        )
        return {
            "data": pa.Table.from_pylist(rows) if rows else pa.table({"model": pa.array([], pa.string())}),
            "skipped": pa.Table.from_pylist(skipped) if skipped else pa.table({"model": pa.array([], pa.string())}),
        }

    return Stage(
        "patch",
        run,
        config=[t, [spec_fingerprint(s) for s in specs], asdict(settings)],
        external=(fingerprint(suite.column("case_id").to_pylist(), baseline.column("case_id").to_pylist()),),
        version="1",
    )
