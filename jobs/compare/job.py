"""``checkray compare``: did the candidate get worse than the baseline, and where?

    checkray compare --baseline RUN_OR_MODEL --candidate RUN_OR_MODEL --out DIR
        [--models REGISTRY --suites S ...] [--baseline-model M] [--candidate-model M]
        [--gate FILE] [--mlflow-uri URI]

Each side is a finished benchmark run directory (``--baseline-model`` picks its model when
it has several) or, with ``--models``, a model of that registry, benchmarked now on
``--suites`` into ``DIR/benchmark`` (a benchmark run of its own: checkpoints, results,
provenance). The two sides' verdicts are paired case by case (the suites must match:
case ids and content digests, ``checkray.engine.compare.pairing``) and compared at four levels
(overall, test type, capability, test) with McNemar's exact test and a seeded paired
bootstrap (``checkray.engine.compare.compare``). Outputs in ``DIR``: compare.parquet, flips.parquet,
compared.json (exactly what was compared), report.html, and with ``--gate`` junit.xml and
summary.md (exit 1 when a rule fails).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import typer

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.compare.compare import compare_paired, flips
from checkray.engine.compare.gate import Check, GateFile, evaluate_gate, read_gate
from checkray.engine.compare.pairing import pair_results
from checkray.engine.errors import InputError
from checkray.engine.report import Section as ReportSection
from checkray.engine.stages import RunDir, Stage, StageContext, StageRunner, path_digest
from checkray.jobs.base import Job, published_path, run_job
from checkray.jobs.benchmark.provenance import PROVENANCE, describe_model, model_record, read_provenance
from checkray.jobs.compare.config import CompareConfig
from checkray.jobs.compare.gating import (
    example_frame,
    finish_gate,
    model_results,
    pick_model,
    write_gate_files,
)
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.options import AsGenerated, ConfigFile, RunOut

BENCH_DIR = "benchmark"


@dataclass
class Side:
    """One side of a comparison: a finished benchmark run (and its model), or a model to run now."""

    role: str  # "baseline" | "candidate"
    given: str  # what the user passed
    run: str | None = None  # the benchmark run holding its results
    model: str | None = None  # the model's name in that run
    spec: ModelSpec | None = None  # set when the model runs now

    @property
    def flag(self) -> str:
        return f"--{self.role}-model"


def is_benchmark_run(value: str) -> bool:
    try:
        return RunDir(value).exists("manifest.json")
    except InputError:
        return False


def resolve_side(role: str, value: str, model: str | None, specs: Sequence[ModelSpec] | None) -> Side:
    """A run directory when ``value`` is one, else a model of the ``--models`` registry."""
    if is_benchmark_run(value):
        return Side(role, value, run=value, model=model)
    if specs is None:
        raise InputError(
            f"--{role} {value}: not a benchmark run directory (no manifest.json); "
            "to compare models, pass --models REGISTRY --suites FILE ..."
        )
    by_name = {s.name: s for s in specs}
    if value not in by_name:
        raise InputError(
            f"--{role} {value}: neither a benchmark run directory nor a model of --models (has: {', '.join(by_name)})"
        )
    if model is not None and model != value:
        raise InputError(f"--{role}-model {model}: --{role} already names the model {value}")
    return Side(role, value, model=value, spec=by_name[value])


def _side_info(side: Side, prov: dict | None) -> dict[str, Any]:
    return {
        "given": side.given,
        "run": side.run,
        "model": side.model,
        "ran_now": side.spec is not None,
        "identity": model_record(prov, side.model),
        "checkray": (prov or {}).get("checkray"),
        "environment": (prov or {}).get("environment"),
        "settings": (prov or {}).get("settings"),
    }


def differences(a: dict | None, b: dict | None) -> dict[str, list]:
    """Keys whose values differ between two flat dicts: key -> [a, b]."""
    a, b = a or {}, b or {}
    return {k: [a.get(k), b.get(k)] for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


class CompareJob(Job[CompareConfig]):
    """Pair two models' verdicts on the same suites; test and report the differences."""

    name, title, section = "compare", "checkray · compare", CompareConfig
    published = ("compare.parquet", "flips.parquet", "compared.json")
    uses_ray = False  # a side benchmarked now starts Ray in its own (nested) benchmark job

    def __init__(
        self,
        cfg: CheckrayConfig,
        baseline: Side,
        candidate: Side,
        suites: Sequence[pa.Table] = (),
        suite_files: Sequence[str] | None = None,
        gate: GateFile | None = None,
    ):
        super().__init__(cfg)
        self.sides = (baseline, candidate)
        self.suites, self.suite_files, self.gate = list(suites), suite_files, gate
        self.checks: list[Check] | None = None  # the gate's verdicts, once published
        # What publish() wrote (None until then).
        self.table: pa.Table | None = None
        self.flips: pa.Table | None = None
        self.info: dict[str, Any] | None = None  # compared.json
        if gate is not None:
            self.published = (*type(self).published, "junit.xml", "summary.md")

    def check(self) -> None:
        to_run = [s for s in self.sides if s.spec is not None]
        if to_run and not self.suites:
            raise InputError("models to benchmark now need suites: pass --suites FILE [FILE ...]")
        b, c = self.sides
        if b.spec is None and c.spec is None and b.run == c.run and b.model is not None and b.model == c.model:
            raise InputError(f"baseline and candidate are the same model '{b.model}' of the same run")

    def _benchmark_now(self, run: RunDir) -> None:
        from checkray.jobs.benchmark.job import BenchmarkJob

        specs = list({s.spec.name: s.spec for s in self.sides if s.spec is not None}.values())
        uri = f"{run.uri.rstrip('/')}/{BENCH_DIR}"
        run.reserve(BENCH_DIR)
        bench = run_job(BenchmarkJob(self.cfg, specs, self.suites, suite_files=self.suite_files), uri)
        errors = {r["model"]: r["error"] for r in bench.job.model_table.to_pylist() if r["error"]}
        for side in self.sides:
            if side.spec is not None:
                if side.model in errors:
                    raise InputError(f"{side.role} model {side.model} failed in the benchmark: {errors[side.model]}")
                side.run = uri

    def stages(self):
        run = self.runner.run
        if any(s.spec is not None for s in self.sides):
            self._benchmark_now(run)
        for side in self.sides:
            side.model = pick_model(RunDir(side.run), side.model, None, side.flag)
        if self.sides[0].run == self.sides[1].run and self.sides[0].model == self.sides[1].model:
            raise InputError(f"baseline and candidate are the same model '{self.sides[0].model}' of the same run")
        yield compare_stage(self.sides, self.conf)

    def publish(self, runner: StageRunner) -> list[ReportSection]:
        from checkray.jobs.compare.report import compare_sections

        run = runner.run
        self.table = runner.output("compare", "compare")
        self.flips = runner.output("compare", "flips")
        self.info = json.loads(runner.output("compare", "info").column("json")[0].as_py())
        run.write_table("compare.parquet", self.table)
        run.write_table("flips.parquet", self.flips)
        run.write_text("compared.json", json.dumps(self.info, indent=1, default=str))
        if self.gate is not None:
            self.checks = self._gate(run, runner.output("compare", "paired").to_pandas())
        return compare_sections(self.table, self.flips, self.info, self.conf, self.checks)

    def _gate(self, run: RunDir, paired: pd.DataFrame):
        base, cand = self.sides
        cand_run = RunDir(cand.run)
        summary = pq.read_table(published_path(cand_run, "benchmark", "summary.parquet"), filesystem=cand_run.fs)
        summary = summary.to_pandas()
        summary = summary[summary["model"] == cand.model]
        cells = summary[["model", "suite", "capability", "topic", "test_type", "n"]].copy()
        cells["passes"] = summary["n"] - summary["failures"]
        regressions = self.flips.to_pandas()
        regressions = regressions[regressions["direction"] == "pass->fail"].rename(
            columns={"candidate_predicted": "predicted"}
        )
        regressions["model"] = cand.model
        failing = example_frame(
            pq.read_table(published_path(cand_run, "benchmark", "examples.parquet"), filesystem=cand_run.fs)
        )
        columns = ["model", "suite", "capability", "topic", "test_type", "text", "expected", "predicted"]
        examples = pd.concat(
            [regressions[columns], failing[failing["model"] == cand.model]], ignore_index=True
        ).drop_duplicates(subset=["suite", "text", "expected"])
        if self.gate.baseline:
            from checkray.jobs.console import console

            console.print(
                f"[dim]gate · compare uses --baseline {base.given}; the gate file's baseline is not used[/dim]"
            )
        checks = evaluate_gate(self.gate, cells, {cand.model: paired}, examples, [cand.model])
        context = [
            f"baseline: {describe_model(self.info['baseline']['identity'], base.model)} (run {base.run})",
            f"candidate: {describe_model(self.info['candidate']['identity'], cand.model)} (run {cand.run})",
        ]
        write_gate_files(run, checks, "checkray compare gate", context)
        return checks

    def subtitle(self) -> str:
        b, c = self.sides
        return f"baseline {b.model} ({b.run}) vs candidate {c.model} ({c.run})"


