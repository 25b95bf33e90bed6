"""Export a transformers module to ONNX once, quantise it on request, and cache both.

The graph is traced from the packaged PyTorch weights (``torch.onnx.export``, TorchScript
tracing with dynamic batch and sequence axes; nothing is downloaded) and written under
``$CHECKRAY_CACHE/onnx/<key>/`` (``$CHECKRAY_ONNX_CACHE`` if set), where the key digests what the graph is made of: the
model by content (``checkray.actors.assets.pin_model``), what the graph returns and
the torch/onnx versions that traced it. ``int8`` is ``onnxruntime.quantization.
quantize_dynamic`` over the fp32 file (per-channel int8 weights of every MatMul/Gemm,
activations quantised on the fly). Each file is written to a temporary name beside its
target and renamed, so a concurrent actor or a crash never lets a half-written graph load;
two processes exporting at once both finish and one rename wins.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from checkray.engine.config import cache_root
from checkray.engine.errors import InputError

log = logging.getLogger(__name__)

OPSET = 17
PRECISIONS = ("fp32", "int8")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "transformers", "onnx", "onnxruntime"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "none"
    return out


ROOT_ENV = "CHECKRAY_ONNX_CACHE"


def onnx_root() -> Path:
    """Where exported graphs live: ``$CHECKRAY_ONNX_CACHE``, else ``<cache root>/onnx``."""
    return Path(os.environ.get(ROOT_ENV) or cache_root() / "onnx").expanduser()


def graph_dir(identity: dict[str, Any]) -> Path:
    """The cache folder of one traced graph (both precisions live in it)."""
    payload = json.dumps({"graph": identity, "opset": OPSET, **_versions()}, sort_keys=True, default=str)
    return onnx_root() / hashlib.sha256(payload.encode()).hexdigest()[:24]


def _atomic(target: Path, write: Callable[[Path], None]) -> Path:
    """``write(tmp)`` then rename to ``target`` (same folder, so the rename is atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def input_names(tokenizer) -> list[str]:
    """The model inputs the tokenizer produces (MPNet and RoBERTa have no token types)."""
    return [n for n in INPUTS if n in tokenizer.model_input_names]


def _trace(module, tokenizer, names: Sequence[str], output: str, path: Path) -> None:
    import torch

    sample = tokenizer(["a short text", "a second, somewhat longer text"], padding=True, return_tensors="pt")
    args = tuple(sample[n] for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    axes[output] = {0: "batch"} if output == "logits" else {0: "batch", 1: "tokens"}
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings about shape-dependent Python branches
        torch.onnx.export(
            _Outputs(module, names, output),
            args,
            str(path),
            input_names=list(names),
            output_names=[output],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,
        )


def _Outputs(module, names: Sequence[str], output: str):
    """``module`` as a function of positional tensors returning one named output."""
    import torch

    class Outputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, *tensors):
            result = self.inner(**dict(zip(names, tensors, strict=True)))
            return getattr(result, output)

    return Outputs().eval()


def _quantize(source: Path, path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger("root").setLevel(logging.ERROR)  # its "consider pre-processing" advice
    quantize_dynamic(str(source), str(path), weight_type=QuantType.QInt8, per_channel=True)


def exported(
    identity: dict[str, Any], precision: str, load: Callable[[], tuple[Any, Any, dict]], *, output: str
) -> tuple[Path, dict[str, Any]]:
    """The ONNX file of a model (exported and cached on first use) and what runs it.

    ``identity``: what the model is and how the caller uses it; its ``model`` and
    ``pipeline`` entries key the graph (one graph per set of weights: pooling variants and
    max lengths of one encoder share it), the whole of it keys the description. ``load()``:
    the PyTorch module, its tokenizer and a JSON-able description the caller needs later
    (pooling, max length), called only when either is not cached, so a cached model starts
    without torch weights. ``output``: the attribute of the module's output the graph
    returns (``last_hidden_state`` or ``logits``). The returned dict holds ``inputs`` (the
    graph's input names), ``tokenizer`` (its saved folder) and the description.
    """
    if precision not in PRECISIONS:
        raise InputError(f"ONNX precision '{precision}': unknown (have: {', '.join(PRECISIONS)})")
    folder = graph_dir({"model": identity.get("model"), "pipeline": identity.get("pipeline"), "output": output})
    fp32, inputs = folder / "model.onnx", folder / "inputs.json"
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]
    described = folder / f"pipeline-{digest}.json"
    if not (fp32.exists() and inputs.exists() and described.exists()):
        module, tokenizer, description = load()
        if not (fp32.exists() and inputs.exists()):
            _export_graph(folder, module, tokenizer, output)
        _atomic(described, lambda tmp: tmp.write_text(json.dumps(description)))
    graph = {
        "inputs": json.loads(inputs.read_text()),
        **json.loads(described.read_text()),
        "tokenizer": str(folder / "tokenizer"),
    }
    if precision == "fp32":
        return fp32, graph
    int8 = folder / "model-int8.onnx"
    if not int8.exists():
        _atomic(int8, lambda tmp: _quantize(fp32, tmp))
    return int8, graph


def _export_graph(folder: Path, module, tokenizer, output: str) -> None:
    """Trace ``module`` into ``folder/model.onnx``; save its tokenizer and input names."""
    names = input_names(tokenizer)
    log.info("exporting a model to ONNX (once per set of weights) in %s", folder)
    _atomic(folder / "model.onnx", lambda tmp: _trace(module, tokenizer, names, output, tmp))
    saved = Path(tempfile.mkdtemp(prefix=".tokenizer.", dir=folder))
    tokenizer.save_pretrained(str(saved))
    try:
        os.replace(saved, folder / "tokenizer")
    except OSError:  # another process saved it first: theirs is the same
        shutil.rmtree(saved, ignore_errors=True)
    _atomic(folder / "inputs.json", lambda tmp: tmp.write_text(json.dumps(names)))


def session(path: Path, threads: int | None = None):
    """An ONNX Runtime CPU session with every graph optimisation on."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = int(threads or os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
