"""One Ray actor per model under test, and the driver loop that feeds them all at once.

``ModelPredictor`` loads its model once and answers ``predict`` calls on batches of
texts. ``predict_all`` starts an actor per model (at most ``max_concurrent`` alive),
keeps ``in_flight`` batches queued on each so no actor idles between batches, and
collects every model's probabilities. A model that fails to load or raises while
predicting is recorded with its error and its actor is dropped; the others go on.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from actors.models import families
from engine.benchmark.registry import ModelSpec
from engine.config import Backend
from engine.runtime import ActorPlan, plan_actor_pool


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    line = f"{name}: {text}" if text and not text.startswith(name) else (text or name)
    return line if len(line) <= limit else line[: limit - 1] + "…"


class ModelPredictor:
    """Holds one model. Errors while loading are kept and reported by ``status``, because
    an exception in an actor's constructor only surfaces later as an opaque actor death."""

    def __init__(self, spec: dict, threads: int = 1, import_paths: Sequence[str] = (), head_only: bool = False):
        # A local Ray does not give workers the driver's sys.path; "callable" models named
        # as module:function from a script's folder must still import.
        for path in import_paths:
            if path not in sys.path and os.path.isdir(path):
                sys.path.append(path)
        from actors.models import load_model

        self.spec = ModelSpec.model_validate(spec)
        self.error: str | None = None
        self.labels: list[str] = list(self.spec.labels)
        start = time.perf_counter()
        try:
            if head_only:  # embeddings come from a SharedEncoder: load the head alone
                from actors.models.sklearn_models import EncoderHeadModel, load_estimator

                self.model = EncoderHeadModel(self.spec, load_estimator(self.spec), encoder=None)
            else:
                self.model = load_model(self.spec)
            self.labels = list(self.model.labels)
        except Exception as exc:  # any adapter failure becomes this model's error
            self.model, self.error = None, one_line(exc)
        if "torch" in sys.modules and threads:
            sys.modules["torch"].set_num_threads(threads)  # share the node's cores with the other actors
        self.load_seconds = time.perf_counter() - start

    def status(self) -> tuple[list[str], str | None, float]:
        return self.labels, self.error, self.load_seconds

    def predict(self, texts: list[str], pairs: list[str | None] | None) -> np.ndarray:
        if self.model is None:
            raise RuntimeError(self.error or "model is not loaded")
        return self._checked(self.model.predict_proba(texts, pairs), len(texts))

    def predict_embedded(self, embeddings: np.ndarray) -> np.ndarray:
        """Head probabilities for a batch of embeddings from a shared encoder."""
        if self.model is None:
            raise RuntimeError(self.error or "model is not loaded")
        return self._checked(self.model.predict_embeddings(embeddings), len(embeddings))

    def _checked(self, probs, n: int) -> np.ndarray:
        probs = np.asarray(probs, dtype=np.float32)
        if probs.shape != (n, len(self.labels)):
            raise ValueError(f"predict_proba returned shape {probs.shape}, expected {(n, len(self.labels))}")
        return probs


@dataclass
class ModelRun:
    """What one model produced: probabilities for every text, or an error."""

    name: str
    labels: list[str]
    probs: np.ndarray | None
    error: str | None = None
    load_seconds: float = 0.0  # loading the model inside its actor
    ready_seconds: float = 0.0  # actor requested -> model loaded (process start, imports, load)
    predict_seconds: float = 0.0  # model loaded -> last batch back


