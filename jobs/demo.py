"""``checkray demo``: the whole engine on the embedded default, ending in one report.

Local Ray on CPU, packaged models, the bundled Rotten Tomatoes sentences:

    topics -> templates suite -> model zoo -> MFTs (LLM, Li et al.)
           -> S2LCT (rule seeds + grammar expansion) -> COSTELLO (+ repair) -> TestAug
           -> benchmark (zoo x template and MFT suites)
           -> one report (topics, zoo, leaderboard, MFT Tables 7/8, S2LCT, COSTELLO, TestAug)

Each method adds its job here as it lands. Every step checkpoints under its own
sub-directory, so a rerun after a crash resumes where it stopped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import pyarrow.compute as pc
import typer

from jobs.config import CheckrayConfig, load_config
from engine.benchmark.registry import read_registry
from engine.report import Section, render, table_html
from engine.runtime import init_ray
from engine.stages import RunDir, StageRunner
from jobs.console import console, stage_printer

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


def demo_topics(cfg: CheckrayConfig, run: RunDir) -> list[Section]:
    from jobs.topics import job as topics

    topics_run = RunDir(run.path("topics"))
    runner = StageRunner(topics_run, on_stage=stage_printer("topics"))
    runner.run_all(topics.topic_stages(cfg))
    sections = topics.publish(runner, cfg)
    topics_run.write_text("report.html", render("checkray · topics", sections))
    return sections


def demo_templates(cfg: CheckrayConfig, run: RunDir):
    from jobs.templates.job import run_templates

    templates_run, expansion = run_templates(cfg, run.path("templates"))
    caps = expansion.cases.column("capability").to_pylist()
    rows = [{"capability": c, "cases": caps.count(c)} for c in sorted(set(caps))]
    section = Section("CheckList template suite", [table_html(rows)],
                      f"{expansion.cases.num_rows} MFT cases expanded from {cfg.section('templates').spec}.")
    return expansion.cases, [section]


def demo_benchmark(cfg: CheckrayConfig, run: RunDir, suites, specs) -> list[Section]:
    from jobs.benchmark.job import run_benchmark
    from jobs.benchmark.report import leaderboard_sections
    from jobs.mft.evaluate import table7, table8

    results, summary = run_benchmark(suites, specs, cfg, out=RunDir(run.path("benchmark")))
    bench = cfg.section("benchmark")
    sections = leaderboard_sections(results, summary, {s.name: s.accuracy for s in specs}, bench.examples)
    mft = results.filter(pc.starts_with(results.column("suite"), "mft-"))
    if mft.num_rows:
        sections.append(Section("MFT evaluation: Table 7 layout (accuracy; ± std over versions)",
                                [table_html(table7(mft, specs))]))
        sections.append(Section("MFT evaluation: Table 8 layout (accuracy per MFT topic)", [table_html(table8(mft))]))
    return sections


def demo_command(
    out: str = typer.Option("runs/demo", "--out", "-o", help="Run directory."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Config (default: configs/demo.yaml)."),
):
    """Run every method on the bundled corpus with packaged models; write one report."""
    from jobs.mft.job import run_mft
    from jobs.zoo.job import run_zoo, zoo_section

    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    cfg = load_config(path)
    init_ray(cfg.runtime)
    run = RunDir(out)
    timings, sections = [], []

    def step(name, fn):
        start = time.perf_counter()
        result = fn()
        timings.append({"step": name, "seconds": round(time.perf_counter() - start, 1)})
        return result

    topic_sections = step("topics", lambda: demo_topics(cfg, run))
    template_suite, template_sections = step("templates", lambda: demo_templates(cfg, run))
    step("zoo", lambda: run_zoo(cfg, run.path("zoo")))
    specs = read_registry(run.path("zoo", "zoo.yaml"))  # model paths resolved against the zoo dir
    mft_run, mft_sections = step("mft", lambda: run_mft(cfg, run.path("topics"), run.path("mft")))
    from engine.benchmark.inputs import read_suite

    mft_suite = read_suite(mft_run.path("suite.parquet"))
    # Each method's own job, on the same corpus and zoo; each writes its run directory and
    # report under runs/demo/<method>/ and hands its sections to the combined report.
    from jobs.costello.job import run_costello
    from jobs.s2lct.job import run_s2lct
    from jobs.testaug.job import run_testaug

    _, s2lct_sections = step("s2lct", lambda: run_s2lct(cfg, run.path("s2lct"), specs))
    _, costello_sections = step("costello", lambda: run_costello(cfg, run.path("costello"), specs))
    _, testaug_sections = step("testaug", lambda: run_testaug(cfg, run.path("testaug"), specs))
    bench_sections = step("benchmark", lambda: demo_benchmark(cfg, run, [template_suite, mft_suite], specs))

    sections = (topic_sections + template_sections + [zoo_section(specs)] + mft_sections + bench_sections
                + s2lct_sections + costello_sections + testaug_sections
                + [Section("Demo timings", [table_html(timings)])])
    run.write_text("report.html", render("checkray · demo report", sections, subtitle=f"config {path or 'defaults'}"))
    console.print(f"[bold green]demo report: {run.path('report.html')}[/bold green]")
