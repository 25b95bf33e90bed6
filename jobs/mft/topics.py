"""Second-level clustering of the kept MFT texts into MFT topics (Li et al., §2.4.3), with
the topics method's reducer and clusterer (so it lives with the job that wires the two)."""

from __future__ import annotations

import numpy as np

LAYOUT_COMPONENTS = 5


def mft_topic_clusters(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Cluster ids (0..k-1) for the rows of the embeddings ``X``, with ``k`` clamped to the rows.

    Like the first level, a UMAP layout then k-means; the layout is skipped when the texts
    are too few for it: UMAP's spectral initialisation needs more points than components
    + 1 (with 6 texts and 5 components it raises inside scipy), and a layout of a handful
    of points says nothing a direct k-means on the embeddings would not.
    """
    from checkray.engine.config import ClustererConfig, ReducerConfig
    from checkray.engine.topics.reduce import make_clusterer, make_reducer, to_numpy

    n = len(X)
    if n == 0:
        return np.zeros(0, dtype=int)
    k = max(1, min(k, n))
    if n > max(k, LAYOUT_COMPONENTS) + 2:
        reducer = make_reducer(
            ReducerConfig(n_neighbors=max(2, min(15, n - 1)), n_components=LAYOUT_COMPONENTS), "cpu", seed
        )
        X = to_numpy(reducer.fit_transform(X))
    return to_numpy(make_clusterer(ClustererConfig(n_clusters=k), "cpu", seed).fit(X).predict(X))
