"""``checkray demo``: the whole engine on the embedded default, ending in one report.

Each method adds its job here as it lands; the report concatenates their sections.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from engine.config import load_config
from engine.report import render
from engine.runtime import init_ray
from engine.stages import RunDir, StageRunner
from jobs.app import app
from jobs.console import console, stage_printer

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


@app.command("demo")
def demo_command(
    out: str = typer.Option("runs/demo", "--out", "-o", help="Run directory."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Config (default: configs/demo.yaml)."),
):
    """Run every method on the bundled corpus with packaged models; write one report."""
    from jobs import topics

    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    cfg = load_config(path)
    init_ray(cfg.runtime)
    run = RunDir(out)
    sections = []

    topics_run = RunDir(f"{run.uri.rstrip('/')}/topics")
    runner = StageRunner(topics_run, on_stage=stage_printer("topics"))
    runner.run_all(topics.topic_stages(cfg))
    sections += topics.publish(runner, cfg)
    topics_run.write_text("report.html", render("checkray · topics", sections))

    run.write_text("report.html", render("checkray · demo report", sections, subtitle=f"config {path or 'defaults'}"))
    console.print(f"[bold green]demo report: {run.path('report.html')}[/bold green]")
