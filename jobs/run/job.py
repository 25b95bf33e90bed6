"""``checkray run``: every method that serves the corpus's task, one merged suite, one
benchmark of the user's models (and baselines), one report.

    preflight (corpus, registry, which methods apply; before Ray starts)
    topics -> templates -> zoo (baselines, or the models under test when none are given)
           -> MFTs -> S2LCT -> COSTELLO (+ repair) -> TestAug
           -> suite (the classification suites merged, duplicates across methods dropped)
           -> benchmark (models under test + baselines x merged suite)
           -> one report (per model: where it fails, how sure, versus the best baseline;
              then every step's sections and the timings) and index.html

Each step is a job run by ``run_job`` into its own sub-directory of ``--out``, so a rerun
after a crash resumes where it stopped. ``checkray demo`` is this job on
``configs/demo.yaml`` (no registry: the zoo it trains is what it tests).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
import typer

from checkray.engine.benchmark.inputs import read_suite
from checkray.engine.benchmark.registry import ModelSpec, read_registry
from checkray.engine.corpus import read_corpus
from checkray.engine.errors import EmptySuiteError, InputError
from checkray.engine.memory import TreeRssSampler, mib
from checkray.engine.report import Section, table_html, write_assets, write_page
from checkray.engine.stages import RunDir, Stage, StageContext, StageRunner, fingerprint
from checkray.engine.suite_merge import merge_suites
from checkray.jobs.base import Job, JobResult, require_out, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.index import DEMO_TIMINGS, write_index
from checkray.jobs.options import AsGenerated, ConfigFile, LabelColumn, Labels, RunOut, TextColumn, corpus_overrides
from checkray.jobs.run.config import RunConfig
from checkray.jobs.run.plan import MethodChoice, check_models, plan_methods
from checkray.jobs.runlog import RUN_LOG

SUITE_FILE, MERGE_FILE = "suite.parquet", "merge.parquet"
# Each step's peak of the summed RSS of this process and its descendants (the local Ray's
# GCS, raylet and workers): what a step needs of the machine, shared pages counted per process.
PEAK_RSS = "peak_rss_mib"
DRIVER_PEAK_RSS = "driver_peak_rss_mib"  # this process alone: what stays in the driver


@dataclass
class RunState:
    """What the steps hand each other."""

    cfg: CheckrayConfig
    run: RunDir
    models: list[ModelSpec] = field(default_factory=list)  # under test (the zoo's when none given)
    baselines: list[ModelSpec] = field(default_factory=list)
    suites: list[pa.Table] = field(default_factory=list)  # classification suites, in merge order
    merged: pa.Table | None = None
    validity: str | None = None  # people's verdicts on the merged suite's generators, in words

    @property
    def all_models(self) -> list[ModelSpec]:
        return [*self.models, *self.baselines]

    def path(self, step: str) -> str:
        return self.run.path(step)


@dataclass
class Step:
    name: str
    job: Callable[[RunState], Job]  # the job, built from the state
    after: Callable[[RunState, JobResult], list[Section]] = lambda state, result: result.sections


class SuiteJob(Job):
    """The classification suites of the methods, merged (``engine/suite_merge.py``)."""

    name, title = "suite", "checkray · merged suite"
    suite_file = SUITE_FILE  # people's verdicts on each method's cases estimate its validity
    published = (SUITE_FILE, MERGE_FILE)
    report_file = None
    uses_ray = False

    def __init__(self, cfg: CheckrayConfig, parts: list[pa.Table]):
        super().__init__(cfg)
        self.parts = parts

    def check(self) -> None:
        if not self.parts:
            raise InputError("no method produced a suite to benchmark (see the methods each run skipped)")

    def stages(self):
        from checkray.jobs.benchmark.stages import hash_table

        def merge(ctx: StageContext):
            merged, counts = merge_suites(self.parts)
            return {"data": merged, "counts": pa.Table.from_pylist([c.__dict__ for c in counts])}

        yield Stage("merge", merge, external=(fingerprint([hash_table(t) for t in self.parts]),))

    def publish(self, runner: StageRunner) -> list[Section]:
        merged, counts = runner.output("merge"), runner.output("merge", "counts")
        runner.run.write_table(SUITE_FILE, merged)
        runner.run.write_table(MERGE_FILE, counts)
        return [
            Section(
                "Merged suite",
                [table_html(counts.to_pylist())],
                f"{merged.num_rows} cases from {len(self.parts)} suites; a case an earlier method already "
                "tests with the same expectation is dropped, one it tests with another label is kept and counted.",
            )
        ]


def _suite_done(state: RunState, result: JobResult) -> list[Section]:
    from checkray.jobs.benchmark.config import BenchmarkConfig
    from checkray.jobs.benchmark.job import read_named_suites

    named = result.path(result.job.suite_file)
    tables, _ = read_named_suites([named], state.cfg.section(BenchmarkConfig).reviewed, result.job.name)
    state.suites.extend(tables)
    return result.sections


def _zoo_done(state: RunState, result: JobResult) -> list[Section]:
    zoo = read_registry(state.run.path("zoo", "zoo.yaml"))  # model paths resolved against the zoo dir
    if state.models:
        state.baselines = [s.model_copy(update={"meta": {**s.meta, "baseline": True}}) for s in zoo]
    else:
        state.models = zoo
    return result.sections


def _costello_done(state: RunState, result: JobResult) -> list[Section]:
    """COSTELLO's repair step follows on the most violated model (``repair.model``)."""
    from checkray.jobs.costello.repair import repair_after

    return result.sections + repair_after(state.cfg, result.run)


