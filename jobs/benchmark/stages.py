"""The benchmark's three stages: cases -> predict (one checkpoint per model) -> evaluate.

* ``cases``: every suite's cases with the unique inputs models must score.
* ``predict``: every model on its inputs (``checkray.actors.benchmark.predictor``). Each model's
  probabilities are committed on their own as soon as it finishes (a stage *part* keyed by
  the model's spec and the inputs), so a crash or SIGKILL at model 11 of 12 keeps models
  1-10, and a rerun runs only the rest. A model that failed is not committed: the stage is
  marked incomplete and the next run retries it.
* ``evaluate``: CheckList verdicts model by model, streamed into ``results.parquet``;
  the summary and a few failing examples per test are small tables.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from checkray.engine.benchmark.expectations import ExpectationSettings
from checkray.engine.benchmark.families import answers
from checkray.engine.benchmark.inputs import prepare_cases
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.benchmark.results import RESULTS_SCHEMA, example_failures, model_results
from checkray.engine.benchmark.sampling import model_case_rows, needed_inputs
from checkray.engine.benchmark.summary import summarize
from checkray.engine.cache import CacheConfig, ContentCache, open_cache, text_digests
from checkray.engine.runtime import cluster_resources, driver_node_cpus
from checkray.engine.stages import Stage, StageContext, fingerprint, reference_digest, table_bytes
from checkray.jobs.benchmark.config import BenchmarkConfig
from checkray.jobs.console import console

if TYPE_CHECKING:
    from checkray.actors.benchmark.cached import Cached
    from checkray.actors.benchmark.predictor import ModelRun

MODELS_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("family", pa.string()),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("accuracy", pa.float64()),
        pa.field("error", pa.string()),
        pa.field("part", pa.string()),  # key of its probabilities in stages/predict.parts/
        pa.field("rows", pa.int64()),  # inputs it was run on
        pa.field("cached", pa.bool_()),  # committed by an earlier run (its checkpoint, or the content cache)
        pa.field("host_size", pa.int64()),  # models that shared its host process
        pa.field("load_seconds", pa.float64()),
        pa.field("ready_seconds", pa.float64()),
        pa.field("predict_seconds", pa.float64()),
        pa.field("cache_hits", pa.int64()),  # inputs whose predictions came from the content cache
    ]
)
_TIMINGS = ("load_seconds", "ready_seconds", "predict_seconds", "host_size")


def spec_fingerprint(spec: ModelSpec) -> dict:
    """A spec with every file, directory or module it names digested by content
    (``checkray.engine.stages.reference_digest``): a retrained, edited or replaced model reruns."""
    return reference_digest(spec.model_dump(mode="json", exclude={"accuracy", "meta"}))


def hash_table(table: pa.Table) -> str:
    return hashlib.sha256(table_bytes(table)).hexdigest()[:20]


def cases_stage(parts: Sequence[pa.Table], bench: BenchmarkConfig) -> Stage:
    digest = fingerprint([hash_table(t) for t in parts])

    def run(ctx: StageContext):
        cases, inputs = prepare_cases(parts, dedup=bench.dedup_texts)
        return {"data": cases, "inputs": inputs}

    return Stage("cases", run, config=bench.dedup_texts, external=(digest,))


@contextmanager
def model_progress(models: Sequence[str]):
    """Per-model progress with the time left: a rich bar per model on a terminal; elsewhere
    a line when a model loads, finishes or fails, and a status line every 30 s."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    )
    tasks = {m: progress.add_task(m, total=1, start=False) for m in models}
    state: dict[str, tuple[int, int, float]] = {}  # model -> (done, total, loaded at)
    last = [time.perf_counter()]

    def status_line() -> None:
        now = time.perf_counter()
        running = {m: s for m, s in state.items() if s[0] < s[1]}
        finished = len(models) - len(running)
        slow = []
        for m, (done, total, t0) in running.items():
            rate = done / max(now - t0, 1e-9)
            left = (total - done) / rate if rate > 0 else float("inf")
            slow.append((left, m, done, total))
        if slow:
            left, m, done, total = max(slow)
            eta = "unknown" if left == float("inf") else f"~{left / 60:.1f} min left"
            console.print(
                f"[dim]benchmark · {finished}/{len(models)} models finished; slowest {m}: {done}/{total} inputs, {eta}[/dim]",
                soft_wrap=True,  # one line per status in a log file
            )

    def on_event(model: str, status: str, done: int, n: int) -> None:
        if status == "loaded":
            progress.start_task(tasks[model])
            progress.update(tasks[model], total=max(n, 1), completed=0)
            state[model] = (0, n, time.perf_counter())
        elif status in ("batch", "done"):
            progress.update(tasks[model], completed=done)
            t0 = state.get(model, (0, n, time.perf_counter()))[2]
            state[model] = (done, n, t0)
        if status == "failed":
            state[model] = (n, n, 0.0)
            console.print(f"[yellow]benchmark · {model}: failed after {done}/{n} inputs[/yellow]")
        elif status == "isolated":
            console.print(f"[yellow]benchmark · {model}: its shared host died; rerunning it alone[/yellow]")
        elif status in ("loaded", "done"):
            console.print(f"[dim]benchmark · {model}: {status} ({done}/{n} inputs)[/dim]")
        if not console.is_terminal and time.perf_counter() - last[0] > 30:
            last[0] = time.perf_counter()
            status_line()

    with progress:
        yield on_event


