"""Transformer encoders on ONNX Runtime: drop-in for the PyTorch objects checkray uses.

``OnnxSentenceEncoder`` answers ``encode(...)`` as ``SentenceTransformer.encode`` does (the
callers pass it the same arguments): the exported transformer returns token states and
the pooling (mean, CLS, max, or several concatenated) and normalisation of the
sentence-transformers pipeline run in NumPy, which costs nothing beside the forward pass.
``OnnxLogits`` is a sequence classifier's forward pass. Which path runs is decided by
``checkray.engine.inference.resolve_encoder``; the graphs come from
``checkray.actors.onnx_export``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from checkray.actors.onnx_export import exported, session

POOLINGS = ("mean", "cls", "max")


class UnsupportedPipeline(Exception):
    """The sentence-transformers pipeline has a module the ONNX path does not rebuild."""


def describe_pipeline(model) -> dict[str, Any]:
    """What runs after the transformer in a ``SentenceTransformer``: pooling modes,
    normalisation, max length. Raises ``UnsupportedPipeline`` for anything else (a Dense
    layer, weighted-mean or last-token pooling): that model stays on PyTorch."""
    modules = list(model)
    kinds = [type(m).__name__ for m in modules]
    if kinds[:1] != ["Transformer"] or len(kinds) < 2 or kinds[1] != "Pooling":
        raise UnsupportedPipeline(" > ".join(kinds))
    if any(k != "Normalize" for k in kinds[2:]):
        raise UnsupportedPipeline(" > ".join(kinds))
    config = modules[1].get_config_dict()
    modes = config.get("pooling_mode")
    if modes is None:  # sentence-transformers < 5.4: one flag per mode
        flags = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens"}
        modes = [m for m, flag in flags.items() if config.get(flag)]
    modes = [modes] if isinstance(modes, str) else list(modes)
    if not modes or any(m not in POOLINGS for m in modes):
        raise UnsupportedPipeline(f"pooling {modes}")
    dim_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return {
        "poolings": modes,
        "normalize": len(kinds) > 2,
        "max_seq_length": int(model.max_seq_length or 512),
        "dimension": int(dim_of()),
    }


def pool(states: np.ndarray, mask: np.ndarray, modes: Sequence[str]) -> np.ndarray:
    """Sentence vectors from token states (batch, tokens, dim) as sentence-transformers'
    ``Pooling`` computes them, several modes concatenated in the order given."""
    weights = mask[..., None].astype(np.float32)
    out = []
    for mode in modes:
        if mode == "cls":
            out.append(states[:, 0])
        elif mode == "mean":
            out.append((states * weights).sum(1) / np.clip(weights.sum(1), 1e-9, None))
        else:  # max over real tokens
            out.append(np.where(weights > 0, states, np.float32(-1e9)).max(1))
    return np.concatenate(out, axis=1) if len(out) > 1 else out[0]


class OnnxSentenceEncoder:
    """A sentence-transformers pipeline whose transformer runs in ONNX Runtime."""

    def __init__(self, path, graph: dict[str, Any], threads: int | None = None):
        from transformers import AutoTokenizer

        self.session = session(path, threads)
        self.tokenizer = AutoTokenizer.from_pretrained(graph["tokenizer"])
        self.inputs = list(graph["inputs"])
        self.poolings = list(graph["poolings"])
        self.normalize_module = bool(graph["normalize"])
        self.max_seq_length = int(graph["max_seq_length"])
        self.dimension = int(graph["dimension"])
        self.backend = "onnx"

    def get_embedding_dimension(self) -> int:
        return self.dimension

    get_sentence_embedding_dimension = get_embedding_dimension

    def forward(self, encoded: dict[str, list[list[int]]], rows: Sequence[int]) -> np.ndarray:
        """Sentence vectors of the tokenised ``rows``, padded to the longest of them."""
        width = max(len(encoded["input_ids"][i]) for i in rows)
        pad = {"input_ids": self.tokenizer.pad_token_id or 0, "attention_mask": 0, "token_type_ids": 0}
        feed = {}
        for name in {*self.inputs, "attention_mask"}:
            array = np.full((len(rows), width), pad[name], dtype=np.int64)
            for k, i in enumerate(rows):
                ids = encoded[name][i]
                array[k, : len(ids)] = ids
            feed[name] = array
        states = self.session.run(None, {name: feed[name] for name in self.inputs})[0]
        return pool(states, feed["attention_mask"], self.poolings).astype(np.float32)

    def encode(
        self,
        sentences: Sequence[str] | str,
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        show_progress_bar: bool = False,
        **_: Any,
    ) -> np.ndarray:
        """Vectors in input order. Everything is tokenised once and batches are formed by
        token count, longest first: sentence-transformers sorts by characters, which pads
        ~25 % more tokens on short review sentences, and every pad is paid in full."""
        single = isinstance(sentences, str)
        texts = [sentences] if single else [str(s) for s in sentences]
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        wanted = {*self.inputs, "attention_mask"}
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_seq_length)
        encoded = {name: encoded[name] for name in wanted}
        order = np.argsort([-len(ids) for ids in encoded["input_ids"]], kind="stable")
        out = np.zeros((len(texts), self.dimension), np.float32)
        step = max(int(batch_size), 1)
        for start in range(0, len(texts), step):
            rows = order[start : start + step]
            out[rows] = self.forward(encoded, rows)
        if self.normalize_module or normalize_embeddings:
            out /= np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)
        return out[0] if single else out


def onnx_sentence_encoder(
    identity: dict[str, Any], build: Callable[[], Any], precision: str = "fp32", threads: int | None = None
) -> OnnxSentenceEncoder:
    """The ONNX twin of the ``SentenceTransformer`` that ``build()`` loads (called only when
    the graph is not cached yet). Raises ``UnsupportedPipeline`` when it cannot be rebuilt."""

    def load():
        model = build()
        return model[0].auto_model.eval(), model.tokenizer, describe_pipeline(model)

    path, graph = exported(
        {**identity, "pipeline": "sentence-transformers"}, precision, load, output="last_hidden_state"
    )
    return OnnxSentenceEncoder(path, graph, threads)


def module_digest(model) -> str:
    """sha256 of a transformers module's config and weights: what its traced graph computes.

    A classifier's graph is keyed by this, not by the path it came from: a model handed over
    in memory may name a path that is not a file here (the zoo's fine-tune names its place
    in the zoo directory, relative to it), and two different models would then share one
    cached graph."""
    import hashlib

    import torch

    config = model.config.to_dict() if hasattr(model, "config") else {}
    config.pop("_name_or_path", None)
    h = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:32]


class OnnxLogits:
    """A sequence classifier's forward pass in ONNX Runtime: tokenizer output in, logits out.
    The export is cached by ``module_digest`` of ``model``."""

    def __init__(self, model, tokenizer, precision: str = "fp32", threads: int | None = None):
        path, graph = exported(
            {"model": {"weights": module_digest(model)}, "pipeline": "sequence-classification"},
            precision,
            lambda: (model, tokenizer, {}),
            output="logits",
        )
        self.session = session(path, threads)
        self.inputs = list(graph["inputs"])

    def __call__(self, encoded: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run(None, {n: np.asarray(encoded[n], dtype=np.int64) for n in self.inputs})[0]
