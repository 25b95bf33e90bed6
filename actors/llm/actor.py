"""Generators as Ray actors: any backend, the same calls.

``start_generator(cfg)`` picks the backend from what Ray reports (``choose_backend``),
plans the actors' resources (``plan_actor_pool``: a GPU each for vLLM; on CPU one actor
with every thread, leaving a CPU for Ray Data tasks; a sliver of CPU for http, which
only waits on the network) and returns an ``ActorGenerator``. That object is itself a
``Generator``: it cuts the inputs into batches of ``llm.batch_size``, gives each idle
actor the next batch and returns the outputs in input order.

Every wait on the actors is bounded: loading by ``llm.load_timeout_s``, each batch by
``llm.batch_timeout_s``. A timeout, an actor that died for good or an ``LLMError`` raised
in an actor (endpoint down, breaker tripped) kills every actor of the pool and is one
line naming the backend. Actors restart and retry a task a bounded number of times
(``checkray.actors.pool``'s limits; Ray's defaults would retry forever).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from checkray.actors.pool import MAX_RESTARTS, MAX_TASK_RETRIES
from checkray.engine.errors import CheckrayError, user_error
from checkray.engine.llm import (
    BACKENDS,
    LOCAL_ENGINES,
    BackendName,
    Generation,
    GenerationParams,
    Generator,
    LLMConfig,
    LLMError,
    Message,
    choose_backend,
    choose_local_engine,
)
from checkray.engine.runtime import ActorPlan, plan_actor_pool

HTTP_ACTOR_CPUS = 0.1  # an http actor mostly waits on sockets


def build_generator(cfg: LLMConfig, backend: BackendName, threads: int | None = None) -> Generator:
    """The backend object itself, in this process (actors call this in their own)."""
    return BACKENDS.get(backend)(cfg, cfg.threads or threads)


def build_local(cfg: LLMConfig, threads: int | None = None) -> Generator:
    """The ``local`` backend: the engine ``llm.local_engine`` names, or the first installed."""
    return LOCAL_ENGINES.get(choose_local_engine(cfg))(cfg, threads)


class GeneratorActor:
    """Holds one backend; Ray runs it as an actor (``ray.remote(GeneratorActor)``)."""

    def __init__(self, cfg: Mapping[str, Any], backend: BackendName, threads: int | None = None):
        # Ray reports an exception raised in __init__ only as text inside ActorDiedError;
        # keeping it and raising it from ready() gives the driver the one-line error itself.
        self.load_error: CheckrayError | None = None
        try:
            self.generator = build_generator(LLMConfig.model_validate(dict(cfg)), backend, threads)
        except CheckrayError as exc:
            self.load_error = exc

    def ready(self) -> str:
        """The generator's name once loaded; raises the load error otherwise."""
        if self.load_error is not None:
            raise self.load_error
        return self.generator.name

    def generate(self, prompts: Sequence[str], params: Mapping[str, Any]) -> list[Generation]:
        return self.generator.generate(list(prompts), GenerationParams.model_validate(dict(params)))

    def chat(self, messages_list: Sequence[Sequence[Message]], params: Mapping[str, Any]) -> list[Generation]:
        return self.generator.chat(list(messages_list), GenerationParams.model_validate(dict(params)))


def plan_generators(cfg: LLMConfig, backend: BackendName, resources: Mapping[str, float]) -> ActorPlan:
    """Actor resources for ``backend`` by what its actors hold (pure: tested with plain dicts)."""
    held = BACKENDS.record(backend).resources
    if held == "gpu":
        return plan_actor_pool(resources, "gpu", cfg.pool_size, cfg.gpu_fraction)
    if held == "network":
        return ActorPlan("cpu", cfg.pool_size or 1, num_cpus=HTTP_ACTOR_CPUS, num_gpus=0.0, threads=1)
    return plan_actor_pool(resources, "cpu", cfg.pool_size)


