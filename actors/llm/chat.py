"""The one chat interface jobs call the LLM through: ``chat(messages_list, params)``
returns one ``Generation`` per conversation, in order.

Jobs take any such callable (tests pass a rule-based stand-in); without one they use the
configured ``llm:`` backend through ``chat_session``, which starts its Ray actors only on
the first call (a rerun whose LLM stages are all cached starts none) and kills them when
the session ends, so the actors' CPUs or GPUs are free for the job's later stages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from checkray.engine.llm import Generation, GenerationParams, LLMConfig


class GeneratorChat:
    """``chat(messages_list, params)`` over a started generator actor pool."""

    def __init__(self, generator):
        self.generator = generator
        self.name = generator.name

    def __call__(self, messages_list: Sequence, params: GenerationParams) -> list[Generation]:
        return self.generator.chat(messages_list, params)

    def close(self) -> None:
        self.generator.close()


def open_chat(llm: LLMConfig) -> GeneratorChat:
    """Start the ``llm:`` backend as Ray actors (vLLM on GPU clusters, else local/http).
    Ray must be up already (``run_job`` starts it)."""
    from checkray.actors.llm.actor import start_generator

    return GeneratorChat(start_generator(llm))


class LazyChat:
    """Starts the chat with ``start()`` on first use and frees its actors on ``close``."""

    def __init__(self, start: Callable[[], GeneratorChat], name: str = "llm"):
        self._start, self._chat = start, None
        self.name = name  # known before the start: stage fingerprints and provenance use it

    def __call__(self, messages_list: Sequence, params: GenerationParams) -> list[Generation]:
        if self._chat is None:
            self._chat = self._start()
        return self._chat(messages_list, params)

    def close(self) -> None:
        if self._chat is not None:
            self._chat.close()
            self._chat = None


def chat_key(given: Any, llm: LLMConfig) -> str:
    """What identifies the answering model in checkpointed answers (``StageChat``): the
    given chat's name, else the configured model and every ``llm:`` field that changes
    what it answers (backend, engine, server URL, context size ...), with a local model
    file or directory (a GGUF, a checkpoint) digested by content: a replaced model reruns."""
    from checkray.engine.stages import fingerprint, reference_digest

    if given is not None:
        return chat_name(given, llm)
    return f"{llm.model}@{fingerprint(llm, reference_digest(llm.model))}"


def chat_name(given: Any, llm: LLMConfig) -> str:
    """The generator's name as suites record it: the given chat's, else the configured model."""
    return llm.model if given is None else getattr(given, "name", "llm")


@contextmanager
def chat_session(given: Any, llm: LLMConfig) -> Iterator[Any]:
    """``given`` as it is (its owner closes it), else a ``LazyChat`` on the ``llm:``
    backend that is closed when the block ends, normally or by an error."""
    if given is not None:
        yield given
        return
    chat = LazyChat(lambda: open_chat(llm), name=chat_name(None, llm))
    try:
        yield chat
    finally:
        chat.close()
