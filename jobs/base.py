"""One Job abstraction: a job declares its name, config section, stages, what it publishes
and its report; ``run_job`` does the rest, the same way for every job.

A job is a short pipeline::

    class TopicsJob(Job):
        name, title, section = "topics", "checkray · topics", TopicsConfig
        published = ("clusters.parquet", "assignments.parquet", "representatives.parquet")

        def stages(self):            # yields Stages; the runner runs each before the next
            yield corpus_stage(self.cfg)
            ...

        def publish(self, runner):   # writes the published files, returns report sections
            ...

``run_job(job, out)`` starts Ray, opens the run directory, runs the stages with the
console printer, calls ``publish``, writes ``report.html`` and ``manifest.json`` (the job's
published files: what other jobs may read from this run) and returns a ``JobResult``.
``stages()`` is a generator, so a job can hold a resource over some of its stages
(``with self.chat() as chat: yield ...``): it is released when those stages are done, or
when one of them fails. Code between two ``yield``s may read what earlier stages wrote
(``self.runner.output(...)``). Yielding a list runs its stages side by side (threads, each
waiting on its own Ray work), for independent stages such as the zoo's models.
"""

from __future__ import annotations

import json
import logging
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.config import JobSection
from checkray.engine.errors import EmptySuiteError, InputError
from checkray.engine.report import Section as ReportSection
from checkray.engine.report import write_page
from checkray.engine.runtime import init_ray
from checkray.engine.stages import RunDir, Stage, StageRecord, StageRunner, current_stage
from checkray.jobs.config import CheckrayConfig
from checkray.jobs.console import console, stage_printer
from checkray.jobs.runlog import DRY_RUN_ENV, RUN_LOG, DryRun

C = TypeVar("C", bound=JobSection)

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class QualityTable:
    """A published table saying how far a job's suite can be trusted (its gates, validity
    decisions, label consistency). ``run_job`` lists it in ``manifest.json`` and the run
    index (``checkray report-index``) shows it: no per-job list to keep elsewhere."""

    file: str  # a file the job publishes
    title: str
    columns: tuple[str, ...] | None = None  # shown in the index; None: all


@dataclass
class JobResult:
    """What every finished job hands back: its run directory, report sections, stage
    records and wall time. Other code reads the run's results through what it published
    (``path``, ``table``), never through the job object's attributes."""

    job: Job
    run: RunDir
    sections: list[ReportSection]
    stages: dict[str, StageRecord] = field(default_factory=dict)
    seconds: float = 0.0

    def path(self, name: str) -> str:
        """The path of a file this run published (a one-line error when it did not)."""
        return published_path(self.run, self.job.name, name)

    def table(self, name: str, columns: Sequence[str] | None = None) -> Any:
        """A Parquet table this run published."""
        import pyarrow.parquet as pq

        return pq.read_table(self.path(name), columns=list(columns) if columns else None, filesystem=self.run.fs)

    def text(self, name: str) -> str:
        """A text file this run published."""
        self.path(name)  # published, or a one-line error
        return self.run.read_text(name)


class Job(ABC, Generic[C]):
    """Subclasses set the class attributes and implement ``stages`` and ``publish``."""

    name: ClassVar[str]
    title: ClassVar[str]
    section: ClassVar[type[JobSection] | None] = None  # its config section, if any
    published: ClassVar[tuple[str, ...]] = ()  # files written at the top of the run dir
    quality: ClassVar[tuple[QualityTable, ...]] = ()  # published tables the run index shows
    # the published suite whose cases people's verdicts estimate (jobs/validity_estimate.py)
    suite_file: ClassVar[str | None] = None
    report_file: ClassVar[str | None] = "report.html"
    uses_ray: ClassVar[bool] = True

    def __init__(self, cfg: CheckrayConfig, models: Sequence[ModelSpec] | None = None):
        self.cfg = cfg
        self.models = None if models is None else list(models)
        self.runner: StageRunner | None = None  # set by run_job

    @property
    def conf(self) -> C:
        """This job's config section, typed."""
        if self.section is None:
            raise TypeError(f"job '{self.name}' has no config section")
        return self.cfg.section(self.section)  # type: ignore[return-value]

    @property
    def seed(self) -> int:
        """The section's own ``seed`` when it sets one, else the top-level seed."""
        own = getattr(self.conf, "seed", None) if self.section is not None else None
        return self.cfg.seed if own is None else own

    def check(self) -> None:
        """Validate inputs before Ray starts (a missing file fails in a second, not later)."""

    @abstractmethod
    def stages(self) -> Iterable[Stage | list[Stage]]:
        """The pipeline, in order (a generator may run code between stages)."""

    @abstractmethod
    def publish(self, runner: StageRunner) -> list[ReportSection]:
        """Write the published files from the stage outputs; return the report sections."""

    def subtitle(self) -> str:
        return self.cfg.corpus.path

    def manifest_extra(self) -> dict[str, Any]:
        """More for ``manifest.json``, known after ``publish`` (the benchmark's provenance)."""
        return {}