class ActorGenerator:
    """A ``Generator`` whose work runs in a pool of ``GeneratorActor``s."""

    def __init__(
        self, actors: list[Any], batch_size: int, name: str, backend: BackendName, batch_timeout_s: float = 3600.0
    ):
        self.actors, self.batch_size, self.name, self.backend = actors, batch_size, name, backend
        self.batch_timeout_s = batch_timeout_s

    def __repr__(self) -> str:
        return f"ActorGenerator({self.name!r}, actors={len(self.actors)})"

    def _fail(self, message: str) -> LLMError:
        self.close()
        return LLMError(f"LLM backend {self.backend} ({self.name}): {message}; its actors were stopped")

    def _map(self, method: str, items: Sequence[Any], params: GenerationParams) -> list[Generation]:
        """One batch per idle actor at a time, so each batch's wait starts when it does."""
        import ray

        if not self.actors:
            raise LLMError(f"LLM backend {self.backend} ({self.name}): used after it was stopped")
        payload = params.model_dump()
        batches = [list(items[i : i + self.batch_size]) for i in range(0, len(items), self.batch_size)]
        results: list[list[Generation] | None] = [None] * len(batches)
        todo, idle = deque(range(len(batches))), list(self.actors)
        running: dict[Any, tuple[int, Any, float]] = {}  # future -> (batch, actor, submitted at)
        while todo or running:
            while todo and idle:
                i, actor = todo.popleft(), idle.pop()
                running[getattr(actor, method).remote(batches[i], payload)] = (i, actor, time.monotonic())
            oldest = min(t for _, _, t in running.values())
            wait = max(0.0, oldest + self.batch_timeout_s - time.monotonic())
            done, _ = ray.wait(list(running), num_returns=1, timeout=wait)
            if not done:
                late = [i for i, _, t in running.values() if time.monotonic() - t >= self.batch_timeout_s]
                if late:
                    raise self._fail(
                        f"a batch of {len(batches[late[0]])} inputs did not finish within "
                        f"llm.batch_timeout_s={self.batch_timeout_s:g} s"
                    )
                continue
            for future in done:
                i, actor, _ = running.pop(future)
                try:
                    results[i] = ray.get(future)
                except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
                    cause = user_error(exc)
                    self.close()
                    if cause is not None:
                        raise cause from None
                    if isinstance(exc, ray.exceptions.RayActorError):
                        raise LLMError(
                            f"LLM backend {self.backend} ({self.name}): an actor died and could not be "
                            f"restarted: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                        ) from None
                    raise
                idle.append(actor)
        return [g for batch in results for g in batch or []]

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[Generation]:
        return self._map("generate", prompts, params)

    def chat(self, messages_list: Sequence[Sequence[Message]], params: GenerationParams) -> list[Generation]:
        return self._map("chat", messages_list, params)

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors = []


def start_generator(cfg: LLMConfig, resources: Mapping[str, float] | None = None) -> ActorGenerator:
    """Start the actors for ``cfg`` on the connected Ray cluster (call ``init_ray`` first).

    Waits until every actor has loaded its model, so a load error surfaces here as the
    backend's one-line error rather than at the first batch.
    """
    import ray

    from checkray.engine.runtime import cluster_resources

    resources = cluster_resources() if resources is None else resources
    backend = choose_backend(cfg, resources)
    if backend == "local":  # a bad path fails here; a builtin GGUF is assembled once, not per actor
        from checkray.actors.llm.packaged import resolve_llm

        resolve_llm(cfg.model)
    plan = plan_generators(cfg, backend, resources)
    remote_cls = ray.remote(GeneratorActor)
    options = {"max_restarts": MAX_RESTARTS, "max_task_retries": MAX_TASK_RETRIES, **plan.ray_options()}
    actors = [
        remote_cls.options(**options).remote(cfg.model_dump(), backend, plan.threads) for _ in range(plan.pool_size)
    ]
    try:
        names = ray.get([a.ready.remote() for a in actors], timeout=cfg.load_timeout_s)
    except ray.exceptions.GetTimeoutError:
        for actor in actors:
            ray.kill(actor)
        raise LLMError(
            f"LLM backend {backend} ({cfg.model}): {plan.pool_size} actor(s) not ready within "
            f"llm.load_timeout_s={cfg.load_timeout_s:g} s (loading the model, or Ray waiting for "
            f"{plan.ray_options()} per actor); the actors were stopped"
        ) from None
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
        for actor in actors:
            ray.kill(actor)
        raise (user_error(exc) or exc) from None
    return ActorGenerator(actors, cfg.batch_size, names[0], backend, cfg.batch_timeout_s)
