"""The OpenAI-compatible client against servers that misbehave: malformed ``usage``,
unusable ``Retry-After``, bodies that are not answers, failures in a row (circuit
breaker), an overall deadline, a server that never answers; and the Ray actor pool's
load and batch timeouts. Every case is a per-prompt error or one ``LLMError`` line."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import httpx
import pytest

from checkray.actors.llm import http_openai
from checkray.actors.llm.http_openai import MAX_WAIT_S, CircuitBreaker, HTTPGenerator, retry_after_seconds
from checkray.engine.errors import ConfigError
from checkray.engine.llm import GenerationParams, LLMConfig, LLMError
from checkray.jobs.config import load_config
from tests.fakes.llm_server import BAD_RETRY_AFTER, BAD_USAGE, FaultyLLMServer

GREEDY = GenerationParams(max_tokens=4)
HI = [{"role": "user", "content": "hi"}]
GOOD = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}


def _gen(handler, **kw) -> HTTPGenerator:
    opts = dict(requests_per_second=1000, concurrency=1, max_retries=2, backoff_s=0.0)
    return HTTPGenerator("http://llm.test/v1", "m", None, transport=httpx.MockTransport(handler), **{**opts, **kw})


@pytest.mark.parametrize(
    "value, expected",
    [(None, None), ("", None), ("  ", None), ("-5", None), ("NaN", None), ("inf", None), ("1e400", None)]
    + [("soon", None), ("2", 2.0), ("0", 0.0), ("999", MAX_WAIT_S)]
    + [("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("Wed, 21 Oct 2099 07:28:10 GMT", MAX_WAIT_S)],
)
def test_retry_after_values(value, expected):
    assert retry_after_seconds(value) == expected


def test_retry_after_http_date_counts_from_now():
    now = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("Tue, 01 Jan 2030 12:00:07 GMT", now=lambda: now) == 7.0


@pytest.mark.parametrize("retry_after", BAD_RETRY_AFTER)
def test_unusable_retry_after_falls_back_to_backoff(retry_after, monkeypatch):
    waits = []
    monkeypatch.setattr(http_openai.time, "sleep", waits.append)
    replies = iter([httpx.Response(503, headers={"Retry-After": retry_after}), httpx.Response(200, json=GOOD)])
    out = _gen(lambda r: next(replies), backoff_s=0.25).chat([HI], GREEDY)[0]
    assert out.text == "ok"
    # a past date means "now"; everything else unusable is ignored for the exponential wait
    assert waits == ([0.0] if "GMT" in retry_after else [0.25])


@pytest.mark.parametrize("usage", BAD_USAGE + [None, True, {"prompt_tokens": True, "completion_tokens": 2.5}])
def test_malformed_usage_keeps_the_answer(usage):
    body = {**GOOD, "usage": usage}
    out = _gen(lambda r: httpx.Response(200, json=body)).chat([HI], GREEDY)[0]
    assert (out.text, out.finish_reason, out.prompt_tokens, out.completion_tokens) == ("ok", "stop", 0, 0)


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"<html>502 Bad Gateway</html>", "not JSON"),
        (b"\xff\xfe\x00garbage", "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),  # nested past the JSON parser's depth
        (b"[1, 2]", "not an object"),
        (b'"text"', "not an object"),
        (b"{}", "'choices'"),
        (b'{"choices": []}', "'choices'"),
        (b'{"choices": "ok"}', "'choices'"),
        (b'{"choices": [1]}', "choices[0] is not an object"),
        (b'{"choices": [{"message": "ok"}]}', "message is not an object"),
        (b'{"choices": [{"message": {"content": 5}}]}', "text is a JSON int"),
    ],
)
def test_malformed_bodies_are_per_prompt_errors(content, needle):
    def handler(request):
        prompt = json.loads(request.content)["messages"][0]["content"]
        return httpx.Response(200, content=content) if prompt == "bad" else httpx.Response(200, json=GOOD)

    bad, good = _gen(handler).chat([[{"role": "user", "content": "bad"}], HI], GREEDY)
    assert bad.finish_reason == "error" and needle in bad.error and "\n" not in bad.error
    assert good.text == "ok"  # the batch survives


def test_breaker_stops_after_failures_in_a_row():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(500, text="internal\nerror")

    gen = _gen(handler, max_retries=1, max_consecutive_failures=3)
    with pytest.raises(LLMError) as err:
        gen.chat([HI] * 10, GREEDY)
    message = str(err.value)
    assert "http://llm.test/v1" in message and "3 requests in a row failed" in message
    assert "last error: HTTP 500: internal error" in message and "\n" not in message
    assert len(calls) == 3
    with pytest.raises(LLMError, match="3 requests in a row"):  # open: nothing more is sent
        gen.chat([HI], GREEDY)
    assert len(calls) == 3


def test_breaker_resets_on_success():
    replies = iter([httpx.Response(500), httpx.Response(500), httpx.Response(200, json=GOOD)] * 5)
    outs = _gen(lambda r: next(replies), max_retries=0, max_consecutive_failures=3).chat([HI] * 15, GREEDY)
    assert [o.finish_reason for o in outs] == ["error", "error", "stop"] * 5


def test_deadline_stops_the_run():
    def slow(request):
        time.sleep(0.15)
        return httpx.Response(200, json=GOOD)

    gen = _gen(slow, deadline_s=0.4)
    with pytest.raises(LLMError, match=r"http://llm.test/v1: stopped, llm.deadline_s=0.4 s passed \(\d requests"):
        gen.chat([HI] * 20, GREEDY)


def test_breaker_deadline_on_a_fake_clock():
    now = [0.0]
    breaker = CircuitBreaker("http://x", max_failures=5, deadline_s=10.0, clock=lambda: now[0])
    breaker.check()  # starts the clock
    now[0] = 9.0
    breaker.check()
    breaker.failure("HTTP 503: busy")
    now[0] = 10.0
    with pytest.raises(LLMError, match=r"deadline_s=10 s passed \(1 requests, 1 failed\); last error: HTTP 503"):
        breaker.check()


@pytest.mark.timeout(60)
def test_server_that_never_answers_is_bounded():
    with FaultyLLMServer("hang") as server:
        gen = HTTPGenerator(
            server.url,
            "m",
            None,
            concurrency=2,
            max_retries=4,
            backoff_s=0.0,
            timeout_s=0.5,
            max_consecutive_failures=4,
        )
        with pytest.raises(LLMError) as err:
            gen.chat([HI] * 6, GREEDY)
    assert server.url in str(err.value) and "ReadTimeout" in str(err.value) and "\n" not in str(err.value)
    # 4 failed requests trip the breaker; the other thread's request in flight ends at its timeout
    assert server.count() <= 4 + 2


@pytest.mark.parametrize(
    "line, field",
    [
        ("timeout_s: .inf", "llm.timeout_s"),
        ("deadline_s: .nan", "llm.deadline_s"),
        ("batch_timeout_s: .inf", "llm.batch_timeout_s"),
        ("backoff_s: -.inf", "llm.backoff_s"),
        ("base_url: ftp://x", "llm.base_url"),
    ],
)
def test_config_refuses_infinite_waits(tmp_path, line, field):
    path = tmp_path / "c.yaml"
    path.write_text(f"llm:\n  {line}\n")
    with pytest.raises(ConfigError, match=field):
        load_config(path)


# --- the Ray actor pool: bounded waits --------------------------------------------------


@pytest.mark.timeout(120)
def test_batch_timeout_stops_the_actors(ray_session):
    from checkray.actors.llm.actor import start_generator
    from checkray.actors.pool import MAX_TASK_RETRIES

    with FaultyLLMServer("hang") as server:
        cfg = LLMConfig(backend="http", base_url=server.url, api_key_env=None, timeout_s=60, batch_timeout_s=1.5)
        gen = start_generator(cfg)
        actors = list(gen.actors)
        assert all(a._ray_max_task_retries == MAX_TASK_RETRIES for a in actors)  # bounded, not Ray Data's -1
        with pytest.raises(LLMError) as err:
            gen.chat([HI] * 3, GREEDY)
    message = str(err.value)
    assert "LLM backend http" in message and "llm.batch_timeout_s=1.5 s" in message and "stopped" in message
    assert gen.actors == []
    with pytest.raises(ray_session.exceptions.RayActorError):  # killed, not left waiting on the socket
        ray_session.get(actors[0].ready.remote(), timeout=30)


@pytest.mark.timeout(120)
def test_load_timeout_names_what_it_waited_for(ray_session, monkeypatch):
    from checkray.actors.llm import actor as actor_mod
    from checkray.engine.runtime import ActorPlan

    # An actor asking for a GPU on this CPU-only Ray never starts: Ray waits for resources.
    monkeypatch.setattr(
        actor_mod, "plan_generators", lambda *a: ActorPlan("gpu", 1, num_cpus=0.1, num_gpus=1.0, threads=1)
    )
    with pytest.raises(LLMError, match=r"not ready within llm.load_timeout_s=1 s .*'num_gpus': 1.0"):
        actor_mod.start_generator(LLMConfig(backend="http", load_timeout_s=1), resources={"CPU": 2})
