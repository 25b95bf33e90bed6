"""llama.cpp backend over xllamacpp: the default local engine, a prebuilt wheel (no compile step).

xllamacpp (MIT, Xorbits) packages llama.cpp's own C++ server as a Cython extension; its
Linux CPU wheel is built without ``-march=native`` (no AVX-512), so it does not hit the
decode segfault that a native llama-cpp-python build showed on the CI CPU (docs/llm.md).
The GGUF is memory-mapped; chat uses the template stored in the GGUF.

Requests go to the in-process server as OpenAI-style dicts, one prompt at a time on one
slot, with ``cache_prompt: false``: each output depends on (prompt, seed) alone, not on
the prompt before it (a reused KV prefix changes the logits slightly). GBNF grammars and
the repetition penalty are llama.cpp's own. The server also listens on a loopback port;
the generator sets a random API key so nothing else on the machine can use it.

``python -m checkray.actors.llm.local_xllamacpp --model GGUF --port N --api-key KEY`` serves a model
over HTTP (OpenAI-compatible ``/v1/completions`` and ``/v1/chat/completions``) until stopped:
what the HTTP backend's tests run against.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import threading
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


def start_server(
    model: str,
    n_ctx: int = 2048,
    threads: int | None = None,
    api_key: str | None = None,
    port: int = 0,
    host: str = "127.0.0.1",
    verbose: bool = False,
    pooling: str | None = None,
) -> Any:
    """An ``xllamacpp.Server`` holding ``model`` (builtin alias or .gguf), one slot, no prompt cache;
    with ``pooling`` (mean, last, cls) it serves embeddings (``handle_embeddings``) instead."""
    try:
        import xllamacpp
    except ImportError:
        raise LLMError(
            "the llama.cpp engine needs xllamacpp (a prebuilt wheel in the lock: `make setup`; docs/llm.md)"
        ) from None
    path = resolve_llm(model)
    if not path.endswith(".gguf") or not os.path.isfile(path):
        raise InputError(f"{model}: the llama.cpp backend needs a .gguf file, got {path}")
    params = xllamacpp.CommonParams()
    params.model.path = path
    params.n_ctx = n_ctx
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads or os.cpu_count() or 1
    params.n_parallel = 1  # one sequence at a time: batched decoding would change the logits per batch
    params.cache_prompt = False
    params.warmup = False
    params.verbosity = 3 if verbose else -1
    params.hostnames = [host]
    params.port = port
    params.api_keys = [api_key or secrets.token_hex(16)]
    if pooling:
        params.embedding = True
        params.pooling_type = getattr(xllamacpp.llama_pooling_type, f"LLAMA_POOLING_TYPE_{pooling.upper()}")
    try:
        return xllamacpp.Server(params)
    except RuntimeError as exc:  # "Failed to init server, please check the input params."
        raise LLMError(f"{model}: llama.cpp (xllamacpp) cannot load {path}: {exc}") from None


def llm_embeddings(model: str, texts: Sequence[str], pooling: str = "mean", threads: int | None = None):
    """Hidden-state embeddings of ``texts`` from a GGUF LLM (llama.cpp's embedding mode;
    ``pooling``: mean or last token), as a float32 array: features for a probe."""
    import numpy as np

    server = start_server(model, n_ctx=512, threads=threads, pooling=pooling)
    out: list[list[float]] = []
    for i in range(0, len(texts), 16):
        answer = server.handle_embeddings({"input": list(texts[i : i + 16]), "model": model})
        if "data" not in answer:
            raise LLMError(f"{model}: llama.cpp returned no embeddings: {str(answer)[:200]}")
        out += [d["embedding"] for d in answer["data"]]
    return np.asarray(out, dtype=np.float32)


def _request(params: GenerationParams) -> dict[str, Any]:
    body: dict[str, Any] = dict(
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        seed=params.seed,
        repeat_penalty=params.repetition_penalty,
        cache_prompt=False,
    )
    if params.stop:
        body["stop"] = list(params.stop)
    if params.grammar:
        body["grammar"] = params.grammar
    return body


def _from_response(resp: Any, chat: bool, grammar: str | None) -> Generation:
    if not isinstance(resp, dict):
        return failed_generation(f"llama.cpp returned {type(resp).__name__}, not a response object")
    if "error" in resp:
        err = resp["error"] if isinstance(resp["error"], dict) else {"message": str(resp["error"])}
        message = str(err.get("message", err))
        if grammar and "grammar" in message:
            raise InputError(f"invalid GBNF grammar (llama.cpp cannot parse it): {grammar[:80]!r}")
        return failed_generation(message, int(err.get("n_prompt_tokens", 0) or 0))
    usage = resp.get("usage") or {}
    choice = (resp.get("choices") or [{}])[0]
    text = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    return make_generation(
        text, choice.get("finish_reason"), int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    )


class XLlamaCppGenerator:
    """``Generator`` over llama.cpp's server in this process (xllamacpp)."""

    def __init__(self, model: str, n_ctx: int = 2048, threads: int | None = None):
        self.server = start_server(model, n_ctx=n_ctx, threads=threads)
        self.name = f"llamacpp:{model}"
        self.n_ctx = n_ctx

    def __repr__(self) -> str:
        return f"XLlamaCppGenerator({self.name!r})"

    def _call(self, method: str, body: dict[str, Any], chat: bool, grammar: str | None) -> Generation:
        try:
            resp = getattr(self.server, method)(body)
        except (ValueError, RuntimeError, TypeError) as exc:  # a malformed request fails alone
            return failed_generation(exc)
        return _from_response(resp, chat, grammar)

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[Generation]:
        base = _request(params)
        return [self._call("handle_completions", {**base, "prompt": str(p)}, False, params.grammar) for p in prompts]

    def chat(self, messages_list: Sequence[Sequence[Message]], params: GenerationParams) -> list[Generation]:
        base = _request(params)
        return [
            self._call("handle_chat_completions", {**base, "messages": [dict(m) for m in msgs]}, True, params.grammar)
            for msgs in messages_list
        ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a GGUF over OpenAI-compatible HTTP with llama.cpp (xllamacpp)")
    parser.add_argument("--model", required=True, help="builtin:<alias> or a .gguf file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", default=None, help="required bearer key (default: a random one, printed)")
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    key = args.api_key or secrets.token_hex(16)
    server = start_server(args.model, args.n_ctx, args.threads, key, args.port, args.host)
    print(f"serving {args.model} on {server.listening_address}/v1", flush=True)
    if not args.api_key:
        print(f"API key: {key}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()


def build_xllamacpp(cfg: LLMConfig, threads: int | None = None) -> XLlamaCppGenerator:
    """The ``llamacpp`` local engine (``engine.llm.LOCAL_ENGINES``): llama.cpp as a prebuilt wheel."""
    return XLlamaCppGenerator(cfg.model, n_ctx=cfg.n_ctx, threads=threads)
