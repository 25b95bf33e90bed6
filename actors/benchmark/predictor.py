"""Running every model under test at once: hosts, batches, timeouts, crash isolation.

``predict_all`` groups the models into hosts (``checkray.actors.benchmark.host.ModelHost``): each
heavy model alone, cheap models several to a host (about one host per CPU), heads on one
sentence encoder reading embeddings computed once (``checkray.actors.benchmark.shared_encoder``).
``checkray.actors.benchmark.scheduler.PredictionScheduler`` then runs them: at most
``plan.pool_size`` hosts are alive; each keeps ``in_flight`` batches queued so none idles. A
model is done when all its rows are back; ``on_done`` then receives it (the benchmark
checkpoints it there), so a crash later loses nothing finished.

Failures stay with the model that caused them:
* a model that fails to load, raises, or returns garbage: that model fails, one line;
* a host process that dies (segfault, OOM kill, ``os._exit``) or answers nothing within
  the timeout: a host of one model fails that model; a shared host is restarted as one
  host per model, so only the culprit fails.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from checkray.actors.benchmark.host import one_line
from checkray.actors.benchmark.scheduler import (
    Event,
    HostPlan,
    InProcessCalls,
    ModelRun,
    PredictionScheduler,
    PredictOptions,
    RayActorCalls,
    Timeouts,
    ignore_event,
)
from checkray.actors.models import families, is_heavy
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import ContentCache
from checkray.engine.config import Backend
from checkray.engine.runtime import ActorPlan, plan_actor_pool

__all__ = [
    "HostPlan",
    "ModelRun",
    "PredictOptions",
    "Timeouts",
    "batch_order",
    "one_line",
    "plan_hosts",
    "plan_predictors",
    "predict_all",
]


def plan_predictors(
    resources: Mapping[str, float],
    backend: Backend,
    n_models: int,
    max_concurrent: int | None = None,
    gpu_fraction: float | None = None,
) -> ActorPlan:
    """Resources per host so that ``pool_size`` hosts run at the same time.

    CPU: the hosts share the CPUs (fractional ``num_cpus``, one thread each when they
    outnumber the cores). GPU (only when the cluster reports one): each host gets an even
    fraction of the GPUs and of the CPUs, so the whole pool fits and none waits.
    """
    size = max(1, min(n_models, max_concurrent or n_models))
    gpus = float(resources.get("GPU", 0))
    if gpus > 0 and backend != "cpu":
        fraction = gpu_fraction or min(1.0, gpus / size)
        plan = plan_actor_pool(resources, backend, pool_size=size, gpu_fraction=round(fraction, 4))
        cpus = float(resources.get("CPU", 1))
        return dataclasses.replace(plan, num_cpus=round(min(plan.num_cpus, cpus / size), 3))
    return plan_actor_pool(resources, "cpu" if backend == "auto" else backend, pool_size=size)


def batch_order(rows: Sequence[int], pairs: Sequence[str | None] | None) -> list[int]:
    """Single texts first, then pairs: most batches are then all-single (sent without
    ``pairs``, which single-text adapters refuse) or all-pair."""
    if pairs is None:
        return list(rows)
    return sorted(rows, key=lambda i: pairs[i] is not None)


def plan_hosts(
    specs: Sequence[ModelSpec],
    rows_of: Mapping[str, list[int]],
    fed: Mapping[str, object],
    cpus: int,
    models_per_host: int | None = None,
) -> list[HostPlan]:
    """Heavy models alone; cheap models with the same rows (and feed) several to a host.

    ``fed`` maps a head fed by a shared encoder to its feed's identity (heads of different
    encoders never share a host).
    ``models_per_host`` None: about one host per CPU for each such group, so cheap models
    use every core without paying a process each.
    """
    hosts: list[HostPlan] = []
    groups: dict[tuple, list[ModelSpec]] = {}
    for spec in specs:
        feed = fed.get(spec.name)
        if is_heavy(spec) and feed is None:
            hosts.append(HostPlan([spec], list(rows_of[spec.name])))
        else:
            groups.setdefault((feed, tuple(rows_of[spec.name])), []).append(spec)
    for (feed, rows), members in groups.items():
        head = feed is not None
        size = models_per_host or max(1, math.ceil(len(members) / max(1, cpus)))
        for lo in range(0, len(members), size):
            hosts.append(HostPlan(members[lo : lo + size], list(rows), head_only=head))
    return hosts


def unknown_family_runs(
    specs: Sequence[ModelSpec], rows_of: Mapping[str, list[int]], on_event: Event
) -> tuple[dict[str, ModelRun], list[ModelSpec]]:
    """Failed runs for models of an unknown family (no host for a typo), and the others."""
    known = set(families())
    runs: dict[str, ModelRun] = {}
    runnable = []
    for spec in specs:
        if spec.family in known:
            runnable.append(spec)
            continue
        error = f"unknown family '{spec.family}' (have: {', '.join(sorted(known))})"
        runs[spec.name] = ModelRun(spec.name, list(spec.labels), None, error, rows_of[spec.name])
        on_event(spec.name, "failed", 0, len(rows_of[spec.name]))
    return runs, runnable


def predict_all(
    specs: Sequence[ModelSpec],
    texts: Sequence[str],
    pairs: Sequence[str | None] | None,
    plan: ActorPlan,
    options: PredictOptions,
    *,
    needed: Mapping[str, Sequence[int]] | None = None,
    on_event: Event | None = None,
    on_done: Callable[[ModelRun], None] | None = None,
    cache: ContentCache | None = None,
) -> dict[str, ModelRun]:
    """Run every model on ``texts`` (and ``pairs``); ``needed[model]`` limits it to some rows.

    Returns a ``ModelRun`` per spec. With ``on_done``, each finished model is handed over
    there and its probabilities are not kept (memory does not grow with the models).
    ``cache``: shared encoders read and store the embeddings of their inputs there.
    """
    import ray

    on_event = on_event or ignore_event
    n = len(texts)
    rows_of = {s.name: batch_order(needed[s.name] if needed and s.name in needed else range(n), pairs) for s in specs}
    runs, runnable = unknown_family_runs(specs, rows_of, on_event)
    import_paths = [p for p in sys.path if p and os.path.isdir(p)]
    feeds: dict[str, list] = {}  # head model -> embedding refs, one per batch
    encoders: dict[str, object] = {}  # head model -> its shared encoder actor
    flush_embeddings = None
    if options.in_process:
        runs.update(predict_here(runnable, rows_of, texts, pairs, options, on_event, on_done, cache))
        return {spec.name: runs[spec.name] for spec in specs}
    if options.share_encoders:
        from checkray.actors.benchmark.shared_encoder import start_shared_encoders

        # The encoder does most of its heads' work: give it the cores a model would get alone.
        threads = max(1, min(8, int(ray.cluster_resources().get("CPU", 1))))
        feeds, encoders, flush_embeddings = start_shared_encoders(
            runnable, rows_of, texts, pairs, options.batch_size, plan, threads, import_paths, cache
        )
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    fed = {m: id(refs) for m, refs in feeds.items()}  # heads reading one feed may share a host
    scheduler = PredictionScheduler(
        plan_hosts(runnable, rows_of, fed, cpus, options.models_per_host),
        texts,
        pairs,
        options,
        pool_size=plan.pool_size,
        actors=RayActorCalls(plan, import_paths),
        feeds=feeds,
        encoders=encoders,
        on_event=on_event,
        on_done=on_done,
    )
    runs.update(scheduler.run())
    if flush_embeddings is not None:
        flush_embeddings()
    return {spec.name: runs[spec.name] for spec in specs}


def predict_here(
    specs: Sequence[ModelSpec],
    rows_of: Mapping[str, list[int]],
    texts: Sequence[str],
    pairs: Sequence[str | None] | None,
    options: PredictOptions,
    on_event: Event,
    on_done: Callable[[ModelRun], None] | None,
    cache: ContentCache | None,
) -> dict[str, ModelRun]:
    """``predict_all`` for small work: the hosts are objects in this process
    (``InProcessCalls``), the shared encoders embed here too, and every model of a kind
    shares one host (no process start to spread over the cores)."""
    from checkray.actors.benchmark.shared_encoder import local_feeds

    feeds = local_feeds(specs, dict(rows_of), texts, pairs, options.batch_size, cache) if options.share_encoders else {}
    fed = {m: id(feed) for m, feed in feeds.items()}
    return PredictionScheduler(
        plan_hosts(specs, rows_of, fed, 1, len(specs) or None),
        texts,
        pairs,
        options,
        pool_size=1,
        actors=InProcessCalls(),
        feeds=feeds,
        on_event=on_event,
        on_done=on_done,
    ).run()
