"""Generators as Ray actors: any backend, the same calls.

``start_generator(cfg)`` picks the backend from what Ray reports (``choose_backend``),
plans the actors' resources (``plan_actor_pool``: a GPU each for vLLM; on CPU one actor
with every thread, leaving a CPU for Ray Data tasks; a sliver of CPU for http, which
only waits on the network) and returns an ``ActorGenerator``. That object is itself a
``Generator``: it cuts the inputs into batches of ``llm.batch_size``, sends them to the
actors round-robin with ``.remote`` and returns the outputs in input order. Jobs that
want the futures call ``actor.generate.remote(prompts, params)`` on ``.actors``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import CheckrayError, user_error
from engine.llm import (
    BackendName,
    Generation,
    GenerationParams,
    Generator,
    LLMConfig,
    Message,
    choose_backend,
    choose_local_engine,
)
from engine.runtime import ActorPlan, plan_actor_pool

HTTP_ACTOR_CPUS = 0.1  # an http actor mostly waits on sockets


def build_generator(cfg: LLMConfig, backend: BackendName, threads: int | None = None) -> Generator:
    """The backend object itself, in this process (actors call this in their own)."""
    threads = cfg.threads or threads
    if backend == "http":
        from actors.llm.http_openai import HTTPGenerator

        return HTTPGenerator.from_config(cfg)
    if backend == "vllm":
        from actors.llm.vllm_backend import VLLMGenerator

        return VLLMGenerator(cfg.model, max_model_len=cfg.max_model_len, dtype=cfg.dtype)
    if choose_local_engine(cfg) == "llamacpp":
        from actors.llm.local_llamacpp import LlamaCppGenerator

        return LlamaCppGenerator(cfg.model, n_ctx=cfg.n_ctx, threads=threads)
    from actors.llm.local_transformers import TransformersGenerator

    return TransformersGenerator(cfg.model, threads=threads)


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
    """Actor resources for ``backend`` (pure: tested with plain dicts)."""
    if backend == "vllm":
        return plan_actor_pool(resources, "gpu", cfg.pool_size, cfg.gpu_fraction)
    if backend == "http":
        return ActorPlan("cpu", cfg.pool_size or 1, num_cpus=HTTP_ACTOR_CPUS, num_gpus=0.0, threads=1)
    return plan_actor_pool(resources, "cpu", cfg.pool_size)


class ActorGenerator:
    """A ``Generator`` whose work runs in a pool of ``GeneratorActor``s."""

    def __init__(self, actors: list[Any], batch_size: int, name: str, backend: BackendName):
        self.actors, self.batch_size, self.name, self.backend = actors, batch_size, name, backend

    def __repr__(self) -> str:
        return f"ActorGenerator({self.name!r}, actors={len(self.actors)})"

    def _map(self, method: str, items: Sequence[Any], params: GenerationParams) -> list[Generation]:
        import ray

        payload = params.model_dump()
        futures = []
        for i, start in enumerate(range(0, len(items), self.batch_size)):
            actor = self.actors[i % len(self.actors)]
            futures.append(getattr(actor, method).remote(list(items[start : start + self.batch_size]), payload))
        return [g for batch in ray.get(futures) for g in batch]

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

    from engine.runtime import cluster_resources

    resources = cluster_resources() if resources is None else resources
    backend = choose_backend(cfg, resources)
    if backend == "local":  # a bad path fails here; a builtin GGUF is assembled once, not per actor
        from actors.llm.packaged import resolve_llm

        resolve_llm(cfg.model)
    plan = plan_generators(cfg, backend, resources)
    remote_cls = ray.remote(GeneratorActor)
    actors = [
        remote_cls.options(**plan.ray_options()).remote(cfg.model_dump(), backend, plan.threads)
        for _ in range(plan.pool_size)
    ]
    try:
        names = ray.get([a.ready.remote() for a in actors])
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
        for actor in actors:
            ray.kill(actor)
        raise (user_error(exc) or exc) from None
    return ActorGenerator(actors, cfg.batch_size, names[0], backend)
