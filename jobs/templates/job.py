"""The ``templates`` job: a CheckList-style capability spec (JSONL/YAML) -> an MFT suite.

``checkray templates --spec FILE --out DIR`` writes ``DIR/suite.parquet`` (the common
test-case schema) atomically and prints one summary line with the counts per capability.
Expansion is pure and takes well under a second for hundreds of templates, so the job
writes its one output directly instead of checkpointing stages.
"""

from __future__ import annotations

from pathlib import Path

import typer

from checkray.engine.errors import InputError
from checkray.engine.report import Section, table_html
from checkray.engine.stages import RunDir, StageRunner
from checkray.engine.templates.expand import Expansion, expand, read_spec
from checkray.jobs.base import Job, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.templates.config import TemplatesConfig

SUITE_FILE = "suite.parquet"


def parse_label_map(text: str) -> dict[str, str]:
    """``"0=negative,1=positive"`` -> ``{"0": "negative", "1": "positive"}``."""
    mapping = {}
    for item in text.split(","):
        key, sep, name = item.partition("=")
        if not sep or not key.strip() or not name.strip():
            raise InputError(f"--label-map: expected INT=NAME[,INT=NAME...], got {item.strip()!r}")
        mapping[key.strip()] = name.strip()
    return mapping


class TemplatesJob(Job[TemplatesConfig]):
    """spec -> expanded MFT suite; no checkpointed stages (expansion is pure and fast)."""

    name, title, section = "templates", "checkray · templates", TemplatesConfig
    published = (SUITE_FILE,)
    report_file = None
    uses_ray = False

    def check(self) -> None:
        if not self.conf.spec:
            raise InputError("no spec: pass --spec FILE or set templates.spec in the config")

    def stages(self):
        return ()

    def publish(self, runner: StageRunner) -> list[Section]:
        t = self.conf
        self.expansion = expand(
            read_spec(t.spec, t.label_map),
            suite=t.suite or Path(t.spec).stem,
            nsamples=t.nsamples or None,
            seed=self.seed,
            max_combinations=t.max_combinations,
        )
        runner.run.write_table(SUITE_FILE, self.expansion.cases)
        caps = self.expansion.cases.column("capability").to_pylist()
        rows = [{"capability": c, "cases": caps.count(c)} for c in sorted(set(caps))]
        return [
            Section(
                "CheckList template suite",
                [table_html(rows)],
                f"{self.expansion.cases.num_rows} MFT cases expanded from {t.spec}.",
            )
        ]


def run_templates(cfg: CheckrayConfig, out: str) -> tuple[RunDir, Expansion]:
    result = run_job(TemplatesJob(cfg), out)
    return result.run, result.job.expansion


def summary_line(run: RunDir, expansion: Expansion, nsamples: int) -> str:
    counts = ", ".join(f"{cap} {n}" for cap, n in sorted(expansion.per_capability.items()))
    line = (
        f"templates: {expansion.cases.num_rows} cases from {expansion.templates} templates "
        f"({counts}); {expansion.duplicates} duplicates dropped"
    )
    if expansion.short:
        n = len(expansion.short)
        line += f"; {n} template{'s' if n > 1 else ''} gave fewer than {nsamples} (small or self-duplicating product)"
    return f"{line} -> {run.path(SUITE_FILE)}"


def templates_command(
    spec: str | None = typer.Option(None, "--spec", "-s", help="Capability spec: JSONL or YAML templates."),
    out: str | None = typer.Option(None, "--out", "-o", help="Output directory (local path or s3://...)."),
    nsamples: int | None = typer.Option(None, "--nsamples", "-n", help="Cases per template (0: all combinations)."),
    seed: int | None = typer.Option(None, "--seed", help="Sampling seed."),
    suite: str | None = typer.Option(None, "--suite", help="Suite name (default: spec file stem)."),
    label_map: str | None = typer.Option(None, "--label-map", help="Integer labels to names: 0=negative,1=positive."),
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML config with a 'templates' section."),
):
    """Expand CheckList-style templates into an MFT test suite (suite.parquet)."""
    cfg = load_config(
        config,
        {
            "templates.spec": spec,
            "templates.nsamples": nsamples,
            "templates.seed": seed,
            "templates.suite": suite,
            "templates.label_map": parse_label_map(label_map) if label_map else None,
            "out": out,
        },
    )
    run, expansion = run_templates(cfg, cfg.out)
    typer.echo(summary_line(run, expansion, cfg.section("templates").nsamples))
