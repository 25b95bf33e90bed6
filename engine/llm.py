"""Text generation behind one interface, whatever runs the model.

A ``Generator`` turns prompts (``generate``) or chat conversations (``chat``) into one
``Generation`` per input: the text, why it stopped, and token counts. Backends live in
``actors/llm/`` (they hold weights or connections): llama.cpp and transformers on CPU,
an OpenAI-compatible HTTP endpoint, and vLLM on GPU nodes. This module is pure: the
interface, the parameters, the ``llm:`` config section and the backend choice.

Failures of one input never raise: a malformed or empty answer comes back with
``finish_reason`` ``"empty"`` or ``"error"`` (and ``error`` set) so callers can count
them (``count_finish_reasons``). Only problems that make every request fail (an
unreachable endpoint, a rejected API key, a missing model) raise ``LLMError``.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

from pydantic import Field, field_validator

from checkray.engine.config import NOT_FINGERPRINTED, JobSection, Section
from checkray.engine.errors import CheckrayError
from checkray.engine.lazy import LazyRegistry

FinishReason = Literal["stop", "length", "empty", "error"]
Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}
BackendName = str  # a name in BACKENDS
LocalEngine = str  # a name in LOCAL_ENGINES


@dataclass(frozen=True)
class LLMBackend:
    """How generation is served. ``ref`` names ``build(cfg, threads) -> Generator`` (an
    actor module, imported inside the generator actor). ``resources``: what each actor
    holds, ``gpu`` (a GPU each), ``cpu`` (the CPUs, leaving one to Ray Data) or
    ``network`` (a sliver of a CPU: it waits on a server). ``package``: the module that
    must be importable, and ``install`` what to run when it is not."""

    name: str
    ref: str
    resources: Literal["gpu", "cpu", "network"]
    package: str | None = None
    install: str = ""
    auto: bool = True  # ``backend: auto`` may pick it (never a server someone must name)


@dataclass(frozen=True)
class LocalEngineRecord:
    """A CPU engine of the ``local`` backend; ``auto`` takes the first installed one in
    registration order. ``ref`` names ``build(cfg, threads) -> Generator``."""

    name: str
    ref: str
    package: str | None = None  # None: always installed
    install: str = ""


# The backends, preferred first when ``backend: auto`` (a GPU backend only when Ray reports a GPU).
BACKENDS: LazyRegistry[Callable[..., Generator]] = LazyRegistry("llm backend")
for _backend in [
    LLMBackend("vllm", "checkray.actors.llm.vllm_backend:build_vllm", "gpu", "vllm", "pip install 'checkray[gpu-llm]'"),
    LLMBackend("local", "checkray.actors.llm.actor:build_local", "cpu"),
    LLMBackend("http", "checkray.actors.llm.http_openai:build_http", "network", auto=False),
]:
    BACKENDS.register(_backend)

# The local engines, preferred first: llama.cpp as a prebuilt wheel (loads in a second, no
# conversion, grammars enforced), the opt-in source-built binding, then transformers
# (always installed; dequantizes a GGUF once).
LOCAL_ENGINES: LazyRegistry[Callable[..., Generator]] = LazyRegistry("llm local engine")
for _engine in [
    LocalEngineRecord("llamacpp", "checkray.actors.llm.local_xllamacpp:build_xllamacpp", "xllamacpp", "make setup"),
    LocalEngineRecord(
        "llama-cpp-python", "checkray.actors.llm.local_llamacpp:build_llamacpp", "llama_cpp", "make setup-llamacpp"
    ),
    LocalEngineRecord("transformers", "checkray.actors.llm.local_transformers:build_transformers"),
]:
    LOCAL_ENGINES.register(_engine)


class LLMError(CheckrayError):
    """A generator that cannot serve any request (endpoint down, key rejected, no model)."""


class GenerationParams(Section):
    """Sampling parameters shared by every backend.

    ``temperature == 0`` is greedy decoding (``seed`` then does not matter). With
    ``temperature > 0`` the same ``seed`` gives the same text for the same prompt on the
    local backends: each prompt is sampled with ``seed`` itself, independent of the other
    prompts in its batch, so splitting work across actors does not change outputs.
    """

    seed: int = 0
    temperature: float = Field(default=0.0, ge=0.0, le=5.0, allow_inf_nan=False)
    max_tokens: int = Field(default=128, ge=1)
    stop: list[str] = Field(default_factory=list)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    # > 1 penalises tokens already generated: small models otherwise loop ("It is too
    # boring. It is too boring. ..."). llama.cpp/transformers/vLLM apply it; over HTTP it
    # is sent in the server's dialect (``llm.grammar_style``).
    repetition_penalty: float = Field(default=1.0, gt=0.0, le=10.0, allow_inf_nan=False)
    # A GBNF grammar the output must match (constrained decoding): llama.cpp and vLLM
    # (xgrammar) enforce it; a server gets it when ``llm.grammar_style`` names its
    # dialect; the transformers engine cannot, and parsers stay lenient either way.
    grammar: str | None = None

    @field_validator("stop")
    @classmethod
    def _no_empty_stop(cls, value: list[str]) -> list[str]:
        if any(s == "" for s in value):
            raise ValueError("stop strings must not be empty")
        return value


@dataclass(frozen=True)
class Generation:
    """One output. ``text`` is "" when ``finish_reason`` is ``empty`` or ``error``."""

    text: str
    finish_reason: FinishReason
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None  # one line, for ``finish_reason == "error"``

    @property
    def ok(self) -> bool:
        return self.finish_reason in ("stop", "length")


@runtime_checkable
class Generator(Protocol):
    """What every backend offers. Outputs are in input order, one per input."""

    name: str

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[Generation]: ...

    def chat(self, messages_list: Sequence[Sequence[Message]], params: GenerationParams) -> list[Generation]: ...


def make_generation(
    text: str | None, reason: str | None, prompt_tokens: int = 0, completion_tokens: int = 0
) -> Generation:
    """Normalize a backend's raw answer: blank text is ``empty``; unknown reasons become
    ``stop`` (every backend names "end of sequence or stop string" differently)."""
    if text is None or not text.strip():
        return Generation("", "empty", prompt_tokens, completion_tokens)
    norm: FinishReason = "length" if reason in ("length", "max_tokens") else "stop"
    return Generation(text, norm, prompt_tokens, completion_tokens)


def failed_generation(error: BaseException | str, prompt_tokens: int = 0) -> Generation:
    message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return Generation("", "error", prompt_tokens, 0, " ".join(str(message).split())[:300])


def count_finish_reasons(outputs: Sequence[Generation]) -> dict[str, int]:
    """``{"stop": n, "length": n, "empty": n, "error": n}`` for a report."""
    counts = Counter(o.finish_reason for o in outputs)
    return {reason: counts.get(reason, 0) for reason in ("stop", "length", "empty", "error")}


class LLMConfig(JobSection):
    """The ``llm:`` section: which backend generates, and how it is reached. Fields that
    only change speed or retries are left out of stage fingerprints (NOT_FINGERPRINTED)."""

    key: ClassVar[str] = "llm"

    backend: str = "auto"  # auto or a name in BACKENDS: vllm, local, http
    # builtin:<alias> (packaged GGUF), a .gguf file, a transformers directory, or for
    # http/vllm the model name the server/engine knows.
    model: str = "builtin:qwen2.5-0.5b-instruct"
    # llamacpp: llama.cpp through the prebuilt xllamacpp wheel (``make setup``);
    # llama-cpp-python: through llama-cpp-python, built from source (opt-in ``make setup-llamacpp``);
    # transformers: torch. auto: the first of these that is installed (``choose_local_engine``).
    local_engine: str = "auto"  # auto or a name in LOCAL_ENGINES
    n_ctx: int = Field(default=2048, ge=128)  # context window for the local engines
    threads: int | None = Field(
        default=None, ge=1, json_schema_extra=NOT_FINGERPRINTED
    )  # None: what the actor plan gives
    batch_size: int = Field(default=8, ge=1, json_schema_extra=NOT_FINGERPRINTED)  # prompts per actor call
    pool_size: int | None = Field(
        default=None, ge=1, json_schema_extra=NOT_FINGERPRINTED
    )  # generator actors; None: planned
    gpu_fraction: float = Field(
        default=1.0, gt=0.0, le=1.0, allow_inf_nan=False, json_schema_extra=NOT_FINGERPRINTED
    )  # per vLLM actor
    # http: an OpenAI-compatible server (``/v1/completions``, ``/v1/chat/completions``)
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str | None = "OPENAI_API_KEY"  # the variable's NAME; its value is never logged
    requests_per_second: float = Field(default=4.0, gt=0.0, allow_inf_nan=False, json_schema_extra=NOT_FINGERPRINTED)
    concurrency: int = Field(default=4, ge=1, json_schema_extra=NOT_FINGERPRINTED)  # requests in flight per generator
    max_retries: int = Field(
        default=4, ge=0, le=20, json_schema_extra=NOT_FINGERPRINTED
    )  # on 429, 5xx, connection errors, timeouts
    backoff_s: float = Field(
        default=0.5, ge=0.0, le=60.0, allow_inf_nan=False, json_schema_extra=NOT_FINGERPRINTED
    )  # first wait; doubles each retry
    # How a server receives GenerationParams.grammar / repetition_penalty (non-standard
    # OpenAI fields): "llamacpp" (llama.cpp server: grammar, repeat_penalty), "vllm"
    # (structured_outputs.grammar, repetition_penalty) or "none" (hosted APIs reject
    # unknown fields: both are then not sent).
    grammar_style: Literal["none", "llamacpp", "vllm"] = "none"
    timeout_s: float = Field(
        default=60.0, gt=0.0, le=3600.0, allow_inf_nan=False, json_schema_extra=NOT_FINGERPRINTED
    )  # one request
    # The http client's circuit breaker: this many failed requests in a row (timeouts,
    # 5xx, malformed bodies, ...) stop the run with one LLMError naming the endpoint.
    max_consecutive_failures: int = Field(default=8, ge=1, json_schema_extra=NOT_FINGERPRINTED)
    # Seconds an http generator may spend in total from its first request; None: no limit.
    deadline_s: float | None = Field(default=None, gt=0.0, allow_inf_nan=False, json_schema_extra=NOT_FINGERPRINTED)
    # Every backend, waits on the generator actors: loading the model, and one batch of
    # ``batch_size`` inputs. A timeout kills the actors and is a one-line LLMError.
    load_timeout_s: float = Field(default=900.0, gt=0.0, allow_inf_nan=False, json_schema_extra=NOT_FINGERPRINTED)
    batch_timeout_s: float = Field(default=3600.0, gt=0.0, allow_inf_nan=False, json_schema_extra=NOT_FINGERPRINTED)
    # Answers a stage commits at once (one checkpoint part): a crash loses at most this many.
    part_size: int = Field(default=64, ge=1, json_schema_extra=NOT_FINGERPRINTED)
    # vllm
    max_model_len: int | None = Field(default=None, ge=128)
    dtype: str = "auto"

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        return _registered(value, BACKENDS)

    @field_validator("local_engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return _registered(value, LOCAL_ENGINES)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, not {value!r}")
        return value


def _registered(value: str, registry: LazyRegistry) -> str:
    if value != "auto" and value not in registry:
        raise ValueError(f"Input should be one of: auto, {', '.join(registry.names())} (got {value!r})")
    return value


def importable(package: str | None) -> bool:
    """Whether ``package`` is installed, without importing it (vLLM costs seconds and GPU
    libraries; it is only imported inside a GPU actor). None: nothing to install."""
    return package is None or importlib.util.find_spec(package) is not None


def vllm_importable() -> bool:
    return importable(BACKENDS.record("vllm").package)


def llamacpp_importable() -> bool:
    """Whether llama-cpp-python (the opt-in, source-built binding) is installed."""
    return importable(LOCAL_ENGINES.record("llama-cpp-python").package)


def xllamacpp_importable() -> bool:
    """Whether xllamacpp (llama.cpp as a prebuilt wheel, in the lock) is installed."""
    return importable(LOCAL_ENGINES.record("llamacpp").package)


def choose_backend(cfg: LLMConfig, resources: Mapping[str, float], vllm_available: bool | None = None) -> BackendName:
    """The backend to run (pure given ``vllm_available``; tested with plain dicts).

    ``auto`` picks the first installed GPU backend (vLLM) only when Ray reports a GPU, else
    the local CPU engine; it never picks http (that needs a URL someone chose). An explicit
    GPU backend without a GPU is an error here rather than an actor that waits forever for
    a GPU that does not exist.
    """
    has_gpu = float(resources.get("GPU", 0)) > 0

    def installed(backend: LLMBackend) -> bool:
        if backend.name == "vllm" and vllm_available is not None:
            return vllm_available
        return importable(backend.package)

    if cfg.backend != "auto":
        backend = BACKENDS.record(cfg.backend)
        if backend.resources == "gpu" and not has_gpu:
            raise LLMError(f"llm.backend '{backend.name}' needs a GPU but Ray reports none in the cluster")
        if not installed(backend):
            raise LLMError(f"llm.backend '{backend.name}' needs the {backend.package} package ({backend.install})")
        return backend.name
    for backend in BACKENDS.records():
        if backend.auto and (has_gpu or backend.resources != "gpu") and installed(backend):
            return backend.name
    return "local"


def choose_local_engine(
    cfg: LLMConfig, llamacpp_available: bool | None = None, xllamacpp_available: bool | None = None
) -> LocalEngine:
    """The local engine (pure given the two flags; tested with every combination).

    ``auto``: the first registered engine that is installed (llama.cpp through xllamacpp,
    else llama-cpp-python, else transformers). An explicit engine is taken as is; its
    module says what to install when it is missing.
    """
    if cfg.local_engine != "auto":
        return cfg.local_engine
    given = {"llamacpp": xllamacpp_available, "llama-cpp-python": llamacpp_available}
    for engine in LOCAL_ENGINES.records():
        flag = given.get(engine.name)
        if importable(engine.package) if flag is None else flag:
            return engine.name
    return "transformers"