def compare_stage(sides: Sequence[Side], conf: CompareConfig) -> Stage:
    base, cand = sides
    runs = [RunDir(s.run) for s in sides]
    external = tuple(path_digest(published_path(r, "benchmark", "results.parquet")) for r in runs)
    external += tuple(path_digest(r.path(PROVENANCE)) if r.exists(PROVENANCE) else "no-provenance" for r in runs)

    def run(ctx: StageContext):
        provs = [read_provenance(r) for r in runs]
        pairing = pair_results(
            model_results(runs[0], base.model),
            model_results(runs[1], cand.model),
            (provs[0] or {}).get("suites"),
            (provs[1] or {}).get("suites"),
        )
        if pairing.paired.empty:
            raise InputError("no case was judged for both models (did one of them fail on every suite?)")
        table = compare_paired(pairing.paired, conf.bootstrap, conf.confidence, conf.seed)
        info = {
            "baseline": _side_info(base, provs[0]),
            "candidate": _side_info(cand, provs[1]),
            "suites": pairing.suites,
            "paired": len(pairing.paired),
            "unpaired_baseline": pairing.unpaired_baseline,
            "unpaired_candidate": pairing.unpaired_candidate,
            "package_differences": differences(
                ((provs[0] or {}).get("environment") or {}).get("packages"),
                ((provs[1] or {}).get("environment") or {}).get("packages"),
            ),
            "settings_differences": differences((provs[0] or {}).get("settings"), (provs[1] or {}).get("settings")),
        }
        paired = pa.Table.from_pandas(pairing.paired, preserve_index=False)
        return {
            "compare": table,
            "flips": flips(pairing.paired),
            "paired": paired,
            "info": pa.table({"json": [json.dumps(info, default=str)]}),
        }

    config = [conf, base.model, cand.model, base.run, cand.run]
    return Stage("compare", run, config=config, external=external)


