"""Family ``llm_zero_shot``: a sentiment classifier made by prompting an instruct LLM.

Each text is put into the prompt ``jobs/prompts/zero_shot_sentiment.txt`` (or the file
named by ``options.prompt_file``) with the label names, sent as one chat turn through
any ``checkray.engine.llm`` backend (greedy, a few tokens), and the answer is parsed:

- the label whose name (or one of its ``options.label_words``) occurs first in the
  answer, as a whole word and case-insensitively, is the prediction; it gets
  probability ``options.confidence`` (default 0.9) and the rest is shared equally by the
  other labels. One greedy answer carries no calibrated probability, so the value is
  a fixed, documented smoothing, not a measurement;
- an answer naming no label (or an empty / failed generation) is *unparseable*: it maps
  to the uniform distribution and is counted in ``self.unparsed`` (and the finish
  reasons in ``self.finish_reasons``) so a report can say how often the model failed
  to answer, instead of the failures passing as confident predictions.

Options: ``llm`` (an ``llm:`` config section: backend, model, base_url, ...; the spec's
``path`` is the model when given), ``max_tokens`` (8), ``confidence``, ``label_words``
({label: [words]}), ``prompt_file``, ``pair_separator`` (pairs are joined, see common).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from checkray.actors.models.common import single_texts
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.llm import Generation, GenerationParams, Generator, LLMConfig, choose_backend

DEFAULT_PROMPT = "zero_shot_sentiment.txt"


def read_prompt(path: str | None, default: str = DEFAULT_PROMPT, fields: tuple[str, ...] = ("text", "labels")) -> str:
    """The prompt file ``path`` (None: the packaged ``jobs/prompts/<default>``), which must
    contain every ``{field}``."""
    text = (
        Path(path).read_text(encoding="utf-8")
        if path
        else (resources.files("checkray.jobs") / "prompts" / default).read_text(encoding="utf-8")
    )
    missing = [f for f in fields if "{" + f + "}" not in text]
    if missing:
        wanted = " and ".join("{" + f + "}" for f in fields)
        raise InputError(f"prompt {path or default} must contain {wanted}")
    return text


def label_patterns(labels: Sequence[str], label_words: dict[str, list[str]]) -> list[tuple[str, re.Pattern]]:
    out = []
    for label in labels:
        words = [label, *label_words.get(label, [])]
        out.append((label, re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)))
    return out


def parse_label(answer: str, patterns: list[tuple[str, re.Pattern]]) -> str | None:
    """The label mentioned first in ``answer``, or None when it names none."""
    hits = [(m.start(), label) for label, pat in patterns if (m := pat.search(answer))]
    return min(hits)[1] if hits else None


class LLMZeroShotClassifier:
    """``ModelUnderTest`` over a ``Generator``."""

    def __init__(self, spec: ModelSpec, generator: Generator):
        self.spec, self.name, self.labels = spec, spec.name, list(spec.labels)
        if len(self.labels) < 2:
            raise InputError(f"model '{spec.name}': a zero-shot classifier needs at least two labels")
        opts = spec.options
        self.generator = generator
        self.template = read_prompt(opts.get("prompt_file"))
        self.confidence = float(opts.get("confidence", 0.9))
        if not 1.0 / len(self.labels) <= self.confidence <= 1.0:
            raise InputError(f"model '{spec.name}': options.confidence must be in [1/{len(self.labels)}, 1]")
        self.params = GenerationParams(temperature=0.0, max_tokens=int(opts.get("max_tokens", 8)))
        self.patterns = label_patterns(self.labels, dict(opts.get("label_words", {})))
        self.unparsed = 0
        self.finish_reasons: Counter[str] = Counter()

    def prompt(self, text: str) -> str:
        return self.template.replace("{labels}", ", ".join(self.labels)).replace("{text}", text)

    def _row(self, out: Generation) -> np.ndarray:
        self.finish_reasons[out.finish_reason] += 1
        label = parse_label(out.text, self.patterns) if out.ok else None
        k = len(self.labels)
        if label is None:
            self.unparsed += 1
            return np.full(k, 1.0 / k)
        row = np.full(k, (1.0 - self.confidence) / (k - 1))
        row[self.labels.index(label)] = self.confidence
        return row

    def predict_proba(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> np.ndarray:
        inputs = single_texts(self.spec, texts, pairs)
        if not inputs:
            return np.zeros((0, len(self.labels)))
        outs = self.generator.chat([[{"role": "user", "content": self.prompt(t)}] for t in inputs], self.params)
        return np.stack([self._row(o) for o in outs])


def generator_for(spec: ModelSpec) -> Generator:
    """The backend the spec asks for, in this process (the caller is already an actor)."""
    from checkray.actors.llm.actor import build_generator

    raw = dict(spec.options.get("llm", {}))
    if spec.path:
        raw["model"] = spec.path
    try:
        cfg = LLMConfig.model_validate(raw)
    except ValueError as exc:
        raise InputError(f"model '{spec.name}': options.llm: {str(exc).splitlines()[0]}") from None
    backend = cfg.backend
    if backend == "auto":
        import torch

        backend = choose_backend(cfg, {"GPU": float(torch.cuda.device_count())})
    return build_generator(cfg, backend)


def load_llm_zero_shot(spec: ModelSpec) -> LLMZeroShotClassifier:
    return LLMZeroShotClassifier(spec, generator_for(spec))
