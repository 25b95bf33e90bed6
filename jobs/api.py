"""checkray from Python (a notebook): the jobs as functions over pandas/Arrow objects.

``import checkray`` exposes these names lazily (``checkray/__init__.py``), so importing it
starts nothing. Every function builds the same ``CheckrayConfig`` the CLI builds (a YAML
file via ``config=``, dotted overrides via ``settings=``), runs the same job with
``run_job`` into a run directory (``out``; a fresh temporary one when omitted) and returns
a :class:`Run` over that directory: its published tables as pandas, its report and its
manifest. Checkpoints, ownership and locking are the CLI's: calling ``topics`` twice with
the same ``out`` reuses the finished stages.

    import checkray
    t = checkray.topics(df, clusters=5)                   # df: a text/label DataFrame
    models = checkray.zoo(df, out="runs/zoo")
    res = checkray.benchmark(models, [suite_df])
    res.summary; res.failures("tfidf_lr", "Negation")
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import inspect
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.rundir import RunDir
from checkray.engine.schema import make_cases

Corpus = pd.DataFrame | pa.Table | str | Path
Suite = pd.DataFrame | pa.Table | str | Path


@dataclass
class Run:
    """A finished run directory: ``tables`` (its published Parquet files as pandas, by
    stem), ``manifest`` (config, stage fingerprints), ``report`` (path of report.html)."""

    path: str
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @cached_property
    def manifest(self) -> dict[str, Any]:
        return json.loads(RunDir(self.path).read_text("manifest.json"))

    @property
    def job(self) -> str:
        return self.manifest["job"]

    @cached_property
    def tables(self) -> dict[str, pd.DataFrame]:
        run = RunDir(self.path)
        names = [n for n in self.manifest.get("published", []) if n.endswith(".parquet")]
        return {Path(n).stem: run.read_table(n).to_pandas() for n in names}

    def table(self, name: str) -> pd.DataFrame:
        if name not in self.tables:
            raise KeyError(f"{self.path}: no published table '{name}' (has {', '.join(self.tables) or 'none'})")
        return self.tables[name]

    @property
    def _report_name(self) -> str:
        pages = [n for n in self.manifest.get("published", []) if n.endswith(".html")]
        return pages[-1] if pages else "report.html"  # the job's report is published last

    @property
    def report(self) -> str:
        """Path of the run's report page (report.html; a benchmark's leaderboard.html)."""
        return f"{self.path}/{self._report_name}"

    def to_html(self) -> str:
        """The run's report page as HTML text."""
        return RunDir(self.path).read_text(self._report_name)

    def _repr_html_(self) -> str:  # a notebook shows what the run holds and links its report
        names = ", ".join(html.escape(n) for n in self.tables)
        return f"{self._heading()}<p>tables: {names or 'none'}</p>"

    def _heading(self) -> str:
        report = Path(self.report).resolve()
        link = f'<a href="{html.escape(report.as_uri())}" target="_blank">report</a>' if report.exists() else ""
        return f"<p><b>checkray {html.escape(self.job)}</b> · <code>{html.escape(self.path)}</code> {link}</p>"


@dataclass
class Models(Run):
    """A zoo run: ``specs`` (the registry's models) and ``registry`` (zoo.yaml's path)."""

    @cached_property
    def specs(self) -> list[ModelSpec]:
        from checkray.engine.benchmark.registry import read_registry

        return read_registry(Path(self.registry))  # model paths resolved against the zoo directory

    @property
    def registry(self) -> str:
        return f"{self.path}/zoo.yaml"

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]


@dataclass
class Results(Run):
    """A benchmark run: ``results`` (one row per model x case), ``summary`` (per model x
    suite x capability x test type), ``leaderboard`` (per model), ``failures(...)``."""

    @property
    def results(self) -> pd.DataFrame:
        return self.table("results")

    @property
    def summary(self) -> pd.DataFrame:
        return self.table("summary")

    @property
    def leaderboard(self) -> pd.DataFrame:
        s = self.summary
        per = s.groupby("model")[["n", "failures"]].sum()
        per["failure_rate"] = per["failures"] / per["n"].where(per["n"] > 0)
        return per.sort_values("failure_rate").reset_index()

    def _repr_html_(self) -> str:
        return failures_html(self._heading(), self.leaderboard, self.failures())

    def failures(self, model: str | None = None, capability: str | None = None) -> pd.DataFrame:
        """Failed cases (``pass`` false), optionally of one model and/or capability."""
        r = self.results
        for column, value in (("model", model), ("capability", capability)):
            if value is not None:
                if value not in set(r[column]):
                    raise KeyError(f"no {column} '{value}' in this run (has {', '.join(sorted(set(r[column])))})")
                r = r[r[column] == value]
        return r[r["pass"] == False].reset_index(drop=True)  # noqa: E712  (pandas: elementwise)


