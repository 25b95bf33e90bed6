"""The ``benchmark`` job: test suites x models, every model in its own Ray actor.

suites (Parquet, TEST_CASE_SCHEMA) -> unique inputs -> one actor per model, batches fed
concurrently -> CheckList expectations -> summary -> leaderboard. Outputs in ``--out``:
results.parquet, summary.parquet, leaderboard.html (stage checkpoints under stages/).

Other jobs call ``run_benchmark(cases, specs, cfg, out)`` in-process and reuse
``jobs.benchmark.report.leaderboard_sections`` for their reports.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import typer

from engine.benchmark.expectations import evaluate_cases, label_map_error
from engine.benchmark.inputs import prepare_cases, read_suite
from engine.benchmark.registry import ModelSpec
from engine.benchmark.summary import summarize
from engine.errors import InputError
from engine.report import Section as ReportSection
from engine.runtime import cluster_resources
from engine.stages import RunDir, Stage, StageContext, StageRunner, fingerprint, table_bytes
from jobs.base import Job, require_out, run_job
from jobs.benchmark.config import BenchmarkConfig
from jobs.config import CheckrayConfig, load_config
from jobs.console import console
from jobs.zoo.resolve import resolve_models

RESULTS_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("suite", pa.string()),
        pa.field("version", pa.string()),
        pa.field("case_id", pa.string()),
        pa.field("capability", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("test_type", pa.string()),
        pa.field("text", pa.string()),
        pa.field("expected_label", pa.string()),
        pa.field("perturbs", pa.string()),
        pa.field("predicted", pa.string()),
        pa.field("probabilities", pa.list_(pa.float32())),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("pass", pa.bool_()),
        pa.field("error", pa.string()),
    ]
)
MODELS_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("family", pa.string()),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("accuracy", pa.float64()),
        pa.field("error", pa.string()),
        pa.field("load_seconds", pa.float64()),
        pa.field("ready_seconds", pa.float64()),
        pa.field("predict_seconds", pa.float64()),
        pa.field("probs", pa.list_(pa.float32())),
    ]
)


def _spec_fingerprint(spec: ModelSpec) -> dict:
    """A spec plus its weights' modification time, so a retrained model file reruns."""
    stamp = None
    if spec.path and Path(spec.path).exists():
        stamp = Path(spec.path).stat().st_mtime_ns
    return {"spec": spec.model_dump(mode="json"), "mtime": stamp}


def cases_stage(parts: Sequence[pa.Table], bench: BenchmarkConfig) -> Stage:
    digest = fingerprint([hash_table(t) for t in parts])

    def run(ctx: StageContext):
        cases, inputs = prepare_cases(parts, dedup=bench.dedup_texts)
        return {"data": cases, "inputs": inputs}

    return Stage("cases", run, config=bench.dedup_texts, external=(digest,))


def hash_table(table: pa.Table) -> str:
    return hashlib.sha256(table_bytes(table)).hexdigest()[:20]


