"""``checkray demo``: ``checkray run`` on the embedded default, ending in one report.

Local Ray on CPU, packaged models, the bundled Rotten Tomatoes sentences: the config is
``configs/demo.yaml``, which names no model registry, so the zoo the run trains on the
corpus is what it tests (``jobs/run/job.py`` has the steps).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.run.job import RunDir, Step, run_pipeline

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"


def run_demo(cfg: CheckrayConfig, out: str, steps: list[Step] | None = None) -> RunDir:
    return run_pipeline(cfg, out, steps, name="demo")


def demo_command(
    out: str = typer.Option("runs/demo", "--out", "-o", help="Run directory."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Config (default: configs/demo.yaml)."),
):
    """Run every method on the bundled corpus with packaged models; write one report."""
    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    run = run_demo(load_config(path), out)
    console.print(f"[bold green]demo report: {run.path('report.html')}[/bold green]")
    console.print(f"[bold green]index of every report: {run.path('index.html')}[/bold green]")