def _kept_review(run: RunDir, job: str) -> dict[str, Any]:
    """The ``reviewed`` record ``checkray review apply`` left in this run's manifest, kept
    across a rerun of the job: it names the reviewed suite and the digest of the suite that
    was reviewed, so readers still find it, and find it stale if the rerun changed the suite."""
    try:
        old = json.loads(run.read_text(MANIFEST)) if run.exists(MANIFEST) else {}
    except (OSError, ValueError):
        return {}
    record = old.get("reviewed") if old.get("job") == job else None
    return {"reviewed": record} if isinstance(record, dict) else {}


def require_out(out: str | None) -> str:
    if not out:
        raise InputError("no output directory: pass --out DIR or set 'out' in the config")
    return out


def run_job(job: Job, out: str | None = None) -> JobResult:
    """Run ``job`` into ``out`` (default: the config's ``out``); see the module docstring."""
    start = time.perf_counter()
    out = require_out(out or job.cfg.out)
    job.check()
    if os.environ.get(DRY_RUN_ENV) == "1":
        print_plan(job, out)
        raise DryRun(job.name)
    run = RunDir(out)
    run.claim(job.name)  # a directory that is not this job's run fails here, in a second
    RUN_LOG.attach(run)
    with run.lock(job.name):
        if job.uses_ray:
            init_ray(job.cfg.runtime)
            warn_if_not_shared(run)
        runner = StageRunner(run, on_stage=stage_printer(job.name), max_error_share=job.cfg.runtime.max_error_share)
        job.runner = runner
        try:
            _run_stages(job, runner)
        except EmptySuiteError:
            _supersede_published(run)
            raise
        sections = job.publish(runner)
        extra = _publish_validity(job, run, sections)
        if job.report_file:
            write_page(run, job.report_file, job.title, sections, subtitle=job.subtitle())
        published = list(job.published) + extra + ([job.report_file] if job.report_file else [])
        review = _kept_review(run, job.name)
        record = review.get("reviewed") or {}
        published += [f for f in (record.get("file"), record.get("validity")) if f and f not in published]
        run.write_text(
            MANIFEST,
            json.dumps(
                {
                    "job": job.name,
                    "published": published,
                    "config": job.cfg.model_dump(mode="json"),
                    "stages": {name: rec.fingerprint for name, rec in runner.done.items()},
                    # what the run index shows of each stage, so it reads no private stages/ file
                    "stage_records": {
                        name: {"seconds": rec.computed_seconds, "outputs": rec.outputs}
                        for name, rec in runner.done.items()
                    },
                    "incomplete": {name: rec.incomplete for name, rec in runner.done.items() if rec.incomplete},
                    "seconds": round(time.perf_counter() - start, 1),  # this run's wall time (report-index)
                    "quality": quality_entries(job, run, published),
                    **job.manifest_extra(),
                    **review,
                },
                indent=1,
                default=str,
            ),
        )
        run.record_owned([*published, MANIFEST])
        outer = current_stage()
        first = next((f"{name}: {rec.incomplete}" for name, rec in runner.done.items() if rec.incomplete), None)
        if first and outer is not None:  # a run inside a stage: that stage is not done either
            outer.mark_incomplete(f"its '{job.name}' run in {run.uri} is incomplete ({first})")
    return JobResult(job, run, sections, dict(runner.done), time.perf_counter() - start)


