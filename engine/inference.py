"""Which runtime runs the transformer encoders checkray runs itself, and its cache key.

On CPU a small BERT-style encoder runs faster in ONNX Runtime than in PyTorch eager mode
(1.5x for MiniLM on 2 cores, docs/performance.md), with the same vectors, so that is the
default there; on a GPU, and for anything that trains, PyTorch stays. The setting is
``runtime.encoder`` (or ``--encoder``), one of ``ENCODERS``:

* ``auto``: ``onnx`` on a CPU-only cluster, ``torch`` when Ray (or torch) sees a GPU;
* ``torch``: PyTorch everywhere (the reference the ONNX path is measured against);
* ``onnx``: ONNX Runtime fp32, exported once per model (``checkray.actors.onnx_export``);
* ``onnx-int8``: the same graph with dynamically quantised int8 weights: faster on CPUs
  with int8 dot-product instructions, and not identical (cosine to fp32 ~0.99); opt-in.

Like the trust switch, the choice travels to Ray workers as an environment variable, and
every cache entry an encoder writes is keyed by ``inference_identity`` (backend and
precision), so an int8 vector is never served where fp32 was asked for.
"""

from __future__ import annotations

import os
from typing import Literal

from checkray.engine.errors import InputError

ENCODER_ENV = "CHECKRAY_ENCODER"
Encoder = Literal["auto", "torch", "onnx", "onnx-int8"]
ENCODERS: tuple[str, ...] = ("auto", "torch", "onnx", "onnx-int8")


def check_encoder(value: str) -> str:
    value = str(value).strip().lower()
    if value not in ENCODERS:
        raise InputError(f"encoder '{value}': unknown (have: {', '.join(ENCODERS)})")
    return value


def set_encoder(value: str) -> None:
    """Choose the encoder runtime for this process and the Ray workers it starts after this."""
    os.environ[ENCODER_ENV] = check_encoder(value)


def encoder_setting() -> str:
    """The configured setting (``auto`` unless set)."""
    return check_encoder(os.environ.get(ENCODER_ENV) or "auto")


def resolve_encoder(setting: str | None = None, *, gpu: bool | None = None) -> str:
    """``torch``, ``onnx`` or ``onnx-int8``: ``auto`` resolved by whether a GPU is there
    (``gpu``; None: asked of Ray when connected, else of torch)."""
    setting = check_encoder(setting or encoder_setting())
    if setting != "auto":
        return setting
    return "torch" if (gpu if gpu is not None else gpu_present()) else "onnx"


def gpu_present() -> bool:
    """Whether the encoders of this job run on a GPU: Ray's view of the cluster when this
    process is connected (a laptop driver of a GPU cluster), else this machine's."""
    try:
        import ray

        if ray.is_initialized():
            return float(ray.cluster_resources().get("GPU", 0)) > 0
    except ImportError:
        pass
    import torch

    return bool(torch.cuda.is_available())


def precision_of(backend: str) -> str:
    """``int8`` for ``onnx-int8``, else ``fp32``."""
    return "int8" if backend == "onnx-int8" else "fp32"


def inference_identity(backend: str | None = None) -> dict[str, str]:
    """What a cache key must hold of the runtime that computed a vector or prediction."""
    backend = backend or resolve_encoder()
    if backend == "torch":
        return {"backend": "torch", "precision": "fp32"}
    from importlib.metadata import PackageNotFoundError, version

    try:
        ort = version("onnxruntime")
    except PackageNotFoundError:
        ort = "none"
    return {"backend": "onnx", "precision": precision_of(backend), "onnxruntime": ort}
