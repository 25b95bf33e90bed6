"""Configuration parts every layer shares, validated by pydantic.

The engine's functions take these small sections (``CorpusConfig``, ``ReducerConfig``,
...). The whole file (``CheckrayConfig``, one section per job) and ``load_config`` live in
``jobs/config.py``, since which sections exist is a property of the jobs. Unknown or
mistyped fields are errors that name the field (``topics.clusterer.n_clustres: unknown
field``), never silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from checkray.engine.errors import ConfigError
from checkray.engine.labels import label_map
from checkray.engine.strict import StrictInput, load_yaml

REPO_ROOT = Path(__file__).resolve().parents[1]  # a source tree: configs/ sits beside engine/


def repo_path(path: str | Path) -> str:
    """A relative path of a config (a spec, an embedders list) read against the working
    directory first, then the repository, so the packaged ``configs/...`` files named in
    ``configs/demo.yaml`` are found from any directory. Anything else is returned as given."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists() or not (REPO_ROOT / p).exists():
        return str(p)
    return str(REPO_ROOT / p)


Device = Literal["cpu", "gpu"]  # where work runs
Backend = Literal["auto", "cpu", "gpu"]  # what a config asks for; "auto": a GPU when Ray reports one


def cache_root() -> Path:
    """Where checkray keeps what it builds once per machine (assembled models, WordNet)."""
    return Path(os.environ.get("CHECKRAY_CACHE") or Path.home() / ".cache" / "checkray").expanduser()


class Section(StrictInput):
    """A config section: frozen, and an unknown field is an error.

    A field declared with ``Field(..., json_schema_extra=NOT_FINGERPRINTED)`` changes how
    fast a stage runs, not what it computes (pool sizes, batch sizes); stage fingerprints
    leave it out, every other field is in (``checkray.engine.stages.fingerprint``)."""

    # Infinity and NaN, and booleans where numbers are expected, are refused in every
    # section and its nested sections (``StrictInput``; subclasses merge this config).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    def view(self, *names: str) -> Section:
        """A frozen copy holding only ``names``: what a stage may read, and so exactly what its
        fingerprint needs. Reading another field from it is an AttributeError (a test fails),
        never a stale checkpoint; the other fields can change without rerunning the stage."""
        cls = _view_class(type(self), tuple(sorted(names)))
        return cls(**{name: getattr(self, name) for name in names})


class JobSection(Section):
    """A top-level section of the config file; ``key`` is its name there (``s2lct:``)."""

    key: ClassVar[str] = ""


NOT_FINGERPRINTED = {"fingerprint": False}


@cache
def _view_class(cls: type, names: tuple[str, ...]) -> type:
    unknown = sorted(set(names) - set(cls.model_fields))
    if unknown:
        raise AttributeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    fields = {n: (cls.model_fields[n].annotation, cls.model_fields[n]) for n in names}
    return create_model(f"{cls.__name__}View", __base__=Section, **fields)


M = TypeVar("M", bound=BaseModel)


TASK_TIMEOUT_S = 6 * 3600.0  # runtime.task_timeout_s, and the default of calls that take no config


class RuntimeConfig(Section):
    address: str | None = None  # Ray address; RAY_ADDRESS wins when set
    num_cpus: int | None = Field(default=None, ge=1)  # local Ray only
    num_gpus: int | None = Field(default=None, ge=0)  # local Ray only (tests fake a GPU)
    object_store_mb: int = Field(default=512, ge=64)
    # Embedding jobs of at most this many texts on a local one-node CPU Ray run the encoder
    # in the driver process instead of starting encoder actors (actors/embed_cache.py), and
    # so do COSTELLO's mutations of at most 1,000 seeds (actors/costello/mutators.py);
    # 0: always actors. Changes no vector and no variant.
    embed_in_driver_below: int = Field(default=20_000, ge=0, json_schema_extra=NOT_FINGERPRINTED)
    # Autoscaling clusters (cluster.yaml has GPU workers with min_workers: 0): ask the
    # autoscaler for this many GPUs on connecting and wait up to gpu_wait_s for them, so
    # the plan sees them. 0: plan on what is there now.
    request_gpus: int = Field(default=0, ge=0)
    gpu_wait_s: float = Field(default=900.0, ge=0.0)
    # Share of a stage's items (LLM prompts, models) that may fail with the stage still
    # marked done. Above it the run finishes with what it has, the stage is recorded as
    # incomplete and the next run retries exactly the failed items. 0: any failure retries.
    max_error_share: float = Field(default=0.0, ge=0.0, le=1.0)
    # Load inputs that run code: pickles checkray did not sign, callable models,
    # trust_remote_code (engine/trust.py, SECURITY.md). Same as the --trust-code flag.
    trust_code: bool = False
    # Runtime of the transformer encoders checkray runs itself (engine/inference.py): auto
    # (PyTorch on GPU; on CPU PyTorch bf16 autocast where the CPU multiplies bf16 natively,
    # else ONNX Runtime), torch, torch-bf16, onnx or onnx-int8. Same as --encoder.
    encoder: Literal["auto", "torch", "torch-bf16", "onnx", "onnx-int8"] = "auto"
    # Longest wait on one Ray task or actor call that has no timeout of its own (training
    # a zoo model, a GPU layout task): past it the job stops with a one-line error
    # instead of waiting forever on a hung worker.
    task_timeout_s: float = Field(default=TASK_TIMEOUT_S, gt=0.0)


