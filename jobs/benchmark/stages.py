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

import hashlib
import json
import time
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from checkray.engine.benchmark.inputs import prepare_cases
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.benchmark.results import RESULTS_SCHEMA, example_failures, model_results
from checkray.engine.benchmark.sampling import model_case_rows, needed_inputs
from checkray.engine.benchmark.summary import summarize
from checkray.engine.cache import CacheConfig, open_cache, text_digests
from checkray.engine.runtime import cluster_resources
from checkray.engine.stages import Stage, StageContext, fingerprint, reference_digest, table_bytes
from checkray.jobs.benchmark.config import BenchmarkConfig
from checkray.jobs.console import console

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
    width = len(labels)
    offsets = pa.array(np.arange(0, len(rows) * width + 1, width, dtype=np.int32))
    table = pa.table(
        {
            "input_key": pa.array(rows, pa.int64()),
            "probs": pa.ListArray.from_arrays(offsets, pa.array(np.asarray(probs, np.float32).reshape(-1))),
        }
    )
    return table.replace_schema_metadata({"checkray.model": json.dumps({"labels": labels, **meta})})


def predict_stage(specs: Sequence[ModelSpec], bench: BenchmarkConfig, cache_cfg: CacheConfig | None = None) -> Stage:
    settings = bench.settings()

    def run(ctx: StageContext):
        from checkray.actors.benchmark import cached
        from checkray.actors.benchmark.predictor import Timeouts, plan_predictors, predict_all

        inputs = ctx.input("cases", "inputs")
        texts = inputs.column("text").to_pylist()
        pairs = inputs.column("text_pair").to_pylist() if inputs.column("text_pair").null_count < len(texts) else None
        needed = needed_inputs(ctx.input("cases"), specs, settings, bench.max_cases_per_model, bench.sample_seed)
        base = ctx.done["cases"].fingerprint
        keys = {s.name: fingerprint(spec_fingerprint(s), base, bench.backend, hash_rows(needed[s.name])) for s in specs}
        rows: dict[str, dict] = {}
        for spec in specs:
            part = ctx.read_part(keys[spec.name])
            if part is not None and part.schema.metadata and b"checkray.model" in part.schema.metadata:
                meta = json.loads(part.schema.metadata[b"checkray.model"])
                rows[spec.name] = _row(spec, meta["labels"], None, keys[spec.name], part.num_rows, True, meta)
        todo = [s for s in specs if s.name not in rows]
        if rows:
            console.print(f"[dim]benchmark · predict: {len(rows)} model(s) committed by an earlier run[/dim]")
        # The content cache (any run, any --out): a model runs only on inputs no run scored.
        cache = open_cache(cache_cfg) if todo and (cache_cfg is None or cache_cfg.predictions) else None
        digests = text_digests(texts, pairs) if cache is not None else None
        hits = {s.name: cached.lookup(cache, s, needed[s.name], digests) for s in todo}
        for spec in [s for s in todo if hits[s.name].hits and not hits[s.name].missing]:
            hit = hits[spec.name]
            ctx.write_part(keys[spec.name], _part_table(hit.rows, hit.probs, hit.labels, {"cache_hits": hit.hits}))
            rows[spec.name] = _row(spec, hit.labels, None, keys[spec.name], hit.hits, True, {"cache_hits": hit.hits})
        todo = [s for s in todo if s.name not in rows]
        if cache is not None and any(h.hits for h in hits.values()):
            n = sum(h.hits for h in hits.values())
            console.print(f"[dim]benchmark · predict: {n} (model, input) pairs from the cache {cache.uri}[/dim]")

        def commit(run) -> None:  # a finished model: checkpoint it at once
            spec = next(s for s in specs if s.name == run.name)
            cached.store(cache, spec, run.rows, run.probs, run.labels, digests)
            hit = hits[run.name]
            meta = {k: getattr(run, k) for k in _TIMINGS} | {"cache_hits": hit.hits}
            all_rows, probs = cached.merge(hit, run.rows, run.probs, run.labels)
            ctx.write_part(keys[run.name], _part_table(all_rows, probs, run.labels, meta))
            rows[run.name] = _row(spec, run.labels, None, keys[run.name], len(all_rows), False, meta)

        if todo:
            plan = plan_predictors(
                cluster_resources(), bench.backend, len(todo), bench.max_concurrent_models, bench.gpu_fraction
            )
            with model_progress([s.name for s in todo]) as on_event:
                runs = predict_all(
                    todo,
                    texts,
                    pairs,
                    plan,
                    bench.batch_size,
                    bench.in_flight,
                    on_event,
                    {s.name: hits[s.name].missing for s in todo},
                    bench.share_encoders,
                    on_done=commit,
                    models_per_host=bench.models_per_host,
                    timeouts=Timeouts(bench.load_timeout_s, bench.batch_timeout_s),
                    cache=open_cache(cache_cfg) if cache_cfg is None or cache_cfg.embeddings else None,
                )
            for spec in todo:
                r = runs[spec.name]
                if r.error is not None:
                    meta = {k: getattr(r, k) for k in _TIMINGS}
                    rows[spec.name] = _row(spec, r.labels, r.error, None, 0, False, meta)
        failed = [s.name for s in specs if rows[s.name]["error"] is not None]
        if failed:
            ctx.incomplete = f"{len(failed)} model(s) failed: {', '.join(failed[:5])}"
        return {"models": pa.Table.from_pylist([rows[s.name] for s in specs], schema=MODELS_SCHEMA)}

    config = [
        [spec_fingerprint(s) for s in specs],
        bench.backend,
        bench.max_cases_per_model,
        bench.sample_seed,
        settings,
    ]
    return Stage("predict", run, inputs=("cases",), config=config, version="2")


def hash_rows(rows: Sequence[int]) -> str:
    return hashlib.sha256(np.asarray(rows, dtype=np.int64).tobytes()).hexdigest()[:16]


def _row(spec: ModelSpec, labels, error, part, n_rows, cached, meta) -> dict:
    return {
        "model": spec.name,
        "family": spec.family,
        "labels": list(labels),
        "accuracy": spec.accuracy,
        "error": error,
        "part": part,
        "rows": n_rows,
        "cached": cached,
        **{k: meta.get(k) for k in _TIMINGS},
        "cache_hits": meta.get("cache_hits"),
    }


def _probs(ctx: StageContext, model: dict, n_inputs: int) -> np.ndarray | None:
    if model["error"] is not None:
        return None
    part = ctx.input_part("predict", model["part"])
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
                    subset, model["model"], model["labels"], model["error"], _probs(ctx, model, n_inputs), settings
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
