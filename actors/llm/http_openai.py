"""OpenAI-compatible HTTP backend (``/v1/completions``, ``/v1/chat/completions``) on httpx.

Works with any server speaking that API: llama-cpp-python's ``llama_cpp.server``, vLLM's
OpenAI server, hosted APIs. The API key is read from the environment variable NAMED in
the config (``llm.api_key_env``) and is never logged: it is kept out of ``repr`` and
scrubbed from every error message.

Failure policy (docs/llm.md):
- 429, 5xx, connection errors and timeouts are retried with exponential back-off
  (``backoff_s * 2**attempt``, or the server's ``Retry-After`` when it is a readable
  number of seconds or HTTP date; a negative, NaN, infinite or empty one is ignored);
  every wait is at most ``MAX_WAIT_S``;
- anything else that goes wrong with one request (a 400 for a too-long prompt, 5xx after
  the retries, a body that is not JSON, JSON without the expected ``choices``/``message``
  shapes) becomes that input's ``finish_reason="error"``; a malformed ``usage`` only
  loses the token counts (they are bookkeeping, the answer is intact);
- ``LLMError`` (the whole run stops, one line naming the endpoint) when every other
  request would fail the same way: 401/403 (key rejected or missing), an endpoint still
  unreachable after the retries, ``llm.max_consecutive_failures`` failed requests in a
  row (the circuit breaker: a server that accepts connections but never answers costs at
  most that many timeouts, not ``max_retries x timeout_s`` per prompt forever), or the
  overall ``llm.deadline_s`` passed.
Requests start at most ``requests_per_second`` per generator, ``concurrency`` at a time.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx

from checkray.engine.llm import (
    Generation,
    GenerationParams,
    LLMConfig,
    LLMError,
    Message,
    failed_generation,
    make_generation,
)

log = logging.getLogger(__name__)
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_WAIT_S = 30.0  # longest back-off or Retry-After wait between two attempts
MAX_TOKEN_COUNT = 10**9  # a usage count above this is not a count


def retry_after_seconds(value: str | None, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait, in ``[0, MAX_WAIT_S]``, or None when
    it is absent or unreadable (negative, NaN, infinite, empty, not a number or a date)."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = max((when - now()).total_seconds(), 0.0)  # a date in the past: now
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_WAIT_S)


def token_count(usage: Any, key: str) -> int:
    """A ``usage`` count when it is one (a non-negative integer of sane size), else 0."""
    value = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
        return 0
    return value


class MalformedResponse(Exception):
    """The server answered, but not with what the OpenAI API promises (this input fails)."""


class RequestFailed(Exception):
    """This input's request failed after its retries (the breaker has counted it)."""


