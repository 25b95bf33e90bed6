"""Running every model under test at once: hosts, batches, timeouts, crash isolation.

``predict_all`` groups the models into hosts (``checkray.actors.benchmark.host.ModelHost``): each
heavy model alone, cheap models several to a host (about one host per CPU), heads on one
sentence encoder reading embeddings computed once (``checkray.actors.benchmark.shared_encoder``).
At most ``plan.pool_size`` hosts are alive; each keeps ``in_flight`` batches queued so
none idles. A model is done when all its rows are back; ``on_done`` then receives it
(the benchmark checkpoints it there), so a crash later loses nothing finished.

Failures stay with the model that caused them:
* a model that fails to load, raises, or returns garbage: that model fails, one line;
* a host process that dies (segfault, OOM kill, ``os._exit``) or answers nothing within
  the timeout: a host of one model fails that model; a shared host is restarted as one
  host per model, so only the culprit fails.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from checkray.actors.benchmark.host import ModelHost, one_line
from checkray.actors.models import families, is_heavy
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import ContentCache
from checkray.engine.config import Backend
from checkray.engine.runtime import ActorPlan, plan_actor_pool

__all__ = ["ModelRun", "Timeouts", "batch_order", "one_line", "plan_hosts", "plan_predictors", "predict_all"]


@dataclass
class ModelRun:
    """What one model produced: probabilities for its rows, or an error."""

    name: str
    labels: list[str]
    probs: np.ndarray | None  # (len(rows), labels), aligned with ``rows``
    error: str | None = None
    rows: list[int] = field(default_factory=list)  # input rows the model was run on
    load_seconds: float = 0.0  # loading the model inside its host
    ready_seconds: float = 0.0  # host requested -> models loaded (process start, imports, load)
    predict_seconds: float = 0.0  # loaded -> last batch back
    host_size: int = 1  # models sharing its host


@dataclass(frozen=True)
class Timeouts:
    load_s: float = 900.0  # host start and model load
    batch_s: float = 600.0  # no batch back for this long: the host is stuck


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


@dataclass
class HostPlan:
    """Models that run in one host on the same rows."""

    members: list[ModelSpec]
    rows: list[int]
    head_only: bool = False  # heads fed by a shared encoder


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
            hosts.append(HostPlan(members[lo : lo + size], list(rows), head))
    return hosts


Event = Callable[[str, str, int, int], None]  # (model, status, rows done, rows total)


@dataclass
class _Live:
    """A running host and its bookkeeping in the driver."""

    plan: HostPlan
    actor: object
    t0: float
    alive: list[str] = field(default_factory=list)  # members still predicting
    out: dict[str, np.ndarray] = field(default_factory=dict)
    next: int = 0
    done: int = 0
    ready: bool = False
    last_progress: float = 0.0


def predict_all(
    specs: Sequence[ModelSpec],
    texts: Sequence[str],
    pairs: Sequence[str | None] | None,
    plan: ActorPlan,
    batch_size: int,
    in_flight: int = 2,
    on_event: Event | None = None,
    needed: Mapping[str, Sequence[int]] | None = None,
    share_encoders: bool = True,
    on_done: Callable[[ModelRun], None] | None = None,
    models_per_host: int | None = None,
    timeouts: Timeouts = Timeouts(),
    cache: ContentCache | None = None,
) -> dict[str, ModelRun]:
    """Run every model on ``texts`` (and ``pairs``); ``needed[model]`` limits it to some rows.

    Returns a ``ModelRun`` per spec. With ``on_done``, each finished model is handed over
    there and its probabilities are not kept (memory does not grow with the models).
    ``cache``: shared encoders read and store the embeddings of their inputs there.
    """
    import ray

    on_event = on_event or (lambda *a: None)
    n = len(texts)
    rows_of = {s.name: batch_order(needed[s.name] if needed and s.name in needed else range(n), pairs) for s in specs}
    runs: dict[str, ModelRun] = {}
    known = set(families())
    runnable = []
    for spec in specs:
        if spec.family not in known:  # no host for a typo
            error = f"unknown family '{spec.family}' (have: {', '.join(sorted(known))})"
            runs[spec.name] = ModelRun(spec.name, list(spec.labels), None, error, rows_of[spec.name])
            on_event(spec.name, "failed", 0, len(rows_of[spec.name]))
        else:
            runnable.append(spec)

    import_paths = [p for p in sys.path if p and os.path.isdir(p)]
    feeds: dict[str, list] = {}  # head model -> embedding refs, one per batch
    encoders: dict[str, object] = {}  # head model -> its shared encoder actor
    flush_embeddings = None
    if share_encoders:
        from checkray.actors.benchmark.shared_encoder import start_shared_encoders

        # The encoder does most of its heads' work: give it the cores a model would get alone.
        threads = max(1, min(8, int(ray.cluster_resources().get("CPU", 1))))
        feeds, encoders, flush_embeddings = start_shared_encoders(
            runnable, rows_of, texts, pairs, batch_size, plan, threads, import_paths, cache
        )
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    pending = plan_hosts(runnable, rows_of, {m: id(refs) for m, refs in feeds.items()}, cpus, models_per_host)
    host_cls = ray.remote(max_restarts=0, max_task_retries=0)(ModelHost).options(**plan.ray_options())
    live: dict[int, _Live] = {}
    waiting: dict = {}  # ObjectRef -> (host id, kind, batch start)
    counter = itertools.count()

    def start_next() -> None:
        host = pending.pop(0)
        hid = next(counter)
        actor = host_cls.remote(
            [s.model_dump(mode="json") for s in host.members], plan.threads, import_paths, host.head_only
        )
        now = time.perf_counter()
        live[hid] = _Live(host, actor, now, [s.name for s in host.members], last_progress=now)
        waiting[actor.status.remote()] = (hid, "status", -1)

    def release_encoders(names: Sequence[str]) -> None:
        for name in names:
            encoder = encoders.pop(name, None)
            if encoder is not None and not any(e is encoder for e in encoders.values()):
                ray.kill(encoder)  # its last head is done

    def fail(name: str, error: str, host: _Live) -> None:
        if name not in runs:  # its host died before reporting its models
            spec = next(s for s in host.plan.members if s.name == name)
            runs[name] = ModelRun(name, list(spec.labels), None, rows=host.plan.rows, host_size=len(host.plan.members))
        run = runs[name]
        run.error, run.probs = error, None
        run.predict_seconds = time.perf_counter() - host.t0 - run.ready_seconds
        host.alive.remove(name)
        host.out.pop(name, None)
        release_encoders([name])
        on_event(name, "failed", host.done, len(host.plan.rows))

    def close(hid: int) -> None:
        host = live.pop(hid)
        for ref in [r for r, v in waiting.items() if v[0] == hid]:
            del waiting[ref]
        ray.kill(host.actor)
        if pending:
            start_next()

    def host_failed(hid: int, error: str) -> None:
        """The process died or hung: isolate a shared host's models, else fail the model."""
        host = live[hid]
        if len(host.alive) > 1:
            for name in host.alive:
                spec = next(s for s in host.plan.members if s.name == name)
                pending.insert(0, HostPlan([spec], host.plan.rows, host.plan.head_only))
                on_event(name, "isolated", 0, len(host.plan.rows))
            host.alive = []
        else:
            for name in list(host.alive):
                fail(name, error, host)
        close(hid)

    def submit(hid: int) -> None:
        host = live[hid]
        rows = host.plan.rows
        queued = sum(1 for v in waiting.values() if v[0] == hid)
        while host.next < len(rows) and queued < in_flight and host.alive:
            batch = rows[host.next : host.next + batch_size]
            if host.plan.head_only:
                ref = host.actor.predict_embedded.remote(
                    list(host.alive), feeds[host.alive[0]][host.next // batch_size]
                )
            else:
                batch_pairs = None if pairs is None else [pairs[i] for i in batch]
                if batch_pairs is not None and all(p is None for p in batch_pairs):
                    batch_pairs = None
                ref = host.actor.predict.remote(list(host.alive), [texts[i] for i in batch], batch_pairs)
            waiting[ref] = (hid, "predict", host.next)
            host.next += len(batch)
            queued += 1

    def finish_members(hid: int) -> None:
        host = live[hid]
        for name in list(host.alive):
            run = runs[name]
            run.probs = host.out.pop(name)
            run.predict_seconds = time.perf_counter() - host.t0 - run.ready_seconds
            on_event(name, "done", len(host.plan.rows), len(host.plan.rows))
            if on_done is not None:
                on_done(run)
                run.probs = None
        release_encoders(host.alive)
        host.alive = []
        close(hid)

    for _ in range(min(plan.pool_size, len(pending))):
        start_next()
    while waiting:
        ready, _ = ray.wait(list(waiting), num_returns=1, timeout=5.0)
        if not ready:
            now = time.perf_counter()
            for hid, host in list(live.items()):
                limit = timeouts.batch_s if host.ready else timeouts.load_s
                if now - host.last_progress > limit:
                    stage = "answered no batch" if host.ready else "did not load"
                    host_failed(hid, f"timed out: its host {stage} within {limit:.0f}s")
            continue
        hid, kind, lo = waiting.pop(ready[0])
        host = live[hid]
        host.last_progress = time.perf_counter()
        try:
            value = ray.get(ready[0])
        except Exception as exc:  # the host process died, or the shared encoder failed
            cause = getattr(exc, "cause", None) or exc
            host_failed(hid, one_line(cause))
            continue
        rows = host.plan.rows
        if kind == "status":
            host.ready = True
            size = len(host.plan.members)
            for name in list(host.alive):
                labels, error, load_seconds = value[name]
                runs[name] = ModelRun(
                    name, labels, None, None, rows, load_seconds, time.perf_counter() - host.t0, host_size=size
                )
                if error:
                    fail(name, error, host)
                else:
                    host.out[name] = np.full((len(rows), len(labels)), np.nan, dtype=np.float32)
                    on_event(name, "loaded", 0, len(rows))
        else:
            for name in list(host.alive):
                got = value.get(name)
                if isinstance(got, str) or got is None:
                    fail(name, got or "no answer for this model", host)
                else:
                    host.out[name][lo : lo + len(got)] = got
            host.done += len(next((v for v in value.values() if not isinstance(v, str)), []))
            for name in host.alive:
                on_event(name, "batch", min(host.done, len(rows)), len(rows))
        if not host.alive:
            close(hid)
        elif host.ready and (host.done >= len(rows) or not rows) and not any(v[0] == hid for v in waiting.values()):
            finish_members(hid)
        else:
            submit(hid)
    if flush_embeddings is not None:
        flush_embeddings()
    return {spec.name: runs[spec.name] for spec in specs}
