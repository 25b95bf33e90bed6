"""Logging benchmark and comparison runs to MLflow (the ``export`` extra: mlflow-skinny).

From the CLI (``checkray benchmark ... --mlflow-uri URI``, ``checkray compare ...
--mlflow-uri URI``) or from Python::

    from checkray.jobs.compare.export import log_benchmark, log_compare
    run_id = log_benchmark("runs/bench", "file:./mlruns", experiment="nightly")

A benchmark becomes one MLflow run (tags ``checkray.job``, ``checkray.run_dir``) with one
nested run per model: the model's pass and failure rates overall, per capability and per
test type as metrics (``pass_rate.overall``, ``pass_rate.capability.Negation``, ...), its
identity (family, path, content digest) as params, and its failing examples as a table
artifact (``failing_examples.json``). The parent holds the whole model x capability
matrix as metrics (``pass_rate.<model>.<capability>``), the run config (params and
``config.json``), ``provenance.json``, the failing examples of every model, the summary
table, the leaderboard and, when gated, junit.xml and summary.md. A comparison is one
run: per capability both pass rates, the difference, the flips and McNemar's p, and the
flipped cases as a table.

Tracking URIs are whatever MLflow takes (``http://host:5000``, ``sqlite:///mlflow.db``,
``databricks``). A ``file:`` store or a plain path is MLflow's file store, which MLflow 3
keeps only on request: checkray sets ``MLFLOW_ALLOW_FILE_STORE=true`` for it (unless set).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from checkray.engine.errors import InputError
from checkray.engine.report import inline_assets
from checkray.engine.stages import RunDir
from checkray.jobs.base import read_manifest

_BAD_KEY = re.compile(r"[^A-Za-z0-9_\-. /:]")
PARAM_MAX = 500  # characters kept of a long param value (the full config is config.json)


def metric_key(*parts: Any) -> str:
    """An MLflow metric/param key: the characters MLflow refuses become '_'."""
    return ".".join(_BAD_KEY.sub("_", str(p)) for p in parts)[:250]


def _file_store(uri: str) -> bool:
    return uri.startswith("file:") or "://" not in uri and ":" not in uri.split("/", 1)[0]


def check_mlflow(uri: str):
    """The tracking client for ``uri``; a one-line error when mlflow is not installed."""
    try:
        import mlflow  # noqa: F401
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise InputError(
            "--mlflow-uri needs mlflow: pip install 'checkray[export]' (mlflow-skinny, no torch)"
        ) from None
    if _file_store(uri):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return MlflowClient(tracking_uri=uri)


def _flatten(data: Any, prefix: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(data, Mapping):
        for k, v in data.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        text = json.dumps(data, default=str) if not isinstance(data, str) else data
        yield prefix, text if len(text) <= PARAM_MAX else text[: PARAM_MAX - 3] + "..."


class _Logger:
    """An MLflow client bound to one experiment; errors become one-line InputErrors."""

    def __init__(self, uri: str, experiment: str):
        from mlflow.exceptions import MlflowException

        self.uri, self.errors = uri, (MlflowException, OSError)
        self.client = check_mlflow(uri)
        try:
            found = self.client.get_experiment_by_name(experiment)
            self.experiment_id = found.experiment_id if found else self.client.create_experiment(experiment)
        except self.errors as exc:
            raise InputError(f"mlflow {uri}: {exc}") from None

    def start(self, name: str, tags: Mapping[str, str], parent: str | None = None) -> str:
        tags = dict(tags)
        if parent:
            tags["mlflow.parentRunId"] = parent
        try:
            return self.client.create_run(self.experiment_id, run_name=name, tags=tags).info.run_id
        except self.errors as exc:
            raise InputError(f"mlflow {self.uri}: {exc}") from None

    def log(
        self,
        run_id: str,
        metrics: Mapping[str, float] = (),
        params: Mapping[str, str] = (),
        tables: Mapping[str, pd.DataFrame] = (),
        dicts: Mapping[str, Any] = (),
        texts: Mapping[str, str] = (),
    ) -> None:
        from mlflow.entities import Metric, Param

        now = int(time.time() * 1000)
        try:
            metric_items = [
                Metric(k, float(v), now, 0) for k, v in dict(metrics).items() if v is not None and v == v
            ]  # NaN dropped
            param_items = [Param(k, v) for k, v in dict(params).items()]
            for start in range(0, max(len(metric_items), len(param_items)), 100):  # MLflow's batch limits
                self.client.log_batch(
                    run_id, metrics=metric_items[start : start + 100], params=param_items[start : start + 100]
                )
            for name, frame in dict(tables).items():
                self.client.log_table(run_id, data=frame, artifact_file=name)
            for name, data in dict(dicts).items():
                self.client.log_dict(run_id, data, name)
            for name, text in dict(texts).items():
                self.client.log_text(run_id, text, name)
        except self.errors as exc:
            raise InputError(f"mlflow {self.uri}: {exc}") from None

    def end(self, run_id: str, status: str = "FINISHED") -> None:
        try:
            self.client.set_terminated(run_id, status)
        except self.errors as exc:
            raise InputError(f"mlflow {self.uri}: {exc}") from None


def _read(run: RunDir, name: str) -> pd.DataFrame:
    return pq.read_table(run.path(name), filesystem=run.fs).to_pandas()


def _text(run: RunDir, name: str) -> str | None:
    return run.read_text(name) if run.exists(name) else None


def _records(frame: pd.DataFrame) -> pd.DataFrame:
    """A table artifact: lists and arrays as text (MLflow's table JSON needs scalars)."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object:
            out[col] = out[col].map(
                lambda v: v if v is None or isinstance(v, (str, int, float, bool)) else str(list(v))
            )
    return out


def rates(summary: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Pooled pass rates of a summary table per ``by`` (judged cases, failures)."""
    grouped = summary.groupby(by, dropna=False).agg(n=("n", "sum"), failures=("failures", "sum")).reset_index()
    grouped["pass_rate"] = (grouped["n"] - grouped["failures"]) / grouped["n"].where(grouped["n"] > 0)
    return grouped


def effective_config(raw: Mapping[str, Any], section: str) -> dict[str, Any]:
    """A run's config as it ran: the manifest's (the file and flags given) with the job
    section's defaults filled in."""
    from checkray.jobs.config import CheckrayConfig

    cfg = CheckrayConfig.model_validate(dict(raw))
    data = cfg.model_dump(mode="json")
    data[section] = cfg.section(section).model_dump(mode="json")
    return data


def log_benchmark(run_dir: str, tracking_uri: str, experiment: str = "checkray", run_name: str | None = None) -> str:
    """Log a finished benchmark run to MLflow; returns the parent MLflow run id."""
    run = RunDir(run_dir)
    manifest = read_manifest(run, "benchmark")
    log = _Logger(tracking_uri, experiment)
    summary, examples = _read(run, "summary.parquet"), _read(run, "examples.parquet")
    models = _read(run, "models.parquet")
    provenance = json.loads(_text(run, "provenance.json") or "null")
    tags = {"checkray.job": "benchmark", "checkray.run_dir": run.uri}
    if provenance:
        tags["checkray.version"] = str(provenance.get("checkray"))
    parent = log.start(run_name or f"benchmark {os.path.basename(run.root.rstrip('/'))}", tags)
    config = effective_config(manifest.get("config", {}), "benchmark")
    params = dict(_flatten({"benchmark": config["benchmark"], "seed": config.get("seed")}))
    if provenance:
        params.update(
            {f"suite.{k}": f"{v['cases']} cases, digest {v['digest']}" for k, v in provenance["suites"].items()}
        )
    overall = rates(summary, ["model"])
    by_cap = rates(summary, ["model", "capability"])
    by_type = rates(summary, ["model", "test_type"])
    matrix = {metric_key("pass_rate", r.model, "overall"): r.pass_rate for r in overall.itertuples()}
    matrix.update({metric_key("pass_rate", r.model, r.capability): r.pass_rate for r in by_cap.itertuples()})
    gate_files = {n: _text(run, n) for n in ("junit.xml", "summary.md") if run.exists(n)}
    log.log(
        parent,
        metrics=matrix,
        params={metric_key(k): v for k, v in params.items()},
        tables={"failing_examples.json": _records(examples), "summary.json": _records(summary)},
        dicts={"config.json": config, **({"provenance.json": provenance} if provenance else {})},
        texts={
            **gate_files,
            **(
                {"leaderboard.html": inline_assets(_text(run, "leaderboard.html"))}
                if run.exists("leaderboard.html")
                else {}
            ),
        },
    )
    identity = {r["name"]: r for r in (provenance or {}).get("models", [])}
    for row in models.to_dict("records"):
        name, error = row["model"], None if pd.isna(row["error"]) else str(row["error"])
        child = log.start(name, {"checkray.job": "benchmark", "checkray.model": name}, parent=parent)

        def mine(frame: pd.DataFrame, name: str = name) -> pd.DataFrame:
            return frame[frame["model"] == name]

        metrics = {metric_key("pass_rate", "overall"): r.pass_rate for r in mine(overall).itertuples()}
        metrics.update({metric_key("n", "overall"): float(r.n) for r in mine(overall).itertuples()})
        for r in mine(by_cap).itertuples():
            metrics[metric_key("pass_rate", "capability", r.capability)] = r.pass_rate
            metrics[metric_key("failure_rate", "capability", r.capability)] = (
                None if r.pass_rate is None or r.pass_rate != r.pass_rate else 1 - r.pass_rate
            )
            metrics[metric_key("n", "capability", r.capability)] = float(r.n)
        for r in mine(by_type).itertuples():
            metrics[metric_key("pass_rate", "test_type", r.test_type)] = r.pass_rate
        if row.get("accuracy") is not None and row["accuracy"] == row["accuracy"]:
            metrics["accuracy"] = row["accuracy"]
        ident = identity.get(name, {})
        model_params = {
            "family": row["family"],
            "path": str(ident.get("path")),
            "digest": str(ident.get("digest")),
            "revision": str(ident.get("revision")),
            "error": str(error),
        }
        log.log(
            child,
            metrics=metrics,
            params=model_params,
            tables={"failing_examples.json": _records(mine(examples))},
        )
        log.end(child, "FINISHED" if error is None else "FAILED")
    log.end(parent)
    return parent


def log_compare(run_dir: str, tracking_uri: str, experiment: str = "checkray", run_name: str | None = None) -> str:
    """Log a finished comparison run to MLflow; returns the MLflow run id."""
    run = RunDir(run_dir)
    manifest = read_manifest(run, "compare")
    compared = json.loads(run.read_text("compared.json"))
    config = effective_config(manifest.get("config", {}), "compare")
    table, flips = _read(run, "compare.parquet"), _read(run, "flips.parquet")
    log = _Logger(tracking_uri, experiment)
    base, cand = compared["baseline"]["model"], compared["candidate"]["model"]
    run_id = log.start(
        run_name or f"compare {base} -> {cand}",
        {"checkray.job": "compare", "checkray.run_dir": run.uri, "checkray.baseline": base, "checkray.candidate": cand},
    )
    metrics: dict[str, float] = {}
    for r in table.to_dict("records"):
        if r["level"] not in ("overall", "capability", "test_type"):
            continue
        where = ("overall",) if r["level"] == "overall" else (r["level"], r[r["level"]])
        for field in ("baseline_pass_rate", "candidate_pass_rate", "diff", "p_value", "ci_low", "ci_high"):
            metrics[metric_key(field, *where)] = r[field]
        for field in ("pass_to_fail", "fail_to_pass", "n"):
            metrics[metric_key(field, *where)] = float(r[field])
    params = {
        "baseline.model": base,
        "baseline.run": compared["baseline"]["run"],
        "baseline.digest": str((compared["baseline"].get("identity") or {}).get("digest")),
        "candidate.model": cand,
        "candidate.run": compared["candidate"]["run"],
        "candidate.digest": str((compared["candidate"].get("identity") or {}).get("digest")),
        **{metric_key("compare", k): v for k, v in _flatten(config["compare"])},
    }
    gate_files = {n: _text(run, n) for n in ("junit.xml", "summary.md") if run.exists(n)}
    log.log(
        run_id,
        metrics=metrics,
        params=params,
        tables={"flips.json": _records(flips), "compare.json": _records(table)},
        dicts={"compared.json": compared, "config.json": config},
        texts={**gate_files, "report.html": inline_assets(run.read_text("report.html"))},
    )
    log.end(run_id)
    return run_id