def _supersede_published(run: RunDir) -> None:
    """A rerun that keeps no test case leaves no earlier run's suite, report and manifest
    at the top of the directory, where the run index and a reader would take them for
    this run's: they move under ``stages/superseded/`` (the checkpoints stay)."""
    if not run.exists(MANIFEST):
        return
    try:
        old = json.loads(run.read_text(MANIFEST))
    except (ValueError, OSError):
        return
    if not isinstance(old, dict):
        return
    if old.get("reviewed"):  # a person's review hangs on that manifest: it stays, and says so
        log.warning("%s: kept no test case; the earlier run's outputs stay (they carry a review)", run.uri)
        return
    moved = run.supersede([MANIFEST, *(old.get("published") or [])])
    if moved:
        log.info("%s: the earlier run's published outputs moved to %s (this run kept no test case)", run.uri, moved)


def _publish_validity(job: Job, run: RunDir, sections: list[ReportSection]) -> list[str]:
    """A suite's validity estimate, first in its report; the file names it published."""
    from checkray.jobs.validity_estimate import VALIDITY_FILE, publish_validity

    if job.suite_file is None:
        return []
    section = publish_validity(job.name, run, job.suite_file)
    if section is None:
        return []
    sections.insert(0, section)
    return [VALIDITY_FILE]


def quality_entries(job: Job, run: RunDir, published: Sequence[str]) -> list[dict[str, Any]]:
    """The job's quality tables that this run published (``manifest.json``'s ``quality``)."""
    from checkray.jobs.validity_estimate import VALIDITY_COLUMNS, VALIDITY_FILE

    tables = list(job.quality)
    if job.suite_file is not None:
        tables.insert(0, QualityTable(VALIDITY_FILE, "Estimated validity (people's verdicts)", VALIDITY_COLUMNS))
    return [
        {"file": q.file, "title": q.title, "columns": list(q.columns) if q.columns else None}
        for q in tables
        if q.file in published and run.exists(q.file)
    ]


def print_plan(job: Job, out: str) -> None:
    """``--dry-run``: the resolved config and the resources the job would plan with."""
    import yaml

    from checkray.engine.runtime import planned_resources

    resolved = job.cfg.model_dump(mode="json")
    if job.section is not None:  # the job's own section with every default filled in
        resolved[job.section.key] = job.conf.model_dump(mode="json")
    console.print(f"checkray {job.name} --dry-run: would write {out}", markup=False, soft_wrap=True)
    console.print(yaml.safe_dump(resolved, sort_keys=False).rstrip(), markup=False, soft_wrap=True)
    console.print(f"resources: {planned_resources(job.cfg.runtime)}", markup=False, soft_wrap=True)


def warn_if_not_shared(run: RunDir) -> None:
    """A local --out on a multi-node cluster is a different directory on every node: Ray
    Data shards and task outputs would land on whichever node ran them."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if run.is_local and len(nodes) > 1:
        console.print(
            f"[yellow]warning: {run.uri} is a local path but Ray has {len(nodes)} nodes: "
            "use shared storage (s3://..., a network filesystem) so every node writes to the same run[/yellow]"
        )


def _run_stages(job: Job, runner: StageRunner) -> None:
    stages = iter(job.stages())
    try:
        for item in stages:
            if isinstance(item, Stage):
                runner.run_stage(item)
            elif item:
                with ThreadPoolExecutor(max_workers=len(item)) as pool:
                    for future in [pool.submit(runner.run_stage, stage) for stage in item]:
                        future.result()
    finally:
        close = getattr(stages, "close", None)
        if close is not None:  # a generator: release what it holds (its `with` blocks)
            close()


def read_manifest(run: RunDir, job: str) -> dict[str, Any]:
    """The manifest of a finished ``job`` run; a one-line error when ``run`` is not one."""
    if not run.exists(MANIFEST):
        raise InputError(f"{run.uri}: not a finished '{job}' run (no {MANIFEST})")
    meta = json.loads(run.read_text(MANIFEST))
    if meta.get("job") != job:
        raise InputError(f"{run.uri}: a '{meta.get('job')}' run, not a '{job}' run")
    return meta


def published_path(run: RunDir, job: str, name: str) -> str:
    """The path of a file ``job`` published in ``run`` (listed in its manifest)."""
    meta = read_manifest(run, job)
    if name not in meta.get("published", []):
        raise InputError(f"{run.uri}: the '{job}' run did not publish {name}")
    return run.path(name)