@contextmanager
def model_progress(models: Sequence[str], total: int):
    """Per-model progress: a rich bar per model on a terminal, and a line per model event."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    )
    tasks = {m: progress.add_task(m, total=max(total, 1)) for m in models}

    def on_event(model: str, status: str, done: int, n: int) -> None:
        progress.update(tasks[model], completed=done)
        if status == "failed":
            console.print(f"[yellow]benchmark · {model}: failed after {done}/{n} inputs[/yellow]")
        elif status in ("loaded", "done"):
            console.print(f"[dim]benchmark · {model}: {status} ({done}/{n} inputs)[/dim]")

    with progress:
        yield on_event


def needed_inputs(cases: pa.Table, specs: Sequence[ModelSpec], bench: BenchmarkConfig) -> dict[str, list[int]]:
    """Per model, the inputs of the suites whose labels it can produce (by its spec)."""
    suites = cases.column("suite").to_pylist()
    expected, keys = cases.column("expected_label").to_pylist(), cases.column("input_key").to_pylist()
    wanted: dict[str, set[str]] = {}
    for suite, label in zip(suites, expected):
        wanted.setdefault(suite, set()).update([label] if label is not None else [])
    out = {}
    for spec in specs:
        ok = {s for s, labels in wanted.items() if label_map_error(s, labels, spec.labels, bench.settings()) is None}
        out[spec.name] = sorted({k for s, k in zip(suites, keys) if s in ok})
    return out


def predict_stage(specs: Sequence[ModelSpec], bench: BenchmarkConfig) -> Stage:
    def run(ctx: StageContext):
        from actors.benchmark.predictor import plan_predictors, predict_all

        inputs = ctx.input("cases", "inputs")
        texts = inputs.column("text").to_pylist()
        pairs = inputs.column("text_pair").to_pylist() if inputs.column("text_pair").null_count < len(texts) else None
        needed = needed_inputs(ctx.input("cases", columns=["suite", "expected_label", "input_key"]), specs, bench)
        plan = plan_predictors(
            cluster_resources(), bench.backend, len(specs), bench.max_concurrent_models, bench.gpu_fraction
        )
        with model_progress([s.name for s in specs], len(texts)) as on_event:
            runs = predict_all(
                specs, texts, pairs, plan, bench.batch_size, bench.in_flight, on_event, needed, bench.share_encoders
            )
        rows = []
        for spec in specs:
            r = runs[spec.name]
            flat = None if r.probs is None else r.probs.reshape(-1).tolist()
            rows.append(
                {
                    "model": spec.name,
                    "family": spec.family,
                    "labels": r.labels,
                    "accuracy": spec.accuracy,
                    "error": r.error,
                    "load_seconds": r.load_seconds,
                    "ready_seconds": r.ready_seconds,
                    "predict_seconds": r.predict_seconds,
                    "probs": flat,
                }
            )
        return {"models": pa.Table.from_pylist(rows, schema=MODELS_SCHEMA)}

    return Stage("predict", run, inputs=("cases",), config=[[_spec_fingerprint(s) for s in specs], bench.backend])


def _model_results(cases: pa.Table, model: dict, n_inputs: int, bench: BenchmarkConfig) -> pa.Table:
    n, labels = cases.num_rows, list(model["labels"])
    predicted = np.full(n, None, dtype=object)
    passed = np.full(n, None, dtype=object)
    error: list[str | None] = [model["error"]] * n
    probs_col = pa.nulls(n, pa.list_(pa.float32()))
    if model["error"] is None:
        probs = np.asarray(model["probs"], dtype=np.float32).reshape(n_inputs, len(labels))
        keys = cases.column("input_key").to_numpy()
        parts = cases.column("part").to_numpy()
        for part in np.unique(parts):
            rows = np.flatnonzero(parts == part)
            ev = evaluate_cases(cases.take(rows), probs[keys[rows]], labels, bench.settings())
            predicted[rows], passed[rows] = ev.predicted, ev.passed
            for i, e in zip(rows.tolist(), ev.error):
                error[i] = e
        unscored = np.isnan(probs[keys]).any(axis=1) & np.array([e is None for e in error])
        predicted[unscored], passed[unscored] = None, None  # spec and loaded labels disagree
        for i in np.flatnonzero(unscored):
            error[i] = "model was not run on this input: its loaded labels differ from the spec's"
        case_probs = probs[keys]
        offsets = pa.array(np.arange(0, n * len(labels) + 1, len(labels), dtype=np.int32))
        probs_col = pa.ListArray.from_arrays(offsets, pa.array(case_probs.reshape(-1)))
    columns = {
        "model": pa.array([model["model"]] * n, pa.string()),
        **{
            c: cases.column(c)
            for c in (
                "suite",
                "version",
                "case_id",
                "capability",
                "topic",
                "test_type",
                "text",
                "expected_label",
                "perturbs",
            )
        },
        "predicted": pa.array(predicted.tolist(), pa.string()),
        "probabilities": probs_col,
        "labels": pa.array([labels] * n, pa.list_(pa.string())),
        "pass": pa.array(passed.tolist(), pa.bool_()),
        "error": pa.array(error, pa.string()),
    }
    return pa.table(columns, schema=RESULTS_SCHEMA)


def evaluate_stage(bench: BenchmarkConfig) -> Stage:
    def run(ctx: StageContext):
        cases = ctx.input("cases")
        n_inputs = ctx.done["cases"].outputs["inputs"]
        models = ctx.input("predict", "models").to_pylist()
        results = pa.concat_tables([_model_results(cases, m, n_inputs, bench) for m in models])
        return {"results": results, "summary": summarize(results)}

    return Stage("evaluate", run, inputs=("cases", "predict"), config=bench.settings())


class BenchmarkJob(Job[BenchmarkConfig]):
    """suites -> unique inputs -> every model's predictions -> CheckList verdicts -> summary."""

    name, title, section = "benchmark", "checkray · benchmark", BenchmarkConfig
    published = ("results.parquet", "summary.parquet")
    report_file = "leaderboard.html"

    def __init__(self, cfg: CheckrayConfig, models: Sequence[ModelSpec], suites: Sequence[pa.Table]):
        super().__init__(cfg, models)
        self.suites = list(suites)

    def check(self) -> None:
        if not self.models:
            raise InputError("no models to benchmark")
        names = [s.name for s in self.models]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise InputError(f"model name(s) listed twice: {', '.join(duplicated)}")

    def stages(self):
        yield cases_stage(self.suites, self.conf)
        yield predict_stage(self.models, self.conf)
        yield evaluate_stage(self.conf)

    def publish(self, runner: StageRunner) -> list[ReportSection]:
        from jobs.benchmark.report import leaderboard_sections

        self.results = runner.output("evaluate", "results")
        self.summary = runner.output("evaluate", "summary")
        runner.run.write_table("results.parquet", self.results)
        runner.run.write_table("summary.parquet", self.summary)
        return leaderboard_sections(
            self.results, self.summary, {s.name: s.accuracy for s in self.models}, self.conf.examples
        )

    def subtitle(self) -> str:
        return f"{len(self.models)} models × {len(self.suites)} suite file(s)"


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


