"""Family ``hf``: a transformers sequence classifier (``AutoModelForSequenceClassification``
plus its tokenizer) from a local directory or a hub name.

Pair inputs go to the tokenizer as text pairs, the way NLI/paraphrase models were
trained. ``trust_remote_code`` is passed only when the spec sets it. The label map is
``spec.labels``; its size must equal the model's ``num_labels``. When the model's
``id2label`` names are exactly the spec's labels they are matched by name, otherwise
by position. Options: ``max_length`` (128), ``batch_size`` (32), ``threads``. On CPU the
forward pass runs in ONNX Runtime unless ``runtime.encoder`` resolves to ``torch`` or
``torch-bf16`` (bf16 autocast; ``checkray.engine.inference``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from checkray.actors.models.common import class_columns
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.inference import is_torch, precision_of, resolve_encoder, torch_autocast
from checkray.engine.trust import require_code_trust


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class HFSequenceClassifier:
    def __init__(self, spec: ModelSpec, model, tokenizer):
        import torch

        self.spec, self.name, self.labels = spec, spec.name, list(spec.labels)
        self.model, self.tokenizer = model.eval(), tokenizer
        self.max_length = int(spec.options.get("max_length", 128))
        self.batch_size = int(spec.options.get("batch_size", 32))
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model.to(self.device)
        self.onnx = onnx_forward(spec, model, tokenizer) if self.device == "cpu" else None
        self.backend = resolve_encoder()  # torch-bf16: the PyTorch forward under bf16 autocast
        id2label = {int(k): v for k, v in (model.config.id2label or {}).items()}
        names = [id2label.get(i, str(i)) for i in range(model.config.num_labels)]
        # Default configs name classes LABEL_0..; those say nothing, so map by position.
        by_name = sorted(names) == sorted(self.labels)
        self.columns = class_columns(spec, names if by_name else list(range(model.config.num_labels)))

    def _logits(self, texts: list[str], pairs: list[str] | None) -> np.ndarray:
        import torch

        out = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            second = pairs[start : start + self.batch_size] if pairs is not None else None
            if self.onnx is not None:
                enc = self.tokenizer(
                    batch, second, truncation=True, max_length=self.max_length, padding=True, return_tensors="np"
                )
                out.append(self.onnx(enc).astype(np.float32))
                continue
            enc = self.tokenizer(
                batch, second, truncation=True, max_length=self.max_length, padding=True, return_tensors="pt"
            ).to(self.device)
            with torch.inference_mode(), torch_autocast(self.backend):
                out.append(self.model(**enc).logits.float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.model.config.num_labels))

    def predict_proba(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray:
        from scipy.special import softmax

        texts = [str(t) for t in texts]
        logits = np.zeros((len(texts), self.model.config.num_labels))
        if pairs is None:
            logits = self._logits(texts, None) if texts else logits
        else:
            if len(pairs) != len(texts):
                raise InputError(f"model '{self.name}': {len(texts)} texts but {len(pairs)} pair texts")
            # Rows without a second text are encoded alone, the rest as pairs.
            with_pair = [i for i, p in enumerate(pairs) if p is not None]
            alone = [i for i, p in enumerate(pairs) if p is None]
            if with_pair:
                logits[with_pair] = self._logits([texts[i] for i in with_pair], [str(pairs[i]) for i in with_pair])
            if alone:
                logits[alone] = self._logits([texts[i] for i in alone], None)
        return softmax(logits, axis=1)[:, self.columns]


def onnx_forward(spec: ModelSpec, model, tokenizer):
    """The classifier's forward pass on ONNX Runtime when the encoder setting asks for it
    on this CPU (``checkray.engine.inference``), else None. The PyTorch module stays loaded:
    S²LCT's neuron coverage reads its hidden units."""
    backend = resolve_encoder()
    if is_torch(backend) or spec.trust_remote_code:  # remote code may not trace
        return None
    from checkray.actors.onnx_models import OnnxLogits

    threads = spec.options.get("threads")
    return OnnxLogits(model, tokenizer, precision_of(backend), int(threads) if threads else None)


def load_hf(spec: ModelSpec) -> HFSequenceClassifier:
    import torch
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from checkray.actors.embedder import resolve_model

    if not spec.path:
        raise InputError(f"model '{spec.name}' (family hf): no model path or hub name given")
    try:
        source = resolve_model(spec.path)
    except InputError:
        raise InputError(f"model '{spec.name}' (family hf): model directory not found: {spec.path}") from None
    if threads := spec.options.get("threads"):
        torch.set_num_threads(int(threads))
    remote = bool(spec.trust_remote_code)
    if remote:
        require_code_trust(
            f"model '{spec.name}'", "its spec sets trust_remote_code, so transformers runs the repo's code"
        )
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=remote)
    except (OSError, ValueError) as exc:
        raise InputError(f"model '{spec.name}': cannot load HF config from {spec.path}: {_first_line(exc)}") from None
    if config.num_labels != len(spec.labels):
        raise InputError(
            f"model '{spec.name}': label map has {len(spec.labels)} labels ({', '.join(spec.labels)}) "
            f"but the model's config has {config.num_labels} (id2label)"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=remote)
        model = AutoModelForSequenceClassification.from_pretrained(source, trust_remote_code=remote)
    except (OSError, ValueError) as exc:
        raise InputError(
            f"model '{spec.name}': cannot load HF classifier from {spec.path}: {_first_line(exc)}"
        ) from None
    return HFSequenceClassifier(spec, model, tokenizer)