def run_compare(
    cfg: CheckrayConfig | None,
    baseline: Side | str,
    candidate: Side | str,
    out: str,
    suites: Sequence[pa.Table] = (),
    suite_files: Sequence[str] | None = None,
    gate: GateFile | None = None,
) -> CompareJob:
    """Compare in-process; ``baseline``/``candidate`` are ``Side``s or run directories."""
    sides = [
        s if isinstance(s, Side) else Side(role, s, run=s)
        for role, s in zip(("baseline", "candidate"), (baseline, candidate))
    ]
    job = CompareJob(cfg or CheckrayConfig(), sides[0], sides[1], suites, suite_files, gate)
    run_job(job, out)
    return job


def print_comparison(job: CompareJob) -> None:
    """Exactly what was compared, then the overall result and one line per capability."""
    info, alpha = job.info, job.conf.alpha
    for role in ("baseline", "candidate"):
        side = info[role]
        env = (side.get("environment") or {}).get("packages") or {}
        versions = ", ".join(
            f"{k} {v}" for k, v in env.items() if v and k in ("checkray", "torch", "scikit-learn", "transformers")
        )
        typer.echo(
            f"compare · {role}: {describe_model(side['identity'], side['model'])}; run {side['run']}; {versions}"
        )
    for name, rec in info["suites"].items():
        typer.echo(
            f"compare · suite {name}: {rec.get('cases')} cases, digest {rec.get('digest', 'n/a')} (same in both runs)"
        )
    for pkg, (a, b) in info["package_differences"].items():
        typer.echo(f"compare · note: {pkg} differs: {a} (baseline) vs {b} (candidate)")
    for key, (a, b) in info["settings_differences"].items():
        typer.echo(f"compare · note: benchmark setting {key} differs: {a} (baseline) vs {b} (candidate)")
    typer.echo(
        f"compare · paired {info['paired']} cases ({info['unpaired_baseline']} judged by the baseline only, "
        f"{info['unpaired_candidate']} by the candidate only)"
    )
    for r in job.table.to_pylist():
        if r["level"] not in ("overall", "capability"):
            continue
        what = "overall" if r["level"] == "overall" else f"capability {r['capability']}"
        sig = " *" if r["p_value"] < alpha else ""
        ci = (
            ""
            if r["ci_low"] is None or r["ci_low"] != r["ci_low"]
            else f", CI [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
        )
        typer.echo(
            f"compare · {what}: {r['baseline_pass_rate']:.3f} -> {r['candidate_pass_rate']:.3f} "
            f"({r['diff']:+.3f}{ci}) n={r['n']}, {r['pass_to_fail']} pass->fail, {r['fail_to_pass']} fail->pass, "
            f"McNemar p={r['p_value']:.4g}{sig}"
        )


