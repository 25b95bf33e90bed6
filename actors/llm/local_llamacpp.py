"""llama.cpp backend over llama-cpp-python (``llm.local_engine: llama-cpp-python``): opt-in.

The default llama.cpp engine is ``actors/llm/local_xllamacpp.py`` (a prebuilt wheel);
this binding ships only as an sdist and is built by ``make setup-llamacpp``.

It memory-maps the quantized GGUF: loads in about a second, no conversion step, a quarter
of transformers' memory (decode speed vs transformers depends on machine load: docs/llm.md). Chat uses
the chat template stored in the GGUF (``tokenizer.chat_template``), which
llama-cpp-python picks up when no ``chat_format`` is forced.

llama-cpp-python must be built with explicit CPU flags (see docs/llm.md): the native
build segfaults during decode on the CI machine's CPU.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from checkray.actors.llm.packaged import resolve_llm
from checkray.engine.errors import InputError
from checkray.engine.llm import (
    Generation,
    GenerationParams,
    LLMConfig,
    LLMError,
    Message,
    failed_generation,
    make_generation,
)


def _sampling(params: GenerationParams, grammar: Any = None) -> dict[str, Any]:
    return dict(
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        stop=list(params.stop) or None,
        seed=params.seed,
        repeat_penalty=params.repetition_penalty,
        grammar=grammar,
    )


def _from_response(resp: dict[str, Any], chat: bool) -> Generation:
    usage = resp.get("usage") or {}
    choice = (resp.get("choices") or [{}])[0]
    text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    return make_generation(
        text, choice.get("finish_reason"), int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    )


class LlamaCppGenerator:
    """``Generator`` over ``llama_cpp.Llama``. One prompt at a time (llama.cpp's Python
    API serves one sequence per call); each is sampled with ``params.seed``."""

    def __init__(self, model: str, n_ctx: int = 2048, threads: int | None = None):
        try:
            from llama_cpp import Llama
        except ImportError:
            raise LLMError(
                "llm.local_engine 'llama-cpp-python' needs llama-cpp-python (opt-in: `make setup-llamacpp` builds it;"
                " docs/llm.md), or use local_engine 'llamacpp' (xllamacpp, installed by `make setup`)"
            ) from None
        path = resolve_llm(model)
        if not path.endswith(".gguf") or not os.path.isfile(path):
            raise InputError(f"{model}: the llama.cpp backend needs a .gguf file, got {path}")
        try:
            self.llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads or os.cpu_count() or 1, verbose=False)
        except ValueError as exc:  # llama-cpp-python's "Failed to load model from file"
            raise LLMError(f"{model}: llama.cpp cannot load {path}: {exc}") from None
        self.name = f"llama-cpp-python:{model}"
        self._grammars: dict[str, Any] = {}
        self.n_ctx = n_ctx

    def __repr__(self) -> str:
        return f"LlamaCppGenerator({self.name!r})"

    def _grammar(self, text: str | None):
        """The ``LlamaGrammar`` for a GBNF text, checked first: llama-cpp-python parses a
        grammar only when sampling starts and then dereferences a NULL sampler for an
        invalid one (a segfault), so the grammar is test-compiled here."""
        if not text:
            return None
        if text in self._grammars:
            return self._grammars[text]
        import llama_cpp

        sampler = llama_cpp.llama_sampler_init_grammar(self.llm._model.vocab, text.encode(), b"root")
        if not sampler:
            raise InputError(f"invalid GBNF grammar (llama.cpp cannot parse it): {text[:80]!r}")
        llama_cpp.llama_sampler_free(sampler)
        self._grammars[text] = llama_cpp.LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[text]

    def _fresh(self) -> None:
        # Forget the previous prompt: llama-cpp-python otherwise reuses the KV cache of a
        # shared prefix and re-evaluates only the rest, which changes the logits slightly
        # (batched vs single-token kernels) and so the sampled text. Each prompt's output
        # must depend on (prompt, seed) alone, not on what ran before it.
        self.llm.reset()

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[Generation]:
        grammar = self._grammar(params.grammar)
        out = []
        for prompt in prompts:
            self._fresh()
            try:
                out.append(
                    _from_response(self.llm.create_completion(str(prompt), **_sampling(params, grammar)), chat=False)
                )
            except (ValueError, RuntimeError) as exc:  # e.g. "Requested tokens exceed context window"
                out.append(failed_generation(exc))
        return out

    def chat(self, messages_list: Sequence[Sequence[Message]], params: GenerationParams) -> list[Generation]:
        grammar = self._grammar(params.grammar)
        out = []
        for messages in messages_list:
            self._fresh()
            try:
                resp = self.llm.create_chat_completion([dict(m) for m in messages], **_sampling(params, grammar))
                out.append(_from_response(resp, chat=True))
            except (ValueError, RuntimeError, KeyError, TypeError) as exc:  # bad roles, too long, ...
                out.append(failed_generation(exc))
        return out


def build_llamacpp(cfg: LLMConfig, threads: int | None = None) -> LlamaCppGenerator:
    """The ``llama-cpp-python`` local engine (``engine.llm.LOCAL_ENGINES``)."""
    return LlamaCppGenerator(cfg.model, n_ctx=cfg.n_ctx, threads=threads)
