"""A misbehaving OpenAI-compatible chat server on 127.0.0.1, in a thread, for fault tests.

``FaultyLLMServer(mode)`` answers ``POST /v1/chat/completions`` like the rule-based
stand-ins of ``tests/fakes/llm.py`` (mft and TestAug prompts), and misbehaves per ``mode``
(which a test may change between runs, e.g. to ``ok`` for the rerun):

* ``ok``: well-formed answers;
* ``bad_usage``: well-formed answers whose ``usage`` is garbage (a string, a list, counts
  that are strings, negative, floats or astronomically large);
* ``503``: HTTP 503 with an unusable ``Retry-After`` (negative, NaN, inf, empty, an HTTP
  date in the past, junk) for the *selected* prompts, every time they are sent;
* ``non_json``: an HTML error page with HTTP 200 for the selected prompts;
* ``hang``: reads every request and never answers (until the server stops).

A prompt (the whole conversation) is selected when its digest falls under ``share``, so
the same prompts misbehave on every request and a test can count them. ``requests``
records each request: its ``kind`` (``label`` for a TestAug validity or mft label
question, ``generate`` for anything else), whether it was ``selected``, the ``prompt``
(the conversation as JSON) and whether it was answered ``ok``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fakes.llm import RuleBasedAugChat, RuleBasedChat

MODES = ("ok", "bad_usage", "503", "non_json", "hang")
BAD_USAGE = ["lots", [], {"prompt_tokens": "3"}, {"prompt_tokens": -1}, {"completion_tokens": 1e300}, {"x": 1}]
BAD_RETRY_AFTER = ["-5", "NaN", "inf", "", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "1e400"]


def prompt_kind(user: str) -> str:
    return "label" if user.startswith("Test description:") or "label the sentiment" in user else "generate"


class FaultyLLMServer:
    def __init__(self, mode: str = "ok", share: float = 0.34):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode, self.share = mode, share
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._mft, self._aug = RuleBasedChat(), RuleBasedAugChat(malformed_every=0)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultyLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._release.set()  # hung handlers return
        self._httpd.shutdown()
        self._httpd.server_close()

    def selected(self, prompt: str) -> bool:
        return int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) / 16**8 < self.share

    def count(self, kind: str | None = None, **match) -> int:
        """Requests so far of ``kind`` (any if None) whose fields equal ``match``."""
        with self._lock:
            return sum(
                (kind is None or r["kind"] == kind) and all(r[k] == v for k, v in match.items()) for r in self.requests
            )

    def prompts(self, ok: bool | None = None, kind: str | None = None, since: int = 0) -> set[str]:
        """Distinct prompts of the requests from number ``since`` on, answered ``ok`` or not."""
        with self._lock:
            return {
                r["prompt"]
                for r in self.requests[since:]
                if (ok is None or r["ok"] == ok) and (kind is None or r["kind"] == kind)
            }

    def answer(self, messages: list[dict]) -> str:
        user = messages[-1]["content"]
        with self._lock:
            testaug = user.startswith("Test description:") or "new test cases for the description" in user
            return (self._aug if testaug else self._mft)._one(messages).text


def _handler(server: FaultyLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            messages = request["messages"]
            user, prompt = messages[-1]["content"], json.dumps(messages, sort_keys=True)
            mode, selected = server.mode, server.selected(prompt)
            ok = mode in ("ok", "bad_usage") or (mode in ("503", "non_json") and not selected)
            with server._lock:
                server.requests.append({"kind": prompt_kind(user), "selected": selected, "prompt": prompt, "ok": ok})
                n = len(server.requests)
            if mode == "hang":
                server._release.wait()
                return
            if mode == "503" and selected:
                retry_after = BAD_RETRY_AFTER[n % len(BAD_RETRY_AFTER)]
                self._send(503, b'{"error": "overloaded"}', "application/json", {"Retry-After": retry_after})
                return
            if mode == "non_json" and selected:
                self._send(200, b"<html><body>502 Bad Gateway</body></html>", "text/html")
                return
            body = {
                "choices": [
                    {"message": {"role": "assistant", "content": server.answer(messages)}, "finish_reason": "stop"}
                ],
                "usage": BAD_USAGE[n % len(BAD_USAGE)]
                if mode == "bad_usage"
                else {"prompt_tokens": 5, "completion_tokens": 7},
            }
            self._send(200, json.dumps(body).encode(), "application/json")

    return Handler


class SentimentChatServer:
    """An OpenAI-compatible chat server on 127.0.0.1 that answers checkray's zero-shot
    sentiment prompt like a model behind an endpoint: "positive" or "negative" for the
    prompt's ``Text:`` line, by the keyword rules of ``tests.fakes.models``."""

    def __init__(self):
        server = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                from tests.fakes.models import keyword_sentiment

                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                user = request["messages"][-1]["content"]
                text = user.rsplit("Text:", 1)[-1].strip()
                server.requests += 1
                answer = "positive" if keyword_sentiment([text])[0][1] > 0.5 else "negative"
                body = json.dumps(
                    {
                        "choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 30, "completion_tokens": 1},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> SentimentChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