def compare_command(
    baseline: str = typer.Option(..., "--baseline", "-b", help="Benchmark run directory, or a model of --models."),
    candidate: str = typer.Option(..., "--candidate", "-n", help="Benchmark run directory, or a model of --models."),
    out: RunOut = None,
    models: Optional[str] = typer.Option(None, "--models", "-m", help="Model registry: sides named by model run now."),
    suites: Optional[list[str]] = typer.Option(None, "--suites", "-s", help="Suite file(s) for models run now."),
    more_suites: Optional[list[str]] = typer.Argument(None, help="More suite files (after --suites)."),
    baseline_model: Optional[str] = typer.Option(None, "--baseline-model", help="The baseline run's model."),
    candidate_model: Optional[str] = typer.Option(None, "--candidate-model", help="The candidate run's model."),
    gate: Optional[Path] = typer.Option(None, "--gate", help="Gate file (YAML): exit 1 when a rule fails."),
    mlflow_uri: Optional[str] = typer.Option(None, "--mlflow-uri", help="Log the comparison to this MLflow URI."),
    mlflow_experiment: str = typer.Option("checkray", "--mlflow-experiment", help="MLflow experiment name."),
    bootstrap: Optional[int] = typer.Option(
        None, "--bootstrap", help="Paired bootstrap resamples (compare.bootstrap)."
    ),
    seed: Optional[int] = typer.Option(None, "--seed", help="Bootstrap seed (compare.seed)."),
    as_generated: AsGenerated = None,
    config: ConfigFile = None,
):
    """Compare two models on the same suites: flips, McNemar's exact test, paired bootstrap."""
    all_suites = list(suites or []) + list(more_suites or [])
    cfg = load_config(
        config,
        {
            "compare.bootstrap": bootstrap,
            "compare.seed": seed,
            "benchmark.suites": all_suites or None,
            "benchmark.models": models,
            "benchmark.reviewed": None if as_generated is None else not as_generated,
            "out": out,
        },
    )
    from checkray.jobs.benchmark.config import BenchmarkConfig
    from checkray.jobs.benchmark.job import read_named_suites
    from checkray.jobs.zoo.resolve import resolve_models

    if not cfg.out:
        raise InputError("no output directory: pass --out DIR")
    bench = cfg.section(BenchmarkConfig)
    gate_file = read_gate(gate) if gate is not None else None
    if mlflow_uri:
        from checkray.jobs.compare.export import check_mlflow

        check_mlflow(mlflow_uri)
    specs = (
        resolve_models(bench.models) if bench.models and not all(map(is_benchmark_run, (baseline, candidate))) else None
    )
    b = resolve_side("baseline", baseline, baseline_model, specs)
    c = resolve_side("candidate", candidate, candidate_model, specs)
    parts, files = [], None
    if b.spec is not None or c.spec is not None:
        parts, files = read_named_suites(bench.suites, bench.reviewed, "compare")
    elif all_suites:
        typer.echo("compare · note: --suites ignored: both sides are finished benchmark runs")
    job = CompareJob(cfg, b, c, parts, files, gate_file)
    result = run_job(job, cfg.out)
    print_comparison(job)
    typer.echo(f"wrote {result.run.uri}/compare.parquet, flips.parquet, compared.json, report.html")
    if mlflow_uri:
        from checkray.jobs.compare.export import log_compare

        logged = log_compare(result.run.uri, mlflow_uri, mlflow_experiment)
        typer.echo(f"mlflow · logged run {logged} to {mlflow_uri} (experiment '{mlflow_experiment}')")
    if job.checks is not None:
        finish_gate(job.checks, result.run)
