"""Scoring one embedding model on a COSTELLO suite: the texts to embed, distances,
thresholds, verdicts and the downstream-classifier ground truth. Shared by the
``costello`` job and the re-test of ``checkray repair`` (which imports this module, never
the job's, so the two jobs do not import each other)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from checkray.engine.costello.metrics import (
    DISTANCES,
    THRESHOLDS,
    classifier_shifts,
    distance,
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


def texts_to_embed(wide: pa.Table, train: pa.Table, *dictionaries: pa.Table) -> list[str]:
    """Every distinct text a model is scored on, once: the triples' sentences, the
    classifier training sentences and the threshold dictionary words (first-seen order)."""
    texts: dict[str, None] = {}
    for col in ("seed", "positive", "negative", "seed_pair", "positive_pair", "negative_pair"):
        for t in wide.column(col).to_pylist():
            if t is not None:
                texts.setdefault(t)
    for t in train.column("text").to_pylist():
        texts.setdefault(t)
    for dictionary in dictionaries:
        for t in dictionary.column("word").to_pylist():
            texts.setdefault(t)
    return list(texts)


def triple_vectors(lookup: Mapping[str, np.ndarray], wide: pa.Table, rows: np.ndarray) -> tuple[np.ndarray, ...]:
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


def model_nn(lookup: Mapping[str, np.ndarray], words: Sequence[str], backend: str = "auto") -> dict[str, np.ndarray]:
    """Nearest-neighbour distances over a dictionary whose words are in ``lookup`` (Ray actors)."""
    from checkray.actors.costello.neighbours import dictionary_nn

    return dictionary_nn({"model": np.stack([lookup[w] for w in words])}, DISTANCES, backend)["model"]


def score_model(
    model: str,
    lookup: Mapping[str, np.ndarray],
    wide: pa.Table,
    train: pa.Table,
    nn_by_metric: Mapping[str, np.ndarray],
    cc,
    seed: int,
) -> tuple[pa.Table, list[dict], list[float]]:
    """Violations table (every triple x distance x threshold), threshold rows, and the
    held-out accuracies of the model's downstream classifiers. ``nn_by_metric``: the
    dictionary's nearest-neighbour distances per distance (``model_nn``)."""
    n = wide.num_rows
    is_pair = np.array([p is not None for p in wide.column("seed_pair").to_pylist()], dtype=bool)
    d_pos = {m: np.zeros(n) for m in DISTANCES}
    d_neg = {m: np.zeros(n) for m in DISTANCES}
    for group in (np.flatnonzero(~is_pair), np.flatnonzero(is_pair)):
        if len(group) == 0:
            continue
        s, p, q = triple_vectors(lookup, wide, group)
        for m in DISTANCES:
            d_pos[m][group] = distance(s, p, m)
            d_neg[m][group] = distance(s, q, m)

    theta: dict[str, dict[str, float]] = {}
    thr_rows = []
    for m in DISTANCES:
        nn = np.asarray(nn_by_metric[m], dtype=np.float64)
        theta[m] = thresholds(nn)
        for name, value in theta[m].items():
            thr_rows.append(
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

    # Ground truth on single-sentence triples only: the classifiers read one sentence's
    # embedding, so a pair triple (CR4) has none unless a pair task is trained.
    gt_a = np.full(n, None, dtype=object)
    gt_b = np.full(n, None, dtype=object)
    p_gt = np.full(n, np.nan)
    p_lt = np.full(n, np.nan)
    accs: list[float] = []
    labels = train.column("label").to_pylist()
    single = np.flatnonzero(~is_pair)
    if len(single) and len(set(labels)) >= 2 and cc.classifiers:
        X = np.stack([lookup[t] for t in train.column("text").to_pylist()])
        models, accs = train_classifiers(X, labels, cc.classifiers, seed, cc.classifier_max_iter)
        s, p, q = triple_vectors(lookup, wide, single)
        gt = ground_truth(classifier_shifts(models, s, p), classifier_shifts(models, s, q), cc.alpha)
        gt_a[single], gt_b[single] = gt["gt_a"], gt["gt_b"]
        p_gt[single], p_lt[single] = gt["p_greater"], gt["p_less"]

    cols: dict[str, list] = {f.name: [] for f in VIOLATION_SCHEMA}
    triples, caps = wide.column("triple").to_pylist(), wide.column("capability").to_pylist()
    suites = wide.column("suite").to_pylist()
    for m in DISTANCES:
        for name in THRESHOLDS:
            t = theta[m][name]
            cols["model"] += [model] * n
            cols["triple"] += triples
            cols["suite"] += suites
            cols["capability"] += caps
            cols["distance"] += [m] * n
            cols["threshold"] += [name] * n
            cols["theta"] += [t] * n
            cols["d_pos"] += d_pos[m].tolist()
            cols["d_neg"] += d_neg[m].tolist()
            cols["verdict"] += violates(d_pos[m], d_neg[m], t).tolist()
            cols["gt_a"] += [None if g is None else bool(g) for g in gt_a]
            cols["gt_b"] += [None if g is None else bool(g) for g in gt_b]
            cols["p_greater"] += [None if np.isnan(x) else float(x) for x in p_gt]
            cols["p_less"] += [None if np.isnan(x) else float(x) for x in p_lt]
    return pa.table(cols, schema=VIOLATION_SCHEMA), thr_rows, accs


def violation_counts(
    violations: pa.Table, distance_: str, threshold: str, capabilities: Sequence[str]
) -> dict[str, dict[str, int]]:
    """Per CR (and ALL) under one verdict: violations, GT_A-buggy and GT_B-buggy triples."""
    rows = [r for r in violations.to_pylist() if r["distance"] == distance_ and r["threshold"] == threshold]
    out = {}
    for cr in list(capabilities) + ["ALL"]:
        sub = [r for r in rows if cr == "ALL" or r["capability"] == cr]
        out[cr] = {
            "triples": len(sub),
            "violations": sum(bool(r["verdict"]) for r in sub),
            "gt_a": sum(bool(r["gt_a"]) for r in sub),
            "gt_b": sum(bool(r["gt_b"]) for r in sub),
        }
    return out
