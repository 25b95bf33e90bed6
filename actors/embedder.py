"""Sentence-embedding actor for Ray Data ``map_batches`` (CPU or GPU, same code).

``EmbeddingActor`` holds one sentence-transformers model; Ray Data runs a pool of them
(``ActorPoolStrategy``) sized by ``checkray.engine.runtime.plan_actor_pool``. The device comes
from torch inside the actor: on a GPU node the actor was scheduled with ``num_gpus`` and
sees CUDA; everywhere else it runs on CPU with the planned number of threads.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa

from checkray.actors.assets import resolve_builtin
from checkray.engine.arrays import embeddings_column
from checkray.engine.errors import InputError

log = logging.getLogger(__name__)


def resolve_model(name: str) -> str:
    """A loadable path or hub name for ``builtin:<alias>`` (``actors/assets.py``), a local
    path or a hub id. A local-looking path that does not exist is an error here, before
    any actor starts."""
    if name.startswith("builtin:"):
        return resolve_builtin("embedder", name)
    # Hub ids are "name" or "org/name"; anything else that names a path must exist.
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).exists()
    if looks_local:
        path = Path(name).expanduser()
        if not path.exists():
            raise InputError(f"{name}: model path does not exist")
        return str(path)
    return name  # hub id such as "sentence-transformers/gtr-t5-large"


def torch_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_sentence_transformer(
    model: str, device: str | None = None, threads: int | None = None, backend: str | None = None
):
    """A sentence-transformers model, or its ONNX Runtime twin (same ``encode``) when the
    encoder setting resolves to ONNX on this CPU (``checkray.engine.inference``; training
    callers pass ``backend="torch"``). One-line error when it cannot be loaded."""
    from checkray.engine.inference import is_torch, resolve_encoder

    backend = backend or resolve_encoder()
    if not is_torch(backend) and (device or "cpu") == "cpu":
        onnx = _onnx_twin(model, backend, threads)
        if onnx is not None:
            return onnx
    return autocast_encode(_load_torch(model, device, threads), backend)


def autocast_encode(model, backend: str):
    """``model`` (a SentenceTransformer) with its ``encode`` run under the backend's
    autocast (``checkray.engine.inference.torch_autocast``: bf16 on CPU for
    ``torch-bf16``), its vectors returned as float32; unchanged for any other backend."""
    if backend != "torch-bf16":
        return model
    import torch

    from checkray.engine.inference import torch_autocast

    plain = model.encode

    def encode(*args, **kwargs):
        with torch_autocast(backend), torch.inference_mode():
            out = plain(*args, **kwargs)
        if isinstance(out, torch.Tensor) and out.dtype != torch.float32:
            return out.float()
        if isinstance(out, list) and out and isinstance(out[0], torch.Tensor):
            return [t.float() for t in out]
        return out

    model.encode = encode  # an instance attribute: the class and its modules stay as they are
    return model


def _load_torch(model: str, device: str | None, threads: int | None):
    import torch
    from sentence_transformers import SentenceTransformer

    if threads:
        torch.set_num_threads(threads)  # Ray sets OMP_NUM_THREADS=num_cpus; use the plan instead
    path = resolve_model(model)
    try:
        return SentenceTransformer(path, device=device or torch_device())
    except (OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{model}: cannot load sentence-transformers model: {first}") from None


def _onnx_twin(model: str, backend: str, threads: int | None):
    """The ONNX encoder of ``model``, or None (logged) when its pipeline has a module the
    ONNX path does not rebuild."""
    from checkray.actors.assets import pin_model
    from checkray.actors.onnx_models import UnsupportedPipeline, onnx_sentence_encoder
    from checkray.engine.inference import precision_of

    try:
        return onnx_sentence_encoder(
            {"model": pin_model(model)}, lambda: _load_torch(model, "cpu", threads), precision_of(backend), threads
        )
    except UnsupportedPipeline as exc:
        log.info("%s stays on PyTorch: its pipeline (%s) has no ONNX rebuild", model, exc)
        return None


class EmbeddingActor:
    """Callable class for ``Dataset.map_batches``: Arrow batch in, batch + embedding out."""

    def __init__(
        self,
        model: str,
        encode_batch_size: int = 64,
        normalize: bool = True,
        threads: int | None = None,
        text_column: str = "text",
        keep: tuple[str, ...] = ("id",),
    ):
        self.model = load_sentence_transformer(model, threads=threads)
        self.encode_batch_size = encode_batch_size
        self.normalize = normalize
        self.text_column = text_column
        self.keep = keep

    def __call__(self, batch: pa.Table) -> pa.Table:
        texts = batch.column(self.text_column).to_pylist()
        vectors = self.model.encode(
            texts,
            batch_size=self.encode_batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        cols = {name: batch.column(name) for name in self.keep}
        cols["embedding"] = embeddings_column(vectors)
        return pa.table(cols)