def _part_table(rows, probs, labels: list[str], meta: dict) -> pa.Table:
    """One model's outputs as its stage part: ``probs`` per input, or ``answer`` per input
    for an answering model (no labels)."""
    if not labels:
        outputs = {"answer": pa.array(list(probs), pa.string())}
    else:
        width = len(labels)
        offsets = pa.array(np.arange(0, len(rows) * width + 1, width, dtype=np.int32))
        outputs = {"probs": pa.ListArray.from_arrays(offsets, pa.array(np.asarray(probs, np.float32).reshape(-1)))}
    table = pa.table({"input_key": pa.array(rows, pa.int64()), **outputs})
    return table.replace_schema_metadata({"checkray.model": json.dumps({"labels": labels, **meta})})


@dataclass
class ModelRow:
    """One model's row of ``models.parquet`` (``MODELS_SCHEMA``)."""

    model: str
    family: str
    labels: list[str]
    accuracy: float | None
    error: str | None
    part: str | None  # key of its probabilities in stages/predict.parts/
    rows: int
    cached: bool
    host_size: int | None = None
    load_seconds: float | None = None
    ready_seconds: float | None = None
    predict_seconds: float | None = None
    cache_hits: int | None = None

    @classmethod
    def of(
        cls,
        spec: ModelSpec,
        labels: Sequence[str],
        *,
        meta: Mapping[str, Any],
        error: str | None = None,
        part: str | None = None,
        rows: int = 0,
        cached: bool = False,
    ) -> ModelRow:
        """The row of ``spec``; ``meta`` holds its timings and cache hits (missing: null)."""
        return cls(
            model=spec.name,
            family=spec.family,
            labels=list(labels),
            accuracy=spec.accuracy,
            error=error,
            part=part,
            rows=rows,
            cached=cached,
            cache_hits=meta.get("cache_hits"),
            **{k: meta.get(k) for k in _TIMINGS},
        )


def models_table(rows: Sequence[ModelRow]) -> pa.Table:
    return pa.Table.from_pylist([dataclasses.asdict(r) for r in rows], schema=MODELS_SCHEMA)


def run_timings(run: ModelRun) -> dict[str, Any]:
    return {k: getattr(run, k) for k in _TIMINGS}


def predict_stage(specs: Sequence[ModelSpec], bench: BenchmarkConfig, cache_cfg: CacheConfig | None = None) -> Stage:
    settings = bench.settings()

    def run(ctx: StageContext):
        rows = predict_models(ctx, specs, bench, settings, cache_cfg)
        failed = [s.name for s in specs if rows[s.name].error is not None]
        if failed:
            ctx.incomplete = f"{len(failed)} model(s) failed: {', '.join(failed[:5])}"
        return {"models": models_table([rows[s.name] for s in specs])}

    config = [
        [spec_fingerprint(s) for s in specs],
        bench.backend,
        bench.max_cases_per_model,
        bench.sample_seed,
        settings,
    ]
    return Stage("predict", run, inputs=("cases",), config=config, version="2")


