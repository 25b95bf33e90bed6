"""Which runtime runs the transformer encoders checkray runs itself, and its cache key.

On CPU a small BERT-style encoder runs faster in ONNX Runtime than in PyTorch eager mode
(1.5x for MiniLM on 2 cores, docs/performance.md), with the same vectors, so that is the
default there; on a CPU whose matrix units multiply bfloat16 natively (Intel AMX), PyTorch
under bf16 autocast is faster still (matmuls in bf16, layer norms and softmax in fp32;
cosine to fp32 >= 0.9998 for MiniLM and mpnet), so that is the default on such a machine;
on a GPU, and for anything that trains, PyTorch stays. The setting is
``runtime.encoder`` (or ``--encoder``), one of ``ENCODERS``:

* ``auto``: ``torch`` when Ray (or torch) sees a GPU; else ``torch-bf16`` when every CPU
  that will run an encoder has native bf16 (``native_bf16``), else ``onnx``;
* ``torch``: PyTorch everywhere (the reference the ONNX path is measured against);
* ``torch-bf16``: PyTorch with CPU bf16 autocast for inference (fast only with native
  bf16; elsewhere emulated and slow);
* ``onnx``: ONNX Runtime fp32, exported once per model (``checkray.actors.onnx_export``);
* ``onnx-int8``: the same graph with dynamically quantised int8 weights: faster on CPUs
  with int8 dot-product instructions, and not identical (cosine to fp32 ~0.99); opt-in.

Like the trust switch, the choice travels to Ray workers as an environment variable, and
every cache entry an encoder writes is keyed by ``inference_identity`` (backend and
precision), so an int8 vector is never served where fp32 was asked for.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Literal

from checkray.engine.errors import InputError

ENCODER_ENV = "CHECKRAY_ENCODER"
Encoder = Literal["auto", "torch", "torch-bf16", "onnx", "onnx-int8"]
ENCODERS: tuple[str, ...] = ("auto", "torch", "torch-bf16", "onnx", "onnx-int8")
TORCH_BACKENDS = ("torch", "torch-bf16")
# The /proc/cpuinfo flags of a bf16 matrix unit `auto` trusts: Intel's AMX tiles (Sapphire
# Rapids and later). AVX512-BF16 alone (AMD Zen 4, Cooper Lake) is not: on a Zen 4 VM bf16
# matched ONNX fp32 in a bench, but inside `checkray demo` the driver's encoders slowed 15x
# and more (in MKL's bf16 GEMM under the CPU flash attention; cause not found), see
# docs/performance.md.
NATIVE_BF16_FLAGS = ("amx_bf16",)


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


def resolve_encoder(setting: str | None = None, *, gpu: bool | None = None, bf16: bool | None = None) -> str:
    """A name of ``ENCODERS`` other than ``auto``: ``auto`` resolved by whether a GPU is
    there (``gpu``; None: asked of Ray when connected, else of torch), then by whether the
    CPUs multiply bf16 natively (``bf16``; None: ``native_bf16()``)."""
    setting = check_encoder(setting or encoder_setting())
    if setting != "auto":
        return setting
    if gpu if gpu is not None else gpu_present():
        return "torch"
    return "torch-bf16" if (bf16 if bf16 is not None else native_bf16()) else "onnx"


def is_torch(backend: str) -> bool:
    """Whether ``backend`` (a resolved encoder) runs the PyTorch module itself."""
    return backend in TORCH_BACKENDS


def torch_autocast(backend: str | None = None):
    """The context a PyTorch inference forward pass runs in: CPU bf16 autocast for
    ``torch-bf16``, else none. Callers cast what comes out to float32."""
    if (backend or resolve_encoder()) != "torch-bf16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast("cpu", dtype=torch.bfloat16)


@functools.lru_cache(maxsize=1)
def cpu_native_bf16() -> bool:
    """Whether this machine's CPU multiplies bf16 natively (``flags_native_bf16`` of its
    first ``flags`` line in /proc/cpuinfo; False where there is no such file)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return flags_native_bf16(line.split(":", 1)[1].split())
    except OSError:
        pass
    return False


def flags_native_bf16(flags) -> bool:
    """Whether a CPU with these /proc/cpuinfo ``flags`` has any of ``NATIVE_BF16_FLAGS``."""
    return not set(NATIVE_BF16_FLAGS).isdisjoint(flags)


def native_bf16() -> bool:
    """Whether every CPU that runs this job's encoders multiplies bf16 natively: this
    machine's, when no Ray is connected or Ray is one node on this machine (a local
    cluster). A cluster of several nodes, or a laptop driving a remote one, cannot vouch
    for the CPUs of its workers from here, so it gets ``onnx`` (the same vectors as fp32
    PyTorch on any CPU) and the cache key stays true in every process."""
    if not cpu_native_bf16():
        return False
    try:
        import ray
    except ImportError:
        return True
    if not ray.is_initialized():
        return True
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) != 1:
        return False
    from ray.util import get_node_ip_address

    return nodes[0].get("NodeManagerAddress") == get_node_ip_address()


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
    """``int8`` for ``onnx-int8``, ``bf16`` for ``torch-bf16``, else ``fp32``."""
    return {"onnx-int8": "int8", "torch-bf16": "bf16"}.get(backend, "fp32")


def inference_identity(backend: str | None = None) -> dict[str, str]:
    """What a cache key must hold of the runtime that computed a vector or prediction."""
    backend = backend or resolve_encoder()
    if is_torch(backend):
        return {"backend": "torch", "precision": precision_of(backend)}
    from importlib.metadata import PackageNotFoundError, version

    try:
        ort = version("onnxruntime")
    except PackageNotFoundError:
        ort = "none"
    return {"backend": "onnx", "precision": precision_of(backend), "onnxruntime": ort}
