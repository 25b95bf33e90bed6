"""The ``s2lct`` job (S²LCT): specification-based seeds, syntax-based expansions.

Stages: parse -> grammar -> seeds -> expand -> suite (``jobs/s2lct/stages.py``); with
models also benchmark -> table3, coverage, explain (``jobs/s2lct/evaluate.py``) and
consistency (``jobs/s2lct/consistency.py``).

Outputs in ``--out DIR``: suite.parquet (seeds + expansions, common schema),
grammar.parquet, report.html; with ``--models`` also the benchmark (DIR/benchmark/),
table3.parquet, coverage.parquet, consistency.parquet and consistency_summary.parquet.
Stages are checkpointed under DIR/stages/, so a rerun resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import typer

from checkray.engine.cache import CacheConfig
from checkray.engine.corpus import read_corpus
from checkray.engine.errors import InputError
from checkray.engine.report import Section as ReportSection
from checkray.engine.s2lct.config import S2lctConfig
from checkray.engine.s2lct.models import EvaluationModels, evaluation_models
from checkray.engine.s2lct.spec import CapabilitySpec, LabelNote, check_corpus_labels, load_capabilities
from checkray.engine.stages import Stage, StageRunner
from checkray.jobs.base import Job, QualityTable, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.options import ConfigFile, LabelColumn, Labels, RunOut, TextColumn, corpus_overrides
from checkray.jobs.s2lct.consistency import consistency_stage
from checkray.jobs.s2lct.evaluate import benchmark_stage, coverage_stage, explain_stage, table3_stage
from checkray.jobs.s2lct.report import Consistency, Evaluation, s2lct_sections
from checkray.jobs.s2lct.stages import (
    confidence_stage,
    expand_stage,
    grammar_stage,
    label_check_on,
    parse_stage,
    preflight,
    search_corpus_config,
    seeds_stage,
    suite_stage,
)
from checkray.jobs.zoo.resolve import select_models

SUITE_FILE, GRAMMAR_FILE, REPORT_FILE = "suite.parquet", "grammar.parquet", "report.html"
REJECTED_FILE = "rejected.parquet"  # candidates (seeds, fills) an automatic check refused, with the reason
TABLE3_FILE, COVERAGE_FILE = "table3.parquet", "coverage.parquet"
CONSISTENCY_FILE = "consistency.parquet"
CONSISTENCY_SUMMARY_FILE = "consistency_summary.parquet"  # label consistency per capability
# The published files the evaluation stages' outputs become: file -> (stage, output).
EVALUATION_FILES = {
    TABLE3_FILE: ("table3", "data"),
    COVERAGE_FILE: ("coverage", "data"),
    CONSISTENCY_FILE: ("consistency", "data"),
    CONSISTENCY_SUMMARY_FILE: ("consistency", "summary"),
}


class S2lctJob(Job[S2lctConfig]):
    """parse -> grammar -> seeds -> expand -> suite; publishes the suite and the reference
    grammar. With models (given, or ``s2lct.models``) the evaluation stages run too and
    their tables are published."""

    name, title, section = "s2lct", "checkray · S²LCT", S2lctConfig
    suite_file = SUITE_FILE
    published = (SUITE_FILE, GRAMMAR_FILE, REJECTED_FILE)
    quality = (QualityTable(CONSISTENCY_SUMMARY_FILE, "S²LCT label consistency per capability"),)

    def check(self) -> None:
        s = self.conf
        self.capabilities = load_capabilities(s.capabilities or None)
        given = self.models
        self.models = select_models(given, s.models, s.only_models, what="s2lct.only_models")
        # The judge of the label-consistency stage may be any model of the registry.
        self.judges = select_models(given, s.models) if self.models else None
        self.evaluation_models: EvaluationModels | None = evaluation_models(self.models, s) if self.models else None
        self.label_notes = corpus_label_notes(self.cfg, s, self.capabilities, self.seed)
        for note in self.label_notes:
            console.print(f"[yellow]s2lct · warning · {note.message}[/yellow]", highlight=False, soft_wrap=True)
        preflight(s)
        planned = set(self.evaluation_stages())
        self.published = (
            *type(self).published,
            *(file for file, (stage, _) in EVALUATION_FILES.items() if stage in planned),
        )

    def stages(self):
        s, seed = self.conf, self.seed
        yield parse_stage(self.cfg, s, self.capabilities, seed)
        yield grammar_stage(s)
        if label_check_on(s):
            yield confidence_stage(s, seed, self.cfg.section(CacheConfig))
        yield seeds_stage(self.capabilities, s, seed)
        yield expand_stage(s, seed)
        yield suite_stage(s, seed)
        for build in self.evaluation_stages().values():
            yield build()

    def evaluation_stages(self) -> dict[str, Callable[[], Stage]]:
        """The stages that run with models, by name (built when the job reaches them)."""
        models, s, seed = self.evaluation_models, self.conf, self.seed
        if models is None:
            return {}
        cache_cfg = self.cfg.section(CacheConfig)
        stages: dict[str, Callable[[], Stage]] = {
            "benchmark": lambda: benchmark_stage(self.cfg, models.benchmark, s.models),
            "table3": table3_stage,
        }
        if models.coverage:
            stages["coverage"] = lambda: coverage_stage(
                s.coverage, models.coverage, seed, self.cfg.corpus.path, s.models
            )
        if models.explain:
            stages["explain"] = lambda: explain_stage(s.explain, models.explain, cache_cfg, s.models)
        if s.consistency.enabled:
            stages["consistency"] = lambda: consistency_stage(s, self.capabilities, self.judges, seed, cache_cfg)
        return stages

    def publish(self, runner: StageRunner) -> list[ReportSection]:
        run = runner.run
        suite, grammar = runner.output("suite"), runner.output("grammar")
        run.write_table(SUITE_FILE, suite)
        run.write_table(GRAMMAR_FILE, grammar)
        run.write_table(REJECTED_FILE, runner.output("suite", "rejected"))
        for file, (stage, output) in EVALUATION_FILES.items():
            if stage in runner.done:
                run.write_table(file, runner.output(stage, output))
        models = self.evaluation_models
        evaluation = read_evaluation(runner, models) if models is not None else None
        return s2lct_sections(runner, suite, grammar, self.capabilities, self.conf, evaluation, self.label_notes)


def read_evaluation(runner: StageRunner, models: EvaluationModels) -> Evaluation:
    """What the evaluation stages wrote, for the report."""

    def rows(stage: str) -> list[dict]:
        return runner.output(stage).to_pylist() if stage in runner.done else []

    consistency = None
    if "consistency" in runner.done:
        consistency = Consistency(
            cases=runner.output("consistency"),
            summary=runner.output("consistency", "summary").to_pylist(),
            info=runner.output("consistency", "info").to_pylist()[0],
        )
    return Evaluation(
        table3=rows("table3"),
        coverage=rows("coverage"),
        explanations=rows("explain"),
        notes=list(models.notes),
        consistency=consistency,
    )


def corpus_label_notes(cfg: CheckrayConfig, s: S2lctConfig, specs: list[CapabilitySpec], seed: int) -> list[LabelNote]:
    """One note per capability whose rules need a label the searched corpus lacks; a
    one-line error when its labels share none with the rules' (a label map is missing)."""
    corpus = read_corpus(search_corpus_config(cfg, s, seed))
    labels = {v for v in corpus.column("label").to_pylist() if v is not None}
    if not labels:
        raise InputError(f"{cfg.corpus.path}: S2LCT needs a labeled corpus (the label column is empty)")
    return check_corpus_labels(
        specs, labels, neutral_label=s.neutral_label, neutral_proxy=s.neutral_proxy, fluent=s.wrappers == "fluent"
    )


