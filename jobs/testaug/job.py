"""The ``testaug`` job (Yang et al., 2022): LLM-generated capability tests, a validity
filter, template expansion, and the paper's diversity and bug-finding metrics.

    checkray testaug --spec FILE --out DIR [--validity CLF_DIR] [--annotations FILE] [--models M]
        -> DIR/suite.parquet   <suite>-gpt (valid generated cases) + <suite>-expansion (§4.3)
           DIR/baseline.parquet  the template-only (CheckList) suite of the same spec
           DIR/annotate.jsonl    each description's first sample, for people to annotate
           DIR/report.html       Tables 3/4/5 shapes, validity decisions, failure rates

Stages (checkpointed under DIR/stages/): generate (LLM) -> validity (two-phase rule,
§4.2) -> expand (spaCy) -> diversity; with models: the benchmark (DIR/benchmark/) and
patch (Table 3). Descriptions, seeds and prompts: ``engine/testaug/prompt.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Optional, Sequence

import numpy as np
import pyarrow as pa
import typer
from pydantic import Field, field_validator

from engine.config import Section
from jobs.config import CheckrayConfig, load_config
from engine.errors import InputError
from engine.llm import GenerationParams, count_finish_reasons, make_generation
from engine.benchmark.registry import ModelSpec
from engine.prompts import load_prompt
from engine.report import Section as ReportSection, render
from engine.schema import make_cases
from engine.stages import RunDir, Stage, StageContext, StageRunner, file_digest
from engine.templates.expand import expand, read_spec
from engine.testaug.prompt import (Description, ParseCount, SeedCase, dedupe, describe_templates,
                                   parse_pair_cases, parse_single_cases, prompt_examples, sample_seeds, seed_keys)
from jobs.testaug.config import PatchConfig, TestAugConfig
from jobs.console import console, stage_printer

METHOD = "testaug"
VERSION = "2"  # generate stage: raw answers
EXPAND_VERSION = "3"  # numbered slots ({noun2})
PARSER_VERSION = "1"  # bump with a parser change: cached answers are parsed again


def load_descriptions(t: TestAugConfig, seed: int) -> list[Description]:
    if not t.spec:
        raise InputError("no spec: pass --spec FILE or set testaug.spec in the config")
    descs = describe_templates(read_spec(t.spec, t.label_map), t.seeds_per_template, seed)
    if t.descriptions:
        wanted = set(t.descriptions)
        descs = [d for d in descs if wanted & {d.key, d.capability, d.description}]
        if not descs:
            raise InputError(f"testaug.descriptions {sorted(wanted)} match no description of {t.spec}")
    return descs[: t.max_descriptions] if t.max_descriptions else descs


def generation_stage(cfg: CheckrayConfig, descs: list[Description], chat) -> Stage:
    """The LLM calls; raw answers are kept, so a parser change never re-asks the LLM."""
    t: TestAugConfig = cfg.section("testaug")

    def run(ctx: StageContext):
        rows = []
        for p in range(t.prompts_per_description):  # one batch per round: every description at once
            shown = [sample_seeds(d, t.demonstrations, np.random.default_rng([cfg.seed, p, i]))
                     for i, d in enumerate(descs)]
            messages = [load_prompt("testaug_generate_pair" if d.is_pair else "testaug_generate").render(
                description=d.description, examples=prompt_examples(s), n=t.cases_per_prompt)
                for d, s in zip(descs, shown)]
            answers = chat(messages, t.generation.model_copy(update={"seed": cfg.seed + p}))
            rows += [{"key": d.key, "prompt": p, "answer": a.text, "finish_reason": a.finish_reason,
                      "seeds": json.dumps([x.template_id + "\t" + json.dumps(x.filling) for x in s])}
                     for d, s, a in zip(descs, shown, answers)]
        return {"data": pa.Table.from_pylist(rows, schema=pa.schema(
            [("key", pa.string()), ("prompt", pa.int64()), ("answer", pa.string()), ("finish_reason", pa.string()),
             ("seeds", pa.string())]))}

    prompts = [load_prompt(n).sections for n in ("testaug_generate", "testaug_generate_pair")]
    return Stage("generate", run, config=[t.model_dump(include={"label_map", "descriptions", "max_descriptions",
                                                                 "seeds_per_template", "demonstrations",
                                                                 "prompts_per_description", "cases_per_prompt",
                                                                 "generation"}),
                                          cfg.section("llm"), cfg.seed, prompts, getattr(chat, "name", "llm")],
                 external=(file_digest(t.spec),), version=VERSION)


def parse_stage(descs: list[Description]) -> Stage:
    """Cases from the raw answers (single or pair format), counted; seeds and repeats dropped."""

    def run(ctx: StageContext):
        answers = ctx.input("generate").to_pylist()
        rows, parsing = [], []
        for d in descs:
            count, mine = ParseCount(), [a for a in answers if a["key"] == d.key]
            found = []
            for a in mine:
                parse = parse_pair_cases if d.is_pair else parse_single_cases
                for case in parse(a["answer"] or "", count, truncated=a["finish_reason"] == "length"):
                    text, pair = (case, None) if isinstance(case, str) else case
                    found.append({"key": d.key, "prompt": a["prompt"], "text": text, "text_pair": pair,
                                  "seeds": a["seeds"]})
            kept, dropped = dedupe(found, seed_keys(d))
            rows += kept
            reasons = count_finish_reasons([make_generation(a["answer"], a["finish_reason"]) for a in mine])
            parsing.append({"key": d.key, "answers": count.outputs, "parsed": count.items, "unparsed": count.unparsed,
                            "duplicates": dropped, "kept": len(kept), "truncated": reasons["length"],
                            "empty": reasons["empty"] + reasons["error"], "examples": " | ".join(count.examples)})
        schema = pa.schema([("key", pa.string()), ("prompt", pa.int64()), ("text", pa.string()),
                            ("text_pair", pa.string()), ("seeds", pa.string())])
        return {"data": pa.Table.from_pylist(rows, schema=schema), "parsing": pa.Table.from_pylist(parsing)}

    return Stage("parse", run, inputs=("generate",), version=PARSER_VERSION)


def expand_stage(cfg: CheckrayConfig, descs: list[Description]) -> Stage:
    t: TestAugConfig = cfg.section("testaug")

    def run(ctx: StageContext):
        from actors.spacy_nlp import load_spacy
        from engine.testaug.expand import case_template, expand_new_template, seed_candidates
        from engine.testaug.prompt import normalize

        nlp = load_spacy(t.spacy)
        cases = [r for r in ctx.input("validity").to_pylist() if r["kept"]]
        rows, new_templates = [], []
        for d in descs:
            templates = {x.template_id: x for x in d.templates}
            seen = seed_keys(d) | {(normalize(r["text"]), normalize(r["text_pair"] or "")) for r in cases}
            produced, made = 0, []
            for r in (r for r in cases if r["key"] == d.key):
                shown = [shown_seed(s) for s in json.loads(r["seeds"])]
                docs = [nlp(x) for x in (r["text"], r["text_pair"]) if x is not None]
                new = case_template(docs, seed_candidates(shown, templates, t.expansion_match))
                if new is None or new.texts in made or produced >= t.max_expansion_per_description:
                    continue  # a template met before draws the same cases again
                made.append(new.texts)
                try:
                    template, drawn = expand_new_template(new, d.capability, d.label, d.description,
                                                          t.expansion_per_template, cfg.seed, f"{d.key}: {r['text']}")
                except InputError:  # e.g. {a:slot} over a pool with an empty filler: not a usable template
                    continue
                fresh, _ = dedupe([{"text": x[0], "text_pair": x[1] if len(x) > 1 else None, "filling": f}
                                   for x, f in drawn], seen)
                fresh = fresh[: t.max_expansion_per_description - produced]
                produced += len(fresh)
                new_templates.append({"key": d.key, "template": json.dumps(new.texts), "slots": sorted(new.slots),
                                      "template_id": template.template_id, "source": r["text"], "cases": len(fresh)})
                rows += [{"key": d.key, "text": c["text"], "text_pair": c["text_pair"], "template": json.dumps(new.texts),
                          "template_id": template.template_id, "source": r["text"],
                          "filling": json.dumps(c["filling"])} for c in fresh]
        schema = pa.schema([(n, pa.string()) for n in ("key", "text", "text_pair", "template", "template_id",
                                                       "source", "filling")])
        return {"data": pa.Table.from_pylist(rows, schema=schema),
                "templates": pa.Table.from_pylist(new_templates, schema=pa.schema(
                    [("key", pa.string()), ("template", pa.string()), ("slots", pa.list_(pa.string())),
                     ("template_id", pa.string()), ("source", pa.string()), ("cases", pa.int64())]))}

    return Stage("expand", run, inputs=("validity",),
                 config=[t.expansion_match, t.expansion_per_template, t.max_expansion_per_description, t.spacy,
                         cfg.seed], version=EXPAND_VERSION)


def shown_seed(entry: str) -> SeedCase:
    """A seed shown in a prompt, as the generate stage recorded it ("template_id<TAB>filling")."""
    template_id, filling = entry.split("\t", 1)
    return SeedCase("", None, template_id, json.loads(filling))


def build_suites(t: TestAugConfig, descs: list[Description], valid: pa.Table, expanded: pa.Table,
                 generator: str, seed: int) -> tuple[pa.Table, pa.Table]:
    """(TestAug suite: <suite>-gpt + <suite>-expansion, template-only baseline suite)."""
    by_key = {d.key: d for d in descs}
    rows = []
    for r in valid.to_pylist():
        if not r["kept"]:
            continue
        d = by_key[r["key"]]
        rows.append(_case(f"{t.suite}-gpt", d, r["text"], r["text_pair"], "testaug_generate", generator, seed,
                          {"prompt": r["prompt"], "validity": r["decided_by"], "valid_p": r["valid_p"]}))
    for r in expanded.to_pylist():
        d = by_key[r["key"]]
        rows.append(_case(f"{t.suite}-expansion", d, r["text"], r["text_pair"], r["template_id"], "testaug-expansion",
                          seed, {"template": json.loads(r["template"]), "source": r["source"],
                                 "fillings": json.loads(r["filling"])}))
    base = expand([x for d in descs for x in d.templates], suite="checklist", nsamples=t.baseline_nsamples, seed=seed)
    desc_of = {x.template_id: d for d in descs for x in d.templates}
    base_rows = [{**r, "topic": desc_of[r["provenance"]["template_id"]].description,
                  "meta": {**json.loads(r["meta"]), "description_key": desc_of[r["provenance"]["template_id"]].key}}
                 for r in base.cases.to_pylist()]
    return make_cases(rows), make_cases(base_rows)


def _case(suite: str, d: Description, text: str, pair: str | None, template_id: str, generator: str, seed: int,
          meta: dict) -> dict:
    return {"suite": suite, "method": METHOD, "capability": d.capability, "topic": d.description, "text": text,
            "text_pair": pair, "expected_label": d.label, "test_type": "MFT",
            "provenance": {"source_id": None, "template_id": template_id, "generator": generator, "seed": seed},
            "meta": {"description": d.description, "description_key": d.key, **meta}}


def resolve_specs(t: TestAugConfig, specs: Sequence[ModelSpec] | None) -> list[ModelSpec] | None:
    if specs is not None:
        return list(specs)
    if t.models:
        from jobs.benchmark.job import resolve_models

        return resolve_models(t.models)
    return None


def run_testaug(cfg: CheckrayConfig, out: str, specs: Sequence[ModelSpec] | None = None, chat=None,
                ) -> tuple[RunDir, list[ReportSection]]:
    """Run the job; ``specs`` (else ``testaug.models``) get failure rates and Table 3;
    ``chat`` defaults to the configured LLM actor pool. Returns the run dir and report sections."""
    from jobs.mft.job import LazyChat
    from jobs.testaug.metrics import benchmark_step, diversity_stage, patch_stage, validity_stage
    from jobs.testaug.report import testaug_sections

    t: TestAugConfig = cfg.section("testaug")
    descs = load_descriptions(t, cfg.seed)
    specs = resolve_specs(t, specs)
    run = RunDir(out)
    runner = StageRunner(run, on_stage=stage_printer("testaug"))
    owned = chat is None
    if owned:
        from jobs.mft.runtime import open_chat

        chat = LazyChat(lambda: open_chat(cfg))
        chat.name = cfg.section("llm").model
    try:
        runner.run_stage(generation_stage(cfg, descs, chat))
        runner.run_stage(parse_stage(descs))
        runner.run_stage(validity_stage(cfg, descs, chat))
    finally:
        if owned:
            chat.close()
    runner.run_stage(expand_stage(cfg, descs))
    suite, baseline = build_suites(t, descs, runner.output("validity"), runner.output("expand"),
                                   getattr(chat, "name", "llm"), cfg.seed)
    run.write_table("suite.parquet", suite)
    run.write_table("baseline.parquet", baseline)
    run.write_text("annotate.jsonl", "".join(json.dumps(r) + "\n" for r in annotation_sheet(runner.output("validity"), descs)))
    runner.run_stage(diversity_stage(cfg, descs, suite, baseline))
    summary = benchmark_step(cfg, run, suite, baseline, specs) if specs else None
    if specs and t.patch.enabled:
        runner.run_stage(patch_stage(cfg, suite, baseline, specs))
    sections = testaug_sections(runner, t, descs, suite, baseline, summary, specs, getattr(chat, "name", "llm"))
    run.write_text("report.html", render("checkray · TestAug", sections, subtitle=f"spec {t.spec}"))
    return run, sections


def annotation_sheet(valid: pa.Table, descs: list[Description]) -> list[dict]:
    """Each description's phase-1 sample; ``validity`` is people's label when known, else
    null for an annotator to fill (the LLM's verdict is shown as ``llm_validity``)."""
    by_key = {d.key: d for d in descs}
    return [{"description": by_key[r["key"]].description, "capability": by_key[r["key"]].capability,
             "label": by_key[r["key"]].label, "text": r["text"], "text_pair": r["text_pair"],
             "validity": r["valid_people"], "llm_validity": r["valid_llm"]}
            for r in valid.to_pylist() if r["first_sample"]]


def testaug_command(
    spec: Optional[str] = typer.Option(None, "--spec", "-s", help="Capability spec (template JSONL/YAML)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Run directory."),
    validity: Optional[str] = typer.Option(None, "--validity", help="Validity classifier directory."),
    annotations: Optional[str] = typer.Option(None, "--annotations", help="People's validity annotations (JSONL)."),
    models: Optional[str] = typer.Option(None, "--models", help="Model registry or zoo recipe to test."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Generator backend: auto, local, http, vllm."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config (testaug: and llm: sections)."),
):
    """Generate capability tests with an LLM (TestAug): filter, expand, measure diversity and bugs found."""
    cfg = load_config(config, {"testaug.spec": spec, "testaug.validity": validity, "testaug.annotations": annotations,
                               "testaug.models": models, "llm.backend": backend, "out": out})
    if not cfg.out:
        raise InputError("no output directory: pass --out DIR or set 'out' in the config")
    run, _ = run_testaug(cfg, cfg.out)
    suite = run.read_table("suite.parquet", columns=["suite"]).column("suite").to_pylist()
    counts = ", ".join(f"{s} {suite.count(s)}" for s in sorted(set(suite)))
    console.print(f"testaug: {len(suite)} cases ({counts or 'none'})")
    typer.echo(f"wrote {run.path('suite.parquet')} and report.html")
