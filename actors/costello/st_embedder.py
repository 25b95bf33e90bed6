"""The ``sentence-transformers`` embedder kind: a local directory, a hub id or
``builtin:minilm`` / ``builtin:mpnet``. ``pooling: model`` keeps the model's own pooling;
``mean`` or ``cls`` rebuilds it as a transformers module + a ``Pooling`` layer, which is
how the pooling variants of one encoder are tested (the paper wraps encoders to give
[CLS]). Any plain transformers encoder directory (the zoo's fine-tuned ``minilm_ft``,
whose classification head is dropped) loads the same way with ``mean`` or ``cls``. Its
dictionary is its tokenizer's vocabulary."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from checkray.engine.costello.config import EmbedderSpec
from checkray.engine.errors import InputError


def load_encoder(
    spec: EmbedderSpec,
    device: str | None = None,
    threads: int | None = None,
    poolings: Sequence[str] = (),
    backend: str | None = None,
):
    """A SentenceTransformer for ``spec`` (pooling rebuilt if asked), or its ONNX Runtime
    twin on CPU (``checkray.engine.inference``; the repair loop, which trains, passes
    ``backend="torch"``). ``poolings``: several of
    ``checkray.engine.costello.embedder_kinds.POOLINGS`` at once, in that order: the
    vectors of each side by side, from one forward pass."""
    from checkray.actors.embedder import autocast_encode, load_sentence_transformer
    from checkray.engine.inference import is_torch, precision_of, resolve_encoder

    backend = backend or resolve_encoder()
    if spec.pooling == "model":
        model = load_sentence_transformer(spec.model, device=device, threads=threads, backend=backend)
        model.max_seq_length = min(model.max_seq_length or spec.max_length, spec.max_length)
        return model
    modes = tuple(poolings) or (spec.pooling,)
    if is_torch(backend):
        return autocast_encode(_pooled_torch(spec, device, threads, modes), backend)
    if (device or "cpu") == "cpu":
        from checkray.actors.assets import pin_model
        from checkray.actors.onnx_models import onnx_sentence_encoder

        identity = {"model": pin_model(spec.model), "poolings": list(modes), "max_length": spec.max_length}
        return onnx_sentence_encoder(
            identity, lambda: _pooled_torch(spec, "cpu", threads, modes), precision_of(backend), threads
        )
    return _pooled_torch(spec, device, threads, modes)


def _pooled_torch(spec: EmbedderSpec, device: str | None, threads: int | None, modes: Sequence[str]):
    """``spec``'s transformer with a ``Pooling`` of ``modes``, on PyTorch."""
    import torch
    from sentence_transformers import SentenceTransformer

    from checkray.actors.embedder import resolve_model, torch_device

    if threads:
        torch.set_num_threads(threads)
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers < 5.4
        from sentence_transformers.models import Pooling, Transformer
    path = resolve_model(spec.model)
    try:
        encoder = Transformer(path, max_seq_length=spec.max_length)
    except (OSError, ValueError) as exc:
        raise InputError(f"embedder '{spec.name}': cannot load {spec.model}: {str(exc).splitlines()[0]}") from None
    dim = (
        encoder.get_embedding_dimension()
        if hasattr(encoder, "get_embedding_dimension")
        else encoder.get_word_embedding_dimension()
    )
    if len(modes) == 1:
        pooling = Pooling(dim, pooling_mode=modes[0])
    elif "pooling_mode_cls_token" in inspect.signature(Pooling).parameters:
        # sentence-transformers < 5.4: one flag per mode, concatenated cls before mean
        pooling = Pooling(dim, pooling_mode_cls_token="cls" in modes, pooling_mode_mean_tokens="mean" in modes)
    else:
        pooling = Pooling(dim, pooling_mode=modes)  # concatenated in the order given
    return SentenceTransformer(modules=[encoder, pooling], device=device or torch_device())


def tokenizer_vocabulary(spec: EmbedderSpec, tokens: str) -> list[str]:
    """The model's tokenizer vocabulary: every entry but the special tokens (``all``, as
    the authors' code embeds it) or its whole alphabetic words (``words``)."""
    from transformers import AutoTokenizer

    from checkray.actors.embedder import resolve_model

    try:
        tok = AutoTokenizer.from_pretrained(resolve_model(spec.model))
    except (OSError, ValueError) as exc:
        raise InputError(f"embedder '{spec.name}': cannot read its tokenizer: {str(exc).splitlines()[0]}") from None
    special = set(tok.all_special_tokens)
    vocab = [w for w in tok.get_vocab() if w not in special and w.strip()]
    if tokens == "all":
        return sorted(set(vocab))
    # BPE/SentencePiece vocabularies mark a word start with a prefix (GPT-2's "\u0120",
    # SentencePiece's "\u2581"); WordPiece marks continuations with "##".
    stripped = (w.lstrip("\u0120\u2581") for w in vocab if not w.startswith("##"))
    return sorted({w.lower() for w in stripped if len(w) > 1 and w.isascii() and w.isalpha()})


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded in the process that embeds."""

    def __init__(self, spec: EmbedderSpec, *, threads: int | None = None, poolings: Sequence[str] = ()):
        self.spec = spec
        self.model = load_encoder(spec, threads=threads, poolings=poolings)

    @classmethod
    def check(cls, spec: EmbedderSpec) -> None:
        from checkray.actors.embedder import resolve_model

        try:
            resolve_model(spec.model)
        except InputError as exc:
            raise InputError(f"embedder '{spec.name}': {exc}") from None

    @classmethod
    def identity(cls, spec: EmbedderSpec) -> dict[str, Any]:
        from checkray.actors.embed_cache import embedding_identity

        return embedding_identity(
            spec.model, encoder="costello/sentence-transformers", pooling=spec.pooling, max_length=spec.max_length
        )

    @classmethod
    def vocabulary(cls, spec: EmbedderSpec, tokens: str) -> list[str]:
        return tokenizer_vocabulary(spec, tokens)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.encode(
            list(texts),
            batch_size=self.spec.encode_batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        ).astype(np.float32)