def s2lct_command(
    corpus: Optional[str] = typer.Option(
        None, "--corpus", help="Labeled corpus (.parquet/.csv/.jsonl) or builtin:<name>."
    ),
    out: RunOut = None,
    models: Optional[str] = typer.Option(
        None, "--models", "-m", help="Model registry (zoo.yaml): benchmark the suite."
    ),
    config: ConfigFile = None,
    text_column: TextColumn = None,
    label_column: LabelColumn = None,
    labels: Labels = None,
    capabilities: Optional[list[str]] = typer.Option(None, "--capabilities", help="Capability spec files or folders."),
    sample: Optional[int] = typer.Option(None, "--sample", help="Search N corpus sentences drawn at random."),
    max_seeds: Optional[int] = typer.Option(None, "--max-seeds", help="Seeds per capability."),
    k: Optional[int] = typer.Option(None, "-k", help="Masked sentences per seed (Algorithm 1)."),
):
    """S²LCT: seeds found by capability rules, expanded where a reference grammar says sentences have more."""
    cfg = load_config(
        config,
        {
            **corpus_overrides(corpus, text_column, label_column, labels),
            "s2lct.models": models,
            "s2lct.capabilities": capabilities or None,
            "s2lct.search_sample": sample,
            "s2lct.max_seeds": max_seeds,
            "s2lct.k": k,
            "out": out,
        },
    )
    run = run_job(S2lctJob(cfg)).run
    typer.echo(f"wrote {run.uri}/{SUITE_FILE}, {GRAMMAR_FILE}, {REJECTED_FILE}, {REPORT_FILE}")
