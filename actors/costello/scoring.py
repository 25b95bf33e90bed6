"""COSTELLO's validate stage on Ray CPU tasks: one task per embedding model.

Scoring a model (``checkray.engine.costello.scoring.score_model``) trains its downstream
classifiers and runs two Wilcoxon tests per triple, single-threaded work of several
seconds per model. The models are independent, so with Ray up each one is a task of one
CPU and they run side by side; the triples and the classifier sentences go to the object
store once. Without Ray they run here, one after another. Either way each model's score
is the same function on the same inputs, so the results do not depend on the path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from checkray.engine.config import TASK_TIMEOUT_S


@dataclass(frozen=True)
class ModelInputs:
    """What scoring one model needs of its own: its embedding of every text (rows in the
    order of the shared ``texts``) and its dictionary's nearest-neighbour distances."""

    name: str
    embeddings: np.ndarray
    nn_by_metric: Mapping[str, np.ndarray]


def score_one(model: ModelInputs, texts: Sequence[str], wide: pa.Table, train: pa.Table, cc, seed: int):
    from checkray.engine.costello.scoring import score_model

    lookup = dict(zip(texts, model.embeddings))
    return score_model(model.name, lookup, wide, train, model.nn_by_metric, cc, seed)


def score_models(
    models: Sequence[ModelInputs],
    texts: Sequence[str],
    wide: pa.Table,
    train: pa.Table,
    cc,
    seed: int,
    timeout_s: float = TASK_TIMEOUT_S,
) -> list:
    """Each model's ``ModelScore``, in the order of ``models``."""
    import ray

    if not ray.is_initialized() or len(models) < 2:
        return [score_one(m, texts, wide, train, cc, seed) for m in models]
    task = ray.remote(num_cpus=1, max_retries=0)(score_one)
    shared = [ray.put(x) for x in (list(texts), wide, train)]
    refs = [task.remote(m, *shared, cc, seed) for m in models]
    return ray.get(refs, timeout=timeout_s)
