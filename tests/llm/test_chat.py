"""The jobs' chat session: a given chat is used as it is, the configured one starts on
first use and is closed when the session ends, also after an error."""

from __future__ import annotations

import pytest

from checkray.actors.llm import chat as chat_mod
from checkray.engine.llm import GenerationParams, LLMConfig, make_generation


class _Pool:
    name = "fake-pool"

    def __init__(self):
        self.closed = False

    def chat(self, messages_list, params):
        return [make_generation("ok", "stop") for _ in messages_list]

    def close(self):
        self.closed = True


@pytest.fixture
def started(monkeypatch):
    pools = []

    def fake_open(llm):
        pools.append(_Pool())
        return chat_mod.GeneratorChat(pools[-1])

    monkeypatch.setattr(chat_mod, "open_chat", fake_open)
    return pools


def test_configured_chat_starts_on_first_call_and_closes(started):
    llm = LLMConfig(model="some-model")
    with chat_mod.chat_session(None, llm) as chat:
        assert chat.name == "some-model" and not started  # nothing started before a call
        assert [g.text for g in chat([[{"role": "user", "content": "hi"}]] * 2, GenerationParams())] == ["ok", "ok"]
    assert len(started) == 1 and started[0].closed


def test_session_closes_after_an_error(started):
    with pytest.raises(RuntimeError), chat_mod.chat_session(None, LLMConfig()) as chat:
        chat([[{"role": "user", "content": "hi"}]], GenerationParams())
        raise RuntimeError("a stage failed")
    assert started[0].closed


def test_given_chat_is_neither_wrapped_nor_closed(started):
    given = _Pool()
    with chat_mod.chat_session(given, LLMConfig()) as chat:
        assert chat is given
    assert not given.closed and not started
    assert chat_mod.chat_name(given, LLMConfig()) == "fake-pool"
    assert chat_mod.chat_name(None, LLMConfig(model="m")) == "m"


def test_chat_key_follows_the_content_of_a_local_model_file(tmp_path):
    from checkray.actors.llm.chat import chat_key
    from checkray.engine.llm import LLMConfig

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"weights v1")
    llm = LLMConfig(model=str(gguf))
    first = chat_key(None, llm)
    assert chat_key(None, llm) == first
    gguf.write_bytes(b"weights v2")  # same path, new model
    assert chat_key(None, llm) != first
