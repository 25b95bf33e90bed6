"""Dimension reduction and clustering behind one small interface, CPU or GPU.

umap-learn and scikit-learn on CPU; cuML (same constructor arguments, same
``fit``/``transform``/``predict``) when Ray reports a GPU. Only the import differs, so
the CPU path that tests run is the GPU path's code too.

Large corpora: fit on a bounded random sample, then transform/predict every document
in chunks, so memory does not grow with the corpus (BERTopic's approach for big data).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from checkray.engine.config import ClustererConfig, ReducerConfig
from checkray.engine.runtime import Device


class Reducer(Protocol):
    def fit_transform(self, X: np.ndarray) -> np.ndarray: ...
    def transform(self, X: np.ndarray) -> np.ndarray: ...


class Clusterer(Protocol):
    def fit(self, X: np.ndarray) -> Clusterer: ...
    def predict(self, X: np.ndarray) -> np.ndarray: ...


def make_reducer(cfg: ReducerConfig, device: Device, seed: int, n_components: int | None = None) -> Reducer:
    if device == "gpu":
        from cuml.manifold import UMAP  # GPU image only (extra 'gpu-cluster')
    else:
        from umap import UMAP

        cache_numba_kernels()
    return UMAP(
        n_components=n_components or cfg.n_components,
        n_neighbors=cfg.n_neighbors,
        min_dist=cfg.min_dist,
        metric=cfg.metric,
        random_state=seed,
    )


_CACHED_PACKAGES = ("umap.", "pynndescent.")
_kernels_cached = False


def cache_numba_kernels() -> int:
    """Let numba keep umap-learn's and pynndescent's compiled kernels on disk.

    Both compile most of their numba kernels without ``cache=True``, so every new process
    compiled them again, which cost more than the layout itself (figures in docs/cache.md).
    ``Dispatcher.enable_caching`` is what ``@njit(cache=True)`` itself calls; the kernels
    land in numba's usual cache (``__pycache__`` beside the source, or ``NUMBA_CACHE_DIR``),
    keyed by numba on the source file and the CPU, so a changed package or machine
    recompiles. Kernels numba cannot cache (dynamic globals, functions passed as
    arguments) still compile. Returns how many kernels this call switched to caching.
    """
    global _kernels_cached
    if _kernels_cached:
        return 0
    import sys

    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    enabled = 0
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(_CACHED_PACKAGES):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, Dispatcher) and isinstance(value._cache, NullCache):
                value.enable_caching()
                enabled += 1
    _kernels_cached = True
    return enabled


def make_clusterer(cfg: ClustererConfig, device: Device, seed: int) -> Clusterer:
    if device == "gpu":
        from cuml.cluster import KMeans
    else:
        from sklearn.cluster import KMeans
    return KMeans(n_clusters=cfg.n_clusters, n_init=cfg.n_init, random_state=seed)


def fit_sample_index(n: int, fit_sample: int, seed: int) -> np.ndarray:
    """Sorted positions of the documents a model is fitted on (all, if few enough)."""
    if n <= fit_sample:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=fit_sample, replace=False))


def to_numpy(values) -> np.ndarray:
    """cuML returns device arrays; bring them to host memory."""
    if hasattr(values, "get"):
        values = values.get()
    elif hasattr(values, "to_numpy"):
        values = values.to_numpy()
    return np.asarray(values)
