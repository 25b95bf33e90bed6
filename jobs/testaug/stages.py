"""The testaug job's stages after the validity filter: the expansion (§4.3), the suites,
diversity and effort saved (Tables 4/5), the patched failure rate (Table 3) and the
benchmark of the models on the suites (failure rates per description)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.case_checks import rejected_table
from checkray.engine.stages import RunDir, Stage, StageContext
from checkray.engine.testaug.config import TestAugConfig
from checkray.engine.testaug.expand import ExpansionSettings, expand_cases
from checkray.engine.testaug.patch import table3_suites
from checkray.engine.testaug.prompt import Description
from checkray.engine.testaug.suites import annotation_sheet, build_suites, rejected_rows
from checkray.engine.testaug.tables import table5_suites, testaug_table4, testaug_table5
from checkray.jobs.benchmark.config import BenchmarkConfig
from checkray.jobs.config import CheckrayConfig

EXPAND_VERSION = "7"  # 4: expansion cases pass the automatic checks; 5: and the LM fluency check; 6: the description rules of parse 5; 7: the artefact check, a noun slot filled with its kind of noun
BENCHMARK_DIR = "benchmark"  # the benchmark's run, inside the testaug run


def expand_stage(t: TestAugConfig, descs: list[Description], seed: int) -> Stage:
    """Kept cases whose content words fill their seeds' slots become new templates, expanded
    with the seed pools (spaCy ``testaug.spacy``); with ``testaug.expansion_fluency``, a
    drawn case that reads much worse than its source under the LM is refused
    (``checkray.engine.lm_fluency``) and the next one drawn takes its place."""

    def run(ctx: StageContext):
        from checkray.actors.spacy_nlp import load_spacy

        kept = [r for r in ctx.input("topup").to_pylist() if r["kept"]]
        check = t.expansion_fluency
        settings = ExpansionSettings(
            t.expansion_match, t.expansion_per_template, t.max_expansion_per_description, t.expansion_candidates()
        )
        expansion = expand_cases(descs, kept, load_spacy(t.spacy), settings, seed)
        scores = _lm_scores(expansion.texts_to_score(), check) if check else None
        return expansion.select(settings, check, scores)

    return Stage("expand", run, inputs=("topup",), config=[t, seed], version=EXPAND_VERSION)


def _lm_scores(texts: set[str], check) -> dict[str, float]:
    from checkray.actors.lm_scorer import score_sentences

    return score_sentences(sorted(texts), check.model, backend=check.backend)


def suites_stage(t: TestAugConfig, descs: list[Description], generator: str, seed: int) -> Stage:
    """The TestAug suite (kept generated cases + expansion), the template-only baseline and
    the annotation sheet of each description's phase-1 sample: what the job publishes and
    the later stages measure."""
    t = t.view("suite", "baseline_nsamples")

    def run(ctx: StageContext):
        valid = ctx.input("topup")
        suite, baseline, repeats = build_suites(
            descs,
            valid,
            ctx.input("expand"),
            suite=t.suite,
            baseline_nsamples=t.baseline_nsamples,
            generator=generator,
            seed=seed,
        )
        rejected = rejected_rows(
            pa.concat_tables([ctx.input("parse", "rejected"), ctx.input("topup", "rejected")]),
            valid,
            ctx.input("expand", "rejected"),
            descs,
            t.suite,
        )
        rejected = pa.concat_tables([rejected, rejected_table(repeats)])
        return {
            "suite": suite,
            "baseline": baseline,
            "annotation_sheet": annotation_sheet(valid, descs),
            "rejected": rejected,
        }

    return Stage(
        "suites", run, inputs=("parse", "topup", "expand"), config=[t, generator, seed], version="3"
    )  # 3: repeats across descriptions


def diversity_stage(t: TestAugConfig, descs: list[Description]) -> Stage:
    """Table 5 (Self-BLEU-4, unique dependency paths; same sample size per description) and
    Table 4 (unique seed vs new sentences, seed vs new templates)."""

    def run(ctx: StageContext):
        from checkray.actors.spacy_nlp import load_spacy

        suite, baseline = ctx.input("suites", "suite"), ctx.input("suites", "baseline")
        table5 = testaug_table5(
            table5_suites(suite, baseline, t.suite), load_spacy(t.spacy), t.diversity_per_description
        )
        table4 = testaug_table4(descs, suite, ctx.input("expand", "templates").column("template").to_pylist())
        return {"table5": pa_table(table5), "table4": pa_table(table4)}

    return Stage("diversity", run, inputs=("expand", "suites"), config=t, version="1")


def patch_stage(cfg: CheckrayConfig, specs: Sequence[ModelSpec]) -> Stage:
    """Table 3: each trainable model refitted per seed and suite (``actors/testaug/patch.py``)."""
    from checkray.jobs.benchmark.stages import spec_fingerprint  # a spec with its model files digested

    t = cfg.section(TestAugConfig)
    settings = cfg.section(BenchmarkConfig).settings()

    def run(ctx: StageContext):
        from checkray.actors.testaug.patch import patched_failure_rates
        from checkray.jobs.zoo.job import embed_stage_name

        suites = table3_suites(ctx.input("suites", "suite"), ctx.input("suites", "baseline"), t.suite)
        rows, skipped = patched_failure_rates(suites, specs, t.patch, settings, embeddings_stage=embed_stage_name)
        return {"data": pa_table(rows, "model"), "skipped": pa_table(skipped, "model")}

    return Stage(
        "patch",
        run,
        inputs=("suites",),
        config=[t, [spec_fingerprint(s) for s in specs], asdict(settings)],
        version="1",
    )


def benchmark_stage(cfg: CheckrayConfig, specs: Sequence[ModelSpec]) -> Stage:
    """Failure rates per model x suite x capability x description (``topic``): a benchmark
    run of the suite and the baseline under DIR/benchmark; its summary is this stage's table."""
    from checkray.jobs.benchmark.stages import spec_fingerprint

    def run(ctx: StageContext):
        from checkray.jobs.benchmark.job import run_benchmark

        parts = [ctx.input("suites", "suite"), ctx.input("suites", "baseline")]
        _, summary = run_benchmark(parts, specs, cfg, out=RunDir(ctx.run.path(BENCHMARK_DIR)))
        return {"data": summary}

    return Stage(
        "benchmark",
        run,
        inputs=("suites",),
        config=[[spec_fingerprint(s) for s in specs], cfg.section(BenchmarkConfig)],
        version="1",
    )


def pa_table(rows: list[dict], empty_column: str | None = None) -> pa.Table:
    """``rows`` as a table; no rows: a table of just ``empty_column`` (strings), if named."""
    if rows or empty_column is None:
        return pa.Table.from_pylist(rows)
    return pa.table({empty_column: pa.array([], pa.string())})
