"""The ``benchmark`` job: test suites x models, all models at once on Ray.

suites (Parquet, TEST_CASE_SCHEMA) -> unique inputs -> model hosts fed concurrently (one
checkpoint per model) -> CheckList expectations -> summary -> leaderboard. Outputs in
``--out``: results.parquet, summary.parquet, examples.parquet, models.parquet,
leaderboard.html, provenance.json (what was tested, by content: ``jobs/benchmark/provenance.py``)
and, with ``--gate FILE``, junit.xml and summary.md (stage checkpoints under stages/). The
stages are in ``jobs/benchmark/stages.py``.

Other jobs call ``run_benchmark(cases, specs, cfg, out)`` in-process and reuse
``checkray.jobs.benchmark.report.leaderboard_sections`` for their reports.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import pyarrow as pa
import pyarrow.parquet as pq
import typer

from checkray.engine.benchmark.inputs import read_suite, suite_file
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig
from checkray.engine.compare.gate import Check, GateFile, read_gate
from checkray.engine.errors import InputError
from checkray.engine.report import Section as ReportSection
from checkray.engine.review import is_reviewed_file
from checkray.engine.stages import RunDir, StageRunner
from checkray.jobs.base import Job, require_out, run_job
from checkray.jobs.benchmark.config import BenchmarkConfig
from checkray.jobs.benchmark.provenance import PROVENANCE, benchmark_provenance
from checkray.jobs.benchmark.stages import cases_stage, evaluate_stage, predict_stage
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.options import AsGenerated
from checkray.jobs.zoo.resolve import resolve_models

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

    from checkray.jobs.compare.gating import GateBaseline


class BenchmarkJob(Job[BenchmarkConfig]):
    """suites -> unique inputs -> every model's predictions -> CheckList verdicts -> summary."""

    name, title, section = "benchmark", "checkray · benchmark", BenchmarkConfig
    published = ("results.parquet", "summary.parquet", "examples.parquet", "models.parquet", PROVENANCE)
    report_file = "leaderboard.html"

    def __init__(
        self,
        cfg: CheckrayConfig,
        models: Sequence[ModelSpec],
        suites: Sequence[pa.Table],
        suite_files: Sequence[str] | None = None,
        gate: GateFile | None = None,
    ):
        super().__init__(cfg, models)
        self.suites = list(suites)
        self.suite_files = list(suite_files) if suite_files else None  # recorded in provenance.json
        self.gate = gate
        # The run a gate's max_drop rules compare with: found and checked by check(), before
        # any model runs (None: no gate, or no such rule).
        self.gate_baseline: GateBaseline | None = None
        self.checks: list[Check] | None = None  # the gate's verdicts, once published
        # What publish() wrote (None until then).
        self.summary: pa.Table | None = None
        self.examples: pa.Table | None = None
        self.model_table: pa.Table | None = None
        self.provenance: dict | None = None
        self.results_at: tuple[FileSystem, str] | None = None  # results.parquet, read on demand
        if gate is not None:
            self.published = (*type(self).published, "junit.xml", "summary.md")

    def check(self) -> None:
        if not self.models:
            raise InputError("no models to benchmark")
        names = [s.name for s in self.models]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise InputError(f"model name(s) listed twice: {', '.join(duplicated)}")
        if self.gate is not None:
            from checkray.jobs.compare.gating import check_gate_baseline

            self.gate_baseline = check_gate_baseline(self.gate, self.suites, names)

    def stages(self):
        yield cases_stage(self.suites, self.conf)
        yield predict_stage(self.models, self.conf, self.cfg.section(CacheConfig))
        yield evaluate_stage(self.models, self.conf)

    def manifest_extra(self) -> dict:
        return {"provenance": self.provenance}

    def publish(self, runner: StageRunner) -> list[ReportSection]:
        from checkray.jobs.benchmark.report import leaderboard_sections

        run = runner.run
        self.summary = runner.output("evaluate", "summary")
        self.examples = runner.output("evaluate", "examples")
        self.model_table = runner.output("predict", "models")
        # results.parquet can hold millions of rows: copied as a file, never loaded here.
        tmp = run.path(f"results.parquet.tmp-{id(self):x}")
        run.fs.copy_file(run.path("stages", "evaluate", "results.parquet"), tmp)
        run.fs.move(tmp, run.path("results.parquet"))
        run.write_table("summary.parquet", self.summary)
        run.write_table("examples.parquet", self.examples)
        run.write_table("models.parquet", self.model_table)
        self.results_at = (run.fs, run.path("results.parquet"))
        cases = runner.output("cases", columns=["part", "suite", "case_id", "case_digest"])
        self.provenance = benchmark_provenance(self.models, cases, self.suite_files, self.conf, self.model_table)
        run.write_text(PROVENANCE, json.dumps(self.provenance, indent=1, default=str))
        if self.gate is not None:
            from checkray.jobs.compare.gating import benchmark_gate

            self.checks = benchmark_gate(
                self.gate,
                self.gate_baseline,
                run,
                models=[s.name for s in self.models],
                provenance=self.provenance,
                summary=self.summary,
                examples=self.examples,
            )
        return leaderboard_sections(
            self.summary, self.examples, self.model_table, {s.name: s.accuracy for s in self.models}
        )

    @property
    def results(self) -> pa.Table:
        """Every case's verdict for every model (read from results.parquet on demand)."""
        if self.results_at is None:
            raise RuntimeError("the benchmark job has not published its results yet")
        fs, path = self.results_at
        return pq.read_table(path, filesystem=fs)

    def subtitle(self) -> str:
        reviewed = sum(1 for f in self.suite_files or () if is_reviewed_file(f))
        people = f", {reviewed} of them reviewed by people" if reviewed else ""
        return f"{len(self.models)} models × {len(self.suites)} suite file(s){people}"


