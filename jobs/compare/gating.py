"""Applying a gate file (``checkray.engine.compare.gate``) to a benchmark or a comparison run:
verdicts, ``DIR/junit.xml``, ``DIR/summary.md``, one console line per check, exit code.

Exit codes (``finish_gate``): 0 when every check holds, 1 when one fails (a
``SystemExit(1)``, no traceback); a bad gate file, a missing baseline or a suite that
changed is a user error (``CheckrayError``: one line, exit 2, before any model runs
when it can be known then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import typer

from checkray.engine.benchmark.provenance import case_digests, suite_digests
from checkray.engine.compare.gate import Check, GateFile, cells_from_summary, evaluate_gate
from checkray.engine.compare.junit import junit_xml, summary_markdown
from checkray.engine.compare.pairing import NEEDED, pair_results
from checkray.engine.errors import ConfigError, InputError
from checkray.engine.stages import RunDir
from checkray.jobs.base import published_path, read_manifest
from checkray.jobs.benchmark.provenance import read_provenance
from checkray.jobs.console import console

JUNIT, SUMMARY_MD = "junit.xml", "summary.md"


@dataclass
class GateBaseline:
    """The benchmark run a gate's ``max_drop`` rules compare with."""

    run: RunDir
    provenance: dict[str, Any] | None
    model_of: dict[str, str] = field(default_factory=dict)  # model under test -> baseline model


def run_models(run: RunDir) -> list[str]:
    """The models of a finished benchmark run that produced results."""
    models = pq.read_table(published_path(run, "benchmark", "models.parquet"), filesystem=run.fs)
    return [r["model"] for r in models.to_pylist() if r["error"] is None]


def pick_model(run: RunDir, wanted: str | None, like: str | None, flag: str) -> str:
    """``wanted`` if the run has it; else a model named ``like``; else the run's only model."""
    names = run_models(run)
    if wanted is not None:
        if wanted not in names:
            raise InputError(f"{run.uri}: no model '{wanted}' with results (has: {', '.join(names) or 'none'})")
        return wanted
    if like is not None and like in names:
        return like
    if len(names) == 1:
        return names[0]
    raise InputError(f"{run.uri}: has {len(names)} models with results ({', '.join(names)}); pass {flag} NAME")


def check_gate_baseline(gate: GateFile, suites: Sequence[pa.Table], models: Sequence[str]) -> GateBaseline | None:
    """Before a gated benchmark runs: the gate's baseline run exists, is a benchmark run,
    has a model for every model under test and recorded the same suites."""
    if not gate.needs_baseline:
        return None
    if not gate.baseline:
        raise ConfigError("gate: a rule sets max_drop but the gate file names no 'baseline:' benchmark run")
    run = RunDir(gate.baseline)
    read_manifest(run, "benchmark")
    prov = read_provenance(run)
    if prov is not None:
        check_same_suites(run, prov.get("suites", {}), suites)
    model_of = {m: pick_model(run, gate.baseline_model, m, "baseline_model: in the gate file") for m in models}
    return GateBaseline(run, prov, model_of)


def check_same_suites(run: RunDir, theirs: Mapping[str, dict], suites: Sequence[pa.Table]) -> None:
    """The suites (names and content digests) are those the baseline ``run`` recorded."""
    ours: dict[str, dict] = {}
    for table in suites:
        ours.update(
            suite_digests(
                table.column("suite").to_pylist(),
                table.column("case_id").to_pylist(),
                case_digests(table).to_pylist(),
            )
        )
    if set(ours) != set(theirs):
        raise InputError(
            f"gate baseline {run.uri} ran suite(s) {', '.join(sorted(theirs))}, this run {', '.join(sorted(ours))}"
        )
    for name in sorted(ours):
        if ours[name]["digest"] != theirs[name].get("digest"):
            raise InputError(
                f"suite '{name}' changed since the gate baseline {run.uri} (digest {theirs[name].get('digest')}, "
                f"{theirs[name].get('cases')} cases; now {ours[name]['digest']}, {ours[name]['cases']} cases)"
            )


def model_results(run: RunDir, model: str) -> pa.Table:
    """One model's rows of a benchmark run's results (only the columns a comparison needs)."""
    path = published_path(run, "benchmark", "results.parquet")
    return pq.read_table(path, filesystem=run.fs, columns=NEEDED, filters=[("model", "=", model)])


def example_frame(examples: pa.Table) -> pd.DataFrame:
    return examples.select(
        ["model", "suite", "capability", "topic", "test_type", "text", "expected", "predicted"]
    ).to_pandas()


def benchmark_gate(
    gate: GateFile,
    baseline: GateBaseline | None,
    run: RunDir,
    *,
    models: Sequence[str],
    provenance: Mapping[str, Any],
    summary: pa.Table,
    examples: pa.Table,
) -> list[Check]:
    """Check a finished benchmark run's gate; write junit.xml and summary.md into ``run``.

    ``baseline``: what ``check_gate_baseline`` found before the run (None: no ``max_drop`` rule).
    """
    models = list(models)
    paired = None
    context = [f"benchmark run {run.uri}: {len(models)} model(s), suites {', '.join(sorted(provenance['suites']))}"]
    if baseline is not None:
        paired = paired_with_baseline(baseline, run, models, provenance["suites"])
        described = ", ".join(f"{m} vs {b}" for m, b in baseline.model_of.items())
        context.append(f"baseline: {baseline.run.uri} ({described})")
    checks = evaluate_gate(gate, cells_from_summary(summary.to_pandas()), paired, example_frame(examples), models)
    write_gate_files(run, checks, "checkray benchmark gate", context)
    return checks


def paired_with_baseline(
    baseline: GateBaseline, run: RunDir, models: Sequence[str], suites: Mapping[str, Any]
) -> dict[str, pd.DataFrame]:
    """Each model with results, its verdicts paired case by case with its baseline model's."""
    paired = {}
    ok = set(run_models(run))
    for model in models:
        if model not in ok:
            continue
        pairing = pair_results(
            model_results(baseline.run, baseline.model_of[model]),
            model_results(run, model),
            (baseline.provenance or {}).get("suites"),
            suites,
        )
        paired[model] = pairing.paired
    return paired


def write_gate_files(run: RunDir, checks: Sequence[Check], title: str, context: Sequence[str]) -> None:
    run.write_text(JUNIT, junit_xml(checks, properties={"run": run.uri}))
    run.write_text(SUMMARY_MD, summary_markdown(checks, title, context))


def finish_gate(checks: Sequence[Check], run: RunDir) -> None:
    """Print one line per check and the verdict; exit 1 (no traceback) when a check failed."""
    for c in checks:
        typer.echo(f"gate · {c.line()}")
    failed = [c for c in checks if not c.passed]
    where = f"{run.path(JUNIT)}, {run.path(SUMMARY_MD)}"
    if failed:
        # checkray's console, not fd 2: the quiet console sends fd 2 to DIR/logs/checkray.log
        console.print(f"gate · FAILED: {len(failed)} of {len(checks)} checks ({where})", markup=False, soft_wrap=True)
        # SystemExit, not typer.Exit: jobs/cli.py runs click with standalone_mode=False, where
        # click turns typer.Exit(1) into a return value that the entry point does not pass on.
        raise SystemExit(1)
    typer.echo(f"gate · passed: all {len(checks)} checks ({where})")
