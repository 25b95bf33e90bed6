"""``checkray demo``: the whole engine on the embedded default, ending in one report.

Local Ray on CPU, packaged models, the bundled Rotten Tomatoes sentences. The demo is a
list of jobs, each run by ``run_job`` into its own sub-directory (so a rerun after a crash
resumes where it stopped), each built from what the earlier ones produced:

    topics -> templates suite -> model zoo -> MFTs (LLM, Li et al.)
           -> S2LCT -> COSTELLO (+ repair) -> TestAug
           -> benchmark (zoo x template and MFT suites)
           -> one report (every job's sections, then the timings)
           -> index.html linking every job's report (``jobs/index.py``)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
import typer

from checkray.engine.benchmark.inputs import read_suite
from checkray.engine.benchmark.registry import ModelSpec, read_registry
from checkray.engine.report import Section, table_html, write_assets, write_page
from checkray.engine.stages import RunDir
from checkray.jobs.base import Job, JobResult, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.index import DEMO_TIMINGS, write_index
from checkray.jobs.runlog import RUN_LOG

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"


@dataclass
class DemoState:
    """What the steps hand each other."""

    cfg: CheckrayConfig
    run: RunDir
    specs: list[ModelSpec] = field(default_factory=list)  # the zoo
    suites: list[pa.Table] = field(default_factory=list)  # for the final benchmark

    def path(self, step: str) -> str:
        return self.run.path(step)


@dataclass
class Step:
    name: str
    job: Callable[[DemoState], Job]  # the job, built from the state
    after: Callable[[DemoState, JobResult], list[Section]] = lambda state, result: result.sections


def _templates_done(state: DemoState, result: JobResult) -> list[Section]:
    state.suites.append(read_suite(result.path("suite.parquet")))
    return result.sections


def _zoo_done(state: DemoState, result: JobResult) -> list[Section]:
    state.specs = read_registry(state.run.path("zoo", "zoo.yaml"))  # model paths resolved against the zoo dir
    return result.sections


def _mft_done(state: DemoState, result: JobResult) -> list[Section]:
    state.suites.append(read_suite(result.path("suite.parquet")))
    return result.sections


def _costello_done(state: DemoState, result: JobResult) -> list[Section]:
    """COSTELLO's repair step follows on the most violated model (``repair.model``)."""
    from checkray.jobs.costello.repair import repair_after

    return result.sections + repair_after(state.cfg, result.run)


def _benchmark_done(state: DemoState, result: JobResult) -> list[Section]:
    from checkray.engine.mft.tables import mft_table7, mft_table8
    from checkray.jobs.mft.report import TABLE7_TITLE, TABLE8_TITLE

    sections = list(result.sections)
    results = result.table("results.parquet")
    mft = results.filter(pc.starts_with(results.column("suite"), "mft-"))
    if mft.num_rows:
        sections.append(Section(TABLE7_TITLE, [table_html(mft_table7(mft, state.specs))]))
        sections.append(Section(TABLE8_TITLE, [table_html(mft_table8(mft))]))
    return sections


def demo_steps() -> list[Step]:
    from checkray.jobs.benchmark.job import BenchmarkJob
    from checkray.jobs.costello.job import CostelloJob
    from checkray.jobs.mft.job import MFTJob
    from checkray.jobs.s2lct.job import S2lctJob
    from checkray.jobs.templates.job import TemplatesJob
    from checkray.jobs.testaug.job import TestAugJob
    from checkray.jobs.topics.job import TopicsJob
    from checkray.jobs.zoo.job import ZooJob

    return [
        Step("topics", lambda s: TopicsJob(s.cfg)),
        Step("templates", lambda s: TemplatesJob(s.cfg), _templates_done),
        Step("zoo", lambda s: ZooJob(s.cfg), _zoo_done),
        Step("mft", lambda s: MFTJob(s.cfg, topics_dir=s.path("topics")), _mft_done),
        Step("s2lct", lambda s: S2lctJob(s.cfg, models=s.specs)),
        Step("costello", lambda s: CostelloJob(s.cfg, models=s.specs), _costello_done),
        Step("testaug", lambda s: TestAugJob(s.cfg, models=s.specs)),
        Step("benchmark", lambda s: BenchmarkJob(s.cfg, s.specs, s.suites), _benchmark_done),
    ]


# The combined report reads best with the suites before the methods that test embeddings.
REPORT_ORDER = ("topics", "templates", "zoo", "mft", "benchmark", "s2lct", "costello", "testaug")


def run_demo(cfg: CheckrayConfig, out: str, steps: list[Step] | None = None) -> RunDir:
    run = RunDir(out)
    run.claim("demo")  # each step's job claims its own sub-directory
    RUN_LOG.attach(run)  # one log for the whole demo: DIR/logs/checkray.log
    with run.lock("demo"):
        state = DemoState(cfg, run)
        write_assets(run)  # DIR/_checkray/: the one plotly bundle every page of the demo loads
        timings, sections = [], {}
        for step in steps or demo_steps():
            start = time.perf_counter()
            run.reserve(step.name)  # a sub-directory the demo did not make is refused
            result = run_job(step.job(state), state.path(step.name))
            sections[step.name] = step.after(state, result)
            timings.append({"step": step.name, "seconds": round(time.perf_counter() - start, 1)})
        ordered = [sec for name in REPORT_ORDER for sec in sections.get(name, [])]
        ordered += [sec for name, secs in sections.items() if name not in REPORT_ORDER for sec in secs]
        ordered.append(Section("Demo timings", [table_html(timings)]))
        write_page(run, "report.html", "checkray · demo report", ordered, subtitle=cfg.corpus.path)
        run.write_text(DEMO_TIMINGS, json.dumps({"steps": timings}, indent=1))
        write_index(run, "checkray · demo")  # DIR/index.html: every report, config, versions, times, gates
    return run


def demo_command(
    out: str = typer.Option("runs/demo", "--out", "-o", help="Run directory."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Config (default: configs/demo.yaml)."),
):
    """Run every method on the bundled corpus with packaged models; write one report."""
    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    run = run_demo(load_config(path), out)
    console.print(f"[bold green]demo report: {run.path('report.html')}[/bold green]")
    console.print(f"[bold green]index of every report: {run.path('index.html')}[/bold green]")