def predict_models(
    ctx: StageContext,
    specs: Sequence[ModelSpec],
    bench: BenchmarkConfig,
    settings: ExpectationSettings,
    cache_cfg: CacheConfig | None,
) -> dict[str, ModelRow]:
    """Each model's row, its probabilities committed as a stage part: by an earlier run, from
    the content cache whole, or predicted now (a model that fails is not committed)."""
    from checkray.actors.benchmark import cached

    inputs = ctx.input("cases", "inputs")
    texts = inputs.column("text").to_pylist()
    pairs = inputs.column("text_pair").to_pylist() if inputs.column("text_pair").null_count < len(texts) else None
    needed = needed_inputs(ctx.input("cases"), specs, settings, bench.max_cases_per_model, bench.sample_seed)
    base = ctx.done["cases"].fingerprint
    keys = {s.name: fingerprint(spec_fingerprint(s), base, bench.backend, hash_rows(needed[s.name])) for s in specs}
    rows = committed_rows(ctx, specs, keys)
    todo = [s for s in specs if s.name not in rows]
    if rows:
        console.print(f"[dim]benchmark · predict: {len(rows)} model(s) committed by an earlier run[/dim]")
    # The content cache (any run, any --out): a model runs only on inputs no run scored.
    cache = open_cache(cache_cfg) if todo and (cache_cfg is None or cache_cfg.predictions) else None
    digests = text_digests(texts, pairs) if cache is not None else None
    # Answers are not kept in the content cache (it holds probabilities): answering models
    # resume from their stage checkpoint only.
    hits = {s.name: cached.lookup(None if answers(s) else cache, s, needed[s.name], digests) for s in todo}
    rows.update(commit_cache_hits(ctx, todo, hits, keys))
    todo = [s for s in todo if s.name not in rows]
    if cache is not None and any(h.hits for h in hits.values()):
        n = sum(h.hits for h in hits.values())
        console.print(f"[dim]benchmark · predict: {n} (model, input) pairs from the cache {cache.uri}[/dim]")
    if todo:
        commit = PartCommitter(ctx, {s.name: s for s in todo}, keys, hits, cache, digests)
        failed = run_models(todo, texts, pairs, hits, bench, cache_cfg, commit)
        rows.update(commit.committed)
        rows.update(failed)
    return rows


def committed_rows(ctx: StageContext, specs: Sequence[ModelSpec], keys: Mapping[str, str]) -> dict[str, ModelRow]:
    """Rows of the models whose part an earlier run committed (their checkpoint)."""
    rows: dict[str, ModelRow] = {}
    for spec in specs:
        part = ctx.read_part(keys[spec.name])
        if part is not None and part.schema.metadata and b"checkray.model" in part.schema.metadata:
            meta = json.loads(part.schema.metadata[b"checkray.model"])
            rows[spec.name] = ModelRow.of(
                spec, meta["labels"], meta=meta, part=keys[spec.name], rows=part.num_rows, cached=True
            )
    return rows


def commit_cache_hits(
    ctx: StageContext, specs: Sequence[ModelSpec], hits: Mapping[str, Cached], keys: Mapping[str, str]
) -> dict[str, ModelRow]:
    """Commit the models the content cache holds whole (every needed input); their rows."""
    rows: dict[str, ModelRow] = {}
    for spec in [s for s in specs if hits[s.name].hits and not hits[s.name].missing]:
        hit = hits[spec.name]
        meta = {"cache_hits": hit.hits}
        ctx.write_part(keys[spec.name], _part_table(hit.rows, hit.probs, hit.labels, meta))
        rows[spec.name] = ModelRow.of(spec, hit.labels, meta=meta, part=keys[spec.name], rows=hit.hits, cached=True)
    return rows


@dataclass
class PartCommitter:
    """``on_done`` of ``predict_all``: a finished model's probabilities (with what the cache
    held) are stored in the content cache and committed as its part at once."""

    ctx: StageContext
    specs: Mapping[str, ModelSpec]
    keys: Mapping[str, str]
    hits: Mapping[str, Cached]
    cache: ContentCache | None
    digests: np.ndarray | None
    committed: dict[str, ModelRow] = field(default_factory=dict)  # model -> its row, once committed

    def __call__(self, run: ModelRun) -> None:
        from checkray.actors.benchmark import cached

        spec = self.specs[run.name]
        hit = self.hits[run.name]
        meta = run_timings(run) | {"cache_hits": hit.hits}
        if run.labels:
            cached.store(self.cache, spec, run.rows, run.probs, run.labels, self.digests)
            all_rows, probs = cached.merge(hit, run.rows, run.probs, run.labels)
        else:  # answers: never cached (see predict_models)
            all_rows, probs = np.asarray(run.rows, np.int64), run.probs
        self.ctx.write_part(self.keys[run.name], _part_table(all_rows, probs, run.labels, meta))
        self.committed[run.name] = ModelRow.of(
            spec, run.labels, meta=meta, part=self.keys[run.name], rows=len(all_rows)
        )


