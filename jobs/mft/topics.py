"""Second-level clustering of the kept MFT texts into MFT topics (Li et al., §2.4.3), with
the topics method's reducer, clusterer and c-TF-IDF. It stays in jobs/, which wires the two
methods: inside a layer the method packages (engine/mft, engine/topics) import each other
not at all."""

from __future__ import annotations

import numpy as np

LAYOUT_COMPONENTS = 5
NAME_WORDS = 4  # c-TF-IDF keywords in an MFT topic's name


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


def mft_topic_names(texts: list[str], X: np.ndarray, k: int, seed: int) -> list[str]:
    """Each text's MFT topic: its cluster of ``X`` (the texts' embeddings), named by the
    cluster's c-TF-IDF keywords (``0_film_story_...``)."""
    from checkray.engine.topics.ctfidf import fit_class_tfidf, topic_name

    clusters = mft_topic_clusters(X, k, seed)
    model = fit_class_tfidf(texts, clusters, min_df=1)
    names = {
        int(c): topic_name(int(c), [w for w, _ in kw], NAME_WORDS)
        for c, kw in zip(model.classes, model.keywords(NAME_WORDS))
    }
    return [names[int(c)] for c in clusters]
