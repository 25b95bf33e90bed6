"""OpenAI-compatible HTTP backend (``/v1/completions``, ``/v1/chat/completions``) on httpx.

Works with any server speaking that API: llama-cpp-python's ``llama_cpp.server``, vLLM's
OpenAI server, hosted APIs. The API key is read from the environment variable NAMED in
the config (``llm.api_key_env``) and is never logged: it is kept out of ``repr`` and
scrubbed from every error message.

Failure policy:
- 429, 5xx, connection errors and timeouts are retried with exponential back-off
  (``backoff_s * 2**attempt``, or the server's ``Retry-After`` when it sends one);
- 401/403 (key rejected) and an endpoint still unreachable after the retries raise
  ``LLMError``: every other request would fail the same way;
- anything else that goes wrong with one request (a 400 for a too-long prompt, 5xx after
  the retries, a malformed body) becomes that input's ``finish_reason="error"``.
Requests start at most ``requests_per_second`` per generator, ``concurrency`` at a time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from engine.llm import Generation, GenerationParams, LLMConfig, LLMError, Message, failed_generation, make_generation

log = logging.getLogger(__name__)
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 30.0


class RateLimiter:
    """Spaces request starts at least ``1 / per_second`` apart (thread-safe)."""

    def __init__(
        self,
        per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.interval = 1.0 / per_second
        self.clock, self.sleep = clock, sleep
        self._next = 0.0
        self._lock = threading.Lock()

    def acquire(self) -> None:
        with self._lock:  # reserve a slot, then wait for it outside the lock
            now = self.clock()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            self.sleep(slot - now)


class _Unreachable(Exception):
    pass


class HTTPGenerator:
    """``Generator`` over an OpenAI-compatible server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        requests_per_second: float = 4.0,
        concurrency: int = 4,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        grammar_style: str = "none",
    ):
        self.grammar_style = grammar_style
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) if api_key_env else None
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
        )
        self.limiter = RateLimiter(requests_per_second)
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.name = f"http:{model}@{self.base_url}"

    @classmethod
    def from_config(cls, cfg: LLMConfig, transport: httpx.BaseTransport | None = None) -> HTTPGenerator:
        return cls(
            cfg.base_url,
            cfg.model,
            cfg.api_key_env,
            cfg.requests_per_second,
            cfg.concurrency,
            cfg.max_retries,
            cfg.backoff_s,
            cfg.timeout_s,
            transport=transport,
            grammar_style=cfg.grammar_style,
        )

    def __repr__(self) -> str:  # never the key, only where it comes from
        return f"HTTPGenerator(base_url={self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def close(self) -> None:
        self._client.close()

    def _redact(self, text: str) -> str:
        text = " ".join(str(text).split())
        return text.replace(self._api_key, "***") if self._api_key else text

    def _wait(self, attempt: int, response: httpx.Response | None) -> None:
        delay = self.backoff_s * (2**attempt)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after:
            try:
                delay = min(float(retry_after), MAX_RETRY_AFTER_S)
            except ValueError:
                pass  # an HTTP date: keep the exponential delay
        time.sleep(delay)

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """One request with retries; raises ``LLMError`` (fatal) or ``RuntimeError`` (this input)."""
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            self.limiter.acquire()
            try:
                resp = self._client.post(path, json=payload)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if last:
                    raise LLMError(
                        f"cannot reach the LLM endpoint {self.base_url} "
                        f"after {attempt + 1} attempts: {self._redact(exc)}"
                    ) from None
                self._wait(attempt, None)
                continue
            except httpx.TransportError as exc:  # read timeout, reset connection, protocol error
                if last:
                    raise RuntimeError(f"{type(exc).__name__}: {self._redact(exc)}") from None
                self._wait(attempt, None)
                continue
            if resp.status_code in (401, 403):
                where = (
                    f"set the environment variable {self.api_key_env}" if self.api_key_env else "set llm.api_key_env"
                )
                state = "rejected" if self._api_key else "missing"
                raise LLMError(f"LLM endpoint {self.base_url}: API key {state} (HTTP {resp.status_code}); {where}")
            if resp.status_code in RETRY_STATUS and not last:
                log.info("LLM endpoint answered HTTP %s; retry %d", resp.status_code, attempt + 1)
                self._wait(attempt, resp)
                continue
            if resp.status_code >= 400:
                raise RuntimeError(f"HTTP {resp.status_code}: {self._redact(resp.text[:200])}")
            try:
                body = resp.json()
            except ValueError:
                raise RuntimeError(f"malformed response body: {self._redact(resp.text[:200])}") from None
            if not isinstance(body, dict):
                raise RuntimeError("malformed response body: not a JSON object")
            return body
        raise AssertionError("unreachable")  # the loop returns or raises on its last attempt

    def _one(self, path: str, payload: dict[str, Any], chat: bool) -> Generation:
        try:
            body = self._post(path, payload)
            choice = body["choices"][0]
            text = choice["message"].get("content") if chat else choice["text"]
            if text is not None and not isinstance(text, str):
                raise TypeError(f"text is {type(text).__name__}")
        except LLMError:
            raise
        except (RuntimeError, KeyError, IndexError, TypeError, AttributeError) as exc:
            return failed_generation(exc if isinstance(exc, RuntimeError) else f"malformed response: {exc!r}")
        usage = body.get("usage") or {}
        return make_generation(
            text,
            choice.get("finish_reason"),
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )

    def _sampling(self, params: GenerationParams) -> dict[str, Any]:
        out: dict[str, Any] = dict(
            model=self.model,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
        )
        if params.stop:
            out["stop"] = list(params.stop)
        # Non-standard fields, in the dialect of the server (hosted APIs reject them).
        if self.grammar_style == "llamacpp":
            if params.grammar:
                out["grammar"] = params.grammar
            if params.repetition_penalty != 1.0:
                out["repeat_penalty"] = params.repetition_penalty
        elif self.grammar_style == "vllm":
            if params.grammar:
                out["structured_outputs"] = {"grammar": params.grammar}
            if params.repetition_penalty != 1.0:
                out["repetition_penalty"] = params.repetition_penalty
        return out

    def _run(self, path: str, payloads: list[dict[str, Any]], chat: bool) -> list[Generation]:
        if len(payloads) <= 1 or self.concurrency == 1:
            return [self._one(path, p, chat) for p in payloads]
        with ThreadPoolExecutor(min(self.concurrency, len(payloads))) as pool:
            return list(pool.map(lambda p: self._one(path, p, chat), payloads))

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[Generation]:
        base = self._sampling(params)
        return self._run("/completions", [{**base, "prompt": str(p)} for p in prompts], chat=False)

    def chat(self, messages_list: Sequence[Sequence[Message]], params: GenerationParams) -> list[Generation]:
        base = self._sampling(params)
        return self._run(
            "/chat/completions", [{**base, "messages": [dict(m) for m in ms]} for ms in messages_list], chat=True
        )
