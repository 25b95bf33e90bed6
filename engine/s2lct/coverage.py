"""Neuron boundary coverage (S²LCT Eq. 3–4) and minimal-token explanations (Eq. 5).

Neurons: every hidden unit of every transformer layer of a torch classifier. The paper
does not say what one output of a unit is for a sentence; two readings are computed from
one forward pass (``layer_summaries``):

* ``mean``: the unit's mean over the sentence's tokens (padding excluded), one value per
  sentence;
* ``token``: every token's value is an output (as DeepGauge counts each input position of
  a sequence model), so a sentence reaches a unit's maximum and minimum over its tokens.

The bounds ``low_n``/``high_n`` are the min/max over the model's training sentences; a
suite covers an upper (lower) corner neuron when some sentence drives it above ``high_n``
(below ``low_n``)::

    BoundCov(X) = (|UpperCorner(X)| + |LowerCorner(X)|) / (2 |N|)
    SActCov(X)  = |UpperCorner(X)| / |N|

Minimal-token explanation of a failure: tokens ordered by their occlusion attribution
(how much the wrong label's probability drops when the token is masked); starting from
the fully masked input, tokens are unmasked in that order until the model gives the
wrong label probability >= ``p_thresh`` (Eq. 5). The kept tokens are the explanation.

The coverage study of the job: ``coverage_sample`` draws the compared suites,
``model_coverage_rows`` measures one model (passed in, loaded by the job) on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.s2lct.config import CoverageConfig
from checkray.engine.s2lct.models import training_split


def layer_summaries(
    model, tokenizer, texts: Sequence[str], max_length: int = 64, batch_size: int = 32
) -> dict[str, np.ndarray]:
    """Per sentence and unit (layers x hidden): ``mean``, ``max`` and ``min`` over its tokens."""
    import torch

    device = next(model.parameters()).device
    parts: dict[str, list] = {"mean": [], "max": [], "min": []}
    for start in range(0, len(texts), batch_size):
        enc = tokenizer(
            list(texts[start : start + batch_size]),
            truncation=True,
            max_length=max_length,
            padding=True,
            return_tensors="pt",
        ).to(device)
        with torch.inference_mode():
            hidden = torch.cat(model(**enc, output_hidden_states=True).hidden_states[1:], dim=-1).float()
        mask = enc["attention_mask"].unsqueeze(-1)
        parts["mean"].append(((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).cpu().numpy())
        parts["max"].append(hidden.masked_fill(mask == 0, -torch.inf).amax(1).cpu().numpy())
        parts["min"].append(hidden.masked_fill(mask == 0, torch.inf).amin(1).cpu().numpy())
    return {k: np.concatenate(v) if v else np.zeros((0, 0), np.float32) for k, v in parts.items()}


NEURONS = ("mean", "token")


def neuron_values(summary: dict[str, np.ndarray], neurons: str) -> tuple[np.ndarray, np.ndarray]:
    """(values tested against the upper bound, values tested against the lower bound)."""
    if neurons == "mean":
        return summary["mean"], summary["mean"]
    if neurons == "token":
        return summary["max"], summary["min"]
    raise ValueError(f"unknown neuron reading '{neurons}' (have: {', '.join(NEURONS)})")


def neuron_bounds(
    train_activations: np.ndarray, train_lower: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) over the training sentences; ``train_lower`` (token minima) sets ``low`` when given."""
    lower = train_activations if train_lower is None else train_lower
    return lower.min(axis=0), train_activations.max(axis=0)


@dataclass(frozen=True)
class Coverage:
    cases: int
    upper: int
    lower: int
    neurons: int

    @property
    def bound_cov(self) -> float:
        return (self.upper + self.lower) / (2 * self.neurons)

    @property
    def sact_cov(self) -> float:
        return self.upper / self.neurons


def corner_coverage(
    activations: np.ndarray, low: np.ndarray, high: np.ndarray, lower_values: np.ndarray | None = None
) -> Coverage:
    """Eq. 3–4 on a suite's activations (``lower_values``, e.g. token minima, against ``low``)."""
    lower_values = activations if lower_values is None else lower_values
    upper = np.any(activations > high, axis=0) if len(activations) else np.zeros(len(high), bool)
    lower = np.any(lower_values < low, axis=0) if len(lower_values) else np.zeros(len(low), bool)
    return Coverage(len(activations), int(upper.sum()), int(lower.sum()), len(high))


def coverage_curve(
    activations: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    sizes: Sequence[int],
    lower_values: np.ndarray | None = None,
) -> list[Coverage]:
    """Coverage of the first ``size`` cases for each size (cases already in random order)."""
    lower_values = activations if lower_values is None else lower_values
    return [corner_coverage(activations[:n], low, high, lower_values[:n]) for n in sizes]


COVERAGE_SCHEMA = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("neurons", pa.string()),
        pa.field("suite", pa.string()),
        pa.field("cases", pa.int64()),
        pa.field("neurons_total", pa.int64()),
        pa.field("BoundCov", pa.float64()),
        pa.field("SActCov", pa.float64()),
    ]
)


