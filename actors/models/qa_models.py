"""Question-answering models under test (families ``qa_callable``, ``qa_llm``, ``qa_hf``).

Each meets ``AnsweringModel``: ``answer(contexts, questions)`` returns one answer string per
question (None when the model gave none) and ``labels`` is empty (no label map). The
benchmark judges the answers as CheckList judges its SQuAD suite (engine/benchmark/qa.py).

* ``qa_callable``: ``path`` is ``module:function`` taking ``(contexts, questions)`` and
  returning a list of answers (needs ``--trust-code``, as every callable model).
* ``qa_llm``: an instruct LLM answering from the context, through any
  ``checkray.engine.llm`` backend (the packaged GGUF on CPU, vLLM on a GPU, an
  OpenAI-compatible server): prompt ``jobs/prompts/qa_extractive.txt`` (or
  ``options.prompt_file``, with ``{context}`` and ``{question}``), greedy,
  ``options.max_tokens`` (16). The answer is its first line without an "Answer:" prefix,
  quotes or a final full stop; an empty answer counts in ``self.unparsed``.
* ``qa_hf``: a Hugging Face extractive QA model directory (``AutoModelForQuestionAnswering``
  weights and a fast tokenizer): the highest-scoring span of the context.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from checkray.actors.models.callable_model import import_callable
from checkray.actors.models.common import require_path
from checkray.actors.models.llm_zero_shot import read_prompt
from checkray.engine.benchmark.qa import checked_answers
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.llm import Generation, GenerationParams, Generator
from checkray.engine.trust import require_code_trust

DEFAULT_QA_PROMPT = "qa_extractive.txt"
_PREFIX = re.compile(r"^\s*(?:the\s+)?answer\s*(?:is)?\s*[:\-]\s*", re.IGNORECASE)
_QUOTES = "\"'`“”‘’"


def clean_answer(text: str) -> str:
    """An LLM's answer as a phrase: its first non-empty line, without "Answer:", quotes or a final stop."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line).strip()
    for _ in range(2):  # "“Ann”." and "“Ann.”" alike; "D.C." keeps its stops
        line = line.strip().strip(_QUOTES).strip()
        if line.endswith(".") and "." not in line[:-1]:
            line = line[:-1]
    return line.strip()


class QACallableModel:
    """``AnsweringModel`` over a Python function."""

    def __init__(self, name: str, fn: Callable):
        self.name, self.labels, self.fn = name, [], fn

    def answer(self, contexts: Sequence[str], questions: Sequence[str]) -> list[str | None]:
        return checked_answers(self.fn(list(contexts), list(questions)), len(contexts))


class LLMAnswerer:
    """``AnsweringModel`` over a ``Generator``: one greedy chat turn per question."""

    def __init__(self, spec: ModelSpec, generator: Generator):
        self.spec, self.name, self.labels = spec, spec.name, []
        self.generator = generator
        self.template = read_prompt(spec.options.get("prompt_file"), DEFAULT_QA_PROMPT, ("context", "question"))
        self.params = GenerationParams(temperature=0.0, max_tokens=int(spec.options.get("max_tokens", 16)))
        self.unparsed = 0
        self.finish_reasons: Counter[str] = Counter()

    def prompt(self, context: str, question: str) -> str:
        return self.template.replace("{context}", context).replace("{question}", question)

    def _answer(self, out: Generation) -> str | None:
        self.finish_reasons[out.finish_reason] += 1
        text = clean_answer(out.text) if out.ok else ""
        if not text:
            self.unparsed += 1
            return None
        return text

    def answer(self, contexts: Sequence[str], questions: Sequence[str]) -> list[str | None]:
        if not contexts:
            return []
        turns = [[{"role": "user", "content": self.prompt(c, q)}] for c, q in zip(contexts, questions)]
        return [self._answer(o) for o in self.generator.chat(turns, self.params)]


