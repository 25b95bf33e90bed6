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


class CaseJudges:
    """Who can judge a generated case of each description: people's annotations (matched
    by text), the validity classifier (only for the descriptions it was trained on:
    validity is relative to a description) and the LLM labeler (the others)."""

    def __init__(self, t: TestAugConfig, descs: list[Description]):
        from checkray.actors.testaug.validity import ValidityClassifier

        self.t, self.desc_of = t, {d.key: d for d in descs}
        # People's verdicts by (description, text, pair): a sentence can be valid for one
        # description and not another. Rows that name no description of this spec (or none
        # at all) hold for any description ("" in the key).
        self.people: dict[tuple[str, str, str], int] = {}
        if t.annotations:
            ours = {normalize(d.description) for d in descs}
            for r in read_annotations(t.annotations):
                described = normalize(str(r["description"] or ""))
                key = (described if described in ours else "", normalize(r["text"]), normalize(r["text_pair"] or ""))
                self.people[key] = r["validity"]
        self.clf = ValidityClassifier.load(t.validity) if t.validity else None
        self.judged = {d.key for d in descs if self.clf is not None and self.clf.covers(d.description)}
        if self.clf is not None and not self.judged:
            console.print(
                f"[yellow]warning:[/] validity classifier {t.validity} was trained on "
                f"{'; '.join(self.clf.descriptions or [])!r}: it judges none of this spec's descriptions",
                highlight=False,
            )

    def annotate(self, cases: list[dict]) -> None:
        """Set each case's people's verdict, classifier probability and verdict (covered
        descriptions), and what the LLM labeler is shown (``valid_llm`` stays None)."""
        from checkray.actors.testaug.validity import case_text

        to_judge = [i for i, c in enumerate(cases) if c["key"] in self.judged]
        reads = self.clf is not None and self.clf.reads_description
        inputs = [
            classifier_input(
                cases[i]["text"], cases[i]["text_pair"], self.desc_of[cases[i]["key"]].description if reads else None
            )
            for i in to_judge
        ]
        prob_of = dict(zip(to_judge, (float(p) for p in self.clf.predict_proba(inputs)))) if inputs else {}
        for i, c in enumerate(cases):
            d = self.desc_of[c["key"]]
            case = (normalize(c["text"]), normalize(c["text_pair"] or ""))
            c["valid_people"] = self.people.get((normalize(d.description), *case), self.people.get(("", *case)))
            c["valid_p"] = prob_of.get(i)
            c["valid_clf"] = None if c["valid_p"] is None else int(c["valid_p"] >= self.clf.threshold)
            c["valid_llm"] = None
            c["description"] = d.description
            c["examples"] = [case_text(e.text, e.text_pair) for e in d.seeds[: self.t.labeler_examples]]

    def ask_llm(self, chat, rows: list[dict], count: ParseCount) -> None:
        """The LLM labeler's verdicts on ``rows`` (``valid_llm``), if it is enabled."""
        from checkray.actors.testaug.validity import llm_label

        if self.t.llm_labeler and rows:
            with chat.step("LLM labeler", len(rows)):
                verdicts = llm_label(rows, chat, self.t.label_generation, count)
            for c, verdict in zip(rows, verdicts):
                c["valid_llm"] = _flag(verdict)

    def needs_llm(self, c: dict) -> bool:
        """Phase 2: the labeler judges what neither people nor the classifier did."""
        return c["key"] not in self.judged and c["valid_people"] is None and c["valid_llm"] is None


def decide_case(c: dict, needs_filter: bool) -> None:
    """Keep or drop a case: unfiltered descriptions keep everything; filtered ones take
    people's verdict, else the classifier's, else the LLM labeler's."""
    if not needs_filter:
        c["kept"], c["decided_by"] = True, "no filter (phase 1)"
    elif c["valid_people"] is not None:
        c["kept"], c["decided_by"] = bool(c["valid_people"]), "people"
    elif c["valid_clf"] is not None:
        c["kept"], c["decided_by"] = bool(c["valid_clf"]), "classifier"
    elif c["valid_llm"] is not None:
        c["kept"], c["decided_by"] = bool(c["valid_llm"]), "llm labeler"
    else:
        c["kept"], c["decided_by"] = True, "unfiltered (no classifier or labeler)"


def validity_stage(t: TestAugConfig, llm: LLMConfig, descs: list[Description], chat, chat_id: str) -> Stage:
    """Phase 1 on each description's first sample (people > LLM labeler > classifier),
    phase 2 (people > classifier > LLM labeler) where the valid share is under threshold.
    The LLM labeler's answers are checkpointed prompt by prompt (``StageChat``)."""

    def run(ctx: StageContext):
        with StageChat(chat, ctx, chat_id, llm.part_size, progress=llm_progress) as stage_chat:
            return decide(ctx, stage_chat)

    def decide(ctx: StageContext, chat: StageChat):
        cases = ctx.input("parse").to_pylist()
        judges = CaseJudges(t, descs)
        judged = judges.judged
        judges.annotate(cases)
        seen: dict[str, int] = {}
        for c in cases:
            c["first_sample"] = seen.get(c["key"], 0) < t.first_sample
            seen[c["key"]] = seen.get(c["key"], 0) + 1
        count = ParseCount()

        def ask_llm(rows):
            judges.ask_llm(chat, rows, count)

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
        ask_llm([c for c in filtered if judges.needs_llm(c)])
        for c in cases:
            decide_case(c, decisions[c["key"]].needs_filter)
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

    return Stage(
        "validity",
        run,
        inputs=("parse",),
        config=[
            # the top-up target does not change what this stage decides (``jobs/testaug/topup.py``)
            t.model_copy(update={"min_kept": 0, "max_prompts_per_description": None}),
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
