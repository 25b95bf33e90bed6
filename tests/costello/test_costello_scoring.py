"""COSTELLO's validate stage scores each model as a Ray task: the same scores as in-process."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from checkray.actors.costello.scoring import ModelInputs, score_models
from checkray.engine.costello.config import CostelloConfig
from checkray.engine.costello.scoring import texts_to_embed


def _wide(n: int) -> pa.Table:
    rows = []
    for i in range(n):
        rows.append(
            {
                "triple": f"t{i}",
                "capability": "CR1",
                "suite": "costello",
                "seed": f"seed sentence {i} is good .",
                "positive": f"seed sentence {i} is fine .",
                "negative": f"seed sentence {i} is bad .",
                "seed_pair": None,
                "positive_pair": None,
                "negative_pair": None,
                "label": "positive" if i % 2 else "negative",
            }
        )
    return pa.Table.from_pylist(rows)


def _inputs(seed: int):
    wide = _wide(12)
    train = pa.table(
        {
            "id": [f"c{i}" for i in range(60)],
            "text": [f"corpus sentence {i}" for i in range(60)],
            "label": ["positive" if i % 2 else "negative" for i in range(60)],
        }
    )
    texts = texts_to_embed(wide, train)
    rng = np.random.default_rng(seed)
    models = []
    for name in ("a", "b", "c"):
        matrix = rng.normal(size=(len(texts), 8)).astype(np.float32)
        # the label is learnable: a positive training sentence leans on the first axis
        for i, label in enumerate(train.column("label").to_pylist()):
            matrix[texts.index(f"corpus sentence {i}"), 0] += 2.0 if label == "positive" else -2.0
        nn = {metric: np.abs(rng.normal(size=40)) for metric in ("l1", "l2", "cos")}
        models.append(ModelInputs(name, matrix, nn))
    return models, texts, wide, train


def test_scores_from_ray_tasks_equal_the_in_process_scores(ray_session):
    models, texts, wide, train = _inputs(0)
    cc = CostelloConfig(classifiers=5, classifier_train=60)
    in_process = [score_models([m], texts, wide, train, cc, 0)[0] for m in models]
    on_ray = score_models(models, texts, wide, train, cc, 0)
    assert len(on_ray) == len(models)
    for mine, theirs in zip(on_ray, in_process):
        assert mine.violations.equals(theirs.violations)
        assert mine.accuracies == theirs.accuracies
        assert mine.thresholds == theirs.thresholds
    # each model kept its own name and its own scores
    names = [s.violations.column("model").unique().to_pylist() for s in on_ray]
    assert names == [["a"], ["b"], ["c"]]
    assert [r["theta"] for r in on_ray[0].thresholds] != [r["theta"] for r in on_ray[1].thresholds]