def _merged_done(state: RunState, result: JobResult) -> list[Section]:
    from checkray.jobs.validity_estimate import VALIDITY_FILE

    state.merged = read_suite(result.path(SUITE_FILE))
    if result.run.exists(VALIDITY_FILE):
        state.validity = validity_in_words(result.run.read_table(VALIDITY_FILE).to_pylist())
    return result.sections


def validity_in_words(rows: list[dict]) -> str | None:
    """The cases-weighted share of a merged suite's cases people found valid on all three
    counts (label, fluency, capability), over the cases whose generator they judged."""
    judged = [r for r in rows if r.get("all_three") is not None and r.get("cases")]
    if not judged:
        return None
    cases = sum(r["cases"] for r in judged)
    share = sum(r["all_three"] * r["cases"] for r in judged) / cases
    total = sum(r.get("cases") or 0 for r in rows)
    return (
        f"about {share:.0%} valid on all three counts, over the {cases} of {total} cases whose generator people judged"
    )


def _benchmark_done(state: RunState, result: JobResult) -> list[Section]:
    from checkray.engine.mft.tables import mft_table7, mft_table8
    from checkray.jobs.mft.report import TABLE7_TITLE, TABLE8_TITLE
    from checkray.jobs.run.report import model_verdicts

    results = result.table("results.parquet")
    names, baselines = [s.name for s in state.models], [s.name for s in state.baselines]
    sections = model_verdicts(results, state.merged, names, baselines, state.validity) + list(result.sections)
    mft = results.filter(pc.starts_with(results.column("suite"), "mft-"))
    if mft.num_rows:
        sections.append(Section(TABLE7_TITLE, [table_html(mft_table7(mft, state.all_models))]))
        sections.append(Section(TABLE8_TITLE, [table_html(mft_table8(mft))]))
    return sections


