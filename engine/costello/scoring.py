"""Scoring one embedding model on a COSTELLO suite (Algorithms 1 and 2, §5.1.3): the
texts to embed, distances, thresholds, verdicts and the downstream-classifier ground
truth, over vectors already computed (a text -> vector lookup) and Arrow tables. The
``costello`` job's ``validate`` stage and the re-test of ``checkray repair`` both score
with ``score_model``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from checkray.engine.costello.config import CostelloConfig
from checkray.engine.costello.distances import DISTANCES, distance
from checkray.engine.costello.metrics import (
    THRESHOLDS,
    classifier_shifts,
    ground_truth,
    thresholds,
    train_classifiers,
    violates,
)

VIOLATION_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("triple", pa.string()),
        ("suite", pa.string()),
        ("capability", pa.string()),
        ("distance", pa.string()),
        ("threshold", pa.string()),
        ("theta", pa.float64()),
        ("d_pos", pa.float64()),
        ("d_neg", pa.float64()),
        ("verdict", pa.bool_()),
        ("gt_a", pa.bool_()),
        ("gt_b", pa.bool_()),
        ("p_greater", pa.float64()),
        ("p_less", pa.float64()),
    ]
)
TRIPLE_TEXTS = ("seed", "positive", "negative", "seed_pair", "positive_pair", "negative_pair")

Lookup = Mapping[str, np.ndarray]  # text -> its embedding


def texts_to_embed(wide: pa.Table, train: pa.Table, *dictionaries: pa.Table) -> list[str]:
    """Every distinct text a model is scored on, once: the triples' sentences, the
    classifier training sentences and the threshold dictionary words (first-seen order)."""
    texts: dict[str, None] = {}
    for col in TRIPLE_TEXTS:
        texts.update((t, None) for t in wide.column(col).to_pylist() if t is not None)
    texts.update((t, None) for t in train.column("text").to_pylist())
    for dictionary in dictionaries:
        texts.update((t, None) for t in dictionary.column("word").to_pylist())
    return list(texts)


def triple_vectors(lookup: Lookup, wide: pa.Table, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """(seed, positive, negative) matrices for ``rows`` of the wide triple table; a pair
    (CR4) is the concatenation of its two sentence embeddings."""
    out = []
    for role in ("seed", "positive", "negative"):
        texts = wide.column(role).to_pylist()
        pairs = wide.column(f"{role}_pair").to_pylist()
        vecs = []
        for i in rows:
            v = lookup[texts[i]]
            vecs.append(np.concatenate([v, lookup[pairs[i]]]) if pairs[i] is not None else v)
        out.append(np.stack(vecs) if vecs else np.zeros((0, 1), np.float32))
    return tuple(out)


def pair_rows(wide: pa.Table) -> np.ndarray:
    """Which triples are pairs (CR4), as a boolean mask."""
    return np.array([p is not None for p in wide.column("seed_pair").to_pylist()], dtype=bool)


@dataclass(frozen=True)
class TripleDistances:
    """d(s, s+) and d(s, s-) of every triple, per distance."""

    d_pos: dict[str, np.ndarray]
    d_neg: dict[str, np.ndarray]


def triple_distances(lookup: Lookup, wide: pa.Table) -> TripleDistances:
    """Single-sentence and pair triples are stacked apart (a pair's vector is twice as long)."""
    n, is_pair = wide.num_rows, pair_rows(wide)
    d_pos = {m: np.zeros(n) for m in DISTANCES}
    d_neg = {m: np.zeros(n) for m in DISTANCES}
    for group in (np.flatnonzero(~is_pair), np.flatnonzero(is_pair)):
        if len(group) == 0:
            continue
        s, p, q = triple_vectors(lookup, wide, group)
        for m in DISTANCES:
            d_pos[m][group] = distance(s, p, m)
            d_neg[m][group] = distance(s, q, m)
    return TripleDistances(d_pos, d_neg)


def threshold_rows(model: str, nn_by_metric: Mapping[str, np.ndarray]) -> list[dict]:
    """The four thresholds (Algorithm 2) per distance from the dictionary's
    nearest-neighbour distances, with their mean, std, min and the dictionary size."""
    rows = []
    for m in DISTANCES:
        nn = np.asarray(nn_by_metric[m], dtype=np.float64)
        for name, value in thresholds(nn).items():
            rows.append(
                {
                    "model": model,
                    "distance": m,
                    "threshold": name,
                    "theta": value,
                    "nn_mean": float(nn.mean()),
                    "nn_std": float(nn.std()),
                    "nn_min": float(nn.min()),
                    "words": int(len(nn)),
                }
            )
    return rows


@dataclass(frozen=True)
class GroundTruth:
    """Per triple: GT_A / GT_B (None where unknown) and the Wilcoxon p-values (NaN where
    unknown); the held-out accuracy of each downstream classifier."""

    gt_a: list[bool | None]
    gt_b: list[bool | None]
    p_greater: list[float | None]
    p_less: list[float | None]
    accuracies: list[float]


def classifier_ground_truth(
    lookup: Lookup, wide: pa.Table, train: pa.Table, cc: CostelloConfig, seed: int
) -> GroundTruth:
    """The downstream classifiers trained on ``train``'s embeddings judge every
    single-sentence triple. A pair triple (CR4) has no ground truth: the classifiers read
    one sentence's embedding."""
    n = wide.num_rows
    gt_a = np.full(n, None, dtype=object)
    gt_b = np.full(n, None, dtype=object)
    p_gt = np.full(n, np.nan)
    p_lt = np.full(n, np.nan)
    accs: list[float] = []
    labels = train.column("label").to_pylist()
    single = np.flatnonzero(~pair_rows(wide))
    if len(single) and len(set(labels)) >= 2 and cc.classifiers:
        X = np.stack([lookup[t] for t in train.column("text").to_pylist()])
        models, accs = train_classifiers(X, labels, cc.classifiers, seed, cc.classifier_max_iter)
        s, p, q = triple_vectors(lookup, wide, single)
        gt = ground_truth(classifier_shifts(models, s, p), classifier_shifts(models, s, q), cc.alpha)
        gt_a[single], gt_b[single] = gt["gt_a"], gt["gt_b"]
        p_gt[single], p_lt[single] = gt["p_greater"], gt["p_less"]
    return GroundTruth(
        [None if g is None else bool(g) for g in gt_a],
        [None if g is None else bool(g) for g in gt_b],
        [None if np.isnan(x) else float(x) for x in p_gt],
        [None if np.isnan(x) else float(x) for x in p_lt],
        accs,
    )


def violations_table(
    model: str, wide: pa.Table, dist: TripleDistances, theta: Mapping[tuple[str, str], float], gt: GroundTruth
) -> pa.Table:
    """Every triple under every distance x threshold (``theta[(distance, threshold)]``)."""
    n = wide.num_rows
    triples, caps = wide.column("triple").to_pylist(), wide.column("capability").to_pylist()
    suites = wide.column("suite").to_pylist()
    cols: dict[str, list] = {f.name: [] for f in VIOLATION_SCHEMA}
    for m in DISTANCES:
        for name in THRESHOLDS:
            t = theta[(m, name)]
            cols["model"] += [model] * n
            cols["triple"] += triples
            cols["suite"] += suites
            cols["capability"] += caps
            cols["distance"] += [m] * n
            cols["threshold"] += [name] * n
            cols["theta"] += [t] * n
            cols["d_pos"] += dist.d_pos[m].tolist()
            cols["d_neg"] += dist.d_neg[m].tolist()
            cols["verdict"] += violates(dist.d_pos[m], dist.d_neg[m], t).tolist()
            cols["gt_a"] += gt.gt_a
            cols["gt_b"] += gt.gt_b
            cols["p_greater"] += gt.p_greater
            cols["p_less"] += gt.p_less
    return pa.table(cols, schema=VIOLATION_SCHEMA)


@dataclass(frozen=True)
class ModelScore:
    """One model's verdicts (``VIOLATION_SCHEMA``), threshold rows and classifier accuracies."""

    violations: pa.Table
    thresholds: list[dict]
    accuracies: list[float]


def score_model(
    model: str,
    lookup: Lookup,
    wide: pa.Table,
    train: pa.Table,
    nn_by_metric: Mapping[str, np.ndarray],
    cc: CostelloConfig,
    seed: int,
) -> ModelScore:
    """Every triple of ``wide`` x distance x threshold. ``lookup``: the model's embedding of
    every text (``texts_to_embed``); ``nn_by_metric``: its dictionary's nearest-neighbour
    distances per distance; ``cc``: the classifiers and the Wilcoxon alpha."""
    thr_rows = threshold_rows(model, nn_by_metric)
    theta = {(r["distance"], r["threshold"]): r["theta"] for r in thr_rows}
    gt = classifier_ground_truth(lookup, wide, train, cc, seed)
    violations = violations_table(model, wide, triple_distances(lookup, wide), theta, gt)
    return ModelScore(violations, thr_rows, gt.accuracies)