def run_models(
    todo: Sequence[ModelSpec],
    texts: Sequence[str],
    pairs: Sequence[str | None] | None,
    hits: Mapping[str, Cached],
    bench: BenchmarkConfig,
    cache_cfg: CacheConfig | None,
    commit: PartCommitter,
) -> dict[str, ModelRow]:
    """Predict ``todo`` on the inputs the cache lacks, each committed as it finishes; the
    rows of the models that failed."""
    from checkray.actors.benchmark.predictor import PredictOptions, Timeouts, plan_predictors, predict_all

    resources = cluster_resources()
    plan = plan_predictors(resources, bench.backend, len(todo), bench.max_concurrent_models, bench.gpu_fraction)
    local = predicts_in_process(
        todo, {s.name: len(hits[s.name].missing) for s in todo}, bench, resources, driver_node_cpus()
    )
    if local:
        console.print(
            f"[dim]benchmark · predict: {local:,} (model, input) predictions, in this process "
            f"(benchmark.in_process_below: {bench.in_process_below:,})[/dim]"
        )
    options = PredictOptions(
        batch_size=bench.batch_size,
        in_flight=bench.in_flight,
        models_per_host=bench.models_per_host,
        timeouts=Timeouts(bench.load_timeout_s, bench.batch_timeout_s),
        share_encoders=bench.share_encoders,
        in_process=bool(local),
    )
    with model_progress([s.name for s in todo]) as on_event:
        runs = predict_all(
            todo,
            texts,
            pairs,
            plan,
            options,
            needed={s.name: hits[s.name].missing for s in todo},
            on_event=on_event,
            on_done=commit,
            cache=open_cache(cache_cfg) if cache_cfg is None or cache_cfg.embeddings else None,
        )
    failed = [(spec, runs[spec.name]) for spec in todo if runs[spec.name].error is not None]
    return {spec.name: ModelRow.of(spec, r.labels, meta=run_timings(r), error=r.error) for spec, r in failed}


def predicts_in_process(
    todo: Sequence[ModelSpec],
    rows: Mapping[str, int],
    bench: BenchmarkConfig,
    resources: Mapping[str, float],
    driver_cpus: float,
) -> int:
    """The (model, input) predictions to make when they are few enough to make in this
    process (``bench.in_process_below``), else 0. Never with a GPU or ``backend: gpu`` (the
    hosts take the GPU), on a node that offers Ray no CPU (a cluster's head: the work
    belongs on the workers), or for a model that needs a process of its own
    (``families.runs_in_process``)."""
    from checkray.engine.benchmark.families import runs_in_process

    work = sum(rows.values())
    if not 0 < work <= bench.in_process_below or driver_cpus <= 0:
        return 0
    if float(resources.get("GPU", 0)) > 0 or bench.backend == "gpu":
        return 0
    return work if all(runs_in_process(s) for s in todo) else 0


def hash_rows(rows: Sequence[int]) -> str:
    return hashlib.sha256(np.asarray(rows, dtype=np.int64).tobytes()).hexdigest()[:16]


def _outputs(ctx: StageContext, model: dict, n_inputs: int) -> np.ndarray | None:
    """A model's outputs per input: (n_inputs, labels) probabilities (NaN: not run), or
    for an answering model one answer per input (None: not run); None when it failed."""
    if model["error"] is not None:
        return None
    part = ctx.input_part("predict", model["part"])
    if not model["labels"]:
        answers = np.full(n_inputs, None, dtype=object)
        answers[part.column("input_key").to_numpy()] = np.asarray(part.column("answer").to_pylist(), dtype=object)
        return answers
    probs = np.full((n_inputs, len(model["labels"])), np.nan, dtype=np.float32)
    flat = part.column("probs").combine_chunks()
    if len(part):
        values = flat.values.to_numpy(zero_copy_only=False).reshape(len(part), len(model["labels"]))
        probs[part.column("input_key").to_numpy()] = values
    return probs


def evaluate_stage(specs: Sequence[ModelSpec], bench: BenchmarkConfig) -> Stage:
    settings = bench.settings()

    def run(ctx: StageContext):
        cases = ctx.input("cases")
        n_inputs = ctx.done["cases"].outputs["inputs"]
        models = ctx.input("predict", "models").to_pylist()
        by_name = {s.name: s for s in specs}
        final = ctx.run.path("stages", "evaluate", "results.parquet")
        tmp = final + ".tmp"
        ctx.run.fs.create_dir(ctx.stage_path, recursive=True)
        summaries, examples, total = [], [], 0
        with ctx.run.fs.open_output_stream(tmp) as sink, pq.ParquetWriter(sink, RESULTS_SCHEMA) as writer:
            for model in models:  # one model in memory at a time
                spec = by_name.get(model["model"])
                rows = model_case_rows(cases, spec, bench.max_cases_per_model, bench.sample_seed)
                subset = cases if len(rows) == cases.num_rows else cases.take(rows)
                table = model_results(
                    subset, model["model"], model["labels"], model["error"], _outputs(ctx, model, n_inputs), settings
                )
                writer.write_table(table)
                summaries.append(summarize(table))
                examples.append(example_failures(table, bench.examples))
                total += table.num_rows
        ctx.run.fs.move(tmp, final)
        ctx.extra_outputs["results"] = total
        return {"summary": pa.concat_tables(summaries), "examples": pa.concat_tables(examples)}

    config = [settings, bench.max_cases_per_model, bench.sample_seed, bench.examples]
    return Stage("evaluate", run, inputs=("cases", "predict"), config=config, version="2")