def run_steps(choices: list[MethodChoice], zoo: bool, model_encoders: bool) -> list[Step]:
    """The steps of a run: the methods that run (``choices``), the zoo when needed, the
    merge and the benchmark."""
    from checkray.jobs.benchmark.job import BenchmarkJob
    from checkray.jobs.costello.job import CostelloJob
    from checkray.jobs.mft.job import MFTJob
    from checkray.jobs.s2lct.job import S2lctJob
    from checkray.jobs.templates.job import TemplatesJob
    from checkray.jobs.testaug.job import TestAugJob
    from checkray.jobs.topics.job import TopicsJob
    from checkray.jobs.zoo.job import ZooJob

    runs = {c.method for c in choices if c.runs}
    candidates = [
        ("mft", Step("topics", lambda s: TopicsJob(s.cfg))),
        ("templates", Step("templates", lambda s: TemplatesJob(s.cfg), _suite_done)),
        ("zoo", Step("zoo", lambda s: ZooJob(s.cfg), _zoo_done)),
        ("mft", Step("mft", lambda s: MFTJob(s.cfg, topics_dir=s.path("topics")), _suite_done)),
        ("s2lct", Step("s2lct", lambda s: S2lctJob(s.cfg, models=s.all_models), _suite_done)),
        (
            "costello",
            Step(
                "costello",
                lambda s: CostelloJob(s.cfg, models=s.all_models, model_encoders=model_encoders),
                _costello_done,
            ),
        ),
        ("testaug", Step("testaug", lambda s: TestAugJob(s.cfg, models=s.all_models), _suite_done)),
    ]
    steps = [step for need, step in candidates if need in runs or (need == "zoo" and zoo)]
    return steps + [
        Step("suite", lambda s: SuiteJob(s.cfg, s.suites), _merged_done),
        Step("benchmark", lambda s: BenchmarkJob(s.cfg, s.all_models, [s.merged]), _benchmark_done),
    ]


# The report reads best with the models' verdicts first, then the suites, then the
# methods that test embeddings.
REPORT_ORDER = ("benchmark", "suite", "topics", "templates", "zoo", "mft", "s2lct", "costello", "testaug")


@dataclass
class RunPlan:
    """What ``preflight`` decided before Ray starts."""

    choices: list[MethodChoice]
    models: list[ModelSpec]  # empty: the zoo's models are the models under test
    zoo: bool


def preflight(cfg: CheckrayConfig) -> RunPlan:
    """Read the corpus and the registry and decide the methods; one-line errors."""
    from checkray.jobs.zoo.resolve import resolve_models

    run = cfg.section(RunConfig)
    corpus = read_corpus(cfg.corpus)
    labels = (
        set(pc.unique(pc.drop_null(corpus.column("label"))).to_pylist()) if "label" in corpus.column_names else set()
    )
    models = resolve_models(run.models) if run.models else []
    if run.models:
        check_models(models, labels)
    zoo = not models or "zoo" in run.baselines
    if zoo and not labels:
        raise InputError(f"{cfg.corpus.path}: the zoo trains on labels and the corpus has none")
    if zoo and models:
        from checkray.engine.training import ZooConfig

        clash = sorted({s.name for s in models} & {m.name for m in cfg.section(ZooConfig).models})
        if clash:
            raise InputError(f"model name(s) {', '.join(clash)} are also zoo baselines: rename them in the registry")
    choices = plan_methods(cfg, labels)
    check_specs(cfg, {c.method for c in choices if c.runs})
    return RunPlan(choices, models, zoo)


def check_specs(cfg: CheckrayConfig, methods: set[str]) -> None:
    """Read the capability specs of the methods that will run (a bad record is a one-line
    error now, not after the topics step)."""
    from checkray.jobs.templates.job import TemplatesJob
    from checkray.jobs.testaug.job import TestAugJob

    if "templates" in methods:
        TemplatesJob(cfg).check()
    if "testaug" in methods:
        TestAugJob(cfg).check()


