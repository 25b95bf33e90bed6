"""Feeding the model hosts: the driver's side of ``predict_all`` as a scheduler object.

``PredictionScheduler`` holds its state in the open: the hosts still to start
(``pending``), the started ones (``live``), the calls in flight (``waiting``) and what each
model produced so far (``runs``). Each step is a method: start a host, submit batches,
take a result (a host's status, or a batch), give up on a host that answers nothing,
fail a model, isolate the models of a shared host that died, finish a host's models, and
close a host. The steps reach Ray only through an ``ActorCalls`` (``RayActorCalls`` in a
benchmark, ``InProcessCalls`` for small work), so a test drives them one by one with fakes
and a clock of its own.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from checkray.actors.benchmark.host import ModelHost, one_line
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.runtime import ActorPlan

POLL_SECONDS = 5.0  # how long a wait for the next answer lasts before the timeouts are checked


def empty_outputs(rows: int, labels: Sequence[str]) -> np.ndarray:
    """Where a model's outputs are gathered: (rows, labels) probabilities (NaN: not back
    yet), or for an answering model (no labels) one answer per row (None)."""
    if not labels:
        return np.full(rows, None, dtype=object)
    return np.full((rows, len(labels)), np.nan, dtype=np.float32)


@dataclass
class ModelRun:
    """What one model produced: probabilities for its rows, or an error."""

    name: str
    labels: list[str]
    probs: np.ndarray | None  # (len(rows), labels), aligned with ``rows``; answers: (len(rows),) strings
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


@dataclass(frozen=True)
class PredictOptions:
    """How ``predict_all`` batches, groups and waits."""

    batch_size: int  # inputs per predict call
    in_flight: int = 2  # batches queued on each host, so none idles
    models_per_host: int | None = None  # cheap models per host; None: about one host per CPU
    timeouts: Timeouts = Timeouts()
    share_encoders: bool = True  # heads on one sentence encoder read embeddings computed once
    in_process: bool = False  # hosts are objects in this process (``InProcessCalls``), not Ray actors


@dataclass
class HostPlan:
    """Models that run in one host on the same rows."""

    members: list[ModelSpec]
    rows: list[int]
    head_only: bool = False  # heads fed by a shared encoder


Event = Callable[[str, str, int, int], None]  # (model, status, rows done, rows total)


def ignore_event(model: str, status: str, done: int, total: int) -> None:
    """The default ``on_event``: nobody is listening."""


class ActorCalls(Protocol):
    """The Ray calls the scheduler makes. A call returns a ref; ``wait`` says which refs
    have an answer, ``get`` reads it (raising when the host died)."""

    def start_host(self, host: HostPlan) -> Any: ...

    def status(self, actor: Any) -> Any: ...

    def predict(self, actor: Any, names: list[str], texts: list[str], pairs: list[str | None] | None) -> Any: ...

    def predict_embedded(self, actor: Any, names: list[str], embeddings: Any) -> Any: ...

    def wait(self, refs: list, timeout: float) -> list: ...

    def get(self, ref: Any) -> Any: ...

    def kill(self, actor: Any) -> None: ...


class RayActorCalls:
    """``ActorCalls`` on Ray: ``ModelHost`` actors with ``plan``'s resources, never restarted
    (a host that died is the scheduler's to handle, not Ray's)."""

    def __init__(self, plan: ActorPlan, import_paths: Sequence[str]):
        import ray

        self._ray = ray
        self._host_cls = ray.remote(max_restarts=0, max_task_retries=0)(ModelHost).options(**plan.ray_options())
        self._threads = plan.threads
        self._import_paths = list(import_paths)

    def start_host(self, host: HostPlan) -> Any:
        specs = [s.model_dump(mode="json") for s in host.members]
        return self._host_cls.remote(specs, self._threads, self._import_paths, head_only=host.head_only)

    def status(self, actor: Any) -> Any:
        return actor.status.remote()

    def predict(self, actor: Any, names: list[str], texts: list[str], pairs: list[str | None] | None) -> Any:
        return actor.predict.remote(names, texts, pairs)

    def predict_embedded(self, actor: Any, names: list[str], embeddings: Any) -> Any:
        return actor.predict_embedded.remote(names, embeddings)

    def wait(self, refs: list, timeout: float) -> list:
        ready, _ = self._ray.wait(refs, num_returns=1, timeout=timeout)
        return ready

    def get(self, ref: Any) -> Any:
        return self._ray.get(ref)

    def kill(self, actor: Any) -> None:
        self._ray.kill(actor)


class _Answer:
    """A call made in this process: its value, or the exception it raised (``get`` raises it)."""

    def __init__(self, run: Callable[[], Any]):
        self.value: Any = None
        self.error: BaseException | None = None
        try:
            self.value = run()
        except Exception as exc:  # the model's failure: reported by ``get`` as a dead host's would be
            self.error = exc


class InProcessCalls:
    """``ActorCalls`` in the calling process: each ``ModelHost`` is a plain object and each
    call runs when it is made. For small work (``benchmark.in_process_below``) this skips the
    host processes, whose start and imports (sklearn, torch, transformers: 10-30 s on 2
    cores) cost more than the predictions. There is no crash isolation and no timeout here:
    the benchmark picks it only for families that run no user code (``ModelFamily.in_process``)."""

    def start_host(self, host: HostPlan) -> Any:
        specs = [s.model_dump(mode="json") for s in host.members]
        # threads=0: the host leaves torch's thread count (this process's) as it is
        return _Answer(lambda: ModelHost(specs, 0, (), head_only=host.head_only))

    def status(self, actor: _Answer) -> _Answer:
        return _Answer(lambda: self._host(actor).status())

    def predict(self, actor: _Answer, names: list[str], texts: list[str], pairs: list[str | None] | None) -> _Answer:
        return _Answer(lambda: self._host(actor).predict(names, texts, pairs))

    def predict_embedded(self, actor: _Answer, names: list[str], embeddings: Any) -> _Answer:
        return _Answer(lambda: self._host(actor).predict_embedded(names, embeddings))

    def wait(self, refs: list, timeout: float) -> list:
        return refs[:1]  # every call has already answered

    def get(self, ref: _Answer) -> Any:
        if ref.error is not None:
            raise ref.error
        return ref.value

    def kill(self, actor: Any) -> None:
        """Nothing to stop: the host object goes with the scheduler's last reference."""

    @staticmethod
    def _host(actor: _Answer) -> ModelHost:
        if actor.error is not None:
            raise actor.error
        return actor.value


