"""Second-level MFT topics for any number of kept texts, down to one."""

import numpy as np
import pytest

from checkray.jobs.mft.topics import mft_topic_clusters


def _points(n: int) -> np.ndarray:
    X = np.random.default_rng(n).normal(size=(n, 24))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 6, 7])
def test_few_texts_get_clusters_without_a_layout(n):
    # 6 texts with 5 layout components made UMAP's spectral start raise inside scipy
    clusters = mft_topic_clusters(_points(n), k=3, seed=0)
    assert len(clusters) == n
    assert len(set(clusters.tolist())) == min(3, n)


@pytest.mark.slow
def test_enough_texts_go_through_the_layout():
    X = np.concatenate([_points(20) + 4 * np.eye(24)[i] for i in range(3)])  # three far-apart groups
    clusters = mft_topic_clusters(X, k=3, seed=0)
    groups = [set(clusters[i * 20 : (i + 1) * 20].tolist()) for i in range(3)]
    assert all(len(g) == 1 for g in groups) and len(set().union(*groups)) == 3
