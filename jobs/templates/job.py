"""The ``templates`` job: a CheckList-style capability spec (JSONL/YAML) -> an MFT suite.

``checkray templates --spec FILE --out DIR`` writes ``DIR/suite.parquet`` (the common
test-case schema) atomically and prints one summary line with the counts per capability.
Expansion is pure and takes well under a second for hundreds of templates: it is one
stage, ``expand`` (the cases and what expansion counted), run without Ray.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import typer

from checkray.engine.errors import InputError
from checkray.engine.report import Section, table_html
from checkray.engine.stages import RunDir, Stage, StageContext, StageRunner, file_digest
from checkray.engine.templates.config import TemplatesConfig
from checkray.engine.templates.expand import expand, read_spec
from checkray.jobs.base import Job, JobResult, run_job
from checkray.jobs.config import CheckrayConfig, load_config

SUITE_FILE = "suite.parquet"
LEXICON_DISTRIBUTION = "checklist-pattern"  # its data fills the built-in ``@name`` pools
STATS_SCHEMA = pa.schema([("templates", pa.int64()), ("duplicates", pa.int64()), ("short", pa.list_(pa.string()))])


def parse_label_map(text: str) -> dict[str, str]:
    """``"0=negative,1=positive"`` -> ``{"0": "negative", "1": "positive"}``."""
    mapping = {}
    for item in text.split(","):
        key, sep, name = item.partition("=")
        if not sep or not key.strip() or not name.strip():
            raise InputError(f"--label-map: expected INT=NAME[,INT=NAME...], got {item.strip()!r}")
        mapping[key.strip()] = name.strip()
    return mapping


def lexicons_version() -> str | None:
    """The version of the package whose data fills ``@name`` pools (in the fingerprint:
    a reinstalled lexicon expands again)."""
    try:
        return importlib.metadata.version(LEXICON_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def expand_stage(t: TemplatesConfig, seed: int) -> Stage:
    """The spec expanded (``data``: the cases) and what expansion counted (``stats``: one
    row of templates, duplicates dropped, and the templates that gave fewer than asked)."""

    def run(ctx: StageContext):
        expansion = expand(
            read_spec(t.spec, t.label_map),
            suite=t.suite or Path(t.spec).stem,
            nsamples=t.nsamples or None,
            seed=seed,
            max_combinations=t.max_combinations,
        )
        stats = {"templates": expansion.templates, "duplicates": expansion.duplicates, "short": expansion.short}
        return {"data": expansion.cases, "stats": pa.Table.from_pylist([stats], schema=STATS_SCHEMA)}

    return Stage("expand", run, config=[t, seed, lexicons_version()], external=(file_digest(t.spec),))


@dataclass(frozen=True)
class ExpansionStats:
    """What a run's expansion counted, beside its suite."""

    templates: int
    duplicates: int
    short: list[str]

    @classmethod
    def read(cls, run: RunDir) -> ExpansionStats:
        (row,) = run.read_table("stages/expand/stats.parquet").to_pylist()
        return cls(row["templates"], row["duplicates"], list(row["short"] or []))


class TemplatesJob(Job[TemplatesConfig]):
    """spec -> expand -> suite.parquet; no Ray (expansion is pure and fast)."""

    name, title, section = "templates", "checkray · templates", TemplatesConfig
    suite_file = SUITE_FILE
    published = (SUITE_FILE,)
    report_file = None
    uses_ray = False

    def check(self) -> None:
        if not self.conf.spec:
            raise InputError("no spec: pass --spec FILE or set templates.spec in the config")
        read_spec(self.conf.spec, self.conf.label_map)  # a bad spec fails before the run directory is made

    def stages(self):
        yield expand_stage(self.conf, self.seed)

    def publish(self, runner: StageRunner) -> list[Section]:
        cases = runner.output("expand")
        runner.run.write_table(SUITE_FILE, cases)
        return [
            Section(
                "CheckList template suite",
                [table_html(capability_counts(cases))],
                f"{cases.num_rows} MFT cases expanded from {self.conf.spec}.",
            )
        ]


def capability_counts(cases: pa.Table) -> list[dict]:
    caps = cases.column("capability").to_pylist()
    return [{"capability": c, "cases": caps.count(c)} for c in sorted(set(caps))]


def run_templates(cfg: CheckrayConfig, out: str | None = None) -> JobResult:
    """Run the templates job into ``out`` (default: the config's ``out``)."""
    return run_job(TemplatesJob(cfg), out)


def summary_line(result: JobResult, nsamples: int) -> str:
    """One line: cases per capability, templates, duplicates dropped, short templates."""
    cases = result.table(SUITE_FILE, columns=["capability"])
    stats = ExpansionStats.read(result.run)
    counts = ", ".join(f"{r['capability']} {r['cases']}" for r in capability_counts(cases))
    line = (
        f"templates: {cases.num_rows} cases from {stats.templates} templates "
        f"({counts}); {stats.duplicates} duplicates dropped"
    )
    if stats.short:
        n = len(stats.short)
        line += f"; {n} template{'s' if n > 1 else ''} gave fewer than {nsamples} (small or self-duplicating product)"
    return f"{line} -> {result.path(SUITE_FILE)}"


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
    result = run_templates(cfg)
    typer.echo(summary_line(result, cfg.section(TemplatesConfig).nsamples))