def run_pipeline(cfg: CheckrayConfig, out: str, steps: list[Step] | None = None, name: str = "run") -> RunDir:
    """Run ``steps`` (default: what ``preflight`` plans) into ``out``; write the report and
    the index."""
    plan = preflight(cfg)
    for choice in plan.choices:
        console.print(f"run · {choice.line()}", highlight=False, soft_wrap=True)
    steps = steps or run_steps(plan.choices, plan.zoo, cfg.section(RunConfig).test_model_encoders)
    run = RunDir(out)
    run.claim(name)  # each step's job claims its own sub-directory
    RUN_LOG.attach(run)  # one log for the whole run: DIR/logs/checkray.log
    with run.lock(name):
        state = RunState(cfg, run, models=list(plan.models))
        write_assets(run)  # DIR/_checkray/: the one plotly bundle every page of the run loads
        timings, sections = [], {}
        for step in steps:
            start = time.perf_counter()
            run.reserve(step.name)  # a sub-directory the run did not make is refused
            with TreeRssSampler(interval=0.5) as memory:  # the driver and the Ray it started
                sections[step.name] = run_step(step, state)
            timings.append(
                {
                    "step": step.name,
                    "seconds": round(time.perf_counter() - start, 1),
                    PEAK_RSS: round(mib(memory.peak_total)),
                    DRIVER_PEAK_RSS: round(mib(memory.peak_driver)),
                }
            )
        methods = Section(
            "Methods", [table_html([c.__dict__ for c in plan.choices])], "what ran, and why the rest did not"
        )
        ordered = [sec for name in REPORT_ORDER for sec in sections.get(name, [])]
        ordered += [sec for name, secs in sections.items() if name not in REPORT_ORDER for sec in secs]
        ordered += [
            methods,
            Section(
                "Timings",
                [table_html(timings)],
                f"{PEAK_RSS}: each step's peak of the summed resident memory of this process and the "
                f"processes it started (a local Ray's workers included); {DRIVER_PEAK_RSS}: this process alone",
            ),
        ]
        write_page(run, "report.html", f"checkray · {name} report", ordered, subtitle=cfg.corpus.path)
        run.write_text(DEMO_TIMINGS, json.dumps({"steps": timings}, indent=1))
        write_index(run, f"checkray · {name}")  # DIR/index.html: every report, config, versions, times, gates
    return run


def run_step(step: Step, state: RunState) -> list[Section]:
    """Run one step's job and what follows it. A method that kept no test case is said
    in the console and the report, and the run goes on without its suite: the methods
    that did keep cases are not lost to it (the merge refuses a run where none did)."""
    try:
        result = run_job(step.job(state), state.path(step.name))
    except EmptySuiteError as exc:
        console.print(f"run · {step.name}: {exc}; the run goes on without it", style="yellow", highlight=False)
        return [Section(f"{step.name}: no test case kept", [], str(exc))]
    return step.after(state, result)


def run_command(
    corpus: Optional[str] = typer.Option(None, "--corpus", help="Corpus file (parquet/csv/jsonl) or builtin:NAME."),
    text_column: TextColumn = None,
    label_column: LabelColumn = None,
    labels: Labels = None,
    models: Optional[str] = typer.Option(None, "--models", "-m", help="Model registry (YAML) of the models to test."),
    llm: Optional[str] = typer.Option(
        None, "--llm", help="The generating LLM: an OpenAI-compatible URL or builtin:NAME."
    ),
    methods: Optional[str] = typer.Option(
        None, "--methods", help="Comma-separated: templates,mft,s2lct,testaug,costello."
    ),
    baselines: Optional[str] = typer.Option(
        None, "--baselines", help="'zoo': models trained on the corpus, compared with."
    ),
    config: ConfigFile = None,
    out: RunOut = None,
    as_generated: AsGenerated = None,
):
    """Generate suites with every method that serves the corpus, merge them, benchmark the models."""
    overrides = {
        "benchmark.reviewed": None if as_generated is None else not as_generated,
        **corpus_overrides(corpus, text_column, label_column, labels),
        "run.models": models,
        "run.methods": methods.split(",") if methods else None,
        "run.baselines": baselines.split(",") if baselines else None,
        "out": out,
        **llm_overrides(llm),
    }
    cfg = load_config(config, overrides)
    run = run_pipeline(cfg, require_out(cfg.out))
    console.print(f"[bold green]report: {run.path('report.html')}[/bold green]")
    console.print(f"[bold green]index of every report: {run.path('index.html')}[/bold green]")


def llm_overrides(llm: str | None) -> dict[str, str]:
    """``--llm``: a URL is an OpenAI-compatible server (backend http), anything else a model."""
    if not llm:
        return {}
    if llm.startswith(("http://", "https://")):
        return {"llm.backend": "http", "llm.base_url": llm}
    return {"llm.model": llm}