def training_texts(spec: ModelSpec, default_corpus: str, n: int | None, seed: int) -> list[str]:
    """A random sample of ``n`` sentences (None: all) of the train split the model learned
    from (its ``meta.corpus``, else ``default_corpus``): the sentences that set the bounds."""
    train = training_split(spec, spec.meta.get("corpus", default_corpus))
    rng = np.random.default_rng(seed)
    return [train[i] for i in rng.choice(len(train), size=min(n or len(train), len(train)), replace=False)]


def template_texts(path: str, n: int, seed: int) -> list[str]:
    """About ``n`` (at least) texts of a CheckList template suite, drawn evenly over its templates."""
    from checkray.engine.templates.expand import expand, read_spec

    templates = read_spec(path)
    per = math.ceil(n / max(1, len(templates))) + 1
    return expand(templates, suite="checklist", nsamples=per, seed=seed).cases.column("text").to_pylist()


@dataclass(frozen=True)
class CoverageSample:
    """The suites compared, as equal-size random samples, and the sizes on the curve."""

    suites: dict[str, list[str]]  # "S2LCT", "CheckList" -> texts, in random order
    sizes: list[int]


def coverage_sample(suite_texts: Sequence[str], c: CoverageConfig, seed: int) -> CoverageSample:
    """Up to ``c.max_cases`` cases of the S²LCT suite and as many of the CheckList template
    suite (``c.templates``), and ``c.points`` sizes to measure the curve at."""
    rng = np.random.default_rng(seed)
    ours = list(suite_texts)
    theirs = template_texts(c.templates, min(c.max_cases, len(ours)), seed)
    m = min(c.max_cases, len(ours), len(theirs))
    ours = [ours[i] for i in rng.permutation(len(ours))[:m]]
    theirs = [theirs[i] for i in rng.permutation(len(theirs))[:m]]
    sizes = sorted({max(1, round(m * (i + 1) / c.points)) for i in range(c.points)})
    return CoverageSample({"S2LCT": ours, "CheckList": theirs}, sizes)


def model_coverage_rows(
    name: str,
    model,
    tokenizer,
    train_texts: Sequence[str],
    sample: CoverageSample,
    neurons: Sequence[str],
    max_length: int = 64,
) -> list[dict]:
    """coverage.parquet rows of one torch classifier (``model``/``tokenizer``, passed in):
    bounds from ``train_texts``, BoundCov and SActCov of each sampled suite at each size,
    per neuron reading."""
    train = layer_summaries(model, tokenizer, train_texts, max_length)
    suites = {suite: layer_summaries(model, tokenizer, texts, max_length) for suite, texts in sample.suites.items()}
    rows = []
    for reading in neurons:
        low, high = neuron_bounds(*neuron_values(train, reading))
        for suite, summary in suites.items():
            upper, lower = neuron_values(summary, reading)
            for cov in coverage_curve(upper, low, high, sample.sizes, lower):
                rows.append(
                    {
                        "model": name,
                        "neurons": reading,
                        "suite": suite,
                        "cases": cov.cases,
                        "neurons_total": cov.neurons,
                        "BoundCov": round(cov.bound_cov, 4),
                        "SActCov": round(cov.sact_cov, 4),
                    }
                )
    return rows


Predict = Callable[[list[str]], np.ndarray]  # texts -> (n, labels) probabilities


def masked_text(tokens: Sequence[str], keep: Sequence[bool], mask_token: str) -> str:
    return " ".join(t if k else mask_token for t, k in zip(tokens, keep) if k or mask_token).strip()


def occlusion_attributions(tokens: Sequence[str], predict: Predict, label: int, mask_token: str = "") -> np.ndarray:
    """Drop in P(label) when each token alone is masked (larger: the token supports it more)."""
    base = predict([" ".join(tokens)])[0, label]
    variants = [masked_text(tokens, [j != i for j in range(len(tokens))], mask_token) for i in range(len(tokens))]
    return base - predict(variants)[:, label]


@dataclass(frozen=True)
class Explanation:
    kept: list[int]  # token indices of the minimal template T (unmasked tokens)
    probability: float  # P(label) on T(x)
    reached: bool  # P(label) >= p_thresh was reached


def minimal_tokens(
    tokens: Sequence[str],
    predict: Predict,
    label: int,
    p_thresh: float = 0.5,
    mask_token: str = "",
    attributions: np.ndarray | None = None,
) -> Explanation:
    """Eq. 5: the fewest tokens, added in attribution order to a fully masked input, whose
    template keeps P(label) >= ``p_thresh``."""
    if attributions is None:
        attributions = occlusion_attributions(tokens, predict, label, mask_token)
    order = np.argsort(-np.asarray(attributions), kind="stable")
    keep = [False] * len(tokens)
    candidates = []
    for i in order:  # every prefix of the order, scored in one batch
        keep[int(i)] = True
        candidates.append(masked_text(tokens, keep, mask_token))
    probs = predict(candidates)[:, label]
    for size, p in enumerate(probs, start=1):
        if p >= p_thresh:
            return Explanation(sorted(int(i) for i in order[:size]), float(p), True)
    return Explanation(list(range(len(tokens))), float(probs[-1]) if len(probs) else 0.0, False)