def parse_answer(body: Any, chat: bool) -> tuple[str | None, str | None, int, int]:
    """(text, finish_reason, prompt_tokens, completion_tokens) of a response body;
    ``MalformedResponse`` naming what is wrong with it otherwise."""
    if not isinstance(body, dict):
        raise MalformedResponse(f"malformed response body: JSON {type(body).__name__}, not an object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse("malformed response: 'choices' is missing, empty or not a list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise MalformedResponse("malformed response: choices[0] is not an object")
    if chat:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise MalformedResponse("malformed response: choices[0].message is not an object")
        text = message.get("content")
    elif "text" in choice:
        text = choice["text"]
    else:
        raise MalformedResponse("malformed response: choices[0] has no 'text'")
    if text is not None and not isinstance(text, str):
        raise MalformedResponse(f"malformed response: the text is a JSON {type(text).__name__}")
    reason = choice.get("finish_reason")
    usage = body.get("usage")
    return (
        text,
        reason if isinstance(reason, str) else None,
        token_count(usage, "prompt_tokens"),
        token_count(usage, "completion_tokens"),
    )


class CircuitBreaker:
    """When to give up on an endpoint altogether (thread-safe): after ``max_failures``
    failed requests in a row, or once ``deadline_s`` seconds have passed since the first
    request. Both raise one ``LLMError`` naming the endpoint and the last error, and keep
    raising it: a tripped breaker sends no more requests."""

    def __init__(
        self,
        endpoint: str,
        max_failures: int,
        deadline_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.endpoint, self.max_failures, self.deadline_s, self.clock = endpoint, max_failures, deadline_s, clock
        self._lock = threading.Lock()
        self._started: float | None = None
        self._in_a_row = 0
        self._requests = self._failed = 0
        self._last = "none"
        self._tripped: LLMError | None = None

    def remaining(self) -> float | None:
        """Seconds left before the deadline (the clock starts at the first call); None: no deadline."""
        with self._lock:
            if self._started is None:
                self._started = self.clock()
            if self.deadline_s is None:
                return None
            return self.deadline_s - (self.clock() - self._started)

    def check(self) -> None:
        """Raise if the breaker is open or the deadline has passed; call before each request."""
        left = self.remaining()
        with self._lock:
            if self._tripped is None and left is not None and left <= 0:
                self._trip(
                    f"llm.deadline_s={self.deadline_s:g} s passed ({self._requests} requests, {self._failed} failed)"
                )
            if self._tripped is not None:
                raise self._tripped

    def success(self) -> None:
        with self._lock:
            self._requests += 1
            self._in_a_row = 0

    def failure(self, error: str) -> None:
        """Count a failed request; raise once ``max_failures`` failed in a row."""
        with self._lock:
            self._requests += 1
            self._failed += 1
            self._in_a_row += 1
            self._last = error
            if self._tripped is None and self._in_a_row >= self.max_failures:
                self._trip(f"{self._in_a_row} requests in a row failed (llm.max_consecutive_failures)")
            if self._tripped is not None:
                raise self._tripped

    def _trip(self, why: str) -> None:
        self._tripped = LLMError(f"LLM endpoint {self.endpoint}: stopped, {why}; last error: {self._last[:200]}")


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
        max_consecutive_failures: int = 8,
        deadline_s: float | None = None,
    ):
        self.grammar_style = grammar_style
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self._api_key = os.environ.get(api_key_env) if api_key_env else None
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self.timeout_s = timeout_s
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            transport=transport,
        )
        self.limiter = RateLimiter(requests_per_second)
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.breaker = CircuitBreaker(self.base_url, max_consecutive_failures, deadline_s)
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
            max_consecutive_failures=cfg.max_consecutive_failures,
            deadline_s=cfg.deadline_s,
        )

    def __repr__(self) -> str:  # never the key, only where it comes from
        return f"HTTPGenerator(base_url={self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def close(self) -> None:
        self._client.close()

    def _redact(self, text: object) -> str:
        text = " ".join(str(text).split())
        return text.replace(self._api_key, "***") if self._api_key else text

    def _wait(self, attempt: int, response: httpx.Response | None) -> None:
        """Back off before the next attempt: the server's Retry-After, else exponential;
        never past ``MAX_WAIT_S`` nor past the deadline."""
        delay = retry_after_seconds(response.headers.get("retry-after")) if response is not None else None
        if delay is None:
            delay = min(self.backoff_s * (2**attempt), MAX_WAIT_S)
        left = self.breaker.remaining()
        time.sleep(max(0.0, min(delay, left) if left is not None else delay))

    def _timeout(self) -> httpx.Timeout:
        """The client's timeouts, cut to what is left before the deadline."""
        left = self.breaker.remaining()
        seconds = self.timeout_s if left is None else max(0.001, min(self.timeout_s, left))
        return httpx.Timeout(seconds, connect=min(seconds, 10.0))

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        """One request with retries: the decoded JSON body. Raises ``LLMError`` (stop the run)
        or ``RequestFailed`` (this input); counts every failed request in the breaker."""
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            self.breaker.check()
            self.limiter.acquire()
            self.breaker.check()
            try:
                resp = self._client.post(path, json=payload, timeout=self._timeout())
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                self.breaker.failure(f"cannot connect: {self._redact(exc)}")
                if last:
                    raise LLMError(
                        f"cannot reach the LLM endpoint {self.base_url} "
                        f"after {attempt + 1} attempts: {self._redact(exc)}"
                    ) from None
                self._wait(attempt, None)
                continue
            except httpx.RequestError as exc:  # read timeout, reset connection, protocol or decoding error
                error = f"{type(exc).__name__}: {self._redact(exc) or 'no detail'}"
                self.breaker.failure(error)
                if last:
                    raise RequestFailed(error) from None
                self._wait(attempt, None)
                continue
            if resp.status_code in (401, 403):
                where = (
                    f"set the environment variable {self.api_key_env}" if self.api_key_env else "set llm.api_key_env"
                )
                state = "rejected" if self._api_key else "missing"
                raise LLMError(f"LLM endpoint {self.base_url}: API key {state} (HTTP {resp.status_code}); {where}")
            if resp.status_code >= 400:
                error = f"HTTP {resp.status_code}: {self._redact(resp.text[:200])}"
                self.breaker.failure(error)
                if resp.status_code in RETRY_STATUS and not last:
                    log.info("LLM endpoint answered HTTP %s; retry %d", resp.status_code, attempt + 1)
                    self._wait(attempt, resp)
                    continue
                raise RequestFailed(error)
            try:
                return resp.json()
            except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deep
                error = f"malformed response body (not JSON): {self._redact(resp.text[:200])}"
                self.breaker.failure(error)
                raise RequestFailed(error) from None
        raise AssertionError("unreachable")  # the loop returns or raises on its last attempt

    def _one(self, path: str, payload: dict[str, Any], chat: bool) -> Generation:
        try:
            body = self._post(path, payload)
        except RequestFailed as exc:
            return failed_generation(str(exc))
        try:
            text, reason, prompt_tokens, completion_tokens = parse_answer(body, chat)
        except MalformedResponse as exc:
            self.breaker.failure(str(exc))  # JSON, but not an answer: a failed request too
            return failed_generation(str(exc))
        self.breaker.success()
        return make_generation(text, reason, prompt_tokens, completion_tokens)

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
        pool = ThreadPoolExecutor(min(self.concurrency, len(payloads)))
        try:
            return list(pool.map(lambda p: self._one(path, p, chat), payloads))
        finally:
            # On an LLMError do not wait for requests still in flight (a hung server holds
            # each up to timeout_s); their threads end at their timeout and, the breaker
            # being open, send nothing more.
            pool.shutdown(wait=False, cancel_futures=True)

    def generate(self, prompts: Sequence[str], params: GenerationParams) -> list[Generation]:
        base = self._sampling(params)
        return self._run("/completions", [{**base, "prompt": str(p)} for p in prompts], chat=False)

    def chat(self, messages_list: Sequence[Sequence[Message]], params: GenerationParams) -> list[Generation]:
        base = self._sampling(params)
        return self._run(
            "/chat/completions", [{**base, "messages": [dict(m) for m in ms]} for ms in messages_list], chat=True
        )


def build_http(cfg: LLMConfig, threads: int | None = None) -> HTTPGenerator:
    """The ``http`` backend (``engine.llm.BACKENDS``): an OpenAI-compatible server."""
    return HTTPGenerator.from_config(cfg)