def failed_models(results: pa.Table) -> dict[str, str]:
    """Models that produced no evaluated case at all, with their first error."""
    out = {}
    for model in pc.unique(results.column("model")).to_pylist():
        rows = results.filter(pc.equal(results.column("model"), model))
        if rows.column("pass").null_count == rows.num_rows:
            out[model] = next((e for e in rows.column("error").to_pylist() if e), "no case evaluated")
    return out


def benchmark_command(
    models: Optional[str] = typer.Option(None, "--models", "-m", help="Model registry (zoo.yaml) or zoo recipe."),
    suites: Optional[list[str]] = typer.Option(None, "--suites", "-s", help="Suite Parquet file(s): --suites A B C."),
    more_suites: Optional[list[str]] = typer.Argument(None, help="More suite files (after --suites)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config with a 'benchmark' section."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Texts per predict call."),
    max_concurrent: Optional[int] = typer.Option(None, "--max-concurrent", help="Models alive at once."),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore checkpoints of an earlier run in --out."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Output directory (local path or s3://...)."),
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
            "out": out,
        },
    )
    bench = cfg.section(BenchmarkConfig)
    out = require_out(cfg.out)
    if not bench.models:
        raise InputError("no models: pass --models REGISTRY or set benchmark.models")
    if not bench.suites:
        raise InputError("no suites: pass --suites FILE [FILE ...] or set benchmark.suites")
    parts = [read_suite(s) for s in bench.suites]
    specs = resolve_models(bench.models)
    run = RunDir(out)
    if fresh:
        run.delete_dir("stages")
    results, _ = run_benchmark(parts, specs, cfg, run)
    failed = failed_models(results)
    for name, error in failed.items():
        console.print(f"[yellow]benchmark · {name} failed: {error}[/yellow]")
    if len(failed) == len(specs):
        raise InputError(f"every model failed (first: {next(iter(failed))}: {next(iter(failed.values()))})")
    typer.echo(f"wrote {run.uri}/results.parquet, summary.parquet, leaderboard.html")