def error_line(exc: BaseException) -> str:
    """One line for a failed call: Ray wraps a host's exception, its ``cause`` says what happened."""
    return one_line(getattr(exc, "cause", None) or exc)


@dataclass
class LiveHost:
    """A started host and what the driver knows of it."""

    id: int
    plan: HostPlan
    actor: Any
    started: float  # clock when it was requested
    last_progress: float  # clock of its last answer: the timeouts count from here
    alive: list[str] = field(default_factory=list)  # members still predicting
    out: dict[str, np.ndarray] = field(default_factory=dict)  # member -> its probabilities so far
    next_row: int = 0  # position in ``plan.rows`` of the next batch to submit
    rows_back: int = 0  # rows whose batch came back
    ready: bool = False  # its status came back: the models are loaded

    @property
    def rows(self) -> list[int]:
        return self.plan.rows

    def member(self, name: str) -> ModelSpec:
        return next(s for s in self.plan.members if s.name == name)


@dataclass(frozen=True)
class Queued:
    """A call in flight: its host, and what it asked (the status, or the batch from ``start``)."""

    host_id: int
    kind: Literal["status", "predict"]
    start: int = -1


class PredictionScheduler:
    """Runs ``hosts`` (at most ``pool_size`` at once) until every model is done or failed.

    ``feeds`` gives each head on a shared encoder its embedding refs (one per batch),
    ``encoders`` the encoder actor it reads from (killed once its last head is done).
    ``on_event(model, status, done, total)`` hears loaded / batch / done / failed /
    isolated; ``on_done(run)`` receives each finished model (its probabilities are then
    dropped here, so memory does not grow with the models).
    """

    def __init__(
        self,
        hosts: Sequence[HostPlan],
        texts: Sequence[str],
        pairs: Sequence[str | None] | None,
        options: PredictOptions,
        *,
        pool_size: int,
        actors: ActorCalls,
        feeds: Mapping[str, list] | None = None,
        encoders: Mapping[str, Any] | None = None,
        on_event: Event | None = None,
        on_done: Callable[[ModelRun], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        poll_seconds: float = POLL_SECONDS,
    ):
        self.texts, self.pairs, self.options = texts, pairs, options
        self.pool_size = pool_size
        self.actors = actors
        self.feeds: dict[str, list] = dict(feeds or {})
        self.encoders: dict[str, Any] = dict(encoders or {})  # head -> its encoder, until the head is done
        self.on_event = on_event or ignore_event
        self.on_done = on_done
        self.clock, self.poll_seconds = clock, poll_seconds
        self.pending: list[HostPlan] = list(hosts)  # not started yet, next first
        self.live: dict[int, LiveHost] = {}
        self.waiting: dict[Any, Queued] = {}  # ref -> the call it answers
        self.runs: dict[str, ModelRun] = {}
        self._host_ids = itertools.count()

    def run(self) -> dict[str, ModelRun]:
        """Start the pool, then take answers (or check the timeouts) until none is awaited."""
        for _ in range(min(self.pool_size, len(self.pending))):
            self.start_host()
        while self.waiting:
            ready = self.actors.wait(list(self.waiting), self.poll_seconds)
            if ready:
                self.on_result(ready[0])
            else:
                self.on_timeout()
        return self.runs

    def start_host(self) -> LiveHost:
        """Start the next pending host and ask for its status (answered once its models load)."""
        plan = self.pending.pop(0)
        now = self.clock()
        host = LiveHost(next(self._host_ids), plan, self.actors.start_host(plan), now, now)
        host.alive = [s.name for s in plan.members]
        self.live[host.id] = host
        self.waiting[self.actors.status(host.actor)] = Queued(host.id, "status")
        return host

    def queued(self, host: LiveHost) -> int:
        return sum(1 for q in self.waiting.values() if q.host_id == host.id)

    def submit(self, host: LiveHost) -> None:
        """Queue the host's next batches until ``in_flight`` are queued or its rows run out."""
        batch_size = self.options.batch_size
        queued = self.queued(host)
        while host.next_row < len(host.rows) and queued < self.options.in_flight and host.alive:
            batch = host.rows[host.next_row : host.next_row + batch_size]
            if host.plan.head_only:
                embeddings = self.feeds[host.alive[0]][host.next_row // batch_size]
                ref = self.actors.predict_embedded(host.actor, list(host.alive), embeddings)
            else:
                ref = self.actors.predict(
                    host.actor, list(host.alive), [self.texts[i] for i in batch], self._pairs(batch)
                )
            self.waiting[ref] = Queued(host.id, "predict", host.next_row)
            host.next_row += len(batch)
            queued += 1

    def _pairs(self, batch: Sequence[int]) -> list[str | None] | None:
        """A batch's text pairs; None when it has none (single-text adapters refuse ``pairs``)."""
        if self.pairs is None:
            return None
        pairs = [self.pairs[i] for i in batch]
        return None if all(p is None for p in pairs) else pairs

    def on_result(self, ref: Any) -> None:
        """An answer came back: read it, then finish, close or feed its host."""
        queued = self.waiting.pop(ref)
        host = self.live[queued.host_id]
        host.last_progress = self.clock()
        try:
            value = self.actors.get(ref)
        except Exception as exc:  # the host process died, or the shared encoder failed
            self.host_failed(host, error_line(exc))
            return
        if queued.kind == "status":
            self.on_status(host, value)
        else:
            self.on_predict(host, queued.start, value)
        self.advance(host)

    def on_status(self, host: LiveHost, status: Mapping[str, tuple[list[str], str | None, float]]) -> None:
        """The host loaded its models: a run per member; a member that did not load fails alone."""
        host.ready = True
        size = len(host.plan.members)
        for name in list(host.alive):
            labels, error, load_seconds = status[name]
            ready_seconds = self.clock() - host.started
            self.runs[name] = ModelRun(name, labels, None, None, host.rows, load_seconds, ready_seconds, host_size=size)
            if error:
                self.fail(name, error, host)
            else:
                host.out[name] = empty_outputs(len(host.rows), labels)
                self.on_event(name, "loaded", 0, len(host.rows))

    def on_predict(self, host: LiveHost, start: int, answers: Mapping[str, Any]) -> None:
        """A batch came back: each member's probabilities, or its one-line error (it fails alone)."""
        for name in list(host.alive):
            got = answers.get(name)
            if isinstance(got, str) or got is None:
                self.fail(name, got or "no answer for this model", host)
            else:
                host.out[name][start : start + len(got)] = got
        host.rows_back += len(next((v for v in answers.values() if not isinstance(v, str)), []))
        for name in host.alive:
            self.on_event(name, "batch", min(host.rows_back, len(host.rows)), len(host.rows))

    def advance(self, host: LiveHost) -> None:
        """After an answer: close a host with no model left, finish one whose rows are all
        back, else keep it fed."""
        if not host.alive:
            self.close(host)
        elif host.ready and (host.rows_back >= len(host.rows) or not host.rows) and not self.queued(host):
            self.finish_members(host)
        else:
            self.submit(host)

    def on_timeout(self) -> None:
        """No answer for a while: a host past its load or batch timeout is taken as hung."""
        timeouts = self.options.timeouts
        now = self.clock()
        for host in list(self.live.values()):
            limit = timeouts.batch_s if host.ready else timeouts.load_s
            if now - host.last_progress > limit:
                stage = "answered no batch" if host.ready else "did not load"
                self.host_failed(host, f"timed out: its host {stage} within {limit:.0f}s")

    def fail(self, name: str, error: str, host: LiveHost) -> None:
        """Model ``name`` failed: record its error; the host goes on with the others."""
        if name not in self.runs:  # its host died before reporting its models
            spec = host.member(name)
            self.runs[name] = ModelRun(name, list(spec.labels), None, rows=host.rows, host_size=len(host.plan.members))
        run = self.runs[name]
        run.error, run.probs = error, None
        run.predict_seconds = self.clock() - host.started - run.ready_seconds
        host.alive.remove(name)
        host.out.pop(name, None)
        self.release_encoders([name])
        self.on_event(name, "failed", host.rows_back, len(host.rows))

    def host_failed(self, host: LiveHost, error: str) -> None:
        """The process died or hung: isolate a shared host's models, else fail its model."""
        if len(host.alive) > 1:
            self.isolate(host)
        else:
            for name in list(host.alive):
                self.fail(name, error, host)
        self.close(host)

    def isolate(self, host: LiveHost) -> None:
        """Rerun each model still alive on ``host`` in a host of its own, first in line, so
        only the culprit fails."""
        for name in host.alive:
            self.pending.insert(0, HostPlan([host.member(name)], host.rows, head_only=host.plan.head_only))
            self.on_event(name, "isolated", 0, len(host.rows))
        host.alive = []

    def finish_members(self, host: LiveHost) -> None:
        """Every row is back: hand each member's run over, then close the host."""
        for name in list(host.alive):
            run = self.runs[name]
            run.probs = host.out.pop(name)
            run.predict_seconds = self.clock() - host.started - run.ready_seconds
            self.on_event(name, "done", len(host.rows), len(host.rows))
            if self.on_done is not None:
                self.on_done(run)
                run.probs = None
        self.release_encoders(host.alive)
        host.alive = []
        self.close(host)

    def close(self, host: LiveHost) -> None:
        """Stop the host, forget its calls in flight, and start the next pending host."""
        del self.live[host.id]
        for ref in [r for r, q in self.waiting.items() if q.host_id == host.id]:
            del self.waiting[ref]
        self.actors.kill(host.actor)
        if self.pending:
            self.start_host()

    def release_encoders(self, names: Sequence[str]) -> None:
        """These heads need their shared encoder no more: kill an encoder whose last head this was."""
        for name in names:
            encoder = self.encoders.pop(name, None)
            if encoder is not None and not any(e is encoder for e in self.encoders.values()):
                self.actors.kill(encoder)