class CorpusConfig(Section):
    path: str = "builtin:rotten_tomatoes"  # file (parquet/csv/jsonl) or builtin:<name>
    text_column: str = "text"
    label_column: str | None = "label"  # None: unlabeled corpus
    id_column: str | None = None  # None: row number
    limit: int | None = Field(default=None, ge=1)  # first N documents
    sample: int | None = Field(default=None, ge=1)  # N documents drawn at random (seeded)
    sample_seed: int = 0
    max_row_bytes: int = Field(default=100_000, ge=1)
    # Raw label -> label name, applied when the corpus is read, so every job sees names:
    # {0: negative, 1: positive} (or the --labels string "0=negative,1=positive").
    # None: labels as they are (bundled corpora: 0/1 named negative/positive).
    labels: dict[str, str] | None = None

    @field_validator("labels", mode="before")
    @classmethod
    def _label_map(cls, value: Any) -> dict[str, str] | None:
        return label_map(value)


class EmbedderConfig(Section):
    model: str = "builtin:minilm"  # builtin alias, local path or hub name
    batch_size: int = Field(default=256, ge=1, json_schema_extra=NOT_FINGERPRINTED)  # texts per encoder actor call
    encode_batch_size: int = Field(default=64, ge=1)  # rows per forward pass
    pool_size: int | None = Field(default=None, ge=1, json_schema_extra=NOT_FINGERPRINTED)  # None: planned
    backend: Backend = "auto"
    normalize: bool = True


class ReducerConfig(Section):
    n_components: int = Field(default=5, ge=2)
    n_neighbors: int = Field(default=15, ge=2)
    min_dist: float = Field(default=0.0, ge=0.0)
    metric: str = "cosine"
    fit_sample: int = Field(default=20_000, ge=100)  # fit on this many, transform the rest
    # CPU: a corpus fitted whole (no transform pass) of at most this many points gets the
    # exact neighbour graph (engine/topics/reduce.exact_knn) instead of pynndescent's. 0: never.
    exact_knn_below: int = Field(default=20_000, ge=0)
    # Epochs of the 2-D UMAP that lays out the topic map (a figure only: the clusters come
    # from the n-D layout, which keeps umap-learn's default). None: umap-learn's default
    # (500 below 10,000 points, else 200).
    map_epochs: int | None = Field(default=None, ge=10)
    backend: Backend = "auto"


class ClustererConfig(Section):
    n_clusters: int = Field(default=5, ge=1)
    n_init: int = Field(default=10, ge=1)
    backend: Backend = "auto"


class RepresentationConfig(Section):
    name_words: int = Field(default=4, ge=1)  # words in the topic name
    n_keywords: int = Field(default=10, ge=1)
    stop_words: str | None = "english"
    ngram_max: int = Field(default=1, ge=1, le=3)
    min_df: int = Field(default=2, ge=1)


class RepresentativesConfig(Section):
    top_k: int = Field(default=10, ge=1)
    diversity: float = Field(default=0.5, ge=0.0, le=1.0)  # MMR lambda
    candidates: int = Field(default=500, ge=1)  # sampled per cluster, as BERTopic
    stratify: bool = True


def format_error(exc: ValidationError, prefix: str = "") -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in ((prefix,) if prefix else ()) + tuple(err["loc"]))
    msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
    more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"{loc}: {msg}{more}" if loc else f"{msg}{more}"


def validate_section(model: type[M], data: Mapping[str, Any], prefix: str = "", source: str = "") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = f"{source}: " if source else ""
        raise ConfigError(f"{where}{format_error(exc, prefix)}") from None


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """``set_dotted(d, "topics.clusterer.n_clusters", 8)``: CLI flags override the file."""
    node = data
    *parents, leaf = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{dotted}: '{key}' is not a section")
    node[leaf] = value


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; bad YAML, a key given twice or bytes that are not UTF-8 are a
    one-line ``ConfigError`` with the line."""
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}: bad YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: file is not UTF-8 text") from None
