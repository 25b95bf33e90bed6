"""Per-prompt checkpoints of a stage's LLM answers: a transient failure is never committed.

A stage calls the LLM through ``StageChat(chat, ctx, model)``, which has the same
``chat(messages_list, params)`` interface the engine's steps take. Every answer is keyed
by a digest of (model, sampling parameters with the seed, messages):

* answers that are not errors (``stop``, ``length``, ``empty``) are committed as stage
  parts (``ctx.write_part``), at most ``part_size`` per part or every ``FLUSH_S`` seconds,
  each part keyed by the digest of the prompts in it: a run with thousands of prompts
  writes tens of files, and a crash or SIGKILL loses at most one part's worth;
* errors are handed to the caller (who treats them as unparseable) and never written.

A rerun of the stage (after a crash, or because too many prompts failed) reads the parts
back and asks the LLM only for prompts without a committed answer: exactly the failed and
the unfinished ones, however the caller batches them. Since the key is all an answer
depends on, answers committed by an older version of the stage's code are reused too
(an edit of a report function must not re-ask an hour of prompts): what is reused is
committed again under the current code, and the old parts are pruned when the stage
completes. ``close()`` (or leaving the
``with`` block) commits what is buffered and reports the failed prompts to
``ctx.item_errors``: above ``runtime.max_error_share`` the stage is recorded incomplete,
this run goes on with what it has, and the next run retries them.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pyarrow as pa

from checkray.engine.llm import Generation, GenerationParams, LLMError
from checkray.engine.stages import StageContext

FLUSH_S = 60.0  # commit buffered answers at least this often while a stage runs
PART_SCHEMA = pa.schema(
    [
        ("prompt", pa.string()),  # prompt_key
        ("text", pa.string()),
        ("finish_reason", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
    ]
)

# (label, total) -> a context manager yielding advance(n): how a job shows progress
Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


def prompt_key(model: str, params: GenerationParams, messages: Sequence[Any]) -> str:
    """What identifies an answer: the model, every sampling parameter and the messages."""
    blob = json.dumps(
        [model, params.model_dump(mode="json"), [dict(m) for m in messages]], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


class StageChat:
    """``chat`` with its answers checkpointed in ``ctx``'s parts (see the module docstring)."""

    def __init__(
        self,
        chat: Callable[[Sequence, GenerationParams], list[Generation]],
        ctx: StageContext,
        model: str,
        part_size: int = 64,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.chat, self.ctx, self.model, self.part_size = chat, ctx, model, part_size
        self.progress, self.clock = progress, clock
        self.name = getattr(chat, "name", model)
        self.asked: set[str] = set()  # every prompt key asked in this stage
        self.failed: dict[str, str] = {}  # prompt key -> its error, while it has no answer
        self.sent = 0  # prompts sent to the LLM (the rest came from parts)
        self._answers: dict[str, Generation] | None = None  # committed answers, read on first use
        self._part_of: dict[str, str] = {}  # prompt key -> the part its answer was read from
        self._kept: set[str] = set()  # parts this run reused or wrote
        self._carried: set[str] = set()  # answers read from older code's parts, to commit again
        self._pending: list[tuple[str, Generation]] = []
        self._pending_since = 0.0
        self._advance: Callable[[int], None] | None = None

    # --- the chat interface ---------------------------------------------------------

    def __call__(self, messages_list: Sequence[Sequence[Any]], params: GenerationParams) -> list[Generation]:
        answers = self._committed()
        keys = [prompt_key(self.model, params, m) for m in messages_list]
        self.asked.update(keys)
        out: dict[str, Generation] = {}
        todo: dict[str, Sequence[Any]] = {}  # unique prompts without an answer, in order
        for key, messages in zip(keys, messages_list):
            if key in answers:
                out[key] = answers[key]
                if key in self._carried:  # an older code's part: commit it under this code
                    self._carried.discard(key)
                    self._commit(key, answers[key])
                elif key in self._part_of:
                    self._kept.add(self._part_of[key])
            else:
                todo.setdefault(key, messages)
        self._tick(sum(k in out for k in keys))
        pending = list(todo.items())
        for start in range(0, len(pending), self.part_size):
            group = pending[start : start + self.part_size]
            got = self.chat([m for _, m in group], params)
            if len(got) != len(group):
                raise LLMError(f"LLM backend {self.name}: {len(got)} answers for {len(group)} prompts")
            self.sent += len(group)
            for (key, _), answer in zip(group, got):
                out[key] = answer
                if answer.finish_reason == "error":
                    self.failed[key] = answer.error or "error"
                    continue
                self.failed.pop(key, None)
                answers[key] = answer
                self._commit(key, answer)
            self._flush(force=False)
            done = {k for k, _ in group}
            self._tick(sum(k in done for k in keys))
        return [out[k] for k in keys]

    @contextmanager
    def step(self, label: str, total: int) -> Iterator[None]:
        """Show progress of the prompts asked inside the block (``total`` expected)."""
        if self.progress is None or total <= 0:
            yield
            return
        with self.progress(label, total) as advance:
            self._advance = advance
            try:
                yield
            finally:
                self._advance = None

    def close(self) -> None:
        """Commit what is buffered and report the failed prompts to the stage."""
        self._flush(force=True)
        self.ctx.item_errors(len(self.failed), len(self.asked), "LLM prompts")
        # Parts read (peeked) but not reused hold answers to prompts this run no longer
        # asks (an older config): the runner prunes them once the stage is complete.
        self.ctx.parts_used.update(self._kept)

    def __enter__(self) -> StageChat:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._flush(force=True)  # the stage failed: keep what was answered for the rerun

    # --- parts --------------------------------------------------------------------------

    def _committed(self) -> dict[str, Generation]:
        if self._answers is None:
            self._answers = {}
            for part in self.ctx.part_keys("llm-"):
                for key, answer in _answers_in(self.ctx.peek_part(part)):
                    self._answers[key] = answer
                    self._part_of[key] = part
            for stem in self.ctx.other_code_parts("llm-"):
                for key, answer in _answers_in(self.ctx.peek_part_file(stem)):
                    if key not in self._answers:
                        self._answers[key] = answer
                        self._carried.add(key)
        return self._answers

    def _commit(self, key: str, answer: Generation) -> None:
        if not self._pending:
            self._pending_since = self.clock()
        self._pending.append((key, answer))

    def _flush(self, force: bool) -> None:
        if not self._pending:
            return
        if not force and len(self._pending) < self.part_size and self.clock() - self._pending_since < FLUSH_S:
            return
        keys = [k for k, _ in self._pending]
        part = "llm-" + hashlib.sha256("\n".join(keys).encode()).hexdigest()[:32]
        table = pa.Table.from_pylist(
            [
                {
                    "prompt": k,
                    "text": g.text,
                    "finish_reason": g.finish_reason,
                    "prompt_tokens": g.prompt_tokens,
                    "completion_tokens": g.completion_tokens,
                }
                for k, g in self._pending
            ],
            schema=PART_SCHEMA,
        )
        self.ctx.write_part(part, table)
        self._kept.add(part)
        for k in keys:
            self._part_of[k] = part
        self._pending = []

    def _tick(self, n: int) -> None:
        if self._advance is not None and n:
            self._advance(n)


def _answers_in(table: pa.Table | None) -> Iterator[tuple[str, Generation]]:
    """(prompt key, answer) of a part; nothing from debris or a layout this code does not read."""
    if table is None or table.schema.names != PART_SCHEMA.names:
        return
    for row in table.to_pylist():
        yield (
            row["prompt"],
            Generation(row["text"], row["finish_reason"], row["prompt_tokens"], row["completion_tokens"]),
        )
