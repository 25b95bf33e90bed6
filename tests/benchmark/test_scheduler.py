"""The prediction scheduler step by step, without Ray: a fake ``ActorCalls`` hands out
refs, the test decides what each answers (or that the host died), and a fake clock makes
the timeouts deterministic. The same behaviour on real Ray actors is tested in
test_benchmark.py and test_benchmark_faults.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from checkray.actors.benchmark.scheduler import (
    HostPlan,
    ModelRun,
    PredictionScheduler,
    PredictOptions,
    Timeouts,
    error_line,
)
from checkray.engine.benchmark.registry import ModelSpec

LABELS = ["negative", "positive"]


def spec(name: str) -> ModelSpec:
    return ModelSpec(name=name, family="callable", path=f"tests.fakes.models:{name}", labels=LABELS)


@dataclass(eq=False)
class FakeHost:
    plan: HostPlan

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.plan.members]


@dataclass(eq=False)  # hashed by identity, as Ray's object refs are distinct objects
class Ref:
    actor: Any
    method: str
    args: tuple = ()

    @property
    def names(self) -> list[str]:
        return self.actor.names if self.method == "status" else self.args[0]

    @property
    def size(self) -> int:
        return len(self.args[1])


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class HostDied(Exception):
    def __init__(self, cause: BaseException):
        super().__init__("ray wrapper")
        self.cause = cause


@dataclass
class FakeActors:
    """``ActorCalls`` without Ray. ``behaviour[model]``: "ok" (P(positive) = 0.75), "no-load",
    "raises", "crash" (kills its host) or "hang" (never answers)."""

    clock: Clock
    behaviour: dict[str, str] = field(default_factory=dict)
    hosts: list[FakeHost] = field(default_factory=list)
    calls: list[Ref] = field(default_factory=list)
    killed: list[Any] = field(default_factory=list)

    most_alive: int = 0  # hosts started and not killed, at most

    def start_host(self, host: HostPlan) -> FakeHost:
        self.hosts.append(FakeHost(host))
        self.most_alive = max(self.most_alive, len(self.hosts) - len(self.killed))
        return self.hosts[-1]

    def _call(self, actor: Any, method: str, *args: Any) -> Ref:
        self.calls.append(Ref(actor, method, args))
        return self.calls[-1]

    def status(self, actor: Any) -> Ref:
        return self._call(actor, "status")

    def predict(self, actor: Any, names: list[str], texts: list[str], pairs: list[str | None] | None) -> Ref:
        return self._call(actor, "predict", list(names), texts, pairs)

    def predict_embedded(self, actor: Any, names: list[str], embeddings: Any) -> Ref:
        return self._call(actor, "predict_embedded", list(names), embeddings)

    def wait(self, refs: list, timeout: float) -> list:
        ready = [r for r in refs if not any(self.behaviour.get(n) == "hang" for n in r.names)]
        if not ready:
            self.clock.now += timeout
        return ready[:1]

    def get(self, ref: Ref) -> Any:
        if ref.method == "status":
            return {n: (LABELS, "cannot load" if self.behaviour.get(n) == "no-load" else None, 0.25) for n in ref.names}
        if any(self.behaviour.get(n) == "crash" for n in ref.names):
            raise HostDied(RuntimeError("the actor died unexpectedly"))
        probs = np.tile(np.array([0.25, 0.75], np.float32), (ref.size, 1))
        return {n: "ValueError: boom" if self.behaviour.get(n) == "raises" else probs for n in ref.names}

    def kill(self, actor: Any) -> None:
        self.killed.append(actor)


def scheduler(
    hosts: list[HostPlan],
    actors: FakeActors,
    *,
    batch_size: int = 2,
    in_flight: int = 2,
    pool_size: int = 1,
    texts: list[str] | None = None,
    pairs: list[str | None] | None = None,
    **kwargs: Any,
) -> tuple[PredictionScheduler, list[tuple]]:
    events: list[tuple] = []
    options = PredictOptions(batch_size=batch_size, in_flight=in_flight, timeouts=Timeouts(load_s=60, batch_s=10))
    texts = texts or [f"text {i}" for i in range(5)]
    sched = PredictionScheduler(
        hosts,
        texts,
        pairs,
        options,
        pool_size=pool_size,
        actors=actors,
        on_event=lambda *e: events.append(e),
        clock=actors.clock,
        **kwargs,
    )
    return sched, events


def refs_of(sched: PredictionScheduler, method: str) -> list[Ref]:
    return [r for r in sched.waiting if r.method == method]


def test_start_host_starts_the_next_pending_host_and_asks_its_status():
    actors = FakeActors(Clock())
    first, second = HostPlan([spec("a")], [0, 1]), HostPlan([spec("b")], [0, 1])
    sched, _ = scheduler([first, second], actors)
    host = sched.start_host()
    assert host.plan is first and sched.pending == [second]
    assert sched.live == {host.id: host} and host.alive == ["a"]
    (ref,) = sched.waiting
    assert ref.method == "status" and ref.actor is host.actor


def test_status_records_each_model_and_a_model_that_does_not_load_fails_alone():
    clock = Clock()
    actors = FakeActors(clock, {"bad": "no-load"})
    sched, events = scheduler([HostPlan([spec("good"), spec("bad")], [0, 1, 2])], actors)
    host = sched.start_host()
    clock.now = 3.0
    sched.on_result(refs_of(sched, "status")[0])
    assert host.ready and host.alive == ["good"]
    good, bad = sched.runs["good"], sched.runs["bad"]
    assert (good.labels, good.load_seconds, good.ready_seconds, good.host_size) == (LABELS, 0.25, 3.0, 2)
    assert bad.error == "cannot load" and bad.probs is None
    assert ("bad", "failed", 0, 3) in events and ("good", "loaded", 0, 3) in events
    assert host.out["good"].shape == (3, 2) and np.isnan(host.out["good"]).all()
    assert len(refs_of(sched, "predict")) == 2  # then fed: in_flight batches queued


def test_submit_queues_at_most_in_flight_batches_and_sends_pairs_only_when_a_batch_has_one():
    actors = FakeActors(Clock())
    texts = ["t0", "t1", "t2", "t3", "t4"]
    pairs = [None, None, "p2", None, None]
    sched, _ = scheduler([HostPlan([spec("a")], [0, 1, 2, 3, 4])], actors, texts=texts, pairs=pairs, in_flight=2)
    host = sched.start_host()
    sched.submit(host)  # the status in flight counts: one batch more
    assert len(refs_of(sched, "predict")) == 1
    sched.on_result(refs_of(sched, "status")[0])  # loaded: fed up to in_flight
    batches = refs_of(sched, "predict")
    assert [r.args[1] for r in batches] == [["t0", "t1"], ["t2", "t3"]]
    assert [r.args[2] for r in batches] == [None, ["p2", None]]
    assert host.next_row == 4
    sched.submit(host)  # two in flight: nothing more
    assert len(refs_of(sched, "predict")) == 2
    sched.on_result(batches[0])
    assert [r.args[1] for r in refs_of(sched, "predict")] == [["t2", "t3"], ["t4"]]


def test_heads_of_a_shared_encoder_get_its_embedding_batches():
    actors = FakeActors(Clock())
    feed = ["embeddings 0-1", "embeddings 2"]
    host_plan = HostPlan([spec("h1"), spec("h2")], [0, 1, 2], head_only=True)
    sched, _ = scheduler([host_plan], actors, in_flight=3, feeds={"h1": feed, "h2": feed})
    sched.start_host()
    sched.on_result(refs_of(sched, "status")[0])
    batches = refs_of(sched, "predict_embedded")
    assert [(r.args[0], r.args[1]) for r in batches] == [(["h1", "h2"], feed[0]), (["h1", "h2"], feed[1])]


def test_a_batch_fills_each_models_rows_and_a_model_that_raises_fails_alone():
    actors = FakeActors(Clock(), {"bad": "raises"})
    sched, events = scheduler([HostPlan([spec("good"), spec("bad")], [0, 1, 2])], actors, in_flight=1)
    host = sched.start_host()
    sched.on_result(refs_of(sched, "status")[0])
    (batch,) = refs_of(sched, "predict")
    sched.on_result(batch)
    assert sched.runs["bad"].error == "ValueError: boom" and host.alive == ["good"]
    assert host.rows_back == 2
    assert np.allclose(host.out["good"][:2], [[0.25, 0.75]] * 2) and np.isnan(host.out["good"][2]).all()
    assert ("bad", "failed", 0, 3) in events and ("good", "batch", 2, 3) in events
    assert refs_of(sched, "predict")[0].args[0] == ["good"]  # the next batch asks only the survivor


def test_finished_members_are_handed_over_and_their_probabilities_dropped():
    clock = Clock()
    actors = FakeActors(clock)
    done: list[tuple[str, np.ndarray]] = []
    sched, events = scheduler(
        [HostPlan([spec("a"), spec("b")], [0, 1]), HostPlan([spec("c")], [0, 1])],
        actors,
        on_done=lambda run: done.append((run.name, run.probs.copy())),
    )
    host = sched.start_host()
    clock.now = 1.0
    sched.on_result(refs_of(sched, "status")[0])
    clock.now = 4.0
    sched.on_result(refs_of(sched, "predict")[0])  # every row back: finished
    assert [name for name, _ in done] == ["a", "b"] and np.allclose(done[0][1], [[0.25, 0.75]] * 2)
    assert sched.runs["a"].probs is None and sched.runs["a"].predict_seconds == 3.0
    assert ("a", "done", 2, 2) in events and ("b", "done", 2, 2) in events
    assert actors.killed == [host.actor] and host.id not in sched.live
    assert [h.plan.members[0].name for h in sched.live.values()] == ["c"]  # the next host started


def test_without_on_done_the_probabilities_stay_in_the_run():
    actors = FakeActors(Clock())
    sched, _ = scheduler([HostPlan([spec("a")], [0, 1])], actors)
    runs = sched.run()
    assert runs["a"].error is None and np.allclose(runs["a"].probs, [[0.25, 0.75]] * 2)


def test_a_shared_host_that_dies_is_rerun_as_one_host_per_model():
    actors = FakeActors(Clock(), {"crasher": "crash"})
    members = [spec("a"), spec("crasher"), spec("b")]
    later = HostPlan([spec("z")], [0, 1])
    sched, events = scheduler([HostPlan(members, [0, 1]), later], actors)
    host = sched.start_host()
    sched.on_result(refs_of(sched, "status")[0])
    sched.on_result(refs_of(sched, "predict")[0])  # raises: the process died
    assert ("a", "isolated", 0, 2) in events and ("crasher", "isolated", 0, 2) in events
    assert host.actor in actors.killed and not sched.waiting.keys() & set(actors.calls[:2])
    # One host per member, first in line (the last isolated first), before the host planned later.
    started = [h.plan.members[0].name for h in sched.live.values()]
    assert started == ["b"]
    assert [p.members[0].name for p in sched.pending] == ["crasher", "a", "z"]
    assert all(len(p.members) == 1 and p.rows == [0, 1] for p in sched.pending)


def test_a_host_of_one_model_that_dies_fails_that_model_with_the_cause():
    actors = FakeActors(Clock(), {"crasher": "crash"})
    sched, events = scheduler([HostPlan([spec("crasher")], [0, 1])], actors)
    runs = sched.run()
    assert runs["crasher"].error == "RuntimeError: the actor died unexpectedly"
    assert ("crasher", "failed", 0, 2) in events


def test_a_model_whose_host_died_before_its_status_still_gets_a_run():
    actors = FakeActors(Clock())
    sched, _ = scheduler([HostPlan([spec("a")], [0, 1, 2])], actors)
    host = sched.start_host()
    sched.host_failed(host, "died while loading")
    run = sched.runs["a"]
    assert (run.error, run.labels, run.rows, run.host_size) == ("died while loading", LABELS, [0, 1, 2], 1)


def test_a_host_that_does_not_load_in_time_times_out():
    clock = Clock()
    actors = FakeActors(clock, {"slow": "hang"})
    sched, _ = scheduler([HostPlan([spec("slow")], [0, 1])], actors)
    host = sched.start_host()
    clock.now = 59.0
    sched.on_timeout()
    assert host.id in sched.live  # within load_s
    clock.now = 61.0
    sched.on_timeout()
    assert sched.runs["slow"].error == "timed out: its host did not load within 60s"
    assert host.id not in sched.live and not sched.waiting


def test_a_loaded_host_that_answers_no_batch_in_time_times_out():
    clock = Clock()
    actors = FakeActors(clock)
    sched, _ = scheduler([HostPlan([spec("stuck")], [0, 1])], actors)
    sched.start_host()
    sched.on_result(refs_of(sched, "status")[0])
    clock.now = 11.0  # batch_s is 10
    sched.on_timeout()
    assert sched.runs["stuck"].error == "timed out: its host answered no batch within 10s"


def test_run_isolates_the_culprit_and_finishes_everyone_else():
    actors = FakeActors(Clock(), {"crasher": "crash", "hung": "hang", "bad": "raises"})
    plans = [HostPlan([spec("a"), spec("crasher"), spec("bad")], [0, 1, 2, 3, 4]), HostPlan([spec("hung")], [0, 1])]
    sched, _ = scheduler(plans, actors, pool_size=2)
    runs = sched.run()
    assert runs["a"].error is None and runs["a"].probs.shape == (5, 2) and runs["a"].host_size == 1
    assert runs["crasher"].error == "RuntimeError: the actor died unexpectedly"
    assert runs["bad"].error == "ValueError: boom"
    assert runs["hung"].error.startswith("timed out")
    assert not sched.live and not sched.waiting and not sched.pending
    assert len(actors.killed) == len(actors.hosts) == 5  # every host started was stopped


def test_a_host_with_no_rows_finishes_once_loaded():
    actors = FakeActors(Clock())
    sched, events = scheduler([HostPlan([spec("a")], [])], actors)
    runs = sched.run()
    assert runs["a"].error is None and runs["a"].probs.shape == (0, 2)
    assert ("a", "done", 0, 0) in events and not refs_of(sched, "predict")


def test_a_shared_encoder_is_stopped_when_its_last_head_is_done():
    encoder = object()
    actors = FakeActors(Clock())
    sched, _ = scheduler([], actors, encoders={"h1": encoder, "h2": encoder})
    sched.release_encoders(["h1"])
    assert actors.killed == []
    sched.release_encoders(["h2"])
    assert actors.killed == [encoder]


def test_the_pool_size_bounds_the_hosts_alive_at_once():
    actors = FakeActors(Clock())
    sched, _ = scheduler([HostPlan([spec(n)], [0, 1, 2]) for n in "abcde"], actors, pool_size=2)
    runs = sched.run()
    assert all(r.error is None for r in runs.values()) and len(actors.hosts) == 5
    assert actors.most_alive == 2


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (HostDied(MemoryError("oom")), "MemoryError: oom"),
        (ValueError("plain"), "ValueError: plain"),
    ],
)
def test_error_line_unwraps_rays_task_error(exc, line):
    assert error_line(exc) == line


def test_model_run_defaults():
    run = ModelRun("m", LABELS, None)
    assert (run.error, run.rows, run.host_size) == (None, [], 1)


def test_a_model_of_an_unknown_family_fails_without_a_host():
    from checkray.actors.benchmark.predictor import unknown_family_runs

    typo = ModelSpec(name="typo", family="sklearnn", path="m.joblib")
    events: list[tuple] = []
    runs, runnable = unknown_family_runs([spec("a"), typo], {"a": [0, 1], "typo": [0, 1]}, lambda *e: events.append(e))
    assert [s.name for s in runnable] == ["a"]
    assert runs["typo"].error.startswith("unknown family 'sklearnn' (have: ") and runs["typo"].rows == [0, 1]
    assert events == [("typo", "failed", 0, 2)]
