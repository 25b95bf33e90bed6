"""Neuron boundary coverage (S²LCT Eq. 3–4) and minimal-token explanations (Eq. 5).

Neurons: every hidden unit of every transformer layer of a torch classifier, each
sentence's value being the unit's mean over its tokens (padding excluded). The bounds
``low_n``/``high_n`` are the min/max over the model's training sentences; a suite covers
an upper (lower) corner neuron when some sentence drives it above ``high_n`` (below
``low_n``)::

    BoundCov(X) = (|UpperCorner(X)| + |LowerCorner(X)|) / (2 |N|)
    SActCov(X)  = |UpperCorner(X)| / |N|

Minimal-token explanation of a failure: tokens ordered by their occlusion attribution
(how much the wrong label's probability drops when the token is masked); starting from
the fully masked input, tokens are unmasked in that order until the model gives the
wrong label probability >= ``p_thresh`` (Eq. 5). The kept tokens are the explanation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


def layer_activations(model, tokenizer, texts: Sequence[str], max_length: int = 64, batch_size: int = 32) -> np.ndarray:
    """(len(texts), layers x hidden) mean-pooled hidden states of a transformers model."""
    import torch

    device = next(model.parameters()).device
    out = []
    for start in range(0, len(texts), batch_size):
        enc = tokenizer(
            list(texts[start : start + batch_size]),
            truncation=True,
            max_length=max_length,
            padding=True,
            return_tensors="pt",
        ).to(device)
        with torch.inference_mode():
            hidden = model(**enc, output_hidden_states=True).hidden_states[1:]  # skip the embeddings
        mask = enc["attention_mask"].unsqueeze(-1).float()
        pooled = [(h.float() * mask).sum(1) / mask.sum(1).clamp(min=1.0) for h in hidden]
        out.append(torch.cat(pooled, dim=1).cpu().numpy())
    width = out[0].shape[1] if out else 0
    return np.concatenate(out) if out else np.zeros((0, width), np.float32)


def neuron_bounds(train_activations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return train_activations.min(axis=0), train_activations.max(axis=0)


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


def corner_coverage(activations: np.ndarray, low: np.ndarray, high: np.ndarray) -> Coverage:
    """Eq. 3–4 on a suite's activations."""
    upper = np.any(activations > high, axis=0) if len(activations) else np.zeros(len(high), bool)
    lower = np.any(activations < low, axis=0) if len(activations) else np.zeros(len(low), bool)
    return Coverage(len(activations), int(upper.sum()), int(lower.sum()), len(high))


def coverage_curve(activations: np.ndarray, low: np.ndarray, high: np.ndarray, sizes: Sequence[int]) -> list[Coverage]:
    """Coverage of the first ``size`` cases for each size (cases already in random order)."""
    return [corner_coverage(activations[:n], low, high) for n in sizes]


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