class HFAnswerer:
    """``AnsweringModel`` over an extractive QA network (``AutoModelForQuestionAnswering``):
    the answer is the context span whose start + end logits are highest, start <= end,
    at most ``options.max_answer_tokens`` (30) tokens. (transformers 5 dropped its
    ``question-answering`` pipeline; this is its span search, batched.)"""

    def __init__(self, spec: ModelSpec, model, tokenizer, device: str):
        self.name, self.labels = spec.name, []
        self.model, self.tokenizer, self.device = model.eval().to(device), tokenizer, device
        self.batch_size = int(spec.options.get("batch_size", 16))
        self.max_answer_tokens = int(spec.options.get("max_answer_tokens", 30))
        self.max_length = int(spec.options.get("max_length", 384))

    def answer(self, contexts: Sequence[str], questions: Sequence[str]) -> list[str | None]:
        out: list[str | None] = []
        for lo in range(0, len(contexts), self.batch_size):
            out += self._batch(list(contexts[lo : lo + self.batch_size]), list(questions[lo : lo + self.batch_size]))
        return out

    def _batch(self, contexts: list[str], questions: list[str]) -> list[str | None]:
        import torch

        enc = self.tokenizer(
            questions,
            contexts,
            truncation="only_second",
            max_length=self.max_length,
            padding=True,
            return_offsets_mapping=True,
            return_tensors="pt",
        )
        offsets = enc.pop("offset_mapping")
        with torch.inference_mode():
            logits = self.model(**{k: v.to(self.device) for k, v in enc.items()})
        starts, ends = logits.start_logits.float().cpu(), logits.end_logits.float().cpu()
        answers = []
        for i, context in enumerate(contexts):
            in_context = torch.tensor([sid == 1 for sid in enc.sequence_ids(i)])
            span = best_span(starts[i], ends[i], in_context, self.max_answer_tokens)
            if span is None:
                answers.append(None)
                continue
            a, b = span
            answers.append(context[int(offsets[i, a, 0]) : int(offsets[i, b, 1])].strip() or None)
        return answers


def best_span(start_logits, end_logits, allowed, max_tokens: int) -> tuple[int, int] | None:
    """(start, end) token indices maximising start + end logits over allowed tokens, with
    start <= end < start + max_tokens; None when no token is allowed."""
    import torch

    if not bool(allowed.any()):
        return None
    neg = torch.finfo(start_logits.dtype).min / 4
    s = torch.where(allowed, start_logits, torch.full_like(start_logits, neg))
    e = torch.where(allowed, end_logits, torch.full_like(end_logits, neg))
    scores = s[:, None] + e[None, :]
    n = len(s)
    idx = torch.arange(n)
    valid = (idx[None, :] >= idx[:, None]) & (idx[None, :] < idx[:, None] + max_tokens)
    scores = torch.where(valid, scores, torch.full_like(scores, 2 * neg))
    flat = int(torch.argmax(scores))
    return flat // n, flat % n


def load_qa_callable(spec: ModelSpec) -> QACallableModel:
    require_code_trust(f"model '{spec.name}'", f"family qa_callable imports the module of '{spec.path}'")
    return QACallableModel(spec.name, import_callable(spec.path or "", f"model '{spec.name}'"))


def load_qa_llm(spec: ModelSpec) -> LLMAnswerer:
    from checkray.actors.models.llm_zero_shot import generator_for

    return LLMAnswerer(spec, generator_for(spec))


def load_qa_hf(spec: ModelSpec) -> HFAnswerer:
    path = require_path(spec, "model directory", must_be_dir=True)
    import torch
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"  # the GPU when the host was given one
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForQuestionAnswering.from_pretrained(str(path))
    except (OSError, ValueError) as exc:
        raise InputError(f"model '{spec.name}' (family qa_hf): {str(exc).splitlines()[0]}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise InputError(f"model '{spec.name}' (family qa_hf): needs a fast tokenizer (character offsets of spans)")
    return HFAnswerer(spec, model, tokenizer, device)