def plan_predictors(
    resources: Mapping[str, float],
    backend: Backend,
    n_models: int,
    max_concurrent: int | None = None,
    gpu_fraction: float | None = None,
) -> ActorPlan:
    """Resources per model actor so that ``pool_size`` actors run at the same time.

    CPU: the actors share the CPUs (fractional ``num_cpus``, one thread each when they
    outnumber the cores). GPU (only when the cluster reports one): each actor gets an even
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


Event = Callable[[str, str, int, int], None]  # (model, status, texts done, texts total)


def batch_order(rows: Sequence[int], pairs: Sequence[str | None] | None) -> list[int]:
    """Single texts first, then pairs: most batches are then all-single (sent without
    ``pairs``, which single-text adapters refuse) or all-pair."""
    if pairs is None:
        return list(rows)
    return sorted(rows, key=lambda i: pairs[i] is not None)


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
) -> dict[str, ModelRun]:
    """Run every model on ``texts`` (and ``pairs``) in concurrent actors.

    ``needed[model]`` limits a model to some rows (the others stay NaN): no time is spent
    on suites whose labels the model cannot produce. With ``share_encoders``, heads on one
    sentence encoder read embeddings computed once (``actors.benchmark.shared_encoder``).
    """
    import ray

    on_event = on_event or (lambda *a: None)
    n = len(texts)
    rows_of = {s.name: batch_order(needed[s.name] if needed and s.name in needed else range(n), pairs) for s in specs}
    known = set(families())
    runs: dict[str, ModelRun] = {}
    pending = []
    for spec in specs:
        if spec.family not in known:  # no actor for a typo
            runs[spec.name] = ModelRun(
                spec.name, list(spec.labels), None, f"unknown family '{spec.family}' (have: {', '.join(sorted(known))})"
            )
            on_event(spec.name, "failed", 0, len(rows_of[spec.name]))
        else:
            pending.append(spec)

    actor_cls = ray.remote(max_restarts=0)(ModelPredictor).options(**plan.ray_options())
    import_paths = [p for p in sys.path if p and os.path.isdir(p)]
    feeds: dict[str, list] = {}  # head model -> embedding refs, one per batch
    encoders: dict[str, object] = {}  # head model -> its shared encoder actor
    if share_encoders:
        from actors.benchmark.shared_encoder import start_shared_encoders

        # The encoder does most of the group's work: give it the cores a model would get alone.
        threads = max(1, min(8, int(ray.cluster_resources().get("CPU", 1))))
        feeds, encoders = start_shared_encoders(pending, rows_of, texts, pairs, batch_size, plan, threads, import_paths)
    active: dict[str, dict] = {}  # model -> actor, its batch refs and its probabilities
    waiting: dict = {}  # ObjectRef -> (model, kind, batch start)

    def start_next() -> None:
        spec = pending.pop(0)
        actor = actor_cls.remote(spec.model_dump(mode="json"), plan.threads, import_paths, spec.name in feeds)
        active[spec.name] = {"actor": actor, "spec": spec, "next": 0, "out": None, "done": 0, "t0": time.perf_counter()}
        waiting[actor.status.remote()] = (spec.name, "status", -1)

    def submit(name: str) -> None:
        state = active[name]
        rows = rows_of[name]
        while state["next"] < len(rows) and sum(1 for v in waiting.values() if v[0] == name) < in_flight:
            batch = rows[state["next"] : state["next"] + batch_size]
            batch_pairs = None if pairs is None else [pairs[i] for i in batch]
            if batch_pairs is not None and all(p is None for p in batch_pairs):
                batch_pairs = None
            if name in feeds:
                ref = state["actor"].predict_embedded.remote(feeds[name][state["next"] // batch_size])
            else:
                ref = state["actor"].predict.remote([texts[i] for i in batch], batch_pairs)
            waiting[ref] = (name, "predict", state["next"])
            state["next"] += len(batch)

    def finish(name: str, error: str | None = None) -> None:
        state = active.pop(name)
        for ref in [r for r, v in waiting.items() if v[0] == name]:
            del waiting[ref]
        ray.kill(state["actor"])
        encoder = encoders.pop(name, None)
        if encoder is not None and not any(e is encoder for e in encoders.values()):
            ray.kill(encoder)  # its last head is done
        run = runs[name]
        run.predict_seconds = time.perf_counter() - state["t0"] - run.ready_seconds
        total = len(rows_of[name])
        if error:
            run.error, run.probs = error, None
            on_event(name, "failed", state["done"], total)
        else:
            on_event(name, "done", total, total)
        if pending:
            start_next()

    for _ in range(min(plan.pool_size, len(pending))):
        start_next()
    while waiting:
        ready, _ = ray.wait(list(waiting), num_returns=1)
        name, kind, lo = waiting.pop(ready[0])
        state = active[name]
        try:
            value = ray.get(ready[0])
        except Exception as exc:  # the model raised (RayTaskError) or its actor died
            cause = getattr(exc, "cause", None) or exc
            finish(name, one_line(cause))
            continue
        if kind == "status":
            labels, error, load_seconds = value
            runs[name] = ModelRun(name, labels, None, error, load_seconds, time.perf_counter() - state["t0"])
            if error:
                finish(name, error)
                continue
            state["out"] = np.full((n, len(labels)), np.nan, dtype=np.float32)
            on_event(name, "loaded", 0, len(rows_of[name]))
            if not rows_of[name]:
                runs[name].probs = state["out"]
                finish(name)
                continue
        else:
            rows = rows_of[name]
            state["out"][rows[lo : lo + len(value)]] = value
            state["done"] += len(value)
            on_event(name, "batch", state["done"], len(rows))
            if state["done"] == len(rows):
                runs[name].probs = state["out"]
                finish(name)
                continue
        submit(name)
    return {spec.name: runs[spec.name] for spec in specs}