SHOWN_FAILURES = 8  # rows of top failures a notebook shows under a result


def failures_html(heading: str, leaderboard: pd.DataFrame, failing: pd.DataFrame) -> str:
    """A result in a notebook: its heading, the per-model table and the first failures."""
    columns = [c for c in ("model", "capability", "test_type", "text", "expected_label", "predicted") if c in failing]
    per_model = max(1, SHOWN_FAILURES // max(1, failing["model"].nunique())) if len(failing) else 1
    top = failing[columns].groupby("model", sort=False).head(per_model).head(SHOWN_FAILURES)  # every model shows some
    return (
        heading
        + leaderboard.to_html(index=False, float_format=lambda v: f"{v:.3f}", border=0)
        + f"<p>{len(top)} of {len(failing)} failing cases, a few per model:</p>"
        + top.to_html(index=False, border=0)
    )


@dataclass
class RunReport(Run):
    """A ``checkray run`` / ``checkray demo`` directory: ``suite`` (the merged suite),
    ``results`` and ``models`` (the benchmark's), ``failures(...)``, ``report``."""

    @cached_property
    def manifest(self) -> dict[str, Any]:  # the steps have manifests; the run has its timings
        run = RunDir(self.path)
        return {"job": "run", "published": ["report.html"], "timings": json.loads(run.read_text("timings.json"))}

    @cached_property
    def benchmark(self) -> Results:
        return Results(f"{self.path}/benchmark")

    @cached_property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {**self.benchmark.tables, "suite": RunDir(self.path).read_table("suite/suite.parquet").to_pandas()}

    @property
    def suite(self) -> pd.DataFrame:
        return self.table("suite")

    @property
    def results(self) -> pd.DataFrame:
        return self.benchmark.results

    @property
    def leaderboard(self) -> pd.DataFrame:
        return self.benchmark.leaderboard

    def failures(self, model: str | None = None, capability: str | None = None) -> pd.DataFrame:
        return self.benchmark.failures(model, capability)

    def _repr_html_(self) -> str:
        return failures_html(self._heading(), self.leaderboard, self.failures())


@contextlib.contextmanager
def _run_log(command: str) -> Iterator[None]:
    """Ray's, the workers' and the libraries' output into the run's log
    (``DIR/logs/checkray.log``), as the CLI does: a notebook shows checkray's own lines."""
    from checkray.jobs.runlog import RUN_LOG

    if RUN_LOG.active or os.environ.get("CHECKRAY_VERBOSE") == "1":
        yield
        return
    RUN_LOG.start(command)
    failed = True
    try:
        yield
        failed = False
    finally:
        RUN_LOG.stop(keep_temp=failed)


def _out(out: str | Path | None, job: str) -> str:
    return str(out) if out is not None else tempfile.mkdtemp(prefix=f"checkray-{job}-")


def _inputs_dir() -> Path:
    from checkray.engine.cache import cache_uri

    root = cache_uri()
    base = Path(root) if root and "://" not in root else Path(tempfile.gettempdir()) / "checkray"
    (base / "inputs").mkdir(parents=True, exist_ok=True)
    return base / "inputs"


def _as_file(data: pd.DataFrame | pa.Table, kind: str) -> str:
    """A DataFrame/Table handed in from Python, as a Parquet file named by its content, so
    stage fingerprints (which read file contents) are the same for the same data."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_pandas(data, preserve_index=False)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    payload = sink.getvalue().to_pybytes()
    path = _inputs_dir() / f"{kind}-{hashlib.sha256(payload).hexdigest()[:24]}.parquet"
    if not path.exists():  # a temp file of this process's own: two writers never share one
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".tmp-", dir=path.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
        os.replace(tmp, path)
    return str(path)


def _config(config: str | Path | None, overrides: Mapping[str, Any], settings: Mapping[str, Any] | None):
    from checkray.jobs.config import load_config

    return load_config(config, {**overrides, **(settings or {})})


def _corpus_overrides(corpus: Corpus | None, text: str | None, label: str | None, labels: Any) -> dict[str, Any]:
    if corpus is None:
        return {}
    path = _as_file(corpus, "corpus") if isinstance(corpus, pd.DataFrame | pa.Table) else str(corpus)
    return {"corpus.path": path, "corpus.text_column": text, "corpus.label_column": label, "corpus.labels": labels}


def topics(
    corpus: Corpus | None = None,
    *,
    text: str | None = None,
    label: str | None = None,
    labels: Mapping[str, str] | str | None = None,
    clusters: int | None = None,
    config: str | Path | None = None,
    settings: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
) -> Run:
    """Cluster ``corpus`` into topics (``checkray topics``); tables clusters, assignments, representatives."""
    from checkray.jobs.topics.job import run_topics

    cfg = _config(
        config, {**_corpus_overrides(corpus, text, label, labels), "topics.clusterer.n_clusters": clusters}, settings
    )
    with _run_log("checkray.topics(...)"):
        return Run(run_topics(cfg, _out(out, "topics")).run.uri)


def zoo(
    corpus: Corpus | None = None,
    *,
    text: str | None = None,
    label: str | None = None,
    labels: Mapping[str, str] | str | None = None,
    only: Sequence[str] | None = None,
    config: str | Path | None = None,
    settings: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
) -> Models:
    """Train the model zoo on ``corpus`` (``checkray zoo``; default recipe configs/zoo.yaml's)."""
    from checkray.jobs.base import run_job
    from checkray.jobs.zoo.job import ZooJob

    cfg = _config(config, _corpus_overrides(corpus, text, label, labels), settings)
    out = _out(out, "zoo")
    if "://" in out:
        raise InputError(f"{out}: the zoo writes model files from its tasks; use a local or shared-filesystem out")
    with _run_log("checkray.zoo(...)"):
        run_job(ZooJob(cfg, list(only) if only else None), out)
    return Models(out)


def _suite_table(suite: Suite, i: int) -> pa.Table:
    from checkray.engine.benchmark.inputs import check_suite, read_suite

    if isinstance(suite, str | Path):
        return read_suite(str(suite))
    table = suite if isinstance(suite, pa.Table) else pa.Table.from_pandas(suite, preserve_index=False)
    if "case_id" not in table.column_names:  # plain rows (text, capability, expected_label, ...): fill defaults
        table = make_cases(table.to_pylist())
    return check_suite(table, f"suite #{i + 1}")


def _model_specs(models: Models | Sequence[ModelSpec] | str | Path) -> list[ModelSpec]:
    from checkray.jobs.zoo.job import resolve_models

    if isinstance(models, Models):
        return models.specs
    if isinstance(models, str | Path):
        return resolve_models(models)
    specs = list(models)
    if not specs or not all(isinstance(s, ModelSpec) for s in specs):
        raise InputError("models: pass a zoo result, a registry path, or a non-empty list of ModelSpec")
    return specs


def benchmark(
    models: Models | Sequence[ModelSpec] | str | Path,
    suites: Suite | Sequence[Suite],
    *,
    config: str | Path | None = None,
    settings: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
) -> Results:
    """Run ``suites`` (DataFrames, Arrow tables or Parquet paths) against ``models``."""
    from checkray.jobs.base import run_job
    from checkray.jobs.benchmark.job import BenchmarkJob

    many = suites if isinstance(suites, list | tuple) else [suites]
    parts = [_suite_table(s, i) for i, s in enumerate(many)]
    if not parts:
        raise InputError("suites: pass at least one suite")
    cfg = _config(config, {}, settings)
    out = _out(out, "benchmark")
    with _run_log("checkray.benchmark(...)"):
        run_job(BenchmarkJob(cfg, _model_specs(models), parts), out)
    return Results(out)


def run(
    corpus: Corpus | None = None,
    models: Models | Sequence[ModelSpec] | str | Path | None = None,
    *,
    text: str | None = None,
    label: str | None = None,
    labels: Mapping[str, str] | str | None = None,
    llm: str | None = None,
    methods: Sequence[str] | None = None,
    baselines: Sequence[str] | None = None,
    config: str | Path | None = None,
    settings: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
) -> RunReport:
    """``checkray run``: every method that serves ``corpus``, one merged suite, one
    benchmark of ``models`` (a registry path, a zoo result or ModelSpecs; None: a zoo
    trained on the corpus) and baselines, one report."""
    from checkray.jobs.run.job import llm_overrides, run_pipeline

    registry = _registry_file(models) if models is not None else None
    overrides = {
        **_corpus_overrides(corpus, text, label, labels),
        "run.models": registry,
        "run.methods": list(methods) if methods else None,
        "run.baselines": list(baselines) if baselines else None,
        **llm_overrides(llm),
    }
    cfg = _config(config, overrides, settings)
    out = _out(out, "run")
    with _run_log("checkray.run(...)"):
        run_pipeline(cfg, out)
    return RunReport(out)


def _registry_file(models: Models | Sequence[ModelSpec] | str | Path) -> str:
    """A registry path for ``models``: as given, a zoo's, or ModelSpecs written to a file
    named by their content."""
    import yaml

    if isinstance(models, str | Path):
        return str(models)
    if isinstance(models, Models):
        return models.registry
    specs = _model_specs(models)
    text = yaml.safe_dump({"models": [s.model_dump(mode="json", exclude_defaults=True) for s in specs]})
    path = _inputs_dir() / f"models-{hashlib.sha256(text.encode()).hexdigest()[:24]}.yaml"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".tmp-", dir=path.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    return str(path)


def open_run(path: str | Path) -> Run:
    """Any finished run directory (from the CLI or from Python), by its job."""
    if RunDir(str(path)).exists("timings.json") and RunDir(str(path)).exists("benchmark/manifest.json"):
        return RunReport(str(path))  # checkray run / demo: the steps' runs under one directory
    run = Run(str(path))
    try:
        job = run.job
    except (OSError, FileNotFoundError, KeyError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a finished checkray run (no readable manifest.json: {exc})") from None
    if job == "benchmark":
        return Results(str(path))
    if job == "zoo":
        return Models(str(path))
    return run


def cli(*args: str) -> int:
    """Run a ``checkray`` command line in-process (every job, e.g. ``cli("mft", "--topics", t.path, "--out", d)``);
    return its exit code (0 ok, 2 user error, 1 internal error). Read its outputs with ``open_run``."""
    from checkray.jobs.cli import main

    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    return 0


def _flag(parameter: inspect.Parameter) -> tuple[str | None, bool]:
    """The long flag of a typer parameter (None: a positional argument) and whether it is one."""
    info = parameter.default
    decls = [d for d in getattr(info, "param_decls", None) or () if d.startswith("--")]
    positional = type(info).__name__ == "ArgumentInfo"
    return (None if positional else (decls[0] if decls else "--" + parameter.name.replace("_", "-"))), positional


def command_args(function: Callable, options: Mapping[str, Any]) -> list[str]:
    """``options`` (keyword arguments named like the command's parameters) as its argv."""
    parameters = inspect.signature(function).parameters
    unknown = sorted(set(options) - set(parameters))
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)} (have: {', '.join(parameters)})")
    argv: list[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag, positional = _flag(parameters[name])
        values = list(value) if isinstance(value, list | tuple) else [value]
        if positional:
            argv += [str(v) for v in values]
        elif value is True:
            argv.append(flag)
        else:
            for v in values:
                argv += [flag, str(v)]
    return argv


def job_function(name: str) -> Callable[..., Run]:
    """``checkray.<name>(**options)``: the command ``checkray <name>`` run in-process, its
    keyword arguments its options (``out`` defaults to a fresh temporary directory), the
    finished run directory returned as ``open_run`` reads it. Made for every command of
    the job registry (``jobs/registry.py``) that writes a run directory."""
    from checkray.jobs.registry import JOBS

    command = name.replace("_", "-")
    record = JOBS.record(command)
    target = JOBS.get(command)
    if not record.api or not callable(target) or not inspect.isfunction(target):
        raise AttributeError(f"'{command}' has no notebook function; use checkray.cli('{command}', ...)")

    def function(**options: Any) -> Run:
        if "out" in inspect.signature(target).parameters and options.get("out") is None:
            options["out"] = _out(None, command)
        with _run_log(f"checkray.{name}(...)"):
            code = cli(command, *command_args(target, options))
        if code != 0:
            raise InputError(f"checkray {command} exited with {code} (its error line is above)")
        return open_run(options["out"]) if options.get("out") else Run("")

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"{record.help}\n\nOptions (as ``checkray {command} --help``): " + ", ".join(
        p for p in inspect.signature(target).parameters
    )
    return function


def job_functions() -> list[str]:
    """The names ``checkray.<name>`` has for the job registry's commands."""
    from checkray.jobs.registry import JOBS

    return [n.replace("-", "_") for n in JOBS.names() if JOBS.record(n).api]