def read_named_suites(files: Sequence[str], use_reviewed: bool, job: str) -> tuple[list[pa.Table], list[str]]:
    """The suites the user named, each read reviewed when people reviewed it
    (``engine/benchmark/inputs.suite_file``), saying so on the console; returns the tables
    and the files actually read (for provenance.json)."""
    chosen = [suite_file(f, use_reviewed) for f in files]
    for c in chosen:
        if c.note:
            console.print(f"{job} · {c.note}", markup=False, highlight=False)
    return [read_suite(c.read) for c in chosen], [c.read for c in chosen]


def run_benchmark(
    cases: pa.Table | Sequence[pa.Table],
    specs: Sequence[ModelSpec],
    cfg: CheckrayConfig | BenchmarkConfig | None = None,
    out: str | RunDir | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Run ``specs`` on ``cases`` (one table, or one per suite file); return (results, summary).

    Other jobs call this in-process. With ``out``, the run (checkpoints, results.parquet,
    summary.parquet, leaderboard.html) is kept there; without it, in a temporary directory.
    """
    if not isinstance(cfg, CheckrayConfig):
        cfg = CheckrayConfig().with_section(cfg or BenchmarkConfig())
    parts = [cases] if isinstance(cases, pa.Table) else list(cases)
    scratch = tempfile.mkdtemp(prefix="checkray-bench-") if out is None else None
    try:
        job = BenchmarkJob(cfg, list(specs), parts)
        run_job(job, scratch or (out.uri if isinstance(out, RunDir) else out))
        return job.results, job.summary
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def failed_models(models: pa.Table) -> dict[str, str]:
    """Models that failed (to load, to predict, or whose host died), with their error."""
    return {r["model"]: r["error"] for r in models.to_pylist() if r["error"] is not None}


def benchmark_command(
    models: Optional[str] = typer.Option(None, "--models", "-m", help="Model registry (zoo.yaml) or zoo recipe."),
    suites: Optional[list[str]] = typer.Option(None, "--suites", "-s", help="Suite Parquet file(s): --suites A B C."),
    more_suites: Optional[list[str]] = typer.Argument(None, help="More suite files (after --suites)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config with a 'benchmark' section."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Texts per predict call."),
    max_concurrent: Optional[int] = typer.Option(None, "--max-concurrent", help="Model hosts alive at once."),
    max_cases: Optional[int] = typer.Option(
        None, "--max-cases-per-model", help="Sample at most N cases per model (whole test cases, every test)."
    ),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore checkpoints of an earlier run in --out."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Output directory (local path or s3://...)."),
    gate: Optional[Path] = typer.Option(
        None,
        "--gate",
        help="Gate file (YAML, docs/compare.md): exit 1 when a rule fails; writes junit.xml, summary.md.",
    ),
    mlflow_uri: Optional[str] = typer.Option(
        None, "--mlflow-uri", help="Log the results to this MLflow tracking URI (file:DIR, sqlite:///F, http://...)."
    ),
    mlflow_experiment: str = typer.Option("checkray", "--mlflow-experiment", help="MLflow experiment name."),
    as_generated: AsGenerated = None,
):
    """Run test suites against many models at once; write results, summary and a leaderboard."""
    all_suites = list(suites or []) + list(more_suites or [])
    cfg = load_config(
        config,
        {
            "benchmark.models": models,
            "benchmark.suites": all_suites or None,
            "benchmark.batch_size": batch_size,
            "benchmark.max_concurrent_models": max_concurrent,
            "benchmark.max_cases_per_model": max_cases,
            "benchmark.reviewed": None if as_generated is None else not as_generated,
            "out": out,
        },
    )
    bench = cfg.section(BenchmarkConfig)
    out = require_out(cfg.out)
    if not bench.models:
        raise InputError("no models: pass --models REGISTRY or set benchmark.models")
    if not bench.suites:
        raise InputError("no suites: pass --suites FILE [FILE ...] or set benchmark.suites")
    gate_file = read_gate(gate) if gate is not None else None
    if mlflow_uri:
        from checkray.jobs.compare.export import check_mlflow

        check_mlflow(mlflow_uri)
    parts, files = read_named_suites(bench.suites, bench.reviewed, "benchmark")
    specs = resolve_models(bench.models)
    run = RunDir(out)
    if fresh:
        run.claim(BenchmarkJob.name)  # only a benchmark run's own checkpoints are ever deleted
        run.delete_dir("stages")
    job = BenchmarkJob(cfg, specs, parts, suite_files=files, gate=gate_file)
    result = run_job(job, run.uri)
    failed = failed_models(job.model_table)
    for name, error in failed.items():
        console.print(f"[yellow]benchmark · {name} failed: {error}[/yellow]")
    if len(failed) == len(specs):
        raise InputError(f"every model failed (first: {next(iter(failed))}: {next(iter(failed.values()))})")
    typer.echo(
        f"wrote {run.uri}/results.parquet, summary.parquet, examples.parquet, models.parquet, provenance.json, "
        "leaderboard.html" + (", junit.xml, summary.md" if gate_file else "")
    )
    if mlflow_uri:
        from checkray.jobs.compare.export import log_benchmark

        logged = log_benchmark(run.uri, mlflow_uri, mlflow_experiment)
        typer.echo(f"mlflow · logged run {logged} to {mlflow_uri} (experiment '{mlflow_experiment}')")
    if job.checks is not None:
        from checkray.jobs.compare.gating import finish_gate

        finish_gate(job.checks, result.run)
